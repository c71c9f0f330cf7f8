/* llm_plugin.c — the llm plugin's entry: two text_encoder components (ABI
 * 1.3), "org.orakul.mistral3" (Mistral-Small-3.x's language model, FLUX.2-dev;
 * aliases mistral3, mistral) and "org.orakul.qwen3" (Qwen3 4B / 8B, FLUX.2
 * klein; alias qwen3), their key table and the vtable glue. Each create()
 * makes an independent llm_model. */
#include "llm.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const ork_host *g_host; /* set by init, valid until deinit */

static const ork_param mistral_keys[] = {
    {"hidden_layers", ORK_PARAM_INT, 3, 0, "[10, 20, 30]", 0, 1024, NULL, offsetof(llm_params, hidden_layers),
     "the hidden_states indices stacked (0: the embeddings, k: layer k's output; FLUX.2-dev's 10, 20, 30)"},
    {NULL},
};
static const ork_param qwen_keys[] = {
    {"hidden_layers", ORK_PARAM_INT, 3, 0, "[9, 18, 27]", 0, 1024, NULL, offsetof(llm_params, hidden_layers),
     "the hidden_states indices stacked (0: the embeddings, k: layer k's output; FLUX.2 klein's 9, 18, 27)"},
    {NULL},
};

static ork_status create(const ork_host *host, const void *params, llm_family fam, void **self) {
    llm_model *m = calloc(1, sizeof *m);
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
    if (params) m->p = *(const llm_params *)params;
    *self = m;
    return ORK_OK;
}
static ork_status mistral_create(const ork_host *h, const void *p, void **self) { return create(h, p, LLM_MISTRAL, self); }
static ork_status qwen_create(const ork_host *h, const void *p, void **self) { return create(h, p, LLM_QWEN3, self); }

static void destroy(void *self) {
    llm_model *m = self;
    if (!m) return;
    ork_hf_checkpoint_close(&m->sv, &m->ck);
    free(m->names);
    free(m->join);
    free(m->weights);
    free((void *)m->block_names);
    free(m);
}

static ork_status open_(void *self, const char *name_or_path, ork_text_encoder_info *info) {
    llm_model *m = self;
    if (m->ck.src) {
        LLM_LOG(m, ORK_LEVEL_ERROR, "open: this instance already opened %s", m->ck.path);
        return ORK_E_INVALID;
    }
    memset(info, 0, sizeof *info);
    info->abi = (ork_abi)ORK_ABI_INIT(ork_text_encoder_info);
    return llm_open(m, name_or_path, info);
}

static ork_status load(void *self, const ork_weight_sink *sink) {
    llm_model *m = self;
    if (!m->ck.src || !m->n_blocks) return ORK_E_INVALID;
    return llm_load(m, sink);
}

static ork_status begin(void *self, ork_graph *g, const ork_text_encoder_inputs *in, ork_carry *c) {
    llm_model *m = self;
    if (!m->n_blocks) {
        LLM_LOG(m, ORK_LEVEL_ERROR, "begin before open");
        return ORK_E_INVALID;
    }
    return llm_begin(m, g, in, c);
}

static ork_status block(void *self, ork_graph *g, int i, ork_carry *c) { return llm_block(self, g, i, c); }

static ork_status end(void *self, ork_graph *g, ork_carry *c, ork_text_encoder_outputs *out) {
    memset(out, 0, sizeof *out);
    out->abi = (ork_abi)ORK_ABI_INIT(ork_text_encoder_outputs);
    return llm_end(self, g, c, out);
}

static ork_status select_hidden(void *self, int n, const int32_t *hidden_states) {
    llm_model *m = self;
    if (m->ck.src || n < 1 || n > LLM_MAX_OUT || !hidden_states) {
        LLM_LOG(m, ORK_LEVEL_ERROR, "select_hidden: %d hidden states%s (1 .. %d, before open)", n,
                m->ck.src ? " after open" : "", LLM_MAX_OUT);
        return ORK_E_INVALID;
    }
    m->n_sel = n;
    for (int i = 0; i < n; i++) m->sel[i] = hidden_states[i];
    return ORK_OK;
}

static const ork_text_encoder_vtable mistral_vtable = {
    .abi = ORK_ABI_INIT(ork_text_encoder_vtable),
    .create = mistral_create, .destroy = destroy, .open = open_, .load = load, .begin = begin, .block = block,
    .end = end, .select_hidden = select_hidden,
};
static const ork_text_encoder_vtable qwen_vtable = {
    .abi = ORK_ABI_INIT(ork_text_encoder_vtable),
    .create = qwen_create, .destroy = destroy, .open = open_, .load = load, .begin = begin, .block = block,
    .end = end, .select_hidden = select_hidden,
};

static const char *const mistral_aliases[] = {"mistral3", "mistral", NULL};
static const char *const qwen_aliases[] = {"qwen3", NULL};

static const ork_component mistral_component = {
    .abi = ORK_ABI_INIT(ork_component),
    .kind = ORK_KIND_TEXT_ENCODER,
    .id = "org.orakul.mistral3",
    .aliases = mistral_aliases,
    .description = "Mistral-Small-3.x language model (FLUX.2-dev's text encoder; the vision tower is not read), "
                   "forward only; hidden states 10, 20, 30 stacked",
    .params = mistral_keys,
    .params_size = sizeof(llm_params),
    .vtable = &mistral_vtable,
};
static const ork_component qwen_component = {
    .abi = ORK_ABI_INIT(ork_component),
    .kind = ORK_KIND_TEXT_ENCODER,
    .id = "org.orakul.qwen3",
    .aliases = qwen_aliases,
    .description = "Qwen3 language model (FLUX.2 klein's text encoder: 4B, 8B), forward only; hidden states 9, 18, "
                   "27 stacked",
    .params = qwen_keys,
    .params_size = sizeof(llm_params),
    .vtable = &qwen_vtable,
};

static ork_status llm_init(const ork_host *host) {
    g_host = host;
    return ORK_OK;
}
static void llm_deinit(void) { g_host = NULL; }

static const ork_component *const llm_components[] = {&mistral_component, &qwen_component, NULL};

static const ork_plugin_entry llm_entry = {
    .abi = ORK_ABI_INIT(ork_plugin_entry),
    .name = "llm",
    .version = "1.0.0",
    .description = "Text encoders: decoder-only language models (FLUX.2's Mistral-Small-3.x and Qwen3), forward only",
    .init = llm_init,
    .deinit = llm_deinit,
    .components = llm_components,
};

ORK_PLUGIN_ENTRY(llm_entry)
