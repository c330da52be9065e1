/* ddl-bench - all-reduce throughput, as nccl-tests prints it.
 *
 *   ddl-bench allreduce -t shm -n 4 [-b 4K] [-e 64M] [-f 4] [--iters 20] [--warmup 5] [--native]
 *
 * Starts its own N ranks (fork) unless it runs under mpirun (OMPI_COMM_WORLD_SIZE or PMI_SIZE
 * set) or a launcher that set DDL_RANK, in which case it is one of the ranks and takes its place
 * from the environment. Rank 0 prints one row per message size:
 *   bytes count time_us algbw_GBs busbw_GBs check
 * time is the mean of --iters timed all-reduces (after --warmup untimed ones), the slowest rank's;
 * algbw = bytes / time; busbw = algbw * 2 (n - 1) / n; check verifies a sum of known values.
 * Exit status is non-zero if any check or any rank failed. Uses ddl.h only. */
#include "ddl.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct opts {
    const char *transport;
    int n, iters, warmup, native;
    size_t min_bytes, max_bytes;
    double factor;
} opts;

/* ---- arguments ---- */

static void usage(void)
{
    fprintf(stderr, "usage: ddl-bench allreduce -t shm|tcp|zmq|mpi -n RANKS [-b MIN] [-e MAX] [-f FACTOR]\n"
                    "                 [--iters K] [--warmup W] [--native]\n"
                    "sizes in bytes with an optional K, M or G suffix (default 4K to 64M, factor 4)\n");
}

/* parse_size: "256K" -> 262144; 0 on a bad value. */
static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v <= 0)
        return 0;
    double mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1024, end++;
    else if (*end == 'M' || *end == 'm')
        mul = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g')
        mul = 1024.0 * 1024 * 1024, end++;
    if (*end == 'B' || *end == 'b')
        end++;
    return *end ? 0 : (size_t)(v * mul);
}

static int parse_int(const char *s, int lo, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > 1000000)
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_args(int argc, char **argv, opts *o)
{
    *o = (opts){NULL, 0, 20, 5, 0, 4096, (size_t)64 << 20, 4};
    if (argc < 2 || strcmp(argv[1], "allreduce") != 0)
        return -1;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int need = 1;
        if (strcmp(a, "--native") == 0) {
            o->native = 1, need = 0;
        } else if (!v) {
            fprintf(stderr, "ddl-bench: %s needs a value\n", a);
            return -1;
        } else if (strcmp(a, "-t") == 0) {
            o->transport = v;
        } else if (strcmp(a, "-n") == 0) {
            if (parse_int(v, 1, &o->n))
                return fprintf(stderr, "ddl-bench: -n %s is not a rank count\n", v), -1;
        } else if (strcmp(a, "-b") == 0 || strcmp(a, "-e") == 0) {
            size_t s = parse_size(v);
            if (!s)
                return fprintf(stderr, "ddl-bench: %s %s is not a size\n", a, v), -1;
            *(a[1] == 'b' ? &o->min_bytes : &o->max_bytes) = s;
        } else if (strcmp(a, "-f") == 0) {
            o->factor = strtod(v, NULL);
            if (o->factor <= 1)
                return fprintf(stderr, "ddl-bench: -f %s must be more than 1\n", v), -1;
        } else if (strcmp(a, "--iters") == 0) {
            if (parse_int(v, 1, &o->iters))
                return fprintf(stderr, "ddl-bench: --iters %s is not a count\n", v), -1;
        } else if (strcmp(a, "--warmup") == 0) {
            if (parse_int(v, 0, &o->warmup))
                return fprintf(stderr, "ddl-bench: --warmup %s is not a count\n", v), -1;
        } else {
            fprintf(stderr, "ddl-bench: unknown option %s\n", a);
            return -1;
        }
        i += need;
    }
    if (o->min_bytes > o->max_bytes)
        return fprintf(stderr, "ddl-bench: -b is larger than -e\n"), -1;
    return 0;
}

/* ---- one rank ---- */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static float value(int rank, size_t i) { return (float)(i % 17) + (float)rank; }

/* check_sum: all-reduce known values and verify the exact sum; 1 if right on every rank. */
static int check_sum(ddl_comm *c, float *buf, size_t count, int *st)
{
    int r = ddl_comm_rank(c), n = ddl_comm_size(c);
    for (size_t i = 0; i < count; i++)
        buf[i] = value(r, i);
    if ((*st = ddl_comm_allreduce(c, buf, count, DDL_FLOAT32, DDL_SUM)) != DDL_OK)
        return 0;
    int64_t bad = 0;
    for (size_t i = 0; i < count; i++)
        bad += buf[i] != (float)n * (float)(i % 17) + (float)(n * (n - 1) / 2);
    *st = ddl_comm_allreduce(c, &bad, 1, DDL_INT64, DDL_SUM);
    return *st == DDL_OK && bad == 0;
}

/* time_size: mean seconds per all-reduce of count floats, the slowest rank's. */
static int time_size(ddl_comm *c, const opts *o, float *buf, size_t count, double *secs)
{
    int st = DDL_OK;
    for (size_t i = 0; i < count; i++)
        buf[i] = value(ddl_comm_rank(c), i) * 1e-6f;
    for (int k = 0; k < o->warmup && st == DDL_OK; k++)
        st = ddl_comm_allreduce(c, buf, count, DDL_FLOAT32, DDL_SUM);
    if (st == DDL_OK)
        st = ddl_comm_barrier(c);
    double t0 = now_s();
    for (int k = 0; k < o->iters && st == DDL_OK; k++)
        st = ddl_comm_allreduce(c, buf, count, DDL_FLOAT32, DDL_SUM);
    double dt[1] = {(now_s() - t0) / o->iters};
    int64_t us = (int64_t)(dt[0] * 1e9); /* ns, as int64 so MAX is exact */
    if (st == DDL_OK)
        st = ddl_comm_allreduce(c, &us, 1, DDL_INT64, DDL_MAX);
    *secs = (double)us * 1e-9;
    return st;
}

static int run_rank(ddl_comm *c, const opts *o)
{
    int n = ddl_comm_size(c), r = ddl_comm_rank(c), failed = 0;
    ddl_comm_set_native(c, o->native);
    float *buf = malloc(o->max_bytes + 64);
    if (!buf)
        return fprintf(stderr, "ddl-bench: out of memory\n"), 1;
    if (r == 0) {
        printf("# ddl-bench allreduce: transport %s, %d ranks, float32 sum%s, %d iterations after %d warmup\n",
               ddl_comm_transport_name(c), n, o->native ? " (native)" : "", o->iters, o->warmup);
        printf("%12s %12s %12s %10s %10s %6s\n", "bytes", "count", "time_us", "algbw_GBs", "busbw_GBs", "check");
        fflush(stdout);
    }
    for (double b = (double)o->min_bytes; b <= (double)o->max_bytes * 1.0000001; b *= o->factor) {
        size_t count = (size_t)b / sizeof(float), bytes = count * sizeof(float);
        double secs = 0;
        int st = time_size(c, o, buf, count, &secs), ok = 0;
        if (st == DDL_OK)
            ok = check_sum(c, buf, count, &st);
        if (st != DDL_OK) {
            fprintf(stderr, "ddl-bench: rank %d: %s: %s\n", r, ddl_strerror(st), ddl_comm_error(c));
            failed = 1;
            break;
        }
        failed |= !ok;
        if (r == 0) {
            double alg = secs > 0 ? (double)bytes / secs / 1e9 : 0;
            printf("%12zu %12zu %12.1f %10.3f %10.3f %6s\n", bytes, count, secs * 1e6, alg,
                   alg * 2.0 * (n - 1) / n, ok ? "ok" : "FAIL");
            fflush(stdout);
        }
    }
    free(buf);
    return failed;
}

/* ---- starting the ranks ---- */

static int rank_main(const opts *o, ddl_comm_config *cfg)
{
    ddl_comm *c = NULL;
    char err[DDL_ERR_BYTES] = "";
    int st = ddl_comm_create(cfg, NULL, &c, err, sizeof err);
    if (st != DDL_OK) {
        fprintf(stderr, "ddl-bench: rank %d: %s: %s\n", cfg->rank, ddl_strerror(st), err);
        ddl_comm_destroy(c);
        return 1;
    }
    int failed = run_rank(c, o);
    ddl_comm_destroy(c);
    return failed;
}

static int fork_ranks(const opts *o)
{
    pid_t pids[256];
    char job[64], master[64];
    snprintf(job, sizeof job, "bench-%d", (int)getpid());
    snprintf(master, sizeof master, "127.0.0.1:%d", 20000 + (int)(getpid() % 30000));
    fflush(stdout);
    for (int r = 0; r < o->n; r++) {
        pids[r] = fork();
        if (pids[r] < 0)
            return perror("fork"), 1;
        if (pids[r] == 0) {
            ddl_comm_config cfg;
            memset(&cfg, 0, sizeof cfg);
            cfg.transport = ddl_transport_find(o->transport);
            cfg.rank = cfg.local_rank = r;
            cfg.world_size = cfg.local_size = o->n;
            cfg.master = master;
            cfg.job = job;
            cfg.timeout_ms = 60000;
            _exit(rank_main(o, &cfg));
        }
    }
    int failed = 0;
    for (int done = 0; done < o->n; done++) {
        int status;
        pid_t w = wait(&status);
        if (w < 0)
            break;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            failed = 1; /* one rank failed: the others cannot finish; stop them */
            for (int r = 0; r < o->n; r++)
                if (pids[r] != w)
                    kill(pids[r], SIGTERM);
        }
    }
    return failed;
}

int main(int argc, char **argv)
{
    opts o;
    if (parse_args(argc, argv, &o) != 0) {
        usage();
        return 2;
    }
    int launched = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("DDL_RANK");
    if (launched) {
        ddl_comm_config cfg;
        char err[DDL_ERR_BYTES];
        if (o.transport)
            setenv("DDL_TRANSPORT", o.transport, 1);
        if (ddl_comm_config_from_env(&cfg, err, sizeof err) != DDL_OK) {
            fprintf(stderr, "ddl-bench: %s\n", err);
            return 1;
        }
        return rank_main(&o, &cfg);
    }
    if (!o.transport)
        o.transport = "shm";
    if (o.n < 2 || o.n > 256) {
        fprintf(stderr, "ddl-bench: -n must be 2 to 256 ranks\n");
        return 2;
    }
    if (!ddl_transport_find(o.transport)) {
        fprintf(stderr, "ddl-bench: transport %s is not compiled in\n", o.transport);
        return 2;
    }
    return fork_ranks(&o);
}
