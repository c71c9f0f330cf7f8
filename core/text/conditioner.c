/* text/conditioner.c — the text conditioner's resolution and checks (open),
 * its cache identity, its plan (what `orakul plan` prints) and close. The
 * encode itself is in cond_run.c.
 *
 * Where an encoder's pieces come from, per slot of the model (ork_text_slot):
 *   weights:   the slot's explicit path (model_kwargs.<path_key>), else
 *              <source_dir>/<subfolder> (a diffusers folder or HF snapshot);
 *   tokenizer: the slot's explicit tokenizer path, else
 *              <source_dir>/<tokenizer_subfolder>, else the folder of an
 *              explicit weights path when a tokenizer file lies there.
 * Nothing found and nothing given: no conditioner (one warning, the caller
 * keeps zero embeddings or .te.safetensors files). Part found: one error line
 * naming each missing piece and where it was looked for.
 * Owns: each slot's encoder instance and tokenizer, the identity string. */
#include "text/cond_internal.h"
#include "text/prompt_format.h"

#include "config/config.h"

#include "stream/plan.h"
#include "tensor/alloc.h" /* ORK_ALLOC_ALIGN */
#include "tensor/ops_text.h" /* ORK_ATTN_BIAS_SLICE */
#include "tensor/tensor.h"
#include "platform/platform.h"
#include "text/tokenizer.h"
#include "util/log.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#ifdef ORAKUL_HAVE_CUDA
#include "cuda/cuda_ctx.h"
#endif

static int is_dir(const char *p) {
    ork_file_info fi;
    return p && ork_path_info(p, &fi) == ORK_OK && fi.kind == ORK_KIND_DIR;
}
static int exists(const char *p) { return p && ork_path_exists(p); }

/* A growing string for the missing-pieces line and the identity. */
typedef struct sbuf {
    char *s;
    size_t n, cap;
} sbuf;
static void sb_add(sbuf *b, const char *fmt, ...) ORK_PRINTF(2, 3);
static void sb_add(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    if (b->n + (size_t)k + 1 > b->cap) {
        size_t cap = (b->n + (size_t)k + 1) * 2;
        char *s = realloc(b->s, cap);
        if (!s) return; /* the string stays as it was; the caller checks b->s */
        b->s = s;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

static const char *slot_name(const ork_text_slot *s) { return s->encoder ? s->encoder : "?"; }

ork_dtype ork_tc_act_dtype(const ork_backend *be) { return be && be->device == ORK_DEV_CUDA ? ORK_BF16 : ORK_F32; }

size_t ork_tc_budget(const ork_backend *be, size_t budget, int device_index, const char **why) {
    if (budget) {
        if (why) *why = "model.vram_budget_gb";
        return budget;
    }
    const size_t gib = (size_t)1 << 30;
    if (be && be->device == ORK_DEV_CUDA) {
#ifdef ORAKUL_HAVE_CUDA
        size_t free_b = 0, total_b = 0;
        char name[128];
        if (ork_cuda_device_count() > device_index &&
            ork_cuda_mem_info(device_index, &free_b, &total_b, name, sizeof name) == ORK_OK && free_b > 2 * gib) {
            if (why) *why = "the device's free memory less 1.5 GiB";
            return free_b - 3 * gib / 2;
        }
#else
        (void)device_index;
#endif
        ork_device_kind dk;
        const char *pd = getenv("ORAKUL_PLAN_DEVICE");
        if (!(pd && *pd && ork_device_kind_find(pd, &dk))) ork_device_kind_find("h200", &dk);
        if (why) *why = "the planned card's memory less 2 GiB";
        return (size_t)(dk.mem_gib * (double)gib) - 2 * gib;
    }
    uint64_t avail = 0;
    if (why) *why = "half the free host memory";
    return ork_mem_available(&avail) == ORK_OK && avail > 0 ? (size_t)(avail / 2) : 8 * gib;
}

void ork_textcond_opts_from_config(const ork_model_config *mc, const ork_model_info *mi, ork_textcond_opts *o) {
    memset(o, 0, sizeof *o);
    if (!mc) return;
    o->quantize = mc->quantize_te;
    o->qtype = mc->qtype_te;
    /* a slot may ask for model.qtype under model.quantize (ai-toolkit's rule for
     * FLUX.1's T5): the model declares it, the core names no family */
    int model_qtype = 0;
    for (int i = 0; mi && ork_model_info_has_text(mi) && i < mi->n_text_slots; i++)
        model_qtype |= (mi->text_slots[i].flags & ORK_TEXT_SLOT_MODEL_QTYPE) != 0;
    if (model_qtype && mc->quantize && mc->qtype && strcmp(mc->qtype, "none") != 0) o->qtype = mc->qtype;
    o->attn_mask = mc->attn_masking;
    o->what = mc->name_or_path;
}

/* ---- open ----------------------------------------------------------------- */

typedef struct found {
    char w[TC_PATH], t[TC_PATH];
    int w_given, t_given, w_ok, t_ok;
    char w_looked[TC_PATH], t_looked[TC_PATH];
} found;

static void resolve_slot(const ork_model_info *mi, const ork_text_slot *s, found *f) {
    memset(f, 0, sizeof *f);
    const char *src = ork_model_info_has_text(mi) ? mi->source_dir : NULL;
    if (s->path && *s->path) {
        f->w_given = 1;
        snprintf(f->w, sizeof f->w, "%s", s->path);
        snprintf(f->w_looked, sizeof f->w_looked, "%s", s->path);
        f->w_ok = exists(s->path);
    } else if (src && s->subfolder) {
        snprintf(f->w, sizeof f->w, "%s/%s", src, s->subfolder);
        snprintf(f->w_looked, sizeof f->w_looked, "%s", f->w);
        f->w_ok = is_dir(f->w);
    }
    if (s->tokenizer_path && *s->tokenizer_path) {
        f->t_given = 1;
        snprintf(f->t, sizeof f->t, "%s", s->tokenizer_path);
        snprintf(f->t_looked, sizeof f->t_looked, "%s", s->tokenizer_path);
        f->t_ok = exists(s->tokenizer_path);
        return;
    }
    if (src && s->tokenizer_subfolder) {
        snprintf(f->t, sizeof f->t, "%s/%s", src, s->tokenizer_subfolder);
        snprintf(f->t_looked, sizeof f->t_looked, "%s", f->t);
        f->t_ok = is_dir(f->t) && ork_tokenizer_dir_has(f->t);
        if (f->t_ok) return;
    }
    if (f->w_given) { /* beside explicit weights: the folder itself, or a file's folder */
        char d[TC_PATH];
        snprintf(d, sizeof d, "%s", s->path);
        if (!is_dir(d)) {
            char *sl = strrchr(d, '/');
            if (sl) *sl = 0;
            else snprintf(d, sizeof d, ".");
        }
        if (f->t_looked[0]) {
            size_t l = strlen(f->t_looked);
            snprintf(f->t_looked + l, sizeof f->t_looked - l, " and %s", d);
        } else {
            snprintf(f->t_looked, sizeof f->t_looked, "%s", d);
        }
        if (ork_tokenizer_dir_has(d)) {
            snprintf(f->t, sizeof f->t, "%s", d);
            f->t_ok = 1;
        }
    }
}

static ork_status open_slot(ork_textcond *tc, tc_slot *t, const found *f) {
    const ork_model_info *mi = tc->mi;
    const ork_text_slot *s = &t->s;
    if (s->n_hidden_states < 0 || s->n_hidden_states > 4)
        return ORK_FAIL(ORK_E_INVALID, "%s's text slot %s: n_hidden_states %d (0 .. 4)",
                        mi->variant ? mi->variant : "the model", slot_name(s), s->n_hidden_states);
    ORK_TRY(ork_registry_require(tc->reg, ORK_KIND_TEXT_ENCODER, slot_name(s), "the model's text encoder", &t->pc));
    t->vt = t->pc->c->vtable;
    void *buf = calloc(1, t->pc->c->params_size ? t->pc->c->params_size : 1);
    if (!buf) return ORK_E_NOMEM;
    ork_status st = t->vt->create(&t->pc->host, buf, &t->self);
    free(buf);
    ORK_TRY(st);
    if (s->n_hidden_states > 0) { /* the model's choice of the encoder's hidden states */
        if (!ORK_TEXT_ENCODER_HAS_SELECT(t->vt))
            return ORK_FAIL(ORK_E_UNSUPPORTED, "%s's text slot %s chooses hidden states, but the text encoder %s "
                            "cannot (no select_hidden)", mi->variant ? mi->variant : "the model", slot_name(s),
                            t->pc->c->id);
        ORK_TRY(t->vt->select_hidden(t->self, s->n_hidden_states, s->hidden_states)); /* logs its line */
    }
    snprintf(t->weights, sizeof t->weights, "%.*s", (int)sizeof t->weights - 1, f->w);
    snprintf(t->tokenizer, sizeof t->tokenizer, "%.*s", (int)sizeof t->tokenizer - 1, f->t);
    ORK_TRY(t->vt->open(t->self, t->weights, &t->info)); /* logs its line */
    ORK_TRY(ork_tokenizer_load(t->tokenizer, &t->tok));   /* logs its line */
    t->feeds = (int)s->feeds;
    if ((t->feeds & ORK_TEXT_FEEDS_TXT) && t->info.hidden_dim != mi->context_dim)
        return ORK_FAIL(ORK_E_CONFIG, "text encoder %s (%s): hidden width %d, but %s takes text embeddings of width %d",
                        slot_name(s), t->weights, t->info.hidden_dim, mi->variant ? mi->variant : "the model",
                        mi->context_dim);
    if ((t->feeds & ORK_TEXT_FEEDS_VEC) && (t->info.pooled_dim <= 0 || t->info.pooled_dim != mi->vec_dim))
        return ORK_FAIL(ORK_E_CONFIG, "text encoder %s (%s): pooled width %d, but %s takes a pooled vector of width %d",
                        slot_name(s), t->weights, t->info.pooled_dim, mi->variant ? mi->variant : "the model",
                        mi->vec_dim);
    int32_t tv = ork_tokenizer_vocab_size(t->tok);
    if (tv > t->info.vocab_size)
        return ORK_FAIL(ORK_E_CONFIG, "text encoder %s: the tokenizer %s has %d tokens, the encoder %s only %d: not "
                        "the encoder's tokenizer", slot_name(s), t->tokenizer, (int)tv, t->weights, t->info.vocab_size);
    t->L = s->max_length > 0 ? s->max_length : t->info.default_length > 0 ? t->info.default_length : 77;
    if (t->info.max_length > 0 && t->L > t->info.max_length) {
        ORK_INFO("text encoder %s: %d tokens asked, the encoder takes %d: captions are cut at %d", slot_name(s), t->L,
                 t->info.max_length, t->info.max_length);
        t->L = t->info.max_length;
    }
    ork_prompt_template tpl;
    int chat = ork_tc_prompt_template(t, &tpl);
    char what[160];
    snprintf(what, sizeof what, "%s's text slot %s", mi->variant ? mi->variant : "the model", slot_name(s));
    ORK_TRY(ork_prompt_template_check(&tpl, t->L, what));
    t->use_mask = (t->feeds & ORK_TEXT_FEEDS_TXT) && (tc->o.attn_mask || chat);
    /* the unmasked rows (cond_run.c keeps them, compacted to the front) are the
     * caption's own only when the encoder attended under that mask */
    if ((s->flags & ORK_TEXT_SLOT_UNMASKED) && !t->use_mask)
        return ORK_FAIL(ORK_E_UNSUPPORTED, "%s's text slot %s asks for the unmasked tokens only, but its encoder gets "
                        "no padding mask (no chat template, model.attn_masking off): its rows would see the padding",
                        mi->variant ? mi->variant : "the model", slot_name(s));
    if (tc->o.quantize && (s->flags & ORK_TEXT_SLOT_QUANTIZE)) {
        ORK_TRY(ork_registry_require(tc->reg, ORK_KIND_QUANT, tc->qtype, "model.qtype_te", &t->qpc));
        /* the storage of a square weight, for the plan (the store asks per shape) */
        const ork_quant_vtable *qv = t->qpc->c->vtable;
        void *qp = calloc(1, t->qpc->c->params_size ? t->qpc->c->params_size : 1), *q = NULL;
        if (!qp) return ORK_E_NOMEM;
        st = qv->create(&t->qpc->host, qp, &q);
        ork_quant_layout lay = {0};
        if (st == ORK_OK) st = qv->layout(q, 256, 256, &lay);
        if (q) qv->destroy(q);
        free(qp);
        ORK_TRY(st);
        t->qdt = lay.qdtype;
        t->qblock = lay.block;
    }
    return ORK_OK;
}

static ork_status build_identity(ork_textcond *tc);

ork_status ork_textcond_open(const ork_registry *reg, const ork_model_info *mi, const ork_textcond_opts *opts,
                             ork_textcond **out) {
    *out = NULL;
    if (!reg || !mi) return ORK_FAIL(ORK_E_INVALID, "ork_textcond_open: no registry or model");
    const char *model = mi->variant ? mi->variant : "the model";
    if (!ork_model_info_has_text(mi) || mi->n_text_slots <= 0 || !mi->text_slots) {
        ORK_WARN("%s declares no text encoders: training uses zero text embeddings unless <image>.te.safetensors "
                 "files are given", model);
        return ORK_OK;
    }
    if (mi->n_text_slots > TC_MAX_SLOTS)
        return ORK_FAIL(ORK_E_UNSUPPORTED, "%s declares %d text encoders; at most %d are supported", model,
                        mi->n_text_slots, TC_MAX_SLOTS);
    found f[TC_MAX_SLOTS];
    int n_found = 0, n_given = 0, n_missing = 0;
    for (int i = 0; i < mi->n_text_slots; i++) {
        resolve_slot(mi, &mi->text_slots[i], &f[i]);
        n_found += f[i].w_ok + f[i].t_ok;
        n_given += f[i].w_given + f[i].t_given;
        n_missing += !f[i].w_ok + !f[i].t_ok;
    }
    const char *what = opts && opts->what ? opts->what : NULL;
    if (n_found == 0 && n_given == 0) {
        sbuf k = {0};
        for (int i = 0; i < mi->n_text_slots; i++)
            sb_add(&k, "%s%s, %s", i ? ", " : "", mi->text_slots[i].path_key ? mi->text_slots[i].path_key : "?",
                   mi->text_slots[i].tokenizer_key ? mi->text_slots[i].tokenizer_key : "?");
        if (mi->source_dir)
            ORK_WARN("%s%s%s%s: no text encoders in %s (looked for %s/, ...): training uses zero text embeddings "
                     "unless <image>.te.safetensors files are given; or set model.model_kwargs %s", model,
                     what ? " (" : "", what ? what : "", what ? ")" : "", mi->source_dir,
                     mi->text_slots[0].subfolder ? mi->text_slots[0].subfolder : "?", k.s ? k.s : "");
        else
            ORK_WARN("%s%s%s%s: no text encoders (a single file or a preset): training uses zero text embeddings "
                     "unless <image>.te.safetensors files are given; or set model.model_kwargs %s", model,
                     what ? " (" : "", what ? what : "", what ? ")" : "", k.s ? k.s : "");
        free(k.s);
        return ORK_OK;
    }
    if (n_missing) {
        sbuf b = {0};
        for (int i = 0; i < mi->n_text_slots; i++) {
            const ork_text_slot *s = &mi->text_slots[i];
            const char *pk = s->path_key ? s->path_key : "?", *tk = s->tokenizer_key ? s->tokenizer_key : "?";
            if (!f[i].w_ok && f[i].w_given)
                sb_add(&b, "%s%s weights not found (model.model_kwargs.%s: %s)", b.n ? "; " : "", slot_name(s), pk,
                       f[i].w_looked);
            else if (!f[i].w_ok)
                sb_add(&b, "%s%s weights missing (%s%s); set model.model_kwargs.%s", b.n ? "; " : "", slot_name(s),
                       f[i].w_looked[0] ? "looked for " : "no diffusers folder to look in: a single file or a preset",
                       f[i].w_looked, pk);
            if (!f[i].t_ok && f[i].t_given)
                sb_add(&b, "%s%s tokenizer not found (model.model_kwargs.%s: %s)", b.n ? "; " : "", slot_name(s), tk,
                       f[i].t_looked);
            else if (!f[i].t_ok)
                sb_add(&b, "%s%s tokenizer missing (%s%s); set model.model_kwargs.%s (a tokenizer.json, tekken.json, spiece.model, "
                       "vocab.json + merges.txt or a folder holding one)", b.n ? "; " : "", slot_name(s),
                       f[i].t_looked[0] ? "looked in " : "no diffusers folder to look in: a single file or a preset",
                       f[i].t_looked, tk);
        }
        ork_status r = ORK_FAIL(ORK_E_CONFIG, "text encoders of %s%s%s%s incomplete: %s", model, what ? " (" : "",
                                what ? what : "", what ? ")" : "", b.s ? b.s : "out of memory");
        free(b.s);
        return r;
    }
    ork_textcond *tc = calloc(1, sizeof *tc);
    if (!tc) return ORK_E_NOMEM;
    tc->reg = reg;
    tc->mi = mi;
    if (opts) tc->o = *opts;
    tc->o.what = NULL; /* borrowed only during open */
    snprintf(tc->qtype, sizeof tc->qtype, "%s", opts && opts->qtype && *opts->qtype ? opts->qtype : "qfloat8");
    tc->o.qtype = tc->qtype;
    tc->n = mi->n_text_slots;
    ork_status st = ORK_OK;
    for (int i = 0; i < tc->n && st == ORK_OK; i++) {
        tc->sl[i].s = mi->text_slots[i];
        st = open_slot(tc, &tc->sl[i], &f[i]);
    }
    for (int i = 0; i < tc->n && st == ORK_OK; i++) {
        const tc_slot *t = &tc->sl[i];
        if ((t->feeds & ORK_TEXT_FEEDS_TXT) && tc->T) st = ORK_FAIL(ORK_E_CONFIG, "%s: two text slots feed txt", model);
        if (t->feeds & ORK_TEXT_FEEDS_TXT) {
            tc->T = t->L;
            tc->ctx_dim = t->info.hidden_dim;
            tc->unmasked = (t->s.flags & ORK_TEXT_SLOT_UNMASKED) != 0;
        }
        if (t->feeds & ORK_TEXT_FEEDS_VEC) tc->vec_dim = t->info.pooled_dim;
    }
    if (st == ORK_OK && !tc->T) st = ORK_FAIL(ORK_E_CONFIG, "%s: no text slot feeds txt", model);
    if (st == ORK_OK) st = build_identity(tc);
    if (st != ORK_OK) {
        ork_textcond_close(tc);
        return st;
    }
    *out = tc;
    return ORK_OK;
}

void ork_textcond_close(ork_textcond *tc) {
    if (!tc) return;
    for (int i = 0; i < tc->n; i++) {
        tc_slot *t = &tc->sl[i];
        if (t->self) t->vt->destroy(t->self);
        ork_tokenizer_free(t->tok);
    }
    free(tc->identity);
    free(tc);
}

void ork_textcond_shape(const ork_textcond *tc, int *T, int *ctx_dim, int *vec_dim) {
    if (T) *T = tc ? tc->T : 0;
    if (ctx_dim) *ctx_dim = tc ? tc->ctx_dim : 0;
    if (vec_dim) *vec_dim = tc ? tc->vec_dim : 0;
}

int ork_textcond_unmasked(const ork_textcond *tc) { return tc && tc->unmasked; }

void ork_textcond_last_stats(const ork_textcond *tc, ork_textcond_stats *out) {
    if (tc) *out = tc->last;
    else memset(out, 0, sizeof *out);
}

/* ---- identity ------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* An mtime in ns as stat's (seconds, nanoseconds in [0, 1e9)) pair. */
static void split_mtime(int64_t ns, long long *sec, long *nsec) {
    long long s = (long long)(ns / 1000000000), r = (long long)(ns % 1000000000);
    if (r < 0) r += 1000000000, s--;
    *sec = s;
    *nsec = (long)r;
}

/* "name:size:mtime" of path, or of every regular file in it (sorted; only
 * names ending in suffixes[] when given). */
static void add_files(sbuf *b, const char *path, const char *const *suffixes) {
    ork_file_info sb;
    if (ork_path_info(path, &sb) != ORK_OK) {
        sb_add(b, "?");
        return;
    }
    if (sb.kind != ORK_KIND_DIR) {
        const char *base = strrchr(path, '/');
        long long sec;
        long nsec;
        split_mtime(sb.mtime_ns, &sec, &nsec);
        sb_add(b, "%s:%lld:%lld.%09ld", base ? base + 1 : path, (long long)sb.size, sec, nsec);
        return;
    }
    ork_dir *d = NULL;
    if (ork_dir_open(path, &d) != ORK_OK) return;
    char **names = NULL;
    size_t n = 0, cap = 0;
    const char *name;
    while ((name = ork_dir_next(d))) {
        if (name[0] == '.') continue;
        int keep = !suffixes;
        for (int i = 0; suffixes && suffixes[i] && !keep; i++) {
            size_t a = strlen(name), c = strlen(suffixes[i]);
            keep = a >= c && !strcmp(name + a - c, suffixes[i]);
        }
        if (!keep) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn) break;
            names = nn;
        }
        if (!(names[n] = strdup(name))) break;
        n++;
    }
    ork_dir_close(d);
    if (n) qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        char p[TC_PATH + 300];
        snprintf(p, sizeof p, "%s/%s", path, names[i]);
        ork_file_info fs;
        if (ork_path_info(p, &fs) == ORK_OK && fs.kind == ORK_KIND_FILE) {
            long long sec;
            long nsec;
            split_mtime(fs.mtime_ns, &sec, &nsec);
            sb_add(b, "%s%s:%lld:%lld.%09ld", i ? "," : "", names[i], (long long)fs.size, sec, nsec);
        }
        free(names[i]);
    }
    free(names);
}

static ork_status build_identity(ork_textcond *tc) {
    static const char *const wsuf[] = {".safetensors", ".json", NULL};
    static const char *const tsuf[] = {".json", ".json.gz", ".txt", ".txt.gz", ".model", NULL};
    sbuf b = {0};
    sb_add(&b, "orakul-textcond/1");
    for (int i = 0; i < tc->n; i++) {
        const tc_slot *t = &tc->sl[i];
        sb_add(&b, "|%s %s feeds=%s%s len=%d mask=%d%s q=%s weights=", t->pc->c->id,
               t->info.variant ? t->info.variant : "", (t->feeds & ORK_TEXT_FEEDS_TXT) ? "txt" : "",
               (t->feeds & ORK_TEXT_FEEDS_VEC) ? "vec" : "", t->L, t->use_mask,
               (t->s.flags & ORK_TEXT_SLOT_UNMASKED) ? " unmasked" : "", t->qpc ? t->qpc->c->id : "none");
        add_files(&b, t->weights, wsuf);
        sb_add(&b, " tokenizer=");
        add_files(&b, t->tokenizer, tsuf);
    }
    if (!b.s) return ORK_E_NOMEM;
    tc->identity = b.s;
    return ORK_OK;
}

const char *ork_textcond_identity(const ork_textcond *tc) { return tc && tc->identity ? tc->identity : ""; }

/* ---- plan ----------------------------------------------------------------- */

size_t ork_tc_weight_bytes(const tc_slot *t, const ork_weight_decl *d, ork_dtype store_dt) {
    int64_t n = 1;
    for (int k = 0; k < d->ndim; k++) n *= d->shape[k];
    if (d->flags & (ORK_WEIGHT_NORM | ORK_WEIGHT_F32)) return (size_t)n * 4;
    if (t->qpc && (d->flags & ORK_WEIGHT_LINEAR) && d->ndim == 2) {
        int64_t rows = d->shape[0], cols = d->shape[1];
        int64_t scales = t->qblock > 0 ? rows * ((cols + t->qblock - 1) / t->qblock) : rows;
        return (size_t)(n * (int64_t)ork_dtype_size(t->qdt)) + (size_t)scales * 4 + 16;
    }
    return (size_t)n * ork_dtype_size(store_dt);
}

size_t ork_tc_chunk_bytes(const tc_plan *p, int chunk) {
    size_t c = (size_t)(chunk > 0 ? chunk : 1), sl = (size_t)(p->attn_slice > 0 ? p->attn_slice : 1);
    size_t ff = c * p->act_ff + p->act_deq;
    size_t at = c * p->act_attn + (c < sl ? c : sl) * p->attn_seq;
    size_t em = c * (p->act_attn / 8) + p->act_embed;
    size_t m = ff > at ? ff : at;
    if (em > m) m = em;
    /* each live tensor rounded to ORK_ALLOC_ALIGN (about 16 a caption at once), first-fit's holes */
    m += m / 16 + (c * 16 + 64) * ORK_ALLOC_ALIGN;
    return p->act_scale != 1.0 ? (size_t)((double)m * p->act_scale) + 1 : m;
}

/* What a chunk of c captions needs beside the weights and the margin: its
 * arena and its carries (the block's input and its saved output; layer-major
 * keeps the others' apart, ork_tc_lm_group). */
size_t ork_tc_chunk_need(const tc_plan *p, int c) {
    return ork_tc_chunk_bytes(p, c) + 2 * (size_t)c * p->carry_per_caption + p->carry_shared;
}

/* The most captions (at most cap) whose chunk fits in room; 0: not one. */
static int tc_chunk_fit(const tc_plan *p, size_t room, int cap) {
    if (ork_tc_chunk_need(p, 1) > room) return 0;
    int lo = 1, hi = cap > 1 ? cap : 1; /* need() grows with c: the largest c that fits */
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (ork_tc_chunk_need(p, mid) <= room) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

ork_status ork_tc_plan(const tc_slot *t, ork_dtype act_dt, size_t budget, int n, int quiet, tc_plan *out) {
    memset(out, 0, sizeof *out);
    const ork_text_encoder_info *in = &t->info;
    int nb = in->n_blocks;
    size_t *wb = calloc((size_t)(nb > 0 ? nb : 1), sizeof *wb);
    if (!wb) return ORK_E_NOMEM;
    size_t asz = ork_dtype_size(act_dt);
    int64_t max_lin = 0, max_out = 0, heads = 0, *outsum = calloc((size_t)(nb > 0 ? nb : 1), sizeof *outsum);
    double lin_params = 0;
    int n_attn = 0, *has_lin = calloc((size_t)(nb > 0 ? nb : 1), sizeof *has_lin);
    if (!has_lin || !outsum) {
        free(wb);
        free(has_lin);
        free(outsum);
        return ORK_E_NOMEM;
    }
    for (int i = 0; i < in->n_weights; i++) {
        const ork_weight_decl *d = &in->weights[i];
        if (d->block < 0 || d->block >= nb) continue;
        wb[d->block] += ork_tc_weight_bytes(t, d, act_dt);
        if ((d->flags & ORK_WEIGHT_LINEAR) && d->ndim == 2) {
            has_lin[d->block] = 1;
            outsum[d->block] += d->shape[0];
            if (d->shape[0] * d->shape[1] > max_lin) max_lin = d->shape[0] * d->shape[1];
            if (d->shape[0] > max_out) max_out = d->shape[0];
            lin_params += (double)d->shape[0] * (double)d->shape[1];
        }
        /* T5's position-bias table (buckets, H) says the heads */
        if (d->ndim == 2 && strstr(d->name, "relative_attention_bias")) heads = d->shape[1];
    }
    int64_t max_sum = 0;
    for (int b = 0; b < nb; b++) {
        out->w_total += wb[b];
        if (wb[b] > out->w_block_max) out->w_block_max = wb[b];
        if (outsum[b] > max_sum) max_sum = outsum[b];
        n_attn += has_lin[b];
    }
    free(wb);
    free(has_lin);
    free(outsum);
    int64_t L = t->L, D = in->hidden_dim, F = max_out > D ? max_out : D;
    int64_t H = heads > 0 ? heads : D / 64 > 0 ? D / 64 : 1;
    size_t e = (size_t)(L * D) * asz, f = (size_t)(L * F) * asz, hll = (size_t)(H * L * L);
    out->heads = (int)H;
    if (in->family && !strcmp(in->family, "t5")) { /* measured: T5's blocks drop what they can */
        out->act_ff = 5 * e + 3 * f;
        out->act_attn = 8 * e;
    } else { /* any other (CLIP's blocks drop nothing): every tensor the block makes at once — its
              * linears' outputs, the head copies, norms, residuals and activation: Σout + 12 D + F */
        out->act_ff = (size_t)(L * (max_sum + 12 * D + F)) * asz;
        out->act_attn = out->act_ff;
    }
    out->attn_seq = hll * (4 + (asz < 4 ? asz : 0));
    size_t s32 = hll * 4;
    out->attn_slice = (int)(s32 ? ORK_ATTN_BIAS_SLICE / s32 : 1);
    if (out->attn_slice < 1) out->attn_slice = 1;
    out->act_deq = t->qpc ? (size_t)max_lin * asz : 0;
    out->act_embed = (size_t)(L * L) * 4 + 2 * hll * asz;
    out->act_scale = 1.0;
    const char *as = getenv("ORAKUL_TEXT_ACT_SCALE"); /* tests: a wrong estimate, to see encode recover */
    if (as && atof(as) > 0) out->act_scale = atof(as);
    out->act_per_caption = ork_tc_chunk_bytes(out, 1);
    out->scratch = out->act_scale != 1.0 ? (size_t)((double)TC_MARGIN * out->act_scale) : TC_MARGIN;
    out->carry_per_caption = e + (size_t)L * 16 + 1024;
    out->carry_shared = hll * asz + ORK_ALLOC_ALIGN;
    out->flops_per_caption = 2.0 * lin_params * (double)L + 4.0 * (double)n_attn * (double)L * (double)L * (double)D;
    const char *lm = getenv("ORAKUL_TEXT_LAYER_MAJOR");
    int force_lm = lm && *lm && strcmp(lm, "0") != 0;
    /* captions per chunk at most: ORAKUL_TEXT_CHUNK, else ORAKUL_TEXT_CHUNK_TOKENS (16384) tokens and 64
     * captions: past some 8k rows the GEMMs gain nothing from a bigger chunk, the activations keep growing */
    long tok = 16384;
    const char *ct = getenv("ORAKUL_TEXT_CHUNK_TOKENS");
    if (ct && atol(ct) > 0) tok = atol(ct);
    int cap = (int)(tok / (L > 0 ? L : 1));
    if (cap > 64) cap = 64;
    const char *cc = getenv("ORAKUL_TEXT_CHUNK");
    if (cc && atoi(cc) > 0) cap = atoi(cc);
    if (n > 0 && cap > n) cap = n;
    if (cap < 1) cap = 1;
    size_t need_res = out->w_total + out->scratch, need_lm = out->w_block_max + out->scratch;
    int c_res = !budget ? cap : budget > need_res ? tc_chunk_fit(out, budget - need_res, cap) : 0;
    int c_lm = !budget ? cap : budget > need_lm ? tc_chunk_fit(out, budget - need_lm, cap) : 0;
    if (!force_lm && c_res > 0) {
        out->chunk = c_res;
    } else if (c_lm > 0) {
        out->layer_major = 1;
        out->chunk = c_lm;
    } else {
        if (!quiet)
            ORK_FAIL(ORK_E_BUDGET, "text encoder %s: its largest block (%.2f GiB) and one caption's activations "
                     "(%.2f GiB) do not fit in model.vram_budget_gb (%.2f GiB)", t->s.encoder,
                     out->w_block_max / 1073741824.0, ork_tc_chunk_need(out, 1) / 1073741824.0, budget / 1073741824.0);
        return ORK_E_BUDGET;
    }
    /* layer-major: every caption's carry on the device beats a bigger chunk whose
     * carries go down to the host and up again at every block (copies of
     * L·D each way per caption and block), as long as the chunk stays 16 or more */
    size_t carries = (size_t)(n > 0 ? n : 1) * out->carry_per_caption;
    if (out->layer_major && budget && budget < need_lm + carries + ork_tc_chunk_need(out, out->chunk) &&
        budget > need_lm + carries + ork_tc_chunk_need(out, 1)) {
        int c = tc_chunk_fit(out, budget - need_lm - carries, out->chunk);
        if (c >= 16 || c >= out->chunk) out->chunk = c;
    }
    out->peak = (out->layer_major ? need_lm : need_res) + ork_tc_chunk_need(out, out->chunk);
    return ORK_OK;
}

ork_status ork_textcond_describe(const ork_textcond *tc, const ork_backend *be, size_t budget_bytes, int n_captions,
                                 FILE *out) {
    if (!tc) {
        fprintf(out, "text encode: none (zero text embeddings, or <image>.te.safetensors files)\n");
        return ORK_OK;
    }
    ork_dtype act = ork_tc_act_dtype(be);
    const char *bwhy = NULL;
    budget_bytes = ork_tc_budget(be, budget_bytes, tc->o.device_index, &bwhy);
    const char *kind = be && be->device == ORK_DEV_CUDA ? "h200" : "cpu";
    const char *pd = getenv("ORAKUL_PLAN_DEVICE");
    if (be && be->device == ORK_DEV_CUDA && pd && *pd) kind = pd;
    ork_device_kind dk;
    if (!ork_device_kind_find(kind, &dk)) ork_device_kind_find("h200", &dk);
    fprintf(out, "text encode: %d caption%s, txt (%d, %d)", n_captions, n_captions == 1 ? "" : "s", tc->T, tc->ctx_dim);
    if (tc->vec_dim) fprintf(out, ", vec (%d)", tc->vec_dim);
    fprintf(out, ", within %.2f GiB (%s)", budget_bytes / 1073741824.0, bwhy);
    fprintf(out, "; its memory is given back before training\n");
    double total = 0;
    size_t peak_all = 0;
    for (int i = 0; i < tc->n; i++) {
        const tc_slot *t = &tc->sl[i];
        tc_plan p;
        ork_status s = ork_tc_plan(t, act, budget_bytes, n_captions, 0, &p);
        if (s != ORK_OK) return s;
        if (p.peak > peak_all) peak_all = p.peak;
        double rate = dk.tflops * 1e12 * (dk.mfu > 0 ? dk.mfu : 0.5);
        double t_comp = p.flops_per_caption * n_captions / rate;
        int on_device = 1, group = n_captions > 0 ? n_captions : 1;
        if (p.layer_major) ork_tc_lm_group(&p, budget_bytes, n_captions, &on_device, &group);
        int passes = n_captions > 0 ? (n_captions + group - 1) / group : 1;
        int cuda = be && be->device == ORK_DEV_CUDA;
        double t_pcie = cuda ? passes * (double)p.w_total / (dk.h2d_gbs * 1e9) : 0;
        /* host carries: each caption's carry down and up once per block, pageable (~10 GB/s) */
        double t_carry = cuda && p.layer_major && !on_device
                             ? 2.0 * n_captions * (double)t->info.n_blocks * (double)p.carry_per_caption / 10e9 : 0;
        t_pcie += t_carry;
        total += t_comp + t_pcie;
        fprintf(out, "  %-5s %s (%s) from %s: %d blocks, %d tokens, weights %.2f GiB %s%s\n", t->s.encoder,
                t->pc->c->id, t->info.variant ? t->info.variant : "?", t->weights, t->info.n_blocks, t->L,
                p.w_total / 1073741824.0, t->qpc ? t->qpc->c->id : ork_dtype_name(act),
                t->qpc ? " (model.quantize_te)" : "");
        fprintf(out, "        %s: %d caption%s per chunk, peak %.2f GiB (largest block %.2f GiB, %.3f GiB per "
                "caption); predicted %.1f s (compute %.1f s at %.0f%% of %s's %.1f TFLOP/s, weights over PCIe %.1f s)\n",
                !p.layer_major ? "resident"
                : on_device ? "layer-major (each block's weights loaded once, every caption through it; carries on the device)"
                            : "layer-major (each block's weights loaded once, every caption through it; carries on the host)",
                p.chunk, p.chunk == 1 ? "" : "s", p.peak / 1073741824.0, p.w_block_max / 1073741824.0,
                p.act_per_caption / 1073741824.0, t_comp + t_pcie, t_comp, 100 * (dk.mfu > 0 ? dk.mfu : 0.5),
                dk.name, dk.tflops, t_pcie);
    }
    fprintf(out, "  text encode predicted %.1f s in all (%.1f captions/s), device peak %.2f GiB (the largest "
            "encoder's; one encoder at a time)\n", total, total > 0 ? n_captions / total : 0.0, peak_all / 1073741824.0);
    return ORK_OK;
}
