/* ddlrun.c - the launcher: starts N local ranks of a program with the DDL_* environment set
 * (as torchrun or mpirun do), forwards signals to them, optionally tags their output lines
 * with the rank or writes one log file per rank, and when one rank fails stops the others and
 * says which rank failed and how; with --restarts R it then starts them all again, up to R times
 * (the program resumes from its own checkpoint: ddlrun knows nothing of checkpoints).
 * Each rank runs in its own process group, so signals also reach the processes it starts, and
 * dies with ddlrun (PR_SET_PDEATHSIG), however ddlrun dies.
 *
 *   ddlrun -n N [-t shm|tcp|zmq|mpi] [--nodes K --node-rank R --master HOST:PORT] [--timeout S]
 *          [--tag-output | --log-dir DIR] [--job ID] [--restarts R] [--bind cores|none] [-x VAR[=VALUE]]...
 *          [--] PROGRAM [ARGS...]
 *   ddlrun [-np TOTAL] -H HOST:SLOTS,... | --hostfile FILE [--ssh-agent CMD] [same flags] PROGRAM [ARGS...]
 *
 * With -H or --hostfile ddlrun is the head of a cluster job: it picks the master (the first host,
 * port 29500, unless --master), a job id and a token, and on each host i runs, through the agent
 * (ssh -o BatchMode=yes, or --ssh-agent CMD; "localhost" directly),
 *   cd CWD; exec DDLRUN -n SLOTS --nodes K --node-rank i --master M --job J ... --env-stdin -- PROGRAM ARGS
 * and writes DDL_TOKEN, DDL_RESTART and the -x variables to the agent's stdin as NAME=VALUE lines
 * ended by an empty line: secrets never go on a command line. The head keeps that stdin open;
 * the node's ddlrun stops its ranks when it reads EOF there (the head died, or its ssh channel
 * closed). The head supervises the agents as ddlrun supervises ranks: the first node that fails
 * stops the others (the head closes their stdin), and --restarts starts all nodes again.
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

#include "tools/bind.h"
#include "tools/cli.h"
#include "tools/hostlist.h"
#include "tools/outfile.h"
#include "tools/sigpipe.h"
#include "tools/token.h"

#define MAX_RANKS 1024
#define LINE_BYTES 4096
#define KILL_AFTER_FAILURE_MS 2000 /* SIGTERM, then SIGKILL after this long */
#define FAILURE_GRACE_MS 200       /* after a first failure, a rank killed by a signal may still show up */
#define PREEMPTED_EXIT 75          /* the examples' exit after SIGUSR1: saved, to be resumed */
#define KILL_AFTER_SIGNAL_MS 5000  /* a forwarded signal: SIGKILL whoever still runs after this */
#define DRAIN_MS 500               /* output still in pipes after the last rank exited */

/* ---- options ---- */

#define MAX_XVARS 64
#define DEFAULT_PORT 29500 /* the master's port on a cluster, as torchrun's */
#define DEFAULT_AGENT "ssh -o BatchMode=yes"

typedef struct opts {
    int n, np, nodes, node_rank, tag_output, restarts, env_stdin, nx, bind;
    const char *transport, *master, *job, *token_file, *hosts, *hostfile, *agent, *log_dir;
    const char *xvars[MAX_XVARS]; /* -x VAR[=VALUE] */
    double timeout_s;
    char **argv; /* PROGRAM ARGS... */
} opts;

static hostlist_host hosts[HOSTLIST_MAX]; /* -H or --hostfile */
static int n_hosts;

#define USAGE                                                                                                \
    "usage: ddlrun -n N [-t shm|tcp|zmq|mpi] [--nodes K --node-rank R --master HOST:PORT]\n"                 \
    "              [--timeout S] [--tag-output | --log-dir DIR] [--job ID] [--token-file F]\n"              \
    "              [--restarts R] [--bind cores|none] [-x VAR[=VALUE]]... [--] PROGRAM [ARGS...]\n"          \
    "       ddlrun [-np TOTAL] -H HOST[:SLOTS],... | --hostfile FILE [--ssh-agent CMD] [flags as above]\n"  \
    "              [--] PROGRAM [ARGS...]\n"                                                                \
    "Start N ranks of PROGRAM on this machine, or on several hosts over ssh, with the DDL_* environment\n"  \
    "set; everything after PROGRAM goes to it unchanged.\n"                                                  \
    "  -n N, --nproc-per-node N   ranks to start on this machine (-np N too, without -H)\n"                 \
    "  -H HOST[:SLOTS],...  start ranks on these hosts, SLOTS each (default 1), over ssh; ddlrun must\n"    \
    "                  be at the same path on every host, PROGRAM too (relative to the same directory)\n" \
    "  --hostfile F    the hosts from F: one \"HOST [slots=N]\" a line, as mpirun's; # comments\n"          \
    "  -np TOTAL       with -H or --hostfile: ranks in all, filling the hosts in order (default: all\n"     \
    "                  slots); every host used must get the same number\n"                                 \
    "  --ssh-agent CMD runs CMD HOST COMMAND instead of ssh -o BatchMode=yes HOST COMMAND\n"                 \
    "  -x VAR[=VALUE]  pass VAR (from here, or set to VALUE) to the ranks on every host (repeatable)\n"      \
    "  --log-dir DIR   each rank's stdout and stderr to DIR/rank.N.log (DIR on each host)\n"                 \
    "  -t, --transport T   shm (default on one node), tcp (default on several), zmq or mpi\n"                \
    "  --nodes K       machines in the job (run ddlrun once on each); default 1\n"                           \
    "  --node-rank R   this machine's index, 0 <= R < K (rank = R * N + local rank)\n"                       \
    "  --master H:P    rendezvous address of rank 0 (required with --nodes > 1; with -H: first host:29500)\n" \
    "  --timeout S     seconds any blocking operation may wait (DDL_TIMEOUT_MS)\n"                           \
    "  --tag-output    prefix every output line with \"[rank] \"\n"                                          \
    "  --job ID        job id (default: $DDL_JOB, else random; with --nodes > 1 an HMAC of --master keyed\n"  \
    "                  by the token, so the nodes agree and strangers cannot know it)\n"                     \
    "  --token-file F  the job's secret (DDL_TOKEN) from the first line of F, which only you may read;\n"    \
    "                  required with --nodes > 1 unless DDL_TOKEN is set (or DDL_INSECURE=1)\n"              \
    "  --restarts R    when a rank fails, stop all ranks and start them all again, up to R times (on\n"     \
    "                  one node, or with -H on every host). The program must continue from its own\n"      \
    "                  checkpoint, e.g. lenet --checkpoint PATH --checkpoint-every N --resume; each\n"     \
    "                  restart gets a new job id (JOB-rK), a new port (one node) and DDL_RESTART=K\n"      \
    "  --bind cores    local rank i of N runs on the i-th N-th of the CPUs ddlrun may use (none: the\n"      \
    "                  default, the scheduler places them); nothing is bound with more ranks than CPUs\n"  \
    "  -h, --help      this text\n"                                                                          \
    "  --version       ddlrun's version\n"                                                                   \
    "Sets DDL_RANK, DDL_WORLD_SIZE, DDL_LOCAL_RANK, DDL_LOCAL_SIZE, DDL_MASTER, DDL_JOB, DDL_TRANSPORT,\n"   \
    "DDL_TIMEOUT_MS, and DDL_TOKEN: from --token-file, else as set, else on one node (or with -H) a\n"      \
    "random one. With -H the token and the -x variables reach the hosts on the agent's stdin, never on a\n" \
    "command line; a host's ranks stop when that stdin closes (the head ddlrun or its ssh is gone).\n"     \
    "SIGINT, SIGTERM and SIGHUP stop the ranks; SIGUSR1 (a preemption notice) is passed on to them.\n"

/* parse_args: ddlrun's own flags, up to PROGRAM (the first operand, or what follows "--"). */
static void parse_args(int argc, char **argv, opts *o)
{
    static const char *const transports[] = {"shm", "tcp", "zmq", "mpi", NULL};
    enum { NODES = 256, NODE_RANK, MASTER, TIMEOUT, TAG_OUTPUT, JOB, RESTARTS, TOKEN_FILE, HOSTFILE, AGENT,
           LOG_DIR, ENV_STDIN, BIND };
    static const char *const binds[] = {"none", "cores", NULL};
    static const struct option options[] = {
        {"transport", required_argument, NULL, 't'}, {"nodes", required_argument, NULL, NODES},
        {"node-rank", required_argument, NULL, NODE_RANK}, {"master", required_argument, NULL, MASTER},
        {"timeout", required_argument, NULL, TIMEOUT}, {"tag-output", no_argument, NULL, TAG_OUTPUT},
        {"job", required_argument, NULL, JOB}, {"restarts", required_argument, NULL, RESTARTS},
        {"token-file", required_argument, NULL, TOKEN_FILE}, {"nproc-per-node", required_argument, NULL, 'n'},
        {"hostfile", required_argument, NULL, HOSTFILE}, {"ssh-agent", required_argument, NULL, AGENT},
        {"log-dir", required_argument, NULL, LOG_DIR}, {"bind", required_argument, NULL, BIND},
        {"env-stdin", no_argument, NULL, ENV_STDIN}, /* hidden */
        CLI_HELP_VERSION, {NULL, 0, NULL, 0}};
    memset(o, 0, sizeof *o);
    o->nodes = 1;
    cli_start(argv, "ddlrun");
    /* "+": stop at the first operand, PROGRAM, so that its own flags stay its own */
    for (int c; (c = getopt_long(argc, argv, "+hn:t:H:x:", options, NULL)) != -1;) {
        switch (c) {
        case 'n':
            if (!strcmp(argv[optind - 1], "-np") && optind < argc) /* mpirun's -np N: with -H, the total */
                o->np = cli_int("-np", argv[optind++], 1, MAX_RANKS * HOSTLIST_MAX);
            else
                o->n = cli_int("-n", optarg, 1, MAX_RANKS);
            break;
        case 'H': o->hosts = optarg; break;
        case HOSTFILE: o->hostfile = optarg; break;
        case AGENT: o->agent = optarg; break;
        case LOG_DIR: o->log_dir = optarg; break;
        case ENV_STDIN: o->env_stdin = 1; break;
        case 'x':
            if (o->nx == MAX_XVARS || !optarg[0] || optarg[0] == '=' || strchr(optarg, '\n'))
                cli_bad("-x", optarg, "VAR or VAR=VALUE (one line; at most 64 of them)");
            o->xvars[o->nx++] = optarg;
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
        case BIND: o->bind = cli_word("--bind", optarg, binds); break;
        case JOB: o->job = optarg; break;
        case TOKEN_FILE: o->token_file = optarg; break;
        case RESTARTS: o->restarts = cli_int("--restarts", optarg, 0, 1000000); break;
        case 'h': cli_help(USAGE); break;
        case 'V': cli_version(); break;
        default: cli_try(); /* getopt_long named the flag */
        }
    }
    if (optind >= argc)
        cli_error("no PROGRAM to run");
    o->argv = argv + optind;
    if (o->hosts || o->hostfile) {
        if (o->hosts && o->hostfile)
            cli_error("give -H or --hostfile, not both");
        if (o->n)
            cli_error("with -H or --hostfile, -np TOTAL counts the ranks (-n is per node, for one node)");
        if (o->nodes > 1 || o->node_rank)
            cli_error("with -H or --hostfile, ddlrun picks --nodes and --node-rank itself");
        if (o->transport && !strcmp(o->transport, "shm"))
            cli_error("shm works on one machine only; use -t tcp with -H or --hostfile");
        return;
    }
    if (o->n == 0)
        o->n = o->np;
    if (o->n == 0)
        cli_error("-n N is required (ranks to start on this machine)");
    if (o->node_rank >= o->nodes)
        cli_error("--node-rank must be below --nodes");
    if (o->nodes > 1 && !o->master)
        cli_error("--master HOST:PORT is required with --nodes > 1");
    if (o->restarts && o->nodes > 1)
        cli_error("--restarts works on one node only (each node would restart on its own)");
    if (o->transport && !strcmp(o->transport, "shm") && o->nodes > 1)
        cli_error("shm works on one machine only; use -t tcp with --nodes > 1");
    if (o->n > MAX_RANKS)
        cli_error("-np: at most 1024 ranks on one node");
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

/* read_token_file: DDL_TOKEN from the first line of path (token.h); exit 2 if it cannot be. */
static void read_token_file(const char *path)
{
    char line[512];
    if (token_read_file(path, line, sizeof line) != 0)
        exit(2);
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

/* set_xvars: -x VAR=VALUE sets VAR here (and so for the ranks); -x VAR passes it as it is. */
static void set_xvars(const opts *o)
{
    for (int i = 0; i < o->nx; i++) {
        const char *eq = strchr(o->xvars[i], '=');
        if (eq) {
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)(eq - o->xvars[i] < 255 ? eq - o->xvars[i] : 255), o->xvars[i]);
            set_env(name, eq + 1);
        }
    }
}

/* read_env_stdin: --env-stdin (a node started by the head): NAME=VALUE lines on stdin, ended by an
 * empty line, into the environment. Read a byte at a time: what follows stays unread, for the EOF
 * that says the head is gone. */
static void read_env_stdin(void)
{
    char line[8192];
    size_t fill = 0;
    for (;;) {
        char c;
        ssize_t got = read(STDIN_FILENO, &c, 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            fprintf(stderr, "ddlrun: --env-stdin: stdin ended before the empty line that ends the environment\n");
            exit(1);
        }
        if (c != '\n') {
            if (fill < sizeof line - 1)
                line[fill++] = c;
            continue;
        }
        line[fill] = '\0';
        if (fill == 0)
            return;
        fill = 0;
        char *eq = strchr(line, '=');
        if (!eq || eq == line) {
            fprintf(stderr, "ddlrun: --env-stdin: expected NAME=VALUE, got '%.40s'\n", line);
            exit(1);
        }
        *eq = '\0';
        set_env(line, eq + 1);
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
    setup_token(o); /* before the job id, which comes from it on several nodes */
    if (o->job) {
        set_env("DDL_JOB", o->job);
    } else if (!getenv("DDL_JOB") || !getenv("DDL_JOB")[0]) {
        const char *token = getenv("DDL_TOKEN");
        if (o->nodes > 1 && token && token[0]) /* every node agrees without talking, and only they know it */
            token_job_id(buf, token, o->master);
        else if (o->nodes > 1) /* DDL_INSECURE=1 without a token: anyone may join anyway */
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
}

/* ---- ranks ---- */

typedef struct rank {
    pid_t pid;            /* 0 once reaped */
    int id;               /* global rank */
    int out[2];           /* --tag-output: read ends of its stdout and stderr, -1 when closed */
    int in;               /* a head's agent: the write end of its stdin (-1: none, or closed) */
    const char *host;     /* a head's agent: the host it runs on */
    char buf[2][LINE_BYTES];
    size_t fill[2];
} rank;

static void spawn_rank(const opts *o, rank *r, int local)
{
    int p[2][2] = {{-1, -1}, {-1, -1}};
    int tag = o->tag_output && !o->log_dir;
    for (int k = 0; tag && k < 2; k++)
        if (pipe2(p[k], O_CLOEXEC) != 0) {
            perror("ddlrun: pipe");
            exit(1);
        }
    int log = -1;
    if (o->log_dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/rank.%d.log", o->log_dir, r->id);
        if ((log = outfile_create(path)) < 0) { /* never through a link planted there */
            fprintf(stderr, "ddlrun: --log-dir: cannot create %s: %s\n", path, strerror(errno));
            exit(1);
        }
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
        if (o->bind && bind_rank(local, o->n) != 0)
            fprintf(stderr, "ddlrun: --bind cores: rank %d not bound: %s\n", r->id, strerror(errno));
        int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            signal(sigs[i], SIG_DFL);
        close(sig_pipe[0]);
        close(sig_pipe[1]);
        setpgid(0, 0); /* its own process group: signals reach whatever the rank starts */
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (tag && (dup2(p[0][1], STDOUT_FILENO) < 0 || dup2(p[1][1], STDERR_FILENO) < 0))
            _exit(127);
        if (log >= 0 && (dup2(log, STDOUT_FILENO) < 0 || dup2(log, STDERR_FILENO) < 0))
            _exit(127);
        if (o->env_stdin) { /* stdin is the head's channel: not for the ranks */
            int null = open("/dev/null", O_RDONLY);
            if (null < 0 || dup2(null, STDIN_FILENO) < 0)
                _exit(127);
        }
        execvp(o->argv[0], o->argv);
        int e = errno; /* a bare name is looked up on PATH only, as a shell does: say so, and what is here */
        if (strchr(o->argv[0], '/') || e != ENOENT)
            fprintf(stderr, "ddlrun: cannot run '%s': %s\n", o->argv[0], strerror(e));
        else if (access(o->argv[0], X_OK) == 0)
            fprintf(stderr, "ddlrun: cannot run '%s': not found on PATH; the one in this directory is ./%s\n",
                    o->argv[0], o->argv[0]);
        else
            fprintf(stderr, "ddlrun: cannot run '%s': not found on PATH\n", o->argv[0]);
        _exit(127);
    }
    setpgid(pid, pid); /* also here, so that no signal can race the child's own setpgid */
    sigprocmask(SIG_SETMASK, &old, NULL);
    r->pid = pid;
    if (log >= 0)
        close(log);
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
    int frozen_id, frozen_pid;                /* a rank found stopped (SIGSTOP, a debugger) then (pid 0: none) */
    long long decide_at;                      /* ms: the failure named is final, stop the others (0: none due) */
    int got_signal;                           /* a signal we forwarded */
    long long kill_at;                        /* ms: SIGKILL whoever still runs (0: not armed) */
    int head;                                 /* the "ranks" are a head's agents, one per host */
    int watch_stdin;                          /* --env-stdin: EOF on stdin means the head is gone */
    int head_gone;                            /* it is: the ranks were stopped */
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
            if (r->in >= 0)
                close(r->in), r->in = -1;
            int bad = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
            if (!bad || u->got_signal || u->head_gone)
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

/* find_frozen: a rank still alive but stopped (state T or t in /proc/PID/stat) is most likely what
 * the others gave up on (their heartbeats name it): remember it for the report. */
static void find_frozen(run *u)
{
    for (int i = 0; i < u->n && !u->frozen_pid; i++) {
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)u->ranks[i].pid);
        FILE *f = u->ranks[i].pid > 0 ? fopen(path, "r") : NULL;
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        const char *p = strrchr(buf, ')');
        if (p && p[1] == ' ' && (p[2] == 'T' || p[2] == 't')) {
            u->frozen_id = u->ranks[i].id;
            u->frozen_pid = (int)u->ranks[i].pid;
        }
    }
}

/* decide: the grace after the first failure is over: stop the others. */
static void decide(run *u, long long now)
{
    if (!u->decide_at || now < u->decide_at)
        return;
    u->decide_at = 0;
    if (u->alive > 0 && u->head) { /* close their stdin: each node stops its ranks, then exits */
        for (int i = 0; i < u->n; i++)
            if (u->ranks[i].in >= 0)
                close(u->ranks[i].in), u->ranks[i].in = -1;
        u->kill_at = now + 2 * KILL_AFTER_FAILURE_MS + 1000;
    } else if (u->alive > 0) {
        find_frozen(u);
        signal_all(u, SIGTERM);
        signal_all(u, SIGCONT); /* a stopped rank takes its SIGTERM now */
        u->kill_at = now + KILL_AFTER_FAILURE_MS;
    }
}

/* check_head: --env-stdin: stdin readable means EOF (the head writes nothing more), or an error:
 * either way the head, or the ssh channel to it, is gone: stop the ranks. */
static void check_head(run *u)
{
    char c;
    ssize_t got = read(STDIN_FILENO, &c, 1);
    if (got < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (got > 0)
        return; /* not expected: ignore it */
    u->watch_stdin = 0;
    u->head_gone = 1;
    signal_all(u, SIGTERM);
    if (!u->kill_at)
        u->kill_at = now_ms() + KILL_AFTER_FAILURE_MS;
}

static void handle_signals(run *u)
{
    unsigned char b[64];
    ssize_t n = read(sig_pipe[0], b, sizeof b);
    for (ssize_t i = 0; i < n; i++) {
        if (b[i] == SIGCHLD)
            continue;
        if (b[i] == SIGUSR1) { /* a preemption notice (Slurm): the ranks save and exit on their own */
            signal_all(u, SIGUSR1);
            continue;
        }
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
        pf[n++] = (struct pollfd){.fd = u->watch_stdin ? STDIN_FILENO : -1, .events = POLLIN};
        for (int i = 0; tag && i < u->n; i++)
            for (int k = 0; k < 2; k++)
                if (u->ranks[i].out[k] >= 0) {
                    pf[n] = (struct pollfd){.fd = u->ranks[i].out[k], .events = POLLIN};
                    who[n++] = 2 * i + k;
                }
        if (u->alive == 0) {
            if (!drain_until)
                drain_until = now + DRAIN_MS;
            if (n == 2 || now >= drain_until) /* a grandchild may hold a pipe open: do not wait for it */
                break;
        }
        if (poll(pf, (nfds_t)n, 100) < 0 && errno != EINTR) {
            perror("ddlrun: poll");
            signal_all(u, SIGKILL);
            break;
        }
        if (pf[0].revents)
            handle_signals(u);
        if (pf[1].revents)
            check_head(u);
        for (int j = 2; j < n; j++)
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
    if (u->head_gone) /* quietly: the head, if it lives, speaks for the job */
        return 1;
    if (!u->failed_pid)
        return 0;
    int st = u->failed_status;
    if (u->head) { /* a node's ddlrun names its failed rank itself; an agent that failed is named here */
        const rank *r = NULL;
        for (int i = 0; i < u->n; i++)
            if (u->ranks[i].id == u->failed_id)
                r = &u->ranks[i];
        const char *tail = u->others_stopped ? "; stopped the other hosts" : "";
        if (WIFSIGNALED(st))
            fprintf(stderr, "ddlrun: host %s (node %d): its agent was killed by signal %d (%s)%s\n", r->host,
                    u->failed_id, WTERMSIG(st), strsignal(WTERMSIG(st)), tail);
        else if (WEXITSTATUS(st) >= 126)
            fprintf(stderr, "ddlrun: host %s (node %d): its agent exited with code %d (could it reach the host "
                            "and run ddlrun there?)%s\n",
                    r->host, u->failed_id, WEXITSTATUS(st), tail);
        return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
    }
    const char *tail = u->others_stopped ? "; stopped the other ranks" : "";
    if (u->frozen_pid)
        fprintf(stderr, "ddlrun: rank %d (pid %d) was stopped (SIGSTOP or a debugger), not running, when the others "
                        "gave up\n", u->frozen_id, u->frozen_pid);
    if (WIFSIGNALED(st)) {
        fprintf(stderr, "ddlrun: rank %d (pid %d) was killed by signal %d (%s)%s\n", u->failed_id, u->failed_pid,
                WTERMSIG(st), strsignal(WTERMSIG(st)), tail);
        return 128 + WTERMSIG(st);
    }
    fprintf(stderr, "ddlrun: rank %d (pid %d) exited with code %d%s%s\n", u->failed_id, u->failed_pid,
            WEXITSTATUS(st), WEXITSTATUS(st) == PREEMPTED_EXIT ? " (preempted: its checkpoint is saved; run the job "
                                                                 "again with --resume)" : "", tail);
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
    if (u->head)
        fprintf(stderr, "ddlrun: node %d (host %s) %s; restarting all %d hosts (restart %d of %d)\n", u->failed_id,
                u->ranks[u->failed_id].host, why, u->n, k, max);
    else
        fprintf(stderr, "ddlrun: rank %d (pid %d) %s; restarting all %d ranks (restart %d of %d)\n", u->failed_id,
                u->failed_pid, why, u->n, k, max);
}

/* ---- a cluster: the head starts one ddlrun per host through an agent ---- */

/* quote: s as one shell word, appended to out ('...' with ' as '\''). */
static void quote(char *out, size_t cap, const char *s)
{
    size_t n = strlen(out);
    if (n + 1 < cap)
        out[n++] = '\'';
    for (; *s && n + 5 < cap; s++) {
        if (*s == '\'')
            memcpy(out + n, "'\\''", 4), n += 4;
        else
            out[n++] = *s;
    }
    if (n + 1 < cap)
        out[n++] = '\'';
    out[n < cap ? n : cap - 1] = '\0';
}

static void append(char *out, size_t cap, const char *s) { snprintf(out + strlen(out), cap - strlen(out), "%s", s); }

/* node_command: the shell command that runs this job's ddlrun for node i of k, with per ranks. */
static void node_command(const opts *o, char *cmd, size_t cap, int i, int k, int per)
{
    char self[4096], cwd[4096], buf[160];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0 || !getcwd(cwd, sizeof cwd)) {
        perror("ddlrun: cannot find its own path or the current directory");
        exit(1);
    }
    self[len] = '\0';
    cmd[0] = '\0';
    append(cmd, cap, "cd ");
    quote(cmd, cap, cwd);
    append(cmd, cap, " 2>/dev/null; exec ");
    quote(cmd, cap, self);
    snprintf(buf, sizeof buf, " -n %d --nodes %d --node-rank %d --env-stdin --master ", per, k, i);
    append(cmd, cap, buf);
    quote(cmd, cap, getenv("DDL_MASTER"));
    append(cmd, cap, " --job ");
    quote(cmd, cap, getenv("DDL_JOB"));
    if (o->transport)
        append(cmd, cap, " -t "), append(cmd, cap, o->transport);
    if (o->timeout_s > 0)
        snprintf(buf, sizeof buf, " --timeout %g", o->timeout_s), append(cmd, cap, buf);
    if (o->tag_output)
        append(cmd, cap, " --tag-output");
    if (o->bind)
        append(cmd, cap, " --bind cores");
    if (o->log_dir)
        append(cmd, cap, " --log-dir "), quote(cmd, cap, o->log_dir);
    append(cmd, cap, " --");
    for (char **a = o->argv; *a; a++)
        append(cmd, cap, " "), quote(cmd, cap, *a);
    if (strlen(cmd) + 1 >= cap) {
        fprintf(stderr, "ddlrun: the command for the hosts is too long\n");
        exit(2);
    }
}

/* env_lines: what goes to each node on its stdin: the token, the restart and the -x variables. */
static void env_lines(const opts *o, char *out, size_t cap)
{
    const char *names[2 + MAX_XVARS] = {"DDL_TOKEN", "DDL_RESTART"};
    int n = 2;
    for (int i = 0; i < o->nx; i++)
        names[n++] = o->xvars[i];
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(names[i], "="), names[i]);
        const char *v = getenv(name);
        if (!v)
            continue;
        if (strchr(v, '\n')) {
            fprintf(stderr, "ddlrun: -x %s: its value has a newline; cannot pass it\n", name);
            exit(2);
        }
        snprintf(out + strlen(out), cap - strlen(out), "%s=%s\n", name, v);
    }
    append(out, cap, "\n");
    if (strlen(out) + 1 >= cap) {
        fprintf(stderr, "ddlrun: the -x variables are too long\n");
        exit(2);
    }
}

/* spawn_agent: AGENT HOST COMMAND (or sh -c COMMAND on localhost) with the env lines on its stdin,
 * which stays open: closing it, or dying, tells the node to stop. */
static void spawn_agent(const opts *o, rank *r, const char *cmd, const char *env)
{
    int in[2];
    if (pipe2(in, O_CLOEXEC) != 0) {
        perror("ddlrun: pipe");
        exit(1);
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        perror("ddlrun: fork");
        exit(1);
    }
    if (pid == 0) {
        int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            signal(sigs[i], SIG_DFL);
        setpgid(0, 0);
        if (dup2(in[0], STDIN_FILENO) < 0)
            _exit(127);
        char agent[1024];
        snprintf(agent, sizeof agent, "%s \"$@\"", o->agent ? o->agent : DEFAULT_AGENT);
        if (!strcmp(r->host, "localhost"))
            execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        else
            execl("/bin/sh", "sh", "-c", agent, "sh", r->host, cmd, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    close(in[0]);
    r->pid = pid;
    r->in = in[1];
    size_t len = strlen(env);
    if (write(r->in, env, len) != (ssize_t)len) /* a pipe takes this much at once; a dead agent: reaped */
        fprintf(stderr, "ddlrun: host %s: cannot pass the environment: %s\n", r->host, strerror(errno));
}

/* head_main: -H or --hostfile: one node per host used, the same number of ranks on each. */
static int head_main(opts *o)
{
    if (o->hosts)
        n_hosts = hostlist_parse(o->hosts, hosts, MAX_RANKS);
    else
        n_hosts = hostlist_read(o->hostfile, hosts, MAX_RANKS);
    int slots = 0;
    for (int i = 0; i < n_hosts; i++)
        slots += hosts[i].slots;
    int total = o->np ? o->np : slots;
    if (total > slots) {
        fprintf(stderr, "ddlrun: -np %d: the hosts have only %d slots\n", total, slots);
        exit(2);
    }
    int k = 0, per = 0;
    for (int left = total; left > 0; k++) { /* fill the hosts in order */
        int here = hosts[k].slots < left ? hosts[k].slots : left;
        if (k > 0 && here != per) {
            fprintf(stderr, "ddlrun: %d ranks on %s but %d on %s: every host used needs the same number (for "
                            "now)\n", per, hosts[0].name, here, hosts[k].name);
            exit(2);
        }
        per = here;
        left -= here;
    }
    static char master[400];
    char buf[128];
    if (!o->master) { /* kept for restarts too */
        snprintf(master, sizeof master, "%s:%d", hosts[0].name, DEFAULT_PORT);
        o->master = master;
    }
    set_env("DDL_MASTER", o->master);
    if (o->job)
        set_env("DDL_JOB", o->job);
    else if (!getenv("DDL_JOB") || !getenv("DDL_JOB")[0]) {
        random_hex(buf, 8);
        set_env("DDL_JOB", buf);
    }
    setup_token(o); /* o->nodes is 1 here: without one, a random token */
    set_xvars(o);
    install_handlers("ddlrun");
    char base_job[128];
    snprintf(base_job, sizeof base_job, "%s", getenv("DDL_JOB"));
    static rank agents[HOSTLIST_MAX];
    static char cmd[65536], env[65536];
    for (int r = 0;; r++) {
        if (r > 0)
            restart_env(o, base_job, r);
        env_lines(o, env, sizeof env);
        run u = {.ranks = agents, .n = k, .head = 1};
        for (int i = 0; i < k; i++) {
            memset(&agents[i], 0, sizeof agents[i]);
            agents[i].id = i;
            agents[i].out[0] = agents[i].out[1] = -1;
            agents[i].host = hosts[i].name;
            node_command(o, cmd, sizeof cmd, i, k, per);
            spawn_agent(o, &agents[i], cmd, env);
            u.alive++;
        }
        supervise(&u, 0);
        for (int i = 0; i < k; i++)
            if (agents[i].in >= 0)
                close(agents[i].in);
        if (!u.failed_pid || u.got_signal || r >= o->restarts)
            return report(&u);
        say_restart(&u, r + 1, o->restarts);
    }
}

int main(int argc, char **argv)
{
    opts o;
    parse_args(argc, argv, &o);
    if (o.hosts || o.hostfile)
        return head_main(&o);
    if (o.env_stdin)
        read_env_stdin();
    set_xvars(&o);
    setup_env(&o);
    raise_open_files();
    char why[4200];
    if (o.log_dir && outdir_make(o.log_dir, why, sizeof why) != 0)
        return fprintf(stderr, "ddlrun: --log-dir: %s\n", why), 1;
    install_handlers("ddlrun");
    catch_usr1(); /* forwarded to the ranks as it is (handle_signals), not fatal to us */
    char base_job[128];
    snprintf(base_job, sizeof base_job, "%s", getenv("DDL_JOB"));
    if (o.bind && bind_cpus() < o.n) {
        fprintf(stderr, "ddlrun: --bind cores: %d ranks on %d CPUs: not bound\n", o.n, bind_cpus());
        o.bind = 0;
    }
    static rank ranks[MAX_RANKS];
    for (int k = 0;; k++) {
        if (k > 0)
            restart_env(&o, base_job, k);
        run u = {.ranks = ranks, .n = o.n, .watch_stdin = o.env_stdin};
        for (int i = 0; i < o.n; i++) {
            memset(&ranks[i], 0, sizeof ranks[i]);
            ranks[i].id = o.node_rank * o.n + i;
            ranks[i].out[0] = ranks[i].out[1] = ranks[i].in = -1;
            spawn_rank(&o, &ranks[i], i);
            u.alive++;
        }
        supervise(&u, o.tag_output && !o.log_dir);
        if (!u.failed_pid || u.got_signal || k >= o.restarts)
            return report(&u);
        say_restart(&u, k + 1, o.restarts);
    }
}
