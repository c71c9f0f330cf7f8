/* plugin/model_decl.c — see model_decl.h. */
#include "plugin/model_decl.h"

#include "util/log.h"

#include <stdio.h>
#include <string.h>

static const ork_block_decl *decl_of(const ork_model_info *info, int b) {
    if (!ork_model_info_has_blocks(info) || !info->blocks || b < 0 || b >= info->n_blocks) return NULL;
    return &info->blocks[b];
}

ork_block_kind ork_model_block_kind(const ork_model_info *info, int b) {
    const ork_block_decl *d = decl_of(info, b);
    if (d) return (ork_block_kind)d->kind;
    int n = info->n_blocks;
    if (b < 0 || b >= n) return ORK_BLOCK_KIND_OTHER;
    if (n < 3) return ORK_BLOCK_KIND_TRANSFORMER;
    return b == 0 ? ORK_BLOCK_KIND_INPUT : b == n - 1 ? ORK_BLOCK_KIND_OUTPUT : ORK_BLOCK_KIND_TRANSFORMER;
}

int ork_model_block_is_transformer(const ork_model_info *info, int b) {
    return ork_model_block_kind(info, b) == ORK_BLOCK_KIND_TRANSFORMER;
}

ork_tokens ork_model_weight_tokens(const ork_model_info *info, const ork_weight_decl *d) {
    if (!decl_of(info, d->block)) return ORK_TOKENS_JOINT;
    return ORK_WEIGHT_TOKENS_OF(d->flags);
}

int ork_model_weight_marks_attention(const ork_model_info *info, const ork_weight_decl *d) {
    if (decl_of(info, d->block)) return (d->flags & ORK_WEIGHT_ATTN) != 0;
    return ork_model_block_is_transformer(info, d->block);
}

ork_tokens ork_model_block_attn_tokens(const ork_model_info *info, int b) {
    const ork_block_decl *d = decl_of(info, b);
    return d ? (ork_tokens)d->attn_tokens : ORK_TOKENS_JOINT;
}

int64_t ork_model_block_attn_dim(const ork_model_info *info, int b) {
    const ork_block_decl *d = decl_of(info, b);
    return d ? d->attn_dim : 0;
}

const char *const *ork_model_lora_targets(const ork_model_info *info) {
    return ork_model_info_has_blocks(info) ? info->lora_targets : NULL;
}

const char *ork_model_lora_prefix(const ork_model_info *info) {
    return ork_model_info_has_blocks(info) ? info->lora_prefix : NULL;
}

int ork_module_contains(const char *module, const char *pat) {
    if (strstr(module, pat)) return 1;
    /* the same pattern in kohya spelling ('_' for '.') */
    char a[192], b[192];
    snprintf(a, sizeof a, "%s", module);
    snprintf(b, sizeof b, "%s", pat);
    for (char *p = a; *p; p++) if (*p == '.') *p = '_';
    for (char *p = b; *p; p++) if (*p == '.') *p = '_';
    return strstr(a, b) != NULL;
}

int ork_model_lora_default_target(const ork_model_info *info, const ork_weight_decl *d, const char *module) {
    if (!(d->flags & ORK_WEIGHT_LINEAR) || d->ndim != 2 || d->block < 0 || d->block >= info->n_blocks) return 0;
    const char *const *t = ork_model_lora_targets(info);
    if (!t) return ork_model_block_is_transformer(info, d->block);
    for (int i = 0; t[i]; i++)
        if (ork_module_contains(module, t[i])) return 1;
    return 0;
}

void ork_model_schedule_get(const ork_model_info *info, ork_model_schedule *out, double *shift_base,
                            double *shift_max) {
    memset(out, 0, sizeof *out);
    const ork_model_schedule *s = ork_model_info_has_blocks(info) ? info->schedule : NULL;
    if (s) { /* the plugin's struct may be shorter (an older minor): copy what it has */
        size_t n = s->abi.struct_size < sizeof *out ? s->abi.struct_size : sizeof *out;
        memcpy(out, s, n);
    }
    out->abi = (ork_abi)ORK_ABI_INIT(ork_model_schedule);
    if (!(out->shift > 0)) out->shift = 3.0;
    if (out->shift_base_seq <= 0) out->shift_base_seq = 256;
    if (out->shift_max_seq <= out->shift_base_seq) out->shift_max_seq = out->shift_base_seq < 4096 ? 4096 : out->shift_base_seq + 1;
    if (out->noise == ORK_NOISE_DISCRETE && out->train_timesteps <= 0) out->train_timesteps = 1000;
    *shift_base = info->shift_base > 0 ? info->shift_base : 0.5;
    *shift_max = info->shift_max > 0 ? info->shift_max : 1.15;
}

const char *ork_model_timestep_type(const ork_model_info *info) {
    static const char *const names[] = {NULL, "sigmoid", "linear", "shift", "flux_shift"}; /* ai-toolkit's words */
    ork_model_schedule s;
    double b, m;
    ork_model_schedule_get(info, &s, &b, &m);
    return s.timestep_sampling > 0 && s.timestep_sampling <= ORK_TIMESTEPS_RESOLUTION_SHIFT ? names[s.timestep_sampling]
                                                                                                : NULL;
}

ork_status ork_model_decl_check(const ork_model_info *info, const char *what) {
    if (!ork_model_info_has_blocks(info)) return ORK_OK;
    if (info->blocks)
        for (int b = 0; b < info->n_blocks; b++) {
            const ork_block_decl *d = &info->blocks[b];
            if (d->kind < ORK_BLOCK_KIND_OTHER || d->kind > ORK_BLOCK_KIND_OUTPUT)
                return ORK_FAIL(ORK_E_ABI, "model %s: blocks[%d].kind %d is not an ork_block_kind", what, b, (int)d->kind);
            if (d->attn_tokens < ORK_TOKENS_JOINT || d->attn_tokens > ORK_TOKENS_TXT)
                return ORK_FAIL(ORK_E_ABI, "model %s: blocks[%d].attn_tokens %d is not an ork_tokens", what, b,
                                (int)d->attn_tokens);
            if (d->attn_dim < 0)
                return ORK_FAIL(ORK_E_ABI, "model %s: blocks[%d].attn_dim %lld is negative", what, b, (long long)d->attn_dim);
        }
    if (info->lora_targets && !info->lora_targets[0])
        return ORK_FAIL(ORK_E_ABI, "model %s: lora_targets is empty (NULL: the transformer blocks' linears)", what);
    for (int i = 0; info->lora_targets && info->lora_targets[i]; i++)
        if (!info->lora_targets[i][0]) return ORK_FAIL(ORK_E_ABI, "model %s: lora_targets[%d] is \"\"", what, i);
    const ork_model_schedule *s = info->schedule;
    if (!s) return ORK_OK;
    if (s->abi.struct_size < offsetof(ork_model_schedule, sample_guidance) + sizeof s->sample_guidance ||
        s->abi.major != ORK_ABI_MAJOR)
        return ORK_FAIL(ORK_E_ABI, "model %s: schedule struct_size %u / major %u: not an ABI %d.3 ork_model_schedule",
                        what, (unsigned)s->abi.struct_size, (unsigned)s->abi.major, ORK_ABI_MAJOR);
    if (s->prediction < ORK_PREDICT_FLOW || s->prediction > ORK_PREDICT_V)
        return ORK_FAIL(ORK_E_ABI, "model %s: schedule.prediction %d is not an ork_prediction", what, (int)s->prediction);
    if (s->noise < ORK_NOISE_FLOW || s->noise > ORK_NOISE_DISCRETE)
        return ORK_FAIL(ORK_E_ABI, "model %s: schedule.noise %d is not an ork_noise_kind", what, (int)s->noise);
    if (s->noise == ORK_NOISE_DISCRETE &&
        (s->beta_schedule < ORK_BETAS_LINEAR || s->beta_schedule > ORK_BETAS_SCALED_LINEAR || !(s->beta_start > 0) ||
         !(s->beta_end > s->beta_start) || !(s->beta_end < 1)))
        return ORK_FAIL(ORK_E_ABI, "model %s: schedule: a discrete schedule needs beta_schedule 0/1 and "
                        "0 < beta_start < beta_end < 1 (%d, %g, %g)", what, (int)s->beta_schedule, s->beta_start,
                        s->beta_end);
    if (s->timestep_sampling < ORK_TIMESTEPS_CONFIG || s->timestep_sampling > ORK_TIMESTEPS_RESOLUTION_SHIFT)
        return ORK_FAIL(ORK_E_ABI, "model %s: schedule.timestep_sampling %d is not an ork_timestep_sampling", what,
                        (int)s->timestep_sampling);
    if (s->time_shift < ORK_TIME_SHIFT_RESOLUTION || s->time_shift > ORK_TIME_SHIFT_RESOLUTION_STEPS)
        return ORK_FAIL(ORK_E_ABI, "model %s: schedule.time_shift %d is not an ork_time_shift", what, (int)s->time_shift);
    if (s->shift < 0 || s->sample_steps < 0 || s->sample_guidance < 0 || s->shift_base_seq < 0 ||
        s->shift_max_seq < 0 || (s->shift_max_seq > 0 && s->shift_max_seq <= s->shift_base_seq))
        return ORK_FAIL(ORK_E_ABI, "model %s: schedule: shift %g, sample_steps %d, sample_guidance %g, "
                        "shift seq %lld..%lld: negative or empty", what, s->shift, (int)s->sample_steps,
                        s->sample_guidance, (long long)s->shift_base_seq, (long long)s->shift_max_seq);
    return ORK_OK;
}

ork_status ork_model_decl_trainable(const ork_model_info *info, const char *what) {
    ork_model_schedule s;
    double b, m;
    ork_model_schedule_get(info, &s, &b, &m);
    if (s.prediction == ORK_PREDICT_FLOW && s.noise == ORK_NOISE_FLOW) return ORK_OK;
    static const char *const pred[] = {"flow velocity", "epsilon", "v"};
    return ORK_FAIL(ORK_E_UNSUPPORTED, "model %s predicts %s with a %s schedule: this core trains flow-matching "
                    "velocity only (issue #30)", what, pred[s.prediction], s.noise == ORK_NOISE_DISCRETE ? "discrete" : "flow");
}
