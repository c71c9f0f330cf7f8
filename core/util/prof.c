/* util/prof.c — see prof.h. */
#include "util/prof.h"

#include "platform/platform.h"

#include <stdlib.h>
#include <string.h>

typedef struct entry {
    char kind[16], name[48];
    double sec;
    long count;
} entry;

enum { MAXE = 256 };
static entry g_e[MAXE];
static int g_n, g_enabled = -1;

int ork_prof_enabled(void) {
    if (g_enabled < 0) {
        const char *v = getenv("ORAKUL_PROFILE");
        g_enabled = v && *v && strcmp(v, "0") != 0;
    }
    return g_enabled;
}

double ork_prof_now(void) {
    return 1e-9 * (double)ork_time_ns();
}

void ork_prof_add(const char *kind, const char *name, double seconds) {
    for (int i = 0; i < g_n; i++)
        if (!strcmp(g_e[i].kind, kind) && !strcmp(g_e[i].name, name)) {
            g_e[i].sec += seconds;
            g_e[i].count++;
            return;
        }
    if (g_n == MAXE) return;
    entry *e = &g_e[g_n++];
    snprintf(e->kind, sizeof e->kind, "%s", kind);
    snprintf(e->name, sizeof e->name, "%s", name);
    e->sec = seconds;
    e->count = 1;
}

static int by_time(const void *a, const void *b) {
    double x = ((const entry *)a)->sec, y = ((const entry *)b)->sec;
    return (x < y) - (x > y);
}

void ork_prof_report(FILE *f, double steps) {
    if (!g_n) return;
    qsort(g_e, (size_t)g_n, sizeof g_e[0], by_time);
    if (steps <= 0) steps = 1;
    fprintf(f, "profile (ORAKUL_PROFILE, synchronised: absolute times are inflated), per step:\n");
    fprintf(f, "  %-8s %-40s %10s %8s\n", "kind", "name", "ms/step", "calls");
    for (int i = 0; i < g_n; i++)
        fprintf(f, "  %-8s %-40s %10.2f %8.0f\n", g_e[i].kind, g_e[i].name, 1e3 * g_e[i].sec / steps,
                (double)g_e[i].count / steps);
}
