/* zmq_handshake.c - the ZeroMQ transport's handshakes (the messages and proofs are
 * net_handshake.c's, the slots of handshakes in progress net_pool.c's): our ROUTER answers the
 * DEALERs of others, our DEALERs greet the ROUTERs of others, and open() runs both until every
 * pair has passed them both ways (and, in master mode, rank 0's address table went out). A
 * connection libzmq drops and remakes during them costs a new greeting, not the job. It must not
 * trust a peer before its proof, nor keep a stranger's slot past the pool's limits. */
#include "ddl.h"

#ifdef DDL_WITH_ZMQ
#include "zmq_impl.h"

#include <errno.h>
#include <string.h>

/* ---- handshake, ROUTER side ---- */

/* router_send: bytes to the DEALER with routing id rid (never blocks: the ROUTER's HWM is 0). */
static int router_send(zq_state *s, const unsigned char *rid, size_t rid_bytes, const void *buf, size_t bytes)
{
    if (zmq_send(s->router, rid, rid_bytes, ZMQ_SNDMORE | ZMQ_DONTWAIT) != (int)rid_bytes ||
        zmq_send(s->router, buf, bytes, ZMQ_DONTWAIT) != (int)bytes)
        return -1;
    return 0;
}

/* refuse: log, tell the peer why (unless it sent garbage), free the slot. */
static void refuse(zq_state *s, ddl__net_slot *p, uint32_t reason)
{
    unsigned char buf[DDL__HS_BYTES];
    ddl__net_pool_refuse(&s->pool, p, reason, 1, buf); /* a slot always has a hello */
    if (reason != DDL__HS_R_GARBAGE)
        (void)router_send(s, p->key, p->key_bytes, buf, sizeof buf);
    ddl__net_pool_drop(&s->pool, p);
}

/* busy: the pool has no slot for the peer with routing id rid now (its source holds its share,
 * or every slot is busy): it is told to greet again (the refusal a slot given up gets), and
 * holds no slot meanwhile. */
static void busy(zq_state *s, const unsigned char *rid, size_t rid_bytes, const char *from)
{
    unsigned char buf[DDL__HS_BYTES];
    ddl__net_pool_busy(&s->pool, buf);
    (void)router_send(s, rid, rid_bytes, buf, sizeof buf);
    ddl__log(s->net.log, s->net.log_ud, DDL_LOG_DEBUG, "zmq: rank %d: no handshake slot for %s now; it greets again",
             s->net.rank, from);
}

/* greeted_again: before open is done, a HELLO from the routing id of a rank that joined is that
 * rank greeting again: its connection dropped and libzmq reconnected it (the id is its own,
 * kept across reconnections), so what we sent it since may be lost. It joins anew, proving the
 * token again; until then it counts as not joined. */
static void greeted_again(zq_state *s, const unsigned char *rid, size_t rid_bytes)
{
    ddl__net *n = &s->net;
    for (int r = 0; r < n->world; r++) {
        zq_link *l = &s->links[r];
        if (r != n->rank && n->peers[r].joined && l->rid_bytes == rid_bytes && memcmp(l->rid, rid, rid_bytes) == 0) {
            n->peers[r].joined = 0;
            n->peers[r].linked = 0;
            ddl__log(n->log, n->log_ud, DDL_LOG_DEBUG, "zmq: rank %d: rank %d greets again (its connection dropped)",
                     n->rank, r);
            return;
        }
    }
}

/* router_one: one [rid][message] from the ROUTER; anything malformed is dropped unanswered. A
 * HELLO (re)starts the slot of its rid; a joining rank gets its rid recorded. */
static void router_one(zq_state *s, const unsigned char *rid, size_t rid_bytes, const unsigned char *buf,
                       size_t bytes, const char *from)
{
    ddl__net *n = &s->net;
    ddl__hs_msg m;
    if (ddl__hs_decode(&ddl__zq_proto, buf, bytes, &m) != 0) {
        ddl__log(n->log, n->log_ud, DDL_LOG_WARN, "zmq: rank %d: dropped a message from %s that is not a ddl handshake",
                 n->rank, from);
        return;
    }
    ddl__net_slot *p = ddl__net_pool_find(&s->pool, rid, rid_bytes);
    ddl__net_slot *v;
    if (m.type == DDL__HS_HELLO && !p && !s->opened)
        greeted_again(s, rid, rid_bytes);
    if (m.type == DDL__HS_HELLO && !p) {
        if (!ddl__net_pool_admit(&s->pool, from, &v)) { /* no slot now: it greets again a little later */
            busy(s, rid, rid_bytes, from);
            return;
        }
        if (v)
            refuse(s, v, DDL__HS_R_SILENT); /* silent strangers cannot hold every slot */
    }
    if (m.type == DDL__HS_HELLO)
        p = ddl__net_pool_start(&s->pool, rid, rid_bytes, from);
    if (!p) {
        ddl__log(n->log, n->log_ud, DDL_LOG_WARN, "zmq: rank %d: dropped a handshake message from %s (out of order)",
                 n->rank, from);
        return;
    }
    unsigned char out[DDL__HS_BYTES];
    uint32_t reason;
    int act = ddl__net_pool_accept(&s->pool, p, &m, out, &reason);
    if (act == DDL__ACCEPT_REFUSE)
        refuse(s, p, reason);
    else if (act == DDL__ACCEPT_DROP)
        ddl__net_pool_drop(&s->pool, p);
    else
        (void)router_send(s, p->key, p->key_bytes, out, sizeof out);
    if (act == DDL__ACCEPT_JOINED) {
        zq_link *l = &s->links[p->hs.hello.rank];
        memcpy(l->rid, p->key, p->key_bytes);
        l->rid_bytes = p->key_bytes;
        ddl__net_pool_join(&s->pool, p);
        if (s->tables_sent) /* it joined again: the table it had may have been lost with its link */
            (void)router_send(s, l->rid, l->rid_bytes, s->table, s->table_bytes);
    }
}

/* router_step: read and answer every handshake message waiting on our ROUTER. Before open
 * completes, authenticated ranks get their rid recorded; afterwards everyone is refused. */
void ddl__zq_router_step(zq_state *s)
{
    for (int budget = 0; s->router && budget < 4 * DDL__POOL_SLOTS + s->net.world; budget++) {
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
        if (more)
            ddl__zq_drain_parts(s->router); /* a handshake is one frame: drop the rest */
        if (k >= 0 && n <= (int)sizeof rid)
            router_one(s, rid, (size_t)n, buf, bytes == DDL__HS_BYTES ? bytes : 0, from);
    }
}

/* expire: free the handshake slots whose peer went silent. */
void ddl__zq_expire(zq_state *s)
{
    ddl__net_slot *p;
    while ((p = ddl__net_pool_silent(&s->pool)) != NULL)
        refuse(s, p, DDL__HS_R_SILENT);
}

/* ---- handshake, DEALER side ---- */

/* client_table: rank 0's address table; then connect to every other rank. Our own entry and
 * rank 0's are not taken from it. */
static int client_table(zq_state *s, const unsigned char *buf, size_t bytes)
{
    ddl__net *n = &s->net;
    int st = ddl__net_table_decode(n, buf, bytes);
    s->table_due = 0;
    for (int j = 1; j < n->world && st == DDL_OK; j++) /* a table again (we greeted again): links made stay */
        st = j == n->rank || s->links[j].dealer ? DDL_OK : ddl__zq_connect_rank(s, j);
    return st;
}

/* client_waiting: our DEALER to rank j waits for a handshake message or the table. */
static int client_waiting(const zq_state *s, int j)
{
    int stage = s->links[j].greet.stage;
    return stage == DDL__GREET_HELLO || stage == DDL__GREET_OK || (j == 0 && s->table_due && stage == DDL__GREET_DONE);
}

/* client_step: read what rank j's ROUTER answered on our DEALER; DDL_OK or a failure (a
 * refusal is DDL_EAUTH with the reason). */
static int client_step(zq_state *s, int j)
{
    ddl__net *n = &s->net;
    zq_link *l = &s->links[j];
    int st = DDL_OK;
    while (st == DDL_OK && client_waiting(s, j)) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, l->dealer, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&msg);
            return DDL_OK;
        }
        const unsigned char *buf = zmq_msg_data(&msg);
        size_t bytes = zmq_msg_size(&msg);
        ddl__hs_msg out;
        int was = l->greet.stage;
        if (zmq_msg_more(&msg))
            st = ddl__net_fail(n, DDL_EPROTO, "rank %d at %s broke the handshake: a message of several parts", j,
                               n->peers[j].addr);
        else if (l->greet.stage == DDL__GREET_DONE)
            st = client_table(s, buf, bytes);
        else if ((st = ddl__net_greet_step(n, &l->greet, j, buf, bytes, &out)) == DDL_OK &&
                 l->greet.stage == DDL__GREET_OK && was == DDL__GREET_HELLO)
            st = ddl__zq_send_dealer(s, j, &out);
        else if (st == DDL_OK && l->greet.stage == 0) /* given up: again soon, not at once (it is busy) */
            l->greet_at_ms = ddl__now_ms() + ZQ_GREET_AGAIN_MS + (n->rank * 7 + j) % ZQ_GREET_AGAIN_MS;
        zmq_msg_close(&msg);
    }
    return st;
}


/* open_done: every rank passed our handshake and we passed theirs (and the table went out). */
static int open_done(zq_state *s, char *missing, size_t size)
{
    ddl__net *n = &s->net;
    for (int j = 0; j < n->world; j++)
        n->peers[j].linked = n->peers[j].joined && s->links[j].greet.stage == DDL__GREET_DONE && !client_waiting(s, j);
    return ddl__net_missing(n, 0, n->world - 1, missing, size) == 0 && (!s->master_mode || n->rank != 0 || s->tables_sent);
}

/* greet_again: our DEALER to rank j dropped its connection during the handshakes and libzmq made
 * a new one: what we sent on the old one may be lost (libzmq drops what it had written), so the
 * greeting starts over with a new HELLO (answers to the old one are told apart by the nonce they
 * echo), and rank 0's table is due again (rank 0 sends it to a rank that joins again). */
static int greet_again(zq_state *s, int j)
{
    zq_link *l = &s->links[j];
    ddl__log(s->net.log, s->net.log_ud, DDL_LOG_DEBUG, "zmq: rank %d: the connection to rank %d at %s dropped during "
             "the handshake; greeting it again", s->net.rank, j, s->net.peers[j].addr);
    l->down_at_ms = 0;
    l->reconnected = 0;
    l->greet_at_ms = 0;
    if (j == 0 && s->master_mode && s->net.rank != 0)
        s->table_due = 1;
    return ddl__zq_greet(s, j);
}

/* open_poll: wait for handshake traffic on the ROUTER and the DEALERs still in a handshake. */
static int open_poll(zq_state *s, int64_t deadline_ms)
{
    zmq_pollitem_t *it = s->items;
    int n = 0, st = DDL_OK;
    it[n++] = (zmq_pollitem_t){.socket = s->router, .events = ZMQ_POLLIN};
    if (s->zap) /* libzmq asks it before a peer's first message reaches the ROUTER */
        it[n++] = (zmq_pollitem_t){.socket = s->zap, .events = ZMQ_POLLIN};
    for (int j = 0; j < s->net.world; j++)
        if (s->links[j].dealer && client_waiting(s, j))
            it[n++] = (zmq_pollitem_t){.socket = s->links[j].dealer, .events = ZMQ_POLLIN};
    int64_t wake = ddl__net_pool_wake(&s->pool, ddl__now_ms() + 100);
    for (int j = 0; j < s->net.world; j++)
        if (s->links[j].greet_at_ms && s->links[j].greet_at_ms < wake)
            wake = s->links[j].greet_at_ms;
    int left = ddl__remaining_ms(wake < deadline_ms ? wake : deadline_ms);
    if (zmq_poll(it, n, left) < 0 && errno != EINTR)
        return ddl__net_fail(&s->net, DDL_EIO, "rank %d: zmq_poll: %s", s->net.rank, zmq_strerror(errno));
    ddl__zq_zap_step(s);
    ddl__zq_router_step(s);
    ddl__zq_expire(s);
    int64_t now = ddl__now_ms();
    for (int j = 0; j < s->net.world && st == DDL_OK; j++) {
        zq_link *l = &s->links[j];
        st = l->dealer ? client_step(s, j) : DDL_OK;
        if (st == DDL_OK && l->dealer && l->greet.stage && (ddl__zq_drain_monitor(s, j, 1), l->reconnected))
            st = greet_again(s, j);
        if (st == DDL_OK && l->auth_refused) /* its handler has another token or job id than ours */
            st = ddl__net_fail(&s->net, DDL_EPROTO, "rank %d: rank %d at %s refused us at ZeroMQ's handshake: wrong "
                               "token or job id mismatch (the credential both ranks derive from DDL_TOKEN and DDL_JOB "
                               "differs)", s->net.rank, j, s->net.peers[j].addr);
        if (st == DDL_OK && l->greet_at_ms && now >= l->greet_at_ms) {
            l->greet_at_ms = 0;
            st = ddl__zq_greet(s, j);
        }
    }
    return st;
}

/* send_tables: rank 0, master mode: every rank gets the table of ROUTER addresses. */
static int send_tables(zq_state *s)
{
    ddl__net *n = &s->net;
    size_t bytes = ddl__net_table_encode(n, s->table);
    s->table_bytes = bytes;
    for (int r = 1; r < n->world; r++)
        if (router_send(s, s->links[r].rid, s->links[r].rid_bytes, s->table, bytes) != 0)
            return ddl__net_fail(n, DDL_EPEER, "rank 0: could not send the address table to rank %d at %s: %s", r,
                                 n->peers[r].addr, zmq_strerror(errno));
    s->tables_sent = 1;
    return DDL_OK;
}

/* connect_back: rank 0, master mode: connect to every rank that joined; the table once all have. */
static int connect_back(zq_state *s)
{
    int st = DDL_OK, all = 1;
    for (int j = 1; j < s->net.world && st == DDL_OK; j++) {
        all &= s->net.peers[j].joined;
        if (s->net.peers[j].joined && !s->links[j].dealer)
            st = ddl__zq_connect_rank(s, j);
    }
    if (st == DDL_OK && all && !s->tables_sent)
        st = send_tables(s);
    return st;
}

int ddl__zq_handshakes(zq_state *s, int64_t deadline_ms)
{
    ddl__net *n = &s->net;
    char missing[96];
    int64_t started = ddl__now_ms(), report = 0;
    while (!open_done(s, missing, sizeof missing)) {
        if (missing[0])
            ddl__net_waiting(n, started, &report, missing);
        if (ddl__remaining_ms(deadline_ms) == 0)
            return ddl__net_fail(n, DDL_ETIMEDOUT, "rank %d timed out after %d ms at %s: no handshake yet with rank%s %s",
                                 n->rank, n->timeout_ms, n->addr, strchr(missing, ',') ? "s" : "", missing);
        int st = open_poll(s, deadline_ms);
        if (st == DDL_OK && s->master_mode && n->rank == 0)
            st = connect_back(s);
        if (st != DDL_OK)
            return st;
    }
    for (int j = 0; j < n->world; j++)
        if (j != n->rank) {
            ddl__zq_drain_monitor(s, j, 0); /* the connections so far are the good ones */
            s->links[j].down_at_ms = 0;
            s->links[j].reconnected = 0;
        }
    return DDL_OK;
}

#else

typedef int ddl__zq_handshake_unused; /* ISO C wants a declaration in every file */

#endif
