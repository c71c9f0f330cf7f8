/* bench/zimage/zimage_check.c — the Z-Image plugin's forward and backward at
 * the real shape on the CUDA backend, for bench/zimage/zimage_gpu_check.py to
 * compare against diffusers: loads orakul-zimage (ORK_PLUGIN_DIR) through the
 * registry, opens CKPT (a diffusers-named transformer file) with component
 * zimage-turbo, loads it into a BF16 weight store (BF16 activations, as
 * training runs), attaches the LoRA adapters IO holds (lora.<module>.down /
 * up / alpha), runs begin + every block with the tape on and the backward of
 * S = sum(pred·R), and writes OUT: pred, grad.in.tokens, grad.in.txt,
 * lora.grad.<module>.down / .up (F32), with the forward and backward times.
 * IO: in.tokens (B, N, 64) F32 (channel-minor 2x2 patches), in.txt (B, T,
 * 2560), in.timesteps (B) (the core's t), in.R (B, N, 64), in.grid (2) = h, w.
 * Without CUDA it runs on the CPU (F32): a smoke run for a tiny checkpoint.
 * Not a test; bench/zimage/run_gpu.sh runs it. Usage: bench_zimage_check CKPT IO OUT */
#include "io/safetensors.h"
#include "plugin/registry.h"
#include "tensor/alloc.h"
#include "tensor/backend.h"
#include "tensor/graph.h"
#include "tensor/ops.h"
#include "tensor/tape.h"
#include "tensor/tensor.h"
#include "train/services.h"
#include "train/wstore.h"
#include "util/log.h"

#include <orakul/orakul.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TRY ORK_TRY
#define MAXL 8

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct run {
    ork_registry *reg;
    const ork_model_vtable *vt;
    void *self;
    ork_model_info info;
    ork_alloc *alloc;
    ork_graph *g;
    ork_wstore *ws;
    ork_st_file *io;
    int nl;
    char mod[MAXL][128];
    ork_lora lora[MAXL];
} run;

static ork_status to_graph(run *r, const char *name, int grad, ork_dtype act, ork_tensor **leaf, ork_tensor **act_t) {
    const ork_st_tensor *t = ork_st_find(r->io, name);
    if (!t) return ORK_FAIL(ORK_E_FORMAT, "%s lacks %s", ork_st_path(r->io), name);
    float *h = malloc(ork_st_nelements(t) * sizeof *h);
    if (!h) return ORK_E_NOMEM;
    ork_status s = ork_st_read_f32(t, h);
    if (s == ORK_OK) s = ork_tensor_api_table()->from_host(r->g, ORK_F32, t->ndim, t->shape, h, leaf);
    free(h);
    TRY(s);
    (*leaf)->requires_grad = grad;
    *act_t = *leaf;
    return act == ORK_F32 ? ORK_OK : ork_ops_table()->cast(r->g, *leaf, act, act_t);
}

static ork_status attach_lora(run *r) {
    for (size_t i = 0; i < ork_st_count(r->io) && r->nl < MAXL; i++) {
        const char *k = ork_st_at(r->io, i)->name;
        size_t kl = strlen(k);
        if (strncmp(k, "lora.", 5) || kl < 11 || strcmp(k + kl - 5, ".down")) continue;
        char *mod = r->mod[r->nl], name[200];
        snprintf(mod, sizeof r->mod[0], "%.*s", (int)(kl - 10), k + 5);
        ork_lora *l = &r->lora[r->nl];
        for (int p = 0; p < 2; p++) {
            snprintf(name, sizeof name, "lora.%s.%s", mod, p ? "up" : "down");
            const ork_st_tensor *t = ork_st_find(r->io, name);
            if (!t) return ORK_FAIL(ORK_E_FORMAT, "IO lacks %s", name);
            ork_tensor **dst = p ? &l->up : &l->down;
            TRY(ork_tensor_new(r->alloc, "lora", ORK_F32, 2, t->shape, 1, dst));
            float *h = malloc(ork_st_nelements(t) * sizeof *h);
            if (!h) return ORK_E_NOMEM;
            ork_status s = ork_st_read_f32(t, h);
            if (s == ORK_OK) s = r->g->be->memcpy_h2d(&r->g->k, ork_tensor_data(*dst), h, ork_tensor_nbytes(*dst));
            if (s == ORK_OK) s = r->g->be->sync(&r->g->k);
            free(h);
            TRY(s);
        }
        snprintf(name, sizeof name, "lora.%s.alpha", mod);
        const ork_st_tensor *a = ork_st_find(r->io, name);
        float alpha = 0;
        if (!a || ork_st_read_f32(a, &alpha) != ORK_OK) return ORK_FAIL(ORK_E_FORMAT, "IO lacks %s", name);
        l->scale = alpha / (float)l->down->shape[0];
        snprintf(name, sizeof name, "%s.weight", mod);
        ork_tensor *w = ork_wstore_find(r->ws, name);
        if (!w) return ORK_FAIL(ORK_E_INVALID, "no weight %s for the LoRA", name);
        w->lora = l;
        r->nl++;
    }
    return ORK_OK;
}

/* one F32 tensor of OUT: the graph tensor's values */
static ork_status keep(run *r, ork_st_writer *w, const char *name, const ork_tensor *t, float **bufs, int *nb) {
    if (!t) return ORK_FAIL(ORK_E_INTERNAL, "%s: no tensor (a gradient never produced)", name);
    size_t n = (size_t)ork_tensor_numel(t);
    float *h = malloc(n * sizeof *h);
    if (!h) return ORK_E_NOMEM;
    bufs[(*nb)++] = h;
    TRY(ork_tensor_api_table()->to_host(r->g, t, ORK_F32, h));
    return ork_st_writer_add(w, name, ORK_F32, t->ndim, t->shape, h, n * sizeof *h);
}

static ork_status go(run *r, const char *ckpt, const char *io, const char *out) {
#ifdef ORAKUL_HAVE_CUDA
    const ork_backend *be = ork_cuda_backend();
    const ork_dtype act = ORK_BF16;
#else
    const ork_backend *be = ork_cpu_backend();
    const ork_dtype act = ORK_F32;
#endif
    TRY(ork_services_register());
    TRY(ork_registry_create(NULL, &r->reg));
    TRY(ork_registry_add_file(r->reg, ORK_PLUGIN_DIR "/orakul-zimage" ORK_PLUGIN_SUFFIX));
    const ork_plugin_component *pc = ork_registry_find(r->reg, ORK_KIND_MODEL, "zimage-turbo");
    if (!pc) return ORK_FAIL(ORK_E_CONFIG, "no zimage-turbo model component");
    r->vt = pc->c->vtable;
    TRY(r->vt->create(&pc->host, NULL, &r->self));
    TRY(r->vt->open(r->self, ckpt, &r->info));
    TRY(ork_st_open(io, &r->io));
    TRY(ork_alloc_create(be, 0, &r->alloc));
    ork_graph_opts go = {0};
    go.act_dtype = act;
    TRY(ork_graph_create(be, r->alloc, &go, &r->g));
    double t0 = now_s();
    TRY(ork_wstore_create(r->alloc, be, &r->g->k, &r->info, act, &r->ws));
    TRY(r->vt->load(r->self, ork_wstore_sink(r->ws)));
    TRY(ork_wstore_check_complete(r->ws));
    ork_wstore_attach(r->ws, r->g);
    TRY(attach_lora(r));
    printf("loaded %s: %d weights in %.1f s, %d LoRA adapters\n", ckpt, r->info.n_weights, now_s() - t0, r->nl);
    const ork_st_tensor *grid = ork_st_find(r->io, "in.grid"), *ts = ork_st_find(r->io, "in.timesteps");
    float hw[2], tsv[16];
    if (!grid || !ts || ork_st_nelements(ts) > 16 || ork_st_read_f32(grid, hw) != ORK_OK || ork_st_read_f32(ts, tsv) != ORK_OK)
        return ORK_FAIL(ORK_E_FORMAT, "%s lacks in.grid or in.timesteps", io);
    ork_tensor *tok, *txt, *tok_a, *txt_a, *R, *R_a;
    TRY(ork_graph_reset(r->g));
    TRY(to_graph(r, "in.tokens", 1, act, &tok, &tok_a));
    TRY(to_graph(r, "in.txt", 1, act, &txt, &txt_a));
    TRY(to_graph(r, "in.R", 0, ORK_F32, &R, &R_a));
    ork_model_inputs mi = {0};
    mi.abi = (ork_abi)ORK_ABI_INIT(ork_model_inputs);
    mi.tokens = tok_a;
    mi.txt = txt_a;
    mi.h_tokens = (int)hw[0];
    mi.w_tokens = (int)hw[1];
    mi.timesteps_host = tsv;
    TRY(r->g->be->sync(&r->g->k));
    t0 = now_s();
    ork_carry c;
    TRY(r->vt->begin(r->self, r->g, &mi, &c));
    for (int i = 0; i < r->info.n_blocks; i++) TRY(r->vt->block(r->self, r->g, i, &c));
    TRY(r->g->be->sync(&r->g->k));
    double t1 = now_s();
    ork_tensor *pred = c.t[0];
    if (pred->dtype != ORK_F32) TRY(ork_ops_table()->cast(r->g, pred, ORK_F32, &pred));
    TRY(ork_backward_from(r->g, 1, &pred, &R_a));
    TRY(r->g->be->sync(&r->g->k));
    printf("forward %.3f s, backward %.3f s (straight, tape on; not the trainer's step)\n", t1 - t0, now_s() - t1);
    ork_st_writer *w;
    TRY(ork_st_writer_new(&w));
    float *bufs[4 + 2 * MAXL];
    int nb = 0;
    char name[200];
    ork_status s = keep(r, w, "pred", pred, bufs, &nb);
    if (s == ORK_OK) s = keep(r, w, "grad.in.tokens", tok->grad, bufs, &nb);
    if (s == ORK_OK) s = keep(r, w, "grad.in.txt", txt->grad, bufs, &nb);
    for (int i = 0; s == ORK_OK && i < r->nl; i++) {
        snprintf(name, sizeof name, "lora.grad.%s.down", r->mod[i]);
        s = keep(r, w, name, r->lora[i].down->grad, bufs, &nb);
        snprintf(name, sizeof name, "lora.grad.%s.up", r->mod[i]);
        if (s == ORK_OK) s = keep(r, w, name, r->lora[i].up->grad, bufs, &nb);
    }
    if (s == ORK_OK) s = ork_st_writer_commit(w, out);
    ork_st_writer_free(w);
    for (int i = 0; i < nb; i++) free(bufs[i]);
    return s;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s CKPT IO OUT\n", argv[0]);
        return 2;
    }
    run r;
    memset(&r, 0, sizeof r);
    ork_status s = go(&r, argv[1], argv[2], argv[3]);
    for (int i = 0; i < r.nl; i++) { ork_tensor_free(r.lora[i].down); ork_tensor_free(r.lora[i].up); }
    if (r.ws) ork_wstore_destroy(r.ws);
    if (r.g) ork_graph_destroy(r.g);
    if (r.self) r.vt->destroy(r.self);
    if (r.alloc) ork_alloc_destroy(r.alloc);
    ork_st_close(r.io);
    if (r.reg) ork_registry_destroy(r.reg);
    if (s != ORK_OK) fprintf(stderr, "bench_zimage_check: failed (%d)\n", (int)s);
    return s == ORK_OK ? 0 : 1;
}
