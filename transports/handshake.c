/* handshake.c - the handshake the networked transports (tcp, zmq) run on every connection: both
 * sides state protocol version, job id, rank and world size, exchange random nonces and prove
 * that they know the token with HMAC-SHA256, without ever sending it; the "host:port" and
 * peer-list text they rendezvous with, and the prefix of their messages. It owns nothing and touches no socket: the transports
 * move the bytes, keep the connections and decide which ranks are welcome. It must not trust a
 * byte before the proof checks out, nor read past the fixed sizes. */
#include "handshake.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* ---- wire format ----
 * [0] magic[4]  [4] u32 type  [8] u32 version  [12] u32 rank  [16] u32 world  [20] u32 reason
 * [24] job[64]  [88] nonce[32]  [120] mac[32]  [152] addr[64]  = 216 bytes, little endian.
 * The magic is the transport's ("DDLH" tcp, "DDLZ" zmq), so one never takes the other's. */

void ddl__hs_encode(const ddl__hs_proto *p, const ddl__hs_msg *m, unsigned char out[DDL__HS_BYTES])
{
    memset(out, 0, DDL__HS_BYTES);
    memcpy(out, p->magic, 4);
    ddl__put_le(out + 4, m->type, 4); ddl__put_le(out + 8, m->version, 4); ddl__put_le(out + 12, m->rank, 4);
    ddl__put_le(out + 16, m->world, 4); ddl__put_le(out + 20, m->reason, 4);
    memcpy(out + 24, m->job, strnlen(m->job, DDL__JOB_BYTES - 1));
    memcpy(out + 88, m->nonce, DDL__NONCE_BYTES);
    memcpy(out + 120, m->mac, DDL__SHA256_BYTES);
    memcpy(out + 152, m->addr, strnlen(m->addr, DDL__ADDR_BYTES - 1));
}

int ddl__hs_decode(const ddl__hs_proto *p, const unsigned char *in, size_t bytes, ddl__hs_msg *m)
{
    if (bytes != DDL__HS_BYTES || memcmp(in, p->magic, 4) != 0 || in[24 + DDL__JOB_BYTES - 1] != 0 ||
        in[152 + DDL__ADDR_BYTES - 1] != 0)
        return -1;
    m->type = (uint32_t)ddl__get_le(in + 4, 4); m->version = (uint32_t)ddl__get_le(in + 8, 4);
    m->rank = (uint32_t)ddl__get_le(in + 12, 4); m->world = (uint32_t)ddl__get_le(in + 16, 4);
    m->reason = (uint32_t)ddl__get_le(in + 20, 4);
    memcpy(m->job, in + 24, DDL__JOB_BYTES);
    memcpy(m->nonce, in + 88, DDL__NONCE_BYTES);
    memcpy(m->mac, in + 120, DDL__SHA256_BYTES);
    memcpy(m->addr, in + 152, DDL__ADDR_BYTES);
    return m->type >= DDL__HS_HELLO && m->type <= DDL__HS_REFUSE ? 0 : -1;
}

void ddl__hs_make(const ddl__hs_self *me, ddl__hs_msg *m, uint32_t type)
{
    memset(m, 0, sizeof *m);
    m->type = type;
    m->version = me->proto->version;
    m->rank = (uint32_t)me->rank;
    m->world = (uint32_t)me->world;
    memcpy(m->job, me->job, strnlen(me->job, DDL__JOB_BYTES - 1));
}

const char *ddl__hs_reason_text(const ddl__hs_proto *p, uint32_t reason)
{
    switch (reason) {
    case DDL__HS_R_VERSION: return "protocol version mismatch";
    case DDL__HS_R_JOB: return "job id mismatch";
    case DDL__HS_R_WORLD: return "world size mismatch";
    case DDL__HS_R_RANK: return "rank not expected here";
    case DDL__HS_R_DUPLICATE: return p->duplicate;
    case DDL__HS_R_TOKEN: return "wrong token";
    case DDL__HS_R_GARBAGE: return "not a ddl handshake";
    case DDL__HS_R_SILENT: return "silent too long";
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

/* hs_mac: HMAC-SHA256(token, label | len job | job | nonce_c | nonce_a | rank_c | rank_a | dir),
 * c the connecting side, a the accepting side, dir 'c' for the proof c sends, 'a' for a's. */
static void hs_mac(const ddl__hs_self *me, const unsigned char *nonce_c, const unsigned char *nonce_a, int rank_c,
                   int rank_a, char dir, unsigned char out[DDL__SHA256_BYTES])
{
    unsigned char msg[32 + 4 + DDL__JOB_BYTES + 2 * DDL__NONCE_BYTES + 8 + 1], *p = msg;
    size_t ll = strnlen(me->proto->label, 32), jl = strnlen(me->job, DDL__JOB_BYTES - 1);
    memcpy(p, me->proto->label, ll); p += ll;
    ddl__put_le(p, (uint32_t)jl, 4); p += 4;
    memcpy(p, me->job, jl); p += jl;
    memcpy(p, nonce_c, DDL__NONCE_BYTES); p += DDL__NONCE_BYTES;
    memcpy(p, nonce_a, DDL__NONCE_BYTES); p += DDL__NONCE_BYTES;
    ddl__put_le(p, (uint32_t)rank_c, 4); p += 4;
    ddl__put_le(p, (uint32_t)rank_a, 4); p += 4;
    *p++ = (unsigned char)dir;
    ddl__hmac_sha256(me->token ? me->token : "", me->token_bytes, msg, (size_t)(p - msg), out);
}

/* ---- accepting side ---- */

uint32_t ddl__hs_check_hello(const ddl__hs_self *me, const ddl__hs_msg *h)
{
    if (h->type != DDL__HS_HELLO)
        return DDL__HS_R_GARBAGE;
    if (h->version != me->proto->version)
        return DDL__HS_R_VERSION;
    if (strcmp(h->job, me->job) != 0)
        return DDL__HS_R_JOB;
    if (h->world != (uint32_t)me->world)
        return DDL__HS_R_WORLD;
    return 0;
}

int ddl__hs_hello(const ddl__hs_self *me, const char *addr, unsigned char nonce[DDL__NONCE_BYTES], ddl__hs_msg *out,
                  char *err, size_t err_bytes)
{
    ddl__hs_make(me, out, DDL__HS_HELLO);
    if (addr)
        memcpy(out->addr, addr, strnlen(addr, DDL__ADDR_BYTES - 1));
    if (random_bytes(nonce, DDL__NONCE_BYTES) != 0)
        return ddl__errf(err, err_bytes, DDL_EIO, "rank %d: no random numbers for the handshake", me->rank);
    memcpy(out->nonce, nonce, DDL__NONCE_BYTES);
    return DDL_OK;
}

int ddl__hs_proof_ok(const ddl__hs_self *me, const ddl__hs_msg *hello, const unsigned char *nonce_a,
                     const ddl__hs_msg *proof)
{
    unsigned char want[DDL__SHA256_BYTES];
    hs_mac(me, hello->nonce, nonce_a, (int)hello->rank, me->rank, 'c', want);
    return ddl__ct_equal(want, proof->mac, sizeof want);
}

void ddl__hs_ok(const ddl__hs_self *me, const ddl__hs_msg *hello, const unsigned char *nonce_a, ddl__hs_msg *out)
{
    ddl__hs_make(me, out, DDL__HS_OK);
    hs_mac(me, hello->nonce, nonce_a, (int)hello->rank, me->rank, 'a', out->mac);
}

void ddl__hs_log_refusal(const ddl__hs_self *me, ddl_log_fn log, void *log_ud, const char *from,
                         const ddl__hs_msg *h, uint32_t reason, int claims)
{
    const char *name = me->proto->name;
    if (reason == DDL__HS_R_JOB)
        ddl__log(log, log_ud, DDL_LOG_WARN, "%s: refused %s: job id mismatch (ours '%s', theirs '%s')", name, from,
                 me->job, h->job);
    else if (reason == DDL__HS_R_TOKEN)
        ddl__log(log, log_ud, DDL_LOG_WARN, "%s: refused %s: wrong token for job %s (it claimed rank %u)", name, from,
                 me->job, h->rank);
    else if (!claims)
        ddl__log(log, log_ud, DDL_LOG_WARN, "%s: refused %s: %s", name, from, ddl__hs_reason_text(me->proto, reason));
    else
        ddl__log(log, log_ud, DDL_LOG_WARN,
                 "%s: refused %s: %s (it claimed rank %u of %u, version %u; we are rank %d of %d)", name, from,
                 ddl__hs_reason_text(me->proto, reason), h->rank, h->world, h->version, me->rank, me->world);
}

/* ---- connecting side ---- */

int ddl__hs_reply(const ddl__hs_self *me, int peer, const char *addr, const unsigned char *in, size_t bytes,
                  ddl__hs_msg *m, char *err, size_t err_bytes)
{
    if (ddl__hs_decode(me->proto, in, bytes, m) != 0)
        return ddl__errf(err, err_bytes, DDL_EPROTO, "rank %d at %s answered with something that is not a ddl handshake",
                         peer, addr);
    if (m->type != DDL__HS_REFUSE)
        return DDL_OK;
    if (m->reason == DDL__HS_R_JOB)
        return ddl__errf(err, err_bytes, DDL_EAUTH,
                         "rank %d at %s refused the handshake: job id mismatch (ours '%s', theirs '%s')", peer, addr,
                         me->job, m->job);
    if (m->reason == DDL__HS_R_TOKEN)
        return ddl__errf(err, err_bytes, DDL_EAUTH, "rank %d at %s refused the handshake: wrong token for job '%s'",
                         peer, addr, me->job);
    return ddl__errf(err, err_bytes, DDL_EAUTH, "rank %d at %s refused the handshake: %s (we are rank %d of %d)", peer,
                     addr, ddl__hs_reason_text(me->proto, m->reason), me->rank, me->world);
}

int ddl__hs_proof(const ddl__hs_self *me, int peer, const char *addr, const ddl__hs_msg *hello,
                  const unsigned char *nonce_c, ddl__hs_msg *out, char *err, size_t err_bytes)
{
    if (hello->version != me->proto->version)
        return ddl__errf(err, err_bytes, DDL_EAUTH, "%s speaks protocol version %u, we speak %d", addr, hello->version,
                         (int)me->proto->version);
    if (strcmp(hello->job, me->job) != 0)
        return ddl__errf(err, err_bytes, DDL_EAUTH, "%s belongs to job '%s', not ours ('%s')", addr, hello->job,
                         me->job);
    if (hello->world != (uint32_t)me->world || hello->rank != (uint32_t)peer)
        return ddl__errf(err, err_bytes, DDL_EAUTH, "%s is rank %u of %u, expected rank %d of %d", addr, hello->rank,
                         hello->world, peer, me->world);
    unsigned char nonce_a[DDL__NONCE_BYTES];
    memcpy(nonce_a, hello->nonce, sizeof nonce_a); /* out may be hello */
    ddl__hs_make(me, out, DDL__HS_PROOF);
    hs_mac(me, nonce_c, nonce_a, me->rank, peer, 'c', out->mac);
    return DDL_OK;
}

int ddl__hs_check_ok(const ddl__hs_self *me, int peer, const char *addr, const unsigned char *nonce_c,
                     const unsigned char *nonce_a, const ddl__hs_msg *ok, char *err, size_t err_bytes)
{
    unsigned char want[DDL__SHA256_BYTES];
    hs_mac(me, nonce_c, nonce_a, me->rank, peer, 'a', want);
    if (!ddl__ct_equal(want, ok->mac, sizeof want))
        return ddl__errf(err, err_bytes, DDL_EAUTH, "rank %d at %s did not prove that it knows the token of job '%s'",
                         peer, addr, me->job);
    return DDL_OK;
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

int ddl__parse_peers(const char *peers, int rank, int world, char *addr0, size_t stride, char *err,
                     size_t err_bytes)
{
    const char *p = peers;
    int n = 0;
    for (;;) {
        while (*p == ' ')
            p++;
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (n >= world || len == 0 || len >= DDL__ADDR_BYTES)
            return ddl__errf(err, err_bytes, DDL_EINVAL,
                             "rank %d: bad peer list '%.120s': need %d addresses host:port, each under %d characters",
                             rank, peers, world, DDL__ADDR_BYTES);
        char *a = addr0 + (size_t)n++ * stride;
        memcpy(a, p, len);
        a[len] = 0;
        if (!comma)
            break;
        p = comma + 1;
    }
    if (n != world)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "rank %d: the peer list names %d addresses for %d ranks", rank, n,
                         world);
    return DDL_OK;
}

/* ---- frames ---- */

void ddl__frame_prefix(unsigned char out[DDL__FRAME_PREFIX], uint32_t magic, uint32_t flags, uint64_t bytes,
                       const void *hdr)
{
    ddl__put_le(out, magic, 4);
    ddl__put_le(out + 4, flags, 4);
    ddl__put_le(out + 8, bytes, 8);
    if (hdr)
        memcpy(out + 16, hdr, DDL_HEADER_BYTES);
    else
        memset(out + 16, 0, DDL_HEADER_BYTES);
}
