/* tests/text/test_text_cache_len.c — the text cache's entries of an UNMASKED
 * slot (core/train/text_cache.h: ork_text_cache_write_len / load_len): a
 * caption of len < T valid rows is written as txt (len, ctx) with metadata
 * length, read back into (T, ctx) with its rows equal, the rest zeroed and
 * *len the written length; a full-length entry reads as len T; the plain load
 * refuses a trimmed entry (a miss, never padded rows taken for the caption's);
 * an entry whose length metadata disagrees with its rows is refused; a
 * length outside 1 .. T is refused at write. CPU, files under /tmp. */
#include "ork_test.h"

#include "io/safetensors.h"
#include "io/st_check.h" /* ork_st_writer_checksum */
#include "train/text_cache.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { T = 6, C = 4, V = 2 };
static char dir[64];

static int init(void) {
    snprintf(dir, sizeof dir, "/tmp/ork_tclen_XXXXXX");
    return mkdtemp(dir) ? 0 : 1;
}
static int clean(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return dir[0] && system(cmd) != 0;
}

static const char *at(const char *name) {
    static char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static void t_len_roundtrip(void) {
    float txt[T * C], vec[V], rt[T * C], rv[V];
    for (int i = 0; i < T * C; i++) txt[i] = 1.0f + 0.5f * (float)i;
    for (int i = 0; i < V; i++) vec[i] = -2.0f - (float)i;
    const char *p = at("short.safetensors");
    CU_ASSERT_EQUAL_FATAL(ork_text_cache_write_len(p, "enc unmasked", T, C, V, "cap", 4, txt, vec), ORK_OK);
    for (int i = 0; i < T * C; i++) rt[i] = 99.0f; /* the tail must be written */
    int len = -1;
    CU_ASSERT_EQUAL(ork_text_cache_load_len(p, "enc unmasked", T, C, V, "cap", rt, rv, &len), ORK_OK);
    CU_ASSERT_EQUAL(len, 4);
    CU_ASSERT(!memcmp(rt, txt, 4 * C * sizeof *rt));
    int zero = 1;
    for (int i = 4 * C; i < T * C; i++) zero &= rt[i] == 0.0f;
    CU_ASSERT(zero);
    CU_ASSERT(!memcmp(rv, vec, sizeof vec));
    /* the file holds the trimmed rows and says so */
    ork_st_file *f;
    CU_ASSERT_EQUAL_FATAL(ork_st_open(p, &f), ORK_OK);
    const ork_st_tensor *tt = ork_st_find(f, "txt");
    CU_ASSERT(tt && tt->ndim == 2 && tt->shape[0] == 4 && tt->shape[1] == C);
    CU_ASSERT(ork_st_meta(f, "length") && !strcmp(ork_st_meta(f, "length"), "4"));
    CU_ASSERT(ork_st_meta(f, "max_length") && !strcmp(ork_st_meta(f, "max_length"), "6"));
    ork_st_close(f);
    /* the plain load (every row counts) does not take it: a miss */
    ork_log_demote(1);
    CU_ASSERT_NOT_EQUAL(ork_text_cache_load(p, "enc unmasked", T, C, V, "cap", rt, rv), ORK_OK);
    /* another caption or identity: not this entry */
    CU_ASSERT_EQUAL(ork_text_cache_load_len(p, "enc unmasked", T, C, V, "cap2", rt, rv, &len), ORK_E_FORMAT);
    CU_ASSERT_EQUAL(ork_text_cache_load_len(p, "enc", T, C, V, "cap", rt, rv, &len), ORK_E_FORMAT);
    /* more rows than T asked: refused */
    CU_ASSERT_NOT_EQUAL(ork_text_cache_load_len(p, "enc unmasked", 3, C, V, "cap", rt, rv, &len), ORK_OK);
    /* lengths outside 1 .. T: refused at write */
    CU_ASSERT_EQUAL(ork_text_cache_write_len(at("bad.safetensors"), "e", T, C, V, "c", 0, txt, vec), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_text_cache_write_len(at("bad.safetensors"), "e", T, C, V, "c", T + 1, txt, vec), ORK_E_INVALID);
    ork_log_demote(-1);
    CU_ASSERT_FALSE(access(at("bad.safetensors"), F_OK) == 0);
    /* a full-length entry (the plain write) reads as len T */
    const char *q = at("full.safetensors");
    CU_ASSERT_EQUAL_FATAL(ork_text_cache_write(q, "enc", T, C, V, "cap", txt, vec), ORK_OK);
    len = -1;
    CU_ASSERT_EQUAL(ork_text_cache_load_len(q, "enc", T, C, V, "cap", rt, rv, &len), ORK_OK);
    CU_ASSERT_EQUAL(len, T);
    CU_ASSERT(!memcmp(rt, txt, sizeof txt));
}

/* A trimmed txt whose length metadata is missing or another number: refused
 * (its rows would be taken for a caption's whole text). */
static void t_len_mismatch(void) {
    float txt[T * C] = {0}, rt[T * C];
    int64_t sh[2] = {3, C};
    const char *metas[] = {NULL, "2"};
    for (int m = 0; m < 2; m++) {
        ork_st_writer *w;
        CU_ASSERT_EQUAL_FATAL(ork_st_writer_new(&w), ORK_OK);
        ork_st_writer_checksum(w, 1);
        CU_ASSERT_EQUAL(ork_st_writer_add(w, "txt", ORK_F32, 2, sh, txt, 3 * C * sizeof(float)), ORK_OK);
        CU_ASSERT_EQUAL(ork_st_writer_meta(w, "format", ORK_TEXT_CACHE_FORMAT), ORK_OK);
        CU_ASSERT_EQUAL(ork_st_writer_meta(w, "encoder", "enc"), ORK_OK);
        CU_ASSERT_EQUAL(ork_st_writer_meta(w, "max_length", "6"), ORK_OK);
        CU_ASSERT_EQUAL(ork_st_writer_meta(w, "caption", "cap"), ORK_OK);
        if (metas[m]) CU_ASSERT_EQUAL(ork_st_writer_meta(w, "length", metas[m]), ORK_OK);
        CU_ASSERT_EQUAL_FATAL(ork_st_writer_commit(w, at("mm.safetensors")), ORK_OK);
        ork_st_writer_free(w);
        int len = -1;
        ork_log_demote(1);
        CU_ASSERT_EQUAL(ork_text_cache_load_len(at("mm.safetensors"), "enc", T, C, 0, "cap", rt, NULL, &len),
                        ORK_E_FORMAT);
        ork_log_demote(-1);
        CU_ASSERT_EQUAL(len, -1);
    }
}

static const ork_test_case cases[] = {
    {"an UNMASKED caption's entry: len rows written, read back with its length", t_len_roundtrip},
    {"a trimmed entry whose length metadata disagrees: refused", t_len_mismatch},
    {NULL, NULL},
};

ORK_TEST_MAIN("text_cache_len", init, clean, cases)
