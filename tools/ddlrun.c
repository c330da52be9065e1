/* ddlrun.c - the launcher: starts N local ranks of a program with the DDL_* environment set
 * (as torchrun or mpirun do), forwards signals to them, optionally tags their output lines
 * with the rank, and when one rank fails stops the others and says which rank failed and how;
 * with --restarts R it then starts them all again, up to R times (the program resumes from its
 * own checkpoint: ddlrun knows nothing of checkpoints).
 * Each rank runs in its own process group, so signals also reach the processes it starts.
 *
 *   ddlrun -n N [-t shm|tcp|zmq|mpi] [--nodes K --node-rank R --master HOST:PORT] [--timeout S]
 *          [--tag-output] [--job ID] [--restarts R] [--] PROGRAM [ARGS...]
 *
 * ddlrun's flags (getopt_long: --timeout=5 works too; --help, --version) end at PROGRAM: what
 * follows it is passed to PROGRAM unchanged. A bad flag or value exits 2 naming it.
 * It is a program, not library code: it may exit(). Every wait it does is bounded. */
#include "ddl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/cli.h"

#define MAX_RANKS 1024
#define LINE_BYTES 4096
#define KILL_AFTER_FAILURE_MS 2000 /* SIGTERM, then SIGKILL after this long */
#define FAILURE_GRACE_MS 200       /* after a first failure, a rank killed by a signal may still show up */
#define KILL_AFTER_SIGNAL_MS 5000  /* a forwarded signal: SIGKILL whoever still runs after this */
#define DRAIN_MS 500               /* output still in pipes after the last rank exited */

/* ---- options ---- */

typedef struct opts {
    int n, nodes, node_rank, tag_output, restarts;
    const char *transport, *master, *job, *token_file;
    double timeout_s;
    char **argv; /* PROGRAM ARGS... */
} opts;

#define USAGE                                                                                                \
    "usage: ddlrun -n N [-t shm|tcp|zmq|mpi] [--nodes K --node-rank R --master HOST:PORT]\n"                 \
    "              [--timeout S] [--tag-output] [--job ID] [--token-file F] [--restarts R]\n"                \
    "              [--] PROGRAM [ARGS...]\n"                                                                \
    "Start N ranks of PROGRAM on this machine, with the DDL_* environment set; everything after\n"           \
    "PROGRAM goes to it unchanged.\n"                                                                        \
    "  -n N            ranks to start on this machine (-np N as mpirun spells it)\n"                         \
    "  -t, --transport T   shm (default on one node), tcp (default on several), zmq or mpi\n"                \
    "  --nodes K       machines in the job (run ddlrun once on each); default 1\n"                           \
    "  --node-rank R   this machine's index, 0 <= R < K (rank = R * N + local rank)\n"                       \
    "  --master H:P    rendezvous address of rank 0 (required with --nodes > 1)\n"                           \
    "  --timeout S     seconds any blocking operation may wait (DDL_TIMEOUT_MS)\n"                           \
    "  --tag-output    prefix every output line with \"[rank] \"\n"                                          \
    "  --job ID        job id (default: $DDL_JOB, else random; derived from --master with --nodes > 1)\n"    \
    "  --token-file F  the job's secret (DDL_TOKEN) from the first line of F, which only you may read;\n"    \
    "                  required with --nodes > 1 unless DDL_TOKEN is set (or DDL_INSECURE=1)\n"              \
    "  --restarts R    when a rank fails, stop all ranks and start them all again, up to R times (one\n"     \
    "                  node only). The program must continue from its own checkpoint, e.g.\n"                \
    "                  lenet --checkpoint PATH --checkpoint-every N --resume; each restart gets a new job\n" \
    "                  id (JOB-rK), a new port and DDL_RESTART=K\n"                                          \
    "  -h, --help      this text\n"                                                                          \
    "  --version       ddlrun's version\n"                                                                   \
    "Sets DDL_RANK, DDL_WORLD_SIZE, DDL_LOCAL_RANK, DDL_LOCAL_SIZE, DDL_MASTER, DDL_JOB, DDL_TRANSPORT,\n"   \
    "DDL_TIMEOUT_MS, and DDL_TOKEN: from --token-file, else as set, else on one node a random one.\n"

/* parse_args: ddlrun's own flags, up to PROGRAM (the first operand, or what follows "--"). */
static void parse_args(int argc, char **argv, opts *o)
{
    static const char *const transports[] = {"shm", "tcp", "zmq", "mpi", NULL};
    enum { NODES = 256, NODE_RANK, MASTER, TIMEOUT, TAG_OUTPUT, JOB, RESTARTS, TOKEN_FILE };
    static const struct option options[] = {
        {"transport", required_argument, NULL, 't'}, {"nodes", required_argument, NULL, NODES},
        {"node-rank", required_argument, NULL, NODE_RANK}, {"master", required_argument, NULL, MASTER},
        {"timeout", required_argument, NULL, TIMEOUT}, {"tag-output", no_argument, NULL, TAG_OUTPUT},
        {"job", required_argument, NULL, JOB}, {"restarts", required_argument, NULL, RESTARTS},
        {"token-file", required_argument, NULL, TOKEN_FILE},
        CLI_HELP_VERSION, {NULL, 0, NULL, 0}};
    memset(o, 0, sizeof *o);
    o->nodes = 1;
    cli_start(argv, "ddlrun");
    /* "+": stop at the first operand, PROGRAM, so that its own flags stay its own */
    for (int c; (c = getopt_long(argc, argv, "+hn:t:", options, NULL)) != -1;) {
        switch (c) {
        case 'n':
            if (!strcmp(argv[optind - 1], "-np") && optind < argc) /* mpirun's -np N */
                optarg = argv[optind++];
            o->n = cli_int("-n", optarg, 1, MAX_RANKS);
            break;
        case 't': o->transport = transports[cli_word("-t", optarg, transports)]; break;
        case NODES: o->nodes = cli_int("--nodes", optarg, 1, 1000000); break;
        case NODE_RANK: o->node_rank = cli_int("--node-rank", optarg, 0, 999999); break;
        case MASTER:
            if (!strchr(optarg, ':'))
                cli_bad("--master", optarg, "HOST:PORT");
            o->master = optarg;
            break;
        case TIMEOUT: o->timeout_s = cli_float("--timeout", optarg, 0.001, 2e6); break;
        case TAG_OUTPUT: o->tag_output = 1; break;
        case JOB: o->job = optarg; break;
        case TOKEN_FILE: o->token_file = optarg; break;
        case RESTARTS: o->restarts = cli_int("--restarts", optarg, 0, 1000000); break;
        case 'h': cli_help(USAGE); break;
        case 'V': cli_version(); break;
        default: cli_try(); /* getopt_long named the flag */
        }
    }
    if (o->n == 0)
        cli_error("-n N is required (ranks to start on this machine)");
    if (optind >= argc)
        cli_error("no PROGRAM to run");
    if (o->node_rank >= o->nodes)
        cli_error("--node-rank must be below --nodes");
    if (o->nodes > 1 && !o->master)
        cli_error("--master HOST:PORT is required with --nodes > 1");
    if (o->restarts && o->nodes > 1)
        cli_error("--restarts works on one node only (each node would restart on its own)");
    if (o->transport && !strcmp(o->transport, "shm") && o->nodes > 1)
        cli_error("shm works on one machine only; use -t tcp with --nodes > 1");
    o->argv = argv + optind;
}

/* ---- environment ---- */

static void random_hex(char *out, size_t bytes)
{
    unsigned char r[32];
    if (bytes > sizeof r)
        bytes = sizeof r;
    if (getrandom(r, bytes, 0) != (ssize_t)bytes) {
        uint64_t x = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
        for (size_t i = 0; i < bytes; i++, x = x * 6364136223846793005ULL + 1442695040888963407ULL)
            r[i] = (unsigned char)(x >> 56);
    }
    for (size_t i = 0; i < bytes; i++)
        sprintf(out + 2 * i, "%02x", r[i]);
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        fprintf(stderr, "ddlrun: cannot find a free port on 127.0.0.1: %s\n", strerror(errno));
        exit(1);
    }
    close(fd);
    return ntohs(a.sin_port);
}

static void set_env(const char *name, const char *value)
{
    if (setenv(name, value, 1) != 0) {
        fprintf(stderr, "ddlrun: cannot set %s: %s\n", name, strerror(errno));
        exit(1);
    }
}

/* read_token_file: DDL_TOKEN from the first line of path, a file only its owner may read (the
 * token never goes on a command line, where other users could see it). */
static void read_token_file(const char *path)
{
    struct stat st;
    FILE *f = fopen(path, "r");
    if (!f || fstat(fileno(f), &st) != 0) {
        fprintf(stderr, "ddlrun: --token-file %s: %s\n", path, strerror(errno));
        exit(2);
    }
    if (st.st_mode & 077) {
        fprintf(stderr, "ddlrun: --token-file %s: other users may read it (mode %03o); chmod 600 it\n", path,
                (unsigned)(st.st_mode & 0777));
        exit(2);
    }
    char line[512] = "";
    int got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    line[strcspn(line, "\r\n")] = '\0';
    if (!got || !line[0]) {
        fprintf(stderr, "ddlrun: --token-file %s: the first line is empty\n", path);
        exit(2);
    }
    set_env("DDL_TOKEN", line);
}

/* setup_token: DDL_TOKEN from --token-file, as set, or random on one node; several nodes without
 * one do not start unless DDL_INSECURE=1 says so. */
static void setup_token(const opts *o)
{
    if (o->token_file)
        read_token_file(o->token_file);
    const char *token = getenv("DDL_TOKEN");
    const char *insecure = getenv("DDL_INSECURE");
    if (token && token[0]) {
        if (strlen(token) < 16)
            fprintf(stderr, "ddlrun: warning: DDL_TOKEN is %zu bytes; 16 or more resist guessing\n", strlen(token));
    } else if (o->nodes == 1) {
        char buf[40];
        random_hex(buf, 16);
        set_env("DDL_TOKEN", buf);
    } else if (!insecure || strcmp(insecure, "1") != 0) {
        fprintf(stderr, "ddlrun: no DDL_TOKEN: anyone who reaches %s could join the job; give every node the "
                        "same secret with --token-file FILE (or export DDL_TOKEN), or set DDL_INSECURE=1\n",
                o->master);
        exit(2);
    }
}

/* setup_env: the variables every local rank shares. */
static void setup_env(const opts *o)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%d", o->n * o->nodes);
    set_env("DDL_WORLD_SIZE", buf);
    snprintf(buf, sizeof buf, "%d", o->n);
    set_env("DDL_LOCAL_SIZE", buf);
    if (o->master)
        set_env("DDL_MASTER", o->master);
    else {
        snprintf(buf, sizeof buf, "127.0.0.1:%d", free_port());
        set_env("DDL_MASTER", buf);
    }
    if (o->job) {
        set_env("DDL_JOB", o->job);
    } else if (!getenv("DDL_JOB") || !getenv("DDL_JOB")[0]) {
        if (o->nodes > 1) /* every node must agree without talking: derive it from the master */
            snprintf(buf, sizeof buf, "m%08x", ddl_crc32(0, o->master, strlen(o->master)));
        else
            random_hex(buf, 8);
        set_env("DDL_JOB", buf);
    }
    if (o->transport)
        set_env("DDL_TRANSPORT", o->transport);
    else if (!getenv("DDL_TRANSPORT") || !getenv("DDL_TRANSPORT")[0])
        set_env("DDL_TRANSPORT", o->nodes > 1 ? "tcp" : "shm");
    if (o->timeout_s > 0) {
        snprintf(buf, sizeof buf, "%.0f", o->timeout_s * 1000.0 < 1 ? 1 : o->timeout_s * 1000.0);
        set_env("DDL_TIMEOUT_MS", buf);
    }
    setup_token(o);
}

/* ---- ranks ---- */

typedef struct rank {
    pid_t pid;            /* 0 once reaped */
    int id;               /* global rank */
    int out[2];           /* --tag-output: read ends of its stdout and stderr, -1 when closed */
    char buf[2][LINE_BYTES];
    size_t fill[2];
} rank;

static int sig_pipe[2] = {-1, -1}; /* the signal handler's self-pipe: wakes poll() */

static void on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    (void)!write(sig_pipe[1], &b, 1);
    errno = saved;
}

static void install_handlers(void)
{
    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        perror("ddlrun: pipe");
        exit(1);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static void spawn_rank(const opts *o, rank *r, int local)
{
    int p[2][2] = {{-1, -1}, {-1, -1}};
    for (int k = 0; o->tag_output && k < 2; k++)
        if (pipe2(p[k], O_CLOEXEC) != 0) {
            perror("ddlrun: pipe");
            exit(1);
        }
    fflush(stdout);
    fflush(stderr);
    /* block our signals across fork: until the child has reset its handlers, a signal meant
     * for it must not run our handler (which would write to our self-pipe) */
    sigset_t all, old;
    sigemptyset(&all);
    sigaddset(&all, SIGINT); sigaddset(&all, SIGTERM); sigaddset(&all, SIGHUP); sigaddset(&all, SIGCHLD);
    sigprocmask(SIG_BLOCK, &all, &old);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        perror("ddlrun: fork");
        exit(1);
    }
    if (pid == 0) {
        /* the rank dies with ddlrun, however ddlrun dies (SIGKILL included): no orphan trains on */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(127);
        char buf[32];
        snprintf(buf, sizeof buf, "%d", r->id);
        setenv("DDL_RANK", buf, 1);
        snprintf(buf, sizeof buf, "%d", local);
        setenv("DDL_LOCAL_RANK", buf, 1);
        int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            signal(sigs[i], SIG_DFL);
        close(sig_pipe[0]);
        close(sig_pipe[1]);
        setpgid(0, 0); /* its own process group: signals reach whatever the rank starts */
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (o->tag_output && (dup2(p[0][1], STDOUT_FILENO) < 0 || dup2(p[1][1], STDERR_FILENO) < 0))
            _exit(127);
        execvp(o->argv[0], o->argv);
        fprintf(stderr, "ddlrun: cannot run '%s': %s\n", o->argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* also here, so that no signal can race the child's own setpgid */
    sigprocmask(SIG_SETMASK, &old, NULL);
    r->pid = pid;
    for (int k = 0; k < 2; k++) {
        r->out[k] = p[k][0];
        if (p[k][1] >= 0)
            close(p[k][1]);
    }
}

/* ---- tagged output ---- */

static void emit(const rank *r, int k, const char *line, size_t n)
{
    char tag[24];
    int tl = snprintf(tag, sizeof tag, "[%d] ", r->id);
    FILE *f = k ? stderr : stdout;
    fwrite(tag, 1, (size_t)tl, f);
    fwrite(line, 1, n, f);
    if (n == 0 || line[n - 1] != '\n')
        fputc('\n', f);
    fflush(f);
}

/* pump: read what rank r wrote on stream k and print its complete lines, tagged. */
static void pump(rank *r, int k)
{
    ssize_t got = read(r->out[k], r->buf[k] + r->fill[k], LINE_BYTES - r->fill[k]);
    if (got < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (got <= 0) { /* EOF: flush a last line without newline */
        if (r->fill[k])
            emit(r, k, r->buf[k], r->fill[k]);
        r->fill[k] = 0;
        close(r->out[k]);
        r->out[k] = -1;
        return;
    }
    r->fill[k] += (size_t)got;
    size_t start = 0;
    for (size_t i = 0; i < r->fill[k]; i++)
        if (r->buf[k][i] == '\n') {
            emit(r, k, r->buf[k] + start, i + 1 - start);
            start = i + 1;
        }
    if (start == 0 && r->fill[k] == LINE_BYTES) { /* a line longer than the buffer: cut it */
        emit(r, k, r->buf[k], LINE_BYTES);
        start = LINE_BYTES;
    }
    memmove(r->buf[k], r->buf[k] + start, r->fill[k] - start);
    r->fill[k] -= start;
}

/* ---- supervision ---- */

typedef struct run {
    rank *ranks;
    int n, alive;
    int failed_id, failed_pid, failed_status; /* the first rank that failed (failed_pid 0: none) */
    int others_stopped;                       /* ranks were still running when it failed */
    long long decide_at;                      /* ms: the failure named is final, stop the others (0: none due) */
    int got_signal;                           /* a signal we forwarded */
    long long kill_at;                        /* ms: SIGKILL whoever still runs (0: not armed) */
} run;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void signal_all(run *u, int sig)
{
    for (int i = 0; i < u->n; i++)
        if (u->ranks[i].pid > 0 && kill(-u->ranks[i].pid, sig) != 0)
            kill(u->ranks[i].pid, sig); /* not a group leader (yet): the rank alone */
}

/* reap: collect exited ranks. The first failure stops the others, after FAILURE_GRACE_MS: a rank
 * killed by a signal wins over one that exited with a code within that time, since the ranks that
 * notice a dead peer exit with code 1 at once and may be reaped before it. */
static void reap(run *u)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (int i = 0; i < u->n; i++) {
            rank *r = &u->ranks[i];
            if (r->pid != pid)
                continue;
            r->pid = 0;
            u->alive--;
            int bad = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
            if (!bad || u->got_signal)
                continue;
            int first = !u->failed_pid;
            int killed_wins = u->decide_at && WIFSIGNALED(status) && !WIFSIGNALED(u->failed_status);
            if (first || killed_wins) {
                u->failed_id = r->id;
                u->failed_pid = pid;
                u->failed_status = status;
            }
            if (first) {
                u->others_stopped = u->alive > 0;
                u->decide_at = now_ms() + FAILURE_GRACE_MS;
            }
        }
    }
}

/* decide: the grace after the first failure is over: stop the others. */
static void decide(run *u, long long now)
{
    if (!u->decide_at || now < u->decide_at)
        return;
    u->decide_at = 0;
    if (u->alive > 0) {
        signal_all(u, SIGTERM);
        u->kill_at = now + KILL_AFTER_FAILURE_MS;
    }
}

static void handle_signals(run *u)
{
    unsigned char b[64];
    ssize_t n = read(sig_pipe[0], b, sizeof b);
    for (ssize_t i = 0; i < n; i++) {
        if (b[i] == SIGCHLD)
            continue;
        u->got_signal = b[i];
        signal_all(u, b[i]);
        if (!u->kill_at)
            u->kill_at = now_ms() + KILL_AFTER_SIGNAL_MS;
    }
}

/* supervise: until every rank has exited and its output is drained (bounded after the end). */
static void supervise(run *u, int tag)
{
    struct pollfd pf[1 + 2 * MAX_RANKS];
    int who[1 + 2 * MAX_RANKS];
    long long drain_until = 0;
    for (;;) {
        reap(u);
        long long now = now_ms();
        decide(u, now);
        if (u->kill_at && now >= u->kill_at && u->alive > 0) {
            signal_all(u, SIGKILL);
            u->kill_at = 0;
        }
        int n = 0;
        pf[n++] = (struct pollfd){.fd = sig_pipe[0], .events = POLLIN};
        for (int i = 0; tag && i < u->n; i++)
            for (int k = 0; k < 2; k++)
                if (u->ranks[i].out[k] >= 0) {
                    pf[n] = (struct pollfd){.fd = u->ranks[i].out[k], .events = POLLIN};
                    who[n++] = 2 * i + k;
                }
        if (u->alive == 0) {
            if (!drain_until)
                drain_until = now + DRAIN_MS;
            if (n == 1 || now >= drain_until) /* a grandchild may hold a pipe open: do not wait for it */
                break;
        }
        if (poll(pf, (nfds_t)n, 100) < 0 && errno != EINTR) {
            perror("ddlrun: poll");
            signal_all(u, SIGKILL);
            break;
        }
        if (pf[0].revents)
            handle_signals(u);
        for (int j = 1; j < n; j++)
            if (pf[j].revents)
                pump(&u->ranks[who[j] / 2], who[j] % 2);
    }
}

/* report: the one line that says why ddlrun failed, and its exit status. */
static int report(const run *u)
{
    if (u->got_signal) {
        fprintf(stderr, "ddlrun: received signal %d (%s); forwarded it to the ranks\n", u->got_signal,
                strsignal(u->got_signal));
        return 128 + u->got_signal;
    }
    if (!u->failed_pid)
        return 0;
    const char *tail = u->others_stopped ? "; stopped the other ranks" : "";
    int st = u->failed_status;
    if (WIFSIGNALED(st)) {
        fprintf(stderr, "ddlrun: rank %d (pid %d) was killed by signal %d (%s)%s\n", u->failed_id, u->failed_pid,
                WTERMSIG(st), strsignal(WTERMSIG(st)), tail);
        return 128 + WTERMSIG(st);
    }
    fprintf(stderr, "ddlrun: rank %d (pid %d) exited with code %d%s\n", u->failed_id, u->failed_pid,
            WEXITSTATUS(st), tail);
    return WEXITSTATUS(st) ? WEXITSTATUS(st) : 1;
}

/* ---- restarts ---- */

/* restart_env: what changes for restart k: a fresh job id (no stale shared-memory segment or
 * handshake of the dead generation can match it), a fresh rendezvous port, DDL_RESTART=k. */
static void restart_env(const opts *o, const char *base_job, int k)
{
    char buf[160];
    snprintf(buf, sizeof buf, "%s-r%d", base_job, k);
    set_env("DDL_JOB", buf);
    if (!o->master) {
        snprintf(buf, sizeof buf, "127.0.0.1:%d", free_port());
        set_env("DDL_MASTER", buf);
    }
    snprintf(buf, sizeof buf, "%d", k);
    set_env("DDL_RESTART", buf);
}

/* say_restart: the one line per restart. */
static void say_restart(const run *u, int k, int max)
{
    char why[128];
    int st = u->failed_status;
    if (WIFSIGNALED(st))
        snprintf(why, sizeof why, "was killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(why, sizeof why, "exited with code %d", WEXITSTATUS(st));
    fprintf(stderr, "ddlrun: rank %d (pid %d) %s; restarting all %d ranks (restart %d of %d)\n", u->failed_id,
            u->failed_pid, why, u->n, k, max);
}

int main(int argc, char **argv)
{
    opts o;
    parse_args(argc, argv, &o);
    setup_env(&o);
    install_handlers();
    char base_job[128];
    snprintf(base_job, sizeof base_job, "%s", getenv("DDL_JOB"));
    static rank ranks[MAX_RANKS];
    for (int k = 0;; k++) {
        if (k > 0)
            restart_env(&o, base_job, k);
        run u = {.ranks = ranks, .n = o.n};
        for (int i = 0; i < o.n; i++) {
            memset(&ranks[i], 0, sizeof ranks[i]);
            ranks[i].id = o.node_rank * o.n + i;
            ranks[i].out[0] = ranks[i].out[1] = -1;
            spawn_rank(&o, &ranks[i], i);
            u.alive++;
        }
        supervise(&u, o.tag_output);
        if (!u.failed_pid || u.got_signal || k >= o.restarts)
            return report(&u);
        say_restart(&u, k + 1, o.restarts);
    }
}
