/* te_source.c — where an encoder's weights come from, and the shared plumbing
 * of both families: name_or_path as a .safetensors file, a
 * *.safetensors.index.json, a folder holding either (a transformers
 * save_pretrained folder), or a diffusers FLUX.1 folder (text_encoder/ is
 * CLIP, text_encoder_2/ is T5), resolved by orakul/hf_checkpoint.h (shared
 * with the llm plugin); config.json beside the weights is read when present
 * (transformers' T5Config / CLIPTextConfig keys). Also: weight
 * declarations, loading into the core's sink, and small graph helpers.
 * Owns nothing beyond the te_model fields it fills. */
#include "te.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

ork_status te_open_source(te_model *m, const char *name_or_path) {
    /* a diffusers FLUX.1 folder: text_encoder/ is CLIP, text_encoder_2/ is T5 */
    return ork_hf_checkpoint_open(&m->sv, name_or_path, m->fam == TE_T5 ? "text_encoder_2" : "text_encoder", &m->ck);
}

double te_cfg_num(te_model *m, const char *key, double dflt) { return ork_hf_config_num(m->ck.text_config, key, dflt); }
int te_cfg_int(te_model *m, const char *key, int dflt) { return ork_hf_config_int(m->ck.text_config, key, dflt); }
void te_cfg_str(te_model *m, const char *key, char *buf, size_t n) {
    snprintf(buf, n, "%s", ork_hf_config_str(m->ck.text_config, key));
}

ork_status te_add_block(te_model *m, const char *fmt, ...) {
    char **nb = realloc(m->block_names, (size_t)(m->n_blocks + 1) * sizeof *nb);
    if (!nb) return ORK_E_NOMEM;
    m->block_names = nb;
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (!(nb[m->n_blocks] = strdup(buf))) return ORK_E_NOMEM;
    m->n_blocks++;
    return ORK_OK;
}

ork_status te_add_weight(te_model *m, int block, uint32_t flags, int ndim, int64_t d0, int64_t d1, const char *fmt, ...) {
    if (m->n_weights == m->cap_weights) {
        int cap = m->cap_weights ? 2 * m->cap_weights : 64;
        ork_weight_decl *w = realloc(m->weights, (size_t)cap * sizeof *w);
        if (!w) return ORK_E_NOMEM;
        m->weights = w;
        char **n = realloc(m->weight_names, (size_t)cap * sizeof *n);
        if (!n) return ORK_E_NOMEM;
        m->weight_names = n;
        m->cap_weights = cap;
    }
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *name = strdup(buf);
    if (!name) return ORK_E_NOMEM;
    m->weight_names[m->n_weights] = name;
    ork_weight_decl *d = &m->weights[m->n_weights++];
    memset(d, 0, sizeof *d);
    d->name = name;
    d->ndim = ndim;
    d->shape[0] = d0;
    d->shape[1] = d1;
    d->block = block;
    d->flags = flags;
    return ORK_OK;
}

/* A canonical name in the file: as it is, or without "text_model." (the
 * CLIPTextModel files transformers 5 writes drop that prefix). */
ork_status te_find(te_model *m, const char *name, ork_st_info *t) {
    if (m->st->find(m->ck.src, name, t) == ORK_OK) return ORK_OK;
    if (m->fam == TE_CLIP && !strncmp(name, "text_model.", 11)) return m->st->find(m->ck.src, name + 11, t);
    return ORK_E_INVALID;
}

int te_file_shape(te_model *m, const char *name, int64_t shape[8]) {
    ork_st_info t;
    if (te_find(m, name, &t) != ORK_OK) return 0;
    for (int i = 0; i < 8; i++) shape[i] = i < t.ndim ? t.shape[i] : 0;
    return t.ndim;
}

static ork_status load_all(te_model *m, const ork_weight_sink *sink);
ork_status te_load(te_model *m, const ork_weight_sink *sink) {
    te_prefetch *pf = te_prefetch_start(m);
    ork_status st = load_all(m, sink);
    te_prefetch_stop(pf);
    return st;
}

static ork_status load_all(te_model *m, const ork_weight_sink *sink) {
    for (int i = 0; i < m->n_weights; i++) {
        const ork_weight_decl *d = &m->weights[i];
        const char *fname = d->name;
        if (m->alias_shared && !strcmp(d->name, "shared.weight")) fname = m->alias_shared;
        ork_st_info t;
        if (te_find(m, fname, &t) != ORK_OK) {
            TE_LOG(m, ORK_LEVEL_ERROR, "%s: lacks the weight %s", m->ck.path, fname);
            return ORK_E_FORMAT;
        }
        int64_t want = 1, have = 1;
        for (int k = 0; k < d->ndim; k++) want *= d->shape[k];
        for (int k = 0; k < t.ndim; k++) have *= t.shape[k];
        if (want != have || t.ndim != d->ndim) {
            TE_LOG(m, ORK_LEVEL_ERROR, "%s: weight %s has %d dims and %lld elements, expected (%lld, %lld)", m->ck.path,
                   fname, t.ndim, (long long)have, (long long)d->shape[0], (long long)(d->ndim > 1 ? d->shape[1] : 1));
            return ORK_E_FORMAT;
        }
        if (t.dtype == ORK_F8_E4M3 || t.dtype == ORK_F8_E5M2) {
            /* an fp8 checkpoint (ComfyUI's t5xxl_fp8_e4m3fn[_scaled]): one scale per
             * tensor under <base>.scale_weight or <base>.weight_scale, else 1 */
            float scale = 1.0f;
            size_t bl = strlen(fname) > 7 && !strcmp(fname + strlen(fname) - 7, ".weight") ? strlen(fname) - 7 : strlen(fname);
            char sn[300];
            ork_st_info sc;
            snprintf(sn, sizeof sn, "%.*s.scale_weight", (int)bl, fname);
            int have_scale = m->st->find(m->ck.src, sn, &sc) == ORK_OK;
            if (!have_scale) {
                snprintf(sn, sizeof sn, "%.*s.weight_scale", (int)bl, fname);
                have_scale = m->st->find(m->ck.src, sn, &sc) == ORK_OK;
            }
            if (have_scale && (sc.nbytes == 0 || m->st->read_f32(&sc, &scale) != ORK_OK)) {
                TE_LOG(m, ORK_LEVEL_ERROR, "%s: %s is not a readable scale", m->ck.path, sn);
                return ORK_E_FORMAT;
            }
            if ((d->flags & ORK_WEIGHT_LINEAR) && d->ndim == 2) {
                float *rows = malloc((size_t)d->shape[0] * sizeof *rows);
                if (!rows) return ORK_E_NOMEM;
                for (int64_t r = 0; r < d->shape[0]; r++) rows[r] = scale;
                ork_status st = sink->put_quantized(sink, d->name, t.dtype, t.data, rows, 0);
                free(rows);
                ORK_TRY(st);
                continue;
            }
            /* a table or norm in fp8: its values, scaled, as F32 */
            float *v = malloc((size_t)(have ? have : 1) * sizeof *v);
            if (!v) return ORK_E_NOMEM;
            ork_status st = m->st->read_f32(&t, v);
            for (int64_t k = 0; st == ORK_OK && k < have; k++) v[k] *= scale;
            if (st == ORK_OK) st = sink->put(sink, d->name, ORK_F32, v);
            free(v);
            ORK_TRY(st);
            continue;
        }
        if (t.dtype != ORK_F32 && t.dtype != ORK_BF16 && t.dtype != ORK_F16) {
            TE_LOG(m, ORK_LEVEL_ERROR, "%s: weight %s is stored as dtype %d; f32, bf16, f16 and fp8 are read", m->ck.path,
                   fname, (int)t.dtype);
            return ORK_E_UNSUPPORTED;
        }
        ORK_TRY(sink->put(sink, d->name, t.dtype, t.data));
    }
    return ORK_OK;
}

void te_drop(te_model *m, ork_graph *g, ork_tensor *t) {
    if (t && ork_tensor_api_has_drop(m->ta)) m->ta->drop(g, t);
}

ork_status te_w(te_model *m, ork_graph *g, ork_tensor **out, const char *fmt, ...) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return m->ta->weight(g, buf, out);
}

ork_status te_heads(te_model *m, ork_graph *g, ork_tensor *x, int H, ork_tensor **out) {
    int64_t B = m->ta->dim(x, 0), L = m->ta->dim(x, 1), C = m->ta->dim(x, 2);
    int64_t sh[4] = {B, L, H, C / H};
    static const int perm[4] = {0, 2, 1, 3};
    ork_tensor *r;
    ORK_TRY(m->ops->reshape(g, x, 4, sh, &r));
    return m->ops->permute(g, r, perm, out);
}

ork_status te_merge(te_model *m, ork_graph *g, ork_tensor *x, ork_tensor **out) {
    int64_t B = m->ta->dim(x, 0), H = m->ta->dim(x, 1), L = m->ta->dim(x, 2), Dh = m->ta->dim(x, 3);
    static const int perm[4] = {0, 2, 1, 3};
    ork_tensor *p;
    ORK_TRY(m->ops->permute(g, x, perm, &p));
    int64_t sh[3] = {B, L, H * Dh};
    return m->ops->reshape(g, p, 3, sh, out);
}

ork_status te_begin_common(te_model *m, ork_graph *g, const ork_text_encoder_inputs *in, int max_len, ork_carry *c) {
    memset(c, 0, sizeof *c);
    c->n = TE_NSLOTS;
    if (!in || !in->ids || in->batch < 1 || in->length < 1) {
        TE_LOG(m, ORK_LEVEL_ERROR, "begin: no token ids (batch %d, length %d)", in ? in->batch : 0, in ? in->length : 0);
        return ORK_E_INVALID;
    }
    if (max_len > 0 && in->length > max_len) {
        TE_LOG(m, ORK_LEVEL_ERROR, "begin: %d tokens, but the encoder takes at most %d", in->length, max_len);
        return ORK_E_INVALID;
    }
    int64_t B = in->batch, L = in->length;
    for (int64_t i = 0; i < B * L; i++)
        if (in->ids[i] < 0 || in->ids[i] >= m->c.vocab) {
            TE_LOG(m, ORK_LEVEL_ERROR, "begin: token id %d (sequence %lld, position %lld) is outside the vocabulary of %d",
                   (int)in->ids[i], (long long)(i / L), (long long)(i % L), m->c.vocab);
            return ORK_E_INVALID;
        }
    int64_t sh[2] = {B, L};
    ORK_TRY(m->ta->from_host(g, ORK_I32, 2, sh, in->ids, &c->t[TE_IDS]));
    if (in->mask) {
        float *kb = malloc((size_t)(B * L) * sizeof *kb);
        if (!kb) return ORK_E_NOMEM;
        for (int64_t i = 0; i < B * L; i++) kb[i] = in->mask[i] ? 0.0f : -1e30f;
        ork_status s = m->ta->from_host(g, ORK_F32, 2, sh, kb, &c->t[TE_KBIAS]);
        free(kb);
        ORK_TRY(s);
    }
    return ORK_OK;
}
