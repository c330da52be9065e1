/* shm_segment.c - the shared-memory transport's segment: its name ("/ddl-<job>", without a job
 * id "/ddl-u<uid>", or the first of "/ddl-u<uid>-1" to "-7" that another user has not taken:
 * seg_name), its lifetime (rank 0 creates it 0600 with O_EXCL and O_NOFOLLOW and unlinks it as
 * soon as every rank has attached, so a crash leaves nothing behind; without a job id it keeps
 * the name until it closes, so that a second job started alongside finds it and fails instead of
 * meeting this one), and how far it is trusted: no further than its owner and mode (a rank uses
 * only a segment of its own user with no group or other access, fstat of what it opened, and
 * never opens a link). The data path is shm.c. */
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
    return ddl__shm_fail(s, DDL_EAUTH, "shared memory %s belongs to uid %u (mode %04o), not to this user (uid %u): rank %d "
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
    return ddl__shm_fail(s, DDL_EIO, "cannot open shared memory %s: %s", s->name, strerror(e));
}

/* all_taken: without a job id, other users hold every name we may take. */
static int all_taken(shm_state *s)
{
    char first[160];
    seg_name(s, "", 0);
    snprintf(first, sizeof first, "%s", s->name);
    return ddl__shm_fail(s, DDL_EAUTH, "shared memory %s and the next %d names (%s-1 to %s-%d) belong to other users (uid %d "
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
        return ddl__shm_fail(s, DDL_EIO, "fstat of shared memory %s: %s", s->name, strerror(errno));
    if (sb.st_uid != geteuid() && s->jobless)
        return taken(s, (unsigned)sb.st_uid, (unsigned)sb.st_mode);
    if (sb.st_uid != geteuid() || (sb.st_mode & 077) != 0 || !S_ISREG(sb.st_mode))
        return ddl__shm_fail(s, DDL_EAUTH, "shared memory %s belongs to uid %u with mode %04o; rank %d (uid %u) attaches only to "
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
        return ddl__shm_fail(s, DDL_EIO, "mmap of %s (%zu bytes): %s", s->name, bytes, strerror(errno));
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
        if (atomic_load(&slot[i].state) == RANK_ATTACHED && *pid > 0 && !ddl__shm_pid_dead(*pid))
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
            st = ddl__shm_fail(s, DDL_EAUTH, "shared memory %s exists (%zu bytes) but holds no ddl job this version knows; "
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
        ddl__shm_job_hint(hint, sizeof hint, s);
        return ddl__shm_fail(s, DDL_EAUTH, "shared memory %s is in use by a running job (pid %d): rank 0 will not join or remove "
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
        return ddl__shm_fail(s, errno == EEXIST ? DDL_EAUTH : DDL_EIO, "cannot create shared memory %s: %s", s->name,
                    strerror(errno));
    s->created = 1;
    int e = posix_fallocate(s->fd, 0, (off_t)total);
    if (e != 0)
        return ddl__shm_fail(s, DDL_EIO, "cannot size shared memory %s to %zu bytes: %s (is /dev/shm large enough?)",
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
        st = ddl__shm_fail(s, DDL_EAUTH, "shared memory %s holds job '%s' version %u for %u ranks; rank %d expected job "
                "'%s' version %d for %d ranks", s->name, s->h->job, s->h->version, s->h->world, s->rank, job,
                SHM_VERSION, s->world);
        unmap_segment(s); /* it may be only the header page */
        return st;
    }
    if (ddl__shm_pid_dead(atomic_load(&s->slots[0].pid)))
        return unmap_segment(s), 0; /* stale: rank 0 of an old job; wait for the new one */
    if ((st = ddl__shm_check_conflict(s)) != DDL_OK)
        return unmap_segment(s), st;
    int32_t zero = 0, me = (int32_t)getpid();
    if (!atomic_compare_exchange_strong(&s->slots[s->rank].pid, &zero, me)) {
        char hint[64];
        ddl__shm_job_hint(hint, sizeof hint, s);
        report_conflict(s, s->h); /* two processes claim this rank: the job may hold a stranger */
        st = ddl__shm_fail(s, DDL_EAUTH, "rank %d of job '%s' is already attached to shared memory %s (pid %d): %s", s->rank,
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
 * second job started alongside has found the name taken and reported it (ddl__shm_check_conflict). */
static int wait_all_attached(shm_state *s, int timeout_ms, const ddl_comm_config *cfg)
{
    int64_t start = ddl__now_ms(), report = start + 5000;
    for (;;) {
        int64_t full = atomic_load(&s->h->full_ms);
        if (atomic_load(&s->h->attached) == (uint32_t)s->world && full != 0 &&
            (!s->jobless || ddl__now_ms() - full >= SETTLE_MS))
            return ddl__shm_check_conflict(s);
        int left = 0, st = ddl__shm_check_peers(s, -1, &left);
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
            return ddl__shm_fail(s, DDL_ETIMEDOUT, "rank %d waited %d ms for rank(s) %s to attach to shared memory %s",
                        s->rank, timeout_ms, who, s->name);
        if (now >= report && who[0]) { /* whom we wait for, every 5 s, instead of silence */
            ddl__log(cfg->log, cfg->log_ud, DDL_LOG_WARN, "shm: rank %d: waiting for rank%s %s (%.0f s)", s->rank,
                     strchr(who, ',') ? "s" : "", who, (double)(now - start) / 1000.0);
            report = now + 5000;
        }
        usleep(1000);
    }
}

size_t ddl__shm_state_bytes(const ddl_comm_config *cfg)
{
    int w = cfg->world_size < 1 || cfg->world_size > SHM_MAX_WORLD ? 1 : cfg->world_size;
    return sizeof(shm_state) + 2 * (size_t)w * sizeof(uint64_t);
}

int ddl__shm_open(void *state, const ddl_comm_config *cfg)
{
    shm_state *s = state;
    s->fd = -1;
    s->rank = cfg->rank;
    s->world = cfg->world_size;
    if (s->world < 1 || s->world > SHM_MAX_WORLD)
        return ddl__shm_fail(s, DDL_EINVAL, "shm supports 1 to %d ranks, not %d", SHM_MAX_WORLD, s->world);
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
                return ddl__shm_fail(s, DDL_ETIMEDOUT, "rank %d waited %d ms for rank 0 to create shared memory %s",
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

void ddl__shm_close(void *state)
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
                ddl__shm_ring_bell(s, i);
    }
    /* a failed start: the others remove rank 0's segment if it died before it could */
    if (!s->attached_all && s->rank != 0 && s->name[0] && s->slots && ddl__shm_pid_dead(atomic_load(&s->slots[0].pid)))
        shm_unlink(s->name);
    unmap_segment(s);
}
