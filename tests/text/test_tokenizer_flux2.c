/* test_tokenizer_flux2.c — FLUX.2's tokenizers and prompt formats against the
 * references (tests/reference/tokenizer_flux2_ref.py): Mistral's tekken
 * byte-level BPE (as transformers converts mistral-common's tekken.json, and
 * with the pattern Mistral-Small-3.1's tokenizer.json shipped) and Qwen3's
 * (NFC, \p{L}/\p{N} pattern with single digits, Qwen3's added tokens), trimmed
 * vocabularies that give the full ones' ids on the corpus, compared on every
 * caption of tests/fixtures/text/captions.txt; then every caption through the
 * FLUX.2-dev's and klein's prompt templates (as data, the way the FLUX plugin
 * declares them: "mistral3-flux2" / "qwen3-klein" in the fixture) against the ids and mask
 * diffusers' Flux2Pipeline / Flux2KleinPipeline feed their encoders; the
 * rendered templates byte for byte; and the formatter's edges and errors. */
#include "ork_test.h"
#include "tok_fixtures.h"

#include "plugin/host.h"
#include "text/prompt_format.h"
#include "text/tokenizer.h"
#include "train/services.h"
#include "util/log.h"

#include <stddef.h>

#define FIX ORK_SOURCE_DIR "/tests/fixtures/text"
#define TOKF FIX "/tok_flux2"

static tokfx g_fx;

static int suite_init(void) {
    if (tokfx_load_captions(&g_fx, FIX "/captions.txt") || g_fx.ncaps < 1000) return 1;
    if (tokfx_load_expected(&g_fx, TOKF "/expected.txt.gz")) return 1;
    return g_fx.nexp == 3 && g_fx.nprompts == 3 * g_fx.ncaps ? 0 : 1;
}

/* ---- log capture ---------------------------------------------------------------------------- */
static int g_errors;
static char g_last[1024];
static void sink(ork_log_level lvl, const char *line, void *user) {
    (void)user;
    if (lvl >= ORK_LOG_ERROR) {
        g_errors++;
        snprintf(g_last, sizeof g_last, "%s", line);
    }
}
static void capture(void) { g_errors = 0; g_last[0] = 0; ork_log_set_sink(sink, NULL); }
static void release(void) { ork_log_set_sink(NULL, NULL); }

static ork_tokenizer *load(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", TOKF, name);
    ork_tokenizer *t = NULL;
    return ork_tokenizer_load(path, &t) == ORK_OK ? t : NULL;
}

/* ---- the tokenizers on the corpus ----------------------------------------------------------- */
static void test_mistral_tekken(void) {
    ork_tokenizer *t = load("mistral");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    /* mistral-common's special tokens keep their ranks; <pad> from tokenizer_config.json */
    CU_ASSERT_EQUAL(ork_tokenizer_token_to_id(t, "<s>"), 1);
    CU_ASSERT_EQUAL(ork_tokenizer_token_to_id(t, "[INST]"), 3);
    CU_ASSERT_EQUAL(ork_tokenizer_token_to_id(t, "[/INST]"), 4);
    CU_ASSERT_EQUAL(ork_tokenizer_token_to_id(t, "[SYSTEM_PROMPT]"), 17);
    CU_ASSERT_EQUAL(ork_tokenizer_token_to_id(t, "[/SYSTEM_PROMPT]"), 18);
    CU_ASSERT_EQUAL(ork_tokenizer_token_to_id(t, "<SPECIAL_999>"), 999);
    CU_ASSERT_EQUAL(ork_tokenizer_pad_id(t), 11);
    CU_ASSERT_EQUAL(tokfx_check_corpus(&g_fx, t, tokfx_find(&g_fx, "mistral")), 0);
    /* tekken's pattern splits camel case and keeps digits single: "HelloWorld 2024" */
    int32_t a[32], n = 0;
    CU_ASSERT_EQUAL(ork_tokenizer_encode(t, "HelloWorld 2024", 15, 0, 0, a, NULL, 32, &n), ORK_OK);
    CU_ASSERT(n >= 6); /* Hello, World, " ", 2, 0, 2, 4: at least the four digits apart */
    ork_tokenizer_free(t);
}

static void test_mistral_hf31(void) {
    ork_tokenizer *t = load("mistral_hf31");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(tokfx_check_corpus(&g_fx, t, tokfx_find(&g_fx, "mistral_hf31")), 0);
    /* the two patterns differ where a word holds combining marks (\p{M}: tekken keeps them in
     * the word, \p{L}+ does not), e.g. the Devanagari caption: not the same test twice */
    const tokfx_expect *a = tokfx_find(&g_fx, "mistral"), *b = tokfx_find(&g_fx, "mistral_hf31");
    int differ = 0;
    for (size_t i = 0; a && b && i < g_fx.ncaps; i++)
        differ += a->n[i] != b->n[i] || memcmp(a->ids[i], b->ids[i], (size_t)a->n[i] * sizeof(int32_t));
    CU_ASSERT(differ >= 1);
    ork_tokenizer_free(t);
}

static void test_qwen3(void) {
    ork_tokenizer *t = load("qwen3");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(ork_tokenizer_token_to_id(t, "<|endoftext|>"), 151643);
    CU_ASSERT_EQUAL(ork_tokenizer_token_to_id(t, "<|im_start|>"), 151644);
    CU_ASSERT_EQUAL(ork_tokenizer_token_to_id(t, "<|im_end|>"), 151645);
    CU_ASSERT_EQUAL(ork_tokenizer_token_to_id(t, "<think>"), 151667);
    CU_ASSERT_EQUAL(ork_tokenizer_token_to_id(t, "</think>"), 151668);
    CU_ASSERT_EQUAL(ork_tokenizer_pad_id(t), 151643);
    CU_ASSERT_EQUAL(tokfx_check_corpus(&g_fx, t, tokfx_find(&g_fx, "qwen3")), 0);
    /* \p{N} one digit at a time */
    int32_t a[32], n = 0;
    CU_ASSERT_EQUAL(ork_tokenizer_encode(t, "2024", 4, 0, 0, a, NULL, 32, &n), ORK_OK);
    CU_ASSERT_EQUAL(n, 4);
    ork_tokenizer_free(t);
}

/* ---- the prompt formats against diffusers' pipelines ------------------------------------------- */
#define SYS                                                                                                         \
    "You are an AI that reasons about image descriptions. You give structured responses focusing on object "       \
    "relationships, object\nattribution and actions without speculation."
/* The fixture's format names: the templates the FLUX plugin declares in its
 * text slots (plugins/models/flux/flux_variants.c; test_textcond checks the
 * plugin's against these), as generic template data. */
static const ork_prompt_template FLUX2_DEV = {
    ORK_TEMPLATE_MISTRAL_CHAT, ORK_TEMPLATE_PAD_LEFT | ORK_TEMPLATE_NO_SPECIAL | ORK_TEMPLATE_STRIP_IMG, SYS, 512};
static const ork_prompt_template KLEIN = {ORK_TEMPLATE_QWEN_CHAT, ORK_TEMPLATE_GENERATION, NULL, 512};
/* Z-Image's (the template plugins/models/zimage names in its text slot):
 * Qwen3's chat template, add_generation_prompt=True, enable_thinking=True */
static const ork_prompt_template ZIMAGE = {ORK_TEMPLATE_QWEN_CHAT, ORK_TEMPLATE_GENERATION | ORK_TEMPLATE_THINKING,
                                           NULL, 512};
static const ork_prompt_template *tpl_of(const char *format) {
    return !strcmp(format, "mistral3-flux2") ? &FLUX2_DEV
         : !strcmp(format, "qwen3-klein")    ? &KLEIN
         : !strcmp(format, "qwen3-zimage")   ? &ZIMAGE
                                             : NULL;
}

/* One P row: the ids and mask prompt encode gives, against the pipeline's. */
static int check_row(const ork_tokenizer *t, const tokfx_prompt *r, int32_t *ids, int32_t *mask) {
    const tokfx_caption *c = &g_fx.caps[r->idx];
    int32_t n = -1, pad = ork_tokenizer_pad_id(t), np = r->maxlen - r->n;
    const ork_prompt_template *tpl = tpl_of(r->format);
    ork_status st = tpl ? ork_prompt_encode_template(t, tpl, c->p, c->n, r->maxlen, ids, mask, r->maxlen, &n)
                        : ORK_E_INVALID;
    int ok = st == ORK_OK && n == r->maxlen;
    for (int32_t i = 0; ok && i < n; i++) {
        int real = r->pad_left ? i >= np : i < r->n;
        int32_t want = !real ? pad : r->ids[r->pad_left ? i - np : i];
        ok = ids[i] == want && mask[i] == real;
        if (!ok)
            printf("\n  %s/%s caption %d: position %d has %d (mask %d), the pipeline %d (mask %d)\n", r->format,
                   r->name, r->idx, (int)i, (int)ids[i], (int)mask[i], (int)want, real);
    }
    if (st != ORK_OK || n != r->maxlen)
        printf("\n  %s/%s caption %d: status %d, %d ids\n", r->format, r->name, r->idx, (int)st, (int)n);
    return !ok;
}

static void test_prompt_rows(void) {
    static const char *const names[] = {"mistral", "mistral_hf31", "qwen3"};
    ork_tokenizer *toks[3];
    for (int k = 0; k < 3; k++) {
        toks[k] = load(names[k]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(toks[k]);
    }
    int32_t ids[512], mask[512];
    int bad = 0, rows[3] = {0}, truncated = 0, left = 0;
    for (size_t i = 0; i < g_fx.nprompts; i++) {
        const tokfx_prompt *r = &g_fx.prompts[i];
        int k = !strcmp(r->name, "mistral") ? 0 : !strcmp(r->name, "mistral_hf31") ? 1 : 2;
        CU_ASSERT_EQUAL_FATAL(r->maxlen, 512);
        bad += check_row(toks[k], r, ids, mask);
        rows[k]++;
        truncated += r->n == r->maxlen;
        left += r->pad_left;
    }
    CU_ASSERT_EQUAL(bad, 0);
    for (int k = 0; k < 3; k++) CU_ASSERT_EQUAL(rows[k], (int)g_fx.ncaps);
    CU_ASSERT(truncated > 0);                      /* long captions are cut to 512 */
    CU_ASSERT_EQUAL(left, 2 * (int)g_fx.ncaps);    /* Mistral's rows pad on the left, Qwen3's on the right */
    for (int k = 0; k < 3; k++) ork_tokenizer_free(toks[k]);
}

/* Z-Image (tests/reference/tokenizer_zimage_ref.py): every caption through
 * Qwen3 chat with GENERATION | THINKING against the ids and mask diffusers'
 * ZImagePipeline._encode_prompt feeds its encoder; the fixture also says the
 * pipeline takes hidden_states[-2] (what the Z-Image slot declares, with
 * ORK_TEXT_SLOT_UNMASKED: it keeps the positions the mask marks). */
static void test_zimage(void) {
    static tokfx zx; /* lives to the end, as g_fx does */
    CU_ASSERT_FATAL(tokfx_load_captions(&zx, FIX "/captions.txt") == 0);
    CU_ASSERT_FATAL(tokfx_load_expected(&zx, FIX "/tok_zimage/expected.txt.gz") == 0);
    CU_ASSERT_EQUAL_FATAL(zx.nprompts, zx.ncaps);
    size_t gn = 0;
    char *all = tokfx_read_gz(FIX "/tok_zimage/expected.txt.gz", &gn);
    int hidx = 0, nh = 0;
    CU_ASSERT_FATAL(all && sscanf(all, "H %d %d", &hidx, &nh) == 2);
    free(all);
    CU_ASSERT_EQUAL(hidx, -2); /* hidden_states[-2] */
    ork_tokenizer *q = load("qwen3");
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    static int32_t ids[512], mask[512];
    int bad = 0;
    for (size_t i = 0; i < zx.nprompts; i++) {
        CU_ASSERT_STRING_EQUAL_FATAL(zx.prompts[i].format, "qwen3-zimage");
        CU_ASSERT_EQUAL_FATAL(zx.prompts[i].pad_left, 0);
        bad += check_row(q, &zx.prompts[i], ids, mask);
    }
    printf("  %zu Z-Image rows, %d differ ", zx.nprompts, bad);
    CU_ASSERT_EQUAL(bad, 0);
    /* the named format is the same template */
    int32_t a[512], n = 0;
    CU_ASSERT_EQUAL(ork_prompt_encode(q, "qwen-thinking", "a cat", 5, 0, a, NULL, 512, &n), ORK_OK);
    CU_ASSERT_EQUAL(ork_prompt_encode_template(q, &ZIMAGE, "a cat", 5, 0, ids, NULL, 512, &n), ORK_OK);
    CU_ASSERT(!memcmp(a, ids, sizeof a));
    ork_tokenizer_free(q);
}

/* ---- the rendered templates ----------------------------------------------------------------- */
static void check_render_tpl(const ork_prompt_template *tpl, const char *in, size_t n, const char *want) {
    char *out = NULL;
    size_t on = 0;
    CU_ASSERT_EQUAL_FATAL(ork_prompt_template_render(tpl, in, n, &out, &on), ORK_OK);
    CU_ASSERT_EQUAL(on, strlen(want));
    CU_ASSERT_STRING_EQUAL(out, want);
    if (on != strlen(want) || strcmp(out, want)) printf("\n  rendered: [%s]\n  want: [%s]\n", out, want);
    free(out);
}
static void check_render(const char *format, const char *in, size_t n, const char *want) {
    const ork_prompt_template *tpl = tpl_of(format);
    if (tpl) {
        check_render_tpl(tpl, in, n, want);
        return;
    }
    char *out = NULL;
    size_t on = 0;
    CU_ASSERT_EQUAL_FATAL(ork_prompt_format_render(format, in, n, &out, &on), ORK_OK);
    CU_ASSERT_EQUAL(on, strlen(want));
    CU_ASSERT_STRING_EQUAL(out, want);
    if (on != strlen(want) || strcmp(out, want)) printf("\n  %s rendered: [%s]\n  want: [%s]\n", format, out, want);
    free(out);
}
#define FFFD "\xef\xbf\xbd"

static void test_render(void) {
    check_render("mistral3-flux2", "a photo of ohwx", 15,
                 "<s>[SYSTEM_PROMPT]" SYS "[/SYSTEM_PROMPT][INST]a photo of ohwx[/INST]");
    check_render("mistral3-flux2", "", 0, "<s>[SYSTEM_PROMPT]" SYS "[/SYSTEM_PROMPT][INST][/INST]");
    /* "[IMG]" removed as Python's str.replace does: left to right, the result not scanned again */
    check_render("mistral3-flux2", "x[IMG]y [IM[IMG]G] [IMG][IMG]", 29,
                 "<s>[SYSTEM_PROMPT]" SYS "[/SYSTEM_PROMPT][INST]xy [IMG] [/INST]");
    /* ... and on the decoded text: an ill-formed sequence around it stays three U+FFFD, not a euro sign */
    check_render("mistral3-flux2", "\xe2[IMG]\x82\xac", 8,
                 "<s>[SYSTEM_PROMPT]" SYS "[/SYSTEM_PROMPT][INST]" FFFD FFFD FFFD "[/INST]");
    check_render("qwen3-klein", "a photo of ohwx", 15,
                 "<|im_start|>user\na photo of ohwx<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    /* Qwen's template keeps [IMG] and leading / trailing space as they are */
    check_render("qwen3-klein", " [IMG] ", 7,
                 "<|im_start|>user\n [IMG] <|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    check_render("plain", "a\xff", 2, "a" FFFD);
    /* the named generic formats: no system turn; Qwen with and without thinking */
    check_render("mistral-chat", "x[IMG]y", 7, "<s>[INST]xy[/INST]");
    check_render("qwen-chat", "a", 1, "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    check_render("qwen-thinking", "a", 1, "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n");
    /* a Qwen system turn, and no generation prompt */
    ork_prompt_template qs = {ORK_TEMPLATE_QWEN_CHAT, 0, "be brief", 512};
    check_render_tpl(&qs, "a", 1, "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\na<|im_end|>\n");
    /* embedded NUL is a character of the caption */
    char *out = NULL;
    size_t on = 0;
    CU_ASSERT_EQUAL(ork_prompt_template_render(&KLEIN, "a\0b", 3, &out, &on), ORK_OK);
    CU_ASSERT_EQUAL(on, strlen("<|im_start|>user\na") + 2 + strlen("<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    free(out);
}

/* ---- the formatter's edges and errors ------------------------------------------------------- */
static void test_prompt_edges(void) {
    ork_tokenizer *m = load("mistral"), *q = load("qwen3");
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    const ork_prompt_format *f = ork_prompt_format_find("mistral-chat");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(f->default_length, 512);
    CU_ASSERT_EQUAL(f->pad_left, 1);
    CU_ASSERT_EQUAL(ork_prompt_format_find("qwen-chat")->pad_left, 0);
    CU_ASSERT_PTR_NULL(ork_prompt_format_find("mistral3-flux2")); /* FLUX.2's is its plugin's, not a core name */
    CU_ASSERT_PTR_NULL(ork_prompt_format_find("mistral3"));
    CU_ASSERT_PTR_NULL(ork_prompt_format_find(NULL));
    static int32_t ids[600], mask[600];
    int32_t n = -1;
    /* max_length 0: the format's 512 */
    CU_ASSERT_EQUAL(ork_prompt_encode_template(m, &FLUX2_DEV, "a cat", 5, 0, ids, mask, 600, &n), ORK_OK);
    CU_ASSERT_EQUAL(n, 512);
    CU_ASSERT_EQUAL(ids[0], 11);
    CU_ASSERT_EQUAL(mask[0], 0);
    CU_ASSERT_EQUAL(ids[511], 4); /* [/INST] last, pads before */
    CU_ASSERT_EQUAL(mask[511], 1);
    /* a short max_length cuts the template's end: no pads, all real, starts with <s>[SYSTEM_PROMPT] */
    CU_ASSERT_EQUAL(ork_prompt_encode_template(m, &FLUX2_DEV, "a cat", 5, 8, ids, mask, 600, &n), ORK_OK);
    CU_ASSERT_EQUAL(n, 8);
    CU_ASSERT_EQUAL(ids[0], 1);
    CU_ASSERT_EQUAL(ids[1], 17);
    CU_ASSERT_EQUAL(mask[7], 1);
    CU_ASSERT_EQUAL(ork_prompt_encode(q, "qwen-chat", "a cat", 5, 16, ids, mask, 600, &n), ORK_OK);
    CU_ASSERT_EQUAL(ids[0], 151644); /* <|im_start|> first, pads after */
    CU_ASSERT_EQUAL(ids[15], 151643);
    CU_ASSERT_EQUAL(mask[15], 0);
    /* mask may be NULL */
    CU_ASSERT_EQUAL(ork_prompt_encode(q, "qwen-chat", "a cat", 5, 16, ids, NULL, 600, &n), ORK_OK);
    /* "plain": the tokenizer's own TRUNCATE | PAD (Qwen adds nothing; right padding) */
    CU_ASSERT_EQUAL(ork_prompt_encode(q, "plain", "a cat", 5, 8, ids, mask, 600, &n), ORK_OK);
    CU_ASSERT_EQUAL(n, 8);
    CU_ASSERT_EQUAL(mask[1], 1);
    CU_ASSERT_EQUAL(mask[2], 0);
    CU_ASSERT_EQUAL(ids[2], 151643);
    /* too small a buffer: ORK_E_INVALID, the length needed, nothing logged */
    capture();
    CU_ASSERT_EQUAL(ork_prompt_encode_template(m, &FLUX2_DEV, "a cat", 5, 0, ids, mask, 100, &n), ORK_E_INVALID);
    release();
    CU_ASSERT_EQUAL(n, 512);
    CU_ASSERT_EQUAL(g_errors, 0);
    /* an unknown format, a NULL tokenizer or output: one line each */
    capture();
    CU_ASSERT_EQUAL(ork_prompt_encode(m, "mistral", "a", 1, 0, ids, mask, 600, &n), ORK_E_INVALID);
    CU_ASSERT_EQUAL(g_errors, 1);
    CU_ASSERT(strstr(g_last, "'mistral'") != NULL);
    CU_ASSERT_EQUAL(ork_prompt_encode(m, NULL, "a", 1, 0, ids, mask, 600, &n), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_prompt_encode(NULL, "qwen-chat", "a", 1, 0, ids, mask, 600, &n), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_prompt_encode(q, "qwen-chat", "a", 1, 0, NULL, mask, 600, &n), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_prompt_encode(q, "qwen-chat", "a", 1, 0, ids, mask, 600, NULL), ORK_E_INVALID);
    char *out = NULL;
    size_t on = 0;
    CU_ASSERT_EQUAL(ork_prompt_format_render("klein", "a", 1, &out, &on), ORK_E_INVALID);
    CU_ASSERT_PTR_NULL(out);
    CU_ASSERT_EQUAL(ork_prompt_format_render("plain", "a", 1, NULL, &on), ORK_E_INVALID);
    /* a bad template: unknown kind, unknown flag, a chat kind without a length */
    ork_prompt_template bad = KLEIN;
    bad.kind = 7;
    CU_ASSERT_EQUAL(ork_prompt_encode_template(q, &bad, "a", 1, 0, ids, mask, 600, &n), ORK_E_INVALID);
    bad = KLEIN;
    bad.flags |= 1u << 20;
    CU_ASSERT_EQUAL(ork_prompt_encode_template(q, &bad, "a", 1, 0, ids, mask, 600, &n), ORK_E_INVALID);
    bad = KLEIN;
    bad.max_length = 0;
    CU_ASSERT_EQUAL(ork_prompt_encode_template(q, &bad, "a", 1, 0, ids, mask, 600, &n), ORK_E_INVALID);
    CU_ASSERT(strstr(g_last, "length") != NULL);
    CU_ASSERT_EQUAL(ork_prompt_encode_template(q, NULL, "a", 1, 0, ids, mask, 600, &n), ORK_E_INVALID);
    release();
    CU_ASSERT_EQUAL(g_errors, 11);
    capture();
    bad.max_length = 0; /* ... while the caller's length is enough */
    CU_ASSERT_EQUAL(ork_prompt_encode_template(q, &bad, "a", 1, 16, ids, mask, 600, &n), ORK_OK);
    CU_ASSERT_EQUAL(n, 16);
    release();
    CU_ASSERT_EQUAL(g_errors, 0);
    /* NULL text is the empty caption */
    CU_ASSERT_EQUAL(ork_prompt_encode(q, "qwen-chat", NULL, 0, 0, ids, mask, 600, &n), ORK_OK);
    int32_t e[600], ne = 0;
    CU_ASSERT_EQUAL(ork_prompt_encode(q, "qwen-chat", "", 0, 0, e, NULL, 600, &ne), ORK_OK);
    CU_ASSERT(ne == n && !memcmp(ids, e, (size_t)n * sizeof *e));
    ork_tokenizer_free(m);
    ork_tokenizer_free(q);
}

static void test_service(void) {
    ork_host_clear_services();
    CU_ASSERT_EQUAL_FATAL(ork_services_register(), ORK_OK);
    const ork_tokenizer_api *api = ork_host_get_service(ORK_SERVICE_TOKENIZER);
    CU_ASSERT_PTR_NOT_NULL_FATAL(api);
    CU_ASSERT_FATAL(ORK_TOKENIZER_HAS_PROMPT(api));
    /* a table from before encode_prompt existed reads as lacking it */
    ork_tokenizer_api old = *api;
    old.abi.struct_size = (uint32_t)offsetof(ork_tokenizer_api, encode_prompt);
    CU_ASSERT(!ORK_TOKENIZER_HAS_PROMPT(&old));
    ork_tokenizer *t = NULL;
    CU_ASSERT_EQUAL_FATAL(api->load(TOKF "/qwen3", &t), ORK_OK);
    int32_t ids[512], mask[512], n = 0;
    CU_ASSERT_EQUAL(api->encode_prompt(t, ORK_PROMPT_QWEN_CHAT, "a photo", 7, 0, ids, mask, 512, &n), ORK_OK);
    CU_ASSERT_EQUAL(n, 512);
    CU_ASSERT_EQUAL(ids[0], 151644);
    CU_ASSERT_EQUAL(mask[0], 1);
    CU_ASSERT_EQUAL(mask[511], 0);
    /* the template as data gives the same ids */
    CU_ASSERT_FATAL(ORK_TOKENIZER_HAS_TEMPLATE(api));
    int32_t ids2[512], mask2[512], n2 = 0;
    CU_ASSERT_EQUAL(api->encode_template(t, &KLEIN, "a photo", 7, 0, ids2, mask2, 512, &n2), ORK_OK);
    CU_ASSERT(n2 == n && !memcmp(ids, ids2, sizeof ids) && !memcmp(mask, mask2, sizeof mask));
    old.abi.struct_size = (uint32_t)offsetof(ork_tokenizer_api, encode_template);
    CU_ASSERT(!ORK_TOKENIZER_HAS_TEMPLATE(&old));
    api->free(t);
    ork_host_clear_services();
}

/* ---- tekken.json, read natively ---------------------------------------------------------------- */
/* mistral-common's own file: the full 131,072-token vocabulary, every caption
 * and every mistral3-flux2 row (the trimmed fixture's ids are the full ones'). */
static void test_real_tekken(void) {
    const char *path = getenv("ORK_TEKKEN_JSON");
    if (!path || !*path) path = ORK_TEKKEN_JSON;
    if (!*path || access(path, R_OK) != 0) {
        printf("  (mistral-common's tekken_240911.json not installed: skipped) ");
        return;
    }
    ork_tokenizer *t = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_tokenizer_load(path, &t), ORK_OK);
    CU_ASSERT_EQUAL(ork_tokenizer_vocab_size(t), 131072);
    CU_ASSERT_EQUAL(ork_tokenizer_token_to_id(t, "[SYSTEM_PROMPT]"), 17);
    CU_ASSERT_EQUAL(ork_tokenizer_pad_id(t), 11);
    CU_ASSERT_EQUAL(tokfx_check_corpus(&g_fx, t, tokfx_find(&g_fx, "mistral")), 0);
    int32_t ids[512], mask[512];
    int bad = 0, rows = 0;
    for (size_t i = 0; i < g_fx.nprompts; i++)
        if (!strcmp(g_fx.prompts[i].name, "mistral")) {
            bad += check_row(t, &g_fx.prompts[i], ids, mask);
            rows++;
        }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(rows, (int)g_fx.ncaps);
    ork_tokenizer_free(t);
}

static char g_dir[64];

/* A tekken.json of three tokens ("a", "b", "ab") with the given pieces
 * substituted; loads it and returns the status. */
static ork_status tekken_try(const char *config, const char *vocab, const char *specials, ork_tokenizer **out) {
    char path[256], text[2048];
    snprintf(path, sizeof path, "%s/tekken.json", g_dir);
    snprintf(text, sizeof text, "{\"config\": %s, \"vocab\": %s%s%s}", config, vocab, specials ? ", \"special_tokens\": " : "",
             specials ? specials : "");
    FILE *f = fopen(path, "wb");
    fputs(text, f);
    fclose(f);
    *out = NULL;
    return ork_tokenizer_load(path, out);
}

#define CFG(vs, ns) "{\"pattern\": \"\\\\p{L}+| ?[^\\\\s\\\\p{L}]+|\\\\s+\", \"default_vocab_size\": " #vs ", \"default_num_special_tokens\": " #ns "}"
#define VOCAB3 "[{\"rank\": 0, \"token_bytes\": \"YQ==\"}, {\"rank\": 1, \"token_bytes\": \"Yg==\"}, {\"rank\": 2, \"token_bytes\": \"YWI=\"}]"

static void test_tekken_small(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/orakul_tekken_XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(g_dir));
    ork_tokenizer *t = NULL;
    /* v3 (no special_tokens): mistral-common's 20 defaults, fillers to 25 */
    CU_ASSERT_EQUAL_FATAL(tekken_try(CFG(28, 25), VOCAB3, NULL, &t), ORK_OK);
    CU_ASSERT_EQUAL(ork_tokenizer_vocab_size(t), 28);
    CU_ASSERT_EQUAL(ork_tokenizer_token_to_id(t, "<pad>"), 11);
    CU_ASSERT_EQUAL(ork_tokenizer_token_to_id(t, "<SPECIAL_24>"), 24);
    CU_ASSERT_EQUAL(ork_tokenizer_pad_id(t), 11);
    int32_t ids[16], n = 0;
    CU_ASSERT_EQUAL(ork_tokenizer_encode(t, "abba</s>", 8, 0, 0, ids, NULL, 16, &n), ORK_OK);
    CU_ASSERT(n == 4 && ids[0] == 27 && ids[1] == 26 && ids[2] == 25 && ids[3] == 2); /* ab b a </s> */
    ork_tokenizer_free(t);
    /* v7: the file's special tokens; default_vocab_size cuts the vocabulary (no "ab": no merge) */
    CU_ASSERT_EQUAL_FATAL(tekken_try(CFG(4, 2), VOCAB3,
                                     "[{\"rank\": 0, \"token_str\": \"<unk>\"}, {\"rank\": 1, \"token_str\": \"<s>\"}]", &t),
                          ORK_OK);
    CU_ASSERT_EQUAL(ork_tokenizer_vocab_size(t), 4);
    CU_ASSERT_EQUAL(ork_tokenizer_encode(t, "<s>ab", 5, 0, 0, ids, NULL, 16, &n), ORK_OK);
    CU_ASSERT_EQUAL(n, 3);
    CU_ASSERT(n == 3 && ids[0] == 1 && ids[1] == 2 && ids[2] == 3);
    ork_tokenizer_free(t);
    /* malformed: one error line naming tekken each, nothing loaded */
    static const struct { const char *cfg, *vocab, *specials, *what; } bad[] = {
        {"[]", VOCAB3, NULL, "config"},
        {"{\"default_vocab_size\": 3}", VOCAB3, NULL, "pattern"},
        {CFG(28, 25), "[]", NULL, "vocab"},
        {CFG(29, 25), VOCAB3, NULL, "default_vocab_size"},
        {CFG(28, -1), VOCAB3, NULL, "default_num_special_tokens"},
        {CFG(28, 25), "[{\"rank\": 0, \"token_bytes\": \"YQ=\"}, {\"rank\": 1, \"token_bytes\": \"Yg==\"}, {\"rank\": 2, \"token_bytes\": \"YWI=\"}]", NULL, "base64"},
        {CFG(28, 25), "[{\"rank\": 0, \"token_bytes\": \"YQ==\"}, {\"rank\": 5, \"token_bytes\": \"Yg==\"}, {\"rank\": 2, \"token_bytes\": \"YWI=\"}]", NULL, "rank"},
        {CFG(28, 25), "[{\"rank\": 0, \"token_bytes\": \"YQ==\"}, {\"rank\": 1, \"token_bytes\": \"YQ==\"}, {\"rank\": 2, \"token_bytes\": \"YWI=\"}]", NULL, "repeats"},
        {CFG(28, 25), "[{\"rank\": 0, \"token_bytes\": \"\"}, {\"rank\": 1, \"token_bytes\": \"Yg==\"}, {\"rank\": 2, \"token_bytes\": \"YWI=\"}]", NULL, "base64"},
        {CFG(5, 2), VOCAB3, "[{\"rank\": 1, \"token_str\": \"<unk>\"}, {\"rank\": 0, \"token_str\": \"<s>\"}]", "rank"},
        {CFG(5, 2), VOCAB3, "[{\"rank\": 0, \"token_str\": \"<s>\"}, {\"rank\": 1, \"token_str\": \"<s>\"}]", "twice"},
        {CFG(4, 1), VOCAB3, "[{\"rank\": 0, \"token_str\": \"<unk>\"}, {\"rank\": 1, \"token_str\": \"<s>\"}]", "more than"},
        {CFG(5, 2), VOCAB3, "{}", "special_tokens"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        capture();
        ork_status st = tekken_try(bad[i].cfg, bad[i].vocab, bad[i].specials, &t);
        release();
        CU_ASSERT_EQUAL(st, ORK_E_FORMAT);
        CU_ASSERT_PTR_NULL(t);
        CU_ASSERT_EQUAL(g_errors, 1);
        int named = strstr(g_last, "tekken") && strstr(g_last, bad[i].what);
        CU_ASSERT(named);
        if (st != ORK_E_FORMAT || g_errors != 1 || !named) printf("\n  case %zu: status %d, %d errors: %s\n", i, (int)st, g_errors, g_last);
        ork_tokenizer_free(t);
    }
    char path[256];
    snprintf(path, sizeof path, "%s/tekken.json", g_dir);
    remove(path);
    rmdir(g_dir);
}

static const ork_test_case cases[] = {
    {"mistral tekken BPE vs tokenizers and mistral-common", test_mistral_tekken},
    {"mistral with Mistral-Small-3.1's shipped pattern", test_mistral_hf31},
    {"qwen3 byte-level BPE", test_qwen3},
    {"prompt formats vs diffusers' FLUX.2 pipelines", test_prompt_rows},
    {"rendered templates", test_render},
    {"prompt encode edges and errors", test_prompt_edges},
    {"Z-Image's template vs ZImagePipeline (every caption)", test_zimage},
    {"the service's encode_prompt", test_service},
    {"mistral-common's tekken.json read natively", test_real_tekken},
    {"small and malformed tekken.json files", test_tekken_small},
    {NULL, NULL},
};

ORK_TEST_MAIN("tokenizer_flux2", suite_init, NULL, cases)
