/* tests/text_encoders/test_t5clip.c — the t5clip plugin's encoders against
 * transformers (tests/reference/text_encoder_ref.py; fixtures in
 * tests/fixtures/text: tiny T5EncoderModel and CLIPTextModel checkpoints as
 * save_pretrained writes them, and their float64 outputs): the plugin loaded
 * through the registry as text_encoder components, each checkpoint opened,
 * loaded into a weight store, run through begin + every block + end on the
 * fixture's token ids with and without a padding mask; last_hidden_state and
 * CLIP's pooler_output compared (the legacy eos_token_id 2 config pools at
 * argmax(ids), eos_token_id 7 at the first 7). T5's 40 tokens reach relative
 * distances past the bucket edges at 16 and 32. An fp8 T5 checkpoint (E4M3
 * linear weights with per-tensor scales) loads. Bad inputs fail with one line.
 * TE_GPU (test_t5clip_cuda, label gpu): the same on the CUDA backend with BF16
 * activations and weights; exit 77 without a device.
 *
 * Tolerances (per element, M = max|ref|): CPU |err| <= 2e-5·M + 1e-4·|ref|:
 * F32 against transformers' F64 forward of the same F32 weights (its own F32
 * run is off by 7e-7·M for T5, 1.6e-7·M for CLIP: fixture metadata); a mapping
 * mistake (a bucket, a norm, the gate order, the pooled row) moves values by
 * >= 1e-2·M. CUDA (bf16, 8 mantissa bits, through 2 layers): 5e-2·M + 5e-2·|ref|. */
#include "te_test_util.h"

#ifdef TE_GPU
#define TOL_A 5e-2
#define TOL_R 5e-2
#else
#define TOL_A 2e-5
#define TOL_R 1e-4
#endif

static ork_st_file *fx;

static int init(void) {
    if (tt_init()) return 1;
    return ork_st_open(TT_FIXTURES "/text_ref.safetensors", &fx) != ORK_OK;
}
static int clean(void) {
    ork_st_close(fx);
    return tt_clean();
}

static void test_components(void) {
    const ork_plugin_component *t5 = ork_registry_find(tt_reg, ORK_KIND_TEXT_ENCODER, "t5");
    const ork_plugin_component *cl = ork_registry_find(tt_reg, ORK_KIND_TEXT_ENCODER, "clip_l");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t5);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cl);
    CU_ASSERT_STRING_EQUAL(t5->c->id, "org.orakul.t5");
    CU_ASSERT_STRING_EQUAL(cl->c->id, "org.orakul.clip");
    CU_ASSERT_STRING_EQUAL(ork_kind_name(ORK_KIND_TEXT_ENCODER), "text_encoder");
    CU_ASSERT_PTR_NULL(ork_registry_find(tt_reg, ORK_KIND_MODEL, "t5")); /* a kind of its own */
}

static void case_t5(int masked) {
    tt_enc e;
    CU_ASSERT_EQUAL_FATAL(tt_open("t5", TT_FIXTURES "/t5_tiny", &e), ORK_OK);
    CU_ASSERT_STRING_EQUAL(e.info.family, "t5");
    CU_ASSERT_EQUAL(e.info.n_blocks, 4); /* embed, 2 layers, final norm */
    CU_ASSERT_EQUAL(e.info.hidden_dim, 32);
    CU_ASSERT_EQUAL(e.info.pooled_dim, 0);
    CU_ASSERT_EQUAL(e.info.vocab_size, 64);
    CU_ASSERT_EQUAL(e.info.pad_id, 0);
    CU_ASSERT_EQUAL(e.info.eos_id, 1);
    CU_ASSERT_EQUAL(e.info.n_weights, 3 + 2 * 9);
    CU_ASSERT_EQUAL_FATAL(tt_load(&e), ORK_OK);
    int B, L, Bm, Lm;
    int32_t *ids = tt_i32(fx, "in.t5.ids", &B, &L), *mask = tt_i32(fx, "in.t5.mask", &Bm, &Lm);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mask);
    ork_text_encoder_outputs out;
    CU_ASSERT_EQUAL_FATAL(tt_forward(&e, B, L, ids, masked ? mask : NULL, &out), ORK_OK);
    CU_ASSERT_PTR_NULL(out.pooled);
    CU_ASSERT(tt_check(&e, fx, masked ? "ref.t5.hidden_masked" : "ref.t5.hidden", out.hidden, TOL_A, TOL_R));
    free(ids);
    free(mask);
    tt_close(&e);
    printf("\n  ");
}
static void test_t5(void) { case_t5(0); }

/* An fp8 checkpoint (E4M3 linear weights, per-tensor .scale_weight: ComfyUI's
 * t5xxl_fp8_e4m3fn_scaled form): put_quantized with the scale on every row;
 * the reference runs on the dequantized weights. */
static void test_t5_fp8(void) {
    tt_enc e;
    CU_ASSERT_EQUAL_FATAL(tt_open("t5", TT_FIXTURES "/t5_tiny_fp8", &e), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(tt_load(&e), ORK_OK);
    int B, L;
    int32_t *ids = tt_i32(fx, "in.t5.ids", &B, &L);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
    ork_text_encoder_outputs out;
    CU_ASSERT_EQUAL_FATAL(tt_forward(&e, B, L, ids, NULL, &out), ORK_OK);
    CU_ASSERT(tt_check(&e, fx, "ref.t5_fp8.hidden", out.hidden, TOL_A, TOL_R));
    free(ids);
    tt_close(&e);
    printf("\n  ");
}
static void test_t5_masked(void) { case_t5(1); }

static void case_clip(const char *dir, int masked, const char *ref_hidden, const char *ref_pooled) {
    tt_enc e;
    CU_ASSERT_EQUAL_FATAL(tt_open("clip", dir, &e), ORK_OK);
    CU_ASSERT_STRING_EQUAL(e.info.family, "clip");
    CU_ASSERT_EQUAL(e.info.n_blocks, 4);
    CU_ASSERT_EQUAL(e.info.hidden_dim, 32);
    CU_ASSERT_EQUAL(e.info.pooled_dim, 32);
    CU_ASSERT_EQUAL(e.info.max_length, 24);
    CU_ASSERT_EQUAL_FATAL(tt_load(&e), ORK_OK);
    int B, L, Bm, Lm;
    int32_t *ids = tt_i32(fx, "in.clip.ids", &B, &L), *mask = tt_i32(fx, "in.clip.mask", &Bm, &Lm);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mask);
    ork_text_encoder_outputs out;
    CU_ASSERT_EQUAL_FATAL(tt_forward(&e, B, L, ids, masked ? mask : NULL, &out), ORK_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out.pooled);
    CU_ASSERT_EQUAL(out.pooled->ndim, 2);
    if (ref_hidden) CU_ASSERT(tt_check(&e, fx, ref_hidden, out.hidden, TOL_A, TOL_R));
    CU_ASSERT(tt_check(&e, fx, ref_pooled, out.pooled, TOL_A, TOL_R));
    free(ids);
    free(mask);
    tt_close(&e);
    printf("\n  ");
}
static void test_clip(void) { case_clip(TT_FIXTURES "/clip_tiny", 0, "ref.clip.hidden", "ref.clip.pooled"); }
static void test_clip_masked(void) {
    case_clip(TT_FIXTURES "/clip_tiny", 1, "ref.clip.hidden_masked", "ref.clip.pooled_masked");
}
static void test_clip_eos(void) { case_clip(TT_FIXTURES "/clip_tiny_eos", 0, NULL, "ref.clip_eos.pooled"); }
/* The path forms: the .safetensors file itself (config.json still read beside
 * it), and a folder of shards with model.safetensors.index.json (how T5-XXL
 * comes): the same weights give the same bits. */
static float *t5_hidden(const char *path, size_t *n) {
    tt_enc e;
    float *h = NULL;
    ork_status s = tt_open("t5", path, &e);
    if (s == ORK_OK) s = tt_load(&e);
    int B, L;
    int32_t *ids = tt_i32(fx, "in.t5.ids", &B, &L);
    ork_text_encoder_outputs out;
    if (s == ORK_OK && ids) s = tt_forward(&e, B, L, ids, NULL, &out);
    CU_ASSERT_EQUAL(s, ORK_OK);
    if (s == ORK_OK) {
        h = tt_host(e.g, out.hidden);
        *n = (size_t)ork_tensor_numel(out.hidden);
    }
    free(ids);
    tt_close(&e);
    return h;
}
static void test_paths(void) {
    size_t n1 = 0, n2 = 0, n3 = 0;
    float *a = t5_hidden(TT_FIXTURES "/t5_tiny", &n1), *b = t5_hidden(TT_FIXTURES "/t5_tiny/model.safetensors", &n2);
    float *c = t5_hidden(TT_FIXTURES "/t5_tiny_sharded", &n3);
    CU_ASSERT_PTR_NOT_NULL(a);
    CU_ASSERT_PTR_NOT_NULL(b);
    CU_ASSERT_PTR_NOT_NULL(c);
    if (a && b && c) {
        CU_ASSERT(n1 == n2 && n1 == n3 && n1 > 0);
        CU_ASSERT(memcmp(a, b, n1 * sizeof *a) == 0);
        CU_ASSERT(memcmp(a, c, n1 * sizeof *a) == 0);
    }
    free(a);
    free(b);
    free(c);
}

static void test_bad(void) {
    tt_enc e;
    CU_ASSERT_NOT_EQUAL(tt_open("t5", TT_FIXTURES "/nonexistent", &e), ORK_OK);
    tt_close(&e);
    CU_ASSERT_EQUAL(tt_open("t5", TT_FIXTURES "/clip_tiny", &e), ORK_E_FORMAT); /* a CLIP file is not a T5 */
    tt_close(&e);
    CU_ASSERT_EQUAL(tt_open("clip", TT_FIXTURES "/t5_tiny", &e), ORK_E_FORMAT);
    tt_close(&e);
    CU_ASSERT_EQUAL_FATAL(tt_open("clip", TT_FIXTURES "/clip_tiny", &e), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(tt_load(&e), ORK_OK);
    ork_text_encoder_outputs out;
    int32_t ids[30] = {0};
    ids[3] = 99; /* vocab 99: ids 0 .. 98 */
    CU_ASSERT_EQUAL(tt_forward(&e, 1, 8, ids, NULL, &out), ORK_E_INVALID);
    ids[3] = -1;
    CU_ASSERT_EQUAL(tt_forward(&e, 1, 8, ids, NULL, &out), ORK_E_INVALID);
    ids[3] = 5;
    CU_ASSERT_EQUAL(tt_forward(&e, 1, 25, ids, NULL, &out), ORK_E_INVALID); /* 24 positions */
    CU_ASSERT_EQUAL(tt_forward(&e, 0, 8, ids, NULL, &out), ORK_E_INVALID);
    CU_ASSERT_EQUAL(tt_forward(&e, 1, 8, ids, NULL, &out), ORK_OK);
    /* end before any block ran */
    ork_carry c;
    ork_text_encoder_inputs in = {ORK_ABI_INIT(ork_text_encoder_inputs), 1, 8, ids, NULL};
    CU_ASSERT_EQUAL(e.vt->begin(e.self, e.g, &in, &c), ORK_OK);
    CU_ASSERT_EQUAL(e.vt->end(e.self, e.g, &c, &out), ORK_E_INVALID);
    CU_ASSERT_EQUAL(e.vt->block(e.self, e.g, 1, &c), ORK_E_INVALID); /* a layer before the embeddings */
    CU_ASSERT_EQUAL(e.vt->block(e.self, e.g, 4, &c), ORK_E_INVALID); /* past the last block */
    tt_close(&e);
}

static const ork_test_case cases[] = {
    {"registry: t5 and clip are text_encoder components", test_components},
    {"T5 tiny vs transformers: last_hidden_state", test_t5},
    {"T5 tiny vs transformers: last_hidden_state with a padding mask", test_t5_masked},
    {"T5 tiny fp8 checkpoint (E4M3 + scale_weight) vs transformers", test_t5_fp8},
    {"CLIP tiny vs transformers: hidden and pooled (argmax)", test_clip},
    {"CLIP tiny vs transformers: with a padding mask", test_clip_masked},
    {"CLIP tiny, eos_token_id 7: pooled at the first 7", test_clip_eos},
    {"T5 from its folder, its .safetensors file, a sharded folder: same bits", test_paths},
    {"bad checkpoints, ids, lengths and call order fail with one line", test_bad},
    {NULL, NULL},
};

#ifdef TE_GPU
int ork_cuda_device_count(void);
int main(void) {
    if (ork_cuda_device_count() <= 0) return 77;
    return ork_test_run("t5clip_cuda", init, clean, cases);
}
#else
ORK_TEST_MAIN("t5clip", init, clean, cases)
#endif
