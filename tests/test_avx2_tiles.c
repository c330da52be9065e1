/* test_avx2_tiles.c - the AVX2 tiles (kernels for a CPU without AVX-512, where the code written in
 * 16-float vectors left its sums on the stack) give, bit for bit, the y, dx, dw and db of the
 * clones they stand in for (turned off by ddl__avx2_tiles_enable(0), the clones run: the AVX2 build
 * on such a CPU, the AVX-512 one, the same sums, on a CPU with it; forced by
 * ddl__avx2_tiles_enable(2)).
 * conv_wide.c's direct 3x3 and 5x5 convolutions: LeNet's two (5x5: 6 channels, the 6-channel
 * tile; 6 -> 16, the 8-channel tile, whose input gradient takes the 6-channel one), U-Net's 3x3 at
 * 64x64, 32x32 and 8x8, odd channel counts (the tiles' spare channels and the weight gradient's
 * spare), padding 0 and k - 1 (taps that reach only the border, skipped), a batch in several
 * chunks and one cut by channel groups.
 * winograd.c's product (the Winograd passes' sums over channels): F(2x2,3x3) and F(4x4,3x3),
 * output channel counts that are not multiples of 6 (the 6-row blocks' rest), tiles that are not
 * multiples of 16 (a row's end) and one tile row of 16 or fewer, the weight gradient's products
 * that add to m. F(2x2,3x3)'s transforms in 8-float vectors (winograd_f2_avx2.c): U-Net's
 * bottom, a block's last run of 4 tiles, a vector's two runs in two tile rows, padding 0 and 2,
 * blocks shorter than a sample. At 1, 2 and 3 threads.
 * deconv2x2_avx2.c's forward pass of the 2x2 stride-2 transposed convolution: y, bit for bit,
 * the order deconv2x2_avx512.c's gives (each output from +0 over the input channels in order by
 * fmaf, then 1 x sum + 0, + 0 and the bias; a scalar reference here): U-Net's three, rows of 8
 * and 24, a plane of 16 positions, with and without a bias, at 1 and 2 threads.
 * conv1x1_avx2.c's three passes of the 1x1 convolution likewise (y = (1 x sum + 0) + bias, dx =
 * 0 + (1 x sum + 0), dw conv1x1_avx512.c's 16 lanes or one sum in order per chunk): U-Net's head,
 * channel counts not multiples of 4, planes of 16 and 64, a chunk too short for lanes.
 * conv_depthwise.c's three passes in 8-float vectors, as its 16-float clones: MobileNet's 3x3,
 * part vectors at a row's end, 2 outputs a channel, stride 2, dilation 2 on a 5x5.
 * Skipped where the CPU has no AVX2 and FMA, or where the build has no clones (-DDDL_NO_CLONES,
 * ThreadSanitizer). */
/* ddl-test: beside (computes, bounds no time) */
#include "ddl.h"
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int ddl__avx2_tiles_enable(int on);
int ddl__conv2d_wide_ok(const ddl_conv2d *g);
int ddl__conv2d_wide_dw_ok(const ddl_conv2d *g);
int ddl__wino_ok(const ddl_conv2d *g);
int ddl__wino_dw_ok(const ddl_conv2d *g);
int ddl__deconv2x2_ok(const ddl_conv2d *g, int backward);
int ddl__conv1x1_avx2_ok(const ddl_conv2d *g);
int ddl__conv2d_dw_ok(const ddl_conv2d *g);

static float rnd(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

typedef struct pass {
    float *y, *dx, *dw, *db;
} pass;

typedef struct layer {
    ddl_conv2d g;
    size_t nx, ny, nw;
    const float *x, *w, *b, *dy;
} layer;

static pass run(const layer *l, int threads)
{
    const ddl_conv2d *g = &l->g;
    pass p = {malloc(l->ny * 4), calloc(l->nx, 4), calloc(l->nw, 4), calloc((size_t)g->out_c, 4)};
    float *ws = calloc(ddl_conv2d_workspace(g) + 16, 4);
    ddl_set_threads(threads);
    ddl_conv2d_forward(g, l->x, l->w, l->b, p.y, ws);
    ddl_conv2d_backward(g, l->x, l->w, l->dy, p.dx, p.dw, p.db, ws);
    ddl_set_threads(1);
    free(ws);
    return p;
}

static void drop(pass p) { free(p.y), free(p.dx), free(p.dw), free(p.db); }

static int same(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

/* filled: l's x (a zero every 11th), w, b and dy from seed s, and l's sizes for its geometry */
static void filled(layer *l, unsigned s)
{
    const ddl_conv2d *g = &l->g;
    int groups = g->groups > 1 ? g->groups : 1;
    l->nx = (size_t)g->batch * g->in_c * g->in_h * g->in_w;
    l->ny = (size_t)g->batch * g->out_c * ddl_conv2d_out_h(g) * ddl_conv2d_out_w(g);
    l->nw = (size_t)g->out_c * (g->in_c / groups) * g->k_h * g->k_w;
    float *x = malloc(l->nx * 4), *wt = malloc(l->nw * 4), *b = malloc((size_t)g->out_c * 4), *dy = malloc(l->ny * 4);
    for (size_t i = 0; i < l->nx; i++)
        x[i] = i % 11 == 3 ? 0.0f : rnd(&s);
    for (size_t i = 0; i < l->nw; i++)
        wt[i] = rnd(&s);
    for (int i = 0; i < g->out_c; i++)
        b[i] = rnd(&s);
    for (size_t i = 0; i < l->ny; i++)
        dy[i] = rnd(&s);
    l->x = x, l->w = wt, l->b = b, l->dy = dy;
}

static void unfilled(layer *l) { free((void *)l->x), free((void *)l->w), free((void *)l->b), free((void *)l->dy); }

/* against_clones: l's passes with the tiles forced, at 1 to 3 threads, bit for bit those with the
 * tiles off; what names l when they differ */
static void against_clones(const layer *l, const char *what)
{
    int was = ddl__avx2_tiles_enable(0);
    pass ref = run(l, 1);
    ddl__avx2_tiles_enable(2);
    int good = 1;
    for (int threads = 1; threads <= 3; threads++) {
        pass p = run(l, threads);
        int ok = same(p.y, ref.y, l->ny) && same(p.dx, ref.dx, l->nx) && same(p.dw, ref.dw, l->nw) &&
                 same(p.db, ref.db, (size_t)l->g.out_c);
        CHECK(ok);
        good &= ok;
        drop(p);
    }
    ddl__avx2_tiles_enable(was);
    if (!good)
        fprintf(stderr, "  differs: %s\n", what);
    drop(ref);
}

/* conv: a batch x in_c -> out_c convolution of k x k, pad, on h x w planes, by algo */
static void conv(int algo, int batch, int in_c, int out_c, int h, int w, int k, int pad)
{
    layer l = {{.batch = batch, .in_c = in_c, .in_h = h, .in_w = w, .out_c = out_c, .k_h = k, .k_w = k,
                .stride = 1, .pad = pad, .algo = algo}, 0, 0, 0, NULL, NULL, NULL, NULL};
    filled(&l, (unsigned)(batch * 131 + in_c * 17 + out_c * 5 + h + k));
    if (algo == DDL_CONV_DIRECT) {
        CHECK(ddl__conv2d_wide_ok(&l.g));
        CHECK(ddl__conv2d_wide_dw_ok(&l.g));
    } else {
        CHECK(ddl__wino_ok(&l.g));
        CHECK(ddl__wino_dw_ok(&l.g));
    }
    char what[128];
    snprintf(what, sizeof what, "algo %d, batch %d, %d -> %d channels, %dx%d, k %d, pad %d", algo, batch, in_c, out_c,
             h, w, k, pad);
    against_clones(&l, what);
    unfilled(&l);
}

/* depthwise: conv_depthwise.c's passes (c channels, mult outputs each, k x k, stride, pad,
 * dilation) in 8-float vectors against its 16-float clones */
static void depthwise(int batch, int c, int mult, int h, int w, int k, int stride, int pad, int dil)
{
    layer l = {{.batch = batch, .in_c = c, .in_h = h, .in_w = w, .out_c = c * mult, .k_h = k, .k_w = k,
                .stride = stride, .pad = pad, .dilation_h = dil, .dilation_w = dil, .groups = c},
               0, 0, 0, NULL, NULL, NULL, NULL};
    filled(&l, (unsigned)(batch * 7 + c * 13 + mult * 3 + h + k * stride));
    CHECK(ddl__conv2d_dw_ok(&l.g));
    char what[128];
    snprintf(what, sizeof what, "depthwise, batch %d, %d channels x %d, %dx%d, k %d, stride %d, pad %d, dilation %d",
             batch, c, mult, h, w, k, stride, pad, dil);
    against_clones(&l, what);
    unfilled(&l);
}

/* deconv: the transposed convolution's forward pass (in_c -> out_c, h x w -> 2h x 2w) against
 * the scalar order */
static void deconv(int batch, int in_c, int out_c, int h, int w, int bias)
{
    ddl_conv2d g = {.batch = batch, .in_c = in_c, .in_h = h, .in_w = w, .out_c = out_c, .k_h = 2, .k_w = 2,
                    .stride = 2};
    size_t p = (size_t)h * w, nx = (size_t)batch * in_c * p, ny = (size_t)batch * out_c * 4 * p;
    size_t nw = (size_t)in_c * out_c * 4;
    float *x = malloc(nx * 4), *wt = malloc(nw * 4), *b = malloc((size_t)out_c * 4), *y = malloc(ny * 4);
    float *ws = calloc(ddl_deconv2d_workspace(&g) + 16, 4);
    unsigned s = (unsigned)(batch * 7 + in_c * 31 + out_c + h);
    for (size_t i = 0; i < nx; i++)
        x[i] = i % 13 == 5 ? 0.0f : rnd(&s);
    for (size_t i = 0; i < nw; i++)
        wt[i] = rnd(&s);
    for (int i = 0; i < out_c; i++)
        b[i] = i == 0 ? -0.0f : rnd(&s);
    int was = ddl__avx2_tiles_enable(2);
    CHECK(ddl__deconv2x2_ok(&g, 0));
    CHECK(ddl__deconv2x2_ok(&g, 1) == (in_c * out_c <= 1024)); /* the backward: up to 32 x 32 channels */
    int good = 1;
    for (int threads = 1; threads <= 2; threads++) {
        memset(y, 0xff, ny * 4);
        ddl_set_threads(threads);
        ddl_deconv2d_forward(&g, x, wt, bias ? b : NULL, y, ws);
        ddl_set_threads(1);
        for (int n = 0; n < batch; n++)
            for (int oc = 0; oc < out_c; oc++)
                for (size_t q = 0; q < p; q++)
                    for (int t = 0; t < 4; t++) {
                        float sum = 0.0f;
                        for (int ic = 0; ic < in_c; ic++)
                            sum = fmaf(wt[((size_t)ic * out_c + oc) * 4 + t], x[((size_t)n * in_c + ic) * p + q], sum);
                        float want = 0.0f + fmaf(1.0f, sum, 0.0f);
                        if (bias)
                            want += b[oc];
                        size_t i = q / (size_t)w, j = q % (size_t)w;
                        float got = y[((size_t)n * out_c + oc) * 4 * p + (2 * i + (size_t)(t / 2)) * 2 * w + 2 * j +
                                      (size_t)(t % 2)];
                        good &= memcmp(&want, &got, 4) == 0;
                    }
    }
    CHECK(good);
    if (!good)
        fprintf(stderr, "  differs: deconv, batch %d, %d -> %d channels, %dx%d, bias %d\n", batch, in_c, out_c, h, w,
                bias);
    ddl__avx2_tiles_enable(was);
    free(x), free(wt), free(b), free(y), free(ws);
}

/* reduce16: _mm512_reduce_add_ps's sum of 16 lanes (GCC's order: halves, quarters, pairs) */
static float reduce16(const float *l)
{
    float t3[8], t6[4];
    for (int i = 0; i < 8; i++)
        t3[i] = l[8 + i] + l[i];
    for (int i = 0; i < 4; i++)
        t6[i] = t3[4 + i] + t3[i];
    return (t6[0] + t6[2]) + (t6[1] + t6[3]);
}

/* deconv_back: deconv2x2_avx2.c's backward of the 2x2 stride-2 transposed convolution against the
 * order deconv2x2_avx512.c's gives (a scalar reference here): dx, each the sum over (oc, a, b)
 * in order from +0, stored as 1 x sum + 0; dw, per chunk of conv.c's samples (its chunk():
 * (4 out_c + in_c) p floats a sample in 2^18, or the weights' count if more), 16 lanes over the
 * chunk's positions (position c in lane c mod 16) reduced as _mm512_reduce_add_ps reduces them,
 * or, for a chunk of fewer than 256 positions with 16 (oc, a, b) or more, one sum in order, then
 * added to dw by fmaf in chunk order; at 1, 2 and 3 threads, dw added to, not written */
static void deconv_back(int batch, int in_c, int out_c, int h, int w)
{
    ddl_conv2d g = {.batch = batch, .in_c = in_c, .in_h = h, .in_w = w, .out_c = out_c, .k_h = 2, .k_w = 2,
                    .stride = 2};
    int k = 4 * out_c;
    size_t p = (size_t)h * w, nx = (size_t)batch * in_c * p, ny = (size_t)batch * out_c * 4 * p;
    size_t nw = (size_t)in_c * k, per = ((size_t)k + (size_t)in_c) * p;
    size_t budget = (size_t)k * in_c > ((size_t)1 << 18) ? (size_t)k * in_c : (size_t)1 << 18;
    int nb = per ? (int)(budget / per) : 1;
    nb = nb < 1 ? 1 : nb > batch ? batch : nb;
    float *x = malloc(nx * 4), *wt = malloc(nw * 4), *dy = malloc(ny * 4), *dx = malloc(nx * 4);
    float *dw = malloc(nw * 4), *want_dx = malloc(nx * 4), *want_dw = malloc(nw * 4), *db = calloc((size_t)out_c, 4);
    float *dw0 = malloc(nw * 4);
    float *ws = calloc(ddl_deconv2d_workspace(&g) + 16, 4);
    unsigned s = (unsigned)(batch * 5 + in_c * 29 + out_c * 3 + h);
    for (size_t i = 0; i < nx; i++)
        x[i] = i % 11 == 3 ? 0.0f : rnd(&s);
    for (size_t i = 0; i < nw; i++)
        wt[i] = rnd(&s), dw0[i] = want_dw[i] = rnd(&s);
    for (size_t i = 0; i < ny; i++)
        dy[i] = rnd(&s);
#define TAP(n, oc, t, q)                                                                                         \
    dy[(((size_t)(n) * out_c + (size_t)(oc)) * 4 * p) + (2 * ((q) / (size_t)w) + (size_t)(t) / 2) * 2 * (size_t)w + \
       2 * ((q) % (size_t)w) + (size_t)(t) % 2]
    for (int n = 0; n < batch; n++)
        for (int ic = 0; ic < in_c; ic++)
            for (size_t q = 0; q < p; q++) {
                float sum = 0.0f;
                for (int e = 0; e < k; e++)
                    sum = fmaf(wt[(size_t)ic * k + (size_t)e], TAP(n, e / 4, e % 4, q), sum);
                want_dx[((size_t)n * in_c + (size_t)ic) * p + q] = fmaf(1.0f, sum, 0.0f);
            }
    for (int n0 = 0; n0 < batch; n0 += nb) {
        int m = batch - n0 < nb ? batch - n0 : nb, lanes = m * p >= 256 || k < 16;
        for (int ic = 0; ic < in_c; ic++)
            for (int e = 0; e < k; e++) {
                float lane[16] = {0}, one = 0.0f;
                for (int n = n0; n < n0 + m; n++)
                    for (size_t q = 0; q < p; q++) {
                        float xv = x[((size_t)n * in_c + (size_t)ic) * p + q], d = TAP(n, e / 4, e % 4, q);
                        size_t c = (size_t)(n - n0) * p + q;
                        if (lanes)
                            lane[c % 16] = fmaf(xv, d, lane[c % 16]);
                        else
                            one = fmaf(xv, d, one);
                    }
                float *to = &want_dw[(size_t)ic * k + (size_t)e];
                *to = fmaf(1.0f, lanes ? reduce16(lane) : one, *to);
            }
    }
#undef TAP
    int was = ddl__avx2_tiles_enable(2), good = 1;
    CHECK(ddl__deconv2x2_ok(&g, 1));
    for (int threads = 1; threads <= 3; threads++) {
        memcpy(dw, dw0, nw * 4); /* the same start as want_dw's */
        memset(dx, 0xff, nx * 4);
        ddl_set_threads(threads);
        ddl_deconv2d_backward(&g, x, wt, dy, dx, dw, db, ws);
        ddl_set_threads(1);
        int ok = same(dx, want_dx, nx) && same(dw, want_dw, nw);
        CHECK(ok);
        good &= ok;
    }
    if (!good)
        fprintf(stderr, "  differs: deconv backward, batch %d, %d -> %d channels, %dx%d\n", batch, in_c, out_c, h, w);
    ddl__avx2_tiles_enable(was);
    free(x), free(wt), free(dy), free(dx), free(dw), free(want_dx), free(want_dw), free(db), free(ws), free(dw0);
}

/* pointwise: the 1x1 convolution (in_c -> out_c on h x w) against the scalar order, and its
 * weight gradient against the tiles-off run's */
static void pointwise(int batch, int in_c, int out_c, int h, int w, int bias)
{
    ddl_conv2d g = {.batch = batch, .in_c = in_c, .in_h = h, .in_w = w, .out_c = out_c, .k_h = 1, .k_w = 1,
                    .stride = 1};
    size_t p = (size_t)h * w, nx = (size_t)batch * in_c * p, ny = (size_t)batch * out_c * p, nw = (size_t)in_c * out_c;
    float *x = malloc(nx * 4), *wt = malloc(nw * 4), *b = malloc((size_t)out_c * 4), *dy = malloc(ny * 4);
    float *y = malloc(ny * 4), *dx = malloc(nx * 4), *dw = calloc(nw, 4), *want_dw = calloc(nw, 4);
    float *ws = calloc(ddl_conv2d_workspace(&g) + 16, 4);
    unsigned s = (unsigned)(batch * 5 + in_c * 37 + out_c * 3 + h);
    for (size_t i = 0; i < nx; i++)
        x[i] = i % 17 == 2 ? 0.0f : rnd(&s);
    for (size_t i = 0; i < ny; i++)
        dy[i] = rnd(&s);
    for (size_t i = 0; i < nw; i++)
        wt[i] = rnd(&s);
    for (int i = 0; i < out_c; i++)
        b[i] = rnd(&s);
    /* dw in conv1x1_avx512.c's order: per chunk of conv.c's samples (its chunk()), 16 lanes a
     * weight reduced as _mm512_reduce_add_ps, or one sum in order for a chunk of fewer than 256
     * positions over 16 input channels or more, then dw + (1 x sum + 0) */
    size_t per = ((size_t)in_c + (size_t)out_c) * p, budget = nw > ((size_t)1 << 18) ? nw : (size_t)1 << 18;
    int nb = per ? (int)(budget / per) : 1;
    nb = nb < 1 ? 1 : nb > batch ? batch : nb;
    for (int n0 = 0; n0 < batch; n0 += nb) {
        int m = batch - n0 < nb ? batch - n0 : nb, lanes = !(m * p < 256 && in_c >= 16);
        for (int oc = 0; oc < out_c; oc++)
            for (int ic = 0; ic < in_c; ic++) {
                float lane[16] = {0}, one = 0.0f;
                for (int n = n0; n < n0 + m; n++)
                    for (size_t q = 0; q < p; q++) {
                        float d = dy[((size_t)n * out_c + oc) * p + q], xv = x[((size_t)n * in_c + ic) * p + q];
                        if (lanes)
                            lane[q % 16] = fmaf(d, xv, lane[q % 16]);
                        else
                            one = fmaf(d, xv, one);
                    }
                want_dw[(size_t)oc * in_c + ic] += fmaf(1.0f, lanes ? reduce16(lane) : one, 0.0f);
            }
    }
    int was = ddl__avx2_tiles_enable(2);
    CHECK(ddl__conv1x1_avx2_ok(&g));
    int good = 1;
    for (int threads = 1; threads <= 2; threads++) {
        memset(dw, 0, nw * 4);
        ddl_set_threads(threads);
        ddl_conv2d_forward(&g, x, wt, bias ? b : NULL, y, ws);
        ddl_conv2d_backward(&g, x, wt, dy, dx, dw, NULL, ws);
        ddl_set_threads(1);
        good &= memcmp(dw, want_dw, nw * 4) == 0;
        for (int n = 0; n < batch; n++)
            for (size_t q = 0; q < p; q++) {
                for (int oc = 0; oc < out_c; oc++) {
                    float sum = 0.0f;
                    for (int ic = 0; ic < in_c; ic++)
                        sum = fmaf(wt[(size_t)oc * in_c + ic], x[((size_t)n * in_c + ic) * p + q], sum);
                    float want = fmaf(1.0f, sum, 0.0f);
                    if (bias)
                        want += b[oc];
                    good &= memcmp(&want, &y[((size_t)n * out_c + oc) * p + q], 4) == 0;
                }
                for (int ic = 0; ic < in_c; ic++) {
                    float sum = 0.0f;
                    for (int oc = 0; oc < out_c; oc++)
                        sum = fmaf(wt[(size_t)oc * in_c + ic], dy[((size_t)n * out_c + oc) * p + q], sum);
                    float want = 0.0f + fmaf(1.0f, sum, 0.0f);
                    good &= memcmp(&want, &dx[((size_t)n * in_c + ic) * p + q], 4) == 0;
                }
            }
    }
    CHECK(good);
    if (!good)
        fprintf(stderr, "  differs: 1x1, batch %d, %d -> %d channels, %dx%d, bias %d\n", batch, in_c, out_c, h, w,
                bias);
    ddl__avx2_tiles_enable(was);
    free(x), free(wt), free(b), free(dy), free(y), free(dx), free(dw), free(want_dw), free(ws);
}

int main(void)
{
    if (ddl__avx2_tiles_enable(1) < 0) {
        printf("skipped: no AVX2 tiles in this build or on this CPU (no AVX2 and FMA, or no clones)\n");
        return 0;
    }
    conv(DDL_CONV_DIRECT, 8, 1, 6, 28, 28, 5, 2);   /* LeNet's conv1: the 6-channel tile */
    conv(DDL_CONV_DIRECT, 8, 6, 16, 14, 14, 5, 0);  /* LeNet's conv2: 8 channels; its input gradient 6 */
    conv(DDL_CONV_DIRECT, 40, 6, 16, 14, 14, 5, 0); /* several chunks of samples */
    conv(DDL_CONV_DIRECT, 4, 3, 8, 64, 64, 3, 1);   /* U-Net's first, 64x64 */
    conv(DDL_CONV_DIRECT, 36, 8, 8, 32, 32, 3, 1);  /* chunks of 16 samples, the last short */
    conv(DDL_CONV_DIRECT, 4, 64, 64, 8, 8, 3, 1);   /* U-Net's bottom: cut by channel groups */
    conv(DDL_CONV_DIRECT, 3, 5, 7, 16, 16, 3, 1);   /* odd channels: spares in the tiles and the weight gradient */
    conv(DDL_CONV_DIRECT, 3, 4, 3, 12, 12, 3, 0);   /* no padding */
    conv(DDL_CONV_DIRECT, 2, 2, 9, 10, 10, 5, 4);   /* padding k - 1: taps that reach only the border */
    conv(DDL_CONV_DIRECT, 2, 3, 1, 12, 12, 3, 2);   /* one output channel */
    conv(DDL_CONV_WINOGRAD_ALL, 4, 16, 16, 32, 32, 3, 1);  /* F(2x2,3x3): 256 tiles a plane */
    conv(DDL_CONV_WINOGRAD_ALL, 3, 8, 11, 13, 9, 3, 1);    /* 11 rows (6 + 5), 35 tiles: a row's end */
    conv(DDL_CONV_WINOGRAD_ALL, 2, 5, 7, 6, 6, 3, 0);      /* 4 tiles: one vector, its end */
    conv(DDL_CONV_WINOGRAD_ALL, 3, 37, 8, 11, 13, 3, 1);   /* dw by outer products: x's transform
                                                            * transposed, channels and tiles past 8 x 8 blocks */
    /* F(2x2,3x3)'s transforms in 8-float vectors (winograd_f2_avx2.c): planes of whole vectors */
    conv(DDL_CONV_WINOGRAD_ALL, 4, 64, 64, 8, 8, 3, 1);    /* U-Net's bottom: 16 tiles, 2 vectors */
    conv(DDL_CONV_WINOGRAD_ALL, 3, 8, 5, 6, 8, 3, 1);      /* 3 x 4 tiles: the last run twice */
    conv(DDL_CONV_WINOGRAD_ALL, 2, 6, 9, 12, 24, 3, 1);    /* 12 tiles a row: a vector's runs in two rows */
    conv(DDL_CONV_WINOGRAD_ALL, 2, 5, 7, 10, 10, 3, 0);    /* no padding (the input gradient's 2: 16-float) */
    conv(DDL_CONV_WINOGRAD_ALL, 1, 16, 300, 32, 32, 3, 1); /* blocks of 16 and 48 tiles */
    conv(DDL_CONV_WINOGRAD4_ALL, 4, 16, 16, 16, 16, 3, 1); /* F(4x4,3x3): 16 tiles */
    conv(DDL_CONV_WINOGRAD4_ALL, 3, 8, 13, 32, 32, 3, 1);  /* 64 tiles, 13 rows */
    conv(DDL_CONV_WINOGRAD4_ALL, 2, 8, 8, 64, 64, 3, 1);   /* 256 tiles: bands of one row of 16 */
    deconv(3, 64, 32, 8, 8, 1);   /* U-Net's up2: 64 positions, the last tile 16 */
    deconv(2, 32, 16, 16, 16, 1); /* up1 */
    deconv(2, 16, 8, 32, 32, 0);  /* up0, no bias */
    deconv(2, 3, 5, 2, 24, 1);    /* rows of 24: a tile of 3 vectors in one row, odd channels */
    deconv(3, 2, 1, 2, 8, 1);     /* 16 positions, 2 input channels (the fewest), 1 output */
    deconv_back(32, 16, 8, 32, 32); /* U-Net's up0: chunks of 5 samples, the last of 2 */
    deconv_back(32, 32, 16, 16, 16); /* up1 */
    deconv_back(9, 32, 32, 8, 16);   /* the most channels the backward takes; 4 chunks, the last short */
    deconv_back(3, 5, 3, 4, 24);     /* spare input and output channels; rows of 24 (a step across rows) */
    deconv_back(3, 2, 4, 2, 8);      /* 48 positions a chunk, 16 columns: dw summed in order */
    deconv_back(2, 3, 2, 2, 8);      /* 32 positions, 8 columns: dw by lanes however short */
    deconv_back(1, 7, 1, 16, 40);    /* one sample, one output channel: a lanes tile's spare rows */
    pointwise(4, 8, 11, 64, 64, 1); /* U-Net's head */
    pointwise(3, 5, 7, 8, 8, 1);    /* 64 positions: tiles of 3 vectors, then 2; odd channels */
    pointwise(2, 19, 6, 4, 4, 0);   /* 16 positions, no bias */
    depthwise(3, 12, 1, 16, 16, 3, 1, 1, 1); /* MobileNet's 3x3: a row of 16, one vector */
    depthwise(2, 5, 2, 13, 21, 3, 1, 1, 1);  /* rows of 21: a part vector; 2 outputs a channel */
    depthwise(2, 6, 1, 17, 17, 3, 2, 1, 1);  /* stride 2: the phases */
    depthwise(2, 4, 1, 11, 40, 5, 1, 4, 2);  /* 5x5, dilation 2, rows of 40 (2 vectors and a half) */
    return TEST_END();
}
