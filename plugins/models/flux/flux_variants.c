/* flux_variants.c — the named FLUX variants (FLUX.md §1.1, §2.1) and the
 * derived fields every variant shares. */
#include "flux.h"

#include <string.h>

typedef struct { const char *name; flux_cfg c; } preset;

/* version, in, hidden, heads, head_dim, mlp, depth, single, ctx, vec, guidance */
static const preset presets[] = {
    {"flux1-dev",      {"flux1-dev", 1, 64, 3072, 24, 128, 12288, 19, 38, 4096, 768, 1, 0, 0, {0}, 0}},
    {"flux1-schnell",  {"flux1-schnell", 1, 64, 3072, 24, 128, 12288, 19, 38, 4096, 768, 0, 0, 0, {0}, 0}},
    {"flux2-dev",      {"flux2-dev", 2, 128, 6144, 48, 128, 18432, 8, 48, 15360, 0, 1, 0, 0, {0}, 0}},
    {"flux2-klein-4b", {"flux2-klein-4b", 2, 128, 3072, 24, 128, 9216, 5, 20, 7680, 0, 0, 0, 0, {0}, 0}},
    {"flux2-klein-9b", {"flux2-klein-9b", 2, 128, 4096, 32, 128, 12288, 8, 24, 12288, 0, 0, 0, 0, {0}, 0}},
};

void flux_cfg_derive(flux_cfg *c) {
    if (c->heads > 0) c->head_dim = c->hidden / c->heads;
    c->bias = c->version == 1;
    if (c->version == 1) {
        /* axes [16, 56, 56] at head_dim 128; scaled for custom head sizes */
        c->n_axes = 3;
        int a0 = c->head_dim / 8;
        a0 -= a0 % 2;
        int rest = (c->head_dim - a0) / 2;
        rest -= rest % 2;
        c->axes[0] = c->head_dim - 2 * rest;
        c->axes[1] = rest;
        c->axes[2] = rest;
        c->axes[3] = 0;
        c->theta = 10000.0f;
    } else {
        c->n_axes = 4;
        int a = c->head_dim / 4;
        a -= a % 2;
        c->axes[0] = c->head_dim - 3 * a;
        c->axes[1] = c->axes[2] = c->axes[3] = a;
        c->theta = 2000.0f;
    }
}

int flux_preset(const char *name, flux_cfg *out) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(presets[i].name, name) == 0) {
            *out = presets[i].c;
            flux_cfg_derive(out);
            return 1;
        }
    return 0;
}

const char *flux_cfg_match(const flux_cfg *c) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        const flux_cfg *p = &presets[i].c;
        if (p->version == c->version && p->in_channels == c->in_channels && p->hidden == c->hidden &&
            p->heads == c->heads && p->mlp_hidden == c->mlp_hidden && p->depth == c->depth &&
            p->depth_single == c->depth_single && p->context_dim == c->context_dim &&
            p->vec_dim == c->vec_dim && p->guidance == c->guidance)
            return p->variant;
    }
    return "custom";
}
