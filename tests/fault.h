/* fault.h - a fault-injection transport for tests (header-only): a ddl_transport whose vtable
 * wraps a real one (shm, tcp, zmq, mpi) and, on one chosen rank, spoils one message that rank
 * sends: drops, delays, duplicates, truncates it or corrupts a byte of its header or payload.
 * Everything else goes through to the inner transport unchanged. Its state (which fault, on
 * which rank, on which message, and whether and where it struck) lives at the front of the
 * memory the core hands to open(), followed by the inner transport's state: state_bytes() is
 * the sum of both. The native all-reduce is not offered, so every byte passes exchange().
 *
 *   fault_transport ft;
 *   fault_plan p = {FAULT_DROP, 1, 3};   // rank 1 drops the 4th message it sends
 *   fault_transport_init(&ft, ddl_transport_find("tcp"), &p);
 *   cfg.transport = &ft.vt;              // then ddl_comm_create(&cfg, ...)
 *
 * What each fault means on the wire, and what the receiver should see:
 *   DROP        the message is not sent; the sender carries on as if it had been: the receiver
 *               waits and fails with DDL_ETIMEDOUT after timeout_ms.
 *   DELAY       the sender sleeps delay_ms before the exchange that carries it: below the
 *               timeout nothing changes; above it the receiver times out.
 *   DUPLICATE   the message is sent twice: the receiver takes the copy for its next message
 *               from that rank and fails with DDL_EMISMATCH (or DDL_EPROTO).
 *   CORRUPT_HEADER   byte `byte` of the 32-byte ddl header is flipped (xor 0xff): the receiver
 *               fails with DDL_EMISMATCH (or DDL_EPROTO for the magic and sender bytes).
 *   CORRUPT_PAYLOAD  byte `byte` of the payload is flipped before the transport sees it, so even
 *               a frame MAC (DDL_MAC=1) covers the spoiled bytes: the receiver computes with the
 *               bad value and returns DDL_OK. Tests use it to show exactly that; bytes altered
 *               on the wire are tests/test_mac.sh's.
 *   TRUNCATE    the payload is sent `cut` bytes short (the header still says the full count):
 *               the receiving transport reports another length, the core DDL_EMISMATCH.
 * TRUNCATE and CORRUPT_PAYLOAD need a payload: they strike the first non-empty message from
 * number `nth` on. The payload of CORRUPT_PAYLOAD is copied (up to FAULT_COPY_BYTES) so the
 * caller's buffer is never written. Include after ddl.h; only for tests (it sleeps, and it
 * keeps the plan in the caller's fault_transport). */
#ifndef DDL_TEST_FAULT_H
#define DDL_TEST_FAULT_H
#include "ddl.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum {
    FAULT_NONE = 0,
    FAULT_DROP,
    FAULT_DELAY,
    FAULT_DUPLICATE,
    FAULT_CORRUPT_HEADER,
    FAULT_CORRUPT_PAYLOAD,
    FAULT_TRUNCATE
};

#define FAULT_COPY_BYTES ((size_t)1 << 20) /* largest payload CORRUPT_PAYLOAD can spoil */

/* fault_plan: which fault, on which rank, on which message it sends (counted from 0). */
typedef struct fault_plan {
    int kind;      /* FAULT_* */
    int rank;      /* the rank whose messages are spoiled */
    long nth;      /* the message number (sends of that rank, from 0) */
    int delay_ms;  /* DELAY: how long */
    int byte;      /* CORRUPT_*: offset in the header (0..31) or the payload (clamped) */
    size_t cut;    /* TRUNCATE: payload bytes left out (0: 1; clamped to the payload) */
} fault_plan;

/* fault_state: at the front of the transport state; the inner state follows at inner_off. */
typedef struct fault_state {
    const ddl_transport *inner;
    fault_plan plan;
    int rank;          /* this process's rank */
    long sent;         /* messages this rank has sent so far */
    int hit;           /* 1 once the fault struck */
    long hit_msg;      /* the number of the message it struck */
    int hit_to;        /* the rank that message went to */
    size_t inner_off;  /* where the inner state starts */
    unsigned char *copy; /* CORRUPT_PAYLOAD: FAULT_COPY_BYTES after this struct, else NULL */
    char err[160];     /* the wrapper's own failure, if any */
} fault_state;

/* fault_transport: the vtable (first, so cfg->transport leads here) and the plan. Owned by the
 * test; it must outlive every comm opened over it. */
typedef struct fault_transport {
    ddl_transport vt;
    const ddl_transport *inner;
    fault_plan plan;
    fault_state *live; /* the state of the last comm opened over it, for reports */
    char name[32];
} fault_transport;

static inline size_t fault_align(size_t n) { return (n + DDL_ALIGN - 1) & ~(size_t)(DDL_ALIGN - 1); }

static inline fault_transport *fault_of(const ddl_comm_config *cfg)
{
    return (fault_transport *)(uintptr_t)cfg->transport; /* vt is the first member */
}

static inline void *fault_inner(void *state)
{
    fault_state *f = (fault_state *)state;
    return (unsigned char *)state + f->inner_off;
}

static inline size_t fault_own_bytes(const fault_plan *p)
{
    return fault_align(sizeof(fault_state)) + (p->kind == FAULT_CORRUPT_PAYLOAD ? FAULT_COPY_BYTES : 0);
}

/* ---- the vtable ---- */

static size_t fault_state_bytes(const ddl_comm_config *cfg)
{
    fault_transport *ft = fault_of(cfg);
    ddl_comm_config in = *cfg;
    in.transport = ft->inner;
    return fault_own_bytes(&ft->plan) + ft->inner->state_bytes(&in);
}

static int fault_open(void *state, const ddl_comm_config *cfg)
{
    fault_transport *ft = fault_of(cfg);
    fault_state *f = (fault_state *)state;
    ddl_comm_config in = *cfg;
    in.transport = ft->inner;
    f->inner = ft->inner;
    f->plan = ft->plan;
    f->rank = cfg->rank;
    f->hit_to = -1;
    f->hit_msg = -1;
    f->inner_off = fault_own_bytes(&ft->plan);
    f->copy = ft->plan.kind == FAULT_CORRUPT_PAYLOAD ? (unsigned char *)state + fault_align(sizeof *f) : NULL;
    ft->live = f;
    return f->inner->open(fault_inner(state), &in);
}

static void fault_close(void *state)
{
    fault_state *f = (fault_state *)state;
    if (f->inner)
        f->inner->close(fault_inner(state));
}

static inline void fault_sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {
    }
}

/* fault_strikes: does the fault hit this message (number f->sent, send_bytes of payload)? */
static inline int fault_strikes(const fault_state *f, size_t send_bytes)
{
    const fault_plan *p = &f->plan;
    if (p->kind == FAULT_NONE || f->hit || f->rank != p->rank || f->sent < p->nth)
        return 0;
    if ((p->kind == FAULT_TRUNCATE || p->kind == FAULT_CORRUPT_PAYLOAD) && send_bytes == 0)
        return 0; /* nothing to cut or spoil: wait for a message with a payload */
    return 1;
}

static int fault_exchange(void *state, int to, const void *send_hdr, const void *send_buf, size_t send_bytes,
                          int from, void *recv_hdr, void *recv_buf, size_t recv_bytes, int timeout_ms)
{
    fault_state *f = (fault_state *)state;
    void *in = fault_inner(state);
    int strike = to >= 0 && fault_strikes(f, send_bytes);
    unsigned char hdr[DDL_HEADER_BYTES];
    if (to >= 0)
        f->sent++;
    if (!strike)
        return f->inner->exchange(in, to, send_hdr, send_buf, send_bytes, from, recv_hdr, recv_buf, recv_bytes,
                                  timeout_ms);
    f->hit = 1, f->hit_msg = f->sent - 1, f->hit_to = to;
    const fault_plan *p = &f->plan;
    switch (p->kind) {
    case FAULT_DROP:
        if (from < 0)
            return DDL_OK;
        return f->inner->exchange(in, -1, NULL, NULL, 0, from, recv_hdr, recv_buf, recv_bytes, timeout_ms);
    case FAULT_DELAY:
        fault_sleep_ms(p->delay_ms);
        break;
    case FAULT_DUPLICATE: {
        int st = f->inner->exchange(in, to, send_hdr, send_buf, send_bytes, from, recv_hdr, recv_buf, recv_bytes,
                                    timeout_ms);
        if (st != DDL_OK)
            return st;
        return f->inner->exchange(in, to, send_hdr, send_buf, send_bytes, -1, NULL, NULL, 0, timeout_ms);
    }
    case FAULT_CORRUPT_HEADER:
        memcpy(hdr, send_hdr, sizeof hdr);
        hdr[(unsigned)p->byte % DDL_HEADER_BYTES] ^= 0xff;
        send_hdr = hdr;
        break;
    case FAULT_CORRUPT_PAYLOAD:
        if (send_bytes > FAULT_COPY_BYTES) {
            snprintf(f->err, sizeof f->err, "fault: rank %d cannot corrupt a payload of %zu bytes (limit %zu)",
                     f->rank, send_bytes, FAULT_COPY_BYTES);
            return DDL_EINVAL;
        }
        memcpy(f->copy, send_buf, send_bytes);
        f->copy[(size_t)p->byte < send_bytes ? (size_t)p->byte : send_bytes - 1] ^= 0xff;
        send_buf = f->copy;
        break;
    case FAULT_TRUNCATE: {
        size_t cut = p->cut ? p->cut : 1;
        send_bytes -= cut < send_bytes ? cut : send_bytes;
        break;
    }
    default: break;
    }
    return f->inner->exchange(in, to, send_hdr, send_buf, send_bytes, from, recv_hdr, recv_buf, recv_bytes,
                              timeout_ms);
}

static const char *fault_error(const void *state)
{
    const fault_state *f = (const fault_state *)state;
    if (f->err[0] || !f->inner || !f->inner->error)
        return f->err;
    return f->inner->error((const unsigned char *)state + f->inner_off);
}

static const char *fault_peer_address(const void *state, int r)
{
    const fault_state *f = (const fault_state *)state;
    if (!f->inner || !f->inner->peer_address)
        return NULL;
    return f->inner->peer_address((const unsigned char *)state + f->inner_off, r);
}

static void fault_interrupt(void *state, int culprit)
{
    fault_state *f = (fault_state *)state;
    if (f->inner && f->inner->version >= 2 && f->inner->interrupt)
        f->inner->interrupt((unsigned char *)state + f->inner_off, culprit);
}

/* fault_transport_init: a wrapper of `inner` applying `plan`. */
static inline void fault_transport_init(fault_transport *ft, const ddl_transport *inner, const fault_plan *plan)
{
    memset(ft, 0, sizeof *ft);
    ft->inner = inner;
    ft->plan = *plan;
    snprintf(ft->name, sizeof ft->name, "fault(%s)", inner->name);
    ft->vt.version = DDL_TRANSPORT_VERSION;
    ft->vt.name = ft->name;
    ft->vt.state_bytes = fault_state_bytes;
    ft->vt.open = fault_open;
    ft->vt.close = fault_close;
    ft->vt.exchange = fault_exchange;
    ft->vt.allreduce = NULL; /* a native all-reduce would pass by the faults */
    ft->vt.error = fault_error;
    ft->vt.peer_address = inner->peer_address ? fault_peer_address : NULL;
    ft->vt.interrupt = fault_interrupt;
}

/* fault_kind_name: "drop", "delay", ... for messages. */
static inline const char *fault_kind_name(int kind)
{
    static const char *const names[] = {"none", "drop", "delay", "duplicate", "corrupt-header", "corrupt-payload",
                                        "truncate"};
    return kind >= 0 && kind <= FAULT_TRUNCATE ? names[kind] : "?";
}

#endif
