/* head.c - a cluster job (-H or --hostfile): the head picks the master, job id and token, and
 * starts one ddlrun per host through the agent (ssh, or --ssh-agent CMD; "localhost" directly)
 * with the token, DDL_RESTART and the -x variables on the agent's stdin, never on a command line.
 * It supervises the agents as a node supervises its ranks (supervise.c), and restarts them all. */
#include "ddlrun.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    if (o->elastic_min) {
        snprintf(buf, sizeof buf, " --elastic %d:%d", o->elastic_min, o->elastic_max);
        append(cmd, cap, buf);
    }
    if (o->replacements >= 0)
        snprintf(buf, sizeof buf, " --replacements %d", o->replacements), append(cmd, cap, buf);
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

/* env_lines: what goes to each node on its stdin: the token, the restart, the peer list
 * (--elastic) and the -x variables. */
static void env_lines(const opts *o, char *out, size_t cap)
{
    const char *names[3 + MAX_XVARS] = {"DDL_TOKEN", "DDL_RESTART", "DDL_PEERS"};
    int n = 3;
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

/* elastic_peers: --elastic: every rank's address, host by host, at ports base + rank (base drawn
 * for the job), so that each node's ddlrun can start a replacement that finds the running ranks
 * (DDL_PEERS; not when the user set one). */
static void elastic_peers(const opts *o)
{
    if (!o->elastic_min || getenv("DDL_PEERS"))
        return;
    static char peers[MAX_HOSTS * 64 * 8];
    int base = random_low_port(), used = 0; /* below the ports the ranks' own connections take */
    peers[0] = '\0';
    for (int i = 0; i < o->n_used; i++)
        for (int j = 0; j < o->per && used + 80 < (int)sizeof peers; j++)
            used += snprintf(peers + used, sizeof peers - (size_t)used, "%s%s:%d", used ? "," : "", o->host[i],
                             base + i * o->per + j);
    set_env("DDL_PEERS", peers);
}

/* head_main: -H or --hostfile: one node per host used, the same number of ranks on each
 * (options.c chose them). Returns ddlrun's exit status. */
int head_main(opts *o)
{
    int k = o->n_used, per = o->per;
    static char master[400];
    char buf[128];
    if (!o->master) { /* kept for restarts too */
        snprintf(master, sizeof master, "%s:%d", o->host[0], DEFAULT_PORT);
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
    elastic_peers(o);
    signals_install(0);
    char base_job[128];
    snprintf(base_job, sizeof base_job, "%s", getenv("DDL_JOB"));
    static rank agents[MAX_HOSTS];
    static char cmd[65536], env[65536];
    for (int r = 0;; r++) {
        if (r > 0)
            restart_env(o, base_job, r);
        env_lines(o, env, sizeof env);
        /* --elastic: a host lost is not the job lost (the ranks stop below MIN themselves) */
        run u = {.ranks = agents, .n = k, .head = 1, .elastic_min = o->elastic_min, .nodes = k};
        for (int i = 0; i < k; i++) {
            memset(&agents[i], 0, sizeof agents[i]);
            agents[i].id = i;
            agents[i].out[0] = agents[i].out[1] = -1;
            agents[i].host = o->host[i];
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
