/* tests/stream/test_plan_seed.c — `orakul plan` on the seed's run
 * (configs/seed_flux2_dev_r1280_24gb.yaml: FLUX.2-dev shapes, rank-1280 LoRA,
 * adamw8bit, 24 GiB budget) through the built CLI. Without trainable-state
 * streaming the plan refused it (73 GiB of LoRA + grads + state); with it the
 * plan must succeed, say the trainable state streams, and add up to at most
 * the 24 GiB budget. The config is copied with its dataset folder pointed at
 * the repository's assets/photos (the plan only scans it). */
#include "ork_test.h"
#include "ork_test_proc.h" /* orakul spawned without a shell, on Windows too */

#include <limits.h>
#include <math.h>
#include <sys/stat.h>

static char g_tmp[256];

/* The seed's config copied to g_tmp/seed.yaml with its dataset folder pointed
 * at the repository's assets/photos, and to g_tmp/seed_bf16.yaml with
 * network.weight_dtype: bf16 as well; 0 on success. */
static int copy_seed_config(void) {
    static const char net[] = "linear_alpha: 64}";
    char src[PATH_MAX], cfg[PATH_MAX], ds[PATH_MAX];
    snprintf(src, sizeof src, "%s/configs/seed_flux2_dev_r1280_24gb.yaml", ORK_SOURCE_DIR);
    snprintf(ds, sizeof ds, "%s/assets/photos", ORK_SOURCE_DIR);
    char *y = ork_test_read_all(src, NULL), *at = y ? strstr(y, "/tmp/seedds") : NULL, *nw = y ? strstr(y, net) : NULL;
    int ok = at && nw && nw < at;
    for (int v = 0; v < 2 && ok; v++) {
        snprintf(cfg, sizeof cfg, "%s/%s", g_tmp, v ? "seed_bf16.yaml" : "seed.yaml");
        FILE *f = fopen(cfg, "wb"); /* "\n" on Windows too: the variants below match it */
        if (!f) { ok = 0; break; }
        const char *after = nw + strlen(net) - 1; /* the closing brace */
        fprintf(f, "%.*s%s%.*s%s%s", (int)(after - y), y, v ? ", weight_dtype: bf16" : "", (int)(at - after), after,
                ds, at + strlen("/tmp/seedds"));
        ok = fclose(f) == 0;
    }
    free(y);
    return ok ? 0 : 1;
}

static int setup(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/orakul-plan-seed-XXXXXX");
    return mkdtemp(g_tmp) ? copy_seed_config() : 1;
}
static int teardown(void) {
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    return system(cmd) == 0 ? 0 : 1;
}

/* runs `orakul plan` on a copied config (g_tmp/<name>) in g_tmp with env
 * ("ORAKUL_HOST_AVAILABLE_GB=... NAME=value ...", space-separated) set for it;
 * returns the exit code, *out and *err the two streams */
static int plan_with_config(const char *env, const char *name, char **out, char **err) {
    char cfg[PATH_MAX], outf[PATH_MAX], errf[PATH_MAX], vars[512];
    snprintf(cfg, sizeof cfg, "%s/%s", g_tmp, name);
    snprintf(outf, sizeof outf, "%s/out.txt", g_tmp);
    snprintf(errf, sizeof errf, "%s/err.txt", g_tmp);
    snprintf(vars, sizeof vars, "%s", env);
    const char *envv[9];
    int n = 0;
    for (char *v = strtok(vars, " "); v && n < 8; v = strtok(NULL, " ")) envv[n++] = v;
    envv[n] = NULL;
    const char *argv[] = {ORK_CLI_EXE, "plan", cfg, NULL};
    int rc = ork_test_spawn(argv, envv, g_tmp, outf, errf);
    *out = ork_test_read_text(outf);
    *err = ork_test_read_text(errf);
    return rc;
}
static int plan_with(const char *env, char **out, char **err) { return plan_with_config(env, "seed.yaml", out, err); }

static void seed_plan_fits(void) {
    char *out, *err;
    /* the plan is for a machine with 128 GB of RAM (it pins ~77 GiB) */
    int rc = plan_with("ORAKUL_HOST_AVAILABLE_GB=125", &out, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT(rc == 0);
    if (rc != 0) fprintf(stderr, "stderr:\n%s\n", err ? err : "");
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "trainable state streamed per block"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "BF16 shadows of the LoRA parameters")); /* bf16 activations on CUDA */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "VRAM budget 24.00 GiB"));
    /* the VRAM line's total is within the budget */
    const char *v = strstr(out, "  VRAM: ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    const char *eq = strstr(v, " = ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(eq);
    double tot = 0;
    char unit[8] = "";
    CU_ASSERT_EQUAL(sscanf(eq + 3, "%lf %7s", &tot, unit), 2);
    CU_ASSERT_STRING_EQUAL(unit, "GiB");
    CU_ASSERT(tot > 1.0 && tot <= 24.0);
    free(out);
    free(err);
    /* on a 64 GB machine the same plan is refused before anything loads: exit 2,
     * one line naming the config and what to change */
    rc = plan_with("ORAKUL_HOST_AVAILABLE_GB=60", &out, &err);
    CU_ASSERT(rc == 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    const char *line = strstr(err, "error: ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(line);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "seed.yaml: plan: streaming pins"));
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "60.0 GiB available"));
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "vram_budget_gb"));
    CU_ASSERT_PTR_NULL(strstr(line + 7, "error: ")); /* one line */
    /* what to change, for this plan: BF16 LoRA weights alone would fit (named
     * first, "enough"); the frozen weights are FP8 already (not named) */
    const char *bf = strstr(line, "set network.weight_dtype: bf16"), *bud = strstr(line, "raise model.vram_budget_gb");
    CU_ASSERT(bf != NULL && bud != NULL && bf < bud);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "less of trainable state, enough)"));
    CU_ASSERT_PTR_NULL(strstr(line, "model.quantize"));
    free(out);
    free(err);
    /* ... and it does: the seed's own numerics (BF16 LoRA weights) on the same
     * 64 GB machine plan with no BF16 shadows and pin under 60 GiB */
    rc = plan_with_config("ORAKUL_HOST_AVAILABLE_GB=60", "seed_bf16.yaml", &out, &err);
    CU_ASSERT_FATAL(out && err);
    CU_ASSERT(rc == 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "trainable state streamed per block"));
    CU_ASSERT_PTR_NULL(strstr(out, "BF16 shadows"));
    const char *h = strstr(out, "  host: ");
    double gib = 0;
    CU_ASSERT_FATAL(h && sscanf(h + 8, "%lf", &gib) == 1);
    CU_ASSERT(gib > 30 && gib < 58);
    free(out);
    free(err);
    /* on a 72 GB machine (70 GiB available) the plan drops the forward pass's BF16
     * shadows (77 GiB pinned with them, 63 without): exit 0, one warning, and the
     * printed plan is the one that runs */
    rc = plan_with("ORAKUL_HOST_AVAILABLE_GB=70", &out, &err);
    CU_ASSERT_FATAL(out && err);
    CU_ASSERT(rc == 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "without BF16 shadows"));
    CU_ASSERT_PTR_NULL(strstr(out, "BF16 shadows"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "trainable state streamed per block"));
    free(out);
    free(err);
}

/* ORAKUL_STREAM_SELECT=dense: the single blocks stream first, every double
 * block stays resident (the 24 GiB plan streams fewer than the 48 single
 * blocks); a bad value, or a bad ORAKUL_PLAN_MFU, is one error line and exit 2;
 * ORAKUL_PLAN_MFU lowers the assumed MFU and lengthens the predicted compute */
static void seed_plan_select_and_mfu(void) {
    char *out, *err;
    CU_ASSERT_EQUAL_FATAL(plan_with("ORAKUL_HOST_AVAILABLE_GB=125 ORAKUL_STREAM_SELECT=dense", &out, &err), 0);
    CU_ASSERT_FATAL(out != NULL);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "(the most FLOPs per byte first)"));
    int dbl_streamed = 0, sgl_streamed = 0;
    for (const char *l = out; (l = strstr(l, "_blocks.")) != NULL; l++) {
        const char *eol = strchr(l, '\n');
        int streamed = eol && (size_t)(eol - l) > 9 && !strncmp(eol - 8, "streamed", 8);
        if (l - out >= 6 && !strncmp(l - 6, "double", 6)) dbl_streamed += streamed;
        if (l - out >= 6 && !strncmp(l - 6, "single", 6)) sgl_streamed += streamed;
    }
    CU_ASSERT_EQUAL(dbl_streamed, 0);
    CU_ASSERT(sgl_streamed > 30 && sgl_streamed <= 48);
    char *p = strstr(out, "predicted step: "), *q;
    double t_dense_c = 0;
    CU_ASSERT_FATAL(p && (q = strstr(p, "compute ")) && sscanf(q + 8, "%lf", &t_dense_c) == 1);
    free(out);
    free(err);
    CU_ASSERT_EQUAL_FATAL(plan_with("ORAKUL_HOST_AVAILABLE_GB=125 ORAKUL_STREAM_SELECT=dense ORAKUL_PLAN_MFU=0.25", &out, &err), 0);
    double t_c = 0;
    CU_ASSERT_FATAL(out && (p = strstr(out, "predicted step: ")) && (q = strstr(p, "compute ")) && sscanf(q + 8, "%lf", &t_c) == 1);
    CU_ASSERT(fabs(t_c - 2 * t_dense_c) < 0.002 * t_c); /* half the MFU, twice the compute */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "x 0.25"));
    free(out);
    free(err);
    const char *bad[2][2] = {{"ORAKUL_HOST_AVAILABLE_GB=125 ORAKUL_STREAM_SELECT=sparse", "ORAKUL_STREAM_SELECT=sparse: expected even or dense"},
                             {"ORAKUL_HOST_AVAILABLE_GB=125 ORAKUL_PLAN_MFU=1.5", "ORAKUL_PLAN_MFU=1.5: not a fraction in (0, 1]"}};
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_EQUAL(plan_with(bad[k][0], &out, &err), 2);
        CU_ASSERT_FATAL(err != NULL);
        const char *line = strstr(err, "error: ");
        CU_ASSERT_PTR_NOT_NULL_FATAL(line);
        CU_ASSERT_PTR_NOT_NULL(strstr(line, bad[k][1]));
        CU_ASSERT_PTR_NULL(strstr(line + 7, "error: ")); /* one line */
        free(out);
        free(err);
    }
}

/* g_tmp/<to> = g_tmp/<from> with `what` replaced by `with` (once). 0 on success. */
static int seed_variant(const char *from, const char *to, const char *what, const char *with) {
    char src[PATH_MAX], dst[PATH_MAX];
    snprintf(src, sizeof src, "%s/%s", g_tmp, from);
    snprintf(dst, sizeof dst, "%s/%s", g_tmp, to);
    char *y = ork_test_read_all(src, NULL), *at = y ? strstr(y, what) : NULL;
    FILE *f = at ? fopen(dst, "wb") : NULL;
    int ok = f && fprintf(f, "%.*s%s%s", (int)(at - y), y, with, at + strlen(what)) > 0;
    if (f) ok = fclose(f) == 0 && ok;
    free(y);
    return ok ? 0 : 1;
}

/* The predicted step after `what` in the plan's output (0 when absent). */
static double seconds_after(const char *out, const char *what) {
    const char *p = out ? strstr(out, what) : NULL;
    double t = 0;
    return p && sscanf(p + strlen(what), "%lf", &t) == 1 ? t : 0;
}

/* model.stream_compression auto on the seed's shapes for the H200: at 512² the
 * forward pass is bound by the FP8 loads, so the blocks travel coded by the
 * byte codecs (the raw plan's step printed beside, slower); at 1024² with BF16
 * LoRA weights (the seed's numerics) every pass is compute-bound and the raw
 * plan (no staging buffer) is kept; `never` is never coded. */
static void seed_plan_compression(void) {
    char *out, *err;
    const char *env = "ORAKUL_HOST_AVAILABLE_GB=125 ORAKUL_PLAN_DEVICE=h200 ORAKUL_PLAN_MFU=0.49";
    CU_ASSERT_EQUAL_FATAL(plan_with(env, &out, &err), 0);
    CU_ASSERT_FATAL(out != NULL);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "coded in transit (expected 0.74 of the bytes"));
    double t = seconds_after(out, "predicted step: "), t_raw = seconds_after(out, "(raw: ");
    CU_ASSERT(t > 0 && t_raw > t);
    free(out);
    free(err);
    CU_ASSERT_EQUAL_FATAL(seed_variant("seed.yaml", "seed_never.yaml", "vram_budget_gb: 24\n",
                                       "vram_budget_gb: 24\n        stream_compression: never\n"), 0);
    CU_ASSERT_EQUAL_FATAL(plan_with_config(env, "seed_never.yaml", &out, &err), 0);
    CU_ASSERT_FATAL(out != NULL);
    CU_ASSERT_PTR_NULL(strstr(out, "coded"));
    CU_ASSERT(fabs(seconds_after(out, "predicted step: ") - t_raw) < 1e-3); /* the plan auto did not take */
    free(out);
    free(err);
    CU_ASSERT_EQUAL_FATAL(seed_variant("seed_bf16.yaml", "seed_1024.yaml", "resolution: [512]", "resolution: [1024]"), 0);
    CU_ASSERT_EQUAL_FATAL(plan_with_config(env, "seed_1024.yaml", &out, &err), 0);
    CU_ASSERT_FATAL(out != NULL);
    CU_ASSERT_PTR_NULL(strstr(out, "coded in transit (expected"));
    t = seconds_after(out, "predicted step: ");
    CU_ASSERT(t > 0 && seconds_after(out, "raw in transit (coded: ") > t);
    free(out);
    free(err);
}

static const ork_test_case cases[] = {
    {"seed_plan_fits_24gb_with_trainable_streaming; refused on a 64 GB host", seed_plan_fits},
    {"ORAKUL_STREAM_SELECT and ORAKUL_PLAN_MFU: densest first, the MFU, bad values refused", seed_plan_select_and_mfu},
    {"stream_compression auto: coded at 512² (FP8 loads bound the forward), raw at 1024²", seed_plan_compression},
    {NULL, NULL}};
ORK_TEST_MAIN("stream_plan_seed", setup, teardown, cases)
