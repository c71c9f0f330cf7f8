/* te_plugin.c — the t5clip plugin's entry: two text_encoder components (ABI
 * 1.3), "org.orakul.t5" (T5 v1.1 encoder; aliases t5, t5xxl) and
 * "org.orakul.clip" (CLIP text transformer; aliases clip, clip_l), their key
 * tables and the vtable glue. Each create() makes an independent te_model. */
#include "te.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const ork_host *g_host; /* set by init, valid until deinit */

#define P(field) offsetof(te_params, field)
static const ork_param clip_keys[] = {
    {"num_heads", ORK_PARAM_INT, 1, 0, "0", 0, 1024, NULL, P(num_heads),
     "attention heads when no config.json lies beside the weights (0: width / 64, CLIP-L's 12)"},
    {NULL},
};
#undef P

static ork_status create(const ork_host *host, const void *params, te_family fam, void **self) {
    te_model *m = calloc(1, sizeof *m);
    if (!m) return ORK_E_NOMEM;
    m->fam = fam;
    ork_status s = ork_hf_services_get(host ? host : g_host, ORK_HF_NEED_TEXT_OPS, &m->sv);
    if (s != ORK_OK) {
        free(m);
        return s;
    }
    m->host = m->sv.host;
    m->ops = m->sv.ops;
    m->ta = m->sv.ta;
    m->st = m->sv.st;
    if (params) m->p = *(const te_params *)params;
    *self = m;
    return ORK_OK;
}
static ork_status t5_create(const ork_host *h, const void *p, void **self) { return create(h, p, TE_T5, self); }
static ork_status clip_create(const ork_host *h, const void *p, void **self) { return create(h, p, TE_CLIP, self); }

static void destroy(void *self) {
    te_model *m = self;
    if (!m) return;
    ork_hf_checkpoint_close(&m->sv, &m->ck);
    for (int i = 0; i < m->n_weights; i++) free(m->weight_names[i]);
    for (int i = 0; i < m->n_blocks; i++) free(m->block_names[i]);
    free(m->weight_names);
    free(m->weights);
    free(m->block_names);
    free(m);
}

static ork_status open_(void *self, const char *name_or_path, ork_text_encoder_info *info) {
    te_model *m = self;
    if (m->ck.src) {
        TE_LOG(m, ORK_LEVEL_ERROR, "open: this instance already opened %s", m->ck.path);
        return ORK_E_INVALID;
    }
    ORK_TRY(te_open_source(m, name_or_path));
    memset(info, 0, sizeof *info);
    info->abi = (ork_abi)ORK_ABI_INIT(ork_text_encoder_info);
    ORK_TRY(m->fam == TE_T5 ? te_t5_open(m, info) : te_clip_open(m, info));
    info->variant = m->c.variant;
    info->n_blocks = m->n_blocks;
    info->block_names = (const char *const *)m->block_names;
    info->n_weights = m->n_weights;
    info->weights = m->weights;
    info->vocab_size = m->c.vocab;
    info->pad_id = m->c.pad_id;
    info->eos_id = m->c.eos_id;
    info->bos_id = m->c.bos_id;
    return ORK_OK;
}

static ork_status load(void *self, const ork_weight_sink *sink) {
    te_model *m = self;
    if (!m->ck.src) return ORK_E_INVALID;
    return te_load(m, sink);
}

static ork_status begin(void *self, ork_graph *g, const ork_text_encoder_inputs *in, ork_carry *c) {
    te_model *m = self;
    if (!m->ck.src) {
        TE_LOG(m, ORK_LEVEL_ERROR, "begin before open");
        return ORK_E_INVALID;
    }
    return m->fam == TE_T5 ? te_t5_begin(m, g, in, c) : te_clip_begin(m, g, in, c);
}

static ork_status block(void *self, ork_graph *g, int i, ork_carry *c) {
    te_model *m = self;
    if (i < 0 || i >= m->n_blocks) {
        TE_LOG(m, ORK_LEVEL_ERROR, "block %d of %d", i, m->n_blocks);
        return ORK_E_INVALID;
    }
    return m->fam == TE_T5 ? te_t5_block(m, g, i, c) : te_clip_block(m, g, i, c);
}

static ork_status end(void *self, ork_graph *g, ork_carry *c, ork_text_encoder_outputs *out) {
    te_model *m = self;
    memset(out, 0, sizeof *out);
    out->abi = (ork_abi)ORK_ABI_INIT(ork_text_encoder_outputs);
    if (!c->t[TE_X]) {
        TE_LOG(m, ORK_LEVEL_ERROR, "end before the blocks ran");
        return ORK_E_INVALID;
    }
    if (m->fam == TE_CLIP) return te_clip_end(m, g, c, out);
    out->hidden = c->t[TE_X];
    return ORK_OK;
}

static const ork_text_encoder_vtable t5_vtable = {
    .abi = ORK_ABI_INIT(ork_text_encoder_vtable),
    .create = t5_create, .destroy = destroy, .open = open_, .load = load, .begin = begin, .block = block, .end = end,
};
static const ork_text_encoder_vtable clip_vtable = {
    .abi = ORK_ABI_INIT(ork_text_encoder_vtable),
    .create = clip_create, .destroy = destroy, .open = open_, .load = load, .begin = begin, .block = block, .end = end,
};

static const char *const t5_aliases[] = {"t5", "t5xxl", NULL};
static const char *const clip_aliases[] = {"clip", "clip_l", NULL};

static const ork_component t5_component = {
    .abi = ORK_ABI_INIT(ork_component),
    .kind = ORK_KIND_TEXT_ENCODER,
    .id = "org.orakul.t5",
    .aliases = t5_aliases,
    .description = "T5 v1.1 encoder (T5EncoderModel weights: T5-XXL for FLUX.1), forward only; last_hidden_state",
    .params = NULL,
    .params_size = sizeof(te_params),
    .vtable = &t5_vtable,
};
static const ork_component clip_component = {
    .abi = ORK_ABI_INIT(ork_component),
    .kind = ORK_KIND_TEXT_ENCODER,
    .id = "org.orakul.clip",
    .aliases = clip_aliases,
    .description = "CLIP text transformer (CLIPTextModel weights: CLIP-L for FLUX.1), forward only; hidden and pooled",
    .params = clip_keys,
    .params_size = sizeof(te_params),
    .vtable = &clip_vtable,
};

static ork_status te_init(const ork_host *host) {
    g_host = host;
    return ORK_OK;
}
static void te_deinit(void) { g_host = NULL; }

static const ork_component *const te_components[] = {&t5_component, &clip_component, NULL};

static const ork_plugin_entry te_entry = {
    .abi = ORK_ABI_INIT(ork_plugin_entry),
    .name = "t5clip",
    .version = "1.0.0",
    .description = "Text encoders: T5 v1.1 and CLIP text (FLUX.1's), forward only",
    .init = te_init,
    .deinit = te_deinit,
    .components = te_components,
};

ORK_PLUGIN_ENTRY(te_entry)
