/* comm.c - the comm object: configuration from the environment, create/destroy, the table of
 * built-in transports, the 32-byte message header, point-to-point send/recv, and the one
 * wrapper (ddl__comm_xchg) through which every byte reaches a transport. create.c makes and
 * destroys the comm.
 * It owns sticky errors and their messages. It must not know any transport's internals, and
 * it must not allocate after ddl_comm_create. The collective algorithms live in collectives.c. */
#include "impl.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- header ----
 * Little-endian on the wire, so mixed hosts agree:
 *   0 magic u32 | 4 seq u32 | 8 op u8 | 9 dtype u8 | 10 redop u8 | 11 flags u8 |
 *  12 sender i32 | 16 count u64 | 24 arg i32 (tag / root) | 28 step u32 */

#define HDR_MAGIC 0x314C4444u /* "DDL1" */
#define HDR_ABORT 1u          /* flags: "your message did not match; this is what I expected" */

typedef struct hdr {
    uint32_t magic, seq, step;
    int op, dtype, redop, flags, sender, arg;
    uint64_t count;
} hdr;

static void hdr_pack(unsigned char *p, const hdr *h)
{
    ddl__put_le32(p, h->magic);
    ddl__put_le32(p + 4, h->seq);
    p[8] = (unsigned char)h->op;
    p[9] = (unsigned char)h->dtype;
    p[10] = (unsigned char)h->redop;
    p[11] = (unsigned char)h->flags;
    ddl__put_le32(p + 12, (uint32_t)h->sender);
    ddl__put_le32(p + 16, (uint32_t)h->count);
    ddl__put_le32(p + 20, (uint32_t)(h->count >> 32));
    ddl__put_le32(p + 24, (uint32_t)h->arg);
    ddl__put_le32(p + 28, h->step);
}

static void hdr_unpack(hdr *h, const unsigned char *p)
{
    h->magic = ddl__get_le32(p);
    h->seq = ddl__get_le32(p + 4);
    h->op = p[8];
    h->dtype = p[9];
    h->redop = p[10];
    h->flags = p[11];
    h->sender = (int32_t)ddl__get_le32(p + 12);
    h->count = (uint64_t)ddl__get_le32(p + 16) | (uint64_t)ddl__get_le32(p + 20) << 32;
    h->arg = (int32_t)ddl__get_le32(p + 24);
    h->step = ddl__get_le32(p + 28);
}

static hdr hdr_of_call(const ddl__call *k, int sender, uint32_t step)
{
    hdr h = {HDR_MAGIC, k->seq, step, k->op, k->dtype & 0xff, k->redop, 0, sender, k->arg, k->count};
    return h;
}

/* ---- descriptions ---- */

static const char *op_name(int op)
{
    switch (op) {
    case DDL__OP_ALLREDUCE: return "allreduce";
    case DDL__OP_BROADCAST: return "broadcast";
    case DDL__OP_ALLGATHER: return "allgather";
    case DDL__OP_BARRIER: return "barrier";
    case DDL__OP_P2P: return "message";
    default: return "unknown operation";
    }
}

static const char *dtype_name(int dtype)
{
    return dtype == DDL_FLOAT32      ? "float32"
           : dtype == DDL_INT64      ? "int64"
           : dtype == DDL__WIRE_BF16 ? "float32 sent as bf16"
           : dtype == DDL__WIRE_FP16 ? "float32 sent as fp16"
                                     : "bytes";
}

static const char *redop_name(int redop)
{
    return redop == DDL_SUM ? "sum" : redop == DDL_MEAN ? "mean" : redop == DDL_MAX ? "max" : "?";
}

/* describe: "allreduce(sum) #12 of 1000 float32", "broadcast(root 0) #3 of 10 int64",
 * "message #3 with tag 5 of 100 bytes". */
static void describe(char *s, size_t n, const hdr *h)
{
    unsigned long long cnt = (unsigned long long)h->count;
    switch (h->op) {
    case DDL__OP_ALLREDUCE:
        snprintf(s, n, "allreduce(%s) #%u of %llu %s", redop_name(h->redop), h->seq, cnt, dtype_name(h->dtype));
        break;
    case DDL__OP_BROADCAST:
        snprintf(s, n, "broadcast(root %d) #%u of %llu %s", h->arg, h->seq, cnt, dtype_name(h->dtype));
        break;
    case DDL__OP_ALLGATHER:
        snprintf(s, n, "allgather #%u of %llu %s", h->seq, cnt, dtype_name(h->dtype));
        break;
    case DDL__OP_BARRIER: snprintf(s, n, "barrier #%u", h->seq); break;
    case DDL__OP_P2P: snprintf(s, n, "message #%u with tag %d of %llu bytes", h->seq, h->arg, cnt); break;
    default: snprintf(s, n, "operation %d #%u", h->op, h->seq); break;
    }
}

/* human_bytes: "812 B", "4.0 KB", "1.2 MB" (powers of 1024, as sizes are usually given). */
static void human_bytes(char *s, size_t n, double b)
{
    if (b < 1024)
        snprintf(s, n, "%.0f B", b);
    else if (b < 1024.0 * 1024)
        snprintf(s, n, "%.1f KB", b / 1024);
    else if (b < 1024.0 * 1024 * 1024)
        snprintf(s, n, "%.1f MB", b / (1024.0 * 1024));
    else
        snprintf(s, n, "%.1f GB", b / (1024.0 * 1024 * 1024));
}

size_t ddl__dtype_bytes(int dtype) { return dtype == DDL_FLOAT32 ? 4 : dtype == DDL_INT64 ? 8 : 0; }

/* wire_bytes: bytes per element as a message size: the 16-bit formats of compress.c count as the
 * float32 the caller gave. */
static size_t wire_bytes(int dtype)
{
    return dtype == DDL__WIRE_BF16 || dtype == DDL__WIRE_FP16 ? 4 : ddl__dtype_bytes(dtype);
}

/* ---- errors ---- */

int ddl__comm_fail(ddl_comm *c, int status, const char *fmt, ...)
{
    if (c->status != DDL_OK)
        return c->status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    c->status = status;
    ddl__log(c->log, c->log_ud, DDL_LOG_ERROR, "%s", c->err);
    return status;
}

/* call_prefix: "allreduce #812 (1.2 MB)" for the call in progress. */
static void call_prefix(const ddl_comm *c, char *s, size_t n)
{
    char sz[32];
    size_t es = c->cur.op == DDL__OP_P2P ? 1 : wire_bytes(c->cur.dtype);
    human_bytes(sz, sizeof sz, (double)c->cur.count * (double)es);
    if (c->cur.op == DDL__OP_BARRIER)
        snprintf(s, n, "barrier #%u", c->cur.seq);
    else
        snprintf(s, n, "%s #%u (%s)", op_name(c->cur.op), c->cur.seq, sz);
}

/* ---- heartbeats' verdicts (heartbeat.c's thread writes them in c->hb) ---- */

/* verdict: the rank the heartbeat found silent, its message in msg; -1 if none. */
static int verdict(const ddl__hb *hb, char *msg, size_t n)
{
    int v = hb->running ? atomic_load(&hb->verdict) : 0;
    if (v)
        snprintf(msg, n, "%s", hb->msg);
    return v - 1;
}

/* explain: after a link failure: if the verdict on a silent rank is due within about an
 * interval, wait for it, so that every rank names the rank that stalled rather than a neighbour
 * that gave up on it a moment earlier. As verdict. */
static int explain(const ddl__hb *hb, char *msg, size_t n)
{
    if (!hb->running)
        return -1;
    int64_t until = 0, now = ddl__now_ms();
    for (int j = 0; j < hb->world; j++) {
        int64_t heard = atomic_load(&hb->peers[j].heard_ms);
        if (j != hb->rank && heard && !atomic_load(&hb->peers[j].left) &&
            now - heard >= hb->timeout_ms - hb->interval_ms - DDL__HB_TICK_MS &&
            heard + hb->timeout_ms + 2 * DDL__HB_TICK_MS > until)
            until = heard + hb->timeout_ms + 2 * DDL__HB_TICK_MS;
    }
    int r;
    while ((r = verdict(hb, msg, n)) < 0 && ddl__now_ms() < until) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return r;
}

void ddl__comm_suspect(ddl_comm *c, int r)
{
    if (r >= 0 && r < c->world && r < DDL__ELASTIC_MAX && r != c->rank)
        c->suspects[r / 8] |= (unsigned char)(1u << (r % 8));
}

/* stalled: if the heartbeat named a silent rank, fail the call in progress with that. */
static int stalled(ddl_comm *c, int wait_for_verdict)
{
    char msg[sizeof c->hb.msg], pre[96];
    int r = wait_for_verdict ? explain(&c->hb, msg, sizeof msg) : verdict(&c->hb, msg, sizeof msg);
    if (r < 0)
        return DDL_OK;
    if (!c->hb.verdict_regroup) /* silent; a rank that regroups lives */
        ddl__comm_suspect(c, r);
    call_prefix(c, pre, sizeof pre);
    return ddl__comm_fail(c, DDL_ETIMEDOUT, "%s: %s", pre, msg);
}

int ddl__comm_stalled(ddl_comm *c) { return stalled(c, 1); }

static int fail_transport(ddl_comm *c, int st, int to, int from)
{
    char pre[96];
    if (stalled(c, 1) != DDL_OK)
        return c->status;
    ddl__comm_suspect(c, to); /* one of them broke the link: a regroup tells which still lives */
    ddl__comm_suspect(c, from);
    call_prefix(c, pre, sizeof pre);
    const char *e = ddl__tp_error(c);
    if (e[0])
        return ddl__comm_fail(c, st, "%s: %s", pre, e);
    int peer = from >= 0 ? from : to;
    const char *addr = ddl__tp_peer_address(c, peer);
    return ddl__comm_fail(c, st, "%s: %s with rank %d%s%s", pre, ddl_strerror(st), peer, addr ? " at " : "",
                          addr ? addr : "");
}

/* ---- header checks ---- */

/* notify: best effort, tell `peer` that its message did not match what we expected, so a
 * sender that later receives from us fails too instead of waiting. */
static void notify_mismatch(ddl_comm *c, int peer, const hdr *expected)
{
    unsigned char b[DDL_HEADER_BYTES];
    hdr h = *expected;
    h.flags = HDR_ABORT;
    h.sender = c->rank;
    hdr_pack(b, &h);
    int t = c->timeout_ms < 100 ? c->timeout_ms : 100;
    (void)ddl__tp_exchange(c, peer, b, NULL, 0, -1, NULL, NULL, NULL, 0, t);
}

static int check_header(ddl_comm *c, int from, const unsigned char *raw, const hdr *want, int length_ok)
{
    hdr got;
    char a[160], b[160];
    hdr_unpack(&got, raw);
    if (got.magic != HDR_MAGIC || got.sender != from) {
        call_prefix(c, a, sizeof a); /* the header cannot say which operation: ours can */
        return ddl__comm_fail(c, DDL_EPROTO, "%s: rank %d got a message from rank %d without a valid ddl header "
                              "(magic 0x%08x, sender %d)", a, c->rank, from, got.magic, got.sender);
    }
    if (got.flags & HDR_ABORT) { /* may come during a later call than the one it is about: name ours */
        hdr mine;
        char pre[96];
        call_prefix(c, pre, sizeof pre);
        hdr_unpack(&mine, c->last_sent + (size_t)from * DDL_HEADER_BYTES);
        describe(a, sizeof a, &got);
        describe(b, sizeof b, &mine);
        if (mine.magic == HDR_MAGIC && strcmp(a, b) == 0) /* what we sent was fine: it changed on the way */
            snprintf(b, sizeof b, "a message this rank did not send that way (changed, lost or repeated on the way)");
        return ddl__comm_fail(c, DDL_EMISMATCH, "%s: rank %d expected %s from rank %d, got %s", pre, from, a,
                              c->rank, mine.magic == HDR_MAGIC ? b : "something else");
    }
    int same = got.op == want->op && got.dtype == want->dtype && got.redop == want->redop &&
               got.count == want->count && got.arg == want->arg && got.seq == want->seq;
    if (same && got.step == want->step && length_ok)
        return DDL_OK;
    describe(a, sizeof a, want);
    describe(b, sizeof b, &got);
    if (same && got.step != want->step)
        ddl__comm_fail(c, DDL_EMISMATCH, "rank %d expected %s step %u from rank %d, got step %u", c->rank, a,
                       want->step, from, got.step);
    else if (same)
        ddl__comm_fail(c, DDL_EMISMATCH, "rank %d expected %s from rank %d, got a payload of another length",
                       c->rank, a, from);
    else
        ddl__comm_fail(c, DDL_EMISMATCH, "rank %d expected %s from rank %d, got %s", c->rank, a, from, b);
    notify_mismatch(c, from, want);
    return c->status;
}

/* ---- the one path to the transport ---- */

/* xchg: ddl__comm_xchg into recv_buf, or, with view non-NULL, through the transport's exchange_view. */
static int xchg(ddl_comm *c, int to, uint32_t send_step, const void *send_buf, size_t send_bytes, int from,
                uint32_t recv_step, void *recv_buf, const void **view, size_t recv_bytes)
{
    unsigned char sh[DDL_HEADER_BYTES], rh[DDL_HEADER_BYTES];
    if (c->status != DDL_OK)
        return c->status;
    if (to >= 0) {
        hdr h = hdr_of_call(&c->cur, c->rank, send_step);
        hdr_pack(sh, &h);
        memcpy(c->last_sent + (size_t)to * DDL_HEADER_BYTES, sh, DDL_HEADER_BYTES);
    }
    memset(rh, 0, sizeof rh);
    int st = ddl__tp_exchange(c, to, to >= 0 ? sh : NULL, send_buf, send_bytes, from, view || from >= 0 ? rh : NULL,
                              recv_buf, view, recv_bytes, c->timeout_ms);
    if (from >= 0 && (st == DDL_OK || st == DDL_EMISMATCH)) {
        hdr want = hdr_of_call(&c->cur, from, recv_step);
        if (check_header(c, from, rh, &want, st == DDL_OK) != DDL_OK)
            return c->status;
    } else if (st != DDL_OK) {
        return fail_transport(c, st, to, from);
    }
    return DDL_OK;
}

int ddl__comm_xchg(ddl_comm *c, int to, uint32_t send_step, const void *send_buf, size_t send_bytes, int from,
                   uint32_t recv_step, void *recv_buf, size_t recv_bytes)
{
    return xchg(c, to, send_step, send_buf, send_bytes, from, recv_step, recv_buf, NULL, recv_bytes);
}

int ddl__comm_xchg_in(ddl_comm *c, int to, uint32_t send_step, const void *send_buf, size_t send_bytes, int from,
                      uint32_t recv_step, size_t recv_bytes, size_t esz, void *scratch, const void **in)
{
    *in = scratch;
    if (from < 0 || recv_bytes == 0 || recv_bytes > c->view_max)
        return xchg(c, to, send_step, send_buf, send_bytes, from, recv_step, scratch, NULL, recv_bytes);
    const void *v = NULL;
    int st = xchg(c, to, send_step, send_buf, send_bytes, from, recv_step, NULL, &v, recv_bytes);
    if (st != DDL_OK)
        return st;
    if ((uintptr_t)v % esz == 0)
        *in = v;
    else /* a payload the transport holds at an odd address: elements must be aligned */
        memcpy(scratch, v, recv_bytes);
    return DDL_OK;
}

int ddl__comm_can_post(const ddl_comm *c, size_t bytes)
{
    return c->post_max && c->world <= DDL__MAX_POST_RANKS && bytes <= c->post_max &&
           (size_t)c->world * bytes <= DDL__SCRATCH_BYTES;
}

int ddl__comm_post(ddl_comm *c, const void *buf, size_t bytes, const void **views)
{
    unsigned char sh[DDL_HEADER_BYTES];
    if (c->status != DDL_OK)
        return c->status;
    hdr h = hdr_of_call(&c->cur, c->rank, 0);
    hdr_pack(sh, &h);
    memset(c->posted, 0, (size_t)c->world * DDL_HEADER_BYTES);
    views[c->rank] = buf;
    int st = ddl__tp_allgather(c, sh, buf, bytes, c->posted, views);
    if (st != DDL_OK && st != DDL_EMISMATCH)
        return fail_transport(c, st, -1, -1);
    for (int r = 0; r < c->world; r++) {
        const unsigned char *raw = c->posted + (size_t)r * DDL_HEADER_BYTES;
        if (r == c->rank || (st != DDL_OK && ddl__get_le32(raw) == 0))
            continue; /* ours, or not posted before another rank's mismatch */
        hdr want = hdr_of_call(&c->cur, r, 0);
        memcpy(c->last_sent + (size_t)r * DDL_HEADER_BYTES, sh, DDL_HEADER_BYTES);
        if (check_header(c, r, raw, &want, st == DDL_OK) != DDL_OK)
            return c->status;
    }
    if (st != DDL_OK) /* the transport saw a mismatch the headers do not show */
        return fail_transport(c, st, -1, -1);
    return DDL_OK;
}

int ddl__comm_begin(ddl_comm *c, int op, int dtype, int redop, size_t count, int arg)
{
    if (!c)
        return DDL_EINVAL;
    if (c->join_pending && c->member->admit(c) != DDL_OK)
        return c->status;
    if (c->status != DDL_OK)
        return c->status;
    ddl__call k = {op, dtype, redop, (uint64_t)count, arg, c->seq++};
    c->cur = k;
    return stalled(c, 0);
}

/* ---- transports ---- */

typedef struct transport_entry {
    const char *name;
    const ddl_transport *(*get)(void);
} transport_entry;

static const transport_entry transports[] = {
    {"shm", ddl_transport_shm},
    {"tcp", ddl_transport_tcp},
    {"zmq", ddl_transport_zmq},
    {"mpi", ddl_transport_mpi},
};

const ddl_transport *ddl_transport_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < sizeof transports / sizeof transports[0]; i++)
        if (strcmp(name, transports[i].name) == 0)
            return transports[i].get();
    return NULL;
}

/* ddl__default_transport: cfg->transport from name, or when name is NULL the default of
 * DESIGN.md for a job that is not under mpirun: shm when every rank shares this host, else tcp.
 * why says where the name came from, for the message. */
int ddl__default_transport(ddl_comm_config *cfg, const char *name, const char *why, char *err, size_t err_bytes)
{
    if (!name) {
        int one_host = cfg->local_size == cfg->world_size;
        name = one_host ? "shm" : "tcp";
        why = one_host ? "the default when all ranks share a host" : "the default across hosts";
    }
    cfg->transport = ddl_transport_find(name);
    if (cfg->transport)
        return DDL_OK;
    for (size_t i = 0; i < sizeof transports / sizeof transports[0]; i++)
        if (strcmp(name, transports[i].name) == 0)
            return ddl__errf(err, err_bytes, DDL_ENOTSUP, "transport %s (%s) is not compiled in", name, why);
    return ddl__errf(err, err_bytes, DDL_EINVAL, "%s=%s is not a transport (shm, tcp, zmq, mpi)", why, name);
}

/* ---- close ---- */

void ddl__comm_close(ddl_comm *c)
{
    ddl__hb_stop(&c->hb);
    ddl__tp_close(c);
    ddl_allocator a = c->alloc;
    ddl__free(a.alloc ? &a : NULL, c);
}

/* ---- getters ---- */

int ddl_comm_rank(const ddl_comm *c) { return c ? c->rank : 0; }
int ddl_comm_size(const ddl_comm *c) { return c ? c->world : 1; }
const char *ddl_comm_transport_name(const ddl_comm *c) { return ddl__tp_name(c); }
const char *ddl_comm_error(const ddl_comm *c) { return c ? c->err : "comm is NULL"; }
void ddl_comm_set_native(ddl_comm *c, int on)
{
    if (c)
        ddl__tp_limits(c, on); /* native only where the transport has its own all-reduce */
}

/* ---- point to point ---- */

static int p2p_check(ddl_comm *c, int peer, const void *buf, size_t bytes, const char *what)
{
    if (!c)
        return DDL_EINVAL;
    if (c->join_pending && c->member->admit(c) != DDL_OK)
        return c->status;
    if (c->status != DDL_OK || stalled(c, 0) != DDL_OK)
        return c->status;
    if (peer < 0 || peer >= c->world || peer == c->rank || (bytes && !buf)) {
        snprintf(c->err, sizeof c->err, "%s: rank %d cannot talk to rank %d of %d (or buf is NULL)", what,
                 c->rank, peer, c->world);
        return DDL_EINVAL;
    }
    return DDL_OK;
}

int ddl_comm_send(ddl_comm *c, int peer, int tag, const void *buf, size_t bytes)
{
    int st = p2p_check(c, peer, buf, bytes, "send");
    if (st)
        return st;
    ddl__call k = {DDL__OP_P2P, 0xff, 0, (uint64_t)bytes, tag, c->p2p_sent[peer]};
    c->cur = k;
    st = ddl__comm_xchg(c, peer, 0, buf, bytes, -1, 0, NULL, 0);
    if (st == DDL_OK)
        c->p2p_sent[peer]++;
    return st;
}

int ddl_comm_recv(ddl_comm *c, int peer, int tag, void *buf, size_t bytes)
{
    int st = p2p_check(c, peer, buf, bytes, "recv");
    if (st)
        return st;
    ddl__call k = {DDL__OP_P2P, 0xff, 0, (uint64_t)bytes, tag, c->p2p_recvd[peer]};
    c->cur = k;
    st = ddl__comm_xchg(c, -1, 0, NULL, 0, peer, 0, buf, bytes);
    if (st == DDL_OK)
        c->p2p_recvd[peer]++;
    return st;
}
