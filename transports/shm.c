/* shm.c - the shared-memory transport: the ranks of one host exchange messages through one
 * POSIX shared-memory segment (shm_segment.c finds, creates and attaches it), with one
 * single-producer single-consumer byte ring per ordered pair of ranks, offer a native
 * float32 sum all-reduce in the segment, and a latency path for small collectives (allgather:
 * each rank writes its part once into its own slot and raises a flag; the others copy it out).
 * This file owns waiting (spin, yield, then futex sleep), timeouts and the detection of dead
 * peers, and bounds-checks every index read from the segment before use. It must not look
 * inside the 32-byte ddl header, allocate, or start threads. */
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int ddl__shm_fail(shm_state *s, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    return status;
}


/* ---- waking and sleeping ---- */

static long futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, (uint32_t *)addr, op, val, ts, NULL, 0);
}

void ddl__shm_ring_bell(shm_state *s, int r)
{
    rank_slot *p = &s->slots[r];
    atomic_fetch_add(&p->doorbell, 1);
    if (atomic_load(&p->sleeping))
        futex(&p->doorbell, FUTEX_WAKE, INT_MAX, NULL);
}

static void sleep_on_bell(shm_state *s, uint32_t seen, int64_t ms)
{
    rank_slot *me = &s->slots[s->rank];
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    atomic_store(&me->sleeping, 1);
    futex(&me->doorbell, FUTEX_WAIT, seen, &ts); /* returns at once if the bell rang since `seen` */
    atomic_store(&me->sleeping, 0);
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* ---- liveness ---- */

/* ddl__shm_pid_dead: the process is gone, or a zombie nobody has reaped yet. */
int ddl__shm_pid_dead(int pid)
{
    if (pid <= 0)
        return 0;
    if (kill(pid, 0) != 0)
        return errno == ESRCH;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

int ddl__shm_job_hint(char *dst, size_t n, const shm_state *s)
{
    return snprintf(dst, n, "%s", s->jobless ? "give each job its own DDL_JOB (ddlrun does)"
                                             : "two jobs share this DDL_JOB: give each its own");
}

/* ddl__shm_check_conflict: DDL_EAUTH once a process of another job has found this job's segment while
 * it was starting: ranks of the two jobs may have met, so this one must not go on. */
int ddl__shm_check_conflict(shm_state *s)
{
    int pid = atomic_load(&s->h->conflict_pid);
    if (pid == 0)
        return DDL_OK;
    char hint[64];
    ddl__shm_job_hint(hint, sizeof hint, s);
    return ddl__shm_fail(s, DDL_EAUTH, "another job started on this host with the same shared memory %s (its rank %d, pid %d, "
                "found this job starting): ranks of the two jobs may have met, so rank %d stops; %s", s->name,
                (int)atomic_load(&s->h->conflict_rank), pid, s->rank, hint);
}

/* peer_dead: DDL_EPEER if rank i died while attached; *left = 1 if it is waiting_for and closed its
 * end. */
static int peer_dead(shm_state *s, int i, int waiting_for, int *left)
{
    int pid = atomic_load(&s->slots[i].pid), state = atomic_load(&s->slots[i].state);
    /* look at the state again after the pid: a rank that closed and exited is not dead */
    if (state == RANK_ATTACHED && ddl__shm_pid_dead(pid) && atomic_load(&s->slots[i].state) == RANK_ATTACHED)
        return ddl__shm_fail(s, DDL_EPEER, "rank %d (pid %d) died", i, pid);
    if (i == waiting_for && state == RANK_LEFT)
        *left = 1;
    return DDL_OK;
}

/* ddl__shm_check_peers: DDL_EPEER if a rank died, DDL_EAUTH on a conflict (ddl__shm_check_conflict);
 * *left_rank gets `waiting_for` if it closed its end. Each call looks at the rank waited for and
 * at PEERS_PER_CHECK others in turn, so a world of W ranks is covered every W / PEERS_PER_CHECK
 * calls: looking at every rank every time cost each waiting rank 4 system calls a peer (kill and
 * /proc's stat), and 64 ranks on 2 vCPUs spent more time there than in training. */
int ddl__shm_check_peers(shm_state *s, int waiting_for, int *left)
{
    if (ddl__shm_check_conflict(s) != DDL_OK)
        return DDL_EAUTH;
    int st;
    if (waiting_for >= 0 && waiting_for < s->world && waiting_for != s->rank &&
        (st = peer_dead(s, waiting_for, waiting_for, left)) != DDL_OK)
        return st;
    for (int n = 0; n < PEERS_PER_CHECK && n < s->world - 1; n++) { /* world 1: none */
        int i = s->check_next = (s->check_next + 1) % s->world;
        if (i == s->rank) /* the next one, never this rank again: world >= 2 here */
            i = s->check_next = (i + 1) % s->world;
        if (i != waiting_for && (st = peer_dead(s, i, waiting_for, left)) != DDL_OK)
            return st;
    }
    return DDL_OK;
}

typedef struct waiter {
    int spins, left_seen;
    int64_t start, last_check;
} waiter;

static void waiter_progress(waiter *w)
{
    w->spins = 0;
    w->start = 0;
}

/* idle: nothing moved; spin, check peers, time out, or sleep until the bell rings.
 * `who` is the rank waited for (-1: several); `what` says for what. */
static int idle(shm_state *s, waiter *w, uint32_t bell, int who, int timeout_ms, const char *what)
{
    if (++w->spins < SPINS) {
        cpu_relax();
        return DDL_OK;
    }
    int64_t now = ddl__now_ms();
    if (w->start == 0)
        w->start = now;
    int stalled = atomic_load(&s->stalled) - 1;
    if (stalled >= 0)
        return ddl__shm_fail(s, DDL_ETIMEDOUT, "rank %d (pid %d) stopped responding (no heartbeat; noticed by rank %d "
                    "waiting for %s)", stalled, stalled < s->world ? (int)atomic_load(&s->slots[stalled].pid) : 0,
                    s->rank, what);
    if (now - w->last_check >= LIVENESS_MS || w->left_seen) {
        int left = 0, st = ddl__shm_check_peers(s, who, &left);
        w->last_check = now;
        if (st != DDL_OK)
            return st;
        if (left && w->left_seen)
            return ddl__shm_fail(s, DDL_EPEER, "rank %d (pid %d) closed its comm while rank %d waited for %s", who,
                        (int)atomic_load(&s->slots[who].pid), s->rank, what);
        if (left) { /* look once more: it may have written before it left */
            w->left_seen = 1;
            return DDL_OK;
        }
    }
    if (now - w->start >= timeout_ms)
        return ddl__shm_fail(s, DDL_ETIMEDOUT, "rank %d waited %d ms for %s from rank %d", s->rank, timeout_ms, what,
                    who);
    /* a few ms of polls with sched_yield between them before the futex: where each rank has a
     * CPU, a sleeping rank's wake-up cost LeNet's 2 ranks 5% at a slow hour of 2 vCPUs (12
     * alternated rounds: 51.9K -> 54.1K images/s; at a calm one 10 rounds: 70.8K and 70.4K); where
     * ranks outnumber CPUs the yield hands the CPU over, as the sleep did (4 ranks on 2 vCPUs:
     * 38-45K against 40-41K), which 4 ms of plain polls would not (5K against 28K) */
    if (now - w->start < YIELD_MS) {
        sched_yield();
        return DDL_OK;
    }
    int64_t ms = timeout_ms - (now - w->start);
    sleep_on_bell(s, bell, ms < LIVENESS_MS ? ms : LIVENESS_MS);
    return DDL_OK;
}

/* ---- rings ----
 * A message is a frame of PREFIX bytes (payload length, ddl header) and the payload, streamed
 * through the ring, so a payload of any size passes a ring of a fixed size. */

typedef struct frame {
    unsigned char prefix[PREFIX];
    unsigned char *payload;
    size_t bytes, pos; /* payload bytes; frame bytes moved so far */
} frame;

static void copy_in(unsigned char *data, size_t rb, uint64_t at, const unsigned char *src, size_t n)
{
    size_t o = (size_t)(at & (rb - 1)), first = n < rb - o ? n : rb - o;
    memcpy(data + o, src, first);
    memcpy(data, src + first, n - first);
}

static void copy_out(const unsigned char *data, size_t rb, uint64_t at, unsigned char *dst, size_t n)
{
    size_t o = (size_t)(at & (rb - 1)), first = n < rb - o ? n : rb - o;
    memcpy(dst, data + o, first);
    memcpy(dst + first, data, n - first);
}

/* bad_index: the peer's index of ring (from, to) is not within one ring of ours: the segment was
 * written by someone else than the ranks of this job (or a bug). */
static int bad_index(shm_state *s, int from, int to, const char *field, uint64_t got, uint64_t ours)
{
    return ddl__shm_fail(s, DDL_EPROTO, "shared memory %s is corrupt: ring %d->%d has %s %llu, %s %llu (ring of %zu bytes); "
                "rank %d stops", s->name, from, to, field, (unsigned long long)got, field[0] == 'h' ? "tail" : "head",
                (unsigned long long)ours, s->ring_bytes, s->rank);
}

/* push: write as much of the frame as fits; *moved gets the bytes written. */
static int push(shm_state *s, int to, frame *f, size_t *moved)
{
    ring_hdr *r = ring_at(s, s->rank, to);
    unsigned char *data = (unsigned char *)(r + 1);
    uint64_t head = s->pos[to];
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
    if (head - tail > s->ring_bytes) /* also catches tail > head */
        return bad_index(s, s->rank, to, "tail", tail, head);
    size_t space = s->ring_bytes - (size_t)(head - tail);
    *moved = 0;
    while (space > 0 && f->pos < PREFIX + f->bytes) {
        size_t n;
        if (f->pos < PREFIX) {
            n = PREFIX - f->pos < space ? PREFIX - f->pos : space;
            copy_in(data, s->ring_bytes, head, f->prefix + f->pos, n);
        } else {
            size_t left = PREFIX + f->bytes - f->pos;
            n = left < space ? left : space;
            copy_in(data, s->ring_bytes, head, f->payload + (f->pos - PREFIX), n);
        }
        head += n, f->pos += n, space -= n, *moved += n;
    }
    if (*moved) {
        s->pos[to] = head;
        atomic_store_explicit(&r->head, head, memory_order_release);
        ddl__shm_ring_bell(s, to);
    }
    return DDL_OK;
}

/* pull: read as much of the frame as has arrived; *moved gets the bytes read. DDL_EMISMATCH
 * when the announced payload length is not the expected one, DDL_EPROTO for a head that is not
 * within one ring of our tail. */
static int pull(shm_state *s, int from, frame *f, size_t *moved)
{
    ring_hdr *r = ring_at(s, from, s->rank);
    const unsigned char *data = (const unsigned char *)(r + 1);
    uint64_t tail = s->pos[s->world + from];
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    if (head - tail > s->ring_bytes) /* also catches head < tail */
        return bad_index(s, from, s->rank, "head", head, tail);
    size_t avail = (size_t)(head - tail);
    int st = DDL_OK;
    *moved = 0;
    while (avail > 0 && f->pos < PREFIX + f->bytes) {
        size_t n;
        if (f->pos < PREFIX) {
            n = PREFIX - f->pos < avail ? PREFIX - f->pos : avail;
            copy_out(data, s->ring_bytes, tail, f->prefix + f->pos, n);
        } else {
            size_t left = PREFIX + f->bytes - f->pos;
            n = left < avail ? left : avail;
            copy_out(data, s->ring_bytes, tail, f->payload + (f->pos - PREFIX), n);
        }
        tail += n, f->pos += n, avail -= n, *moved += n;
        if (f->pos == PREFIX) {
            uint64_t len = 0;
            memcpy(&len, f->prefix, sizeof len);
            if (len != f->bytes) { /* leave the payload: the comm fails for good anyway */
                st = ddl__shm_fail(s, DDL_EMISMATCH, "rank %d got a message of %llu bytes (length field in ring %d->%d of "
                          "shared memory %s) from rank %d, expected %zu", s->rank, (unsigned long long)len, from,
                          s->rank, s->name, from, f->bytes);
                break;
            }
        }
    }
    if (*moved) {
        s->pos[s->world + from] = tail;
        atomic_store_explicit(&r->tail, tail, memory_order_release);
        ddl__shm_ring_bell(s, from);
    }
    return st;
}

/* posted_ahead: rank r has posted the next small collective, which this rank has not joined. */
static int posted_ahead(shm_state *s, int r)
{
    uint64_t next = s->post_epoch + 1;
    return atomic_load_explicit(&post_at(s, r, next)->epoch, memory_order_acquire) == next;
}

static int has_data(shm_state *s, int from)
{
    return atomic_load_explicit(&ring_at(s, from, s->rank)->head, memory_order_acquire) != s->pos[s->world + from];
}

static int shm_exchange(void *state, int to, const void *send_hdr, const void *send_buf, size_t send_bytes,
                        int from, void *recv_hdr, void *recv_buf, size_t recv_bytes, int timeout_ms)
{
    shm_state *s = state;
    frame out = {{0}, (unsigned char *)(uintptr_t)send_buf, send_bytes, 0};
    frame in = {{0}, recv_buf, recv_bytes, 0};
    if (to >= 0) {
        uint64_t len = send_bytes;
        memcpy(out.prefix, &len, sizeof len);
        memcpy(out.prefix + 8, send_hdr, DDL_HEADER_BYTES);
    }
    int send_done = to < 0, recv_done = from < 0, st = DDL_OK;
    waiter w = {0, 0, 0, 0};
    while (!send_done || !recv_done) {
        uint32_t bell = atomic_load(&s->slots[s->rank].doorbell);
        size_t moved = 0, n = 0;
        if (!send_done) {
            if ((st = push(s, to, &out, &n)) != DDL_OK)
                return st;
            moved += n;
            send_done = out.pos == PREFIX + send_bytes;
        }
        if (!recv_done) {
            st = pull(s, from, &in, &n);
            moved += n;
            if (st != DDL_OK || in.pos >= PREFIX)
                memcpy(recv_hdr, in.prefix + 8, DDL_HEADER_BYTES);
            if (st != DDL_OK)
                return st;
            recv_done = in.pos == PREFIX + recv_bytes;
        }
        if (moved) {
            waiter_progress(&w);
            continue;
        }
        int who = !recv_done ? from : to;
        if (posted_ahead(s, who)) { /* it is in a small collective, this rank in another one */
            /* unless it sent the rest of our message before it posted: its last bytes may have
             * come after our pull saw an empty ring, with a frame begun or not: take them */
            if (!recv_done && has_data(s, from))
                continue;
            if (!recv_done && in.pos == 0)
                memcpy(recv_hdr, post_at(s, from, s->post_epoch + 1)->ddl_hdr, DDL_HEADER_BYTES);
            return ddl__shm_fail(s, DDL_EMISMATCH, "rank %d is in a small collective while rank %d %s", who, s->rank,
                        !recv_done ? "waits for its message" : "sends to it");
        }
        st = idle(s, &w, bell, who, timeout_ms, !recv_done ? "a message" : "room to send");
        if (st != DDL_OK)
            return st;
    }
    return DDL_OK;
}

/* ---- native all-reduce ----
 * Per chunk: every rank copies its part into its input slot; barrier; rank r sums slice r of
 * all inputs in rank order into the output; barrier; everyone copies the output out. */

static int barrier(shm_state *s, int timeout_ms)
{
    uint64_t e = ++s->epoch;
    atomic_store_explicit(&s->slots[s->rank].arrive, e, memory_order_release);
    for (int i = 0; i < s->world; i++)
        if (i != s->rank)
            ddl__shm_ring_bell(s, i);
    waiter w = {0, 0, 0, 0};
    for (;;) {
        uint32_t bell = atomic_load(&s->slots[s->rank].doorbell);
        int missing = -1;
        for (int i = 0; i < s->world && missing < 0; i++)
            if (atomic_load_explicit(&s->slots[i].arrive, memory_order_acquire) < e)
                missing = i;
        if (missing < 0)
            return DDL_OK;
        int st = idle(s, &w, bell, missing, timeout_ms, "the native all-reduce");
        if (st != DDL_OK)
            return st;
    }
}

static int shm_allreduce(void *state, float *buf, size_t count, int timeout_ms)
{
    shm_state *s = state;
    float *in_me = s->native + (size_t)s->rank * NATIVE_FLOATS, *out = s->native + (size_t)s->world * NATIVE_FLOATS;
    if (count == 0)
        return DDL_OK;
    /* ranks that disagree on the count would silently mix chunks: compare first */
    atomic_store(&s->slots[s->rank].count, (uint64_t)count);
    int st = barrier(s, timeout_ms);
    if (st != DDL_OK)
        return st;
    for (int i = 0; i < s->world; i++) {
        uint64_t other = atomic_load(&s->slots[i].count);
        if (other != (uint64_t)count)
            return ddl__shm_fail(s, DDL_EMISMATCH, "native all-reduce: rank %d has %zu floats, rank %d has %llu", s->rank,
                        count, i, (unsigned long long)other);
    }
    for (size_t off = 0; off < count; off += NATIVE_FLOATS) {
        size_t len = count - off < NATIVE_FLOATS ? count - off : NATIVE_FLOATS;
        memcpy(in_me, buf + off, len * sizeof(float));
        st = barrier(s, timeout_ms);
        if (st != DDL_OK)
            return st;
        size_t lo = len * (size_t)s->rank / (size_t)s->world, hi = len * (size_t)(s->rank + 1) / (size_t)s->world;
        memcpy(out + lo, s->native + lo, (hi - lo) * sizeof(float));
        for (int k = 1; k < s->world; k++) {
            const float *src = s->native + (size_t)k * NATIVE_FLOATS;
            for (size_t i = lo; i < hi; i++)
                out[i] += src[i];
        }
        if ((st = barrier(s, timeout_ms)) != DDL_OK)
            return st;
        memcpy(buf + off, out, len * sizeof(float));
    }
    return DDL_OK;
}

/* ---- small collectives ----
 * Rank r writes its header and payload into its post of this epoch's parity and stores the
 * epoch last; the others wait for it and read it in place. A post of parity p is rewritten
 * two epochs later, which its writer only reaches after every rank posted the epoch between,
 * so after every rank finished reading it. */

/* pending_message: rank `from` has not posted this epoch but sent us a point-to-point message:
 * it is in another collective. Its header goes to hdr (the comm describes both sides). */
static int pending_message(shm_state *s, int from, unsigned char *hdr)
{
    ring_hdr *r = ring_at(s, from, s->rank);
    uint64_t tail = s->pos[s->world + from];
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    if (head - tail < PREFIX || head - tail > s->ring_bytes)
        return 0;
    unsigned char prefix[PREFIX];
    copy_out((const unsigned char *)(r + 1), s->ring_bytes, tail, prefix, PREFIX);
    memcpy(hdr, prefix + 8, DDL_HEADER_BYTES);
    return 1;
}

static int shm_allgather(void *state, const void *hdr, const void *buf, size_t bytes, void *hdrs, const void **views,
                         int timeout_ms)
{
    shm_state *s = state;
    unsigned char *hout = hdrs;
    if (bytes > POST_BYTES)
        return ddl__shm_fail(s, DDL_EINVAL, "small collective of %zu bytes: more than the %zu of a post", bytes, POST_BYTES);
    uint64_t e = ++s->post_epoch;
    post_hdr *mine = post_at(s, s->rank, e);
    if (bytes)
        memcpy(mine + 1, buf, bytes);
    mine->bytes = bytes;
    memcpy(mine->ddl_hdr, hdr, DDL_HEADER_BYTES);
    atomic_store_explicit(&mine->epoch, e, memory_order_release);
    for (int i = 0; i < s->world; i++)
        if (i != s->rank)
            ddl__shm_ring_bell(s, i);
    memcpy(hout + (size_t)s->rank * DDL_HEADER_BYTES, hdr, DDL_HEADER_BYTES);
    int next = (s->rank + 1) % s->world; /* peers in turn, starting after this rank */
    waiter w = {0, 0, 0, 0};
    while (next != s->rank) {
        uint32_t bell = atomic_load(&s->slots[s->rank].doorbell);
        post_hdr *p = post_at(s, next, e);
        uint64_t got = atomic_load_explicit(&p->epoch, memory_order_acquire);
        unsigned char *h = hout + (size_t)next * DDL_HEADER_BYTES;
        if (got == e) {
            memcpy(h, p->ddl_hdr, DDL_HEADER_BYTES);
            if (p->bytes != bytes)
                return ddl__shm_fail(s, DDL_EMISMATCH, "rank %d posted %llu bytes, rank %d %zu", next,
                            (unsigned long long)p->bytes, s->rank, bytes);
            views[next] = p + 1;
            next = (next + 1) % s->world;
            waiter_progress(&w);
            continue;
        }
        if (got > e || (got != 0 && got + 2 != e))
            return ddl__shm_fail(s, DDL_EPROTO, "shared memory %s is corrupt: rank %d's post holds epoch %llu, rank %d is "
                        "at %llu; rank %d stops", s->name, next, (unsigned long long)got, s->rank,
                        (unsigned long long)e, s->rank);
        if (pending_message(s, next, h) && atomic_load_explicit(&p->epoch, memory_order_acquire) != e)
            return ddl__shm_fail(s, DDL_EMISMATCH, "rank %d sent a message while rank %d waited in a small collective", next,
                        s->rank);
        int st = idle(s, &w, bell, next, timeout_ms, "a small collective");
        if (st != DDL_OK)
            return st;
    }
    return DDL_OK;
}


static const char *shm_error(const void *state) { return ((const shm_state *)state)->err; }

static const char *shm_peer_address(const void *state, int r)
{
    (void)state;
    (void)r;
    return "shared memory";
}

/* shm_interrupt: from the comm's heartbeat thread: every wait ends at its next look (idle). */
static void shm_interrupt(void *state, int culprit)
{
    shm_state *s = state;
    if (s && culprit >= 0)
        atomic_store(&s->stalled, culprit + 1);
}

/* ---- vtable ---- */

static const ddl_transport shm_transport = {
    .version = DDL_TRANSPORT_VERSION,
    .name = "shm",
    .state_bytes = ddl__shm_state_bytes,
    .open = ddl__shm_open,
    .close = ddl__shm_close,
    .exchange = shm_exchange,
    .allreduce = shm_allreduce,
    .allgather = shm_allgather,
    .allgather_max = POST_BYTES,
    .error = shm_error,
    .peer_address = shm_peer_address,
    .interrupt = shm_interrupt,
};

const ddl_transport *ddl_transport_shm(void) { return &shm_transport; }
