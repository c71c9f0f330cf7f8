/* dist/rendezvous.h — the TCP rendezvous of a data-parallel run: rank 0
 * listens on MASTER_ADDR:MASTER_PORT, every other rank connects (retrying
 * until the deadline: rank 0 may start later), says who it is, and receives
 * the 128-byte NCCL unique id that rank 0 made. Nothing else travels here:
 * the collectives are NCCL's (dist/nccl_comm.h).
 *
 * Wire format (little-endian, fixed size):
 *   hello  (rank r -> rank 0, 32 bytes): magic u32 "ORKD", version u16,
 *          kind u16 = 1, world u32, rank u32, config hash u64, 8 zero bytes;
 *   reply  (rank 0 -> rank r, 32 + 128 bytes): magic, version, kind = 2,
 *          world u32, status u32, rank 0's hash u64, detail u32, 4 zero bytes,
 *          then the id (zeros unless status is OK).
 * Rank 0 checks every hello: a wrong magic (not an orakul rank: a port
 * scanner, a stale client) is logged and dropped and rank 0 keeps waiting; a
 * wrong version, world size, rank (out of range or taken) or config hash
 * stops the rendezvous: rank 0 answers every connected rank with the status
 * and fails with one line, and so does every rank that got the answer.
 * A rank that does not connect in time fails rank 0 with a line naming the
 * missing ranks; a rank that cannot reach rank 0 in time fails with a line
 * naming the address and the last connect error.
 *
 * Owns its sockets (closed when each call returns; the listener until
 * ork_rdzv_listener_close). [control-thread] */
#ifndef ORK_DIST_RENDEZVOUS_H
#define ORK_DIST_RENDEZVOUS_H

#include <orakul/abi.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ORK_RDZV_ID_BYTES 128
#define ORK_RDZV_MAGIC 0x444b524fu /* "ORKD" */
#define ORK_RDZV_VERSION 1
#define ORK_RDZV_HELLO_BYTES 32
#define ORK_RDZV_REPLY_BYTES (32 + ORK_RDZV_ID_BYTES)

typedef enum ork_rdzv_code {
    ORK_RDZV_OK = 0,
    ORK_RDZV_BAD_VERSION = 1,
    ORK_RDZV_BAD_WORLD = 2,
    ORK_RDZV_BAD_RANK = 3,
    ORK_RDZV_DUP_RANK = 4,
    ORK_RDZV_BAD_HASH = 5,
    ORK_RDZV_ABORTED = 6, /* another rank was refused: the job stops */
} ork_rdzv_code;

typedef struct ork_rdzv_opts {
    int rank, world;
    uint64_t hash;   /* of the config: every rank must send rank 0's */
    int timeout_ms;  /* deadline of the whole call */
} ork_rdzv_opts;

typedef struct ork_rdzv_listener ork_rdzv_listener;

/* Rank 0's socket on addr:port (port 0: an ephemeral port, see
 * ork_rdzv_listener_port). A loopback addr is bound as is; any other address
 * binds the wildcard of its family (the name may resolve elsewhere behind NAT). */
ork_status ork_rdzv_listen(const char *addr, int port, ork_rdzv_listener **out);
int ork_rdzv_listener_port(const ork_rdzv_listener *l);
void ork_rdzv_listener_close(ork_rdzv_listener *l);

/* Rank 0: wait for ranks 1..world-1, check them, send them id. */
ork_status ork_rdzv_serve(ork_rdzv_listener *l, const ork_rdzv_opts *o, const uint8_t id[ORK_RDZV_ID_BYTES]);
/* Ranks > 0: connect to addr:port, send the hello, receive id. */
ork_status ork_rdzv_join(const char *addr, int port, const ork_rdzv_opts *o, uint8_t id[ORK_RDZV_ID_BYTES]);

/* The hello of o, serialised (tests forge malformed ones from it). */
void ork_rdzv_pack_hello(const ork_rdzv_opts *o, uint8_t out[ORK_RDZV_HELLO_BYTES]);

#ifdef __cplusplus
}
#endif
#endif
