/* config/config.h — the job config reader: the ai-toolkit YAML users already
 * have (FORMATS.md §1), checked key by key with exact file:line:col, resolved
 * into plain C structs with orakul's defaults, with the origin of every value.
 *
 * Owns: every struct, string and array reachable from an ork_config (free with
 * ork_config_free), including the strings written into component params
 * buffers by ork_config_component_params.
 *
 * Key classes (one table per section, core/config/schema.c):
 *   implemented            honoured, typed, range-checked, defaulted;
 *   known ai-toolkit key   accepted; ONE warning line "file:l:c: ignored: train.ema_config
 *                          (not implemented yet)", unless its value is ai-toolkit's
 *                          default (or null), which is what orakul does anyway;
 *   anything else          error: "file:l:c: unknown key 'stepz' in train (did you mean 'steps'?)".
 * `sample:` drives the samples written during training (core/train/samples.h).
 *
 * Statuses (every failure logs exactly one line, "file:line:col: message"):
 *   ORK_E_IO      the config file cannot be opened or read;
 *   ORK_E_FORMAT  not YAML: syntax error, tab indentation, several documents;
 *   ORK_E_CONFIG  YAML but not a valid job: empty file, unknown key, wrong type,
 *                 trailing junk ("10abc"), out of range, not one of the choices,
 *                 missing required key, plugins.path that does not exist;
 *   ORK_E_NOMEM   host allocation failed.
 *
 * Paths in messages and in ork_config_where: process-level keys are written
 * without a prefix ("train.steps", "datasets[0].resolution", "device"), top-level
 * ones with theirs ("job", "config.name").
 *
 * Two-pass use by the plugin loader:
 *   ork_config_load(path, &cfg);                        core schema, pass 1
 *   name = ork_config_component_name(cfg, ORK_KIND_OPTIMIZER, &at);
 *   ... resolve name (and aliases) against the loaded components; when it is
 *   unknown: ork_config_fail_at(&at, ORK_E_CONFIG, "unknown optimizer '%s' (available: ...)", name);
 *   ork_config_component_params(cfg, ork_config_component_params_path(ORK_KIND_OPTIMIZER),
 *                               comp->params, buf, comp->params_size);   pass 2
 * [control-thread] */
#ifndef ORK_CONFIG_CONFIG_H
#define ORK_CONFIG_CONFIG_H

#include <orakul/abi.h>
#include <orakul/platform.h> /* ORK_PRINTF */
#include <orakul/plugin.h>   /* ork_param, ork_component_kind */
#include <stdint.h>
#include <stdio.h>

/* Where a value came from. line == 0: orakul's default (file still set). */
typedef struct ork_loc {
    const char *file;
    int line, col; /* 1-based */
} ork_loc;

typedef struct ork_strs { size_t n; const char **v; } ork_strs;  /* a string or a list of strings */
typedef struct ork_ints { size_t n; int64_t *v; } ork_ints;      /* an integer or a list of them */

/* Booleans are int32_t (0/1), like ORK_PARAM_BOOL. NULL strings mean "unset". */
typedef struct ork_network_config {
    const char *type;          /* "lora" or "lokr" (train/lora.h) */
    int64_t linear;            /* rank (alias: rank); 4 */
    double linear_alpha;       /* 1.0 (alias: alpha); FLUX ignores it, FORMATS.md §1 */
    double dropout;            /* 0: none */
    const char *weight_dtype;  /* orakul: LoRA master weights, "fp32" (default) or "bf16"
                                * (updated with stochastic rounding, NUMERICS.md §4) */
    ork_strs only_if_contains;   /* network_kwargs.*: module-name filters */
    ork_strs ignore_if_contains;
    int32_t lokr_full_rank;      /* type lokr: 1 (ai-toolkit's default): w1, w2 full, scale 1 */
    int64_t lokr_factor;         /* type lokr: -1 automatic factorization, else the factor */
} ork_network_config;

typedef struct ork_save_config {
    const char *dtype;               /* "float16" */
    int64_t save_every;              /* 1000 */
    int64_t max_step_saves_to_keep;  /* 5 */
} ork_save_config;

typedef struct ork_dataset_config {
    const char *folder_path;     /* required */
    const char *caption_ext;     /* ".txt" (a leading dot is added) */
    double caption_dropout_rate; /* 0 */
    const char *default_caption; /* NULL */
    ork_ints resolution;         /* [512]; several give multi-resolution buckets */
    int32_t buckets;             /* 1 */
    int64_t bucket_tolerance;    /* 64 */
    int32_t cache_latents;       /* 0 */
    int32_t cache_latents_to_disk; /* 0 */
    int64_t num_repeats;         /* 1 */
    int32_t flip_x, flip_y;      /* 0 */
    int32_t is_reg;              /* 0 */
} ork_dataset_config;
typedef struct ork_dataset_list { size_t n; ork_dataset_config *v; } ork_dataset_list;

typedef struct ork_train_config {
    int64_t batch_size;                  /* 1 */
    int64_t steps;                       /* 1000 */
    int64_t gradient_accumulation_steps; /* 1 (alias: gradient_accumulation) */
    int32_t gradient_checkpointing;      /* 1 */
    const char *noise_scheduler;         /* "flowmatch" (the only one FLUX trains with) */
    const char *optimizer;               /* "adamw": a component name, resolved by the loader */
    double lr;                           /* 1e-6 */
    const char *lr_scheduler;            /* "constant" */
    const char *dtype;                   /* "fp32" (ai-toolkit's default; examples use bf16) */
    const char *timestep_type;           /* "sigmoid" */
    const char *content_or_style;        /* "balanced" */
    const char *loss_type;               /* "mse": a component name */
    double max_grad_norm;                /* 1.0; 0 disables clipping */
    double cfg_scale;                    /* 1.0: FLUX guidance-embedding value during training */
    double noise_offset;                 /* 0 */
    int64_t seed;                        /* 42 (orakul; process-level training_seed sets it too) */
    int32_t skip_first_sample;           /* 0: sample before the first step (when sampling is on) */
    int32_t force_first_sample;          /* 0: a resumed run samples at its start only when set */
    int32_t disable_sampling;            /* 0 */
    /* ema_config (train/ema.h): an exponential moving average of the LoRA weights,
     * saved and sampled in their place (ai-toolkit's EMAConfig) */
    int32_t use_ema;                     /* ema_config.use_ema: 0 */
    double ema_decay;                    /* ema_config.ema_decay: 0.999 (ai-toolkit's default; its UI writes 0.99) */
    /* differential output preservation (train/dop.h): the LoRA's prediction on each caption
     * with trigger_word replaced by the class held to the base model's (ai-toolkit's SDTrainer) */
    int32_t diff_output_preservation;    /* 0 */
    double diff_output_preservation_multiplier; /* 1.0 */
    const char *diff_output_preservation_class; /* NULL: "" */
    /* optimizer_params, loss_params (orakul), lr_scheduler_params: component keys,
     * read with ork_config_component_params */
} ork_train_config;

typedef struct ork_model_config {
    const char *name_or_path;  /* required: HF repo id or local path */
    const char *arch;          /* "flux" (is_flux: true also gives flux); a component name */
    int32_t is_flux;           /* 0 */
    const char *dtype;         /* "float16" */
    int32_t quantize;          /* 0 */
    const char *qtype;         /* resolved: "none" when quantize is false, else "qfloat8",
                                * or "float8" with layer_offloading (ai-toolkit's coupling) */
    int32_t low_vram;          /* 0 */
    int32_t layer_offloading;  /* 0 (alias: auto_memory) */
    double layer_offloading_transformer_percent; /* 1.0 */
    const char *vae_path;      /* NULL: the VAE of name_or_path */
    double vram_budget_gb;     /* 0: the whole device (orakul) */
    const char *stream_trainable_state; /* orakul: "auto" (when the plan needs it), "always"
                                         * with a budget, "never" (docs/streaming.md §4) */
    const char *stream_compression;     /* orakul: streamed frozen blocks travel losslessly coded
                                         * (stream/wcodec.h): "auto" (16-bit weights on CUDA),
                                         * "always", "never" */
    int32_t quantize_te;       /* not given: model.quantize (ai-toolkit); quantizes the text
                                * encoders a model marks (FLUX.1: T5), core/text/conditioner.h */
    const char *qtype_te;      /* "qfloat8": a quant component name */
    int32_t attn_masking;      /* 0: the txt encoder sees no padding mask (diffusers' FluxPipeline) */
    /* model_kwargs, quantize_kwargs: component keys */
} ork_model_config;

/* sample.samples[]: one image per entry (ai-toolkit's newer form of `prompts`).
 * Unset numbers (0, or not given: see ork_config_where) take the section's. */
typedef struct ork_sample_item {
    const char *prompt;          /* required: text, or a path to a text-embedding file */
    const char *neg;             /* NULL: sample.neg */
    int64_t width, height;       /* 0: sample.width / sample.height */
    int64_t seed;                /* not given: sample.seed (+ index with walk_seed) */
    double guidance_scale;       /* not given: sample.guidance_scale */
    int64_t sample_steps;        /* 0: sample.sample_steps */
} ork_sample_item;
typedef struct ork_sample_items { size_t n; ork_sample_item *v; } ork_sample_items;

typedef struct ork_sample_config {
    const char *sampler;        /* "flowmatch" (FLUX samples with the flow-matching Euler sampler) */
    int64_t sample_every;       /* 100 */
    int64_t sample_start_step;  /* 0 */
    int64_t width, height;      /* 512 */
    const char *neg;            /* NULL: empty (zero) negative conditioning */
    int64_t seed;               /* 0 */
    int32_t walk_seed;          /* 0: every prompt uses seed; 1: seed + prompt index */
    double guidance_scale;      /* 7: the guidance input of guidance-distilled models, else CFG scale */
    int64_t sample_steps;       /* 20 (not given: 4 for the distilled schnell / klein) */
    ork_strs prompts;           /* legacy list of prompts */
    ork_sample_items samples;   /* or entries with their own size, seed, ... */
} ork_sample_config;

typedef struct ork_logging_config {
    int64_t log_every; /* 100 */
    int32_t verbose;   /* 0 */
} ork_logging_config;

typedef struct ork_plugins_config {
    ork_strs path; /* orakul: extra plugin directories, searched first; each must exist
                    * (relative paths: from the current directory, like every path in
                    * ai-toolkit's YAML) */
} ork_plugins_config;

typedef struct ork_process_config {
    const char *type;            /* "sd_trainer" | "diffusion_trainer" | "ui_trainer" */
    const char *training_folder; /* "output" */
    const char *device;          /* "cuda:0" */
    const char *trigger_word;    /* NULL */
    int64_t training_seed;       /* 0 unless given; then it is train.seed when that is absent */
    ork_network_config network;
    ork_save_config save;
    ork_dataset_list datasets;   /* at least one */
    ork_train_config train;
    ork_model_config model;
    ork_logging_config logging;
    ork_plugins_config plugins;
    ork_sample_config sample;
} ork_process_config;
typedef struct ork_process_list { size_t n; ork_process_config *v; } ork_process_list;

typedef struct ork_job_config {
    const char *job;          /* "extension" */
    const char *name;         /* config.name: output folder and file name */
    ork_process_list process; /* exactly one */
} ork_job_config;

typedef struct ork_config ork_config;

/* Read and check path (pass 1: everything but component keys). On failure one
 * line is logged and *out is NULL. Warnings for ignored keys are logged here. */
ork_status ork_config_load(const char *path, ork_config **out);
void ork_config_free(ork_config *cfg);

const ork_job_config *ork_config_job(const ork_config *cfg);
const ork_process_config *ork_config_process(const ork_config *cfg); /* the one process */
const char *ork_config_file(const ork_config *cfg);

/* Where the value at `path` ("train.steps", "plugins.path[1]") came from.
 * 0 when the path was never resolved. */
int ork_config_where(const ork_config *cfg, const char *path, ork_loc *out);

/* The user's component name for a kind (train.optimizer, train.loss_type,
 * model.qtype, model.arch) and where it was written. Never NULL. */
const char *ork_config_component_name(const ork_config *cfg, ork_component_kind kind, ork_loc *where);
/* "train.optimizer_params", "train.loss_params", "model.model_kwargs", "model.quantize_kwargs". */
const char *ork_config_component_params_path(ork_component_kind kind);

/* Pass 2: check the mapping at section_path (absent = empty) against a
 * component's key table (NULL = the component takes no keys) and fill buf
 * (zeroed here first): unknown keys (nearest match), types, lists of exactly
 * `count` values, min/max, choices, REQUIRED, and `def` parsed by the same
 * parser. Strings are owned by cfg. ORK_E_CONFIG for the user's mistakes;
 * ORK_E_ABI when the table itself is bad (offset past buf_size, bad def). */
ork_status ork_config_component_params(ork_config *cfg, const char *section_path,
                                       const ork_param *table, void *buf, size_t buf_size);

/* Log "file:line:col: message" (or "file: message" for a default) as an error
 * and return s. For the loader's own checks against config values. */
ork_status ork_config_fail_at(const ork_loc *at, ork_status s, const char *fmt, ...)
    ORK_PRINTF(3, 4);

/* Every resolved key, one per line: "train.steps = 2000  (config.yaml:30:16)"
 * or "(default)"; what `orakul plan` prints. */
void ork_config_dump(const ork_config *cfg, FILE *f);

/* Every ai-toolkit key orakul knows but does not implement (the schema's KNOWN
 * rows and a whole unimplemented section's keys), in table order, named as the
 * warnings name them ("train.ema_config", "datasets[].mask_path",
 * "model.model_kwargs.match_target_res"): fn(ctx, path, ai-toolkit's default
 * or NULL, the setting it acts with or NULL). Component sections list the keys
 * ai-toolkit knows there (a component that declares one implements it: the
 * caller filters those). `orakul plugins --unimplemented` prints them. */
typedef void (*ork_config_known_fn)(void *ctx, const char *path, const char *def, const char *when);
void ork_config_each_unimplemented(ork_config_known_fn fn, void *ctx);

#endif
