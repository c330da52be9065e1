/* test_act.c - the activation and softmax layers (src/core/act.c, ddl_graph_act, ddl_graph_softmax):
 * each kind's forward against a double-precision formula and its backward against the
 * derivative of that formula; every kind and every softmax axis passes the finite-difference
 * gradient check inside a model, computed in place after a conv and copying (the same bits
 * both ways), and with a ReLU after it that must not overwrite what its backward reads; the
 * bits do not depend on the threads; the text format reads back what it writes; wrong kinds,
 * parameters and axes are refused, named. */
#include "check.h"
#include "ddl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct kind {
    int kind;
    float alpha, beta;
    const char *text; /* as ddl_graph_format writes it */
} kind;

static const kind kinds[] = {
    {DDL_ACT_LEAKY_RELU, 0.1f, 0, "leakyrelu alpha=0.100000001"},
    {DDL_ACT_LEAKY_RELU, -0.5f, 0, "leakyrelu alpha=-0.5"}, /* a negative slope: the gradient from x */
    {DDL_ACT_SIGMOID, 0, 0, "sigmoid"},
    {DDL_ACT_TANH, 0, 0, "tanh"},
    {DDL_ACT_SILU, 0, 0, "silu"},
    {DDL_ACT_GELU, 0, 0, "gelu"},
    {DDL_ACT_GELU_TANH, 0, 0, "gelu_tanh"},
    {DDL_ACT_HARDSWISH, 0, 0, "hardswish"},
    {DDL_ACT_HARDSIGMOID, 1.0f / 6.0f, 0.5f, "hardsigmoid alpha=0.166666672 beta=0.5"},
    {DDL_ACT_CLIP, 0.0f, 6.0f, "clip min=0 max=6"},
    {DDL_ACT_CLIP, -1.0f, INFINITY, "clip min=-1"},
    {DDL_ACT_ELU, 0.7f, 0, "elu alpha=0.699999988"},
};
#define N_KINDS ((int)(sizeof kinds / sizeof kinds[0]))

/* ref: f(x) and f'(x) in double, from the formulas ddl.h gives */
static double ref(const kind *k, double x, double *d)
{
    double a = k->alpha, b = k->beta, s = 1.0 / (1.0 + exp(-x)), t;
    switch (k->kind) {
    case DDL_ACT_LEAKY_RELU: *d = x > 0 ? 1 : a; return x > 0 ? x : a * x;
    case DDL_ACT_SIGMOID: *d = s * (1 - s); return s;
    case DDL_ACT_TANH: t = tanh(x); *d = 1 - t * t; return t;
    case DDL_ACT_SILU: *d = s * (1 + x * (1 - s)); return x * s;
    case DDL_ACT_GELU:
        *d = 0.5 * (1 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2 * M_PI);
        return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case DDL_ACT_GELU_TANH: {
        double c = sqrt(2 / M_PI), u = c * (x + 0.044715 * x * x * x);
        t = tanh(u);
        *d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x);
        return 0.5 * x * (1 + t);
    }
    case DDL_ACT_HARDSWISH: *d = x < -3 ? 0 : x > 3 ? 1 : x / 3 + 0.5; return x * fmin(fmax(x / 6 + 0.5, 0), 1);
    case DDL_ACT_HARDSIGMOID: t = a * x + b; *d = t > 0 && t < 1 ? a : 0; return fmin(fmax(t, 0), 1);
    case DDL_ACT_CLIP: *d = x > a && x < b ? 1 : 0; return fmin(fmax(x, a), b);
    case DDL_ACT_ELU: *d = x > 0 ? 1 : a * exp(x); return x > 0 ? x : a * expm1(x);
    default: *d = 0; return 0;
    }
}

#define NV 4001

/* kernels: forward and backward of every kind over -10..10 against ref; y-only kinds run in place */
static void kernels(void)
{
    static float x[NV], y[NV], dy[NV], dx[NV], yy[NV];
    for (int i = 0; i < NV; i++)
        x[i] = -10.0f + 20.0f * (float)i / (NV - 1), dy[i] = 0.5f + (float)(i % 7) * 0.25f;
    for (int k = 0; k < N_KINDS; k++) {
        const kind *K = &kinds[k];
        ddl_act_forward(K->kind, K->alpha, K->beta, NV, x, y);
        ddl_act_backward(K->kind, K->alpha, K->beta, NV, x, y, dy, dx);
        double worst_y = 0, worst_d = 0;
        for (int i = 0; i < NV; i++) {
            double d, want = ref(K, x[i], &d);
            double near_kink = K->kind == DDL_ACT_HARDSWISH ? fmin(fabs(x[i] - 3), fabs(x[i] + 3))
                               : K->kind == DDL_ACT_CLIP ? fmin(fabs(x[i] - K->alpha), fabs(x[i] - K->beta))
                               : K->kind == DDL_ACT_HARDSIGMOID ? fmin(fabs(x[i] + 3), fabs(x[i] - 3))
                                                                : fabs(x[i]);
            worst_y = fmax(worst_y, fabs(y[i] - want) / fmax(1.0, fabs(want)));
            if (near_kink > 1e-3)
                worst_d = fmax(worst_d, fabs(dx[i] - d * dy[i]) / fmax(1.0, fabs(d * dy[i])));
        }
        if (worst_y > 2e-6 || worst_d > 2e-5)
            fprintf(stderr, "%s: forward off by %.2g, backward by %.2g\n", K->text, worst_y, worst_d);
        CHECK(worst_y <= 2e-6);
        CHECK(worst_d <= 2e-5);
        /* in place, where the gradient needs y alone: the same bits with x overwritten */
        memcpy(yy, x, sizeof yy);
        ddl_act_forward(K->kind, K->alpha, K->beta, NV, yy, yy);
        CHECK(memcmp(yy, y, sizeof yy) == 0);
        int from_y = K->kind == DDL_ACT_SIGMOID || K->kind == DDL_ACT_TANH || K->kind == DDL_ACT_HARDSIGMOID ||
                     K->kind == DDL_ACT_CLIP || (K->kind == DDL_ACT_LEAKY_RELU && K->alpha >= 0) ||
                     (K->kind == DDL_ACT_ELU && K->alpha > 0);
        if (from_y) {
            static float d2[NV];
            memcpy(d2, dy, sizeof d2);
            ddl_act_backward(K->kind, K->alpha, K->beta, NV, NULL, yy, d2, d2);
            CHECK(memcmp(d2, dx, sizeof d2) == 0);
        }
    }
}

/* softmax_kernel: (outer, n, inner) rows against double, log too; rows of large values too */
static void softmax_kernel(void)
{
    const size_t outer = 3, n = 5, inner = 11;
    float x[3 * 5 * 11], y[3 * 5 * 11], l[3 * 5 * 11];
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
        x[i] = (float)((i * 37) % 23) * 0.7f - 5.0f + (i % 3 == 0 ? 80.0f : 0.0f);
    ddl_softmax_forward(outer, n, inner, 0, x, y);
    ddl_softmax_forward(outer, n, inner, 1, x, l);
    double worst = 0;
    for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < inner; i++) {
            double mx = -1e30, s = 0;
            for (size_t k = 0; k < n; k++)
                mx = fmax(mx, x[(o * n + k) * inner + i]);
            for (size_t k = 0; k < n; k++)
                s += exp(x[(o * n + k) * inner + i] - mx);
            for (size_t k = 0; k < n; k++) {
                size_t p = (o * n + k) * inner + i;
                double want = exp(x[p] - mx) / s, lw = x[p] - mx - log(s);
                worst = fmax(worst, fabs(y[p] - want));
                worst = fmax(worst, fabs(l[p] - lw) / fmax(1.0, fabs(lw)));
            }
        }
    if (worst >= 1e-6)
        fprintf(stderr, "softmax: off by %g\n", worst);
    CHECK(worst < 1e-6);
}

/* ---- inside a model ---- */

static ddl_model *build(ddl_graph *g, int c, int h, int w, int classes, char *err)
{
    ddl_model_config mc = {.batch = 3, .in_c = c, .in_h = h, .in_w = w, .n_classes = classes, .plugin_config = g};
    ddl_model *m = NULL;
    if (ddl_model_create(ddl_model_graph(), &mc, NULL, &m, err, DDL_ERR_BYTES) != DDL_OK)
        fprintf(stderr, "build: %s\n", err);
    return m;
}

static float *random_input(size_t n, uint64_t seed, float scale)
{
    float *x = malloc(n * sizeof *x);
    ddl_rng r;
    ddl_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        x[i] = scale * ddl_rng_normal(&r);
    return x;
}

/* grad_check: ddl_model_check_grads of g (input 2x6x6, 3 classes), at one and two threads the
 * same logits and gradients. */
static double grad_check(ddl_graph *g, const char *what, int classes)
{
    char err[DDL_ERR_BYTES];
    ddl_model *m = build(g, 2, 6, 6, classes, err);
    CHECK(m != NULL);
    if (!m)
        return 1.0;
    ddl_model_init_weights(m, 5);
    float *x = random_input(3 * 2 * 6 * 6, 9, 1.5f);
    double worst = 1.0;
    int rc = ddl_model_check_grads(m, x, 3, 21, 16, 2e-2, &worst, err, sizeof err);
    if (rc != DDL_OK)
        fprintf(stderr, "%s: %s\n", what, err);
    CHECK(rc == DDL_OK);
    int c, h, w;
    ddl_model_output_shape(m, &c, &h, &w);
    size_t ny = (size_t)3 * c * h * w, np = ddl_model_n_params(m);
    float *keep = malloc(ny * sizeof *keep), *grads = malloc(np * sizeof *grads), *dy = random_input(ny, 4, 1.0f);
    for (int threads = 1; threads <= 2; threads++) {
        ddl_set_threads(threads);
        const float *y = ddl_model_forward(m, x, 3, 0, NULL);
        ddl_model_zero_grads(m);
        ddl_model_backward(m, x, 3, dy);
        if (threads == 1) {
            memcpy(keep, y, ny * sizeof *keep);
            memcpy(grads, ddl_model_grads(m), np * sizeof *grads);
        } else {
            CHECK(memcmp(keep, y, ny * sizeof *keep) == 0);
            CHECK(memcmp(grads, ddl_model_grads(m), np * sizeof *grads) == 0);
        }
    }
    ddl_set_threads(1);
    free(keep), free(grads), free(dy), free(x);
    ddl_model_destroy(m);
    return worst;
}

/* logits_and_grads: the model's logits and gradients (seeded), for comparing two layouts */
static void logits_and_grads(ddl_graph *g, float *y, float *gr, size_t ny, size_t np, int training)
{
    ddl_rng rng;
    ddl_rng_seed(&rng, 77);
    char err[DDL_ERR_BYTES];
    ddl_model *m = build(g, 2, 6, 6, 3, err);
    if (!m)
        return;
    ddl_model_init_weights(m, 5);
    float *x = random_input(3 * 2 * 6 * 6, 9, 1.5f), *dy = random_input(ny, 4, 1.0f);
    memcpy(y, ddl_model_forward(m, x, 3, training, &rng), ny * sizeof *y);
    ddl_model_zero_grads(m);
    ddl_model_backward(m, x, 3, dy);
    CHECK(ddl_model_n_params(m) == np);
    memcpy(gr, ddl_model_grads(m), np * sizeof *gr);
    free(x), free(dy);
    ddl_model_destroy(m);
}

static void every_kind_trains(void)
{
    for (int k = 0; k < N_KINDS; k++) {
        const kind *K = &kinds[k];
        ddl_graph *g = NULL;
        CHECK(ddl_graph_create(NULL, &g) == DDL_OK);
        /* in place after the conv (where the kind allows), then copying, then before a ReLU */
        int x = ddl_graph_input(g, 2, 6, 6);
        int a = ddl_graph_act(g, ddl_graph_conv2d(g, x, "c1", 4, 3, 1, 1, 1), K->kind, K->alpha, K->beta);
        int b = ddl_graph_conv2d(g, a, "c2", 4, 3, 1, 1, 1);
        int s = ddl_graph_add(g, ddl_graph_act(g, b, K->kind, K->alpha, K->beta), b);
        int r = ddl_graph_relu(g, ddl_graph_act(g, s, K->kind, K->alpha, K->beta));
        ddl_graph_dense(g, ddl_graph_global_avgpool(g, r), "fc", DDL_CLASSES);
        CHECK(!ddl_graph_error(g)[0]);
        double worst = grad_check(g, K->text, 3);
        if (worst > 2e-2)
            fprintf(stderr, "%s: worst gradient error %g\n", K->text, worst);
        CHECK(worst <= 2e-2);
        ddl_graph_destroy(g, NULL);
    }
}

/* in_place_same_bits: conv -> act -> dense with the act in place (where the kind allows), and
 * the same with the conv read by a second branch that adds exact zeros (a clip to [0, 0]), so
 * the act copies: the same logits and gradients, bit for bit. */
static void in_place_same_bits(void)
{
    for (int k = 0; k < N_KINDS; k++) {
        const kind *K = &kinds[k];
        ddl_graph *g[2];
        for (int v = 0; v < 2; v++) {
            ddl_graph_create(NULL, &g[v]);
            int in = ddl_graph_input(g[v], 2, 6, 6), c = ddl_graph_conv2d(g[v], in, "c1", 4, 3, 1, 1, 1);
            int act = ddl_graph_act(g[v], c, K->kind, K->alpha, K->beta);
            if (v)
                act = ddl_graph_add(g[v], act, ddl_graph_act(g[v], c, DDL_ACT_CLIP, 0.0f, 0.0f));
            ddl_graph_dense(g[v], act, "fc", DDL_CLASSES);
        }
        enum { NY = 9, NP = 4 * 2 * 9 + 4 + 3 * 4 * 36 + 3 };
        float y[2][NY], gr[2][NP];
        logits_and_grads(g[0], y[0], gr[0], NY, NP, 0);
        logits_and_grads(g[1], y[1], gr[1], NY, NP, 0);
        int same = memcmp(y[0], y[1], sizeof y[0]) == 0 && memcmp(gr[0], gr[1], sizeof gr[0]) == 0;
        if (!same)
            fprintf(stderr, "%s: in place and copying differ\n", K->text);
        CHECK(same);
        ddl_graph_destroy(g[0], NULL);
        ddl_graph_destroy(g[1], NULL);
    }
}

/* dropout_keeps_y: an activation's backward reads its output, so a dropout after it (training)
 * must not scale that output in place: act -> dropout the same bits as act -> dropout beside a
 * branch of exact zeros (two readers: nothing can run in place), for every kind and softmax. */
static void dropout_keeps_y(void)
{
    for (int k = 0; k <= N_KINDS; k++) {
        ddl_graph *g[2];
        for (int v = 0; v < 2; v++) {
            ddl_graph_create(NULL, &g[v]);
            int in = ddl_graph_input(g[v], 2, 6, 6), c = ddl_graph_conv2d(g[v], in, "c1", 4, 3, 1, 1, 1);
            int act = k < N_KINDS ? ddl_graph_act(g[v], c, kinds[k].kind, kinds[k].alpha, kinds[k].beta)
                                  : ddl_graph_softmax(g[v], c, 1, 1, 0);
            int d = ddl_graph_dropout(g[v], act, 0.5f);
            if (v)
                d = ddl_graph_add(g[v], d, ddl_graph_act(g[v], act, DDL_ACT_CLIP, 0.0f, 0.0f));
            ddl_graph_dense(g[v], d, "fc", DDL_CLASSES);
        }
        enum { NY = 9, NP = 4 * 2 * 9 + 4 + 3 * 4 * 36 + 3 };
        float y[2][NY], gr[2][NP];
        logits_and_grads(g[0], y[0], gr[0], NY, NP, 1);
        logits_and_grads(g[1], y[1], gr[1], NY, NP, 1);
        int same = memcmp(y[0], y[1], sizeof y[0]) == 0 && memcmp(gr[0], gr[1], sizeof gr[0]) == 0;
        if (!same)
            fprintf(stderr, "%s then dropout: the gradients differ\n", k < N_KINDS ? kinds[k].text : "softmax");
        CHECK(same);
        ddl_graph_destroy(g[0], NULL);
        ddl_graph_destroy(g[1], NULL);
    }
}

static void softmax_trains(void)
{
    const int axes[][3] = {{1, 1, 0}, {2, 2, 0}, {3, 3, 1}, {1, 3, 0}, {2, 3, 1}, {1, 1, 1}};
    for (size_t k = 0; k < sizeof axes / sizeof axes[0]; k++) {
        ddl_graph *g = NULL;
        ddl_graph_create(NULL, &g);
        int x = ddl_graph_input(g, 2, 6, 6);
        /* no bias before: a softmax over H or W does not see a per-channel constant, whose gradient
         * is then 0 and its finite difference rounding noise */
        int s = ddl_graph_softmax(g, ddl_graph_conv2d(g, x, "c1", 4, 3, 1, 1, 0), axes[k][0], axes[k][1], axes[k][2]);
        int r = ddl_graph_relu(g, ddl_graph_conv2d(g, s, "c2", 3, 1, 1, 0, 1)); /* per-pixel classes */
        ddl_graph_conv2d(g, ddl_graph_dropout(g, r, 0.0f), "c3", DDL_CLASSES, 1, 1, 0, 1);
        char what[64];
        snprintf(what, sizeof what, "%ssoftmax axes %d to %d", axes[k][2] ? "log" : "", axes[k][0], axes[k][1]);
        double worst = grad_check(g, what, 3);
        CHECK(worst <= 2e-2);
        ddl_graph_destroy(g, NULL);
    }
    /* a softmax of a dense layer's features, as the output (what a file's last Softmax over a
     * non-class axis becomes) */
    ddl_graph *g = NULL;
    ddl_graph_create(NULL, &g);
    int x = ddl_graph_input(g, 2, 6, 6);
    ddl_graph_softmax(g, ddl_graph_dense(g, ddl_graph_act(g, ddl_graph_conv2d(g, x, "c1", 3, 3, 1, 0, 1),
                                                          DDL_ACT_GELU, 0, 0), "fc", DDL_CLASSES), 1, 1, 1);
    CHECK(grad_check(g, "a dense layer's log softmax", 4) <= 2e-2);
    ddl_graph_destroy(g, NULL);
}

/* ---- text and errors ---- */

/* gates: the mul layer, two layers' product: squeeze-and-excitation (a layer times the sigmoid of
 * a function of its average, C x 1 x 1, broadcast over its planes), the gate first, the same
 * shapes, a layer (a tanh) times itself, a spatial gate (1 x H x W) on either side; the gradients against finite differences, the text, and a shape
 * mul refuses. */
static void gates(void)
{
    for (int v = 0; v < 6; v++) {
        ddl_graph *g = NULL;
        CHECK(ddl_graph_create(NULL, &g) == DDL_OK);
        int c = ddl_graph_conv2d(g, ddl_graph_input(g, 2, 6, 6), "c1", 4, 3, 1, 1, 1);
        int s = ddl_graph_act(g, ddl_graph_conv2d(g, ddl_graph_global_avgpool(g, c), "fc", 4, 1, 1, 0, 1),
                              DDL_ACT_SIGMOID, 0, 0);
        /* t, bounded, for the square: c * c made the loss large enough that float32's finite
         * differences of its small gradients were 3% off (the portable kernels' rounding) */
        int t = v >= 2 ? ddl_graph_act(g, ddl_graph_conv2d(g, c, "c2", 4, 3, 1, 1, 1), DDL_ACT_TANH, 0, 0) : -1;
        int m = v == 0 ? ddl_graph_mul(g, c, s) : v == 1 ? ddl_graph_mul(g, s, c) : v == 2 ? ddl_graph_mul(g, t, c)
                                                                                          : ddl_graph_mul(g, t, t);
        if (v >= 4) { /* a spatial gate, 1 x 6 x 6, over c's 4 channels */
            int p = ddl_graph_act(g, ddl_graph_conv2d(g, c, "sg", 1, 1, 1, 0, 1), DDL_ACT_SIGMOID, 0, 0);
            m = ddl_graph_add(g, v == 4 ? ddl_graph_mul(g, c, p) : ddl_graph_mul(g, p, c), m);
        }
        if (v >= 2) /* every layer must lead to the output: s joins through an add */
            m = ddl_graph_add(g, m, ddl_graph_mul(g, c, s));
        ddl_graph_dense(g, ddl_graph_global_avgpool(g, ddl_graph_conv2d(g, m, "c3", 4, 3, 1, 1, 1)), "out",
                        DDL_CLASSES);
        CHECK(!ddl_graph_error(g)[0]);
        const char *what[] = {"x * gate", "gate * x", "tanh(conv x) * x", "t * t", "x * spatial gate",
                              "spatial gate * x"};
        double worst = grad_check(g, what[v], 3);
        if (worst > 2e-2)
            fprintf(stderr, "mul, %s: worst gradient error %g\n", what[v], worst);
        CHECK(worst <= 2e-2);
        ddl_graph_destroy(g, NULL);
    }
    char err[DDL_ERR_BYTES], a[1024];
    ddl_graph *g = NULL;
    ddl_graph_create(NULL, &g);
    const char *t = "input 2 6 6\nconv c1 4 3 pad=1\ngap\nconv fc 4 1\nsigmoid gate\nmul from=c1,gate\n"
                    "dense out classes\n";
    CHECK(ddl_graph_parse(g, t, err, sizeof err) == DDL_OK);
    CHECK(ddl_graph_format(g, a, sizeof a) > 0 && strstr(a, "\nmul from=c1\n")); /* gate: the layer before */
    ddl_model *m = build(g, 2, 6, 6, 3, err);
    CHECK(m != NULL);
    ddl_model_destroy(m);
    /* 4 x 6 x 6 times 2 x 1 x 1: refused at the build, both shapes named */
    CHECK(ddl_graph_parse(g, "input 2 6 6\nconv c1 4 3 pad=1\ngap\nconv fc 2 1\nmul from=c1\ndense o classes\n",
                          err, sizeof err) == DDL_OK);
    m = build(g, 2, 6, 6, 3, err);
    CHECK(m == NULL && strstr(err, "inputs of 4x6x6 and 2x1x1: mul needs the same shape"));
    CHECK(ddl_graph_parse(g, "input 2 6 6\nconv c1 4 3\nmul\n", err, sizeof err) == DDL_EINVAL &&
          strstr(err, "line 3: mul takes mul from=A[,B]"));
    ddl_graph_destroy(g, NULL);
}

static void text(void)
{
    char err[DDL_ERR_BYTES], a[4096], b[4096];
    ddl_graph *g = NULL, *h = NULL;
    ddl_graph_create(NULL, &g);
    ddl_graph_create(NULL, &h);
    int x = ddl_graph_conv2d(g, ddl_graph_input(g, 3, 8, 8), "c", 4, 3, 1, 1, 1);
    for (int k = 0; k < N_KINDS; k++)
        x = ddl_graph_act(g, x, kinds[k].kind, kinds[k].alpha, kinds[k].beta);
    x = ddl_graph_softmax(g, x, 2, 3, 0);
    ddl_graph_name(g, x, "probs");
    x = ddl_graph_softmax(g, x, 3, 3, 1);
    ddl_graph_dense(g, x, "fc", DDL_CLASSES);
    size_t n = ddl_graph_format(g, a, sizeof a);
    CHECK(n > 0 && n < sizeof a);
    for (int k = 0; k < N_KINDS; k++) {
        char line[80];
        snprintf(line, sizeof line, "\n%s\n", kinds[k].text);
        CHECK(strstr(a, line) != NULL);
        if (!strstr(a, line))
            fprintf(stderr, "not in the text: %s\n%s", kinds[k].text, a);
    }
    CHECK(strstr(a, "\nsoftmax probs axis=2 to=3\nlogsoftmax axis=3\n") != NULL);
    CHECK(ddl_graph_parse(h, a, err, sizeof err) == DDL_OK);
    CHECK(ddl_graph_format(h, b, sizeof b) == n && strcmp(a, b) == 0);
    CHECK(memcmp(g, h, ddl_graph_sizeof()) == 0); /* byte for byte */
    /* the spellings a user may write: relu6, defaults, from= */
    const char *t = "input 3 8 8\nconv c 4 3 pad=1\nrelu6\nleakyrelu\nelu\nhardsigmoid\nsoftmax\n"
                    "gelu from=c\ndense fc classes\n";
    CHECK(ddl_graph_parse(h, t, err, sizeof err) == DDL_OK);
    ddl_graph_format(h, b, sizeof b);
    CHECK(strstr(b, "\nclip min=0 max=6\nleakyrelu alpha=0.00999999978\nelu alpha=1\n"
                    "hardsigmoid alpha=0.166666672 beta=0.5\nsoftmax axis=1\ngelu from=c\n") != NULL);
    /* refused, the line named */
    const char *bad[][2] = {
        {"input 3 8 8\nconv c 4 3\nsigmoid alpha=1\n", "line 3: sigmoid takes no alpha= (it takes: from)"},
        {"input 3 8 8\nconv c 4 3\nclip min=6 max=0\n", "line 3: layer 2 (clip): alpha 6, beta 0: need min <= max"},
        {"input 3 8 8\nconv c 4 3\nleakyrelu alpha=fast\n", "line 3: leakyrelu: alpha \"fast\" is not a number"},
        {"input 3 8 8\nconv c 4 3\nelu alpha=inf\n", "line 3: layer 2 (elu): alpha inf, beta 0: need finite values"},
        {"input 3 8 8\nconv c 4 3\nsoftmax axis=4\n", "line 3: layer 2 (softmax): axes 4 to 4: need 1 <= axis"},
        {"input 3 8 8\nconv c 4 3\nsoftmax axis=2 to=1\n", "axes 2 to 1: need 1 <= axis <= to <= 3"},
        {"input 3 8 8\nconv c 4 3\ntanh 3\n", "line 3: tanh takes no values"},
        {"input 3 8 8\nconv c 4 3\nact\n", "line 3: \"act\" is not a layer"},
        {"input 3 8 8\nconv c 4 3\nswish\n", "line 3: \"swish\" is not a layer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = ddl_graph_parse(h, bad[i][0], err, sizeof err);
        CHECK(rc == DDL_EINVAL && strstr(err, bad[i][1]));
        if (!strstr(err, bad[i][1]))
            fprintf(stderr, "want \"%s\", got \"%s\"\n", bad[i][1], err);
    }
    /* the C API: kinds, NaN, axes */
    ddl_graph_init(g, ddl_graph_sizeof());
    x = ddl_graph_input(g, 1, 4, 4);
    CHECK(ddl_graph_act(g, x, 0, 0, 0) == -1 && strstr(ddl_graph_error(g), "kind 0 is no DDL_ACT_*"));
    ddl_graph_init(g, ddl_graph_sizeof());
    x = ddl_graph_input(g, 1, 4, 4);
    CHECK(ddl_graph_act(g, x, DDL_ACT_LEAKY_RELU, NAN, 0) == -1 && strstr(ddl_graph_error(g), "need finite"));
    ddl_graph_init(g, ddl_graph_sizeof());
    x = ddl_graph_input(g, 1, 4, 4);
    CHECK(ddl_graph_act(g, x, DDL_ACT_CLIP, NAN, 1) == -1);
    ddl_graph_init(g, ddl_graph_sizeof());
    x = ddl_graph_input(g, 1, 4, 4);
    CHECK(ddl_graph_softmax(g, x, 0, 0, 0) == -1 && strstr(ddl_graph_error(g), "layer 1 (softmax): axes 0 to 0"));
    CHECK(ddl_graph_act(g, x, DDL_ACT_TANH, 0, 0) == -1); /* sticky */
    ddl_graph_destroy(g, NULL);
    ddl_graph_destroy(h, NULL);
}

int main(void)
{
    kernels();
    softmax_kernel();
    every_kind_trains();
    in_place_same_bits();
    dropout_keeps_y();
    softmax_trains();
    gates();
    text();
    return TEST_END();
}
