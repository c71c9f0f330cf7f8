/* tests/inputs/test_bounded_reads.c — every reader of an input file refuses,
 * before reading, what is not a regular file (a FIFO with no writer would
 * block forever, /dev/zero never ends) and a file over its size limit: one
 * error line naming the file, status ORK_E_IO (not a file) or ORK_E_FORMAT
 * (too large), which the CLI turns into exit 2. Readers covered: the config
 * (util/rfile.h under config/config.c), captions and images of a dataset scan,
 * the image loader and the file fingerprint (data/), a safetensors file and
 * the index.json of a sharded checkpoint (io/), metrics.jsonl read back on
 * resume (train/metrics.c), a plugin before dlopen (plugin/loader.c).
 *
 * Each case runs in a child process with a 20 s alarm and a 2 GiB address
 * space: a reader that blocks or reads without end fails the case instead of
 * hanging the suite or eating the machine's memory. */
#include "config/config.h"
#include "data/dataset.h"
#include "data/image.h"
#include "io/safetensors.h"
#include "plugin/registry.h"
#include "train/metrics.h"
#include "util/log.h"
#include "util/rfile.h"
#include "ork_test.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

static char g_tmp[PATH_MAX];

/* ---- the child's log: error lines counted, the first one kept ---- */
static int g_err;
static char g_line[2048];
static void sink(ork_log_level lvl, const char *line, void *user) {
    (void)user;
    if (lvl == ORK_LOG_ERROR && !g_err++) snprintf(g_line, sizeof g_line, "%s", line);
}

static const char *tmp(const char *name) {
    static char p[4][PATH_MAX + 64];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", g_tmp, name);
    return p[k];
}

typedef ork_status (*reader_fn)(const char *path);

/* Run fn(path) in a child: 0 when it returned `want` with exactly one error
 * line holding `text`; otherwise what went wrong is printed and 1 returned
 * (a child killed by the alarm or the memory limit counts as wrong). */
static int refused(reader_fn fn, const char *path, ork_status want, const char *text) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        struct rlimit rl = {(rlim_t)2 << 30, (rlim_t)2 << 30};
        setrlimit(RLIMIT_AS, &rl);
        alarm(20);
        ork_log_set_sink(sink, NULL);
        ork_status s = fn(path);
        int ok = s == want && g_err == 1 && strstr(g_line, text) != NULL;
        if (!ok)
            printf("\n  %s: status %d (want %d), %d error lines, first: %s\n  (wanted \"%s\")\n", path, (int)s,
                   (int)want, g_err, g_line, text);
        fflush(stdout);
        _exit(ok ? 0 : 1);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid) return 1;
    if (WIFSIGNALED(st)) {
        printf("\n  %s: the reader was killed by signal %d (%s)\n", path, WTERMSIG(st),
               WTERMSIG(st) == SIGALRM ? "blocked for 20 s" : "ran out of memory or crashed");
        return 1;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

/* ---- the readers, as reader_fn ---- */
static ork_status r_config(const char *path) {
    ork_config *c = NULL;
    ork_status s = ork_config_load(path, &c);
    ork_config_free(c);
    return s;
}
static ork_status r_dataset(const char *folder) {
    ork_dataset ds;
    ork_dataset_opts o = {.folder_path = folder, .caption_ext = ".txt"};
    ork_status s = ork_dataset_scan(&o, &ds);
    if (s == ORK_OK) ork_dataset_free(&ds);
    return s;
}
static ork_status r_image(const char *path) {
    ork_image im;
    ork_status s = ork_image_load(path, &im);
    if (s == ORK_OK) ork_image_free(&im);
    return s;
}
static ork_status r_fingerprint(const char *path) {
    ork_file_fp fp;
    return ork_file_fingerprint(path, 1, &fp);
}
static ork_status r_st(const char *path) {
    ork_st_file *f = NULL;
    ork_status s = ork_st_open(path, &f);
    ork_st_close(f);
    return s;
}
static ork_status r_st_set(const char *path) {
    ork_st_set *s = NULL;
    ork_status st = ork_st_set_open(path, &s);
    ork_st_set_close(s);
    return st;
}

static ork_status r_metrics(const char *path) {
    ork_metrics_row *rows = NULL;
    size_t n = 0;
    ork_status s = ork_metrics_read(path, 1, &rows, &n);
    free(rows);
    return s;
}

static ork_status r_plugin(const char *path) {
    ork_registry *r = NULL;
    ork_status s = ork_registry_create(NULL, &r);
    if (s == ORK_OK) s = ork_registry_add_file(r, path);
    ork_registry_destroy(r);
    return s;
}

/* ---- fixtures ---- */
static int fifo(const char *path) { return mkfifo(path, 0644); }
/* A sparse file of n bytes (NULs): its size is what the readers check first. */
static int sparse(const char *path, off_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return -1;
    int r = ftruncate(fd, n);
    close(fd);
    return r;
}
static int copy_photo(const char *dst) {
    char cmd[3 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "cp '%s/assets/photos/coffee.png' '%s'", ORK_SOURCE_DIR, dst);
    return system(cmd);
}

static int setup(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/orakul-reads-XXXXXX");
    return mkdtemp(g_tmp) ? 0 : 1;
}
static int teardown(void) {
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    return system(cmd) == 0 ? 0 : 1;
}

/* ---- cases ---- */
static void test_config(void) {
    CU_ASSERT_EQUAL(refused(r_config, "/dev/zero", ORK_E_IO, "/dev/zero: the config is a character device, not a regular file"), 0);
    CU_ASSERT_EQUAL_FATAL(fifo(tmp("c.yaml")), 0);
    CU_ASSERT_EQUAL(refused(r_config, tmp("c.yaml"), ORK_E_IO, "c.yaml: the config is a FIFO, not a regular file"), 0);
    CU_ASSERT_EQUAL(refused(r_config, g_tmp, ORK_E_IO, "the config is a folder, not a regular file"), 0);
    CU_ASSERT_EQUAL_FATAL(sparse(tmp("big.yaml"), (off_t)ORK_CONFIG_MAX_BYTES + 1), 0);
    CU_ASSERT_EQUAL(refused(r_config, tmp("big.yaml"), ORK_E_FORMAT, "big.yaml: the config is 4194305 bytes, over the 4 MiB limit"), 0);
    /* at the limit: read, then refused for what it holds (NULs are no YAML), not for its size */
    CU_ASSERT_EQUAL_FATAL(sparse(tmp("edge.yaml"), (off_t)ORK_CONFIG_MAX_BYTES), 0);
    CU_ASSERT_EQUAL(refused(r_config, tmp("edge.yaml"), ORK_E_FORMAT, "edge.yaml:1:1: YAML syntax error"), 0);
}

static void test_dataset(void) {
    /* a caption that is a FIFO */
    CU_ASSERT_EQUAL_FATAL(mkdir(tmp("d1"), 0755), 0);
    CU_ASSERT_EQUAL_FATAL(copy_photo(tmp("d1/a.png")), 0);
    CU_ASSERT_EQUAL_FATAL(fifo(tmp("d1/a.txt")), 0);
    CU_ASSERT_EQUAL(refused(r_dataset, tmp("d1"), ORK_E_IO, "a.txt: the caption is a FIFO, not a regular file"), 0);
    /* a caption over 1 MiB */
    CU_ASSERT_EQUAL_FATAL(mkdir(tmp("d2"), 0755), 0);
    CU_ASSERT_EQUAL_FATAL(copy_photo(tmp("d2/a.png")), 0);
    CU_ASSERT_EQUAL_FATAL(sparse(tmp("d2/a.txt"), (off_t)ORK_CAPTION_MAX_BYTES + 1), 0);
    CU_ASSERT_EQUAL(refused(r_dataset, tmp("d2"), ORK_E_FORMAT, "a.txt: the caption is 1048577 bytes, over the 1 MiB limit"), 0);
    /* an "image" that is a FIFO: refused by the scan, not skipped without a word */
    CU_ASSERT_EQUAL_FATAL(mkdir(tmp("d3"), 0755), 0);
    CU_ASSERT_EQUAL_FATAL(copy_photo(tmp("d3/a.png")), 0);
    CU_ASSERT_EQUAL_FATAL(fifo(tmp("d3/b.png")), 0);
    CU_ASSERT_EQUAL(refused(r_dataset, tmp("d3"), ORK_E_IO, "b.png is a FIFO, not a regular file"), 0);
}

static void test_image(void) {
    CU_ASSERT_EQUAL_FATAL(fifo(tmp("i.png")), 0);
    CU_ASSERT_EQUAL(refused(r_image, tmp("i.png"), ORK_E_IO, "i.png: the image is a FIFO, not a regular file"), 0);
    CU_ASSERT_EQUAL(refused(r_image, "/dev/zero", ORK_E_IO, "/dev/zero: the image is a character device"), 0);
    CU_ASSERT_EQUAL(refused(r_fingerprint, tmp("i.png"), ORK_E_IO, "i.png: the file is a FIFO, not a regular file"), 0);
    CU_ASSERT_EQUAL(refused(r_fingerprint, "/dev/zero", ORK_E_IO, "/dev/zero: the file is a character device"), 0);
}

static void test_safetensors(void) {
    CU_ASSERT_EQUAL_FATAL(fifo(tmp("w.safetensors")), 0);
    CU_ASSERT_EQUAL(refused(r_st, tmp("w.safetensors"), ORK_E_IO, "w.safetensors: a FIFO, not a regular file"), 0);
    CU_ASSERT_EQUAL(refused(r_st_set, tmp("w.safetensors"), ORK_E_IO, "a FIFO, not a regular file"), 0);
    /* the index.json of a sharded checkpoint */
    CU_ASSERT_EQUAL_FATAL(fifo(tmp("m.safetensors.index.json")), 0);
    CU_ASSERT_EQUAL(refused(r_st_set, tmp("m.safetensors.index.json"), ORK_E_IO,
                            "m.safetensors.index.json: the checkpoint index is a FIFO, not a regular file"), 0);
    CU_ASSERT_EQUAL_FATAL(symlink("/dev/zero", tmp("z.safetensors.index.json")), 0);
    CU_ASSERT_EQUAL(refused(r_st_set, tmp("z.safetensors.index.json"), ORK_E_IO,
                            "the checkpoint index is a character device, not a regular file"), 0);
    CU_ASSERT_EQUAL_FATAL(sparse(tmp("big.safetensors.index.json"), (off_t)ORK_INDEX_MAX_BYTES + 1), 0);
    CU_ASSERT_EQUAL(refused(r_st_set, tmp("big.safetensors.index.json"), ORK_E_FORMAT,
                            "the checkpoint index is 67108865 bytes, over the 64 MiB limit"), 0);
    /* a folder whose index is a FIFO: found by the folder scan, refused the same way */
    CU_ASSERT_EQUAL_FATAL(mkdir(tmp("ckpt"), 0755), 0);
    CU_ASSERT_EQUAL_FATAL(fifo(tmp("ckpt/model.safetensors.index.json")), 0);
    CU_ASSERT_EQUAL(refused(r_st_set, tmp("ckpt"), ORK_E_IO, "the checkpoint index is a FIFO"), 0);
}

/* metrics.jsonl, read back when a run resumes */
static void test_metrics(void) {
    CU_ASSERT_EQUAL_FATAL(fifo(tmp("metrics.jsonl")), 0);
    CU_ASSERT_EQUAL(refused(r_metrics, tmp("metrics.jsonl"), ORK_E_IO, "metrics.jsonl: the metrics log is a FIFO"), 0);
}

/* a plugin file: dlopen would block on a FIFO */
static void test_plugin(void) {
    CU_ASSERT_EQUAL_FATAL(fifo(tmp("orakul-fifo.so")), 0);
    CU_ASSERT_EQUAL(refused(r_plugin, tmp("orakul-fifo.so"), ORK_E_IO, "orakul-fifo.so: cannot load (core ABI"), 0);
    CU_ASSERT_EQUAL(refused(r_plugin, tmp("orakul-fifo.so"), ORK_E_IO, "a FIFO, not a regular file"), 0);
}

/* ork_rfile_read itself: the bytes of a regular file, NUL-terminated; a
 * missing file with ORK_RFILE_MISSING_OK is no error and no line. */
static void test_rfile(void) {
    FILE *f = fopen(tmp("r.txt"), "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("hello", f);
    fclose(f);
    char *b = NULL;
    size_t n = 0;
    g_err = 0;
    ork_log_set_sink(sink, NULL);
    CU_ASSERT_EQUAL(ork_rfile_read(tmp("r.txt"), "text", 5, 0, &b, &n), ORK_OK);
    CU_ASSERT_EQUAL(n, 5);
    CU_ASSERT(b && !strcmp(b, "hello"));
    free(b);
    CU_ASSERT_EQUAL(ork_rfile_read(tmp("r.txt"), "text", 4, ORK_RFILE_QUIET, &b, &n), ORK_E_FORMAT);
    CU_ASSERT_PTR_NULL(b);
    CU_ASSERT_EQUAL(ork_rfile_read(tmp("none.txt"), "text", 4, ORK_RFILE_MISSING_OK, &b, &n), ORK_OK);
    CU_ASSERT_PTR_NULL(b);
    CU_ASSERT_EQUAL(g_err, 0);
    CU_ASSERT_EQUAL(ork_rfile_read(tmp("none.txt"), "text", 4, 0, &b, &n), ORK_E_IO);
    CU_ASSERT_EQUAL(g_err, 1);
    CU_ASSERT(strstr(g_line, "none.txt: cannot open the text: No such file") != NULL);
    ork_log_set_sink(NULL, NULL);
}

static const ork_test_case cases[] = {
    {"config: /dev/zero, a FIFO, a folder, over 4 MiB", test_config},
    {"dataset: caption FIFO, caption over 1 MiB, image FIFO", test_dataset},
    {"image load and fingerprint: FIFO, /dev/zero", test_image},
    {"safetensors file and index.json: FIFO, /dev/zero, over 64 MiB", test_safetensors},
    {"metrics.jsonl: FIFO", test_metrics},
    {"plugin: FIFO", test_plugin},
    {"ork_rfile_read", test_rfile},
    {NULL, NULL},
};
ORK_TEST_MAIN("bounded_reads", setup, teardown, cases)
