/* tests/flux/test_flux_taef1.c — the FLUX plugin's TAEF1 codec with the real
 * weights (../shared/assets/taef1, read in place, never committed) against
 * the PyTorch reference tests/reference/taef1_ref.py (fixture
 * tests/fixtures/taef1_photos.safetensors: two 128x128 photos): encode ->
 * latents, decode(float32(ref.latents)) -> reconstruction, PSNR of the
 * reconstruction, and the decoder's gradient d sum(decode(z)·R)/dz.
 * Skips (a note, pass) when ../shared is absent.
 *
 * Tolerances (M = max|ref|), from the fixture's advice: torch's own F32 run
 * differs from float64 by 1.8e-6·M (latents) and 5.5e-6·M (recon), so
 *   latents  |c - ref| <= 2e-5·M + 1e-4·|ref|   (~10x margin)
 *   recon    |c - ref| <= 2e-4·M + 1e-4·|ref|   (~35x margin, 20 convs deep)
 *   PSNR     |c - ref| <= 0.1 dB (the issue's bound; torch F32 vs F64: 2e-8
 *            relative, so the measured difference is printed and ~1e-5 dB)
 *   gradient ||c - ref||_2 <= 1e-2·||ref||_2 and max|c - ref| <= 0.1·M: an F32
 *            forward flips ReLU masks where a pre-activation is within
 *            rounding of 0 (torch F32 vs F64: 1.2e-3 in L2), so element-wise
 *            bounds would be wrong; a broken conv/upsample/clamp backward is
 *            O(1) in L2. */
#include "flux_test_util.h"

/* The codec computes in F32 on every backend (plugins/codecs/image/taef1.c, TAEF1_FLAGS), so
 * the CUDA build (FT_GPU) is held to the same bounds on F32 inputs. Its first
 * H200 run, in BF16, was 3.6% / 25% of M off (latents / round trip) and 36%
 * (L2) in the decoder gradient, with PSNR still within 0.04 dB. */
#define LAT_A 2e-5
#define REC_A 2e-4
#define GRAD_L2 1e-2
#define GRAD_MAX 0.1

typedef struct taef1 {
    ft_model m;
    ork_st_file *fx;
} taef1;

/* The real weights' folder in dir; 0 when absent (main then exits 77). */
static int taef1_dir(char *dir, size_t n) {
    char probe[1100];
    if (!ork_test_shared("assets/taef1", dir, n)) return 0;
    snprintf(probe, sizeof probe, "%s/taef1_decoder.safetensors", dir);
    return access(probe, R_OK) == 0;
}

/* Open preset:custom with the TAEF1 codec and the fixture (main checked the weights are there). */
static void taef1_open(taef1 *t) {
    char dir[1024];
    memset(t, 0, sizeof *t);
    CU_ASSERT_FATAL(taef1_dir(dir, sizeof dir));
    const char *kv[] = {"codec", "taef1", "taef1_path", dir, NULL};
    ork_status s = ft_open("preset:custom", kv, &t->m);
    CU_ASSERT_EQUAL_FATAL(s, ORK_OK);
    CU_ASSERT_EQUAL(t->m.info.token_channels, 64);
    CU_ASSERT_EQUAL(t->m.info.pixels_per_token, 16);
    s = ft_load(&t->m);
    CU_ASSERT_EQUAL_FATAL(s, ORK_OK);
    CU_ASSERT_FATAL(ork_st_open(FT_FIXTURES "/taef1_photos.safetensors", &t->fx) == ORK_OK);
}

static void taef1_close(taef1 *t) {
    ft_close(&t->m);
    ork_st_close(t->fx);
}

/* tokens (B, h·w, 64), channel c·4 + ph·2 + pw  <->  latents (B, 16, 2h, 2w) */
static void unpack_tokens(const float *tok, int B, int h, int w, float *z) {
    for (int b = 0; b < B; b++)
        for (int r = 0; r < h; r++)
            for (int c = 0; c < w; c++)
                for (int ch = 0; ch < 64; ch++) {
                    int zc = ch / 4, ph = (ch / 2) % 2, pw = ch % 2;
                    z[(((size_t)b * 16 + zc) * 2 * h + 2 * r + ph) * 2 * w + 2 * c + pw] =
                        tok[(((size_t)b * h + r) * w + c) * 64 + ch];
                }
}
static void pack_latents(const float *z, int B, int h, int w, float *tok) {
    for (int b = 0; b < B; b++)
        for (int r = 0; r < h; r++)
            for (int c = 0; c < w; c++)
                for (int ch = 0; ch < 64; ch++) {
                    int zc = ch / 4, ph = (ch / 2) % 2, pw = ch % 2;
                    tok[(((size_t)b * h + r) * w + c) * 64 + ch] =
                        z[(((size_t)b * 16 + zc) * 2 * h + 2 * r + ph) * 2 * w + 2 * c + pw];
                }
}

static void test_encode(void) {
    taef1 t;
    taef1_open(&t);
    const ork_tensor_api *ta = ork_tensor_api_table();
    const ork_st_tensor *it = ork_st_find(t.fx, "in.images");
    CU_ASSERT_PTR_NOT_NULL_FATAL(it);
    float *img = ft_f32(t.fx, "in.images", NULL);
    size_t nz = 0;
    double *ref = ft_f64(t.fx, "ref.latents", &nz);
    CU_ASSERT_FATAL(img && ref);
    ork_tensor *x, *tok = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_graph_reset(t.m.g), ORK_OK);
    ork_graph_set_grad(t.m.g, 0);
    CU_ASSERT_EQUAL_FATAL(ta->from_host(t.m.g, ORK_F32, 4, it->shape, img, &x), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ft_encode(&t.m, t.m.g, x, &tok), ORK_OK);
    int B = (int)it->shape[0], h = (int)it->shape[2] / 16, w = (int)it->shape[3] / 16;
    /* the encoder frees each intermediate once used (ta->drop): at most the
     * image, a block's input (the residual), the tensor read and the one
     * written, at full resolution (64 channels, F32); without the drops every
     * intermediate stays until the graph resets (measured: 15.3 of them, 3.05 with) */
    size_t full = (size_t)B * 64 * (size_t)it->shape[2] * (size_t)it->shape[3] * 4, peak = ork_arena_peak(t.m.g->arena);
    printf("\n  encode arena peak %zu bytes, %.2f full-resolution activations", peak, (double)peak / (double)full);
    CU_ASSERT(peak <= 4 * full);
    CU_ASSERT_EQUAL(ta->dim(tok, 0), B);
    CU_ASSERT_EQUAL(ta->dim(tok, 1), (int64_t)h * w);
    CU_ASSERT_EQUAL(ta->dim(tok, 2), 64);
    float *th = ft_host(t.m.g, tok), *z = malloc(nz * sizeof *z);
    CU_ASSERT_FATAL(th && z && (size_t)ta->numel(tok) == nz);
    unpack_tokens(th, B, h, w, z);
    CU_ASSERT(ft_cmp("ref.latents (encode)", z, ref, nz, LAT_A, 1e-4));
    printf("\n  ");
    free(img);
    free(ref);
    free(th);
    free(z);
    taef1_close(&t);
}

/* decode(float32(ref.latents)); recon vs ref.recon, PSNR vs ref.psnr. */
static void test_decode_psnr(void) {
    taef1 t;
    taef1_open(&t);
    const ork_tensor_api *ta = ork_tensor_api_table();
    const ork_st_tensor *zt = ork_st_find(t.fx, "ref.latents");
    CU_ASSERT_PTR_NOT_NULL_FATAL(zt);
    int B = (int)zt->shape[0], h = (int)zt->shape[2] / 2, w = (int)zt->shape[3] / 2;
    size_t nz = 0, nr = 0, ni = 0;
    float *z = ft_f32(t.fx, "ref.latents", &nz), *img = ft_f32(t.fx, "in.images", &ni);
    double *rrec = ft_f64(t.fx, "ref.recon", &nr), *rpsnr = ft_f64(t.fx, "ref.psnr", NULL);
    float *tokh = malloc(nz * sizeof *tokh);
    CU_ASSERT_FATAL(z && img && rrec && rpsnr && tokh);
    pack_latents(z, B, h, w, tokh);
    int64_t sh[3] = {B, (int64_t)h * w, 64};
    ork_tensor *tok, *rec = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_graph_reset(t.m.g), ORK_OK);
    ork_graph_set_grad(t.m.g, 0);
    CU_ASSERT_EQUAL_FATAL(ta->from_host(t.m.g, ORK_F32, 3, sh, tokh, &tok), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ft_decode(&t.m, t.m.g, tok, h, w, &rec), ORK_OK);
    CU_ASSERT_EQUAL(ta->ndim(rec), 4);
    CU_ASSERT_EQUAL(ta->dim(rec, 1), 3);
    CU_ASSERT_EQUAL(ta->dim(rec, 2), 16 * h);
    float *rh = ft_host(t.m.g, rec);
    CU_ASSERT_FATAL(rh && (size_t)ta->numel(rec) == nr && nr == ni);
    CU_ASSERT(ft_cmp("ref.recon (decode)", rh, rrec, nr, REC_A, 1e-4));
    size_t per = nr / (size_t)B;
    for (int b = 0; b < B; b++) {
        double se = 0;
        for (size_t i = 0; i < per; i++) {
            double v = fmin(fmax((double)rh[b * per + i], 0.0), 1.0) - (double)img[b * per + i];
            se += v * v;
        }
        double psnr = 10.0 * log10(1.0 / (se / (double)per));
        printf("\n    photo %d: PSNR %.5f dB, torch %.5f dB, difference %.2e dB", b, psnr, rpsnr[b], psnr - rpsnr[b]);
        CU_ASSERT(fabs(psnr - rpsnr[b]) <= 0.1);
        CU_ASSERT(psnr > 15.0); /* real weights: ~22.7 / ~26.7 dB; garbage is 5-7 dB */
    }
    /* the full round trip: the plugin's own encoder output decoded */
    ork_tensor *x, *tok2 = NULL, *rec2 = NULL;
    const ork_st_tensor *it = ork_st_find(t.fx, "in.images");
    CU_ASSERT_EQUAL_FATAL(ta->from_host(t.m.g, ORK_F32, 4, it->shape, img, &x), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ft_encode(&t.m, t.m.g, x, &tok2), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ft_decode(&t.m, t.m.g, tok2, h, w, &rec2), ORK_OK);
    float *rt = ft_host(t.m.g, rec2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    CU_ASSERT(ft_cmp("ref.recon (encode + decode)", rt, rrec, nr, REC_A, 1e-4));
    for (int b = 0; b < B; b++) {
        double se = 0;
        for (size_t i = 0; i < per; i++) {
            double v = fmin(fmax((double)rt[b * per + i], 0.0), 1.0) - (double)img[b * per + i];
            se += v * v;
        }
        double psnr = 10.0 * log10(1.0 / (se / (double)per));
        printf("\n    photo %d round trip: PSNR %.5f dB, torch %.5f dB, difference %.2e dB", b, psnr, rpsnr[b],
               psnr - rpsnr[b]);
        CU_ASSERT(fabs(psnr - rpsnr[b]) <= 0.1);
    }
    free(rt);
    printf("\n  ");
    free(z);
    free(img);
    free(rrec);
    free(rpsnr);
    free(tokh);
    free(rh);
    taef1_close(&t);
}

/* d sum(decode(z) · R) / dz at z = float32(ref.latents[0:1]) */
static void test_decoder_grad(void) {
    taef1 t;
    taef1_open(&t);
    const ork_tensor_api *ta = ork_tensor_api_table();
    const ork_st_tensor *zt = ork_st_find(t.fx, "ref.latents"), *Rt = ork_st_find(t.fx, "in.R");
    CU_ASSERT_FATAL(zt && Rt);
    int h = (int)zt->shape[2] / 2, w = (int)zt->shape[3] / 2;
    size_t nz = 0, ng = 0;
    float *z = ft_f32(t.fx, "ref.latents", &nz), *R = ft_f32(t.fx, "in.R", NULL);
    double *rg = ft_f64(t.fx, "ref.grad.latents", &ng);
    float *tokh = malloc(ng * sizeof *tokh), *gz = malloc(ng * sizeof *gz);
    CU_ASSERT_FATAL(z && R && rg && tokh && gz);
    pack_latents(z, 1, h, w, tokh); /* photo 0 only */
    int64_t sh[3] = {1, (int64_t)h * w, 64};
    ork_tensor *tok, *rec = NULL, *Rd;
    CU_ASSERT_EQUAL_FATAL(ork_graph_reset(t.m.g), ORK_OK);
    ork_graph_set_grad(t.m.g, 1);
    CU_ASSERT_EQUAL_FATAL(ta->from_host(t.m.g, ORK_F32, 3, sh, tokh, &tok), ORK_OK);
    tok->requires_grad = 1;
    ork_tensor *tin = tok; /* the F32 leaf keeps the gradient */
    CU_ASSERT_EQUAL_FATAL(ft_decode(&t.m, t.m.g, tin, h, w, &rec), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ta->from_host(t.m.g, ORK_F32, 4, Rt->shape, R, &Rd), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_backward_from(t.m.g, 1, &rec, &Rd), ORK_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tok->grad);
    float *gt = ft_host(t.m.g, tok->grad);
    CU_ASSERT_PTR_NOT_NULL_FATAL(gt);
    unpack_tokens(gt, 1, h, w, gz);
    double e2 = 0, r2 = 0, emax = 0, M = 0;
    for (size_t i = 0; i < ng; i++) {
        double d = (double)gz[i] - rg[i];
        e2 += d * d;
        r2 += rg[i] * rg[i];
        emax = fmax(emax, fabs(d));
        M = fmax(M, fabs(rg[i]));
    }
    printf("\n    decoder grad: L2 rel %.3g (bound %.2g), max err/M %.3g (bound %.2g)", sqrt(e2 / r2), GRAD_L2, emax / M,
           GRAD_MAX);
    CU_ASSERT(sqrt(e2) <= GRAD_L2 * sqrt(r2));
    CU_ASSERT(emax <= GRAD_MAX * M);
    printf("\n  ");
    ork_graph_set_grad(t.m.g, 0);
    free(z);
    free(R);
    free(rg);
    free(tokh);
    free(gz);
    free(gt);
    taef1_close(&t);
}

static const ork_test_case cases[] = {
    {"taef1 encode: latents vs torch f64", test_encode},
    {"taef1 decode: reconstruction and PSNR vs torch", test_decode_psnr},
    {"taef1 decoder gradient vs torch (norm-wise)", test_decoder_grad},
    {NULL, NULL},
};

/* 77 (skipped, not passed) without the real weights: a pass that compared
 * nothing would read as the check holding. */
static int have_taef1(void) {
    char dir[1024];
    return taef1_dir(dir, sizeof dir);
}

#ifdef FT_GPU
int ork_cuda_device_count(void);
int main(void) {
    if (ork_cuda_device_count() <= 0 || !have_taef1()) return 77;
    return ork_test_run("flux_taef1_cuda", ft_init, ft_clean, cases);
}
#else
int main(void) {
    if (!have_taef1()) return 77;
    return ork_test_run("flux_taef1", ft_init, ft_clean, cases);
}
#endif
