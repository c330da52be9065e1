/* env.c - the DDL_* environment ddlrun's ranks inherit: world and local size, the master (a free
 * port on one node), the token (token.h: from --token-file, as set, or random on one node), the
 * job id, the transport and timeout; -x variables; --env-stdin's lines from the head; what
 * changes at each restart. Set here in ddlrun's own environment before the ranks are forked. */
#include "ddlrun.h"

#include "ddl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tools/token.h"

void random_hex(char *out, size_t bytes)
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

/* random_low_port: a random port in [10000, 30000), below Linux's ephemeral range (32768 up), from
 * which the kernel takes the ports of bind(0) and of every process's outgoing connections. */
int random_low_port(void)
{
    char hex[16];
    random_hex(hex, 4);
    return 10000 + (int)(strtoul(hex, NULL, 16) % 20000);
}

/* bound_port: the port a socket bound to 127.0.0.1:port got (the kernel's choice for 0), or -1. */
static int bound_port(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                            .sin_port = htons((uint16_t)port)};
    socklen_t len = sizeof a;
    int got = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
                      getsockname(fd, (struct sockaddr *)&a, &len) == 0
                  ? ntohs(a.sin_port)
                  : -1;
    if (fd >= 0)
        close(fd);
    return got;
}

/* free_port: a port on 127.0.0.1 nothing holds, for a rank to listen on once started: a random low
 * one (random_low_port), else bind(0)'s. A bind(0) port lies in the ephemeral range, where any
 * process's next outgoing connection may take it before the rank binds it: the likely cause of
 * test_mac's one failure in make test, a rank that could not listen and a peer that waited for it
 * until its timeout. */
static int free_port(void)
{
    for (int tries = 0; tries < 64; tries++) {
        int port = bound_port(random_low_port());
        if (port > 0)
            return port;
    }
    int port = bound_port(0);
    if (port < 0) {
        fprintf(stderr, "ddlrun: cannot find a free port on 127.0.0.1: %s\n", strerror(errno));
        exit(1);
    }
    return port;
}

void set_env(const char *name, const char *value)
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
void setup_token(const opts *o)
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
void set_xvars(const opts *o)
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
void read_env_stdin(void)
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
void setup_env(const opts *o)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%d", o->n * o->nodes);
    set_env("DDL_WORLD_SIZE", buf);
    snprintf(buf, sizeof buf, "%d", o->n);
    set_env("DDL_LOCAL_SIZE", buf);
    if (o->elastic_min) {
        snprintf(buf, sizeof buf, "%d:%d", o->elastic_min, o->elastic_max);
        set_env("DDL_ELASTIC", buf);
    }
    if (o->elastic_min && o->nodes == 1 && !getenv("DDL_PEERS")) { /* every rank's address, for replacements */
        static char peers[MAX_RANKS * 24];
        int ports[MAX_RANKS];
        size_t used = 0;
        for (int i = 0; i < o->n; i++) {
            int fresh;
            do { /* distinct: the kernel may hand a port out twice in a row */
                ports[i] = free_port();
                fresh = 1;
                for (int k = 0; k < i; k++)
                    fresh &= ports[k] != ports[i];
            } while (!fresh);
            used += (size_t)snprintf(peers + used, sizeof peers - used, "%s127.0.0.1:%d", i ? "," : "", ports[i]);
        }
        set_env("DDL_PEERS", peers);
    }
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

/* ---- restarts ---- */

/* restart_env: what changes for restart k: a fresh job id (no stale shared-memory segment or
 * handshake of the dead generation can match it), a fresh rendezvous port, DDL_RESTART=k. */
void restart_env(const opts *o, const char *base_job, int k)
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
