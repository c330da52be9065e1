/* shm.h - what the two files of the shared-memory transport share (private to transports/): the
 * segment's layout, this process's state, and the few helpers both use. shm.c is the data path
 * (rings, waiting, liveness, the native all-reduce, small collectives) and the table;
 * shm_segment.c finds, creates, checks and attaches the segment, and closes it. */
#ifndef DDL_TRANSPORTS_SHM_H
#define DDL_TRANSPORTS_SHM_H
#include "core/impl.h"

#include <stdatomic.h>
#include <stdint.h>

#define SHM_MAGIC 0x314d48534c4444ull /* "DDLSHM1" */
#define SHM_VERSION 3
#define SHM_MAX_WORLD 256
#define NATIVE_FLOATS ((size_t)256 << 10) /* floats per rank and chunk of the native all-reduce */
#define POST_BYTES ((size_t)16 << 10)      /* payload per rank and parity of the small-message path */
#define SPINS 2000                       /* polls before yielding */
#define YIELD_MS 3                       /* then yield the CPU between polls this long before sleeping */
#define PEERS_PER_CHECK 8 /* ranks besides the one waited for that a liveness check looks at */
#define LIVENESS_MS 20                   /* how often a waiting rank checks every peer's pid */
#define PREFIX 40                        /* frame: u64 payload length + 32-byte header */
#define LINE 64
#define SETTLE_MS 200           /* without a job id: how long a full segment must stay quiet before open returns */
#define JOBLESS_NAMES 8         /* without a job id: names tried in turn while other users hold the first ones */
#define CONFLICT_WINDOW_MS 2000 /* a second job seen this soon after the segment filled: fail both */

enum { RANK_EMPTY = 0, RANK_ATTACHED = 1, RANK_LEFT = 2 };
enum { TAKEN = 2 }; /* create_segment, try_attach: another user holds the name: try the next (seg_name) */

/* ---- segment layout ----
 * [seg_hdr (4 KiB)] [rank_slot x world] [ring x world*world] [native: (world + 1) x NATIVE_FLOATS]
 * [post: world x 2 parities x (post_hdr + POST_BYTES)]
 * ring (from, to) and rank r's posts are written only by `from` and r. */

typedef struct seg_hdr {
    _Atomic uint64_t magic; /* written last by rank 0: the rest is valid */
    uint32_t version, world;
    uint64_t ring_bytes, total_bytes;
    char job[128];
    _Atomic uint32_t attached;
    _Atomic int32_t conflict_pid;  /* nonzero: a process of another job found the segment (conflict_rank) */
    _Atomic int32_t conflict_rank;
    _Atomic int64_t full_ms;       /* ddl__now_ms when the last rank attached; 0 before */
} seg_hdr;

typedef struct rank_slot {
    _Atomic int32_t pid;
    _Atomic int32_t state;     /* RANK_* */
    _Atomic uint32_t doorbell; /* bumped whenever something this rank may wait for changes */
    _Atomic uint32_t sleeping; /* 1 while in futex wait on doorbell */
    _Atomic uint64_t arrive;   /* native all-reduce: barrier epoch reached */
    _Atomic uint64_t count;    /* native all-reduce: floats this rank is reducing */
    char pad[LINE - 32];
} rank_slot;

typedef struct ring_hdr {
    _Atomic uint64_t head; /* bytes written, by the producer */
    char pad1[LINE - 8];
    _Atomic uint64_t tail; /* bytes read, by the consumer */
    char pad2[LINE - 8];
} ring_hdr;

/* post_hdr: one rank's part of small collective number `epoch` (counted from 1; parity epoch % 2),
 * valid once epoch is stored; followed by its payload. */
typedef struct post_hdr {
    _Atomic uint64_t epoch;
    uint64_t bytes;
    unsigned char ddl_hdr[DDL_HEADER_BYTES];
    char pad[LINE - 16 - DDL_HEADER_BYTES];
} post_hdr;

typedef struct shm_state {
    int rank, world, fd, attached_all, unlinked, created, jobless;
    int check_next; /* the rank the last liveness check looked at last (ddl__shm_check_peers) */
    size_t map_bytes, ring_bytes;
    unsigned char *map;
    seg_hdr *h;
    rank_slot *slots;
    unsigned char *rings;
    float *native;
    unsigned char *posts;
    uint64_t epoch, post_epoch;
    uint64_t *pos; /* [2 * world] after this struct: head of ring (rank, to), then tail of ring (from, rank);
                    * this rank's own index is kept here, never read back from the segment */
    char name[160];
    int squatter;         /* 1 + the uid of the last other user found holding one of our names */
    char err[DDL_ERR_BYTES];
    _Atomic int stalled; /* 1 + the rank the comm's heartbeat found silent (interrupt) */
} shm_state;

static inline size_t ring_bytes_for(int world) { return world <= 4 ? (size_t)1 << 20 : (size_t)256 << 10; }

static inline size_t off_slots(void) { return 4096; }
static inline size_t off_rings(int world) { return ddl__align_up(off_slots() + (size_t)world * sizeof(rank_slot)); }
static inline size_t ring_stride(size_t rb) { return sizeof(ring_hdr) + rb; }
static inline size_t off_native(int world, size_t rb)
{
    return ddl__align_up(off_rings(world) + (size_t)world * (size_t)world * ring_stride(rb));
}
static inline size_t off_posts(int world, size_t rb)
{
    return off_native(world, rb) + (size_t)(world + 1) * NATIVE_FLOATS * sizeof(float);
}
static inline size_t post_stride(void) { return sizeof(post_hdr) + POST_BYTES; }
static inline size_t total_bytes(int world, size_t rb) { return off_posts(world, rb) + (size_t)world * 2 * post_stride(); }

static inline post_hdr *post_at(shm_state *s, int r, uint64_t epoch)
{
    return (post_hdr *)(s->posts + ((size_t)r * 2 + (size_t)(epoch & 1)) * post_stride());
}

static inline ring_hdr *ring_at(shm_state *s, int from, int to)
{
    return (ring_hdr *)(s->rings + ((size_t)from * (size_t)s->world + (size_t)to) * ring_stride(s->ring_bytes));
}

/* ddl__shm_fail: the detail of a failure into s->err; returns status. */
int ddl__shm_fail(shm_state *s, int status, const char *fmt, ...) DDL__PRINTF(3, 4);

/* shm.c, for shm_segment.c: wake rank r (ddl__shm_ring_bell); whether pid is gone
 * (ddl__shm_pid_dead); the hint that ends a message about a segment another job holds
 * (ddl__shm_job_hint); DDL_EAUTH once another job has found this one's segment
 * (ddl__shm_check_conflict); DDL_EPEER if a rank died, with the first in *left
 * (ddl__shm_check_peers, waiting_for: the rank waited for, or -1). */
void ddl__shm_ring_bell(shm_state *s, int r);
int ddl__shm_pid_dead(int pid);
int ddl__shm_job_hint(char *dst, size_t n, const shm_state *s);
int ddl__shm_check_conflict(shm_state *s);
int ddl__shm_check_peers(shm_state *s, int waiting_for, int *left);

/* shm_segment.c, for the table in shm.c: the transport's state_bytes, open and close. */
size_t ddl__shm_state_bytes(const ddl_comm_config *cfg);
int ddl__shm_open(void *state, const ddl_comm_config *cfg);
void ddl__shm_close(void *state);
#endif
