/* zmq.c - the ZeroMQ transport (libzmq 4.x): rendezvous at a master rank or from a static peer
 * list, authenticated links (zmq_handshake.c), and point-to-point exchange of framed messages.
 * It owns one libzmq context per comm and its sockets; all its own state lives in the memory the
 * core hands to open(). libzmq allocates internally (one message per frame sent or received,
 * pipes) and runs its own I/O and reaper threads inside the context: those are libzmq's, not
 * ddl's. It moves bytes only: the 32-byte header is opaque here. It must not bind wider than
 * told, accept a frame larger than it bounds (ZMQ_MAXMSGSIZE), or wait without a limit.
 * Sends copy the caller's bytes into libzmq messages, so no buffer of the caller's is held after
 * exchange returns. (Zero-copy sends, zmq_msg_init_data with a wait for libzmq's release, lost
 * messages between ranks under CPU load with libzmq 4.3.4 in our stress runs; not used.)
 * Compiled only with DDL_WITH_ZMQ; otherwise ddl_transport_zmq() returns NULL. */
#include "ddl.h"

#ifdef DDL_WITH_ZMQ
#include "zmq_impl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

/* ---- frames ----
 * A message is [prefix][payload chunk]...: prefix = u32 magic, u32 flags, u64 payload bytes,
 * 32-byte header (48 bytes, little endian); the payload follows in frames of ZQ_CHUNK bytes
 * (the last one shorter), so no frame is ever larger than ZMQ_MAXMSGSIZE allows. */

#define FRAME_MAGIC 0x5a4c4444U /* "DDLZ" */
#define FRAME_PREFIX DDL__FRAME_PREFIX
#define FRAME_BYE 1U   /* the sender closes its comm on purpose */
#define FRAME_ABORT 2U /* the sender closes after a failure; header: i32 culprit rank, i32 status */
#define FRAME_MAX_PAYLOAD ((uint64_t)1 << 40)
#define ZQ_CHUNK ((size_t)8 << 20)    /* largest payload frame (and the receive bound) */
#define ZQ_GRACE_MS 50                 /* a dropped link is dead if nothing it sent is left by then */
#define ZQ_HEARTBEAT_MS 1000           /* ZMTP pings; a silent peer is dropped after 5 of them */

/* ---- shared helpers ---- */

int zq__fail(zq_state *s, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    s->failed = 1;
    if (!s->fail_status)
        s->fail_status = status;
    ddl__log(s->log, s->log_ud, DDL_LOG_DEBUG, "zmq: rank %d: %s", s->rank, s->err);
    return status;
}

static void link_down(zq_state *s, int j, int status, int tx, int rx)
{
    zq_link *l = &s->links[j];
    if (tx && !l->tx_down)
        l->tx_down = status;
    if (rx && !l->rx_down)
        l->rx_down = status;
    if (status == DDL_EPEER && s->culprit < 0)
        s->culprit = j;
}

/* ---- addresses ---- */

/* resolve: host name or literal to a numeric address (the only place libc may allocate). */
static int resolve(const char *host, char out[DDL__ADDR_BYTES], struct sockaddr_storage *ss)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res)
        return -1;
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    const void *a = ss->ss_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)ss)->sin6_addr
                                              : (const void *)&((struct sockaddr_in *)ss)->sin_addr;
    return inet_ntop(ss->ss_family, a, out, DDL__ADDR_BYTES) ? 0 : -1;
}

/* endpoint: "tcp://host:port", brackets around IPv6 literals. */
static void endpoint(char *out, size_t n, const char *host, int port, int any_port)
{
    int v6 = strchr(host, ':') != NULL;
    if (any_port)
        snprintf(out, n, "tcp://%s%s%s:*", v6 ? "[" : "", host, v6 ? "]" : "");
    else
        snprintf(out, n, "tcp://%s%s%s:%d", v6 ? "[" : "", host, v6 ? "]" : "", port);
}

/* local_ip_toward: the address this host uses to reach ss (a UDP connect sends nothing). */
static int local_ip_toward(const struct sockaddr_storage *ss, int port, char out[DDL__ADDR_BYTES])
{
    struct sockaddr_storage dst = *ss, me;
    socklen_t len = dst.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    if (dst.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&dst)->sin6_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in *)&dst)->sin_port = htons((uint16_t)port);
    int fd = socket(dst.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0), ok = -1;
    socklen_t ml = sizeof me;
    if (fd >= 0 && connect(fd, (struct sockaddr *)&dst, len) == 0 && getsockname(fd, (struct sockaddr *)&me, &ml) == 0) {
        const void *a = me.ss_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)&me)->sin6_addr
                                                 : (const void *)&((struct sockaddr_in *)&me)->sin_addr;
        ok = inet_ntop(me.ss_family, a, out, DDL__ADDR_BYTES) ? 0 : -1;
    }
    if (fd >= 0)
        close(fd);
    return ok;
}

/* ---- sockets ---- */

static void set_int(void *sock, int opt, int v) { zmq_setsockopt(sock, opt, &v, sizeof v); }

static void common_options(void *sock, const char *host)
{
    set_int(sock, ZMQ_LINGER, 0);
    set_int(sock, ZMQ_SNDBUF, 4 << 20);
    set_int(sock, ZMQ_RCVBUF, 4 << 20);
    set_int(sock, ZMQ_HEARTBEAT_IVL, ZQ_HEARTBEAT_MS);
    set_int(sock, ZMQ_HEARTBEAT_TTL, 5 * ZQ_HEARTBEAT_MS);
    set_int(sock, ZMQ_HEARTBEAT_TIMEOUT, 5 * ZQ_HEARTBEAT_MS);
    set_int(sock, ZMQ_IPV6, strchr(host, ':') != NULL);
}

/* bind_router: our ROUTER at host:port (any_port: a free port), recording the address we got. */
static int bind_router(zq_state *s, const char *host, int port, int any_port, const char *what)
{
    char ep[DDL__ADDR_BYTES + 16];
    s->router = zmq_socket(s->ctx, ZMQ_ROUTER);
    if (!s->router)
        return zq__fail(s, DDL_EIO, "rank %d: zmq_socket: %s", s->rank, zmq_strerror(errno));
    common_options(s->router, host);
    int64_t max = DDL__HS_BYTES; /* the ROUTER only ever receives handshakes */
    zmq_setsockopt(s->router, ZMQ_MAXMSGSIZE, &max, sizeof max);
    set_int(s->router, ZMQ_ROUTER_MANDATORY, 1); /* a gone peer is an error, not a silent drop */
    set_int(s->router, ZMQ_SNDHWM, 0);           /* never EAGAIN: our sends are bounded by exchange */
    endpoint(ep, sizeof ep, host, port, any_port);
    if (zmq_bind(s->router, ep) != 0)
        return zq__fail(s, DDL_EIO, "rank %d: cannot listen on %s (%s): %s", s->rank, ep + 6, what, zmq_strerror(errno));
    char got[DDL__ADDR_BYTES + 16] = "";
    size_t gl = sizeof got;
    zmq_getsockopt(s->router, ZMQ_LAST_ENDPOINT, got, &gl);
    const char *a = strncmp(got, "tcp://", 6) == 0 ? got + 6 : got;
    if (strlen(a) >= sizeof s->addr)
        return zq__fail(s, DDL_EINVAL, "rank %d: our address %s is longer than %d characters", s->rank, a,
                        DDL__ADDR_BYTES - 1);
    memcpy(s->addr, a, strlen(a) + 1);
    return DDL_OK;
}

int zq__connect(zq_state *s, int j)
{
    zq_link *l = &s->links[j];
    char host[DDL__ADDR_BYTES], ep[DDL__ADDR_BYTES + 16], mon[48];
    int port;
    if (ddl__split_addr(l->addr, host, &port) != 0)
        return zq__fail(s, DDL_EINVAL, "rank %d: cannot parse the address '%s' of rank %d (want host:port)", s->rank,
                        l->addr, j);
    l->dealer = zmq_socket(s->ctx, ZMQ_DEALER);
    l->monitor = zmq_socket(s->ctx, ZMQ_PAIR);
    if (!l->dealer || !l->monitor)
        return zq__fail(s, DDL_EIO, "rank %d: zmq_socket: %s", s->rank, zmq_strerror(errno));
    common_options(l->dealer, host);
    set_int(l->monitor, ZMQ_LINGER, 0);
    int64_t max = (int64_t)ZQ_CHUNK + 8 + (int64_t)s->world * DDL__ADDR_BYTES;
    zmq_setsockopt(l->dealer, ZMQ_MAXMSGSIZE, &max, sizeof max);
    set_int(l->dealer, ZMQ_RECONNECT_IVL, 100);
    snprintf(mon, sizeof mon, "inproc://ddl-monitor-%d", j);
    if (zmq_socket_monitor(l->dealer, mon, ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED) != 0 ||
        zmq_connect(l->monitor, mon) != 0)
        return zq__fail(s, DDL_EIO, "rank %d: cannot monitor the link to rank %d: %s", s->rank, j, zmq_strerror(errno));
    endpoint(ep, sizeof ep, host, port, 0);
    if (zmq_connect(l->dealer, ep) != 0)
        return zq__fail(s, DDL_EINVAL, "rank %d: cannot connect to rank %d at %s: %s", s->rank, j, l->addr,
                        zmq_strerror(errno));
    return zq__send_hello(s, j);
}

/* ---- state ---- */

/* layout: offsets of the arrays after the struct; returns the total size. */
static size_t layout(size_t world, size_t *links_at, size_t *items_at, size_t *table_at)
{
    size_t a = ddl__align_up(sizeof(zq_state));
    size_t b = a + ddl__align_up(world * sizeof(zq_link));
    size_t c = b + ddl__align_up((2 * world + 3) * sizeof(zmq_pollitem_t));
    if (links_at) {
        *links_at = a;
        *items_at = b;
        *table_at = c;
    }
    return c + ddl__align_up(8 + world * DDL__ADDR_BYTES);
}

static size_t zq_state_bytes(const ddl_comm_config *cfg)
{
    int w = cfg ? cfg->world_size : 1;
    return layout(w >= 1 && w <= ZQ_MAX_WORLD ? (size_t)w : 1, NULL, NULL, NULL);
}

static int zq_setup(zq_state *s, const ddl_comm_config *cfg)
{
    size_t la, ia, ta;
    layout((size_t)cfg->world_size, &la, &ia, &ta);
    s->links = (zq_link *)((unsigned char *)s + la);
    s->items = (unsigned char *)s + ia;
    s->table = (unsigned char *)s + ta;
    s->magic = ZQ_STATE_MAGIC;
    s->culprit = -1;
    s->rank = cfg->rank;
    s->world = cfg->world_size;
    s->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 30000;
    s->log = cfg->log;
    s->log_ud = cfg->log_ud;
    s->token = cfg->token ? cfg->token : "";
    s->token_bytes = strlen(s->token);
    const char *job = cfg->job ? cfg->job : "";
    if (strlen(job) >= DDL__JOB_BYTES)
        return zq__fail(s, DDL_EINVAL, "job id '%.40s...' is longer than %d characters", job, DDL__JOB_BYTES - 1);
    memcpy(s->job, job, strlen(job) + 1);
    if (s->world == 1)
        return DDL_OK;
    s->ctx = zmq_ctx_new();
    if (!s->ctx || zmq_ctx_set(s->ctx, ZMQ_MAX_SOCKETS, 2 * s->world + 16) != 0)
        return zq__fail(s, DDL_EIO, "rank %d: cannot create a ZeroMQ context: %s", s->rank, zmq_strerror(errno));
    return DDL_OK;
}

/* ---- rendezvous ---- */

/* listen_first: bind our ROUTER where the configuration says, and start the first DEALERs. */
static int listen_first(zq_state *s, const ddl_comm_config *cfg)
{
    char host[DDL__ADDR_BYTES], num[DDL__ADDR_BYTES];
    struct sockaddr_storage ss;
    int port, st;
    if (cfg->peers && cfg->peers[0]) {
        char msg[DDL_ERR_BYTES];
        st = ddl__parse_peers(cfg->peers, s->rank, s->world, s->links[0].addr, sizeof s->links[0], msg, sizeof msg);
        if (st != DDL_OK)
            return zq__fail(s, st, "%s", msg);
        const char *mine = s->links[s->rank].addr;
        if (ddl__split_addr(mine, host, &port) != 0 || resolve(host, num, &ss) != 0)
            return zq__fail(s, DDL_EINVAL, "rank %d: cannot parse or resolve our own address '%s'", s->rank, mine);
        if ((st = bind_router(s, num, port, 0, "our entry in the peer list")) != DDL_OK)
            return st;
        for (int j = 0; j < s->world && st == DDL_OK; j++)
            st = j == s->rank ? DDL_OK : zq__connect(s, j);
        return st;
    }
    if (!cfg->master || !cfg->master[0])
        return zq__fail(s, DDL_EINVAL, "zmq needs a rendezvous: set DDL_MASTER=host:port or DDL_PEERS=h:p,h:p,...");
    s->master_mode = 1;
    if (ddl__split_addr(cfg->master, host, &port) != 0 || resolve(host, num, &ss) != 0)
        return zq__fail(s, DDL_EINVAL, "rank %d: cannot parse or resolve the master address '%.100s' (want host:port)",
                        s->rank, cfg->master);
    snprintf(s->links[0].addr, DDL__ADDR_BYTES, "%s", cfg->master);
    if (s->rank == 0)
        return bind_router(s, num, port, 0, "the master address");
    char me[DDL__ADDR_BYTES];
    if (local_ip_toward(&ss, port, me) != 0)
        return zq__fail(s, DDL_EIO, "rank %d: no local address reaches the master %s", s->rank, cfg->master);
    if ((st = bind_router(s, me, 0, 1, "the address we reach the master from")) != DDL_OK)
        return st;
    return zq__connect(s, 0);
}

/* open_done: every rank passed our handshake and we passed theirs (and the table went out). */
static int open_done(zq_state *s, char *missing, size_t n)
{
    int count = 0;
    size_t used = 0;
    missing[0] = 0;
    for (int j = 0; j < s->world; j++) {
        if (j == s->rank || (s->links[j].rid_bytes && s->links[j].client == ZQ_C_DONE))
            continue;
        if (used + 16 < n)
            used += (size_t)snprintf(missing + used, n - used, "%s%d", count ? ", " : "", j);
        count++;
    }
    return count == 0 && (!s->master_mode || s->rank != 0 || s->tables_sent);
}

/* open_poll: wait for handshake traffic on the ROUTER and the DEALERs still in a handshake. */
static int open_poll(zq_state *s, int64_t deadline_ms)
{
    zmq_pollitem_t *it = s->items;
    int n = 0;
    it[n++] = (zmq_pollitem_t){.socket = s->router, .events = ZMQ_POLLIN};
    for (int j = 0; j < s->world; j++) {
        zq_link *l = &s->links[j];
        if (l->dealer && l->client != ZQ_C_DONE)
            it[n++] = (zmq_pollitem_t){.socket = l->dealer, .events = ZMQ_POLLIN};
    }
    int left = ddl__remaining_ms(deadline_ms);
    if (zmq_poll(it, n, left < 100 ? left : 100) < 0 && errno != EINTR)
        return zq__fail(s, DDL_EIO, "rank %d: zmq_poll: %s", s->rank, zmq_strerror(errno));
    zq__router_step(s);
    zq__expire(s);
    for (int j = 0; j < s->world; j++) {
        int st = s->links[j].dealer ? zq__client_step(s, j) : DDL_OK;
        if (st != DDL_OK)
            return st;
    }
    return DDL_OK;
}

static void drain_monitor(zq_state *s, int j, int track);

static int handshakes(zq_state *s, int64_t deadline_ms)
{
    char missing[96];
    while (!open_done(s, missing, sizeof missing)) {
        if (ddl__remaining_ms(deadline_ms) == 0)
            return zq__fail(s, DDL_ETIMEDOUT, "rank %d timed out after %d ms at %s: no handshake yet with rank%s %s",
                            s->rank, s->timeout_ms, s->addr, strchr(missing, ',') ? "s" : "", missing);
        int st = open_poll(s, deadline_ms);
        if (st != DDL_OK)
            return st;
        if (!s->master_mode || s->rank != 0)
            continue;
        int all = 1; /* rank 0: connect back to every rank that joined; the table once all have */
        for (int j = 1; j < s->world && st == DDL_OK; j++) {
            all &= s->links[j].rid_bytes != 0;
            if (s->links[j].rid_bytes && !s->links[j].dealer)
                st = zq__connect(s, j);
        }
        if (st == DDL_OK && all && !s->tables_sent)
            st = zq__send_tables(s);
        if (st != DDL_OK)
            return st;
    }
    for (int j = 0; j < s->world; j++)
        if (j != s->rank)
            drain_monitor(s, j, 0); /* the connections so far are the good ones */
    return DDL_OK;
}

static int zq_open(void *state, const ddl_comm_config *cfg)
{
    zq_state *s = state;
    if (!s || !cfg || cfg->world_size < 1 || cfg->world_size > ZQ_MAX_WORLD || cfg->rank < 0 ||
        cfg->rank >= cfg->world_size)
        return DDL_EINVAL;
    int st = zq_setup(s, cfg);
    if (st != DDL_OK || s->world == 1)
        return st;
    int64_t deadline_ms = ddl__now_ms() + s->timeout_ms;
    st = listen_first(s, cfg);
    if (st == DDL_OK)
        st = handshakes(s, deadline_ms);
    s->token = NULL;
    s->token_bytes = 0;
    if (st == DDL_OK) {
        s->opened = 1;
        ddl__log(s->log, s->log_ud, DDL_LOG_INFO, "zmq: rank %d of %d connected at %s (job %s)", s->rank, s->world,
                 s->addr, s->job);
    }
    return st;
}

/* ---- events ---- */

/* drain_monitor: read link j's events: a drop starts the grace period; a new connection after
 * a drop means someone else answers at that address now (track 0: just discard). */
static void drain_monitor(zq_state *s, int j, int track)
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
        if (e == ZMQ_EVENT_DISCONNECTED && !l->down_at_ms)
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
    int64_t now = ddl__now_ms();
    for (int j = 0; j < s->world; j++) {
        zq_link *l = &s->links[j];
        if (j == s->rank || !l->down_at_ms || l->rx_down)
            continue;
        if (l->reconnected) {
            link_down(s, j, DDL_EPEER, 1, 1);
            return zq__fail(s, DDL_EPEER, "rank %d at %s dropped its connection and something else answers there now "
                            "(noticed by rank %d)", j, l->addr, s->rank);
        }
        int64_t since = now - l->down_at_ms;
        if (since < ZQ_GRACE_MS) {
            *wait_ms = (int)(ZQ_GRACE_MS - since) < *wait_ms ? (int)(ZQ_GRACE_MS - since) : *wait_ms;
            continue;
        }
        if (has_message(l->dealer))
            continue; /* data or BYE still to read: decided when the caller reads it */
        link_down(s, j, DDL_EPEER, 1, 1);
        return zq__fail(s, DDL_EPEER, "rank %d at %s closed the connection (noticed by rank %d while exchanging with rank %d)",
                        j, l->addr, s->rank, busy);
    }
    return DDL_OK;
}

/* ---- sending ---- */

static int send_failed(zq_state *s, int j, size_t bytes)
{
    int e = errno;
    if (e == EHOSTUNREACH) {
        link_down(s, j, DDL_EPEER, 1, 0);
        return zq__fail(s, DDL_EPEER, "rank %d at %s closed the connection before rank %d could send %zu bytes", j,
                        s->links[j].addr, s->rank, bytes);
    }
    link_down(s, j, DDL_EIO, 1, 0);
    return zq__fail(s, DDL_EIO, "rank %d: sending %zu bytes to rank %d at %s failed: %s", s->rank, bytes, j,
                    s->links[j].addr, zmq_strerror(e));
}

/* send_msg: queue [rid][prefix][chunks] on the ROUTER (libzmq copies each chunk). Never blocks:
 * the ROUTER's SNDHWM is 0 and exchange() bounds what is queued to one message per call. */
static int send_msg(zq_state *s, int j, uint32_t flags, const void *hdr, const void *buf, size_t bytes)
{
    zq_link *l = &s->links[j];
    unsigned char pre[FRAME_PREFIX];
    ddl__frame_prefix(pre, FRAME_MAGIC, flags, bytes, hdr);
    if (zmq_send(s->router, l->rid, l->rid_bytes, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(s->router, pre, sizeof pre, (bytes ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0)
        return send_failed(s, j, bytes);
    const unsigned char *p = buf;
    for (size_t off = 0; off < bytes;) {
        size_t n = bytes - off < ZQ_CHUNK ? bytes - off : ZQ_CHUNK;
        if (zmq_send(s->router, p + off, n, (off + n < bytes ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0)
            return send_failed(s, j, bytes);
        off += n;
    }
    return DDL_OK;
}

/* ---- receiving ---- */

static void drain_parts(void *sock)
{
    int more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        more = zmq_msg_recv(&m, sock, ZMQ_DONTWAIT) >= 0 && zmq_msg_more(&m);
        zmq_msg_close(&m);
    }
}

/* broke: rank j sent something we cannot read; more: we are inside a message (drop its rest). */
static int broke(zq_state *s, int j, const char *what, int more)
{
    if (more)
        drain_parts(s->links[j].dealer);
    link_down(s, j, DDL_EPROTO, 0, 1);
    return zq__fail(s, DDL_EPROTO, "rank %d at %s broke the protocol: %s; rank %d reads no more from it", j,
                    s->links[j].addr, what, s->rank);
}

/* peer_left: a BYE or ABORT frame from rank j. */
static int peer_left(zq_state *s, int j, uint32_t flags, const unsigned char *pre, size_t want)
{
    const char *addr = s->links[j].addr;
    link_down(s, j, DDL_EPEER, 1, 1);
    if (flags & FRAME_ABORT) {
        int culprit = (int)(int32_t)(uint32_t)ddl__get_le(pre + 16, 4);
        int status = (int)(int32_t)(uint32_t)ddl__get_le(pre + 20, 4);
        if (culprit >= 0 && culprit < s->world && culprit != s->rank && culprit != j) {
            s->culprit = culprit;
            return zq__fail(s, DDL_EPEER, "rank %d at %s closed the connection (reported by rank %d at %s, noticed by rank %d)",
                            culprit, s->links[culprit].addr, j, addr, s->rank);
        }
        return zq__fail(s, DDL_EPEER, "rank %d at %s left the job after a failure (%s), noticed by rank %d", j, addr,
                        ddl_strerror(status), s->rank);
    }
    return zq__fail(s, DDL_EPEER, "rank %d at %s closed the connection (it left the job) while rank %d waited for %zu bytes",
                    j, addr, s->rank, want);
}

/* read_payload: the chunks of a message of `bytes` bytes, straight into buf. */
static int read_payload(zq_state *s, int j, unsigned char *buf, size_t bytes)
{
    void *d = s->links[j].dealer;
    for (size_t off = 0; off < bytes;) {
        size_t n = bytes - off < ZQ_CHUNK ? bytes - off : ZQ_CHUNK;
        int got = zmq_recv(d, buf + off, n, ZMQ_DONTWAIT);
        int more = 0;
        size_t ml = sizeof more;
        zmq_getsockopt(d, ZMQ_RCVMORE, &more, &ml);
        if (got < 0 || (size_t)got != n)
            return broke(s, j, "a payload frame of the wrong size", more);
        off += n;
        if ((off < bytes) != (more != 0))
            return broke(s, j, "a message with the wrong number of payload frames", more);
    }
    return DDL_OK;
}

/* try_recv: one message from rank j if there is one: 1 received, 0 nothing yet, < 0 failed. */
static int try_recv(zq_state *s, int j, void *recv_hdr, void *buf, size_t bytes)
{
    zq_link *l = &s->links[j];
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, l->dealer, ZMQ_DONTWAIT) < 0) {
        int e = errno;
        zmq_msg_close(&m);
        return e == EAGAIN || e == EINTR ? 0 : zq__fail(s, DDL_EIO, "rank %d: receiving from rank %d: %s", s->rank, j,
                                                        zmq_strerror(e));
    }
    unsigned char pre[FRAME_PREFIX];
    size_t n = zmq_msg_size(&m);
    int more = zmq_msg_more(&m);
    if (n == FRAME_PREFIX)
        memcpy(pre, zmq_msg_data(&m), FRAME_PREFIX);
    zmq_msg_close(&m);
    if (n != FRAME_PREFIX)
        return broke(s, j, "a frame that is not a message prefix", more);
    uint32_t magic = (uint32_t)ddl__get_le(pre, 4), flags = (uint32_t)ddl__get_le(pre + 4, 4);
    uint64_t len = ddl__get_le(pre + 8, 8);
    if (magic != FRAME_MAGIC || (flags & ~(FRAME_BYE | FRAME_ABORT)) != 0)
        return broke(s, j, "a bad message prefix", more);
    if (flags)
        return peer_left(s, j, flags, pre, bytes);
    if (len > FRAME_MAX_PAYLOAD || (len > 0) != (more != 0))
        return broke(s, j, "a prefix that does not match its payload", more);
    if (recv_hdr)
        memcpy(recv_hdr, pre + 16, DDL_HEADER_BYTES);
    if (len != (uint64_t)bytes) { /* messages are whole in ZeroMQ: drop it, the link stays in step */
        if (more)
            drain_parts(l->dealer);
        return zq__fail(s, DDL_EMISMATCH, "rank %d at %s sent a message of %llu bytes, rank %d expected %zu", j, l->addr,
                        (unsigned long long)len, s->rank, bytes);
    }
    int st = read_payload(s, j, buf, bytes);
    return st == DDL_OK ? 1 : st;
}

/* ---- exchange ---- */

static int check_use(zq_state *s, int peer, int sending)
{
    if (peer == -1)
        return DDL_OK;
    if (peer < 0 || peer >= s->world || peer == s->rank)
        return zq__fail(s, DDL_EINVAL, "rank %d: no link to rank %d (world size %d)", s->rank, peer, s->world);
    zq_link *l = &s->links[peer];
    int down = sending ? l->tx_down : l->rx_down;
    if (down || (sending && !s->router))
        return zq__fail(s, down ? down : DDL_EIO, "rank %d: the link to rank %d at %s is down after an earlier failure",
                        s->rank, peer, l->addr);
    return DDL_OK;
}

/* wait_events: poll the receiving DEALER, every monitor and the ROUTER (impostors get their
 * refusal), then take what came in. */
static int wait_events(zq_state *s, int from, int left)
{
    zmq_pollitem_t *it = s->items;
    int n = 0, wait_ms = left;
    it[n++] = (zmq_pollitem_t){.socket = s->links[from].dealer, .events = ZMQ_POLLIN};
    for (int j = 0; j < s->world; j++)
        if (s->links[j].monitor)
            it[n++] = (zmq_pollitem_t){.socket = s->links[j].monitor, .events = ZMQ_POLLIN};
    it[n++] = (zmq_pollitem_t){.socket = s->router, .events = ZMQ_POLLIN};
    int st = check_links(s, from, &wait_ms);
    if (st != DDL_OK)
        return st;
    if (zmq_poll(it, n, wait_ms) < 0 && errno != EINTR)
        return zq__fail(s, DDL_EIO, "rank %d: zmq_poll: %s", s->rank, zmq_strerror(errno));
    for (int j = 0; j < s->world; j++)
        if (j != s->rank)
            drain_monitor(s, j, 1);
    zq__router_step(s);
    zq__expire(s);
    return check_links(s, from, &wait_ms);
}

static int zq_exchange(void *state, int to, const void *send_hdr, const void *send_buf, size_t send_bytes, int from,
                       void *recv_hdr, void *recv_buf, size_t recv_bytes, int timeout_ms)
{
    zq_state *s = state;
    if (!s || s->magic != ZQ_STATE_MAGIC || !s->opened)
        return DDL_EINVAL;
    int st = check_use(s, to, 1);
    if (st == DDL_OK)
        st = check_use(s, from, 0);
    if (st == DDL_OK && to >= 0) /* queued whole at once: libzmq's I/O thread sends while we receive */
        st = send_msg(s, to, 0, send_hdr, send_buf, send_bytes);
    if (st != DDL_OK || from < 0)
        return st;
    if (timeout_ms <= 0)
        timeout_ms = s->timeout_ms;
    int64_t deadline_ms = ddl__now_ms() + timeout_ms;
    for (;;) {
        int r = try_recv(s, from, recv_hdr, recv_buf, recv_bytes);
        if (r != 0)
            return r < 0 ? r : DDL_OK;
        int left = ddl__remaining_ms(deadline_ms);
        if (left == 0)
            return zq__fail(s, DDL_ETIMEDOUT, "rank %d timed out after %d ms waiting for rank %d at %s to send %zu bytes",
                            s->rank, timeout_ms, from, s->links[from].addr, recv_bytes);
        if ((st = wait_events(s, from, left)) != DDL_OK)
            return st;
    }
}

/* ---- close ---- */

/* say_goodbye: BYE (we leave on purpose) or ABORT naming the rank we found dead, to every rank
 * we can still reach; the ROUTER lingers up to 500 ms so they arrive. */
static void say_goodbye(zq_state *s)
{
    unsigned char hdr[DDL_HEADER_BYTES] = {0};
    ddl__put_le(hdr, (uint32_t)s->culprit, 4);
    ddl__put_le(hdr + 4, (uint32_t)s->fail_status, 4);
    for (int j = 0; j < s->world; j++) {
        zq_link *l = &s->links[j];
        if (j != s->rank && l->rid_bytes && !l->tx_down)
            (void)send_msg(s, j, s->failed ? FRAME_ABORT : FRAME_BYE, hdr, NULL, 0);
    }
    set_int(s->router, ZMQ_LINGER, 500);
}

static void zq_close(void *state)
{
    zq_state *s = state;
    if (!s || s->magic != ZQ_STATE_MAGIC)
        return;
    if (s->router && s->opened)
        say_goodbye(s);
    if (s->router)
        zmq_close(s->router);
    s->router = NULL;
    for (int j = 0; j < s->world; j++) {
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
    s->magic = 0;
}

static const char *zq_error(const void *state)
{
    const zq_state *s = state;
    return s ? s->err : "";
}

static const char *zq_peer_address(const void *state, int r)
{
    const zq_state *s = state;
    if (!s || s->magic != ZQ_STATE_MAGIC || r < 0 || r >= s->world)
        return "?";
    if (r == s->rank)
        return s->addr[0] ? s->addr : "self";
    return s->links[r].addr[0] ? s->links[r].addr : "?";
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
    .error = zq_error,
    .peer_address = zq_peer_address,
};

const ddl_transport *ddl_transport_zmq(void) { return &zq_transport; }

#else

const ddl_transport *ddl_transport_zmq(void) { return NULL; }

#endif
