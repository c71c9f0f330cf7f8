/* tests/sample/test_sample_io.c — what a training run writes besides the
 * LoRA, checked on the CPU:
 *  - PNG writing: the file decodes (core/data/image.c) to the same size and
 *    bytes; an unwritable path is one error line, not a crash; a killed
 *    writer's temp files are swept, a live writer's kept;
 *  - the grid: cells of the largest image, each image at its place;
 *  - the sample set from a config's `sample:` section on the small FLUX.1
 *    model (pixel codec): when samples are due, one PNG per prompt at its own
 *    size (rounded to whole tokens), the grid, a prompt given as a
 *    text-embedding file, deterministic images, a malformed embedding file
 *    refused at setup with the key that names it;
 *  - decoding: a photo encoded by the model's (lossless pixel) codec comes
 *    back from ork_sample_decode pixel for pixel (orientation, channels);
 *  - metrics.jsonl: rows written and read back, a resume drops the lines past
 *    its step, a malformed line is reported as file:line (strict: an error;
 *    lenient: a warning and the line is skipped);
 *  - loss.png: a falling loss puts the smoothed (dark) curve high on the left
 *    and low on the right of the plot area, the raw (light) curve is drawn,
 *    and a malformed metrics line still gives a plot plus a file:line warning;
 *  - the progress line: plain lines every log_every steps (and the first and
 *    last) that read as "step N/M  loss X" with X the mean since the previous
 *    line; on a terminal one line redrawn with \r, ended at the last step. */
#include "../flux/flux_test_util.h"

#include "config/config.h"
#include "data/image.h"
#include "train/metrics.h"
#include "train/plot.h"
#include "io/png_writer.h"
#include "train/progress.h"
#include "train/samples.h"

#include <sys/stat.h>
#include <sys/wait.h>

static char tmpdir[256];

/* ---- captured log lines ---- */
static char g_log[16][512];
static int g_nlog;
static void sink(ork_log_level lvl, const char *line, void *user) {
    (void)lvl, (void)user;
    if (g_nlog < 16) snprintf(g_log[g_nlog++], sizeof g_log[0], "%s", line);
}
static const char *logged(const char *needle) {
    for (int i = 0; i < g_nlog; i++)
        if (strstr(g_log[i], needle)) return g_log[i];
    return NULL;
}
static void capture(void) {
    g_nlog = 0;
    ork_log_set_sink(sink, NULL);
}

static int init(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ork_sample_io_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    return ft_init();
}
static int clean(void) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) printf("  could not remove %s\n", tmpdir);
    return ft_clean();
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

/* ---- PNG ---- */
static void test_png_roundtrip(void) {
    const int w = 37, h = 23;
    uint8_t *px = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h * 3; i++) px[i] = (uint8_t)(i * 7 + i / 5);
    char p[400];
    snprintf(p, sizeof p, "%s/rt.png", tmpdir);
    CU_ASSERT_EQUAL_FATAL(ork_png_write_rgb(p, w, h, px), ORK_OK);
    ork_image img;
    CU_ASSERT_EQUAL_FATAL(ork_image_load(p, &img), ORK_OK);
    CU_ASSERT(img.w == w && img.h == h);
    CU_ASSERT(memcmp(img.rgb, px, (size_t)w * h * 3) == 0);
    ork_image_free(&img);
    capture();
    CU_ASSERT_EQUAL(ork_png_write_rgb("/nonexistent-dir/x.png", w, h, px), ORK_E_IO);
    CU_ASSERT_EQUAL(ork_png_write_rgb(p, 0, h, px), ORK_E_INVALID);
    ork_log_set_sink(NULL, NULL);
    CU_ASSERT_EQUAL(g_nlog, 2);
    CU_ASSERT_PTR_NOT_NULL(logged("/nonexistent-dir/x.png"));
    free(px);
    /* temp files of a killed writer are swept, a live writer's are kept */
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    CU_ASSERT_FATAL(dead > 0);
    waitpid(dead, NULL, 0);
    char a[400], b[400], c[400];
    snprintf(a, sizeof a, "%s/s_000000001_0.png.tmp.%ld", tmpdir, (long)dead);
    snprintf(b, sizeof b, "%s/s_000000001_1.png.tmp.%ld", tmpdir, (long)getpid());
    snprintf(c, sizeof c, "%s/other.png.tmp.x1", tmpdir);
    write_text(a, "half");
    write_text(b, "half");
    write_text(c, "not a pid");
    CU_ASSERT_EQUAL(ork_tmp_sweep(tmpdir, ".png"), 1);
    CU_ASSERT(access(a, F_OK) != 0 && access(b, F_OK) == 0 && access(c, F_OK) == 0);
    unlink(b);
    unlink(c);
}

static void test_grid(void) {
    ork_image im[3];
    int sz[3][2] = {{8, 6}, {4, 10}, {8, 8}};
    for (int i = 0; i < 3; i++) {
        im[i].w = sz[i][0];
        im[i].h = sz[i][1];
        im[i].rgb = malloc((size_t)im[i].w * im[i].h * 3);
        memset(im[i].rgb, 100 + 50 * i, (size_t)im[i].w * im[i].h * 3);
    }
    ork_image g;
    CU_ASSERT_EQUAL_FATAL(ork_samples_grid(im, 3, &g), ORK_OK);
    CU_ASSERT_EQUAL(g.w, 3 * 8 + 4 * 4); /* 3 columns of the widest, 4 px gaps */
    CU_ASSERT_EQUAL(g.h, 10 + 2 * 4);
    /* image 1 (4x10) is centred in the second cell: x from 4 + 12 + 2 */
    CU_ASSERT_EQUAL(g.rgb[((size_t)4 * g.w + 18) * 3], 150);
    CU_ASSERT_EQUAL(g.rgb[((size_t)4 * g.w + 17) * 3], 32); /* background */
    CU_ASSERT_EQUAL(g.rgb[((size_t)6 * g.w + 4 + 24) * 3], 200); /* image 2's first row: y0 = 4 + 1 */
    ork_image_free(&g);
    for (int i = 0; i < 3; i++) ork_image_free(&im[i]);
    CU_ASSERT_EQUAL(ork_samples_grid(im, 0, &g), ORK_E_INVALID);
}

/* ---- the sample set ---- */
static ork_status write_te(const char *path, int64_t T, int64_t ctx, int64_t vec) {
    ork_st_writer *w;
    ORK_TRY(ork_st_writer_new(&w));
    float *t = malloc((size_t)(T * ctx + vec) * sizeof *t);
    for (int64_t i = 0; i < T * ctx + vec; i++) t[i] = (float)sin(0.37 * (double)i);
    int64_t st[2] = {T, ctx};
    ork_status s = ork_st_writer_add(w, "txt", ORK_F32, 2, st, t, (size_t)(T * ctx) * sizeof *t);
    if (s == ORK_OK && vec) s = ork_st_writer_add(w, "vec", ORK_F32, 1, &vec, t + T * ctx, (size_t)vec * sizeof *t);
    if (s == ORK_OK) s = ork_st_writer_commit(w, path);
    ork_st_writer_free(w);
    free(t);
    return s;
}

static ork_config *sample_config(const char *te, const char *extra) {
    char yaml[4096], p[400];
    snprintf(yaml, sizeof yaml,
             "job: extension\n"
             "config:\n"
             "  name: sio\n"
             "  process:\n"
             "    - type: sd_trainer\n"
             "      training_folder: %s/out\n"
             "      trigger_word: zxq\n"
             "      datasets:\n"
             "        - folder_path: %s\n"
             "      model:\n"
             "        name_or_path: preset:custom\n"
             "      train:\n"
             "        steps: 12\n"
             "%s"
             "      sample:\n"
             "        sample_every: 5\n"
             "        width: 22\n"
             "        height: 16\n"
             "        seed: 3\n"
             "        walk_seed: true\n"
             "        guidance_scale: 3.5\n"
             "        sample_steps: 2\n"
             "        prompts:\n"
             "          - \"a photo of [trigger]\"\n"
             "          - \"%s\"\n"
             "        samples:\n"
             "          - prompt: third\n"
             "            width: 24\n"
             "            height: 12\n"
             "            seed: 11\n",
             tmpdir, tmpdir, extra ? extra : "", te);
    snprintf(p, sizeof p, "%s/cfg.yaml", tmpdir);
    write_text(p, yaml);
    ork_config *cfg = NULL;
    CU_ASSERT_EQUAL(ork_config_load(p, &cfg), ORK_OK);
    return cfg;
}

static void test_sample_set(void) {
    ft_model m;
    CU_ASSERT_EQUAL_FATAL(ft_open(FT_FIXTURES "/flux1_small_bfl.safetensors", NULL, &m), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ft_load(&m), ORK_OK);
    char te[400], out[400], p[600], q[600];
    snprintf(te, sizeof te, "%s/prompt.te.safetensors", tmpdir);
    CU_ASSERT_EQUAL_FATAL(write_te(te, 8, m.info.context_dim, m.info.vec_dim), ORK_OK);
    ork_config *cfg = sample_config(te, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
    snprintf(out, sizeof out, "%s/out/sio", tmpdir);
    ork_samples *s = NULL;
    capture();
    CU_ASSERT_EQUAL_FATAL(ork_samples_create(cfg, &m.info, 8, out, "sio", &s), ORK_OK);
    ork_log_set_sink(NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_PTR_NOT_NULL(logged("sample.prompts[0]: 22x16 is not a multiple of 4 pixels: sampling 24x16"));
    CU_ASSERT_PTR_NOT_NULL(logged("2 of 3 prompts are text"));
    /* when: before the first step, every 5 steps, the last step */
    CU_ASSERT(ork_samples_due(s, 0, 0, 12));
    CU_ASSERT(!ork_samples_due(s, 4, 0, 12));
    CU_ASSERT(ork_samples_due(s, 5, 0, 12));
    CU_ASSERT(ork_samples_due(s, 12, 0, 12));
    CU_ASSERT(!ork_samples_due(s, 6, 6, 12)); /* a resumed run: no first sample */
    ork_denoiser d = {.g = m.g, .alloc = m.alloc, .vt = m.vt, .model = m.self, .info = &m.info, .codec = &m.mc};
    int wrote = 0;
    size_t cap0 = ork_arena_capacity(m.g->arena), used0 = ork_alloc_in_use(m.alloc, NULL);
    CU_ASSERT_EQUAL(ork_samples_run(s, &d, 5, &wrote), ORK_OK);
    CU_ASSERT_EQUAL(wrote, 3);
    /* a graph of its own: the training graph's arena and the allocator are as before */
    CU_ASSERT_EQUAL(ork_arena_capacity(m.g->arena), cap0);
    CU_ASSERT_EQUAL(ork_alloc_in_use(m.alloc, NULL), used0);
    static const int want[4][2] = {{24, 16}, {24, 16}, {24, 12}, {3 * 24 + 4 * 4, 16 + 2 * 4}};
    for (int i = 0; i < 4; i++) {
        if (i < 3) snprintf(p, sizeof p, "%s/samples/sio_000000005_%d.png", out, i);
        else snprintf(p, sizeof p, "%s/samples/sio_000000005_grid.png", out);
        ork_image img;
        CU_ASSERT_EQUAL(ork_image_load(p, &img), ORK_OK);
        CU_ASSERT(img.w == want[i][0] && img.h == want[i][1]);
        if (img.w != want[i][0] || img.h != want[i][1]) printf("\n  %s: %dx%d", p, img.w, img.h);
        /* an image, not a constant: the pixel codec maps the latent to varied colours */
        int lo = 255, hi = 0;
        for (int k = 0; img.rgb && k < img.w * img.h * 3; k++) {
            if (img.rgb[k] < lo) lo = img.rgb[k];
            if (img.rgb[k] > hi) hi = img.rgb[k];
        }
        CU_ASSERT(hi - lo > 32);
        ork_image_free(&img);
    }
    /* the same weights, the same seeds: the same image bytes */
    CU_ASSERT_EQUAL(ork_samples_run(s, &d, 10, &wrote), ORK_OK);
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/samples/sio_000000005_%d.png", out, i);
        snprintf(q, sizeof q, "%s/samples/sio_000000010_%d.png", out, i);
        size_t na = 0, nb = 0;
        uint8_t *a = (uint8_t *)ork_test_read_all(p, &na), *b = (uint8_t *)ork_test_read_all(q, &nb);
        CU_ASSERT(a && b && na == nb && memcmp(a, b, na) == 0);
        free(a);
        free(b);
    }
    /* walk_seed: prompt 0 and a copy of it at index 1 would differ; here the
     * embedding prompt differs from the text one by its conditioning too */
    snprintf(p, sizeof p, "%s/samples/sio_000000005_0.png", out);
    snprintf(q, sizeof q, "%s/samples/sio_000000005_1.png", out);
    size_t na = 0, nb = 0;
    uint8_t *a = (uint8_t *)ork_test_read_all(p, &na), *b = (uint8_t *)ork_test_read_all(q, &nb);
    CU_ASSERT(a && b && (na != nb || memcmp(a, b, na) != 0));
    free(a);
    free(b);
    ork_samples_destroy(s);
    ork_config_free(cfg);

    /* a malformed embedding: refused at setup, naming the key and the file */
    snprintf(te, sizeof te, "%s/bad.te.safetensors", tmpdir);
    CU_ASSERT_EQUAL_FATAL(write_te(te, 5, m.info.context_dim, 0), ORK_OK);
    cfg = sample_config(te, NULL);
    capture();
    s = NULL;
    CU_ASSERT_EQUAL(ork_samples_create(cfg, &m.info, 8, out, "sio", &s), ORK_E_FORMAT);
    ork_log_set_sink(NULL, NULL);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_PTR_NOT_NULL(logged("sample.prompts[1]: "));
    CU_ASSERT_PTR_NOT_NULL(logged("bad.te.safetensors: tensor 'txt' must be (8, 32)"));
    ork_config_free(cfg);

    /* train.disable_sampling: no sample set (and the bad file is not even read) */
    cfg = sample_config(te, "        disable_sampling: true\n");
    s = (ork_samples *)1;
    CU_ASSERT_EQUAL(ork_samples_create(cfg, &m.info, 8, out, "sio", &s), ORK_OK);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT(!ork_samples_due(s, 0, 0, 12));
    ork_config_free(cfg);
    ft_close(&m);
}

/* ---- decode: orientation and colours ---- */
/* A photo through the model's encoder, then ork_sample_decode: the pixel
 * codec is lossless, so the PNG the sampler would write is the photo (rows,
 * columns and channels in place, values within rounding). */
static void test_decode_roundtrip(void) {
    ft_model m;
    CU_ASSERT_EQUAL_FATAL(ft_open(FT_FIXTURES "/flux1_small_bfl.safetensors", NULL, &m), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ft_load(&m), ORK_OK);
    ork_image src, fit;
    CU_ASSERT_EQUAL_FATAL(ork_image_load(ORK_SOURCE_DIR "/assets/photos/coffee.png", &src), ORK_OK);
    const int W = 48, H = 32; /* not square: a transposition shows */
    CU_ASSERT_EQUAL_FATAL(ork_image_fit(&src, W, H, &fit), ORK_OK);
    float *chw = malloc((size_t)3 * W * H * sizeof *chw);
    ork_image_to_f32_chw(&fit, chw);
    const ork_tensor_api *ta = ork_tensor_api_table();
    ork_tensor *x, *tok;
    int64_t sh[4] = {1, 3, H, W};
    CU_ASSERT_EQUAL_FATAL(ork_graph_reset(m.g), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ta->from_host(m.g, ORK_F32, 4, sh, chw, &x), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ft_encode(&m, m.g, x, &tok), ORK_OK);
    size_t nt = (size_t)ta->numel(tok);
    float *t = malloc(nt * sizeof *t);
    CU_ASSERT_EQUAL_FATAL(ta->to_host(m.g, tok, ORK_F32, t), ORK_OK);
    ork_denoiser d = {.g = m.g, .alloc = m.alloc, .vt = m.vt, .model = m.self, .info = &m.info, .codec = &m.mc};
    ork_image out;
    int ppt = m.info.pixels_per_token;
    CU_ASSERT_EQUAL_FATAL(ork_sample_decode(&d, t, H / ppt, W / ppt, &out), ORK_OK);
    CU_ASSERT(out.w == W && out.h == H);
    int worst = 0;
    for (int i = 0; i < W * H * 3 && out.w == W && out.h == H; i++) {
        int e = abs((int)out.rgb[i] - (int)fit.rgb[i]);
        if (e > worst) worst = e;
    }
    printf("\n    photo -> tokens -> sample PNG pixels: max difference %d levels\n  ", worst);
    CU_ASSERT(worst <= 1);
    ork_image_free(&out);
    ork_image_free(&fit);
    ork_image_free(&src);
    free(chw);
    free(t);
    ft_close(&m);
}

/* ---- metrics.jsonl ---- */
static void test_metrics(void) {
    char p[400];
    snprintf(p, sizeof p, "%s/metrics.jsonl", tmpdir);
    ork_metrics *mt;
    CU_ASSERT_EQUAL_FATAL(ork_metrics_open(p, 0, &mt), ORK_OK);
    for (int s = 1; s <= 5; s++) {
        ork_metrics_row r = {.step = s, .loss = s == 3 ? NAN : 1.0 / s, .lr = 1e-3, .grad_norm = 0.5, .s_per_it = 0.25,
                             .vram_gib = 1.5, .skipped = s == 3};
        CU_ASSERT_EQUAL(ork_metrics_append(mt, &r), ORK_OK);
    }
    ork_metrics_close(mt);
    ork_metrics_row *rows;
    size_t n;
    CU_ASSERT_EQUAL_FATAL(ork_metrics_read(p, 1, &rows, &n), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(n, 5);
    CU_ASSERT(rows[1].step == 2 && rows[1].loss == 0.5 && rows[1].lr == 1e-3 && rows[1].vram_gib == 1.5);
    CU_ASSERT(rows[2].skipped && isnan(rows[2].loss));
    CU_ASSERT(!rows[3].skipped && fabs(rows[3].loss - 0.25) < 1e-9);
    free(rows);
    /* a resume at step 3 keeps steps 1..3, then appends */
    CU_ASSERT_EQUAL_FATAL(ork_metrics_open(p, 3, &mt), ORK_OK);
    ork_metrics_row r4 = {.step = 4, .loss = 0.3, .lr = 1e-3, .grad_norm = 0.1, .s_per_it = NAN, .vram_gib = 0};
    CU_ASSERT_EQUAL(ork_metrics_append(mt, &r4), ORK_OK);
    ork_metrics_close(mt);
    CU_ASSERT_EQUAL_FATAL(ork_metrics_read(p, 1, &rows, &n), ORK_OK);
    CU_ASSERT(n == 4 && rows[3].step == 4 && rows[3].loss == 0.3 && isnan(rows[3].s_per_it));
    free(rows);
    /* a malformed line (a kill mid-write leaves half a line) */
    FILE *f = fopen(p, "a");
    fputs("{\"step\": 5, \"loss\": 0.2\n{\"step\": \"six\", \"loss\": 1}\n", f);
    fclose(f);
    capture();
    CU_ASSERT_EQUAL(ork_metrics_read(p, 1, &rows, &n), ORK_E_FORMAT);
    CU_ASSERT_PTR_NULL(rows);
    CU_ASSERT_PTR_NOT_NULL(logged("metrics.jsonl:5: not JSON"));
    g_nlog = 0;
    CU_ASSERT_EQUAL(ork_metrics_read(p, 0, &rows, &n), ORK_OK);
    CU_ASSERT_EQUAL(n, 4);
    CU_ASSERT_PTR_NOT_NULL(logged("metrics.jsonl:5: not JSON"));
    CU_ASSERT_PTR_NOT_NULL(logged("metrics.jsonl:6: 'step' must be a non-negative integer (line skipped)"));
    free(rows);
    /* resuming over them drops them (with the same file:line warnings) */
    g_nlog = 0;
    CU_ASSERT_EQUAL(ork_metrics_open(p, 10, &mt), ORK_OK);
    ork_metrics_close(mt);
    ork_log_set_sink(NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL(logged("metrics.jsonl:5:"));
    CU_ASSERT_EQUAL(ork_metrics_read(p, 1, &rows, &n), ORK_OK);
    CU_ASSERT_EQUAL(n, 4);
    free(rows);
    CU_ASSERT_EQUAL(ork_metrics_read("/nonexistent/metrics.jsonl", 1, &rows, &n), ORK_E_IO);
    /* the smoothed loss: debiased, the first value is itself */
    ork_ema e;
    ork_ema_init(&e, 0.9);
    CU_ASSERT(isnan(ork_ema_value(&e)));
    CU_ASSERT_DOUBLE_EQUAL(ork_ema_add(&e, 2.0), 2.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(ork_ema_add(&e, NAN), 2.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(ork_ema_add(&e, 1.0), (0.9 * 0.1 * 2 + 0.1 * 1) / (1 - 0.81), 1e-12);
}

/* ---- loss.png ---- */
static int is_rgb(const uint8_t *p, uint32_t c) {
    return p[0] == (uint8_t)(c >> 16) && p[1] == (uint8_t)(c >> 8) && p[2] == (uint8_t)c;
}

static void test_plot(void) {
    enum { N = 300 };
    ork_metrics_row rows[N];
    uint32_t r = 12345;
    for (int i = 0; i < N; i++) {
        r = r * 1103515245u + 12345u;
        double noise = ((double)(r >> 8) / 16777216.0 - 0.5) * 0.2;
        rows[i] = (ork_metrics_row){.step = i + 1, .loss = 0.2 + 1.0 / (1.0 + 0.03 * i) + noise, .lr = 1e-3};
    }
    rows[40].loss = 50.0; /* one spike: clipped, it must not flatten the curve */
    rows[41].skipped = 1;
    rows[41].loss = NAN;
    const int W = ORK_PLOT_W, H = ORK_PLOT_H;
    uint8_t *px = malloc((size_t)W * H * 3);
    ork_plot_area a;
    CU_ASSERT_EQUAL_FATAL(ork_plot_loss(rows, N, W, H, px, &a), ORK_OK);
    CU_ASSERT(a.loss_hi < 5.0); /* the spike did not set the range */
    CU_ASSERT(a.step_lo == 1 && a.step_hi == N);
    /* mean y of the smoothed curve in the first and last 10% of the columns */
    int band = (a.x1 - a.x0) / 10, n_raw = 0;
    double ys[2] = {0, 0};
    int cnt[2] = {0, 0};
    for (int y = a.y0; y < a.y1; y++)
        for (int x = a.x0; x < a.x1; x++) {
            const uint8_t *p = px + ((size_t)y * W + x) * 3;
            if (is_rgb(p, ORK_PLOT_RAW_RGB)) n_raw++;
            if (!is_rgb(p, ORK_PLOT_EMA_RGB)) continue;
            int side = x < a.x0 + band ? 0 : x >= a.x1 - band ? 1 : -1;
            if (side < 0) continue;
            ys[side] += y;
            cnt[side]++;
        }
    CU_ASSERT_FATAL(cnt[0] > 0 && cnt[1] > 0);
    double mid = (a.y0 + a.y1) / 2.0;
    printf("\n    smoothed curve: mean y %.0f on the left, %.0f on the right (plot area y %d..%d); %d raw pixels\n  ",
           ys[0] / cnt[0], ys[1] / cnt[1], a.y0, a.y1, n_raw);
    CU_ASSERT(ys[0] / cnt[0] < mid);  /* high loss at the start: upper half */
    CU_ASSERT(ys[1] / cnt[1] > mid);  /* low loss at the end: lower half */
    CU_ASSERT(n_raw > 200);
    /* no data: axes only, no crash */
    CU_ASSERT_EQUAL(ork_plot_loss(rows, 0, W, H, px, &a), ORK_OK);
    CU_ASSERT_EQUAL(ork_plot_loss(rows, N, 50, 50, px, &a), ORK_E_INVALID);
    free(px);

    /* from a file with a malformed line: a warning with file:line, and the plot */
    char m[400], png[400];
    snprintf(m, sizeof m, "%s/plot_metrics.jsonl", tmpdir);
    snprintf(png, sizeof png, "%s/loss.png", tmpdir);
    write_text(m, "{\"step\": 1, \"loss\": 1.0}\n{\"step\": 2, \"loss\": 0.8}\n{\"step\": 3, \"loss\": [1]}\n"
                  "{\"step\": 4, \"loss\": 0.5}\n");
    capture();
    CU_ASSERT_EQUAL(ork_plot_loss_file(m, png), ORK_OK);
    ork_log_set_sink(NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL(logged("plot_metrics.jsonl:3: 'loss' must be a number or null"));
    ork_image img;
    CU_ASSERT_EQUAL_FATAL(ork_image_load(png, &img), ORK_OK);
    CU_ASSERT(img.w == ORK_PLOT_W && img.h == ORK_PLOT_H);
    ork_image_free(&img);
}

/* ---- the progress line ---- */
static void test_progress_plain(void) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ork_progress_opts o = {.out = f, .tty = 0, .start = 0, .total = 20, .log_every = 5, .mem_label = "VRAM"};
    ork_progress *p;
    CU_ASSERT_EQUAL_FATAL(ork_progress_create(&o, &p), ORK_OK);
    for (int s = 1; s <= 20; s++) {
        ork_progress_begin(p);
        ork_progress_step st = {.step = s, .loss = s, .skipped = s == 7, .lr = 1e-3, .grad_norm = 0.5,
                                .mem_in_use = (size_t)3 << 29, .mem_peak = (size_t)1 << 31};
        ork_progress_end(p, &st);
    }
    ork_progress_destroy(p);
    fclose(f);
    int lines = 0;
    long long steps[8];
    double losses[8];
    for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n")) {
        long long s, m;
        char lt[32];
        if (sscanf(l, "step %lld/%lld loss %31s", &s, &m, lt) != 3) continue;
        if (lines < 8) steps[lines] = s, losses[lines] = strtod(lt, NULL);
        lines++;
        CU_ASSERT(m == 20);
        CU_ASSERT_PTR_NOT_NULL(strstr(l, "VRAM 1.50 GiB (peak 2.00)"));
        CU_ASSERT_PTR_NOT_NULL(strstr(l, "s/it"));
        CU_ASSERT_PTR_NOT_NULL(strstr(l, "ETA "));
        CU_ASSERT_PTR_NULL(strchr(l, '\r'));
    }
    CU_ASSERT_EQUAL_FATAL(lines, 5);
    CU_ASSERT(steps[0] == 1 && steps[1] == 5 && steps[2] == 10 && steps[4] == 20);
    CU_ASSERT_DOUBLE_EQUAL(losses[0], 1.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(losses[1], (2 + 3 + 4 + 5) / 4.0, 1e-9);     /* mean since the previous line */
    CU_ASSERT_DOUBLE_EQUAL(losses[2], (6 + 8 + 9 + 10) / 4.0, 1e-9);    /* the skipped step 7 left out */
    free(buf);
    char e[32];
    CU_ASSERT_STRING_EQUAL(ork_progress_eta_str(221, e, sizeof e), "3m41s");
    CU_ASSERT_STRING_EQUAL(ork_progress_eta_str(3720, e, sizeof e), "1h02m");
    CU_ASSERT_STRING_EQUAL(ork_progress_eta_str(NAN, e, sizeof e), "?");
}

static void test_progress_tty(void) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ork_progress_opts o = {.out = f, .tty = 1, .start = 10, .total = 13, .log_every = 100};
    ork_progress *p;
    CU_ASSERT_EQUAL_FATAL(ork_progress_create(&o, &p), ORK_OK);
    for (int s = 11; s <= 12; s++) {
        ork_progress_begin(p);
        ork_progress_step st = {.step = s, .loss = 0.5, .lr = 1e-3};
        ork_progress_end(p, &st);
    }
    fflush(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\rstep 11/13"));
    CU_ASSERT_PTR_NULL(strchr(buf, '\n')); /* one line, redrawn */
    ORK_INFO("a log line while the progress line is drawn");
    fflush(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\r\x1b[K")); /* cleared before the log line */
    ork_progress_begin(p);
    ork_progress_step st = {.step = 13, .loss = 0.5, .lr = 1e-3};
    ork_progress_end(p, &st);
    ork_progress_destroy(p);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\rstep 13/13"));
    CU_ASSERT(len > 0 && buf[len - 1] == '\n'); /* ended at the last step */
    free(buf);
}

static const ork_test_case tcases[] = {
    {"PNG written, decoded, errors are one line", test_png_roundtrip},
    {"grid geometry", test_grid},
    {"sample set from the config: due steps, files, sizes, embeddings", test_sample_set},
    {"decode: a photo through encode + ork_sample_decode comes back", test_decode_roundtrip},
    {"metrics.jsonl: write, read, resume, malformed lines", test_metrics},
    {"loss.png: falling curve, outliers, malformed line", test_plot},
    {"progress: plain lines", test_progress_plain},
    {"progress: a redrawn terminal line", test_progress_tty},
    {NULL, NULL},
};
ORK_TEST_MAIN("sample_io", init, clean, tcases)
