/* stream/transit/exponent_code_cuda.cu — the exponent-class codes' device
 * decoder, both word sizes (format in transit/format.h). One CUDA block per
 * tile, one thread per group of 32 values. The block first stages its tile's
 * L2 words (and, when few, its L3 bytes) in shared memory while each thread
 * loads its group's L1 code (16-bit words: and its 32 sign/mantissa bytes);
 * a block-wide scan of the L1 escape counts gives each thread its first L2
 * code, and its (at most 32) codes come out of 4 staged words as 96 bits.
 * Values are then rebuilt four at a time, a byte a lane, with byte permutes
 * whose selectors are nibbles: L1 indices pick from table[0..3], the next
 * codes pick from table[3..9] in code order and a permute by rank (the
 * escapes before each lane) moves them to the escapes' lanes. This is
 * arithmetic-bound more than memory-bound on an H200, hence no per-value
 * loops. L2 escapes (a fraction of a percent in trained weights) take the
 * tile's L3 bytes in order after a second scan, which tiles without L3 bytes
 * skip. Stores are 16 bytes wide when aligned, byte stores otherwise.
 *
 * Enqueued on the caller's stream; never synchronises. A malformed buffer
 * (tile starts, escapes or counts that do not match) decodes garbage but
 * never reads or writes out of bounds: the host checks that every section
 * lies in the buffer, the kernel clamps every read to its section, and the
 * CPU decoder is the one that reports the error. */
#include <cuda_runtime.h>

extern "C" {
#include "stream/transit/exponent_code.h"
#include "util/log.h"
}

#include <stdint.h>

static_assert(ORK_TRANSIT_TILE == 256 && ORK_TRANSIT_GROUP == 32, "the kernel's shape is the format's");
static_assert(ORK_TRANSIT_L1_ESC == 3 && ORK_TRANSIT_L2_ESC == 7 && ORK_TRANSIT_TABLE == 10,
              "the lane arithmetic assumes 2-bit L1 and 3-bit L2 codes over a 10-class table");

#define WC2_L2_STAGE 776  /* u32: a tile's codes (<= 8192 x 3 bits) from any start bit, 4 spare */
#define WC2_L3_STAGE 1024 /* L3 bytes a tile stages (more: read from global memory) */

/* The kernel's arguments (one struct: the launch sites stay short). */
struct wc2_args {
    const uint8_t *code, *sm, *l3;          /* sm: 16-bit words only */
    const uint32_t *tile_l2, *l2, *tile_l3;
    uint8_t *out;
    uint64_t n, n_exc, l2_words;
    uint32_t ta, tb, tc; /* byte k: table[k], table[3 + k], table[7 + k] (tc byte 3: 0, the L2 escape) */
    uint32_t tail;       /* 16-bit words: bit 8 set when raw_bytes is odd, the last byte in bits 0..7 */
};

/* The exclusive prefix sum of v over the block (all 256 threads call it):
 * shuffle scans in each warp, the 8 warp totals through ws. */
__device__ __forceinline__ uint32_t wc2_scan(uint32_t v, uint32_t *ws) {
    uint32_t lane = threadIdx.x & 31u, wid = threadIdx.x >> 5, incl = v;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        uint32_t y = __shfl_up_sync(0xffffffffu, incl, d);
        if (lane >= (uint32_t)d) incl += y;
    }
    if (lane == 31) ws[wid] = incl;
    __syncthreads();
    uint32_t before = 0;
#pragma unroll
    for (uint32_t k = 0; k < 7; k++)
        if (k < wid) before += ws[k];
    return before + incl - v;
}

/* a where m is set, else b (one LOP3) */
__device__ __forceinline__ uint32_t wc2_sel(uint32_t m, uint32_t a, uint32_t b) { return (a & m) | (b & ~m); }

/* Nibble i = the L1 index (0..3) of value 8k + i of the group (selectors for
 * byte permutes, which read the low 4 nibbles). */
template <int WORD>
__device__ __forceinline__ uint32_t wc2_l1(const uint32_t *w, int k) {
    if (WORD == 2) { /* 8 crumbs -> 8 nibbles */
        uint32_t x = (w[k >> 1] >> (16 * (k & 1))) & 0xffffu;
        x = (x | x << 8) & 0x00ff00ffu;
        x = (x | x << 4) & 0x0f0f0f0fu;
        return (x | x << 2) & 0x33333333u;
    }
    /* low bit: each nibble's top bit; high bit: bit 8k + i of word 4, spread to bit 4i */
    uint32_t h = (w[4] >> (8 * k)) & 0xffu;
    h = (h | h << 12) & 0x000f000fu;
    h = (h | h << 6) & 0x03030303u;
    h = (h | h << 3) & 0x11111111u;
    return ((w[k] >> 3) & 0x11111111u) + 2 * h;
}

/* VEC: code, sm and out aligned for 8- and 16-byte accesses; otherwise u32
 * loads (every section is 4-aligned) and byte stores. */
template <int WORD, bool VEC>
__global__ void __launch_bounds__(256) wc2_kernel(const wc2_args a) {
    __shared__ uint32_t ws1[8], ws2[8], st2[WC2_L2_STAGE];
    __shared__ uint8_t st3[WC2_L3_STAGE];
    constexpr int GW = WORD == 1 ? 5 : 2; /* u32 of code a group */
    const uint32_t t = blockIdx.x, tid = threadIdx.x;
    const uint64_t groups = (a.n + 31) / 32, g = (uint64_t)t * 256 + tid, i0 = g * 32;
    const bool live = g < groups, full = i0 + 32 <= a.n;
    /* every thread reads the same four words: the branches on them are uniform over the block */
    const uint32_t l2b = __ldg(a.tile_l2 + t), l2e = __ldg(a.tile_l2 + t + 1);
    const uint32_t l3b = __ldg(a.tile_l3 + t), l3e = __ldg(a.tile_l3 + t + 1);
    uint32_t w[GW], sm[8];
#pragma unroll
    for (int k = 0; k < GW; k++) w[k] = 0;
#pragma unroll
    for (int k = 0; k < 8; k++) sm[k] = 0;
    if (live) {
        const uint32_t *cp = (const uint32_t *)(a.code + 4 * GW * g);
        if (WORD == 2 && VEC) {
            uint2 c = __ldg((const uint2 *)cp);
            w[0] = c.x;
            w[1] = c.y;
        } else {
#pragma unroll
            for (int k = 0; k < GW; k++) w[k] = __ldg(cp + k);
        }
        if (WORD == 2 && full && VEC) {
            uint4 x = __ldg((const uint4 *)(a.sm + i0)), y = __ldg((const uint4 *)(a.sm + i0 + 16));
            sm[0] = x.x; sm[1] = x.y; sm[2] = x.z; sm[3] = x.w;
            sm[4] = y.x; sm[5] = y.y; sm[6] = y.z; sm[7] = y.w;
        } else if (WORD == 2 && full) {
#pragma unroll
            for (int k = 0; k < 8; k++) sm[k] = __ldg((const uint32_t *)(a.sm + i0) + k);
        } else if (WORD == 2) { /* the partial last group: sm holds exactly n bytes */
#pragma unroll
            for (int k = 0; k < 32; k++)
                if (i0 + k < a.n) sm[k / 4] |= (uint32_t)a.sm[i0 + k] << (8 * (k % 4));
        }
    }
    /* Stage the tile's L2 words (from the one holding its first code; zeros
     * past its codes or the section) and, when few, its L3 bytes: the loads
     * overlap the group's, and the scans' barriers publish them. Whatever
     * the tile starts say, a thread's first code is fewer than 8192 past the
     * tile's, so it reads below word 772 of the stage. */
    const uint64_t w0 = (3 * (uint64_t)l2b) >> 5;
    const uint64_t nw = l2e > l2b ? ((3 * (uint64_t)l2e + 31) >> 5) - w0 : 0;
    if (nw)
        for (uint32_t k = tid; k < WC2_L2_STAGE; k += 256)
            st2[k] = k < nw && w0 + k < a.l2_words ? __ldg(a.l2 + w0 + k) : 0u;
    const uint32_t n3 = l3e > l3b ? l3e - l3b : 0;
    const bool stage3 = n3 <= WC2_L3_STAGE;
    if (stage3)
        for (uint32_t k = tid; k < n3; k += 256) st3[k] = (uint64_t)l3b + k < a.n_exc ? __ldg(a.l3 + l3b + k) : 0;

    uint32_t L[4], M[4], cnt = 0; /* L: L1 indices, nibble a value; M: 1 in the nibbles of L1 escapes */
#pragma unroll
    for (int k = 0; k < 4; k++) {
        L[k] = wc2_l1<WORD>(w, k);
        M[k] = L[k] & (L[k] >> 1) & 0x11111111u;
        cnt += __popc(M[k]);
    }
    /* s2:s1:s0 = this group's L2 codes, the first at bit 0 (at most 96 bits) */
    uint32_t s0 = 0, s1 = 0, s2 = 0;
    if (l2e > l2b) {
        uint32_t b = 3 * wc2_scan(cnt, ws1) + ((3 * l2b) & 31u), k = b >> 5;
        s0 = __funnelshift_r(st2[k], st2[k + 1], b);
        s1 = __funnelshift_r(st2[k + 1], st2[k + 2], b);
        s2 = __funnelshift_r(st2[k + 2], st2[k + 3], b);
    }

    /* Classes four values (a chunk) at a time, a byte each: L1 indices pick
     * from table[0..3]; the chunk's next codes pick from table[3..9] in code
     * order, and a permute by rank (escapes before the lane) moves them to
     * the escapes' lanes. acc bit 8 i + c: value 4 c + i is an L2 escape. */
    uint32_t e[8], acc = 0;
#pragma unroll
    for (int c = 0; c < 8; c++) {
        uint32_t l1 = L[c >> 1] >> (16 * (c & 1)), mn = M[c >> 1] >> (16 * (c & 1));
        uint32_t cn = (s0 & 0x3fu) | ((s0 << 2) & 0x3f00u); /* 4 codes, a nibble each */
        cn = (cn & 0x0707u) | ((cn << 1) & 0x7070u);
        uint32_t rank = mn * 0x1110u, mb = __byte_perm(0x0000ff00u, 0u, mn);
        uint32_t c2 = __byte_perm(__byte_perm(a.tb, a.tc, cn), 0u, rank);
        e[c] = wc2_sel(mb, c2, __byte_perm(a.ta, 0u, l1));
        acc |= __byte_perm(__byte_perm(0u, (1u << c) << 24, cn), 0u, rank) & mb;
        uint32_t sh = (mn * 0x33330000u) >> 28; /* 3 x the chunk's escapes */
        s0 = __funnelshift_r(s0, s1, sh);
        s1 = __funnelshift_r(s1, s2, sh);
        s2 >>= sh;
    }

    if (l3e > l3b) {
        uint32_t r = wc2_scan(__popc(acc), ws2); /* the tile's L2 escapes before this group */
        if (acc) {
#pragma unroll
            for (int c = 0; c < 8; c++) { /* unrolled: e[c] stays in a register */
                uint32_t m2 = (acc >> c) & 0x01010101u;
                while (m2) {
                    uint32_t q = (__ffs(m2) - 1) & ~7u;
                    m2 &= m2 - 1;
                    uint32_t v = 0;
                    if (r < n3 && (uint64_t)l3b + r < a.n_exc) v = stage3 ? st3[r] : __ldg(a.l3 + l3b + r);
                    if (WORD == 1) v &= 31u;
                    r++;
                    e[c] = (e[c] & ~(0xffu << q)) | v << q;
                }
            }
        }
    }

    if (WORD == 2 && (a.tail >> 8) && t == gridDim.x - 1 && tid == 0) a.out[2 * a.n] = (uint8_t)a.tail;
    if (!live) return;
    if (WORD == 2) { /* per value: low byte e << 7 | m, high byte s << 7 | e >> 1 */
        uint32_t o[16];
#pragma unroll
        for (int c = 0; c < 8; c++) {
            uint32_t lo = wc2_sel(0x80808080u, e[c] << 7, sm[c]), hi = wc2_sel(0x80808080u, sm[c], e[c] >> 1);
            o[2 * c] = __byte_perm(lo, hi, 0x5140u);
            o[2 * c + 1] = __byte_perm(lo, hi, 0x7362u);
        }
        uint8_t *dst = a.out + 2 * i0;
        if (VEC && full) {
#pragma unroll
            for (int k = 0; k < 4; k++) ((uint4 *)dst)[k] = make_uint4(o[4 * k], o[4 * k + 1], o[4 * k + 2], o[4 * k + 3]);
            return;
        }
#pragma unroll
        for (int k = 0; k < 64; k++)
            if (full || i0 + k / 2 < a.n) dst[k] = (uint8_t)(o[k / 4] >> (8 * (k % 4)));
    } else { /* s << 7 | class << 2 | m, s and m from the code's nibble */
        uint32_t o[8];
#pragma unroll
        for (int c = 0; c < 8; c++) {
            uint32_t x = w[c >> 1], nb = __byte_perm(x & 0x0f0f0f0fu, (x >> 4) & 0x0f0f0f0fu, c & 1 ? 0x7362u : 0x5140u);
            o[c] = wc2_sel(0x80808080u, nb << 5, wc2_sel(0x03030303u, nb, e[c] << 2));
        }
        uint8_t *dst = a.out + i0;
        if (VEC && full) {
            ((uint4 *)dst)[0] = make_uint4(o[0], o[1], o[2], o[3]);
            ((uint4 *)dst)[1] = make_uint4(o[4], o[5], o[6], o[7]);
            return;
        }
#pragma unroll
        for (int k = 0; k < 32; k++)
            if (full || i0 + k < a.n) dst[k] = (uint8_t)(o[k / 4] >> (8 * (k % 4)));
    }
}

/* [off, off + len) inside [0, limit), without overflow. */
static bool wc2_fits(uint64_t off, uint64_t len, uint64_t limit) { return off <= limit && len <= limit - off; }

template <int WORD>
static void wc2_launch(bool vec, unsigned tiles, cudaStream_t s, const wc2_args &a) {
    if (vec) wc2_kernel<WORD, true><<<tiles, 256, 0, s>>>(a);
    else wc2_kernel<WORD, false><<<tiles, 256, 0, s>>>(a);
}

extern "C" ork_status ork_expcode_decode_cuda(const void *coded_dev, const ork_transit_hdr *h, void *out_dev,
                                              void *stream) {
    int word = ork_transit_word(h->magic);
    uint64_t n = word == 1 ? h->raw_bytes : h->n_values, lim = h->coded_bytes;
    uint64_t groups = ork_transit_groups(n), tiles = ork_transit_tiles(n);
    /* cheap consistency: every section the kernel reads is 4-aligned and
     * lies inside the buffer (l2_cap bounded first: its size cannot wrap);
     * the per-tile contents are the kernel's to clamp */
    bool ok = word != 0 && n <= ORK_TRANSIT_MAX_VALUES && h->n_exc <= n && h->l2_cap % 32 == 0 &&
              (word == 1 ? !h->tail_present : h->tail_present <= 1 && h->raw_bytes == 2 * n + h->tail_present) &&
              (h->code_offset | h->sm_offset | h->tile_l2_offset | h->l2_offset | h->tile_l3_offset) % 4 == 0 &&
              h->l2_cap / 32 <= lim / 12 && wc2_fits(h->code_offset, 4 * ork_transit_group_words(word) * groups, lim) &&
              (word == 1 || wc2_fits(h->sm_offset, n, lim)) && wc2_fits(h->tile_l2_offset, 4 * (tiles + 1), lim) &&
              wc2_fits(h->l2_offset, 4 * ork_transit_l2_words(h->l2_cap), lim) &&
              wc2_fits(h->tile_l3_offset, 4 * (tiles + 1), lim) && wc2_fits(h->exc_offset, h->n_exc, lim);
    if (!ok) return ork_fail(ORK_E_FORMAT, "transit: device decode given an inconsistent header (use ork_transit_header)");
    cudaStream_t s = (cudaStream_t)stream;
    uint8_t *out = (uint8_t *)out_dev;
    if (!n) { /* nothing to decode but, perhaps, the tail byte */
        if (!h->tail_present) return ORK_OK;
        cudaError_t e = cudaMemsetAsync(out, h->tail, 1, s);
        if (e != cudaSuccess) return ork_fail(ORK_E_CUDA, "transit: tail write failed: %s", cudaGetErrorString(e));
        return ORK_OK;
    }
    const uint8_t *c = (const uint8_t *)coded_dev;
    if ((uintptr_t)c % 4)
        return ork_fail(ORK_E_INVALID, "transit: device decode needs a 4-aligned coded buffer");
    wc2_args a;
    a.code = c + h->code_offset;
    a.sm = word == 2 ? c + h->sm_offset : NULL; /* bytes have no sm section: its offset is not checked */
    a.l3 = c + h->exc_offset;
    a.tile_l2 = (const uint32_t *)(c + h->tile_l2_offset);
    a.l2 = (const uint32_t *)(c + h->l2_offset);
    a.tile_l3 = (const uint32_t *)(c + h->tile_l3_offset);
    a.out = out;
    a.n = n;
    a.n_exc = h->n_exc;
    a.l2_words = ork_transit_l2_words(h->l2_cap);
    a.ta = a.tb = a.tc = 0;
    for (int k = 0; k < 4; k++) { /* bytes: classes are 5-bit (the kernel shifts them unmasked) */
        uint32_t m = word == 1 ? 31u : 255u;
        a.ta |= (h->table[k] & m) << (8 * k);
        a.tb |= (h->table[3 + k] & m) << (8 * k);
        if (k < 3) a.tc |= (h->table[7 + k] & m) << (8 * k);
    }
    a.tail = h->tail_present ? 0x100u | h->tail : 0u;
    /* sections are 256-aligned in the buffer: this holds whenever buffer and out are 16-aligned */
    bool vec = (uintptr_t)out % 16 == 0 && (word == 1 || ((uintptr_t)a.code % 8 == 0 && (uintptr_t)a.sm % 16 == 0));
    if (word == 1) wc2_launch<1>(vec, (unsigned)tiles, s, a);
    else wc2_launch<2>(vec, (unsigned)tiles, s, a);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return ork_fail(ORK_E_CUDA, "transit: decode launch failed: %s", cudaGetErrorString(e));
    return ORK_OK;
}
