/* kernels.c - single kernels timed alone, one thread, for make bench (BENCH_ONLY=ops, beside
 * lenet_ops.c): LeNet's two convolutions forward and backward, U-Net's GroupNorm + ReLU as two
 * ops against ddl_groupnorm_relu_* at its largest and a middle shape, U-Net's transposed
 * convolutions and 1x1 head direct and by the column matrix, and ddl_gemm on LeNet's
 * dense layers and U-Net's small products against OpenBLAS's cblas_sgemm called directly (where
 * the program was linked with it). Best of 5 rounds of 20 calls each, random data. Uses ddl.h,
 * and cblas_sgemm by a weak reference.
 * 2026-11-26, ddl_gemm with its AVX-512 kernels against OpenBLAS 0.3.21 (its Haswell kernel),
 * alone in cache: LeNet fc1 forward 64x120x400 50 vs 68 us, its weight gradient 40 vs 64, its
 * input gradient 36 vs 64; U-Net 11x8x12288 15 vs 74, 32x704x64 17 vs 33.
 * 2026-11-25, 3 runs, GroupNorm + ReLU at batch 32: (8 channels, 64x64) forward 306-488 -> 220-281
 * us, backward 1241-1565 -> 1019-1405; (32, 16x16) forward 81-127 -> 64-80, backward 240-335 ->
 * 231-309 (then measured in test_ops, which it left).
 * 2026-11-29, the cnn's block1.conv2 bias gradient (batch 32, 16 channels of 64x64, in cache), 3
 * alternated runs: 174-184 us with one plane's sum at a time, 121-127 with four side by side
 * (ddl__planes_sum in ops.c, the same bits).
 * 2026-11-30, the exponentials in lanes (src/core/expf_lanes.c, the library's bits), 3 alternated
 * runs: SiLU over 2M floats forward 7.7-8.3 -> 2.2-3.2 ms, backward 9.8-10.2 -> 1.5-2.3; the
 * U-Net's loss (ddl_softmax_xent, 32 x 11 classes x 64x64, probabilities and gradient) 9.0-9.2 ->
 * 4.3-5.2 ms, then 2.0 with xent_block's loops in AVX-512 clones (DDL__LANES).
 * 2026-11-30, U-Net's 2x2 stride-2 transposed convolutions and its 1x1 head direct
 * (deconv2x2_avx512.c, conv1x1_avx512.c, the same bits): see the U-Net up and head lines, each
 * beside the column matrix's. */
#define _POSIX_C_SOURCE 200809L
#include "ddl.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"

#define ROUNDS 5
#define REPS 20

/* filled: n floats uniform in [lo, hi) (rand: the values do not matter, only their spread). */
static float *filled(size_t n, float lo, float hi)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) {
        fprintf(stderr, "kernels: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        p[i] = lo + (hi - lo) * (float)rand() / (float)RAND_MAX;
    return p;
}

static void bench_conv(const char *name, const ddl_conv2d *g, int need_dx)
{
    size_t nx = (size_t)g->batch * g->in_c * g->in_h * g->in_w, nw = (size_t)g->out_c * g->in_c * g->k_h * g->k_w;
    size_t ny = (size_t)g->batch * g->out_c * ddl_conv2d_out_h(g) * ddl_conv2d_out_w(g);
    float *x = filled(nx, -1, 1), *w = filled(nw, -1, 1), *b = filled((size_t)g->out_c, -1, 1);
    float *y = filled(ny, 0, 0), *dy = filled(ny, -1, 1), *ws = filled(ddl_conv2d_workspace(g), 0, 0);
    float *dx = filled(nx, 0, 0), *dw = filled(nw, 0, 0), *db = filled((size_t)g->out_c, 0, 0);
    double best_f = 1e9, best_b = 1e9;
    for (int round = 0; round < ROUNDS; round++) {
        double t0 = bench_now();
        for (int i = 0; i < REPS; i++)
            ddl_conv2d_forward(g, x, w, b, y, ws);
        double t1 = bench_now();
        for (int i = 0; i < REPS; i++)
            ddl_conv2d_backward(g, x, w, dy, need_dx ? dx : NULL, dw, db, ws);
        double t2 = bench_now();
        best_f = fmin(best_f, (t1 - t0) / REPS);
        best_b = fmin(best_b, (t2 - t1) / REPS);
    }
    printf("  %-38s forward %6.0f us  backward%s %6.0f us\n", name, best_f * 1e6, need_dx ? "" : " (no dx)",
           best_b * 1e6);
    free(x), free(w), free(b), free(y), free(dy), free(ws), free(dx), free(dw), free(db);
}

/* bench_pointwise: a transposed (deconv 1) or 1x1 convolution forward and backward (dx, dw, db),
 * by the direct kernels and, where the library lets them be turned off (ddl__*_enable, by weak
 * references), by conv.c's column matrix and products: the same bits. */
int ddl__deconv2x2_enable(int on) __attribute__((weak));
int ddl__deconv2x2_ok(const ddl_conv2d *g, int backward) __attribute__((weak));
int ddl__conv1x1_enable(int on) __attribute__((weak));
static void bench_pointwise(const char *name, const ddl_conv2d *g, int deconv)
{
    size_t nx = (size_t)g->batch * g->in_c * g->in_h * g->in_w, nw = (size_t)g->out_c * g->in_c * g->k_h * g->k_w;
    size_t ny = (size_t)g->batch * g->out_c *
                (deconv ? (size_t)ddl_deconv2d_out_h(g) * ddl_deconv2d_out_w(g) : (size_t)ddl_conv2d_out_h(g) * ddl_conv2d_out_w(g));
    size_t wn = deconv ? ddl_deconv2d_workspace(g) : ddl_conv2d_workspace(g);
    float *x = filled(nx, -1, 1), *w = filled(nw, -1, 1), *b = filled((size_t)g->out_c, -1, 1);
    float *y = filled(ny, 0, 0), *dy = filled(ny, -1, 1), *ws = filled(wn, 0, 0);
    float *dx = filled(nx, 0, 0), *dw = filled(nw, 0, 0), *db = filled((size_t)g->out_c, 0, 0);
    int (*enable)(int) = deconv ? ddl__deconv2x2_enable : ddl__conv1x1_enable;
    for (int way = 0; way < (enable ? 2 : 1); way++) {
        int was = enable ? enable(!way) : 1;
        double best_f = 1e9, best_b = 1e9;
        for (int round = 0; round < ROUNDS; round++) {
            double t0 = bench_now();
            for (int i = 0; i < REPS; i++)
                deconv ? ddl_deconv2d_forward(g, x, w, b, y, ws) : ddl_conv2d_forward(g, x, w, b, y, ws);
            double t1 = bench_now();
            for (int i = 0; i < REPS; i++)
                deconv ? ddl_deconv2d_backward(g, x, w, dy, dx, dw, db, ws) : ddl_conv2d_backward(g, x, w, dy, dx, dw, db, ws);
            double t2 = bench_now();
            best_f = fmin(best_f, (t1 - t0) / REPS);
            best_b = fmin(best_b, (t2 - t1) / REPS);
        }
        if (enable)
            enable(was);
        int back_direct = !deconv || !ddl__deconv2x2_ok || ddl__deconv2x2_ok(g, 1);
        printf("  %-38s forward %6.0f us  backward %6.0f us%s\n", name, best_f * 1e6, best_b * 1e6,
               way ? "  (column matrix)" : back_direct ? "" : "  (backward: the column matrix's)");
    }
    free(x), free(w), free(b), free(y), free(dy), free(ws), free(dx), free(dw), free(db);
}

/* bench_bias: a convolution's bias gradient alone (ddl_conv2d_backward with only db): the sums of
 * dy over each channel's planes. */
static void bench_bias(const char *name, const ddl_conv2d *g)
{
    size_t ny = (size_t)g->batch * g->out_c * ddl_conv2d_out_h(g) * ddl_conv2d_out_w(g);
    float *dy = filled(ny, -1, 1), *db = filled((size_t)g->out_c, 0, 0), *ws = filled(ddl_conv2d_workspace(g), 0, 0);
    double best = 1e9;
    for (int round = 0; round < ROUNDS; round++) {
        double t0 = bench_now();
        for (int i = 0; i < REPS; i++)
            ddl_conv2d_backward(g, NULL, NULL, dy, NULL, NULL, db, ws);
        best = fmin(best, (bench_now() - t0) / REPS);
    }
    printf("  %-38s bias gradient %6.0f us\n", name, best * 1e6);
    free(dy), free(db), free(ws);
}

/* cblas_sgemm, if the program was linked with a BLAS (CblasRowMajor 101, NoTrans 111, Trans 112) */
extern void cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                        int lda, const float *b, int ldb, float beta, float *c, int ldc) __attribute__((weak));

static void bench_gemm(const char *name, int ta, int tb, int m, int n, int k)
{
    int lda = ta ? m : k, ldb = tb ? k : n;
    float *a = filled((size_t)m * k, -1, 1), *b = filled((size_t)k * n, -1, 1), *c = filled((size_t)m * n, 0, 0);
    double best_d = 1e9, best_o = 1e9;
    for (int round = 0; round < ROUNDS; round++) {
        double t0 = bench_now();
        for (int i = 0; i < REPS; i++)
            ddl_gemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
        double t1 = bench_now();
        for (int i = 0; cblas_sgemm && i < REPS; i++)
            cblas_sgemm(101, ta ? 112 : 111, tb ? 112 : 111, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
        double t2 = bench_now();
        best_d = fmin(best_d, (t1 - t0) / REPS);
        best_o = fmin(best_o, (t2 - t1) / REPS);
    }
    printf("  gemm %-26s %c%c %4dx%4dx%5d  ddl %7.1f us", name, ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k,
           best_d * 1e6);
    if (cblas_sgemm)
        printf("  cblas_sgemm %7.1f us  ratio %.2f", best_o * 1e6, best_o / best_d);
    printf("\n");
    free(a), free(b), free(c);
}

static void bench_gn_relu(int c, int s)
{
    int n = 32, groups = 8;
    size_t nx = (size_t)n * c * s;
    float *x = filled(nx, -2, 2), *y = filled(nx, 0, 0), *dy = filled(nx, -1, 1), *dx = filled(nx, 0, 0);
    float *p = filled(nx, 0, 0), *mr = filled((size_t)n * groups * 2, 0, 0), *gamma = filled((size_t)c, 0.5f, 1.5f);
    float *beta = filled((size_t)c, -1, 1), *dg = filled((size_t)c, 0, 0), *db = filled((size_t)c, 0, 0);
    double best[4] = {1e9, 1e9, 1e9, 1e9};
    for (int round = 0; round < ROUNDS; round++) {
        double t[5];
        t[0] = bench_now();
        for (int i = 0; i < REPS; i++) {
            ddl_groupnorm_forward(n, c, s, groups, x, gamma, beta, y, mr);
            ddl_relu_forward(nx, y, y);
        }
        t[1] = bench_now();
        for (int i = 0; i < REPS; i++)
            ddl_groupnorm_relu_forward(n, c, s, groups, x, gamma, beta, y, mr);
        t[2] = bench_now();
        for (int i = 0; i < REPS; i++) {
            ddl_relu_backward(nx, y, dy, p);
            ddl_groupnorm_backward(n, c, s, groups, x, gamma, mr, p, dx, dg, db);
        }
        t[3] = bench_now();
        for (int i = 0; i < REPS; i++)
            ddl_groupnorm_relu_backward(n, c, s, groups, x, gamma, mr, y, dy, dx, dg, db);
        t[4] = bench_now();
        for (int k = 0; k < 4; k++)
            best[k] = fmin(best[k], (t[k + 1] - t[k]) / REPS);
    }
    printf("  groupnorm+relu N32 C%-3d S%-5d         forward %6.0f us, fused %6.0f us; backward %6.0f us, fused %6.0f us\n",
           c, s, best[0] * 1e6, best[1] * 1e6, best[2] * 1e6, best[3] * 1e6);
    free(x), free(y), free(dy), free(dx), free(p), free(mr), free(gamma), free(beta), free(dg), free(db);
}

/* bench_exps: SiLU forward and backward over 2M floats in [-10, 10], and the U-Net's softmax
 * cross-entropy with its probabilities and gradient (batch 32, 11 classes, 64x64) */
static void bench_exps(void)
{
    size_t n = 2u << 20, nl = (size_t)32 * 11 * 64 * 64;
    float *x = filled(n, -10.0f, 10.0f), *y = filled(n, 0.0f, 1.0f), *dy = filled(n, -1.0f, 1.0f);
    float *l = filled(nl, -4.0f, 4.0f), *pr = filled(nl, 0.0f, 1.0f), *dl = filled(nl, 0.0f, 1.0f);
    uint16_t *t = malloc((size_t)32 * 64 * 64 * sizeof *t);
    if (!t)
        exit(1);
    for (size_t i = 0; i < (size_t)32 * 64 * 64; i++)
        t[i] = (uint16_t)(rand() % 11);
    double bf = 1e9, bb = 1e9, bx = 1e9;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = bench_now();
        ddl_act_forward(DDL_ACT_SILU, 0.0f, 0.0f, n, x, y);
        double t1 = bench_now();
        ddl_act_backward(DDL_ACT_SILU, 0.0f, 0.0f, n, x, y, dy, dy);
        double t2 = bench_now();
        ddl_softmax_xent(32, 11, 64 * 64, l, t, 1.0f, pr, dl);
        double t3 = bench_now();
        bf = t1 - t0 < bf ? t1 - t0 : bf, bb = t2 - t1 < bb ? t2 - t1 : bb, bx = t3 - t2 < bx ? t3 - t2 : bx;
    }
    printf("  silu 2M floats                         forward %6.0f us  backward %6.0f us\n", bf * 1e6, bb * 1e6);
    printf("  softmax cross-entropy N32 C11 64x64    with probs and gradient %6.0f us\n", bx * 1e6);
    free(x), free(y), free(dy), free(l), free(pr), free(dl), free(t);
}

int main(void)
{
    ddl_set_threads(1);
    printf("kernels alone, one thread, best of %d rounds of %d calls (gemm: %s)\n", ROUNDS, REPS, ddl_gemm_backend());
    ddl_conv2d c1 = {.batch = 64, .in_c = 1, .in_h = 28, .in_w = 28, .out_c = 6, .k_h = 5, .k_w = 5, .stride = 1, .pad = 2},
               c2 = {.batch = 64, .in_c = 6, .in_h = 14, .in_w = 14, .out_c = 16, .k_h = 5, .k_w = 5, .stride = 1};
    bench_conv("LeNet conv1 N64 1->6 28x28 k5 p2", &c1, 0);
    bench_conv("LeNet conv1 N64 1->6 28x28 k5 p2 +dx", &c1, 1);
    bench_conv("LeNet conv2 N64 6->16 14x14 k5", &c2, 1);
    ddl_conv2d cnn1 = {.batch = 32, .in_c = 16, .in_h = 64, .in_w = 64, .out_c = 16, .k_h = 3, .k_w = 3, .stride = 1,
                       .pad = 1};
    bench_bias("cnn block1.conv2 N32 16->16 64x64", &cnn1);
    ddl_conv2d up0 = {.batch = 32, .in_c = 16, .in_h = 32, .in_w = 32, .out_c = 8, .k_h = 2, .k_w = 2, .stride = 2};
    ddl_conv2d up1 = {.batch = 32, .in_c = 32, .in_h = 16, .in_w = 16, .out_c = 16, .k_h = 2, .k_w = 2, .stride = 2};
    ddl_conv2d up2 = {.batch = 32, .in_c = 64, .in_h = 8, .in_w = 8, .out_c = 32, .k_h = 2, .k_w = 2, .stride = 2};
    ddl_conv2d head = {.batch = 32, .in_c = 8, .in_h = 64, .in_w = 64, .out_c = 11, .k_h = 1, .k_w = 1, .stride = 1};
    bench_pointwise("U-Net up0 N32 16->8 32x32 k2 s2", &up0, 1);
    bench_pointwise("U-Net up1 N32 32->16 16x16 k2 s2", &up1, 1);
    bench_pointwise("U-Net up2 N32 64->32 8x8 k2 s2", &up2, 1);
    bench_pointwise("U-Net head N32 8->11 64x64 k1", &head, 0);
    bench_gn_relu(8, 64 * 64);
    bench_gn_relu(32, 16 * 16);
    bench_exps();
    bench_gemm("LeNet fc1 forward", 0, 1, 64, 120, 400);
    bench_gemm("LeNet fc1 weight gradient", 1, 0, 120, 400, 64);
    bench_gemm("LeNet fc1 input gradient", 0, 0, 64, 400, 120);
    bench_gemm("LeNet fc2 forward", 0, 1, 64, 84, 120);
    bench_gemm("LeNet fc2 weight gradient", 1, 0, 84, 120, 64);
    bench_gemm("LeNet fc3 forward", 0, 1, 64, 10, 84);
    bench_gemm("U-Net 11x512x8", 0, 0, 11, 512, 8);
    bench_gemm("U-Net 32x704x64", 1, 0, 32, 704, 64);
    bench_gemm("U-Net 11x8x12288 (dots)", 0, 1, 11, 8, 12288);
    bench_gemm("U-Net 32x64x2560 (dots)", 0, 1, 32, 64, 2560);
    return 0;
}
