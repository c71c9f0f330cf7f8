/* tests/text_encoders/test_t5clip_real.c — the t5clip plugin at the REAL
 * shapes (T5-XXL: 24 layers, d_model 4096, 64 heads, d_ff 10240, 2 x 512
 * tokens; CLIP-L: 12 layers, 768, 2 x 77 tokens) with random weights, on the
 * CUDA backend in BF16, against the folder tests/reference/text_encoder_ref.py
 * --real writes on the GPU machine: ORK_TE_REAL_DIR/{t5,clip}/ (config.json,
 * model.safetensors in bf16) and refs.safetensors (transformers' float32
 * forward of those bf16 weights, and its own bf16 forward's error in the
 * metadata). Prints the max error of each output relative to its max |ref|
 * beside transformers' bf16 figure, and passes when ours is within
 * 3 x transformers' bf16 error + 1e-3 (bf16 tolerance as the peer runs it).
 * Exit 77 (skipped) without a GPU or without ORK_TE_REAL_DIR.
 * Without TE_GPU (test_t5clip_real_cpu): the same on the CPU backend in F32, a
 * check of the pipeline (e.g. on a folder written with --t5-layers 1). */
#include "te_test_util.h"

#ifdef TE_GPU
int ork_cuda_device_count(void);
#endif

static const char *dir;
static ork_st_file *fx;

static int init(void) {
    if (tt_init()) return 1;
    char p[1024];
    snprintf(p, sizeof p, "%s/refs.safetensors", dir);
    return ork_st_open(p, &fx) != ORK_OK;
}
static int clean(void) {
    ork_st_close(fx);
    return tt_clean();
}

static double meta(const char *key) {
    const char *v = ork_st_meta(fx, key);
    return v ? atof(v) : NAN;
}

/* One output against its reference: prints, returns whether within 3·hf + 1e-3. */
static int cmp(tt_enc *e, const char *ref_name, const ork_tensor *t, const char *hf_key) {
    size_t n = 0;
    double *ref = tt_f64(fx, ref_name, &n), err = INFINITY, hf = meta(hf_key);
    float *got = t ? tt_host(e->g, t) : NULL;
    int ok = ref && got && (size_t)ork_tensor_numel(t) == n;
    if (ok) {
        tt_cmp(ref_name, got, ref, n, 1e30, 0, &err);
        size_t nonfinite = 0;
        for (size_t i = 0; i < n; i++) nonfinite += !isfinite(got[i]);
        ok = nonfinite == 0 && err <= 3 * (isnan(hf) ? 1e-2 : hf) + 1e-3;
        printf("\n    %-28s orakul bf16 max err/M %.4g, transformers bf16 %.4g, %zu non-finite%s", "", err, hf,
               nonfinite, ok ? "" : "  FAIL");
    }
    free(ref);
    free(got);
    return ok;
}

static void test_t5(void) {
    char p[1024];
    snprintf(p, sizeof p, "%s/t5", dir);
    tt_enc e;
    CU_ASSERT_EQUAL_FATAL(tt_open("t5", p, &e), ORK_OK);
    printf("\n    T5: %s, %d blocks, %d weights", e.info.variant, e.info.n_blocks, e.info.n_weights);
    CU_ASSERT_EQUAL_FATAL(tt_load(&e), ORK_OK);
    int B, L;
    int32_t *ids = tt_i32(fx, "in.t5.ids", &B, &L);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
    ork_text_encoder_outputs out;
    CU_ASSERT_EQUAL_FATAL(tt_forward(&e, B, L, ids, NULL, &out), ORK_OK);
    CU_ASSERT(cmp(&e, "ref.t5.hidden", out.hidden, "hf_bf16_err_t5"));
    size_t used = ork_alloc_in_use(e.alloc, NULL);
    printf("\n    device memory in use after the forward: %.2f GiB", (double)used / (1 << 30));
    free(ids);
    tt_close(&e);
    printf("\n  ");
}

static void test_clip(void) {
    char p[1024];
    snprintf(p, sizeof p, "%s/clip", dir);
    tt_enc e;
    CU_ASSERT_EQUAL_FATAL(tt_open("clip", p, &e), ORK_OK);
    printf("\n    CLIP: %s, %d blocks", e.info.variant, e.info.n_blocks);
    CU_ASSERT_EQUAL_FATAL(tt_load(&e), ORK_OK);
    int B, L;
    int32_t *ids = tt_i32(fx, "in.clip.ids", &B, &L);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
    ork_text_encoder_outputs out;
    CU_ASSERT_EQUAL_FATAL(tt_forward(&e, B, L, ids, NULL, &out), ORK_OK);
    CU_ASSERT(cmp(&e, "ref.clip.hidden", out.hidden, "hf_bf16_err_clip_hidden"));
    CU_ASSERT(cmp(&e, "ref.clip.pooled", out.pooled, "hf_bf16_err_clip_pooled"));
    free(ids);
    tt_close(&e);
    printf("\n  ");
}

static const ork_test_case cases[] = {
    {"CLIP-L (real shape, random weights) vs transformers", test_clip},
    {"T5-XXL (real shape, random weights) vs transformers", test_t5},
    {NULL, NULL},
};

int main(void) {
    dir = getenv("ORK_TE_REAL_DIR");
    if (!dir || !*dir) {
        printf("ORK_TE_REAL_DIR unset: skipped (python3 tests/reference/text_encoder_ref.py --real DIR first)\n");
        return 77;
    }
#ifdef TE_GPU
    if (ork_cuda_device_count() <= 0) return 77;
#endif
    return ork_test_run("t5clip_real", init, clean, cases);
}
