/* net_socket.c - POSIX stream sockets with deadlines, for the network transports: read or
 * write all of a buffer, move a frame (prefix, then payload) as far as a non-blocking socket
 * lets it, listen exactly where told, connect with retries while nobody listens
 * yet, run the connecting side of the handshake on a connected socket, and say goodbye before
 * closing. It knows sockets and the handshake's steps (net_handshake.c), not what a transport
 * sends on them: each transport keeps its own fds and state. Every call that waits ends by its
 * deadline; nothing here allocates or calls back into a transport. */
#include "net.h"

#include <errno.h>
#ifdef __linux__
#include <linux/filter.h>
#endif
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ---- limits ---- */

#define FDS_FOR_THE_PROGRAM 64 /* its files, the heartbeat's socket, libzmq's own pollers */

int ddl__net_check_fds(ddl__net *n, int per_rank)
{
    struct rlimit rl;
    long long need = (long long)per_rank * n->world + FDS_FOR_THE_PROGRAM;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || (long long)rl.rlim_cur >= need)
        return DDL_OK;
    return ddl__net_fail(n, DDL_EINVAL,
                         "rank %d: %s with %d ranks needs about %lld open files per process, and this one may open "
                         "%llu (ulimit -n); raise the limit to %lld or more (ddlrun raises it to the hard limit, "
                         "%llu here)", n->rank, n->proto->name, n->world, need, (unsigned long long)rl.rlim_cur,
                         need, (unsigned long long)rl.rlim_max);
}

/* ---- bytes ---- */

int ddl__sock_io(int fd, void *buf, size_t n, int writing, int64_t deadline_ms)
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

void ddl__sock_tune(int fd)
{
    int one = 1, buf = 4 << 20;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
}

void ddl__net_goodbye_fd(const ddl__net *n, int fd)
{
    unsigned char pre[DDL__FRAME_PREFIX], sink[4096];
    ddl__net_goodbye(n, pre);
    (void)!send(fd, pre, sizeof pre, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(fd, SHUT_WR);
    for (int i = 0; i < 256 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++)
        ;
}

/* ---- frames ---- */

int ddl__sock_send_some(ddl__sock_frame *x)
{
    for (;;) {
        struct iovec iov[3];
        int n = 0;
        if (x->pre_done < DDL__FRAME_PREFIX)
            iov[n++] = (struct iovec){x->pre + x->pre_done, DDL__FRAME_PREFIX - x->pre_done};
        if (x->done < x->bytes)
            iov[n++] = (struct iovec){x->buf + x->done, x->bytes - x->done};
        if (x->tag_done < x->tag_bytes)
            iov[n++] = (struct iovec){x->tag + x->tag_done, x->tag_bytes - x->tag_done};
        if (n == 0) {
            x->finished = 1;
            return DDL__SOCK_DONE;
        }
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t k = sendmsg(x->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return DDL__SOCK_BLOCKED;
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return DDL__SOCK_FAILED;
        size_t got = (size_t)k, p = DDL__FRAME_PREFIX - x->pre_done < got ? DDL__FRAME_PREFIX - x->pre_done : got;
        x->pre_done += p;
        got -= p;
        p = x->bytes - x->done < got ? x->bytes - x->done : got;
        x->done += p;
        x->tag_done += got - p;
    }
}

int ddl__sock_recv_some(ddl__sock_frame *x)
{
    for (;;) {
        if (x->pre_done == DDL__FRAME_PREFIX && x->done == x->bytes && x->tag_done == x->tag_bytes) {
            x->finished = 1;
            return DDL__SOCK_DONE;
        }
        unsigned char *at;
        size_t want;
        if (x->pre_done < DDL__FRAME_PREFIX)
            at = x->pre + x->pre_done, want = DDL__FRAME_PREFIX - x->pre_done;
        else if (x->done < x->bytes)
            at = x->buf + x->done, want = x->bytes - x->done;
        else
            at = x->tag + x->tag_done, want = x->tag_bytes - x->tag_done;
        ssize_t k = recv(x->fd, at, want, MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return DDL__SOCK_BLOCKED;
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k < 0 ? DDL__SOCK_FAILED : DDL__SOCK_CLOSED;
        if (x->pre_done < DDL__FRAME_PREFIX) {
            if ((x->pre_done += (size_t)k) == DDL__FRAME_PREFIX)
                return DDL__SOCK_PREFIX;
        } else if (x->done < x->bytes) {
            if (x->mac)
                ddl__mac_update(x->mac, at, (size_t)k);
            x->done += (size_t)k;
        } else {
            x->tag_done += (size_t)k;
        }
    }
}

/* ---- listening and connecting ---- */

int ddl__net_listen(ddl__net *n, const struct sockaddr_storage *ss, socklen_t len, const char *what, int *out)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return ddl__net_fail(n, DDL_EIO, "rank %d: socket: %s", n->rank, strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    *out = fd;
    char want[DDL__ADDR_BYTES];
    ddl__net_format(ss, want);
    if (bind(fd, (const struct sockaddr *)ss, len) != 0 || listen(fd, 128) != 0)
        return ddl__net_fail(n, DDL_EIO, "rank %d: cannot listen on %s (%s): %s", n->rank, want, what, strerror(errno));
    struct sockaddr_storage got;
    socklen_t gl = sizeof got;
    getsockname(fd, (struct sockaddr *)&got, &gl);
    ddl__net_format(&got, n->addr);
    return DDL_OK;
}

int ddl__sock_shut_door(int fd)
{
#if defined(__linux__) && defined(SO_ATTACH_FILTER)
    struct sock_filter drop = BPF_STMT(BPF_RET | BPF_K, 0); /* keep 0 bytes of every packet */
    struct sock_fprog prog = {.len = 1, .filter = &drop};
    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) == 0 ? 0 : -1;
#else
    (void)fd;
    return -1;
#endif
}

/* connect_once: one non-blocking connect attempt, waiting at most 2 s; 0, or an errno. */
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
            socklen_t el = sizeof e;
            if (poll(&pf, 1, left > 2000 ? 2000 : left) <= 0)
                e = ETIMEDOUT;
            else
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
        }
    }
    if (e)
        close(fd);
    else
        *out = fd;
    return e;
}

int ddl__net_dial(ddl__net *n, int peer, int64_t deadline_ms, int *out)
{
    const char *addr = n->peers[peer].addr;
    struct sockaddr_storage ss;
    socklen_t len;
    if (ddl__net_resolve(addr, &ss, &len) != 0)
        return ddl__net_fail(n, DDL_EINVAL, "rank %d: cannot parse or resolve the address '%s' of rank %d", n->rank,
                             addr, peer);
    int backoff = 10, e = 0;
    while ((e = connect_once(&ss, len, deadline_ms, out)) != 0) {
        if (e != ECONNREFUSED && e != ETIMEDOUT && e != EHOSTUNREACH && e != ENETUNREACH && e != ECONNRESET &&
            e != EAGAIN && e != EINTR)
            return ddl__net_fail(n, DDL_EIO, "rank %d: cannot connect to rank %d at %s: %s", n->rank, peer, addr,
                                 strerror(e));
        int left = ddl__remaining_ms(deadline_ms);
        if (left == 0)
            return ddl__net_fail(n, DDL_ETIMEDOUT, "rank %d timed out after %d ms connecting to rank %d at %s (%s)",
                                 n->rank, n->timeout_ms, peer, addr, strerror(e));
        struct timespec ts = {0, (long)(backoff < left ? backoff : left) * 1000000L};
        nanosleep(&ts, NULL);
        backoff = backoff < 200 ? backoff * 2 : 200;
    }
    return DDL_OK;
}

/* ---- handshake, connecting side ---- */

int ddl__net_greet_fd(ddl__net *n, int fd, int peer, int64_t deadline_ms)
{
    const char *addr = n->peers[peer].addr;
    ddl__net_greeting g;
    ddl__hs_msg m;
    unsigned char buf[DDL__HS_BYTES];
    int st = ddl__net_greet_start(n, &g, &m);
    while (st == DDL_OK && g.stage != DDL__GREET_DONE) {
        ddl__hs_encode(n->proto, &m, buf);
        if ((st = ddl__sock_io(fd, buf, sizeof buf, 1, deadline_ms)) != DDL_OK)
            return ddl__net_fail(n, st == DDL_ETIMEDOUT ? st : DDL_EPEER,
                                 "rank %d at %s closed the connection during the handshake", peer, addr);
        st = ddl__sock_io(fd, buf, sizeof buf, 0, deadline_ms);
        if (st == DDL_ETIMEDOUT)
            return ddl__net_fail(n, st, "rank %d at %s did not answer the handshake within %d ms", peer, addr,
                                 n->timeout_ms);
        if (st != DDL_OK)
            return ddl__net_fail(n, DDL_EPEER, "rank %d at %s closed the connection during the handshake", peer, addr);
        int was = g.stage;
        st = ddl__net_greet_step(n, &g, peer, buf, sizeof buf, &m);
        if (st == DDL_OK && g.stage == was) /* one connection, one HELLO: no earlier one to answer */
            return ddl__net_fail(n, DDL_EPROTO, "rank %d at %s answered another handshake than ours", peer, addr);
        if (st == DDL_OK && g.stage == 0) /* dial again (ddl__net_dial_greet) */
            return ddl__net_fail(n, DDL_EPEER, "rank %d at %s gave up our handshake", peer, addr);
    }
    return st;
}

int ddl__net_dial_greet(ddl__net *n, int peer, int64_t deadline_ms, int *out)
{
    for (;;) {
        int fd = -1;
        int st = ddl__net_dial(n, peer, deadline_ms, &fd);
        if (st != DDL_OK)
            return st;
        if ((st = ddl__net_greet_fd(n, fd, peer, deadline_ms)) == DDL_OK) {
            *out = fd;
            return DDL_OK;
        }
        close(fd);
        int left = ddl__remaining_ms(deadline_ms);
        if (st != DDL_EPEER || left == 0)
            return st;
        /* closed unanswered: strangers took our handshake slot, or we were slow; try again */
        ddl__log(n->log, n->log_ud, DDL_LOG_DEBUG, "%s: rank %d: %s; trying again", n->proto->name, n->rank, n->err);
        ddl__net_recovered(n);
        struct timespec ts = {0, (long)(left < 50 ? left : 50) * 1000000L};
        nanosleep(&ts, NULL);
    }
}
