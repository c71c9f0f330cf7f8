/* text/cond_plan.c — the text encode's plan (text/cond_plan.h): per encoder
 * the placement ork_tc_plan chooses within the budget (resident, or streamed
 * layer-major with its chunk and its carries' place, ork_tc_lm_group), and
 * from it the weight passes, the bytes over the link, the host memory, the
 * device peak and the predicted time (a layer-major encode through the block
 * streamer, ork_tc_lm_streamer: the larger of link and compute, overlapped);
 * its printed lines; the host-memory
 * check; the check that an encoder gave every device byte back.
 * Owns nothing. [control-thread] */
#include "text/cond_plan.h"

#include "text/cond_internal.h"

#include "stream/plan.h"
#include "tensor/tensor.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

#ifdef ORAKUL_HAVE_CUDA
#include "cuda/cuda_ctx.h"
#endif

#define GIB 1073741824.0

size_t ork_tc_budget_fit(const ork_backend *be, size_t budget, int device_index, int quiet, const char **why) {
    size_t b = ork_tc_budget(be, budget, device_index, why);
    if (!budget || !be || be->device != ORK_DEV_CUDA) return b;
    size_t free_b = 0;
    const char *pd = getenv("ORAKUL_PLAN_DEVICE");
    ork_device_kind dk;
    if (pd && *pd && ork_device_kind_find(pd, &dk)) {
        free_b = (size_t)(dk.mem_gib * GIB);
    } else {
#ifdef ORAKUL_HAVE_CUDA
        size_t total = 0;
        char name[128];
        if (ork_cuda_device_count() <= device_index ||
            ork_cuda_mem_info(device_index, &free_b, &total, name, sizeof name) != ORK_OK)
            free_b = 0;
#endif
    }
    const size_t margin = (size_t)3 << 29; /* 1.5 GiB: the context's growth, cuBLAS's workspaces */
    if (free_b > margin && b > free_b - margin) {
        if (!quiet)
            ORK_WARN("text encode: model.vram_budget_gb is %.2f GiB but the device has %.2f GiB free: encoding within "
                     "%.2f GiB (1.5 GiB kept for the context and cuBLAS)", b / GIB, free_b / GIB,
                     (free_b - margin) / GIB);
        b = free_b - margin;
        if (why) *why = "the device's free memory less 1.5 GiB: below model.vram_budget_gb";
    }
    return b;
}

ork_status ork_tc_release_check(size_t held, const char *encoder) {
    if (!held) return ORK_OK;
    return ORK_FAIL(ORK_E_INTERNAL, "text encoder %s: %zu device bytes still held after the encode (its weights, "
                    "graph and quantizer were freed): the denoiser's plan counts on all of it given back",
                    encoder ? encoder : "?", held);
}

size_t ork_tc_lm_slot_extra(const tc_plan *p) {
    return p->w_block_max + ((size_t)2 << 20); /* a slot's records are ORK_STREAM_ALIGN-aligned: slack */
}

int ork_tc_lm_streamer(const tc_plan *p, size_t budget, int on_device, int group) {
    const char *e = getenv("ORAKUL_TEXT_STREAM");
    if (!p->layer_major || (e && *e && !strcmp(e, "0"))) return 0;
    if (p->w_total > ork_tc_wcache_limit()) return 0; /* the host cannot hold them all: per-block loads */
    if (!budget) return 1;
    size_t need = p->peak + ork_tc_lm_slot_extra(p) + (on_device ? (size_t)group * p->carry_per_caption : 0);
    return budget >= need;
}

/* Bytes a weight of the checkpoint takes on the host as the plugin puts it:
 * a bf16 checkpoint's (FLUX.2's encoders ship bf16), 1 a byte when quantized in the file. */
static size_t put_bytes(const ork_weight_decl *d) {
    int64_t n = 1;
    for (int k = 0; k < d->ndim; k++) n *= d->shape[k];
    return (size_t)n * 2;
}

/* The embeddings encode_each holds at once: one chunk's rows for one encoder
 * (handed to the callback as they come), else a group of ORAKUL_TEXT_GROUP_GIB. */
static size_t rows_bytes(const ork_textcond *tc, int n, int chunk) {
    size_t per = ((size_t)tc->T * tc->ctx_dim + (size_t)tc->vec_dim) * sizeof(float);
    if (tc->n == 1) return (size_t)(chunk < n ? chunk : n) * per;
    double gib = 4;
    const char *gg = getenv("ORAKUL_TEXT_GROUP_GIB");
    if (gg && atof(gg) > 0) gib = atof(gg);
    size_t fit = (size_t)(gib * GIB) / (per ? per : 1);
    if (fit < 1) fit = 1;
    return ((size_t)n < fit ? (size_t)n : fit) * per;
}

ork_status ork_tc_encode_plan_make(const ork_textcond *tc, const ork_backend *be, size_t budget_bytes, int n,
                                   ork_tc_encode_plan *out) {
    memset(out, 0, sizeof *out);
    out->captions = n;
    if (!tc) return ORK_OK;
    int cuda = be && be->device == ORK_DEV_CUDA;
    ork_dtype act = ork_tc_act_dtype(be);
    out->act = act;
    out->budget = ork_tc_budget_fit(be, budget_bytes, tc->o.device_index, 1, &out->budget_why);
    const char *kind = cuda ? "h200" : "cpu", *pd = getenv("ORAKUL_PLAN_DEVICE");
    if (cuda && pd && *pd) kind = pd;
    ork_device_kind dk;
    if (!ork_device_kind_find(kind, &dk)) ork_device_kind_find("h200", &dk);
    out->device = dk.name;
    out->link_gbs = cuda ? dk.h2d_gbs : 0;
    out->gemm_tflops = dk.tflops;
    out->mfu = dk.mfu > 0 ? dk.mfu : 0.5;
    size_t host_max = 0, tok_max = 0;
    for (int i = 0; i < tc->n && i < ORK_TC_PLAN_SLOTS; i++) {
        const tc_slot *t = &tc->sl[i];
        ork_tc_slot_plan *s = &out->s[out->n++];
        tc_plan p;
        ORK_TRY(ork_tc_plan(t, act, out->budget, n, 0, &p));
        s->encoder = t->s.encoder;
        s->layer_major = p.layer_major;
        s->chunk = p.chunk;
        s->blocks = t->info.n_blocks;
        s->on_device = 1;
        s->group = n > 0 ? n : 1;
        if (p.layer_major) ork_tc_lm_group(&p, out->budget, n, &s->on_device, &s->group);
        if (s->group < 1) s->group = 1;
        s->streamer = ork_tc_lm_streamer(&p, out->budget, s->on_device, s->group);
        s->passes = n > 0 ? (n + s->group - 1) / s->group : 1;
        if (!p.layer_major) s->passes = 1;
        s->w_total = p.w_total;
        s->w_block_max = p.w_block_max;
        s->device_peak = p.peak + (s->streamer ? ork_tc_lm_slot_extra(&p) : 0);
        s->link_bytes = (size_t)s->passes * p.w_total;
        if (p.layer_major && !s->on_device) { /* each caption's carry down and up at every block */
            s->link_bytes += 2 * (size_t)n * (size_t)s->blocks * p.carry_per_caption;
            s->host_carries = (size_t)s->group * p.carry_per_caption;
        }
        if (s->streamer) /* every stored weight in pinned host memory (quantized ones as stored) */
            s->host_cache = p.w_total;
        else if (p.layer_major && s->blocks > 1)
            for (int w = 0; w < t->info.n_weights; w++)
                if (t->info.weights[w].block > 0 && t->info.weights[w].block < s->blocks)
                    s->host_cache += put_bytes(&t->info.weights[w]);
        double rate = dk.tflops * 1e12 * out->mfu;
        s->t_compute = rate > 0 ? p.flops_per_caption * n / rate : 0;
        s->t_link = cuda && dk.h2d_gbs > 0 ? (double)s->link_bytes / (dk.h2d_gbs * 1e9) : 0;
        /* the streamer: block k+1 crosses the link while block k runs (the first block's alone) */
        s->t_pred = s->streamer ? (s->t_link > s->t_compute ? s->t_link : s->t_compute) + s->t_link / s->blocks
                                : s->t_compute + s->t_link;
        if (s->host_carries > host_max) host_max = s->host_carries;
        if (s->host_cache > out->host_cache) out->host_cache = s->host_cache;
        size_t tok = (size_t)(n > 0 ? n : 1) * (size_t)t->L * 2 * sizeof(int32_t);
        if (tok > tok_max) tok_max = tok;
        if (s->device_peak > out->device_peak) out->device_peak = s->device_peak;
        out->link_bytes += s->link_bytes;
        out->t_pred += s->t_pred;
    }
    out->host_need = host_max + tok_max + rows_bytes(tc, n, out->n ? out->s[0].chunk : 1);
    return ORK_OK;
}

void ork_tc_encode_plan_print(const ork_textcond *tc, const ork_tc_encode_plan *p, FILE *out) {
    if (!tc) {
        fprintf(out, "text encode: none (zero text embeddings, or <image>.te.safetensors files)\n");
        return;
    }
    fprintf(out, "text encode: %d caption%s, txt (%d, %d)", p->captions, p->captions == 1 ? "" : "s", tc->T,
            tc->ctx_dim);
    if (tc->vec_dim) fprintf(out, ", vec (%d)", tc->vec_dim);
    fprintf(out, ", within %.2f GiB (%s); one encoder at a time, all of its memory given back before the "
            "denoiser's plan\n", p->budget / GIB, p->budget_why ? p->budget_why : "?");
    for (int i = 0; i < p->n && i < tc->n; i++) {
        const tc_slot *t = &tc->sl[i];
        const ork_tc_slot_plan *s = &p->s[i];
        fprintf(out, "  %-5s %s (%s) from %s: %d blocks, %d tokens, weights %.2f GiB %s%s\n", t->s.encoder,
                t->pc->c->id, t->info.variant ? t->info.variant : "?", t->weights, s->blocks, t->L, s->w_total / GIB,
                t->qpc ? t->qpc->c->id : ork_dtype_name(p->act),
                t->qpc ? " (model.quantize_te)" : "");
        if (s->layer_major && s->streamer)
            fprintf(out, "        streamed (layer-major through the block streamer: every weight put once into "
                    "pinned host memory, two device slots, block k+1 over the link while block k runs; carries on "
                    "the %s): %d caption%s per chunk, %d weight pass%s of up to %d captions, %.2f GB over the link, "
                    "device peak %.2f GiB (two slots of %.2f GiB); host: carries %.2f GiB, pinned weights %.2f GiB\n",
                    s->on_device ? "device" : "host", s->chunk, s->chunk == 1 ? "" : "s", s->passes,
                    s->passes == 1 ? "" : "es", s->group, s->link_bytes / 1e9, s->device_peak / GIB,
                    s->w_block_max / GIB, s->host_carries / GIB, s->host_cache / GIB);
        else if (s->layer_major)
            fprintf(out, "        streamed (layer-major: each block over the link once per weight pass, every caption "
                    "through it; carries on the %s): %d caption%s per chunk, %d weight pass%s of up to %d captions, "
                    "%.2f GB over the link, device peak %.2f GiB (largest block %.2f GiB); host: carries %.2f GiB, "
                    "later blocks' weights %.2f GiB kept while block 0 loads (else read again)\n",
                    s->on_device ? "device" : "host", s->chunk, s->chunk == 1 ? "" : "s", s->passes,
                    s->passes == 1 ? "" : "es", s->group, s->link_bytes / 1e9, s->device_peak / GIB,
                    s->w_block_max / GIB, s->host_carries / GIB, s->host_cache / GIB);
        else
            fprintf(out, "        resident: %d caption%s per chunk, %.2f GB over the link once, device peak %.2f "
                    "GiB\n", s->chunk, s->chunk == 1 ? "" : "s", s->link_bytes / 1e9, s->device_peak / GIB);
        if (p->link_gbs > 0)
            fprintf(out, "        predicted %.1f s: link %.1f s (%.2f GB at %.0f GB/s) %s compute %.1f s (at %.0f%% of "
                    "%s's %.0f TFLOP/s)\n", s->t_pred, s->t_link, s->link_bytes / 1e9, p->link_gbs,
                    s->streamer ? "overlapped with" : "+", s->t_compute, 100 * p->mfu, p->device, p->gemm_tflops);
        else
            fprintf(out, "        predicted %.1f s: compute at %.0f%% of %s's %.1f TFLOP/s (no link)\n", s->t_pred,
                    100 * p->mfu, p->device, p->gemm_tflops);
    }
    fprintf(out, "  text encode predicted %.1f s in all (%.1f captions/s), %.2f GB over the link, device peak %.2f "
            "GiB, host %.2f GiB (+ up to %.2f GiB of weights kept, when available)\n", p->t_pred,
            p->t_pred > 0 ? p->captions / p->t_pred : 0.0, p->link_bytes / 1e9, p->device_peak / GIB,
            p->host_need / GIB, p->host_cache / GIB);
}

ork_status ork_tc_encode_plan_check_host(const ork_tc_encode_plan *p, size_t available, const char *what) {
    size_t need = p->host_need + ((size_t)2 << 30);
    if (!available || need <= available) return ORK_OK;
    return ORK_FAIL(ORK_E_BUDGET, "%s%stext encode: needs %.2f GiB of host memory (carries, tokens, embeddings; +2 GiB "
                    "for the process) but this machine has %.2f GiB available: raise model.vram_budget_gb (the carries "
                    "stay on the device), lower ORAKUL_TEXT_HOST_GIB, or use a machine with more RAM",
                    what ? what : "", what ? ": " : "", need / GIB, available / GIB);
}
