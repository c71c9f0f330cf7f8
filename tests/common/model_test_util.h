/* model_test_util.h — a model opened through the core's APIs the way train/ opens it,
 * for tests that check the weight store, the LoRA network or the runner without
 * `orakul run`: the config loaded, the built plugins scanned (ORK_PLUGIN_DIR), the
 * model (and optionally the quantizer) component resolved with its checked params, the
 * weights loaded into an F32 CPU weight store (linear weights quantized when the
 * config names a quantizer), and a runner; plus one forward on fixed seeded inputs.
 * Header-only (static functions). Owns the ork_test_model it fills (ork_test_model_free). */
#ifndef ORK_MODEL_TEST_UTIL_H
#define ORK_MODEL_TEST_UTIL_H

#include "config/config.h"
#include "plugin/registry.h"
#include "tensor/graph.h"
#include "tensor/ops.h"
#include "train/rng.h"
#include "train/runner.h"
#include "train/services.h"
#include "train/wstore.h"

#include <orakul/orakul.h>

#include <stdlib.h>
#include <string.h>

typedef struct ork_test_model {
    ork_config *cfg;
    ork_registry *reg;
    void *mparams, *qparams;
    const ork_model_vtable *vt;
    void *model;
    const ork_quant_vtable *qvt; /* NULL: no quantizer */
    void *quant;
    ork_model_info info;
    const ork_backend *be;
    const ork_tensor_api *ta;
    ork_alloc *alloc;
    ork_graph *g;
    ork_wstore *ws;
    ork_runner *runner;
} ork_test_model;

static inline void ork_test_model_free(ork_test_model *m) {
    if (m->runner) ork_runner_destroy(m->runner);
    if (m->ws) ork_wstore_destroy(m->ws);
    if (m->quant) m->qvt->destroy(m->quant);
    if (m->model) m->vt->destroy(m->model);
    if (m->g) ork_graph_destroy(m->g);
    if (m->alloc) ork_alloc_destroy(m->alloc);
    free(m->mparams);
    free(m->qparams);
    if (m->reg) ork_registry_destroy(m->reg);
    if (m->cfg) ork_config_free(m->cfg);
    memset(m, 0, sizeof *m);
}

/* The config's component of kind: found in the registry, its params parsed and checked. */
static inline ork_status ork_test_model_component(ork_test_model *m, ork_component_kind kind,
                                                  const ork_plugin_component **pc, void **params) {
    ork_loc at;
    const char *name = ork_config_component_name(m->cfg, kind, &at);
    if (!(*pc = ork_registry_find(m->reg, kind, name))) return ORK_E_CONFIG;
    size_t sz = (*pc)->c->params_size ? (*pc)->c->params_size : 1;
    if (!(*params = calloc(1, sz))) return ORK_E_NOMEM;
    return ork_config_component_params(m->cfg, ork_config_component_params_path(kind), (*pc)->c->params, *params,
                                       (*pc)->c->params_size);
}

/* The model of config cfg_path on the CPU; quantized: the config's model.quantize
 * quantizer stores the linear weights. On failure m holds what was made (free it). */
static inline ork_status ork_test_model_open(ork_test_model *m, const char *cfg_path, int quantized) {
    memset(m, 0, sizeof *m);
    ORK_TRY(ork_services_register());
    ORK_TRY(ork_config_load(cfg_path, &m->cfg));
    ORK_TRY(ork_registry_create(NULL, &m->reg));
    char *dirs[] = {(char *)ORK_PLUGIN_DIR};
    ORK_TRY(ork_registry_scan(m->reg, dirs, 1));
    const ork_plugin_component *mpc, *qpc;
    ORK_TRY(ork_test_model_component(m, ORK_KIND_MODEL, &mpc, &m->mparams));
    m->vt = mpc->c->vtable;
    ork_wstore_quant wq = {0};
    if (quantized) {
        ORK_TRY(ork_test_model_component(m, ORK_KIND_QUANT, &qpc, &m->qparams));
        m->qvt = qpc->c->vtable;
        ORK_TRY(m->qvt->create(&qpc->host, m->qparams, &m->quant));
        wq = (ork_wstore_quant){m->qvt, m->quant, qpc->c->id};
    }
    ORK_TRY(m->vt->create(&mpc->host, m->mparams, &m->model));
    ORK_TRY(m->vt->open(m->model, ork_config_process(m->cfg)->model.name_or_path, &m->info));
    m->be = ork_cpu_backend();
    m->ta = ork_tensor_api_table();
    ORK_TRY(ork_alloc_create(m->be, 0, &m->alloc));
    ork_graph_opts go = {0};
    go.act_dtype = ORK_F32;
    ORK_TRY(ork_graph_create(m->be, m->alloc, &go, &m->g));
    ORK_TRY(ork_wstore_create_quant(m->alloc, m->be, &m->g->k, &m->info, ORK_F32, NULL, quantized ? &wq : NULL,
                                    &m->ws));
    ORK_TRY(m->vt->load(m->model, ork_wstore_sink(m->ws)));
    ORK_TRY(ork_wstore_check_complete(m->ws));
    ork_wstore_attach(m->ws, m->g);
    return ork_runner_create(m->g, m->alloc, m->vt, m->model, &m->info, &m->runner);
}

/* One forward of the runner on fixed inputs (tokens, text, vector drawn from seed 7 of
 * the noise stream; timestep 0.63, guidance 3.5) for a ht × wt token grid; out: the
 * prediction (1, ht·wt, C) on the host, [ht·wt·C]. */
static inline ork_status ork_test_model_forward(ork_test_model *m, int ht, int wt, float *out) {
    const ork_model_info *in = &m->info;
    const int N = ht * wt, C = in->token_channels, T = in->context_len > 0 ? in->context_len : 8, D = in->context_dim;
    float *tok = malloc((size_t)N * C * sizeof *tok), *txt = malloc((size_t)T * D * sizeof *txt);
    float *vec = malloc((size_t)(in->vec_dim > 0 ? in->vec_dim : 1) * sizeof *vec);
    if (!tok || !txt || !vec) { free(tok); free(txt); free(vec); return ORK_E_NOMEM; }
    ork_rng r;
    ork_rng_init(&r, 7, ORK_RNG_NOISE);
    ork_rng_normal_f32(&r, tok, (int64_t)N * C);
    ork_rng_normal_f32(&r, txt, (int64_t)T * D);
    if (in->vec_dim > 0) ork_rng_normal_f32(&r, vec, in->vec_dim);
    float ts = 0.63f, gd = 3.5f;
    ork_model_inputs mi = {.abi = ORK_ABI_INIT(ork_model_inputs), .h_tokens = ht, .w_tokens = wt,
                           .timesteps_host = &ts, .guidance_host = in->has_guidance ? &gd : NULL};
    int64_t s3[3] = {1, N, C}, st[3] = {1, T, D}, sv[2] = {1, in->vec_dim}, s1 = 1;
    const ork_tensor_api *ta = m->ta;
    ork_status s = ork_graph_reset(m->g);
    if (s == ORK_OK) s = ta->from_host(m->g, ORK_F32, 3, s3, tok, &mi.tokens);
    if (s == ORK_OK) s = ta->from_host(m->g, ORK_F32, 3, st, txt, &mi.txt);
    if (s == ORK_OK && in->vec_dim > 0) s = ta->from_host(m->g, ORK_F32, 2, sv, vec, &mi.vec);
    if (s == ORK_OK) s = ta->from_host(m->g, ORK_F32, 1, &s1, &ts, &mi.timesteps);
    if (s == ORK_OK && in->has_guidance) s = ta->from_host(m->g, ORK_F32, 1, &s1, &gd, &mi.guidance);
    free(tok); free(txt); free(vec);
    ork_tensor *pred = NULL;
    if (s == ORK_OK) s = ork_runner_forward(m->runner, &mi, &pred);
    if (s == ORK_OK && ta->numel(pred) != (int64_t)N * C) s = ORK_E_INTERNAL;
    if (s == ORK_OK) s = ta->to_host(m->g, pred, ORK_F32, out);
    return s;
}

#endif
