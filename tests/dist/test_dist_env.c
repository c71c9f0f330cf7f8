/* test_dist_env.c — dist/env.h: the rank's environment from a table of
 * variables (no process environment touched): the single process, torchrun's
 * and OpenMPI's variables, ORAKUL_DIST_* and every malformed value (one
 * ORK_E_CONFIG line naming the variable); dist.h's device index rule and the
 * config hash. */
#include "ork_test.h"

#include "dist/dist.h"
#include "dist/env.h"
#include "util/log.h"

typedef struct kv { const char *k, *v; } kv;

static const char *table_get(void *ctx, const char *name) {
    for (const kv *p = ctx; p && p->k; p++)
        if (!strcmp(p->k, name)) return p->v;
    return NULL;
}

static char last_line[1024];
static void sink(ork_log_level lvl, const char *line, void *user) {
    (void)user;
    if (lvl >= ORK_LOG_ERROR) snprintf(last_line, sizeof last_line, "%s", line);
}

static ork_status parse(const kv *t, ork_dist_env *e) {
    last_line[0] = 0;
    return ork_dist_env_parse(table_get, (void *)t, e);
}

static void test_single_process(void) {
    ork_dist_env e;
    kv none[] = {{NULL, NULL}};
    CU_ASSERT_EQUAL(parse(none, &e), ORK_OK);
    CU_ASSERT_EQUAL(e.world, 1);
    CU_ASSERT_EQUAL(e.rank, 0);
    CU_ASSERT_EQUAL(e.local_rank, 0);
    CU_ASSERT_EQUAL(e.timeout_s, ORK_DIST_DEFAULT_TIMEOUT_S);
    CU_ASSERT_FALSE(ork_dist_env_active(&e));
    kv one[] = {{"WORLD_SIZE", "1"}, {"RANK", "0"}, {NULL, NULL}}; /* no MASTER_* needed */
    CU_ASSERT_EQUAL(parse(one, &e), ORK_OK);
    CU_ASSERT_EQUAL(e.world, 1);
    CU_ASSERT_FALSE(ork_dist_env_active(&e));
    kv forced[] = {{"ORAKUL_DIST_NCCL", "1"}, {NULL, NULL}};
    CU_ASSERT_EQUAL(parse(forced, &e), ORK_OK);
    CU_ASSERT_TRUE(ork_dist_env_active(&e));
    kv rank0[] = {{"RANK", "0"}, {NULL, NULL}}; /* RANK=0 alone: harmless */
    CU_ASSERT_EQUAL(parse(rank0, &e), ORK_OK);
}

static void test_torchrun(void) {
    ork_dist_env e;
    kv t[] = {{"WORLD_SIZE", "4"}, {"RANK", "3"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "10.1.2.3"},
              {"MASTER_PORT", "29500"}, {"ORAKUL_DIST_TIMEOUT", "12"}, {NULL, NULL}};
    CU_ASSERT_EQUAL_FATAL(parse(t, &e), ORK_OK);
    CU_ASSERT_EQUAL(e.world, 4);
    CU_ASSERT_EQUAL(e.rank, 3);
    CU_ASSERT_EQUAL(e.local_rank, 1);
    CU_ASSERT_STRING_EQUAL(e.addr, "10.1.2.3");
    CU_ASSERT_EQUAL(e.port, 29500);
    CU_ASSERT_EQUAL(e.timeout_s, 12);
    CU_ASSERT_TRUE(ork_dist_env_active(&e));
    /* LOCAL_RANK defaults to RANK */
    kv nl[] = {{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "[::1]"}, {"MASTER_PORT", "1"}, {NULL, NULL}};
    CU_ASSERT_EQUAL_FATAL(parse(nl, &e), ORK_OK);
    CU_ASSERT_EQUAL(e.local_rank, 1);
    CU_ASSERT_STRING_EQUAL(e.addr, "[::1]");
}

static void test_rendezvous_port(void) {
    ork_dist_env e;
    kv tr[] = {{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"},
               {"TORCHELASTIC_USE_AGENT_STORE", "True"}, {NULL, NULL}};
    CU_ASSERT_EQUAL_FATAL(parse(tr, &e), ORK_OK);
    CU_ASSERT_EQUAL(e.port, 29501); /* torchrun's agent holds MASTER_PORT */
    kv own[] = {{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"},
                {"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"ORAKUL_DIST_PORT", "40000"}, {NULL, NULL}};
    CU_ASSERT_EQUAL_FATAL(parse(own, &e), ORK_OK);
    CU_ASSERT_EQUAL(e.port, 40000);
    kv no[] = {{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"},
               {"TORCHELASTIC_USE_AGENT_STORE", "False"}, {NULL, NULL}};
    CU_ASSERT_EQUAL_FATAL(parse(no, &e), ORK_OK);
    CU_ASSERT_EQUAL(e.port, 29500);
}

static void test_openmpi(void) {
    ork_dist_env e;
    kv t[] = {{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
              {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "6000"}, {NULL, NULL}};
    CU_ASSERT_EQUAL_FATAL(parse(t, &e), ORK_OK);
    CU_ASSERT_EQUAL(e.world, 2);
    CU_ASSERT_EQUAL(e.rank, 1);
    CU_ASSERT_EQUAL(e.local_rank, 0);
    /* torchrun's names win over OpenMPI's */
    kv both[] = {{"WORLD_SIZE", "3"}, {"RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"},
                 {"MASTER_ADDR", "h"}, {"MASTER_PORT", "6000"}, {NULL, NULL}};
    CU_ASSERT_EQUAL_FATAL(parse(both, &e), ORK_OK);
    CU_ASSERT_EQUAL(e.world, 3);
    CU_ASSERT_EQUAL(e.rank, 2);
}

/* Each malformed table fails with ORK_E_CONFIG and a line containing `needle`. */
static void bad(const kv *t, const char *needle) {
    ork_dist_env e;
    ork_status s = parse(t, &e);
    CU_ASSERT_EQUAL(s, ORK_E_CONFIG);
    if (!strstr(last_line, needle)) {
        printf("  expected '%s' in: %s\n", needle, last_line);
        CU_FAIL("error line");
    }
}

static void test_malformed(void) {
    bad((kv[]){{"WORLD_SIZE", "abc"}, {NULL, NULL}}, "WORLD_SIZE='abc'");
    bad((kv[]){{"WORLD_SIZE", "0"}, {NULL, NULL}}, "WORLD_SIZE='0'");
    bad((kv[]){{"WORLD_SIZE", "-2"}, {NULL, NULL}}, "WORLD_SIZE='-2'");
    bad((kv[]){{"WORLD_SIZE", "2 "}, {NULL, NULL}}, "WORLD_SIZE='2 '");
    bad((kv[]){{"WORLD_SIZE", "99999"}, {NULL, NULL}}, "1..4096");
    bad((kv[]){{"WORLD_SIZE", "2"}, {NULL, NULL}}, "RANK is not set");
    bad((kv[]){{"RANK", "1"}, {NULL, NULL}}, "WORLD_SIZE is not set");
    bad((kv[]){{"WORLD_SIZE", "2"}, {"RANK", "2"}, {NULL, NULL}}, "RANK='2': must be 0..1");
    bad((kv[]){{"WORLD_SIZE", "2"}, {"RANK", "x1"}, {NULL, NULL}}, "RANK='x1'");
    bad((kv[]){{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"LOCAL_RANK", "-1"}, {NULL, NULL}}, "LOCAL_RANK='-1'");
    bad((kv[]){{"WORLD_SIZE", "2"}, {"RANK", "1"}, {NULL, NULL}}, "MASTER_ADDR is not set");
    bad((kv[]){{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "a b"}, {"MASTER_PORT", "1"}, {NULL, NULL}},
        "MASTER_ADDR='a b'");
    bad((kv[]){{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "h"}, {NULL, NULL}}, "MASTER_PORT is not set");
    bad((kv[]){{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "65536"}, {NULL, NULL}},
        "MASTER_PORT='65536'");
    bad((kv[]){{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "0"}, {NULL, NULL}},
        "MASTER_PORT='0'");
    bad((kv[]){{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "5"}, {"ORAKUL_DIST_PORT", "x"},
               {NULL, NULL}}, "ORAKUL_DIST_PORT='x'");
    bad((kv[]){{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "65535"},
               {"TORCHELASTIC_USE_AGENT_STORE", "True"}, {NULL, NULL}}, "MASTER_PORT + 1");
    bad((kv[]){{"ORAKUL_DIST_TIMEOUT", "0"}, {NULL, NULL}}, "ORAKUL_DIST_TIMEOUT='0'");
    bad((kv[]){{"ORAKUL_DIST_TIMEOUT", "1.5"}, {NULL, NULL}}, "ORAKUL_DIST_TIMEOUT='1.5'");
    bad((kv[]){{"ORAKUL_DIST_NCCL", "yes"}, {NULL, NULL}}, "ORAKUL_DIST_NCCL='yes'");
    char longaddr[300];
    memset(longaddr, 'a', sizeof longaddr - 1);
    longaddr[sizeof longaddr - 1] = 0;
    bad((kv[]){{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", longaddr}, {"MASTER_PORT", "1"}, {NULL, NULL}},
        "at most 255");
}

static void test_device_index(void) {
    ork_dist_env one = {.world = 1}, two = {.world = 2, .rank = 1, .local_rank = 1, .timeout_s = 1};
    int d = -1;
    last_line[0] = 0;
    CU_ASSERT_EQUAL(ork_dist_device_index(&one, "cuda", 2, &d), ORK_OK);
    CU_ASSERT_EQUAL(d, 0);
    CU_ASSERT_EQUAL(ork_dist_device_index(&one, "cuda:1", 2, &d), ORK_OK);
    CU_ASSERT_EQUAL(d, 1);
    CU_ASSERT_EQUAL(ork_dist_device_index(&one, NULL, 1, &d), ORK_OK);
    CU_ASSERT_EQUAL(d, 0);
    CU_ASSERT_EQUAL(ork_dist_device_index(&one, "cuda:2", 2, &d), ORK_E_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(last_line, "sees 2 CUDA devices"));
    CU_ASSERT_EQUAL(ork_dist_device_index(&one, "cuda:x", 2, &d), ORK_E_CONFIG);
    CU_ASSERT_EQUAL(ork_dist_device_index(&one, "cudax", 2, &d), ORK_E_CONFIG);
    /* distributed: LOCAL_RANK, whatever cuda:N says */
    CU_ASSERT_EQUAL(ork_dist_device_index(&two, "cuda:0", 2, &d), ORK_OK);
    CU_ASSERT_EQUAL(d, 1);
    CU_ASSERT_EQUAL(ork_dist_device_index(&two, "cuda:0", 1, &d), ORK_E_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(last_line, "LOCAL_RANK=1 but this process sees 1 CUDA device"));
}

static void test_config_hash(void) {
    char a[] = "/tmp/ork_dist_hash_a_XXXXXX", b[] = "/tmp/ork_dist_hash_b_XXXXXX";
    int fa = mkstemp(a), fb = mkstemp(b);
    CU_ASSERT_FATAL(fa >= 0 && fb >= 0);
    CU_ASSERT(write(fa, "steps: 10\n", 10) == 10);
    CU_ASSERT(write(fb, "steps: 11\n", 10) == 10);
    close(fa);
    close(fb);
    uint64_t ha = 0, ha2 = 1, hb = 0;
    CU_ASSERT_EQUAL(ork_dist_config_hash(a, &ha), ORK_OK);
    CU_ASSERT_EQUAL(ork_dist_config_hash(a, &ha2), ORK_OK);
    CU_ASSERT_EQUAL(ork_dist_config_hash(b, &hb), ORK_OK);
    CU_ASSERT_EQUAL(ha, ha2);
    CU_ASSERT_NOT_EQUAL(ha, hb);
    unlink(a);
    unlink(b);
    CU_ASSERT_EQUAL(ork_dist_config_hash("/nonexistent/x.yaml", &ha), ORK_E_IO);
}

static int init(void) {
    ork_log_set_sink(sink, NULL);
    return 0;
}

static const ork_test_case cases[] = {
    {"single_process", test_single_process},
    {"torchrun", test_torchrun},
    {"openmpi", test_openmpi},
    {"rendezvous_port", test_rendezvous_port},
    {"malformed", test_malformed},
    {"device_index", test_device_index},
    {"config_hash", test_config_hash},
    {NULL, NULL},
};
ORK_TEST_MAIN("dist_env", init, NULL, cases)
