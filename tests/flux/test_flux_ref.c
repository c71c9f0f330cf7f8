/* tests/flux/test_flux_ref.c — the FLUX plugin against the independent
 * PyTorch reference (tests/reference/flux_ref.py, fixtures
 * tests/fixtures/flux{1,2}_small*.safetensors): the plugin loaded through the
 * registry opens the BFL checkpoint, loads it into an F32 weight store on the
 * CPU graph, runs begin + every block on the fixture inputs, and the
 * prediction, dS/d(tokens, txt, vec) and dS/d(listed weights) for
 * S = sum(pred · R) are compared with the float64 reference; then the LoRA
 * case (ork_lora with the fixture's down/up/scale), the diffusers-format
 * FLUX.1 checkpoint (must give the BFL prediction bit for bit), and the
 * runner's per-block checkpointed step (gradients equal the straight
 * backward).
 *
 * Tolerances (M = max|ref| of each tensor, per element):
 *   prediction, S:   |c - ref| <= 5e-5·M + 1e-4·|ref|
 *   gradients:       |c - ref| <= 3e-4·M + 1e-3·|ref|
 * Why: the C side computes in F32 what the reference computes in F64 from the
 * same F32 weights and inputs. torch's own F32 run of the identical graph is
 * off by 1.8e-6·M (pred) and <= 2.8e-5·M (grads) (flux_ref.py prints it;
 * fixture metadata worst_f32_rel 1.9e-5 / 2.8e-5), and a different F32
 * summation order (blocked GEMM, tree reductions) moves results by the same
 * order. So the bounds leave ~25x (pred) and ~10x (grads) margin, while any
 * mapping mistake (chunk order, shift/scale swap, rope pairing, a missing norm
 * scale, the LoRA scale, a q/k/v split) moves values by >= 1e-2·M. Measured
 * errors are printed per tensor. */
#include "flux_test_util.h"

#include "train/runner.h"

#ifdef FT_GPU
/* CUDA, BF16 activations and weights (8 mantissa bits, eps 2^-8 = 3.9e-3):
 * through ~6 blocks of layernorm, modulation and attention the F32 reference
 * moves by up to a few eps relative to the tensor's scale; a mapping bug moves
 * it by O(M). */
#define PRED_A 3e-2
#define PRED_R 3e-2
#define GRAD_A 6e-2
#define GRAD_R 6e-2
#else
#define PRED_A 5e-5
#define PRED_R 1e-4
#define GRAD_A 3e-4
#define GRAD_R 1e-3
#endif

typedef struct inputs {
    ork_tensor *tok, *txt, *vec;
    float ts[2], gd[2];
    int64_t B, N, T;
} inputs;

static int grid_h = 4; /* the token grid's rows (the fixtures' 16 tokens) */

/* Upload the fixture inputs onto the graph (after a reset); grad: make
 * tokens, txt and vec leaves that require grad. */
static ork_status make_inputs(ft_model *m, const ork_st_file *fx, int grad, inputs *in, ork_model_inputs *mi) {
    const ork_tensor_api *ta = ork_tensor_api_table();
    static const char *const names[3] = {"in.tokens", "in.txt", "in.vec"};
    ork_tensor **dst[3] = {&in->tok, &in->txt, &in->vec};
    memset(in, 0, sizeof *in);
    for (int k = 0; k < 3; k++) {
        const ork_st_tensor *t = ork_st_find(fx, names[k]);
        if (!t) continue; /* FLUX.2 has no vec */
        float *h = ft_f32(fx, names[k], NULL);
        if (!h) return ORK_E_FORMAT;
        ork_status s = ta->from_host(m->g, ORK_F32, t->ndim, t->shape, h, dst[k]);
        free(h);
        ORK_TRY(s);
        (*dst[k])->requires_grad = grad;
    }
    /* the model sees the graph's activation dtype; the F32 leaves keep the grads */
    ork_tensor *mt[3] = {in->tok, in->txt, in->vec};
    for (int k = 0; k < 3; k++)
        ORK_TRY(ft_act(m->g, &mt[k]));
    float *ts = ft_f32(fx, "in.timesteps", NULL), *gd = ft_f32(fx, "in.guidance", NULL);
    if (!ts || !gd) { free(ts); free(gd); return ORK_E_FORMAT; }
    memcpy(in->ts, ts, sizeof in->ts);
    memcpy(in->gd, gd, sizeof in->gd);
    free(ts);
    free(gd);
    in->B = ta->dim(in->tok, 0);
    in->N = ta->dim(in->tok, 1);
    in->T = ta->dim(in->txt, 1);
    memset(mi, 0, sizeof *mi);
    mi->abi = (ork_abi)ORK_ABI_INIT(ork_model_inputs);
    mi->tokens = mt[0];
    mi->txt = mt[1];
    mi->vec = mt[2];
    mi->h_tokens = grid_h; /* fixture grid "4x4"; the rope case also reads it as 2x8 */
    mi->w_tokens = 16 / grid_h;
    mi->timesteps_host = in->ts;
    mi->guidance_host = in->gd;
    return ORK_OK;
}

/* begin + every block with grad on or off; *pred = the final carry slot 0. */
static ork_status forward(ft_model *m, const ork_st_file *fx, int grad, inputs *in, ork_tensor **pred) {
    ork_model_inputs mi;
    ORK_TRY(ork_graph_reset(m->g));
    ORK_TRY(make_inputs(m, fx, grad, in, &mi));
    int prev = ork_graph_set_grad(m->g, grad);
    ork_carry c;
    ork_status s = m->vt->begin(m->self, m->g, &mi, &c);
    for (int i = 0; s == ORK_OK && i < m->info.n_blocks; i++) s = m->vt->block(m->self, m->g, i, &c);
    ork_graph_set_grad(m->g, prev);
    if (s == ORK_OK) *pred = c.t[0];
    return s;
}

/* d pred = R, backward. */
static ork_status backward_R(ft_model *m, const ork_st_file *fx, ork_tensor *pred) {
    const ork_st_tensor *t = ork_st_find(fx, "in.R");
    float *R = ft_f32(fx, "in.R", NULL);
    if (!t || !R) { free(R); return ORK_E_FORMAT; }
    ork_tensor *Rt;
    ork_status s = ork_tensor_api_table()->from_host(m->g, ORK_F32, t->ndim, t->shape, R, &Rt);
    free(R);
    ORK_TRY(s);
    return ork_backward_from(m->g, 1, &pred, &Rt);
}

static int cmp_tensor(ft_model *m, const ork_st_file *fx, const char *ref_name, const ork_tensor *t, double a,
                      double r) {
    size_t n = 0;
    double *ref = ft_f64(fx, ref_name, &n);
    float *got = t ? ft_host(m->g, t) : NULL;
    int ok = ref && got && (size_t)ork_tensor_numel(t) == n && ft_cmp(ref_name, got, ref, n, a, r);
    if (!t) printf("\n    %s: no tensor (gradient never produced)", ref_name);
    free(ref);
    free(got);
    return ok;
}

/* S = sum(pred · R) on the host in double, against ref.S. */
static int cmp_S(ft_model *m, const ork_st_file *fx, const char *ref_name, const ork_tensor *pred) {
    size_t n = 0;
    float *p = ft_host(m->g, pred), *R = ft_f32(fx, "in.R", &n);
    double *S = ft_f64(fx, ref_name, NULL);
    int ok = 0;
    if (p && R && S) {
        double s = 0, M = 0;
        for (size_t i = 0; i < n; i++) { s += (double)p[i] * R[i]; M = fmax(M, fabs((double)p[i] * R[i])); }
        ok = fabs(s - S[0]) <= PRED_A * M * sqrt((double)n) + PRED_R * fabs(S[0]);
        printf("\n    %-52s %.9g vs %.9g%s", ref_name, s, S[0], ok ? "" : "  FAIL");
    }
    free(p);
    free(R);
    free(S);
    return ok;
}

/* Every "ref.grad.w.<name>" of the fixture: make <name> trainable. */
static int mark_weights(ft_model *m, const ork_st_file *fx) {
    int n = 0;
    for (size_t i = 0; i < ork_st_count(fx); i++) {
        const char *k = ork_st_at(fx, i)->name;
        if (strncmp(k, "ref.grad.w.", 11)) continue;
        ork_tensor *w = ork_wstore_find(m->ws, k + 11);
        CU_ASSERT_PTR_NOT_NULL(w);
        if (!w) { printf("\n  weight store lacks %s", k + 11); continue; }
        w->flags |= ORK_TF_PARAM;
        w->requires_grad = 1;
        n++;
    }
    return n;
}

static int cmp_weight_grads(ft_model *m, const ork_st_file *fx) {
    int ok = 1;
    for (size_t i = 0; i < ork_st_count(fx); i++) {
        const char *k = ork_st_at(fx, i)->name;
        if (strncmp(k, "ref.grad.w.", 11)) continue;
        ork_tensor *w = ork_wstore_find(m->ws, k + 11);
        ok &= cmp_tensor(m, fx, k, w ? w->grad : NULL, GRAD_A, GRAD_R);
    }
    return ok;
}

/* The fixture <tag>.safetensors (*fx) and the model of <tag>_bfl.safetensors,
 * opened and loaded (its status; *fx NULL when the fixture did not open). */
static ork_status open_case(const char *tag, ork_st_file **fx, ft_model *m) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.safetensors", FT_FIXTURES, tag);
    *fx = NULL;
    if (ork_st_open(path, fx) != ORK_OK) return ORK_E_IO;
    snprintf(path, sizeof path, "%s/%s_bfl.safetensors", FT_FIXTURES, tag);
    ork_status s = ft_open(path, NULL, m);
    return s == ORK_OK ? ft_load(m) : s;
}

static void case_grads(const char *tag) {
    ork_st_file *fx;
    ft_model m;
    ork_status s = open_case(tag, &fx, &m);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fx);
    CU_ASSERT_EQUAL(s, ORK_OK);
    if (s == ORK_OK) {
        CU_ASSERT(mark_weights(&m, fx) >= 10);
        inputs in;
        ork_tensor *pred = NULL;
        s = forward(&m, fx, 1, &in, &pred);
        CU_ASSERT_EQUAL_FATAL(s, ORK_OK);
        CU_ASSERT(cmp_tensor(&m, fx, "ref.pred", pred, PRED_A, PRED_R));
        CU_ASSERT(cmp_S(&m, fx, "ref.S", pred));
        CU_ASSERT_EQUAL(backward_R(&m, fx, pred), ORK_OK);
        CU_ASSERT(cmp_tensor(&m, fx, "ref.grad.in.tokens", in.tok->grad, GRAD_A, GRAD_R));
        CU_ASSERT(cmp_tensor(&m, fx, "ref.grad.in.txt", in.txt->grad, GRAD_A, GRAD_R));
        if (in.vec) CU_ASSERT(cmp_tensor(&m, fx, "ref.grad.in.vec", in.vec->grad, GRAD_A, GRAD_R));
        CU_ASSERT(cmp_weight_grads(&m, fx));
    }
    ft_close(&m);
    ork_st_close(fx);
    printf("\n  ");
}

/* ---- LoRA ----------------------------------------------------------------------- */
typedef struct lora_set {
    int n;
    char module[2][96];
    ork_lora l[2];
} lora_set;

/* Attach the fixture's adapters (lora.<module>.down/up/alpha) to the store's weights. */
static ork_status attach_lora(ft_model *m, const ork_st_file *fx, lora_set *ls) {
    memset(ls, 0, sizeof *ls);
    for (size_t i = 0; i < ork_st_count(fx) && ls->n < 2; i++) {
        const char *k = ork_st_at(fx, i)->name;
        size_t kl = strlen(k);
        if (strncmp(k, "lora.", 5) || kl < 11 || strcmp(k + kl - 5, ".down")) continue;
        lora_set *L = ls;
        snprintf(L->module[L->n], sizeof L->module[0], "%.*s", (int)(kl - 10), k + 5);
        char name[160];
        const char *mod = L->module[L->n];
        ork_lora *l = &L->l[L->n];
        static const char *const part[2] = {"down", "up"};
        for (int p = 0; p < 2; p++) {
            snprintf(name, sizeof name, "lora.%s.%s", mod, part[p]);
            const ork_st_tensor *t = ork_st_find(fx, name);
            if (!t) return ORK_E_FORMAT;
            ork_tensor **dst = p ? &l->up : &l->down;
            ORK_TRY(ork_tensor_new(m->alloc, "lora", ORK_F32, 2, t->shape, 1, dst));
            /* through a host buffer: the tensor lives on the graph's device */
            float *h = ft_f32(fx, name, NULL);
            if (!h) return ORK_E_FORMAT;
            ork_status st = m->g->be->memcpy_h2d(&m->g->k, ork_tensor_data(*dst), h, ork_tensor_nbytes(*dst));
            if (st == ORK_OK) st = m->g->be->sync(&m->g->k);
            free(h);
            ORK_TRY(st);
        }
        snprintf(name, sizeof name, "lora.%s.alpha", mod);
        float *alpha = ft_f32(fx, name, NULL);
        if (!alpha) return ORK_E_FORMAT;
        l->scale = alpha[0] / (float)l->down->shape[0];
        free(alpha);
        snprintf(name, sizeof name, "%s.weight", mod);
        ork_tensor *w = ork_wstore_find(m->ws, name);
        if (!w) return ORK_E_INVALID;
        w->lora = l;
        L->n++;
    }
    return ls->n == 2 ? ORK_OK : ORK_E_FORMAT;
}

static void free_lora(lora_set *ls) {
    for (int i = 0; i < ls->n; i++) {
        ork_tensor_free(ls->l[i].down);
        ork_tensor_free(ls->l[i].up);
    }
}

static void case_lora(const char *tag) {
    ork_st_file *fx;
    ft_model m;
    ork_status s = open_case(tag, &fx, &m);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fx);
    CU_ASSERT_EQUAL(s, ORK_OK);
    lora_set ls = {0};
    if (s == ORK_OK) s = attach_lora(&m, fx, &ls);
    CU_ASSERT_EQUAL(s, ORK_OK);
    if (s == ORK_OK) {
        inputs in;
        ork_tensor *pred = NULL;
        s = forward(&m, fx, 1, &in, &pred);
        CU_ASSERT_EQUAL_FATAL(s, ORK_OK);
        in.txt->requires_grad = 0;
        CU_ASSERT(cmp_tensor(&m, fx, "ref.lora.pred", pred, PRED_A, PRED_R));
        CU_ASSERT(cmp_S(&m, fx, "ref.lora.S", pred));
        CU_ASSERT_EQUAL(backward_R(&m, fx, pred), ORK_OK);
        CU_ASSERT(cmp_tensor(&m, fx, "ref.lora.grad.in.tokens", in.tok->grad, GRAD_A, GRAD_R));
        char name[200];
        for (int i = 0; i < ls.n; i++) {
            snprintf(name, sizeof name, "ref.lora.grad.%s.down", ls.module[i]);
            CU_ASSERT(cmp_tensor(&m, fx, name, ls.l[i].down->grad, GRAD_A, GRAD_R));
            snprintf(name, sizeof name, "ref.lora.grad.%s.up", ls.module[i]);
            CU_ASSERT(cmp_tensor(&m, fx, name, ls.l[i].up->grad, GRAD_A, GRAD_R));
        }
    }
    free_lora(&ls);
    ft_close(&m);
    ork_st_close(fx);
    printf("\n  ");
}

static void test_flux1_grads(void) { case_grads("flux1_small"); }
static void test_flux2_grads(void) { case_grads("flux2_small"); }
static void test_flux1_lora(void) { case_lora("flux1_small"); }
static void test_flux2_lora(void) { case_lora("flux2_small"); }

/* ---- diffusers-format FLUX.1 == BFL ------------------------------------------------ */
static float *pred_of(const char *ckpt, const ork_st_file *fx, ork_model_info *info) {
    ft_model m;
    float *out = NULL;
    ork_status s = ft_open(ckpt, NULL, &m);
    if (s == ORK_OK) s = ft_load(&m);
    if (s == ORK_OK) {
        inputs in;
        ork_tensor *pred;
        s = forward(&m, fx, 0, &in, &pred);
        if (s == ORK_OK) out = ft_host(m.g, pred);
        if (info) *info = m.info;
        if (info) info->variant = NULL; /* owned by the instance */
    }
    CU_ASSERT_EQUAL(s, ORK_OK);
    ft_close(&m);
    return out;
}

static void test_flux1_diffusers(void) {
    ork_st_file *fx = NULL;
    CU_ASSERT_FATAL(ork_st_open(FT_FIXTURES "/flux1_small.safetensors", &fx) == ORK_OK);
    ork_model_info ib, id;
    float *pb = pred_of(FT_FIXTURES "/flux1_small_bfl.safetensors", fx, &ib);
    float *pd = pred_of(FT_FIXTURES "/flux1_small_diffusers.safetensors", fx, &id);
    size_t n = 0;
    double *ref = ft_f64(fx, "ref.pred", &n);
    CU_ASSERT_PTR_NOT_NULL(pb);
    CU_ASSERT_PTR_NOT_NULL(pd);
    if (pb && pd && ref) {
        CU_ASSERT_EQUAL(ib.n_weights, id.n_weights);
        CU_ASSERT_EQUAL(ib.n_blocks, id.n_blocks);
        /* same F32 weights (re-fused q/k/v, un-swapped adaLN rows), same graph:
         * the same bits */
        size_t diff = 0;
        for (size_t i = 0; i < n; i++) diff += memcmp(&pb[i], &pd[i], sizeof(float)) != 0;
        printf("\n    diffusers vs BFL: %zu of %zu prediction values differ", diff, n);
        CU_ASSERT_EQUAL(diff, 0);
        CU_ASSERT(ft_cmp("ref.pred (diffusers checkpoint)", pd, ref, n, PRED_A, PRED_R));
    }
    free(pb);
    free(pd);
    free(ref);
    ork_st_close(fx);
    printf("\n  ");
}

/* ---- the runner's checkpointed step == straight backward ----------------------------- */
typedef struct loss_ctx { ork_tensor *R; } loss_ctx;

/* loss = sum(pred · R) */
static ork_status loss_fn(void *ctx, ork_graph *g, ork_tensor *pred, ork_tensor **loss) {
    const ork_ops *o = ork_ops_table();
    ork_tensor *p;
    ORK_TRY(o->mul(g, pred, ((loss_ctx *)ctx)->R, &p));
    return o->sum(g, p, loss);
}

/* One runner step; copies every trainable tensor's grad into g_out (F32). */
static ork_status runner_grads(ft_model *m, const ork_st_file *fx, ork_runner *r, int ckpt, ork_tensor **params,
                               int np, float **g_out, float *loss) {
    for (int i = 0; i < np; i++) ORK_TRY(ork_tensor_zero_grad(m->g, params[i]));
    ORK_TRY(ork_graph_reset(m->g));
    inputs in;
    ork_model_inputs mi;
    ORK_TRY(make_inputs(m, fx, 0, &in, &mi));
    const ork_st_tensor *t = ork_st_find(fx, "in.R");
    float *R = ft_f32(fx, "in.R", NULL);
    if (!t || !R) { free(R); return ORK_E_FORMAT; }
    loss_ctx lc;
    ork_status s = ork_tensor_api_table()->from_host(m->g, ORK_F32, t->ndim, t->shape, R, &lc.R);
    free(R);
    ORK_TRY(s);
    ORK_TRY(ork_runner_step(r, &mi, ckpt, loss_fn, &lc, loss));
    for (int i = 0; i < np; i++) {
        if (!params[i]->grad) return ORK_E_INTERNAL;
        /* through to_host: on CUDA the gradient lives on the device */
        g_out[i] = ft_host(m->g, params[i]->grad);
        if (!g_out[i]) return ORK_E_NOMEM;
    }
    return ORK_OK;
}

static void case_runner(const char *tag) {
    ork_st_file *fx;
    ft_model m;
    ork_runner *r = NULL;
    lora_set ls = {0};
    ork_status s = open_case(tag, &fx, &m);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fx);
    if (s == ORK_OK) s = attach_lora(&m, fx, &ls);
    CU_ASSERT_EQUAL_FATAL(s, ORK_OK);
    mark_weights(&m, fx);
    /* trainable: the LoRA pairs and the fixture's listed weights (embedders included) */
    ork_tensor *params[64];
    const char *pname[64];
    int np = 0;
    for (int i = 0; i < ls.n; i++) {
        params[np] = ls.l[i].down; pname[np++] = "lora down";
        params[np] = ls.l[i].up; pname[np++] = "lora up";
    }
    for (size_t i = 0; i < ork_st_count(fx) && np < 64; i++) {
        const char *k = ork_st_at(fx, i)->name;
        if (strncmp(k, "ref.grad.w.", 11)) continue;
        params[np] = ork_wstore_find(m.ws, k + 11);
        pname[np++] = k + 11;
    }
    CU_ASSERT_EQUAL(ork_runner_create(m.g, m.alloc, m.vt, m.self, &m.info, &r), ORK_OK);
    ork_runner_set_first_trainable(r, 0);
    float *g0[64] = {0}, *g1[64] = {0}, l0 = 0, l1 = 0;
    s = runner_grads(&m, fx, r, 0, params, np, g0, &l0);
    CU_ASSERT_EQUAL(s, ORK_OK);
    if (s == ORK_OK) s = runner_grads(&m, fx, r, 1, params, np, g1, &l1);
    CU_ASSERT_EQUAL(s, ORK_OK);
    if (s == ORK_OK) {
        double *S = ft_f64(fx, "ref.lora.S", NULL);
        printf("\n    loss straight %.9g, checkpointed %.9g, ref.lora.S %.9g", l0, l1, S ? S[0] : NAN);
        CU_ASSERT(memcmp(&l0, &l1, sizeof l0) == 0);
        CU_ASSERT(S && fabs(l0 - S[0]) <= PRED_R * fabs(S[0]) + 1e-4); /* the runner's loss is Σ pred·R: pred's tolerance */
        free(S);
        int differ = 0;
        for (int i = 0; i < np; i++) {
            size_t n = (size_t)ork_tensor_numel(params[i]);
            double worst = 0, M = 0;
            for (size_t k = 0; k < n; k++) {
                worst = fmax(worst, fabs((double)g0[i][k] - g1[i][k]));
                M = fmax(M, fabs((double)g0[i][k]));
            }
            if (worst > 0) printf("\n    %s: checkpointed vs straight max diff %.3g (max %.3g)", pname[i], worst, M);
            differ += worst > 0;
            /* block recompute is bit-identical (tensor/tape.h): equal, not close */
            CU_ASSERT(worst == 0);
            CU_ASSERT(M > 0);
        }
        printf("\n    %d trainable tensors, %d differ between checkpointed and straight", np, differ);
        /* and the LoRA grads of the step match the reference */
        char name[200];
        for (int i = 0; i < ls.n; i++) {
            size_t n = 0;
            snprintf(name, sizeof name, "ref.lora.grad.%s.down", ls.module[i]);
            double *ref = ft_f64(fx, name, &n);
            CU_ASSERT(ref && ft_cmp(name, g1[2 * i], ref, n, GRAD_A, GRAD_R));
            free(ref);
            snprintf(name, sizeof name, "ref.lora.grad.%s.up", ls.module[i]);
            ref = ft_f64(fx, name, &n);
            CU_ASSERT(ref && ft_cmp(name, g1[2 * i + 1], ref, n, GRAD_A, GRAD_R));
            free(ref);
        }
    }
    for (int i = 0; i < np; i++) { free(g0[i]); free(g1[i]); }
    ork_runner_destroy(r);
    free_lora(&ls);
    ft_close(&m);
    ork_st_close(fx);
    printf("\n  ");
}

/* The RoPE table a training graph keeps across passes (flux_forward.c
 * rope_table): a pass on another token grid (2x8 for 4x4, the same tokens)
 * replaces it rather than reusing it, and the first grid's pass after that
 * gives what it gave before; a repeated grid allocates nothing more. */
static void case_rope_cache(const char *tag) {
    ork_st_file *fx;
    ft_model m;
    CU_ASSERT_EQUAL_FATAL(open_case(tag, &fx, &m), ORK_OK);
    static const int rows[5] = {4, 2, 4, 4, 2}, grad[5] = {1, 1, 1, 1, 0};
    float *out[5] = {0};
    size_t used[5] = {0}, n = 0;
    inputs in;
    for (int i = 0; i < 5; i++) {
        ork_tensor *pred = NULL;
        grid_h = rows[i];
        CU_ASSERT_EQUAL_FATAL(forward(&m, fx, grad[i], &in, &pred), ORK_OK);
        n = (size_t)ork_tensor_numel(pred);
        out[i] = ft_host(m.g, pred);
        CU_ASSERT_PTR_NOT_NULL_FATAL(out[i]);
        CU_ASSERT_EQUAL(ork_graph_reset(m.g), ORK_OK);
        used[i] = ork_alloc_in_use(m.alloc, NULL);
    }
    grid_h = 4;
    /* kept: the same grid again costs nothing; replaced: the other grid's table takes its place */
    CU_ASSERT_EQUAL(used[1], used[0]);
    CU_ASSERT_EQUAL(used[3], used[2]);
    CU_ASSERT_EQUAL(used[4], used[3]); /* a pass without the tape keeps nothing */
    CU_ASSERT(!memcmp(out[2], out[0], n * sizeof *out[0]));
    CU_ASSERT(!memcmp(out[3], out[0], n * sizeof *out[0]));
    CU_ASSERT(memcmp(out[1], out[0], n * sizeof *out[0]) != 0); /* the grid matters: the case sees a change */
    double d = 0, M = 0;
    for (size_t k = 0; k < n; k++) {
        d = fmax(d, fabs((double)out[1][k] - out[4][k]));
        M = fmax(M, fabs((double)out[4][k]));
    }
    printf("\n    2x8 kept table vs built for the pass: max |diff| %.3g (max |pred| %.3g)", d, M);
    CU_ASSERT(d <= 1e-6 * M);
    for (int i = 0; i < 5; i++) free(out[i]);
    ft_close(&m);
    ork_st_close(fx);
    printf("\n  ");
}

static void test_flux1_rope_cache(void) { case_rope_cache("flux1_small"); }
static void test_flux2_rope_cache(void) { case_rope_cache("flux2_small"); }

static void test_flux1_runner_ckpt(void) { case_runner("flux1_small"); }
static void test_flux2_runner_ckpt(void) { case_runner("flux2_small"); }

#ifndef FT_GPU
static const ork_test_case cases[] = {
    {"flux1 BFL: pred, input and weight grads vs f64 reference", test_flux1_grads},
    {"flux2 BFL: pred, input and weight grads vs f64 reference", test_flux2_grads},
    {"flux1 LoRA: pred and adapter grads vs reference", test_flux1_lora},
    {"flux2 LoRA: pred and adapter grads vs reference", test_flux2_lora},
    {"flux1 diffusers checkpoint == BFL checkpoint", test_flux1_diffusers},
    {"flux1 runner: checkpointed step == straight backward", test_flux1_runner_ckpt},
    {"flux2 runner: checkpointed step == straight backward", test_flux2_runner_ckpt},
    {"flux1 RoPE table kept across passes, replaced on a new grid", test_flux1_rope_cache},
    {"flux2 RoPE table kept across passes, replaced on a new grid", test_flux2_rope_cache},
    {NULL, NULL},
};
#endif

#ifdef FT_GPU
int ork_cuda_device_count(void);
static const ork_test_case gpu_cases[] = {
    {"flux1 BFL on CUDA (bf16): pred, input and weight grads vs f64 reference", test_flux1_grads},
    {"flux2 BFL on CUDA (bf16): pred, input and weight grads vs f64 reference", test_flux2_grads},
    {"flux1 LoRA on CUDA: pred and adapter grads vs reference", test_flux1_lora},
    {"flux2 LoRA on CUDA: pred and adapter grads vs reference", test_flux2_lora},
    {"flux1 diffusers checkpoint == BFL checkpoint on CUDA", test_flux1_diffusers},
    {"flux1 runner on CUDA: checkpointed step == straight backward", test_flux1_runner_ckpt},
    {"flux2 runner on CUDA: checkpointed step == straight backward", test_flux2_runner_ckpt},
    {"flux1 RoPE table kept across passes on CUDA", test_flux1_rope_cache},
    {"flux2 RoPE table kept across passes on CUDA", test_flux2_rope_cache},
    {NULL, NULL},
};
int main(void) {
    if (ork_cuda_device_count() <= 0) return 77;
    return ork_test_run("flux_ref_cuda", ft_init, ft_clean, gpu_cases);
}
#else
ORK_TEST_MAIN("flux_ref", ft_init, ft_clean, cases)
#endif
