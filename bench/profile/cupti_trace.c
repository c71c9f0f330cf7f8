/* bench/profile/cupti_trace.c — a CUPTI activity tracer loaded into any CUDA
 * program through CUDA_INJECTION64_PATH (issue #31: where a training step's
 * time goes, kernel by kernel, on a machine without Nsight Systems). It
 * records every kernel, memcpy and memset with its device start/end time
 * and stream, and at exit writes one tab-separated line per record to
 * $ORK_CUPTI_OUT (default /tmp/cupti_trace.tsv):
 *   K|C|S <tab> start_ns <tab> end_ns <tab> stream <tab> grid <tab> name-or-bytes
 * (K kernel with its grid x*y*z, C copy with its kind, S memset; grid 0 for
 * copies and memsets). bench/profile/kernel_classes.py
 * turns the file into the per-class breakdown. Built on the GPU machine
 * against its own CUPTI (bench/profile/run_gpu.sh); not part of orakul. */
#include <cupti.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_BYTES (8u << 20)

static FILE *g_out;

static void CUPTIAPI buf_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = aligned_alloc(8, BUF_BYTES);
    *size = *buffer ? BUF_BYTES : 0;
    *max_records = 0;
}

#if CUPTI_API_VERSION >= 130500
typedef CUpti_ActivityKernel13 kernel_rec;
typedef CUpti_ActivityMemcpy7 memcpy_rec;
typedef CUpti_ActivityMemset5 memset_rec;
#else
typedef CUpti_ActivityKernel10 kernel_rec;
typedef CUpti_ActivityMemcpy6 memcpy_rec;
typedef CUpti_ActivityMemset4 memset_rec;
#endif

static void CUPTIAPI buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *rec = NULL;
    while (g_out && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        switch (rec->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
            const kernel_rec *k = (const kernel_rec *)rec;
            fprintf(g_out, "K\t%llu\t%llu\t%u\t%lld\t%s\n", (unsigned long long)k->start, (unsigned long long)k->end,
                    k->streamId, (long long)k->gridX * k->gridY * k->gridZ, k->name ? k->name : "?");
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            const memcpy_rec *m = (const memcpy_rec *)rec;
            fprintf(g_out, "C\t%llu\t%llu\t%u\t0\tkind%u:%llu\n", (unsigned long long)m->start, (unsigned long long)m->end,
                    m->streamId, (unsigned)m->copyKind, (unsigned long long)m->bytes);
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            const memset_rec *m = (const memset_rec *)rec;
            fprintf(g_out, "S\t%llu\t%llu\t%u\t0\t%llu\n", (unsigned long long)m->start, (unsigned long long)m->end,
                    m->streamId, (unsigned long long)m->bytes);
            break;
        }
        default:
            break;
        }
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
        fprintf(stderr, "cupti_trace: %zu records dropped\n", dropped);
    free(buffer);
}

static void at_exit(void) {
    cuptiActivityFlushAll(1);
    if (g_out) fclose(g_out);
    g_out = NULL;
}

/* The CUDA driver calls this when the library is named in CUDA_INJECTION64_PATH. */
int InitializeInjection(void) {
    const char *path = getenv("ORK_CUPTI_OUT");
    g_out = fopen(path && *path ? path : "/tmp/cupti_trace.tsv", "w");
    if (!g_out) {
        fprintf(stderr, "cupti_trace: cannot open the output file\n");
        return 0;
    }
    if (cuptiActivityRegisterCallbacks(buf_requested, buf_completed) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET) != CUPTI_SUCCESS) {
        fprintf(stderr, "cupti_trace: CUPTI refused the activity kinds\n");
        return 0;
    }
    atexit(at_exit);
    return 1;
}
