/* train/components.c — the job's plugin components (model, loss, optimizer,
 * quantizer: resolved by name from the registry with their config keys; the
 * model's image codec, picked from the codec slots it declares), the
 * dataset folders checked before the model loads, and the backend for
 * process.device. [control-thread] */
#include "train/job.h"

#include "platform/platform.h"
#include "plugin/loader.h"
#include "plugin/model_decl.h"
#include "util/log.h"

#include <errno.h>
#include <string.h>
#include <stdlib.h>

#ifdef ORAKUL_HAVE_CUDA
#include "cuda/cuda_ctx.h"
#endif

static ork_status resolve(job *j, ork_component_kind kind, const ork_plugin_component **out, void **params) {
    ork_loc at;
    const char *name = ork_config_component_name(j->cfg, kind, &at);
    const ork_plugin_component *pc = ork_registry_find(j->reg, kind, name);
    if (!pc) {
        char list[1024] = "";
        size_t len = 0;
        for (int i = 0; i < ork_registry_count(j->reg); i++) {
            const ork_plugin *p = ork_registry_plugin(j->reg, i);
            for (int k = 0; k < p->n_components; k++) {
                const ork_component *c = p->components[k].c;
                if (c->kind != kind) continue;
                const char *shown = c->aliases && c->aliases[0] ? c->aliases[0] : c->id;
                len += (size_t)snprintf(list + len, len < sizeof list ? sizeof list - len : 0, "%s%s",
                                        len ? ", " : "", shown);
            }
        }
        return ork_config_fail_at(&at, ORK_E_CONFIG, "unknown %s '%s' (available: %s)", ork_kind_name(kind), name,
                                  len ? list : "none: no plugin of this kind was found");
    }
    size_t sz = pc->c->params_size ? pc->c->params_size : 1;
    void *buf = calloc(1, sz);
    if (!buf) return ORK_E_NOMEM;
    ork_status s = ork_config_component_params(j->cfg, ork_config_component_params_path(kind), pc->c->params, buf,
                                               pc->c->params_size);
    if (s != ORK_OK) { free(buf); return s; }
    *out = pc;
    *params = buf;
    return ORK_OK;
}

/* model.vae_path (ai-toolkit's key) reaches a model family that declares a
 * string key "vae_path" in its model_kwargs table, unless model_kwargs set it. */
static void pass_vae_path(job *j) {
    const char *vp = j->p->model.vae_path;
    if (!vp || !*vp || !j->c_model->c->params) return;
    for (const ork_param *k = j->c_model->c->params; k->key; k++)
        if (!strcmp(k->key, "vae_path") && k->type == ORK_PARAM_STRING) {
            const char **slot = (const char **)((char *)j->model_params + k->offset);
            if (!*slot || !**slot) *slot = vp;
            return;
        }
}

/* The fp8 quantizer's value of key (a string or int key it declares), or NULL. */
static const void *quant_key(const job *j, const char *key, ork_param_type type) {
    if (!j->c_quant || !j->c_quant->c->params || !j->quant_params) return NULL;
    for (const ork_param *k = j->c_quant->c->params; k->key; k++)
        if (!strcmp(k->key, key) && k->type == type) return (const char *)j->quant_params + k->offset;
    return NULL;
}

/* model.quantize_kwargs.fp8_gemm: a string key the fp8 quantizers declare
 * ("auto" | "dequant" | "native"); the core reads it for the graph (graph.h).
 * auto (the default, issue #31): native when block_size is 0 and the graph's
 * backend has the native FP8 GEMMs on this device (sm_89+), dequant otherwise,
 * without a line. ORK_FP8_GEMM=dequant|native still overrides (graph.c). */
int ork_train_fp8_gemm(const job *j) {
    const char *const *vp = quant_key(j, "fp8_gemm", ORK_PARAM_STRING);
    const char *v = vp ? *vp : NULL;
    if (!v) return ORK_FP8_GEMM_DEQUANT;
    if (!strcmp(v, "native")) return ORK_FP8_GEMM_NATIVE;
    if (strcmp(v, "auto") != 0) return ORK_FP8_GEMM_DEQUANT;
    const int64_t *block = quant_key(j, "block_size", ORK_PARAM_INT);
    if ((block && *block != 0) || !j->g || !j->g->be->linear_fp8) return ORK_FP8_GEMM_DEQUANT;
    char why[256];
    ork_fp8_linear_desc d = {.M = 0, .why = why, .why_n = sizeof why};
    return j->g->be->linear_fp8(&j->g->k, &d) == ORK_OK ? ORK_FP8_GEMM_NATIVE : ORK_FP8_GEMM_DEQUANT;
}

/* The plan's line about the fp8 GEMMs (fp8 quantizers only). */
void ork_train_fp8_plan_line(const job *j, FILE *out) {
    const char *const *vp = quant_key(j, "fp8_gemm", ORK_PARAM_STRING);
    if (!vp || !*vp) return;
    const int64_t *block = quant_key(j, "block_size", ORK_PARAM_INT);
    const char *env = getenv("ORK_FP8_GEMM"), *v = env && *env ? env : *vp;
    const char *src = env && *env ? "ORK_FP8_GEMM" : "model.quantize_kwargs.fp8_gemm";
    if (env && *env && strcmp(env, "dequant") != 0 && strcmp(env, "native") != 0)
        fprintf(out, "fp8 GEMMs: ORK_FP8_GEMM=%s is not native or dequant (run refuses it)\n", env);
    else if (!strcmp(v, "dequant"))
        fprintf(out, "fp8 GEMMs: dequantized to bf16 (%s: dequant)\n", src);
    else if (!strcmp(v, "native"))
        fprintf(out, "fp8 GEMMs: native FP8, forward and input gradient (%s: native; refused on a GPU below sm_89)\n",
                src);
    else if (block && *block != 0)
        fprintf(out, "fp8 GEMMs: dequantized to bf16 (block_size %lld has no native path)\n", (long long)*block);
    else
        fprintf(out, "fp8 GEMMs: native FP8, forward and input gradient, on sm_89+ GPUs (bf16 dequant elsewhere); "
                "fp8_gemm: dequant or ORK_FP8_GEMM=dequant forces the bf16 path\n");
}

ork_status ork_train_resolve_all(job *j) {
    ORK_TRY(resolve(j, ORK_KIND_MODEL, &j->c_model, &j->model_params));
    pass_vae_path(j);
    ORK_TRY(resolve(j, ORK_KIND_LOSS, &j->c_loss, &j->loss_params));
    ORK_TRY(resolve(j, ORK_KIND_OPTIMIZER, &j->c_opt, &j->opt_params));
    j->mvt = j->c_model->c->vtable;
    j->lvt = j->c_loss->c->vtable;
    j->ovt = j->c_opt->c->vtable;
    /* the quantizer of the frozen linear weights (model.quantize + model.qtype) */
    if (j->p->model.qtype && strcmp(j->p->model.qtype, "none") != 0) {
        ORK_TRY(resolve(j, ORK_KIND_QUANT, &j->c_quant, &j->quant_params));
        j->qvt = j->c_quant->c->vtable;
        ORK_TRY(j->qvt->create(&j->c_quant->host, j->quant_params, &j->quant));
    }
    return ORK_OK;
}

/* Every dataset folder exists and is a folder: checked before the model is
 * loaded (minutes for FLUX.1-dev), with the YAML location of the bad path. */
ork_status ork_train_check_datasets(job *j) {
    for (size_t d = 0; d < j->p->datasets.n; d++) {
        const char *fp = j->p->datasets.v[d].folder_path;
        ork_file_info sb;
        const char *why = NULL;
        if (!fp || ork_path_info(fp, &sb) != ORK_OK) why = fp ? strerror(errno) : "not set";
        else if (sb.kind != ORK_KIND_DIR) why = "not a folder";
        if (!why) continue;
        char key[64];
        ork_loc at;
        snprintf(key, sizeof key, "datasets[%zu].folder_path", d);
        if (ork_config_where(j->cfg, key, &at) && at.line > 0)
            return ork_config_fail_at(&at, ORK_E_CONFIG, "%s '%s': %s", key, fp ? fp : "", why);
        return ORK_FAIL(ORK_E_CONFIG, "%s: %s '%s': %s", ork_config_file(j->cfg), key, fp ? fp : "", why);
    }
    return ORK_OK;
}

ork_status ork_train_open_model(job *j) {
    ORK_TRY(j->mvt->create(&j->c_model->host, j->model_params, &j->model));
    ORK_TRY(j->mvt->open(j->model, j->p->model.name_or_path, &j->info));
    /* its codec (plugin/model_codec.h): before the checks, which see the codec's weights too */
    ORK_TRY(ork_model_codec_open(&j->codec, j->reg, j->p->model.name_or_path, j->mvt, j->model, &j->info));
    /* its declarations in range, and a prediction this core trains (plugin/model_decl.h) */
    ORK_TRY(ork_model_decl_check(&j->info, j->p->model.name_or_path));
    return ork_model_decl_trainable(&j->info, j->p->model.name_or_path);
}

/* ---- device -------------------------------------------------------------- */

ork_status ork_train_pick_backend(job *j) {
    const char *dev = j->p->device ? j->p->device : "cuda:0";
    if (!strncmp(dev, "cpu", 3)) {
        j->be = ork_cpu_backend();
        return ORK_OK;
    }
    if (!strncmp(dev, "cuda", 4)) {
#ifdef ORAKUL_HAVE_CUDA
        if (ork_cuda_device_count() > 0) {
            j->be = ork_cuda_backend();
            return ORK_OK;
        }
#endif
        ork_loc at;
        if (ork_config_where(j->cfg, "device", &at) && at.line > 0)
            return ork_config_fail_at(&at, ORK_E_CONFIG, "device '%s': no CUDA device available (use device: cpu)", dev);
        return ORK_FAIL(ORK_E_CONFIG, "%s: device '%s' (the default): no CUDA device available; set device: cpu",
                        ork_config_file(j->cfg), dev);
    }
    return ORK_FAIL(ORK_E_CONFIG, "%s: unknown device '%s' (cpu or cuda:N)", ork_config_file(j->cfg), dev);
}
