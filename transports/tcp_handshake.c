/* tcp_handshake.c - the handshake of the TCP transport: on every connection both sides state
 * protocol version, job id, rank and world size, exchange random nonces and prove that they
 * know the token with HMAC-SHA256, without ever sending it. The accepting side runs up to
 * TCP_PENDING handshakes at once, so a silent or hostile connection cannot hold the real rank
 * out. It owns no sockets beyond the handshake: links it authenticates go to s->links.
 * It must not trust any byte it reads before the proof checks out, nor read past fixed sizes. */
#include "tcp_impl.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

/* The wire format, the proofs and the reasons are transports/handshake.c's; tcp's messages start with
 * "DDLH" and its proofs with "ddl-v1". */
static const ddl__hs_proto tcp_proto = {
    .name = "tcp", .magic = "DDLH", .label = "ddl-v1", .version = TCP_PROTO_VERSION, .duplicate = "duplicate rank",
};

/* self: who we are in a handshake (the token is valid during open() only). */
static ddl__hs_self self(const tcp_state *s)
{
    return (ddl__hs_self){.proto = &tcp_proto, .rank = s->rank, .world = s->world, .job = s->job,
                          .token = s->token, .token_bytes = s->token_bytes};
}

/* hs_send: write one message; handshake messages are small enough to never block for long. */
static int hs_send(int fd, const ddl__hs_msg *m, int64_t deadline_ms)
{
    unsigned char buf[DDL__HS_BYTES];
    ddl__hs_encode(&tcp_proto, m, buf);
    return tcp__io_full(fd, buf, sizeof buf, 1, deadline_ms);
}

/* ---- accepting side ---- */

static void pending_drop(tcp_pending *p)
{
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
}

/* pending_refuse: tell the peer why (best effort, never blocks), log it, close. */
static void pending_refuse(tcp_state *s, tcp_pending *p, uint32_t reason)
{
    ddl__hs_self me = self(s);
    ddl__hs_msg m;
    ddl__hs_make(&me, &m, DDL__HS_REFUSE);
    m.reason = reason;
    unsigned char buf[DDL__HS_BYTES];
    ddl__hs_encode(&tcp_proto, &m, buf);
    int claims = reason != DDL__HS_R_GARBAGE && reason != DDL__HS_R_SILENT; /* else: no answer, maybe no hello */
    if (claims)
        (void)!send(p->fd, buf, sizeof buf, MSG_NOSIGNAL | MSG_DONTWAIT);
    ddl__hs_log_refusal(&me, s->log, s->log_ud, p->from, &p->hello, reason, claims);
    pending_drop(p);
}

/* check_hello: 0 if the hello fits this job and ranks lo..hi still missing, else a reason. */
static uint32_t check_hello(const tcp_state *s, const ddl__hs_msg *h, int lo, int hi)
{
    ddl__hs_self me = self(s);
    uint32_t why = ddl__hs_check_hello(&me, h);
    if (why)
        return why;
    if (h->rank < (uint32_t)lo || h->rank > (uint32_t)hi)
        return DDL__HS_R_RANK;
    if (s->links[h->rank].fd >= 0)
        return DDL__HS_R_DUPLICATE;
    return 0;
}

/* pending_hello: the peer's hello is complete: check it and answer with ours. */
static void pending_hello(tcp_state *s, tcp_pending *p, int lo, int hi)
{
    if (ddl__hs_decode(&tcp_proto, p->buf, p->got, &p->hello) != 0) {
        pending_refuse(s, p, DDL__HS_R_GARBAGE);
        return;
    }
    uint32_t why = check_hello(s, &p->hello, lo, hi);
    if (why) {
        pending_refuse(s, p, why);
        return;
    }
    ddl__hs_self me = self(s);
    ddl__hs_msg m;
    if (ddl__hs_hello(&me, NULL, p->nonce, &m, NULL, 0) != DDL_OK) {
        ddl__log(s->log, s->log_ud, DDL_LOG_ERROR, "tcp: no random numbers for a handshake with %s", p->from);
        pending_drop(p);
        return;
    }
    if (hs_send(p->fd, &m, ddl__now_ms() + 100) != DDL_OK) {
        pending_drop(p);
        return;
    }
    p->stage = DDL__HS_PROOF;
    p->got = 0;
}

/* pending_proof: the peer's proof is complete: check it, answer with ours, make the link. */
static void pending_proof(tcp_state *s, tcp_pending *p, int lo, int hi, int take_addr)
{
    ddl__hs_self me = self(s);
    ddl__hs_msg m;
    if (ddl__hs_decode(&tcp_proto, p->buf, p->got, &m) != 0 || m.type != DDL__HS_PROOF) {
        pending_refuse(s, p, DDL__HS_R_GARBAGE);
        return;
    }
    int peer = (int)p->hello.rank;
    if (!ddl__hs_proof_ok(&me, &p->hello, p->nonce, &m)) {
        pending_refuse(s, p, DDL__HS_R_TOKEN);
        return;
    }
    uint32_t why = check_hello(s, &p->hello, lo, hi); /* another connection may have won meanwhile */
    if (why) {
        pending_refuse(s, p, why);
        return;
    }
    ddl__hs_ok(&me, &p->hello, p->nonce, &m);
    if (hs_send(p->fd, &m, ddl__now_ms() + 100) != DDL_OK) {
        pending_drop(p);
        return;
    }
    tcp_link *l = &s->links[peer];
    l->fd = p->fd;
    p->fd = -1;
    if (take_addr)
        memcpy(l->addr, p->hello.addr[0] ? p->hello.addr : p->from, DDL__ADDR_BYTES);
    tcp__tune(l->fd);
    ddl__log(s->log, s->log_ud, DDL_LOG_DEBUG, "tcp: rank %d: rank %d joined from %s", s->rank, peer, p->from);
}

/* pending_read: read what is there; act when a message is complete. */
static void pending_read(tcp_state *s, tcp_pending *p, int lo, int hi, int take_addr)
{
    ssize_t n = recv(p->fd, p->buf + p->got, DDL__HS_BYTES - p->got, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        ddl__log(s->log, s->log_ud, DDL_LOG_WARN, "tcp: %s hung up during the handshake", p->from);
        pending_drop(p);
        return;
    }
    size_t before = p->got;
    p->got += (size_t)n;
    if (before < 4 && p->got >= 4 && memcmp(p->buf, tcp_proto.magic, 4) != 0) {
        pending_refuse(s, p, DDL__HS_R_GARBAGE); /* not ours: do not wait for the rest */
        return;
    }
    if (p->got < DDL__HS_BYTES)
        return;
    if (p->stage == DDL__HS_HELLO)
        pending_hello(s, p, lo, hi);
    else
        pending_proof(s, p, lo, hi, take_addr);
}

static void accept_one(tcp_state *s)
{
    for (int i = 0; i < TCP_PENDING; i++) {
        tcp_pending *p = &s->pending[i];
        if (p->fd >= 0)
            continue;
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int fd = accept4(s->listen_fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        memset(p, 0, sizeof *p);
        p->fd = fd;
        p->stage = DDL__HS_HELLO;
        p->deadline_ms = ddl__now_ms() + s->timeout_ms;
        tcp__format_addr(&ss, p->from);
        return;
    }
}

static int missing_ranks(const tcp_state *s, int lo, int hi, char *out, size_t n)
{
    int count = 0;
    size_t used = 0;
    out[0] = 0;
    for (int r = lo; r <= hi; r++) {
        if (s->links[r].fd >= 0)
            continue;
        if (used + 16 < n)
            used += (size_t)snprintf(out + used, n - used, "%s%d", count ? ", " : "", r);
        count++;
    }
    return count;
}

int tcp__accept_ranks(tcp_state *s, int lo, int hi, int take_addr, int64_t deadline_ms)
{
    char miss[96];
    for (int i = 0; i < TCP_PENDING; i++)
        s->pending[i].fd = -1;
    int status = DDL_OK;
    while (missing_ranks(s, lo, hi, miss, sizeof miss) > 0) {
        int64_t now = ddl__now_ms();
        if (now >= deadline_ms) {
            status = tcp__fail(s, DDL_ETIMEDOUT, "rank %d timed out after %d ms waiting at %s for rank%s %s to connect",
                               s->rank, s->timeout_ms, s->listen_addr, strchr(miss, ',') ? "s" : "", miss);
            break;
        }
        int n = 0, free_slot = 0;
        int64_t wake = deadline_ms;
        for (int i = 0; i < TCP_PENDING; i++) {
            tcp_pending *p = &s->pending[i];
            if (p->fd < 0) {
                free_slot = 1;
                continue;
            }
            if (now >= p->deadline_ms) {
                pending_refuse(s, p, DDL__HS_R_SILENT);
                continue;
            }
            wake = p->deadline_ms < wake ? p->deadline_ms : wake;
            s->pfd[n] = (struct pollfd){.fd = p->fd, .events = POLLIN};
            s->pfd_rank[n++] = i;
        }
        if (free_slot) {
            s->pfd[n] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
            s->pfd_rank[n++] = -1;
        }
        if (poll(s->pfd, (nfds_t)n, ddl__remaining_ms(wake)) < 0 && errno != EINTR) {
            status = tcp__fail(s, DDL_EIO, "rank %d: poll failed while accepting: %s", s->rank, strerror(errno));
            break;
        }
        for (int k = 0; k < n; k++) {
            if (!s->pfd[k].revents)
                continue;
            if (s->pfd_rank[k] < 0)
                accept_one(s);
            else if (s->pending[s->pfd_rank[k]].fd >= 0)
                pending_read(s, &s->pending[s->pfd_rank[k]], lo, hi, take_addr);
        }
    }
    for (int i = 0; i < TCP_PENDING; i++)
        pending_drop(&s->pending[i]);
    return status;
}

/* ---- connecting side ---- */

/* greet_read: read the peer's answer and turn a refusal into DDL_EAUTH with the reason. */
static int greet_read(tcp_state *s, int fd, int peer, uint32_t want_type, ddl__hs_msg *m, int64_t deadline_ms)
{
    const char *addr = s->links[peer].addr;
    unsigned char buf[DDL__HS_BYTES];
    char msg[DDL_ERR_BYTES];
    int st = tcp__io_full(fd, buf, sizeof buf, 0, deadline_ms);
    if (st == DDL_ETIMEDOUT)
        return tcp__fail(s, st, "rank %d at %s did not answer the handshake within %d ms", peer, addr, s->timeout_ms);
    if (st != DDL_OK)
        return tcp__fail(s, DDL_EPEER, "rank %d at %s closed the connection during the handshake", peer, addr);
    ddl__hs_self me = self(s);
    if ((st = ddl__hs_reply(&me, peer, addr, buf, sizeof buf, m, msg, sizeof msg)) != DDL_OK)
        return tcp__fail(s, st, "%s", msg);
    if (m->type != want_type)
        return tcp__fail(s, DDL_EPROTO, "rank %d at %s broke the handshake: message type %u, expected %u", peer,
                         addr, m->type, want_type);
    return DDL_OK;
}

/* greet_send: one message to rank peer, or the failure. */
static int greet_send(tcp_state *s, int fd, int peer, const ddl__hs_msg *m, int64_t deadline_ms)
{
    int st = hs_send(fd, m, deadline_ms);
    if (st != DDL_OK)
        return tcp__fail(s, st == DDL_ETIMEDOUT ? st : DDL_EPEER, "rank %d at %s closed the connection during the handshake",
                         peer, s->links[peer].addr);
    return DDL_OK;
}

int tcp__greet(tcp_state *s, int fd, int peer, int64_t deadline_ms)
{
    ddl__hs_self me = self(s);
    const char *addr = s->links[peer].addr;
    ddl__hs_msg hello, m;
    unsigned char nonce_c[DDL__NONCE_BYTES], nonce_a[DDL__NONCE_BYTES];
    char msg[DDL_ERR_BYTES];
    int st = ddl__hs_hello(&me, s->listen_addr, nonce_c, &hello, msg, sizeof msg);
    if (st != DDL_OK)
        return tcp__fail(s, st, "%s", msg);
    if ((st = greet_send(s, fd, peer, &hello, deadline_ms)) != DDL_OK)
        return st;
    if ((st = greet_read(s, fd, peer, DDL__HS_HELLO, &m, deadline_ms)) != DDL_OK)
        return st;
    memcpy(nonce_a, m.nonce, sizeof nonce_a);
    if ((st = ddl__hs_proof(&me, peer, addr, &m, nonce_c, &m, msg, sizeof msg)) != DDL_OK)
        return tcp__fail(s, st, "%s", msg);
    if ((st = greet_send(s, fd, peer, &m, deadline_ms)) != DDL_OK)
        return st;
    if ((st = greet_read(s, fd, peer, DDL__HS_OK, &m, deadline_ms)) != DDL_OK)
        return st;
    if ((st = ddl__hs_check_ok(&me, peer, addr, nonce_c, nonce_a, &m, msg, sizeof msg)) != DDL_OK)
        return tcp__fail(s, st, "%s", msg);
    return DDL_OK;
}
