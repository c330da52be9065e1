/* lenet.c - train LeNet-5 on Fashion-MNIST, on one rank or on as many as ddlrun or mpirun start.
 * This is the full program, build/bin/lenet as make builds it: nothing else goes into it but ddl
 * and the headers it includes. The program to copy for a training run of your own; main reads top
 * to bottom: options, signals (common/example_signal.h), the comm from the environment, data and
 * model, trainer and an optional
 * resume, the epoch loop (checkpoints, a progress line per epoch on rank 0) and the summary line
 * (common/example_loop.h, which unet.c runs too), clean-up.
 *
 *   build/bin/lenet [--data DIR] [--epochs N] [--batch B] [--lr X] [--momentum M]
 *                   [--optimizer sgd|adam] [--weight-decay W] [--schedule constant|step|cosine]
 *                   [--warmup STEPS] [--dropout P] [--seed S] [--train-limit N] [--threads N]
 *                   [--micro-batches N] [--quiet]
 *                   [--checkpoint PATH [--checkpoint-every STEPS] [--resume]] [--save PATH]
 *                   [--save-rate BYTES_PER_SEC]
 *   build/bin/lenet --predict --model M [--images F [--labels F]] [--out CSV] [--batch B]
 *   build/bin/ddlrun -n 2 build/bin/lenet --epochs 10
 *
 * Flags as getopt_long reads them (--epochs 3, --epochs=3); --help, --version; a bad flag or value
 * exits 2 naming it. The flags lenet shares with unet are in common/example_common.h; --predict,
 * which classifies with a trained model instead of training one, is in common/example_predict.h.
 * Copy the folder common/ (at the top of the tree) along with this file, beside it; it builds with
 * cc lenet.c $(pkg-config --cflags --libs ddl). */
#include "ddl.h"

#include <getopt.h>
#include <stdio.h>

#include "common/example_common.h"
#include "common/example_loop.h"
#include "common/example_predict.h"

#define USAGE                                                                                \
    "usage: lenet [OPTION]...\n"                                                             \
    "Train LeNet-5 on Fashion-MNIST on one rank, or on each rank ddlrun or mpirun starts.\n" \
    "Defaults: --epochs 5 --batch 64 --optimizer sgd --lr 0.01 --schedule constant.\n"       \
    EXAMPLE_USAGE_TRAINING                                                                   \
    "  --dropout P               drop probability after fc1 and fc2 (default 0)\n"           \
    EXAMPLE_USAGE_CHECKPOINTS                                                                \
    "inference (no training):\n"                                                             \
    "  --predict --model M       classify the test set with checkpoint M: accuracy,\n"       \
    "                            confusion matrix, images/s (passes of --batch images)\n"    \
    "  --images F [--labels F]   an IDX file of 28x28 images (labels: F's labels-idx1 twin)\n" \
    "  --out CSV                 one row per image: index,predicted,truth,p0..p9\n"                 \
    "  --db URL --table T --id ID --image COL --out-table OUT\n"                                  \
    "                            score a PostgreSQL table instead (each rank its share, a\n"        \
    "                            transaction per batch; builds with libpq); --db-timeout S:\n"    \
    "                            the longest a query waits for the server (default 300)\n"

enum { OPT_DROPOUT = EXAMPLE_OPT_END, OPT_IMAGES };

/* parse_options: lenet's command line into o, po (--predict) and *dropout; exit 2 on a bad one. */
static void parse_options(int argc, char **argv, example_opts *o, predict_opts *po, float *dropout)
{
    static const struct option options[] = {EXAMPLE_OPTIONS, {"dropout", required_argument, NULL, OPT_DROPOUT},
                                            PREDICT_OPTIONS, {"images", required_argument, NULL, OPT_IMAGES},
                                            {NULL, 0, NULL, 0}};
    example_defaults(o);
    o->epochs = 5;
    o->batch = 64;
    o->lr = 0.01f;
    cli_start(argv, "lenet");
    for (int c; (c = getopt_long(argc, argv, "h", options, NULL)) != -1;)
        if (c == OPT_DROPOUT)
            *dropout = cli_float("--dropout", optarg, 0, 0.99);
        else if (c == OPT_IMAGES)
            po->images = optarg;
        else if (!predict_option(po, c, optarg))
            example_option(o, c, optarg, USAGE);
    example_options_done(o, argc, argv);
    predict_options_done(po);
    if (po->images && !po->on)
        cli_error("--images goes with --predict");
}

/* load: Fashion-MNIST's training and test sets from o->data, and LeNet-5 for this rank's part of
 * every global batch (local_batch: ddl_train_local_batch), its inputs normalised by the training set's mean and
 * standard deviation. DDL_OK, or a code with err saying why. */
static int load(const example_opts *o, int local_batch, float dropout, ddl_dataset *train, ddl_dataset *test,
                ddl_model **model, char err[DDL_ERR_BYTES])
{
    ddl_model_config mc = {.batch = local_batch, .in_c = 1, .in_h = 28, .in_w = 28,
                           .n_classes = 10, .dropout = dropout};
    mc.conv_algo = o->conv_algo;
    int rc = ddl_dataset_load_mnist(o->data, "train", NULL, train, err, DDL_ERR_BYTES);
    if (rc == DDL_OK)
        rc = ddl_dataset_load_mnist(o->data, "t10k", NULL, test, err, DDL_ERR_BYTES);
    if (rc == DDL_OK)
        rc = ddl_model_create(ddl_model_lenet(), &mc, NULL, model, err, DDL_ERR_BYTES);
    if (rc == DDL_OK) {
        float mean, std;
        ddl_dataset_stats(train, &mean, &std); /* Fashion-MNIST: 0.2860, 0.3530 */
        ddl_model_set_norm(*model, mean, std);
    }
    return rc;
}

int main(int argc, char **argv)
{
    example_opts o;
    predict_opts po = {0};
    float dropout = 0.0f;
    parse_options(argc, argv, &o, &po, &dropout);
    if (!po.on) /* a signal from now on, while joining and loading too: example_signal.h */
        example_signal_install("lenet", o.checkpoint, o.resume);

    /* ---- comm: ddlrun, mpirun or Slurm describe the job in the environment; alone, no comm ---- */
    ddl_comm_config cc;
    ddl_comm_env env;
    ddl_comm *comm = NULL;
    int rc = example_join("lenet", &cc, &env, &comm);
    if (rc != 0)
        return rc;
    int rank = comm ? ddl_comm_rank(comm) : 0; /* at the start: an elastic job may renumber its ranks */
    ddl_set_threads(o.threads);
    if (po.on) { /* inference with a trained model: example_predict.h */
        rc = predict_lenet(&po, &o, comm);
        ddl_comm_destroy(comm);
        return rc;
    }

    /* ---- data and model ---- */
    char err[DDL_ERR_BYTES];
    ddl_dataset train = {0}, test = {0};
    ddl_model *model = NULL;
    ddl_trainer *tr = NULL;
    example_watch w = {0}; /* progress, event files, timeline: example_watch.h */
    rc = load(&o, ddl_train_local_batch(o.batch, example_shards(&o, comm), comm), dropout, &train, &test, &model, err);

    /* ---- trainer, and with --resume the checkpoint to go on from ---- */
    if (rc == DDL_OK) {
        ddl_train_config tc;
        example_train_config(&o, comm, train.n, &tc);
        rc = example_trainer_start(&w, &o, "lenet", comm, &tc, model, &train, &tr, err);
    }

    /* ---- the epoch loop, the final save and the summary line of DESIGN.md (common/example_loop.h:
     * unet's too); or the error ---- */
    example_run run = {.prog = "lenet", .o = &o, .comm = comm, .tr = tr, .model = model, .test = &test, .w = &w};
    if (rc == DDL_OK)
        rc = example_train(&run);
    if (rc != DDL_OK)
        example_failed(&run, rank, err);

    /* ---- clean-up: DDL_TIMELINE's file first (collective, after a run that went well) ---- */
    if (example_watch_end(&w, comm, rc == DDL_OK) != DDL_OK && rc == DDL_OK)
        rc = DDL_EIO;
    ddl_trainer_destroy(tr);
    ddl_model_destroy(model);
    ddl_dataset_free(&train);
    ddl_dataset_free(&test);
    ddl_comm_destroy(comm);
    return rc != DDL_OK ? 1 : run.preempted ? EXAMPLE_EXIT_PREEMPTED : 0;
}
