/* zmq_zap.c - who may pass ZeroMQ's own handshake: a job with a token runs ZMTP's PLAIN
 * mechanism (RFC 24) with a ZAP handler (RFC 27) of ours, so that a peer without the token is
 * closed by libzmq before it has a pipe, a message or a command libzmq would act on.
 *
 * Why: ddl's handshake (net_handshake.c) authenticates every rank, but it runs inside ZMTP, and
 * a stranger who has passed ZMTP's NULL mechanism can drive libzmq itself into an assertion: a
 * burst of messages that fills the ROUTER's pipe, a PING behind them, then a reset, and libzmq
 * 4.3.4 answers the PING on the failed engine once the pipe drains and aborts the whole rank
 * ("Assertion failed: !_io_error (src/stream_engine_base.cpp:331)", libzmq issue #4364).
 *
 * The credential: user "ddl", password the hex of HMAC-SHA256(token, label || job id), which
 * ranks that share the token and the job derive alike and nobody else can; it tells nothing of
 * the token. Our ROUTER is a PLAIN server, our DEALERs clients. libzmq asks the ZAP handler,
 * a REP socket at inproc://zeromq.zap.01 in the comm's context, for each PLAIN HELLO; open()'s
 * loop answers (zq_zap_step), comparing in constant time. open() ends by closing the handler and
 * wiping the password: a PLAIN server finds no handler then and closes every newcomer (libzmq
 * 4.3 does so without one), as the shut door (zmq.c) already keeps them out.
 * Why not CURVE, which needs no handler: it encrypts every frame in libzmq's I/O thread, and
 * libsodium's box ran at 0.4 GB/s a core here, below what the all-reduce moves over loopback.
 * PLAIN travels in the clear: someone who reads the wire can replay the password (and could
 * reset the connections anyway); DDL_MAC=1 guards the gradients against them. Without a token
 * (one host, or DDL_INSECURE=1) the NULL mechanism stays, as before. */
#include "ddl.h"

#ifdef DDL_WITH_ZMQ
#include "zmq_impl.h"

#include <errno.h>
#include <string.h>

#define ZAP_ENDPOINT "inproc://zeromq.zap.01" /* RFC 27: the one address libzmq asks */
#define ZAP_LABEL "ddl-zmq-plain-v1"
#define ZAP_USER "ddl"
#define ZAP_PARTS 8 /* version, request id, domain, address, routing id, mechanism, user, password */
#define ZAP_PART_BYTES 256

/* wipe: clear a secret so that the compiler cannot drop the stores. */
static void wipe(void *p, size_t n)
{
    volatile unsigned char *v = p;
    while (n--)
        *v++ = 0;
}

int ddl__zq_zap_open(zq_state *s)
{
    ddl__net *n = &s->net;
    if (!n->token || n->token_bytes == 0)
        return DDL_OK;
    unsigned char msg[sizeof ZAP_LABEL + DDL__JOB_BYTES], key[DDL__SHA256_BYTES];
    size_t job = strnlen(n->job, DDL__JOB_BYTES);
    memcpy(msg, ZAP_LABEL, sizeof ZAP_LABEL); /* the label's NUL separates it from the job */
    memcpy(msg + sizeof ZAP_LABEL, n->job, job);
    ddl__hmac_sha256(n->token, n->token_bytes, msg, sizeof ZAP_LABEL + job, key);
    for (size_t i = 0; i < sizeof key; i++)
        snprintf(s->zap_password + 2 * i, 3, "%02x", key[i]);
    wipe(key, sizeof key);
    s->zap = zmq_socket(s->ctx, ZMQ_REP);
    int zero = 0;
    if (!s->zap || zmq_setsockopt(s->zap, ZMQ_LINGER, &zero, sizeof zero) != 0 || zmq_bind(s->zap, ZAP_ENDPOINT) != 0)
        return ddl__net_fail(n, DDL_EIO, "rank %d: cannot start ZeroMQ's authentication handler: %s", n->rank,
                             zmq_strerror(errno));
    return DDL_OK;
}

int ddl__zq_zap_server(zq_state *s, void *router)
{
    int one = 1;
    if (s->zap && zmq_setsockopt(router, ZMQ_PLAIN_SERVER, &one, sizeof one) != 0)
        return ddl__net_fail(&s->net, DDL_EIO, "rank %d: cannot make our ROUTER a PLAIN server: %s", s->net.rank,
                             zmq_strerror(errno));
    return DDL_OK;
}

int ddl__zq_zap_client(zq_state *s, void *dealer)
{
    if (!s->zap)
        return DDL_OK;
    if (zmq_setsockopt(dealer, ZMQ_PLAIN_USERNAME, ZAP_USER, strlen(ZAP_USER)) != 0 ||
        zmq_setsockopt(dealer, ZMQ_PLAIN_PASSWORD, s->zap_password, strlen(s->zap_password)) != 0)
        return ddl__net_fail(&s->net, DDL_EIO, "rank %d: cannot give a DEALER the job's credential: %s", s->net.rank,
                             zmq_strerror(errno));
    return DDL_OK;
}

/* answer: one ZAP reply (RFC 27): version, the request's id, status code and text, user id,
 * metadata. */
static void answer(void *zap, const char *id, size_t id_bytes, int ok)
{
    (void)zmq_send(zap, "1.0", 3, ZMQ_SNDMORE);
    (void)zmq_send(zap, id, id_bytes, ZMQ_SNDMORE);
    (void)zmq_send(zap, ok ? "200" : "400", 3, ZMQ_SNDMORE);
    (void)zmq_send(zap, ok ? "OK" : "not a rank of this job", ok ? 2 : 22, ZMQ_SNDMORE);
    (void)zmq_send(zap, ok ? ZAP_USER : "", ok ? strlen(ZAP_USER) : 0, ZMQ_SNDMORE);
    (void)zmq_send(zap, "", 0, 0);
}

/* same: the received part equals want (the part was not cut short by the buffer). */
static int same(const char *part, int got, const char *want)
{
    size_t n = strlen(want);
    return got == (int)n && ddl__ct_equal(part, want, n);
}

void ddl__zq_zap_step(zq_state *s)
{
    if (!s->zap)
        return;
    for (;;) {
        char part[ZAP_PARTS][ZAP_PART_BYTES];
        int got[ZAP_PARTS] = {0}, k = 0, more = 1;
        if ((got[0] = zmq_recv(s->zap, part[0], ZAP_PART_BYTES, ZMQ_DONTWAIT)) < 0)
            return;
        for (;;) {
            size_t ml = sizeof more;
            zmq_getsockopt(s->zap, ZMQ_RCVMORE, &more, &ml);
            if (!more)
                break;
            if (k + 1 == ZAP_PARTS) { /* more parts than PLAIN's request has: refused below */
                ddl__zq_drain_parts(s->zap);
                k = ZAP_PARTS;
                break;
            }
            k++;
            got[k] = zmq_recv(s->zap, part[k], ZAP_PART_BYTES, 0);
        }
        int ok = k == ZAP_PARTS - 1 && same(part[0], got[0], "1.0") && same(part[5], got[5], "PLAIN") &&
                 same(part[6], got[6], ZAP_USER) && same(part[7], got[7], s->zap_password);
        int id = got[1] > 0 && got[1] <= ZAP_PART_BYTES ? got[1] : 0;
        if (!ok)
            ddl__log(s->net.log, s->net.log_ud, DDL_LOG_DEBUG,
                     "zmq: rank %d: refused a peer without the job's credential at ZeroMQ's handshake", s->net.rank);
        answer(s->zap, part[1], (size_t)id, ok);
    }
}

void ddl__zq_zap_close(zq_state *s)
{
    if (s->zap)
        zmq_close(s->zap);
    s->zap = NULL;
    wipe(s->zap_password, sizeof s->zap_password);
}

#endif
