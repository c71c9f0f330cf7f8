/* dist/shard.c — see shard.h. */
#include "dist/shard.h"

ork_data_pos ork_shard_advance(int64_t n, int64_t g, ork_data_pos at, int64_t m) {
    if (n < 1) n = 1;
    if (g < 1) g = 1;
    if (at.offset < 0) at.offset = 0;
    if (at.offset >= n) { at.epoch++; at.offset = 0; }
    if (m <= 0) return at;
    int64_t left = (n - at.offset + g - 1) / g; /* batches still in this epoch */
    if (m < left) return (ork_data_pos){at.epoch, at.offset + m * g};
    m -= left;
    int64_t per = (n + g - 1) / g; /* batches of a whole epoch */
    return (ork_data_pos){at.epoch + 1 + m / per, (m % per) * g};
}

int64_t ork_shard_samples(int64_t n, ork_data_pos pos) { return pos.epoch * n + pos.offset; }

int ork_shard_slice(int nb, int world, int rank, int b, int *elem) {
    if (nb < 1 || b < 1 || world < 1 || rank < 0 || rank >= world) return 0;
    if (world == 1) {
        int k = nb < b ? nb : b;
        for (int i = 0; i < k; i++) elem[i] = i;
        return k;
    }
    for (int i = 0; i < b; i++) elem[i] = (rank * b + i) % nb;
    return b;
}
