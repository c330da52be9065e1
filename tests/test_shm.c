/* test_shm.c - the shm transport against a hostile or careless host: a segment of another user
 * or of mode 0644 under the job's name is refused, not attached; ring indices and lengths
 * corrupted in a running job's segment give a clear error, never a crash; two jobs started
 * by hand without DDL_JOB at the same time never exchange bytes; and another user (nobody) who
 * takes the names of a job without DDL_JOB first (a file, a link) neither stops it nor has a
 * byte of theirs used or removed, unless they take all eight, when both ranks refuse at once
 * naming them and the owner. Runs as root or not (the cases of another user need root: chown,
 * and setuid to act as nobody). */
/* ddl-test: idle (mostly waits (timeouts, heartbeats, stopped ranks), bounds in seconds: four run at a time) */
#include "check.h"
#include "ranks.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define RB ((size_t)1 << 20) /* ring bytes of a 2-rank job (shm.h ring_bytes_for) */

/* ---- the segment as shm.h lays it out (a test of the format is allowed to know it) ----
 * header: u64 magic, u32 version, u32 world, ...; slots at 4096 (64 B each); rings at
 * align64(4096 + world * 64), each a 128-byte header {head at 0, tail at 64} and RB bytes. */
static unsigned char *ring_hdr_at(unsigned char *m, int world, int from, int to)
{
    size_t rings = (4096 + (size_t)world * 64 + 63) & ~(size_t)63;
    return m + rings + ((size_t)from * (size_t)world + (size_t)to) * (128 + RB);
}

static volatile uint64_t *head_of(unsigned char *r) { return (volatile uint64_t *)(void *)r; }
static volatile uint64_t *tail_of(unsigned char *r) { return (volatile uint64_t *)(void *)(r + 64); }

/* map_own_segment: in a rank of a running job, map the (already unlinked) segment once more,
 * through /proc/self/fd, as another process of the same user could; *bytes gets its size. */
static unsigned char *map_own_segment(size_t *bytes)
{
    char want[128], link[256], path[300];
    snprintf(want, sizeof want, "/dev/shm/ddl-%s", ranks_job);
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    unsigned char *m = NULL;
    while (d && !m && (e = readdir(d)) != NULL) {
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, link, sizeof link - 1);
        if (n <= 0)
            continue;
        link[n] = '\0';
        if (strncmp(link, want, strlen(want)) != 0)
            continue;
        int fd = open(path, O_RDWR);
        struct stat sb;
        if (fd >= 0 && fstat(fd, &sb) == 0) {
            void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (p != MAP_FAILED)
                m = p, *bytes = (size_t)sb.st_size;
        }
        if (fd >= 0)
            close(fd);
    }
    if (d)
        closedir(d);
    return m;
}

/* ---- the raw vtable ---- */

typedef struct raw {
    const ddl_transport *tp;
    void *state;
} raw;

static int raw_open(raw *t, int rank, int world, int timeout_ms, char *err, size_t n)
{
    ddl_comm_config cfg = make_config(rank, world, timeout_ms);
    t->tp = ddl_transport_shm();
    size_t bytes = (t->tp->state_bytes(&cfg) + 63) & ~(size_t)63;
    t->state = aligned_alloc(64, bytes);
    memset(t->state, 0, bytes);
    int st = t->tp->open(t->state, &cfg);
    snprintf(err, n, "%s", st == DDL_OK ? "" : t->tp->error(t->state));
    return st;
}

static void raw_close(raw *t)
{
    t->tp->close(t->state);
    free(t->state);
}

/* ---- 1a: a segment that is not ours ---- */

enum { FOREIGN_MODE, FOREIGN_OWNER };

/* rank 0 creates the real segment and waits; the parent makes it 0644 or another user's before
 * rank 1 comes: rank 1 must refuse it. */
static void rank_foreign_attach(int rank, int world, void *arg)
{
    int how = *(int *)arg;
    char err[DDL_ERR_BYTES], path[128];
    raw t;
    snprintf(path, sizeof path, "/dev/shm/ddl-%s", ranks_job);
    if (rank == 1) {
        for (int i = 0; i < 500 && access(path, F_OK) != 0; i++)
            usleep(2000);
        usleep(50000); /* rank 0 has sized and filled it in */
        int changed = how == FOREIGN_MODE ? chmod(path, 0644) : chown(path, 65534, 65534);
        CHECK(changed == 0);
        int st = raw_open(&t, rank, world, 1000, err, sizeof err);
        CHECK(st == DDL_EAUTH);
        CHECK(strstr(err, path + 8) && strstr(err, how == FOREIGN_MODE ? "mode 0644" : "uid 65534"));
        if (check_failed)
            fprintf(stderr, "foreign segment, rank 1: %s: %s\n", ddl_strerror(st), err);
        raw_close(&t);
    } else {
        int st = raw_open(&t, rank, world, 1500, err, sizeof err);
        CHECK(st == DDL_ETIMEDOUT); /* rank 1 never attached */
        raw_close(&t);
    }
}

/* what another hand put under the job's name before it started: a segment of this user but mode
 * 0644, or a link that nobody planted. Rank 0 neither uses nor removes it, rank 1 does not wait
 * for it to fill in: both refuse at once, saying what is wrong with it. */
typedef struct not_ours {
    const char *says; /* what the refusal names: "mode 0644", "uid 65534" */
    int link;
} not_ours;

static void rank_not_ours(int rank, int world, void *arg)
{
    const not_ours *o = arg;
    char err[DDL_ERR_BYTES], name[128], path[160];
    snprintf(name, sizeof name, "/ddl-%s", ranks_job);
    raw t;
    int64_t t0 = (int64_t)(ranks_now() * 1000);
    int st = raw_open(&t, rank, world, 3000, err, sizeof err);
    CHECK(st == DDL_EAUTH);
    CHECK(strstr(err, name) && strstr(err, o->says));
    CHECK((int64_t)(ranks_now() * 1000) - t0 < 1500); /* at once, not after the timeout */
    if (check_failed)
        fprintf(stderr, "%s under the job's name, rank %d: %s: %s\n", o->says, rank, ddl_strerror(st), err);
    raw_close(&t);
    struct stat sb;
    snprintf(path, sizeof path, "/dev/shm%s", name);
    CHECK(lstat(path, &sb) == 0 && (o->link ? S_ISLNK(sb.st_mode) : (sb.st_mode & 0777) == 0644)); /* untouched */
}

/* ---- 1b: corrupt ring indices in a running job ---- */

enum { BAD_TAIL, BAD_HEAD, BAD_LENGTH };

static void rank_corrupt(int rank, int world, void *arg)
{
    int how = *(int *)arg;
    char err[DDL_ERR_BYTES], name[128];
    snprintf(name, sizeof name, "/ddl-%s", ranks_job);
    raw t;
    int st = raw_open(&t, rank, world, 5000, err, sizeof err);
    CHECK(st == DDL_OK);
    if (st != DDL_OK) {
        raw_close(&t);
        return;
    }
    size_t big = (size_t)64 << 20, seg_bytes = 0;
    unsigned char *buf = calloc(1, big), h[DDL_HEADER_BYTES] = {0};
    int attacker = how == BAD_TAIL ? 1 : 0, victim = 1 - attacker;
    if (rank == attacker) {
        unsigned char *m = map_own_segment(&seg_bytes);
        CHECK(m != NULL);
        if (m) {
            unsigned char *r = ring_hdr_at(m, world, 0, 1);
            if (how == BAD_TAIL) { /* rank 0 sends next: a tail far ahead of its head */
                *tail_of(r) = *head_of(r) + ((uint64_t)1 << 40);
                st = t.tp->exchange(t.state, 0, h, buf, 8, -1, NULL, NULL, 0, 5000); /* "go" on ring 1->0 */
                CHECK(st == DDL_OK);
            } else { /* rank 1 receives: a frame announcing what it expects, then a head far ahead */
                uint64_t tail = *tail_of(r), len = how == BAD_HEAD ? big : (uint64_t)1 << 60;
                unsigned char *data = r + 128;
                memcpy(data + (tail & (RB - 1)), &len, sizeof len);
                *head_of(r) = tail + (how == BAD_HEAD ? (uint64_t)1 << 40 : 40);
            }
            munmap(m, seg_bytes);
        }
        usleep(300000); /* let the victim fail before this rank closes */
    } else {
        if (how == BAD_TAIL) {
            st = t.tp->exchange(t.state, -1, NULL, NULL, 0, 1, h, buf, 8, 5000);
            CHECK(st == DDL_OK);
            st = t.tp->exchange(t.state, 1, h, buf, big, -1, NULL, NULL, 0, 2000);
        } else {
            st = t.tp->exchange(t.state, -1, NULL, NULL, 0, 0, h, buf, how == BAD_HEAD ? big : 4096, 2000);
        }
        const char *e = t.tp->error(t.state);
        CHECK(st == (how == BAD_LENGTH ? DDL_EMISMATCH : DDL_EPROTO));
        CHECK(strstr(e, name) != NULL);
        CHECK(strstr(e, how == BAD_TAIL ? "tail" : how == BAD_HEAD ? "head" : "length") != NULL);
        if (check_failed)
            fprintf(stderr, "corrupt ring (%d), victim rank %d: %s: %s\n", how, victim, ddl_strerror(st), e);
    }
    free(buf);
    raw_close(&t);
}

/* ---- 2: two jobs by hand without DDL_JOB ---- */

#define ROUNDS 10
#define PAYLOAD 65536

/* by_hand_rank: a rank as a user starts it (DDL_RANK, DDL_WORLD_SIZE, no DDL_JOB); rank 0
 * broadcasts its job's label ROUNDS times and both all-reduce it. Exit 0: every byte was its
 * own job's; 2: it received the other job's; 1: an error, written to fd. */
static int by_hand_rank(int label, int fd)
{
    ddl_comm_config cfg;
    ddl_comm *c = NULL;
    char err[DDL_ERR_BYTES] = "";
    int st = ddl_comm_config_from_env(&cfg, NULL, err, sizeof err);
    if (st == DDL_OK)
        st = ddl_comm_create(&cfg, NULL, &c, err, sizeof err);
    unsigned char *buf = malloc(PAYLOAD);
    for (int i = 0; st == DDL_OK && i < ROUNDS; i++) {
        memset(buf, cfg.rank == 0 ? label : 0, PAYLOAD);
        if ((st = ddl_comm_broadcast(c, buf, PAYLOAD / 8, DDL_INT64, 0)) != DDL_OK)
            break;
        for (size_t k = 0; k < PAYLOAD; k++)
            if (buf[k] != label)
                return 2;
        float x = (float)label;
        if ((st = ddl_comm_allreduce(c, &x, 1, DDL_FLOAT32, DDL_SUM)) != DDL_OK)
            break;
        if (x != 2.0f * (float)label)
            return 2;
        usleep(20000);
    }
    if (st != DDL_OK) {
        const char *e = c ? ddl_comm_error(c) : err;
        if (write(fd, e, strlen(e)) < 0)
            return 3;
    }
    free(buf);
    ddl_comm_destroy(c);
    return st == DDL_OK ? 0 : 1;
}

typedef struct proc {
    pid_t pid;
    int fd, job, rank, status;
    char msg[DDL_ERR_BYTES];
} proc;

static void start_by_hand(proc *p, int job, int rank)
{
    int fds[2];
    if (pipe(fds) != 0) {
        perror("pipe");
        exit(1);
    }
    p->job = job, p->rank = rank;
    fflush(stdout);
    p->pid = fork();
    if (p->pid == 0) {
        close(fds[0]);
        char r[16];
        snprintf(r, sizeof r, "%d", rank);
        unsetenv("DDL_JOB");
        setenv("DDL_TRANSPORT", "shm", 1);
        setenv("DDL_RANK", r, 1);
        setenv("DDL_WORLD_SIZE", "2", 1);
        setenv("DDL_TIMEOUT_MS", "1000", 1);
        _exit(by_hand_rank('A' + job, fds[1]));
    }
    close(fds[1]);
    p->fd = fds[0];
}

static void finish_by_hand(proc *p)
{
    ssize_t n = read(p->fd, p->msg, sizeof p->msg - 1);
    p->msg[n > 0 ? n : 0] = '\0';
    close(p->fd);
    waitpid(p->pid, &p->status, 0);
}

/* two_jobs: start the 4 ranks in `order` (job * 2 + rank), 5 ms apart. */
static void two_jobs(const int order[4])
{
    proc p[4];
    for (int i = 0; i < 4; i++) {
        start_by_hand(&p[i], order[i] / 2, order[i] % 2);
        usleep(5000);
    }
    int named_job = 0, ok[2] = {0, 0};
    for (int i = 0; i < 4; i++) {
        finish_by_hand(&p[i]);
        int code = WIFEXITED(p[i].status) ? WEXITSTATUS(p[i].status) : 128 + WTERMSIG(p[i].status);
        if (code != 0 && code != 1)
            fprintf(stderr, "job %c rank %d: exit %d (2: the other job's bytes)\n", 'A' + p[i].job, p[i].rank, code);
        CHECK(code == 0 || code == 1);
        ok[p[i].job] += code == 0;
        named_job += strstr(p[i].msg, "DDL_JOB") != NULL;
    }
    /* both ran on their own (one after the other), or someone was told to set DDL_JOB */
    CHECK((ok[0] == 2 && ok[1] == 2) || named_job > 0);
    if (check_failed)
        for (int i = 0; i < 4; i++)
            fprintf(stderr, "  job %c rank %d: %s\n", 'A' + p[i].job, p[i].rank, p[i].msg);
}

static void test_by_hand(void)
{
    static const int orders[][4] = {{0, 1, 2, 3}, {0, 3, 2, 1}, {3, 1, 0, 2}, {1, 2, 3, 0}, {2, 0, 1, 3}};
    for (size_t i = 0; i < sizeof orders / sizeof orders[0]; i++)
        two_jobs(orders[i]);
    /* one job alone still runs without DDL_JOB, also after a job killed with -9 left its segment */
    proc p[2];
    for (int r = 0; r < 2; r++)
        start_by_hand(&p[r], 0, r);
    usleep(400000);
    kill(p[0].pid, SIGKILL), kill(p[1].pid, SIGKILL);
    for (int r = 0; r < 2; r++)
        finish_by_hand(&p[r]);
    char path[64];
    snprintf(path, sizeof path, "/dev/shm/ddl-u%u", (unsigned)geteuid());
    CHECK(access(path, F_OK) == 0); /* left behind by the killed job */
    for (int round = 0; round < 2; round++) {
        for (int r = 0; r < 2; r++)
            start_by_hand(&p[r], 1, r);
        for (int r = 0; r < 2; r++) {
            finish_by_hand(&p[r]);
            CHECK(WIFEXITED(p[r].status) && WEXITSTATUS(p[r].status) == 0);
            if (!WIFEXITED(p[r].status) || WEXITSTATUS(p[r].status) != 0)
                fprintf(stderr, "a job alone, rank %d: %s\n", r, p[r].msg);
        }
    }
    CHECK(access(path, F_OK) != 0); /* the last job removed its name */
}

/* ---- 3: another user takes the names of a job without DDL_JOB ---- */

#define NOBODY 65534
#define JOBLESS_NAMES 8 /* shm.h: /ddl-u<uid>, then /ddl-u<uid>-1 to -7 */

static void jobless_path(char *out, size_t n, int i)
{
    if (i == 0)
        snprintf(out, n, "/dev/shm/ddl-u%u", (unsigned)geteuid());
    else
        snprintf(out, n, "/dev/shm/ddl-u%u-%d", (unsigned)geteuid(), i);
}

/* squat: as nobody (a child that drops root), take the jobless names first..last: a file of mode
 * 0644 holding "squatted" (even numbers) or a link to victim (odd ones). 0 if all were taken. */
static int squat(int first, int last, const char *victim)
{
    char path[JOBLESS_NAMES][128];
    for (int i = first; i <= last; i++)
        jobless_path(path[i], sizeof path[i], i); /* our uid's names, before the child drops it */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgroups(0, NULL) != 0 || setgid(NOBODY) != 0 || setuid(NOBODY) != 0)
            _exit(2);
        for (int i = first; i <= last; i++) {
            int fd = i % 2 ? -1 : open(path[i], O_RDWR | O_CREAT | O_EXCL, 0644);
            if (i % 2 ? symlink(victim, path[i]) != 0 : fd < 0 || write(fd, "squatted", 8) != 8)
                _exit(3);
            if (fd >= 0)
                close(fd);
        }
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* a_job: both ranks of a job without DDL_JOB, by hand; 1 if both exited 0 (else the messages). */
static int a_job(proc p[2], int label)
{
    for (int r = 0; r < 2; r++)
        start_by_hand(&p[r], label, r);
    int good = 1;
    for (int r = 0; r < 2; r++) {
        finish_by_hand(&p[r]);
        good &= WIFEXITED(p[r].status) && WEXITSTATUS(p[r].status) == 0;
    }
    return good;
}

static void test_squatted(void)
{
    if (geteuid() != 0) {
        printf("skipped: another user's shared memory names (needs root to act as nobody)\n");
        return;
    }
    char victim[64], path[128], buf[16] = "";
    snprintf(victim, sizeof victim, "/tmp/ddl-test-victim-%d", (int)getpid());
    int fd = open(victim, O_RDWR | O_CREAT | O_EXCL, 0644);
    CHECK(fd >= 0 && write(fd, "precious", 8) == 8);
    if (fd >= 0)
        close(fd);
    /* the first two names taken: the job runs under the third, and removes only that one */
    CHECK(squat(0, 1, victim) == 0);
    proc p[2];
    int ran = a_job(p, 2);
    CHECK(ran);
    if (!ran)
        fprintf(stderr, "squatted names: rank 0: %s; rank 1: %s\n", p[0].msg, p[1].msg);
    struct stat sb;
    jobless_path(path, sizeof path, 0);
    CHECK(lstat(path, &sb) == 0 && sb.st_uid == NOBODY && S_ISREG(sb.st_mode) && (sb.st_mode & 0777) == 0644 &&
          sb.st_size == 8);
    jobless_path(path, sizeof path, 1);
    CHECK(lstat(path, &sb) == 0 && sb.st_uid == NOBODY && S_ISLNK(sb.st_mode));
    jobless_path(path, sizeof path, 2);
    CHECK(access(path, F_OK) != 0);
    fd = open(victim, O_RDONLY);
    CHECK(fd >= 0 && read(fd, buf, sizeof buf - 1) == 8 && strcmp(buf, "precious") == 0);
    if (fd >= 0)
        close(fd);
    /* all eight taken: both ranks refuse at once, naming the names and their owner */
    CHECK(squat(2, JOBLESS_NAMES - 1, victim) == 0);
    double t0 = ranks_now();
    CHECK(!a_job(p, 3));
    CHECK(ranks_now() - t0 < 0.9); /* the timeout is 1 s */
    jobless_path(path, sizeof path, 0);
    for (int r = 0; r < 2; r++) {
        CHECK(WIFEXITED(p[r].status) && WEXITSTATUS(p[r].status) == 1);
        CHECK(strstr(p[r].msg, path + 8) && strstr(p[r].msg, "uid 65534") && strstr(p[r].msg, "DDL_JOB"));
        printf("all names taken, rank %d: %s\n", r, p[r].msg);
    }
    for (int i = 0; i < JOBLESS_NAMES; i++) {
        jobless_path(path, sizeof path, i);
        CHECK(lstat(path, &sb) == 0 && sb.st_uid == NOBODY); /* none removed */
        unlink(path);
    }
    unlink(victim);
}

int main(void)
{
    if (!ddl_transport_shm()) {
        printf("shm not built: skipped\n");
        return TEST_END();
    }
    for (int how = FOREIGN_MODE; how <= FOREIGN_OWNER; how++) {
        if (how == FOREIGN_OWNER && geteuid() != 0)
            continue; /* chown needs root */
        run_ranks("shm", 2, rank_foreign_attach, &how, 20, -1);
    }
    /* a segment of this user but mode 0644 (someone else made it) under the name of the next run */
    char path[160];
    snprintf(path, sizeof path, "/dev/shm/ddl-test-%d-%d", (int)getpid(), ranks_run_counter + 1);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
    CHECK(fd >= 0 && fchmod(fd, 0644) == 0 && ftruncate(fd, 8 << 20) == 0);
    if (fd >= 0)
        close(fd);
    run_ranks("shm", 2, rank_not_ours, &(not_ours){"mode 0644", 0}, 20, -1);
    unlink(path);
    if (geteuid() == 0) { /* a link nobody planted under the name of the next run */
        snprintf(path, sizeof path, "/dev/shm/ddl-test-%d-%d", (int)getpid(), ranks_run_counter + 1);
        pid_t pid = fork();
        if (pid == 0)
            _exit(setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY) || symlink("/etc/hostname", path) ? 1 : 0);
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        run_ranks("shm", 2, rank_not_ours, &(not_ours){"uid 65534", 1}, 20, -1);
        unlink(path);
    }
    for (int how = BAD_TAIL; how <= BAD_LENGTH; how++)
        run_ranks("shm", 2, rank_corrupt, &how, 20, -1);
    test_by_hand();
    test_squatted();
    return TEST_END();
}
