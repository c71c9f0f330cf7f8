/* tests/text/test_cond_plan.c — the text encode's plan (core/text/cond_plan.h)
 * and the streamed (layer-major) encode of an llm encoder (issue #29 point 3),
 * on the CPU: a Mistral3 checkpoint written here with random F32 weights (the
 * 30 layers FLUX.2-dev reads of a config of 40, width 32, a feed-forward of
 * 1024 so that the 29 blocks after the first outweigh the token table;
 * tokenizer tests/fixtures/text/tok_flux2/mistral) through the conditioner
 * with the llm plugin (and the quant plugin for quantize_te).
 *  - budget 0: resident; a budget of the largest block + the margin + three
 *    captions' chunk: streamed, 3 captions per chunk, one weight pass whose
 *    link bytes are the weights'; the printed lines say so;
 *  - a budget below one block and one caption: refused with one line naming
 *    the numbers; a host with less memory than the encode needs: refused; a
 *    budget above the (planned) card's memory less 1.5 GiB: lowered to it;
 *  - the streamed encode equals the resident one bit for bit (the same chunks),
 *    whatever the layer-major weight cache keeps (all: the checkpoint read
 *    once; one block at a time: read again; none: once per block), and so do
 *    encode_each's rows (one encoder: each chunk handed over as it comes);
 *  - quantize_te (qfloat8) streamed equals qfloat8 resident bit for bit, and
 *    the F32 encode within fp8's error;
 *  - an encoder's allocator must be empty when it closes (release check).
 * TCP_GPU (test_cond_plan_cuda, label gpu): the encodes on CUDA in BF16, and
 * the device's free memory after each encode back where it was; exit 77
 * without a device. */
#include "ork_test.h"
#include "plugin_test_util.h"

#include "io/safetensors.h"
#include "text/cond_internal.h"
#include "text/cond_plan.h"
#include "text/conditioner.h"
#include "util/log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef TCP_GPU
#include "cuda/cuda_ctx.h"
#define BE() ork_cuda_backend()
#else
#define BE() ork_cpu_backend()
#endif

#define FIX ORK_SOURCE_DIR "/tests/fixtures/text/tok_flux2/mistral"
#define HID 32
#define FF 1024
#define TOK 96
#define NL 30
#define NCAP 8

static const char *const CAPS[NCAP] = {"a photo of ohwx dog on the beach", "",
                                       "A close-up portrait of a woman with red hair, soft light, film grain",
                                       "café crème, 2 cups!", "a red cube", "two cats on a sofa, evening light",
                                       "ohwx", "a watercolor of a harbour at dawn"};

static ork_registry *reg;
static char tmp[256];

/* ---- log capture --------------------------------------------------------------------------------- */

static char last_err[2048], last_info[4096];
static void sink(ork_log_level lvl, const char *line, void *user) {
    (void)user;
    if (lvl >= ORK_LOG_WARN) snprintf(last_err, sizeof last_err, "%s", line);
    else if (strstr(line, "text encode ")) snprintf(last_info, sizeof last_info, "%s", line);
}

/* ---- a random Mistral3 checkpoint ---------------------------------------------------------------- */

static uint64_t rng = 11;
static float urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

static int put(ork_st_writer *w, void **keep, int *nk, const char *name, int64_t d0, int64_t d1, float s, int norm) {
    int64_t n = d0 * (d1 ? d1 : 1), sh[2] = {d0, d1};
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) return 1;
    for (int64_t i = 0; i < n; i++) v[i] = norm ? 1.0f + s * urand() : s * urand();
    keep[(*nk)++] = v;
    return ork_st_writer_add(w, name, ORK_F32, d1 ? 2 : 1, sh, v, (uint64_t)n * 4) != ORK_OK;
}

static int write_encoder(const char *dir) {
    const int H = 4, KV = 2, Dh = 12;
    const int64_t V = 131072;
    char p[700], name[200];
    snprintf(p, sizeof p, "%s/text_encoder", dir);
    if (mkdir(p, 0755)) return 1;
    ork_st_writer *w = NULL;
    if (ork_st_writer_new(&w) != ORK_OK) return 1;
    static void *keep[NL * 9 + 4];
    int nk = 0, e = 0;
    e |= put(w, keep, &nk, "model.language_model.embed_tokens.weight", V, HID, 1.0f, 0);
    static const char *const lin[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                      "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
    const int64_t rows[] = {H * Dh, KV * Dh, KV * Dh, HID, FF, FF, HID}, cols[] = {HID, HID, HID, H * Dh, HID, HID, FF};
    for (int l = 0; l < NL && !e; l++) {
        for (int j = 0; j < 7; j++) {
            snprintf(name, sizeof name, "model.language_model.layers.%d.%s.weight", l, lin[j]);
            e |= put(w, keep, &nk, name, rows[j], cols[j], 1.0f / sqrtf((float)cols[j]), 0);
        }
        snprintf(name, sizeof name, "model.language_model.layers.%d.input_layernorm.weight", l);
        e |= put(w, keep, &nk, name, HID, 0, 0.5f, 1);
        snprintf(name, sizeof name, "model.language_model.layers.%d.post_attention_layernorm.weight", l);
        e |= put(w, keep, &nk, name, HID, 0, 0.5f, 1);
    }
    e |= put(w, keep, &nk, "model.language_model.norm.weight", HID, 0, 0.5f, 1);
    snprintf(p, sizeof p, "%s/text_encoder/model.safetensors", dir);
    e |= ork_st_writer_commit(w, p) != ORK_OK;
    ork_st_writer_free(w);
    for (int i = 0; i < nk; i++) free(keep[i]);
    snprintf(p, sizeof p, "%s/text_encoder/config.json", dir);
    FILE *f = fopen(p, "w");
    if (!f) return 1;
    fprintf(f, "{\"model_type\": \"mistral3\", \"text_config\": {\"model_type\": \"mistral\", \"num_hidden_layers\": "
            "40, \"head_dim\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"rms_norm_eps\": 1e-5, "
            "\"rope_theta\": 1000000000.0, \"sliding_window\": null}}\n", Dh, H, KV);
    fclose(f);
    snprintf(p, sizeof p, "%s/tokenizer", dir);
    if (mkdir(p, 0755)) return 1;
    static const char *const files[] = {"tokenizer.json.gz", "tokenizer_config.json"};
    for (int i = 0; i < 2 && !e; i++) {
        char t[700];
        snprintf(t, sizeof t, "%s/%s", FIX, files[i]);
        snprintf(p, sizeof p, "%s/tokenizer/%s", dir, files[i]);
        e |= symlink(t, p) != 0;
    }
    return e;
}

static int init(void) {
    ork_log_set_sink(sink, NULL);
    if (ork_test_registry_open(ORK_PLUGIN_DIR "/orakul-llm" ORK_PLUGIN_SUFFIX, &reg) ||
        ork_registry_add_file(reg, ORK_PLUGIN_DIR "/orakul-quant" ORK_PLUGIN_SUFFIX) != ORK_OK)
        return 1;
    snprintf(tmp, sizeof tmp, "/tmp/ork_cond_plan_XXXXXX");
    if (!mkdtemp(tmp)) return 1;
    return write_encoder(tmp);
}

static int clean(void) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (tmp[0] && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    ork_log_set_sink(NULL, NULL);
    return ork_test_registry_close(&reg);
}

/* ---- the conditioner ----------------------------------------------------------------------------- */

static ork_text_slot slot;
static ork_model_info mi;

static ork_textcond *open_tc(int quantize) {
    memset(&slot, 0, sizeof slot);
    slot.encoder = "mistral3";
    slot.feeds = ORK_TEXT_FEEDS_TXT;
    slot.flags = ORK_TEXT_SLOT_QUANTIZE;
    slot.subfolder = "text_encoder";
    slot.tokenizer_subfolder = "tokenizer";
    slot.max_length = TOK;
    slot.path_key = "text_encoder_path";
    slot.tokenizer_key = "text_encoder_tokenizer_path";
    memset(&mi, 0, sizeof mi);
    mi.abi = (ork_abi)ORK_ABI_INIT(ork_model_info);
    mi.family = "flux";
    mi.variant = "tiny-flux2";
    mi.context_dim = 3 * HID;
    mi.context_len = TOK;
    mi.n_text_slots = 1;
    mi.text_slots = &slot;
    mi.source_dir = tmp;
    ork_textcond_opts o = {0};
    o.quantize = quantize;
    o.qtype = "qfloat8";
    ork_textcond *tc = NULL;
    if (ork_textcond_open(reg, &mi, &o, &tc) != ORK_OK) return NULL;
    return tc;
}

/* The slot's own plan at budget b (for the budgets the cases pick). */
static tc_plan slot_plan(ork_textcond *tc, size_t b) {
    tc_plan p;
    memset(&p, 0, sizeof p);
    CU_ASSERT_EQUAL(ork_tc_plan(&tc->sl[0], ork_tc_act_dtype(BE()), b, NCAP, 1, &p), ORK_OK);
    return p;
}

/* The budget that streams with chunks of c: the largest block, the margin and a chunk of c captions. */
static size_t lm_budget(ork_textcond *tc, int c) {
    tc_plan p = slot_plan(tc, 0);
    return p.w_block_max + p.scratch + ork_tc_chunk_need(&p, c) + 4096;
}

static char *print_plan(ork_textcond *tc, const ork_tc_encode_plan *ep) {
    static char buf[8192];
    FILE *f = tmpfile();
    if (!f) return NULL;
    ork_tc_encode_plan_print(tc, ep, f);
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    printf("\n%s", buf);
    return buf;
}

static void test_plan(void) {
    ork_textcond *tc = open_tc(0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tc);
    ork_tc_encode_plan ep;
    /* no budget: resident, one pass of the weights */
    CU_ASSERT_EQUAL_FATAL(ork_tc_encode_plan_make(tc, BE(), (size_t)8 << 30, NCAP, &ep), ORK_OK);
    CU_ASSERT_EQUAL(ep.n, 1);
    CU_ASSERT_EQUAL(ep.s[0].layer_major, 0);
    CU_ASSERT_EQUAL(ep.s[0].passes, 1);
    CU_ASSERT_EQUAL(ep.s[0].chunk, NCAP);
    CU_ASSERT_EQUAL(ep.s[0].link_bytes, ep.s[0].w_total);
    CU_ASSERT_EQUAL(ep.s[0].host_cache, 0);
    const char *out = print_plan(tc, &ep);
    CU_ASSERT(out && strstr(out, "resident: 8 captions per chunk"));
    /* the largest block, the margin and three captions: streamed in chunks of 3, one weight pass */
    size_t b = lm_budget(tc, 3);
    tc_plan p = slot_plan(tc, b);
    CU_ASSERT(p.w_total + p.scratch > b); /* the weights and the margin do not fit */
    CU_ASSERT_EQUAL_FATAL(ork_tc_encode_plan_make(tc, BE(), b, NCAP, &ep), ORK_OK);
    const ork_tc_slot_plan *s = &ep.s[0];
    CU_ASSERT_EQUAL(s->layer_major, 1);
    CU_ASSERT_EQUAL(s->chunk, 3);
    CU_ASSERT_EQUAL(s->blocks, tc->sl[0].info.n_blocks); /* the 30 layers and the final norm */
    CU_ASSERT(s->blocks > NL);
    CU_ASSERT(s->device_peak <= b);
    CU_ASSERT_EQUAL(s->passes, (NCAP + s->group - 1) / s->group);
    CU_ASSERT(s->link_bytes >= (size_t)s->passes * s->w_total);
    CU_ASSERT(s->host_cache > 0 && s->host_cache < s->w_total); /* blocks 1..29: not the token table */
    CU_ASSERT(ep.host_need > 0);
    CU_ASSERT(ep.device_peak == s->device_peak);
    out = print_plan(tc, &ep);
    CU_ASSERT(out && strstr(out, "streamed (layer-major"));
    CU_ASSERT(out && strstr(out, "3 captions per chunk"));
    CU_ASSERT(out && strstr(out, "weight pass"));
    CU_ASSERT(out && strstr(out, "over the link"));
    CU_ASSERT(out && strstr(out, "host"));
    CU_ASSERT(out && strstr(out, "predicted"));
    ork_textcond_close(tc);
}

static void test_refusals(void) {
    ork_textcond *tc = open_tc(0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tc);
    tc_plan p = slot_plan(tc, 0);
    /* a byte below one block + one caption's chunk + the margin */
    size_t b = p.w_block_max + p.scratch + ork_tc_chunk_need(&p, 1) - 1;
    ork_tc_encode_plan ep;
    last_err[0] = 0;
    CU_ASSERT_EQUAL(ork_tc_encode_plan_make(tc, BE(), b, NCAP, &ep), ORK_E_BUDGET);
    printf("\n    %s", last_err);
    CU_ASSERT(strstr(last_err, "largest block") && strstr(last_err, "vram_budget_gb"));
    CU_ASSERT(strstr(last_err, "mistral3") != NULL);
    /* the same through encode: refused before anything is loaded */
    ork_text_embed e;
    CU_ASSERT_EQUAL(ork_textcond_encode(tc, BE(), b, NCAP, CAPS, &e), ORK_E_BUDGET);
    CU_ASSERT_PTR_NULL(e.txt);
    /* host memory: refused below the encode's need + 2 GiB, not when unknown (0) or enough */
    CU_ASSERT_EQUAL_FATAL(ork_tc_encode_plan_make(tc, BE(), lm_budget(tc, 3), NCAP, &ep), ORK_OK);
    size_t need = ep.host_need + ((size_t)2 << 30);
    CU_ASSERT_EQUAL(ork_tc_encode_plan_check_host(&ep, 0, "x.yaml"), ORK_OK);
    CU_ASSERT_EQUAL(ork_tc_encode_plan_check_host(&ep, need, "x.yaml"), ORK_OK);
    last_err[0] = 0;
    CU_ASSERT_EQUAL(ork_tc_encode_plan_check_host(&ep, need - 1, "x.yaml"), ORK_E_BUDGET);
    printf("\n    %s", last_err);
    CU_ASSERT(strstr(last_err, "x.yaml: text encode") && strstr(last_err, "GiB of host memory"));
    /* a budget above the planned card's memory less 1.5 GiB is lowered to it (a 24 GB card, 24 GiB) */
    ork_backend pb = *ork_cpu_backend();
    pb.device = ORK_DEV_CUDA;
    const size_t G = (size_t)1 << 30;
    const char *why = NULL;
    setenv("ORAKUL_PLAN_DEVICE", "rtx4090", 1);
    CU_ASSERT_EQUAL(ork_tc_budget_fit(&pb, 24 * G, 0, 1, &why), 45 * G / 2);
    CU_ASSERT(why && strstr(why, "free memory"));
    CU_ASSERT_EQUAL(ork_tc_budget_fit(&pb, 16 * G, 0, 1, NULL), 16 * G);
    CU_ASSERT_EQUAL(ork_tc_budget_fit(ork_cpu_backend(), 24 * G, 0, 1, NULL), 24 * G);
    setenv("ORAKUL_PLAN_DEVICE", "h200", 1);
    CU_ASSERT_EQUAL(ork_tc_budget_fit(&pb, 24 * G, 0, 1, NULL), 24 * G);
    unsetenv("ORAKUL_PLAN_DEVICE");
    /* the release check: bytes still held are an error */
    CU_ASSERT_EQUAL(ork_tc_release_check(0, "mistral3"), ORK_OK);
    last_err[0] = 0;
    CU_ASSERT_EQUAL(ork_tc_release_check(4096, "mistral3"), ORK_E_INTERNAL);
    CU_ASSERT(strstr(last_err, "4096 device bytes still held") != NULL);
    ork_textcond_close(tc);
    printf("\n  ");
}

/* ---- streamed encodes equal the resident one ----------------------------------------------------- */

#ifdef TCP_GPU
static size_t dev_free(void) {
    size_t f = 0, t = 0;
    char name[64];
    ork_cuda_mem_info(0, &f, &t, name, sizeof name);
    return f;
}
#endif

/* tc's encode of the NCAP captions within budget b (ORAKUL_TEXT_CHUNK=3: every run the same chunks). */
static float *encode(ork_textcond *tc, size_t b) {
#ifdef TCP_GPU
    size_t f0 = dev_free();
#endif
    ork_text_embed e;
    last_info[0] = 0;
    ork_status s = ork_textcond_encode(tc, BE(), b, NCAP, CAPS, &e);
    CU_ASSERT_EQUAL(s, ORK_OK);
    if (s != ORK_OK) return NULL;
    CU_ASSERT_EQUAL(e.n, NCAP);
    CU_ASSERT_EQUAL(e.ctx_dim, 3 * HID);
#ifdef TCP_GPU
    /* every device byte given back: after the first encode (which makes the cuBLAS handles and their
     * workspaces, kept by the context), the device's free memory is where it was before each encode,
     * within 64 MiB (a library's lazily made workspace: the fp8 GEMM's at the first quantized encode);
     * the exact check is the encode's own, ork_tc_release_check on its allocator */
    static int calls;
    size_t f1 = dev_free();
    printf("\n    device free before %zu, after %zu", f0, f1);
    if (calls++ > 0) CU_ASSERT(f1 + ((size_t)64 << 20) >= f0);
#endif
    float *t = e.txt;
    e.txt = NULL;
    ork_text_embed_free(&e);
    return t;
}

static int same(const float *a, const float *b) {
    return a && b && !memcmp(a, b, (size_t)NCAP * TOK * 3 * HID * sizeof(float));
}

static int reads(void) { /* "checkpoint read N time(s)" of the last encode's line */
    const char *r = strstr(last_info, "checkpoint read ");
    return r ? atoi(r + 16) : -1;
}

typedef struct each_ctx {
    float *rows;
    int calls, bad;
} each_ctx;
static ork_status each_fn(void *user, int i, const float *txt, const float *vec) {
    each_ctx *c = user;
    if (i < 0 || i >= NCAP || vec || !txt) {
        c->bad++;
        return ORK_OK;
    }
    memcpy(c->rows + (size_t)i * TOK * 3 * HID, txt, (size_t)TOK * 3 * HID * sizeof(float));
    c->calls++;
    return ORK_OK;
}

static void test_streamed(void) {
    ork_textcond *tc = open_tc(0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tc);
    setenv("ORAKUL_TEXT_CHUNK", "3", 1);
    float *res = encode(tc, 0);
    CU_ASSERT(strstr(last_info, "resident") != NULL);
    size_t b = lm_budget(tc, 3);
    float *all = encode(tc, b); /* the weight cache holds blocks 1-29: one read */
    CU_ASSERT(strstr(last_info, "layer-major") != NULL);
    printf("\n    %s", last_info);
    CU_ASSERT_EQUAL(reads(), 1);
    CU_ASSERT(same(res, all));
    setenv("ORAKUL_TEXT_WCACHE_GIB", "0.0015", 1); /* 1.6 MB: about one block of 0.8 MB at a time */
    float *part = encode(tc, b);
    CU_ASSERT(reads() > 1 && reads() < tc->sl[0].info.n_blocks);
    printf("\n    cache of 1.6 MB: checkpoint read %d times", reads());
    setenv("ORAKUL_TEXT_WCACHE_GIB", "0", 1); /* none: every block reads the checkpoint */
    float *none = encode(tc, b);
    CU_ASSERT_EQUAL(reads(), tc->sl[0].info.n_blocks);
    unsetenv("ORAKUL_TEXT_WCACHE_GIB");
    CU_ASSERT(same(res, part));
    CU_ASSERT(same(res, none));
    /* encode_each of one encoder: each chunk's rows handed over as they come, every caption once */
    each_ctx c = {calloc((size_t)NCAP * TOK * 3 * HID, sizeof(float)), 0, 0};
    CU_ASSERT_FATAL(c.rows != NULL);
    CU_ASSERT_EQUAL(ork_textcond_encode_each(tc, BE(), b, NCAP, CAPS, each_fn, &c), ORK_OK);
    CU_ASSERT_EQUAL(c.calls, NCAP);
    CU_ASSERT_EQUAL(c.bad, 0);
    CU_ASSERT(same(res, c.rows));
    ork_textcond_stats st;
    ork_textcond_last_stats(tc, &st);
    CU_ASSERT_EQUAL(st.captions, NCAP);
    CU_ASSERT_EQUAL(st.layer_major, 1);
    CU_ASSERT_EQUAL(st.chunk, 3);
    unsetenv("ORAKUL_TEXT_CHUNK");
    free(c.rows);
    free(res), free(all), free(part), free(none);
    ork_textcond_close(tc);
    printf("\n  ");
}

/* quantize_te: fp8 weights on the link; streamed == resident, both near F32 */
static void test_quantized(void) {
    ork_textcond *tq = open_tc(1), *tf = open_tc(0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tq);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tf);
    setenv("ORAKUL_TEXT_CHUNK", "1", 1); /* its blocks are small: streamed with one caption per chunk */
    tc_plan pq = slot_plan(tq, 0), pf = slot_plan(tf, 0);
    CU_ASSERT(pq.w_total < pf.w_total); /* the linears stored in 1 byte + scales */
    ork_tc_encode_plan ep;
    size_t b = lm_budget(tq, 1);
    CU_ASSERT_EQUAL_FATAL(ork_tc_encode_plan_make(tq, BE(), b, NCAP, &ep), ORK_OK);
    CU_ASSERT_EQUAL(ep.s[0].layer_major, 1);
    const char *out = print_plan(tq, &ep);
    CU_ASSERT(out && strstr(out, "(model.quantize_te)"));
    float *res = encode(tq, 0), *lm = encode(tq, b), *f32 = encode(tf, 0);
    CU_ASSERT(strstr(last_info, "resident") != NULL);
    CU_ASSERT(same(res, lm));
    double M = 0, worst = 0;
    for (size_t i = 0; res && f32 && i < (size_t)NCAP * TOK * 3 * HID; i++) {
        M = fmax(M, fabs((double)f32[i]));
        worst = fmax(worst, fabs((double)res[i] - f32[i]));
    }
    printf("\n    qfloat8 vs F32: max err/M %.3g", M > 0 ? worst / M : worst);
    CU_ASSERT(M > 0 && worst / M < 0.25 && worst > 0);
    unsetenv("ORAKUL_TEXT_CHUNK");
    free(res), free(lm), free(f32);
    ork_textcond_close(tq);
    ork_textcond_close(tf);
    printf("\n  ");
}

static const ork_test_case cases[] = {
    {"plan: resident without a budget; streamed in chunks of 3 at one block + 3 captions", test_plan},
    {"refused: a budget below one block, a host below the need; a budget above the card; the release check",
     test_refusals},
    {"streamed == resident bit for bit, whatever the weight cache keeps; encode_each's rows", test_streamed},
    {"quantize_te (qfloat8): streamed == resident, near F32", test_quantized},
    {NULL, NULL},
};

#ifdef TCP_GPU
int main(void) {
    if (ork_cuda_device_count() <= 0) return 77;
    return ork_test_run("cond_plan_cuda", init, clean, cases);
}
#else
ORK_TEST_MAIN("cond_plan", init, clean, cases)
#endif
