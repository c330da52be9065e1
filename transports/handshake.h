/* handshake.h - private to the networked transports (transports/tcp*.c, transports/zmq*.c): the
 * handshake both run before they trust a peer, the "host:port" text both rendezvous with, and
 * the prefix both put before every message.
 * Pure functions over bytes and strings: no sockets, no allocation, no state. The transports
 * differ only in what ddl__hs_proto holds (magic, proof label, version, log prefix); which
 * ranks are welcome, and how messages travel, stays theirs. Not API. */
#ifndef DDL_HANDSHAKE_H
#define DDL_HANDSHAKE_H
#include "core/impl.h"

/* ---- SHA-256 and HMAC (transports/sha256.c), for transport handshakes ---- */
#define DDL__SHA256_BYTES 32
/* ddl__sha256: out = SHA-256 of data[bytes]. */
void ddl__sha256(const void *data, size_t bytes, unsigned char out[DDL__SHA256_BYTES]);
/* ddl__hmac_sha256: out = HMAC-SHA256 with key[key_bytes] of msg[msg_bytes] (RFC 2104). */
void ddl__hmac_sha256(const void *key, size_t key_bytes, const void *msg, size_t msg_bytes,
                      unsigned char out[DDL__SHA256_BYTES]);
/* ddl__ct_equal: 1 if a and b hold the same bytes; time does not depend on where they differ. */
int ddl__ct_equal(const void *a, const void *b, size_t bytes);

#define DDL__ADDR_BYTES 64  /* "host:port" including the NUL; longer addresses are refused */
#define DDL__JOB_BYTES 64   /* job id including the NUL */
#define DDL__NONCE_BYTES 32 /* random bytes each side contributes to a handshake */
#define DDL__HS_BYTES 216   /* every handshake message has exactly this size */

/* Handshake message types and refusal reasons (on the wire: never renumber). */
enum { DDL__HS_HELLO = 1, DDL__HS_PROOF = 2, DDL__HS_OK = 3, DDL__HS_REFUSE = 4 };
enum {
    DDL__HS_R_VERSION = 1, DDL__HS_R_JOB = 2, DDL__HS_R_WORLD = 3, DDL__HS_R_RANK = 4,
    DDL__HS_R_DUPLICATE = 5, DDL__HS_R_TOKEN = 6, DDL__HS_R_GARBAGE = 7, DDL__HS_R_SILENT = 8
};

/* What tells one transport's handshake from another's. */
typedef struct ddl__hs_proto {
    const char *name;      /* "tcp": the prefix of its log lines */
    const char *magic;     /* the 4 bytes every message starts with: "DDLH" (tcp), "DDLZ" (zmq) */
    const char *label;     /* what every proof's text starts with: "ddl-v1", "ddl-zmq-v1" */
    uint32_t version;      /* the protocol version every message states */
    const char *duplicate; /* how the reason DDL__HS_R_DUPLICATE reads */
} ddl__hs_proto;

/* One handshake message, decoded. Strings are NUL-terminated after decoding. */
typedef struct ddl__hs_msg {
    uint32_t type, version, rank, world, reason;
    char job[DDL__JOB_BYTES];
    unsigned char nonce[DDL__NONCE_BYTES];
    unsigned char mac[DDL__SHA256_BYTES];
    char addr[DDL__ADDR_BYTES]; /* HELLO: the sender's listening address (master rendezvous) */
} ddl__hs_msg;

/* Our side of a handshake. The strings are borrowed; token is valid while the handshake runs
 * (NULL: the empty token). */
typedef struct ddl__hs_self {
    const ddl__hs_proto *proto;
    int rank, world;
    const char *job;
    const char *token;
    size_t token_bytes;
} ddl__hs_self;

/* ---- messages ---- */

/* ddl__hs_encode: m as the DDL__HS_BYTES bytes of the wire. */
void ddl__hs_encode(const ddl__hs_proto *p, const ddl__hs_msg *m, unsigned char out[DDL__HS_BYTES]);
/* ddl__hs_decode: 0 if in[bytes] is a well-formed message of protocol p (exact size, magic,
 * known type, terminated strings) and *m holds it; -1 otherwise. Reads no byte past bytes. */
int ddl__hs_decode(const ddl__hs_proto *p, const unsigned char *in, size_t bytes, ddl__hs_msg *m);
/* ddl__hs_make: a message of `type` from us, other fields zero. */
void ddl__hs_make(const ddl__hs_self *me, ddl__hs_msg *m, uint32_t type);
/* ddl__hs_reason_text: a refusal reason in words. */
const char *ddl__hs_reason_text(const ddl__hs_proto *p, uint32_t reason);

/* ---- accepting side ---- */

/* ddl__hs_check_hello: 0 if h is a HELLO of our version, job and world size, else the reason to
 * refuse it. Which ranks are welcome is the transport's to check after this. */
uint32_t ddl__hs_check_hello(const ddl__hs_self *me, const ddl__hs_msg *h);
/* ddl__hs_hello: our HELLO in *out with a fresh nonce, also copied to nonce[]; addr (may be
 * NULL) is our listening address. DDL_OK, or DDL_EIO without random numbers (message in err). */
int ddl__hs_hello(const ddl__hs_self *me, const char *addr, unsigned char nonce[DDL__NONCE_BYTES], ddl__hs_msg *out,
                  char *err, size_t err_bytes);
/* ddl__hs_proof_ok: 1 if proof carries the connecting side's proof for its hello and our nonce_a. */
int ddl__hs_proof_ok(const ddl__hs_self *me, const ddl__hs_msg *hello, const unsigned char *nonce_a,
                     const ddl__hs_msg *proof);
/* ddl__hs_ok: our OK to the rank that sent hello, with our proof for it and nonce_a. */
void ddl__hs_ok(const ddl__hs_self *me, const ddl__hs_msg *hello, const unsigned char *nonce_a, ddl__hs_msg *out);
/* ddl__hs_log_refusal: log (warning) that we refused `from` for reason; claims: h holds what it
 * claimed in its hello (else only the job id and rank, and only for a job or token refusal). */
void ddl__hs_log_refusal(const ddl__hs_self *me, ddl_log_fn log, void *log_ud, const char *from,
                         const ddl__hs_msg *h, uint32_t reason, int claims);

/* ---- connecting side: we reach rank `peer` at addr (for messages) ---- */

/* ddl__hs_reply: in[bytes], the peer's answer, in *m: DDL_OK, DDL_EPROTO if it is not a
 * handshake, DDL_EAUTH with the reason if it is a refusal (message in err). Its type is the
 * caller's to check. */
int ddl__hs_reply(const ddl__hs_self *me, int peer, const char *addr, const unsigned char *in, size_t bytes,
                  ddl__hs_msg *m, char *err, size_t err_bytes);
/* ddl__hs_proof: the acceptor's hello must be rank `peer` of our job and world size (else
 * DDL_EAUTH, message in err); then *out (may be hello) is our PROOF for nonce_c (ours) and hello's nonce. */
int ddl__hs_proof(const ddl__hs_self *me, int peer, const char *addr, const ddl__hs_msg *hello,
                  const unsigned char *nonce_c, ddl__hs_msg *out, char *err, size_t err_bytes);
/* ddl__hs_check_ok: the acceptor's OK must carry its proof for nonce_c and nonce_a: DDL_OK, or
 * DDL_EAUTH with a message in err. */
int ddl__hs_check_ok(const ddl__hs_self *me, int peer, const char *addr, const unsigned char *nonce_c,
                     const unsigned char *nonce_a, const ddl__hs_msg *ok, char *err, size_t err_bytes);

/* ---- addresses ---- */

/* ddl__split_addr: "host:port" or "[v6]:port" (under DDL__ADDR_BYTES) into host, brackets
 * removed, and port; 0 on success, -1 if it is not of that form. */
int ddl__split_addr(const char *text, char host[DDL__ADDR_BYTES], int *port);
/* ddl__parse_peers: the comma-separated list peers ("h:p,h:p,...", one per rank) into world
 * strings of DDL__ADDR_BYTES, the first at addr0 and each next one stride bytes further.
 * DDL_OK, or DDL_EINVAL with a message in err (rank: ours, for it). */
int ddl__parse_peers(const char *peers, int rank, int world, char *addr0, size_t stride, char *err,
                     size_t err_bytes);

/* ---- frames ---- */

#define DDL__FRAME_PREFIX (16 + DDL_HEADER_BYTES)
/* ddl__frame_prefix: [u32 magic][u32 flags][u64 payload bytes][32-byte header, zero if hdr is
 * NULL], little endian: what tcp and zmq send before every payload, each with its own magic. */
void ddl__frame_prefix(unsigned char out[DDL__FRAME_PREFIX], uint32_t magic, uint32_t flags, uint64_t bytes,
                       const void *hdr);

#endif
