/* net.h - private to the network transports (tcp.c, zmq.c) and to what they share, one idea a
 * file: net.c (their common state, failure recording, addresses, rendezvous table, frame
 * prefix, goodbyes, the vtable's getters), net_handshake.c (the handshake both run before they
 * trust a peer, on sha256.c's HMAC), net_pool.c (the accepting side's peers not authenticated
 * yet) and net_socket.c (stream sockets with deadlines). A transport keeps one ddl__net first in
 * its state; its sockets, and how bytes travel on them, stay in its own file. Not API: nothing
 * outside transports/ includes this but the tests of these pieces. Calls run one way: tcp.c and
 * zmq.c call the net*.c files; net_socket.c and net_pool.c call net_handshake.c and net.c;
 * net_handshake.c calls net.c and sha256.c; nothing here calls back into a transport. */
#ifndef DDL_NET_H
#define DDL_NET_H
#include "core/impl.h"

#include <stdatomic.h>
#include <sys/socket.h>

/* ---- frame MACs (net_mac.c) ---- */

#define DDL__MAC_BYTES 16
/* A running Poly1305 (libsodium's state, kept opaque here). */
typedef struct ddl__mac {
    _Alignas(64) unsigned char state[256];
} ddl__mac;
/* DDL__MAC_BUILT: 1 if this build can MAC frames (libsodium). */
#ifdef DDL_WITH_SODIUM
#define DDL__MAC_BUILT 1
#else
#define DDL__MAC_BUILT 0
#endif
/* ddl__mac_begin / _update / _final: Poly1305 under the one-time key of frame number `frame` in
 * direction dir ('c' or 'a') of the link with key link_key. */
void ddl__mac_begin(ddl__mac *m, const unsigned char link_key[32], int dir, uint64_t frame);
void ddl__mac_update(ddl__mac *m, const void *p, size_t n);
void ddl__mac_final(ddl__mac *m, unsigned char tag[DDL__MAC_BYTES]);

/* ---- protocols ---- */

#define DDL__ADDR_BYTES 64  /* "host:port" including the NUL; longer addresses are refused */
#define DDL__JOB_BYTES 64   /* job id including the NUL */
#define DDL__NONCE_BYTES 32 /* random bytes each side contributes to a handshake */
#define DDL__HS_BYTES 216   /* every handshake message has exactly this size */
#define DDL__TOKEN_MIN_BYTES 16 /* shorter tokens get a warning */

/* What tells one transport's wire from another's, so that one never takes the other's bytes. */
typedef struct ddl__net_proto {
    const char *name;       /* "tcp": the prefix of its log lines and messages */
    const char *hs_magic;   /* the 4 bytes every handshake message starts with: "DDLH", "DDLZ" */
    const char *label;      /* what every proof's text starts with: "ddl-v1", "ddl-zmq-v1" */
    uint32_t version;       /* the handshake protocol version every message states */
    const char *duplicate;  /* how the refusal reason DDL__HS_R_DUPLICATE reads */
    uint32_t frame_magic;   /* the u32 every frame prefix starts with: "DDL1", "DDLZ" */
    int two_way_links;      /* 1: one connection per pair carries both ways (tcp); 0: each rank's
                             * messages travel on the connection the other rank made (zmq) */
} ddl__net_proto;

/* ---- state (net.c) ---- */

/* What a transport knows of one other rank, whatever carries its bytes. */
typedef struct ddl__net_peer {
    char addr[DDL__ADDR_BYTES]; /* its listening "host:port", for connecting and for messages */
    int tx_down, rx_down;       /* 0, or the status that broke sending / receiving (returned again) */
    int joined;                 /* it passed the accepting side of our handshake */
    unsigned char tx_key[32], rx_key[32]; /* frame MAC keys of the links we send and receive on */
    int tx_dir, rx_dir;         /* 'c' or 'a': the side of the handshake that sends on that link */
    uint64_t tx_frames, rx_frames; /* data frames MAC'd so far each way: the MAC's nonce */
    int linked;                 /* the transport's link to it is complete (set by the transport) */
} ddl__net_peer;

/* The first member of a transport's state (the getters below rely on it); the core hands the
 * state over zeroed, so magic is 0 until open() and again after close(). */
typedef struct ddl__net {
    uint32_t magic;             /* the transport's mark once open() initialised the state */
    const ddl__net_proto *proto;
    int rank, world, timeout_ms;
    int failed;                 /* a failure happened: close() says ABORT, not BYE */
    int fail_status;            /* the first failure's status */
    int culprit;                /* the first rank found dead (-1: none), named in our ABORT */
    int mac;                    /* every data frame carries a MAC (DDL_MAC=1; net_mac.c) */
    _Atomic int stalled;        /* 1 + the rank the comm's heartbeat found silent (interrupt) */
    ddl_log_fn log;
    void *log_ud;
    const char *token;          /* valid during open() only */
    size_t token_bytes;
    char job[DDL__JOB_BYTES];
    char addr[DDL__ADDR_BYTES]; /* where we listen */
    char err[DDL_ERR_BYTES];    /* the last failure in words */
    ddl__net_peer *peers;       /* [world], inside the transport's state memory */
} ddl__net;

/* ddl__net_init: n for cfg (rank and world size already checked), peers[world] zeroed by the
 * core. DDL_OK, or DDL_EINVAL for a job id too long (message in n->err). */
int ddl__net_init(ddl__net *n, uint32_t magic, const ddl__net_proto *proto, const ddl_comm_config *cfg,
                  ddl__net_peer *peers);
/* ddl__net_fail: record a message (and the first failure's status) and return status. */
int ddl__net_fail(ddl__net *n, int status, const char *fmt, ...) DDL__PRINTF(3, 4);

/* ddl__net_recovered: what failed was dealt with (a handshake dialled again): forget it, so that
 * neither a later operation nor our goodbye (ABORT instead of BYE) reports it. */
void ddl__net_recovered(ddl__net *n);
/* ddl__net_link_down: sending (tx) and/or receiving (rx) with rank j failed with status; a
 * dead peer (DDL_EPEER) becomes the culprit if none was named yet. */
void ddl__net_link_down(ddl__net *n, int j, int status, int tx, int rx);
/* ddl__net_check_peer: DDL_OK if rank peer (-1: nobody) can be sent to (sending) or received
 * from; DDL_EINVAL for no such rank, or the status that broke that direction earlier. */
int ddl__net_check_peer(ddl__net *n, int peer, int sending);
/* ddl__net_interrupt: the vtable's interrupt for both transports (state starts with a ddl__net):
 * marks `culprit` as stalled; the waits notice it through ddl__net_stalled. Any thread. */
void ddl__net_interrupt(void *state, int culprit);
/* ddl__net_stalled: DDL_OK, or after an interrupt DDL_ETIMEDOUT with the culprit recorded (named
 * in our ABORT) and the message in err. Waits poll at most DDL__NET_WAIT_SLICE_MS at a time so
 * that they look often enough. */
int ddl__net_stalled(ddl__net *n);
#define DDL__NET_WAIT_SLICE_MS 100
/* ddl__net_opened: open() ends with status: forget the token, log the success. */
void ddl__net_opened(ddl__net *n, int status);
/* ddl__net_waiting: while open() waits for ranks: from DDL__WAITING_EVERY_MS after started_ms on,
 * every as long, log (WARN, so that people see it) whom we still wait for: "tcp: rank 0: waiting
 * for ranks 2, 3 (5 s)". *next_ms is when the next line is due (0 at the start). */
#define DDL__WAITING_EVERY_MS 5000
void ddl__net_waiting(const ddl__net *n, int64_t started_ms, int64_t *next_ms, const char *missing);
/* ddl__net_missing: how many of ranks lo..hi (but ours) are not linked yet; their list in
 * out[size] ("1, 3, 4", cut short if long), for a timeout's message. */
int ddl__net_missing(const ddl__net *n, int lo, int hi, char *out, size_t size);
/* ddl__net_peer_address: rank r's address for messages ("self" or "?" when unknown). */
const char *ddl__net_peer_address(const ddl__net *n, int r);

/* ---- addresses and rendezvous (net.c) ---- */

/* ddl__split_addr: "host:port" or "[v6]:port" (under DDL__ADDR_BYTES) into host, brackets
 * removed, and port; 0 on success, -1 if it is not of that form. */
int ddl__split_addr(const char *text, char host[DDL__ADDR_BYTES], int *port);
/* ddl__net_url: "host:port" (or "[v6]:port") as "scheme://host:port", brackets around an IPv6
 * host, in out[size]: 1 if the host is IPv6, 0 if not, -1 if addr is not of that form. */
int ddl__net_url(const char *addr, const char *scheme, char *out, size_t size);
/* ddl__net_resolve: "host:port" into *ss. Numeric hosts need no resolver; names go through
 * getaddrinfo (the only place libc may allocate for us). 0, or -1. */
int ddl__net_resolve(const char *text, struct sockaddr_storage *ss, socklen_t *len);
/* ddl__net_format: "ip:port" or "[ip6]:port". */
void ddl__net_format(const struct sockaddr_storage *ss, char out[DDL__ADDR_BYTES]);
/* ddl__net_local_toward: the address of this host that reaches *to, port 0, in *out (a UDP
 * connect, which sends nothing). 0, or -1. */
int ddl__net_local_toward(const struct sockaddr_storage *to, struct sockaddr_storage *out, socklen_t *len);
/* ddl__net_where: the rendezvous cfg asks for. With a peer list (*master 0) every peers[].addr
 * is set and *ss is our own entry; with a master (*master 1) peers[0].addr and *ss are the
 * master's address. DDL_OK, or DDL_EINVAL with the message. */
int ddl__net_where(ddl__net *n, const ddl_comm_config *cfg, struct sockaddr_storage *ss, socklen_t *len,
                   int *master);

/* The address table rank 0 sends every rank in a master rendezvous: [0] "DDLT" [4] u32 world,
 * then world entries of DDL__ADDR_BYTES, each a NUL-terminated "host:port" (peers[j].addr). */
#define DDL__TABLE_HEAD 8
#define DDL__TABLE_BYTES(world) (DDL__TABLE_HEAD + (size_t)(world) * DDL__ADDR_BYTES)
/* ddl__net_table_encode: our table in out[DDL__TABLE_BYTES(world)]; returns its size. */
size_t ddl__net_table_encode(const ddl__net *n, unsigned char *out);
/* ddl__net_table_head_ok: DDL_OK if head starts a table for our world size, else DDL_EPROTO. */
int ddl__net_table_head_ok(ddl__net *n, const unsigned char head[DDL__TABLE_HEAD]);
/* ddl__net_table_decode: rank 0's table in[bytes] into peers[].addr (but rank 0's and ours):
 * DDL_OK, or DDL_EPROTO if it is not a table of well-formed addresses for our world size. */
int ddl__net_table_decode(ddl__net *n, const unsigned char *in, size_t bytes);

/* ---- the vtable's getters (net.c) ----
 * A transport's state starts with its ddl__net (offset 0), so these serve as its vtable's
 * error and peer_address, whatever the transport. */

/* ddl__net_error: the last failure in words ("" for a NULL state). */
const char *ddl__net_error(const void *state);
/* ddl__net_address: rank r's address, "?" before open() and after close(). */
const char *ddl__net_address(const void *state, int r);

/* ---- frames (net.c) ---- */

/* Every message starts with a prefix: [u32 magic][u32 flags][u64 payload bytes][32-byte
 * header], little endian. BYE: the sender closes its comm on purpose; ABORT: it closes after
 * a failure, and the header holds i32 culprit rank, i32 status. */
#define DDL__FRAME_PREFIX (16 + DDL_HEADER_BYTES)
#define DDL__FRAME_BYE 1U
#define DDL__FRAME_ABORT 2U
#define DDL__FRAME_MAX_PAYLOAD ((uint64_t)1 << 40) /* more than this is a lie, not a message */

typedef struct ddl__frame {
    uint32_t magic, flags;
    uint64_t bytes;
} ddl__frame;

/* ddl__net_frame_prefix: the prefix of a message of `bytes` bytes (hdr NULL: a zero header). */
void ddl__net_frame_prefix(const ddl__net *n, unsigned char out[DDL__FRAME_PREFIX], uint32_t flags, uint64_t bytes,
                           const void *hdr);
/* ddl__net_goodbye: the prefix of our last message to every peer: BYE, or ABORT naming the
 * culprit, so that every rank can name the same dead rank. */
void ddl__net_goodbye(const ddl__net *n, unsigned char out[DDL__FRAME_PREFIX]);
/* ddl__net_frame_read: pre decoded into *f; 1 if it has our magic and known flags, else 0. */
int ddl__net_frame_read(const ddl__net *n, const unsigned char pre[DDL__FRAME_PREFIX], ddl__frame *f);
/* ddl__net_peer_gone: rank j's connection closed while we exchanged with rank busy (and no
 * goodbye of it is left to read): both directions down, returns DDL_EPEER with the message. */
int ddl__net_peer_gone(ddl__net *n, int j, int busy);
/* ddl__mac_link_key: the MAC key of the link a handshake made (c connected, a accepted). */
void ddl__mac_link_key(const ddl__net *n, const unsigned char *nonce_c, const unsigned char *nonce_a, int rank_c,
                       int rank_a, unsigned char out[32]);
/* ddl__mac_frame_begin: start the MAC of the next data frame to (sending) or from rank peer. */
void ddl__mac_frame_begin(ddl__net *n, int peer, int sending, ddl__mac *m);
/* ddl__mac_frame_tag: the tag of the next data frame to rank peer: prefix and payload. */
void ddl__mac_frame_tag(ddl__net *n, int peer, const unsigned char *pre, const void *buf, size_t bytes,
                        unsigned char tag[DDL__MAC_BYTES]);
/* ddl__mac_frame_check: the frame MAC'd in m came with tag: DDL_OK, or DDL_EPROTO (receiving
 * from peer is down, the message says so). */
int ddl__mac_frame_check(ddl__net *n, int peer, ddl__mac *m, const unsigned char tag[DDL__MAC_BYTES]);
/* ddl__net_frame_is_abort: the first 8 bytes of pre start an ABORT frame (whatever else they say). */
int ddl__net_frame_is_abort(const ddl__net *n, const unsigned char *pre);
/* ddl__net_peer_left: rank j's BYE or ABORT (pre) arrived while we waited for want bytes:
 * both directions are down, the culprit named; returns DDL_EPEER with the message. */
int ddl__net_peer_left(ddl__net *n, int j, const unsigned char pre[DDL__FRAME_PREFIX], size_t want);

/* ---- handshake (net_handshake.c) ----
 * Both sides state protocol version, job id, rank and world size, exchange random nonces and
 * prove that they know the token with HMAC-SHA256, without ever sending it. A peer that has not
 * proved it learns nothing of the job: before the proof only the protocol version and the job
 * id it claims are checked, the accepting side's HELLO repeats the world size the peer claimed,
 * and a REFUSE carries its reason only (no job id, rank or world size); world size, rank and
 * duplicates are checked once the proof holds. */

/* Message types and refusal reasons (on the wire: never renumber). */
enum { DDL__HS_HELLO = 1, DDL__HS_PROOF = 2, DDL__HS_OK = 3, DDL__HS_REFUSE = 4 };
enum {
    DDL__HS_R_VERSION = 1, DDL__HS_R_JOB = 2, DDL__HS_R_WORLD = 3, DDL__HS_R_RANK = 4,
    DDL__HS_R_DUPLICATE = 5, DDL__HS_R_TOKEN = 6, DDL__HS_R_GARBAGE = 7, DDL__HS_R_SILENT = 8,
    DDL__HS_R_MAC = 9
};

/* One handshake message, decoded. Strings are NUL-terminated after decoding. */
typedef struct ddl__hs_msg {
    uint32_t type, version, rank, world, reason;
    char job[DDL__JOB_BYTES];
    unsigned char nonce[DDL__NONCE_BYTES];
    unsigned char mac[DDL__SHA256_BYTES];
    char addr[DDL__ADDR_BYTES]; /* HELLO: the sender's listening address (master rendezvous) */
} ddl__hs_msg;

/* ddl__hs_encode: m as the DDL__HS_BYTES bytes of the wire. */
void ddl__hs_encode(const ddl__net_proto *p, const ddl__hs_msg *m, unsigned char out[DDL__HS_BYTES]);
/* ddl__hs_decode: 0 if in[bytes] is a well-formed message of protocol p (exact size, magic,
 * known type, terminated strings) and *m holds it; -1 otherwise. Reads no byte past bytes. */
int ddl__hs_decode(const ddl__net_proto *p, const unsigned char *in, size_t bytes, ddl__hs_msg *m);

/* The accepting side: a peer that connected to us, not yet authenticated. The transport keeps
 * its socket beside it and moves the messages. */
typedef struct ddl__net_pending {
    int stage;                  /* DDL__HS_HELLO or DDL__HS_PROOF: the message we wait for */
    int64_t deadline_ms;        /* silence past this refuses the peer */
    ddl__hs_msg hello;          /* what the peer claimed */
    unsigned char nonce[DDL__NONCE_BYTES]; /* ours */
    char from[DDL__ADDR_BYTES]; /* the peer's address, for messages */
} ddl__net_pending;

/* What the accepting side does with a pending peer's message (ddl__net_accept). */
enum { DDL__ACCEPT_REPLY = 1, DDL__ACCEPT_JOINED = 2, DDL__ACCEPT_REFUSE = 3, DDL__ACCEPT_DROP = 4 };
/* ddl__net_accept: m arrived from p. Ranks lo..hi but ours are welcome, each once. Returns
 * REPLY: send *reply (our hello; p waits for the proof now); JOINED: p proved itself: send
 * *reply (our OK), then ddl__net_join; REFUSE: refuse p for reply->reason; DROP: close p
 * (we have no random numbers; logged). */
int ddl__net_accept(ddl__net *n, ddl__net_pending *p, const ddl__hs_msg *m, int lo, int hi, ddl__hs_msg *reply);
/* ddl__net_join: p (JOINED) has its link now; take_addr: its address is the one it advertised. */
void ddl__net_join(ddl__net *n, const ddl__net_pending *p, int take_addr);
/* ddl__net_refusal: log that we refuse p for reason and put the REFUSE message in *out (the
 * transport decides whether to send it); claims: p's hello may be quoted in the log. */
void ddl__net_refusal(const ddl__net *n, const ddl__net_pending *p, uint32_t reason, int claims, ddl__hs_msg *out);

/* The connecting side: our handshake with rank peer, at peers[peer].addr. */
enum { DDL__GREET_HELLO = 1, DDL__GREET_OK = 2, DDL__GREET_DONE = 3 };
typedef struct ddl__net_greeting {
    int stage;                  /* DDL__GREET_*: what we wait for (0: not started) */
    unsigned char nonce_c[DDL__NONCE_BYTES], nonce_a[DDL__NONCE_BYTES]; /* ours, the acceptor's */
} ddl__net_greeting;

/* ddl__net_greet_start: our HELLO in *out, to send; DDL_OK or DDL_EIO (no random numbers). */
int ddl__net_greet_start(ddl__net *n, ddl__net_greeting *g, ddl__hs_msg *out);
/* ddl__net_greet_step: the acceptor's answer in[bytes]. DDL_OK: send *out if g->stage moved to
 * DDL__GREET_OK (our proof), done at DDL__GREET_DONE, start again (ddl__net_greet_start) at 0:
 * the acceptor gave our slot up (refused as silent: slow, or crowded out by strangers); the stage
 * unchanged: an answer to an earlier HELLO of ours (it echoes another nonce), dropped. Else the
 * failure: DDL_EPROTO (not a handshake), DDL_EAUTH (refused, wrong rank or job, no proof), with
 * the message. */
int ddl__net_greet_step(ddl__net *n, ddl__net_greeting *g, int peer, const unsigned char *in, size_t bytes,
                        ddl__hs_msg *out);

/* ---- the accepting side's pool (net_pool.c) ----
 * The peers that connected to us and have not proved who they are yet. The transport asks
 * whether a newcomer may have a slot (ddl__net_pool_admit), keys each slot with what reaches
 * the peer (tcp: its socket; zmq: its routing id), moves the bytes, and acts on what the pool
 * returns: DDL__ACCEPT_REPLY, _JOINED (send out; then ddl__net_pool_join),
 * _REFUSE (ddl__net_pool_refuse with the reason, tell the peer or not, drop), _DROP. */

#define DDL__POOL_SLOTS 16    /* handshakes an accepting rank runs at once */
#define DDL__POOL_SLOT_MS 2000 /* the longest a handshake may hold a slot (a real peer's takes ms) */
#define DDL__POOL_HOLD_MS 500  /* nor is a slot still waiting for its HELLO taken over sooner: a real
                                * peer's arrives within it even when 64 ranks of one host all connect */
#define DDL__KEY_BYTES 256 /* the longest key: a ZMTP routing id is at most 255 bytes */

typedef struct ddl__net_slot {
    ddl__net_pending hs;               /* hs.stage 0: the slot is free */
    int64_t since_ms;                  /* when the peer took it */
    unsigned char key[DDL__KEY_BYTES]; /* the transport's way to the peer */
    size_t key_bytes;
    unsigned char source[16];          /* the source address it counts against (net_pool.c) */
    size_t got;                        /* bytes of msg so far, for messages that arrive in pieces */
    unsigned char msg[DDL__HS_BYTES];
} ddl__net_slot;

typedef struct ddl__net_pool {
    ddl__net *net;
    int lo, hi, take_addr;             /* ranks welcome (each once); keep the address each advertises */
    ddl__net_slot slot[DDL__POOL_SLOTS];
} ddl__net_pool;

/* ddl__net_pool_init: every slot free, for n. */
void ddl__net_pool_init(ddl__net_pool *pl, ddl__net *n);
/* ddl__net_pool_welcome: ranks lo..hi (but ours) may join from now on; take_addr: see ddl__net_join. */
void ddl__net_pool_welcome(ddl__net_pool *pl, int lo, int hi, int take_addr);
/* ddl__net_pool_find: the slot in use with this key, or NULL. */
ddl__net_slot *ddl__net_pool_find(ddl__net_pool *pl, const void *key, size_t key_bytes);
/* ddl__net_pool_room: 1 if a slot is free. */
int ddl__net_pool_room(const ddl__net_pool *pl);
/* ddl__net_pool_open: 1 if a newcomer could get a slot now, from a source below its cap: one is
 * free or may be taken over. While 0, tcp leaves newcomers in its listen queue. */
int ddl__net_pool_open(ddl__net_pool *pl);
/* ddl__net_pool_admit: may a newcomer from `from` (its address, as for ddl__net_pool_start)
 * start a handshake? 1: yes, in a free slot (*victim NULL) or in *victim, which the transport
 * first closes and drops: a slot still waiting for its HELLO after DDL__POOL_HOLD_MS, never one
 * that sent a HELLO of our job. 0: no: its source holds its share of the slots already (net_pool.c
 * says how many), or every slot is busy; turn it away (ddl__net_pool_busy), and it greets again. */
int ddl__net_pool_admit(ddl__net_pool *pl, const char *from, ddl__net_slot **victim);
/* ddl__net_pool_busy: in out, the refusal that tells a peer without a slot to greet again
 * (DDL__HS_R_SILENT, as to a peer whose slot was given up; nothing of the job). */
void ddl__net_pool_busy(const ddl__net_pool *pl, unsigned char out[DDL__HS_BYTES]);
/* ddl__net_pool_start: a slot for a peer (from: its address) that starts a handshake: the one
 * its key already has, restarted, or a free one, for DDL__POOL_SLOT_MS at most (less if the open
 * timeout is shorter). NULL if none is free or the key is longer than DDL__KEY_BYTES. */
ddl__net_slot *ddl__net_pool_start(ddl__net_pool *pl, const void *key, size_t key_bytes, const char *from);
/* ddl__net_pool_drop: free p (the transport has closed what it held). */
void ddl__net_pool_drop(ddl__net_pool *pl, ddl__net_slot *p);
/* ddl__net_pool_silent: a slot in use past its deadline (to refuse for DDL__HS_R_SILENT), or NULL. */
ddl__net_slot *ddl__net_pool_silent(ddl__net_pool *pl);
/* ddl__net_pool_wake: the earliest of deadline_ms, the deadlines of the slots in use and, with
 * every slot in use, when the first of them may be taken over (ddl__net_pool_open). */
int64_t ddl__net_pool_wake(const ddl__net_pool *pl, int64_t deadline_ms);
/* ddl__net_pool_accept: m arrived from p: the DDL__ACCEPT_* action, with the answer in out
 * (REPLY, JOINED) or the reason to refuse in *reason (REFUSE). */
int ddl__net_pool_accept(ddl__net_pool *pl, ddl__net_slot *p, const ddl__hs_msg *m, unsigned char out[DDL__HS_BYTES],
                         uint32_t *reason);
/* ddl__net_pool_feed: k more bytes of a stream are in p->msg after the p->got before: 0 (wait
 * for more), REFUSE for DDL__HS_R_GARBAGE as soon as the magic is wrong, or what a whole
 * message makes ddl__net_pool_accept do. */
int ddl__net_pool_feed(ddl__net_pool *pl, ddl__net_slot *p, size_t k, unsigned char out[DDL__HS_BYTES],
                       uint32_t *reason);
/* ddl__net_pool_join: p (JOINED) has its link now: record it (ddl__net_join), free p, return its rank. */
int ddl__net_pool_join(ddl__net_pool *pl, ddl__net_slot *p);
/* ddl__net_pool_refuse: log that we refuse p for reason (claims: quote its hello) and put the
 * REFUSE message in out, for the transport to send or not; p stays in use until dropped. */
void ddl__net_pool_refuse(ddl__net_pool *pl, const ddl__net_slot *p, uint32_t reason, int claims,
                          unsigned char out[DDL__HS_BYTES]);

/* ---- stream sockets with deadlines (net_socket.c) ---- */

/* ddl__sock_io: read (writing 0) or write all n bytes of buf on a non-blocking fd before
 * deadline_ms. DDL_OK, DDL_ETIMEDOUT, DDL_EPEER (closed or reset) or DDL_EIO. */
int ddl__sock_io(int fd, void *buf, size_t n, int writing, int64_t deadline_ms);
/* ddl__sock_tune: TCP_NODELAY and 4 MiB buffers on a connected socket. */
void ddl__sock_tune(int fd);
/* One frame moving on a non-blocking stream socket: its prefix, then its payload. */
typedef struct ddl__sock_frame {
    int peer, fd;                         /* peer -1: nothing to do */
    unsigned char pre[DDL__FRAME_PREFIX]; /* prefix, sent or received */
    size_t pre_done;
    unsigned char *buf;                   /* payload */
    size_t bytes, done;
    int finished;
    unsigned char tag[DDL__MAC_BYTES];    /* the frame's MAC, sent or received after the payload */
    size_t tag_bytes, tag_done;           /* tag_bytes 0: no MAC */
    struct ddl__mac *mac;                 /* receiving: the running MAC over what arrived (NULL: none) */
} ddl__sock_frame;
enum { DDL__SOCK_CLOSED = -2, DDL__SOCK_FAILED = -1, DDL__SOCK_BLOCKED = 0, DDL__SOCK_DONE = 1, DDL__SOCK_PREFIX = 2 };
/* ddl__sock_send_some: send x until the socket is full: DONE (x->finished set), BLOCKED, or
 * FAILED (errno says why). */
int ddl__sock_send_some(ddl__sock_frame *x);
/* ddl__sock_recv_some: receive into x until the socket is empty: DONE (x->finished set),
 * BLOCKED, PREFIX (the prefix just became whole: check it before calling again), CLOSED (the
 * peer closed its side) or FAILED (errno says why). */
int ddl__sock_recv_some(ddl__sock_frame *x);
/* ddl__net_listen: a non-blocking socket in *fd listening exactly at ss (port 0: any free port),
 * the address it got in n->addr; what says which address it is, for the message. *fd is set
 * (the caller closes it) even when bind or listen fail. */
int ddl__net_listen(ddl__net *n, const struct sockaddr_storage *ss, socklen_t len, const char *what, int *fd);
/* ddl__sock_shut_door: the listening socket fd takes no new connection from now on, while its
 * owner (libzmq) keeps it: a socket filter drops every packet that reaches it, so a SYN goes
 * unanswered; connections accepted earlier are not touched. 0, or -1 where this is not
 * possible (Linux only). */
int ddl__sock_shut_door(int fd);
/* ddl__net_check_fds: can this process open per_rank descriptors for each rank of the job, and
 * some for the program besides? DDL_OK, or DDL_EINVAL naming the limit (ulimit -n) to raise. */
int ddl__net_check_fds(ddl__net *n, int per_rank);
/* ddl__net_dial: connect to rank peer at peers[peer].addr, retrying while nobody listens there
 * yet, until deadline_ms; the non-blocking socket in *fd. */
int ddl__net_dial(ddl__net *n, int peer, int64_t deadline_ms, int *fd);
/* ddl__net_greet_fd: our side of the handshake with rank peer on the connected socket fd. */
int ddl__net_greet_fd(ddl__net *n, int fd, int peer, int64_t deadline_ms);
/* ddl__net_dial_greet: dial rank peer and greet it, again while it closes the connection
 * unanswered (DDL_EPEER: a stranger may have taken our handshake slot), until deadline_ms; the
 * authenticated socket in *fd. A refusal (DDL_EAUTH) or a timeout ends it at once. */
int ddl__net_dial_greet(ddl__net *n, int peer, int64_t deadline_ms, int *fd);
/* ddl__net_goodbye_fd: our BYE or ABORT on fd, then drain what the peer sent, so that closing
 * fd sends FIN, not a reset that could destroy the frame. Never blocks. */
void ddl__net_goodbye_fd(const ddl__net *n, int fd);

#endif
