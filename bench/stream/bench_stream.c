/* bench/stream/bench_stream.c — block streaming at FLUX.1-dev size on the GPU.
 *
 * FLUX.1-dev's 59 blocks (tests/stream/flux_shapes.h: BF16 weights, packed as
 * the weight store packs them) with constant weights; each block's compute is
 * emulated by its linears as cuBLASLt GEMMs at 1024^2 (4096 image + 512 text
 * tokens; modulation linears on one token): forward once, then in reverse
 * recompute + dX (2 GEMMs per linear) for blocks >= 1. For each VRAM budget
 * (24, 16, 12 GiB by default) the planner (auto) picks the streamed blocks;
 * the bench measures:
 *   resident step  (everything on the device; the H200 holds it all),
 *   streamed step  (the plan's blocks through the ring),
 *   transfer only  (the same pass with no compute),
 *   achieved H2D GB/s (transfer only) and D2H GB/s (slot -> pinned, D2H lane),
 *   peak VRAM (the allocator's in-use high water: weights + slots + buffers),
 *   overlap efficiency = max(resident, transfer only) / streamed,
 * next to the planner's prediction. Usage: bench_stream [steps] [budget_gib ...]
 * Without CUDA it prints a line and exits 0. */
#include "stream/copy_engine.h"
#include "stream/plan.h"
#include "stream/streamer.h"
#include "tensor/alloc.h"
#include "tensor/graph.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef ORAKUL_HAVE_CUDA
#include "flux_shapes.h"

int ork_cuda_device_count(void);

static fx_model g_fx;
static const int64_t N_IMG = 4096, N_TXT = 512;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int64_t tokens_for(const char *name) {
    if (strstr(name, "mod") || strstr(name, "time_in") || strstr(name, "vector_in") || strstr(name, "guidance_in")) return 1;
    if (strstr(name, "txt")) return N_TXT;
    if (strstr(name, "img") || strstr(name, "final_layer")) return N_IMG;
    return N_IMG + N_TXT;
}

typedef struct bench {
    const ork_backend *be;
    ork_alloc *a;
    ork_graph *g;
    ork_copy_engine *ce;
    ork_streamer *st;
    uint8_t streamed[FX_BLOCKS];
    size_t bytes[FX_BLOCKS];
    ork_stream_rec rec[FX_MAXW];
    void *res[FX_BLOCKS];  /* resident block regions */
    void *x, *y;           /* activations */
    size_t peak;
} bench;

static void track(bench *b) {
    size_t u = ork_alloc_in_use(b->a, NULL);
    if (u > b->peak) b->peak = u;
}

static ork_status setup(bench *b, const uint8_t *streamed) {
    memset(b, 0, sizeof *b);
    b->be = ork_cuda_backend();
    ORK_TRY(ork_alloc_create(b->be, 0, &b->a));
    ork_graph_opts go = {0};
    go.act_dtype = ORK_BF16;
    ORK_TRY(ork_graph_create(b->be, b->a, &go, &b->g));
    ORK_TRY(ork_copy_engine_create(b->be, &b->g->k, 8, &b->ce));
    memcpy(b->streamed, streamed, FX_BLOCKS);
    for (int i = 0; i < g_fx.info.n_weights; i++) {
        const ork_weight_decl *d = &g_fx.w[i];
        size_t nb = (size_t)d->shape[0] * (d->ndim == 2 ? (size_t)d->shape[1] : 1) * ((d->flags & ORK_WEIGHT_NORM) ? 4 : 2);
        ork_stream_rec_add(&b->bytes[d->block], nb, 0, &b->rec[i]);
    }
    ork_streamer_opts so = {.n_blocks = FX_BLOCKS, .streamed = b->streamed, .block_bytes = b->bytes, .n_slots = 2};
    ORK_TRY(ork_streamer_create(b->ce, b->a, &so, &b->st));
    void *pattern = malloc(b->bytes[1] + 1);
    if (!pattern) return ORK_E_NOMEM;
    uint16_t one = 0x3c00; /* bf16 1/128-ish scale values: finite, no denormals */
    for (size_t q = 0; q + 1 < b->bytes[1]; q += 2) memcpy((uint8_t *)pattern + q, &one, 2);
    ork_status s = ORK_OK;
    for (int k = 0; s == ORK_OK && k < FX_BLOCKS; k++) {
        size_t sz = b->bytes[k];
        if (b->streamed[k]) {
            uint8_t *h = ork_streamer_host(b->st, k);
            for (size_t off = 0; off < sz; off += b->bytes[1]) memcpy(h + off, pattern, sz - off < b->bytes[1] ? sz - off : b->bytes[1]);
        } else {
            s = ork_alloc_get(b->a, sz, "weights", &b->res[k]);
            for (size_t off = 0; s == ORK_OK && off < sz; off += b->bytes[1])
                s = b->be->memcpy_h2d(&b->g->k, (uint8_t *)b->res[k] + off, pattern, sz - off < b->bytes[1] ? sz - off : b->bytes[1]);
            if (s == ORK_OK) s = b->be->sync(&b->g->k);
        }
    }
    free(pattern);
    size_t act = (size_t)(N_IMG + N_TXT) * 21504 * 2;
    if (s == ORK_OK) s = ork_alloc_get(b->a, act, "activations", &b->x);
    if (s == ORK_OK) s = ork_alloc_get(b->a, act, "activations", &b->y);
    if (s == ORK_OK) s = b->be->fill(&b->g->k, (int64_t)(act / 2), 0.01f, b->x, ORK_BF16);
    track(b);
    return s;
}

static void teardown(bench *b) {
    if (b->g) (void)ork_graph_sync(b->g);
    ork_streamer_destroy(b->st);
    for (int k = 0; k < FX_BLOCKS; k++)
        if (b->res[k]) ork_alloc_put(b->a, b->res[k]);
    if (b->x) ork_alloc_put(b->a, b->x);
    if (b->y) ork_alloc_put(b->a, b->y);
    ork_copy_engine_destroy(b->ce);
    ork_graph_destroy(b->g);
    ork_alloc_destroy(b->a);
}

/* The block's linears as GEMMs: y (tok, out) = x (tok, in) · Wᵀ; times reps. */
static ork_status block_compute(bench *b, int k, const uint8_t *base, int reps) {
    for (int i = 0; i < g_fx.info.n_weights; i++) {
        const ork_weight_decl *d = &g_fx.w[i];
        if (d->block != k || !(d->flags & ORK_WEIGHT_LINEAR)) continue;
        for (int r = 0; r < reps; r++) {
            ork_gemm_desc gd = {0};
            int dx = r == 1; /* the backward's dX: x (tok, in) = dy (tok, out) · W */
            gd.ta = 0;
            gd.tb = dx ? 0 : 1;
            gd.M = tokens_for(d->name);
            gd.N = dx ? d->shape[1] : d->shape[0];
            gd.K = dx ? d->shape[0] : d->shape[1];
            gd.batch = 1;
            gd.alpha = 1.0f;
            gd.A = b->x; gd.adt = ORK_BF16; gd.lda = gd.K;
            gd.B = base + b->rec[i].offset; gd.bdt = ORK_BF16; gd.ldb = dx ? d->shape[1] : d->shape[1];
            gd.C = b->y; gd.cdt = ORK_BF16; gd.ldc = gd.N;
            ORK_TRY(b->be->gemm(&b->g->k, &gd));
        }
    }
    return ORK_OK;
}

/* One step's pass; compute 0: transfers only. */
static ork_status step(bench *b, int compute) {
    int order[2 * FX_BLOCKS], n = 0;
    for (int k = 0; k < FX_BLOCKS; k++) order[n++] = k;
    for (int k = FX_BLOCKS - 1; k >= 1; k--) order[n++] = k;
    ORK_TRY(ork_streamer_pass_begin(b->st, order, n));
    for (int q = 0; q < n; q++) {
        int k = order[q];
        void *dev;
        ORK_TRY(ork_streamer_enter(b->st, k, &dev));
        if (!dev) dev = b->res[k];
        if (compute) ORK_TRY(block_compute(b, k, dev, q < FX_BLOCKS ? 1 : 2));
        ORK_TRY(ork_streamer_leave(b->st, k));
    }
    ORK_TRY(ork_streamer_pass_end(b->st));
    ORK_TRY(b->be->sync(&b->g->k));
    return ork_ce_sync(b->ce);
}

static ork_status timed(bench *b, int compute, int steps, double *sec) {
    ORK_TRY(step(b, compute)); /* warm-up: cuBLASLt heuristics, first touches */
    double t0 = now_s();
    for (int s = 0; s < steps; s++) ORK_TRY(step(b, compute));
    *sec = (now_s() - t0) / steps;
    return ORK_OK;
}

static ork_status d2h_rate(bench *b, double *gbs) {
    size_t n = b->bytes[1];
    void *h, *d;
    ORK_TRY(ork_ce_host_alloc(b->ce, n, &h));
    ork_status s = ork_alloc_get(b->a, n, "workspace", &d);
    double t0 = now_s();
    for (int r = 0; s == ORK_OK && r < 8; r++) s = ork_ce_copy(b->ce, ORK_LANE_D2H, h, d, n);
    if (s == ORK_OK) s = ork_ce_sync(b->ce);
    *gbs = 8.0 * (double)n / (now_s() - t0) / 1e9;
    if (d) ork_alloc_put(b->a, d);
    ork_ce_host_free(b->ce, h);
    return s;
}

int main(int argc, char **argv) {
    if (ork_cuda_device_count() <= 0) {
        printf("bench_stream: no CUDA device\n");
        return 0;
    }
    fx_init(&g_fx);
    int steps = argc > 1 ? atoi(argv[1]) : 3;
    double budgets[8] = {24, 16, 12};
    int nbud = 3;
    if (argc > 2) {
        nbud = 0;
        for (int i = 2; i < argc && nbud < 8; i++) budgets[nbud++] = atof(argv[i]);
    }
    /* the resident reference */
    uint8_t none[FX_BLOCKS] = {0};
    bench b;
    double t_res = 0;
    ork_status s = setup(&b, none);
    if (s == ORK_OK) s = timed(&b, 1, steps, &t_res);
    size_t peak_res = b.peak;
    teardown(&b);
    if (s != ORK_OK) return 1;
    printf("FLUX.1-dev blocks at 1024^2 (GEMMs only), %d steps each\n", steps);
    printf("resident: %.3f s/step, peak VRAM %.2f GiB\n", t_res, (double)peak_res / 1073741824.0);
    printf("%-8s %-9s %-10s %-10s %-10s %-9s %-9s %-10s %-8s %-10s\n", "budget", "streamed", "step s", "xfer s",
           "pred s", "H2D GB/s", "D2H GB/s", "peak GiB", "overlap", "GB/step");
    for (int q = 0; q < nbud; q++) {
        ork_plan_inputs in = {0};
        in.info = &g_fx.info;
        ork_device_kind_find("h200", &in.dev);
        in.budget_gb = budgets[q];
        in.mode = ORK_OFFLOAD_AUTO;
        in.weight_bytes = 2;
        in.lora_rank = 16;
        in.batch = 1;
        in.img_tokens = N_IMG;
        in.txt_tokens = N_TXT;
        in.first_trainable = 1;
        ork_stream_plan *p;
        if (ork_stream_plan_make(&in, &p) != ORK_OK) continue;
        double t_str = 0, t_x = 0, d2h = 0;
        s = setup(&b, p->streamed);
        uint64_t h0 = ork_ce_bytes(b.ce, ORK_LANE_H2D);
        if (s == ORK_OK) s = timed(&b, 1, steps, &t_str);
        if (s == ORK_OK) s = timed(&b, 0, steps, &t_x);
        uint64_t per_step = (ork_ce_bytes(b.ce, ORK_LANE_H2D) - h0) / (uint64_t)(2 * (steps + 1));
        if (s == ORK_OK) s = d2h_rate(&b, &d2h);
        double h2d = t_x > 0 ? (double)per_step / t_x / 1e9 : 0;
        double ovl = (t_res > t_x ? t_res : t_x) / t_str;
        printf("%-8.0f %-9d %-10.3f %-10.3f %-10.3f %-9.1f %-9.1f %-10.2f %-8.2f %-10.2f\n", budgets[q], p->n_streamed, t_str,
               t_x, p->t_step, h2d, d2h, (double)b.peak / 1073741824.0, ovl, (double)per_step / 1e9);
        teardown(&b);
        ork_stream_plan_free(p);
        if (s != ORK_OK) return 1;
    }
    return 0;
}
#else
int main(void) {
    printf("bench_stream: built without CUDA\n");
    return 0;
}
#endif
