/* mpi.c - the MPI transport: ranks started by mpirun (Open MPI or MPICH) or srun talk through
 * MPI point-to-point on a private duplicate of MPI_COMM_WORLD whose errors are returned, not
 * fatal. Every wait is a loop of MPI_Test against the deadline, so nothing blocks forever; the
 * native all-reduce is MPI_Iallreduce, tested the same way. It owns that communicator and, if
 * it was the one to call MPI_Init, the call to MPI_Finalize in close (skipped after a failure, when
 * it could wait forever for a stalled rank). Its state lives in the
 * memory the core hands to open(); MPI itself allocates and may run progress threads of its
 * own. It moves bytes only: the 32-byte header is opaque here. It must not abort the job
 * (no MPI_Abort, no fatal error handler on its communicator) nor wait without a limit.
 * Compiled only with DDL_WITH_MPI; otherwise ddl_transport_mpi() returns NULL. */
#include "ddl.h"

#ifdef DDL_WITH_MPI
#include "core/impl.h"

#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- messages ----
 * A message is one MPI message with the tag tag_msg: prefix = u32 magic, u32 flags, u64 payload bytes,
 * 32-byte header (48 bytes, little endian), followed by the payload when it is at most
 * SMALL_BYTES. A larger payload follows as tag_data messages of at most CHUNK_BYTES each,
 * received straight into the caller's buffer. The two tags change with every comm (an epoch that
 * rank 0 draws at open): a message left unmatched by a failed comm cannot be taken by a later one
 * even when MPI reuses the freed communicator's context id (MPICH does). */

#define MP_MAGIC 0x4d4c4444U       /* "DDLM" */
#define MP_STATE_MAGIC 0x6d70692dU /* marks a state that open() has initialised */
#define PREFIX 48
#define SMALL_BYTES ((size_t)64 << 10)
#define CHUNK_BYTES ((size_t)1 << 30)
#define MAX_PAYLOAD ((uint64_t)1 << 40)
#define MISMATCH_SEND_MS 200 /* after a mismatched receive: how long our send may wait to be taken */
#define EPOCHS 16383 /* tags are 2 epoch and 2 epoch + 1: below MPI's guaranteed MPI_TAG_UB of 32767 */
#define MP_MAX_WORLD (1 << 20)

typedef struct mp_state {
    uint32_t magic;
    int rank, world, timeout_ms;
    int we_init;              /* this state called MPI_Init: it calls MPI_Finalize in close */
    int have_comm;            /* comm is ours to free */
    int stuck;                /* an operation timed out with a request MPI cannot cancel */
    int failed;               /* an operation failed: MPI_Finalize could wait for a dead or stalled rank */
    int tag_msg, tag_data;    /* this comm's two tags (2 epoch, 2 epoch + 1) */
    MPI_Comm comm;            /* dup of MPI_COMM_WORLD with MPI_ERRORS_RETURN */
    ddl_log_fn log;
    void *log_ud;
    int *rx_down;             /* [world]: 0, or the status that broke receiving from that rank */
    unsigned char *sbuf;      /* [PREFIX + SMALL_BYTES]: the message we send */
    unsigned char *rbuf;      /* [PREFIX + SMALL_BYTES]: the message we receive */
    char err[DDL_ERR_BYTES];
    _Atomic int stalled;      /* 1 + the rank the comm's heartbeat found silent (interrupt) */
} mp_state;

static int mp_fail(mp_state *s, int status, const char *fmt, ...) DDL__PRINTF(3, 4);

static int mp_fail(mp_state *s, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    s->failed = 1;
    ddl__log(s->log, s->log_ud, DDL_LOG_DEBUG, "mpi: rank %d: %s", s->rank, s->err);
    return status;
}

/* mpi_fail: an MPI call returned rc; say which and what MPI says. */
static int mpi_fail(mp_state *s, int rc, const char *what, int peer)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error %d", rc);
    return mp_fail(s, DDL_EIO, "rank %d: %s with rank %d failed: %.*s", s->rank, what, peer, len, msg);
}

/* ---- waiting ---- */

/* idle: called between MPI_Test rounds: spins first (a sleep costs tens of microseconds of
 * timer slack, more than a whole small message), then yields, then sleeps a little so that
 * oversubscribed ranks leave the CPU to the rank they wait for. */
static void idle(long round)
{
    if (round < 20000)
        return;
    if (round < 200000) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 50000L};
    nanosleep(&ts, NULL);
}

/* wait_one: test *req until it completes or deadline_ms passes: DDL_OK, DDL_ETIMEDOUT, or
 * DDL_EIO with the MPI error. */
static int wait_one(mp_state *s, MPI_Request *req, MPI_Status *st, int64_t deadline_ms, const char *what, int peer)
{
    for (long round = 0;; round++) {
        int done = 0;
        int rc = MPI_Test(req, &done, st);
        if (rc != MPI_SUCCESS)
            return mpi_fail(s, rc, what, peer);
        if (done)
            return DDL_OK;
        if ((round & 63) == 0 && (ddl__now_ms() >= deadline_ms || atomic_load(&s->stalled)))
            return DDL_ETIMEDOUT;
        idle(round);
    }
}

/* give_up: a request that did not complete in time: receives are cancelled; a send MPI may not
 * cancel is freed (it may still complete later: the comm is failed by then). */
static void give_up(mp_state *s, MPI_Request *req)
{
    if (*req == MPI_REQUEST_NULL)
        return;
    MPI_Cancel(req);
    int64_t until = ddl__now_ms() + 100;
    int done = 0;
    while (!done && ddl__now_ms() < until)
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            break;
    if (!done) {
        MPI_Request_free(req);
        s->stuck = 1;
    }
    *req = MPI_REQUEST_NULL;
}

/* ---- open and close ---- */

static size_t layout(size_t world, size_t *down_at, size_t *sbuf_at, size_t *rbuf_at)
{
    size_t a = ddl__align_up(sizeof(mp_state));
    size_t b = a + ddl__align_up(world * sizeof(int));
    size_t c = b + ddl__align_up(PREFIX + SMALL_BYTES);
    if (down_at) {
        *down_at = a;
        *sbuf_at = b;
        *rbuf_at = c;
    }
    return c + ddl__align_up(PREFIX + SMALL_BYTES);
}

static size_t mp_state_bytes(const ddl_comm_config *cfg)
{
    int w = cfg ? cfg->world_size : 1;
    return layout(w >= 1 && w <= MP_MAX_WORLD ? (size_t)w : 1, NULL, NULL, NULL);
}

/* start_mpi: MPI_Init unless someone did; DDL_OK or why MPI cannot be used. */
static int start_mpi(mp_state *s)
{
    int inited = 0, finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
        return mp_fail(s, DDL_EINVAL, "MPI was already finalized in this process (an earlier comm that started MPI "
                       "was destroyed; keep one open, or call MPI_Init yourself)");
    MPI_Initialized(&inited);
    if (!inited) {
        if (MPI_Init(NULL, NULL) != MPI_SUCCESS)
            return mp_fail(s, DDL_EIO, "MPI_Init failed");
        s->we_init = 1;
    }
    return DDL_OK;
}

/* dup_world: our own communicator, duplicated without blocking forever (MPI_Comm_idup). */
static int dup_world(mp_state *s, int64_t deadline_ms)
{
    MPI_Request req;
    int rc = MPI_Comm_idup(MPI_COMM_WORLD, &s->comm, &req);
    if (rc != MPI_SUCCESS)
        return mpi_fail(s, rc, "MPI_Comm_idup", -1);
    rc = wait_one(s, &req, MPI_STATUS_IGNORE, deadline_ms, "MPI_Comm_idup", -1);
    if (rc == DDL_ETIMEDOUT) {
        s->stuck = 1;
        return mp_fail(s, rc, "rank %d timed out after %d ms waiting for every MPI rank to open the comm", s->rank,
                       s->timeout_ms);
    }
    if (rc != DDL_OK)
        return rc;
    s->have_comm = 1;
    MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN);
    /* the epoch: rank 0's draw, broadcast without blocking forever */
    int epoch = 1 + (int)(((uint64_t)ddl__now_ms() * 2654435761u + (uint64_t)getpid() * 40503u) % EPOCHS);
    rc = MPI_Ibcast(&epoch, 1, MPI_INT, 0, s->comm, &req);
    if (rc != MPI_SUCCESS)
        return mpi_fail(s, rc, "MPI_Ibcast", 0);
    rc = wait_one(s, &req, MPI_STATUS_IGNORE, deadline_ms, "MPI_Ibcast", 0);
    if (rc == DDL_ETIMEDOUT) {
        s->stuck = 1;
        return mp_fail(s, rc, "rank %d timed out after %d ms waiting for rank 0 to start the comm", s->rank,
                       s->timeout_ms);
    }
    s->tag_msg = 2 * epoch;
    s->tag_data = 2 * epoch + 1;
    return rc;
}

static int mp_open(void *state, const ddl_comm_config *cfg)
{
    mp_state *s = state;
    if (!s || !cfg || cfg->world_size < 1 || cfg->world_size > MP_MAX_WORLD || cfg->rank < 0 ||
        cfg->rank >= cfg->world_size)
        return DDL_EINVAL;
    size_t da, sa, ra;
    layout((size_t)cfg->world_size, &da, &sa, &ra);
    s->rx_down = (int *)((unsigned char *)s + da);
    s->sbuf = (unsigned char *)s + sa;
    s->rbuf = (unsigned char *)s + ra;
    s->magic = MP_STATE_MAGIC;
    s->rank = cfg->rank;
    s->world = cfg->world_size;
    s->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 30000;
    s->log = cfg->log;
    s->log_ud = cfg->log_ud;
    int st = start_mpi(s), rank = -1, size = 0;
    if (st != DDL_OK)
        return st;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != s->rank || size != s->world)
        return mp_fail(s, DDL_EINVAL, "MPI says this is rank %d of %d, the configuration says rank %d of %d "
                       "(under mpirun, leave DDL_RANK and DDL_WORLD_SIZE unset)", rank, size, s->rank, s->world);
    st = dup_world(s, ddl__now_ms() + s->timeout_ms);
    if (st == DDL_OK)
        ddl__log(s->log, s->log_ud, DDL_LOG_INFO, "mpi: rank %d of %d ready", s->rank, s->world);
    return st;
}

static void mp_close(void *state)
{
    mp_state *s = state;
    if (!s || s->magic != MP_STATE_MAGIC)
        return;
    if (s->have_comm)
        MPI_Comm_free(&s->comm);
    s->have_comm = 0;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (s->we_init && !finalized && s->failed) {
        /* MPI_Finalize waits for every rank (Open MPI's fence): after a failure one of them may be
         * dead or stopped, and it would wait forever. Leave MPI unfinalized; mpirun then ends the
         * job when this process exits. */
        ddl__log(s->log, s->log_ud, DDL_LOG_WARN,
                 "mpi: rank %d: not calling MPI_Finalize after a failure (it could wait forever for a stalled "
                 "rank); mpirun will end the job", s->rank);
    } else if (s->we_init && !finalized) {
        MPI_Finalize();
    }
    s->we_init = 0;
    s->magic = 0;
}

/* ---- exchange ---- */

/* One direction of an exchange in progress: the message, then the chunks of a large payload. */
typedef struct dir {
    int peer;                  /* -1: nothing to do */
    MPI_Request req;
    unsigned char *buf;        /* caller's payload */
    size_t bytes, done;        /* payload bytes, and bytes whose chunk request was posted */
    int stage;                 /* 0: message, 1: chunks, 2: finished */
} dir;

static int post_send(mp_state *s, dir *d)
{
    int rc;
    if (d->stage == 0) {
        size_t n = PREFIX + (d->bytes <= SMALL_BYTES ? d->bytes : 0);
        rc = MPI_Isend(s->sbuf, (int)n, MPI_BYTE, d->peer, s->tag_msg, s->comm, &d->req);
    } else {
        size_t n = d->bytes - d->done < CHUNK_BYTES ? d->bytes - d->done : CHUNK_BYTES;
        rc = MPI_Isend(d->buf + d->done, (int)n, MPI_BYTE, d->peer, s->tag_data, s->comm, &d->req);
        d->done += n;
    }
    return rc == MPI_SUCCESS ? DDL_OK : mpi_fail(s, rc, "MPI_Isend", d->peer);
}

static int post_recv(mp_state *s, dir *d)
{
    int rc;
    if (d->stage == 0) {
        rc = MPI_Irecv(s->rbuf, (int)(PREFIX + SMALL_BYTES), MPI_BYTE, d->peer, s->tag_msg, s->comm, &d->req);
    } else {
        size_t n = d->bytes - d->done < CHUNK_BYTES ? d->bytes - d->done : CHUNK_BYTES;
        rc = MPI_Irecv(d->buf + d->done, (int)n, MPI_BYTE, d->peer, s->tag_data, s->comm, &d->req);
        d->done += n;
    }
    return rc == MPI_SUCCESS ? DDL_OK : mpi_fail(s, rc, "MPI_Irecv", d->peer);
}

/* got_message: the tag_msg message from d->peer arrived (count bytes in rbuf). */
static int got_message(mp_state *s, dir *d, int count, void *recv_hdr)
{
    const unsigned char *p = s->rbuf;
    uint64_t len = count >= PREFIX ? ddl__get_le(p + 8, 8) : 0;
    if (count < PREFIX || ddl__get_le(p, 4) != MP_MAGIC || ddl__get_le(p + 4, 4) != 0 || len > MAX_PAYLOAD ||
        (len <= SMALL_BYTES ? (uint64_t)count != PREFIX + len : count != PREFIX)) {
        s->rx_down[d->peer] = DDL_EPROTO;
        return mp_fail(s, DDL_EPROTO, "rank %d broke the protocol: a message of %d bytes that is not a ddl message",
                       d->peer, count);
    }
    if (recv_hdr)
        memcpy(recv_hdr, p + 16, DDL_HEADER_BYTES);
    if (len != (uint64_t)d->bytes) {
        if (len > SMALL_BYTES) /* its payload is still on the way: read no more from that rank */
            s->rx_down[d->peer] = DDL_EMISMATCH;
        return mp_fail(s, DDL_EMISMATCH, "rank %d sent a message of %llu bytes, rank %d expected %zu", d->peer,
                       (unsigned long long)len, s->rank, d->bytes);
    }
    if (len <= SMALL_BYTES) {
        if (len)
            memcpy(d->buf, p + PREFIX, (size_t)len);
        d->stage = 2;
        return DDL_OK;
    }
    d->stage = 1;
    return post_recv(s, d);
}

/* step: d's request completed: post the next one, or finish. */
static int step(mp_state *s, dir *d, int sending, const MPI_Status *st, void *recv_hdr)
{
    if (!sending && d->stage == 0) {
        int count = 0;
        MPI_Get_count(st, MPI_BYTE, &count);
        return got_message(s, d, count, recv_hdr);
    }
    if (d->done < d->bytes && !(sending && d->stage == 0 && d->bytes <= SMALL_BYTES)) {
        d->stage = 1;
        return sending ? post_send(s, d) : post_recv(s, d);
    }
    d->stage = 2;
    return DDL_OK;
}

static int exchange_timeout(mp_state *s, dir *ds, dir *dr, int timeout_ms)
{
    int recv_open = dr->stage != 2;
    give_up(s, &ds->req);
    give_up(s, &dr->req);
    if (recv_open) {
        if (dr->stage == 1)
            s->rx_down[dr->peer] = DDL_ETIMEDOUT;
        return mp_fail(s, DDL_ETIMEDOUT, "rank %d timed out after %d ms waiting for rank %d to send %zu bytes", s->rank,
                       timeout_ms, dr->peer, dr->bytes);
    }
    return mp_fail(s, DDL_ETIMEDOUT, "rank %d timed out after %d ms waiting for rank %d to take %zu bytes", s->rank,
                  timeout_ms, ds->peer, ds->bytes);
}

/* test_dir: one MPI_Test of d; a completed request moves it on. */
static int test_dir(mp_state *s, dir *d, int sending, void *recv_hdr)
{
    if (d->stage == 2)
        return DDL_OK;
    int done = 0;
    MPI_Status st;
    int rc = MPI_Test(&d->req, &done, &st);
    if (rc != MPI_SUCCESS)
        return mpi_fail(s, rc, sending ? "sending" : "receiving", d->peer);
    return done ? step(s, d, sending, &st, recv_hdr) : DDL_OK;
}

static int check_peer(mp_state *s, int peer, int sending)
{
    if (peer == -1)
        return DDL_OK;
    if (peer < 0 || peer >= s->world || peer == s->rank)
        return mp_fail(s, DDL_EINVAL, "rank %d: no link to rank %d (world size %d)", s->rank, peer, s->world);
    if (!sending && s->rx_down[peer])
        return mp_fail(s, s->rx_down[peer], "rank %d: receiving from rank %d is not possible after an earlier failure",
                       s->rank, peer);
    return DDL_OK;
}

static int mp_exchange(void *state, int to, const void *send_hdr, const void *send_buf, size_t send_bytes, int from,
                       void *recv_hdr, void *recv_buf, size_t recv_bytes, int timeout_ms)
{
    mp_state *s = state;
    if (!s || s->magic != MP_STATE_MAGIC || !s->have_comm)
        return DDL_EINVAL;
    int st = check_peer(s, to, 1);
    if (st == DDL_OK)
        st = check_peer(s, from, 0);
    if (st != DDL_OK)
        return st;
    if (send_bytes > MAX_PAYLOAD)
        return mp_fail(s, DDL_EINVAL, "rank %d: a message of %zu bytes is too large", s->rank, send_bytes);
    dir ds = {to, MPI_REQUEST_NULL, (unsigned char *)(uintptr_t)send_buf, send_bytes, 0, to < 0 ? 2 : 0};
    dir dr = {from, MPI_REQUEST_NULL, recv_buf, recv_bytes, 0, from < 0 ? 2 : 0};
    if (to >= 0) {
        ddl__put_le(s->sbuf, MP_MAGIC, 4);
        ddl__put_le(s->sbuf + 4, 0, 4);
        ddl__put_le(s->sbuf + 8, send_bytes, 8);
        memcpy(s->sbuf + 16, send_hdr, DDL_HEADER_BYTES);
        if (send_bytes <= SMALL_BYTES && send_bytes)
            memcpy(s->sbuf + PREFIX, send_buf, send_bytes);
        st = post_send(s, &ds);
    }
    if (st == DDL_OK && from >= 0)
        st = post_recv(s, &dr);
    if (timeout_ms <= 0)
        timeout_ms = s->timeout_ms;
    int64_t deadline_ms = ddl__now_ms() + timeout_ms;
    int mismatch = 0;
    int64_t mismatch_ms = 0;
    for (long round = 0; st == DDL_OK && (ds.stage != 2 || dr.stage != 2); round++) {
        if ((st = test_dir(s, &ds, 1, NULL)) != DDL_OK)
            break;
        if ((st = test_dir(s, &dr, 0, recv_hdr)) == DDL_EMISMATCH) { /* finish our send, then report */
            mismatch = 1;
            mismatch_ms = ddl__now_ms();
            dr.stage = 2;
            st = DDL_OK;
            memcpy(s->rbuf, s->err, sizeof s->err < SMALL_BYTES ? sizeof s->err : SMALL_BYTES);
        }
        if (st != DDL_OK)
            break;
        if (mismatch && (round & 63) == 63 && ddl__now_ms() - mismatch_ms >= MISMATCH_SEND_MS) {
            give_up(s, &ds.req); /* a peer in another call may never take a large payload */
            break;
        }
        if ((round & 63) == 63 && (ddl__now_ms() >= deadline_ms || atomic_load(&s->stalled)))
            st = exchange_timeout(s, &ds, &dr, timeout_ms);
        else
            idle(round);
    }
    if (st != DDL_OK && st != DDL_ETIMEDOUT) {
        give_up(s, &ds.req);
        give_up(s, &dr.req);
    }
    if (mismatch && st == DDL_OK) {
        memcpy(s->err, s->rbuf, sizeof s->err);
        return DDL_EMISMATCH;
    }
    return st;
}

/* ---- native all-reduce ---- */

static int mp_allreduce(void *state, float *buf, size_t count, int timeout_ms)
{
    mp_state *s = state;
    if (!s || s->magic != MP_STATE_MAGIC || !s->have_comm)
        return DDL_EINVAL;
    if (s->stuck)
        return mp_fail(s, DDL_ETIMEDOUT, "rank %d: an earlier native all-reduce never finished", s->rank);
    int64_t deadline_ms = ddl__now_ms() + (timeout_ms > 0 ? timeout_ms : s->timeout_ms);
    for (size_t off = 0; off < count;) {
        int n = count - off < (size_t)INT_MAX ? (int)(count - off) : INT_MAX;
        MPI_Request req;
        int rc = MPI_Iallreduce(MPI_IN_PLACE, buf + off, n, MPI_FLOAT, MPI_SUM, s->comm, &req);
        if (rc != MPI_SUCCESS)
            return mpi_fail(s, rc, "MPI_Iallreduce", -1);
        rc = wait_one(s, &req, MPI_STATUS_IGNORE, deadline_ms, "MPI_Iallreduce", -1);
        if (rc == DDL_ETIMEDOUT) { /* a collective request cannot be cancelled or freed */
            s->stuck = 1;
            return mp_fail(s, rc, "rank %d timed out after %d ms in MPI_Iallreduce of %zu floats", s->rank,
                           timeout_ms > 0 ? timeout_ms : s->timeout_ms, count);
        }
        if (rc != DDL_OK)
            return rc;
        off += (size_t)n;
    }
    return DDL_OK;
}

static const char *mp_error(const void *state)
{
    const mp_state *s = state;
    return s ? s->err : "";
}

/* mp_interrupt: from the comm's heartbeat thread: every wait loop ends at its next look. */
static void mp_interrupt(void *state, int culprit)
{
    mp_state *s = state;
    if (s && culprit >= 0)
        atomic_store(&s->stalled, culprit + 1);
}

/* ---- vtable ---- */

static const ddl_transport mp_transport = {
    .version = DDL_TRANSPORT_VERSION,
    .name = "mpi",
    .state_bytes = mp_state_bytes,
    .open = mp_open,
    .close = mp_close,
    .exchange = mp_exchange,
    .allreduce = mp_allreduce,
    .error = mp_error,
    .peer_address = NULL,
    .interrupt = mp_interrupt,
};

const ddl_transport *ddl_transport_mpi(void) { return &mp_transport; }

#else

const ddl_transport *ddl_transport_mpi(void) { return NULL; }

#endif
