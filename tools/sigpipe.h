/* sigpipe.h - the self-pipe of a program that supervises children (ddlrun, ddl-sweep): SIGINT,
 * SIGTERM, SIGHUP and SIGCHLD each write their number to sig_pipe, so that the program's poll()
 * loop wakes and handles them outside the handler; SIGPIPE is ignored. For programs only. */
#ifndef DDL_SIGPIPE_H
#define DDL_SIGPIPE_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int sig_pipe[2] = {-1, -1}; /* the signal handler's self-pipe: wakes poll() */

static void on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    (void)!write(sig_pipe[1], &b, 1);
    errno = saved;
}

/* install_handlers: the pipe and the handlers; exit 1 naming prog if there is no pipe. */
static void install_handlers(const char *prog)
{
    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        fprintf(stderr, "%s: pipe: %s\n", prog, strerror(errno));
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

/* catch_usr1: SIGUSR1 too goes through the pipe (ddlrun passes it on to its ranks). */
static inline void catch_usr1(void)
{
    struct sigaction sa;
    sigaction(SIGINT, NULL, &sa); /* install_handlers' handler */
    sigaction(SIGUSR1, &sa, NULL);
}

#endif
