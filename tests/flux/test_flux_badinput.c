/* tests/flux/test_flux_badinput.c — bad FLUX checkpoints through the CLI:
 * `orakul plan` on a generated YAML whose model.name_or_path points at a
 * broken file must exit 2 with one error line on stderr that names the file
 * and the problem. The broken files are generated here, at test time, from
 * tests/fixtures/flux1_small_bfl.safetensors (no Python): re-serialised with
 * the core's writer (a missing tensor, a wrong shape, unknown keys) or edited
 * byte-wise / header-wise with jansson (truncated, a 2^60-byte header size,
 * overlapping offsets, an unknown dtype, trailing bytes, an empty file). */
#include "flux_test_util.h"
#include "ork_test_proc.h" /* orakul spawned without a shell, on Windows too */

#include <jansson.h>
#include <limits.h>
#include <sys/stat.h>

#define SRC FT_FIXTURES "/flux1_small_bfl.safetensors"

static char g_tmp[256];
static unsigned char *g_src;  /* the whole source file */
static size_t g_len;

static int setup(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/orakul-flux-bad-XXXXXX");
    if (!mkdtemp(g_tmp)) return 1;
    g_src = (unsigned char *)ork_test_read_all(SRC, &g_len);
    return g_src == NULL;
}
static int teardown(void) {
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    free(g_src);
    return system(cmd) == 0 ? 0 : 1;
}

static void path_of(const char *name, char *out, size_t n) { snprintf(out, n, "%s/%s", g_tmp, name); }

static int write_bytes(const char *path, const void *a, size_t na, const void *b, size_t nb) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int ok = fwrite(a, 1, na, f) == na && (nb == 0 || fwrite(b, 1, nb, f) == nb);
    return fclose(f) == 0 && ok;
}

/* ---- generators ------------------------------------------------------------------ */
/* Re-serialise the source with the core's writer: drop `drop`, reshape
 * `reshape` to (r0, r1), prefix every name with `prefix`. */
static int gen_rewrite(const char *path, const char *drop, const char *reshape, int64_t r0, int64_t r1,
                       const char *prefix) {
    ork_st_file *in = NULL;
    ork_st_writer *w = NULL;
    if (ork_st_open(SRC, &in) != ORK_OK || ork_st_writer_new(&w) != ORK_OK) return 0;
    int ok = 1;
    for (size_t i = 0; ok && i < ork_st_count(in); i++) {
        const ork_st_tensor *t = ork_st_at(in, i);
        if (drop && !strcmp(t->name, drop)) continue;
        int64_t shape[8];
        memcpy(shape, t->shape, sizeof shape);
        if (reshape && !strcmp(t->name, reshape)) { shape[0] = r0; shape[1] = r1; }
        char name[512];
        snprintf(name, sizeof name, "%s%s", prefix ? prefix : "", t->name);
        ok = ork_st_writer_add(w, name, t->dtype, t->ndim, shape, t->data, t->nbytes) == ORK_OK;
    }
    ok = ok && ork_st_writer_commit(w, path) == ORK_OK;
    ork_st_writer_free(w);
    ork_st_close(in);
    return ok;
}

/* The source with its header JSON edited by fn. */
static int gen_header(const char *path, void (*fn)(json_t *hdr)) {
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= (uint64_t)g_src[i] << (8 * i);
    json_error_t err;
    json_t *h = json_loadb((const char *)g_src + 8, n, 0, &err);
    if (!h) return 0;
    fn(h);
    char *txt = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    if (!txt) return 0;
    size_t hl = strlen(txt), padded = (hl + 7) / 8 * 8;
    unsigned char *out = malloc(8 + padded);
    int ok = 0;
    if (out) {
        for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)padded >> (8 * i));
        memcpy(out + 8, txt, hl);
        memset(out + 8 + hl, ' ', padded - hl);
        ok = write_bytes(path, out, 8 + padded, g_src + 8 + n, g_len - 8 - n);
    }
    free(out);
    free(txt);
    return ok;
}

/* the entry whose data_offsets begin at `begin` */
static json_t *entry_at(json_t *h, uint64_t begin) {
    const char *k;
    json_t *v;
    json_object_foreach(h, k, v) {
        json_t *o = json_object_get(v, "data_offsets");
        if (o && json_integer_value(json_array_get(o, 0)) == (json_int_t)begin) return v;
    }
    return NULL;
}

/* the second tensor in file order starts 4 bytes before the first one ends */
static void edit_overlap(json_t *h) {
    json_t *a = entry_at(h, 0);
    json_int_t end = json_integer_value(json_array_get(json_object_get(a, "data_offsets"), 1));
    json_t *b = entry_at(h, (uint64_t)end);
    json_t *o = json_object_get(b, "data_offsets");
    json_int_t b0 = json_integer_value(json_array_get(o, 0)), b1 = json_integer_value(json_array_get(o, 1));
    json_array_set_new(o, 0, json_integer(b0 - 4));
    json_array_set_new(o, 1, json_integer(b1 - 4));
}

static void edit_dtype(json_t *h) { json_object_set_new(entry_at(h, 0), "dtype", json_string("Q7")); }

static int gen_truncated(const char *path) { return write_bytes(path, g_src, g_len / 2, NULL, 0); }
static int gen_huge_header(const char *path) {
    unsigned char n[8] = {0, 0, 0, 0, 0, 0, 0, 0x10}; /* 2^60, little-endian */
    return write_bytes(path, n, 8, g_src + 8, g_len - 8);
}
static int gen_trailing(const char *path) {
    static const unsigned char junk[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    return write_bytes(path, g_src, g_len, junk, sizeof junk);
}
static int gen_empty(const char *path) { return write_bytes(path, "", 0, NULL, 0); }

/* ---- orakul plan ------------------------------------------------------------------ */
static char g_err[1 << 16];

/* Write a plan config for ckpt, run `orakul plan`, keep stderr in g_err; return the exit code. */
static int plan(const char *ckpt) {
    char cfg[PATH_MAX + 32], errf[PATH_MAX + 32], outf[PATH_MAX + 32];
    snprintf(cfg, sizeof cfg, "%s/plan.yaml", g_tmp);
    snprintf(errf, sizeof errf, "%s/stderr.txt", g_tmp);
    snprintf(outf, sizeof outf, "%s/stdout.txt", g_tmp);
    FILE *f = fopen(cfg, "w");
    if (!f) return -1;
    fprintf(f,
            "job: extension\n"
            "config:\n"
            "  name: bad\n"
            "  process:\n"
            "    - type: sd_trainer\n"
            "      device: cpu\n"
            "      datasets:\n"
            "        - folder_path: %s/assets/photos\n"
            "      model:\n"
            "        name_or_path: \"%s\"\n"
            "        arch: flux\n"
            "      plugins:\n"
            "        path: [\"%s\"]\n"
            "      train:\n"
            "        optimizer: adamw\n"
            "        loss_type: mse\n",
            ORK_SOURCE_DIR, ckpt, ORK_PLUGIN_DIR);
    fclose(f);
    /* in g_tmp, without ORAKUL_PLUGIN_PATH: the config's plugins.path only */
    const char *argv[] = {ORK_CLI_EXE, "plan", cfg, NULL}, *env[] = {"ORAKUL_PLUGIN_PATH", NULL};
    int code = ork_test_spawn(argv, env, g_tmp, outf, errf);
    g_err[0] = 0;
    char *e = ork_test_read_text(errf); /* "\r\n" on Windows made "\n" */
    if (e) {
        snprintf(g_err, sizeof g_err, "%s", e);
        free(e);
    }
    return code;
}

/* Exactly one "error" line; it names the file and contains every key. */
static void expect_error(const char *file, const char *k1, const char *k2) {
    char path[PATH_MAX];
    path_of(file, path, sizeof path);
    int code = plan(path);
    int nerr = 0;
    const char *line = NULL;
    for (const char *p = g_err; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p) : strlen(p);
        char buf[4096];
        snprintf(buf, sizeof buf, "%.*s", (int)(l < sizeof buf ? l : sizeof buf - 1), p);
        if (strstr(buf, "error")) {
            nerr++;
            if (!line) line = p;
        }
        p = nl ? nl + 1 : NULL;
    }
    char first[4096] = "";
    if (line) {
        const char *nl = strchr(line, '\n');
        snprintf(first, sizeof first, "%.*s", (int)(nl ? nl - line : (long)strlen(line)), line);
    }
    printf("\n    %-22s exit %d: %s", file, code, first);
    CU_ASSERT_EQUAL(code, 2);
    CU_ASSERT_EQUAL(nerr, 1);
    int named = strstr(first, path) != NULL, has1 = !k1 || strstr(first, k1), has2 = !k2 || strstr(first, k2);
    CU_ASSERT(named);
    CU_ASSERT(has1);
    CU_ASSERT(has2);
    if (!named || !has1 || !has2 || nerr != 1) printf("\n    stderr was:\n%s", g_err);
}

static void test_good_file_plans(void) {
    /* the generator's base case: the untouched source and a plain re-serialisation plan fine */
    char path[PATH_MAX];
    path_of("rewritten.safetensors", path, sizeof path);
    CU_ASSERT_FATAL(gen_rewrite(path, NULL, NULL, 0, 0, NULL));
    CU_ASSERT_EQUAL(plan(SRC), 0);
    CU_ASSERT_EQUAL(plan(path), 0);
    if (plan(path) != 0) printf("\n%s", g_err);
}

static void test_missing_tensor(void) {
    char p[PATH_MAX];
    path_of("missing.safetensors", p, sizeof p);
    CU_ASSERT_FATAL(gen_rewrite(p, "double_blocks.1.txt_attn.proj.weight", NULL, 0, 0, NULL));
    expect_error("missing.safetensors", "missing tensor", "double_blocks.1.txt_attn.proj.weight");
}
static void test_wrong_shape(void) {
    char p[PATH_MAX];
    path_of("shape.safetensors", p, sizeof p);
    CU_ASSERT_FATAL(gen_rewrite(p, NULL, "double_blocks.0.img_attn.proj.weight", 32, 128, NULL));
    expect_error("shape.safetensors", "shape [32,128], expected [64,64]", "double_blocks.0.img_attn.proj.weight");
}
static void test_unknown_keys(void) {
    char p[PATH_MAX];
    path_of("keys.safetensors", p, sizeof p);
    CU_ASSERT_FATAL(gen_rewrite(p, NULL, NULL, 0, 0, "unet.down."));
    expect_error("keys.safetensors", "no known FLUX variant", NULL);
}
static void test_truncated(void) {
    char p[PATH_MAX];
    path_of("truncated.safetensors", p, sizeof p);
    CU_ASSERT_FATAL(gen_truncated(p));
    expect_error("truncated.safetensors", "truncated", NULL);
}
static void test_huge_header(void) {
    char p[PATH_MAX];
    path_of("huge_header.safetensors", p, sizeof p);
    CU_ASSERT_FATAL(gen_huge_header(p));
    expect_error("huge_header.safetensors", "header size 1152921504606846976", "limit");
}
static void test_overlap(void) {
    char p[PATH_MAX];
    path_of("overlap.safetensors", p, sizeof p);
    CU_ASSERT_FATAL(gen_header(p, edit_overlap));
    expect_error("overlap.safetensors", "overlap", NULL);
}
static void test_unknown_dtype(void) {
    char p[PATH_MAX];
    path_of("dtype.safetensors", p, sizeof p);
    CU_ASSERT_FATAL(gen_header(p, edit_dtype));
    expect_error("dtype.safetensors", "unknown dtype", "Q7");
}
static void test_trailing(void) {
    char p[PATH_MAX];
    path_of("trailing.safetensors", p, sizeof p);
    CU_ASSERT_FATAL(gen_trailing(p));
    expect_error("trailing.safetensors", "16 trailing bytes", NULL);
}
static void test_empty(void) {
    char p[PATH_MAX];
    path_of("empty.safetensors", p, sizeof p);
    CU_ASSERT_FATAL(gen_empty(p));
    expect_error("empty.safetensors", "shorter than the 8-byte header", NULL);
}
static void test_absent(void) {
    expect_error("absent.safetensors", "no such file or folder", NULL);
}

static const ork_test_case cases[] = {
    {"the source and its re-serialisation plan (exit 0)", test_good_file_plans},
    {"a missing tensor", test_missing_tensor},
    {"a tensor of the wrong shape", test_wrong_shape},
    {"keys of no known FLUX variant", test_unknown_keys},
    {"a truncated file", test_truncated},
    {"a header that claims 2^60 bytes", test_huge_header},
    {"overlapping data offsets", test_overlap},
    {"an unknown dtype", test_unknown_dtype},
    {"trailing bytes", test_trailing},
    {"an empty file", test_empty},
    {"a path that does not exist", test_absent},
    {NULL, NULL},
};

ORK_TEST_MAIN("flux_badinput", setup, teardown, cases)
