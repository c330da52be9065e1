/* example_common.h - what the example programs share: flags, comm set-up from the environment,
 * the epoch loop with its progress lines, and the summary line of DESIGN.md. Header-only so
 * each example stays one file to copy. */
#ifndef DDL_EXAMPLE_COMMON_H
#define DDL_EXAMPLE_COMMON_H

#include "ddl.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct example_opts {
    const char *model, *data;
    int epochs, batch, threads, quiet, warmup;
    long seed, train_limit;
    float lr, momentum, weight_decay, dropout, dice_weight;
    int optimizer, schedule;
    /* segmentation examples (unet): scene data and model shape; lenet ignores them */
    int scenes, test_scenes, size, max_items, depth, width;
    const char *images;
    /* checkpoints: --checkpoint PATH --checkpoint-every N --resume --save PATH */
    const char *checkpoint, *save;
    long checkpoint_every, save_rate;
    int resume;
} example_opts;

static void example_defaults(example_opts *o, const char *model)
{
    memset(o, 0, sizeof *o);
    o->model = model;
    o->epochs = 5;
    o->batch = 64;
    o->threads = 1;
    o->seed = 42;
    o->lr = 0.01f;
    o->momentum = 0.9f;
}

static void example_usage(const char *model)
{
    fprintf(stderr,
            "usage: %s [--data DIR] [--epochs N] [--batch B] [--lr X] [--momentum M] [--optimizer sgd|adam]\n"
            "       [--weight-decay W] [--schedule constant|step|cosine] [--warmup STEPS] [--dropout P]\n"
            "       [--seed S] [--train-limit N] [--threads N] [--quiet]\n"
            "       segmentation: [--dice-weight W] [--scenes N] [--test-scenes N] [--size S] [--items N]\n"
            "       [--depth D] [--width W] [--images DIR]\n"
            "       checkpoints: [--checkpoint PATH [--checkpoint-every STEPS] [--resume]] [--save PATH]\n"
            "       [--save-rate BYTES_PER_SEC]\n",
            model);
}

/* example_number: parse argv[i+1] as a number in [lo, hi]; -1 on error (with a message). */
static int example_number(int argc, char **argv, int i, double lo, double hi, double *out)
{
    if (i + 1 >= argc) {
        fprintf(stderr, "%s needs a value\n", argv[i]);
        return -1;
    }
    char *end;
    double v = strtod(argv[i + 1], &end);
    if (end == argv[i + 1] || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "%s %s: expected a number from %g to %g\n", argv[i], argv[i + 1], lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int example_parse(example_opts *o, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        double v = 0;
        int bad = 0;
        if (!strcmp(a, "--quiet")) { o->quiet = 1; continue; }
        if (!strcmp(a, "--resume")) { o->resume = 1; continue; }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { example_usage(o->model); return -1; }
        if (i + 1 >= argc) { fprintf(stderr, "%s: unknown flag or missing value\n", a); example_usage(o->model); return -1; }
        if (!strcmp(a, "--data")) o->data = argv[i + 1];
        else if (!strcmp(a, "--optimizer")) {
            if (!strcmp(argv[i + 1], "sgd")) o->optimizer = DDL_OPTIM_SGD;
            else if (!strcmp(argv[i + 1], "adam")) o->optimizer = DDL_OPTIM_ADAM;
            else { fprintf(stderr, "--optimizer %s: expected sgd or adam\n", argv[i + 1]); return -1; }
        } else if (!strcmp(a, "--schedule")) {
            if (!strcmp(argv[i + 1], "constant")) o->schedule = DDL_SCHED_CONSTANT;
            else if (!strcmp(argv[i + 1], "step")) o->schedule = DDL_SCHED_STEP;
            else if (!strcmp(argv[i + 1], "cosine")) o->schedule = DDL_SCHED_COSINE;
            else { fprintf(stderr, "--schedule %s: expected constant, step or cosine\n", argv[i + 1]); return -1; }
        }
        else if (!strcmp(a, "--epochs")) { bad = example_number(argc, argv, i, 0, 100000, &v); o->epochs = (int)v; }
        else if (!strcmp(a, "--batch")) { bad = example_number(argc, argv, i, 1, 1 << 20, &v); o->batch = (int)v; }
        else if (!strcmp(a, "--threads")) { bad = example_number(argc, argv, i, 1, 256, &v); o->threads = (int)v; }
        else if (!strcmp(a, "--warmup")) { bad = example_number(argc, argv, i, 0, 1e9, &v); o->warmup = (int)v; }
        else if (!strcmp(a, "--seed")) { bad = example_number(argc, argv, i, 0, 4e9, &v); o->seed = (long)v; }
        else if (!strcmp(a, "--train-limit")) { bad = example_number(argc, argv, i, 0, 1e12, &v); o->train_limit = (long)v; }
        else if (!strcmp(a, "--lr")) { bad = example_number(argc, argv, i, 0, 100, &v); o->lr = (float)v; }
        else if (!strcmp(a, "--momentum")) { bad = example_number(argc, argv, i, 0, 0.9999, &v); o->momentum = (float)v; }
        else if (!strcmp(a, "--weight-decay")) { bad = example_number(argc, argv, i, 0, 1, &v); o->weight_decay = (float)v; }
        else if (!strcmp(a, "--dropout")) { bad = example_number(argc, argv, i, 0, 0.99, &v); o->dropout = (float)v; }
        else if (!strcmp(a, "--images")) o->images = argv[i + 1];
        else if (!strcmp(a, "--checkpoint")) o->checkpoint = argv[i + 1];
        else if (!strcmp(a, "--save")) o->save = argv[i + 1];
        else if (!strcmp(a, "--save-rate")) { bad = example_number(argc, argv, i, 0, 1e15, &v); o->save_rate = (long)v; }
        else if (!strcmp(a, "--checkpoint-every")) { bad = example_number(argc, argv, i, 0, 1e12, &v); o->checkpoint_every = (long)v; }
        else if (!strcmp(a, "--scenes")) { bad = example_number(argc, argv, i, 1, 1e7, &v); o->scenes = (int)v; }
        else if (!strcmp(a, "--test-scenes")) { bad = example_number(argc, argv, i, 1, 1e7, &v); o->test_scenes = (int)v; }
        else if (!strcmp(a, "--size")) { bad = example_number(argc, argv, i, 1, 4096, &v); o->size = (int)v; }
        else if (!strcmp(a, "--items")) { bad = example_number(argc, argv, i, 1, 1000, &v); o->max_items = (int)v; }
        else if (!strcmp(a, "--depth")) { bad = example_number(argc, argv, i, 1, 16, &v); o->depth = (int)v; }
        else if (!strcmp(a, "--width")) { bad = example_number(argc, argv, i, 1, 4096, &v); o->width = (int)v; }
        else if (!strcmp(a, "--dice-weight")) { bad = example_number(argc, argv, i, 0, 100, &v); o->dice_weight = (float)v; }
        else { fprintf(stderr, "%s: unknown flag\n", a); example_usage(o->model); return -1; }
        if (bad)
            return -1;
        i++;
    }
    if ((o->resume || o->checkpoint_every) && !o->checkpoint) {
        fprintf(stderr, "--resume and --checkpoint-every need --checkpoint PATH\n");
        return -1;
    }
    return 0;
}

/* example_comm: a comm when the environment describes more than one rank, else NULL. */
static int example_comm(ddl_comm **comm, char err[DDL_ERR_BYTES])
{
    ddl_comm_config cc;
    *comm = NULL;
    int rc = ddl_comm_config_from_env(&cc, err, DDL_ERR_BYTES);
    if (rc != DDL_OK || cc.world_size <= 1)
        return rc;
    char why[DDL_ERR_BYTES];
    rc = ddl_comm_create(&cc, NULL, comm, why, sizeof why);
    if (rc != DDL_OK)
        snprintf(err, DDL_ERR_BYTES, "rank %d: cannot join the job: %.200s", cc.rank, why);
    return rc;
}

/* example_epoch: train to the end of the epoch; with --checkpoint, step by step, saving every
 * --checkpoint-every steps and at the end of the epoch (every rank calls, rank 0 writes).
 * Test hook: DDL_TEST_STOP_AFTER=N kills the process (SIGKILL, as a crash) once step N and its
 * checkpoint, if any, are done. */
static int example_epoch(const example_opts *o, ddl_trainer *tr, ddl_epoch_stats *es)
{
    const char *stop_env = getenv("DDL_TEST_STOP_AFTER");
    long stop_after = stop_env ? atol(stop_env) : 0, every = o->checkpoint_every;
    if (!o->checkpoint && stop_after <= 0)
        return ddl_trainer_epoch(tr, es);
    int rc;
    do {
        rc = ddl_trainer_step(tr, NULL);
        long step = ddl_trainer_step_count(tr);
        if (rc == DDL_OK && o->checkpoint && (ddl_trainer_epoch_done(tr) || (every > 0 && step % every == 0)))
            rc = ddl_trainer_save(tr, o->checkpoint);
        if (rc == DDL_OK && stop_after > 0 && step >= stop_after) {
            fflush(stdout);
            raise(SIGKILL);
        }
    } while (rc == DDL_OK && !ddl_trainer_epoch_done(tr));
    return rc == DDL_OK ? ddl_trainer_epoch_stats(tr, es) : rc;
}

/* example_resume: --resume: continue from --checkpoint PATH when it exists. */
static int example_resume(const example_opts *o, ddl_trainer *tr, int rank, int world)
{
    int saved_world = 0;
    int rc = ddl_trainer_resume(tr, o->checkpoint, DDL_RESUME_IF_EXISTS, &saved_world);
    if (rc != DDL_OK || rank != 0)
        return rc;
    if (!saved_world)
        printf("no checkpoint at %s: starting from scratch\n", o->checkpoint);
    else
        printf("resumed from %s at step %ld (epoch %d%s)\n", o->checkpoint, ddl_trainer_step_count(tr),
               ddl_trainer_epoch_index(tr) + 1, ddl_trainer_epoch_done(tr) ? ", finished" : "");
    if (saved_world && saved_world != world)
        printf("world size changed: the checkpoint was written by %d rank%s, resuming on %d; the rest of the "
               "epoch is re-sharded\n", saved_world, saved_world == 1 ? "" : "s", world);
    fflush(stdout);
    return DDL_OK;
}

/* example_summary: the one machine-readable line of DESIGN.md. */
static void example_summary(const example_opts *o, ddl_comm *comm, ddl_model *model, const ddl_eval_stats *ev,
                            double images_per_sec, double wall)
{
    printf("summary: model=%s transport=%s world=%d epochs=%d batch=%d test_acc=%.4f test_loss=%.4f", o->model,
           comm ? ddl_comm_transport_name(comm) : "none", comm ? ddl_comm_size(comm) : 1, o->epochs, o->batch,
           ev->accuracy, ev->loss);
    if (strcmp(o->model, "lenet") != 0)
        printf(" pixel_acc=%.4f dice=%.4f miou=%.4f", ev->accuracy, ev->dice, ev->miou);
    printf(" images_per_sec=%.0f wall_s=%.1f weights_crc=%08x\n", images_per_sec, wall,
           (unsigned)ddl_model_crc(model));
    fflush(stdout);
}

/* example_train: the epoch loop, progress on rank 0 and the summary line. */
static int example_train(const example_opts *o, ddl_comm *comm, ddl_model *model, const ddl_dataset *train,
                         const ddl_dataset *test)
{
    int rank = comm ? ddl_comm_rank(comm) : 0, world = comm ? ddl_comm_size(comm) : 1;
    ddl_set_threads(o->threads);
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.epochs = o->epochs;
    tc.batch = o->batch;
    tc.optim.kind = o->optimizer;
    tc.optim.lr = o->lr;
    tc.optim.momentum = o->momentum;
    tc.optim.weight_decay = o->weight_decay;
    tc.schedule.kind = o->schedule;
    tc.schedule.warmup_steps = o->warmup;
    tc.seed = (uint64_t)o->seed;
    tc.train_limit = o->train_limit;
    tc.dice_weight = o->dice_weight;
    tc.comm = comm;
    tc.save_bytes_per_sec = o->save_rate;
    long n = o->train_limit > 0 && o->train_limit < train->n ? o->train_limit : train->n;
    long steps_per_epoch = (n + o->batch - 1) / o->batch;
    tc.schedule.total_steps = steps_per_epoch * o->epochs;
    tc.schedule.step_size = steps_per_epoch * (o->epochs > 3 ? o->epochs / 3 : 1);
    tc.schedule.gamma = 0.1f;

    ddl_trainer *tr = NULL;
    char err[DDL_ERR_BYTES];
    int rc = ddl_trainer_create(&tc, model, train, NULL, &tr, err, sizeof err);
    if (rc != DDL_OK) {
        fprintf(stderr, "%s: rank %d: %s\n", o->model, rank, err);
        return rc;
    }
    if (o->resume && (rc = example_resume(o, tr, rank, world)) != DDL_OK) {
        fprintf(stderr, "%s: rank %d: %s\n", o->model, rank, ddl_trainer_error(tr));
        ddl_trainer_destroy(tr);
        return rc;
    }
    /* a resumed run continues its epoch, or starts the next one if that one was finished */
    int first = ddl_trainer_epoch_index(tr) + ddl_trainer_epoch_done(tr), evaluated = 0;
    struct timespec ts0;
    clock_gettime(CLOCK_MONOTONIC, &ts0);
    double train_secs = 0;
    long train_samples = 0;
    ddl_eval_stats ev;
    memset(&ev, 0, sizeof ev);
    for (int e = first; e < o->epochs && rc == DDL_OK; e++) {
        ddl_epoch_stats es;
        rc = example_epoch(o, tr, &es);
        if (rc == DDL_OK)
            rc = ddl_trainer_evaluate(tr, test, &ev);
        if (rc != DDL_OK)
            break;
        evaluated = 1;
        train_secs += es.seconds;
        train_samples += es.samples;
        if (rank == 0 && !o->quiet) {
            printf("epoch %d/%d  loss %.4f  train_acc %.4f  test_loss %.4f  test_acc %.4f", e + 1, o->epochs,
                   es.loss, es.accuracy, ev.loss, ev.accuracy);
            if (ev.dice > 0 && model && ddl_model_get_config(model)->in_h != 28)
                printf("  dice %.4f  miou %.4f", ev.dice, ev.miou);
            printf("  %.0f images/s  (%.1f s)\n", es.images_per_sec, es.seconds);
            fflush(stdout);
        }
    }
    if (rc == DDL_OK && !evaluated) /* resumed after the last epoch: the summary still needs metrics */
        rc = ddl_trainer_evaluate(tr, test, &ev);
    if (rc == DDL_OK && o->save)
        rc = ddl_trainer_save(tr, o->save);
    if (rc != DDL_OK) {
        fprintf(stderr, "%s: rank %d: %s\n", o->model, rank, ddl_trainer_error(tr));
        ddl_trainer_destroy(tr);
        return rc;
    }
    struct timespec ts1;
    clock_gettime(CLOCK_MONOTONIC, &ts1);
    double wall = (double)(ts1.tv_sec - ts0.tv_sec) + (double)(ts1.tv_nsec - ts0.tv_nsec) * 1e-9;
    if (rank == 0)
        example_summary(o, comm, model, &ev, train_secs > 0 ? train_samples / train_secs : 0.0, wall);
    ddl_trainer_destroy(tr);
    return DDL_OK;
}

#endif
