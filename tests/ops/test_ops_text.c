/* tests/ops/test_ops_text.c — the ABI 1.3 ops the text encoders brought
 * (<orakul/ops.h>: embedding, attention_bias, quick_gelu, layernorm_affine)
 * against float64 references written here, on odd shapes: an embedding from
 * F32 and BF16 tables (and rows of a graph tensor), attention with a
 * broadcast (1, H, Lq, Lk) bias, a per-key bias masking keys, causal with
 * Lq < Lk, scale 1 (T5) and the default 1/sqrt(D); attention_bias without
 * biases equals the attention op. The forward-only ops fail when recorded,
 * an id outside the table fails (CPU). The compositions' backward against
 * finite differences (grad_check.h).
 * OT_GPU (test_ops_text_cuda, label gpu): the same values on the CUDA backend
 * with BF16 activations (inputs rounded to bf16 first, so the reference sees
 * the same numbers); exit 77 without a device.
 * Tolerances: CPU |err| <= 2e-5·(1 + |ref|) (F32 math: measured ~1e-6);
 * CUDA 1.5e-2·(max|ref| + |ref|) (one or two bf16 roundings, 2^-8). */
#include "grad_check.h"

#include "numerics/half.h"
#include "tensor/tensor.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef OT_GPU
int ork_cuda_device_count(void);
#define TOL_A 1.5e-2
#define TOL_R 1.5e-2
#else
#define TOL_A 2e-5
#define TOL_R 2e-5
#endif

static ork_alloc *A;
static ork_graph *Gr;
static const ork_ops *O;
static const ork_tensor_api *T;
static uint64_t rs = 0x243F6A8885A308D3ull;

static double urand(void) { /* [-1, 1) */
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (double)(rs >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}
static float act_round(float x) {
#ifdef OT_GPU
    return ork_bf16_to_f32(ork_f32_to_bf16(x));
#else
    return x;
#endif
}
static float *rnd(int64_t n, double sc) {
    float *h = malloc((size_t)n * sizeof *h);
    for (int64_t i = 0; i < n; i++) h[i] = act_round((float)(sc * urand()));
    return h;
}

static int setup(void) {
    O = ork_ops_table();
    T = ork_tensor_api_table();
#ifdef OT_GPU
    const ork_backend *be = ork_cuda_backend();
    ork_graph_opts go = {.act_dtype = ORK_BF16};
#else
    const ork_backend *be = ork_cpu_backend();
    ork_graph_opts go = {.act_dtype = ORK_F32, .nthreads = 2};
#endif
    if (ork_alloc_create(be, 0, &A) != ORK_OK) return 1;
    if (ork_graph_create(be, A, &go, &Gr) != ORK_OK) return 1;
#ifndef OT_GPU
    if (gc_setup()) return 1;
#endif
    return 0;
}
static int teardown(void) {
    ork_graph_destroy(Gr);
    ork_alloc_destroy(A);
#ifndef OT_GPU
    gc_teardown();
#endif
    return 0;
}

/* An activation tensor (the graph's dtype) from host F32 values. */
static ork_tensor *act(int ndim, const int64_t *sh, const float *h) {
    ork_tensor *t = NULL, *c = NULL;
    CU_ASSERT_FATAL(T->from_host(Gr, ORK_F32, ndim, sh, h, &t) == ORK_OK);
    if (Gr->act_dt == ORK_F32) return t;
    CU_ASSERT_FATAL(O->cast(Gr, t, Gr->act_dt, &c) == ORK_OK);
    return c;
}
static float *host(const ork_tensor *t) {
    float *h = malloc((size_t)ork_tensor_numel(t) * sizeof *h);
    CU_ASSERT_FATAL(T->to_host(Gr, t, ORK_F32, h) == ORK_OK);
    return h;
}
static int close_all(const char *what, const float *got, const double *ref, int64_t n) {
    double M = 0, worst = 0;
    for (int64_t i = 0; i < n; i++) M = fmax(M, fabs(ref[i]));
    int64_t bad = -1;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]);
        worst = fmax(worst, e);
#ifdef OT_GPU
        double lim = TOL_A * M + TOL_R * fabs(ref[i]);
#else
        double lim = TOL_A * (1.0 + fabs(ref[i]));
#endif
        if (!(e <= lim) && bad < 0) bad = i;
    }
    printf("\n    %-40s max|err| %.3g (max|ref| %.3g)%s", what, worst, M, bad >= 0 ? "  FAIL" : "");
    if (bad >= 0) printf(" at %lld: %.8g vs %.8g", (long long)bad, (double)got[bad], ref[bad]);
    return bad < 0;
}

/* ---- embedding ---- */
static void t_embedding(void) {
    const int64_t V = 11, Dm = 7, sh_ids[2] = {2, 5}, sh_w[2] = {V, Dm};
    const int32_t ids[10] = {0, 10, 3, 3, 7, 1, 2, 10, 0, 5};
    float *wh = rnd(V * Dm, 2.0);
    for (int k = 0; k < 2; k++) { /* an F32 table, then a BF16 one */
        ork_dtype wdt = k ? ORK_BF16 : ORK_F32;
        ork_tensor *w, *wi, *idt, *y;
        CU_ASSERT_FATAL(T->from_host(Gr, ORK_F32, 2, sh_w, wh, &wi) == ORK_OK);
        if (wdt == ORK_F32) w = wi;
        else CU_ASSERT_FATAL(O->cast(Gr, wi, wdt, &w) == ORK_OK);
        CU_ASSERT_FATAL(T->from_host(Gr, ORK_I32, 2, sh_ids, ids, &idt) == ORK_OK);
        CU_ASSERT_FATAL(O->embedding(Gr, w, idt, &y) == ORK_OK);
        CU_ASSERT_EQUAL(y->ndim, 3);
        CU_ASSERT_EQUAL(y->shape[2], Dm);
        CU_ASSERT_EQUAL(y->dtype, Gr->act_dt);
        double ref[70];
        for (int i = 0; i < 10; i++)
            for (int c = 0; c < Dm; c++) {
                float v = wh[ids[i] * Dm + c];
                ref[i * Dm + c] = wdt == ORK_BF16 ? ork_bf16_to_f32(ork_f32_to_bf16(v)) : v;
            }
        float *got = host(y);
        CU_ASSERT(close_all(k ? "embedding (bf16 table)" : "embedding (f32 table)", got, ref, 70));
        free(got);
    }
    free(wh);
    CU_ASSERT(ork_graph_reset(Gr) == ORK_OK);
}

static void t_embedding_bad(void) {
    const int64_t sh_w[2] = {4, 3}, sh_ids[1] = {3};
    float wh[12] = {0};
    ork_tensor *w, *idt, *y;
    CU_ASSERT_FATAL(T->from_host(Gr, ORK_F32, 2, sh_w, wh, &w) == ORK_OK);
    const int32_t f32ids[3] = {0, 1, 2};
    ork_tensor *fids;
    CU_ASSERT_FATAL(T->from_host(Gr, ORK_F32, 1, sh_ids, (const float[]){0, 1, 2}, &fids) == ORK_OK);
    CU_ASSERT_EQUAL(O->embedding(Gr, w, fids, &y), ORK_E_INVALID); /* ids must be I32 */
    CU_ASSERT_FATAL(T->from_host(Gr, ORK_I32, 1, sh_ids, f32ids, &idt) == ORK_OK);
    CU_ASSERT_EQUAL(O->embedding(Gr, idt, idt, &y), ORK_E_INVALID); /* a 1-d table */
#ifndef OT_GPU
    const int32_t bad[3] = {0, 4, 1};
    CU_ASSERT_FATAL(T->from_host(Gr, ORK_I32, 1, sh_ids, bad, &idt) == ORK_OK);
    CU_ASSERT_EQUAL(O->embedding(Gr, w, idt, &y), ORK_E_INVALID); /* id 4 of 4 rows */
    const int32_t neg[3] = {-1, 0, 1};
    CU_ASSERT_FATAL(T->from_host(Gr, ORK_I32, 1, sh_ids, neg, &idt) == ORK_OK);
    CU_ASSERT_EQUAL(O->embedding(Gr, w, idt, &y), ORK_E_INVALID);
#endif
    CU_ASSERT(ork_graph_reset(Gr) == ORK_OK);
}

/* ---- attention with biases ---- */
typedef struct att_case {
    const char *name;
    int64_t B, H, Lq, Lk, Dh;
    int bias, kbias, causal;
    float scale; /* 0: default */
} att_case;

static void att_ref(const att_case *c, const float *q, const float *k, const float *v, const float *bias,
                    const float *kb, double *y) {
    double sc = c->scale != 0.0f ? c->scale : 1.0 / sqrt((double)c->Dh);
    double *s = malloc((size_t)c->Lk * sizeof *s);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->H; h++)
            for (int64_t i = 0; i < c->Lq; i++) {
                const float *qi = q + ((b * c->H + h) * c->Lq + i) * c->Dh;
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j < c->Lk; j++) {
                    const float *kj = k + ((b * c->H + h) * c->Lk + j) * c->Dh;
                    double d = 0;
                    for (int64_t e = 0; e < c->Dh; e++) d += (double)qi[e] * kj[e];
                    d *= sc;
                    if (bias) d += bias[(h * c->Lq + i) * c->Lk + j];
                    if (kb) d += kb[b * c->Lk + j];
                    if (c->causal && j > i + (c->Lk - c->Lq)) d += -1e30;
                    s[j] = d;
                    mx = fmax(mx, d);
                }
                for (int64_t j = 0; j < c->Lk; j++) { s[j] = exp(s[j] - mx); sum += s[j]; }
                for (int64_t e = 0; e < c->Dh; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j < c->Lk; j++) acc += s[j] / sum * v[((b * c->H + h) * c->Lk + j) * c->Dh + e];
                    y[((b * c->H + h) * c->Lq + i) * c->Dh + e] = acc;
                }
            }
    free(s);
}

static void run_att(const att_case *c) {
    int64_t nq = c->B * c->H * c->Lq * c->Dh, nk = c->B * c->H * c->Lk * c->Dh;
    int64_t sq[4] = {c->B, c->H, c->Lq, c->Dh}, sk[4] = {c->B, c->H, c->Lk, c->Dh};
    int64_t sb[4] = {1, c->H, c->Lq, c->Lk}, skb[2] = {c->B, c->Lk};
    float *q = rnd(nq, 1.5), *k = rnd(nk, 1.5), *v = rnd(nk, 1.0);
    float *bias = c->bias ? rnd(c->H * c->Lq * c->Lk, 2.0) : NULL;
    float *kb = NULL;
    if (c->kbias) { /* mask the last two keys of batch 1, a soft bias elsewhere */
        kb = rnd(c->B * c->Lk, 0.5);
        for (int64_t b = 0; b < c->B; b++)
            if (b == 1) kb[b * c->Lk + c->Lk - 1] = kb[b * c->Lk + c->Lk - 2] = -1e30f;
    }
    ork_tensor *tq = act(4, sq, q), *tk = act(4, sk, k), *tv = act(4, sk, v), *tb = NULL, *tkb = NULL, *y;
    if (bias) tb = act(4, sb, bias);
    if (kb) CU_ASSERT_FATAL(T->from_host(Gr, ORK_F32, 2, skb, kb, &tkb) == ORK_OK);
    ork_attn_opts ao = {ORK_ABI_INIT(ork_attn_opts), c->scale, c->causal};
    CU_ASSERT_FATAL(O->attention_bias(Gr, tq, tk, tv, tb, tkb, &ao, &y) == ORK_OK);
    CU_ASSERT_EQUAL(y->dtype, Gr->act_dt);
    CU_ASSERT(ork_shape_equal(y, tq));
    /* the reference sees the biases as the kernel does (bf16-rounded bias on CUDA) */
    double *ref = malloc((size_t)nq * sizeof *ref);
    att_ref(c, q, k, v, bias, kb, ref);
    float *got = host(y);
    CU_ASSERT(close_all(c->name, got, ref, nq));
    free(got);
    free(ref);
    free(q); free(k); free(v); free(bias); free(kb);
    CU_ASSERT(ork_graph_reset(Gr) == ORK_OK);
}

static void t_attention_bias(void) {
    static const att_case cases[] = {
        {"attention_bias: bias, scale 1 (T5)", 2, 3, 6, 6, 5, 1, 0, 0, 1.0f},
        {"attention_bias: bias + key mask", 2, 3, 6, 6, 5, 1, 1, 0, 1.0f},
        {"attention_bias: causal + key mask (CLIP)", 2, 2, 7, 7, 4, 0, 1, 1, 0.0f},
        {"attention_bias: causal, Lq 3 < Lk 8", 1, 2, 3, 8, 6, 1, 0, 1, 0.0f},
        {"attention_bias: Lq 5 != Lk 9, no bias", 2, 2, 5, 9, 8, 0, 0, 0, 0.3f},
        {"attention_bias: T5-like 64 keys, D 16", 1, 4, 64, 64, 16, 1, 1, 0, 1.0f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_att(&cases[i]);
}

/* attention_bias without biases == the attention op (fused or composite). */
static void t_attention_bias_vs_attention(void) {
    int64_t sh[4] = {2, 2, 9, 64};
    int64_t n = 2 * 2 * 9 * 64;
    float *q = rnd(n, 1.0), *k = rnd(n, 1.0), *v = rnd(n, 1.0);
    ork_tensor *tq = act(4, sh, q), *tk = act(4, sh, k), *tv = act(4, sh, v), *y1, *y2;
    for (int causal = 0; causal < 2; causal++) {
        ork_attn_opts ao = {ORK_ABI_INIT(ork_attn_opts), 0.0f, causal};
        CU_ASSERT_FATAL(O->attention(Gr, tq, tk, tv, &ao, &y1) == ORK_OK);
        CU_ASSERT_FATAL(O->attention_bias(Gr, tq, tk, tv, NULL, NULL, &ao, &y2) == ORK_OK);
        float *a = host(y1), *b = host(y2);
        double *ref = malloc((size_t)n * sizeof *ref);
        for (int64_t i = 0; i < n; i++) ref[i] = a[i];
        CU_ASSERT(close_all(causal ? "attention_bias == attention (causal)" : "attention_bias == attention", b, ref, n));
        free(a); free(b); free(ref);
    }
    free(q); free(k); free(v);
    CU_ASSERT(ork_graph_reset(Gr) == ORK_OK);
}

static void t_attention_bias_bad(void) {
    int64_t sq[4] = {2, 2, 4, 8}, sk[4] = {2, 2, 5, 8}, sb[4] = {1, 3, 4, 5}, skb[2] = {2, 4};
    float z[2 * 2 * 5 * 8] = {0};
    ork_tensor *q = act(4, sq, z), *k = act(4, sk, z), *v = act(4, sk, z), *y;
    ork_tensor *bb = act(4, sb, z), *kb = act(2, skb, z);
    CU_ASSERT_EQUAL(O->attention_bias(Gr, q, k, v, bb, NULL, NULL, &y), ORK_E_INVALID); /* 3 heads vs 2 */
    CU_ASSERT_EQUAL(O->attention_bias(Gr, q, k, v, NULL, kb, NULL, &y), ORK_E_INVALID); /* (2, 4) vs Lk 5 */
    CU_ASSERT_EQUAL(O->attention_bias(Gr, q, q, v, NULL, NULL, NULL, &y), ORK_E_INVALID); /* k, v differ */
    CU_ASSERT(ork_graph_reset(Gr) == ORK_OK);
}

/* ---- quick_gelu, layernorm_affine: values ---- */
static void t_quick_gelu(void) {
    int64_t sh[2] = {3, 37};
    float *x = rnd(3 * 37, 5.0);
    ork_tensor *tx = act(2, sh, x), *y;
    CU_ASSERT_FATAL(O->quick_gelu(Gr, tx, &y) == ORK_OK);
    double ref[111];
    for (int i = 0; i < 111; i++) ref[i] = x[i] / (1.0 + exp(-1.702 * x[i]));
    float *got = host(y);
    CU_ASSERT(close_all("quick_gelu", got, ref, 111));
    free(got);
    free(x);
    CU_ASSERT(ork_graph_reset(Gr) == ORK_OK);
}

static void t_layernorm_affine(void) {
    int64_t sh[3] = {2, 3, 29}, sc = 29;
    float *x = rnd(2 * 3 * 29, 3.0), *w = rnd(29, 1.0), *b = rnd(29, 1.0);
    for (int i = 0; i < 2 * 3 * 29; i++) x[i] = act_round(x[i] + 1.5f); /* a mean to remove */
    ork_tensor *tx = act(3, sh, x), *tw, *tb, *y;
    CU_ASSERT_FATAL(T->from_host(Gr, ORK_F32, 1, &sc, w, &tw) == ORK_OK); /* norm weights stay F32 */
    CU_ASSERT_FATAL(T->from_host(Gr, ORK_F32, 1, &sc, b, &tb) == ORK_OK);
    for (int mode = 0; mode < 3; mode++) { /* w and b, w only, neither */
        ork_tensor *ww = mode < 2 ? tw : NULL, *bb = mode == 0 ? tb : NULL;
        CU_ASSERT_FATAL(O->layernorm_affine(Gr, tx, ww, bb, 1e-5f, &y) == ORK_OK);
        double ref[174];
        for (int r = 0; r < 6; r++) {
            double m = 0, var = 0;
            for (int c = 0; c < 29; c++) m += x[r * 29 + c];
            m /= 29;
            for (int c = 0; c < 29; c++) var += (x[r * 29 + c] - m) * (x[r * 29 + c] - m);
            var /= 29;
            for (int c = 0; c < 29; c++)
                ref[r * 29 + c] = (x[r * 29 + c] - m) / sqrt(var + 1e-5) * (ww ? w[c] : 1.0) + (bb ? b[c] : 0.0);
        }
        float *got = host(y);
        static const char *names[3] = {"layernorm_affine (w, b)", "layernorm_affine (w)", "layernorm_affine ()"};
        CU_ASSERT(close_all(names[mode], got, ref, 174));
        free(got);
    }
    int64_t bad = 28;
    ork_tensor *tw2;
    CU_ASSERT_FATAL(T->from_host(Gr, ORK_F32, 1, &bad, w, &tw2) == ORK_OK);
    CU_ASSERT_EQUAL(O->layernorm_affine(Gr, tx, tw2, NULL, 1e-5f, &y), ORK_E_INVALID);
    free(x); free(w); free(b);
    CU_ASSERT(ork_graph_reset(Gr) == ORK_OK);
}

/* The ABI 1.3 fields are appended: the table reaches them and says so. */
static void t_table(void) {
    CU_ASSERT(ork_ops_has_text(O));
    CU_ASSERT(O->abi.minor >= 3);
}

#ifndef OT_GPU
/* ---- forward-only ops refuse the tape; compositions' backward vs finite differences ---- */
#define S(...) ((const int64_t[]){__VA_ARGS__})

static void t_no_backward(void) {
    ork_tensor *w = gc_param(2, S(5, 4), 1.0), *q = gc_param(4, S(1, 2, 3, 4), 1.0);
    ork_tensor *ids, *y;
    const int32_t id[2] = {1, 4};
    CU_ASSERT_FATAL(G.tapi->from_host(G.g, ORK_I32, 1, S(2), id, &ids) == ORK_OK);
    int prev = ork_graph_set_grad(G.g, 1);
    CU_ASSERT_EQUAL(G.ops->embedding(G.g, w, ids, &y), ORK_E_UNSUPPORTED);
    CU_ASSERT_EQUAL(G.ops->attention_bias(G.g, q, q, q, NULL, NULL, NULL, &y), ORK_E_UNSUPPORTED);
    ork_graph_set_grad(G.g, 0); /* grad off: the same calls run */
    CU_ASSERT_EQUAL(G.ops->embedding(G.g, w, ids, &y), ORK_OK);
    CU_ASSERT_EQUAL(G.ops->attention_bias(G.g, q, q, q, NULL, NULL, NULL, &y), ORK_OK);
    ork_graph_set_grad(G.g, prev);
    ork_tensor *all[2] = {w, q};
    gc_free(2, all);
    ork_graph_reset(G.g);
}

static ork_status f_qgelu(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    *n = 1;
    return G.ops->quick_gelu(g, in[0], &o[0]);
}
static ork_status f_lna(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    *n = 1;
    return G.ops->layernorm_affine(g, in[0], in[1], in[2], 1e-5f, &o[0]);
}
static void t_grads(void) {
    ork_tensor *x = gc_param(2, S(3, 7), 2.0);
    CU_ASSERT(gc_check("quick_gelu", f_qgelu, NULL, 1, &x, NULL, 1e-3));
    gc_free(1, &x);
    ork_tensor *in[3] = {gc_param(3, S(2, 3, 6), 1.0), gc_param(1, S(6), 1.0), gc_param(1, S(6), 1.0)};
    CU_ASSERT(gc_check("layernorm_affine", f_lna, NULL, 3, in, NULL, 1e-3));
    gc_free(3, in);
}
#endif

static const ork_test_case cases[] = {
    {"ops table has the ABI 1.3 text ops", t_table},
    {"embedding: f32 and bf16 tables vs direct rows", t_embedding},
    {"embedding: bad ids and tables fail with one line", t_embedding_bad},
    {"attention_bias vs f64: bias, key mask, causal, scales", t_attention_bias},
    {"attention_bias without biases == attention", t_attention_bias_vs_attention},
    {"attention_bias: mismatched shapes fail", t_attention_bias_bad},
    {"quick_gelu vs x*sigmoid(1.702x)", t_quick_gelu},
    {"layernorm_affine vs f64", t_layernorm_affine},
#ifndef OT_GPU
    {"forward-only ops refuse the tape", t_no_backward},
    {"quick_gelu, layernorm_affine backward vs finite differences", t_grads},
#endif
    {NULL, NULL},
};

#ifdef OT_GPU
int main(void) {
    if (ork_cuda_device_count() <= 0) return 77;
    return ork_test_run("ops_text_cuda", setup, teardown, cases);
}
#else
ORK_TEST_MAIN("ops_text", setup, teardown, cases)
#endif
