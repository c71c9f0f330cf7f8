/* tests/lokr/test_lokr_train.c — `orakul run` with network.type: lokr on the CPU with
 * the quickstart's model and photos (tests/train/configs/tiny.yaml, hidden 96):
 *  - learns: 60 steps, the loss falls (mean of steps 51-60 < 0.9 x steps 1-10); the
 *    file holds <key>.lokr_w1 / .lokr_w2 for every adapted module, of ai-toolkit's
 *    factorized shapes (qkv 288 x 96: w1 16 x 8, w2 18 x 12), no .alpha, and the
 *    metadata LyCORIS writes (ss_network_module lycoris.kohya, algo lokr);
 *  - resume_bitwise: 8 steps straight == 4, then resumed to 8: the printed losses
 *    of steps 5-8, the LoKr file and the state file are bit-identical;
 *  - streamed_equals_resident: the trainable state streamed per block
 *    (ORAKUL_STREAM_TRAINABLES=1), 4 steps without clipping: losses and files
 *    bit-identical to the resident run;
 *  - quantized: model.quantize with qtype float8 (the linear op dequantizes W and
 *    adds kron(w1, w2)): 4 steps, finite losses, a file;
 *  - factor: lokr_factor 4 gives w1 (4, 4), w2 (72, 24) for qkv;
 *  - lowrank: lokr_full_rank: false with linear 4 (ai-toolkit/LyCORIS: w2 = w2_a ·
 *    w2_b where 4 < max(b, d) / 2): 4 finite steps, the file holds lokr_w1,
 *    lokr_w2_a (18, 4), lokr_w2_b (4, 12) and alpha for qkv; resume bit-identical.
 * Built a second time with TT_GPU (lokr_train_cuda, label gpu, exit 77 without a
 * device): the same on device cuda:0 (BF16 activations: the loss must fall below
 * 0.95 x; streamed == resident holds bit for bit because the LoKr op rounds F32
 * parameters to BF16 as the streamed state's BF16 shadows are). */
#include "../train/train_test_util.h"

#include "io/safetensors.h"

/* tiny.yaml with type lokr (factor, full rank), max_grad_norm and the model's
 * quantizer (qtype NULL: none). */
static int write_lokr_cfg(const char *path, const tt_cfg *c, int factor, int full_rank, int linear,
                          const char *max_norm, const char *qtype) {
    if (tt_write_config(path, c) != 0) return -1;
    char *t = tt_read_all(path, NULL);
    if (!t) return -1;
    size_t cap = strlen(t) + 1024, o = 0;
    char *out = malloc(cap);
    if (!out) { free(t); return -1; }
    for (char *line = strtok(t, "\n"); line; line = strtok(NULL, "\n")) {
        if (strstr(line, "type: lora"))
            o += (size_t)tt_fmt(out + o, cap - o, "        type: lokr\n        lokr_factor: %d\n        lokr_full_rank: %s\n",
                                factor, full_rank ? "true" : "false");
        else if (strstr(line, "linear: 16"))
            o += (size_t)tt_fmt(out + o, cap - o, "        linear: %d\n", linear);
        else if (strstr(line, "max_grad_norm:") && max_norm)
            o += (size_t)tt_fmt(out + o, cap - o, "        max_grad_norm: %s\n", max_norm);
#ifdef TT_GPU
        else if (strstr(line, "device: cpu"))
            o += (size_t)tt_fmt(out + o, cap - o, "      device: cuda:0\n");
#endif
        else if (!strcmp(line, "      model:") && qtype)
            o += (size_t)tt_fmt(out + o, cap - o, "%s\n        quantize: true\n        qtype: %s\n", line, qtype);
        else
            o += (size_t)tt_fmt(out + o, cap - o, "%s\n", line);
    }
    free(t);
    int r = tt_write_all(path, out);
    free(out);
    return r;
}

/* The saved file's keys: every module two tensors, shapes of qkv's checked. */
static void check_file(const char *path, int64_t w1r, int64_t w1c, int64_t w2r, int64_t w2c) {
    ork_st_file *f = NULL;
    CU_ASSERT_FATAL(ork_st_open(path, &f) == ORK_OK);
    int n = (int)ork_st_count(f), w1 = 0, w2 = 0, other = 0;
    for (int i = 0; i < n; i++) {
        const char *k = ork_st_at(f, (size_t)i)->name;
        size_t l = strlen(k);
        if (l > 8 && !strcmp(k + l - 8, ".lokr_w1")) w1++;
        else if (l > 8 && !strcmp(k + l - 8, ".lokr_w2")) w2++;
        else other++;
    }
    printf("  %s: %d lokr_w1, %d lokr_w2, %d other keys\n", path, w1, w2, other);
    CU_ASSERT(w1 == 26 && w2 == 26 && other == 0); /* 26 adapted modules (the trainer's log) */
    const ork_st_tensor *a = ork_st_find(f, "lora_unet_double_blocks_0_img_attn_qkv.lokr_w1");
    const ork_st_tensor *b = ork_st_find(f, "lora_unet_double_blocks_0_img_attn_qkv.lokr_w2");
    CU_ASSERT_FATAL(a && b);
    CU_ASSERT(a->ndim == 2 && a->shape[0] == w1r && a->shape[1] == w1c);
    CU_ASSERT(b->ndim == 2 && b->shape[0] == w2r && b->shape[1] == w2c);
    const char *mod = ork_st_meta(f, "ss_network_module"), *args = ork_st_meta(f, "ss_network_args");
    CU_ASSERT(mod && !strcmp(mod, "lycoris.kohya"));
    CU_ASSERT(args && strstr(args, "\"algo\": \"lokr\""));
    ork_st_close(f);
}

static void test_learns(void) {
    tt_ab q;
    CU_ASSERT_FATAL(tt_ab_setup(&q, "lokr_learn", "a", "b", 60, 60, 1) == 0);
    CU_ASSERT_FATAL(write_lokr_cfg(q.ca, &q.c, -1, 1, 16, NULL, NULL) == 0);
    CU_ASSERT_FATAL(tt_run(q.ca, q.oa, 450) == 0); /* 60 steps; generous for a loaded machine */
    char p[1300];
    tt_fmt(p, sizeof p, "%s.err", q.oa);
    CU_ASSERT(tt_file_has(p, "LoKr: 26 modules, factor -1, full rank"));
    static tt_losses L;
    tt_fmt(p, sizeof p, "%s.out", q.oa);
    CU_ASSERT_FATAL(tt_parse_losses(p, &L) == 60);
    double first = 0, last = 0;
    for (int i = 0; i < 10; i++) {
        first += L.loss[i] / 10;
        last += L.loss[L.n - 10 + i] / 10;
    }
    printf("  loss: mean of steps 1-10 %.4f, of steps 51-60 %.4f (ratio %.3f)\n", first, last, last / first);
#ifdef TT_GPU
    CU_ASSERT(last < 0.95 * first);
#else
    CU_ASSERT(last < 0.9 * first);
#endif
    tt_fmt(p, sizeof p, "%s/quickstart/quickstart_000000060.safetensors", q.oa);
    check_file(p, 16, 8, 18, 12); /* qkv (288, 96): 288 = 16 x 18, 96 = 8 x 12 */
    tt_rm_rf(q.root);
}

static void test_resume_bitwise(void) {
    tt_ab q;
    CU_ASSERT_FATAL(tt_ab_setup(&q, "lokr_resume", "straight", "resumed", 8, 4, 4) == 0);
    CU_ASSERT_FATAL(write_lokr_cfg(q.ca, &q.c, -1, 1, 16, NULL, NULL) == 0);
    CU_ASSERT_FATAL(tt_run(q.ca, q.oa, 300) == 0);
    tt_cfg c = q.c;
    c.out = q.ob;
    c.steps = 4;
    CU_ASSERT_FATAL(write_lokr_cfg(q.cb, &c, -1, 1, 16, NULL, NULL) == 0);
    char l1[1200], l2[1200];
    tt_fmt(l1, sizeof l1, "%s_1", q.ob);
    tt_fmt(l2, sizeof l2, "%s_2", q.ob);
    CU_ASSERT_FATAL(tt_run(q.cb, l1, 300) == 0);
    c.steps = 8;
    CU_ASSERT_FATAL(write_lokr_cfg(q.cb, &c, -1, 1, 16, NULL, NULL) == 0);
    CU_ASSERT_FATAL(tt_run(q.cb, l2, 300) == 0);
    CU_ASSERT(tt_same_losses(q.oa, 0, l1, 4));
    CU_ASSERT(tt_same_losses(q.oa, 4, l2, 4));
    CU_ASSERT(tt_same_output(q.oa, q.ob, "000000008"));
    CU_ASSERT(tt_same_output(q.oa, q.ob, "state"));
    tt_rm_rf(q.root);
}

static int run_streamed(const char *cfg, const char *log, int streamed) {
    if (streamed) setenv("ORAKUL_STREAM_TRAINABLES", "1", 1);
    else unsetenv("ORAKUL_STREAM_TRAINABLES");
    int rc = tt_run(cfg, log, 300);
    unsetenv("ORAKUL_STREAM_TRAINABLES");
    char e[1200];
    tt_fmt(e, sizeof e, "%s.err", log);
    if (rc == 0 && streamed != tt_file_has(e, "trainable state streamed per block")) {
        printf("  %s: %s\n", log, streamed ? "did not stream the trainable state" : "streamed unasked");
        return -1;
    }
    return rc;
}

static void test_streamed_equals_resident(void) {
    tt_ab q;
    CU_ASSERT_FATAL(tt_ab_setup(&q, "lokr_tstream", "resident", "streamed", 4, 2, 4) == 0);
    CU_ASSERT_FATAL(write_lokr_cfg(q.ca, &q.c, -1, 1, 16, "0", NULL) == 0);
    tt_cfg c = q.c;
    c.out = q.ob;
    CU_ASSERT_FATAL(write_lokr_cfg(q.cb, &c, -1, 1, 16, "0", NULL) == 0);
    CU_ASSERT_FATAL(run_streamed(q.ca, q.oa, 0) == 0);
    CU_ASSERT_FATAL(run_streamed(q.cb, q.ob, 1) == 0);
    CU_ASSERT(tt_same_losses(q.oa, 0, q.ob, 4));
    CU_ASSERT(tt_same_output(q.oa, q.ob, "000000002"));
    CU_ASSERT(tt_same_output(q.oa, q.ob, "000000004"));
    tt_rm_rf(q.root);
}

static void test_quantized_and_factor(void) {
    tt_ab q;
    CU_ASSERT_FATAL(tt_ab_setup(&q, "lokr_quant", "fp8", "f4", 4, 4, 1) == 0);
    CU_ASSERT_FATAL(write_lokr_cfg(q.ca, &q.c, -1, 1, 16, NULL, "float8") == 0);
    CU_ASSERT_FATAL(tt_run(q.ca, q.oa, 300) == 0);
    char p[1300];
    tt_fmt(p, sizeof p, "%s.err", q.oa);
    CU_ASSERT(tt_file_has(p, "quantized"));
    static tt_losses L;
    tt_fmt(p, sizeof p, "%s.out", q.oa);
    CU_ASSERT(tt_parse_losses(p, &L) == 4);
    for (int i = 0; i < L.n; i++) CU_ASSERT(isfinite(L.loss[i]) && L.loss[i] > 0);
    tt_fmt(p, sizeof p, "%s/quickstart/quickstart_000000004.safetensors", q.oa);
    check_file(p, 16, 8, 18, 12);
    /* lokr_factor 4: 288 = 4 x 72, 96 = 4 x 24 (ai-toolkit: the factor first) */
    tt_cfg c = q.c;
    c.out = q.ob;
    CU_ASSERT_FATAL(write_lokr_cfg(q.cb, &c, 4, 1, 16, NULL, NULL) == 0);
    CU_ASSERT_FATAL(tt_run(q.cb, q.ob, 300) == 0);
    tt_fmt(p, sizeof p, "%s/quickstart/quickstart_000000004.safetensors", q.ob);
    check_file(p, 4, 4, 72, 24);
    tt_rm_rf(q.root);
}

static void test_lowrank(void) {
    tt_ab q;
    CU_ASSERT_FATAL(tt_ab_setup(&q, "lokr_lowrank", "straight", "resumed", 4, 2, 4) == 0);
    CU_ASSERT_FATAL(write_lokr_cfg(q.ca, &q.c, -1, 0, 4, NULL, NULL) == 0);
    CU_ASSERT_FATAL(tt_run(q.ca, q.oa, 300) == 0);
    char p[1300];
    static tt_losses L;
    tt_fmt(p, sizeof p, "%s.out", q.oa);
    CU_ASSERT(tt_parse_losses(p, &L) == 4);
    for (int i = 0; i < L.n; i++) CU_ASSERT(isfinite(L.loss[i]) && L.loss[i] > 0);
    tt_fmt(p, sizeof p, "%s/quickstart/quickstart_000000004.safetensors", q.oa);
    ork_st_file *f = NULL;
    CU_ASSERT_FATAL(ork_st_open(p, &f) == ORK_OK);
    const ork_st_tensor *w1 = ork_st_find(f, "lora_unet_double_blocks_0_img_attn_qkv.lokr_w1");
    const ork_st_tensor *a = ork_st_find(f, "lora_unet_double_blocks_0_img_attn_qkv.lokr_w2_a");
    const ork_st_tensor *b = ork_st_find(f, "lora_unet_double_blocks_0_img_attn_qkv.lokr_w2_b");
    const ork_st_tensor *al = ork_st_find(f, "lora_unet_double_blocks_0_img_attn_qkv.alpha");
    CU_ASSERT_FATAL(w1 && a && b && al);
    CU_ASSERT(w1->shape[0] == 16 && w1->shape[1] == 8);
    CU_ASSERT(a->shape[0] == 18 && a->shape[1] == 4 && b->shape[0] == 4 && b->shape[1] == 12);
    CU_ASSERT(!ork_st_find(f, "lora_unet_double_blocks_0_img_attn_qkv.lokr_w2"));
    ork_st_close(f);
    /* resume: 2 steps, then to 4 */
    tt_cfg c = q.c;
    c.out = q.ob;
    c.steps = 2;
    CU_ASSERT_FATAL(write_lokr_cfg(q.cb, &c, -1, 0, 4, NULL, NULL) == 0);
    char l1[1200], l2[1200];
    tt_fmt(l1, sizeof l1, "%s_1", q.ob);
    tt_fmt(l2, sizeof l2, "%s_2", q.ob);
    CU_ASSERT_FATAL(tt_run(q.cb, l1, 300) == 0);
    c.steps = 4;
    CU_ASSERT_FATAL(write_lokr_cfg(q.cb, &c, -1, 0, 4, NULL, NULL) == 0);
    CU_ASSERT_FATAL(tt_run(q.cb, l2, 300) == 0);
    CU_ASSERT(tt_same_losses(q.oa, 2, l2, 2));
    CU_ASSERT(tt_same_output(q.oa, q.ob, "000000004"));
    CU_ASSERT(tt_same_output(q.oa, q.ob, "state"));
    tt_rm_rf(q.root);
}

static const ork_test_case cases[] = {
    {"a LoKr run learns; its file has LyCORIS's keys and shapes", test_learns},
    {"resume is bit-identical", test_resume_bitwise},
    {"streamed trainable state == resident", test_streamed_equals_resident},
    {"fp8-quantized base weights; lokr_factor 4", test_quantized_and_factor},
    {"lokr_full_rank: false: a low-rank w2 trains, saves, resumes", test_lowrank},
    {NULL, NULL}};
#ifdef TT_GPU
#include "cuda/cuda_ctx.h" /* ork_cuda_device_count */
int main(void) {
    if (ork_cuda_device_count() <= 0) return 77;
    return ork_test_run("lokr_train_cuda", NULL, NULL, cases);
}
#else
ORK_TEST_MAIN("lokr_train", NULL, NULL, cases)
#endif
