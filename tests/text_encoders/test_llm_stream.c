/* tests/text_encoders/test_llm_stream.c — the layer-major encode through the
 * core's block streamer (core/text/cond_run.c, ork_tc_lm_streamer; issue #29:
 * every weight put once into pinned host memory, two device slots, block k+1
 * over the link while block k runs) with the llm plugin, on the CPU. A Qwen3
 * checkpoint written here with random BF16 weights (llm_ckpt.h: 27 of 36
 * layers, width 32; the token table as wide as tok_flux2/qwen3's ids), a model of one txt
 * slot with Qwen3's chat template:
 *  - streamed == resident == the per-block layer-major store
 *    (ORAKUL_TEXT_STREAM=0) bit for bit, the same chunks; the streamer reads
 *    the checkpoint once;
 *  - carries on the host in groups of one chunk (several streamer passes
 *    over one store): still one read, the same bits; encode_each alike;
 *  - quantize_te (qfloat8): streamed == resident bit for bit (the weights
 *    quantized once on the host, fp8 in the slots);
 *  - the plan: a budget of one block beside the chunk keeps the per-block
 *    store; one with room for the second slot takes the streamer, prints it,
 *    counts the second slot in its peak and the pinned weights on the host,
 *    and the encode at exactly that budget runs with no retry; a host
 *    allowance below the weights (ORAKUL_TEXT_WCACHE_GIB) keeps the per-block
 *    store.
 * LS_GPU (test_llm_stream_cuda, label gpu): the same on CUDA in BF16 (the
 * copy engine's own H2D stream, pinned arenas, block k+1 copied while block k
 * runs); exit 77 without a device. */
#include "ork_test.h"
#include "plugin_test_util.h"

#include "llm_ckpt.h"
#include "text/cond_internal.h"
#include "text/cond_plan.h"
#include "text/conditioner.h"
#include "text/prompt_format.h"
#include "util/log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef LS_GPU
#include "cuda/cuda_ctx.h"
#define BE() ork_cuda_backend()
#define ACT ORK_BF16
#else
#define BE() ork_cpu_backend()
#define ACT ORK_F32
#endif

#define TOKDIR ORK_SOURCE_DIR "/tests/fixtures/text/tok_flux2/qwen3"
#define W 32   /* hidden */
#define TOK 64 /* tokens per caption */
#define NCAP 7

static const char *const CAPS[NCAP] = {"a photo of ohwx dog on the beach", "", "two cats on a sofa, evening light",
                                       "café crème, 2 cups!", "a red cube", "ohwx",
                                       "a watercolor of a harbour at dawn, mist over the water"};
static ork_registry *reg;
static char tmp[256];
static char info_line[4096];

static void log_sink(ork_log_level lvl, const char *line, void *user) {
    (void)user;
    if (lvl < ORK_LOG_WARN && strstr(line, "text encode ")) snprintf(info_line, sizeof info_line, "%s", line);
}

static int init(void) {
    ork_log_set_sink(log_sink, NULL);
    if (ork_test_registry_open(ORK_PLUGIN_DIR "/orakul-llm" ORK_PLUGIN_SUFFIX, &reg) ||
        ork_registry_add_file(reg, ORK_PLUGIN_DIR "/orakul-quant" ORK_PLUGIN_SUFFIX) != ORK_OK)
        return 1;
    snprintf(tmp, sizeof tmp, "/tmp/ork_llm_stream_XXXXXX");
    if (!mkdtemp(tmp)) return 1;
    char d[400];
    snprintf(d, sizeof d, "%s/qwen3", tmp);
    static const char *const files[] = {"tokenizer.json.gz", "tokenizer_config.json", NULL};
    llm_ckpt c = {.qwen = 1, .width = W, .layers = 27, .cfg_layers = 36, .heads = 4, .kv_heads = 2, .head_dim = 8,
                  .ff = 64, .vocab = 151936, .tokdir = TOKDIR, .tokfiles = files, .seed = 29};
    return llm_ckpt_write(d, &c);
}

static int clean(void) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (tmp[0] && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    ork_log_set_sink(NULL, NULL);
    return ork_test_registry_close(&reg);
}

/* ---- the conditioner --------------------------------------------------------------------------- */

static ork_text_slot slot;
static ork_model_info mi;
static char src[400];

static ork_textcond *open_tc(int quantize) {
    snprintf(src, sizeof src, "%s/qwen3", tmp);
    slot = (ork_text_slot){.encoder = "qwen3", .feeds = ORK_TEXT_FEEDS_TXT, .flags = ORK_TEXT_SLOT_QUANTIZE,
                           .subfolder = "text_encoder", .tokenizer_subfolder = "tokenizer", .max_length = TOK,
                           .path_key = "text_encoder_path", .tokenizer_key = "text_encoder_tokenizer_path",
                           .prompt_template = ORK_TEMPLATE_QWEN_CHAT, .prompt_flags = ORK_TEMPLATE_GENERATION};
    memset(&mi, 0, sizeof mi);
    mi.abi = (ork_abi)ORK_ABI_INIT(ork_model_info);
    mi.family = "flux";
    mi.variant = "tiny-klein";
    mi.context_dim = 3 * W;
    mi.context_len = TOK;
    mi.n_text_slots = 1;
    mi.text_slots = &slot;
    mi.source_dir = src;
    ork_textcond_opts o = {0};
    o.quantize = quantize;
    o.qtype = "qfloat8";
    ork_textcond *tc = NULL;
    return ork_textcond_open(reg, &mi, &o, &tc) == ORK_OK ? tc : NULL;
}

/* Every caption's rows (NCAP, TOK, 3W) at budget b, or NULL; info_line holds the encode's line. */
static float *encode(ork_textcond *tc, size_t b) {
    ork_text_embed e;
    info_line[0] = 0;
    if (ork_textcond_encode(tc, BE(), b, NCAP, CAPS, &e) != ORK_OK) return NULL;
    float *t = e.txt;
    e.txt = NULL;
    ork_text_embed_free(&e);
    return t;
}

static int same(const float *a, const float *b) {
    return a && b && !memcmp(a, b, (size_t)NCAP * TOK * 3 * W * sizeof(float));
}

static int reads(void) {
    const char *r = strstr(info_line, "checkpoint read ");
    return r ? atoi(r + 16) : -1;
}

static int streamed_line(void) { return strstr(info_line, "layer-major through the streamer") != NULL; }

/* resident, streamed and per-block layer-major at budget 0, chunks of 3 */
static void case_three_ways(int quantize) {
    ork_textcond *tc = open_tc(quantize);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tc);
    setenv("ORAKUL_TEXT_CHUNK", "3", 1);
    float *res = encode(tc, 0);
    CU_ASSERT(strstr(info_line, "resident") != NULL);
    setenv("ORAKUL_TEXT_LAYER_MAJOR", "1", 1);
    float *st = encode(tc, 0);
    printf("\n    %s", info_line);
    CU_ASSERT(streamed_line());
    CU_ASSERT_EQUAL(reads(), 1);
    setenv("ORAKUL_TEXT_STREAM", "0", 1);
    float *blk = encode(tc, 0);
    CU_ASSERT(!streamed_line() && strstr(info_line, "layer-major (carries") != NULL);
    unsetenv("ORAKUL_TEXT_STREAM");
    unsetenv("ORAKUL_TEXT_LAYER_MAJOR");
    unsetenv("ORAKUL_TEXT_CHUNK");
    CU_ASSERT_PTR_NOT_NULL(res);
    CU_ASSERT(same(res, st));
    CU_ASSERT(same(res, blk));
    /* not all zero: the comparison compares something */
    double m = 0;
    for (size_t i = 0; res && i < (size_t)NCAP * TOK * 3 * W; i++) m = fmax(m, fabs(res[i]));
    CU_ASSERT(m > 0.1);
    free(res), free(st), free(blk);
    ork_textcond_close(tc);
    printf("\n  ");
}
static void test_bits(void) { case_three_ways(0); }
static void test_bits_fp8(void) { case_three_ways(1); }

typedef struct each_ctx {
    float *rows;
    int calls;
} each_ctx;
static ork_status each_fn(void *user, int i, const float *txt, const float *vec) {
    each_ctx *c = user;
    if (i < 0 || i >= NCAP || vec || !txt) return ORK_E_INTERNAL;
    memcpy(c->rows + (size_t)i * TOK * 3 * W, txt, (size_t)TOK * 3 * W * sizeof(float));
    c->calls++;
    return ORK_OK;
}

/* carries on the host in groups of one chunk: three streamer passes over one store */
static void test_groups(void) {
    ork_textcond *tc = open_tc(0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tc);
    setenv("ORAKUL_TEXT_CHUNK", "3", 1);
    float *res = encode(tc, 0);
    setenv("ORAKUL_TEXT_LAYER_MAJOR", "1", 1);
    setenv("ORAKUL_TEXT_CARRY", "host", 1);
    setenv("ORAKUL_TEXT_HOST_GIB", "0.00001", 1); /* 10 KiB: a group is one chunk */
    float *g = encode(tc, 0);
    printf("\n    %s", info_line);
    CU_ASSERT(streamed_line() && strstr(info_line, "carries on the host") != NULL);
    CU_ASSERT_EQUAL(reads(), 1);
    CU_ASSERT(same(res, g));
    each_ctx c = {calloc((size_t)NCAP * TOK * 3 * W, sizeof(float)), 0};
    CU_ASSERT_FATAL(c.rows != NULL);
    CU_ASSERT_EQUAL(ork_textcond_encode_each(tc, BE(), 0, NCAP, CAPS, each_fn, &c), ORK_OK);
    CU_ASSERT_EQUAL(c.calls, NCAP);
    CU_ASSERT(same(res, c.rows));
    unsetenv("ORAKUL_TEXT_HOST_GIB");
    unsetenv("ORAKUL_TEXT_CARRY");
    unsetenv("ORAKUL_TEXT_LAYER_MAJOR");
    unsetenv("ORAKUL_TEXT_CHUNK");
    free(c.rows);
    free(res), free(g);
    ork_textcond_close(tc);
    printf("\n  ");
}

static char *plan_text(ork_textcond *tc, size_t b, ork_tc_encode_plan *ep) {
    static char buf[8192];
    memset(buf, 0, sizeof buf);
    if (ork_tc_encode_plan_make(tc, BE(), b, NCAP, ep) != ORK_OK) return NULL;
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    if (!f) return NULL;
    ork_tc_encode_plan_print(tc, ep, f);
    fclose(f);
    return buf;
}

/* the budget decides: one block beside the chunk (per-block store), or room for the second slot (streamer) */
static void test_plan(void) {
    ork_textcond *tc = open_tc(0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tc);
    setenv("ORAKUL_TEXT_CHUNK", "3", 1);
    setenv("ORAKUL_TEXT_LAYER_MAJOR", "1", 1);
    setenv("ORAKUL_TEXT_CARRY", "device", 1);
    float *res = encode(tc, 0);
    tc_plan p;
    CU_ASSERT_EQUAL_FATAL(ork_tc_plan(&tc->sl[0], ACT, 0, NCAP, 1, &p), ORK_OK);
    size_t one = p.w_block_max + p.scratch + ork_tc_chunk_need(&p, 3) + 4096;
    size_t two = one + ork_tc_lm_slot_extra(&p) + (size_t)NCAP * p.carry_per_caption;
    ork_tc_encode_plan ep;
    char *t = plan_text(tc, one, &ep);
    CU_ASSERT(t && ep.s[0].layer_major && !ep.s[0].streamer && !strstr(t, "block streamer"));
    size_t peak1 = ep.s[0].device_peak;
    t = plan_text(tc, two, &ep);
    CU_ASSERT(t && ep.s[0].layer_major && ep.s[0].streamer && strstr(t, "through the block streamer"));
    if (t) printf("\n%s", t);
    CU_ASSERT_EQUAL(ep.s[0].device_peak, peak1 + ork_tc_lm_slot_extra(&p));
    CU_ASSERT_EQUAL(ep.s[0].host_cache, p.w_total);
    CU_ASSERT(ep.s[0].device_peak <= two);
    /* the encode at exactly that budget: through the streamer, no retry, the same bits */
    float *at = encode(tc, two);
    printf("    %s", info_line);
    CU_ASSERT(streamed_line());
    ork_textcond_stats s;
    ork_textcond_last_stats(tc, &s);
    CU_ASSERT_EQUAL(s.retries, 0);
    CU_ASSERT(s.peak_bytes <= two);
    CU_ASSERT(same(res, at));
    float *below = encode(tc, one);
    CU_ASSERT(!streamed_line() && strstr(info_line, "layer-major") != NULL);
    CU_ASSERT(same(res, below));
    /* a host allowance below the weights: the per-block store whatever the budget */
    setenv("ORAKUL_TEXT_WCACHE_GIB", "0.001", 1);
    t = plan_text(tc, two, &ep);
    CU_ASSERT(t && ep.s[0].layer_major && !ep.s[0].streamer);
    float *small = encode(tc, two);
    CU_ASSERT(!streamed_line());
    CU_ASSERT(same(res, small));
    unsetenv("ORAKUL_TEXT_WCACHE_GIB");
    unsetenv("ORAKUL_TEXT_CARRY");
    unsetenv("ORAKUL_TEXT_LAYER_MAJOR");
    unsetenv("ORAKUL_TEXT_CHUNK");
    free(res), free(at), free(below), free(small);
    ork_textcond_close(tc);
    printf("\n  ");
}

static const ork_test_case cases[] = {
    {"streamed == resident == per-block, bit for bit", test_bits},
    {"quantize_te: streamed == resident, bit for bit", test_bits_fp8},
    {"host carries in groups: passes over one store", test_groups},
    {"plan: the second slot decides, the budget holds", test_plan},
    {NULL, NULL},
};

#ifdef LS_GPU
int main(void) {
    if (ork_cuda_device_count() <= 0) return 77;
    return ork_test_run("llm_stream_cuda", init, clean, cases);
}
#else
ORK_TEST_MAIN("llm_stream", init, clean, cases)
#endif
