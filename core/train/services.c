/* train/services.c — the safetensors service table over io/safetensors.h,
 * and the registration of every core service with the host. */
#include "train/services.h"

#include "io/safetensors.h"
#include "plugin/host.h"
#include "tensor/ops.h"
#include "text/tokenizer.h"

#include <orakul/safetensors.h>
#include <string.h>

static void fill_info(const ork_st_tensor *t, ork_st_info *out) {
    memset(out, 0, sizeof *out);
    out->name = t->name;
    out->dtype = t->dtype;
    out->ndim = t->ndim;
    for (int i = 0; i < t->ndim && i < 8; i++) out->shape[i] = t->shape[i];
    out->nbytes = t->nbytes;
    out->data = t->data;
}

static ork_status s_open(const char *path, ork_st_set **out) { return ork_st_set_open(path, out); }
static void s_close(ork_st_set *s) { ork_st_set_close(s); }
static int64_t s_count(const ork_st_set *s) { return (int64_t)ork_st_set_count(s); }
static ork_status s_at(const ork_st_set *s, int64_t i, ork_st_info *out) {
    if (i < 0 || (size_t)i >= ork_st_set_count(s)) return ORK_E_INVALID;
    fill_info(ork_st_set_at(s, (size_t)i), out);
    return ORK_OK;
}
static ork_status s_find(const ork_st_set *s, const char *name, ork_st_info *out) {
    const ork_st_tensor *t = ork_st_set_find(s, name);
    if (!t) return ORK_E_INVALID;
    fill_info(t, out);
    return ORK_OK;
}
static const char *s_meta(const ork_st_set *s, const char *key) {
    if (ork_st_set_count(s) == 0) return NULL;
    (void)key;
    return NULL; /* sets span several files; per-file metadata is not exposed yet */
}
static ork_status s_read_f32(const ork_st_info *t, float *dst) {
    ork_st_tensor tt;
    memset(&tt, 0, sizeof tt);
    tt.name = t->name;
    tt.dtype = t->dtype;
    tt.ndim = t->ndim;
    for (int i = 0; i < t->ndim; i++) tt.shape[i] = t->shape[i];
    tt.nbytes = t->nbytes;
    tt.data = t->data;
    return ork_st_read_f32(&tt, dst);
}

static const ork_safetensors_api st_api = {
    .abi = ORK_ABI_INIT(ork_safetensors_api),
    .open = s_open,
    .close = s_close,
    .count = s_count,
    .at = s_at,
    .find = s_find,
    .meta = s_meta,
    .read_f32 = s_read_f32,
};

ork_status ork_services_register(void) {
    ORK_TRY(ork_host_register_service(ORK_SERVICE_SAFETENSORS, &st_api));
    ORK_TRY(ork_host_register_service(ORK_SERVICE_OPS, ork_ops_table()));
    ORK_TRY(ork_host_register_service(ORK_SERVICE_TOKENIZER, ork_tokenizer_api_table()));
    return ork_host_register_service(ORK_SERVICE_TENSOR, ork_tensor_api_table());
}
