/* test_train_e2e.c — end-to-end training through `orakul run` on the CPU with
 * the quickstart's model (FLUX.1 architecture, hidden 96, 2 double + 2 single
 * blocks, pixel codec) and the three committed photos at 64 px:
 *  - quickstart_shape: exit 0, the loss falls clearly, the LoRA file holds
 *    exactly the 26 expected kohya modules with the right shapes, alpha,
 *    dtype and metadata, and max_step_saves_to_keep deletes older step files;
 *  - resume_bitwise: 40 steps straight == 20 steps, then the same config with
 *    steps: 40 resuming from the state file: the printed losses of steps
 *    21..40, the final LoRA file and the final state file are bit-identical. */
#include "train_test_util.h"

#include "io/safetensors.h"

#define H 96          /* hidden_size */
#define MLP (4 * H)   /* FLUX mlp_ratio 4 */
#define RANK 16

#if TT_CASE == 1
typedef struct { const char *module; int64_t out, in; } mod_shape;

/* The quickstart model's LoRA targets (FLUX.1 block layout, kohya spelling). */
static int expected_modules(mod_shape *m) {
    static char names[26][96];
    int n = 0;
    static const struct { const char *s; int64_t out, in; } dbl[] = {
        {"img_attn_qkv", 3 * H, H}, {"img_attn_proj", H, H}, {"img_mlp_0", MLP, H}, {"img_mlp_2", H, MLP},
        {"img_mod_lin", 6 * H, H},  {"txt_attn_qkv", 3 * H, H}, {"txt_attn_proj", H, H}, {"txt_mlp_0", MLP, H},
        {"txt_mlp_2", H, MLP},      {"txt_mod_lin", 6 * H, H}};
    static const struct { const char *s; int64_t out, in; } sgl[] = {
        {"linear1", 3 * H + MLP, H}, {"linear2", H, H + MLP}, {"modulation_lin", 3 * H, H}};
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < 10; k++, n++) {
            tt_fmt(names[n], sizeof names[n], "lora_unet_double_blocks_%d_%s", b, dbl[k].s);
            m[n] = (mod_shape){names[n], dbl[k].out, dbl[k].in};
        }
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < 3; k++, n++) {
            tt_fmt(names[n], sizeof names[n], "lora_unet_single_blocks_%d_%s", b, sgl[k].s);
            m[n] = (mod_shape){names[n], sgl[k].out, sgl[k].in};
        }
    return n;
}

static void test_quickstart_shape(void) {
    char root[1024], out[1100], data[1100], cfg[1100], log[1100];
    CU_ASSERT_FATAL(tt_setup("e2e", root, sizeof root) == 0);
    tt_fmt(out, sizeof out, "%s/out", root);
    tt_fmt(data, sizeof data, "%s/data", root);
    tt_fmt(cfg, sizeof cfg, "%s/train.yaml", root);
    tt_fmt(log, sizeof log, "%s/run", root);
    tt_cfg c = tt_cfg_default(out, data);
    c.steps = 60;
    c.save_every = 20;
    c.keep = 2;
    c.dtype = "float16";
    CU_ASSERT_FATAL(tt_write_config(cfg, &c) == 0);
    CU_ASSERT_FATAL(tt_run(cfg, log, 150) == 0);

    /* the loss falls: log_every 1 prints every step */
    char lo[1200];
    tt_fmt(lo, sizeof lo, "%s.out", log);
    static tt_losses L;
    CU_ASSERT_FATAL(tt_parse_losses(lo, &L) == 60);
    for (int i = 0; i < L.n; i++) CU_ASSERT(L.step[i] == i + 1 && isfinite(L.loss[i]));
    double first = 0, last = 0;
    for (int i = 0; i < 10; i++) {
        first += L.loss[i] / 10;
        last += L.loss[L.n - 10 + i] / 10;
    }
    printf("  loss: mean of steps 1-10 %.4f, of steps 51-60 %.4f (ratio %.3f)\n", first, last, last / first);
    CU_ASSERT(last < 0.8 * first);

    /* step files: save_every 20, keep 2 -> 40 and 60 remain, 20 was deleted */
    char dir[1200], p[1400];
    tt_fmt(dir, sizeof dir, "%s/quickstart", out);
    long long steps[16];
    int ns = tt_step_files(dir, "quickstart", steps, 16);
    CU_ASSERT(ns == 2 && steps[0] == 40 && steps[1] == 60);
    tt_fmt(p, sizeof p, "%s/quickstart_state.safetensors", dir);
    ork_st_file *sf;
    CU_ASSERT(ork_st_open(p, &sf) == ORK_OK);
    if (sf) {
        const char *s = ork_st_meta(sf, "step");
        CU_ASSERT(s && !strcmp(s, "60"));
        ork_st_close(sf);
    }

    /* the LoRA file: exactly the expected keys, shapes, alpha, dtype, metadata */
    tt_fmt(p, sizeof p, "%s/quickstart_000000060.safetensors", dir);
    ork_st_file *f;
    CU_ASSERT_FATAL(ork_st_open(p, &f) == ORK_OK);
    mod_shape m[26];
    int nm = expected_modules(m);
    CU_ASSERT(nm == 26);
    CU_ASSERT(ork_st_count(f) == (size_t)(3 * nm)); /* nothing else in the file */
    int up_nonzero = 0;
    for (int i = 0; i < nm; i++) {
        char key[256];
        tt_fmt(key, sizeof key, "%s.lora_down.weight", m[i].module);
        const ork_st_tensor *d = ork_st_find(f, key);
        tt_fmt(key, sizeof key, "%s.lora_up.weight", m[i].module);
        const ork_st_tensor *u = ork_st_find(f, key);
        tt_fmt(key, sizeof key, "%s.alpha", m[i].module);
        const ork_st_tensor *a = ork_st_find(f, key);
        if (!d || !u || !a) {
            printf("  missing tensors of %s\n", m[i].module);
            CU_FAIL("module missing");
            continue;
        }
        CU_ASSERT(d->dtype == ORK_F16 && u->dtype == ORK_F16);
        CU_ASSERT(d->ndim == 2 && d->shape[0] == RANK && d->shape[1] == m[i].in);
        CU_ASSERT(u->ndim == 2 && u->shape[0] == m[i].out && u->shape[1] == RANK);
        CU_ASSERT(a->dtype == ORK_F32 && a->ndim == 0 && a->nbytes == 4);
        float av = 0;
        if (a->dtype == ORK_F32 && a->nbytes == 4) memcpy(&av, a->data, 4);
        CU_ASSERT(av == 16.0f);
        /* up starts at zero: trained values must have moved it */
        float *h = malloc((size_t)ork_st_nelements(u) * sizeof *h);
        if (h && ork_st_read_f32(u, h) == ORK_OK)
            for (uint64_t q = 0; q < ork_st_nelements(u); q++)
                if (h[q] != 0.0f) { up_nonzero++; break; }
        free(h);
    }
    CU_ASSERT(up_nonzero == nm);
    const char *md = ork_st_meta(f, "ss_network_dim"), *ma = ork_st_meta(f, "ss_network_alpha"),
               *ms = ork_st_meta(f, "training_info.step");
    CU_ASSERT(md && !strcmp(md, "16"));
    CU_ASSERT(ma && !strcmp(ma, "16"));
    CU_ASSERT(ms && !strcmp(ms, "60"));
    ork_st_close(f);
    tt_rm_rf(root);
}
#else
static void test_resume_bitwise(void) {
    tt_ab ab; /* F32 saves: the LoRA file holds the trained values exactly */
    char cb1[1100], cb2[1100], lb1[1100], lb2[1100];
    CU_ASSERT_FATAL(tt_ab_setup(&ab, "resume", "a", "b", 40, 20, 4) == 0);
    char *root = ab.root, *oa = ab.oa, *ob = ab.ob, *ca = ab.ca, *la = ab.oa;
    tt_fmt(cb1, sizeof cb1, "%s/b20.yaml", root);
    tt_fmt(cb2, sizeof cb2, "%s/b40.yaml", root);
    tt_fmt(lb1, sizeof lb1, "%s/b20", root);
    tt_fmt(lb2, sizeof lb2, "%s/b40", root);
    tt_cfg c = ab.c;
#ifdef TT_OPT
    c.optimizer = TT_OPT;
#endif
#ifdef TT_WDT
    c.wdt = TT_WDT;
#endif
    CU_ASSERT_FATAL(tt_write_config(ca, &c) == 0);
    c.out = ob;
    CU_ASSERT_FATAL(tt_write_config(cb2, &c) == 0);
    c.steps = 20;
    CU_ASSERT_FATAL(tt_write_config(cb1, &c) == 0);

    CU_ASSERT_FATAL(tt_run(ca, la, 150) == 0);
    CU_ASSERT_FATAL(tt_run(cb1, lb1, 150) == 0);
    CU_ASSERT_FATAL(tt_run(cb2, lb2, 150) == 0);

    char p[1400];
    tt_fmt(p, sizeof p, "%s.err", lb2);
    CU_ASSERT(tt_file_has(p, "resuming from") && tt_file_has(p, "at step 20"));

    static tt_losses A, B1, B2;
    tt_fmt(p, sizeof p, "%s.out", la);
    CU_ASSERT_FATAL(tt_parse_losses(p, &A) == 40);
    tt_fmt(p, sizeof p, "%s.out", lb1);
    CU_ASSERT_FATAL(tt_parse_losses(p, &B1) == 20);
    tt_fmt(p, sizeof p, "%s.out", lb2);
    CU_ASSERT_FATAL(tt_parse_losses(p, &B2) == 20);
    int diff = 0;
    for (int i = 0; i < 20; i++) {
        if (B1.step[i] != i + 1 || strcmp(B1.text[i], A.text[i])) diff++;
        if (B2.step[i] != 21 + i || strcmp(B2.text[i], A.text[20 + i])) {
            if (!diff) printf("  first difference: step %d: straight %s, resumed %s\n", 21 + i, A.text[20 + i], B2.text[i]);
            diff++;
        }
    }
    CU_ASSERT(diff == 0);

    /* the final LoRA and state files, byte for byte (tensors, metadata, header) */
    CU_ASSERT(tt_same_output(oa, ob, "000000040"));
    CU_ASSERT(tt_same_output(oa, ob, "state"));
    /* and the run B saved the same step-20 LoRA as run A on the way */
    CU_ASSERT(tt_same_output(oa, ob, "000000020"));
    tt_rm_rf(root);
}
#endif

/* Built twice (tests/train/CMakeLists.txt): TT_CASE 1 and 2 are separate ctest
 * tests so that each stays short and ctest -j runs them side by side. */
#if TT_CASE == 1
static const ork_test_case cases[] = {{"quickstart_shape", test_quickstart_shape}, {NULL, NULL}};
#else
static const ork_test_case cases[] = {{"resume_bitwise", test_resume_bitwise}, {NULL, NULL}};
#endif
ORK_TEST_MAIN("train_e2e", NULL, NULL, cases)
