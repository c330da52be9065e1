/* tcp.c - the TCP transport: rendezvous (at a master rank or from a static peer list), a full
 * mesh of authenticated links, and framed point-to-point exchange over non-blocking sockets.
 * It owns the sockets and every byte of its state, which lives in the memory the core hands
 * to open(); it allocates nothing. It moves bytes only: the 32-byte header is opaque here.
 * It must not bind wider than told, read a length it has not bounded, or wait without a limit.
 * The handshake itself is in tcp_handshake.c. */
#include "tcp_impl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ---- frames ----
 * [u32 magic][u32 flags][u64 payload_bytes][32-byte header][payload], little endian. */

#define FRAME_MAGIC 0x314c4444U /* "DDL1" */
#define FRAME_PREFIX DDL__FRAME_PREFIX
#define FRAME_BYE 1U   /* flags: the sender closes its comm on purpose */
#define FRAME_ABORT 2U /* flags: the sender closes after a failure; header: i32 culprit rank, i32 status */
#define FRAME_MAX_PAYLOAD ((uint64_t)1 << 40) /* more than this is a lie, not a message */
#define TCP_MAX_WORLD 65536

/* ---- shared helpers ---- */

int tcp__fail(tcp_state *s, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    s->failed = 1;
    if (!s->fail_status)
        s->fail_status = status;
    ddl__log(s->log, s->log_ud, DDL_LOG_DEBUG, "tcp: rank %d: %s", s->rank, s->err);
    return status;
}

int tcp__io_full(int fd, void *buf, size_t n, int writing, int64_t deadline_ms)
{
    unsigned char *p = buf;
    size_t done = 0;
    while (done < n) {
        ssize_t k = writing ? send(fd, p + done, n - done, MSG_NOSIGNAL | MSG_DONTWAIT)
                            : recv(fd, p + done, n - done, MSG_DONTWAIT);
        if (k > 0) {
            done += (size_t)k;
            continue;
        }
        if (k == 0 && !writing)
            return DDL_EPEER;
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return errno == EPIPE || errno == ECONNRESET ? DDL_EPEER : DDL_EIO;
        struct pollfd pf = {.fd = fd, .events = writing ? POLLOUT : POLLIN};
        int left = ddl__remaining_ms(deadline_ms);
        if (left == 0)
            return DDL_ETIMEDOUT;
        if (poll(&pf, 1, left) < 0 && errno != EINTR)
            return DDL_EIO;
    }
    return DDL_OK;
}

void tcp__tune(int fd)
{
    int one = 1, buf = 4 << 20;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
}

/* ---- addresses ---- */

/* parse_addr: "host:port" or "[v6]:port" into ss. Numeric hosts need no resolver; names go
 * through getaddrinfo (the only place libc may allocate for us). */
static int parse_addr(const char *text, struct sockaddr_storage *ss, socklen_t *len)
{
    char host[DDL__ADDR_BYTES];
    int port;
    if (ddl__split_addr(text, host, &port) != 0)
        return -1;
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        *len = sizeof *a4;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        *len = sizeof *a6;
        return 0;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res)
        return -1;
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    if (ss->ss_family == AF_INET)
        a4->sin_port = htons((uint16_t)port);
    else
        a6->sin6_port = htons((uint16_t)port);
    return 0;
}

void tcp__format_addr(const struct sockaddr_storage *ss, char out[DDL__ADDR_BYTES])
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        snprintf(out, DDL__ADDR_BYTES, "[%s]:%d", host, ntohs(a->sin6_port));
    } else {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        snprintf(out, DDL__ADDR_BYTES, "%s:%d", host, ntohs(a->sin_port));
    }
}

/* ---- listening and connecting ---- */

/* listen_on: bind exactly ss (port 0: any free port) and record the address we got. */
static int listen_on(tcp_state *s, const struct sockaddr_storage *ss, socklen_t len, const char *what)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return tcp__fail(s, DDL_EIO, "rank %d: socket: %s", s->rank, strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    s->listen_fd = fd;
    char want[DDL__ADDR_BYTES];
    tcp__format_addr(ss, want);
    if (bind(fd, (const struct sockaddr *)ss, len) != 0 || listen(fd, 128) != 0)
        return tcp__fail(s, DDL_EIO, "rank %d: cannot listen on %s (%s): %s", s->rank, want, what, strerror(errno));
    struct sockaddr_storage got;
    socklen_t gl = sizeof got;
    getsockname(fd, (struct sockaddr *)&got, &gl);
    tcp__format_addr(&got, s->listen_addr);
    return DDL_OK;
}

/* connect_once: one non-blocking connect attempt; 0, or an errno. */
static int connect_once(const struct sockaddr_storage *ss, socklen_t len, int64_t deadline_ms, int *out)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    int e = 0;
    if (connect(fd, (const struct sockaddr *)ss, len) != 0) {
        e = errno;
        if (e == EINPROGRESS) {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            int left = ddl__remaining_ms(deadline_ms);
            if (poll(&pf, 1, left > 2000 ? 2000 : left) <= 0) {
                e = ETIMEDOUT;
            } else {
                socklen_t el = sizeof e;
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
            }
        }
    }
    if (e) {
        close(fd);
        return e;
    }
    *out = fd;
    return 0;
}

/* connect_retry: connect to `addr` (rank `peer`), retrying while nobody listens there yet. */
static int connect_retry(tcp_state *s, int peer, const char *addr, int64_t deadline_ms, int *out)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (parse_addr(addr, &ss, &len) != 0)
        return tcp__fail(s, DDL_EINVAL, "rank %d: cannot parse or resolve the address '%s' of rank %d", s->rank,
                         addr, peer);
    int backoff = 10, e = 0;
    for (;;) {
        e = connect_once(&ss, len, deadline_ms, out);
        if (e == 0)
            return DDL_OK;
        if (e != ECONNREFUSED && e != ETIMEDOUT && e != EHOSTUNREACH && e != ENETUNREACH && e != ECONNRESET &&
            e != EAGAIN && e != EINTR)
            break;
        int left = ddl__remaining_ms(deadline_ms);
        if (left == 0)
            return tcp__fail(s, DDL_ETIMEDOUT, "rank %d timed out after %d ms connecting to rank %d at %s (%s)",
                             s->rank, s->timeout_ms, peer, addr, strerror(e));
        struct timespec ts = {0, (long)(backoff < left ? backoff : left) * 1000000L};
        nanosleep(&ts, NULL);
        backoff = backoff < 200 ? backoff * 2 : 200;
    }
    return tcp__fail(s, DDL_EIO, "rank %d: cannot connect to rank %d at %s: %s", s->rank, peer, addr, strerror(e));
}

/* connect_rank: connect to rank j at links[j].addr, authenticate, make it a link. */
static int connect_rank(tcp_state *s, int j, int64_t deadline_ms)
{
    int fd = -1;
    int st = connect_retry(s, j, s->links[j].addr, deadline_ms, &fd);
    if (st != DDL_OK)
        return st;
    if ((st = tcp__greet(s, fd, j, deadline_ms)) != DDL_OK) {
        close(fd);
        return st;
    }
    tcp__tune(fd);
    s->links[j].fd = fd;
    return DDL_OK;
}

/* ---- rendezvous ---- */

/* rendezvous_peers: every rank's address is known; listen on ours, connect down, accept up. */
static int rendezvous_peers(tcp_state *s, const char *peers, int64_t deadline_ms)
{
    char msg[DDL_ERR_BYTES];
    int st = ddl__parse_peers(peers, s->rank, s->world, s->links[0].addr, sizeof s->links[0], msg, sizeof msg);
    if (st != DDL_OK)
        return tcp__fail(s, st, "%s", msg);
    struct sockaddr_storage ss;
    socklen_t len;
    if (parse_addr(s->links[s->rank].addr, &ss, &len) != 0)
        return tcp__fail(s, DDL_EINVAL, "rank %d: cannot parse or resolve our own address '%s'", s->rank,
                         s->links[s->rank].addr);
    st = listen_on(s, &ss, len, "our entry in the peer list");
    for (int j = 0; j < s->rank && st == DDL_OK; j++)
        st = connect_rank(s, j, deadline_ms);
    if (st == DDL_OK && s->rank + 1 < s->world)
        st = tcp__accept_ranks(s, s->rank + 1, s->world - 1, 0, deadline_ms);
    return st;
}

/* send_table: rank 0 tells rank r every rank's listening address: "DDLT", u32 world, world x 64 bytes. */
static int send_table(tcp_state *s, int r, int64_t deadline_ms)
{
    unsigned char buf[64 * DDL__ADDR_BYTES];
    memcpy(buf, TCP_TABLE_MAGIC, 4);
    ddl__put_le(buf + 4, (uint64_t)s->world, 4);
    int st = tcp__io_full(s->links[r].fd, buf, 8, 1, deadline_ms);
    for (int j = 0; j < s->world && st == DDL_OK; j += 64) {
        int k = s->world - j < 64 ? s->world - j : 64;
        memset(buf, 0, sizeof buf);
        for (int i = 0; i < k; i++)
            memcpy(buf + (size_t)i * DDL__ADDR_BYTES, s->links[j + i].addr, DDL__ADDR_BYTES);
        st = tcp__io_full(s->links[r].fd, buf, (size_t)k * DDL__ADDR_BYTES, 1, deadline_ms);
    }
    if (st != DDL_OK)
        return tcp__fail(s, st == DDL_ETIMEDOUT ? st : DDL_EPEER,
                         "rank 0: could not send the address table to rank %d at %s", r, s->links[r].addr);
    return DDL_OK;
}

static int recv_table(tcp_state *s, int64_t deadline_ms)
{
    unsigned char buf[DDL__ADDR_BYTES];
    int st = tcp__io_full(s->links[0].fd, buf, 8, 0, deadline_ms);
    if (st == DDL_OK && ddl__get_le(buf, 4) == FRAME_MAGIC && (ddl__get_le(buf + 4, 4) & FRAME_ABORT) &&
        tcp__io_full(s->links[0].fd, buf + 8, FRAME_PREFIX - 8, 0, deadline_ms) == DDL_OK) {
        int why = (int)(int32_t)(uint32_t)ddl__get_le(buf + 20, 4); /* rank 0 gave up: say why */
        return tcp__fail(s, DDL_EPEER, "rank %d: rank 0 at %s gave up the rendezvous (%s)", s->rank, s->links[0].addr,
                         ddl_strerror(why));
    }
    if (st == DDL_OK && (memcmp(buf, TCP_TABLE_MAGIC, 4) != 0 || ddl__get_le(buf + 4, 4) != (uint64_t)s->world))
        return tcp__fail(s, DDL_EPROTO, "rank 0 at %s sent a bad address table", s->links[0].addr);
    for (int j = 0; j < s->world && st == DDL_OK; j++) {
        st = tcp__io_full(s->links[0].fd, buf, DDL__ADDR_BYTES, 0, deadline_ms);
        if (st == DDL_OK && (buf[DDL__ADDR_BYTES - 1] != 0 || buf[0] == 0))
            return tcp__fail(s, DDL_EPROTO, "rank 0 at %s sent a bad address for rank %d", s->links[0].addr, j);
        if (st == DDL_OK && j != 0)
            memcpy(s->links[j].addr, buf, DDL__ADDR_BYTES);
    }
    if (st != DDL_OK)
        return tcp__fail(s, st == DDL_ETIMEDOUT ? st : DDL_EPEER,
                         "rank %d: rank 0 at %s did not send the address table (%s)", s->rank, s->links[0].addr,
                         ddl_strerror(st));
    return DDL_OK;
}

/* rendezvous_master: rank 0 listens at the master address and collects every rank's listening
 * address; the others learn it from rank 0, then connect to the ranks below them. */
static int rendezvous_master(tcp_state *s, const char *master, int64_t deadline_ms)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (strlen(master) >= DDL__ADDR_BYTES || parse_addr(master, &ss, &len) != 0)
        return tcp__fail(s, DDL_EINVAL, "rank %d: cannot parse or resolve the master address '%.100s' (want host:port)",
                         s->rank, master);
    snprintf(s->links[0].addr, DDL__ADDR_BYTES, "%s", master);
    int st;
    if (s->rank == 0) {
        if ((st = listen_on(s, &ss, len, "the master address")) != DDL_OK)
            return st;
        snprintf(s->links[0].addr, DDL__ADDR_BYTES, "%s", s->listen_addr);
        st = tcp__accept_ranks(s, 1, s->world - 1, 1, deadline_ms);
        for (int r = 1; r < s->world && st == DDL_OK; r++)
            st = send_table(s, r, deadline_ms);
        return st;
    }
    int fd = -1;
    if ((st = connect_retry(s, 0, master, deadline_ms, &fd)) != DDL_OK)
        return st;
    s->links[0].fd = fd; /* closed by close() whatever happens next */
    struct sockaddr_storage local;
    socklen_t ll = sizeof local;
    getsockname(fd, (struct sockaddr *)&local, &ll);
    if (local.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&local)->sin6_port = 0;
    else
        ((struct sockaddr_in *)&local)->sin_port = 0;
    if ((st = listen_on(s, &local, ll, "the address we reach the master from")) != DDL_OK)
        return st;
    if ((st = tcp__greet(s, fd, 0, deadline_ms)) != DDL_OK)
        return st;
    tcp__tune(fd);
    if ((st = recv_table(s, deadline_ms)) != DDL_OK)
        return st;
    for (int j = 1; j < s->rank && st == DDL_OK; j++)
        st = connect_rank(s, j, deadline_ms);
    if (st == DDL_OK && s->rank + 1 < s->world)
        st = tcp__accept_ranks(s, s->rank + 1, s->world - 1, 0, deadline_ms);
    return st;
}

/* ---- open and close ---- */

/* layout: offsets of the arrays after the struct; returns the total size. */
static size_t layout(size_t world, size_t *links_at, size_t *pfd_at, size_t *rank_at)
{
    size_t n_pfd = world + TCP_PENDING + 1;
    size_t a = ddl__align_up(sizeof(tcp_state));
    size_t b = a + ddl__align_up(world * sizeof(tcp_link));
    size_t c = b + ddl__align_up(n_pfd * sizeof(struct pollfd));
    if (links_at) {
        *links_at = a;
        *pfd_at = b;
        *rank_at = c;
    }
    return c + ddl__align_up(n_pfd * sizeof(int));
}

static size_t tcp_state_bytes(const ddl_comm_config *cfg)
{
    int w = cfg ? cfg->world_size : 1;
    return layout(w >= 1 && w <= TCP_MAX_WORLD ? (size_t)w : 1, NULL, NULL, NULL);
}

static int tcp_setup(tcp_state *s, const ddl_comm_config *cfg)
{
    size_t la, pa, ra;
    layout((size_t)cfg->world_size, &la, &pa, &ra);
    s->links = (tcp_link *)((unsigned char *)s + la);
    s->pfd = (struct pollfd *)((unsigned char *)s + pa);
    s->pfd_rank = (int *)((unsigned char *)s + ra);
    s->magic = TCP_STATE_MAGIC;
    s->listen_fd = -1;
    s->culprit = -1;
    for (int i = 0; i < TCP_PENDING; i++)
        s->pending[i].fd = -1;
    for (int j = 0; j < cfg->world_size; j++)
        s->links[j].fd = -1;
    s->rank = cfg->rank;
    s->world = cfg->world_size;
    s->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 30000;
    s->log = cfg->log;
    s->log_ud = cfg->log_ud;
    s->token = cfg->token ? cfg->token : "";
    s->token_bytes = strlen(s->token);
    const char *job = cfg->job ? cfg->job : "";
    if (strlen(job) >= DDL__JOB_BYTES)
        return tcp__fail(s, DDL_EINVAL, "job id '%.40s...' is longer than %d characters", job, DDL__JOB_BYTES - 1);
    memcpy(s->job, job, strlen(job) + 1);
    return DDL_OK;
}

static int tcp_open(void *state, const ddl_comm_config *cfg)
{
    tcp_state *s = state;
    if (!s || !cfg || cfg->world_size < 1 || cfg->world_size > TCP_MAX_WORLD || cfg->rank < 0 ||
        cfg->rank >= cfg->world_size)
        return DDL_EINVAL;
    int st = tcp_setup(s, cfg);
    if (st != DDL_OK || s->world == 1)
        return st;
    int64_t deadline_ms = ddl__now_ms() + s->timeout_ms;
    if (cfg->peers && cfg->peers[0])
        st = rendezvous_peers(s, cfg->peers, deadline_ms);
    else if (cfg->master && cfg->master[0])
        st = rendezvous_master(s, cfg->master, deadline_ms);
    else
        st = tcp__fail(s, DDL_EINVAL, "tcp needs a rendezvous: set DDL_MASTER=host:port or DDL_PEERS=h:p,h:p,...");
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    s->listen_fd = -1;
    s->token = NULL;
    s->token_bytes = 0;
    if (st == DDL_OK)
        ddl__log(s->log, s->log_ud, DDL_LOG_INFO, "tcp: rank %d of %d connected (job %s)", s->rank, s->world, s->job);
    return st;
}

/* say_goodbye: BYE tells the peer we leave on purpose; ABORT that we leave after a failure,
 * naming the rank we found dead, so that every rank can name the same culprit. Then we drain
 * what the peer sent, so that close() sends FIN, not a reset that could destroy the frame. */
static void say_goodbye(const tcp_state *s, int fd)
{
    unsigned char pre[FRAME_PREFIX], hdr[DDL_HEADER_BYTES] = {0}, sink[4096];
    ddl__put_le(hdr, (uint32_t)s->culprit, 4);
    ddl__put_le(hdr + 4, (uint32_t)s->fail_status, 4);
    ddl__frame_prefix(pre, FRAME_MAGIC, s->failed ? FRAME_ABORT : FRAME_BYE, 0, hdr);
    (void)!send(fd, pre, sizeof pre, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(fd, SHUT_WR);
    for (int i = 0; i < 256 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++)
        ;
}

static void tcp_close(void *state)
{
    tcp_state *s = state;
    if (!s || s->magic != TCP_STATE_MAGIC)
        return;
    for (int j = 0; j < s->world; j++) {
        tcp_link *l = &s->links[j];
        if (l->fd < 0)
            continue;
        if (!l->tx_down)
            say_goodbye(s, l->fd);
        close(l->fd);
        l->fd = -1;
    }
    for (int i = 0; i < TCP_PENDING; i++)
        if (s->pending[i].fd >= 0)
            close(s->pending[i].fd);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    s->magic = 0;
}

static const char *tcp_error(const void *state)
{
    const tcp_state *s = state;
    return s ? s->err : "";
}

static const char *tcp_peer_address(const void *state, int r)
{
    const tcp_state *s = state;
    if (!s || s->magic != TCP_STATE_MAGIC || r < 0 || r >= s->world)
        return "?";
    if (r == s->rank)
        return s->listen_addr[0] ? s->listen_addr : "self";
    return s->links[r].addr[0] ? s->links[r].addr : "?";
}

/* ---- exchange ---- */

/* One direction of an exchange in progress. */
typedef struct xfer {
    int peer, fd;                      /* peer -1: nothing to do */
    unsigned char pre[FRAME_PREFIX];   /* frame prefix, sent or received */
    size_t pre_done;
    unsigned char *buf;                /* payload */
    size_t bytes, done;
    int finished;
} xfer;

/* link_down: a direction of a link failed (a half-moved frame, a payload left unread), or the
 * whole link (LINK_DROP: dead or lying peer, closed at once). */
enum { LINK_TX = 1, LINK_RX = 2, LINK_BOTH = 3, LINK_DROP = 7 };

static void link_down(tcp_state *s, int j, int status, int how)
{
    tcp_link *l = &s->links[j];
    if ((how & LINK_TX) && !l->tx_down)
        l->tx_down = status;
    if ((how & LINK_RX) && !l->rx_down)
        l->rx_down = status;
    if (status == DDL_EPEER && s->culprit < 0)
        s->culprit = j;
    if ((how & 4) && l->fd >= 0) {
        close(l->fd);
        l->fd = -1;
    }
}

static int os_error(tcp_state *s, int peer, int e, const char *what, size_t bytes)
{
    const char *addr = s->links[peer].addr;
    if (e == EPIPE || e == ECONNRESET || e == ENOTCONN) {
        link_down(s, peer, DDL_EPEER, LINK_DROP);
        return tcp__fail(s, DDL_EPEER, "rank %d at %s closed the connection (%s) while rank %d %s %zu bytes", peer, addr,
                         strerror(e), s->rank, what, bytes);
    }
    link_down(s, peer, DDL_EIO, LINK_BOTH);
    return tcp__fail(s, DDL_EIO, "rank %d: %s %zu bytes with rank %d at %s failed: %s", s->rank, what, bytes, peer,
                     addr, strerror(e));
}

/* send_some: send until the socket is full. 1: finished, 0: would block, < 0: failed. */
static int send_some(tcp_state *s, xfer *x)
{
    for (;;) {
        struct iovec iov[2];
        int n = 0;
        if (x->pre_done < FRAME_PREFIX)
            iov[n++] = (struct iovec){x->pre + x->pre_done, FRAME_PREFIX - x->pre_done};
        if (x->done < x->bytes)
            iov[n++] = (struct iovec){x->buf + x->done, x->bytes - x->done};
        if (n == 0) {
            x->finished = 1;
            return 1;
        }
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t k = sendmsg(x->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return os_error(s, x->peer, errno, "was sending", x->bytes);
        size_t got = (size_t)k, p = FRAME_PREFIX - x->pre_done < got ? FRAME_PREFIX - x->pre_done : got;
        x->pre_done += p;
        x->done += got - p;
    }
}

/* peer_aborted: rank j closed after a failure; name the rank it found dead, if any. */
static int peer_aborted(tcp_state *s, int j, const unsigned char *pre)
{
    int culprit = (int)(int32_t)(uint32_t)ddl__get_le(pre + 16, 4);
    int status = (int)(int32_t)(uint32_t)ddl__get_le(pre + 20, 4);
    link_down(s, j, DDL_EPEER, LINK_DROP);
    if (culprit >= 0 && culprit < s->world && culprit != s->rank && culprit != j) {
        s->culprit = culprit;
        return tcp__fail(s, DDL_EPEER, "rank %d at %s closed the connection (reported by rank %d at %s, noticed by rank %d)",
                         culprit, s->links[culprit].addr, j, s->links[j].addr, s->rank);
    }
    return tcp__fail(s, DDL_EPEER, "rank %d at %s left the job after a failure (%s), noticed by rank %d", j,
                     s->links[j].addr, ddl_strerror(status), s->rank);
}

/* check_prefix: a complete frame prefix arrived: is it a frame of the expected size? */
static int check_prefix(tcp_state *s, xfer *x, void *recv_hdr)
{
    const char *addr = s->links[x->peer].addr;
    uint32_t magic = (uint32_t)ddl__get_le(x->pre, 4), flags = (uint32_t)ddl__get_le(x->pre + 4, 4);
    uint64_t len = ddl__get_le(x->pre + 8, 8);
    if (magic != FRAME_MAGIC || (flags & ~(FRAME_BYE | FRAME_ABORT)) != 0) {
        link_down(s, x->peer, DDL_EPROTO, LINK_DROP);
        return tcp__fail(s, DDL_EPROTO, "rank %d at %s broke the protocol: bad frame (magic 0x%08x, flags 0x%x); dropped it",
                         x->peer, addr, magic, flags);
    }
    if (flags & FRAME_ABORT)
        return peer_aborted(s, x->peer, x->pre);
    if (flags & FRAME_BYE) {
        link_down(s, x->peer, DDL_EPEER, LINK_DROP);
        return tcp__fail(s, DDL_EPEER, "rank %d at %s closed the connection (it left the job) while rank %d waited for %zu bytes",
                         x->peer, addr, s->rank, x->bytes);
    }
    if (len > FRAME_MAX_PAYLOAD) {
        link_down(s, x->peer, DDL_EPROTO, LINK_DROP);
        return tcp__fail(s, DDL_EPROTO, "rank %d at %s broke the protocol: a frame claims %llu bytes; dropped it",
                         x->peer, addr, (unsigned long long)len);
    }
    if (recv_hdr)
        memcpy(recv_hdr, x->pre + 16, DDL_HEADER_BYTES);
    if (len != (uint64_t)x->bytes) {
        link_down(s, x->peer, DDL_EMISMATCH, LINK_RX); /* its payload is still in the stream; sending still works */
        return tcp__fail(s, DDL_EMISMATCH, "rank %d at %s sent a message of %llu bytes, rank %d expected %zu", x->peer,
                         addr, (unsigned long long)len, s->rank, x->bytes);
    }
    return DDL_OK;
}

/* recv_some: receive until the socket is empty. 1: finished, 0: would block, < 0: failed. */
static int recv_some(tcp_state *s, xfer *x, void *recv_hdr)
{
    for (;;) {
        int in_pre = x->pre_done < FRAME_PREFIX;
        ssize_t k = in_pre ? recv(x->fd, x->pre + x->pre_done, FRAME_PREFIX - x->pre_done, MSG_DONTWAIT)
                           : recv(x->fd, x->buf + x->done, x->bytes - x->done, MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return os_error(s, x->peer, errno, "was waiting for", x->bytes);
        if (k == 0) {
            link_down(s, x->peer, DDL_EPEER, LINK_DROP);
            return tcp__fail(s, DDL_EPEER, "rank %d at %s closed the connection while rank %d waited for %zu bytes (got %zu)",
                             x->peer, s->links[x->peer].addr, s->rank, x->bytes, x->done);
        }
        if (in_pre) {
            x->pre_done += (size_t)k;
            if (x->pre_done < FRAME_PREFIX)
                continue;
            int st = check_prefix(s, x, recv_hdr);
            if (st != DDL_OK)
                return st;
        } else {
            x->done += (size_t)k;
        }
        if (x->pre_done == FRAME_PREFIX && x->done == x->bytes) {
            x->finished = 1;
            return 1;
        }
    }
}

/* check_hup: link j reported a hang-up while we waited for others. With nothing left to read
 * the peer is gone (a peer leaving on purpose sends BYE first, which stays queued). */
static int check_hup(tcp_state *s, int j, short revents, int busy_with)
{
    tcp_link *l = &s->links[j];
    int queued = 0;
    ioctl(l->fd, FIONREAD, &queued);
    if (!(revents & (POLLHUP | POLLERR)) && queued > 0) {
        unsigned char pre[FRAME_PREFIX];
        if (queued >= FRAME_PREFIX && recv(l->fd, pre, sizeof pre, MSG_PEEK | MSG_DONTWAIT) == FRAME_PREFIX &&
            ddl__get_le(pre, 4) == FRAME_MAGIC && (ddl__get_le(pre + 4, 4) & FRAME_ABORT))
            return peer_aborted(s, j, pre);
        l->hup_pending = 1; /* data or BYE still to read: decide when the caller reads it */
        return DDL_OK;
    }
    link_down(s, j, DDL_EPEER, LINK_DROP);
    return tcp__fail(s, DDL_EPEER, "rank %d at %s closed the connection (noticed by rank %d while exchanging with rank %d)",
                     j, l->addr, s->rank, busy_with);
}

/* wait_io: poll the active links and every other link (for hang-ups) up to left ms. */
static int wait_io(tcp_state *s, const xfer *xs, const xfer *xr, int left, int *try_s, int *try_r)
{
    int n = 0, is = -1, ir = -1;
    if (!xs->finished) {
        s->pfd[n] = (struct pollfd){.fd = xs->fd, .events = POLLOUT | (s->links[xs->peer].hup_pending ? 0 : POLLRDHUP)};
        is = n++;
    }
    if (!xr->finished) {
        if (is >= 0 && xs->fd == xr->fd) {
            s->pfd[is].events |= POLLIN;
            ir = is;
        } else {
            s->pfd[n] = (struct pollfd){.fd = xr->fd, .events = POLLIN};
            ir = n++;
        }
    }
    int first_other = n;
    for (int j = 0; j < s->world; j++) {
        const tcp_link *l = &s->links[j];
        if (j == s->rank || l->fd < 0 || l->tx_down || l->rx_down || l->hup_pending || (is >= 0 && j == xs->peer) ||
            (ir >= 0 && j == xr->peer))
            continue;
        s->pfd[n] = (struct pollfd){.fd = l->fd, .events = POLLRDHUP};
        s->pfd_rank[n++] = j;
    }
    if (poll(s->pfd, (nfds_t)n, left) < 0 && errno != EINTR)
        return tcp__fail(s, DDL_EIO, "rank %d: poll failed: %s", s->rank, strerror(errno));
    int busy = ir >= 0 ? xr->peer : xs->peer;
    *try_s = is >= 0 && (s->pfd[is].revents & (POLLOUT | POLLERR | POLLHUP));
    *try_r = ir >= 0 && (s->pfd[ir].revents & (POLLIN | POLLERR | POLLHUP | POLLRDHUP));
    if (is >= 0 && is != ir && (s->pfd[is].revents & POLLRDHUP)) {
        int st = check_hup(s, xs->peer, s->pfd[is].revents, xs->peer);
        if (st != DDL_OK)
            return st;
    }
    for (int k = first_other; k < n; k++) {
        if (s->pfd[k].revents) {
            int st = check_hup(s, s->pfd_rank[k], s->pfd[k].revents, busy);
            if (st != DDL_OK)
                return st;
        }
    }
    return DDL_OK;
}

/* xfer_setup: check that rank `peer` can be used and prepare one direction. */
static int xfer_setup(tcp_state *s, xfer *x, int peer, const void *buf, size_t bytes, int sending)
{
    memset(x, 0, sizeof *x);
    x->peer = peer;
    x->fd = -1;
    x->finished = 1;
    if (peer == -1)
        return DDL_OK;
    if (peer < 0 || peer >= s->world || peer == s->rank)
        return tcp__fail(s, DDL_EINVAL, "rank %d: no link to rank %d (world size %d)", s->rank, peer, s->world);
    tcp_link *l = &s->links[peer];
    int down = sending ? l->tx_down : l->rx_down;
    if (down || l->fd < 0)
        return tcp__fail(s, down ? down : DDL_EPEER, "rank %d: the link to rank %d at %s is down after an earlier failure",
                         s->rank, peer, l->addr);
    x->fd = l->fd;
    x->buf = (unsigned char *)(uintptr_t)buf;
    x->bytes = bytes;
    x->finished = 0;
    return DDL_OK;
}

static int exchange_timeout(tcp_state *s, const xfer *xs, const xfer *xr, int timeout_ms)
{
    /* a half-moved frame leaves the stream out of step: such a link cannot be used again */
    if (!xs->finished && (xs->pre_done || xs->done))
        link_down(s, xs->peer, DDL_ETIMEDOUT, LINK_TX);
    if (!xr->finished && (xr->pre_done || xr->done))
        link_down(s, xr->peer, DDL_ETIMEDOUT, LINK_RX);
    if (!xr->finished)
        return tcp__fail(s, DDL_ETIMEDOUT, "rank %d timed out after %d ms waiting for rank %d at %s to send %zu bytes (got %zu)",
                         s->rank, timeout_ms, xr->peer, s->links[xr->peer].addr, xr->bytes, xr->done);
    return tcp__fail(s, DDL_ETIMEDOUT, "rank %d timed out after %d ms waiting for rank %d at %s to take %zu bytes (sent %zu)",
                     s->rank, timeout_ms, xs->peer, s->links[xs->peer].addr, xs->bytes, xs->done);
}

static int tcp_exchange(void *state, int to, const void *send_hdr, const void *send_buf, size_t send_bytes, int from,
                        void *recv_hdr, void *recv_buf, size_t recv_bytes, int timeout_ms)
{
    tcp_state *s = state;
    if (!s || s->magic != TCP_STATE_MAGIC)
        return DDL_EINVAL;
    xfer xs, xr;
    int st = xfer_setup(s, &xs, to, send_buf, send_bytes, 1);
    if (st == DDL_OK)
        st = xfer_setup(s, &xr, from, recv_buf, recv_bytes, 0);
    if (st != DDL_OK)
        return st;
    if (to >= 0)
        ddl__frame_prefix(xs.pre, FRAME_MAGIC, 0, send_bytes, send_hdr);
    if (timeout_ms <= 0)
        timeout_ms = s->timeout_ms;
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
            memcpy(mismatch_msg, s->err, sizeof mismatch_msg);
        }
        st = DDL_OK;
        if (xs.finished && xr.finished)
            break;
        int left = ddl__remaining_ms(deadline_ms);
        if (left == 0) {
            st = exchange_timeout(s, &xs, &xr, timeout_ms);
            break;
        }
        if ((st = wait_io(s, &xs, &xr, left, &try_s, &try_r)) != DDL_OK)
            break;
    }
    if (mismatch) {
        memcpy(s->err, mismatch_msg, sizeof s->err);
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
    .error = tcp_error,
    .peer_address = tcp_peer_address,
};

const ddl_transport *ddl_transport_tcp(void) { return &tcp_transport; }
