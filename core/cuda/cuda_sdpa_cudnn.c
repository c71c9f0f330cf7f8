/* cuda/cuda_sdpa_cudnn.c — fused SDPA forward/backward through cuDNN 9's backend
 * graph API (one CUDNN_BACKEND_OPERATION_SDPA_FWD / _BWD node per graph, cuDNN
 * >= 9.13.1 / a version whose graph library knows SDPA_BWD: not 9.19, yes 9.26),
 * loaded with dlopen("libcudnn.so.9") at first use so that a
 * machine without cuDNN still runs (the caller falls back to cuda_attn).
 * See cuda_sdpa_cudnn.h for the contract.
 *
 * Owns (process-wide, per device, freed by ork_cudnn_sdpa_shutdown): the dlopen
 * handle and its entry points, one cudnnHandle_t per device, and a small cache
 * of execution plans keyed by (device, direction, B, H, Lq, Lk, D), including
 * the shapes that have no engine. Not thread-safe (one graph, one thread).
 * Built without cuDNN headers (ORK_HAVE_CUDNN undefined) every entry reports
 * "unavailable". */
#include "cuda/cuda_sdpa_cudnn.h"
#include "cuda/cuda_ctx.h"
#include "util/log.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ork_cudnn_sdpa_eligible(const ork_cudnn_sdpa_args *a) {
    return a->causal == 0 && a->kmask == NULL && a->H == a->Hkv && (a->D == 64 || a->D == 128) &&
           a->B > 0 && a->H > 0 && a->Lq > 0 && a->Lk > 0;
}

#ifndef ORK_HAVE_CUDNN

int ork_cudnn_sdpa_available(void) { return 0; }
size_t ork_cudnn_sdpa_ws(int device, const ork_cudnn_sdpa_args *a, int backward, int *ok) {
    (void)device; (void)a; (void)backward;
    *ok = 0;
    return 0;
}
ork_status ork_cudnn_sdpa_fwd(int device, const ork_cudnn_sdpa_args *a, const void *q, const void *k,
                              const void *v, void *y, float *lse, void *ws, void *stream) {
    (void)device; (void)a; (void)q; (void)k; (void)v; (void)y; (void)lse; (void)ws; (void)stream;
    return ORK_E_UNSUPPORTED;
}
ork_status ork_cudnn_sdpa_bwd(int device, const ork_cudnn_sdpa_args *a, const void *q, const void *k,
                              const void *v, const void *y, const float *lse, const void *dy, void *dq,
                              void *dk, void *dv, void *ws, void *stream) {
    (void)device; (void)a; (void)q; (void)k; (void)v; (void)y; (void)lse; (void)dy; (void)dq; (void)dk;
    (void)dv; (void)ws; (void)stream;
    return ORK_E_UNSUPPORTED;
}
long ork_cudnn_sdpa_version(void) { return 0; }
int ork_cudnn_sdpa_has_bwd(void) { return 0; }
void ork_cudnn_sdpa_shutdown(void) {}

#else /* ORK_HAVE_CUDNN */

#include <cudnn_graph.h>
#include <dlfcn.h>

/* Attribute and type values the library headers of older cuDNN 9 lack or mark
 * deprecated; the numbers are the ABI (cudnn_graph.h of 9.19). */
#define A_PLAN_HANDLE ((cudnnBackendAttributeName_t)400)
#define A_GRAPH_HANDLE ((cudnnBackendAttributeName_t)800)
#define T_SDPA_FWD ((cudnnBackendDescriptorType_t)41)
#define T_SDPA_BWD ((cudnnBackendDescriptorType_t)43)
enum {
    A_FWD_Q = 2800, A_FWD_K, A_FWD_V, A_FWD_O, A_FWD_STATS, A_FWD_SCALE,
    A_BWD_Q = 2851, A_BWD_K, A_BWD_V, A_BWD_O, A_BWD_STATS, A_BWD_SCALE, A_BWD_SEQQ, A_BWD_SEQKV,
    A_BWD_DQ, A_BWD_DK, A_BWD_DV, A_BWD_DO,
};

/* Entry points from libcudnn.so.9. */
static struct {
    int tried, ok;
    int bwd;       /* backward plans may be tried now (cleared when one fails at graph finalize) */
    int bwd_graph; /* the load-time probe built an SDPA_BWD operation graph (fixed after load) */
    void *lib;
    long version;
    size_t (*GetVersion)(void);
    const char *(*GetErrorString)(cudnnStatus_t);
    void (*GetLastErrorString)(char *, size_t);
    cudnnStatus_t (*Create)(cudnnHandle_t *);
    cudnnStatus_t (*Destroy)(cudnnHandle_t);
    cudnnStatus_t (*SetStream)(cudnnHandle_t, cudaStream_t);
    cudnnStatus_t (*BCreate)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t *);
    cudnnStatus_t (*BDestroy)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*BSet)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t, cudnnBackendAttributeType_t,
                          int64_t, const void *);
    cudnnStatus_t (*BGet)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t, cudnnBackendAttributeType_t,
                          int64_t, int64_t *, void *);
    cudnnStatus_t (*BFinalize)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*BExecute)(cudnnHandle_t, cudnnBackendDescriptor_t, cudnnBackendDescriptor_t);
} L;

#define ORK_MAX_DEV 16
#define ORK_SDPA_PLANS 64
#define ORK_SDPA_KEEP 32 /* graph: <= 13, heuristics + configs: 9 */

typedef struct sdpa_plan {
    int used, ok, device, backward;
    int64_t B, H, Lq, Lk, D;
    cudnnBackendDescriptor_t plan;
    cudnnBackendDescriptor_t keep[ORK_SDPA_KEEP]; /* descriptors the plan was built from */
    int nkeep;
    size_t ws;
} sdpa_plan;

static cudnnHandle_t g_handle[ORK_MAX_DEV];
static sdpa_plan g_plans[ORK_SDPA_PLANS];
static int g_next;

static char g_why[640]; /* the last failure, for the once-per-shape fallback line */
static void probe_bwd(void);

static void *sym(const char *name) {
    void *p = dlsym(L.lib, name);
    if (!p) ORK_WARN("cudnn sdpa: libcudnn.so.9 lacks %s", name);
    return p;
}

int ork_cudnn_sdpa_available(void) {
    if (L.tried) return L.ok;
    L.tried = 1;
    const char *env = getenv("ORK_CUDNN_SDPA");
    if (!env || env[0] != '1') { /* opt-in until the path has run on a GPU (docs/DECISIONS.md) */
        ORK_DEBUG("attention: cuDNN SDPA off (ORK_CUDNN_SDPA=1 turns it on); using our flash kernels");
        return 0;
    }
    const char *lib = getenv("ORK_CUDNN_LIB");
    if (!lib || !lib[0]) lib = "libcudnn.so.9";
    L.lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!L.lib) {
        ORK_INFO("attention: %s not loadable (%s); using our flash kernels", lib, dlerror());
        return 0;
    }
    *(void **)&L.GetVersion = sym("cudnnGetVersion");
    *(void **)&L.GetErrorString = sym("cudnnGetErrorString");
    *(void **)&L.GetLastErrorString = sym("cudnnGetLastErrorString");
    *(void **)&L.Create = sym("cudnnCreate");
    *(void **)&L.Destroy = sym("cudnnDestroy");
    *(void **)&L.SetStream = sym("cudnnSetStream");
    *(void **)&L.BCreate = sym("cudnnBackendCreateDescriptor");
    *(void **)&L.BDestroy = sym("cudnnBackendDestroyDescriptor");
    *(void **)&L.BSet = sym("cudnnBackendSetAttribute");
    *(void **)&L.BGet = sym("cudnnBackendGetAttribute");
    *(void **)&L.BFinalize = sym("cudnnBackendFinalize");
    *(void **)&L.BExecute = sym("cudnnBackendExecute");
    if (!L.GetVersion || !L.GetErrorString || !L.GetLastErrorString || !L.Create || !L.Destroy ||
        !L.SetStream || !L.BCreate || !L.BDestroy || !L.BSet || !L.BGet || !L.BFinalize || !L.BExecute) {
        dlclose(L.lib);
        L.lib = NULL;
        return 0;
    }
    L.version = (long)L.GetVersion();
    if (L.version < 91301) {
        ORK_INFO("attention: cuDNN %ld (%s) < 9.13.1 has no SDPA node; using our flash kernels", L.version, lib);
        dlclose(L.lib);
        L.lib = NULL;
        return 0;
    }
    L.ok = 1;
    if (L.version >= 91700) {
        probe_bwd(); /* host only: sets L.bwd / L.bwd_graph, g_why on failure */
        if (L.bwd)
            ORK_INFO("attention: cuDNN %ld loaded from %s: fused SDPA forward and backward for non-causal, "
                     "unmasked, D 64/128",
                     L.version, lib);
        else
            ORK_INFO("attention: cuDNN %ld loaded from %s: fused SDPA forward for non-causal, unmasked, D 64/128; "
                     "backward: our flash kernel (this cuDNN cannot build an SDPA_BWD operation graph: %s)",
                     L.version, lib, g_why);
    } else {
        ORK_INFO("attention: cuDNN %ld loaded from %s: fused SDPA forward for non-causal, unmasked, D 64/128 "
                 "(backward needs cuDNN >= 9.17: our kernel)",
                 L.version, lib);
    }
    return 1;
}

long ork_cudnn_sdpa_version(void) { return L.ok ? L.version : 0; }
int ork_cudnn_sdpa_has_bwd(void) { return L.ok && L.bwd_graph; }

/* ---- descriptor helpers: on failure they log one line naming the step ---- */

static int cfail(cudnnStatus_t st, const char *what) {
    char buf[512] = "";
    L.GetLastErrorString(buf, sizeof buf);
    snprintf(g_why, sizeof g_why, "%s: %s%s%.480s", what, L.GetErrorString(st), buf[0] ? ": " : "", buf);
    ORK_DEBUG("cudnn sdpa: %s", g_why);
    return 1;
}
#define CK(expr, what) do { cudnnStatus_t st_ = (expr); if (st_ != CUDNN_STATUS_SUCCESS) { cfail(st_, what); goto fail; } } while (0)

/* Builder: every descriptor made goes into keep[] so one loop frees them all. */
typedef struct bld {
    cudnnBackendDescriptor_t d[ORK_SDPA_KEEP];
    int n;
} bld;

static cudnnBackendDescriptor_t mkdesc(bld *b, cudnnBackendDescriptorType_t t) {
    cudnnBackendDescriptor_t d = NULL;
    if (b->n >= ORK_SDPA_KEEP) return NULL;
    cudnnStatus_t st = L.BCreate(t, &d);
    if (st != CUDNN_STATUS_SUCCESS) { cfail(st, "create descriptor"); return NULL; }
    b->d[b->n++] = d;
    return d;
}
static void bld_free(bld *b) {
    for (int i = b->n - 1; i >= 0; i--) L.BDestroy(b->d[i]);
    b->n = 0;
}

/* A finalized non-virtual tensor: dims/strides given, 16-byte aligned. A failure
 * names the tensor and the step ("tensor dO (uid 7) finalize: ..."). */
static cudnnBackendDescriptor_t tensor(bld *b, const char *name, int64_t uid, cudnnDataType_t dt,
                                       const int64_t dims[4], const int64_t strides[4], int by_value) {
    cudnnBackendDescriptor_t t = mkdesc(b, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    if (!t) return NULL;
    int64_t align = 16;
    bool virt = false, byv = true;
    char w[96];
    const char *step = "dtype";
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
#define TSET(stp, expr) do { step = (stp); if ((st = (expr)) != CUDNN_STATUS_SUCCESS) goto fail; } while (0)
    TSET("dtype", L.BSet(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt));
    TSET("dims", L.BSet(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims));
    TSET("strides", L.BSet(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides));
    TSET("uid", L.BSet(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
    TSET("alignment", L.BSet(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
    TSET("virtual", L.BSet(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt));
    if (by_value) TSET("by-value", L.BSet(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &byv));
    TSET("finalize", L.BFinalize(t));
#undef TSET
    return t;
fail:
    snprintf(w, sizeof w, "tensor %s (uid %lld) %s", name, (long long)uid, step);
    cfail(st, w);
    return NULL;
}

static int set_desc(cudnnBackendDescriptor_t op, int attr, cudnnBackendDescriptor_t d, const char *what) {
    if (!d) return 1;
    cudnnStatus_t st = L.BSet(op, (cudnnBackendAttributeName_t)attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d);
    return st == CUDNN_STATUS_SUCCESS ? 0 : cfail(st, what);
}

enum { U_Q = 1, U_K, U_V, U_O, U_STATS, U_SCALE, U_DO, U_DQ, U_DK, U_DV };

static cudnnHandle_t handle_for(int device) {
    if (device < 0 || device >= ORK_MAX_DEV) return NULL;
    if (!g_handle[device]) {
        cudnnStatus_t st = L.Create(&g_handle[device]);
        if (st != CUDNN_STATUS_SUCCESS) { cfail(st, "cudnnCreate"); g_handle[device] = NULL; }
    }
    return g_handle[device];
}

/* The operation graph of one SDPA node (fwd: Q K V -> O Stats; bwd: Q K V O Stats dO
 * -> dQ dK dV; scale by value), every descriptor kept in b. h may be NULL: graph
 * finalize needs no handle in cuDNN 9 (the attribute is deprecated), which is what
 * lets the load-time probe run without a device. Returns G_OK, G_DESC (a tensor or
 * the operation failed: g_why names which) or G_GRAPH (operation graph finalize). */
enum { G_OK = 0, G_DESC = 1, G_GRAPH = 2 };
static int build_graph(bld *b, int backward, int64_t B, int64_t H, int64_t Lq, int64_t Lk, int64_t D,
                       cudnnHandle_t h, cudnnBackendDescriptor_t *graph_out) {
    const int64_t dq_[4] = {B, H, Lq, D}, sq_[4] = {H * Lq * D, Lq * D, D, 1};
    const int64_t dk_[4] = {B, H, Lk, D}, sk_[4] = {H * Lk * D, Lk * D, D, 1};
    /* Stats: (B, H, Lq, 1) F32 packed = our lse (B, H, Lq); the same descriptor in
     * both directions, so cuDNN's forward Stats feeds its backward unchanged. */
    const int64_t dl_[4] = {B, H, Lq, 1}, sl_[4] = {H * Lq, Lq, 1, 1};
    const int64_t d1[4] = {1, 1, 1, 1};
    const cudnnDataType_t bf = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
    const char *dir = backward ? "SDPA_BWD" : "SDPA_FWD";
    char w[96];
    cudnnBackendDescriptor_t q = tensor(b, "Q", U_Q, bf, dq_, sq_, 0), k = tensor(b, "K", U_K, bf, dk_, sk_, 0),
                             v = tensor(b, "V", U_V, bf, dk_, sk_, 0), o = tensor(b, "O", U_O, bf, dq_, sq_, 0),
                             st = tensor(b, "Stats", U_STATS, f32, dl_, sl_, 0),
                             sc = tensor(b, "scale", U_SCALE, f32, d1, d1, 1);
    cudnnBackendDescriptor_t op = NULL, graph = NULL;
    if (!q || !k || !v || !o || !st || !sc) return G_DESC;
    if (!backward) {
        op = mkdesc(b, T_SDPA_FWD);
        if (!op || set_desc(op, A_FWD_Q, q, "SDPA_FWD set Q") || set_desc(op, A_FWD_K, k, "SDPA_FWD set K") ||
            set_desc(op, A_FWD_V, v, "SDPA_FWD set V") || set_desc(op, A_FWD_O, o, "SDPA_FWD set O") ||
            set_desc(op, A_FWD_STATS, st, "SDPA_FWD set Stats") || set_desc(op, A_FWD_SCALE, sc, "SDPA_FWD set scale"))
            return G_DESC;
    } else {
        /* dQ dK dV: same shapes and packed strides as Q K V; dO as O */
        cudnnBackendDescriptor_t dO = tensor(b, "dO", U_DO, bf, dq_, sq_, 0),
                                 dQ = tensor(b, "dQ", U_DQ, bf, dq_, sq_, 0),
                                 dK = tensor(b, "dK", U_DK, bf, dk_, sk_, 0),
                                 dV = tensor(b, "dV", U_DV, bf, dk_, sk_, 0);
        if (!dO || !dQ || !dK || !dV) return G_DESC;
        op = mkdesc(b, T_SDPA_BWD);
        if (!op || set_desc(op, A_BWD_Q, q, "SDPA_BWD set Q") || set_desc(op, A_BWD_K, k, "SDPA_BWD set K") ||
            set_desc(op, A_BWD_V, v, "SDPA_BWD set V") || set_desc(op, A_BWD_O, o, "SDPA_BWD set O") ||
            set_desc(op, A_BWD_STATS, st, "SDPA_BWD set Stats") || set_desc(op, A_BWD_SCALE, sc, "SDPA_BWD set scale") ||
            set_desc(op, A_BWD_DO, dO, "SDPA_BWD set dO") || set_desc(op, A_BWD_DQ, dQ, "SDPA_BWD set dQ") ||
            set_desc(op, A_BWD_DK, dK, "SDPA_BWD set dK") || set_desc(op, A_BWD_DV, dV, "SDPA_BWD set dV"))
            return G_DESC;
    }
    snprintf(w, sizeof w, "%s operation finalize", dir);
    CK(L.BFinalize(op), w);
    graph = mkdesc(b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    if (!graph) return G_DESC;
    snprintf(w, sizeof w, "%s operation graph: set ops", dir);
    CK(L.BSet(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op), w);
    if (h) {
        snprintf(w, sizeof w, "%s operation graph: set handle", dir);
        CK(L.BSet(graph, A_GRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h), w);
    }
    snprintf(w, sizeof w, "%s operation graph finalize", dir);
    {
        cudnnStatus_t s = L.BFinalize(graph);
        if (s != CUDNN_STATUS_SUCCESS) { cfail(s, w); return G_GRAPH; }
    }
    *graph_out = graph;
    return G_OK;
fail:
    return G_DESC;
}

/* Load-time check that this library builds an SDPA_BWD operation graph at all, on
 * the host (no handle, no device): cuDNN 9.17-9.19 accept and finalize the
 * SDPA_BWD operation but their graph library has no node for it, so operation
 * graph finalize fails (CUDNN_STATUS_BAD_PARAM "outputGraph.buildDAG()"); 9.26
 * builds the same descriptors. Engines for the shape are still asked per plan. */
static void probe_bwd(void) {
    bld b = {{0}, 0};
    cudnnBackendDescriptor_t graph = NULL;
    g_why[0] = 0;
    int r = build_graph(&b, 1, 1, 1, 128, 128, 128, NULL, &graph);
    bld_free(&b);
    L.bwd = L.bwd_graph = r == G_OK;
    if (r == G_GRAPH) {
        char why[sizeof g_why];
        snprintf(why, sizeof why, "%.500s; its graph library has no backward SDPA node (cuDNN 9.19 has none, "
                 "9.26 has one)", g_why);
        memcpy(g_why, why, sizeof g_why);
    }
}

/* The graph (build_graph), then the first engine config (heuristic modes A, then
 * FALLBACK) whose execution plan finalizes. A backward graph that does not finalize
 * turns the cuDNN backward off for the process (the failure is structural, not
 * shape-dependent: cuDNN 9.19 has no graph node for SDPA_BWD). */
static int build_plan(sdpa_plan *p, cudnnHandle_t h) {
    bld b = {{0}, 0};
    const int64_t B = p->B, H = p->H, Lq = p->Lq, Lk = p->Lk, D = p->D;
    cudnnBackendDescriptor_t graph = NULL, heur = NULL;
    cudnnBackendDescriptor_t cfg[8] = {0};
    int g = build_graph(&b, p->backward, B, H, Lq, Lk, D, h, &graph);
    if (g != G_OK) {
        if (g == G_GRAPH && p->backward) L.bwd = 0;
        goto fail;
    }

    const cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    for (int m = 0; m < 2; m++) {
        bld hb = {{0}, 0}; /* per-mode heuristics and configs; the chosen config moves to b */
        heur = mkdesc(&hb, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
        int64_t n = 0;
        if (!heur) { bld_free(&hb); goto fail; }
        if (L.BSet(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph) ||
            L.BSet(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[m])) {
            bld_free(&hb);
            continue;
        }
        const char *mname = m == 0 ? "A" : "FALLBACK";
        char w[96];
        cudnnStatus_t s = L.BFinalize(heur);
        snprintf(w, sizeof w, "engine heuristics mode %s finalize", mname);
        if (s != CUDNN_STATUS_SUCCESS) { cfail(s, w); bld_free(&hb); continue; }
        for (int i = 0; i < 8; i++) cfg[i] = mkdesc(&hb, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
        s = L.BGet(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 8, &n, cfg);
        snprintf(w, sizeof w, "engine heuristics mode %s results", mname);
        if (s != CUDNN_STATUS_SUCCESS) { cfail(s, w); bld_free(&hb); continue; }
        if (n <= 0) {
            snprintf(g_why, sizeof g_why, "engine heuristics mode %s: no engine config for this graph", mname);
            ORK_DEBUG("cudnn sdpa: %s", g_why);
        }
        for (int64_t i = 0; i < n && i < 8; i++) {
            cudnnBackendDescriptor_t plan = NULL;
            if (L.BCreate(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan) != CUDNN_STATUS_SUCCESS) break;
            int64_t ws = 0, got = 0;
            const char *pstep = "set handle";
            if ((s = L.BSet(plan, A_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h)) == CUDNN_STATUS_SUCCESS &&
                (pstep = "set engine config",
                 s = L.BSet(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                            &cfg[i])) == CUDNN_STATUS_SUCCESS &&
                (pstep = "finalize", s = L.BFinalize(plan)) == CUDNN_STATUS_SUCCESS &&
                (pstep = "workspace size",
                 s = L.BGet(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got, &ws)) ==
                    CUDNN_STATUS_SUCCESS) {
                char json[600] = "";
                int64_t jn = 0;
                if (L.BGet(plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
                           (int64_t)sizeof json - 1, &jn, json) != CUDNN_STATUS_SUCCESS)
                    json[0] = 0;
                json[sizeof json - 1] = 0;
                ORK_INFO("attention: cuDNN SDPA %s plan B%lld H%lld Lq%lld Lk%lld D%lld: mode %s config %lld of "
                         "%lld, workspace %lld B; %.200s",
                         p->backward ? "bwd" : "fwd", (long long)B, (long long)H, (long long)Lq, (long long)Lk,
                         (long long)D, m == 0 ? "A" : "FALLBACK", (long long)i, (long long)n, (long long)ws, json);
                p->plan = plan;
                p->ws = (size_t)(ws > 0 ? ws : 0);
                /* keep the graph's descriptors and this mode's heuristics/configs alive with the plan */
                for (int j = 0; j < hb.n; j++) b.d[b.n++] = hb.d[j];
                memcpy(p->keep, b.d, sizeof b.d);
                p->nkeep = b.n;
                return 0;
            }
            snprintf(w, sizeof w, "execution plan (mode %s config %lld of %lld) %s", mname, (long long)i,
                     (long long)n, pstep);
            cfail(s, w);
            L.BDestroy(plan);
        }
        bld_free(&hb);
    }
    if (!g_why[0]) snprintf(g_why, sizeof g_why, "no engine config finalizes");
fail:
    bld_free(&b);
    return 1;
}

static sdpa_plan *plan_for(int device, const ork_cudnn_sdpa_args *a, int backward) {
    if (!ork_cudnn_sdpa_eligible(a) || !ork_cudnn_sdpa_available() || (backward && !L.bwd)) return NULL;
    for (int i = 0; i < ORK_SDPA_PLANS; i++) {
        sdpa_plan *p = &g_plans[i];
        if (p->used && p->device == device && p->backward == backward && p->B == a->B && p->H == a->H &&
            p->Lq == a->Lq && p->Lk == a->Lk && p->D == a->D)
            return p->ok ? p : NULL;
    }
    cudnnHandle_t h = handle_for(device);
    if (!h) return NULL;
    sdpa_plan *p = &g_plans[g_next];
    g_next = (g_next + 1) % ORK_SDPA_PLANS;
    if (p->used && p->ok) {
        L.BDestroy(p->plan);
        for (int j = p->nkeep - 1; j >= 0; j--) L.BDestroy(p->keep[j]);
    }
    memset(p, 0, sizeof *p);
    p->used = 1;
    p->device = device;
    p->backward = backward;
    p->B = a->B; p->H = a->H; p->Lq = a->Lq; p->Lk = a->Lk; p->D = a->D;
    g_why[0] = 0;
    const int bwd_before = L.bwd;
    p->ok = build_plan(p, h) == 0;
    if (!p->ok && backward && bwd_before && !L.bwd)
        ORK_INFO("attention: cuDNN %ld cannot build the SDPA_BWD operation graph for B%lld H%lld Lq%lld Lk%lld "
                 "D%lld (%s); our flash kernel runs every backward from now on",
                 L.version, (long long)a->B, (long long)a->H, (long long)a->Lq, (long long)a->Lk, (long long)a->D,
                 g_why);
    else if (!p->ok)
        ORK_INFO("attention: cuDNN SDPA has no %s plan for B%lld H%lld Lq%lld Lk%lld D%lld (%s); using our flash "
                 "kernel for it",
                 backward ? "bwd" : "fwd", (long long)a->B, (long long)a->H, (long long)a->Lq, (long long)a->Lk,
                 (long long)a->D, g_why);
    return p->ok ? p : NULL;
}

size_t ork_cudnn_sdpa_ws(int device, const ork_cudnn_sdpa_args *a, int backward, int *ok) {
    sdpa_plan *p = plan_for(device, a, backward);
    *ok = p != NULL;
    return p ? p->ws : 0;
}

static ork_status run_plan(int device, sdpa_plan *p, int n, const int64_t *uids, void **ptrs, void *ws,
                           void *stream) {
    cudnnHandle_t h = handle_for(device);
    cudnnBackendDescriptor_t pack = NULL;
    cudnnStatus_t s;
    if (!h) return ORK_FAIL(ORK_E_CUDA, "cudnn sdpa: no handle for device %d", device);
    if (p->ws && !ws) { /* a caller that did not ask attention_ws: run our kernel instead */
        static int told;
        if (!told++) ORK_WARN("cudnn sdpa: plan needs %zu B of workspace, none given; using our flash kernel", p->ws);
        return ORK_E_UNSUPPORTED;
    }
    if ((s = L.SetStream(h, (cudaStream_t)stream)) != CUDNN_STATUS_SUCCESS)
        return ORK_FAIL(ORK_E_CUDA, "cudnn sdpa: cudnnSetStream: %s", L.GetErrorString(s));
    if ((s = L.BCreate(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack)) != CUDNN_STATUS_SUCCESS)
        return ORK_FAIL(ORK_E_CUDA, "cudnn sdpa: variant pack: %s", L.GetErrorString(s));
    if ((s = L.BSet(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids)) ||
        (s = L.BSet(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs)) ||
        (s = L.BSet(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws)) ||
        (s = L.BFinalize(pack)) || (s = L.BExecute(h, p->plan, pack))) {
        char buf[512] = "";
        L.GetLastErrorString(buf, sizeof buf);
        L.BDestroy(pack);
        return ORK_FAIL(ORK_E_CUDA, "cudnn sdpa: %s execute: %s %s", p->backward ? "bwd" : "fwd",
                        L.GetErrorString(s), buf);
    }
    L.BDestroy(pack);
    return ORK_OK;
}

static float scale_of(const ork_cudnn_sdpa_args *a) {
    return a->scale != 0.0f ? a->scale : (float)(1.0 / sqrt((double)a->D));
}

ork_status ork_cudnn_sdpa_fwd(int device, const ork_cudnn_sdpa_args *a, const void *q, const void *k,
                              const void *v, void *y, float *lse, void *ws, void *stream) {
    sdpa_plan *p = plan_for(device, a, 0);
    if (!p) return ORK_E_UNSUPPORTED;
    float scale = scale_of(a); /* by value: read on the host at execute time */
    const int64_t uids[6] = {U_Q, U_K, U_V, U_O, U_STATS, U_SCALE};
    void *ptrs[6] = {(void *)q, (void *)k, (void *)v, y, lse, &scale};
    return run_plan(device, p, 6, uids, ptrs, ws, stream);
}

ork_status ork_cudnn_sdpa_bwd(int device, const ork_cudnn_sdpa_args *a, const void *q, const void *k,
                              const void *v, const void *y, const float *lse, const void *dy, void *dq,
                              void *dk, void *dv, void *ws, void *stream) {
    if (!dq || !dk || !dv) return ORK_E_UNSUPPORTED;
    sdpa_plan *p = plan_for(device, a, 1);
    if (!p) return ORK_E_UNSUPPORTED;
    float scale = scale_of(a);
    const int64_t uids[10] = {U_Q, U_K, U_V, U_O, U_STATS, U_SCALE, U_DO, U_DQ, U_DK, U_DV};
    void *ptrs[10] = {(void *)q, (void *)k, (void *)v, (void *)y, (void *)lse, &scale, (void *)dy, dq, dk, dv};
    return run_plan(device, p, 10, uids, ptrs, ws, stream);
}

void ork_cudnn_sdpa_shutdown(void) {
    if (!L.ok) return;
    for (int i = 0; i < ORK_SDPA_PLANS; i++) {
        sdpa_plan *p = &g_plans[i];
        if (p->used && p->ok) {
            L.BDestroy(p->plan);
            for (int j = p->nkeep - 1; j >= 0; j--) L.BDestroy(p->keep[j]);
        }
        memset(p, 0, sizeof *p);
    }
    g_next = 0;
    for (int d = 0; d < ORK_MAX_DEV; d++)
        if (g_handle[d]) { L.Destroy(g_handle[d]); g_handle[d] = NULL; }
}

#endif /* ORK_HAVE_CUDNN */
