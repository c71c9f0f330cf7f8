/* te_prefetch.c — maps the weights' pages ahead of te_load: the safetensors
 * file is mmap'd, and the core's sink copies each weight on one thread, so
 * every 4 KiB page of 9 GB (T5-XXL in bf16) would fault on that thread.
 * A few threads walk the weights in load order (the platform service's
 * map_prefetch: madvise MADV_POPULATE_READ / PrefetchVirtualMemory, else a
 * read of one byte per page) while the sink copies: by the time it reaches a
 * weight, its pages are mapped. Values are untouched (reads only). Threads,
 * CPU count and page size come from orakul.platform/1; a core without it: no
 * prefetch. Owns the threads between te_prefetch_start and te_prefetch_stop. */
#include "te.h"

#include <orakul/platform.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TE_PF_MAX_THREADS 4

typedef struct te_range {
    const void *p;
    size_t n;
} te_range;

struct te_prefetch {
    te_range *r;
    int n;
    atomic_int next, stop;
    int nthreads;
    const ork_platform_api *pl;
    ork_thread *th[TE_PF_MAX_THREADS];
};

static void populate(const ork_platform_api *pl, const te_range *r) {
    size_t pg = pl->page_size();
    size_t page = pg > 0 ? pg : 4096;
    uintptr_t a = (uintptr_t)r->p & ~(uintptr_t)(page - 1), e = (uintptr_t)r->p + r->n;
    if (pl->map_prefetch((const void *)a, e - a) == ORK_OK) return;
    volatile const unsigned char *q = (volatile const unsigned char *)r->p;
    unsigned sink = 0;
    for (uintptr_t x = (uintptr_t)r->p; x < e; x = (x & ~(uintptr_t)(page - 1)) + page) sink += q[x - (uintptr_t)r->p];
    (void)sink;
}

static void run(void *arg) {
    te_prefetch *pf = arg;
    for (;;) {
        if (atomic_load(&pf->stop)) break;
        int i = atomic_fetch_add(&pf->next, 1);
        if (i >= pf->n) break;
        populate(pf->pl, &pf->r[i]);
    }
}

te_prefetch *te_prefetch_start(te_model *m) {
    const char *e = getenv("ORAKUL_TEXT_PREFETCH_THREADS");
    const ork_platform_api *pl = m->host->get_service ? m->host->get_service(m->host, ORK_SERVICE_PLATFORM) : NULL;
    if (!pl) return NULL; /* a core before the service: no prefetch */
    int cores = pl->cpu_count();
    int nt = e && *e ? atoi(e) : (cores / 4 > 1 ? cores / 4 : 1);
    if (nt > TE_PF_MAX_THREADS) nt = TE_PF_MAX_THREADS;
    if (nt < 1 || m->n_weights < 1) return NULL;
    te_prefetch *pf = calloc(1, sizeof *pf);
    if (!pf || !(pf->r = calloc((size_t)m->n_weights, sizeof *pf->r))) {
        free(pf);
        return NULL; /* no prefetch: the load goes on without it */
    }
    for (int i = 0; i < m->n_weights; i++) {
        const char *name = m->alias_shared && !strcmp(m->weights[i].name, "shared.weight") ? m->alias_shared
                                                                                          : m->weights[i].name;
        ork_st_info t;
        if (te_find(m, name, &t) == ORK_OK && t.data && t.nbytes) pf->r[pf->n++] = (te_range){t.data, (size_t)t.nbytes};
    }
    atomic_init(&pf->next, 0);
    atomic_init(&pf->stop, 0);
    pf->pl = pl;
    for (int k = 0; k < nt; k++) {
        if (pl->thread_start(run, pf, &pf->th[k]) != ORK_OK) break;
        pf->nthreads++;
    }
    if (!pf->nthreads) {
        free(pf->r);
        free(pf);
        return NULL;
    }
    return pf;
}

void te_prefetch_stop(te_prefetch *pf) {
    if (!pf) return;
    atomic_store(&pf->stop, 1);
    for (int k = 0; k < pf->nthreads; k++) pf->pl->thread_join(pf->th[k]);
    free(pf->r);
    free(pf);
}
