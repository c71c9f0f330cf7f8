/* tests/stream/flux_shapes.h — FLUX.1-dev's block and weight declarations
 * (BFL names and shapes: 19 double blocks, 38 single blocks, hidden 3072,
 * MLP 12288, 24 heads of 128) without the plugin, for the planner tests and
 * bench/stream. Block 0 holds the embedders, block 58 the final layer. With
 * the declarations the plugin makes from these names (its flux_decl.h). */
#ifndef ORK_TEST_STREAM_FLUX_SHAPES_H
#define ORK_TEST_STREAM_FLUX_SHAPES_H

#include <orakul/model.h>

#include "../../plugins/models/flux/flux_decl.h" /* what the plugin declares from these names */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FX_BLOCKS 59
#define FX_MAXW 1400

typedef struct fx_model {
    ork_model_info info;
    ork_weight_decl w[FX_MAXW];
    ork_block_decl bd[FX_BLOCKS];
    ork_model_schedule sched;
    char names[FX_MAXW][128];
    char bnames[FX_BLOCKS][32];
    const char *bn[FX_BLOCKS];
} fx_model;

static void fx_add(fx_model *m, int block, uint32_t flags, int64_t d0, int64_t d1, const char *name) {
    int i = m->info.n_weights++;
    snprintf(m->names[i], sizeof m->names[i], "%s", name);
    ork_weight_decl *d = &m->w[i];
    memset(d, 0, sizeof *d);
    d->name = m->names[i];
    d->ndim = d1 ? 2 : 1;
    d->shape[0] = d0;
    d->shape[1] = d1;
    d->block = block;
    d->flags = flags;
}

/* A linear (out, in) with its bias. */
static void fx_lin(fx_model *m, int block, const char *pre, int64_t out, int64_t in) {
    char n[128];
    snprintf(n, sizeof n, "%s.weight", pre);
    fx_add(m, block, ORK_WEIGHT_LINEAR, out, in, n);
    snprintf(n, sizeof n, "%s.bias", pre);
    fx_add(m, block, ORK_WEIGHT_BIAS, out, 0, n);
}

static void fx_init(fx_model *m) {
    memset(m, 0, sizeof *m);
    const int64_t h = 3072, mlp = 12288, hd = 128;
    m->info.family = "flux";
    m->info.variant = "flux1-dev";
    m->info.n_blocks = FX_BLOCKS;
    m->info.weights = m->w;
    m->info.block_names = m->bn;
    m->info.token_channels = 64;
    m->info.pixels_per_token = 16;
    m->info.context_dim = 4096;
    m->info.context_len = 512;
    m->info.vec_dim = 768;
    m->info.has_guidance = 1;
    m->info.lora_format = "peft-bfl";
    snprintf(m->bnames[0], 32, "embedders");
    for (int i = 0; i < 19; i++) snprintf(m->bnames[1 + i], 32, "double_blocks.%d", i);
    for (int i = 0; i < 38; i++) snprintf(m->bnames[20 + i], 32, "single_blocks.%d", i);
    snprintf(m->bnames[58], 32, "final_layer");
    for (int b = 0; b < FX_BLOCKS; b++) m->bn[b] = m->bnames[b];
    fx_lin(m, 0, "img_in", h, 64);
    fx_lin(m, 0, "time_in.in_layer", h, 256);
    fx_lin(m, 0, "time_in.out_layer", h, h);
    fx_lin(m, 0, "guidance_in.in_layer", h, 256);
    fx_lin(m, 0, "guidance_in.out_layer", h, h);
    fx_lin(m, 0, "vector_in.in_layer", h, 768);
    fx_lin(m, 0, "vector_in.out_layer", h, h);
    fx_lin(m, 0, "txt_in", h, 4096);
    char p[64];
    for (int i = 0; i < 19; i++) {
        const char *s[2] = {"img", "txt"};
        for (int k = 0; k < 2; k++) {
            snprintf(p, sizeof p, "double_blocks.%d.%s_mod.lin", i, s[k]); fx_lin(m, 1 + i, p, 6 * h, h);
            snprintf(p, sizeof p, "double_blocks.%d.%s_attn.qkv", i, s[k]); fx_lin(m, 1 + i, p, 3 * h, h);
            snprintf(p, sizeof p, "double_blocks.%d.%s_attn.norm.query_norm.scale", i, s[k]); fx_add(m, 1 + i, ORK_WEIGHT_NORM, hd, 0, p);
            snprintf(p, sizeof p, "double_blocks.%d.%s_attn.norm.key_norm.scale", i, s[k]); fx_add(m, 1 + i, ORK_WEIGHT_NORM, hd, 0, p);
            snprintf(p, sizeof p, "double_blocks.%d.%s_attn.proj", i, s[k]); fx_lin(m, 1 + i, p, h, h);
            snprintf(p, sizeof p, "double_blocks.%d.%s_mlp.0", i, s[k]); fx_lin(m, 1 + i, p, mlp, h);
            snprintf(p, sizeof p, "double_blocks.%d.%s_mlp.2", i, s[k]); fx_lin(m, 1 + i, p, h, mlp);
        }
    }
    for (int i = 0; i < 38; i++) {
        snprintf(p, sizeof p, "single_blocks.%d.modulation.lin", i); fx_lin(m, 20 + i, p, 3 * h, h);
        snprintf(p, sizeof p, "single_blocks.%d.linear1", i); fx_lin(m, 20 + i, p, 3 * h + mlp, h);
        snprintf(p, sizeof p, "single_blocks.%d.linear2", i); fx_lin(m, 20 + i, p, h, h + mlp);
        snprintf(p, sizeof p, "single_blocks.%d.norm.query_norm.scale", i); fx_add(m, 20 + i, ORK_WEIGHT_NORM, hd, 0, p);
        snprintf(p, sizeof p, "single_blocks.%d.norm.key_norm.scale", i); fx_add(m, 20 + i, ORK_WEIGHT_NORM, hd, 0, p);
    }
    fx_lin(m, 58, "final_layer.adaLN_modulation.1", 2 * h, h);
    fx_lin(m, 58, "final_layer.linear", 64, h);
    /* ABI 1.3: the declarations the FLUX plugin makes (flux_decl.h) */
    m->info.abi = (ork_abi)ORK_ABI_INIT(ork_model_info);
    flux_tag_weights(m->w, m->info.n_weights);
    for (int b = 0; b < FX_BLOCKS; b++) m->bd[b] = flux_block_decl(m->bn[b]);
    m->sched = flux_schedule(m->info.variant, m->info.token_channels);
    m->info.blocks = m->bd;
    m->info.lora_targets = flux_lora_targets();
    m->info.schedule = &m->sched;
}

#endif
