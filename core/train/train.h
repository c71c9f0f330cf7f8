/* train/train.h — `orakul run` and `orakul plan`: the LoRA training job of one
 * config, from the YAML to the LoRA file. The CLI calls these after loading the
 * config (pass 1) and the plugin registry.
 *
 * ork_train_run: resolves the components (model.arch, train.loss_type,
 * train.optimizer) and their keys (pass 2), builds the backend for
 * process.device, loads the model, attaches the LoRA network, encodes the
 * dataset once into a latent cache, and runs the flow-matching loop with
 * checkpoints that a later run resumes from automatically.
 * ork_train_plan: every check that needs no training (components and keys,
 * model source and variant, dataset folders), and prints the plan. */
#ifndef ORK_TRAIN_TRAIN_H
#define ORK_TRAIN_TRAIN_H

#include "config/config.h"
#include "plugin/registry.h"

#include <stdio.h>

/* What `orakul run`'s flags change (all 0: the defaults). */
typedef struct ork_train_opts {
    int overwrite; /* --overwrite: a run with LoRA files of this job in its
                    * folder and no state to resume from starts afresh and
                    * overwrites them (refused without it, exit 2) */
} ork_train_opts;

/* ORK_OK on success; ORK_E_CONFIG / ORK_E_FORMAT / ORK_E_IO / ORK_E_ABI for
 * input problems (exit 2); anything else is a training failure (exit 1).
 * opts: NULL for the defaults. */
ork_status ork_train_run(ork_config *cfg, const ork_registry *reg, const ork_train_opts *opts);
ork_status ork_train_plan(ork_config *cfg, const ork_registry *reg, FILE *out);

#endif
