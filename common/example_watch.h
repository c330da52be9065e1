/* example_watch.h - what lenet.c and unet.c show of a run, beyond their epoch lines: the
 * start-up line (version, model, gradient, world, hosts, transport, an all-reduce probe), the
 * live progress line on a terminal, TensorBoard event files with --logdir, the timeline of
 * DDL_TIMELINE, the straggler report, a line per checkpoint save, and the library's own log
 * messages at DDL_LOG_LEVEL. The library measures and writes files; printing is the program's,
 * and so is this file. Header-only, included by example_common.h: copy it along. */
#ifndef DDL_EXAMPLE_WATCH_H
#define DDL_EXAMPLE_WATCH_H

#include <time.h>
#include <unistd.h>

/* ---- the library's log messages: DDL_LOG_LEVEL=debug|info|warn|error (default: warnings, such
 * as "waiting for ranks 2, 3 (5 s)" at start-up; errors are the program's own lines then) ---- */

static int example_log_level = -1; /* the most verbose level shown; -1: not set: warnings only */

static void example_log(void *ud, int level, const char *msg)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    if (example_log_level < 0 ? level == DDL_LOG_WARN : level <= example_log_level)
        fprintf(stderr, "%s: %s: %s\n", (const char *)ud, names[level < 0 ? 0 : level > 3 ? 3 : level], msg);
}

/* example_log_setup: read DDL_LOG_LEVEL and give the comm the callback; 0, or -1 for a bad value. */
static int example_log_setup(ddl_comm_config *cc, const char *prog)
{
    static const char *const levels[] = {"error", "warn", "info", "debug", NULL}; /* DDL_LOG_* order */
    const char *v = getenv("DDL_LOG_LEVEL");
    for (int i = 0; v && v[0] && levels[i]; i++)
        if (strcmp(v, levels[i]) == 0)
            example_log_level = i;
    if (v && v[0] && example_log_level < 0) {
        fprintf(stderr, "%s: DDL_LOG_LEVEL=%s: expected debug, info, warn or error\n", prog, v);
        return -1;
    }
    cc->log = example_log;
    cc->log_ud = (void *)(uintptr_t)prog;
    return 0;
}

/* ---- the watcher ---- */

typedef struct example_watch {
    const char *prog;
    int rank, world, quiet, tty, log_every, epochs;
    int keep;                    /* --keep-checkpoints */
    long steps_per_epoch, global_batch;
    ddl_summary_writer *events;  /* rank 0 with --logdir; NULL after a write error */
    const char *logdir_path;     /* --logdir */
    ddl_comm *comm;              /* the job's (NULL: one process); set after example_watch_init */
    int logdir;                  /* --logdir given: every rank takes part in the step statistics */
    ddl_timeline *timeline;      /* DDL_TIMELINE */
    const char *timeline_path;
    ddl_epoch_stats prev;        /* step statistics at the last --log-every point of this epoch */
    int prev_epoch;
    int cur_epoch;               /* progress line: the epoch, its start, its first step */
    double epoch_t0, last_draw;
    long epoch_step0;
    double loss_sum;
    int loss_n;
    ddl_epoch_stats last;        /* of the last epoch: the summary line's slowest_rank and comm_frac */
    const char *eval_tag;        /* the tags of each epoch's evaluation: "test" (default) or "val" */
    long bg_step;                /* a checkpoint being written in the background: its step (0: none) */
    int bg_epoch, bg_done;       /* and its epoch, and whether it ended one */
    ddl_profile *profile;        /* --profile: the trainer fills it (tc->profile); rank 0 prints it */
    int64_t prof_was[6];         /* its steps and split at the last epoch's end: each epoch's line */
    int bf16;                    /* --precision bf16: the start-up line names its path (ddl_cpu_bf16) */
} example_watch;

static double example_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* example_watch_events_failed: report a write error of the event file once; go on without it. */
static void example_watch_events_failed(example_watch *w)
{
    fprintf(stderr, "%s: event file: %s; training goes on without it\n", w->prog, ddl_summary_writer_error(w->events));
    ddl_summary_writer_destroy(w->events);
    w->events = NULL;
}

static void example_watch_scalar(example_watch *w, const char *tag, long step, double v)
{
    if (w->events && ddl_summary_writer_scalar(w->events, tag, step, v) != DDL_OK)
        example_watch_events_failed(w);
}

/* example_timeline_setup: DDL_TIMELINE=PATH.json [DDL_TIMELINE_STEPS=A:B]: a timeline for
 * tc->timeline, sized for those steps. 0, or -1 with the reason in err. */
static int example_timeline_setup(example_watch *w, ddl_train_config *tc, char err[DDL_ERR_BYTES])
{
    const char *path = getenv("DDL_TIMELINE"), *steps = getenv("DDL_TIMELINE_STEPS");
    if (!path || !path[0])
        return 0;
    ddl_timeline_config cfg = {.first_step = 1, .last_step = 0};
    if (steps && steps[0] && (sscanf(steps, "%ld:%ld", &cfg.first_step, &cfg.last_step) != 2 ||
                              cfg.first_step < 1 || cfg.last_step < cfg.first_step)) {
        snprintf(err, DDL_ERR_BYTES, "DDL_TIMELINE_STEPS=%s: expected A:B with 1 <= A <= B", steps);
        return -1;
    }
    long total = w->steps_per_epoch * w->epochs, last = cfg.last_step && cfg.last_step < total ? cfg.last_step : total;
    long n = last >= cfg.first_step ? last - cfg.first_step + 1 : 0;
    cfg.max_spans = (size_t)n * 6 + 4 * (size_t)w->epochs + 16; /* 5 a step, saves, evaluations */
    char why[DDL_ERR_BYTES - 16];
    if (ddl_timeline_create(&cfg, NULL, &w->timeline, why, sizeof why) != DDL_OK) {
        snprintf(err, DDL_ERR_BYTES, "DDL_TIMELINE: %s", why);
        return -1;
    }
    w->timeline_path = path;
    tc->timeline = w->timeline;
    return 0;
}

/* example_watch_init: before the trainer: the watcher, the timeline (into tc) and, on rank 0
 * with --logdir, the event file. DDL_OK, or DDL_EINVAL with the reason in err. */
static int example_watch_init(example_watch *w, const example_opts *o, const char *prog, int rank, int world,
                              long n_train, ddl_train_config *tc, char err[DDL_ERR_BYTES])
{
    memset(w, 0, sizeof *w);
    w->prog = prog;
    w->rank = rank;
    w->world = world;
    w->quiet = o->quiet;
    w->tty = rank == 0 && !o->quiet && isatty(STDOUT_FILENO);
    w->log_every = o->log_every;
    w->bf16 = o->precision == DDL_PRECISION_BF16;
    w->keep = o->keep_checkpoints;
    w->epochs = o->epochs;
    w->global_batch = o->batch;
    w->steps_per_epoch = ((o->train_limit > 0 && o->train_limit < n_train ? o->train_limit : n_train) + o->batch - 1) /
                         o->batch;
    w->logdir = o->logdir != NULL;
    w->logdir_path = o->logdir;
    w->prev_epoch = w->cur_epoch = -1;
    w->eval_tag = "test";
    if (example_timeline_setup(w, tc, err) != 0)
        return DDL_EINVAL;
    if (o->profile && !(w->profile = (ddl_profile *)calloc(1, sizeof *w->profile))) {
        snprintf(err, DDL_ERR_BYTES, "--profile: cannot allocate %zu bytes", sizeof *w->profile);
        return DDL_ENOMEM;
    }
    tc->profile = w->profile;
    char why[DDL_ERR_BYTES - 16];
    if (rank == 0 && o->logdir && ddl_summary_writer_create(o->logdir, NULL, &w->events, why, sizeof why) != DDL_OK) {
        snprintf(err, DDL_ERR_BYTES, "--logdir: %s", why);
        return DDL_EINVAL;
    }
    return DDL_OK;
}

/* example_hosts: the distinct host names of all ranks, comma separated, into out. Collective. */
static int example_hosts(ddl_comm *comm, int world, char *out, size_t out_bytes)
{
    int64_t mine[8] = {0}, *all = (int64_t *)calloc((size_t)world, sizeof mine);
    if (!all)
        return DDL_ENOMEM;
    gethostname((char *)mine, sizeof mine - 1);
    int rc = comm ? ddl_comm_allgather(comm, mine, all, 8, DDL_INT64) : DDL_OK;
    if (!comm)
        memcpy(all, mine, sizeof mine);
    int hosts = 0;
    out[0] = 0;
    for (int r = 0; r < world && rc == DDL_OK; r++) {
        const char *name = (const char *)(all + 8 * r);
        int seen = 0;
        for (int q = 0; q < r; q++)
            seen |= strncmp(name, (const char *)(all + 8 * q), 63) == 0;
        if (!seen && ++hosts <= 4)
            snprintf(out + strlen(out), out_bytes - strlen(out), "%s%.63s", hosts > 1 ? "," : "", name);
    }
    if (hosts > 4)
        snprintf(out + strlen(out), out_bytes - strlen(out), ",... (%d hosts)", hosts);
    free(all);
    return rc;
}

/* example_watch_start: the start-up line on rank 0, after a quick all-reduce probe at the
 * gradient's size (collective; skipped with --quiet on every rank). */
static int example_watch_start(example_watch *w, ddl_comm *comm, const ddl_model *m, ddl_trainer *tr)
{
    ddl_regroup j;
    if (ddl_comm_joined(comm, &j)) { /* a replacement: the others are mid-run, no start-up collectives */
        if (!w->quiet)
            fprintf(stderr, "%s: joined the running job as rank %d of %d at step %ld (epoch %d)\n", w->prog,
                    j.rank, j.world, ddl_trainer_step_count(tr), ddl_trainer_epoch_index(tr) + 1);
        return DDL_OK;
    }
    if (w->quiet)
        return DDL_OK;
    char hosts[320];
    double secs = 0.0;
    int rc = example_hosts(comm, w->world, hosts, sizeof hosts);
    if (rc == DDL_OK)
        rc = ddl_trainer_probe(tr, 5, &secs);
    if (rc != DDL_OK || w->rank != 0)
        return rc;
    size_t n = ddl_model_n_params(m), bytes = n * sizeof(float);
    printf("ddl %s: model %s, %zu parameters, gradient %.2f MB, world %d on %s, transport %s, kernels %s",
           ddl_version_string(), ddl_model_name(m), n, (double)bytes / 1e6, w->world, hosts,
           ddl_comm_transport_name(comm), ddl_cpu_kernels());
    if (w->bf16)
        printf(", bf16 on %s", ddl_cpu_bf16());
    if (ddl_trainer_micro_batches(tr) > 1)
        printf(", %d micro-batches", ddl_trainer_micro_batches(tr));
    if (comm && secs > 0)
        printf(", allreduce probe %.3f ms busbw %.2f GB/s", secs * 1e3,
               (double)bytes * 2.0 * (w->world - 1) / w->world / secs / 1e9);
    printf("\n");
    if (w->events)
        printf("event file: %s\n", ddl_summary_writer_path(w->events));
    fflush(stdout);
    return DDL_OK;
}

/* example_test_slow: a test hook, not for users (tests/test_observe.sh): with
 * DDL_TEST_SLOW=RANK:MS in the environment, rank RANK sleeps MS ms before every step, as a
 * slower machine would. Without it, nothing. */
static void example_test_slow(int rank)
{
    const char *v = getenv("DDL_TEST_SLOW");
    int r, ms;
    if (v && sscanf(v, "%d:%d", &r, &ms) == 2 && r == rank && ms > 0) {
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* progress: rank 0 on a terminal: one line redrawn in place, at most 5 times a second. */
static void example_progress(example_watch *w, ddl_trainer *tr, double loss)
{
    long step = ddl_trainer_step_count(tr) - w->epoch_step0;
    w->loss_sum += loss;
    w->loss_n++;
    double now = example_wall();
    int done = ddl_trainer_epoch_done(tr);
    if (done) {
        printf("\r\033[K");
        fflush(stdout);
        return;
    }
    if (now - w->last_draw < 0.2)
        return;
    w->last_draw = now;
    double el = now - w->epoch_t0, per = step > 0 ? el / (double)step : 0.0;
    long eta = (long)(per * (double)(w->steps_per_epoch - step) + 0.5);
    printf("\r  epoch %d/%d  step %ld/%ld  loss %.4f  %.0f images/s  ETA %ld:%02ld\033[K",
           ddl_trainer_epoch_index(tr) + 1, w->epochs, step, w->steps_per_epoch, w->loss_sum / w->loss_n,
           el > 0 ? (double)(step * w->global_batch) / el : 0.0, eta / 60, eta % 60);
    fflush(stdout);
    w->loss_sum = 0.0;
    w->loss_n = 0;
}

/* example_watch_follow: after an elastic job's members changed, this rank's new number; a new rank
 * 0 opens an event file of its own in --logdir (TensorBoard reads every file there), and writes
 * elastic/world_size from then on, as rank 0 did before. */
static void example_watch_follow(example_watch *w, const ddl_epoch_stats *es, long step)
{
    int r = ddl_comm_rank(w->comm);
    w->world = es->world > 0 ? es->world : w->world;
    if (r != w->rank) {
        if (r != 0 && w->events) { /* no longer rank 0 (a replacement took slot 0 back): its file ends */
            if (ddl_summary_writer_flush(w->events) != DDL_OK)
                fprintf(stderr, "%s: event file: %s\n", w->prog, ddl_summary_writer_error(w->events));
            ddl_summary_writer_destroy(w->events);
            w->events = NULL;
        }
        w->rank = r;
        w->tty = r == 0 && !w->quiet && isatty(STDOUT_FILENO);
        char why[DDL_ERR_BYTES];
        if (r == 0 && w->logdir_path && !w->events &&
            ddl_summary_writer_create(w->logdir_path, NULL, &w->events, why, sizeof why) != DDL_OK)
            fprintf(stderr, "%s: --logdir: %s; training goes on without it\n", w->prog, why);
    }
    if (ddl_comm_elastic_min(w->comm) > 0)
        example_watch_scalar(w, "elastic/world_size", step, (double)w->world);
}

/* example_step_scalars: every --log-every steps: the statistics since the last point of this
 * epoch (collective: every rank, when --logdir is given), written by rank 0. */
static int example_step_scalars(example_watch *w, ddl_trainer *tr)
{
    ddl_epoch_stats es;
    int rc = ddl_trainer_epoch_stats(tr, &es);
    if (rc == DDL_OK)
        example_watch_follow(w, &es, ddl_trainer_step_count(tr));
    if (rc != DDL_OK || !w->events)
        return rc;
    ddl_epoch_stats p = w->prev;
    if (w->prev_epoch != ddl_trainer_epoch_index(tr))
        memset(&p, 0, sizeof p);
    long samples = es.samples - p.samples, steps = es.steps - p.steps, step = ddl_trainer_step_count(tr);
    double secs = es.seconds - p.seconds;
    if (samples > 0 && steps > 0) {
        example_watch_scalar(w, "train/loss", step, (es.loss * es.samples - p.loss * p.samples) / samples);
        example_watch_scalar(w, "train/accuracy", step, (es.accuracy * es.samples - p.accuracy * p.samples) / samples);
        example_watch_scalar(w, "lr", step, es.lr);
        example_watch_scalar(w, "images_per_sec", step, secs > 0 ? samples / secs : 0.0);
        example_watch_scalar(w, "comm/allreduce_ms", step, (es.allreduce_seconds - p.allreduce_seconds) * 1e3 / steps);
    }
    w->prev = es;
    w->prev_epoch = ddl_trainer_epoch_index(tr);
    return DDL_OK;
}

/* example_watch_step: one optimizer step, with the test hook, the progress line and the
 * step scalars. Returns as ddl_trainer_step. */
static int example_watch_step(example_watch *w, ddl_trainer *tr)
{
    int epoch = ddl_trainer_epoch_index(tr) + ddl_trainer_epoch_done(tr); /* the one this step is in */
    if (epoch != w->cur_epoch) { /* every epoch has steps_per_epoch steps */
        long done = ddl_trainer_step_count(tr);
        w->cur_epoch = epoch;
        w->epoch_t0 = example_wall();
        w->epoch_step0 = done - done % (w->steps_per_epoch ? w->steps_per_epoch : 1);
    }
    example_test_slow(w->rank); /* test hook: does nothing unless a test asks */
    double loss = 0.0;
    int rc = ddl_trainer_step(tr, &loss);
    if (rc == DDL_OK && w->tty)
        example_progress(w, tr, loss);
    if (rc == DDL_OK && w->logdir && w->log_every > 0 && ddl_trainer_step_count(tr) % w->log_every == 0)
        rc = example_step_scalars(w, tr);
    return rc;
}

/* example_rotate: before a save to path, with --keep-checkpoints K > 1: PATH.K-2 -> PATH.K-1,
 * ..., PATH.1 -> PATH.2, then PATH hard-linked as PATH.1, so the checkpoint before stays whole
 * while the save renames its new file over PATH. A failure is said and training goes on. */
static void example_rotate(const example_watch *w, const char *path)
{
    char from[4096], to[4096];
    for (int i = w->keep - 1; i >= 1; i--) {
        if (i > 1)
            snprintf(from, sizeof from, "%s.%d", path, i - 1);
        else
            snprintf(from, sizeof from, "%s", path);
        snprintf(to, sizeof to, "%s.%d", path, i);
        if (unlink(to) != 0 && errno != ENOENT)
            fprintf(stderr, "%s: --keep-checkpoints: cannot remove %s: %s\n", w->prog, to, strerror(errno));
        int rc = i > 1 ? rename(from, to) : link(from, to);
        if (rc != 0 && errno != ENOENT)
            fprintf(stderr, "%s: --keep-checkpoints: cannot keep %s as %s: %s\n", w->prog, from, to, strerror(errno));
    }
}

/* example_watch_save: a checkpoint save (collective) and its line on rank 0. */
static int example_watch_save(example_watch *w, ddl_trainer *tr, const char *path, int background)
{
    double t0 = example_wall();
    if (w->bg_step) { /* the last save's write first: then path holds it (and rotating is safe) */
        int rc = ddl_trainer_save_wait(tr);
        if (rc == DDL_OK)
            example_signal_saved(w->rank, path, w->bg_step, w->bg_epoch, w->bg_done, 0);
        w->bg_step = 0;
        if (rc != DDL_OK)
            return rc;
    }
    if (w->rank == 0 && w->keep > 1)
        example_rotate(w, path);
    long step = ddl_trainer_step_count(tr);
    example_signal_checkpoint(tr, w->rank, path, step, 0); /* what a signal now says */
    int rc = background ? ddl_trainer_save_background(tr, path) : ddl_trainer_save(tr, path);
    if (rc == DDL_OK && background) /* still "under way" for a signal, until the next save waits for it */
        w->bg_step = step, w->bg_epoch = ddl_trainer_epoch_index(tr) + 1, w->bg_done = ddl_trainer_epoch_done(tr);
    else
        example_signal_checkpoint(tr, w->rank, path, 0, rc == DDL_OK);
    if (rc == DDL_OK && w->rank == 0 && !w->quiet) {
        if (w->tty && !ddl_trainer_epoch_done(tr))
            printf("\r\033[K");
        printf("checkpoint: saved %s at step %ld (%.2f s%s)\n", path, step, example_wall() - t0,
               background ? ", written in the background" : "");
        fflush(stdout);
    }
    return rc;
}

/* ---- preemption: SIGUSR1, as Slurm sends it before a time limit (sbatch --signal=USR1@60) or
 * on `scancel -s USR1`; with --checkpoint only (without, SIGUSR1 ends the process as always) ---- */

#define EXAMPLE_PREEMPT_EVERY 8  /* steps between the ranks' checks: one 8-byte all-reduce each */
/* (the handler, EXAMPLE_EXIT_PREEMPTED and the flag example_usr1: example_signal.h) */

/* example_step_save: one step (example_watch_step); the checkpoint when due (every `every` steps
 * and at each epoch's end); and every EXAMPLE_PREEMPT_EVERY steps the ranks agree whether any of
 * them got SIGUSR1 (the signal reaches them at different steps; the sum is the same on all): then
 * every rank saves at this step and *preempted is 1. Collective. */
static int example_step_save(example_watch *w, ddl_trainer *tr, ddl_comm *comm, const char *path, long every,
                             int *preempted)
{
    int rc = example_watch_step(w, tr), saved = 0;
    long step = ddl_trainer_step_count(tr);
    if (w->bg_step && ddl_trainer_save_pending(tr) == 0) /* written: what a signal says from now on */
        example_signal_saved(w->rank, path, w->bg_step, w->bg_epoch, w->bg_done, 0);
    if (rc == DDL_OK && path && (ddl_trainer_epoch_done(tr) || (every > 0 && step % every == 0))) {
        /* every rank calls, rank 0 writes: within an epoch in the background (the step goes on
         * while the file is written), at its end at once (the run may end there); an elastic job
         * at once too (its saves survive a regroup: ddl_trainer_save_wait does not) */
        int elastic = comm && ddl_comm_elastic_min(comm) > 0;
        rc = example_watch_save(w, tr, path, !ddl_trainer_epoch_done(tr) && !elastic);
        saved = 1;
    }
    if (rc != DDL_OK || !path || step % EXAMPLE_PREEMPT_EVERY != 0)
        return rc;
    int64_t asked = example_usr1;
    if (comm && (rc = ddl_trainer_allreduce_int(tr, &asked, DDL_SUM)) != DDL_OK) /* elastic: goes on */
        return rc;
    if (asked > 0) {
        *preempted = 1;
        if (!saved || w->bg_step) /* a preempted run ends here: its save on disk first */
            rc = example_watch_save(w, tr, path, 0);
        if (rc == DDL_OK && w->rank == 0)
            fprintf(stderr, "preempted (SIGUSR1) at step %ld: checkpoint %s saved; run again with --resume "
                    "(exit status %d)\n", step, path, EXAMPLE_EXIT_PREEMPTED);
    }
    return rc;
}

/* example_watch_eval: an evaluation's scalars, SET/loss, SET/accuracy (and SET/dice, SET/miou),
 * on rank 0 with --logdir. */
static void example_watch_eval(example_watch *w, const char *set, int epoch, const ddl_eval_stats *ev,
                               int segmentation)
{
    static const char *const names[] = {"loss", "accuracy", "dice", "miou"};
    const double v[] = {ev->loss, ev->accuracy, ev->dice, ev->miou};
    char tag[64];
    for (int i = 0; i < (segmentation ? 4 : 2); i++) {
        snprintf(tag, sizeof tag, "%s/%s", set, names[i]);
        example_watch_scalar(w, tag, epoch, v[i]);
    }
}

/* example_watch_epoch: after an epoch's line: its scalars (flushed, so TensorBoard sees the
 * epoch) and, with more than one rank, the straggler report. */
static void example_watch_epoch(example_watch *w, int epoch, const ddl_epoch_stats *es, const ddl_eval_stats *ev,
                                int segmentation)
{
    w->last = *es;
    example_watch_follow(w, es, epoch);
    if (w->events) {
        example_watch_scalar(w, "epoch/train_loss", epoch, es->loss);
        example_watch_scalar(w, "epoch/train_accuracy", epoch, es->accuracy);
        example_watch_eval(w, w->eval_tag, epoch, ev, segmentation);
        example_watch_scalar(w, "epoch/lr", epoch, es->lr);
        example_watch_scalar(w, "epoch/images_per_sec", epoch, es->images_per_sec);
        example_watch_scalar(w, "epoch/comm_allreduce_ms", epoch,
                             es->steps ? es->allreduce_seconds * 1e3 / (double)es->steps : 0.0);
        example_watch_scalar(w, "epoch/comm_frac", epoch, es->comm_frac);
        if (w->events && ddl_summary_writer_flush(w->events) != DDL_OK)
            example_watch_events_failed(w);
    }
    if (w->profile && w->rank == 0 && !w->quiet) { /* the epoch's split; the layers' table comes at the end */
        const ddl_profile *p = w->profile;
        int64_t now[6] = {p->steps, p->data_ns, p->compute_ns, p->allreduce_ns, p->optimizer_ns, p->step_ns}, d[6];
        for (int i = 0; i < 6; i++)
            d[i] = now[i] - w->prof_was[i], w->prof_was[i] = now[i];
        double per = d[0] > 0 ? 1e-6 / (double)d[0] : 0.0, all = d[5] > 0 ? 100.0 / (double)d[5] : 0.0;
        printf("  profile: step %.3f ms: data %.3f (%.1f%%), compute %.3f (%.1f%%), all-reduce wait %.3f (%.1f%%), "
               "optimizer %.3f (%.1f%%)\n", (double)d[5] * per, (double)d[1] * per, (double)d[1] * all,
               (double)d[2] * per, (double)d[2] * all, (double)d[3] * per, (double)d[3] * all, (double)d[4] * per,
               (double)d[4] * all);
        fflush(stdout);
    }
    if (w->rank == 0 && !w->quiet && w->world > 1) {
        double over = es->fastest_seconds > 0 ? 100.0 * (es->slowest_seconds / es->fastest_seconds - 1.0) : 0.0;
        printf("  stragglers: rank %d computed slowest, %.2f s (+%.0f%% over the fastest, %.2f s); all-reduce took "
               "%.0f%% of the step time\n", es->slowest_rank, es->slowest_seconds, over, es->fastest_seconds,
               100.0 * es->comm_frac);
        fflush(stdout);
    }
}

/* example_watch_image: an image summary (pixels (h, w, channels)) on rank 0 with --logdir. */
static inline void example_watch_image(example_watch *w, const char *tag, int epoch, const uint8_t *px, int h,
                                       int wd, int channels)
{
    if (w->events && ddl_summary_writer_image(w->events, tag, epoch, px, h, wd, channels) != DDL_OK)
        example_watch_events_failed(w);
    else if (w->events && ddl_summary_writer_flush(w->events) != DDL_OK)
        example_watch_events_failed(w);
}

/* example_watch_profile: with --profile, rank 0's table (each rank times its own steps), printed
 * before the summary line so that the summary stays the last. */
static void example_watch_profile(const example_watch *w)
{
    if (!w->profile || w->rank != 0)
        return;
    size_t n = ddl_profile_format(w->profile, NULL, 0);
    char *text = (char *)malloc(n + 1);
    if (!text)
        return;
    ddl_profile_format(w->profile, text, n + 1);
    fputs(text, stdout);
    fflush(stdout);
    free(text);
}

/* example_watch_end: after a run that went well (ok), the timeline's file (collective); the
 * event file closed. Returns the timeline's status (DDL_OK without one). */
static int example_watch_end(example_watch *w, ddl_comm *comm, int ok)
{
    int rc = DDL_OK;
    if (w->timeline && ok) {
        char err[DDL_ERR_BYTES];
        rc = ddl_timeline_write(w->timeline, comm, w->timeline_path, err, sizeof err);
        if (rc != DDL_OK)
            fprintf(stderr, "%s: rank %d: timeline: %s\n", w->prog, w->rank, err);
        else if (w->rank == 0 && !w->quiet) {
            FILE *f = fopen(w->timeline_path, "rb");
            long bytes = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : 0;
            if (f)
                fclose(f);
            long steps = (long)(ddl_timeline_count(w->timeline) / 5); /* 5 spans a step, give or take saves */
            printf("timeline: %s, %ld bytes, %zu spans on rank 0 (%zu dropped), about %ld bytes per step\n",
                   w->timeline_path, bytes, ddl_timeline_count(w->timeline), ddl_timeline_dropped(w->timeline),
                   steps > 0 ? bytes / steps : 0);
        }
    }
    ddl_timeline_destroy(w->timeline);
    w->timeline = NULL;
    ddl_summary_writer_destroy(w->events);
    w->events = NULL;
    free(w->profile); /* the trainer, destroyed after, no longer writes it after its last step */
    w->profile = NULL;
    return rc;
}

#endif
