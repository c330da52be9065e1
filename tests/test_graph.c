/* test_graph.c - the layer graph: LeNet and U-Net as graphs give their hand-written plugins'
 * weights, logits and gradients bit for bit (one thread and two); every layer passes the
 * finite-difference gradient check, skips and shared inputs included; the text format reads
 * back what it writes; wrong graphs and wrong lines are refused with the layer or line named. */
#include "check.h"
#include "random_input.h"
#include "ddl.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ddl_graph *G(void)
{
    ddl_graph *g = NULL;
    CHECK(ddl_graph_create(NULL, &g) == DDL_OK);
    return g;
}

static ddl_model *build(const ddl_model_plugin *p, ddl_model_config mc, char *err)
{
    ddl_model *m = NULL;
    if (ddl_model_create(p, &mc, NULL, &m, err, DDL_ERR_BYTES) != DDL_OK)
        fprintf(stderr, "build: %s\n", err);
    return m;
}

/* same_as_plugin: the graph preset and the plugin agree in parameter names, init, logits (training
 * with dropout, same RNG) and gradients, bit for bit. */
static void same_as_plugin(const char *preset, const ddl_model_plugin *plugin, ddl_model_config mc)
{
    char err[DDL_ERR_BYTES];
    ddl_graph *g = G();
    CHECK(ddl_graph_preset(g, preset, err, sizeof err) == DDL_OK);
    ddl_model_config gc = mc;
    gc.plugin_config = g;
    ddl_model *a = build(plugin, mc, err), *b = build(ddl_model_graph(), gc, err);
    CHECK(a && b);
    if (!a || !b)
        return;
    CHECK(ddl_model_n_tensors(a) == ddl_model_n_tensors(b));
    CHECK(ddl_model_signature(a) == ddl_model_signature(b)); /* names and shapes, in order */
    ddl_model_init_weights(a, 7);
    ddl_model_init_weights(b, 7);
    CHECK(ddl_model_crc(a) == ddl_model_crc(b));
    int c, h, w;
    ddl_model_output_shape(a, &c, &h, &w);
    size_t nx = (size_t)mc.batch * mc.in_c * mc.in_h * mc.in_w, ny = (size_t)mc.batch * c * h * w;
    float *x = random_input(nx, 3), *dy = random_input(ny, 4);
    for (int threads = 1; threads <= 2; threads++) {
        ddl_set_threads(threads);
        ddl_rng ra, rb;
        ddl_rng_seed(&ra, 11);
        ddl_rng_seed(&rb, 11);
        const float *ya = ddl_model_forward(a, x, mc.batch, 1, &ra);
        float *keep = malloc(ny * sizeof *keep);
        memcpy(keep, ya, ny * sizeof *keep);
        const float *yb = ddl_model_forward(b, x, mc.batch, 1, &rb);
        CHECK(memcmp(keep, yb, ny * sizeof *keep) == 0);
        ddl_model_zero_grads(a);
        ddl_model_zero_grads(b);
        ddl_model_backward(a, x, mc.batch, dy);
        ddl_model_backward(b, x, mc.batch, dy);
        CHECK(memcmp(ddl_model_grads(a), ddl_model_grads(b), ddl_model_n_params(a) * sizeof(float)) == 0);
        /* a smaller batch than built for */
        ya = ddl_model_forward(a, x, 1, 0, NULL);
        memcpy(keep, ya, (size_t)c * h * w * sizeof *keep);
        yb = ddl_model_forward(b, x, 1, 0, NULL);
        CHECK(memcmp(keep, yb, (size_t)c * h * w * sizeof *keep) == 0);
        free(keep);
    }
    ddl_set_threads(1);
    free(x);
    free(dy);
    ddl_model_destroy(a);
    ddl_model_destroy(b);
    ddl_graph_destroy(g, NULL);
}

/* every_layer: a graph with every kind of layer, skips, a shared input and a residual add; a
 * channel shuffle read by two slices whose channels overlap (their gradients add there). */
static ddl_graph *every_layer(void)
{
    ddl_graph *g = G();
    int x = ddl_graph_input(g, 2, 8, 8);
    int a = ddl_graph_conv2d(g, x, "c1", 4, 3, 1, 1, 1);                       /* 4x8x8 */
    int n = ddl_graph_relu(g, ddl_graph_groupnorm(g, a, "gn", 2));
    int p = ddl_graph_maxpool(g, n, 2, 2);                                      /* 4x4x4 */
    int b = ddl_graph_conv2d(g, p, "c2", 4, 3, 1, 1, 0);
    int r = ddl_graph_add(g, ddl_graph_relu(g, b), p);                          /* residual */
    int u = ddl_graph_deconv2d(g, r, "up", 3, 2, 2, 0);                         /* 3x8x8 */
    int cat = ddl_graph_concat(g, n, u);                                        /* 7x8x8, n read twice */
    int v = ddl_graph_avgpool(g, ddl_graph_conv2d(g, cat, "c3", 6, 1, 1, 0, 1), 2, 2); /* 6x4x4 */
    int sh = ddl_graph_shuffle(g, v, 2);                       /* ShuffleNet's (3 a group: not its own inverse) */
    int halves = ddl_graph_concat(g, ddl_graph_slice(g, sh, 0, 2),             /* two slices of sh, */
                                  ddl_graph_act(g, ddl_graph_slice(g, sh, 1, 4), DDL_ACT_TANH, 0, 0)); /* overlapping */
    int s = ddl_graph_conv2d(g, halves, "c4", 5, 3, 2, 1, 1);                   /* stride 2: 5x2x2 */
    int gp = ddl_graph_global_avgpool(g, s);
    int f = ddl_graph_flatten(g, v);                                            /* 96 */
    int d = ddl_graph_dropout(g, ddl_graph_linear(g, f, "fc1", 5, 0), 0.5f);           /* no bias */
    int sum = ddl_graph_add(g, ddl_graph_flatten(g, gp), d);
    ddl_graph_dense(g, sum, "fc2", DDL_CLASSES);
    CHECK(ddl_graph_error(g)[0] == '\0');
    return g;
}

static void gradients(void)
{
    char err[DDL_ERR_BYTES];
    int rc;
    ddl_graph *g = every_layer();
    ddl_model_config mc = {.batch = 3, .in_c = 2, .in_h = 8, .in_w = 8, .n_classes = 3, .plugin_config = g};
    ddl_model *m = build(ddl_model_graph(), mc, err);
    CHECK(m != NULL);
    if (m) { /* the built model's config points at its own copy of the graph, not the caller's */
        const ddl_model_config *kept = ddl_model_get_config(m);
        char a[4096], b[4096];
        CHECK(kept->plugin_config && kept->plugin_config != g &&
              ddl_graph_format((const ddl_graph *)kept->plugin_config, a, sizeof a) > 0 &&
              ddl_graph_format(g, b, sizeof b) > 0 && strcmp(a, b) == 0);
        ddl_model_init_weights(m, 5);
        float *x = random_input(3 * 2 * 8 * 8, 9);
        double worst = 1.0;
        rc = ddl_model_check_grads(m, x, 3, 21, 12, 2e-2, &worst, err, sizeof err);
        if (rc != DDL_OK)
            fprintf(stderr, "every layer: %s\n", err);
        CHECK(rc == DDL_OK);
        CHECK(worst < 2e-2);
        free(x);
        ddl_model_destroy(m);
    }
    /* the hand-written plugins pass it too */
    ddl_model_config lc = {.batch = 2, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10};
    ddl_model *l = build(ddl_model_lenet(), lc, err);
    if (l) {
        ddl_model_init_weights(l, 1);
        float *x = random_input(2 * 784, 2);
        rc = ddl_model_check_grads(l, x, 2, 3, 6, 2e-2, NULL, err, sizeof err);
        if (rc != DDL_OK)
            fprintf(stderr, "lenet: %s\n", err);
        CHECK(rc == DDL_OK);
        CHECK(ddl_model_check_grads(l, x, 3, 3, 6, 2e-2, NULL, err, sizeof err) == DDL_EINVAL);
        free(x);
        ddl_model_destroy(l);
    }
    ddl_graph_destroy(g, NULL);
}

/* relu_into_pool: a ReLU read by a max-pool alone has its backward run in the pool's (the 2x2
 * window's AVX-512 rows at 16x16, ResNet's overlapping 3x3 stride-2 window), masked by the pool's
 * output, which a dropout after it must leave whole; one read by a pool and another layer keeps
 * its own. The gradients still match the differences, in training (dropout drawn) and
 * evaluation. */
static void relu_into_pool(void)
{
    char err[DDL_ERR_BYTES];
    ddl_graph *g = G();
    int x = ddl_graph_input(g, 2, 16, 16);
    int p = ddl_graph_maxpool(g, ddl_graph_relu(g, ddl_graph_conv2d(g, x, "c1", 4, 3, 1, 1, 1)), 2, 2); /* 4x8x8 */
    int d = ddl_graph_dropout(g, p, 0.3f);
    const ddl_pool2d stem = {3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0};
    int q = ddl_graph_maxpool_ex(g, ddl_graph_relu(g, ddl_graph_conv2d(g, d, "c2", 4, 3, 1, 1, 1)), &stem); /* 4x4x4 */
    int t = ddl_graph_relu(g, ddl_graph_conv2d(g, q, "c3", 4, 3, 1, 1, 1)); /* read twice: its own backward */
    int u = ddl_graph_dense(g, ddl_graph_flatten(g, ddl_graph_maxpool(g, t, 2, 2)), "fa", DDL_CLASSES);
    ddl_graph_add(g, u, ddl_graph_dense(g, ddl_graph_global_avgpool(g, t), "fb", DDL_CLASSES));
    CHECK(ddl_graph_error(g)[0] == '\0');
    ddl_model_config mc = {.batch = 3, .in_c = 2, .in_h = 16, .in_w = 16, .n_classes = 3, .plugin_config = g};
    ddl_model *m = build(ddl_model_graph(), mc, err);
    CHECK(m != NULL);
    if (m) {
        ddl_model_init_weights(m, 4);
        float *in = random_input(3 * 2 * 16 * 16, 6);
        double worst = 1.0;
        int rc = ddl_model_check_grads_training(m, in, 3, 5, 12, 2e-2, &worst, err, sizeof err);
        if (rc != DDL_OK)
            fprintf(stderr, "relu into pool, training: %s\n", err);
        CHECK(rc == DDL_OK && worst < 2e-2);
        rc = ddl_model_check_grads(m, in, 3, 7, 12, 2e-2, &worst, err, sizeof err);
        if (rc != DDL_OK)
            fprintf(stderr, "relu into pool: %s\n", err);
        CHECK(rc == DDL_OK && worst < 2e-2);
        free(in);
        ddl_model_destroy(m);
    }
    ddl_graph_destroy(g, NULL);
}

/* a plugin whose backward misses a factor must fail the check: its forward doubles the logits,
 * its backward is the graph's */
static ddl_model_plugin broken;
static void broken_forward(void *self, const float *x, int batch, int training, ddl_rng *rng, float *logits)
{
    ddl_model_graph()->forward(self, x, batch, training, rng, logits);
    for (int i = 0; i < batch * 2; i++)
        logits[i] *= 2.0f;
}

static void check_catches_errors(void)
{
    char err[DDL_ERR_BYTES];
    ddl_graph *g = G();
    int x = ddl_graph_input(g, 1, 4, 4);
    ddl_graph_dense(g, ddl_graph_relu(g, ddl_graph_dense(g, x, "a", 6)), "b", 2);
    ddl_model_config mc = {.batch = 2, .in_c = 1, .in_h = 4, .in_w = 4, .n_classes = 2, .plugin_config = g};
    ddl_model *m = build(ddl_model_graph(), mc, err);
    CHECK(m != NULL);
    if (m) {
        ddl_model_init_weights(m, 2);
        float *in = random_input(32, 1);
        CHECK(ddl_model_check_grads(m, in, 2, 1, 8, 1e-2, NULL, err, sizeof err) == DDL_OK);
        ddl_model_destroy(m);
        broken = *ddl_model_graph();
        broken.forward = broken_forward;
        broken.name = "broken";
        m = build(&broken, mc, err);
        ddl_model_init_weights(m, 2);
        double worst = 0.0;
        CHECK(ddl_model_check_grads(m, in, 2, 1, 8, 1e-2, &worst, err, sizeof err) == DDL_EMISMATCH);
        CHECK(worst > 0.3); /* |a - 2a| / 3a */
        CHECK(strstr(err, "gradient check: error") && strstr(err, ".weight["));
        free(in);
        ddl_model_destroy(m);
    }
    ddl_graph_destroy(g, NULL);
}

static void text_round_trip(void)
{
    char err[DDL_ERR_BYTES], a[4096], b[4096];
    const char *presets[] = {"lenet", "unet", "unet:2:4", "cnn", "cnn:8"};
    ddl_graph *g = G(), *h = G();
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        CHECK(ddl_graph_preset(g, presets[i], err, sizeof err) == DDL_OK);
        size_t n = ddl_graph_format(g, a, sizeof a);
        CHECK(n > 0 && n < sizeof a);
        CHECK(ddl_graph_parse(h, a, err, sizeof err) == DDL_OK);
        CHECK(ddl_graph_format(h, b, sizeof b) == n);
        CHECK(strcmp(a, b) == 0);
        CHECK(memcmp(g, h, ddl_graph_sizeof()) == 0); /* the same graph, byte for byte */
    }
    ddl_graph *e = every_layer();
    ddl_graph_format(e, a, sizeof a);
    CHECK(ddl_graph_parse(h, a, err, sizeof err) == DDL_OK);
    CHECK(memcmp(e, h, ddl_graph_sizeof()) == 0);
    /* a truncated buffer still says how long the whole text is, and holds its start */
    size_t whole = ddl_graph_format(e, NULL, 0);
    ddl_graph_format(e, b, sizeof b);
    CHECK(whole > 10 && whole == strlen(b));
    CHECK(ddl_graph_format(e, a, 10) == whole);
    CHECK(strlen(a) == 9 && strncmp(a, b, 9) == 0);
    /* the README's example */
    const char *text = "# a small residual network\n"
                       "input 3 32 32\n"
                       "conv stem 16 3 pad=1\n"
                       "relu r0\n"
                       "conv c1 16 3 pad=1\n"
                       "relu\n"
                       "conv c2 16 3 pad=1\n"
                       "add from=r0         # r0 + c2\n"
                       "relu\n"
                       "maxpool 2\n"
                       "gap\n"
                       "dropout 0.2\n"
                       "dense fc classes\n";
    CHECK(ddl_graph_parse(h, text, err, sizeof err) == DDL_OK);
    CHECK(ddl_graph_n_layers(h) == 12);
    ddl_model_config mc = {.batch = 2, .in_c = 3, .in_h = 32, .in_w = 32, .n_classes = 5, .plugin_config = h};
    ddl_model *m = build(ddl_model_graph(), mc, err);
    CHECK(m != NULL);
    CHECK(m && strcmp(ddl_model_tensor(m, 0)->name, "stem.weight") == 0);
    ddl_model_destroy(m);
    ddl_graph_destroy(e, NULL);
    ddl_graph_destroy(g, NULL);
    ddl_graph_destroy(h, NULL);
}

/* refused: text (or NULL) and the words the message must hold */
static void refused_text(const char *text, const char *words)
{
    char err[DDL_ERR_BYTES] = "";
    ddl_graph *g = G();
    int rc = ddl_graph_parse(g, text, err, sizeof err);
    CHECK(rc == DDL_EINVAL);
    if (!strstr(err, words))
        fprintf(stderr, "expected \"%s\" in: %s\n", words, err);
    CHECK(strstr(err, words) != NULL);
    ddl_graph_destroy(g, NULL);
}

/* refused_build: a graph that parses but cannot be built for mc */
static void refused_build(const char *text, ddl_model_config mc, const char *words)
{
    char err[DDL_ERR_BYTES] = "";
    ddl_graph *g = G();
    CHECK(ddl_graph_parse(g, text, err, sizeof err) == DDL_OK);
    mc.plugin_config = g;
    ddl_model *m = NULL;
    CHECK(ddl_model_create(ddl_model_graph(), &mc, NULL, &m, err, sizeof err) == DDL_EINVAL);
    if (!strstr(err, words))
        fprintf(stderr, "expected \"%s\" in: %s\n", words, err);
    CHECK(strstr(err, words) != NULL);
    CHECK(m == NULL);
    ddl_graph_destroy(g, NULL);
}

static void errors(void)
{
    refused_text("", "no layers");
    refused_text("input\nconv 8\n", "line 2: conv takes conv [NAME] OUT K");
    refused_text("input\nbogus 3\n", "line 2: \"bogus\" is not a layer");
    refused_text("input\nconv c 8 3 strid=2\n", "line 2: conv takes no strid=");
    refused_text("input\nconv c 8 3\nrelu\nadd from=nowhere\n", "line 4: add: from=nowhere names no earlier layer");
    refused_text("input\nconv c 8 3\nconv c 8 3\n", "line 3: layer 2 (conv): name \"c\" is already layer 1's");
    refused_text("conv c 8 3\n", "line 1: layer 0 (conv): the first layer must be the input");
    refused_text("input\nconv c 8 x3\n", "line 2: conv: kernel \"x3\" is not a whole number");
    refused_text("input\nrelu\noutput soft\n", "line 3: output soft: the head is xent or dice");
    refused_text("input\ndropout 1.5\n", "line 2: layer 1 (dropout): p 1.5");
    refused_text("input\nconv c 8 3 pad=3\n", "pad 3: need channels");
    refused_text("input\nshuffle 1\n", "line 2: layer 1 (shuffle): 1 groups: need 2 or more");
    refused_text("input\nslice 0 0\n", "line 2: layer 1 (slice): channels from 0, 0 of them");
    refused_text("input\nslice 2\n", "line 2: slice takes slice START COUNT");
    ddl_model_config mc = {.batch = 2, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10};
    refused_build("input 3 32 32\ndense fc classes\n", mc, "the graph takes 3x32x32 images, the model config gives 1x28x28");
    refused_build("input\nmaxpool 32\ndense fc classes\n", mc, "layer 1 (maxpool): a 28x28 input is smaller than the 32x32 window");
    refused_build("input\ndense fc 12\n", mc, "layer 1 (fc, dense): the output has 12 channels, the model config 10 classes");
    refused_build("input\nconv a 4 3\nconv b 5 3 from=0\nadd from=a\ndense classes\n", mc,
                  "layer 3 (add): inputs of 4x26x26 and 5x26x26: add needs the same shape");
    refused_build("input\nconv a 4 3\nrelu\ndense x classes from=a\n", mc, "layer 2 (relu): its output is not used");
    refused_build("input\nrelu\nflatten\n", mc, "no layer before the output has parameters");
    refused_build("input\nconv a 4 3\nshuffle 3\ndense classes\n", mc, "layer 2 (shuffle): 3 groups do not divide 4");
    refused_build("input\nconv a 4 3\nslice 2 3\ndense classes\n", mc,
                  "layer 2 (slice): channels 2 to 4 of an input of 4");
    /* shapes past an int: refused in 64 bits, not wrapped (a deconv's (h - 1) * stride, a concat's
     * channels, a sample's values); a conv window larger than its padded input makes no output */
    ddl_model_config big = {.batch = 2, .in_c = 1, .in_h = 4096, .in_w = 4096, .n_classes = 10};
    refused_build("input\ndeconv d 2 2 stride=1048576\ndense classes\n", big,
                  "layer 1 (d, deconv): an output of 2 x 4293918722 x 4293918722 values: ddl takes 1 to 2147483647");
    ddl_model_config wide = {.batch = 1, .in_c = 1 << 30, .in_h = 1, .in_w = 1, .n_classes = 10};
    refused_build("input\nconcat from=0,0\ndense classes\n", wide,
                  "layer 1 (concat): an output of 2147483648 x 1 x 1 values");
    ddl_model_config huge = {.batch = 1, .in_c = 1, .in_h = 65536, .in_w = 32768, .n_classes = 10};
    refused_build("input\ndense classes\n", huge, "1x65536x32768 images: more than 2147483647 values each");
    ddl_model_config m2 = {.batch = 2, .in_c = 1, .in_h = 2, .in_w = 2, .n_classes = 10};
    refused_build("input\nconv c 4 3 stride=2\ndense classes\n", m2, "a 2x2 input is too small for kernel 3");
    ddl_model *m = NULL;
    char err[DDL_ERR_BYTES];
    CHECK(ddl_model_create(ddl_model_graph(), &mc, NULL, &m, err, sizeof err) == DDL_EINVAL);
    CHECK(strstr(err, "no graph") != NULL);
    /* sticky errors from C */
    ddl_graph *g = G();
    int x = ddl_graph_input(g, 1, 28, 28);
    CHECK(ddl_graph_conv2d(g, x + 5, "c", 4, 3, 1, 0, 1) == -1);
    CHECK(ddl_graph_relu(g, x) == -1);
    CHECK(strstr(ddl_graph_error(g), "layer 1 (conv): input 5 is not an earlier layer") != NULL);
    mc.plugin_config = g;
    CHECK(ddl_model_create(ddl_model_graph(), &mc, NULL, &m, err, sizeof err) == DDL_EINVAL);
    CHECK(strstr(err, "input 5 is not an earlier layer") != NULL);
    ddl_graph_destroy(g, NULL);
    /* presets and files */
    ddl_graph *h = G();
    CHECK(ddl_graph_load(h, "cnn", err, sizeof err) == DDL_OK);
    CHECK(ddl_graph_load(h, "resnet", err, sizeof err) == DDL_EINVAL && strstr(err, "not a preset"));
    CHECK(ddl_graph_load(h, "/nonexistent/arch.txt", err, sizeof err) == DDL_EIO && strstr(err, "/nonexistent/arch.txt"));
    CHECK(ddl_graph_load(h, "/bin/sh", err, sizeof err) == DDL_EINVAL && strstr(err, "/bin/sh: line"));
    ddl_graph_destroy(h, NULL);
}

/* ---- checkpoints: the graph travels with the weights ---- */

/* train_graph: a trainer of graph g on d for `steps` steps, saved to path when path is set. */
static ddl_model *train_graph(const ddl_graph *g, const ddl_dataset *d, int steps, const char *save_to,
                              const char *resume_from, uint32_t *crc)
{
    char err[DDL_ERR_BYTES];
    ddl_model_config mc = {.batch = 8, .in_c = d->c, .in_h = d->h, .in_w = d->w, .n_classes = d->n_classes,
                           .dropout = 0.2f, .plugin_config = g};
    ddl_model *m = build(ddl_model_graph(), mc, err);
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = 8;
    tc.seed = 3;
    ddl_trainer *t = NULL;
    CHECK(m && ddl_trainer_create(&tc, m, d, NULL, &t, err, sizeof err) == DDL_OK);
    if (!t)
        return m;
    if (resume_from)
        CHECK(ddl_trainer_resume(t, resume_from, 0, NULL) == DDL_OK);
    for (int i = 0; i < steps; i++)
        CHECK(ddl_trainer_step(t, NULL) == DDL_OK);
    if (save_to)
        CHECK(ddl_trainer_save(t, save_to) == DDL_OK);
    *crc = ddl_model_crc(m);
    ddl_trainer_destroy(t);
    return m;
}

static void checkpoints(void)
{
    enum { N = 64 };
    static uint8_t images[N * 3 * 12 * 12], labels[N];
    ddl_rng r;
    ddl_rng_seed(&r, 5);
    for (int i = 0; i < N; i++) {
        labels[i] = (uint8_t)(i % 3);
        for (int k = 0; k < 3 * 144; k++)
            images[i * 432 + k] = (uint8_t)(ddl_rng_below(&r, 128) + 40 * labels[i]);
    }
    static const char *const names[3] = {"apple", "kiwi", "guava"};
    ddl_dataset d = {.n = N, .c = 3, .h = 12, .w = 12, .th = 1, .tw = 1, .n_classes = 3, .images = images,
                     .targets = labels, .class_names = names};
    char err[DDL_ERR_BYTES], path[64], text[4096];
    snprintf(path, sizeof path, "/tmp/ddl-test-graph-%d.ckpt", (int)getpid());
    ddl_graph *g = G();
    CHECK(ddl_graph_parse(g, "input\nconv c1 8 3 pad=1\nrelu\nmaxpool 2\nconv c2 8 3 pad=1\nrelu\ngap\n"
                             "dropout\ndense fc classes\n", err, sizeof err) == DDL_OK);
    uint32_t straight = 0, resumed = 0, half = 0;
    ddl_model_destroy(train_graph(g, &d, 12, NULL, NULL, &straight));
    ddl_model *m = train_graph(g, &d, 6, path, NULL, &half);
    ddl_checkpoint *ck = NULL;
    CHECK(ddl_checkpoint_open(path, NULL, &ck, err, sizeof err) == DDL_OK);
    if (ck) {
        ddl_graph_format(g, text, sizeof text);
        CHECK(ddl_checkpoint_arch(ck) && strcmp(ddl_checkpoint_arch(ck), text) == 0);
        const char *const *cn = ddl_checkpoint_class_names(ck);
        CHECK(cn && strcmp(cn[0], "apple") == 0 && strcmp(cn[2], "guava") == 0);
        CHECK(strcmp(ddl_checkpoint_get_info(ck)->model, "graph") == 0);
        ddl_checkpoint_close(ck);
    }
    /* exact resume */
    ddl_model_destroy(train_graph(g, &d, 6, NULL, path, &resumed));
    CHECK(resumed == straight && half != straight);
    /* a program that knows nothing of the network predicts with it, by name */
    ddl_predictor *p = NULL;
    CHECK(ddl_predictor_open(path, NULL, NULL, &p, err, sizeof err) == DDL_OK);
    if (p && m) {
        float logits[4 * 3], want[4 * 3];
        uint16_t cls[4];
        CHECK(ddl_predictor_run(p, images, 4, 3, 12, 12, logits, NULL, cls) == DDL_OK);
        const char *const *pn = ddl_predictor_class_names(p);
        CHECK(pn && strcmp(pn[1], "kiwi") == 0);
        /* the same logits as the trained model, normalised as the predictor does */
        float mean, std, x[4 * 432];
        ddl_model_norm(m, &mean, &std);
        for (int k = 0; k < 4 * 432; k++)
            x[k] = (float)images[k] * (1.0f / (255.0f * std)) + -mean / std;
        memcpy(want, ddl_model_forward(m, x, 4, 0, NULL), sizeof want);
        CHECK(memcmp(want, logits, sizeof want) == 0);
        ddl_predictor_close(p);
    }
    /* ONNX export of a graph */
    char onnx[80];
    snprintf(onnx, sizeof onnx, "%s.onnx", path);
    CHECK(ddl_checkpoint_open(path, NULL, &ck, err, sizeof err) == DDL_OK);
    CHECK(ck && ddl_export(ck, onnx, NULL, err, sizeof err) == DDL_OK);
    ddl_checkpoint_close(ck);
    unlink(onnx);
    unlink(path);
    ddl_model_destroy(m);
    ddl_graph_destroy(g, NULL);
}

/* deep: networks of torchvision's depth (DenseNet-201 imports as 608 layers): 200 blocks of conv,
 * batchnorm and relu, 603 layers of 602 parameter and 400 buffer tensors (past the 128 each of
 * before), train, go to a checkpoint and come back, and a predictor gives the model's logits; a
 * graph takes DDL_GRAPH_MAX_LAYERS layers, and the next is refused, naming the limit. */
static void deep(void)
{
    enum { N = 16, BLOCKS = 200 };
    static uint8_t images[N * 3 * 8 * 8], labels[N];
    for (int i = 0; i < N; i++) {
        labels[i] = (uint8_t)(i % 2);
        for (int k = 0; k < 192; k++)
            images[i * 192 + k] = (uint8_t)((k * 7 + i * 13) % 200 + 50 * labels[i]);
    }
    ddl_dataset d = {.n = N, .c = 3, .h = 8, .w = 8, .th = 1, .tw = 1, .n_classes = 2, .images = images,
                     .targets = labels};
    char err[DDL_ERR_BYTES], path[64];
    snprintf(path, sizeof path, "/tmp/ddl-test-graph-deep-%d.ckpt", (int)getpid());
    ddl_graph *g = G();
    int x = ddl_graph_input(g, 3, 8, 8);
    for (int b = 0; b < BLOCKS; b++) {
        char name[16];
        snprintf(name, sizeof name, "c%d", b);
        x = ddl_graph_conv2d(g, x, name, 4, 3, 1, 1, 0);
        x = ddl_graph_relu(g, ddl_graph_batchnorm(g, x, NULL, 0.1f, 1e-5f));
    }
    ddl_graph_dense(g, ddl_graph_global_avgpool(g, x), "fc", DDL_CLASSES);
    CHECK(!ddl_graph_error(g)[0] && ddl_graph_n_layers(g) == 3 * BLOCKS + 3);
    uint32_t crc = 0, resumed = 0;
    ddl_model *m = train_graph(g, &d, 2, path, NULL, &crc);
    CHECK(m && ddl_model_n_tensors(m) == 3 * BLOCKS + 2);
    ddl_model_destroy(m);
    m = train_graph(g, &d, 0, NULL, path, &resumed);
    CHECK(m && resumed == crc);
    ddl_predictor *p = NULL;
    CHECK(ddl_predictor_open(path, NULL, NULL, &p, err, sizeof err) == DDL_OK);
    if (p && m) {
        float logits[2 * 2], want[2 * 2], mean, std, xs[2 * 192];
        ddl_model_norm(m, &mean, &std);
        for (int k = 0; k < 2 * 192; k++)
            xs[k] = (float)images[k] * (1.0f / (255.0f * std)) + -mean / std;
        memcpy(want, ddl_model_forward(m, xs, 2, 0, NULL), sizeof want);
        CHECK(ddl_predictor_run(p, images, 2, 3, 8, 8, logits, NULL, NULL) == DDL_OK);
        CHECK(memcmp(want, logits, sizeof want) == 0);
        ddl_predictor_close(p);
    }
    ddl_model_destroy(m);
    unlink(path);
    /* the limit: full, then refused */
    while (ddl_graph_n_layers(g) < DDL_GRAPH_MAX_LAYERS)
        x = ddl_graph_relu(g, x);
    CHECK(x >= 0 && !ddl_graph_error(g)[0]);
    CHECK(ddl_graph_relu(g, x) < 0 && strstr(ddl_graph_error(g), "at most 1024 layers"));
    ddl_graph_destroy(g, NULL);
}

/* per_channel: a mean and std per channel travel through checkpoints, resume, the predictor */
static void per_channel(void)
{
    enum { N = 32 };
    static uint8_t images[N * 3 * 8 * 8], labels[N];
    for (int i = 0; i < N * 192; i++)
        images[i] = (uint8_t)(i * 37 % 251);
    for (int i = 0; i < N; i++)
        labels[i] = (uint8_t)(i % 2);
    ddl_dataset d = {.n = N, .c = 3, .h = 8, .w = 8, .th = 1, .tw = 1, .n_classes = 2, .images = images,
                     .targets = labels};
    char err[DDL_ERR_BYTES], path[64];
    snprintf(path, sizeof path, "/tmp/ddl-test-norm-%d.ckpt", (int)getpid());
    ddl_graph *g = G();
    ddl_graph_parse(g, "input\nconv c 4 3\nrelu\ndense fc classes\n", err, sizeof err);
    ddl_model_config mc = {.batch = 8, .in_c = 3, .in_h = 8, .in_w = 8, .n_classes = 2, .plugin_config = g};
    ddl_model *m = build(ddl_model_graph(), mc, err);
    float mean[3], std[3], zero[3] = {0.5f, 0.5f, 0.5f}, bad[3] = {0.2f, 0.0f, 0.3f}, got_m[3], got_s[3];
    ddl_dataset_stats_channels(&d, mean, std);
    CHECK(mean[0] != mean[1] && std[0] > 0 && std[2] > 0);
    CHECK(ddl_model_set_norm_channels(m, zero, bad) == DDL_EINVAL); /* a std of 0 */
    CHECK(ddl_model_norm_channels(m, got_m, got_s) == 0);
    CHECK(ddl_model_set_norm_channels(m, mean, std) == DDL_OK);
    CHECK(ddl_model_norm_channels(m, got_m, got_s) == 1 && got_m[2] == mean[2] && got_s[1] == std[1]);
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = 8;
    ddl_trainer *t = NULL;
    CHECK(ddl_trainer_create(&tc, m, &d, NULL, &t, err, sizeof err) == DDL_OK);
    for (int i = 0; i < 3; i++)
        CHECK(ddl_trainer_step(t, NULL) == DDL_OK);
    CHECK(ddl_trainer_save(t, path) == DDL_OK);
    ddl_checkpoint *ck = NULL;
    CHECK(ddl_checkpoint_open(path, NULL, &ck, err, sizeof err) == DDL_OK);
    CHECK(ck && ddl_checkpoint_get_info(ck)->n_norm == 3 && ddl_checkpoint_get_info(ck)->norm_std[2] == std[2]);
    ddl_checkpoint_close(ck);
    /* the predictor normalises each channel as the trainer did */
    ddl_predictor *p = NULL;
    CHECK(ddl_predictor_open(path, NULL, NULL, &p, err, sizeof err) == DDL_OK);
    float x[2 * 192], want[4], logits[4];
    for (int k = 0; k < 2 * 192; k++) {
        int c = k / 64 % 3;
        x[k] = (float)images[k] * (1.0f / (255.0f * std[c])) + -mean[c] / std[c];
    }
    memcpy(want, ddl_model_forward(m, x, 2, 0, NULL), sizeof want);
    CHECK(p && ddl_predictor_run(p, images, 2, 3, 8, 8, logits, NULL, NULL) == DDL_OK);
    CHECK(memcmp(want, logits, sizeof want) == 0);
    ddl_predictor_close(p);
    /* a resumed trainer takes them back */
    ddl_model_set_norm(m, 0.0f, 1.0f);
    CHECK(ddl_model_norm_channels(m, got_m, got_s) == 0);
    CHECK(ddl_trainer_resume(t, path, 0, NULL) == DDL_OK);
    CHECK(ddl_model_norm_channels(m, got_m, got_s) == 1 && got_m[0] == mean[0] && got_s[2] == std[2]);
    ddl_trainer_destroy(t);
    ddl_model_destroy(m);
    ddl_graph_destroy(g, NULL);
    unlink(path);
}

int main(void)
{
    same_as_plugin("lenet", ddl_model_lenet(),
                   (ddl_model_config){.batch = 4, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10, .dropout = 0.3f});
    same_as_plugin("unet:2:4", ddl_model_unet(),
                   (ddl_model_config){.batch = 2, .in_c = 3, .in_h = 16, .in_w = 16, .n_classes = 3,
                                      .plugin_config = &(ddl_unet_config){.depth = 2, .width = 4}});
    same_as_plugin("unet", ddl_model_unet(),
                   (ddl_model_config){.batch = 2, .in_c = 1, .in_h = 32, .in_w = 32, .n_classes = 2});
    gradients();
    relu_into_pool();
    check_catches_errors();
    text_round_trip();
    errors();
    checkpoints();
    per_channel();
    deep();
    return TEST_END();
}
