/* bench/text/bench_args.h — what the text benches' drivers (bench_text_encode,
 * bench_llm_encode) share: "--key value" arguments, flags, and the captions
 * file (one a line, cycled to n). Header-only; owns what it returns. */
#ifndef ORK_BENCH_TEXT_ARGS_H
#define ORK_BENCH_TEXT_ARGS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline const char *bench_arg(int argc, char **argv, const char *key, const char *dflt) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], key)) return argv[i + 1];
    return dflt;
}

static inline int bench_flag(int argc, char **argv, const char *key) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], key)) return 1;
    return 0;
}

/* n captions from path (lines up to 4095 bytes), cycling through its lines;
 * NULL when it has none. Free each and the array. */
static inline char **bench_read_captions(const char *path, int n) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char **lines = NULL, buf[4096];
    size_t cap = 0, nl = 0;
    while (fgets(buf, sizeof buf, f)) {
        size_t k = strlen(buf);
        while (k > 0 && (buf[k - 1] == '\n' || buf[k - 1] == '\r')) buf[--k] = 0;
        if (nl == cap) {
            cap = cap ? 2 * cap : 1024;
            char **nlines = realloc(lines, cap * sizeof *nlines);
            if (!nlines) break;
            lines = nlines;
        }
        lines[nl++] = strdup(buf);
    }
    fclose(f);
    char **out = nl ? calloc((size_t)n, sizeof *out) : NULL;
    for (int i = 0; out && i < n; i++) out[i] = strdup(lines[(size_t)i % nl]);
    for (size_t i = 0; i < nl; i++) free(lines[i]);
    free(lines);
    return out;
}

#endif
