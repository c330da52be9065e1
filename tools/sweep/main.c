/* main.c - ddl-sweep: hyperparameter search over a training program's flags: a grid, seeded
 * random draws, or a SageMaker-shaped --space file (space.c); every trial a ddlrun job with its
 * own directory (trial.c), up to S at once on local slots or on hosts; DIR/results.csv appended
 * and synced as each trial ends, --resume skips what it holds (results.c).
 * This file schedules: slots, retries of crashed trials on another slot, blacklisting of a slot
 * on which F trials in a row failed, ASHA early stopping, signals (Ctrl-C stops every trial:
 * its process group gets SIGTERM, then SIGKILL; ranks die with ddlrun, ddlrun with ddl-sweep).
 *
 *   ddl-sweep --grid lr=0.001,0.01,0.1 --grid batch=32,64 [--random N --range lr=1e-4:1e-1:log]
 *             [--space FILE] --slots S --ranks R --metric test_acc [--minimize] --out DIR
 *             [--retries K] [--blacklist-after F] [--asha ETA] [--resume] -- PROGRAM [ARGS...]
 *   ddl-sweep ... --list              every trial's command line, one a line
 *   ddl-sweep ... --run-index N       trial N alone (a Slurm array task), into the same results.csv
 *
 * A program: it may exit(). Exit status 0 when every trial has a result, 1 when some failed,
 * 2 for a bad command line, 128+N after signal N. */
#include "sweep.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/cli.h"
#include "tools/outfile.h"
#include "tools/sigpipe.h"

#define MAX_SLOTS 256
#define MAX_RUNGS 32
#define KILL_AFTER_MS 5000 /* SIGTERM, then SIGKILL after this long */

#define USAGE                                                                                                  \
    "usage: ddl-sweep [--grid NAME=V1,V2,...]... [--random N --range NAME=LO:HI[:log][:int]...] [--space F]\n" \
    "                 --out DIR [--slots S | --slots-hosts H1,H2,...] [--ranks R] [--metric M] [--minimize]\n"  \
    "                 [--retries K] [--blacklist-after F] [--asha ETA] [--timeout S] [--resume]\n"             \
    "                 [--list | --run-index N] [--] PROGRAM [ARGS...]\n"                                       \
    "Search PROGRAM's flags: every trial runs as 'ddlrun -n R PROGRAM ARGS --NAME VALUE...' with its own\n"  \
    "directory DIR/trial-NNNN (output.log; --logdir and --checkpoint in it unless --bare).\n"              \
    "  --grid NAME=V1,V2,...  values of --NAME; the trials are every combination (repeatable)\n"             \
    "  --range NAME=LO:HI[:log][:int]  draw --NAME from LO..HI (log scale, integers) with --random N\n"      \
    "  --random N        N random trials, seeded by --seed S (default 1): the same trials every time\n"     \
    "  --space FILE      the parameters from JSON as SageMaker's tuning job config: ParameterRanges\n"       \
    "                    (Categorical, Continuous, Integer; ScalingType), Strategy Grid or Random,\n"       \
    "                    ResourceLimits.MaxNumberOfTrainingJobs, HyperParameterTuningJobObjective\n"         \
    "  --out DIR         trial directories and results.csv (one row per finished trial, synced)\n"           \
    "  --slots S         trials at once on this machine (default 1)\n"                                       \
    "  --slots-hosts H1,H2,...  one slot per host: its trials run there (ddlrun -H HOST:R)\n"               \
    "  --ssh-agent CMD   with --slots-hosts: passed to ddlrun\n"                                             \
    "  --ranks R         ranks per trial (default 1)\n"                                                      \
    "  --metric M        from the 'summary:' line's M= (default test_acc; per epoch: 'epoch E/N ... M V')\n" \
    "  --minimize        lower is better (default: higher)\n"                                                \
    "  --classes N       a trial whose test_acc is at most 1/N + 0.02 (chance), or whose loss is NaN or\n"  \
    "                    infinite, is marked diverged (default 10, or the 'N classes' a trial prints)\n"   \
    "  --retries K       run a crashed trial again, on another slot, up to K times (default 1); a usage\n"  \
    "                    error (exit 2) is not retried\n"                                                    \
    "  --blacklist-after F  stop using a slot on which F trials in a row failed (default 3; 0: never)\n"    \
    "  --asha ETA        early stopping (asynchronous successive halving): at epochs m, m*ETA, m*ETA^2...\n" \
    "                    a trial goes on only if in the top 1/ETA of those that reached it\n"               \
    "  --asha-min-epochs m  the first rung (default 1)\n"                                                    \
    "  --timeout S       a trial running longer is killed and counts as failed\n"                            \
    "  --resume          go on with the search in DIR: skip the trials results.csv holds\n"                 \
    "  --list            print every trial's command line, one a line (line N is trial N), and exit\n"      \
    "  --run-index N     run trial N only, here (e.g. N=$SLURM_ARRAY_TASK_ID), into DIR/results.csv\n"      \
    "  --bare            add no --logdir and --checkpoint to the trials\n"                                   \
    "  --ddlrun PATH     the launcher (default: the ddlrun beside ddl-sweep, else from PATH)\n"             \
    "  -h, --help, --version\n"

/* ---- state ---- */

static sweep_opts o = {.run_index = -1, .seed = 1, .slots = 1, .ranks = 1, .retries = 1, .blacklist_after = 3,
                       .min_epochs = 1, .metric = NULL, .classes = 10};
static sweep_space space = {.minimize = -1};
static sweep_trial *trials;
static long n_trials, first_trial, end_trial; /* [first, end): the trials this run is for */
static sweep_slot slots[MAX_SLOTS];
static int n_slots;
static char results_path[4200], header[8192];
static double *rung_vals[MAX_RUNGS]; /* ASHA: the metrics recorded at each rung */
static long rung_n[MAX_RUNGS];
static long asha_stopped;
static int got_signal;

/* ---- messages: "ddl-sweep: MESSAGE" (cli_prog is set here, by cli_start) ---- */

static void sweep_vsay(const char *fmt, va_list ap)
{
    fprintf(stderr, "%s: ", cli_prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void sweep_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sweep_vsay(fmt, ap);
    va_end(ap);
    cli_try();
}

void sweep_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sweep_vsay(fmt, ap);
    va_end(ap);
    exit(1);
}

void sweep_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sweep_vsay(fmt, ap);
    va_end(ap);
}

/* ---- options ---- */

static void parse_args(int argc, char **argv)
{
    enum { GRID = 256, RANGE, SPACE, RANDOM, SEED, SLOTS, HOSTS, AGENT, RANKS, METRIC, MINIMIZE, OUT, RETRIES,
           BLACKLIST, ASHA, ASHA_MIN, TIMEOUT, RESUME, LIST, RUN_INDEX, BARE, DDLRUN, CLASSES };
    static const struct option options[] = {
        {"grid", required_argument, NULL, GRID}, {"range", required_argument, NULL, RANGE},
        {"space", required_argument, NULL, SPACE}, {"random", required_argument, NULL, RANDOM},
        {"seed", required_argument, NULL, SEED}, {"slots", required_argument, NULL, SLOTS},
        {"slots-hosts", required_argument, NULL, HOSTS}, {"ssh-agent", required_argument, NULL, AGENT},
        {"ranks", required_argument, NULL, RANKS}, {"metric", required_argument, NULL, METRIC},
        {"minimize", no_argument, NULL, MINIMIZE}, {"out", required_argument, NULL, OUT},
        {"retries", required_argument, NULL, RETRIES}, {"blacklist-after", required_argument, NULL, BLACKLIST},
        {"asha", required_argument, NULL, ASHA}, {"asha-min-epochs", required_argument, NULL, ASHA_MIN},
        {"timeout", required_argument, NULL, TIMEOUT}, {"resume", no_argument, NULL, RESUME},
        {"list", no_argument, NULL, LIST}, {"run-index", required_argument, NULL, RUN_INDEX},
        {"bare", no_argument, NULL, BARE}, {"ddlrun", required_argument, NULL, DDLRUN},
        {"classes", required_argument, NULL, CLASSES}, CLI_HELP_VERSION,
        {NULL, 0, NULL, 0}};
    int slots_given = 0, minimize = 0;
    const char *grids[SWEEP_MAX_PARAMS], *ranges[SWEEP_MAX_PARAMS];
    int n_grids = 0, n_ranges = 0;
    cli_start(argv, "ddl-sweep");
    for (int c; (c = getopt_long(argc, argv, "+h", options, NULL)) != -1;) {
        switch (c) {
        case GRID:
        case RANGE:
            if ((c == GRID ? n_grids : n_ranges) == SWEEP_MAX_PARAMS)
                sweep_die("more than %d parameters", SWEEP_MAX_PARAMS);
            c == GRID ? (void)(grids[n_grids++] = optarg) : (void)(ranges[n_ranges++] = optarg);
            break;
        case SPACE: o.space_file = optarg; break;
        case RANDOM: o.n_random = cli_long("--random", optarg, 1, SWEEP_MAX_TRIALS); break;
        case SEED: o.seed = (unsigned long long)cli_long("--seed", optarg, 0, 4294967295L); break;
        case SLOTS: o.slots = cli_int("--slots", optarg, 1, MAX_SLOTS), slots_given = 1; break;
        case HOSTS: o.hosts = optarg; break;
        case AGENT: o.agent = optarg; break;
        case RANKS: o.ranks = cli_int("--ranks", optarg, 1, 1024); break;
        case METRIC:
            if (!optarg[0] || strcspn(optarg, " =,\t\n") != strlen(optarg) || strlen(optarg) >= SWEEP_VALUE_BYTES)
                cli_bad("--metric", optarg, "a name as the summary line has it (test_acc, test_loss, ...)");
            o.metric = optarg;
            break;
        case MINIMIZE: minimize = 1; break;
        case OUT: o.out = optarg; break;
        case RETRIES: o.retries = cli_int("--retries", optarg, 0, 1000); break;
        case BLACKLIST: o.blacklist_after = cli_int("--blacklist-after", optarg, 0, 1000000); break;
        case ASHA: o.eta = cli_int("--asha", optarg, 2, 100); break;
        case ASHA_MIN: o.min_epochs = cli_int("--asha-min-epochs", optarg, 1, 100000); break;
        case TIMEOUT: o.timeout_s = cli_float("--timeout", optarg, 0.001, 1e9); break;
        case RESUME: o.resume = 1; break;
        case LIST: o.list = 1; break;
        case RUN_INDEX: o.run_index = cli_long("--run-index", optarg, 0, SWEEP_MAX_TRIALS - 1); break;
        case BARE: o.bare = 1; break;
        case DDLRUN: o.ddlrun = optarg; break;
        case CLASSES: o.classes = cli_int("--classes", optarg, 2, 1000000); break;
        case 'h': cli_help(USAGE); break;
        case 'V': cli_version(); break;
        default: cli_try(); /* getopt_long named the flag */
        }
    }
    if (optind >= argc)
        cli_error("no PROGRAM to run (ddl-sweep [flags] -- PROGRAM [ARGS...])");
    o.argv = argv + optind;
    if (!o.out)
        cli_error("--out DIR is required (the trials' directories and results.csv)");
    if (o.hosts && slots_given)
        cli_error("give --slots S or --slots-hosts H1,H2,..., not both");
    if (o.agent && !o.hosts)
        cli_error("--ssh-agent goes with --slots-hosts");
    if (o.list && o.run_index >= 0)
        cli_error("give --list or --run-index N, not both");
    if (o.eta && o.run_index >= 0)
        cli_error("--asha compares trials as they run: not with --run-index (one trial alone)");
    for (int i = 0; i < n_grids; i++)
        space_add_grid(&space, grids[i]);
    for (int i = 0; i < n_ranges; i++)
        space_add_range(&space, ranges[i]);
    if (o.space_file)
        space_load(&space, o.space_file);
    if (space.n == 0)
        cli_error("nothing to search: give --grid NAME=V1,V2,..., --range with --random N, or --space FILE");
    if (!o.n_random && space.random)
        o.n_random = space.n_random ? space.n_random : 0;
    if (space.random && !o.n_random)
        sweep_die("--space %s: Strategy Random needs ResourceLimits.MaxNumberOfTrainingJobs, or --random N",
                  o.space_file);
    if (!o.metric)
        o.metric = space.metric[0] ? space.metric : "test_acc";
    o.minimize = minimize || space.minimize == 1;
    for (char **a = o.argv + 1; *a; a++) /* PROGRAM's own arguments must not set what the search sets */
        for (int i = 0; i < space.n; i++) {
            const char *n = space.p[i].name, *w = *a + (strncmp(*a, "--", 2) ? 0 : 2);
            if (n[0] != '-' && !strncmp(w, n, strlen(n)) && w != *a && (!w[strlen(n)] || w[strlen(n)] == '='))
                sweep_die("PROGRAM's arguments set %s, which the search sets too: take it out of them", *a);
        }
}

/* setup_slots: S local slots "0".."S-1", or one per host of --slots-hosts. */
static void setup_slots(void)
{
    if (o.hosts) {
        static char list[8192];
        snprintf(list, sizeof list, "%s", o.hosts);
        for (char *h = list, *save = NULL; (h = strtok_r(h, ",", &save)); h = NULL) {
            if (n_slots == MAX_SLOTS || strlen(h) >= SWEEP_VALUE_BYTES || strchr(h, ':'))
                cli_bad("--slots-hosts", o.hosts, "host names (no :SLOTS), at most 256");
            slots[n_slots].host = h;
            snprintf(slots[n_slots++].name, SWEEP_VALUE_BYTES, "%s", h);
        }
        if (n_slots == 0)
            cli_bad("--slots-hosts", o.hosts, "host names");
    } else {
        n_slots = o.run_index >= 0 ? 1 : o.slots;
        for (int i = 0; i < n_slots; i++)
            snprintf(slots[i].name, SWEEP_VALUE_BYTES, "%d", i);
        if (o.run_index >= 0 && gethostname(slots[0].name, SWEEP_VALUE_BYTES - 1) != 0)
            strcpy(slots[0].name, "local");
    }
    for (int i = 0; i < n_slots; i++)
        slots[i].index = i, slots[i].trial = -1, slots[i].out = slots[i].log = -1;
}

/* find_ddlrun: --ddlrun, else the ddlrun beside this program, else "ddlrun" from PATH. */
static void find_ddlrun(void)
{
    static char path[4096];
    if (o.ddlrun)
        return;
    ssize_t len = readlink("/proc/self/exe", path, sizeof path - 16);
    char *slash = len > 0 ? (path[len] = '\0', strrchr(path, '/')) : NULL;
    if (slash)
        strcpy(slash + 1, "ddlrun");
    o.ddlrun = slash && access(path, X_OK) == 0 ? path : "ddlrun";
}

/* make_out: DIR and its parents; DIR must be ours and closed to other users (outfile.h), since
 * results.csv and the trials' directories are written in it. */
static void make_out(void)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", o.out);
    for (char *s = p + 1;; s++) {
        if (*s == '/' || !*s) {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST)
                sweep_fatal("--out %s: cannot create %s: %s", o.out, p, strerror(errno));
            if (!(*s = c))
                break;
        }
    }
    char why[8400];
    if (outdir_check(o.out, why, sizeof why) != 0)
        sweep_fatal("--out: %s", why);
}

/* ---- progress ---- */

static void say(const char *fmt, ...)
{
    long done = 0, running = 0, failed = 0, total = 0;
    for (long i = first_trial; i < end_trial; i++, total++) {
        int st = trials[i].state;
        done += st == TRIAL_OK || st == TRIAL_STOPPED;
        running += st == TRIAL_RUNNING;
        failed += st >= TRIAL_FAILED;
    }
    printf("ddl-sweep: [%ld/%ld done, %ld running, %ld failed] ", done, total, running, failed);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

/* values: "lr=0.01 batch=32" of trial t. */
static const char *values(const sweep_trial *t)
{
    static char buf[4096];
    buf[0] = '\0';
    for (int i = 0; i < space.n; i++)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s=%s", i ? " " : "", space.p[i].name, t->values[i]);
    return buf;
}

/* ---- ASHA: asynchronous successive halving, as Ray Tune's scheduler stops trials ---- */

/* asha_rung: the rung at epoch e (m, m*eta, m*eta^2, ...), or -1. */
static int asha_rung(int e)
{
    long r = o.min_epochs;
    for (int k = 0; k < MAX_RUNGS; k++, r *= o.eta)
        if (r == e)
            return k;
        else if (r > e)
            break;
    return -1;
}

/* asha_record: the metric v reached at rung k; returns 1 if it is outside the top 1/eta (rounded
 * up) of what reached that rung so far, itself included: the trial stops there. */
static int asha_record(int k, double v)
{
    if (!rung_vals[k] && !(rung_vals[k] = malloc(sizeof(double) * (size_t)n_trials)))
        sweep_fatal("out of memory");
    rung_vals[k][rung_n[k]++] = v;
    long better = 0, keep = (rung_n[k] + o.eta - 1) / o.eta;
    for (long i = 0; i < rung_n[k]; i++)
        better += o.minimize ? rung_vals[k][i] < v : rung_vals[k][i] > v;
    return better >= keep;
}

/* on_epoch: a running trial reported its metric at the end of an epoch. */
static void on_epoch(sweep_slot *sl, void *ud)
{
    (void)ud;
    int k = o.eta ? asha_rung(sl->epoch) : -1;
    if (k < 0 || sl->stop || !asha_record(k, sl->epoch_metric))
        return;
    sl->stop = STOP_ASHA;
    trial_signal(sl, SIGTERM);
    sl->kill_at = sweep_now_ms() + KILL_AFTER_MS;
}

/* asha_replay: --resume: the rungs as the earlier trials reached them, from their output.log. */
static void asha_replay(const sweep_trial *t)
{
    char path[4200];
    trial_dir(&o, t->id, path, sizeof path);
    strcat(path, "/output.log");
    FILE *f = fopen(path, "r");
    static sweep_slot sl;
    char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!strncmp(line, "==== ddl-sweep:", 15))
            sl.epoch = 0; /* an attempt begins */
        int k = trial_line(&sl, o.metric, line) ? asha_rung(sl.epoch) : -1;
        if (k >= 0)
            asha_record(k, sl.epoch_metric);
    }
    if (f)
        fclose(f);
}

/* ---- scheduling ---- */

static int usable_slots(void)
{
    int n = 0;
    for (int i = 0; i < n_slots; i++)
        n += !slots[i].blacklisted;
    return n;
}

/* schedule: a pending trial on every free slot; a retried trial not on the slot it failed on
 * while another slot is still in use. */
static void schedule(void)
{
    for (int s = 0; s < n_slots; s++) {
        sweep_slot *sl = &slots[s];
        if (sl->blacklisted || sl->trial >= 0)
            continue;
        for (long i = first_trial; i < end_trial; i++) {
            sweep_trial *t = &trials[i];
            if (t->state != TRIAL_PENDING || (t->avoid_slot == s && usable_slots() > 1))
                continue;
            if (trial_spawn(&o, &space, t, sl) != 0)
                sweep_fatal("cannot start trial %ld", t->id);
            say("trial %ld started on slot %s%s: %s", t->id, sl->name, t->attempts ? " (retry)" : "", values(t));
            break;
        }
    }
}

/* record: trial t has its final state: into results.csv now. */
static void record(sweep_trial *t)
{
    char row[8192], why[4400];
    results_row(&space, t, row, sizeof row);
    if (results_append(results_path, header, row, why, sizeof why) != 0)
        fprintf(stderr, "ddl-sweep: cannot append trial %ld: %s\n", t->id, why);
}

/* failed: trial t crashed on slot sl (why): retried elsewhere, or failed for good; the slot
 * may be blacklisted. */
static void failed(sweep_trial *t, sweep_slot *sl, const char *why)
{
    t->attempts++;
    if (t->attempts <= o.retries) {
        t->state = TRIAL_PENDING;
        t->avoid_slot = sl->index;
        say("trial %ld %s on slot %s: %s; retrying (%d of %d)", t->id, why, sl->name, sl->last, t->attempts,
            o.retries);
    } else {
        t->state = TRIAL_FAILED;
        record(t);
        say("trial %ld %s on slot %s: %s; failed after %d attempt%s", t->id, why, sl->name, sl->last, t->attempts,
            t->attempts == 1 ? "" : "s");
    }
    if (o.blacklist_after && ++sl->fails >= o.blacklist_after) {
        sl->blacklisted = 1;
        int left = usable_slots();
        printf("ddl-sweep: slot %s blacklisted: %d trial%s in a row failed on it; %s %d slot%s\n", sl->name, sl->fails,
               sl->fails == 1 ? "" : "s", left ? "going on with" : "no slot left of", left ? left : n_slots,
               (left ? left : n_slots) == 1 ? "" : "s");
        fflush(stdout);
    }
}

/* finish: the trial on slot sl has exited and its output is read. */
static void finish(sweep_slot *sl)
{
    sweep_trial *t = &trials[sl->trial];
    int st = sl->status;
    char why[128];
    t->exit_code = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
    t->wall_s = (double)sweep_now_ms() / 1000.0 - sl->t0;
    t->epochs = sl->epoch;
    t->has_metric = sl->has_metric;
    t->metric = sl->metric;
    close(sl->log);
    sl->log = -1;
    sl->trial = -1;
    static int warned;
    if (o.eta && !sl->has_epoch_metric && sl->epoch > o.min_epochs && !warned++)
        say("warning: trial %ld printed no 'epoch E/N ... %s V' lines (--quiet?): ASHA cannot stop its trials early",
            t->id, o.metric);
    if (WIFSIGNALED(st))
        snprintf(why, sizeof why, "was killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(why, sizeof why, "exited with code %d", WEXITSTATUS(st));
    if (sl->stop == STOP_SIGNAL) { /* not a result: --resume runs it again */
        t->state = TRIAL_PENDING;
    } else if (sl->stop == STOP_ASHA) {
        t->state = TRIAL_STOPPED;
        t->diverged = trial_diverged(sl, o.classes);
        t->has_metric = 1;
        t->metric = sl->epoch_metric;
        t->attempts++;
        sl->fails = 0;
        record(t);
        say("trial %ld stopped by ASHA after epoch %d: %s %.4f (%s)", t->id, t->epochs, o.metric, t->metric,
            values(t));
    } else if (sl->stop == STOP_TIMEOUT) {
        failed(t, sl, "timed out");
    } else if (!WIFSIGNALED(st) && WEXITSTATUS(st) == 0) {
        t->attempts++;
        sl->fails = 0;
        t->state = sl->has_metric ? TRIAL_OK : TRIAL_NO_METRIC;
        t->diverged = sl->has_metric && trial_diverged(sl, o.classes);
        record(t);
        if (sl->has_metric)
            say("trial %ld done: %s=%.4f in %.1f s on slot %s (%s)%s", t->id, o.metric, t->metric, t->wall_s, sl->name,
                values(t), t->diverged ? ": diverged (test accuracy at chance, or a loss NaN or infinite)" : "");
        else
            say("trial %ld exited 0 but printed no 'summary:' line with %s=: not retried", t->id, o.metric);
    } else if (!WIFSIGNALED(st) && WEXITSTATUS(st) == 2) { /* a usage error: the same every time */
        t->attempts++;
        t->state = TRIAL_USAGE;
        record(t);
        say("trial %ld: usage error (exit 2), not retried: %s", t->id, sl->last_prog);
    } else {
        failed(t, sl, why);
    }
}

/* ---- signals and the loop ---- */

/* handle_signals: SIGINT, SIGTERM, SIGHUP: stop every trial (SIGTERM, SIGKILL after
 * KILL_AFTER_MS; a second signal: SIGKILL now); no new trial starts. */
static void handle_signals(void)
{
    unsigned char b[64];
    ssize_t n = read(sig_pipe[0], b, sizeof b);
    for (ssize_t i = 0; i < n; i++) {
        if (b[i] == SIGCHLD)
            continue;
        int again = got_signal != 0;
        got_signal = b[i];
        for (int s = 0; s < n_slots; s++) {
            if (slots[s].pid <= 0)
                continue;
            slots[s].stop = STOP_SIGNAL;
            trial_signal(&slots[s], again ? SIGKILL : SIGTERM);
            slots[s].kill_at = sweep_now_ms() + KILL_AFTER_MS;
        }
    }
}

static void reap(void)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        for (int s = 0; s < n_slots; s++)
            if (slots[s].pid == pid)
                slots[s].pid = 0, slots[s].status = status;
}

/* run: until every trial of [first_trial, end_trial) has a result, no slot is left, or a signal. */
static int run(void)
{
    install_handlers("ddl-sweep");
    for (;;) {
        reap();
        long long now = sweep_now_ms();
        int running = 0, pending = 0;
        for (int s = 0; s < n_slots; s++) {
            sweep_slot *sl = &slots[s];
            if (sl->trial < 0)
                continue;
            if (sl->pid == 0) { /* exited: what is left in the pipe, then the verdict */
                if (sl->out >= 0)
                    trial_read(sl, o.metric, on_epoch, NULL);
                if (sl->out >= 0)
                    close(sl->out), sl->out = -1; /* a grandchild holds it open: do not wait */
                finish(sl);
                continue;
            }
            running++;
            if (o.timeout_s > 0 && !sl->stop && now - (long long)(sl->t0 * 1000) > (long long)(o.timeout_s * 1000)) {
                sl->stop = STOP_TIMEOUT;
                trial_signal(sl, SIGTERM);
                sl->kill_at = now + KILL_AFTER_MS;
            }
            if (sl->kill_at && now >= sl->kill_at)
                trial_signal(sl, SIGKILL), sl->kill_at = 0;
        }
        if (!got_signal)
            schedule();
        running = 0;
        for (int s = 0; s < n_slots; s++)
            running += slots[s].trial >= 0;
        for (long i = first_trial; i < end_trial; i++)
            pending += trials[i].state == TRIAL_PENDING;
        if (running == 0 && (got_signal || pending == 0))
            break;
        if (running == 0 && usable_slots() == 0) {
            fprintf(stderr, "ddl-sweep: every slot is blacklisted; %d trial%s not run (fix the slots, then "
                            "--resume)\n", pending, pending == 1 ? "" : "s");
            return 1;
        }
        struct pollfd pf[1 + MAX_SLOTS];
        int who[1 + MAX_SLOTS], n = 0;
        pf[n++] = (struct pollfd){.fd = sig_pipe[0], .events = POLLIN};
        for (int s = 0; s < n_slots; s++)
            if (slots[s].trial >= 0 && slots[s].out >= 0)
                who[n] = s, pf[n++] = (struct pollfd){.fd = slots[s].out, .events = POLLIN};
        if (poll(pf, (nfds_t)n, 100) < 0 && errno != EINTR)
            sweep_fatal("poll: %s", strerror(errno));
        if (pf[0].revents)
            handle_signals();
        for (int j = 1; j < n; j++)
            if (pf[j].revents)
                trial_read(&slots[who[j]], o.metric, on_epoch, NULL);
    }
    if (got_signal) {
        fprintf(stderr, "ddl-sweep: received signal %d (%s): stopped the running trials; results so far in %s; "
                        "run the same command with --resume to finish\n", got_signal, strsignal(got_signal),
                results_path);
        return 128 + got_signal;
    }
    return 0;
}

/* ---- main ---- */

/* say_renamed: the columns of results.csv not named as their parameter or metric, and why. */
static void say_renamed(void)
{
    char col[SWEEP_VALUE_BYTES + 16];
    for (int i = 0; i < space.n; i++) {
        results_param_col(&space, i, o.metric, col, sizeof col);
        if (strcmp(col, space.p[i].name))
            printf("ddl-sweep: parameter %s is column %s of results.csv (results.csv has a column %s of its own)\n",
                   space.p[i].name, col, space.p[i].name);
    }
    results_metric_col(o.metric, col, sizeof col);
    if (strcmp(col, o.metric))
        printf("ddl-sweep: the metric %s is column %s of results.csv (results.csv has a column %s of its own)\n",
               o.metric, col, o.metric);
}

/* report: the table, the best trial's command line, and for ASHA the trial-epochs it saved. */
static int report(int rc)
{
    if (o.run_index >= 0) {
        const sweep_trial *t = &trials[o.run_index];
        printf("ddl-sweep: trial %ld: %s", t->id, results_status(t));
        if (t->has_metric)
            printf(" %s=%.4f", o.metric, t->metric);
        printf("\n");
        return rc ? rc : t->state == TRIAL_OK ? 0 : 1;
    }
    const sweep_trial *best = results_table(&space, trials, n_trials, o.metric, o.minimize);
    long epochs = 0, failures = 0;
    for (long i = 0; i < n_trials; i++) {
        epochs += trials[i].resumed ? 0 : trials[i].epochs;
        failures += trials[i].state >= TRIAL_FAILED || trials[i].state <= TRIAL_RUNNING;
    }
    if (o.eta)
        printf("ASHA (eta %d, first rung at epoch %d): stopped %ld trial%s\n", o.eta, o.min_epochs, asha_stopped,
               asha_stopped == 1 ? "" : "s");
    printf("trial-epochs run: %ld\n", epochs);
    long n_div = 0;
    for (long i = 0; i < n_trials; i++)
        if (trials[i].diverged)
            printf("%s%ld", n_div++ ? ", " : "diverged (test accuracy at chance, or a loss NaN or infinite): trial ", i);
    if (n_div)
        printf(" (never the best)\n");
    if (best) {
        static char store[65536];
        char *av[SWEEP_MAX_ARGS];
        trial_argv(&o, &space, best, NULL, av, store, sizeof store);
        printf("best: trial %ld, %s=%.4f (%s):\n  ", best->id, o.metric, best->metric, values(best));
        trial_print(stdout, av);
    } else {
        printf("no trial finished with a %s%s\n", o.metric, n_div ? " without diverging" : "");
    }
    return rc ? rc : failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    setup_slots();
    find_ddlrun();
    char(*vals)[SWEEP_VALUE_BYTES] = space_trials(&space, o.n_random, o.seed, &n_trials);
    trials = calloc((size_t)n_trials, sizeof *trials);
    if (!trials)
        sweep_fatal("out of memory for %ld trials", n_trials);
    for (long i = 0; i < n_trials; i++)
        trials[i] = (sweep_trial){.id = i, .values = vals + i * space.n, .avoid_slot = -1};
    if (o.run_index >= n_trials)
        sweep_die("--run-index %ld: the search has %ld trials (0 to %ld)", o.run_index, n_trials, n_trials - 1);
    first_trial = o.run_index >= 0 ? o.run_index : 0;
    end_trial = o.run_index >= 0 ? o.run_index + 1 : n_trials;
    if (o.list) {
        static char store[65536];
        char *av[SWEEP_MAX_ARGS];
        for (long i = 0; i < n_trials; i++)
            trial_argv(&o, &space, &trials[i], NULL, av, store, sizeof store), trial_print(stdout, av);
        return 0;
    }
    make_out();
    snprintf(results_path, sizeof results_path, "%s/results.csv", o.out);
    results_header(&space, o.metric, header, sizeof header);
    say_renamed();
    struct stat st;
    if (lstat(results_path, &st) == 0 && S_ISLNK(st.st_mode))
        sweep_fatal("%s is a symbolic link: not followed (planted by another user?); remove it", results_path);
    int exists = stat(results_path, &st) == 0 && st.st_size > 0;
    if (exists && !o.resume && o.run_index < 0)
        sweep_die("%s exists: give --resume to go on with that search, or another --out", results_path);
    long taken = exists ? results_load(results_path, header, &space, trials, n_trials) : 0;
    char why[4400];
    if (results_append(results_path, header, NULL, why, sizeof why) != 0)
        sweep_fatal("%s", why);
    long todo = 0;
    for (long i = first_trial; i < end_trial; i++)
        todo += trials[i].state == TRIAL_PENDING;
    for (long i = 0; o.eta && i < n_trials; i++)
        if (trials[i].resumed)
            asha_replay(&trials[i]);
    if (taken > 0 && o.run_index < 0)
        printf("ddl-sweep: --resume: %ld trial%s already in %s; %ld to run\n", taken, taken == 1 ? "" : "s",
               results_path, todo);
    if (o.run_index >= 0 && !todo)
        printf("ddl-sweep: trial %ld is already in %s\n", o.run_index, results_path);
    else if (o.run_index < 0)
        printf("ddl-sweep: %ld trials, %d slot%s of %d rank%s each; results in %s\n", n_trials, n_slots,
               n_slots == 1 ? "" : "s", o.ranks, o.ranks == 1 ? "" : "s", results_path);
    int rc = run();
    for (long i = 0; i < n_trials; i++)
        asha_stopped += trials[i].state == TRIAL_STOPPED && !trials[i].resumed;
    rc = report(rc);
    for (int k = 0; k < MAX_RUNGS; k++)
        free(rung_vals[k]);
    free(trials);
    free(vals);
    return rc;
}
