/* perceptual.c — the perceptual/style loss component "org.orakul.perceptual"
 * (aliases perceptual, style; train.loss_type: perceptual), computed as
 * ai-toolkit's toolkit/style.py does (FORMATS.md §6):
 *
 *   x0_pred = x_t − t·v_pred          (per sample t, flow matching)
 *   img_p = decode(x0_pred), img_t = decode(x0)    (the family's codec, [0, 1])
 *   VGG19 (torchvision layout) on (img − mean)/std, features = ReLU outputs
 *   content_l = per-sample sum((Fp − Ft)²)/(C·H·W)
 *   style_l   = per-sample sum((Gp − Gt)²)/C²,  G = F·Fᵀ/(C·H·W)  (F32)
 *   loss = mse_weight·mse(v_pred, target)
 *        + content_weight·Σ s_l·content_l + style_weight·Σ s_l·style_l
 *
 * with s_l = 1/loss_l measured once on a random-noise pair (ai-toolkit's
 * TrainVAEProcess scalers; layer_scalers: none gives s_l = 1), and per-sample
 * values averaged over the batch (reduction: sum gives ai-toolkit's sum).
 *
 * Owns: its instance, the validated VGG19 conv weights as host F32 (read by
 * prepare from vgg_path through the safetensors service), and their device
 * copies: uploaded once with tensor_api->persistent (they outlive graph
 * resets; frozen: no gradient, no optimizer state) and released in destroy.
 * A core without persistent (older 1.x) gets them re-uploaded with from_host
 * at every compute, as graph tensors die at each reset. */
#include <orakul/orakul.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY ORK_TRY

/* ---- VGG19 features (torchvision) -------------------------------------------------------------- */

#define VGG_NCONV 16
/* features.<idx> of each conv, in order conv1_1 .. conv5_4 */
static const int vgg_idx[VGG_NCONV] = {0, 2, 5, 7, 10, 12, 14, 16, 19, 21, 23, 25, 28, 30, 32, 34};
static const int vgg_cout[VGG_NCONV] = {64, 64, 128, 128, 256, 256, 256, 256, 512, 512, 512, 512, 512, 512, 512, 512};
static const int vgg_block[VGG_NCONV] = {1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5};
static const int vgg_in_block[VGG_NCONV] = {1, 2, 1, 2, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4};

static int vgg_cin(int i) { return i == 0 ? 3 : vgg_cout[i - 1]; }
/* a 2x2 max-pool follows conv i (torchvision indices 4, 9, 18, 27, 36) */
static int vgg_pool_after(int i) { return i + 1 < VGG_NCONV && vgg_block[i + 1] != vgg_block[i]; }

/* ---- the component --------------------------------------------------------------------------- */

typedef struct perc_params {
    const char *vgg_path;
    const char *content_layers;
    const char *style_layers;
    double content_weight;
    double style_weight;
    double mse_weight;
    const char *reduction;
    const char *layer_scalers;
    int64_t scaler_size;
    const char *compute_dtype;
} perc_params;

#define P(field) offsetof(perc_params, field)
static const ork_param perc_keys[] = {
    {"vgg_path", ORK_PARAM_STRING, 1, ORK_PARAM_REQUIRED, NULL, 1, 0, NULL, P(vgg_path),
     "VGG19 weights as safetensors in torchvision's layout (features.<idx>.weight/.bias); see docs/perceptual.md"},
    {"content_layers", ORK_PARAM_STRING, 1, 0, "conv2_2,conv3_2,conv4_2", 1, 0, NULL, P(content_layers),
     "comma-separated VGG19 ReLU outputs for the content loss ('' = none)"},
    {"style_layers", ORK_PARAM_STRING, 1, 0, "conv2_1,conv3_1,conv4_1", 1, 0, NULL, P(style_layers),
     "comma-separated VGG19 ReLU outputs for the Gram-matrix style loss ('' = none)"},
    {"content_weight", ORK_PARAM_FLOAT, 1, 0, "1.0", 0, 1e9, NULL, P(content_weight), "weight of the summed content losses"},
    {"style_weight", ORK_PARAM_FLOAT, 1, 0, "1.0", 0, 1e9, NULL, P(style_weight), "weight of the summed style losses"},
    {"mse_weight", ORK_PARAM_FLOAT, 1, 0, "1.0", 0, 1e9, NULL, P(mse_weight), "weight of the plain velocity MSE"},
    {"reduction", ORK_PARAM_STRING, 1, 0, "mean", 1, 0, "mean|sum", P(reduction),
     "per-sample VGG losses over the batch: mean, or sum (ai-toolkit)"},
    {"layer_scalers", ORK_PARAM_STRING, 1, 0, "noise", 1, 0, "noise|none", P(layer_scalers),
     "noise: scale each layer's loss by 1/(its value on a random-noise pair), as ai-toolkit; none: raw"},
    {"scaler_size", ORK_PARAM_INT, 1, 0, "256", 16, 4096, NULL, P(scaler_size), "side in pixels of the noise pair"},
    {"compute_dtype", ORK_PARAM_STRING, 1, 0, "f32", 1, 0, "f32|input", P(compute_dtype),
     "VGG19's dtype: f32 (default; the decoded image is widened, gradients match torchvision's f32 to ~1e-6) or "
     "input (the decoded image's, bf16 in training: faster, but bf16 features leave ~20% L2 error in the content "
     "gradient, where F_pred - F_target cancels)"},
    {NULL},
};
#undef P

#define MAX_LAYERS VGG_NCONV

typedef struct perc {
    const ork_host *host;
    const ork_ops *ops;
    const ork_tensor_api *ta;
    const ork_safetensors_api *st;
    char vgg_path[1024];
    float content_w, style_w, mse_w;
    int sum_batch;          /* reduction: sum */
    int noise_scalers;      /* layer_scalers: noise */
    int f32_compute;        /* compute_dtype: f32 */
    int scaler_size;
    int content[VGG_NCONV]; /* 1: conv i's ReLU output feeds a content loss */
    int style[VGG_NCONV];
    int n_conv;             /* convs run: up to the deepest layer in use (0: none) */
    float content_s[VGG_NCONV], style_s[VGG_NCONV]; /* layer scalers s_l */
    float *w[VGG_NCONV], *b[VGG_NCONV];             /* host F32, torchvision shapes */
    int prepared;
    /* Device copies that outlive graph resets (tensor_api->persistent, when the
     * core offers it): uploaded once instead of at every compute. */
    ork_tensor *dw[VGG_NCONV], *db[VGG_NCONV], *dmul, *dadd;
    int dev_ready;
} perc;

#define LOG(pc, lvl, ...) (pc)->host->log((pc)->host, (lvl), __VA_ARGS__)

static void vgg_name(int i, char *buf, size_t n) { snprintf(buf, n, "conv%d_%d", vgg_block[i], vgg_in_block[i]); }

/* "conv2_2, conv3_2" -> flags; '' selects none. */
static ork_status parse_layers(perc *pc, const char *key, const char *list, int *flags) {
    memset(flags, 0, sizeof(int) * VGG_NCONV);
    if (!list) return ORK_OK;
    const char *s = list;
    while (*s) {
        while (*s == ' ' || *s == ',' || *s == '\t') s++;
        if (!*s) break;
        size_t len = strcspn(s, ", \t");
        int found = -1;
        for (int i = 0; i < VGG_NCONV && found < 0; i++) {
            char nm[16];
            vgg_name(i, nm, sizeof nm);
            if (strlen(nm) == len && !strncmp(nm, s, len)) found = i;
        }
        if (found < 0) {
            LOG(pc, ORK_LEVEL_ERROR, "train.loss_params.%s: unknown VGG19 layer '%.*s' (conv1_1..conv1_2, "
                "conv2_1..conv2_2, conv3_1..conv3_4, conv4_1..conv4_4, conv5_1..conv5_4)", key, (int)len, s);
            return ORK_E_CONFIG;
        }
        flags[found] = 1;
        s += len;
    }
    return ORK_OK;
}

static ork_status perc_create(const ork_host *host, const void *params, void **self) {
    perc *pc = calloc(1, sizeof *pc);
    if (!pc) return ORK_E_NOMEM;
    pc->host = host;
    pc->ops = host->get_service(host, ORK_SERVICE_OPS);
    pc->ta = host->get_service(host, ORK_SERVICE_TENSOR);
    pc->st = host->get_service(host, ORK_SERVICE_SAFETENSORS);
    if (!pc->ops || !pc->ta || !pc->st) {
        LOG(pc, ORK_LEVEL_ERROR, "the core lacks %s, %s or %s", ORK_SERVICE_OPS, ORK_SERVICE_TENSOR,
            ORK_SERVICE_SAFETENSORS);
        free(pc);
        return ORK_E_ABI;
    }
    perc_params p = {NULL, "conv2_2,conv3_2,conv4_2", "conv2_1,conv3_1,conv4_1", 1.0, 1.0, 1.0, "mean", "noise", 256, "f32"};
    if (params) p = *(const perc_params *)params;
    ork_status s = ORK_OK;
    if (!p.vgg_path || !p.vgg_path[0]) {
        LOG(pc, ORK_LEVEL_ERROR, "train.loss_params.vgg_path is required for the perceptual loss: VGG19 weights as "
            "safetensors in torchvision's layout (docs/perceptual.md has the one-line conversion)");
        s = ORK_E_CONFIG;
    } else if (strlen(p.vgg_path) >= sizeof pc->vgg_path) {
        LOG(pc, ORK_LEVEL_ERROR, "train.loss_params.vgg_path is longer than %zu bytes", sizeof pc->vgg_path - 1);
        s = ORK_E_CONFIG;
    }
    if (s == ORK_OK) s = parse_layers(pc, "content_layers", p.content_layers, pc->content);
    if (s == ORK_OK) s = parse_layers(pc, "style_layers", p.style_layers, pc->style);
    if (s == ORK_OK && (!(p.content_weight >= 0) || !(p.style_weight >= 0) || !(p.mse_weight >= 0))) {
        LOG(pc, ORK_LEVEL_ERROR, "train.loss_params: content_weight, style_weight and mse_weight must be >= 0");
        s = ORK_E_CONFIG;
    }
    if (s != ORK_OK) { free(pc); return s; }
    snprintf(pc->vgg_path, sizeof pc->vgg_path, "%s", p.vgg_path);
    pc->content_w = (float)p.content_weight;
    pc->style_w = (float)p.style_weight;
    pc->mse_w = (float)p.mse_weight;
    pc->sum_batch = p.reduction && !strcmp(p.reduction, "sum");
    pc->noise_scalers = !p.layer_scalers || strcmp(p.layer_scalers, "none") != 0;
    pc->f32_compute = !p.compute_dtype || strcmp(p.compute_dtype, "input") != 0;
    pc->scaler_size = p.scaler_size >= 16 ? (int)p.scaler_size : 256;
    /* a loss with zero weight is not computed at all */
    if (pc->content_w == 0.0f) memset(pc->content, 0, sizeof pc->content);
    if (pc->style_w == 0.0f) memset(pc->style, 0, sizeof pc->style);
    for (int i = 0; i < VGG_NCONV; i++) {
        if (pc->content[i] || pc->style[i]) pc->n_conv = i + 1;
        pc->content_s[i] = pc->style_s[i] = 1.0f;
    }
    *self = pc;
    return ORK_OK;
}

static void perc_destroy(void *self) {
    perc *pc = self;
    if (!pc) return;
    if (pc->dev_ready) {
        for (int i = 0; i < pc->n_conv; i++) { pc->ta->release(pc->dw[i]); pc->ta->release(pc->db[i]); }
        pc->ta->release(pc->dmul);
        pc->ta->release(pc->dadd);
    }
    for (int i = 0; i < VGG_NCONV; i++) { free(pc->w[i]); free(pc->b[i]); }
    free(pc);
}

/* ---- weights ---------------------------------------------------------------------------------- */

static void shape_str(const int64_t *sh, int nd, char *buf, size_t n) {
    size_t o = (size_t)snprintf(buf, n, "(");
    for (int k = 0; k < nd && o < n; k++) o += (size_t)snprintf(buf + o, n - o, "%s%lld", k ? ", " : "", (long long)sh[k]);
    if (o < n) snprintf(buf + o, n - o, ")");
}

/* One tensor of the file: present, of the torchvision shape, read as F32. */
static ork_status load_tensor(perc *pc, const ork_st_set *set, const char *name, int nd, const int64_t *want,
                              float **out) {
    ork_st_info t;
    char ws[64], gs[64];
    shape_str(want, nd, ws, sizeof ws);
    if (pc->st->find(set, name, &t) != ORK_OK) {
        LOG(pc, ORK_LEVEL_ERROR, "%s: missing tensor '%s' %s: not a torchvision VGG19 'features' state dict, or "
            "truncated (docs/perceptual.md)", pc->vgg_path, name, ws);
        return ORK_E_FORMAT;
    }
    int ok = t.ndim == nd;
    for (int k = 0; ok && k < nd; k++) ok = t.shape[k] == want[k];
    if (!ok) {
        shape_str(t.shape, t.ndim, gs, sizeof gs);
        LOG(pc, ORK_LEVEL_ERROR, "%s: tensor '%s' is %s, torchvision's VGG19 has %s", pc->vgg_path, name, gs, ws);
        return ORK_E_FORMAT;
    }
    int64_t n = 1;
    for (int k = 0; k < nd; k++) n *= want[k];
    float *buf = malloc((size_t)n * sizeof *buf);
    if (!buf) { LOG(pc, ORK_LEVEL_ERROR, "%s: out of host memory for '%s'", pc->vgg_path, name); return ORK_E_NOMEM; }
    ork_status s = pc->st->read_f32(&t, buf);
    for (int64_t i = 0; s == ORK_OK && i < n; i++)
        if (!isfinite(buf[i])) {
            LOG(pc, ORK_LEVEL_ERROR, "%s: tensor '%s' holds a non-finite value at element %lld", pc->vgg_path, name,
                (long long)i);
            s = ORK_E_NUMERIC;
        }
    if (s != ORK_OK) {
        if (s != ORK_E_NUMERIC) LOG(pc, ORK_LEVEL_ERROR, "%s: cannot read tensor '%s' as F32", pc->vgg_path, name);
        free(buf);
        return s;
    }
    *out = buf;
    return ORK_OK;
}

static ork_status load_vgg(perc *pc) {
    ork_st_set *set = NULL;
    TRY(pc->st->open(pc->vgg_path, &set)); /* the service logs its one line */
    ork_status s = ORK_OK;
    for (int i = 0; s == ORK_OK && i < pc->n_conv; i++) {
        char name[64];
        int64_t wsh[4] = {vgg_cout[i], vgg_cin(i), 3, 3}, bsh[1] = {vgg_cout[i]};
        snprintf(name, sizeof name, "features.%d.weight", vgg_idx[i]);
        s = load_tensor(pc, set, name, 4, wsh, &pc->w[i]);
        snprintf(name, sizeof name, "features.%d.bias", vgg_idx[i]);
        if (s == ORK_OK) s = load_tensor(pc, set, name, 1, bsh, &pc->b[i]);
    }
    pc->st->close(set);
    return s;
}

/* ---- the forward pieces ------------------------------------------------------------------------ */

typedef struct vgg_dev {
    ork_tensor *w[VGG_NCONV], *b[VGG_NCONV]; /* frozen: never require grad */
    ork_tensor *mul, *add;                   /* (3, 1, 1): 1/std, −mean/std */
} vgg_dev;

static ork_status upload(perc *pc, ork_graph *g, vgg_dev *d) {
    static const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    float m[3], a[3];
    for (int c = 0; c < 3; c++) { m[c] = 1.0f / std[c]; a[c] = -mean[c] / std[c]; }
    int64_t s3[3] = {3, 1, 1};
    if (ork_tensor_api_has_persistent(pc->ta)) {
        if (!pc->dev_ready) {
            TRY(pc->ta->persistent(g, ORK_F32, 3, s3, m, &pc->dmul));
            TRY(pc->ta->persistent(g, ORK_F32, 3, s3, a, &pc->dadd));
            for (int i = 0; i < pc->n_conv; i++) {
                int64_t wsh[4] = {vgg_cout[i], vgg_cin(i), 3, 3}, bsh[1] = {vgg_cout[i]};
                TRY(pc->ta->persistent(g, ORK_F32, 4, wsh, pc->w[i], &pc->dw[i]));
                TRY(pc->ta->persistent(g, ORK_F32, 1, bsh, pc->b[i], &pc->db[i]));
            }
            pc->dev_ready = 1;
        }
        d->mul = pc->dmul;
        d->add = pc->dadd;
        for (int i = 0; i < pc->n_conv; i++) { d->w[i] = pc->dw[i]; d->b[i] = pc->db[i]; }
        return ORK_OK;
    }
    TRY(pc->ta->from_host(g, ORK_F32, 3, s3, m, &d->mul));
    TRY(pc->ta->from_host(g, ORK_F32, 3, s3, a, &d->add));
    for (int i = 0; i < pc->n_conv; i++) {
        int64_t wsh[4] = {vgg_cout[i], vgg_cin(i), 3, 3}, bsh[1] = {vgg_cout[i]};
        TRY(pc->ta->from_host(g, ORK_F32, 4, wsh, pc->w[i], &d->w[i]));
        TRY(pc->ta->from_host(g, ORK_F32, 1, bsh, pc->b[i], &d->b[i]));
    }
    return ORK_OK;
}

/* feats[i] = ReLU output of conv i (i < n_conv) for img (B, 3, H, W) in [0, 1]. */
static ork_status vgg_run(perc *pc, ork_graph *g, const vgg_dev *d, ork_tensor *img, ork_tensor **feats) {
    const ork_ops *o = pc->ops;
    if (pc->ta->ndim(img) != 4 || pc->ta->dim(img, 1) != 3) {
        LOG(pc, ORK_LEVEL_ERROR, "perceptual: decode gave a %d-dim tensor with %lld channels, expected (B, 3, H, W)",
            pc->ta->ndim(img), (long long)pc->ta->dim(img, 1));
        return ORK_E_INVALID;
    }
    if (pc->f32_compute && pc->ta->dtype(img) != ORK_F32) TRY(o->cast(g, img, ORK_F32, &img));
    ork_dtype dt = pc->ta->dtype(img);
    ork_tensor *mul = d->mul, *add = d->add, *x;
    if (dt != ORK_F32) { TRY(o->cast(g, mul, dt, &mul)); TRY(o->cast(g, add, dt, &add)); }
    TRY(o->mul(g, img, mul, &x));
    TRY(o->add(g, x, add, &x));
    for (int i = 0; i < pc->n_conv; i++) {
        TRY(o->conv2d(g, x, d->w[i], d->b[i], 1, 1, &x));
        TRY(o->relu(g, x, &x));
        feats[i] = x;
        if (vgg_pool_after(i) && i + 1 < pc->n_conv) {
            if (pc->ta->dim(x, 2) < 2 || pc->ta->dim(x, 3) < 2) {
                char nm[16];
                vgg_name(pc->n_conv - 1, nm, sizeof nm);
                LOG(pc, ORK_LEVEL_ERROR, "perceptual: a %lldx%lld image is too small for VGG19 up to %s",
                    (long long)pc->ta->dim(img, 3), (long long)pc->ta->dim(img, 2), nm);
                return ORK_E_INVALID;
            }
            TRY(o->maxpool2x2(g, x, &x));
        }
    }
    return ORK_OK;
}

/* Gram matrices (B, C, C) F32 of f (B, C, H, W): F·Fᵀ/(C·H·W). */
static ork_status gram(perc *pc, ork_graph *g, ork_tensor *f, ork_tensor **G) {
    const ork_tensor_api *ta = pc->ta;
    int64_t B = ta->dim(f, 0), C = ta->dim(f, 1), HW = ta->dim(f, 2) * ta->dim(f, 3);
    int64_t s3[3] = {B, C, HW};
    TRY(pc->ops->reshape(g, f, 3, s3, &f));
    if (ta->dtype(f) != ORK_F32) TRY(pc->ops->cast(g, f, ORK_F32, &f));
    TRY(pc->ops->matmul(g, f, f, 0, 1, G));
    return pc->ops->scale(g, *G, 1.0f / (float)(C * HW), G);
}

/* Per-layer losses (1) F32, batch-reduced (mean; ×B for sum), unscaled. */
static ork_status layer_losses(perc *pc, ork_graph *g, ork_tensor **fp, ork_tensor **ft, ork_tensor **closs,
                               ork_tensor **sloss) {
    float bsc = pc->sum_batch ? (float)pc->ta->dim(fp[0], 0) : 1.0f;
    for (int i = 0; i < pc->n_conv; i++) {
        closs[i] = sloss[i] = NULL;
        if (pc->content[i]) {
            /* mean over samples of sum((p−t)²)/(C·H·W) = mean over all elements */
            TRY(pc->ops->mse(g, fp[i], ft[i], &closs[i]));
            if (bsc != 1.0f) TRY(pc->ops->scale(g, closs[i], bsc, &closs[i]));
        }
        if (pc->style[i]) {
            ork_tensor *gp, *gt;
            TRY(gram(pc, g, fp[i], &gp));
            TRY(gram(pc, g, ft[i], &gt));
            /* mean over samples of sum((Gp−Gt)²)/C² = mean over all B·C·C elements */
            TRY(pc->ops->mse(g, gp, gt, &sloss[i]));
            if (bsc != 1.0f) TRY(pc->ops->scale(g, sloss[i], bsc, &sloss[i]));
        }
    }
    return ORK_OK;
}

/* ---- prepare: weights, then the scalers ----------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double uniform01(uint64_t *s) { return ((double)(splitmix(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

/* ai-toolkit: one pass of randn (2, 3, S, S) (pred = noise[0], target =
 * noise[1]) and s_l = 1/loss_l per layer (1 where that is not finite). */
static ork_status measure_scalers(perc *pc, ork_graph *g) {
    const int S = pc->scaler_size;
    int64_t n = (int64_t)3 * S * S;
    float *h = malloc((size_t)(2 * n) * sizeof *h);
    if (!h) return ORK_E_NOMEM;
    uint64_t seed = 0x5EED0F0A11u;
    for (int64_t i = 0; i < 2 * n; i += 2) {
        double u1 = uniform01(&seed), u2 = uniform01(&seed), r = sqrt(-2.0 * log(u1));
        h[i] = (float)(r * cos(6.283185307179586 * u2));
        h[i + 1] = (float)(r * sin(6.283185307179586 * u2));
    }
    int64_t sh[4] = {1, 3, S, S};
    ork_tensor *xp, *xt, *fp[VGG_NCONV], *ft[VGG_NCONV], *cl[VGG_NCONV], *sl[VGG_NCONV];
    vgg_dev d;
    ork_status s = pc->ta->from_host(g, ORK_F32, 4, sh, h, &xp);
    if (s == ORK_OK) s = pc->ta->from_host(g, ORK_F32, 4, sh, h + n, &xt);
    free(h);
    TRY(s);
    TRY(upload(pc, g, &d));
    TRY(vgg_run(pc, g, &d, xp, fp));
    TRY(vgg_run(pc, g, &d, xt, ft));
    int save = pc->sum_batch;
    pc->sum_batch = 0; /* B = 1: the same either way */
    s = layer_losses(pc, g, fp, ft, cl, sl);
    pc->sum_batch = save;
    TRY(s);
    char line[1024];
    size_t o = 0;
    for (int i = 0; i < pc->n_conv; i++) {
        for (int k = 0; k < 2; k++) {
            ork_tensor *t = k ? sl[i] : cl[i];
            if (!t) continue;
            float v = 0;
            TRY(pc->ta->to_host(g, t, ORK_F32, &v));
            float sc = (isfinite(v) && v > 0.0f && isfinite(1.0f / v)) ? 1.0f / v : 1.0f;
            if (k) pc->style_s[i] = sc; else pc->content_s[i] = sc;
            char nm[16];
            vgg_name(i, nm, sizeof nm);
            if (o < sizeof line)
                o += (size_t)snprintf(line + o, sizeof line - o, " %s %s %.4g", k ? "style" : "content", nm, (double)sc);
        }
    }
    LOG(pc, ORK_LEVEL_INFO, "perceptual: layer scalers (1/loss on a %dx%d noise pair):%s", S, S, line);
    return ORK_OK;
}

static ork_status perc_prepare(void *self, ork_graph *g) {
    perc *pc = self;
    pc->prepared = 0;
    for (int i = 0; i < VGG_NCONV; i++) { free(pc->w[i]); free(pc->b[i]); pc->w[i] = pc->b[i] = NULL; }
    if (pc->n_conv > 0) {
        TRY(load_vgg(pc));
        if (pc->noise_scalers) TRY(measure_scalers(pc, g));
    }
    char nm[16] = "none";
    if (pc->n_conv) vgg_name(pc->n_conv - 1, nm, sizeof nm);
    LOG(pc, ORK_LEVEL_INFO, "perceptual: VGG19 from %s up to %s; weights content %g, style %g, mse %g",
        pc->n_conv ? pc->vgg_path : "(not needed)", nm, (double)pc->content_w, (double)pc->style_w,
        (double)pc->mse_w);
    pc->prepared = 1;
    return ORK_OK;
}

/* ---- compute ------------------------------------------------------------------------------------- */

/* a + w·b for scalars (1) F32; a may be NULL (then w·b). */
static ork_status acc(perc *pc, ork_graph *g, ork_tensor **a, ork_tensor *b, float w) {
    if (w != 1.0f) TRY(pc->ops->scale(g, b, w, &b));
    if (!*a) { *a = b; return ORK_OK; }
    return pc->ops->add(g, *a, b, a);
}

static ork_status perc_compute(void *self, ork_graph *g, const ork_loss_inputs *in, ork_tensor **loss) {
    perc *pc = self;
    const ork_ops *o = pc->ops;
    const ork_tensor_api *ta = pc->ta;
    ork_tensor *total = NULL;
    if (pc->mse_w > 0.0f || pc->n_conv == 0) {
        ork_tensor *m;
        TRY(o->mse(g, in->pred, in->target, &m));
        TRY(acc(pc, g, &total, m, pc->mse_w));
    }
    if (pc->n_conv == 0) { *loss = total; return ORK_OK; }
    if (!pc->prepared) {
        LOG(pc, ORK_LEVEL_ERROR, "perceptual: compute before prepare (the VGG19 weights are not loaded)");
        return ORK_E_INVALID;
    }
    if (!in->decode) {
        LOG(pc, ORK_LEVEL_ERROR, "perceptual: the model family has no image codec to decode predictions with "
            "(set model.model_kwargs.taef1_path or codec: pixel)");
        return ORK_E_UNSUPPORTED;
    }
    if (!in->x_t || !in->x0 || !in->t_host) {
        LOG(pc, ORK_LEVEL_ERROR, "perceptual: the trainer passed no x_t, x0 or timesteps");
        return ORK_E_INVALID;
    }
    /* x0_pred = x_t − t·v, t (B, 1, ..., 1) broadcast over every other dim */
    int nd = ta->ndim(in->pred);
    int64_t B = ta->dim(in->pred, 0), tsh[ORK_MAX_DIMS];
    for (int k = 0; k < nd; k++) tsh[k] = k ? 1 : B;
    ork_tensor *t, *x0p;
    TRY(ta->from_host(g, ORK_F32, nd, tsh, in->t_host, &t));
    if (ta->dtype(in->pred) != ORK_F32) TRY(o->cast(g, t, ta->dtype(in->pred), &t));
    TRY(o->mul(g, in->pred, t, &x0p));
    TRY(o->scale(g, x0p, -1.0f, &x0p));
    TRY(o->add(g, x0p, in->x_t, &x0p));
    /* pixels; the target branch records nothing (x0 and the codec need no grad) */
    ork_tensor *img_p, *img_t;
    TRY(in->decode(in->decode_ctx, g, x0p, &img_p));
    TRY(in->decode(in->decode_ctx, g, in->x0, &img_t));
    vgg_dev d;
    ork_tensor *fp[VGG_NCONV], *ft[VGG_NCONV], *cl[VGG_NCONV], *sl[VGG_NCONV];
    TRY(upload(pc, g, &d));
    TRY(vgg_run(pc, g, &d, img_t, ft));
    TRY(vgg_run(pc, g, &d, img_p, fp));
    TRY(layer_losses(pc, g, fp, ft, cl, sl));
    for (int i = 0; i < pc->n_conv; i++) {
        if (cl[i]) TRY(acc(pc, g, &total, cl[i], pc->content_w * pc->content_s[i]));
        if (sl[i]) TRY(acc(pc, g, &total, sl[i], pc->style_w * pc->style_s[i]));
    }
    *loss = total;
    return ORK_OK;
}

/* ---- tables ------------------------------------------------------------------------------------ */

static const ork_loss_vtable perc_vtable = {
    .abi = ORK_ABI_INIT(ork_loss_vtable),
    .create = perc_create,
    .destroy = perc_destroy,
    .prepare = perc_prepare,
    .compute = perc_compute,
};

static const char *const perc_aliases[] = {"perceptual", "style", NULL};

static const ork_component perc_component = {
    .abi = ORK_ABI_INIT(ork_component),
    .kind = ORK_KIND_LOSS,
    .id = "org.orakul.perceptual",
    .aliases = perc_aliases,
    .description = "velocity MSE plus VGG19 content and Gram style losses on decoded x0 (ai-toolkit's style.py)",
    .params = perc_keys,
    .params_size = sizeof(perc_params),
    .vtable = &perc_vtable,
};

static const ork_component *const components[] = {&perc_component, NULL};

static const ork_plugin_entry entry = {
    .abi = ORK_ABI_INIT(ork_plugin_entry),
    .name = "perceptual",
    .version = "1.0.0",
    .description = "perceptual / style loss (VGG19)",
    .components = components,
};

ORK_PLUGIN_ENTRY(entry)
