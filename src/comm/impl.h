/* src/comm/impl.h - the private comm struct and the message layer shared by comm.c and
 * collectives.c. Transports never include this: the 32-byte header is opaque to them.
 * Nothing here is API. */
#ifndef DDL_COMM_IMPL_H
#define DDL_COMM_IMPL_H
#include "core/impl.h"
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* Operations carried in the header. Values go on the wire: only ever append. */
enum {
    DDL__OP_ALLREDUCE = 1,
    DDL__OP_BROADCAST = 2,
    DDL__OP_ALLGATHER = 3,
    DDL__OP_BARRIER = 4,
    DDL__OP_P2P = 5
};

/* Element types that only go on the wire (header byte 9), beside DDL_FLOAT32 and DDL_INT64: the
 * float32 of a compressed all-reduce sent in 16 bits (compress.c). Only ever append. */
enum { DDL__WIRE_BF16 = 16, DDL__WIRE_FP16 = 17 };

/* Bytes of the scratch buffer sized at create time: the largest piece one exchange of a
 * reduction receives, and the limit of the latency-optimal (recursive doubling) algorithm. */
#define DDL__SCRATCH_BYTES ((size_t)1 << 20)
#define DDL__MAX_POST_RANKS 256 /* ranks of the small-collective path (ddl__comm_post) */
#define DDL__ELASTIC_MAX 256    /* ranks of an elastic job (the bitmaps of its regroup notes) */

/* What one collective call (or one p2p message) is: every header of the call says this, and
 * every received header must say the same. */
typedef struct ddl__call {
    int op;          /* DDL__OP_* */
    int dtype;       /* DDL_FLOAT32 / DDL_INT64; p2p: -1 (bytes) */
    int redop;       /* DDL_SUM ...; others 0 */
    uint64_t count;  /* elements (p2p: bytes) */
    int32_t arg;     /* p2p: tag; broadcast: root; others 0 */
    uint32_t seq;    /* collectives: per-comm call number; p2p: per-pair message number */
} ddl__call;

/* An elastic comm's last collective (replay.c): its result, for a rank that missed it. The first
 * DDL__REPLAY_BYTES live in the comm's memory; a larger result grows the buffer once, at the
 * first call of its size (never per step), up to DDL__REPLAY_MAX. */
#define DDL__REPLAY_BYTES ((size_t)64 << 10)
#define DDL__REPLAY_MAX ((size_t)1 << 32)
#define DDL__REDOP_SHARDS (-1) /* ddl__call.redop of ddl_comm_allreduce_shards: a step's all-reduce */
typedef struct ddl__replay {
    unsigned char *buf; /* cap bytes: the comm's own DDL__REPLAY_BYTES, or grown (elastic comms; else NULL) */
    unsigned char *grown; /* buf when it grew (the comm's allocator), else NULL: ddl__elastic_free frees it */
    size_t cap;
    ddl__call call;     /* what the kept or missed call was */
    size_t bytes;       /* its result's bytes */
    int64_t done;       /* outermost collectives completed this generation (a joiner: -1) */
    int kept;           /* buf holds the result of the last one completed */
    int pending;        /* buf holds a result this rank missed: its next call takes it if it is the same */
    int from;           /* the rank it came from */
    int depth;          /* public collective calls in progress (only the outermost counts) */
} ddl__replay;

/* ddl__place_id (heartbeat.c): an id of where this process runs: its boot, and the namespaces
 * `what` names (DDL__PLACE_*), and with DDL__PLACE_HOST the host name. Equal ids: the same
 * network stack (reach each other on 127.0.0.1), the same /dev/shm as well (NET | MNT), or pids
 * that mean the same process (PID). Never 0. */
enum { DDL__PLACE_NET = 1, DDL__PLACE_MNT = 2, DDL__PLACE_PID = 4, DDL__PLACE_HOST = 8 };
uint64_t ddl__place_id(int what);

/* ---- heartbeats (heartbeat.c) ---- */

#define DDL__HB_ADDRS 4        /* IPv4 addresses a rank announces */
#define DDL__HB_CARD_BYTES 128 /* what a rank tells the others at create */
#define DDL__HB_TICK_MS 100    /* the heartbeat thread looks at least this often */

/* A note: the heartbeat's datagrams that carry a regroup or a join (elastic.c); its body is
 * DDL__HB_BODY_BYTES: step u64 | a u32 | b u32 | a bitmap of DDL__ELASTIC_MAX ranks or slots. */
#define DDL__HB_BODY_BYTES 48
typedef struct ddl__hb_note {
    int kind, from;          /* from: a rank; for JOIN and ADMIT a slot */
    uint64_t nonce;          /* JOIN, ADMIT: the joiner's */
    struct sockaddr_in src;  /* where it came from */
    unsigned char body[DDL__HB_BODY_BYTES];
} ddl__hb_note;

/* What the heartbeat knows of one other rank. heard_ms and left are written by the heartbeat
 * thread and read by the caller's; the rest is set before the thread starts. */
typedef struct ddl__hb_peer {
    _Atomic int64_t heard_ms; /* last authentic heartbeat (0: none yet: not judged) */
    _Atomic int left;         /* it said goodbye: not judged */
    uint64_t incarnation;     /* from its card: a heartbeat must carry it */
    uint64_t stack, pid_space; /* from its card: its network stack, its pid space (0: unknown) */
    uint64_t counter;         /* the last counter taken (thread only) */
    int pid, ndst;
    struct sockaddr_in dst[DDL__HB_ADDRS]; /* where its heartbeats go */
    char host[80];
} ddl__hb_peer;

typedef struct ddl__hb {
    int running;              /* the thread runs: stop() joins it */
    int fast;                 /* thread only: a peer regroups: beat every 40 ms */
    int quiet;                /* halted for a regroup: the thread leaves without a goodbye */
    int want_port;            /* elastic with a peer list: bind the UDP socket to this slot's port (0: any) */
    int join_on, joining;     /* join notes are read (elastic); this process is a joiner, not a member yet */
    unsigned char join_key[32]; /* HMAC(token, "ddl elastic join 1 " job): joiners' notes, gen-independent */
    const int *slot_of;       /* [world] each rank's slot (the comm's), for joins */
    ddl__hb_note pending_join; /* the last joiner the thread heard (for the regroup it causes) */
    int64_t pending_join_ms;   /* when (0: none) */
    _Atomic int64_t join_heard_ms; /* the same time and slot, for the comm's thread while this one runs */
    _Atomic int join_heard_slot;
    _Atomic int admitting;     /* the comm is in a step's all-reduce (ddl_comm_allreduce_shards): the
                                * one call a joiner may come in at; a join note interrupts no other */
    int fd, wake_fd;          /* UDP socket; eventfd that wakes the thread to stop */
    int rank, world, interval_ms, timeout_ms;
    pthread_t thread;
    _Atomic int stop;
    _Atomic int verdict;      /* 1 + the rank found silent; msg is written before it */
    int verdict_regroup;      /* the verdict is a peer's regroup, not a silence (written before it) */
    char msg[256];
    unsigned char key[32];    /* HMAC key from the token and the job */
    uint64_t stack, incarnation, counter;
    uint32_t mine[DDL__HB_ADDRS]; /* our IPv4 addresses (network order) */
    int nmine;
    void (*interrupt)(void *state, int culprit);
    void *tp_state;
    ddl_log_fn log;
    void *log_ud;
    ddl__hb_peer *peers;      /* [world], in the comm's memory */
} ddl__hb;

/* the two-level all-reduce's tables (hier.c; made by create_hier.c) */
struct ddl__hier {
    ddl_comm *local;   /* this host's ranks over shm: world n_local, rank local_rank */
    int n_hosts, n_local, host, local_rank;
    int tree;          /* halving.c's order (L and H powers of two, hosts of consecutive ranks) */
    int *members;      /* [n_local]: this host's ranks, by local rank (in col's memory) */
    int col[];         /* [n_hosts]: the rank of local rank local_rank on each host, in host order */
};

struct ddl_comm {
    ddl_allocator alloc;       /* copy of the caller's hooks (zero: malloc/free) */
    const ddl_transport *tp;   /* NULL when world_size is 1 */
    void *state;               /* tp->state_bytes() bytes, zeroed, DDL_ALIGN-aligned */
    int opened;                /* tp->open succeeded (close is called either way) */
    int rank, world, timeout_ms, native;
    int compress;              /* DDL_COMPRESS_*: the 16 bits of ddl_comm_allreduce_compressed */
    int algo;                  /* DDL_ALGO_*: large all-reduces by ring or parameter server */
    int shards_dealt[3];       /* the block (first, n, total) ddl_comm_allreduce_shards last checked
                                * with every rank: not checked again while it stays (training calls
                                * it every step) */
    int64_t *shard_firsts;     /* [capacity]: each rank's first shard in that block's dealing (shards.c) */
    int status;                /* sticky: the first failure */
    uint32_t seq;              /* collectives called so far */
    uint32_t *p2p_sent;        /* [world] messages sent to each peer */
    uint32_t *p2p_recvd;       /* [world] messages received from each peer */
    unsigned char *last_sent;  /* [world][DDL_HEADER_BYTES] last header sent to each peer */
    unsigned char *posted;     /* [world][DDL_HEADER_BYTES] headers of the last small collective */
    size_t post_max;           /* bytes a small collective may post (tp->allgather; 0: none) */
    size_t view_max;           /* bytes the transport may lend on receipt (tp->exchange_view; 0: none) */
    unsigned char *scratch;    /* DDL__SCRATCH_BYTES, DDL_ALIGN-aligned */
    ddl__call cur;             /* the call in progress */
    ddl_log_fn log;
    void *log_ud;
    char job[64];
    char err[512];
    ddl__hb hb;                /* heartbeats, when cfg asked for them */
    unsigned char *hb_cards;   /* [world][DDL__HB_CARD_BYTES] */
    /* elastic mode (elastic.c): the memory above is sized for `capacity` ranks, so a regroup
     * reopens the transport in place with fewer */
    int elastic_min, elastic_max, capacity, generation;
    size_t state_bytes;        /* the transport state's bytes at capacity */
    ddl_comm_config cfg0;      /* as created; its token and job point at the copies below */
    char token[256], job_base[64];
    unsigned char suspects[DDL__ELASTIC_MAX / 8]; /* ranks a failed call names (links broke, or silent) */
    struct ddl__hier *hier;    /* the two-level all-reduce (hier.c), or NULL */
    int slot;                  /* this process's place in the job: its first rank (DDL_RANK), kept across regroups */
    int slot_of[DDL__ELASTIC_MAX];        /* each rank's slot, this generation */
    uint16_t slot_port[DDL__ELASTIC_MAX]; /* each slot's port in the peer list (0: none): its heartbeat's */
    const char *peers0;        /* the peer list as created (a copy in the comm's memory), or NULL */
    int joined;                /* this comm began as a joiner (ddl_comm_config.join) */
    int join_pending;          /* a joiner not yet asked in: it asks at its first call (ddl__comm_admit) */
    ddl__replay rp;            /* the last collective's result (replay.c) */
    int failed_at_step;        /* the last call that failed was a step's all-reduce: a regroup may
                                * let a joiner in (it joins at a step, where its next call is the same) */
    ddl_regroup join_info;     /* how it was admitted */
    const struct ddl__member_hooks *member; /* the membership floor's hooks, or NULL (not elastic) */
};

/* ---- the membership floor's hooks ----
 * src/comm has three floors, each calling only those below it: links (comm.c, transport.c,
 * heartbeat.c), collectives (ring.c's primitives; collectives.c, halving.c, hier.c, shards.c,
 * compress.c) and membership (elastic.c, join.c, replay.c). The two below call up only through
 * this table, at their few defined points; an elastic comm's is set by ddl__elastic_setup (join.c),
 * any other comm has none. */
typedef struct ddl__member_hooks {
    /* a joiner's first call, before it is numbered (ddl__comm_begin, send, recv): DDL_OK or the
     * sticky failure */
    int (*admit)(ddl_comm *c);
    /* a public collective's start and end (replay.c): ddl__replay_enter's and _leave's contract */
    int (*enter)(ddl_comm *c, const ddl__call *k, void *out, size_t bytes);
    int (*leave)(ddl_comm *c, const ddl__call *k, int st, const void *out, size_t bytes);
} ddl__member_hooks;

/* ddl__call_enter, ddl__call_leave: the collectives floor's two points: a public collective k whose
 * result is out[bytes] begins (1: it was served from a result this rank missed before a regroup,
 * return DDL_OK at once) and ends with status st (returned). Every enter that returned 0 has its
 * leave. Nothing on a comm that is not elastic. */
static inline int ddl__call_enter(ddl_comm *c, const ddl__call *k, void *out, size_t bytes)
{
    return c && c->member ? c->member->enter(c, k, out, bytes) : 0;
}
static inline int ddl__call_leave(ddl_comm *c, const ddl__call *k, int st, const void *out, size_t bytes)
{
    return c && c->member ? c->member->leave(c, k, st, out, bytes) : st;
}

/* ddl__replay_enter: at the start of a public collective k whose result is out[bytes]: 1 when
 * it was served from a result this rank missed before a regroup (return DDL_OK at once), else 0.
 * ddl__replay_leave: at its end, with its status st (returned); keeps the result. Every enter
 * has its leave unless it returned 1. ddl__replay_share: after a regroup's links are up (every
 * member calls it): the lowest rank that completed the most calls sends its kept result to every
 * rank one call behind. */
int ddl__replay_enter(ddl_comm *c, const ddl__call *k, void *out, size_t bytes);
int ddl__replay_leave(ddl_comm *c, const ddl__call *k, int st, const void *out, size_t bytes);
int ddl__replay_share(ddl_comm *c);

/* ddl__comm_close: stop the heartbeat, close the transport, free the comm's memory: all of a
 * plain comm (ddl_comm_destroy first undoes what the floors above made). */
void ddl__comm_close(ddl_comm *c);
/* ddl__comm_begin: start a collective: check the sticky status, number it, remember what it is. */
int ddl__comm_begin(ddl_comm *c, int op, int dtype, int redop, size_t count, int arg);
/* ddl__comm_xchg: one step of the call in progress: send (send_buf, send_bytes) to `to` with
 * a header carrying send_step, and receive exactly recv_bytes from `from` whose header must
 * carry recv_step (to or from may be -1). Checks the received header; on any failure sets the
 * sticky error and returns it. */
int ddl__comm_xchg(ddl_comm *c, int to, uint32_t send_step, const void *send_buf, size_t send_bytes, int from,
                   uint32_t recv_step, void *recv_buf, size_t recv_bytes);
/* ddl__comm_xchg_in: ddl__comm_xchg of a payload only to be read, of elements of esz bytes:
 * *in points at it in the transport's own buffer (exchange_view) when it has one and the
 * payload is aligned there, else in scratch, where it is received or copied. Readable until
 * the next exchange. */
int ddl__comm_xchg_in(ddl_comm *c, int to, uint32_t send_step, const void *send_buf, size_t send_bytes, int from,
                      uint32_t recv_step, size_t recv_bytes, size_t esz, void *scratch, const void **in);
/* ddl__comm_post: the small-collective path of transports whose ranks share memory: post
 * (buf, bytes) and point views[r] at every rank r's (views[rank] at buf), readable until the
 * next post; headers checked. Only when ddl__comm_can_post(c, bytes). */
int ddl__comm_post(ddl_comm *c, const void *buf, size_t bytes, const void **views);
int ddl__comm_can_post(const ddl_comm *c, size_t bytes);
/* ddl__comm_fail: set the sticky error (first failure wins) with a message; returns c->status. */
int ddl__comm_fail(ddl_comm *c, int status, const char *fmt, ...) DDL__PRINTF(3, 4);
/* ddl__hb_card: set c->hb up (key, UDP socket) and write our card into card; c->hb.peers must
 * point at world zeroed entries. DDL_OK, or DDL_EIO with the reason in err. (create.c) */
int ddl__hb_card(ddl_comm *c, const ddl_comm_config *cfg, unsigned char *card, char *err, size_t err_bytes);
/* ddl__hb_begin: every rank's card in cards ([world][DDL__HB_CARD_BYTES]): start the thread. */
int ddl__hb_begin(ddl_comm *c, const unsigned char *cards, char *err, size_t err_bytes);
/* ddl__hb_stop: say goodbye, join the thread, close the sockets (safe when never started). */
void ddl__hb_stop(ddl__hb *hb);

/* Notes: the heartbeat's datagrams that carry a regroup (elastic.c). A note's body is
 * DDL__HB_BODY_BYTES: step u64 | a u32 | b u32 | a bitmap of DDL__ELASTIC_MAX ranks. */
enum { DDL__HB_REGROUP = 3, DDL__HB_DECIDE = 4, DDL__HB_JOIN = 5, DDL__HB_ADMIT = 6 };
/* ddl__hb_join_note: a JOIN or ADMIT note to dst, under the join key. */
void ddl__hb_join_note(ddl__hb *hb, const struct sockaddr_in *dst, int kind, uint32_t from, uint32_t to, uint64_t nonce,
                       const unsigned char *body);
/* ddl__hb_halt: join the thread without a goodbye; the socket stays for notes (stop closes it).
 * ddl__hb_note_all: a note to every other rank (only non-NULL: to the ranks of that bitmap).
 * ddl__hb_poll: the next authentic note within wait_ms (1, in note), else 0; beats that arrive
 * meanwhile are noted in peers' heard_ms. Only while the thread is halted. */
void ddl__hb_halt(ddl__hb *hb);
void ddl__hb_note_all(ddl__hb *hb, int kind, const unsigned char *body, const unsigned char *only);
int ddl__hb_poll(ddl__hb *hb, int wait_ms, ddl__hb_note *note);

/* ddl__comm_start_heartbeat: our card, everyone's by an allgather, then the thread (heartbeat_start.c). */
int ddl__comm_start_heartbeat(ddl_comm *c, const ddl_comm_config *cfg, char *err, size_t err_bytes);
/* elastic.c and join.c share: a bitmap's bit j; a note's body (ddl__hb_note's layout); slot s's
 * peer list entry; what a decision means for this process; the transport and heartbeat reopened
 * among the members (slots), in place (addrs: each slot's address, DDL__ELASTIC_ADDR bytes each, or
 * "" when the transport needs none; here: the slots on this host). */
#define DDL__ELASTIC_ADDR 64    /* an address kept in scratch, per slot */
#define DDL__ELASTIC_NOTE_MS 20 /* a regrouping rank's or a joiner's note goes out this often */
#define DDL__JOIN_FRESH_MS 200  /* a joiner heard this recently still asks (it asks every NOTE_MS) */
static inline int ddl__bit(const unsigned char *m, int j) { return m[j / 8] >> (j % 8) & 1; }
static inline void ddl__set_bit(unsigned char *m, int j) { m[j / 8] |= (unsigned char)(1u << (j % 8)); }
void ddl__elastic_note(unsigned char *b, long step, uint32_t a, uint32_t x, const unsigned char *map);
void ddl__elastic_peer_entry(const ddl_comm *c, int s, char *out, size_t bytes);
void ddl__elastic_outcome(const ddl_comm *c, const unsigned char *d, const unsigned char *was, ddl_regroup *out);
int ddl__elastic_reopen(ddl_comm *c, const unsigned char *members, const char *addrs, const unsigned char *here);
/* join.c: ddl__elastic_setup: an elastic comm's slots (slot = rank at creation) and the peer
 * list's ports (every slot's heartbeat listens there, so a joiner finds the job); DDL_OK or
 * DDL_EINVAL/DDL_ENOMEM with err. ddl__comm_join: a replacement (cfg->join): ask the job's ranks in
 * until they admit it, then open the transport among the members (DDL_OK, or the failure in err).
 * ddl__elastic_free: what setup allocated. */
int ddl__elastic_setup(ddl_comm *c, const ddl_comm_config *cfg, char *err, size_t err_bytes);
int ddl__comm_join(ddl_comm *c, const ddl_comm_config *cfg, char *err, size_t err_bytes);
/* ddl__comm_admit: a joiner whose ddl_comm_create returned at once asks the running job in now (its
 * first call, or ddl_comm_joined): DDL_OK, or the sticky failure. Nothing for any other comm. */
int ddl__comm_admit(ddl_comm *c);
void ddl__elastic_free(ddl_comm *c);
/* ddl__elastic_secret: an elastic comm created without a token, its transport open: rank 0 draws
 * a random secret and sends it to every rank, and it becomes the comm's token (c->token, cfg's and
 * cfg0's), so that the heartbeat's and the join notes' keys are no longer public. Nothing when the
 * comm has a token. DDL_OK, or the failure with err. ddl__elastic_job (elastic.c): the job id of generation
 * gen into out (64 bytes): the base, "~e" and gen, and an HMAC of them keyed by the token, so that
 * no other user can foresee the name of the next generation's shared-memory segment and take it. */
int ddl__elastic_secret(ddl_comm *c, ddl_comm_config *cfg, char *err, size_t err_bytes);
void ddl__elastic_job(const ddl_comm *c, int gen, char *out, size_t bytes);
/* ddl__comm_suspect: note rank r as one a failed call names (elastic.c reads them). */
void ddl__comm_suspect(ddl_comm *c, int r);

/* ddl__comm_stalled: as after a link failure: if the heartbeat names (or is about to name) a
 * silent rank, fail the call in progress with that (DDL_ETIMEDOUT); else DDL_OK. */
int ddl__comm_stalled(ddl_comm *c);
/* ddl__half_of, ddl__float_of_half: a float to the 16 bits of codec (DDL_COMPRESS_BF16 or
 * DDL_COMPRESS_FP16; round to nearest even, finite values saturate) and back (compress.c). */
uint16_t ddl__half_of(int codec, float f);
float ddl__float_of_half(int codec, uint16_t h);
/* ---- the collectives' primitives (ring.c): what every algorithm is written over ----
 * ddl__ring_segment: segment i of n of count elements in the ring algorithms (the first count % n
 * one element longer): its offset and length. ddl__n_pieces: how many pieces of per elements
 * len elements make. */
typedef struct ddl__seg {
    size_t off, len; /* elements */
} ddl__seg;
ddl__seg ddl__ring_segment(size_t count, int n, int i);
static inline size_t ddl__n_pieces(size_t len, size_t per) { return (len + per - 1) / per; }
/* ddl__reduce: dst[i] = a[i] op b[i], dst may alias a or b; the order of a and b
 * is the caller's. ddl__ring_exchange: one step s of the ring over the physical ranks: send
 * segment ss of sbuf to the right, receive segment rs from the left into buf (with do_reduce,
 * buf's segment = received + buf's), in pieces of the comm's scratch. */
void ddl__reduce(void *dst, const void *a, const void *b, size_t n, int dtype, int op);
int ddl__ring_exchange(ddl_comm *c, const unsigned char *sbuf, unsigned char *buf, size_t esz, uint32_t s, ddl__seg ss,
                       ddl__seg rs, int dtype, int op, int do_reduce);
/* ddl__ring_exchange_with: the same over any ring: right is where this rank sends, left where
 * it receives from (the two-level all-reduce's ring of hosts, hier.c; a pair, halving.c).
 * do_reduce: 0 the received piece lands in buf, 1 buf's = received op buf's, DDL__MINE_FIRST
 * buf's = buf's op received. */
enum { DDL__MINE_FIRST = 2 };
int ddl__ring_exchange_with(ddl_comm *c, int right, int left, const unsigned char *sbuf, unsigned char *buf, size_t esz,
                            uint32_t s, ddl__seg ss, ddl__seg rs, int dtype, int op, int do_reduce);
/* ddl__comm_check_args: a collective's arguments (what: its name, for the message): DDL_OK, the
 * sticky status, or DDL_EINVAL with the reason in c->err. */
int ddl__comm_check_args(ddl_comm *c, const void *buf, size_t count, int dtype, const char *what);
/* ddl__dtype_bytes: 4 for float32, 8 for int64, 0 for anything else. */
size_t ddl__dtype_bytes(int dtype);

/* ddl__default_transport: set cfg->transport from name (why: where it came from, for the
 * message), or with name NULL from where the ranks run (comm.c). */
/* ---- the one door to the transport table (transport.c) ----
 * ddl__tp_check: DDL_OK, or DDL_ENOTSUP for a table of an unknown version or without its
 * required members (NULL t is fine). ddl__tp_state_bytes: its state for cfg (0 for NULL).
 * ddl__tp_limits: c->native (want_native and a native all-reduce), c->post_max and c->view_max
 * from the members the table's version has (at creation, and again by ddl_comm_set_native). ddl__tp_name: "none" without a transport.
 * ddl__tp_open / _close: open (close is safe after a failed one) and close (once). ddl__tp_error:
 * the transport's detail of its last failure ("" if none). ddl__tp_peer_address: rank peer's
 * address, or NULL. ddl__tp_exchange: exchange, or with view non-NULL exchange_view (only when
 * c->view_max > 0). ddl__tp_allgather (c->post_max > 0) and ddl__tp_allreduce (c->native),
 * bounded by c->timeout_ms. ddl__tp_interrupter: the interrupt member (NULL before version 2)
 * and the state to call it with, for the heartbeat thread. */
int ddl__tp_check(const ddl_transport *t, char *err, size_t err_bytes);
size_t ddl__tp_state_bytes(const ddl_transport *t, const ddl_comm_config *cfg);
void ddl__tp_limits(ddl_comm *c, int want_native);
const char *ddl__tp_name(const ddl_comm *c);
int ddl__tp_open(ddl_comm *c, const ddl_comm_config *cfg);
void ddl__tp_close(ddl_comm *c);
const char *ddl__tp_error(const ddl_comm *c);
const char *ddl__tp_peer_address(const ddl_comm *c, int peer);
int ddl__tp_exchange(ddl_comm *c, int to, const void *send_hdr, const void *send_buf, size_t send_bytes, int from,
                     void *recv_hdr, void *recv_buf, const void **view, size_t recv_bytes, int timeout_ms);
int ddl__tp_allgather(ddl_comm *c, const void *hdr, const void *buf, size_t bytes, void *hdrs, const void **views);
int ddl__tp_allreduce(ddl_comm *c, float *buf, size_t count);
void ddl__tp_interrupter(const ddl_comm *c, void (**fn)(void *state, int culprit), void **state);

int ddl__default_transport(ddl_comm_config *cfg, const char *name, const char *why, char *err, size_t err_bytes);

/* ---- power-of-two worlds (halving.c) ----
 * ddl__pow2: n is a power of two (>= 1). ddl__halving_levels: log2 n, the levels of a halving
 * over n = 2^m. ddl__halving_range: the part of count elements that
 * index v (a rank, or a virtual shard) holds after `levels` halvings. ddl__halving_step: level
 * k of the reduce-scatter (gather 0) or of the all-gather (gather 1) for index v, whose partner
 * v ^ 2^k is rank peer of c: buf holds v's vector. ddl__halving_allreduce: the all-reduce of a
 * power-of-two world in the tree order (recursive halving, then doubling). */
int ddl__pow2(int n);
int ddl__halving_levels(int n);
ddl__seg ddl__halving_range(size_t count, int v, int levels);
int ddl__halving_step(ddl_comm *c, int peer, unsigned char *buf, size_t count, size_t esz, int v, int k, int gather,
                      int dtype, int op);
int ddl__halving_allreduce(ddl_comm *c, void *buf, size_t count, int dtype, int op);

/* ---- the two-level all-reduce (hier.c) ----
 * ddl__hier_setup: at create, over tcp or zmq with >= 4 ranks, not elastic, algo AUTO or HIER:
 * learn who shares a host (an allgather) and, with >= 2 hosts of the same size >= 2, set c->hier
 * and write the config of this host's shm comm into local (its job id into job, 64 bytes), for
 * the caller to open into c->hier->local. DDL_OK (c->hier NULL when it does not apply), or a
 * failure with err set.
 * ddl__hier_free: destroy it (NULL is fine). ddl__hier_fits: an all-reduce of count dtype goes by
 * it. ddl__hier_allreduce: the all-reduce in place (sum_op: DDL_SUM or DDL_MAX), in the call
 * begun on c. */
int ddl__hier_setup(ddl_comm *c, const ddl_comm_config *cfg, ddl_comm_config *local, char *job, char *err,
                    size_t err_bytes);
void ddl__hier_free(ddl_comm *c);
int ddl__hier_fits(const ddl_comm *c, size_t count, int dtype);
int ddl__hier_allreduce(ddl_comm *c, void *buf, size_t count, int dtype, int sum_op);

/* ---- Slurm (slurm.c) ---- */
/* ddl__slurm_first_host: the first host of a Slurm hostlist ("n[01-04,07],m5" -> "n01") into
 * out; 0, or -1 if list cannot be read or out is too small. */
int ddl__slurm_first_host(const char *list, char *out, size_t out_bytes);
/* ddl__slurm_tasks_here: the tasks of node `node` in Slurm's SLURM_STEP_TASKS_PER_NODE form
 * ("2(x3),1"), or -1 if it cannot be read or has no such node. */
int ddl__slurm_tasks_here(const char *per_node, int node);
/* ddl__slurm_master: under srun, cfg->master (in env->master) from Slurm's node list and a
 * port derived from SLURM_JOB_ID and SLURM_STEP_ID; unchanged outside Slurm. DDL_OK or
 * DDL_EINVAL (a node list it cannot read). */
int ddl__slurm_master(ddl_comm_config *cfg, ddl_comm_env *env, char *err, size_t err_bytes);
/* ddl__slurm_job: under Slurm, with a token and no job id: cfg->job = "slurm-" and 16 hex digits
 * of HMAC-SHA256(token, "slurm-JOB.STEP") (in env->job); otherwise nothing changes. */
void ddl__slurm_job(ddl_comm_config *cfg, ddl_comm_env *env);

/* ---- TensorFlow's TF_CONFIG (tfconfig.c) ---- */
/* ddl__tf_config: json, a TF_CONFIG value, into cfg: rank and world_size in TensorFlow's order
 * (chief first), peers (pointing into env->peers) the chief's and workers' addresses, and
 * local_rank and local_size among the ranks of the same host name. DDL_OK, or DDL_EINVAL with err
 * saying what was wrong and where (cfg's fields then unchanged). */
int ddl__tf_config(const char *json, ddl_comm_config *cfg, ddl_comm_env *env, char *err, size_t err_bytes);

#endif
