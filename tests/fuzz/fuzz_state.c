/* fuzz_state.c — libFuzzer target for the resumable-state reader: each input
 * is <training_folder>/<name>/<name>_state.safetensors, read by
 * ork_train_load_state (core/train/checkpoint.c, compiled in instrumented) into
 * a job of the trainer's own kind on the CPU backend: two resident F32 LoRA
 * tensors (FZ_R x FZ_IN down, FZ_IN x FZ_R up) with their U8 optimizer state
 * (FZ_STATE bytes each, adamw's m and v), optimizer FZ_OPT_ID, train.steps
 * FZ_STEPS. The seeds are states of exactly this job.
 * Contract checked: a state that loads gives 0 <= step <= train.steps, a
 * non-negative data position and skipped count, finite LoRA values; a refusal
 * is FORMAT / CONFIG / NUMERIC / IO with exactly one error line.
 * Built by tests/fuzz/CMakeLists.txt with -DORAKUL_FUZZ=ON (clang). */
#include "fuzz_common.h"
#include "fuzz_train_common.h"

#include "train/job.h"

#define FZ_R 4
#define FZ_IN 8
#define FZ_STATE (2 * FZ_R * FZ_IN * 4)
#define FZ_STEPS 1000
#define FZ_OPT_ID "org.orakul.adamw"

static char g_state[600];
static ork_alloc *g_alloc;
static ork_graph *g_graph;
static ork_tensor *g_pt[2], *g_st[2];
static ork_process_config g_p;
static ork_component g_comp = {.id = FZ_OPT_ID};
static ork_plugin_component g_opt = {.c = &g_comp};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fz_init("fuzz_state");
    fz_make_dir("fuzz-state");
    snprintf(g_state, sizeof g_state, "%s/fz_state.safetensors", fz_dir);
    const ork_backend *be = ork_cpu_backend();
    ork_graph_opts go = {.act_dtype = ORK_F32, .nthreads = 1};
    if (ork_alloc_create(be, 0, &g_alloc) != ORK_OK || ork_graph_create(be, g_alloc, &go, &g_graph) != ORK_OK) {
        fprintf(stderr, "fuzz_state: no CPU graph\n");
        exit(1);
    }
    const int64_t down[2] = {FZ_R, FZ_IN}, up[2] = {FZ_IN, FZ_R}, st[1] = {FZ_STATE};
    if (ork_tensor_new(g_alloc, "lora", ORK_F32, 2, down, 1, &g_pt[0]) != ORK_OK ||
        ork_tensor_new(g_alloc, "lora", ORK_F32, 2, up, 1, &g_pt[1]) != ORK_OK ||
        ork_tensor_new(g_alloc, "optimizer", ORK_U8, 1, st, 0, &g_st[0]) != ORK_OK ||
        ork_tensor_new(g_alloc, "optimizer", ORK_U8, 1, st, 0, &g_st[1]) != ORK_OK) {
        fprintf(stderr, "fuzz_state: no tensors\n");
        exit(1);
    }
    g_p.train.batch_size = 1;
    g_p.train.gradient_accumulation_steps = 2; /* step x accumulation: the data position */
    g_p.train.steps = FZ_STEPS;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!fz_write_file(g_state, data, size)) return 0;
    static job j;
    memset(&j, 0, sizeof j);
    j.p = &g_p;
    j.be = ork_cpu_backend();
    j.alloc = g_alloc;
    j.g = g_graph;
    j.ta = ork_tensor_api_table();
    j.ops = ork_ops_table();
    j.c_opt = &g_opt;
    j.n_params = 2;
    j.pt = g_pt;
    j.state = g_st;
    snprintf(j.out_dir, sizeof j.out_dir, "%s", fz_dir);
    snprintf(j.name, sizeof j.name, "fz");
    for (int i = 0; i < 2; i++) { /* what a fresh run holds before the resume */
        memset(ork_tensor_data(g_pt[i]), 0, ork_tensor_nbytes(g_pt[i]));
        memset(ork_tensor_data(g_st[i]), 0, ork_tensor_nbytes(g_st[i]));
    }
    int64_t step = -1;
    ork_status s = ork_train_load_state(&j, &step);
    FZ_CHECK(s == ORK_OK || s == ORK_E_FORMAT || s == ORK_E_CONFIG || s == ORK_E_NUMERIC || s == ORK_E_IO,
             "status %d (%s)", (int)s, ork_status_str(s));
    if (s != ORK_OK) {
        FZ_CHECK(fz_errors == 1, "refused (%s) with %d error lines", ork_status_str(s), fz_errors);
        return 0;
    }
    FZ_CHECK(fz_errors == 0, "loaded with %d error lines", fz_errors);
    FZ_CHECK(step >= 0 && step <= FZ_STEPS, "resumes at step %lld of %d", (long long)step, FZ_STEPS);
    FZ_CHECK(j.skipped >= 0 && j.skipped <= step, "%lld steps skipped of %lld", (long long)j.skipped,
             (long long)step);
    FZ_CHECK(j.data_at.epoch >= 0 && j.data_at.offset >= 0, "data position epoch %lld offset %lld",
             (long long)j.data_at.epoch, (long long)j.data_at.offset);
    for (int i = 0; i < 2; i++) {
        long bad = fz_first_nonfinite(ork_tensor_data(g_pt[i]), ork_tensor_nbytes(g_pt[i]) / sizeof(float));
        FZ_CHECK(bad < 0, "loaded lora.%d with a non-finite value at %ld", i, bad);
    }
    return 0;
}
