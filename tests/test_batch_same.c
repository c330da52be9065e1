/* test_batch_same.c - an image's outputs are the same bits whatever the batch it is run in and
 * its place there: what ddl-serve's dynamic batching relies on (an answer must not depend on
 * which requests arrived with it). For LeNet, the cnn preset at 3x64x64 (as ddl-serve's bench
 * serves it), the U-Net plugin (whose bottom is 2x2: products of a few columns, which OpenBLAS
 * and ddl's AVX-512 kernels sum differently) and a graph of the other kinds of layer (BatchNorm
 * in eval mode, a depthwise and a one-channel convolution, average pools, softmax), each saved
 * after a training step and loaded by the predictor: 64 images run one by one, then in batches
 * of 1, 2, 3, 7 and 64 starting at several places; every image's logits, probabilities and
 * classes must equal its own run alone, bit for bit.
 * ddl-test: beside (one thread, about a second of forward passes) */
#include "ddl.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 64

static char dir[64];

static const char every_arch[] = "input\n"
                                 "conv c1 8 3 pad=1\n"
                                 "batchnorm bn1\n"
                                 "relu r1\n"
                                 "conv dw 8 3 groups=8 stride=2 pad=1\n"
                                 "batchnorm bn2\n"
                                 "relu\n"
                                 "conv one 1 1\n"           /* one output channel: a product of one row */
                                 "concat from=one,dw\n"
                                 "avgpool 2\n"
                                 "conv c3 6 3 stride=2 pad=1\n" /* 2x2 positions */
                                 "sigmoid\n"
                                 "softmax\n"
                                 "flatten\n"
                                 "dense d1 12\n"
                                 "relu\n"
                                 "dense out classes\n";

/* save: a model of plugin p (graph g, if any) for mc after one training step on random images,
 * to path. */
static int save(const ddl_model_plugin *p, const ddl_graph *g, ddl_model_config mc, const char *path, uint8_t *img)
{
    ddl_rng r;
    ddl_rng_seed(&r, 7);
    size_t px = (size_t)mc.in_c * mc.in_h * mc.in_w, plane = (size_t)mc.in_h * mc.in_w;
    uint8_t *targets = malloc(N * plane), lab[N];
    for (size_t k = 0; k < N * px; k++)
        img[k] = (uint8_t)ddl_rng_below(&r, 256);
    for (int i = 0; i < N; i++)
        lab[i] = (uint8_t)ddl_rng_below(&r, (uint32_t)mc.n_classes);
    for (size_t k = 0; k < N * plane; k++)
        targets[k] = (uint8_t)ddl_rng_below(&r, (uint32_t)mc.n_classes);
    int seg = p == ddl_model_unet();
    ddl_dataset d = {.n = N, .c = mc.in_c, .h = mc.in_h, .w = mc.in_w, .th = seg ? mc.in_h : 1,
                     .tw = seg ? mc.in_w : 1, .n_classes = mc.n_classes, .images = img, .targets = seg ? targets : lab};
    mc.plugin_config = g;
    ddl_model *m = NULL;
    ddl_trainer *t = NULL;
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = mc.batch;
    char err[DDL_ERR_BYTES] = "";
    int rc = ddl_model_create(p, &mc, NULL, &m, err, sizeof err);
    if (rc == DDL_OK) {
        ddl_model_set_norm(m, 0.4f, 0.3f);
        rc = ddl_trainer_create(&tc, m, &d, NULL, &t, err, sizeof err);
    }
    if (rc == DDL_OK)
        rc = ddl_trainer_step(t, NULL);
    if (rc == DDL_OK)
        rc = ddl_trainer_save(t, path);
    if (rc != DDL_OK)
        fprintf(stderr, "  %s: %s (%s)\n", path, ddl_strerror(rc), err);
    ddl_trainer_destroy(t);
    ddl_model_destroy(m);
    free(targets);
    return rc;
}

/* same: images[first, first + b) in one call against each alone: the count of images whose
 * logits, probabilities or classes differ. */
static int same(ddl_predictor *pr, const uint8_t *img, const ddl_model_config *mc, int first, int b,
                const float *alone_l, const float *alone_p, const uint16_t *alone_c, size_t out_sz, size_t S)
{
    size_t px = (size_t)mc->in_c * mc->in_h * mc->in_w;
    float *l = malloc((size_t)b * out_sz * sizeof *l), *p = malloc((size_t)b * out_sz * sizeof *p);
    uint16_t *c = malloc((size_t)b * S * sizeof *c);
    int bad = 0;
    if (ddl_predictor_run(pr, img + (size_t)first * px, b, mc->in_c, mc->in_h, mc->in_w, l, p, c) != DDL_OK)
        bad = b;
    for (int i = 0; i < b && !bad; i++) {
        size_t at = (size_t)(first + i) * out_sz;
        bad += memcmp(l + (size_t)i * out_sz, alone_l + at, out_sz * sizeof *l) != 0 ||
               memcmp(p + (size_t)i * out_sz, alone_p + at, out_sz * sizeof *p) != 0 ||
               memcmp(c + (size_t)i * S, alone_c + (size_t)(first + i) * S, S * sizeof *c) != 0;
    }
    free(l), free(p), free(c);
    return bad;
}

static void check_model(const char *name, const ddl_model_plugin *p, const ddl_graph *g, ddl_model_config mc)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s.ckpt", dir, name);
    size_t px = (size_t)mc.in_c * mc.in_h * mc.in_w;
    uint8_t *img = malloc(N * px);
    int saved = save(p, g, mc, path, img) == DDL_OK;
    CHECK(saved);
    ddl_predict_config pc = {.batch = N};
    ddl_predictor *pr = NULL;
    char err[DDL_ERR_BYTES] = "";
    if (!saved || ddl_predictor_open(path, &pc, NULL, &pr, err, sizeof err) != DDL_OK) {
        fprintf(stderr, "  %s: %s\n", name, err);
        CHECK(0);
        free(img);
        return;
    }
    int C, oh, ow;
    ddl_model_output_shape(ddl_predictor_model(pr), &C, &oh, &ow);
    size_t S = (size_t)oh * ow, out_sz = (size_t)C * S;
    float *l = malloc(N * out_sz * sizeof *l), *pp = malloc(N * out_sz * sizeof *pp);
    uint16_t *cl = malloc(N * S * sizeof *cl);
    int ok = 1;
    for (int i = 0; i < N; i++) /* each alone */
        ok &= ddl_predictor_run(pr, img + i * px, 1, mc.in_c, mc.in_h, mc.in_w, l + i * out_sz, pp + i * out_sz,
                                cl + i * S) == DDL_OK;
    CHECK(ok);
    static const int sizes[] = {1, 2, 3, 7, N};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int b = sizes[k], bad = 0, starts[] = {0, 1, N - b, (N - b) / 2};
        for (int s = 0; s < 4; s++)
            if (starts[s] + b <= N)
                bad += same(pr, img, &mc, starts[s], b, l, pp, cl, out_sz, S);
        if (bad)
            fprintf(stderr, "  %s: batches of %d: %d image(s) differ from their run alone\n", name, b, bad);
        CHECK(bad == 0);
    }
    /* and in passes of a smaller batch than the call's: the predictor cuts at its batch */
    ddl_predictor_close(pr);
    pc.batch = 5;
    pr = NULL;
    CHECK(ddl_predictor_open(path, &pc, NULL, &pr, err, sizeof err) == DDL_OK);
    if (pr) {
        int bad = same(pr, img, &mc, 3, 29, l, pp, cl, out_sz, S);
        if (bad)
            fprintf(stderr, "  %s: 29 images in passes of 5: %d differ\n", name, bad);
        CHECK(bad == 0);
    }
    ddl_predictor_close(pr);
    free(l), free(pp), free(cl), free(img);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/ddl_test_batch_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    ddl_set_threads(1);
    check_model("lenet", ddl_model_lenet(), NULL,
                (ddl_model_config){.batch = 16, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10});
    ddl_graph *g = NULL;
    char err[DDL_ERR_BYTES] = "";
    CHECK(ddl_graph_create(NULL, &g) == DDL_OK);
    CHECK(g && ddl_graph_preset(g, "cnn", err, sizeof err) == DDL_OK);
    check_model("cnn", ddl_model_graph(), g,
                (ddl_model_config){.batch = 16, .in_c = 3, .in_h = 64, .in_w = 64, .n_classes = 3});
    check_model("unet", ddl_model_unet(), NULL,
                (ddl_model_config){.batch = 16, .in_c = 1, .in_h = 16, .in_w = 16, .n_classes = 4,
                                   .plugin_config = &(ddl_unet_config){.depth = 3, .width = 4}});
    int parsed = g && ddl_graph_parse(g, every_arch, err, sizeof err) == DDL_OK;
    if (!parsed)
        fprintf(stderr, "  every_arch: %s\n", err);
    CHECK(parsed);
    ddl_model_config gc = {.batch = 16, .in_c = 3, .in_h = 16, .in_w = 16, .n_classes = 5};
    if (parsed)
        check_model("graph", ddl_model_graph(), g, gc);
    /* and on the pool's 2 threads, which run the blocks of the larger products: the mode reaches them */
    ddl_set_threads(2);
    if (parsed)
        check_model("graph-2-threads", ddl_model_graph(), g, gc);
    ddl_graph_destroy(g, NULL);
    char cmd[100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return TEST_END();
}
