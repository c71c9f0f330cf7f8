/* dist/bucket.c — see bucket.h. Owns the plan's arrays. */
#include "dist/bucket.h"

#include "util/log.h"

#include <stdlib.h>
#include <string.h>

void ork_bucket_plan_free(ork_bucket_plan *p) {
    if (!p) return;
    free(p->offset);
    free(p->bucket_of_block);
    free(p->begin);
    free(p->end);
    free(p->n_blocks_in);
    free(p->pending);
    free(p->done);
    memset(p, 0, sizeof *p);
}

ork_status ork_bucket_plan_make(int n_params, const int64_t *numel, const int *block, int n_blocks, int64_t cap,
                                int64_t align, ork_bucket_plan *out) {
    memset(out, 0, sizeof *out);
    if (n_params < 0 || n_blocks < 0 || cap < 1 || align < 1)
        return ORK_FAIL(ORK_E_INVALID, "buckets: bad plan arguments (%d params, %d blocks, cap %lld, align %lld)",
                        n_params, n_blocks, (long long)cap, (long long)align);
    ork_bucket_plan *p = out;
    p->n_params = n_params;
    p->n_blocks = n_blocks;
    /* at most one bucket per block plus the tail */
    size_t nbk = (size_t)n_blocks + 1;
    p->offset = calloc((size_t)n_params + 1, sizeof *p->offset);
    p->bucket_of_block = malloc(((size_t)n_blocks + 1) * sizeof *p->bucket_of_block);
    p->begin = calloc(nbk, sizeof *p->begin);
    p->end = calloc(nbk, sizeof *p->end);
    p->n_blocks_in = calloc(nbk, sizeof *p->n_blocks_in);
    p->pending = calloc(nbk, sizeof *p->pending);
    p->done = calloc((size_t)n_blocks + 1, 1);
    if (!p->offset || !p->bucket_of_block || !p->begin || !p->end || !p->n_blocks_in || !p->pending || !p->done) {
        ork_bucket_plan_free(p);
        return ORK_E_NOMEM;
    }
    for (int b = 0; b < n_blocks; b++) p->bucket_of_block[b] = -1;
    for (int i = 0; i < n_params; i++)
        if (numel[i] < 0) {
            ork_bucket_plan_free(p);
            return ORK_FAIL(ORK_E_INVALID, "buckets: parameter %d has %lld elements", i, (long long)numel[i]);
        }
    int64_t pos = 0;
    int cur = -1;            /* the open bucket */
    /* blocks in backward order, then the out-of-range tail (b == -1) */
    for (int b = n_blocks - 1; b >= -1; b--) {
        int64_t start = pos, size = 0;
        int any = 0;
        for (int i = 0; i < n_params; i++) {
            int in = b >= 0 ? block[i] == b : (block[i] < 0 || block[i] >= n_blocks);
            if (!in) continue;
            int64_t at = (start + size + align - 1) / align * align;
            p->offset[i] = at;
            size = at + numel[i] - start;
            any = 1;
        }
        if (!any) continue;
        int64_t bend = (start + size + align - 1) / align * align; /* the next bucket starts aligned */
        if (b < 0 || cur < 0 || (p->end[cur] - p->begin[cur]) + (bend - start) > cap || p->n_blocks_in[cur] == 0) {
            if (cur < 0 || p->end[cur] > p->begin[cur]) cur++;
            p->begin[cur] = start;
            p->end[cur] = start;
        }
        p->end[cur] = bend;
        if (b >= 0) {
            p->n_blocks_in[cur]++;
            p->bucket_of_block[b] = cur;
        }
        pos = bend;
    }
    p->n_buckets = cur + 1;
    p->total = pos;
    ork_bucket_reset(p);
    return ORK_OK;
}

void ork_bucket_reset(ork_bucket_plan *p) {
    for (int k = 0; k < p->n_buckets; k++) p->pending[k] = p->n_blocks_in[k];
    memset(p->done, 0, (size_t)p->n_blocks + 1);
    p->next = 0;
}

int ork_bucket_block_done(ork_bucket_plan *p, int block, int *first) {
    *first = p->next;
    if (block < 0 || block >= p->n_blocks || p->done[block]) return 0;
    p->done[block] = 1;
    int k = p->bucket_of_block[block];
    if (k < 0) return 0;
    p->pending[k]--;
    int n = 0;
    while (p->next < p->n_buckets && p->n_blocks_in[p->next] > 0 && p->pending[p->next] == 0) {
        p->next++;
        n++;
    }
    return n;
}

int ork_bucket_flush(ork_bucket_plan *p, int *first) {
    *first = p->next;
    int n = p->n_buckets - p->next;
    p->next = p->n_buckets;
    return n;
}
