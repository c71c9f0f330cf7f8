/* test_train_integrity.c — what `orakul run` reads back is verified, and what
 * it writes is finite (issue #26 points 2, 3 and 5), through the built binary
 * on the quickstart's tiny model (tests/train/configs/tiny.yaml):
 *  - state: a NaN in a LoRA tensor or an optimizer moment (resident or
 *    streamed per block), a flipped data
 *    byte, and bad metadata (step "ten", -5, past train.steps; a negative
 *    data_epoch) are each refused with exit 2 and one line naming the file and
 *    the tensor or field; the LoRA files already written stay untouched;
 *  - latent cache: a NaN, a flipped byte or a same-size reshape is re-encoded
 *    with a warning (no `error:` line) and trains exactly as a clean cache;
 *  - text cache: a NaN in <image>.te.safetensors is refused (exit 2);
 *  - LoRA files of the job without a state are refused (exit 2) unless
 *    --overwrite; a changed lr says so in one warning before resuming;
 *  - a LoRA that would hold Inf (F32 1e30 saved as F16) is not written and
 *    the older finite ones are not pruned (exit 1); a run whose every step is
 *    skipped exits 1 saying why; 20 skipped steps in a row stop the run.
 * Damaged files are written through the library's writer with valid
 * checksums (so the check under test, not the checksum, must catch them),
 * except the flipped-byte cases. */
#include "train_test_util.h"

#include "io/safetensors.h"
#include "io/st_check.h"

/* ---- running ------------------------------------------------------------- */

/* `orakul run [--overwrite] cfg`: exit code; logs at <log>.out / .err. */
static int run(const char *cfg, const char *log, int overwrite) {
    const char *args[] = {"run", overwrite ? "--overwrite" : cfg, overwrite ? cfg : NULL, NULL};
    return tt_orakul(args, log, 200);
}

/* Lines of <log>.err holding needle. */
static int err_lines(const char *log, const char *needle) {
    char e[1200];
    tt_fmt(e, sizeof e, "%s.err", log);
    char *t = tt_read_all(e, NULL);
    int n = 0;
    for (char *line = t ? strtok(t, "\n") : NULL; line; line = strtok(NULL, "\n")) n += strstr(line, needle) != NULL;
    free(t);
    return n;
}

static void show_err(const char *log) {
    char e[1200];
    tt_fmt(e, sizeof e, "%s.err", log);
    char *t = tt_read_all(e, NULL);
    printf("\n  --- %s.err ---\n%s", log, t ? t : "(none)\n");
    free(t);
}

/* One line on stderr, an error, holding every needle (NULL-terminated). */
static int one_error_with(const char *log, const char *const *needles) {
    char e[1200];
    tt_fmt(e, sizeof e, "%s.err", log);
    char *t = tt_read_all(e, NULL);
    int errors = 0, hit = 0;
    for (char *line = t ? strtok(t, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        if (!strstr(line, "error:")) continue;
        errors++;
        int all = 1;
        for (int i = 0; needles[i]; i++) all &= strstr(line, needles[i]) != NULL;
        hit |= all;
    }
    free(t);
    if (errors != 1 || !hit) show_err(log);
    return errors == 1 && hit;
}

/* ---- one scenario's folders ------------------------------------------------ */

typedef struct sc {
    char root[1024], data[1100], out[1100], dir[1200], cfg[1100], log[1100], state[1400];
} sc;

static int sc_setup(sc *s, const char *tag) {
    if (tt_setup(tag, s->root, sizeof s->root) != 0) return -1;
    tt_fmt(s->data, sizeof s->data, "%s/data", s->root);
    tt_fmt(s->out, sizeof s->out, "%s/out", s->root);
    tt_fmt(s->dir, sizeof s->dir, "%s/quickstart", s->out);
    tt_fmt(s->cfg, sizeof s->cfg, "%s/train.yaml", s->root);
    tt_fmt(s->log, sizeof s->log, "%s/run", s->root);
    tt_fmt(s->state, sizeof s->state, "%s/quickstart_state.safetensors", s->dir);
    return 0;
}

static int sc_config(sc *s, int steps, int save_every, int keep, const char *dtype) {
    tt_cfg c = tt_cfg_default(s->out, s->data);
    c.steps = steps;
    c.save_every = save_every;
    c.keep = keep;
    c.dtype = dtype;
    return tt_write_config(s->cfg, &c);
}

static void sc_lora(const sc *s, int step, char *buf, size_t n) {
    tt_fmt(buf, n, "%s/quickstart_%09d.safetensors", s->dir, step);
}

/* ---- rewriting a safetensors file through the library ---------------------- */

/* Called per tensor with a private copy of its data; may change data and shape
 * (same byte count). */
typedef void (*mutate_fn)(void *ctx, const char *name, ork_dtype dt, int ndim, int64_t *shape, void *data,
                          uint64_t nbytes);

/* Rewrite path in place: every tensor (mutated), every metadata entry but the
 * checksums (meta_key set to meta_val when given), with fresh checksums
 * (checksum = 1) or none. 0 on success. */
static int st_rewrite(const char *path, mutate_fn fn, void *ctx, const char *meta_key, const char *meta_val,
                      int checksum) {
    ork_st_file *f;
    if (ork_st_open(path, &f) != ORK_OK) return -1;
    ork_st_writer *w;
    if (ork_st_writer_new(&w) != ORK_OK) { ork_st_close(f); return -1; }
    ork_st_writer_checksum(w, checksum);
    size_t n = ork_st_count(f);
    void **bufs = calloc(n + 1, sizeof *bufs);
    int ok = bufs != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        const ork_st_tensor *t = ork_st_at(f, i);
        int64_t shape[ORK_ST_MAX_NDIM];
        memcpy(shape, t->shape, sizeof shape);
        bufs[i] = malloc(t->nbytes ? t->nbytes : 1);
        ok = bufs[i] != NULL;
        if (!ok) break;
        memcpy(bufs[i], t->data, t->nbytes);
        if (fn) fn(ctx, t->name, t->dtype, t->ndim, shape, bufs[i], t->nbytes);
        ok = ork_st_writer_add(w, t->name, t->dtype, t->ndim, shape, bufs[i], t->nbytes) == ORK_OK;
    }
    const char *keys[256];
    size_t nk = ork_st_meta_keys(f, keys, 256);
    for (size_t i = 0; ok && i < nk && i < 256; i++) {
        if (!strcmp(keys[i], ORK_ST_CRC_KEY) || !strcmp(keys[i], ORK_ST_HEADER_CRC_KEY)) continue;
        const char *v = meta_key && !strcmp(keys[i], meta_key) ? meta_val : ork_st_meta(f, keys[i]);
        ok = ork_st_writer_meta(w, keys[i], v) == ORK_OK;
    }
    char tmp[1400];
    tt_fmt(tmp, sizeof tmp, "%s.rewrite", path);
    ok = ok && ork_st_writer_commit(w, tmp) == ORK_OK;
    ork_st_writer_free(w);
    for (size_t i = 0; bufs && i < n; i++) free(bufs[i]);
    free(bufs);
    ork_st_close(f);
    return ok && ork_path_replace(tmp, path) == ORK_OK ? 0 : -1; /* rename(2) refuses an existing path on Windows */
}

/* Flip one bit of the byte at `from_end` bytes before the end of the file. */
static int flip_byte(const char *path, long from_end) {
    FILE *fp = fopen(path, "r+b");
    if (!fp) return -1;
    int ok = fseek(fp, -from_end, SEEK_END) == 0;
    int c = ok ? fgetc(fp) : EOF;
    ok = ok && c != EOF && fseek(fp, -from_end, SEEK_END) == 0 && fputc(c ^ 0x04, fp) != EOF;
    return fclose(fp) == 0 && ok ? 0 : -1;
}

typedef struct fill_ctx {
    const char *name; /* the tensor to change ("*" every float one) */
    float value;      /* written into element `at` (F32 tensors) */
    long at;          /* -1: every element */
    int n_done;
} fill_ctx;

static void fill_f32(void *ctx, const char *name, ork_dtype dt, int ndim, int64_t *shape, void *data, uint64_t nbytes) {
    fill_ctx *c = ctx;
    (void)ndim;
    (void)shape;
    if (dt != ORK_F32 || (strcmp(c->name, "*") && strcmp(c->name, name))) return;
    float *p = data;
    uint64_t n = nbytes / 4;
    for (uint64_t i = 0; i < n; i++)
        if (c->at < 0 || (uint64_t)c->at == i) p[i] = c->value;
    c->n_done++;
}

/* An optimizer moment (opt.* is U8 bytes: adamw's m then v, float32). */
static void nan_moment(void *ctx, const char *name, ork_dtype dt, int ndim, int64_t *shape, void *data, uint64_t nbytes) {
    fill_ctx *c = ctx;
    (void)ndim;
    (void)shape;
    if (dt != ORK_U8 || strcmp(c->name, name) || nbytes < 16) return;
    float v = NAN;
    memcpy((char *)data + 8, &v, 4);
    c->n_done++;
}

/* tokens (h, w, C) -> (w, h, C), or (2h, w/2, C) when square: same bytes, another grid */
static void reshape_tokens(void *ctx, const char *name, ork_dtype dt, int ndim, int64_t *shape, void *data,
                           uint64_t nbytes) {
    int *done = ctx;
    (void)dt;
    (void)data;
    (void)nbytes;
    if (strcmp(name, "tokens") || ndim != 3) return;
    if (shape[0] != shape[1]) {
        int64_t t = shape[0];
        shape[0] = shape[1];
        shape[1] = t;
    } else {
        shape[0] *= 2;
        shape[1] /= 2;
    }
    (*done)++;
}

/* The first latent cache file of the scenario (data/_latent_cache/<stem>_<key>.safetensors). */
static int cache_file(const sc *s, const char *stem, char *buf, size_t n) {
    char dir[1200];
    tt_fmt(dir, sizeof dir, "%s/_latent_cache", s->data);
    DIR *d = opendir(dir);
    int found = 0;
    for (struct dirent *e; d && !found && (e = readdir(d));)
        if (!strncmp(e->d_name, stem, strlen(stem)) && strstr(e->d_name, ".safetensors") &&
            !strstr(e->d_name, ".tmp.")) {
            tt_fmt(buf, n, "%s/%s", dir, e->d_name);
            found = 1;
        }
    if (d) closedir(d);
    return found;
}

/* The printed losses of a run's log. */
static int losses(const char *log, tt_losses *L) {
    char o[1200];
    tt_fmt(o, sizeof o, "%s.out", log);
    return tt_parse_losses(o, L);
}

/* ---- the state ---------------------------------------------------------------- */

/* A 4-step run saved at 2 and 4 (float16 LoRA files, keep 2). */
static int base_run(sc *s, const char *tag, const char *dtype) {
    if (sc_setup(s, tag) != 0 || sc_config(s, 4, 2, 2, dtype) != 0) return -1;
    return run(s->cfg, s->log, 0);
}

/* Continue the base run to `steps`; expect exit `want`; LoRA files 2 and 4
 * byte-identical to what they were. */
static void resume_expect(sc *s, int steps, int want, const char *const *needles, const char *what) {
    char l2[1400], l4[1400], k2[1400], k4[1400];
    sc_lora(s, 2, l2, sizeof l2);
    sc_lora(s, 4, l4, sizeof l4);
    tt_fmt(k2, sizeof k2, "%s/keep2", s->root);
    tt_fmt(k4, sizeof k4, "%s/keep4", s->root);
    size_t n;
    char *b = tt_read_all(l2, &n);
    FILE *fp = b ? fopen(k2, "wb") : NULL;
    if (fp) { fwrite(b, 1, n, fp); fclose(fp); }
    free(b);
    b = tt_read_all(l4, &n);
    fp = b ? fopen(k4, "wb") : NULL;
    if (fp) { fwrite(b, 1, n, fp); fclose(fp); }
    free(b);
    CU_ASSERT_FATAL(sc_config(s, steps, 2, 2, "float16") == 0);
    char log[1200];
    tt_fmt(log, sizeof log, "%s_%s", s->log, what);
    int rc = run(s->cfg, log, 0);
    if (rc != want) {
        printf("\n  %s: exit %d, expected %d", what, rc, want);
        show_err(log);
    }
    CU_ASSERT(rc == want);
    if (needles) CU_ASSERT(one_error_with(log, needles));
    CU_ASSERT(tt_same_bytes(l2, k2));
    CU_ASSERT(tt_same_bytes(l4, k4));
}

static void test_state_nan_lora(void) {
    sc s;
    CU_ASSERT_FATAL(base_run(&s, "inan", "float16") == 0);
    fill_ctx c = {"lora.1", NAN, 3, 0};
    CU_ASSERT_FATAL(st_rewrite(s.state, fill_f32, &c, NULL, NULL, 1) == 0 && c.n_done == 1);
    const char *need[] = {"quickstart_state.safetensors", "lora.1", "NaN", NULL};
    resume_expect(&s, 6, 2, need, "nan_lora");
    tt_rm_rf(s.root);
}

static void test_state_nan_moment(void) {
    sc s;
    CU_ASSERT_FATAL(base_run(&s, "imom", "float16") == 0);
    fill_ctx c = {"opt.2", 0, 0, 0};
    CU_ASSERT_FATAL(st_rewrite(s.state, nan_moment, &c, NULL, NULL, 1) == 0 && c.n_done == 1);
    const char *need[] = {"quickstart_state.safetensors", "opt.2", NULL};
    resume_expect(&s, 6, 2, need, "nan_moment");
    tt_rm_rf(s.root);
}

/* The trainable state streamed per block (ORAKUL_STREAM_TRAINABLES=1): its
 * records load through another path (state_stream.c), checked the same way. */
static void test_state_nan_streamed(void) {
    sc s;
    setenv("ORAKUL_STREAM_TRAINABLES", "1", 1);
    CU_ASSERT_FATAL(base_run(&s, "istream", "float16") == 0);
    char out[1200];
    tt_fmt(out, sizeof out, "%s.err", s.log);
    CU_ASSERT(tt_file_has(out, "trainable state streamed per block"));
    fill_ctx c = {"opt.3", 0, 0, 0};
    CU_ASSERT_FATAL(st_rewrite(s.state, nan_moment, &c, NULL, NULL, 1) == 0 && c.n_done == 1);
    const char *need[] = {"quickstart_state.safetensors", "opt.3", NULL};
    resume_expect(&s, 6, 2, need, "nan_streamed");
    fill_ctx l = {"lora.0", INFINITY, 1, 0};
    CU_ASSERT_FATAL(st_rewrite(s.state, fill_f32, &l, NULL, NULL, 1) == 0 && l.n_done == 1);
    const char *need2[] = {"quickstart_state.safetensors", "lora.0", "inf", NULL};
    resume_expect(&s, 6, 2, need2, "inf_streamed");
    unsetenv("ORAKUL_STREAM_TRAINABLES");
    tt_rm_rf(s.root);
}

static void test_state_flipped_byte(void) {
    sc s;
    CU_ASSERT_FATAL(base_run(&s, "iflip", "float16") == 0);
    CU_ASSERT_FATAL(flip_byte(s.state, 5) == 0);
    const char *need[] = {"quickstart_state.safetensors", "checksum", NULL};
    resume_expect(&s, 6, 2, need, "flip");
    tt_rm_rf(s.root);
}

static void test_state_bad_metadata(void) {
    sc s;
    CU_ASSERT_FATAL(base_run(&s, "imeta", "float16") == 0);
    char keep[1400];
    tt_fmt(keep, sizeof keep, "%s/state.orig", s.root);
    size_t n;
    char *b = tt_read_all(s.state, &n);
    CU_ASSERT_FATAL(b != NULL);
    static const struct { const char *key, *val, *what; } bad[] = {
        {"step", "ten", "'step'"},      {"step", "-5", "'step'"},    {"step", "99", "train.steps"},
        {"step", "4 ", "'step'"},       {"data_epoch", "-1", "'data_epoch'"},
        {"skipped", "x", "'skipped'"},  {"tensors", "1e3", "'tensors'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FILE *fp = fopen(s.state, "wb");
        CU_ASSERT_FATAL(fp && fwrite(b, 1, n, fp) == n);
        fclose(fp);
        CU_ASSERT_FATAL(st_rewrite(s.state, NULL, NULL, bad[i].key, bad[i].val, 1) == 0);
        char what[64];
        tt_fmt(what, sizeof what, "meta%zu", i);
        const char *need[] = {"quickstart_state.safetensors", bad[i].what, NULL};
        printf("\n  %s = \"%s\"", bad[i].key, bad[i].val);
        resume_expect(&s, 6, 2, need, what);
    }
    free(b);
    (void)keep;
    tt_rm_rf(s.root);
}

/* Finite but absurd LoRA values (1e30): every loss is non-finite, every step
 * is skipped, and the float16 LoRA would hold Inf. */
static void test_nonfinite_lora_not_written(void) {
    sc s;
    CU_ASSERT_FATAL(base_run(&s, "iinf", "float16") == 0);
    fill_ctx c = {"*", 1e30f, -1, 0};
    CU_ASSERT_FATAL(st_rewrite(s.state, fill_f32, &c, NULL, NULL, 1) == 0 && c.n_done > 0);
    /* steps 5, 6 skipped; the save at 6 refuses the LoRA (keep 2 would have pruned 2 for it) */
    const char *need[] = {"non-finite", NULL};
    resume_expect(&s, 6, 1, need, "inf_lora");
    char l6[1400];
    sc_lora(&s, 6, l6, sizeof l6);
    CU_ASSERT(!tt_exists(l6));
    tt_rm_rf(s.root);
}

static void test_no_step_trained(void) {
    sc s;
    CU_ASSERT_FATAL(base_run(&s, "iskip", "float32") == 0);
    fill_ctx c = {"*", 1e30f, -1, 0};
    CU_ASSERT_FATAL(st_rewrite(s.state, fill_f32, &c, NULL, NULL, 1) == 0 && c.n_done > 0);
    CU_ASSERT_FATAL(sc_config(&s, 7, 100, 2, "float32") == 0);
    char log[1200];
    tt_fmt(log, sizeof log, "%s_noskip", s.log);
    int rc = run(s.cfg, log, 0);
    CU_ASSERT(rc == 1);
    const char *need[] = {"no step", NULL};
    CU_ASSERT(one_error_with(log, need));
    char l7[1400];
    sc_lora(&s, 7, l7, sizeof l7);
    CU_ASSERT(!tt_exists(l7));

    /* 20 in a row stop the run: steps 5..24 skipped, no step 25 */
    CU_ASSERT_FATAL(sc_config(&s, 40, 100, 2, "float32") == 0);
    tt_fmt(log, sizeof log, "%s_row", s.log);
    rc = run(s.cfg, log, 0);
    CU_ASSERT(rc == 1);
    const char *need2[] = {"20 steps in a row", NULL};
    CU_ASSERT(one_error_with(log, need2));
    static tt_losses L;
    losses(log, &L);
    CU_ASSERT(L.n > 0 && L.step[L.n - 1] == 24);
    tt_rm_rf(s.root);
}

/* ---- LoRA files without a state; a changed config ------------------------------ */

static void test_lora_without_state(void) {
    sc s;
    CU_ASSERT_FATAL(base_run(&s, "inostate", "float16") == 0);
    CU_ASSERT_FATAL(unlink(s.state) == 0);
    const char *need[] = {"--overwrite", "config.name", NULL};
    resume_expect(&s, 4, 2, need, "nostate"); /* LoRA files 2 and 4 untouched */
    CU_ASSERT(!tt_exists(s.state));
    /* --overwrite: trains afresh, writes them again */
    char log[1200];
    tt_fmt(log, sizeof log, "%s_overwrite", s.log);
    CU_ASSERT(run(s.cfg, log, 1) == 0);
    CU_ASSERT(tt_exists(s.state));
    tt_rm_rf(s.root);
}

static void test_config_change_warned(void) {
    sc s;
    CU_ASSERT_FATAL(base_run(&s, "ichange", "float16") == 0);
    CU_ASSERT_FATAL(sc_config(&s, 6, 2, 2, "float16") == 0);
    char *t = tt_read_all(s.cfg, NULL), *at = t ? strstr(t, "lr: 5e-3") : NULL;
    CU_ASSERT_FATAL(at != NULL);
    memcpy(at, "lr: 1e-3", 8);
    CU_ASSERT_FATAL(tt_write_all(s.cfg, t) == 0);
    free(t);
    char log[1200];
    tt_fmt(log, sizeof log, "%s_lr", s.log);
    CU_ASSERT(run(s.cfg, log, 0) == 0);
    CU_ASSERT(err_lines(log, "the config differs") == 1);
    CU_ASSERT(err_lines(log, "train.lr") == 1);
    CU_ASSERT(err_lines(log, "error:") == 0);
    /* and an unchanged config resumes without it */
    tt_fmt(log, sizeof log, "%s_same", s.log);
    CU_ASSERT_FATAL(sc_config(&s, 8, 2, 2, "float16") == 0);
    t = tt_read_all(s.cfg, NULL);
    at = t ? strstr(t, "lr: 5e-3") : NULL;
    CU_ASSERT_FATAL(at != NULL);
    memcpy(at, "lr: 1e-3", 8);
    CU_ASSERT_FATAL(tt_write_all(s.cfg, t) == 0);
    free(t);
    CU_ASSERT(run(s.cfg, log, 0) == 0);
    CU_ASSERT(err_lines(log, "train.lr") == 0);
    tt_rm_rf(s.root);
}

/* ---- the latent and text caches -------------------------------------------------- */

/* Damage one cache file, run again (fresh output): a warning naming it, no
 * error line, and the losses of the clean run. */
typedef enum { CACHE_NAN, CACHE_FLIP, CACHE_RESHAPE } cache_damage;

static void cache_case(cache_damage how, const char *tag) {
    sc s;
    CU_ASSERT_FATAL(sc_setup(&s, tag) == 0 && sc_config(&s, 3, 3, 2, "float16") == 0);
    CU_ASSERT_FATAL(run(s.cfg, s.log, 0) == 0); /* encodes and caches */
    static tt_losses A, B;
    CU_ASSERT_FATAL(losses(s.log, &A) == 3);
    char cf[1400];
    CU_ASSERT_FATAL(cache_file(&s, "chelsea", cf, sizeof cf));
    if (how == CACHE_NAN) {
        fill_ctx c = {"tokens", NAN, 5, 0};
        CU_ASSERT_FATAL(st_rewrite(cf, fill_f32, &c, NULL, NULL, 1) == 0 && c.n_done == 1);
    } else if (how == CACHE_FLIP) {
        CU_ASSERT_FATAL(flip_byte(cf, 9) == 0);
    } else {
        int done = 0;
        CU_ASSERT_FATAL(st_rewrite(cf, reshape_tokens, &done, NULL, NULL, 1) == 0 && done == 1);
    }
    tt_rm_rf(s.out); /* a fresh run: trains from step 1 on the cache */
    char log[1200];
    tt_fmt(log, sizeof log, "%s_again", s.log);
    int rc = run(s.cfg, log, 0);
    CU_ASSERT(rc == 0);
    if (err_lines(log, "chelsea") < 1 || err_lines(log, "error:") != 0) show_err(log);
    CU_ASSERT(err_lines(log, "warning: latent cache unusable") == 1);
    CU_ASSERT(err_lines(log, "re-encod") == 1);
    CU_ASSERT(err_lines(log, "error:") == 0);
    CU_ASSERT(err_lines(log, "skipped") == 0);
    CU_ASSERT_FATAL(losses(log, &B) == 3);
    for (int i = 0; i < 3; i++) CU_ASSERT_STRING_EQUAL(A.text[i], B.text[i]);
    /* rewritten: a third run reads it without a word */
    tt_rm_rf(s.out);
    tt_fmt(log, sizeof log, "%s_third", s.log);
    CU_ASSERT(run(s.cfg, log, 0) == 0);
    CU_ASSERT(err_lines(log, "latent cache unusable") == 0);
    CU_ASSERT(err_lines(log, "re-encod") == 0);
    tt_rm_rf(s.root);
}

static void test_cache_nan(void) { cache_case(CACHE_NAN, "icnan"); }
static void test_cache_flip(void) { cache_case(CACHE_FLIP, "icflip"); }
static void test_cache_reshape(void) { cache_case(CACHE_RESHAPE, "icshape"); }

/* The cache files under the dataset's _latent_cache. */
static int cache_count(const sc *s) {
    char dir[1200];
    tt_fmt(dir, sizeof dir, "%s/_latent_cache", s->data);
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strstr(e->d_name, ".safetensors") && !strstr(e->d_name, ".tmp.");
    if (d) closedir(d);
    return n;
}

/* Another codec setting (model_kwargs.codec pixel -> auto: the same pixel
 * latents here, but a VAE and TAEF1 give the same grid and dtype too) makes
 * new cache keys: every image is encoded again, none read from the old ones. */
static void test_cache_codec_key(void) {
    sc s;
    CU_ASSERT_FATAL(sc_setup(&s, "iccodec") == 0 && sc_config(&s, 2, 2, 2, "float16") == 0);
    CU_ASSERT_FATAL(run(s.cfg, s.log, 0) == 0);
    int n1 = cache_count(&s);
    CU_ASSERT_FATAL(n1 > 0);
    char *t = tt_read_all(s.cfg, NULL);
    char *at = t ? strstr(t, "codec: pixel") : NULL;
    CU_ASSERT_FATAL(at != NULL);
    memcpy(at, "codec: auto ", 12);
    CU_ASSERT_FATAL(tt_write_all(s.cfg, t) == 0);
    free(t);
    tt_rm_rf(s.out);
    char log[1200];
    tt_fmt(log, sizeof log, "%s_auto", s.log);
    CU_ASSERT(run(s.cfg, log, 0) == 0);
    CU_ASSERT(cache_count(&s) == 2 * n1);
    CU_ASSERT(err_lines(log, "error:") == 0);
    tt_rm_rf(s.root);
}

static void test_text_cache_nan(void) {
    sc s;
    CU_ASSERT_FATAL(sc_setup(&s, "itxt") == 0 && sc_config(&s, 2, 2, 2, "float16") == 0);
    /* the tiny model: context_len 8, context_in_dim 32, vec_in_dim 16 */
    static float txt[8 * 32], vec[16];
    for (int i = 0; i < 8 * 32; i++) txt[i] = 0.01f * (float)(i % 7);
    txt[40] = NAN;
    int64_t st[2] = {8, 32}, sv[1] = {16};
    ork_st_writer *w;
    char te[1200];
    tt_fmt(te, sizeof te, "%s/coffee.te.safetensors", s.data);
    CU_ASSERT_FATAL(ork_st_writer_new(&w) == ORK_OK);
    CU_ASSERT(ork_st_writer_add(w, "txt", ORK_F32, 2, st, txt, sizeof txt) == ORK_OK);
    CU_ASSERT(ork_st_writer_add(w, "vec", ORK_F32, 1, sv, vec, sizeof vec) == ORK_OK);
    CU_ASSERT_FATAL(ork_st_writer_commit(w, te) == ORK_OK);
    ork_st_writer_free(w);
    int rc = run(s.cfg, s.log, 0);
    CU_ASSERT(rc == 2);
    const char *need[] = {"coffee.te.safetensors", "'txt'", "NaN", NULL};
    CU_ASSERT(one_error_with(s.log, need));
    CU_ASSERT(!tt_exists(s.state));
    tt_rm_rf(s.root);
}

static const ork_test_case cases[] = {
    {"state_nan_lora", test_state_nan_lora},
    {"state_nan_moment", test_state_nan_moment},
    {"state_nan_streamed", test_state_nan_streamed},
    {"state_flipped_byte", test_state_flipped_byte},
    {"state_bad_metadata", test_state_bad_metadata},
    {"nonfinite_lora_not_written", test_nonfinite_lora_not_written},
    {"no_step_trained", test_no_step_trained},
    {"lora_without_state", test_lora_without_state},
    {"config_change_warned", test_config_change_warned},
    {"cache_nan", test_cache_nan},
    {"cache_flip", test_cache_flip},
    {"cache_reshape", test_cache_reshape},
    {"cache_codec_key", test_cache_codec_key},
    {"text_cache_nan", test_text_cache_nan},
    {NULL, NULL},
};

ORK_TEST_MAIN("train_integrity", NULL, NULL, cases)
