/* test_hf_checkpoint.c — sdk/include/orakul/hf_checkpoint.h, the checkpoint
 * resolution the text-encoder plugins (t5clip, llm) and model plugins share,
 * on the core's services: a file, a save_pretrained folder (config.json,
 * text_config), a diffusers folder's subfolder, a sharded set with its
 * index; and malformed input, each refused with one line and the
 * checkpoint left closed: a bad index json, an index naming a missing shard
 * or a shard outside the folder, a config.json that is not JSON or not an
 * object, a missing path, no path; a core lacking a service. And the one
 * repo-id resolution in the local Hugging Face cache (ork_hf_hub_snapshot):
 * HF_HUB_CACHE over HF_HOME/hub over ~/.cache/huggingface/hub, refs/main over
 * the other snapshots, the only snapshot without refs/main, and one line
 * naming the folder and the variable when the snapshot is not there. */
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

/* ---- the repo id in the local Hugging Face cache ---------------------------------- */

/* <root>/models--org--name/snapshots/<rev>/, refs/main = ref unless NULL */
static void hub_repo(const char *root_rel, const char *rev, const char *ref) {
    char rel[160];
    snprintf(rel, sizeof rel, "%s/models--org--name/snapshots/%s", root_rel, rev);
    char p[256], cmd[400];
    path_of(p, sizeof p, rel);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", p);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    if (ref) {
        snprintf(rel, sizeof rel, "%s/models--org--name/refs", root_rel);
        path_of(p, sizeof p, rel);
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", p);
        CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
        snprintf(rel, sizeof rel, "%s/models--org--name/refs/main", root_rel);
        write_text(rel, ref);
    }
}

/* resolve "org/name": want_rel NULL expects a refusal with one line holding needle */
static void hub_expect(const char *id, const char *want_rel, const char *needle) {
    char out[2048], want[256];
    g_errors = 0;
    g_last[0] = 0;
    ork_status s = ork_hf_hub_snapshot(&g_host, g_sv.pf, "model.name_or_path", id, out, sizeof out);
    if (want_rel) {
        path_of(want, sizeof want, want_rel);
        if (s != ORK_OK) printf("\n  %s: %s", id, g_last);
        CU_ASSERT_EQUAL(s, ORK_OK);
        CU_ASSERT_EQUAL(g_errors, 0);
        if (s == ORK_OK && strcmp(out, want)) printf("\n  %s -> %s, want %s", id, out, want);
        CU_ASSERT(s == ORK_OK && !strcmp(out, want));
    } else {
        CU_ASSERT_NOT_EQUAL(s, ORK_OK);
        CU_ASSERT_EQUAL(g_errors, 1);
        CU_ASSERT_STRING_EQUAL(out, "");
        if (needle && !strstr(g_last, needle)) printf("\n  %s: last line [%s], wanted [%s]", id, g_last, needle);
        if (needle) CU_ASSERT(strstr(g_last, needle) != NULL);
    }
}

static void set_or_unset(const char *var, const char *rel) {
    char p[256];
    if (!rel) {
        unsetenv(var);
        return;
    }
    path_of(p, sizeof p, rel);
    setenv(var, p, 1);
}

static void test_hub(void) {
    char *saved_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    /* three caches, each holding org/name at its own revision */
    hub_repo("hubA", "aaaa1111", "aaaa1111\n");
    hub_repo("hfhome/hub", "bbbb2222", "bbbb2222");
    hub_repo("home/.cache/huggingface/hub", "cccc3333", "cccc3333  \r\n");
    set_or_unset("HOME", "home");
    set_or_unset("HF_HOME", "hfhome");
    set_or_unset("HF_HUB_CACHE", "hubA");
    hub_expect("org/name", "hubA/models--org--name/snapshots/aaaa1111", NULL);
    setenv("HF_HUB_CACHE", "", 1); /* empty counts as unset */
    hub_expect("org/name", "hfhome/hub/models--org--name/snapshots/bbbb2222", NULL);
    unsetenv("HF_HUB_CACHE");
    hub_expect("org/name", "hfhome/hub/models--org--name/snapshots/bbbb2222", NULL);
    unsetenv("HF_HOME");
    hub_expect("org/name", "home/.cache/huggingface/hub/models--org--name/snapshots/cccc3333", NULL);

    /* refs/main wins over a stale snapshot; without refs/main the only one */
    set_or_unset("HF_HUB_CACHE", "hubB");
    hub_repo("hubB", "0000old0", NULL);
    hub_repo("hubB", "1111new1", "1111new1\n");
    hub_expect("org/name", "hubB/models--org--name/snapshots/1111new1", NULL);
    set_or_unset("HF_HUB_CACHE", "hubC");
    hub_repo("hubC", "only0001", NULL);
    hub_expect("org/name", "hubC/models--org--name/snapshots/only0001", NULL);
    /* two snapshots and no refs/main: no guess */
    hub_repo("hubC", "only0002", NULL);
    hub_expect("org/name", NULL, "snapshots/<refs/main>");

    /* refs/main naming an absent snapshot; a climbing revision; no repo at all:
     * one line naming the folder looked in and the variable that chose it */
    set_or_unset("HF_HUB_CACHE", "hubD");
    hub_repo("hubD", "dddd4444", "eeee5555\n");
    char want[400];
    snprintf(want, sizeof want, "%s/hubD/models--org--name/snapshots/eeee5555, cache from HF_HUB_CACHE", g_dir);
    hub_expect("org/name", NULL, want);
    hub_expect("org/name", NULL, "nothing is downloaded");
    write_text("hubD/models--org--name/refs/main", "../../x\n");
    hub_expect("org/name", NULL, "not in the Hugging Face cache");
    hub_expect("org/other", NULL, "models--org--other/snapshots/<refs/main>");
    set_or_unset("HF_HOME", "hfhome");
    unsetenv("HF_HUB_CACHE");
    hub_expect("org/other", NULL, "cache from HF_HOME/hub");
    /* refs/main that is a folder: not a regular file, refused */
    mkd("hfhome/hub/models--org--name/refs/main.d");
    char a[256], b[256];
    path_of(a, sizeof a, "hfhome/hub/models--org--name/refs/main");
    path_of(b, sizeof b, "hfhome/hub/models--org--name/refs/main.d");
    CU_ASSERT_EQUAL_FATAL(unlink(a), 0);
    CU_ASSERT_EQUAL_FATAL(rename(b, a), 0);
    hub_expect("org/name", NULL, "not a regular file");
    /* not a repo id: refused, not looked up */
    hub_expect("org/name/extra", NULL, "not a Hugging Face repo id");
    hub_expect("w.safetensors", NULL, "not a Hugging Face repo id");
    CU_ASSERT(ork_hf_is_repo_id("black-forest-labs/FLUX.1-dev"));
    CU_ASSERT(!ork_hf_is_repo_id("org/w.safetensors"));
    CU_ASSERT(!ork_hf_is_repo_id("./name"));
    CU_ASSERT(!ork_hf_is_repo_id("org/..") && !ork_hf_is_repo_id("/abs") && !ork_hf_is_repo_id("org/"));
    CU_ASSERT(!ork_hf_is_repo_id("org/na me") && !ork_hf_is_repo_id(NULL));
    unsetenv("HF_HOME");
    if (saved_home) setenv("HOME", saved_home, 1);
    else unsetenv("HOME");
    free(saved_home);
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
    {"a repo id in the cache: env precedence, refs/main, one line when absent", test_hub},
    {NULL, NULL},
};

ORK_TEST_MAIN("hf_checkpoint", suite_init, suite_clean, cases)
