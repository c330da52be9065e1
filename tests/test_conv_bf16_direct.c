/* test_conv_bf16_direct.c - the direct bfloat16 convolution (conv_bf16.c): in a bfloat16 pass,
 * ddl_conv2d_forward and _backward give the scalar reference's bits (ddl__conv2d_bf16_ref_*:
 * the rounding and the order of the sums conv_bf16.c defines) for y, dx and dw, on geometries
 * chosen to reach the kernels' edges: 1, 2 and 3 input channels (an odd channel's missing pair
 * half), output channels not a multiple of 8 or 16 (the last tile's and the last pair's spare
 * channels), odd plane sizes (the last tile's spare positions), 5x5 kernels with pad 0 to 4,
 * batch 1, planes whose weight gradient goes in several blocks of positions, 64 channels (the
 * weight gradient in several ranges of channels); at 1 and at 2 threads (the same bits). Also: the direct kernels did run (the bits are
 * not im2col's, whose sums go in another order), and bias and dw are added to, not written.
 * Planes of fewer than ddl__conv2d_bf16_dw_fits's positions leave the weight gradient to im2col:
 * there ddl_conv2d_backward's dw must be near the reference's (another order of sums) and the
 * direct kernel, called alone, must still give the reference's bits. The forward pass with the
 * ReLU after it (ddl__conv2d_forward_relu, the graph's fusion) gives the bits of the forward pass
 * then ddl_relu_forward, a NaN and a -0 included.
 * Skipped where the CPU has no AVX512-BF16 (the path the kernels need). */
/* ddl-test: beside (computes, bounds no time) */
#include "ddl.h"
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bf16_conv_pass.h"

void ddl__conv2d_forward_relu(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y,
                              float *ws);
int ddl__conv2d_bf16_dw_fits(const ddl_conv2d *g);
void ddl__conv2d_bf16_dw(const ddl_conv2d *g, const float *x, const float *dy, float *dw, float *ws);
void ddl__gemm_bf16_ref(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                        const float *b, int ldb, int overwrite, float *c, int ldc);


static int same(const float *a, const float *b, size_t n) { return !memcmp(a, b, n * sizeof *a); }

/* im2col_y: the forward pass as the im2col route gives it (the gemm reference on the unfolded
 * input), to see that the direct kernels are what ran. */
static void im2col_y(const ddl_conv2d *g, const float *x, const float *w, float *y)
{
    int oh = ddl_conv2d_out_h(g), ow = ddl_conv2d_out_w(g), k = g->in_c * g->k_h * g->k_w, p = oh * ow;
    float *col = calloc((size_t)k * p, 4);
    for (int n = 0; n < g->batch; n++) {
        for (int r = 0; r < k; r++)
            for (int j = 0; j < p; j++) {
                int ci = r / (g->k_h * g->k_w), ki = r / g->k_w % g->k_h, kj = r % g->k_w;
                int iy = j / ow - g->pad + ki, ix = j % ow - g->pad + kj;
                col[(size_t)r * p + j] = iy < 0 || iy >= g->in_h || ix < 0 || ix >= g->in_w
                                             ? 0.0f
                                             : x[(((size_t)n * g->in_c + ci) * g->in_h + iy) * g->in_w + ix];
            }
        ddl__gemm_bf16_ref(0, 0, g->out_c, p, k, 1.0f, w, k, col, p, 1, y + (size_t)n * g->out_c * p, p);
    }
    free(col);
}

static void one(ddl_conv2d g, int threads)
{
    int oh = ddl_conv2d_out_h(&g), ow = ddl_conv2d_out_w(&g);
    size_t nx = (size_t)g.batch * g.in_c * g.in_h * g.in_w, ny = (size_t)g.batch * g.out_c * oh * ow;
    size_t nw = (size_t)g.out_c * g.in_c * g.k_h * g.k_w;
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *b = malloc(g.out_c * 4), *dy = malloc(ny * 4);
    float *y = malloc(ny * 4), *dx = malloc(nx * 4), *dw = malloc(nw * 4), *db = calloc(g.out_c, 4);
    float *ry = malloc(ny * 4), *rdx = malloc(nx * 4), *rdw = malloc(nw * 4);
    float *ws = malloc((ddl_conv2d_workspace(&g) + 1) * 4);
    unsigned s = 11u + (unsigned)g.in_c * 7u + (unsigned)g.out_c;
    for (size_t i = 0; i < nx; i++)
        x[i] = rnd(&s);
    for (size_t i = 0; i < nw; i++)
        w[i] = rnd(&s);
    for (int i = 0; i < g.out_c; i++)
        b[i] = rnd(&s);
    for (size_t i = 0; i < ny; i++)
        dy[i] = rnd(&s);
    for (size_t i = 0; i < nw; i++) /* dw is added to: start from values, not zeros */
        dw[i] = rdw[i] = 0.25f * rnd(&s);
    CHECK(ddl__conv2d_bf16_fits(&g));
    bf16_pass(&g, threads, x, w, b, dy, y, dx, dw, db, ws, ry, rdx, rdw);
    int sy = same(y, ry, ny), sx = same(dx, rdx, nx), sw = same(dw, rdw, nw);
    if (!ddl__conv2d_bf16_dw_fits(&g)) { /* im2col's weight gradient: near; the kernel alone: the bits */
        float *kdw = malloc(nw * 4), top = 0.0f;
        unsigned s2 = 11u + (unsigned)g.in_c * 7u + (unsigned)g.out_c;
        for (size_t i = 0; i < nx + nw + (size_t)g.out_c + ny; i++) /* the draws before dw's */
            (void)rnd(&s2);
        for (size_t i = 0; i < nw; i++)
            kdw[i] = 0.25f * rnd(&s2);
        int was2 = ddl__set_precision(DDL_PRECISION_BF16);
        ddl__conv2d_bf16_dw(&g, x, dy, kdw, ws);
        ddl__set_precision(was2);
        for (size_t i = 0; i < nw; i++)
            top = fabsf(rdw[i]) > top ? fabsf(rdw[i]) : top;
        int near = 1;
        for (size_t i = 0; i < nw; i++)
            near &= fabsf(dw[i] - rdw[i]) <= 1e-5f * top + 1e-6f;
        printf("  dw by im2col (a small plane): %s the reference's; the direct kernel alone: %s\n",
               near ? "near" : "FAR FROM", same(kdw, rdw, nw) ? "its bits" : "DIFFERENT");
        sw = near && same(kdw, rdw, nw);
        free(kdw);
    }
    printf("batch %d, %d -> %d, %dx%d, %dx%d pad %d, %d thread(s): y %s, dx %s, dw %s\n", g.batch, g.in_c, g.out_c,
           g.in_h, g.in_w, g.k_h, g.k_w, g.pad, threads, sy ? "same" : "DIFFERENT", sx ? "same" : "DIFFERENT",
           sw ? "same" : "DIFFERENT");
    CHECK(sy);
    CHECK(sx);
    CHECK(sw);
    if (g.in_c * g.k_h * g.k_w > 9) { /* the direct sums' order is not im2col's: their bits differ */
        float *iy = malloc(ny * 4);
        im2col_y(&g, x, w, iy);
        for (size_t i = 0; i < ny; i++)
            iy[i] += b[i / ((size_t)oh * ow) % g.out_c];
        size_t differ = 0;
        for (size_t i = 0; i < ny; i++)
            differ += memcmp(y + i, iy + i, 4) != 0;
        printf("  y: %zu of %zu outputs not im2col's bits\n", differ, ny);
        CHECK(differ > 0);
        free(iy);
    }
    /* the graph's conv with its ReLU after it: max(y, 0) in the copy out of the sums, the bits of
     * the forward pass then ddl_relu_forward; a NaN and a -0 among the biases */
    float *fy = malloc(ny * 4);
    b[0] = -0.0f;
    if (g.out_c > 1)
        b[1] = NAN;
    ddl_set_threads(threads);
    int was = ddl__set_precision(DDL_PRECISION_BF16);
    ddl__conv2d_forward_relu(&g, x, w, b, fy, ws);
    ddl_conv2d_forward(&g, x, w, b, y, ws);
    ddl__set_precision(was);
    ddl_set_threads(1);
    ddl_relu_forward(ny, y, y);
    size_t zeros = 0;
    for (size_t i = 0; i < ny; i++)
        zeros += fy[i] == 0.0f;
    printf("  with its ReLU: %s forward then ReLU's bits (%zu zeros of %zu)\n", same(fy, y, ny) ? "the" : "NOT the",
           zeros, ny);
    CHECK(same(fy, y, ny));
    CHECK(zeros > 0);
    free(fy);
    free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db), free(ry), free(rdx), free(rdw), free(ws);
}

int main(void)
{
    ddl_conv2d probe = {.batch = 1, .in_c = 1, .in_h = 8, .in_w = 8, .out_c = 1, .k_h = 3, .k_w = 3, .stride = 1, .pad = 1};
    if (!ddl__conv2d_bf16_fits(&probe)) {
        printf("skipped: the direct bfloat16 convolutions run on the AVX512-BF16 path; this CPU's is %s\n",
               ddl_cpu_bf16());
        return TEST_END();
    }
    static const int geo[][7] = {
        /* batch, in_c, out_c, h, w, k, pad */
        {2, 3, 16, 17, 15, 3, 1}, /* the cnn's first layer, odd sizes: an odd channel's pair */
        {1, 1, 5, 9, 13, 3, 1},   /* one input channel, batch 1, 5 outputs (a tile of 8: 3 spare) */
        {3, 2, 7, 12, 11, 3, 1},  /* 7 outputs: the last pair's spare channel in dw */
        {2, 16, 16, 16, 16, 3, 1}, /* the cnn's shapes */
        {1, 19, 21, 10, 11, 3, 1},/* channel counts not multiples of 8 or 16 */
        {2, 3, 4, 11, 10, 3, 0},  /* no padding; 4 outputs: the 4-channel tile */
        {2, 3, 6, 12, 12, 3, 2},  /* pad 2: outputs wider than the input */
        {2, 6, 16, 14, 14, 5, 2}, /* 5x5 (two passes of 9 taps and one of 7 in dw) */
        {1, 1, 6, 16, 16, 5, 0},  /* LeNet's conv1 shape, smaller */
        {1, 2, 3, 9, 9, 5, 4},    /* pad k - 1 */
        {2, 3, 5, 40, 41, 3, 1},  /* the weight gradient's positions in two blocks */
    };
    for (size_t i = 0; i < sizeof geo / sizeof geo[0]; i++) {
        ddl_conv2d g = {.batch = geo[i][0], .in_c = geo[i][1], .out_c = geo[i][2], .in_h = geo[i][3], .in_w = geo[i][4],
                        .k_h = geo[i][5], .k_w = geo[i][5], .stride = 1, .pad = geo[i][6]};
        one(g, 1);
        if (i == 0 || i == 3 || i == 7)
            one(g, 2);
    }
    /* many output channels: the weight gradient cut into several ranges of channel pairs */
    ddl_conv2d big = {.batch = 2, .in_c = 64, .out_c = 64, .in_h = 16, .in_w = 16, .k_h = 3, .k_w = 3, .stride = 1, .pad = 1};
    one(big, 1);
    one(big, 2);
    return TEST_END();
}
