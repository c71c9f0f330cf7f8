/* train/lora.c — the adapter network (LoRA and LoKr): see lora.h. */
#include "train/lora.h"

#include "io/safetensors.h"
#include "numerics/finite.h"
#include "numerics/half.h"
#include "plugin/model_decl.h"
#include "train/rng.h"
#include "util/log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct lora_mod {
    char name[192];   /* module name: the weight name without ".weight" */
    int block;
    ork_tensor *w;    /* the frozen weight it adapts (borrowed from the store) */
    ork_lora lora;
} lora_mod;

struct ork_lora_net {
    const ork_backend *be;
    ork_kctx *k;
    int n;
    lora_mod *m;
    int64_t params;
    double alpha;
    int64_t rank;
    uint64_t seed;          /* of the initial values (ork_lora_init) */
    char prefix[64];        /* the model's key prefix (ork_model_info.lora_prefix), or "": the format's */
    int kind;               /* ORK_ADAPTER_LORA / ORK_ADAPTER_LOKR (every module the same) */
    int64_t lokr_factor;    /* for the file's metadata */
    int lokr_full_rank;
    ork_lora_reader reader; /* NULL: save reads the device tensors */
    void *reader_ctx;
};

static int is_target(const ork_model_info *info, const ork_weight_decl *d, const ork_lora_opts *o,
                     const char *module) {
    if (!(d->flags & ORK_WEIGHT_LINEAR) || d->ndim != 2 || d->block < 0) return 0;
    if (o->n_only > 0) {
        int hit = 0;
        for (int i = 0; i < o->n_only && !hit; i++) hit = ork_module_contains(module, o->only_if_contains[i]);
        if (!hit) return 0;
    } else if (!ork_model_lora_default_target(info, d, module)) { /* the model's targets (plugin/model_decl.h) */
        return 0;
    }
    for (int i = 0; i < o->n_ignore; i++)
        if (ork_module_contains(module, o->ignore_if_contains[i])) return 0;
    return 1;
}

static ork_status upload(ork_lora_net *n, ork_tensor *t, const float *host) {
    size_t numel = (size_t)ork_tensor_numel(t);
    if (t->dtype == ORK_F32) {
        ORK_TRY(n->be->memcpy_h2d(n->k, ork_tensor_data(t), host, numel * 4));
    } else {
        uint16_t *b = malloc(numel * 2);
        if (!b) return ORK_E_NOMEM;
        ork_bf16_from_f32(host, numel, b);
        ork_status s = n->be->memcpy_h2d(n->k, ork_tensor_data(t), b, numel * 2);
        if (s == ORK_OK) s = n->be->sync(n->k);
        free(b);
        return s;
    }
    return n->be->sync(n->k);
}

static ork_status download(ork_lora_net *n, ork_tensor *t, float *host) {
    if (n->reader) return n->reader(n->reader_ctx, t, host);
    size_t numel = (size_t)ork_tensor_numel(t);
    if (t->dtype == ORK_F32) {
        ORK_TRY(n->be->memcpy_d2h(n->k, host, ork_tensor_data(t), numel * 4));
        return n->be->sync(n->k);
    }
    uint16_t *b = malloc(numel * 2);
    if (!b) return ORK_E_NOMEM;
    ork_status s = n->be->memcpy_d2h(n->k, b, ork_tensor_data(t), numel * 2);
    if (s == ORK_OK) s = n->be->sync(n->k);
    if (s == ORK_OK) ork_bf16_to_f32_n(b, numel, host);
    free(b);
    return s;
}

static ork_status upload_cb(void *ctx, int i, ork_tensor *t, const float *host) {
    (void)i;
    return upload(ctx, t, host);
}

/* A trainable (r, in) or (out, r) tensor: device memory under "lora", or for a
 * deferred network a header the trainable-state runtime points at its slots. */
static ork_status new_param(ork_alloc *a, const ork_backend *be, const ork_lora_opts *o, const int64_t *shape,
                            ork_tensor **out) {
    if (!o->deferred) return ork_tensor_new(a, "lora", o->param_dt, 2, shape, 1, out);
    ORK_TRY(ork_tensor_wrap(be->device, o->param_dt, 2, shape, NULL, NULL, out));
    (*out)->flags |= ORK_TF_PARAM;
    (*out)->requires_grad = 1;
    return ORK_OK;
}

ork_status ork_lora_init(ork_lora_net *n, ork_lora_init_fn fn, void *ctx) {
    uint64_t u0 = 0; /* uniform index into the (seed, INIT) sequence: modules draw in turn */
    for (int i = 0; i < n->n; i++) {
        lora_mod *m = &n->m[i];
        /* down (r, in) or w1 (a, c): Kaiming-uniform over its fan-in (dim 1); up or w2: zero */
        int64_t nd = ork_tensor_numel(m->lora.down), nu = ork_tensor_numel(m->lora.up), fan_in = m->lora.down->shape[1];
        float *h = malloc((size_t)(nd > nu ? nd : nu) * sizeof *h);
        if (!h) return ORK_E_NOMEM;
        double bound = 1.0 / sqrt((double)fan_in);
        ork_rng_fill_sym_mt(n->seed, ORK_RNG_INIT, u0, h, 0, nd, bound);
        u0 += (uint64_t)nd;
        ork_status st = fn(ctx, 2 * i, m->lora.down, h);
        if (st == ORK_OK) {
            memset(h, 0, (size_t)nu * sizeof *h);
            if (m->lora.kind == ORK_ADAPTER_LOKR_LR) { /* w2_a (b, r) Kaiming over r, w2_b zero (ai-toolkit) */
                int64_t r = m->lora.up->shape[1], nb = (m->w->shape[0] / m->lora.down->shape[0]) * r;
                ork_rng_fill_sym_mt(n->seed, ORK_RNG_INIT, u0, h, 0, nb, 1.0 / sqrt((double)r));
                u0 += (uint64_t)nb;
            }
            st = fn(ctx, 2 * i + 1, m->lora.up, h);
        }
        free(h);
        ORK_TRY(st);
    }
    return ORK_OK;
}

void ork_lokr_factorization(int64_t dim, int64_t factor, int64_t *m_out, int64_t *n_out) {
    if (factor > 0 && dim % factor == 0) { /* as given, not reordered (ai-toolkit) */
        *m_out = factor;
        *n_out = dim / factor;
        return;
    }
    if (factor == -1) factor = dim;
    /* walk the divisors upwards while m < n and the next one is not above factor
     * (ai-toolkit's `length` test never fires: it is never updated) */
    int64_t m = 1, n = dim;
    while (m < n) {
        int64_t nm = m + 1;
        while (dim % nm != 0) nm++;
        if (nm > factor) break;
        m = nm;
        n = dim / nm;
    }
    if (m > n) { int64_t t = m; m = n; n = t; }
    *m_out = m;
    *n_out = n;
}

/* A module's two tensors' shapes, scale and kind: LoRA down (r, in), up (out, r),
 * alpha / r; LoKr w1 (a, c), w2 (b, d), 1 (full w1 and w2, lora.h); LoKr with a
 * low-rank w2 (lokr_full_rank false and linear < max(b, d) / 2, as LyCORIS):
 * w1 (a, c), up (b + d, r) packing w2_a over w2_bᵀ, alpha / r. */
static ork_status module_shapes(const ork_lora_opts *o, const char *module, int64_t out_f, int64_t in_f,
                                int64_t sd[2], int64_t su[2], float *scale, int *kind) {
    *kind = o->kind;
    if (o->kind != ORK_ADAPTER_LOKR) {
        int64_t rank = o->rank;
        if (rank > out_f) rank = out_f;
        if (rank > in_f) rank = in_f;
        sd[0] = rank; sd[1] = in_f;
        su[0] = out_f; su[1] = rank;
        *scale = (float)(o->alpha / (double)rank);
        return ORK_OK;
    }
    int64_t a, b, c, d;
    ork_lokr_factorization(out_f, o->lokr_factor, &a, &b);
    ork_lokr_factorization(in_f, o->lokr_factor, &c, &d);
    /* LyCORIS/ai-toolkit: w2 full when lora_dim >= max(b, d) / 2 (always with lokr_full_rank,
     * whose lora_dim is 9999999999), else w2 = w2_a · w2_b at alpha / lora_dim */
    int64_t big = b > d ? b : d;
    (void)module;
    sd[0] = a; sd[1] = c;
    if (!o->lokr_full_rank && (double)o->rank < (double)big / 2.0) {
        /* w2 = w2_a (b, r) · w2_b (r, d) at alpha / r (alpha 0: r, ai-toolkit), packed in up */
        su[0] = b + d; su[1] = o->rank;
        *scale = o->alpha > 0 ? (float)(o->alpha / (double)o->rank) : 1.0f;
        *kind = ORK_ADAPTER_LOKR_LR;
        return ORK_OK;
    }
    su[0] = b; su[1] = d;
    *scale = 1.0f;
    *kind = ORK_ADAPTER_LOKR;
    return ORK_OK;
}

ork_status ork_lora_create(ork_alloc *a, const ork_backend *be, ork_kctx *k, ork_wstore *ws,
                           const ork_model_info *info, const ork_lora_opts *o, ork_lora_net **out) {
    if (o->rank <= 0) return ORK_FAIL(ORK_E_CONFIG, "network.linear (rank) must be positive, got %lld", (long long)o->rank);
    if (o->kind != ORK_ADAPTER_LORA && o->kind != ORK_ADAPTER_LOKR)
        return ORK_FAIL(ORK_E_INVALID, "adapter network: unknown kind %d", o->kind);
    ork_lora_net *n = calloc(1, sizeof *n);
    if (!n) return ORK_E_NOMEM;
    n->be = be;
    n->k = k;
    n->alpha = o->alpha;
    n->rank = o->rank;
    n->m = calloc((size_t)info->n_weights + 1, sizeof *n->m);
    if (!n->m) { free(n); return ORK_E_NOMEM; }
    n->seed = o->seed;
    n->kind = o->kind;
    n->lokr_factor = o->lokr_factor;
    n->lokr_full_rank = o->lokr_full_rank;
    const char *pre = ork_model_lora_prefix(info);
    if (pre && strlen(pre) >= sizeof n->prefix) {
        free(n->m);
        free(n);
        return ORK_FAIL(ORK_E_ABI, "the model's lora_prefix '%.40s...' is longer than %zu bytes", pre, sizeof n->prefix - 1);
    }
    snprintf(n->prefix, sizeof n->prefix, "%s", pre ? pre : "");
    ork_status st = ORK_OK;
    for (int i = 0; st == ORK_OK && i < info->n_weights; i++) {
        const ork_weight_decl *d = &info->weights[i];
        char module[192];
        size_t len = strlen(d->name);
        if (len < 8 || strcmp(d->name + len - 7, ".weight") != 0) continue;
        snprintf(module, sizeof module, "%.*s", (int)(len - 7), d->name);
        if (!is_target(info, d, o, module)) continue;
        lora_mod *m = &n->m[n->n];
        snprintf(m->name, sizeof m->name, "%s", module);
        m->block = d->block;
        m->w = ork_wstore_find(ws, d->name);
        int64_t sd[2], su[2];
        float scale = 1.0f;
        int kind = o->kind;
        st = module_shapes(o, module, d->shape[0], d->shape[1], sd, su, &scale, &kind);
        if (st == ORK_OK) st = new_param(a, be, o, sd, &m->lora.down);
        if (st == ORK_OK) st = new_param(a, be, o, su, &m->lora.up);
        if (st != ORK_OK) break;
        m->lora.scale = scale;
        m->lora.dropout = o->kind == ORK_ADAPTER_LOKR ? 0.0f : (float)o->dropout; /* ai-toolkit's LoKr has none */
        m->lora.kind = kind;
        m->w->lora = &m->lora;
        n->params += sd[0] * sd[1] + su[0] * su[1];
        n->n++;
    }
    if (st == ORK_OK && n->n == 0)
        st = ORK_FAIL(ORK_E_CONFIG, "the LoRA network matched no linear layer (check network_kwargs.only_if_contains / ignore_if_contains)");
    if (st == ORK_OK && !o->deferred) st = ork_lora_init(n, upload_cb, n);
    if (st != ORK_OK) { ork_lora_destroy(n); return st; }
    *out = n;
    return ORK_OK;
}

void ork_lora_destroy(ork_lora_net *n) {
    if (!n) return;
    for (int i = 0; i < n->n; i++) {
        if (n->m[i].w) n->m[i].w->lora = NULL;
        ork_tensor_free(n->m[i].lora.down);
        ork_tensor_free(n->m[i].lora.up);
    }
    free(n->m);
    free(n);
}

void ork_lora_set_reader(ork_lora_net *n, ork_lora_reader fn, void *ctx) {
    n->reader = fn;
    n->reader_ctx = ctx;
}

int ork_lora_count(const ork_lora_net *n) { return n->n; }
int ork_lora_kind(const ork_lora_net *n) { return n->kind; }
const char *ork_lora_module(const ork_lora_net *n, int i) { return n->m[i].name; }
ork_lora *ork_lora_at(ork_lora_net *n, int i) { return &n->m[i].lora; }
int ork_lora_block(const ork_lora_net *n, int i) { return n->m[i].block; }
int64_t ork_lora_params(const ork_lora_net *n) { return n->params; }

void ork_lora_key_prefixed(const char *module, const char *format, const char *prefix, char *buf, size_t n) {
    int kohya = !strcmp(format, "kohya");
    if (!prefix || !*prefix) prefix = kohya ? "lora_unet_" : "diffusion_model.";
    size_t pl = strlen(prefix);
    snprintf(buf, n, "%s%s", prefix, module);
    if (kohya && pl < n)
        for (char *p = buf + pl; *p; p++) if (*p == '.') *p = '_';
}

void ork_lora_key(const char *module, const char *format, char *buf, size_t n) {
    ork_lora_key_prefixed(module, format, NULL, buf, n);
}

static void suffixes(const ork_lora_net *n, const char *format, const char **down, const char **up) {
    if (n->kind == ORK_ADAPTER_LOKR) { /* LyCORIS's names in every format (comfy/weight_adapter/lokr.py) */
        *down = "lokr_w1";
        *up = "lokr_w2";
        return;
    }
    int kohya = !strcmp(format, "kohya");
    *down = kohya ? "lora_down.weight" : "lora_A.weight";
    *up = kohya ? "lora_up.weight" : "lora_B.weight";
}

/* Whether the format carries the scale in the weights (lora.h: "peft",
 * "peft-bfl"): diffusers' converter for `diffusion_model.` lora_A/lora_B has no
 * place for .alpha (Flux2LoraLoaderMixin refuses the file), so the file holds
 * sqrt(alpha/rank)·lora_A and sqrt(alpha/rank)·lora_B and no .alpha: every
 * loader's default scale 1 applies the trained alpha/rank·B·A. */
static int folds_scale(const char *format) { return strcmp(format, "kohya") != 0; }

/* meta with ss_network_alpha said as the file's effective alpha (= rank) and
 * orakul_lora_scale saying what was folded; *out freed by the caller. */
static ork_status folded_meta(const ork_lora_net *n, const char *const *meta, const char ***out, char *rank,
                              char *note, size_t note_n) {
    size_t k = 0;
    while (meta && meta[k] && meta[k + 1]) k += 2;
    const char **m = calloc(k + 4, sizeof *m);
    if (!m) return ORK_FAIL(ORK_E_NOMEM, "LoRA save: out of memory");
    snprintf(rank, 32, "%lld", (long long)n->rank);
    snprintf(note, note_n, "alpha/rank = %g/%lld = %.9g folded into the weights: lora_A and lora_B each x %.9g; "
             "no .alpha keys, load at strength 1 (trained with alpha %g)", n->alpha, (long long)n->rank,
             n->alpha / (double)n->rank, sqrt(n->alpha / (double)n->rank), n->alpha);
    size_t j = 0;
    for (size_t i = 0; i < k; i += 2) {
        m[j++] = meta[i];
        m[j++] = !strcmp(meta[i], "ss_network_alpha") ? rank : meta[i + 1];
    }
    m[j++] = "orakul_lora_scale";
    m[j++] = note;
    *out = m;
    return ORK_OK;
}

/* meta for a LoKr file: kohya's network module and args as LyCORIS writes
 * them (ss_network_module lycoris.kohya, ss_network_args with algo lokr);
 * *out freed by the caller. */
static ork_status lokr_meta(const ork_lora_net *n, const char *const *meta, const char ***out, char *args,
                            size_t args_n) {
    size_t k = 0;
    while (meta && meta[k] && meta[k + 1]) k += 2;
    const char **m = calloc(k + 4, sizeof *m);
    if (!m) return ORK_FAIL(ORK_E_NOMEM, "LoKr save: out of memory");
    snprintf(args, args_n, "{\"algo\": \"lokr\", \"factor\": \"%lld\", \"full_matrix\": \"%s\"}",
             (long long)n->lokr_factor, n->lokr_full_rank ? "true" : "false");
    size_t j = 0;
    for (size_t i = 0; i < k; i += 2) {
        if (!strcmp(meta[i], "ss_network_alpha") || !strcmp(meta[i], "ss_network_dim")) continue; /* no alpha/rank rule */
        m[j++] = meta[i];
        m[j++] = !strcmp(meta[i], "ss_network_module") ? "lycoris.kohya" : meta[i + 1];
    }
    m[j++] = "ss_network_args";
    m[j++] = args;
    *out = m;
    return ORK_OK;
}

ork_status ork_lora_save(ork_lora_net *n, const char *path, const char *format, ork_dtype save_dt,
                         const char *const *meta) {
    ork_st_writer *w;
    ORK_TRY(ork_st_writer_new(&w));
    const char *sd, *su;
    suffixes(n, format, &sd, &su);
    const int lokr = n->kind != ORK_ADAPTER_LORA;
    const int fold = !lokr && folds_scale(format); /* LoKr: scale 1 or its .alpha, nothing to fold */
    /* host copies must outlive the commit: one block per tensor, freed at the end */
    void **bufs = calloc((size_t)n->n * 4 + 1, sizeof *bufs);
    ork_status st = bufs ? ORK_OK : ORK_E_NOMEM;
    for (int i = 0; st == ORK_OK && i < n->n; i++) {
        lora_mod *m = &n->m[i];
        char key[320], prefix[256];
        ork_lora_key_prefixed(m->name, format, n->prefix, prefix, sizeof prefix);
        ork_tensor *ts[2] = {m->lora.down, m->lora.up};
        const char *sfx[3] = {sd, su, NULL};
        const int lr = m->lora.kind == ORK_ADAPTER_LOKR_LR;
        float *fs[3] = {NULL, NULL, NULL};
        int64_t shp[3][2];
        for (int j = 0; st == ORK_OK && j < 2; j++) {
            fs[j] = malloc((size_t)ork_tensor_numel(ts[j]) * sizeof(float));
            if (!fs[j]) { st = ORK_E_NOMEM; break; }
            st = download(n, ts[j], fs[j]);
            shp[j][0] = ts[j]->shape[0];
            shp[j][1] = ts[j]->shape[1];
        }
        int nout = 2;
        if (st == ORK_OK && lr) { /* up packs w2_a (b, r) over w2_bᵀ (d, r): w2_a, and w2_b (r, d) transposed back */
            int64_t r = ts[1]->shape[1], b = m->w->shape[0] / ts[0]->shape[0], d = ts[1]->shape[0] - b;
            fs[2] = malloc((size_t)(r * d) * sizeof(float));
            if (!fs[2]) st = ORK_E_NOMEM;
            for (int64_t q = 0; st == ORK_OK && q < r; q++)
                for (int64_t l = 0; l < d; l++) fs[2][q * d + l] = fs[1][(b + l) * r + q];
            shp[1][0] = b; shp[1][1] = r;
            shp[2][0] = r; shp[2][1] = d;
            sfx[1] = "lokr_w2_a";
            sfx[2] = "lokr_w2_b";
            nout = 3;
        }
        for (int j = 0; st == ORK_OK && j < nout; j++) {
            size_t numel = (size_t)(shp[j][0] * shp[j][1]);
            float *f = fs[j];
            fs[j] = NULL;
            snprintf(key, sizeof key, "%s.%s", prefix, sfx[j]);
            /* never a file with NaN or Inf: the trained values, then the saved
             * ones (a finite value past 65504 is Inf in float16) */
            int64_t bad = st == ORK_OK ? ork_first_nonfinite(ORK_F32, f, numel) : -1;
            if (bad >= 0)
                st = ORK_FAIL(ORK_E_NUMERIC, "%s: not written: tensor '%s' element %lld is %s: the LoRA's values are "
                              "not finite (training diverged; earlier LoRA files are kept)", path, key, (long long)bad,
                              ork_nonfinite_kind(ORK_F32, f, (uint64_t)bad));
            if (st == ORK_OK && fold) { /* the file's copy only: the trainer's values stay unscaled */
                float r = (float)sqrt((double)m->lora.scale);
                for (size_t q = 0; q < numel; q++) f[q] *= r;
            }
            void *out = f;
            if (st == ORK_OK && save_dt != ORK_F32) {
                uint16_t *h = malloc(numel * 2);
                if (!h) st = ORK_E_NOMEM;
                else if (save_dt == ORK_BF16) ork_bf16_from_f32(f, numel, h);
                else ork_f16_from_f32(f, numel, h);
                free(f);
                out = h;
            }
            bufs[i * 4 + j] = out;
            bad = st == ORK_OK ? ork_first_nonfinite(save_dt, out, numel) : -1;
            if (bad >= 0)
                st = ORK_FAIL(ORK_E_NUMERIC, "%s: not written: tensor '%s' element %lld is %s in %s, past its range: "
                              "the LoRA's values are not finite there (save.dtype float32 keeps them; earlier LoRA "
                              "files are kept)", path, key, (long long)bad, ork_nonfinite_kind(save_dt, out, (uint64_t)bad),
                              save_dt == ORK_BF16 ? "bfloat16" : "float16");
            if (st == ORK_OK)
                st = ork_st_writer_add(w, key, save_dt, 2, shp[j], out, numel * ork_dtype_size(save_dt));
        }
        for (int j = 0; j < 3; j++) free(fs[j]);
        if (st != ORK_OK) break;
        /* LoKr with full w1, w2: no .alpha (ComfyUI applies alpha 1); low-rank w2: alpha / r */
        if (fold || (lokr && !lr)) continue;
        float *alpha = malloc(sizeof *alpha);
        if (!alpha) { st = ORK_E_NOMEM; break; }
        /* alpha so that alpha / rank of THIS module is the scale we trained with */
        *alpha = m->lora.scale * (float)(lr ? m->lora.up->shape[1] : m->lora.down->shape[0]);
        bufs[i * 4 + 3] = alpha;
        snprintf(key, sizeof key, "%s.alpha", prefix);
        st = ork_st_writer_add(w, key, ORK_F32, 0, NULL, alpha, sizeof *alpha);
    }
    const char **fm = NULL;
    char rank[32], note[320];
    if (st == ORK_OK && fold) st = folded_meta(n, meta, &fm, rank, note, sizeof note);
    if (st == ORK_OK && lokr) st = lokr_meta(n, meta, &fm, note, sizeof note);
    if (fm) meta = fm;
    for (int i = 0; st == ORK_OK && meta && meta[i] && meta[i + 1]; i += 2) st = ork_st_writer_meta(w, meta[i], meta[i + 1]);
    if (st == ORK_OK) st = ork_st_writer_commit(w, path);
    ork_st_writer_free(w);
    free(fm);
    if (bufs)
        for (int i = 0; i < n->n * 4; i++) free(bufs[i]);
    free(bufs);
    return st;
}

/* A low-rank LoKr module from <prefix>.lokr_w1 (a, c), .lokr_w2_a (b, r), .lokr_w2_b (r, d):
 * up packs w2_a over w2_bᵀ (tensor/tensor.h). */
static ork_status load_lokr_lr(ork_lora_net *n, ork_st_file *f, const char *path, const char *prefix, lora_mod *m) {
    int64_t a = m->lora.down->shape[0], c = m->lora.down->shape[1], r = m->lora.up->shape[1];
    int64_t b = m->w->shape[0] / a, d = m->lora.up->shape[0] - b;
    const char *sfx[3] = {"lokr_w1", "lokr_w2_a", "lokr_w2_b"};
    const int64_t want[3][2] = {{a, c}, {b, r}, {r, d}};
    float *h[3] = {NULL, NULL, NULL};
    ork_status st = ORK_OK;
    for (int j = 0; st == ORK_OK && j < 3; j++) {
        char key[320];
        snprintf(key, sizeof key, "%s.%s", prefix, sfx[j]);
        const ork_st_tensor *t = ork_st_find(f, key);
        if (!t || t->ndim != 2 || t->shape[0] != want[j][0] || t->shape[1] != want[j][1]) {
            st = ORK_FAIL(ORK_E_FORMAT, "%s: missing or misshapen '%s'", path, key);
            break;
        }
        h[j] = malloc((size_t)(want[j][0] * want[j][1]) * sizeof(float));
        st = h[j] ? ork_st_read_f32(t, h[j]) : ORK_E_NOMEM;
    }
    float *up = st == ORK_OK ? malloc((size_t)((b + d) * r) * sizeof *up) : NULL;
    if (st == ORK_OK && !up) st = ORK_E_NOMEM;
    if (st == ORK_OK) {
        memcpy(up, h[1], (size_t)(b * r) * sizeof *up);
        for (int64_t l = 0; l < d; l++)
            for (int64_t q = 0; q < r; q++) up[(b + l) * r + q] = h[2][q * d + l];
        st = upload(n, m->lora.down, h[0]);
    }
    if (st == ORK_OK) st = upload(n, m->lora.up, up);
    free(up);
    for (int j = 0; j < 3; j++) free(h[j]);
    return st;
}

ork_status ork_lora_load(ork_lora_net *n, const char *path, const char *format) {
    ork_st_file *f;
    ORK_TRY(ork_st_open(path, &f));
    const char *sd, *su;
    suffixes(n, format, &sd, &su);
    ork_status st = ORK_OK;
    for (int i = 0; st == ORK_OK && i < n->n; i++) {
        lora_mod *m = &n->m[i];
        char key[320], prefix[256];
        ork_lora_key_prefixed(m->name, format, n->prefix, prefix, sizeof prefix);
        ork_tensor *ts[2] = {m->lora.down, m->lora.up};
        const char *sfx[2] = {sd, su};
        /* a folded file (no .alpha; files of older orakul versions carry one, unscaled) */
        snprintf(key, sizeof key, "%s.alpha", prefix);
        float unfold = n->kind == ORK_ADAPTER_LORA && folds_scale(format) && !ork_st_find(f, key) ? (float)(1.0 / sqrt((double)m->lora.scale)) : 1.0f;
        if (m->lora.kind == ORK_ADAPTER_LOKR_LR) { /* w1, then w2_a and w2_b packed into up */
            st = load_lokr_lr(n, f, path, prefix, m);
            continue;
        }
        for (int j = 0; st == ORK_OK && j < 2; j++) {
            snprintf(key, sizeof key, "%s.%s", prefix, sfx[j]);
            const ork_st_tensor *t = ork_st_find(f, key);
            if (!t || t->ndim != 2 || t->shape[0] != ts[j]->shape[0] || t->shape[1] != ts[j]->shape[1]) {
                st = ORK_FAIL(ORK_E_FORMAT, "%s: missing or misshapen '%s'", path, key);
                break;
            }
            float *h = malloc((size_t)ork_tensor_numel(ts[j]) * sizeof *h);
            if (!h) { st = ORK_E_NOMEM; break; }
            st = ork_st_read_f32(t, h);
            if (unfold != 1.0f)
                for (int64_t q = 0; q < ork_tensor_numel(ts[j]); q++) h[q] *= unfold;
            if (st == ORK_OK) st = upload(n, ts[j], h);
            free(h);
        }
    }
    ork_st_close(f);
    return st;
}
