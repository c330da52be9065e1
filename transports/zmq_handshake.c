/* zmq_handshake.c - the handshake of the ZeroMQ transport. On every DEALER -> ROUTER connection
 * both sides state protocol version, job id, rank and world size, exchange random nonces and
 * prove that they know the token with HMAC-SHA256 (as tcp_handshake.c), without ever sending
 * it. The ROUTER side runs up to ZQ_PENDING handshakes at once and, once the job runs, keeps
 * answering newcomers with a refusal, so an impostor is told why and the job is not disturbed.
 * It owns no sockets: it reads and writes those of zq_state. It must not trust any byte before
 * the proof checks out, nor accept a message whose size is not exactly ZQ_HS_BYTES. */
#ifdef DDL_WITH_ZMQ
#include "zmq_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <zmq.h>

/* ---- wire format ----
 * [0] "DDLZ"  [4] u32 type  [8] u32 version  [12] u32 rank  [16] u32 world  [20] u32 reason
 * [24] job[64]  [88] nonce[32]  [120] mac[32]  [152] addr[64]  = 216 bytes, little endian.
 * The address table (rank 0 to rank r, master rendezvous, after the handshake on that link):
 * [0] "DDLT" [4] u32 world, then world x 64-byte NUL-terminated "host:port". */

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16); p[3] = (unsigned char)(v >> 24);
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void hs_encode(const zq_hs *m, unsigned char out[ZQ_HS_BYTES])
{
    memset(out, 0, ZQ_HS_BYTES);
    memcpy(out, "DDLZ", 4);
    put32(out + 4, m->type); put32(out + 8, m->version); put32(out + 12, m->rank);
    put32(out + 16, m->world); put32(out + 20, m->reason);
    memcpy(out + 24, m->job, strnlen(m->job, ZQ_JOB_BYTES - 1));
    memcpy(out + 88, m->nonce, ZQ_NONCE_BYTES);
    memcpy(out + 120, m->mac, DDL__SHA256_BYTES);
    memcpy(out + 152, m->addr, strnlen(m->addr, ZQ_ADDR_BYTES - 1));
}

/* hs_decode: 0 if in holds a well-formed message (magic, known type, terminated strings). */
static int hs_decode(const unsigned char *in, size_t bytes, zq_hs *m)
{
    if (bytes != ZQ_HS_BYTES || memcmp(in, "DDLZ", 4) != 0 || in[24 + ZQ_JOB_BYTES - 1] != 0 ||
        in[152 + ZQ_ADDR_BYTES - 1] != 0)
        return -1;
    m->type = get32(in + 4); m->version = get32(in + 8); m->rank = get32(in + 12);
    m->world = get32(in + 16); m->reason = get32(in + 20);
    memcpy(m->job, in + 24, ZQ_JOB_BYTES);
    memcpy(m->nonce, in + 88, ZQ_NONCE_BYTES);
    memcpy(m->mac, in + 120, DDL__SHA256_BYTES);
    memcpy(m->addr, in + 152, ZQ_ADDR_BYTES);
    return m->type >= ZQ_HS_HELLO && m->type <= ZQ_HS_REFUSE ? 0 : -1;
}

static const char *reason_text(uint32_t r)
{
    switch (r) {
    case ZQ_R_VERSION: return "protocol version mismatch";
    case ZQ_R_JOB: return "job id mismatch";
    case ZQ_R_WORLD: return "world size mismatch";
    case ZQ_R_RANK: return "rank not expected here";
    case ZQ_R_DUPLICATE: return "duplicate rank (that rank is already connected)";
    case ZQ_R_TOKEN: return "wrong token";
    case ZQ_R_GARBAGE: return "not a ddl handshake";
    case ZQ_R_SILENT: return "silent too long";
    default: return "unknown reason";
    }
}

/* ---- proofs ---- */

static int random_bytes(unsigned char *p, size_t n)
{
    if (getrandom(p, n, 0) == (ssize_t)n)
        return 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t got = read(fd, p, n);
    close(fd);
    return got == (ssize_t)n ? 0 : -1;
}

/* hs_mac: HMAC-SHA256(token, "ddl-zmq-v1" | len job | job | nonce_c | nonce_a | rank_c | rank_a | dir),
 * c the connecting (DEALER) side, a the accepting (ROUTER) side, dir 'c' or 'a' for whose proof. */
static void hs_mac(const zq_state *s, const unsigned char *nonce_c, const unsigned char *nonce_a, int rank_c,
                   int rank_a, char dir, unsigned char out[DDL__SHA256_BYTES])
{
    unsigned char msg[10 + 4 + ZQ_JOB_BYTES + 2 * ZQ_NONCE_BYTES + 8 + 1], *p = msg;
    size_t jl = strnlen(s->job, ZQ_JOB_BYTES - 1);
    memcpy(p, "ddl-zmq-v1", 10); p += 10;
    put32(p, (uint32_t)jl); p += 4;
    memcpy(p, s->job, jl); p += jl;
    memcpy(p, nonce_c, ZQ_NONCE_BYTES); p += ZQ_NONCE_BYTES;
    memcpy(p, nonce_a, ZQ_NONCE_BYTES); p += ZQ_NONCE_BYTES;
    put32(p, (uint32_t)rank_c); p += 4;
    put32(p, (uint32_t)rank_a); p += 4;
    *p++ = (unsigned char)dir;
    ddl__hmac_sha256(s->token ? s->token : "", s->token_bytes, msg, (size_t)(p - msg), out);
}

static void hs_make(const zq_state *s, zq_hs *m, uint32_t type)
{
    memset(m, 0, sizeof *m);
    m->type = type;
    m->version = ZQ_PROTO_VERSION;
    m->rank = (uint32_t)s->rank;
    m->world = (uint32_t)s->world;
    memcpy(m->job, s->job, sizeof m->job);
}

/* ---- ROUTER side ---- */

/* router_reply: send m to the DEALER with routing id rid (never blocks: the ROUTER's HWM is 0). */
static void router_reply(zq_state *s, const unsigned char *rid, size_t rid_bytes, const zq_hs *m)
{
    unsigned char buf[ZQ_HS_BYTES];
    hs_encode(m, buf);
    if (zmq_send(s->router, rid, rid_bytes, ZMQ_SNDMORE | ZMQ_DONTWAIT) == (int)rid_bytes)
        (void)zmq_send(s->router, buf, sizeof buf, ZMQ_DONTWAIT);
}

static void pending_refuse(zq_state *s, zq_pending *p, uint32_t reason)
{
    zq_hs m;
    hs_make(s, &m, ZQ_HS_REFUSE);
    m.reason = reason;
    if (reason != ZQ_R_GARBAGE)
        router_reply(s, p->rid, p->rid_bytes, &m);
    const zq_hs *h = &p->hello;
    if (reason == ZQ_R_JOB)
        ddl__log(s->log, s->log_ud, DDL_LOG_WARN, "zmq: refused %s: job id mismatch (ours '%s', theirs '%s')",
                 p->from, s->job, h->job);
    else if (reason == ZQ_R_TOKEN)
        ddl__log(s->log, s->log_ud, DDL_LOG_WARN, "zmq: refused %s: wrong token for job %s (it claimed rank %u)",
                 p->from, s->job, h->rank);
    else
        ddl__log(s->log, s->log_ud, DDL_LOG_WARN,
                 "zmq: refused %s: %s (it claimed rank %u of %u, version %u; we are rank %d of %d)", p->from,
                 reason_text(reason), h->rank, h->world, h->version, s->rank, s->world);
    p->used = 0;
}

/* check_hello: 0 if the hello fits this job; dup also refuses ranks already connected (checked
 * after the proof, so an impostor learns that its token is wrong before anything else). */
static uint32_t check_hello(const zq_state *s, const zq_hs *h, int dup)
{
    if (h->type != ZQ_HS_HELLO)
        return ZQ_R_GARBAGE;
    if (h->version != ZQ_PROTO_VERSION)
        return ZQ_R_VERSION;
    if (strcmp(h->job, s->job) != 0)
        return ZQ_R_JOB;
    if (h->world != (uint32_t)s->world)
        return ZQ_R_WORLD;
    if (h->rank >= (uint32_t)s->world || h->rank == (uint32_t)s->rank)
        return ZQ_R_RANK;
    if (dup && (s->links[h->rank].rid_bytes || s->opened))
        return ZQ_R_DUPLICATE;
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
    if (random_bytes(p->nonce, ZQ_NONCE_BYTES) != 0) {
        p->used = 0;
        return;
    }
    zq_hs m;
    hs_make(s, &m, ZQ_HS_HELLO);
    memcpy(m.nonce, p->nonce, ZQ_NONCE_BYTES);
    router_reply(s, p->rid, p->rid_bytes, &m);
}

static void on_proof(zq_state *s, zq_pending *p, const zq_hs *m)
{
    int peer = (int)p->hello.rank;
    unsigned char want[DDL__SHA256_BYTES];
    hs_mac(s, p->hello.nonce, p->nonce, peer, s->rank, 'c', want);
    if (!ddl__ct_equal(want, m->mac, sizeof want)) {
        pending_refuse(s, p, ZQ_R_TOKEN);
        return;
    }
    uint32_t why = check_hello(s, &p->hello, 1); /* another connection may have won meanwhile */
    if (why) {
        pending_refuse(s, p, why);
        return;
    }
    zq_hs ok;
    hs_make(s, &ok, ZQ_HS_OK);
    hs_mac(s, p->hello.nonce, p->nonce, peer, s->rank, 'a', ok.mac);
    router_reply(s, p->rid, p->rid_bytes, &ok);
    zq_link *l = &s->links[peer];
    memcpy(l->rid, p->rid, p->rid_bytes);
    l->rid_bytes = p->rid_bytes;
    if (s->master_mode && s->rank == 0)
        memcpy(l->addr, p->hello.addr, ZQ_ADDR_BYTES);
    p->used = 0;
    ddl__log(s->log, s->log_ud, DDL_LOG_DEBUG, "zmq: rank %d: rank %d joined from %s", s->rank, peer, p->from);
}

/* router_one: one [rid][message] from the ROUTER; anything malformed is dropped unanswered. */
static void router_one(zq_state *s, const unsigned char *rid, size_t rid_bytes, const unsigned char *buf,
                       size_t bytes, const char *from)
{
    zq_hs m;
    if (hs_decode(buf, bytes, &m) != 0) {
        ddl__log(s->log, s->log_ud, DDL_LOG_WARN, "zmq: rank %d: dropped a message from %s that is not a ddl handshake",
                 s->rank, from);
        return;
    }
    zq_pending *p = pending_find(s, rid, rid_bytes, m.type == ZQ_HS_HELLO);
    if (!p) {
        ddl__log(s->log, s->log_ud, DDL_LOG_WARN, "zmq: rank %d: dropped a handshake message from %s (%s)", s->rank,
                 from, m.type == ZQ_HS_HELLO ? "too many at once" : "out of order");
        return;
    }
    if (m.type == ZQ_HS_HELLO) {
        memset(p, 0, sizeof *p);
        p->used = 1;
        p->deadline_ms = ddl__now_ms() + s->timeout_ms;
        memcpy(p->rid, rid, rid_bytes);
        p->rid_bytes = rid_bytes;
        p->hello = m;
        snprintf(p->from, sizeof p->from, "%s", from);
        on_hello(s, p);
    } else if (m.type == ZQ_HS_PROOF) {
        on_proof(s, p, &m);
    } else {
        pending_refuse(s, p, ZQ_R_GARBAGE);
    }
}

void zq__router_step(zq_state *s)
{
    if (!s->router)
        return;
    for (int budget = 0; budget < 4 * ZQ_PENDING + s->world; budget++) {
        unsigned char rid[ZQ_RID_BYTES], buf[ZQ_HS_BYTES];
        int n = zmq_recv(s->router, rid, sizeof rid, ZMQ_DONTWAIT);
        if (n < 0)
            return;
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        int k = zmq_msg_recv(&msg, s->router, ZMQ_DONTWAIT);
        char from[ZQ_ADDR_BYTES] = "an unknown peer";
        const char *ip = k >= 0 ? zmq_msg_gets(&msg, "Peer-Address") : NULL;
        if (ip)
            snprintf(from, sizeof from, "%s", ip);
        size_t bytes = k >= 0 ? zmq_msg_size(&msg) : 0;
        if (k >= 0 && bytes == ZQ_HS_BYTES)
            memcpy(buf, zmq_msg_data(&msg), ZQ_HS_BYTES);
        int more = k >= 0 && zmq_msg_more(&msg);
        zmq_msg_close(&msg);
        while (more) { /* a handshake is one frame: drop the rest */
            zmq_msg_init(&msg);
            more = zmq_msg_recv(&msg, s->router, ZMQ_DONTWAIT) >= 0 && zmq_msg_more(&msg);
            zmq_msg_close(&msg);
        }
        if (k >= 0 && n <= (int)sizeof rid)
            router_one(s, rid, (size_t)n, buf, bytes == ZQ_HS_BYTES ? bytes : 0, from);
    }
}

void zq__expire(zq_state *s)
{
    int64_t now = ddl__now_ms();
    for (int i = 0; i < ZQ_PENDING; i++)
        if (s->pending[i].used && now >= s->pending[i].deadline_ms)
            pending_refuse(s, &s->pending[i], ZQ_R_SILENT);
}

int zq__send_tables(zq_state *s)
{
    size_t bytes = 8 + (size_t)s->world * ZQ_ADDR_BYTES;
    memset(s->table, 0, bytes);
    memcpy(s->table, "DDLT", 4);
    put32(s->table + 4, (uint32_t)s->world);
    for (int j = 0; j < s->world; j++)
        memcpy(s->table + 8 + (size_t)j * ZQ_ADDR_BYTES, j == 0 ? s->addr : s->links[j].addr, ZQ_ADDR_BYTES);
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

static int send_dealer(zq_state *s, int j, const zq_hs *m)
{
    unsigned char buf[ZQ_HS_BYTES];
    hs_encode(m, buf);
    if (zmq_send(s->links[j].dealer, buf, sizeof buf, ZMQ_DONTWAIT) != (int)sizeof buf)
        return zq__fail(s, DDL_EIO, "rank %d: cannot queue a handshake message for rank %d at %s: %s", s->rank, j,
                        s->links[j].addr, zmq_strerror(errno));
    return DDL_OK;
}

int zq__send_hello(zq_state *s, int j)
{
    zq_hs m;
    hs_make(s, &m, ZQ_HS_HELLO);
    memcpy(m.addr, s->addr, ZQ_ADDR_BYTES);
    if (random_bytes(s->links[j].nonce_c, ZQ_NONCE_BYTES) != 0)
        return zq__fail(s, DDL_EIO, "rank %d: no random numbers for the handshake", s->rank);
    memcpy(m.nonce, s->links[j].nonce_c, ZQ_NONCE_BYTES);
    s->links[j].client = ZQ_C_HELLO;
    return send_dealer(s, j, &m);
}

static int refused(zq_state *s, int j, const zq_hs *m)
{
    const char *addr = s->links[j].addr;
    if (m->reason == ZQ_R_JOB)
        return zq__fail(s, DDL_EAUTH, "rank %d at %s refused the handshake: job id mismatch (ours '%s', theirs '%s')", j,
                        addr, s->job, m->job);
    if (m->reason == ZQ_R_TOKEN)
        return zq__fail(s, DDL_EAUTH, "rank %d at %s refused the handshake: wrong token for job '%s'", j, addr, s->job);
    return zq__fail(s, DDL_EAUTH, "rank %d at %s refused the handshake: %s (we are rank %d of %d)", j, addr,
                    reason_text(m->reason), s->rank, s->world);
}

/* client_hello: the ROUTER's hello must describe the rank we meant to reach, in our job. */
static int client_hello(zq_state *s, int j, const zq_hs *m)
{
    zq_link *l = &s->links[j];
    if (m->version != ZQ_PROTO_VERSION)
        return zq__fail(s, DDL_EAUTH, "%s speaks protocol version %u, we speak %d", l->addr, m->version,
                        ZQ_PROTO_VERSION);
    if (strcmp(m->job, s->job) != 0)
        return zq__fail(s, DDL_EAUTH, "%s belongs to job '%s', not ours ('%s')", l->addr, m->job, s->job);
    if (m->world != (uint32_t)s->world || m->rank != (uint32_t)j)
        return zq__fail(s, DDL_EAUTH, "%s is rank %u of %u, expected rank %d of %d", l->addr, m->rank, m->world, j,
                        s->world);
    memcpy(l->nonce_a, m->nonce, ZQ_NONCE_BYTES);
    zq_hs p;
    hs_make(s, &p, ZQ_HS_PROOF);
    hs_mac(s, l->nonce_c, l->nonce_a, s->rank, j, 'c', p.mac);
    l->client = ZQ_C_PROOF;
    return send_dealer(s, j, &p);
}

static int client_ok(zq_state *s, int j, const zq_hs *m)
{
    zq_link *l = &s->links[j];
    unsigned char want[DDL__SHA256_BYTES];
    hs_mac(s, l->nonce_c, l->nonce_a, s->rank, j, 'a', want);
    if (!ddl__ct_equal(want, m->mac, sizeof want))
        return zq__fail(s, DDL_EAUTH, "rank %d at %s did not prove that it knows the token of job '%s'", j, l->addr,
                        s->job);
    l->client = s->master_mode && j == 0 && s->rank != 0 ? ZQ_C_TABLE : ZQ_C_DONE;
    return DDL_OK;
}

/* client_table: rank 0's address table; our own entry and rank 0's are not taken from it. */
static int client_table(zq_state *s, const unsigned char *buf, size_t bytes)
{
    if (bytes != 8 + (size_t)s->world * ZQ_ADDR_BYTES || memcmp(buf, "DDLT", 4) != 0 ||
        get32(buf + 4) != (uint32_t)s->world)
        return zq__fail(s, DDL_EPROTO, "rank 0 at %s sent a bad address table (%zu bytes)", s->links[0].addr, bytes);
    for (int j = 1; j < s->world; j++) {
        const unsigned char *a = buf + 8 + (size_t)j * ZQ_ADDR_BYTES;
        if (a[ZQ_ADDR_BYTES - 1] != 0 || a[0] == 0)
            return zq__fail(s, DDL_EPROTO, "rank 0 at %s sent a bad address for rank %d", s->links[0].addr, j);
        if (j != s->rank)
            memcpy(s->links[j].addr, a, ZQ_ADDR_BYTES);
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
        zq_hs m;
        if (more)
            st = zq__fail(s, DDL_EPROTO, "rank %d at %s broke the handshake: a message of several parts", j, l->addr);
        else if (l->client == ZQ_C_TABLE)
            st = client_table(s, buf, bytes);
        else if (hs_decode(buf, bytes, &m) != 0)
            st = zq__fail(s, DDL_EPROTO, "rank %d at %s answered with something that is not a ddl handshake", j, l->addr);
        else if (m.type == ZQ_HS_REFUSE)
            st = refused(s, j, &m);
        else if (l->client == ZQ_C_HELLO && m.type == ZQ_HS_HELLO)
            st = client_hello(s, j, &m);
        else if (l->client == ZQ_C_PROOF && m.type == ZQ_HS_OK)
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
