/* bench/stream/bench_transit_speed.c — the transit coding' CPU encoder speed
 * (the streamer codes every streamed block once, before step 1: `coded in N s`
 * in the log). Gaussian weights (sigma 0.05) as BF16 and as E5M2 (the
 * numerics library's conversions, saturating), each coded by
 * the coding the streamer picks for it (words or bytes), with 1..T threads,
 * best of 3; prints the sizing and encode rates and an FNV-1a hash of the coded
 * bytes (an encoder change must keep it). The output buffer is touched once
 * first, as the streamer's reused scratch is.
 * Usage: bench_transit_speed [MiB (default 256)] [max threads (default: all)] */
#include "numerics/fp8.h"
#include "numerics/half.h"
#include "numerics/quantize.h" /* ork_numerics_threads */
#include "stream/transit/transit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t xs(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* n Gaussian values as BF16 words (word 2) or E5M2 bytes (word 1) */
static void fill(uint8_t *raw, size_t n, int word) {
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        double u1 = ((double)(xs(&x) >> 11) + 0.5) / 9007199254740992.0, u2 = (double)(xs(&x) >> 11) / 9007199254740992.0;
        float g = (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2) * 0.05);
        if (word == 2) {
            uint16_t h = ork_f32_to_bf16(g);
            raw[2 * i] = (uint8_t)h;
            raw[2 * i + 1] = (uint8_t)(h >> 8);
        } else {
            raw[i] = ork_f32_to_e5m2(g, ORK_FP8_SATFINITE);
        }
    }
}

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 256;
    int tmax = argc > 2 ? atoi(argv[2]) : ork_numerics_threads();
    if (!mib || tmax < 1) {
        fprintf(stderr, "usage: bench_transit_speed [MiB] [max threads]\n");
        return 2;
    }
    size_t bytes = mib << 20;
    for (int word = 2; word >= 1; word--) {
        ork_transit_kind k = word == 2 ? ORK_TRANSIT_WORDS : ORK_TRANSIT_BYTES;
        uint8_t *raw = malloc(bytes);
        if (!raw) return 1;
        fill(raw, bytes / (size_t)word, word);
        ork_transit_hdr h;
        size_t cap = ork_transit_coded_bytes(k, raw, bytes, &h);
        uint8_t *out = cap ? malloc(cap) : NULL;
        if (!out) return 1;
        memset(out, 1, cap);
        double ts = 1e9;
        for (int r = 0; r < 3; r++) {
            double t0 = now();
            (void)ork_transit_coded_bytes(k, raw, bytes, &h);
            if (now() - t0 < ts) ts = now() - t0;
        }
        printf("%s %zu MiB: coded %.3f of the bytes; sizing (1 thread) %.2f GB/s\n",
               word == 2 ? "BF16 as words" : "E5M2 as bytes", mib, (double)cap / (double)bytes, (double)bytes / 1e9 / ts);
        for (int t = 1; t <= tmax; t *= 2) {
            double te = 1e9;
            size_t got = 0;
            for (int r = 0; r < 3; r++) {
                double t0 = now();
                if (ork_transit_encode(k, raw, bytes, out, cap, &got, t) != ORK_OK) return 1;
                if (now() - t0 < te) te = now() - t0;
            }
            uint64_t hs = 1469598103934665603ull;
            for (size_t i = 0; i < got; i++) hs = (hs ^ out[i]) * 1099511628211ull;
            printf("  encode, %d thread%s: %.2f GB/s (best of 3), hash %016llx\n", t, t > 1 ? "s" : "",
                   (double)bytes / 1e9 / te, (unsigned long long)hs);
            if (t < tmax && t * 2 > tmax) t = tmax / 2; /* end on tmax */
        }
        free(out);
        free(raw);
    }
    return 0;
}
