/* dist/rendezvous.c — see rendezvous.h. Plain POSIX sockets: rank 0 polls the
 * listener and every connection that has not finished its hello, so a slow or
 * silent client never holds up the others; clients use non-blocking connects
 * bounded by the deadline. Owns the sockets of each call. */
#include "dist/rendezvous.h"

#include "util/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { KIND_HELLO = 1, KIND_REPLY = 2 };

struct ork_rdzv_listener {
    int fd;
    int port;
    char where[300]; /* "addr:port" for messages */
};

/* ---- little-endian fields ------------------------------------------------ */

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t get32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

void ork_rdzv_pack_hello(const ork_rdzv_opts *o, uint8_t out[ORK_RDZV_HELLO_BYTES]) {
    memset(out, 0, ORK_RDZV_HELLO_BYTES);
    put32(out, ORK_RDZV_MAGIC);
    put16(out + 4, ORK_RDZV_VERSION);
    put16(out + 6, KIND_HELLO);
    put32(out + 8, (uint32_t)o->world);
    put32(out + 12, (uint32_t)o->rank);
    put64(out + 16, o->hash);
}

static void pack_reply(int world, ork_rdzv_code st, uint64_t hash, uint32_t detail, const uint8_t *id,
                       uint8_t out[ORK_RDZV_REPLY_BYTES]) {
    memset(out, 0, ORK_RDZV_REPLY_BYTES);
    put32(out, ORK_RDZV_MAGIC);
    put16(out + 4, ORK_RDZV_VERSION);
    put16(out + 6, KIND_REPLY);
    put32(out + 8, (uint32_t)world);
    put32(out + 12, (uint32_t)st);
    put64(out + 16, hash);
    put32(out + 24, detail);
    if (st == ORK_RDZV_OK && id) memcpy(out + 32, id, ORK_RDZV_ID_BYTES);
}

/* ---- time and I/O with a deadline ----------------------------------------- */

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int left_ms(double deadline) {
    double l = deadline - now_ms();
    return l <= 0 ? 0 : l > 1e9 ? 1000000000 : (int)l + 1;
}

static void set_nonblock(int fd, int on) {
    int fl = fcntl(fd, F_GETFL, 0);
    if (fl >= 0) fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

/* Write all n bytes before the deadline: 0, or -1 with errno (ETIMEDOUT). */
static int write_all(int fd, const uint8_t *p, size_t n, double deadline) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) { p += w; n -= (size_t)w; continue; }
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
        struct pollfd pf = {fd, POLLOUT, 0};
        int ms = left_ms(deadline);
        if (ms == 0) { errno = ETIMEDOUT; return -1; }
        if (poll(&pf, 1, ms) < 0 && errno != EINTR) return -1;
    }
    return 0;
}

/* Read exactly n bytes before the deadline: n, 0..n-1 on EOF, or -1 with errno. */
static ssize_t read_all(int fd, uint8_t *p, size_t n, double deadline) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, p + got, n - got, MSG_DONTWAIT);
        if (r > 0) { got += (size_t)r; continue; }
        if (r == 0) return (ssize_t)got;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
        struct pollfd pf = {fd, POLLIN, 0};
        int ms = left_ms(deadline);
        if (ms == 0) { errno = ETIMEDOUT; return -1; }
        if (poll(&pf, 1, ms) < 0 && errno != EINTR) return -1;
    }
    return (ssize_t)got;
}

/* "[::1]" -> "::1" */
static void strip_brackets(const char *addr, char *buf, size_t n) {
    size_t l = strlen(addr);
    if (l >= 2 && addr[0] == '[' && addr[l - 1] == ']') snprintf(buf, n, "%.*s", (int)(l - 2), addr + 1);
    else snprintf(buf, n, "%s", addr);
}

static int is_loopback(const struct sockaddr *sa) {
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a);
    }
    return 0;
}

/* ---- rank 0 --------------------------------------------------------------- */

ork_status ork_rdzv_listen(const char *addr, int port, ork_rdzv_listener **out) {
    *out = NULL;
    if (port < 0 || port > 65535) return ORK_FAIL(ORK_E_INVALID, "rendezvous: port %d out of range", port);
    char host[256], ps[16];
    strip_brackets(addr && *addr ? addr : "127.0.0.1", host, sizeof host);
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    int ge = getaddrinfo(host, ps, &hints, &res);
    if (ge != 0)
        return ORK_FAIL(ORK_E_CONFIG, "rendezvous: MASTER_ADDR '%s' does not resolve: %s", host, gai_strerror(ge));
    struct sockaddr_storage ss;
    socklen_t sl = (socklen_t)res->ai_addrlen;
    memcpy(&ss, res->ai_addr, res->ai_addrlen);
    int fam = res->ai_family;
    freeaddrinfo(res);
    if (!is_loopback((struct sockaddr *)&ss)) { /* the wildcard of the family */
        if (fam == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            a->sin6_addr = in6addr_any;
        } else {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            a->sin_addr.s_addr = htonl(INADDR_ANY);
        }
    }
    int fd = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return ORK_FAIL(ORK_E_IO, "rendezvous: socket: %s", strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, 128) != 0) {
        int e = errno;
        close(fd);
        return ORK_FAIL(ORK_E_IO, "rendezvous: rank 0 cannot listen on %s:%d: %s%s", host, port, strerror(e),
                        e == EADDRINUSE ? " (another job uses MASTER_PORT: pick another)" : "");
    }
    struct sockaddr_storage bound;
    socklen_t bl = sizeof bound;
    getsockname(fd, (struct sockaddr *)&bound, &bl);
    int bport = bound.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&bound)->sin6_port)
                                            : ntohs(((struct sockaddr_in *)&bound)->sin_port);
    ork_rdzv_listener *l = calloc(1, sizeof *l);
    if (!l) { close(fd); return ORK_E_NOMEM; }
    set_nonblock(fd, 1);
    l->fd = fd;
    l->port = bport;
    snprintf(l->where, sizeof l->where, "%s:%d", host, bport);
    *out = l;
    return ORK_OK;
}

int ork_rdzv_listener_port(const ork_rdzv_listener *l) { return l ? l->port : 0; }

void ork_rdzv_listener_close(ork_rdzv_listener *l) {
    if (!l) return;
    close(l->fd);
    free(l);
}

typedef struct peer {
    int fd;
    size_t got;
    uint8_t buf[ORK_RDZV_HELLO_BYTES];
    int rank;        /* registered rank, or -1 */
    char from[64];
} peer;

static void peer_name(int fd, char *buf, size_t n) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char h[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET6) {
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, h, sizeof h);
            port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        } else if (ss.ss_family == AF_INET) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, h, sizeof h);
            port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        }
    }
    snprintf(buf, n, "%s:%d", h, port);
}

static void drop_peer(peer *p) {
    if (p->fd >= 0) close(p->fd);
    p->fd = -1;
}

/* Check a complete hello; ORK_RDZV_OK or why it is refused (*detail: the value at fault). */
static ork_rdzv_code check_hello(const uint8_t *h, const ork_rdzv_opts *o, const peer *ps, int np, uint32_t *detail) {
    *detail = 0;
    if (get16(h + 4) != ORK_RDZV_VERSION) { *detail = get16(h + 4); return ORK_RDZV_BAD_VERSION; }
    if (get32(h + 8) != (uint32_t)o->world) { *detail = get32(h + 8); return ORK_RDZV_BAD_WORLD; }
    uint32_t r = get32(h + 12);
    *detail = r;
    if (r == 0 || r >= (uint32_t)o->world) return ORK_RDZV_BAD_RANK;
    for (int i = 0; i < np; i++)
        if (ps[i].fd >= 0 && ps[i].rank == (int)r) return ORK_RDZV_DUP_RANK;
    if (get64(h + 16) != o->hash) return ORK_RDZV_BAD_HASH;
    return ORK_RDZV_OK;
}

ork_status ork_rdzv_serve(ork_rdzv_listener *l, const ork_rdzv_opts *o, const uint8_t id[ORK_RDZV_ID_BYTES]) {
    if (!l || o->rank != 0 || o->world < 1)
        return ORK_FAIL(ORK_E_INVALID, "rendezvous: serve is rank 0's (rank %d, world %d)", o->rank, o->world);
    const int need = o->world - 1;
    if (need == 0) return ORK_OK;
    double deadline = now_ms() + o->timeout_ms;
    int cap = need + 16, np = 0, registered = 0;
    peer *ps = calloc((size_t)cap, sizeof *ps);
    struct pollfd *pf = calloc((size_t)cap + 1, sizeof *pf);
    if (!ps || !pf) { free(ps); free(pf); return ORK_E_NOMEM; }
    ork_status s = ORK_OK;
    ork_rdzv_code refused = ORK_RDZV_OK;
    char refused_from[64] = "", refused_line[512] = "";
    while (s == ORK_OK && registered < need) {
        int n = 0;
        pf[n++] = (struct pollfd){l->fd, POLLIN, 0};
        for (int i = 0; i < np; i++)
            if (ps[i].fd >= 0 && ps[i].rank < 0) pf[n++] = (struct pollfd){ps[i].fd, POLLIN, 0};
        int ms = left_ms(deadline);
        if (ms == 0) {
            char missing[256] = "";
            size_t ml = 0;
            int shown = 0;
            for (int r = 1; r < o->world; r++) {
                int have = 0;
                for (int i = 0; i < np; i++) have |= ps[i].fd >= 0 && ps[i].rank == r;
                if (have) continue;
                if (shown++ < 16 && ml < sizeof missing - 16)
                    ml += (size_t)snprintf(missing + ml, sizeof missing - ml, "%s%d", ml ? ", " : "", r);
            }
            if (shown > 16 && ml < sizeof missing - 8) snprintf(missing + ml, sizeof missing - ml, ", ...");
            s = ORK_FAIL(ORK_E_IO, "rendezvous: rank 0 waited %g s on %s and %d of %d ranks never checked in "
                         "(missing ranks: %s); did they start, with MASTER_ADDR/MASTER_PORT pointing here?",
                         o->timeout_ms / 1e3, l->where, need - registered, need, missing);
            break;
        }
        int pr = poll(pf, (nfds_t)n, ms > 200 ? 200 : ms);
        if (pr < 0 && errno != EINTR) { s = ORK_FAIL(ORK_E_IO, "rendezvous: poll: %s", strerror(errno)); break; }
        if (pr <= 0) continue;
        if (pf[0].revents & POLLIN) {
            for (;;) {
                int c = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (c < 0) break;
                if (np == cap) { /* more half-open clients than expected: grow */
                    peer *g = realloc(ps, (size_t)(cap * 2) * sizeof *ps);
                    struct pollfd *gf = g ? realloc(pf, (size_t)(cap * 2 + 1) * sizeof *pf) : NULL;
                    if (g) ps = g;
                    if (gf) pf = gf;
                    if (!g || !gf) { close(c); s = ORK_E_NOMEM; break; }
                    cap *= 2;
                }
                peer *p = &ps[np++];
                memset(p, 0, sizeof *p);
                p->fd = c;
                p->rank = -1;
                peer_name(c, p->from, sizeof p->from);
            }
        }
        for (int i = 0; s == ORK_OK && i < np; i++) {
            peer *p = &ps[i];
            if (p->fd < 0 || p->rank >= 0) continue;
            ssize_t r = recv(p->fd, p->buf + p->got, sizeof p->buf - p->got, MSG_DONTWAIT);
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
            if (r <= 0) {
                ORK_WARN("rendezvous: a client from %s closed the connection after %zu of %d bytes; ignored",
                         p->from, p->got, ORK_RDZV_HELLO_BYTES);
                drop_peer(p);
                continue;
            }
            p->got += (size_t)r;
            if (p->got >= 4 && get32(p->buf) != ORK_RDZV_MAGIC) {
                ORK_WARN("rendezvous: a client from %s sent bytes that are not an orakul hello (magic 0x%08x); "
                         "ignored", p->from, get32(p->buf));
                drop_peer(p);
                continue;
            }
            if (p->got >= 8 && get16(p->buf + 6) != KIND_HELLO) {
                ORK_WARN("rendezvous: a client from %s sent message kind %u instead of a hello; ignored", p->from,
                         get16(p->buf + 6));
                drop_peer(p);
                continue;
            }
            if (p->got < sizeof p->buf) continue;
            uint32_t detail;
            ork_rdzv_code c = check_hello(p->buf, o, ps, np, &detail);
            if (c == ORK_RDZV_OK) {
                p->rank = (int)get32(p->buf + 12);
                registered++;
                continue;
            }
            refused = c;
            snprintf(refused_from, sizeof refused_from, "%s", p->from);
            uint64_t theirs = get64(p->buf + 16);
            switch (c) {
            case ORK_RDZV_BAD_VERSION:
                snprintf(refused_line, sizeof refused_line, "the client from %s speaks rendezvous version %u, this "
                         "orakul %d: run the same orakul build on every rank", refused_from, detail, ORK_RDZV_VERSION);
                break;
            case ORK_RDZV_BAD_WORLD:
                snprintf(refused_line, sizeof refused_line, "the client from %s says WORLD_SIZE=%u, rank 0 has %d: "
                         "every rank needs the same WORLD_SIZE", refused_from, detail, o->world);
                break;
            case ORK_RDZV_BAD_RANK:
                snprintf(refused_line, sizeof refused_line, "the client from %s says RANK=%u, which is not in 1..%d",
                         refused_from, detail, o->world - 1);
                break;
            case ORK_RDZV_DUP_RANK:
                snprintf(refused_line, sizeof refused_line, "two clients claim RANK=%u (the second from %s): every "
                         "process needs its own rank", detail, refused_from);
                break;
            default:
                snprintf(refused_line, sizeof refused_line, "rank %u (from %s) runs a different config: hash "
                         "%016llx, rank 0 has %016llx; every rank must run the same config file and orakul build",
                         detail, refused_from, (unsigned long long)theirs, (unsigned long long)o->hash);
                break;
            }
            /* the refused client learns why; the registered ones that the job stops */
            uint8_t rep[ORK_RDZV_REPLY_BYTES];
            pack_reply(o->world, c, o->hash, detail, NULL, rep);
            write_all(p->fd, rep, sizeof rep, now_ms() + 2000);
            drop_peer(p);
            s = ORK_FAIL(ORK_E_CONFIG, "rendezvous: %s", refused_line);
        }
    }
    /* answer every registered rank: the id, or that the job stops */
    double wdl = now_ms() + (left_ms(deadline) > 5000 ? left_ms(deadline) : 5000);
    for (int i = 0; i < np; i++) {
        peer *p = &ps[i];
        if (p->fd < 0) continue;
        if (p->rank >= 0) {
            uint8_t rep[ORK_RDZV_REPLY_BYTES];
            ork_rdzv_code c = s == ORK_OK ? ORK_RDZV_OK : ORK_RDZV_ABORTED;
            pack_reply(o->world, c, o->hash, c == ORK_RDZV_OK ? 0 : (uint32_t)refused, id, rep);
            if (write_all(p->fd, rep, sizeof rep, wdl) != 0 && s == ORK_OK)
                s = ORK_FAIL(ORK_E_IO, "rendezvous: sending the id to rank %d (%s): %s", p->rank, p->from,
                             strerror(errno));
        }
        drop_peer(p);
    }
    free(ps);
    free(pf);
    return s;
}

/* ---- ranks > 0 ------------------------------------------------------------ */

/* One connect attempt to any address of host:port, bounded by deadline; fd or -1 (*err). */
static int try_connect(const char *host, const char *port, double deadline, int *err) {
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int ge = getaddrinfo(host, port, &hints, &res);
    if (ge != 0) { *err = -ge; return -1; }
    int fd = -1;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        int c = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (c < 0) { *err = errno; continue; }
        if (connect(c, ai->ai_addr, ai->ai_addrlen) == 0) { fd = c; break; }
        if (errno != EINPROGRESS) { *err = errno; close(c); continue; }
        struct pollfd pf = {c, POLLOUT, 0};
        int ms = left_ms(deadline);
        int pr = poll(&pf, 1, ms > 2000 ? 2000 : ms);
        int so = 0;
        socklen_t sl = sizeof so;
        if (pr > 0 && getsockopt(c, SOL_SOCKET, SO_ERROR, &so, &sl) == 0 && so == 0) { fd = c; break; }
        *err = pr == 0 ? ETIMEDOUT : so ? so : errno;
        close(c);
    }
    freeaddrinfo(res);
    return fd;
}

ork_status ork_rdzv_join(const char *addr, int port, const ork_rdzv_opts *o, uint8_t id[ORK_RDZV_ID_BYTES]) {
    if (o->rank <= 0 || o->rank >= o->world)
        return ORK_FAIL(ORK_E_INVALID, "rendezvous: join is for ranks 1..world-1 (rank %d, world %d)", o->rank, o->world);
    char host[256], ps[16];
    strip_brackets(addr && *addr ? addr : "127.0.0.1", host, sizeof host);
    snprintf(ps, sizeof ps, "%d", port);
    double deadline = now_ms() + o->timeout_ms;
    int fd = -1, err = 0, tries = 0;
    while (fd < 0) {
        tries++;
        fd = try_connect(host, ps, deadline, &err);
        if (fd >= 0) break;
        if (left_ms(deadline) == 0)
            return ORK_FAIL(ORK_E_IO, "rendezvous: rank %d could not reach rank 0 at %s:%d within %g s (%d tries, "
                            "last error: %s); is rank 0 running, and are MASTER_ADDR/MASTER_PORT right?", o->rank,
                            host, port, o->timeout_ms / 1e3, tries, err < 0 ? gai_strerror(-err) : strerror(err));
        int ms = left_ms(deadline);
        struct timespec ts = {0, (long)(ms < 100 ? ms : 100) * 1000000L};
        nanosleep(&ts, NULL);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    uint8_t hello[ORK_RDZV_HELLO_BYTES], rep[ORK_RDZV_REPLY_BYTES];
    ork_rdzv_pack_hello(o, hello);
    if (write_all(fd, hello, sizeof hello, deadline) != 0) {
        int e = errno;
        close(fd);
        return ORK_FAIL(ORK_E_IO, "rendezvous: rank %d: sending its hello to %s:%d: %s", o->rank, host, port,
                        strerror(e));
    }
    ssize_t got = read_all(fd, rep, sizeof rep, deadline);
    int e = errno;
    close(fd);
    if (got < 0 && e == ETIMEDOUT)
        return ORK_FAIL(ORK_E_IO, "rendezvous: rank %d: rank 0 at %s:%d accepted the connection but did not answer "
                        "within %g s (other ranks missing?)", o->rank, host, port, o->timeout_ms / 1e3);
    if (got < 0)
        return ORK_FAIL(ORK_E_IO, "rendezvous: rank %d: reading rank 0's answer: %s", o->rank, strerror(e));
    if (got < (ssize_t)sizeof rep)
        return ORK_FAIL(ORK_E_IO, "rendezvous: rank %d: rank 0 at %s:%d closed the connection after %zd of %d bytes "
                        "(it failed or refused this rank)", o->rank, host, port, got, ORK_RDZV_REPLY_BYTES);
    if (get32(rep) != ORK_RDZV_MAGIC || get16(rep + 6) != KIND_REPLY)
        return ORK_FAIL(ORK_E_FORMAT, "rendezvous: rank %d: %s:%d answered with something that is not an orakul "
                        "reply (magic 0x%08x): is MASTER_PORT another service's?", o->rank, host, port, get32(rep));
    if (get16(rep + 4) != ORK_RDZV_VERSION)
        return ORK_FAIL(ORK_E_FORMAT, "rendezvous: rank %d: rank 0 speaks rendezvous version %u, this orakul %d: run "
                        "the same orakul build on every rank", o->rank, get16(rep + 4), ORK_RDZV_VERSION);
    uint32_t st = get32(rep + 12), detail = get32(rep + 24);
    uint64_t h0 = get64(rep + 16);
    switch (st) {
    case ORK_RDZV_OK: break;
    case ORK_RDZV_BAD_VERSION:
        return ORK_FAIL(ORK_E_CONFIG, "rendezvous: rank %d: rank 0 refused rendezvous version %d", o->rank,
                        ORK_RDZV_VERSION);
    case ORK_RDZV_BAD_WORLD:
        return ORK_FAIL(ORK_E_CONFIG, "rendezvous: rank %d: WORLD_SIZE=%d here but %u on rank 0", o->rank, o->world,
                        get32(rep + 8));
    case ORK_RDZV_BAD_RANK:
        return ORK_FAIL(ORK_E_CONFIG, "rendezvous: rank %d: rank 0 refused RANK=%d (not in 1..%u)", o->rank, o->rank,
                        get32(rep + 8) - 1);
    case ORK_RDZV_DUP_RANK:
        return ORK_FAIL(ORK_E_CONFIG, "rendezvous: RANK=%d is already taken by another process", o->rank);
    case ORK_RDZV_BAD_HASH:
        return ORK_FAIL(ORK_E_CONFIG, "rendezvous: rank %d runs a different config than rank 0 (hash %016llx here, "
                        "%016llx on rank 0): every rank must run the same config file and orakul build", o->rank,
                        (unsigned long long)o->hash, (unsigned long long)h0);
    case ORK_RDZV_ABORTED:
        return ORK_FAIL(ORK_E_CONFIG, "rendezvous: rank %d: rank 0 stopped the job (%s; see rank 0's log)", o->rank,
                        detail == ORK_RDZV_BAD_HASH ? "another rank runs a different config"
                        : detail == ORK_RDZV_OK ? "other ranks never checked in" : "it refused another rank");
    default:
        return ORK_FAIL(ORK_E_FORMAT, "rendezvous: rank %d: rank 0 answered with unknown status %u", o->rank, st);
    }
    if (get32(rep + 8) != (uint32_t)o->world)
        return ORK_FAIL(ORK_E_CONFIG, "rendezvous: rank %d: WORLD_SIZE=%d here but %u on rank 0", o->rank, o->world,
                        get32(rep + 8));
    if (h0 != o->hash)
        return ORK_FAIL(ORK_E_CONFIG, "rendezvous: rank %d: config hash %016llx here, %016llx on rank 0", o->rank,
                        (unsigned long long)o->hash, (unsigned long long)h0);
    memcpy(id, rep + 32, ORK_RDZV_ID_BYTES);
    return ORK_OK;
}
