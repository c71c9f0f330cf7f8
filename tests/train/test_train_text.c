/* test_train_text.c — `orakul run` reads captions in process (issue #28,
 * "Done when"), on the CPU: a diffusers-layout FLUX.1 folder made of symlinks,
 * the layout tests/text_encoders/test_textcond.c builds (transformer/ = the
 * tiny FLUX.1 checkpoint, text_encoder/ = the width-16 CLIP, text_encoder_2/ =
 * the tiny T5, tokenizer/ and tokenizer_2/ = the tiny BPE and Unigram
 * tokenizers of tests/fixtures/text/cond; tokenizer_2's file a copy, whose
 * time the identity case changes), the committed photos and captions,
 * trigger_word ohwx, caption_dropout_rate 0.5, one sample prompt.
 *  - the first run encodes every caption (3 images, the dropout caption, the
 *    prompt) and writes the text cache; the second reads all of it;
 *  - a changed caption re-encodes only that one; a corrupt entry and a NaN
 *    entry (valid checksums) are encoded again with a warning, no error line;
 *    a changed encoder identity re-encodes all;
 *  - 4 steps straight and 2 + 2 resumed give the same LoRA bytes with caption
 *    dropout on, and dropout changes the LoRA (it is applied);
 *  - an image's <stem>.te.safetensors stays an override (its caption is not
 *    encoded);
 *  - `orakul plan` says how many captions the cache holds and plans the rest,
 *    writing nothing; CLIP missing beside T5: plan and run exit 2 naming it;
 *  - a preset without encoder paths trains on zeros without a warning. */
#include "train_test_util.h"

#include "io/safetensors.h"
#include "train/text_cache.h"

#include <fcntl.h> /* AT_FDCWD */

#define FX ORK_SOURCE_DIR "/tests/fixtures"

static char root[512], data[700], model[700];

static int lnk(const char *target, const char *dir, const char *name) {
    char p[1024];
    tt_fmt(p, sizeof p, "%s/%s", dir, name);
    return symlink(target, p);
}

static int init(void) {
    if (tt_setup("text", root, sizeof root) != 0) return 1;
    tt_fmt(data, sizeof data, "%s/data", root);
    tt_fmt(model, sizeof model, "%s/m", root);
    char p[1024];
    int e = mkdir(model, 0755);
    tt_fmt(p, sizeof p, "%s/transformer", model);
    e |= mkdir(p, 0755);
    e |= lnk(FX "/flux1_small_diffusers.safetensors", p, "diffusion_pytorch_model.safetensors");
    e |= lnk(FX "/text/cond/clip16", model, "text_encoder") | lnk(FX "/text/t5_tiny", model, "text_encoder_2");
    e |= lnk(FX "/text/cond/tokenizer", model, "tokenizer");
    tt_fmt(p, sizeof p, "%s/tokenizer_2", model);
    e |= mkdir(p, 0755);
    char *tok = tt_read_all(FX "/text/cond/tokenizer_2/tokenizer.json", NULL);
    tt_fmt(p, sizeof p, "%s/tokenizer_2/tokenizer.json", model);
    e |= !tok || tt_write_all(p, tok) != 0;
    free(tok);
    return e != 0;
}
static int clean(void) {
    if (getenv("ORK_TEST_KEEP")) return 0; /* to read the runs' logs */
    tt_rm_rf(root);
    return 0;
}

/* The config: out folder, steps, save cadence, caption dropout rate. */
static void write_cfg(const char *path, const char *out, int steps, int save_every, double rate) {
    char y[4096];
    tt_fmt(y, sizeof y,
           "job: extension\n"
           "config:\n"
           "  name: tx\n"
           "  process:\n"
           "    - type: sd_trainer\n"
           "      training_folder: %s\n"
           "      device: cpu\n"
           "      trigger_word: ohwx\n"
           "      network: {type: lora, linear: 4, linear_alpha: 4}\n"
           "      save: {dtype: float32, save_every: %d, max_step_saves_to_keep: 4}\n"
           "      datasets:\n"
           "        - folder_path: %s\n"
           "          caption_ext: txt\n"
           "          caption_dropout_rate: %g\n"
           "          resolution: [64]\n"
           "      train: {batch_size: 1, steps: %d, gradient_checkpointing: true, noise_scheduler: flowmatch,\n"
           "              optimizer: adamw, lr: 5e-3, seed: 42, skip_first_sample: true}\n"
           "      model:\n"
           "        name_or_path: %s\n"
           "        arch: flux\n"
           "        model_kwargs: {codec: pixel, pixel_patch: 4, context_len: 8}\n"
           "      sample: {sample_every: 1000, width: 32, height: 32, sample_steps: 1,\n"
           "               prompts: [\"[trigger] on a bike\"]}\n"
           "      logging: {log_every: 1}\n",
           out, save_every, data, rate, steps, model);
    CU_ASSERT_FATAL(tt_write_all(path, y) == 0);
}

/* Run, then: the "text: N captions: E encoded" line's N and E (-1: none). */
static int run_counts(const char *cfg, const char *log, int *n, int *enc) {
    int rc = tt_run(cfg, log, 200);
    char p[1200];
    tt_fmt(p, sizeof p, "%s.err", log);
    char *t = tt_read_all(p, NULL);
    tt_fmt(p, sizeof p, "%s.out", log);
    char *o = tt_read_all(p, NULL);
    *n = *enc = -1;
    const char *at = t ? strstr(t, "text: ") : NULL;
    while (at && sscanf(at, "text: %d captions: %d encoded", n, enc) != 2) at = strstr(at + 1, "text: ");
    if (!at && o && (at = strstr(o, "text: "))) sscanf(at, "text: %d captions: %d encoded", n, enc);
    printf("\n  %s: exit %d, %d captions, %d encoded", log, rc, *n, *enc);
    free(t);
    free(o);
    return rc;
}

/* `orakul plan cfg` with stdout/stderr into <log>.out/.err; the exit code. */
static int plan(const char *cfg, const char *log) {
    const char *args[] = {"plan", cfg, NULL};
    return tt_orakul(args, log, 120);
}

static int log_has(const char *log, const char *what) {
    char p[1200], q[1200];
    tt_fmt(p, sizeof p, "%s.err", log);
    tt_fmt(q, sizeof q, "%s.out", log);
    return tt_file_has(p, what) || tt_file_has(q, what);
}

/* The cache entry of caption (its path), found by its metadata. */
static int entry_of(const char *caption, char *path, size_t n) {
    char dir[800];
    tt_fmt(dir, sizeof dir, "%s/_text_cache", data);
    DIR *d = opendir(dir);
    int found = 0;
    for (struct dirent *e; d && !found && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        tt_fmt(path, n, "%s/%s", dir, e->d_name);
        ork_st_file *f;
        if (ork_st_open(path, &f) != ORK_OK) continue;
        const char *c = ork_st_meta(f, "caption");
        found = c && !strcmp(c, caption);
        ork_st_close(f);
    }
    if (d) closedir(d);
    return found;
}

static int count_files(const char *dir) {
    DIR *d = opendir(dir);
    int k = 0;
    for (struct dirent *e; d && (e = readdir(d));) k += e->d_name[0] != '.';
    if (d) closedir(d);
    return k;
}

static void test_cache(void) {
    char cfg[800], out[800], log[800], p[1200];
    int n, enc;
    tt_fmt(cfg, sizeof cfg, "%s/c.yaml", root);
    tt_fmt(out, sizeof out, "%s/out_cache", root);
    write_cfg(cfg, out, 2, 2, 0.5);
    /* plan: what run will encode, nothing written */
    tt_fmt(log, sizeof log, "%s/plan1", root);
    CU_ASSERT(plan(cfg, log) == 0);
    CU_ASSERT(log_has(log, "text: 5 captions (images, dropout captions, sample prompts): 0 in the text cache, 5 to encode"));
    CU_ASSERT(log_has(log, "text encode: 5 captions, txt (8, 32), vec (16)"));
    tt_fmt(p, sizeof p, "%s/_text_cache", data);
    CU_ASSERT(!tt_exists(p));
    /* first run: 3 captions + the dropout caption + the prompt */
    tt_fmt(log, sizeof log, "%s/run1", root);
    CU_ASSERT_FATAL(run_counts(cfg, log, &n, &enc) == 0);
    CU_ASSERT_EQUAL(n, 5);
    CU_ASSERT_EQUAL(enc, 5);
    tt_fmt(p, sizeof p, "%s/_text_cache", data);
    CU_ASSERT_EQUAL(count_files(p), 4);
    tt_fmt(p, sizeof p, "%s/tx/_text_cache", out);
    CU_ASSERT_EQUAL(count_files(p), 1);
    CU_ASSERT(log_has(log, "text conditioning: the encoded caption for 3 images"));
    CU_ASSERT(!log_has(log, "error:"));
    /* the trigger word went in: "ohwx " + caption, and the dropout caption is "ohwx " */
    CU_ASSERT(entry_of("ohwx a cup of espresso on a red saucer on a wooden table", p, sizeof p));
    CU_ASSERT(entry_of("ohwx ", p, sizeof p));
    /* second run: everything from the cache */
    tt_fmt(log, sizeof log, "%s/run2", root);
    CU_ASSERT(run_counts(cfg, log, &n, &enc) == 0);
    CU_ASSERT_EQUAL(n, 5);
    CU_ASSERT_EQUAL(enc, 0);
    tt_fmt(log, sizeof log, "%s/plan2", root);
    CU_ASSERT(plan(cfg, log) == 0);
    CU_ASSERT(log_has(log, ": 5 in the text cache, 0 to encode"));
    /* a changed caption: only that one */
    tt_fmt(p, sizeof p, "%s/chelsea.txt", data);
    CU_ASSERT_FATAL(tt_write_all(p, "a tabby cat asleep on a sofa") == 0);
    tt_fmt(log, sizeof log, "%s/run3", root);
    CU_ASSERT(run_counts(cfg, log, &n, &enc) == 0);
    CU_ASSERT_EQUAL(enc, 1);
    CU_ASSERT(entry_of("ohwx a tabby cat asleep on a sofa", p, sizeof p));
    /* a corrupt entry: a warning, encoded again, no error line */
    char e1[1200];
    CU_ASSERT_FATAL(entry_of("ohwx a cup of espresso on a red saucer on a wooden table", e1, sizeof e1));
    size_t len = 0;
    char *b = tt_read_all(e1, &len);
    CU_ASSERT_FATAL(b && len > 16);
    b[len - 3] ^= 0x55;
    FILE *f = fopen(e1, "wb");
    CU_ASSERT_FATAL(f && fwrite(b, 1, len, f) == len);
    fclose(f);
    free(b);
    tt_fmt(log, sizeof log, "%s/run4", root);
    CU_ASSERT(run_counts(cfg, log, &n, &enc) == 0);
    CU_ASSERT_EQUAL(enc, 1);
    CU_ASSERT(log_has(log, "encoding its caption again"));
    CU_ASSERT(!log_has(log, "error:"));
    /* a NaN entry with valid checksums, written as orakul writes them */
    ork_st_file *sf;
    CU_ASSERT_FATAL(ork_st_open(e1, &sf) == ORK_OK);
    const ork_st_tensor *tt = ork_st_find(sf, "txt"), *tv = ork_st_find(sf, "vec");
    CU_ASSERT_FATAL(tt && tv);
    int T = (int)tt->shape[0], C = (int)tt->shape[1], V = (int)tv->shape[0];
    float *txt = malloc((size_t)T * C * sizeof *txt), *vec = malloc((size_t)V * sizeof *vec);
    CU_ASSERT_FATAL(ork_st_read_f32(tt, txt) == ORK_OK && ork_st_read_f32(tv, vec) == ORK_OK);
    char *ident = strdup(ork_st_meta(sf, "encoder")), *cap = strdup(ork_st_meta(sf, "caption"));
    ork_st_close(sf);
    txt[3] = NAN;
    CU_ASSERT_FATAL(ork_text_cache_write(e1, ident, T, C, V, cap, txt, vec) == ORK_OK);
    free(txt), free(vec), free(ident), free(cap);
    tt_fmt(log, sizeof log, "%s/run5", root);
    CU_ASSERT(run_counts(cfg, log, &n, &enc) == 0);
    CU_ASSERT_EQUAL(enc, 1);
    CU_ASSERT(log_has(log, "is NaN"));
    CU_ASSERT(!log_has(log, "error:"));
    /* another encoder identity (the T5 tokenizer file changed time): all again */
    tt_fmt(p, sizeof p, "%s/tokenizer_2/tokenizer.json", model);
    struct timespec ts[2] = {{1000000000, 0}, {1000000000, 0}};
    CU_ASSERT_FATAL(utimensat(AT_FDCWD, p, ts, 0) == 0);
    tt_fmt(log, sizeof log, "%s/run6", root);
    CU_ASSERT(run_counts(cfg, log, &n, &enc) == 0);
    CU_ASSERT_EQUAL(n, 5);
    CU_ASSERT_EQUAL(enc, 5);
    /* an image's .te.safetensors is an override: its caption is not encoded */
    CU_ASSERT_FATAL(entry_of("ohwx a tabby cat asleep on a sofa", e1, sizeof e1));
    b = tt_read_all(e1, &len);
    tt_fmt(p, sizeof p, "%s/chelsea.te.safetensors", data);
    f = fopen(p, "wb");
    CU_ASSERT_FATAL(b && f && fwrite(b, 1, len, f) == len);
    fclose(f);
    free(b);
    tt_fmt(log, sizeof log, "%s/run7", root);
    CU_ASSERT(run_counts(cfg, log, &n, &enc) == 0);
    CU_ASSERT_EQUAL(n, 4);
    CU_ASSERT_EQUAL(enc, 0);
    CU_ASSERT(log_has(log, "the encoded caption for 2 images, <image>.te.safetensors for 1"));
    unlink(p);
}

static void test_resume(void) {
    char ca[800], cb1[800], cb2[800], cn[800], oa[800], ob[800], on[800], log[800], p[1200], q[1200];
    int n, enc;
    tt_fmt(oa, sizeof oa, "%s/out_a", root);
    tt_fmt(ob, sizeof ob, "%s/out_b", root);
    tt_fmt(on, sizeof on, "%s/out_nodrop", root);
    tt_fmt(ca, sizeof ca, "%s/a.yaml", root);
    tt_fmt(cb1, sizeof cb1, "%s/b1.yaml", root);
    tt_fmt(cb2, sizeof cb2, "%s/b2.yaml", root);
    tt_fmt(cn, sizeof cn, "%s/n.yaml", root);
    write_cfg(ca, oa, 6, 3, 0.5);
    write_cfg(cb1, ob, 3, 3, 0.5);
    write_cfg(cb2, ob, 6, 3, 0.5);
    write_cfg(cn, on, 6, 3, 0.0);
    tt_fmt(log, sizeof log, "%s/ra", root);
    CU_ASSERT_FATAL(run_counts(ca, log, &n, &enc) == 0);
    tt_fmt(log, sizeof log, "%s/rb1", root);
    CU_ASSERT_FATAL(run_counts(cb1, log, &n, &enc) == 0);
    tt_fmt(log, sizeof log, "%s/rb2", root);
    CU_ASSERT_FATAL(run_counts(cb2, log, &n, &enc) == 0);
    CU_ASSERT(log_has(log, "resuming from"));
    tt_fmt(log, sizeof log, "%s/rn", root);
    CU_ASSERT_FATAL(run_counts(cn, log, &n, &enc) == 0);
    tt_fmt(p, sizeof p, "%s/tx/tx_000000006.safetensors", oa);
    tt_fmt(q, sizeof q, "%s/tx/tx_000000006.safetensors", ob);
    CU_ASSERT(tt_exists(p));
    CU_ASSERT(tt_same_bytes(p, q)); /* resumed == straight, with caption dropout */
    tt_fmt(q, sizeof q, "%s/tx/tx_000000006.safetensors", on);
    CU_ASSERT(tt_exists(q));
    CU_ASSERT(!tt_same_bytes(p, q)); /* and dropout took effect */
}

/* CLIP and its tokenizer missing beside T5: plan and run refuse with the same one line */
static void test_missing_piece(void) {
    char m2[800], p[1000], cfg[800], out[800], lp[800], lr[800];
    tt_fmt(m2, sizeof m2, "%s/m_t5only", root);
    CU_ASSERT_FATAL(mkdir(m2, 0755) == 0);
    tt_fmt(p, sizeof p, "%s/transformer", m2);
    CU_ASSERT_FATAL(mkdir(p, 0755) == 0);
    CU_ASSERT_FATAL(lnk(FX "/flux1_small_diffusers.safetensors", p, "diffusion_pytorch_model.safetensors") == 0);
    CU_ASSERT_FATAL(lnk(FX "/text/t5_tiny", m2, "text_encoder_2") == 0);
    CU_ASSERT_FATAL(lnk(FX "/text/cond/tokenizer_2", m2, "tokenizer_2") == 0);
    tt_fmt(cfg, sizeof cfg, "%s/m.yaml", root);
    tt_fmt(out, sizeof out, "%s/out_missing", root);
    write_cfg(cfg, out, 1, 1, 0.0);
    char *y = tt_read_all(cfg, NULL), *at = y ? strstr(y, model) : NULL;
    CU_ASSERT_FATAL(at != NULL);
    char fixed[4096];
    tt_fmt(fixed, sizeof fixed, "%.*s%s%s", (int)(at - y), y, m2, at + strlen(model));
    free(y);
    CU_ASSERT_FATAL(tt_write_all(cfg, fixed) == 0);
    tt_fmt(lp, sizeof lp, "%s/missing_plan", root);
    tt_fmt(lr, sizeof lr, "%s/missing_run", root);
    CU_ASSERT_EQUAL(plan(cfg, lp), 2);
    CU_ASSERT_EQUAL(tt_run_q(cfg, lr, 120, 1), 2);
    CU_ASSERT(log_has(lp, "text_encoder"));
    CU_ASSERT(log_has(lr, "text_encoder"));
}

/* A preset (the quickstart's kind of model) has no text encoders: zeros, an
 * info line, no warning; with caption dropout on too */
static void test_preset_quiet(void) {
    char cfg[800], out[800], log[800];
    tt_fmt(cfg, sizeof cfg, "%s/p.yaml", root);
    tt_fmt(out, sizeof out, "%s/out_preset", root);
    write_cfg(cfg, out, 1, 1, 0.5);
    char *y = tt_read_all(cfg, NULL), *at = y ? strstr(y, "        name_or_path:") : NULL;
    CU_ASSERT_FATAL(at != NULL);
    char fixed[4096];
    tt_fmt(fixed, sizeof fixed,
           "%.*s        name_or_path: preset:custom\n        arch: flux\n        model_kwargs: {hidden_size: 64, "
           "num_heads: 2, depth: 1, depth_single_blocks: 1, context_in_dim: 32, vec_in_dim: 16, codec: pixel,\n"
           "                       pixel_patch: 4, context_len: 8, seed: 1}\n%s",
           (int)(at - y), y, strstr(at, "      sample:"));
    free(y);
    CU_ASSERT_FATAL(tt_write_all(cfg, fixed) == 0);
    tt_fmt(log, sizeof log, "%s/preset", root);
    int n, enc;
    CU_ASSERT(run_counts(cfg, log, &n, &enc) == 0);
    CU_ASSERT_EQUAL(n, -1); /* nothing encoded, no text cache */
    CU_ASSERT(log_has(log, "text conditioning: zero text embeddings"));
    CU_ASSERT(!log_has(log, "warning:"));
    CU_ASSERT(!log_has(log, "error:"));
}

static const ork_test_case cases[] = {
    {"text cache: encoded once, read back, changed/corrupt/NaN entries and identity", test_cache},
    {"caption dropout: resumed == straight, and it changes training", test_resume},
    {"a missing text encoder: plan and run refuse alike", test_missing_piece},
    {"a preset without text encoders: zeros, no warning", test_preset_quiet},
    {NULL, NULL},
};
ORK_TEST_MAIN("train_text", init, clean, cases)
