/* tests/plugin/probe.c — the tiny plugins the loader tests load. One source,
 * built many times by tests/plugin/CMakeLists.txt with -D switches, each
 * build good or broken in exactly one way:
 *   PROBE_NAME      entry name and component id stem (required)
 *   PROBE_VERSION   the plugin's version string (tells copies apart)
 *   PROBE_ID        the loss component's id (default "test." PROBE_NAME)
 *   PROBE_ALL_KINDS also a model, an optimizer and a quant component
 *   PROBE_ENTRY_MAJOR / PROBE_ENTRY_MINOR / PROBE_ENTRY_SIZE   the entry's header
 *   PROBE_COMP_SIZE / PROBE_VT_SIZE   the loss component's / vtable's struct_size
 *   PROBE_NO_<fn>   leave that required vtable entry NULL
 *   PROBE_BAD_OFFSET  a key that lies outside params_size
 *   PROBE_INIT_FAILS  init returns ORK_E_UNSUPPORTED
 *   PROBE_JUNK_TAIL   put non-zero bytes right after the loss vtable: the
 *                     core must not copy them (struct_size says where it ends)
 * Owns nothing at run time. */
#include <orakul/orakul.h>

#include <string.h>

#ifndef PROBE_VERSION
#define PROBE_VERSION "0.1"
#endif
#ifndef PROBE_ID
#define PROBE_ID "test." PROBE_NAME
#endif
#ifndef PROBE_ENTRY_MAJOR
#define PROBE_ENTRY_MAJOR ORK_ABI_MAJOR
#endif
#ifndef PROBE_ENTRY_MINOR
#define PROBE_ENTRY_MINOR ORK_ABI_MINOR
#endif
#ifndef PROBE_ENTRY_SIZE
#define PROBE_ENTRY_SIZE sizeof(ork_plugin_entry)
#endif
#ifndef PROBE_COMP_SIZE
#define PROBE_COMP_SIZE sizeof(ork_component)
#endif
#ifndef PROBE_VT_SIZE
#define PROBE_VT_SIZE sizeof(ork_loss_vtable)
#endif
#define HDR(size) { (uint32_t)(size), ORK_ABI_MAJOR, ORK_ABI_MINOR }
#define STUB static __attribute__((unused)) /* some builds leave a stub out */

/* ---- stubs: never called by the loader tests ---------------------------- */
STUB ork_status p_create(const ork_host *h, const void *params, void **self) {
    (void)h; (void)params; *self = NULL; return ORK_OK;
}
STUB void p_destroy(void *self) { (void)self; }
STUB ork_status p_compute(void *s, ork_graph *g, const ork_loss_inputs *in, ork_tensor **l) {
    (void)s; (void)g; (void)in; *l = NULL; return ORK_E_UNSUPPORTED;
}

#if defined(PROBE_NO_create)
#define CREATE NULL
#else
#define CREATE p_create
#endif
#if defined(PROBE_NO_compute)
#define COMPUTE NULL
#else
#define COMPUTE p_compute
#endif

/* ---- the loss component: keys of every type ----------------------------- */
typedef struct probe_params {
    double weight;
    int64_t steps;
    int32_t flag;
    const char *mode;
    double betas[2];
} probe_params;

static const ork_param probe_keys[] = {
    {.key = "weight", .type = ORK_PARAM_FLOAT, .def = "1.0", .min = 0, .max = 10,
     .offset = offsetof(probe_params, weight), .doc = "Scale of the loss."},
    {.key = "steps", .type = ORK_PARAM_INT, .def = "3", .min = 1, .max = 100,
     .offset = offsetof(probe_params, steps), .doc = "How many steps."},
    {.key = "flag", .type = ORK_PARAM_BOOL, .def = "false", .min = 1, .max = 0,
     .offset = offsetof(probe_params, flag), .doc = "A switch."},
    {.key = "mode", .type = ORK_PARAM_STRING, .def = "sum", .choices = "sum|mean", .min = 1, .max = 0,
     .offset = offsetof(probe_params, mode), .doc = "Reduction."},
    {.key = "betas", .type = ORK_PARAM_FLOAT, .count = 2, .def = "[0.9, 0.999]", .min = 0, .max = 1,
     .offset = offsetof(probe_params, betas), .doc = "Two coefficients."},
#ifdef PROBE_BAD_OFFSET
    {.key = "stray", .type = ORK_PARAM_FLOAT, .def = "0", .min = 1, .max = 0,
     .offset = sizeof(probe_params), .doc = "Lies past the buffer."},
#endif
    {.key = NULL},
};

/* The vtable, followed in memory by a pointer a newer core might read as an
 * appended field: with PROBE_JUNK_TAIL it is non-zero. */
static const struct {
    ork_loss_vtable vt;
    void *tail;
} loss_vt = {
    .vt = {.abi = HDR(PROBE_VT_SIZE), .create = CREATE, .destroy = p_destroy, .compute = COMPUTE},
#ifdef PROBE_JUNK_TAIL
    .tail = (void *)&loss_vt,
#endif
};

static const char *const loss_aliases[] = {PROBE_NAME, NULL};
static const struct {
    ork_component c;
    void *tail;
} loss = {
    .c = {.abi = HDR(PROBE_COMP_SIZE), .kind = ORK_KIND_LOSS, .id = PROBE_ID,
          .aliases = loss_aliases, .description = "A probe loss (" PROBE_VERSION ").",
          .params = probe_keys, .params_size = sizeof(probe_params), .vtable = &loss_vt.vt},
#ifdef PROBE_JUNK_TAIL
    .tail = (void *)&loss,
#endif
};

#ifdef PROBE_ALL_KINDS
/* As far as `orakul plan` looks, a model with an image codec (pixels_per_token,
 * encode): plan refuses what run would refuse, and run refuses a model without one. */
STUB ork_status p_open(void *s, const char *n, ork_model_info *i) {
    (void)s; (void)n;
    i->variant = "probe", i->token_channels = 48, i->pixels_per_token = 4, i->context_dim = 32;
    return ORK_OK;
}
STUB ork_status p_encode(void *s, ork_graph *g, ork_tensor *img, ork_tensor **t) {
    (void)s; (void)g; (void)img; (void)t; return ORK_E_UNSUPPORTED;
}
STUB ork_status p_load(void *s, const ork_weight_sink *k) { (void)s; (void)k; return ORK_OK; }
STUB ork_status p_begin(void *s, ork_graph *g, const ork_model_inputs *in, ork_carry *c) {
    (void)s; (void)g; (void)in; (void)c; return ORK_OK;
}
STUB ork_status p_block(void *s, ork_graph *g, int i, ork_carry *c) { (void)s; (void)g; (void)i; (void)c; return ORK_OK; }
STUB ork_status p_state(void *s, ork_dtype dt, int64_t n, size_t *b) { (void)s; (void)dt; (void)n; *b = 0; return ORK_OK; }
STUB ork_status p_step(void *s, const ork_opt_step *st, ork_opt_param *p, int n) { (void)s; (void)st; (void)p; (void)n; return ORK_OK; }
STUB ork_status p_layout(void *s, int64_t r, int64_t c, ork_quant_layout *o) { (void)s; (void)r; (void)c; (void)o; return ORK_OK; }
STUB ork_status p_quant(void *s, const char *n, ork_dtype dt, const void *src, int64_t r, int64_t c,
                          int t, void *q, float *sc) {
    (void)s; (void)n; (void)dt; (void)src; (void)r; (void)c; (void)t; (void)q; (void)sc; return ORK_OK;
}
STUB ork_status p_deq(void *s, ork_device d, void *st, const void *q, const float *sc, int64_t r,
                        int64_t c, ork_dtype dt, void *dst) {
    (void)s; (void)d; (void)st; (void)q; (void)sc; (void)r; (void)c; (void)dt; (void)dst; return ORK_OK;
}

#ifdef PROBE_NO_block
#define BLOCK NULL
#else
#define BLOCK p_block
#endif
#ifdef PROBE_NO_step
#define STEP NULL
#else
#define STEP p_step
#endif
#ifdef PROBE_NO_dequantize
#define DEQ NULL
#else
#define DEQ p_deq
#endif

static const ork_model_vtable model_vt = {
    .abi = ORK_ABI_INIT(ork_model_vtable), .create = p_create, .destroy = p_destroy,
    .open = p_open, .load = p_load, .begin = p_begin, .block = BLOCK, .encode = p_encode};
static const ork_optimizer_vtable opt_vt = {
    .abi = ORK_ABI_INIT(ork_optimizer_vtable), .create = p_create, .destroy = p_destroy,
    .state_bytes = p_state, .step = STEP};
static const ork_quant_vtable quant_vt = {
    .abi = ORK_ABI_INIT(ork_quant_vtable), .create = p_create, .destroy = p_destroy,
    .layout = p_layout, .quantize = p_quant, .dequantize = DEQ};
static const char *const model_aliases[] = {PROBE_NAME "-model", NULL};
static const ork_component model = {
    .abi = ORK_ABI_INIT(ork_component), .kind = ORK_KIND_MODEL, .id = PROBE_ID ".model",
    .aliases = model_aliases, .description = "A probe model.", .vtable = &model_vt};
static const ork_component opt = {
    .abi = ORK_ABI_INIT(ork_component), .kind = ORK_KIND_OPTIMIZER, .id = PROBE_ID ".opt",
    .description = "A probe optimizer.", .vtable = &opt_vt};
static const ork_component quant = {
    .abi = ORK_ABI_INIT(ork_component), .kind = ORK_KIND_QUANT, .id = PROBE_ID ".quant",
    .description = "A probe quantizer.", .vtable = &quant_vt};
#endif

static const ork_component *const components[] = {
    &loss.c,
#ifdef PROBE_ALL_KINDS
    &model, &opt, &quant,
#endif
    NULL,
};

/* init: say through the host log what get_service answered, so the tests can
 * check the prefix and the lookups ("test.svc/1" is registered by the test). */
STUB ork_status p_init(const ork_host *h) {
    h->log(h, ORK_LEVEL_INFO, "init: core %s, test.svc/1=%s, test.svc/2=%s", h->core_version,
           h->get_service(h, "test.svc/1") ? "found" : "null",
           h->get_service(h, "test.svc/2") ? "found" : "null");
#ifdef PROBE_INIT_FAILS
    return ORK_E_UNSUPPORTED;
#else
    return ORK_OK;
#endif
}

static const ork_plugin_entry entry = {
    .abi = {(uint32_t)(PROBE_ENTRY_SIZE), PROBE_ENTRY_MAJOR, PROBE_ENTRY_MINOR},
    .name = PROBE_NAME,
    .version = PROBE_VERSION,
    .description = "A loader test plugin.",
    .init = p_init,
    .components = components,
};

#ifndef PROBE_NO_ENTRY
ORK_PLUGIN_ENTRY(entry)
#else
const ork_plugin_entry *probe_not_the_entry(void) { return &entry; }
#endif
