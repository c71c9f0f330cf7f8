/* tests/text_encoders/test_llm_cond.c — FLUX.2's text slots through the text
 * conditioner (core/text/conditioner.h) with the llm plugin, on the CPU: a
 * diffusers-layout folder (text_encoder/ = a Mistral3 or Qwen3 checkpoint
 * written here with random weights: the pipelines' layer counts (30 of 40 /
 * 27 of 36) at width 32, the token table as wide as FLUX.2's trimmed
 * tokenizers' ids; tokenizer/ = tests/fixtures/text/tok_flux2's); a model that
 * takes txt (T, 3·32) from one slot and no pooled vector. The conditioner's
 * embeddings equal the plugin's own forward on the ids and mask of the
 * pipeline's prompt format (text/prompt_format.h: Mistral's chat template
 * padded on the left, Qwen3's on the right, the mask always passed), resident
 * and layer-major alike; without the mask the padded Mistral rows would
 * differ. The plugin itself is checked against transformers by test_llm, the
 * formats by test_tokenizer_flux2: this is the wiring between them.
 * An fp8 checkpoint (E4M3 q/k/v, gate/up and the rest with per-tensor
 * weight_scale: joined and permuted on load) equals its dequantized copy.
 * Tolerance: 1e-5·M (chunks of other sizes may sum in another order). */
#include "te_test_util.h"

#include "numerics/fp8.h"
#include "text/conditioner.h"
#include "text/prompt_format.h"
#include "text/tokenizer.h"

#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define TOKF TT_FIXTURES "/tok_flux2"
#define HID 32 /* hidden */
#define TOK 96 /* tokens: FLUX.2-dev's system prompt and the longest caption take 61 */

static const char *const CAPS[] = {"a photo of ohwx dog on the beach", "",
                                   "A close-up portrait of a woman with red hair, soft light, film grain, 35mm",
                                   "café crème, 2 cups!"};
#define NCAP 4

static char tmp[256];

/* ---- a random checkpoint ------------------------------------------------------------------------ */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float urand(void) { /* uniform in [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

typedef struct wbuf {
    ork_st_writer *w;
    void *blocks[1024];
    int n;
} wbuf;

/* A (d0, d1) tensor (d1 0: 1-D) of uniform values of scale s (norms: 1 + s·u), stored as dt. */
static int put(wbuf *b, const char *name, int64_t d0, int64_t d1, float s, int norm, ork_dtype dt) {
    int64_t n = d0 * (d1 ? d1 : 1), sh[2] = {d0, d1};
    float *v = malloc((size_t)n * sizeof *v);
    if (!v || b->n >= 1024) return 1;
    for (int64_t i = 0; i < n; i++) v[i] = norm ? 1.0f + s * urand() : s * urand();
    void *data = v;
    size_t es = 4;
    if (dt == ORK_F8_E4M3) {
        uint8_t *q = malloc((size_t)n);
        if (!q) return 1;
        for (int64_t i = 0; i < n; i++) q[i] = ork_f32_to_fp8(v[i] / s * 400.0f, ORK_F8_E4M3, ORK_FP8_SATFINITE); /* scale s / 400 */
        free(v);
        data = q;
        es = 1;
    }
    b->blocks[b->n++] = data;
    return ork_st_writer_add(b->w, name, dt, d1 ? 2 : 1, sh, data, (uint64_t)n * es) != ORK_OK;
}

/* text_encoder/ of family fam ("mistral" / "qwen3") under dir: layers of 40 / 36 in config, 30 / 27 in the
 * file, vocab V; linear weights as ldt (F32 or F8_E4M3 with per-tensor weight_scale). */
static int write_encoder(const char *dir, const char *fam, int64_t V, ork_dtype ldt) {
    int qwen = !strcmp(fam, "qwen3"), nl = qwen ? 27 : 30, H = 4, KV = 2, Dh = 12, F = 40;
    const char *pre = qwen ? "model." : "model.language_model.";
    char p[700], name[200];
    snprintf(p, sizeof p, "%s/text_encoder", dir);
    if (mkdir(p, 0755)) return 1;
    wbuf b = {0};
    if (ork_st_writer_new(&b.w) != ORK_OK) return 1;
    int e = 0;
    rng = qwen ? 7 : 11;
    snprintf(name, sizeof name, "%sembed_tokens.weight", pre);
    e |= put(&b, name, V, HID, 1.0f, 0, ORK_F32);
    static const char *const lin[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                      "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
    const int64_t rows[] = {H * Dh, KV * Dh, KV * Dh, HID, F, F, HID}, cols[] = {HID, HID, HID, H * Dh, HID, HID, F};
    static float one = 1.0f / 400.0f;
    for (int l = 0; l < nl && !e; l++) {
        for (int j = 0; j < 7; j++) {
            float s = 1.0f / sqrtf((float)cols[j]);
            snprintf(name, sizeof name, "%slayers.%d.%s.weight", pre, l, lin[j]);
            e |= put(&b, name, rows[j], cols[j], s, 0, ldt);
            if (ldt == ORK_F8_E4M3) {
                float *sc = malloc(sizeof *sc);
                if (!sc) return 1;
                *sc = s * one;
                b.blocks[b.n++] = sc;
                int64_t sh1[1] = {1};
                snprintf(name, sizeof name, "%slayers.%d.%s.weight_scale", pre, l, lin[j]);
                e |= ork_st_writer_add(b.w, name, ORK_F32, 1, sh1, sc, 4) != ORK_OK;
            }
        }
        snprintf(name, sizeof name, "%slayers.%d.input_layernorm.weight", pre, l);
        e |= put(&b, name, HID, 0, 0.5f, 1, ORK_F32);
        snprintf(name, sizeof name, "%slayers.%d.post_attention_layernorm.weight", pre, l);
        e |= put(&b, name, HID, 0, 0.5f, 1, ORK_F32);
        if (qwen) {
            snprintf(name, sizeof name, "%slayers.%d.self_attn.q_norm.weight", pre, l);
            e |= put(&b, name, Dh, 0, 0.5f, 1, ORK_F32);
            snprintf(name, sizeof name, "%slayers.%d.self_attn.k_norm.weight", pre, l);
            e |= put(&b, name, Dh, 0, 0.5f, 1, ORK_F32);
        }
    }
    snprintf(name, sizeof name, "%snorm.weight", pre);
    e |= put(&b, name, HID, 0, 0.5f, 1, ORK_F32);
    snprintf(p, sizeof p, "%s/text_encoder/model.safetensors", dir);
    e |= ork_st_writer_commit(b.w, p) != ORK_OK;
    ork_st_writer_free(b.w);
    for (int i = 0; i < b.n; i++) free(b.blocks[i]);
    snprintf(p, sizeof p, "%s/text_encoder/config.json", dir);
    FILE *f = fopen(p, "w");
    if (!f) return 1;
    if (qwen)
        fprintf(f, "{\"model_type\": \"qwen3\", \"num_hidden_layers\": 36, \"head_dim\": %d, \"num_attention_heads\": "
                "%d, \"num_key_value_heads\": %d, \"rms_norm_eps\": 1e-6, \"rope_theta\": 1000000.0}\n", Dh, H, KV);
    else
        fprintf(f, "{\"model_type\": \"mistral3\", \"text_config\": {\"model_type\": \"mistral\", \"num_hidden_layers\": "
                "40, \"head_dim\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"rms_norm_eps\": "
                "1e-5, \"rope_theta\": 1000000000.0, \"sliding_window\": null}}\n", Dh, H, KV);
    fclose(f);
    return e;
}

static int link_tokenizer(const char *dir, const char *fam) {
    char p[700], t[700];
    snprintf(p, sizeof p, "%s/tokenizer", dir);
    if (mkdir(p, 0755)) return 1;
    static const char *const files[] = {"tokenizer.json.gz", "tokenizer_config.json"};
    for (int i = 0; i < 2; i++) {
        snprintf(t, sizeof t, "%s/%s/%s", TOKF, fam, files[i]);
        snprintf(p, sizeof p, "%s/tokenizer/%s", dir, files[i]);
        if (symlink(t, p)) return 1;
    }
    return 0;
}

static int init(void) {
    if (ork_test_registry_open(ORK_PLUGIN_DIR "/orakul-llm" ORK_PLUGIN_SUFFIX, &tt_reg)) return 1;
    snprintf(tmp, sizeof tmp, "/tmp/ork_llm_cond_XXXXXX");
    if (!mkdtemp(tmp)) return 1;
    static const char *const fams[] = {"mistral", "qwen3"};
    for (int i = 0; i < 2; i++) {
        char d[400];
        snprintf(d, sizeof d, "%s/%s", tmp, fams[i]);
        if (mkdir(d, 0755) || write_encoder(d, fams[i], i ? 151936 : 131072, ORK_F32) || link_tokenizer(d, fams[i]))
            return 1;
    }
    char d[400];
    snprintf(d, sizeof d, "%s/qwen3_fp8", tmp);
    return mkdir(d, 0755) || write_encoder(d, "qwen3", 151936, ORK_F8_E4M3);
}

static int clean(void) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (tmp[0] && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    return tt_clean();
}

/* ---- the cases ---------------------------------------------------------------------------------- */

/* The plugin's own forward of the NCAP captions (ids and mask of format), F32 (NCAP, TOK, 3W), malloc'd. */
static float *direct(const char *id, const char *dir, const char *tokdir, const ork_prompt_template *tpl,
                     int use_mask) {
    ork_tokenizer *tok = NULL;
    int32_t ids[NCAP * TOK], mask[NCAP * TOK];
    if (ork_tokenizer_load(tokdir, &tok) != ORK_OK) return NULL;
    for (int i = 0; i < NCAP; i++) {
        int32_t got = 0;
        if (ork_prompt_encode_template(tok, tpl, CAPS[i], strlen(CAPS[i]), TOK, ids + i * TOK, mask + i * TOK, TOK,
                                       &got) != ORK_OK ||
            got != TOK) {
            ork_tokenizer_free(tok);
            return NULL;
        }
    }
    ork_tokenizer_free(tok);
    tt_enc e;
    float *h = NULL;
    ork_text_encoder_outputs out;
    if (tt_open(id, dir, &e) == ORK_OK && tt_load(&e) == ORK_OK &&
        tt_forward(&e, NCAP, TOK, ids, use_mask ? mask : NULL, &out) == ORK_OK)
        h = tt_host(e.g, out.hidden);
    tt_close(&e);
    return h;
}

/* The conditioner of one txt slot of fam's folder, with the slot's flags ORK_TEXT_SLOT_QUANTIZE | extra. */
static ork_status open_tc(const char *fam, const char *enc, const ork_prompt_template *tpl, uint32_t extra,
                          ork_textcond **tc) {
    static ork_text_slot slot;
    static ork_model_info mi;
    static char src[400];
    snprintf(src, sizeof src, "%s/%s", tmp, fam);
    slot = (ork_text_slot){.encoder = enc, .feeds = ORK_TEXT_FEEDS_TXT, .flags = ORK_TEXT_SLOT_QUANTIZE | extra,
                           .subfolder = "text_encoder", .tokenizer_subfolder = "tokenizer", .max_length = TOK,
                           .path_key = "text_encoder_path", .tokenizer_key = "text_encoder_tokenizer_path",
                           .prompt_template = tpl->kind, .prompt_flags = tpl->flags,
                           .system_message = tpl->system_message};
    memset(&mi, 0, sizeof mi);
    mi.abi = (ork_abi)ORK_ABI_INIT(ork_model_info);
    mi.family = "zimage";
    mi.variant = "tiny";
    mi.context_dim = 3 * HID;
    mi.context_len = TOK;
    mi.n_text_slots = 1;
    mi.text_slots = &slot;
    mi.source_dir = src;
    ork_textcond_opts o = {0};
    *tc = NULL;
    ork_status s = ork_textcond_open(tt_reg, &mi, &o, tc);
    return s == ORK_OK && !*tc ? ORK_E_INTERNAL : s;
}

static ork_status encode(const char *fam, const char *enc, const ork_prompt_template *tpl, ork_text_embed *emb) {
    char src[400];
    snprintf(src, sizeof src, "%s/%s", tmp, fam);
    ork_text_slot slot = {.encoder = enc, .feeds = ORK_TEXT_FEEDS_TXT, .flags = ORK_TEXT_SLOT_QUANTIZE,
                          .subfolder = "text_encoder", .tokenizer_subfolder = "tokenizer", .max_length = TOK,
                          .path_key = "text_encoder_path", .tokenizer_key = "text_encoder_tokenizer_path",
                          /* the template is the model's declaration */
                          .prompt_template = tpl->kind, .prompt_flags = tpl->flags,
                          .system_message = tpl->system_message};
    ork_model_info mi;
    memset(&mi, 0, sizeof mi);
    mi.abi = (ork_abi)ORK_ABI_INIT(ork_model_info);
    mi.family = "flux";
    mi.variant = "tiny-flux2";
    mi.context_dim = 3 * HID;
    mi.context_len = TOK;
    mi.n_text_slots = 1;
    mi.text_slots = &slot;
    mi.source_dir = src;
    ork_textcond_opts o = {0};
    ork_textcond *tc = NULL;
    memset(emb, 0, sizeof *emb);
    ork_status s = ork_textcond_open(tt_reg, &mi, &o, &tc);
    if (s == ORK_OK && !tc) s = ORK_E_INTERNAL;
    if (s == ORK_OK) s = ork_textcond_encode(tc, ork_cpu_backend(), 0, NCAP, CAPS, emb);
    ork_textcond_close(tc);
    return s;
}

static int close_to(const char *what, const float *a, const float *b, size_t n, double tol) {
    double M = 0, worst = 0;
    for (size_t i = 0; i < n; i++) M = fmax(M, fabs((double)b[i]));
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)a[i] - b[i]));
    printf("\n    %-44s max|ref| %8.4g  max err/M %9.3g", what, M, M > 0 ? worst / M : worst);
    return M > 0 && worst <= tol * M;
}

static void case_fam(const char *fam, const char *enc, const ork_prompt_template *format) {
    char dir[400], tok[400];
    snprintf(dir, sizeof dir, "%s/%s/text_encoder", tmp, fam);
    snprintf(tok, sizeof tok, "%s/%s/tokenizer", tmp, fam);
    float *ref = direct(enc, dir, tok, format, 1), *nomask = direct(enc, dir, tok, format, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
    CU_ASSERT_PTR_NOT_NULL_FATAL(nomask);
    ork_text_embed a, b;
    CU_ASSERT_EQUAL_FATAL(encode(fam, enc, format, &a), ORK_OK);
    CU_ASSERT_EQUAL(a.n, NCAP);
    CU_ASSERT_EQUAL(a.T, TOK);
    CU_ASSERT_EQUAL(a.ctx_dim, 3 * HID);
    CU_ASSERT_EQUAL(a.vec_dim, 0);
    CU_ASSERT_PTR_NULL(a.vec);
    size_t n = (size_t)NCAP * TOK * 3 * HID;
    CU_ASSERT(close_to("resident vs the plugin on the format's ids+mask", a.txt, ref, n, 1e-5));
    setenv("ORAKUL_TEXT_LAYER_MAJOR", "1", 1);
    setenv("ORAKUL_TEXT_CHUNK", "3", 1);
    ork_status s = encode(fam, enc, format, &b);
    unsetenv("ORAKUL_TEXT_LAYER_MAJOR");
    unsetenv("ORAKUL_TEXT_CHUNK");
    CU_ASSERT_EQUAL_FATAL(s, ORK_OK);
    CU_ASSERT(close_to("layer-major, chunks of 3", b.txt, ref, n, 1e-5));
    /* the mask matters: left padding (Mistral) changes every real position without it */
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)nomask[i] - ref[i]));
    printf("\n    %-44s max diff %9.3g", "without the mask (the plugin)", d);
    if (!strcmp(fam, "mistral")) CU_ASSERT(d > 1e-2);
    ork_text_embed_free(&a);
    ork_text_embed_free(&b);
    free(ref);
    free(nomask);
    printf("\n  ");
}
/* FLUX.2-dev's and klein's templates as the FLUX plugin declares them
 * (plugins/models/flux/flux_variants.c; test_textcond checks the plugin's). */
static const ork_prompt_template MISTRAL_TPL = {
    ORK_TEMPLATE_MISTRAL_CHAT, ORK_TEMPLATE_PAD_LEFT | ORK_TEMPLATE_NO_SPECIAL | ORK_TEMPLATE_STRIP_IMG,
    "You are an AI that reasons about image descriptions. You give structured responses focusing on object "
    "relationships, object\nattribution and actions without speculation.", 512};
static const ork_prompt_template QWEN_TPL = {ORK_TEMPLATE_QWEN_CHAT, ORK_TEMPLATE_GENERATION, NULL, 512};
static void test_mistral(void) { case_fam("mistral", "mistral3", &MISTRAL_TPL); }
static void test_qwen3(void) { case_fam("qwen3", "qwen3", &QWEN_TPL); }

/* The same weights stored E4M3 with per-tensor scales (q|k|v and gate|up joined from fp8 parts, q/k rows
 * permuted as bytes) against the F32 checkpoint of the dequantized values. */
static void test_fp8(void) {
    char d8[400], d32[400], p[500];
    snprintf(d8, sizeof d8, "%s/qwen3_fp8/text_encoder", tmp);
    snprintf(d32, sizeof d32, "%s/qwen3_fp8_deq", tmp);
    CU_ASSERT_FATAL(mkdir(d32, 0755) == 0);
    /* dequantize every tensor of the fp8 file into an F32 copy */
    snprintf(p, sizeof p, "%s/model.safetensors", d8);
    ork_st_file *f = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_st_open(p, &f), ORK_OK);
    ork_st_writer *w = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_st_writer_new(&w), ORK_OK);
    size_t nt = ork_st_count(f);
    float **bufs = calloc(nt, sizeof *bufs);
    for (size_t i = 0; i < nt; i++) {
        const ork_st_tensor *t = ork_st_at(f, i);
        size_t len = strlen(t->name);
        if (len > 13 && !strcmp(t->name + len - 13, ".weight_scale")) continue;
        size_t k = (size_t)ork_st_nelements(t);
        bufs[i] = malloc(k * sizeof **bufs);
        CU_ASSERT_FATAL(bufs[i] && ork_st_read_f32(t, bufs[i]) == ORK_OK);
        if (t->dtype == ORK_F8_E4M3) {
            char sn[300];
            snprintf(sn, sizeof sn, "%.*s_scale", (int)len, t->name);
            const ork_st_tensor *sc = ork_st_find(f, sn);
            float s = 1;
            CU_ASSERT_FATAL(sc && ork_st_read_f32(sc, &s) == ORK_OK);
            for (size_t j = 0; j < k; j++) bufs[i][j] *= s;
        }
        CU_ASSERT_EQUAL(ork_st_writer_add(w, t->name, ORK_F32, t->ndim, t->shape, bufs[i], k * 4), ORK_OK);
    }
    snprintf(p, sizeof p, "%s/model.safetensors", d32);
    CU_ASSERT_EQUAL(ork_st_writer_commit(w, p), ORK_OK);
    ork_st_writer_free(w);
    for (size_t i = 0; i < nt; i++) free(bufs[i]);
    free(bufs);
    ork_st_close(f);
    char cfg_from[500];
    snprintf(cfg_from, sizeof cfg_from, "%s/config.json", d8);
    snprintf(p, sizeof p, "%s/config.json", d32);
    CU_ASSERT_FATAL(symlink(cfg_from, p) == 0);
    int32_t ids[2 * 9];
    for (int i = 0; i < 18; i++) ids[i] = (i * 7919) % 151936;
    float *h[2] = {NULL, NULL};
    const char *dirs[2] = {d8, d32};
    for (int j = 0; j < 2; j++) {
        tt_enc e;
        ork_text_encoder_outputs out;
        CU_ASSERT_EQUAL(tt_open("qwen3", dirs[j], &e), ORK_OK);
        if (tt_load(&e) == ORK_OK && tt_forward(&e, 2, 9, ids, NULL, &out) == ORK_OK) h[j] = tt_host(e.g, out.hidden);
        tt_close(&e);
    }
    CU_ASSERT(h[0] && h[1] && close_to("fp8 checkpoint vs its dequantized copy", h[0], h[1], 2 * 9 * 3 * HID, 1e-5));
    free(h[0]);
    free(h[1]);
    printf("\n  ");
}

/* ---- ORK_TEXT_SLOT_UNMASKED (Z-Image: prompt_embeds[i][prompt_masks[i]]) ---------------------- */

typedef struct each_chk {
    const ork_text_embed *u;
    int calls, bad;
} each_chk;
static ork_status each_cb(void *user, int i, const float *txt, const float *vec) {
    each_chk *c = user;
    (void)vec;
    c->calls++;
    size_t row = (size_t)TOK * 3 * HID;
    if (i < 0 || i >= NCAP || memcmp(txt, c->u->txt + (size_t)i * row, row * sizeof *txt)) c->bad++;
    return ORK_OK;
}

/* Each caption keeps the rows its mask marks: len[i] = the mask's ones, the
 * rows the padded encode's at those positions (bit-equal: the same run), the
 * rest zero; lengths() agrees without encoding; encode_each (chunks of 3: a
 * chunk's masks at an offset) gives the same rows. */
static void case_unmasked(const char *fam, const char *enc, const ork_prompt_template *tpl) {
    char tokdir[400];
    snprintf(tokdir, sizeof tokdir, "%s/%s/tokenizer", tmp, fam);
    ork_tokenizer *tok = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_tokenizer_load(tokdir, &tok), ORK_OK);
    static int32_t ids[NCAP * TOK], mask[NCAP * TOK];
    int want[NCAP];
    for (int i = 0; i < NCAP; i++) {
        int32_t got = 0;
        CU_ASSERT_EQUAL_FATAL(ork_prompt_encode_template(tok, tpl, CAPS[i], strlen(CAPS[i]), TOK, ids + i * TOK,
                                                         mask + i * TOK, TOK, &got), ORK_OK);
        want[i] = 0;
        for (int j = 0; j < TOK; j++) want[i] += mask[i * TOK + j] != 0;
        CU_ASSERT(want[i] > 0 && want[i] < TOK); /* the padding is there to drop */
    }
    ork_tokenizer_free(tok);
    CU_ASSERT(want[0] != want[1]); /* captions of other lengths */
    ork_textcond *tp = NULL, *tu = NULL;
    ork_text_embed a, u;
    memset(&a, 0, sizeof a);
    memset(&u, 0, sizeof u);
    CU_ASSERT_EQUAL_FATAL(open_tc(fam, enc, tpl, 0, &tp), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(open_tc(fam, enc, tpl, ORK_TEXT_SLOT_UNMASKED, &tu), ORK_OK);
    CU_ASSERT_FALSE(ork_textcond_unmasked(tp));
    CU_ASSERT_TRUE(ork_textcond_unmasked(tu));
    CU_ASSERT_STRING_NOT_EQUAL(ork_textcond_identity(tp), ork_textcond_identity(tu)); /* other cache entries */
    CU_ASSERT_EQUAL_FATAL(ork_textcond_encode(tp, ork_cpu_backend(), 0, NCAP, CAPS, &a), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_textcond_encode(tu, ork_cpu_backend(), 0, NCAP, CAPS, &u), ORK_OK);
    CU_ASSERT_PTR_NULL(a.len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(u.len);
    int D = 3 * HID, lens[NCAP] = {0}, bad_rows = 0, bad_zero = 0;
    for (int i = 0; i < NCAP; i++) {
        CU_ASSERT_EQUAL(u.len[i], want[i]);
        const float *pa = a.txt + (size_t)i * TOK * D, *pu = u.txt + (size_t)i * TOK * D;
        int k = 0;
        for (int j = 0; j < TOK; j++)
            if (mask[i * TOK + j]) bad_rows += memcmp(pu + (size_t)k++ * D, pa + (size_t)j * D, D * sizeof *pa) != 0;
        for (size_t x = (size_t)k * D; x < (size_t)TOK * D; x++) bad_zero += pu[x] != 0.0f;
    }
    CU_ASSERT_EQUAL(bad_rows, 0);
    CU_ASSERT_EQUAL(bad_zero, 0);
    int first_same = memcmp(u.txt, a.txt, (size_t)want[0] * D * sizeof *a.txt) == 0;
    CU_ASSERT_EQUAL(first_same, !(tpl->flags & ORK_TEMPLATE_PAD_LEFT)); /* right padding: the first T_i rows */
    CU_ASSERT_EQUAL(ork_textcond_lengths(tu, NCAP, CAPS, lens), ORK_OK);
    CU_ASSERT(!memcmp(lens, want, sizeof lens));
    CU_ASSERT_EQUAL(ork_textcond_lengths(tp, NCAP, CAPS, lens), ORK_OK);
    CU_ASSERT_EQUAL(lens[0], TOK); /* not UNMASKED: every row counts */
    setenv("ORAKUL_TEXT_CHUNK", "3", 1);
    each_chk c = {&u, 0, 0};
    CU_ASSERT_EQUAL(ork_textcond_encode_each(tu, ork_cpu_backend(), 0, NCAP, CAPS, each_cb, &c), ORK_OK);
    unsetenv("ORAKUL_TEXT_CHUNK");
    CU_ASSERT_EQUAL(c.calls, NCAP);
    CU_ASSERT_EQUAL(c.bad, 0);
    ork_text_embed_free(&a);
    ork_text_embed_free(&u);
    ork_textcond_close(tp);
    ork_textcond_close(tu);
}
static void test_unmasked_qwen3(void) { case_unmasked("qwen3", "qwen3", &QWEN_TPL); }
static void test_unmasked_mistral(void) { case_unmasked("mistral", "mistral3", &MISTRAL_TPL); }

static const ork_test_case cases[] = {
    {"FLUX.2-dev slot: Mistral3 through the conditioner (chat template, left padding, mask)", test_mistral},
    {"FLUX.2 klein slot: Qwen3 through the conditioner (chat template, right padding, mask)", test_qwen3},
    {"fp8 checkpoint (E4M3 + weight_scale) equals its dequantized copy", test_fp8},
    {"UNMASKED slot, right padding (Z-Image's Qwen3): each caption's own rows", test_unmasked_qwen3},
    {"UNMASKED slot, left padding: the masked rows moved to the front", test_unmasked_mistral},
    {NULL, NULL},
};

ORK_TEST_MAIN("llm_cond", init, clean, cases)
