/* supervise.c - a generation of ranks (or, for a head, of agents) from start to exit: signals
 * (sigpipe.h's self-pipe: SIGINT, SIGTERM and SIGHUP forwarded, SIGUSR1 passed on), reaping,
 * the first failure stopping the others after a grace period, a stopped rank found for the
 * report, --env-stdin's EOF from a head that is gone, and the line that says why ddlrun failed. */
#include "ddlrun.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/sigpipe.h"

/* signals_install: the self-pipe and its handlers (exit 1 without a pipe); with forward_usr1,
 * SIGUSR1 too, passed on to the ranks as it is (handle_signals), not fatal to us. */
void signals_install(int forward_usr1)
{
    install_handlers("ddlrun");
    if (forward_usr1)
        catch_usr1();
}

/* signals_close: in a forked child, before it execs: the self-pipe is ddlrun's alone. */
void signals_close(void)
{
    close(sig_pipe[0]);
    close(sig_pipe[1]);
}

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
            if (!bad && u->elastic_min && !u->finished) {
                u->finished = 1;
                u->finished_at = now_ms();
            }
            if (r->dropped) { /* left_behind said it; not "the other 0 go on" */
                u->lost += r->dropped == 2;
                u->late += r->dropped == 1;
                continue;
            }
            if (!bad || u->got_signal || u->head_gone)
                continue;
            /* elastic: the others regroup while enough live (on several nodes each ddlrun sees only its
             * own ranks: the ranks themselves stop below the minimum) */
            int enough = u->nodes > 1 ? u->alive > 0 : u->alive >= u->elastic_min;
            if (u->elastic_min && (enough || u->finished) && !u->failed_pid) {
                char how[96];
                if (WIFSIGNALED(status))
                    snprintf(how, sizeof how, "was killed by signal %d (%s)", WTERMSIG(status),
                             strsignal(WTERMSIG(status)));
                else
                    snprintf(how, sizeof how, "exited with code %d", WEXITSTATUS(status));
                u->lost++;
                if (u->head)
                    fprintf(stderr, "ddlrun: host %s (node %d): its ddlrun %s; the other %d host%s go on (elastic: "
                            "the ranks stop below %d)\n", r->host, r->id, how, u->alive, u->alive == 1 ? "" : "s",
                            u->elastic_min);
                else
                    fprintf(stderr, "ddlrun: rank %d (pid %d) %s; the other %d go on (elastic: they stop below %d)\n",
                            r->id, (int)pid, how, u->alive, u->elastic_min);
                if (u->o && !u->finished && u->replace_left > 0) { /* a replacement asks the others in */
                    u->replace_left--;
                    u->replaced++;
                    r->join = 1;
                    spawn_rank(u->o, r, i);
                    u->alive++;
                    fprintf(stderr, "ddlrun: started pid %d to take rank %d's place (it joins at the others' next "
                            "step)\n", (int)r->pid, r->id);
                }
                continue;
            }
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

/* stopped: rank i's process is stopped by a signal (state T in /proc/PID/stat; not t, a tracing
 * stop, as LeakSanitizer's check at exit makes for a moment). */
static int stopped(const run *u, int i)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)u->ranks[i].pid);
    FILE *f = u->ranks[i].pid > 0 ? fopen(path, "r") : NULL;
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && p[2] == 'T';
}

/* left_behind: --elastic, the job done: a rank still stopped was left out of it by the others, and
 * a replacement still running 5 s later came too late to join. */
static void left_behind(run *u)
{
    for (int i = 0; u->finished && i < u->n; i++) {
        if (u->ranks[i].pid > 0 && u->ranks[i].join && now_ms() - u->finished_at > 5000) {
            fprintf(stderr, "ddlrun: the job finished before the replacement for rank %d (pid %d) could join: "
                    "stopped it\n", u->ranks[i].id, (int)u->ranks[i].pid);
            kill(u->ranks[i].pid, SIGKILL);
            u->ranks[i].join = 0;
            u->ranks[i].dropped = 1;
        }
        if (u->ranks[i].pid > 0 && now_ms() - u->finished_at > 1000 && stopped(u, i)) {
            fprintf(stderr, "ddlrun: rank %d (pid %d) is stopped and the others finished without it: killed\n",
                    u->ranks[i].id, (int)u->ranks[i].pid);
            kill(u->ranks[i].pid, SIGKILL);
            u->ranks[i].dropped = 2;
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
void supervise(run *u, int tag)
{
    struct pollfd pf[1 + 2 * MAX_RANKS];
    int who[1 + 2 * MAX_RANKS];
    long long drain_until = 0;
    for (;;) {
        reap(u);
        left_behind(u);
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
int report(const run *u)
{
    if (u->got_signal) {
        fprintf(stderr, "ddlrun: received signal %d (%s); forwarded it to the ranks\n", u->got_signal,
                strsignal(u->got_signal));
        return 128 + u->got_signal;
    }
    if (u->head_gone) /* quietly: the head, if it lives, speaks for the job */
        return 1;
    if (!u->failed_pid && u->lost && u->head)
        fprintf(stderr, "ddlrun: the job finished on %d of its %d hosts (elastic: %d lost on the way)\n",
                u->n - u->lost, u->n, u->lost);
    else if (!u->failed_pid && u->lost) {
        char late[48] = "";
        if (u->late)
            snprintf(late, sizeof late, ", %d of them too late to join", u->late);
        fprintf(stderr, "ddlrun: the job finished with %d of its %d ranks (elastic: %d lost on the way, %d "
                "replacement%s started%s)\n", u->n - u->lost + u->replaced - u->late, u->n, u->lost, u->replaced,
                u->replaced == 1 ? "" : "s", late);
    }
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

/* say_restart: the one line per restart. */
void say_restart(const run *u, int k, int max)
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
