/* tests/stream/test_trainable_stream.c — the trainable-state streaming runtime
 * (stream/trainable_stream.h) on the CPU backend with both CPU copy modes: a 5-block
 * pass (block 0 without parameters) trained N steps with a momentum-SGD step
 * callback, against the same training with every parameter resident:
 * bitwise equal without clipping; with clipping, equal to the resident run
 * that clips with the PREVIOUS step's global norm (step 1 unclipped) and
 * different from exact clipping; save/resume through the host records and
 * the saved previous norm; a block with non-finite gradients is not stepped. */
#include "ork_test.h"

#include "numerics/half.h"
#include "stream/streamer.h"
#include "stream/trainable_stream.h"
#include "tensor/backend.h"

enum { NB = 5, NP = 8, STEPS = 4 };
static const int p_block[NP] = {1, 1, 2, 2, 3, 3, 4, 4};
static const int64_t p_numel[NP] = {12, 7, 33, 5, 64, 9, 17, 128};

typedef struct sim {
    float data[NP][128], mom[NP][128];
    int nan_block; /* inject NaN gradients into this block at step nan_step */
    int nan_step, step;
} sim;

/* the "backward" of block b at step s: gradients as a function of the weights */
static float grad_of(int i, int e, float w, int s) { return 0.5f * w + 0.25f * (float)((i * 7 + e * 3 + s) % 11) - 1.0f; }

static void sgd(float *w, float *m, const float *g, int64_t n, float scale) {
    for (int64_t e = 0; e < n; e++) {
        float gg = g[e] * scale;
        m[e] = 0.9f * m[e] + gg;
        w[e] -= 0.05f * m[e];
    }
}

/* ids: each parameter's run-wide index (the optimizer keys its rounding on it),
 * so each must name a parameter of this block with this size */
static ork_status step_cb(void *ctx, int block, ork_opt_param *ps, const int32_t *ids, int n) {
    (void)ctx;
    for (int q = 0; q < n; q++) {
        if (ids[q] < 0 || ids[q] >= NP || p_block[ids[q]] != block || p_numel[ids[q]] != ps[q].numel)
            return ORK_E_INTERNAL;
        sgd(ps[q].data, ps[q].state, ps[q].grad, ps[q].numel, 1.0f);
    }
    return ORK_OK;
}

static void init(sim *r) {
    memset(r, 0, sizeof *r);
    r->nan_block = -1;
    for (int i = 0; i < NP; i++)
        for (int e = 0; e < p_numel[i]; e++) r->data[i][e] = 0.01f * (float)((i * 13 + e * 5) % 17) - 0.08f;
}

/* resident reference: rule 0 exact clipping, 1 previous-norm clipping */
static void resident(sim *r, int steps, double max_norm, int rule, double *prev) {
    for (int s = 1; s <= steps; s++) {
        float g[NP][128];
        double sum = 0;
        for (int i = 0; i < NP; i++) { /* as the backend's reduce: per tensor in double, stored F32 */
            double acc = 0;
            for (int e = 0; e < p_numel[i]; e++) {
                g[i][e] = grad_of(i, e, r->data[i][e], s);
                acc += (double)g[i][e] * (double)g[i][e];
            }
            sum += (float)acc;
        }
        double nm = sqrt(sum), use = rule ? *prev : nm;
        float gs = (max_norm > 0 && use > max_norm) ? (float)(max_norm / (use + 1e-6)) : 1.0f;
        for (int i = 0; i < NP; i++) sgd(r->data[i], r->mom[i], g[i], p_numel[i], gs);
        *prev = nm;
    }
}

static int g_chunks; /* write-back chunks per slot (0: ORK_TSTREAM_CHUNKS_DEFAULT) */
static int g_no_ahead; /* ork_tstream_set_ahead(z, 0): the next pass's first loads at its pass_begin */
static ork_tstream *mk(ork_copy_engine **ce, ork_ce_cpu_mode mode, ork_alloc **a, double max_norm, int slots,
                    ork_dtype shadow) {
    const ork_backend *be = ork_cpu_backend();
    static ork_kctx k;
    memset(&k, 0, sizeof k);
    CU_ASSERT_EQUAL(ork_alloc_create(be, 0, a), ORK_OK);
    CU_ASSERT_EQUAL(ork_copy_engine_create_cpu(mode, ork_tstream_n_events(slots), ce), ORK_OK);
    ork_dtype dt[NP];
    size_t sb[NP];
    for (int i = 0; i < NP; i++) { dt[i] = ORK_F32; sb[i] = (size_t)p_numel[i] * 4; }
    ork_tstream_opts o = {NB, NP, p_block, dt, p_numel, sb, slots, 0, max_norm, step_cb, NULL, shadow, g_chunks};
    ork_tstream *z = NULL;
    CU_ASSERT_EQUAL(ork_tstream_create(*ce, *a, be, &k, &o, &z), ORK_OK);
    /* slots of >= 4 aligned units: the chunked hand-over has several chunks */
    if (z) CU_ASSERT(ork_tstream_get_layout(z)->max_block_bytes >= 4 * ORK_STREAM_ALIGN);
    if (z) ork_tstream_set_ahead(z, !g_no_ahead);
    return z;
}

static void put(ork_tstream *z, const sim *r) {
    const ork_tstream_layout *L = ork_tstream_get_layout(z);
    for (int i = 0; i < NP; i++) {
        char *h = ork_tstream_host(z, L->params[i].block);
        memcpy(h + L->params[i].data_offset, r->data[i], L->params[i].data_bytes);
        memcpy(h + L->params[i].state_offset, r->mom[i], L->params[i].state_bytes);
    }
}
static void get(ork_tstream *z, sim *r) {
    CU_ASSERT_EQUAL(ork_tstream_sync(z), ORK_OK);
    const ork_tstream_layout *L = ork_tstream_get_layout(z);
    for (int i = 0; i < NP; i++) {
        char *h = ork_tstream_host(z, L->params[i].block);
        memcpy(r->data[i], h + L->params[i].data_offset, L->params[i].data_bytes);
        memcpy(r->mom[i], h + L->params[i].state_offset, L->params[i].state_bytes);
    }
}

/* A forward visit of block b with shadows: each F32 parameter reads as BF16,
 * and its bytes are the host record's current values rounded to nearest even
 * (the initial shadows from ork_tstream_refresh_shadows, later ones from the
 * device's cast after each step, written back with the record). Block 4's
 * forward is its stepping visit (merged): F32. */
static void check_shadows(ork_tstream *z, int b) {
    const ork_tstream_layout *L = ork_tstream_get_layout(z);
    /* the host records as they will be once every queued copy is done: a load
     * that ran ahead of its block's write-back holds older shadows than these */
    CU_ASSERT_EQUAL(ork_tstream_sync(z), ORK_OK);
    for (int i = 0; i < NP; i++) {
        if (p_block[i] != b) continue;
        if (b == NB - 1) { CU_ASSERT_EQUAL(ork_tstream_data_dtype(z, i), ORK_F32); continue; }
        CU_ASSERT_EQUAL_FATAL(ork_tstream_data_dtype(z, i), ORK_BF16);
        const float *host = (const float *)((const char *)ork_tstream_host(z, b) + L->params[i].data_offset);
        uint16_t want[64];
        CU_ASSERT_FATAL(p_numel[i] <= 64);
        ork_bf16_from_f32(host, (size_t)p_numel[i], want);
        CU_ASSERT_EQUAL(memcmp(ork_tstream_data(z, i), want, (size_t)p_numel[i] * 2), 0);
    }
}

/* one training pass: forward 0..4, backward 4..1 (the runner's order) */
static void streamed(ork_tstream *z, sim *r, int steps, float *applied, int shadows) {
    int order[] = {0, 1, 2, 3, 4, 4, 3, 2, 1};
    for (int s = 1; s <= steps; s++) {
        r->step++;
        CU_ASSERT_EQUAL_FATAL(ork_tstream_pass_begin(z, order, 9), ORK_OK);
        for (int b = 0; b < NB; b++) {
            CU_ASSERT_EQUAL_FATAL(ork_tstream_enter(z, b), ORK_OK);
            if (shadows) check_shadows(z, b);
            CU_ASSERT_EQUAL_FATAL(ork_tstream_leave(z, b), ORK_OK);
        }
        for (int b = NB - 1; b >= 1; b--) {
            CU_ASSERT_EQUAL_FATAL(ork_tstream_enter(z, b), ORK_OK);
            for (int i = 0; i < NP; i++) {
                if (p_block[i] != b) continue;
                float *w = ork_tstream_data(z, i), *g = ork_tstream_grad(z, i);
                CU_ASSERT_PTR_NOT_NULL_FATAL(w);
                for (int e = 0; e < p_numel[i]; e++)
                    g[e] += (b == r->nan_block && r->step == r->nan_step) ? NAN : grad_of(i, e, w[e], r->step);
            }
            CU_ASSERT_EQUAL_FATAL(ork_tstream_leave(z, b), ORK_OK);
            CU_ASSERT_EQUAL_FATAL(ork_tstream_grads_ready(z, b), ORK_OK);
        }
        CU_ASSERT_EQUAL_FATAL(ork_tstream_pass_end(z), ORK_OK);
        double nm;
        int sk;
        CU_ASSERT_EQUAL(ork_tstream_step_end(z, &nm, &applied[s - 1], &sk), ORK_OK);
        /* the non-finite block is named and counted on its step only (the flags reset) */
        CU_ASSERT_EQUAL(sk, r->nan_block >= 1 && r->step == r->nan_step ? 1 : 0);
    }
}

static void run_pair_sh(double max_norm, ork_ce_cpu_mode mode, int slots, sim *out, float *applied, int shadows);
static void run_pair(double max_norm, ork_ce_cpu_mode mode, int slots, sim *out, float *applied) {
    run_pair_sh(max_norm, mode, slots, out, applied, 0);
}

static int same(const sim *a, const sim *b) {
    for (int i = 0; i < NP; i++)
        if (memcmp(a->data[i], b->data[i], (size_t)p_numel[i] * 4) || memcmp(a->mom[i], b->mom[i], (size_t)p_numel[i] * 4))
            return 0;
    return 1;
}

/* Bytes a visit of block b loads: a forward-only one (fwd), the stepping one (step). */
static void visit_bytes(ork_tstream *z, int shadows, size_t *fwd, size_t *step) {
    const ork_tstream_layout *L = ork_tstream_get_layout(z);
    for (int b = 0; b < NB; b++) {
        size_t data0 = SIZE_MAX, state0 = SIZE_MAX;
        for (int i = 0; i < NP; i++)
            if (L->params[i].block == b) {
                if (L->params[i].data_offset < data0) data0 = L->params[i].data_offset;
                if (L->params[i].state_offset < state0) state0 = L->params[i].state_offset;
                CU_ASSERT_EQUAL(L->params[i].shadow_bytes, shadows ? (size_t)p_numel[i] * 2 : 0);
            }
        fwd[b] = step[b] = 0;
        if (data0 == SIZE_MAX) continue; /* block 0: no parameters */
        fwd[b] = shadows ? data0 : state0;
        step[b] = L->block_bytes[b] - (shadows ? data0 : 0);
    }
}

static void run_pair_sh(double max_norm, ork_ce_cpu_mode mode, int slots, sim *out, float *applied, int shadows) {
    ork_copy_engine *ce; ork_alloc *a;
    ork_tstream *z = mk(&ce, mode, &a, max_norm, slots, shadows ? ORK_BF16 : 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(z);
    sim r;
    init(&r);
    put(z, &r);
    ork_tstream_refresh_shadows(z);
    streamed(z, &r, STEPS, applied, shadows);
    /* bytes in: a visit that does not step its block (the forward pass, blocks
     * 0..3) loads the shadows, or without them the parameter part, never the
     * state; block 4's merged visit and the backward's 3..1 load parameters +
     * state (not the shadows, which the step rewrites) */
    size_t want = 0, fwd[NB], step[NB];
    visit_bytes(z, shadows, fwd, step);
    for (int b = 0; b < NB; b++) want += (b < NB - 1 ? fwd[b] : 0) + (b >= 1 ? step[b] : 0);
    /* and, issued ahead at the last pass's end for a pass that never came, the
     * first `slots` visits' loads: blocks 1, 2, 3 forward, 4 stepping (merged) */
    size_t ahead = 0;
    for (int b = 1; !g_no_ahead && b <= slots && b < NB; b++) ahead += b < NB - 1 ? fwd[b] : step[b];
    /* but the backward's last stepped blocks (1, 2, 3 — as many as there are
     * slots) start the next pass's forward: found in their slots, not loaded
     * (block 4's is a stepping visit: loaded) */
    int nr = slots < NB - 2 ? slots : NB - 2;
    size_t found = 0;
    for (int b = 1; b <= nr; b++) found += fwd[b];
    CU_ASSERT_EQUAL(ork_tstream_reused(z), (uint64_t)(STEPS - 1 + !g_no_ahead) * (uint64_t)nr);
    CU_ASSERT_EQUAL(ork_ce_bytes(ce, ORK_LANE_H2D), (uint64_t)STEPS * want + ahead - (uint64_t)(STEPS - 1 + !g_no_ahead) * found);
    get(z, out);
    ork_tstream_destroy(z);
    ork_copy_engine_destroy(ce);
    ork_alloc_destroy(a);
}

/* Without clipping, streamed == resident bitwise: both copy modes, 2..4 slots,
 * whole-record and chunked hand-overs (1, 7 and 32 pieces), the next pass's
 * first loads issued ahead (at the pass's end) or not. */
static void bitwise_vs_resident(int shadows) {
    for (int ah = 0; ah < 2; ah++)
        for (int mode = 0; mode < 2; mode++)
            for (int slots = 2; slots <= 4; slots++)
                for (int c = 0; c < 3; c++) { /* whole records, an uneven split, the most chunks */
                    g_chunks = c == 0 ? 1 : c == 1 ? 7 : ORK_TSTREAM_CHUNKS;
                    g_no_ahead = ah;
                    sim s, ref;
                    float ap[STEPS];
                    run_pair_sh(0, (ork_ce_cpu_mode)mode, slots, &s, ap, shadows);
                    init(&ref);
                    double prev = 0;
                    resident(&ref, STEPS, 0, 0, &prev);
                    CU_ASSERT(same(&s, &ref));
                }
    g_chunks = 0;
    g_no_ahead = 0;
}

static void bitwise_no_clip(void) { bitwise_vs_resident(0); }

/* BF16 shadows for the forward visits (check_shadows inside), fewer bytes in,
 * and the same parameters and state as the resident run */
static void bitwise_with_shadows(void) { bitwise_vs_resident(1); }

static void clip_previous_norm(void) {
    sim s, exact, prevrule;
    float ap[STEPS];
    run_pair(1.0, ORK_CE_DEFERRED, 2, &s, ap);
    init(&exact);
    init(&prevrule);
    double p1 = 0, p2 = 0;
    resident(&exact, STEPS, 1.0, 0, &p1);
    resident(&prevrule, STEPS, 1.0, 1, &p2);
    CU_ASSERT(same(&s, &prevrule));   /* the documented rule */
    CU_ASSERT(!same(&s, &exact));     /* and it is not exact clipping */
    CU_ASSERT_EQUAL(ap[0], 1.0f);     /* step 1 unclipped */
    CU_ASSERT(ap[1] < 1.0f);          /* later steps: scaled by the previous norm */
}

/* The loads issued ahead at a pass's end: dropped by ork_tstream_sync (the host
 * may write the records next) and issued again at pass_begin; not taken by a
 * pass that starts otherwise (a forward pass over blocks 2..4), which loads
 * its own or finds them in their slots; the parameters as the resident run's
 * either way. */
static void ahead_dropped_or_replaced(void) {
    for (int mode = 0; mode < 2; mode++) {
        ork_copy_engine *ce; ork_alloc *a;
        ork_tstream *z = mk(&ce, (ork_ce_cpu_mode)mode, &a, 0, 2, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(z);
        sim r, out, ref;
        init(&r);
        put(z, &r);
        ork_tstream_refresh_shadows(z);
        size_t fwd[NB], step[NB];
        visit_bytes(z, 0, fwd, step);
        float ap[3];
        streamed(z, &r, 1, ap, 0);
        uint64_t b1 = ork_ce_bytes(ce, ORK_LANE_H2D);
        streamed(z, &r, 1, ap + 1, 0); /* takes the loads issued ahead */
        uint64_t b2 = ork_ce_bytes(ce, ORK_LANE_H2D);
        /* step 1: all its loads, then 1 and 2 ahead; step 2 took those: the same less them */
        CU_ASSERT_EQUAL(b1 - (b2 - b1), fwd[1] + fwd[2]);
        CU_ASSERT_EQUAL(ork_tstream_sync(z), ORK_OK); /* drops the new ones */
        streamed(z, &r, 1, ap + 2, 0);          /* loads 1 and 2 again at its pass_begin */
        uint64_t b3 = ork_ce_bytes(ce, ORK_LANE_H2D);
        CU_ASSERT_EQUAL(b3 - b2, b1);
        int fo[3] = {2, 3, 4};
        CU_ASSERT_EQUAL_FATAL(ork_tstream_pass_begin(z, fo, 3), ORK_OK);
        uint64_t b4 = ork_ce_bytes(ce, ORK_LANE_H2D);
        /* not the 1 and 2 issued ahead: its own two, of which block 2 is still in
         * its slot from the backward (found, not loaded) */
        CU_ASSERT_EQUAL(b4 - b3, fwd[3]);
        for (int q = 0; q < 3; q++) {
            CU_ASSERT_EQUAL_FATAL(ork_tstream_enter(z, fo[q]), ORK_OK);
            CU_ASSERT_EQUAL_FATAL(ork_tstream_leave(z, fo[q]), ORK_OK);
        }
        CU_ASSERT_EQUAL(ork_tstream_pass_end(z), ORK_OK);
        get(z, &out);
        init(&ref);
        double prev = 0;
        resident(&ref, 3, 0, 0, &prev);
        CU_ASSERT(same(&out, &ref)); /* the forward pass steps nothing */
        ork_tstream_destroy(z);
        ork_copy_engine_destroy(ce);
        ork_alloc_destroy(a);
    }
}

static void resume(void) {
    /* 2 steps, save host records + previous norm, new runtime, 2 more == 4 steps */
    sim full;
    float ap[STEPS];
    run_pair(1.0, ORK_CE_EAGER, 2, &full, ap);
    ork_copy_engine *ce; ork_alloc *a;
    ork_tstream *z = mk(&ce, ORK_CE_EAGER, &a, 1.0, 2, 0);
    sim r, saved;
    init(&r);
    put(z, &r);
    streamed(z, &r, 2, ap, 0);
    get(z, &saved);
    double pn = ork_tstream_prev_norm(z);
    ork_tstream_destroy(z); ork_copy_engine_destroy(ce); ork_alloc_destroy(a);
    z = mk(&ce, ORK_CE_DEFERRED, &a, 1.0, 3, 0);
    put(z, &saved);
    ork_tstream_set_prev_norm(z, pn);
    saved.step = 2;
    saved.nan_block = -1;
    streamed(z, &saved, 2, ap, 0);
    sim out;
    get(z, &out);
    CU_ASSERT(same(&out, &full));
    ork_tstream_destroy(z); ork_copy_engine_destroy(ce); ork_alloc_destroy(a);
}

/* The next pass's first forward visits find the backward's last stepped blocks
 * (1 and 2) in their slots, their shadows current (check_shadows) — until the
 * host writes the records between passes (after ork_tstream_sync): then the slots
 * are loaded again and read the new values. Both copy-engine modes. */
static void found_until_host_writes(void) {
    for (int mode = 0; mode < 2; mode++) {
        ork_copy_engine *ce; ork_alloc *a;
        ork_tstream *z = mk(&ce, (ork_ce_cpu_mode)mode, &a, 0, 2, ORK_BF16);
        CU_ASSERT_PTR_NOT_NULL_FATAL(z);
        sim r;
        float ap[2];
        init(&r);
        put(z, &r);
        ork_tstream_refresh_shadows(z);
        streamed(z, &r, 1, ap, 1);
        uint64_t n0 = ork_tstream_reused(z);
        streamed(z, &r, 1, ap, 1); /* blocks 1 and 2 found (issued ahead at the last pass's end) */
        CU_ASSERT_EQUAL(ork_tstream_reused(z), n0 + 2);
        get(z, &r);
        for (int i = 0; i < NP; i++)
            for (int e = 0; e < p_numel[i]; e++) r.data[i][e] += 0.375f;
        put(z, &r);
        ork_tstream_refresh_shadows(z);
        uint64_t n1 = ork_tstream_reused(z);
        streamed(z, &r, 1, ap + 1, 1); /* check_shadows: the new values, loaded */
        CU_ASSERT_EQUAL(ork_tstream_reused(z), n1 + 2); /* only at its end, for the next pass */
        ork_tstream_destroy(z); ork_copy_engine_destroy(ce); ork_alloc_destroy(a);
    }
}

/* Undone on the device (restore_if_nonfinite from the host record), in both
 * copy-engine modes: DEFERRED shows a restore reading a host record that a
 * write-back had not yet brought up to date. */
static void nonfinite_block_mode(ork_ce_cpu_mode mode, int nan_step) {
    ork_copy_engine *ce; ork_alloc *a;
    /* the reference: the steps before the non-finite one, all finite */
    sim before, after, r;
    init(&before);
    if (nan_step > 1) {
        ork_tstream *z0 = mk(&ce, mode, &a, 0, 2, 0);
        put(z0, &before);
        float ap0[4];
        streamed(z0, &before, nan_step - 1, ap0, 0);
        get(z0, &before);
        ork_tstream_destroy(z0); ork_copy_engine_destroy(ce); ork_alloc_destroy(a);
    }
    ork_tstream *z = mk(&ce, mode, &a, 0, 2, 0);
    init(&r);
    put(z, &r);
    r.nan_block = 3;
    r.nan_step = nan_step;
    float ap[4];
    streamed(z, &r, nan_step, ap, 0);
    get(z, &after);
    for (int i = 0; i < NP; i++) {
        int eq = !memcmp(after.data[i], before.data[i], (size_t)p_numel[i] * 4);
        CU_ASSERT(p_block[i] == 3 ? eq : !eq);
    }
    ork_tstream_destroy(z); ork_copy_engine_destroy(ce); ork_alloc_destroy(a);
}
static void nonfinite_block(void) {
    for (int nan_step = 1; nan_step <= 2; nan_step++) {
        nonfinite_block_mode(ORK_CE_EAGER, nan_step);
        nonfinite_block_mode(ORK_CE_DEFERRED, nan_step);
    }
}

static const ork_test_case cases[] = {{"bitwise_without_clipping", bitwise_no_clip},
                                      {"bf16_shadows_for_forward_visits", bitwise_with_shadows},
                                      {"clipping_uses_previous_norm", clip_previous_norm},
                                      {"resume_from_host_records", resume},
                                      {"loads_ahead_dropped_or_replaced", ahead_dropped_or_replaced},
                                      {"found_in_slots_until_host_writes", found_until_host_writes},
                                      {"nonfinite_block_not_stepped", nonfinite_block},
                                      {NULL, NULL}};
ORK_TEST_MAIN("stream_trainable", NULL, NULL, cases)
