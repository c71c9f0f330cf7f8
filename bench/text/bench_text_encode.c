/* bench/text/bench_text_encode.c — captions per second of the text conditioner
 * (core/text/conditioner.h): FLUX.1's T5 -> txt and CLIP -> vec, through the
 * t5clip plugin (ORK_PLUGIN_DIR) and the quant plugin for --quantize, on CUDA
 * (BF16) when built with it, else on the CPU (F32). The model is a stand-in
 * ork_model_info with FLUX.1's two text slots; its widths are the encoders'.
 *
 * Usage: bench_text_encode --t5 DIR --t5-tok PATH --clip DIR --clip-tok PATH
 *            --captions FILE [--n N] [--T 512] [--quantize] [--qtype qfloat8]
 *            [--budget-gb G] [--layer-major] [--repeat R] [--cpu] [--tag S]
 *   captions: one per line (repeated when there are fewer than N).
 * Prints one JSON line per repeat on stdout: impl "orakul", device, dtype
 * ("bf16"/"f32", or the quantizer's id for T5), captions, T, seconds (the
 * whole call: tokenize, load and quantize the weights, run, copy back) and
 * its parts load_seconds (weights file -> host -> device, quantize; every
 * encoder, every layer-major pass), tokenize_seconds, encode_seconds (the
 * forward passes and the outputs' copies back; encode_captions_per_s),
 * captions_per_s, peak_gib (the allocator's high-water mark: weights +
 * activations; the CUDA context and cuBLAS workspace are not in it),
 * weight_gib, layer_major, chunk, retries (chunks the budget refused, 0
 * when the plan's activation figure is right), act_peak_gib (the most
 * activation bytes live at once), act_planned_gib (the arena the plan sized)
 * and act_arena_gib (its size at the end: larger when it grew). Not a test. */
#include "platform/platform.h"
#include "plugin/registry.h"
#include "tensor/backend.h"
#include "text/cond_plan.h"
#include "text/conditioner.h"
#include "train/services.h"
#include "util/log.h"

#include "bench_args.h"

#include <orakul/orakul.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef ORAKUL_HAVE_CUDA
#include "cuda/cuda_ctx.h"
#endif

int main(int argc, char **argv) {
    const char *t5 = bench_arg(argc, argv, "--t5", NULL), *t5tok = bench_arg(argc, argv, "--t5-tok", NULL);
    const char *clip = bench_arg(argc, argv, "--clip", NULL), *cliptok = bench_arg(argc, argv, "--clip-tok", NULL);
    const char *capf = bench_arg(argc, argv, "--captions", NULL), *tag = bench_arg(argc, argv, "--tag", "");
    int n = atoi(bench_arg(argc, argv, "--n", "256")), T = atoi(bench_arg(argc, argv, "--T", "512"));
    int repeat = atoi(bench_arg(argc, argv, "--repeat", "1"));
    double budget_gb = atof(bench_arg(argc, argv, "--budget-gb", "0"));
    if (!t5 || !t5tok || !clip || !cliptok || !capf || n < 1 || T < 1) {
        fprintf(stderr, "usage: %s --t5 DIR --t5-tok PATH --clip DIR --clip-tok PATH --captions FILE [--n N] [--T 512] "
                "[--quantize] [--qtype Q] [--budget-gb G] [--layer-major] [--repeat R] [--cpu] [--tag S]\n", argv[0]);
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
    ork_registry *reg = NULL;
    if (ork_services_register() != ORK_OK || ork_registry_create(NULL, &reg) != ORK_OK ||
        ork_registry_add_file(reg, ORK_PLUGIN_DIR "/orakul-t5clip.so") != ORK_OK ||
        ork_registry_add_file(reg, ORK_PLUGIN_DIR "/orakul-quant.so") != ORK_OK)
        return 1;
    /* the encoders' widths: open each once with a model that takes whatever they give */
    ork_text_slot slots[2] = {
        {.encoder = "t5", .feeds = ORK_TEXT_FEEDS_TXT, .flags = ORK_TEXT_SLOT_QUANTIZE, .subfolder = "text_encoder_2",
         .tokenizer_subfolder = "tokenizer_2", .max_length = T, .path_key = "t5_path",
         .tokenizer_key = "t5_tokenizer_path", .path = t5, .tokenizer_path = t5tok},
        {.encoder = "clip", .feeds = ORK_TEXT_FEEDS_VEC, .subfolder = "text_encoder", .tokenizer_subfolder = "tokenizer",
         .max_length = 77, .path_key = "clip_path", .tokenizer_key = "clip_tokenizer_path", .path = clip,
         .tokenizer_path = cliptok},
    };
    ork_model_info mi;
    memset(&mi, 0, sizeof mi);
    mi.abi = (ork_abi)ORK_ABI_INIT(ork_model_info);
    mi.family = "flux";
    mi.variant = "bench";
    mi.context_dim = atoi(bench_arg(argc, argv, "--ctx", "4096"));
    mi.vec_dim = atoi(bench_arg(argc, argv, "--vec", "768"));
    mi.context_len = T;
    mi.n_text_slots = 2;
    mi.text_slots = slots;
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
        ork_text_embed e;
        if (ork_textcond_encode(tc, be, budget, n, (const char *const *)caps, &e) != ORK_OK) {
            rc = 1;
            break;
        }
        ork_textcond_stats s;
        ork_textcond_last_stats(tc, &s);
        /* a finite check, so a broken run does not post a figure */
        int finite = 1;
        for (size_t i = 0; i < (size_t)n * e.T * e.ctx_dim && finite; i += 997) finite = e.txt[i] == e.txt[i];
        printf("{\"impl\": \"orakul\", \"tag\": \"%s\", \"device\": \"%s\", \"dtype\": \"%s\", \"captions\": %d, \"T\": %d, "
               "\"seconds\": %.3f, \"captions_per_s\": %.2f, \"load_seconds\": %.3f, \"tokenize_seconds\": %.3f, "
               "\"encode_seconds\": %.3f, \"encode_captions_per_s\": %.2f, \"peak_gib\": %.3f, \"weight_gib\": %.3f, "
               "\"layer_major\": %d, \"chunk\": %d, \"retries\": %d, \"act_peak_gib\": %.3f, \"act_planned_gib\": %.3f, "
               "\"act_arena_gib\": %.3f, \"budget_gib\": %.2f, \"finite\": %d, \"repeat\": %d}\n",
               tag, name, o.quantize ? o.qtype : be->device == ORK_DEV_CUDA ? "bf16" : "f32", n, e.T, s.seconds,
               s.seconds > 0 ? n / s.seconds : 0.0, s.load_seconds, s.tokenize_seconds, s.encode_seconds,
               s.encode_seconds > 0 ? n / s.encode_seconds : 0.0, s.peak_bytes / 1073741824.0, s.weight_bytes / 1073741824.0,
               s.layer_major, s.chunk, s.retries, s.act_peak_bytes / 1073741824.0, s.act_planned_bytes / 1073741824.0,
               s.act_arena_bytes / 1073741824.0, budget_gb, finite, r);
        fflush(stdout);
        ork_text_embed_free(&e);
    }
    ork_textcond_close(tc);
    ork_registry_destroy(reg);
    for (int i = 0; i < n; i++) free(caps[i]);
    free(caps);
    return rc;
}
