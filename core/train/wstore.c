/* train/wstore.c — see wstore.h. */
#include "train/wstore.h"

#include "numerics/fp8.h"
#include "numerics/half.h"
#include "numerics/quantize.h"
#include "train/rng.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

struct ork_wstore {
    ork_alloc *alloc;
    const ork_backend *be;
    ork_kctx *k;
    const ork_model_info *info;
    ork_dtype store_dt;
    ork_tensor **t;     /* [n_weights] */
    uint8_t *filled;    /* [n_weights] */
    int *order;         /* indices sorted by name, for lookup */
    ork_weight_sink sink;
    size_t bytes, resident_bytes;
    /* streaming (st == NULL: all resident) */
    ork_streamer *st;
    ork_stream_rec *rec;  /* [n_weights] records of streamed weights */
    int *blk_start;       /* [n_blocks + 1] CSR of the weights of each block */
    int *blk_w;           /* [n_weights] */
    uint8_t *mapped;      /* [n_blocks] a streamed block's headers point at a slot */
    /* quantizer (qvt == NULL: none) */
    const ork_quant_vtable *qvt;
    void *qself;
    const char *qname;
    ork_quant_layout *lay; /* [n_weights] layout of quantized weights */
    uint8_t *isq;          /* [n_weights] 1: stored in the quantizer's layout */
    ork_qinfo *qi;         /* [n_weights] the tensors' q (when attached) */
    void **qmem;           /* [n_weights] resident: data + scales allocation */
    size_t quant_bytes;
    int n_quant, warned_refmt;
};

static int is_streamed(const ork_wstore *w, int i) {
    return w->st && ork_streamer_is_streamed(w->st, w->info->weights[i].block);
}

static ork_wstore *g_sort_ctx; /* qsort has no context argument in C11 */
static int cmp_name(const void *a, const void *b) {
    const ork_model_info *i = g_sort_ctx->info;
    return strcmp(i->weights[*(const int *)a].name, i->weights[*(const int *)b].name);
}

static int find_index(const ork_wstore *w, const char *name) {
    int lo = 0, hi = w->info->n_weights - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(w->info->weights[w->order[mid]].name, name);
        if (c == 0) return w->order[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

static int64_t decl_numel(const ork_weight_decl *d) {
    int64_t n = 1;
    for (int i = 0; i < d->ndim; i++) n *= d->shape[i];
    return n;
}

static ork_dtype dt_for(const ork_wstore *w, const ork_weight_decl *d) {
    return (d->flags & (ORK_WEIGHT_NORM | ORK_WEIGHT_F32)) ? ORK_F32 : w->store_dt;
}

/* Is weight d stored in the quantizer's layout? */
static int quantizable(const ork_wstore *w, const ork_weight_decl *d) {
    return w->qvt && (d->flags & ORK_WEIGHT_LINEAR) && !(d->flags & (ORK_WEIGHT_CODEC | ORK_WEIGHT_NORM | ORK_WEIGHT_F32)) &&
           d->ndim == 2;
}

/* Weight i's stored bytes and F32 scale bytes. */
static void stored_bytes(const ork_wstore *w, int i, size_t *data, size_t *scales) {
    const ork_weight_decl *d = &w->info->weights[i];
    if (w->isq && w->isq[i]) {
        *data = (size_t)decl_numel(d) * ork_dtype_size(w->lay[i].qdtype);
        *scales = (size_t)w->lay[i].n_scales * sizeof(float);
    } else {
        *data = (size_t)decl_numel(d) * ork_dtype_size(dt_for(w, d));
        *scales = 0;
    }
}

/* The record of weight i alone (resident) or in its block's region (streamed). */
static ork_stream_rec rec_of(const ork_wstore *w, int i) {
    if (w->rec && w->st && ork_streamer_is_streamed(w->st, w->info->weights[i].block)) return w->rec[i];
    size_t data, sc, size = 0;
    stored_bytes(w, i, &data, &sc);
    ork_stream_rec r;
    ork_stream_rec_add(&size, data, sc, &r);
    return r;
}

/* Convert n host values of src_dt into dst_dt (F32 or BF16) at dst. */
static ork_status convert(const void *src, ork_dtype src_dt, int64_t n, ork_dtype dst_dt, void *dst) {
    if (src_dt == dst_dt) {
        memcpy(dst, src, (size_t)n * ork_dtype_size(dst_dt));
        return ORK_OK;
    }
    float *f = dst_dt == ORK_F32 ? dst : malloc((size_t)n * sizeof *f);
    if (!f) return ORK_E_NOMEM;
    const uint8_t *s = src;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        float x;
        switch (src_dt) {
        case ORK_F32: memcpy(&x, s + 4 * i, 4); break;
        case ORK_BF16: memcpy(&h, s + 2 * i, 2); x = ork_bf16_to_f32(h); break;
        case ORK_F16: memcpy(&h, s + 2 * i, 2); x = ork_f16_to_f32(h); break;
        case ORK_F8_E4M3: x = ork_e4m3_to_f32(s[i]); break;
        case ORK_F8_E5M2: x = ork_e5m2_to_f32(s[i]); break;
        default:
            if (f != dst) free(f);
            return ORK_E_UNSUPPORTED;
        }
        f[i] = x;
    }
    if (dst_dt == ORK_BF16) {
        ork_bf16_from_f32(f, (size_t)n, dst);
        free(f);
    } else if (dst_dt != ORK_F32) {
        free(f);
        return ORK_E_UNSUPPORTED;
    }
    return ORK_OK;
}

static ork_status upload(ork_wstore *w, int i, const void *host) {
    ork_tensor *t = w->t[i];
    ORK_TRY(w->be->memcpy_h2d(w->k, ork_tensor_data(t), host, ork_tensor_nbytes(t)));
    /* host buffers are freed right after: make the copy complete first */
    ORK_TRY(w->be->sync(w->k));
    w->filled[i] = 1;
    return ORK_OK;
}

static ork_status lookup(const ork_weight_sink *s, const char *name, int *idx) {
    ork_wstore *w = s->store;
    *idx = find_index(w, name);
    if (*idx < 0) return ORK_FAIL(ORK_E_INVALID, "model put an undeclared weight '%s'", name);
    return ORK_OK;
}

/* Weight i's record (bytes, then scales) from host buf: the streamed region
 * already is buf; a resident one is uploaded. */
static ork_status commit_quant(ork_wstore *w, int i, const void *buf) {
    if (is_streamed(w, i)) {
        w->filled[i] = 1;
        return ORK_OK;
    }
    ork_stream_rec r = rec_of(w, i);
    ORK_TRY(w->be->memcpy_h2d(w->k, w->qmem[i], buf, r.scale_offset + r.scale_bytes));
    ORK_TRY(w->be->sync(w->k)); /* buf is freed right after */
    w->filled[i] = 1;
    return ORK_OK;
}

/* Weight i's place in its streamed block's host region (NULL: the region
 * could not be given back, e.g. a coded region failed to decode). */
static void *streamed_at(ork_wstore *w, int i, size_t offset) {
    uint8_t *h = ork_streamer_host(w->st, w->info->weights[i].block);
    return h ? h + offset : NULL;
}

/* Host memory for weight i's record: its place in the streamed region, or a
 * malloc'd buffer (*owned) of the same layout. */
static void *record_buf(ork_wstore *w, int i, void **owned) {
    ork_stream_rec r = rec_of(w, i);
    *owned = NULL;
    if (is_streamed(w, i)) return streamed_at(w, i, r.offset);
    *owned = calloc(1, r.scale_offset + r.scale_bytes + 1);
    return *owned;
}

/* A quantized weight from host values of dt: the plugin's quantize on all cores. */
static ork_status put_quant(ork_wstore *w, int i, ork_dtype dt, const void *data) {
    const ork_weight_decl *d = &w->info->weights[i];
    int64_t rows = d->shape[0], cols = d->shape[1];
    void *tmp = NULL;
    if (dt != ORK_F32 && dt != ORK_BF16 && dt != ORK_F16) { /* fp8 via put, ...: widen first */
        if (!(tmp = malloc((size_t)(rows * cols) * sizeof(float) + 1))) return ORK_E_NOMEM;
        ork_status st = convert(data, dt, rows * cols, ORK_F32, tmp);
        if (st != ORK_OK) {
            free(tmp);
            return ORK_FAIL(st, "weight '%s': stored dtype %d cannot be converted", d->name, (int)dt);
        }
        data = tmp;
        dt = ORK_F32;
    }
    void *owned;
    uint8_t *buf = record_buf(w, i, &owned);
    if (!buf) { free(tmp); return ORK_E_NOMEM; }
    ork_stream_rec r = rec_of(w, i);
    ork_status st = w->qvt->quantize(w->qself, d->name, dt, data, rows, cols, 0, buf,
                                     r.scale_bytes ? (float *)(buf + (r.scale_offset - r.offset)) : NULL);
    free(tmp);
    /* a NaN/Inf weight is bad input (the plugin logged the line naming it) */
    if (st == ORK_E_NUMERIC) st = ORK_E_FORMAT;
    else if (st != ORK_OK) st = ORK_FAIL(st, "weight '%s': quantizing with %s failed", d->name, w->qname);
    if (st == ORK_OK) st = commit_quant(w, i, buf);
    free(owned);
    return st;
}

/* Host memory for weight i's stored (unquantized) values: its place in the
 * streamed region, or a malloc'd upload buffer of `bytes`. */
static void *stored_buf(ork_wstore *w, int i, size_t bytes) {
    if (is_streamed(w, i)) return streamed_at(w, i, w->rec[i].offset);
    return malloc(bytes + 1);
}

/* After stored_buf was filled (st: how that went): a streamed weight is
 * complete; a resident one is uploaded and its buffer freed. */
static ork_status stored_commit(ork_wstore *w, int i, void *buf, ork_status st) {
    if (is_streamed(w, i)) {
        if (st == ORK_OK) w->filled[i] = 1;
        return st;
    }
    if (st == ORK_OK) st = upload(w, i, buf);
    free(buf);
    return st;
}

static ork_status sink_put(const ork_weight_sink *s, const char *name, ork_dtype dt, const void *data) {
    ork_wstore *w = s->store;
    int i;
    ORK_TRY(lookup(s, name, &i));
    const ork_weight_decl *d = &w->info->weights[i];
    if (w->isq && w->isq[i]) return put_quant(w, i, dt, data);
    int64_t n = decl_numel(d);
    ork_dtype sdt = dt_for(w, d);
    if (!is_streamed(w, i) && dt == sdt && sdt != ORK_F32) /* as stored: uploaded straight from the source */
        return upload(w, i, data);                           /* (the F32 scan below is F32's alone) */
    void *buf = stored_buf(w, i, (size_t)n * ork_dtype_size(sdt));
    if (!buf) return ORK_E_NOMEM;
    ork_status st = convert(data, dt, n, sdt, buf);
    if (st == ORK_E_UNSUPPORTED) ORK_FAIL(st, "weight '%s': stored dtype %d cannot be converted", name, (int)dt);
    for (int64_t k = 0; st == ORK_OK && sdt == ORK_F32 && k < n; k++) {
        float x = ((float *)buf)[k];
        if (x != x || x - x != 0.0f) st = ORK_FAIL(ORK_E_FORMAT, "weight '%s' holds NaN or Inf at index %lld", name, (long long)k);
    }
    return stored_commit(w, i, buf, st);
}

static ork_status sink_put_quantized(const ork_weight_sink *s, const char *name, ork_dtype qdt, const void *q,
                                     const float *scales, int block) {
    ork_wstore *w = s->store;
    int i;
    ORK_TRY(lookup(s, name, &i));
    const ork_weight_decl *d = &w->info->weights[i];
    if (d->ndim != 2 || (qdt != ORK_F8_E4M3 && qdt != ORK_F8_E5M2))
        return ORK_FAIL(ORK_E_INVALID, "weight '%s': quantized storage needs a 2-D fp8 weight", name);
    int64_t rows = d->shape[0], cols = d->shape[1], n = rows * cols;
    if (block != 0 && block != 128)
        return ORK_FAIL(ORK_E_INVALID, "weight '%s': fp8 scale block %d is not 0 (per row) or 128", name, block);
    int64_t nb = block > 0 ? (cols + block - 1) / block : 1;
    const uint8_t *qb = q;
    for (int64_t k = 0; k < n; k++) { /* E4M3 NaN: 0x7F/0xFF; E5M2 Inf/NaN: exponent all ones */
        uint8_t m = qb[k] & 0x7F;
        if (qdt == ORK_F8_E4M3 ? m == 0x7F : m >= 0x7C)
            return ORK_FAIL(ORK_E_FORMAT, "weight '%s': %s in its fp8 data at [%lld, %lld]; weights must be finite",
                            name, qdt == ORK_F8_E4M3 || m > 0x7C ? "NaN" : "Inf", (long long)(k / cols),
                            (long long)(k % cols));
    }
    for (int64_t k = 0; k < rows * nb; k++)
        if (!(scales[k] - scales[k] == 0.0f))
            return ORK_FAIL(ORK_E_FORMAT, "weight '%s': its fp8 scale %lld is %s; scales must be finite", name,
                            (long long)k, scales[k] != scales[k] ? "NaN" : "Inf");
    if (w->isq && w->isq[i] && w->lay[i].qdtype == qdt) {
        /* stored as it is: the bytes untouched, the scales in the layout's form */
        int lb = w->lay[i].block;
        int64_t lnb = lb > 0 ? (cols + lb - 1) / lb : 1;
        /* same block mode: copied; per row -> 1x128: each row's scale repeated;
         * 1x128 -> per row: exact only when all blocks of each row agree */
        int exact = 1;
        if (block == 128 && lb == 0)
            for (int64_t r = 0; r < rows && exact; r++)
                for (int64_t c = 1; c < nb && exact; c++) exact = scales[r * nb + c] == scales[r * nb];
        if (exact && w->lay[i].n_scales == rows * lnb) {
            void *owned;
            uint8_t *buf = record_buf(w, i, &owned);
            if (!buf) return ORK_E_NOMEM;
            ork_stream_rec r = rec_of(w, i);
            memcpy(buf, q, (size_t)n);
            float *ls = (float *)(buf + (r.scale_offset - r.offset));
            for (int64_t rr = 0; rr < rows; rr++)
                for (int64_t c = 0; c < lnb; c++)
                    ls[rr * lnb + c] = scales[rr * nb + (block == lb ? c : 0)];
            ork_status st = commit_quant(w, i, buf);
            free(owned);
            return st;
        }
    }
    if (w->isq && w->isq[i] && !w->warned_refmt &&
        (w->lay[i].qdtype == ORK_F8_E4M3 || w->lay[i].qdtype == ORK_F8_E5M2)) {
        w->warned_refmt = 1;
        ORK_WARN("weight '%s' (and maybe others) is stored as %s in the checkpoint but model.qtype is %s: "
                 "re-quantized from its values (quantized twice; choose the checkpoint's format to avoid it)",
                 name, ork_dtype_name(qdt), w->qname);
    }
    float *f = malloc((size_t)n * sizeof *f);
    if (!f) return ORK_E_NOMEM;
    const uint8_t *b = q;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            float sc = scales[r * nb + (block > 0 ? c / block : 0)];
            f[r * cols + c] = ork_fp8_to_f32(b[r * cols + c], qdt) * sc;
        }
    ork_status st = sink_put(s, name, ORK_F32, f);
    free(f);
    return st;
}

static ork_status sink_put_random(const ork_weight_sink *s, const char *name, float stddev, uint64_t seed) {
    ork_wstore *w = s->store;
    int i;
    ORK_TRY(lookup(s, name, &i));
    const ork_weight_decl *d = &w->info->weights[i];
    int64_t n = decl_numel(d);
    /* a weight stored as F32/BF16 is generated straight into its stored form
     * (the streamed record, or the upload buffer): the same values and
     * rounding as through sink_put, without an F32 copy of 12e9 values */
    ork_dtype sdt = dt_for(w, d);
    int direct = !(w->isq && w->isq[i]) && (sdt == ORK_F32 || sdt == ORK_BF16);
    void *f = direct ? stored_buf(w, i, (size_t)n * ork_dtype_size(sdt)) : malloc((size_t)n * sizeof(float));
    if (!f) return ORK_E_NOMEM;
    /* a uniform ±sqrt(3)·std: PyTorch's default Linear init has this shape;
     * over all cores, the same values whatever their number */
    float bound = (float)(1.7320508075688772 * stddev);
    ork_rng_fill_sym_mt(seed, ORK_RNG_INIT, 0, f, direct && sdt == ORK_BF16, n, (double)bound);
    if (direct) return stored_commit(w, i, f, ORK_OK);
    ork_status st = sink_put(s, name, ORK_F32, f);
    free(f);
    return st;
}

ork_status ork_wstore_create(ork_alloc *a, const ork_backend *be, ork_kctx *k, const ork_model_info *info,
                             ork_dtype store_dt, ork_wstore **out) {
    return ork_wstore_create_ex(a, be, k, info, store_dt, NULL, out);
}

/* Coded blocks travel as pieces of ORK_STREAM_PIECE_BYTES (stream/streamer.h
 * says why); ORAKUL_STREAM_PIECE_MB sets another size, 0 whole blocks (the A/B). */
static size_t piece_bytes(void) {
    const char *e = getenv("ORAKUL_STREAM_PIECE_MB");
    if (!e || !*e) return ORK_STREAM_PIECE_BYTES;
    long mb = strtol(e, NULL, 10);
    return mb > 0 ? (size_t)mb << 20 : 0;
}

/* Records of the streamed blocks' weights and the streamer over them. */
static ork_status setup_stream(ork_wstore *w, const ork_wstore_stream *so) {
    const ork_model_info *info = w->info;
    int nb = info->n_blocks, n = info->n_weights, any = 0;
    for (int b = 0; b < nb; b++) any |= so->streamed[b] != 0;
    if (!any) return ORK_OK;
    w->rec = calloc((size_t)n + 1, sizeof *w->rec);
    w->blk_start = calloc((size_t)nb + 2, sizeof *w->blk_start);
    w->blk_w = calloc((size_t)n + 1, sizeof *w->blk_w);
    w->mapped = calloc((size_t)nb + 1, 1);
    size_t *bytes = calloc((size_t)nb + 1, sizeof *bytes);
    if (!w->rec || !w->blk_start || !w->blk_w || !w->mapped || !bytes) { free(bytes); return ORK_E_NOMEM; }
    for (int i = 0; i < n; i++) {
        int b = info->weights[i].block;
        if (b >= 0 && b < nb) w->blk_start[b + 1]++;
    }
    for (int b = 0; b < nb; b++) w->blk_start[b + 1] += w->blk_start[b];
    int *fill = calloc((size_t)nb + 1, sizeof *fill);
    if (!fill) { free(bytes); return ORK_E_NOMEM; }
    for (int i = 0; i < n; i++) {
        const ork_weight_decl *d = &info->weights[i];
        int b = d->block;
        if (b < 0 || b >= nb) continue;
        w->blk_w[w->blk_start[b] + fill[b]++] = i;
        if (!so->streamed[b]) continue;
        /* the stored bytes, then a quantized weight's F32 scales */
        size_t data, sc;
        stored_bytes(w, i, &data, &sc);
        ork_stream_rec_add(&bytes[b], data, sc, &w->rec[i]);
    }
    free(fill);
    ork_streamer_opts o = {.n_blocks = nb, .streamed = so->streamed, .block_bytes = bytes, .n_slots = so->n_slots,
                           .arena_bytes = so->arena_bytes, .event_base = 0, .compress = so->compress,
                           .nthreads = ork_numerics_threads(), .piece_bytes = piece_bytes()};
    ork_status st = ork_streamer_create(so->ce, w->alloc, &o, &w->st);
    free(bytes);
    return st;
}

ork_status ork_wstore_create_ex(ork_alloc *a, const ork_backend *be, ork_kctx *k, const ork_model_info *info,
                                ork_dtype store_dt, const ork_wstore_stream *so, ork_wstore **out) {
    return ork_wstore_create_quant(a, be, k, info, store_dt, so, NULL, out);
}

/* Layouts of the quantized weights (before the stream records are sized). */
static ork_status setup_quant(ork_wstore *w, const ork_wstore_quant *qz) {
    int n = w->info->n_weights;
    if (!qz->vt || !qz->vt->layout || !qz->vt->quantize || !qz->vt->dequantize)
        return ORK_FAIL(ORK_E_INVALID, "weight store: the quantizer %s lacks layout/quantize/dequantize",
                        qz->name ? qz->name : "?");
    w->qvt = qz->vt;
    w->qself = qz->self;
    w->qname = qz->name ? qz->name : "the quantizer";
    w->lay = calloc((size_t)n + 1, sizeof *w->lay);
    w->isq = calloc((size_t)n + 1, 1);
    w->qi = calloc((size_t)n + 1, sizeof *w->qi);
    w->qmem = calloc((size_t)n + 1, sizeof *w->qmem);
    if (!w->lay || !w->isq || !w->qi || !w->qmem) return ORK_E_NOMEM;
    for (int i = 0; i < n; i++) {
        const ork_weight_decl *d = &w->info->weights[i];
        if (!quantizable(w, d)) continue;
        ork_status st = w->qvt->layout(w->qself, d->shape[0], d->shape[1], &w->lay[i]);
        if (st != ORK_OK) return ORK_FAIL(st, "weight '%s': %s has no layout for it", d->name, w->qname);
        ork_dtype qd = w->lay[i].qdtype;
        if (qd != ORK_F8_E4M3 && qd != ORK_F8_E5M2 && qd != ORK_BF16 && qd != ORK_F32)
            return ORK_FAIL(ORK_E_UNSUPPORTED, "weight '%s': %s stores dtype %s, which the weight store does not take",
                            d->name, w->qname, ork_dtype_name(qd));
        w->isq[i] = 1;
    }
    return ORK_OK;
}

ork_status ork_wstore_create_quant(ork_alloc *a, const ork_backend *be, ork_kctx *k, const ork_model_info *info,
                                   ork_dtype store_dt, const ork_wstore_stream *so, const ork_wstore_quant *qz,
                                   ork_wstore **out) {
    ork_wstore *w = calloc(1, sizeof *w);
    if (!w) return ORK_E_NOMEM;
    w->alloc = a;
    w->be = be;
    w->k = k;
    w->info = info;
    w->store_dt = store_dt;
    int n = info->n_weights;
    w->t = calloc((size_t)n + 1, sizeof *w->t);
    w->filled = calloc((size_t)n + 1, 1);
    w->order = malloc(((size_t)n + 1) * sizeof *w->order);
    if (!w->t || !w->filled || !w->order) { ork_wstore_destroy(w); return ORK_E_NOMEM; }
    for (int i = 0; i < n; i++) w->order[i] = i;
    g_sort_ctx = w;
    qsort(w->order, (size_t)n, sizeof *w->order, cmp_name);
    g_sort_ctx = NULL;
    for (int i = 1; i < n; i++)
        if (!strcmp(info->weights[w->order[i]].name, info->weights[w->order[i - 1]].name)) {
            ork_status st = ORK_FAIL(ORK_E_INVALID, "model declared weight '%s' twice", info->weights[w->order[i]].name);
            ork_wstore_destroy(w);
            return st;
        }
    if (qz) {
        ork_status st = setup_quant(w, qz);
        if (st != ORK_OK) { ork_wstore_destroy(w); return st; }
    }
    if (so && so->streamed) {
        if (!so->ce) { ork_wstore_destroy(w); return ORK_FAIL(ORK_E_INVALID, "weight store: streaming needs a copy engine"); }
        ork_status st = setup_stream(w, so);
        if (st != ORK_OK) { ork_wstore_destroy(w); return st; }
    }
    for (int i = 0; i < n; i++) {
        const ork_weight_decl *d = &info->weights[i];
        ork_status st;
        if (w->isq && w->isq[i]) {
            ork_stream_rec r = rec_of(w, i);
            size_t nb = r.scale_offset + r.scale_bytes;
            if (!is_streamed(w, i)) st = ork_alloc_get(a, nb, "weights", &w->qmem[i]);
            else st = ORK_OK;
            if (st == ORK_OK)
                st = ork_tensor_wrap(be->device, w->lay[i].qdtype, d->ndim, d->shape, w->qmem[i], d->name, &w->t[i]);
            if (st != ORK_OK) { ork_wstore_destroy(w); return st; }
            if (w->lay[i].n_scales > 0 || w->lay[i].qdtype != w->store_dt) {
                ork_qinfo *qi = &w->qi[i];
                qi->scales = w->qmem[i] && r.scale_bytes ? (const float *)((uint8_t *)w->qmem[i] + r.scale_offset) : NULL;
                qi->n_scales = w->lay[i].n_scales;
                qi->block = w->lay[i].block;
                qi->dequantize = w->qvt->dequantize;
                qi->ctx = w->qself;
                w->t[i]->q = qi;
            }
            w->bytes += nb;
            w->quant_bytes += r.data_bytes + r.scale_bytes;
            w->n_quant++;
            if (!is_streamed(w, i)) w->resident_bytes += nb;
        } else {
            st = is_streamed(w, i) ? ork_tensor_wrap(be->device, dt_for(w, d), d->ndim, d->shape, NULL, d->name, &w->t[i])
                                   : ork_tensor_new(a, "weights", dt_for(w, d), d->ndim, d->shape, 0, &w->t[i]);
            if (st != ORK_OK) { ork_wstore_destroy(w); return st; }
            w->bytes += ork_tensor_nbytes(w->t[i]);
            if (!is_streamed(w, i)) w->resident_bytes += ork_tensor_nbytes(w->t[i]);
        }
        w->t[i]->name = d->name;
        w->t[i]->flags |= ORK_TF_WEIGHT;
    }
    w->sink.abi = (ork_abi)ORK_ABI_INIT(ork_weight_sink);
    w->sink.store = w;
    w->sink.put = sink_put;
    w->sink.put_quantized = sink_put_quantized;
    w->sink.put_random = sink_put_random;
    *out = w;
    return ORK_OK;
}

void ork_wstore_destroy(ork_wstore *w) {
    if (!w) return;
    if (w->t)
        for (int i = 0; i < w->info->n_weights; i++) ork_tensor_free(w->t[i]);
    if (w->qmem)
        for (int i = 0; i < w->info->n_weights; i++)
            if (w->qmem[i]) ork_alloc_put(w->alloc, w->qmem[i]);
    free(w->lay);
    free(w->isq);
    free(w->qi);
    free(w->qmem);
    free(w->t);
    free(w->filled);
    free(w->order);
    ork_streamer_destroy(w->st);
    free(w->rec);
    free(w->blk_start);
    free(w->blk_w);
    free(w->mapped);
    free(w);
}

const ork_weight_sink *ork_wstore_sink(ork_wstore *w) { return &w->sink; }

ork_status ork_wstore_check_complete(const ork_wstore *w) {
    for (int i = 0; i < w->info->n_weights; i++)
        if (!w->filled[i]) return ORK_FAIL(ORK_E_FORMAT, "weight '%s' was never loaded", w->info->weights[i].name);
    return ORK_OK;
}

static ork_status weight_fn(void *ctx, ork_graph *g, const char *name, ork_tensor **out) {
    ork_wstore *w = ctx;
    (void)g;
    int i = find_index(w, name);
    if (i < 0) return ORK_FAIL(ORK_E_INVALID, "unknown weight '%s'", name);
    if (is_streamed(w, i) && !w->mapped[w->info->weights[i].block])
        return ORK_FAIL(ORK_E_INTERNAL, "weight '%s' of streamed block %d used outside that block's run", name,
                        w->info->weights[i].block);
    *out = w->t[i];
    return ORK_OK;
}

static ork_status store_pass_begin(void *ctx, const int *order, int n) {
    ork_wstore *w = ctx;
    return w->st ? ork_streamer_pass_begin(w->st, order, n) : ORK_OK;
}

static ork_status store_enter(void *ctx, int b) {
    ork_wstore *w = ctx;
    if (!w->st) return ORK_OK;
    void *dev;
    ORK_TRY(ork_streamer_enter(w->st, b, &dev)); /* a resident block: NULL, the lane trace's mark only */
    if (!dev) return ORK_OK;
    for (int q = w->blk_start[b]; q < w->blk_start[b + 1]; q++) {
        int i = w->blk_w[q];
        w->t[i]->base = (uint8_t *)dev + w->rec[i].offset;
        w->t[i]->offset = 0;
        if (w->t[i]->q) w->qi[i].scales = w->rec[i].scale_bytes ? (const float *)((uint8_t *)dev + w->rec[i].scale_offset) : NULL;
    }
    w->mapped[b] = 1;
    return ORK_OK;
}

static ork_status store_leave(void *ctx, int b) {
    ork_wstore *w = ctx;
    if (!w->st || !ork_streamer_is_streamed(w->st, b)) return ORK_OK;
    ORK_TRY(ork_streamer_leave(w->st, b));
    /* the headers keep pointing at the slot while a merged visit may come back;
     * lookups are refused until the next enter */
    w->mapped[b] = 0;
    return ORK_OK;
}

static ork_status store_pass_end(void *ctx) {
    ork_wstore *w = ctx;
    return w->st ? ork_streamer_pass_end(w->st) : ORK_OK;
}

void ork_wstore_hooks(ork_wstore *w, ork_block_hooks *out) {
    memset(out, 0, sizeof *out);
    out->ctx = w;
    out->streaming = w->st != NULL;
    out->pass_begin = store_pass_begin;
    out->enter = store_enter;
    out->leave = store_leave;
    out->pass_end = store_pass_end;
}

ork_streamer *ork_wstore_streamer(ork_wstore *w) { return w->st; }
size_t ork_wstore_resident_bytes(const ork_wstore *w) { return w->resident_bytes; }
size_t ork_wstore_quant_bytes(const ork_wstore *w, int *count) {
    if (count) *count = w->n_quant;
    return w->quant_bytes;
}

void ork_wstore_attach(ork_wstore *w, ork_graph *g) { ork_graph_set_weight_fn(g, weight_fn, w); }
int ork_wstore_count(const ork_wstore *w) { return w->info->n_weights; }
ork_tensor *ork_wstore_at(ork_wstore *w, int i) { return w->t[i]; }
const ork_weight_decl *ork_wstore_decl(const ork_wstore *w, int i) { return &w->info->weights[i]; }
ork_tensor *ork_wstore_find(ork_wstore *w, const char *name) {
    int i = find_index(w, name);
    return i < 0 ? NULL : w->t[i];
}
size_t ork_wstore_bytes(const ork_wstore *w) { return w->bytes; }
