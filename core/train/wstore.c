/* train/wstore.c — see wstore.h. */
#include "train/wstore.h"

#include "numerics/fp8.h"
#include "numerics/half.h"
#include "train/rng.h"
#include "util/log.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    return (d->flags & ORK_WEIGHT_NORM) ? ORK_F32 : w->store_dt;
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

static ork_status sink_put(const ork_weight_sink *s, const char *name, ork_dtype dt, const void *data) {
    ork_wstore *w = s->store;
    int i;
    ORK_TRY(lookup(s, name, &i));
    const ork_weight_decl *d = &w->info->weights[i];
    int64_t n = decl_numel(d);
    ork_dtype sdt = dt_for(w, d);
    int streamed = is_streamed(w, i);
    void *buf = streamed ? (uint8_t *)ork_streamer_host(w->st, d->block) + w->rec[i].offset
                         : malloc((size_t)n * ork_dtype_size(sdt) + 1);
    if (!buf) return ORK_E_NOMEM;
    ork_status st = convert(data, dt, n, sdt, buf);
    if (st == ORK_E_UNSUPPORTED) ORK_FAIL(st, "weight '%s': stored dtype %d cannot be converted", name, (int)dt);
    for (int64_t k = 0; st == ORK_OK && sdt == ORK_F32 && k < n; k++) {
        float x = ((float *)buf)[k];
        if (x != x || x - x != 0.0f) st = ORK_FAIL(ORK_E_NUMERIC, "weight '%s' holds NaN or Inf at index %lld", name, (long long)k);
    }
    if (streamed) {
        if (st == ORK_OK) w->filled[i] = 1;
        return st;
    }
    if (st == ORK_OK) st = upload(w, i, buf);
    free(buf);
    return st;
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
    int64_t nb = block > 0 ? (cols + block - 1) / block : 1;
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

/* Random fill, split over threads. Value k comes from Philox counter k/2 (two
 * uniforms per counter), so the result does not depend on the thread count. */
typedef struct rand_job {
    float *f;
    int64_t begin, end;
    uint64_t seed;
    float bound;
} rand_job;

static void *rand_fill(void *arg) {
    rand_job *rj = arg;
    ork_rng r;
    ork_rng_init(&r, rj->seed, ORK_RNG_INIT);
    ork_rng_seek(&r, (uint64_t)rj->begin / 2);
    for (int64_t k = rj->begin; k < rj->end; k++) rj->f[k] = (float)((2.0 * ork_rng_uniform(&r) - 1.0) * rj->bound);
    return NULL;
}

static ork_status sink_put_random(const ork_weight_sink *s, const char *name, float stddev, uint64_t seed) {
    ork_wstore *w = s->store;
    int i;
    ORK_TRY(lookup(s, name, &i));
    int64_t n = decl_numel(&w->info->weights[i]);
    float *f = malloc((size_t)n * sizeof *f);
    if (!f) return ORK_E_NOMEM;
    /* a uniform ±sqrt(3)·std: PyTorch's default Linear init has this shape */
    float bound = (float)(1.7320508075688772 * stddev);
    enum { MAXT = 32 };
    long nt = sysconf(_SC_NPROCESSORS_ONLN);
    int T = n < (1 << 20) ? 1 : (int)(nt < 1 ? 1 : nt > MAXT ? MAXT : nt);
    rand_job jobs[MAXT];
    pthread_t th[MAXT];
    int64_t chunk = ((n + T - 1) / T + 1) & ~(int64_t)1; /* even starts */
    int started = 0;
    for (int t = 0; t < T; t++) {
        jobs[t] = (rand_job){f, t * chunk, (t + 1) * chunk < n ? (t + 1) * chunk : n, seed, bound};
        if (jobs[t].begin >= n) break;
        if (t > 0 && pthread_create(&th[t], NULL, rand_fill, &jobs[t]) == 0) { started |= 1 << t; continue; }
        if (t > 0) rand_fill(&jobs[t]);
    }
    rand_fill(&jobs[0]);
    for (int t = 1; t < T; t++)
        if (started & (1 << t)) pthread_join(th[t], NULL);
    ork_status st = sink_put(s, name, ORK_F32, f);
    free(f);
    return st;
}

ork_status ork_wstore_create(ork_alloc *a, const ork_backend *be, ork_kctx *k, const ork_model_info *info,
                             ork_dtype store_dt, ork_wstore **out) {
    return ork_wstore_create_ex(a, be, k, info, store_dt, NULL, out);
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
        /* the stored bytes; fp8 weights will add their scales here (scale_bytes) */
        ork_stream_rec_add(&bytes[b], (size_t)decl_numel(d) * ork_dtype_size(dt_for(w, d)), 0, &w->rec[i]);
    }
    free(fill);
    ork_streamer_opts o = {.n_blocks = nb, .streamed = so->streamed, .block_bytes = bytes, .n_slots = so->n_slots,
                           .arena_bytes = so->arena_bytes, .event_base = 0};
    ork_status st = ork_streamer_create(so->ce, w->alloc, &o, &w->st);
    free(bytes);
    return st;
}

ork_status ork_wstore_create_ex(ork_alloc *a, const ork_backend *be, ork_kctx *k, const ork_model_info *info,
                                ork_dtype store_dt, const ork_wstore_stream *so, ork_wstore **out) {
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
    if (so && so->streamed) {
        if (!so->ce) { ork_wstore_destroy(w); return ORK_FAIL(ORK_E_INVALID, "weight store: streaming needs a copy engine"); }
        ork_status st = setup_stream(w, so);
        if (st != ORK_OK) { ork_wstore_destroy(w); return st; }
    }
    for (int i = 0; i < n; i++) {
        const ork_weight_decl *d = &info->weights[i];
        ork_status st = is_streamed(w, i) ? ork_tensor_wrap(be->device, dt_for(w, d), d->ndim, d->shape, NULL, d->name, &w->t[i])
                                          : ork_tensor_new(a, "weights", dt_for(w, d), d->ndim, d->shape, 0, &w->t[i]);
        if (st != ORK_OK) { ork_wstore_destroy(w); return st; }
        w->t[i]->name = d->name;
        w->t[i]->flags |= ORK_TF_WEIGHT;
        w->bytes += ork_tensor_nbytes(w->t[i]);
        if (!is_streamed(w, i)) w->resident_bytes += ork_tensor_nbytes(w->t[i]);
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

static ork_status hk_pass_begin(void *ctx, const int *order, int n) {
    ork_wstore *w = ctx;
    return w->st ? ork_streamer_pass_begin(w->st, order, n) : ORK_OK;
}

static ork_status hk_enter(void *ctx, int b) {
    ork_wstore *w = ctx;
    if (!w->st || !ork_streamer_is_streamed(w->st, b)) return ORK_OK;
    void *dev;
    ORK_TRY(ork_streamer_enter(w->st, b, &dev));
    for (int q = w->blk_start[b]; q < w->blk_start[b + 1]; q++) {
        int i = w->blk_w[q];
        w->t[i]->base = (uint8_t *)dev + w->rec[i].offset;
        w->t[i]->offset = 0;
    }
    w->mapped[b] = 1;
    return ORK_OK;
}

static ork_status hk_leave(void *ctx, int b) {
    ork_wstore *w = ctx;
    if (!w->st || !ork_streamer_is_streamed(w->st, b)) return ORK_OK;
    ORK_TRY(ork_streamer_leave(w->st, b));
    /* the headers keep pointing at the slot while a merged visit may come back;
     * lookups are refused until the next enter */
    w->mapped[b] = 0;
    return ORK_OK;
}

static ork_status hk_pass_end(void *ctx) {
    ork_wstore *w = ctx;
    return w->st ? ork_streamer_pass_end(w->st) : ORK_OK;
}

void ork_wstore_hooks(ork_wstore *w, ork_block_hooks *out) {
    memset(out, 0, sizeof *out);
    out->ctx = w;
    out->streaming = w->st != NULL;
    out->pass_begin = hk_pass_begin;
    out->enter = hk_enter;
    out->leave = hk_leave;
    out->pass_end = hk_pass_end;
}

ork_streamer *ork_wstore_streamer(ork_wstore *w) { return w->st; }
size_t ork_wstore_resident_bytes(const ork_wstore *w) { return w->resident_bytes; }

void ork_wstore_attach(ork_wstore *w, ork_graph *g) { ork_graph_set_weight_fn(g, weight_fn, w); }
int ork_wstore_count(const ork_wstore *w) { return w->info->n_weights; }
ork_tensor *ork_wstore_at(ork_wstore *w, int i) { return w->t[i]; }
const ork_weight_decl *ork_wstore_decl(const ork_wstore *w, int i) { return &w->info->weights[i]; }
ork_tensor *ork_wstore_find(ork_wstore *w, const char *name) {
    int i = find_index(w, name);
    return i < 0 ? NULL : w->t[i];
}
size_t ork_wstore_bytes(const ork_wstore *w) { return w->bytes; }
