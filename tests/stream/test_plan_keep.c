/* tests/stream/test_plan_keep.c — the plan's estimate of keep instead of
 * recompute (stream/plan.h keep_*, issue #31) on FLUX.1-dev 1024² shapes: on
 * the H200 with the whole card every trainable block keeps its forward and
 * the step is predicted a third of its FLOPs lighter for those blocks; a
 * tight budget keeps a few trailing ones and the kept bytes fit beside the
 * plan's total; a plan that streams, or one for the CPU, keeps none; the
 * plan's print says it in one line only when it keeps some. */
#include "ork_test.h"

#include <orakul/tokenizer.h> /* flux_decl.h's prompt template names */
#include "flux_shapes.h"

#include "stream/plan.h"

static fx_model g_fx;

static ork_plan_inputs inputs(const char *dev, double budget_gb, ork_offload_mode mode) {
    ork_plan_inputs in = {0};
    in.info = &g_fx.info;
    ork_device_kind_find(dev, &in.dev);
    in.budget_gb = budget_gb;
    in.device_free = (size_t)139 << 30;
    in.mode = mode;
    in.weight_bytes = 2;
    in.lora_rank = 128;
    in.opt_bytes_per_param = 8;
    in.batch = 1;
    in.img_tokens = 4096;
    in.txt_tokens = 512;
    in.first_trainable = -1;
    return in;
}

static int printed_keep_line(const ork_stream_plan *p) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return -1;
    ork_stream_plan_print(p, f);
    fclose(f);
    int n = 0;
    for (char *c = buf; (c = strstr(c, "  recompute: the last ")); c++) n++;
    free(buf);
    return n;
}

static void test_keep_estimate(void) {
    fx_init(&g_fx);
    /* the whole H200: every trainable block */
    ork_plan_inputs in = inputs("h200", 0, ORK_OFFLOAD_NONE);
    ork_stream_plan *p = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_stream_plan_make(&in, &p), ORK_OK);
    int trainable = p->n_blocks - p->first_trainable;
    CU_ASSERT(trainable > 50);
    CU_ASSERT_EQUAL(p->keep_blocks, trainable);
    CU_ASSERT(p->keep_bytes > (size_t)40 << 30 && p->keep_bytes < (size_t)80 << 30); /* measured 60.1 GiB */
    CU_ASSERT(p->total + p->keep_bytes < p->budget);
    /* no recompute: the step loses about a forward of FLOPs (~74 of ~245 TFLOP) */
    double r = p->keep_step_flops / p->step_flops;
    CU_ASSERT(r > 0.6 && r < 0.8);
    CU_ASSERT(p->t_step_kept > 0 && p->t_step_kept < p->t_step);
    CU_ASSERT_EQUAL(printed_keep_line(p), 1);
    size_t total_all = p->total;
    ork_stream_plan_free(p);
    /* a budget a few GiB over the plan's total: some trailing blocks, within it */
    in = inputs("h200", (double)total_all / 1073741824.0 + 8.0, ORK_OFFLOAD_NONE);
    CU_ASSERT_EQUAL_FATAL(ork_stream_plan_make(&in, &p), ORK_OK);
    CU_ASSERT(p->keep_blocks > 0 && p->keep_blocks < trainable);
    CU_ASSERT(p->total + p->keep_bytes <= p->budget);
    CU_ASSERT(p->keep_step_flops > r * p->step_flops);
    ork_stream_plan_free(p);
    /* streaming: none */
    in = inputs("h200", 16, ORK_OFFLOAD_AUTO);
    CU_ASSERT_EQUAL_FATAL(ork_stream_plan_make(&in, &p), ORK_OK);
    CU_ASSERT(p->n_streamed > 0);
    CU_ASSERT_EQUAL(p->keep_blocks, 0);
    CU_ASSERT_EQUAL(p->keep_bytes, 0);
    CU_ASSERT_EQUAL(printed_keep_line(p), 0);
    ork_stream_plan_free(p);
    /* the CPU: none (the runner keeps only on a GPU) */
    in = inputs("cpu", 0, ORK_OFFLOAD_NONE);
    in.device_free = (size_t)1 << 62;
    CU_ASSERT_EQUAL_FATAL(ork_stream_plan_make(&in, &p), ORK_OK);
    CU_ASSERT_EQUAL(p->keep_blocks, 0);
    CU_ASSERT_EQUAL(printed_keep_line(p), 0);
    ork_stream_plan_free(p);
}

static const ork_test_case cases[] = {
    {"keep instead of recompute: the plan's estimate", test_keep_estimate},
    {NULL, NULL},
};

ORK_TEST_MAIN("plan_keep", NULL, NULL, cases)
