/* net_handshake.c - the handshake the network transports (tcp, zmq) run on every connection
 * before they trust it: both sides state protocol version, job id, rank and world size,
 * exchange random nonces and prove that they know the token with HMAC-SHA256, without ever
 * sending it. It owns the wire format, the proofs and both sides' steps, as functions from the
 * message that arrived to the one to send; it touches no socket: the transports move the
 * bytes, keep the connections and decide whom to answer. It must not trust a byte before the
 * proof checks out, nor read past the fixed sizes. */
#include "net.h"

#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* ---- wire format ----
 * [0] magic[4]  [4] u32 type  [8] u32 version  [12] u32 rank  [16] u32 world  [20] u32 reason
 * [24] job[64]  [88] nonce[32]  [120] mac[32]  [152] addr[64]  = 216 bytes, little endian.
 * The magic is the transport's ("DDLH" tcp, "DDLZ" zmq), so one never takes the other's.
 * The accepting side's answers echo the connecting side's nonce (its HELLO in the mac field,
 * its OK in the nonce field), so that a side which greeted again (zmq, after a connection
 * dropped) tells an answer to its last HELLO from one to an earlier HELLO. */

void ddl__hs_encode(const ddl__net_proto *p, const ddl__hs_msg *m, unsigned char out[DDL__HS_BYTES])
{
    memset(out, 0, DDL__HS_BYTES);
    memcpy(out, p->hs_magic, 4);
    ddl__put_le(out + 4, m->type, 4); ddl__put_le(out + 8, m->version, 4); ddl__put_le(out + 12, m->rank, 4);
    ddl__put_le(out + 16, m->world, 4); ddl__put_le(out + 20, m->reason, 4);
    memcpy(out + 24, m->job, strnlen(m->job, DDL__JOB_BYTES - 1));
    memcpy(out + 88, m->nonce, DDL__NONCE_BYTES);
    memcpy(out + 120, m->mac, DDL__SHA256_BYTES);
    memcpy(out + 152, m->addr, strnlen(m->addr, DDL__ADDR_BYTES - 1));
}

int ddl__hs_decode(const ddl__net_proto *p, const unsigned char *in, size_t bytes, ddl__hs_msg *m)
{
    if (bytes != DDL__HS_BYTES || memcmp(in, p->hs_magic, 4) != 0 || in[24 + DDL__JOB_BYTES - 1] != 0 ||
        in[152 + DDL__ADDR_BYTES - 1] != 0)
        return -1;
    m->type = (uint32_t)ddl__get_le(in + 4, 4); m->version = (uint32_t)ddl__get_le(in + 8, 4);
    m->rank = (uint32_t)ddl__get_le(in + 12, 4); m->world = (uint32_t)ddl__get_le(in + 16, 4);
    m->reason = (uint32_t)ddl__get_le(in + 20, 4);
    memcpy(m->job, in + 24, DDL__JOB_BYTES);
    memcpy(m->nonce, in + 88, DDL__NONCE_BYTES);
    memcpy(m->mac, in + 120, DDL__SHA256_BYTES);
    memcpy(m->addr, in + 152, DDL__ADDR_BYTES);
    return m->type >= DDL__HS_HELLO && m->type <= DDL__HS_REFUSE ? 0 : -1;
}

/* make: a message of `type` from us, other fields zero. */
static void make(const ddl__net *n, ddl__hs_msg *m, uint32_t type)
{
    memset(m, 0, sizeof *m);
    m->type = type;
    m->version = n->proto->version;
    m->rank = (uint32_t)n->rank;
    m->world = (uint32_t)n->world;
    memcpy(m->job, n->job, strnlen(n->job, DDL__JOB_BYTES - 1));
}

static const char *reason_text(const ddl__net_proto *p, uint32_t reason)
{
    switch (reason) {
    case DDL__HS_R_VERSION: return "protocol version mismatch";
    case DDL__HS_R_JOB: return "job id mismatch";
    case DDL__HS_R_WORLD: return "world size mismatch";
    case DDL__HS_R_RANK: return "rank not expected here";
    case DDL__HS_R_DUPLICATE: return p->duplicate;
    case DDL__HS_R_TOKEN: return "wrong token";
    case DDL__HS_R_GARBAGE: return "not a ddl handshake";
    case DDL__HS_R_SILENT: return "silent too long";
    case DDL__HS_R_MAC: return "frame MACs on one side only (set DDL_MAC alike on every rank)";
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

/* hello: our HELLO with a fresh nonce, also kept in nonce[]; addr (may be NULL) is where we
 * listen. 0, or -1 without random numbers. */
static int hello(const ddl__net *n, const char *addr, unsigned char nonce[DDL__NONCE_BYTES], ddl__hs_msg *out)
{
    make(n, out, DDL__HS_HELLO);
    if (addr)
        memcpy(out->addr, addr, strnlen(addr, DDL__ADDR_BYTES - 1));
    if (random_bytes(nonce, DDL__NONCE_BYTES) != 0)
        return -1;
    memcpy(out->nonce, nonce, DDL__NONCE_BYTES);
    out->reason = (uint32_t)n->mac; /* a HELLO's reason field: 1 if we MAC our frames */
    return 0;
}

/* mac: HMAC-SHA256(token, label | len job | job | nonce_c | nonce_a | rank_c | rank_a | dir),
 * c the connecting side, a the accepting side, dir 'c' for the proof c sends, 'a' for a's. */
static void mac(const ddl__net *n, const unsigned char *nonce_c, const unsigned char *nonce_a, int rank_c, int rank_a,
                char dir, unsigned char out[DDL__SHA256_BYTES])
{
    unsigned char msg[32 + 4 + DDL__JOB_BYTES + 2 * DDL__NONCE_BYTES + 8 + 1], *p = msg;
    size_t ll = strnlen(n->proto->label, 32), jl = strnlen(n->job, DDL__JOB_BYTES - 1);
    memcpy(p, n->proto->label, ll); p += ll;
    ddl__put_le(p, (uint32_t)jl, 4); p += 4;
    memcpy(p, n->job, jl); p += jl;
    memcpy(p, nonce_c, DDL__NONCE_BYTES); p += DDL__NONCE_BYTES;
    memcpy(p, nonce_a, DDL__NONCE_BYTES); p += DDL__NONCE_BYTES;
    ddl__put_le(p, (uint32_t)rank_c, 4); p += 4;
    ddl__put_le(p, (uint32_t)rank_a, 4); p += 4;
    *p++ = (unsigned char)dir;
    ddl__hmac_sha256(n->token ? n->token : "", n->token_bytes, msg, (size_t)(p - msg), out);
}

/* link_keys: the frame MAC keys of the link a handshake just made with q (c connected, a accepted).
 * We send on a link the other rank made (we accepted) and receive on the one we made; on tcp the
 * one link carries both ways. */
static void link_keys(ddl__net *n, ddl__net_peer *q, const unsigned char *nonce_c, const unsigned char *nonce_a,
                      int rank_c, int rank_a, int we_accepted)
{
    unsigned char key[DDL__SHA256_BYTES];
    ddl__mac_link_key(n, nonce_c, nonce_a, rank_c, rank_a, key);
    if (we_accepted || n->proto->two_way_links) {
        memcpy(q->tx_key, key, sizeof q->tx_key);
        q->tx_dir = we_accepted ? 'a' : 'c';
        q->tx_frames = 0;
    }
    if (!we_accepted || n->proto->two_way_links) {
        memcpy(q->rx_key, key, sizeof q->rx_key);
        q->rx_dir = we_accepted ? 'c' : 'a';
        q->rx_frames = 0;
    }
}

/* ---- accepting side ---- */

/* check_hello: 0 if h is a HELLO of our version and job, else the reason to refuse it: all we
 * tell a peer that has not proved itself, as its claims are wrong or not. */
static uint32_t check_hello(const ddl__net *n, const ddl__hs_msg *h)
{
    if (h->type != DDL__HS_HELLO)
        return DDL__HS_R_GARBAGE;
    if (h->version != n->proto->version)
        return DDL__HS_R_VERSION;
    if (strcmp(h->job, n->job) != 0)
        return DDL__HS_R_JOB;
    if (h->reason != (uint32_t)n->mac)
        return DDL__HS_R_MAC;
    return 0;
}

/* check_claims: 0 if a peer that proved itself claimed our world size and a rank lo..hi other
 * than ours that has not joined yet, else the reason to refuse it. */
static uint32_t check_claims(const ddl__net *n, const ddl__hs_msg *h, int lo, int hi)
{
    if (h->world != (uint32_t)n->world)
        return DDL__HS_R_WORLD;
    if (h->rank < (uint32_t)lo || h->rank > (uint32_t)hi || h->rank == (uint32_t)n->rank)
        return DDL__HS_R_RANK;
    if (n->peers[h->rank].joined)
        return DDL__HS_R_DUPLICATE;
    return 0;
}

static int refuse(ddl__hs_msg *reply, uint32_t reason)
{
    reply->reason = reason;
    return DDL__ACCEPT_REFUSE;
}

int ddl__net_accept(ddl__net *n, ddl__net_pending *p, const ddl__hs_msg *m, int lo, int hi, ddl__hs_msg *reply)
{
    if (p->stage == DDL__HS_HELLO) {
        p->hello = *m;
        uint32_t why = check_hello(n, m);
        if (why)
            return refuse(reply, why);
        if (hello(n, NULL, p->nonce, reply) != 0) {
            ddl__log(n->log, n->log_ud, DDL_LOG_ERROR, "%s: no random numbers for a handshake with %s", n->proto->name,
                     p->from);
            return DDL__ACCEPT_DROP;
        }
        reply->world = m->world; /* ours is told only to a peer that proved itself, in no message */
        memcpy(reply->mac, m->nonce, DDL__NONCE_BYTES); /* the HELLO this answers */
        p->stage = DDL__HS_PROOF;
        return DDL__ACCEPT_REPLY;
    }
    if (m->type != DDL__HS_PROOF)
        return refuse(reply, DDL__HS_R_GARBAGE);
    unsigned char want[DDL__SHA256_BYTES];
    mac(n, p->hello.nonce, p->nonce, (int)p->hello.rank, n->rank, 'c', want);
    if (!ddl__ct_equal(want, m->mac, sizeof want))
        return refuse(reply, DDL__HS_R_TOKEN);
    uint32_t why = check_claims(n, &p->hello, lo, hi); /* another connection may have won meanwhile */
    if (why)
        return refuse(reply, why);
    make(n, reply, DDL__HS_OK);
    memcpy(reply->nonce, p->hello.nonce, DDL__NONCE_BYTES); /* the HELLO this answers */
    mac(n, p->hello.nonce, p->nonce, (int)p->hello.rank, n->rank, 'a', reply->mac);
    return DDL__ACCEPT_JOINED;
}

void ddl__net_join(ddl__net *n, const ddl__net_pending *p, int take_addr)
{
    ddl__net_peer *peer = &n->peers[p->hello.rank];
    peer->joined = 1;
    link_keys(n, peer, p->hello.nonce, p->nonce, (int)p->hello.rank, n->rank, 1);
    if (take_addr)
        memcpy(peer->addr, p->hello.addr[0] ? p->hello.addr : p->from, DDL__ADDR_BYTES);
    ddl__log(n->log, n->log_ud, DDL_LOG_DEBUG, "%s: rank %d: rank %u joined from %s", n->proto->name, n->rank,
             p->hello.rank, p->from);
}

void ddl__net_refusal(const ddl__net *n, const ddl__net_pending *p, uint32_t reason, int claims, ddl__hs_msg *out)
{
    const char *name = n->proto->name;
    const ddl__hs_msg *h = &p->hello;
    memset(out, 0, sizeof *out); /* the reason only: nothing of the job for who may be a stranger */
    out->type = DDL__HS_REFUSE;
    out->version = n->proto->version;
    out->reason = reason;
    if (reason == DDL__HS_R_JOB)
        ddl__log(n->log, n->log_ud, DDL_LOG_WARN, "%s: refused %s: job id mismatch (ours '%s', theirs '%s')", name,
                 p->from, n->job, h->job);
    else if (reason == DDL__HS_R_TOKEN)
        ddl__log(n->log, n->log_ud, DDL_LOG_WARN, "%s: refused %s: wrong token for job %s (it claimed rank %u)", name,
                 p->from, n->job, h->rank);
    else if (!claims)
        ddl__log(n->log, n->log_ud, DDL_LOG_WARN, "%s: refused %s: %s", name, p->from, reason_text(n->proto, reason));
    else
        ddl__log(n->log, n->log_ud, DDL_LOG_WARN,
                 "%s: refused %s: %s (it claimed rank %u of %u, version %u; we are rank %d of %d)", name, p->from,
                 reason_text(n->proto, reason), h->rank, h->world, h->version, n->rank, n->world);
}

/* ---- connecting side ---- */

int ddl__net_greet_start(ddl__net *n, ddl__net_greeting *g, ddl__hs_msg *out)
{
    g->stage = DDL__GREET_HELLO;
    if (hello(n, n->addr, g->nonce_c, out) != 0)
        return ddl__net_fail(n, DDL_EIO, "rank %d: no random numbers for the handshake", n->rank);
    return DDL_OK;
}

/* answer: in[bytes] decoded into *m: DDL_OK, or DDL_EPROTO if it is not a handshake, DDL_EAUTH
 * with the reason if it is a refusal. */
static int answer(ddl__net *n, int peer, const unsigned char *in, size_t bytes, ddl__hs_msg *m)
{
    const char *addr = n->peers[peer].addr;
    if (ddl__hs_decode(n->proto, in, bytes, m) != 0)
        return ddl__net_fail(n, DDL_EPROTO, "rank %d at %s answered with something that is not a ddl handshake", peer,
                             addr);
    if (m->type != DDL__HS_REFUSE)
        return DDL_OK;
    if (m->reason == DDL__HS_R_JOB)
        return ddl__net_fail(n, DDL_EAUTH, "rank %d at %s refused the handshake: job id mismatch (ours '%s'; "
                             "ddlrun --nodes derives it from the token: another token, another job id)", peer, addr,
                             n->job);
    if (m->reason == DDL__HS_R_TOKEN)
        return ddl__net_fail(n, DDL_EAUTH, "rank %d at %s refused the handshake: wrong token for job '%s'", peer, addr,
                             n->job);
    return ddl__net_fail(n, DDL_EAUTH, "rank %d at %s refused the handshake: %s (we are rank %d of %d)", peer, addr,
                         reason_text(n->proto, m->reason), n->rank, n->world);
}

/* proof: the acceptor's hello must be rank peer of our job and world size; then *out is our
 * PROOF for our nonce and its. */
static int proof(ddl__net *n, ddl__net_greeting *g, int peer, const ddl__hs_msg *h, ddl__hs_msg *out)
{
    const char *addr = n->peers[peer].addr;
    if (h->version != n->proto->version)
        return ddl__net_fail(n, DDL_EAUTH, "%s speaks protocol version %u, we speak %d", addr, h->version,
                             (int)n->proto->version);
    if (strcmp(h->job, n->job) != 0)
        return ddl__net_fail(n, DDL_EAUTH, "%s belongs to job '%s', not ours ('%s')", addr, h->job, n->job);
    if (h->world != (uint32_t)n->world || h->rank != (uint32_t)peer)
        return ddl__net_fail(n, DDL_EAUTH, "%s is rank %u of %u, expected rank %d of %d", addr, h->rank, h->world,
                             peer, n->world);
    if (h->reason != (uint32_t)n->mac)
        return ddl__net_fail(n, DDL_EAUTH, "%s %s frame MACs and we %s: set DDL_MAC alike on every rank", addr,
                             h->reason ? "uses" : "does not use", n->mac ? "do" : "do not");
    memcpy(g->nonce_a, h->nonce, DDL__NONCE_BYTES);
    make(n, out, DDL__HS_PROOF);
    mac(n, g->nonce_c, g->nonce_a, n->rank, peer, 'c', out->mac);
    g->stage = DDL__GREET_OK;
    return DDL_OK;
}

int ddl__net_greet_step(ddl__net *n, ddl__net_greeting *g, int peer, const unsigned char *in, size_t bytes,
                        ddl__hs_msg *out)
{
    ddl__hs_msg m;
    if (ddl__hs_decode(n->proto, in, bytes, &m) == 0 && m.type == DDL__HS_REFUSE && m.reason == DDL__HS_R_SILENT) {
        /* we were slow, or strangers crowded us out of its handshake slots: start again */
        ddl__log(n->log, n->log_ud, DDL_LOG_DEBUG, "%s: rank %d: rank %d at %s gave our handshake slot up; again",
                 n->proto->name, n->rank, peer, n->peers[peer].addr);
        g->stage = 0;
        return DDL_OK;
    }
    int st = answer(n, peer, in, bytes, &m);
    if (st != DDL_OK)
        return st;
    const unsigned char *echo = m.type == DDL__HS_HELLO ? m.mac : m.type == DDL__HS_OK ? m.nonce : NULL;
    if (echo && !ddl__ct_equal(echo, g->nonce_c, DDL__NONCE_BYTES)) {
        /* the answer to a HELLO before our last one: the handshake it belonged to was given up */
        ddl__log(n->log, n->log_ud, DDL_LOG_DEBUG, "%s: rank %d: dropped rank %d's answer to an earlier HELLO",
                 n->proto->name, n->rank, peer);
        return DDL_OK;
    }
    uint32_t want = g->stage == DDL__GREET_HELLO ? DDL__HS_HELLO : DDL__HS_OK;
    if (g->stage == DDL__GREET_DONE || m.type != want)
        return ddl__net_fail(n, DDL_EPROTO, "rank %d at %s broke the handshake: message type %u, expected %u", peer,
                             n->peers[peer].addr, m.type, want);
    if (g->stage == DDL__GREET_HELLO)
        return proof(n, g, peer, &m, out);
    unsigned char expect[DDL__SHA256_BYTES];
    mac(n, g->nonce_c, g->nonce_a, n->rank, peer, 'a', expect);
    if (!ddl__ct_equal(expect, m.mac, sizeof expect))
        return ddl__net_fail(n, DDL_EAUTH, "rank %d at %s did not prove that it knows the token of job '%s'", peer,
                             n->peers[peer].addr, n->job);
    g->stage = DDL__GREET_DONE;
    link_keys(n, &n->peers[peer], g->nonce_c, g->nonce_a, n->rank, peer, 0);
    return DDL_OK;
}
