/* test_dist_nccl.c — dist/nccl_comm.h without a GPU: the loader's one-line
 * refusals (a missing library, a library that is not NCCL), NCCL_NVLS_ENABLE
 * set to 0 unless the user set it, and, where libnccl.so.2 is installed, a
 * real load (version >= 2.10). When the build finds nccl.h
 * (ORK_HAVE_NCCL_H), orakul's own declarations are checked against it at
 * compile time: the id size, the enum values and the enum sizes. */
#include "ork_test.h"

#include "dist/nccl_comm.h"
#include "util/log.h"

#ifdef ORK_HAVE_NCCL_H
#include <nccl.h>
_Static_assert(NCCL_UNIQUE_ID_BYTES == ORK_NCCL_ID_BYTES, "ncclUniqueId size");
_Static_assert(sizeof(ncclUniqueId) == ORK_NCCL_ID_BYTES, "ncclUniqueId layout");
_Static_assert((int)ncclSuccess == (int)ORK_NCCL_SUCCESS && (int)ncclInProgress == (int)ORK_NCCL_IN_PROGRESS, "ncclResult_t");
_Static_assert(ncclUint8 == (int)ORK_NCCL_UINT8 && ncclInt32 == (int)ORK_NCCL_INT32 && ncclInt64 == (int)ORK_NCCL_INT64 &&
               ncclFloat32 == (int)ORK_NCCL_FLOAT32 && ncclFloat64 == (int)ORK_NCCL_FLOAT64, "ncclDataType_t");
_Static_assert(ncclSum == (int)ORK_NCCL_SUM && ncclMax == (int)ORK_NCCL_MAX && ncclMin == (int)ORK_NCCL_MIN &&
               ncclAvg == (int)ORK_NCCL_AVG, "ncclRedOp_t");
_Static_assert(sizeof(ncclResult_t) == sizeof(int) && sizeof(ncclDataType_t) == sizeof(int) &&
               sizeof(ncclRedOp_t) == sizeof(int), "NCCL enums are passed as int");
_Static_assert(sizeof(ncclComm_t) == sizeof(void *) && sizeof(cudaStream_t) == sizeof(void *), "handles are pointers");
#endif

static char last_line[1024];
static void sink(ork_log_level lvl, const char *line, void *user) {
    (void)user;
    if (lvl >= ORK_LOG_ERROR) snprintf(last_line, sizeof last_line, "%s", line);
}

static void test_missing_library(void) {
    setenv("ORAKUL_NCCL_LIB", "/nonexistent/libnccl.so.2", 1);
    ork_nccl *n = NULL;
    last_line[0] = 0;
    CU_ASSERT_EQUAL(ork_nccl_load(&n), ORK_E_UNSUPPORTED);
    CU_ASSERT_PTR_NULL(n);
    CU_ASSERT_PTR_NOT_NULL(strstr(last_line, "cannot load /nonexistent/libnccl.so.2"));
    CU_ASSERT_PTR_NOT_NULL(strstr(last_line, "ORAKUL_NCCL_LIB"));
    unsetenv("ORAKUL_NCCL_LIB");
}

static void test_not_nccl(void) {
    setenv("ORAKUL_NCCL_LIB", "libm.so.6", 1);
    ork_nccl *n = NULL;
    last_line[0] = 0;
    CU_ASSERT_EQUAL(ork_nccl_load(&n), ORK_E_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(last_line, "has no ncclGetVersion: not an NCCL 2.x library"));
    unsetenv("ORAKUL_NCCL_LIB");
}

static void test_nvls_default(void) {
    unsetenv("NCCL_NVLS_ENABLE");
    setenv("ORAKUL_NCCL_LIB", "/nonexistent/x.so", 1);
    ork_nccl *n = NULL;
    ork_nccl_load(&n); /* fails, but sets the default first */
    const char *v = getenv("NCCL_NVLS_ENABLE");
    CU_ASSERT(v && !strcmp(v, "0"));
    setenv("NCCL_NVLS_ENABLE", "1", 1);
    ork_nccl_load(&n);
    v = getenv("NCCL_NVLS_ENABLE");
    CU_ASSERT(v && !strcmp(v, "1")); /* the user's value stays */
    unsetenv("NCCL_NVLS_ENABLE");
    unsetenv("ORAKUL_NCCL_LIB");
}

static void test_real_library(void) {
    ork_nccl *n = NULL;
    ork_log_set_sink(NULL, NULL);
    ork_log_level lvl = ork_log_get_level();
    ork_log_set_level(ORK_LOG_ERROR + 1); /* a missing NCCL is no failure here */
    ork_status s = ork_nccl_load(&n);
    ork_log_set_level(lvl);
    ork_log_set_sink(sink, NULL);
    if (s != ORK_OK) {
        printf("  (libnccl.so.2 not installed: only the refusals are checked)\n");
        return;
    }
    int v = ork_nccl_version(n);
    printf("  (NCCL %d from %s)\n", v, ork_nccl_path(n));
    CU_ASSERT(v >= 21000);
#ifdef ORK_HAVE_NCCL_H
    if (v / 100 != NCCL_VERSION_CODE / 100)
        printf("  (note: the header is NCCL %d, the library %d)\n", NCCL_VERSION_CODE, v);
#endif
    ork_nccl_unload(n);
}

static int init(void) {
    ork_log_set_sink(sink, NULL);
    return 0;
}

static const ork_test_case cases[] = {
    {"missing_library", test_missing_library},
    {"not_nccl", test_not_nccl},
    {"nvls_default", test_nvls_default},
    {"real_library", test_real_library},
    {NULL, NULL},
};
ORK_TEST_MAIN("dist_nccl", init, NULL, cases)
