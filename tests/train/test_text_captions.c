/* test_text_captions.c — captions as ai-toolkit reads them and the text cache
 * (issue #28 points 5, 6), on the CPU without a text encoder:
 *  - a table of datasets (caption files, caption_ext with and without its dot,
 *    default_caption for a missing and an empty caption file, trigger_word with
 *    "[trigger]"/"[name]" replaced and prepended when missing, is_reg) against
 *    what ai-toolkit's load_caption + get_caption + inject_trigger_into_prompt
 *    give (the expected strings were worked out from that code, FORMATS.md §1;
 *    up to whitespace: orakul trims a caption file and keeps ", " as written,
 *    where ai-toolkit keeps the newline and re-joins ','-split pieces with
 *    ", " — both tokenizers collapse the difference, data/dataset.h), and each
 *    dataset's dropout caption (get_dropout_caption);
 *  - sample prompts: "[trigger]"/"[name]" replaced, never prepended, as written
 *    without a trigger word; prompts that name .safetensors files stay files;
 *  - shuffle_tokens, keep_tokens, token_dropout_rate: accepted with one
 *    warning each (an embedding encoded once cannot follow a per-step text);
 *  - caption dropout: a pure function of (seed, micro-batch, slot), rate 0
 *    never, 1 always, 0.05 and 0.3 within 5 sigma over 200k draws;
 *  - the text cache: the key follows caption, identity and max length; an
 *    entry reads back bit for bit; another caption, identity or shape at the
 *    same path, a flipped byte, a NaN (with valid checksums), a file without
 *    checksums and a truncated file are refused with one line and no crash. */
#include "ork_test.h"

#include "config/config.h"
#include "data/dataset.h"
#include "io/safetensors.h"
#include "train/job.h"
#include "train/samples.h"
#include "train/text_cache.h"
#include "util/log.h"

#include <math.h>
#include <stdint.h>
#include <sys/stat.h>

static char root[256];

static void put(const char *rel, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    FILE *f = fopen(p, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}
static const char *at(const char *rel) {
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", root, rel);
    return p[k];
}

static int init(void) {
    snprintf(root, sizeof root, "/tmp/ork_textcap_XXXXXX");
    if (!mkdtemp(root)) return 1;
    char p[512];
    snprintf(p, sizeof p, "%s/set", root);
    if (mkdir(p, 0755) != 0) return 1;
    /* images need not decode: the scan only lists them */
    put("set/a.png", "x");
    put("set/b.png", "x");
    put("set/c.png", "x");
    put("set/d.png", "x");
    put("set/e.png", "x");
    put("set/a.txt", "a photo of [trigger], smiling\n");
    put("set/b.txt", "ohwx riding a bike");
    put("set/c.txt", "   \n"); /* empty after trimming: default_caption */
    /* d: no caption file: default_caption */
    put("set/e.txt", "[name] and [trigger] at the beach");
    put("set/a.cap", "from the .cap file");
    return 0;
}
static int clean(void) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : 1;
}

static const char *cap_of(const ork_dataset *ds, const char *name) {
    for (size_t i = 0; i < ds->n; i++)
        if (!strcmp(ds->items[i].name, name)) return ds->items[i].caption;
    return "(missing)";
}

/* ---- captions ------------------------------------------------------------- */

typedef struct cap_case {
    const char *ext, *def, *trigger;
    int is_reg;
    const char *want[5]; /* a b c d e */
    const char *drop;    /* the dropout caption */
} cap_case;

static void t_caption_table(void) {
    static const cap_case cases[] = {
        /* no trigger: [trigger] and [name] become "" (inject_trigger_into_prompt with trigger None) */
        {".txt", NULL, NULL, 0,
         {"a photo of , smiling", "ohwx riding a bike", "", "", " and  at the beach"}, ""},
        /* default_caption for the empty and the missing caption file */
        {"txt", "a default photo", NULL, 0,
         {"a photo of , smiling", "ohwx riding a bike", "a default photo", "a default photo", " and  at the beach"}, ""},
        /* trigger: replaced where written, prepended where missing (case-sensitive), the dropout caption is it */
        {".txt", "a default photo", "ohwx", 0,
         {"a photo of ohwx, smiling", "ohwx riding a bike", "ohwx a default photo", "ohwx a default photo",
          "ohwx and ohwx at the beach"},
         "ohwx "},
        {".txt", NULL, "OHWX", 0,
         {"a photo of OHWX, smiling", "OHWX ohwx riding a bike", "OHWX ", "OHWX ", "OHWX and OHWX at the beach"},
         "OHWX "},
        /* a regularisation set: replaced, never prepended; its dropout caption is "" */
        {".txt", NULL, "ohwx", 1,
         {"a photo of ohwx, smiling", "ohwx riding a bike", "", "", "ohwx and ohwx at the beach"}, ""},
        /* caption_ext: another extension (no dot given) */
        {"cap", "dflt", NULL, 0, {"from the .cap file", "dflt", "dflt", "dflt", "dflt"}, ""},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const cap_case *k = &cases[c];
        ork_dataset ds;
        ork_dataset_opts o = {.folder_path = at("set"), .caption_ext = k->ext, .default_caption = k->def,
                              .trigger_word = k->trigger, .is_reg = k->is_reg};
        CU_ASSERT_EQUAL_FATAL(ork_dataset_scan(&o, &ds), ORK_OK);
        static const char *const names[] = {"a.png", "b.png", "c.png", "d.png", "e.png"};
        for (int i = 0; i < 5; i++) {
            const char *got = cap_of(&ds, names[i]);
            if (strcmp(got, k->want[i])) printf("\n  case %zu %s: '%s', want '%s'", c, names[i], got, k->want[i]);
            CU_ASSERT_STRING_EQUAL(got, k->want[i]);
        }
        char *drop = NULL;
        CU_ASSERT_EQUAL(ork_dataset_dropout_caption(&ds, &drop), ORK_OK);
        CU_ASSERT_STRING_EQUAL(drop ? drop : "(null)", k->drop);
        free(drop);
        ork_dataset_free(&ds);
    }
}

/* ---- sample prompts -------------------------------------------------------- */

static ork_samples *samples_of(const char *trigger_line, const char *prompts, ork_config **cfg) {
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "job: extension\nconfig:\n  name: t\n  process:\n    - type: sd_trainer\n      training_folder: %s\n%s"
             "      datasets:\n        - folder_path: %s\n      model:\n        name_or_path: x\n"
             "      sample:\n        prompts: %s\n",
             at("out"), trigger_line, at("set"), prompts);
    put("cfg.yaml", yaml);
    *cfg = NULL;
    if (ork_config_load(at("cfg.yaml"), cfg) != ORK_OK) return NULL;
    static ork_model_info mi;
    memset(&mi, 0, sizeof mi);
    mi.abi = (ork_abi)ORK_ABI_INIT(ork_model_info);
    mi.family = "flux";
    mi.variant = "custom";
    mi.context_dim = 4;
    mi.context_len = 2;
    mi.vec_dim = 3;
    mi.token_channels = 48;
    mi.pixels_per_token = 16;
    mi.has_guidance = 1;
    ork_samples *s = NULL;
    if (ork_samples_create(*cfg, &mi, 2, at("out"), "t", &s) != ORK_OK) return NULL;
    return s;
}

static void t_sample_prompts(void) {
    ork_config *cfg;
    ork_samples *s = samples_of("      trigger_word: ohwx\n",
                                "[\"[trigger] on a bike\", \"a dog\", \"[name], [trigger]\", \"\"]", &cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(ork_samples_text_count(s), 3); /* the empty prompt is empty conditioning */
    CU_ASSERT_STRING_EQUAL(ork_samples_text_at(s, 0), "ohwx on a bike");
    CU_ASSERT_STRING_EQUAL(ork_samples_text_at(s, 1), "a dog"); /* never prepended to a sample prompt */
    CU_ASSERT_STRING_EQUAL(ork_samples_text_at(s, 2), "ohwx, ohwx");
    CU_ASSERT_PTR_NULL(ork_samples_text_at(s, 3));
    float txt[8] = {1, 2, 3, 4, 5, 6, 7, 8}, vec[3] = {1, 2, 3};
    CU_ASSERT_EQUAL(ork_samples_text_set(s, 1, txt, vec), ORK_OK);
    ork_log_demote(1);
    CU_ASSERT_NOT_EQUAL(ork_samples_text_set(s, 3, txt, vec), ORK_OK);
    ork_log_demote(-1);
    ork_samples_destroy(s);
    ork_config_free(cfg);
    /* without a trigger word the prompt is as written (ai-toolkit injects only when one is set) */
    s = samples_of("", "[\"[trigger] on a bike\"]", &cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(ork_samples_text_count(s), 1);
    CU_ASSERT_STRING_EQUAL(ork_samples_text_at(s, 0), "[trigger] on a bike");
    ork_samples_destroy(s);
    ork_config_free(cfg);
}

/* ---- keys accepted but not implemented ------------------------------------ */

static int n_warn_shuffle, n_warn_keep, n_warn_tdrop;
static void warn_sink(ork_log_level lvl, const char *line, void *user) {
    (void)user;
    if (lvl != ORK_LOG_WARN) return;
    n_warn_shuffle += strstr(line, "ignored: datasets[0].shuffle_tokens") != NULL;
    n_warn_keep += strstr(line, "ignored: datasets[0].keep_tokens") != NULL;
    n_warn_tdrop += strstr(line, "ignored: datasets[0].token_dropout_rate") != NULL;
}

/* shuffle_tokens, keep_tokens, token_dropout_rate change the text every step,
 * which one encode cannot follow: accepted, one warning each (silent at
 * ai-toolkit's defaults) */
static void t_token_keys_warn(void) {
    char yaml[1024];
    for (int on = 0; on < 2; on++) {
        snprintf(yaml, sizeof yaml,
                 "job: extension\nconfig:\n  name: t\n  process:\n    - type: sd_trainer\n"
                 "      datasets:\n        - folder_path: %s\n          shuffle_tokens: %s\n"
                 "          keep_tokens: %d\n          token_dropout_rate: %s\n"
                 "      model:\n        name_or_path: x\n",
                 at("set"), on ? "true" : "false", on ? 2 : 0, on ? "0.1" : "0");
        put("cfg2.yaml", yaml);
        n_warn_shuffle = n_warn_keep = n_warn_tdrop = 0;
        ork_log_set_sink(warn_sink, NULL);
        ork_config *cfg = NULL;
        ork_status s = ork_config_load(at("cfg2.yaml"), &cfg);
        ork_log_set_sink(NULL, NULL);
        CU_ASSERT_EQUAL(s, ORK_OK);
        ork_config_free(cfg);
        CU_ASSERT_EQUAL(n_warn_shuffle, on);
        CU_ASSERT_EQUAL(n_warn_keep, on);
        CU_ASSERT_EQUAL(n_warn_tdrop, on);
    }
}

/* ---- caption dropout ------------------------------------------------------- */

static void t_dropout_draws(void) {
    const double rates[] = {0.05, 0.3};
    for (int r = 0; r < 2; r++) {
        int n = 200000, hit = 0;
        for (int q = 0; q < n; q++) hit += ork_train_caption_dropped(42, q / 4, q % 4, rates[r]);
        double p = rates[r], sd = sqrt(n * p * (1 - p));
        printf("\n  rate %.2f: %d of %d dropped (expected %.0f +- %.0f)", p, hit, n, n * p, sd);
        CU_ASSERT(fabs(hit - n * p) < 5 * sd);
    }
    int never = 0, always = 0, same = 1, differ = 0;
    for (int k = 0; k < 1000; k++) {
        never += ork_train_caption_dropped(7, k, 0, 0.0);
        always += ork_train_caption_dropped(7, k, 1, 1.0);
        same &= ork_train_caption_dropped(7, k, 2, 0.5) == ork_train_caption_dropped(7, k, 2, 0.5);
        differ += ork_train_caption_dropped(7, k, 2, 0.5) != ork_train_caption_dropped(8, k, 2, 0.5);
    }
    CU_ASSERT_EQUAL(never, 0);
    CU_ASSERT_EQUAL(always, 1000);
    CU_ASSERT(same); /* a pure function: a resumed run draws the same */
    CU_ASSERT(differ > 300 && differ < 700); /* the seed matters */
}

/* ---- the text cache -------------------------------------------------------- */

enum { T = 3, C = 4, V = 2 };

static void fill(float *txt, float *vec, float base) {
    for (int i = 0; i < T * C; i++) txt[i] = base + 0.25f * (float)i;
    for (int i = 0; i < V; i++) vec[i] = -base - (float)i;
}

static ork_status load(const char *path, const char *id, int t, const char *cap, float *txt, float *vec) {
    ork_log_demote(1);
    ork_status s = ork_text_cache_load(path, id, t, C, V, cap, txt, vec);
    ork_log_demote(-1);
    return s;
}

static void t_cache_key(void) {
    uint64_t k = ork_text_cache_key("enc-a", 512, "a dog");
    CU_ASSERT_EQUAL(k, ork_text_cache_key("enc-a", 512, "a dog"));
    CU_ASSERT_NOT_EQUAL(k, ork_text_cache_key("enc-a", 512, "a dog "));
    CU_ASSERT_NOT_EQUAL(k, ork_text_cache_key("enc-b", 512, "a dog"));
    CU_ASSERT_NOT_EQUAL(k, ork_text_cache_key("enc-a", 256, "a dog"));
    /* the fields are separated: moving a character from identity to caption changes the key */
    CU_ASSERT_NOT_EQUAL(ork_text_cache_key("ab", 1, "c"), ork_text_cache_key("a", 1, "bc"));
    char p[256];
    ork_text_cache_path("/x/_text_cache", 0x1234, p, sizeof p);
    CU_ASSERT_STRING_EQUAL(p, "/x/_text_cache/0000000000001234.safetensors");
}

static void t_cache_roundtrip(void) {
    float txt[T * C], vec[V], rt[T * C], rv[V];
    fill(txt, vec, 1.5f);
    const char *p = at("e1.safetensors");
    CU_ASSERT_EQUAL(load(p, "enc", T, "cap", rt, rv), ORK_E_IO); /* none yet */
    CU_ASSERT_EQUAL_FATAL(ork_text_cache_write(p, "enc", T, C, V, "cap", txt, vec), ORK_OK);
    CU_ASSERT_EQUAL(load(p, "enc", T, "cap", rt, rv), ORK_OK);
    CU_ASSERT(!memcmp(rt, txt, sizeof txt) && !memcmp(rv, vec, sizeof vec));
    /* the same path asked for another caption, identity or shape: not this entry */
    CU_ASSERT_EQUAL(load(p, "enc", T, "cap2", rt, rv), ORK_E_FORMAT);
    CU_ASSERT_EQUAL(load(p, "enc2", T, "cap", rt, rv), ORK_E_FORMAT);
    CU_ASSERT_NOT_EQUAL(load(p, "enc", T + 1, "cap", rt, rv), ORK_OK);
    ork_log_demote(1);
    CU_ASSERT_NOT_EQUAL(ork_text_cache_load(p, "enc", T, C + 1, V, "cap", rt, rv), ORK_OK);
    ork_log_demote(-1);
    /* what orakul-te/1 readers expect: txt (T, C), vec (V), the format in the metadata */
    ork_st_file *f;
    CU_ASSERT_EQUAL_FATAL(ork_st_open(p, &f), ORK_OK);
    CU_ASSERT_STRING_EQUAL(ork_st_meta(f, "format"), "orakul-te/1");
    CU_ASSERT_STRING_EQUAL(ork_st_meta(f, "caption"), "cap");
    CU_ASSERT_PTR_NOT_NULL(ork_st_find(f, "txt"));
    CU_ASSERT_PTR_NOT_NULL(ork_st_find(f, "vec"));
    ork_st_close(f);
}

static void spit(const char *path, const char *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(b, 1, n, f);
        fclose(f);
    }
}

static void t_cache_damage(void) {
    float txt[T * C], vec[V], rt[T * C], rv[V];
    fill(txt, vec, 2.0f);
    const char *p = at("e2.safetensors");
    CU_ASSERT_EQUAL_FATAL(ork_text_cache_write(p, "enc", T, C, V, "cap", txt, vec), ORK_OK);
    size_t n = 0;
    char *good = ork_test_read_all(p, &n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(good);
    /* a flipped byte in the data (the last byte is a float's): the checksum */
    char *b = malloc(n);
    memcpy(b, good, n);
    b[n - 1] ^= 0x40;
    spit(p, b, n);
    CU_ASSERT_EQUAL(load(p, "enc", T, "cap", rt, rv), ORK_E_FORMAT);
    /* truncated: the reader refuses it */
    spit(p, good, n / 2);
    CU_ASSERT_NOT_EQUAL(load(p, "enc", T, "cap", rt, rv), ORK_OK);
    /* garbage */
    spit(p, "not a safetensors file", 22);
    CU_ASSERT_NOT_EQUAL(load(p, "enc", T, "cap", rt, rv), ORK_OK);
    /* a NaN written with valid checksums: the finiteness check */
    txt[5] = NAN;
    CU_ASSERT_EQUAL_FATAL(ork_text_cache_write(p, "enc", T, C, V, "cap", txt, vec), ORK_OK);
    CU_ASSERT_EQUAL(load(p, "enc", T, "cap", rt, rv), ORK_E_NUMERIC);
    txt[5] = 1.0f;
    vec[1] = INFINITY;
    CU_ASSERT_EQUAL_FATAL(ork_text_cache_write(p, "enc", T, C, V, "cap", txt, vec), ORK_OK);
    CU_ASSERT_EQUAL(load(p, "enc", T, "cap", rt, rv), ORK_E_NUMERIC);
    /* a file without checksums (not one orakul wrote) */
    vec[1] = 0;
    ork_st_writer *w;
    CU_ASSERT_EQUAL_FATAL(ork_st_writer_new(&w), ORK_OK);
    int64_t st[2] = {T, C}, sv[1] = {V};
    ork_st_writer_add(w, "txt", ORK_F32, 2, st, txt, sizeof txt);
    ork_st_writer_add(w, "vec", ORK_F32, 1, sv, vec, sizeof vec);
    ork_st_writer_meta(w, "format", "orakul-te/1");
    ork_st_writer_meta(w, "encoder", "enc");
    ork_st_writer_meta(w, "max_length", "3");
    ork_st_writer_meta(w, "caption", "cap");
    CU_ASSERT_EQUAL(ork_st_writer_commit(w, p), ORK_OK);
    ork_st_writer_free(w);
    CU_ASSERT_EQUAL(load(p, "enc", T, "cap", rt, rv), ORK_E_FORMAT);
    /* rewritten: good again */
    spit(p, good, n);
    CU_ASSERT_EQUAL(load(p, "enc", T, "cap", rt, rv), ORK_OK);
    free(b);
    free(good);
}

static const ork_test_case cases[] = {
    {"captions: ai-toolkit's trigger, [trigger], default_caption, caption_ext, is_reg, dropout caption",
     t_caption_table},
    {"sample prompts: [trigger] replaced, never prepended", t_sample_prompts},
    {"shuffle_tokens, keep_tokens, token_dropout_rate: one warning each", t_token_keys_warn},
    {"caption dropout: seeded, pure, at its rate", t_dropout_draws},
    {"text cache: key and path", t_cache_key},
    {"text cache: write, read back, another entry at the path", t_cache_roundtrip},
    {"text cache: damaged, NaN, unchecksummed entries refused", t_cache_damage},
    {NULL, NULL},
};
ORK_TEST_MAIN("text_captions", init, clean, cases)
