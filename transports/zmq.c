/* zmq.c - the ZeroMQ transport (libzmq 4.x): authenticated links between every pair of ranks
 * and point-to-point exchange of framed messages. Where to rendezvous, rank 0's address table,
 * the frame prefix and failure recording are net.c's; the handshake's messages and proofs are
 * net_handshake.c's, the ROUTER's handshakes in progress net_pool.c's, running the handshakes at
 * open zmq_handshake.c's (zmq_impl.h: the state both files share); the sockets, and how
 * messages travel on them, are this file's.
 * It owns one libzmq context per comm and its sockets; all its own state lives in the memory the
 * core hands to open(). libzmq allocates internally (one message per frame sent or received,
 * pipes) and runs its own I/O and reaper threads inside the context: those are libzmq's, not
 * ddl's. It moves bytes only: the 32-byte header is opaque here. It must not bind wider than
 * told, accept a frame larger than it bounds (ZMQ_MAXMSGSIZE), or wait without a limit. Once
 * open() is done its ROUTER takes no new connection (ddl__sock_shut_door): libzmq would accept
 * strangers for ever, each holding a descriptor.
 * Sends copy the caller's bytes into libzmq messages, so no buffer of the caller's is held after
 * exchange returns. (Zero-copy sends, zmq_msg_init_data with a wait for libzmq's release, lost
 * messages between ranks under CPU load with libzmq 4.3.4 in our stress runs; not used.)
 * Receives copy out of libzmq's message, except through exchange_view, which lends the payload
 * where libzmq put it (the sums of allreduce read it there) until the next call.
 *
 * Topology: every rank binds one ROUTER socket and connects one DEALER to every other rank's
 * ROUTER. Rank i sends to rank j on its own ROUTER, addressed to the routing id of j's DEALER;
 * it receives from rank j on the DEALER it connected to j. So every sender has its own receive
 * queue (libzmq's), and a message from one rank never has to be held while we wait for another.
 * Both directions of every pair run the handshake before they carry data.
 * Compiled only with DDL_WITH_ZMQ; otherwise ddl_transport_zmq() returns NULL. */
#include "ddl.h"

#ifdef DDL_WITH_ZMQ
#include "zmq_impl.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* Handshake messages (one frame each) start with "DDLZ", proofs with "ddl-zmq-v1"; a message is
 * [prefix "DDLZ"][payload chunk]..., the payload in frames of ZQ_CHUNK bytes (the last one
 * shorter), so that no frame is ever larger than ZMQ_MAXMSGSIZE allows. */
const ddl__net_proto ddl__zq_proto = {
    .name = "zmq", .hs_magic = "DDLZ", .label = "ddl-zmq-v1", .version = 1,
    .duplicate = "duplicate rank (that rank is already connected)",
    .frame_magic = 0x5a4c4444U,
};

/* ---- sockets ---- */

static void set_int(void *sock, int opt, int v) { zmq_setsockopt(sock, opt, &v, sizeof v); }

/* common_options: what the ROUTER and every DEALER share. No ZMTP heartbeat (ZMQ_HEARTBEAT_IVL
 * stays 0): in libzmq 4.3.4 (and after) its timer writes a ping on a connection whose engine has
 * failed and waits to be torn down, and the rank aborts ("Assertion failed: !_io_error
 * (src/stream_engine_base.cpp:331)", libzmq issue #4364). The engine waits so when its input had
 * stopped, the pipe to our socket refusing a message (full at the receive high-water mark, or
 * closing: a peer's goodbye arriving while we close), and the peer then reset the connection,
 * which our own ping to a peer that had closed provokes. In 5 of 6 runs of the 4 hosts x 16
 * ranks of tests/test_many_ranks.sh, 2 to 6 ranks aborted so, 1-2.8 s into their close
 * (tests/test_backlog.c: the same at the high-water mark). Without the timer nothing
 * writes on such an engine: it is torn down when the pipe drains (or the socket closes). A
 * silent rank is named by the comm's heartbeat, as over tcp, and a wait ends at its timeout.
 * (libzmq also answers a PING left unread in such an engine, when the pipe drains, with the same
 * write: ranks send none now, but a ZMTP stranger on our ROUTER still can, during open.) */
static void common_options(void *sock, int ipv6)
{
    set_int(sock, ZMQ_LINGER, 0);
    set_int(sock, ZMQ_SNDBUF, 4 << 20);
    set_int(sock, ZMQ_RCVBUF, 4 << 20);
    set_int(sock, ZMQ_IPV6, ipv6);
}

/* drain_parts: drop the rest of a message whose first parts were read. */
void ddl__zq_drain_parts(void *sock)
{
    int more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        more = zmq_msg_recv(&m, sock, ZMQ_DONTWAIT) >= 0 && zmq_msg_more(&m);
        zmq_msg_close(&m);
    }
}

/* bind_router: our ROUTER at ss (any_port: a free port), recording the address we got. We make
 * its listening socket (ddl__net_listen) and hand it over with ZMQ_USE_FD, so that we can shut
 * its door once the handshakes are done: libzmq would accept every stranger for ever. */
static int bind_router(zq_state *s, const struct sockaddr_storage *ss, int any_port, const char *what)
{
    ddl__net *n = &s->net;
    char ep[DDL__ADDR_BYTES + 16];
    s->router = zmq_socket(s->ctx, ZMQ_ROUTER);
    if (!s->router)
        return ddl__net_fail(n, DDL_EIO, "rank %d: zmq_socket: %s", n->rank, zmq_strerror(errno));
    common_options(s->router, ss->ss_family == AF_INET6);
    int st = ddl__zq_zap_server(s, s->router);
    if (st != DDL_OK)
        return st;
    int64_t max = DDL__HS_BYTES; /* the ROUTER only ever receives handshakes (PLAIN's commands are smaller) */
    zmq_setsockopt(s->router, ZMQ_MAXMSGSIZE, &max, sizeof max);
    set_int(s->router, ZMQ_ROUTER_MANDATORY, 1); /* a gone peer is an error, not a silent drop */
    set_int(s->router, ZMQ_SNDHWM, 0);           /* never EAGAIN: our sends are bounded by exchange */
    set_int(s->router, ZMQ_HANDSHAKE_IVL, DDL__POOL_SLOT_MS); /* silent or slow strangers: closed by then */
    /* A ZAP domain makes libzmq refuse peers of ZMTP 1.0 and 2.0 at their greeting. Left in,
     * their first frame is a routing id that libzmq 4.3 pushes to the session with an assertion:
     * when the session is going away (a flood while the door shuts) the push fails and the whole
     * rank aborts ("Resource temporarily unavailable (src/zmtp_engine.cpp:446)"). Where there is
     * a token, ZMTP 3 peers must then pass PLAIN with the job's credential (zmq_zap.c); without
     * one there is no ZAP handler and peers of the NULL mechanism go on (ZMQ_ZAP_ENFORCE_DOMAIN
     * is 0). */
    zmq_setsockopt(s->router, ZMQ_ZAP_DOMAIN, "ddl", 3);
    struct sockaddr_storage at = *ss;
    if (any_port && at.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&at)->sin6_port = 0;
    else if (any_port)
        ((struct sockaddr_in *)&at)->sin_port = 0;
    int fd = -1;
    st = ddl__net_listen(n, &at, at.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in),
                         what, &fd);
    if (st == DDL_OK)
        set_int(s->router, ZMQ_USE_FD, fd);
    if (st == DDL_OK && (ddl__net_url(n->addr, "tcp", ep, sizeof ep) < 0 || zmq_bind(s->router, ep) != 0))
        st = ddl__net_fail(n, DDL_EIO, "rank %d: cannot listen on %s (%s): %s", n->rank, n->addr, what,
                           zmq_strerror(errno));
    if (st == DDL_OK)
        s->listen_fd = fd;
    else if (fd >= 0)
        close(fd);
    return st;
}

/* send_dealer: one handshake message on link j's DEALER. */
int ddl__zq_send_dealer(zq_state *s, int j, const ddl__hs_msg *m)
{
    unsigned char buf[DDL__HS_BYTES];
    ddl__hs_encode(&ddl__zq_proto, m, buf);
    if (zmq_send(s->links[j].dealer, buf, sizeof buf, ZMQ_DONTWAIT) != (int)sizeof buf)
        return ddl__net_fail(&s->net, DDL_EIO, "rank %d: cannot queue a handshake message for rank %d at %s: %s",
                             s->net.rank, j, s->net.peers[j].addr, zmq_strerror(errno));
    return DDL_OK;
}

/* greet: send our HELLO on link j's DEALER (again if rank j gave our handshake up). */
int ddl__zq_greet(zq_state *s, int j)
{
    ddl__hs_msg hello;
    int st = ddl__net_greet_start(&s->net, &s->links[j].greet, &hello);
    return st == DDL_OK ? ddl__zq_send_dealer(s, j, &hello) : st;
}

/* connect_rank: create link j's DEALER and monitor, connect it to rank j's ROUTER and send our
 * HELLO on it. */
int ddl__zq_connect_rank(zq_state *s, int j)
{
    ddl__net *n = &s->net;
    zq_link *l = &s->links[j];
    const char *addr = n->peers[j].addr;
    char ep[DDL__ADDR_BYTES + 16], mon[48];
    int v6 = ddl__net_url(addr, "tcp", ep, sizeof ep);
    if (v6 < 0)
        return ddl__net_fail(n, DDL_EINVAL, "rank %d: cannot parse the address '%s' of rank %d (want host:port)",
                             n->rank, addr, j);
    l->dealer = zmq_socket(s->ctx, ZMQ_DEALER);
    l->monitor = zmq_socket(s->ctx, ZMQ_PAIR);
    if (!l->dealer || !l->monitor)
        return ddl__net_fail(n, DDL_EIO, "rank %d: zmq_socket: %s", n->rank, zmq_strerror(errno));
    common_options(l->dealer, v6);
    set_int(l->monitor, ZMQ_LINGER, 0);
    int st = ddl__zq_zap_client(s, l->dealer);
    if (st != DDL_OK)
        return st;
    int64_t max = (int64_t)ZQ_CHUNK + (int64_t)DDL__TABLE_BYTES(n->world);
    zmq_setsockopt(l->dealer, ZMQ_MAXMSGSIZE, &max, sizeof max);
    set_int(l->dealer, ZMQ_RECONNECT_IVL, 10); /* a rank that binds a moment later (a regroup): 10 ms, not 100 */
    set_int(l->dealer, ZMQ_CONNECT_TIMEOUT, ZQ_CONNECT_MS);
    /* A routing id of our own, kept when libzmq reconnects (the ROUTER would give each connection
     * a new one): rank j's ROUTER goes on reaching us by the id our handshake recorded there. */
    unsigned char rid[ZQ_OWN_RID_BYTES];
    if (getrandom(rid, sizeof rid, 0) != (ssize_t)sizeof rid)
        return ddl__net_fail(n, DDL_EIO, "rank %d: no random numbers for a routing id", n->rank);
    rid[0] |= 1; /* ids starting with a zero byte are libzmq's */
    zmq_setsockopt(l->dealer, ZMQ_ROUTING_ID, rid, sizeof rid);
    snprintf(mon, sizeof mon, "inproc://ddl-monitor-%d", j);
    if (zmq_socket_monitor(l->dealer, mon,
                           ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0 ||
        zmq_connect(l->monitor, mon) != 0)
        return ddl__net_fail(n, DDL_EIO, "rank %d: cannot monitor the link to rank %d: %s", n->rank, j,
                             zmq_strerror(errno));
    if (zmq_connect(l->dealer, ep) != 0)
        return ddl__net_fail(n, DDL_EINVAL, "rank %d: cannot connect to rank %d at %s: %s", n->rank, j, addr,
                             zmq_strerror(errno));
    return ddl__zq_greet(s, j);
}

/* ---- events ---- */

/* drain_monitor: read link j's events: a drop starts the grace period; a new connection after
 * a drop means someone else answers at that address now; a refused credential is said at once
 * by open (track 0: just discard). */
void ddl__zq_drain_monitor(zq_state *s, int j, int track)
{
    zq_link *l = &s->links[j];
    if (!l->monitor)
        return;
    for (;;) {
        unsigned char ev[6];
        char where[256];
        int n = zmq_recv(l->monitor, ev, sizeof ev, ZMQ_DONTWAIT);
        if (n < 0)
            return;
        int more = 0;
        size_t ml = sizeof more;
        zmq_getsockopt(l->monitor, ZMQ_RCVMORE, &more, &ml);
        if (more)
            (void)zmq_recv(l->monitor, where, sizeof where, ZMQ_DONTWAIT);
        uint16_t e;
        memcpy(&e, ev, sizeof e);
        if (!track || n != 6)
            continue;
        if (e == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
            l->auth_refused = 1;
        else if (e == ZMQ_EVENT_DISCONNECTED && !l->down_at_ms)
            l->down_at_ms = ddl__now_ms();
        else if (e == ZMQ_EVENT_HANDSHAKE_SUCCEEDED && l->down_at_ms)
            l->reconnected = 1;
    }
}

static int has_message(void *sock)
{
    int ev = 0;
    size_t el = sizeof ev;
    return zmq_getsockopt(sock, ZMQ_EVENTS, &ev, &el) == 0 && (ev & ZMQ_POLLIN);
}

/* check_links: a link that dropped more than ZQ_GRACE_MS ago with nothing left to read is a
 * dead rank (one leaving on purpose leaves BYE behind). *wait_ms shrinks to the next decision. */
static int check_links(zq_state *s, int busy, int *wait_ms)
{
    ddl__net *n = &s->net;
    int64_t now = ddl__now_ms();
    for (int j = 0; j < n->world; j++) {
        zq_link *l = &s->links[j];
        if (j == n->rank || !l->down_at_ms || n->peers[j].rx_down)
            continue;
        if (l->reconnected) {
            ddl__net_link_down(n, j, DDL_EPEER, 1, 1);
            return ddl__net_fail(n, DDL_EPEER, "rank %d at %s dropped its connection and something else answers there "
                                 "now (noticed by rank %d)", j, n->peers[j].addr, n->rank);
        }
        int64_t since = now - l->down_at_ms;
        if (since < ZQ_GRACE_MS) {
            *wait_ms = (int)(ZQ_GRACE_MS - since) < *wait_ms ? (int)(ZQ_GRACE_MS - since) : *wait_ms;
            continue;
        }
        if (has_message(l->dealer))
            continue; /* data or BYE still to read: decided when the caller reads it */
        return ddl__net_peer_gone(n, j, busy);
    }
    return DDL_OK;
}

/* ---- open ---- */

/* layout: offsets of the arrays after the struct; returns the total size. */
static size_t layout(size_t world, size_t at[4])
{
    at[0] = ddl__align_up(sizeof(zq_state));                                /* net.peers */
    at[1] = at[0] + ddl__align_up(world * sizeof(ddl__net_peer));           /* links */
    at[2] = at[1] + ddl__align_up(world * sizeof(zq_link));                 /* items */
    at[3] = at[2] + ddl__align_up((2 * world + 3) * sizeof(zmq_pollitem_t)); /* table */
    return at[3] + ddl__align_up(DDL__TABLE_BYTES(world));
}

static size_t zq_state_bytes(const ddl_comm_config *cfg)
{
    int w = cfg ? cfg->world_size : 1;
    size_t at[4];
    return layout(w >= 1 && w <= ZQ_MAX_WORLD ? (size_t)w : 1, at);
}

/* listen_first: bind our ROUTER where the configuration says, and start the first DEALERs. */
static int listen_first(zq_state *s, const ddl_comm_config *cfg)
{
    ddl__net *n = &s->net;
    struct sockaddr_storage ss, me;
    socklen_t len;
    int st = ddl__net_where(n, cfg, &ss, &len, &s->master_mode);
    if (st != DDL_OK)
        return st;
    ddl__net_pool_welcome(&s->pool, 0, n->world - 1, s->master_mode && n->rank == 0);
    if (!s->master_mode) {
        st = bind_router(s, &ss, 0, "our entry in the peer list");
        for (int j = 0; j < n->world && st == DDL_OK; j++)
            st = j == n->rank ? DDL_OK : ddl__zq_connect_rank(s, j);
        return st;
    }
    if (n->rank == 0) {
        st = bind_router(s, &ss, 0, "the master address");
        memcpy(n->peers[0].addr, n->addr, DDL__ADDR_BYTES); /* the table's first entry */
        return st;
    }
    s->table_due = 1;
    if (ddl__net_local_toward(&ss, &me, &len) != 0)
        return ddl__net_fail(n, DDL_EIO, "rank %d: no local address reaches the master %s", n->rank, cfg->master);
    if ((st = bind_router(s, &me, 1, "the address we reach the master from")) != DDL_OK)
        return st;
    return ddl__zq_connect_rank(s, 0);
}

/* keep_heap: libzmq allocates a buffer for every message it sends or receives. glibc gave a
 * freed buffer of 512 KB back to the kernel (unmapped, or trimmed off the heap's top), so every
 * such message came back as 128 fresh pages to fault in: a 1 MiB all-reduce of 2 ranks on
 * loopback took 4-6 ms, most of it in page faults and in copies into new pages. With these
 * thresholds glibc keeps buffers up to 16 MiB in its heap and reuses them (0.5 ms). For the whole
 * process, once: the heap then shrinks only when 64 MiB at its top are free. Left alone when the
 * environment tunes malloc already (MALLOC_*_, GLIBC_TUNABLES). */
#define ZQ_MMAP_THRESHOLD (16 << 20)
#define ZQ_TRIM_THRESHOLD (64 << 20)
static void keep_heap_once(void)
{
#ifdef __GLIBC__
    if (getenv("GLIBC_TUNABLES") || getenv("MALLOC_MMAP_THRESHOLD_") || getenv("MALLOC_TRIM_THRESHOLD_"))
        return;
    mallopt(M_MMAP_THRESHOLD, ZQ_MMAP_THRESHOLD);
    mallopt(M_TRIM_THRESHOLD, ZQ_TRIM_THRESHOLD);
#endif
}

static void keep_heap(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, keep_heap_once);
}

static int zq_open(void *state, const ddl_comm_config *cfg)
{
    zq_state *s = state;
    if (!s || !cfg || cfg->world_size < 1 || cfg->world_size > ZQ_MAX_WORLD || cfg->rank < 0 ||
        cfg->rank >= cfg->world_size)
        return DDL_EINVAL;
    size_t at[4];
    layout((size_t)cfg->world_size, at);
    s->links = (zq_link *)((unsigned char *)s + at[1]);
    s->items = (unsigned char *)s + at[2];
    s->table = (unsigned char *)s + at[3];
    ddl__net_pool_init(&s->pool, &s->net);
    s->listen_fd = -1;
    int st = ddl__net_init(&s->net, ZQ_STATE_MAGIC, &ddl__zq_proto, cfg, (ddl__net_peer *)((unsigned char *)s + at[0]));
    if (st != DDL_OK || s->net.world == 1)
        return st;
    if ((st = ddl__net_check_fds(&s->net, ZQ_FDS_PER_RANK)) != DDL_OK)
        return st;
    keep_heap();
    s->ctx = zmq_ctx_new();
    if (!s->ctx || zmq_ctx_set(s->ctx, ZMQ_MAX_SOCKETS, ZQ_SOCKETS_PER_RANK * s->net.world + 16) != 0)
        return ddl__net_fail(&s->net, DDL_EIO, "rank %d: cannot create a ZeroMQ context: %s", s->net.rank,
                             zmq_strerror(errno));
    int64_t deadline_ms = ddl__now_ms() + s->net.timeout_ms;
    st = ddl__zq_zap_open(s);
    if (st == DDL_OK)
        st = listen_first(s, cfg);
    if (st == DDL_OK)
        st = ddl__zq_handshakes(s, deadline_ms);
    ddl__zq_zap_close(s); /* from now on no peer passes ZeroMQ's handshake with a token */
    if (st == DDL_OK && ddl__sock_shut_door(s->listen_fd) != 0) /* from now on strangers only cost us */
        ddl__log(s->net.log, s->net.log_ud, DDL_LOG_WARN, "zmq: rank %d: cannot stop new connections at %s: %s",
                 s->net.rank, s->net.addr, strerror(errno));
    s->opened = st == DDL_OK;
    ddl__net_opened(&s->net, st);
    return st;
}

/* ---- sending ---- */

static int send_failed(zq_state *s, int j, size_t bytes)
{
    ddl__net *n = &s->net;
    int e = errno;
    if (e == EHOSTUNREACH) {
        ddl__net_link_down(n, j, DDL_EPEER, 1, 0);
        return ddl__net_fail(n, DDL_EPEER, "rank %d at %s closed the connection before rank %d could send %zu bytes", j,
                             n->peers[j].addr, n->rank, bytes);
    }
    ddl__net_link_down(n, j, DDL_EIO, 1, 0);
    return ddl__net_fail(n, DDL_EIO, "rank %d: sending %zu bytes to rank %d at %s failed: %s", n->rank, bytes, j,
                         n->peers[j].addr, zmq_strerror(e));
}

/* send_msg: queue [rid][prefix][chunks] on the ROUTER (libzmq copies each chunk). Never blocks:
 * the ROUTER's SNDHWM is 0 and exchange() bounds what is queued to one message per call. */
static int send_msg(zq_state *s, int j, const unsigned char pre[DDL__FRAME_PREFIX], const void *buf, size_t bytes)
{
    zq_link *l = &s->links[j];
    int mac = s->net.mac; /* a last part, the tag, follows the payload */
    unsigned char tag[DDL__MAC_BYTES];
    if (mac)
        ddl__mac_frame_tag(&s->net, j, pre, buf, bytes, tag);
    if (zmq_send(s->router, l->rid, l->rid_bytes, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(s->router, pre, DDL__FRAME_PREFIX, (bytes || mac ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0)
        return send_failed(s, j, bytes);
    const unsigned char *p = buf;
    for (size_t off = 0; off < bytes;) {
        size_t n = bytes - off < ZQ_CHUNK ? bytes - off : ZQ_CHUNK;
        if (zmq_send(s->router, p + off, n, (off + n < bytes || mac ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0)
            return send_failed(s, j, bytes);
        off += n;
    }
    if (mac && zmq_send(s->router, tag, sizeof tag, ZMQ_DONTWAIT) < 0)
        return send_failed(s, j, bytes);
    return DDL_OK;
}

/* ---- receiving ---- */

/* broke: rank j sent something we cannot read; more: we are inside a message (drop its rest). */
static int broke(zq_state *s, int j, const char *what, int more)
{
    if (more)
        ddl__zq_drain_parts(s->links[j].dealer);
    ddl__net_link_down(&s->net, j, DDL_EPROTO, 0, 1);
    return ddl__net_fail(&s->net, DDL_EPROTO, "rank %d at %s broke the protocol: %s; rank %d reads no more from it", j,
                         s->net.peers[j].addr, what, s->net.rank);
}

/* release_view: close the message exchange_view lent out last. */
static void release_view(zq_state *s)
{
    if (s->view_live)
        zmq_msg_close(&s->view);
    s->view_live = 0;
}

/* read_view: the payload of `bytes` bytes (one frame: bytes <= ZQ_CHUNK) kept in s->view. */
static int read_view(zq_state *s, int j, size_t bytes, const void **view)
{
    void *d = s->links[j].dealer;
    zmq_msg_init(&s->view);
    s->view_live = 1;
    int got = zmq_msg_recv(&s->view, d, ZMQ_DONTWAIT), more = got >= 0 && zmq_msg_more(&s->view);
    if (got < 0 || (size_t)got != bytes)
        return broke(s, j, "a payload frame of the wrong size", more);
    if (more != s->net.mac)
        return broke(s, j, "a message with the wrong number of payload frames", more);
    *view = zmq_msg_data(&s->view);
    return DDL_OK;
}

/* read_chunks: the chunks of a message of `bytes` bytes, straight into buf. */
static int read_chunks(zq_state *s, int j, unsigned char *buf, size_t bytes)
{
    void *d = s->links[j].dealer;
    int more = 0;
    size_t ml = sizeof more;
    for (size_t off = 0; off < bytes;) {
        size_t n = bytes - off < ZQ_CHUNK ? bytes - off : ZQ_CHUNK;
        int got = zmq_recv(d, buf + off, n, ZMQ_DONTWAIT);
        zmq_getsockopt(d, ZMQ_RCVMORE, &more, &ml);
        if (got < 0 || (size_t)got != n)
            return broke(s, j, "a payload frame of the wrong size", more);
        off += n;
        if ((off < bytes || s->net.mac) != (more != 0))
            return broke(s, j, "a message with the wrong number of payload frames", more);
    }
    return DDL_OK;
}

/* read_payload: the payload of `bytes` bytes into buf or, with view, lent in s->view; with
 * DDL_MAC the tag after it, checked against the prefix and payload. */
static int read_payload(zq_state *s, int j, const unsigned char *pre, unsigned char *buf, const void **view,
                        size_t bytes)
{
    int st = view ? read_view(s, j, bytes, view) : read_chunks(s, j, buf, bytes);
    if (st != DDL_OK || !s->net.mac)
        return st;
    void *d = s->links[j].dealer;
    unsigned char tag[DDL__MAC_BYTES];
    int more = 0;
    size_t ml = sizeof more;
    int got = zmq_recv(d, tag, sizeof tag, ZMQ_DONTWAIT);
    zmq_getsockopt(d, ZMQ_RCVMORE, &more, &ml);
    if (got != (int)sizeof tag || more)
        return broke(s, j, "a message without its MAC", more);
    ddl__mac m;
    ddl__mac_frame_begin(&s->net, j, 0, &m);
    ddl__mac_update(&m, pre, DDL__FRAME_PREFIX);
    ddl__mac_update(&m, view ? *view : buf, bytes);
    return ddl__mac_frame_check(&s->net, j, &m, tag);
}

/* try_recv: one message from rank j if there is one: 1 received, 0 nothing yet, < 0 failed. */
static int try_recv(zq_state *s, int j, void *recv_hdr, void *buf, const void **view, size_t bytes)
{
    ddl__net *n = &s->net;
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, s->links[j].dealer, ZMQ_DONTWAIT) < 0) {
        int e = errno;
        zmq_msg_close(&m);
        return e == EAGAIN || e == EINTR ? 0 : ddl__net_fail(n, DDL_EIO, "rank %d: receiving from rank %d: %s", n->rank, j,
                                                             zmq_strerror(e));
    }
    unsigned char pre[DDL__FRAME_PREFIX];
    size_t size = zmq_msg_size(&m);
    int more = zmq_msg_more(&m);
    if (size == DDL__FRAME_PREFIX)
        memcpy(pre, zmq_msg_data(&m), DDL__FRAME_PREFIX);
    zmq_msg_close(&m);
    ddl__frame f;
    if (size != DDL__FRAME_PREFIX)
        return broke(s, j, "a frame that is not a message prefix", more);
    if (!ddl__net_frame_read(n, pre, &f))
        return broke(s, j, "a bad message prefix", more);
    if (f.flags)
        return ddl__net_peer_left(n, j, pre, bytes);
    if (f.bytes > DDL__FRAME_MAX_PAYLOAD || (f.bytes > 0 || n->mac) != (more != 0))
        return broke(s, j, "a prefix that does not match its payload", more);
    if (recv_hdr)
        memcpy(recv_hdr, pre + 16, DDL_HEADER_BYTES);
    if (f.bytes != (uint64_t)bytes) { /* messages are whole in ZeroMQ: drop it, the link stays in step */
        if (more)
            ddl__zq_drain_parts(s->links[j].dealer);
        if (n->mac) { /* unread, but counted: the next frame's MAC key follows this one's */
            ddl__mac skipped;
            ddl__mac_frame_begin(n, j, 0, &skipped);
        }
        return ddl__net_fail(n, DDL_EMISMATCH, "rank %d at %s sent a message of %llu bytes, rank %d expected %zu", j,
                             n->peers[j].addr, (unsigned long long)f.bytes, n->rank, bytes);
    }
    int st = read_payload(s, j, pre, buf, view, bytes);
    return st == DDL_OK ? 1 : st;
}

/* ---- exchange ---- */

/* wait_events: poll the receiving DEALER, every monitor and the ROUTER (impostors get their
 * refusal), then take what came in. */
static int wait_events(zq_state *s, int from, int left)
{
    zmq_pollitem_t *it = s->items;
    int n = 0, wait_ms = left;
    it[n++] = (zmq_pollitem_t){.socket = s->links[from].dealer, .events = ZMQ_POLLIN};
    for (int j = 0; j < s->net.world; j++)
        if (s->links[j].monitor)
            it[n++] = (zmq_pollitem_t){.socket = s->links[j].monitor, .events = ZMQ_POLLIN};
    it[n++] = (zmq_pollitem_t){.socket = s->router, .events = ZMQ_POLLIN};
    int st = check_links(s, from, &wait_ms);
    if (st != DDL_OK)
        return st;
    if (zmq_poll(it, n, wait_ms) < 0 && errno != EINTR)
        return ddl__net_fail(&s->net, DDL_EIO, "rank %d: zmq_poll: %s", s->net.rank, zmq_strerror(errno));
    for (int j = 0; j < s->net.world; j++)
        if (j != s->net.rank)
            ddl__zq_drain_monitor(s, j, 1);
    ddl__zq_router_step(s);
    ddl__zq_expire(s);
    return check_links(s, from, &wait_ms);
}

/* exchange: the body of exchange (view NULL) and exchange_view. */
static int exchange(zq_state *s, int to, const void *send_hdr, const void *send_buf, size_t send_bytes, int from,
                    void *recv_hdr, void *recv_buf, const void **view, size_t recv_bytes, int timeout_ms)
{
    if (!s || s->net.magic != ZQ_STATE_MAGIC || !s->opened)
        return DDL_EINVAL;
    release_view(s);
    ddl__net *n = &s->net;
    unsigned char pre[DDL__FRAME_PREFIX];
    int st = ddl__net_check_peer(n, to, 1);
    if (st == DDL_OK)
        st = ddl__net_check_peer(n, from, 0);
    if (st == DDL_OK && to >= 0) { /* queued whole at once: libzmq's I/O thread sends while we receive */
        ddl__net_frame_prefix(n, pre, 0, send_bytes, send_hdr);
        st = send_msg(s, to, pre, send_buf, send_bytes);
    }
    if (st != DDL_OK || from < 0)
        return st;
    if (timeout_ms <= 0)
        timeout_ms = n->timeout_ms;
    int64_t deadline_ms = ddl__now_ms() + timeout_ms;
    for (int quick = 1;;) {
        int r = try_recv(s, from, recv_hdr, recv_buf, view, recv_bytes);
        if (r != 0)
            return r < 0 ? r : DDL_OK;
        int left = ddl__remaining_ms(deadline_ms);
        if ((st = ddl__net_stalled(n)) != DDL_OK) /* interrupted: the heartbeat names the rank */
            return st;
        if (left == 0)
            return ddl__net_fail(n, DDL_ETIMEDOUT, "rank %d timed out after %d ms waiting for rank %d at %s to send %zu bytes",
                                 n->rank, timeout_ms, from, n->peers[from].addr, recv_bytes);
        /* The message is usually on its way: wait on its socket alone first. zmq_poll checks
         * each socket's command mailbox before and after it sleeps (a poll and a getpid system
         * call each): over the monitors and the ROUTER too that made a 4 KiB all-reduce of 2
         * ranks 18% slower. A dead link is then noticed at most ZQ_QUICK_MS later. */
        if (quick) {
            quick = 0;
            zmq_pollitem_t it = {.socket = s->links[from].dealer, .events = ZMQ_POLLIN};
            if (zmq_poll(&it, 1, left < ZQ_QUICK_MS ? left : ZQ_QUICK_MS) > 0)
                continue;
        }
        if ((st = wait_events(s, from, left < DDL__NET_WAIT_SLICE_MS ? left : DDL__NET_WAIT_SLICE_MS)) != DDL_OK)
            return st;
    }
}

static int zq_exchange(void *state, int to, const void *send_hdr, const void *send_buf, size_t send_bytes, int from,
                       void *recv_hdr, void *recv_buf, size_t recv_bytes, int timeout_ms)
{
    return exchange(state, to, send_hdr, send_buf, send_bytes, from, recv_hdr, recv_buf, NULL, recv_bytes, timeout_ms);
}

/* zq_exchange_view: the payload stays in libzmq's message (a copy fewer), lent until the next call. */
static int zq_exchange_view(void *state, int to, const void *send_hdr, const void *send_buf, size_t send_bytes,
                            int from, void *recv_hdr, const void **recv_view, size_t recv_bytes, int timeout_ms)
{
    if (from < 0 || !recv_view || recv_bytes == 0 || recv_bytes > ZQ_CHUNK)
        return DDL_EINVAL;
    return exchange(state, to, send_hdr, send_buf, send_bytes, from, recv_hdr, NULL, recv_view, recv_bytes,
                    timeout_ms);
}

/* ---- close ---- */

/* say_goodbye: BYE or ABORT (net.c) to every rank we can still reach; the ROUTER lingers up to
 * 500 ms so that they arrive. Not after an interrupt: the comm has given the links up (a silent
 * rank named, or an elastic regroup, whose notes tell the peers), and a goodbye queued to a rank
 * that just died would hold the close for the whole linger (a regroup took 0.5-1 s, and a rank
 * silent that long was left out). */
static void say_goodbye(zq_state *s)
{
    if (atomic_load(&s->net.stalled)) {
        set_int(s->router, ZMQ_LINGER, 0);
        return;
    }
    unsigned char pre[DDL__FRAME_PREFIX];
    ddl__net_goodbye(&s->net, pre);
    for (int j = 0; j < s->net.world; j++)
        if (j != s->net.rank && s->links[j].rid_bytes && !s->net.peers[j].tx_down)
            (void)send_msg(s, j, pre, NULL, 0);
    set_int(s->router, ZMQ_LINGER, 500);
}

static void zq_close(void *state)
{
    zq_state *s = state;
    if (!s || s->net.magic != ZQ_STATE_MAGIC)
        return;
    release_view(s);
    if (s->router && s->opened)
        say_goodbye(s);
    if (s->router)
        zmq_close(s->router);
    s->router = NULL;
    for (int j = 0; j < s->net.world; j++) {
        zq_link *l = &s->links[j];
        if (l->dealer)
            zmq_close(l->dealer);
        if (l->monitor)
            zmq_close(l->monitor);
        l->dealer = l->monitor = NULL;
    }
    if (s->ctx)
        zmq_ctx_term(s->ctx); /* waits for the goodbyes, at most the ROUTER's linger */
    s->ctx = NULL;
    s->net.magic = 0;
}

/* ---- vtable ---- */

static const ddl_transport zq_transport = {
    .version = DDL_TRANSPORT_VERSION,
    .name = "zmq",
    .state_bytes = zq_state_bytes,
    .open = zq_open,
    .close = zq_close,
    .exchange = zq_exchange,
    .allreduce = NULL,
    .error = ddl__net_error,
    .peer_address = ddl__net_address,
    .interrupt = ddl__net_interrupt,
    .exchange_view = zq_exchange_view,
    .view_max = ZQ_CHUNK,
};

const ddl_transport *ddl_transport_zmq(void) { return &zq_transport; }

#else

const ddl_transport *ddl_transport_zmq(void) { return NULL; }

#endif
