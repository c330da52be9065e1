/* zmq_impl.h - private to transports/zmq.c and transports/zmq_handshake.c: the state of the
 * ZeroMQ transport and the few helpers the two files share. Not API: nothing outside the ZeroMQ
 * transport includes this. Only compiled with DDL_WITH_ZMQ.
 *
 * Topology: every rank binds one ROUTER socket and connects one DEALER to every other rank's
 * ROUTER. Rank i sends to rank j on its own ROUTER, addressed to the routing id of j's DEALER;
 * it receives from rank j on the DEALER it connected to j. So every sender has its own receive
 * queue (libzmq's), and a message from one rank never has to be held while we wait for another.
 * Both directions of every pair run the handshake of zmq_handshake.c before they carry data. */
#ifndef DDL_ZMQ_IMPL_H
#define DDL_ZMQ_IMPL_H
#include "handshake.h"

#include <stdint.h>

#define ZQ_RID_BYTES 256    /* a routing id is at most 255 bytes (ZMTP) */
#define ZQ_PENDING 16       /* handshakes the ROUTER side runs at once */
#define ZQ_PROTO_VERSION 1
#define ZQ_MAX_WORLD 4096   /* 2 world + 1 sockets per rank */
#define ZQ_STATE_MAGIC 0x7a6d712dU /* marks a state that open() has initialised */

/* Client (DEALER side) stages of one link's handshake. */
enum { ZQ_C_IDLE = 0, ZQ_C_HELLO = 1, ZQ_C_PROOF = 2, ZQ_C_TABLE = 3, ZQ_C_DONE = 4 };

/* A handshake in progress on our ROUTER (an unauthenticated DEALER of someone). */
typedef struct zq_pending {
    int used;
    int64_t deadline_ms;       /* silence past this frees the slot */
    unsigned char rid[ZQ_RID_BYTES];
    size_t rid_bytes;
    ddl__hs_msg hello;         /* what the peer claimed */
    unsigned char nonce[DDL__NONCE_BYTES]; /* ours */
    char from[DDL__ADDR_BYTES];  /* the peer's IP, for messages */
} zq_pending;

/* Everything we know about one other rank. */
typedef struct zq_link {
    void *dealer;              /* ours, connected to the rank's ROUTER: its messages arrive here */
    void *monitor;             /* PAIR socket receiving the dealer's connect/disconnect events */
    unsigned char rid[ZQ_RID_BYTES]; /* routing id of its DEALER on our ROUTER: we send with it */
    size_t rid_bytes;          /* 0: its DEALER has not passed our handshake (yet) */
    int client;                /* ZQ_C_*: our DEALER's handshake with its ROUTER */
    unsigned char nonce_c[DDL__NONCE_BYTES], nonce_a[DDL__NONCE_BYTES];
    int64_t down_at_ms;        /* when the monitor saw the connection drop (0: up) */
    int reconnected;           /* the address answered again after a drop: not trusted any more */
    int tx_down, rx_down;      /* 0, or the status that broke sending / receiving (returned again) */
    char addr[DDL__ADDR_BYTES];  /* its ROUTER's "host:port" */
} zq_link;

typedef struct zq_state {
    uint32_t magic;            /* ZQ_STATE_MAGIC once open() initialised it */
    int rank, world, timeout_ms;
    int opened;                /* the handshakes are done: the ROUTER only refuses from now on */
    int master_mode;           /* rendezvous at rank 0 (else a static peer list) */
    int tables_sent;           /* rank 0, master mode: every rank got the address table */
    int failed, fail_status, culprit; /* as tcp: close() sends ABORT naming culprit, or BYE */
    void *ctx;                 /* libzmq context: its I/O and reaper threads are libzmq's */
    void *router;              /* bound at our address */
    ddl_log_fn log;
    void *log_ud;
    const char *token;         /* valid during open() only */
    size_t token_bytes;
    char job[DDL__JOB_BYTES];
    char addr[DDL__ADDR_BYTES];  /* our ROUTER's "host:port" */
    char err[DDL_ERR_BYTES];
    zq_pending pending[ZQ_PENDING];
    zq_link *links;            /* [world], inside the state memory */
    void *items;               /* zmq_pollitem_t [2 world + 3], inside the state memory */
    unsigned char *table;      /* [world * DDL__ADDR_BYTES + 8], the rendezvous address table */
} zq_state;

/* ---- shared helpers (zmq.c) ---- */

/* zq__fail: record an error message on the state and return status. */
int zq__fail(zq_state *s, int status, const char *fmt, ...) DDL__PRINTF(3, 4);
/* zq__connect: create link j's DEALER and monitor and connect it to links[j].addr, then send
 * our HELLO on it. */
int zq__connect(zq_state *s, int j);

/* ---- handshake (zmq_handshake.c, on transports/handshake.c) ---- */

/* zq__router_step: read and answer every handshake message waiting on our ROUTER. Before open
 * completes, authenticated ranks get their rid recorded; afterwards everyone is refused. */
void zq__router_step(zq_state *s);
/* zq__client_step: read what rank j's ROUTER answered on our DEALER; DDL_OK or a failure
 * (a refusal is DDL_EAUTH with the reason). */
int zq__client_step(zq_state *s, int j);
/* zq__send_hello: start our side of the handshake on link j's DEALER. */
int zq__send_hello(zq_state *s, int j);
/* zq__send_tables: rank 0, master mode: send every rank the table of ROUTER addresses. */
int zq__send_tables(zq_state *s);
/* zq__expire: free handshake slots whose peer went silent. */
void zq__expire(zq_state *s);

#endif
