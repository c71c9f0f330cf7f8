/* stream/plan.c — see plan.h. */
#include "stream/plan.h"

#include "plugin/model_decl.h"
#include "stream/streamer.h"
#include "stream/trainable_stream.h"
#include "platform/platform.h"
#include "util/log.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIB 1073741824.0

static const ork_device_kind kinds[] = {
    /* duplex: the H200's pinned rate each way with both directions busy, 50.6 of
     * 55.3 GB/s (bench/stream/pcie_ceilings.py); the other cards are taken alike */
    /* decode_gbs: the transit decode's output rate beside compute, about a quarter
     * of the memory bandwidth (it moves 1.75 bytes per output byte and shares the SMs) */
    {"h200", 803.0, 0.5, 55.0, 55.0, 0.915, 141.0, 1000.0},
    {"h100", 760.0, 0.5, 50.0, 50.0, 0.915, 80.0, 800.0},
    {"rtx4090", 165.0, 0.5, 25.0, 25.0, 0.915, 24.0, 250.0},
    {"cpu", 0.1, 0.5, 10.0, 10.0, 0.5, 0.0, 2.0}, /* one memory bus for both memcpy directions */
};

int ork_device_kind_find(const char *name, ork_device_kind *out) {
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (name && !strcmp(name, kinds[i].name)) {
            *out = kinds[i];
            return 1;
        }
    return 0;
}

void ork_stream_spread(int n, int m, int *idx) {
    for (int k = 0; k < m; k++) idx[k] = (int)(((int64_t)(2 * k + 1) * n) / (2 * (int64_t)m));
}

static int64_t numel(const ork_weight_decl *d) {
    int64_t n = 1;
    for (int i = 0; i < d->ndim; i++) n *= d->shape[i];
    return n;
}

/* Tokens a weight is applied to, as the model declares it (plugin/model_decl.h):
 * once per sample (modulation, timestep / pooled-vector embedders): 1; the
 * text stream: T; the image stream: N; joint (the default): N + T. */
static int64_t tokens_of(ork_tokens k, int64_t N, int64_t T) {
    switch (k) {
    case ORK_TOKENS_ONE: return 1;
    case ORK_TOKENS_TXT: return T;
    case ORK_TOKENS_IMG: return N;
    default: return N + T;
    }
}

/* Whether the linear d carries a LoRA by default (the model's targets, plugin/model_decl.h). */
static int lora_target(const ork_model_info *info, const ork_weight_decl *d) {
    char module[192];
    size_t len = strlen(d->name);
    if (len < 8 || strcmp(d->name + len - 7, ".weight") != 0) return 0;
    snprintf(module, sizeof module, "%.*s", (int)(len - 7), d->name);
    return ork_model_lora_default_target(info, d, module);
}

static size_t gib_round(double b) { return b < 0 ? 0 : (size_t)b; }

typedef struct ctx {
    const ork_plan_inputs *in;
    ork_stream_plan *p;
    int *tb;      /* transformer block indices */
    size_t fixed_other;
    int *cls;     /* [n_transformer] bytes-per-FLOP class of tb[i] (0: the most FLOPs per byte) */
    int n_cls;
} ctx;

/* A block's frozen bytes per forward FLOP: what it costs to hide its load. */
static double bytes_per_flop(const ork_stream_plan *p, int b) {
    return (double)p->block_bytes[b] / (p->block_lin_flops[b] + p->block_attn_flops[b] + 1.0);
}

/* Transformer blocks grouped by bytes per FLOP (within 2%), ascending: FLUX's double
 * blocks carry two streams' weights for the FLOPs of one, twice a single
 * block's bytes per FLOP. Returns the number of classes. */
static int cost_classes(const ork_stream_plan *p, const int *tb, int *cls) {
    int nt = p->n_transformer, nc = 0;
    for (int i = 0; i < nt; i++) cls[i] = -1;
    for (;;) {
        double lo = -1;
        for (int i = 0; i < nt; i++)
            if (cls[i] < 0 && (lo < 0 || bytes_per_flop(p, tb[i]) < lo)) lo = bytes_per_flop(p, tb[i]);
        if (lo < 0) return nc;
        for (int i = 0; i < nt; i++)
            if (cls[i] < 0 && bytes_per_flop(p, tb[i]) <= lo * 1.02) cls[i] = nc;
        nc++;
    }
}

/* Device bytes of the plan with the current p->streamed and trainable flag. */
static void account(ork_stream_plan *p, const ork_plan_inputs *in) {
    int n = p->n_blocks;
    size_t res = 0, maxs = 0;
    int64_t lora_all = 0, lora_max = 0, ns = 0;
    for (int b = 0; b < n; b++) {
        if (p->streamed[b]) {
            ns++;
            if (p->block_bytes[b] > maxs) maxs = p->block_bytes[b];
        } else {
            res += p->block_bytes[b];
        }
        lora_all += p->block_lora[b];
        if (p->block_lora[b] > lora_max) lora_max = p->block_lora[b];
    }
    p->n_streamed = (int)ns;
    p->frozen_resident = res;
    p->slot_bytes = ns ? (maxs + ORK_STREAM_ALIGN - 1) / ORK_STREAM_ALIGN * ORK_STREAM_ALIGN : 0;
    p->slots = ns ? p->slot_bytes * (size_t)p->n_slots : 0;
    p->staging = ns && p->stream_codec ? ork_stream_staging_bytes(p->slot_bytes, ORK_STREAM_CODEC_RATIO) : 0;
    int pb = in->param_bytes > 0 ? in->param_bytes : 4;
    double ob = in->opt_bytes_per_param > 0 ? in->opt_bytes_per_param : 8.0;
    p->param_bytes = pb;
    p->opt_bytes_per_param = ob;
    p->lora_params = lora_all;
    /* trainable_stream.c: BF16 activations and F32 params -> a BF16 shadow per param for the forward visits */
    p->lora_shadow = (in->act_bytes > 0 ? in->act_bytes : 2) == 2 && pb == 4;
    /* trainable streaming: the params of the blocks in the ring, grads and
     * optimizer state of the block being stepped and the next one */
    int64_t on_dev = p->trainable_streamed ? lora_max * p->n_slots : lora_all;
    int64_t g_dev = p->trainable_streamed ? 2 * lora_max : lora_all;
    p->lora = (size_t)on_dev * (size_t)pb;
    /* a trainable_stream.c slot also holds the block's BF16 shadows (written after its step) */
    p->lora_shadow_dev = p->trainable_streamed && p->lora_shadow ? (size_t)on_dev * 2 : 0;
    p->lora += p->lora_shadow_dev;
    p->grads = (size_t)g_dev * 4;
    p->opt = gib_round((double)g_dev * ob);
    /* train/ema.c: F32 shadows (resident: every parameter's; streamed: in the state
     * records, so on the device where the optimizer state is) + the scratch of the
     * largest parameter */
    p->ema = in->ema ? 4 * (size_t)g_dev + 4 * (size_t)p->lora_max_tensor : 0;
    p->total = p->frozen_resident + p->codec + p->slots + p->staging + p->lora + p->grads + p->opt + p->ema + p->saved +
               p->carry_grads + p->work + p->adapter_transient + p->dop + p->workspace;
    /* host: the packed streamed blocks, plus the trainable state when it streams */
    size_t host = 0;
    for (int b = 0; b < n; b++)
        if (p->streamed[b]) host += (p->block_bytes[b] + ORK_STREAM_ALIGN - 1) / ORK_STREAM_ALIGN * ORK_STREAM_ALIGN;
    /* the trainable records: parameters + optimizer state (gradients live in the device slot only) */
    if (p->trainable_streamed)
        host += (size_t)lora_all * (size_t)(pb + (p->lora_shadow ? 2 : 0)) + gib_round((double)lora_all * ob) +
                (in->ema ? 4 * (size_t)lora_all : 0);
    p->host_pinned = host;
}

static int fits(const ork_stream_plan *p) { return p->total <= p->budget; }

/* m transformer blocks streamed: spread evenly over all of them, or (dense_first)
 * the classes with the most FLOPs per byte filled first, spread evenly within each */
static void set_streamed(ctx *c, int m) {
    ork_stream_plan *p = c->p;
    int nt = p->n_transformer;
    memset(p->streamed, 0, (size_t)p->n_blocks);
    int *idx = malloc(((size_t)nt + 1) * sizeof *idx), *mem = p->dense_first ? malloc(((size_t)nt + 1) * sizeof *mem) : NULL;
    if (idx && !p->dense_first) {
        ork_stream_spread(nt, m, idx);
        for (int k = 0; k < m; k++) p->streamed[c->tb[idx[k]]] = 1;
    } else if (idx && mem) {
        for (int k = 0, left = m; k < c->n_cls && left > 0; k++) {
            int nm = 0;
            for (int i = 0; i < nt; i++)
                if (c->cls[i] == k) mem[nm++] = i;
            int take = left < nm ? left : nm;
            ork_stream_spread(nm, take, idx);
            for (int q = 0; q < take; q++) p->streamed[c->tb[mem[idx[q]]]] = 1;
            left -= take;
        }
    }
    free(idx);
    free(mem);
    account(p, c->in);
}

/* AUTO under one selection: the fewest streamed blocks that fit, then the same
 * with the trainable state streamed (when allowed). Returns m, or -1. */
static int auto_search(ctx *c) {
    ork_stream_plan *p = c->p;
    int from = c->in->allow_trainable_streaming >= 2 ? 1 : 0, to = c->in->allow_trainable_streaming ? 2 : 1;
    for (int pass = from; pass < to; pass++) {
        p->trainable_streamed = pass;
        for (int m = 0; m <= p->n_transformer; m++) {
            set_streamed(c, m);
            if (fits(p)) return m;
        }
    }
    return -1;
}

/* The pass's entries (forward 0..n-1, backward n-1..ft): each one's block and compute seconds; sets step_flops. */
static int pass_entries(ork_stream_plan *p, double fl, int **blk_out, double **cmp_out) {
    int n = p->n_blocks, ft = p->first_trainable;
    /* the pass: forward 0..n-1, backward n-1..ft; per entry compute and load */
    int ne = n + (n - ft > 0 ? n - ft : 0);
    int *blk = malloc((size_t)ne * sizeof *blk);
    double *cmp = malloc((size_t)ne * sizeof *cmp);
    if (!blk || !cmp) { free(blk); free(cmp); return -1; }
    int e = 0;
    double flops = 0;
    for (int b = 0; b < n; b++, e++) {
        blk[e] = b;
        double f = p->block_lin_flops[b] + p->block_attn_flops[b];
        cmp[e] = f / fl;
        flops += f;
    }
    for (int b = n - 1; b >= ft; b--, e++) {
        blk[e] = b;
        double f = 2.0 * p->block_lin_flops[b] + 3.5 * p->block_attn_flops[b]; /* recompute + dX backward */
        cmp[e] = f / fl;
        flops += f;
    }
    p->step_flops = flops;
    *blk_out = blk;
    *cmp_out = cmp;
    return ne;
}

/* predict()'s ring simulation: slots, copy lane, lending FIFO and the H2D totals so far. */
typedef struct {
    int K;
    double *slot_free;
    int *held; /* the block a slot holds (streamer.c reuses it) */
    double copy_free;
    /* the compute lane busy without a break in [c_from, c_end) so far */
    double c_from, c_end;
    int v;
    /* trainable_stream.c's slots: free of compute, and the last write-back out of each; a
     * load into a slot follows that write-back chunk by chunk (ORK_TSTREAM_CHUNKS_DEFAULT pieces) */
    double *t_free, *t_wb0, *t_wb1;
    double rec_b, chunk, fwd_b, d2h;
    int tv;
    int lend;
    double *f_bytes, *f_free;
    int f_head, f_tail; /* entries f_tail..f_head-1 in flight */
    double f_used;
    double th, hb, ph[2]; /* H2D seconds and bytes; per pass: [0] forward, [1] backward */
} ring_sim;

/* The ring's starting state: empty slots, the record sizes, and whether the forward's loads are lent. */
static void ring_open(ork_stream_plan *p, double d2h, ring_sim *s) {
    int n = p->n_blocks;
    int pb = p->param_bytes;
    double ob = p->opt_bytes_per_param;
    *s = (ring_sim){0};
    s->d2h = d2h;
    s->K = p->n_slots > 0 ? p->n_slots : 2;
    int K = s->K;
    s->slot_free = calloc((size_t)K, sizeof *s->slot_free);
    s->held = malloc((size_t)K * sizeof *s->held);
    for (int k = 0; s->held && k < K; k++) s->held[k] = -1;
    s->v = -1;
    s->t_free = calloc((size_t)K, sizeof *s->t_free);
    s->t_wb0 = calloc((size_t)K, sizeof *s->t_wb0);
    s->t_wb1 = calloc((size_t)K, sizeof *s->t_wb1);
    double rec_max = 0, rec_b = pb + ob + (p->lora_shadow ? 2 : 0);
    for (int b = 0; b < n; b++)
        if ((double)p->block_lora[b] * rec_b > rec_max) rec_max = (double)p->block_lora[b] * rec_b;
    s->rec_b = rec_b;
    s->chunk = rec_max / ORK_TSTREAM_CHUNKS_DEFAULT;
    s->fwd_b = p->lora_shadow ? 2.0 : (double)pb; /* a forward visit's record bytes: the BF16 shadow, or the params */
    s->tv = -1;
    /* lending (streamer.h): the forward's loads go through the LoRA gradients'
     * bytes, a FIFO whose entries free when their visit decodes (on the compute
     * lane) — no slot to wait for */
    double lend_cap = 0;
    for (int b = 0; p->lend_grads && !p->trainable_streamed && b < n; b++)
        if (p->streamed[b] && (double)p->block_bytes[b] * p->codec_ratio > lend_cap) lend_cap = (double)p->block_bytes[b] * p->codec_ratio;
    int lend = lend_cap > 0 && (double)p->grads >= lend_cap;
    s->f_bytes = lend ? calloc((size_t)n + 1, sizeof *s->f_bytes) : NULL;
    s->f_free = lend ? calloc((size_t)n + 1, sizeof *s->f_free) : NULL;
    if (lend && (!s->f_bytes || !s->f_free)) lend = 0;
    s->lend = lend;
    p->lend_applies = lend;
}

/* Entry q's loads (frozen weights and/or LoRA record): moves *start to when its compute may begin, sets *steal. */
static void ring_load(const ork_stream_plan *p, ring_sim *s, int q, int n, int b, double h2d, int fvisit,
                      double tbytes, double *start, double *steal) {
    int K = s->K, lend = s->lend;
    double *slot_free = s->slot_free, *f_bytes = s->f_bytes, *f_free = s->f_free;
    int *held = s->held;
    /* a coded load's decode: on the DEC lane, or (lent) the compute lane */
    double fbytes = 0, ls = s->copy_free, le, rdy = 0, gate = 0,
           dec = (double)p->block_bytes[b] / (p->dev.decode_gbs * 1e9);
    if (fvisit) {
        s->v++;
        int load = held[s->v % K] != b;
        if (load) fbytes = (double)p->block_bytes[b] * p->codec_ratio;
        held[s->v % K] = b;
        if (lend && q < n && load) { /* lent: room in the FIFO, then the copy; the decode is compute's */
            while (s->f_tail < s->f_head && s->f_used + fbytes > (double)p->grads) {
                if (f_free[s->f_tail] > ls) ls = f_free[s->f_tail];
                s->f_used -= f_bytes[s->f_tail++];
            }
            le = ls + fbytes / h2d;
            f_bytes[s->f_head] = fbytes;
            f_free[s->f_head++] = -1; /* set when the visit starts */
            s->f_used += fbytes;
        } else if (p->stream_codec && load) {
            /* coded (streamer.c): pieces through the staging ring, decoded on
             * the DEC lane once the slot is free; the copies need not wait for
             * the slot, but the ring (a block's coded bytes) drains only as the
             * decodes run: the next block's copies wait for the slot too */
            size_t piece = ork_stream_piece_bytes(ORK_STREAM_PIECE_BYTES, p->slot_bytes);
            double np = ceil((double)p->block_bytes[b] / (double)piece);
            le = ls + fbytes / h2d;
            rdy = fmax(le + dec / np, slot_free[s->v % K] + dec);
            gate = slot_free[s->v % K];
            /* its kernels ran in [rdy - dec, rdy]: beside the compute before, they took its SMs */
            *steal = fmax(0.0, fmin(rdy, s->c_end) - fmax(rdy - dec, s->c_from));
        } else {
            if (slot_free[s->v % K] > ls) ls = slot_free[s->v % K];
            le = ls + fbytes / h2d;
        }
    } else {
        le = ls;
    }
    if (tbytes > 0) { /* the record: after the slot's first chunk is out, not before its last */
        int ts = ++s->tv % K;
        double ts0 = fmax(fmax(le, s->t_free[ts]), s->t_wb0[ts] + s->chunk / s->d2h);
        le = fmax(ts0 + tbytes / h2d, s->t_wb1[ts] + s->chunk / h2d);
    }
    s->copy_free = fmax(le, gate);
    s->th += (fbytes + tbytes) / h2d;
    s->ph[q >= n] += (fbytes + tbytes) / h2d;
    s->hb += fbytes + tbytes;
    if (le > *start) *start = le;
    if (rdy > *start) *start = rdy;
    if (lend && q < n && fbytes > 0) { /* decoded into the slot on the compute lane, its bytes free */
        *start += dec;
        f_free[s->f_head - 1] = *start;
    }
}

/* Simulate one step's pass over the ring: returns the step time. */
static void predict(ork_stream_plan *p) {
    int n = p->n_blocks;
    double fl = p->dev.tflops * 1e12 * (p->dev.mfu > 0 ? p->dev.mfu : 0.5);
    /* while the trainable state streams, the backward's write-backs share the link
     * with its loads: both directions at the duplex rate there (write-backs
     * happen only in the backward) */
    double duplex = p->trainable_streamed && p->dev.duplex > 0 ? p->dev.duplex : 1.0;
    double h2d1 = p->dev.h2d_gbs * 1e9, d2h = p->dev.d2h_gbs * 1e9 * duplex;
    int pb = p->param_bytes;
    double ob = p->opt_bytes_per_param;
    int *blk;
    double *cmp;
    int ne = pass_entries(p, fl, &blk, &cmp);
    if (ne < 0) return;
    double tc = 0, td = 0, db = 0; /* seconds and bytes each way */
    double pc[2] = {0, 0}, pd[2] = {0, 0}, fwd_end = 0; /* per pass: [0] forward, [1] backward */
    for (int q = 0; q < ne; q++) {
        tc += cmp[q];
        pc[q >= n] += cmp[q];
    }
    /* ring simulation */
    ring_sim s;
    ring_open(p, d2h, &s);
    int K = s.K;
    double d2h_free = 0, now = 0;
    double steal_sum[2] = {0, 0}; /* the decodes' SM time per pass */
    int prev_blk = -1, prev_s = -1; /* prev_s: the last streamed block (visits skip resident ones) */
    for (int q = 0; q < ne && s.slot_free && s.held && s.t_free && s.t_wb0 && s.t_wb1; q++) {
        int b = blk[q];
        double start = now, h2d = q >= n ? h2d1 * duplex : h2d1, steal = 0;
        /* a new visit loads the block's streamed frozen weights and, when the
         * trainable state streams, its LoRA record — every trainable block's,
         * resident frozen weights or not: the BF16 shadows (or the params) for
         * the forward, params + optimizer state for the visit that steps it (trainable_stream.c) */
        int stepping = q >= n || (q + 1 < ne && blk[q + 1] == b);
        double tbytes = p->trainable_streamed && b != prev_blk ? (double)p->block_lora[b] * (stepping ? pb + ob : s.fwd_b) : 0;
        /* the forward's first two records are the backward's last two stepped:
         * still in trainable_stream.c's two slots, not loaded */
        if (tbytes > 0 && !stepping && s.tv < 1) {
            tbytes = 0;
            s.tv++;
        }
        /* the streamer's visits: streamed blocks only, a repeat merged even with
         * resident blocks (the final layer) between; a slot that still holds the
         * block is not loaded again (streamer.c) */
        int fvisit = p->streamed[b] && b != prev_s;
        if (p->streamed[b]) prev_s = b;
        if (fvisit || tbytes > 0) ring_load(p, &s, q, n, b, h2d, fvisit, tbytes, &start, &steal);
        now = start + cmp[q] + steal;
        if (start > s.c_end) s.c_from = start; /* the lane waited: a new busy stretch */
        s.c_end = now;
        steal_sum[q >= n] += steal;
        int last_use = q + 1 >= ne || blk[q + 1] != b;
        if (p->streamed[b] && last_use) s.slot_free[s.v % K] = now;
        if (p->trainable_streamed && p->block_lora[b] && last_use && s.tv >= 0) s.t_free[s.tv % K] = now;
        if (p->trainable_streamed && q >= n && p->block_lora[b]) { /* updated params + state go back */
            double bytes = (double)p->block_lora[b] * s.rec_b;
            double ds = d2h_free > now ? d2h_free : now;
            d2h_free = ds + bytes / d2h;
            td += bytes / d2h;
            pd[1] += bytes / d2h;
            db += bytes;
            s.t_wb0[s.tv % K] = ds;
            s.t_wb1[s.tv % K] = d2h_free;
        }
        prev_blk = b;
        if (q == n - 1) fwd_end = now;
    }
    if (d2h_free > now) now = d2h_free;
    for (int k = 0; k < 2; k++) {
        p->pass_compute[k] = pc[k];
        p->pass_h2d[k] = s.ph[k];
        p->pass_d2h[k] = pd[k];
        p->pass_decode_sm[k] = steal_sum[k];
    }
    p->pass_wall[0] = fwd_end;
    p->pass_wall[1] = now - fwd_end;
    free(s.slot_free);
    free(s.held);
    free(s.t_free); free(s.t_wb0); free(s.t_wb1);
    free(s.f_bytes); free(s.f_free);
    p->t_compute = tc;
    p->t_decode_sm = steal_sum[0] + steal_sum[1];
    p->t_h2d = s.th;
    p->t_d2h = td;
    p->t_step = now;
    p->h2d_bytes = s.hb;
    p->d2h_bytes = db;
    free(blk);
    free(cmp);
}

static const char *mib(double b, char *buf, size_t n) {
    if (b >= GIB) snprintf(buf, n, "%.2f GiB", b / GIB);
    else snprintf(buf, n, "%.1f MiB", b / 1048576.0);
    return buf;
}

/* AUTO: the even spread, and — where blocks differ in FLOPs per byte — the
 * densest blocks streamed first (their loads hide behind the most compute, the
 * others stay resident); densest first only when its predicted step is
 * shorter by more than the margin (the model's error on the H200 runs is a
 * few percent: noise does not move a plan). Leaves the plan set; returns m,
 * or -1 (then the plan is the even spread's last try, for the refusal). */
static int auto_choose(ctx *c) {
    ork_stream_plan *p = c->p;
    const ork_plan_inputs *in = c->in;
    p->dense_first = in->select == ORK_SELECT_DENSE && c->n_cls > 1;
    int m = auto_search(c);
    if (c->n_cls > 1 && in->select == ORK_SELECT_PREDICT) {
        double t_even = INFINITY;
        int ts_even = p->trainable_streamed;
        if (m >= 0) {
            predict(p);
            t_even = p->t_step;
        }
        p->dense_first = 1;
        int m2 = auto_search(c);
        if (m2 >= 0) predict(p);
        if (m2 >= 0 && p->t_step < t_even * (1.0 - ORK_SELECT_MARGIN)) m = m2;
        else { /* the even plan back — or, when neither fits, its last try for the refusal */
            p->dense_first = 0;
            p->trainable_streamed = ts_even;
            set_streamed(c, m >= 0 ? m : p->n_transformer);
        }
    }
    return m;
}
/* A refusal: ONE line (unless in->quiet) and ORK_E_BUDGET. */
static ork_status plan_fail(const ork_plan_inputs *in, const char *fmt, ...) ORK_PRINTF(2, 3);
static ork_status plan_fail(const ork_plan_inputs *in, const char *fmt, ...) {
    if (in->quiet) return ORK_E_BUDGET;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    return ORK_FAIL(ORK_E_BUDGET, "%s", line);
}

/* ONE line: what does not fit and what to change. */
static ork_status refuse(const ork_stream_plan *p, const ork_plan_inputs *in, const char *lead) {
    char a[32], b[32], c1[32], c2[32], c3[32];
    double act = (double)(p->saved + p->carry_grads + p->work + p->adapter_transient + p->dop),
           tr = (double)(p->lora + p->grads + p->opt + p->ema),
           fr = (double)(p->frozen_resident + p->slots + p->staging + p->codec);
    const char *fix;
    if (act >= tr && act >= fr) fix = "lower the resolution (datasets[].resolution) or train.batch_size";
    else if (tr >= fr) fix = in->allow_trainable_streaming ? "lower network.linear (the rank) or use optimizer adamw8bit"
                                                           : "lower network.linear (the rank), use optimizer adamw8bit, or let the trainable state stream (model.vram_budget_gb without layer_offloading, model.stream_trainable_state: auto)";
    else fix = "quantize the base model (model.quantize: true)";
    return plan_fail(in, "plan: %s needs %s of VRAM but the budget is %s (activations %s, LoRA+grads+optimizer %s, frozen weights %s): %s, or raise model.vram_budget_gb",
                    lead, mib((double)p->total, a, sizeof a), mib((double)p->budget, b, sizeof b), mib(act, c1, sizeof c1),
                    mib(tr, c2, sizeof c2), mib(fr, c3, sizeof c3), fix);
}

/* A plan for in with its per-block arrays (n_blocks + 1 each), nothing sized yet. */
static ork_status plan_new(const ork_plan_inputs *in, ork_stream_plan **out) {
    const ork_model_info *info = in->info;
    int n = info->n_blocks;
    ork_stream_plan *p = calloc(1, sizeof *p);
    if (!p) return ORK_E_NOMEM;
    p->info = info;
    p->dev = in->dev;
    p->mode = in->mode;
    p->percent = in->percent;
    p->n_blocks = n;
    p->n_slots = in->n_slots > 0 ? in->n_slots : 2;
    p->stream_codec = in->stream_codec != 0;
    p->codec_ratio = in->stream_codec && in->codec_ratio > 0 ? in->codec_ratio : 1.0;
    p->lend_grads = in->lend_grads;
    if (p->stream_codec && !(p->dev.decode_gbs > 0)) p->dev.decode_gbs = 1000.0;
    size_t nb = (size_t)n + 1;
    p->streamed = calloc(nb, 1);
    p->transformer = calloc(nb, 1);
    p->block_bytes = calloc(nb, sizeof *p->block_bytes);
    p->block_lora = calloc(nb, sizeof *p->block_lora);
    p->block_lin_flops = calloc(nb, sizeof *p->block_lin_flops);
    p->block_attn_flops = calloc(nb, sizeof *p->block_attn_flops);
    if (!p->streamed || !p->transformer || !p->block_bytes || !p->block_lora || !p->block_lin_flops ||
        !p->block_attn_flops) {
        ork_stream_plan_free(p);
        return ORK_E_NOMEM;
    }
    *out = p;
    return ORK_OK;
}

/* What the sizes of a block working set depend on, beyond the plan's fields. */
typedef struct shape_facts {
    double wide;     /* max (wide side / narrow side) of a transformer block's token linears */
    int64_t big_lin; /* the largest linear weight of a transformer block (elements) */
} shape_facts;

/* Gathering sizes: per block its packed frozen bytes, LoRA parameters and
 * FLOPs, which blocks are transformer blocks (their indices into tb), the
 * hidden width and the first trainable block; codec weights to p->codec. */
static ork_status gather_sizes(ork_stream_plan *p, const ork_plan_inputs *in, int *tb, shape_facts *sf) {
    const ork_model_info *info = in->info;
    int n = p->n_blocks;
    size_t nb = (size_t)n + 1;
    int B = in->batch > 0 ? in->batch : 1;
    int wb = in->weight_bytes > 0 ? in->weight_bytes : 2, bb = in->bias_bytes > 0 ? in->bias_bytes : (wb > 2 ? wb : 2);
    p->weight_bytes = wb;
    int64_t N = in->img_tokens, T = in->txt_tokens;
    /* per block: packed frozen bytes, LoRA params, FLOPs; the hidden width */
    int64_t hidden = in->hidden;
    int64_t *big = calloc(nb, sizeof *big), *big_h = calloc(nb, sizeof *big_h);
    double wide = 0; /* max (wide side / narrow side) of a transformer block's token linears */
    if (!big || !big_h) { free(big); free(big_h); return ORK_E_NOMEM; }
    for (int b = 0; b < n; b++) p->transformer[b] = (uint8_t)ork_model_block_is_transformer(info, b);
    for (int i = 0; i < info->n_weights; i++) {
        const ork_weight_decl *d = &info->weights[i];
        int64_t ne = numel(d);
        size_t bytes, scales = 0;
        if (d->flags & (ORK_WEIGHT_NORM | ORK_WEIGHT_F32)) bytes = (size_t)ne * 4;
        else if ((d->flags & ORK_WEIGHT_LINEAR) && d->ndim == 2) {
            bytes = (size_t)ne * (size_t)wb;
            scales = (size_t)d->shape[0] * (size_t)in->scale_bytes_per_row;
        } else bytes = (size_t)ne * (size_t)bb;
        if (d->block == ORK_BLOCK_CODEC || d->block < 0 || d->block >= n) {
            p->codec += bytes + scales;
            continue;
        }
        int b = d->block;
        ork_stream_rec r;
        ork_stream_rec_add(&p->block_bytes[b], bytes, scales, &r);
        if ((d->flags & ORK_WEIGHT_LINEAR) && d->ndim == 2) {
            int64_t tok = tokens_of(ork_model_weight_tokens(info, d), N, T);
            int64_t out_f = d->shape[0], in_f = d->shape[1];
            p->block_lin_flops[b] += 2.0 * (double)B * (double)tok * (double)ne;
            if (in->lora_rank > 0 && !in->lora_params && lora_target(info, d)) {
                int64_t r2 = in->lora_rank < out_f ? in->lora_rank : out_f;
                if (r2 > in_f) r2 = in_f;
                p->block_lora[b] += r2 * (in_f + out_f);
                int64_t big_t = r2 * (in_f > out_f ? in_f : out_f); /* down (r, in) or up (out, r) */
                if (big_t > p->lora_max_tensor) p->lora_max_tensor = big_t;
                p->block_lin_flops[b] += 2.0 * (double)B * (double)tok * (double)(r2 * (in_f + out_f));
            }
            if (ne > big[b]) {
                big[b] = ne;
                big_h[b] = out_f < in_f ? out_f : in_f;
            }
            /* the widest per-token linear of a block sets its working set */
            if (p->transformer[b] && tok > 1) {
                double wr = (double)(out_f > in_f ? out_f : in_f) / (double)(out_f < in_f ? out_f : in_f);
                if (wr > wide) wide = wr;
            }
        }
        /* a block with attention: the model marks its attention weights */
        if (ork_model_weight_marks_attention(info, d) && p->block_attn_flops[b] == 0) p->block_attn_flops[b] = -1;
    }
    if (hidden <= 0)
        for (int b = 0; b < n; b++)
            if (big_h[b] > hidden) hidden = big_h[b];
    int64_t big_lin = 0; /* the largest linear weight of a transformer block (elements) */
    for (int b = 0; b < n; b++)
        if (p->transformer[b] && big[b] > big_lin) big_lin = big[b];
    free(big);
    free(big_h);
    p->hidden = hidden;
    for (int b = 0; b < n; b++) {
        if (p->block_attn_flops[b] < 0) {
            int64_t La = tokens_of(ork_model_block_attn_tokens(info, b), N, T), ad = ork_model_block_attn_dim(info, b);
            p->block_attn_flops[b] = 4.0 * (double)B * (double)La * (double)La * (double)(ad > 0 ? ad : hidden);
        }
        if (in->lora_params) p->block_lora[b] = in->lora_params[b];
        if (in->lora_params && !in->lora_max_tensor && p->block_lora[b] > p->lora_max_tensor)
            p->lora_max_tensor = p->block_lora[b];
        if (p->transformer[b]) tb[p->n_transformer++] = b;
    }
    p->first_trainable = in->first_trainable;
    if (p->first_trainable < 0) {
        p->first_trainable = n;
        for (int b = n - 1; b >= 0; b--)
            if (p->block_lora[b] > 0) p->first_trainable = b;
    }
    if (in->lora_max_tensor > 0) p->lora_max_tensor = in->lora_max_tensor;
    p->adapter_transient = in->adapter_transient;
    sf->wide = wide;
    sf->big_lin = big_lin;
    return ORK_OK;
}

/* The memory model: the activations (checkpoints, carry gradients, the block
 * working set), the workspace and the budget; account() adds the rest. */
static void memory_model(ork_stream_plan *p, const ork_plan_inputs *in, const shape_facts *sf) {
    int n = p->n_blocks;
    int B = in->batch > 0 ? in->batch : 1, ab = in->act_bytes > 0 ? in->act_bytes : 2;
    int wb = p->weight_bytes;
    int64_t L = in->img_tokens + in->txt_tokens, hidden = p->hidden;
    /* activations */
    double carry = (double)B * (double)L * (double)hidden * ab;
    /* n + 4: FLUX.2-dev at 512² measured 1.07 GiB of checkpoints where n + 1
     * carries are 1.04 GiB (the text/image split and modulation vectors) */
    p->saved = gib_round(carry * (n + 4));
    p->carry_grads = gib_round(2.0 * carry);
    /* The block working set = a part per token + a fixed part. Measured on the
     * H200 (activation arena peaks, 2026-11-29):
     *   FLUX.1-dev bf16, 1024², rank 128: 2.00 GiB = 76 carries (widest linear 7:1);
     *   FLUX.2-dev fp8, 512²: 2.81 GiB at rank 128 and at rank 1280 (so the rank
     *   does not matter); 1024², rank 1280: 6.38 GiB.
     * The two FLUX.2 points give 101.5 carries per token (80 x 9/7 = 102.9: the
     * per-token part scales with the widest linear) plus 1.03 GiB fixed: the
     * bf16 scratch a quantized block dequantizes its linears into, ~1.6x its
     * largest linear (linear1 and linear2 of a single block). This model puts
     * the three runs at 2.11 / 2.85 / 6.47 GiB. */
    double tf_scale = sf->wide > 7.0 ? sf->wide / 7.0 : 1.0;
    double fixed = wb == 1 ? 1.65 * 2.0 * (double)sf->big_lin : 0.0;
    double fmax = 0;
    for (int b = 0; b < n; b++) {
        double f = p->transformer[b] ? (in->factor_transformer > 0 ? in->factor_transformer : 80.0 * tf_scale)
                                     : (in->factor_other > 0 ? in->factor_other : 4.0);
        if (f > fmax) fmax = f;
    }
    p->work = gib_round(carry * fmax + fixed);
    /* DOP (train/dop.c): 6 carries (the prior's and the main step's begin
     * outputs, up to 2 each, both kept to the reset while the preservation step
     * runs; the prior forward's 2 carry buffers), the prior twice (its arena
     * copy; its F32 upload + cast) and the class prompts' uploads (F32 + cast) */
    p->dop = 0;
    if (in->dop) {
        const ork_model_info *mi = p->info;
        double up = 4.0 + (ab == 4 ? 0 : ab);
        p->dop = gib_round(6.0 * carry + (double)B * (double)in->img_tokens * mi->token_channels * (ab + up) +
                           (double)B * ((double)in->txt_tokens * mi->context_dim + mi->vec_dim) * up);
    }
    p->workspace = in->workspace ? in->workspace : (size_t)512 << 20;
    /* budget */
    if (in->budget_gb > 0) p->budget = (size_t)(in->budget_gb * GIB);
    else {
        size_t margin = in->margin ? in->margin : (size_t)1 << 30;
        p->budget = in->device_free > margin ? in->device_free - margin : 0;
    }
}

/* ORK_OFFLOAD_NONE: every block resident, or a refusal that says whether
 * streaming would have helped. */
static ork_status choose_resident(ctx *c) {
    ork_stream_plan *p = c->p;
    const ork_plan_inputs *in = c->in;
    set_streamed(c, 0);
    if (fits(p)) return ORK_OK;
    /* say whether streaming would have helped */
    set_streamed(c, p->n_transformer);
    int helps = fits(p);
    set_streamed(c, 0);
    if (helps) {
        char a[32], b2[32];
        return plan_fail(in, "plan: every block resident needs %s of VRAM but the budget is %s: set model.layer_offloading: true (layer_offloading_transformer_percent: auto picks the share)",
                         mib((double)p->total, a, sizeof a), mib((double)p->budget, b2, sizeof b2));
    }
    return refuse(p, in, "every block resident");
}

/* ORK_OFFLOAD_PERCENT: the given share of the transformer blocks streamed, or
 * a refusal naming the share that would fit. */
static ork_status choose_percent(ctx *c) {
    ork_stream_plan *p = c->p;
    const ork_plan_inputs *in = c->in;
    double pc = in->percent < 0 ? 0 : in->percent > 1 ? 1 : in->percent;
    int m = (int)floor(pc * p->n_transformer + 0.5);
    set_streamed(c, m);
    if (fits(p)) return ORK_OK;
    int need = -1;
    for (int k = m + 1; k <= p->n_transformer && need < 0; k++) {
        set_streamed(c, k);
        if (fits(p)) need = k;
    }
    set_streamed(c, m);
    if (need > 0) {
        char a[32], b2[32];
        return plan_fail(in, "plan: layer_offloading_transformer_percent %.2f (%d of %d blocks streamed) needs %s of VRAM but the budget is %s: raise it to at least %.2f (or auto)",
                         pc, m, p->n_transformer, mib((double)p->total, a, sizeof a), mib((double)p->budget, b2, sizeof b2),
                         ceil(100.0 * need / p->n_transformer) / 100.0);
    }
    char lead[160];
    snprintf(lead, sizeof lead, "layer_offloading_transformer_percent %.2f", pc);
    return refuse(p, in, lead);
}

/* ORK_OFFLOAD_AUTO: the fewest streamed blocks that fit (auto_choose), and
 * the step the trainable state streamed from the start would predict. */
static ork_status choose_auto(ctx *c) {
    ork_stream_plan *p = c->p;
    const ork_plan_inputs *in = c->in;
    int m = auto_choose(c);
    /* what streaming the trainable state from the start would predict (it
     * frees the LoRA, gradients and optimizer state for frozen blocks:
     * fewer loads in a forward pass that waits on the link); said, never
     * taken: it clips with the previous step's norm (docs/streaming.md §4) */
    if (m >= 0 && p->n_streamed > 0 && in->suggest_trainable_streaming && in->allow_trainable_streaming == 1 &&
        !p->trainable_streamed) {
        ork_plan_inputs alt = *in;
        alt.allow_trainable_streaming = 2;
        c->in = &alt;
        double t_alt = 0;
        if (auto_choose(c) >= 0) {
            predict(p);
            t_alt = p->t_step;
        }
        c->in = in;
        m = auto_choose(c); /* the plan chosen above, again */
        p->t_step_trainable = t_alt;
    }
    if (m < 0) return refuse(p, in, p->trainable_streamed ? "every block and the trainable state streamed"
                                                          : "every transformer block streamed");
    return ORK_OK;
}

/* The choice of mode: which blocks stream (and whether the trainable state
 * does) under in->mode, with p sized by gather_sizes and memory_model. */
static ork_status choose_streamed(ork_stream_plan *p, const ork_plan_inputs *in, int *tb, int *cls) {
    ctx c = {in, p, tb, 0, cls, cost_classes(p, tb, cls)};
    if (in->mode == ORK_OFFLOAD_NONE) return choose_resident(&c);
    if (in->mode == ORK_OFFLOAD_PERCENT) return choose_percent(&c);
    return choose_auto(&c);
}

/* One plan: its sizes gathered from the model, the memory model, the choice
 * of what streams, then its step predicted. */
/* The carries a transformer block's recorded forward holds (its tape: saved
 * inputs, outputs, attention statistics), measured on the H200 2026-12-02:
 * FLUX.1-dev bf16 1024² rank 128 kept 60.1 GiB for 58 blocks = 39.3 carries a
 * block; scaled like the working set by the widest linear. */
#define ORK_PLAN_KEEP_CARRIES 40.0

/* Keep instead of recompute, as the runner will choose it (runner.h: the most
 * trailing trainable blocks whose bytes fit the cap less the step's peak, 1 GiB
 * and 3%), estimated from the shapes. */
static void estimate_keep(ork_stream_plan *p, const ork_plan_inputs *in, const shape_facts *sf) {
    p->keep_blocks = 0;
    p->keep_bytes = 0;
    p->keep_step_flops = p->t_step_kept = 0;
    if (p->n_streamed || p->trainable_streamed || !p->dev.name || !strcmp(p->dev.name, "cpu")) return;
    int B = in->batch > 0 ? in->batch : 1, ab = in->act_bytes > 0 ? in->act_bytes : 2;
    double carry = (double)B * (double)(in->img_tokens + in->txt_tokens) * (double)p->hidden * ab;
    double tf_scale = sf->wide > 7.0 ? sf->wide / 7.0 : 1.0;
    double margin = (double)((size_t)1 << 30) + (double)(p->budget / 100 * 3);
    double room = (double)p->budget - (double)p->total - margin, sum = 0, dfl = 0;
    int k = 0;
    for (int b = p->n_blocks - 1; b >= p->first_trainable && room > 0; b--) {
        double kb = carry * (p->transformer[b] ? ORK_PLAN_KEEP_CARRIES * tf_scale : 4.0);
        if (sum + kb > room) break;
        sum += kb;
        dfl += p->block_lin_flops[b] + p->block_attn_flops[b]; /* the recompute: one forward */
        k++;
    }
    if (!k || !(p->step_flops > 0)) return;
    p->keep_blocks = k;
    p->keep_bytes = (size_t)sum;
    p->keep_step_flops = p->step_flops - dfl;
    p->t_step_kept = p->t_step * p->keep_step_flops / p->step_flops;
}

static ork_status plan_make_one(const ork_plan_inputs *in, ork_stream_plan **out) {
    ork_stream_plan *p;
    ORK_TRY(plan_new(in, &p));
    size_t nb = (size_t)p->n_blocks + 1;
    int *tb = calloc(nb, sizeof *tb), *cls = calloc(nb, sizeof *cls);
    shape_facts sf;
    ork_status st = tb && cls ? gather_sizes(p, in, tb, &sf) : ORK_E_NOMEM;
    if (st == ORK_OK) {
        memory_model(p, in, &sf);
        st = choose_streamed(p, in, tb, cls);
    }
    free(tb);
    free(cls);
    if (st != ORK_OK) {
        ork_stream_plan_free(p);
        return st;
    }
    predict(p);
    estimate_keep(p, in, &sf);
    *out = p;
    return ORK_OK;
}

/* tensor/ops_linear.c's LOKR_CHUNK_BYTES */
#define PLAN_LOKR_CHUNK ((size_t)64 << 20)

size_t ork_plan_lokr_transient(int64_t N, int64_t K, int64_t a, int64_t c, int act_bytes) {
    if (N <= 0 || K <= 0 || a <= 0 || c <= 0 || N % a || K % c) return 0;
    int64_t b = N / a, d = K / c;
    /* lokr_weight_operand: the operand (N, K) in the activations' dtype + P, ci rows of w1 */
    int64_t ci = (int64_t)(PLAN_LOKR_CHUNK / ((size_t)(c * b * d) * 4));
    ci = ci < 1 ? 1 : ci > a ? a : ci;
    int ab = act_bytes > 0 ? act_bytes : 2;
    /* lokr_f32: w1 and w2 as F32 copies rounded through the activations' dtype, unless both are F32 */
    size_t copies = ab == 4 ? 0 : (size_t)(a * c + b * d) * (4 + (size_t)ab);
    size_t operand = (size_t)(N * K) * (size_t)ab + (size_t)(ci * c * b * d) * 4 + copies;
    /* lokr_param_grads: G and G' of ci rows of w1 each */
    int64_t cg = (int64_t)(PLAN_LOKR_CHUNK / ((size_t)(b * K) * 8));
    cg = cg < 1 ? 1 : cg > a ? a : cg;
    size_t grads = 2 * (size_t)(cg * b * K) * 4 + copies;
    return operand > grads ? operand : grads;
}

/* ORK_PLAN_CODEC_PREDICT: the raw plan, then the coded one (quietly: its
 * refusal is not the user's, the raw plan stands); coded unless the raw plan
 * is predicted faster. Where the compute bounds every pass, coding only costs
 * the staging buffer and the decodes. */
ork_status ork_stream_plan_make(const ork_plan_inputs *in, ork_stream_plan **out) {
    if (in->stream_codec != ORK_PLAN_CODEC_PREDICT) return plan_make_one(in, out);
    ork_plan_inputs a = *in;
    a.stream_codec = 0;
    ork_stream_plan *raw = NULL, *coded = NULL;
    ORK_TRY(plan_make_one(&a, &raw));
    a.stream_codec = 1;
    a.quiet = 1;
    ork_status st = plan_make_one(&a, &coded);
    if (st != ORK_OK || !coded->n_streamed || raw->t_step < coded->t_step) {
        if (st == ORK_OK && coded->n_streamed) raw->t_step_other_codec = coded->t_step;
        ork_stream_plan_free(coded);
        *out = raw;
        return ORK_OK;
    }
    coded->t_step_other_codec = raw->t_step;
    ork_stream_plan_free(raw);
    *out = coded;
    return ORK_OK;
}

void ork_stream_plan_free(ork_stream_plan *p) {
    if (!p) return;
    free(p->streamed);
    free(p->transformer);
    free(p->block_bytes);
    free(p->block_lora);
    free(p->block_lin_flops);
    free(p->block_attn_flops);
    free(p);
}

int ork_stream_plan_trainable_hint(const ork_stream_plan *p, char *buf, size_t n) {
    double t = p->t_step_trainable;
    if (!(t > 0 && p->t_step > 0 && t < p->t_step * (1.0 - ORK_TRAINABLE_HINT_MARGIN))) return 0;
    snprintf(buf, n, "streaming the trainable state too is predicted %.0f%% faster (%.3f s against %.3f s per step: its "
             "VRAM goes to frozen blocks): set model.stream_trainable_state: always (gradient clipping then uses the "
             "previous step's norm, docs/streaming.md)", 100.0 * (1.0 - t / p->t_step), t, p->t_step);
    return 1;
}

void ork_stream_plan_print(const ork_stream_plan *p, FILE *f) {
    char a[32], b[32], c[32], d[32], e[32], g[32], h[32], i2[32], j[32], k[32], l[32];
    static const char *modes[] = {"off", "percent", "auto"};
    fprintf(f, "stream plan: device %s (%.0f TFLOP/s x %.2f, H2D %.0f GB/s, D2H %.0f GB/s), VRAM budget %s\n", p->dev.name,
            p->dev.tflops, p->dev.mfu, p->dev.h2d_gbs, p->dev.d2h_gbs, mib((double)p->budget, a, sizeof a));
    fprintf(f, "  offloading %s", modes[p->mode]);
    if (p->mode == ORK_OFFLOAD_PERCENT) fprintf(f, " %.2f", p->percent);
    fprintf(f, ": %d of %d transformer blocks streamed", p->n_streamed, p->n_transformer);
    if (p->dense_first) fprintf(f, " (the most FLOPs per byte first)");
    if (p->n_streamed) fprintf(f, ", ring of %d slots x %s", p->n_slots, mib((double)p->slot_bytes, a, sizeof a));
    if (p->n_streamed && p->stream_codec)
        fprintf(f, ", coded in transit (expected %.2f of the bytes, staging %s)", p->codec_ratio,
                mib((double)p->staging, b, sizeof b));
    if (p->n_streamed && p->t_step_other_codec > 0)
        fprintf(f, p->stream_codec ? " (raw: %.3f s predicted)" : ", raw in transit (coded: %.3f s predicted)",
                p->t_step_other_codec);
    if (p->n_streamed && p->lend_applies)
        fprintf(f, "; the forward's loads through the LoRA gradients' %s between backward passes, its first ones copied "
                   "ahead at the backward's end (into %sthe dead checkpoints: not in the prediction)",
                mib((double)p->grads, b, sizeof b), p->staging ? "the staging buffer and " : "");
    fprintf(f, "%s%s\n", p->trainable_streamed ? "; trainable state streamed per block (ZeRO-Offload)" : "",
            p->trainable_streamed && p->lora_shadow ? ", BF16 shadows of the LoRA parameters for the forward pass" : "");
    char ema[48] = "", at[96] = "", m1[32], m2[32];
    if (p->ema) snprintf(ema, sizeof ema, ", EMA %s", mib((double)p->ema, m1, sizeof m1));
    if (p->adapter_transient)
        snprintf(at, sizeof at, ", adapter transient %s", mib((double)p->adapter_transient, m1, sizeof m1));
    if (p->dop) /* after the transient: at[] holds both */
        snprintf(at + strlen(at), sizeof at - strlen(at), ", DOP prior pass %s", mib((double)p->dop, m2, sizeof m2));
    fprintf(f, "  VRAM: frozen resident %s, slots %s%s, codec %s, LoRA %s, grads %s, optimizer %s%s, saved carries %s, carry grads %s, block working set %s%s, workspace %s = %s\n",
            mib((double)p->frozen_resident, a, sizeof a), mib((double)(p->slots + p->staging), b, sizeof b),
            p->staging ? " (with staging)" : "", mib((double)p->codec, c, sizeof c),
            mib((double)p->lora, d, sizeof d), mib((double)p->grads, e, sizeof e), mib((double)p->opt, g, sizeof g), ema,
            mib((double)p->saved, h, sizeof h), mib((double)p->carry_grads, i2, sizeof i2), mib((double)p->work, j, sizeof j),
            at, mib((double)p->workspace, k, sizeof k), mib((double)p->total, l, sizeof l));
    fprintf(f, "  host: %s pinned\n", mib((double)p->host_pinned, a, sizeof a));
    fprintf(f, "  PCIe per micro-step: H2D %.2f GB, D2H %.2f GB\n", p->h2d_bytes / 1e9, p->d2h_bytes / 1e9);
    double cd = p->t_compute + p->t_decode_sm;
    fprintf(f, "  predicted step: %.3f s (compute %.3f s for %.1f TFLOP", p->t_step, p->t_compute, p->step_flops / 1e12);
    if (p->t_decode_sm > 0) fprintf(f, " + %.3f s of SM time the transit decodes take from it", p->t_decode_sm);
    fprintf(f, ", H2D %.3f s, D2H %.3f s; overlap %.0f%%)\n", p->t_h2d, p->t_d2h,
            p->t_step > 0 ? 100.0 * fmax(cd, fmax(p->t_h2d, p->t_d2h)) / p->t_step : 100.0);
    if (p->keep_blocks > 0)
        fprintf(f, "  recompute: the last %d of %d trainable blocks keep their recorded forward instead (about %s beside "
                   "the %s above; the runner measures them in step 1 and decides): %.3f s a step from step 2 (%.1f TFLOP)\n",
                p->keep_blocks, p->n_blocks - p->first_trainable, mib((double)p->keep_bytes, a, sizeof a),
                mib((double)p->total, b, sizeof b), p->t_step_kept, p->keep_step_flops / 1e12);
    /* per pass, and the term that bounds each: what a faster card, link or
     * budget would buy (the forward pass often waits on the link while the
     * backward waits on compute: then neither alone sets the step) */
    static const char *pass[2] = {"forward", "backward"};
    fprintf(f, "  per pass:");
    for (int k = 0; k < 2; k++) {
        double c = p->pass_compute[k] + p->pass_decode_sm[k], h = p->pass_h2d[k], dd = p->pass_d2h[k];
        const char *bound = c >= h && c >= dd ? "compute" : h >= dd ? "H2D" : "D2H";
        fprintf(f, "%s %s %.3f s (compute %.3f s", k ? ";" : "", pass[k], p->pass_wall[k], p->pass_compute[k]);
        if (p->pass_decode_sm[k] > 0) fprintf(f, " + decodes %.3f s", p->pass_decode_sm[k]);
        fprintf(f, ", H2D %.3f s", h);
        if (k) fprintf(f, ", D2H %.3f s", dd);
        fprintf(f, "; bound by %s)", bound);
    }
    fprintf(f, "\n");
    char hint[400];
    if (ork_stream_plan_trainable_hint(p, hint, sizeof hint)) fprintf(f, "  faster: %s\n", hint);
    fprintf(f, "  %-4s %-22s %12s %10s %12s  %s\n", "#", "block", "frozen", "GFLOP", "LoRA params", "where");
    for (int q = 0; q < p->n_blocks; q++)
        fprintf(f, "  %-4d %-22s %12s %10.1f %12lld  %s\n", q, p->info->block_names ? p->info->block_names[q] : "?",
                mib((double)p->block_bytes[q], a, sizeof a), (p->block_lin_flops[q] + p->block_attn_flops[q]) / 1e9,
                (long long)p->block_lora[q], p->streamed[q] ? "streamed" : "resident");
}

/* What the plan needs of the host: its pinned bytes + 2 GiB for the process. */
static size_t host_need(const ork_stream_plan *p) { return p->host_pinned + ((size_t)2 << 30); }

void ork_stream_plan_fit_host(ork_stream_plan *p, size_t available, const char *what) {
    if (!p->host_pinned || !available || !p->trainable_streamed || !p->lora_shadow) return;
    size_t need = host_need(p);
    if (need <= available) return;
    /* the forward's BF16 shadows are a speed-up, not a need: dropped first */
    size_t sh = (size_t)p->lora_params * 2;
    if (need - sh > available) return; /* refused either way: check_host says so */
    p->lora_shadow = 0;
    p->host_pinned -= sh;
    p->lora -= p->lora_shadow_dev; /* the device slots are smaller too */
    p->total -= p->lora_shadow_dev;
    p->lora_shadow_dev = 0;
    predict(p);
    ORK_WARN("%s%splan: %.1f GiB of host memory available: the trainable state streams without BF16 shadows "
             "for the forward pass (%.1f GiB less pinned, %.1f GB more over PCIe per step)",
             what ? what : "", what ? ": " : "", (double)available / GIB, (double)sh / GIB, (double)sh / 1e9);
}

/* Host bytes a streamed trainable state with F32 parameters would not pin with
 * BF16 ones (network.weight_dtype: bf16): 2 per parameter, and the shadows. */
static size_t bf16_param_saving(const ork_stream_plan *p) {
    if (!p->trainable_streamed || p->param_bytes != 4) return 0;
    return (size_t)p->lora_params * 2 + (p->lora_shadow ? (size_t)p->lora_params * 2 : 0);
}

ork_status ork_stream_plan_check_host(ork_stream_plan *p, size_t available, const char *what) {
    ork_stream_plan_fit_host(p, available, what);
    if (!p->host_pinned || !available || host_need(p) <= available) return ORK_OK;
    /* the changes that apply to this plan, the one that alone makes it fit first */
    char bf[160] = "", q[96] = "", r[80] = "";
    size_t sv = bf16_param_saving(p);
    int bf_fits = sv && host_need(p) - sv <= available;
    if (sv)
        snprintf(bf, sizeof bf, "set network.weight_dtype: bf16 (BF16 LoRA weights with stochastic rounding, as the "
                 "seed trains: %.1f GiB less of trainable state%s), ", (double)sv / GIB, bf_fits ? ", enough" : "");
    if (p->weight_bytes > 1) snprintf(q, sizeof q, "quantize the frozen weights (model.quantize: true stores 1 byte each), ");
    if (p->trainable_streamed) snprintf(r, sizeof r, "lower network.linear (the streamed trainable state), ");
    return ORK_FAIL(ORK_E_BUDGET,
                    "%s%splan: streaming pins %.1f GiB of host memory (+2 GiB for the process) but this machine has %.1f "
                    "GiB available: %sraise model.vram_budget_gb (fewer blocks stream), %s%s%sor use a machine with more RAM",
                    what ? what : "", what ? ": " : "", (double)p->host_pinned / GIB, (double)available / GIB,
                    bf_fits ? bf : "", q, r, bf_fits ? "" : bf);
}

size_t ork_host_mem_available(void) {
    uint64_t b = 0; /* MemAvailable / GlobalMemoryStatusEx; 0 when unknown */
    if (ork_mem_available(&b) != ORK_OK) return 0;
    return b > (uint64_t)SIZE_MAX ? SIZE_MAX : (size_t)b;
}
