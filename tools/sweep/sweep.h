/* sweep.h - what the files of ddl-sweep share: hyperparameter search over a training program's
 * flags: a grid, seeded random draws, or a SageMaker-shaped --space file; every trial a ddlrun
 * job with its own directory, up to S at once on local slots or on hosts; DIR/results.csv
 * appended and synced as each trial ends, --resume skips what it holds.
 * A program, not library code: it may exit(). Exit status 0 when every trial has a result, 1 when
 * some failed, 2 for a bad command line (or --space file), 128+N after signal N.
 *   main.c     the command line, slots, scheduling (retries, blacklisting, ASHA), signals, the
 *              report; the only file that includes tools/cli.h's messages (sweep_die and the like)
 *   space.c    the search space (--grid, --range, --space with jansson) and every trial's values
 *   results.c  results.csv: its columns, appending a row, reading it back; the final table
 *   trial.c    one trial on one slot: its command line, starting it, reading its output */
#ifndef DDL_SWEEP_H
#define DDL_SWEEP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define SWEEP_MAX_PARAMS 32
#define SWEEP_MAX_VALUES 256
#define SWEEP_VALUE_BYTES 64
#define SWEEP_MAX_TRIALS 100000
#define SWEEP_MAX_ARGS 512
#define SWEEP_PORT_BASE 29500 /* a host slot's master port: this plus 16 x the slot */

/* ---- the search space (space.c) ---- */

enum { SWEEP_CATEGORICAL, SWEEP_CONTINUOUS, SWEEP_INTEGER };
enum { SWEEP_LINEAR, SWEEP_LOG, SWEEP_REVERSE_LOG };

typedef struct sweep_param {
    char name[SWEEP_VALUE_BYTES];
    int kind, scale, n_values;
    char values[SWEEP_MAX_VALUES][SWEEP_VALUE_BYTES]; /* categorical */
    double lo, hi;                                    /* continuous and integer, inclusive */
} sweep_param;

typedef struct sweep_space {
    int n;
    sweep_param p[SWEEP_MAX_PARAMS];
    int random;     /* Strategy Random (from the file); --random N sets it too */
    long n_random;  /* MaxNumberOfTrainingJobs */
    char metric[SWEEP_VALUE_BYTES]; /* HyperParameterTuningJobObjective, if the file has one */
    int minimize;   /* 1 Minimize, 0 Maximize, -1 not said */
} sweep_space;

void space_add_grid(sweep_space *s, const char *arg);
void space_add_range(sweep_space *s, const char *arg);
void space_load(sweep_space *s, const char *path);
char (*space_trials(const sweep_space *s, long n_random, uint64_t seed, long *n_out))[SWEEP_VALUE_BYTES];

/* ---- trials and results.csv (results.c) ---- */

/* a trial's state; the last five are final and go into results.csv */
enum { TRIAL_PENDING, TRIAL_RUNNING, TRIAL_OK, TRIAL_STOPPED, TRIAL_FAILED, TRIAL_USAGE, TRIAL_NO_METRIC };

typedef struct sweep_trial {
    long id;
    int diverged;                      /* TRIAL_OK or TRIAL_STOPPED, but at chance or NaN */
    char (*values)[SWEEP_VALUE_BYTES]; /* one per parameter */
    int state, exit_code;              /* exit_code as a shell gives it: 128+N when killed by signal N */
    int has_metric, epochs, attempts, avoid_slot, resumed;
    double metric, wall_s;
    char slot[SWEEP_VALUE_BYTES];      /* where it last ran */
} sweep_trial;

void results_metric_col(const char *metric, char *out, size_t cap);
void results_param_col(const sweep_space *s, int i, const char *metric, char *out, size_t cap);
void results_header(const sweep_space *s, const char *metric, char *out, size_t cap);
const char *results_status(const sweep_trial *t);
void results_row(const sweep_space *s, const sweep_trial *t, char *out, size_t cap);
int results_append(const char *path, const char *header, const char *row, char *why, size_t why_bytes);
long results_load(const char *path, const char *header, const sweep_space *s, sweep_trial *trials, long n);
const sweep_trial *results_table(const sweep_space *s, sweep_trial *trials, long n, const char *metric,
                                 int minimize);

/* ---- one trial on one slot (trial.c) ---- */

typedef struct sweep_opts {
    long n_random, run_index;
    unsigned long long seed;
    int slots, ranks, retries, blacklist_after, minimize, resume, list, bare, eta, min_epochs;
    int classes;                     /* --classes: what chance accuracy is, unless a trial says */
    double timeout_s;
    const char *metric, *out, *hosts, *agent, *ddlrun, *space_file;
    char **argv; /* PROGRAM ARGS... */
} sweep_opts;

enum { STOP_NONE, STOP_ASHA, STOP_TIMEOUT, STOP_SIGNAL };

typedef struct sweep_slot {
    char name[SWEEP_VALUE_BYTES]; /* "0", "1", ... or the host */
    const char *host;             /* --slots-hosts: the host; NULL for a local slot */
    int index, fails, blacklisted;
    long trial;                   /* running here, -1: free */
    pid_t pid;                    /* 0: reaped */
    int out, log, status, stop;   /* pipe from its stdout and stderr; output.log; waitpid's status; why we stopped it */
    double t0;
    long long kill_at;            /* ms: SIGKILL the group (0: not armed) */
    char buf[4096];
    size_t fill;
    char last[256];               /* its last output line, for messages */
    char last_prog[256];          /* its last line not from ddlrun: what the program said */
    int epoch, has_epoch_metric, has_metric;
    double epoch_metric, metric;
    int has_acc, classes, nonfinite; /* its last test_acc; "N classes" it printed; a NaN or inf loss */
    double acc;
} sweep_slot;

long long sweep_now_ms(void);
void trial_dir(const sweep_opts *o, long id, char *out, size_t cap);
void trial_argv(const sweep_opts *o, const sweep_space *s, const sweep_trial *t, const sweep_slot *slot,
                char **av, char *store, size_t cap);
void trial_print(FILE *f, char **av);
int trial_spawn(const sweep_opts *o, const sweep_space *s, sweep_trial *t, sweep_slot *sl);
void trial_signal(sweep_slot *sl, int sig);
int trial_diverged(const sweep_slot *sl, int classes);
int trial_line(sweep_slot *sl, const char *metric, const char *line);
void trial_read(sweep_slot *sl, const char *metric, void (*on_epoch)(sweep_slot *, void *), void *ud);

/* ---- messages (main.c): "ddl-sweep: MESSAGE" on stderr ---- */

/* sweep_die: a bad command line or --space file: the message, "try 'ddl-sweep --help'", exit 2. */
void sweep_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* sweep_fatal: the search cannot go on (no memory, no fork, an unwritable directory): exit 1. */
void sweep_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* sweep_warn: the message alone; the search goes on. */
void sweep_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
