/* tests/codecs/codec_probe.c — a codec plugin for the loader's checks of the
 * codec kind (test_codecs.c): built as orakul-codec_probe.so (a codec that
 * does nothing, ABI 1.3: loads), orakul-codec_old.so (entry, component and
 * vtable at ABI 1.2: refused, the kind is 1.3's) and orakul-codec_nodecode.so
 * (decode NULL: refused, a required entry). */
#include <orakul/orakul.h>

#include <stdlib.h>

#ifdef CODEC_PROBE_OLD
#undef ORK_ABI_MINOR
#define ORK_ABI_MINOR 2
#endif

static ork_status p_create(const ork_host *h, const void *params, void **self) {
    (void)h, (void)params;
    *self = malloc(1);
    return *self ? ORK_OK : ORK_E_NOMEM;
}
static void p_destroy(void *self) { free(self); }
static ork_status p_open(void *self, const char *path, ork_codec_info *info) {
    (void)self, (void)path;
    *info = (ork_codec_info){.abi = ORK_ABI_INIT(ork_codec_info), .family = "probe", .image_channels = 3,
                             .latent_channels = 3, .spatial_factor = 1, .temporal_factor = 1, .max_frames = 1,
                             .scaling_factor = 1.0, .flags = ORK_CODEC_NO_WEIGHTS};
    return ORK_OK;
}
static ork_status p_load(void *self, const ork_weight_sink *sink) { (void)self, (void)sink; return ORK_OK; }
static ork_status p_code(void *self, ork_graph *g, ork_tensor *in, ork_tensor **out) {
    (void)self, (void)g;
    *out = in;
    return ORK_OK;
}

static const ork_codec_vtable vt = {
    .abi = ORK_ABI_INIT(ork_codec_vtable), .create = p_create, .destroy = p_destroy, .open = p_open,
    .load = p_load, .encode = p_code,
#ifndef CODEC_PROBE_NODECODE
    .decode = p_code,
#endif
};
static const char *const aliases[] = {"probe-codec", NULL};
static const ork_component comp = {.abi = ORK_ABI_INIT(ork_component), .kind = ORK_KIND_CODEC,
                                   .id = "org.orakul.test.codec_probe", .aliases = aliases,
                                   .description = "a codec that hands its input back", .vtable = &vt};
static const ork_component *const comps[] = {&comp, NULL};
static const ork_plugin_entry entry = {.abi = ORK_ABI_INIT(ork_plugin_entry), .name = CODEC_PROBE_NAME,
                                       .version = "1", .description = "codec probe", .components = comps};
ORK_PLUGIN_ENTRY(entry)
