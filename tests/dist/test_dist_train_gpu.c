/* test_dist_train_gpu.c — `orakul run --gpus 2` on the tiny training config
 * (LABELS gpu; exit 77 with fewer than 2 GPUs or without libnccl):
 *  - two_gpus_match_one: 2 GPUs x batch_size 1 against 1 GPU x batch_size 2,
 *    8 steps on 4 square images (every global batch is full): the same
 *    samples, noise and timesteps, gradients averaged by NCCL instead of over
 *    the batch; the printed loss curves agree within bf16 tolerance, and only
 *    rank 0 wrote the LoRA files;
 *  - resume_other_world: 4 steps on 2 GPUs, then the same output folder
 *    resumed on 1 GPU x batch 2 to step 8: steps 5..8 agree with the straight
 *    1-GPU run (the state's data position and rank 0's weights carry over).
 * The GPU count and NCCL are probed in a child (the test never initialises
 * CUDA itself). */
#include "../train/train_test_util.h"

#include "dist_test_util.h"

#include <png.h>

static char root[1024], data[1100];

/* 4 different 64x64 RGB images with captions (one token grid for all). */
static int write_images(void) {
    for (int k = 0; k < 4; k++) {
        unsigned char px[64 * 64 * 3];
        for (int y = 0; y < 64; y++)
            for (int x = 0; x < 64; x++) {
                unsigned char *p = px + (y * 64 + x) * 3;
                p[0] = (unsigned char)((x * (k + 1) * 4) & 255);
                p[1] = (unsigned char)((y * (4 - k) * 4) & 255);
                p[2] = (unsigned char)(((x + y) * 2 + 60 * k) & 255);
            }
        png_image img;
        memset(&img, 0, sizeof img);
        img.version = PNG_IMAGE_VERSION;
        img.width = 64;
        img.height = 64;
        img.format = PNG_FORMAT_RGB;
        char path[1300];
        tt_fmt(path, sizeof path, "%s/img%d.png", data, k);
        if (!png_image_write_to_file(&img, path, 0, px, 0, NULL)) return -1;
        tt_fmt(path, sizeof path, "%s/img%d.txt", data, k);
        if (tt_write_all(path, "a test pattern") != 0) return -1;
    }
    return 0;
}

/* The tiny config on cuda:0 with batch_size b, steps, output out. */
static int write_cfg(const char *path, const char *out, int b, int steps) {
    tt_cfg c = tt_cfg_default(out, data);
    c.steps = steps;
    c.save_every = 4;
    c.keep = 4;
    c.dtype = "float32";
    if (tt_write_config(path, &c) != 0) return -1;
    char *t = tt_read_all(path, NULL);
    if (!t) return -1;
    size_t cap = strlen(t) + 256, o = 0;
    char *s = malloc(cap);
    if (!s) { free(t); return -1; }
    for (char *line = strtok(t, "\n"); line; line = strtok(NULL, "\n")) {
        if (strstr(line, "device: cpu")) o += (size_t)tt_fmt(s + o, cap - o, "      device: cuda:0\n");
        else if (strstr(line, "batch_size:")) o += (size_t)tt_fmt(s + o, cap - o, "        batch_size: %d\n", b);
        else o += (size_t)tt_fmt(s + o, cap - o, "%s\n", line);
    }
    free(t);
    int r = tt_write_all(path, s);
    free(s);
    return r;
}

/* `orakul run [--gpus n] cfg`; exit code. */
static int run(const char *cfg, int gpus, const char *log) {
    char e[1200], n[16];
    tt_fmt(e, sizeof e, "%s.err", log);
    tt_fmt(n, sizeof n, "%d", gpus);
    const char *args[] = {"run", "--gpus", n, cfg, NULL};
    if (gpus <= 1) { args[1] = cfg; args[2] = NULL; }
    int rc = tt_orakul(args, log, 280);
    if (rc != 0) {
        char *t = tt_read_all(e, NULL);
        printf("  orakul run %s%s: exit %d\n%s\n", gpus > 1 ? "--gpus 2 " : "", cfg, rc, t ? t : "");
        free(t);
    }
    return rc;
}

/* Steps [from, to] of both logs within tolerance; prints both curves. */
static int curves_agree(const char *la, const char *lb, int from, int to) {
    static tt_losses A, B;
    char p[1300];
    tt_fmt(p, sizeof p, "%s.out", la);
    tt_parse_losses(p, &A);
    tt_fmt(p, sizeof p, "%s.out", lb);
    tt_parse_losses(p, &B);
    int ok = 1, seen = 0;
    for (int s = from; s <= to; s++) {
        double a = NAN, b = NAN;
        for (int i = 0; i < A.n; i++) if (A.step[i] == s) a = A.loss[i];
        for (int i = 0; i < B.n; i++) if (B.step[i] == s) b = B.loss[i];
        int close = isfinite(a) && isfinite(b) && ork_close(b, a, 2e-3, 2e-2);
        printf("  step %d: %.6f vs %.6f%s\n", s, a, b, close ? "" : "   <-- differs");
        ok &= close;
        seen++;
    }
    return ok && seen == to - from + 1;
}

static void test_two_gpus_match_one(void) {
    char c1[1200], c2[1200], o1[1200], o2[1200], l1[1200], l2[1200];
    tt_fmt(o1, sizeof o1, "%s/one", root);
    tt_fmt(o2, sizeof o2, "%s/two", root);
    tt_fmt(c1, sizeof c1, "%s/one.yaml", root);
    tt_fmt(c2, sizeof c2, "%s/two.yaml", root);
    tt_fmt(l1, sizeof l1, "%s/one", root);
    tt_fmt(l2, sizeof l2, "%s/two", root);
    CU_ASSERT_FATAL(write_cfg(c1, o1, 2, 8) == 0 && write_cfg(c2, o2, 1, 8) == 0);
    CU_ASSERT_EQUAL_FATAL(run(c1, 1, l1), 0);
    CU_ASSERT_EQUAL_FATAL(run(c2, 2, l2), 0);
    CU_ASSERT(curves_agree(l1, l2, 1, 8));
    char e[1300];
    tt_fmt(e, sizeof e, "%s.err", l2);
    CU_ASSERT(tt_file_has(e, "distributed: rank 0 of 2"));
    CU_ASSERT(tt_file_has(e, "all-reduced in"));
    long long steps[8];
    char dir[1300];
    tt_fmt(dir, sizeof dir, "%s/quickstart", o2);
    CU_ASSERT_EQUAL(tt_step_files(dir, "quickstart", steps, 8), 2); /* steps 4 and 8, written once */
}

static void test_resume_other_world(void) {
    char c1[1200], c2[1200], o1[1200], o3[1200], l1[1200], la[1200], lb[1200];
    tt_fmt(o1, sizeof o1, "%s/one", root); /* the straight 1-GPU run of the first case */
    tt_fmt(o3, sizeof o3, "%s/mixed", root);
    tt_fmt(c1, sizeof c1, "%s/mixed_two.yaml", root);
    tt_fmt(c2, sizeof c2, "%s/mixed_one.yaml", root);
    tt_fmt(l1, sizeof l1, "%s/one", root);
    tt_fmt(la, sizeof la, "%s/mixed_two", root);
    tt_fmt(lb, sizeof lb, "%s/mixed_one", root);
    char ref[1300];
    tt_fmt(ref, sizeof ref, "%s.out", l1);
    if (!tt_exists(ref)) { CU_FAIL("needs two_gpus_match_one's 1-GPU run"); return; }
    CU_ASSERT_FATAL(write_cfg(c1, o3, 1, 4) == 0 && write_cfg(c2, o3, 2, 8) == 0);
    CU_ASSERT_EQUAL_FATAL(run(c1, 2, la), 0);
    CU_ASSERT_EQUAL_FATAL(run(c2, 1, lb), 0);
    char e[1300];
    tt_fmt(e, sizeof e, "%s.err", lb);
    CU_ASSERT(tt_file_has(e, "resuming from"));
    CU_ASSERT(curves_agree(l1, lb, 5, 8));
}

/* In a child: GPUs (capped at 99) + 100 when libnccl loads. */
static int init(void) {
    if (tt_setup("dist_train", root, sizeof root) != 0) return 1;
    tt_fmt(data, sizeof data, "%s/data4", root);
    if (mkdir(data, 0755) != 0) return 1;
    setenv("ORAKUL_DIST_TIMEOUT", "120", 1);
    return write_images();
}

static int clean(void) {
    if (!getenv("ORK_KEEP")) tt_rm_rf(root);
    else printf("  (kept %s)\n", root);
    return 0;
}

static const ork_test_case cases[] = {
    {"two_gpus_match_one", test_two_gpus_match_one},
    {"resume_other_world", test_resume_other_world},
    {NULL, NULL},
};

int main(void) {
    int p = dist_probe();
    if (p % 100 < 2) { printf("%d CUDA device(s): needs 2: skipped\n", p % 100); return 77; }
    if (p < 100) { printf("no libnccl.so.2 (or ORAKUL_NCCL_LIB): skipped\n"); return 77; }
    return ork_test_run("dist_train_gpu", init, clean, cases);
}
