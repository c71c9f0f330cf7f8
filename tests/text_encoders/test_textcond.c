/* tests/text_encoders/test_textcond.c — the text conditioner
 * (core/text/conditioner.h) on the CPU, against transformers
 * (tests/reference/text_cond_ref.py; fixtures tests/fixtures/text/cond and
 * tests/fixtures/text/t5_tiny): a diffusers-layout folder made of symlinks
 * (transformer/ = the tiny FLUX.1 checkpoint, text_encoder/ = a width-16 CLIP,
 * text_encoder_2/ = the tiny T5, tokenizer/, tokenizer_2/ = tiny BPE and
 * Unigram tokenizers), five captions (empty, long and truncated, accents,
 * brackets) encoded; txt = T5's last_hidden_state, vec = CLIP's pooler_output,
 * with and without the padding mask. Layer-major (forced by a budget, or
 * ORAKUL_TEXT_LAYER_MAJOR) gives the resident path's bits. The FLUX plugin
 * declares its slots and source folder. quantize_te (qfloat8) quantizes T5.
 * Missing pieces are refused with one line naming them and where they were
 * looked for; nothing at all is a warning and no conditioner. The identity
 * changes with the files, the mask and the quantizer's kind (so its cache
 * key: a changed qtype_te re-encodes), not with a qtype alias. The plan's
 * chunk runs with zero retries (test_plan_fits).
 *
 * TC_GPU (test_textcond_cuda, label gpu): the same on the CUDA backend in
 * BF16 (tolerance 5e-2·M + 5e-2·|ref|, as test_t5clip_cuda); exit 77
 * without a device. The layer-major runs must still give the resident bits.
 *
 * Tolerance (per element, M = max|ref|): 2e-5·M + 1e-4·|ref|, as
 * test_t5clip (F32 against transformers' F64 of the same weights), the fp8
 * encode against transformers on the same per-row E4M3 weights dequantized
 * (those are 0.14·M from the F32 ones: fp8 has 3 mantissa bits). */
#include "te_test_util.h"

#include "text/cond_internal.h"
#include "config/config.h"
#include "text/conditioner.h"
#include "train/text_cache.h" /* the cache key an identity makes */
#include "util/log.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define FX_COND TT_FIXTURES "/cond"

#ifdef TC_GPU /* test_textcond_cuda: the CUDA backend, BF16 activations and weights */
#define TC_BE() ork_cuda_backend()
#define TC_ACT ORK_BF16
#define TOL_A 5e-2
#define TOL_R 5e-2
#define TOL_DIFF 5e-2 /* chunks of other sizes may take other GEMM kernels */
int ork_cuda_device_count(void);
#else
#define TC_BE() ork_cpu_backend()
#define TC_ACT ORK_F32
#define TOL_A 2e-5
#define TOL_R 1e-4
#define TOL_DIFF 1e-4
#endif

static const char *const CAPS[] = {
    "a photo of ohwx dog on the beach",
    "",
    "A close-up portrait of a woman with red hair, soft light, film grain, shot on 35mm, bokeh in the background",
    "café crème, 2 cups!",
    "[trigger] riding a bike",
};
#define K 5

static ork_registry *reg;
static ork_st_file *fx;
static char tmp[256], dir_m[300], dir_partial[300], dir_empty[300], dir_copy[300];

/* ---- log capture: the last error or warning line ---- */
static char last_line[2048];
static int kept_lines; /* INFO lines of a resident encode whose weights stay for the next group */
static void sink(ork_log_level lvl, const char *line, void *user) {
    (void)user;
    if (strstr(line, "weights kept for the next group")) kept_lines++;
    if (lvl >= ORK_LOG_WARN) snprintf(last_line, sizeof last_line, "%s", line);
}

static int mk(const char *fmt, const char *a) {
    char p[600];
    snprintf(p, sizeof p, fmt, a);
    return mkdir(p, 0755);
}
static int ln(const char *target, const char *dir, const char *name) {
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return symlink(target, p);
}
static int copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    int ok = a && b;
    char buf[8192];
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof buf, a)) > 0) ok = fwrite(buf, 1, n, b) == n;
    if (a) fclose(a);
    if (b) fclose(b);
    return ok ? 0 : -1;
}

static int init(void) {
    ork_log_set_sink(sink, NULL);
    if (ork_services_register() != ORK_OK || ork_registry_create(NULL, &reg) != ORK_OK) return 1;
    if (ork_registry_add_file(reg, ORK_PLUGIN_DIR "/orakul-t5clip" ORK_PLUGIN_SUFFIX) != ORK_OK) return 1;
    if (ork_registry_add_file(reg, ORK_PLUGIN_DIR "/orakul-flux" ORK_PLUGIN_SUFFIX) != ORK_OK) return 1;
    if (ork_registry_add_file(reg, ORK_PLUGIN_DIR "/orakul-quant" ORK_PLUGIN_SUFFIX) != ORK_OK) return 1;
    if (ork_st_open(FX_COND "/cond_ref.safetensors", &fx) != ORK_OK) return 1;
    snprintf(tmp, sizeof tmp, "/tmp/ork_textcond_XXXXXX");
    if (!mkdtemp(tmp)) return 1;
    snprintf(dir_m, sizeof dir_m, "%s/m", tmp);
    snprintf(dir_partial, sizeof dir_partial, "%s/partial", tmp);
    snprintf(dir_empty, sizeof dir_empty, "%s/empty", tmp);
    snprintf(dir_copy, sizeof dir_copy, "%s/copy", tmp);
    int e = 0;
    /* the full diffusers layout */
    e |= mk("%s", dir_m) | mk("%s/transformer", dir_m);
    char p[600];
    snprintf(p, sizeof p, "%s/transformer", dir_m);
    e |= ln(ORK_SOURCE_DIR "/tests/fixtures/flux1_small_diffusers.safetensors", p, "diffusion_pytorch_model.safetensors");
    e |= ln(FX_COND "/clip16", dir_m, "text_encoder") | ln(TT_FIXTURES "/t5_tiny", dir_m, "text_encoder_2");
    e |= ln(FX_COND "/tokenizer", dir_m, "tokenizer") | ln(FX_COND "/tokenizer_2", dir_m, "tokenizer_2");
    /* T5 only */
    e |= mk("%s", dir_partial);
    e |= ln(TT_FIXTURES "/t5_tiny", dir_partial, "text_encoder_2") | ln(FX_COND "/tokenizer_2", dir_partial, "tokenizer_2");
    /* nothing */
    e |= mk("%s", dir_empty);
    /* copies whose times the identity test changes */
    e |= mk("%s", dir_copy) | mk("%s/tokenizer_2", dir_copy);
    e |= ln(FX_COND "/clip16", dir_copy, "text_encoder") | ln(TT_FIXTURES "/t5_tiny", dir_copy, "text_encoder_2");
    e |= ln(FX_COND "/tokenizer", dir_copy, "tokenizer");
    snprintf(p, sizeof p, "%s/tokenizer_2/tokenizer.json", dir_copy);
    e |= copy_file(FX_COND "/tokenizer_2/tokenizer.json", p);
    return e != 0;
}

static int clean(void) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (tmp[0] && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    ork_st_close(fx);
    ork_registry_destroy(reg);
    ork_log_set_sink(NULL, NULL);
    return 0;
}

/* A model that takes txt (T, 32) and vec (16) from the two slots. */
typedef struct hand {
    ork_text_slot slots[2];
    ork_model_info mi;
} hand;
static void hand_model(hand *h, const char *source_dir, int T) {
    memset(h, 0, sizeof *h);
    h->slots[0] = (ork_text_slot){.encoder = "t5", .feeds = ORK_TEXT_FEEDS_TXT,
                                  .flags = ORK_TEXT_SLOT_QUANTIZE | ORK_TEXT_SLOT_MODEL_QTYPE,
                                  .subfolder = "text_encoder_2", .tokenizer_subfolder = "tokenizer_2",
                                  .max_length = T, .path_key = "t5_path", .tokenizer_key = "t5_tokenizer_path"};
    h->slots[1] = (ork_text_slot){.encoder = "clip", .feeds = ORK_TEXT_FEEDS_VEC, .subfolder = "text_encoder",
                                  .tokenizer_subfolder = "tokenizer", .max_length = 77, .path_key = "clip_path",
                                  .tokenizer_key = "clip_tokenizer_path"};
    h->mi.abi = (ork_abi)ORK_ABI_INIT(ork_model_info);
    h->mi.family = "flux";
    h->mi.variant = "tiny";
    h->mi.context_dim = 32;
    h->mi.context_len = T;
    h->mi.vec_dim = 16;
    h->mi.n_text_slots = 2;
    h->mi.text_slots = h->slots;
    h->mi.source_dir = source_dir;
}

static int has(const char *needle);
static int check(const char *ref_name, const float *got, size_t n, double a, double r) {
    size_t rn = 0;
    double *ref = tt_f64(fx, ref_name, &rn);
    int ok = ref && rn == n && tt_cmp(ref_name, got, ref, n, a, r, NULL);
    if (ref && rn != n) printf("\n    %s: %zu elements, got %zu", ref_name, rn, n);
    free(ref);
    return ok;
}

static ork_status encode_with(const ork_model_info *mi, const ork_textcond_opts *o, size_t budget, ork_text_embed *e,
                              ork_textcond_stats *st) {
    ork_textcond *tc = NULL;
    memset(e, 0, sizeof *e);
    ork_status s = ork_textcond_open(reg, mi, o, &tc);
    if (s == ORK_OK && !tc) s = ORK_E_INTERNAL;
    if (s == ORK_OK) s = ork_textcond_encode(tc, TC_BE(), budget, K, CAPS, e);
    if (s == ORK_OK && st) ork_textcond_last_stats(tc, st);
    ork_textcond_close(tc);
    return s;
}

static void test_encode(void) {
    hand h;
    hand_model(&h, dir_m, 16);
    ork_textcond *tc = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_textcond_open(reg, &h.mi, NULL, &tc), ORK_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tc);
    int T, C, V;
    ork_textcond_shape(tc, &T, &C, &V);
    CU_ASSERT(T == 16 && C == 32 && V == 16);
    ork_text_embed e;
    CU_ASSERT_EQUAL_FATAL(ork_textcond_encode(tc, TC_BE(), 0, K, CAPS, &e), ORK_OK);
    CU_ASSERT(e.n == K && e.T == 16 && e.ctx_dim == 32 && e.vec_dim == 16);
    CU_ASSERT(check("ref.txt.T16", e.txt, (size_t)K * 16 * 32, TOL_A, TOL_R));
    CU_ASSERT(check("ref.vec", e.vec, (size_t)K * 16, TOL_A, TOL_R));
    ork_text_embed_free(&e);
    CU_ASSERT_PTR_NULL(e.txt);
    /* no captions: an empty result */
    CU_ASSERT_EQUAL(ork_textcond_encode(tc, TC_BE(), 0, 0, NULL, &e), ORK_OK);
    CU_ASSERT(e.n == 0 && !e.txt && !e.vec);
    ork_textcond_close(tc);
    /* attn_masking: T5 sees the padding mask */
    ork_textcond_opts o = {0};
    o.attn_mask = 1;
    CU_ASSERT_EQUAL_FATAL(encode_with(&h.mi, &o, 0, &e, NULL), ORK_OK);
    CU_ASSERT(check("ref.txt_masked.T16", e.txt, (size_t)K * 16 * 32, TOL_A, TOL_R));
    CU_ASSERT(check("ref.vec", e.vec, (size_t)K * 16, TOL_A, TOL_R));
    ork_text_embed_free(&e);
    printf("\n  ");
}

/* encode_each in groups of 2 captions (a tiny ORAKUL_TEXT_GROUP_GIB): each
 * caption's rows as encode gives them; a callback's failure stops it. */
typedef struct each_ctx {
    const ork_text_embed *ref;
    int seen, bad, stop_at;
} each_ctx;
static ork_status each_fn(void *user, int i, const float *txt, const float *vec) {
    each_ctx *c = user;
    if (i == c->stop_at) return ORK_E_IO;
    const ork_text_embed *r = c->ref;
    c->bad += i != c->seen++;
    c->bad += memcmp(txt, r->txt + (size_t)i * r->T * r->ctx_dim, (size_t)r->T * r->ctx_dim * sizeof *txt) != 0;
    c->bad += !vec || memcmp(vec, r->vec + (size_t)i * r->vec_dim, (size_t)r->vec_dim * sizeof *vec) != 0;
    return ORK_OK;
}
static void test_each(void) {
    hand h;
    hand_model(&h, dir_m, 16);
    ork_textcond *tc = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_textcond_open(reg, &h.mi, NULL, &tc), ORK_OK);
    setenv("ORAKUL_TEXT_CHUNK", "2", 1);
    ork_text_embed all;
    CU_ASSERT_EQUAL_FATAL(ork_textcond_encode(tc, TC_BE(), 0, K, CAPS, &all), ORK_OK);
    char g[32];
    snprintf(g, sizeof g, "%.12g", 2.5 * (16 * 32 + 16) * 4 / 1073741824.0); /* room for 2 captions */
    setenv("ORAKUL_TEXT_GROUP_GIB", g, 1);
    each_ctx c = {&all, 0, 0, -1};
    kept_lines = 0;
    CU_ASSERT_EQUAL(ork_textcond_encode_each(tc, TC_BE(), 0, K, CAPS, each_fn, &c), ORK_OK);
    CU_ASSERT(c.seen == K && c.bad == 0);
    CU_ASSERT_EQUAL(kept_lines, 2 * 3); /* both encoders resident, 3 groups, loaded once */
    ork_textcond_stats ks;
    ork_textcond_last_stats(tc, &ks);
    CU_ASSERT_EQUAL(ks.retries, 0); /* the kept runners' arenas sized by their plans */
    CU_ASSERT(ks.act_peak_bytes > 0 && ks.act_peak_bytes <= ks.act_arena_bytes);
    /* layer-major: nothing kept, every group its own pass; the same bits */
    setenv("ORAKUL_TEXT_LAYER_MAJOR", "1", 1);
    each_ctx lm = {&all, 0, 0, -1};
    kept_lines = 0;
    CU_ASSERT_EQUAL(ork_textcond_encode_each(tc, TC_BE(), 0, K, CAPS, each_fn, &lm), ORK_OK);
    unsetenv("ORAKUL_TEXT_LAYER_MAJOR");
    CU_ASSERT(lm.seen == K && lm.bad == 0);
    CU_ASSERT_EQUAL(kept_lines, 0);
    ork_textcond_stats st;
    ork_textcond_last_stats(tc, &st);
    CU_ASSERT_EQUAL(st.captions, K);
    each_ctx d = {&all, 0, 0, 3};
    CU_ASSERT_EQUAL(ork_textcond_encode_each(tc, TC_BE(), 0, K, CAPS, each_fn, &d), ORK_E_IO);
    CU_ASSERT_EQUAL(d.seen, 3);
    unsetenv("ORAKUL_TEXT_GROUP_GIB");
    unsetenv("ORAKUL_TEXT_CHUNK");
    ork_text_embed_free(&all);
    ork_textcond_close(tc);
}

/* Resident and layer-major, in chunks of 2 captions: the same bits. */
static void test_layer_major(void) {
    hand h;
    hand_model(&h, dir_m, 16);
    setenv("ORAKUL_TEXT_CHUNK", "2", 1);
    ork_text_embed a, b, c, d;
    ork_textcond_stats sa, sb, sc;
    CU_ASSERT_EQUAL_FATAL(encode_with(&h.mi, NULL, 0, &a, &sa), ORK_OK);
    CU_ASSERT_EQUAL(sa.layer_major, 0);
    CU_ASSERT_EQUAL(sa.chunk, 2);
    /* a budget under the resident need but over one block's: layer-major.
     * Taken at the longest caption length where such a budget exists: 16
     * tokens with F32 weights (CPU); BF16 weights on a device halve the
     * blocks against the same activations, so a shorter length may be needed. */
    hand hl;
    int tl = 0;
    ork_textcond *tc = NULL;
    tc_plan p;
    size_t budget = 0;
    for (int t = 16; t >= 2 && !tl; t /= 2) {
        hand_model(&hl, dir_m, t);
        CU_ASSERT_EQUAL_FATAL(ork_textcond_open(reg, &hl.mi, NULL, &tc), ORK_OK);
        CU_ASSERT_EQUAL_FATAL(ork_tc_plan(&tc->sl[0], TC_ACT, 0, K, 1, &p), ORK_OK);
        budget = p.w_block_max + p.scratch + ork_tc_chunk_need(&p, 2) + 1;
        if (budget < p.w_total + p.scratch + ork_tc_chunk_need(&p, 1)) tl = t; /* the resident path does not fit */
        else { ork_textcond_close(tc); tc = NULL; }
    }
    CU_ASSERT_FATAL(tl > 0);
    tc_plan q;
    CU_ASSERT_EQUAL(ork_tc_plan(&tc->sl[0], TC_ACT, budget, K, 1, &q), ORK_OK);
    CU_ASSERT(q.layer_major == 1 && q.chunk == 2);
    CU_ASSERT_EQUAL(ork_tc_plan(&tc->sl[0], TC_ACT, p.w_block_max, K, 1, &q), ORK_E_BUDGET); /* nothing fits */
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    CU_ASSERT_EQUAL(ork_textcond_describe(tc, TC_BE(), budget, K, m), ORK_OK);
    CU_ASSERT_EQUAL(ork_textcond_describe(tc, TC_BE(), 0, K, m), ORK_OK);
    fclose(m);
    printf("\n%s", buf);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "layer-major"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "resident"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "predicted"));
    free(buf);
    ork_textcond_close(tc);
    ork_text_embed al;
    CU_ASSERT_EQUAL_FATAL(encode_with(&hl.mi, NULL, 0, &al, NULL), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(encode_with(&hl.mi, NULL, budget, &b, &sb), ORK_OK);
    CU_ASSERT_EQUAL(sb.layer_major, 1);
    CU_ASSERT(sb.peak_bytes <= budget);
    CU_ASSERT(memcmp(al.txt, b.txt, (size_t)K * tl * 32 * sizeof(float)) == 0);
    CU_ASSERT(memcmp(al.vec, b.vec, (size_t)K * 16 * sizeof(float)) == 0);
    ork_text_embed_free(&al);
    ork_text_embed_free(&b);
    /* an activation estimate far too low: the chunk the budget refuses is
     * halved until one fits (a warning, not an error), the same values. At
     * 512 tokens (4 MiB of scores per caption) so that chunks differ in size. */
    hand h5;
    hand_model(&h5, dir_m, 512);
    ork_text_embed one, retry;
    setenv("ORAKUL_TEXT_LAYER_MAJOR", "1", 1);
    setenv("ORAKUL_TEXT_CARRY", "host", 1);
    setenv("ORAKUL_TEXT_CHUNK", "1", 1);
    CU_ASSERT_EQUAL_FATAL(encode_with(&h5.mi, NULL, 0, &one, &sb), ORK_OK); /* one caption at a time: its peak */
    size_t tight = sb.peak_bytes + sb.peak_bytes / 2; /* room for an arena grown by doubling, not for 2 */
    setenv("ORAKUL_TEXT_ACT_SCALE", "1e-9", 1);
    unsetenv("ORAKUL_TEXT_CHUNK");
    last_line[0] = 0;
    CU_ASSERT_EQUAL_FATAL(encode_with(&h5.mi, NULL, tight, &retry, &sb), ORK_OK);
    unsetenv("ORAKUL_TEXT_ACT_SCALE");
    unsetenv("ORAKUL_TEXT_LAYER_MAJOR");
    unsetenv("ORAKUL_TEXT_CARRY");
    setenv("ORAKUL_TEXT_CHUNK", "2", 1);
    CU_ASSERT(sb.peak_bytes <= tight);
    CU_ASSERT(sb.chunk < K);
    CU_ASSERT(has("did not fit"));
    double worst = 0;
    for (size_t i = 0; i < (size_t)K * 512 * 32; i++) worst = fmax(worst, fabs((double)one.txt[i] - retry.txt[i]));
    printf("\n    retried at %d per chunk: max |diff| against one at a time %.3g", sb.chunk, worst);
    CU_ASSERT(worst < TOL_DIFF);
    ork_text_embed_free(&one);
    ork_text_embed_free(&retry);
    /* forced by the environment, no budget: the carries wait on the device;
     * and forced to the host (the budget's case above is the host's too) */
    setenv("ORAKUL_TEXT_LAYER_MAJOR", "1", 1);
    for (int where = 0; where < 2; where++) {
        setenv("ORAKUL_TEXT_CARRY", where ? "host" : "device", 1);
        CU_ASSERT_EQUAL_FATAL(encode_with(&h.mi, NULL, 0, &c, &sc), ORK_OK);
        CU_ASSERT_EQUAL(sc.layer_major, 1);
        CU_ASSERT(memcmp(a.txt, c.txt, (size_t)K * 16 * 32 * sizeof(float)) == 0);
        CU_ASSERT(memcmp(a.vec, c.vec, (size_t)K * 16 * sizeof(float)) == 0);
        if (where == 0) ork_text_embed_free(&c);
    }
    unsetenv("ORAKUL_TEXT_CARRY");
    unsetenv("ORAKUL_TEXT_LAYER_MAJOR");
    /* every caption in one chunk: the same values (to rounding) */
    unsetenv("ORAKUL_TEXT_CHUNK");
    CU_ASSERT_EQUAL_FATAL(encode_with(&h.mi, NULL, 0, &d, NULL), ORK_OK);
    CU_ASSERT(check("ref.txt.T16", d.txt, (size_t)K * 16 * 32, TOL_A, TOL_R));
    CU_ASSERT(check("ref.txt.T16", c.txt, (size_t)K * 16 * 32, TOL_A, TOL_R));
    ork_text_embed_free(&a);
    ork_text_embed_free(&c);
    ork_text_embed_free(&d);
    printf("\n  ");
}

/* The plan's chunk is the largest that fits and runs without a retry: at
 * budgets just over what c captions need (weights, margin, the chunk's
 * activations and carries), F32 (TC_GPU: BF16) and fp8 (qfloat8) weights,
 * resident and layer-major, at 512 tokens (4 MiB of scores per caption: the
 * chunks differ in size), the plan picks c, the encode runs c per chunk with
 * zero retries and its arena never grows past the plan's size nor its device
 * bytes past the budget; c + 1 does not fit by the plan, nor by what c + 1
 * captions really take (their arena's peak, measured without a budget, and
 * their carries). */
static void test_plan_fits(void) {
    static const char *const env[] = {"ORAKUL_TEXT_ACT_SCALE", "ORAKUL_TEXT_CHUNK", "ORAKUL_TEXT_LAYER_MAJOR",
                                      "ORAKUL_TEXT_CARRY", "ORAKUL_TEXT_CHUNK_TOKENS", NULL};
    for (int i = 0; env[i]; i++) unsetenv(env[i]); /* what an earlier case's failure may have left */
    hand h;
    hand_model(&h, dir_m, 512);
    for (int qi = 0; qi < 2; qi++) {
        ork_textcond_opts o = {0};
        o.quantize = qi;
        ork_textcond *tc = NULL;
        CU_ASSERT_EQUAL_FATAL(ork_textcond_open(reg, &h.mi, &o, &tc), ORK_OK);
        tc_plan p0;
        CU_ASSERT_EQUAL_FATAL(ork_tc_plan(&tc->sl[0], TC_ACT, 0, K, 1, &p0), ORK_OK);
        CU_ASSERT_EQUAL(p0.heads, 4); /* the position-bias table's, not D/64 */
        for (int lm = 0; lm < 2; lm++) {
            if (lm) setenv("ORAKUL_TEXT_LAYER_MAJOR", "1", 1);
            size_t fixed = (lm ? p0.w_block_max : p0.w_total) + p0.scratch;
            for (int want = 2; want <= 4; want++) { /* past 1, where making the position bias is the peak */
                size_t lo = ork_tc_chunk_need(&p0, want), hi = ork_tc_chunk_need(&p0, want + 1);
                size_t budget = fixed + lo + (hi - lo) / 4;
                tc_plan p;
                CU_ASSERT_EQUAL_FATAL(ork_tc_plan(&tc->sl[0], TC_ACT, budget, K, 1, &p), ORK_OK);
                CU_ASSERT_EQUAL(p.layer_major, lm);
                CU_ASSERT(p.peak <= budget);
                ork_text_embed e;
                ork_textcond_stats st, big;
                if (!lm) CU_ASSERT_EQUAL(p.chunk, want);
                if (lm) setenv("ORAKUL_TEXT_CARRY", "host", 1); /* the others' carries need not fit too */
                CU_ASSERT_EQUAL_FATAL(ork_textcond_encode(tc, TC_BE(), budget, K, CAPS, &e), ORK_OK);
                ork_textcond_last_stats(tc, &st);
                ork_text_embed_free(&e);
                CU_ASSERT_EQUAL(st.retries, 0);
                CU_ASSERT_EQUAL(st.chunk, p.chunk);
                CU_ASSERT(st.peak_bytes <= budget);
                CU_ASSERT(st.act_peak_bytes <= st.act_planned_bytes);
                CU_ASSERT_EQUAL(st.act_arena_bytes, st.act_planned_bytes); /* never grew */
                /* chunk + 1: what it really takes, one chunk of it, without a budget */
                char c1[16];
                snprintf(c1, sizeof c1, "%d", p.chunk + 1);
                setenv("ORAKUL_TEXT_CHUNK", c1, 1);
                CU_ASSERT_EQUAL_FATAL(ork_textcond_encode(tc, TC_BE(), 0, p.chunk + 1, CAPS, &e), ORK_OK);
                unsetenv("ORAKUL_TEXT_CHUNK");
                unsetenv("ORAKUL_TEXT_CARRY");
                ork_textcond_last_stats(tc, &big);
                ork_text_embed_free(&e);
                CU_ASSERT(fixed + ork_tc_chunk_need(&p, p.chunk + 1) > budget);
                size_t real = fixed + big.act_peak_bytes + 2 * (size_t)(p.chunk + 1) * p.carry_per_caption +
                              p.carry_shared;
                CU_ASSERT(real > budget);
                printf("\n    %s %s: budget %.2f MiB: %d per chunk, activations %.2f of %.2f MiB planned, %d "
                       "retries; %d per chunk would take %.2f MiB", qi ? "fp8" : "f32", lm ? "layer-major" : "resident",
                       budget / 1048576.0, st.chunk, st.act_peak_bytes / 1048576.0, st.act_planned_bytes / 1048576.0,
                       st.retries, p.chunk + 1, real / 1048576.0);
            }
            unsetenv("ORAKUL_TEXT_LAYER_MAJOR");
        }
        ork_textcond_close(tc);
    }
    printf("\n  ");
}

/* model.quantize_te: T5's linear weights in fp8 (qfloat8), CLIP's not. */
static void test_quantize(void) {
    hand h;
    hand_model(&h, dir_m, 16);
    ork_textcond_opts o = {0};
    o.quantize = 1;
    ork_text_embed a, q;
    ork_textcond_stats sa, sq;
    CU_ASSERT_EQUAL_FATAL(encode_with(&h.mi, NULL, 0, &a, &sa), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(encode_with(&h.mi, &o, 0, &q, &sq), ORK_OK);
    CU_ASSERT(sq.weight_bytes < sa.weight_bytes);
    CU_ASSERT(memcmp(a.txt, q.txt, (size_t)K * 16 * 32 * sizeof(float)) != 0);
    CU_ASSERT(memcmp(a.vec, q.vec, (size_t)K * 16 * sizeof(float)) == 0); /* CLIP is not quantized */
    CU_ASSERT(check("ref.txt_fp8.T16", q.txt, (size_t)K * 16 * 32, TOL_A, TOL_R));
    /* and layer-major quantizes the same way */
    setenv("ORAKUL_TEXT_LAYER_MAJOR", "1", 1);
    ork_text_embed l;
    CU_ASSERT_EQUAL_FATAL(encode_with(&h.mi, &o, 0, &l, NULL), ORK_OK);
    unsetenv("ORAKUL_TEXT_LAYER_MAJOR");
    CU_ASSERT(memcmp(l.txt, q.txt, (size_t)K * 16 * 32 * sizeof(float)) == 0);
    ork_text_embed_free(&l);
    /* an unknown quantizer is refused at open */
    o.qtype = "qfloat3";
    ork_textcond *tc = NULL;
    CU_ASSERT_EQUAL(ork_textcond_open(reg, &h.mi, &o, &tc), ORK_E_CONFIG);
    CU_ASSERT_PTR_NULL(tc);
    ork_text_embed_free(&a);
    ork_text_embed_free(&q);
    printf("\n  ");
}

/* The FLUX plugin's model (default keys) opened on name_or_path: *self and
 * *vt for destroy, NULL when it failed. */
static void *flux_open(const char *name_or_path, const ork_model_vtable **vt, ork_model_info *mi) {
    const ork_plugin_component *pc = ork_registry_find(reg, ORK_KIND_MODEL, "flux");
    if (!pc) return NULL;
    *vt = pc->c->vtable;
    void *buf = calloc(1, pc->c->params_size), *self = NULL;
    ork_status s = (*vt)->create(&pc->host, buf, &self);
    free(buf);
    if (s == ORK_OK && (*vt)->open(self, name_or_path, mi) != ORK_OK) {
        (*vt)->destroy(self);
        self = NULL;
    }
    return s == ORK_OK ? self : NULL;
}

/* The FLUX plugin: a diffusers folder (or a Hugging Face snapshot of one)
 * gives the slots and their folder; encoded as the T 8 reference. */
static void flux_case(const char *name_or_path, const char *want_dir) {
    const ork_model_vtable *vt = NULL;
    ork_model_info mi;
    void *self = flux_open(name_or_path, &vt, &mi);
    CU_ASSERT_PTR_NOT_NULL_FATAL(self);
    CU_ASSERT(ork_model_info_has_text(&mi));
    CU_ASSERT_EQUAL_FATAL(mi.n_text_slots, 2);
    CU_ASSERT_STRING_EQUAL(mi.text_slots[0].encoder, "t5");
    CU_ASSERT_EQUAL(mi.text_slots[0].feeds, ORK_TEXT_FEEDS_TXT);
    CU_ASSERT_EQUAL(mi.text_slots[0].flags, ORK_TEXT_SLOT_QUANTIZE | ORK_TEXT_SLOT_MODEL_QTYPE);
    CU_ASSERT_EQUAL(mi.text_slots[0].prompt_template, ORK_TEMPLATE_PLAIN); /* T5 and CLIP: plain */
    CU_ASSERT_EQUAL(mi.text_slots[1].prompt_template, ORK_TEMPLATE_PLAIN);
    CU_ASSERT_EQUAL(mi.text_slots[1].flags, 0);
    CU_ASSERT_STRING_EQUAL(mi.text_slots[0].subfolder, "text_encoder_2");
    CU_ASSERT_STRING_EQUAL(mi.text_slots[0].tokenizer_subfolder, "tokenizer_2");
    CU_ASSERT_STRING_EQUAL(mi.text_slots[0].path_key, "t5_path");
    CU_ASSERT_EQUAL(mi.text_slots[0].max_length, mi.context_len);
    CU_ASSERT_STRING_EQUAL(mi.text_slots[1].encoder, "clip");
    CU_ASSERT_EQUAL(mi.text_slots[1].feeds, ORK_TEXT_FEEDS_VEC);
    CU_ASSERT_STRING_EQUAL(mi.text_slots[1].subfolder, "text_encoder");
    CU_ASSERT_EQUAL(mi.text_slots[1].max_length, 77);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mi.source_dir);
    CU_ASSERT_STRING_EQUAL(mi.source_dir, want_dir);
    CU_ASSERT_EQUAL_FATAL(mi.context_len, 8); /* a custom size: 8 text tokens */
    ork_textcond *tc = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_textcond_open(reg, &mi, NULL, &tc), ORK_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tc);
    ork_text_embed e;
    CU_ASSERT_EQUAL_FATAL(ork_textcond_encode(tc, TC_BE(), 0, K, CAPS, &e), ORK_OK);
    CU_ASSERT(check("ref.txt.T8", e.txt, (size_t)K * 8 * 32, TOL_A, TOL_R));
    CU_ASSERT(check("ref.vec", e.vec, (size_t)K * 16, TOL_A, TOL_R));
    ork_text_embed_free(&e);
    ork_textcond_close(tc);
    vt->destroy(self);
    printf("\n  ");
}

static void test_flux(void) {
    flux_case(dir_m, dir_m);
    /* a repo id in the Hugging Face cache: models--org--name/snapshots/<refs/main>/ */
    char hub[400], snap[600], p[700];
    snprintf(hub, sizeof hub, "%s/hub", tmp);
    snprintf(snap, sizeof snap, "%s/models--tiny--flux1/snapshots", hub);
    CU_ASSERT_EQUAL_FATAL(mk("%s", hub) | mk("%s/models--tiny--flux1", hub) | mk("%s", snap) |
                              mk("%s/models--tiny--flux1/refs", hub), 0);
    CU_ASSERT_EQUAL_FATAL(ln(dir_m, snap, "0123abcd"), 0);
    snprintf(p, sizeof p, "%s/models--tiny--flux1/refs/main", hub);
    FILE *f = fopen(p, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("0123abcd\n", f);
    fclose(f);
    snprintf(p, sizeof p, "%s/0123abcd", snap);
    setenv("HF_HUB_CACHE", hub, 1);
    flux_case("tiny/flux1", p);
    unsetenv("HF_HUB_CACHE");
}

/* FLUX.2's slots declare their pipelines' prompt templates (the core knows no
 * family): flux2-dev Mistral chat with BFL's system message (the text
 * test_tokenizer_flux2 checks against Flux2Pipeline's ids), left padding;
 * klein Qwen3 chat, generation prompt, no thinking, right padding. */
static void test_flux2_templates(void) {
    static const char *const presets[] = {"preset:flux2-dev", "preset:flux2-klein-4b"};
    for (int k = 0; k < 2; k++) {
        const ork_model_vtable *vt = NULL;
        ork_model_info mi;
        void *self = flux_open(presets[k], &vt, &mi);
        CU_ASSERT_PTR_NOT_NULL_FATAL(self);
        CU_ASSERT_EQUAL_FATAL(mi.n_text_slots, 1);
        const ork_text_slot *s = &mi.text_slots[0];
        CU_ASSERT_EQUAL(s->max_length, 512);
        CU_ASSERT_EQUAL(s->flags, ORK_TEXT_SLOT_QUANTIZE); /* qtype_te, not qtype */
        if (k == 0) {
            CU_ASSERT_STRING_EQUAL(s->encoder, "mistral3");
            CU_ASSERT_EQUAL(s->prompt_template, ORK_TEMPLATE_MISTRAL_CHAT);
            CU_ASSERT_EQUAL(s->prompt_flags, ORK_TEMPLATE_PAD_LEFT | ORK_TEMPLATE_NO_SPECIAL | ORK_TEMPLATE_STRIP_IMG);
            CU_ASSERT_PTR_NOT_NULL_FATAL(s->system_message);
            CU_ASSERT_STRING_EQUAL(s->system_message,
                                   "You are an AI that reasons about image descriptions. You give structured "
                                   "responses focusing on object relationships, object\nattribution and actions "
                                   "without speculation.");
        } else {
            CU_ASSERT_STRING_EQUAL(s->encoder, "qwen3");
            CU_ASSERT_EQUAL(s->prompt_template, ORK_TEMPLATE_QWEN_CHAT);
            CU_ASSERT_EQUAL(s->prompt_flags, ORK_TEMPLATE_GENERATION);
            CU_ASSERT_PTR_NULL(s->system_message);
        }
        CU_ASSERT_EQUAL(s->n_hidden_states, 0); /* the llm plugin's FLUX.2 defaults */
        vt->destroy(self);
    }
}

/* The options from a config's model section (ai-toolkit's semantics). */
static void test_opts(void) {
    ork_model_config mc;
    memset(&mc, 0, sizeof mc);
    mc.name_or_path = "black-forest-labs/FLUX.1-dev";
    mc.quantize = 1;
    mc.qtype = "float8";
    mc.quantize_te = 1;
    mc.qtype_te = "qfloat8";
    mc.attn_masking = 1;
    hand h;
    hand_model(&h, NULL, 16);
    ork_textcond_opts o;
    ork_textcond_opts_from_config(&mc, &h.mi, &o);
    CU_ASSERT(o.quantize == 1 && o.attn_mask == 1);
    CU_ASSERT_STRING_EQUAL(o.qtype, "float8"); /* the slot asks for model.qtype (FLUX.1's T5), as ai-toolkit */
    CU_ASSERT_STRING_EQUAL(o.what, mc.name_or_path);
    h.slots[0].flags = ORK_TEXT_SLOT_QUANTIZE; /* no slot asks: qtype_te */
    ork_textcond_opts_from_config(&mc, &h.mi, &o);
    CU_ASSERT_STRING_EQUAL(o.qtype, "qfloat8");
    h.slots[0].flags |= ORK_TEXT_SLOT_MODEL_QTYPE;
    h.mi.abi.struct_size = (uint32_t)offsetof(ork_model_info, n_text_slots); /* a model without slots: qtype_te */
    ork_textcond_opts_from_config(&mc, &h.mi, &o);
    CU_ASSERT_STRING_EQUAL(o.qtype, "qfloat8");
    h.mi.abi.struct_size = (uint32_t)sizeof h.mi;
    mc.quantize = 0;
    mc.qtype = "none";
    ork_textcond_opts_from_config(&mc, &h.mi, &o);
    CU_ASSERT_STRING_EQUAL(o.qtype, "qfloat8");
}

static int has(const char *needle) {
    int ok = strstr(last_line, needle) != NULL;
    if (!ok) printf("\n    line lacks '%s': %s", needle, last_line);
    return ok;
}

static void test_missing(void) {
    hand h;
    ork_textcond *tc = (ork_textcond *)&tc;
    /* nothing there, nothing given: no conditioner, one warning */
    hand_model(&h, dir_empty, 16);
    last_line[0] = 0;
    CU_ASSERT_EQUAL(ork_textcond_open(reg, &h.mi, NULL, &tc), ORK_OK);
    CU_ASSERT_PTR_NULL(tc);
    CU_ASSERT(has("zero text embeddings"));
    hand_model(&h, NULL, 16); /* a single file or preset */
    tc = (ork_textcond *)&tc;
    CU_ASSERT_EQUAL(ork_textcond_open(reg, &h.mi, NULL, &tc), ORK_OK);
    CU_ASSERT_PTR_NULL(tc);
    h.mi.n_text_slots = 0; /* a model without text slots */
    tc = (ork_textcond *)&tc;
    CU_ASSERT_EQUAL(ork_textcond_open(reg, &h.mi, NULL, &tc), ORK_OK);
    CU_ASSERT_PTR_NULL(tc);
    /* T5 there, CLIP not: one line naming both missing CLIP pieces and where */
    hand_model(&h, dir_partial, 16);
    last_line[0] = 0;
    CU_ASSERT_EQUAL(ork_textcond_open(reg, &h.mi, NULL, &tc), ORK_E_CONFIG);
    CU_ASSERT_PTR_NULL(tc);
    CU_ASSERT(has("clip weights missing") && has("partial/text_encoder") && has("clip_path"));
    CU_ASSERT(has("clip tokenizer missing") && has("partial/tokenizer") && has("clip_tokenizer_path"));
    CU_ASSERT(strstr(last_line, "t5 ") == NULL);
    /* an explicit path that is not there */
    hand_model(&h, NULL, 16);
    h.slots[0].path = "/nonexistent/t5xxl.safetensors";
    last_line[0] = 0;
    CU_ASSERT_EQUAL(ork_textcond_open(reg, &h.mi, NULL, &tc), ORK_E_CONFIG);
    CU_ASSERT(has("/nonexistent/t5xxl.safetensors") && has("t5_path") && has("t5 tokenizer missing"));
    /* explicit paths next to a single-file transformer: found */
    h.slots[0].path = TT_FIXTURES "/t5_tiny/model.safetensors";
    h.slots[0].tokenizer_path = FX_COND "/tokenizer_2/tokenizer.json";
    h.slots[1].path = FX_COND "/clip16";
    h.slots[1].tokenizer_path = FX_COND "/tokenizer";
    CU_ASSERT_EQUAL(ork_textcond_open(reg, &h.mi, NULL, &tc), ORK_OK);
    CU_ASSERT_PTR_NOT_NULL(tc);
    ork_textcond_close(tc);
    /* widths that do not match the model's */
    hand_model(&h, dir_m, 16);
    h.mi.context_dim = 64;
    last_line[0] = 0;
    CU_ASSERT_EQUAL(ork_textcond_open(reg, &h.mi, NULL, &tc), ORK_E_CONFIG);
    CU_ASSERT(has("hidden width 32") && has("64"));
    hand_model(&h, dir_m, 16);
    h.mi.vec_dim = 768;
    CU_ASSERT_EQUAL(ork_textcond_open(reg, &h.mi, NULL, &tc), ORK_E_CONFIG);
    CU_ASSERT(has("pooled width 16"));
    /* a slot asking for what the conditioner does not run yet: refused, not ignored */
    hand_model(&h, dir_m, 16);
    h.slots[0].n_hidden_states = 1;
    h.slots[0].hidden_states[0] = -2;
    last_line[0] = 0;
    CU_ASSERT_EQUAL(ork_textcond_open(reg, &h.mi, NULL, &tc), ORK_E_UNSUPPORTED);
    CU_ASSERT_PTR_NULL(tc);
    CU_ASSERT(has("chooses hidden states") && has("text slot t5") && has("org.orakul.t5")); /* T5 cannot */
    h.slots[0].n_hidden_states = 5;
    CU_ASSERT_EQUAL(ork_textcond_open(reg, &h.mi, NULL, &tc), ORK_E_INVALID);
    CU_ASSERT(has("n_hidden_states 5"));
    hand_model(&h, dir_m, 16);
    h.slots[0].flags |= ORK_TEXT_SLOT_UNMASKED;
    CU_ASSERT_EQUAL(ork_textcond_open(reg, &h.mi, NULL, &tc), ORK_E_UNSUPPORTED);
    CU_ASSERT(has("unmasked tokens only"));
    /* a template the core does not know: one line naming the slot */
    hand_model(&h, dir_m, 16);
    h.slots[0].prompt_template = 9;
    CU_ASSERT_EQUAL(ork_textcond_open(reg, &h.mi, NULL, &tc), ORK_E_INVALID);
    CU_ASSERT(has("text slot t5") && has("kind 9"));
    /* a tokenizer larger than the encoder's vocabulary (CLIP's for T5) */
    hand_model(&h, dir_m, 16);
    h.slots[0].tokenizer_path = FX_COND "/tokenizer"; /* 99 tokens, T5 takes 64 */
    CU_ASSERT_EQUAL(ork_textcond_open(reg, &h.mi, NULL, &tc), ORK_E_CONFIG);
    CU_ASSERT(has("99 tokens"));
    /* an encoder no plugin provides */
    hand_model(&h, dir_m, 16);
    h.slots[0].encoder = "mistral";
    CU_ASSERT_EQUAL(ork_textcond_open(reg, &h.mi, NULL, &tc), ORK_E_CONFIG);
    CU_ASSERT(has("mistral"));
}

static char *identity_of(const ork_model_info *mi, const ork_textcond_opts *o) {
    ork_textcond *tc = NULL;
    if (ork_textcond_open(reg, mi, o, &tc) != ORK_OK || !tc) return NULL;
    char *s = strdup(ork_textcond_identity(tc));
    ork_textcond_close(tc);
    return s;
}

static void test_identity(void) {
    hand h;
    hand_model(&h, dir_copy, 16);
    char *a = identity_of(&h.mi, NULL), *b = identity_of(&h.mi, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_STRING_EQUAL(a, b);
    CU_ASSERT_PTR_NOT_NULL(strstr(a, "org.orakul.t5"));
    CU_ASSERT_PTR_NOT_NULL(strstr(a, "org.orakul.clip"));
    CU_ASSERT_PTR_NOT_NULL(strstr(a, "model.safetensors:"));
    printf("\n    %s", a);
    ork_textcond_opts o = {0};
    o.attn_mask = 1;
    char *c = identity_of(&h.mi, &o);
    o.attn_mask = 0;
    o.quantize = 1;
    char *d = identity_of(&h.mi, &o);
    /* the quantizer's kind is in it (FP8 E5M2 embeddings are not E4M3's), its aliases are not */
    o.qtype = "fp8_e5m2";
    char *d5 = identity_of(&h.mi, &o);
    o.qtype = "float8";
    char *d8 = identity_of(&h.mi, &o);
    CU_ASSERT(d && d5 && d8);
    if (d && d5 && d8) {
        CU_ASSERT_STRING_NOT_EQUAL(d, d5);
        CU_ASSERT_STRING_EQUAL(d, d8); /* qfloat8 (the default) and float8: one component */
        CU_ASSERT(ork_text_cache_key(d, 16, CAPS[0]) != ork_text_cache_key(d5, 16, CAPS[0])); /* re-encoded */
        CU_ASSERT(ork_text_cache_key(d, 16, CAPS[0]) == ork_text_cache_key(d8, 16, CAPS[0]));
        CU_ASSERT(ork_text_cache_key(d, 16, CAPS[0]) != ork_text_cache_key(a, 16, CAPS[0]));
    }
    free(d5);
    free(d8);
    hand h2;
    hand_model(&h2, dir_copy, 12);
    char *e = identity_of(&h2.mi, NULL);
    /* the tokenizer file changes (its time) */
    char p[600];
    snprintf(p, sizeof p, "%s/tokenizer_2/tokenizer.json", dir_copy);
    struct timespec ts[2] = {{1000000000, 0}, {1000000000, 0}};
    CU_ASSERT_EQUAL(utimensat(AT_FDCWD, p, ts, 0), 0);
    char *f = identity_of(&h.mi, NULL);
    CU_ASSERT(c && d && e && f);
    if (c && d && e && f) {
        CU_ASSERT_STRING_NOT_EQUAL(a, c);
        CU_ASSERT_STRING_NOT_EQUAL(a, d);
        CU_ASSERT_STRING_NOT_EQUAL(a, e);
        CU_ASSERT_STRING_NOT_EQUAL(a, f);
    }
    free(a);
    free(b);
    free(c);
    free(d);
    free(e);
    free(f);
    printf("\n  ");
}

static const ork_test_case cases[] = {
    {"captions -> txt (T5) and vec (CLIP) vs transformers, with and without the mask", test_encode},
    {"layer-major (budget or env) gives the resident path's bits; plan lines", test_layer_major},
    {"encode_each: groups of captions to a callback, the same rows; its failure stops", test_each},
    {"quantize_te: T5 in fp8 (qfloat8), CLIP not; layer-major the same bits", test_quantize},
    {"the plan's chunk is the largest that fits; it runs with zero retries", test_plan_fits},
    {"FLUX plugin: slots and source folder of a diffusers folder and of a hub snapshot", test_flux},
    {"missing pieces refused with one line; nothing at all: no conditioner", test_missing},
    {"identity: stable; changes with mask, quantizer (not its alias), length, file times", test_identity},
    {"options from the model config: quantize_te, qtype_te (FLUX.1: qtype), attn_masking", test_opts},
    {"FLUX.2 slots: the pipelines' prompt templates, declared by the plugin", test_flux2_templates},
    {NULL, NULL},
};

#ifdef TC_GPU
int main(void) {
    if (ork_cuda_device_count() <= 0) return 77;
    return ork_test_run("textcond_cuda", init, clean, cases);
}
#else
ORK_TEST_MAIN("textcond", init, clean, cases)
#endif
