/* tests/stream/test_plan_extras.c — what the plan (stream/plan.h) counts beside
 * the LoRA state, against what the code allocates on the CPU backend (the
 * toy block model of toy_model.h, its weights resident):
 *  - ema: train.ema_config.use_ema. ork_train_ema_setup (train/ema.c) on the
 *    toy's LoRA parameters allocates its shadows and scratch under the tag
 *    "ema"; that peak equals how much the plan grows with inputs.ema (the
 *    plan's own LoRA count equal to ork_lora_create's first). With the
 *    trainable state streamed the shadows live in the state records: the
 *    pinned host grows by 4 bytes a parameter.
 *  - lokr: network.type lokr. One training step of the toy with LoKr
 *    adapters and one with LoRA (rank 4): the step's peak of device memory
 *    grows by no more than the plan's adapter transient, and by most of it
 *    (ork_plan_lokr_transient: the largest layer's W + kron(w1, w2) operand
 *    and chunks, tensor/ops_linear.c); for one linear alone, forward and
 *    backward, the LoKr op's arena peak over the plain op's equals it.
 *  - dop: train.diff_output_preservation. The prior pass (ork_runner_forward,
 *    train/dop.c) peaks at no more than one block's working set plus a carry
 *    (every block alone measured) and predicts bit for bit what the blocks
 *    do on the arena; a micro-batch with the prior and the preservation step
 *    peaks above the plain one by no more than the plan's DOP term.
 *  - the VRAM line names "EMA", "adapter transient" and "DOP" only when counted. */
#include "ork_test.h"

#include "toy_model.h"

#include "plugin/model_decl.h"
#include "stream/plan.h"
#include "tensor/alloc.h"
#include "tensor/backend.h"
#include "tensor/tape.h"
#include "train/ema.h"
#include "train/job.h"

#define H 32
#define NB 5

static toy g_toy;

static int setup(void) {
    (void)toy_train; /* toy_model.h's run: not used here */
    (void)toy_out_free;
    toy_init(&g_toy, NB, H, 8);
    return 0;
}
static int teardown(void) { return 0; }

static ork_plan_inputs inputs(void) {
    ork_plan_inputs in;
    memset(&in, 0, sizeof in);
    in.info = &g_toy.info;
    ork_device_kind_find("cpu", &in.dev);
    in.device_free = (size_t)1 << 40;
    in.mode = ORK_OFFLOAD_NONE;
    in.weight_bytes = 4;
    in.lora_rank = 4;
    in.param_bytes = 4;
    in.opt_bytes_per_param = 8;
    in.batch = TOY_B;
    in.img_tokens = TOY_N;
    in.act_bytes = 4;
    in.first_trainable = -1;
    return in;
}

static ork_stream_plan *plan_of(const ork_plan_inputs *in) {
    ork_stream_plan *p = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_stream_plan_make(in, &p), ORK_OK);
    return p;
}

/* The toy on the CPU: allocator, graph, weights, adapters of kind (ORK_ADAPTER_*). */
typedef struct rig {
    ork_alloc *a;
    ork_graph *g;
    ork_wstore *ws;
    ork_lora_net *ln;
    ork_runner *r;
    ork_block_hooks hk;
} rig;

static ork_status rig_open(rig *x, int kind) {
    memset(x, 0, sizeof *x);
    const ork_backend *be = ork_cpu_backend();
    ork_graph_opts go = {.act_dtype = ORK_F32, .nthreads = 1};
    ORK_TRY(ork_alloc_create(be, 0, &x->a));
    ORK_TRY(ork_graph_create(be, x->a, &go, &x->g));
    ORK_TRY(ork_wstore_create_ex(x->a, be, &x->g->k, &g_toy.info, ORK_F32, NULL, &x->ws));
    ORK_TRY(toy_load(&g_toy, ork_wstore_sink(x->ws)));
    ORK_TRY(ork_wstore_check_complete(x->ws));
    ork_wstore_attach(x->ws, x->g);
    ork_lora_opts lo = {.rank = 4, .alpha = 4, .param_dt = ORK_F32, .seed = 7, .kind = kind, .lokr_factor = -1,
                        .lokr_full_rank = 1};
    ORK_TRY(ork_lora_create(x->a, be, &x->g->k, x->ws, &g_toy.info, &lo, &x->ln));
    static const ork_model_vtable vt = {.begin = toy_begin, .block = toy_block}; /* the runner keeps it */
    ORK_TRY(ork_runner_create(x->g, x->a, &vt, &g_toy, &g_toy.info, &x->r));
    ork_runner_set_first_trainable(x->r, 1);
    ork_wstore_hooks(x->ws, &x->hk);
    ork_runner_set_hooks(x->r, &x->hk);
    return ORK_OK;
}

static void rig_close(rig *x) {
    if (x->r) ork_runner_destroy(x->r);
    if (x->ln) ork_lora_destroy(x->ln);
    if (x->ws) ork_wstore_destroy(x->ws);
    if (x->g) ork_graph_destroy(x->g);
    if (x->a) ork_alloc_destroy(x->a);
}

/* ---- EMA ------------------------------------------------------------------------ */
static void test_ema(void) {
    rig x;
    CU_ASSERT_EQUAL_FATAL(rig_open(&x, ORK_ADAPTER_LORA), ORK_OK);
    ork_plan_inputs in = inputs();
    ork_stream_plan *p0 = plan_of(&in);
    CU_ASSERT_EQUAL_FATAL(p0->lora_params, ork_lora_params(x.ln)); /* the plan's LoRA is the one created */
    in.ema = 1;
    ork_stream_plan *p1 = plan_of(&in);
    /* a job holding what ork_train_ema_setup reads */
    ork_process_config pc;
    memset(&pc, 0, sizeof pc);
    pc.train.use_ema = 1;
    pc.train.ema_decay = 0.99;
    job j;
    memset(&j, 0, sizeof j);
    j.p = &pc;
    j.be = ork_cpu_backend();
    j.alloc = x.a;
    j.g = x.g;
    j.plan = p1;
    j.n_params = 2 * ork_lora_count(x.ln);
    ork_tensor *pt[64];
    CU_ASSERT_FATAL(j.n_params <= 64);
    for (int i = 0; i < ork_lora_count(x.ln); i++) {
        pt[2 * i] = ork_lora_at(x.ln, i)->down;
        pt[2 * i + 1] = ork_lora_at(x.ln, i)->up;
    }
    j.pt = pt;
    CU_ASSERT_EQUAL_FATAL(ork_train_ema_setup(&j), ORK_OK);
    size_t measured = ork_alloc_peak_tag(x.a, "ema");
    printf("\n  EMA: %lld LoRA parameters, allocated %zu bytes under \"ema\", the plan grows by %zu (EMA %zu)",
           (long long)p0->lora_params, measured, p1->total - p0->total, p1->ema);
    CU_ASSERT(measured > 0);
    CU_ASSERT_EQUAL(p1->total - p0->total, measured);
    CU_ASSERT_EQUAL(p1->ema, measured);
    ork_train_ema_free(&j);
    /* streamed: the shadows travel in the state records (host) */
    in.ema = 0;
    in.mode = ORK_OFFLOAD_AUTO;
    in.budget_gb = 64;
    in.allow_trainable_streaming = 2;
    ork_stream_plan *s0 = plan_of(&in);
    in.ema = 1;
    ork_stream_plan *s1 = plan_of(&in);
    CU_ASSERT_FATAL(s0->trainable_streamed && s1->trainable_streamed);
    CU_ASSERT_EQUAL(s1->host_pinned - s0->host_pinned, 4 * (size_t)s0->lora_params);
    CU_ASSERT(s1->ema > 0 && s1->ema < p1->ema); /* two blocks' shadows and the scratch on the device */
    ork_stream_plan_free(s0);
    ork_stream_plan_free(s1);
    ork_stream_plan_free(p0);
    ork_stream_plan_free(p1);
    rig_close(&x);
    printf("\n  ");
}

/* ---- LoKr ----------------------------------------------------------------------- */
/* One training step of the toy with adapters of kind: the allocator's peak over the step. */
static size_t step_peak(int kind) {
    rig x;
    CU_ASSERT_EQUAL_FATAL(rig_open(&x, kind), ORK_OK);
    const int C = g_toy.C;
    float xin[TOY_B * TOY_N * 8], tg[TOY_B * TOY_N * 8];
    for (int q = 0; q < TOY_B * TOY_N * C; q++) {
        xin[q] = sinf(0.37f * (float)q);
        tg[q] = cosf(0.11f * (float)q);
    }
    int64_t sh[3] = {TOY_B, TOY_N, C};
    const ork_tensor_api *ta = ork_tensor_api_table();
    ork_tensor *xt = NULL, *t = NULL;
    size_t base = ork_alloc_in_use(x.a, NULL);
    CU_ASSERT_EQUAL_FATAL(ta->from_host(x.g, ORK_F32, 3, sh, xin, &xt), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ta->from_host(x.g, ORK_F32, 3, sh, tg, &t), ORK_OK);
    ork_model_inputs mi = {.tokens = xt, .h_tokens = 3, .w_tokens = 4};
    float loss = 0;
    CU_ASSERT_EQUAL_FATAL(ork_runner_step(x.r, &mi, 1, toy_loss, t, &loss), ORK_OK);
    size_t peak = ork_arena_peak(x.g->arena);
    (void)base;
    rig_close(&x);
    return peak;
}

/* One linear (x (M, K) · W (N, K)ᵀ) with a LoKr adapter w1 (a, c), w2 (b, d), forward and
 * backward: its arena peak less the same op's without the adapter. */
static size_t op_transient(int64_t M, int64_t N, int64_t K, int64_t a, int64_t c) {
    const ork_backend *be = ork_cpu_backend();
    ork_alloc *al = NULL;
    ork_graph *g = NULL;
    ork_graph_opts go = {.act_dtype = ORK_F32, .nthreads = 1};
    CU_ASSERT_FATAL(ork_alloc_create(be, 0, &al) == ORK_OK && ork_graph_create(be, al, &go, &g) == ORK_OK);
    int64_t sx[2] = {M, K}, sw[2] = {N, K}, s1[2] = {a, c}, s2[2] = {N / a, K / c};
    ork_tensor *w, *w1, *w2;
    CU_ASSERT_FATAL(ork_tensor_new(al, "test", ORK_F32, 2, sw, 0, &w) == ORK_OK);
    CU_ASSERT_FATAL(ork_tensor_new(al, "test", ORK_F32, 2, s1, 1, &w1) == ORK_OK);
    CU_ASSERT_FATAL(ork_tensor_new(al, "test", ORK_F32, 2, s2, 1, &w2) == ORK_OK);
    const ork_tensor_api *ta = ork_tensor_api_table();
    size_t peak[2];
    for (int k = 0; k < 2; k++) {
        ork_lora lo = {.down = w1, .up = w2, .scale = 1.0f, .kind = ORK_ADAPTER_LOKR};
        w->lora = k ? &lo : NULL;
        CU_ASSERT_FATAL(ork_graph_reset(g) == ORK_OK);
        ork_arena_reset(g->arena);
        ork_graph_set_grad(g, 1);
        ork_tensor *x, *y = NULL, *dy;
        CU_ASSERT_FATAL(ta->empty(g, ORK_F32, 2, sx, &x) == ORK_OK);
        x->requires_grad = 1;
        CU_ASSERT_FATAL(ork_ops_table()->linear(g, x, w, NULL, &y) == ORK_OK);
        int64_t sy[2] = {M, N};
        CU_ASSERT_FATAL(ta->empty(g, ORK_F32, 2, sy, &dy) == ORK_OK);
        CU_ASSERT_FATAL(ork_backward_from(g, 1, &y, &dy) == ORK_OK);
        peak[k] = ork_arena_peak(g->arena);
        ork_tensor_free(w1->grad);
        ork_tensor_free(w2->grad);
        w1->grad = w2->grad = NULL;
    }
    w->lora = NULL;
    ork_tensor_free(w);
    ork_tensor_free(w1);
    ork_tensor_free(w2);
    ork_graph_destroy(g);
    ork_alloc_destroy(al);
    return peak[1] > peak[0] ? peak[1] - peak[0] : 0;
}

static void test_lokr(void) {
    /* the op alone: (N, K) = (96, 64) as w1 (8, 8) ⊗ w2 (12, 8), and one past the 64 MiB chunks */
    static const int64_t shapes[][5] = {{24, 96, 64, 8, 8}, {16, 4096, 2560, 2, 1}};
    for (int i = 0; i < 2; i++) {
        const int64_t *s = shapes[i];
        size_t got = op_transient(s[0], s[1], s[2], s[3], s[4]);
        size_t want = ork_plan_lokr_transient(s[1], s[2], s[3], s[4], 4);
        printf("\n  linear (%lld, %lld), w1 (%lld, %lld): the LoKr op's arena peak over the plain op's %zu bytes, "
               "the plan's transient %zu", (long long)s[1], (long long)s[2], (long long)s[3], (long long)s[4], got,
               want);
        CU_ASSERT(got > 0 && got <= want && got >= want - want / 20);
    }
    /* the toy: the plan's transient from lora.c's factorization over its linears, as plan_glue.c counts it */
    size_t t = 0;
    for (int i = 0; i < g_toy.info.n_weights; i++) {
        const ork_weight_decl *d = &g_toy.info.weights[i];
        char module[64];
        snprintf(module, sizeof module, "%.*s", (int)(strlen(d->name) - 7), d->name); /* less ".weight" */
        if (!(d->flags & ORK_WEIGHT_LINEAR) || d->ndim != 2 || !ork_model_lora_default_target(&g_toy.info, d, module))
            continue;
        int64_t a, b, c, dd;
        ork_lokr_factorization(d->shape[0], -1, &a, &b);
        ork_lokr_factorization(d->shape[1], -1, &c, &dd);
        size_t v = ork_plan_lokr_transient(d->shape[0], d->shape[1], a, c, 4);
        if (v > t) t = v;
    }
    size_t lora = step_peak(ORK_ADAPTER_LORA), lokr = step_peak(ORK_ADAPTER_LOKR);
    printf("\n  toy step: arena peak %zu bytes with LoRA, %zu with LoKr; the plan's adapter transient %zu", lora, lokr,
           t);
    CU_ASSERT(lokr > lora);
    CU_ASSERT(lokr - lora <= t);
    ork_plan_inputs in = inputs();
    ork_stream_plan *p0 = plan_of(&in);
    in.adapter_transient = t;
    ork_stream_plan *p1 = plan_of(&in);
    CU_ASSERT_EQUAL(p1->total - p0->total, t);
    ork_stream_plan_free(p0);
    ork_stream_plan_free(p1);
    printf("\n  ");
}

/* ---- DOP ------------------------------------------------------------------------ */
static void toy_inputs(float *xin, float *tg) {
    for (int q = 0; q < TOY_B * TOY_N * g_toy.C; q++) {
        xin[q] = sinf(0.37f * (float)q);
        tg[q] = cosf(0.11f * (float)q);
    }
}

/* Block i of the toy alone, grad off, from a carry of its input's shape: its arena peak. */
static size_t block_work(int i) {
    rig x;
    CU_ASSERT_EQUAL_FATAL(rig_open(&x, ORK_ADAPTER_LORA), ORK_OK);
    int64_t sh[3] = {TOY_B, TOY_N, i == 0 ? g_toy.C : H};
    ork_tensor *t = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_tensor_api_table()->empty(x.g, ORK_F32, 3, sh, &t), ORK_OK);
    size_t base = ork_arena_live(x.g->arena);
    ork_graph_set_grad(x.g, 0);
    ork_carry c;
    memset(&c, 0, sizeof c);
    c.n = 1;
    c.t[0] = t;
    if (x.hk.enter) CU_ASSERT_EQUAL_FATAL(x.hk.enter(x.hk.ctx, i), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(toy_block(&g_toy, x.g, i, &c), ORK_OK);
    if (x.hk.leave) CU_ASSERT_EQUAL_FATAL(x.hk.leave(x.hk.ctx, i), ORK_OK);
    size_t w = ork_arena_peak(x.g->arena) - base;
    rig_close(&x);
    return w;
}

/* The toy's prediction with grad off: ork_runner_forward (run = 1) or every
 * block straight on the arena, no region (run = 0, the reference); *peak: the
 * arena's peak over what the input took. */
static void toy_forward(int run, float *out, size_t *peak) {
    rig x;
    CU_ASSERT_EQUAL_FATAL(rig_open(&x, ORK_ADAPTER_LORA), ORK_OK);
    float xin[TOY_B * TOY_N * 8], tg[TOY_B * TOY_N * 8];
    toy_inputs(xin, tg);
    int64_t sh[3] = {TOY_B, TOY_N, g_toy.C};
    const ork_tensor_api *ta = ork_tensor_api_table();
    ork_tensor *xt = NULL, *pred = NULL;
    CU_ASSERT_EQUAL_FATAL(ta->from_host(x.g, ORK_F32, 3, sh, xin, &xt), ORK_OK);
    size_t base = ork_arena_live(x.g->arena);
    ork_model_inputs mi = {.tokens = xt, .h_tokens = 3, .w_tokens = 4};
    if (run) {
        CU_ASSERT_EQUAL_FATAL(ork_runner_forward(x.r, &mi, &pred), ORK_OK);
    } else {
        ork_graph_set_grad(x.g, 0);
        ork_carry c;
        CU_ASSERT_EQUAL_FATAL(toy_begin(&g_toy, x.g, &mi, &c), ORK_OK);
        for (int i = 0; i < NB; i++) {
            if (x.hk.enter) CU_ASSERT_EQUAL_FATAL(x.hk.enter(x.hk.ctx, i), ORK_OK);
            CU_ASSERT_EQUAL_FATAL(toy_block(&g_toy, x.g, i, &c), ORK_OK);
            if (x.hk.leave) CU_ASSERT_EQUAL_FATAL(x.hk.leave(x.hk.ctx, i), ORK_OK);
        }
        pred = c.t[0];
    }
    CU_ASSERT_EQUAL_FATAL(ork_tensor_numel(pred), TOY_B * TOY_N * g_toy.C);
    CU_ASSERT_EQUAL_FATAL(ta->to_host(x.g, pred, ORK_F32, out), ORK_OK);
    *peak = ork_arena_peak(x.g->arena) - base;
    rig_close(&x);
}

/* (b) the prior pass (ork_runner_forward) holds one block's working set at a
 * time plus the carry, and predicts bit for bit what the blocks do on their own. */
static void test_dop_prior(void) {
    size_t w = 0;
    for (int i = 0; i < NB; i++) {
        size_t b = block_work(i);
        if (b > w) w = b;
    }
    const size_t carry = (size_t)TOY_B * TOY_N * H * 4;
    float got[TOY_B * TOY_N * 8], ref[TOY_B * TOY_N * 8];
    size_t pk_run = 0, pk_ref = 0;
    toy_forward(1, got, &pk_run);
    toy_forward(0, ref, &pk_ref);
    printf("\n  no-grad forward: arena peak %zu bytes (every block on the arena: %zu); one block's working set %zu, "
           "a carry %zu", pk_run, pk_ref, w, carry);
    CU_ASSERT(pk_run <= w + carry);
    CU_ASSERT(pk_ref > w + carry); /* the check can fail: the whole forward does not fit under it */
    CU_ASSERT_EQUAL(memcmp(got, ref, sizeof got), 0);
    printf("\n  ");
}

/* One micro-batch of the toy as train.c runs it: with dop, the prior
 * (ork_runner_forward, to the host and up again as dop.c does), the step, and
 * the preservation step against the prior; without, the step. *peak: the
 * arena's peak plus what ork_runner_forward's carries took (their tag). */
static void dop_micro(int dop, size_t *peak, float *loss) {
    rig x;
    CU_ASSERT_EQUAL_FATAL(rig_open(&x, ORK_ADAPTER_LORA), ORK_OK);
    float xin[TOY_B * TOY_N * 8], tg[TOY_B * TOY_N * 8], prior[TOY_B * TOY_N * 8];
    toy_inputs(xin, tg);
    int64_t sh[3] = {TOY_B, TOY_N, g_toy.C};
    const ork_tensor_api *ta = ork_tensor_api_table();
    ork_tensor *xt = NULL, *t = NULL, *pt = NULL, *pred = NULL;
    CU_ASSERT_EQUAL_FATAL(ta->from_host(x.g, ORK_F32, 3, sh, xin, &xt), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ta->from_host(x.g, ORK_F32, 3, sh, tg, &t), ORK_OK);
    ork_model_inputs mi = {.tokens = xt, .h_tokens = 3, .w_tokens = 4};
    if (dop) {
        CU_ASSERT_EQUAL_FATAL(ork_runner_forward(x.r, &mi, &pred), ORK_OK);
        CU_ASSERT_EQUAL_FATAL(ta->to_host(x.g, pred, ORK_F32, prior), ORK_OK);
    }
    loss[0] = loss[1] = 0;
    CU_ASSERT_EQUAL_FATAL(ork_runner_step(x.r, &mi, 1, toy_loss, t, &loss[0]), ORK_OK);
    if (dop) {
        CU_ASSERT_EQUAL_FATAL(ta->from_host(x.g, ORK_F32, 3, sh, prior, &pt), ORK_OK);
        CU_ASSERT_EQUAL_FATAL(ork_runner_step(x.r, &mi, 1, toy_loss, pt, &loss[1]), ORK_OK);
    }
    *peak = ork_arena_peak(x.g->arena) + ork_alloc_peak_tag(x.a, "forward_carry");
    rig_close(&x);
}

/* (a) a micro-batch with DOP grows the peak by no more than the plan's DOP term. */
static void test_dop_plan(void) {
    size_t p0 = 0, p1 = 0;
    float l0[2], l1[2];
    dop_micro(0, &p0, l0);
    dop_micro(1, &p1, l1);
    ork_plan_inputs in = inputs();
    ork_stream_plan *q0 = plan_of(&in);
    in.dop = 1;
    ork_stream_plan *q1 = plan_of(&in);
    printf("\n  toy micro-batch: peak %zu bytes, %zu with DOP's prior and preservation step; the plan's DOP term %zu",
           p0, p1, q1->dop);
    CU_ASSERT_EQUAL(q0->dop, 0);
    CU_ASSERT(q1->dop > 0);
    CU_ASSERT_EQUAL(q1->total - q0->total, q1->dop);
    CU_ASSERT(p1 > p0);
    CU_ASSERT(p1 - p0 <= q1->dop);
    CU_ASSERT(l0[0] == l1[0]); /* the prior pass leaves the step's loss as it was */
    /* no optimizer step ran and the LoRA's up starts at zero: the preservation
     * step's prediction is the prior's bit for bit (the prior pass computes what
     * the checkpointed step does) */
    CU_ASSERT(l1[1] == 0.0f);
    ork_stream_plan_free(q0);
    ork_stream_plan_free(q1);
    printf("\n  ");
}

/* ---- the print ------------------------------------------------------------------- */
static int vram_line_has(const ork_stream_plan *p, const char *what) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return -1;
    ork_stream_plan_print(p, f);
    fclose(f);
    char *v = strstr(buf, "  VRAM: "), *e = v ? strchr(v, '\n') : NULL;
    if (e) *e = 0;
    int r = v && strstr(v, what) != NULL;
    free(buf);
    return r;
}

static void test_print(void) {
    ork_plan_inputs in = inputs();
    ork_stream_plan *p = plan_of(&in);
    CU_ASSERT_EQUAL(vram_line_has(p, "EMA"), 0);
    CU_ASSERT_EQUAL(vram_line_has(p, "adapter transient"), 0);
    CU_ASSERT_EQUAL(vram_line_has(p, "DOP"), 0);
    ork_stream_plan_free(p);
    in.ema = 1;
    in.adapter_transient = 3 << 20;
    in.dop = 1;
    p = plan_of(&in);
    CU_ASSERT_EQUAL(vram_line_has(p, ", EMA "), 1);
    CU_ASSERT_EQUAL(vram_line_has(p, "adapter transient 3.0 MiB"), 1);
    CU_ASSERT_EQUAL(vram_line_has(p, ", DOP prior pass "), 1);
    ork_stream_plan_free(p);
}

static const ork_test_case cases[] = {
    {"EMA: the plan grows by the shadows ema.c allocates", test_ema},
    {"LoKr: the plan's transient against the op's and a step's peaks", test_lokr},
    {"DOP: the prior forward holds one block's working set and the carry", test_dop_prior},
    {"DOP: a micro-batch's peak grows by no more than the plan's term", test_dop_plan},
    {"the VRAM line names them only when counted", test_print},
    {NULL, NULL},
};
ORK_TEST_MAIN("plan_extras", setup, teardown, cases)
