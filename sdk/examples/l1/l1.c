/* l1.c — an out-of-tree orakul plugin: the loss component "org.example.l1"
 * (train.loss_type: l1), weight · reduce(|pred − target|), with two
 * documented config keys (train.loss_params.weight, .reduction).
 *
 * Everything a plugin needs is here: the key table, the vtable, the component,
 * the entry table and the one exported symbol. It links nothing from orakul:
 * the ops it computes with come from the host's "orakul.ops/1" service. */
#include <orakul/orakul.h>

#include <stdlib.h>
#include <string.h>

/* The params buffer the core fills from train.loss_params before create(). */
typedef struct l1_params {
    double weight;         /* ORK_PARAM_FLOAT is stored as double */
    const char *reduction; /* ORK_PARAM_STRING: owned by the core, valid during create() */
} l1_params;

static const ork_param l1_keys[] = {
    {.key = "weight", .type = ORK_PARAM_FLOAT, .def = "1.0", .min = 0.0, .max = 1000.0,
     .offset = offsetof(l1_params, weight), .doc = "multiplies the loss"},
    {.key = "reduction", .type = ORK_PARAM_STRING, .def = "mean", .choices = "mean|sum",
     .min = 1, .max = 0, /* min > max: no range */
     .offset = offsetof(l1_params, reduction), .doc = "mean or sum over every element"},
    {.key = NULL},
};

typedef struct l1 {
    const ork_ops *ops;
    float weight;
    int sum; /* reduction: 1 = sum, 0 = mean */
} l1;

static ork_status l1_create(const ork_host *host, const void *params, void **self) {
    const l1_params *p = params;
    l1 *m = calloc(1, sizeof *m);
    if (!m) return ORK_E_NOMEM;
    m->ops = host->get_service(host, ORK_SERVICE_OPS);
    if (!m->ops) {
        host->log(host, ORK_LEVEL_ERROR, "this orakul lacks the %s service", ORK_SERVICE_OPS);
        free(m);
        return ORK_E_UNSUPPORTED;
    }
    m->weight = (float)p->weight;
    m->sum = strcmp(p->reduction, "sum") == 0; /* copy what we need: params die after create */
    *self = m;
    return ORK_OK;
}

static void l1_destroy(void *self) { free(self); }

/* |d| = relu(d) + relu(−d): differentiable with the ops every core provides. */
static ork_status l1_compute(void *self, ork_graph *g, const ork_loss_inputs *in, ork_tensor **loss) {
    const l1 *m = self;
    const ork_ops *o = m->ops;
    ork_tensor *neg_t, *d, *neg_d, *pos, *negpart, *abs_d, *red;
    ORK_TRY(o->scale(g, in->target, -1.0f, &neg_t));  /* (B, N, C) */
    ORK_TRY(o->add(g, in->pred, neg_t, &d));          /* (B, N, C) pred − target */
    ORK_TRY(o->scale(g, d, -1.0f, &neg_d));
    ORK_TRY(o->relu(g, d, &pos));
    ORK_TRY(o->relu(g, neg_d, &negpart));
    ORK_TRY(o->add(g, pos, negpart, &abs_d));         /* (B, N, C) |pred − target| */
    ORK_TRY(m->sum ? o->sum(g, abs_d, &red) : o->mean(g, abs_d, &red)); /* (1) */
    return o->scale(g, red, m->weight, loss);
}

static const ork_loss_vtable l1_vtable = {
    .abi = ORK_ABI_INIT(ork_loss_vtable),
    .create = l1_create,
    .destroy = l1_destroy,
    .compute = l1_compute, /* .prepare stays NULL: nothing to load */
};

static const char *const l1_aliases[] = {"l1", NULL};

static const ork_component l1_component = {
    .abi = ORK_ABI_INIT(ork_component),
    .kind = ORK_KIND_LOSS,
    .id = "org.example.l1",
    .aliases = l1_aliases,
    .description = "mean absolute error on the flow-matching velocity (SDK example)",
    .params = l1_keys,
    .params_size = sizeof(l1_params),
    .vtable = &l1_vtable,
};

static const ork_component *const components[] = {&l1_component, NULL};

static const ork_plugin_entry entry = {
    .abi = ORK_ABI_INIT(ork_plugin_entry),
    .name = "example_l1", /* the file is orakul-example_l1.so */
    .version = "1.0.0",
    .description = "orakul SDK example: an L1 loss",
    .components = components,
};

ORK_PLUGIN_ENTRY(entry)
