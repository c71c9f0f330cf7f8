/* tests/tensor/test_tensor.c — the allocator (budget refusal: one line, right
 * content, no leak), the arena (steady state: no allocation after step 1;
 * regions), the tape (frees saved activations, no-grad records nothing,
 * per-block recompute gives bit-identical gradients), and the tensor service. */
#include "ork_test.h"

#include "numerics/half.h"
#include "tensor/graph.h"
#include "tensor/ops.h"
#include "tensor/tape.h"
#include "util/log.h"

#include <string.h>

#define S(...) ((const int64_t[]){__VA_ARGS__})

/* ---- a CPU backend whose raw allocations are counted (leak checks) ---------- */

static ork_backend g_cnt;
static long g_live_raw;
static ork_status cnt_alloc(size_t b, void **p) {
    ork_status s = ork_cpu_backend()->alloc(b, p);
    if (s == ORK_OK) g_live_raw++;
    return s;
}
static void cnt_free(void *p) {
    if (p) g_live_raw--;
    ork_cpu_backend()->free(p);
}
static const ork_backend *counting_backend(void) {
    g_cnt = *ork_cpu_backend();
    g_cnt.alloc = cnt_alloc;
    g_cnt.free = cnt_free;
    return &g_cnt;
}

/* ---- log capture ----------------------------------------------------------------- */

static char g_lines[8][1024];
static int g_nlines;
static void sink(ork_log_level lvl, const char *line, void *user) {
    if (lvl >= ORK_LOG_ERROR && g_nlines < 8) snprintf(g_lines[g_nlines++], sizeof g_lines[0], "%s", line);
}

static uint64_t g_rng = 88172645463325252ull;
static float frand(void) {
    g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static ork_tensor *param(ork_alloc *a, int ndim, const int64_t *shape, float sd) {
    ork_tensor *t;
    if (ork_tensor_new(a, "lora", ORK_F32, ndim, shape, 1, &t) != ORK_OK) return NULL;
    for (int64_t i = 0; i < ork_tensor_numel(t); i++) ((float *)ork_tensor_data(t))[i] = sd * frand();
    return t;
}

/* ---- allocator --------------------------------------------------------------------- */

static void t_budget(void) {
    ork_alloc *a;
    g_live_raw = 0;
    CU_ASSERT_FATAL(ork_alloc_create(counting_backend(), 1 << 20, &a) == ORK_OK);
    void *w, *l, *x = (void *)1;
    CU_ASSERT_FATAL(ork_alloc_get(a, 600 * 1024, "weights", &w) == ORK_OK);
    CU_ASSERT_FATAL(ork_alloc_get(a, 300 * 1024, "lora", &l) == ORK_OK);
    uint64_t count = ork_alloc_count(a);
    g_nlines = 0;
    ork_log_set_sink(sink, NULL);
    ork_status s = ork_alloc_get(a, 200 * 1024, "activations", &x);
    ork_log_set_sink(NULL, NULL);
    CU_ASSERT(s == ORK_E_BUDGET);
    CU_ASSERT(x == NULL);
    CU_ASSERT(g_nlines == 1); /* exactly one line */
    CU_ASSERT(strstr(g_lines[0], "asked 200.0 KiB for \"activations\"") != NULL);
    CU_ASSERT(strstr(g_lines[0], "in use 900.0 KiB of the 1.00 MiB budget") != NULL);
    CU_ASSERT(strstr(g_lines[0], "weights 600.0 KiB") != NULL);
    CU_ASSERT(strstr(g_lines[0], "lora 300.0 KiB") != NULL);
    CU_ASSERT(strchr(g_lines[0], '\n') == NULL);
    CU_ASSERT(ork_alloc_in_use(a, NULL) == 900 * 1024);
    CU_ASSERT(ork_alloc_in_use(a, "activations") == 0);
    CU_ASSERT(ork_alloc_count(a) == count);
    CU_ASSERT(g_live_raw == 2);
    /* An arena growing past the budget is refused the same way, and stays usable. */
    ork_arena *ar;
    CU_ASSERT_FATAL(ork_arena_create(a, "activations", 64 * 1024, &ar) == ORK_OK);
    void *p, *q;
    CU_ASSERT(ork_arena_get(ar, 32 * 1024, &p) == ORK_OK);
    ork_log_set_sink(sink, NULL);
    CU_ASSERT(ork_arena_get(ar, 512 * 1024, &q) == ORK_E_BUDGET);
    CU_ASSERT(strstr(g_lines[g_nlines - 1], "asked 512.0 KiB") != NULL); /* the exact need, not a doubled chunk */
    ork_log_set_sink(NULL, NULL);
    CU_ASSERT(ork_arena_get(ar, 16 * 1024, &q) == ORK_OK);
    CU_ASSERT(g_live_raw == 3);
    ork_arena_destroy(ar);
    /* a tensor refused: nothing leaks */
    ork_tensor *t = NULL;
    ork_log_set_sink(sink, NULL);
    CU_ASSERT(ork_tensor_new(a, "optimizer", ORK_F32, 2, S(512, 512), 0, &t) == ORK_E_BUDGET);
    ork_log_set_sink(NULL, NULL);
    CU_ASSERT(t == NULL && g_live_raw == 2);
    ork_alloc_put(a, w);
    ork_alloc_put(a, l);
    CU_ASSERT(ork_alloc_in_use(a, NULL) == 0 && g_live_raw == 0);
    ork_alloc_destroy(a);
}

/* ---- a small model: blocks of layernorm -> linear(+LoRA) -> gelu -> + residual ---- */

#define NB 3
typedef struct model {
    ork_alloc *a;
    ork_graph *g;
    ork_tensor *w[NB], *down[NB], *up[NB];
    ork_lora lora[NB];
    float xh[2 * 7 * 6], th[2 * 7 * 6];
} model;

static int model_init(model *m, const ork_backend *be) {
    memset(m, 0, sizeof *m);
    if (ork_alloc_create(be, 0, &m->a) != ORK_OK) return 0;
    ork_graph_opts o = {.act_dtype = ORK_F32, .nthreads = 2};
    if (ork_graph_create(be, m->a, &o, &m->g) != ORK_OK) return 0;
    for (int b = 0; b < NB; b++) {
        if (ork_tensor_new(m->a, "weights", ORK_BF16, 2, S(6, 6), 0, &m->w[b]) != ORK_OK) return 0;
        for (int i = 0; i < 36; i++) ((uint16_t *)ork_tensor_data(m->w[b]))[i] = ork_f32_to_bf16(0.5f * frand());
        m->down[b] = param(m->a, 2, S(2, 6), 0.5f);
        m->up[b] = param(m->a, 2, S(6, 2), 0.5f);
        m->lora[b] = (ork_lora){m->down[b], m->up[b], 0.5f, 0.0f, ORK_ADAPTER_LORA};
        m->w[b]->lora = &m->lora[b];
    }
    for (int i = 0; i < 84; i++) { m->xh[i] = frand(); m->th[i] = frand(); }
    return 1;
}

static void model_free(model *m) {
    for (int b = 0; b < NB; b++) {
        ork_tensor_free(m->w[b]);
        ork_tensor_free(m->down[b]);
        ork_tensor_free(m->up[b]);
    }
    ork_graph_destroy(m->g);
    ork_alloc_destroy(m->a);
}

static ork_status block(model *m, int b, ork_tensor *x, ork_tensor **y) {
    const ork_ops *o = ork_ops_table();
    ork_tensor *h, *l, *a;
    ORK_TRY(o->layernorm(m->g, x, 1e-6f, &h));
    ORK_TRY(o->linear(m->g, h, m->w[b], NULL, &l));
    ORK_TRY(o->gelu_tanh(m->g, l, &a));
    return o->add(m->g, x, a, y);
}

static ork_status loss_of(model *m, ork_tensor *x, ork_tensor **loss) {
    ork_tensor *t;
    ORK_TRY(ork_tensor_api_table()->from_host(m->g, ORK_F32, 3, S(2, 7, 6), m->th, &t));
    return ork_ops_table()->mse(m->g, x, t, loss);
}

/* One straight step: all blocks recorded, backward from the loss. */
static ork_status straight_step(model *m, float *loss_out) {
    ork_tensor *x, *loss;
    ORK_TRY(ork_graph_reset(m->g));
    ORK_TRY(ork_tensor_api_table()->from_host(m->g, ORK_F32, 3, S(2, 7, 6), m->xh, &x));
    for (int b = 0; b < NB; b++) ORK_TRY(block(m, b, x, &x));
    ORK_TRY(loss_of(m, x, &loss));
    ORK_TRY(ork_backward(m->g, loss));
    *loss_out = *(float *)ork_tensor_data(loss);
    return ORK_OK;
}

static void grads_of(model *m, float *out) {
    for (int b = 0; b < NB; b++) {
        memcpy(out + b * 24, ork_tensor_data(m->down[b]->grad), 12 * sizeof(float));
        memcpy(out + b * 24 + 12, ork_tensor_data(m->up[b]->grad), 12 * sizeof(float));
    }
}
static void zero_grads(model *m) {
    for (int b = 0; b < NB; b++) {
        ork_tensor_zero_grad(m->g, m->down[b]);
        ork_tensor_zero_grad(m->g, m->up[b]);
    }
}

static void t_arena_steady(void) {
    model m;
    CU_ASSERT_FATAL(model_init(&m, ork_cpu_backend()));
    uint64_t after1 = 0, grows1 = 0;
    for (int step = 0; step < 5; step++) {
        float l;
        zero_grads(&m);
        CU_ASSERT_FATAL(straight_step(&m, &l) == ORK_OK);
        if (step == 0) { after1 = ork_alloc_count(m.a); grows1 = ork_arena_grow_count(m.g->arena); }
        if (step == 1) { after1 = ork_alloc_count(m.a); grows1 = ork_arena_grow_count(m.g->arena); }
    }
    /* From the second step on: no device allocation at all. */
    CU_ASSERT(ork_alloc_count(m.a) == after1);
    CU_ASSERT(ork_arena_grow_count(m.g->arena) == grows1);
    CU_ASSERT(ork_arena_grow_count(m.g->arena) <= 2);
    model_free(&m);
}

static void t_tape_frees(void) {
    model m;
    CU_ASSERT_FATAL(model_init(&m, ork_cpu_backend()));
    ork_graph *g = m.g;
    ork_tensor *x, *x0, *ys[NB], *loss;
    CU_ASSERT_FATAL(ork_graph_reset(g) == ORK_OK);
    CU_ASSERT_FATAL(ork_tensor_api_table()->from_host(g, ORK_F32, 3, S(2, 7, 6), m.xh, &x0) == ORK_OK);
    x = x0;
    for (int b = 0; b < NB; b++) { CU_ASSERT_FATAL(block(&m, b, x, &ys[b]) == ORK_OK); x = ys[b]; }
    CU_ASSERT_FATAL(loss_of(&m, x, &loss) == ORK_OK);
    size_t live_fwd = ork_arena_live(g->arena);
    CU_ASSERT(ork_tape_len(g->tape) == 4 * NB); /* block 0's layernorm of a constant input is not recorded */
    CU_ASSERT(ys[0]->saves > 0); /* the next block's layernorm keeps it */
    CU_ASSERT_FATAL(ork_backward(g, loss) == ORK_OK);
    CU_ASSERT(ork_tape_len(g->tape) == 0);
    for (int b = 0; b < NB - 1; b++) CU_ASSERT(ys[b]->flags & ORK_TF_FREED);
    CU_ASSERT(!(loss->flags & ORK_TF_FREED)); /* the caller still reads the loss */
    CU_ASSERT(!(x0->flags & ORK_TF_FREED));   /* not made by an op: stays */
    /* What is left: the input, the target, the loss and its seed gradient, the last output, ... a handful of blocks. */
    size_t live_bwd = ork_arena_live(g->arena);
    CU_ASSERT(live_bwd < live_fwd / 3);
    CU_ASSERT(live_bwd <= 8 * ORK_ALLOC_ALIGN);
    /* A freed tensor is refused by ops with one line. */
    ork_tensor *y;
    CU_ASSERT(ork_ops_table()->relu(g, ys[0], &y) == ORK_E_INVALID);
    model_free(&m);
}

static void t_no_grad(void) {
    model m;
    CU_ASSERT_FATAL(model_init(&m, ork_cpu_backend()));
    ork_graph *g = m.g;
    ork_tensor *x, *loss;
    CU_ASSERT(ork_tensor_api_table()->grad_enabled(g) == 1);
    int prev = ork_graph_set_grad(g, 0);
    CU_ASSERT(prev == 1 && ork_tensor_api_table()->grad_enabled(g) == 0);
    CU_ASSERT_FATAL(ork_tensor_api_table()->from_host(g, ORK_F32, 3, S(2, 7, 6), m.xh, &x) == ORK_OK);
    for (int b = 0; b < NB; b++) CU_ASSERT_FATAL(block(&m, b, x, &x) == ORK_OK);
    CU_ASSERT_FATAL(loss_of(&m, x, &loss) == ORK_OK);
    CU_ASSERT(ork_tape_len(g->tape) == 0);
    CU_ASSERT(loss->requires_grad == 0 && loss->node == NULL);
    CU_ASSERT(ork_backward(g, loss) == ORK_E_INVALID);
    CU_ASSERT(m.down[0]->grad == NULL);
    ork_graph_set_grad(g, 1);
    model_free(&m);
}

/* The trainer's per-block recipe (tape.h) against one straight backward. */
static void t_recompute(void) {
    model m;
    CU_ASSERT_FATAL(model_init(&m, ork_cpu_backend()));
    ork_graph *g = m.g;
    const ork_tensor_api *T = ork_tensor_api_table();
    float ref[NB * 24], got[NB * 24], l_ref, l_got;
    CU_ASSERT_FATAL(straight_step(&m, &l_ref) == ORK_OK);
    grads_of(&m, ref);
    zero_grads(&m);

    ork_tensor *ckpt[NB + 1], *dcarry, *x, *loss;
    for (int i = 0; i <= NB; i++) CU_ASSERT_FATAL(ork_tensor_new(m.a, "checkpoints", ORK_F32, 3, S(2, 7, 6), 0, &ckpt[i]) == ORK_OK);
    CU_ASSERT_FATAL(ork_tensor_new(m.a, "checkpoints", ORK_F32, 3, S(2, 7, 6), 0, &dcarry) == ORK_OK);
    for (int step = 0; step < 2; step++) {
        uint64_t allocs = ork_alloc_count(m.a);
        zero_grads(&m);
        CU_ASSERT_FATAL(ork_graph_reset(g) == ORK_OK);
        /* forward, grad off, one region per block */
        ork_graph_set_grad(g, 0);
        CU_ASSERT_FATAL(T->from_host(g, ORK_F32, 3, S(2, 7, 6), m.xh, &x) == ORK_OK);
        CU_ASSERT_FATAL(ork_graph_copy_to(g, x, ckpt[0]) == ORK_OK);
        for (int b = 0; b < NB; b++) {
            ork_region r = ork_graph_region_begin(g);
            size_t live0 = ork_arena_live(g->arena);
            ork_tensor *in, *out;
            CU_ASSERT_FATAL(ork_graph_leaf(g, ckpt[b], 0, &in) == ORK_OK);
            CU_ASSERT_FATAL(block(&m, b, in, &out) == ORK_OK);
            CU_ASSERT_FATAL(ork_graph_copy_to(g, out, ckpt[b + 1]) == ORK_OK);
            ork_graph_region_end(g, r);
            CU_ASSERT(ork_arena_live(g->arena) == live0);
        }
        /* loss from the last checkpoint */
        ork_graph_set_grad(g, 1);
        ork_region r = ork_graph_region_begin(g);
        CU_ASSERT_FATAL(ork_graph_leaf(g, ckpt[NB], 1, &x) == ORK_OK);
        CU_ASSERT_FATAL(loss_of(&m, x, &loss) == ORK_OK);
        CU_ASSERT_FATAL(ork_backward(g, loss) == ORK_OK);
        l_got = *(float *)ork_tensor_data(loss);
        CU_ASSERT_FATAL(x->grad != NULL);
        CU_ASSERT_FATAL(ork_graph_copy_to(g, x->grad, dcarry) == ORK_OK);
        ork_graph_region_end(g, r);
        /* backward, block by block in reverse, recomputing each */
        for (int b = NB - 1; b >= 0; b--) {
            ork_region rb = ork_graph_region_begin(g);
            ork_tensor *in, *out;
            CU_ASSERT_FATAL(ork_graph_leaf(g, ckpt[b], 1, &in) == ORK_OK);
            CU_ASSERT_FATAL(block(&m, b, in, &out) == ORK_OK);
            CU_ASSERT_FATAL(ork_backward_from(g, 1, &out, &dcarry) == ORK_OK);
            CU_ASSERT_FATAL(in->grad != NULL);
            CU_ASSERT_FATAL(ork_graph_copy_to(g, in->grad, dcarry) == ORK_OK);
            ork_graph_region_end(g, rb);
        }
        grads_of(&m, got);
        CU_ASSERT(l_got == l_ref);
        CU_ASSERT(memcmp(ref, got, sizeof ref) == 0); /* bit-identical */
        if (step == 1) CU_ASSERT(ork_alloc_count(m.a) == allocs); /* steady state here too */
    }
    for (int i = 0; i <= NB; i++) ork_tensor_free(ckpt[i]);
    ork_tensor_free(dcarry);
    model_free(&m);
}

/* ---- the tensor service ----------------------------------------------------------------- */

static int g_weight_calls;
static ork_tensor *g_wt;
static ork_status weight_fn(void *ctx, ork_graph *g, const char *name, ork_tensor **out) {
    g_weight_calls++;
    if (strcmp(name, "img_in.weight") != 0) return ORK_FAIL(ORK_E_INVALID, "weight \"%s\": unknown", name);
    *out = g_wt;
    return ORK_OK;
}

static void t_tensor_api(void) {
    ork_alloc *a;
    ork_graph *g;
    CU_ASSERT_FATAL(ork_alloc_create(ork_cpu_backend(), 0, &a) == ORK_OK);
    CU_ASSERT_FATAL(ork_graph_create(ork_cpu_backend(), a, NULL, &g) == ORK_OK);
    const ork_tensor_api *T = ork_tensor_api_table();
    CU_ASSERT(T->abi.struct_size == sizeof(ork_tensor_api) && ork_ops_table()->abi.major == ORK_ABI_MAJOR);
    float h[6] = {1.0f, -2.5f, 3.1415926f, 0.0f, 1e-3f, 65504.0f}, back[6];
    uint16_t hb[6];
    ork_tensor *t;
    CU_ASSERT_FATAL(T->from_host(g, ORK_F32, 2, S(2, 3), h, &t) == ORK_OK);
    CU_ASSERT(T->ndim(t) == 2 && T->dim(t, -1) == 3 && T->dim(t, 0) == 2 && T->numel(t) == 6);
    CU_ASSERT(T->dtype(t) == ORK_F32 && T->device(t) == ORK_DEV_CPU && strcmp(T->name(t), "") == 0);
    CU_ASSERT(T->graph_device(g) == ORK_DEV_CPU);
    CU_ASSERT(T->to_host(g, t, ORK_F32, back) == ORK_OK && memcmp(h, back, sizeof h) == 0);
    CU_ASSERT(T->to_host(g, t, ORK_BF16, hb) == ORK_OK);
    int ok = 1;
    for (int i = 0; i < 6; i++) ok &= hb[i] == ork_f32_to_bf16(h[i]);
    CU_ASSERT(ok);
    CU_ASSERT(T->to_host(g, t, ORK_I32, back) == ORK_E_UNSUPPORTED);
    ork_tensor *e;
    CU_ASSERT(T->empty(g, ORK_BF16, 3, S(1, 2, 3), &e) == ORK_OK && T->numel(e) == 6);
    CU_ASSERT(T->empty(g, ORK_F32, 9, S(1, 1, 1, 1, 1, 1, 1, 1, 1), &e) == ORK_E_INVALID);
    CU_ASSERT(T->empty(g, ORK_F32, 2, S(2, -1), &e) == ORK_E_INVALID);
    /* weights go through the hook */
    ork_tensor *w;
    CU_ASSERT(T->weight(g, "img_in.weight", &w) == ORK_E_INVALID); /* no store attached */
    CU_ASSERT_FATAL(ork_tensor_wrap(ORK_DEV_CPU, ORK_F32, 2, S(2, 3), h, "img_in.weight", &g_wt) == ORK_OK);
    ork_graph_set_weight_fn(g, weight_fn, NULL);
    CU_ASSERT(T->weight(g, "img_in.weight", &w) == ORK_OK && w == g_wt);
    CU_ASSERT(strcmp(T->name(w), "img_in.weight") == 0);
    CU_ASSERT(T->weight(g, "nope", &w) == ORK_E_INVALID);
    CU_ASSERT(g_weight_calls == 2);
    ork_tensor_free(g_wt);
    /* persistent tensors outlive graph resets, are accounted under "frozen", and
     * release frees them */
    ork_tensor *p;
    CU_ASSERT_FATAL(T->persistent(g, ORK_F32, 2, S(2, 3), h, &p) == ORK_OK);
    CU_ASSERT(ork_alloc_in_use(a, "frozen") >= sizeof h);
    CU_ASSERT(ork_graph_reset(g) == ORK_OK);
    ork_tensor *junk;
    CU_ASSERT(T->from_host(g, ORK_F32, 2, S(2, 3), back, &junk) == ORK_OK); /* reuses the arena */
    CU_ASSERT(T->to_host(g, p, ORK_F32, back) == ORK_OK && memcmp(h, back, sizeof h) == 0);
    CU_ASSERT(T->persistent(g, ORK_F32, 1, S(2), NULL, &junk) == ORK_E_INVALID);
    T->release(p);
    T->release(NULL);
    CU_ASSERT(ork_alloc_in_use(a, "frozen") == 0);
    ork_graph_destroy(g);
    CU_ASSERT(ork_alloc_in_use(a, NULL) == 0);
    ork_alloc_destroy(a);
}

/* ta->drop: a no-grad intermediate's block goes back at once (the next
 * tensor of its size takes it); reading it afterwards is one error line; a
 * no-op for a view's source, a tape-recorded tensor and a persistent one */
static void t_drop(void) {
    ork_alloc *a;
    ork_graph *g;
    CU_ASSERT_FATAL(ork_alloc_create(ork_cpu_backend(), 0, &a) == ORK_OK);
    CU_ASSERT_FATAL(ork_graph_create(ork_cpu_backend(), a, NULL, &g) == ORK_OK);
    const ork_tensor_api *T = ork_tensor_api_table();
    const ork_ops *O = ork_ops_table();
    CU_ASSERT_FATAL(ork_tensor_api_has_drop(T));
    float h[6] = {1, -2, 3, -4, 5, -6}, back[6];
    ork_tensor *x, *y, *z, *v;
    ork_graph_set_grad(g, 0);
    CU_ASSERT_FATAL(T->from_host(g, ORK_F32, 2, S(2, 3), h, &x) == ORK_OK);
    CU_ASSERT_FATAL(O->relu(g, x, &y) == ORK_OK);
    size_t peak = ork_arena_peak(g->arena);
    void *yd = ork_tensor_data(y);
    T->drop(g, y);
    CU_ASSERT_FATAL(O->relu(g, x, &z) == ORK_OK);
    CU_ASSERT(ork_tensor_data(z) == yd);           /* y's block, reused */
    CU_ASSERT(ork_arena_peak(g->arena) == peak);   /* no growth */
    T->drop(g, y);                                 /* twice: nothing (no double free line) */
    g_nlines = 0;
    ork_log_set_sink(sink, NULL);
    CU_ASSERT(O->relu(g, y, &v) == ORK_E_INVALID);
    CU_ASSERT(T->to_host(g, y, ORK_F32, back) == ORK_E_INVALID);
    ork_log_set_sink(NULL, NULL);
    CU_ASSERT(g_nlines == 2 && strstr(g_lines[0], "dropped") != NULL);
    /* a view's source keeps its block (the view reads it) */
    CU_ASSERT_FATAL(O->reshape(g, z, 1, S(6), &v) == ORK_OK);
    T->drop(g, z);
    CU_ASSERT(T->to_host(g, v, ORK_F32, back) == ORK_OK && back[0] == 1 && back[1] == 0 && back[4] == 5);
    /* another graph's tensor: not this graph's to free (no line, no effect) */
    ork_graph *g2;
    ork_tensor *o2;
    CU_ASSERT_FATAL(ork_graph_create(ork_cpu_backend(), a, NULL, &g2) == ORK_OK);
    ork_graph_set_grad(g2, 0);
    CU_ASSERT_FATAL(T->from_host(g2, ORK_F32, 2, S(2, 3), h, &o2) == ORK_OK);
    g_nlines = 0;
    ork_log_set_sink(sink, NULL);
    T->drop(g, o2);
    ork_log_set_sink(NULL, NULL);
    CU_ASSERT(g_nlines == 0);
    CU_ASSERT(T->to_host(g2, o2, ORK_F32, back) == ORK_OK && back[1] == -2);
    ork_graph_destroy(g2);
    /* tape-recorded tensors are the tape's to free */
    ork_graph_set_grad(g, 1);
    ork_tensor *p = param(a, 2, S(2, 3), 1.0f), *r;
    CU_ASSERT_FATAL(p != NULL);
    CU_ASSERT_FATAL(O->mul(g, x, p, &r) == ORK_OK);
    T->drop(g, r);
    CU_ASSERT(T->to_host(g, r, ORK_F32, back) == ORK_OK);
    ork_tensor_free(p);
    ork_graph_destroy(g);
    CU_ASSERT(ork_alloc_in_use(a, NULL) == 0);
    ork_alloc_destroy(a);
}

static const ork_test_case cases[] = {
    {"budget refusal: one line, no leak", t_budget},
    {"arena steady state after step 1", t_arena_steady},
    {"tape frees saved activations", t_tape_frees},
    {"no-grad records nothing", t_no_grad},
    {"per-block recompute == straight backward", t_recompute},
    {"tensor service", t_tensor_api},
    {"drop: a no-grad intermediate's memory back at once", t_drop},
    {NULL, NULL},
};

ORK_TEST_MAIN("tensor", NULL, NULL, cases)
