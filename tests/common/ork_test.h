/* ork_test.h — the CUnit harness every test binary uses.
 * ORK_TEST_MAIN registers one suite per behaviour area and gates the exit code
 * on CU_get_number_of_failure_records() read BEFORE cleanup (CUnit's own exit
 * code stays 0 when a test fails; a failed suite init is a failure record too).
 *
 *   static const ork_test_case cases[] = {{"name", fn}, ..., {NULL, NULL}};
 *   ORK_TEST_MAIN("suite", NULL, NULL, cases)
 *
 * GPU tests call ork_test_require_gpu() first: it exits 77 (ctest: skipped)
 * when no CUDA device is present. */
#ifndef ORK_TEST_H
#define ORK_TEST_H

#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct ork_test_case {
    const char *name;
    void (*fn)(void);
} ork_test_case;

static inline int ork_test_run(const char *suite, CU_InitializeFunc init, CU_CleanupFunc clean,
                               const ork_test_case *cases) {
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite(suite, init, clean);
    if (!s) { CU_cleanup_registry(); return 2; }
    for (const ork_test_case *c = cases; c->name; c++)
        if (!CU_add_test(s, c->name, c->fn)) { CU_cleanup_registry(); return 2; }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failure_records(); /* before cleanup */
    CU_cleanup_registry();
    return failed == 0 ? 0 : 1;
}

#define ORK_TEST_MAIN(suite, init, clean, cases) \
    int main(void) { return ork_test_run((suite), (init), (clean), (cases)); }

/* A path under ../shared, or NULL (and a note on stdout) when it is absent.
 * The environment's ORK_SHARED_DIR stands in for ../shared (the GPU machine
 * gets a carried copy of the assets, not the folder beside the checkout). */
static inline const char *ork_test_shared(const char *rel, char *buf, size_t n) {
    const char *env = getenv("ORK_SHARED_DIR");
    snprintf(buf, n, "%s/%s", env && *env ? env : ORK_SHARED_DIR, rel);
    if (access(buf, R_OK) != 0) { printf("  (shared asset %s absent)\n", rel); return NULL; }
    return buf;
}

/* Whole file into a NUL-terminated malloc'd buffer (*len, when not NULL,
 * without the NUL), or NULL. */
static inline char *ork_test_read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *b = (char *)malloc(cap); /* casts: .cu tests include this header as C++ */
    for (size_t r; b && (r = fread(b + n, 1, cap - n - 1, f)) > 0;) {
        n += r;
        if (n + 1 == cap) {
            char *t = (char *)realloc(b, cap *= 2);
            if (!t) free(b);
            b = t;
        }
    }
    fclose(f);
    if (!b) return NULL;
    b[n] = 0;
    if (len) *len = n;
    return b;
}

/* 1 where bit-for-bit fixtures made on Linux hold: the C library is glibc,
 * whose float functions (expf, tanhf, sinf, cosf, logf) made them. Windows'
 * round differently in the last bit now and then (MinGW-w64's expf is
 * (float)exp(x); msvcrt / ucrt and Wine each have their own), and training
 * carries such a bit into every later value: there the tests that compare
 * bits with a glibc-made fixture compare to a tolerance, or the parts that do
 * not depend on those bits (docs/DECISIONS.md, "Windows: libm's last bit").
 * The double functions (exp, log, cos, sin) agree. */
#ifdef __GLIBC__
#define ORK_TEST_GLIBC_BITS 1
#else
#define ORK_TEST_GLIBC_BITS 0
#endif

/* |got - ref| <= abs + rel * |ref| */
static inline int ork_close(double got, double ref, double abs_tol, double rel_tol) {
    if (isnan(got) || isnan(ref)) return isnan(got) && isnan(ref);
    return fabs(got - ref) <= abs_tol + rel_tol * fabs(ref);
}

#endif
