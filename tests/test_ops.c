/* test_ops.c - the compute ops of ddl.h: forward values against naive loops and hand-computed
 * examples, a finite-difference gradient check of every op for each of its inputs and
 * parameters (kann's kad_check_grad), and the accumulate / overwrite rules of backward passes.
 * (The timing of single kernels is tools/bench/kernels.c, in make bench.) */
#include "ddl.h"
#include "check.h"
#include "naive_conv.h"

#include <stdlib.h>
#include <string.h>

static ddl_rng rng;

/* ---- helpers ---- */

static float *alloc_f(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof *p);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

static void fill(float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * ddl_rng_uniform(&rng);
}

/* fill_apart: values in (-1, 1) at least `gap` from 0 and from each other (no ties, no kinks
 * within a finite-difference step): a shuffled ladder with jitter. */
static void fill_apart(float *x, size_t n, float gap)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((double)i - (double)n / 2.0 + 0.5) * 2.0f * gap;
    for (size_t i = n; i > 1; i--) {
        size_t j = ddl_rng_below(&rng, (uint32_t)i);
        float t = x[i - 1];
        x[i - 1] = x[j];
        x[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        x[i] += (ddl_rng_uniform(&rng) - 0.5f) * 0.5f * gap + (x[i] >= 0 ? gap : -gap);
}

static double dot(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

/* max_rel: largest |a - b| / (atol + |b|) over n values; a NaN counts as infinite. */
static double max_rel(const float *a, const float *b, size_t n, double atol)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / (atol + fabs((double)b[i]));
        if (!(e <= worst))
            worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

/* ---- finite differences ----
 * loss(ctx) runs a forward pass and returns a scalar in double. fd_check perturbs each of the
 * n floats of param by +-h and compares (L+ - L-) / (x+ - x-) (the step actually taken in float)
 * with the analytic gradient: |a - n| <= 1e-3 + 1e-2 max(|a|, |n|). */

typedef double (*loss_fn)(void *ctx);

static void fd_check(const char *what, loss_fn loss, void *ctx, float *param, size_t n, const float *analytic,
                     float h)
{
    double worst = 0.0;
    size_t worst_i = 0;
    double worst_num = 0.0;
    for (size_t i = 0; i < n; i++) {
        float save = param[i];
        param[i] = save + h;
        float up = param[i];
        double lp = loss(ctx);
        param[i] = save - h;
        float dn = param[i];
        double lm = loss(ctx);
        param[i] = save;
        double num = (lp - lm) / ((double)up - dn), a = analytic[i];
        double err = fabs(a - num) / (1e-3 + 1e-2 * fmax(fabs(a), fabs(num)));
        if (!(err <= worst)) {
            worst = isnan(err) ? INFINITY : err;
            worst_i = i;
            worst_num = num;
        }
    }
    if (!(worst <= 1.0))
        fprintf(stderr, "  gradient %s: element %zu analytic %.7g numeric %.7g\n", what, worst_i,
                (double)analytic[worst_i], worst_num);
    CHECK(worst <= 1.0);
}

/* ---- convolution and transposed convolution ---- */

typedef struct conv_ctx {
    ddl_conv2d g;
    int deconv;
    size_t nx, nw, ny;
    float *x, *w, *b, *y, *r, *ws;
} conv_ctx;

static double conv_loss(void *p)
{
    conv_ctx *c = p;
    if (c->deconv)
        ddl_deconv2d_forward(&c->g, c->x, c->w, c->b, c->y, c->ws);
    else
        ddl_conv2d_forward(&c->g, c->x, c->w, c->b, c->y, c->ws);
    return dot(c->y, c->r, c->ny);
}

static void conv_ctx_init(conv_ctx *c, const ddl_conv2d *g, int deconv)
{
    memset(c, 0, sizeof *c);
    c->g = *g;
    c->deconv = deconv;
    int oh = deconv ? ddl_deconv2d_out_h(g) : ddl_conv2d_out_h(g);
    int ow = deconv ? ddl_deconv2d_out_w(g) : ddl_conv2d_out_w(g);
    c->nx = (size_t)g->batch * g->in_c * g->in_h * g->in_w;
    c->nw = (size_t)g->out_c * g->in_c * g->k_h * g->k_w;
    c->ny = (size_t)g->batch * g->out_c * oh * ow;
    c->x = alloc_f(c->nx);
    c->w = alloc_f(c->nw);
    c->b = alloc_f((size_t)g->out_c);
    c->y = alloc_f(c->ny);
    c->r = alloc_f(c->ny);
    c->ws = alloc_f(deconv ? ddl_deconv2d_workspace(g) : ddl_conv2d_workspace(g));
    fill(c->x, c->nx, -1, 1);
    fill(c->w, c->nw, -1, 1);
    fill(c->b, (size_t)g->out_c, -1, 1);
    fill(c->r, c->ny, -1, 1);
}

static void conv_ctx_free(conv_ctx *c)
{
    free(c->x);
    free(c->w);
    free(c->b);
    free(c->y);
    free(c->r);
    free(c->ws);
}

static void conv_backward(conv_ctx *c, const float *dy, float *dx, float *dw, float *db)
{
    if (c->deconv)
        ddl_deconv2d_backward(&c->g, c->x, c->w, dy, dx, dw, db, c->ws);
    else
        ddl_conv2d_backward(&c->g, c->x, c->w, dy, dx, dw, db, c->ws);
}

/* check_conv_forward: against the naive loop, with and without bias. A float sum of K terms t
 * (the kernel's, in whatever order it blocks them) is off by rounding that grows as a random
 * walk: about u sqrt(K) sqrt(sum t^2), u = 2^-24 (the naive loop sums in double, or for the
 * transposed convolution in float, which adds as much again). Each output may be off by 8 times
 * that; a wrong or lost tap is off by a whole term, about sqrt(sum t^2 / K), some 1000 times the
 * bound at K = 577. (A bound of 1e-5 relative to max(|y|, 1) grew too tight for the largest K.) */
static void check_conv_forward(conv_ctx *c)
{
    size_t nb = (size_t)c->g.out_c;
    float *ref = alloc_f(c->ny), *sq = alloc_f(c->ny), *x2 = alloc_f(c->nx), *w2 = alloc_f(c->nw), *b2 = alloc_f(nb);
    for (size_t i = 0; i < c->nx; i++)
        x2[i] = c->x[i] * c->x[i];
    for (size_t i = 0; i < c->nw; i++)
        w2[i] = c->w[i] * c->w[i];
    for (size_t i = 0; i < nb; i++)
        b2[i] = c->b[i] * c->b[i];
    double k = (double)c->g.in_c * c->g.k_h * c->g.k_w + 1;
    for (int with_b = 0; with_b < 2; with_b++) {
        const float *b = with_b ? c->b : NULL;
        if (c->deconv) {
            ddl_deconv2d_forward(&c->g, c->x, c->w, b, c->y, c->ws);
            naive_deconv(&c->g, c->x, c->w, b, ref);
            naive_deconv(&c->g, x2, w2, with_b ? b2 : NULL, sq);
        } else {
            ddl_conv2d_forward(&c->g, c->x, c->w, b, c->y, c->ws);
            naive_conv(&c->g, c->x, c->w, b, ref);
            naive_conv(&c->g, x2, w2, with_b ? b2 : NULL, sq);
        }
        double worst = 0.0; /* error / bound */
        for (size_t i = 0; i < c->ny; i++) {
            double e = fabs((double)c->y[i] - ref[i]) / (8 * 0x1p-24 * sqrt(k * sq[i]) + 1e-30);
            if (!(e <= worst))
                worst = isnan(e) ? INFINITY : e;
        }
        if (!(worst < 1))
            fprintf(stderr, "  %s forward (%d in, %dx%d, %d out): error %.3g of the bound\n", c->deconv ? "deconv" : "conv",
                    c->g.in_c, c->g.k_h, c->g.k_w, c->g.out_c, worst);
        CHECK(worst < 1);
    }
    free(ref);
    free(sq);
    free(x2);
    free(w2);
    free(b2);
}

/* check_conv_grads: finite differences for x, w, b, then: a second backward doubles dw and
 * db, and leaves dx as it was (overwritten, not accumulated), and dx NULL is allowed. */
static void check_conv_grads(conv_ctx *c, const char *name)
{
    float *dx = alloc_f(c->nx), *dw = alloc_f(c->nw), *db = alloc_f((size_t)c->g.out_c);
    float *dx2 = alloc_f(c->nx), *dw2 = alloc_f(c->nw), *db2 = alloc_f((size_t)c->g.out_c);
    char what[96];
    conv_backward(c, c->r, dx, dw, db);
    snprintf(what, sizeof what, "%s dx", name);
    fd_check(what, conv_loss, c, c->x, c->nx, dx, 1e-2f);
    snprintf(what, sizeof what, "%s dw", name);
    fd_check(what, conv_loss, c, c->w, c->nw, dw, 1e-2f);
    snprintf(what, sizeof what, "%s db", name);
    fd_check(what, conv_loss, c, c->b, (size_t)c->g.out_c, db, 1e-2f);

    memcpy(dw2, dw, c->nw * sizeof *dw);
    memcpy(db2, db, (size_t)c->g.out_c * sizeof *db);
    fill(dx2, c->nx, 5, 6); /* garbage that must be overwritten */
    conv_backward(c, c->r, dx2, dw2, db2);
    for (size_t i = 0; i < c->nw; i++)
        dw[i] *= 2.0f;
    for (int i = 0; i < c->g.out_c; i++)
        db[i] *= 2.0f;
    CHECK(max_rel(dw2, dw, c->nw, 1e-4) < 1e-5);
    CHECK(max_rel(db2, db, (size_t)c->g.out_c, 1e-4) < 1e-5);
    CHECK(max_rel(dx2, dx, c->nx, 1e-4) < 1e-5);
    conv_backward(c, c->r, NULL, dw2, NULL); /* dx NULL, db NULL: only dw moves */
    CHECK(max_rel(dw2, dw, c->nw, 1e-4) > 1e-2);
    free(dx);
    free(dw);
    free(db);
    free(dx2);
    free(dw2);
    free(db2);
}

/* check_conv_backward_naive: dx and dw against the naive loops; the naive dw is left in rw
 * (c->nw floats) */
static void check_conv_backward_naive(conv_ctx *c, float *rw)
{
    float *dx = alloc_f(c->nx), *dw = alloc_f(c->nw), *rx = alloc_f(c->nx);
    ddl_conv2d_backward(&c->g, c->x, c->w, c->r, dx, dw, NULL, c->ws);
    naive_conv_backward(&c->g, c->x, c->w, c->r, rx, rw);
    CHECK(max_rel(dx, rx, c->nx, 1e-2) < 1e-3);
    CHECK(max_rel(dw, rw, c->nw, 1e-1) < 1e-3);
    free(dx);
    free(dw);
    free(rx);
}

/* the small convolutions: each shape and edge of the kernels (conv_wide.c's tiles and blocks) */
/* batch, in_c, in_h, in_w, out_c, k_h, k_w, stride, pad */
static const int conv_small_cases[][9] = {
    {2, 2, 7, 6, 3, 5, 5, 1, 2}, /* LeNet conv1 style: 5x5 pad 2 */
    {2, 2, 7, 6, 3, 3, 3, 2, 1}, /* 3x3 stride 2 */
    {2, 3, 5, 4, 2, 1, 1, 1, 0}, /* 1x1 */
    {2, 2, 8, 7, 3, 5, 5, 1, 0}, /* LeNet conv2 style: 5x5 no pad */
    {1, 2, 6, 6, 2, 3, 3, 1, 1}, /* one sample: direct gemm path */
    {2, 2, 7, 7, 2, 3, 2, 1, 1}, /* non-square kernel */
    {2, 1, 9, 8, 2, 4, 4, 3, 1}, /* stride 3 */
    {3, 2, 6, 6, 2, 2, 2, 2, 0}, /* 2x2 stride 2 */
    {2, 1, 7, 6, 3, 5, 5, 1, 2}, /* conv_wide.c: one input channel, LeNet's conv1 */
    {2, 1, 9, 5, 2, 3, 3, 1, 1}, /* conv_wide.c: U-Net's first layer */
    {2, 6, 9, 8, 16, 5, 5, 1, 0}, /* conv_wide.c: LeNet's conv2, 5x5 without padding */
    {2, 3, 6, 5, 7, 5, 5, 1, 4}, /* conv_wide.c: 5x5, the largest padding, odd out_c */
    {2, 2, 4, 3, 6, 5, 5, 1, 1}, /* conv_wide.c: 5x5, blocks of 6 output channels */
    {3, 3, 5, 6, 13, 5, 5, 1, 3}, /* conv_wide.c: 5x5, two blocks of 8, an odd last pair */
    {2, 3, 6, 5, 3, 3, 3, 1, 0}, /* conv_wide.c, 3x3 stride 1: no pad, odd out_c */
    {2, 2, 5, 7, 9, 3, 3, 1, 2}, /* conv_wide.c, 3x3: pad 2, two output blocks, an odd last channel */
    {1, 16, 8, 8, 16, 3, 3, 1, 1}, /* conv_wide.c, 3x3: U-Net's channel counts on its bottom grid */
    {2, 5, 3, 2, 2, 3, 3, 1, 1},  /* conv_wide.c, 3x3: a plane narrower than a vector */
};

static void test_conv_small(void)
{
    for (size_t t = 0; t < sizeof conv_small_cases / sizeof conv_small_cases[0]; t++) {
        const int *v = conv_small_cases[t];
        ddl_conv2d g = {.batch = v[0], .in_c = v[1], .in_h = v[2], .in_w = v[3], .out_c = v[4],
                        .k_h = v[5], .k_w = v[6], .stride = v[7], .pad = v[8]};
        char name[64];
        snprintf(name, sizeof name, "conv k%dx%d s%d p%d", v[5], v[6], v[7], v[8]);
        conv_ctx c;
        conv_ctx_init(&c, &g, 0);
        check_conv_forward(&c);
        check_conv_grads(&c, name);
        conv_ctx_free(&c);
    }
}

/* the same shapes against the naive loops only, without finite differences: what
 * tests/test_cpus.sh runs under an emulated CPU, where finite differences take a minute */
static void test_conv_paths(void)
{
    for (size_t t = 0; t < sizeof conv_small_cases / sizeof conv_small_cases[0]; t++) {
        const int *v = conv_small_cases[t];
        ddl_conv2d g = {.batch = v[0], .in_c = v[1], .in_h = v[2], .in_w = v[3], .out_c = v[4],
                        .k_h = v[5], .k_w = v[6], .stride = v[7], .pad = v[8]};
        conv_ctx c;
        conv_ctx_init(&c, &g, 0);
        check_conv_forward(&c);
        float *rw = alloc_f(c.nw);
        check_conv_backward_naive(&c, rw);
        free(rw);
        conv_ctx_free(&c);
    }
}

static void test_deconv_small(void)
{
    static const int cases[][9] = {
        {2, 3, 3, 4, 2, 2, 2, 2, 0}, /* U-Net up-convolution: 2x2 stride 2 */
        {1, 2, 3, 3, 3, 2, 2, 2, 0},
        {2, 2, 3, 3, 2, 3, 3, 2, 1}, /* 3x3 stride 2 pad 1 */
        {2, 2, 4, 3, 2, 4, 4, 2, 1},
        {2, 2, 3, 3, 2, 3, 3, 1, 1}, /* stride 1: a same-size convolution, transposed */
    };
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        const int *v = cases[t];
        ddl_conv2d g = {.batch = v[0], .in_c = v[1], .in_h = v[2], .in_w = v[3], .out_c = v[4],
                        .k_h = v[5], .k_w = v[6], .stride = v[7], .pad = v[8]};
        char name[64];
        snprintf(name, sizeof name, "deconv k%dx%d s%d p%d", v[5], v[6], v[7], v[8]);
        conv_ctx c;
        conv_ctx_init(&c, &g, 1);
        check_conv_forward(&c);
        check_conv_grads(&c, name);
        conv_ctx_free(&c);
    }
}

/* hand-computed: a 3x3 image of 1..9, 2x2 kernel of ones, stride 1: sums of 2x2 windows */
static void test_conv_hand(void)
{
    ddl_conv2d g = {.batch = 1, .in_c = 1, .in_h = 3, .in_w = 3, .out_c = 1, .k_h = 2, .k_w = 2, .stride = 1};
    float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[4] = {1, 1, 1, 1}, b[1] = {0.5f}, y[4];
    float ws[256];
    CHECK(ddl_conv2d_out_h(&g) == 2 && ddl_conv2d_out_w(&g) == 2);
    CHECK(ddl_conv2d_workspace(&g) <= 256);
    ddl_conv2d_forward(&g, x, w, b, y, ws);
    CHECK(y[0] == 12.5f && y[1] == 16.5f && y[2] == 24.5f && y[3] == 28.5f);
    /* transposed 2x2 stride 2 of a 1x1 input 2 with weights 1..4: the kernel times 2, plus bias */
    ddl_conv2d d = {.batch = 1, .in_c = 1, .in_h = 1, .in_w = 1, .out_c = 1, .k_h = 2, .k_w = 2, .stride = 2};
    float xd[1] = {2}, wd[4] = {1, 2, 3, 4}, yd[4];
    CHECK(ddl_deconv2d_out_h(&d) == 2 && ddl_deconv2d_out_w(&d) == 2);
    ddl_deconv2d_forward(&d, xd, wd, b, yd, ws);
    CHECK(yd[0] == 2.5f && yd[1] == 4.5f && yd[2] == 6.5f && yd[3] == 8.5f);
}

/* larger layers against the naive loops: LeNet's at batch 64 (chunks of several samples with a
 * short last chunk) and layers big enough to run one sample per gemm. */
static void test_conv_large(void)
{
    static const int cases[][9] = {
        {64, 1, 28, 28, 6, 5, 5, 1, 2},
        {64, 6, 14, 14, 16, 5, 5, 1, 0},
        {20, 32, 32, 32, 4, 3, 3, 1, 1},
        {2, 64, 64, 64, 3, 3, 3, 1, 1},
        {40, 6, 14, 14, 16, 5, 5, 1, 0},
    };
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        const int *v = cases[t];
        ddl_conv2d g = {.batch = v[0], .in_c = v[1], .in_h = v[2], .in_w = v[3], .out_c = v[4],
                        .k_h = v[5], .k_w = v[6], .stride = v[7], .pad = v[8]};
        conv_ctx c;
        conv_ctx_init(&c, &g, 0);
        check_conv_forward(&c);
        float *dw = alloc_f(c.nw), *rw = alloc_f(c.nw);
        check_conv_backward_naive(&c, rw);
        /* without dx (a first layer), with db: the bias gradient is summed beside dw when a small
         * weight gradient is cut by samples (chunks of 32, a short last one at batch 40) */
        int oc = g.out_c;
        size_t p = c.ny / ((size_t)g.batch * oc);
        float *db = alloc_f((size_t)oc), *rb = alloc_f((size_t)oc);
        for (int o = 0; o < oc; o++) {
            double s = 0.0;
            for (int n = 0; n < g.batch; n++)
                for (size_t i = 0; i < p; i++)
                    s += c.r[((size_t)n * oc + o) * p + i];
            rb[o] = (float)s;
            db[o] = 1.0f; /* db is added to */
        }
        memset(dw, 0, c.nw * sizeof *dw);
        ddl_conv2d_backward(&g, c.x, c.w, c.r, NULL, dw, db, c.ws);
        CHECK(max_rel(dw, rw, c.nw, 1e-1) < 1e-3);
        for (int o = 0; o < oc; o++)
            db[o] -= 1.0f;
        CHECK(max_rel(db, rb, (size_t)oc, 1e-1) < 1e-3);
        free(db);
        free(rb);
        free(dw);
        free(rw);
        conv_ctx_free(&c);
    }
}

/* ---- max pooling ---- */

typedef struct pool_ctx {
    int n, c, h, w, k, s, oh, ow;
    float *x, *y, *r;
    int32_t *arg;
} pool_ctx;

static double pool_loss(void *p)
{
    pool_ctx *c = p;
    ddl_maxpool_forward(c->n, c->c, c->h, c->w, c->k, c->s, c->x, c->y, c->arg);
    return dot(c->y, c->r, (size_t)c->n * c->c * c->oh * c->ow);
}

static void check_pool_grad(int k, int s)
{
    pool_ctx c = {2, 2, 7, 6, k, s, (7 - k) / s + 1, (6 - k) / s + 1, NULL, NULL, NULL, NULL};
    size_t nx = (size_t)c.n * c.c * c.h * c.w, ny = (size_t)c.n * c.c * c.oh * c.ow;
    c.x = alloc_f(nx);
    c.y = alloc_f(ny);
    c.r = alloc_f(ny);
    c.arg = calloc(ny, sizeof *c.arg);
    float *dx = alloc_f(nx);
    fill_apart(c.x, nx, 0.02f);
    fill(c.r, ny, -1, 1);
    pool_loss(&c);
    fill(dx, nx, 5, 6);
    ddl_maxpool_backward(c.n, c.c, c.h, c.w, c.k, c.s, c.r, c.arg, dx);
    fd_check(k > s ? "maxpool dx (overlapping)" : "maxpool dx", pool_loss, &c, c.x, nx, dx, 5e-3f);
    free(c.x);
    free(c.y);
    free(c.r);
    free(c.arg);
    free(dx);
}

static void test_maxpool(void)
{
    /* hand-computed 4x4, k2 s2 */
    float x[16] = {1, 3, 2, 0, 4, 2, 1, 5, 0, 0, 7, 7, -1, -2, 6, 8};
    float y[4], dy[4] = {1, 2, 3, 4}, dx[16];
    int32_t arg[4];
    ddl_maxpool_forward(1, 1, 4, 4, 2, 2, x, y, arg);
    CHECK(y[0] == 4 && y[1] == 5 && y[2] == 0 && y[3] == 8);
    CHECK(arg[0] == 4 && arg[1] == 7 && arg[2] == 8 && arg[3] == 15); /* ties: the first one */
    ddl_maxpool_backward(1, 1, 4, 4, 2, 2, dy, arg, dx);
    CHECK(dx[4] == 1 && dx[7] == 2 && dx[8] == 3 && dx[15] == 4);
    float sum = 0;
    for (int i = 0; i < 16; i++)
        sum += dx[i];
    CHECK(sum == 10.0f);
    check_pool_grad(2, 2);
    check_pool_grad(3, 2);
    check_pool_grad(3, 1);
}

/* ---- relu ---- */

typedef struct relu_ctx {
    size_t n;
    float *x, *y, *r;
} relu_ctx;

static double relu_loss(void *p)
{
    relu_ctx *c = p;
    ddl_relu_forward(c->n, c->x, c->y);
    return dot(c->y, c->r, c->n);
}

static void test_relu(void)
{
    float v[4] = {-1, 0, 2, -0.5f}, dv[4] = {1, 1, 1, 1};
    ddl_relu_forward(4, v, v); /* in place */
    CHECK(v[0] == 0 && v[1] == 0 && v[2] == 2 && v[3] == 0);
    ddl_relu_backward(4, v, dv, dv);
    CHECK(dv[0] == 0 && dv[1] == 0 && dv[2] == 1 && dv[3] == 0);

    relu_ctx c = {50, alloc_f(50), alloc_f(50), alloc_f(50)};
    float *dx = alloc_f(50);
    fill_apart(c.x, c.n, 0.02f);
    fill(c.r, c.n, -1, 1);
    relu_loss(&c);
    ddl_relu_backward(c.n, c.y, c.r, dx);
    fd_check("relu dx", relu_loss, &c, c.x, c.n, dx, 5e-3f);
    free(c.x);
    free(c.y);
    free(c.r);
    free(dx);
}

/* ---- dense ---- */

typedef struct dense_ctx {
    int batch, in, out;
    float *x, *w, *b, *y, *r;
} dense_ctx;

static double dense_loss(void *p)
{
    dense_ctx *c = p;
    ddl_dense_forward(c->batch, c->in, c->out, c->x, c->w, c->b, c->y);
    return dot(c->y, c->r, (size_t)c->batch * c->out);
}

static void test_dense(void)
{
    /* hand-computed: x [1 2], w [[1 0] [1 1] [0 -1]], b [0 1 2] -> y [1 4 0] */
    float x[2] = {1, 2}, w[6] = {1, 0, 1, 1, 0, -1}, b[3] = {0, 1, 2}, y[3];
    ddl_dense_forward(1, 2, 3, x, w, b, y);
    CHECK(y[0] == 1 && y[1] == 4 && y[2] == 0);

    dense_ctx c = {3, 5, 4, alloc_f(15), alloc_f(20), alloc_f(4), alloc_f(12), alloc_f(12)};
    float *dx = alloc_f(15), *dw = alloc_f(20), *db = alloc_f(4), *dx2 = alloc_f(15);
    fill(c.x, 15, -1, 1);
    fill(c.w, 20, -1, 1);
    fill(c.b, 4, -1, 1);
    fill(c.r, 12, -1, 1);
    ddl_dense_backward(c.batch, c.in, c.out, c.x, c.w, c.r, dx, dw, db);
    fd_check("dense dx", dense_loss, &c, c.x, 15, dx, 1e-2f);
    fd_check("dense dw", dense_loss, &c, c.w, 20, dw, 1e-2f);
    fd_check("dense db", dense_loss, &c, c.b, 4, db, 1e-2f);
    /* accumulate: twice doubles dw and db; dx is overwritten */
    float dw1 = dw[7], db1 = db[2];
    fill(dx2, 15, 5, 6);
    ddl_dense_backward(c.batch, c.in, c.out, c.x, c.w, c.r, dx2, dw, db);
    CHECK_NEAR(dw[7], 2 * dw1, 1e-5);
    CHECK_NEAR(db[2], 2 * db1, 1e-5);
    CHECK(max_rel(dx2, dx, 15, 1e-5) < 1e-6);
    ddl_dense_backward(c.batch, c.in, c.out, c.x, c.w, c.r, NULL, dw, db); /* dx may be NULL */
    CHECK_NEAR(dw[7], 3 * dw1, 1e-5);
    free(c.x);
    free(c.w);
    free(c.b);
    free(c.y);
    free(c.r);
    free(dx);
    free(dw);
    free(db);
    free(dx2);
}

/* ---- dropout ---- */

typedef struct drop_ctx {
    size_t n;
    float p;
    float *x, *y, *r;
    uint8_t *mask;
} drop_ctx;

static double drop_loss(void *p)
{
    drop_ctx *c = p;
    ddl_rng seeded; /* the same seed every time: the same mask */
    ddl_rng_seed(&seeded, 99);
    ddl_dropout_forward(c->n, c->p, 1, &seeded, c->x, c->y, c->mask);
    return dot(c->y, c->r, c->n);
}

static void test_dropout(void)
{
    size_t n = 10000;
    drop_ctx c = {n, 0.3f, alloc_f(n), alloc_f(n), alloc_f(n), malloc(n)};
    float *dx = alloc_f(n);
    fill(c.x, n, -1, 1);
    fill(c.r, n, -1, 1);
    drop_loss(&c);
    size_t kept = 0;
    int values_ok = 1;
    for (size_t i = 0; i < n; i++) {
        kept += c.mask[i];
        float want = c.mask[i] ? c.x[i] / 0.7f : 0.0f;
        if (fabsf(c.y[i] - want) > 1e-6f)
            values_ok = 0;
    }
    CHECK(values_ok);
    CHECK(kept > 6700 && kept < 7300); /* keep probability 0.7 */
    ddl_dropout_backward(n, c.p, c.mask, c.r, dx);
    c.n = 200; /* the first 200 elements are enough for finite differences */
    fd_check("dropout dx", drop_loss, &c, c.x, c.n, dx, 1e-2f);
    /* evaluation: identity */
    ddl_dropout_forward(n, 0.3f, 0, &rng, c.x, c.y, c.mask);
    CHECK(memcmp(c.x, c.y, n * sizeof *c.x) == 0);
    free(c.x);
    free(c.y);
    free(c.r);
    free(c.mask);
    free(dx);
}

/* ---- softmax cross-entropy ---- */

typedef struct xent_ctx {
    int n, c, s;
    float *logits;
    uint16_t *t;
} xent_ctx;

static double xent_loss(void *p)
{
    xent_ctx *c = p;
    return ddl_softmax_xent(c->n, c->c, c->s, c->logits, c->t, 1.0f, NULL, NULL);
}

static void check_xent_grad(int n, int c, int s)
{
    size_t nl = (size_t)n * c * s;
    xent_ctx x = {n, c, s, alloc_f(nl), malloc((size_t)n * s * sizeof(uint16_t))};
    float *dl = alloc_f(nl), *probs = alloc_f(nl), *dl2 = alloc_f(nl);
    fill(x.logits, nl, -3, 3);
    for (int i = 0; i < n * s; i++)
        x.t[i] = (uint16_t)ddl_rng_below(&rng, (uint32_t)c);
    double l1 = ddl_softmax_xent(n, c, s, x.logits, x.t, 1.0f, probs, dl);
    CHECK_NEAR(l1, xent_loss(&x), 1e-9);
    fd_check(s > 256 ? "softmax_xent dlogits (blocked)" : "softmax_xent dlogits", xent_loss, &x, x.logits, nl, dl,
             1e-2f);
    double worst = 0.0; /* probabilities sum to 1 at every position */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < s; j++) {
            double sum = 0.0;
            for (int k = 0; k < c; k++)
                sum += probs[((size_t)i * c + k) * s + j];
            worst = fmax(worst, fabs(sum - 1.0));
        }
    CHECK(worst < 1e-5);
    ddl_softmax_xent(n, c, s, x.logits, x.t, 0.25f, NULL, dl2); /* scale multiplies the gradient */
    for (size_t i = 0; i < nl; i++)
        dl[i] *= 0.25f;
    CHECK(max_rel(dl2, dl, nl, 1e-6) < 1e-5);
    free(x.logits);
    free(x.t);
    free(dl);
    free(probs);
    free(dl2);
}

static void test_softmax_xent(void)
{
    /* hand-computed: logits (0, ln 3) -> probs (1/4, 3/4); target 1: loss -ln(3/4) */
    float l[2] = {0.0f, logf(3.0f)}, p[2], d[2];
    uint16_t t[1] = {1};
    double loss = ddl_softmax_xent(1, 2, 1, l, t, 1.0f, p, d);
    CHECK_NEAR(loss, -log(0.75), 1e-6);
    CHECK_NEAR(p[0], 0.25, 1e-6);
    CHECK_NEAR(d[0], 0.25, 1e-6);
    CHECK_NEAR(d[1], -0.25, 1e-6);
    /* stable for large logits: (1000, 0), target 1: loss 1000, no inf or NaN */
    float big[2] = {1000.0f, 0.0f};
    loss = ddl_softmax_xent(1, 2, 1, big, t, 1.0f, p, d);
    CHECK_NEAR(loss, 1000.0, 1e-3);
    CHECK(p[0] == 1.0f && p[1] == 0.0f && d[1] == -1.0f);
    /* an out-of-range target is ignored: no loss, no gradient */
    uint16_t bad[1] = {7};
    loss = ddl_softmax_xent(1, 2, 1, l, bad, 1.0f, p, d);
    CHECK(loss == 0.0 && d[0] == 0.0f && d[1] == 0.0f);
    check_xent_grad(3, 4, 1);
    check_xent_grad(2, 3, 5);
    check_xent_grad(1, 3, 300);
}

/* ---- dice loss ---- */

typedef struct dice_ctx {
    int n, c, s;
    float *logits, *probs;
    uint16_t *t;
} dice_ctx;

static double dice_loss(void *p)
{
    dice_ctx *c = p;
    ddl_softmax_xent(c->n, c->c, c->s, c->logits, c->t, 1.0f, c->probs, NULL);
    return ddl_dice_loss(c->n, c->c, c->s, c->probs, c->t, 1.0f, NULL);
}

static void test_dice(void)
{
    /* hand-computed: p0 = (1/4, 1), targets (1, 0): p_fg = (3/4, 0), I = 3/4, P = 3/4, T = 1,
     * loss = 1 - 2.5 / 2.75 */
    float probs[4] = {0.25f, 1.0f, 0.75f, 0.0f};
    uint16_t t[2] = {1, 0};
    CHECK_NEAR(ddl_dice_loss(1, 2, 2, probs, t, 1.0f, NULL), 1.0 - 2.5 / 2.75, 1e-6);

    int n = 2, c = 3, s = 6;
    size_t nl = (size_t)n * c * s;
    dice_ctx d = {n, c, s, alloc_f(nl), alloc_f(nl), malloc((size_t)n * s * sizeof(uint16_t))};
    float *dl = alloc_f(nl);
    fill(d.logits, nl, -2, 2);
    for (int i = 0; i < n * s; i++)
        d.t[i] = (uint16_t)ddl_rng_below(&rng, (uint32_t)c);
    dice_loss(&d);
    for (size_t i = 0; i < nl; i++)
        dl[i] = 0.5f; /* dice ADDS to what is there */
    ddl_dice_loss(n, c, s, d.probs, d.t, 1.0f, dl);
    for (size_t i = 0; i < nl; i++)
        dl[i] -= 0.5f;
    fd_check("dice dlogits", dice_loss, &d, d.logits, nl, dl, 1e-2f);
    /* scale multiplies what is added */
    float *dl2 = alloc_f(nl);
    dice_loss(&d); /* fd_check left probs of a perturbed input */
    ddl_dice_loss(n, c, s, d.probs, d.t, 3.0f, dl2);
    for (size_t i = 0; i < nl; i++)
        dl[i] *= 3.0f;
    CHECK(max_rel(dl2, dl, nl, 1e-4) < 1e-3);
    free(d.logits);
    free(d.probs);
    free(d.t);
    free(dl);
    free(dl2);
}

/* ---- group normalisation ---- */

typedef struct gn_ctx {
    int n, c, s, groups;
    float *x, *gamma, *beta, *y, *r, *mr;
} gn_ctx;

static double gn_loss(void *p)
{
    gn_ctx *c = p;
    ddl_groupnorm_forward(c->n, c->c, c->s, c->groups, c->x, c->gamma, c->beta, c->y, c->mr);
    return dot(c->y, c->r, (size_t)c->n * c->c * c->s);
}

static void check_gn_forward(gn_ctx *g)
{
    /* with gamma 1 and beta 0 each group has mean 0 and variance var / (var + eps) */
    size_t nx = (size_t)g->n * g->c * g->s, cg = (size_t)(g->c / g->groups) * g->s;
    float *ones = alloc_f((size_t)g->c), *zeros = alloc_f((size_t)g->c);
    for (int i = 0; i < g->c; i++)
        ones[i] = 1.0f;
    ddl_groupnorm_forward(g->n, g->c, g->s, g->groups, g->x, ones, zeros, g->y, g->mr);
    double worst_mean = 0.0, worst_var = 0.0, worst_stat = 0.0;
    for (size_t grp = 0; grp < nx / cg; grp++) {
        double m = 0.0, v = 0.0, xm = 0.0, xv = 0.0;
        for (size_t i = 0; i < cg; i++) {
            m += g->y[grp * cg + i];
            xm += g->x[grp * cg + i];
        }
        m /= (double)cg;
        xm /= (double)cg;
        for (size_t i = 0; i < cg; i++) {
            v += (g->y[grp * cg + i] - m) * (g->y[grp * cg + i] - m);
            xv += (g->x[grp * cg + i] - xm) * (g->x[grp * cg + i] - xm);
        }
        v /= (double)cg;
        xv /= (double)cg;
        worst_mean = fmax(worst_mean, fabs(m));
        worst_var = fmax(worst_var, fabs(v - xv / (xv + 1e-5)));
        worst_stat = fmax(worst_stat, fabs(g->mr[grp * 2] - xm) + fabs(g->mr[grp * 2 + 1] - 1.0 / sqrt(xv + 1e-5)));
    }
    CHECK(worst_mean < 1e-5);
    CHECK(worst_var < 1e-4);
    CHECK(worst_stat < 1e-4);
    free(ones);
    free(zeros);
}

/* check_groupnorm: forward statistics, finite differences, and accumulation of dgamma, dbeta. */
static void check_groupnorm(int n, int c, int s, int groups)
{
    gn_ctx g = {n, c, s, groups, NULL, NULL, NULL, NULL, NULL, NULL};
    size_t nx = (size_t)n * c * s;
    g.x = alloc_f(nx);
    g.gamma = alloc_f((size_t)c);
    g.beta = alloc_f((size_t)c);
    g.y = alloc_f(nx);
    g.r = alloc_f(nx);
    g.mr = alloc_f((size_t)n * groups * 2);
    fill(g.x, nx, -2, 3);
    fill(g.gamma, (size_t)c, 0.5f, 1.5f);
    fill(g.beta, (size_t)c, -1, 1);
    fill(g.r, nx, -1, 1);
    check_gn_forward(&g);
    float *dx = alloc_f(nx), *dg = alloc_f((size_t)c), *dbt = alloc_f((size_t)c), *dx2 = alloc_f(nx);
    gn_loss(&g);
    ddl_groupnorm_backward(g.n, g.c, g.s, g.groups, g.x, g.gamma, g.mr, g.r, dx, dg, dbt);
    fd_check("groupnorm dx", gn_loss, &g, g.x, nx, dx, 1e-2f);
    fd_check("groupnorm dgamma", gn_loss, &g, g.gamma, (size_t)c, dg, 1e-2f);
    fd_check("groupnorm dbeta", gn_loss, &g, g.beta, (size_t)c, dbt, 1e-2f);
    float dg1 = dg[c - 1], db1 = dbt[1];
    gn_loss(&g);
    fill(dx2, nx, 5, 6);
    ddl_groupnorm_backward(g.n, g.c, g.s, g.groups, g.x, g.gamma, g.mr, g.r, dx2, dg, dbt);
    CHECK_NEAR(dg[c - 1], 2 * dg1, 1e-5);
    CHECK_NEAR(dbt[1], 2 * db1, 1e-5);
    CHECK(max_rel(dx2, dx, nx, 1e-5) < 1e-5);
    free(g.x);
    free(g.gamma);
    free(g.beta);
    free(g.y);
    free(g.r);
    free(g.mr);
    free(dx);
    free(dg);
    free(dbt);
    free(dx2);
}

/* groupnorm_cuts: a batch too big for the per-sample shares (2 n c > 4096: cut by group) gives the
 * bits of the same samples passed one at a time (each cut by sample), dgamma and dbeta added in
 * sample order both ways. */
static void groupnorm_cuts(void)
{
    int n = 40, c = 64, s = 9, groups = 8;
    size_t nx = (size_t)n * c * s, per = (size_t)c * s;
    float *x = alloc_f(nx), *dy = alloc_f(nx), *y = alloc_f(nx), *mr = alloc_f((size_t)n * groups * 2);
    float *gamma = alloc_f((size_t)c), *beta = alloc_f((size_t)c), *dx = alloc_f(nx), *dx1 = alloc_f(nx);
    float *dg = alloc_f((size_t)c), *db = alloc_f((size_t)c), *dg1 = alloc_f((size_t)c), *db1 = alloc_f((size_t)c);
    fill(x, nx, -2, 2), fill(dy, nx, -1, 1), fill(gamma, (size_t)c, 0.5f, 1.5f), fill(beta, (size_t)c, -1, 1);
    ddl_groupnorm_forward(n, c, s, groups, x, gamma, beta, y, mr);
    ddl_groupnorm_backward(n, c, s, groups, x, gamma, mr, dy, dx, dg, db);
    for (int i = 0; i < n; i++)
        ddl_groupnorm_backward(1, c, s, groups, x + i * per, gamma, mr + (size_t)i * groups * 2, dy + i * per,
                               dx1 + i * per, dg1, db1);
    CHECK(memcmp(dx, dx1, nx * sizeof *dx) == 0);
    CHECK(memcmp(dg, dg1, (size_t)c * sizeof *dg) == 0 && memcmp(db, db1, (size_t)c * sizeof *db) == 0);
    /* 8 samples at once (cut by sample, the shares added in order) against them one at a time */
    memset(dg, 0, (size_t)c * sizeof *dg), memset(db, 0, (size_t)c * sizeof *db);
    memset(dg1, 0, (size_t)c * sizeof *dg1), memset(db1, 0, (size_t)c * sizeof *db1);
    ddl_groupnorm_backward(8, c, s, groups, x, gamma, mr, dy, dx, dg, db);
    for (int i = 0; i < 8; i++)
        ddl_groupnorm_backward(1, c, s, groups, x + i * per, gamma, mr + (size_t)i * groups * 2, dy + i * per,
                               dx1 + i * per, dg1, db1);
    CHECK(memcmp(dx, dx1, 8 * per * sizeof *dx) == 0);
    CHECK(memcmp(dg, dg1, (size_t)c * sizeof *dg) == 0 && memcmp(db, db1, (size_t)c * sizeof *db) == 0);
    free(x), free(dy), free(y), free(mr), free(gamma), free(beta), free(dx), free(dx1);
    free(dg), free(db), free(dg1), free(db1);
}

/* groupnorm_relu_fused: GroupNorm + ReLU in one pass each way gives the bits of the two ops one
 * after the other: forward y and statistics, backward dx, dgamma and dbeta (dy masked by y). With
 * n c small, the backward is cut by sample; with 2 n c > 4096, by group. */
static void groupnorm_relu_fused(int n, int c, int s, int groups)
{
    size_t nx = (size_t)n * c * s, nm = (size_t)n * groups * 2;
    float *x = alloc_f(nx), *dy = alloc_f(nx), *y = alloc_f(nx), *y1 = alloc_f(nx), *mr = alloc_f(nm);
    float *mr1 = alloc_f(nm), *gamma = alloc_f((size_t)c), *beta = alloc_f((size_t)c), *dx = alloc_f(nx);
    float *dx1 = alloc_f(nx), *p = alloc_f(nx), *dg = alloc_f((size_t)c), *db = alloc_f((size_t)c);
    float *dg1 = alloc_f((size_t)c), *db1 = alloc_f((size_t)c);
    fill(x, nx, -2, 2), fill(dy, nx, -1, 1), fill(gamma, (size_t)c, 0.5f, 1.5f), fill(beta, (size_t)c, -1, 1);
    ddl_groupnorm_forward(n, c, s, groups, x, gamma, beta, y, mr);
    ddl_relu_forward(nx, y, y);
    ddl_groupnorm_relu_forward(n, c, s, groups, x, gamma, beta, y1, mr1);
    CHECK(memcmp(y, y1, nx * sizeof *y) == 0 && memcmp(mr, mr1, nm * sizeof *mr) == 0);
    size_t zeros = 0;
    for (size_t i = 0; i < nx; i++)
        zeros += y[i] == 0.0f;
    CHECK(zeros > nx / 8 && zeros < nx - nx / 8); /* the mask matters */
    ddl_relu_backward(nx, y, dy, p);
    ddl_groupnorm_backward(n, c, s, groups, x, gamma, mr, p, dx, dg, db);
    ddl_groupnorm_relu_backward(n, c, s, groups, x, gamma, mr, y1, dy, dx1, dg1, db1);
    CHECK(memcmp(dx, dx1, nx * sizeof *dx) == 0);
    CHECK(memcmp(dg, dg1, (size_t)c * sizeof *dg) == 0 && memcmp(db, db1, (size_t)c * sizeof *db) == 0);
    free(x), free(dy), free(y), free(y1), free(mr), free(mr1), free(gamma), free(beta), free(dx), free(dx1);
    free(p), free(dg), free(db), free(dg1), free(db1);
}

static void test_groupnorm(void)
{
    check_groupnorm(2, 6, 5, 3);
    check_groupnorm(2, 4, 37, 2); /* rows long enough for the 8-lane sums, and a tail */
    groupnorm_cuts();
    groupnorm_relu_fused(3, 8, 37, 4);
    groupnorm_relu_fused(40, 64, 9, 8);
}

/* ---- concat / split ---- */

typedef struct cat_ctx {
    int n, ca, cb, s;
    float *a, *b, *y, *r;
} cat_ctx;

static double cat_loss(void *p)
{
    cat_ctx *c = p;
    ddl_concat_channels(c->n, c->ca, c->cb, c->s, c->a, c->b, c->y);
    return dot(c->y, c->r, (size_t)c->n * (c->ca + c->cb) * c->s);
}

static void test_concat(void)
{
    /* hand-computed: n 2, s 1: a (2, 1), b (2, 2) -> y rows (a0 b0 b1), (a1 b2 b3) */
    float a[2] = {1, 2}, b[4] = {3, 4, 5, 6}, y[6], da[2], db[4];
    ddl_concat_channels(2, 1, 2, 1, a, b, y);
    CHECK(y[0] == 1 && y[1] == 3 && y[2] == 4 && y[3] == 2 && y[4] == 5 && y[5] == 6);
    ddl_split_channels(2, 1, 2, 1, y, da, db);
    CHECK(memcmp(da, a, sizeof a) == 0 && memcmp(db, b, sizeof b) == 0);

    cat_ctx c = {2, 2, 3, 4, alloc_f(16), alloc_f(24), alloc_f(40), alloc_f(40)};
    float *ga = alloc_f(16), *gb = alloc_f(24);
    fill(c.a, 16, -1, 1);
    fill(c.b, 24, -1, 1);
    fill(c.r, 40, -1, 1);
    ddl_split_channels(c.n, c.ca, c.cb, c.s, c.r, ga, gb);
    fd_check("concat da", cat_loss, &c, c.a, 16, ga, 1e-2f);
    fd_check("concat db", cat_loss, &c, c.b, 24, gb, 1e-2f);
    free(c.a);
    free(c.b);
    free(c.y);
    free(c.r);
    free(ga);
    free(gb);
}

/* run: group NAME runs when no names are given or NAME is one of them (tests/test_cpus.sh picks
 * the groups that reach the kernels chosen by CPU, under an emulated CPU where all take long) */
static int run(int argc, char **argv, const char *name)
{
    if (argc < 2)
        return 1;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return 1;
    return 0;
}

/* plane_sum: one plane's sum in the order the bias gradient documents (ops.c's ddl__row_sum): 8
 * lanes, each a running sum of every 8th float, added as ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7)),
 * then the floats past the last 8 one by one. */
static float plane_sum(const float *x, int n)
{
    float a[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            a[k] += x[i + k];
    float t = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
    for (; i < n; i++)
        t += x[i];
    return t;
}

/* bias_sum: a convolution's bias gradient is, bit for bit, each channel's plane sums added in
 * sample order in a double (several planes are summed side by side: sample counts that are and are
 * not multiples of 4 and 8, planes with and without a tail past the last 8 floats). */
static void test_bias_sum(void)
{
    static const int shapes[][3] = {{7, 3, 5}, {8, 2, 8}, {13, 4, 9}, {32, 3, 16}, {1, 2, 3}}; /* n, c, side */
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int n = shapes[s][0], c = shapes[s][1], side = shapes[s][2], p = side * side;
        ddl_conv2d g = {.batch = n, .in_c = 1, .in_h = side, .in_w = side, .out_c = c, .k_h = 3, .k_w = 3, .stride = 1,
                        .pad = 1};
        size_t ny = (size_t)n * c * p;
        float *dy = malloc(ny * sizeof *dy), *db = calloc((size_t)c, sizeof *db);
        float *ws = calloc(ddl_conv2d_workspace(&g) + 1, sizeof *ws);
        for (size_t i = 0; i < ny; i++) /* values whose sums round: the order shows in the bits */
            dy[i] = (float)((i * 2654435761u) % 1000003u) * 1.37e-3f - 611.0f;
        /* the bias alone, and beside the weight gradient (the direct kernels' own sums) */
        float *x = calloc((size_t)n * p, sizeof *x), *w = calloc((size_t)c * 9, sizeof *w);
        float *dw = calloc((size_t)c * 9, sizeof *dw), *db2 = calloc((size_t)c, sizeof *db2);
        ddl_conv2d_backward(&g, NULL, NULL, dy, NULL, NULL, db, ws);
        ddl_conv2d_backward(&g, x, w, dy, NULL, dw, db2, ws);
        for (int ci = 0; ci < c; ci++) {
            double want = 0.0;
            for (int k = 0; k < n; k++)
                want += plane_sum(dy + ((size_t)k * c + ci) * p, p);
            CHECK(db[ci] == (float)want);
            CHECK(db2[ci] == (float)want);
        }
        free(dy), free(db), free(ws), free(x), free(w), free(dw), free(db2);
    }
}

#define GROUP(name)                   \
    do {                              \
        if (run(argc, argv, #name))   \
            test_##name();            \
    } while (0)

int main(int argc, char **argv)
{
    ddl_rng_seed(&rng, 1234);
    ddl_set_threads(1);
    GROUP(conv_hand);
    GROUP(conv_small);
    GROUP(deconv_small);
    GROUP(conv_large);
    GROUP(maxpool);
    GROUP(relu);
    GROUP(dense);
    GROUP(dropout);
    GROUP(softmax_xent);
    GROUP(dice);
    GROUP(groupnorm);
    GROUP(concat);
    GROUP(conv_paths); /* last of those drawing random data: the groups before it keep the data they had */
    GROUP(bias_sum);
    return TEST_END();
}
