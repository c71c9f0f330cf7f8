/* tests/flux/test_flux_paths.c — the forms of model.name_or_path the FLUX
 * plugin accepts, on small trees built here at test time from the fixtures:
 * a diffusers folder (<dir>/transformer/diffusion_pytorch_model.safetensors)
 * and its transformer/ subfolder, a sharded diffusers folder with
 * diffusion_pytorch_model.safetensors.index.json, and a Hugging Face repo id
 * in the local cache (HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub;
 * models--<org>--<name>/snapshots/<refs/main>/, files symlinked to blobs/ as
 * the hub client does) holding a diffusers layout or one BFL file next to
 * ae.safetensors. Every form must load exactly the weights of the BFL file;
 * an absent repo id fails with one line naming where it looked. */
#include "flux_test_util.h"

#include <limits.h>
#include <stdarg.h>
#include <sys/stat.h>

#define BFL1 FT_FIXTURES "/flux1_small_bfl.safetensors"
#define DIF1 FT_FIXTURES "/flux1_small_diffusers.safetensors"
#define BFL2 FT_FIXTURES "/flux2_small_bfl.safetensors"

static char g_tmp[256];

static char g_lines[8][2048];
static int g_nlines;
static void sink(ork_log_level lvl, const char *line, void *user) {
    (void)user;
    if (lvl >= ORK_LOG_ERROR && g_nlines < 8) snprintf(g_lines[g_nlines++], sizeof g_lines[0], "%s", line);
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return system(cmd) == 0;
}

static int setup(void) {
    if (ft_init()) return 1;
    snprintf(g_tmp, sizeof g_tmp, "/tmp/orakul-flux-paths-XXXXXX");
    return mkdtemp(g_tmp) ? 0 : 1;
}
static int teardown(void) {
    ft_clean();
    ork_log_set_sink(NULL, NULL);
    return sh("rm -rf '%s'", g_tmp) ? 0 : 1;
}

/* Open + load `src`; every weight must equal the one loaded from `ref_path`. */
static void expect_same(const char *src, const char *ref_path) {
    ft_model a, b;
    ork_status s = ft_open(ref_path, NULL, &a);
    if (s == ORK_OK) s = ft_load(&a);
    CU_ASSERT_EQUAL_FATAL(s, ORK_OK);
    s = ft_open(src, NULL, &b);
    if (s == ORK_OK) s = ft_load(&b);
    CU_ASSERT_EQUAL(s, ORK_OK);
    if (s == ORK_OK) {
        CU_ASSERT_EQUAL(a.info.n_weights, b.info.n_weights);
        int differ = 0;
        for (int i = 0; i < a.info.n_weights && a.info.n_weights == b.info.n_weights; i++) {
            ork_tensor *x = ork_wstore_at(a.ws, i), *y = ork_wstore_find(b.ws, a.info.weights[i].name);
            differ += !y || ork_tensor_nbytes(x) != ork_tensor_nbytes(y) ||
                      memcmp(ork_tensor_data(x), ork_tensor_data(y), ork_tensor_nbytes(x)) != 0;
        }
        printf("\n    %s: %d weights, %d differ from %s", src, b.info.n_weights, differ, ref_path);
        CU_ASSERT_EQUAL(differ, 0);
    }
    ft_close(&a);
    ft_close(&b);
}

static void test_diffusers_folder(void) {
    CU_ASSERT_FATAL(sh("mkdir -p '%s/dif/transformer' && cp '%s' '%s/dif/transformer/diffusion_pytorch_model.safetensors'"
                       " && echo '{\"_class_name\": \"FluxTransformer2DModel\"}' > '%s/dif/transformer/config.json'"
                       " && echo '{}' > '%s/dif/model_index.json'",
                       g_tmp, DIF1, g_tmp, g_tmp, g_tmp));
    char p[512];
    snprintf(p, sizeof p, "%s/dif", g_tmp);
    expect_same(p, BFL1);
    snprintf(p, sizeof p, "%s/dif/transformer", g_tmp);
    expect_same(p, BFL1);
    printf("\n  ");
}

/* diffusers shards + index.json, written with the core's writer */
static void test_diffusers_sharded(void) {
    char dir[512], path[700];
    snprintf(dir, sizeof dir, "%s/shard/transformer", g_tmp);
    CU_ASSERT_FATAL(sh("mkdir -p '%s'", dir));
    ork_st_file *in = NULL;
    CU_ASSERT_FATAL(ork_st_open(DIF1, &in) == ORK_OK);
    ork_st_writer *w[2] = {NULL, NULL};
    CU_ASSERT_FATAL(ork_st_writer_new(&w[0]) == ORK_OK && ork_st_writer_new(&w[1]) == ORK_OK);
    static const char *const shard[2] = {"diffusion_pytorch_model-00001-of-00002.safetensors",
                                         "diffusion_pytorch_model-00002-of-00002.safetensors"};
    snprintf(path, sizeof path, "%s/diffusion_pytorch_model.safetensors.index.json", dir);
    FILE *idx = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(idx);
    fprintf(idx, "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {");
    size_t n = ork_st_count(in);
    for (size_t i = 0; i < n; i++) {
        const ork_st_tensor *t = ork_st_at(in, i);
        int k = i >= n / 2;
        CU_ASSERT(ork_st_writer_add(w[k], t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes) == ORK_OK);
        fprintf(idx, "%s\"%s\": \"%s\"", i ? ", " : "", t->name, shard[k]);
    }
    fprintf(idx, "}}\n");
    fclose(idx);
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, shard[k]);
        CU_ASSERT(ork_st_writer_commit(w[k], path) == ORK_OK);
        ork_st_writer_free(w[k]);
    }
    ork_st_close(in);
    snprintf(path, sizeof path, "%s/shard", g_tmp);
    expect_same(path, BFL1);
    snprintf(path, sizeof path, "%s/diffusion_pytorch_model.safetensors.index.json", dir);
    expect_same(path, BFL1);
    printf("\n  ");
}

/* A hub cache under root: repo org/name at revision rev, files (src -> name in
 * the snapshot) stored as blobs and symlinked, refs/main = rev unless no_ref. */
static int hub_repo(const char *root, const char *org, const char *name, const char *rev, int no_ref,
                    const char *const *files) {
    char repo[700];
    snprintf(repo, sizeof repo, "%s/models--%s--%s", root, org, name);
    if (!sh("mkdir -p '%s/blobs' '%s/refs' '%s/snapshots/%s'", repo, repo, repo, rev)) return 0;
    if (!no_ref && !sh("printf '%%s' '%s' > '%s/refs/main'", rev, repo)) return 0;
    for (int i = 0; files[i]; i += 2) {
        char blob[64];
        snprintf(blob, sizeof blob, "blob%s%d", rev, i);
        const char *dst = files[i + 1];
        int depth = 0;
        for (const char *c = dst; *c; c++) depth += *c == '/';
        char up[64] = "";
        for (int d = 0; d < depth; d++) strcat(up, "../");
        if (!sh("cp '%s' '%s/blobs/%s' && mkdir -p \"$(dirname '%s/snapshots/%s/%s')\" && "
                "ln -s '%s../../blobs/%s' '%s/snapshots/%s/%s'",
                files[i], repo, blob, repo, rev, dst, up, blob, repo, rev, dst))
            return 0;
    }
    return 1;
}

static void test_hub_cache(void) {
    char hub[512], p[700];
    snprintf(hub, sizeof hub, "%s/hub", g_tmp);
    /* diffusers layout plus a BFL file, as black-forest-labs/FLUX.1-dev ships */
    const char *const dif[] = {DIF1, "transformer/diffusion_pytorch_model.safetensors", BFL1, "flux1-small.safetensors",
                               BFL2, "ae.safetensors", NULL};
    CU_ASSERT_FATAL(hub_repo(hub, "test-org", "FLUX.1-small", "1111aaaa", 0, dif));
    /* BFL file next to ae.safetensors (a decoy that is a FLUX.1 file); a stale
     * snapshot whose "flux2" file is FLUX.1: refs/main must win */
    const char *const bfl[] = {BFL2, "flux2-small.safetensors", BFL1, "ae.safetensors", NULL};
    const char *const old[] = {BFL1, "flux2-small.safetensors", NULL};
    CU_ASSERT_FATAL(hub_repo(hub, "test-org", "flux2-small", "2222bbbb", 0, bfl));
    CU_ASSERT_FATAL(hub_repo(hub, "test-org", "flux2-small", "0000old0", 1, old));
    unsetenv("HF_HOME");
    setenv("HF_HUB_CACHE", hub, 1);
    expect_same("test-org/FLUX.1-small", BFL1);
    expect_same("test-org/flux2-small", BFL2);
    /* HF_HOME/hub */
    unsetenv("HF_HUB_CACHE");
    snprintf(p, sizeof p, "%s/hfhome", g_tmp);
    CU_ASSERT_FATAL(sh("mkdir -p '%s' && ln -s '%s' '%s/hub'", p, hub, p));
    setenv("HF_HOME", p, 1);
    expect_same("test-org/flux2-small", BFL2);
    /* ~/.cache/huggingface/hub */
    unsetenv("HF_HOME");
    const char *home = getenv("HOME");
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", home ? home : "");
    snprintf(p, sizeof p, "%s/home", g_tmp);
    CU_ASSERT_FATAL(sh("mkdir -p '%s/.cache/huggingface' && ln -s '%s' '%s/.cache/huggingface/hub'", p, hub, p));
    setenv("HOME", p, 1);
    expect_same("test-org/FLUX.1-small", BFL1);
    if (home) setenv("HOME", saved, 1);
    else unsetenv("HOME");
    printf("\n  ");
}

/* One error line naming the cache directory it looked in. */
static void test_hub_absent(void) {
    char hub[512], want[700];
    snprintf(hub, sizeof hub, "%s/emptyhub", g_tmp);
    CU_ASSERT_FATAL(sh("mkdir -p '%s'", hub));
    setenv("HF_HUB_CACHE", hub, 1);
    ork_log_set_sink(sink, NULL);
    g_nlines = 0;
    ft_model m;
    ork_status s = ft_open("black-forest-labs/FLUX.1-dev", NULL, &m);
    ork_log_set_sink(NULL, NULL);
    ft_close(&m);
    unsetenv("HF_HUB_CACHE");
    snprintf(want, sizeof want, "%s/models--black-forest-labs--FLUX.1-dev", hub);
    printf("\n    %s", g_nlines ? g_lines[0] : "(no error line)");
    CU_ASSERT_NOT_EQUAL(s, ORK_OK);
    CU_ASSERT_EQUAL(g_nlines, 1);
    CU_ASSERT(g_nlines && strstr(g_lines[0], want) != NULL);
    CU_ASSERT(g_nlines && strstr(g_lines[0], "HF_HUB_CACHE") != NULL);
    CU_ASSERT(g_nlines && strstr(g_lines[0], "not in the Hugging Face cache") != NULL);
    printf("\n  ");
}

/* refs/main that is a FIFO (no writer: a blocking read would never return):
 * refused before reading, one line. The alarm fails the test, not the
 * suite's clock, if it blocks. */
static void test_hub_ref_fifo(void) {
    char hub[512], ref[700];
    snprintf(hub, sizeof hub, "%s/fifohub", g_tmp);
    CU_ASSERT_FATAL(sh("mkdir -p '%s/models--org--fifo/refs' '%s/models--org--fifo/snapshots/abc'", hub, hub));
    snprintf(ref, sizeof ref, "%s/models--org--fifo/refs/main", hub);
    CU_ASSERT_EQUAL_FATAL(mkfifo(ref, 0644), 0);
    setenv("HF_HUB_CACHE", hub, 1);
    ork_log_set_sink(sink, NULL);
    g_nlines = 0;
    ft_model m;
    alarm(20);
    ork_status s = ft_open("org/fifo", NULL, &m);
    alarm(0);
    ork_log_set_sink(NULL, NULL);
    ft_close(&m);
    unsetenv("HF_HUB_CACHE");
    printf("\n    %s\n  ", g_nlines ? g_lines[0] : "(no error line)");
    CU_ASSERT_EQUAL(s, ORK_E_IO);
    CU_ASSERT_EQUAL(g_nlines, 1);
    CU_ASSERT(g_nlines && strstr(g_lines[0], ref) && strstr(g_lines[0], "not a regular file"));
}

/* A folder with two non-FLUX-named files: no guess, one line. */
static void test_ambiguous_folder(void) {
    char d[512];
    snprintf(d, sizeof d, "%s/amb", g_tmp);
    CU_ASSERT_FATAL(sh("mkdir -p '%s' && cp '%s' '%s/a.safetensors' && cp '%s' '%s/b.safetensors'", d, BFL1, d, BFL2, d));
    ork_log_set_sink(sink, NULL);
    g_nlines = 0;
    ft_model m;
    ork_status s = ft_open(d, NULL, &m);
    ork_log_set_sink(NULL, NULL);
    ft_close(&m);
    printf("\n    %s\n  ", g_nlines ? g_lines[0] : "(no error line)");
    CU_ASSERT_NOT_EQUAL(s, ORK_OK);
    CU_ASSERT_EQUAL(g_nlines, 1);
    CU_ASSERT(g_nlines && strstr(g_lines[0], d) && strstr(g_lines[0], "2 .safetensors files"));
}

static const ork_test_case cases[] = {
    {"diffusers folder and its transformer/ subfolder", test_diffusers_folder},
    {"sharded diffusers folder with index.json", test_diffusers_sharded},
    {"Hugging Face repo id in the local cache (3 cache roots)", test_hub_cache},
    {"repo id absent from the cache: one line naming where", test_hub_absent},
    {"folder with two unnamed files: an error, no guess", test_ambiguous_folder},
    {"refs/main that is a FIFO: refused before reading", test_hub_ref_fifo},
    {NULL, NULL},
};

ORK_TEST_MAIN("flux_paths", setup, teardown, cases)
