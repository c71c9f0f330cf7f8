/* bench/stream/bench_transit_ratio.c — what the transit coding
 * (stream/transit/) does to REAL weights: every 2-D-or-larger floating tensor
 * of the given safetensors files (a file, an index, or a folder) converted to
 * BF16 as the weight store keeps it, coded as 16-bit words the way the
 * streamer codes a block (all the tensors of one file in one region: one
 * class table), and each tensor alone; then the same tensors quantized as
 * model.quantize does (per-row absmax, rows = the first dimension) to E5M2
 * (qtype bf8) and E4M3 (qfloat8), coded as bytes. Prints the coded shares and
 * the L3 escapes; the streamer codes a block when its share is <=
 * ORK_STREAM_CODEC_RATIO. The random weights of the streaming bench code to
 * 0.664 (BF16) and 0.679 (E5M2).
 * Usage: bench_transit_ratio <weights> [...] */
#include "numerics/elem.h" /* ork_elem_float_dt */
#include "io/safetensors.h"
#include "numerics/quantize.h"
#include "stream/streamer.h"
#include "stream/transit/transit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ratio_of(const char *path) {
    ork_st_set *set;
    if (ork_st_set_open(path, &set) != ORK_OK) return 1;
    size_t n = ork_st_set_count(set), total = 0;
    for (size_t i = 0; i < n; i++) {
        const ork_st_tensor *t = ork_st_set_at(set, i);
        if (t->ndim >= 2 && ork_elem_float_dt(t->dtype)) total += (size_t)ork_st_nelements(t);
    }
    uint16_t *all = malloc(total * 2 + 2);
    if (!all) { ork_st_set_close(set); return 1; }
    size_t at = 0, worst_i = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        const ork_st_tensor *t = ork_st_set_at(set, i);
        if (t->ndim < 2 || !ork_elem_float_dt(t->dtype)) continue;
        size_t ne = (size_t)ork_st_nelements(t);
        if (ork_st_read_into(t, ORK_BF16, all + at) != ORK_OK) { free(all); ork_st_set_close(set); return 1; }
        ork_transit_hdr h;
        size_t c = ork_transit_coded_bytes(ORK_TRANSIT_WORDS, all + at, ne * 2, &h);
        double r = (double)c / (double)(ne * 2);
        if (ne >= 16384 && r > worst) { worst = r; worst_i = i; }
        at += ne;
    }
    ork_transit_hdr h;
    size_t c = ork_transit_coded_bytes(ORK_TRANSIT_WORDS, all, total * 2, &h);
    /* FP8 as the quantizer stores it, one region per format */
    uint8_t *q = malloc(total + 1);
    double r8[2] = {0, 0}, e8[2] = {0, 0};
    for (int f = 0; q && f < 2; f++) {
        size_t o = 0;
        int ok = 1;
        for (size_t i = 0; i < n && ok; i++) {
            const ork_st_tensor *t = ork_st_set_at(set, i);
            if (t->ndim < 2 || !ork_elem_float_dt(t->dtype)) continue;
            size_t ne = (size_t)ork_st_nelements(t), rows = (size_t)t->shape[0], cols = rows ? ne / rows : 0;
            float *w = malloc(ne * sizeof *w), *sc = malloc((rows ? rows : 1) * sizeof *sc);
            ok = w && sc && ork_st_read_into(t, ORK_F32, w) == ORK_OK &&
                 ork_quantize_fp8(t->name, w, ORK_F32, rows, cols, f ? ORK_F8_E4M3 : ORK_F8_E5M2, 0, q + o, sc, NULL) == ORK_OK;
            free(w);
            free(sc);
            o += ne;
        }
        ork_transit_hdr h8;
        size_t c8 = ok ? ork_transit_coded_bytes(ORK_TRANSIT_BYTES, q, o, &h8) : 0;
        r8[f] = c8 && o ? (double)c8 / (double)o : 0;
        e8[f] = c8 && o ? 100.0 * (double)h8.n_exc / (double)o : 0;
    }
    free(q);
    printf("%s: %zu BF16 values in %zu tensors: coded %.4f of the bytes, %llu L3 escapes (%.4f%%); "
           "worst tensor of >= 16K values alone: %s %.4f; streamed coded: %s\n",
           path, total, n, (double)c / (double)(total * 2), (unsigned long long)h.n_exc,
           100.0 * (double)h.n_exc / (double)(total ? total : 1), worst > 0 ? ork_st_set_at(set, worst_i)->name : "-",
           worst, (double)c <= ORK_STREAM_CODEC_RATIO * (double)(total * 2) ? "yes" : "no (raw)");
    printf("  as FP8 (per-row absmax), coded as bytes: E5M2 %.4f of the bytes (%.2f%% L3 escapes; streamed coded: %s), "
           "E4M3 %.4f (%.2f%%; %s)\n", r8[0], e8[0], r8[0] > 0 && r8[0] <= ORK_STREAM_CODEC_RATIO ? "yes" : "no (raw)", r8[1],
           e8[1], r8[1] > 0 && r8[1] <= ORK_STREAM_CODEC_RATIO ? "yes" : "no (raw)");
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
