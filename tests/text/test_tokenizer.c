/* test_tokenizer.c — the tokenizer service against Hugging Face `tokenizers`:
 * every caption of tests/fixtures/text/captions.txt (1,150: short and long,
 * punctuation, numbers, accents, CJK, emoji, invalid UTF-8, trigger words)
 * through CLIP (open_clip's .txt.gz, and vocab.json + merges.txt made from it),
 * T5's Unigram (a tokenizer.json with the nmt_nfkc precompiled charsmap, and
 * five variants of its normalizer / pre-tokenizer as other transformers
 * versions write them), and a byte-level BPE with added tokens; ids compared
 * exactly with tests/fixtures/text/tok/expected.txt.gz (tokenizer_ref.py), as
 * full encodings, FLUX's truncated + padded call, and without special tokens.
 * Then malformed files: each one refused with one error line naming it. */
#include "ork_test.h"
#include "tok_fixtures.h"

#include "plugin/host.h"
#include "text/tokenizer.h"
#include "train/services.h"
#include "util/log.h"

#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <sys/stat.h>
#include <zlib.h>

#define FIX ORK_SOURCE_DIR "/tests/fixtures/text"
#define TOK FIX "/tok"

/* ---- fixtures (tok_fixtures.c) ----------------------------------------------------------- */
static tokfx g_fx;
typedef tokfx_expect expect;

static expect *find_exp(const char *name) { return tokfx_find(&g_fx, name); }

static int suite_init(void) {
    if (tokfx_load_captions(&g_fx, FIX "/captions.txt") || g_fx.ncaps < 1000) return 1;
    return tokfx_load_expected(&g_fx, TOK "/expected.txt.gz");
}

/* ---- log capture ------------------------------------------------------------------------ */
static int g_errors, g_warnings;
static char g_last[1024];
static void sink(ork_log_level lvl, const char *line, void *user) {
    (void)user;
    if (lvl == ORK_LOG_WARN) g_warnings++;
    if (lvl >= ORK_LOG_ERROR) {
        g_errors++;
        snprintf(g_last, sizeof g_last, "%s", line);
    }
}
static void capture(void) { g_errors = g_warnings = 0; g_last[0] = 0; ork_log_set_sink(sink, NULL); }
static void release(void) { ork_log_set_sink(NULL, NULL); }

/* ---- the corpus comparison (tok_fixtures.c) ------------------------------------------------- */
static int check_corpus(const ork_tokenizer *t, const expect *e) { return tokfx_check_corpus(&g_fx, t, e); }

static void test_clip_txt_gz(void) {
    ork_tokenizer *t = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_tokenizer_load(TOK "/clip/bpe_simple_vocab_16e6.txt.gz", &t), ORK_OK);
    CU_ASSERT_EQUAL(ork_tokenizer_vocab_size(t), 49408);
    CU_ASSERT_EQUAL(ork_tokenizer_token_to_id(t, "<|startoftext|>"), 49406);
    CU_ASSERT_EQUAL(ork_tokenizer_pad_id(t), 49407);
    CU_ASSERT_STRING_EQUAL(ork_tokenizer_id_to_token(t, 320), "a</w>");
    CU_ASSERT_EQUAL(check_corpus(t, find_exp("clip")), 0);
    ork_tokenizer_free(t);
    /* the folder finds it too */
    CU_ASSERT_EQUAL_FATAL(ork_tokenizer_load(TOK "/clip", &t), ORK_OK);
    ork_tokenizer_free(t);
}

/* bytes_to_unicode, written out independently of the loader's (for vocab.json). */
static void put_cp(char **p, uint32_t cp) {
    if (cp < 0x80) *(*p)++ = (char)cp;
    else { *(*p)++ = (char)(0xC0 | (cp >> 6)); *(*p)++ = (char)(0x80 | (cp & 0x3F)); }
}

static void make_vocab_merges(const char *dir) {
    size_t n;
    char *all = tokfx_read_gz(TOK "/clip/bpe_simple_vocab_16e6.txt.gz", &n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(all);
    int bs[256], cs[256], nb = 0;
    for (int b = '!'; b <= '~'; b++) bs[nb++] = b;
    for (int b = 0xA1; b <= 0xAC; b++) bs[nb++] = b;
    for (int b = 0xAE; b <= 0xFF; b++) bs[nb++] = b;
    for (int i = 0; i < nb; i++) cs[i] = bs[i];
    int extra = 0, total = nb;
    for (int b = 0; b < 256; b++) {
        int in = 0;
        for (int i = 0; i < nb; i++) in |= bs[i] == b;
        if (!in) { bs[total] = b; cs[total++] = 256 + extra++; }
    }
    json_t *vocab = json_object();
    int id = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < 256; i++) {
            char buf[16], *p = buf;
            put_cp(&p, (uint32_t)cs[i]);
            if (pass) { memcpy(p, "</w>", 4); p += 4; }
            *p = 0;
            json_object_set_new(vocab, buf, json_integer(id++));
        }
    char path[512];
    snprintf(path, sizeof path, "%s/merges.txt", dir);
    FILE *mf = fopen(path, "wb");
    fprintf(mf, "#version: 0.2\n");
    char *p = strchr(all, '\n') + 1;
    for (int k = 0; k < 49152 - 256 - 2; k++) {
        char *nl = strchr(p, '\n');
        fwrite(p, 1, (size_t)(nl - p + 1), mf);
        char tok[256];
        size_t j = 0;
        for (char *q = p; q < nl; q++)
            if (*q != ' ') tok[j++] = *q;
        tok[j] = 0;
        json_object_set_new(vocab, tok, json_integer(id++));
        p = nl + 1;
    }
    fclose(mf);
    json_object_set_new(vocab, "<|startoftext|>", json_integer(id++));
    json_object_set_new(vocab, "<|endoftext|>", json_integer(id++));
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    json_dump_file(vocab, path, JSON_COMPACT);
    json_decref(vocab);
    free(all);
    /* transformers' files beside them: the pad token */
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    FILE *cf = fopen(path, "w");
    fprintf(cf, "{\"pad_token\": {\"content\": \"<|endoftext|>\"}, \"tokenizer_class\": \"CLIPTokenizer\",\n"
                " \"model_max_length\": 1000000000000000019884624838656}\n"); /* as transformers writes it */
    fclose(cf);
}

static void test_clip_vocab_merges(void) {
    char dir[] = "/tmp/ork_tok_XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    make_vocab_merges(dir);
    ork_tokenizer *t = NULL;
    capture();
    ork_status st = ork_tokenizer_load(dir, &t);
    release();
    CU_ASSERT_EQUAL_FATAL(st, ORK_OK);
    CU_ASSERT_EQUAL(g_errors + g_warnings, 0); /* the config's 1e30 model_max_length is read */
    CU_ASSERT_EQUAL(ork_tokenizer_pad_id(t), 49407);
    CU_ASSERT_EQUAL(check_corpus(t, find_exp("clip")), 0);
    ork_tokenizer_free(t);
    char path[512];
    snprintf(path, sizeof path, "%s/merges.txt", dir);
    CU_ASSERT_EQUAL(ork_tokenizer_load(path, &t), ORK_OK); /* one of the pair names the pair */
    ork_tokenizer_free(t);
    /* a merges.txt cut in the middle of a line, then with a line of three tokens */
    FILE *f = fopen(path, "r+b");
    fseek(f, 100000, SEEK_SET);
    fputs("a b c\n", f);
    fclose(f);
    capture();
    CU_ASSERT_EQUAL(ork_tokenizer_load(dir, &t), ORK_E_FORMAT);
    release();
    CU_ASSERT_EQUAL(g_errors, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_last, "merges.txt"));
    CU_ASSERT_PTR_NULL(t);
    static const char *const files[] = {"merges.txt", "vocab.json", "tokenizer_config.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

static json_t *load_t5_json(void) {
    size_t n;
    char *b = tokfx_read_gz(TOK "/t5/tokenizer.json.gz", &n);
    json_error_t err;
    json_t *j = b ? json_loadb(b, n, 0, &err) : NULL;
    free(b);
    return j;
}

static json_t *substitute(json_t *v, json_t *base) {
    if (json_is_string(v) && !strcmp(json_string_value(v), "@base_normalizer"))
        return json_deep_copy(json_object_get(base, "normalizer"));
    json_t *c = json_deep_copy(v);
    if (json_is_array(c))
        for (size_t i = 0; i < json_array_size(c); i++) json_array_set_new(c, i, substitute(json_array_get(v, i), base));
    if (json_is_object(c)) {
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) json_object_set_new(c, k, substitute(x, base));
    }
    return c;
}

static void test_t5_unigram(void) {
    ork_tokenizer *t = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_tokenizer_load(TOK "/t5", &t), ORK_OK);
    CU_ASSERT_EQUAL(ork_tokenizer_pad_id(t), 0);
    CU_ASSERT_EQUAL(ork_tokenizer_token_to_id(t, "</s>"), 1);
    CU_ASSERT_EQUAL(check_corpus(t, find_exp("t5")), 0);
    CU_ASSERT_EQUAL(check_corpus(t, find_exp("t5_schnell")), 0); /* 256 tokens */
    ork_tokenizer_free(t);
}

static void test_t5_variants(void) {
    json_t *base = load_t5_json();
    CU_ASSERT_PTR_NOT_NULL_FATAL(base);
    json_error_t err;
    json_t *variants = json_load_file(TOK "/t5_variants.json", 0, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(variants);
    const char *name;
    json_t *patch;
    int tried = 0;
    json_object_foreach(variants, name, patch) {
        expect *e = find_exp(name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(e);
        json_t *j = json_deep_copy(base);
        const char *k;
        json_t *v;
        json_object_foreach(patch, k, v) json_object_set_new(j, k, substitute(v, base));
        ork_tokenizer *t = NULL;
        CU_ASSERT_EQUAL_FATAL(ork_tokenizer_from_json(j, TOK "/t5", name, &t), ORK_OK);
        CU_ASSERT_EQUAL(check_corpus(t, e), 0);
        ork_tokenizer_free(t);
        json_decref(j);
        tried++;
    }
    CU_ASSERT_EQUAL(tried, 5);
    json_decref(variants);
    json_decref(base);
}

static void test_t5_spiece_model(void) {
    ork_tokenizer *t = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_tokenizer_load(TOK "/t5spm", &t), ORK_OK);
    CU_ASSERT_EQUAL(ork_tokenizer_vocab_size(t), 700); /* 600 pieces and 100 sentinels */
    CU_ASSERT_EQUAL(ork_tokenizer_token_to_id(t, "<extra_id_0>"), 699);
    CU_ASSERT_EQUAL(check_corpus(t, find_exp("t5spm")), 0);
    ork_tokenizer_free(t);
    /* malformed: cut short inside a piece, and not a protobuf at all */
    size_t n;
    char *all = tokfx_read_gz(TOK "/t5spm/spiece.model", &n);
    char dir[] = "/tmp/ork_tokspm_XXXXXX", path[256];
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/spiece.model", dir);
    /* k == 2: fuzz_tok_spm's finding (CI, 2026-12-02): a trainer_spec with both a
     * model type other than Unigram and byte_fallback logged two lines */
    static const unsigned char two_refusals[25] = {0x12, 0x0e, 0x0a, 0x05, '<', 'p', 'a', 'd', '>', 0x98, 0x02, 0x01,
                                                   0x00, 0x00, 0x18, 0x04, 0x00, 0x03, 0x0a, 0x0e, 0x0a, 0x02, '/',
                                                   't', 'y'};
    for (int k = 0; k < 3; k++) {
        FILE *f = fopen(path, "wb");
        if (k == 0) fwrite(all, 1, 3001, f);
        else if (k == 1) fputs("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", f);
        else fwrite(two_refusals, 1, sizeof two_refusals, f);
        fclose(f);
        capture();
        CU_ASSERT_EQUAL(ork_tokenizer_load(dir, &t), k == 2 ? ORK_E_UNSUPPORTED : ORK_E_FORMAT);
        release();
        CU_ASSERT_EQUAL(g_errors, 1);
        CU_ASSERT_PTR_NOT_NULL(strstr(g_last, "spiece.model"));
    }
    unlink(path);
    rmdir(dir);
    free(all);
}

static void test_byte_bpe(void) {
    ork_tokenizer *t = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_tokenizer_load(TOK "/bbpe", &t), ORK_OK);
    CU_ASSERT(ork_tokenizer_token_to_id(t, "<think>") >= 0);
    CU_ASSERT_EQUAL(check_corpus(t, find_exp("bbpe")), 0);
    ork_tokenizer_free(t);
}

/* ---- the API's edges ---------------------------------------------------------------------- */
static void test_encode_edges(void) {
    ork_tokenizer *t = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_tokenizer_load(TOK "/clip/bpe_simple_vocab_16e6.txt.gz", &t), ORK_OK);
    int32_t ids[80], mask[80], n = -1;
    /* too small a buffer: ORK_E_INVALID, the length needed, nothing logged */
    capture();
    CU_ASSERT_EQUAL(ork_tokenizer_encode(t, "a photo of ohwx", 15, 0, 0, ids, NULL, 2, &n), ORK_E_INVALID);
    release();
    CU_ASSERT_EQUAL(n, 6);
    CU_ASSERT_EQUAL(g_errors, 0);
    /* max_length below the two special tokens */
    capture();
    CU_ASSERT_EQUAL(ork_tokenizer_encode(t, "a", 1, 1, ORK_TOK_TRUNCATE, ids, NULL, 80, &n), ORK_E_INVALID);
    release();
    CU_ASSERT_EQUAL(g_errors, 1);
    /* exactly max_length: no padding, all mask 1 */
    CU_ASSERT_EQUAL(ork_tokenizer_encode(t, "a b c", 5, 5, ORK_TOK_TRUNCATE | ORK_TOK_PAD, ids, mask, 80, &n), ORK_OK);
    CU_ASSERT_EQUAL(n, 5);
    CU_ASSERT_EQUAL(mask[4], 1);
    CU_ASSERT_EQUAL(ids[4], 49407);
    /* without TRUNCATE, a long text stays long */
    CU_ASSERT_EQUAL(ork_tokenizer_encode(t, "a b c d e f", 11, 4, ORK_TOK_PAD, ids, mask, 80, &n), ORK_OK);
    CU_ASSERT_EQUAL(n, 8);
    /* NULL text is the empty caption; embedded NUL is a character */
    CU_ASSERT_EQUAL(ork_tokenizer_encode(t, NULL, 0, 77, ORK_TOK_TRUNCATE | ORK_TOK_PAD, ids, mask, 80, &n), ORK_OK);
    CU_ASSERT_EQUAL(ids[0], 49406);
    CU_ASSERT_EQUAL(ids[1], 49407);
    CU_ASSERT_EQUAL(mask[2], 0);
    CU_ASSERT_EQUAL(ork_tokenizer_encode(t, "a\0b", 3, 0, ORK_TOK_NO_SPECIAL, ids, NULL, 80, &n), ORK_OK);
    CU_ASSERT_EQUAL(n, 3);
    /* invalid UTF-8 is U+FFFD: the same ids as the replacement character itself */
    int32_t a[16], b[16], na, nb;
    CU_ASSERT_EQUAL(ork_tokenizer_encode(t, "x \xe2\x82 y", 6, 0, 0, a, NULL, 16, &na), ORK_OK);
    CU_ASSERT_EQUAL(ork_tokenizer_encode(t, "x \xef\xbf\xbd y", 7, 0, 0, b, NULL, 16, &nb), ORK_OK);
    CU_ASSERT_EQUAL(na, nb);
    CU_ASSERT(na == nb && !memcmp(a, b, (size_t)na * sizeof *a));
    ork_tokenizer_free(t);
}

typedef struct worker {
    const ork_tokenizer *t;
    const expect *e;
    int bad;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    int32_t ids[4096], n;
    for (int rep = 0; rep < 2; rep++)
        for (size_t i = 0; i < g_fx.ncaps; i++) {
            ork_status st = ork_tokenizer_encode(w->t, g_fx.caps[i].p, g_fx.caps[i].n, 0, 0, ids, NULL, 4096, &n);
            w->bad += st != ORK_OK || n != w->e->n[i] || memcmp(ids, w->e->ids[i], (size_t)n * sizeof *ids);
        }
    return NULL;
}

static void test_threads(void) {
    ork_tokenizer *t = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_tokenizer_load(TOK "/t5", &t), ORK_OK);
    worker w[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        w[i] = (worker){t, find_exp("t5"), 0};
        pthread_create(&th[i], NULL, work, &w[i]);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        CU_ASSERT_EQUAL(w[i].bad, 0);
    }
    ork_tokenizer_free(t);
}

static void test_service(void) {
    ork_host_clear_services();
    CU_ASSERT_EQUAL_FATAL(ork_services_register(), ORK_OK);
    const ork_tokenizer_api *api = ork_host_get_service(ORK_SERVICE_TOKENIZER);
    CU_ASSERT_PTR_NOT_NULL_FATAL(api);
    CU_ASSERT_EQUAL(api->abi.struct_size, sizeof *api);
    ork_tokenizer *t = NULL;
    CU_ASSERT_EQUAL_FATAL(api->load(TOK "/clip", &t), ORK_OK);
    int32_t ids[77], mask[77], n;
    CU_ASSERT_EQUAL(api->encode(t, "a photo of [trigger]", 20, 77, ORK_TOK_TRUNCATE | ORK_TOK_PAD, ids, mask, 77, &n),
                    ORK_OK);
    CU_ASSERT_EQUAL(n, 77);
    CU_ASSERT_EQUAL(ids[0], 49406);
    CU_ASSERT_EQUAL(ids[1], 320); /* "a</w>" */
    CU_ASSERT_EQUAL(api->pad_id(t), 49407);
    api->free(t);
    ork_host_clear_services();
}

/* ---- malformed files ------------------------------------------------------------------------ */
static char g_dir[64];

static void write_file(const char *name, const char *text, size_t n) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    fwrite(text, 1, n, f);
    fclose(f);
}

/* Load text as <dir>/tokenizer.json: the status, and one error line naming the file. */
static ork_status load_text(const char *text) {
    write_file("tokenizer.json", text, strlen(text));
    ork_tokenizer *t = NULL;
    capture();
    ork_status st = ork_tokenizer_load(g_dir, &t);
    release();
    if (st != ORK_OK) {
        CU_ASSERT_EQUAL(g_errors, 1);
        CU_ASSERT_PTR_NOT_NULL(strstr(g_last, "tokenizer.json"));
        CU_ASSERT_PTR_NULL(t);
        if (g_errors != 1) printf("\n  %d error lines for: %.80s\n", g_errors, text);
    }
    ork_tokenizer_free(t);
    return st;
}

#define BPE_OK "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a b\"]}"
#define UNI_OK "\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"<unk>\", 0], [\"a\", -1.5]]}"

static void test_malformed_json(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/ork_tokbad_XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(g_dir));
    CU_ASSERT_EQUAL(load_text("{" BPE_OK "}"), ORK_OK);
    CU_ASSERT_EQUAL(load_text("{" UNI_OK "}"), ORK_OK);
    CU_ASSERT_EQUAL(load_text("{" BPE_OK), ORK_E_FORMAT);                  /* cut short */
    CU_ASSERT_EQUAL(load_text(""), ORK_E_FORMAT);                          /* empty */
    CU_ASSERT_EQUAL(load_text("[1, 2]"), ORK_E_FORMAT);                    /* not an object */
    CU_ASSERT_EQUAL(load_text("{\"normalizer\": null}"), ORK_E_FORMAT);     /* no model */
    CU_ASSERT_EQUAL(load_text("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}"), ORK_E_UNSUPPORTED);
    CU_ASSERT_EQUAL(load_text("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}}"), ORK_E_FORMAT); /* no merges */
    CU_ASSERT_EQUAL(load_text("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a c\"]}}"),
                    ORK_E_FORMAT); /* a merge of a token not in the vocabulary */
    CU_ASSERT_EQUAL(load_text("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]}}"),
                    ORK_E_FORMAT); /* the merged token is missing */
    CU_ASSERT_EQUAL(load_text("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a\"]}}"), ORK_E_FORMAT);
    CU_ASSERT_EQUAL(load_text("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": \"x\"}, \"merges\": []}}"), ORK_E_FORMAT);
    CU_ASSERT_EQUAL(load_text("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -3}, \"merges\": []}}"), ORK_E_FORMAT);
    CU_ASSERT_EQUAL(load_text("{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": [], \"unk_token\": \"?\"}}"),
                    ORK_E_FORMAT);
    CU_ASSERT_EQUAL(load_text("{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": [], \"dropout\": 0.1}}"),
                    ORK_E_UNSUPPORTED);
    CU_ASSERT_EQUAL(load_text("{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}"), ORK_E_FORMAT);
    CU_ASSERT_EQUAL(load_text("{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\"]]}}"), ORK_E_FORMAT);
    CU_ASSERT_EQUAL(load_text("{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", \"x\"]]}}"), ORK_E_FORMAT);
    CU_ASSERT_EQUAL(load_text("{\"model\": {\"type\": \"Unigram\", \"unk_id\": 5, \"vocab\": [[\"a\", 0]]}}"), ORK_E_FORMAT);
    CU_ASSERT_EQUAL(load_text("{" UNI_OK ", \"normalizer\": {\"type\": \"BertNormalizer\"}}"), ORK_E_UNSUPPORTED);
    CU_ASSERT_EQUAL(load_text("{" UNI_OK ", \"normalizer\": {\"type\": \"Sequence\"}}"), ORK_E_FORMAT);
    CU_ASSERT_EQUAL(load_text("{" UNI_OK ", \"normalizer\": {\"no\": 1}}"), ORK_E_FORMAT);
    CU_ASSERT_EQUAL(load_text("{" UNI_OK ", \"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"Regex\": \"(\"},"
                              " \"content\": \"\"}}"), ORK_E_FORMAT); /* a bad regex */
    CU_ASSERT_EQUAL(load_text("{" UNI_OK ", \"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"Glob\": \"*\"},"
                              " \"content\": \"\"}}"), ORK_E_FORMAT);
    CU_ASSERT_EQUAL(load_text("{" UNI_OK ", \"normalizer\": {\"type\": \"Precompiled\", \"precompiled_charsmap\": \"@@@\"}}"),
                    ORK_E_FORMAT); /* not base64 */
    CU_ASSERT_EQUAL(load_text("{" UNI_OK ", \"normalizer\": {\"type\": \"Precompiled\", \"precompiled_charsmap\": \"AQ==\"}}"),
                    ORK_E_FORMAT); /* shorter than its size field */
    CU_ASSERT_EQUAL(load_text("{" UNI_OK ", \"normalizer\": {\"type\": \"Precompiled\", \"precompiled_charsmap\": \"/wAAAAAA\"}}"),
                    ORK_E_FORMAT); /* a trie larger than the charsmap */
    CU_ASSERT_EQUAL(load_text("{" UNI_OK ", \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"String\": \" \"}}}"),
                    ORK_E_FORMAT); /* no behavior */
    CU_ASSERT_EQUAL(load_text("{" UNI_OK ", \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"String\": \" \"},"
                              " \"behavior\": \"Sideways\"}}"), ORK_E_FORMAT);
    CU_ASSERT_EQUAL(load_text("{" UNI_OK ", \"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"ab\"}}"),
                    ORK_E_FORMAT);
    CU_ASSERT_EQUAL(load_text("{" UNI_OK ", \"pre_tokenizer\": {\"type\": \"Punctuation\"}}"), ORK_E_UNSUPPORTED);
    CU_ASSERT_EQUAL(load_text("{" UNI_OK ", \"added_tokens\": [{\"content\": \"x\"}]}"), ORK_E_FORMAT); /* no id */
    CU_ASSERT_EQUAL(load_text("{" UNI_OK ", \"added_tokens\": {}}"), ORK_E_FORMAT);
    CU_ASSERT_EQUAL(load_text("{" UNI_OK ", \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": []}}"),
                    ORK_E_FORMAT); /* no $A */
    CU_ASSERT_EQUAL(load_text("{" UNI_OK ", \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\":"
                              " [{\"SpecialToken\": {\"id\": \"</s>\"}}, {\"Sequence\": {\"id\": \"A\"}}]}}"),
                    ORK_E_FORMAT); /* a special token without ids */
    CU_ASSERT_EQUAL(load_text("{" UNI_OK ", \"post_processor\": {\"type\": \"RobertaProcessing\", \"cls\": [\"x\"]}}"),
                    ORK_E_FORMAT);
    CU_ASSERT_EQUAL(load_text("{" UNI_OK ", \"post_processor\": {\"type\": \"Wrapper\"}}"), ORK_E_UNSUPPORTED);
    /* from a parsed object: the line names what the caller called it */
    {
        json_t *j = json_object();
        ork_tokenizer *t = NULL;
        capture();
        CU_ASSERT_EQUAL(ork_tokenizer_from_json(j, NULL, "my-variant", &t), ORK_E_FORMAT);
        release();
        CU_ASSERT_EQUAL(g_errors, 1);
        CU_ASSERT_PTR_NOT_NULL(strstr(g_last, "my-variant"));
        json_decref(j);
    }
    /* a garbage charsmap trie that parses: encoding must stay in bounds */
    {
        unsigned char raw[4 + 64 * 4 + 8];
        uint32_t sz = 64 * 4;
        memcpy(raw, &sz, 4);
        srand(7);
        for (size_t i = 4; i < sizeof raw - 8; i++) raw[i] = (unsigned char)rand();
        memcpy(raw + sizeof raw - 8, "abc\0def", 8);
        static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        char enc[512];
        size_t k = 0;
        for (size_t i = 0; i < sizeof raw; i += 3) {
            uint32_t v = (uint32_t)raw[i] << 16 | (i + 1 < sizeof raw ? (uint32_t)raw[i + 1] << 8 : 0) |
                         (i + 2 < sizeof raw ? raw[i + 2] : 0);
            enc[k++] = b64[(v >> 18) & 63];
            enc[k++] = b64[(v >> 12) & 63];
            enc[k++] = i + 1 < sizeof raw ? b64[(v >> 6) & 63] : '=';
            enc[k++] = i + 2 < sizeof raw ? b64[v & 63] : '=';
        }
        enc[k] = 0;
        char text[1024];
        snprintf(text, sizeof text, "{" UNI_OK ", \"normalizer\": {\"type\": \"Precompiled\", \"precompiled_charsmap\": \"%s\"}}",
                 enc);
        write_file("tokenizer.json", text, strlen(text));
        ork_tokenizer *t = NULL;
        CU_ASSERT_EQUAL_FATAL(ork_tokenizer_load(g_dir, &t), ORK_OK);
        int32_t ids[8192], n;
        for (size_t i = 0; i < g_fx.ncaps; i++)
            CU_ASSERT_EQUAL(ork_tokenizer_encode(t, g_fx.caps[i].p, g_fx.caps[i].n, 0, 0, ids, NULL, 8192, &n), ORK_OK);
        ork_tokenizer_free(t);
    }
}

static void test_malformed_files(void) {
    ork_tokenizer *t = NULL;
    char path[256];
    /* missing path, an empty folder, a one-byte spiece.model */
    capture();
    CU_ASSERT_EQUAL(ork_tokenizer_load("/nonexistent/tokenizer.json", &t), ORK_E_IO);
    release();
    CU_ASSERT_EQUAL(g_errors, 1);
    snprintf(path, sizeof path, "%s/tokenizer.json", g_dir);
    unlink(path);
    capture();
    CU_ASSERT_EQUAL(ork_tokenizer_load(g_dir, &t), ORK_E_IO);
    write_file("spiece.model", "x", 1);
    CU_ASSERT_EQUAL(ork_tokenizer_load(g_dir, &t), ORK_E_FORMAT);
    release();
    CU_ASSERT_EQUAL(g_errors, 2);
    snprintf(path, sizeof path, "%s/spiece.model", g_dir);
    unlink(path);
    /* a huge (sparse) tokenizer.json: refused before reading */
    snprintf(path, sizeof path, "%s/tokenizer.json", g_dir);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(ftruncate(fd, (off_t)ORK_TOK_MAX_FILE_BYTES + 1), 0);
    close(fd);
    capture();
    CU_ASSERT_EQUAL(ork_tokenizer_load(path, &t), ORK_E_FORMAT);
    release();
    CU_ASSERT_EQUAL(g_errors, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_last, "MiB"));
    unlink(path);
    /* CLIP's .txt.gz cut short: too few merges */
    size_t n;
    char *all = tokfx_read_gz(TOK "/clip/bpe_simple_vocab_16e6.txt.gz", &n);
    snprintf(path, sizeof path, "%s/bpe_simple_vocab_16e6.txt.gz", g_dir);
    gzFile g = gzopen(path, "wb1");
    gzwrite(g, all, (unsigned)(n / 20)); /* CLIP uses the first 48,894 of its 262k lines */
    gzclose(g);
    capture();
    CU_ASSERT_EQUAL(ork_tokenizer_load(g_dir, &t), ORK_E_FORMAT);
    release();
    CU_ASSERT_EQUAL(g_errors, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_last, "merges"));
    /* a corrupt gzip stream */
    g = gzopen(path, "wb1");
    gzwrite(g, all, (unsigned)n);
    gzclose(g);
    free(all);
    FILE *f = fopen(path, "r+b");
    fseek(f, 5000, SEEK_SET);
    for (int i = 0; i < 64; i++) fputc(0x55, f);
    fclose(f);
    capture();
    CU_ASSERT_NOT_EQUAL(ork_tokenizer_load(path, &t), ORK_OK);
    release();
    CU_ASSERT_EQUAL(g_errors, 1);
    CU_ASSERT_PTR_NULL(t);
    unlink(path);
    rmdir(g_dir);
}

static const ork_test_case cases[] = {
    {"CLIP from open_clip's bpe .txt.gz: 1,150 captions exact", test_clip_txt_gz},
    {"CLIP from vocab.json + merges.txt: exact; a bad merges line refused", test_clip_vocab_merges},
    {"T5 Unigram + precompiled charsmap (512 and 256): exact", test_t5_unigram},
    {"T5 normalizer / pre-tokenizer variants: exact", test_t5_variants},
    {"T5 from spiece.model (protobuf): exact; malformed refused", test_t5_spiece_model},
    {"byte-level BPE with added tokens: exact", test_byte_bpe},
    {"encode: buffer, max_length, NUL, invalid UTF-8", test_encode_edges},
    {"encode from three threads at once", test_threads},
    {"the orakul.tokenizer/1 service", test_service},
    {"malformed tokenizer.json: one error line each", test_malformed_json},
    {"missing, huge, truncated and corrupt files", test_malformed_files},
    {NULL, NULL},
};

ORK_TEST_MAIN("tokenizer", suite_init, NULL, cases)
