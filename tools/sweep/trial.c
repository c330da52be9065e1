/* trial.c - one trial of ddl-sweep on one slot: its command line (a ddlrun job: -n R on this
 * machine, or -np R -H HOST:R for a host slot, then PROGRAM ARGS --NAME VALUE... and its own
 * --logdir and --checkpoint under DIR/trial-NNNN/), starting it in a process group of its own that
 * dies with ddl-sweep (PR_SET_PDEATHSIG), and reading its output: every byte to
 * DIR/trial-NNNN/output.log, the metric from "epoch E/N ... METRIC VALUE" lines (for ASHA) and
 * from the "summary: ... METRIC=VALUE" line (the trial's result), and whether it diverged (its
 * test_acc at chance, or a loss NaN or infinite). Knows nothing of scheduling. */
#include "sweep.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tools/outfile.h"

long long sweep_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the command line ---- */

/* trial_dir: DIR/trial-NNNN */
void trial_dir(const sweep_opts *o, long id, char *out, size_t cap)
{
    snprintf(out, cap, "%s/trial-%04ld", o->out, id);
}

/* argv_add: one argument, printf-formatted, appended to av (n of them) with its text in store. */
typedef struct argv_buf {
    char **av, *store;
    size_t cap, used;
    int n;
    long trial;
} argv_buf;

static void argv_add(argv_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(b->store + b->used, b->cap - b->used, fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= b->cap - b->used || b->n >= SWEEP_MAX_ARGS - 1)
        sweep_die("trial %ld: its command line is too long", b->trial);
    b->av[b->n++] = b->store + b->used;
    b->av[b->n] = NULL;
    b->used += (size_t)len + 1;
}

/* trial_argv: the trial's command as argv (NULL-terminated), its strings in store. With slot NULL
 * (--list, --run-index): a job on this machine. */
void trial_argv(const sweep_opts *o, const sweep_space *s, const sweep_trial *t, const sweep_slot *slot,
                char **av, char *store, size_t cap)
{
    argv_buf b = {.av = av, .store = store, .cap = cap, .trial = t->id};
    argv_add(&b, "%s", o->ddlrun);
    if (slot && slot->host) {
        argv_add(&b, "-np");
        argv_add(&b, "%d", o->ranks);
        argv_add(&b, "-H");
        argv_add(&b, "%s:%d", slot->host, o->ranks);
        argv_add(&b, "--master");
        argv_add(&b, "%s:%d", slot->host, SWEEP_PORT_BASE + 16 * slot->index);
        if (o->agent) {
            argv_add(&b, "--ssh-agent");
            argv_add(&b, "%s", o->agent);
        }
        static const char *const pass[] = {"DDL_SWEEP_TRIAL", "DDL_SWEEP_SLOT", "DDL_SWEEP_ATTEMPT"};
        for (int i = 0; i < 3; i++) {
            argv_add(&b, "-x");
            argv_add(&b, "%s", pass[i]);
        }
    } else {
        argv_add(&b, "-n");
        argv_add(&b, "%d", o->ranks);
    }
    argv_add(&b, "--");
    for (char **a = o->argv; *a; a++)
        argv_add(&b, "%s", *a);
    for (int i = 0; i < s->n; i++) {
        argv_add(&b, "%s%s", s->p[i].name[0] == '-' ? "" : "--", s->p[i].name);
        argv_add(&b, "%s", t->values[i]);
    }
    if (!o->bare) {
        char dir[4096];
        trial_dir(o, t->id, dir, sizeof dir);
        argv_add(&b, "--logdir");
        argv_add(&b, "%s/logs", dir);
        argv_add(&b, "--checkpoint");
        argv_add(&b, "%s/checkpoint", dir);
    }
}

/* trial_print: av as one shell command line on f. */
void trial_print(FILE *f, char **av)
{
    for (int i = 0; av[i]; i++) {
        const char *w = av[i];
        int plain = *w && strspn(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+=/.,:@%") ==
                              strlen(w);
        fputs(i ? " " : "", f);
        if (plain) {
            fputs(w, f);
            continue;
        }
        fputc('\'', f);
        for (; *w; w++)
            *w == '\'' ? fputs("'\\''", f) : fputc(*w, f);
        fputc('\'', f);
    }
    fputc('\n', f);
}

/* ---- starting it ---- */

/* trial_spawn: start trial t on slot sl, output to a pipe and to its output.log. 0, or -1 with a
 * message on stderr (the slot is not to blame: no fork, no pipe, no directory). */
int trial_spawn(const sweep_opts *o, const sweep_space *s, sweep_trial *t, sweep_slot *sl)
{
    static char store[65536];
    char *av[SWEEP_MAX_ARGS], dir[4096], path[4200];
    trial_argv(o, s, t, sl->host ? sl : NULL, av, store, sizeof store);
    trial_dir(o, t->id, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/output.log", dir);
    int p[2] = {-1, -1};
    char why[8400];
    struct stat st; /* the trial's directory: made by us, or by an earlier attempt; never a link */
    if (mkdir(dir, 0755) != 0 && errno == EEXIST && lstat(dir, &st) == 0 && S_ISLNK(st.st_mode)) {
        sweep_warn("trial %ld: %s is a symbolic link: not followed (planted by another user?)", t->id, dir);
        return -1;
    }
    if (outdir_check(dir, why, sizeof why) != 0 || (sl->log = outfile_append(path, why, sizeof why)) < 0) {
        sweep_warn("trial %ld: %s", t->id, why);
        return -1;
    }
    if (pipe2(p, O_CLOEXEC) != 0) {
        sweep_warn("trial %ld: pipe: %s", t->id, strerror(errno));
        close(sl->log), sl->log = -1;
        return -1;
    }
    dprintf(sl->log, "==== ddl-sweep: trial %ld, attempt %d, slot %s: ", t->id, t->attempts + 1, sl->name);
    FILE *lf = fdopen(dup(sl->log), "w");
    if (lf)
        trial_print(lf, av), fclose(lf);
    char env[3][32];
    snprintf(env[0], sizeof env[0], "%ld", t->id);
    snprintf(env[1], sizeof env[1], "%d", sl->index);
    snprintf(env[2], sizeof env[2], "%d", t->attempts);
    fflush(stdout);
    fflush(stderr);
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old); /* no handler of ours runs in the child before it resets them */
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) /* dies with ddl-sweep */
            _exit(127);
        int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            signal(sigs[i], SIG_DFL);
        setpgid(0, 0); /* a group of its own: ddl-sweep signals the trial, the terminal does not */
        sigprocmask(SIG_SETMASK, &old, NULL);
        int null = open("/dev/null", O_RDONLY);
        if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(p[1], STDOUT_FILENO) < 0 ||
            dup2(p[1], STDERR_FILENO) < 0)
            _exit(127);
        setenv("DDL_SWEEP_TRIAL", env[0], 1);
        setenv("DDL_SWEEP_SLOT", env[1], 1);
        setenv("DDL_SWEEP_ATTEMPT", env[2], 1);
        unsetenv("DDL_JOB"); /* each trial its own job id, so its own shared memory */
        execvp(av[0], av);
        fprintf(stderr, "ddl-sweep: cannot run '%s': %s\n", av[0], strerror(errno));
        _exit(127);
    }
    int saved = errno;
    if (pid > 0)
        setpgid(pid, pid); /* here too: no signal can race the child's own setpgid */
    sigprocmask(SIG_SETMASK, &old, NULL);
    close(p[1]);
    if (pid < 0) {
        sweep_warn("trial %ld: fork: %s", t->id, strerror(saved));
        close(p[0]), close(sl->log);
        return -1;
    }
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    sl->pid = pid;
    sl->out = p[0];
    sl->trial = t->id;
    sl->t0 = (double)sweep_now_ms() / 1000.0;
    sl->kill_at = 0;
    sl->stop = STOP_NONE;
    sl->fill = 0;
    sl->last[0] = sl->last_prog[0] = '\0';
    sl->epoch = sl->has_epoch_metric = sl->has_metric = 0;
    sl->has_acc = sl->classes = sl->nonfinite = 0;
    t->state = TRIAL_RUNNING;
    memcpy(t->slot, sl->name, sizeof t->slot); /* both SWEEP_VALUE_BYTES, NUL-terminated */
    return 0;
}

/* trial_signal: sig to the trial's process group (ddlrun passes it on to the ranks). */
void trial_signal(sweep_slot *sl, int sig)
{
    if (sl->pid > 0 && kill(-sl->pid, sig) != 0)
        kill(sl->pid, sig);
}

/* ---- its output ---- */

/* line_value: in line, the number after "NAME=" (sep '=') or "NAME " (sep ' '), as a word. */
static int line_value(const char *line, const char *name, char sep, double *v)
{
    size_t len = strlen(name);
    for (const char *p = strstr(line, name); p; p = strstr(p + 1, name)) {
        if ((p != line && p[-1] != ' ') || p[len] != sep)
            continue;
        char *end;
        double x = strtod(p + len + 1, &end);
        if (end != p + len + 1 && (*end == '\0' || *end == ' ' || *end == ',')) {
            *v = x;
            return 1;
        }
    }
    return 0;
}

/* trial_health: from a summary line (sep '=') or an epoch line (sep ' '): the test accuracy, and
 * whether a loss is NaN or infinite; a "data: ... N classes" line (ddl-train) gives the classes. */
static void trial_health(sweep_slot *sl, const char *line, char sep)
{
    static const char *const losses[] = {"loss", "test_loss"};
    double v;
    const char *c = strncmp(line, "data:", 5) ? NULL : strstr(line, " classes");
    while (c && c > line && c[-1] >= '0' && c[-1] <= '9')
        c--;
    if (c && atoi(c) > 1)
        sl->classes = atoi(c);
    if (line_value(line, "test_acc", sep, &v))
        sl->acc = v, sl->has_acc = 1;
    for (int i = 0; i < 2; i++)
        if (line_value(line, losses[i], sep, &v) && (v != v || v - v != 0)) /* NaN, or inf (inf - inf is NaN) */
            sl->nonfinite = 1;
}

/* trial_diverged: whether the trial on sl diverged: test accuracy at chance (at most 1/classes +
 * 0.02, classes as it said or --classes) or a loss NaN or infinite. */
int trial_diverged(const sweep_slot *sl, int classes)
{
    int n = sl->classes ? sl->classes : classes;
    return sl->nonfinite || (sl->has_acc && n > 0 && !(sl->acc > 1.0 / n + 0.02));
}

/* trial_line: one line of the trial's output. Returns 1 when it reported the metric of a new
 * epoch (sl->epoch, sl->epoch_metric), for ASHA. */
int trial_line(sweep_slot *sl, const char *metric, const char *line)
{
    if (!strncmp(line, "summary:", 8) || !strncmp(line, "epoch ", 6) || !strncmp(line, "data:", 5))
        trial_health(sl, line, strncmp(line, "summary:", 8) ? ' ' : '=');
    if (line[0])
        snprintf(sl->last, sizeof sl->last, "%s", line);
    if (line[0] && strncmp(line, "ddlrun: ", 8))
        snprintf(sl->last_prog, sizeof sl->last_prog, "%s", line);
    if (!strncmp(line, "summary:", 8)) {
        double e;
        sl->has_metric = line_value(line, metric, '=', &sl->metric);
        if (!sl->epoch && line_value(line, "epochs", '=', &e) && e >= 0 && e < 1e9) /* --quiet: no epoch lines */
            sl->epoch = (int)e;
        return 0;
    }
    int e, total;
    double v;
    if (sscanf(line, "epoch %d/%d", &e, &total) == 2 && e > sl->epoch) {
        sl->epoch = e;
        if (line_value(line, metric, ' ', &v) || line_value(line, metric, '=', &v)) {
            sl->epoch_metric = v;
            sl->has_epoch_metric = 1;
            return 1;
        }
    }
    return 0;
}

/* trial_read: what the trial wrote since: to output.log, and line by line to on_epoch. At EOF or
 * an error the pipe is closed (sl->out -1). */
void trial_read(sweep_slot *sl, const char *metric, void (*on_epoch)(sweep_slot *, void *), void *ud)
{
    for (;;) {
        ssize_t got = read(sl->out, sl->buf + sl->fill, sizeof sl->buf - 1 - sl->fill);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && errno == EAGAIN)
            return;
        if (got <= 0) { /* EOF: a last line without newline */
            sl->buf[sl->fill] = '\0';
            if (sl->fill && trial_line(sl, metric, sl->buf) && on_epoch)
                on_epoch(sl, ud);
            sl->fill = 0;
            close(sl->out);
            sl->out = -1;
            return;
        }
        if (write(sl->log, sl->buf + sl->fill, (size_t)got) != got) {
            /* a full disk: the trial goes on, its log is short */
        }
        sl->fill += (size_t)got;
        size_t start = 0;
        for (size_t i = 0; i < sl->fill; i++)
            if (sl->buf[i] == '\n' || sl->buf[i] == '\r') {
                sl->buf[i] = '\0';
                if (trial_line(sl, metric, sl->buf + start) && on_epoch)
                    on_epoch(sl, ud);
                start = i + 1;
            }
        if (start == 0 && sl->fill == sizeof sl->buf - 1) /* a line longer than the buffer: drop it */
            start = sl->fill;
        memmove(sl->buf, sl->buf + start, sl->fill - start);
        sl->fill -= start;
    }
}
