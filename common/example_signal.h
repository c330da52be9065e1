/* example_signal.h - what lenet, unet and ddl-train do on SIGUSR1, SIGTERM and SIGINT, from the
 * first line of main on: a scheduler may signal a job while it joins the others or loads its
 * data (minutes, with a large image folder), and a user may press Ctrl-C at any time.
 *   - While loading (until example_signal_training): nothing is lost by stopping, so the process
 *     stops at once, from the handler (a library call that decodes a folder cannot be asked to
 *     stop), saying that no checkpoint was written and where a new run starts: SIGUSR1 and
 *     SIGTERM exit EXAMPLE_EXIT_PREEMPTED (run it again, as for a preemption), SIGINT ends the
 *     process by SIGINT, as it would have.
 *   - While training: SIGUSR1, with --checkpoint, asks for a checkpoint and an exit
 *     (example_step_save, in example_watch.h); without, it ends the process as always. SIGTERM
 *     and SIGINT end the process as they always did (the other ranks may be gone: no collective
 *     save is tried), rank 0 first saying which checkpoint exists and the flags that continue
 *     from it. The line is made ready in main's code after every save (two buffers: the
 *     handler reads a whole one) and written by the handler with write(2) alone.
 * example_checkpoint_say prints the same line after a failure (a rank died, a link broke).
 * Header-only, for programs: included by example_common.h; copy it along. */
#ifndef DDL_EXAMPLE_SIGNAL_H
#define DDL_EXAMPLE_SIGNAL_H

#include "ddl.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXAMPLE_EXIT_PREEMPTED 75 /* EX_TEMPFAIL: "saved (or nothing to save); run me again (with --resume)" */

static volatile sig_atomic_t example_usr1;     /* SIGUSR1 while training: the ranks agree to save and exit */
static volatile sig_atomic_t example_training; /* 0: joining and loading (a signal ends the process at once) */
static volatile sig_atomic_t example_line_cur; /* the example_line buffer the handler reads */
static volatile sig_atomic_t example_line_said; /* main said it already (a failure): the handler says nothing */
static int example_usr1_saves;                 /* --checkpoint given: SIGUSR1 while training saves */
static char example_loading_line[768];         /* "while loading data: no checkpoint written (...)" */
static char example_line[2][1024];             /* rank 0 while training: "the checkpoint ...", or "" */
static const char *example_sig_prog = "ddl";

/* example_sig_put: append s to buf (at *n, bytes in all); async-signal-safe. */
static void example_sig_put(char *buf, size_t *n, size_t bytes, const char *s)
{
    for (; *s && *n + 1 < bytes; s++)
        buf[(*n)++] = *s;
}

static void example_on_signal(int sig)
{
    int saved = errno;
    if (sig == SIGUSR1 && example_training) { /* (installed while training only with --checkpoint) */
        example_usr1 = 1;
        errno = saved;
        return;
    }
    const char *what = !example_training ? example_loading_line : example_line_said ? "" : example_line[example_line_cur];
    if (what[0]) {
        char buf[2048];
        size_t n = 0;
        example_sig_put(buf, &n, sizeof buf, example_sig_prog);
        example_sig_put(buf, &n, sizeof buf, sig == SIGUSR1 ? ": SIGUSR1" : sig == SIGTERM ? ": SIGTERM" : ": SIGINT");
        example_sig_put(buf, &n, sizeof buf, what);
        buf[n++] = '\n';
        (void)!write(STDERR_FILENO, buf, n);
    }
    if (!example_training && sig != SIGINT)
        _exit(EXAMPLE_EXIT_PREEMPTED);
    struct sigaction sa; /* the default action, taken as the handler returns (sig is blocked until then) */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
    raise(sig);
    errno = saved;
}

/* example_sig_catch: sig to example_on_signal; a SIGINT the program was started ignoring (a
 * background job of a shell, nohup's habit) stays ignored. */
static void example_sig_catch(int sig)
{
    struct sigaction sa;
    if (sig == SIGINT && sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
        return;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = example_on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGUSR1); /* one handler at a time: the lines are written whole */
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaction(sig, &sa, NULL);
}

/* example_signal_install: first thing in main, after the options (checkpoint: --checkpoint PATH
 * or NULL; resume: --resume): from now on a signal while loading ends the process at once with
 * its line. The line names the rank when the environment says there are several. */
static void example_signal_install(const char *prog, const char *checkpoint, int resume)
{
    struct stat st;
    char rank[48] = "", then[600];
    ddl_comm_config cc;
    ddl_comm_env env;
    example_sig_prog = prog;
    example_usr1_saves = checkpoint != NULL;
    if (ddl_comm_config_from_env(&cc, &env, NULL, 0) == DDL_OK && cc.world_size > 1)
        snprintf(rank, sizeof rank, " on rank %d", cc.rank);
    int exists = checkpoint && stat(checkpoint, &st) == 0 && S_ISREG(st.st_mode);
    if (exists && resume)
        snprintf(then, sizeof then, "the requeued job starts from the previous checkpoint, %.400s", checkpoint);
    else if (exists)
        snprintf(then, sizeof then, "the requeued job starts from the beginning; %.400s, an earlier run's "
                 "checkpoint, is continued with --resume", checkpoint);
    else
        snprintf(then, sizeof then, "the requeued job starts from the beginning");
    snprintf(example_loading_line, sizeof example_loading_line, "%s while loading data: no checkpoint written (%s)",
             rank, then);
    example_sig_catch(SIGUSR1);
    example_sig_catch(SIGTERM);
    example_sig_catch(SIGINT);
}

/* example_line_set: the training line of rank 0 (what: NULL on the other ranks, who say
 * nothing), into the buffer the handler does not read, which then becomes the one it reads. */
static void example_line_set(const char *what)
{
    int next = !example_line_cur;
    snprintf(example_line[next], sizeof example_line[next], "%s", what ? what : "");
    example_line_cur = next;
}

/* example_checkpoint_text: where a run stopped now would continue from: path (NULL: no
 * --checkpoint) holds step `step` (0: this run saved none yet) of epoch `epoch` (from 1, done:
 * finished); saving: a save of step `saving` is under way. */
static void example_checkpoint_text(char *out, size_t bytes, const char *path, long step, int epoch, int done,
                                    long saving)
{
    struct stat st;
    if (!path)
        snprintf(out, bytes, "no checkpoint: this run has no --checkpoint PATH, a new one starts from the beginning");
    else if (saving && step)
        snprintf(out, bytes, "checkpoint %.400s holds step %ld (a save of step %ld was under way: it holds that "
                 "one if the save finished); --checkpoint %.400s --resume continues from it", path, step, saving, path);
    else if (step)
        snprintf(out, bytes, "checkpoint %.400s holds step %ld (epoch %d%s); --checkpoint %.400s --resume continues "
                 "from it", path, step, epoch, done ? ", finished" : "", path);
    else if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
        snprintf(out, bytes, "this run wrote no checkpoint yet%s; %.400s is an earlier run's: --checkpoint %.400s "
                 "--resume continues from it", saving ? " (its first save was under way)" : "", path, path);
    else
        snprintf(out, bytes, "no checkpoint written yet (--checkpoint %.400s)%s: a new run starts from the "
                 "beginning", path, saving ? ", its first save was under way" : "");
}

/* example_signal_checkpoint: around a save of path, on every rank: before it (saving: its step)
 * and after it (saving 0; saved: it went well, so path now holds this step), rank 0's line names
 * what path holds. After a resume from path, saved 1 too. */
/* example_signal_saved: path holds the save of step (epoch, its end or not), written in the
 * background and now on disk; saving: a later save under way (0: none). */
static void example_signal_saved(int rank, const char *path, long step, int epoch, int done, long saving)
{
    static long saved_step; /* this run's last save, or the checkpoint it resumed from */
    static int saved_epoch, saved_done;
    char text[1000], line[1010];
    if (step > 0)
        saved_step = step, saved_epoch = epoch, saved_done = done;
    example_checkpoint_text(text, sizeof text, path, saved_step, saved_epoch, saved_done, saving);
    snprintf(line, sizeof line, ": %s", text);
    example_line_set(rank == 0 ? line : NULL);
}

static void example_signal_checkpoint(ddl_trainer *tr, int rank, const char *path, long saving, int saved)
{
    long step = saved ? ddl_trainer_step_count(tr) : 0;
    example_signal_saved(rank, path, step, ddl_trainer_epoch_index(tr) + 1, ddl_trainer_epoch_done(tr), saving);
}

/* example_signal_training: the loop begins (the trainer made, a checkpoint resumed from or
 * not): from now on SIGUSR1 asks for a save (with --checkpoint; without, SIGUSR1 ends the
 * process as always), and SIGTERM and SIGINT end it after rank 0's line. */
static void example_signal_training(ddl_trainer *tr, int rank, const char *checkpoint)
{
    example_signal_checkpoint(tr, rank, checkpoint, 0, 1); /* a resumed run: the checkpoint it resumed from */
    if (!example_usr1_saves) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGUSR1, &sa, NULL);
    }
    example_training = 1;
}

/* example_checkpoint_say: after a failure, rank 0 says which checkpoint exists (the handler
 * then says nothing more). */
static void example_checkpoint_say(int rank)
{
    if (rank != 0 || !example_training || !example_line[example_line_cur][0])
        return;
    example_line_said = 1;
    fprintf(stderr, "%s%s\n", example_sig_prog, example_line[example_line_cur]);
    fflush(stderr);
}

#endif
