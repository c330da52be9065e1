/* tcp_handshake.c - the handshake of the TCP transport: on every connection both sides state
 * protocol version, job id, rank and world size, exchange random nonces and prove that they
 * know the token with HMAC-SHA256, without ever sending it. The accepting side runs up to
 * TCP_PENDING handshakes at once, so a silent or hostile connection cannot hold the real rank
 * out. It owns no sockets beyond the handshake: links it authenticates go to s->links.
 * It must not trust any byte it reads before the proof checks out, nor read past fixed sizes. */
#include "tcp_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

/* ---- wire format ----
 * [0] "DDLH"  [4] u32 type  [8] u32 version  [12] u32 rank  [16] u32 world  [20] u32 reason
 * [24] job[64]  [88] nonce[32]  [120] mac[32]  [152] addr[64]  = 216 bytes, little endian. */

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16); p[3] = (unsigned char)(v >> 24);
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void hs_encode(const tcp_hs *m, unsigned char out[TCP_HS_BYTES])
{
    memset(out, 0, TCP_HS_BYTES);
    memcpy(out, "DDLH", 4);
    put32(out + 4, m->type); put32(out + 8, m->version); put32(out + 12, m->rank);
    put32(out + 16, m->world); put32(out + 20, m->reason);
    memcpy(out + 24, m->job, strnlen(m->job, TCP_JOB_BYTES - 1));
    memcpy(out + 88, m->nonce, TCP_NONCE_BYTES);
    memcpy(out + 120, m->mac, DDL__SHA256_BYTES);
    memcpy(out + 152, m->addr, strnlen(m->addr, TCP_ADDR_BYTES - 1));
}

/* hs_decode: 0 if in holds a well-formed message (magic, known type, terminated strings). */
static int hs_decode(const unsigned char in[TCP_HS_BYTES], tcp_hs *m)
{
    if (memcmp(in, "DDLH", 4) != 0 || in[24 + TCP_JOB_BYTES - 1] != 0 || in[152 + TCP_ADDR_BYTES - 1] != 0)
        return -1;
    m->type = get32(in + 4); m->version = get32(in + 8); m->rank = get32(in + 12);
    m->world = get32(in + 16); m->reason = get32(in + 20);
    memcpy(m->job, in + 24, TCP_JOB_BYTES);
    memcpy(m->nonce, in + 88, TCP_NONCE_BYTES);
    memcpy(m->mac, in + 120, DDL__SHA256_BYTES);
    memcpy(m->addr, in + 152, TCP_ADDR_BYTES);
    return m->type >= TCP_HS_HELLO && m->type <= TCP_HS_REFUSE ? 0 : -1;
}

static const char *reason_text(uint32_t r)
{
    switch (r) {
    case TCP_R_VERSION: return "protocol version mismatch";
    case TCP_R_JOB: return "job id mismatch";
    case TCP_R_WORLD: return "world size mismatch";
    case TCP_R_RANK: return "rank not expected here";
    case TCP_R_DUPLICATE: return "duplicate rank";
    case TCP_R_TOKEN: return "wrong token";
    case TCP_R_GARBAGE: return "not a ddl handshake";
    case TCP_R_SILENT: return "silent too long";
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

/* hs_mac: HMAC-SHA256(token, "ddl-v1" | len job | job | nonce_c | nonce_a | rank_c | rank_a | dir),
 * c the connecting side, a the accepting side, dir 'c' for the proof c sends, 'a' for a's. */
static void hs_mac(const tcp_state *s, const unsigned char *nonce_c, const unsigned char *nonce_a, int rank_c,
                   int rank_a, char dir, unsigned char out[DDL__SHA256_BYTES])
{
    unsigned char msg[6 + 4 + TCP_JOB_BYTES + 2 * TCP_NONCE_BYTES + 8 + 1], *p = msg;
    size_t jl = strnlen(s->job, TCP_JOB_BYTES - 1);
    memcpy(p, "ddl-v1", 6); p += 6;
    put32(p, (uint32_t)jl); p += 4;
    memcpy(p, s->job, jl); p += jl;
    memcpy(p, nonce_c, TCP_NONCE_BYTES); p += TCP_NONCE_BYTES;
    memcpy(p, nonce_a, TCP_NONCE_BYTES); p += TCP_NONCE_BYTES;
    put32(p, (uint32_t)rank_c); p += 4;
    put32(p, (uint32_t)rank_a); p += 4;
    *p++ = (unsigned char)dir;
    ddl__hmac_sha256(s->token, s->token_bytes, msg, (size_t)(p - msg), out);
}

/* hs_make: a message of `type` from this rank, other fields zero. */
static void hs_make(const tcp_state *s, tcp_hs *m, uint32_t type)
{
    memset(m, 0, sizeof *m);
    m->type = type;
    m->version = TCP_PROTO_VERSION;
    m->rank = (uint32_t)s->rank;
    m->world = (uint32_t)s->world;
    memcpy(m->job, s->job, sizeof m->job);
}

/* hs_send: write one message; handshake messages are small enough to never block for long. */
static int hs_send(int fd, const tcp_hs *m, int64_t deadline_ms)
{
    unsigned char buf[TCP_HS_BYTES];
    hs_encode(m, buf);
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
    tcp_hs m;
    hs_make(s, &m, TCP_HS_REFUSE);
    m.reason = reason;
    unsigned char buf[TCP_HS_BYTES];
    hs_encode(&m, buf);
    if (reason != TCP_R_GARBAGE && reason != TCP_R_SILENT)
        (void)!send(p->fd, buf, sizeof buf, MSG_NOSIGNAL | MSG_DONTWAIT);
    const tcp_hs *h = &p->hello;
    if (reason == TCP_R_JOB)
        ddl__log(s->log, s->log_ud, DDL_LOG_WARN, "tcp: refused %s: job id mismatch (ours '%s', theirs '%s')",
                 p->from, s->job, h->job);
    else if (reason == TCP_R_TOKEN)
        ddl__log(s->log, s->log_ud, DDL_LOG_WARN, "tcp: refused %s: wrong token for job %s (it claimed rank %u)",
                 p->from, s->job, h->rank);
    else if (reason == TCP_R_GARBAGE || reason == TCP_R_SILENT)
        ddl__log(s->log, s->log_ud, DDL_LOG_WARN, "tcp: refused %s: %s", p->from, reason_text(reason));
    else
        ddl__log(s->log, s->log_ud, DDL_LOG_WARN,
                 "tcp: refused %s: %s (it claimed rank %u of %u, version %u; we are rank %d of %d)", p->from,
                 reason_text(reason), h->rank, h->world, h->version, s->rank, s->world);
    pending_drop(p);
}

/* check_hello: 0 if the hello fits this job and ranks lo..hi still missing, else a reason. */
static uint32_t check_hello(const tcp_state *s, const tcp_hs *h, int lo, int hi)
{
    if (h->type != TCP_HS_HELLO)
        return TCP_R_GARBAGE;
    if (h->version != TCP_PROTO_VERSION)
        return TCP_R_VERSION;
    if (strcmp(h->job, s->job) != 0)
        return TCP_R_JOB;
    if (h->world != (uint32_t)s->world)
        return TCP_R_WORLD;
    if (h->rank < (uint32_t)lo || h->rank > (uint32_t)hi)
        return TCP_R_RANK;
    if (s->links[h->rank].fd >= 0)
        return TCP_R_DUPLICATE;
    return 0;
}

/* pending_hello: the peer's hello is complete: check it and answer with ours. */
static void pending_hello(tcp_state *s, tcp_pending *p, int lo, int hi)
{
    if (hs_decode(p->buf, &p->hello) != 0) {
        pending_refuse(s, p, TCP_R_GARBAGE);
        return;
    }
    uint32_t why = check_hello(s, &p->hello, lo, hi);
    if (why) {
        pending_refuse(s, p, why);
        return;
    }
    tcp_hs m;
    hs_make(s, &m, TCP_HS_HELLO);
    if (random_bytes(p->nonce, TCP_NONCE_BYTES) != 0) {
        ddl__log(s->log, s->log_ud, DDL_LOG_ERROR, "tcp: no random numbers for a handshake with %s", p->from);
        pending_drop(p);
        return;
    }
    memcpy(m.nonce, p->nonce, TCP_NONCE_BYTES);
    if (hs_send(p->fd, &m, ddl__now_ms() + 100) != DDL_OK) {
        pending_drop(p);
        return;
    }
    p->stage = TCP_HS_PROOF;
    p->got = 0;
}

/* pending_proof: the peer's proof is complete: check it, answer with ours, make the link. */
static void pending_proof(tcp_state *s, tcp_pending *p, int lo, int hi, int take_addr)
{
    tcp_hs m;
    if (hs_decode(p->buf, &m) != 0 || m.type != TCP_HS_PROOF) {
        pending_refuse(s, p, TCP_R_GARBAGE);
        return;
    }
    int peer = (int)p->hello.rank;
    unsigned char want[DDL__SHA256_BYTES];
    hs_mac(s, p->hello.nonce, p->nonce, peer, s->rank, 'c', want);
    if (!ddl__ct_equal(want, m.mac, sizeof want)) {
        pending_refuse(s, p, TCP_R_TOKEN);
        return;
    }
    uint32_t why = check_hello(s, &p->hello, lo, hi); /* another connection may have won meanwhile */
    if (why) {
        pending_refuse(s, p, why);
        return;
    }
    hs_make(s, &m, TCP_HS_OK);
    hs_mac(s, p->hello.nonce, p->nonce, peer, s->rank, 'a', m.mac);
    if (hs_send(p->fd, &m, ddl__now_ms() + 100) != DDL_OK) {
        pending_drop(p);
        return;
    }
    tcp_link *l = &s->links[peer];
    l->fd = p->fd;
    p->fd = -1;
    if (take_addr)
        memcpy(l->addr, p->hello.addr[0] ? p->hello.addr : p->from, TCP_ADDR_BYTES);
    tcp__tune(l->fd);
    ddl__log(s->log, s->log_ud, DDL_LOG_DEBUG, "tcp: rank %d: rank %d joined from %s", s->rank, peer, p->from);
}

/* pending_read: read what is there; act when a message is complete. */
static void pending_read(tcp_state *s, tcp_pending *p, int lo, int hi, int take_addr)
{
    ssize_t n = recv(p->fd, p->buf + p->got, TCP_HS_BYTES - p->got, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        ddl__log(s->log, s->log_ud, DDL_LOG_WARN, "tcp: %s hung up during the handshake", p->from);
        pending_drop(p);
        return;
    }
    size_t before = p->got;
    p->got += (size_t)n;
    if (before < 4 && p->got >= 4 && memcmp(p->buf, "DDLH", 4) != 0) {
        pending_refuse(s, p, TCP_R_GARBAGE); /* not ours: do not wait for the rest */
        return;
    }
    if (p->got < TCP_HS_BYTES)
        return;
    if (p->stage == TCP_HS_HELLO)
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
        p->stage = TCP_HS_HELLO;
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
                pending_refuse(s, p, TCP_R_SILENT);
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
        if (poll(s->pfd, (nfds_t)n, tcp__remaining(wake)) < 0 && errno != EINTR) {
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
static int greet_read(tcp_state *s, int fd, int peer, uint32_t want_type, tcp_hs *m, int64_t deadline_ms)
{
    const char *addr = s->links[peer].addr;
    unsigned char buf[TCP_HS_BYTES];
    int st = tcp__io_full(fd, buf, sizeof buf, 0, deadline_ms);
    if (st == DDL_ETIMEDOUT)
        return tcp__fail(s, st, "rank %d at %s did not answer the handshake within %d ms", peer, addr, s->timeout_ms);
    if (st != DDL_OK)
        return tcp__fail(s, DDL_EPEER, "rank %d at %s closed the connection during the handshake", peer, addr);
    if (hs_decode(buf, m) != 0)
        return tcp__fail(s, DDL_EPROTO, "rank %d at %s answered with something that is not a ddl handshake",
                         peer, addr);
    if (m->type == TCP_HS_REFUSE) {
        if (m->reason == TCP_R_JOB)
            return tcp__fail(s, DDL_EAUTH, "rank %d at %s refused the handshake: job id mismatch (ours '%s', theirs '%s')",
                             peer, addr, s->job, m->job);
        if (m->reason == TCP_R_TOKEN)
            return tcp__fail(s, DDL_EAUTH, "rank %d at %s refused the handshake: wrong token for job '%s'", peer,
                             addr, s->job);
        return tcp__fail(s, DDL_EAUTH, "rank %d at %s refused the handshake: %s (we are rank %d of %d)", peer, addr,
                         reason_text(m->reason), s->rank, s->world);
    }
    if (m->type != want_type)
        return tcp__fail(s, DDL_EPROTO, "rank %d at %s broke the handshake: message type %u, expected %u", peer,
                         addr, m->type, want_type);
    return DDL_OK;
}

/* greet_check: the acceptor's hello must describe the rank we meant to reach, in our job. */
static int greet_check(tcp_state *s, int peer, const tcp_hs *m)
{
    const char *addr = s->links[peer].addr;
    if (m->version != TCP_PROTO_VERSION)
        return tcp__fail(s, DDL_EAUTH, "%s speaks protocol version %u, we speak %d", addr, m->version,
                         TCP_PROTO_VERSION);
    if (strcmp(m->job, s->job) != 0)
        return tcp__fail(s, DDL_EAUTH, "%s belongs to job '%s', not ours ('%s')", addr, m->job, s->job);
    if (m->world != (uint32_t)s->world || m->rank != (uint32_t)peer)
        return tcp__fail(s, DDL_EAUTH, "%s is rank %u of %u, expected rank %d of %d", addr, m->rank, m->world, peer,
                         s->world);
    return DDL_OK;
}

int tcp__greet(tcp_state *s, int fd, int peer, int64_t deadline_ms)
{
    tcp_hs hello, m;
    hs_make(s, &hello, TCP_HS_HELLO);
    memcpy(hello.addr, s->listen_addr, TCP_ADDR_BYTES);
    if (random_bytes(hello.nonce, TCP_NONCE_BYTES) != 0)
        return tcp__fail(s, DDL_EIO, "rank %d: no random numbers for the handshake", s->rank);
    int st = hs_send(fd, &hello, deadline_ms);
    if (st != DDL_OK)
        return tcp__fail(s, st == DDL_ETIMEDOUT ? st : DDL_EPEER, "rank %d at %s closed the connection during the handshake",
                         peer, s->links[peer].addr);
    if ((st = greet_read(s, fd, peer, TCP_HS_HELLO, &m, deadline_ms)) != DDL_OK)
        return st;
    if ((st = greet_check(s, peer, &m)) != DDL_OK)
        return st;
    unsigned char nonce_a[TCP_NONCE_BYTES];
    memcpy(nonce_a, m.nonce, sizeof nonce_a);
    hs_make(s, &m, TCP_HS_PROOF);
    hs_mac(s, hello.nonce, nonce_a, s->rank, peer, 'c', m.mac);
    if ((st = hs_send(fd, &m, deadline_ms)) != DDL_OK)
        return tcp__fail(s, st == DDL_ETIMEDOUT ? st : DDL_EPEER, "rank %d at %s closed the connection during the handshake",
                         peer, s->links[peer].addr);
    if ((st = greet_read(s, fd, peer, TCP_HS_OK, &m, deadline_ms)) != DDL_OK)
        return st;
    unsigned char want[DDL__SHA256_BYTES];
    hs_mac(s, hello.nonce, nonce_a, s->rank, peer, 'a', want);
    if (!ddl__ct_equal(want, m.mac, sizeof want))
        return tcp__fail(s, DDL_EAUTH, "rank %d at %s did not prove that it knows the token of job '%s'", peer,
                         s->links[peer].addr, s->job);
    return DDL_OK;
}
