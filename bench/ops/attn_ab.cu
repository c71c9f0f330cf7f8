/* bench/ops/attn_ab.cu — the flash attention kernels of this checkout against those of a
 * base tree, bit for bit (issue #27: the backward's MMA loops were folded into shared
 * helpers with the arithmetic order unchanged). Built by attn_ab_gpu.sh from
 * core/cuda/cuda_attn.cu and the base's copy compiled with its entry points renamed
 * ork_base_attn_*. For a table of shapes (D 64 and 128, GQA, lengths off the tiles,
 * causal, key masks): the forward's y and lse, then the backward's dq, dk, dv on the
 * same inputs, compared byte for byte. Prints one line per differing case and a
 * summary; exit 0 all identical, 1 a difference, 77 no GPU. Owns nothing else. */
#include "cuda/cuda_attn.h"

#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

extern "C" {
size_t ork_base_attn_ws(const ork_cuda_attn_args *a, int backward);
ork_status ork_base_attn_fwd(const ork_cuda_attn_args *a, const void *q, const void *k, const void *v, void *y,
                             float *lse, void *stream);
ork_status ork_base_attn_bwd(const ork_cuda_attn_args *a, const void *q, const void *k, const void *v,
                             const void *y, const float *lse, const void *dy, void *dq, void *dk, void *dv,
                             void *ws, void *stream);
/* the one core symbol the kernels' error paths call (util/log.c) */
ork_status ork_fail(ork_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "attn_ab: error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return s;
}
}

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "attn_ab: %s: %s\n", #x, cudaGetErrorString(e_)); exit(2); } } while (0)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float urand(void) { /* splitmix64 -> [-1, 1) */
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)((z >> 40) * (1.0 / 16777216.0)) * 2.f - 1.f;
}
static uint16_t bf16_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

struct Dev {
    void *p = nullptr;
    size_t n = 0;
    explicit Dev(size_t bytes) : n(bytes ? bytes : 4) { CK(cudaMalloc(&p, n)); CK(cudaMemset(p, 0xA5, n)); }
    ~Dev() { cudaFree(p); }
    std::vector<unsigned char> host() const {
        std::vector<unsigned char> h(n);
        CK(cudaMemcpy(h.data(), p, n, cudaMemcpyDeviceToHost));
        return h;
    }
};

static Dev *randbf(size_t n, float amp) {
    std::vector<uint16_t> h(n);
    for (auto &x : h) x = bf16_of(urand() * amp);
    Dev *d = new Dev(n * 2);
    CK(cudaMemcpy(d->p, h.data(), n * 2, cudaMemcpyHostToDevice));
    return d;
}

/* 1: byte-identical; 0: prints what differs */
static int same(const char *name, const char *what, const Dev &a, const Dev &b) {
    std::vector<unsigned char> x = a.host(), y = b.host();
    if (x == y) return 1;
    size_t first = 0, ndiff = 0;
    for (size_t i = 0; i < x.size(); i++)
        if (x[i] != y[i]) { if (!ndiff) first = i; ndiff++; }
    printf("DIFF %s: %s differs in %zu of %zu bytes (first at byte %zu)\n", name, what, ndiff, x.size(), first);
    return 0;
}

int main(void) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) { printf("attn_ab: no GPU\n"); return 77; }
    const int Ds[] = {64, 128};
    const int LL[][2] = {{1, 1}, {77, 77}, {128, 128}, {300, 515}, {513, 200}, {1024, 1024}};
    const int HH[][2] = {{4, 4}, {8, 2}};
    int cases = 0, bad = 0;
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    for (int D : Ds)
        for (auto &L : LL)
            for (auto &hh : HH)
                for (int causal = 0; causal < 2; causal++)
                    for (int masked = 0; masked < 2; masked++) {
                        const int64_t B = 2, H = hh[0], Hkv = hh[1], Lq = L[0], Lk = L[1];
                        char name[160];
                        snprintf(name, sizeof name, "D=%d B=%lld H=%lld Hkv=%lld Lq=%lld Lk=%lld causal=%d mask=%d", D,
                                 (long long)B, (long long)H, (long long)Hkv, (long long)Lq, (long long)Lk, causal, masked);
                        size_t nq = (size_t)(B * H * Lq * D), nk = (size_t)(B * Hkv * Lk * D);
                        Dev *q = randbf(nq, 2.f), *k = randbf(nk, 2.f), *v = randbf(nk, 1.f), *dy = randbf(nq, 1.f);
                        Dev km((size_t)(B * Lk));
                        std::vector<uint8_t> hm((size_t)(B * Lk));
                        for (auto &m : hm) m = urand() > -0.6f; /* about 20% of the keys masked */
                        CK(cudaMemcpy(km.p, hm.data(), hm.size(), cudaMemcpyHostToDevice));
                        ork_cuda_attn_args a = {B, H, Hkv, Lq, Lk, D, 0.f, causal,
                                                masked ? (const uint8_t *)km.p : nullptr};
                        Dev y0(nq * 2), y1(nq * 2), l0((size_t)(B * H * Lq) * 4), l1((size_t)(B * H * Lq) * 4);
                        int ok = ork_base_attn_fwd(&a, q->p, k->p, v->p, y0.p, (float *)l0.p, st) == ORK_OK &&
                                 ork_cuda_attn_fwd(&a, q->p, k->p, v->p, y1.p, (float *)l1.p, st) == ORK_OK;
                        CK(cudaStreamSynchronize(st));
                        ok = ok && same(name, "y", y0, y1) & same(name, "lse", l0, l1);
                        Dev dq0(nq * 2), dq1(nq * 2), dk0(nk * 2), dk1(nk * 2), dv0(nk * 2), dv1(nk * 2);
                        Dev ws0(ork_base_attn_ws(&a, 1)), ws1(ork_cuda_attn_ws(&a, 1));
                        /* the same forward outputs (the base's) into both backwards */
                        ok = ork_base_attn_bwd(&a, q->p, k->p, v->p, y0.p, (const float *)l0.p, dy->p, dq0.p, dk0.p,
                                               dv0.p, ws0.p, st) == ORK_OK &&
                             ork_cuda_attn_bwd(&a, q->p, k->p, v->p, y0.p, (const float *)l0.p, dy->p, dq1.p, dk1.p,
                                               dv1.p, ws1.p, st) == ORK_OK && ok;
                        CK(cudaStreamSynchronize(st));
                        ok = same(name, "dq", dq0, dq1) & same(name, "dk", dk0, dk1) & same(name, "dv", dv0, dv1) & ok;
                        cases++;
                        bad += !ok;
                        delete q, delete k, delete v, delete dy;
                    }
    CK(cudaStreamDestroy(st));
    printf("attn_ab: %d cases (fwd y, lse; bwd dq, dk, dv): %s\n", cases,
           bad ? "DIFFERENCES (lines above)" : "all bitwise identical to the base");
    return bad ? 1 : 0;
}
