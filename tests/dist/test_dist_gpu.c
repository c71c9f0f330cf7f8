/* test_dist_gpu.c — the collective side on real GPUs (LABELS gpu; exit 77
 * without a CUDA device or without libnccl.so.2). Every rank is a forked
 * child (the parent never touches CUDA: CUDA does not survive fork):
 *  - world1_nccl: one rank through the whole NCCL path (ORAKUL_DIST_NCCL=1):
 *    host all-reduce, barrier, broadcast, the bucketed gradient sync (an
 *    average over one rank leaves every gradient as it was);
 *  - two_ranks (>= 2 GPUs): the same on devices 0 and 1 after a real TCP
 *    rendezvous: sums, min/max, rank 0's bytes broadcast, and gradients
 *    written on the compute stream right before each block's grads_ready
 *    averaged over the ranks (the event ordering under test), then again
 *    with every bucket launched at finish (an accumulation step).
 * A child prints what went wrong and exits non-zero. */
#include "ork_test.h"
#include "dist_test_util.h"

#include "dist/dist.h"
#include "dist/grad_sync.h"
#include "tensor/graph.h"
#include "tensor/tensor.h"

#define CHECK(cond, ...) do { if (!(cond)) { printf("  rank %d: ", g_rank); printf(__VA_ARGS__); printf("\n"); \
    fflush(stdout); return 1; } } while (0)

static int g_rank;

/* 6 LoRA-like parameters over 3 blocks; bucket cap 600 bytes: one block per bucket. */
enum { NP = 6, NB = 3 };
static const int blk[NP] = {0, 0, 1, 1, 2, 2};
static const int64_t shp[NP][2] = {{4, 8}, {8, 4}, {3, 50}, {50, 3}, {16, 2}, {2, 16}};

static float grad_value(int rank, int i, int q) { return (float)(rank + 1) * ((float)i + 1.0f + 0.001f * (float)q); }

static int rank_main(int rank, int world, int port) {
    g_rank = rank;
    char r[16], w[16], p[16];
    snprintf(r, sizeof r, "%d", rank);
    snprintf(w, sizeof w, "%d", world);
    snprintf(p, sizeof p, "%d", port);
    setenv("RANK", r, 1);
    setenv("LOCAL_RANK", r, 1);
    setenv("WORLD_SIZE", w, 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", p, 1);
    setenv("ORAKUL_DIST_NCCL", "1", 1);
    setenv("ORAKUL_DIST_TIMEOUT", "60", 1);
    ork_dist_env e;
    CHECK(ork_dist_env_read(&e) == ORK_OK, "env");
    const ork_backend *be = ork_cuda_backend();
    ork_alloc *a = NULL;
    ork_graph *g = NULL;
    ork_dist *d = NULL;
    CHECK(ork_alloc_create(be, 0, &a) == ORK_OK, "alloc");
    ork_graph_opts go = {0};
    go.device_index = e.local_rank;
    go.act_dtype = ORK_BF16;
    CHECK(ork_graph_create(be, a, &go, &g) == ORK_OK, "graph on cuda:%d", e.local_rank);
    CHECK(ork_dist_start(&e, be, &g->k, a, 0x5eed, &d) == ORK_OK && d, "ork_dist_start");
    CHECK(ork_dist_rank(d) == rank && ork_dist_world(d) == world, "rank/world");
    /* host values */
    double v[3] = {rank + 1.0, 0.25, -(double)rank};
    CHECK(ork_dist_allreduce_host(d, v, 3, ORK_NCCL_SUM) == ORK_OK, "allreduce sum");
    CHECK(v[0] == world * (world + 1) / 2.0 && v[1] == 0.25 * world, "sum %g %g", v[0], v[1]);
    double m[2] = {(double)rank, (double)rank};
    CHECK(ork_dist_allreduce_host(d, m, 1, ORK_NCCL_MAX) == ORK_OK && m[0] == world - 1, "max %g", m[0]);
    CHECK(ork_dist_allreduce_host(d, m + 1, 1, ORK_NCCL_MIN) == ORK_OK && m[1] == 0, "min %g", m[1]);
    CHECK(ork_dist_barrier(d) == ORK_OK, "barrier");
    /* broadcast rank 0's bytes */
    int64_t nbb = 1000;
    ork_tensor *bt;
    CHECK(ork_tensor_new(a, "workspace", ORK_U8, 1, &nbb, 0, &bt) == ORK_OK, "alloc bytes");
    unsigned char hb[1000];
    for (int i = 0; i < 1000; i++) hb[i] = rank == 0 ? (unsigned char)(i * 7 + 3) : 0;
    CHECK(be->memcpy_h2d(&g->k, ork_tensor_data(bt), hb, sizeof hb) == ORK_OK, "h2d");
    CHECK(ork_dist_comm_after_compute(d) == ORK_OK && ork_dist_broadcast(d, ork_tensor_data(bt), 1000) == ORK_OK &&
          ork_dist_compute_after_comm(d) == ORK_OK, "broadcast");
    CHECK(be->memcpy_d2h(&g->k, hb, ork_tensor_data(bt), sizeof hb) == ORK_OK && ork_graph_sync(g) == ORK_OK, "d2h");
    for (int i = 0; i < 1000; i++) CHECK(hb[i] == (unsigned char)(i * 7 + 3), "broadcast byte %d: %u", i, hb[i]);
    ork_tensor_free(bt);
    /* gradients: bucketed all-reduce at grads_ready, then all at finish */
    ork_tensor *pt[NP];
    for (int i = 0; i < NP; i++) CHECK(ork_tensor_new(a, "lora", ORK_F32, 2, shp[i], 1, &pt[i]) == ORK_OK, "param");
    ork_gsync *gs = NULL;
    CHECK(ork_gsync_create(d, g, a, pt, blk, NP, NB, 600, &gs) == ORK_OK, "gsync");
    CHECK(ork_gsync_plan(gs)->n_buckets == NB, "%d buckets", ork_gsync_plan(gs)->n_buckets);
    ork_block_hooks h;
    ork_gsync_hooks(gs, NULL, &h);
    for (int round = 0; round < 2; round++) {
        ork_gsync_arm(gs, round == 0);
        for (int b = NB - 1; b >= 0; b--) {
            for (int i = 0; i < NP; i++) {
                if (blk[i] != b) continue;
                int64_t n = shp[i][0] * shp[i][1];
                float host[200];
                for (int q = 0; q < n; q++) host[q] = grad_value(rank, i, q) * (float)(round + 1);
                CHECK(be->memcpy_h2d(&g->k, ork_tensor_data(pt[i]->grad), host, (size_t)n * 4) == ORK_OK, "grad h2d");
            }
            CHECK(h.grads_ready(h.ctx, b) == ORK_OK, "grads_ready %d", b);
        }
        CHECK(ork_gsync_finish(gs) == ORK_OK, "finish");
        for (int i = 0; i < NP; i++) {
            int64_t n = shp[i][0] * shp[i][1];
            float host[200];
            CHECK(be->memcpy_d2h(&g->k, host, ork_tensor_data(pt[i]->grad), (size_t)n * 4) == ORK_OK &&
                  ork_graph_sync(g) == ORK_OK, "grad d2h");
            for (int q = 0; q < n; q++) {
                float want = 0;
                for (int rr = 0; rr < world; rr++) want += grad_value(rr, i, q) * (float)(round + 1);
                want /= (float)world;
                CHECK(fabsf(host[q] - want) <= 1e-5f * fabsf(want), "round %d param %d [%d]: %g, want %g", round, i,
                      q, host[q], want);
            }
        }
    }
    ork_gsync_destroy(gs);
    for (int i = 0; i < NP; i++) {
        CHECK(pt[i]->grad == NULL, "grad view left behind");
        ork_tensor_free(pt[i]);
    }
    CHECK(ork_dist_barrier(d) == ORK_OK, "last barrier");
    ork_dist_destroy(d, 0);
    ork_graph_destroy(g);
    ork_alloc_destroy(a);
    printf("  rank %d of %d: ok\n", rank, world);
    fflush(stdout);
    return 0;
}

/* Run `world` ranks as children; 0 when all exit 0. */
static int run_world(int world) {
    int port = dist_free_port();
    pid_t pids[8];
    fflush(stdout);
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] == 0) _exit(rank_main(r, world, port));
    }
    int bad = 0;
    for (int r = 0; r < world; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            printf("  rank %d: %s %d\n", r, WIFEXITED(st) ? "exit" : "signal",
                   WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            bad = 1;
        }
    }
    return bad;
}

static int g_gpus;

static void test_world1_nccl(void) { CU_ASSERT_EQUAL(run_world(1), 0); }

static void test_two_ranks(void) {
    if (g_gpus < 2) {
        printf("  (one GPU visible: the 2-rank case needs two)\n");
        return;
    }
    CU_ASSERT_EQUAL(run_world(2), 0);
}

static const ork_test_case cases[] = {
    {"world1_nccl", test_world1_nccl},
    {"two_ranks", test_two_ranks},
    {NULL, NULL},
};

int main(void) {
    int p = dist_probe();
    g_gpus = p % 100;
    if (g_gpus == 0) { printf("no CUDA device: skipped\n"); return 77; }
    if (p < 100) { printf("no libnccl.so.2 (or ORAKUL_NCCL_LIB): skipped\n"); return 77; }
    return ork_test_run("dist_gpu", NULL, NULL, cases);
}
