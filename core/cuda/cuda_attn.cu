/* cuda/cuda_attn.cu — FlashAttention-2-style fused attention (see cuda_attn.h) on
 * mma.sync m16n8k16 bf16 tensor-core instructions, ldmatrix from XOR-swizzled
 * shared memory, cp.async double buffering. Three kernels:
 *   fwd   query-stationary: O = softmax(QKᵀ·s)V online, saves lse.
 *   dq    query-stationary: recomputes P, dP = dO·Vᵀ, dQ = (P∘(dP − Δ))·K·s.
 *   dkdv  key-stationary:   recomputes Pᵀ, dV = Pᵀ·dO, dK = (Pᵀ∘(dPᵀ − Δ))·Q·s,
 *         looping over every query head of the kv group (GQA sums for free).
 * Δ = rowsum(dO∘O) comes from a small pre-pass. Splitting dq from dkdv costs two
 * extra matmuls over FA2's atomics but keeps the backward deterministic.
 * Fragment layouts follow the PTX ISA's m16n8k16 figures: g = lane/4, t = lane%4;
 * C rows g, g+8 and columns 2t, 2t+1 of each 8-wide n-tile. Every matmul goes through
 * one of two shared loops, mma_abt (C += A·Bᵀ from shared tiles) and mma_pb (C += P·B with
 * P reused from registers), so each accumulator sees one k order in every kernel. */
#include "cuda/cuda_util.cuh"
#include "cuda/cuda_attn.h"
#include <math.h>

typedef __nv_bfloat16 bf16;

#define LOG2E_F 1.4426950408889634f
#define LN2_F 0.6931471805599453f

namespace {

struct AttnP {
    const bf16 *q, *k, *v, *o, *dO;
    bf16 *out, *dq, *dk, *dv;
    float *lse;            /* fwd: written; bwd: read */
    float *dsum;           /* bwd: Δ (B, H, Lq) */
    const uint8_t *kmask;  /* (B, Lk) or NULL */
    int H, Hkv, Lq, Lk, causal;
    float scale, scale_log2;
};

/* ---- PTX wrappers ---- */
__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async4(uint32_t dst, const void *src, int bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
__device__ __forceinline__ void ldsm4(uint32_t r[4], uint32_t a) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void ldsm4t(uint32_t r[4], uint32_t a) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                 "{%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
/* The two 8-wide n-tiles c0, c1 of one 16-wide B fragment pair (b[0..1], b[2..3]). */
__device__ __forceinline__ void mma_pair(float c0[4], float c1[4], const uint32_t a[4], const uint32_t b[4]) {
    mma(c0, a, b[0], b[1]);
    mma(c1, a, b[2], b[3]);
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
}

/* Byte offset of (row, col) in a tile of rows of D bf16; col a multiple of 8.
 * 16-byte chunks are XOR-swizzled by row%8 so ldmatrix is conflict-free. */
template <int D> __device__ __forceinline__ uint32_t swz(int row, int col) {
    return (uint32_t)(row * (D * 2) + ((((col >> 3) ^ (row & 7))) << 4));
}

/* Async copy of rows [r0, r0+ROWS) of a (n, D) bf16 matrix into a swizzled tile;
 * rows >= n are zero-filled. */
template <int D, int ROWS, int NT>
__device__ __forceinline__ void load_tile(uint32_t s, const bf16 *g, int r0, int n) {
    constexpr int CH = D / 8;
    for (int c = threadIdx.x; c < ROWS * CH; c += NT) {
        int r = c / CH, ch = c % CH;
        bool ok = r0 + r < n;
        const bf16 *src = ok ? g + (size_t)(r0 + r) * D + ch * 8 : g;
        cp_async16(s + swz<D>(r, ch * 8), src, ok ? 16 : 0);
    }
}
/* Async copy of F32 v[r0 .. r0+ROWS) (zero past n). */
template <int ROWS, int NT>
__device__ __forceinline__ void load_vec(uint32_t s, const float *g, int r0, int n) {
    for (int r = threadIdx.x; r < ROWS; r += NT) {
        bool ok = r0 + r < n;
        cp_async4(s + 4 * r, ok ? g + r0 + r : g, ok ? 4 : 0);
    }
}

/* A fragment (16×16) at (r0, c0) of a row-major swizzled tile. */
template <int D> __device__ __forceinline__ void lda_frag(uint32_t a[4], uint32_t s, int r0, int c0, int lane) {
    ldsm4(a, s + swz<D>(r0 + (lane & 15), c0 + ((lane >> 4) << 3)));
}
/* B fragments for n-tiles n0, n0+8 at k-step k0 from a tile stored [n][k]. */
template <int D> __device__ __forceinline__ void ldb_nk(uint32_t b[4], uint32_t s, int n0, int k0, int lane) {
    ldsm4(b, s + swz<D>(n0 + (lane & 7) + ((lane >> 4) << 3), k0 + (((lane >> 3) & 1) << 3)));
}
/* B fragments for n-tiles n0, n0+8 at k-step k0 from a tile stored [k][n]. */
template <int D> __device__ __forceinline__ void ldb_kn(uint32_t b[4], uint32_t s, int n0, int k0, int lane) {
    ldsm4t(b, s + swz<D>(k0 + (lane & 7) + (((lane >> 3) & 1) << 3), n0 + ((lane >> 4) << 3)));
}

__device__ __forceinline__ bool visible(const AttnP &p, const uint8_t *km, int qi, int kj) {
    return kj < p.Lk && (!p.causal || kj <= qi + (p.Lk - p.Lq)) && (!km || km[kj]);
}

constexpr int NW = 4, NT = NW * 32;

/* ---- the MMA loops every kernel shares (one accumulation order each) ---- */
/* C += A·Bᵀ over k = 0..D. A: MT m-tiles of 16 rows from row r0 of a swizzled [row][D]
 * tile; B: a swizzled [N][D] tile. C: (16·MT) × N per warp, in C fragments. */
template <int D, int N, int MT>
__device__ __forceinline__ void mma_abt(float (*c)[N / 8][4], uint32_t sA, int r0, uint32_t sB, int lane) {
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) lda_frag<D>(a[mt], sA, r0 + mt * 16, kk * 16, lane);
#pragma unroll
        for (int np = 0; np < N / 16; np++) {
            uint32_t bb[4];
            ldb_nk<D>(bb, sB, np * 16, kk * 16, lane);
#pragma unroll
            for (int mt = 0; mt < MT; mt++) mma_pair(c[mt][2 * np], c[mt][2 * np + 1], a[mt], bb);
        }
    }
}
/* An A fragment (16×16, bf16) from two 8-wide n-tiles of C fragments (FA2's register reuse). */
__device__ __forceinline__ void acc_to_a(uint32_t a[4], const float c0[4], const float c1[4]) {
    a[0] = pack_bf16(c0[0], c0[1]);
    a[1] = pack_bf16(c0[2], c0[3]);
    a[2] = pack_bf16(c1[0], c1[1]);
    a[3] = pack_bf16(c1[2], c1[3]);
}
/* C += P·B over k = 0..N. P: (16·MT) × N per warp in C fragments, rounded to bf16 as A;
 * B: a swizzled [N][D] tile (k-major). C: (16·MT) × D. */
template <int D, int N, int MT>
__device__ __forceinline__ void mma_pb(float (*c)[D / 8][4], const float (*pm)[N / 8][4], uint32_t sB, int lane) {
#pragma unroll
    for (int kk = 0; kk < N / 16; kk++) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) acc_to_a(a[mt], pm[mt][2 * kk], pm[mt][2 * kk + 1]);
#pragma unroll
        for (int dp = 0; dp < D / 16; dp++) {
            uint32_t bb[4];
            ldb_kn<D>(bb, sB, dp * 16, kk * 16, lane);
#pragma unroll
            for (int mt = 0; mt < MT; mt++) mma_pair(c[mt][2 * dp], c[mt][2 * dp + 1], a[mt], bb);
        }
    }
}

/* ---- the query-stationary kernels' key loop (fwd, dq) ---- */
/* Key tiles of BN that rows [q0, q0+BM) visit: all, or under causal up to the last visible key. */
template <int BM, int BN> __device__ __forceinline__ int kv_tiles(const AttnP &p, int q0) {
    int nkv = (p.Lk + BN - 1) / BN;
    if (p.causal) {
        int last = min(q0 + BM, p.Lq) - 1 + (p.Lk - p.Lq); /* last key any row here sees */
        nkv = last < 0 ? 0 : min(nkv, last / BN + 1);
    }
    return nkv;
}
/* Async copy of key tile j of K and V into buffer j&1 of the double-buffered sK0/sV0. */
template <int D, int BN>
__device__ __forceinline__ void load_kv(uint32_t sK0, uint32_t sV0, const bf16 *K, const bf16 *V, int j, int Lk) {
    const int nb = j & 1;
    load_tile<D, BN, NT>(sK0 + nb * BN * D * 2, K, j * BN, Lk);
    load_tile<D, BN, NT>(sV0 + nb * BN * D * 2, V, j * BN, Lk);
}
__device__ __forceinline__ void store_bf16x2(bf16 *dst, float lo, float hi) {
    *(__nv_bfloat162 *)dst = __floats2bfloat162_rn(lo, hi);
}

/* ---------------------------------------------------------------- forward */
/* CTA: BM = 128 query rows (4 warps × 2 m-tiles of 16); key tiles of BN = 64. */
template <int D>
__global__ void __launch_bounds__(NT, 2) attn_fwd(AttnP p) {
    constexpr int MT = 2, BM = NW * 16 * MT, BN = 64;
    extern __shared__ __align__(128) unsigned char smem[];
    const uint32_t sQ = smem_u32(smem), sK0 = sQ + BM * D * 2, sV0 = sK0 + 2 * BN * D * 2;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int q0 = blockIdx.x * BM, h = blockIdx.y, b = blockIdx.z, hk = h / (p.H / p.Hkv);
    const bf16 *Q = p.q + ((size_t)b * p.H + h) * p.Lq * D;
    const bf16 *K = p.k + ((size_t)b * p.Hkv + hk) * p.Lk * D;
    const bf16 *V = p.v + ((size_t)b * p.Hkv + hk) * p.Lk * D;
    const uint8_t *km = p.kmask ? p.kmask + (size_t)b * p.Lk : nullptr;

    const int nkv = kv_tiles<BM, BN>(p, q0);
    load_tile<D, BM, NT>(sQ, Q, q0, p.Lq);
    if (nkv > 0) load_kv<D, BN>(sK0, sV0, K, V, 0, p.Lk);
    cp_commit();

    float o[MT][D / 8][4] = {}, m[MT][2], l[MT][2] = {};
#pragma unroll
    for (int i = 0; i < MT; i++) m[i][0] = m[i][1] = -INFINITY;
    const int wrow = warp * 16 * MT;

    for (int j = 0; j < nkv; j++) {
        cp_wait_all();
        __syncthreads();
        if (j + 1 < nkv) load_kv<D, BN>(sK0, sV0, K, V, j + 1, p.Lk);
        cp_commit();
        const uint32_t sK = sK0 + (j & 1) * BN * D * 2, sV = sV0 + (j & 1) * BN * D * 2;

        float s[MT][BN / 8][4] = {}; /* S = Q·Kᵀ, (16·MT) × BN per warp */
        mma_abt<D, BN, MT>(s, sQ, wrow, sK, lane);
        const int k0 = j * BN;
        const bool need_mask = k0 + BN > p.Lk || p.causal || km;
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < BN / 8; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float x = s[mt][nt][e] * p.scale_log2;
                    if (need_mask) {
                        int qi = q0 + wrow + mt * 16 + g + (e >> 1) * 8, kj = k0 + nt * 8 + 2 * t + (e & 1);
                        if (!visible(p, km, qi, kj)) x = -INFINITY;
                    }
                    s[mt][nt][e] = x;
                }
        /* online softmax, rows (mt, hf) */
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int hf = 0; hf < 2; hf++) {
                float mx = -INFINITY;
#pragma unroll
                for (int nt = 0; nt < BN / 8; nt++) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * hf], s[mt][nt][2 * hf + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                float mnew = fmaxf(m[mt][hf], mx);
                float base = mnew == -INFINITY ? 0.f : mnew;
                float alpha = exp2f(m[mt][hf] - base);
                m[mt][hf] = mnew;
                float rs = 0.f;
#pragma unroll
                for (int nt = 0; nt < BN / 8; nt++) {
                    float p0 = exp2f(s[mt][nt][2 * hf] - base), p1 = exp2f(s[mt][nt][2 * hf + 1] - base);
                    s[mt][nt][2 * hf] = p0;
                    s[mt][nt][2 * hf + 1] = p1;
                    rs += p0 + p1;
                }
                l[mt][hf] = l[mt][hf] * alpha + rs;
#pragma unroll
                for (int dn = 0; dn < D / 8; dn++) { o[mt][dn][2 * hf] *= alpha; o[mt][dn][2 * hf + 1] *= alpha; }
            }
        mma_pb<D, BN, MT>(o, s, sV, lane); /* O += P·V */
    }
    cp_wait_all();

    bf16 *O = p.out + ((size_t)b * p.H + h) * p.Lq * D;
    float *lse = p.lse + ((size_t)b * p.H + h) * p.Lq;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int hf = 0; hf < 2; hf++) {
            float ls = l[mt][hf];
            ls += __shfl_xor_sync(0xffffffffu, ls, 1);
            ls += __shfl_xor_sync(0xffffffffu, ls, 2);
            int qi = q0 + wrow + mt * 16 + g + hf * 8;
            if (qi >= p.Lq) continue;
            float inv = ls > 0.f ? 1.f / ls : 0.f;
            bf16 *orow = O + (size_t)qi * D + 2 * t;
#pragma unroll
            for (int dn = 0; dn < D / 8; dn++)
                store_bf16x2(orow + dn * 8, o[mt][dn][2 * hf] * inv, o[mt][dn][2 * hf + 1] * inv);
            if (t == 0) lse[qi] = ls > 0.f ? (m[mt][hf] + log2f(ls)) * LN2_F : -INFINITY;
        }
}

/* ---------------------------------------------------------------- backward */
/* Δ (rows) = Σ_d dO·O; one warp per row. */
template <int D>
__global__ void attn_bwd_dsum(const bf16 *o, const bf16 *dO, float *dsum, int64_t rows) {
    int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (r >= rows) return;
    float acc = 0.f;
    for (int d = lane * 2; d < D; d += 64) {
        __nv_bfloat162 a = *(const __nv_bfloat162 *)(o + r * D + d), c = *(const __nv_bfloat162 *)(dO + r * D + d);
        acc += __bfloat162float(a.x) * __bfloat162float(c.x) + __bfloat162float(a.y) * __bfloat162float(c.y);
    }
#pragma unroll
    for (int s = 16; s; s >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, s);
    if (lane == 0) dsum[r] = acc;
}

/* dQ: CTA of 64 query rows (4 warps × 16), key tiles of 64. */
template <int D>
__global__ void __launch_bounds__(NT, 2) attn_bwd_dq(AttnP p) {
    constexpr int BM = 64, BN = 64;
    extern __shared__ __align__(128) unsigned char smem[];
    const uint32_t sQ = smem_u32(smem), sdO = sQ + BM * D * 2, sK0 = sdO + BM * D * 2, sV0 = sK0 + 2 * BN * D * 2;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int q0 = blockIdx.x * BM, h = blockIdx.y, b = blockIdx.z, hk = h / (p.H / p.Hkv);
    const size_t qoff = ((size_t)b * p.H + h) * p.Lq;
    const bf16 *K = p.k + ((size_t)b * p.Hkv + hk) * p.Lk * D;
    const bf16 *V = p.v + ((size_t)b * p.Hkv + hk) * p.Lk * D;
    const uint8_t *km = p.kmask ? p.kmask + (size_t)b * p.Lk : nullptr;

    const int nkv = kv_tiles<BM, BN>(p, q0);
    load_tile<D, BM, NT>(sQ, p.q + qoff * D, q0, p.Lq);
    load_tile<D, BM, NT>(sdO, p.dO + qoff * D, q0, p.Lq);
    if (nkv > 0) load_kv<D, BN>(sK0, sV0, K, V, 0, p.Lk);
    cp_commit();

    const int wrow = warp * 16;
    float lse2[2], dl[2];
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
        int qi = q0 + wrow + g + hf * 8;
        float ls = qi < p.Lq ? p.lse[qoff + qi] : -INFINITY;
        lse2[hf] = ls == -INFINITY ? INFINITY : ls * LOG2E_F; /* no visible key: P = 0 */
        dl[hf] = qi < p.Lq ? p.dsum[qoff + qi] : 0.f;
    }
    float dq[D / 8][4] = {};
    for (int j = 0; j < nkv; j++) {
        cp_wait_all();
        __syncthreads();
        if (j + 1 < nkv) load_kv<D, BN>(sK0, sV0, K, V, j + 1, p.Lk);
        cp_commit();
        const uint32_t sK = sK0 + (j & 1) * BN * D * 2, sV = sV0 + (j & 1) * BN * D * 2;
        float s[BN / 8][4] = {}, dp[BN / 8][4] = {};
        mma_abt<D, BN, 1>(&s, sQ, wrow, sK, lane);   /* S = Q·Kᵀ */
        mma_abt<D, BN, 1>(&dp, sdO, wrow, sV, lane); /* dP = dO·Vᵀ */
        const int k0 = j * BN;
        const bool need_mask = k0 + BN > p.Lk || p.causal || km;
#pragma unroll
        for (int nt = 0; nt < BN / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int hf = e >> 1;
                float pr = exp2f(s[nt][e] * p.scale_log2 - lse2[hf]);
                if (need_mask && !visible(p, km, q0 + wrow + g + hf * 8, k0 + nt * 8 + 2 * t + (e & 1))) pr = 0.f;
                s[nt][e] = pr * (dp[nt][e] - dl[hf]); /* dS */
            }
        mma_pb<D, BN, 1>(&dq, &s, sK, lane); /* dQ += dS·K */
    }
    cp_wait_all();
    bf16 *dQ = p.dq + qoff * D;
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
        int qi = q0 + wrow + g + hf * 8;
        if (qi >= p.Lq) continue;
#pragma unroll
        for (int dn = 0; dn < D / 8; dn++)
            store_bf16x2(dQ + (size_t)qi * D + dn * 8 + 2 * t, dq[dn][2 * hf] * p.scale, dq[dn][2 * hf + 1] * p.scale);
    }
}

/* dK, dV: CTA of 64 keys (4 warps × 16), query tiles of BQ over every head of the group. */
template <int D>
__global__ void __launch_bounds__(NT, 1) attn_bwd_dkdv(AttnP p) {
    constexpr int BN = 64, BQ = 64;
    extern __shared__ __align__(128) unsigned char smem[];
    const uint32_t sK = smem_u32(smem), sV = sK + BN * D * 2, sQ0 = sV + BN * D * 2, sdO0 = sQ0 + 2 * BQ * D * 2,
                   sL0 = sdO0 + 2 * BQ * D * 2, sD0 = sL0 + 2 * BQ * 4;
    const float *fL0 = (const float *)(smem + (sL0 - sK)), *fD0 = (const float *)(smem + (sD0 - sK));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int k0 = blockIdx.x * BN, hk = blockIdx.y, b = blockIdx.z, grp = p.H / p.Hkv;
    const size_t koff = ((size_t)b * p.Hkv + hk) * p.Lk;
    const uint8_t *km = p.kmask ? p.kmask + (size_t)b * p.Lk : nullptr;
    const int off = p.Lk - p.Lq;
    const int nq = (p.Lq + BQ - 1) / BQ;
    const int i0 = p.causal && k0 - off > 0 ? (k0 - off) / BQ : 0;
    const int per_head = nq > i0 ? nq - i0 : 0, nit = grp * per_head;

    load_tile<D, BN, NT>(sK, p.k + koff * D, k0, p.Lk);
    load_tile<D, BN, NT>(sV, p.v + koff * D, k0, p.Lk);
    auto issue = [&](int it, int buf) {
        int h = hk * grp + it / per_head, qi0 = (i0 + it % per_head) * BQ;
        size_t qoff = ((size_t)b * p.H + h) * p.Lq;
        load_tile<D, BQ, NT>(sQ0 + buf * BQ * D * 2, p.q + qoff * D, qi0, p.Lq);
        load_tile<D, BQ, NT>(sdO0 + buf * BQ * D * 2, p.dO + qoff * D, qi0, p.Lq);
        load_vec<BQ, NT>(sL0 + buf * BQ * 4, p.lse + qoff, qi0, p.Lq);
        load_vec<BQ, NT>(sD0 + buf * BQ * 4, p.dsum + qoff, qi0, p.Lq);
    };
    if (nit > 0) issue(0, 0);
    cp_commit();

    const int wrow = warp * 16;
    float dk[D / 8][4] = {}, dv[D / 8][4] = {};
    for (int it = 0; it < nit; it++) {
        cp_wait_all();
        __syncthreads();
        if (it + 1 < nit) issue(it + 1, (it + 1) & 1);
        cp_commit();
        const int buf = it & 1, qi0 = (i0 + it % per_head) * BQ;
        const uint32_t sQ = sQ0 + buf * BQ * D * 2, sdO = sdO0 + buf * BQ * D * 2;
        const float *sl = fL0 + buf * BQ, *sd = fD0 + buf * BQ;

        float st[BQ / 8][4] = {}; /* Sᵀ = K·Qᵀ: 16 keys × BQ queries per warp */
        mma_abt<D, BQ, 1>(&st, sK, wrow, sQ, lane);
        const bool need_mask = qi0 + BQ > p.Lq || k0 + BN > p.Lk || p.causal || km;
#pragma unroll
        for (int nt = 0; nt < BQ / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int ql = nt * 8 + 2 * t + (e & 1);
                float pr = exp2f(st[nt][e] * p.scale_log2 - sl[ql] * LOG2E_F);
                if (need_mask && (qi0 + ql >= p.Lq || !visible(p, km, qi0 + ql, k0 + wrow + g + (e >> 1) * 8)))
                    pr = 0.f;
                st[nt][e] = pr; /* Pᵀ */
            }
        mma_pb<D, BQ, 1>(&dv, &st, sdO, lane); /* dV += Pᵀ·dO */
        float dpt[BQ / 8][4] = {}; /* dPᵀ = V·dOᵀ */
        mma_abt<D, BQ, 1>(&dpt, sV, wrow, sdO, lane);
#pragma unroll
        for (int nt = 0; nt < BQ / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) dpt[nt][e] = st[nt][e] * (dpt[nt][e] - sd[nt * 8 + 2 * t + (e & 1)]);
        mma_pb<D, BQ, 1>(&dk, &dpt, sQ, lane); /* dK += dSᵀ·Q */
    }
    cp_wait_all();
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
        int kj = k0 + wrow + g + hf * 8;
        if (kj >= p.Lk) continue;
        size_t base = (koff + kj) * D + 2 * t;
#pragma unroll
        for (int dn = 0; dn < D / 8; dn++) {
            if (p.dk) store_bf16x2(p.dk + base + dn * 8, dk[dn][2 * hf] * p.scale, dk[dn][2 * hf + 1] * p.scale);
            if (p.dv) store_bf16x2(p.dv + base + dn * 8, dv[dn][2 * hf], dv[dn][2 * hf + 1]);
        }
    }
}

ork_status check_args(const ork_cuda_attn_args *a, AttnP *p) {
    if (a->D != 64 && a->D != 128)
        return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda attention: head dim %lld (64 or 128 supported)", (long long)a->D);
    if (a->B <= 0 || a->H <= 0 || a->Hkv <= 0 || a->H % a->Hkv || a->Lq < 0 || a->Lk < 0 ||
        a->Lq > INT32_MAX / 2 || a->Lk > INT32_MAX / 2 || a->H > 65535 || a->B > 65535)
        return ORK_FAIL(ORK_E_INVALID, "cuda attention: bad shape B=%lld H=%lld Hkv=%lld Lq=%lld Lk=%lld",
                        (long long)a->B, (long long)a->H, (long long)a->Hkv, (long long)a->Lq, (long long)a->Lk);
    *p = AttnP{};
    p->H = (int)a->H; p->Hkv = (int)a->Hkv; p->Lq = (int)a->Lq; p->Lk = (int)a->Lk;
    p->causal = a->causal; p->kmask = a->kmask;
    p->scale = a->scale != 0.f ? a->scale : 1.f / sqrtf((float)a->D);
    p->scale_log2 = p->scale * LOG2E_F;
    return ORK_OK;
}

template <typename Kern> ork_status launch(Kern k, dim3 grid, size_t smem, cudaStream_t st, const AttnP &p) {
    ORK_CUDA_TRY(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    k<<<grid, NT, smem, st>>>(p);
    ORK_CUDA_LAUNCHED();
    return ORK_OK;
}

} // namespace

extern "C" size_t ork_cuda_attn_ws(const ork_cuda_attn_args *a, int backward) {
    return backward ? (size_t)(a->B * a->H * a->Lq) * sizeof(float) : 0;
}

extern "C" ork_status ork_cuda_attn_fwd(const ork_cuda_attn_args *a, const void *q, const void *k, const void *v,
                                        void *y, float *lse, void *stream) {
    AttnP p;
    ORK_TRY(check_args(a, &p));
    if (a->Lq == 0) return ORK_OK;
    p.q = (const bf16 *)q; p.k = (const bf16 *)k; p.v = (const bf16 *)v; p.out = (bf16 *)y; p.lse = lse;
    const int BM = 128, BN = 64;
    dim3 grid((unsigned)ork_cdiv(a->Lq, BM), (unsigned)a->H, (unsigned)a->B);
    size_t smem = (size_t)(BM + 4 * BN) * a->D * 2;
    return a->D == 128 ? launch(attn_fwd<128>, grid, smem, ork_stream(stream), p)
                       : launch(attn_fwd<64>, grid, smem, ork_stream(stream), p);
}

extern "C" ork_status ork_cuda_attn_bwd(const ork_cuda_attn_args *a, const void *q, const void *k, const void *v,
                                        const void *y, const float *lse, const void *dy, void *dq, void *dk,
                                        void *dv, void *ws, void *stream) {
    AttnP p;
    ORK_TRY(check_args(a, &p));
    cudaStream_t st = ork_stream(stream);
    if (a->Lq == 0 || a->Lk == 0) { /* gradients are zero */
        if (dq) ORK_CUDA_TRY(cudaMemsetAsync(dq, 0, (size_t)(a->B * a->H * a->Lq * a->D) * 2, st));
        size_t kb = (size_t)(a->B * a->Hkv * a->Lk * a->D) * 2;
        if (dk) ORK_CUDA_TRY(cudaMemsetAsync(dk, 0, kb, st));
        if (dv) ORK_CUDA_TRY(cudaMemsetAsync(dv, 0, kb, st));
        return ORK_OK;
    }
    p.q = (const bf16 *)q; p.k = (const bf16 *)k; p.v = (const bf16 *)v; p.o = (const bf16 *)y;
    p.dO = (const bf16 *)dy; p.lse = (float *)lse; p.dsum = (float *)ws;
    p.dq = (bf16 *)dq; p.dk = (bf16 *)dk; p.dv = (bf16 *)dv;
    int64_t rows = a->B * a->H * a->Lq;
    if (a->D == 128) attn_bwd_dsum<128><<<(unsigned)ork_cdiv(rows, 8), 256, 0, st>>>(p.o, p.dO, p.dsum, rows);
    else attn_bwd_dsum<64><<<(unsigned)ork_cdiv(rows, 8), 256, 0, st>>>(p.o, p.dO, p.dsum, rows);
    ORK_CUDA_LAUNCHED();
    if (dq) {
        dim3 grid((unsigned)ork_cdiv(a->Lq, 64), (unsigned)a->H, (unsigned)a->B);
        size_t smem = (size_t)(2 * 64 + 4 * 64) * a->D * 2;
        ORK_TRY(a->D == 128 ? launch(attn_bwd_dq<128>, grid, smem, st, p) : launch(attn_bwd_dq<64>, grid, smem, st, p));
    }
    if (dk || dv) {
        dim3 grid((unsigned)ork_cdiv(a->Lk, 64), (unsigned)a->Hkv, (unsigned)a->B);
        size_t smem = (size_t)(2 * 64 + 4 * 64) * a->D * 2 + 4 * 64 * 4;
        ORK_TRY(a->D == 128 ? launch(attn_bwd_dkdv<128>, grid, smem, st, p)
                            : launch(attn_bwd_dkdv<64>, grid, smem, st, p));
    }
    return ORK_OK;
}
