/* bench/text/bench_llm_encode.c — captions per second of FLUX.2's text
 * encoders through the text conditioner (core/text/conditioner.h) and the llm
 * plugin (ORK_PLUGIN_DIR; the quant plugin for --quantize): FLUX.2-dev's
 * Mistral-Small-3.x slot (--variant flux2-dev, txt 3 x 5120) or klein's Qwen3
 * (--variant flux2-klein-4b, 3 x 2560), declared as the FLUX plugin declares
 * them (plugins/models/flux/flux_decl.h: the chat template, its padding side,
 * 512 tokens), on CUDA (BF16) when built with it, else on the CPU (F32).
 *
 * Usage: bench_llm_encode --weights DIR --tok DIR --captions FILE
 *            [--variant flux2-dev|flux2-klein-4b] [--n N] [--T 512]
 *            [--quantize] [--qtype qfloat8] [--budget-gb G] [--layer-major]
 *            [--repeat R] [--cpu] [--tag S] [--each]
 *   captions: one per line (repeated when there are fewer than N).
 *   --each: ork_textcond_encode_each (what `orakul run` calls: one encoder's
 *   rows handed over chunk by chunk) instead of ork_textcond_encode.
 * Prints the encode's plan (text/cond_plan.h) on stderr and one JSON line per
 * repeat on stdout: impl "orakul", tag, device, dtype, captions, T, seconds
 * (the whole call: tokenize, weights to the device — the checkpoint read,
 * quantized, copied, every layer-major block —, encode, rows back),
 * captions_per_s, load_seconds, encode_seconds, peak_gib, weight_gib,
 * layer_major, chunk, retries, the plan's passes, streamer (1: layer-major
 * through the core's block streamer, text/cond_plan.h), link_gb (its bytes
 * over the link) and predicted_s, budget_gib, finite. Not a test. */
#include "platform/platform.h"
#include "plugin/registry.h"
#include "tensor/backend.h"
#include "text/cond_plan.h"
#include "text/conditioner.h"
#include "train/services.h"
#include "util/log.h"

#include "bench_args.h"

#include <orakul/tokenizer.h> /* the prompt templates flux_decl.h names */
#include "flux_decl.h" /* FLUX.2's text slots, as the FLUX plugin declares them */

#include <orakul/orakul.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef ORAKUL_HAVE_CUDA
#include "cuda/cuda_ctx.h"
#endif

typedef struct each_sum {
    int calls, finite;
} each_sum;
static ork_status each_fn(void *user, int i, const float *txt, const float *vec) {
    (void)i, (void)vec;
    each_sum *s = user;
    s->calls++;
    if (txt && txt[0] != txt[0]) s->finite = 0;
    return ORK_OK;
}

int main(int argc, char **argv) {
    const char *weights = bench_arg(argc, argv, "--weights", NULL), *tok = bench_arg(argc, argv, "--tok", NULL);
    const char *capf = bench_arg(argc, argv, "--captions", NULL), *tag = bench_arg(argc, argv, "--tag", "");
    const char *variant = bench_arg(argc, argv, "--variant", "flux2-dev");
    int n = atoi(bench_arg(argc, argv, "--n", "64")), T = atoi(bench_arg(argc, argv, "--T", "512"));
    int repeat = atoi(bench_arg(argc, argv, "--repeat", "1")), each = bench_flag(argc, argv, "--each");
    double budget_gb = atof(bench_arg(argc, argv, "--budget-gb", "0"));
    if (!weights || !tok || !capf || n < 1 || T < 1) {
        fprintf(stderr, "usage: %s --weights DIR --tok DIR --captions FILE [--variant flux2-dev|flux2-klein-4b] "
                "[--n N] [--T 512] [--quantize] [--qtype Q] [--budget-gb G] [--layer-major] [--repeat R] [--cpu] "
                "[--tag S] [--each]\n", argv[0]);
        return 2;
    }
    if (bench_flag(argc, argv, "--layer-major")) ork_env_set("ORAKUL_TEXT_LAYER_MAJOR", "1");
    const ork_backend *be = ork_cpu_backend();
#ifdef ORAKUL_HAVE_CUDA
    if (!bench_flag(argc, argv, "--cpu") && ork_cuda_device_count() > 0) be = ork_cuda_backend();
#endif
    char **caps = bench_read_captions(capf, n);
    if (!caps) {
        fprintf(stderr, "%s: no captions\n", capf);
        return 2;
    }
    int ctx = !strncmp(variant, "flux2-klein", 11) ? 7680 : 15360;
    ctx = atoi(bench_arg(argc, argv, "--ctx", ctx == 7680 ? "7680" : "15360"));
    ork_text_slot slot;
    if (!flux2_text_slot(variant, ctx, T, weights, tok, &slot)) {
        fprintf(stderr, "%s: not a FLUX.2 variant with a text slot\n", variant);
        return 2;
    }
    ork_registry *reg = NULL;
    if (ork_services_register() != ORK_OK || ork_registry_create(NULL, &reg) != ORK_OK ||
        ork_registry_add_file(reg, ORK_PLUGIN_DIR "/orakul-llm" ORK_PLUGIN_SUFFIX) != ORK_OK ||
        ork_registry_add_file(reg, ORK_PLUGIN_DIR "/orakul-quant" ORK_PLUGIN_SUFFIX) != ORK_OK)
        return 1;
    ork_model_info mi;
    memset(&mi, 0, sizeof mi);
    mi.abi = (ork_abi)ORK_ABI_INIT(ork_model_info);
    mi.family = "flux";
    mi.variant = variant;
    mi.context_dim = ctx;
    mi.context_len = T;
    mi.n_text_slots = 1;
    mi.text_slots = &slot;
    ork_textcond_opts o = {0};
    o.quantize = bench_flag(argc, argv, "--quantize");
    o.qtype = bench_arg(argc, argv, "--qtype", "qfloat8");
    ork_textcond *tc = NULL;
    if (ork_textcond_open(reg, &mi, &o, &tc) != ORK_OK || !tc) return 1;
    size_t budget = (size_t)(budget_gb * 1073741824.0);
    ork_tc_encode_plan ep;
    if (ork_tc_encode_plan_make(tc, be, budget, n, &ep) != ORK_OK) return 1;
    ork_tc_encode_plan_print(tc, &ep, stderr);
    int rc = 0;
    for (int r = 0; r < repeat && !rc; r++) {
        char name[256] = "cpu";
#ifdef ORAKUL_HAVE_CUDA
        size_t free0 = 0, total = 0;
        if (be->device == ORK_DEV_CUDA) ork_cuda_mem_info(0, &free0, &total, name, sizeof name);
#endif
        int finite = 1, got = n;
        if (each) {
            each_sum s = {0, 1};
            if (ork_textcond_encode_each(tc, be, budget, n, (const char *const *)caps, each_fn, &s) != ORK_OK) {
                rc = 1;
                break;
            }
            finite = s.finite;
            got = s.calls;
        } else {
            ork_text_embed e;
            if (ork_textcond_encode(tc, be, budget, n, (const char *const *)caps, &e) != ORK_OK) {
                rc = 1;
                break;
            }
            /* a finite check, so a broken run does not post a figure */
            for (size_t i = 0; i < (size_t)n * e.T * e.ctx_dim && finite; i += 997) finite = e.txt[i] == e.txt[i];
            ork_text_embed_free(&e);
        }
        ork_textcond_stats s;
        ork_textcond_last_stats(tc, &s);
        const ork_tc_slot_plan *sp = &ep.s[0];
        printf("{\"impl\": \"orakul\", \"tag\": \"%s\", \"variant\": \"%s\", \"device\": \"%s\", \"dtype\": \"%s\", "
               "\"captions\": %d, \"rows\": %d, \"T\": %d, \"seconds\": %.3f, \"captions_per_s\": %.2f, "
               "\"load_seconds\": %.3f, \"tokenize_seconds\": %.3f, \"encode_seconds\": %.3f, "
               "\"encode_captions_per_s\": %.2f, \"peak_gib\": %.3f, \"weight_gib\": %.3f, \"layer_major\": %d, "
               "\"chunk\": %d, \"retries\": %d, \"passes\": %d, \"streamer\": %d, \"link_gb\": %.3f, \"predicted_s\": %.3f, "
               "\"budget_gib\": %.2f, \"each\": %d, \"finite\": %d, \"repeat\": %d}\n",
               tag, variant, name, o.quantize ? o.qtype : be->device == ORK_DEV_CUDA ? "bf16" : "f32", n, got, T,
               s.seconds, s.seconds > 0 ? n / s.seconds : 0.0, s.load_seconds, s.tokenize_seconds, s.encode_seconds,
               s.encode_seconds > 0 ? n / s.encode_seconds : 0.0, s.peak_bytes / 1073741824.0,
               s.weight_bytes / 1073741824.0, s.layer_major, s.chunk, s.retries, sp->passes, sp->streamer, ep.link_bytes / 1e9,
               ep.t_pred, budget_gb, each, finite, r);
        fflush(stdout);
    }
    ork_textcond_close(tc);
    ork_registry_destroy(reg);
    for (int i = 0; i < n; i++) free(caps[i]);
    free(caps);
    return rc;
}
