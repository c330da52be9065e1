/* test_conv_geometry.c - convolution and pooling geometry beyond square kernels, one stride and
 * one pad: rectangular kernels, a stride per axis, a pad per side, dilation, groups (the
 * depthwise kernel among them), a transposed convolution's output padding, pools' ceil_mode
 * and count_include_pad.
 *  - each kernel's forward pass, input gradient and weight and bias gradients against the
 *    definition, written out below in double loop by loop (nothing shared with the kernels);
 *  - the same bits on 1 and 2 threads;
 *  - graph models of every such layer pass ddl_model_check_grads (finite differences);
 *  - a geometry that is plain gives the plain layer byte for byte; the arch text reads back
 *    what it writes; values out of range are refused, the field named. */
#include "ddl.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

static float *rnd(size_t n, uint64_t seed)
{
    ddl_rng r;
    ddl_rng_seed(&r, seed);
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = ddl_rng_normal(&r);
    return p;
}

/* ---- the definitions ---- */

typedef struct full {
    int sh, sw, dh, dw, pt, pl, pb, pr, groups;
} full;

static full full_of(const ddl_conv2d *g)
{
    full f = {g->stride, g->stride_w ? g->stride_w : g->stride, g->dilation_h ? g->dilation_h : 1,
              g->dilation_w ? g->dilation_w : 1, g->pad, g->pad, g->pad, g->pad, g->groups ? g->groups : 1};
    if (g->pads4)
        f.pt = g->pad_t, f.pl = g->pad_l, f.pb = g->pad_b, f.pr = g->pad_r;
    return f;
}

/* def_conv: y, or with dy given dx, dw and db (all by scattering each tap), by the definition */
static void def_conv(const ddl_conv2d *g, const float *x, const float *w, const float *b, double *y, const float *dy,
                     double *dx, double *dw, double *db)
{
    full f = full_of(g);
    int oh = (g->in_h + f.pt + f.pb - f.dh * (g->k_h - 1) - 1) / f.sh + 1;
    int ow = (g->in_w + f.pl + f.pr - f.dw * (g->k_w - 1) - 1) / f.sw + 1;
    int cg = g->in_c / f.groups, og = g->out_c / f.groups;
    for (int n = 0; n < g->batch; n++)
        for (int o = 0; o < g->out_c; o++)
            for (int oy = 0; oy < oh; oy++)
                for (int ox = 0; ox < ow; ox++) {
                    size_t yi = (((size_t)n * g->out_c + o) * oh + oy) * ow + ox;
                    double s = b ? b[o] : 0.0, d = dy ? dy[yi] : 0.0;
                    if (dy && db)
                        db[o] += d;
                    for (int i = 0; i < cg; i++)
                        for (int ki = 0; ki < g->k_h; ki++)
                            for (int kj = 0; kj < g->k_w; kj++) {
                                int iy = oy * f.sh - f.pt + ki * f.dh, ix = ox * f.sw - f.pl + kj * f.dw;
                                if (iy < 0 || iy >= g->in_h || ix < 0 || ix >= g->in_w)
                                    continue;
                                int c = o / og * cg + i;
                                size_t xi = (((size_t)n * g->in_c + c) * g->in_h + iy) * g->in_w + ix;
                                size_t wi = (((size_t)o * cg + i) * g->k_h + ki) * g->k_w + kj;
                                s += (double)x[xi] * w[wi];
                                if (dy) {
                                    dx[xi] += d * w[wi];
                                    dw[wi] += d * x[xi];
                                }
                            }
                    if (!dy)
                        y[yi] = s;
                }
}

/* def_deconv: y (the scatter of every input pixel's weighted kernel), or dx, dw, db */
static void def_deconv(const ddl_conv2d *g, const float *x, const float *w, const float *b, double *y, const float *dy,
                       double *dx, double *dw, double *db)
{
    full f = full_of(g);
    int oh = ddl_deconv2d_out_h(g), ow = ddl_deconv2d_out_w(g);
    if (!dy)
        for (size_t i = 0; i < (size_t)g->batch * g->out_c * oh * ow; i++)
            y[i] = b[i / ((size_t)oh * ow) % g->out_c];
    if (dy)
        for (size_t i = 0; i < (size_t)g->batch * g->out_c * oh * ow; i++)
            db[i / ((size_t)oh * ow) % g->out_c] += dy[i];
    for (int n = 0; n < g->batch; n++)
        for (int c = 0; c < g->in_c; c++)
            for (int iy = 0; iy < g->in_h; iy++)
                for (int ix = 0; ix < g->in_w; ix++) {
                    size_t xi = (((size_t)n * g->in_c + c) * g->in_h + iy) * g->in_w + ix;
                    for (int o = 0; o < g->out_c; o++)
                        for (int ki = 0; ki < g->k_h; ki++)
                            for (int kj = 0; kj < g->k_w; kj++) {
                                int yy = iy * f.sh - f.pt + ki * f.dh, yx = ix * f.sw - f.pl + kj * f.dw;
                                if (yy < 0 || yy >= oh || yx < 0 || yx >= ow)
                                    continue;
                                size_t yi = (((size_t)n * g->out_c + o) * oh + yy) * ow + yx;
                                size_t wi = (((size_t)c * g->out_c + o) * g->k_h + ki) * g->k_w + kj;
                                if (!dy) {
                                    y[yi] += (double)x[xi] * w[wi];
                                } else {
                                    dx[xi] += (double)dy[yi] * w[wi];
                                    dw[wi] += (double)dy[yi] * x[xi];
                                }
                            }
                }
}

/* near: every a[i] within tol of b[i], relative to the largest |b|; the worst into stderr */
static int near(const float *a, const double *b, size_t n, double tol, const char *what)
{
    double scale = 1e-6, worst = 0.0;
    for (size_t i = 0; i < n; i++)
        scale = fabs(b[i]) > scale ? fabs(b[i]) : scale;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]) / scale;
        worst = d > worst ? d : worst;
    }
    if (worst > tol)
        fprintf(stderr, "%s: off by %.3g of its scale\n", what, worst);
    return worst <= tol;
}

/* ---- kernels against the definitions ---- */

typedef struct ccase {
    const char *what;
    ddl_conv2d g;
    int deconv;
} ccase;

#define G(n, c, h, w, o, kh, kw, sh, sw, pt, pl, pb, pr, dh_, dw_, gr, oph, opw)                                \
    {.batch = n, .in_c = c, .in_h = h, .in_w = w, .out_c = o, .k_h = kh, .k_w = kw, .stride = sh, .stride_w = sw, \
     .dilation_h = dh_, .dilation_w = dw_, .groups = gr, .pads4 = 1, .pad_t = pt, .pad_l = pl, .pad_b = pb,      \
     .pad_r = pr, .out_pad_h = oph, .out_pad_w = opw}

/* the plain geometry (one stride, one pad): the wide kernels' or im2col's by the plane's size */
#define P(n, c, h, w, o, k, p_) {.batch = n, .in_c = c, .in_h = h, .in_w = w, .out_c = o, .k_h = k, .k_w = k, .stride = 1, .pad = p_}

static const ccase cases[] = {
    {"plain 3x3 pad 1 at 16x16 (wide kernels)", P(2, 3, 16, 16, 4, 3, 1), 0},
    {"plain 3x3 pad 1 at 8x8, few channels (wide kernels)", P(3, 5, 8, 8, 6, 3, 1), 0},
    /* the wide weight gradient's channel groups (3x3, AVX-512): threes, then pairs, a spare for 1 */
    {"plain 3x3 pad 1 at 16x16, 1 output channel (a pair with a spare)", P(2, 3, 16, 16, 1, 3, 1), 0},
    {"plain 3x3 pad 1 at 16x16, 7 output channels (a three and two pairs)", P(2, 4, 16, 16, 7, 3, 1), 0},
    {"plain 3x3 pad 1 at 16x16, 8 output channels (two threes and a pair)", P(2, 5, 16, 16, 8, 3, 1), 0},
    {"plain 3x3 pad 1 at 8x8, 72 x 64 channels (wide forward and dx, im2col dw)", P(1, 72, 8, 8, 64, 3, 1), 0},
    {"plain 3x3 pad 1 at 4x4 (im2col)", P(3, 4, 4, 4, 5, 3, 1), 0},
    {"plain 3x3 pad 1 at 2x2, 128 -> 256 channels (weights past the chunk budget)", P(5, 128, 2, 2, 256, 3, 1), 0},
    {"plain 5x5 pad 2 at 2x3 (im2col)", P(2, 3, 2, 3, 2, 5, 2), 0},
    {"3x5 kernel, strides 2 and 1, pads 1,2,0,1", G(3, 4, 9, 11, 5, 3, 5, 2, 1, 1, 2, 0, 1, 1, 1, 1, 0, 0), 0},
    {"dilation 2, pad 2", G(2, 3, 10, 9, 4, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1, 0, 0), 0},
    {"dilation 3x1, 1x1 taps apart", G(2, 3, 12, 8, 2, 2, 3, 1, 2, 0, 1, 1, 0, 3, 1, 1, 0, 0), 0},
    {"2 groups, 3x3 pad 1 (im2col per group)", G(3, 4, 8, 8, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, 0, 0), 0},
    {"4 groups, batch in chunks", G(9, 8, 6, 7, 4, 3, 2, 2, 1, 0, 1, 1, 0, 1, 1, 4, 0, 0), 0},
    {"depthwise 3x3 pad 1", G(3, 8, 20, 21, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 8, 0, 0), 0},
    {"depthwise stride 2, SAME pads 0,0,1,1", G(2, 6, 17, 34, 6, 3, 3, 2, 2, 0, 0, 1, 1, 1, 1, 6, 0, 0), 0},
    {"depthwise x2, 5x3, dilation 1,2, strides 1,3", G(2, 3, 11, 20, 6, 5, 3, 1, 3, 2, 1, 2, 3, 1, 2, 3, 0, 0), 0},
    {"1x1, stride 2, pads 0,0,1,1", G(2, 5, 7, 6, 3, 1, 1, 2, 2, 0, 0, 1, 1, 1, 1, 1, 0, 0), 0},
    {"transposed 3x3 stride 2 pad 1, output padding 1", G(2, 4, 5, 6, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1), 1},
    {"transposed 2x3, strides 2,3, pads 0,1,1,0, dilation 2,1, output padding 1,0",
     G(3, 3, 4, 5, 2, 2, 3, 2, 3, 0, 1, 1, 0, 2, 1, 1, 1, 0), 1},
};

static void run_case(const ccase *c, int threads, float *y, float *dx, float *dw, float *db, size_t *ny, size_t *nx,
                     size_t *nw)
{
    const ddl_conv2d *g = &c->g;
    int oh = c->deconv ? ddl_deconv2d_out_h(g) : ddl_conv2d_out_h(g), ow = c->deconv ? ddl_deconv2d_out_w(g) : ddl_conv2d_out_w(g);
    int groups = g->groups ? g->groups : 1;
    *nx = (size_t)g->batch * g->in_c * g->in_h * g->in_w;
    *ny = (size_t)g->batch * g->out_c * oh * ow;
    *nw = (size_t)(c->deconv ? g->in_c * g->out_c : g->out_c * (g->in_c / groups)) * g->k_h * g->k_w;
    float *x = rnd(*nx, 1), *w = rnd(*nw, 2), *b = rnd((size_t)g->out_c, 3), *dy = rnd(*ny, 4);
    size_t wsn = c->deconv ? ddl_deconv2d_workspace(g) : ddl_conv2d_workspace(g);
    float *ws = malloc((wsn ? wsn : 1) * sizeof *ws);
    ddl_set_threads(threads);
    memset(dw, 0, *nw * sizeof *dw);
    memset(db, 0, (size_t)g->out_c * sizeof *db);
    if (c->deconv) {
        ddl_deconv2d_forward(g, x, w, b, y, ws);
        ddl_deconv2d_backward(g, x, w, dy, dx, dw, db, ws);
    } else {
        ddl_conv2d_forward(g, x, w, b, y, ws);
        ddl_conv2d_backward(g, x, w, dy, dx, dw, db, ws);
    }
    ddl_set_threads(1);
    free(x), free(w), free(b), free(dy), free(ws);
}

static void kernels(void)
{
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const ccase *c = &cases[k];
        const ddl_conv2d *g = &c->g;
        size_t ny, nx, nw, big = 1 << 19;
        float *y = calloc(big, 4), *dx = calloc(big, 4), *dw = calloc(big, 4), *db = calloc(512, 4);
        float *y2 = calloc(big, 4), *dx2 = calloc(big, 4), *dw2 = calloc(big, 4), *db2 = calloc(512, 4);
        CHECK((c->deconv ? ddl_deconv2d_workspace(g) : ddl_conv2d_workspace(g)) > 0);
        run_case(c, 1, y, dx, dw, db, &ny, &nx, &nw);
        CHECK(ny <= big && nx <= big && nw <= big);
        float *x = rnd(nx, 1), *w = rnd(nw, 2), *b = rnd((size_t)g->out_c, 3), *dy = rnd(ny, 4);
        double *ry = calloc(ny, 8), *rdx = calloc(nx, 8), *rdw = calloc(nw, 8), *rdb = calloc((size_t)g->out_c, 8);
        void (*def)(const ddl_conv2d *, const float *, const float *, const float *, double *, const float *, double *,
                    double *, double *) = c->deconv ? def_deconv : def_conv;
        def(g, x, w, b, ry, NULL, NULL, NULL, NULL);
        def(g, x, w, b, NULL, dy, rdx, rdw, rdb);
        char what[160];
        snprintf(what, sizeof what, "%s: forward", c->what);
        CHECK(near(y, ry, ny, 1e-5, what));
        snprintf(what, sizeof what, "%s: input gradient", c->what);
        CHECK(near(dx, rdx, nx, 1e-5, what));
        snprintf(what, sizeof what, "%s: weight gradient", c->what);
        CHECK(near(dw, rdw, nw, 1e-5, what));
        snprintf(what, sizeof what, "%s: bias gradient", c->what);
        CHECK(near(db, rdb, (size_t)g->out_c, 1e-5, what));
        run_case(c, 2, y2, dx2, dw2, db2, &ny, &nx, &nw); /* the same bits on 2 threads */
        int same = !memcmp(y, y2, ny * 4) && !memcmp(dx, dx2, nx * 4) && !memcmp(dw, dw2, nw * 4) &&
                   !memcmp(db, db2, (size_t)g->out_c * 4);
        if (!same)
            fprintf(stderr, "%s: other bits on 2 threads\n", c->what);
        CHECK(same);
        free(x), free(w), free(b), free(dy), free(ry), free(rdx), free(rdw), free(rdb);
        free(y), free(dx), free(dw), free(db), free(y2), free(dx2), free(dw2), free(db2);
    }
    /* what the passes do not take: groups that do not divide, groups on a transposed one */
    ddl_conv2d bad = G(1, 4, 5, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, 0, 0);
    CHECK(ddl_conv2d_workspace(&bad) == 0);
    ddl_conv2d tg = G(1, 4, 5, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, 0, 0);
    CHECK(ddl_deconv2d_workspace(&tg) == 0);
    CHECK(ddl_conv2d_workspace(&tg) > 0);
}

/* ---- pools against the definitions ---- */

/* def_pool: y of max (argmax as the first largest) or average, PyTorch's divisor, by definition */
static void def_pool(const ddl_pool2d *p, int avg, int n, int h, int w, const float *x, double *y)
{
    int oh = ddl_pool2d_out(p, 0, h), ow = ddl_pool2d_out(p, 1, w), dh = p->dilation_h ? p->dilation_h : 1;
    int dw = p->dilation_w ? p->dilation_w : 1;
    for (int c = 0; c < n; c++)
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                double best = -INFINITY, sum = 0.0;
                int cnt = 0;
                for (int i = 0; i < p->k_h; i++)
                    for (int j = 0; j < p->k_w; j++) {
                        int iy = oy * p->stride_h - p->pad_t + i * dh, ix = ox * p->stride_w - p->pad_l + j * dw;
                        if (iy < 0 || iy >= h || ix < 0 || ix >= w)
                            continue;
                        double v = x[((size_t)c * h + iy) * w + ix];
                        best = v > best ? v : best;
                        sum += v;
                        cnt++;
                    }
                if (avg && p->count_include_pad) {
                    int y0 = oy * p->stride_h - p->pad_t, x0 = ox * p->stride_w - p->pad_l;
                    int y1 = y0 + p->k_h < h + p->pad_b ? y0 + p->k_h : h + p->pad_b;
                    int x1 = x0 + p->k_w < w + p->pad_r ? x0 + p->k_w : w + p->pad_r;
                    cnt = (y1 - y0) * (x1 - x0);
                }
                y[((size_t)c * oh + oy) * ow + ox] = avg ? sum / cnt : best;
            }
}

typedef struct pcase {
    const char *what;
    ddl_pool2d p;
    int avg, h, w, oh, ow;
} pcase;

static const pcase pcases[] = {
    {"max 3x3 stride 2 pad 1 (ResNet's)", {3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0}, 0, 9, 8, 5, 4},
    {"max 2x3, strides 2,1, pads 0,1,1,0, dilation 2,1, ceil", {2, 3, 2, 1, 0, 1, 1, 0, 2, 1, 1, 0}, 0, 8, 7, 4, 6},
    {"max ceil_mode 3x3 stride 2 on 6x6", {3, 3, 2, 2, 0, 0, 0, 0, 0, 0, 1, 0}, 0, 6, 6, 3, 3},
    {"avg 3x3 stride 2 pad 1, padding not counted", {3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0}, 1, 7, 9, 4, 5},
    {"avg 3x3 stride 2 pad 1, padding counted, ceil", {3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1}, 1, 8, 8, 5, 5},
    {"avg 2x4 strides 1,3, pads 1,0,0,2, counted", {2, 4, 1, 3, 1, 0, 0, 2, 0, 0, 0, 1}, 1, 5, 10, 5, 3},
};

static void pools(void)
{
    for (size_t k = 0; k < sizeof pcases / sizeof pcases[0]; k++) {
        const pcase *c = &pcases[k];
        int n = 2, ch = 3, oh = ddl_pool2d_out(&c->p, 0, c->h), ow = ddl_pool2d_out(&c->p, 1, c->w);
        CHECK(oh == c->oh && ow == c->ow);
        CHECK(ddl_pool2d_ok(&c->p, c->avg, c->h, c->w));
        size_t nx = (size_t)n * ch * c->h * c->w, ny = (size_t)n * ch * oh * ow;
        float *x = rnd(nx, 5 + k), *y = calloc(ny, 4), *dy = rnd(ny, 9), *dx = calloc(nx, 4);
        int32_t *arg = calloc(ny, 4);
        double *ry = calloc(ny, 8), *rdx = calloc(nx, 8);
        if (c->avg)
            ddl_avgpool2d_forward(&c->p, n, ch, c->h, c->w, x, y);
        else
            ddl_maxpool2d_forward(&c->p, n, ch, c->h, c->w, x, y, arg);
        def_pool(&c->p, c->avg, n * ch, c->h, c->w, x, ry);
        CHECK(near(y, ry, ny, 1e-6, c->what));
        /* backward: dx . v == dy . (d y / d x) v, for v a random direction (y is linear in x where
         * the maxima stay put: a step of 1e-3 moves no maximum of normal samples here) */
        if (c->avg)
            ddl_avgpool2d_backward(&c->p, n, ch, c->h, c->w, dy, dx);
        else
            ddl_maxpool2d_backward(&c->p, n, ch, c->h, c->w, dy, arg, dx);
        float *v = rnd(nx, 77), *xe = malloc(nx * 4);
        double lhs = 0.0, rhs = 0.0;
        for (size_t i = 0; i < nx; i++)
            xe[i] = x[i] + 1e-3f * v[i], lhs += (double)dx[i] * v[i];
        double *re = calloc(ny, 8);
        def_pool(&c->p, c->avg, n * ch, c->h, c->w, xe, re);
        for (size_t i = 0; i < ny; i++)
            rhs += dy[i] * (re[i] - ry[i]) / 1e-3;
        CHECK_NEAR(lhs, rhs, 2e-2 * (fabs(rhs) + 1.0));
        free(x), free(y), free(dy), free(dx), free(arg), free(ry), free(rdx), free(v), free(xe), free(re);
    }
    ddl_pool2d avg_dil = {2, 2, 1, 1, 0, 0, 0, 0, 2, 2, 0, 0};
    CHECK(!ddl_pool2d_ok(&avg_dil, 1, 6, 6) && ddl_pool2d_ok(&avg_dil, 0, 6, 6));
    ddl_pool2d empty = {1, 1, 1, 1, 2, 0, 0, 0, 0, 0, 0, 0}; /* the first row's window: padding only */
    CHECK(!ddl_pool2d_ok(&empty, 0, 4, 4));
}

/* max_ref: the maximum's rule, output by output: the window's taps inside the image in row-major
 * order, the first taken, a later one if larger or a NaN over a number; its index in the plane. */
static void max_ref(const ddl_pool2d *p, int planes, int h, int w, const float *x, float *y, int32_t *arg)
{
    int oh = ddl_pool2d_out(p, 0, h), ow = ddl_pool2d_out(p, 1, w);
    int dh = p->dilation_h ? p->dilation_h : 1, dw = p->dilation_w ? p->dilation_w : 1;
    for (int c = 0; c < planes; c++)
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                float best = 0.0f;
                int at = -1;
                for (int i = 0; i < p->k_h; i++)
                    for (int j = 0; j < p->k_w; j++) {
                        int iy = oy * p->stride_h - p->pad_t + i * dh, ix = ox * p->stride_w - p->pad_l + j * dw;
                        if (iy < 0 || iy >= h || ix < 0 || ix >= w)
                            continue;
                        float v = x[((size_t)c * h + iy) * w + ix];
                        if (at < 0 || v > best || (isnan(v) && !isnan(best)))
                            best = v, at = iy * w + ix;
                    }
                y[((size_t)c * oh + oy) * ow + ox] = best;
                arg[((size_t)c * oh + oy) * ow + ox] = at;
            }
}

/* pool_ties: the maximum over windows inside the image (done a tap at a time across a row) and at
 * its edges gives the rule's bits and indices where values tie (a few levels) and NaNs lie, for
 * strides 1, 2 and 3 and dilations. */
static void pool_ties(void)
{
    static const ddl_pool2d ps[] = {
        {3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0}, {3, 3, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0}, {2, 3, 3, 3, 0, 1, 1, 0, 1, 2, 1, 0},
        {3, 2, 1, 2, 2, 0, 0, 1, 2, 1, 0, 0}, {5, 5, 2, 2, 2, 2, 2, 2, 0, 0, 1, 0},
    };
    ddl_rng r;
    ddl_rng_seed(&r, 41);
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        int planes = 3, h = 19, w = 37;
        int oh = ddl_pool2d_out(&ps[k], 0, h), ow = ddl_pool2d_out(&ps[k], 1, w);
        CHECK(ddl_pool2d_ok(&ps[k], 0, h, w));
        size_t nx = (size_t)planes * h * w, ny = (size_t)planes * oh * ow;
        float *x = malloc(nx * 4), *y = malloc(ny * 4), *ry = malloc(ny * 4);
        int32_t *arg = malloc(ny * 4), *rarg = malloc(ny * 4);
        for (size_t i = 0; i < nx; i++) {
            float u = ddl_rng_uniform(&r);
            x[i] = u < 0.03f ? NAN : (float)(int)(4.0f * ddl_rng_uniform(&r)) - 2.0f;
        }
        ddl_maxpool2d_forward(&ps[k], 1, planes, h, w, x, y, arg);
        max_ref(&ps[k], planes, h, w, x, ry, rarg);
        CHECK(memcmp(y, ry, ny * 4) == 0 && memcmp(arg, rarg, ny * 4) == 0);
        free(x), free(y), free(ry), free(arg), free(rarg);
    }
}

/* ---- graph models: finite differences ---- */

static ddl_model *model_of(ddl_graph *g, int c, int h, int w, int batch, char *err)
{
    ddl_model_config mc = {.batch = batch, .in_c = c, .in_h = h, .in_w = w, .n_classes = 3, .plugin_config = g};
    ddl_model *m = NULL;
    ddl_model_create(ddl_model_graph(), &mc, NULL, &m, err, DDL_ERR_BYTES);
    return m;
}

static void grad_check(ddl_graph *g, const char *what, int c, int h, int w)
{
    char err[DDL_ERR_BYTES] = "";
    ddl_model *m = model_of(g, c, h, w, 2, err);
    CHECK(m != NULL);
    if (!m) {
        fprintf(stderr, "%s: %s\n", what, err);
        return;
    }
    ddl_model_init_weights(m, 3);
    float *x = rnd((size_t)2 * c * h * w, 11);
    double worst = 1.0;
    int rc = ddl_model_check_grads(m, x, 2, 5, 10, 2e-2, &worst, err, sizeof err);
    if (rc != DDL_OK)
        fprintf(stderr, "%s: %s\n", what, err);
    CHECK(rc == DDL_OK && worst < 2e-2);
    free(x);
    ddl_model_destroy(m);
}

/* mobile: conv 3x5 (strides 2,1, pads 1,2,0,1), depthwise (dilation 2), grouped conv, a max-pool of
 * every geometry, and a depthwise-separable block (1x1 expand, depthwise stride 2 with TF's SAME
 * pads, 1x1 project) */
static ddl_graph *mobile(void)
{
    ddl_graph *g = NULL;
    ddl_graph_create(NULL, &g);
    int x = ddl_graph_input(g, 4, 9, 11);
    ddl_conv_geometry c1 = {.out_c = 8, .k_h = 3, .k_w = 5, .stride_h = 2, .stride_w = 1, .pad_t = 1, .pad_l = 2,
                            .pad_r = 1};
    x = ddl_graph_relu(g, ddl_graph_conv2d_ex(g, x, "c1", &c1));
    ddl_conv_geometry dw = {.out_c = 8, .k_h = 3, .pad_t = 2, .pad_l = 2, .pad_b = 2, .pad_r = 2, .dilation_h = 2,
                            .groups = 8};
    x = ddl_graph_conv2d_ex(g, x, "dw", &dw);
    ddl_conv_geometry gc = {.out_c = 6, .k_h = 3, .pad_t = 1, .pad_l = 1, .pad_b = 1, .pad_r = 1, .groups = 2};
    x = ddl_graph_conv2d_ex(g, x, "grouped", &gc);
    ddl_pool2d mp = {3, 2, 2, 1, 1, 0, 1, 1, 1, 2, 1, 0};
    x = ddl_graph_maxpool_ex(g, x, &mp);
    ddl_conv_geometry ex = {.out_c = 12, .k_h = 1, .no_bias = 1};
    x = ddl_graph_relu(g, ddl_graph_conv2d_ex(g, x, "expand", &ex));
    ddl_conv_geometry ds = {.out_c = 12, .k_h = 3, .stride_h = 2, .pad_b = 1, .pad_r = 1, .groups = 12};
    x = ddl_graph_relu(g, ddl_graph_conv2d_ex(g, x, "depthwise", &ds));
    ddl_conv_geometry pr = {.out_c = 5, .k_h = 1, .no_bias = 1};
    x = ddl_graph_conv2d_ex(g, x, "project", &pr);
    ddl_graph_dense(g, ddl_graph_global_avgpool(g, x), "fc", DDL_CLASSES);
    return g;
}

/* upsampling: a transposed conv of every geometry, average pools with and without the padding
 * counted, a depthwise conv of multiplier 2 */
static ddl_graph *upsampling(int count_pad)
{
    ddl_graph *g = NULL;
    ddl_graph_create(NULL, &g);
    int x = ddl_graph_input(g, 3, 7, 7);
    x = ddl_graph_relu(g, ddl_graph_conv2d(g, x, "c", 4, 3, 1, 1, 1));
    ddl_conv_geometry up = {.out_c = 4, .k_h = 3, .k_w = 2, .stride_h = 2, .stride_w = 3, .pad_t = 1, .pad_r = 1,
                            .dilation_w = 2, .out_pad_h = 1, .out_pad_w = 1};
    x = ddl_graph_deconv2d_ex(g, x, "up", &up);
    ddl_pool2d ap = {3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 1, count_pad};
    x = ddl_graph_avgpool_ex(g, x, &ap);
    ddl_conv_geometry dm = {.out_c = 8, .k_h = 3, .stride_h = 2, .pad_b = 1, .pad_r = 1, .groups = 4};
    x = ddl_graph_conv2d_ex(g, x, "dw2", &dm);
    ddl_graph_dense(g, ddl_graph_flatten(g, x), "fc", DDL_CLASSES);
    return g;
}

static void graphs(void)
{
    ddl_graph *a = mobile(), *b = upsampling(1), *c = upsampling(0);
    CHECK(ddl_graph_error(a)[0] == '\0' && ddl_graph_error(b)[0] == '\0');
    grad_check(a, "conv geometry, depthwise, grouped, max-pool", 4, 9, 11);
    grad_check(b, "transposed, average pool counting the padding", 3, 7, 7);
    grad_check(c, "average pool not counting the padding", 3, 7, 7);
    /* the weights are PyTorch's shapes: (out, in / groups, kh, kw) */
    char err[DDL_ERR_BYTES];
    ddl_model *m = model_of(a, 4, 9, 11, 2, err);
    if (m) {
        const ddl_param_info *p = NULL;
        for (int i = 0; i < ddl_model_n_tensors(m); i++)
            if (strcmp(ddl_model_tensor(m, i)->name, "dw.weight") == 0)
                p = ddl_model_tensor(m, i);
        CHECK(p && p->shape[0] == 8 && p->shape[1] == 1 && p->shape[2] == 3 && p->shape[3] == 3);
        ddl_model_destroy(m);
    }
    /* the text reads back what it writes, byte for byte */
    ddl_graph *gs[3] = {a, b, c};
    for (int k = 0; k < 3; k++) {
        char t1[4096], t2[4096];
        ddl_graph *r = NULL;
        ddl_graph_create(NULL, &r);
        ddl_graph_format(gs[k], t1, sizeof t1);
        CHECK(ddl_graph_parse(r, t1, err, sizeof err) == DDL_OK);
        ddl_graph_format(r, t2, sizeof t2);
        CHECK(strcmp(t1, t2) == 0);
        CHECK(memcmp(r, gs[k], ddl_graph_sizeof()) == 0);
        if (k == 0)
            CHECK(strstr(t1, "conv dw 8 3 pad=2 dilation=2,2 groups=8\n") &&
                  strstr(t1, "conv c1 8 3 kw=5 stride=2,1 pad=1,2,0,1\n") &&
                  strstr(t1, "maxpool 3 kw=2 stride=2,1 pad=1,0,1,1 dilation=1,2 ceil=1\n"));
        ddl_graph_destroy(r, NULL);
    }
    ddl_graph_destroy(a, NULL), ddl_graph_destroy(b, NULL), ddl_graph_destroy(c, NULL);
}

/* ---- plain geometry, refusals ---- */

static void plain_and_refused(void)
{
    ddl_graph *a = NULL, *b = NULL;
    ddl_graph_create(NULL, &a), ddl_graph_create(NULL, &b);
    ddl_graph_conv2d(a, ddl_graph_input(a, 3, 8, 8), "c", 4, 3, 2, 1, 1);
    ddl_conv_geometry c = {.out_c = 4, .k_h = 3, .k_w = 3, .stride_h = 2, .stride_w = 2, .pad_t = 1, .pad_l = 1,
                           .pad_b = 1, .pad_r = 1, .dilation_h = 1, .groups = 1};
    ddl_graph_conv2d_ex(b, ddl_graph_input(b, 3, 8, 8), "c", &c);
    CHECK(memcmp(a, b, ddl_graph_sizeof()) == 0); /* the same bytes: the same fast kernels */
    ddl_graph_maxpool(a, 1, 2, 2);
    ddl_pool2d p = {2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0};
    ddl_graph_maxpool_ex(b, 1, &p);
    ddl_graph_avgpool(a, 2, 3, 1);
    ddl_pool2d q = {3, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1}; /* counting padding there is none of */
    ddl_graph_avgpool_ex(b, 2, &q);
    CHECK(ddl_graph_error(b)[0] == '\0');
    CHECK(memcmp(a, b, ddl_graph_sizeof()) == 0);
    ddl_graph_destroy(a, NULL), ddl_graph_destroy(b, NULL);

    char err[DDL_ERR_BYTES];
    ddl_graph *g = NULL;
    ddl_graph_create(NULL, &g);
    ddl_conv_geometry d = {.out_c = 4, .k_h = 3, .dilation_h = 300};
    CHECK(ddl_graph_conv2d_ex(g, ddl_graph_input(g, 3, 8, 8), "c", &d) == -1);
    CHECK(strstr(ddl_graph_error(g), "layer 1 (conv): dilation_h 300: ddl takes 1 to 255") != NULL);
    CHECK(ddl_graph_parse(g, "input 4 8 8\ndeconv u 4 3 groups=2\n", err, sizeof err) == DDL_EINVAL);
    CHECK(strstr(err, "line 2: deconv takes no groups=") != NULL);
    CHECK(ddl_graph_parse(g, "input 4 8 8\navgpool 2 dilation=2\n", err, sizeof err) == DDL_EINVAL);
    CHECK(strstr(err, "avgpool takes no dilation=") != NULL);
    CHECK(ddl_graph_parse(g, "input 4 8 8\nconv c 6 3 groups=3 pad=1,1\ndense classes\n", err, sizeof err) == DDL_OK);
    ddl_model *m = model_of(g, 4, 8, 8, 1, err);
    CHECK(m == NULL && strstr(err, "3 groups: they must divide the 4 input and 6 output channels"));
    CHECK(ddl_graph_parse(g, "input 1 4 4\nmaxpool 2 pad=2,0,0,0\ndense classes\n", err, sizeof err) == DDL_OK);
    m = model_of(g, 1, 4, 4, 1, err);
    CHECK(m == NULL && strstr(err, "holds no value of it"));
    ddl_graph_destroy(g, NULL);
}

int main(void)
{
    kernels();
    pools();
    pool_ties();
    graphs();
    plain_and_refused();
    return TEST_END();
}
