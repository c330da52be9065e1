/* ddl-bench - all-reduce throughput, as nccl-tests prints it.
 *
 *   ddl-bench allreduce -t shm -n 4 [-b 4K] [-e 64M] [-f 4] [--iters 20] [--warmup 5] [--native] [--mac]
 *
 * Starts its own N ranks (fork) unless it runs under mpirun (OMPI_COMM_WORLD_SIZE or PMI_SIZE
 * set) or a launcher that set DDL_RANK, in which case it is one of the ranks and takes its place
 * from the environment. Rank 0 prints one row per message size:
 *   bytes count time_us algbw_GBs busbw_GBs check
 * time is the mean of --iters timed all-reduces (after --warmup untimed ones), the slowest rank's;
 * algbw = bytes / time; busbw = algbw * 2 (n - 1) / n; check verifies a sum of known values.
 * Exit status is non-zero if any check or any rank failed. Flags as getopt_long reads them
 * (--iters=5 too; --help, --version); a bad flag or value exits 2 naming it. Uses ddl.h only
 * (and tools/cli.h for its command line). */
#include "ddl.h"

#include <sys/random.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/cli.h"

typedef struct opts {
    const char *transport;
    int n, iters, warmup, native, mac;
    size_t min_bytes, max_bytes;
    double factor;
    int op;           /* OP_* */
} opts;

enum { OP_ALLREDUCE, OP_ALLGATHER, OP_BROADCAST };
static const char *const op_names[] = {"allreduce", "allgather", "broadcast", NULL};

/* ---- arguments ---- */

#define USAGE                                                                                        \
    "usage: ddl-bench allreduce|allgather|broadcast -t shm|tcp|zmq|mpi -n RANKS [-b MIN] [-e MAX]\n" \
    "                 [-f FACTOR] [--iters K] [--warmup W] [--native] [--mac]\n"                      \
    "All-reduce float32 sums (or all-gather, or broadcast from rank 0) of every size from MIN to\n"  \
    "MAX bytes (times FACTOR each time; for all-gather the whole gathered vector) and print, as\n"   \
    "nccl-tests do: bytes count time_us algbw_GBs busbw_GBs check (busbw: algbw x 2(n-1)/n for\n"    \
    "all-reduce, x (n-1)/n for all-gather, x 1 for broadcast).\n"                                  \
    "  -t T            transport (default shm)\n"                                                    \
    "  -n RANKS        ranks to fork, 2 to 256 (not under mpirun or ddlrun: they start the ranks)\n" \
    "  -b MIN, -e MAX  sizes in bytes, with an optional K, M or G suffix (default 4K and 64M)\n"     \
    "  -f FACTOR       size factor from one row to the next, above 1 (default 4)\n"                  \
    "  --iters K       timed all-reduces per size (default 20)\n"                                    \
    "  --warmup W      untimed all-reduces before them (default 5)\n"                                \
    "  --native        the transport's own all-reduce where it has one (mpi, shm)\n"                 \
    "  --mac           a MAC on every message (DDL_MAC=1: tcp, zmq)\n"                                \
    "  -h, --help      this text\n"                                                                  \
    "  --version       ddl-bench's version\n"

/* parse_size: "256K" -> 262144: a whole number of bytes, with K, M or G (powers of 1024), and B. */
static size_t parse_size(const char *flag, const char *s)
{
    char *end;
    unsigned long long v = s[0] >= '0' && s[0] <= '9' ? strtoull(s, &end, 10) : 0;
    int shift = 0;
    if (v > 0) {
        shift = *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20 : *end == 'G' || *end == 'g' ? 30 : 0;
        end += shift > 0;
        end += *end == 'B' || *end == 'b';
    }
    if (v == 0 || *end || v > (1ull << (40 - shift)))
        cli_bad(flag, s, "a size in bytes, as 4096, 256K, 8M or 1G (at most 1024G)");
    return (size_t)(v << shift);
}

static void parse_args(int argc, char **argv, opts *o)
{
    static const char *const transports[] = {"shm", "tcp", "zmq", "mpi", NULL};
    enum { ITERS = 256, WARMUP, NATIVE, MAC };
    static const struct option options[] = {
        {"iters", required_argument, NULL, ITERS}, {"warmup", required_argument, NULL, WARMUP},
        {"native", no_argument, NULL, NATIVE}, {"mac", no_argument, NULL, MAC}, CLI_HELP_VERSION, {NULL, 0, NULL, 0}};
    *o = (opts){NULL, 0, 20, 5, 0, 0, 4096, (size_t)64 << 20, 4, OP_ALLREDUCE};
    cli_start(argv, "ddl-bench");
    for (int c; (c = getopt_long(argc, argv, "ht:n:b:e:f:", options, NULL)) != -1;) {
        switch (c) {
        case 't': o->transport = transports[cli_word("-t", optarg, transports)]; break;
        case 'n': o->n = cli_int("-n", optarg, 2, 256); break;
        case 'b': o->min_bytes = parse_size("-b", optarg); break;
        case 'e': o->max_bytes = parse_size("-e", optarg); break;
        case 'f': o->factor = cli_float("-f", optarg, 1.0001, 1024); break;
        case ITERS: o->iters = cli_int("--iters", optarg, 1, 1000000); break;
        case WARMUP: o->warmup = cli_int("--warmup", optarg, 0, 1000000); break;
        case NATIVE: o->native = 1; break;
        case MAC: o->mac = 1; break;
        case 'h': cli_help(USAGE); break;
        case 'V': cli_version(); break;
        default: cli_try(); /* getopt_long named the flag */
        }
    }
    if (optind >= argc)
        cli_error("no command: allreduce, allgather or broadcast");
    o->op = cli_word("command", argv[optind], op_names);
    cli_end(argc, argv, optind + 1);
    if (o->min_bytes > o->max_bytes)
        cli_error("-b is larger than -e");
}

/* ---- one rank ---- */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static float value(int rank, size_t i) { return (float)(i % 17) + (float)rank; }

/* one_op: the operation on count floats of buf (all-gather: each rank's count / n from the start
 * of buf into buf + count, so buf holds 2 count floats). */
static int one_op(ddl_comm *c, const opts *o, float *buf, size_t count)
{
    size_t part = count / (size_t)ddl_comm_size(c);
    if (o->op == OP_ALLGATHER)
        return ddl_comm_allgather(c, buf, buf + count, part, DDL_FLOAT32);
    if (o->op == OP_BROADCAST)
        return ddl_comm_broadcast(c, buf, count, DDL_FLOAT32, 0);
    return ddl_comm_allreduce(c, buf, count, DDL_FLOAT32, DDL_SUM);
}

/* check_sum: the operation on known values, the result verified exactly; 1 if right on every rank. */
static int check_sum(ddl_comm *c, const opts *o, float *buf, size_t count, int *st)
{
    int r = ddl_comm_rank(c), n = ddl_comm_size(c);
    size_t part = count / (size_t)n;
    for (size_t i = 0; i < count; i++)
        buf[i] = o->op == OP_ALLGATHER ? value(r, i + (size_t)r * part) : value(r, i); /* gather: global index */
    if ((*st = one_op(c, o, buf, count)) != DDL_OK)
        return 0;
    int64_t bad = 0;
    for (size_t i = 0; i < count; i++)
        if (o->op == OP_ALLGATHER)
            bad += i < part * (size_t)n && buf[count + i] != value((int)(i / part), i);
        else if (o->op == OP_BROADCAST)
            bad += buf[i] != value(0, i);
        else
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
        st = one_op(c, o, buf, count);
    if (st == DDL_OK)
        st = ddl_comm_barrier(c);
    double t0 = now_s();
    for (int k = 0; k < o->iters && st == DDL_OK; k++)
        st = one_op(c, o, buf, count);
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
    float *buf = malloc(2 * o->max_bytes + 64);
    if (!buf)
        return fprintf(stderr, "ddl-bench: out of memory\n"), 1;
    if (r == 0) {
        printf("# ddl-bench %s: transport %s, %d ranks, float32%s%s%s, %d iterations after %d warmup\n",
               op_names[o->op], ddl_comm_transport_name(c), n, o->op == OP_ALLREDUCE ? " sum" : "",
               o->native ? " (native)" : "", o->mac ? ", MAC on every message" : "", o->iters, o->warmup);
        printf("%12s %12s %12s %10s %10s %6s\n", "bytes", "count", "time_us", "algbw_GBs", "busbw_GBs", "check");
        fflush(stdout);
    }
    for (double b = (double)o->min_bytes; b <= (double)o->max_bytes * 1.0000001; b *= o->factor) {
        size_t count = (size_t)b / sizeof(float);
        if (o->op == OP_ALLGATHER) /* a whole part for every rank */
            count -= count % (size_t)n;
        size_t bytes = count * sizeof(float);
        double secs = 0;
        int st = time_size(c, o, buf, count, &secs), ok = 0;
        if (st == DDL_OK)
            ok = check_sum(c, o, buf, count, &st);
        if (st != DDL_OK) {
            fprintf(stderr, "ddl-bench: rank %d: %s: %s\n", r, ddl_strerror(st), ddl_comm_error(c));
            failed = 1;
            break;
        }
        failed |= !ok;
        if (r == 0) {
            double alg = secs > 0 ? (double)bytes / secs / 1e9 : 0;
            double bus = o->op == OP_ALLREDUCE ? 2.0 * (n - 1) / n : o->op == OP_ALLGATHER ? (double)(n - 1) / n : 1.0;
            printf("%12zu %12zu %12.2f %10.3f %10.3f %6s\n", bytes, count, secs * 1e6, alg, alg * bus,
                   ok ? "ok" : "FAIL");
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
    unsigned char r16[16];
    char token[33];
    if (getrandom(r16, sizeof r16, 0) != (ssize_t)sizeof r16) /* the ranks' secret: only they know it */
        return perror("ddl-bench: getrandom"), 1;
    for (int i = 0; i < 16; i++)
        snprintf(token + 2 * i, 3, "%02x", r16[i]);
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
            cfg.token = token;
            cfg.timeout_ms = 60000;
            cfg.mac = o->mac;
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
    parse_args(argc, argv, &o);
    int launched = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("DDL_RANK");
    if (launched) {
        ddl_comm_config cfg;
        static ddl_comm_env env; /* text cfg may point into, as long as the comm */
        char err[DDL_ERR_BYTES];
        if (o.transport)
            setenv("DDL_TRANSPORT", o.transport, 1);
        if (ddl_comm_config_from_env(&cfg, &env, err, sizeof err) != DDL_OK) {
            fprintf(stderr, "ddl-bench: %s\n", err);
            return 1;
        }
        cfg.mac |= o.mac;
        return rank_main(&o, &cfg);
    }
    if (!o.transport)
        o.transport = "shm";
    if (o.n == 0)
        cli_error("-n RANKS is required (or run it under mpirun or ddlrun)");
    if (!ddl_transport_find(o.transport)) {
        fprintf(stderr, "ddl-bench: transport %s is not compiled in\n", o.transport);
        return 2;
    }
    return fork_ranks(&o);
}
