/* cli/train_stub.c — stands in for the trainer (core/train/train.c) until it
 * is part of the build (core/cli/CMakeLists.txt decides). plan does what can
 * be done without it: resolve each component named by the config (model.arch,
 * train.loss_type, train.optimizer, model.qtype unless "none"), check its keys
 * (pass 2), and scan every dataset folder. run is not implemented: status 1.
 * Owns nothing beyond each call. */
#include "train/train.h"

#include "data/dataset.h" /* ork_dataset_scan */
#include "util/log.h"     /* ORK_FAIL */

#include <stdlib.h>
#include <string.h>

ork_status ork_train_run(ork_config *cfg, const ork_registry *reg) {
    (void)cfg;
    (void)reg;
    return ORK_FAIL(ORK_E_UNSUPPORTED, "run: training is not implemented in this build "
                    "(the trainer is missing); `orakul plan` checks the config");
}

static ork_status plan_component(ork_config *cfg, const ork_registry *reg, ork_component_kind kind,
                                 FILE *out) {
    ork_loc at;
    const char *name = ork_config_component_name(cfg, kind, &at);
    if (kind == ORK_KIND_QUANT && (!name || !strcmp(name, "none"))) {
        fprintf(out, "  %-9s none (model.quantize is off)\n", ork_kind_name(kind));
        return ORK_OK;
    }
    const ork_plugin_component *pc = ork_registry_find(reg, kind, name);
    if (!pc) {
        char avail[1024];
        ork_registry_available(reg, kind, avail, sizeof avail);
        return ork_config_fail_at(&at, ORK_E_CONFIG, "no %s component '%s'; available: %s",
                                  ork_kind_name(kind), name ? name : "", avail);
    }
    const ork_component *c = pc->c;
    void *buf = calloc(1, c->params_size ? c->params_size : 1);
    if (!buf) return ORK_FAIL(ORK_E_NOMEM, "plan: out of memory");
    ork_status s = ork_config_component_params(cfg, ork_config_component_params_path(kind), c->params,
                                               buf, c->params_size);
    free(buf);
    if (s == ORK_OK)
        fprintf(out, "  %-9s %s = %s (plugin %s, %s)\n", ork_kind_name(kind), name, c->id,
                pc->plugin->name, pc->plugin->path);
    return s;
}

ork_status ork_train_plan(ork_config *cfg, const ork_registry *reg, FILE *out) {
    fprintf(out, "components:\n");
    for (int k = 0; k < ORK_KIND_COUNT; k++) ORK_TRY(plan_component(cfg, reg, (ork_component_kind)k, out));

    const ork_process_config *p = ork_config_process(cfg);
    fprintf(out, "datasets:\n");
    for (size_t i = 0; i < p->datasets.n; i++) {
        const ork_dataset_config *d = &p->datasets.v[i];
        ork_dataset_opts o = {
            .folder_path = d->folder_path, .caption_ext = d->caption_ext,
            .default_caption = d->default_caption, .trigger_word = p->trigger_word,
            .is_reg = d->is_reg, .caption_dropout_rate = (float)d->caption_dropout_rate,
        };
        ork_dataset ds;
        ORK_TRY(ork_dataset_scan(&o, &ds));
        size_t captions = 0;
        for (size_t j = 0; j < ds.n; j++) captions += ds.items[j].has_caption_file != 0;
        fprintf(out, "  datasets[%zu]: %zu images, %zu with a caption file, in %s\n", i, ds.n, captions,
                ds.folder);
        ork_dataset_free(&ds);
    }
    fprintf(out, "(trainer not in this build: no model, checkpoint or memory checks)\n");
    return ORK_OK;
}
