/* tests/vae_diffusers/test_vae_diffusers.c — the flux1-vae codec on a diffusers
 * AutoencoderKL (plugins/codecs/image/flux_vae.c: BFL's names looked up through
 * diffusers' converter mapping). The fixture tests/fixtures/vae1_small_diffusers/vae
 * is tests/fixtures/vae1_small.safetensors (BFL layout) converted and saved by
 * diffusers itself (tests/reference/vae_diffusers_ref.py, which also checks that
 * diffusers' own AutoencoderKL on it encodes to vae_ref.py's tokens). Here:
 *  - same: vae_path as the pipeline folder, its vae/ folder and the
 *    .safetensors file each encode the reference photo to the BFL file's tokens
 *    bit for bit, within the float64 reference's tolerance (test_vae_codec.c's),
 *    and decode float32(ref tokens) to the BFL file's image bit for bit;
 *  - malformed, each refused with one error line: a tensor missing (the line
 *    names diffusers' key and BFL's), a diffusers AutoencoderKL with quant_conv
 *    (not FLUX.1's), an attention weight of the wrong shape, a folder holding
 *    neither layout. */
#include "../flux/flux_test_util.h"

#include <sys/stat.h>
#include <unistd.h>

#define REF FT_FIXTURES "/vae_small_ref.safetensors"
#define BFL FT_FIXTURES "/vae1_small.safetensors"
#define DIFF_PIPE FT_FIXTURES "/vae1_small_diffusers"
#define DIFF_VAE DIFF_PIPE "/vae"
#define DIFF_FILE DIFF_VAE "/diffusion_pytorch_model.safetensors"

static ork_st_file *g_fx;
static char g_tmp[64];
static int g_errors;
static char g_line[1024];

/* the codec's error lines (the FLUX plugin's own peek at vae_path opens the
 * same files as the codec since 84ac33d; any line here is the codec's) */
static void sink(ork_log_level lvl, const char *line, void *user) {
    (void)user;
    if (lvl < ORK_LOG_ERROR || !strstr(line, "codec.flux1-vae")) return;
    if (!g_errors++) snprintf(g_line, sizeof g_line, "%s", line);
}

static int init(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/ork_vaediff_XXXXXX");
    if (!mkdtemp(g_tmp) || ft_init()) return 1;
    return ork_st_open(REF, &g_fx) != ORK_OK;
}
static int clean(void) {
    ork_st_close(g_fx);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0) return 1;
    return ft_clean();
}

/* The FLUX test model with the flux1-vae codec on vae_path (z 4: 16 channels a token). */
static ork_status open_vae(const char *vae_path, ft_model *m) {
    const char *kv[] = {"codec", "vae", "vae_path", vae_path, "in_channels", "16", NULL};
    ork_status s = ft_open("preset:custom", kv, m);
    return s == ORK_OK ? ft_load(m) : s;
}

/* encode in.image -> tokens (*tok, n floats), decode float32(ref tokens) -> *dec (nd floats) */
static int run_vae(const char *vae_path, float **tok, size_t *n, float **dec, size_t *nd) {
    const ork_tensor_api *ta = ork_tensor_api_table();
    ft_model m;
    *tok = *dec = NULL;
    if (open_vae(vae_path, &m) != ORK_OK) {
        ft_close(&m);
        return 0;
    }
    const ork_st_tensor *it = ork_st_find(g_fx, "in.image"), *tt = ork_st_find(g_fx, "v1.ref.tokens");
    float *img = ft_f32(g_fx, "in.image", NULL), *t32 = ft_f32(g_fx, "v1.ref.tokens", NULL);
    ork_tensor *x, *y = NULL, *t, *d = NULL;
    int ok = it && tt && img && t32 && ork_graph_reset(m.g) == ORK_OK;
    ork_graph_set_grad(m.g, 0);
    ok = ok && ta->from_host(m.g, ORK_F32, 4, it->shape, img, &x) == ORK_OK && ft_encode(&m, m.g, x, &y) == ORK_OK &&
         (*tok = ft_host(m.g, y)) != NULL;
    if (ok) *n = (size_t)ta->numel(y);
    ok = ok && ta->from_host(m.g, ORK_F32, 3, tt->shape, t32, &t) == ORK_OK &&
         ft_decode(&m, m.g, t, 16, 16, &d) == ORK_OK && (*dec = ft_host(m.g, d)) != NULL;
    if (ok) *nd = (size_t)ta->numel(d);
    free(img);
    free(t32);
    ft_close(&m);
    return ok;
}

static void test_same(void) {
    float *btok, *bdec;
    size_t bn = 0, bnd = 0, nref = 0;
    CU_ASSERT_FATAL(run_vae(BFL, &btok, &bn, &bdec, &bnd));
    double *rtok = ft_f64(g_fx, "v1.ref.tokens", &nref);
    CU_ASSERT_FATAL(rtok && nref == bn);
    static const char *const forms[] = {DIFF_PIPE, DIFF_VAE, DIFF_FILE};
    for (int i = 0; i < 3; i++) {
        float *tok = NULL, *dec = NULL;
        size_t n = 0, nd = 0;
        int ok = run_vae(forms[i], &tok, &n, &dec, &nd);
        printf("\n  vae_path %s", forms[i] + strlen(FT_FIXTURES) + 1);
        CU_ASSERT(ok);
        if (ok) {
            CU_ASSERT(n == bn && !memcmp(tok, btok, n * sizeof *tok));
            CU_ASSERT(nd == bnd && !memcmp(dec, bdec, nd * sizeof *dec));
            CU_ASSERT(ft_cmp("  tokens vs the float64 reference", tok, rtok, n, 2e-5, 1e-4));
        }
        free(tok);
        free(dec);
    }
    free(btok);
    free(bdec);
    free(rtok);
    printf("\n  ");
}

/* tmp/<name>/diffusion_pytorch_model.safetensors (its path): the fixture without `drop`,
 * with `extra` (F32 of shape ex_shape, ex_ndim dims; NULL: none) added, and
 * `reshape`'s tensor written with shape re_shape (2 dims: same bytes). */
static const char *write_variant(const char *name, const char *drop, const char *extra, int ex_ndim,
                                 const int64_t *ex_shape, const char *reshape, const int64_t *re_shape) {
    static char path[320];
    char dir[256];
    snprintf(dir, sizeof dir, "%s/%s", g_tmp, name);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/diffusion_pytorch_model.safetensors", dir);
    ork_st_file *f = NULL;
    ork_st_writer *w = NULL;
    static float zeros[64 * 64];
    int ok = ork_st_open(DIFF_FILE, &f) == ORK_OK && ork_st_writer_new(&w) == ORK_OK;
    for (size_t i = 0; ok && i < ork_st_count(f); i++) {
        const ork_st_tensor *t = ork_st_at(f, i);
        if (drop && !strcmp(t->name, drop)) continue;
        int re = reshape && !strcmp(t->name, reshape);
        ok = ork_st_writer_add(w, t->name, t->dtype, re ? 2 : t->ndim, re ? re_shape : t->shape, t->data,
                               t->nbytes) == ORK_OK;
    }
    uint64_t ne = 1;
    for (int k = 0; extra && k < ex_ndim; k++) ne *= (uint64_t)ex_shape[k];
    if (ok && extra) ok = ne <= 64 * 64 && ork_st_writer_add(w, extra, ORK_F32, ex_ndim, ex_shape, zeros, ne * 4) == ORK_OK;
    ok = ok && ork_st_writer_commit(w, path) == ORK_OK;
    ork_st_writer_free(w);
    ork_st_close(f);
    CU_ASSERT_FATAL(ok);
    return path;
}

static void expect_refused(const char *vae_path, const char *want1, const char *want2) {
    ft_model m;
    g_errors = 0;
    g_line[0] = 0;
    ork_log_set_sink(sink, NULL);
    ork_status s = open_vae(vae_path, &m);
    ork_log_set_sink(NULL, NULL);
    ft_close(&m);
    printf("\n  %s -> %d: %s", vae_path, (int)s, g_line);
    CU_ASSERT_NOT_EQUAL(s, ORK_OK);
    CU_ASSERT_EQUAL(g_errors, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_line, want1));
    if (want2) CU_ASSERT_PTR_NOT_NULL(strstr(g_line, want2));
}

static void test_malformed(void) {
    const char *d = write_variant("missing", "decoder.up_blocks.0.resnets.1.conv1.weight", NULL, 0, NULL, NULL, NULL);
    expect_refused(d, "missing tensor 'decoder.up_blocks.0.resnets.1.conv1.weight'",
                   "BFL's decoder.up.1.block.1.conv1.weight");
    int64_t qs[4] = {8, 8, 1, 1};
    d = write_variant("quantconv", NULL, "quant_conv.weight", 4, qs, NULL, NULL);
    expect_refused(d, "quant_conv", "not FLUX.1's autoencoder");
    int64_t bad[2] = {32, 128}; /* to_q (64, 64) as (32, 128): the same bytes, the wrong shape */
    d = write_variant("attnshape", NULL, NULL, 0, NULL, "encoder.mid_block.attentions.0.to_q.weight", bad);
    expect_refused(d, "encoder.mid_block.attentions.0.to_q.weight", "wrong shape");
    char empty[128];
    snprintf(empty, sizeof empty, "%s/empty", g_tmp);
    mkdir(empty, 0755);
    expect_refused(empty, "without ae.safetensors", "diffusion_pytorch_model.safetensors");
    printf("\n  ");
}

static const ork_test_case cases[] = {
    {"diffusers folder, vae/ folder, file == BFL's ae.safetensors", test_same},
    {"malformed diffusers autoencoders: one line each", test_malformed},
    {NULL, NULL},
};
ORK_TEST_MAIN("vae_diffusers", init, clean, cases)
