/* test_hf_checkpoint.c — sdk/include/orakul/hf_checkpoint.h, the checkpoint
 * resolution the text-encoder plugins (t5clip, llm) and model plugins share,
 * on the core's services: a file, a save_pretrained folder (config.json,
 * text_config), a diffusers folder's subfolder, a sharded set with its
 * index; and malformed input, each refused with one line and the
 * checkpoint left closed: a bad index json, an index naming a missing shard
 * or a shard outside the folder, a config.json that is not JSON or not an
 * object, a missing path, no path; a core lacking a service. */
#include "ork_test.h"

#include "plugin/host.h"
#include "train/services.h"
#include "util/log.h"

#include <orakul/hf_checkpoint.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[64];
static int g_errors;
static char g_last[1024];
static int g_hide; /* 1: get_service hides the platform service */

static void host_log(const ork_host *h, ork_log_level_abi lvl, const char *fmt, ...) {
    (void)h;
    if (lvl < ORK_LEVEL_ERROR) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_last, sizeof g_last, fmt, ap);
    va_end(ap);
    g_errors++;
}
static void core_sink(ork_log_level lvl, const char *line, void *user) {
    (void)user;
    if (lvl < ORK_LOG_ERROR) return;
    snprintf(g_last, sizeof g_last, "%s", line);
    g_errors++;
}
static const void *host_service(const ork_host *h, const char *id) {
    (void)h;
    if (g_hide && !strcmp(id, ORK_SERVICE_PLATFORM)) return NULL;
    return ork_host_get_service(id);
}
static const ork_host g_host = {ORK_ABI_INIT(ork_host), "test", NULL, host_log, host_service};
static ork_hf_services g_sv;

static void path_of(char *out, size_t n, const char *rel) { snprintf(out, n, "%s/%s", g_dir, rel); }

static void write_text(const char *rel, const char *text) {
    char p[256];
    path_of(p, sizeof p, rel);
    FILE *f = fopen(p, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

/* A safetensors file holding one F32 tensor `name` of 2 values. */
static void write_st(const char *rel, const char *name) {
    char hdr[256], p[256];
    int n = snprintf(hdr, sizeof hdr, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", name);
    while (n % 8) hdr[n++] = ' ';
    path_of(p, sizeof p, rel);
    FILE *f = fopen(p, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    uint64_t len = (uint64_t)n;
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)(len >> (8 * i));
    fwrite(le, 1, 8, f);
    fwrite(hdr, 1, (size_t)n, f);
    float v[2] = {1.0f, 2.0f};
    fwrite(v, sizeof v, 1, f);
    fclose(f);
}

static void mkd(const char *rel) {
    char p[256];
    path_of(p, sizeof p, rel);
    CU_ASSERT_EQUAL_FATAL(mkdir(p, 0755), 0);
}

static int suite_init(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/orakul_hfck_XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    if (ork_services_register() != ORK_OK) return 1;
    return ork_hf_services_get(&g_host, ORK_HF_NEED_TEXT_OPS, &g_sv) != ORK_OK;
}
static int suite_clean(void) {
    ork_host_clear_services();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    return system(cmd) != 0;
}

/* open must fail with status want, one error line holding `needle`, ck left closed */
static void refused(const char *rel, const char *sub, ork_status want, const char *needle) {
    char p[256];
    path_of(p, sizeof p, rel);
    ork_hf_checkpoint ck;
    memset(&ck, 0x5a, sizeof ck);
    g_errors = 0;
    g_last[0] = 0;
    ork_log_set_sink(core_sink, NULL); /* the safetensors service logs through the core */
    ork_status s = ork_hf_checkpoint_open(&g_sv, rel ? p : NULL, sub, &ck);
    ork_log_set_sink(NULL, NULL);
    CU_ASSERT_EQUAL(s, want);
    CU_ASSERT_PTR_NULL(ck.src);
    CU_ASSERT_PTR_NULL(ck.config);
    CU_ASSERT_EQUAL(g_errors, 1); /* one line */
    if (needle && !strstr(g_last, needle)) printf("\n  %s: last line [%s], wanted [%s]\n", rel ? rel : "(null)", g_last, needle);
    if (needle) CU_ASSERT(strstr(g_last, needle) != NULL);
    ork_hf_checkpoint_close(&g_sv, &ck); /* closing a failed one is harmless */
}

static void test_layouts(void) {
    ork_hf_checkpoint ck;
    ork_st_info t;
    char p[256], d[256];
    /* a single file: its folder holds no config */
    mkd("single");
    write_st("single/w.safetensors", "a.weight");
    path_of(p, sizeof p, "single/w.safetensors");
    CU_ASSERT_EQUAL_FATAL(ork_hf_checkpoint_open(&g_sv, p, "text_encoder", &ck), ORK_OK);
    CU_ASSERT_STRING_EQUAL(ck.path, p);
    path_of(d, sizeof d, "single");
    CU_ASSERT_STRING_EQUAL(ck.dir, d);
    CU_ASSERT_PTR_NULL(ck.config);
    CU_ASSERT_PTR_NULL(ck.text_config);
    CU_ASSERT_EQUAL(g_sv.st->find(ck.src, "a.weight", &t), ORK_OK);
    ork_hf_checkpoint_close(&g_sv, &ck);
    CU_ASSERT_PTR_NULL(ck.src);
    ork_hf_checkpoint_close(&g_sv, &ck); /* twice: nothing */

    /* a save_pretrained folder: config.json with a text_config (Mistral3 / CLIPConfig) */
    mkd("folder");
    write_st("folder/model.safetensors", "b.weight");
    write_text("folder/config.json", "{\"model_type\": \"outer\", \"text_config\": {\"num_hidden_layers\": 7, "
                                     "\"hidden_act\": \"quick_gelu\", \"eps\": 1e-5}}");
    path_of(p, sizeof p, "folder");
    CU_ASSERT_EQUAL_FATAL(ork_hf_checkpoint_open(&g_sv, p, "text_encoder", &ck), ORK_OK);
    CU_ASSERT_STRING_EQUAL(ck.path, p);
    CU_ASSERT_STRING_EQUAL(ck.dir, p);
    CU_ASSERT_PTR_NOT_NULL(ck.config);
    CU_ASSERT_EQUAL(ork_hf_config_int(ck.text_config, "num_hidden_layers", 0), 7);
    CU_ASSERT_STRING_EQUAL(ork_hf_config_str(ck.text_config, "hidden_act"), "quick_gelu");
    CU_ASSERT_STRING_EQUAL(ork_hf_config_str(ck.config, "model_type"), "outer");
    CU_ASSERT_STRING_EQUAL(ork_hf_config_str(ck.text_config, "model_type"), ""); /* absent: "" */
    CU_ASSERT_DOUBLE_EQUAL(ork_hf_config_num(ck.text_config, "eps", 0), 1e-5, 1e-12);
    CU_ASSERT_EQUAL(ork_hf_config_int(ck.text_config, "hidden_act", 3), 3); /* not a number: the default */
    CU_ASSERT_EQUAL(ork_hf_config_int(NULL, "x", 4), 4);
    ork_hf_checkpoint_close(&g_sv, &ck);

    /* a diffusers folder: the subfolder asked for, its own config */
    mkd("pipe");
    mkd("pipe/text_encoder");
    mkd("pipe/transformer");
    write_st("pipe/text_encoder/model.safetensors", "te.weight");
    write_text("pipe/text_encoder/config.json", "{\"num_hidden_layers\": 3}");
    write_st("pipe/transformer/diffusion_pytorch_model.safetensors", "tr.weight");
    path_of(p, sizeof p, "pipe");
    CU_ASSERT_EQUAL_FATAL(ork_hf_checkpoint_open(&g_sv, p, "transformer", &ck), ORK_OK);
    path_of(d, sizeof d, "pipe/transformer");
    CU_ASSERT_STRING_EQUAL(ck.path, d);
    CU_ASSERT_EQUAL(g_sv.st->find(ck.src, "tr.weight", &t), ORK_OK);
    CU_ASSERT_PTR_NULL(ck.config);
    ork_hf_checkpoint_close(&g_sv, &ck);
    CU_ASSERT_EQUAL_FATAL(ork_hf_checkpoint_open(&g_sv, p, "text_encoder", &ck), ORK_OK);
    CU_ASSERT_EQUAL(ork_hf_config_int(ck.text_config, "num_hidden_layers", 0), 3); /* no text_config: the root */
    ork_hf_checkpoint_close(&g_sv, &ck);

    /* sharded: two shards and the index, by folder and by the index file */
    mkd("sharded");
    write_st("sharded/model-00001-of-00002.safetensors", "x.weight");
    write_st("sharded/model-00002-of-00002.safetensors", "y.weight");
    write_text("sharded/model.safetensors.index.json",
               "{\"metadata\": {}, \"weight_map\": {\"x.weight\": \"model-00001-of-00002.safetensors\", "
               "\"y.weight\": \"model-00002-of-00002.safetensors\"}}");
    path_of(p, sizeof p, "sharded");
    CU_ASSERT_EQUAL_FATAL(ork_hf_checkpoint_open(&g_sv, p, NULL, &ck), ORK_OK);
    CU_ASSERT_EQUAL(g_sv.st->find(ck.src, "x.weight", &t), ORK_OK);
    CU_ASSERT_EQUAL(g_sv.st->find(ck.src, "y.weight", &t), ORK_OK);
    ork_hf_checkpoint_close(&g_sv, &ck);
    path_of(p, sizeof p, "sharded/model.safetensors.index.json");
    CU_ASSERT_EQUAL_FATAL(ork_hf_checkpoint_open(&g_sv, p, NULL, &ck), ORK_OK);
    path_of(d, sizeof d, "sharded");
    CU_ASSERT_STRING_EQUAL(ck.dir, d);
    CU_ASSERT_EQUAL(g_sv.st->find(ck.src, "y.weight", &t), ORK_OK);
    ork_hf_checkpoint_close(&g_sv, &ck);
}

static void test_malformed(void) {
    /* a bad index json */
    mkd("badindex");
    write_st("badindex/model-00001-of-00001.safetensors", "x.weight");
    write_text("badindex/model.safetensors.index.json", "{\"weight_map\": {\"x.weight\": ");
    refused("badindex", NULL, ORK_E_FORMAT, "not valid JSON");
    write_text("badindex/model.safetensors.index.json", "{\"weight_map\": [1, 2]}");
    refused("badindex", NULL, ORK_E_FORMAT, "weight_map");
    /* an index naming a missing shard */
    mkd("missing");
    write_st("missing/model-00001-of-00002.safetensors", "x.weight");
    write_text("missing/model.safetensors.index.json",
               "{\"weight_map\": {\"x.weight\": \"model-00001-of-00002.safetensors\", "
               "\"y.weight\": \"model-00002-of-00002.safetensors\"}}");
    refused("missing", NULL, ORK_E_IO, "model-00002-of-00002.safetensors");
    /* a shard outside the folder (a relative climb, an absolute path) */
    mkd("outside");
    mkd("outside/te");
    write_st("outside/x.safetensors", "x.weight");
    write_text("outside/te/model.safetensors.index.json", "{\"weight_map\": {\"x.weight\": \"../x.safetensors\"}}");
    refused("outside/te", NULL, ORK_E_FORMAT, "not a relative shard file name");
    char abs[300];
    snprintf(abs, sizeof abs, "{\"weight_map\": {\"x.weight\": \"%s/outside/x.safetensors\"}}", g_dir);
    write_text("outside/te/model.safetensors.index.json", abs);
    refused("outside/te", NULL, ORK_E_FORMAT, "not a relative shard file name");
    /* config.json: not JSON, not an object */
    mkd("badcfg");
    write_st("badcfg/model.safetensors", "x.weight");
    write_text("badcfg/config.json", "{\"num_hidden_layers\": 3,");
    refused("badcfg", NULL, ORK_E_FORMAT, "config.json:");
    write_text("badcfg/config.json", "[1, 2]");
    refused("badcfg", NULL, ORK_E_FORMAT, "not a JSON object");
    /* a folder with no weights, a missing path, none at all */
    mkd("empty");
    refused("empty", "text_encoder", ORK_E_IO, "no *.safetensors");
    refused("nothing/here", NULL, ORK_E_IO, "no such file or folder");
    refused(NULL, NULL, ORK_E_CONFIG, "no weights given");
    /* a file that is not safetensors */
    write_text("junk.safetensors", "not a safetensors file at all");
    refused("junk.safetensors", NULL, ORK_E_FORMAT, NULL);
}

static void test_services(void) {
    ork_hf_services sv;
    g_errors = 0;
    g_hide = 1;
    CU_ASSERT_EQUAL(ork_hf_services_get(&g_host, 0, &sv), ORK_E_ABI);
    g_hide = 0;
    CU_ASSERT_EQUAL(g_errors, 1);
    CU_ASSERT(strstr(g_last, "upgrade orakul") != NULL);
    CU_ASSERT_EQUAL(ork_hf_services_get(NULL, 0, &sv), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_hf_services_get(&g_host, ORK_HF_NEED_TEXT_OPS, &sv), ORK_OK);
    CU_ASSERT(sv.ops && sv.ta && sv.st && sv.pf && sv.host == &g_host);
}

static const ork_test_case cases[] = {
    {"a file, a save_pretrained folder, a diffusers subfolder, a sharded set", test_layouts},
    {"malformed: bad index, missing shard, shard outside, bad config, no path", test_malformed},
    {"the services, and a core lacking one", test_services},
    {NULL, NULL},
};

ORK_TEST_MAIN("hf_checkpoint", suite_init, suite_clean, cases)
