/* zmq_handshake.c - the handshake of the ZeroMQ transport. On every DEALER -> ROUTER connection
 * both sides state protocol version, job id, rank and world size, exchange random nonces and
 * prove that they know the token with HMAC-SHA256 (as tcp_handshake.c), without ever sending
 * it. The ROUTER side runs up to ZQ_PENDING handshakes at once and, once the job runs, keeps
 * answering newcomers with a refusal, so an impostor is told why and the job is not disturbed.
 * It owns no sockets: it reads and writes those of zq_state. It must not trust any byte before
 * the proof checks out, nor accept a message whose size is not exactly DDL__HS_BYTES. */
#ifdef DDL_WITH_ZMQ
#include "zmq_impl.h"

#include <errno.h>
#include <string.h>
#include <zmq.h>

/* ---- wire format ----
 * Handshake messages are transports/handshake.c's, each one frame; zmq's start with "DDLZ" and its
 * proofs with "ddl-zmq-v1". The address table (rank 0 to rank r, master rendezvous, after the
 * handshake on that link): [0] "DDLT" [4] u32 world, then world x 64-byte NUL-terminated
 * "host:port". */

static const ddl__hs_proto zq_proto = {
    .name = "zmq", .magic = "DDLZ", .label = "ddl-zmq-v1", .version = ZQ_PROTO_VERSION,
    .duplicate = "duplicate rank (that rank is already connected)",
};

/* self: who we are in a handshake (the token is valid during open() only). */
static ddl__hs_self self(const zq_state *s)
{
    return (ddl__hs_self){.proto = &zq_proto, .rank = s->rank, .world = s->world, .job = s->job,
                          .token = s->token, .token_bytes = s->token_bytes};
}

/* ---- ROUTER side ---- */

/* router_reply: send m to the DEALER with routing id rid (never blocks: the ROUTER's HWM is 0). */
static void router_reply(zq_state *s, const unsigned char *rid, size_t rid_bytes, const ddl__hs_msg *m)
{
    unsigned char buf[DDL__HS_BYTES];
    ddl__hs_encode(&zq_proto, m, buf);
    if (zmq_send(s->router, rid, rid_bytes, ZMQ_SNDMORE | ZMQ_DONTWAIT) == (int)rid_bytes)
        (void)zmq_send(s->router, buf, sizeof buf, ZMQ_DONTWAIT);
}

static void pending_refuse(zq_state *s, zq_pending *p, uint32_t reason)
{
    ddl__hs_self me = self(s);
    ddl__hs_msg m;
    ddl__hs_make(&me, &m, DDL__HS_REFUSE);
    m.reason = reason;
    if (reason != DDL__HS_R_GARBAGE)
        router_reply(s, p->rid, p->rid_bytes, &m);
    ddl__hs_log_refusal(&me, s->log, s->log_ud, p->from, &p->hello, reason, 1); /* a slot always has a hello */
    p->used = 0;
}

/* check_hello: 0 if the hello fits this job; dup also refuses ranks already connected (checked
 * after the proof, so an impostor learns that its token is wrong before anything else). */
static uint32_t check_hello(const zq_state *s, const ddl__hs_msg *h, int dup)
{
    ddl__hs_self me = self(s);
    uint32_t why = ddl__hs_check_hello(&me, h);
    if (why)
        return why;
    if (h->rank >= (uint32_t)s->world || h->rank == (uint32_t)s->rank)
        return DDL__HS_R_RANK;
    if (dup && (s->links[h->rank].rid_bytes || s->opened))
        return DDL__HS_R_DUPLICATE;
    return 0;
}

static zq_pending *pending_find(zq_state *s, const unsigned char *rid, size_t rid_bytes, int take_free)
{
    zq_pending *free_slot = NULL;
    for (int i = 0; i < ZQ_PENDING; i++) {
        zq_pending *p = &s->pending[i];
        if (p->used && p->rid_bytes == rid_bytes && memcmp(p->rid, rid, rid_bytes) == 0)
            return p;
        if (!p->used && !free_slot)
            free_slot = p;
    }
    return take_free ? free_slot : NULL;
}

static void on_hello(zq_state *s, zq_pending *p)
{
    uint32_t why = check_hello(s, &p->hello, 0);
    if (why) {
        pending_refuse(s, p, why);
        return;
    }
    ddl__hs_self me = self(s);
    ddl__hs_msg m;
    if (ddl__hs_hello(&me, NULL, p->nonce, &m, NULL, 0) != DDL_OK) {
        p->used = 0;
        return;
    }
    router_reply(s, p->rid, p->rid_bytes, &m);
}

static void on_proof(zq_state *s, zq_pending *p, const ddl__hs_msg *m)
{
    ddl__hs_self me = self(s);
    int peer = (int)p->hello.rank;
    if (!ddl__hs_proof_ok(&me, &p->hello, p->nonce, m)) {
        pending_refuse(s, p, DDL__HS_R_TOKEN);
        return;
    }
    uint32_t why = check_hello(s, &p->hello, 1); /* another connection may have won meanwhile */
    if (why) {
        pending_refuse(s, p, why);
        return;
    }
    ddl__hs_msg ok;
    ddl__hs_ok(&me, &p->hello, p->nonce, &ok);
    router_reply(s, p->rid, p->rid_bytes, &ok);
    zq_link *l = &s->links[peer];
    memcpy(l->rid, p->rid, p->rid_bytes);
    l->rid_bytes = p->rid_bytes;
    if (s->master_mode && s->rank == 0)
        memcpy(l->addr, p->hello.addr, DDL__ADDR_BYTES);
    p->used = 0;
    ddl__log(s->log, s->log_ud, DDL_LOG_DEBUG, "zmq: rank %d: rank %d joined from %s", s->rank, peer, p->from);
}

/* router_one: one [rid][message] from the ROUTER; anything malformed is dropped unanswered. */
static void router_one(zq_state *s, const unsigned char *rid, size_t rid_bytes, const unsigned char *buf,
                       size_t bytes, const char *from)
{
    ddl__hs_msg m;
    if (ddl__hs_decode(&zq_proto, buf, bytes, &m) != 0) {
        ddl__log(s->log, s->log_ud, DDL_LOG_WARN, "zmq: rank %d: dropped a message from %s that is not a ddl handshake",
                 s->rank, from);
        return;
    }
    zq_pending *p = pending_find(s, rid, rid_bytes, m.type == DDL__HS_HELLO);
    if (!p) {
        ddl__log(s->log, s->log_ud, DDL_LOG_WARN, "zmq: rank %d: dropped a handshake message from %s (%s)", s->rank,
                 from, m.type == DDL__HS_HELLO ? "too many at once" : "out of order");
        return;
    }
    if (m.type == DDL__HS_HELLO) {
        memset(p, 0, sizeof *p);
        p->used = 1;
        p->deadline_ms = ddl__now_ms() + s->timeout_ms;
        memcpy(p->rid, rid, rid_bytes);
        p->rid_bytes = rid_bytes;
        p->hello = m;
        snprintf(p->from, sizeof p->from, "%s", from);
        on_hello(s, p);
    } else if (m.type == DDL__HS_PROOF) {
        on_proof(s, p, &m);
    } else {
        pending_refuse(s, p, DDL__HS_R_GARBAGE);
    }
}

void zq__router_step(zq_state *s)
{
    if (!s->router)
        return;
    for (int budget = 0; budget < 4 * ZQ_PENDING + s->world; budget++) {
        unsigned char rid[ZQ_RID_BYTES], buf[DDL__HS_BYTES];
        int n = zmq_recv(s->router, rid, sizeof rid, ZMQ_DONTWAIT);
        if (n < 0)
            return;
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        int k = zmq_msg_recv(&msg, s->router, ZMQ_DONTWAIT);
        char from[DDL__ADDR_BYTES] = "an unknown peer";
        const char *ip = k >= 0 ? zmq_msg_gets(&msg, "Peer-Address") : NULL;
        if (ip)
            snprintf(from, sizeof from, "%s", ip);
        size_t bytes = k >= 0 ? zmq_msg_size(&msg) : 0;
        if (k >= 0 && bytes == DDL__HS_BYTES)
            memcpy(buf, zmq_msg_data(&msg), DDL__HS_BYTES);
        int more = k >= 0 && zmq_msg_more(&msg);
        zmq_msg_close(&msg);
        while (more) { /* a handshake is one frame: drop the rest */
            zmq_msg_init(&msg);
            more = zmq_msg_recv(&msg, s->router, ZMQ_DONTWAIT) >= 0 && zmq_msg_more(&msg);
            zmq_msg_close(&msg);
        }
        if (k >= 0 && n <= (int)sizeof rid)
            router_one(s, rid, (size_t)n, buf, bytes == DDL__HS_BYTES ? bytes : 0, from);
    }
}

void zq__expire(zq_state *s)
{
    int64_t now = ddl__now_ms();
    for (int i = 0; i < ZQ_PENDING; i++)
        if (s->pending[i].used && now >= s->pending[i].deadline_ms)
            pending_refuse(s, &s->pending[i], DDL__HS_R_SILENT);
}

int zq__send_tables(zq_state *s)
{
    size_t bytes = 8 + (size_t)s->world * DDL__ADDR_BYTES;
    memset(s->table, 0, bytes);
    memcpy(s->table, "DDLT", 4);
    ddl__put_le(s->table + 4, (uint32_t)s->world, 4);
    for (int j = 0; j < s->world; j++)
        memcpy(s->table + 8 + (size_t)j * DDL__ADDR_BYTES, j == 0 ? s->addr : s->links[j].addr, DDL__ADDR_BYTES);
    for (int r = 1; r < s->world; r++) {
        zq_link *l = &s->links[r];
        if (zmq_send(s->router, l->rid, l->rid_bytes, ZMQ_SNDMORE | ZMQ_DONTWAIT) != (int)l->rid_bytes ||
            zmq_send(s->router, s->table, bytes, ZMQ_DONTWAIT) != (int)bytes)
            return zq__fail(s, DDL_EPEER, "rank 0: could not send the address table to rank %d at %s: %s", r,
                            l->addr, zmq_strerror(errno));
    }
    s->tables_sent = 1;
    return DDL_OK;
}

/* ---- DEALER side ---- */

static int send_dealer(zq_state *s, int j, const ddl__hs_msg *m)
{
    unsigned char buf[DDL__HS_BYTES];
    ddl__hs_encode(&zq_proto, m, buf);
    if (zmq_send(s->links[j].dealer, buf, sizeof buf, ZMQ_DONTWAIT) != (int)sizeof buf)
        return zq__fail(s, DDL_EIO, "rank %d: cannot queue a handshake message for rank %d at %s: %s", s->rank, j,
                        s->links[j].addr, zmq_strerror(errno));
    return DDL_OK;
}

int zq__send_hello(zq_state *s, int j)
{
    ddl__hs_self me = self(s);
    ddl__hs_msg m;
    char msg[DDL_ERR_BYTES];
    int st = ddl__hs_hello(&me, s->addr, s->links[j].nonce_c, &m, msg, sizeof msg);
    if (st != DDL_OK)
        return zq__fail(s, st, "%s", msg);
    s->links[j].client = ZQ_C_HELLO;
    return send_dealer(s, j, &m);
}

/* client_hello: the ROUTER's hello must describe the rank we meant to reach, in our job. */
static int client_hello(zq_state *s, int j, const ddl__hs_msg *m)
{
    zq_link *l = &s->links[j];
    ddl__hs_self me = self(s);
    ddl__hs_msg p;
    char msg[DDL_ERR_BYTES];
    int st = ddl__hs_proof(&me, j, l->addr, m, l->nonce_c, &p, msg, sizeof msg);
    if (st != DDL_OK)
        return zq__fail(s, st, "%s", msg);
    memcpy(l->nonce_a, m->nonce, DDL__NONCE_BYTES);
    l->client = ZQ_C_PROOF;
    return send_dealer(s, j, &p);
}

static int client_ok(zq_state *s, int j, const ddl__hs_msg *m)
{
    zq_link *l = &s->links[j];
    ddl__hs_self me = self(s);
    char msg[DDL_ERR_BYTES];
    int st = ddl__hs_check_ok(&me, j, l->addr, l->nonce_c, l->nonce_a, m, msg, sizeof msg);
    if (st != DDL_OK)
        return zq__fail(s, st, "%s", msg);
    l->client = s->master_mode && j == 0 && s->rank != 0 ? ZQ_C_TABLE : ZQ_C_DONE;
    return DDL_OK;
}

/* client_table: rank 0's address table; our own entry and rank 0's are not taken from it. */
static int client_table(zq_state *s, const unsigned char *buf, size_t bytes)
{
    if (bytes != 8 + (size_t)s->world * DDL__ADDR_BYTES || memcmp(buf, "DDLT", 4) != 0 ||
        ddl__get_le(buf + 4, 4) != (uint64_t)s->world)
        return zq__fail(s, DDL_EPROTO, "rank 0 at %s sent a bad address table (%zu bytes)", s->links[0].addr, bytes);
    for (int j = 1; j < s->world; j++) {
        const unsigned char *a = buf + 8 + (size_t)j * DDL__ADDR_BYTES;
        if (a[DDL__ADDR_BYTES - 1] != 0 || a[0] == 0)
            return zq__fail(s, DDL_EPROTO, "rank 0 at %s sent a bad address for rank %d", s->links[0].addr, j);
        if (j != s->rank)
            memcpy(s->links[j].addr, a, DDL__ADDR_BYTES);
    }
    s->links[0].client = ZQ_C_DONE;
    for (int j = 1; j < s->world; j++) {
        int st = j == s->rank ? DDL_OK : zq__connect(s, j);
        if (st != DDL_OK)
            return st;
    }
    return DDL_OK;
}

int zq__client_step(zq_state *s, int j)
{
    zq_link *l = &s->links[j];
    while (l->client != ZQ_C_DONE && l->client != ZQ_C_IDLE) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, l->dealer, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&msg);
            return DDL_OK;
        }
        const unsigned char *buf = zmq_msg_data(&msg);
        size_t bytes = zmq_msg_size(&msg);
        int st, more = zmq_msg_more(&msg);
        ddl__hs_self me = self(s);
        ddl__hs_msg m;
        char why[DDL_ERR_BYTES];
        if (more)
            st = zq__fail(s, DDL_EPROTO, "rank %d at %s broke the handshake: a message of several parts", j, l->addr);
        else if (l->client == ZQ_C_TABLE)
            st = client_table(s, buf, bytes);
        else if ((st = ddl__hs_reply(&me, j, l->addr, buf, bytes, &m, why, sizeof why)) != DDL_OK)
            st = zq__fail(s, st, "%s", why);
        else if (l->client == ZQ_C_HELLO && m.type == DDL__HS_HELLO)
            st = client_hello(s, j, &m);
        else if (l->client == ZQ_C_PROOF && m.type == DDL__HS_OK)
            st = client_ok(s, j, &m);
        else
            st = zq__fail(s, DDL_EPROTO, "rank %d at %s broke the handshake: message type %u at stage %d", j, l->addr,
                          m.type, l->client);
        zmq_msg_close(&msg);
        if (st != DDL_OK)
            return st;
    }
    return DDL_OK;
}

#else
typedef int ddl__zmq_handshake_not_built; /* ISO C wants a declaration in every file */
#endif
