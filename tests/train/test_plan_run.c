/* test_plan_run.c — `orakul plan` refuses what `orakul run` would refuse
 * before step 1, with the same line: each row of the table is a config (the
 * tiny template with some text replaced), an optional environment variable
 * and an optional fixture; both commands must exit 2, print exactly one
 * error line each, the same line, holding the row's real cause, and run must
 * have written nothing. The rows: a pixel codec that cannot give the model's
 * channels, no codec at all, a text embedding of the wrong width, streamed
 * blocks without gradient checkpointing, accumulation with the trainable
 * state streamed, a device budget too small, too little host memory for the
 * pinned blocks, a sample prompt's embedding of the wrong width or unreadable. */
#include "train_test_util.h"

static char g_root[1024];

static int setup(void) { return tt_setup("planrun", g_root, sizeof g_root) == 0 ? 0 : 1; }
static int teardown(void) { tt_rm_rf(g_root); return 0; }

/* `orakul <cmd> cfg` with stdout/stderr into <log>.out/.err; the exit code. */
static int orakul(const char *cmd, const char *cfg, const char *log) {
    const char *args[] = {cmd, cfg, NULL};
    return tt_orakul(args, log, 120);
}

/* The lines of <log>.err holding "error:": how many, and the first. */
static int error_lines(const char *log, char *first, size_t n) {
    char e[1200];
    tt_fmt(e, sizeof e, "%s.err", log);
    char *t = tt_read_all(e, NULL);
    int cnt = tt_lines_with(t, "error:", first, n);
    if (cnt != 1) printf("\n  %s.err:\n%s\n", log, t ? t : "(unreadable)");
    free(t);
    return cnt;
}

/* A safetensors file of F32 zeros: names[i] of shape shapes[i] (ndim 1 or 2). */
static int write_st(const char *path, int n, const char *const *names, const int (*shapes)[2]) {
    char hdr[1024];
    size_t h = 0, off = 0;
    h += (size_t)tt_fmt(hdr + h, sizeof hdr - h, "{");
    for (int i = 0; i < n; i++) {
        size_t bytes = 4 * (size_t)shapes[i][0] * (size_t)(shapes[i][1] > 0 ? shapes[i][1] : 1);
        char sh[48];
        if (shapes[i][1] > 0) tt_fmt(sh, sizeof sh, "[%d,%d]", shapes[i][0], shapes[i][1]);
        else tt_fmt(sh, sizeof sh, "[%d]", shapes[i][0]);
        h += (size_t)tt_fmt(hdr + h, sizeof hdr - h, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":%s,\"data_offsets\":[%zu,%zu]}",
                            i ? "," : "", names[i], sh, off, off + bytes);
        off += bytes;
    }
    h += (size_t)tt_fmt(hdr + h, sizeof hdr - h, "}");
    while (h % 8) hdr[h++] = ' ';
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    uint64_t len = h;
    int ok = fwrite(&len, 8, 1, f) == 1 && fwrite(hdr, 1, h, f) == h;
    for (size_t i = 0; ok && i < off; i++) ok = fputc(0, f) != EOF;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* Fixtures: a text embedding of width 16 where the model takes 32. */
static int fx_te_width(const char *data) {
    char p[1200];
    tt_fmt(p, sizeof p, "%s/astronaut.te.safetensors", data);
    static const char *const names[] = {"txt"};
    static const int shapes[][2] = {{8, 16}};
    return write_st(p, 1, names, shapes);
}
static int fx_sample_junk(const char *data) {
    char p[1200];
    tt_fmt(p, sizeof p, "%s/../junk.te.safetensors", data);
    return tt_write_all(p, "not a safetensors file");
}
static int fx_sample_te(const char *data) {
    char p[1200];
    tt_fmt(p, sizeof p, "%s/../prompt.te.safetensors", data);
    static const char *const names[] = {"txt"};
    static const int shapes[][2] = {{8, 16}};
    return write_st(p, 1, names, shapes);
}

typedef struct row {
    const char *name;
    const char *from[3], *to[3]; /* text of the written config replaced (@ROOT@ in to: the case's folder) */
    const char *env;             /* NAME=value for both commands, or NULL */
    int (*fixture)(const char *data);
    const char *want;            /* in the one error line */
} row;

#define KW "          codec: pixel\n"
#define MODEL "        name_or_path: preset:custom\n"
static const row rows[] = {
    {"pixel codec, 64 channels", {KW}, {KW "          in_channels: 64\n"}, NULL, NULL,
     "the pixel codec gives 48 channels per token (3 x pixel_patch 4 x 4); preset custom takes 64: set vae_path or "
     "taef1_path"},
    {"no codec for 64 channels", {KW}, {"          in_channels: 64\n"}, NULL, NULL,
     "takes 64-channel latent tokens and has no image codec that gives them"},
    {"text embedding width", {NULL}, {NULL}, NULL, fx_te_width,
     "astronaut.te.safetensors: tensor 'txt' is (8, 16); this model takes (8, 32)"},
    {"streamed blocks without checkpointing",
     {MODEL, "gradient_checkpointing: true"},
     {MODEL "        layer_offloading: true\n        layer_offloading_transformer_percent: 0.5\n",
      "gradient_checkpointing: false"},
     NULL, NULL, "the plan streams 2 blocks, which needs train.gradient_checkpointing: true"},
    {"accumulation with the trainable state streamed",
     {MODEL, "gradient_accumulation_steps: 1"},
     {MODEL "        vram_budget_gb: 0.6\n        stream_trainable_state: always\n", "gradient_accumulation_steps: 2"},
     NULL, NULL, "train.gradient_accumulation_steps 2: the plan streams the trainable state per block"},
    {"device budget too small", {MODEL}, {MODEL "        vram_budget_gb: 0.0001\n"}, NULL, NULL,
     "but the budget is 0.1 MiB"},
    {"host memory for the pinned blocks",
     {MODEL}, {MODEL "        layer_offloading: true\n        layer_offloading_transformer_percent: 0.5\n"},
     "ORAKUL_HOST_AVAILABLE_GB=0.000001", NULL, "plan: streaming pins"},
    {"sample prompt embedding width",
     {"      logging:\n"},
     {"      sample:\n        sample_every: 1\n        prompts: [@ROOT@/prompt.te.safetensors]\n      logging:\n"},
     NULL, fx_sample_te, "prompt.te.safetensors: tensor 'txt' must be (8, 32)"},
    {"sample prompt embedding unreadable",
     {"      logging:\n"},
     {"      sample:\n        sample_every: 1\n        prompts: [@ROOT@/junk.te.safetensors]\n      logging:\n"},
     NULL, fx_sample_junk, "sample.prompts[0]: the text embedding '"},
};

/* s with every `from` replaced by `to` (@ROOT@ expanded); malloc'd. */
static char *replace(const char *s, const char *from, const char *to, const char *root) {
    char tx[2048];
    size_t o = 0;
    for (const char *p = to; *p && o + 1 < sizeof tx;) {
        if (!strncmp(p, "@ROOT@", 6)) { o += (size_t)tt_fmt(tx + o, sizeof tx - o, "%s", root); p += 6; }
        else tx[o++] = *p++;
    }
    tx[o] = 0;
    const char *at = strstr(s, from);
    if (!at) return NULL;
    size_t n = strlen(s) - strlen(from) + strlen(tx) + 1;
    char *r = malloc(n);
    if (r) tt_fmt(r, n, "%.*s%s%s", (int)(at - s), s, tx, at + strlen(from));
    return r;
}

static void test_table(void) {
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const row *w = &rows[i];
        printf("\n  %s: ", w->name);
        char root[1100], data[1200], out[1200], cfg[1200];
        tt_fmt(root, sizeof root, "%s/case%zu", g_root, i);
        tt_fmt(data, sizeof data, "%s/data", root);
        tt_fmt(out, sizeof out, "%s/out", root);
        tt_fmt(cfg, sizeof cfg, "%s/job.yaml", root);
        char cmd[3000];
        tt_fmt(cmd, sizeof cmd, "mkdir -p '%s' && cp -r '%s/data' '%s/'", root, g_root, root);
        CU_ASSERT_FATAL(system(cmd) == 0);
        tt_cfg c = tt_cfg_default(out, data);
        c.steps = 2;
        CU_ASSERT_FATAL(tt_write_config(cfg, &c) == 0);
        char *text = tt_read_all(cfg, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(text);
        for (int k = 0; k < 3 && w->from[k]; k++) {
            char *r = replace(text, w->from[k], w->to[k], root);
            CU_ASSERT_PTR_NOT_NULL_FATAL(r);
            free(text);
            text = r;
        }
        CU_ASSERT_FATAL(tt_write_all(cfg, text) == 0);
        free(text);
        if (w->fixture) CU_ASSERT_FATAL(w->fixture(data) == 0);
        char name[64] = "";
        if (w->env) {
            tt_fmt(name, sizeof name, "%.*s", (int)(strchr(w->env, '=') - w->env), w->env);
            setenv(name, strchr(w->env, '=') + 1, 1);
        }
        char lp[1200], lr[1200], ep[2048], er[2048];
        tt_fmt(lp, sizeof lp, "%s/plan", root);
        tt_fmt(lr, sizeof lr, "%s/run", root);
        int rp = orakul("plan", cfg, lp), rr = orakul("run", cfg, lr);
        if (w->env) unsetenv(name);
        int np = error_lines(lp, ep, sizeof ep), nr = error_lines(lr, er, sizeof er);
        printf("plan %d, run %d\n    %s", rp, rr, ep);
        CU_ASSERT_EQUAL(rp, 2);
        CU_ASSERT_EQUAL(rr, 2);
        CU_ASSERT_EQUAL(np, 1);
        CU_ASSERT_EQUAL(nr, 1);
        if (strcmp(ep, er)) printf("\n    run's line differs: %s", er);
        CU_ASSERT_STRING_EQUAL(ep, er);
        if (!strstr(ep, w->want)) printf("\n    wanted: %s", w->want);
        CU_ASSERT_PTR_NOT_NULL(strstr(ep, w->want));
        CU_ASSERT(!tt_exists(out)); /* run refused before writing anything */
    }
    printf("\n  ");
}

static const ork_test_case cases[] = {
    {"plan and run refuse the same configs with the same line", test_table},
    {NULL, NULL},
};
ORK_TEST_MAIN("plan_run", setup, teardown, cases)
