/* test_nofamily.c — issue #30 point 1, "show it": moving FLUX knowledge out
 * of the core into the FLUX plugin's declarations (ABI 1.3: blocks, LoRA
 * targets and key format, schedule, text slots and prompt templates)
 * changed nothing a user sees. HEAD's orakul runs the configs of
 * tests/fixtures/nofamily/configs/ and must give:
 *  - plan: the planner's lines of `orakul plan` that the orakul of 91156af
 *    printed (the parent of 48a3376, the first ABI 1.3 block-declaration
 *    commit: the last core that knew FLUX by name), for the FLUX configs of
 *    configs/ at that commit (FLUX.1-dev, FLUX.2-dev, the FLUX.2-dev seed,
 *    the quickstart) and flux1-schnell, flux2-klein-4b: the model line, the
 *    stream plan (blocks streamed, VRAM and host budgets, PCIe bytes,
 *    predicted times, per-block MiB / GFLOP / LoRA parameters) and the
 *    sampler line (steps, time shift, guidance);
 *  - run: a 4-step CPU run of the tests/train tiny FLUX.1 and a tiny FLUX.2
 *    (pixel codec, zero text embeddings), sampling at step 4 with the
 *    model's default steps: the printed losses, every LoRA tensor (name,
 *    dtype, shape, bytes) and metadata entry, and the sample PNGs, as the
 *    orakul of 0b33069 gave them. 0b33069 ("schedule: timestep types as
 *    ai-toolkit draws them") fixed every training draw, so 91156af's runs
 *    cannot match any later commit; tools/nofamily_equiv.sh, which writes
 *    the fixtures, checks that 0b33069^ gives 91156af's plans and runs bit
 *    for bit (the declaration commits 48a3376, 52888ea, c95e11c ... before
 *    it changed nothing), then writes the runs from 0b33069, and this test
 *    shows that nothing after it (8e0e07e, e9879ba and the rest) changed a
 *    bit either.
 * Normalized away: the temp root (@ROOT@), the plugins' "loaded from" lines,
 * the resolved-configuration dump (every config key with its source: keys
 * were added since, for features unrelated to FLUX), the dataset line (the
 * temp folder), and the exit status of plan (the FLUX configs without a
 * vae_path are refused after the plan for want of a codec: #30 point 2).
 * Meant differences, removed from both sides by meant(): the sampler names
 * the shift by rule, not family; FLUX.2 LoRA files fold alpha (db494c6); the
 * plan's added "recompute:" line (9175750).
 * DECISIONS.md "#30 point 1 shown" says the same. With a C library other
 * than glibc (Windows) the LoRA tensors' byte fingerprints are not compared
 * (drop_bits says why and what still is).
 *
 * ORK_NOFAMILY_WRITE=1 makes it write the fixtures instead, with the orakul
 * named by ORK_NOFAMILY_EXE (ORK_NOFAMILY_ONLY=plan|run: those cases only);
 * ORK_NOFAMILY_DUMP=DIR keeps what a compare run gave, for diff. */
#include "ork_test.h"
#include "train_test_util.h"

#include "io/safetensors.h"

#include <jansson.h>

#define FIX ORK_SOURCE_DIR "/tests/fixtures/nofamily"

static const char *exe(void) {
    const char *e = getenv("ORK_NOFAMILY_EXE");
    return e && *e ? e : ORK_ORAKUL_EXE;
}
static int writing(void) {
    const char *w = getenv("ORK_NOFAMILY_WRITE");
    return w && !strcmp(w, "1");
}

/* The fixture template name with @ROOT@ replaced by root, written to out. */
static int write_cfg(const char *name, const char *root, const char *out) {
    char tp[1024];
    tt_fmt(tp, sizeof tp, "%s/configs/%s.yaml", FIX, name);
    char *t = tt_read_all(tp, NULL);
    if (!t) return -1;
    size_t cap = strlen(t) * 4 + 4096, o = 0;
    char *buf = malloc(cap);
    for (const char *p = t; *p && o + 1200 < cap;) {
        if (!strncmp(p, "@ROOT@", 6)) {
            o += (size_t)tt_fmt(buf + o, cap - o, "%s", root);
            p += 6;
        } else {
            buf[o++] = *p++;
        }
    }
    buf[o] = 0;
    int r = tt_write_all(out, buf);
    free(buf);
    free(t);
    return r;
}

/* `exe args...` with stdout/stderr into <log>.out / .err; the exit code. */
static int run_exe(const char *a1, const char *a2, const char *log, double timeout_s) {
    char o[1200], e[1200];
    tt_fmt(o, sizeof o, "%s.out", log);
    tt_fmt(e, sizeof e, "%s.err", log);
    const char *argv[] = {exe(), a1, a2, NULL};
    ork_proc *p;
    if (ork_proc_spawn(argv, o, e, &p) != ORK_OK) return -1;
    return tt_wait(p, timeout_s);
}

/* Append s to the growing text *t (malloc'd), with every occurrence of root
 * replaced by @ROOT@. */
static void put(char **t, size_t *n, const char *s, const char *root) {
    size_t rl = strlen(root);
    for (const char *p = s; *p;) {
        const char *r = rl ? strstr(p, root) : NULL;
        size_t k = r ? (size_t)(r - p) : strlen(p);
        *t = realloc(*t, *n + k + 8);
        memcpy(*t + *n, p, k);
        *n += k;
        p += k;
        if (r) {
            memcpy(*t + *n, "@ROOT@", 6);
            *n += 6;
            p += rl;
        }
    }
    (*t)[*n] = 0;
}

/* The planner's lines of a plan's stdout (before the resolved configuration)
 * and stderr's sampler lines, normalized. malloc'd. */
static char *plan_lines(const char *log, const char *root) {
    char o[1200], e[1200];
    tt_fmt(o, sizeof o, "%s.out", log);
    tt_fmt(e, sizeof e, "%s.err", log);
    char *out = tt_read_all(o, NULL), *err = tt_read_all(e, NULL), *t = calloc(1, 8);
    size_t n = 0;
    if (!out || !err) { free(out); free(err); free(t); return NULL; }
    /* "\r\n": orakul.exe's stdout and stderr are text mode on Windows */
    for (char *l = strtok(out, "\r\n"); l; l = strtok(NULL, "\r\n")) {
        if (l[0] == '#') break; /* "# <config>, resolved" */
        if (!strncmp(l, "dataset ", 8)) continue; /* the temp folder's name */
        put(&t, &n, l, root);
        put(&t, &n, "\n", root);
    }
    for (char *l = strtok(err, "\r\n"); l; l = strtok(NULL, "\r\n"))
        if (strstr(l, "orakul: sample:")) {
            put(&t, &n, l, root);
            put(&t, &n, "\n", root);
        }
    free(out);
    free(err);
    return t;
}

/* FNV-1a 64 of bytes: a fingerprint for the fixture (not a security hash). */
static uint64_t fnv(const uint8_t *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* The differences that are meant (DECISIONS.md "#30 point 1 shown"), removed
 * from both sides before comparing:
 *  - the sampler line names the time shift by its rule, no longer by family
 *    ("FLUX.1 time shift" = "resolution time shift", "FLUX.2 time shift" =
 *    "resolution and steps time shift": the same rule, the plugin declares it);
 *  - a FLUX.2 LoRA file holds no .alpha tensors and says so in
 *    orakul_lora_scale (db494c6: diffusers' reader refuses .alpha in that
 *    format, alpha/rank is folded into lora_A and lora_B): with alpha = rank
 *    (16) the factor is exactly 1, so the lora_A / lora_B bytes must be the
 *    same; an .alpha line is dropped only when it holds 16.0f;
 *  - the plan's "recompute:" line, which 9175750 added (#31 point 3: the
 *    estimate of keeping recorded forwards instead of recomputing them; a
 *    line of its own, family-neutral, the other lines unchanged);
 *  - the plan's "fp8 GEMMs:" line (#31: native FP8 GEMMs the default for an
 *    fp8 base; a line of its own, the other lines unchanged);
 *  - the VRAM line's ", EMA <x>" term (see no_ema). */
/* The VRAM line's ", EMA <x> MiB" (the plan counts the EMA's shadows since
 * 440ed01; the base did not): the term out, and out of the total (2 decimals
 * of GiB, as printed). */
static void no_ema(char *line, size_t n) {
    char *e = strncmp(line, "  VRAM: ", 8) ? NULL : strstr(line, ", EMA "), *eq = strrchr(line, '=');
    double v = 0, gib = 0;
    char unit[4] = "";
    if (!e || !eq || sscanf(e, ", EMA %lf %3[GMi]B", &v, unit) != 2 || sscanf(eq, "= %lf GiB", &gib) != 1) return;
    double mib = strcmp(unit, "Gi") ? v : v * 1024.0;
    char *end = strchr(e + 2, ',');
    if (!end) return;
    memmove(e, end, strlen(end) + 1);
    eq = strrchr(line, '=');
    tt_fmt(eq, n - (size_t)(eq - line), "= %.2f GiB", gib - mib / 1024.0);
}

static char *meant(const char *text) {
    static const char *const words[][2] = {{"(FLUX.1 time shift)", "(resolution time shift)"},
                                           {"(FLUX.2 time shift)", "(resolution and steps time shift)"}};
    float sixteen = 16.0f;
    char alpha16[64];
    tt_fmt(alpha16, sizeof alpha16, ".alpha F32 [] 4 %016llx", (unsigned long long)fnv((const uint8_t *)&sixteen, 4));
    char *t = calloc(1, 8), *copy = strdup(text);
    size_t n = 0;
    for (char *l = copy, *next; l && *l; l = next) {
        next = strchr(l, '\n');
        if (next) *next++ = 0;
        if (!strncmp(l, "tensor ", 7) && strstr(l, alpha16) && !strcmp(strstr(l, alpha16), alpha16)) continue;
        if (!strncmp(l, "meta orakul_lora_scale ", 23) && strstr(l, "= 1 folded")) continue;
        if (!strncmp(l, "  recompute: ", 13)) continue; /* added by 9175750 (#31), after the others */
        if (!strncmp(l, "fp8 GEMMs: ", 11)) continue;     /* the fp8 GEMM path's own line (#31), fp8 bases only */
        char line[2048];
        tt_fmt(line, sizeof line, "%s", l);
        no_ema(line, sizeof line);
        for (size_t w = 0; w < 2; w++) {
            char *at = strstr(line, words[w][0]);
            if (at) {
                char rest[2048];
                tt_fmt(rest, sizeof rest, "%s", at + strlen(words[w][0]));
                tt_fmt(at, sizeof line - (size_t)(at - line), "%s%s", words[w][1], rest);
            }
        }
        put(&t, &n, line, "");
        put(&t, &n, "\n", "");
    }
    free(copy);
    return t;
}

/* Not glibc (ORK_TEST_GLIBC_BITS: Windows): the fingerprint of each LoRA
 * tensor's bytes, cut from its "tensor" line in place (t is modified). The
 * fixture's bits came from glibc's expf / tanhf; another C library rounds a
 * few of them the other way and four training steps carry that into every
 * LoRA value's last bits. What still compares exactly there: every tensor's
 * name, dtype, shape and size, the metadata, the losses as printed (7
 * digits) and the sample PNGs' bytes (docs/DECISIONS.md, "Windows: libm's
 * last bit"). */
static void drop_bits(char *t) {
    for (char *l = t; l && *l;) {
        char *nl = strchr(l, '\n'), *sp = NULL;
        size_t len = nl ? (size_t)(nl - l) : strlen(l);
        for (char *c = l; c < l + len; c++)
            if (*c == ' ') sp = c;
        if (!strncmp(l, "tensor ", 7) && sp && l + len - sp == 17) { /* " %016llx" */
            memmove(sp, l + len, strlen(l + len) + 1);
            nl = strchr(sp, '\n');
        }
        l = nl ? nl + 1 : NULL;
    }
}

/* Compare got with the fixture <name>.<what>.txt, or write it. 1 when equal. */
static int same_as_fixture(const char *name, const char *what, const char *got) {
    char p[1024];
    tt_fmt(p, sizeof p, "%s/expected/%s.%s.txt", FIX, name, what);
    if (writing()) return tt_write_all(p, got) == 0;
    const char *dump = getenv("ORK_NOFAMILY_DUMP"); /* a folder: what this run gave, for diff */
    if (dump && *dump) {
        char d[1200];
        tt_fmt(d, sizeof d, "%s/%s.%s.txt", dump, name, what);
        tt_write_all(d, got);
    }
    char *raw = tt_read_all(p, NULL), *want = raw ? meant(raw) : NULL, *g = meant(got);
    free(raw);
    if (!ORK_TEST_GLIBC_BITS && !strcmp(what, "lora") && want) {
        drop_bits(want);
        drop_bits(g);
    }
    int same = want && !strcmp(want, g);
    got = g;
    if (!same && want) { /* the first differing line */
        const char *a = want, *b = got;
        int line = 1;
        while (*a && *a == *b) { line += *a == '\n'; a++; b++; }
        while (a > want && a[-1] != '\n') { a--; b--; } /* the whole line */
        const char *ae = strchr(a, '\n'), *be = strchr(b, '\n');
        printf("\n  %s %s: line %d differs\n    base: %.*s\n    HEAD: %.*s\n", name, what, line,
               ae ? (int)(ae - a) : (int)strlen(a), a, be ? (int)(be - b) : (int)strlen(b), b);
    }
    if (!want) printf("\n  %s: missing (tools/nofamily_equiv.sh writes it)\n", p);
    free(want);
    free(g);
    return same;
}

static int setup(const char *tag, char *root, size_t n) {
    if (tt_setup(tag, root, n) != 0) return -1;
    char out[1200];
    tt_fmt(out, sizeof out, "%s/out", root);
    return mkdir(out, 0755);
}

/* ORK_NOFAMILY_ONLY=plan|run: the other cases pass without running (the
 * fixture script writes the runs from another commit than the plans). */
static int skipped(const char *kind) {
    const char *o = getenv("ORK_NOFAMILY_ONLY");
    return o && *o && strcmp(o, kind) != 0;
}

static void plan_case(const char *name) {
    if (skipped("plan")) return;
    char root[1024], cfg[1100], log[1100];
    CU_ASSERT_FATAL(setup("nofam_plan", root, sizeof root) == 0);
    tt_fmt(cfg, sizeof cfg, "%s/%s.yaml", root, name);
    tt_fmt(log, sizeof log, "%s/plan", root);
    CU_ASSERT_FATAL(write_cfg(name, root, cfg) == 0);
    /* the exit status is not compared: the FLUX configs without a vae_path
     * are refused after the plan (no codec gives their latent channels), a
     * check issue #30 point 2 reworks, not a planner line */
    /* the fixtures were planned for an H200, as a build without CUDA does; a
     * CUDA build on a machine without a GPU would plan the quickstart for the CPU */
    CU_ASSERT_FATAL(setenv("ORAKUL_PLAN_DEVICE", "h200", 1) == 0);
    CU_ASSERT(run_exe("plan", cfg, log, 120) >= 0);
    unsetenv("ORAKUL_PLAN_DEVICE");
    char *lines = plan_lines(log, root);
    CU_ASSERT_PTR_NOT_NULL_FATAL(lines);
    CU_ASSERT(strstr(lines, "stream plan:") != NULL);
    CU_ASSERT(same_as_fixture(name, "plan", lines));
    free(lines);
    tt_rm_rf(root);
}

static void test_plan_flux1_dev(void) { plan_case("train_lora_flux_24gb"); }
static void test_plan_flux2_dev(void) { plan_case("train_lora_flux2_24gb"); }
static void test_plan_seed(void) { plan_case("seed_flux2_dev_r1280_24gb"); }
static void test_plan_quickstart(void) { plan_case("quickstart"); }
static void test_plan_schnell(void) { plan_case("plan_flux1_schnell"); }
static void test_plan_klein(void) { plan_case("plan_flux2_klein_4b"); }

/* A LoRA file as text: every tensor (name dtype shape bytes fnv) in file
 * order, then every metadata entry sorted by key. */
static char *lora_text(const char *path) {
    ork_st_file *f;
    if (ork_st_open(path, &f) != ORK_OK) return NULL;
    char *t = calloc(1, 8);
    size_t n = 0;
    char line[1024];
    for (size_t i = 0;; i++) {
        const ork_st_tensor *x = ork_st_at(f, i);
        if (!x) break;
        int k = tt_fmt(line, sizeof line, "tensor %s %s [", x->name, x->dtype_name);
        for (int d = 0; d < x->ndim; d++) k += tt_fmt(line + k, sizeof line - k, "%s%lld", d ? "," : "", (long long)x->shape[d]);
        tt_fmt(line + k, sizeof line - k, "] %llu %016llx\n", (unsigned long long)x->nbytes,
               (unsigned long long)fnv(x->data, x->nbytes));
        put(&t, &n, line, "");
    }
    ork_st_close(f);
    /* metadata, from the header itself (every key) */
    size_t len = 0;
    char *b = tt_read_all(path, &len);
    uint64_t hl = 0;
    for (int i = 0; b && len >= 8 && i < 8; i++) hl |= (uint64_t)(uint8_t)b[i] << (8 * i);
    json_t *h = b && hl + 8 <= len ? json_loadb(b + 8, hl, 0, NULL) : NULL;
    json_t *md = h ? json_object_get(h, "__metadata__") : NULL;
    const char *key;
    json_t *v;
    char keys[64][128];
    int nk = 0;
    json_object_foreach(md, key, v) if (nk < 64) tt_fmt(keys[nk++], sizeof keys[0], "%s", key);
    qsort(keys, (size_t)nk, sizeof keys[0], (int (*)(const void *, const void *))strcmp);
    for (int i = 0; i < nk; i++) {
        json_t *s = json_object_get(md, keys[i]);
        tt_fmt(line, sizeof line, "meta %s %s\n", keys[i], json_is_string(s) ? json_string_value(s) : "?");
        put(&t, &n, line, "");
    }
    json_decref(h);
    free(b);
    return t;
}

static void run_case(const char *name) {
    if (skipped("run")) return;
    char root[1024], cfg[1100], log[1100], p[1400];
    CU_ASSERT_FATAL(setup("nofam_run", root, sizeof root) == 0);
    tt_fmt(cfg, sizeof cfg, "%s/%s.yaml", root, name);
    tt_fmt(log, sizeof log, "%s/run", root);
    CU_ASSERT_FATAL(write_cfg(name, root, cfg) == 0);
    int rc = run_exe("run", cfg, log, 240);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    /* the losses as printed */
    tt_fmt(p, sizeof p, "%s.out", log);
    static tt_losses L;
    CU_ASSERT(tt_parse_losses(p, &L) == 4);
    char losses[4096] = "";
    size_t k = 0;
    for (int i = 0; i < L.n; i++) k += (size_t)tt_fmt(losses + k, sizeof losses - k, "step %d loss %s\n", L.step[i], L.text[i]);
    CU_ASSERT(same_as_fixture(name, "losses", losses));
    /* the LoRA file */
    tt_fmt(p, sizeof p, "%s/out/nofamily/nofamily_000000004.safetensors", root);
    char *lt = lora_text(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(lt);
    CU_ASSERT(strstr(lt, "tensor ") != NULL);
    CU_ASSERT(same_as_fixture(name, "lora", lt));
    free(lt);
    /* the samples at step 4 */
    char st[2048] = "";
    k = 0;
    for (int i = 0; i < 2; i++) {
        char sp[1400];
        tt_fmt(sp, sizeof sp, "%s/out/nofamily/samples/nofamily_000000004_%d.png", root, i);
        size_t len = 0;
        char *b = tt_read_all(sp, &len);
        CU_ASSERT_PTR_NOT_NULL(b);
        k += (size_t)tt_fmt(st + k, sizeof st - k, "sample %d %zu %016llx\n", i, len,
                            (unsigned long long)(b ? fnv((const uint8_t *)b, len) : 0));
        free(b);
    }
    CU_ASSERT(same_as_fixture(name, "samples", st));
    tt_rm_rf(root);
}

static void test_run_flux1(void) { run_case("tiny_flux1"); }
static void test_run_flux2(void) { run_case("tiny_flux2"); }

static const ork_test_case cases[] = {
    {"plan: FLUX.1-dev (configs/train_lora_flux_24gb.yaml)", test_plan_flux1_dev},
    {"plan: FLUX.2-dev (configs/train_lora_flux2_24gb.yaml)", test_plan_flux2_dev},
    {"plan: the FLUX.2-dev seed (configs/seed_flux2_dev_r1280_24gb.yaml)", test_plan_seed},
    {"plan: the quickstart (configs/quickstart.yaml)", test_plan_quickstart},
    {"plan: flux1-schnell", test_plan_schnell},
    {"plan: flux2-klein-4b", test_plan_klein},
    {"run: tiny FLUX.1, 4 steps: losses, LoRA tensors, samples", test_run_flux1},
    {"run: tiny FLUX.2, 4 steps: losses, LoRA tensors, samples", test_run_flux2},
    {NULL, NULL},
};

ORK_TEST_MAIN("nofamily", NULL, NULL, cases)
