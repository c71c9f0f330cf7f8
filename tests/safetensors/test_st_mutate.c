/* test_st_mutate.c — a deterministic mutation run of the safetensors reader
 * (runs under gcc in CI; tests/fuzz/ has the libFuzzer target). Several
 * thousand mutations (bit flips, truncations, size-field edits, header byte
 * and digit edits, insertions, deletions) of two valid files: every open must
 * return ORK_OK or ORK_E_FORMAT, log exactly one line when it fails and none
 * when it succeeds, and an accepted file's tensors must tile its data exactly
 * and be readable. */
#include "io/safetensors.h"
#include "ork_test.h"
#include "st_test_util.h"

#include <sys/mman.h>

#define ITERS_PER_BASE 4000
#define MAXLEN 8192

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { /* xorshift64* */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545F4914F6CDD1Dull;
}
static size_t rndn(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

static uint8_t g_base[MAXLEN], g_buf[MAXLEN];
static size_t g_base_len;

static uint64_t hdr_len(const uint8_t *b, size_t n) {
    uint64_t h = 0;
    for (int i = 7; i >= 0 && n >= 8; i--) h = (h << 8) | b[i];
    return h;
}

/* One random edit of g_buf[*n]; returns the new length. */
static size_t mutate(size_t n) {
    static const char interesting[] = "{}[]\",:0123456789- \\e.\xff\x80";
    size_t h = (size_t)hdr_len(g_buf, n);
    size_t hend = n >= 8 && h <= n - 8 ? 8 + h : n; /* bias edits into the header */
    switch (rnd() % 8) {
    case 0: /* bit flips */
        for (int k = 1 + (int)rndn(4); k > 0 && n; k--) {
            size_t at = rnd() % 4 ? rndn(hend) : rndn(n);
            g_buf[at] ^= (uint8_t)(1u << rndn(8));
        }
        return n;
    case 1: return rndn(n + 1); /* truncation */
    case 2: { /* size-field edit */
        uint64_t v = hdr_len(g_buf, n);
        switch (rnd() % 3) {
        case 0: v += (uint64_t)(int64_t)((int)rndn(33) - 16); break;
        case 1: v = rnd() >> rndn(64); break;
        default: v = n - 8 + rndn(3); break;
        }
        for (int i = 0; i < 8 && i < (int)n; i++) g_buf[i] = (uint8_t)(v >> (8 * i));
        return n;
    }
    case 3: /* header byte from a JSON-ish alphabet */
        if (hend > 8) g_buf[8 + rndn(hend - 8)] = (uint8_t)interesting[rndn(sizeof interesting - 1)];
        return n;
    case 4: { /* digit edit: offsets and shapes */
        size_t start = 8 + rndn(hend > 8 ? hend - 8 : 1);
        for (size_t i = start; i < hend; i++)
            if (g_buf[i] >= '0' && g_buf[i] <= '9') { g_buf[i] = (uint8_t)('0' + rndn(10)); break; }
        return n;
    }
    case 5: { /* insert 1..8 bytes */
        size_t k = 1 + rndn(8), at = rndn(n + 1);
        if (n + k > MAXLEN) return n;
        memmove(g_buf + at + k, g_buf + at, n - at);
        for (size_t i = 0; i < k; i++) g_buf[at + i] = rnd() % 2 ? (uint8_t)interesting[rndn(sizeof interesting - 1)] : (uint8_t)rnd();
        return n + k;
    }
    case 6: { /* delete 1..8 bytes */
        if (!n) return n;
        size_t at = rndn(n), k = 1 + rndn(8);
        if (k > n - at) k = n - at;
        memmove(g_buf + at, g_buf + at + k, n - at - k);
        return n - k;
    }
    default: { /* append data bytes (trailing / too short data) */
        size_t k = 1 + rndn(8);
        if (n + k > MAXLEN) return n;
        memset(g_buf + n, 0, k);
        return n + k;
    }
    }
}

static unsigned g_ok, g_fmt;

static void check_one(const char *path, size_t n) {
    ork_st_file *f = NULL;
    log_reset();
    ork_status s = ork_st_open(path, &f);
    if (s != ORK_OK && s != ORK_E_FORMAT) {
        printf("\n  status %d for a %zu-byte mutation: %s", s, n, g_log);
        CU_FAIL("status neither OK nor FORMAT");
        return;
    }
    if ((s == ORK_OK) != (f != NULL) || g_nlines != (s == ORK_OK ? 0 : 1)) {
        printf("\n  status %d with %d log lines: %s", s, g_nlines, g_log);
        CU_FAIL("one log line per failure, none on success");
    }
    if (s != ORK_OK) { g_fmt++; return; }
    g_ok++;
    uint64_t total = 0, sum = 0;
    static float out[MAXLEN];
    for (size_t i = 0; i < ork_st_count(f); i++) {
        const ork_st_tensor *t = ork_st_at(f, i);
        CU_ASSERT(t->offset == total);
        CU_ASSERT(ork_st_find(f, t->name) == t);
        total += t->nbytes;
        for (uint64_t j = 0; j < t->nbytes; j++) sum += t->data[j]; /* touch every byte */
        if (t->dtype != ORK_ST_DTYPE_UNSUPPORTED) {
            CU_ASSERT(ork_st_nelements(t) * ork_dtype_size(t->dtype) == t->nbytes);
            CU_ASSERT(ork_st_nelements(t) <= MAXLEN && ork_st_read_f32(t, out) == ORK_OK);
        }
    }
    CU_ASSERT_EQUAL(8 + hdr_len(g_buf, n) + total, n);
    (void)sum;
    ork_st_close(f);
}

/* Mutations live in a memfd (no disk traffic), opened by path through /proc;
 * a plain file in the scratch directory where that is unavailable. */
static int g_memfd = -1;

static void run_base(void) {
    char path[64];
    const char *file = st_path("mut.safetensors");
    if (g_memfd < 0) g_memfd = memfd_create("ork_st_mutate", 0);
    snprintf(path, sizeof path, "/proc/self/fd/%d", g_memfd);
    if (g_memfd >= 0 && access(path, R_OK) != 0) { close(g_memfd); g_memfd = -2; }
    for (int it = 0; it < ITERS_PER_BASE; it++) {
        memcpy(g_buf, g_base, g_base_len);
        size_t n = g_base_len;
        for (int k = 1 + (int)rndn(3); k > 0; k--) n = mutate(n);
        if (g_memfd >= 0) {
            CU_ASSERT_FATAL(ftruncate(g_memfd, 0) == 0 && pwrite(g_memfd, g_buf, n, 0) == (ssize_t)n);
            check_one(path, n);
        } else {
            CU_ASSERT_EQUAL_FATAL(write_bytes(file, g_buf, n), 0);
            check_one(file, n);
        }
    }
}

static void load_base(const char *path) {
    FILE *fp = fopen(path, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
    g_base_len = fread(g_base, 1, MAXLEN, fp);
    fclose(fp);
    CU_ASSERT_FATAL(g_base_len > 8 && g_base_len < MAXLEN / 2);
}

static void test_mutate_written(void) {
    ork_st_writer *w;
    CU_ASSERT_EQUAL_FATAL(ork_st_writer_new(&w), ORK_OK);
    static uint8_t d[64];
    for (int i = 0; i < 64; i++) d[i] = (uint8_t)(i * 29);
    int64_t s2[2] = {2, 3}, s1 = 4, s0 = 0;
    ork_st_writer_add(w, "a.weight", ORK_F32, 2, s2, d, 24);
    ork_st_writer_add(w, "b.bias", ORK_BF16, 1, &s1, d, 8);
    ork_st_writer_add(w, "c.q", ORK_F8_E4M3, 2, s2, d, 6);
    ork_st_writer_add(w, "d.empty", ORK_F16, 1, &s0, NULL, 0);
    ork_st_writer_add(w, "e.scalar", ORK_I64, 0, NULL, d, 8);
    ork_st_writer_meta(w, "format", "pt");
    const char *p = st_path("base.safetensors");
    CU_ASSERT_EQUAL_FATAL(ork_st_writer_commit(w, p), ORK_OK);
    ork_st_writer_free(w);
    load_base(p);
    run_base();
}

static void test_mutate_python(void) {
    load_base(ORK_SOURCE_DIR "/tests/safetensors/fixtures/python_ref.safetensors");
    run_base();
    printf("\n  %u accepted, %u refused (ORK_E_FORMAT)", g_ok, g_fmt);
    CU_ASSERT(g_ok > 0 && g_fmt > 0);
}

static int init(void) {
    if (!freopen("/dev/null", "w", stderr)) return 1; /* thousands of expected error lines */
    return st_init();
}

static const ork_test_case cases[] = {
    {"mutate_writer_output", test_mutate_written},
    {"mutate_python_fixture", test_mutate_python},
    {NULL, NULL},
};

ORK_TEST_MAIN("safetensors_mutate", init, st_clean, cases)
