/* test_st_integrity.c — the integrity layer of core/io (st_check.h) and the
 * finiteness scan (numerics/finite.h):
 *  - a file written with checksums verifies; one written without reports
 *    "nothing verified"; a flipped data byte, an edited metadata value, a
 *    transposed shape, a renamed tensor and malformed or incomplete checksum
 *    entries are each refused with one line naming the file (and the tensor);
 *  - the threaded CRC of large buffers equals zlib's single-pass crc32;
 *  - the first NaN/Inf is found in every float dtype, at unaligned addresses,
 *    across block boundaries; integers are always finite; a tensor check
 *    names the file, the tensor and the element;
 *  - ork_log_hold keeps an error line off stderr and hands it back. */
#include "ork_test.h"
#include "st_test_util.h"

#include "io/st_check.h"
#include "numerics/finite.h"
#include "numerics/half.h"

#include <zlib.h>

/* a small file: two tensors, two metadata keys; checksums on or off */
static const char *write_small(const char *name, int checksum) {
    static float a[6] = {1, 2, 3, 4, 5, 6};
    static uint16_t b[4] = {1, 2, 3, 4};
    int64_t sa[2] = {2, 3}, sb[1] = {4};
    ork_st_writer *w;
    const char *p = st_path(name);
    if (ork_st_writer_new(&w) != ORK_OK) return NULL;
    ork_st_writer_checksum(w, checksum);
    int ok = ork_st_writer_add(w, "alpha", ORK_F32, 2, sa, a, sizeof a) == ORK_OK &&
             ork_st_writer_add(w, "beta", ORK_BF16, 1, sb, b, sizeof b) == ORK_OK &&
             ork_st_writer_meta(w, "step", "10") == ORK_OK && ork_st_writer_meta(w, "kind", "test") == ORK_OK &&
             ork_st_writer_commit(w, p) == ORK_OK;
    ork_st_writer_free(w);
    return ok ? p : NULL;
}

/* Replace the first occurrence of `from` by `to` (same length) in the file. */
static int patch(const char *path, const char *from, const char *to) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return -1;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    size_t fl = strlen(from);
    for (size_t i = 0; i + fl <= n; i++)
        if (!memcmp(buf + i, from, fl)) {
            memcpy(buf + i, to, fl);
            fp = fopen(path, "wb");
            if (!fp) return -1;
            int ok = fwrite(buf, 1, n, fp) == n;
            return fclose(fp) == 0 && ok ? 0 : -1;
        }
    return -1;
}

/* Open and verify: the status (ORK_E_* of open or verify), *verified. */
static ork_status open_verify(const char *p, int *verified) {
    ork_st_file *f;
    *verified = -1;
    ork_status s = ork_st_open(p, &f);
    if (s != ORK_OK) return s;
    s = ork_st_verify(f, verified);
    ork_st_close(f);
    return s;
}

static void test_checksum_roundtrip(void) {
    const char *p = write_small("crc.safetensors", 1);
    CU_ASSERT_FATAL(p != NULL);
    int v;
    log_reset();
    CU_ASSERT(open_verify(p, &v) == ORK_OK && v == 1);
    CU_ASSERT(g_nlines == 0);
    ork_st_file *f;
    CU_ASSERT_FATAL(ork_st_open(p, &f) == ORK_OK);
    const char *m = ork_st_meta(f, ORK_ST_CRC_KEY), *h = ork_st_meta(f, ORK_ST_HEADER_CRC_KEY);
    CU_ASSERT(m && strstr(m, "\"alpha\":") && strstr(m, "\"beta\":"));
    CU_ASSERT(h && strlen(h) == 8);
    /* the map's value is zlib's crc32 of the data bytes */
    const ork_st_tensor *t = ork_st_find(f, "alpha");
    char want[32];
    snprintf(want, sizeof want, "\"alpha\":\"%08lx\"", crc32(0, t->data, (uInt)t->nbytes));
    CU_ASSERT(m && strstr(m, want) != NULL);
    /* the metadata keys, sorted */
    const char *keys[8];
    CU_ASSERT(ork_st_meta_keys(f, keys, 8) == 4);
    CU_ASSERT(!strcmp(keys[0], "kind") && !strcmp(keys[1], ORK_ST_CRC_KEY) &&
              !strcmp(keys[2], ORK_ST_HEADER_CRC_KEY) && !strcmp(keys[3], "step"));
    CU_ASSERT(ork_st_meta_keys(f, keys, 1) == 4);
    ork_st_close(f);

    const char *q = write_small("nocrc.safetensors", 0);
    CU_ASSERT(q && open_verify(q, &v) == ORK_OK && v == 0);
}

static void expect_refused(const char *what, const char *needle) {
    int v;
    log_reset();
    ork_status s = open_verify(st_path("crc.safetensors"), &v);
    if (s != ORK_E_FORMAT || g_nlines != 1 || !strstr(g_log, needle)) printf("\n  %s: status %d, log: %s", what, s, g_log);
    CU_ASSERT(s == ORK_E_FORMAT);
    CU_ASSERT(g_nlines == 1);
    CU_ASSERT(strstr(g_log, needle) != NULL);
    CU_ASSERT(strstr(g_log, g_dir) != NULL); /* names the file */
}

static void test_checksum_refusals(void) {
    const char *p;
    /* a flipped data byte: the last byte of the file belongs to 'alpha' or 'beta' */
    CU_ASSERT_FATAL((p = write_small("crc.safetensors", 1)) != NULL);
    {
        FILE *fp = fopen(p, "r+b");
        CU_ASSERT_FATAL(fp != NULL);
        fseek(fp, -1, SEEK_END);
        int c = fgetc(fp);
        fseek(fp, -1, SEEK_END);
        fputc(c ^ 0x10, fp);
        fclose(fp);
    }
    expect_refused("flipped data byte", "does not match its checksum");
    /* an edited metadata value (same length: the file stays well-formed) */
    CU_ASSERT_FATAL(write_small("crc.safetensors", 1) != NULL);
    CU_ASSERT_FATAL(patch(p, "\"step\":\"10\"", "\"step\":\"99\"") == 0);
    expect_refused("edited metadata", "its header");
    /* a transposed shape: the same bytes, another tensor */
    CU_ASSERT_FATAL(write_small("crc.safetensors", 1) != NULL);
    CU_ASSERT_FATAL(patch(p, "\"shape\":[2,3]", "\"shape\":[3,2]") == 0);
    expect_refused("transposed shape", "its header");
    /* a renamed tensor: its checksum entry names a tensor the file lacks */
    CU_ASSERT_FATAL(write_small("crc.safetensors", 1) != NULL);
    CU_ASSERT_FATAL(patch(p, "\"alpha\":{", "\"alphx\":{") == 0);
    expect_refused("renamed tensor", "tensor 'alphx' has no checksum");
    /* a malformed checksum value */
    ork_st_writer *w;
    float one = 1;
    CU_ASSERT_FATAL(ork_st_writer_new(&w) == ORK_OK);
    CU_ASSERT(ork_st_writer_add(w, "alpha", ORK_F32, 0, NULL, &one, 4) == ORK_OK);
    CU_ASSERT(ork_st_writer_meta(w, ORK_ST_CRC_KEY, "{\"alpha\":\"nothex!!\"}") == ORK_OK);
    CU_ASSERT(ork_st_writer_meta(w, ORK_ST_HEADER_CRC_KEY, "00000000") == ORK_OK);
    CU_ASSERT(ork_st_writer_commit(w, p) == ORK_OK);
    ork_st_writer_free(w);
    expect_refused("malformed checksum", "not 8 hex digits");
    /* only one of the two keys */
    CU_ASSERT_FATAL(ork_st_writer_new(&w) == ORK_OK);
    CU_ASSERT(ork_st_writer_add(w, "alpha", ORK_F32, 0, NULL, &one, 4) == ORK_OK);
    CU_ASSERT(ork_st_writer_meta(w, ORK_ST_CRC_KEY, "{\"alpha\":\"00000000\"}") == ORK_OK);
    CU_ASSERT(ork_st_writer_commit(w, p) == ORK_OK);
    ork_st_writer_free(w);
    expect_refused("incomplete", "incomplete");
    /* a checksum map that is not an object */
    CU_ASSERT_FATAL(ork_st_writer_new(&w) == ORK_OK);
    CU_ASSERT(ork_st_writer_add(w, "alpha", ORK_F32, 0, NULL, &one, 4) == ORK_OK);
    CU_ASSERT(ork_st_writer_meta(w, ORK_ST_CRC_KEY, "[1,2") == ORK_OK);
    CU_ASSERT(ork_st_writer_meta(w, ORK_ST_HEADER_CRC_KEY, "00000000") == ORK_OK);
    CU_ASSERT(ork_st_writer_commit(w, p) == ORK_OK);
    ork_st_writer_free(w);
    expect_refused("not an object", "not a JSON object");
}

static void test_crc_threaded(void) {
    /* past the threaded path's 64 MiB: pieces joined with crc32_combine */
    uint64_t n1 = (80u << 20) + 12345, n2 = 1000, n3 = 0;
    unsigned char *a = malloc(n1), *b = malloc(n2);
    CU_ASSERT_FATAL(a && b);
    uint32_t x = 12345;
    for (uint64_t i = 0; i < n1; i++) a[i] = (unsigned char)((x = x * 1103515245u + 12345u) >> 24);
    for (uint64_t i = 0; i < n2; i++) b[i] = (unsigned char)i;
    const void *d[3] = {a, b, b};
    uint64_t l[3] = {n1, n2, n3};
    uint32_t got[3];
    ork_crc32_many(3, d, l, got);
    CU_ASSERT(got[0] == (uint32_t)crc32_z(0, a, n1));
    CU_ASSERT(got[1] == (uint32_t)crc32_z(0, b, n2));
    CU_ASSERT(got[2] == 0);
    /* and the small path */
    ork_crc32_many(2, d + 1, l + 1, got);
    CU_ASSERT(got[0] == (uint32_t)crc32_z(0, b, n2) && got[1] == 0);
    free(a);
    free(b);
}

static void test_first_nonfinite(void) {
    enum { N = 10000 };
    static unsigned char buf[N * 8 + 1];
    struct { ork_dtype dt; size_t sz; uint64_t nan, pinf, ninf; } k[] = {
        {ORK_F32, 4, 0x7FC00000u, 0x7F800000u, 0xFF800000u},
        {ORK_F64, 8, 0x7FF8000000000000ull, 0x7FF0000000000000ull, 0xFFF0000000000000ull},
        {ORK_F16, 2, 0x7E00u, 0x7C00u, 0xFC00u},
        {ORK_BF16, 2, 0x7FC0u, 0x7F80u, 0xFF80u},
        {ORK_F8_E5M2, 1, 0x7Fu, 0x7Cu, 0xFCu},
        {ORK_F8_E4M3, 1, 0x7Fu, 0x7Fu, 0xFFu}, /* no Inf in e4m3fn: NaN both signs */
    };
    for (size_t c = 0; c < sizeof k / sizeof k[0]; c++) {
        unsigned char *p = buf + 1; /* unaligned */
        memset(buf, 0, sizeof buf);
        /* the largest finite values are finite */
        uint64_t big = k[c].sz == 1 ? (k[c].dt == ORK_F8_E4M3 ? 0x7Eu : 0x7Bu)
                       : k[c].sz == 2 ? (k[c].dt == ORK_F16 ? 0x7BFFu : 0x7F7Fu)
                       : k[c].sz == 4 ? 0x7F7FFFFFu : 0x7FEFFFFFFFFFFFFFull;
        for (int i = 0; i < N; i += 7) memcpy(p + (size_t)i * k[c].sz, &big, k[c].sz);
        CU_ASSERT(ork_first_nonfinite(k[c].dt, p, N) == -1);
        int at[3] = {0, 4095, 9999};
        uint64_t v[3] = {k[c].nan, k[c].pinf, k[c].ninf};
        const char *kind[3] = {"NaN", "+inf", "-inf"};
        for (int q = 0; q < 3; q++) {
            memcpy(p + (size_t)at[q] * k[c].sz, &v[q], k[c].sz);
            CU_ASSERT(ork_first_nonfinite(k[c].dt, p, N) == at[q]);
            CU_ASSERT(ork_first_nonfinite(k[c].dt, p, (uint64_t)at[q]) == -1); /* before it: all finite */
            const char *want = k[c].dt == ORK_F8_E4M3 ? "NaN" : kind[q];
            CU_ASSERT_STRING_EQUAL(ork_nonfinite_kind(k[c].dt, p, (uint64_t)at[q]), want);
            memset(p + (size_t)at[q] * k[c].sz, 0, k[c].sz);
        }
    }
    memset(buf, 0xFF, sizeof buf);
    CU_ASSERT(ork_first_nonfinite(ORK_U8, buf, N) == -1);
    CU_ASSERT(ork_first_nonfinite(ORK_I32, buf, N) == -1);
    CU_ASSERT(ork_first_nonfinite(ORK_I64, buf, N) == -1);
    CU_ASSERT(ork_first_nonfinite(ORK_F32, buf, 0) == -1);
}

static void test_check_finite_tensor(void) {
    float a[5] = {0, 1, NAN, 3, 4};
    int64_t sh = 5;
    ork_st_writer *w;
    const char *p = st_path("nan.safetensors");
    CU_ASSERT_FATAL(ork_st_writer_new(&w) == ORK_OK);
    CU_ASSERT(ork_st_writer_add(w, "x", ORK_F32, 1, &sh, a, sizeof a) == ORK_OK);
    CU_ASSERT(ork_st_writer_commit(w, p) == ORK_OK);
    ork_st_writer_free(w);
    ork_st_file *f;
    CU_ASSERT_FATAL(ork_st_open(p, &f) == ORK_OK);
    log_reset();
    CU_ASSERT(ork_st_check_finite(ork_st_find(f, "x"), p) == ORK_E_NUMERIC);
    CU_ASSERT(g_nlines == 1 && strstr(g_log, "tensor 'x'") && strstr(g_log, "element 2 of 5 is NaN") &&
              strstr(g_log, p));
    ork_st_close(f);
}

static void test_log_hold(void) {
    log_reset();
    ork_log_hold_begin();
    ork_status s = ORK_FAIL(ORK_E_IO, "held %d", 7);
    ORK_WARN("a warning passes");
    char last[64];
    ork_log_hold_end(last, sizeof last);
    CU_ASSERT(s == ORK_E_IO);
    CU_ASSERT_STRING_EQUAL(last, "held 7");
    CU_ASSERT(g_nlines == 1 && strstr(g_log, "a warning passes") && !strstr(g_log, "held"));
    (void)ORK_FAIL(ORK_E_IO, "after the hold");
    CU_ASSERT(g_nlines == 2 && strstr(g_log, "after the hold"));
}

static const ork_test_case cases[] = {
    {"checksum_roundtrip", test_checksum_roundtrip},
    {"checksum_refusals", test_checksum_refusals},
    {"crc_threaded", test_crc_threaded},
    {"first_nonfinite", test_first_nonfinite},
    {"check_finite_tensor", test_check_finite_tensor},
    {"log_hold", test_log_hold},
    {NULL, NULL},
};

static int init(void) { return st_init(); }
static int clean(void) { return st_clean(); }
ORK_TEST_MAIN("st_integrity", init, clean, cases)
