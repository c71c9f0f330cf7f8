/* config/schema.c — the core job schema: one table per section of the
 * ai-toolkit YAML (FORMATS.md §1; key lists from [O] toolkit/config_modules.py,
 * jobs/process/ (get_conf) and the UI's default job). Implemented keys carry orakul's
 * type, default, range and choices; known ai-toolkit keys that orakul does not
 * implement yet are listed so they warn instead of failing (their `def` is
 * ai-toolkit's default: a config that only restates it stays quiet).
 * Owns: static const tables only. */
#include "config/config.h"
#include "config/schema.h"

#include <math.h>
#include <stddef.h>
#include <string.h>


#define ROW(k, kind, cls, req, def, lo, hi, ch, off, sub) \
    {(k), (kind), (cls), (req), 0, (def), (lo), (hi), (ch), (off), (sub), NULL, NULL}
#define B(k, d, f) ROW(k, ORK_CK_BOOL, ORK_CK_IMPL, 0, d, -HUGE_VAL, HUGE_VAL, NULL, offsetof(S, f), NULL)
#define I(k, d, lo, hi, f) ROW(k, ORK_CK_INT, ORK_CK_IMPL, 0, d, lo, hi, NULL, offsetof(S, f), NULL)
#define F(k, d, lo, hi, f) ROW(k, ORK_CK_FLOAT, ORK_CK_IMPL, 0, d, lo, hi, NULL, offsetof(S, f), NULL)
#define STR(k, d, ch, f) ROW(k, ORK_CK_STR, ORK_CK_IMPL, 0, d, -HUGE_VAL, HUGE_VAL, ch, offsetof(S, f), NULL)
#define REQSTR(k, ch, f) ROW(k, ORK_CK_STR, ORK_CK_IMPL, 1, NULL, -HUGE_VAL, HUGE_VAL, ch, offsetof(S, f), NULL)
#define INTS(k, d, lo, hi, f) ROW(k, ORK_CK_INTS, ORK_CK_IMPL, 0, d, lo, hi, NULL, offsetof(S, f), NULL)
#define STRS(k, d, f) ROW(k, ORK_CK_STRS, ORK_CK_IMPL, 0, d, -HUGE_VAL, HUGE_VAL, NULL, offsetof(S, f), NULL)
#define MAP(k, req, t, f) ROW(k, ORK_CK_MAP, ORK_CK_IMPL, req, NULL, -HUGE_VAL, HUGE_VAL, NULL, offsetof(S, f), &(t))
#define LIST(k, req, lo, hi, t, f) ROW(k, ORK_CK_LIST, ORK_CK_IMPL, req, NULL, lo, hi, NULL, offsetof(S, f), &(t))
#define PARAMS(k) ROW(k, ORK_CK_PARAMS, ORK_CK_IMPL, 0, NULL, -HUGE_VAL, HUGE_VAL, NULL, 0, NULL)
#define ANY(k) ROW(k, ORK_CK_ANY, ORK_CK_IMPL, 0, NULL, -HUGE_VAL, HUGE_VAL, NULL, 0, NULL)
#define KNOWN(k, d) ROW(k, ORK_CK_ANY, ORK_CK_KNOWN, 0, d, -HUGE_VAL, HUGE_VAL, NULL, 0, NULL)
/* known, and warned only while `w` is in effect (schema.h: ork_ck.when) */
#define KNOWN_WHEN(k, d, w) {(k), ORK_CK_ANY, ORK_CK_KNOWN, 0, 0, (d), -HUGE_VAL, HUGE_VAL, NULL, 0, NULL, NULL, (w)}
#define ALIAS(k, target) {(k), ORK_CK_ANY, ORK_CK_ALIAS, 0, 0, NULL, -HUGE_VAL, HUGE_VAL, NULL, 0, NULL, (target), NULL}
#define END {NULL, 0, 0, 0, 0, NULL, 0, 0, NULL, 0, NULL, NULL, NULL}

#define DTYPES "float16|fp16|bf16|bfloat16|float32|fp32"

/* ---- network ---- */
#define S ork_network_config
static const ork_ck network_kwargs_keys[] = {
    STRS("only_if_contains", NULL, only_if_contains),
    STRS("ignore_if_contains", NULL, ignore_if_contains),
    KNOWN("full_if_contains", "[]"), KNOWN("parameter_threshold", "0"), KNOWN("rank_dropout", NULL),
    KNOWN("module_dropout", NULL), KNOWN("target_lin_modules", NULL),
    END};
static const ork_ck_table network_kwargs_t = {network_kwargs_keys, 0, 0, 0};
static const ork_ck network_keys[] = {
    STR("type", "lora", "lora|lokr", type),
    I("linear", "4", 1, 65536, linear), ALIAS("rank", "linear"),
    F("linear_alpha", "1.0", 0, 1e9, linear_alpha), ALIAS("alpha", "linear_alpha"),
    F("dropout", "0", 0, 1, dropout),
    STR("weight_dtype", "fp32", "fp32|float32|bf16|bfloat16", weight_dtype),
    ROW("network_kwargs", ORK_CK_MAP, ORK_CK_IMPL, 0, NULL, -HUGE_VAL, HUGE_VAL, NULL, 0, &network_kwargs_t),
    /* conv, conv_alpha: LoRA on conv layers. ai-toolkit's UI writes conv: 16 into every job and hides it
     * for the transformer models (options.tsx: disableSections 'network.conv'); FLUX has no conv layers,
     * so neither trainer does anything with them. */
    ANY("conv"), ANY("conv_alpha"), KNOWN("lorm", NULL), KNOWN("transformer_only", "true"),
    /* the UI writes lokr_full_rank: true, lokr_factor: -1 into every job; they act only for type lokr
     * (train/lora.h); old_lokr_format names ai-toolkit's pre-LyCORIS key spelling, which it reads */
    B("lokr_full_rank", "true", lokr_full_rank), I("lokr_factor", "-1", -1, 65536, lokr_factor),
    KNOWN_WHEN("old_lokr_format", "false", "type=lokr"),
    KNOWN("split_multistage_loras", NULL), KNOWN("layer_offloading", "false"),
    KNOWN("pretrained_lora_path", NULL), KNOWN("all_layers", "false"),
    END};
#undef S

/* ---- save ---- */
#define S ork_save_config
static const ork_ck save_keys[] = {
    STR("dtype", "float16", DTYPES, dtype),
    I("save_every", "1000", 1, HUGE_VAL, save_every),
    I("max_step_saves_to_keep", "5", 0, HUGE_VAL, max_step_saves_to_keep),
    /* save_format (the UI writes diffusers) shapes only full-model saves (ai-toolkit's
     * BaseSDTrainProcess.save: fine-tuning or merge_network_on_save); a LoRA is one .safetensors file */
    ANY("save_format"), KNOWN("push_to_hub", "false"), KNOWN("hf_repo_id", NULL),
    KNOWN("hf_private", "false"),
    END};
#undef S

/* ---- datasets[] ---- */
#define S ork_dataset_config
static const ork_ck dataset_keys[] = {
    REQSTR("folder_path", NULL, folder_path),
    STR("caption_ext", ".txt", NULL, caption_ext),
    F("caption_dropout_rate", "0", 0, 1, caption_dropout_rate),
    STR("default_caption", NULL, NULL, default_caption),
    INTS("resolution", "512", 64, 16384, resolution),
    B("buckets", "true", buckets),
    I("bucket_tolerance", "64", 1, 4096, bucket_tolerance),
    B("cache_latents", "false", cache_latents),
    B("cache_latents_to_disk", "false", cache_latents_to_disk),
    I("num_repeats", "1", 1, 1000000, num_repeats),
    B("flip_x", "false", flip_x), B("flip_y", "false", flip_y),
    B("is_reg", "false", is_reg),
    KNOWN("batch_size", "1"), KNOWN("type", "image"), KNOWN("dataset_path", NULL), KNOWN("trigger_word", NULL),
    KNOWN("diff_output_preservation", "false"),
    KNOWN_WHEN("diff_output_preservation_class", "", "diff_output_preservation"),
    KNOWN("random_triggers", "[]"), KNOWN("random_triggers_max", "1"), KNOWN("random_scale", "false"),
    KNOWN("random_crop", "false"), KNOWN("scale", "1.0"), KNOWN("prior_reg", "false"),
    KNOWN("network_weight", "1"), KNOWN("token_dropout_rate", "0"), KNOWN("shuffle_tokens", "false"),
    KNOWN("keep_tokens", "0"), KNOWN("augments", "[]"), KNOWN("control_path", NULL),
    KNOWN("control_from_same_folder", "false"), KNOWN("num_controls_from_same_folder", NULL),
    KNOWN("control_path_1", NULL), KNOWN("control_path_2", NULL), KNOWN("control_path_3", NULL),
    KNOWN("control_transparent_color", NULL), KNOWN("inpaint_path", NULL),
    KNOWN("full_size_control_images", NULL), KNOWN("alpha_mask", "false"), KNOWN("mask_path", NULL),
    KNOWN("unconditional_path", NULL), KNOWN_WHEN("invert_mask", "false", "mask_path"),
    KNOWN_WHEN("mask_min_value", "0", "mask_path"), /* the UI writes 0.1 */
    KNOWN("poi", NULL), KNOWN("use_short_captions", "false"), KNOWN("cache_tensors_to_disk", "false"),
    KNOWN("cache_clip_vision_to_disk", "false"),
    ANY("cache_text_embeddings"), /* orakul always caches them (train/text_cache.h): either value is what it does */
    KNOWN("load_image_when_caching_latents", "false"), KNOWN("standardize_images", "false"),
    KNOWN("augmentations", NULL), KNOWN("shuffle_augmentations", "false"), KNOWN("caption_type", NULL),
    KNOWN("guidance_type", NULL), KNOWN("clip_image_path", NULL), KNOWN("clip_image_from_same_folder", "false"),
    KNOWN("clip_image_augmentations", NULL), KNOWN("clip_image_shuffle_augmentations", "false"),
    KNOWN("replacements", "[]"), KNOWN("loss_multiplier", "1"), KNOWN("num_workers", "2"),
    KNOWN("prefetch_factor", "2"), KNOWN("cache_latents_num_workers", NULL), KNOWN("extra_values", "[]"),
    KNOWN("square_crop", "false"), KNOWN("replay_transforms", "false"), KNOWN("num_frames", "1"),
    KNOWN("shrink_video_to_frames", "true"), KNOWN("fps", NULL), KNOWN("auto_frame_count", "false"),
    KNOWN("trim_auto_frame_count_tail", NULL), KNOWN("debug", "false"), KNOWN("controls", "[]"),
    KNOWN("fast_image_size", "false"), KNOWN("do_i2v", NULL), KNOWN("do_audio", "false"),
    KNOWN("audio_preserve_pitch", NULL), KNOWN("audio_normalize", NULL),
    END};
#undef S
static const ork_ck_table dataset_t = {dataset_keys, sizeof(ork_dataset_config), 0, 0};

/* ---- train ---- */
#define S ork_train_config
/* train.ema_config: its keys land in ork_train_config (train/ema.h) */
static const ork_ck ema_config_keys[] = {
    B("use_ema", "false", use_ema),
    F("ema_decay", "0.999", 0, 1, ema_decay),
    /* ExponentialMovingAverage's feedback into the parameter and per-update multiplier */
    KNOWN("use_feedback", "false"), KNOWN("param_multiplier", "1.0"),
    END};
static const ork_ck_table ema_config_t = {ema_config_keys, 0, 0, 0};
static const ork_ck train_keys[] = {
    I("batch_size", "1", 1, 4096, batch_size),
    I("steps", "1000", 1, 1e9, steps),
    I("gradient_accumulation_steps", "1", 1, 65536, gradient_accumulation_steps),
    ALIAS("gradient_accumulation", "gradient_accumulation_steps"),
    B("gradient_checkpointing", "true", gradient_checkpointing),
    STR("noise_scheduler", "flowmatch", "flowmatch", noise_scheduler),
    STR("optimizer", "adamw", NULL, optimizer),
    F("lr", "1e-6", 0, 100, lr),
    PARAMS("optimizer_params"),
    STR("lr_scheduler", "constant", "constant|constant_with_warmup|linear|cosine|cosine_with_restarts|step",
        lr_scheduler),
    PARAMS("lr_scheduler_params"),
    STR("dtype", "fp32", DTYPES, dtype),
    STR("timestep_type", "sigmoid", "sigmoid|linear|lognorm_blend|next_sample|weighted|one_step|shift|"
        "flux_shift|two_step|four_step|eight_step", timestep_type),
    STR("content_or_style", "balanced", "balanced|style|content", content_or_style),
    STR("loss_type", "mse", NULL, loss_type),
    PARAMS("loss_params"),
    F("max_grad_norm", "1.0", 0, 1e9, max_grad_norm),
    F("cfg_scale", "1.0", 0, 100, cfg_scale),
    F("noise_offset", "0", 0, 1, noise_offset),
    I("seed", "42", 0, 4294967295.0, seed),
    KNOWN("train_unet", "true"), KNOWN("train_text_encoder", "false"), KNOWN("unet_lr", NULL),
    KNOWN("text_encoder_lr", NULL), KNOWN("refiner_lr", NULL), KNOWN("embedding_lr", NULL),
    KNOWN("adapter_lr", NULL), KNOWN("min_denoising_steps", "0"), KNOWN("max_denoising_steps", "1000"),
    KNOWN("xformers", "false"), KNOWN("sdp", "false"), KNOWN("attention_backend", "native"),
    KNOWN("train_refiner", "true"), KNOWN("train_turbo", "false"), KNOWN("show_turbo_outputs", "false"),
    KNOWN("min_snr_gamma", NULL), KNOWN("snr_gamma", NULL), KNOWN("learnable_snr_gos", "false"),
    B("skip_first_sample", "false", skip_first_sample), B("force_first_sample", "false", force_first_sample),
    KNOWN("weight_jitter", "0"),
    KNOWN("merge_network_on_save", "false"), KNOWN("merge_network_on_save_strength", "1.0"),
    KNOWN("start_step", NULL), KNOWN("free_u", "false"), KNOWN("adapter_assist_name_or_path", NULL),
    KNOWN("adapter_assist_type", "t2i"), KNOWN("noise_multiplier", "1.0"),
    KNOWN("target_noise_multiplier", "1.0"), KNOWN("random_noise_multiplier", "0"),
    KNOWN("do_signal_correction_noise", "false"), KNOWN("do_batch_noise_correction", "false"),
    KNOWN("batch_noise_correction_scale", "1.0"), KNOWN("do_signal_amplification", "false"),
    KNOWN("signal_amplification_strength", NULL), KNOWN("signal_correction_noise_scale", NULL),
    KNOWN("random_noise_shift", "0"), KNOWN("img_multiplier", "1.0"), KNOWN("noisy_latent_multiplier", "1.0"),
    KNOWN("latent_multiplier", "1.0"), KNOWN("negative_prompt", NULL), KNOWN("max_negative_prompts", "1"),
    KNOWN("reg_weight", "1.0"), KNOWN("num_train_timesteps", "1000"), KNOWN("adaptive_scaling_factor", "false"),
    KNOWN("prompt_dropout_prob", "0"), KNOWN("match_noise_norm", "false"),
    KNOWN("short_and_long_captions", "false"), KNOWN("short_and_long_captions_encoder_split", "false"),
    KNOWN("single_item_batching", "false"), KNOWN("match_adapter_assist", "false"),
    KNOWN("match_adapter_chance", "0"), KNOWN("loss_target", "noise"), KNOWN("inverted_mask_prior", "false"),
    KNOWN("inverted_mask_prior_multiplier", "0.5"),
    /* the UI writes DOP's multiplier and class (1.0, person) into every job: they act only with DOP on */
    B("diff_output_preservation", "false", diff_output_preservation),
    F("diff_output_preservation_multiplier", "1.0", 0, 1e6, diff_output_preservation_multiplier),
    STR("diff_output_preservation_class", NULL, NULL, diff_output_preservation_class), /* NULL: ai-toolkit's "" */
    KNOWN("blank_prompt_preservation", "false"),
    KNOWN_WHEN("blank_prompt_preservation_multiplier", "1.0", "blank_prompt_preservation"),
    KNOWN("standardize_images", "false"), KNOWN("standardize_latents", "false"),
    KNOWN("dynamic_noise_offset", "false"), KNOWN("do_cfg", "false"), KNOWN("do_random_cfg", "false"),
    KNOWN("max_cfg_scale", NULL), KNOWN("cfg_rescale", NULL), KNOWN("correct_pred_norm", "false"),
    KNOWN("correct_pred_norm_multiplier", "1.0"), KNOWN("t0_loss_target", NULL),
    KNOWN("t0_velocity_equiv_weight", NULL), KNOWN("do_fft_loss", "false"),
    KNOWN("do_fft_velocity_equiv_weight", NULL), KNOWN("pred_scaler", "1.0"),
    KNOWN("prompt_saturation_chance", "0"), KNOWN("do_prior_divergence", "false"),
    ROW("ema_config", ORK_CK_MAP, ORK_CK_IMPL, 0, NULL, -HUGE_VAL, HUGE_VAL, NULL, 0, &ema_config_t),
    KNOWN("target_norm_std", NULL), KNOWN("target_norm_std_value", "1.0"),
    KNOWN("next_sample_timesteps", NULL), KNOWN("linear_timesteps", "false"),
    KNOWN("linear_timesteps2", "false"), B("disable_sampling", "false", disable_sampling),
    KNOWN("unload_text_encoder", "false"), ANY("cache_text_embeddings"), /* always cached (text_cache.h) */
    KNOWN("do_paramiter_swapping", "false"), KNOWN("paramiter_swapping_factor", NULL),
    KNOWN("bypass_guidance_embedding", "false"), KNOWN("latent_feature_extractor_path", NULL),
    KNOWN("latent_feature_loss_weight", NULL), KNOWN("diffusion_feature_extractor_path", NULL),
    KNOWN("diffusion_feature_extractor_weight", NULL), KNOWN("optimal_noise_pairing_samples", "1"),
    KNOWN("force_consistent_noise", "false"), KNOWN("blended_blur_noise", "false"),
    KNOWN("do_guidance_loss", "false"), KNOWN("guidance_loss_target", NULL),
    KNOWN("do_guidance_loss_cfg_zero", "false"), KNOWN("guidance_loss_schedule", NULL),
    KNOWN("unconditional_prompt", NULL), KNOWN("do_differential_guidance", "false"),
    KNOWN("differential_guidance_scale", NULL), KNOWN("switch_boundary_every", "1"),
    KNOWN("do_blank_stabilization", "false"), KNOWN("audio_loss_multiplier", "1.0"),
    KNOWN("max_loss_debug", NULL), KNOWN("max_loss", NULL), KNOWN("validation_config", NULL),
    END};
#undef S

/* ---- model ---- */
#define S ork_model_config
static const ork_ck model_keys[] = {
    REQSTR("name_or_path", NULL, name_or_path),
    STR("arch", "flux", NULL, arch),
    B("is_flux", "false", is_flux),
    STR("dtype", "float16", DTYPES, dtype),
    B("quantize", "false", quantize),
    STR("qtype", "qfloat8", NULL, qtype),
    B("low_vram", "false", low_vram),
    B("layer_offloading", "false", layer_offloading), ALIAS("auto_memory", "layer_offloading"),
    F("layer_offloading_transformer_percent", "1.0", 0, 1, layer_offloading_transformer_percent),
    STR("vae_path", NULL, NULL, vae_path),
    F("vram_budget_gb", "0", 0, 4096, vram_budget_gb),
    STR("stream_trainable_state", "auto", "auto|always|never", stream_trainable_state),
    STR("stream_compression", "auto", "auto|always|never", stream_compression),
    PARAMS("model_kwargs"), PARAMS("quantize_kwargs"),
    KNOWN("is_v2", "false"), KNOWN("is_xl", "false"), KNOWN("is_pixart", "false"),
    KNOWN("is_pixart_sigma", "false"), KNOWN("is_auraflow", "false"), KNOWN("is_v3", "false"),
    KNOWN("is_lumina2", "false"), KNOWN("use_flux_cfg", "false"), KNOWN("is_ssd", "false"),
    KNOWN("is_vega", "false"), KNOWN("is_v_pred", "false"), KNOWN("refiner_name_or_path", NULL),
    KNOWN("refiner_start_at", "0.5"), KNOWN("lora_path", NULL), KNOWN("assistant_lora_path", NULL),
    KNOWN("inference_lora_path", NULL), KNOWN("unconditional_lora_path", NULL),
    KNOWN("latent_space_version", NULL), KNOWN("use_text_encoder_1", "true"),
    KNOWN("use_text_encoder_2", "true"), KNOWN("experimental_xl", "false"), KNOWN("text_encoder_bits", "16"),
    KNOWN("unet_path", NULL), KNOWN("unet_sample_size", NULL), KNOWN("vae_device", NULL),
    KNOWN("vae_dtype", NULL), KNOWN("te_device", NULL), KNOWN("te_dtype", NULL),
    B("quantize_te", "false", quantize_te), STR("qtype_te", "qfloat8", NULL, qtype_te),
    B("attn_masking", "false", attn_masking), KNOWN("ignore_if_contains", NULL),
    KNOWN("only_if_contains", NULL), KNOWN("split_model_over_gpus", "false"),
    KNOWN("split_model_other_module_param_count_scale", NULL), KNOWN("te_name_or_path", NULL),
    KNOWN("layer_offloading_text_encoder_percent", "1.0"), KNOWN("extras_name_or_path", NULL),
    KNOWN("accuracy_recovery_adapter", NULL), KNOWN("compile", "false"), KNOWN("block_compile", "false"),
    KNOWN("compile_mode", NULL), KNOWN("compile_fullgraph", "false"), KNOWN("compile_dynamic", NULL),
    KNOWN("cache_size_limit", NULL), KNOWN("model_paths", NULL), KNOWN("in_context", NULL),
    END};
#undef S

/* ---- sample (core/train/samples.h) ---- */
#define S ork_sample_item
static const ork_ck sample_item_keys[] = {
    REQSTR("prompt", NULL, prompt),
    STR("neg", NULL, NULL, neg),
    I("width", NULL, 1, 16384, width), I("height", NULL, 1, 16384, height),
    I("seed", NULL, 0, 4294967295.0, seed),
    F("guidance_scale", NULL, 0, 100, guidance_scale),
    I("sample_steps", NULL, 1, 1000, sample_steps),
    KNOWN("network_multiplier", "1"), KNOWN("ctrl_img", NULL), KNOWN("ctrl_idx", "0"),
    /* the UI's control images of multi-control models (FLUX.2: SimpleJob.tsx sample.multi_ctrl_imgs) */
    KNOWN("ctrl_img_1", NULL), KNOWN("ctrl_img_2", NULL), KNOWN("ctrl_img_3", NULL), KNOWN("do_cfg_norm", "false"),
    KNOWN("num_frames", NULL), KNOWN("fps", NULL), KNOWN("extra_values", "[]"),
    END};
#undef S
static const ork_ck_table sample_item_t = {sample_item_keys, sizeof(ork_sample_item), 0, 0};
#define S ork_sample_config
static const ork_ck sample_keys[] = {
    STR("sampler", "flowmatch", NULL, sampler),
    I("sample_every", "100", 1, 1e9, sample_every),
    I("sample_start_step", "0", 0, 1e9, sample_start_step),
    I("width", "512", 1, 16384, width), I("height", "512", 1, 16384, height),
    STR("neg", NULL, NULL, neg),
    I("seed", "0", 0, 4294967295.0, seed),
    B("walk_seed", "false", walk_seed),
    F("guidance_scale", "7", 0, 100, guidance_scale),
    I("sample_steps", "20", 1, 1000, sample_steps),
    STRS("prompts", NULL, prompts),
    LIST("samples", 0, 0, 4096, sample_item_t, samples),
    KNOWN("network_multiplier", "1"), KNOWN("guidance_rescale", "0"), KNOWN("format", "jpg"),
    KNOWN("adapter_conditioning_scale", "1"), KNOWN("refiner_start_at", "0.5"), KNOWN("extra_values", "[]"),
    KNOWN("num_frames", "1"), KNOWN("fps", "1"), KNOWN("do_cfg_norm", "false"),
    END};
#undef S
static const ork_ck_table sample_t = {sample_keys, 0, 0, 0};

/* ---- logging ---- */
#define S ork_logging_config
static const ork_ck logging_keys[] = {
    I("log_every", "100", 1, 1e9, log_every),
    B("verbose", "false", verbose),
    KNOWN("use_wandb", "false"), KNOWN("use_ui_logger", "false"), KNOWN("project_name", NULL),
    KNOWN("run_name", NULL),
    END};
#undef S

/* ---- plugins (orakul) ---- */
#define S ork_plugins_config
static const ork_ck plugins_keys[] = {
    STRS("path", NULL, path),
    END};
#undef S

static const ork_ck_table network_t = {network_keys, 0, 0, 0}, save_t = {save_keys, 0, 0, 0},
                          train_t = {train_keys, 0, 0, 0}, model_t = {model_keys, 0, 0, 0},
                          logging_t = {logging_keys, 0, 0, 0}, plugins_t = {plugins_keys, 0, 0, 0};

/* ---- config.process[] ---- */
#define S ork_process_config
static const ork_ck process_keys[] = {
    REQSTR("type", "sd_trainer|diffusion_trainer|ui_trainer", type),
    STR("training_folder", "output", NULL, training_folder),
    STR("device", "cuda:0", NULL, device),
    STR("trigger_word", NULL, NULL, trigger_word),
    I("training_seed", NULL, 0, 4294967295.0, training_seed),
    MAP("network", 0, network_t, network),
    MAP("save", 0, save_t, save),
    LIST("datasets", 1, 1, HUGE_VAL, dataset_t, datasets),
    MAP("train", 0, train_t, train),
    MAP("model", 1, model_t, model),
    MAP("sample", 0, sample_t, sample),
    MAP("logging", 0, logging_t, logging),
    MAP("plugins", 0, plugins_t, plugins),
    KNOWN("performance_log_every", NULL), KNOWN("log_dir", NULL), KNOWN("sqlite_db_path", NULL),
    KNOWN("name", NULL), KNOWN("adapter", NULL), KNOWN("decorator", NULL), KNOWN("do_lorm", "false"),
    KNOWN("embedding", NULL), KNOWN("first_sample", NULL), KNOWN("guidance", NULL),
    KNOWN("lorm_extract_mode", NULL), KNOWN("lorm_extract_mode_param", NULL), KNOWN("torch_profiler", "false"),
    KNOWN("slider", NULL),
    END};
#undef S
/* anonymous: keys below config.process[0] are named "train.steps", not "config.process[0].train.steps" */
static const ork_ck_table process_t = {process_keys, sizeof(ork_process_config), 0, 1};

/* ---- config / top level ---- */
/* `config:` has no struct of its own: its keys land in ork_job_config. */
#define S ork_job_config
static const ork_ck config_keys[] = {
    REQSTR("name", NULL, name),
    LIST("process", 1, 1, 1, process_t, process),
    END};
static const ork_ck_table config_t = {config_keys, 0, 0, 0};
static const ork_ck root_keys[] = {
    STR("job", "extension", "extension", job),
    ROW("config", ORK_CK_MAP, ORK_CK_IMPL, 1, NULL, -HUGE_VAL, HUGE_VAL, NULL, 0, &config_t),
    ANY("meta"),
    END};
#undef S
const ork_ck_table ork_schema_root = {root_keys, sizeof(ork_job_config), 0, 0};

/* ---- component sections: ai-toolkit keys a component may not declare ---- */
/* model.model_kwargs is a free dict in ai-toolkit, read by each model class. These
 * are the keys its UI writes (ui/src/app/jobs/new/options.tsx, SimpleJob.tsx), with
 * the defaults the model classes read them with; match_target_res is the one its
 * FLUX.2 / klein models read (extensions_built_in/diffusion_models/flux2/flux2_model.py:
 * control images sized to the target). A model plugin that declares one of them
 * implements it; the others warn. */
static const ork_ck model_kwargs_known[] = {
    KNOWN("match_target_res", "false"), KNOWN("kv_cache", "false"), KNOWN("edit", "false"),
    KNOWN("train_high_noise", NULL), KNOWN("train_low_noise", NULL), KNOWN("noise_scale", NULL),
    KNOWN("noise_scale_inference", NULL), KNOWN("invert_inpaint_mask_chance", NULL),
    KNOWN("inpaint_dropout", NULL), KNOWN("control_dropout", NULL), KNOWN("inpaint_random_chance", NULL),
    KNOWN("do_random_inpainting", NULL), KNOWN("random_blur_mask", NULL), KNOWN("random_dialate_mask", NULL),
    END};
static const ork_ck_table model_kwargs_known_t = {model_kwargs_known, 0, 0, 0};

const ork_ck_table *ork_schema_component_known(const char *section) {
    return section && !strcmp(section, "model.model_kwargs") ? &model_kwargs_known_t : NULL;
}
