/* adamw_plugin.c — the optimizer plugin "adamw": components adamw (fp32
 * AdamW, torch semantics) and adamw8bit (bitsandbytes-compatible blockwise
 * 8-bit AdamW). Both read train.optimizer_params (betas, eps, weight_decay,
 * stochastic_rounding) with ai-toolkit's defaults (eps 1e-6, FORMATS.md §7).
 * The math lives in adamw_math.c / adamw8bit_cpu.c and their .cu twins; this
 * file is the vtable glue. Owns each instance's hyper-parameters (and, for
 * adamw8bit on CUDA, the code books copied to the device once). */
#include <orakul/orakul.h>

#include "adamw_math.h"
#include "adamw8bit.h"

#include <stdlib.h>
#include <string.h>

#ifdef ORK_OPT_HAVE_CUDA
/* adamw_plugin_cuda.cu */
ork_status ork_opt_upload_maps(const ork_adamw8bit_maps *maps, ork_adamw8bit_maps **d_maps);
void ork_opt_free_maps(ork_adamw8bit_maps *d_maps);
#endif

typedef struct opt_params {
    double betas[2];
    double eps;
    double weight_decay;
    int32_t stochastic_rounding;
} opt_params;

#define P(f) offsetof(opt_params, f)
static const ork_param adamw_keys[] = {
    {"betas", ORK_PARAM_FLOAT, 2, 0, "[0.9, 0.999]", 0, 0.999999, NULL, P(betas), "(beta1, beta2) moment decay rates"},
    {"eps", ORK_PARAM_FLOAT, 1, 0, "1e-6", 0, 1, NULL, P(eps), "denominator epsilon (ai-toolkit passes 1e-6)"},
    {"weight_decay", ORK_PARAM_FLOAT, 1, 0, "0.01", 0, 1, NULL, P(weight_decay), "decoupled weight decay"},
    {"stochastic_rounding", ORK_PARAM_BOOL, 1, 0, "true", 1, 0, NULL, P(stochastic_rounding),
     "bf16 parameters (network.weight_dtype: bf16): stochastic rounding (unbiased) instead of round-to-nearest-even"},
    {NULL},
};
#undef P

typedef struct opt {
    const ork_host *host;
    int eight_bit;
    ork_adamw_hparams hp;
    ork_adamw8bit_maps maps;
    ork_adamw8bit_maps *d_maps; /* device copy (CUDA), made on first CUDA step */
} opt;

static ork_status create_common(const ork_host *host, const void *params, int eight_bit, void **self) {
    opt *o = calloc(1, sizeof *o);
    if (!o) return ORK_E_NOMEM;
    o->host = host;
    o->eight_bit = eight_bit;
    o->hp = ork_adamw_hparams_default();
    if (params) {
        const opt_params *p = params;
        o->hp.beta1 = (float)p->betas[0];
        o->hp.beta2 = (float)p->betas[1];
        o->hp.eps = (float)p->eps;
        o->hp.weight_decay = (float)p->weight_decay;
        o->hp.bf16_stochastic = p->stochastic_rounding;
    } else {
        o->hp.eps = 1e-6f;
    }
    /* fused linspace: what bitsandbytes really builds (checked on the H200: 0 entries differ) */
    if (eight_bit) ork_adamw8bit_maps_init(&o->maps, 1);
    *self = o;
    return ORK_OK;
}

static ork_status adamw_create(const ork_host *h, const void *p, void **self) { return create_common(h, p, 0, self); }
static ork_status adamw8_create(const ork_host *h, const void *p, void **self) { return create_common(h, p, 1, self); }

static void opt_destroy(void *self) {
    opt *o = self;
#ifdef ORK_OPT_HAVE_CUDA
    if (o && o->d_maps) ork_opt_free_maps(o->d_maps);
#endif
    free(o);
}

static ork_status state_bytes(void *self, ork_dtype dt, int64_t numel, size_t *bytes) {
    opt *o = self;
    (void)dt;
    *bytes = o->eight_bit ? ork_adamw8bit_state_size(numel) : ork_adamw_state_size(numel);
    return ORK_OK;
}

/* The first NaN/Inf of n float32 at p (unaligned-safe): its index, or -1. */
static int64_t first_bad_f32(const unsigned char *p, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, p + 4 * i, 4);
        if ((u & 0x7F800000u) == 0x7F800000u) return i;
    }
    return -1;
}

/* The float32 parts of the state must be finite: adamw's m and v; adamw8bit's
 * m and v (small tensors) or its per-block absmax scales (the 8-bit codes are
 * indices into the code books: any byte is valid). */
static ork_status state_check(void *self, ork_dtype dt, int64_t numel, const void *state, size_t *at) {
    opt *o = self;
    (void)dt;
    int64_t floats = 2 * numel;
    if (o->eight_bit && numel >= ORK_ADAMW8BIT_MIN_8BIT)
        floats = 2 * ((numel + ORK_ADAMW8BIT_BLOCK - 1) / ORK_ADAMW8BIT_BLOCK);
    int64_t i = numel > 0 ? first_bad_f32(state, floats) : -1;
    if (i < 0) return ORK_OK;
    *at = (size_t)i * 4;
    return ORK_E_NUMERIC;
}

static ork_status opt_step(void *self, const ork_opt_step *s, ork_opt_param *ps, int n) {
    opt *o = self;
    ork_adamw_hparams hp = o->hp;
    hp.lr = (float)s->lr;
    hp.seed = s->seed;
    if (s->grad_scale != 1.0f) {
        o->host->log(o->host, ORK_LEVEL_ERROR, "grad_scale %g: the core scales gradients before the step", (double)s->grad_scale);
        return ORK_E_INVALID;
    }
    for (int i = 0; i < n; i++) {
        ork_opt_param *p = &ps[i];
        ork_status st;
        /* keyed on the parameter's run-wide index: a streamed block's step draws what the whole step draws */
        uint64_t id = s->param_ids ? (uint64_t)s->param_ids[i] : (uint64_t)i;
        hp.seed = s->seed ^ (0x9E3779B97F4A7C15ull * (id + 1));
        if (s->device == ORK_DEV_CPU) {
            st = o->eight_bit ? ork_adamw8bit_step_cpu(&o->maps, &hp, s->step, p->data, p->dtype, p->grad, ORK_F32,
                                                       p->state, p->numel)
                              : ork_adamw_step_cpu(&hp, s->step, p->data, p->dtype, p->grad, ORK_F32, p->state, p->numel);
        } else {
#ifdef ORK_OPT_HAVE_CUDA
            if (o->eight_bit && !o->d_maps) {
                st = ork_opt_upload_maps(&o->maps, &o->d_maps);
                if (st != ORK_OK) return st;
            }
            st = o->eight_bit ? ork_adamw8bit_step_cuda(o->d_maps, &hp, s->step, p->data, p->dtype, p->grad, ORK_F32,
                                                        p->state, p->numel, (ork_cuda_stream)s->stream)
                              : ork_adamw_step_cuda(&hp, s->step, p->data, p->dtype, p->grad, ORK_F32, p->state,
                                                    p->numel, (ork_cuda_stream)s->stream);
#else
            st = ORK_E_UNSUPPORTED;
#endif
        }
        if (st != ORK_OK) {
            o->host->log(o->host, ORK_LEVEL_ERROR, "step of parameter %d (%lld elements) failed: status %d", i,
                         (long long)p->numel, (int)st);
            return st;
        }
    }
    return ORK_OK;
}

static const ork_optimizer_vtable vt = {
    .abi = ORK_ABI_INIT(ork_optimizer_vtable),
    .create = adamw_create,
    .destroy = opt_destroy,
    .state_bytes = state_bytes,
    .step = opt_step,
    .state_check = state_check,
};
static const ork_optimizer_vtable vt8 = {
    .abi = ORK_ABI_INIT(ork_optimizer_vtable),
    .create = adamw8_create,
    .destroy = opt_destroy,
    .state_bytes = state_bytes,
    .step = opt_step,
    .state_check = state_check,
};

static const char *const adamw_aliases[] = {"adamw", "adam", NULL};
static const char *const adamw8_aliases[] = {"adamw8bit", "adam8bit", "adamw8", "adam8", NULL};

static const ork_component c_adamw = {
    .abi = ORK_ABI_INIT(ork_component),
    .kind = ORK_KIND_OPTIMIZER,
    .id = "org.orakul.adamw",
    .aliases = adamw_aliases,
    .description = "AdamW with fp32 moments (torch.optim.AdamW semantics)",
    .params = adamw_keys,
    .params_size = sizeof(opt_params),
    .vtable = &vt,
};
static const ork_component c_adamw8 = {
    .abi = ORK_ABI_INIT(ork_component),
    .kind = ORK_KIND_OPTIMIZER,
    .id = "org.orakul.adamw8bit",
    .aliases = adamw8_aliases,
    .description = "AdamW with blockwise 8-bit moments, bitsandbytes AdamW8bit compatible",
    .params = adamw_keys,
    .params_size = sizeof(opt_params),
    .vtable = &vt8,
};

static const ork_component *const comps[] = {&c_adamw, &c_adamw8, NULL};

static const ork_plugin_entry entry = {
    .abi = ORK_ABI_INIT(ork_plugin_entry),
    .name = "adamw",
    .version = "1.0.0",
    .description = "AdamW and AdamW-8bit optimizers",
    .components = comps,
};

ORK_PLUGIN_ENTRY(entry)
