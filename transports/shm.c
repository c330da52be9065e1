/* shm.c - the shared-memory transport: the ranks of one host exchange messages through one
 * POSIX shared-memory segment "/ddl-<job>" (without a job id "/ddl-u<uid>", or the first of
 * "/ddl-u<uid>-1" to "-7" that another user has not taken: seg_name), with one
 * single-producer single-consumer byte ring per ordered pair of ranks, offer a native
 * float32 sum all-reduce in the segment, and a latency path for small collectives (allgather:
 * each rank writes its part once into its own slot and raises a flag; the others copy it out).
 * It owns the segment's lifetime (rank 0 creates it 0600 with O_EXCL and O_NOFOLLOW and unlinks
 * it as soon as every rank has attached, so a crash leaves nothing behind; without a job id it
 * keeps the name until it closes, so that a second job started alongside finds it and fails
 * instead of meeting this one), waiting (spin, yield, then futex sleep), timeouts and the
 * detection of dead peers. The segment is trusted no further than its owner and mode: a rank
 * uses only a segment of its own user with no group or other access (fstat of what it opened),
 * never opens a link, and bounds-checks every index read from it before use. It must not look
 * inside the 32-byte ddl header, allocate, or start threads. */
#include "core/impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SHM_MAGIC 0x314d48534c4444ull /* "DDLSHM1" */
#define SHM_VERSION 3
#define SHM_MAX_WORLD 256
#define NATIVE_FLOATS ((size_t)256 << 10) /* floats per rank and chunk of the native all-reduce */
#define POST_BYTES ((size_t)16 << 10)      /* payload per rank and parity of the small-message path */
#define SPINS 2000                       /* polls before yielding */
#define YIELD_MS 3                       /* then yield the CPU between polls this long before sleeping */
#define LIVENESS_MS 20                   /* how often a waiting rank checks every peer's pid */
#define PREFIX 40                        /* frame: u64 payload length + 32-byte header */
#define LINE 64
#define SETTLE_MS 200           /* without a job id: how long a full segment must stay quiet before open returns */
#define JOBLESS_NAMES 8         /* without a job id: names tried in turn while other users hold the first ones */
#define CONFLICT_WINDOW_MS 2000 /* a second job seen this soon after the segment filled: fail both */

enum { RANK_EMPTY = 0, RANK_ATTACHED = 1, RANK_LEFT = 2 };
enum { TAKEN = 2 }; /* create_segment, try_attach: another user holds the name: try the next (seg_name) */

/* ---- segment layout ----
 * [seg_hdr (4 KiB)] [rank_slot x world] [ring x world*world] [native: (world + 1) x NATIVE_FLOATS]
 * [post: world x 2 parities x (post_hdr + POST_BYTES)]
 * ring (from, to) and rank r's posts are written only by `from` and r. */

typedef struct seg_hdr {
    _Atomic uint64_t magic; /* written last by rank 0: the rest is valid */
    uint32_t version, world;
    uint64_t ring_bytes, total_bytes;
    char job[128];
    _Atomic uint32_t attached;
    _Atomic int32_t conflict_pid;  /* nonzero: a process of another job found the segment (conflict_rank) */
    _Atomic int32_t conflict_rank;
    _Atomic int64_t full_ms;       /* ddl__now_ms when the last rank attached; 0 before */
} seg_hdr;

typedef struct rank_slot {
    _Atomic int32_t pid;
    _Atomic int32_t state;     /* RANK_* */
    _Atomic uint32_t doorbell; /* bumped whenever something this rank may wait for changes */
    _Atomic uint32_t sleeping; /* 1 while in futex wait on doorbell */
    _Atomic uint64_t arrive;   /* native all-reduce: barrier epoch reached */
    _Atomic uint64_t count;    /* native all-reduce: floats this rank is reducing */
    char pad[LINE - 32];
} rank_slot;

typedef struct ring_hdr {
    _Atomic uint64_t head; /* bytes written, by the producer */
    char pad1[LINE - 8];
    _Atomic uint64_t tail; /* bytes read, by the consumer */
    char pad2[LINE - 8];
} ring_hdr;

/* post_hdr: one rank's part of small collective number `epoch` (counted from 1; parity epoch % 2),
 * valid once epoch is stored; followed by its payload. */
typedef struct post_hdr {
    _Atomic uint64_t epoch;
    uint64_t bytes;
    unsigned char ddl_hdr[DDL_HEADER_BYTES];
    char pad[LINE - 16 - DDL_HEADER_BYTES];
} post_hdr;

typedef struct shm_state {
    int rank, world, fd, attached_all, unlinked, created, jobless;
    size_t map_bytes, ring_bytes;
    unsigned char *map;
    seg_hdr *h;
    rank_slot *slots;
    unsigned char *rings;
    float *native;
    unsigned char *posts;
    uint64_t epoch, post_epoch;
    uint64_t *pos; /* [2 * world] after this struct: head of ring (rank, to), then tail of ring (from, rank);
                    * this rank's own index is kept here, never read back from the segment */
    char name[160];
    int squatter;         /* 1 + the uid of the last other user found holding one of our names */
    char err[DDL_ERR_BYTES];
    _Atomic int stalled; /* 1 + the rank the comm's heartbeat found silent (interrupt) */
} shm_state;

static size_t ring_bytes_for(int world) { return world <= 4 ? (size_t)1 << 20 : (size_t)256 << 10; }

static size_t off_slots(void) { return 4096; }
static size_t off_rings(int world) { return ddl__align_up(off_slots() + (size_t)world * sizeof(rank_slot)); }
static size_t ring_stride(size_t rb) { return sizeof(ring_hdr) + rb; }
static size_t off_native(int world, size_t rb)
{
    return ddl__align_up(off_rings(world) + (size_t)world * (size_t)world * ring_stride(rb));
}
static size_t off_posts(int world, size_t rb)
{
    return off_native(world, rb) + (size_t)(world + 1) * NATIVE_FLOATS * sizeof(float);
}
static size_t post_stride(void) { return sizeof(post_hdr) + POST_BYTES; }
static size_t total_bytes(int world, size_t rb) { return off_posts(world, rb) + (size_t)world * 2 * post_stride(); }

static post_hdr *post_at(shm_state *s, int r, uint64_t epoch)
{
    return (post_hdr *)(s->posts + ((size_t)r * 2 + (size_t)(epoch & 1)) * post_stride());
}

static ring_hdr *ring_at(shm_state *s, int from, int to)
{
    return (ring_hdr *)(s->rings + ((size_t)from * (size_t)s->world + (size_t)to) * ring_stride(s->ring_bytes));
}

static int fail(shm_state *s, int status, const char *fmt, ...) DDL__PRINTF(3, 4);
static int fail(shm_state *s, int status, const char *fmt, ...)
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

static void ring_bell(shm_state *s, int r)
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

/* pid_dead: the process is gone, or a zombie nobody has reaped yet. */
static int pid_dead(int pid)
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

static int job_hint(char *dst, size_t n, const shm_state *s)
{
    return snprintf(dst, n, "%s", s->jobless ? "give each job its own DDL_JOB (ddlrun does)"
                                             : "two jobs share this DDL_JOB: give each its own");
}

/* check_conflict: DDL_EAUTH once a process of another job has found this job's segment while
 * it was starting: ranks of the two jobs may have met, so this one must not go on. */
static int check_conflict(shm_state *s)
{
    int pid = atomic_load(&s->h->conflict_pid);
    if (pid == 0)
        return DDL_OK;
    char hint[64];
    job_hint(hint, sizeof hint, s);
    return fail(s, DDL_EAUTH, "another job started on this host with the same shared memory %s (its rank %d, pid %d, "
                "found this job starting): ranks of the two jobs may have met, so rank %d stops; %s", s->name,
                (int)atomic_load(&s->h->conflict_rank), pid, s->rank, hint);
}

/* check_peers: DDL_EPEER if any rank died, DDL_EAUTH on a conflict (check_conflict); *left_rank
 * gets `waiting_for` if it closed its end. */
static int check_peers(shm_state *s, int waiting_for, int *left)
{
    if (check_conflict(s) != DDL_OK)
        return DDL_EAUTH;
    for (int i = 0; i < s->world; i++) {
        if (i == s->rank)
            continue;
        int pid = atomic_load(&s->slots[i].pid), state = atomic_load(&s->slots[i].state);
        /* look at the state again after the pid: a rank that closed and exited is not dead */
        if (state == RANK_ATTACHED && pid_dead(pid) && atomic_load(&s->slots[i].state) == RANK_ATTACHED)
            return fail(s, DDL_EPEER, "rank %d (pid %d) died", i, pid);
        if (i == waiting_for && state == RANK_LEFT)
            *left = 1;
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
        return fail(s, DDL_ETIMEDOUT, "rank %d (pid %d) stopped responding (no heartbeat; noticed by rank %d "
                    "waiting for %s)", stalled, stalled < s->world ? (int)atomic_load(&s->slots[stalled].pid) : 0,
                    s->rank, what);
    if (now - w->last_check >= LIVENESS_MS || w->left_seen) {
        int left = 0, st = check_peers(s, who, &left);
        w->last_check = now;
        if (st != DDL_OK)
            return st;
        if (left && w->left_seen)
            return fail(s, DDL_EPEER, "rank %d (pid %d) closed its comm while rank %d waited for %s", who,
                        (int)atomic_load(&s->slots[who].pid), s->rank, what);
        if (left) { /* look once more: it may have written before it left */
            w->left_seen = 1;
            return DDL_OK;
        }
    }
    if (now - w->start >= timeout_ms)
        return fail(s, DDL_ETIMEDOUT, "rank %d waited %d ms for %s from rank %d", s->rank, timeout_ms, what,
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
    return fail(s, DDL_EPROTO, "shared memory %s is corrupt: ring %d->%d has %s %llu, %s %llu (ring of %zu bytes); "
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
        ring_bell(s, to);
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
                st = fail(s, DDL_EMISMATCH, "rank %d got a message of %llu bytes (length field in ring %d->%d of "
                          "shared memory %s) from rank %d, expected %zu", s->rank, (unsigned long long)len, from,
                          s->rank, s->name, from, f->bytes);
                break;
            }
        }
    }
    if (*moved) {
        s->pos[s->world + from] = tail;
        atomic_store_explicit(&r->tail, tail, memory_order_release);
        ring_bell(s, from);
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
            return fail(s, DDL_EMISMATCH, "rank %d is in a small collective while rank %d %s", who, s->rank,
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
            ring_bell(s, i);
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
            return fail(s, DDL_EMISMATCH, "native all-reduce: rank %d has %zu floats, rank %d has %llu", s->rank,
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
        return fail(s, DDL_EINVAL, "small collective of %zu bytes: more than the %zu of a post", bytes, POST_BYTES);
    uint64_t e = ++s->post_epoch;
    post_hdr *mine = post_at(s, s->rank, e);
    if (bytes)
        memcpy(mine + 1, buf, bytes);
    mine->bytes = bytes;
    memcpy(mine->ddl_hdr, hdr, DDL_HEADER_BYTES);
    atomic_store_explicit(&mine->epoch, e, memory_order_release);
    for (int i = 0; i < s->world; i++)
        if (i != s->rank)
            ring_bell(s, i);
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
                return fail(s, DDL_EMISMATCH, "rank %d posted %llu bytes, rank %d %zu", next,
                            (unsigned long long)p->bytes, s->rank, bytes);
            views[next] = p + 1;
            next = (next + 1) % s->world;
            waiter_progress(&w);
            continue;
        }
        if (got > e || (got != 0 && got + 2 != e))
            return fail(s, DDL_EPROTO, "shared memory %s is corrupt: rank %d's post holds epoch %llu, rank %d is "
                        "at %llu; rank %d stops", s->name, next, (unsigned long long)got, s->rank,
                        (unsigned long long)e, s->rank);
        if (pending_message(s, next, h) && atomic_load_explicit(&p->epoch, memory_order_acquire) != e)
            return fail(s, DDL_EMISMATCH, "rank %d sent a message while rank %d waited in a small collective", next,
                        s->rank);
        int st = idle(s, &w, bell, next, timeout_ms, "a small collective");
        if (st != DDL_OK)
            return st;
    }
    return DDL_OK;
}

/* ---- open and close ---- */

/* seg_name: name number i of the job's segment. Without a job id the names are per user, so
 * two users' jobs never meet under one. /dev/shm is writable by all, so another user can create
 * our name first, and we cannot remove theirs: a name that is another user's (or a link planted
 * there) is never used, and every rank of the job goes on to the next one ("/ddl-u<uid>-1", ...,
 * JOBLESS_NAMES in all): all of them agree on the first name that is not another user's. Who
 * takes them all makes the job refuse, naming them and the owner (all_taken). A job id (DDL_JOB,
 * which ddlrun sets to a fresh random one) gives a name nobody knows in advance; if another user
 * holds it anyway, the job refuses at once, naming the owner. */
static void seg_name(shm_state *s, const char *job, int i)
{
    if (s->jobless && i == 0)
        snprintf(s->name, sizeof s->name, "/ddl-u%u", (unsigned)geteuid());
    else if (s->jobless)
        snprintf(s->name, sizeof s->name, "/ddl-u%u-%d", (unsigned)geteuid(), i);
    else
        snprintf(s->name, sizeof s->name, "/ddl-%s", job);
    for (char *p = s->name + 1; *p; p++)
        if (*p == '/')
            *p = '_';
}

/* taken: another user (uid) holds s->name: TAKEN without a job id (seg_name), else DDL_EAUTH. */
static int taken(shm_state *s, unsigned uid, unsigned mode)
{
    s->squatter = (int)uid + 1;
    if (s->jobless)
        return TAKEN;
    return fail(s, DDL_EAUTH, "shared memory %s belongs to uid %u (mode %04o), not to this user (uid %u): rank %d "
                "neither uses nor removes it (give the job another DDL_JOB)", s->name, uid, mode & 07777,
                (unsigned)geteuid(), s->rank);
}

/* unopened: shm_open of s->name failed with errno e (not ENOENT): taken() if another user holds
 * the name or it is a link (O_NOFOLLOW), else DDL_EIO. */
static int unopened(shm_state *s, int e)
{
    char path[200];
    struct stat sb;
    snprintf(path, sizeof path, "/dev/shm%s", s->name); /* where glibc keeps POSIX shared memory */
    if (lstat(path, &sb) == 0 && (sb.st_uid != geteuid() || !S_ISREG(sb.st_mode)))
        return taken(s, (unsigned)sb.st_uid, (unsigned)sb.st_mode);
    return fail(s, DDL_EIO, "cannot open shared memory %s: %s", s->name, strerror(e));
}

/* all_taken: without a job id, other users hold every name we may take. */
static int all_taken(shm_state *s)
{
    char first[160];
    seg_name(s, "", 0);
    snprintf(first, sizeof first, "%s", s->name);
    return fail(s, DDL_EAUTH, "shared memory %s and the next %d names (%s-1 to %s-%d) belong to other users (uid %d "
                "among them): rank %d uses none of them; set DDL_JOB (ddlrun sets a fresh random one)", first,
                JOBLESS_NAMES - 1, first, first, JOBLESS_NAMES - 1, s->squatter - 1, s->rank);
}

/* check_owner: DDL_EAUTH unless fd is a segment of this user that nobody else may open (TAKEN
 * without a job id if another user's: seg_name); *size gets its size. Another user's segment
 * under our name is never attached, whatever it holds. */
static int check_owner(shm_state *s, int fd, size_t *size)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return fail(s, DDL_EIO, "fstat of shared memory %s: %s", s->name, strerror(errno));
    if (sb.st_uid != geteuid() && s->jobless)
        return taken(s, (unsigned)sb.st_uid, (unsigned)sb.st_mode);
    if (sb.st_uid != geteuid() || (sb.st_mode & 077) != 0 || !S_ISREG(sb.st_mode))
        return fail(s, DDL_EAUTH, "shared memory %s belongs to uid %u with mode %04o; rank %d (uid %u) attaches only to "
                    "its own user's segments of mode 0600: refusing it (remove /dev/shm%s if it is not another "
                    "user's live job, or set DDL_JOB)", s->name, (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 07777),
                    s->rank, (unsigned)geteuid(), s->name);
    *size = (size_t)sb.st_size;
    return DDL_OK;
}

static int map_segment(shm_state *s, size_t bytes)
{
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
    if (m == MAP_FAILED)
        return fail(s, DDL_EIO, "mmap of %s (%zu bytes): %s", s->name, bytes, strerror(errno));
    s->map = m;
    s->map_bytes = bytes;
    s->h = m;
    if (bytes < total_bytes(s->world, s->ring_bytes))
        return DDL_OK; /* the header only: no slots, rings or native area to point at */
    s->slots = (rank_slot *)(s->map + off_slots());
    s->rings = s->map + off_rings(s->world);
    s->native = (float *)(s->map + off_native(s->world, s->ring_bytes));
    s->posts = s->map + off_posts(s->world, s->ring_bytes);
    return DDL_OK;
}

static void unmap_segment(shm_state *s)
{
    if (s->map)
        munmap(s->map, s->map_bytes);
    if (s->fd >= 0)
        close(s->fd);
    s->map = NULL, s->h = NULL, s->slots = NULL, s->fd = -1;
}

/* report_conflict: tell the job that owns h that a process of another job found it while it was
 * starting (not yet full, or full for less than CONFLICT_WINDOW_MS): some of our ranks may be in
 * it. A job that filled earlier cannot hold ours, and is left alone. */
static void report_conflict(shm_state *s, seg_hdr *h)
{
    int64_t full = atomic_load(&h->full_ms);
    if (full != 0 && ddl__now_ms() - full >= CONFLICT_WINDOW_MS)
        return;
    int32_t zero = 0;
    if (atomic_compare_exchange_strong(&h->conflict_pid, &zero, (int32_t)getpid()))
        atomic_store(&h->conflict_rank, s->rank);
}

/* seg_live: the segment under our name, mapped read-write at m (size bytes, header checked by the
 * caller): 1 if a rank recorded in it still runs, else 0 (all closed or dead: stale). */
static int seg_live(const unsigned char *m, size_t size, int *pid)
{
    const seg_hdr *h = (const seg_hdr *)(const void *)m;
    uint32_t w = h->world;
    if (w < 1 || w > SHM_MAX_WORLD || h->ring_bytes != ring_bytes_for((int)w) ||
        size != total_bytes((int)w, h->ring_bytes))
        return -1; /* not a layout we know: never guess */
    const rank_slot *slot = (const rank_slot *)(const void *)(m + off_slots());
    for (uint32_t i = 0; i < w; i++) {
        *pid = atomic_load(&slot[i].pid);
        if (atomic_load(&slot[i].state) == RANK_ATTACHED && *pid > 0 && !pid_dead(*pid))
            return 1;
    }
    return 0;
}

/* existing_segment: O_EXCL found our name taken. DDL_OK if it was a dead job's segment, now
 * removed; TAKEN if another user's without a job id (seg_name); otherwise why rank 0 cannot
 * create (another user's segment, a live job). */
static int existing_segment(shm_state *s, int timeout_ms)
{
    int fd = shm_open(s->name, O_RDWR | O_NOFOLLOW, 0);
    if (fd < 0)
        return errno == ENOENT ? DDL_OK : unopened(s, errno);
    size_t size = 0;
    int st = check_owner(s, fd, &size), live = -1, pid = 0;
    int64_t start = ddl__now_ms(), grace = timeout_ms < 2000 ? timeout_ms : 2000;
    while (st == DDL_OK && live < 0) {
        /* a job's rank 0 may be between creating and filling it in: wait a little for its magic */
        void *m = size >= 4096 ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
        if (m != MAP_FAILED) {
            seg_hdr *h = m;
            if (atomic_load_explicit(&h->magic, memory_order_acquire) == SHM_MAGIC && h->version == SHM_VERSION &&
                (live = seg_live(m, size, &pid)) == 1)
                report_conflict(s, h);
            munmap(m, size);
        }
        if (live >= 0)
            break;
        if (ddl__now_ms() - start >= grace) {
            st = fail(s, DDL_EAUTH, "shared memory %s exists (%zu bytes) but holds no ddl job this version knows; "
                      "remove /dev/shm%s if no ddl job runs, or set DDL_JOB", s->name, size, s->name);
            break;
        }
        usleep(2000);
        if ((st = check_owner(s, fd, &size)) != DDL_OK)
            break;
    }
    close(fd);
    if (st != DDL_OK)
        return st;
    if (live) {
        char hint[64];
        job_hint(hint, sizeof hint, s);
        return fail(s, DDL_EAUTH, "shared memory %s is in use by a running job (pid %d): rank 0 will not join or remove "
                    "it; %s", s->name, pid, hint);
    }
    shm_unlink(s->name); /* every rank of that job is gone */
    return DDL_OK;
}

static int create_segment(shm_state *s, const ddl_comm_config *cfg)
{
    size_t total = total_bytes(s->world, s->ring_bytes);
    s->fd = shm_open(s->name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    if (s->fd < 0 && errno == EEXIST) { /* a dead job's leftover, a live job, another user's: existing_segment says */
        int st = existing_segment(s, cfg->timeout_ms);
        if (st != DDL_OK)
            return st;
        ddl__log(cfg->log, cfg->log_ud, DDL_LOG_WARN, "shm: removed the stale segment %s of a job that is gone",
                 s->name);
        s->fd = shm_open(s->name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    }
    if (s->fd < 0)
        return fail(s, errno == EEXIST ? DDL_EAUTH : DDL_EIO, "cannot create shared memory %s: %s", s->name,
                    strerror(errno));
    s->created = 1;
    int e = posix_fallocate(s->fd, 0, (off_t)total);
    if (e != 0)
        return fail(s, DDL_EIO, "cannot size shared memory %s to %zu bytes: %s (is /dev/shm large enough?)",
                    s->name, total, strerror(e));
    int st = map_segment(s, total);
    if (st != DDL_OK)
        return st;
    s->h->version = SHM_VERSION;
    s->h->world = (uint32_t)s->world;
    s->h->ring_bytes = s->ring_bytes;
    s->h->total_bytes = total;
    snprintf(s->h->job, sizeof s->h->job, "%s", s->jobless ? "" : cfg->job);
    atomic_store(&s->slots[0].pid, (int32_t)getpid());
    atomic_store(&s->slots[0].state, RANK_ATTACHED);
    atomic_store(&s->h->attached, 1);
    if (s->world == 1)
        atomic_store(&s->h->full_ms, ddl__now_ms());
    atomic_store_explicit(&s->h->magic, SHM_MAGIC, memory_order_release);
    return DDL_OK;
}

/* try_attach: 1 attached, 0 not ready yet (try again), TAKEN (another user's name: try the next),
 * or a negative status. */
static int try_attach(shm_state *s, const ddl_comm_config *cfg)
{
    s->fd = shm_open(s->name, O_RDWR | O_NOFOLLOW, 0);
    if (s->fd < 0)
        return errno == ENOENT ? 0 : unopened(s, errno);
    size_t size = 0, total = total_bytes(s->world, s->ring_bytes);
    int st = check_owner(s, s->fd, &size); /* before reading a byte of it */
    if (st != DDL_OK)
        return unmap_segment(s), st; /* TAKEN passes too */
    if (size < 4096)
        return unmap_segment(s), 0; /* not sized yet */
    /* a segment of another size belongs to another configuration: map only its header to say so */
    if ((st = map_segment(s, size == total ? total : 4096)) != DDL_OK)
        return st;
    if (atomic_load_explicit(&s->h->magic, memory_order_acquire) != SHM_MAGIC)
        return unmap_segment(s), 0;
    const char *job = s->jobless ? "" : cfg->job;
    if (s->h->version != SHM_VERSION || s->h->world != (uint32_t)s->world || strncmp(s->h->job, job, 127) != 0 ||
        s->h->total_bytes != total || s->map_bytes != total) {
        st = fail(s, DDL_EAUTH, "shared memory %s holds job '%s' version %u for %u ranks; rank %d expected job "
                "'%s' version %d for %d ranks", s->name, s->h->job, s->h->version, s->h->world, s->rank, job,
                SHM_VERSION, s->world);
        unmap_segment(s); /* it may be only the header page */
        return st;
    }
    if (pid_dead(atomic_load(&s->slots[0].pid)))
        return unmap_segment(s), 0; /* stale: rank 0 of an old job; wait for the new one */
    if ((st = check_conflict(s)) != DDL_OK)
        return unmap_segment(s), st;
    int32_t zero = 0, me = (int32_t)getpid();
    if (!atomic_compare_exchange_strong(&s->slots[s->rank].pid, &zero, me)) {
        char hint[64];
        job_hint(hint, sizeof hint, s);
        report_conflict(s, s->h); /* two processes claim this rank: the job may hold a stranger */
        st = fail(s, DDL_EAUTH, "rank %d of job '%s' is already attached to shared memory %s (pid %d): %s", s->rank,
                  job, s->name, (int)zero, hint);
        s->slots = NULL; /* the slot is not ours: close must not touch it */
        return unmap_segment(s), st;
    }
    atomic_store(&s->slots[s->rank].state, RANK_ATTACHED);
    if (atomic_fetch_add(&s->h->attached, 1) + 1 == (uint32_t)s->world)
        atomic_store(&s->h->full_ms, ddl__now_ms());
    return 1;
}

/* wait_all_attached: every rank is in; without a job id, also quiet for SETTLE_MS, so that a
 * second job started alongside has found the name taken and reported it (check_conflict). */
static int wait_all_attached(shm_state *s, int timeout_ms, const ddl_comm_config *cfg)
{
    int64_t start = ddl__now_ms(), report = start + 5000;
    for (;;) {
        int64_t full = atomic_load(&s->h->full_ms);
        if (atomic_load(&s->h->attached) == (uint32_t)s->world && full != 0 &&
            (!s->jobless || ddl__now_ms() - full >= SETTLE_MS))
            return check_conflict(s);
        int left = 0, st = check_peers(s, -1, &left);
        if (st != DDL_OK)
            return st;
        int64_t now = ddl__now_ms();
        char who[128] = "";
        size_t n = 0;
        if (now >= report || now - start >= timeout_ms + (full ? SETTLE_MS : 0))
            for (int i = 0; i < s->world && n + 12 < sizeof who; i++)
                if (atomic_load(&s->slots[i].state) == RANK_EMPTY)
                    n += (size_t)snprintf(who + n, sizeof who - n, "%s%d", n ? ", " : "", i);
        if (now - start >= timeout_ms + (full ? SETTLE_MS : 0))
            return fail(s, DDL_ETIMEDOUT, "rank %d waited %d ms for rank(s) %s to attach to shared memory %s",
                        s->rank, timeout_ms, who, s->name);
        if (now >= report && who[0]) { /* whom we wait for, every 5 s, instead of silence */
            ddl__log(cfg->log, cfg->log_ud, DDL_LOG_WARN, "shm: rank %d: waiting for rank%s %s (%.0f s)", s->rank,
                     strchr(who, ',') ? "s" : "", who, (double)(now - start) / 1000.0);
            report = now + 5000;
        }
        usleep(1000);
    }
}

static size_t shm_state_bytes(const ddl_comm_config *cfg)
{
    int w = cfg->world_size < 1 || cfg->world_size > SHM_MAX_WORLD ? 1 : cfg->world_size;
    return sizeof(shm_state) + 2 * (size_t)w * sizeof(uint64_t);
}

static int shm_open_transport(void *state, const ddl_comm_config *cfg)
{
    shm_state *s = state;
    s->fd = -1;
    s->rank = cfg->rank;
    s->world = cfg->world_size;
    if (s->world < 1 || s->world > SHM_MAX_WORLD)
        return fail(s, DDL_EINVAL, "shm supports 1 to %d ranks, not %d", SHM_MAX_WORLD, s->world);
    s->pos = (uint64_t *)(void *)(s + 1);
    memset(s->pos, 0, 2 * (size_t)s->world * sizeof(uint64_t));
    s->ring_bytes = ring_bytes_for(s->world);
    /* no job id given (the comm names that job "ddl"): the name is per user and kept until close */
    s->jobless = !cfg->job || !cfg->job[0] || strcmp(cfg->job, "ddl") == 0;
    seg_name(s, cfg->job, 0);
    int st, i = 0;
    if (s->rank == 0) {
        while ((st = create_segment(s, cfg)) == TAKEN) { /* another user's name: the next one (seg_name) */
            if (++i == JOBLESS_NAMES)
                return all_taken(s);
            ddl__log(cfg->log, cfg->log_ud, DDL_LOG_WARN, "shm: %s belongs to another user (uid %d); rank 0 tries the "
                     "next name", s->name, s->squatter - 1);
            seg_name(s, cfg->job, i);
        }
        if (st != DDL_OK)
            return st;
    } else {
        int64_t start = ddl__now_ms();
        while ((st = try_attach(s, cfg)) != 1) { /* the first name that is not another user's, as rank 0 */
            if (st < 0)
                return st;
            if (st == TAKEN && ++i == JOBLESS_NAMES)
                return all_taken(s);
            if (st == TAKEN) {
                seg_name(s, cfg->job, i);
                continue;
            }
            if (ddl__now_ms() - start >= cfg->timeout_ms)
                return fail(s, DDL_ETIMEDOUT, "rank %d waited %d ms for rank 0 to create shared memory %s",
                            s->rank, cfg->timeout_ms, s->name);
            usleep(2000);
            seg_name(s, cfg->job, i = 0);
        }
    }
    if ((st = wait_all_attached(s, cfg->timeout_ms, cfg)) != DDL_OK)
        return st;
    s->attached_all = 1;
    if (s->rank == 0 && !s->jobless) { /* everyone has it mapped: the name is no longer needed */
        shm_unlink(s->name);
        s->unlinked = 1;
    }
    return DDL_OK;
}

static void shm_close(void *state)
{
    shm_state *s = state;
    /* rank 0 removes the name it created (still there without a job id, or after a failed start)
     * before it says it left: a segment whose ranks all left is stale to the next job */
    if (s->created && !s->unlinked)
        shm_unlink(s->name);
    if (s->slots && atomic_load(&s->slots[s->rank].pid) == (int32_t)getpid()) {
        atomic_store(&s->slots[s->rank].state, RANK_LEFT);
        for (int i = 0; i < s->world; i++)
            if (i != s->rank)
                ring_bell(s, i);
    }
    /* a failed start: the others remove rank 0's segment if it died before it could */
    if (!s->attached_all && s->rank != 0 && s->name[0] && s->slots && pid_dead(atomic_load(&s->slots[0].pid)))
        shm_unlink(s->name);
    unmap_segment(s);
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
    .state_bytes = shm_state_bytes,
    .open = shm_open_transport,
    .close = shm_close,
    .exchange = shm_exchange,
    .allreduce = shm_allreduce,
    .allgather = shm_allgather,
    .allgather_max = POST_BYTES,
    .error = shm_error,
    .peer_address = shm_peer_address,
    .interrupt = shm_interrupt,
};

const ddl_transport *ddl_transport_shm(void) { return &shm_transport; }
