/* tests/text_encoders/test_llm_run.c — issue #29's "Done when" for klein, on
 * the CPU: `orakul run` of a FLUX.2 config whose text slot is Qwen3 (a
 * custom FLUX.2 of context width 7680 = 3 x 2560, the width for which the
 * FLUX plugin declares klein 4B's slot: hidden states 9, 18, 27, Qwen3's chat
 * template, right padding) trains on real text conditioning from the
 * dataset's captions, with no Python: a Qwen3 checkpoint written here
 * (llm_ckpt.h: width 2560, 27 of 36 layers, two heads of 8, random BF16
 * weights, a token table as wide as the tiny BPE tokenizer of
 * tests/fixtures/text/cond), named by model_kwargs.text_encoder_path and
 * text_encoder_tokenizer_path as a user names them, the committed photos and
 * captions, 4 steps, one sample prompt.
 *  - the run exits 0 and its log says the captions were encoded through
 *    qwen3 (none from a cache); the losses are finite;
 *  - every caption's text cache entry (txt F32 (T, 7680)) equals the text
 *    conditioner's own encode of that caption through the slot the FLUX
 *    plugin declares (flux_decl.h), within 1e-5 of its largest value (the
 *    run encodes them in other chunks), and no two captions' entries are
 *    alike (the model sees the caption, not zeros or one shared row);
 *  - a second run reads every entry from the cache and encodes none.
 * FLUX.2-dev's Mistral slot takes the same path at its own width: the seed's
 * two-phase run on the GPU machine (bench/text/seed_two_phase_gpu.sh). */
#include "train_test_util.h"

#include "llm_ckpt.h"
#include "plugin_test_util.h"

#include "text/conditioner.h"
#include "train/text_cache.h"

#include <orakul/tokenizer.h>
#include "flux_decl.h" /* FLUX.2's text slot as the FLUX plugin declares it */

#include <dirent.h>

#define CTX 7680 /* 3 x 2560: klein 4B's context width */
#define TL 96     /* the slot's max_length (model_kwargs.context_len) */

static char root[512], data[700], te[700];

static int init(void) {
    if (tt_setup("llm_run", root, sizeof root) != 0) return 1;
    tt_fmt(data, sizeof data, "%s/data", root);
    tt_fmt(te, sizeof te, "%s/qwen3", root);
    static const char *const files[] = {"tokenizer.json", NULL};
    llm_ckpt c = {.qwen = 1, .width = CTX / 3, .layers = 27, .cfg_layers = 36, .heads = 2, .kv_heads = 1,
                  .head_dim = 8, .ff = 8, .vocab = 100, .tokdir = ORK_SOURCE_DIR "/tests/fixtures/text/cond/tokenizer",
                  .tokfiles = files, .seed = 4};
    return llm_ckpt_write(te, &c);
}

static int clean(void) {
    if (!getenv("ORK_TEST_KEEP")) tt_rm_rf(root);
    return 0;
}

static const char *const CFG =
    "job: extension\n"
    "config:\n"
    "  name: klein\n"
    "  process:\n"
    "    - type: diffusion_trainer\n"
    "      training_folder: %s/out\n"
    "      device: cpu\n"
    "      network: {type: lora, linear: 4, linear_alpha: 4}\n"
    "      save: {dtype: float32, save_every: 4}\n"
    "      datasets:\n"
    "        - folder_path: %s\n"
    "          caption_ext: txt\n"
    "          resolution: [64]\n"
    "      train: {batch_size: 1, steps: 4, noise_scheduler: flowmatch, optimizer: adamw, lr: 1e-3, seed: 42}\n"
    "      model:\n"
    "        name_or_path: preset:custom\n"
    "        arch: flux\n"
    "        model_kwargs:\n"
    "          flux_version: 2\n"
    "          hidden_size: 96\n"
    "          num_heads: 2\n"
    "          depth: 1\n"
    "          depth_single_blocks: 1\n"
    "          context_in_dim: %d\n"
    "          vec_in_dim: 0\n"
    "          codec: pixel\n"
    "          pixel_patch: 4\n"
    "          context_len: %d\n"
    "          seed: 1\n"
    "          text_encoder_path: %s/text_encoder\n"
    "          text_encoder_tokenizer_path: %s/tokenizer\n"
    "      sample: {sample_every: 4, sample_steps: 2, width: 64, height: 64, seed: 1, prompts: [a red cube]}\n"
    "      logging: {log_every: 1}\n";

static int run(const char *tag, char *log, size_t n) {
    char cfg[900], text[4096];
    tt_fmt(cfg, sizeof cfg, "%s/%s.yaml", root, tag);
    tt_fmt(log, n, "%s/%s", root, tag);
    snprintf(text, sizeof text, CFG, root, data, CTX, TL, te, te);
    if (tt_write_all(cfg, text) != 0) return -1;
    return tt_run(cfg, log, 280);
}

/* The slot the FLUX plugin declares for this model, through the conditioner: caption's txt (TL, CTX). */
static float *cond_encode(ork_registry *reg, const char *caption) {
    static char path[800], tok[800];
    tt_fmt(path, sizeof path, "%s/text_encoder", te);
    tt_fmt(tok, sizeof tok, "%s/tokenizer", te);
    ork_text_slot slot;
    if (!flux2_text_slot("custom", CTX, TL, path, tok, &slot)) return NULL;
    ork_model_info mi;
    memset(&mi, 0, sizeof mi);
    mi.abi = (ork_abi)ORK_ABI_INIT(ork_model_info);
    mi.family = "flux";
    mi.variant = "custom";
    mi.context_dim = CTX;
    mi.context_len = TL;
    mi.n_text_slots = 1;
    mi.text_slots = &slot;
    ork_textcond_opts o = {0};
    ork_textcond *tc = NULL;
    ork_text_embed e;
    memset(&e, 0, sizeof e);
    const char *caps[1] = {caption};
    float *txt = NULL;
    if (ork_textcond_open(reg, &mi, &o, &tc) == ORK_OK && tc &&
        ork_textcond_encode(tc, ork_cpu_backend(), 0, 1, caps, &e) == ORK_OK && e.T == TL && e.ctx_dim == CTX) {
        txt = e.txt;
        e.txt = NULL;
    }
    ork_text_embed_free(&e);
    ork_textcond_close(tc);
    return txt;
}

#define MAXE 8

static void test_run(void) {
    char log[800], out[900], err[900], dir[800];
    CU_ASSERT_EQUAL_FATAL(run("first", log, sizeof log), 0);
    tt_fmt(out, sizeof out, "%s.out", log);
    tt_fmt(err, sizeof err, "%s.err", log); /* the info lines */
    char *text = tt_read_all(err, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    /* the dataset's three captions and its dropout caption ("", when drawn) through qwen3 */
    CU_ASSERT(strstr(text, "text encode qwen3") != NULL);
    CU_ASSERT(strstr(text, "encoded (") != NULL && strstr(text, ", 0 from the text cache") != NULL);
    free(text);
    tt_losses L;
    CU_ASSERT_EQUAL(tt_parse_losses(out, &L), 4);
    for (int i = 0; i < L.n; i++) CU_ASSERT(isfinite(L.loss[i]));
    /* the cache entries of the dataset's captions against the conditioner's own encode */
    ork_registry *reg = NULL;
    CU_ASSERT_FATAL(ork_test_registry_open(ORK_PLUGIN_DIR "/orakul-llm" ORK_PLUGIN_SUFFIX, &reg) == 0);
    tt_fmt(dir, sizeof dir, "%s/%s", data, ORK_TEXT_CACHE_DIR);
    DIR *d = opendir(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    float *rows[MAXE] = {0};
    int n = 0, real = 0;
    for (struct dirent *de; (de = readdir(d)) && n < MAXE;) {
        if (!strstr(de->d_name, ".safetensors")) continue;
        char p[1700];
        tt_fmt(p, sizeof p, "%s/%s", dir, de->d_name);
        ork_st_file *f = NULL;
        CU_ASSERT_FATAL(ork_st_open(p, &f) == ORK_OK);
        const char *cap = ork_st_meta(f, "caption");
        const ork_st_tensor *tx = ork_st_find(f, "txt");
        CU_ASSERT_FATAL(cap && tx && tx->dtype == ORK_F32 && tx->ndim == 2 && tx->shape[0] == TL &&
                        tx->shape[1] == CTX);
        float *got = malloc((size_t)TL * CTX * sizeof *got), *ref = cond_encode(reg, cap);
        CU_ASSERT_FATAL(got && ref);
        memcpy(got, tx->data, (size_t)TL * CTX * sizeof *got);
        double M = 0, worst = 0;
        for (size_t i = 0; i < (size_t)TL * CTX; i++) {
            M = fmax(M, fabs(ref[i]));
            worst = fmax(worst, fabs((double)got[i] - ref[i]));
        }
        printf("\n    \"%.40s\": max|ref| %.4g, max err/M %.3g", cap, M, M > 0 ? worst / M : worst);
        CU_ASSERT(M > 0.1 && worst <= 1e-5 * M);
        real += *cap != 0;
        rows[n++] = got;
        free(ref);
        ork_st_close(f);
    }
    closedir(d);
    CU_ASSERT(real >= 3); /* the three photos' captions */
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            CU_ASSERT(memcmp(rows[i], rows[j], (size_t)TL * CTX * sizeof(float)) != 0);
    for (int i = 0; i < n; i++) free(rows[i]);
    ork_test_registry_close(&reg);
    /* again: every caption from the cache */
    CU_ASSERT_EQUAL_FATAL(run("second", log, sizeof log), 0);
    tt_fmt(err, sizeof err, "%s.err", log);
    text = tt_read_all(err, NULL);
    CU_ASSERT(text && !strstr(text, "text encode qwen3") && strstr(text, ": 0 encoded"));
    free(text);
    printf("\n  ");
}

static const ork_test_case cases[] = {
    {"klein's slot: orakul run trains on its captions' Qwen3 embeddings", test_run},
    {NULL, NULL},
};

ORK_TEST_MAIN("llm_run", init, clean, cases)
