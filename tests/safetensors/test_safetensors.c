/* test_safetensors.c — the safetensors reader, writer, sets and conversions:
 * round trips of every dtype, a file written by Python's safetensors library,
 * unaligned data, one malformed file per reader check (status AND the logged
 * line), sharded index.json sets, and atomic commits. */
#include "io/safetensors.h"
#include "numerics/fp8.h"  /* the decoders the reader uses */
#include "numerics/half.h"
#include "ork_test.h"
#include "st_test_util.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

/* Opens path, expects status s, exactly one logged line containing what and
 * the file name. */
static void expect_fail_at(const char *path, ork_status s, const char *what, int line) {
    ork_st_file *f = (ork_st_file *)1;
    log_reset();
    ork_status got = ork_st_open(path, &f);
    int ok = got == s && f == NULL && g_nlines == 1 && strstr(g_log, what) && strstr(g_log, path);
    if (!ok)
        printf("\n  line %d: status %d (want %d), %d lines: %s  (want '%s')\n", line, got, s,
               g_nlines, g_log, what);
    CU_ASSERT(ok);
    if (got == ORK_OK) ork_st_close(f);
}
#define expect_fail(p, s, w) expect_fail_at((p), (s), (w), __LINE__)

static ork_st_file *open_ok(const char *path) {
    ork_st_file *f = NULL;
    log_reset();
    ork_status s = ork_st_open(path, &f);
    if (s != ORK_OK) printf("\n  %s: %s", path, g_log);
    CU_ASSERT_EQUAL(s, ORK_OK);
    return f;
}

/* ---- conversions -------------------------------------------------------- */
/* Independent reference: decode a minifloat by ldexp. */
static float ref_mini(unsigned v, int ebits, int mbits, int bias, int fn) {
    unsigned s = v >> (ebits + mbits), e = (v >> mbits) & ((1u << ebits) - 1), m = v & ((1u << mbits) - 1);
    float r;
    if (fn && e == (1u << ebits) - 1 && m == (1u << mbits) - 1) r = NAN;
    else if (!fn && e == (1u << ebits) - 1) r = m ? NAN : INFINITY;
    else if (e == 0) r = ldexpf((float)m, 1 - bias - mbits);
    else r = ldexpf((float)(m | (1u << mbits)), (int)e - bias - mbits);
    return s ? -r : r;
}

static int same_float(float a, float b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return a == b && signbit(a) == signbit(b);
}

static void test_convert_exhaustive(void) {
    int bad = 0;
    for (unsigned v = 0; v < 256; v++) {
        bad += !same_float(ork_e4m3_to_f32((uint8_t)v), ref_mini(v, 4, 3, 7, 1));
        bad += !same_float(ork_e5m2_to_f32((uint8_t)v), ref_mini(v, 5, 2, 15, 0));
    }
    for (unsigned v = 0; v < 65536; v++) {
        bad += !same_float(ork_f16_to_f32((uint16_t)v), ref_mini(v, 5, 10, 15, 0));
        bad += !same_float(ork_bf16_to_f32((uint16_t)v), ref_mini(v, 8, 7, 127, 0));
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(ork_e4m3_to_f32(0x7e), 448.0f);
    CU_ASSERT_EQUAL(ork_e5m2_to_f32(0x7b), 57344.0f);
    CU_ASSERT_EQUAL(ork_f16_to_f32(0x0001), 0x1p-24f);
}

/* ---- round trip --------------------------------------------------------- */
static const ork_dtype k_all[] = {ORK_F32, ORK_BF16, ORK_F16, ORK_F8_E4M3, ORK_F8_E5M2,
                                  ORK_I32, ORK_U8, ORK_F64, ORK_I64};
#define NALL (sizeof k_all / sizeof k_all[0])

static void test_round_trip(void) {
    static uint8_t buf[NALL][3 * 5 * 8];
    ork_st_writer *w;
    CU_ASSERT_EQUAL_FATAL(ork_st_writer_new(&w), ORK_OK);
    char name[NALL][32];
    int64_t shape[2] = {3, 5};
    for (size_t i = 0; i < NALL; i++) {
        size_t nb = 15 * ork_dtype_size(k_all[i]);
        for (size_t j = 0; j < nb; j++) buf[i][j] = (uint8_t)(j * 37 + i * 11 + 1);
        snprintf(name[i], sizeof name[i], "t%zu.w", i);
        CU_ASSERT_EQUAL(ork_st_writer_add(w, name[i], k_all[i], 2, shape, buf[i], nb), ORK_OK);
    }
    int64_t empty[3] = {2, 0, 7};
    float scalar = 2.25f;
    CU_ASSERT_EQUAL(ork_st_writer_add(w, "empty", ORK_BF16, 3, empty, NULL, 0), ORK_OK);
    CU_ASSERT_EQUAL(ork_st_writer_add(w, "scalar", ORK_F32, 0, NULL, &scalar, 4), ORK_OK);
    CU_ASSERT_EQUAL(ork_st_writer_meta(w, "format", "pt"), ORK_OK);
    CU_ASSERT_EQUAL(ork_st_writer_meta(w, "ss_network_dim", "16"), ORK_OK);
    CU_ASSERT_EQUAL(ork_st_writer_meta(w, "format", "orakul"), ORK_OK); /* replaces */
    const char *p = st_path("rt.safetensors");
    CU_ASSERT_EQUAL_FATAL(ork_st_writer_commit(w, p), ORK_OK);
    ork_st_writer_free(w);

    ork_st_file *f = open_ok(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(ork_st_count(f), NALL + 2);
    CU_ASSERT_STRING_EQUAL(ork_st_meta(f, "format"), "orakul");
    CU_ASSERT_STRING_EQUAL(ork_st_meta(f, "ss_network_dim"), "16");
    CU_ASSERT_PTR_NULL(ork_st_meta(f, "nope"));
    CU_ASSERT_STRING_EQUAL(ork_st_path(f), p);
    for (size_t i = 0; i < NALL; i++) {
        const ork_st_tensor *t = ork_st_find(f, name[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        CU_ASSERT_EQUAL(t->dtype, k_all[i]);
        CU_ASSERT(t->ndim == 2 && t->shape[0] == 3 && t->shape[1] == 5);
        CU_ASSERT_EQUAL(t->nbytes, 15 * ork_dtype_size(k_all[i]));
        CU_ASSERT(memcmp(t->data, buf[i], t->nbytes) == 0);
        /* reference layout: every tensor naturally aligned (mmap base is page aligned) */
        CU_ASSERT_EQUAL((uintptr_t)t->data % ork_dtype_size(k_all[i]), 0);
    }
    const ork_st_tensor *e = ork_st_find(f, "empty"), *s = ork_st_find(f, "scalar");
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT(e->ndim == 3 && e->shape[1] == 0 && e->nbytes == 0 && ork_st_nelements(e) == 0);
    CU_ASSERT(s->ndim == 0 && s->nbytes == 4 && ork_st_nelements(s) == 1);
    float v = 0;
    CU_ASSERT_EQUAL(ork_st_read_f32(s, &v), ORK_OK);
    CU_ASSERT_EQUAL(v, 2.25f);
    CU_ASSERT_PTR_NULL(ork_st_find(f, "t0"));
    CU_ASSERT_PTR_NULL(ork_st_at(f, NALL + 2));
    /* header: 8 + N is a multiple of 8, keys sorted */
    uint64_t n = 0;
    FILE *fp = fopen(p, "rb");
    uint8_t h[4096] = {0};
    size_t got = fread(h, 1, sizeof h - 1, fp);
    fclose(fp);
    for (int i = 7; i >= 0; i--) n = (n << 8) | h[i];
    CU_ASSERT((8 + n) % 8 == 0 && got > n);
    const char *hs = (const char *)h + 8;
    CU_ASSERT(strstr(hs, "\"__metadata__\"") < strstr(hs, "\"empty\"") &&
              strstr(hs, "\"empty\"") < strstr(hs, "\"scalar\"") &&
              strstr(hs, "\"scalar\"") < strstr(hs, "\"t0.w\""));
    ork_st_close(f);
}

static void test_writer_rejects(void) {
    ork_st_writer *w;
    CU_ASSERT_EQUAL_FATAL(ork_st_writer_new(&w), ORK_OK);
    int64_t sh[9] = {2, 1, 1, 1, 1, 1, 1, 1, 1}, neg = -1;
    float d[2] = {0};
    log_reset();
    CU_ASSERT_EQUAL(ork_st_writer_add(w, "a", ORK_F32, 1, sh, d, 8), ORK_OK);
    CU_ASSERT_EQUAL(ork_st_writer_add(w, "a", ORK_F32, 1, sh, d, 8), ORK_E_INVALID);
    CU_ASSERT(strstr(g_log, "duplicate tensor name 'a'") != NULL);
    CU_ASSERT_EQUAL(ork_st_writer_add(w, "b", ORK_F32, 1, sh, d, 4), ORK_E_INVALID);
    CU_ASSERT(strstr(g_log, "4 bytes given, F32 needs 8") != NULL);
    CU_ASSERT_EQUAL(ork_st_writer_add(w, "c", ORK_F32, 9, sh, d, 8), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_st_writer_add(w, "d", ORK_F32, 1, &neg, d, 0), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_st_writer_add(w, "__metadata__", ORK_F32, 1, sh, d, 8), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_st_writer_add(w, "e", ORK_DTYPE_COUNT, 1, sh, d, 8), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_st_writer_add(w, "bad\xff", ORK_F32, 1, sh, d, 8), ORK_E_INVALID);
    CU_ASSERT(strstr(g_log, "not valid UTF-8") != NULL);
    CU_ASSERT_EQUAL(g_nlines, 7);
    ork_st_writer_free(w);
}

/* ---- a file written by Python's safetensors (tests/reference/make_safetensors_fixture.py) */
static void test_python_fixture(void) {
    static const float vals[6] = {1.0f, -2.5f, 0.5f, 448.0f, 0.0f, -0.0078125f};
    ork_st_file *f = open_ok(ORK_SOURCE_DIR "/tests/safetensors/fixtures/python_ref.safetensors");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(ork_st_count(f), 12);
    CU_ASSERT_STRING_EQUAL(ork_st_meta(f, "format"), "pt");
    CU_ASSERT_STRING_EQUAL(ork_st_meta(f, "orakul.fixture"), "1");
    const char *fl[] = {"a.f32", "b.f16", "c.bf16", "d.e4m3", "e.e5m2"};
    const ork_dtype fd[] = {ORK_F32, ORK_F16, ORK_BF16, ORK_F8_E4M3, ORK_F8_E5M2};
    for (int i = 0; i < 5; i++) {
        const ork_st_tensor *t = ork_st_find(f, fl[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        CU_ASSERT_EQUAL(t->dtype, fd[i]);
        CU_ASSERT_EQUAL(ork_st_nelements(t), 6);
        float out[6];
        double out64[6];
        CU_ASSERT_EQUAL(ork_st_read_f32(t, out), ORK_OK);
        CU_ASSERT_EQUAL(ork_st_read_into(t, ORK_F64, out64), ORK_OK);
        for (int j = 0; j < 6; j++) CU_ASSERT(out[j] == vals[j] && out64[j] == vals[j]);
    }
    const ork_st_tensor *t = ork_st_find(f, "a.f32");
    CU_ASSERT(t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3);
    float o[3];
    double od[2];
    CU_ASSERT_EQUAL(ork_st_read_f32(ork_st_find(f, "f.i32"), o), ORK_OK);
    CU_ASSERT(o[0] == -7 && o[1] == 0 && o[2] == 123456);
    CU_ASSERT_EQUAL(ork_st_read_f32(ork_st_find(f, "g.u8"), o), ORK_OK);
    CU_ASSERT(o[0] == 0 && o[1] == 7 && o[2] == 255);
    CU_ASSERT_EQUAL(ork_st_read_into(ork_st_find(f, "h.f64"), ORK_F64, od), ORK_OK);
    CU_ASSERT(od[0] == 0.1 && od[1] == -3.0);
    CU_ASSERT_EQUAL(ork_st_read_f32(ork_st_find(f, "i.i64"), o), ORK_OK);
    CU_ASSERT_EQUAL(o[0], -1099511627776.0f);
    CU_ASSERT_EQUAL(ork_st_read_f32(ork_st_find(f, "j.scalar"), o), ORK_OK);
    CU_ASSERT(o[0] == 3.5f && ork_st_find(f, "j.scalar")->ndim == 0);
    const ork_st_tensor *e = ork_st_find(f, "k.empty");
    CU_ASSERT(e && e->nbytes == 0 && e->shape[0] == 0 && e->shape[1] == 4);
    const ork_st_tensor *i8 = ork_st_find(f, "l.i8");
    CU_ASSERT_PTR_NOT_NULL_FATAL(i8);
    CU_ASSERT(i8->dtype == ORK_ST_DTYPE_UNSUPPORTED && strcmp(i8->dtype_name, "I8") == 0);
    log_reset();
    CU_ASSERT_EQUAL(ork_st_read_f32(i8, o), ORK_E_UNSUPPORTED);
    CU_ASSERT(strstr(g_log, "'l.i8': dtype I8") != NULL);
    CU_ASSERT_EQUAL(ork_st_read_into(ork_st_find(f, "a.f32"), ORK_BF16, o), ORK_E_UNSUPPORTED);
    /* iteration is in offset order */
    for (size_t i = 1; i < ork_st_count(f); i++)
        CU_ASSERT(ork_st_at(f, i)->offset == ork_st_at(f, i - 1)->offset + ork_st_at(f, i - 1)->nbytes);
    ork_st_close(f);
}

/* ---- unaligned data ----------------------------------------------------- */
static void test_unaligned(void) {
    /* header of odd length: data starts at an odd file offset */
    char hdr[256];
    snprintf(hdr, sizeof hdr, "%s",
             "{\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[12,18]},"
             "\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}");
    size_t hl = strlen(hdr);
    if (hl % 2 == 0) { hdr[hl++] = ' '; hdr[hl] = '\0'; } /* trailing space allowed */
    float a[3] = {1.5f, -0.25f, 1e30f};
    uint16_t b[3] = {0x3fc0, 0xc000, 0x0000}; /* 1.5, -2, 0 */
    uint8_t data[18];
    memcpy(data, a, 12);
    memcpy(data + 12, b, 6);
    const char *p = st_raw("unaligned.safetensors", hl, hdr, hl, data, 18);
    ork_st_file *f = open_ok(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    const ork_st_tensor *ta = ork_st_find(f, "a"), *tb = ork_st_find(f, "b");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ta);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tb);
    CU_ASSERT((uintptr_t)ta->data % 2 == 1 && (uintptr_t)tb->data % 2 == 1);
    CU_ASSERT(ork_st_at(f, 0) == ta); /* offset order, not JSON order */
    float o[3];
    CU_ASSERT_EQUAL(ork_st_read_f32(ta, o), ORK_OK);
    CU_ASSERT(o[0] == 1.5f && o[1] == -0.25f && o[2] == 1e30f);
    CU_ASSERT_EQUAL(ork_st_read_f32(tb, o), ORK_OK);
    CU_ASSERT(o[0] == 1.5f && o[1] == -2.0f && o[2] == 0.0f);
    ork_st_close(f);
}

static void test_valid_edge_cases(void) {
    ork_st_file *f = open_ok(st_mk("empty_hdr.safetensors", "{}", 0));
    CU_ASSERT(f && ork_st_count(f) == 0);
    ork_st_close(f);
    /* several empty tensors at one offset, one before a non-empty one there */
    f = open_ok(st_mk("empties.safetensors",
                      "{\"x\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
                      "\"e1\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
                      "\"e2\":{\"dtype\":\"F16\",\"shape\":[5,0],\"data_offsets\":[2,2]},"
                      "\"__metadata__\":{}}        ", 2));
    CU_ASSERT(f && ork_st_count(f) == 3 && ork_st_find(f, "e2") && ork_st_find(f, "e2")->nbytes == 0);
    ork_st_close(f);
    /* spec dtypes without an ork_dtype: accepted, sizes validated, marked */
    f = open_ok(st_mk("f4.safetensors",
                      "{\"q\":{\"dtype\":\"F4\",\"shape\":[2,3,2],\"data_offsets\":[0,6]},"
                      "\"b\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[6,9]},"
                      "\"u\":{\"dtype\":\"U64\",\"shape\":[1],\"data_offsets\":[9,17]},"
                      "\"s\":{\"dtype\":\"F6_E3M2\",\"shape\":[4],\"data_offsets\":[17,20]}}", 20));
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    const ork_st_tensor *q = ork_st_find(f, "q");
    CU_ASSERT(q && q->dtype == ORK_ST_DTYPE_UNSUPPORTED && strcmp(q->dtype_name, "F4") == 0 && q->nbytes == 6);
    float o[12];
    log_reset();
    CU_ASSERT_EQUAL(ork_st_read_f32(q, o), ORK_E_UNSUPPORTED);
    CU_ASSERT(g_nlines == 1 && strstr(g_log, "dtype F4"));
    ork_st_close(f);
    /* 8 dimensions is the limit, not past it */
    f = open_ok(st_mk("nd8.safetensors",
                      "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,2],\"data_offsets\":[0,2]}}", 2));
    CU_ASSERT(f && ork_st_find(f, "a")->ndim == 8);
    ork_st_close(f);
}

/* ---- one malformed file per reader check -------------------------------- */
#define T1(dt, sh, off) "{\"a\":{\"dtype\":" dt ",\"shape\":" sh ",\"data_offsets\":" off "}}"

static void test_malformed_size_field(void) {
    const char *p = st_path("m_empty.safetensors");
    write_bytes(p, "", 0);
    expect_fail(p, ORK_E_FORMAT, "0 bytes, shorter than the 8-byte header size");
    p = st_path("m_short.safetensors");
    write_bytes(p, "\x02\0\0\0\0", 5);
    expect_fail(p, ORK_E_FORMAT, "5 bytes, shorter than the 8-byte header size");
    expect_fail(st_raw("m_big.safetensors", 100000001, "{}", 2, NULL, 0), ORK_E_FORMAT,
                "header size 100000001 is larger than the limit 100000000");
    expect_fail(st_raw("m_ovf.safetensors", UINT64_MAX, "{}", 2, NULL, 0), ORK_E_FORMAT,
                "larger than the limit"); /* 8 + N would overflow: refused before any addition */
    expect_fail(st_raw("m_past.safetensors", 50, "{}      ", 8, NULL, 0), ORK_E_FORMAT,
                "header size 50 runs past the end of the 16-byte file");
    expect_fail(st_raw("m_zero.safetensors", 0, NULL, 0, NULL, 4), ORK_E_FORMAT, "does not start with '{'");
}

static void test_malformed_text(void) {
    expect_fail(st_mk("m_brace.safetensors", " {}", 0), ORK_E_FORMAT, "does not start with '{'");
    expect_fail(st_mk("m_array.safetensors", "[{}]", 0), ORK_E_FORMAT, "does not start with '{'");
    const char *bad[] = {"{\"a\xff\":1}", "{\"\xc0\xaf\":1}", "{\"\xed\xa0\x80\":1}", "{\"\xe2\x82\":1}"};
    for (size_t i = 0; i < 4; i++)
        expect_fail(st_mk("m_utf8.safetensors", bad[i], 0), ORK_E_FORMAT, "header is not valid UTF-8");
    expect_fail(st_mk("m_json.safetensors", "{\"a\":", 0), ORK_E_FORMAT, "header is not valid JSON");
    expect_fail(st_mk("m_json2.safetensors", "{} x", 0), ORK_E_FORMAT, "header is not valid JSON");
    expect_fail(st_raw("m_nul.safetensors", 4, "{}\0\0", 4, NULL, 0), ORK_E_FORMAT,
                "header is not valid JSON"); /* NUL padding: only spaces are allowed */
    expect_fail(st_mk("m_dup.safetensors",
                      "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                      "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1),
                ORK_E_FORMAT, "duplicate object key");
}

static void test_malformed_fields(void) {
    static const struct { const char *hdr; size_t nd; const char *what; } c[] = {
        {"{\"a\":5}", 0, "tensor 'a': entry is not a JSON object"},
        {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "'a': \"dtype\" missing or not a string"},
        {T1("1", "[1]", "[0,1]"), 1, "\"dtype\" missing or not a string"},
        {T1("\"F12\"", "[1]", "[0,1]"), 1, "tensor 'a': unknown dtype \"F12\""},
        {T1("\"f32\"", "[1]", "[0,4]"), 4, "unknown dtype \"f32\""},
        {"{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 1, "\"shape\" missing or not an array"},
        {T1("\"U8\"", "3", "[0,3]"), 3, "\"shape\" missing or not an array"},
        {T1("\"U8\"", "[-1]", "[0,0]"), 0, "shape[0] is not a non-negative integer"},
        {T1("\"U8\"", "[2,1.0]", "[0,2]"), 2, "shape[1] is not a non-negative integer"},
        {T1("\"U8\"", "[\"2\"]", "[0,2]"), 2, "shape[0] is not a non-negative integer"},
        {T1("\"U8\"", "[1,1,1,1,1,1,1,1,1]", "[0,1]"), 1, "9 dimensions, at most 8"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1, "\"data_offsets\" must be an array [BEGIN, END]"},
        {T1("\"U8\"", "[1]", "[0,1,2]"), 1, "\"data_offsets\" must be an array"},
        {T1("\"U8\"", "[1]", "{}"), 1, "\"data_offsets\" must be an array"},
        {T1("\"U8\"", "[0]", "[-1,-1]"), 0, "data_offsets are not non-negative integers"},
        {T1("\"U8\"", "[1]", "[0,\"1\"]"), 1, "data_offsets are not non-negative integers"},
        {T1("\"U8\"", "[1]", "[0,99999999999999999999]"), 1, "header is not valid JSON"},
        {T1("\"U8\"", "[4294967296,4294967296]", "[0,0]"), 0, "element count overflows"},
        {T1("\"F32\"", "[4611686018427387904,2]", "[0,0]"), 0, "bit count overflows"},
        {T1("\"F4\"", "[3]", "[0,2]"), 2, "F4[3] is 12 bits, not a whole number of bytes"},
        {T1("\"F32\"", "[0]", "[4,0]"), 4, "data_offsets [4,0] end before they begin"},
        {T1("\"F32\"", "[3]", "[0,10]"), 10, "tensor 'a': data_offsets [0,10] but F32[3] needs 12 bytes"},
        {T1("\"BF16\"", "[2,3]", "[0,6]"), 6, "but BF16[2,3] needs 12 bytes"},
        {T1("\"F32\"", "[]", "[0,8]"), 8, "but F32[] needs 4 bytes"},
        {"{\"__metadata__\":[1]}", 0, "__metadata__ is not a JSON object"},
        {"{\"__metadata__\":\"x\"}", 0, "__metadata__ is not a JSON object"},
        {"{\"__metadata__\":{\"k\":1}}", 0, "__metadata__['k'] is not a string"},
        {"{\"__metadata__\":{\"k\":{\"n\":\"v\"}}}", 0, "__metadata__['k'] is not a string"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        expect_fail_at(st_mk("m_field.safetensors", c[i].hdr, c[i].nd), ORK_E_FORMAT, c[i].what, (int)i);
}

#define E(n, dt, sh, b, e) "\"" n "\":{\"dtype\":\"" dt "\",\"shape\":" sh ",\"data_offsets\":[" b "," e "]}"

static void test_malformed_layout(void) {
    expect_fail(st_mk("m_start.safetensors", "{" E("a", "F32", "[1]", "4", "8") "}", 8), ORK_E_FORMAT,
                "tensor 'a': data starts at 4, the first tensor must start at 0");
    expect_fail(st_mk("m_hole.safetensors", "{" E("a", "F32", "[1]", "0", "4") "," E("b", "F32", "[1]", "8", "12") "}", 12),
                ORK_E_FORMAT, "tensor 'b': data starts at 8 but 'a' ends at 4 (hole)");
    expect_fail(st_mk("m_overlap.safetensors", "{" E("a", "F32", "[2]", "0", "8") "," E("b", "F32", "[1]", "4", "8") "}", 8),
                ORK_E_FORMAT, "tensor 'b': data starts at 4 but 'a' ends at 8 (overlap)");
    expect_fail(st_mk("m_same.safetensors", "{" E("a", "F32", "[1]", "0", "4") "," E("b", "F32", "[1]", "0", "4") "}", 8),
                ORK_E_FORMAT, "(overlap)");
    expect_fail(st_mk("m_empty_in.safetensors", "{" E("a", "F32", "[2]", "0", "8") "," E("e", "F32", "[0]", "4", "4") "}", 8),
                ORK_E_FORMAT, "tensor 'e': data starts at 4 but 'a' ends at 8 (overlap)");
    expect_fail(st_mk("m_trail.safetensors", "{" E("a", "F32", "[1]", "0", "4") "}", 5), ORK_E_FORMAT,
                "1 trailing bytes after the last tensor's data");
    expect_fail(st_mk("m_trail0.safetensors", "{}", 3), ORK_E_FORMAT, "3 trailing bytes");
    expect_fail(st_mk("m_trunc.safetensors", "{" E("a", "F32", "[2]", "0", "8") "}", 4), ORK_E_FORMAT,
                "tensor 'a': data ends at 8, past the 4 data bytes in the file");
}

static void test_open_errors(void) {
    expect_fail(st_path("does_not_exist.safetensors"), ORK_E_IO, "cannot open");
    expect_fail(g_dir, ORK_E_IO, "not a regular file");
}

/* ---- sharded sets ------------------------------------------------------- */
static void write_shard(const char *name, const char *const *names, size_t n) {
    static float data[4] = {1, 2, 3, 4};
    ork_st_writer *w;
    CU_ASSERT_EQUAL_FATAL(ork_st_writer_new(&w), ORK_OK);
    int64_t sh = 4;
    for (size_t i = 0; i < n; i++) CU_ASSERT_EQUAL(ork_st_writer_add(w, names[i], ORK_F32, 1, &sh, data, 16), ORK_OK);
    CU_ASSERT_EQUAL(ork_st_writer_commit(w, name), ORK_OK);
    ork_st_writer_free(w);
}

static void write_text(const char *path, const char *s) { CU_ASSERT_EQUAL(write_bytes(path, s, strlen(s)), 0); }

static void test_sets(void) {
    char d[400], p[512];
    snprintf(d, sizeof d, "%s/sharded", g_dir);
    mkdir(d, 0755);
    const char *s1[] = {"blk.0.w", "blk.1.w"}, *s2[] = {"blk.2.w"};
    snprintf(p, sizeof p, "%s/m-00001.safetensors", d);
    write_shard(p, s1, 2);
    snprintf(p, sizeof p, "%s/m-00002.safetensors", d);
    write_shard(p, s2, 1);
    /* a directory without an index: the union of its files */
    ork_st_set *set = NULL;
    log_reset();
    CU_ASSERT_EQUAL_FATAL(ork_st_set_open(d, &set), ORK_OK);
    CU_ASSERT(ork_st_set_count(set) == 3 && ork_st_set_nfiles(set) == 2);
    ork_st_set_close(set);

    snprintf(p, sizeof p, "%s/m.safetensors.index.json", d);
    write_text(p, "{\"metadata\":{\"total_size\":48},\"weight_map\":{\"blk.2.w\":\"m-00002.safetensors\","
                  "\"blk.0.w\":\"m-00001.safetensors\",\"blk.1.w\":\"m-00001.safetensors\"}}");
    const char *paths[] = {p, d};
    for (int k = 0; k < 2; k++) { /* the index itself, and the directory holding it */
        set = NULL;
        log_reset();
        CU_ASSERT_EQUAL_FATAL(ork_st_set_open(paths[k], &set), ORK_OK);
        CU_ASSERT_EQUAL(g_nlines, 0);
        CU_ASSERT_EQUAL(ork_st_set_count(set), 3);
        CU_ASSERT_EQUAL(ork_st_set_nfiles(set), 2);
        for (size_t i = 0; i < 3; i++) {
            char want[16];
            snprintf(want, sizeof want, "blk.%zu.w", i);
            CU_ASSERT_STRING_EQUAL(ork_st_set_at(set, i)->name, want);
        }
        const ork_st_tensor *t = ork_st_set_find(set, "blk.2.w");
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        float o[4];
        CU_ASSERT(ork_st_read_f32(t, o) == ORK_OK && o[3] == 4.0f);
        CU_ASSERT_PTR_NULL(ork_st_set_find(set, "blk.3.w"));
        ork_st_set_close(set);
    }
    /* a single file is a set of one */
    snprintf(p, sizeof p, "%s/m-00001.safetensors", d);
    CU_ASSERT_EQUAL_FATAL(ork_st_set_open(p, &set), ORK_OK);
    CU_ASSERT(ork_st_set_count(set) == 2 && ork_st_set_find(set, "blk.1.w"));
    ork_st_set_close(set);

    static const struct { const char *json; ork_status s; const char *what; } bad[] = {
        {"{\"weight_map\":{\"blk.0.w\":\"m-00001.safetensors\",\"blk.2.w\":\"m-00003.safetensors\"}}",
         ORK_E_IO, "m-00003.safetensors: cannot open"},
        {"{\"weight_map\":{\"blk.0.w\":\"m-00001.safetensors\",\"blk.2.w\":\"m-00001.safetensors\"}}",
         ORK_E_FORMAT, "tensor 'blk.2.w' is mapped to m-00001.safetensors but that shard does not hold it"},
        {"{\"metadata\":{}}", ORK_E_FORMAT, "\"weight_map\" missing or not an object"},
        {"{\"weight_map\":{\"blk.0.w\":\"../x.safetensors\"}}", ORK_E_FORMAT, "not a relative shard file name"},
        {"{\"weight_map\":{\"blk.0.w\":7}}", ORK_E_FORMAT, "weight_map['blk.0.w'] is not a relative"},
        {"{\"weight_map\":{\"blk.0.w\":\"m-00001.safetensors\",\"blk.0.w\":\"m-00001.safetensors\"}}",
         ORK_E_FORMAT, "duplicate object key"},
        {"{\"weight_map\":", ORK_E_FORMAT, "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(p, sizeof p, "%s/bad.json", d);
        write_text(p, bad[i].json);
        set = (ork_st_set *)1;
        log_reset();
        ork_status s = ork_st_set_open(p, &set);
        int ok = s == bad[i].s && !set && g_nlines == 1 && strstr(g_log, bad[i].what);
        if (!ok) printf("\n  case %zu: status %d, %d lines: %s", i, s, g_nlines, g_log);
        CU_ASSERT(ok);
    }
    /* a shard holding tensors the map does not name: warned, not part of the set */
    snprintf(p, sizeof p, "%s/bad.json", d);
    write_text(p, "{\"weight_map\":{\"blk.0.w\":\"m-00001.safetensors\"}}");
    log_reset();
    CU_ASSERT_EQUAL_FATAL(ork_st_set_open(p, &set), ORK_OK);
    CU_ASSERT(ork_st_set_count(set) == 1 && g_nlines == 1 && strstr(g_log, "1 tensors of m-00001.safetensors"));
    ork_st_set_close(set);
    /* a directory with two index files is ambiguous; the same name in two files is refused */
    snprintf(p, sizeof p, "%s/n.safetensors.index.json", d);
    write_text(p, "{\"weight_map\":{}}");
    log_reset();
    CU_ASSERT(ork_st_set_open(d, &set) == ORK_E_FORMAT && strstr(g_log, "expected at most one"));
    char d2[400];
    snprintf(d2, sizeof d2, "%s/dupdir", g_dir);
    mkdir(d2, 0755);
    snprintf(p, sizeof p, "%s/x1.safetensors", d2);
    write_shard(p, s1, 2);
    snprintf(p, sizeof p, "%s/x2.safetensors", d2);
    write_shard(p, s1, 1);
    log_reset();
    CU_ASSERT(ork_st_set_open(d2, &set) == ORK_E_FORMAT && g_nlines == 1 &&
              strstr(g_log, "tensor 'blk.0.w' is in both"));
    snprintf(d2, sizeof d2, "%s/emptydir", g_dir);
    mkdir(d2, 0755);
    log_reset();
    CU_ASSERT(ork_st_set_open(d2, &set) == ORK_E_IO && strstr(g_log, "no *.safetensors"));
}

/* ---- atomic commit ------------------------------------------------------ */
static int tmp_files_in(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) n += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return n;
}

static int64_t first_value(const char *path) {
    ork_st_file *f = NULL;
    if (ork_st_open(path, &f) != ORK_OK) return -1;
    int64_t v = ork_st_count(f) ? (int64_t)ork_st_at(f, 0)->nbytes : -2;
    ork_st_close(f);
    return v;
}

static ork_status commit_n(const char *path, uint64_t nbytes) {
    static uint8_t big[1 << 20];
    ork_st_writer *w;
    ORK_TRY(ork_st_writer_new(&w));
    int64_t sh = (int64_t)nbytes;
    ork_status s = ork_st_writer_add(w, "x", ORK_U8, 1, &sh, big, nbytes);
    if (s == ORK_OK) s = ork_st_writer_commit(w, path);
    ork_st_writer_free(w);
    return s;
}

static void test_atomic(void) {
    char d[400], p[512];
    snprintf(d, sizeof d, "%s/atomic", g_dir);
    mkdir(d, 0755);
    snprintf(p, sizeof p, "%s/ckpt.safetensors", d);
    CU_ASSERT_EQUAL(commit_n(p, 10), ORK_OK);
    CU_ASSERT_EQUAL(first_value(p), 10);
    CU_ASSERT_EQUAL(commit_n(p, 20), ORK_OK); /* replaces */
    CU_ASSERT_EQUAL(first_value(p), 20);
    CU_ASSERT_EQUAL(tmp_files_in(d), 0);

    /* a write that fails half-way (file size limit: works as root too) */
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 64 * 1024;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    CU_ASSERT_EQUAL_FATAL(setrlimit(RLIMIT_FSIZE, &lim), 0);
    log_reset();
    ork_status s = commit_n(p, 1 << 20);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    CU_ASSERT_EQUAL(s, ORK_E_IO);
    CU_ASSERT(g_nlines == 1 && strstr(g_log, "ckpt.safetensors: write failed"));
    CU_ASSERT_EQUAL(first_value(p), 20);
    CU_ASSERT_EQUAL(tmp_files_in(d), 0);

    /* rename fails: the target is a non-empty directory */
    char q[600], r[700];
    snprintf(q, sizeof q, "%s/isdir.safetensors", d);
    mkdir(q, 0755);
    snprintf(r, sizeof r, "%s/keep", q);
    write_text(r, "x");
    log_reset();
    CU_ASSERT_EQUAL(commit_n(q, 4), ORK_E_IO);
    CU_ASSERT(g_nlines == 1 && strstr(g_log, "isdir.safetensors: write failed"));
    CU_ASSERT_EQUAL(tmp_files_in(d), 0);

    /* an unwritable directory (skipped as root: root writes anyway) */
    if (geteuid() != 0) {
        chmod(d, 0555);
        log_reset();
        CU_ASSERT_EQUAL(commit_n(p, 30), ORK_E_IO);
        CU_ASSERT(g_nlines == 1 && strstr(g_log, "cannot create"));
        chmod(d, 0755);
        CU_ASSERT_EQUAL(first_value(p), 20);
        CU_ASSERT_EQUAL(tmp_files_in(d), 0);
    }
    /* a missing directory */
    snprintf(q, sizeof q, "%s/nodir/x.safetensors", d);
    CU_ASSERT_EQUAL(commit_n(q, 4), ORK_E_IO);
}

static const ork_test_case cases[] = {
    {"convert_exhaustive", test_convert_exhaustive},
    {"round_trip_all_dtypes", test_round_trip},
    {"writer_rejects", test_writer_rejects},
    {"python_fixture", test_python_fixture},
    {"unaligned", test_unaligned},
    {"valid_edge_cases", test_valid_edge_cases},
    {"malformed_size_field", test_malformed_size_field},
    {"malformed_text", test_malformed_text},
    {"malformed_fields", test_malformed_fields},
    {"malformed_layout", test_malformed_layout},
    {"open_errors", test_open_errors},
    {"sets", test_sets},
    {"atomic_commit", test_atomic},
    {NULL, NULL},
};

ORK_TEST_MAIN("safetensors", st_init, st_clean, cases)
