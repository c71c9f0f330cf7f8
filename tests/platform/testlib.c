/* tests/platform/testlib.c — a shared library for test_platform's
 * ork_lib_open/ork_lib_sym checks: one exported function, one exported datum,
 * one hidden function (not found by name). */
#if defined(_WIN32)
#define EXPORT __declspec(dllexport)
#else
#define EXPORT __attribute__((visibility("default")))
#endif

EXPORT int ork_testlib_add(int a, int b) { return a + b; }
EXPORT const int ork_testlib_value = 1234;
int ork_testlib_hidden(void) { return 7; }
