/* test_train_unmasked.c — training with a text slot that keeps each caption's
 * unmasked tokens only (ORK_TEXT_SLOT_UNMASKED, Z-Image's Qwen3), on the CPU:
 * `orakul run` of the Z-Image custom preset at caption width 2560 (the width
 * for which the plugin declares its Qwen3 slot) with a Qwen3 text encoder
 * written here (2 layers of width 2560, random weights, a token table as wide
 * as the tiny BPE tokenizer of tests/fixtures/text/cond, which tokenizes the
 * Qwen3 chat template's text), the committed photos and captions, one sample
 * prompt, batch 1.
 *  - each caption's text cache entry (images and sample prompt) holds exactly
 *    its unmasked-token count of rows (its length metadata), counted here by
 *    the tokenizer and the prompt format: fewer than max_length;
 *  - the model gets txt (1, T_i, D): two runs whose max_length differs (160,
 *    224) train the same losses (to 1e-6) — the padded rows, zero in both
 *    buffers but 64 more in one, never reach the model;
 *  - the losses are finite and the samples are written;
 *  - with DOP (trigger ohwx, class person) likewise: the class prompts reach
 *    the prior and the preservation step at their own lengths;
 *  - batch_size 2 is refused at the config's train.batch_size line, by
 *    `orakul run` and `orakul plan` alike. */
#include "train_test_util.h"

#include "io/safetensors.h"
#include "text/prompt_format.h"
#include "text/tokenizer.h"
#include "train/text_cache.h"

#include <dirent.h>
#include <math.h>

#define FX ORK_SOURCE_DIR "/tests/fixtures"
#define HID 2560
#define VOCAB 100 /* the cond tokenizer's ids: 0 .. 98 */

static char root[512], data[700], enc[700], tok[700];

/* ---- a random Qwen3 checkpoint (as tests/text_encoders/test_llm_cond.c writes one) ---- */

static uint64_t rng = 7;
static float urand(void) { /* uniform in [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

typedef struct wbuf {
    ork_st_writer *w;
    float *blocks[64];
    int n;
} wbuf;

static int put(wbuf *b, const char *name, int64_t d0, int64_t d1, float s, int norm) {
    int64_t n = d0 * (d1 ? d1 : 1), sh[2] = {d0, d1};
    float *v = malloc((size_t)n * sizeof *v);
    if (!v || b->n >= 64) return 1;
    for (int64_t i = 0; i < n; i++) v[i] = norm ? 1.0f + s * urand() : s * urand();
    b->blocks[b->n++] = v;
    return ork_st_writer_add(b->w, name, ORK_F32, d1 ? 2 : 1, sh, v, (uint64_t)n * 4) != ORK_OK;
}

static int write_encoder(const char *dir) {
    const int nl = 2, H = 4, KV = 2, Dh = 12, F = 40;
    char p[800], name[200];
    if (mkdir(dir, 0755)) return 1;
    wbuf b = {0};
    if (ork_st_writer_new(&b.w) != ORK_OK) return 1;
    int e = put(&b, "model.embed_tokens.weight", VOCAB, HID, 1.0f, 0);
    static const char *const lin[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                      "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
    const int64_t rows[] = {H * Dh, KV * Dh, KV * Dh, HID, F, F, HID}, cols[] = {HID, HID, HID, H * Dh, HID, HID, F};
    for (int l = 0; l < nl && !e; l++) {
        for (int j = 0; j < 7; j++) {
            snprintf(name, sizeof name, "model.layers.%d.%s.weight", l, lin[j]);
            e |= put(&b, name, rows[j], cols[j], 1.0f / sqrtf((float)cols[j]), 0);
        }
        snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", l);
        e |= put(&b, name, HID, 0, 0.5f, 1);
        snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", l);
        e |= put(&b, name, HID, 0, 0.5f, 1);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.q_norm.weight", l);
        e |= put(&b, name, Dh, 0, 0.5f, 1);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.k_norm.weight", l);
        e |= put(&b, name, Dh, 0, 0.5f, 1);
    }
    e |= put(&b, "model.norm.weight", HID, 0, 0.5f, 1);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    e |= ork_st_writer_commit(b.w, p) != ORK_OK;
    ork_st_writer_free(b.w);
    for (int i = 0; i < b.n; i++) free(b.blocks[i]);
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "w");
    if (!f) return 1;
    fprintf(f, "{\"model_type\": \"qwen3\", \"num_hidden_layers\": %d, \"hidden_size\": %d, \"head_dim\": %d, "
            "\"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"rms_norm_eps\": 1e-6, \"rope_theta\": "
            "1000000.0}\n", nl, HID, Dh, H, KV);
    return fclose(f) != 0 || e;
}

static int init(void) {
    if (tt_setup("unmasked", root, sizeof root) != 0) return 1;
    tt_fmt(data, sizeof data, "%s/data", root);
    tt_fmt(enc, sizeof enc, "%s/text_encoder", root);
    tt_fmt(tok, sizeof tok, "%s/tokenizer", root);
    if (write_encoder(enc) || mkdir(tok, 0755)) return 1;
    char p[800];
    tt_fmt(p, sizeof p, "%s/tokenizer.json", tok);
    return symlink(FX "/text/cond/tokenizer/tokenizer.json", p) != 0;
}
static int clean(void) {
    if (getenv("ORK_TEST_KEEP")) return 0;
    tt_rm_rf(root);
    return 0;
}

static const char *const CFG =
    "job: extension\n"
    "config:\n"
    "  name: um\n"
    "  process:\n"
    "    - type: diffusion_trainer\n"
    "      training_folder: %s\n"
    "      device: cpu\n"
    "%s"
    "      network:\n"
    "        type: lora\n"
    "        linear: 4\n"
    "        linear_alpha: 4\n"
    "      save:\n"
    "        dtype: float32\n"
    "        save_every: 6\n"
    "      datasets:\n"
    "        - folder_path: %s\n"
    "          caption_ext: txt\n"
    "          resolution: [64]\n"
    "      train:\n"
    "        batch_size: %d\n"
    "        steps: 6\n"
    "        noise_scheduler: flowmatch\n"
    "        optimizer: adamw\n"
    "        lr: 1e-3\n"
    "        seed: 42\n%s"
    "      model:\n"
    "        name_or_path: preset:custom\n"
    "        arch: zimage:turbo\n"
    "        model_kwargs:\n"
    "          cap_feat_dim: 2560\n"
    "          context_len: %d\n"
    "          pixel_patch: 4\n"
    "          seed: 1\n"
    "          text_encoder_path: %s\n"
    "          text_encoder_tokenizer_path: %s\n"
    "      sample:\n"
    "        sample_every: 6\n"
    "        sample_steps: 2\n"
    "        width: 64\n"
    "        height: 64\n"
    "        seed: 1\n"
    "        prompts:\n"
    "          - an astronaut riding a horse\n"
    "      logging:\n"
    "        log_every: 1\n";

/* One run with max_length L; its losses into *Ls, its log's stem into log. */
static int run_one(const char *tag, int L, int batch, int dop, tt_losses *Ls, char *log, size_t n) {
    char out[900], cfg[900], text[4096];
    tt_fmt(out, sizeof out, "%s/%s", root, tag);
    tt_fmt(cfg, sizeof cfg, "%s/%s.yaml", root, tag);
    tt_fmt(log, n, "%s/%s", root, tag);
    snprintf(text, sizeof text, CFG, out, dop ? "      trigger_word: ohwx\n" : "", data, batch,
             dop ? "        diff_output_preservation: true\n        diff_output_preservation_class: person\n" : "", L,
             enc, tok);
    if (tt_write_all(cfg, text) != 0) return -1;
    int rc = tt_run(cfg, log, 280);
    char lo[1000];
    tt_fmt(lo, sizeof lo, "%s.out", log);
    if (Ls) tt_parse_losses(lo, Ls);
    return rc;
}

/* The unmasked tokens of caption under Z-Image's format (Qwen3's chat
 * template, thinking, right padding to L), counted from the tokenizer. */
static int unmasked_count(const ork_tokenizer *t, const char *caption, int L) {
    int32_t ids[512], mask[512], n = 0;
    if (ork_prompt_encode(t, "qwen-thinking", caption, strlen(caption), L, ids, mask, 512, &n) != ORK_OK) return -1;
    int k = 0;
    for (int i = 0; i < n; i++) k += mask[i] != 0;
    return k;
}

/* Every entry in dir: its rows and length metadata equal the caption's
 * unmasked count (< L); how many, -1 when one does not. */
static int check_entries(const char *dir, const ork_tokenizer *t, int L) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0, bad = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (!strstr(de->d_name, ".safetensors")) continue;
        char p[1400];
        tt_fmt(p, sizeof p, "%s/%s", dir, de->d_name);
        ork_st_file *f;
        if (ork_st_open(p, &f) != ORK_OK) return -1;
        const char *cap = ork_st_meta(f, "caption"), *lm = ork_st_meta(f, "length");
        const ork_st_tensor *tx = ork_st_find(f, "txt");
        int want = cap ? unmasked_count(t, cap, L) : -1;
        int rows = tx && tx->ndim == 2 && tx->shape[1] == HID ? (int)tx->shape[0] : -1;
        if (want < 1 || want >= L || rows != want || !lm || atoi(lm) != want) {
            printf("\n  %s (caption '%s'): %d rows, length %s, %d unmasked tokens of %d", p, cap ? cap : "?", rows,
                   lm ? lm : "none", want, L);
            bad = 1;
        }
        ork_st_close(f);
        n++;
    }
    closedir(d);
    return bad ? -1 : n;
}

static void test_lengths(void) {
    static tt_losses A, B;
    char la[900], lb[900], p[1200];
    CU_ASSERT_EQUAL_FATAL(run_one("a", 160, 1, 0, &A, la, sizeof la), 0);
    CU_ASSERT_EQUAL_FATAL(run_one("b", 224, 1, 0, &B, lb, sizeof lb), 0);
    ork_tokenizer *t = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_tokenizer_load(FX "/text/cond/tokenizer/tokenizer.json", &t), ORK_OK);
    /* the 3 images' entries of each run; the sample prompt's under each output folder */
    tt_fmt(p, sizeof p, "%s/%s", data, ORK_TEXT_CACHE_DIR);
    int n_img = check_entries(p, t, 160); /* a's and b's (another identity): no caption reaches 160 tokens */
    tt_fmt(p, sizeof p, "%s/a/um/%s", root, ORK_TEXT_CACHE_DIR);
    int n_sa = check_entries(p, t, 160);
    tt_fmt(p, sizeof p, "%s/b/um/%s", root, ORK_TEXT_CACHE_DIR);
    int n_sb = check_entries(p, t, 224);
    printf("\n  text cache entries: %d in the dataset's, %d and %d sample prompts", n_img, n_sa, n_sb);
    CU_ASSERT_EQUAL(n_sa, 1);
    CU_ASSERT_EQUAL(n_sb, 1);
    CU_ASSERT_EQUAL(n_img, 6);
    ork_tokenizer_free(t);
    /* the same losses whatever the padding: the model never got the padded rows */
    CU_ASSERT_EQUAL(A.n, 6);
    CU_ASSERT_EQUAL(B.n, 6);
    double worst = 0;
    for (int i = 0; i < A.n && i < B.n; i++) {
        CU_ASSERT(isfinite(A.loss[i]) && isfinite(B.loss[i]));
        double d = fabs(A.loss[i] - B.loss[i]) / fmax(1e-12, fabs(A.loss[i]));
        if (d > worst) worst = d;
    }
    printf("\n  losses at max_length 160 and 224: worst relative difference %.3g", worst);
    CU_ASSERT(worst < 1e-6); /* 6e-3 measured with the captions uploaded at T */
    for (int k = 0; k < 2; k++) {
        tt_fmt(p, sizeof p, "%s/a/um/samples/um_%09d_0.png", root, k ? 6 : 0);
        CU_ASSERT(tt_exists(p));
    }
    printf("\n  ");
}

/* DOP: the class prompts go to the prior and the preservation step at their
 * own lengths too: runs at max_length 160 and 224 train the same losses, and
 * not those of the run without DOP (the term is there). */
static void test_dop(void) {
    static tt_losses A, D, E;
    char la[900];
    CU_ASSERT_EQUAL_FATAL(run_one("a2", 160, 1, 0, &A, la, sizeof la), 0);
    CU_ASSERT_EQUAL_FATAL(run_one("d", 160, 1, 1, &D, la, sizeof la), 0);
    CU_ASSERT_EQUAL_FATAL(run_one("e", 224, 1, 1, &E, la, sizeof la), 0);
    CU_ASSERT_EQUAL(D.n, 6);
    CU_ASSERT_EQUAL(E.n, 6);
    double worst = 0, apart = 0;
    for (int i = 0; i < D.n && i < E.n && i < A.n; i++) {
        CU_ASSERT(isfinite(D.loss[i]) && isfinite(E.loss[i]));
        double d = fabs(D.loss[i] - E.loss[i]) / fmax(1e-12, fabs(D.loss[i]));
        if (d > worst) worst = d;
        apart = fmax(apart, fabs(D.loss[i] - A.loss[i]));
    }
    printf("\n  DOP losses at max_length 160 and 224: worst relative difference %.3g (%.3g from no DOP)", worst,
           apart);
    CU_ASSERT(worst < 1e-6); /* 2.5e-5 measured with the class prompts uploaded at T */
    CU_ASSERT(apart > 1e-6);
    printf("\n  ");
}

/* batch 2: refused at train.batch_size (captions of other lengths side by side) */
static void test_batch_refused(void) {
    char lg[900], e[1000], cfg[900];
    int rc = run_one("c", 160, 2, 0, NULL, lg, sizeof lg);
    CU_ASSERT_EQUAL(rc, 2);
    tt_fmt(e, sizeof e, "%s.err", lg);
    tt_fmt(cfg, sizeof cfg, "%s/c.yaml", root);
    char *se = tt_read_all(e, NULL);
    CU_ASSERT(se && strstr(se, "train.batch_size 2") && strstr(se, "unmasked"));
    CU_ASSERT(se && tt_located(se, cfg, tt_line_of(cfg, "batch_size:")));
    /* `orakul plan` refuses it with the same line */
    char pl[1000], pe[1100];
    tt_fmt(pl, sizeof pl, "%s/c_plan", root);
    const char *args[] = {"plan", cfg, NULL};
    int prc = tt_orakul(args, pl, 120);
    tt_fmt(pe, sizeof pe, "%s.err", pl);
    char *pse = tt_read_all(pe, NULL);
    const char *line = se ? strstr(se, "train.batch_size 2") : NULL;
    CU_ASSERT_EQUAL(prc, rc);
    CU_ASSERT(line && pse && strstr(pse, "train.batch_size 2") && tt_located(pse, cfg, tt_line_of(cfg, "batch_size:")));
    free(pse);
    free(se);
}

static const ork_test_case cases[] = {
    {"UNMASKED slot: each caption's own length cached and trained on", test_lengths},
    {"UNMASKED slot: DOP's class prompts at their own lengths", test_dop},
    {"UNMASKED slot: batch_size 2 refused at its line", test_batch_refused},
    {NULL, NULL},
};
ORK_TEST_MAIN("train_unmasked", init, clean, cases)
