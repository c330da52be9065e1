/* ranks.h - run a test body in N forked ranks (the tests of src/comm and transports/).
 * Each child runs fn(rank, world, arg) with its own CHECK counters, then reports them to the
 * parent through a pipe, together with any "key value" lines it wants compared across ranks
 * and runs (report_value). The parent adds the counts to its own, and kills every child still
 * running at the deadline, so no test can hang. beside_start/beside_join run such runs side by
 * side, in a child process, when they mostly wait. Include after check.h. */
#ifndef DDL_TEST_RANKS_H
#define DDL_TEST_RANKS_H
#include "ddl.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define RANKS_MAX 16
#define VALUES_MAX 512

typedef void (*rank_fn)(int rank, int world, void *arg);

static int ranks_report_fd = -1;       /* in a child: where to write */
static char ranks_job[64];             /* job id of the current run */
static int ranks_port;                 /* tcp rendezvous port of the current run */
static const char *ranks_transport;    /* transport name of the current run */
static int ranks_run_counter;

/* values reported by children, compared across ranks and runs: same key, same value */
static struct {
    char key[64];
    unsigned long long value;
} ranks_values[VALUES_MAX];
static int ranks_n_values, ranks_value_conflicts;

/* ranks_now: monotonic seconds. */
static inline double ranks_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline void ranks_take_value(const char *key, unsigned long long v);

/* report_value: in a child: record that `key` gave `value` (e.g. a CRC of a result). */
static inline void report_value(const char *key, unsigned long long value)
{
    char line[128];
    int n = snprintf(line, sizeof line, "v %s %llu\n", key, value);
    if (ranks_report_fd >= 0 && write(ranks_report_fd, line, (size_t)n) != n)
        perror("report_value");
    if (ranks_report_fd < 0 && ranks_transport && strcmp(ranks_transport, "mpi") == 0)
        ranks_take_value(key, value); /* under mpirun: this process is the rank */
}

static inline void ranks_take_value(const char *key, unsigned long long v)
{
    for (int i = 0; i < ranks_n_values; i++) {
        if (strcmp(ranks_values[i].key, key) == 0) {
            if (ranks_values[i].value != v) {
                fprintf(stderr, "value %s differs: %llu vs %llu\n", key, ranks_values[i].value, v);
                ranks_value_conflicts++;
            }
            return;
        }
    }
    if (ranks_n_values < VALUES_MAX) {
        snprintf(ranks_values[ranks_n_values].key, sizeof ranks_values[0].key, "%s", key);
        ranks_values[ranks_n_values++].value = v;
    }
}

/* make_config: a config for `rank` of `world` in the current run, over transport `name`. */
static inline ddl_comm_config make_config(int rank, int world, int timeout_ms)
{
    static char master[64];
    ddl_comm_config cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(master, sizeof master, "127.0.0.1:%d", ranks_port);
    cfg.transport = ddl_transport_find(ranks_transport);
    cfg.rank = rank;
    cfg.world_size = world;
    cfg.local_rank = rank;
    cfg.local_size = world;
    cfg.master = master;
    cfg.job = ranks_job;
    cfg.token = "test-token";
    cfg.timeout_ms = timeout_ms;
    cfg.mac = getenv("DDL_TEST_MAC") && strcmp(getenv("DDL_TEST_MAC"), "1") == 0; /* tests/test_mac.sh */
    return cfg;
}

/* ranks_open: a comm for cfg, its creation CHECKed; NULL, with the reason on stderr, if it failed. */
static inline ddl_comm *ranks_open(const ddl_comm_config *cfg)
{
    ddl_comm *c = NULL;
    char err[DDL_ERR_BYTES] = "";
    int st = ddl_comm_create(cfg, NULL, &c, err, sizeof err);
    if (st != DDL_OK)
        fprintf(stderr, "%s rank %d: create: %s: %s\n", ranks_transport, cfg->rank, ddl_strerror(st), err);
    CHECK(st == DDL_OK);
    if (st != DDL_OK) {
        ddl_comm_destroy(c);
        return NULL;
    }
    return c;
}

/* ranks_read_child: take rank's counts and values from its pipe; 1 if it reported its counts. */
static inline int ranks_read_child(int fd, int rank)
{
    static char buf[65536];
    size_t n = 0;
    ssize_t k;
    while (n < sizeof buf - 1 && (k = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)k;
    buf[n] = '\0';
    int got_result = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        char key[64];
        unsigned long long v;
        int p, f;
        if (sscanf(line, "v %63s %llu", key, &v) == 2)
            ranks_take_value(key, v);
        else if (sscanf(line, "r %d %d", &p, &f) == 2)
            check_passed += p, check_failed += f, got_result = 1;
    }
    (void)rank;
    return got_result;
}

/* ---- under mpirun (transport "mpi", tests/test_mpi.sh) ----
 * mpirun started this process as one rank: fn runs in place, and only for the world size that
 * mpirun started; runs in which a rank may die are skipped (Open MPI ends the whole job when a
 * rank is killed). A comm opened before the first run and kept until ranks_mpi_end() keeps MPI
 * initialised across the runs (the comm that starts MPI finalizes it when destroyed, at exit). */
static ddl_comm *ranks_mpi_keep;

/* ranks_under_mpi: 1 if this process is a rank of mpirun running the mpi transport. */
static inline int ranks_under_mpi(void)
{
    const char *t = getenv("DDL_TEST_TRANSPORT");
    return t && strcmp(t, "mpi") == 0 && (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE"));
}

/* ranks_mpi_end: at exit, destroy the comm that keeps MPI initialised (finalizing MPI). */
static inline void ranks_mpi_end(void)
{
    ddl_comm_destroy(ranks_mpi_keep);
    ranks_mpi_keep = NULL;
}

static inline int run_ranks_mpi(int world, rank_fn fn, void *arg, int may_die)
{
    static int rank = -1, size = -1;
    if (rank < 0) {
        const char *r = getenv("OMPI_COMM_WORLD_RANK") ? getenv("OMPI_COMM_WORLD_RANK") : getenv("PMI_RANK");
        const char *n = getenv("OMPI_COMM_WORLD_SIZE") ? getenv("OMPI_COMM_WORLD_SIZE") : getenv("PMI_SIZE");
        rank = r ? atoi(r) : 0;
        size = n ? atoi(n) : 1;
    }
    if (world != size || may_die >= 0)
        return 0;
    if (!ranks_mpi_keep) {
        ddl_comm_config cfg = make_config(rank, world, 60000);
        char err[DDL_ERR_BYTES] = "";
        if (ddl_comm_create(&cfg, NULL, &ranks_mpi_keep, err, sizeof err) != DDL_OK) {
            fprintf(stderr, "mpi rank %d: create: %s\n", rank, err);
            check_failed++;
            return 1;
        }
        atexit(ranks_mpi_end);
    }
    fn(rank, world, arg);
    return 0;
}

/* ranks_free_port: a loopback port for a run's rendezvous, below the kernel's ephemeral range
 * (32768 and up), where connections of earlier runs and other programs take their local ports,
 * and free right now: a port drawn from the whole range once collided with one in use. */
static int ranks_free_port(int counter)
{
    int start = 20000 + (int)((getpid() * 131 + counter * 7) % 12000);
    for (int i = 0; i < 100; i++) {
        int port = 20000 + (start - 20000 + i * 37) % 12000;
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_port = htons((uint16_t)port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
        if (fd >= 0)
            close(fd);
        if (ok)
            return port;
    }
    return start;
}

/* run_ranks: fork `world` ranks running fn over transport `tname`; wait at most deadline_s.
 * Rank `may_die` (-1: none) is allowed to end by a signal. Returns the number of ranks that
 * did not end cleanly (and counts each as a failed check). Under mpirun: see run_ranks_mpi. */
static inline int run_ranks(const char *tname, int world, rank_fn fn, void *arg, double deadline_s, int may_die)
{
    int fds[RANKS_MAX];
    pid_t pids[RANKS_MAX];
    ranks_transport = tname;
    ranks_run_counter++;
    snprintf(ranks_job, sizeof ranks_job, "test-%d-%d", (int)getpid(), ranks_run_counter);
    ranks_port = ranks_free_port(ranks_run_counter);
    if (strcmp(tname, "mpi") == 0 && ranks_under_mpi())
        return run_ranks_mpi(world, fn, arg, may_die);
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < world; r++) {
        int p[2];
        if (pipe(p) != 0)
            return perror("pipe"), world;
        pids[r] = fork();
        if (pids[r] == 0) {
            close(p[0]);
            for (int j = 0; j < r; j++)
                close(fds[j]);
            ranks_report_fd = p[1];
            check_passed = check_failed = 0;
            fn(r, world, arg);
            char line[64];
            int n = snprintf(line, sizeof line, "r %d %d\n", check_passed, check_failed);
            if (write(p[1], line, (size_t)n) != n)
                _exit(3);
            _exit(check_failed ? 1 : 0);
        }
        close(p[1]);
        fds[r] = p[0];
    }
    int bad = 0, left = world;
    int done[RANKS_MAX] = {0}, exit1[RANKS_MAX] = {0};
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (left > 0) {
        int status, reaped = 0;
        for (int r = 0; r < world; r++) { /* only ours: a child of beside_start is not this run's */
            if (done[r] || waitpid(pids[r], &status, WNOHANG) != pids[r])
                continue;
            reaped = 1, done[r] = 1, left--;
            if (WIFSIGNALED(status) && r != may_die) {
                fprintf(stderr, "%s rank %d of %d killed by signal %d\n", tname, r, world, WTERMSIG(status));
                bad++;
            } else if (WIFEXITED(status) && WEXITSTATUS(status) == 1) {
                exit1[r] = 1; /* failed checks (reported), or a sanitizer's exit before the report */
            } else if (WIFEXITED(status) && WEXITSTATUS(status) > 1) {
                fprintf(stderr, "%s rank %d of %d exited with %d\n", tname, r, world, WEXITSTATUS(status));
                bad++;
            }
        }
        if (reaped)
            continue;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 > deadline_s) {
            for (int r = 0; r < world; r++) {
                if (!done[r]) {
                    fprintf(stderr, "%s rank %d of %d still running after %.0f s: killed\n", tname, r, world,
                            deadline_s);
                    kill(pids[r], SIGKILL);
                    waitpid(pids[r], NULL, 0);
                    done[r] = 1, left--, bad++;
                }
            }
            break;
        }
        usleep(2000);
    }
    for (int r = 0; r < world; r++) {
        if (!ranks_read_child(fds[r], r) && exit1[r]) {
            fprintf(stderr, "%s rank %d of %d exited with 1 without reporting its checks\n", tname, r, world);
            bad++;
        }
        close(fds[r]);
    }
    check_failed += bad;
    return bad;
}

/* ---- runs side by side ----
 * beside_start runs fn(arg) in a forked child, which may call run_ranks itself, while this
 * process goes on: for runs that mostly wait (a heartbeat timeout, a long sleep), so that their
 * waits overlap. beside_join waits for the child, at most deadline_s (then kills it and its
 * ranks), and adds its checks to this process's; a child that ends without reporting them is a
 * failed check. Values the child's runs report (report_value) are compared within the child only. */
typedef struct beside {
    pid_t pid;
    int fd;
} beside;

static inline beside beside_start(void (*fn)(void *arg), void *arg)
{
    beside b = {-1, -1};
    int p[2];
    if (pipe(p) != 0) {
        perror("pipe");
        return b;
    }
    fflush(stdout);
    fflush(stderr);
    b.pid = fork();
    if (b.pid == 0) {
        setpgid(0, 0); /* its own group, ranks included: killed as one at the deadline */
        close(p[0]);
        check_passed = check_failed = 0;
        fn(arg);
        char line[64];
        int n = snprintf(line, sizeof line, "r %d %d\n", check_passed, check_failed);
        _exit(write(p[1], line, (size_t)n) == n ? 0 : 3);
    }
    close(p[1]);
    b.fd = p[0];
    if (b.pid < 0)
        perror("fork");
    else
        setpgid(b.pid, b.pid);
    return b;
}

static inline void beside_join(beside b, double deadline_s)
{
    double end = ranks_now() + deadline_s;
    int status = 0;
    while (b.pid > 0 && waitpid(b.pid, &status, WNOHANG) == 0) {
        if (ranks_now() > end) {
            fprintf(stderr, "a run beside the others still going after %.0f s: killed\n", deadline_s);
            kill(-b.pid, SIGKILL); /* and its ranks, which hold the pipe open */
            waitpid(b.pid, &status, 0);
            break;
        }
        usleep(2000);
    }
    if (b.fd < 0 || !ranks_read_child(b.fd, -1)) {
        fprintf(stderr, "a run beside the others ended without reporting its checks\n");
        check_failed++;
    }
    if (b.fd >= 0)
        close(b.fd);
}

/* test_max_world: the largest world a suite runs: DDL_TEST_MAX_WORLD if set (tests/test_mac.sh
 * reruns the suites with every message MAC'd, where 2 and 3 ranks reach every path), else dflt. */
static inline int test_max_world(int dflt)
{
    const char *env = getenv("DDL_TEST_MAX_WORLD");
    int n = env && env[0] ? atoi(env) : 0;
    return n >= 2 && n < dflt ? n : dflt;
}

/* test_transports: the transports to run: DDL_TEST_TRANSPORT, or every one compiled in but mpi
 * (which needs mpirun). Returns how many names were written to out. */
static inline int test_transports(const char *out[4])
{
    const char *env = getenv("DDL_TEST_TRANSPORT");
    static const char *const all[] = {"shm", "tcp", "zmq"};
    int n = 0;
    if (env && env[0]) {
        out[n++] = env;
        return n;
    }
    for (int i = 0; i < 3; i++)
        if (ddl_transport_find(all[i]))
            out[n++] = all[i];
    return n;
}

#endif
