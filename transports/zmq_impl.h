/* zmq_impl.h - what the ZeroMQ transport's two files share: the state of a comm's links and the
 * functions one calls in the other. zmq.c has the sockets, the events, open, the exchange and
 * close; zmq_handshake.c the handshakes, both the ROUTER's side and the DEALERs', and the loop
 * that runs them at open. Only for transports/zmq*.c, and only with DDL_WITH_ZMQ. */
#ifndef DDL_ZMQ_IMPL_H
#define DDL_ZMQ_IMPL_H
#include "net.h"

#include <zmq.h>

/* ---- state ---- */

#define ZQ_RID_BYTES 256              /* a routing id is at most 255 bytes (ZMTP) */
#define ZQ_OWN_RID_BYTES 16           /* the random routing id our DEALERs give themselves */
#define ZQ_MAX_WORLD 4096
/* libzmq sockets per other rank: its DEALER, our monitor PAIR and the PAIR that
 * zmq_socket_monitor opens inside libzmq; one ROUTER besides. Each holds a descriptor (its
 * mailbox) and each DEALER and accepted connection a socket: about 5 descriptors per rank. */
#define ZQ_SOCKETS_PER_RANK 3
#define ZQ_FDS_PER_RANK 5
#define ZQ_STATE_MAGIC 0x7a6d712dU    /* marks a state that open() has initialised */
#define ZQ_CHUNK ((size_t)8 << 20)    /* largest payload frame (and the receive bound) */
#define ZQ_GRACE_MS 50                /* a dropped link is dead if nothing it sent is left by then */
#define ZQ_QUICK_MS 5                 /* a first wait on the data socket alone, before the full poll */
#define ZQ_GREET_AGAIN_MS 20           /* a rank that gave our handshake up is greeted again after 20-40 ms */
/* A connect that has no answer after this is tried again (ZMQ_RECONNECT_IVL later): in a regroup
 * a rank may reach a peer's port before the peer has closed its old ROUTER there, whose shut
 * door drops the SYN, and the kernel's first retry of an unanswered SYN comes 1 s later (a zmq
 * regroup after a kill took 1 s in 2 of 10 runs of test_elastic). Above any round trip on Earth. */
#define ZQ_CONNECT_MS 300

/* Handshake messages (one frame each) start with "DDLZ", proofs with "ddl-zmq-v1"; a message is
 * [prefix "DDLZ"][payload chunk]..., the payload in frames of ZQ_CHUNK bytes (the last one
 * shorter), so that no frame is ever larger than ZMQ_MAXMSGSIZE allows. */
extern const ddl__net_proto ddl__zq_proto;

/* The sockets of one other rank (what else we know of it is in net.peers). */
typedef struct zq_link {
    void *dealer;              /* ours, connected to the rank's ROUTER: its messages arrive here */
    void *monitor;             /* PAIR socket receiving the dealer's connect/disconnect events */
    unsigned char rid[ZQ_RID_BYTES]; /* routing id of its DEALER on our ROUTER: we send with it */
    size_t rid_bytes;
    ddl__net_greeting greet;   /* our DEALER's handshake with its ROUTER */
    int64_t down_at_ms;        /* when the monitor saw the connection drop (0: up; during the
                                * handshakes: the greeting starts again once it is back) */
    int64_t greet_at_ms;       /* the rank gave our handshake up: greet again then (0: no) */
    int reconnected;           /* the address answered again after a drop: not trusted any more */
    int auth_refused;          /* its ROUTER refused our credential at ZeroMQ's handshake (zmq_zap.c) */
} zq_link;

typedef struct zq_state {
    ddl__net net;              /* first: net.c's getters serve as ours */
    int opened;                /* the handshakes are done: the ROUTER only refuses from now on */
    int master_mode;           /* rendezvous at rank 0 (else a static peer list) */
    int table_due;             /* not rank 0, master mode: rank 0's address table has not come yet */
    int tables_sent;           /* rank 0, master mode: every rank got the address table */
    void *ctx;                 /* libzmq context: its I/O and reaper threads are libzmq's */
    void *router;              /* bound at net.addr */
    int listen_fd;             /* the ROUTER's listening socket: ours (ZMQ_USE_FD), libzmq closes it */
    ddl__net_pool pool;        /* DEALERs of others on our ROUTER, not yet authenticated: keyed by routing id */
    zq_link *links;            /* [world], inside the state memory, as net.peers */
    void *items;               /* zmq_pollitem_t [2 world + 3] */
    unsigned char *table;      /* [DDL__TABLE_BYTES(world)], the address table */
    size_t table_bytes;        /* rank 0, master mode: its size once sent */
    zmq_msg_t view;            /* the payload exchange_view lent out, until the next call */
    int view_live;             /* view holds a message to close */
    void *zap;                 /* during open, with a token: our ZAP handler (zmq_zap.c) */
    char zap_password[2 * DDL__SHA256_BYTES + 1]; /* during open: the job's PLAIN password */
} zq_state;
_Static_assert(offsetof(zq_state, net) == 0, "net.c's getters take the state for its ddl__net");

/* zmq.c: drain_parts: drop the rest of a message whose first parts were read. send_dealer: a
 * handshake message on link j's DEALER. greet: our HELLO on link j's DEALER (again if rank j gave
 * our handshake up). connect_rank: link j's DEALER and monitor, connected to rank j's ROUTER, and
 * our HELLO on it. drain_monitor: link j's events: a drop starts the grace period; a new
 * connection after a drop means the address answers again (track 0: just discard). */
void ddl__zq_drain_parts(void *sock);
int ddl__zq_send_dealer(zq_state *s, int j, const ddl__hs_msg *m);
int ddl__zq_greet(zq_state *s, int j);
int ddl__zq_connect_rank(zq_state *s, int j);
void ddl__zq_drain_monitor(zq_state *s, int j, int track);

/* zmq_handshake.c: router_step: read and answer every handshake message waiting on our ROUTER
 * (after open, everyone is refused). expire: free the handshake slots whose peer went silent.
 * handshakes: run them until every rank passed ours and we passed theirs, by deadline_ms. */
void ddl__zq_router_step(zq_state *s);

/* zmq_zap.c: with a token, ZeroMQ's handshake takes only peers that know the job's credential.
 * zap_open: at open, derive it and start our ZAP handler (without a token: nothing; the NULL
 * mechanism stays); zap_server / zap_client: make our ROUTER a PLAIN server, a DEALER a client
 * with the credential (no-ops without a handler); zap_step: answer what libzmq asked (never
 * blocks); zap_close: at the end of open, stop the handler (libzmq then closes every newcomer)
 * and wipe the credential. DDL_OK or DDL_EIO with the message in net.err. */
int ddl__zq_zap_open(zq_state *s);
int ddl__zq_zap_server(zq_state *s, void *router);
int ddl__zq_zap_client(zq_state *s, void *dealer);
void ddl__zq_zap_step(zq_state *s);
void ddl__zq_zap_close(zq_state *s);
void ddl__zq_expire(zq_state *s);
int ddl__zq_handshakes(zq_state *s, int64_t deadline_ms);

#endif
