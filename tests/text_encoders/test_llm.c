/* tests/text_encoders/test_llm.c — the llm plugin's decoder LMs (FLUX.2's
 * text encoders) against transformers (tests/reference/llm_encoder_ref.py;
 * fixtures tests/fixtures/text/llm_*: tiny MistralModel / Qwen3Model weights
 * in the checkpoints' real key layouts, and the float64 stacked hidden states
 * diffusers' Flux2 pipelines take): the plugin loaded through the registry as
 * text_encoder components, each checkpoint opened, loaded into a weight store,
 * run through begin + every block + end with left- and right-padded ids and
 * their masks (left padding leaves query rows with no visible key: sdpa's 0).
 * Mistral3 from transformers 4's layout (sharded, vision tower to skip,
 * rope_theta) and 5's (model.language_model., rope_parameters) give the same
 * bits; Qwen3 takes the last layer's state after the final norm. Bad
 * checkpoints, configs, ids and call orders fail with one line.
 * TE_GPU (test_llm_cuda, label gpu): the same on CUDA with BF16 activations
 * and weights; exit 77 without a device.
 *
 * Tolerances (per element, M = max|ref|): CPU |err| <= 2e-5·M + 1e-4·|ref|
 * (transformers' own F32 forward is off by <= 5.4e-7·M: fixture metadata; a
 * wrong pair order, head group, mask or norm moves values by >= 1e-2·M).
 * CUDA (bf16 through up to 4 layers): 6e-2·M + 6e-2·|ref|. */
#include "te_test_util.h" /* its helpers; tt_reg here holds orakul-llm.so */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef TE_GPU
#define TOL_A 6e-2
#define TOL_R 6e-2
#else
#define TOL_A 2e-5
#define TOL_R 1e-4
#endif

typedef struct { int64_t hidden_layers[3]; } llm_params_t; /* the plugin's llm_params */

static ork_st_file *fx;

static int init(void) {
    if (ork_test_registry_open(ORK_PLUGIN_DIR "/orakul-llm" ORK_PLUGIN_SUFFIX, &tt_reg)) return 1;
    return ork_st_open(TT_FIXTURES "/llm_ref.safetensors", &fx) != ORK_OK;
}
static int clean(void) {
    ork_st_close(fx);
    return tt_clean();
}

/* create with hidden_layers (a, b, c) (all 0: the component's default) + open, then tt_load when load. */
static ork_status enc_open(const char *id, const char *path, int a, int b, int c, int load, tt_enc *e) {
    memset(e, 0, sizeof *e);
    e->pc = ork_registry_find(tt_reg, ORK_KIND_TEXT_ENCODER, id);
    if (!e->pc) return ORK_E_CONFIG;
    e->vt = e->pc->c->vtable;
    llm_params_t p = {{a, b, c}};
    ORK_TRY(e->vt->create(&e->pc->host, &p, &e->self));
    ORK_TRY(e->vt->open(e->self, path, &e->info));
    return load ? tt_load(e) : ORK_OK;
}

/* The stacked hidden states of side ("left" / "right") on the host (F32, malloc'd), n their count. */
static float *hidden_of(tt_enc *e, const char *side, size_t *n) {
    char in[64], mk[64];
    snprintf(in, sizeof in, "in.ids_%s", side);
    snprintf(mk, sizeof mk, "in.mask_%s", side);
    int B, L, Bm, Lm;
    int32_t *ids = tt_i32(fx, in, &B, &L), *mask = tt_i32(fx, mk, &Bm, &Lm);
    float *h = NULL;
    ork_text_encoder_outputs out;
    if (ids && mask && tt_forward(e, B, L, ids, mask, &out) == ORK_OK && out.hidden && !out.pooled &&
        out.hidden->ndim == 3 && out.hidden->shape[2] == e->info.hidden_dim) {
        h = tt_host(e->g, out.hidden);
        *n = (size_t)ork_tensor_numel(out.hidden);
    }
    free(ids);
    free(mask);
    return h;
}

static int check(tt_enc *e, const char *ref, const char *side) {
    size_t n = 0, nr = 0;
    float *got = hidden_of(e, side, &n);
    double *r = tt_f64(fx, ref, &nr);
    int ok = got && r && n == nr && tt_cmp(ref, got, r, n, TOL_A, TOL_R, NULL);
    if (!got) printf("\n    %s: the forward failed", ref);
    free(got);
    free(r);
    return ok;
}

static void test_components(void) {
    const ork_plugin_component *a = ork_registry_find(tt_reg, ORK_KIND_TEXT_ENCODER, "mistral3");
    const ork_plugin_component *b = ork_registry_find(tt_reg, ORK_KIND_TEXT_ENCODER, "qwen3");
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_STRING_EQUAL(a->c->id, "org.orakul.mistral3");
    CU_ASSERT_STRING_EQUAL(b->c->id, "org.orakul.qwen3");
    CU_ASSERT_PTR_EQUAL(ork_registry_find(tt_reg, ORK_KIND_TEXT_ENCODER, "mistral"), a);
    CU_ASSERT_PTR_NULL(ork_registry_find(tt_reg, ORK_KIND_MODEL, "qwen3"));
}

static void test_mistral(void) {
    tt_enc e;
    CU_ASSERT_EQUAL_FATAL(enc_open("mistral3", TT_FIXTURES "/llm_mistral3_tiny", 1, 2, 4, 1, &e), ORK_OK);
    CU_ASSERT_STRING_EQUAL(e.info.family, "mistral3");
    CU_ASSERT_EQUAL(e.info.n_blocks, 5);        /* the table and layers 0 .. 3: layer 4 is never read */
    CU_ASSERT_EQUAL(e.info.n_weights, 1 + 4 * 6);
    CU_ASSERT_EQUAL(e.info.hidden_dim, 3 * 32);
    CU_ASSERT_EQUAL(e.info.pooled_dim, 0);
    CU_ASSERT_EQUAL(e.info.vocab_size, 64);
    CU_ASSERT_EQUAL(e.info.pad_id, 11);
    CU_ASSERT_EQUAL(e.info.default_length, 512);
    for (int i = 0; i < e.info.n_weights; i++) /* no vision tower, projector or lm_head declared */
        CU_ASSERT(!strstr(e.info.weights[i].name, "vision") && !strstr(e.info.weights[i].name, "lm_head"));
    CU_ASSERT(check(&e, "ref.mistral3.right", "right"));
    CU_ASSERT(check(&e, "ref.mistral3.left", "left"));
    tt_close(&e);
    printf("\n  ");
}

static void test_mistral_v5(void) {
    tt_enc a, b;
    CU_ASSERT_EQUAL_FATAL(enc_open("mistral3", TT_FIXTURES "/llm_mistral3_tiny", 1, 2, 4, 1, &a), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(enc_open("mistral3", TT_FIXTURES "/llm_mistral3_tiny_v5/model.safetensors", 1, 2, 4, 1, &b), ORK_OK);
    size_t na = 0, nb = 0;
    float *x = hidden_of(&a, "left", &na), *y = hidden_of(&b, "left", &nb);
    CU_ASSERT_PTR_NOT_NULL(x);
    CU_ASSERT_PTR_NOT_NULL(y);
    if (x && y) {
        CU_ASSERT(na == nb && na > 0);
        CU_ASSERT(memcmp(x, y, na * sizeof *x) == 0);
    }
    free(x);
    free(y);
    tt_close(&a);
    tt_close(&b);
}

static void test_qwen(void) {
    tt_enc e;
    CU_ASSERT_EQUAL_FATAL(enc_open("qwen3", TT_FIXTURES "/llm_qwen3_tiny", 1, 3, 4, 1, &e), ORK_OK);
    CU_ASSERT_STRING_EQUAL(e.info.family, "qwen3");
    CU_ASSERT_EQUAL(e.info.n_blocks, 6); /* the table, 4 layers, the final norm (index 4 = the last layer) */
    CU_ASSERT_EQUAL(e.info.n_weights, 1 + 4 * 8 + 1);
    CU_ASSERT_EQUAL(e.info.hidden_dim, 3 * 32);
    CU_ASSERT(check(&e, "ref.qwen3.right", "right"));
    CU_ASSERT(check(&e, "ref.qwen3.left", "left"));
    tt_close(&e);
    printf("\n  ");
}

/* No mask and a mask of all ones: the same bits (nothing padded). */
/* create + select_hidden(n, sel) + open + load. */
static ork_status enc_select(const char *path, int n, const int32_t *sel, tt_enc *e) {
    memset(e, 0, sizeof *e);
    e->pc = ork_registry_find(tt_reg, ORK_KIND_TEXT_ENCODER, "qwen3");
    if (!e->pc) return ORK_E_CONFIG;
    e->vt = e->pc->c->vtable;
    llm_params_t p = {{0, 0, 0}};
    ORK_TRY(e->vt->create(&e->pc->host, &p, &e->self));
    if (!ORK_TEXT_ENCODER_HAS_SELECT(e->vt)) return ORK_E_ABI;
    ORK_TRY(e->vt->select_hidden(e->self, n, sel));
    ORK_TRY(e->vt->open(e->self, path, &e->info));
    return tt_load(e);
}

/* The model's choice of hidden states (a slot's hidden_states, Z-Image's
 * [-2]): the same values as the matching slices of the (1, 3, 4) stack that
 * test_qwen checks against transformers — bit for bit (the same ops on the
 * same layers; -2 of 4 layers is 3 and stops there, -1 is 4 after the norm). */
static void test_select(void) {
    tt_enc a;
    CU_ASSERT_EQUAL_FATAL(enc_open("qwen3", TT_FIXTURES "/llm_qwen3_tiny", 1, 3, 4, 1, &a), ORK_OK);
    size_t na = 0;
    float *ref = hidden_of(&a, "right", &na);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
    const size_t D = 32, rows = na / (3 * D);
    static const int32_t sels[][2] = {{-2, 0}, {-1, 0}, {1, -2}};
    static const int nsel[] = {1, 1, 2};
    static const int slice[][2] = {{1, 0}, {2, 0}, {0, 1}}; /* which third of the (1, 3, 4) stack */
    for (int c = 0; c < 3; c++) {
        tt_enc b;
        CU_ASSERT_EQUAL_FATAL(enc_select(TT_FIXTURES "/llm_qwen3_tiny", nsel[c], sels[c], &b), ORK_OK);
        CU_ASSERT_EQUAL(b.info.hidden_dim, nsel[c] * (int)D);
        CU_ASSERT_EQUAL(b.info.n_blocks, c == 1 ? 6 : 4); /* -2: the table and 3 layers, no final norm */
        size_t nb = 0;
        float *x = hidden_of(&b, "right", &nb);
        CU_ASSERT_PTR_NOT_NULL(x);
        CU_ASSERT_EQUAL(nb, rows * nsel[c] * D);
        int same = x != NULL;
        for (size_t r = 0; same && r < rows; r++)
            for (int j = 0; j < nsel[c]; j++)
                same &= !memcmp(x + (r * nsel[c] + j) * D, ref + (r * 3 + slice[c][j]) * D, D * sizeof *x);
        CU_ASSERT(same);
        free(x);
        tt_close(&b);
    }
    free(ref);
    tt_close(&a);
    /* refused: none, more than 4, an index the model lacks (open), after open */
    tt_enc e;
    int32_t far[1] = {-6}, five[5] = {0, 1, 2, 3, 4};
    CU_ASSERT_EQUAL(enc_select(TT_FIXTURES "/llm_qwen3_tiny", 0, far, &e), ORK_E_INVALID);
    tt_close(&e);
    CU_ASSERT_EQUAL(enc_select(TT_FIXTURES "/llm_qwen3_tiny", 5, five, &e), ORK_E_INVALID);
    tt_close(&e);
    CU_ASSERT_EQUAL(enc_select(TT_FIXTURES "/llm_qwen3_tiny", 1, far, &e), ORK_E_CONFIG); /* 4 layers: -1 .. -5 */
    tt_close(&e);
    CU_ASSERT_EQUAL_FATAL(enc_open("qwen3", TT_FIXTURES "/llm_qwen3_tiny", 1, 3, 4, 0, &e), ORK_OK);
    CU_ASSERT_EQUAL(e.vt->select_hidden(e.self, 1, far), ORK_E_INVALID);
    tt_close(&e);
}

static void test_no_mask(void) {
    tt_enc e;
    CU_ASSERT_EQUAL_FATAL(enc_open("qwen3", TT_FIXTURES "/llm_qwen3_tiny", 1, 3, 4, 1, &e), ORK_OK);
    int32_t ids[2 * 7], ones[2 * 7];
    for (int i = 0; i < 14; i++) {
        ids[i] = (i * 7 + 3) % 64;
        ones[i] = 1;
    }
    ork_text_encoder_outputs o1, o2;
    float *a = NULL, *b = NULL;
    CU_ASSERT_EQUAL(tt_forward(&e, 2, 7, ids, NULL, &o1), ORK_OK);
    if (o1.hidden) a = tt_host(e.g, o1.hidden);
    CU_ASSERT_EQUAL(tt_forward(&e, 2, 7, ids, ones, &o2), ORK_OK);
    if (o2.hidden) b = tt_host(e.g, o2.hidden);
    CU_ASSERT(a && b && !memcmp(a, b, 2 * 7 * 96 * sizeof *a));
    free(a);
    free(b);
    tt_close(&e);
}

/* A copy of the qwen3 fixture with config.json replaced by cfg (NULL: none); the folder in dir. */
static int scratch(char *dir, size_t n, const char *cfg) {
    snprintf(dir, n, "/tmp/ork_llm_XXXXXX");
    if (!mkdtemp(dir)) return 0;
    char p[600];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    if (symlink(TT_FIXTURES "/llm_qwen3_tiny/model.safetensors", p)) return 0;
    if (!cfg) return 1;
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "w");
    if (!f) return 0;
    fputs(cfg, f);
    fclose(f);
    return 1;
}
static void rm_scratch(const char *dir) {
    char p[600];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    rmdir(dir);
}

static void test_bad_checkpoints(void) {
    tt_enc e;
    CU_ASSERT_NOT_EQUAL(enc_open("qwen3", TT_FIXTURES "/nonexistent", 1, 3, 4, 0, &e), ORK_OK);
    tt_close(&e);
    /* the other family's files */
    CU_ASSERT_EQUAL(enc_open("qwen3", TT_FIXTURES "/llm_mistral3_tiny", 1, 2, 3, 0, &e), ORK_E_FORMAT);
    tt_close(&e);
    CU_ASSERT_EQUAL(enc_open("mistral3", TT_FIXTURES "/llm_qwen3_tiny", 1, 2, 3, 0, &e), ORK_E_FORMAT);
    tt_close(&e);
    CU_ASSERT_EQUAL(enc_open("qwen3", TT_FIXTURES "/t5_tiny", 1, 2, 3, 0, &e), ORK_E_FORMAT); /* no embed_tokens */
    tt_close(&e);
    /* the pipeline's layers (9, 18, 27) on a 4-layer model; an index past the last */
    CU_ASSERT_EQUAL(enc_open("qwen3", TT_FIXTURES "/llm_qwen3_tiny", 0, 0, 0, 0, &e), ORK_E_CONFIG);
    tt_close(&e);
    CU_ASSERT_EQUAL(enc_open("qwen3", TT_FIXTURES "/llm_qwen3_tiny", 1, 2, 5, 0, &e), ORK_E_CONFIG);
    tt_close(&e);
    /* the layers beyond the file's: config.json says 8, the file has 4 */
    char dir[64];
    static const char *const cfgs[] = {
        "{\"model_type\": \"qwen3\", \"num_hidden_layers\": 8, \"head_dim\": 12}",
        "{\"model_type\": \"qwen3\", \"head_dim\": 12, \"rope_parameters\": {\"rope_type\": \"yarn\", \"rope_theta\": 1e6}}",
        "{\"model_type\": \"qwen3\", \"head_dim\": 12, \"num_attention_heads\": 6}",
        "{\"model_type\": \"qwen3\", \"head_dim\": 10}",
        "{\"model_type\": \"qwen3\", \"head_dim\": 12, \"rope_theta\": 0}",
        "{\"model_type\": \"qwen3\", [",
        "[1, 2]",
    };
    static const ork_status want[] = {ORK_OK, ORK_E_UNSUPPORTED, ORK_E_FORMAT, ORK_E_FORMAT, ORK_E_FORMAT,
                                      ORK_E_FORMAT, ORK_E_FORMAT};
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        CU_ASSERT_FATAL(scratch(dir, sizeof dir, cfgs[i]));
        ork_status s = enc_open("qwen3", dir, 2, 3, 4, 0, &e);
        if (i == 0) { /* hidden state 4 of 8 layers: no final norm; but (2, 3, 8) needs 8 layers in the file */
            CU_ASSERT_EQUAL(s, ORK_OK);
            CU_ASSERT_EQUAL(e.info.n_blocks, 5);
            tt_close(&e);
            s = enc_open("qwen3", dir, 2, 3, 8, 0, &e);
            CU_ASSERT_EQUAL(s, ORK_E_FORMAT);
        } else {
            CU_ASSERT_EQUAL(s, want[i]);
        }
        if ((i == 0 && s != ORK_E_FORMAT) || (i > 0 && s != want[i])) printf("\n    config %zu: status %d", i, (int)s);
        tt_close(&e);
        rm_scratch(dir);
    }
    /* no config.json: shapes from the file (head_dim from q_norm), theta and eps the family's */
    CU_ASSERT_FATAL(scratch(dir, sizeof dir, NULL));
    CU_ASSERT_EQUAL(enc_open("qwen3", dir, 1, 2, 3, 0, &e), ORK_OK);
    CU_ASSERT_EQUAL(e.info.hidden_dim, 96);
    tt_close(&e);
    rm_scratch(dir);
}

static void test_bad_inputs(void) {
    tt_enc e;
    CU_ASSERT_EQUAL_FATAL(enc_open("mistral3", TT_FIXTURES "/llm_mistral3_tiny", 1, 2, 4, 1, &e), ORK_OK);
    int32_t ids[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    ork_text_encoder_outputs out;
    ids[3] = 64; /* vocab 64 */
    CU_ASSERT_EQUAL(tt_forward(&e, 1, 8, ids, NULL, &out), ORK_E_INVALID);
    ids[3] = -1;
    CU_ASSERT_EQUAL(tt_forward(&e, 1, 8, ids, NULL, &out), ORK_E_INVALID);
    ids[3] = 5;
    CU_ASSERT_EQUAL(tt_forward(&e, 0, 8, ids, NULL, &out), ORK_E_INVALID);
    CU_ASSERT_EQUAL(tt_forward(&e, 1, 8, ids, NULL, &out), ORK_OK);
    ork_carry c;
    memset(&c, 0, sizeof c);
    CU_ASSERT_EQUAL(e.vt->block(e.self, e.g, 0, &c), ORK_E_INVALID); /* before begin */
    ork_text_encoder_inputs in = {ORK_ABI_INIT(ork_text_encoder_inputs), 1, 8, ids, NULL};
    CU_ASSERT_EQUAL(e.vt->begin(e.self, e.g, &in, &c), ORK_OK);
    CU_ASSERT_EQUAL(e.vt->end(e.self, e.g, &c, &out), ORK_E_INVALID);   /* before the blocks */
    CU_ASSERT_EQUAL(e.vt->block(e.self, e.g, 1, &c), ORK_E_INVALID);    /* a layer before the table */
    CU_ASSERT_EQUAL(e.vt->block(e.self, e.g, 5, &c), ORK_E_INVALID);    /* past the last block */
    tt_close(&e);
}

static const ork_test_case cases[] = {
    {"registry: mistral3 and qwen3 are text_encoder components", test_components},
    {"Mistral3 tiny (transformers 4 layout, sharded) vs transformers: right and left padding", test_mistral},
    {"Mistral3 tiny in transformers 5's layout: the same bits", test_mistral_v5},
    {"Qwen3 tiny vs transformers (last layer after the final norm): right and left padding", test_qwen},
    {"no mask and a mask of ones: the same bits", test_no_mask},
    {"bad checkpoints, configs and layer choices fail with one line", test_bad_checkpoints},
    {"bad ids, lengths and call order fail with one line", test_bad_inputs},
    {"select_hidden: the model's hidden states (Z-Image's -2) = slices of the checked stack", test_select},
    {NULL, NULL},
};

#ifdef TE_GPU
int ork_cuda_device_count(void);
int main(void) {
    if (ork_cuda_device_count() <= 0) return 77;
    return ork_test_run("llm_cuda", init, clean, cases);
}
#else
ORK_TEST_MAIN("llm", init, clean, cases)
#endif
