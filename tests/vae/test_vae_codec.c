/* tests/vae/test_vae_codec.c — the FLUX autoencoder codecs (flux1-vae, flux2-vae:
 * plugins/codecs/image/flux_vae.c) as the FLUX model picks them (codec vae)
 * with small random BFL autoencoders (tests/fixtures/vae{1,2}_small.safetensors,
 * ch 32, ch_mult [1, 2], 1/2 res blocks, z 4 / 8: the geometry comes from
 * the checkpoint's shapes) against the PyTorch reference
 * tests/reference/vae_ref.py (tests/fixtures/vae_small_ref.safetensors): a
 * 64x64 photo encoded to tokens, float32(ref tokens) decoded, and the
 * gradient d sum(decode(t)·R)/dt, for FLUX.1 (scale/shift) and FLUX.2 (quant
 * convs, BatchNorm). Plus the open/load errors: codec vae without vae_path, a
 * missing file, a folder without ae.safetensors, a denoiser file given as the
 * VAE, token channels that do not match the denoiser, a bad image size.
 *
 * Tolerances (M = max|ref| of the tensor). The reference is float64 on the
 * same BF16-rounded weights; torch's own F32 run differs from it by
 * 1.3e-6·M (tokens), 1.8e-6·M (decoded), 3.5e-6·M (gradient) (the script
 * prints and stores these). Our F32 kernels sum in other orders (blocked GEMM,
 * im2col convs, matmul-softmax-matmul attention), so we allow ~10x torch's:
 *   tokens, decoded: |c − ref| <= 2e-5·M + 1e-4·|ref|
 *   gradient:        |c − ref| <= 5e-5·M + 1e-4·|ref|
 * Swish is smooth, so no activation mask flips: element-wise bounds are
 * sound. A wrong pad side, group count, scale/shift, BatchNorm direction or
 * packing order gives errors of O(M) (checked while writing this test by
 * perturbing each). */
#include "../flux/flux_test_util.h"

#include <sys/stat.h>
#include <unistd.h>

#define REF FT_FIXTURES "/vae_small_ref.safetensors"

static ork_st_file *g_fx;

static int init(void) {
    if (ft_init()) return 1;
    return ork_st_open(REF, &g_fx) != ORK_OK;
}
static int clean(void) {
    ork_st_close(g_fx);
    return ft_clean();
}

static const char *vae_file(int v) {
    return v == 1 ? FT_FIXTURES "/vae1_small.safetensors" : FT_FIXTURES "/vae2_small.safetensors";
}

static void open_vae(int v, ft_model *m) {
    const char *kv[] = {"codec", "vae", "vae_path", vae_file(v), NULL};
    CU_ASSERT_EQUAL_FATAL(ft_open("preset:custom", kv, m), ORK_OK);
    CU_ASSERT_EQUAL(m->info.token_channels, v == 1 ? 16 : 32);
    CU_ASSERT_EQUAL(m->info.pixels_per_token, 4);
    CU_ASSERT_EQUAL_FATAL(ft_load(m), ORK_OK);
}

/* Encode the fixture photo with the tape off; the tokens against torch's
 * (what names them in the report). 1 when they match. *peak: the graph's
 * arena peak after it (a fresh graph: the encode's); *L, *full: the mid
 * attention's tokens and one full-resolution activation's bytes (ch 32, F32). */
static int encode_checked(ft_model *m, int v, const char *what, size_t *peak, size_t *L, size_t *full) {
    const ork_tensor_api *ta = ork_tensor_api_table();
    char name[64];
    const ork_st_tensor *it = ork_st_find(g_fx, "in.image");
    float *img = ft_f32(g_fx, "in.image", NULL), *th = NULL;
    size_t nt = 0;
    snprintf(name, sizeof name, "v%d.ref.tokens", v);
    double *rtok = ft_f64(g_fx, name, &nt);
    ork_tensor *x, *tok = NULL;
    int ok = it && img && rtok && ork_graph_reset(m->g) == ORK_OK;
    ork_graph_set_grad(m->g, 0);
    ok = ok && ta->from_host(m->g, ORK_F32, 4, it->shape, img, &x) == ORK_OK &&
         ft_encode(m, m->g, x, &tok) == ORK_OK;
    ok = ok && ta->ndim(tok) == 3 && (size_t)ta->numel(tok) == nt && ta->dim(tok, 1) == 256 && (th = ft_host(m->g, tok));
    if (ok) {
        *peak = ork_arena_peak(m->g->arena);
        *L = (size_t)(it->shape[2] / 2) * (size_t)(it->shape[3] / 2);
        *full = 32 * (size_t)it->shape[2] * (size_t)it->shape[3] * 4;
        ok = ft_cmp(what, th, rtok, nt, 2e-5, 1e-4);
    }
    free(img); free(rtok); free(th);
    return ok;
}

static void check_version(int v) {
    ft_model m;
    open_vae(v, &m);
    const ork_tensor_api *ta = ork_tensor_api_table();
    char name[64];
    /* encode. The encoder frees each intermediate once used (ta->drop): its peak
     * is the mid attention's scores and their softmax (L = (H/2)·(W/2), F32)
     * beside a few full-resolution activations — without the drops every
     * intermediate stays until the graph resets (measured: 21.6 MB here, 9.8 with) */
    size_t peak = 0, L = 0, full = 0;
    snprintf(name, sizeof name, "FLUX.%d tokens (encode)", v);
    CU_ASSERT(encode_checked(&m, v, name, &peak, &L, &full));
    printf("\n  encode arena peak %zu bytes (bound %zu)", peak, 2 * L * L * 4 + 6 * full);
    CU_ASSERT(peak <= 2 * L * L * 4 + 6 * full);
    const ork_st_tensor *it = ork_st_find(g_fx, "in.image");
    size_t nd = 0, ng = 0;
    snprintf(name, sizeof name, "v%d.ref.tokens", v);
    float *tok32 = ft_f32(g_fx, name, NULL);
    const ork_st_tensor *tt = ork_st_find(g_fx, name);
    snprintf(name, sizeof name, "v%d.ref.decoded", v);
    double *rdec = ft_f64(g_fx, name, &nd);
    snprintf(name, sizeof name, "v%d.ref.grad.tokens", v);
    double *rgrad = ft_f64(g_fx, name, &ng);
    float *R = ft_f32(g_fx, "in.R", NULL);
    CU_ASSERT_FATAL(it && tok32 && tt && rdec && rgrad && R);
    /* decode float32(ref tokens), with the gradient */
    ork_tensor *t, *dec = NULL, *Rd;
    CU_ASSERT_EQUAL_FATAL(ork_graph_reset(m.g), ORK_OK);
    ork_graph_set_grad(m.g, 1);
    CU_ASSERT_EQUAL_FATAL(ta->from_host(m.g, ORK_F32, 3, tt->shape, tok32, &t), ORK_OK);
    t->requires_grad = 1;
    CU_ASSERT_EQUAL_FATAL(ft_decode(&m, m.g, t, 16, 16, &dec), ORK_OK);
    CU_ASSERT_EQUAL_FATAL((size_t)ta->numel(dec), nd);
    CU_ASSERT_EQUAL(ta->dim(dec, 2), 64);
    float *dh = ft_host(m.g, dec);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dh);
    snprintf(name, sizeof name, "FLUX.%d decoded (decode)", v);
    CU_ASSERT(ft_cmp(name, dh, rdec, nd, 2e-5, 1e-4));
    CU_ASSERT_EQUAL_FATAL(ta->from_host(m.g, ORK_F32, 4, it->shape, R, &Rd), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_backward_from(m.g, 1, &dec, &Rd), ORK_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t->grad);
    float *gh = ft_host(m.g, t->grad);
    CU_ASSERT_PTR_NOT_NULL_FATAL(gh);
    snprintf(name, sizeof name, "FLUX.%d d sum(decode(t)·R)/dt", v);
    CU_ASSERT(ft_cmp(name, gh, rgrad, ng, 5e-5, 1e-4));
    printf("\n  ");
    ork_graph_set_grad(m.g, 0);
    free(tok32); free(rdec); free(rgrad); free(R); free(dh); free(gh);
    ft_close(&m);
}

/* The encode's mid attention in blocks of query rows (what a 1536² encode
 * takes: its whole scores are 5 GiB, twice): ORK_VAE_ATTN_KIB=64 gives blocks
 * of 16 of the 1024 rows here. The tokens still match torch as closely, and
 * the peak is a few activations, no whole (L, L) scores. */
static void test_attention_blocks(void) {
    for (int v = 1; v <= 2; v++) {
        ft_model m;
        open_vae(v, &m);
        char name[64];
        size_t peak = 0, L = 0, full = 0;
        snprintf(name, sizeof name, "FLUX.%d tokens (encode, attention in blocks)", v);
        setenv("ORK_VAE_ATTN_KIB", "64", 1);
        CU_ASSERT(encode_checked(&m, v, name, &peak, &L, &full));
        unsetenv("ORK_VAE_ATTN_KIB");
        printf("\n  FLUX.%d encode, attention in blocks: arena peak %zu bytes (whole scores %zu)", v, peak, L * L * 4);
        CU_ASSERT(peak <= 6 * full && peak < L * L * 4);
        ft_close(&m);
    }
    printf("\n  ");
}

static void test_flux1(void) { check_version(1); }
static void test_flux2(void) { check_version(2); }

/* codec auto picks the vae when vae_path is set; a folder holding ae.safetensors works */
static void test_auto_and_folder(void) {
    char dir[] = "/tmp/ork_vae_XXXXXX", path[256];
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/ae.safetensors", dir);
    CU_ASSERT_FATAL(ft_copy(vae_file(2), path));
    const char *kv[] = {"vae_path", dir, NULL};
    ft_model m;
    CU_ASSERT_EQUAL(ft_open("preset:custom", kv, &m), ORK_OK);
    CU_ASSERT_EQUAL(m.info.token_channels, 32);
    int n = 0;
    for (int i = 0; i < m.info.n_weights; i++) n += (m.info.weights[i].flags & ORK_WEIGHT_CODEC) != 0;
    CU_ASSERT(n > 100); /* the autoencoder's convs and norms are declared codec weights */
    ft_close(&m);
    unlink(path);
    /* the folder without ae.safetensors */
    CU_ASSERT_EQUAL(ft_open("preset:custom", kv, &m), ORK_E_CONFIG);
    ft_close(&m);
    rmdir(dir);
}

static void test_errors(void) {
    ft_model m;
    const char *no_path[] = {"codec", "vae", NULL};
    CU_ASSERT_EQUAL(ft_open("preset:custom", no_path, &m), ORK_E_CONFIG);
    ft_close(&m);
    const char *missing[] = {"codec", "vae", "vae_path", "/nonexistent/ae.safetensors", NULL};
    CU_ASSERT_EQUAL(ft_open("preset:custom", missing, &m), ORK_E_CONFIG);
    ft_close(&m);
    const char *denoiser[] = {"codec", "vae", "vae_path", FT_FIXTURES "/flux1_small_bfl.safetensors", NULL};
    CU_ASSERT_EQUAL(ft_open("preset:custom", denoiser, &m), ORK_E_FORMAT);
    ft_close(&m);
    /* FLUX.1 small VAE gives 16-channel tokens; a denoiser taking 64 refuses it */
    const char *chans[] = {"codec", "vae", "vae_path", FT_FIXTURES "/vae1_small.safetensors", "in_channels", "64", NULL};
    CU_ASSERT_EQUAL(ft_open("preset:custom", chans, &m), ORK_E_CONFIG);
    ft_close(&m);
    /* an image whose side is not a multiple of pixels_per_token (4); tokens of the wrong width */
    open_vae(1, &m);
    const ork_tensor_api *ta = ork_tensor_api_table();
    int64_t sh[4] = {1, 3, 10, 12}, st[3] = {1, 4, 15};
    ork_tensor *x, *y = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_graph_reset(m.g), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ta->empty(m.g, ORK_F32, 4, sh, &x), ORK_OK);
    CU_ASSERT_EQUAL(ft_encode(&m, m.g, x, &y), ORK_E_INVALID);
    CU_ASSERT_EQUAL_FATAL(ta->empty(m.g, ORK_F32, 3, st, &x), ORK_OK);
    CU_ASSERT_EQUAL(ft_decode(&m, m.g, x, 2, 2, &y), ORK_E_INVALID);
    ft_close(&m);
}

static const ork_test_case cases[] = {
    {"FLUX.1 AE: encode, decode, gradient vs torch f64", test_flux1},
    {"FLUX.2 AE: encode, decode, gradient vs torch f64", test_flux2},
    {"encode: the mid attention in blocks of query rows", test_attention_blocks},
    {"codec auto with vae_path; a folder with ae.safetensors", test_auto_and_folder},
    {"vae open and input errors", test_errors},
    {NULL, NULL},
};

ORK_TEST_MAIN("vae_codec", init, clean, cases)
