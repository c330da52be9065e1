/* unet.c - distributed image segmentation: train a U-Net on scenes composed of Fashion-MNIST
 * items, on one rank or on as many as ddlrun or mpirun start. This is the full program,
 * build/bin/unet as make builds it: nothing else goes into it but ddl and the headers it
 * includes. Its main reads as lenet.c's does (options, comm, data and model, trainer and resume,
 * the epoch loop and summary of common/example_loop.h, clean-up), with segmentation's own data,
 * metrics and pictures.
 *
 *   build/bin/unet [--scenes N] [--test-scenes N] [--size S] [--items N] [--depth D] [--width W]
 *                  [--dice-weight W] [--images DIR], and lenet's flags but --dropout: [--data DIR]
 *                  [--epochs N] [--batch B] [--lr X] [--momentum M] [--optimizer sgd|adam]
 *                  [--weight-decay W] [--schedule constant|step|cosine] [--warmup STEPS] [--seed S]
 *                  [--train-limit N] [--threads N] [--micro-batches N] [--quiet] [--checkpoint PATH
 *                  [--checkpoint-every STEPS] [--resume]] [--save PATH] [--save-rate BYTES_PER_SEC]
 *   build/bin/unet --predict --model M [--images DIR] [--test-scenes N] [--items N] [--batch B]
 *
 * Flags as getopt_long reads them (--size 32, --size=32); --help, --version; a bad flag or value
 * exits 2 naming it.
 * Training scenes are made from the training items, held-out test scenes from the t10k items
 * with another seed; every rank makes the same scenes. Each pixel is background (0) or
 * 1 + the class of the item on it (11 classes). The loss is cross-entropy + dice. Rank 0
 * prints loss, pixel accuracy, foreground dice and mean IoU per epoch, then one summary line;
 * with --images DIR it writes DIR/scene_NN.ppm for a few test scenes: input, truth and
 * prediction side by side, classes in a fixed palette.
 * With --predict (example_predict.h) it trains nothing: checkpoint M segments the held-out scenes
 * of the run that wrote it (its seed and canvas size), split over the ranks; rank 0 prints pixel
 * accuracy, dice and mean IoU and, with --images DIR, writes each scene's mask as
 * DIR/scene_NNNN.png in the same palette. With --db it segments a PostgreSQL table's images
 * instead, and makes no scenes. */
#include "ddl.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/example_common.h"
#include "common/example_loop.h"
#include "common/example_predict.h"

/* ---- pictures ---- */

#define PICTURES 8 /* test scenes drawn with --images */
#define ZOOM 4     /* each pixel drawn as ZOOM x ZOOM */

/* One colour per class: 0 background black, then 10 well-separated colours (classes > 10 wrap). */
static const uint8_t palette[11][3] = {
    {0, 0, 0},      {230, 25, 75},   {60, 180, 75},  {255, 225, 25}, {0, 130, 200},  {245, 130, 48},
    {145, 30, 180}, {70, 240, 240},  {240, 50, 230}, {210, 245, 60}, {250, 190, 212},
};

#define GAP (2 * ZOOM) /* white pixels between the panels */

/* scene_width: pixels across grey input | truth | prediction of an s x s scene, zoomed. */
static int scene_width(int s) { return 3 * s * ZOOM + 2 * GAP; }

/* draw_scene: one scene's three panels into rgb: s * ZOOM rows of scene_width(s) pixels. */
static void draw_scene(uint8_t *rgb, int s, const uint8_t *img, const uint8_t *truth, const uint8_t *pred)
{
    int w = scene_width(s);
    for (int y = 0; y < s * ZOOM; y++)
        for (int x = 0; x < w; x++) {
            int panel = x / (s * ZOOM + GAP), px = x % (s * ZOOM + GAP), i = (y / ZOOM) * s + px / ZOOM;
            uint8_t *out = rgb + ((size_t)y * (size_t)w + (size_t)x) * 3;
            memset(out, 255, 3); /* white gaps between the panels */
            if (px < s * ZOOM && panel == 0)
                out[0] = out[1] = out[2] = img[i];
            else if (px < s * ZOOM)
                memcpy(out, palette[(panel == 1 ? truth[i] : pred[i]) % 11], 3);
        }
}

/* write_picture: one PPM of a scene's three panels. */
static int write_picture(const char *path, int s, const uint8_t *img, const uint8_t *truth, const uint8_t *pred)
{
    size_t bytes = (size_t)scene_width(s) * (size_t)(s * ZOOM) * 3;
    uint8_t *rgb = (uint8_t *)malloc(bytes);
    FILE *f = rgb ? fopen(path, "wb") : NULL;
    if (!f) {
        free(rgb);
        return -1;
    }
    draw_scene(rgb, s, img, truth, pred);
    fprintf(f, "P6\n%d %d\n255\n", scene_width(s), s * ZOOM);
    size_t put = fwrite(rgb, 1, bytes, f);
    free(rgb);
    return fclose(f) == 0 && put == bytes ? 0 : -1;
}

/* predict_scenes: the predicted class of every pixel of the first n test scenes (n no more than
 * the model's batch) into pred (n, s, s). -1 when out of memory. */
static int predict_scenes(ddl_model *m, const ddl_dataset *test, int n, uint8_t *pred)
{
    int K, oh, ow;
    ddl_model_output_shape(m, &K, &oh, &ow);
    size_t px = (size_t)test->h * (size_t)test->w;
    float *x = (float *)malloc((size_t)n * px * sizeof(float));
    if (!x)
        return -1;
    float mean, std;
    ddl_model_norm(m, &mean, &std);
    for (size_t i = 0; i < (size_t)n * px; i++)
        x[i] = ((float)test->images[i] / 255.0f - mean) / std;
    const float *logits = ddl_model_forward(m, x, n, 0, NULL);
    for (int k = 0; k < n; k++) {
        const float *l = logits + (size_t)k * K * px;
        for (size_t p = 0; p < px; p++) {
            int best = 0;
            for (int c = 1; c < K; c++)
                if (l[(size_t)c * px + p] > l[(size_t)best * px + p])
                    best = c;
            pred[(size_t)k * px + p] = (uint8_t)best;
        }
    }
    free(x);
    return 0;
}

/* write_pictures: predict the first test scenes and draw them into dir. */
static int write_pictures(const char *dir, ddl_model *m, const ddl_dataset *test)
{
    int s = test->h, n = test->n < PICTURES ? test->n : PICTURES, B = ddl_model_get_config(m)->batch;
    n = n < B ? n : B;
    size_t px = (size_t)s * (size_t)s;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "unet: cannot create %s: %s\n", dir, strerror(errno));
        return -1;
    }
    uint8_t *pred = (uint8_t *)malloc((size_t)n * px);
    int rc = pred ? predict_scenes(m, test, n, pred) : -1;
    for (int k = 0; k < n && rc == 0; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/scene_%02d.ppm", dir, k);
        rc = write_picture(path, s, test->images + k * px, test->targets + k * px, pred + k * px);
        if (rc)
            fprintf(stderr, "unet: cannot write %s\n", path);
    }
    free(pred);
    return rc;
}

/* log_scenes: after each epoch (example_run.epoch_end), with --logdir (on rank 0: w->events), the
 * first test scenes one above the other as the image summary "test/scenes" of this epoch. */
static void log_scenes(example_run *r, int epoch)
{
    example_watch *w = r->w;
    ddl_model *m = r->model;
    const ddl_dataset *test = r->test;
    if (!w->events)
        return;
    int s = test->h, n = test->n < 4 ? test->n : 4, B = ddl_model_get_config(m)->batch;
    n = n < B ? n : B;
    size_t px = (size_t)s * (size_t)s, row = (size_t)scene_width(s) * (size_t)(s * ZOOM) * 3;
    int height = n * (s * ZOOM + GAP) - GAP;
    uint8_t *pred = (uint8_t *)malloc((size_t)n * px), *rgb = (uint8_t *)malloc((size_t)height * row / (s * ZOOM));
    if (pred && rgb && predict_scenes(m, test, n, pred) == 0) {
        memset(rgb, 255, (size_t)height * row / (s * ZOOM));
        for (int k = 0; k < n; k++)
            draw_scene(rgb + (size_t)k * (row + (size_t)GAP * row / (s * ZOOM)), s, test->images + k * px,
                       test->targets + k * px, pred + k * px);
        example_watch_image(w, "test/scenes", epoch, rgb, height, scene_width(s), 3);
    }
    free(pred);
    free(rgb);
}

/* ---- options ---- */

#define USAGE                                                                                          \
    "usage: unet [OPTION]...\n"                                                                        \
    "Train a U-Net to segment scenes of Fashion-MNIST items, on one rank or on each rank ddlrun or\n"  \
    "mpirun starts. Defaults: --epochs 16 --batch 32 --optimizer adam --lr 0.002 --schedule cosine.\n" \
    EXAMPLE_USAGE_TRAINING                                                                             \
    "segmentation:\n"                                                                                  \
    "  --scenes N                training scenes (default 6000)\n"                                     \
    "  --test-scenes N           held-out scenes (default 500)\n"                                      \
    "  --size S                  canvas of S x S pixels (default 64)\n"                                \
    "  --items N                 at most N items per scene (default 3)\n"                              \
    "  --depth D                 U-Net levels (default 3)\n"                                           \
    "  --width W                 channels of the first level (default 8)\n"                            \
    "  --dice-weight W           loss = cross-entropy + W * dice (default 0.5)\n"                      \
    "  --images DIR              draw a few test scenes into DIR/scene_NN.ppm\n"                       \
    EXAMPLE_USAGE_CHECKPOINTS                                                                          \
    "inference (no training):\n"                                                                       \
    "  --predict --model M       segment the held-out scenes of M's run (its seed and size):\n"        \
    "                            pixel accuracy, dice, mean IoU, images/s; with --images DIR\n"        \
    "                            each scene's mask as DIR/scene_NNNN.png\n"                        \
    "  --db URL --table T --id ID --image COL --out-table OUT\n"                                       \
    "                            segment a PostgreSQL table's images instead (masks as bytea;\n"  \
    "                            needs no --data); --db-timeout S: the longest a query waits\n"   \
    "                            for the server (default 300)\n"

enum { OPT_SCENES = EXAMPLE_OPT_END, OPT_TEST_SCENES, OPT_SIZE, OPT_ITEMS, OPT_DEPTH, OPT_WIDTH, OPT_DICE, OPT_IMAGES };

typedef struct unet_opts {
    int scenes, test_scenes, size, items, depth, width;
    float dice_weight;
    const char *images;
} unet_opts;

/* unet_option: one of unet's own flags; anything else goes to the shared ones. */
static void unet_option(example_opts *o, unet_opts *u, int c, const char *arg)
{
    switch (c) {
    case OPT_SCENES: u->scenes = cli_int("--scenes", arg, 1, 10000000); break;
    case OPT_TEST_SCENES: u->test_scenes = cli_int("--test-scenes", arg, 1, 10000000); break;
    case OPT_SIZE: u->size = cli_int("--size", arg, 1, 4096); break;
    case OPT_ITEMS: u->items = cli_int("--items", arg, 1, 1000); break;
    case OPT_DEPTH: u->depth = cli_int("--depth", arg, 1, 16); break;
    case OPT_WIDTH: u->width = cli_int("--width", arg, 1, 4096); break;
    case OPT_DICE: u->dice_weight = cli_float("--dice-weight", arg, 0, 100); break;
    case OPT_IMAGES: u->images = arg; break;
    default: example_option(o, c, arg, USAGE);
    }
}

/* parse_options: unet's command line into o, u and po (--predict); exit 2 on a bad one.
 * Defaults measured with `ddlrun -n 2 build/bin/unet` on 2 idle cores: dice 0.986, mIoU 0.478,
 * pixel accuracy 0.936 on held-out scenes in 310 s. 64x64 canvases keep several items apart (at
 * 32x32 one item fills the canvas); depth 3 sees a whole 28x28 item from the 8x8 bottom.
 * Telling the 10 classes apart is the slow part: SGD 0.05 with dice weight 1 found the items
 * (dice 0.98) but stayed at "one class for every item" (mIoU 0.15 after 8 epochs); Adam 0.002
 * with dice weight 0.5 leaves that plateau and keeps improving over 16 epochs. */
static void parse_options(int argc, char **argv, example_opts *o, unet_opts *u, predict_opts *po)
{
    static const struct option options[] = {
        EXAMPLE_OPTIONS,
        {"scenes", required_argument, NULL, OPT_SCENES}, {"test-scenes", required_argument, NULL, OPT_TEST_SCENES},
        {"size", required_argument, NULL, OPT_SIZE},     {"items", required_argument, NULL, OPT_ITEMS},
        {"depth", required_argument, NULL, OPT_DEPTH},   {"width", required_argument, NULL, OPT_WIDTH},
        {"dice-weight", required_argument, NULL, OPT_DICE}, {"images", required_argument, NULL, OPT_IMAGES},
        PREDICT_OPTIONS, {NULL, 0, NULL, 0}};
    example_defaults(o);
    o->epochs = 16;
    o->batch = 32;
    o->optimizer = DDL_OPTIM_ADAM;
    o->lr = 0.002f;
    o->schedule = DDL_SCHED_COSINE;
    *u = (unet_opts){.scenes = 6000, .test_scenes = 500, .size = 64, .items = 3, .depth = 3, .width = 8,
                     .dice_weight = 0.5f};
    cli_start(argv, "unet");
    for (int c; (c = getopt_long(argc, argv, "h", options, NULL)) != -1;)
        if (!predict_option(po, c, optarg))
            unet_option(o, u, c, optarg);
    example_options_done(o, argc, argv);
    predict_options_done(po);
    if (po->out || po->labels)
        cli_error("--out and --labels are lenet's: unet --predict writes masks to --images DIR");
    po->images = u->images; /* with --predict: where the masks go */
}

/* ---- data ---- */

/* scene_seed: the scenes' seed of a run's --seed: training scenes s, held-out ones s + 1. */
static uint64_t scene_seed(long seed) { return (uint64_t)seed * 0x9E3779B97F4A7C15ull + 0x7363656e65ull; /* "scene" */ }

/* make_test: the held-out scenes, from the t10k items in dir: other items, another seed. */
static int make_test(const char *dir, const unet_opts *u, long seed, ddl_dataset *test, char err[DDL_ERR_BYTES])
{
    ddl_dataset items = {0};
    int rc = ddl_dataset_load_mnist(dir, "t10k", NULL, &items, err, DDL_ERR_BYTES);
    if (rc == DDL_OK)
        rc = ddl_dataset_make_scenes(&items, u->test_scenes, u->size, u->items, scene_seed(seed) + 1, NULL, test,
                                     err, DDL_ERR_BYTES);
    ddl_dataset_free(&items);
    return rc;
}

/* load: training and test scenes from the Fashion-MNIST items in o->data, and the U-Net for this
 * rank's part of every global batch (local_batch: ddl_train_local_batch), its inputs normalised by the training
 * scenes' mean and standard deviation. DDL_OK, or a code with err saying why. */
static int load(const example_opts *o, const unet_opts *u, int local_batch, ddl_dataset *train, ddl_dataset *test,
                ddl_model **model, char err[DDL_ERR_BYTES])
{
    ddl_dataset items = {0};
    int rc = ddl_dataset_load_mnist(o->data, "train", NULL, &items, err, DDL_ERR_BYTES);
    if (rc == DDL_OK)
        rc = ddl_dataset_make_scenes(&items, u->scenes, u->size, u->items, scene_seed(o->seed), NULL, train, err,
                                     DDL_ERR_BYTES);
    ddl_dataset_free(&items);
    if (rc == DDL_OK)
        rc = make_test(o->data, u, o->seed, test, err);
    ddl_model_config mc = {.batch = local_batch, .in_c = 1, .in_h = u->size, .in_w = u->size,
                           .n_classes = train->n_classes, .conv_algo = o->conv_algo};
    ddl_unet_config uc = {.depth = u->depth, .width = u->width}; /* read by the build alone */
    mc.plugin_config = &uc;
    if (rc == DDL_OK)
        rc = ddl_model_create(ddl_model_unet(), &mc, NULL, model, err, DDL_ERR_BYTES);
    if (rc == DDL_OK) {
        float mean, std;
        ddl_dataset_stats(train, &mean, &std);
        ddl_model_set_norm(*model, mean, std);
    }
    return rc;
}

/* ---- --predict: a trained model on the held-out scenes of its run (example_predict.h) ---- */

static int predict(const example_opts *o, unet_opts u, const predict_opts *po, ddl_comm *comm)
{
    predict_run r = {.prog = "unet", .comm = comm, .rank = ddl_comm_rank(comm), .world = ddl_comm_size(comm),
                     .batch = o->batch};
    ddl_dataset test = {0};
    char err[DDL_ERR_BYTES];
    int ok = (r.pr = predict_open(&r, po, ddl_model_unet())) != NULL;
    if (ok && !po->db.db) { /* the scenes of the checkpoint's canvas and seed (--db scores the table's rows alone) */
        u.size = ddl_model_get_config(ddl_predictor_model(r.pr))->in_h;
        ok = make_test(o->data, &u, (long)ddl_predictor_info(r.pr)->seed, &test, err) == DDL_OK || predict_fail(&r, err) == 0;
    }
    int rc = predict_agree(&r, ok) ? predict_segment(&r, &test, po->images, palette, 11) : 1;
    ddl_predictor_close(r.pr);
    ddl_dataset_free(&test);
    return rc;
}

/* ---- main ---- */

int main(int argc, char **argv)
{
    example_opts o;
    unet_opts u;
    predict_opts po = {0};
    parse_options(argc, argv, &o, &u, &po);
    if (!po.on) /* a signal from now on, while joining and loading too: example_signal.h */
        example_signal_install("unet", o.checkpoint, o.resume);

    /* ---- comm: ddlrun, mpirun or Slurm describe the job in the environment; alone, no comm ---- */
    ddl_comm_config cc;
    ddl_comm_env env;
    ddl_comm *comm = NULL;
    int rc = example_join("unet", &cc, &env, &comm);
    if (rc != 0)
        return rc;
    int rank = comm ? ddl_comm_rank(comm) : 0; /* at the start: an elastic job may renumber its ranks */
    ddl_set_threads(o.threads);
    if (po.on) { /* inference with a trained model */
        rc = predict(&o, u, &po, comm);
        ddl_comm_destroy(comm);
        return rc;
    }

    /* ---- data and model: every rank makes the same scenes ---- */
    char err[DDL_ERR_BYTES];
    ddl_dataset train = {0}, test = {0};
    ddl_model *model = NULL;
    ddl_trainer *tr = NULL;
    example_watch w = {0}; /* progress, event files, timeline: example_watch.h */
    rc = load(&o, &u, ddl_train_local_batch(o.batch, example_shards(&o, comm), comm), &train, &test, &model, err);

    /* ---- trainer, and with --resume the checkpoint to go on from ---- */
    if (rc == DDL_OK) {
        ddl_train_config tc;
        example_train_config(&o, comm, train.n, &tc);
        tc.dice_weight = u.dice_weight;
        rc = example_trainer_start(&w, &o, "unet", comm, &tc, model, &train, &tr, err);
    }

    /* ---- the epoch loop, the final save and the summary line, lenet's (common/example_loop.h) with
     * segmentation's metrics (pixel accuracy, dice and mean IoU on the held-out scenes) and each
     * epoch's test scenes in the event file; or the error; then --images ---- */
    example_run run = {.prog = "unet", .o = &o, .comm = comm, .tr = tr, .model = model, .test = &test, .w = &w,
                       .segmentation = 1, .epoch_end = log_scenes};
    if (rc == DDL_OK)
        rc = example_train(&run);
    if (rc != DDL_OK)
        example_failed(&run, rank, err);
    else if (u.images && rank == 0 && write_pictures(u.images, model, &test) != 0)
        rc = DDL_EIO; /* write_pictures said why */

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
