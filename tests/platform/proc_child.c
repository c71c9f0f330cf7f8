/* proc_child.c — the child program of test_platform's process tests
 * (ork_proc_spawn): `proc_child echo ARG...` prints each argument in brackets,
 * one a line, on stdout and "to stderr" on stderr, then exits 0;
 * `proc_child exit N` exits with code N; `proc_child sleep` sleeps for a
 * minute (the test kills it long before). Arguments are compared as bytes: on
 * Windows main's argv is in the ANSI code page, so the test passes ASCII only. */
#include "platform/platform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "echo") == 0) {
        for (int i = 2; i < argc; i++) printf("[%s]\n", argv[i]);
        fprintf(stderr, "to stderr\n");
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "exit") == 0) return atoi(argv[2]);
    if (argc == 2 && strcmp(argv[1], "sleep") == 0) {
        for (int i = 0; i < 600; i++) ork_sleep_us(100000);
        return 0;
    }
    fprintf(stderr, "proc_child: echo ARG... | exit N | sleep\n");
    return 2;
}
