/* tests/text_encoders/test_llm_real.c — the llm plugin at the REAL shapes
 * with random weights: Mistral-Small-3.x's language model (hidden 5120, 32
 * heads of 128, 8 kv heads, intermediate 32768, vocab 131072; the 30 layers
 * FLUX.2-dev reads) and Qwen3-4B (hidden 2560, 32 / 8 heads of 128,
 * intermediate 9728; 27 of 36 layers), 2 x 512 tokens (one row left-padded as
 * Mistral's tokenizer pads, one right-padded as Qwen's), on the CUDA backend
 * in BF16, against what tests/reference/llm_encoder_ref.py --real DIR writes
 * on the GPU machine: DIR/<m>/ (config.json, bf16 shards + index) and
 * DIR/<m>_ref.safetensors (transformers' float32 forward of those bf16
 * weights: the truth; its own bf16 forward's error in the metadata), for
 * <m> in ORK_LLM_REAL (default "mistral qwen3"; a model whose files are
 * absent is skipped). Prints max and mean abs error (and max / max|ref|) of
 * the stacked hidden states, all positions and the real ones, beside
 * transformers' bf16 figures; passes when ours is within 3 x transformers'
 * bf16 max error + 1e-3 of max|ref| and finite.
 * Exit 77 without ORK_LLM_REAL_DIR (and, TE_GPU, without a GPU). Without
 * TE_GPU (test_llm_real_cpu): the same on the CPU in F32. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#endif
#include "te_test_util.h"

#include <math.h>
#include <time.h>
#include <unistd.h>

#ifdef TE_GPU
int ork_cuda_device_count(void);
#define DT "bf16"
#else
#define DT "f32"
#endif

static const char *dir;

static int init(void) { return ork_test_registry_open(ORK_PLUGIN_DIR "/orakul-llm" ORK_PLUGIN_SUFFIX, &tt_reg); }
static int clean(void) { return tt_clean(); }

static double meta(const ork_st_file *f, const char *key) {
    const char *v = ork_st_meta(f, key);
    return v ? atof(v) : NAN;
}

/* max abs, mean abs error of got against ref over the rows (positions) where keep (NULL: all). */
static void errs(const float *got, const double *ref, size_t rows, size_t width, const int32_t *keep, double *mx,
                 double *mean, double *M, size_t *nonfinite) {
    double s = 0;
    size_t n = 0;
    *mx = *M = 0;
    *nonfinite = 0;
    for (size_t r = 0; r < rows; r++) {
        if (keep && !keep[r]) continue;
        for (size_t j = 0; j < width; j++) {
            size_t i = r * width + j;
            double d = fabs((double)got[i] - ref[i]);
            if (!isfinite(got[i])) (*nonfinite)++;
            if (!(d <= *mx)) *mx = d;
            *M = fmax(*M, fabs(ref[i]));
            s += d;
            n++;
        }
    }
    *mean = n ? s / (double)n : 0;
}

static void run_model(const char *name, const char *id) {
    char p[1024], rp[1100];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    snprintf(rp, sizeof rp, "%s/%s_ref.safetensors", dir, name);
    const char *want = getenv("ORK_LLM_REAL");
    if ((want && !strstr(want, name)) || access(rp, R_OK)) {
        printf("\n    %s: skipped (%s)", name, want && !strstr(want, name) ? "not in ORK_LLM_REAL" : "no reference");
        return;
    }
    ork_st_file *fx = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_st_open(rp, &fx), ORK_OK);
    tt_enc e;
    memset(&e, 0, sizeof e);
    e.pc = ork_registry_find(tt_reg, ORK_KIND_TEXT_ENCODER, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e.pc);
    e.vt = e.pc->c->vtable;
    int64_t params[3] = {0, 0, 0}; /* the pipeline's layers */
    CU_ASSERT_EQUAL_FATAL(e.vt->create(&e.pc->host, params, &e.self), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(e.vt->open(e.self, p, &e.info), ORK_OK);
    printf("\n    %s: %s, %d blocks, %d weights, hidden %d", name, e.info.variant, e.info.n_blocks, e.info.n_weights,
           e.info.hidden_dim);
    struct timespec t0, t1, t2;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CU_ASSERT_EQUAL_FATAL(tt_load(&e), ORK_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    int B, L, Bm, Lm;
    int32_t *ids = tt_i32(fx, "in.ids", &B, &L), *mask = tt_i32(fx, "in.mask", &Bm, &Lm);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mask);
    ork_text_encoder_outputs out;
    CU_ASSERT_EQUAL_FATAL(tt_forward(&e, B, L, ids, mask, &out), ORK_OK);
    size_t n = 0;
    double *ref = tt_f64(fx, "ref.f32", &n);
    float *got = tt_host(e.g, out.hidden);
    clock_gettime(CLOCK_MONOTONIC, &t2);
    CU_ASSERT_FATAL(ref && got && n == (size_t)ork_tensor_numel(out.hidden));
    size_t W = (size_t)e.info.hidden_dim, rows = n / W, nf, nf_real;
    double mx, mean, M, mx_r, mean_r, M_r;
    errs(got, ref, rows, W, NULL, &mx, &mean, &M, &nf);
    errs(got, ref, rows, W, mask, &mx_r, &mean_r, &M_r, &nf_real);
    size_t ref_nf = 0;
    for (size_t i = 0; i < n; i++) ref_nf += !isfinite(ref[i]);
    double hf_max = meta(fx, "hf_bf16_max"), hf_mean = meta(fx, "hf_bf16_mean");
    int ok = nf == 0 && ref_nf == 0 && mx <= 3 * (isnan(hf_max) ? 1e-2 * M : hf_max) + 1e-3 * M;
    printf("\n    %s all positions:  orakul " DT " max|err| %.4g mean %.4g (max/M %.3g), transformers bf16 max %.4g "
           "mean %.4g (max/M %.3g); max|ref| %.4g; %zu non-finite (ref %zu)%s", name, mx, mean, mx / M, hf_max,
           hf_mean, hf_max / M, M, nf, ref_nf, ok ? "" : "  FAIL");
    printf("\n    %s real positions: orakul " DT " max|err| %.4g mean %.4g (max/M %.3g)", name, mx_r, mean_r,
           M_r > 0 ? mx_r / M_r : 0);
    printf("\n    %s: load %.1f s, forward + copy %.2f s, device memory in use %.2f GiB", name,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec),
           (double)(t2.tv_sec - t1.tv_sec) + 1e-9 * (double)(t2.tv_nsec - t1.tv_nsec),
           (double)ork_alloc_in_use(e.alloc, NULL) / (1 << 30));
    CU_ASSERT(ok);
    free(ref);
    free(got);
    free(ids);
    free(mask);
    tt_close(&e);
    ork_st_close(fx);
    printf("\n  ");
}

static void test_mistral(void) { run_model("mistral", "mistral3"); }
static void test_qwen3(void) { run_model("qwen3", "qwen3"); }

static const ork_test_case cases[] = {
    {"Mistral-Small-3.x language model (real shape, random weights) vs transformers", test_mistral},
    {"Qwen3-4B (real shape, random weights) vs transformers", test_qwen3},
    {NULL, NULL},
};

int main(void) {
    dir = getenv("ORK_LLM_REAL_DIR");
    if (!dir || !*dir) {
        printf("ORK_LLM_REAL_DIR unset: skipped (python3 tests/reference/llm_encoder_ref.py --real DIR first)\n");
        return 77;
    }
#ifdef TE_GPU
    if (ork_cuda_device_count() <= 0) return 77;
#endif
    return ork_test_run("llm_real", init, clean, cases);
}
