/* net_pool.c - the accepting side's pool of peers that connected to us and have not proved
 * who they are yet, for the network transports: a bounded table of slots, each with a deadline,
 * found by a key the transport chooses (the socket of a tcp peer, the routing id of a zmq one).
 * It starts, finds, expires and frees slots, puts a message together when it arrives in pieces,
 * runs it through the accepting side of the handshake (net_handshake.c) and says what to answer.
 * It owns no socket and sends nothing: the transport moves the bytes, closes what it opened and
 * decides whom to tell why it is refused. A stranger holds a slot DDL__POOL_SLOT_MS at most, and
 * less when newcomers need it: a full pool gives its oldest slot to the next peer, but only
 * once that slot was held DDL__POOL_HOLD_MS. */
#include "net.h"

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

ddl__net_slot *ddl__net_pool_victim(ddl__net_pool *pl)
{
    ddl__net_slot *v = NULL;
    int64_t young = ddl__now_ms() - DDL__POOL_HOLD_MS;
    for (int i = 0; i < DDL__POOL_SLOTS; i++) {
        ddl__net_slot *p = &pl->slot[i];
        if (!p->hs.stage)
            return NULL;
        if (p->since_ms > young)
            continue;
        int older = !v || p->since_ms < v->since_ms;
        if (!v || (p->hs.stage == DDL__HS_HELLO && (v->hs.stage != DDL__HS_HELLO || older)) ||
            (v->hs.stage != DDL__HS_HELLO && older))
            v = p;
    }
    return v;
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
        if (full && p->since_ms + DDL__POOL_HOLD_MS < deadline_ms)
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
