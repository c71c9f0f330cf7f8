/* cuda/cuda_gemm.cu — row-major GEMM on cuBLASLt (see cuda_gemm.h).
 * Row-major C (M, N) is column-major Cᵀ (N, M), so cuBLASLt computes
 * Cᵀ = op(B)ᵀ · op(A)ᵀ: its first operand is B, its second A. */
#include "cuda/cuda_util.cuh"
#include "cuda/cuda_gemm.h"
#include <string.h>

static cudaDataType_t lt_type(ork_dtype t) {
    return t == ORK_BF16 ? CUDA_R_16BF : t == ORK_F16 ? CUDA_R_16F : CUDA_R_32F;
}

static int ptr_align(const void *p) {
    uintptr_t u = (uintptr_t)p;
    int a = 256;
    while (a > 1 && (u % (uintptr_t)a)) a >>= 1;
    return a;
}

cublasStatus_t ork_lt_pick_algo(ork_cuda_ctx *c, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la,
                                cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc, uint32_t align,
                                cublasLtMatmulAlgo_t *algo, int *found) {
    cublasLtMatmulPreference_t pref;
    *found = 0;
    cublasStatus_t st = cublasLtMatmulPreferenceCreate(&pref);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    uint64_t ws = c->ws_size;
    const cublasLtMatmulPreferenceAttributes_t al_attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    for (int i = 0; i < 4; i++) cublasLtMatmulPreferenceSetAttribute(pref, al_attr[i], &align, sizeof align);
    cublasLtMatmulHeuristicResult_t r;
    st = cublasLtMatmulAlgoGetHeuristic(c->lt, op, la, lb, lc, lc, pref, 1, &r, found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st == CUBLAS_STATUS_SUCCESS && *found > 0) *algo = r.algo;
    return st;
}

static ork_status build_entry(ork_cuda_ctx *c, const ork_gemm_key *k, ork_gemm_entry *e) {
    memset(e, 0, sizeof *e);
    e->key = *k;
    cublasOperation_t opa = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt's A = our B */
    cublasOperation_t opb = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt's B = our A */
    ORK_CUBLAS_TRY(cublasLtMatmulDescCreate(&e->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    if (k->bias_dt >= 0) {
        cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
        cudaDataType_t bt = lt_type((ork_dtype)k->bias_dt);
        ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
        ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    }
    /* column-major views: cuBLASLt's A is our B ((N, K) ld ldb; (K, N) op T when tb),
     * its B is our A ((K, M) ld lda; (M, K) op T when ta), D is Cᵀ (N, M) ld ldc. */
    uint64_t a_rows = k->tb ? k->K : k->N, a_cols = k->tb ? k->N : k->K;
    uint64_t b_rows = k->ta ? k->M : k->K, b_cols = k->ta ? k->K : k->M;
    ORK_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&e->la, lt_type((ork_dtype)k->bdt), a_rows, a_cols, k->ldb));
    ORK_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&e->lb, lt_type((ork_dtype)k->adt), b_rows, b_cols, k->lda));
    ORK_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&e->lc, lt_type((ork_dtype)k->cdt), k->N, k->M, k->ldc));
    if (k->batch > 1) {
        int32_t bc = (int32_t)k->batch;
        struct { cublasLtMatrixLayout_t l; int64_t s; } v[3] = {{e->la, k->sb}, {e->lb, k->sa}, {e->lc, k->sc}};
        for (int i = 0; i < 3; i++) {
            ORK_CUBLAS_TRY(cublasLtMatrixLayoutSetAttribute(v[i].l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
            ORK_CUBLAS_TRY(cublasLtMatrixLayoutSetAttribute(v[i].l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                            &v[i].s, sizeof v[i].s));
        }
    }
    int found = 0;
    cublasStatus_t st = ork_lt_pick_algo(c, e->op, e->la, e->lb, e->lc, (uint32_t)k->align, &e->algo, &found);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
        cublasLtMatmulDescDestroy(e->op); cublasLtMatrixLayoutDestroy(e->la);
        cublasLtMatrixLayoutDestroy(e->lb); cublasLtMatrixLayoutDestroy(e->lc);
        return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda gemm: no cuBLASLt algorithm for M=%lld N=%lld K=%lld ta=%d tb=%d "
                        "dtypes %d,%d->%d (status %d)", (long long)k->M, (long long)k->N, (long long)k->K,
                        k->ta, k->tb, k->adt, k->bdt, k->cdt, (int)st);
    }
    e->used = 1;
    return ORK_OK;
}

extern "C" ork_status ork_cuda_gemm(ork_cuda_ctx *c, void *stream, const ork_cuda_gemm_args *g) {
    if (g->M <= 0 || g->N <= 0) return ORK_OK;
    int ok_types = (g->adt == ORK_BF16 && g->bdt == ORK_BF16) || (g->adt == ORK_F32 && g->bdt == ORK_F32);
    if (!ok_types || (g->cdt != ORK_F32 && g->cdt != ORK_BF16))
        return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda gemm: dtypes A %d, B %d, C %d not supported (BF16·BF16 or "
                        "F32·F32 -> F32/BF16)", g->adt, g->bdt, g->cdt);
    if (g->K <= 0) return ORK_FAIL(ORK_E_INVALID, "cuda gemm: K = %lld", (long long)g->K);
    ork_gemm_key k;
    memset(&k, 0, sizeof k);
    k.ta = g->ta; k.tb = g->tb; k.adt = g->adt; k.bdt = g->bdt; k.cdt = g->cdt;
    k.bias_dt = g->bias ? (int)g->bias_dt : -1;
    k.beta_nz = g->beta != 0.f;
    int al = ptr_align(g->A), t;
    if ((t = ptr_align(g->B)) < al) al = t;
    if ((t = ptr_align(g->C)) < al) al = t;
    if (g->bias && (t = ptr_align(g->bias)) < al) al = t;
    k.align = al;
    k.M = g->M; k.N = g->N; k.K = g->K; k.batch = g->batch > 1 ? g->batch : 1;
    k.lda = g->lda; k.ldb = g->ldb; k.ldc = g->ldc;
    if (k.batch > 1) { k.sa = g->stride_a; k.sb = g->stride_b; k.sc = g->stride_c; }
    if (g->bias && k.batch > 1) return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda gemm: bias with batch > 1");

    ork_gemm_entry *e = NULL;
    for (int i = 0; i < ORK_GEMM_CACHE; i++)
        if (c->gemm[i].used && !memcmp(&c->gemm[i].key, &k, sizeof k)) { e = &c->gemm[i]; break; }
    if (!e) {
        e = &c->gemm[c->gemm_next];
        c->gemm_next = (c->gemm_next + 1) % ORK_GEMM_CACHE;
        if (e->used) {
            cublasLtMatmulDescDestroy(e->op); cublasLtMatrixLayoutDestroy(e->la);
            cublasLtMatrixLayoutDestroy(e->lb); cublasLtMatrixLayoutDestroy(e->lc);
            e->used = 0;
        }
        ORK_TRY(build_entry(c, &k, e));
    }
    if (g->bias)
        ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias,
                                                      sizeof g->bias));
    float beta = g->beta;
    ORK_CUBLAS_TRY(cublasLtMatmul(c->lt, e->op, &g->alpha, g->B, e->la, g->A, e->lb, &beta, g->C, e->lc,
                                  g->C, e->lc, &e->algo, c->ws, c->ws_size, ork_stream(stream)));
    return ORK_OK;
}
