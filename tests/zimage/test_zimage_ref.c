/* tests/zimage/test_zimage_ref.c — the Z-Image plugin (plugins/models/zimage)
 * against diffusers' ZImageTransformer2DModel (tests/reference/zimage_ref.py,
 * fixtures tests/fixtures/zimage/): the plugin loaded through the registry
 * opens the diffusers checkpoint, loads it into an F32 weight store on the CPU
 * graph, runs begin + every block on the fixture's inputs (15 image tokens and
 * 20 caption tokens: both padded to 32 with the learned pad tokens), and the
 * prediction, S = sum(pred·R), dS/d(tokens, txt), dS/d(listed weights) and,
 * with two LoRA adapters attached, dS/d(down, up) are compared with the
 * float64 reference. Then: the same weights in the original / ComfyUI layout
 * (fused qkv, attention.out, q_norm, x_embedder., final_layer., under
 * model.diffusion_model.; written here with the core's writer) give the
 * same prediction bit for bit; malformed files are refused with one line
 * naming the file and the tensor; the declarations (blocks, tokens, LoRA
 * keys, schedule); the core's sampler timesteps for the declared schedule
 * equal FlowMatchEulerDiscreteScheduler's (Z-Image-Turbo's config).
 *
 * Tolerances (M = max|ref|, per element): prediction |c - ref| <= 5e-5·M +
 * 1e-4·|ref|, gradients 3e-4·M + 1e-3·|ref|. torch's own F32 run is off the
 * F64 reference by 7.9e-7·M (pred) and <= 2.4e-6·M (grads) (zimage_ref.py
 * prints it); a mapping mistake (t vs 1 - t, the sign, the chunk order of
 * the modulation, the rope positions, the pad tokens, the packing) moves
 * values by O(M). */
#include "plugin_test_util.h"

#include "tensor/tape.h"
#include "train/lora.h"
#include "train/sample.h"
#include "util/log.h"

#include <errno.h>
#include <sys/stat.h>

#define ZT_PLUGIN ORK_PLUGIN_DIR "/orakul-zimage" ORK_PLUGIN_SUFFIX
#define ZT_DIR ORK_SOURCE_DIR "/tests/fixtures/zimage"
#define ZT_CKPT ZT_DIR "/zimage_tiny_diffusers.safetensors"
#define ZT_FIX ZT_DIR "/zimage_tiny.safetensors"

#define PRED_A 5e-5
#define PRED_R 1e-4
#define GRAD_A 3e-4
#define GRAD_R 1e-3

static ork_registry *g_reg;
static ork_st_file *g_fx;
static char g_tmp[128];

static int setup(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/orakul-zimage-XXXXXX");
    if (!mkdtemp(g_tmp)) return 1;
    if (ork_st_open(ZT_FIX, &g_fx) != ORK_OK) return 1;
    return ork_test_registry_open(ZT_PLUGIN, &g_reg);
}
static int teardown(void) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    ork_st_close(g_fx);
    ork_test_registry_close(&g_reg);
    return system(cmd) == 0 ? 0 : 1;
}

/* ---- the model ------------------------------------------------------------------ */
typedef struct zt_model {
    const ork_plugin_component *pc;
    const ork_model_vtable *vt;
    void *self;
    ork_model_info info;
    ork_alloc *alloc;
    ork_graph *g;
    ork_wstore *ws;
} zt_model;

/* create (the component by alias, model_kwargs at their defaults) + open */
static ork_status zt_open(const char *alias, const char *path, zt_model *m) {
    memset(m, 0, sizeof *m);
    m->pc = ork_registry_find(g_reg, ORK_KIND_MODEL, alias);
    if (!m->pc) return ORK_E_CONFIG;
    const ork_component *c = m->pc->c;
    unsigned char *buf = calloc(1, c->params_size);
    if (!buf) return ORK_E_NOMEM;
    for (const ork_param *p = c->params; p && p->key; p++) {
        int64_t x = strtoll(p->def, NULL, 10);
        if (p->type == ORK_PARAM_INT) memcpy(buf + p->offset, &x, sizeof x);
    }
    m->vt = c->vtable;
    ork_status s = m->vt->create(&m->pc->host, buf, &m->self);
    free(buf);
    if (s == ORK_OK) s = m->vt->open(m->self, path, &m->info);
    return s;
}

static ork_status zt_load(zt_model *m) {
    return ork_test_load_weights(&m->info, 1, m->vt->load, m->self, &m->alloc, &m->g, &m->ws);
}

static void zt_close(zt_model *m) {
    if (m->ws) ork_wstore_destroy(m->ws);
    if (m->g) ork_graph_destroy(m->g);
    if (m->self) m->vt->destroy(m->self);
    if (m->alloc) ork_alloc_destroy(m->alloc);
    memset(m, 0, sizeof *m);
}

static float *fx_f32(const char *name, size_t *n) {
    const ork_st_tensor *t = ork_st_find(g_fx, name);
    if (!t) { printf("\n  fixture lacks %s", name); return NULL; }
    size_t k = (size_t)ork_st_nelements(t);
    float *d = malloc(k * sizeof *d);
    if (d && ork_st_read_f32(t, d) != ORK_OK) { free(d); return NULL; }
    if (n) *n = k;
    return d;
}

typedef struct inputs { ork_tensor *tok, *txt; float ts[2]; } inputs;

static ork_status leaf(zt_model *m, const char *name, int grad, ork_tensor **out) {
    const ork_st_tensor *t = ork_st_find(g_fx, name);
    float *h = fx_f32(name, NULL);
    if (!t || !h) { free(h); return ORK_E_FORMAT; }
    ork_status s = ork_tensor_api_table()->from_host(m->g, ORK_F32, t->ndim, t->shape, h, out);
    free(h);
    if (s == ORK_OK) (*out)->requires_grad = grad;
    return s;
}

/* begin + every block on the fixture's inputs (grid 3x5); *pred = carry slot 0 */
static ork_status forward(zt_model *m, int grad, inputs *in, ork_tensor **pred) {
    ORK_TRY(ork_graph_reset(m->g));
    ORK_TRY(leaf(m, "in.tokens", grad, &in->tok));
    ORK_TRY(leaf(m, "in.txt", grad, &in->txt));
    float *ts = fx_f32("in.timesteps", NULL);
    if (!ts) return ORK_E_FORMAT;
    memcpy(in->ts, ts, sizeof in->ts);
    free(ts);
    ork_model_inputs mi = {0};
    mi.abi = (ork_abi)ORK_ABI_INIT(ork_model_inputs);
    mi.tokens = in->tok;
    mi.txt = in->txt;
    mi.h_tokens = 3;
    mi.w_tokens = 5;
    mi.timesteps_host = in->ts;
    int prev = ork_graph_set_grad(m->g, grad);
    ork_carry c;
    ork_status s = m->vt->begin(m->self, m->g, &mi, &c);
    for (int i = 0; s == ORK_OK && i < m->info.n_blocks; i++) s = m->vt->block(m->self, m->g, i, &c);
    ork_graph_set_grad(m->g, prev);
    if (s == ORK_OK) *pred = c.t[0];
    return s;
}

static ork_status backward_R(zt_model *m, ork_tensor *pred) {
    ork_tensor *R;
    ORK_TRY(leaf(m, "in.R", 0, &R));
    return ork_backward_from(m->g, 1, &pred, &R);
}

static int cmp(zt_model *m, const char *ref_name, const ork_tensor *t, double a, double r) {
    size_t n = 0;
    double *ref = ork_test_st_f64(g_fx, ref_name, &n);
    float *got = t ? ork_test_host(m->g, t) : NULL;
    int ok = ref && got && (size_t)ork_tensor_numel(t) == n && ork_test_cmp(ref_name, got, ref, n, a, r, NULL);
    if (!t) printf("\n    %s: no tensor (gradient never produced)", ref_name);
    free(ref);
    free(got);
    return ok;
}

static int cmp_S(zt_model *m, const char *ref_name, const ork_tensor *pred) {
    size_t n = 0;
    float *p = ork_test_host(m->g, pred), *R = fx_f32("in.R", &n);
    double *S = ork_test_st_f64(g_fx, ref_name, NULL);
    int ok = 0;
    if (p && R && S) {
        double s = 0, M = 0;
        for (size_t i = 0; i < n; i++) { s += (double)p[i] * R[i]; M = fmax(M, fabs((double)p[i] * R[i])); }
        ok = fabs(s - S[0]) <= PRED_A * M * sqrt((double)n) + PRED_R * fabs(S[0]);
        printf("\n    %-40s %.9g vs %.9g%s", ref_name, s, S[0], ok ? "" : "  FAIL");
    }
    free(p); free(R); free(S);
    return ok;
}

/* ---- forward and gradients --------------------------------------------------------- */
static void test_grads(void) {
    zt_model m;
    ork_status s = zt_open("zimage:turbo", ZT_CKPT, &m);
    if (s == ORK_OK) s = zt_load(&m);
    CU_ASSERT_EQUAL_FATAL(s, ORK_OK);
    int nw = 0;
    for (size_t i = 0; i < ork_st_count(g_fx); i++) {
        const char *k = ork_st_at(g_fx, i)->name;
        if (strncmp(k, "ref.grad.w.", 11)) continue;
        ork_tensor *w = ork_wstore_find(m.ws, k + 11);
        CU_ASSERT_PTR_NOT_NULL(w);
        if (!w) continue;
        w->flags |= ORK_TF_PARAM;
        w->requires_grad = 1;
        nw++;
    }
    CU_ASSERT(nw >= 10);
    inputs in;
    ork_tensor *pred = NULL;
    s = forward(&m, 1, &in, &pred);
    CU_ASSERT_EQUAL_FATAL(s, ORK_OK);
    CU_ASSERT(cmp(&m, "ref.pred", pred, PRED_A, PRED_R));
    CU_ASSERT(cmp_S(&m, "ref.S", pred));
    CU_ASSERT_EQUAL_FATAL(backward_R(&m, pred), ORK_OK);
    CU_ASSERT(cmp(&m, "ref.grad.in.tokens", in.tok->grad, GRAD_A, GRAD_R));
    CU_ASSERT(cmp(&m, "ref.grad.in.txt", in.txt->grad, GRAD_A, GRAD_R));
    for (size_t i = 0; i < ork_st_count(g_fx); i++) {
        const char *k = ork_st_at(g_fx, i)->name;
        if (strncmp(k, "ref.grad.w.", 11)) continue;
        ork_tensor *w = ork_wstore_find(m.ws, k + 11);
        CU_ASSERT(cmp(&m, k, w ? w->grad : NULL, GRAD_A, GRAD_R));
    }
    zt_close(&m);
    printf("\n  ");
}

/* ---- LoRA ----------------------------------------------------------------------------- */
static void test_lora(void) {
    zt_model m;
    ork_status s = zt_open("zimage:turbo", ZT_CKPT, &m);
    if (s == ORK_OK) s = zt_load(&m);
    CU_ASSERT_EQUAL_FATAL(s, ORK_OK);
    static const char *const mods[2] = {"layers.0.attention.to_q", "context_refiner.0.feed_forward.w2"};
    ork_lora l[2];
    memset(l, 0, sizeof l);
    char name[200];
    for (int i = 0; i < 2 && s == ORK_OK; i++) {
        for (int p = 0; p < 2 && s == ORK_OK; p++) {
            snprintf(name, sizeof name, "lora.%s.%s", mods[i], p ? "up" : "down");
            const ork_st_tensor *t = ork_st_find(g_fx, name);
            float *h = fx_f32(name, NULL);
            ork_tensor **dst = p ? &l[i].up : &l[i].down;
            s = t && h ? ork_tensor_new(m.alloc, "lora", ORK_F32, 2, t->shape, 1, dst) : ORK_E_FORMAT;
            if (s == ORK_OK) memcpy(ork_tensor_data(*dst), h, ork_tensor_nbytes(*dst));
            free(h);
        }
        snprintf(name, sizeof name, "lora.%s.alpha", mods[i]);
        float *alpha = fx_f32(name, NULL);
        if (s == ORK_OK && alpha) l[i].scale = alpha[0] / (float)l[i].down->shape[0];
        free(alpha);
        snprintf(name, sizeof name, "%s.weight", mods[i]);
        ork_tensor *w = ork_wstore_find(m.ws, name);
        CU_ASSERT_PTR_NOT_NULL(w);
        if (w) w->lora = &l[i];
    }
    CU_ASSERT_EQUAL_FATAL(s, ORK_OK);
    inputs in;
    ork_tensor *pred = NULL;
    s = forward(&m, 1, &in, &pred);
    CU_ASSERT_EQUAL_FATAL(s, ORK_OK);
    in.txt->requires_grad = 0;
    CU_ASSERT(cmp(&m, "ref.lora.pred", pred, PRED_A, PRED_R));
    CU_ASSERT(cmp_S(&m, "ref.lora.S", pred));
    CU_ASSERT_EQUAL(backward_R(&m, pred), ORK_OK);
    CU_ASSERT(cmp(&m, "ref.lora.grad.in.tokens", in.tok->grad, GRAD_A, GRAD_R));
    for (int i = 0; i < 2; i++) {
        snprintf(name, sizeof name, "ref.lora.grad.%s.down", mods[i]);
        CU_ASSERT(cmp(&m, name, l[i].down->grad, GRAD_A, GRAD_R));
        snprintf(name, sizeof name, "ref.lora.grad.%s.up", mods[i]);
        CU_ASSERT(cmp(&m, name, l[i].up->grad, GRAD_A, GRAD_R));
    }
    for (int i = 0; i < 2; i++) { ork_tensor_free(l[i].down); ork_tensor_free(l[i].up); }
    zt_close(&m);
    printf("\n  ");
}

/* ---- the original / ComfyUI single file ------------------------------------------------ */
/* The fixture checkpoint rewritten in the single-file layout under prefix:
 * to_q/to_k/to_v fused into qkv (rows q, k, v), to_out.0 -> out, norm_q/k ->
 * q_norm/k_norm, all_x_embedder.2-1. -> x_embedder., all_final_layer.2-1. ->
 * final_layer.; plus a norm_final.weight no one reads. bad: "shape" gives
 * layers.1's qkv one row too many, "missing" drops layers.0.ffn_norm1. */
static int write_single(const char *path, const char *prefix, const char *bad) {
    ork_st_file *in = NULL;
    ork_st_writer *w = NULL;
    if (ork_st_open(ZT_CKPT, &in) != ORK_OK || ork_st_writer_new(&w) != ORK_OK) return 0;
    int ok = 1, nk = 0;
    void *keep[64];
    static uint16_t extra[32];
    for (size_t i = 0; ok && i < ork_st_count(in); i++) {
        const ork_st_tensor *t = ork_st_at(in, i);
        char n[300], tail[200];
        const char *to_q = strstr(t->name, ".attention.to_q.");
        if (strstr(t->name, ".attention.to_k.") || strstr(t->name, ".attention.to_v.")) continue;
        if (bad && !strcmp(bad, "missing") && !strcmp(t->name, "layers.0.ffn_norm1.weight")) continue;
        if (to_q) {
            /* q, k, v stacked along dim 0 */
            char base[200];
            snprintf(base, sizeof base, "%.*s", (int)(to_q - t->name), t->name);
            int extra_row = bad && !strcmp(bad, "shape") && !strcmp(base, "layers.1");
            size_t part = t->nbytes;
            unsigned char *buf = calloc(1, 3 * part + (extra_row ? (size_t)t->shape[1] * 2 : 0));
            if (!buf || nk == 64) { free(buf); ok = 0; break; }
            keep[nk++] = buf;
            static const char *const qkv[3] = {"to_q", "to_k", "to_v"};
            for (int k = 0; k < 3; k++) {
                char src[300];
                snprintf(src, sizeof src, "%s.attention.%s.weight", base, qkv[k]);
                const ork_st_tensor *s = ork_st_find(in, src);
                if (!s || s->nbytes != part) { ok = 0; break; }
                memcpy(buf + k * part, s->data, part);
            }
            int64_t shape[2] = {3 * t->shape[0] + extra_row, t->shape[1]};
            snprintf(n, sizeof n, "%s%s.attention.qkv.weight", prefix, base);
            ok = ok && ork_st_writer_add(w, n, t->dtype, 2, shape, buf,
                                         (uint64_t)shape[0] * (uint64_t)shape[1] * 2) == ORK_OK;
            continue;
        }
        snprintf(tail, sizeof tail, "%s", t->name);
        char *at;
        if ((at = strstr(tail, ".attention.to_out.0."))) memmove(at + 15, at + 20, strlen(at + 20) + 1), memcpy(at, ".attention.out.", 15);
        if ((at = strstr(tail, ".attention.norm_q."))) memcpy(at, ".attention.q_norm.", 18);
        if ((at = strstr(tail, ".attention.norm_k."))) memcpy(at, ".attention.k_norm.", 18);
        if (!strncmp(tail, "all_x_embedder.2-1.", 19)) snprintf(n, sizeof n, "%sx_embedder.%s", prefix, tail + 19);
        else if (!strncmp(tail, "all_final_layer.2-1.", 20)) snprintf(n, sizeof n, "%sfinal_layer.%s", prefix, tail + 20);
        else snprintf(n, sizeof n, "%s%s", prefix, tail);
        ok = ork_st_writer_add(w, n, t->dtype, t->ndim, t->shape, t->data, t->nbytes) == ORK_OK;
    }
    char n[200];
    int64_t d = 32;
    snprintf(n, sizeof n, "%snorm_final.weight", prefix);
    ok = ok && ork_st_writer_add(w, n, ORK_BF16, 1, &d, extra, sizeof(uint16_t) * 32) == ORK_OK;
    ok = ok && ork_st_writer_commit(w, path) == ORK_OK;
    for (int i = 0; i < nk; i++) free(keep[i]);
    ork_st_writer_free(w);
    ork_st_close(in);
    return ok;
}

static float *pred_of(const char *path) {
    zt_model m;
    float *out = NULL;
    ork_status s = zt_open("zimage-turbo", path, &m);
    if (s == ORK_OK) s = zt_load(&m);
    inputs in;
    ork_tensor *pred;
    if (s == ORK_OK) s = forward(&m, 0, &in, &pred);
    if (s == ORK_OK) out = ork_test_host(m.g, pred);
    CU_ASSERT_EQUAL(s, ORK_OK);
    zt_close(&m);
    return out;
}

static void test_single_file(void) {
    char path[256];
    snprintf(path, sizeof path, "%s/z_image_tiny_comfy.safetensors", g_tmp);
    CU_ASSERT_FATAL(write_single(path, "model.diffusion_model.", NULL));
    float *pd = pred_of(ZT_CKPT), *ps = pred_of(path);
    size_t n = 0;
    double *ref = ork_test_st_f64(g_fx, "ref.pred", &n);
    CU_ASSERT_PTR_NOT_NULL(pd);
    CU_ASSERT_PTR_NOT_NULL(ps);
    if (pd && ps && ref) {
        size_t diff = 0;
        for (size_t i = 0; i < n; i++) diff += memcmp(&pd[i], &ps[i], sizeof(float)) != 0;
        printf("\n    single file vs diffusers: %zu of %zu prediction values differ", diff, n);
        CU_ASSERT_EQUAL(diff, 0);
        CU_ASSERT(ork_test_cmp("ref.pred (single file)", ps, ref, n, PRED_A, PRED_R, NULL));
    }
    free(pd); free(ps); free(ref);
    printf("\n  ");
}

/* ---- a repo id in the local Hugging Face cache ------------------------------------------------ */
static int mkdirs(const char *p) {
    char b[512];
    snprintf(b, sizeof b, "%s", p);
    for (char *q = b + 1; *q; q++)
        if (*q == '/') { *q = 0; mkdir(b, 0755); *q = '/'; }
    return mkdir(b, 0755) == 0 || errno == EEXIST;
}

/* models--Tongyi-MAI--Z-Image-Turbo/snapshots/<refs/main>/transformer/ holding the
 * fixture: the repo id resolves there, the snapshot becomes source_dir (where
 * the text encoder is looked for), and the config's arch zimage:turbo (which
 * reaches the registry whole) selects Turbo's component and schedule. Turbo
 * comes from the arch (or model_kwargs.distilled), never the path: the same
 * folder under arch zimage or zimage:deturbo is the undistilled model. */
static void test_hub_cache(void) {
    char hub[256], d[512], f[600];
    snprintf(hub, sizeof hub, "%s/hub", g_tmp);
    snprintf(d, sizeof d, "%s/models--Tongyi-MAI--Z-Image-Turbo/refs", hub);
    CU_ASSERT_FATAL(mkdirs(d));
    snprintf(f, sizeof f, "%s/main", d);
    FILE *r = fopen(f, "w");
    CU_ASSERT_FATAL(r != NULL);
    fputs("0123abcd\n", r);
    fclose(r);
    snprintf(d, sizeof d, "%s/models--Tongyi-MAI--Z-Image-Turbo/snapshots/0123abcd/transformer", hub);
    CU_ASSERT_FATAL(mkdirs(d));
    snprintf(f, sizeof f, "%s/diffusion_pytorch_model.safetensors", d);
    CU_ASSERT_FATAL(symlink(ZT_CKPT, f) == 0);
    const char *old = getenv("HF_HUB_CACHE");
    char *keep = old ? strdup(old) : NULL;
    setenv("HF_HUB_CACHE", hub, 1);
    zt_model m;
    ork_status s = zt_open("zimage:turbo", "Tongyi-MAI/Z-Image-Turbo", &m);
    CU_ASSERT_EQUAL(s, ORK_OK);
    if (s == ORK_OK) {
        CU_ASSERT_STRING_EQUAL(m.pc->c->id, "org.orakul.zimage-turbo");
        const char *sd = m.info.source_dir;
        printf("\n    source_dir %s", sd ? sd : "(null)");
        CU_ASSERT(sd && strstr(sd, "/snapshots/0123abcd") && !strstr(sd, "transformer"));
        CU_ASSERT_EQUAL(ork_distilled_steps(&m.info), 8);
        CU_ASSERT(m.info.schedule->sample_flags & ORK_SAMPLE_NO_CFG);
        s = zt_load(&m);
        inputs in;
        ork_tensor *pred;
        if (s == ORK_OK) s = forward(&m, 0, &in, &pred);
        CU_ASSERT_EQUAL(s, ORK_OK);
        if (s == ORK_OK) CU_ASSERT(cmp(&m, "ref.pred", pred, PRED_A, PRED_R));
    }
    zt_close(&m);
    /* the path names Turbo, the arch does not: no guess from the path */
    static const char *const base[] = {"zimage", "zimage:deturbo", NULL};
    for (int i = 0; base[i]; i++) {
        s = zt_open(base[i], "Tongyi-MAI/Z-Image-Turbo", &m);
        CU_ASSERT_EQUAL(s, ORK_OK);
        if (s == ORK_OK) {
            CU_ASSERT_STRING_EQUAL(m.pc->c->id, "org.orakul.zimage");
            CU_ASSERT_EQUAL(ork_distilled_steps(&m.info), 0);
            CU_ASSERT_FALSE(m.info.schedule->sample_flags & ORK_SAMPLE_NO_CFG);
        }
        zt_close(&m);
    }
    if (keep) setenv("HF_HUB_CACHE", keep, 1);
    else unsetenv("HF_HUB_CACHE");
    free(keep);
    printf("\n  ");
}

/* ---- malformed checkpoints: one line naming the file and the tensor ------------------ */
static char g_line[1024];
static void sink(ork_log_level lvl, const char *line, void *user) {
    (void)user;
    if (lvl >= ORK_LOG_ERROR && !g_line[0]) snprintf(g_line, sizeof g_line, "%s", line);
}

static void expect_refused(const char *path, const char *want1, const char *want2) {
    zt_model m;
    g_line[0] = 0;
    ork_log_set_sink(sink, NULL);
    ork_status s = zt_open("zimage", path, &m);
    ork_log_set_sink(NULL, NULL);
    printf("\n    %s -> %d: %s", path, (int)s, g_line);
    CU_ASSERT_NOT_EQUAL(s, ORK_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_line, want1));
    if (want2) CU_ASSERT_PTR_NOT_NULL(strstr(g_line, want2));
    zt_close(&m);
}

static void test_malformed(void) {
    char path[256];
    snprintf(path, sizeof path, "%s/bad_shape.safetensors", g_tmp);
    CU_ASSERT_FATAL(write_single(path, "", "shape"));
    expect_refused(path, path, "layers.1.attention.qkv.weight' has shape (97, 32), want (96, 32)");
    snprintf(path, sizeof path, "%s/missing.safetensors", g_tmp);
    CU_ASSERT_FATAL(write_single(path, "diffusion_model.", "missing"));
    expect_refused(path, path, "missing tensor 'diffusion_model.layers.0.ffn_norm1.weight'");
    /* not a Z-Image file at all (the FLUX.1 fixture) */
    expect_refused(ORK_SOURCE_DIR "/tests/fixtures/flux1_small_bfl.safetensors", "not a Z-Image transformer", NULL);
    /* a truncated file: the safetensors service's own line names it */
    snprintf(path, sizeof path, "%s/truncated.safetensors", g_tmp);
    FILE *a = fopen(ZT_CKPT, "rb"), *b = fopen(path, "wb");
    CU_ASSERT_FATAL(a && b);
    char buf[4096];
    size_t k = fread(buf, 1, sizeof buf, a);
    fwrite(buf, 1, k, b);
    fclose(a);
    fclose(b);
    expect_refused(path, "truncated.safetensors", NULL);
    expect_refused("/nonexistent/zimage", "/nonexistent/zimage", "no such file");
    expect_refused("preset:zimage-xl", "unknown Z-Image preset 'zimage-xl'", NULL);
    setenv("HF_HUB_CACHE", g_tmp, 1);
    expect_refused("Tongyi-MAI/Z-Image-Nowhere", "'Tongyi-MAI/Z-Image-Nowhere': not a file or folder, and not in the "
                   "Hugging Face cache", "nothing is downloaded");
    unsetenv("HF_HUB_CACHE");
    printf("\n  ");
}

/* ---- declarations and the sampler ------------------------------------------------------ */
static void test_declarations(void) {
    zt_model m;
    CU_ASSERT_EQUAL_FATAL(zt_open("zimage:turbo", "preset:zimage-turbo", &m), ORK_OK);
    const ork_model_info *in = &m.info;
    CU_ASSERT(ork_model_info_has_blocks(in));
    CU_ASSERT_EQUAL(in->n_blocks, 1 + 2 + 2 + 30 + 1);
    CU_ASSERT_EQUAL(in->token_channels, 64);
    CU_ASSERT_EQUAL(in->context_dim, 2560);
    CU_ASSERT_EQUAL(in->pixels_per_token, 0); /* until the FLUX.1 VAE codec component */
    CU_ASSERT_STRING_EQUAL(in->block_names[1], "noise_refiner.0");
    CU_ASSERT_STRING_EQUAL(in->block_names[3], "context_refiner.0");
    CU_ASSERT_STRING_EQUAL(in->block_names[5], "layers.0");
    CU_ASSERT_EQUAL(in->blocks[0].kind, ORK_BLOCK_KIND_INPUT);
    CU_ASSERT_EQUAL(in->blocks[1].attn_tokens, ORK_TOKENS_IMG);
    CU_ASSERT_EQUAL(in->blocks[3].attn_tokens, ORK_TOKENS_TXT);
    CU_ASSERT_EQUAL(in->blocks[5].attn_tokens, ORK_TOKENS_JOINT);
    CU_ASSERT_EQUAL(in->blocks[35].kind, ORK_BLOCK_KIND_OUTPUT);
    int64_t params = 0;
    int n_attn = 0, n_one = 0;
    for (int i = 0; i < in->n_weights; i++) {
        const ork_weight_decl *d = &in->weights[i];
        int64_t k = 1;
        for (int j = 0; j < d->ndim; j++) k *= d->shape[j];
        params += k;
        n_attn += (d->flags & ORK_WEIGHT_ATTN) != 0;
        n_one += ORK_WEIGHT_TOKENS_OF(d->flags) == ORK_TOKENS_ONE;
    }
    /* diffusers' ZImageTransformer2DModel at the real config: 6,154,908,736 parameters */
    printf("\n    zimage-turbo: %d weights, %lld parameters", in->n_weights, (long long)params);
    CU_ASSERT_EQUAL(in->n_weights, 521);
    CU_ASSERT_EQUAL(params, 6154908736LL);
    CU_ASSERT_EQUAL(n_attn, 34 * 6);
    CU_ASSERT_EQUAL(n_one, 2 * 32 + 4 + 2);
    /* LoRA keys: diffusion_model.<diffusers name>.lora_A/B */
    CU_ASSERT_STRING_EQUAL(in->lora_format, "peft");
    CU_ASSERT_STRING_EQUAL(in->lora_prefix, "diffusion_model.");
    char key[200];
    ork_lora_key_prefixed("layers.3.attention.to_out.0", in->lora_format, in->lora_prefix, key, sizeof key);
    CU_ASSERT_STRING_EQUAL(key, "diffusion_model.layers.3.attention.to_out.0");
    /* schedule: flow, fixed shift 3, 8 steps without CFG */
    CU_ASSERT_EQUAL(in->schedule->prediction, ORK_PREDICT_FLOW);
    CU_ASSERT_EQUAL(in->schedule->time_shift, ORK_TIME_SHIFT_FIXED);
    CU_ASSERT_EQUAL(ork_distilled_steps(in), 8);
    CU_ASSERT(in->schedule->sample_flags & ORK_SAMPLE_NO_CFG);
    ork_shift_rule r = ork_shift_for(in);
    for (int n = 8; n <= 30; n += 22) {
        char name[64];
        snprintf(name, sizeof name, "ref.sched.sigmas.%d", n);
        size_t k = 0;
        double *ref = ork_test_st_f64(g_fx, name, &k), ts[31];
        CU_ASSERT_EQUAL_FATAL(k, (size_t)n + 1);
        ork_sample_schedule(&r, n, 4096, ts);
        double worst = 0;
        for (int i = 0; i <= n; i++) worst = fmax(worst, fabs(ts[i] - ref[i]));
        printf("\n    sampler %d steps vs FlowMatchEulerDiscreteScheduler: max |diff| %.3g", n, worst);
        CU_ASSERT(worst < 1e-6); /* the reference's sigmas are stored in F32 */
        free(ref);
    }
    zt_close(&m);
    /* the undistilled model: the config's steps, CFG */
    CU_ASSERT_EQUAL_FATAL(zt_open("zimage", "preset:zimage", &m), ORK_OK);
    CU_ASSERT_EQUAL(ork_distilled_steps(&m.info), 0);
    CU_ASSERT_FALSE(m.info.schedule->sample_flags & ORK_SAMPLE_NO_CFG);
    zt_close(&m);
    printf("\n  ");
}

static const ork_test_case cases[] = {
    {"forward and gradients vs diffusers", test_grads},
    {"LoRA gradients vs diffusers", test_lora},
    {"ComfyUI single file == diffusers folder", test_single_file},
    {"a repo id in the Hugging Face cache", test_hub_cache},
    {"malformed checkpoints", test_malformed},
    {"declarations and sampler timesteps", test_declarations},
    {NULL, NULL},
};
ORK_TEST_MAIN("zimage_ref", setup, teardown, cases)
