/* tests/cuda/test_cuda_ew8.c — the CUDA backend's 8-wide BF16 path for
 * broadcast binary ops, their input gradient and modulate (cuda_ew.cu,
 * k_binary8 and friends; issue #31) against its scalar kernels, bit for bit:
 * the same random inputs run once from 16-byte-aligned buffers (the 8-wide
 * path) and once from buffers one element off (the scalar path), outputs
 * poisoned with NaN first, for the broadcast maps FLUX uses: b over tokens
 * (B, 1, C), over everything (1, 1, C), the same shape, and a per-token b
 * (B, N, 1). Exits 77 without a CUDA device. */
#include "ork_test.h"

#include "cuda/cuda_ctx.h"
#include "numerics/half.h"
#include "tensor/backend.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const ork_backend *G;
static ork_kctx KG;
static uint64_t rng = 0x2545F4914F6CDD1Dull;

static uint16_t rbf16(float scale) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    float x = scale * ((float)((rng >> 40) * (1.0 / 8388608.0)) - 1.f);
    return ork_f32_to_bf16(x);
}

static ork_bcast mkbc(const int64_t *shape, const int64_t *bshape) {
    ork_bcast bc = {.ndim = 3};
    int64_t s = 1, n = 1;
    for (int d = 2; d >= 0; d--) {
        bc.shape[d] = shape[d];
        n *= shape[d];
        bc.bstride[d] = bshape[d] == 1 && shape[d] != 1 ? 0 : s;
        s *= bshape[d];
    }
    bc.n = n;
    bc.nb = s;
    return bc;
}

/* A device buffer of n BF16 at element offset off (0: 16-byte aligned; 1: not). */
typedef struct { void *base; uint16_t *d; } dbuf;
static dbuf dmk(int64_t n, int off, const uint16_t *host) {
    dbuf b = {0};
    CU_ASSERT_FATAL(G->alloc((size_t)(n + 8) * 2, &b.base) == ORK_OK);
    b.d = (uint16_t *)b.base + off;
    ork_status s = host ? G->memcpy_h2d(&KG, b.d, host, (size_t)n * 2) : G->fill(&KG, n, NAN, b.d, ORK_BF16);
    CU_ASSERT_FATAL(s == ORK_OK);
    return b;
}
static void dget(const dbuf *b, int64_t n, uint16_t *out) {
    CU_ASSERT_FATAL(G->memcpy_d2h(&KG, out, b->d, (size_t)n * 2) == ORK_OK);
    CU_ASSERT_FATAL(G->sync(&KG) == ORK_OK);
}

enum { OP_ADD, OP_MUL, OP_MUL_DA, OP_MOD, OP_MOD_DX, OP_N };
static const char *op_name[OP_N] = {"add", "mul", "mul da", "modulate", "modulate dx"};

/* y for op, operands in aligned (off 0) or shifted (off 1) buffers */
static void run(int op, const ork_bcast *bc, const uint16_t *a, const uint16_t *b, const uint16_t *c, int off,
                uint16_t *y) {
    dbuf da = dmk(bc->n, off, a), db = dmk(bc->nb, off, b), dc = dmk(bc->nb, off, c), dy = dmk(bc->n, off, NULL);
    ork_status s = ORK_OK;
    switch (op) {
    case OP_ADD: s = G->binary(&KG, ORK_BINARY_ADD, bc, da.d, db.d, ORK_BF16, dy.d, ORK_BF16); break;
    case OP_MUL: s = G->binary(&KG, ORK_BINARY_MUL, bc, da.d, db.d, ORK_BF16, dy.d, ORK_BF16); break;
    case OP_MUL_DA: /* da = dy * b, a plays dy */
        s = G->binary_bwd(&KG, ORK_BINARY_MUL, bc, da.d, db.d, ORK_BF16, da.d, ORK_BF16, dy.d, NULL, ORK_F32); break;
    case OP_MOD: s = G->modulate(&KG, bc, bc, da.d, db.d, dc.d, dy.d, ORK_BF16); break;
    case OP_MOD_DX: s = G->modulate_bwd(&KG, bc, bc, da.d, dc.d, da.d, dy.d, NULL, NULL, ORK_BF16); break;
    }
    CU_ASSERT_EQUAL(s, ORK_OK);
    dget(&dy, bc->n, y);
    G->free(da.base); G->free(db.base); G->free(dc.base); G->free(dy.base);
}

static void test_ew8_bitwise(void) {
    const int64_t sh[3] = {2, 40, 96};
    const int64_t bsh[4][3] = {{2, 1, 96}, {1, 1, 96}, {2, 40, 96}, {2, 40, 1}};
    const char *bname[4] = {"(B,1,C)", "(1,1,C)", "same shape", "(B,N,1)"};
    for (int v = 0; v < 4; v++) {
        ork_bcast bc = mkbc(sh, bsh[v]);
        uint16_t *a = malloc((size_t)bc.n * 2), *b = malloc((size_t)bc.nb * 2), *c = malloc((size_t)bc.nb * 2);
        uint16_t *y8 = malloc((size_t)bc.n * 2), *y1 = malloc((size_t)bc.n * 2);
        CU_ASSERT_FATAL(a && b && c && y8 && y1);
        for (int op = 0; op < OP_N; op++) {
            for (int64_t i = 0; i < bc.n; i++) a[i] = rbf16(2.f);
            for (int64_t i = 0; i < bc.nb; i++) { b[i] = rbf16(1.f); c[i] = rbf16(0.5f); }
            run(op, &bc, a, b, c, 0, y8);
            run(op, &bc, a, b, c, 1, y1);
            int64_t bad = 0, nan = 0;
            for (int64_t i = 0; i < bc.n; i++) {
                bad += y8[i] != y1[i];
                nan += isnan(ork_bf16_to_f32(y8[i]));
            }
            if (bad || nan) printf("\n  %s, b %s: %lld of %lld differ, %lld NaN\n", op_name[op], bname[v], (long long)bad,
                                   (long long)bc.n, (long long)nan);
            CU_ASSERT_EQUAL(bad, 0);
            CU_ASSERT_EQUAL(nan, 0);
        }
        free(a); free(b); free(c); free(y8); free(y1);
    }
}

static int suite_init(void) {
    setenv("ORK_CUDA_EW8", "1", 1); /* the default, but the environment may say 0 (cuda_ew.cu); read at the first launch */
    G = ork_cuda_backend();
    if (G->ctx_create(0, &KG.priv) != ORK_OK) return 1;
    if (ork_cuda_stream_create(&KG.stream) != ORK_OK) return 1;
    KG.nthreads = 1;
    return 0;
}
static int suite_clean(void) {
    G->ctx_destroy(KG.priv);
    ork_cuda_stream_destroy(KG.stream);
    return 0;
}

static const ork_test_case cases[] = {
    {"8-wide BF16 binary / modulate == scalar kernels, bitwise", test_ew8_bitwise},
    {NULL, NULL},
};

int main(void) {
    if (ork_cuda_device_count() == 0) { printf("no CUDA device: skipped\n"); return 77; }
    return ork_test_run("cuda_ew8", suite_init, suite_clean, cases);
}
