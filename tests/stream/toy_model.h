/* tests/stream/toy_model.h — a small block model for the streaming tests and
 * the shared streamed-vs-resident training run (CPU and CUDA tests use it).
 *
 * Blocks: 0 "img_in" (linear C -> H), 1..n-2 "blocks.k" (x + fc2(gelu(fc1(
 * rmsnorm(x))))) with MLP widths that differ from block to block (so slots
 * are sized by the largest streamed block), n-1 "final_layer" (linear H -> C).
 * The run: LoRA (rank 4) on the blocks' linears, per-block checkpointing,
 * MSE loss, plain SGD through the backend's axpby, fixed inputs per step.
 * Everything is deterministic, so two runs that differ only in where the
 * frozen weights live must agree bit for bit. */
#ifndef ORK_TEST_STREAM_TOY_MODEL_H
#define ORK_TEST_STREAM_TOY_MODEL_H

#include "stream/copy_engine.h"
#include "tensor/ops.h"
#include "train/lora.h"
#include "train/runner.h"
#include "train/wstore.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOY_MAXB 16
#define TOY_MAXW 128

typedef struct toy {
    int n_blocks, H, C;
    int mlp[TOY_MAXB];
    ork_model_info info;
    ork_weight_decl w[TOY_MAXW];
    char names[TOY_MAXW][64];
    char bnames[TOY_MAXB][32];
    const char *bn[TOY_MAXB];
} toy;

static void toy_add(toy *m, int block, uint32_t flags, int ndim, int64_t d0, int64_t d1, const char *fmt, int k) {
    int i = m->info.n_weights++;
    snprintf(m->names[i], sizeof m->names[i], fmt, k);
    ork_weight_decl *d = &m->w[i];
    d->name = m->names[i];
    d->ndim = ndim;
    d->shape[0] = d0;
    d->shape[1] = d1;
    d->block = block;
    d->flags = flags;
}

static void toy_init(toy *m, int n_blocks, int H, int C) {
    memset(m, 0, sizeof *m);
    m->n_blocks = n_blocks;
    m->H = H;
    m->C = C;
    m->info.family = "toy";
    m->info.variant = "toy";
    m->info.n_blocks = n_blocks;
    m->info.weights = m->w;
    m->info.block_names = m->bn;
    m->info.token_channels = C;
    m->info.lora_format = "peft-bfl";
    for (int b = 0; b < n_blocks; b++) {
        if (b == 0) snprintf(m->bnames[b], sizeof m->bnames[b], "img_in");
        else if (b == n_blocks - 1) snprintf(m->bnames[b], sizeof m->bnames[b], "final_layer");
        else snprintf(m->bnames[b], sizeof m->bnames[b], "blocks.%d", b);
        m->bn[b] = m->bnames[b];
    }
    toy_add(m, 0, ORK_WEIGHT_LINEAR, 2, H, C, "img_in.weight", 0);
    toy_add(m, 0, ORK_WEIGHT_BIAS, 1, H, 0, "img_in.bias", 0);
    for (int b = 1; b < n_blocks - 1; b++) {
        m->mlp[b] = H * (2 + b % 3); /* 2H, 3H, 4H, 2H, ...: blocks of different sizes */
        toy_add(m, b, ORK_WEIGHT_NORM, 1, H, 0, "blocks.%d.norm.scale", b);
        toy_add(m, b, ORK_WEIGHT_LINEAR, 2, m->mlp[b], H, "blocks.%d.fc1.weight", b);
        toy_add(m, b, ORK_WEIGHT_BIAS, 1, m->mlp[b], 0, "blocks.%d.fc1.bias", b);
        toy_add(m, b, ORK_WEIGHT_LINEAR, 2, H, m->mlp[b], "blocks.%d.fc2.weight", b);
        toy_add(m, b, ORK_WEIGHT_BIAS, 1, H, 0, "blocks.%d.fc2.bias", b);
    }
    toy_add(m, n_blocks - 1, ORK_WEIGHT_LINEAR, 2, C, H, "final_layer.linear.weight", 0);
    toy_add(m, n_blocks - 1, ORK_WEIGHT_BIAS, 1, C, 0, "final_layer.linear.bias", 0);
}

static ork_status toy_load(toy *m, const ork_weight_sink *s) {
    for (int i = 0; i < m->info.n_weights; i++) {
        const ork_weight_decl *d = &m->w[i];
        if (d->flags & ORK_WEIGHT_NORM) {
            float v[1024];
            for (int k = 0; k < d->shape[0] && k < 1024; k++) v[k] = 1.0f + 0.01f * (float)((k * 7 + i) % 13);
            ORK_TRY(s->put(s, d->name, ORK_F32, v));
        } else {
            float sd = d->ndim == 2 ? 1.0f / sqrtf((float)d->shape[1]) : 0.05f;
            ORK_TRY(s->put_random(s, d->name, sd, 1000u + (uint64_t)i));
        }
    }
    return ORK_OK;
}

static ork_status toy_begin(void *self, ork_graph *g, const ork_model_inputs *in, ork_carry *c) {
    (void)self;
    (void)g;
    memset(c, 0, sizeof *c);
    c->n = 1;
    c->t[0] = in->tokens;
    return ORK_OK;
}

static ork_status toy_block(void *self, ork_graph *g, int i, ork_carry *c) {
    toy *m = self;
    const ork_ops *o = ork_ops_table();
    const ork_tensor_api *ta = ork_tensor_api_table();
    ork_tensor *w, *b, *x = c->t[0], *h;
    char n1[64], n2[64];
    if (i == 0 || i == m->n_blocks - 1) {
        const char *pre = i == 0 ? "img_in" : "final_layer.linear";
        snprintf(n1, sizeof n1, "%s.weight", pre);
        snprintf(n2, sizeof n2, "%s.bias", pre);
        ORK_TRY(ta->weight(g, n1, &w));
        ORK_TRY(ta->weight(g, n2, &b));
        return o->linear(g, x, w, b, &c->t[0]);
    }
    snprintf(n1, sizeof n1, "blocks.%d.norm.scale", i);
    ORK_TRY(ta->weight(g, n1, &w));
    ORK_TRY(o->rmsnorm(g, x, w, 1e-6f, &h));
    snprintf(n1, sizeof n1, "blocks.%d.fc1.weight", i);
    snprintf(n2, sizeof n2, "blocks.%d.fc1.bias", i);
    ORK_TRY(ta->weight(g, n1, &w));
    ORK_TRY(ta->weight(g, n2, &b));
    ORK_TRY(o->linear(g, h, w, b, &h));
    ORK_TRY(o->gelu_tanh(g, h, &h));
    snprintf(n1, sizeof n1, "blocks.%d.fc2.weight", i);
    snprintf(n2, sizeof n2, "blocks.%d.fc2.bias", i);
    ORK_TRY(ta->weight(g, n1, &w));
    ORK_TRY(ta->weight(g, n2, &b));
    ORK_TRY(o->linear(g, h, w, b, &h));
    return o->add(g, x, h, &c->t[0]);
}

static ork_status toy_loss(void *ctx, ork_graph *g, ork_tensor *pred, ork_tensor **loss) {
    return ork_ops_table()->mse(g, pred, (ork_tensor *)ctx, loss);
}

/* How a run places the frozen weights. */
typedef struct toy_run_opts {
    const ork_backend *be;
    ork_dtype store_dt, act_dt;
    const uint8_t *streamed;  /* [n_blocks] or NULL: all resident */
    int n_slots;
    int cpu_mode;             /* CPU: the copy engine's ork_ce_cpu_mode (0: EAGER) */
    int steps;
    int forward_only_check;   /* also run ork_runner_forward after training, into fwd_out */
    int compress;             /* streamed blocks travel coded (stream/transit/transit.h) */
    unsigned pool_after, unpool_after; /* bit k: pool / unpool the runner's checkpoints after step k */
} toy_run_opts;

typedef struct toy_run_out {
    float loss[16];
    float *params;   /* all LoRA values in module order (down, up), F32; caller frees */
    size_t n_params;
    float *fwd;      /* forward prediction values (forward_only_check), caller frees */
    size_t n_fwd;
    uint64_t loads, h2d_bytes, raw_bytes;
    int n_coded;
    int pool_ok;     /* every pooling gave n_blocks + 1 boundaries in order, ending at the pool's size */
} toy_run_out;

#define TOY_B 2
#define TOY_N 12

static ork_status toy_train(toy *m, const toy_run_opts *ro, toy_run_out *out) {
    memset(out, 0, sizeof *out);
    const ork_backend *be = ro->be;
    ork_alloc *a = NULL;
    ork_graph *g = NULL;
    ork_copy_engine *ce = NULL;
    ork_wstore *ws = NULL;
    ork_lora_net *ln = NULL;
    ork_runner *r = NULL;
    ork_model_vtable vt = {.begin = toy_begin, .block = toy_block};
    out->pool_ok = 1;
    ork_status s = ork_alloc_create(be, 0, &a);
    ork_graph_opts go = {.act_dtype = ro->act_dt, .nthreads = 1};
    if (s == ORK_OK) s = ork_graph_create(be, a, &go, &g);
    if (s == ORK_OK && ro->streamed) {
        int k = ro->n_slots > 0 ? ro->n_slots : 2, nev = ro->compress ? ork_streamer_n_events(k) : 2 * k;
        if (be->device == ORK_DEV_CPU) s = ork_copy_engine_create_cpu((ork_ce_cpu_mode)ro->cpu_mode, nev, &ce);
        else s = ork_copy_engine_create(be, &g->k, nev, &ce);
    }
    ork_wstore_stream so = {.ce = ce, .streamed = ro->streamed, .n_slots = ro->n_slots > 0 ? ro->n_slots : 2,
                            .compress = ro->compress};
    if (s == ORK_OK) s = ork_wstore_create_ex(a, be, &g->k, &m->info, ro->store_dt, ro->streamed ? &so : NULL, &ws);
    if (s == ORK_OK) s = toy_load(m, ork_wstore_sink(ws));
    if (s == ORK_OK) s = ork_wstore_check_complete(ws);
    if (s == ORK_OK) ork_wstore_attach(ws, g);
    ork_lora_opts lo = {.rank = 4, .alpha = 4, .param_dt = ORK_F32, .seed = 7};
    if (s == ORK_OK) s = ork_lora_create(a, be, &g->k, ws, &m->info, &lo, &ln);
    if (s == ORK_OK) s = ork_runner_create(g, a, &vt, m, &m->info, &r);
    ork_block_hooks hk;
    if (s == ORK_OK) {
        ork_runner_set_first_trainable(r, 1);
        ork_wstore_hooks(ws, &hk);
        ork_runner_set_hooks(r, &hk);
    }
    const int C = m->C;
    float xin[TOY_B * TOY_N * 64], tg[TOY_B * TOY_N * 64];
    int64_t sh[3] = {TOY_B, TOY_N, C};
    const ork_tensor_api *ta = ork_tensor_api_table();
    for (int step = 0; s == ORK_OK && step < ro->steps; step++) {
        for (int q = 0; q < TOY_B * TOY_N * C; q++) {
            xin[q] = sinf(0.37f * (float)q + 1.3f * (float)step);
            tg[q] = cosf(0.11f * (float)q - 0.7f * (float)step);
        }
        for (int i = 0; s == ORK_OK && i < ork_lora_count(ln); i++) {
            s = ork_tensor_zero_grad(g, ork_lora_at(ln, i)->down);
            if (s == ORK_OK) s = ork_tensor_zero_grad(g, ork_lora_at(ln, i)->up);
        }
        if (s == ORK_OK) s = ork_graph_reset(g);
        ork_tensor *x = NULL, *t = NULL;
        if (s == ORK_OK) s = ta->from_host(g, ORK_F32, 3, sh, xin, &x);
        if (s == ORK_OK) s = ta->from_host(g, ORK_F32, 3, sh, tg, &t);
        if (s == ORK_OK && ro->act_dt != ORK_F32) s = ork_ops_table()->cast(g, x, ro->act_dt, &x);
        if (s == ORK_OK && ro->act_dt != ORK_F32) s = ork_ops_table()->cast(g, t, ro->act_dt, &t);
        ork_model_inputs in = {.tokens = x, .h_tokens = 3, .w_tokens = 4};
        if (s == ORK_OK) s = ork_runner_step(r, &in, 1, toy_loss, t, &out->loss[step]);
        if (s == ORK_OK && (ro->pool_after >> step & 1u)) {
            s = ork_runner_pool_checkpoints(r);
            void *dev = NULL;
            const size_t *off = NULL;
            int nbd = s == ORK_OK ? ork_runner_checkpoint_pool(r, &dev, &off) : 0;
            int ok = nbd == m->info.n_blocks + 1 && dev && off[0] == 0;
            for (int i = 0; ok && i < nbd; i++) ok = off[i] <= off[i + 1];
            out->pool_ok &= ok && off[nbd] > 0;
        }
        if (s == ORK_OK && (ro->unpool_after >> step & 1u)) {
            s = ork_runner_unpool_checkpoints(r);
            void *dev = NULL;
            const size_t *off = NULL;
            if (ork_runner_checkpoint_pool(r, &dev, &off) != 0) out->pool_ok = 0;
        }
        /* SGD: p -= lr * grad */
        for (int i = 0; s == ORK_OK && i < ork_lora_count(ln); i++) {
            ork_tensor *p2[2] = {ork_lora_at(ln, i)->down, ork_lora_at(ln, i)->up};
            for (int q = 0; s == ORK_OK && q < 2; q++)
                if (p2[q]->grad)
                    s = be->axpby(&g->k, ork_tensor_numel(p2[q]), -0.05f, ork_tensor_data(p2[q]->grad), ORK_F32, 1.0f,
                                  ork_tensor_data(p2[q]), ORK_F32);
        }
    }
    if (s == ORK_OK && ro->forward_only_check) {
        ork_tensor *x = NULL, *pred = NULL;
        s = ork_graph_reset(g);
        if (s == ORK_OK) s = ta->from_host(g, ORK_F32, 3, sh, xin, &x);
        if (s == ORK_OK && ro->act_dt != ORK_F32) s = ork_ops_table()->cast(g, x, ro->act_dt, &x);
        ork_model_inputs in = {.tokens = x, .h_tokens = 3, .w_tokens = 4};
        if (s == ORK_OK) s = ork_runner_forward(r, &in, &pred);
        if (s == ORK_OK) {
            out->n_fwd = (size_t)ta->numel(pred);
            out->fwd = malloc(out->n_fwd * sizeof *out->fwd);
            s = out->fwd ? ta->to_host(g, pred, ORK_F32, out->fwd) : ORK_E_NOMEM;
        }
    }
    if (s == ORK_OK) {
        size_t total = 0;
        for (int i = 0; i < ork_lora_count(ln); i++)
            total += (size_t)(ork_tensor_numel(ork_lora_at(ln, i)->down) + ork_tensor_numel(ork_lora_at(ln, i)->up));
        out->params = malloc(total * sizeof(float));
        out->n_params = total;
        size_t off = 0;
        if (!out->params) s = ORK_E_NOMEM;
        for (int i = 0; s == ORK_OK && i < ork_lora_count(ln); i++) {
            ork_tensor *p2[2] = {ork_lora_at(ln, i)->down, ork_lora_at(ln, i)->up};
            for (int q = 0; s == ORK_OK && q < 2; q++) {
                s = be->memcpy_d2h(&g->k, out->params + off, ork_tensor_data(p2[q]), ork_tensor_nbytes(p2[q]));
                off += (size_t)ork_tensor_numel(p2[q]);
            }
        }
        if (s == ORK_OK) s = be->sync(&g->k);
    }
    if (s == ORK_OK && ork_wstore_streamer(ws)) {
        ork_streamer_stats st;
        ork_streamer_stats_get(ork_wstore_streamer(ws), &st);
        out->loads = st.loads;
        out->h2d_bytes = st.h2d_bytes;
        out->raw_bytes = st.raw_bytes;
        out->n_coded = st.n_coded;
    }
    if (g) (void)ork_graph_sync(g);
    ork_runner_destroy(r);
    ork_lora_destroy(ln);
    ork_wstore_destroy(ws);
    ork_copy_engine_destroy(ce);
    ork_graph_destroy(g);
    ork_alloc_destroy(a);
    return s;
}

static void toy_out_free(toy_run_out *o) {
    free(o->params);
    free(o->fwd);
    memset(o, 0, sizeof *o);
}

#endif
