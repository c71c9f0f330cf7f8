/* test_adamw8bit_cuda.c — the CUDA steps of AdamW-8bit and fp32 AdamW against
 * their CPU versions: bit-identical params and state bytes over 20 steps for
 * sizes {32, 4097, 1e6+3} (f32 and bf16 params, RNE and stochastic rounding,
 * f32 and bf16 grads, NaN/Inf in the grads). Exits 77 without a CUDA device. */
#include "ork_test.h"

#include <cuda_runtime_api.h>

#include "../../plugins/optimizers/adamw/adamw_math.h"
#include "../../plugins/optimizers/adamw/adamw8bit.h"
#include "opt_test_util.h"

#define CK(x) CU_ASSERT_FATAL((x) == cudaSuccess)

static ork_adamw8bit_maps g_maps;
static ork_adamw8bit_maps *d_maps;
static cudaStream_t g_stream;

static int init(void) {
    ork_adamw8bit_maps_init(&g_maps, 0);
    if (cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking) != cudaSuccess) return 1;
    if (cudaMalloc((void **)&d_maps, sizeof g_maps) != cudaSuccess) return 1;
    return cudaMemcpy(d_maps, &g_maps, sizeof g_maps, cudaMemcpyHostToDevice) != cudaSuccess;
}
static int clean(void) { cudaFree(d_maps); cudaStreamDestroy(g_stream); return 0; }

enum { OPT_8BIT, OPT_ADAMW };

/* Run `steps` steps on both devices and compare params and state bytes. */
static void run_case(int opt, int64_t n, ork_dtype pdt, ork_dtype gdt, int sr) {
    const int steps = 20;
    ork_adamw_hparams h = ork_adamw_hparams_default();
    h.eps = 1e-6f;
    h.bf16_stochastic = sr;
    h.seed = 1234;
    size_t pe = ork_dtype_size(pdt), ge = ork_dtype_size(gdt);
    size_t sb = opt == OPT_8BIT ? ork_adamw8bit_state_size(n) : ork_adamw_state_size(n);
    float *pf = malloc(n * 4), *gf = malloc(n * 4);
    void *p = malloc(n * pe), *g = malloc(n * ge), *st = calloc(1, sb);
    void *p_back = malloc(n * pe), *st_back = malloc(sb);
    void *dp, *dg, *dst;
    CK(cudaMalloc(&dp, n * pe));
    CK(cudaMalloc(&dg, n * ge));
    CK(cudaMalloc(&dst, sb));
    CK(cudaMemsetAsync(dst, 0, sb, g_stream));
    ork_trng r = {(uint64_t)n * 3 + pdt};
    ork_trng_randn(&r, pf, n, 0.1f);
    for (int64_t i = 0; i < n; i++) {
        if (pdt == ORK_BF16) ((uint16_t *)p)[i] = ork_f32_to_bf16_rne(pf[i]);
        else ((float *)p)[i] = pf[i];
    }
    CK(cudaMemcpyAsync(dp, p, n * pe, cudaMemcpyHostToDevice, g_stream));
    for (int t = 1; t <= steps; t++) {
        ork_trng_randn(&r, gf, n, 0.01f);
        if (t == 7 && n > 40) { gf[3] = NAN; gf[40] = INFINITY; }
        for (int64_t i = 0; i < n; i++) {
            if (gdt == ORK_BF16) ((uint16_t *)g)[i] = ork_f32_to_bf16_rne(gf[i]);
            else ((float *)g)[i] = gf[i];
        }
        CK(cudaMemcpyAsync(dg, g, n * ge, cudaMemcpyHostToDevice, g_stream));
        if (opt == OPT_8BIT) {
            CU_ASSERT_EQUAL_FATAL(ork_adamw8bit_step_cpu(&g_maps, &h, t, p, pdt, g, gdt, st, n), ORK_OK);
            CU_ASSERT_EQUAL_FATAL(ork_adamw8bit_step_cuda(d_maps, &h, t, dp, pdt, dg, gdt, dst, n,
                                                          g_stream), ORK_OK);
        } else {
            if (t == 7 && n > 40) continue; /* torch AdamW has no NaN guard */
            CU_ASSERT_EQUAL_FATAL(ork_adamw_step_cpu(&h, t, p, pdt, g, gdt, st, n), ORK_OK);
            CU_ASSERT_EQUAL_FATAL(ork_adamw_step_cuda(&h, t, dp, pdt, dg, gdt, dst, n, g_stream), ORK_OK);
        }
        CK(cudaStreamSynchronize(g_stream)); /* g is rewritten next step */
    }
    CK(cudaMemcpyAsync(p_back, dp, n * pe, cudaMemcpyDeviceToHost, g_stream));
    CK(cudaMemcpyAsync(st_back, dst, sb, cudaMemcpyDeviceToHost, g_stream));
    CK(cudaStreamSynchronize(g_stream));
    int pdiff = 0, sdiff = 0;
    for (int64_t i = 0; i < n; i++) pdiff += memcmp((char *)p + i * pe, (char *)p_back + i * pe, pe) != 0;
    for (size_t i = 0; i < sb; i++) sdiff += ((uint8_t *)st)[i] != ((uint8_t *)st_back)[i];
    if (pdiff || sdiff)
        printf("\n  %s n=%lld p=%s g=%s sr=%d: %d params and %d state bytes differ",
               opt == OPT_8BIT ? "adamw8bit" : "adamw", (long long)n, pdt == ORK_BF16 ? "bf16" : "f32",
               gdt == ORK_BF16 ? "bf16" : "f32", sr, pdiff, sdiff);
    CU_ASSERT_EQUAL(pdiff, 0);
    CU_ASSERT_EQUAL(sdiff, 0);
    cudaFree(dp); cudaFree(dg); cudaFree(dst);
    free(pf); free(gf); free(p); free(g); free(st); free(p_back); free(st_back);
}

static const int64_t k_sizes[] = {32, 4097, 1000003};

static void test_8bit_f32(void) {
    for (int k = 0; k < 3; k++) run_case(OPT_8BIT, k_sizes[k], ORK_F32, ORK_F32, 0);
}
static void test_8bit_bf16(void) {
    for (int k = 0; k < 3; k++) {
        run_case(OPT_8BIT, k_sizes[k], ORK_BF16, ORK_BF16, 0);
        run_case(OPT_8BIT, k_sizes[k], ORK_BF16, ORK_F32, 1);
    }
}
static void test_adamw(void) {
    for (int k = 0; k < 3; k++) {
        run_case(OPT_ADAMW, k_sizes[k], ORK_F32, ORK_F32, 0);
        run_case(OPT_ADAMW, k_sizes[k], ORK_BF16, ORK_BF16, 1);
    }
}
static void test_invalid(void) {
    ork_adamw_hparams h = ork_adamw_hparams_default();
    CU_ASSERT_EQUAL(ork_adamw8bit_step_cuda(d_maps, &h, 0, (void *)1, ORK_F32, (void *)1, ORK_F32,
                                            (void *)1, 10, g_stream), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_adamw_step_cuda(&h, 1, (void *)1, ORK_F16, (void *)1, ORK_F32, (void *)1, 10,
                                        g_stream), ORK_E_INVALID);
}

static const ork_test_case cases[] = {
    {"adamw8bit CUDA == CPU, f32 params", test_8bit_f32},
    {"adamw8bit CUDA == CPU, bf16 params (RNE, SR)", test_8bit_bf16},
    {"adamw CUDA == CPU", test_adamw},
    {"invalid arguments", test_invalid},
    {NULL, NULL},
};

int main(void) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    return ork_test_run("adamw8bit_cuda", init, clean, cases);
}
