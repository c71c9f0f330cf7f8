/* cuda/cuda_gn.cu — CUDA kernels for group norm (NCHW, optional per-channel
 * affine) and the row softmax, forward and backward (tensor/backend.h slots
 * groupnorm, groupnorm_bwd, softmax, softmax_bwd; the FLUX VAE uses them).
 * Group norm works per (batch, channel) row first — one block each, so a
 * 1024² image's 32 groups still fill the GPU — then combines the channel
 * statistics of a group exactly (Chan's parallel variance: no E[x²] − E[x]²
 * cancellation). Deterministic: fixed partition and order, partials in the
 * context's scratch. Math in F32; elements F32, BF16 or F16.
 * [stream-ordered]: nothing here syncs or allocates. */
#include "cuda/cuda_util.cuh"
#include "cuda/cuda_ops.h"

namespace {

constexpr int TPB = 256;

#define GN_STREAM ork_stream(ork_cuda_kstream(k))
#define GN_CHECK_DT(t, what) do { if ((t) != ORK_F32 && (t) != ORK_BF16 && (t) != ORK_F16) \
    return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda %s: dtype %d (F32, BF16, F16 supported)", what, (int)(t)); } while (0)

__device__ __forceinline__ float gn_warp_sum(float v) {
#pragma unroll
    for (int s = 16; s; s >>= 1) v += __shfl_xor_sync(0xffffffffu, v, s);
    return v;
}
__device__ __forceinline__ float gn_warp_max(float v) {
#pragma unroll
    for (int s = 16; s; s >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, s));
    return v;
}
/* Over the block (blockDim.x a multiple of 32); every thread gets the result. */
__device__ float gn_block_sum(float v) {
    __shared__ float sh[32];
    __syncthreads();
    v = gn_warp_sum(v);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    float r = 0.f;
    for (int i = 0; i < (int)(blockDim.x >> 5); i++) r += sh[i];
    return r;
}
__device__ float gn_block_max(float v) {
    __shared__ float sh[32];
    __syncthreads();
    v = gn_warp_max(v);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    float r = -INFINITY;
    for (int i = 0; i < (int)(blockDim.x >> 5); i++) r = fmaxf(r, sh[i]);
    return r;
}

__device__ __forceinline__ float gn_w(const void *p, int dt, int64_t c, float dflt) {
    return p ? ork_ld(p, c, dt) : dflt;
}

/* st[2r] = mean, st[2r+1] = Σ (x − mean)² of row r = (n, c), P elements. */
__global__ void k_gn_chan(int64_t P, const void *x, int dt, float *st) {
    int64_t r = blockIdx.x, o = r * P;
    float s = 0.f;
    for (int64_t p = threadIdx.x; p < P; p += blockDim.x) s += ork_ld(x, o + p, dt);
    float mu = gn_block_sum(s) / (float)P, q = 0.f;
    for (int64_t p = threadIdx.x; p < P; p += blockDim.x) { float d = ork_ld(x, o + p, dt) - mu; q += d * d; }
    q = gn_block_sum(q);
    if (threadIdx.x == 0) { st[2 * r] = mu; st[2 * r + 1] = q; }
}
/* One thread per (n, g): combine its cg channels (equal counts P). */
__global__ void k_gn_group(int64_t BG, int64_t cg, int64_t P, float eps, const float *st, float *mean, float *rstd) {
    int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= BG) return;
    const float *s = st + 2 * r * cg;
    float mu = 0.f, m2 = 0.f;
    for (int64_t c = 0; c < cg; c++) mu += s[2 * c];
    mu /= (float)cg;
    for (int64_t c = 0; c < cg; c++) { float d = s[2 * c] - mu; m2 += s[2 * c + 1] + (float)P * d * d; }
    mean[r] = mu;
    rstd[r] = rsqrtf(m2 / (float)(cg * P) + eps);
}
__global__ void k_gn_apply(int64_t n, int64_t C, int64_t P, int64_t cg, const void *x, const void *w, const void *b,
                           int wdt, const float *mean, const float *rstd, void *y, int dt) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t row = i / P, c = row % C, gr = (row / C) * (C / cg) + c / cg;
        float v = (ork_ld(x, i, dt) - mean[gr]) * rstd[gr];
        ork_st(y, i, v * gn_w(w, wdt, c, 1.f) + gn_w(b, wdt, c, 0.f), dt);
    }
}
/* Per row (n, c): st[2r] = Σ dy, st[2r+1] = Σ dy·x̂. */
__global__ void k_gn_bwd_chan(int64_t C, int64_t P, int64_t cg, const void *x, const void *dy, const float *mean,
                              const float *rstd, int dt, float *st) {
    int64_t r = blockIdx.x, o = r * P, gr = (r / C) * (C / cg) + (r % C) / cg;
    float mu = mean[gr], rs = rstd[gr], s1 = 0.f, s2 = 0.f;
    for (int64_t p = threadIdx.x; p < P; p += blockDim.x) {
        float g = ork_ld(dy, o + p, dt);
        s1 += g;
        s2 += g * (ork_ld(x, o + p, dt) - mu) * rs;
    }
    s1 = gn_block_sum(s1);
    s2 = gn_block_sum(s2);
    if (threadIdx.x == 0) { st[2 * r] = s1; st[2 * r + 1] = s2; }
}
/* Per (n, g): gs[2r] = mean of g = dy·w, gs[2r+1] = mean of g·x̂. */
__global__ void k_gn_bwd_group(int64_t BG, int64_t C, int64_t cg, int64_t P, const float *st, const void *w, int wdt,
                               float *gs) {
    int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= BG) return;
    int64_t G = C / cg, c0 = (r % G) * cg;
    const float *s = st + 2 * r * cg;
    float a = 0.f, b = 0.f;
    for (int64_t c = 0; c < cg; c++) {
        float wc = gn_w(w, wdt, c0 + c, 1.f);
        a += wc * s[2 * c];
        b += wc * s[2 * c + 1];
    }
    gs[2 * r] = a / (float)(cg * P);
    gs[2 * r + 1] = b / (float)(cg * P);
}
__global__ void k_gn_bwd_dx(int64_t n, int64_t C, int64_t P, int64_t cg, const void *x, const void *dy, const void *w,
                            int wdt, const float *mean, const float *rstd, const float *gs, void *dx, int dt) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t row = i / P, c = row % C, gr = (row / C) * (C / cg) + c / cg;
        float rs = rstd[gr], xh = (ork_ld(x, i, dt) - mean[gr]) * rs;
        float g = ork_ld(dy, i, dt) * gn_w(w, wdt, c, 1.f);
        ork_st(dx, i, rs * (g - gs[2 * gr] - xh * gs[2 * gr + 1]), dt);
    }
}
/* dw[c] += Σ_n st[(n, c)].second, db[c] += Σ_n st[(n, c)].first (fixed order). */
__global__ void k_gn_dwdb(int64_t B, int64_t C, const float *st, float *dw, float *db) {
    int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float a = 0.f, b = 0.f;
    for (int64_t n = 0; n < B; n++) { a += st[2 * (n * C + c) + 1]; b += st[2 * (n * C + c)]; }
    if (dw) dw[c] += a;
    if (db) db[c] += b;
}

/* ---- softmax: one block per row ---- */
__global__ void k_softmax(int64_t C, const void *x, void *y, int dt) {
    int64_t o = (int64_t)blockIdx.x * C;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) m = fmaxf(m, ork_ld(x, o + c, dt));
    m = gn_block_max(m);
    float s = 0.f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += __expf(ork_ld(x, o + c, dt) - m);
    float inv = 1.f / gn_block_sum(s);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) ork_st(y, o + c, __expf(ork_ld(x, o + c, dt) - m) * inv, dt);
}
__global__ void k_softmax_bwd(int64_t C, const void *y, const void *dy, void *dx, int dt) {
    int64_t o = (int64_t)blockIdx.x * C;
    float s = 0.f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += ork_ld(dy, o + c, dt) * ork_ld(y, o + c, dt);
    s = gn_block_sum(s);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
        ork_st(dx, o + c, ork_ld(y, o + c, dt) * (ork_ld(dy, o + c, dt) - s), dt);
}

int row_threads(int64_t n) { return n >= 4096 ? 512 : n >= 512 ? 256 : 128; }

unsigned ew_grid(const ork_kctx *k, int64_t n) {
    int64_t g = ork_cdiv(n, TPB), cap = (int64_t)ork_cuda_ctx_sm_count(ork_cuda_kctx(k)) * 16;
    return (unsigned)(g < 1 ? 1 : g > cap ? cap : g);
}

} // namespace

extern "C" {

ork_status ork_cuda_groupnorm(const ork_kctx *k, int64_t B, int64_t C, int64_t P, int64_t G, float eps, const void *x,
                              const void *w, const void *b, ork_dtype wdt, void *y, float *mean, float *rstd,
                              ork_dtype dt) {
    GN_CHECK_DT(dt, "groupnorm");
    if (w || b) GN_CHECK_DT(wdt, "groupnorm weight");
    if (G <= 0 || C % G) return ORK_FAIL(ORK_E_INVALID, "cuda groupnorm: %lld groups, %lld channels", (long long)G,
                                         (long long)C);
    if (B * C <= 0 || P <= 0) return ORK_OK;
    ork_cuda_ctx *cx = ork_cuda_kctx(k);
    if (2 * B * C > (int64_t)cx->scratch_n)
        return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda groupnorm: %lld x %lld channels exceed the scratch", (long long)B,
                        (long long)C);
    cudaStream_t st = GN_STREAM;
    k_gn_chan<<<(unsigned)(B * C), row_threads(P), 0, st>>>(P, x, dt, cx->scratch);
    ORK_CUDA_LAUNCHED();
    k_gn_group<<<(unsigned)ork_cdiv(B * G, 128), 128, 0, st>>>(B * G, C / G, P, eps, cx->scratch, mean, rstd);
    ORK_CUDA_LAUNCHED();
    int64_t n = B * C * P;
    k_gn_apply<<<ew_grid(k, n), TPB, 0, st>>>(n, C, P, C / G, x, w, b, wdt, mean, rstd, y, dt);
    ORK_CUDA_LAUNCHED();
    return ORK_OK;
}

ork_status ork_cuda_groupnorm_bwd(const ork_kctx *k, int64_t B, int64_t C, int64_t P, int64_t G, const void *x,
                                  const void *w, ork_dtype wdt, const float *mean, const float *rstd, const void *dy,
                                  void *dx, float *dw, float *db, ork_dtype dt) {
    GN_CHECK_DT(dt, "groupnorm_bwd");
    if (w) GN_CHECK_DT(wdt, "groupnorm_bwd weight");
    if (G <= 0 || C % G) return ORK_FAIL(ORK_E_INVALID, "cuda groupnorm_bwd: %lld groups, %lld channels",
                                         (long long)G, (long long)C);
    if (B * C <= 0 || P <= 0 || (!dx && !dw && !db)) return ORK_OK;
    ork_cuda_ctx *cx = ork_cuda_kctx(k);
    if (2 * B * C + 2 * B * G > (int64_t)cx->scratch_n)
        return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda groupnorm_bwd: %lld x %lld channels exceed the scratch",
                        (long long)B, (long long)C);
    cudaStream_t st = GN_STREAM;
    float *chan = cx->scratch, *grp = cx->scratch + 2 * B * C;
    const int64_t cg = C / G;
    k_gn_bwd_chan<<<(unsigned)(B * C), row_threads(P), 0, st>>>(C, P, cg, x, dy, mean, rstd, dt, chan);
    ORK_CUDA_LAUNCHED();
    if (dx) {
        k_gn_bwd_group<<<(unsigned)ork_cdiv(B * G, 128), 128, 0, st>>>(B * G, C, cg, P, chan, w, wdt, grp);
        ORK_CUDA_LAUNCHED();
        int64_t n = B * C * P;
        k_gn_bwd_dx<<<ew_grid(k, n), TPB, 0, st>>>(n, C, P, cg, x, dy, w, wdt, mean, rstd, grp, dx, dt);
        ORK_CUDA_LAUNCHED();
    }
    if (dw || db) {
        k_gn_dwdb<<<(unsigned)ork_cdiv(C, 128), 128, 0, st>>>(B, C, chan, dw, db);
        ORK_CUDA_LAUNCHED();
    }
    return ORK_OK;
}

ork_status ork_cuda_softmax(const ork_kctx *k, int64_t rows, int64_t C, const void *x, void *y, ork_dtype dt) {
    GN_CHECK_DT(dt, "softmax");
    if (rows <= 0 || C <= 0) return ORK_OK;
    if (rows > 0x7fffffffLL) return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda softmax: %lld rows", (long long)rows);
    k_softmax<<<(unsigned)rows, row_threads(C), 0, GN_STREAM>>>(C, x, y, dt);
    ORK_CUDA_LAUNCHED();
    return ORK_OK;
}

ork_status ork_cuda_softmax_bwd(const ork_kctx *k, int64_t rows, int64_t C, const void *y, const void *dy, void *dx,
                                ork_dtype dt) {
    GN_CHECK_DT(dt, "softmax_bwd");
    if (rows <= 0 || C <= 0) return ORK_OK;
    if (rows > 0x7fffffffLL) return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda softmax_bwd: %lld rows", (long long)rows);
    k_softmax_bwd<<<(unsigned)rows, row_threads(C), 0, GN_STREAM>>>(C, y, dy, dx, dt);
    ORK_CUDA_LAUNCHED();
    return ORK_OK;
}

} // extern "C"
