/* cpu/cpu_par.c — a tiny parallel-for (platform threads): one thread per range, joined
 * before returning. Spawning costs tens of microseconds, so callers pass a
 * min_chunk that makes each range worth it. Owns nothing between calls. */
#include "cpu/cpu.h"

#include "platform/platform.h"

#define ORK_PAR_MAX 64

typedef struct par_job {
    ork_par_fn fn;
    void *ctx;
    int64_t lo, hi;
} par_job;

static void par_main(void *arg) {
    par_job *j = arg;
    j->fn(j->ctx, j->lo, j->hi);
}

void ork_par_for(int nthreads, int64_t n, int64_t min_chunk, ork_par_fn fn, void *ctx) {
    if (n <= 0) return;
    if (min_chunk < 1) min_chunk = 1;
    int64_t parts = n / min_chunk;
    if (parts > nthreads) parts = nthreads;
    if (parts > ORK_PAR_MAX) parts = ORK_PAR_MAX;
    if (parts <= 1) { fn(ctx, 0, n); return; }
    par_job jobs[ORK_PAR_MAX];
    ork_thread *th[ORK_PAR_MAX];
    int started[ORK_PAR_MAX] = {0};
    for (int64_t p = 0; p < parts; p++)
        jobs[p] = (par_job){fn, ctx, n * p / parts, n * (p + 1) / parts};
    for (int64_t p = 1; p < parts; p++)
        started[p] = ork_thread_start(par_main, &jobs[p], &th[p]) == ORK_OK;
    fn(ctx, jobs[0].lo, jobs[0].hi);
    for (int64_t p = 1; p < parts; p++) {
        if (started[p]) ork_thread_join(th[p]);
        else fn(ctx, jobs[p].lo, jobs[p].hi); /* could not spawn: do it here */
    }
}
