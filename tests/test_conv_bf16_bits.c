/* test_conv_bf16_bits.c - a bfloat16 convolution gives, bit for bit, the scalar reference
 * product (ddl__gemm_bf16_ref, or _amx_ref on the AMX path) on a column matrix built here by the definition of im2col,
 * whatever layout conv.c gives its own column matrix (rows padded past a multiple of 64 floats
 * in bfloat16 passes, conv.c's COL_PAD): forward, weight gradient and input gradient (the
 * column gradient folded back in im2col's order), on a geometry whose rows get the padding (16
 * positions a sample x 16 samples), one of a sample a chunk (31 x 31 positions) and one whose
 * rows get no padding (5 x 5 positions): convolutions the direct bfloat16 kernels leave to
 * im2col (the cnn's own 3x3 layers are theirs). Skipped where the CPU has no bfloat16 path. */
/* ddl-test: beside (computes, bounds no time) */
#include "ddl.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

int ddl__bf16_path(void);
int ddl__set_precision(int precision);
void ddl__gemm_bf16_ref(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                        const float *b, int ldb, int overwrite, float *c, int ldc);
void ddl__gemm_bf16_amx_ref(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                            const float *b, int ldb, int overwrite, float *c, int ldc);

/* gemm_ref: the scalar reference of this CPU's path (2: AMX, whose tiles sum in another order) */
static void gemm_ref(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, int overwrite, float *c, int ldc)
{
    (ddl__bf16_path() == 2 ? ddl__gemm_bf16_amx_ref : ddl__gemm_bf16_ref)(trans_a, trans_b, m, n, k, alpha, a, lda, b,
                                                                          ldb, overwrite, c, ldc);
}

static float rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (float)((*s >> 8) & 0xffff) / 65536.0f - 0.5f;
}

/* tap: the input index row r, position j of the column matrix of g reads, or -1 (padding). */
static long tap(const ddl_conv2d *g, int r, int j)
{
    int oh = ddl_conv2d_out_h(g), ow = ddl_conv2d_out_w(g), p = oh * ow;
    int ci = r / (g->k_h * g->k_w), ki = r / g->k_w % g->k_h, kj = r % g->k_w;
    int n = j / p, oy = j % p / ow, ox = j % ow;
    int iy = oy * g->stride - g->pad + ki, ix = ox * g->stride - g->pad + kj;
    if (iy < 0 || iy >= g->in_h || ix < 0 || ix >= g->in_w)
        return -1;
    return (((long)n * g->in_c + ci) * g->in_h + iy) * g->in_w + ix;
}

static void one(ddl_conv2d g)
{
    int oh = ddl_conv2d_out_h(&g), ow = ddl_conv2d_out_w(&g), p = oh * ow, cols = g.batch * p;
    int k = g.in_c * g.k_h * g.k_w;
    size_t nx = (size_t)g.batch * g.in_c * g.in_h * g.in_w, ny = (size_t)g.batch * g.out_c * p, nw = (size_t)g.out_c * k;
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *dy = malloc(ny * 4), *y = malloc(ny * 4), *dx = malloc(nx * 4);
    float *dw = calloc(nw, 4), *ws = malloc((ddl_conv2d_workspace(&g) + 1) * 4);
    float *col = malloc((size_t)k * cols * 4), *cm = malloc(ny * 4), *ref = malloc((ny > nw ? ny : nw) * 4);
    float *dcol = malloc((size_t)k * cols * 4), *rx = calloc(nx, 4);
    unsigned s = 7;
    for (size_t i = 0; i < nx; i++)
        x[i] = rnd(&s);
    for (size_t i = 0; i < nw; i++)
        w[i] = rnd(&s);
    for (size_t i = 0; i < ny; i++)
        dy[i] = rnd(&s);
    int was = ddl__set_precision(DDL_PRECISION_BF16);
    ddl_conv2d_forward(&g, x, w, NULL, y, ws);
    ddl_conv2d_backward(&g, x, w, dy, dx, dw, NULL, ws);
    ddl__set_precision(was);
    for (int r = 0; r < k; r++)
        for (int j = 0; j < cols; j++) {
            long t = tap(&g, r, j);
            col[(size_t)r * cols + j] = t < 0 ? 0.0f : x[t];
        }
    /* dy (n, o, p) as (o, n p): the columns' order */
    for (int n = 0; n < g.batch; n++)
        for (int o = 0; o < g.out_c; o++)
            memcpy(cm + ((size_t)o * g.batch + n) * p, dy + ((size_t)n * g.out_c + o) * p, (size_t)p * 4);
    /* forward: (o, n p) = w col, compared in y's (n, o, p) */
    gemm_ref(0, 0, g.out_c, cols, k, 1.0f, w, k, col, cols, 1, ref, cols);
    int same = 1;
    for (int n = 0; n < g.batch; n++)
        for (int o = 0; o < g.out_c; o++)
            same &= !memcmp(y + ((size_t)n * g.out_c + o) * p, ref + ((size_t)o * g.batch + n) * p, (size_t)p * 4);
    CHECK(same);
    /* weight gradient: 0 + dy col^T (dw was zero; one chunk) */
    gemm_ref(0, 1, g.out_c, k, cols, 1.0f, cm, cols, col, cols, 1, ref, k);
    for (size_t i = 0; i < nw; i++)
        ref[i] += 0.0f;
    CHECK(!memcmp(dw, ref, nw * 4));
    /* input gradient: w^T dy, each entry added onto its pixel in im2col's order */
    gemm_ref(1, 0, k, cols, g.out_c, 1.0f, w, k, cm, cols, 1, dcol, cols);
    for (int r = 0; r < k; r++)
        for (int j = 0; j < cols; j++) {
            long t = tap(&g, r, j);
            if (t >= 0)
                rx[t] += dcol[(size_t)r * cols + j];
        }
    CHECK(!memcmp(dx, rx, nx * 4));
    free(x), free(w), free(dy), free(y), free(dx), free(dw), free(ws), free(col), free(cm), free(ref), free(dcol), free(rx);
}

int main(void)
{
    if (!ddl__bf16_path()) {
        printf("skipped: no AVX512-BF16 or AMX on this CPU\n");
        return TEST_END();
    }
    /* geometries the direct bfloat16 kernels (conv_bf16.c, test_conv_bf16_direct.c) leave to
     * im2col: 4 x 4 planes (too small for their tiles) and a 4x4 kernel */
    /* 4 x 4 positions a sample, 16 samples: 256 columns, padded rows; 3x3, pad 1 (the cnn's kernel) */
    one((ddl_conv2d){.batch = 16, .in_c = 5, .in_h = 4, .in_w = 4, .out_c = 12, .k_h = 3, .k_w = 3, .stride = 1, .pad = 1});
    /* one sample a chunk (its column matrix over conv.c's budget), 31 x 31 positions */
    one((ddl_conv2d){.batch = 1, .in_c = 16, .in_h = 32, .in_w = 32, .out_c = 16, .k_h = 4, .k_w = 4, .stride = 1, .pad = 1});
    /* 5 x 5 positions, strided: rows as they are */
    one((ddl_conv2d){.batch = 3, .in_c = 3, .in_h = 11, .in_w = 11, .out_c = 9, .k_h = 3, .k_w = 3, .stride = 2, .pad = 0});
    return TEST_END();
}
