/* tests/config/test_config.c — the job config reader: one case per error class
 * (status AND the exact "file:line:col" and key text of the one logged line),
 * warnings for known-unimplemented keys, defaults and provenance, ai-toolkit's
 * couplings, component keys against a sample ork_param table, and the example
 * configs under configs/. Cases live in tests/config/cases/. */
#include "config/config.h"
#include "util/log.h"
#include "ork_test.h"

#include <stddef.h>

/* ---- log capture ---- */
static char g_lines[64][2048];
static int g_n, g_err, g_warn;

static void sink(ork_log_level lvl, const char *line, void *user) {
    (void)user;
    if (g_n < 64) snprintf(g_lines[g_n++], sizeof g_lines[0], "%s", line);
    g_err += lvl == ORK_LOG_ERROR;
    g_warn += lvl == ORK_LOG_WARN;
}

static void reset(void) { g_n = g_err = g_warn = 0; }

/* The line that contains all of a, b (b may be NULL), or NULL. */
static const char *logged(const char *a, const char *b) {
    for (int i = 0; i < g_n; i++)
        if (strstr(g_lines[i], a) && (!b || strstr(g_lines[i], b))) return g_lines[i];
    return NULL;
}

static const char *case_path(const char *name) {
    static char p[1024];
    snprintf(p, sizeof p, "%s/tests/config/cases/%s", ORK_SOURCE_DIR, name);
    return p;
}

static ork_status load(const char *name, ork_config **cfg) {
    reset();
    return ork_config_load(case_path(name), cfg);
}

/* Load a bad case: the status, exactly one error line, and that line holds
 * "<name>:<loc>: " and the key text. */
static void expect_error(const char *name, ork_status want, const char *loc, const char *text) {
    ork_config *cfg = (ork_config *)1;
    ork_status s = load(name, &cfg);
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s:%s: ", name, loc);
    CU_ASSERT_EQUAL(s, want);
    CU_ASSERT_PTR_NULL(cfg);
    CU_ASSERT_EQUAL(g_err, 1);
    if (!logged(prefix, text)) {
        printf("\n  %s: wanted \"%s\" ... \"%s\"; logged:\n", name, prefix, text);
        for (int i = 0; i < g_n; i++) printf("    %s\n", g_lines[i]);
        CU_FAIL("error line");
    }
}

/* ---- error classes ---- */
static void t_empty(void) {
    expect_error("empty.yaml", ORK_E_CONFIG, "1:1", "the file is empty");
    expect_error("comments_only.yaml", ORK_E_CONFIG, "1:1", "the file is empty");
}
static void t_syntax(void) {
    expect_error("syntax.yaml", ORK_E_FORMAT, "13:11", "YAML syntax error");
    CU_ASSERT_PTR_NOT_NULL(logged("while parsing a flow sequence at 12:13", NULL));
}
static void t_tabs(void) { expect_error("tabs.yaml", ORK_E_FORMAT, "11:1", "tab indentation is not allowed"); }
static void t_trailing_junk(void) {
    expect_error("junk.yaml", ORK_E_CONFIG, "11:16", "train.steps: expected an integer, got '10abc'");
}
static void t_negative_rank(void) {
    expect_error("linear_neg.yaml", ORK_E_CONFIG, "12:17", "network.linear: -4 is out of range (must be between 1 and");
}
static void t_overflow(void) {
    expect_error("float_overflow.yaml", ORK_E_CONFIG, "11:13", "train.lr: 1e999 is out of range");
    expect_error("int_overflow.yaml", ORK_E_CONFIG, "11:16",
                 "train.steps: 99999999999999999999 is out of range (not a 64-bit integer)");
}
static void t_wrong_type(void) {
    expect_error("string_for_int.yaml", ORK_E_CONFIG, "11:21", "train.batch_size: expected an integer, got 'two'");
    expect_error("quoted_int.yaml", ORK_E_CONFIG, "11:21", "train.batch_size: expected an integer, got the quoted");
    expect_error("map_for_scalar.yaml", ORK_E_CONFIG, "12:11", "train.lr: expected a number, got a mapping");
    expect_error("bad_bool.yaml", ORK_E_CONFIG, "11:33",
                 "train.gradient_checkpointing: expected true or false, got 'maybe'");
    expect_error("not_a_map.yaml", ORK_E_CONFIG, "1:1", "the top level (job:, config:, meta:): expected a mapping, got a list");
}
static void t_unknown_key(void) {
    expect_error("unknown_key.yaml", ORK_E_CONFIG, "12:9", "unknown key 'stepz' in train (did you mean 'steps'?)");
    expect_error("unknown_top.yaml", ORK_E_CONFIG, "1:1", "unknown key 'jobb' at the top level (did you mean 'job'?)");
    expect_error("unknown_far.yaml", ORK_E_CONFIG, "11:9", "unknown key 'frobnicate' in train");
    CU_ASSERT_PTR_NULL(logged("did you mean", NULL));
    expect_error("misplaced.yaml", ORK_E_CONFIG, "10:9", "unknown key 'lr' in model (it belongs in train)");
}
static void t_choices(void) {
    expect_error("bad_choice.yaml", ORK_E_CONFIG, "11:26",
                 "train.noise_scheduler: 'flowmatc' is not one of: flowmatch (did you mean 'flowmatch'?)");
    expect_error("bad_stream_compression.yaml", ORK_E_CONFIG, "11:29",
                 "model.stream_compression: 'alway' is not one of: auto,always,never (did you mean 'always'?)");
}
static void t_missing_required(void) {
    expect_error("missing_name_or_path.yaml", ORK_E_CONFIG, "8:7", "missing required key 'model.name_or_path'");
    expect_error("null_required.yaml", ORK_E_CONFIG, "9:23", "model.name_or_path has no value (it is required)");
    expect_error("process_empty.yaml", ORK_E_CONFIG, "4:12", "config.process: the list is empty");
    expect_error("two_processes.yaml", ORK_E_CONFIG, "10:7", "config.process: 2 entries, orakul takes at most 1");
}
static void t_duplicates(void) {
    expect_error("duplicate.yaml", ORK_E_CONFIG, "12:9", "duplicate key 'steps' (first given at 11:9)");
    expect_error("alias_both.yaml", ORK_E_CONFIG, "12:9", "'linear' and 'rank' (at 11:9) are the same setting");
    expect_error("two_docs.yaml", ORK_E_FORMAT, "11:1", "a second YAML document");
}
static void t_nonexistent_file(void) {
    ork_config *cfg = (ork_config *)1;
    reset();
    CU_ASSERT_EQUAL(ork_config_load(case_path("no_such_file.yaml"), &cfg), ORK_E_IO);
    CU_ASSERT_PTR_NULL(cfg);
    CU_ASSERT_EQUAL(g_err, 1);
    CU_ASSERT_PTR_NOT_NULL(logged("no_such_file.yaml: cannot open the config: No such file", NULL));
}
/* config.name is a name, not a path: it makes <training_folder>/<name>/ and the
 * files in it, so it may not leave training_folder or be cut short */
static void t_name(void) {
    static const char tail[] = "it names the output folder and files inside training_folder";
    expect_error("name_escape.yaml", ORK_E_CONFIG, "3:9", "config.name contains '..'");
    CU_ASSERT_PTR_NOT_NULL(logged(tail, NULL));
    expect_error("name_dotdot.yaml", ORK_E_CONFIG, "3:9", "config.name contains '..'");
    expect_error("name_slash.yaml", ORK_E_CONFIG, "3:9", "config.name contains '/'");
    expect_error("name_backslash.yaml", ORK_E_CONFIG, "3:9", "config.name contains '\\'");
    expect_error("name_nul.yaml", ORK_E_CONFIG, "3:9", "config.name: a NUL character (\\0) in a string");
    expect_error("name_long.yaml", ORK_E_CONFIG, "3:9", "config.name is longer than 200 bytes");
    ork_config *cfg = NULL; /* 200 bytes: the longest name taken */
    CU_ASSERT_EQUAL(load("name_200.yaml", &cfg), ORK_OK);
    CU_ASSERT_EQUAL(g_err, 0);
    if (cfg) CU_ASSERT_EQUAL(strlen(ork_config_job(cfg)->name), 200);
    ork_config_free(cfg);
}
static void t_plugins_path(void) {
    expect_error("plugins_missing.yaml", ORK_E_CONFIG, "13:13",
                 "plugins.path: '/nonexistent/orakul-plugins' does not exist");
}

/* ---- warnings, defaults, provenance ---- */
static void t_known_unimplemented(void) {
    ork_config *cfg = NULL;
    CU_ASSERT_EQUAL_FATAL(load("known_unimplemented.yaml", &cfg), ORK_OK);
    CU_ASSERT_EQUAL(g_err, 0);
    CU_ASSERT_EQUAL(g_warn, 2); /* train_text_encoder: false restates the default: quiet */
    CU_ASSERT_PTR_NOT_NULL(logged("known_unimplemented.yaml:12:9: ignored: train.min_snr_gamma (not implemented yet)", NULL));
    CU_ASSERT_PTR_NOT_NULL(logged("known_unimplemented.yaml:15:9: ignored: train.linear_timesteps", NULL));
    CU_ASSERT_PTR_NOT_NULL(strstr(g_lines[0], ":12:9: ")); /* in file order */
    CU_ASSERT_PTR_NOT_NULL(strstr(g_lines[1], ":15:9: "));
    CU_ASSERT_EQUAL(ork_config_process(cfg)->train.steps, 500);
    ork_config_free(cfg);
}

static void t_defaults(void) {
    ork_config *cfg = NULL;
    CU_ASSERT_EQUAL_FATAL(load("minimal.yaml", &cfg), ORK_OK);
    CU_ASSERT_EQUAL(g_n, 0);
    const ork_process_config *p = ork_config_process(cfg);
    CU_ASSERT_STRING_EQUAL(ork_config_job(cfg)->job, "extension");
    CU_ASSERT_STRING_EQUAL(p->network.type, "lora");
    CU_ASSERT_EQUAL(p->network.linear, 4);
    CU_ASSERT_DOUBLE_EQUAL(p->network.linear_alpha, 1.0, 0);
    CU_ASSERT_EQUAL(p->save.save_every, 1000);
    CU_ASSERT_EQUAL(p->save.max_step_saves_to_keep, 5);
    CU_ASSERT_STRING_EQUAL(p->save.dtype, "float16");
    CU_ASSERT_EQUAL_FATAL(p->datasets.n, 1);
    CU_ASSERT_STRING_EQUAL(p->datasets.v[0].caption_ext, ".txt");
    CU_ASSERT_EQUAL_FATAL(p->datasets.v[0].resolution.n, 1);
    CU_ASSERT_EQUAL(p->datasets.v[0].resolution.v[0], 512);
    CU_ASSERT_EQUAL(p->datasets.v[0].buckets, 1);
    CU_ASSERT_EQUAL(p->train.steps, 1000);
    CU_ASSERT_EQUAL(p->train.batch_size, 1);
    CU_ASSERT_DOUBLE_EQUAL(p->train.lr, 1e-6, 0);
    CU_ASSERT_EQUAL(p->train.gradient_checkpointing, 1);
    CU_ASSERT_STRING_EQUAL(p->train.optimizer, "adamw");
    CU_ASSERT_STRING_EQUAL(p->train.noise_scheduler, "flowmatch");
    CU_ASSERT_EQUAL(p->train.seed, 42);
    CU_ASSERT_STRING_EQUAL(p->model.arch, "flux");
    CU_ASSERT_STRING_EQUAL(p->model.qtype, "none"); /* quantize defaults to false */
    CU_ASSERT_STRING_EQUAL(p->model.stream_compression, "auto");
    CU_ASSERT_STRING_EQUAL(p->training_folder, "output");
    CU_ASSERT_PTR_NULL(p->trigger_word);
    CU_ASSERT_EQUAL(p->logging.log_every, 100);
    CU_ASSERT_EQUAL(p->plugins.path.n, 0);
    ork_loc l;
    CU_ASSERT_TRUE(ork_config_where(cfg, "train.steps", &l));
    CU_ASSERT_EQUAL(l.line, 0);
    CU_ASSERT_TRUE(ork_config_where(cfg, "model.name_or_path", &l));
    CU_ASSERT_EQUAL(l.line, 9);
    CU_ASSERT_EQUAL(l.col, 23);
    CU_ASSERT_FALSE(ork_config_where(cfg, "train.no_such_key", &l));
    ork_config_free(cfg);
}

static void t_explicit_zero(void) {
    ork_config *cfg = NULL;
    CU_ASSERT_EQUAL_FATAL(load("explicit_zero.yaml", &cfg), ORK_OK);
    const ork_process_config *p = ork_config_process(cfg);
    CU_ASSERT_EQUAL(p->save.max_step_saves_to_keep, 0);
    CU_ASSERT_EQUAL(p->train.seed, 0);
    CU_ASSERT_DOUBLE_EQUAL(p->train.max_grad_norm, 0.0, 0);
    CU_ASSERT_DOUBLE_EQUAL(p->network.dropout, 0.0, 0);
    ork_loc l;
    CU_ASSERT_TRUE(ork_config_where(cfg, "network.dropout", &l));
    CU_ASSERT_EQUAL(l.line, 11); /* the same 0 as the default, but given */
    CU_ASSERT_EQUAL(l.col, 18);
    CU_ASSERT_TRUE(ork_config_where(cfg, "train.seed", &l));
    CU_ASSERT_EQUAL(l.line, 15);
    ork_config_free(cfg);
}

static void t_couplings(void) {
    ork_config *cfg = NULL;
    CU_ASSERT_EQUAL_FATAL(load("offloading.yaml", &cfg), ORK_OK);
    ork_loc l;
    CU_ASSERT_STRING_EQUAL(ork_config_component_name(cfg, ORK_KIND_QUANT, &l), "float8");
    CU_ASSERT_EQUAL(l.line, 11); /* derived from layer_offloading */
    ork_config_free(cfg);
    CU_ASSERT_EQUAL_FATAL(load("minimal.yaml", &cfg), ORK_OK);
    CU_ASSERT_STRING_EQUAL(ork_config_component_name(cfg, ORK_KIND_QUANT, &l), "none");
    CU_ASSERT_EQUAL(l.line, 0);
    CU_ASSERT_STRING_EQUAL(ork_config_component_name(cfg, ORK_KIND_LOSS, &l), "mse");
    ork_config_free(cfg);
}

/* ai-toolkit's UI writes model.arch "family:variant" (zimage:turbo): the whole
 * name reaches the component lookup, where the variant is an alias of its own
 * component; it is not cut at the ':'. */
static void t_arch_variant(void) {
    ork_config *cfg = NULL;
    CU_ASSERT_EQUAL_FATAL(load("arch_variant.yaml", &cfg), ORK_OK);
    CU_ASSERT_EQUAL(g_n, 0);
    ork_loc l;
    CU_ASSERT_STRING_EQUAL(ork_config_process(cfg)->model.arch, "zimage:turbo");
    CU_ASSERT_STRING_EQUAL(ork_config_component_name(cfg, ORK_KIND_MODEL, &l), "zimage:turbo");
    CU_ASSERT_EQUAL(l.line, 10);
    ork_config_free(cfg);
}

/* ---- component keys (pass 2) ---- */
typedef struct {
    double betas[2];
    double eps, weight_decay;
    int32_t amsgrad;
    const char *mode;
    int64_t k;
} opt_params;

#define P(key, type, cnt, fl, def, lo, hi, ch, field) \
    {key, type, cnt, fl, def, lo, hi, ch, offsetof(opt_params, field), "test"}
static const ork_param opt_table[] = {
    P("betas", ORK_PARAM_FLOAT, 2, 0, "[0.9, 0.999]", 0, 1, NULL, betas),
    P("eps", ORK_PARAM_FLOAT, 1, 0, "1e-8", 0, 1, NULL, eps),
    P("weight_decay", ORK_PARAM_FLOAT, 1, 0, "0.01", 0, 10, NULL, weight_decay),
    P("amsgrad", ORK_PARAM_BOOL, 1, 0, "false", 1, 0, NULL, amsgrad),
    P("mode", ORK_PARAM_STRING, 1, 0, "fast", 1, 0, "fast|exact", mode),
    {NULL, 0, 0, 0, NULL, 0, 0, NULL, 0, NULL}};
static const ork_param req_table[] = {
    P("betas", ORK_PARAM_FLOAT, 2, 0, "[0.9, 0.999]", 0, 1, NULL, betas),
    P("weight_decay", ORK_PARAM_FLOAT, 1, 0, "0.01", 0, 10, NULL, weight_decay),
    P("k", ORK_PARAM_INT, 1, ORK_PARAM_REQUIRED, NULL, 1, 100, NULL, k),
    {NULL, 0, 0, 0, NULL, 0, 0, NULL, 0, NULL}};
static const ork_param bad_table[] = {
    {"eps", ORK_PARAM_FLOAT, 1, 0, "1e-8", 0, 1, NULL, 4096, "past the buffer"},
    {NULL, 0, 0, 0, NULL, 0, 0, NULL, 0, NULL}};

static void expect_param_error(ork_config *cfg, const char *section, const ork_param *t, ork_status want,
                               const char *loc, const char *text) {
    opt_params buf;
    reset();
    CU_ASSERT_EQUAL(ork_config_component_params(cfg, section, t, &buf, sizeof buf), want);
    CU_ASSERT_EQUAL(g_err, 1);
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s%s", loc, *loc ? ": " : "");
    if (!logged(prefix, text)) {
        printf("\n  %s: wanted \"%s\" ... \"%s\"; logged:\n", section, prefix, text);
        for (int i = 0; i < g_n; i++) printf("    %s\n", g_lines[i]);
        CU_FAIL("error line");
    }
}

static void t_component_params(void) {
    ork_config *cfg = NULL;
    CU_ASSERT_EQUAL_FATAL(load("params.yaml", &cfg), ORK_OK);
    ork_loc l;
    /* the loader's hook: the user's name and where it is */
    CU_ASSERT_STRING_EQUAL(ork_config_component_name(cfg, ORK_KIND_OPTIMIZER, &l), "adamw9bit");
    CU_ASSERT_EQUAL(l.line, 9);
    CU_ASSERT_EQUAL(l.col, 20);
    CU_ASSERT_STRING_EQUAL(ork_config_component_params_path(ORK_KIND_OPTIMIZER), "train.optimizer_params");
    reset();
    CU_ASSERT_EQUAL(ork_config_fail_at(&l, ORK_E_CONFIG, "unknown optimizer '%s' (available: adamw, adamw8bit)",
                                       "adamw9bit"), ORK_E_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(logged("params.yaml:9:20: unknown optimizer 'adamw9bit' (available: adamw, adamw8bit)", NULL));

    expect_param_error(cfg, "train.optimizer_params", opt_table, ORK_E_CONFIG, "params.yaml:12:11",
                       "unknown key 'betaa1' in train.optimizer_params (did you mean 'betas'?)");
    expect_param_error(cfg, "train.lr_scheduler_params", opt_table, ORK_E_CONFIG, "params.yaml:17:18",
                       "train.lr_scheduler_params.betas: expected a list of 2 values, got 1");
    expect_param_error(cfg, "model.model_kwargs", opt_table, ORK_E_CONFIG, "params.yaml:21:16",
                       "model.model_kwargs.eps: 5 is out of range (must be between 0 and 1)");
    expect_param_error(cfg, "model.quantize_kwargs", opt_table, ORK_E_CONFIG, "params.yaml:23:17",
                       "model.quantize_kwargs.mode: 'fasst' is not one of: fast,exact (did you mean 'fast'?)");
    expect_param_error(cfg, "train.loss_params", req_table, ORK_E_CONFIG, "params.yaml:13:9",
                       "missing required key 'train.loss_params.k'");
    expect_param_error(cfg, "train.loss_params", NULL, ORK_E_CONFIG, "params.yaml:14:11",
                       "unknown key 'betas' in train.loss_params");
    expect_param_error(cfg, "train.loss_params", bad_table, ORK_E_ABI, "", "'eps' at offset 4096 does not fit");

    /* a good section: given values, explicit 0, defaults parsed by the same parser */
    opt_params buf;
    memset(&buf, 0x5a, sizeof buf);
    reset();
    CU_ASSERT_EQUAL_FATAL(ork_config_component_params(cfg, "train.loss_params", opt_table, &buf, sizeof buf), ORK_OK);
    CU_ASSERT_EQUAL(g_n, 0);
    CU_ASSERT_DOUBLE_EQUAL(buf.betas[0], 0.8, 0);
    CU_ASSERT_DOUBLE_EQUAL(buf.betas[1], 0.99, 0);
    CU_ASSERT_DOUBLE_EQUAL(buf.weight_decay, 0.0, 0);
    CU_ASSERT_DOUBLE_EQUAL(buf.eps, 1e-8, 0);
    CU_ASSERT_EQUAL(buf.amsgrad, 0);
    CU_ASSERT_STRING_EQUAL(buf.mode, "fast");
    CU_ASSERT_TRUE(ork_config_where(cfg, "train.loss_params.weight_decay", &l));
    CU_ASSERT_EQUAL(l.line, 15);
    CU_ASSERT_TRUE(ork_config_where(cfg, "train.loss_params.eps", &l));
    CU_ASSERT_EQUAL(l.line, 0);
    /* validating again replaces, not duplicates, the provenance */
    CU_ASSERT_EQUAL(ork_config_component_params(cfg, "train.loss_params", opt_table, &buf, sizeof buf), ORK_OK);
    char *dump = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&dump, &len);
    ork_config_dump(cfg, f);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(dump, "train.loss_params.betas = [0.8, 0.99]  (" ));
    CU_ASSERT_PTR_NOT_NULL(strstr(dump, "params.yaml:14:18)\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(dump, "train.loss_params.eps = 1e-08  (default)\n"));
    char *first = strstr(dump, "train.loss_params.eps");
    CU_ASSERT_PTR_NULL(first ? strstr(first + 1, "train.loss_params.eps") : NULL);
    free(dump);
    CU_ASSERT_EQUAL(ork_config_component_params(cfg, "train.nope", opt_table, &buf, sizeof buf), ORK_E_INVALID);
    ork_config_free(cfg);

    /* absent section: defaults; a required key cannot be met */
    CU_ASSERT_EQUAL_FATAL(load("minimal.yaml", &cfg), ORK_OK);
    CU_ASSERT_EQUAL(ork_config_component_params(cfg, "train.optimizer_params", opt_table, &buf, sizeof buf), ORK_OK);
    CU_ASSERT_DOUBLE_EQUAL(buf.betas[1], 0.999, 0);
    CU_ASSERT_DOUBLE_EQUAL(buf.weight_decay, 0.01, 0);
    expect_param_error(cfg, "train.optimizer_params", req_table, ORK_E_CONFIG, "minimal.yaml",
                       "missing required key 'train.optimizer_params.k'");
    ork_config_free(cfg);
}

/* Keys ai-toolkit's UI writes into every job that act only with another setting
 * (schema.h: ork_ck.when) warn only when that setting is on; a model_kwargs key
 * ai-toolkit knows (schema.c: model_kwargs_known) that the model does not
 * declare warns, a typo of one is refused. */
static void t_known_when(void) {
    ork_config *cfg = NULL;
    CU_ASSERT_EQUAL_FATAL(load("known_when.yaml", &cfg), ORK_OK);
    CU_ASSERT_EQUAL(g_err, 0);
    CU_ASSERT_EQUAL(g_warn, 4);
    CU_ASSERT_PTR_NOT_NULL(logged("known_when.yaml:18:11: ignored: datasets[1].mask_path (", NULL));
    CU_ASSERT_PTR_NOT_NULL(logged("known_when.yaml:19:11: ignored: datasets[1].mask_min_value (not implemented yet)", NULL));
    CU_ASSERT_PTR_NOT_NULL(logged("known_when.yaml:32:9: ignored: train.blank_prompt_preservation (", NULL));
    CU_ASSERT_PTR_NOT_NULL(logged("known_when.yaml:33:9: ignored: train.blank_prompt_preservation_multiplier (", NULL));
    CU_ASSERT_PTR_NULL(logged("datasets[0].mask_min_value", NULL)); /* no mask_path: nothing to do */
    CU_ASSERT_PTR_NULL(logged("lokr", NULL));                       /* type lora */
    CU_ASSERT_PTR_NULL(logged("diff_output_preservation", NULL));   /* DOP off */
    CU_ASSERT_PTR_NULL(logged("ema_config", NULL));                 /* use_ema false */
    CU_ASSERT_PTR_NULL(logged("conv", NULL));                       /* no conv layers */
    static const ork_param depth[] = {
        {"depth", ORK_PARAM_INT, 1, 0, "-1", -1, 1024, NULL, offsetof(opt_params, k), "blocks"},
        {NULL, 0, 0, 0, NULL, 0, 0, NULL, 0, NULL}};
    opt_params buf;
    reset();
    CU_ASSERT_EQUAL(ork_config_component_params(cfg, "model.model_kwargs", depth, &buf, sizeof buf), ORK_OK);
    CU_ASSERT_EQUAL(buf.k, 2);
    CU_ASSERT_EQUAL(g_err, 0);
    CU_ASSERT_EQUAL(g_warn, 1); /* kv_cache: false restates ai-toolkit's default */
    CU_ASSERT_PTR_NOT_NULL(logged("known_when.yaml:23:11: ignored: model.model_kwargs.match_target_res (", NULL));
    /* a model that declares the key implements it: no warning */
    static const ork_param both[] = {
        {"depth", ORK_PARAM_INT, 1, 0, "-1", -1, 1024, NULL, offsetof(opt_params, k), "blocks"},
        {"match_target_res", ORK_PARAM_BOOL, 1, 0, "false", 1, 0, NULL, offsetof(opt_params, amsgrad), "m"},
        {NULL, 0, 0, 0, NULL, 0, 0, NULL, 0, NULL}};
    reset();
    CU_ASSERT_EQUAL(ork_config_component_params(cfg, "model.model_kwargs", both, &buf, sizeof buf), ORK_OK);
    CU_ASSERT_EQUAL(g_warn, 0);
    CU_ASSERT_EQUAL(buf.amsgrad, 1);
    ork_config_free(cfg);
    CU_ASSERT_EQUAL_FATAL(load("kwargs_typo.yaml", &cfg), ORK_OK);
    expect_param_error(cfg, "model.model_kwargs", depth, ORK_E_CONFIG, "kwargs_typo.yaml:11:11",
                       "unknown key 'match_target_ress' in model.model_kwargs (did you mean 'match_target_res'?)");
    ork_config_free(cfg);
}

/* ---- ai-toolkit's own configs ---- */
static ork_config *load_example(const char *name) {
    char p[1024];
    snprintf(p, sizeof p, "%s/configs/%s", ORK_SOURCE_DIR, name);
    ork_config *cfg = NULL;
    reset();
    CU_ASSERT_EQUAL(ork_config_load(p, &cfg), ORK_OK);
    CU_ASSERT_EQUAL(g_err, 0);
    return cfg;
}

static void t_example_flux(void) {
    ork_config *cfg = load_example("train_lora_flux_24gb.yaml");
    CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
    CU_ASSERT_EQUAL(g_warn, 0); /* the sample: section is read (core/train/samples.h), ema_config too (train/ema.h) */
    const ork_process_config *p = ork_config_process(cfg);
    CU_ASSERT_EQUAL(p->train.use_ema, 1);
    CU_ASSERT_DOUBLE_EQUAL(p->train.ema_decay, 0.99, 0);
    CU_ASSERT_STRING_EQUAL(p->sample.sampler, "flowmatch");
    CU_ASSERT_EQUAL(p->model.quantize_te, p->model.quantize); /* not given: model.quantize's (ai-toolkit) */
    CU_ASSERT_EQUAL(p->sample.sample_every, 250);
    CU_ASSERT_EQUAL(p->sample.width, 1024);
    CU_ASSERT_EQUAL(p->sample.prompts.n, 10);
    CU_ASSERT_STRING_EQUAL(p->sample.prompts.v[9], "a bulldog, in a post apocalyptic world, with a shotgun, in a leather jacket, in a desert, with a motorcycle");
    CU_ASSERT_STRING_EQUAL(p->sample.neg, "");
    CU_ASSERT_EQUAL(p->sample.seed, 42);
    CU_ASSERT_EQUAL(p->sample.walk_seed, 1);
    CU_ASSERT_DOUBLE_EQUAL(p->sample.guidance_scale, 4.0, 0);
    CU_ASSERT_EQUAL(p->sample.sample_steps, 20);
    CU_ASSERT_EQUAL(p->sample.samples.n, 0);
    CU_ASSERT_EQUAL(p->train.skip_first_sample, 0);
    CU_ASSERT_STRING_EQUAL(ork_config_job(cfg)->name, "my_first_flux_lora_v1");
    CU_ASSERT_EQUAL(p->network.linear, 16);
    CU_ASSERT_EQUAL(p->train.steps, 2000);
    CU_ASSERT_DOUBLE_EQUAL(p->train.lr, 1e-4, 0);
    CU_ASSERT_STRING_EQUAL(p->train.optimizer, "adamw8bit");
    CU_ASSERT_STRING_EQUAL(p->datasets.v[0].caption_ext, ".txt");
    CU_ASSERT_EQUAL_FATAL(p->datasets.v[0].resolution.n, 3);
    CU_ASSERT_EQUAL(p->datasets.v[0].resolution.v[2], 1024);
    CU_ASSERT_STRING_EQUAL(p->model.arch, "flux");
    CU_ASSERT_STRING_EQUAL(p->model.qtype, "qfloat8");
    char *dump = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&dump, &len);
    ork_config_dump(cfg, f);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(dump, "\ntrain.steps = 2000  ("));
    CU_ASSERT_PTR_NOT_NULL(strstr(dump, "train_lora_flux_24gb.yaml:41:16)\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(dump, "\ntrain.seed = 42  (default)\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(dump, "datasets[0].resolution = [512, 768, 1024]  ("));
    CU_ASSERT_PTR_NOT_NULL(strstr(dump, "model.arch = \"flux\"  ("));
    free(dump);
    ork_config_free(cfg);
}

static void t_example_flux2(void) {
    ork_config *cfg = load_example("train_lora_flux2_24gb.yaml");
    CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
    CU_ASSERT_PTR_NULL(logged("ignored: model.quantize_te", NULL)); /* implemented: core/text/conditioner.h */
    CU_ASSERT_PTR_NULL(logged("ignored: model.qtype_te", NULL));
    CU_ASSERT_EQUAL(g_warn, 0); /* ema_config with use_ema: false is what orakul does */
    const ork_process_config *p = ork_config_process(cfg);
    CU_ASSERT_EQUAL(p->model.quantize_te, 1);
    CU_ASSERT_STRING_EQUAL(p->model.qtype_te, "qfloat8");
    CU_ASSERT_EQUAL(p->model.attn_masking, 0);
    CU_ASSERT_EQUAL_FATAL(p->sample.samples.n, 2);
    CU_ASSERT_STRING_EQUAL(p->sample.samples.v[1].prompt, "a bear building a log cabin in the snow covered mountains");
    CU_ASSERT_EQUAL(p->sample.samples.v[1].width, 0); /* not given: the section's */
    CU_ASSERT_EQUAL(p->sample.sample_steps, 25);
    ork_loc at;
    CU_ASSERT(ork_config_where(cfg, "sample.samples[0].seed", &at) && at.line == 0);
    CU_ASSERT(ork_config_where(cfg, "sample.samples[1].prompt", &at) && at.line == 85);
    CU_ASSERT_STRING_EQUAL(p->model.arch, "flux2");
    CU_ASSERT_STRING_EQUAL(p->model.qtype, "qfloat8");
    CU_ASSERT_EQUAL(p->train.gradient_accumulation_steps, 1);
    CU_ASSERT_EQUAL(p->network.ignore_if_contains.n, 0);
    CU_ASSERT_STRING_EQUAL(p->datasets.v[0].default_caption, "");
    static const ork_param wd[] = {
        {"weight_decay", ORK_PARAM_FLOAT, 1, 0, "0.01", 0, 1, NULL, offsetof(opt_params, weight_decay), "wd"},
        {NULL, 0, 0, 0, NULL, 0, 0, NULL, 0, NULL}};
    opt_params buf;
    CU_ASSERT_EQUAL(ork_config_component_params(cfg, "train.optimizer_params", wd, &buf, sizeof buf), ORK_OK);
    CU_ASSERT_DOUBLE_EQUAL(buf.weight_decay, 1e-4, 0);
    ork_config_free(cfg);
}

static int suite_init(void) {
    ork_log_set_sink(sink, NULL);
    return 0;
}
static int suite_clean(void) {
    ork_log_set_sink(NULL, NULL);
    return 0;
}

static const ork_test_case cases[] = {
    {"empty file", t_empty},
    {"YAML syntax error", t_syntax},
    {"tab indentation", t_tabs},
    {"trailing junk", t_trailing_junk},
    {"negative rank", t_negative_rank},
    {"overflow", t_overflow},
    {"wrong types", t_wrong_type},
    {"unknown keys", t_unknown_key},
    {"choices", t_choices},
    {"missing required", t_missing_required},
    {"duplicates", t_duplicates},
    {"nonexistent file", t_nonexistent_file},
    {"config.name is a name, not a path", t_name},
    {"plugins.path", t_plugins_path},
    {"known but not implemented", t_known_unimplemented},
    {"defaults", t_defaults},
    {"explicit zero", t_explicit_zero},
    {"couplings", t_couplings},
    {"model.arch family:variant stays whole", t_arch_variant},
    {"component params", t_component_params},
    {"known keys that act only with another", t_known_when},
    {"example flux", t_example_flux},
    {"example flux2", t_example_flux2},
    {NULL, NULL}};
ORK_TEST_MAIN("config", suite_init, suite_clean, cases)
