/* stream/wcodec_cuda.cu — the transit codec's device decoder (see wcodec.h):
 * one kernel rebuilds every word from its sm byte and table index, a second
 * patches the exceptions' exponents (thread per exception) and writes the odd
 * tail byte. Both are enqueued on the caller's stream, in that order, and
 * nothing here synchronises. The decode is memory-bound (12 bytes in, 16 out
 * per 8 words), so the word kernel works on 8 words a thread with one load of
 * the 8 sm bytes, one of the 4 idx bytes and one 16-byte store, and turns
 * indices into exponents with byte permutes rather than a memory lookup. */
#include <cuda_runtime.h>

extern "C" {
#include "stream/wcodec2.h"
#include "util/log.h"
}

#include <stdint.h>

#define WC_THREADS 256

/* The table as four words (table byte k = byte k % 4 of w[k / 4]): a 16-byte
 * kernel argument. */
struct wc_tab {
    uint32_t w[4];
};

/* Exponents of 4 words from their 4 index nibbles (nib4, low nibble first):
 * bits 2..0 pick a byte of table[0..7] and of table[8..15] by permute, bit 3
 * picks between the two. The escape index gives table[15], patched later. */
__device__ __forceinline__ uint32_t wc_exps4(uint32_t nib4, const wc_tab &t) {
    uint32_t sel = nib4 & 0x7777u;
    uint32_t lo = __byte_perm(t.w[0], t.w[1], sel), hi = __byte_perm(t.w[2], t.w[3], sel);
    uint32_t h = (nib4 >> 3) & 0x1111u; /* bit 4j: word j takes hi */
    uint32_t m = ((h & 1u) | ((h & 0x10u) << 4) | ((h & 0x100u) << 8) | ((h & 0x1000u) << 12)) * 0xffu;
    return (lo & ~m) | (hi & m);
}

/* Two decoded words (low half: the first) from bytes picked out of 4 sm bytes
 * and 4 exponents by sel (0x4140: bytes 0 and 1, 0x4342: bytes 2 and 3). */
__device__ __forceinline__ uint32_t wc_pair(uint32_t sm4, uint32_t e4, uint32_t sel) {
    uint32_t s = __byte_perm(sm4, 0u, sel), e = __byte_perm(e4, 0u, sel);
    return ((s & 0x00800080u) << 8) | (e << 7) | (s & 0x007f007fu);
}

/* Word i, one at a time and byte by byte: the ragged end, or buffers not
 * aligned for the vector path. */
__device__ __forceinline__ void wc_word1(const uint8_t *sm, const uint8_t *idx, const wc_tab &t, uint8_t *out,
                                         uint64_t i) {
    uint32_t x = (idx[i >> 1] >> ((i & 1) * 4)) & 15u;
    uint32_t e = wc_exps4(x, t) & 0xffu, s = sm[i];
    out[2 * i] = (uint8_t)((s & 0x7fu) | (e << 7));
    out[2 * i + 1] = (uint8_t)((s & 0x80u) | (e >> 1));
}

template <bool VEC>
__global__ void wc_words_kernel(const uint8_t *__restrict__ sm, const uint8_t *__restrict__ idx, wc_tab t,
                                uint8_t *__restrict__ out, uint64_t n) {
    uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x, i0 = g * 8;
    if (i0 >= n) return;
    if (VEC && i0 + 8 <= n) {
        uint2 s = __ldg((const uint2 *)(sm + i0));
        uint32_t x = __ldg((const uint32_t *)(idx + i0 / 2));
        uint32_t e0 = wc_exps4(x & 0xffffu, t), e1 = wc_exps4(x >> 16, t);
        uint4 o;
        o.x = wc_pair(s.x, e0, 0x4140u);
        o.y = wc_pair(s.x, e0, 0x4342u);
        o.z = wc_pair(s.y, e1, 0x4140u);
        o.w = wc_pair(s.y, e1, 0x4342u);
        *(uint4 *)(out + 2 * i0) = o;
        return;
    }
    uint64_t end = i0 + 8 < n ? i0 + 8 : n;
    for (uint64_t i = i0; i < end; i++) wc_word1(sm, idx, t, out, i);
}

/* Thread k patches exception k's exponent (positions past n_words, possible
 * only in a malformed buffer, are skipped: never a write out of bounds);
 * thread 0 also writes the tail byte. Runs after the word kernel. */
__global__ void wc_exc_kernel(const uint8_t *__restrict__ pos, const uint8_t *__restrict__ ex, uint64_t n_exc,
                              uint64_t n, uint8_t *__restrict__ out, uint64_t raw_bytes, int tail_present,
                              uint8_t tail) {
    uint64_t k = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k == 0 && tail_present) out[raw_bytes - 1] = tail;
    if (k >= n_exc) return;
    const uint8_t *pp = pos + 4 * k;
    uint64_t p = pp[0] | (uint32_t)pp[1] << 8 | (uint32_t)pp[2] << 16 | (uint32_t)pp[3] << 24;
    if (p >= n) return;
    uint32_t e = ex[k];
    out[2 * p] = (uint8_t)((out[2 * p] & 0x7fu) | (e << 7));
    out[2 * p + 1] = (uint8_t)((out[2 * p + 1] & 0x80u) | (e >> 1));
}

#define WC_CHECK(what) do { cudaError_t e_ = cudaGetLastError(); if (e_ != cudaSuccess) \
    return ork_fail(ORK_E_CUDA, "wcodec: %s launch failed: %s", (what), cudaGetErrorString(e_)); } while (0)

extern "C" ork_status ork_wcodec_decode_cuda(const void *coded_dev, const ork_wcodec_hdr *hdr, void *out_dev,
                                             void *stream) {
    if (!coded_dev || !hdr || (!out_dev && hdr->raw_bytes))
        return ork_fail(ORK_E_INVALID, "wcodec: device decode needs coded_dev, hdr and out_dev");
    if (hdr->magic == ORK_WCODEC_MAGIC8) return ork_wcodec8_decode_cuda(coded_dev, hdr, out_dev, stream);
    if (ork_wcodec2_word(hdr->magic)) return ork_wcodec2_decode_cuda(coded_dev, hdr, out_dev, stream);
    if (hdr->magic != ORK_WCODEC_MAGIC || hdr->tail_present > 1 || hdr->n_exc > hdr->n_words ||
        hdr->raw_bytes != hdr->n_words * 2 + hdr->tail_present)
        return ork_fail(ORK_E_FORMAT, "wcodec: device decode given an inconsistent header (use ork_wcodec_header)");
    cudaStream_t s = (cudaStream_t)stream;
    const uint8_t *c = (const uint8_t *)coded_dev;
    uint8_t *out = (uint8_t *)out_dev;
    uint64_t n = hdr->n_words;
    wc_tab t;
    for (int k = 0; k < 4; k++)
        t.w[k] = hdr->table[4 * k] | (uint32_t)hdr->table[4 * k + 1] << 8 | (uint32_t)hdr->table[4 * k + 2] << 16 |
                 (uint32_t)hdr->table[4 * k + 3] << 24;
    if (n > 0) {
        const uint8_t *sm = c + hdr->sm_offset, *idx = c + hdr->idx_offset;
        /* sections are 256-aligned in the buffer, so this holds whenever the
         * buffer and out_dev are 16-aligned; otherwise the byte path */
        bool vec = ((uintptr_t)sm % 8 == 0) && ((uintptr_t)idx % 4 == 0) && ((uintptr_t)out % 16 == 0);
        uint64_t blocks = ((n + 7) / 8 + WC_THREADS - 1) / WC_THREADS;
        if (vec) wc_words_kernel<true><<<(unsigned)blocks, WC_THREADS, 0, s>>>(sm, idx, t, out, n);
        else wc_words_kernel<false><<<(unsigned)blocks, WC_THREADS, 0, s>>>(sm, idx, t, out, n);
        WC_CHECK("word kernel");
    }
    if (hdr->n_exc > 0 || hdr->tail_present) {
        uint64_t threads = hdr->n_exc > 0 ? hdr->n_exc : 1;
        uint64_t blocks = (threads + WC_THREADS - 1) / WC_THREADS;
        wc_exc_kernel<<<(unsigned)blocks, WC_THREADS, 0, s>>>(c + hdr->exc_pos_offset, c + hdr->exc_e_offset,
                                                                hdr->n_exc, n, out, hdr->raw_bytes,
                                                                (int)hdr->tail_present, hdr->tail);
        WC_CHECK("exception kernel");
    }
    return ORK_OK;
}
