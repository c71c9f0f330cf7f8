/* tests/sample/test_sample_train.c — samples, metrics.jsonl, loss.png and
 * the progress lines through `orakul run` (the quickstart's small model and
 * the committed photos, tests/train/configs/tiny.yaml plus a sample: section):
 *  - 10 steps, sample_every 5: samples before step 1 and at steps 5 and 10,
 *    one PNG per prompt at the configured size plus the grid; metrics.jsonl
 *    holds steps 1..10 once each; loss.png is an 800x450 PNG; one progress
 *    line per step (log_every 1);
 *  - sampling does not disturb training: the losses and the final LoRA file
 *    are bit-identical to the same run without a sample: section;
 *  - resuming to 14 steps after a line past the saved step and half a line
 *    were appended to metrics.jsonl: both are dropped (the broken one
 *    reported as file:line), steps 11..14 follow, the resumed run does not
 *    sample at its start, and samples at its end;
 *  - with the trainable state streamed per block (ORAKUL_STREAM_TRAINABLES=1)
 *    sampling works through the runtime's hooks and leaves training
 *    bit-identical as well. */
#include "../train/train_test_util.h"

#include "data/image.h"
#include "train/metrics.h"

static const char sample_section[] =
    "      sample:\n"
    "        sample_every: 5\n"
    "        width: 32\n"
    "        height: 24\n"
    "        sample_steps: 3\n"
    "        seed: 1\n"
    "        walk_seed: true\n"
    "        guidance_scale: 1\n"
    "        prompts:\n"
    "          - one\n"
    "          - two\n";

static int write_cfg(const char *path, tt_cfg *c, int with_samples) {
    if (tt_write_config(path, c) != 0) return -1;
    if (!with_samples) return 0;
    FILE *f = fopen(path, "a");
    if (!f) return -1;
    int ok = fputs(sample_section, f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static int png_size(const char *p, int w, int h) {
    ork_image img;
    if (ork_image_load(p, &img) != ORK_OK) { printf("  cannot read %s\n", p); return 0; }
    int ok = img.w == w && img.h == h;
    if (!ok) printf("  %s: %dx%d, want %dx%d\n", p, img.w, img.h, w, h);
    ork_image_free(&img);
    return ok;
}

static void test_train_with_samples(void) {
    tt_ab ab; /* the logs beside the outputs: <root>/a.out, .err */
    char cr[1100], lr[1100];
    CU_ASSERT_FATAL(tt_ab_setup(&ab, "samples", "a", "b", 10, 5, 4) == 0);
    char *root = ab.root, *oa = ab.oa, *ob = ab.ob, *ca = ab.ca, *cb = ab.cb, *la = ab.oa, *lb = ab.ob;
    tt_fmt(cr, sizeof cr, "%s/a14.yaml", root);
    tt_fmt(lr, sizeof lr, "%s/a14", root);
    tt_cfg c = ab.c;
    CU_ASSERT_FATAL(write_cfg(ca, &c, 1) == 0);
    c.steps = 14;
    CU_ASSERT_FATAL(write_cfg(cr, &c, 1) == 0);
    c.steps = 10;
    c.out = ob;
    CU_ASSERT_FATAL(write_cfg(cb, &c, 0) == 0);
    CU_ASSERT_FATAL(tt_run(ca, la, 150) == 0);
    CU_ASSERT_FATAL(tt_run(cb, lb, 150) == 0);

    char dir[1200], p[1400], q[1400];
    tt_fmt(dir, sizeof dir, "%s/quickstart", oa);
    static const int at[3] = {0, 5, 10};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 2; i++) {
            tt_fmt(p, sizeof p, "%s/samples/quickstart_%09d_%d.png", dir, at[k], i);
            CU_ASSERT(png_size(p, 32, 24));
        }
        tt_fmt(p, sizeof p, "%s/samples/quickstart_%09d_grid.png", dir, at[k]);
        CU_ASSERT(png_size(p, 2 * 32 + 3 * 4, 24 + 2 * 4));
    }
    tt_fmt(p, sizeof p, "%s/samples/quickstart_%09d_0.png", dir, 3);
    CU_ASSERT(!tt_exists(p));
    tt_fmt(p, sizeof p, "%s/loss.png", dir);
    CU_ASSERT(png_size(p, 800, 450));
    tt_fmt(p, sizeof p, "%s/metrics.jsonl", dir);
    ork_metrics_row *rows = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(ork_metrics_read(p, 1, &rows, &n), ORK_OK);
    CU_ASSERT_EQUAL(n, 10);
    for (size_t i = 0; i < n; i++) CU_ASSERT(rows[i].step == (int64_t)i + 1 && isfinite(rows[i].loss) && rows[i].lr > 0);
    free(rows);
    static tt_losses A, B;
    tt_fmt(p, sizeof p, "%s.out", la);
    CU_ASSERT_EQUAL(tt_parse_losses(p, &A), 10);
    CU_ASSERT(tt_file_has(p, " s/it") && tt_file_has(p, "ETA "));
    tt_fmt(q, sizeof q, "%s.out", lb);
    CU_ASSERT_EQUAL(tt_parse_losses(q, &B), 10);
    int diff = 0;
    for (int i = 0; i < A.n && i < B.n; i++) diff += strcmp(A.text[i], B.text[i]) != 0;
    CU_ASSERT_EQUAL(diff, 0);
    tt_fmt(p, sizeof p, "%s/quickstart_000000010.safetensors", dir);
    tt_fmt(q, sizeof q, "%s/quickstart/quickstart_000000010.safetensors", ob);
    CU_ASSERT(tt_same_bytes(p, q)); /* sampling left training untouched */
    tt_fmt(q, sizeof q, "%s/quickstart/samples", ob);
    CU_ASSERT(!tt_exists(q));

    /* resume to 14 after junk was appended to metrics.jsonl */
    tt_fmt(p, sizeof p, "%s/metrics.jsonl", dir);
    FILE *f = fopen(p, "a");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("{\"step\": 11, \"loss\": 9.0}\n{\"step\": 12, \"lo", f);
    fclose(f);
    CU_ASSERT_FATAL(tt_run(cr, lr, 150) == 0);
    tt_fmt(q, sizeof q, "%s.err", lr);
    CU_ASSERT(tt_file_has(q, "resuming from"));
    CU_ASSERT(tt_file_has(q, "metrics.jsonl:12: not JSON"));
    CU_ASSERT(!tt_file_has(q, "samples at step 10"));
    CU_ASSERT(tt_file_has(q, "samples at step 14"));
    CU_ASSERT_EQUAL_FATAL(ork_metrics_read(p, 1, &rows, &n), ORK_OK);
    CU_ASSERT_EQUAL(n, 14);
    for (size_t i = 0; i < n; i++) CU_ASSERT(rows[i].step == (int64_t)i + 1 && rows[i].loss < 9.0);
    free(rows);
    tt_fmt(p, sizeof p, "%s/samples/quickstart_%09d_grid.png", dir, 14);
    CU_ASSERT(tt_exists(p));

    /* the trainable state streamed per block (ORAKUL_STREAM_TRAINABLES=1, docs/streaming.md
     * §4): the sampler brings each block's LoRA in through the runtime's hooks, and
     * sampling leaves the streamed training bit-identical too */
    char oc[1100], od[1100], cc[1100], cd[1100], lc[1100], ld[1100];
    tt_fmt(oc, sizeof oc, "%s/c", root);
    tt_fmt(od, sizeof od, "%s/d", root);
    tt_fmt(cc, sizeof cc, "%s/c.yaml", root);
    tt_fmt(cd, sizeof cd, "%s/d.yaml", root);
    tt_fmt(lc, sizeof lc, "%s/c", root);
    tt_fmt(ld, sizeof ld, "%s/d", root);
    c.steps = 10;
    c.out = oc;
    CU_ASSERT_FATAL(write_cfg(cc, &c, 1) == 0);
    c.out = od;
    CU_ASSERT_FATAL(write_cfg(cd, &c, 0) == 0);
    setenv("ORAKUL_STREAM_TRAINABLES", "1", 1);
    int rc = tt_run(cc, lc, 150), rd = tt_run(cd, ld, 150);
    unsetenv("ORAKUL_STREAM_TRAINABLES");
    CU_ASSERT_FATAL(rc == 0 && rd == 0);
    tt_fmt(p, sizeof p, "%s.err", lc);
    CU_ASSERT(tt_file_has(p, "trainable state streamed per block"));
    CU_ASSERT(tt_file_has(p, "samples at step 10: 2 images"));
    CU_ASSERT(tt_same_output(oc, od, "000000010"));
    /* before step 1 the LoRA is the same everywhere: the same first samples as run a */
    tt_fmt(p, sizeof p, "%s/quickstart/samples/quickstart_000000000_0.png", oc);
    tt_fmt(q, sizeof q, "%s/samples/quickstart_000000000_0.png", dir);
    CU_ASSERT(tt_same_bytes(p, q));
    tt_rm_rf(root);
}

static const ork_test_case tcases[] = {
    {"orakul run: samples, metrics.jsonl, loss.png, resume", test_train_with_samples},
    {NULL, NULL},
};
ORK_TEST_MAIN("sample_train", NULL, NULL, tcases)
