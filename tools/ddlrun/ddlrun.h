/* ddlrun.h - what the files of ddlrun share. ddlrun is the launcher: it starts N local ranks of a
 * program with the DDL_* environment set (as torchrun or mpirun do), forwards signals to them,
 * optionally tags their output lines with the rank or writes one log file per rank, and when one
 * rank fails stops the others and says which rank failed and how; with --restarts R it then starts
 * them all again, up to R times (the program resumes from its own checkpoint: ddlrun knows nothing
 * of checkpoints). Each rank runs in its own process group, so signals also reach the processes it
 * starts, and dies with ddlrun (PR_SET_PDEATHSIG), however ddlrun dies.
 *
 *   ddlrun -n N [-t shm|tcp|zmq|mpi] [--nodes K --node-rank R --master HOST:PORT] [--timeout S]
 *          [--tag-output | --log-dir DIR] [--job ID] [--restarts R] [--bind cores|none] [-x VAR[=VALUE]]...
 *          [--] PROGRAM [ARGS...]
 *   ddlrun [-np TOTAL] -H HOST:SLOTS,... | --hostfile FILE [--ssh-agent CMD] [same flags] PROGRAM [ARGS...]
 *
 * With -H or --hostfile ddlrun is the head of a cluster job: it picks the master (the first host,
 * port 29500, unless --master), a job id and a token, and on each host i runs, through the agent
 * (ssh -o BatchMode=yes -o ConnectTimeout=10, or --ssh-agent CMD; "localhost" directly),
 *   cd CWD; exec DDLRUN -n SLOTS --nodes K --node-rank i --master M --job J ... --env-stdin -- PROGRAM ARGS
 * and writes DDL_TOKEN, DDL_RESTART and the -x variables to the agent's stdin as NAME=VALUE lines
 * ended by an empty line: secrets never go on a command line. The head keeps that stdin open;
 * the node's ddlrun stops its ranks when it reads EOF there (the head died, or its ssh channel
 * closed). The head supervises the agents as ddlrun supervises ranks: the first node that fails
 * stops the others (the head closes their stdin), and --restarts starts all nodes again.
 *
 * ddlrun's flags (getopt_long: --timeout=5 works too; --help, --version) end at PROGRAM: what
 * follows it is passed to PROGRAM unchanged. A bad flag or value exits 2 naming it.
 * It is a program, not library code: it may exit(). Every wait it does is bounded.
 *   main.c       one node: its ranks started, supervised and restarted
 *   options.c    the command line, and the hosts of -H or --hostfile (the only user of cli.h,
 *                whose messages name the program set there)
 *   env.c        the DDL_* environment of the ranks: token, job id, master, -x, --env-stdin, restarts
 *   spawn.c      one local rank: fork, its environment, CPUs and output; tagged output lines
 *   supervise.c  signals, reaping, stopping the others after a failure, the report line
 *   head.c       a cluster: one ddlrun per host through the agent, supervised as ranks are */
#ifndef DDL_DDLRUN_H
#define DDL_DDLRUN_H

#include <stddef.h>
#include <sys/types.h>

#define MAX_RANKS 1024
#define MAX_HOSTS 256              /* hostlist.h's HOSTLIST_MAX */
#define MAX_XVARS 64
#define LINE_BYTES 4096
#define KILL_AFTER_FAILURE_MS 2000 /* SIGTERM, then SIGKILL after this long */
#define FAILURE_GRACE_MS 200       /* after a first failure, a rank killed by a signal may still show up */
#define PREEMPTED_EXIT 75          /* the examples' exit after SIGUSR1: saved, to be resumed */
#define KILL_AFTER_SIGNAL_MS 5000  /* a forwarded signal: SIGKILL whoever still runs after this */
#define DRAIN_MS 500               /* output still in pipes after the last rank exited */
#define DEFAULT_PORT 29500         /* the master's port on a cluster, as torchrun's */
#define DEFAULT_AGENT "ssh -o BatchMode=yes -o ConnectTimeout=10" /* an unreachable host: named in 10 s */

typedef struct opts {
    int n, np, nodes, node_rank, tag_output, restarts, env_stdin, nx, bind;
    int elastic_min, elastic_max; /* --elastic MIN:MAX (0: not elastic) */
    int replacements;             /* --replacements R (-1: not given: 3 per rank) */
    const char *transport, *master, *job, *token_file, *hosts, *hostfile, *agent, *log_dir;
    int log_fd;                   /* --log-dir, open (outfile.h's outdir_open), or -1 */
    const char *xvars[MAX_XVARS]; /* -x VAR[=VALUE] */
    double timeout_s;
    char **argv; /* PROGRAM ARGS... */
    /* -H or --hostfile: the hosts used, in order, `per` ranks on each */
    int n_used, per;
    const char *host[MAX_HOSTS];
} opts;

/* A local rank, or with -H the agent that runs a node's ddlrun on one host. */
typedef struct rank {
    pid_t pid;            /* 0 once reaped */
    int id;               /* global rank */
    int out[2];           /* --tag-output: read ends of its stdout and stderr, -1 when closed */
    int in;               /* a head's agent: the write end of its stdin (-1: none, or closed) */
    const char *host;     /* a head's agent: the host it runs on */
    char buf[2][LINE_BYTES];
    size_t fill[2];
    int join;             /* --elastic: a replacement for a lost rank, started with DDL_JOIN=1 */
    int dropped;          /* --elastic: ddlrun killed it after the job finished (left_behind), saying so:
                           * 1 a replacement too late to join, 2 a rank left stopped (lost) */
} rank;

/* One generation of ranks (or agents), from their start until the last has exited. */
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
    int elastic_min;                          /* --elastic: a rank may end while this many others run */
    int nodes;                                /* --nodes */
    int lost;                                 /* --elastic: ranks that ended badly while the others went on */
    int finished;                             /* --elastic: a rank ended well: the job is done */
    long long finished_at;                    /* when (ms) */
    const struct opts *o;                     /* --elastic on one node: to start replacements */
    int replace_left, replaced;               /* replacements still allowed, and started */
    int late;                                 /* replacements stopped: the job finished before they joined */
} run;

/* options.c */
void parse_args(int argc, char **argv, opts *o);

/* env.c: each exits with a message when the environment cannot be set */
void random_hex(char *out, size_t bytes);
int random_low_port(void); /* in [10000, 30000): below the ephemeral ports */
void set_env(const char *name, const char *value);
void setup_token(const opts *o);
void set_xvars(const opts *o);
void read_env_stdin(void);
void setup_env(const opts *o);
void restart_env(const opts *o, const char *base_job, int k);

/* spawn.c */
void ranks_prepare(opts *o);
void spawn_rank(const opts *o, rank *r, int local);
void pump(rank *r, int k);

/* supervise.c */
void signals_install(int forward_usr1);
void signals_close(void);
void supervise(run *u, int tag);
int report(const run *u);
void say_restart(const run *u, int k, int max);

/* head.c */
int head_main(opts *o);

#endif
