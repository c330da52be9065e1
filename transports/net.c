/* net.c - what the network transports (tcp.c, zmq.c) share besides the handshake: the state
 * every rank keeps of itself and its peers, failure recording, "host:port" text and socket
 * addresses, where to rendezvous, rank 0's address table, and the frame prefix with the BYE
 * and ABORT goodbyes. It owns no socket and allocates nothing (getaddrinfo aside): the
 * transports move the bytes. It must not read past the fixed sizes of what it decodes, nor
 * call back into a transport. */
#include "net.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- state ---- */

int ddl__net_init(ddl__net *n, uint32_t magic, const ddl__net_proto *proto, const ddl_comm_config *cfg,
                  ddl__net_peer *peers)
{
    n->magic = magic;
    n->proto = proto;
    n->peers = peers;
    n->culprit = -1;
    n->rank = cfg->rank;
    n->world = cfg->world_size;
    n->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 30000;
    n->log = cfg->log;
    n->log_ud = cfg->log_ud;
    n->token = cfg->token ? cfg->token : "";
    n->token_bytes = strlen(n->token);
    const char *job = cfg->job ? cfg->job : "";
    if (strlen(job) >= DDL__JOB_BYTES)
        return ddl__net_fail(n, DDL_EINVAL, "job id '%.40s...' is longer than %d characters", job, DDL__JOB_BYTES - 1);
    memcpy(n->job, job, strlen(job) + 1);
    if (n->world > 1 && n->token_bytes == 0 && !cfg->insecure)
        return ddl__net_fail(n, DDL_EINVAL,
                             "no token: anyone who reaches this job's ports could join it; give every rank the same "
                             "DDL_TOKEN (ddlrun makes one on a single node, or reads --token-file), or set "
                             "DDL_INSECURE=1 to run without one");
    n->mac = cfg->mac != 0;
    if (n->world > 1 && n->mac && !DDL__MAC_BUILT)
        return ddl__net_fail(n, DDL_ENOTSUP, "frame MACs (DDL_MAC=1) need libsodium: this build has none "
                             "(make WITH_SODIUM=1 with libsodium-dev installed)");
    if (n->world > 1 && n->mac && n->token_bytes == 0)
        return ddl__net_fail(n, DDL_EINVAL, "frame MACs (DDL_MAC=1) are keyed by the token: give every rank the same "
                             "DDL_TOKEN");
    if (n->world > 1 && n->token_bytes > 0 && n->token_bytes < DDL__TOKEN_MIN_BYTES)
        ddl__log(n->log, n->log_ud, DDL_LOG_WARN, "%s: rank %d: the token is %zu bytes; %d or more resist guessing",
                 proto->name, n->rank, n->token_bytes, DDL__TOKEN_MIN_BYTES);
    return DDL_OK;
}

int ddl__net_fail(ddl__net *n, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->err, sizeof n->err, fmt, ap);
    va_end(ap);
    n->failed = 1;
    if (!n->fail_status)
        n->fail_status = status;
    ddl__log(n->log, n->log_ud, DDL_LOG_DEBUG, "%s: rank %d: %s", n->proto->name, n->rank, n->err);
    return status;
}

void ddl__net_recovered(ddl__net *n)
{
    n->failed = 0;
    n->fail_status = 0;
    n->err[0] = 0;
}

void ddl__net_link_down(ddl__net *n, int j, int status, int tx, int rx)
{
    ddl__net_peer *p = &n->peers[j];
    if (tx && !p->tx_down)
        p->tx_down = status;
    if (rx && !p->rx_down)
        p->rx_down = status;
    if (status == DDL_EPEER && n->culprit < 0)
        n->culprit = j;
}

int ddl__net_check_peer(ddl__net *n, int peer, int sending)
{
    if (peer == -1)
        return DDL_OK;
    if (peer < 0 || peer >= n->world || peer == n->rank)
        return ddl__net_fail(n, DDL_EINVAL, "rank %d: no link to rank %d (world size %d)", n->rank, peer, n->world);
    int down = sending ? n->peers[peer].tx_down : n->peers[peer].rx_down;
    if (down)
        return ddl__net_fail(n, down, "rank %d: the link to rank %d at %s is down after an earlier failure", n->rank,
                             peer, n->peers[peer].addr);
    return DDL_OK;
}

void ddl__net_interrupt(void *state, int culprit)
{
    ddl__net *n = state;
    if (n && culprit >= 0)
        atomic_store(&n->stalled, culprit + 1);
}

int ddl__net_stalled(ddl__net *n)
{
    int r = atomic_load(&n->stalled) - 1;
    if (r < 0)
        return DDL_OK;
    if (r < n->world && r != n->rank)
        n->culprit = r;
    return ddl__net_fail(n, DDL_ETIMEDOUT, "rank %d at %s stopped responding (no heartbeat; noticed by rank %d)", r,
                         r < n->world ? n->peers[r].addr : "?", n->rank);
}

void ddl__net_opened(ddl__net *n, int status)
{
    n->token = NULL;
    n->token_bytes = 0;
    if (status == DDL_OK)
        ddl__log(n->log, n->log_ud, DDL_LOG_INFO, "%s: rank %d of %d connected at %s (job %s)", n->proto->name,
                 n->rank, n->world, n->addr, n->job);
}

void ddl__net_waiting(const ddl__net *n, int64_t started_ms, int64_t *next_ms, const char *missing)
{
    int64_t now = ddl__now_ms();
    if (!*next_ms)
        *next_ms = started_ms + DDL__WAITING_EVERY_MS;
    if (now < *next_ms)
        return;
    ddl__log(n->log, n->log_ud, DDL_LOG_WARN, "%s: rank %d: waiting for rank%s %s (%.0f s)", n->proto->name, n->rank,
             strchr(missing, ',') ? "s" : "", missing, (double)(now - started_ms) / 1000.0);
    *next_ms = now + DDL__WAITING_EVERY_MS;
}

int ddl__net_missing(const ddl__net *n, int lo, int hi, char *out, size_t size)
{
    int count = 0;
    size_t used = 0;
    out[0] = 0;
    for (int r = lo; r <= hi; r++) {
        if (r == n->rank || n->peers[r].linked)
            continue;
        if (used + 16 < size)
            used += (size_t)snprintf(out + used, size - used, "%s%d", count ? ", " : "", r);
        count++;
    }
    return count;
}

const char *ddl__net_peer_address(const ddl__net *n, int r)
{
    if (r < 0 || r >= n->world)
        return "?";
    if (r == n->rank)
        return n->addr[0] ? n->addr : "self";
    return n->peers[r].addr[0] ? n->peers[r].addr : "?";
}

/* ---- addresses ---- */

int ddl__split_addr(const char *text, char host[DDL__ADDR_BYTES], int *port)
{
    const char *colon = strrchr(text, ':');
    if (!colon || colon == text || strlen(text) >= DDL__ADDR_BYTES)
        return -1;
    size_t hl = (size_t)(colon - text);
    memcpy(host, text, hl);
    host[hl] = 0;
    if (host[0] == '[' && hl >= 2 && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = 0;
    }
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end || end == colon + 1 || p < 0 || p > 65535)
        return -1;
    *port = (int)p;
    return 0;
}

int ddl__net_url(const char *addr, const char *scheme, char *out, size_t size)
{
    char host[DDL__ADDR_BYTES];
    int port;
    if (ddl__split_addr(addr, host, &port) != 0)
        return -1;
    int v6 = strchr(host, ':') != NULL;
    snprintf(out, size, "%s://%s%s%s:%d", scheme, v6 ? "[" : "", host, v6 ? "]" : "", port);
    return v6;
}

static void set_port(struct sockaddr_storage *ss, int port)
{
    if (ss->ss_family == AF_INET6)
        ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
}

int ddl__net_resolve(const char *text, struct sockaddr_storage *ss, socklen_t *len)
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
        *len = sizeof *a4;
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        *len = sizeof *a6;
    } else {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
        if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res)
            return -1;
        memcpy(ss, res->ai_addr, res->ai_addrlen);
        *len = res->ai_addrlen;
        freeaddrinfo(res);
    }
    set_port(ss, port);
    return 0;
}

void ddl__net_format(const struct sockaddr_storage *ss, char out[DDL__ADDR_BYTES])
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

int ddl__net_local_toward(const struct sockaddr_storage *to, struct sockaddr_storage *out, socklen_t *len)
{
    socklen_t tl = to->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    int fd = socket(to->ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0), ok = -1;
    *len = sizeof *out;
    if (fd >= 0 && connect(fd, (const struct sockaddr *)to, tl) == 0 &&
        getsockname(fd, (struct sockaddr *)out, len) == 0) {
        set_port(out, 0);
        ok = 0;
    }
    if (fd >= 0)
        close(fd);
    return ok;
}

/* ---- rendezvous ---- */

/* parse_peers: the comma-separated list ("h:p,h:p,...", one per rank) into peers[].addr. */
static int parse_peers(ddl__net *n, const char *list)
{
    const char *p = list;
    int count = 0;
    for (;;) {
        while (*p == ' ')
            p++;
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (count >= n->world || len == 0 || len >= DDL__ADDR_BYTES)
            return ddl__net_fail(n, DDL_EINVAL,
                                 "rank %d: bad peer list '%.120s': need %d addresses host:port, each under %d characters",
                                 n->rank, list, n->world, DDL__ADDR_BYTES);
        char *a = n->peers[count++].addr;
        memcpy(a, p, len);
        a[len] = 0;
        if (!comma)
            break;
        p = comma + 1;
    }
    if (count != n->world)
        return ddl__net_fail(n, DDL_EINVAL, "rank %d: the peer list names %d addresses for %d ranks", n->rank, count,
                             n->world);
    return DDL_OK;
}

int ddl__net_where(ddl__net *n, const ddl_comm_config *cfg, struct sockaddr_storage *ss, socklen_t *len,
                   int *master)
{
    *master = 0;
    if (cfg->peers && cfg->peers[0]) {
        int st = parse_peers(n, cfg->peers);
        if (st == DDL_OK && ddl__net_resolve(n->peers[n->rank].addr, ss, len) != 0)
            st = ddl__net_fail(n, DDL_EINVAL, "rank %d: cannot parse or resolve our own address '%s'", n->rank,
                               n->peers[n->rank].addr);
        return st;
    }
    if (!cfg->master || !cfg->master[0])
        return ddl__net_fail(n, DDL_EINVAL, "%s needs a rendezvous: set DDL_MASTER=host:port or DDL_PEERS=h:p,h:p,...",
                             n->proto->name);
    *master = 1;
    if (strlen(cfg->master) >= DDL__ADDR_BYTES || ddl__net_resolve(cfg->master, ss, len) != 0)
        return ddl__net_fail(n, DDL_EINVAL,
                             "rank %d: cannot parse or resolve the master address '%.100s' (want host:port)", n->rank,
                             cfg->master);
    snprintf(n->peers[0].addr, DDL__ADDR_BYTES, "%s", cfg->master);
    return DDL_OK;
}

size_t ddl__net_table_encode(const ddl__net *n, unsigned char *out)
{
    memcpy(out, "DDLT", 4);
    ddl__put_le(out + 4, (uint32_t)n->world, 4);
    for (int j = 0; j < n->world; j++)
        memcpy(out + DDL__TABLE_HEAD + (size_t)j * DDL__ADDR_BYTES, n->peers[j].addr, DDL__ADDR_BYTES);
    return DDL__TABLE_BYTES(n->world);
}

int ddl__net_table_head_ok(ddl__net *n, const unsigned char head[DDL__TABLE_HEAD])
{
    if (memcmp(head, "DDLT", 4) != 0 || ddl__get_le(head + 4, 4) != (uint64_t)n->world)
        return ddl__net_fail(n, DDL_EPROTO, "rank 0 at %s sent a bad address table", n->peers[0].addr);
    return DDL_OK;
}

int ddl__net_table_decode(ddl__net *n, const unsigned char *in, size_t bytes)
{
    if (bytes != DDL__TABLE_BYTES(n->world))
        return ddl__net_fail(n, DDL_EPROTO, "rank 0 at %s sent a bad address table (%zu bytes)", n->peers[0].addr,
                             bytes);
    int st = ddl__net_table_head_ok(n, in);
    for (int j = 0; j < n->world && st == DDL_OK; j++) {
        const unsigned char *e = in + DDL__TABLE_HEAD + (size_t)j * DDL__ADDR_BYTES;
        if (e[DDL__ADDR_BYTES - 1] != 0 || e[0] == 0)
            return ddl__net_fail(n, DDL_EPROTO, "rank 0 at %s sent a bad address for rank %d", n->peers[0].addr, j);
        if (j != 0 && j != n->rank) /* rank 0's address is the one we reached it at; ours we know */
            memcpy(n->peers[j].addr, e, DDL__ADDR_BYTES);
    }
    return st;
}

const char *ddl__net_error(const void *state)
{
    const ddl__net *n = state;
    return n ? n->err : "";
}

const char *ddl__net_address(const void *state, int r)
{
    const ddl__net *n = state;
    return n && n->magic ? ddl__net_peer_address(n, r) : "?";
}

/* ---- frames ---- */

void ddl__net_frame_prefix(const ddl__net *n, unsigned char out[DDL__FRAME_PREFIX], uint32_t flags, uint64_t bytes,
                           const void *hdr)
{
    ddl__put_le(out, n->proto->frame_magic, 4);
    ddl__put_le(out + 4, flags, 4);
    ddl__put_le(out + 8, bytes, 8);
    if (hdr)
        memcpy(out + 16, hdr, DDL_HEADER_BYTES);
    else
        memset(out + 16, 0, DDL_HEADER_BYTES);
}

void ddl__net_goodbye(const ddl__net *n, unsigned char out[DDL__FRAME_PREFIX])
{
    unsigned char hdr[DDL_HEADER_BYTES] = {0};
    ddl__put_le(hdr, (uint32_t)n->culprit, 4);
    ddl__put_le(hdr + 4, (uint32_t)n->fail_status, 4);
    ddl__net_frame_prefix(n, out, n->failed ? DDL__FRAME_ABORT : DDL__FRAME_BYE, 0, hdr);
}

int ddl__net_frame_read(const ddl__net *n, const unsigned char pre[DDL__FRAME_PREFIX], ddl__frame *f)
{
    f->magic = (uint32_t)ddl__get_le(pre, 4);
    f->flags = (uint32_t)ddl__get_le(pre + 4, 4);
    f->bytes = ddl__get_le(pre + 8, 8);
    return f->magic == n->proto->frame_magic && (f->flags & ~(DDL__FRAME_BYE | DDL__FRAME_ABORT)) == 0;
}

int ddl__net_peer_gone(ddl__net *n, int j, int busy)
{
    ddl__net_link_down(n, j, DDL_EPEER, 1, 1);
    return ddl__net_fail(n, DDL_EPEER,
                         "rank %d at %s closed the connection (noticed by rank %d while exchanging with rank %d)", j,
                         n->peers[j].addr, n->rank, busy);
}

int ddl__net_frame_is_abort(const ddl__net *n, const unsigned char *pre)
{
    return ddl__get_le(pre, 4) == n->proto->frame_magic && (ddl__get_le(pre + 4, 4) & DDL__FRAME_ABORT);
}

int ddl__net_peer_left(ddl__net *n, int j, const unsigned char pre[DDL__FRAME_PREFIX], size_t want)
{
    const char *addr = n->peers[j].addr;
    ddl__net_link_down(n, j, DDL_EPEER, 1, 1);
    if (!(ddl__get_le(pre + 4, 4) & DDL__FRAME_ABORT))
        return ddl__net_fail(n, DDL_EPEER,
                             "rank %d at %s closed the connection (it left the job) while rank %d waited for %zu bytes", j,
                             addr, n->rank, want);
    int culprit = (int)(int32_t)(uint32_t)ddl__get_le(pre + 16, 4);
    int status = (int)(int32_t)(uint32_t)ddl__get_le(pre + 20, 4);
    if (culprit >= 0 && culprit < n->world && culprit != n->rank && culprit != j) {
        n->culprit = culprit;
        return ddl__net_fail(n, DDL_EPEER, "rank %d at %s %s (reported by rank %d at %s, noticed by rank %d)",
                             culprit, n->peers[culprit].addr,
                             status == DDL_ETIMEDOUT ? "stopped responding" : "closed the connection", j, addr,
                             n->rank);
    }
    return ddl__net_fail(n, DDL_EPEER, "rank %d at %s left the job after a failure (%s), noticed by rank %d", j, addr,
                         ddl_strerror(status), n->rank);
}
