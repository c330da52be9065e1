/* tcp.c - the TCP transport: a full mesh of authenticated links over non-blocking sockets, and
 * framed point-to-point exchange on them. Where to rendezvous, rank 0's address table, the
 * frame prefix and failure recording are net.c's; the handshake is net_handshake.c's, the pool
 * of connections not authenticated yet net_pool.c's; listening, dialing, greeting and moving
 * bytes with deadlines are net_socket.c's. The order of the rendezvous, the accept loop, and
 * the links and their failures during an exchange are this file's.
 * It owns the sockets and every byte of its state, which lives in the memory the core hands
 * to open(); it allocates nothing. It moves bytes only: the 32-byte header is opaque here.
 * It must not bind wider than told, read a length it has not bounded, or wait without a limit. */
#include "net.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- state ---- */

#define TCP_MAX_WORLD 65536
#define TCP_STATE_MAGIC 0x7463702dU /* marks a state that open() has initialised */

/* Handshake messages start with "DDLH", proofs with "ddl-v1", frames with "DDL1". */
static const ddl__net_proto tcp_proto = {
    .name = "tcp", .hs_magic = "DDLH", .label = "ddl-v1", .version = 1, .duplicate = "duplicate rank",
    .frame_magic = 0x314c4444U, .two_way_links = 1,
};

/* The socket of the link to one other rank (what else we know of it is in net.peers). */
typedef struct tcp_link {
    int fd;                    /* -1: none */
    int hup_pending;           /* the peer shut its side with data still queued: decide on reading */
} tcp_link;

typedef struct tcp_state {
    ddl__net net;              /* first: net.c's getters serve as ours */
    int listen_fd;
    ddl__net_pool pool;        /* connections accepted, not yet authenticated: keyed by their fd */
    tcp_link *links;           /* [world], inside the state memory, as net.peers */
    struct pollfd *pfd;        /* [world + DDL__POOL_SLOTS + 1] */
    int *pfd_rank;             /* [world + DDL__POOL_SLOTS + 1]: which link or slot each pfd is */
    unsigned char *table;      /* [DDL__TABLE_BYTES(world)]: rank 0's address table */
    ddl__mac rx_mac;           /* DDL_MAC: the running MAC of the frame being received */
} tcp_state;
_Static_assert(offsetof(tcp_state, net) == 0, "net.c's getters take the state for its ddl__net");

/* ---- handshake, accepting side ---- */

static int slot_fd(const ddl__net_slot *p)
{
    int fd;
    memcpy(&fd, p->key, sizeof fd);
    return fd;
}

static void slot_drop(tcp_state *s, ddl__net_slot *p)
{
    close(slot_fd(p));
    ddl__net_pool_drop(&s->pool, p);
}

/* slot_refuse: tell a peer that said who it is why (best effort, never blocks); log; close. */
static void slot_refuse(tcp_state *s, ddl__net_slot *p, uint32_t reason)
{
    int claims = reason != DDL__HS_R_GARBAGE && reason != DDL__HS_R_SILENT; /* else: maybe no hello */
    unsigned char buf[DDL__HS_BYTES];
    ddl__net_pool_refuse(&s->pool, p, reason, claims, buf);
    if (claims)
        (void)!send(slot_fd(p), buf, sizeof buf, MSG_NOSIGNAL | MSG_DONTWAIT);
    slot_drop(s, p);
}

/* slot_read: read what is there; answer a whole message, refuse the peer, or make it a link. */
static void slot_read(tcp_state *s, ddl__net_slot *p)
{
    int fd = slot_fd(p);
    ssize_t k = recv(fd, p->msg + p->got, DDL__HS_BYTES - p->got, MSG_DONTWAIT);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (k <= 0) {
        ddl__log(s->net.log, s->net.log_ud, DDL_LOG_WARN, "tcp: %s hung up during the handshake", p->hs.from);
        slot_drop(s, p);
        return;
    }
    unsigned char out[DDL__HS_BYTES];
    uint32_t reason;
    int act = ddl__net_pool_feed(&s->pool, p, (size_t)k, out, &reason);
    if (act == DDL__ACCEPT_REFUSE)
        slot_refuse(s, p, reason);
    else if (act == DDL__ACCEPT_DROP || (act && ddl__sock_io(fd, out, sizeof out, 1, ddl__now_ms() + 100) != DDL_OK))
        slot_drop(s, p); /* handshake messages are small enough never to block for long */
    else if (act == DDL__ACCEPT_JOINED) {
        int r = ddl__net_pool_join(&s->pool, p);
        s->links[r].fd = fd;
        s->net.peers[r].linked = 1;
        ddl__sock_tune(fd);
    }
}

/* drop_pending: close every connection still in a handshake. */
static void drop_pending(tcp_state *s)
{
    for (int i = 0; i < DDL__POOL_SLOTS; i++)
        if (s->pool.slot[i].hs.stage)
            slot_drop(s, &s->pool.slot[i]);
}

/* turn_away: a newcomer gets no slot (its source holds its share, or every slot is busy): tell
 * it to greet again (best effort, never blocks), as a real rank does, and close. */
static void turn_away(tcp_state *s, int fd, const char *from)
{
    unsigned char buf[DDL__HS_BYTES];
    ddl__net_pool_busy(&s->pool, buf);
    (void)!send(fd, buf, sizeof buf, MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
    ddl__log(s->net.log, s->net.log_ud, DDL_LOG_DEBUG, "tcp: rank %d: no handshake slot for %s now; it greets again",
             s->net.rank, from);
}

/* accept_some: take what waits on the listening socket (up to a pool's worth, so that the kernel's
 * queue never fills with strangers), each into a slot the pool admits it to (a free one, or one
 * it gives up: ddl__net_pool_admit), or turn it away; while no newcomer can get a slot, the rest
 * waits in the queue. A real peer's HELLO is usually there at once: read it now. */
static void accept_some(tcp_state *s)
{
    for (int k = 0; k < DDL__POOL_SLOTS && ddl__net_pool_open(&s->pool); k++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        char from[DDL__ADDR_BYTES];
        int fd = accept4(s->listen_fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        ddl__net_format(&ss, from);
        ddl__net_slot *v, *p;
        if (!ddl__net_pool_admit(&s->pool, from, &v)) {
            turn_away(s, fd, from);
            continue;
        }
        if (v) {
            ddl__log(s->net.log, s->net.log_ud, DDL_LOG_DEBUG, "tcp: %s gave its handshake slot to %s", v->hs.from, from);
            slot_drop(s, v);
        }
        if ((p = ddl__net_pool_start(&s->pool, &fd, sizeof fd, from)) != NULL)
            slot_read(s, p);
        else
            close(fd);
    }
}

/* poll_pending: refuse the silent; poll the handshakes in progress and the listening socket.
 * The number of pfd entries, or -1 if poll failed. */
static int poll_pending(tcp_state *s, int64_t deadline_ms, int64_t report_ms)
{
    ddl__net_slot *p;
    while ((p = ddl__net_pool_silent(&s->pool)) != NULL)
        slot_refuse(s, p, DDL__HS_R_SILENT);
    int n = 0;
    for (int i = 0; i < DDL__POOL_SLOTS; i++) {
        if (!s->pool.slot[i].hs.stage)
            continue;
        s->pfd[n] = (struct pollfd){.fd = slot_fd(&s->pool.slot[i]), .events = POLLIN};
        s->pfd_rank[n++] = i;
    }
    if (ddl__net_pool_open(&s->pool)) { /* else the queue waits until a slot may be taken over (pool_wake) */
        s->pfd[n] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
        s->pfd_rank[n++] = -1;
    }
    int64_t wake = ddl__net_pool_wake(&s->pool, deadline_ms);
    int wait_ms = ddl__remaining_ms(report_ms && report_ms < wake ? report_ms : wake);
    return poll(s->pfd, (nfds_t)n, wait_ms) < 0 && errno != EINTR ? -1 : n;
}

/* accept_ranks: accept and authenticate connections until ranks lo..hi all have links;
 * take_addr: keep the listening address each advertises (master rendezvous). Impostors are
 * refused and logged; the wait goes on until deadline_ms. */
static int accept_ranks(tcp_state *s, int lo, int hi, int take_addr, int64_t deadline_ms)
{
    ddl__net *net = &s->net;
    char miss[96];
    int status = DDL_OK;
    int64_t started = ddl__now_ms(), report = 0;
    ddl__net_pool_welcome(&s->pool, lo, hi, take_addr);
    while (ddl__net_missing(net, lo, hi, miss, sizeof miss) > 0) {
        ddl__net_waiting(net, started, &report, miss);
        if (ddl__now_ms() >= deadline_ms) {
            status = ddl__net_fail(net, DDL_ETIMEDOUT, "rank %d timed out after %d ms waiting at %s for rank%s %s to connect",
                                   net->rank, net->timeout_ms, net->addr, strchr(miss, ',') ? "s" : "", miss);
            break;
        }
        int n = poll_pending(s, deadline_ms, report);
        if (n < 0) {
            status = ddl__net_fail(net, DDL_EIO, "rank %d: poll failed while accepting: %s", net->rank, strerror(errno));
            break;
        }
        for (int k = 0; k < n; k++) {
            int i = s->pfd_rank[k];
            if (s->pfd[k].revents && i < 0)
                accept_some(s);
            else if (s->pfd[k].revents && s->pool.slot[i].hs.stage)
                slot_read(s, &s->pool.slot[i]);
        }
    }
    drop_pending(s);
    return status;
}

/* ---- rendezvous ---- */

/* connect_rank: connect to rank j, authenticate, make it a link. */
static int connect_rank(tcp_state *s, int j, int64_t deadline_ms)
{
    int fd = -1;
    int st = ddl__net_dial_greet(&s->net, j, deadline_ms, &fd);
    if (st == DDL_OK) {
        ddl__sock_tune(fd);
        s->links[j].fd = fd;
        s->net.peers[j].linked = 1;
    }
    return st;
}

/* connect_down_accept_up: connect to ranks from..rank-1, then accept the ranks above us. */
static int connect_down_accept_up(tcp_state *s, int from, int64_t deadline_ms)
{
    int st = DDL_OK;
    for (int j = from; j < s->net.rank && st == DDL_OK; j++)
        st = connect_rank(s, j, deadline_ms);
    if (st == DDL_OK && s->net.rank + 1 < s->net.world)
        st = accept_ranks(s, s->net.rank + 1, s->net.world - 1, 0, deadline_ms);
    return st;
}

/* send_table: rank 0 sends rank r every rank's listening address. */
static int send_table(tcp_state *s, int r, int64_t deadline_ms)
{
    ddl__net *n = &s->net;
    int st = ddl__sock_io(s->links[r].fd, s->table, ddl__net_table_encode(n, s->table), 1, deadline_ms);
    if (st != DDL_OK)
        return ddl__net_fail(n, st == DDL_ETIMEDOUT ? st : DDL_EPEER,
                             "rank 0: could not send the address table to rank %d at %s", r, n->peers[r].addr);
    return DDL_OK;
}

/* recv_table: rank 0's table, or its ABORT if it gave up waiting for the others. */
static int recv_table(tcp_state *s, int64_t deadline_ms)
{
    ddl__net *n = &s->net;
    int fd = s->links[0].fd;
    unsigned char pre[DDL__FRAME_PREFIX];
    int st = ddl__sock_io(fd, pre, DDL__TABLE_HEAD, 0, deadline_ms);
    if (st == DDL_OK && ddl__net_frame_is_abort(n, pre) &&
        ddl__sock_io(fd, pre + 8, DDL__FRAME_PREFIX - 8, 0, deadline_ms) == DDL_OK)
        return ddl__net_fail(n, DDL_EPEER, "rank %d: rank 0 at %s gave up the rendezvous (%s)", n->rank,
                             n->peers[0].addr, ddl_strerror((int)(int32_t)(uint32_t)ddl__get_le(pre + 20, 4)));
    if (st == DDL_OK && (st = ddl__net_table_head_ok(n, pre)) != DDL_OK)
        return st;
    memcpy(s->table, pre, DDL__TABLE_HEAD);
    if (st == DDL_OK && (st = ddl__sock_io(fd, s->table + DDL__TABLE_HEAD, DDL__TABLE_BYTES(n->world) - DDL__TABLE_HEAD,
                                           0, deadline_ms)) == DDL_OK)
        return ddl__net_table_decode(n, s->table, DDL__TABLE_BYTES(n->world));
    return ddl__net_fail(n, st == DDL_ETIMEDOUT ? st : DDL_EPEER,
                         "rank %d: rank 0 at %s did not send the address table (%s)", n->rank, n->peers[0].addr,
                         ddl_strerror(st));
}

/* rendezvous_master: rank 0 listens at the master address (ss) and collects every rank's
 * listening address; the others learn it from rank 0, then connect to the ranks below them. */
static int rendezvous_master(tcp_state *s, const struct sockaddr_storage *ss, socklen_t len, int64_t deadline_ms)
{
    ddl__net *n = &s->net;
    int st;
    if (n->rank == 0) {
        if ((st = ddl__net_listen(n, ss, len, "the master address", &s->listen_fd)) != DDL_OK)
            return st;
        snprintf(n->peers[0].addr, DDL__ADDR_BYTES, "%s", n->addr);
        st = accept_ranks(s, 1, n->world - 1, 1, deadline_ms);
        for (int r = 1; r < n->world && st == DDL_OK; r++)
            st = send_table(s, r, deadline_ms);
        return st;
    }
    struct sockaddr_storage local;
    socklen_t ll;
    if (ddl__net_local_toward(ss, &local, &ll) != 0)
        return ddl__net_fail(n, DDL_EIO, "rank %d: no local address reaches the master %s", n->rank, n->peers[0].addr);
    if ((st = ddl__net_listen(n, &local, ll, "the address we reach the master from", &s->listen_fd)) != DDL_OK ||
        (st = ddl__net_dial_greet(n, 0, deadline_ms, &s->links[0].fd)) != DDL_OK)
        return st;
    ddl__sock_tune(s->links[0].fd);
    n->peers[0].linked = 1;
    if ((st = recv_table(s, deadline_ms)) != DDL_OK)
        return st;
    return connect_down_accept_up(s, 1, deadline_ms);
}

/* ---- open and close ---- */

/* layout: offsets of the arrays after the struct; returns the total size. */
static size_t layout(size_t world, size_t at[5])
{
    size_t n_pfd = world + DDL__POOL_SLOTS + 1;
    at[0] = ddl__align_up(sizeof(tcp_state));                     /* net.peers */
    at[1] = at[0] + ddl__align_up(world * sizeof(ddl__net_peer));  /* links */
    at[2] = at[1] + ddl__align_up(world * sizeof(tcp_link));       /* pfd */
    at[3] = at[2] + ddl__align_up(n_pfd * sizeof(struct pollfd));  /* pfd_rank */
    at[4] = at[3] + ddl__align_up(n_pfd * sizeof(int));            /* table */
    return at[4] + ddl__align_up(DDL__TABLE_BYTES(world));
}

static size_t tcp_state_bytes(const ddl_comm_config *cfg)
{
    int w = cfg ? cfg->world_size : 1;
    size_t at[5];
    return layout(w >= 1 && w <= TCP_MAX_WORLD ? (size_t)w : 1, at);
}

static int tcp_open(void *state, const ddl_comm_config *cfg)
{
    tcp_state *s = state;
    if (!s || !cfg || cfg->world_size < 1 || cfg->world_size > TCP_MAX_WORLD || cfg->rank < 0 ||
        cfg->rank >= cfg->world_size)
        return DDL_EINVAL;
    size_t at[5];
    layout((size_t)cfg->world_size, at);
    s->links = (tcp_link *)((unsigned char *)s + at[1]);
    s->pfd = (struct pollfd *)((unsigned char *)s + at[2]);
    s->pfd_rank = (int *)((unsigned char *)s + at[3]);
    s->table = (unsigned char *)s + at[4];
    s->listen_fd = -1;
    ddl__net_pool_init(&s->pool, &s->net);
    for (int j = 0; j < cfg->world_size; j++)
        s->links[j].fd = -1;
    int st = ddl__net_init(&s->net, TCP_STATE_MAGIC, &tcp_proto, cfg, (ddl__net_peer *)((unsigned char *)s + at[0]));
    if (st != DDL_OK || s->net.world == 1)
        return st;
    if ((st = ddl__net_check_fds(&s->net, 1)) != DDL_OK) /* one socket per other rank */
        return st;
    int64_t deadline_ms = ddl__now_ms() + s->net.timeout_ms;
    struct sockaddr_storage ss;
    socklen_t len;
    int master;
    st = ddl__net_where(&s->net, cfg, &ss, &len, &master);
    if (st == DDL_OK && master)
        st = rendezvous_master(s, &ss, len, deadline_ms);
    else if (st == DDL_OK &&
             (st = ddl__net_listen(&s->net, &ss, len, "our entry in the peer list", &s->listen_fd)) == DDL_OK)
        st = connect_down_accept_up(s, 0, deadline_ms);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    s->listen_fd = -1;
    ddl__net_opened(&s->net, st);
    return st;
}

static void tcp_close(void *state)
{
    tcp_state *s = state;
    if (!s || s->net.magic != TCP_STATE_MAGIC)
        return;
    for (int j = 0; j < s->net.world; j++) {
        tcp_link *l = &s->links[j];
        if (l->fd >= 0 && !s->net.peers[j].tx_down)
            ddl__net_goodbye_fd(&s->net, l->fd);
        if (l->fd >= 0)
            close(l->fd);
        l->fd = -1;
    }
    drop_pending(s);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    s->net.magic = 0;
}

/* ---- exchange ---- */

/* link_down: a direction of a link failed (a half-moved frame, a payload left unread), or the
 * whole link (LINK_DROP: dead or lying peer, closed at once). */
enum { LINK_TX = 1, LINK_RX = 2, LINK_BOTH = 3, LINK_DROP = 7 };

static void link_down(tcp_state *s, int j, int status, int how)
{
    ddl__net_link_down(&s->net, j, status, how & LINK_TX, how & LINK_RX);
    if ((how & 4) && s->links[j].fd >= 0) {
        close(s->links[j].fd);
        s->links[j].fd = -1;
    }
}

static int peer_left(tcp_state *s, int j, const unsigned char *pre, size_t want);

static int os_error(tcp_state *s, int peer, int e, const char *what, size_t bytes)
{
    ddl__net *n = &s->net;
    const char *addr = n->peers[peer].addr;
    if (e == EPIPE || e == ECONNRESET || e == ENOTCONN) {
        /* a peer that left after a failure said why first (ABORT naming the rank it found dead):
         * name that rank, not the messenger (64 ranks, one killed: a send to a rank that had
         * already given up broke with EPIPE before its ABORT was read) */
        unsigned char pre[DDL__FRAME_PREFIX];
        int fd = s->links[peer].fd;
        if (fd >= 0 && recv(fd, pre, sizeof pre, MSG_PEEK | MSG_DONTWAIT) == DDL__FRAME_PREFIX &&
            ddl__net_frame_is_abort(n, pre))
            return peer_left(s, peer, pre, bytes);
        link_down(s, peer, DDL_EPEER, LINK_DROP);
        return ddl__net_fail(n, DDL_EPEER, "rank %d at %s closed the connection (%s) while rank %d %s %zu bytes", peer,
                             addr, strerror(e), n->rank, what, bytes);
    }
    link_down(s, peer, DDL_EIO, LINK_BOTH);
    return ddl__net_fail(n, DDL_EIO, "rank %d: %s %zu bytes with rank %d at %s failed: %s", n->rank, what, bytes, peer,
                         addr, strerror(e));
}

/* send_some: send until the socket is full. 1: finished, 0: would block, < 0: failed. */
static int send_some(tcp_state *s, ddl__sock_frame *x)
{
    int r = ddl__sock_send_some(x);
    return r == DDL__SOCK_FAILED ? os_error(s, x->peer, errno, "was sending", x->bytes) : r;
}

/* peer_left: rank j's BYE or ABORT (pre): its link is closed at once. */
static int peer_left(tcp_state *s, int j, const unsigned char *pre, size_t want)
{
    int st = ddl__net_peer_left(&s->net, j, pre, want);
    link_down(s, j, DDL_EPEER, LINK_DROP);
    return st;
}

/* check_prefix: a complete frame prefix arrived: is it a frame of the expected size? */
static int check_prefix(tcp_state *s, ddl__sock_frame *x, void *recv_hdr)
{
    ddl__net *n = &s->net;
    const char *addr = n->peers[x->peer].addr;
    ddl__frame f;
    if (!ddl__net_frame_read(n, x->pre, &f)) {
        link_down(s, x->peer, DDL_EPROTO, LINK_DROP);
        return ddl__net_fail(n, DDL_EPROTO, "rank %d at %s broke the protocol: bad frame (magic 0x%08x, flags 0x%x); dropped it",
                             x->peer, addr, f.magic, f.flags);
    }
    if (f.flags)
        return peer_left(s, x->peer, x->pre, x->bytes);
    if (f.bytes > DDL__FRAME_MAX_PAYLOAD) {
        link_down(s, x->peer, DDL_EPROTO, LINK_DROP);
        return ddl__net_fail(n, DDL_EPROTO, "rank %d at %s broke the protocol: a frame claims %llu bytes; dropped it",
                             x->peer, addr, (unsigned long long)f.bytes);
    }
    if (recv_hdr)
        memcpy(recv_hdr, x->pre + 16, DDL_HEADER_BYTES);
    if (f.bytes != (uint64_t)x->bytes) {
        link_down(s, x->peer, DDL_EMISMATCH, LINK_RX); /* its payload is still in the stream; sending still works */
        return ddl__net_fail(n, DDL_EMISMATCH, "rank %d at %s sent a message of %llu bytes, rank %d expected %zu", x->peer,
                             addr, (unsigned long long)f.bytes, n->rank, x->bytes);
    }
    if (n->mac) { /* the payload is MAC'd as it arrives; the tag follows it */
        ddl__mac_frame_begin(n, x->peer, 0, &s->rx_mac);
        ddl__mac_update(&s->rx_mac, x->pre, DDL__FRAME_PREFIX);
        x->mac = &s->rx_mac;
    }
    return DDL_OK;
}

/* recv_some: receive until the socket is empty. 1: finished, 0: would block, < 0: failed. */
static int recv_some(tcp_state *s, ddl__sock_frame *x, void *recv_hdr)
{
    int r, st;
    while ((r = ddl__sock_recv_some(x)) == DDL__SOCK_PREFIX)
        if ((st = check_prefix(s, x, recv_hdr)) != DDL_OK)
            return st;
    if (r == DDL__SOCK_DONE && x->mac && (st = ddl__mac_frame_check(&s->net, x->peer, x->mac, x->tag)) != DDL_OK) {
        link_down(s, x->peer, DDL_EPROTO, LINK_DROP);
        return st;
    }
    if (r == DDL__SOCK_FAILED)
        return os_error(s, x->peer, errno, "was waiting for", x->bytes);
    if (r == DDL__SOCK_CLOSED) {
        link_down(s, x->peer, DDL_EPEER, LINK_DROP);
        return ddl__net_fail(&s->net, DDL_EPEER,
                             "rank %d at %s closed the connection while rank %d waited for %zu bytes (got %zu)",
                             x->peer, s->net.peers[x->peer].addr, s->net.rank, x->bytes, x->done);
    }
    return r;
}

/* check_hup: link j reported a hang-up while we waited for others. With nothing left to read
 * the peer is gone (a peer leaving on purpose sends BYE first, which stays queued). A peer that
 * left after a failure sent an ABORT naming the rank it found dead: read first, it names that
 * rank, even behind a reset (POLLERR: the peer's socket answered what arrived after it closed;
 * the ABORT before it stays readable), as os_error does for a send that broke. */
static int check_hup(tcp_state *s, int j, short revents, int busy_with)
{
    tcp_link *l = &s->links[j];
    int queued = 0;
    ioctl(l->fd, FIONREAD, &queued);
    unsigned char pre[DDL__FRAME_PREFIX];
    if (queued >= DDL__FRAME_PREFIX && recv(l->fd, pre, sizeof pre, MSG_PEEK | MSG_DONTWAIT) == DDL__FRAME_PREFIX &&
        ddl__net_frame_is_abort(&s->net, pre))
        return peer_left(s, j, pre, 0);
    if (!(revents & (POLLHUP | POLLERR)) && queued > 0) {
        l->hup_pending = 1; /* data or BYE still to read: decide when the caller reads it */
        return DDL_OK;
    }
    link_down(s, j, DDL_EPEER, LINK_DROP);
    return ddl__net_peer_gone(&s->net, j, busy_with);
}

/* wait_io: poll the active links and every other link (for hang-ups) up to left ms. */
static int wait_io(tcp_state *s, const ddl__sock_frame *xs, const ddl__sock_frame *xr, int left, int *try_s, int *try_r)
{
    int n = 0, is = -1, ir = -1;
    if (!xs->finished) {
        s->pfd[n] = (struct pollfd){.fd = xs->fd, .events = POLLOUT | (s->links[xs->peer].hup_pending ? 0 : POLLRDHUP)};
        is = n++;
    }
    if (!xr->finished && is >= 0 && xs->fd == xr->fd) {
        s->pfd[is].events |= POLLIN;
        ir = is;
    } else if (!xr->finished) {
        s->pfd[n] = (struct pollfd){.fd = xr->fd, .events = POLLIN};
        ir = n++;
    }
    int first_other = n;
    for (int j = 0; j < s->net.world; j++) {
        const ddl__net_peer *p = &s->net.peers[j];
        if (j == s->net.rank || s->links[j].fd < 0 || p->tx_down || p->rx_down || s->links[j].hup_pending ||
            (is >= 0 && j == xs->peer) || (ir >= 0 && j == xr->peer))
            continue;
        s->pfd[n] = (struct pollfd){.fd = s->links[j].fd, .events = POLLRDHUP};
        s->pfd_rank[n++] = j;
    }
    if (poll(s->pfd, (nfds_t)n, left) < 0 && errno != EINTR)
        return ddl__net_fail(&s->net, DDL_EIO, "rank %d: poll failed: %s", s->net.rank, strerror(errno));
    int busy = ir >= 0 ? xr->peer : xs->peer, st = DDL_OK;
    *try_s = is >= 0 && (s->pfd[is].revents & (POLLOUT | POLLERR | POLLHUP));
    *try_r = ir >= 0 && (s->pfd[ir].revents & (POLLIN | POLLERR | POLLHUP | POLLRDHUP));
    if (is >= 0 && is != ir && (s->pfd[is].revents & POLLRDHUP))
        st = check_hup(s, xs->peer, s->pfd[is].revents, xs->peer);
    for (int k = first_other; k < n && st == DDL_OK; k++)
        if (s->pfd[k].revents)
            st = check_hup(s, s->pfd_rank[k], s->pfd[k].revents, busy);
    return st;
}

/* xfer_setup: check that rank peer can be used and prepare one direction. */
static int xfer_setup(tcp_state *s, ddl__sock_frame *x, int peer, const void *buf, size_t bytes, int sending)
{
    memset(x, 0, sizeof *x);
    x->peer = peer;
    x->fd = -1;
    x->finished = 1;
    int st = ddl__net_check_peer(&s->net, peer, sending);
    if (st != DDL_OK || peer == -1)
        return st;
    if (s->links[peer].fd < 0) /* never connected: open() failed */
        return ddl__net_fail(&s->net, DDL_EPEER, "rank %d: the link to rank %d at %s is down after an earlier failure",
                             s->net.rank, peer, s->net.peers[peer].addr);
    x->fd = s->links[peer].fd;
    x->buf = (unsigned char *)(uintptr_t)buf;
    x->bytes = bytes;
    x->finished = 0;
    x->tag_bytes = s->net.mac ? DDL__MAC_BYTES : 0;
    return DDL_OK;
}

static int exchange_timeout(tcp_state *s, const ddl__sock_frame *xs, const ddl__sock_frame *xr, int timeout_ms)
{
    ddl__net *n = &s->net;
    /* a half-moved frame leaves the stream out of step: such a link cannot be used again */
    if (!xs->finished && (xs->pre_done || xs->done))
        link_down(s, xs->peer, DDL_ETIMEDOUT, LINK_TX);
    if (!xr->finished && (xr->pre_done || xr->done))
        link_down(s, xr->peer, DDL_ETIMEDOUT, LINK_RX);
    if (ddl__net_stalled(n) != DDL_OK) /* interrupted: the heartbeat names the rank */
        return DDL_ETIMEDOUT;
    if (!xr->finished)
        return ddl__net_fail(n, DDL_ETIMEDOUT, "rank %d timed out after %d ms waiting for rank %d at %s to send %zu bytes (got %zu)",
                             n->rank, timeout_ms, xr->peer, n->peers[xr->peer].addr, xr->bytes, xr->done);
    return ddl__net_fail(n, DDL_ETIMEDOUT, "rank %d timed out after %d ms waiting for rank %d at %s to take %zu bytes (sent %zu)",
                         n->rank, timeout_ms, xs->peer, n->peers[xs->peer].addr, xs->bytes, xs->done);
}

static int tcp_exchange(void *state, int to, const void *send_hdr, const void *send_buf, size_t send_bytes, int from,
                        void *recv_hdr, void *recv_buf, size_t recv_bytes, int timeout_ms)
{
    tcp_state *s = state;
    if (!s || s->net.magic != TCP_STATE_MAGIC)
        return DDL_EINVAL;
    ddl__sock_frame xs, xr;
    int st = xfer_setup(s, &xs, to, send_buf, send_bytes, 1);
    if (st == DDL_OK)
        st = xfer_setup(s, &xr, from, recv_buf, recv_bytes, 0);
    if (st != DDL_OK)
        return st;
    if (to >= 0)
        ddl__net_frame_prefix(&s->net, xs.pre, 0, send_bytes, send_hdr);
    if (to >= 0 && s->net.mac)
        ddl__mac_frame_tag(&s->net, to, xs.pre, send_buf, send_bytes, xs.tag);
    if (timeout_ms <= 0)
        timeout_ms = s->net.timeout_ms;
    int64_t deadline_ms = ddl__now_ms() + timeout_ms;
    int mismatch = 0, try_s = 1, try_r = 1;
    char mismatch_msg[DDL_ERR_BYTES];
    for (;;) {
        if (try_s && !xs.finished && (st = send_some(s, &xs)) < 0)
            break;
        if (try_r && !xr.finished && (st = recv_some(s, &xr, recv_hdr)) < 0) {
            if (st != DDL_EMISMATCH)
                break;
            /* read no further from that peer, but finish our own send so that its peer's view
             * of the stream stays whole and it can report its side of the disagreement */
            mismatch = 1;
            xr.finished = 1;
            memcpy(mismatch_msg, s->net.err, sizeof mismatch_msg);
        }
        st = DDL_OK;
        if (xs.finished && xr.finished)
            break;
        int left = ddl__remaining_ms(deadline_ms);
        if (left == 0 || atomic_load(&s->net.stalled)) {
            st = exchange_timeout(s, &xs, &xr, timeout_ms);
            break;
        }
        if (left > DDL__NET_WAIT_SLICE_MS)
            left = DDL__NET_WAIT_SLICE_MS;
        if ((st = wait_io(s, &xs, &xr, left, &try_s, &try_r)) != DDL_OK)
            break;
    }
    if (mismatch) {
        memcpy(s->net.err, mismatch_msg, sizeof s->net.err);
        return DDL_EMISMATCH;
    }
    return st;
}

/* ---- vtable ---- */

static const ddl_transport tcp_transport = {
    .version = DDL_TRANSPORT_VERSION,
    .name = "tcp",
    .state_bytes = tcp_state_bytes,
    .open = tcp_open,
    .close = tcp_close,
    .exchange = tcp_exchange,
    .allreduce = NULL,
    .error = ddl__net_error,
    .peer_address = ddl__net_address,
    .interrupt = ddl__net_interrupt,
};

const ddl_transport *ddl_transport_tcp(void) { return &tcp_transport; }
