/* test_winograd.c - Winograd F(2x2,3x3) and F(4x4,3x3) (src/core/winograd.c, winograd_f4.c)
 * against the definition in double:
 * the forward pass, the input gradient and the weight gradient on shapes with odd sizes, pads 0,
 * 1 and 2, channel counts that are not multiples of 16, batch 1 and several; the same bits on 1
 * and 2 threads; central differences of a loss through the layer, and ddl_model_check_grads of a
 * graph built with conv_algo Winograd.
 *
 * Error bound: per element, |got - double| <= WINO_TOL of the sum of its terms' magnitudes
 * (sum |x w| over its taps and channels, for dw over the positions too). Measured here (-v prints
 * it): Winograd 2.7e-7 at most, direct 2.3e-7: F(2x2,3x3)'s coefficients are 1 and 1/2, so it is
 * as accurate as direct. A coefficient off by one part in 10^4 (G's 0.5 in U, or in the weight
 * gradient's G^T, as 0.50005, checked by hand) gives 2e-5 to 9e-5 and fails.
 * F(4x4,3x3), on the shapes it tiles (bands of 4 tile rows of 4, 2 of 8, rows of 16): 2.9e-6 at
 * most (its coefficients 4, 5, 1/6, 1/24 round more), bounded at WINO4_TOL = 1e-5; G's 1/6 off by
 * one part in 10^4 gives 1.2e-5 to 9.8e-5 and B^T's 2 (as 2.0001) 2.2e-5 to 3.2e-4, checked by
 * hand: both fail. More in docs/TRAINING.md ("Winograd"). */
/* ddl-test: beside (computes and bounds no time: it runs beside another such test) */
#include "ddl.h"
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define WINO_TOL 1e-6
#define WINO4_TOL 1e-5

typedef struct shape {
    int n, c, h, w, k, pad;
} shape;

static float *randn(size_t n, unsigned *seed)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1103515245u + 12345u;
        p[i] = (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    return p;
}

/* ref: y, dx, dw in double with the magnitudes of their terms, by the definition. */
static void ref(const shape *s, const float *x, const float *w, const float *dy, double *y, double *my, double *dx,
                double *mx, double *dw, double *mw)
{
    int oh = s->h + 2 * s->pad - 2, ow = s->w + 2 * s->pad - 2;
    size_t ny = (size_t)s->n * s->k * oh * ow, nx = (size_t)s->n * s->c * s->h * s->w, nw = (size_t)s->k * s->c * 9;
    memset(y, 0, ny * sizeof *y), memset(my, 0, ny * sizeof *my);
    memset(dx, 0, nx * sizeof *dx), memset(mx, 0, nx * sizeof *mx);
    memset(dw, 0, nw * sizeof *dw), memset(mw, 0, nw * sizeof *mw);
    for (int n = 0; n < s->n; n++)
        for (int k = 0; k < s->k; k++)
            for (int oy = 0; oy < oh; oy++)
                for (int ox = 0; ox < ow; ox++) {
                    size_t yi = (((size_t)n * s->k + k) * oh + oy) * ow + ox;
                    for (int c = 0; c < s->c; c++)
                        for (int t = 0; t < 9; t++) {
                            int iy = oy - s->pad + t / 3, ix = ox - s->pad + t % 3;
                            if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w)
                                continue;
                            size_t xi = (((size_t)n * s->c + c) * s->h + iy) * s->w + ix, wi = ((size_t)k * s->c + c) * 9 + t;
                            y[yi] += (double)x[xi] * w[wi], my[yi] += fabs((double)x[xi] * w[wi]);
                            dx[xi] += (double)dy[yi] * w[wi], mx[xi] += fabs((double)dy[yi] * w[wi]);
                            dw[wi] += (double)dy[yi] * x[xi], mw[wi] += fabs((double)dy[yi] * x[xi]);
                        }
                }
}

/* worst: the largest |got - want| / mag over n elements (mag 0: the error itself). */
static double worst(size_t n, const float *got, const double *want, const double *mag)
{
    double e = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(got[i] - want[i]) / (mag[i] > 0 ? mag[i] : 1.0);
        if (!(d <= e))
            e = d;
    }
    return e;
}

typedef struct run {
    float *y, *dx, *dw, *db;
} run;

static void passes(const ddl_conv2d *g, const float *x, const float *w, const float *b, const float *dy, run *r)
{
    size_t nw = (size_t)g->out_c * g->in_c * 9;
    float *ws = calloc(ddl_conv2d_workspace(g) + 1, sizeof *ws);
    memset(r->dw, 0, nw * sizeof *r->dw);
    memset(r->db, 0, (size_t)g->out_c * sizeof *r->db);
    ddl_conv2d_forward(g, x, w, b, r->y, ws);
    ddl_conv2d_backward(g, x, w, dy, r->dx, r->dw, r->db, ws);
    free(ws);
}

static run run_alloc(const shape *s)
{
    int oh = s->h + 2 * s->pad - 2, ow = s->w + 2 * s->pad - 2;
    run r = {malloc((size_t)s->n * s->k * oh * ow * sizeof(float)), malloc((size_t)s->n * s->c * s->h * s->w * sizeof(float)),
             malloc((size_t)s->k * s->c * 9 * sizeof(float)), malloc((size_t)s->k * sizeof(float))};
    return r;
}

/* fits4_shape: F(4x4,3x3) takes s (pad 1, whole bands of 16 tiles: tile rows of 4, 8 or a
 * multiple of 16, and whole bands of tile rows) */
static int fits4_shape(const shape *s)
{
    int tw = s->w / 4, th = s->h / 4, cols = tw < 16 ? tw : 16;
    return s->pad == 1 && s->h % 4 == 0 && s->w % 4 == 0 && th > 0 && (tw == 4 || tw == 8 || (tw > 0 && tw % 16 == 0)) &&
           th % (16 / cols) == 0;
}

static void run_free(run *r) { free(r->y), free(r->dx), free(r->dw), free(r->db); }

static int same(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

/* one_shape: Winograd and direct against double; Winograd on 1 and 2 threads bit for bit. */
static void one_shape(const shape *s, int algo, double tol, int verbose)
{
    unsigned seed = 7u + (unsigned)(s->c * 131 + s->k * 7 + s->h);
    int oh = s->h + 2 * s->pad - 2, ow = s->w + 2 * s->pad - 2;
    size_t nx = (size_t)s->n * s->c * s->h * s->w, ny = (size_t)s->n * s->k * oh * ow, nw = (size_t)s->k * s->c * 9;
    float *x = randn(nx, &seed), *w = randn(nw, &seed), *dy = randn(ny, &seed), *b = randn((size_t)s->k, &seed);
    double *y = malloc(ny * sizeof *y), *my = malloc(ny * sizeof *my), *dx = malloc(nx * sizeof *dx),
           *mx = malloc(nx * sizeof *mx), *dw = malloc(nw * sizeof *dw), *mw = malloc(nw * sizeof *mw);
    ref(s, x, w, dy, y, my, dx, mx, dw, mw);
    for (size_t i = 0; i < ny; i++) /* the bias, exactly representable in the sum's scale */
        y[i] += b[(i / ((size_t)oh * ow)) % (size_t)s->k];
    ddl_conv2d g = {.batch = s->n, .in_c = s->c, .in_h = s->h, .in_w = s->w, .out_c = s->k, .k_h = 3, .k_w = 3, .stride = 1, .pad = s->pad};
    run d = run_alloc(s), wi = run_alloc(s), w2 = run_alloc(s);
    ddl_set_threads(1);
    passes(&g, x, w, b, dy, &d);
    g.algo = algo;
    passes(&g, x, w, b, dy, &wi);
    double ey = worst(ny, wi.y, y, my), ex = worst(nx, wi.dx, dx, mx), ew = worst(nw, wi.dw, dw, mw);
    double dy_ = worst(ny, d.y, y, my), dx_ = worst(nx, d.dx, dx, mx), dw_ = worst(nw, d.dw, dw, mw);
    if (verbose)
        printf("N%d C%d %dx%d K%d pad %d: F(%dx%d) y %.2g dx %.2g dw %.2g; direct %.2g %.2g %.2g\n", s->n, s->c, s->h,
               s->w, s->k, s->pad, algo == DDL_CONV_WINOGRAD4_ALL ? 4 : 2, algo == DDL_CONV_WINOGRAD4_ALL ? 4 : 2, ey,
               ex, ew, dy_, dx_, dw_);
    CHECK(ey <= tol);
    CHECK(ex <= tol);
    CHECK(ew <= tol);
    CHECK(!same(wi.y, d.y, ny)); /* Winograd did run: its bits differ from direct's */
    int db_same = same(wi.db, d.db, (size_t)s->k);
    CHECK(db_same); /* the bias gradient is direct's sum */
    ddl_set_threads(2);
    passes(&g, x, w, b, dy, &w2);
    CHECK(same(wi.y, w2.y, ny));
    CHECK(same(wi.dx, w2.dx, nx));
    CHECK(same(wi.dw, w2.dw, nw));
    ddl_set_threads(1);
    run_free(&d), run_free(&wi), run_free(&w2);
    free(x), free(w), free(dy), free(b), free(y), free(my), free(dx), free(mx), free(dw), free(mw);
}

/* loss: sum of r y over the Winograd forward, in double. */
static double loss(const ddl_conv2d *g, const float *x, const float *w, const float *r, size_t ny, float *y, float *ws)
{
    ddl_conv2d_forward(g, x, w, NULL, y, ws);
    double l = 0;
    for (size_t i = 0; i < ny; i++)
        l += (double)r[i] * y[i];
    return l;
}

/* grad_check: dL/dx and dL/dw of L = sum r y from the backward pass against central differences,
 * with algo (F(2x2,3x3) or F(4x4,3x3) on every pass). */
static void grad_check(shape s, int algo)
{
    ddl_conv2d g = {.batch = s.n, .in_c = s.c, .in_h = s.h, .in_w = s.w, .out_c = s.k, .k_h = 3, .k_w = 3, .stride = 1, .pad = s.pad};
    g.algo = algo;
    unsigned seed = 99;
    size_t nx = (size_t)s.n * s.c * s.h * s.w, ny = (size_t)s.n * s.k * s.h * s.w, nw = (size_t)s.k * s.c * 9;
    float *x = randn(nx, &seed), *w = randn(nw, &seed), *r = randn(ny, &seed);
    float *y = malloc(ny * sizeof *y), *dx = malloc(nx * sizeof *dx), *dw = calloc(nw, sizeof *dw);
    float *ws = calloc(ddl_conv2d_workspace(&g) + 1, sizeof *ws);
    ddl_conv2d_backward(&g, x, w, r, dx, dw, NULL, ws);
    const float h = 1e-2f; /* the loss is linear in each input: the difference is exact up to rounding */
    int bad = 0;
    for (size_t i = 0; i < nx; i += 7) {
        float keep = x[i];
        x[i] = keep + h;
        double lp = loss(&g, x, w, r, ny, y, ws);
        x[i] = keep - h;
        double lm = loss(&g, x, w, r, ny, y, ws);
        x[i] = keep;
        double fd = (lp - lm) / (2.0 * h);
        bad += fabs(fd - dx[i]) > 2e-3 * (1.0 + fabs(fd));
    }
    for (size_t i = 0; i < nw; i += 3) {
        float keep = w[i];
        w[i] = keep + h;
        double lp = loss(&g, x, w, r, ny, y, ws);
        w[i] = keep - h;
        double lm = loss(&g, x, w, r, ny, y, ws);
        w[i] = keep;
        double fd = (lp - lm) / (2.0 * h);
        bad += fabs(fd - dw[i]) > 2e-3 * (1.0 + fabs(fd));
    }
    CHECK(bad == 0);
    free(x), free(w), free(r), free(y), free(dx), free(dw), free(ws);
}

/* model_check: ddl_model_check_grads of a graph (conv 3x3 pad 1, ReLU, conv 3x3 pad 0, global
 * average, dense) built with conv_algo Winograd on every layer: the plumbing from the model's
 * config to its convolutions, and the gradients through it, which must differ from a direct build's
 * bits (else Winograd did not run). */
static void model_check(void)
{
    ddl_graph *g = NULL;
    CHECK(ddl_graph_create(NULL, &g) == DDL_OK);
    if (!g)
        return;
    int x = ddl_graph_input(g, 0, 0, 0);
    x = ddl_graph_relu(g, ddl_graph_conv2d(g, x, "c1", 5, 3, 1, 1, 1));
    x = ddl_graph_conv2d(g, x, "c2", 4, 3, 1, 0, 0);
    ddl_graph_dense(g, ddl_graph_global_avgpool(g, x), "fc", DDL_CLASSES);
    ddl_model_config mc = {.batch = 3, .in_c = 2, .in_h = 7, .in_w = 6, .n_classes = 3, .plugin_config = g};
    ddl_model *m[2] = {NULL, NULL};
    char err[DDL_ERR_BYTES];
    unsigned seed = 17;
    float *in = randn(3 * 2 * 7 * 6, &seed);
    const float *y[2];
    float keep[9];
    for (int i = 0; i < 2; i++) {
        mc.conv_algo = i ? DDL_CONV_WINOGRAD_ALL : DDL_CONV_DIRECT;
        int rc = ddl_model_create(ddl_model_graph(), &mc, NULL, &m[i], err, sizeof err);
        CHECK(rc == DDL_OK);
        if (rc != DDL_OK)
            break;
        ddl_model_init_weights(m[i], 5);
        y[i] = ddl_model_forward(m[i], in, 3, 0, NULL);
        if (i == 0)
            memcpy(keep, y[0], sizeof keep);
    }
    if (m[0] && m[1]) {
        CHECK(memcmp(keep, y[1], sizeof keep) != 0);
        double worst = 1.0;
        int rc = ddl_model_check_grads(m[1], in, 3, 21, 16, 2e-2, &worst, err, sizeof err);
        if (rc != DDL_OK)
            fprintf(stderr, "model_check: %s\n", err);
        CHECK(rc == DDL_OK);
    }
    ddl_model_destroy(m[0]), ddl_model_destroy(m[1]);
    ddl_graph_destroy(g, NULL);
    free(in);
}

/* rule_check: under the size rule (DDL_CONV_WINOGRAD) a layer takes Winograd pass by pass, by
 * F(4x4,3x3) where it tiles the plane (pad 1, planes of 16x16 and up: the bits of
 * DDL_CONV_WINOGRAD4_ALL), else by F(2x2,3x3) (DDL_CONV_WINOGRAD_ALL's bits). The wide rule
 * (AVX-512): F(4x4,3x3) every pass from 16 channels in and out (the cnn's 64 -> 64 at 16x16,
 * 16 -> 16 at 64x64, 16 -> 80); with 8, the forward pass and input gradient from 24 together
 * (U-Net's 16 -> 8 at 64x64 and 8 -> 16 at 32x32) but not its 8 -> 8 at 64x64, nor the cnn's
 * first layer (3 in). F(2x2,3x3): U-Net's 64 -> 64 at 8x8 only the weight gradient (8x8: no band
 * of 16 tiles); a 64 -> 64 at 18x18 (not whole 4x4 tiles) and a 32 -> 32 at 34x34 with pad 0 all
 * three passes. The narrow rule (8-float vectors, AVX2): F(4x4,3x3)'s weight gradient from 8 out
 * (U-Net's 16 -> 8 at 64x64); F(2x2,3x3) every pass from 16 in and out where its transforms
 * fill 8-float vectors (pad 1, rows of 8: U-Net's 64 -> 64 and a 16 -> 16 at 8x8), else its
 * weight gradient not on planes below 16x16 (a 64 -> 64 at 12x12), and not a 16 -> 16 at 8x8 with
 * padding 0 (6x6 out). Each rule is
 * checked where the CPU can run it (ddl__avx2_tiles_enable: 0 gives the wide one, 2 the narrow). */
int ddl__avx2_tiles_enable(int on);
int ddl__avx2_tiles(void);

static void rule_check(void)
{
    static const struct {
        shape s;
        int fwd, dw, narrow_fwd, narrow_dw; /* 0 direct, 2 F(2x2,3x3), 4 F(4x4,3x3) */
    } cases[] = {{{2, 64, 16, 16, 64, 1}, 4, 4, 4, 4}, {{2, 32, 16, 16, 64, 1}, 4, 4, 4, 4},
                 {{2, 16, 16, 16, 80, 1}, 4, 4, 4, 4}, {{2, 32, 32, 32, 32, 1}, 4, 4, 4, 4},
                 {{2, 16, 64, 64, 16, 1}, 4, 4, 4, 4}, {{2, 16, 64, 64, 8, 1}, 4, 0, 4, 4},
                 {{2, 8, 32, 32, 16, 1}, 4, 0, 4, 0},  {{2, 8, 64, 64, 8, 1}, 0, 0, 0, 0},
                 {{2, 3, 64, 64, 16, 1}, 0, 0, 0, 0},  {{2, 32, 16, 16, 16, 1}, 4, 4, 4, 4},
                 {{2, 64, 8, 8, 64, 1}, 0, 2, 2, 2},   {{2, 16, 8, 8, 16, 1}, 0, 0, 2, 2},
                 {{2, 64, 12, 12, 64, 1}, 0, 2, 0, 0}, {{2, 64, 18, 18, 64, 1}, 2, 2, 2, 2},
                 {{2, 16, 8, 8, 16, 0}, 0, 0, 0, 0},   {{2, 32, 34, 34, 32, 0}, 2, 2, 2, 2}};
    ddl_set_threads(1);
    int was = ddl__avx2_tiles_enable(1);
    for (int narrow = 0; narrow <= 1; narrow++) {
        if (was < 0 && narrow != (ddl__avx2_tiles() != 0))
            continue; /* no clones, or not x86-64-v3: only the CPU's own rule */
        if (was >= 0)
            ddl__avx2_tiles_enable(narrow ? 2 : 0);
        CHECK((ddl__avx2_tiles() != 0) == narrow);
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            const shape *s = &cases[i].s;
            unsigned seed = 11;
            int oh = s->h + 2 * s->pad - 2, ow = s->w + 2 * s->pad - 2;
            size_t nx = (size_t)s->n * s->c * s->h * s->w, ny = (size_t)s->n * s->k * oh * ow;
            size_t nw = (size_t)s->k * s->c * 9;
            float *x = randn(nx, &seed), *w = randn(nw, &seed), *dy = randn(ny, &seed), *b = randn((size_t)s->k, &seed);
            ddl_conv2d g = {.batch = s->n, .in_c = s->c, .in_h = s->h, .in_w = s->w, .out_c = s->k, .k_h = 3, .k_w = 3,
                            .stride = 1, .pad = s->pad};
            run d = run_alloc(s), f2 = run_alloc(s), f4 = run_alloc(s), rule = run_alloc(s);
            passes(&g, x, w, b, dy, &d);
            g.algo = DDL_CONV_WINOGRAD_ALL;
            passes(&g, x, w, b, dy, &f2);
            g.algo = DDL_CONV_WINOGRAD4_ALL;
            passes(&g, x, w, b, dy, &f4);
            g.algo = DDL_CONV_WINOGRAD;
            passes(&g, x, w, b, dy, &rule);
            const run *by[5] = {&d, NULL, &f2, NULL, &f4};
            const run *fwd = by[narrow ? cases[i].narrow_fwd : cases[i].fwd];
            const run *dw = by[narrow ? cases[i].narrow_dw : cases[i].dw];
            int ok = same(rule.y, fwd->y, ny) && same(rule.dx, fwd->dx, nx) && same(rule.dw, dw->dw, nw);
            if (!ok)
                fprintf(stderr, "rule_check (%s rule): N%d C%d %dx%d K%d pad %d: not the expected passes\n",
                        narrow ? "narrow" : "wide", s->n, s->c, s->h, s->w, s->k, s->pad);
            CHECK(ok);
            CHECK(same(rule.db, d.db, (size_t)s->k));
            /* the three weight gradients differ, where the two tiles apply: the check above can fail */
            CHECK(!same(f2.dw, d.dw, nw));
            CHECK(fits4_shape(s) == !same(f4.dw, f2.dw, nw));
            run_free(&d), run_free(&f2), run_free(&f4), run_free(&rule);
            free(x), free(w), free(dy), free(b);
        }
    }
    if (was >= 0)
        ddl__avx2_tiles_enable(was);
}

/* quick: a few small shapes of each tile size, for test_cpus.sh's emulated CPUs (the AVX2 and
 * the baseline clones of the transforms and products; the whole test takes 20 s under qemu) */
static int quick(void)
{
    static const shape f2[] = {{2, 20, 10, 7, 33, 1}, {1, 16, 9, 9, 16, 2}};
    static const shape f4[] = {{2, 16, 16, 16, 8, 1}, {1, 8, 32, 32, 9, 1}, {1, 5, 4, 64, 3, 1}};
    for (size_t i = 0; i < sizeof f2 / sizeof *f2; i++)
        one_shape(&f2[i], DDL_CONV_WINOGRAD_ALL, WINO_TOL, 0);
    for (size_t i = 0; i < sizeof f4 / sizeof *f4; i++)
        one_shape(&f4[i], DDL_CONV_WINOGRAD4_ALL, WINO4_TOL, 0);
    return TEST_END();
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "quick") == 0)
        return quick();
    int verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
    static const shape shapes[] = {
        {1, 3, 5, 5, 2, 1},    /* tiny, odd: one tile row short */
        {3, 17, 11, 13, 19, 0}, /* no padding, odd channels */
        {2, 20, 10, 7, 33, 1},
        {1, 16, 9, 9, 16, 2},  /* pad 2: the input gradient's pad is 0 */
        {4, 32, 32, 32, 32, 1}, /* the cnn preset's block2.conv2, batch 4 */
        {2, 64, 16, 16, 64, 1}, /* its block3.conv2 */
        {2, 8, 64, 64, 8, 1},  /* U-Net's first level */
        {2, 40, 9, 11, 13, 1}, /* the weight gradient's outer products: 40 channels (a part vector), 30 tiles, 13 rows */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        one_shape(&shapes[i], DDL_CONV_WINOGRAD_ALL, WINO_TOL, verbose);
    static const shape shapes4[] = {
        {2, 64, 16, 16, 64, 1}, /* the cnn's block3.conv2: a band of 4 tile rows of 4 a sample */
        {3, 32, 32, 32, 16, 1}, /* bands of 2 tile rows of 8 */
        {2, 8, 64, 64, 8, 1},   /* bands of 1 tile row of 16 */
        {1, 17, 16, 128, 5, 1}, /* 2 bands a tile row, odd channels */
        {2, 40, 9, 11, 13, 1},  /* not whole tiles: F(2x2,3x3) */
    };
    for (size_t i = 0; i < sizeof shapes4 / sizeof *shapes4; i++)
        one_shape(&shapes4[i], DDL_CONV_WINOGRAD4_ALL, WINO4_TOL, verbose);
    grad_check((shape){2, 5, 7, 6, 4, 1}, DDL_CONV_WINOGRAD_ALL);
    grad_check((shape){2, 5, 16, 16, 4, 1}, DDL_CONV_WINOGRAD4_ALL);
    model_check();
    rule_check();
    /* a layer the size rule leaves direct: the same bits as algo 0 */
    ddl_conv2d g = {.batch = 2, .in_c = 3, .in_h = 8, .in_w = 8, .out_c = 4, .k_h = 3, .k_w = 3, .stride = 1, .pad = 1};
    g.algo = DDL_CONV_WINOGRAD;
    unsigned seed = 5;
    float *x = randn(2 * 3 * 64, &seed), *w = randn(4 * 3 * 9, &seed), *y1 = malloc(2 * 4 * 64 * 4), *y2 = malloc(2 * 4 * 64 * 4);
    float *ws = calloc(ddl_conv2d_workspace(&g) + 1, sizeof *ws);
    ddl_conv2d_forward(&g, x, w, NULL, y1, ws);
    g.algo = DDL_CONV_DIRECT;
    ddl_conv2d_forward(&g, x, w, NULL, y2, ws);
    CHECK(same(y1, y2, 2 * 4 * 64));
    free(x), free(w), free(y1), free(y2), free(ws);
    return TEST_END();
}
