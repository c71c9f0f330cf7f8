/* tok_dump.c — a tool for tests/reference/tokenizer_fuzz.py, not a test: loads a
 * tokenizer (any path ork_tokenizer_load takes) and prints the ids of every line
 * of a text file (raw bytes, '\n'-separated; a trailing '\r' is kept), one line
 * of space-separated ids each, full encoding with special tokens.
 * Usage: tok_dump <tokenizer path> <lines file>; exit 1 on a load or encode error. */
#include "text/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s <tokenizer path> <lines file>\n", argv[0]);
        return 2;
    }
    ork_tokenizer *t = NULL;
    if (ork_tokenizer_load(argv[1], &t) != ORK_OK) return 1;
    FILE *f = fopen(argv[2], "rb");
    if (!f) { perror(argv[2]); ork_tokenizer_free(t); return 1; }
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    int32_t nmax = 1 << 16, n;
    int32_t *ids = malloc((size_t)nmax * sizeof *ids);
    int rc = 0;
    while (ids && (got = getline(&line, &cap, f)) > 0) {
        size_t len = (size_t)got;
        if (line[len - 1] == '\n') len--;
        if (ork_tokenizer_encode(t, line, len, 0, 0, ids, NULL, nmax, &n) != ORK_OK) { rc = 1; break; }
        for (int32_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
        putchar('\n');
    }
    free(ids);
    free(line);
    fclose(f);
    ork_tokenizer_free(t);
    return rc;
}
