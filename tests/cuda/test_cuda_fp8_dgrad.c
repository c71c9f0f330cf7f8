/* test_cuda_fp8_dgrad.c — the native FP8 input-gradient GEMM (core/cuda/
 * cuda_gemm_fp8.h, issue #31) and the tensor-wide (sm_89) scheme of both FP8
 * GEMMs, on the device. gpu label; exits 77 without a CUDA device.
 *
 *  - the dy quantizer: u = fl32(dy · sw[n]) per row to E4M3: bytes and scales
 *    equal ork_quantize_fp8 of the F32 matrix u bit for bit (vector and scalar
 *    kernels, a zero row, a huge and a tiny row);
 *  - the FP8 byte transpose equals the host's, for tile-ragged shapes;
 *  - dx = dy · w (FLUX shapes, E4M3 and E5M2 weights, outer-vector and
 *    tensor-wide scales) against a float64 CPU product of the same quantized
 *    operands, su[m] · Σ_n uq[m, n] · wq[n, k]: per element within one bf16
 *    rounding (2^-8 |ref|) plus 2^-10 of Σ_n |su · uq · wq| (Hopper's FP8 MMA
 *    keeps ~14 bits within a chunk before promoting it to the F32
 *    accumulator); relative RMS < 0.6%;
 *  - dx against path (a) (dy · the dequantized bf16 weight, a bf16 GEMM): the
 *    relative RMS difference within 1.25 e_u + 0.3%, where e_u is u's own
 *    E4M3 rounding error ||deq(uq) − u|| / ||u|| measured here (~2.6%);
 *  - the forward's tensor-wide scheme against its outer-vector scheme (same
 *    operands, both ~1 bf16 rounding from the exact product): < 0.5%;
 *  - a NaN and an Inf in dy make their dx rows all NaN; the other rows equal
 *    the clean run's bit for bit;
 *  - shapes, pointers and scratch cuBLASLt FP8 cannot take: ORK_E_UNSUPPORTED,
 *    a reason, no log line;
 *  - ops->linear with an FP8 weight, bias and LoRA on a CUDA graph: fp8_gemm
 *    native (forward and dx native) against dequant: loss within 1%, y and
 *    the LoRA gradients within 4%, dx within 5% (dy's own E4M3 rounding on
 *    top of the forward's, ~2.6% each), no fallback line; a block-scaled
 *    weight falls back with one line, bit-equal to the dequant graph.
 * On a GPU below sm_89 the GEMM parts check the refusal instead. */
#include "ork_test.h"

#include "cuda/cuda_ctx.h"
#include "cuda/cuda_gemm.h"
#include "cuda/cuda_gemm_fp8.h"
#include "numerics/fp8.h"
#include "numerics/half.h"
#include "numerics/quantize.h"
#include "tensor/alloc.h"
#include "tensor/backend.h"
#include "tensor/graph.h"
#include "tensor/ops.h"
#include "tensor/tape.h"
#include "util/log.h"

#include <cuda_runtime_api.h>
#include <orakul/orakul.h>
#include <stdint.h>

#define CK(x) CU_ASSERT_FATAL((x) == cudaSuccess)

static ork_cuda_ctx *g_ctx;
static cudaStream_t g_st;
static int g_scheme; /* 2 outer vectors, 1 tensor-wide, 0 none */

/* ---- log capture, rng ------------------------------------------------------------------ */
static char g_lines[8][1024];
static int g_nlines;
static void sink(ork_log_level lvl, const char *line, void *user) {
    (void)lvl; (void)user;
    if (g_nlines < 8) snprintf(g_lines[g_nlines], sizeof g_lines[0], "%s", line);
    g_nlines++;
}
static void clear_log(void) { g_nlines = 0; g_lines[0][0] = '\0'; }

typedef struct rng { uint64_t s; } rng;
static double urand(rng *r) {
    r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
    return ((r->s >> 11) + 0.5) / 9007199254740992.0;
}
static float gauss(rng *r) { return (float)(sqrt(-2.0 * log(urand(r))) * cos(6.283185307179586 * urand(r))); }
static void fill_gauss(float *v, size_t n, float sd, uint64_t seed) {
    rng r = {seed};
    for (size_t i = 0; i < n; i++) v[i] = sd * gauss(&r);
}

static int init(void) {
    ork_log_set_sink(sink, NULL);
    if (ork_cuda_ctx_create(0, &g_ctx) != ORK_OK) return 1;
    if (cudaStreamCreateWithFlags(&g_st, cudaStreamNonBlocking) != cudaSuccess) return 1;
    g_scheme = ork_cuda_fp8_scheme(g_ctx);
    char why[256] = "";
    if (ork_cuda_fp8_native_ok(g_ctx, why, sizeof why) != ORK_OK) printf("\n  no native FP8 GEMM here: %s\n", why);
    else printf("\n  FP8 scheme here: %s\n", g_scheme == 2 ? "outer-vector scales" : "tensor-wide scales");
    return 0;
}
static int clean(void) {
    cudaStreamDestroy(g_st);
    ork_cuda_ctx_destroy(g_ctx);
    ork_log_set_sink(NULL, NULL);
    return 0;
}

static size_t al256(size_t b) { return (b + 255) & ~(size_t)255; }

/* dy (M, N) bf16: Gaussians of sd 1e-3 (gradient-sized); row 0 zero, row 1 x1e4, row 2 x1e-4 */
static void make_dy(uint16_t *dy, int64_t M, int64_t N, uint64_t seed) {
    rng r = {seed};
    for (int64_t m = 0; m < M; m++) {
        float g = m == 1 ? 1e4f : m == 2 ? 1e-4f : 1.0f;
        for (int64_t n = 0; n < N; n++) dy[m * N + n] = ork_f32_to_bf16(m == 0 ? 0.0f : 1e-3f * g * gauss(&r));
    }
}

/* u = fl32(bf16(dy) · sw[n]) (M, N) F32: what the quantizer quantizes */
static void make_u(const uint16_t *dy, const float *sw, int64_t M, int64_t N, float *u) {
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) u[m * N + n] = ork_bf16_to_f32(dy[m * N + n]) * sw[n];
}

/* ---- 1. the dy quantizer ------------------------------------------------------------------ */

static void check_cs(int64_t M, int64_t N, size_t off) {
    size_t n = (size_t)(M * N);
    uint16_t *dy = malloc(n * 2);
    float *sw = malloc((size_t)N * 4), *u = malloc(n * 4), *s = malloc((size_t)M * 4), *gs = malloc((size_t)M * 4);
    uint8_t *q = malloc(n), *gq = malloc(n);
    CU_ASSERT_FATAL(dy && sw && u && s && gs && q && gq);
    make_dy(dy, M, N, 11 + (uint64_t)N);
    rng r = {5};
    for (int64_t i = 0; i < N; i++) sw[i] = (float)(0.02 / 448.0 * (0.5 + urand(&r))); /* weight-row scales */
    make_u(dy, sw, M, N, u);
    CU_ASSERT_EQUAL_FATAL(ork_quantize_fp8("u", u, ORK_F32, (size_t)M, (size_t)N, ORK_F8_E4M3, 0, q, s, NULL), ORK_OK);
    char *ddy, *dq;
    float *dsw, *ds;
    CK(cudaMalloc((void **)&ddy, n * 2 + 64));
    CK(cudaMalloc((void **)&dq, n + 64));
    CK(cudaMalloc((void **)&dsw, (size_t)N * 4));
    CK(cudaMalloc((void **)&ds, (size_t)M * 4));
    CK(cudaMemcpyAsync(ddy + off * 2, dy, n * 2, cudaMemcpyHostToDevice, g_st));
    CK(cudaMemcpyAsync(dsw, sw, (size_t)N * 4, cudaMemcpyHostToDevice, g_st));
    CU_ASSERT_EQUAL(ork_cuda_fp8_quant_rows_cs(g_st, M, N, ddy + off * 2, dsw, (uint8_t *)dq + off, ds), ORK_OK);
    CK(cudaMemcpyAsync(gq, dq + off, n, cudaMemcpyDeviceToHost, g_st));
    CK(cudaMemcpyAsync(gs, ds, (size_t)M * 4, cudaMemcpyDeviceToHost, g_st));
    CK(cudaStreamSynchronize(g_st));
    int sq = !memcmp(q, gq, n), ss = !memcmp(s, gs, (size_t)M * 4);
    CU_ASSERT(sq);
    CU_ASSERT(ss);
    if (!sq || !ss)
        printf("\n    dy quantizer %lldx%lld off %zu: bytes %s, scales %s ", (long long)M, (long long)N, off,
               sq ? "equal" : "DIFFER", ss ? "equal" : "DIFFER");
    CU_ASSERT(gs[0] == 1.0f); /* the zero row */
    cudaFree(ddy); cudaFree(dq); cudaFree(dsw); cudaFree(ds);
    free(dy); free(sw); free(u); free(s); free(gs); free(q); free(gq);
}

static void test_quant_cs(void) {
    check_cs(64, 3072, 0); /* vector kernel */
    check_cs(9, 12288, 0);
    check_cs(7, 1000, 0);  /* N % 8 == 0, not % 16 */
    check_cs(5, 13, 0);    /* scalar */
    check_cs(16, 256, 3);  /* misaligned: scalar */
}

/* ---- 2. the byte transpose ------------------------------------------------------------------ */

static void test_transpose(void) {
    const int64_t sh[][2] = {{64, 64}, {48, 80}, {132, 200}, {3072, 128}, {4, 4}};
    for (int t = 0; t < 5; t++) {
        int64_t R = sh[t][0], C = sh[t][1];
        size_t n = (size_t)(R * C);
        uint8_t *a = malloc(n), *b = malloc(n), *ref = malloc(n);
        CU_ASSERT_FATAL(a && b && ref);
        rng r = {77 + (uint64_t)t};
        for (size_t i = 0; i < n; i++) a[i] = (uint8_t)(urand(&r) * 256);
        for (int64_t i = 0; i < R; i++)
            for (int64_t j = 0; j < C; j++) ref[j * R + i] = a[i * C + j];
        void *da, *db;
        CK(cudaMalloc(&da, n));
        CK(cudaMalloc(&db, n));
        CK(cudaMemcpyAsync(da, a, n, cudaMemcpyHostToDevice, g_st));
        CK(cudaMemsetAsync(db, 0xA5, n, g_st));
        CU_ASSERT_EQUAL(ork_cuda_fp8_transpose(g_st, R, C, da, db), ORK_OK);
        CK(cudaMemcpyAsync(b, db, n, cudaMemcpyDeviceToHost, g_st));
        CK(cudaStreamSynchronize(g_st));
        CU_ASSERT(!memcmp(b, ref, n));
        cudaFree(da); cudaFree(db);
        free(a); free(b); free(ref);
    }
    clear_log();
    CU_ASSERT_EQUAL(ork_cuda_fp8_transpose(g_st, 6, 8, (void *)(uintptr_t)256, (void *)(uintptr_t)512),
                    ORK_E_INVALID);
    CU_ASSERT_EQUAL(g_nlines, 1);
}

/* ---- 3. dx against float64 and against path (a) ----------------------------------------------- */

typedef struct dgrad_case {
    int64_t M, N, K;
    ork_dtype fmt;
} dgrad_case;

/* The device GEMM into d_dx with scheme `scalar`; ORK_OK or the refusal. */
static ork_status run_dgrad(int64_t M, int64_t N, int64_t K, const void *ddy, const void *dw8, ork_dtype fmt,
                            const float *dsw, void *ddx, void *ws, size_t wsb, int scalar, char *why, size_t why_n) {
    ork_cuda_fp8_dgrad_args a = {M, N, K, ddy, dw8, fmt, dsw, ddx, ws, wsb, 0, scalar, why, why_n};
    return ork_cuda_fp8_dgrad(g_ctx, g_st, &a);
}

static void dgrad_case_run(const dgrad_case *c) {
    const int64_t M = c->M, N = c->N, K = c->K;
    size_t nw = (size_t)(N * K), ny = (size_t)(M * N), nx = (size_t)(M * K);
    float *wf = malloc(nw * 4), *sw = malloc((size_t)N * 4), *u = malloc(ny * 4), *su = malloc((size_t)M * 4),
          *gsu = malloc((size_t)M * 4);
    uint8_t *w8 = malloc(nw), *uq = malloc(ny), *guq = malloc(ny);
    uint16_t *dy = malloc(ny * 2), *wd = malloc(nw * 2), *dxa = malloc(nx * 2), *dxb = malloc(nx * 2);
    double *ref = malloc(nx * 8), *mag = malloc(nx * 8), *wv = malloc(nw * 8), *uv = malloc(ny * 8);
    CU_ASSERT_FATAL(wf && sw && u && su && gsu && w8 && uq && guq && dy && wd && dxa && dxb && ref && mag && wv && uv);
    fill_gauss(wf, nw, 0.02f, 300 + (uint64_t)N + (uint64_t)K);
    CU_ASSERT_EQUAL_FATAL(ork_quantize_fp8("w", wf, ORK_F32, (size_t)N, (size_t)K, c->fmt, 0, w8, sw, NULL), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_dequantize_fp8(w8, sw, (size_t)N, (size_t)K, c->fmt, 0, ORK_BF16, wd), ORK_OK);
    make_dy(dy, M, N, 900 + (uint64_t)M);
    make_u(dy, sw, M, N, u);
    double eu = 0;
    CU_ASSERT_EQUAL_FATAL(ork_quantize_fp8("u", u, ORK_F32, (size_t)M, (size_t)N, ORK_F8_E4M3, 0, uq, su, &eu), ORK_OK);
    /* float64 reference: su[m] · Σ_n uq[m, n] · wq[n, k] (codes decoded exactly) */
    for (size_t i = 0; i < nw; i++) wv[i] = ork_fp8_to_f32(w8[i], c->fmt);
    for (size_t i = 0; i < ny; i++) uv[i] = ork_fp8_to_f32(uq[i], ORK_F8_E4M3);
    for (int64_t m = 0; m < M; m++) {
        double *rr = ref + m * K, *mm = mag + m * K;
        for (int64_t k = 0; k < K; k++) rr[k] = mm[k] = 0;
        for (int64_t n = 0; n < N; n++) {
            double a = uv[m * N + n];
            if (a == 0) continue;
            const double *wr = wv + n * K;
            double aa = fabs(a);
            for (int64_t k = 0; k < K; k++) { rr[k] += a * wr[k]; mm[k] += aa * fabs(wr[k]); }
        }
        for (int64_t k = 0; k < K; k++) { rr[k] *= su[m]; mm[k] *= su[m]; }
    }
    void *ddy, *dw8, *dwd, *ddx, *ws;
    float *dsw;
    size_t wsb = ork_cuda_fp8_ws(g_ctx, 1, 1, M, N, K); /* the larger: enough for both schemes */
    CK(cudaMalloc(&ddy, ny * 2)); CK(cudaMalloc(&dw8, nw)); CK(cudaMalloc(&dwd, nw * 2)); CK(cudaMalloc(&ddx, nx * 2));
    CK(cudaMalloc(&ws, wsb)); CK(cudaMalloc((void **)&dsw, (size_t)N * 4));
    CK(cudaMemcpyAsync(ddy, dy, ny * 2, cudaMemcpyHostToDevice, g_st));
    CK(cudaMemcpyAsync(dw8, w8, nw, cudaMemcpyHostToDevice, g_st));
    CK(cudaMemcpyAsync(dwd, wd, nw * 2, cudaMemcpyHostToDevice, g_st));
    CK(cudaMemcpyAsync(dsw, sw, (size_t)N * 4, cudaMemcpyHostToDevice, g_st));
    /* path (a): dx = dy (M, N) · wd (N, K), bf16 */
    ork_cuda_gemm_args ga = {.M = M, .N = K, .K = N, .batch = 1, .alpha = 1.0f, .A = ddy, .adt = ORK_BF16, .lda = N,
                             .B = dwd, .bdt = ORK_BF16, .ldb = K, .C = ddx, .cdt = ORK_BF16, .ldc = K};
    CU_ASSERT_EQUAL_FATAL(ork_cuda_gemm(g_ctx, g_st, &ga), ORK_OK);
    CK(cudaMemcpyAsync(dxa, ddx, nx * 2, cudaMemcpyDeviceToHost, g_st));
    CK(cudaStreamSynchronize(g_st));
    for (int scalar = 0; scalar < 2; scalar++) {
        char why[256] = "";
        CK(cudaMemsetAsync(ddx, 0xFF, nx * 2, g_st));
        clear_log();
        ork_status s = run_dgrad(M, N, K, ddy, dw8, c->fmt, dsw, ddx, ws, wsb, scalar, why, sizeof why);
        CU_ASSERT_EQUAL(g_nlines, 0);
        if (!g_scheme) {
            CU_ASSERT_EQUAL(s, ORK_E_UNSUPPORTED);
            CU_ASSERT(why[0] != '\0');
            continue;
        }
        CU_ASSERT_EQUAL(s, ORK_OK);
        if (s != ORK_OK) { printf("\n    %lldx%lldx%lld: %s ", (long long)M, (long long)N, (long long)K, why); continue; }
        CK(cudaMemcpyAsync(dxb, ddx, nx * 2, cudaMemcpyDeviceToHost, g_st));
        size_t uo = al256(nw), so = uo + al256(ny);
        CK(cudaMemcpyAsync(guq, (char *)ws + uo, ny, cudaMemcpyDeviceToHost, g_st));
        CK(cudaMemcpyAsync(gsu, (char *)ws + so, (size_t)M * 4, cudaMemcpyDeviceToHost, g_st));
        CK(cudaStreamSynchronize(g_st));
        CU_ASSERT(!memcmp(guq, uq, ny)); /* the operands are the reference's */
        CU_ASSERT(!memcmp(gsu, su, (size_t)M * 4));
        double e2 = 0, r2 = 0, ea2 = 0, worst = 0;
        size_t bad = 0, nonfinite = 0;
        for (size_t i = 0; i < nx; i++) {
            double b = ork_bf16_to_f32(dxb[i]), a = ork_bf16_to_f32(dxa[i]);
            if (!isfinite(b)) { nonfinite++; continue; }
            double d = fabs(b - ref[i]), lim = 0x1p-8 * fabs(ref[i]) + 0x1p-10 * mag[i] + 1e-30;
            if (d > lim) bad++;
            if (d / lim > worst) worst = d / lim;
            e2 += d * d;
            r2 += ref[i] * ref[i];
            ea2 += (b - a) * (b - a);
        }
        double ra2 = 0;
        for (size_t i = 0; i < nx; i++) { double a = ork_bf16_to_f32(dxa[i]); ra2 += a * a; }
        double rel = sqrt(e2 / r2), rela = sqrt(ea2 / ra2);
        printf("\n    dgrad M=%lld N=%lld K=%lld %s %s: vs float64 rel %.2e (worst %.2f of bound), vs path (a) %.3f%% "
               "(e_u %.3f%%)", (long long)M, (long long)N, (long long)K, c->fmt == ORK_F8_E5M2 ? "E5M2" : "E4M3",
               scalar ? "tensor-wide" : "outer-vec", rel, worst, 100 * rela, 100 * eu);
        CU_ASSERT_EQUAL(nonfinite, 0);
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT(rel < 0.006);
        CU_ASSERT(rela < 1.25 * eu + 0.003);
        CU_ASSERT(dxb[0] == 0 || dxb[0] == 0x8000); /* the zero row */
    }
    cudaFree(ddy); cudaFree(dw8); cudaFree(dwd); cudaFree(ddx); cudaFree(ws); cudaFree(dsw);
    free(wf); free(sw); free(u); free(su); free(gsu); free(w8); free(uq); free(guq); free(dy); free(wd); free(dxa);
    free(dxb); free(ref); free(mag); free(wv); free(uv);
}

static void test_dgrad_ref(void) {
    const dgrad_case cs[] = {{128, 3072, 3072, ORK_F8_E4M3}, {64, 3072, 12288, ORK_F8_E5M2},
                             {64, 12288, 3072, ORK_F8_E4M3}, {48, 1024, 3072, ORK_F8_E5M2}};
    for (int i = 0; i < 4; i++) dgrad_case_run(&cs[i]);
    printf("\n");
}

/* ---- 4. the forward's tensor-wide scheme against its outer-vector scheme ---------------------- */

static void test_forward_scalar(void) {
    if (g_scheme != 2) { printf("\n    (no outer-vector scheme here: nothing to compare)\n"); return; }
    const int64_t M = 256, N = 3072, K = 3072;
    size_t nw = (size_t)(N * K), nx = (size_t)(M * K), ny = (size_t)(M * N);
    float *wf = malloc(nw * 4), *xf = malloc(nx * 4), *sw = malloc((size_t)N * 4);
    uint8_t *w8 = malloc(nw);
    uint16_t *x = malloc(nx * 2), *bias = malloc((size_t)N * 2), *y0 = malloc(ny * 2), *y1 = malloc(ny * 2);
    CU_ASSERT_FATAL(wf && xf && sw && w8 && x && bias && y0 && y1);
    fill_gauss(wf, nw, 0.02f, 41);
    fill_gauss(xf, nx, 1.0f, 42);
    for (size_t i = 0; i < nx; i++) x[i] = ork_f32_to_bf16(xf[i]);
    for (int64_t i = 0; i < N; i++) bias[i] = ork_f32_to_bf16(0.1f * (float)((i * 37) % 19 - 9));
    CU_ASSERT_EQUAL_FATAL(ork_quantize_fp8("w", wf, ORK_F32, (size_t)N, (size_t)K, ORK_F8_E4M3, 0, w8, sw, NULL), ORK_OK);
    void *dx, *dw, *db, *dy, *ws;
    float *dsw;
    size_t wsb = ork_cuda_fp8_ws(g_ctx, 0, 1, M, N, K);
    CK(cudaMalloc(&dx, nx * 2)); CK(cudaMalloc(&dw, nw)); CK(cudaMalloc(&db, (size_t)N * 2)); CK(cudaMalloc(&dy, ny * 2));
    CK(cudaMalloc(&ws, wsb)); CK(cudaMalloc((void **)&dsw, (size_t)N * 4));
    CK(cudaMemcpyAsync(dx, x, nx * 2, cudaMemcpyHostToDevice, g_st));
    CK(cudaMemcpyAsync(dw, w8, nw, cudaMemcpyHostToDevice, g_st));
    CK(cudaMemcpyAsync(db, bias, (size_t)N * 2, cudaMemcpyHostToDevice, g_st));
    CK(cudaMemcpyAsync(dsw, sw, (size_t)N * 4, cudaMemcpyHostToDevice, g_st));
    for (int sc = 0; sc < 2; sc++) {
        char why[256] = "";
        ork_cuda_fp8_linear_args a = {M, N, K, dx, dw, ORK_F8_E4M3, dsw, db, dy, ws, 0, why, sizeof why};
        clear_log();
        CU_ASSERT_EQUAL(ork_cuda_fp8_linear_sized(g_ctx, g_st, &a, wsb, sc), ORK_OK);
        CU_ASSERT_EQUAL(g_nlines, 0);
        CK(cudaMemcpyAsync(sc ? y1 : y0, dy, ny * 2, cudaMemcpyDeviceToHost, g_st));
    }
    /* the tensor-wide scheme with the outer-vector scratch size: refused, not overrun */
    {
        char why[256] = "";
        ork_cuda_fp8_linear_args a = {M, N, K, dx, dw, ORK_F8_E4M3, dsw, db, dy, ws, 0, why, sizeof why};
        clear_log();
        CU_ASSERT_EQUAL(ork_cuda_fp8_linear_sized(g_ctx, g_st, &a, ork_cuda_fp8_linear_ws(M, K), 1),
                        ORK_E_UNSUPPORTED);
        CU_ASSERT_EQUAL(g_nlines, 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(why, "scratch"));
    }
    CK(cudaStreamSynchronize(g_st));
    double e = 0, r = 0;
    for (size_t i = 0; i < ny; i++) {
        double a = ork_bf16_to_f32(y0[i]), b = ork_bf16_to_f32(y1[i]);
        e += (a - b) * (a - b);
        r += a * a;
    }
    double rel = sqrt(e / r);
    printf("\n    forward tensor-wide vs outer-vector scales: %.3e\n", rel);
    CU_ASSERT(rel < 0.005);
    cudaFree(dx); cudaFree(dw); cudaFree(db); cudaFree(dy); cudaFree(ws); cudaFree(dsw);
    free(wf); free(xf); free(sw); free(w8); free(x); free(bias); free(y0); free(y1);
}

/* ---- 5. NaN / Inf rows ------------------------------------------------------------------------ */

static void test_nan_rows(void) {
    if (!g_scheme) return;
    const int64_t M = 64, N = 1024, K = 512;
    size_t nw = (size_t)(N * K), ny = (size_t)(M * N), nx = (size_t)(M * K);
    float *wf = malloc(nw * 4), *sw = malloc((size_t)N * 4);
    uint8_t *w8 = malloc(nw);
    uint16_t *dy = malloc(ny * 2), *o0 = malloc(nx * 2), *o1 = malloc(nx * 2);
    CU_ASSERT_FATAL(wf && sw && w8 && dy && o0 && o1);
    fill_gauss(wf, nw, 0.02f, 51);
    CU_ASSERT_EQUAL_FATAL(ork_quantize_fp8("w", wf, ORK_F32, (size_t)N, (size_t)K, ORK_F8_E4M3, 0, w8, sw, NULL), ORK_OK);
    make_dy(dy, M, N, 52);
    void *ddy, *dw, *ddx, *ws;
    float *dsw;
    size_t wsb = ork_cuda_fp8_ws(g_ctx, 1, 1, M, N, K);
    CK(cudaMalloc(&ddy, ny * 2)); CK(cudaMalloc(&dw, nw)); CK(cudaMalloc(&ddx, nx * 2)); CK(cudaMalloc(&ws, wsb));
    CK(cudaMalloc((void **)&dsw, (size_t)N * 4));
    CK(cudaMemcpyAsync(dw, w8, nw, cudaMemcpyHostToDevice, g_st));
    CK(cudaMemcpyAsync(dsw, sw, (size_t)N * 4, cudaMemcpyHostToDevice, g_st));
    for (int scalar = 0; scalar < 2; scalar++) {
        for (int pass = 0; pass < 2; pass++) {
            if (pass) {
                dy[7 * N + 100] = 0x7FC0;  /* NaN */
                dy[9 * N + 3] = 0x7F80;    /* +Inf */
            }
            CK(cudaMemcpyAsync(ddy, dy, ny * 2, cudaMemcpyHostToDevice, g_st));
            char why[256] = "";
            CU_ASSERT_EQUAL(run_dgrad(M, N, K, ddy, dw, ORK_F8_E4M3, dsw, ddx, ws, wsb, scalar, why, sizeof why), ORK_OK);
            CK(cudaMemcpyAsync(pass ? o1 : o0, ddx, nx * 2, cudaMemcpyDeviceToHost, g_st));
            CK(cudaStreamSynchronize(g_st));
        }
        make_dy(dy, M, N, 52);
        size_t nan_rows = 0, same = 1;
        for (int64_t m = 0; m < M; m++) {
            int all_nan = 1;
            for (int64_t k = 0; k < K; k++) all_nan &= isnan(ork_bf16_to_f32(o1[m * K + k]));
            if (m == 7 || m == 9) nan_rows += all_nan;
            else same &= !memcmp(o0 + m * K, o1 + m * K, (size_t)K * 2);
        }
        CU_ASSERT_EQUAL(nan_rows, 2);
        CU_ASSERT(same);
    }
    cudaFree(ddy); cudaFree(dw); cudaFree(ddx); cudaFree(ws); cudaFree(dsw);
    free(wf); free(sw); free(w8); free(dy); free(o0); free(o1);
}

/* ---- 6. refusals --------------------------------------------------------------------------- */

static void test_refusals(void) {
    char *buf;
    CK(cudaMalloc((void **)&buf, 1 << 22));
    void *ws = buf + (1 << 21);
    float *sw = (float *)(buf + (1 << 20));
    CK(cudaMemsetAsync(buf, 0, 1 << 22, g_st));
    struct { int64_t M, N, K; size_t off, wsb; const char *what; } c[] = {
        {32, 48, 40, 0, 1 << 20, "multiples of 16"}, {32, 40, 64, 0, 1 << 20, "multiples of 16"},
        {32, 48, 64, 2, 1 << 20, "aligned"}, {32, 48, 64, 0, 256, "scratch"}};
    for (int i = 0; i < 4; i++) {
        char why[256] = "";
        clear_log();
        ork_status s = run_dgrad(c[i].M, c[i].N, c[i].K, buf + c[i].off, buf + 65536, ORK_F8_E4M3, sw, buf + 131072, ws,
                                 c[i].wsb, 0, why, sizeof why);
        CU_ASSERT_EQUAL(s, ORK_E_UNSUPPORTED);
        CU_ASSERT_EQUAL(g_nlines, 0);
        CU_ASSERT_PTR_NOT_NULL(g_scheme ? strstr(why, c[i].what) : why);
    }
    {   /* a weight that is not fp8 */
        char why[256] = "";
        clear_log();
        CU_ASSERT_EQUAL(run_dgrad(32, 48, 64, buf, buf + 65536, ORK_BF16, sw, buf + 131072, ws, 1 << 20, 0, why,
                                  sizeof why), ORK_E_UNSUPPORTED);
        CU_ASSERT_EQUAL(g_nlines, 0);
    }
    if (g_scheme) { /* a ragged M (37 tokens): cuBLASLt may take it or not; either way no error line */
        char why[256] = "";
        clear_log();
        ork_status s = run_dgrad(37, 48, 64, buf, buf + 65536, ORK_F8_E5M2, sw, buf + 131072, ws, 1 << 20, 0, why,
                                 sizeof why);
        CU_ASSERT(s == ORK_OK || s == ORK_E_UNSUPPORTED);
        CU_ASSERT_EQUAL(g_nlines, 0);
        printf("\n    dgrad M=37 N=48 K=64: %s %s\n", s == ORK_OK ? "taken" : "refused:", s == ORK_OK ? "" : why);
    }
    CK(cudaStreamSynchronize(g_st));
    cudaFree(buf);
}

/* ---- 7. ops->linear on a CUDA graph: native (forward + dx) vs dequant ------------------------- */

#define S(...) ((const int64_t[]){__VA_ARGS__})

/* The weight's dequantize (path (a)): the host-made bf16 copy, copied in. */
typedef struct deq_ctx { const void *bf16; const float *f32; } deq_ctx;
static ork_status deq_copy(void *ctx, ork_device dev, void *stream, const void *src, const float *scales, int64_t rows,
                           int64_t cols, ork_dtype dt, void *dst) {
    (void)dev; (void)src; (void)scales;
    const deq_ctx *d = ctx;
    size_t n = (size_t)(rows * cols);
    const void *from = dt == ORK_BF16 ? d->bf16 : d->f32;
    return cudaMemcpyAsync(dst, from, n * ork_dtype_size(dt), cudaMemcpyDeviceToDevice, (cudaStream_t)stream) ==
                   cudaSuccess ? ORK_OK : ORK_E_CUDA;
}

typedef struct step_out {
    double loss;
    float *y, *dx, *gdown, *gup;
    int warned;
} step_out;

static void run_step(int mode, int block, int64_t M, int64_t N, int64_t K, int64_t r, const float *xh, const float *th,
                     const float *wh, const float *bh, const float *downh, const float *uph, step_out *o) {
    size_t nw = (size_t)(N * K);
    int64_t ns = block ? N * ((K + block - 1) / block) : N;
    uint8_t *q = malloc(nw);
    float *s = malloc((size_t)ns * 4), *wdf = malloc(nw * 4);
    uint16_t *wdb = malloc(nw * 2);
    CU_ASSERT_FATAL(q && s && wdf && wdb);
    CU_ASSERT_EQUAL_FATAL(ork_quantize_fp8("w", wh, ORK_F32, (size_t)N, (size_t)K, ORK_F8_E4M3, (size_t)block, q, s,
                                           NULL), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_dequantize_fp8(q, s, (size_t)N, (size_t)K, ORK_F8_E4M3, (size_t)block, ORK_BF16, wdb),
                          ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_dequantize_fp8(q, s, (size_t)N, (size_t)K, ORK_F8_E4M3, (size_t)block, ORK_F32, wdf),
                          ORK_OK);
    ork_alloc *a;
    ork_graph *g;
    CU_ASSERT_EQUAL_FATAL(ork_alloc_create(ork_cuda_backend(), 0, &a), ORK_OK);
    ork_graph_opts go = {.act_dtype = ORK_BF16};
    CU_ASSERT_EQUAL_FATAL(ork_graph_create(ork_cuda_backend(), a, &go, &g), ORK_OK);
    g->fp8_gemm = mode;
    void *dw, *dwb, *dwf;
    float *dsc;
    CK(cudaMalloc(&dw, nw)); CK(cudaMalloc(&dwb, nw * 2)); CK(cudaMalloc(&dwf, nw * 4));
    CK(cudaMalloc((void **)&dsc, (size_t)ns * 4));
    CK(cudaMemcpy(dw, q, nw, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dwb, wdb, nw * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dwf, wdf, nw * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dsc, s, (size_t)ns * 4, cudaMemcpyHostToDevice));
    deq_ctx dq = {dwb, dwf};
    ork_tensor *w, *down, *up;
    CU_ASSERT_EQUAL_FATAL(ork_tensor_wrap(ORK_DEV_CUDA, ORK_F8_E4M3, 2, S(N, K), dw, "blocks.0.w", &w), ORK_OK);
    ork_qinfo qinfo = {dsc, ns, block, deq_copy, &dq};
    w->q = &qinfo;
    CU_ASSERT_EQUAL_FATAL(ork_tensor_new(a, "lora", ORK_F32, 2, S(r, K), 1, &down), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_tensor_new(a, "lora", ORK_F32, 2, S(N, r), 1, &up), ORK_OK);
    CK(cudaMemcpy(ork_tensor_data(down), downh, (size_t)(r * K) * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(ork_tensor_data(up), uph, (size_t)(N * r) * 4, cudaMemcpyHostToDevice));
    ork_lora lo = {down, up, 1.0f, 0.0f, ORK_ADAPTER_LORA};
    w->lora = &lo;
    const ork_tensor_api *T = ork_tensor_api_table();
    const ork_ops *O = ork_ops_table();
    ork_tensor *x0, *x, *t, *b, *y, *loss;
    uint16_t *xb = malloc((size_t)(M * K) * 2), *tb = malloc((size_t)(M * N) * 2), *bb = malloc((size_t)N * 2);
    CU_ASSERT_FATAL(xb && tb && bb);
    for (int64_t i = 0; i < M * K; i++) xb[i] = ork_f32_to_bf16(xh[i]);
    for (int64_t i = 0; i < M * N; i++) tb[i] = ork_f32_to_bf16(th[i]);
    for (int64_t i = 0; i < N; i++) bb[i] = ork_f32_to_bf16(bh[i]);
    clear_log();
    CU_ASSERT_EQUAL_FATAL(T->from_host(g, ORK_BF16, 2, S(M, K), xb, &x0), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_graph_leaf(g, x0, 1, &x), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(T->from_host(g, ORK_BF16, 2, S(M, N), tb, &t), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(T->from_host(g, ORK_BF16, 1, S(N), bb, &b), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(O->linear(g, x, w, b, &y), ORK_OK);
    o->y = malloc((size_t)(M * N) * 4);
    CU_ASSERT_EQUAL_FATAL(T->to_host(g, y, ORK_F32, o->y), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(O->mse(g, y, t, &loss), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_backward(g, loss), ORK_OK);
    float lv = 0;
    CU_ASSERT_EQUAL_FATAL(T->to_host(g, loss, ORK_F32, &lv), ORK_OK);
    o->loss = lv;
    CU_ASSERT_FATAL(down->grad && up->grad && x->grad);
    o->dx = malloc((size_t)(M * K) * 4);
    o->gdown = malloc((size_t)(r * K) * 4);
    o->gup = malloc((size_t)(N * r) * 4);
    CU_ASSERT_EQUAL_FATAL(T->to_host(g, x->grad, ORK_F32, o->dx), ORK_OK);
    CK(cudaMemcpy(o->gdown, ork_tensor_data(down->grad), (size_t)(r * K) * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(o->gup, ork_tensor_data(up->grad), (size_t)(N * r) * 4, cudaMemcpyDeviceToHost));
    o->warned = g->fp8_warned;
    int found = 0;
    for (int i = 0; i < g_nlines && i < 8; i++) found |= strstr(g_lines[i], "native fp8 GEMM not used") != NULL;
    CU_ASSERT_EQUAL(found, g->fp8_warned);
    if (found) printf("\n    fallback line: %s", g_lines[0]);
    w->q = NULL;
    w->lora = NULL;
    ork_tensor_free(w);
    ork_tensor_free(down);
    ork_tensor_free(up);
    ork_graph_destroy(g);
    ork_alloc_destroy(a);
    cudaFree(dw); cudaFree(dwb); cudaFree(dwf); cudaFree(dsc);
    free(q); free(s); free(wdf); free(wdb); free(xb); free(tb); free(bb);
}

static void free_step(step_out *o) { free(o->y); free(o->dx); free(o->gdown); free(o->gup); }

static double rel_rms(const float *a, const float *b, size_t n) {
    double e = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) return INFINITY;
        e += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        r += (double)b[i] * b[i];
    }
    return r > 0 ? sqrt(e / r) : 0;
}

static void test_linear_step(void) {
    const int64_t M = 512, N = 3072, K = 1024, r = 16;
    float *xh = malloc((size_t)(M * K) * 4), *th = malloc((size_t)(M * N) * 4), *wh = malloc((size_t)(N * K) * 4),
          *bh = malloc((size_t)N * 4), *downh = malloc((size_t)(r * K) * 4), *uph = malloc((size_t)(N * r) * 4);
    CU_ASSERT_FATAL(xh && th && wh && bh && downh && uph);
    fill_gauss(xh, (size_t)(M * K), 1.0f, 1);
    fill_gauss(th, (size_t)(M * N), 1.0f, 2);
    fill_gauss(wh, (size_t)(N * K), 0.02f, 3);
    fill_gauss(bh, (size_t)N, 0.1f, 4);
    fill_gauss(downh, (size_t)(r * K), 0.02f, 5);
    fill_gauss(uph, (size_t)(N * r), 0.02f, 6);
    step_out a, b, c, d;
    run_step(ORK_FP8_GEMM_DEQUANT, 0, M, N, K, r, xh, th, wh, bh, downh, uph, &a);
    run_step(ORK_FP8_GEMM_NATIVE, 0, M, N, K, r, xh, th, wh, bh, downh, uph, &b);
    size_t ny = (size_t)(M * N), nx = (size_t)(M * K);
    CU_ASSERT(isfinite(a.loss) && isfinite(b.loss));
    CU_ASSERT_EQUAL(a.warned, 0);
    CU_ASSERT_EQUAL(b.warned, !g_scheme); /* native forward and dx taken wherever the device has FP8 */
    double ey = rel_rms(b.y, a.y, ny), edx = rel_rms(b.dx, a.dx, nx), egd = rel_rms(b.gdown, a.gdown, (size_t)(r * K)),
           egu = rel_rms(b.gup, a.gup, (size_t)(N * r));
    printf("\n    linear step M=%lld N=%lld K=%lld r=%lld: loss dequant %.6f native %.6f; native vs dequant: y %.3f%%, "
           "dx %.3f%%, LoRA grads down %.3f%% up %.3f%%\n", (long long)M, (long long)N, (long long)K, (long long)r,
           a.loss, b.loss, 100 * ey, 100 * edx, 100 * egd, 100 * egu);
    CU_ASSERT(fabs(b.loss - a.loss) < 0.01 * a.loss);
    CU_ASSERT(ey < 0.04 && edx < 0.05 && egd < 0.04 && egu < 0.04);
    if (g_scheme) CU_ASSERT(edx > 0); /* dx did not come from the dequantized weight */
    /* block scales: path (a) forward and backward, one line; the dequant graph's numbers bit for bit */
    run_step(ORK_FP8_GEMM_NATIVE, 128, M, N, K, r, xh, th, wh, bh, downh, uph, &c);
    run_step(ORK_FP8_GEMM_DEQUANT, 128, M, N, K, r, xh, th, wh, bh, downh, uph, &d);
    CU_ASSERT_EQUAL(c.warned, 1);
    CU_ASSERT(!memcmp(c.y, d.y, ny * 4));
    CU_ASSERT(!memcmp(c.dx, d.dx, nx * 4));
    free_step(&a); free_step(&b); free_step(&c); free_step(&d);
    free(xh); free(th); free(wh); free(bh); free(downh); free(uph);
}

static const ork_test_case cases[] = {
    {"dy quantizer == ork_quantize_fp8 of dy·diag(sw)", test_quant_cs},
    {"fp8 byte transpose", test_transpose},
    {"dgrad vs float64 and vs path (a), both schemes", test_dgrad_ref},
    {"forward: tensor-wide vs outer-vector scales", test_forward_scalar},
    {"NaN/Inf dy rows give NaN dx rows, others unchanged", test_nan_rows},
    {"refusals: ORK_E_UNSUPPORTED, no log line", test_refusals},
    {"ops->linear step: native forward + dx vs dequant", test_linear_step},
    {NULL, NULL}};

int main(void) {
    if (ork_cuda_device_count() <= 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    return ork_test_run("cuda_fp8_dgrad", init, clean, cases);
}
