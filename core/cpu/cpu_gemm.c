/* cpu/cpu_gemm.c — cache-blocked SGEMM for the CPU backend (what CI trains
 * with). C (M, N) = alpha·op(A)·op(B) + beta·C, batched. Loop order (Goto):
 * for a range of MC-row blocks of one batch matrix: for each KC slice of K:
 * for each NC slice of N: pack B (KC, NC) into NR-wide column panels, pack A
 * (MC, KC) into MR-tall row panels, then an MR×NR register-tile micro kernel
 * whose fixed-size inner loops gcc vectorises (compiled -O3). Packing converts
 * BF16/F16 operands to F32, so weights are read in their stored dtype.
 * Threads take disjoint (batch, row block) tasks; each packs its own panels.
 * Owns nothing between calls (panels are malloc'd per thread per call). */
#include "cpu/cpu.h"

#include <stdlib.h>
#include <string.h>

#define MR 6
#define NR 8
#define MC 96
#define KC 256
#define NCB 2048

typedef struct gemm_job {
    const ork_gemm_desc *d;
    int64_t mblocks; /* row blocks per batch matrix */
    ork_status status;
} gemm_job;

/* op(X)[r, c] of a stored matrix: X[r*ld + c], or X[c*ld + r] when transposed. */
static inline double opx(const void *X, ork_dtype dt, int trans, int64_t ld, int64_t r, int64_t c) {
    return ork_elem_load(X, dt, trans ? c * ld + r : r * ld + c);
}

/* Ap: ceil(mc/MR) panels of (kc, MR), zero-padded. A block at rows i0, cols p0. */
static void pack_a(const ork_gemm_desc *d, const void *A, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float *Ap) {
    for (int64_t ip = 0; ip < mc; ip += MR) {
        int64_t mr = mc - ip < MR ? mc - ip : MR;
        for (int64_t p = 0; p < kc; p++) {
            float *dst = Ap + ip * kc + p * MR;
            if (d->adt == ORK_F32 && !d->ta) {
                const float *a = (const float *)A + (i0 + ip) * d->lda + p0 + p;
                for (int64_t r = 0; r < mr; r++) dst[r] = a[r * d->lda];
            } else if (d->adt == ORK_F32) {
                const float *a = (const float *)A + (p0 + p) * d->lda + i0 + ip;
                for (int64_t r = 0; r < mr; r++) dst[r] = a[r];
            } else {
                for (int64_t r = 0; r < mr; r++) dst[r] = (float)opx(A, d->adt, d->ta, d->lda, i0 + ip + r, p0 + p);
            }
            for (int64_t r = mr; r < MR; r++) dst[r] = 0.0f;
        }
    }
}

/* Bp: ceil(nc/NR) panels of (kc, NR), zero-padded. B block at rows p0, cols j0. */
static void pack_b(const ork_gemm_desc *d, const void *B, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float *Bp) {
    for (int64_t jp = 0; jp < nc; jp += NR) {
        int64_t nr = nc - jp < NR ? nc - jp : NR;
        for (int64_t p = 0; p < kc; p++) {
            float *dst = Bp + jp * kc + p * NR;
            if (d->bdt == ORK_F32 && !d->tb) {
                const float *b = (const float *)B + (p0 + p) * d->ldb + j0 + jp;
                for (int64_t c = 0; c < nr; c++) dst[c] = b[c];
            } else if (d->bdt == ORK_BF16 && d->tb) {
                const uint16_t *b = (const uint16_t *)B + (j0 + jp) * d->ldb + p0 + p;
                for (int64_t c = 0; c < nr; c++) dst[c] = ork_bf16_to_f32(b[c * d->ldb]);
            } else {
                for (int64_t c = 0; c < nr; c++) dst[c] = (float)opx(B, d->bdt, d->tb, d->ldb, p0 + p, j0 + jp + c);
            }
            for (int64_t c = nr; c < NR; c++) dst[c] = 0.0f;
        }
    }
}

/* acc (MR, NR) = Σ_p a[p] (MR) ⊗ b[p] (NR). Four-float vectors (GCC/Clang
 * vector extension: SSE on x86-64, NEON on arm64); 12 accumulators stay in
 * registers. MSVC has no vector extension: the scalar loop below does the
 * same per-lane multiply then add, in the same order, so the same bits. */
#if defined(__GNUC__)
typedef float v4f __attribute__((vector_size(16)));

static void micro(int64_t kc, const float *restrict a, const float *restrict b, float acc[MR][NR]) {
    v4f c[MR][2];
    memset(c, 0, sizeof c);
    for (int64_t p = 0; p < kc; p++) {
        v4f b0, b1;
        memcpy(&b0, b + p * NR, sizeof b0);
        memcpy(&b1, b + p * NR + 4, sizeof b1);
        const float *ap = a + p * MR;
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            v4f ar = {ap[r], ap[r], ap[r], ap[r]};
            c[r][0] += ar * b0;
            c[r][1] += ar * b1;
        }
    }
    memcpy(acc, c, sizeof c);
}
#else
static void micro(int64_t kc, const float *restrict a, const float *restrict b, float acc[MR][NR]) {
    float c[MR][NR];
    memset(c, 0, sizeof c);
    for (int64_t p = 0; p < kc; p++)
        for (int r = 0; r < MR; r++)
            for (int q = 0; q < NR; q++) c[r][q] += a[p * MR + r] * b[p * NR + q];
    memcpy(acc, c, sizeof c);
}
#endif

static void gemm_range(void *ctx, int64_t lo, int64_t hi) {
    gemm_job *job = ctx;
    const ork_gemm_desc *d = job->d;
    size_t csz = ork_dtype_size(d->cdt), asz = ork_dtype_size(d->adt), bsz = ork_dtype_size(d->bdt);
    int64_t kcmax = d->K < KC ? (d->K > 0 ? d->K : 1) : KC, ncmax = d->N < NCB ? d->N : NCB;
    float *Ap = malloc(sizeof(float) * (size_t)(MC + MR) * (size_t)kcmax);
    float *Bp = malloc(sizeof(float) * (size_t)(ncmax + NR) * (size_t)kcmax);
    if (!Ap || !Bp) { free(Ap); free(Bp); job->status = ORK_E_NOMEM; return; }
    for (int64_t task = lo; task < hi; task++) {
        int64_t b = task / job->mblocks, i0 = (task % job->mblocks) * MC;
        int64_t mc = d->M - i0 < MC ? d->M - i0 : MC;
        const char *A = (const char *)d->A + (size_t)(b * d->stride_a) * asz;
        const char *B = (const char *)d->B + (size_t)(b * d->stride_b) * bsz;
        char *C = (char *)d->C + (size_t)(b * d->stride_c) * csz;
        /* C block *= beta first (beta == 0: never read). */
        for (int64_t i = i0; i < i0 + mc; i++)
            for (int64_t j = 0; j < d->N; j++)
                ork_elem_store(C, d->cdt, i * d->ldc + j,
                           d->beta == 0.0f ? 0.0 : d->beta * ork_elem_load(C, d->cdt, i * d->ldc + j));
        if (d->alpha == 0.0f) continue;
        for (int64_t p0 = 0; p0 < d->K; p0 += KC) {
            int64_t kc = d->K - p0 < KC ? d->K - p0 : KC;
            pack_a(d, A, i0, mc, p0, kc, Ap);
            for (int64_t j0 = 0; j0 < d->N; j0 += NCB) {
                int64_t nc = d->N - j0 < NCB ? d->N - j0 : NCB;
                pack_b(d, B, p0, kc, j0, nc, Bp);
                for (int64_t jp = 0; jp < nc; jp += NR)
                    for (int64_t ip = 0; ip < mc; ip += MR) {
                        float acc[MR][NR];
                        micro(kc, Ap + ip * kc, Bp + jp * kc, acc);
                        int64_t mr = mc - ip < MR ? mc - ip : MR, nr = nc - jp < NR ? nc - jp : NR;
                        for (int64_t r = 0; r < mr; r++) {
                            int64_t row = (i0 + ip + r) * d->ldc + j0 + jp;
                            if (d->cdt == ORK_F32) {
                                float *c = (float *)C + row;
                                for (int64_t q = 0; q < nr; q++) c[q] += d->alpha * acc[r][q];
                            } else {
                                for (int64_t q = 0; q < nr; q++)
                                    ork_elem_store(C, d->cdt, row + q,
                                               ork_elem_load(C, d->cdt, row + q) + (double)(d->alpha * acc[r][q]));
                            }
                        }
                    }
            }
        }
    }
    free(Ap);
    free(Bp);
}

ork_status ork_cpu_gemm(const ork_kctx *k, const ork_gemm_desc *d) {
    if (!ork_cpu_weight_dt(d->adt) && d->adt != ORK_F16)
        return ORK_FAIL(ORK_E_UNSUPPORTED, "cpu gemm: A dtype %d not supported", (int)d->adt);
    if (!ork_cpu_weight_dt(d->bdt) && d->bdt != ORK_F16)
        return ORK_FAIL(ORK_E_UNSUPPORTED, "cpu gemm: B dtype %d not supported", (int)d->bdt);
    if (!ork_cpu_weight_dt(d->cdt))
        return ORK_FAIL(ORK_E_UNSUPPORTED, "cpu gemm: C dtype %d not supported", (int)d->cdt);
    if (d->M <= 0 || d->N <= 0 || d->batch <= 0) return ORK_OK;
    gemm_job job = {d, (d->M + MC - 1) / MC, ORK_OK};
    int64_t tasks = d->batch * job.mblocks;
    /* Split only when a task carries real work (~1 MFLOP). */
    int64_t work = 2 * (d->M < MC ? d->M : MC) * d->N * (d->K ? d->K : 1);
    int64_t min_chunk = work >= (1 << 20) ? 1 : ((1 << 20) + work - 1) / work;
    ork_par_for(k->nthreads, tasks, min_chunk, gemm_range, &job);
    if (job.status != ORK_OK) return ORK_FAIL(job.status, "cpu gemm: out of host memory for panels");
    return ORK_OK;
}
