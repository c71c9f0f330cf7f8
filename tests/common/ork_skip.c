/* ork_skip.c — the program that stands in for a test that cannot run on this
 * system (tests/CMakeLists.txt, ORK_WINDOWS_SKIP): prints the test's name and
 * the reason, exits 77 (ctest: skipped). */
#include <stdio.h>

int main(void) {
    printf("%s: skipped on Windows: %s\n", ORK_SKIP_NAME, ORK_SKIP_REASON);
    return 77;
}
