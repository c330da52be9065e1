/* net_pool.c - the accepting side's pool of peers that connected to us and have not proved
 * who they are yet, for the network transports: a bounded table of slots, each with a deadline,
 * found by a key the transport chooses (the socket of a tcp peer, the routing id of a zmq one).
 * It decides who gets a slot, starts, finds, expires and frees slots, puts a message together
 * when it arrives in pieces, runs it through the accepting side of the handshake
 * (net_handshake.c) and says what to answer. It owns no socket and sends nothing: the transport
 * moves the bytes, closes what it opened and decides whom to tell why it is refused.
 *
 * Who gets a slot. Before its proof nobody can tell a rank from a stranger who knows the job id
 * (the job id is no secret), so:
 * - A slot whose peer sent a HELLO of our job (the first half of the handshake) is never given to
 *   a newcomer: it ends with the proof, a refusal, or its deadline (DDL__POOL_SLOT_MS at most),
 *   so a real rank whose proof is a slow round trip away is not pushed out by a crowd. Only a
 *   slot still waiting for its HELLO (silent, slow, garbage) is taken over, once it was held
 *   DDL__POOL_HOLD_MS.
 * - One source address (an IPv4 address, an IPv6 /64) holds at most cap() slots, so strangers
 *   greeting from a few addresses cannot hold the pool for the ranks elsewhere. The cap is sized
 *   from the ranks we wait for, as every real rank runs one handshake with us at a time: all
 *   ranks of one host (on one host, all ranks come from 127.0.0.1) fit under it, plus a spare for
 *   a connection a rank replaced and we have not seen close yet; but never more than half the
 *   pool. Beyond the cap a newcomer is turned away and greets again (ddl's ranks do), so many
 *   ranks of one host take turns rather than wait. Strangers at a real rank's own address share
 *   its cap: that is the limit of what addresses can tell. */
#include "net.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

/* ---- slots ---- */

void ddl__net_pool_init(ddl__net_pool *pl, ddl__net *n)
{
    memset(pl, 0, sizeof *pl);
    pl->net = n;
}

void ddl__net_pool_welcome(ddl__net_pool *pl, int lo, int hi, int take_addr)
{
    pl->lo = lo;
    pl->hi = hi;
    pl->take_addr = take_addr;
}

ddl__net_slot *ddl__net_pool_find(ddl__net_pool *pl, const void *key, size_t key_bytes)
{
    for (int i = 0; i < DDL__POOL_SLOTS; i++) {
        ddl__net_slot *p = &pl->slot[i];
        if (p->hs.stage && p->key_bytes == key_bytes && memcmp(p->key, key, key_bytes) == 0)
            return p;
    }
    return NULL;
}

int ddl__net_pool_room(const ddl__net_pool *pl)
{
    for (int i = 0; i < DDL__POOL_SLOTS; i++)
        if (!pl->slot[i].hs.stage)
            return 1;
    return 0;
}

/* ip: host (an address, no port) in out (left alone if it is none): an IPv4 address as
 * ::ffff:a.b.c.d, only the /64 of an IPv6 one (a host there may pick any address in its /64). */
static int ip(const char *host, unsigned char out[16])
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1) {
        out[10] = out[11] = 0xff;
        memcpy(out + 12, &a4, 4);
        return 1;
    }
    if (inet_pton(AF_INET6, host, &a6) != 1)
        return 0;
    memcpy(out, &a6, IN6_IS_ADDR_V4MAPPED(&a6) ? 16 : 8);
    return 1;
}

/* source_of: the source a peer counts against for the cap, from the transport's text of its
 * address ("ip:port", "[ip6]:port", or a bare address as zmq gives it); all zero for what does
 * not parse (such peers share one source). */
static void source_of(const char *from, unsigned char out[16])
{
    char host[DDL__ADDR_BYTES];
    int port;
    memset(out, 0, 16);
    if (!ip(from, out) && ddl__split_addr(from, host, &port) == 0)
        ip(host, out);
}

/* cap: the most slots one source may hold: the ranks we wait for, plus one, at most half the pool. */
static int cap(const ddl__net_pool *pl)
{
    int me = pl->lo <= pl->net->rank && pl->net->rank <= pl->hi;
    int n = pl->hi - pl->lo + 1 - me + 1;
    return n < 1 ? 1 : n > DDL__POOL_SLOTS / 2 ? DDL__POOL_SLOTS / 2 : n;
}

/* victim: the slot a newcomer may take over (of that source only, unless source is NULL): the
 * oldest of those still waiting for their HELLO that were held DDL__POOL_HOLD_MS; or NULL. */
static ddl__net_slot *victim(ddl__net_pool *pl, const unsigned char *source)
{
    ddl__net_slot *v = NULL;
    int64_t young = ddl__now_ms() - DDL__POOL_HOLD_MS;
    for (int i = 0; i < DDL__POOL_SLOTS; i++) {
        ddl__net_slot *p = &pl->slot[i];
        if (p->hs.stage != DDL__HS_HELLO || p->since_ms > young || (source && memcmp(p->source, source, 16) != 0))
            continue;
        if (!v || p->since_ms < v->since_ms)
            v = p;
    }
    return v;
}

int ddl__net_pool_open(ddl__net_pool *pl)
{
    return ddl__net_pool_room(pl) || victim(pl, NULL) != NULL;
}

int ddl__net_pool_admit(ddl__net_pool *pl, const char *from, ddl__net_slot **out)
{
    unsigned char source[16];
    source_of(from, source);
    int held = 0;
    for (int i = 0; i < DDL__POOL_SLOTS; i++)
        held += pl->slot[i].hs.stage && memcmp(pl->slot[i].source, source, 16) == 0;
    *out = NULL;
    if (held >= cap(pl)) /* its source has its share: only one of its own may make room */
        return (*out = victim(pl, source)) != NULL;
    return ddl__net_pool_room(pl) || (*out = victim(pl, NULL)) != NULL;
}

void ddl__net_pool_busy(const ddl__net_pool *pl, unsigned char out[DDL__HS_BYTES])
{
    ddl__hs_msg m = {.type = DDL__HS_REFUSE, .version = pl->net->proto->version, .reason = DDL__HS_R_SILENT};
    ddl__hs_encode(pl->net->proto, &m, out);
}

ddl__net_slot *ddl__net_pool_start(ddl__net_pool *pl, const void *key, size_t key_bytes, const char *from)
{
    ddl__net_slot *p = key_bytes <= DDL__KEY_BYTES ? ddl__net_pool_find(pl, key, key_bytes) : NULL;
    for (int i = 0; i < DDL__POOL_SLOTS && !p && key_bytes <= DDL__KEY_BYTES; i++)
        if (!pl->slot[i].hs.stage)
            p = &pl->slot[i];
    if (!p)
        return NULL;
    memset(p, 0, sizeof *p);
    p->hs.stage = DDL__HS_HELLO;
    int ms = pl->net->timeout_ms < DDL__POOL_SLOT_MS ? pl->net->timeout_ms : DDL__POOL_SLOT_MS;
    p->since_ms = ddl__now_ms();
    p->hs.deadline_ms = p->since_ms + ms;
    memcpy(p->key, key, key_bytes);
    p->key_bytes = key_bytes;
    snprintf(p->hs.from, sizeof p->hs.from, "%s", from);
    source_of(from, p->source);
    return p;
}

void ddl__net_pool_drop(ddl__net_pool *pl, ddl__net_slot *p)
{
    (void)pl;
    p->hs.stage = 0;
}

ddl__net_slot *ddl__net_pool_silent(ddl__net_pool *pl)
{
    int64_t now = ddl__now_ms();
    for (int i = 0; i < DDL__POOL_SLOTS; i++)
        if (pl->slot[i].hs.stage && now >= pl->slot[i].hs.deadline_ms)
            return &pl->slot[i];
    return NULL;
}

int64_t ddl__net_pool_wake(const ddl__net_pool *pl, int64_t deadline_ms)
{
    int full = !ddl__net_pool_room(pl);
    for (int i = 0; i < DDL__POOL_SLOTS; i++) {
        const ddl__net_slot *p = &pl->slot[i];
        if (p->hs.stage && p->hs.deadline_ms < deadline_ms)
            deadline_ms = p->hs.deadline_ms;
        if (full && p->hs.stage == DDL__HS_HELLO && p->since_ms + DDL__POOL_HOLD_MS < deadline_ms)
            deadline_ms = p->since_ms + DDL__POOL_HOLD_MS;
    }
    return deadline_ms;
}

/* ---- messages ---- */

int ddl__net_pool_accept(ddl__net_pool *pl, ddl__net_slot *p, const ddl__hs_msg *m, unsigned char out[DDL__HS_BYTES],
                         uint32_t *reason)
{
    ddl__hs_msg reply;
    int act = ddl__net_accept(pl->net, &p->hs, m, pl->lo, pl->hi, &reply);
    if (act == DDL__ACCEPT_REPLY || act == DDL__ACCEPT_JOINED)
        ddl__hs_encode(pl->net->proto, &reply, out);
    if (act == DDL__ACCEPT_REFUSE)
        *reason = reply.reason;
    return act;
}

int ddl__net_pool_feed(ddl__net_pool *pl, ddl__net_slot *p, size_t k, unsigned char out[DDL__HS_BYTES],
                       uint32_t *reason)
{
    size_t before = p->got;
    p->got += k;
    ddl__hs_msg m;
    *reason = DDL__HS_R_GARBAGE;
    if (before < 4 && p->got >= 4 && memcmp(p->msg, pl->net->proto->hs_magic, 4) != 0)
        return DDL__ACCEPT_REFUSE; /* not ours: do not wait for the rest */
    if (p->got < DDL__HS_BYTES)
        return 0;
    if (ddl__hs_decode(pl->net->proto, p->msg, p->got, &m) != 0)
        return DDL__ACCEPT_REFUSE;
    p->got = 0;
    return ddl__net_pool_accept(pl, p, &m, out, reason);
}

int ddl__net_pool_join(ddl__net_pool *pl, ddl__net_slot *p)
{
    int rank = (int)p->hs.hello.rank;
    ddl__net_join(pl->net, &p->hs, pl->take_addr);
    p->hs.stage = 0;
    return rank;
}

void ddl__net_pool_refuse(ddl__net_pool *pl, const ddl__net_slot *p, uint32_t reason, int claims,
                          unsigned char out[DDL__HS_BYTES])
{
    ddl__hs_msg m;
    ddl__net_refusal(pl->net, &p->hs, reason, claims, &m);
    ddl__hs_encode(pl->net->proto, &m, out);
}
