/* tests/reference/codec_old_path.c — writes tests/fixtures/codec_old_path.safetensors:
 * what the FLUX plugin's own codecs gave before they became the image codec
 * plugin's components (issue #30), for tests/codecs/test_codecs.c to compare
 * the new path against bit for bit. Built and run by
 * tests/reference/codec_old_path.sh inside a copy of the revision before the
 * move (26cb3c1), where the codecs are the model's vtable encode/decode; the
 * test runs the same sequence through the core's codec (plugin/model_codec.h).
 *
 * For each codec, on the CPU with F32 weights and activations:
 *   <c>.tokens     encode(in.image)                     (tape off)
 *   <c>.decoded    decode(<c>.in.tokens)                (tape on)
 *   <c>.grad       d sum(decode(t)·R)/dt at t = <c>.in.tokens
 * with in.image and R the 64x64 photo and weights of vae_small_ref.safetensors,
 * and <c>.in.tokens = <c>.tokens (what decode starts from). Codecs: vae1 and
 * vae2 (the small random autoencoders of tests/fixtures), pixel (patch 4) and,
 * when ../shared/assets/taef1 exists, taef1.
 * Usage: test_codec_old_path OUT.safetensors */
#include "../flux/flux_test_util.h"

#ifdef CODEC_NEW_PATH
#define ENCODE(m, g, x, y) ft_encode((m), (g), (x), (y))
#define DECODE(m, g, t, h, w, y) ft_decode((m), (g), (t), (h), (w), (y))
#else
#define ENCODE(m, g, x, y) (m)->vt->encode((m)->self, (g), (x), (y))
#define DECODE(m, g, t, h, w, y) (m)->vt->decode((m)->self, (g), (t), (h), (w), (y))
#endif

#define REF FT_FIXTURES "/vae_small_ref.safetensors"

/* the writer borrows each tensor's data until the commit: kept here */
static float *g_keep[64];
static int g_nkeep;

static ork_status add(ork_st_writer *w, const char *name, ork_graph *g, const ork_tensor *t) {
    const ork_tensor_api *ta = ork_tensor_api_table();
    if (g_nkeep == 64) return ORK_E_INTERNAL;
    float *h = g_keep[g_nkeep++] = ft_host(g, t);
    if (!h) return ORK_E_NOMEM;
    int64_t sh[4];
    for (int i = 0; i < ta->ndim(t); i++) sh[i] = ta->dim(t, i);
    return ork_st_writer_add(w, name, ORK_F32, ta->ndim(t), sh, h, (uint64_t)ta->numel(t) * sizeof(float));
}

static ork_status one(ork_st_writer *w, const char *c, const char *const *kv, ork_st_file *fx) {
    ft_model m;
    const ork_tensor_api *ta = ork_tensor_api_table();
    ORK_TRY(ft_open("preset:custom", kv, &m));
    ORK_TRY(ft_load(&m));
    const ork_st_tensor *it = ork_st_find(fx, "in.image");
    float *img = ft_f32(fx, "in.image", NULL), *R = ft_f32(fx, "in.R", NULL);
    if (!img || !R) return ORK_E_FORMAT;
    char name[64];
    ork_tensor *x, *tok, *t, *dec, *Rd;
    int ppt = m.info.pixels_per_token, h = (int)it->shape[2] / ppt, wd = (int)it->shape[3] / ppt;
    ORK_TRY(ork_graph_reset(m.g));
    ork_graph_set_grad(m.g, 0);
    ORK_TRY(ta->from_host(m.g, ORK_F32, 4, it->shape, img, &x));
    ORK_TRY(ENCODE(&m, m.g, x, &tok));
    snprintf(name, sizeof name, "%s.tokens", c);
    ORK_TRY(add(w, name, m.g, tok));
    float *th = ft_host(m.g, tok);
    int64_t ts[3] = {ta->dim(tok, 0), ta->dim(tok, 1), ta->dim(tok, 2)};
    ORK_TRY(ork_graph_reset(m.g));
    ork_graph_set_grad(m.g, 1);
    ORK_TRY(ta->from_host(m.g, ORK_F32, 3, ts, th, &t));
    t->requires_grad = 1;
    ORK_TRY(DECODE(&m, m.g, t, h, wd, &dec));
    snprintf(name, sizeof name, "%s.decoded", c);
    ORK_TRY(add(w, name, m.g, dec));
    ORK_TRY(ta->from_host(m.g, ORK_F32, 4, it->shape, R, &Rd));
    ORK_TRY(ork_backward_from(m.g, 1, &dec, &Rd));
    snprintf(name, sizeof name, "%s.grad", c);
    ORK_TRY(add(w, name, m.g, t->grad));
    ork_graph_set_grad(m.g, 0);
    free(img); free(R); free(th);
    ft_close(&m);
    return ORK_OK;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s OUT.safetensors\n", argv[0]); return 2; }
    ork_st_file *fx;
    ork_st_writer *w;
    if (ft_init() || ork_st_open(REF, &fx) != ORK_OK || ork_st_writer_new(&w) != ORK_OK) return 1;
    const char *v1[] = {"codec", "vae", "vae_path", FT_FIXTURES "/vae1_small.safetensors", NULL};
    const char *v2[] = {"codec", "vae", "vae_path", FT_FIXTURES "/vae2_small.safetensors", NULL};
    const char *px[] = {"codec", "pixel", "pixel_patch", "4", NULL};
    ork_status s = one(w, "vae1", v1, fx);
    if (s == ORK_OK) s = one(w, "vae2", v2, fx);
    if (s == ORK_OK) s = one(w, "pixel", px, fx);
    char taef1[1024];
    if (s == ORK_OK && ork_test_shared("assets/taef1/taef1_encoder.safetensors", taef1, sizeof taef1)) {
        *strrchr(taef1, '/') = 0;
        const char *tf[] = {"codec", "taef1", "taef1_path", taef1, NULL};
        s = one(w, "taef1", tf, fx);
    }
    if (s == ORK_OK) s = ork_st_writer_meta(w, "source", "tests/reference/codec_old_path.sh (revision 26cb3c1)");
    if (s == ORK_OK) s = ork_st_writer_commit(w, argv[1]);
    ork_st_writer_free(w);
    for (int i = 0; i < g_nkeep; i++) free(g_keep[i]);
    ork_st_close(fx);
    ft_clean();
    fprintf(stderr, "%s: %s\n", argv[1], s == ORK_OK ? "written" : "FAILED");
    return s == ORK_OK ? 0 : 1;
}
