/* tensor/alloc.h — device memory accounting, and the graph arena on top of it.
 *
 * ork_alloc: every device allocation goes through here, with a tag ("weights",
 * "activations", "lora", "grads", "optimizer", "workspace", ...). With a byte
 * budget set, a request that would pass it is refused with ONE error line
 * (what was asked, for which tag, what is in use by tag, the budget) and
 * ORK_E_BUDGET; nothing is allocated and nothing leaks.
 *
 * ork_arena: a graph's activation memory. Chunks come from ork_alloc; inside
 * them a first-fit free list with coalescing serves get/put, so the tape can
 * release a saved activation as soon as its last backward ran. mark/release
 * frees everything allocated after a mark (per-block no-grad forward).
 * reset frees all; if the step needed more than one chunk, reset replaces
 * them by a single chunk of their total size, so from the second step on the
 * same allocation pattern makes no device allocation at all
 * (ork_arena_grow_count stays constant; tests assert it).
 *
 * ork_hpool: host bump memory for per-step structs (tensor headers, tape
 * nodes), with the same mark/reset. [control-thread] for all three. */
#ifndef ORK_TENSOR_ALLOC_H
#define ORK_TENSOR_ALLOC_H

#include "tensor/backend.h"
#include <stddef.h>
#include <stdint.h>

#define ORK_ALLOC_ALIGN 256
/* bytes rounded up to ORK_ALLOC_ALIGN */
static inline size_t ork_alloc_round(size_t bytes) { return (bytes + ORK_ALLOC_ALIGN - 1) & ~(size_t)(ORK_ALLOC_ALIGN - 1); }

typedef struct ork_alloc ork_alloc;

/* budget 0: unlimited. */
ork_status ork_alloc_create(const ork_backend *be, size_t budget, ork_alloc **out);
/* Frees everything still allocated (with a warning line naming the tags). */
void ork_alloc_destroy(ork_alloc *a);
ork_status ork_alloc_get(ork_alloc *a, size_t bytes, const char *tag, void **ptr);
void ork_alloc_put(ork_alloc *a, void *ptr);
/* Bytes in use under tag, or in all when tag is NULL. */
size_t ork_alloc_in_use(const ork_alloc *a, const char *tag);
size_t ork_alloc_budget(const ork_alloc *a);
/* High-water mark of ork_alloc_in_use(a, NULL) since creation. */
size_t ork_alloc_peak(const ork_alloc *a);
/* High-water mark of ork_alloc_in_use(a, tag) (0 for a tag never used). */
size_t ork_alloc_peak_tag(const ork_alloc *a, const char *tag);
void ork_alloc_set_budget(ork_alloc *a, size_t budget);
/* Successful device allocations made so far (monotonic). */
uint64_t ork_alloc_count(const ork_alloc *a);
const ork_backend *ork_alloc_backend(const ork_alloc *a);

typedef struct ork_arena ork_arena;

ork_status ork_arena_create(ork_alloc *a, const char *tag, size_t initial_bytes, ork_arena **out);
void ork_arena_destroy(ork_arena *ar);
/* bytes rounded up to ORK_ALLOC_ALIGN; may grow (a new chunk) when full. */
ork_status ork_arena_get(ork_arena *ar, size_t bytes, void **ptr);
void ork_arena_put(ork_arena *ar, void *ptr);
/* put, quietly: 1 when ptr started a live block of this arena (now freed), 0
 * (nothing done, no line) otherwise — a tensor of another graph's arena. */
int ork_arena_put_if_live(ork_arena *ar, void *ptr);
uint64_t ork_arena_mark(const ork_arena *ar);
/* Frees every block allocated at or after the mark. */
void ork_arena_release(ork_arena *ar, uint64_t mark);
/* Frees all; coalesces chunks into one when there were several. */
ork_status ork_arena_reset(ork_arena *ar);
uint64_t ork_arena_grow_count(const ork_arena *ar); /* chunk allocations made */
size_t ork_arena_live(const ork_arena *ar);         /* bytes in live blocks */
size_t ork_arena_peak(const ork_arena *ar);         /* high-water mark of live */
size_t ork_arena_capacity(const ork_arena *ar);
/* Grow the capacity to at least bytes with one chunk (nothing when it is
 * already there), so a step that will need that much does not grow by
 * doubling; the next reset coalesces the chunks as usual. */
ork_status ork_arena_reserve(ork_arena *ar, size_t bytes);

typedef struct ork_hpool ork_hpool;
ork_status ork_hpool_create(size_t chunk_bytes, ork_hpool **out);
void ork_hpool_destroy(ork_hpool *p);
/* Zeroed, 16-byte aligned; NULL only when the host is out of memory. */
void *ork_hpool_get(ork_hpool *p, size_t bytes);
typedef struct ork_hpool_mark { size_t chunk, used; } ork_hpool_mark;
ork_hpool_mark ork_hpool_mark_get(const ork_hpool *p);
void ork_hpool_release(ork_hpool *p, ork_hpool_mark m);
void ork_hpool_reset(ork_hpool *p);

#endif
