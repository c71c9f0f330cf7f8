/* bench/stream/bench_wcodec_ratio.c — what the transit codec (stream/wcodec.h)
 * does to REAL weights: every 2-D-or-larger floating tensor of the given
 * safetensors files (a file, an index, or a folder) converted to BF16 as the
 * weight store keeps it, coded the way the streamer codes a block (all the
 * tensors of one file in one region: one exponent table), and each tensor
 * alone. Prints the coded share and the exceptions; the streamer codes a
 * block when the share is <= ORK_STREAM_CODEC_RATIO. The random weights of
 * the streaming bench code to 0.750.
 * Usage: bench_wcodec_ratio <weights> [...] */
#include "cpu/cpu.h" /* ork_cpu_float_dt */
#include "io/safetensors.h"
#include "stream/streamer.h"
#include "stream/wcodec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ratio_of(const char *path) {
    ork_st_set *set;
    if (ork_st_set_open(path, &set) != ORK_OK) return 1;
    size_t n = ork_st_set_count(set), total = 0;
    for (size_t i = 0; i < n; i++) {
        const ork_st_tensor *t = ork_st_set_at(set, i);
        if (t->ndim >= 2 && ork_cpu_float_dt(t->dtype)) total += (size_t)ork_st_nelements(t);
    }
    uint16_t *all = malloc(total * 2 + 2);
    if (!all) { ork_st_set_close(set); return 1; }
    size_t at = 0, worst_i = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        const ork_st_tensor *t = ork_st_set_at(set, i);
        if (t->ndim < 2 || !ork_cpu_float_dt(t->dtype)) continue;
        size_t ne = (size_t)ork_st_nelements(t);
        if (ork_st_read_into(t, ORK_BF16, all + at) != ORK_OK) { free(all); ork_st_set_close(set); return 1; }
        ork_wcodec_hdr h;
        size_t c = ork_wcodec_coded_bytes(all + at, ne * 2, &h);
        double r = (double)c / (double)(ne * 2);
        if (ne >= 16384 && r > worst) { worst = r; worst_i = i; }
        at += ne;
    }
    ork_wcodec_hdr h;
    size_t c = ork_wcodec_coded_bytes(all, total * 2, &h);
    printf("%s: %zu BF16 values in %zu tensors: coded %.4f of the bytes, %llu exceptions (%.4f%%); "
           "worst tensor of >= 16K values alone: %s %.4f; streamed coded: %s\n",
           path, total, n, (double)c / (double)(total * 2), (unsigned long long)h.n_exc,
           100.0 * (double)h.n_exc / (double)(total ? total : 1), worst > 0 ? ork_st_set_at(set, worst_i)->name : "-",
           worst, (double)c <= ORK_STREAM_CODEC_RATIO * (double)(total * 2) ? "yes" : "no (raw)");
    free(all);
    ork_st_set_close(set);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s <weights.safetensors | index.json | folder> [...]\n", argv[0]);
        return 2;
    }
    int rc = 0;
    for (int i = 1; i < argc; i++) rc |= ratio_of(argv[i]);
    return rc;
}
