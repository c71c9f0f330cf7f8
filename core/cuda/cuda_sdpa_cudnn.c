/* cuda/cuda_sdpa_cudnn.c — fused SDPA forward/backward through cuDNN 9's backend
 * graph API, loaded (platform.h: libcudnn.so.9, cudnn64_9.dll) at first use so that a machine
 * without cuDNN still runs (the caller falls back to cuda_attn). See
 * cuda_sdpa_cudnn.h for the contract.
 *
 * Forward: one CUDNN_BACKEND_OPERATION_SDPA_FWD node (cuDNN >= 9.13.1).
 * Backward, two graph kinds, tried per shape in this order:
 *   1. "composite": the flash-attention backward as cuDNN's runtime fusion engine
 *      recognises it — 18 matmul / pointwise / reduction / reshape operations with
 *      virtual tensors, an F32 dQ accumulator and an F32 dO·O row-sum
 *      ("softmax_sum") that live in our workspace. Written after cudnn-frontend's
 *      CompositeSDPABackwardNode (scaled_dot_product_flash_attention.h), which is
 *      what cudnn-frontend — and so PyTorch's F.scaled_dot_product_attention —
 *      builds for the backward on every cuDNN 9; reduced to our case (no mask,
 *      bias, dropout, sink or GQA; non-causal; scale by value; the dP-workspace
 *      "deterministic" variant is not used). Works with 9.19, whose graph
 *      library has no SDPA_BWD node.
 *   2. "native": one CUDNN_BACKEND_OPERATION_SDPA_BWD node (cuDNN 9.26 builds it;
 *      9.17-9.19 accept the descriptor but cannot put it in an operation graph).
 * Which kinds this library builds is probed once at load on the host (graph
 * finalize needs no device); ORK_CUDNN_SDPA_BWD=native tries the native node first.
 *
 * Owns (process-wide, per device, freed by ork_cudnn_sdpa_shutdown): the library
 * handle and its entry points, one cudnnHandle_t per device, and a small cache
 * of execution plans keyed by (device, direction, B, H, Lq, Lk, D), including
 * the shapes that have no engine. Not thread-safe (one graph, one thread).
 * Built without cuDNN headers (ORK_HAVE_CUDNN undefined) every entry reports
 * "unavailable". */
#include "cuda/cuda_sdpa_cudnn.h"
#include "cuda/cuda_ctx.h"
#include "platform/platform.h"
#include "util/log.h"

#include <math.h>
#include <stdarg.h>
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
int ork_cudnn_sdpa_bwd_graphs(void) { return 0; }
int ork_cudnn_sdpa_bwd_expected(const ork_cudnn_sdpa_args *a) { (void)a; return 0; }
const char *ork_cudnn_sdpa_plan_kind(int device, const ork_cudnn_sdpa_args *a, int backward) {
    (void)device; (void)a; (void)backward;
    return NULL;
}
void ork_cudnn_sdpa_shutdown(void) {}

#else /* ORK_HAVE_CUDNN */

#include <cudnn_graph.h>

/* Attribute and type values the library headers of older cuDNN 9 lack or mark
 * deprecated; the numbers are the ABI (cudnn_graph.h of 9.19 / 9.26). */
#define A_PLAN_HANDLE ((cudnnBackendAttributeName_t)400)
#define A_GRAPH_HANDLE ((cudnnBackendAttributeName_t)800)
#define A_RED_DETERMINISTIC ((cudnnBackendAttributeName_t)1602) /* 9.11 */
#define A_RESHAPE_MODE ((cudnnBackendAttributeName_t)2202)      /* 9.22 */
#define T_RESHAPE_MODE ((cudnnBackendAttributeType_t)31)         /* 9.22 */
#define T_SDPA_FWD ((cudnnBackendDescriptorType_t)41)
#define T_SDPA_BWD ((cudnnBackendDescriptorType_t)43)
enum {
    A_FWD_Q = 2800, A_FWD_K, A_FWD_V, A_FWD_O, A_FWD_STATS, A_FWD_SCALE,
    A_BWD_Q = 2851, A_BWD_K, A_BWD_V, A_BWD_O, A_BWD_STATS, A_BWD_SCALE, A_BWD_SEQQ, A_BWD_SEQKV,
    A_BWD_DQ, A_BWD_DK, A_BWD_DV, A_BWD_DO,
};

/* Backward graph kinds (bit flags in L.bwd_kinds). */
enum { K_FWD = 0, K_COMPOSITE = 1, K_NATIVE = 2 };
static const char *kind_name(int k) { return k == K_COMPOSITE ? "composite" : k == K_NATIVE ? "native" : "fwd"; }

/* Entry points from libcudnn.so.9. */
static struct {
    int tried, ok;
    int bwd_kinds; /* K_COMPOSITE | K_NATIVE: backward graphs the load-time probe built */
    int native_first;
    ork_lib *lib;
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
#define ORK_SDPA_KEEP 112 /* composite graph: 26 tensors + 33 op descriptors + graph; heuristics + configs: 9 */
#define ORK_SDPA_OPS 24

typedef struct sdpa_plan {
    int used, ok, device, backward;
    int kind; /* K_FWD, K_COMPOSITE, K_NATIVE */
    int64_t B, H, Lq, Lk, D;
    cudnnBackendDescriptor_t plan;
    cudnnBackendDescriptor_t keep[ORK_SDPA_KEEP]; /* descriptors the plan was built from */
    int nkeep;
    size_t ws;               /* total bytes the caller passes: our part + cuDNN's */
    size_t off_ssum, off_ws; /* composite: softmax_sum and cuDNN's workspace offsets (dQ accum at 0) */
} sdpa_plan;

static cudnnHandle_t g_handle[ORK_MAX_DEV];
static sdpa_plan g_plans[ORK_SDPA_PLANS];
static int g_next;

static char g_why[640];    /* the last failure, for the once-per-shape fallback line */
static char g_trace[1600]; /* backward plan building, stage by stage (one INFO line per shape) */
static void probe_bwd(void);

static void trace(const char *fmt, ...) ORK_PRINTF(1, 2);
static void trace(const char *fmt, ...) {
    size_t n = strlen(g_trace);
    if (n + 8 >= sizeof g_trace) return;
    if (n) { g_trace[n++] = ';'; g_trace[n++] = ' '; g_trace[n] = 0; }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_trace + n, sizeof g_trace - n, fmt, ap);
    va_end(ap);
}

static void *sym(const char *name) {
    void *p = ork_lib_sym(L.lib, name);
    if (!p) ORK_WARN("cudnn sdpa: the cuDNN library lacks %s", name);
    return p;
}

/* ORK_CUDNN_SDPA: unset = on when this library builds both directions, "0" = off,
 * "1" = on (the forward even when no backward graph builds). */
int ork_cudnn_sdpa_available(void) {
    if (L.tried) return L.ok;
    L.tried = 1;
    const char *env = getenv("ORK_CUDNN_SDPA");
    const int forced = env && env[0] == '1';
    if (env && env[0] == '0') {
        ORK_DEBUG("attention: cuDNN SDPA off (ORK_CUDNN_SDPA=0); using our flash kernels");
        return 0;
    }
    const char *be = getenv("ORK_CUDNN_SDPA_BWD");
    L.native_first = be && !strcmp(be, "native");
    const char *lib = getenv("ORK_CUDNN_LIB");
    if (!lib || !lib[0]) lib = ork_os_windows() ? "cudnn64_9.dll" : "libcudnn.so.9";
    char why[1024];
    if (ork_lib_open(lib, why, sizeof why, &L.lib) != ORK_OK) { /* why starts with lib */
        if (forced) ORK_INFO("attention: cuDNN not loadable (%s); using our flash kernels", why);
        else ORK_DEBUG("attention: cuDNN not loadable (%s); using our flash kernels", why);
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
        ork_lib_close(L.lib);
        L.lib = NULL;
        return 0;
    }
    L.version = (long)L.GetVersion();
    if (L.version < 91301) {
        ORK_INFO("attention: cuDNN %ld (%s) < 9.13.1 has no SDPA node; using our flash kernels", L.version, lib);
        ork_lib_close(L.lib);
        L.lib = NULL;
        return 0;
    }
    probe_bwd(); /* host only: sets L.bwd_kinds, g_why on failure */
    if (!L.bwd_kinds && !forced) {
        ORK_INFO("attention: cuDNN %ld (%s) builds no SDPA backward graph (%s); using our flash kernels "
                 "(ORK_CUDNN_SDPA=1 takes its forward anyway)",
                 L.version, lib, g_why);
        ork_lib_close(L.lib);
        L.lib = NULL;
        return 0;
    }
    L.ok = 1;
    if (L.bwd_kinds)
        ORK_INFO("attention: cuDNN %ld loaded from %s: fused SDPA forward and backward (backward graph: %s) "
                 "for non-causal, unmasked, D 64/128 (ORK_CUDNN_SDPA=0 turns it off)",
                 L.version, lib,
                 L.bwd_kinds == K_COMPOSITE ? "composite"
                 : L.bwd_kinds == K_NATIVE  ? "native SDPA_BWD"
                 : L.native_first           ? "native SDPA_BWD, else composite"
                                            : "composite, else native SDPA_BWD");
    else
        ORK_INFO("attention: cuDNN %ld loaded from %s: fused SDPA forward for non-causal, unmasked, D 64/128; "
                 "backward: our flash kernel (no SDPA backward graph builds: %s)",
                 L.version, lib, g_why);
    return 1;
}

long ork_cudnn_sdpa_version(void) { return L.ok ? L.version : 0; }
int ork_cudnn_sdpa_has_bwd(void) { return L.ok && L.bwd_kinds != 0; }
int ork_cudnn_sdpa_bwd_graphs(void) { return L.ok ? L.bwd_kinds : 0; }

/* ---- descriptor helpers: on failure they record one line naming the step ---- */

static int cfail(cudnnStatus_t st, const char *what) {
    char buf[512] = "";
    L.GetLastErrorString(buf, sizeof buf);
    snprintf(g_why, sizeof g_why, "%s: %s%s%.480s", what, L.GetErrorString(st), buf[0] ? ": " : "", buf);
    ORK_DEBUG("cudnn sdpa: %s", g_why);
    return 1;
}
#define CK(expr, what) do { cudnnStatus_t st_ = (expr); if (st_ != CUDNN_STATUS_SUCCESS) { cfail(st_, what); goto fail; } } while (0)

/* Builder: every descriptor made goes into d[] so one loop frees them all. */
typedef struct bld {
    cudnnBackendDescriptor_t d[ORK_SDPA_KEEP];
    int n;
} bld;

static cudnnBackendDescriptor_t mkdesc(bld *b, cudnnBackendDescriptorType_t t) {
    cudnnBackendDescriptor_t d = NULL;
    if (b->n >= ORK_SDPA_KEEP) {
        snprintf(g_why, sizeof g_why, "descriptor table full (%d)", ORK_SDPA_KEEP);
        return NULL;
    }
    cudnnStatus_t st = L.BCreate(t, &d);
    if (st != CUDNN_STATUS_SUCCESS) { cfail(st, "create descriptor"); return NULL; }
    b->d[b->n++] = d;
    return d;
}
static void bld_free(bld *b) {
    for (int i = b->n - 1; i >= 0; i--) L.BDestroy(b->d[i]);
    b->n = 0;
}

/* A finalized tensor of nd dims, 16-byte aligned; virtual (an intermediate the
 * fusion engine keeps on chip) or not; by value (a host scalar) or not. A failure
 * names the tensor and the step ("tensor dO (uid 7) finalize: ..."). */
static cudnnBackendDescriptor_t tensor_nd(bld *b, const char *name, int64_t uid, cudnnDataType_t dt, int nd,
                                          const int64_t *dims, const int64_t *strides, int is_virtual,
                                          int by_value) {
    cudnnBackendDescriptor_t t = mkdesc(b, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    if (!t) return NULL;
    int64_t align = 16;
    bool virt = is_virtual != 0, byv = true;
    char w[96];
    const char *step = "dtype";
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
#define TSET(stp, expr) do { step = (stp); if ((st = (expr)) != CUDNN_STATUS_SUCCESS) goto fail; } while (0)
    TSET("dtype", L.BSet(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt));
    TSET("dims", L.BSet(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, nd, dims));
    TSET("strides", L.BSet(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, nd, strides));
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
static cudnnBackendDescriptor_t tensor(bld *b, const char *name, int64_t uid, cudnnDataType_t dt,
                                       const int64_t dims[4], const int64_t strides[4], int by_value) {
    return tensor_nd(b, name, uid, dt, 4, dims, strides, 0, by_value);
}
static cudnnBackendDescriptor_t vtensor(bld *b, const char *name, int64_t uid, cudnnDataType_t dt,
                                        const int64_t dims[4], const int64_t strides[4]) {
    return tensor_nd(b, name, uid, dt, 4, dims, strides, 1, 0);
}

static int set_desc(cudnnBackendDescriptor_t op, int attr, cudnnBackendDescriptor_t d, const char *what) {
    if (!d) return 1;
    cudnnStatus_t st = L.BSet(op, (cudnnBackendAttributeName_t)attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d);
    return st == CUDNN_STATUS_SUCCESS ? 0 : cfail(st, what);
}

/* ---- operations of the composite graph, appended to ops[] in creation order ---- */

typedef struct opl {
    cudnnBackendDescriptor_t op[ORK_SDPA_OPS];
    int n;
} opl;

/* One op's failure: "composite op 7 exp_s <step>: <status>: <cuDNN's last error>". */
static int opfail(const opl *o, const char *name, const char *step, cudnnStatus_t st) {
    char w[128];
    snprintf(w, sizeof w, "composite op %d %s %s", o->n, name, step);
    return cfail(st, w);
}
#define OSET(stp, expr) do { step = (stp); if ((st = (expr)) != CUDNN_STATUS_SUCCESS) return opfail(o, name, step, st); } while (0)
#define OBSET(d, attr, val) L.BSet((d), (attr), CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &(val))

static int push_op(opl *o, cudnnBackendDescriptor_t op, const char *name) {
    if (o->n >= ORK_SDPA_OPS) {
        snprintf(g_why, sizeof g_why, "composite op %s: op table full", name);
        return 1;
    }
    o->op[o->n++] = op;
    return 0;
}

/* y = x <mode> bb (bb NULL: unary), F32 math, alpha1 = alpha2 = 1 (as cudnn-frontend sets). */
static int op_pw(bld *b, opl *o, const char *name, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t bb, cudnnBackendDescriptor_t y) {
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    const float one = 1.0f;
    cudnnStatus_t st;
    const char *step;
    if (!x || !y) return 1;
    cudnnBackendDescriptor_t pw = mkdesc(b, CUDNN_BACKEND_POINTWISE_DESCRIPTOR), op;
    if (!pw) return 1;
    OSET("pointwise mode", L.BSet(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
    OSET("pointwise math precision", L.BSet(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f32));
    OSET("pointwise finalize", L.BFinalize(pw));
    if (!(op = mkdesc(b, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR))) return 1;
    OSET("set pointwise", OBSET(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw));
    OSET("set x", OBSET(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x));
    OSET("set y", OBSET(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y));
    if (bb) OSET("set b", OBSET(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, bb));
    OSET("set alpha1", L.BSet(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one));
    OSET("set alpha2", L.BSet(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one));
    OSET("finalize", L.BFinalize(op));
    return push_op(o, op, name);
}

/* y = sum of x over the dims where y is 1 (ADD, F32; not deterministic, as the frontend's default). */
static int op_red(bld *b, opl *o, const char *name, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    const cudnnReduceTensorOp_t add = CUDNN_REDUCE_TENSOR_ADD;
    const bool det = false;
    cudnnStatus_t st;
    const char *step;
    if (!x || !y) return 1;
    cudnnBackendDescriptor_t rd = mkdesc(b, CUDNN_BACKEND_REDUCTION_DESCRIPTOR), op;
    if (!rd) return 1;
    OSET("reduction compute type", L.BSet(rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32));
    OSET("reduction operator",
         L.BSet(rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &add));
    if (L.version >= 91100)
        OSET("reduction deterministic", L.BSet(rd, A_RED_DETERMINISTIC, CUDNN_TYPE_BOOLEAN, 1, &det));
    OSET("reduction finalize", L.BFinalize(rd));
    if (!(op = mkdesc(b, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR))) return 1;
    OSET("set reduction", OBSET(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, rd));
    OSET("set x", OBSET(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x));
    OSET("set y", OBSET(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y));
    OSET("finalize", L.BFinalize(op));
    return push_op(o, op, name);
}

/* c = a · bb (batched over the leading dims), F32 compute. */
static int op_mm(bld *b, opl *o, const char *name, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t bb,
                 cudnnBackendDescriptor_t c) {
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    cudnnStatus_t st;
    const char *step;
    if (!a || !bb || !c) return 1;
    cudnnBackendDescriptor_t mm = mkdesc(b, CUDNN_BACKEND_MATMUL_DESCRIPTOR), op;
    if (!mm) return 1;
    OSET("matmul compute type", L.BSet(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32));
    OSET("matmul finalize", L.BFinalize(mm));
    if (!(op = mkdesc(b, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR))) return 1;
    OSET("set a", OBSET(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a));
    OSET("set b", OBSET(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, bb));
    OSET("set c", OBSET(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c));
    OSET("set matmul", OBSET(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, mm));
    OSET("finalize", L.BFinalize(op));
    return push_op(o, op, name);
}

/* y = a view of x with other dims/strides (VIEW_ONLY, set where the library has the attribute, 9.22+). */
static int op_reshape(bld *b, opl *o, const char *name, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    cudnnStatus_t st;
    const char *step;
    if (!x || !y) return 1;
    cudnnBackendDescriptor_t op = mkdesc(b, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    if (!op) return 1;
    OSET("set x", OBSET(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x));
    if (L.version >= 92200) {
        const int32_t view_only = 0; /* CUDNN_RESHAPE_VIEW_ONLY */
        OSET("set mode", L.BSet(op, A_RESHAPE_MODE, T_RESHAPE_MODE, 1, &view_only));
    }
    OSET("set y", OBSET(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y));
    OSET("finalize", L.BFinalize(op));
    return push_op(o, op, name);
}
#undef OSET
#undef OBSET

/* Tensor uids: the variant pack names these (virtual tensors take 100+). */
enum { U_Q = 1, U_K, U_V, U_O, U_STATS, U_SCALE, U_DO, U_DQ, U_DK, U_DV, U_ONE, U_SSUM, U_DQACC };

static cudnnHandle_t handle_for(int device) {
    if (device < 0 || device >= ORK_MAX_DEV) return NULL;
    if (!g_handle[device]) {
        cudnnStatus_t st = L.Create(&g_handle[device]);
        if (st != CUDNN_STATUS_SUCCESS) { cfail(st, "cudnnCreate"); g_handle[device] = NULL; }
    }
    return g_handle[device];
}

/* Operation graph from ops[0..n) (handle set when given: deprecated in cuDNN 9 and
 * not needed for finalize, which is what lets the load-time probe run without a
 * device). Returns G_OK, or G_GRAPH with g_why set. */
enum { G_OK = 0, G_DESC = 1, G_GRAPH = 2 };
static int finish_graph(bld *b, cudnnBackendDescriptor_t *ops, int n, cudnnHandle_t h, const char *dir,
                        cudnnBackendDescriptor_t *graph_out) {
    char w[96];
    cudnnBackendDescriptor_t graph = mkdesc(b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    if (!graph) return G_DESC;
    snprintf(w, sizeof w, "%s operation graph: set ops", dir);
    CK(L.BSet(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, ops), w);
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

/* The operation graph of one native SDPA node (fwd: Q K V -> O Stats; bwd: Q K V O
 * Stats dO -> dQ dK dV; scale by value), every descriptor kept in b. Returns G_OK,
 * G_DESC (a tensor or the operation failed: g_why names which) or G_GRAPH. */
static int build_graph_native(bld *b, int backward, int64_t B, int64_t H, int64_t Lq, int64_t Lk, int64_t D,
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
    cudnnBackendDescriptor_t op = NULL;
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
    return finish_graph(b, &op, 1, h, dir, graph_out);
fail:
    return G_DESC;
}

/* The composite flash-attention backward (cudnn-frontend's CompositeSDPABackwardNode
 * for MHA, no mask/bias/dropout, scale by value, dQ through the F32 accumulator).
 * Frontend conventions kept: K and V enter as Kᵀ (B,H,D,Lk) and Vᵀ views of the
 * packed (B,H,Lk,D) tensors (strides swapped); virtual intermediates are F32 except
 * the two transposed probability views (Pᵀ, dSᵀ), which are bf16 like Q; the
 * reshape of Kᵀ back to K is an F32 virtual tensor (the frontend's intermediate
 * type); softmax_sum (B,H,Lq,1) and dQ_accum (B,H,Lq,D) are F32 workspace tensors.
 * Operation order = the frontend's node order:
 *    1 mul_dO_O  2 reduce_dO_o  3 scale_dropout_inv (× 1.0) -> softmax_sum
 *    4 matmul_Q_KT  5 mul_s_attn_scale  6 sub_s_m (− Stats)  7 exp_s -> P
 *    8 reshape_p  9 matmul_pT_dO -> dV
 *   10 matmul_dO_VT  11 sub_dP_softmax_sum  12 mul_dP_exp_s  13 mul_dS_attn_scale -> dS
 *   14 reshape_dS  15 matmul_dST_Q -> dK
 *   16 reshape_k  17 matmul_dS_K -> dQ_accum  18 identity_dQ -> dQ */
static int build_graph_composite(bld *b, int64_t B, int64_t H, int64_t Lq, int64_t Lk, int64_t D, cudnnHandle_t h,
                                 cudnnBackendDescriptor_t *graph_out) {
    const cudnnDataType_t bf = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
    const int64_t dQd[4] = {B, H, Lq, D}, sQd[4] = {H * Lq * D, Lq * D, D, 1};
    const int64_t dKd[4] = {B, H, Lk, D}, sKd[4] = {H * Lk * D, Lk * D, D, 1};
    const int64_t dKt[4] = {B, H, D, Lk}, sKt[4] = {H * Lk * D, Lk * D, 1, D};
    const int64_t dL1[4] = {B, H, Lq, 1}, sL1[4] = {H * Lq, Lq, 1, 1};
    const int64_t dS_[4] = {B, H, Lq, Lk}, sS_[4] = {H * Lq * Lk, Lq * Lk, Lk, 1};
    const int64_t dSt[4] = {B, H, Lk, Lq}, sSt[4] = {H * Lq * Lk, Lq * Lk, 1, Lk};
    const int64_t dOO[4] = {B, H, Lq, D}, sOO[4] = {H * Lq * D, Lq * D, H * D, 1}; /* as the frontend sets it */
    const int64_t d1[4] = {1, 1, 1, 1}; /* by-value scalars: the frontend widens them to the operands' rank */
    opl o = {{0}, 0};
    /* graph inputs and outputs (uids in the variant pack) */
    cudnnBackendDescriptor_t Q = tensor(b, "Q", U_Q, bf, dQd, sQd, 0), KT = tensor(b, "K^T", U_K, bf, dKt, sKt, 0),
                             VT = tensor(b, "V^T", U_V, bf, dKt, sKt, 0), O = tensor(b, "O", U_O, bf, dQd, sQd, 0),
                             dO = tensor(b, "dO", U_DO, bf, dQd, sQd, 0),
                             St = tensor(b, "Stats", U_STATS, f32, dL1, sL1, 0),
                             dQ = tensor(b, "dQ", U_DQ, bf, dQd, sQd, 0), dK = tensor(b, "dK", U_DK, bf, dKd, sKd, 0),
                             dV = tensor(b, "dV", U_DV, bf, dKd, sKd, 0),
                             sc = tensor(b, "attn_scale", U_SCALE, f32, d1, d1, 1),
                             one = tensor(b, "one", U_ONE, f32, d1, d1, 1),
                             ssum = tensor(b, "softmax_sum", U_SSUM, f32, dL1, sL1, 0),
                             dqa = tensor(b, "dQ_accum", U_DQACC, f32, dQd, sQd, 0);
    if (!Q || !KT || !VT || !O || !dO || !St || !dQ || !dK || !dV || !sc || !one || !ssum || !dqa) return G_DESC;
    int64_t u = 100;
    cudnnBackendDescriptor_t t_dOO = vtensor(b, "dO*O", u++, f32, dOO, sOO),
                             t_red = vtensor(b, "sum(dO*O)", u++, f32, dL1, sL1),
                             t_S = vtensor(b, "S", u++, f32, dS_, sS_), t_Ss = vtensor(b, "S*scale", u++, f32, dS_, sS_),
                             t_Sm = vtensor(b, "S-Stats", u++, f32, dS_, sS_), t_P = vtensor(b, "P", u++, f32, dS_, sS_),
                             t_Pt = vtensor(b, "P^T", u++, bf, dSt, sSt), t_dP = vtensor(b, "dP", u++, f32, dS_, sS_),
                             t_dPs = vtensor(b, "dP-sum", u++, f32, dS_, sS_),
                             t_dS0 = vtensor(b, "(dP-sum)*P", u++, f32, dS_, sS_),
                             t_dS = vtensor(b, "dS", u++, f32, dS_, sS_), t_dSt = vtensor(b, "dS^T", u++, bf, dSt, sSt),
                             t_K = vtensor(b, "K", u++, f32, dKd, sKd);
    if (!t_dOO || !t_red || !t_S || !t_Ss || !t_Sm || !t_P || !t_Pt || !t_dP || !t_dPs || !t_dS0 || !t_dS || !t_dSt ||
        !t_K)
        return G_DESC;
    if (op_pw(b, &o, "mul_dO_O", CUDNN_POINTWISE_MUL, dO, O, t_dOO) || op_red(b, &o, "reduce_dO_o", t_dOO, t_red) ||
        op_pw(b, &o, "scale_dropout_inv", CUDNN_POINTWISE_MUL, t_red, one, ssum) ||
        op_mm(b, &o, "matmul_Q_KT", Q, KT, t_S) ||
        op_pw(b, &o, "mul_s_attn_scale", CUDNN_POINTWISE_MUL, t_S, sc, t_Ss) ||
        op_pw(b, &o, "sub_s_m", CUDNN_POINTWISE_SUB, t_Ss, St, t_Sm) ||
        op_pw(b, &o, "exp_s", CUDNN_POINTWISE_EXP, t_Sm, NULL, t_P) || op_reshape(b, &o, "reshape_p", t_P, t_Pt) ||
        op_mm(b, &o, "matmul_pT_dO", t_Pt, dO, dV) || op_mm(b, &o, "matmul_dO_VT", dO, VT, t_dP) ||
        op_pw(b, &o, "sub_dP_softmax_sum", CUDNN_POINTWISE_SUB, t_dP, ssum, t_dPs) ||
        op_pw(b, &o, "mul_dP_exp_s", CUDNN_POINTWISE_MUL, t_dPs, t_P, t_dS0) ||
        op_pw(b, &o, "mul_dS_attn_scale", CUDNN_POINTWISE_MUL, t_dS0, sc, t_dS) ||
        op_reshape(b, &o, "reshape_dS", t_dS, t_dSt) || op_mm(b, &o, "matmul_dST_Q", t_dSt, Q, dK) ||
        op_reshape(b, &o, "reshape_k", KT, t_K) || op_mm(b, &o, "matmul_dS_K", t_dS, t_K, dqa) ||
        op_pw(b, &o, "identity_dQ", CUDNN_POINTWISE_IDENTITY, dqa, NULL, dQ))
        return G_DESC;
    return finish_graph(b, o.op, o.n, h, "composite SDPA backward", graph_out);
}

static int build_graph(bld *b, int kind, int64_t B, int64_t H, int64_t Lq, int64_t Lk, int64_t D, cudnnHandle_t h,
                       cudnnBackendDescriptor_t *graph_out) {
    if (kind == K_COMPOSITE) return build_graph_composite(b, B, H, Lq, Lk, D, h, graph_out);
    return build_graph_native(b, kind == K_NATIVE, B, H, Lq, Lk, D, h, graph_out);
}

/* Load-time check of which backward graphs this library builds at all, on the host
 * (no handle, no device). cuDNN 9.17-9.19 accept and finalize the SDPA_BWD operation
 * but their graph library has no node for it, so its operation graph finalize fails
 * (CUDNN_STATUS_BAD_PARAM "outputGraph.buildDAG()"); 9.26 builds it. The composite
 * graph is made of operations every cuDNN 9 has. Engines are still asked per plan. */
static void probe_bwd(void) {
    char why_c[sizeof g_why] = "", why_n[sizeof g_why] = "";
    L.bwd_kinds = 0;
    for (int kind = K_COMPOSITE; kind <= K_NATIVE; kind++) {
        if (kind == K_NATIVE && L.version < 91700) {
            snprintf(why_n, sizeof why_n, "native: needs cuDNN >= 9.17");
            continue;
        }
        bld b = {{0}, 0};
        cudnnBackendDescriptor_t graph = NULL;
        g_why[0] = 0;
        int r = build_graph(&b, kind, 1, 1, 128, 128, 128, NULL, &graph);
        bld_free(&b);
        if (r == G_OK) L.bwd_kinds |= kind;
        else snprintf(kind == K_COMPOSITE ? why_c : why_n, sizeof why_c, "%s: %.560s", kind_name(kind), g_why);
    }
    snprintf(g_why, sizeof g_why, "%.300s%s%.300s", why_c, why_c[0] && why_n[0] ? "; " : "", why_n);
    ORK_DEBUG("cudnn sdpa: backward graph probe with cuDNN %ld: composite %s, native %s (%s)", L.version,
              (L.bwd_kinds & K_COMPOSITE) ? "builds" : "fails", (L.bwd_kinds & K_NATIVE) ? "builds" : "fails", g_why);
}

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

/* The graph (build_graph), then the first engine config (heuristic modes A, then
 * FALLBACK) whose execution plan finalizes. Every stage goes into g_trace. */
static int build_plan(sdpa_plan *p, cudnnHandle_t h) {
    bld b = {{0}, 0};
    const int64_t B = p->B, H = p->H, Lq = p->Lq, Lk = p->Lk, D = p->D;
    cudnnBackendDescriptor_t graph = NULL, heur = NULL;
    cudnnBackendDescriptor_t cfg[8] = {0};
    g_why[0] = 0;
    int g = build_graph(&b, p->kind, B, H, Lq, Lk, D, h, &graph);
    if (g != G_OK) {
        trace("%s graph: %s", kind_name(p->kind), g_why);
        goto fail;
    }
    trace("%s graph: finalized", kind_name(p->kind));

    const cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    for (int m = 0; m < 2; m++) {
        bld hb = {{0}, 0}; /* per-mode heuristics and configs; the chosen config moves to b */
        heur = mkdesc(&hb, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
        int64_t n = 0;
        const char *mname = m == 0 ? "A" : "FALLBACK";
        char w[96];
        cudnnStatus_t s;
        if (!heur) { bld_free(&hb); goto fail; }
        if ((s = L.BSet(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph)) ||
            (s = L.BSet(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[m]))) {
            snprintf(w, sizeof w, "engine heuristics mode %s set", mname);
            cfail(s, w);
            trace("%s", g_why);
            bld_free(&hb);
            continue;
        }
        s = L.BFinalize(heur);
        snprintf(w, sizeof w, "engine heuristics mode %s finalize", mname);
        if (s != CUDNN_STATUS_SUCCESS) { cfail(s, w); trace("%s", g_why); bld_free(&hb); continue; }
        for (int i = 0; i < 8; i++) cfg[i] = mkdesc(&hb, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
        s = L.BGet(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 8, &n, cfg);
        snprintf(w, sizeof w, "engine heuristics mode %s results", mname);
        if (s != CUDNN_STATUS_SUCCESS) { cfail(s, w); trace("%s", g_why); bld_free(&hb); continue; }
        trace("heuristics %s: %lld engine config(s)", mname, (long long)n);
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
                char json[2048] = ""; /* the engine's name and knobs, for the log; size asked first */
                int64_t jn = 0;
                if (L.BGet(plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, 0, &jn, NULL) !=
                        CUDNN_STATUS_SUCCESS ||
                    jn <= 0 || jn >= (int64_t)sizeof json ||
                    L.BGet(plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, jn, &jn, json) !=
                        CUDNN_STATUS_SUCCESS)
                    json[0] = 0;
                json[sizeof json - 1] = 0;
                size_t cws = (size_t)(ws > 0 ? ws : 0);
                if (p->kind == K_COMPOSITE) { /* [dQ_accum F32 | softmax_sum F32 | cuDNN's workspace] */
                    p->off_ssum = align256((size_t)(B * H * Lq * D) * 4);
                    p->off_ws = align256(p->off_ssum + (size_t)(B * H * Lq) * 4);
                    p->ws = p->off_ws + cws;
                } else {
                    p->off_ssum = p->off_ws = 0;
                    p->ws = cws;
                }
                trace("plan: mode %s config %lld of %lld finalized, cuDNN workspace %zu B, total %zu B", mname,
                      (long long)i, (long long)n, cws, p->ws);
                ORK_INFO("attention: cuDNN SDPA %s plan B%lld H%lld Lq%lld Lk%lld D%lld (%s graph): mode %s config "
                         "%lld of %lld, workspace %zu B; %.200s",
                         p->backward ? "bwd" : "fwd", (long long)B, (long long)H, (long long)Lq, (long long)Lk,
                         (long long)D, kind_name(p->kind), mname, (long long)i, (long long)n, p->ws, json);
                p->plan = plan;
                /* keep the graph's descriptors and this mode's heuristics/configs alive with the plan */
                if (b.n + hb.n > ORK_SDPA_KEEP) { /* cannot happen with the sizes above; be safe */
                    L.BDestroy(plan);
                    bld_free(&hb);
                    snprintf(g_why, sizeof g_why, "descriptor table full");
                    goto fail;
                }
                for (int j = 0; j < hb.n; j++) b.d[b.n++] = hb.d[j];
                memcpy(p->keep, b.d, sizeof b.d);
                p->nkeep = b.n;
                return 0;
            }
            snprintf(w, sizeof w, "execution plan (mode %s config %lld of %lld) %s", mname, (long long)i,
                     (long long)n, pstep);
            cfail(s, w);
            trace("%s", g_why);
            L.BDestroy(plan);
        }
        bld_free(&hb);
    }
    if (!g_why[0]) snprintf(g_why, sizeof g_why, "no engine config finalizes");
fail:
    bld_free(&b);
    return 1;
}

/* Backward graph kinds to try for a shape, in order; 0-terminated. */
static void bwd_order(const ork_cudnn_sdpa_args *a, int out[3]) {
    int n = 0;
    /* cudnn-frontend adds a padding mask to the composite graph when Lk % 128 != 0 on
     * cuDNN <= 9.15 (a workaround we do not build): the composite is not offered there. */
    const int comp = (L.bwd_kinds & K_COMPOSITE) && !(a->Lq == 1 && a->Lk == 1) &&
                     (L.version > 91500 || a->Lk % 128 == 0);
    const int nat = (L.bwd_kinds & K_NATIVE) != 0;
    if (L.native_first && nat) out[n++] = K_NATIVE;
    if (comp) out[n++] = K_COMPOSITE;
    if (!L.native_first && nat) out[n++] = K_NATIVE;
    out[n] = 0;
}

int ork_cudnn_sdpa_bwd_expected(const ork_cudnn_sdpa_args *a) {
    if (!ork_cudnn_sdpa_eligible(a) || !ork_cudnn_sdpa_available()) return 0;
    int order[3];
    bwd_order(a, order);
    return order[0] != 0;
}

static sdpa_plan *find_plan(int device, const ork_cudnn_sdpa_args *a, int backward) {
    for (int i = 0; i < ORK_SDPA_PLANS; i++) {
        sdpa_plan *p = &g_plans[i];
        if (p->used && p->device == device && p->backward == backward && p->B == a->B && p->H == a->H &&
            p->Lq == a->Lq && p->Lk == a->Lk && p->D == a->D)
            return p;
    }
    return NULL;
}

static sdpa_plan *plan_for(int device, const ork_cudnn_sdpa_args *a, int backward) {
    if (!ork_cudnn_sdpa_eligible(a) || !ork_cudnn_sdpa_available()) return NULL;
    sdpa_plan *p = find_plan(device, a, backward);
    if (p) return p->ok ? p : NULL;
    int order[3] = {K_FWD, 0, 0};
    if (backward) {
        bwd_order(a, order);
        if (!order[0]) return NULL; /* no backward graph for this library/shape: our kernel, said at load */
    }
    cudnnHandle_t h = handle_for(device);
    if (!h) return NULL;
    p = &g_plans[g_next];
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
    g_trace[0] = 0;
    for (int i = 0; i < 3 && (i == 0 || order[i]); i++) {
        p->kind = order[i];
        if (build_plan(p, h) == 0) { p->ok = 1; break; }
    }
    if (backward)
        ORK_INFO("attention: cuDNN %ld SDPA bwd B%lld H%lld Lq%lld Lk%lld D%lld: %s [%s]", L.version, (long long)a->B,
                 (long long)a->H, (long long)a->Lq, (long long)a->Lk, (long long)a->D,
                 p->ok ? kind_name(p->kind) : "no plan, our flash kernel", g_trace);
    else if (!p->ok)
        ORK_INFO("attention: cuDNN SDPA has no fwd plan for B%lld H%lld Lq%lld Lk%lld D%lld (%s); using our flash "
                 "kernel for it",
                 (long long)a->B, (long long)a->H, (long long)a->Lq, (long long)a->Lk, (long long)a->D, g_why);
    return p->ok ? p : NULL;
}

size_t ork_cudnn_sdpa_ws(int device, const ork_cudnn_sdpa_args *a, int backward, int *ok) {
    sdpa_plan *p = plan_for(device, a, backward);
    *ok = p != NULL;
    return p ? p->ws : 0;
}

const char *ork_cudnn_sdpa_plan_kind(int device, const ork_cudnn_sdpa_args *a, int backward) {
    if (!L.ok) return NULL;
    sdpa_plan *p = find_plan(device, a, backward);
    return p && p->ok ? kind_name(p->kind) : NULL;
}

/* 0 (and one warning per process) when the plan needs workspace and ws is missing or
 * not 16-byte aligned: a caller that did not ask attention_ws gets our kernel. */
static int ws_usable(const sdpa_plan *p, const void *ws) {
    if (!p->ws || (ws && !((uintptr_t)ws & 15))) return 1;
    static int told;
    if (!told++)
        ORK_WARN("cudnn sdpa: plan needs %zu B of 16-byte aligned workspace, %s given; using our flash kernel", p->ws,
                 ws ? "misaligned" : "none");
    return 0;
}

static ork_status run_plan(int device, sdpa_plan *p, int n, const int64_t *uids, void **ptrs, void *ws,
                           void *stream) {
    cudnnHandle_t h = handle_for(device);
    cudnnBackendDescriptor_t pack = NULL;
    cudnnStatus_t s;
    if (!h) return ORK_FAIL(ORK_E_CUDA, "cudnn sdpa: no handle for device %d", device);
    if (!ws_usable(p, ws)) return ORK_E_UNSUPPORTED;
    void *cws = p->ws ? (char *)ws + p->off_ws : ws;
    if ((s = L.SetStream(h, (cudaStream_t)stream)) != CUDNN_STATUS_SUCCESS)
        return ORK_FAIL(ORK_E_CUDA, "cudnn sdpa: cudnnSetStream: %s", L.GetErrorString(s));
    if ((s = L.BCreate(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack)) != CUDNN_STATUS_SUCCESS)
        return ORK_FAIL(ORK_E_CUDA, "cudnn sdpa: variant pack: %s", L.GetErrorString(s));
    if ((s = L.BSet(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids)) ||
        (s = L.BSet(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs)) ||
        (s = L.BSet(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &cws)) ||
        (s = L.BFinalize(pack)) || (s = L.BExecute(h, p->plan, pack))) {
        char buf[512] = "";
        L.GetLastErrorString(buf, sizeof buf);
        L.BDestroy(pack);
        return ORK_FAIL(ORK_E_CUDA, "cudnn sdpa: %s (%s graph) execute: %s %s", p->backward ? "bwd" : "fwd",
                        kind_name(p->kind), L.GetErrorString(s), buf);
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
    float scale = scale_of(a), one = 1.0f;
    if (p->kind == K_COMPOSITE) {
        if (!ws_usable(p, ws)) return ORK_E_UNSUPPORTED;
        /* dQ_accum needs no clearing: cuDNN >= 9.6 zeroes it (cudnn-frontend stopped memsetting it there) */
        const int64_t uids[13] = {U_Q, U_K, U_V, U_O, U_STATS, U_SCALE, U_DO, U_DQ, U_DK, U_DV, U_ONE, U_SSUM, U_DQACC};
        void *ptrs[13] = {(void *)q, (void *)k, (void *)v, (void *)y, (void *)lse, &scale, (void *)dy, dq, dk, dv,
                          &one, (char *)ws + p->off_ssum, ws};
        return run_plan(device, p, 13, uids, ptrs, ws, stream);
    }
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
