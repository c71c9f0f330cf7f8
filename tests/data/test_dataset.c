/* test_dataset.c — core/data/dataset: folder scan (filtering, order), captions
 * (caption_ext forms, default_caption, trimming), ai-toolkit trigger injection,
 * folder errors (status and one line), file fingerprints. */
#include "ork_test.h"

#include "data/dataset.h"
#include "util/log.h"

#include <sys/stat.h>
#include <fcntl.h> /* AT_FDCWD */
#include <time.h>

static int g_lines;
static char g_last[1024];
static void sink(ork_log_level l, const char *line, void *u) {
    (void)u;
    if (l >= ORK_LOG_WARN) g_lines++, snprintf(g_last, sizeof g_last, "%s", line);
}
static void capture(void) { g_lines = 0, g_last[0] = 0; }

static char g_dir[256];
static const char *tmp(const char *name) {
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", g_dir, name);
    return p[k];
}
static void put(const char *name, const char *text) {
    FILE *f = fopen(tmp(name), "wb"); /* no CU_ASSERT: also called from the suite init */
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static const ork_dataset_item *find(const ork_dataset *ds, const char *name) {
    for (size_t i = 0; i < ds->n; i++)
        if (strcmp(ds->items[i].name, name) == 0) return &ds->items[i];
    return NULL;
}

/* The scan never decodes, so image files hold stand-in bytes. */
static void make_set(void) {
    mkdir(tmp("set"), 0755);
    put("set/a.png", "png");
    put("set/a.txt", "  hello [trigger] world \n");
    put("set/B.JPG", "jpg");                 /* no caption */
    put("set/c.webp", "webp");
    put("set/c.txt", " \n\t");               /* empty after trimming */
    put("set/e.jpeg", "jpeg");
    put("set/e.txt", "\xEF\xBB\xBFohwx is here");
    put("set/f.PNG", "png");
    put("set/f.caption", "from the caption file");
    put("set/f.txt", "from the txt file");
    put("set/d.gif", "gif");                 /* unsupported */
    put("set/notes.txt", "not an image");
    put("set/.hidden.png", "hidden");
    put("set/noext", "x");
    mkdir(tmp("set/_latent_cache"), 0755);
    put("set/_latent_cache/a.png", "cache");
    mkdir(tmp("set/sub.png"), 0755);         /* a folder with an image name */
}

static void t_scan_and_captions(void) {
    ork_dataset ds;
    ork_dataset_opts o = {.folder_path = tmp("set"), .default_caption = "a photo", .trigger_word = "ohwx",
                          .caption_dropout_rate = 0.05f};
    CU_ASSERT_FATAL(ork_dataset_scan(&o, &ds) == ORK_OK);
    CU_ASSERT_EQUAL(ds.n, 5);
    const char *order[] = {"B.JPG", "a.png", "c.webp", "e.jpeg", "f.PNG"}; /* byte order */
    for (size_t i = 0; i < 5 && i < ds.n; i++) CU_ASSERT_STRING_EQUAL(ds.items[i].name, order[i]);
    CU_ASSERT_STRING_EQUAL(ds.caption_ext, ".txt");
    CU_ASSERT(ds.caption_dropout_rate == 0.05f);
    const ork_dataset_item *it;
    CU_ASSERT_FATAL((it = find(&ds, "a.png")) != NULL);
    CU_ASSERT_STRING_EQUAL(it->raw_caption, "hello [trigger] world");
    CU_ASSERT_STRING_EQUAL(it->caption, "hello ohwx world"); /* present now: not prepended */
    CU_ASSERT(it->has_caption_file);
    CU_ASSERT_STRING_EQUAL(it->path, tmp("set/a.png"));
    CU_ASSERT_FATAL((it = find(&ds, "B.JPG")) != NULL);
    CU_ASSERT(!it->has_caption_file);
    CU_ASSERT_STRING_EQUAL(it->caption, "ohwx a photo");
    CU_ASSERT_STRING_EQUAL(find(&ds, "c.webp")->caption, "ohwx a photo");
    CU_ASSERT_STRING_EQUAL(find(&ds, "e.jpeg")->caption, "ohwx is here");
    CU_ASSERT_STRING_EQUAL(find(&ds, "f.PNG")->caption, "ohwx from the txt file");
    char *drop;
    CU_ASSERT(ork_dataset_dropout_caption(&ds, &drop) == ORK_OK);
    CU_ASSERT_STRING_EQUAL(drop, "ohwx ");
    free(drop);
    ork_dataset_free(&ds);
    CU_ASSERT(ds.n == 0 && ds.items == NULL);
}

static void t_caption_ext_forms(void) {
    const char *forms[] = {"caption", ".caption"};
    for (int k = 0; k < 2; k++) {
        ork_dataset ds;
        ork_dataset_opts o = {.folder_path = tmp("set"), .caption_ext = forms[k]};
        CU_ASSERT_FATAL(ork_dataset_scan(&o, &ds) == ORK_OK);
        CU_ASSERT_STRING_EQUAL(ds.caption_ext, ".caption");
        CU_ASSERT_STRING_EQUAL(find(&ds, "f.PNG")->caption, "from the caption file");
        CU_ASSERT_STRING_EQUAL(find(&ds, "a.png")->caption, ""); /* no .caption, no default */
        CU_ASSERT(!find(&ds, "a.png")->has_caption_file);
        ork_dataset_free(&ds);
    }
}

static void t_no_trigger_no_default(void) {
    ork_dataset ds;
    ork_dataset_opts o = {.folder_path = tmp("set/")}; /* trailing slash */
    CU_ASSERT_FATAL(ork_dataset_scan(&o, &ds) == ORK_OK);
    CU_ASSERT_STRING_EQUAL(ds.folder, tmp("set"));
    CU_ASSERT_STRING_EQUAL(find(&ds, "a.png")->caption, "hello  world"); /* [trigger] -> "" */
    CU_ASSERT_STRING_EQUAL(find(&ds, "B.JPG")->caption, "");
    CU_ASSERT_STRING_EQUAL(find(&ds, "c.webp")->caption, "");
    char *drop;
    CU_ASSERT(ork_dataset_dropout_caption(&ds, &drop) == ORK_OK);
    CU_ASSERT_STRING_EQUAL(drop, "");
    free(drop);
    ork_dataset_free(&ds);
}

static void t_reg_set(void) {
    ork_dataset ds;
    ork_dataset_opts o = {.folder_path = tmp("set"), .trigger_word = "ohwx", .is_reg = 1};
    CU_ASSERT_FATAL(ork_dataset_scan(&o, &ds) == ORK_OK);
    CU_ASSERT_STRING_EQUAL(find(&ds, "a.png")->caption, "hello ohwx world");
    CU_ASSERT_STRING_EQUAL(find(&ds, "f.PNG")->caption, "from the txt file"); /* not prepended */
    CU_ASSERT_STRING_EQUAL(find(&ds, "B.JPG")->caption, "");
    ork_dataset_free(&ds);
}

static void t_inject_trigger(void) {
    static const struct { const char *cap, *trig; int add; const char *want; } c[] = {
        {"a [trigger] b [trigger]", "sks", 1, "a sks b sks"},
        {"[name] at the beach", "sks", 1, "sks at the beach"},
        {"a dog", "sks", 1, "sks a dog"},
        {"a sksdog", "sks", 1, "a sksdog"}, /* substring counts, as str.count */
        {"a SKS dog", "sks", 1, "sks a SKS dog"}, /* case-sensitive */
        {"a dog", "sks", 0, "a dog"},
        {"a dog", "  ", 1, "a dog"}, /* blank trigger: nothing added */
        {"a [trigger]", NULL, 1, "a "},
        {"", "sks", 1, "sks "},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        char *out;
        CU_ASSERT_FATAL(ork_caption_inject_trigger(c[i].cap, c[i].trig, c[i].add, &out) == ORK_OK);
        CU_ASSERT_STRING_EQUAL(out, c[i].want);
        free(out);
    }
}

static void expect_scan_fail(const char *folder, ork_status want) {
    ork_dataset ds;
    ork_dataset_opts o = {.folder_path = folder};
    capture();
    CU_ASSERT_EQUAL(ork_dataset_scan(&o, &ds), want);
    CU_ASSERT_EQUAL(g_lines, 1);
    if (folder) CU_ASSERT_PTR_NOT_NULL(strstr(g_last, folder));
    CU_ASSERT(ds.n == 0 && ds.items == NULL);
}

static void t_folder_errors(void) {
    mkdir(tmp("empty"), 0755);
    expect_scan_fail(tmp("empty"), ORK_E_CONFIG);
    mkdir(tmp("only_other"), 0755);
    put("only_other/readme.txt", "x");
    put("only_other/pic.gif", "x");
    put("only_other/.x.png", "x");
    expect_scan_fail(tmp("only_other"), ORK_E_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_last, "no images"));
    expect_scan_fail(tmp("missing"), ORK_E_IO);
    expect_scan_fail(tmp("set/a.png"), ORK_E_CONFIG); /* a file, not a folder */
    expect_scan_fail(NULL, ORK_E_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_last, "folder_path"));
}

static void t_fingerprint(void) {
    CU_ASSERT(ork_fnv1a64("", 0, ORK_FNV1A64_INIT) == 0xcbf29ce484222325ULL);
    CU_ASSERT(ork_fnv1a64("a", 1, ORK_FNV1A64_INIT) == 0xaf63dc4c8601ec8cULL);
    CU_ASSERT(ork_fnv1a64("foobar", 6, ORK_FNV1A64_INIT) == 0x85944171f73967e8ULL);

    /* 200 KiB: spans several read chunks */
    size_t n = 200 * 1024;
    char *big = malloc(n + 1);
    for (size_t i = 0; i < n; i++) big[i] = (char)('a' + i % 23);
    big[n] = 0;
    put("fp1.bin", big);
    put("fp2.bin", big);
    ork_file_fp a, b, s;
    CU_ASSERT_FATAL(ork_file_fingerprint(tmp("fp1.bin"), 1, &a) == ORK_OK);
    CU_ASSERT(a.size == n && a.hash == ork_fnv1a64(big, n, ORK_FNV1A64_INIT) && a.mtime_ns > 0);
    CU_ASSERT(ork_file_fingerprint(tmp("fp1.bin"), 0, &s) == ORK_OK);
    CU_ASSERT(s.size == a.size && s.mtime_ns == a.mtime_ns && s.hash == 0);
    /* a byte-identical copy with another mtime: same hash */
    struct timespec ts[2] = {{1000000, 0}, {1000000, 0}};
    CU_ASSERT(utimensat(AT_FDCWD, tmp("fp2.bin"), ts, 0) == 0);
    CU_ASSERT(ork_file_fingerprint(tmp("fp2.bin"), 1, &b) == ORK_OK);
    CU_ASSERT(b.hash == a.hash && b.mtime_ns != a.mtime_ns && b.size == a.size);
    /* one byte in the middle changed: same size, other hash */
    big[n / 2] ^= 1;
    put("fp2.bin", big);
    CU_ASSERT(ork_file_fingerprint(tmp("fp2.bin"), 1, &b) == ORK_OK);
    CU_ASSERT(b.size == a.size && b.hash != a.hash);
    free(big);
    capture();
    CU_ASSERT(ork_file_fingerprint(tmp("nope.bin"), 1, &b) == ORK_E_IO);
    CU_ASSERT(g_lines == 1);
}

static int init(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/ork_test_dataset_XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    ork_log_set_sink(sink, NULL);
    make_set();
    return 0;
}
static int clean(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : 1;
}

static const ork_test_case cases[] = {
    {"scan, order, captions, trigger", t_scan_and_captions},
    {"caption_ext with and without dot", t_caption_ext_forms},
    {"no trigger, no default_caption", t_no_trigger_no_default},
    {"is_reg: trigger not prepended", t_reg_set},
    {"inject_trigger_into_prompt cases", t_inject_trigger},
    {"folder errors: status and one line", t_folder_errors},
    {"fingerprint and FNV-1a", t_fingerprint},
    {NULL, NULL},
};
ORK_TEST_MAIN("data_dataset", init, clean, cases)
