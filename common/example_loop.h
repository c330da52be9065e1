/* example_loop.h - the epoch loop of lenet.c and unet.c, written once: the steps of each epoch
 * (with --checkpoint a save every --checkpoint-every steps and at the epoch's end, and SIGUSR1's
 * agreed save and exit), the epoch's statistics, the evaluation on the held-out set, rank 0's
 * line, the event file and straggler report, then the final save and the summary line of
 * docs/DESIGN.md. A run that resumed finishes its epoch, or starts the next if that one was done.
 * The loop in its shortest form, with no checkpoints and no watching, is quickstart.c's:
 * ddl_trainer_epoch, then ddl_trainer_evaluate. Header-only, as every file of common/:
 * copy the folder along with the example. */
#ifndef DDL_EXAMPLE_LOOP_H
#define DDL_EXAMPLE_LOOP_H

#include "ddl.h"

#include <stdio.h>

#include "example_common.h"

/* One training run, from a started trainer (example_trainer_start) to its summary line. The
 * example fills the first fields; example_train fills ev and preempted. */
typedef struct example_run {
    const char *prog;             /* the program's name: its messages, and model= in the summary */
    const example_opts *o;
    ddl_comm *comm;               /* NULL: one process */
    ddl_trainer *tr;
    ddl_model *model;
    const ddl_dataset *test;      /* evaluated after every epoch: the summary's metrics */
    example_watch *w;
    int segmentation;             /* the lines and the summary add dice and mean IoU (and pixel_acc) */
    void (*epoch_end)(struct example_run *r, int epoch); /* after each epoch's line (unet: its pictures); or NULL */
    ddl_eval_stats ev;            /* the last evaluation */
    int preempted;                /* SIGUSR1 with --checkpoint: saved; exit EXAMPLE_EXIT_PREEMPTED */
} example_run;

/* example_epoch_line: rank 0's line of epoch e (from 1), unless --quiet. */
static void example_epoch_line(const example_run *r, int e, const ddl_epoch_stats *es)
{
    if (ddl_comm_rank(r->comm) != 0 || r->o->quiet)
        return;
    printf("epoch %d/%d  loss %.4f  train_acc %.4f  test_loss %.4f  test_acc %.4f", e, r->o->epochs, es->loss,
           es->accuracy, r->ev.loss, r->ev.accuracy);
    if (r->segmentation)
        printf("  dice %.4f  miou %.4f", r->ev.dice, r->ev.miou);
    printf("  %.0f images/s  (%.1f s)\n", es->images_per_sec, es->seconds);
    fflush(stdout);
}

/* example_summary: the summary line of docs/DESIGN.md, for scripts, on rank 0. */
static void example_summary(const example_run *r, double images_per_sec, double wall_s)
{
    if (ddl_comm_rank(r->comm) != 0)
        return;
    printf("summary: model=%s transport=%s world=%d epochs=%d batch=%d test_acc=%.4f test_loss=%.4f ", r->prog,
           r->comm ? ddl_comm_transport_name(r->comm) : "none", ddl_comm_size(r->comm), r->o->epochs, r->o->batch,
           r->ev.accuracy, r->ev.loss);
    if (r->segmentation) /* a segmentation's accuracy is per pixel */
        printf("pixel_acc=%.4f dice=%.4f miou=%.4f ", r->ev.accuracy, r->ev.dice, r->ev.miou);
    printf("images_per_sec=%.0f wall_s=%.1f weights_crc=%08x slowest_rank=%d comm_frac=%.3f\n", images_per_sec,
           wall_s, (unsigned)ddl_model_crc(r->model), r->w->last.slowest_rank, r->w->last.comm_frac);
}

/* example_train: the epochs left to run, the final save (--save), --profile's table and the
 * summary line. Collective. DDL_OK, or the code of the call that failed (ddl_trainer_error says
 * why; example_failed prints it). */
static int example_train(example_run *r)
{
    const example_opts *o = r->o;
    double t0 = example_seconds(), train_secs = 0.0;
    long train_samples = 0;
    int rc = DDL_OK, evaluated = 0;
    for (int e = ddl_trainer_epoch_index(r->tr) + ddl_trainer_epoch_done(r->tr); rc == DDL_OK && e < o->epochs; e++) {
        ddl_epoch_stats es;
        do { /* one step; with --checkpoint a save every --checkpoint-every steps, at the end, on SIGUSR1 */
            rc = example_step_save(r->w, r->tr, r->comm, o->checkpoint, o->checkpoint_every, &r->preempted);
            if (rc == DDL_OK)
                example_test_stop(r->tr, ddl_trainer_step_count(r->tr)); /* test hook: nothing unless a test asks */
        } while (rc == DDL_OK && !r->preempted && !ddl_trainer_epoch_done(r->tr));
        if (r->preempted)
            break;
        if (rc == DDL_OK)
            rc = ddl_trainer_epoch_stats(r->tr, &es);
        if (rc == DDL_OK)
            rc = ddl_trainer_evaluate(r->tr, r->test, &r->ev);
        if (rc != DDL_OK)
            break;
        evaluated = 1;
        train_secs += es.seconds;
        train_samples += es.samples;
        example_epoch_line(r, e + 1, &es);
        example_watch_epoch(r->w, e + 1, &es, &r->ev, r->segmentation); /* event file, straggler report */
        if (r->epoch_end)
            r->epoch_end(r, e + 1);
    }
    if (r->preempted || rc != DDL_OK)
        return rc;
    if (!evaluated) /* resumed after the last epoch: the summary needs metrics */
        rc = ddl_trainer_evaluate(r->tr, r->test, &r->ev);
    if (rc == DDL_OK && o->save)
        rc = ddl_trainer_save(r->tr, o->save);
    if (rc == DDL_OK) {
        example_watch_profile(r->w); /* --profile's table, before the summary: the summary stays the last line */
        example_summary(r, train_secs > 0 ? (double)train_samples / train_secs : 0.0, example_seconds() - t0);
    }
    return rc;
}

/* example_failed: a run that failed: the error on stderr, naming rank (this rank at the start:
 * an elastic job may renumber), from the trainer once there is one, else err; with --checkpoint,
 * which checkpoint exists and how to go on from it. */
static void example_failed(const example_run *r, int rank, const char *err)
{
    fprintf(stderr, "%s: rank %d: %s\n", r->prog, rank, r->tr ? ddl_trainer_error(r->tr) : err);
    if (r->o->checkpoint)
        example_checkpoint_say(ddl_comm_rank(r->comm));
}

#endif
