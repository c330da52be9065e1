/* custom_model.c - bring your own model and data: a two-layer perceptron (dense, ReLU, dense)
 * trained data-parallel on a data set made in memory (points on interleaved spiral arms, labelled
 * by arm), on one rank or on as many as ddlrun or mpirun start. Rank 0 prints the accuracy of
 * every epoch, then the summary line of DESIGN.md (model=custom). Same seed and world size: the
 * same weights_crc on every run and over every transport.
 *
 *   build/bin/custom_model [--epochs N] [--batch B] [--lr X] [--hidden H] [--samples N]
 *                          [--classes K] [--seed S] [--plugin] [--quiet]
 *   build/bin/ddlrun -n 2 build/bin/custom_model
 *
 * The network is written twice, the two ways ddl takes a model of your own:
 *  - as a layer graph (ddl.h, "layer graphs"), a call per layer, with the backward pass derived by
 *    ddl: make_graph below, four lines. The way to start; the checkpoint carries the graph, so
 *    ddl-serve and ddl-ckpt export take it too.
 *  - as a hand-written model plugin (--plugin), the low-level way, for a layer the graph lacks:
 *    the same network, the same weights, the same weights_crc at the end.
 * A model plugin (ddl.h, "model plugin interface") is a const table of three functions. build()
 * declares the parameters (ddl_build_param) and the activation memory (ddl_build_scratch); the
 * core calls it twice, first only to measure, so it keeps the pointers it gets and never touches
 * them there. forward() writes the logits; backward() adds the parameter gradients. The core owns
 * all memory: the parameters and gradients are views into its two flat buffers, and the gradient
 * buffer is what the all-reduce averages over the ranks. A data set is n uint8 "images" (C, H, W)
 * with a uint8 target each; here C = H = 1 and W = 2, a point's x and y. */
#include "ddl.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common/example_cli.h" /* copy common/ along: the command line helpers */

/* ---- the model as a layer graph: input, fc1 (H units), ReLU, fc2 (one per class) ---- */

static ddl_graph *make_graph(int hidden)
{
    ddl_graph *g = NULL;
    if (ddl_graph_create(NULL, &g) != DDL_OK)
        return NULL;
    int x = ddl_graph_input(g, 0, 0, 0); /* the size from the model config */
    x = ddl_graph_relu(g, ddl_graph_dense(g, x, "fc1", hidden));
    ddl_graph_dense(g, x, "fc2", DDL_CLASSES);
    return g; /* a wrong layer would show in ddl_graph_error(g) and fail ddl_model_create */
}

/* ---- the same model as a plugin: fc1 (H, F), ReLU, fc2 (K, H), weights laid out as PyTorch's Linear ---- */

typedef struct mlp {
    int in, hidden, out;
    float *w1, *b1, *w2, *b2;     /* parameters */
    float *gw1, *gb1, *gw2, *gb2; /* their gradients */
    float *h, *dh;                /* (batch, hidden): fc1's output after ReLU, and its gradient */
} mlp;

/* mlp_config: the plugin's own settings, which reach build() as ddl_model_config.plugin_config */
typedef struct mlp_config {
    int hidden; /* units of the hidden layer (0: 64) */
} mlp_config;

static int mlp_build(void *self, const ddl_model_config *cfg, ddl_model_build *b)
{
    mlp *m = (mlp *)self;
    const mlp_config *mc = (const mlp_config *)cfg->plugin_config;
    m->in = cfg->in_c * cfg->in_h * cfg->in_w;
    m->hidden = mc && mc->hidden > 0 ? mc->hidden : 64;
    m->out = cfg->n_classes;
    if (m->out < 2) {
        ddl_build_fail(b, "mlp: needs at least 2 classes");
        return DDL_EINVAL;
    }
    int fc1[2] = {m->hidden, m->in}, fc2[2] = {m->out, m->hidden}; /* a bias: its weight's first dimension */
    m->w1 = ddl_build_param(b, "fc1.weight", 2, fc1, DDL_INIT_HE, m->in, m->hidden, &m->gw1);
    m->b1 = ddl_build_param(b, "fc1.bias", 1, fc1, DDL_INIT_ZERO, m->in, m->hidden, &m->gb1);
    m->w2 = ddl_build_param(b, "fc2.weight", 2, fc2, DDL_INIT_GLOROT, m->hidden, m->out, &m->gw2);
    m->b2 = ddl_build_param(b, "fc2.bias", 1, fc2, DDL_INIT_ZERO, m->hidden, m->out, &m->gb2);
    m->h = ddl_build_scratch(b, (size_t)cfg->batch * (size_t)m->hidden);
    m->dh = ddl_build_scratch(b, (size_t)cfg->batch * (size_t)m->hidden);
    ddl_build_output(b, m->out, 1, 1); /* a classifier: K logits per sample */
    return DDL_OK;
}

static void mlp_forward(void *self, const float *x, int batch, int training, ddl_rng *rng, float *logits)
{
    mlp *m = (mlp *)self;
    (void)training, (void)rng; /* no dropout */
    ddl_dense_forward(batch, m->in, m->hidden, x, m->w1, m->b1, m->h); /* (batch, hidden) */
    ddl_relu_forward((size_t)batch * (size_t)m->hidden, m->h, m->h);
    ddl_dense_forward(batch, m->hidden, m->out, m->h, m->w2, m->b2, logits); /* (batch, K) */
}

static void mlp_backward(void *self, const float *x, int batch, const float *dlogits, ddl_backward *pass)
{
    mlp *m = (mlp *)self;
    ddl_dense_backward(batch, m->hidden, m->out, m->h, m->w2, dlogits, m->dh, m->gw2, m->gb2);
    ddl_backward_ready(pass, m->gw2); /* fc2's gradients (and all after them) are final: ddl may send them now */
    ddl_relu_backward((size_t)batch * (size_t)m->hidden, m->h, m->dh, m->dh);
    ddl_dense_backward(batch, m->in, m->hidden, x, m->w1, m->dh, NULL, m->gw1, m->gb1); /* no dx: first layer */
}

static const ddl_model_plugin mlp_plugin = {
    .version = DDL_MODEL_VERSION,
    .name = "mlp",
    .self_bytes = sizeof(mlp),
    .build = mlp_build,
    .forward = mlp_forward,
    .backward = mlp_backward,
};

/* ---- the data: K spiral arms in the unit disc ---- */

/* spiral_sin: sin(a) (quarter 0) or cos(a) (quarter 1), in double from a Taylor series after
 * reducing a by pi/2, rounded to float. Why not sinf and cosf: they are libm's, and this file is
 * meant to build with `pkg-config --libs ddl` alone, which has no -lm. The bytes made below are
 * glibc's (no point of 12.8 million differed: 400 seeds, 2 to 9 arms, 4000 points). */
static float spiral_sin(float a, int quarter)
{
    double x = a, q = x * 0.63661977236758134308; /* 2/pi */
    long k = (long)(q < 0 ? q - 0.5 : q + 0.5);
    double r = x - (double)k * 1.57079632679489655800 - (double)k * 6.12323399573676603587e-17, r2 = r * r;
    double s = r, c = 1.0, ts = r, tc = 1.0; /* |r| <= pi/4: nine terms reach double precision */
    for (int i = 1; i <= 9; i++) {
        ts *= -r2 / ((2 * i) * (2 * i + 1));
        tc *= -r2 / ((2 * i - 1) * (2 * i));
        s += ts, c += tc;
    }
    switch ((unsigned long)(k + quarter) & 3) {
    case 0: return (float)s;
    case 1: return (float)c;
    case 2: return (float)-s;
    default: return (float)-c;
    }
}

/* spiral_byte: x in [0, 255.5) to the nearest byte, ties to even: lrintf's answer, without libm. */
static uint8_t spiral_byte(float x)
{
    long i = (long)x;
    float f = x - (float)i;
    return (uint8_t)(i + (f > 0.5f || (f == 0.5f && (i & 1))));
}

/* make_spirals: n points, each on one of k arms that turn 1.5 times from the centre out, with
 * noise; x and y in [-1, 1] stored as bytes 0..255. Every rank makes the same bytes from seed.
 * ddl_dataset_free frees them (owned, with the default allocator). */
static int make_spirals(int n, int k, uint64_t seed, ddl_dataset *d)
{
    uint8_t *mem = (uint8_t *)malloc((size_t)n * 3); /* images (n, 1, 1, 2), then targets (n, 1, 1) */
    if (!mem)
        return DDL_ENOMEM;
    ddl_rng r;
    ddl_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) {
        int arm = (int)ddl_rng_below(&r, (uint32_t)k);
        float t = ddl_rng_uniform(&r); /* 0 at the centre, 1 at the rim */
        float a = 6.2831853f /* 2 pi */ * ((float)arm / (float)k + 1.5f * t) + 0.15f * ddl_rng_normal(&r);
        mem[2 * i] = spiral_byte((t * spiral_sin(a, 1) + 1.0f) * 127.5f);
        mem[2 * i + 1] = spiral_byte((t * spiral_sin(a, 0) + 1.0f) * 127.5f);
        mem[2 * (size_t)n + i] = (uint8_t)arm;
    }
    *d = (ddl_dataset){.n = n, .c = 1, .h = 1, .w = 2, .th = 1, .tw = 1, .n_classes = k,
                       .images = mem, .targets = mem + 2 * (size_t)n, .owned = mem};
    return DDL_OK;
}

/* ---- main ---- */

#define USAGE                                                                                             \
    "usage: custom_model [OPTION]...\n"                                                                   \
    "Train a two-layer perceptron, a model plugin defined in this program, to tell the arms of a\n"       \
    "spiral apart, on one rank or on each rank ddlrun or mpirun starts.\n"                                \
    "  --epochs N      passes over the training set (default 40)\n"                                       \
    "  --batch B       global batch: each of R ranks takes B/R of it (default 32)\n"                      \
    "  --lr X          SGD learning rate, momentum 0.9, cosine schedule (default 0.1)\n"                  \
    "  --hidden H      units of the hidden layer (default 64)\n"                                          \
    "  --samples N     training points; a quarter as many more are held out for testing (default 4000)\n" \
    "  --classes K     spiral arms (default 3)\n"                                                         \
    "  --seed S        data, weights and shuffling (default 42)\n"                                        \
    "  --plugin        the hand-written model plugin instead of the layer graph (the same weights)\n"    \
    "  --quiet         no progress lines: only the summary\n"                                             \
    "  --help, --version\n"

int main(int argc, char **argv)
{
    /* ---- options ---- */
    static const struct option options[] = {
        {"epochs", required_argument, NULL, 'e'}, {"batch", required_argument, NULL, 'b'},
        {"lr", required_argument, NULL, 'l'},     {"hidden", required_argument, NULL, 'H'},
        {"samples", required_argument, NULL, 'n'}, {"classes", required_argument, NULL, 'k'},
        {"seed", required_argument, NULL, 's'},   {"quiet", no_argument, NULL, 'q'},
        {"plugin", no_argument, NULL, 'p'},       CLI_HELP_VERSION,
        {NULL, 0, NULL, 0}};
    int epochs = 40, batch = 32, hidden = 64, samples = 4000, classes = 3, quiet = 0, plugin = 0;
    long seed = 42;
    float lr = 0.1f;
    cli_start(argv, "custom_model");
    for (int c; (c = getopt_long(argc, argv, "h", options, NULL)) != -1;)
        switch (c) {
        case 'e': epochs = cli_int("--epochs", optarg, 0, 100000); break;
        case 'b': batch = cli_int("--batch", optarg, 1, 1 << 20); break;
        case 'l': lr = cli_float("--lr", optarg, 0, 100); break;
        case 'H': hidden = cli_int("--hidden", optarg, 1, 65536); break;
        case 'n': samples = cli_int("--samples", optarg, 1, 10000000); break;
        case 'k': classes = cli_int("--classes", optarg, 2, DDL_MAX_CLASSES); break;
        case 's': seed = cli_long("--seed", optarg, 0, 4294967295L); break;
        case 'q': quiet = 1; break;
        case 'p': plugin = 1; break;
        case 'h': cli_help(USAGE); break;
        case 'V': cli_version(); break;
        default: cli_try(); /* getopt_long named the flag */
        }
    cli_end(argc, argv, optind);

    /* ---- comm: ddlrun, mpirun or Slurm describe the job in the environment; alone, no comm ---- */
    char err[DDL_ERR_BYTES];
    ddl_comm_config cc;
    ddl_comm_env env; /* text the config's strings may point into (a launcher's address) */
    ddl_comm *comm = NULL;
    int rc = ddl_comm_config_from_env(&cc, &env, err, sizeof err);
    if (rc == DDL_OK && cc.world_size > 1)
        rc = ddl_comm_create(&cc, NULL, &comm, err, sizeof err);
    if (rc != DDL_OK) {
        fprintf(stderr, "custom_model: rank %d: cannot join the job: %s\n", cc.rank, err);
        return 1;
    }
    int rank = comm ? ddl_comm_rank(comm) : 0, world = comm ? ddl_comm_size(comm) : 1;

    /* ---- data, model and trainer: the graph (or the plugin) goes where ddl_model_lenet() would ---- */
    ddl_dataset train = {0}, test = {0};
    ddl_model *model = NULL;
    ddl_trainer *tr = NULL;
    ddl_graph *graph = plugin ? NULL : make_graph(hidden);
    rc = make_spirals(samples, classes, (uint64_t)seed, &train);
    if (rc == DDL_OK) /* held out: the same arms, other points */
        rc = make_spirals(samples / 4 > 0 ? samples / 4 : 1, classes, (uint64_t)seed + 1, &test);
    ddl_model_config mc = {.batch = (batch + world - 1) / world, .in_c = 1, .in_h = 1, .in_w = 2,
                           .n_classes = classes};
    mlp_config mlp_cfg = {.hidden = hidden};
    mc.plugin_config = plugin ? (const void *)&mlp_cfg : (const void *)graph;
    if (rc != DDL_OK || (!plugin && !graph))
        rc = DDL_ENOMEM, snprintf(err, sizeof err, "cannot allocate %d points", samples);
    else
        rc = ddl_model_create(plugin ? &mlp_plugin : ddl_model_graph(), &mc, NULL, &model, err, sizeof err);
    if (rc == DDL_OK) {
        float mean, std;
        ddl_dataset_stats(&train, &mean, &std);
        ddl_model_set_norm(model, mean, std);
        ddl_train_config tc;
        ddl_train_config_default(&tc); /* SGD, momentum 0.9 */
        tc.comm = comm;
        tc.epochs = epochs;
        tc.batch = batch;
        tc.seed = (uint64_t)seed;
        tc.optim.lr = lr;
        tc.schedule.kind = DDL_SCHED_COSINE; /* from lr down to 0 over the run: a calm last epoch */
        tc.schedule.total_steps = (long)epochs * ((samples + batch - 1) / batch);
        rc = ddl_trainer_create(&tc, model, &train, NULL, &tr, err, sizeof err);
    }

    /* ---- the epoch loop ---- */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double train_secs = 0.0;
    long train_samples = 0;
    ddl_eval_stats ev = {0};
    for (int e = 0; rc == DDL_OK && e < epochs; e++) {
        ddl_epoch_stats es;
        rc = ddl_trainer_epoch(tr, &es);
        if (rc == DDL_OK)
            rc = ddl_trainer_evaluate(tr, &test, &ev);
        if (rc != DDL_OK)
            break;
        train_secs += es.seconds;
        train_samples += es.samples;
        if (rank == 0 && !quiet)
            printf("epoch %d/%d  loss %.4f  train_acc %.4f  test_acc %.4f\n", e + 1, epochs, es.loss, es.accuracy,
                   ev.accuracy);
    }
    if (rc == DDL_OK && epochs == 0)
        rc = ddl_trainer_evaluate(tr, &test, &ev);
    clock_gettime(CLOCK_MONOTONIC, &t1);

    /* ---- the summary line, or the error; clean-up ---- */
    if (rc == DDL_OK && rank == 0)
        printf("summary: model=custom transport=%s world=%d epochs=%d batch=%d test_acc=%.4f test_loss=%.4f "
               "images_per_sec=%.0f wall_s=%.1f weights_crc=%08x\n",
               comm ? ddl_comm_transport_name(comm) : "none", world, epochs, batch, ev.accuracy, ev.loss,
               train_secs > 0 ? (double)train_samples / train_secs : 0.0,
               (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9,
               (unsigned)ddl_model_crc(model));
    if (rc != DDL_OK)
        fprintf(stderr, "custom_model: rank %d: %s\n", rank, tr ? ddl_trainer_error(tr) : err);
    ddl_trainer_destroy(tr);
    ddl_model_destroy(model);
    ddl_graph_destroy(graph, NULL); /* the model keeps a copy: free it any time after the create */
    ddl_dataset_free(&train);
    ddl_dataset_free(&test);
    ddl_comm_destroy(comm);
    return rc == DDL_OK ? 0 : 1;
}
