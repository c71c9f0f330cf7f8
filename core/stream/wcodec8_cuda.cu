/* stream/wcodec8_cuda.cu — the byte codec's device decoder (format in
 * wcodec.h). One CUDA block per tile, one thread per group of 32 values: the
 * thread loads its group's 24 bytes of code, rebuilds 32 bytes four at a time
 * (a byte a lane; exponents from the 8-byte table by byte permute) and stores them with two 16-byte
 * stores. Escapes take the tile's exceptions in order: a block-wide scan of
 * the threads' escape counts gives each its first one. Tiles without
 * exceptions (most) skip the scan. Enqueued on the caller's stream; never
 * synchronises. A malformed buffer (more escapes than exceptions) decodes
 * those values to 0 rather than read out of bounds: the CPU decoder is the
 * one that reports it. */
#include <cuda_runtime.h>

extern "C" {
#include "stream/wcodec8.h"
#include "util/log.h"
}

#include <stdint.h>

static_assert(ORK_WCODEC8_TILE == 256 && ORK_WCODEC8_GROUP == 32, "the kernel's shape is the format's");

/* Four decoded bytes (values 4k..4k+3 of the group) at once, a byte a lane:
 * their 4 nibbles and 4 crumbs spread into bytes, the 3-bit indices packed
 * into a byte_perm selector over the 8-byte table, escapes (index 7) marked in
 * bits 4k..4k+3 of *esc (patched afterwards). */
__device__ __forceinline__ uint32_t wc8_word4(const uint32_t w[6], int k, uint32_t tab_lo, uint32_t tab_hi, uint32_t *esc) {
    uint32_t n16 = (w[k >> 1] >> (16 * (k & 1))) & 0xffffu, c8 = (w[4 + (k >> 2)] >> (8 * (k & 3))) & 0xffu;
    uint32_t nb = __byte_perm(n16 & 0x0f0fu, (n16 >> 4) & 0x0f0fu, 0x5140u); /* byte i = nibble i */
    uint32_t cb = (c8 | c8 << 6 | c8 << 12 | c8 << 18) & 0x03030303u;     /* byte i = crumb i */
    uint32_t xb = ((nb >> 3) & 0x01010101u) | cb << 1;                    /* byte i = index i (0..7) */
    uint32_t m = (xb + 0x01010101u) & 0x08080808u;                        /* bit 3 of byte i: index 7 */
    *esc |= (((m >> 3) & 1u) | ((m >> 10) & 2u) | ((m >> 17) & 4u) | ((m >> 24) & 8u)) << (4 * k);
    uint32_t sp = xb | xb >> 4, sel = (sp & 0xffu) | ((sp >> 8) & 0xff00u);
    uint32_t e4 = __byte_perm(tab_lo, tab_hi, sel);
    return ((nb & 0x04040404u) << 5) | e4 << 2 | (nb & 0x03030303u);
}

template <bool VEC>
__global__ void __launch_bounds__(256) wc8_kernel(const uint8_t *__restrict__ code, const uint32_t *__restrict__ tile_exc,
                                                  const uint8_t *__restrict__ exc, uint32_t tab_lo, uint32_t tab_hi,
                                                  uint64_t n, uint64_t n_exc, uint8_t *__restrict__ out) {
    __shared__ uint32_t warp_sum[8];
    uint64_t groups = (n + 31) / 32, g = (uint64_t)blockIdx.x * 256 + threadIdx.x;
    uint32_t w[6] = {0, 0, 0, 0, 0, 0};
    if (g < groups) {
        const uint8_t *p = code + 24 * g;
        if (VEC) {
            uint2 a = __ldg((const uint2 *)p), b = __ldg((const uint2 *)(p + 8)), c = __ldg((const uint2 *)(p + 16));
            w[0] = a.x; w[1] = a.y; w[2] = b.x; w[3] = b.y; w[4] = c.x; w[5] = c.y;
        } else {
            for (int k = 0; k < 24; k++) w[k / 4] |= (uint32_t)p[k] << (8 * (k % 4));
        }
    }
    uint32_t o[8], esc = 0;
#pragma unroll
    for (int k = 0; k < 8; k++) o[k] = wc8_word4(w, k, tab_lo, tab_hi, &esc);
    uint64_t kb = tile_exc[blockIdx.x], ke = tile_exc[blockIdx.x + 1];
    if (ke > kb) { /* uniform over the block: every thread read the same two words */
        uint32_t cnt = __popc(esc), lane = threadIdx.x & 31u, wid = threadIdx.x >> 5, incl = cnt;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            uint32_t y = __shfl_up_sync(0xffffffffu, incl, d);
            if (lane >= (uint32_t)d) incl += y;
        }
        if (lane == 31) warp_sum[wid] = incl;
        __syncthreads();
        uint32_t before = 0;
        for (uint32_t k = 0; k < wid; k++) before += warp_sum[k];
        uint64_t r = kb + before + incl - cnt;
        while (esc) {
            int q = __ffs(esc) - 1;
            esc &= esc - 1;
            uint32_t v = r < ke && r < n_exc ? exc[r] : 0u;
            r++;
            o[q / 4] = (o[q / 4] & ~(0xffu << (8 * (q % 4)))) | v << (8 * (q % 4));
        }
    }
    if (g >= groups) return;
    uint64_t i0 = g * 32;
    if (VEC && i0 + 32 <= n) {
        *(uint4 *)(out + i0) = make_uint4(o[0], o[1], o[2], o[3]);
        *(uint4 *)(out + i0 + 16) = make_uint4(o[4], o[5], o[6], o[7]);
        return;
    }
    for (uint64_t i = i0; i < n && i < i0 + 32; i++) out[i] = (uint8_t)(o[(i - i0) / 4] >> (8 * ((i - i0) % 4)));
}

extern "C" ork_status ork_wcodec8_decode_cuda(const void *coded_dev, const ork_wcodec_hdr *h, void *out_dev,
                                              void *stream) {
    if (h->n_words != h->raw_bytes || h->tail_present || h->n_exc > h->n_words)
        return ork_fail(ORK_E_FORMAT, "wcodec8: device decode given an inconsistent header (use ork_wcodec_header)");
    uint64_t n = h->n_words, tiles = ork_wcodec8_tiles(n);
    if (!n) return ORK_OK;
    const uint8_t *c = (const uint8_t *)coded_dev;
    uint8_t *out = (uint8_t *)out_dev;
    const uint8_t *code = c + h->code_offset;
    const uint32_t *tile_exc = (const uint32_t *)(c + h->tile_exc_offset);
    if ((uintptr_t)tile_exc % 4)
        return ork_fail(ORK_E_INVALID, "wcodec8: device decode needs a 4-aligned coded buffer");
    uint32_t lo = 0, hi = 0;
    for (int k = 0; k < 4; k++) {
        lo |= (uint32_t)h->table[k] << (8 * k);
        hi |= (uint32_t)h->table[4 + k] << (8 * k);
    }
    cudaStream_t s = (cudaStream_t)stream;
    /* sections are 256-aligned in the buffer: this holds whenever buffer and out are 16-aligned */
    bool vec = ((uintptr_t)code % 8 == 0) && ((uintptr_t)out % 16 == 0);
    if (vec) wc8_kernel<true><<<(unsigned)tiles, 256, 0, s>>>(code, tile_exc, c + h->exc_offset, lo, hi, n, h->n_exc, out);
    else wc8_kernel<false><<<(unsigned)tiles, 256, 0, s>>>(code, tile_exc, c + h->exc_offset, lo, hi, n, h->n_exc, out);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return ork_fail(ORK_E_CUDA, "wcodec8: decode launch failed: %s", cudaGetErrorString(e));
    return ORK_OK;
}
