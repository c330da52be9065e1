/* shm.c - the shared-memory transport: the ranks of one host exchange messages through one
 * POSIX shared-memory segment "/ddl-<job>", with one single-producer single-consumer byte ring
 * per ordered pair of ranks, and offer a native float32 sum all-reduce in the segment.
 * It owns the segment's lifetime (rank 0 creates it and unlinks it as soon as every rank has
 * attached, so a crash leaves nothing behind), waiting (spin, then futex sleep), timeouts and
 * the detection of dead peers. It must not look inside the 32-byte ddl header, allocate, or
 * start threads. */
#include "core/impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
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
#define SHM_VERSION 1
#define SHM_MAX_WORLD 256
#define NATIVE_FLOATS ((size_t)256 << 10) /* floats per rank and chunk of the native all-reduce */
#define SPINS 2000                       /* polls before sleeping */
#define LIVENESS_MS 20                   /* how often a waiting rank checks every peer's pid */
#define PREFIX 40                        /* frame: u64 payload length + 32-byte header */
#define LINE 64

enum { RANK_EMPTY = 0, RANK_ATTACHED = 1, RANK_LEFT = 2 };

/* ---- segment layout ----
 * [seg_hdr (4 KiB)] [rank_slot x world] [ring x world*world] [native: (world + 1) x NATIVE_FLOATS]
 * ring (from, to) is written only by `from` and read only by `to`. */

typedef struct seg_hdr {
    _Atomic uint64_t magic; /* written last by rank 0: the rest is valid */
    uint32_t version, world;
    uint64_t ring_bytes, total_bytes;
    char job[128];
    _Atomic uint32_t attached;
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

typedef struct shm_state {
    int rank, world, fd, attached_all, unlinked;
    size_t map_bytes, ring_bytes;
    unsigned char *map;
    seg_hdr *h;
    rank_slot *slots;
    unsigned char *rings;
    float *native;
    uint64_t epoch;
    char name[160];
    char err[DDL_ERR_BYTES];
} shm_state;

static size_t ring_bytes_for(int world) { return world <= 4 ? (size_t)1 << 20 : (size_t)256 << 10; }

static size_t off_slots(void) { return 4096; }
static size_t off_rings(int world) { return ddl__align_up(off_slots() + (size_t)world * sizeof(rank_slot)); }
static size_t ring_stride(size_t rb) { return sizeof(ring_hdr) + rb; }
static size_t off_native(int world, size_t rb)
{
    return ddl__align_up(off_rings(world) + (size_t)world * (size_t)world * ring_stride(rb));
}
static size_t total_bytes(int world, size_t rb)
{
    return off_native(world, rb) + (size_t)(world + 1) * NATIVE_FLOATS * sizeof(float);
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

/* check_peers: DDL_EPEER if any rank died; *left_rank gets `waiting_for` if it closed its end. */
static int check_peers(shm_state *s, int waiting_for, int *left)
{
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

/* push: write as much of the frame as fits; returns bytes written. */
static size_t push(shm_state *s, int to, frame *f)
{
    ring_hdr *r = ring_at(s, s->rank, to);
    unsigned char *data = (unsigned char *)(r + 1);
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
    size_t space = s->ring_bytes - (size_t)(head - tail), moved = 0;
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
        head += n, f->pos += n, space -= n, moved += n;
    }
    if (moved) {
        atomic_store_explicit(&r->head, head, memory_order_release);
        ring_bell(s, to);
    }
    return moved;
}

/* pull: read as much of the frame as has arrived; returns bytes read, or DDL_EMISMATCH (as a
 * negative value through *st) when the announced payload length is not the expected one. */
static size_t pull(shm_state *s, int from, frame *f, int *st)
{
    ring_hdr *r = ring_at(s, from, s->rank);
    const unsigned char *data = (const unsigned char *)(r + 1);
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    size_t avail = (size_t)(head - tail), moved = 0;
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
        tail += n, f->pos += n, avail -= n, moved += n;
        if (f->pos == PREFIX) {
            uint64_t len = 0;
            memcpy(&len, f->prefix, sizeof len);
            if (len != f->bytes) { /* leave the payload: the comm fails for good anyway */
                *st = DDL_EMISMATCH;
                break;
            }
        }
    }
    if (moved) {
        atomic_store_explicit(&r->tail, tail, memory_order_release);
        ring_bell(s, from);
    }
    return moved;
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
        size_t moved = 0;
        if (!send_done) {
            moved += push(s, to, &out);
            send_done = out.pos == PREFIX + send_bytes;
        }
        if (!recv_done) {
            moved += pull(s, from, &in, &st);
            if (st != DDL_OK || in.pos >= PREFIX)
                memcpy(recv_hdr, in.prefix + 8, DDL_HEADER_BYTES);
            if (st != DDL_OK)
                return fail(s, st, "rank %d got a message of another length from rank %d", s->rank, from);
            recv_done = in.pos == PREFIX + recv_bytes;
        }
        if (moved) {
            waiter_progress(&w);
            continue;
        }
        int who = !recv_done ? from : to;
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

/* ---- open and close ---- */

static void seg_name(char *dst, size_t n, const char *job)
{
    snprintf(dst, n, "/ddl-%s", job && job[0] ? job : "ddl");
    for (char *p = dst + 1; *p; p++)
        if (*p == '/')
            *p = '_';
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

static int create_segment(shm_state *s, const ddl_comm_config *cfg)
{
    size_t total = total_bytes(s->world, s->ring_bytes);
    s->fd = shm_open(s->name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (s->fd < 0 && errno == EEXIST) { /* left by a job of the same name that crashed early */
        ddl__log(cfg->log, cfg->log_ud, DDL_LOG_WARN, "shm: removing stale segment %s", s->name);
        shm_unlink(s->name);
        s->fd = shm_open(s->name, O_RDWR | O_CREAT | O_EXCL, 0600);
    }
    if (s->fd < 0)
        return fail(s, DDL_EIO, "cannot create shared memory %s: %s", s->name, strerror(errno));
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
    snprintf(s->h->job, sizeof s->h->job, "%s", cfg->job ? cfg->job : "ddl");
    atomic_store(&s->slots[0].pid, (int32_t)getpid());
    atomic_store(&s->slots[0].state, RANK_ATTACHED);
    atomic_store(&s->h->attached, 1);
    atomic_store_explicit(&s->h->magic, SHM_MAGIC, memory_order_release);
    return DDL_OK;
}

/* try_attach: 1 attached, 0 not ready yet (try again), or a negative status. */
static int try_attach(shm_state *s, const ddl_comm_config *cfg)
{
    s->fd = shm_open(s->name, O_RDWR, 0);
    if (s->fd < 0)
        return errno == ENOENT ? 0 : fail(s, DDL_EIO, "cannot open shared memory %s: %s", s->name, strerror(errno));
    struct stat sb;
    size_t total = total_bytes(s->world, s->ring_bytes);
    if (fstat(s->fd, &sb) != 0 || sb.st_size < 4096)
        return unmap_segment(s), 0; /* not sized yet */
    /* a segment of another size belongs to another configuration: map only its header to say so */
    int st = map_segment(s, (size_t)sb.st_size == total ? total : 4096);
    if (st != DDL_OK)
        return st;
    if (atomic_load_explicit(&s->h->magic, memory_order_acquire) != SHM_MAGIC)
        return unmap_segment(s), 0;
    const char *job = cfg->job ? cfg->job : "ddl";
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
    int32_t zero = 0, me = (int32_t)getpid();
    if (!atomic_compare_exchange_strong(&s->slots[s->rank].pid, &zero, me))
        return fail(s, DDL_EAUTH, "rank %d of job '%s' is already attached (pid %d)", s->rank, job, (int)zero);
    atomic_store(&s->slots[s->rank].state, RANK_ATTACHED);
    atomic_fetch_add(&s->h->attached, 1);
    return 1;
}

static int wait_all_attached(shm_state *s, int timeout_ms)
{
    int64_t start = ddl__now_ms();
    for (;;) {
        if (atomic_load(&s->h->attached) == (uint32_t)s->world)
            return DDL_OK;
        int left = 0, st = check_peers(s, -1, &left);
        if (st != DDL_OK)
            return st;
        if (ddl__now_ms() - start >= timeout_ms) {
            char who[128] = "";
            size_t n = 0;
            for (int i = 0; i < s->world && n + 12 < sizeof who; i++)
                if (atomic_load(&s->slots[i].state) == RANK_EMPTY)
                    n += (size_t)snprintf(who + n, sizeof who - n, "%s%d", n ? ", " : "", i);
            return fail(s, DDL_ETIMEDOUT, "rank %d waited %d ms for rank(s) %s to attach to shared memory %s",
                        s->rank, timeout_ms, who, s->name);
        }
        usleep(1000);
    }
}

static size_t shm_state_bytes(const ddl_comm_config *cfg)
{
    (void)cfg;
    return sizeof(shm_state);
}

static int shm_open_transport(void *state, const ddl_comm_config *cfg)
{
    shm_state *s = state;
    s->fd = -1;
    s->rank = cfg->rank;
    s->world = cfg->world_size;
    if (s->world < 1 || s->world > SHM_MAX_WORLD)
        return fail(s, DDL_EINVAL, "shm supports 1 to %d ranks, not %d", SHM_MAX_WORLD, s->world);
    s->ring_bytes = ring_bytes_for(s->world);
    seg_name(s->name, sizeof s->name, cfg->job);
    int st;
    if (s->rank == 0) {
        if ((st = create_segment(s, cfg)) != DDL_OK)
            return st;
    } else {
        int64_t start = ddl__now_ms();
        while ((st = try_attach(s, cfg)) == 0) {
            if (ddl__now_ms() - start >= cfg->timeout_ms)
                return fail(s, DDL_ETIMEDOUT, "rank %d waited %d ms for rank 0 to create shared memory %s",
                            s->rank, cfg->timeout_ms, s->name);
            usleep(2000);
        }
        if (st < 0)
            return st;
    }
    if ((st = wait_all_attached(s, cfg->timeout_ms)) != DDL_OK)
        return st;
    s->attached_all = 1;
    if (s->rank == 0) { /* everyone has it mapped: the name is no longer needed */
        shm_unlink(s->name);
        s->unlinked = 1;
    }
    return DDL_OK;
}

static void shm_close(void *state)
{
    shm_state *s = state;
    if (s->slots && atomic_load(&s->slots[s->rank].pid) == (int32_t)getpid()) {
        atomic_store(&s->slots[s->rank].state, RANK_LEFT);
        for (int i = 0; i < s->world; i++)
            if (i != s->rank)
                ring_bell(s, i);
    }
    /* a failed start: rank 0 removes its segment, others do if rank 0 died before it could */
    if (!s->attached_all && s->name[0] && (s->rank == 0 || (s->slots && pid_dead(atomic_load(&s->slots[0].pid)))))
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

/* ---- vtable ---- */

static const ddl_transport shm_transport = {
    .version = DDL_TRANSPORT_VERSION,
    .name = "shm",
    .state_bytes = shm_state_bytes,
    .open = shm_open_transport,
    .close = shm_close,
    .exchange = shm_exchange,
    .allreduce = shm_allreduce,
    .error = shm_error,
    .peer_address = shm_peer_address,
};

const ddl_transport *ddl_transport_shm(void) { return &shm_transport; }
