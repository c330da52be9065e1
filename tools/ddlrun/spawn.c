/* spawn.c - one local rank: forked in a process group of its own that dies with ddlrun, with
 * DDL_RANK and DDL_LOCAL_RANK set, on its share of the CPUs (--bind cores, bind.h), its output
 * to a pipe (--tag-output), to DIR/rank.N.log (--log-dir, outfile.h) or left as it is; and the
 * tagged output lines, "[rank] " and a whole line at a time. */
#include "ddlrun.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "tools/bind.h"
#include "tools/outfile.h"

/* ranks_prepare: before the first start: the open files the ranks may have, and whether --bind
 * cores can be done (not with more ranks than CPUs: then it is dropped, and ddlrun says so). */
void ranks_prepare(opts *o)
{
    raise_open_files();
    if (o->bind && bind_cpus() < o->n) {
        fprintf(stderr, "ddlrun: --bind cores: %d ranks on %d CPUs: not bound\n", o->n, bind_cpus());
        o->bind = 0;
    }
}

/* spawn_rank: start local rank `local` of this node as r (r->id its global rank). */
void spawn_rank(const opts *o, rank *r, int local)
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
        char name[64];
        snprintf(name, sizeof name, "rank.%d.log", r->id);
        if ((log = outfile_create_at(o->log_fd, name)) < 0) { /* never through a link planted there */
            fprintf(stderr, "ddlrun: --log-dir: cannot create %s/%s: %s\n", o->log_dir, name, strerror(errno));
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
        if (r->join) /* a replacement: it asks the running ranks in (elastic) */
            setenv("DDL_JOIN", "1", 1);
        if (o->bind && bind_rank(local, o->n) != 0)
            fprintf(stderr, "ddlrun: --bind cores: rank %d not bound: %s\n", r->id, strerror(errno));
        int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            signal(sigs[i], SIG_DFL);
        signals_close();
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
void pump(rank *r, int k)
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
