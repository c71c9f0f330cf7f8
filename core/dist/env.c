/* dist/env.c — see env.h. Owns nothing. */
#include "dist/env.h"

#include "util/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Strict decimal in [lo, hi]: digits only, no sign, no spaces, no trailing text. */
static int parse_int(const char *s, long lo, long hi, long *out) {
    if (!s || !*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 9) return 0;
    errno = 0;
    long v = strtol(s, NULL, 10);
    if (errno || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

/* name's value, or the fallback variable's when name is unset; *used says which. */
static const char *get2(ork_dist_getenv_fn get, void *ctx, const char *name, const char *alt, const char **used) {
    const char *v = get(ctx, name);
    *used = name;
    if ((!v || !*v) && alt) {
        const char *a = get(ctx, alt);
        if (a && *a) { *used = alt; return a; }
    }
    return v && *v ? v : NULL;
}

ork_status ork_dist_env_parse(ork_dist_getenv_fn get, void *ctx, ork_dist_env *out) {
    memset(out, 0, sizeof *out);
    out->world = 1;
    out->timeout_s = ORK_DIST_DEFAULT_TIMEOUT_S;
    long v;
    const char *used, *s;
    if ((s = get(ctx, "ORAKUL_DIST_TIMEOUT")) && *s) {
        if (!parse_int(s, 1, 86400, &v))
            return ORK_FAIL(ORK_E_CONFIG, "ORAKUL_DIST_TIMEOUT='%s': must be whole seconds, 1..86400", s);
        out->timeout_s = (int)v;
    }
    if ((s = get(ctx, "ORAKUL_DIST_NCCL")) && *s) {
        if (strcmp(s, "0") && strcmp(s, "1"))
            return ORK_FAIL(ORK_E_CONFIG, "ORAKUL_DIST_NCCL='%s': must be 0 or 1", s);
        out->force_nccl = s[0] == '1';
    }
    const char *ws = get2(get, ctx, "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", &used);
    const char *rs_used;
    const char *rs = get2(get, ctx, "RANK", "OMPI_COMM_WORLD_RANK", &rs_used);
    if (!ws) {
        if (rs && strcmp(rs, "0"))
            return ORK_FAIL(ORK_E_CONFIG, "%s=%s but WORLD_SIZE is not set: a distributed run needs both "
                            "(or run `orakul run --gpus N CONFIG`)", rs_used, rs);
        return ORK_OK;
    }
    if (!parse_int(ws, 1, ORK_DIST_MAX_WORLD, &v))
        return ORK_FAIL(ORK_E_CONFIG, "%s='%s': must be the number of processes, 1..%d", used, ws, ORK_DIST_MAX_WORLD);
    out->world = (int)v;
    if (!rs) {
        if (out->world > 1)
            return ORK_FAIL(ORK_E_CONFIG, "WORLD_SIZE=%d but RANK is not set (each process needs its rank, 0..%d)",
                            out->world, out->world - 1);
    } else if (!parse_int(rs, 0, out->world - 1, &v)) {
        return ORK_FAIL(ORK_E_CONFIG, "%s='%s': must be 0..%d (WORLD_SIZE=%d)", rs_used, rs, out->world - 1, out->world);
    } else {
        out->rank = (int)v;
    }
    const char *ls = get2(get, ctx, "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", &used);
    if (ls) {
        if (!parse_int(ls, 0, 1023, &v))
            return ORK_FAIL(ORK_E_CONFIG, "%s='%s': must be this process's rank on its host, 0..1023", used, ls);
        out->local_rank = (int)v;
    } else {
        out->local_rank = out->rank < 1024 ? out->rank : 0;
    }
    if (out->world == 1) return ORK_OK;
    const char *a = get(ctx, "MASTER_ADDR"), *p = get(ctx, "MASTER_PORT");
    if (!a || !*a)
        return ORK_FAIL(ORK_E_CONFIG, "WORLD_SIZE=%d but MASTER_ADDR is not set (the host of rank 0, e.g. 127.0.0.1)",
                        out->world);
    if (strlen(a) >= sizeof out->addr)
        return ORK_FAIL(ORK_E_CONFIG, "MASTER_ADDR is %zu bytes long: at most %zu", strlen(a), sizeof out->addr - 1);
    if (strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:_[]%") != strlen(a))
        return ORK_FAIL(ORK_E_CONFIG, "MASTER_ADDR='%s': not a host name or address", a);
    snprintf(out->addr, sizeof out->addr, "%s", a);
    if (!p || !*p)
        return ORK_FAIL(ORK_E_CONFIG, "WORLD_SIZE=%d but MASTER_PORT is not set (a free TCP port on rank 0's host)",
                        out->world);
    if (!parse_int(p, 1, 65535, &v)) return ORK_FAIL(ORK_E_CONFIG, "MASTER_PORT='%s': must be a TCP port, 1..65535", p);
    out->port = (int)v;
    const char *own = get(ctx, "ORAKUL_DIST_PORT"), *agent = get(ctx, "TORCHELASTIC_USE_AGENT_STORE");
    if (own && *own) {
        if (!parse_int(own, 1, 65535, &v))
            return ORK_FAIL(ORK_E_CONFIG, "ORAKUL_DIST_PORT='%s': must be a TCP port, 1..65535", own);
        out->port = (int)v;
    } else if (agent && (!strcmp(agent, "True") || !strcmp(agent, "true") || !strcmp(agent, "1"))) {
        /* torchrun's agent serves its own store on MASTER_PORT: ours is the next port */
        if (out->port == 65535)
            return ORK_FAIL(ORK_E_CONFIG, "MASTER_PORT=65535 under torchrun: orakul's rendezvous needs MASTER_PORT + 1 "
                            "(or set ORAKUL_DIST_PORT)");
        out->port++;
    }
    return ORK_OK;
}

static const char *real_getenv(void *ctx, const char *name) {
    (void)ctx;
    return getenv(name);
}

ork_status ork_dist_env_read(ork_dist_env *out) { return ork_dist_env_parse(real_getenv, NULL, out); }

int ork_dist_env_active(const ork_dist_env *e) { return e->world > 1 || e->force_nccl; }
