/* main.c - ddl-train: what lenet and unet do, on the user's data and network. The network is a
 * layer graph (--arch: a preset or a text file), the data an image folder, numpy arrays or IDX
 * files (data.c); the flags are the examples' (common/example_common.h, the programs' kit: the same flags,
 * checkpoints, resume, preemption, event files and summary line). --predict classifies files
 * with a trained model (predict.c).
 *
 *   ddlrun -n 4 build/bin/ddl-train --data fruits/Training --val fruits/Validation \
 *       --test fruits/Test --arch cnn --image-size 64 --augment flip,crop --epochs 10
 *   build/bin/ddl-train --predict --model fruits.ckpt --images photos/ --out predictions.csv */
#include "ddl.h"

#include <getopt.h>
#include <stdio.h>

#include "common/example_common.h"
#include "train.h"

#define USAGE                                                                                           \
    "usage: ddl-train --data TRAIN --arch ARCH [OPTION]...\n"                                           \
    "       ddl-train --predict --model CHECKPOINT --images FILE|DIR [--out CSV]\n"                     \
    "       ddl-train --predict --model CHECKPOINT --db CONNINFO --table T --out-table OUT\n"           \
    "Train a layer graph on your data, on one rank or on each rank ddlrun, mpirun, srun or torchrun\n"  \
    "starts. Defaults: --epochs 10 --batch 64 --optimizer sgd --lr 0.01 --schedule cosine.\n"          \
    "data (image folders: one sub-folder of .jpg/.png/.pgm/.ppm per class; numpy: .npy or .npz\n"       \
    "images (N,H,W[,C]) or (N,C,H,W) with --targets labels (N,) or masks (N,H,W); IDX: a directory\n"  \
    "of Fashion-MNIST's files, whose t10k set is the test set):\n"                                     \
    "  --data PATH [--targets T] the training set\n"                                                   \
    "  --val PATH [--val-targets T]   validation set, evaluated after every epoch\n"                  \
    "  --val-split F             or the fraction F of the training set, chosen by --seed\n"             \
    "  --test PATH [--test-targets T] test set, evaluated at the end (summary line)\n"                  \
    "  --image-size N|HxW        image folders: resize to this (default: the arch's input, else 64)\n" \
    "  --channels 1|3            image folders: gray or RGB (default: the arch's, else 3)\n"            \
    "  --skip-bad                leave out (and count) images that cannot be decoded\n"                 \
    "  --cache FILE              image folders decoded once into FILE (FILE.val, FILE.test), read\n"    \
    "                            back on later starts while the folders and sizes are the same\n"

/* the rest of --help (one string literal each: C99 guarantees 4095 bytes) */
#define USAGE_MORE                                                                                      \
    "model and training:\n"                                                                             \
    "  --arch ARCH               a preset (lenet, cnn, cnn:WIDTH, unet, unet:DEPTH:WIDTH), an arch\n"  \
    "                            text file (README: \"Your own data and model\"), or an ONNX file\n"   \
    "                            (FILE.onnx: its network and weights, trained on from there)\n"       \
    "  --augment flip,crop       random horizontal flips, random crops (padding --augment-pad, 4)\n"  \
    "  --in-order                every epoch in the data's order, not shuffled (to give another\n"   \
    "                            framework the same batches: PyTorch's shuffle=False)\n"            \
    "  --dropout P               where the arch has dropout without its own p (default 0)\n"          \
    "  --dice-weight W           segmentation: loss = cross-entropy + W * dice (default 0.5 with a\n"   \
    "                            dice head, else 0)\n"                                                  \
    "  --sync-bn                 BatchNorm with the whole global batch's statistics (every rank's,\n" \
    "                            every micro-batch's): any number of ranks gives one's bits (not\n"    \
    "                            with elastic ranks, DDL_COMPRESS or DDL_OVERLAP)\n"                   \
    EXAMPLE_USAGE_TRAINING EXAMPLE_USAGE_CHECKPOINTS                                                    \
    "inference (no training):\n"                                                                        \
    "  --predict --model M       classify --images FILE|DIR with checkpoint M (any ddl-train,\n"        \
    "                            lenet or graph checkpoint); folder names that are class names\n"      \
    "                            count as the truth; --out CSV|-: file,predicted,p_CLASS...\n"        \
    "  --db CONNINFO --table T   or score the rows of PostgreSQL table T (--id C, default id;\n"       \
    "  --out-table OUT           --image C, bytea, default img) on every rank, each its share,\n"    \
    "                            into OUT (created if missing) a batch per transaction;\n"          \
    "                            --db-timeout S: the longest a query waits (default 300)\n"

enum { OPT_TARGETS = EXAMPLE_OPT_END, OPT_VAL, OPT_VAL_TARGETS, OPT_VAL_SPLIT, OPT_TEST, OPT_TEST_TARGETS,
       OPT_IMAGE_SIZE, OPT_CHANNELS, OPT_SKIP_BAD, OPT_ARCH, OPT_AUGMENT, OPT_AUGMENT_PAD, OPT_DROPOUT, OPT_DICE,
       OPT_PREDICT, OPT_MODEL, OPT_IMAGES, OPT_OUT, OPT_CACHE, OPT_DB, OPT_TABLE, OPT_ID, OPT_IMAGE,
       OPT_OUT_TABLE, OPT_IN_ORDER, OPT_SYNC_BN, OPT_DB_TIMEOUT };

typedef struct opts {
    example_opts ex;
    tr_data data;
    tr_predict pred;
    const char *arch;
    int augment, augment_pad, predict, size_given, in_order;
    int sync_bn;             /* --sync-bn */
    float dropout, dice_weight;
} opts;

static void image_size(opts *o, const char *arg)
{
    int h, w, n;
    if (sscanf(arg, "%dx%d%n", &h, &w, &n) == 2 && !arg[n])
        o->data.height = h, o->data.width = w;
    else
        o->data.height = o->data.width = cli_int("--image-size", arg, 1, 4096);
    if (o->data.height < 1 || o->data.width < 1 || o->data.height > 4096 || o->data.width > 4096)
        cli_bad("--image-size", arg, "N or HxW, 1 to 4096 each");
    o->size_given = 1;
}

static void augment(opts *o, const char *arg)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", arg);
    o->augment = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (strcmp(t, "flip") == 0)
            o->augment |= DDL_AUGMENT_FLIP;
        else if (strcmp(t, "crop") == 0)
            o->augment |= DDL_AUGMENT_CROP;
        else if (strcmp(t, "none") != 0)
            cli_bad("--augment", arg, "flip, crop, both (flip,crop) or none");
}

static void option(opts *o, int c, const char *arg)
{
    switch (c) {
    case OPT_TARGETS: o->data.train_targets = arg; break;
    case OPT_VAL: o->data.val = arg; break;
    case OPT_VAL_TARGETS: o->data.val_targets = arg; break;
    case OPT_VAL_SPLIT: o->data.val_split = cli_float("--val-split", arg, 0.0001, 0.9999); break;
    case OPT_TEST: o->data.test = arg; break;
    case OPT_TEST_TARGETS: o->data.test_targets = arg; break;
    case OPT_IMAGE_SIZE: image_size(o, arg); break;
    case OPT_CHANNELS: o->data.channels = cli_int("--channels", arg, 1, 3); break;
    case OPT_SKIP_BAD: o->data.skip_bad = 1; break;
    case OPT_ARCH: o->arch = arg; break;
    case OPT_AUGMENT: augment(o, arg); break;
    case OPT_AUGMENT_PAD: o->augment_pad = cli_int("--augment-pad", arg, 1, 64); break;
    case OPT_DROPOUT: o->dropout = cli_float("--dropout", arg, 0, 0.99); break;
    case OPT_DICE: o->dice_weight = cli_float("--dice-weight", arg, 0, 100); break;
    case OPT_PREDICT: o->predict = 1; break;
    case OPT_MODEL: o->pred.model = arg; break;
    case OPT_IMAGES: o->pred.images = arg; break;
    case OPT_OUT: o->pred.out = arg; break;
    case OPT_CACHE: o->data.cache = arg; break;
    case OPT_DB: o->pred.db.db = arg; break;
    case OPT_TABLE: o->pred.db.table = arg; break;
    case OPT_ID: o->pred.db.id = arg; break;
    case OPT_IMAGE: o->pred.db.image = arg; break;
    case OPT_OUT_TABLE: o->pred.db.out_table = arg; break;
    case OPT_DB_TIMEOUT: o->pred.db.timeout = cli_int("--db-timeout", arg, 1, 86400); break;
    case OPT_IN_ORDER: o->in_order = 1; break;
    case OPT_SYNC_BN: o->sync_bn = 1; break;
    case 'h': fputs(USAGE, stdout), cli_help(USAGE_MORE); break;
    default: example_option(&o->ex, c, arg, USAGE); /* its --help is taken above */
    }
}

static void parse(opts *o, int argc, char **argv)
{
    static const struct option table[] = {
        EXAMPLE_OPTIONS, {"targets", required_argument, NULL, OPT_TARGETS}, {"val", required_argument, NULL, OPT_VAL},
        {"val-targets", required_argument, NULL, OPT_VAL_TARGETS}, {"val-split", required_argument, NULL, OPT_VAL_SPLIT},
        {"test", required_argument, NULL, OPT_TEST}, {"test-targets", required_argument, NULL, OPT_TEST_TARGETS},
        {"image-size", required_argument, NULL, OPT_IMAGE_SIZE}, {"channels", required_argument, NULL, OPT_CHANNELS},
        {"skip-bad", no_argument, NULL, OPT_SKIP_BAD}, {"arch", required_argument, NULL, OPT_ARCH},
        {"augment", required_argument, NULL, OPT_AUGMENT}, {"augment-pad", required_argument, NULL, OPT_AUGMENT_PAD},
        {"dropout", required_argument, NULL, OPT_DROPOUT}, {"dice-weight", required_argument, NULL, OPT_DICE},
        {"predict", no_argument, NULL, OPT_PREDICT}, {"model", required_argument, NULL, OPT_MODEL},
        {"images", required_argument, NULL, OPT_IMAGES}, {"out", required_argument, NULL, OPT_OUT},
        {"cache", required_argument, NULL, OPT_CACHE}, {"db", required_argument, NULL, OPT_DB},
        {"table", required_argument, NULL, OPT_TABLE}, {"id", required_argument, NULL, OPT_ID},
        {"image", required_argument, NULL, OPT_IMAGE}, {"out-table", required_argument, NULL, OPT_OUT_TABLE},
        {"in-order", no_argument, NULL, OPT_IN_ORDER},
        {"sync-bn", no_argument, NULL, OPT_SYNC_BN}, {"db-timeout", required_argument, NULL, OPT_DB_TIMEOUT},
        {NULL, 0, NULL, 0}};
    example_defaults(&o->ex);
    o->ex.data = NULL;
    o->ex.epochs = 10;
    o->ex.batch = 64;
    o->ex.lr = 0.01f;
    o->ex.schedule = DDL_SCHED_COSINE;
    o->dice_weight = -1.0f;
    cli_start(argv, "ddl-train");
    for (int c; (c = getopt_long(argc, argv, "h", table, NULL)) != -1;)
        option(o, c, optarg);
    example_options_done(&o->ex, argc, argv);
    o->pred.batch = o->ex.batch;
    o->data.seed = (uint64_t)o->ex.seed;
    o->data.train = o->ex.data;
    if (db_options_check(&o->pred.db))
        cli_error(db_options_check(&o->pred.db));
    if (o->predict && (!o->pred.model || !o->pred.images == !o->pred.db.db))
        cli_error("--predict needs --model CHECKPOINT and --images FILE|DIR or --db CONNINFO");
    if (o->pred.db.db && o->pred.out)
        cli_error("--db writes to --out-table: no --out");
    if (!o->predict && (o->pred.model || o->pred.images || o->pred.out || o->pred.db.db))
        cli_error("--model, --images, --out and --db go with --predict");
    if (!o->predict && (!o->data.train || !o->arch))
        cli_error("training needs --data PATH and --arch ARCH (a preset: lenet, cnn, unet; or a file)");
    if (o->data.val && o->data.val_split > 0)
        cli_error("--val and --val-split: give one");
}

/* ---- set-up ---- */

/* shape: the folders' channels and size: the flags, else the arch's input, else RGB at 64x64. */
static void shape(opts *o, const ddl_graph *g)
{
    int c, h, w;
    ddl_graph_input_shape(g, &c, &h, &w);
    if (!o->data.channels)
        o->data.channels = c ? c : 3;
    if (!o->size_given)
        o->data.height = h ? h : 64, o->data.width = w ? w : 64;
}

/* same_classes: a validation or test folder must name its classes as the training folder does. */
static int same_classes(const ddl_dataset *a, const ddl_dataset *b, const char *what, char *err)
{
    if (!b->n || !a->class_names || !b->class_names)
        return DDL_OK;
    for (int i = 0; i < a->n_classes && i < b->n_classes; i++)
        if (strcmp(a->class_names[i], b->class_names[i]) != 0)
            return snprintf(err, DDL_ERR_BYTES, "the %s set's class %d is \"%s\", the training set's \"%s\": give "
                            "both the same class folders", what, i, b->class_names[i], a->class_names[i]),
                   DDL_EINVAL;
    if (b->n_classes > a->n_classes)
        return snprintf(err, DDL_ERR_BYTES, "the %s set has %d classes, the training set %d", what, b->n_classes,
                        a->n_classes),
               DDL_EINVAL;
    return DDL_OK;
}

/* build: the model for the data: the graph's input from the data, its classes from the data (an
 * imported model: its own classes and weights). */
static int build(const opts *o, const ddl_graph *g, const ddl_onnx_import *im, const tr_sets *s, int local_batch,
                 ddl_model **m, char *err)
{
    const ddl_dataset *d = &s->train;
    ddl_model_config mc = {.batch = local_batch, .in_c = d->c, .in_h = d->h, .in_w = d->w,
                           .n_classes = d->n_classes > 1 ? d->n_classes : 2, .dropout = o->dropout, .plugin_config = g};
    mc.conv_algo = o->ex.conv_algo;
    int c, h, w;
    char why[DDL_ERR_BYTES / 2]; /* the load's few words, after the path */
    if (im->params && ddl_graph_output_shape(g, &mc, &c, &h, &w) == DDL_OK)
        mc.n_classes = c; /* the imported model's outputs; the data may use fewer of them */
    int rc = ddl_model_create(ddl_model_graph(), &mc, NULL, m, err, DDL_ERR_BYTES);
    if (rc == DDL_OK && im->params && (rc = ddl_onnx_import_load(im, *m, why, sizeof why)) != DDL_OK)
        snprintf(err, DDL_ERR_BYTES, "%.100s: %s", o->arch, why);
    /* an imported model keeps the input scaling it was made for, which the load set; else one mean
     * and std for gray images, one per channel for colour (torchvision's habit): the presets, and an
     * imported model that scales its input nowhere */
    if (rc == DDL_OK && !(im->params && im->own_norm)) {
        float mean, std, cm[DDL_MAX_NORM_CHANNELS], cs[DDL_MAX_NORM_CHANNELS];
        ddl_dataset_stats(d, &mean, &std);
        ddl_model_set_norm(*m, mean, std);
        if (d->c >= 2 && d->c <= DDL_MAX_NORM_CHANNELS) {
            ddl_dataset_stats_channels(d, cm, cs);
            ddl_model_set_norm_channels(*m, cm, cs); /* refused (the one kept) when a channel never varies */
        }
    }
    return rc;
}

/* ---- the run ---- */

typedef struct run {
    opts o;
    ddl_comm *comm;
    int rank, world;
    ddl_graph *g;
    ddl_onnx_import im;      /* --arch model.onnx: its weights, the training's start */
    tr_sets s;
    ddl_model *m;
    ddl_trainer *tr;
    example_watch w;
    ddl_eval_stats ev;       /* the last evaluation: of the test set at the end, else validation */
    int evaluated, preempted, segment;
    int bad_input;           /* the arch or the data was refused: exit 2 */
    double train_secs;
    long train_samples;
    char err[DDL_ERR_BYTES];
} run;

/* setup: graph, data, model and trainer (with --resume, where the checkpoint left off). */
static int setup(run *r)
{
    opts *o = &r->o;
    int rc = ddl_graph_create(NULL, &r->g);
    size_t n = strlen(o->arch);
    if (rc == DDL_OK && n > 5 && strcmp(o->arch + n - 5, ".onnx") == 0)
        rc = ddl_graph_import_onnx(r->g, o->arch, NULL, &r->im, r->err, sizeof r->err);
    else if (rc == DDL_OK)
        rc = ddl_graph_load(r->g, o->arch, r->err, sizeof r->err);
    if (rc == DDL_OK) {
        shape(o, r->g);
        o->data.write_cache = r->rank == 0;
        double t0 = example_seconds();
        rc = tr_load(&o->data, &r->s, r->err, sizeof r->err);
        if (rc == DDL_OK && r->rank == 0 && !o->ex.quiet)
            printf("data: %d training image%s of %dx%dx%d, %d classes, loaded in %.2f s%s\n", r->s.train.n,
                   r->s.train.n == 1 ? "" : "s", r->s.train.c, r->s.train.h, r->s.train.w, r->s.train.n_classes,
                   example_seconds() - t0,
                   r->s.cached ? " (from --cache)" : o->data.cache && r->s.decoded ? " (decoded, cached)" : "");
    }
    if (rc == DDL_OK && r->rank == 0 && r->s.skipped)
        printf("left out %d image%s that could not be decoded (--skip-bad)\n", r->s.skipped,
               r->s.skipped == 1 ? "" : "s");
    if (rc == DDL_OK)
        rc = same_classes(&r->s.train, &r->s.val, "validation", r->err);
    if (rc == DDL_OK)
        rc = same_classes(&r->s.train, &r->s.test, "test", r->err);
    if (rc == DDL_OK)
        rc = build(o, r->g, &r->im, &r->s, ddl_train_local_batch(o->ex.batch, example_shards(&o->ex, r->comm), r->comm), &r->m, r->err);
    if (rc != DDL_OK) {
        r->bad_input = rc != DDL_ENOMEM;
        return rc;
    }
    if (r->im.params && r->rank == 0 && !o->ex.quiet)
        printf("input: %s\n", r->im.own_norm ? "the model's own normalisation"
                                              : "normalised with the data's mean and std per channel");
    int c, h, w;
    ddl_model_output_shape(r->m, &c, &h, &w);
    r->segment = h * w > 1;
    ddl_train_config tc;
    example_train_config(&o->ex, r->comm, r->s.train.n, &tc);
    tc.augment = o->augment;
    tc.augment_pad = o->augment_pad;
    tc.in_order = o->in_order;
    tc.keep_weights = r->im.params != NULL; /* an imported model trains on from its weights */
    tc.dice_weight = o->dice_weight >= 0 ? o->dice_weight : ddl_graph_head(r->g) == DDL_HEAD_DICE ? 0.5f : 0.0f;
    tc.sync_bn = o->sync_bn;
    rc = example_watch_init(&r->w, &o->ex, "ddl-train", r->rank, r->world, r->s.train.n, &tc, r->err);
    r->w.comm = r->comm;
    r->w.eval_tag = r->s.has_val ? "val" : "test"; /* each epoch's evaluation; the test set's at the end */
    if (rc == DDL_OK)
        rc = ddl_trainer_create(&tc, r->m, &r->s.train, NULL, &r->tr, r->err, sizeof r->err);
    if (rc == DDL_EINVAL && tc.sync_bn && strncmp(r->err, "sync_bn: ", 9) == 0)
        r->bad_input = 1; /* a combination --sync-bn refuses: the command line's (exit 2) */
    int saved_world = 0;
    if (rc == DDL_OK && o->ex.resume)
        rc = ddl_trainer_resume(r->tr, o->ex.checkpoint, DDL_RESUME_IF_EXISTS, &saved_world);
    if (rc == DDL_OK && o->ex.resume && r->rank == 0)
        example_say_resumed(&o->ex, r->tr, saved_world, r->world);
    if (rc == DDL_OK) /* from here on SIGUSR1 asks for a checkpoint (with --checkpoint), SIGTERM and SIGINT
                       * end the run saying which checkpoint exists (example_signal.h) */
        example_signal_training(r->tr, r->rank, o->ex.checkpoint);
    if (rc == DDL_OK)
        rc = example_watch_start(&r->w, r->comm, r->m, r->tr);
    return rc;
}

/* epoch: one epoch (saving as --checkpoint asks), its line, and the validation set's metrics. */
static int epoch(run *r, int e)
{
    ddl_epoch_stats es;
    int rc;
    do {
        rc = example_step_save(&r->w, r->tr, r->comm, r->o.ex.checkpoint, r->o.ex.checkpoint_every, &r->preempted);
        if (rc == DDL_OK)
            example_test_stop(r->tr, ddl_trainer_step_count(r->tr));
    } while (rc == DDL_OK && !r->preempted && !ddl_trainer_epoch_done(r->tr));
    if (rc != DDL_OK || r->preempted || (rc = ddl_trainer_epoch_stats(r->tr, &es)) != DDL_OK)
        return rc;
    r->train_secs += es.seconds;
    r->train_samples += es.samples;
    const ddl_dataset *val = r->s.has_val ? &r->s.val : r->s.has_test ? &r->s.test : NULL;
    if (val && (rc = ddl_trainer_evaluate(r->tr, val, &r->ev)) != DDL_OK)
        return rc;
    r->evaluated = val != NULL;
    if (r->rank == 0 && !r->o.ex.quiet) {
        printf("epoch %d/%d  loss %.4f  train_acc %.4f", e + 1, r->o.ex.epochs, es.loss, es.accuracy);
        if (val)
            printf("  %s_loss %.4f  %s_acc %.4f", r->s.has_val ? "val" : "test", r->ev.loss,
                   r->s.has_val ? "val" : "test", r->ev.accuracy);
        if (val && r->segment)
            printf("  dice %.4f  miou %.4f", r->ev.dice, r->ev.miou);
        printf("  %.0f images/s  (%.1f s)\n", es.images_per_sec, es.seconds);
        fflush(stdout);
    }
    example_watch_epoch(&r->w, e + 1, &es, &r->ev, r->segment);
    return DDL_OK;
}

/* example_watch_test: ddl-train with a validation set: the test set's figures after the last
 * epoch (x: that epoch), under test/, flushed. */
static inline void example_watch_test(example_watch *w, int epoch, const ddl_eval_stats *ev, int segmentation)
{
    example_watch_eval(w, "test", epoch, ev, segmentation);
    if (w->events && ddl_summary_writer_flush(w->events) != DDL_OK)
        example_watch_events_failed(w);
}

static void summary(run *r, double t0)
{
    const char *arch = strrchr(r->o.arch, '/') ? strrchr(r->o.arch, '/') + 1 : r->o.arch;
    printf("summary: model=%s transport=%s world=%d epochs=%d batch=%d ", arch,
           r->comm ? ddl_comm_transport_name(r->comm) : "none", r->world, r->o.ex.epochs, r->o.ex.batch);
    if (r->s.has_test || r->s.has_val)
        printf("test_acc=%.4f test_loss=%.4f ", r->ev.accuracy, r->ev.loss);
    else /* nothing held out to measure on */
        printf("test_acc=- test_loss=- ");
    if (r->segment)
        printf("dice=%.4f miou=%.4f ", r->ev.dice, r->ev.miou);
    printf("images_per_sec=%.0f wall_s=%.1f weights_crc=%08x slowest_rank=%d comm_frac=%.3f",
           r->train_secs > 0 ? (double)r->train_samples / r->train_secs : 0.0, example_seconds() - t0,
           (unsigned)ddl_model_crc(r->m), r->w.last.slowest_rank, r->w.last.comm_frac);
    if (ddl_model_n_buffers(r->m)) /* BatchNorm's running statistics: not in the weights' CRC */
        printf(" buffers_crc=%08x", (unsigned)ddl_model_buffers_crc(r->m));
    printf("\n");
}

int main(int argc, char **argv)
{
    static run r; /* the program's state, zeroed */
    parse(&r.o, argc, argv);
    if (!r.o.predict) /* a signal from now on, while joining and loading too: example_signal.h */
        example_signal_install("ddl-train", r.o.ex.checkpoint, r.o.ex.resume);
    ddl_comm_config cc;
    static ddl_comm_env env; /* text cc may point into, kept as long as the comm */
    int rc = ddl_comm_config_from_env(&cc, &env, r.err, sizeof r.err);
    if (rc == DDL_OK && example_log_setup(&cc, "ddl-train") != 0)
        return 2;
    if (rc == DDL_OK && cc.world_size > 1 && (!r.o.predict || r.o.pred.db.db)) /* --db: every rank scores */
        rc = ddl_comm_create(&cc, NULL, &r.comm, r.err, sizeof r.err);
    if (rc != DDL_OK) {
        fprintf(stderr, "ddl-train: rank %d: cannot join the job: %s\n", cc.rank, r.err);
        return 1;
    }
    ddl_set_threads(r.o.ex.threads);
    if (r.o.predict && r.o.pred.db.db) {
        rc = tr_predict_db(&r.o.pred, r.comm);
        ddl_comm_destroy(r.comm);
        return rc;
    }
    if (r.o.predict) /* on rank 0 alone */
        return cc.rank == 0 ? tr_predict_run(&r.o.pred) : 0;
    r.rank = r.comm ? ddl_comm_rank(r.comm) : 0;
    r.world = r.comm ? ddl_comm_size(r.comm) : 1;
    double t0 = example_seconds();
    rc = setup(&r);
    int first = rc == DDL_OK ? ddl_trainer_epoch_index(r.tr) + ddl_trainer_epoch_done(r.tr) : 0;
    for (int e = first; rc == DDL_OK && !r.preempted && e < r.o.ex.epochs; e++)
        rc = epoch(&r, e);
    /* the summary's metrics: the test set when there is one, else the last validation */
    if (rc == DDL_OK && !r.preempted && r.s.has_test) {
        rc = ddl_trainer_evaluate(r.tr, &r.s.test, &r.ev);
        if (rc == DDL_OK && r.s.has_val) /* the epochs logged val/: the test set's figures once, at the end */
            example_watch_test(&r.w, r.o.ex.epochs, &r.ev, r.segment);
    } else if (rc == DDL_OK && !r.preempted && !r.evaluated && r.s.has_val)
        rc = ddl_trainer_evaluate(r.tr, &r.s.val, &r.ev);
    if (rc == DDL_OK && r.o.ex.save && !r.preempted)
        rc = ddl_trainer_save(r.tr, r.o.ex.save);
    if (rc == DDL_OK && !r.preempted)
        example_watch_profile(&r.w); /* --profile's table, before the summary */
    if (rc == DDL_OK && r.rank == 0 && !r.preempted)
        summary(&r, t0);
    if (rc != DDL_OK) {
        fprintf(stderr, "ddl-train: rank %d: %s\n", r.rank, r.tr ? ddl_trainer_error(r.tr) : r.err);
        if (r.o.ex.checkpoint) /* which checkpoint exists, and how to go on from it */
            example_checkpoint_say(r.comm ? ddl_comm_rank(r.comm) : 0);
    }
    if (example_watch_end(&r.w, r.comm, rc == DDL_OK) != DDL_OK && rc == DDL_OK)
        rc = DDL_EIO;
    ddl_trainer_destroy(r.tr);
    ddl_model_destroy(r.m);
    tr_free(&r.s);
    ddl_graph_destroy(r.g, NULL);
    ddl_onnx_import_free(&r.im, NULL);
    ddl_comm_destroy(r.comm);
    return rc != DDL_OK ? (r.bad_input ? 2 : 1) : r.preempted ? EXAMPLE_EXIT_PREEMPTED : 0;
}
