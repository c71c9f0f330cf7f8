/* mse.c — the MSE loss component "org.orakul.mse" (train.loss_type: mse):
 * mean((pred − target)²) over every element, in F32, as ai-toolkit computes
 * F.mse_loss(pred.float(), target.float()). Owns nothing but its instance. */
#include <orakul/orakul.h>

#include <stdlib.h>

typedef struct mse {
    const ork_ops *ops;
} mse;

static ork_status mse_create(const ork_host *host, const void *params, void **self) {
    (void)params;
    mse *m = calloc(1, sizeof *m);
    if (!m) return ORK_E_NOMEM;
    m->ops = host->get_service(host, ORK_SERVICE_OPS);
    if (!m->ops) {
        host->log(host, ORK_LEVEL_ERROR, "the core lacks %s", ORK_SERVICE_OPS);
        free(m);
        return ORK_E_ABI;
    }
    *self = m;
    return ORK_OK;
}

static void mse_destroy(void *self) { free(self); }

static ork_status mse_compute(void *self, ork_graph *g, const ork_loss_inputs *in, ork_tensor **loss) {
    mse *m = self;
    return m->ops->mse(g, in->pred, in->target, loss);
}

static const ork_loss_vtable mse_vtable = {
    .abi = ORK_ABI_INIT(ork_loss_vtable),
    .create = mse_create,
    .destroy = mse_destroy,
    .compute = mse_compute,
};

static const char *const mse_aliases[] = {"mse", "l2", NULL};

static const ork_component mse_component = {
    .abi = ORK_ABI_INIT(ork_component),
    .kind = ORK_KIND_LOSS,
    .id = "org.orakul.mse",
    .aliases = mse_aliases,
    .description = "mean squared error on the flow-matching velocity (ai-toolkit's default)",
    .params = NULL,
    .params_size = 0,
    .vtable = &mse_vtable,
};

static const ork_component *const components[] = {&mse_component, NULL};

static const ork_plugin_entry entry = {
    .abi = ORK_ABI_INIT(ork_plugin_entry),
    .name = "mse",
    .version = "1.0.0",
    .description = "MSE loss",
    .components = components,
};

ORK_PLUGIN_ENTRY(entry)
