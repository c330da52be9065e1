/* tcp_impl.h - private to transports/tcp.c and transports/tcp_handshake.c: the state of the
 * TCP transport (all of it lives in the memory the core hands to open()) and the few helpers
 * the two files share. Not API: nothing outside the TCP transport includes this. */
#ifndef DDL_TCP_IMPL_H
#define DDL_TCP_IMPL_H
#include "handshake.h"

#include <poll.h>

#define TCP_PENDING 16       /* handshakes an accepting rank runs at once */
#define TCP_TABLE_MAGIC "DDLT"
#define TCP_PROTO_VERSION 1
#define TCP_STATE_MAGIC 0x7463702dU /* marks a state that open() has initialised */

/* A connection accepted but not yet authenticated. */
typedef struct tcp_pending {
    int fd;                    /* -1: slot free */
    int stage;                 /* DDL__HS_HELLO: waiting for hello, DDL__HS_PROOF: waiting for proof */
    size_t got;                /* bytes of buf received */
    int64_t deadline_ms;       /* silence past this refuses the connection */
    unsigned char buf[DDL__HS_BYTES];
    ddl__hs_msg hello;         /* what the peer claimed */
    unsigned char nonce[DDL__NONCE_BYTES]; /* ours */
    char from[DDL__ADDR_BYTES]; /* the peer's address, for messages */
} tcp_pending;

/* A link to one other rank. */
typedef struct tcp_link {
    int fd;                    /* -1: none */
    int tx_down, rx_down;      /* 0, or the status that broke sending / receiving (returned again) */
    int hup_pending;           /* the peer shut its side with data still queued: decide on reading */
    char addr[DDL__ADDR_BYTES]; /* the peer's listening address, for messages */
} tcp_link;

typedef struct tcp_state {
    uint32_t magic;            /* TCP_STATE_MAGIC once open() initialised the fds */
    int rank, world, timeout_ms;
    int failed;                /* a failure happened: close() sends ABORT, not BYE */
    int fail_status;           /* the first failure's status */
    int culprit;               /* the first rank found dead (-1: none), named in our ABORT */
    int listen_fd;
    ddl_log_fn log;
    void *log_ud;
    const char *token;         /* valid during open() only */
    size_t token_bytes;
    char job[DDL__JOB_BYTES];
    char listen_addr[DDL__ADDR_BYTES];
    char err[DDL_ERR_BYTES];
    tcp_pending pending[TCP_PENDING];
    tcp_link *links;           /* [world], inside the state memory */
    struct pollfd *pfd;        /* [world + TCP_PENDING + 1], inside the state memory */
    int *pfd_rank;             /* [world + TCP_PENDING + 1]: which link or slot each pfd is */
} tcp_state;

/* ---- shared helpers (tcp.c) ---- */

/* tcp__fail: record an error message on the state and return status. */
int tcp__fail(tcp_state *s, int status, const char *fmt, ...) DDL__PRINTF(3, 4);
/* tcp__io_full: read (writing 0) or write all n bytes of buf on a non-blocking fd before
 * deadline_ms. Returns DDL_OK, DDL_ETIMEDOUT, DDL_EPEER (closed or reset) or DDL_EIO. */
int tcp__io_full(int fd, void *buf, size_t n, int writing, int64_t deadline_ms);
/* tcp__tune: TCP_NODELAY and buffer sizes on a connected socket. */
void tcp__tune(int fd);
/* tcp__format_addr: "ip:port" or "[ip6]:port". */
struct sockaddr_storage;
void tcp__format_addr(const struct sockaddr_storage *ss, char out[DDL__ADDR_BYTES]);

/* ---- handshake (tcp_handshake.c, on transports/handshake.c) ---- */

/* tcp__accept_ranks: accept and authenticate connections on s->listen_fd until ranks lo..hi
 * all have links; take_addr: store each rank's advertised listening address (master
 * rendezvous). Impostors are refused and logged; the wait goes on until deadline_ms. */
int tcp__accept_ranks(tcp_state *s, int lo, int hi, int take_addr, int64_t deadline_ms);
/* tcp__greet: run the initiator's side of the handshake on fd, connected to rank `peer`. */
int tcp__greet(tcp_state *s, int fd, int peer, int64_t deadline_ms);

#endif
