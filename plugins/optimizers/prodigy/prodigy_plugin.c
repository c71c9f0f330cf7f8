/* prodigy_plugin.c — the optimizer plugin "prodigy": Prodigy (prodigyopt)
 * with ai-toolkit's keys and defaults (toolkit/optimizer.py: eps 1e-6, and a
 * train.lr below 0.1 taken as 1.0, the schedule applied on top). Owns each
 * instance's hyper-parameters and the global estimate (d, d_max, d_numerator,
 * k); the math is prodigy_math.c.
 *
 * The global sums: Prodigy's update of every parameter needs d of THIS step,
 * which needs sums over all parameters first: two passes over the state. The
 * core marks a call that steps every parameter (ork_opt_step.whole: the
 * resident trainable state) and both passes run inside it: prodigyopt's step.
 * A streamed trainable state steps one block per call, in one pass, and a run
 * resumed between two such calls could not know the last step's complete sums
 * (they exist only once every block was stepped): prodigy refuses it with one
 * line (docs/optimizers.md). Each parameter's state carries the global
 * estimate in its head, so a resumed run continues bit for bit.
 *
 * On CUDA (built with ORK_OPT_HAVE_CUDA) the same step runs on the device
 * (prodigy_cuda.cu): the global estimate lives in a small device buffer this
 * instance owns, the sums are reduced in a fixed order, nothing syncs. */
#include <orakul/orakul.h>

#include "prodigy_math.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct opt_params {
    double betas[2];
    double beta3;
    double eps;
    double weight_decay;
    int32_t decouple, use_bias_correction, safeguard_warmup;
    double d0, d_coef, growth_rate;
} opt_params;

#define P(f) offsetof(opt_params, f)
static const ork_param prodigy_keys[] = {
    {"betas", ORK_PARAM_FLOAT, 2, 0, "[0.9, 0.999]", 0, 0.999999, NULL, P(betas), "(beta1, beta2) moment decay rates"},
    {"beta3", ORK_PARAM_FLOAT, 1, 0, "-1", -1, 0.999999, NULL, P(beta3),
     "decay of the d estimate's sums; -1 (prodigyopt's None): sqrt(beta2)"},
    {"eps", ORK_PARAM_FLOAT, 1, 0, "1e-6", 1e-30, 1, NULL, P(eps), "denominator epsilon (ai-toolkit passes 1e-6)"},
    {"weight_decay", ORK_PARAM_FLOAT, 1, 0, "0", 0, 1, NULL, P(weight_decay), "weight decay"},
    {"decouple", ORK_PARAM_BOOL, 1, 0, "true", 1, 0, NULL, P(decouple), "AdamW-style decoupled weight decay"},
    {"use_bias_correction", ORK_PARAM_BOOL, 1, 0, "false", 1, 0, NULL, P(use_bias_correction),
     "Adam's bias correction in the step size"},
    {"safeguard_warmup", ORK_PARAM_BOOL, 1, 0, "false", 1, 0, NULL, P(safeguard_warmup),
     "leave lr out of the d estimate's denominator (for warm-up schedules)"},
    {"d0", ORK_PARAM_FLOAT, 1, 0, "1e-6", 1e-30, 1e30, NULL, P(d0), "initial d estimate"},
    {"d_coef", ORK_PARAM_FLOAT, 1, 0, "1.0", 1e-30, 1e30, NULL, P(d_coef), "coefficient of the d estimate"},
    {"growth_rate", ORK_PARAM_FLOAT, 1, 0, "0", 0, 1e300, NULL, P(growth_rate),
     "largest factor d may grow by per step; 0: unlimited (prodigyopt's inf, which YAML numbers cannot say)"},
    {NULL},
};
#undef P

typedef struct opt {
    const ork_host *host;
    ork_prodigy_hparams hp;
    ork_prodigy_global g;
    int loaded;           /* g came from the states (or is fresh) */
    ork_prodigy_dev *dev; /* CUDA: the global estimate on the device */
    int dev_loaded;
} opt;

static void log_err(const opt *o, const char *msg) { o->host->log(o->host, ORK_LEVEL_ERROR, "%s", msg); }

static ork_status prodigy_create(const ork_host *host, const void *params, void **self) {
    opt *o = calloc(1, sizeof *o);
    if (!o) return ORK_E_NOMEM;
    o->host = host;
    opt_params def = {{0.9, 0.999}, -1, 1e-6, 0, 1, 0, 0, 1e-6, 1.0, 0};
    const opt_params *p = params ? params : &def;
    o->hp = (ork_prodigy_hparams){p->betas[0], p->betas[1], p->beta3, p->eps, p->weight_decay, p->decouple,
                                  p->use_bias_correction, p->safeguard_warmup, p->d0, p->d_coef,
                                  p->growth_rate > 0 ? p->growth_rate : INFINITY};
    *self = o;
    return ORK_OK;
}

/* ai-toolkit's prodigy8bit (toolkit/optimizers/prodigy_8bit.py): accepted,
 * with fp32 state and one line saying so (docs/optimizers.md: why not 8-bit). */
static ork_status prodigy8_create(const ork_host *host, const void *params, void **self) {
    host->log(host, ORK_LEVEL_WARN, "prodigy8bit: its 8-bit state is not implemented; Prodigy runs with fp32 state "
              "(16 bytes per trained element instead of 4)");
    return prodigy_create(host, params, self);
}

static void prodigy_destroy(void *self) {
#ifdef ORK_OPT_HAVE_CUDA
    opt *o = self;
    if (o && o->dev) ork_prodigy_dev_free(o->dev);
#endif
    free(self);
}

#ifdef ORK_OPT_HAVE_CUDA
static ork_status step_cuda(opt *o, const ork_opt_step *s, ork_opt_param *ps, int n, double lr) {
    if (!o->dev) ORK_TRY(ork_prodigy_dev_new(&o->dev));
    void **param = malloc((size_t)n * sizeof *param), **state = malloc((size_t)n * sizeof *state);
    const float **grad = malloc((size_t)n * sizeof *grad);
    ork_dtype *pdt = malloc((size_t)n * sizeof *pdt);
    int64_t *numel = malloc((size_t)n * sizeof *numel);
    ork_status st = ORK_E_NOMEM;
    if (param && state && grad && pdt && numel) {
        for (int i = 0; i < n; i++)
            param[i] = ps[i].data, state[i] = ps[i].state, grad[i] = ps[i].grad, pdt[i] = ps[i].dtype,
            numel[i] = ps[i].numel;
        st = ork_prodigy_step_cuda(&o->hp, o->dev, !o->dev_loaded, lr, n, param, pdt, grad, state, numel,
                                   (ork_prodigy_stream)s->stream);
        if (st == ORK_OK) o->dev_loaded = 1;
        else log_err(o, "prodigy: a CUDA kernel launch failed");
    }
    free(param), free(state), free(grad), free(pdt), free(numel);
    return st;
}
#endif

static ork_status state_bytes(void *self, ork_dtype dt, int64_t numel, size_t *bytes) {
    (void)self;
    (void)dt;
    *bytes = ork_prodigy_state_size(numel);
    return ORK_OK;
}

/* Every double of the head and every float after it finite; d > 0 once stepped. */
static ork_status state_check(void *self, ork_dtype dt, int64_t numel, const void *state, size_t *at) {
    (void)self;
    (void)dt;
    ork_prodigy_head h;
    memcpy(&h, state, sizeof h);
    const double hv[3] = {h.d, h.d_max, h.d_num};
    for (int i = 0; i < 3; i++)
        if (!isfinite(hv[i]) || (i < 2 && h.k > 0 && !(hv[i] > 0))) {
            *at = (size_t)i * 8;
            return ORK_E_NUMERIC;
        }
    const unsigned char *f = (const unsigned char *)state + ORK_PRODIGY_HEAD;
    for (int64_t i = 0; i < 4 * numel; i++) {
        uint32_t u;
        memcpy(&u, f + 4 * i, 4);
        if ((u & 0x7F800000u) == 0x7F800000u) {
            *at = ORK_PRODIGY_HEAD + (size_t)i * 4;
            return ORK_E_NUMERIC;
        }
    }
    return ORK_OK;
}

/* The global estimate from the heads of the states handed in (the one
 * stepped most: a parameter without a gradient in some step lags); fresh
 * states give d0. */
static void load_global(opt *o, const ork_opt_param *ps, int n) {
    o->g = (ork_prodigy_global){o->hp.d0, o->hp.d0, 0, 0};
    const ork_prodigy_head *best = NULL;
    for (int i = 0; i < n; i++) {
        const ork_prodigy_head *h = ps[i].state;
        if (h->inited && h->d > 0 && (!best || h->k > best->k)) best = h;
    }
    if (best) o->g = (ork_prodigy_global){best->d, best->d_max, best->d_num, best->k};
    o->loaded = 1;
}

/* prodigyopt's global update from a step's sums (its step k); den == 0 leaves all as is. */
static void finish(opt *o, double num, double den) {
    const ork_prodigy_hparams *h = &o->hp;
    double b3 = h->beta3 < 0 ? sqrt(h->beta2) : h->beta3;
    ork_prodigy_global *g = &o->g;
    g->d_num = b3 * g->d_num + num;
    double d_hat = h->d_coef * g->d_num / den;
    if (g->d == h->d0) g->d = g->d > d_hat ? g->d : d_hat;
    if (d_hat > g->d_max) g->d_max = d_hat;
    double grown = g->d * h->growth_rate;
    g->d = g->d_max < grown ? g->d_max : grown;
    g->k++;
}

static void write_heads(const opt *o, ork_opt_param *ps, int n) {
    for (int i = 0; i < n; i++) {
        ork_prodigy_head *h = ps[i].state;
        h->d = o->g.d, h->d_max = o->g.d_max, h->d_num = o->g.d_num, h->k = o->g.k;
    }
}

static ork_status prodigy_step(void *self, const ork_opt_step *s, ork_opt_param *ps, int n) {
    opt *o = self;
#ifndef ORK_OPT_HAVE_CUDA
    if (s->device != ORK_DEV_CPU) {
        log_err(o, "prodigy: this build has no CUDA path (built with ORAKUL_CUDA=OFF)");
        return ORK_E_UNSUPPORTED;
    }
#endif
    if (s->grad_scale != 1.0f) {
        log_err(o, "prodigy: grad_scale must be 1 (the core scales gradients before the step)");
        return ORK_E_INVALID;
    }
    for (int i = 0; i < n; i++)
        if (ps[i].numel < 1 || (ps[i].dtype != ORK_F32 && ps[i].dtype != ORK_BF16) || !ps[i].state) {
            log_err(o, "prodigy: a parameter that is empty, not F32/BF16, or without state");
            return ORK_E_INVALID;
        }
    if (!ork_opt_step_has_whole(s) || !s->whole) {
        log_err(o, "prodigy needs every parameter in one step (its d is a sum over all of them): the trainable "
                   "state streams per block in this run (or the core is older than this plugin); use adamw, or "
                   "leave the trainable state resident (ORAKUL_STREAM_TRAINABLES unset, a smaller network)");
        return ORK_E_UNSUPPORTED;
    }
    /* ai-toolkit: a learning rate below 0.1 is taken as 1.0 (Prodigy's scale), the schedule on top */
    double lr = s->lr;
    if (s->base_lr > 0 && s->base_lr < 0.1) lr = s->lr / s->base_lr;
#ifdef ORK_OPT_HAVE_CUDA
    if (s->device != ORK_DEV_CPU) return step_cuda(o, s, ps, n, lr);
#endif
    if (!o->loaded) load_global(o, ps, n);
    const ork_prodigy_hparams *h = &o->hp;
    const ork_prodigy_global g = o->g;
    double bc = 1;
    if (h->use_bias_correction)
        bc = sqrt(1 - pow(h->beta2, (double)(g.k + 1))) / (1 - pow(h->beta1, (double)(g.k + 1)));
    double dlr = g.d * lr * bc;
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) {
        if (!(lr > 0)) { /* prodigyopt: state made, nothing summed or stepped */
            ork_prodigy_capture_p0(ps[i].data, ps[i].dtype, ps[i].state, ps[i].numel);
            continue;
        }
        ORK_TRY(ork_prodigy_phase1_cpu(h, ps[i].data, ps[i].dtype, ps[i].grad, ps[i].state, ps[i].numel, g.d, dlr,
                                       &num, &den));
    }
    if (!(lr > 0) || den == 0) { /* prodigyopt returns before any update: d and k stay */
        write_heads(o, ps, n);
        return ORK_OK;
    }
    finish(o, num, den);
    for (int i = 0; i < n; i++)
        ORK_TRY(ork_prodigy_phase2_cpu(h, ps[i].data, ps[i].dtype, ps[i].grad, ps[i].state, ps[i].numel, o->g.d, dlr));
    write_heads(o, ps, n);
    return ORK_OK;
}

static const ork_optimizer_vtable vt = {
    .abi = ORK_ABI_INIT(ork_optimizer_vtable),
    .create = prodigy_create,
    .destroy = prodigy_destroy,
    .state_bytes = state_bytes,
    .step = prodigy_step,
    .state_check = state_check,
};

static const ork_optimizer_vtable vt8 = {
    .abi = ORK_ABI_INIT(ork_optimizer_vtable),
    .create = prodigy8_create,
    .destroy = prodigy_destroy,
    .state_bytes = state_bytes,
    .step = prodigy_step,
    .state_check = state_check,
};

static const char *const aliases[] = {"prodigy", NULL};
static const char *const aliases8[] = {"prodigy8bit", NULL};

static const ork_component c_prodigy = {
    .abi = ORK_ABI_INIT(ork_component),
    .kind = ORK_KIND_OPTIMIZER,
    .id = "org.orakul.prodigy",
    .aliases = aliases,
    .description = "Prodigy: Adam with a learning rate it estimates (prodigyopt semantics; lr 1.0)",
    .params = prodigy_keys,
    .params_size = sizeof(opt_params),
    .vtable = &vt,
};

static const ork_component c_prodigy8 = {
    .abi = ORK_ABI_INIT(ork_component),
    .kind = ORK_KIND_OPTIMIZER,
    .id = "org.orakul.prodigy8bit",
    .aliases = aliases8,
    .description = "ai-toolkit's prodigy8bit: Prodigy with fp32 state (its 8-bit state is not implemented)",
    .params = prodigy_keys,
    .params_size = sizeof(opt_params),
    .vtable = &vt8,
};

static const ork_component *const comps[] = {&c_prodigy, &c_prodigy8, NULL};

static const ork_plugin_entry entry = {
    .abi = ORK_ABI_INIT(ork_plugin_entry),
    .name = "prodigy",
    .version = "1.0.0",
    .description = "Prodigy optimizer (prodigyopt 1.1 semantics, ai-toolkit defaults)",
    .components = comps,
};

ORK_PLUGIN_ENTRY(entry)
