/* resnet_layers.c - ResNet-18's convolutions at 64x64 input (the bench's resnet.sh), batch 64, one
 * thread, timed alone pass by pass in bfloat16 (the calling thread's precision, as the trainer
 * sets it) and float32: forward, input gradient, weight gradient, best of REPS, ms; the last line
 * sums the network (each layer as many times as it appears; the stem's input gradient, which
 * training skips, included). bf16.sh builds it against build/libddl.a (ddl__set_precision is
 * internal); by hand: cc -O2 -I. -Itools/bench tools/bench/resnet_layers.c build/libddl.a and
 * make's LDLIBS. Arguments: REPS, then ONLY (one layer's index, for perf), PRECISIONS (1:
 * bfloat16 alone), PASS (0, 1 or 2 alone). */
#include "ddl.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"

int ddl__set_precision(int precision);
int ddl__bf16_path(void);

/* one layer: in_c, out_c, plane, kernel, stride, pad, times it appears in the network */
static const int layers[][7] = {
    {3, 64, 64, 7, 2, 3, 1},     /* stem */
    {64, 64, 16, 3, 1, 1, 4},    /* blocks 0-1 */
    {64, 128, 16, 3, 2, 1, 1},   /* block 2 conv1 */
    {64, 128, 16, 1, 2, 0, 1},   /* block 2 downsample */
    {128, 128, 8, 3, 1, 1, 3},   /* blocks 2-3 */
    {128, 256, 8, 3, 2, 1, 1},   /* block 4 conv1 */
    {128, 256, 8, 1, 2, 0, 1},   /* block 4 downsample */
    {256, 256, 4, 3, 1, 1, 3},   /* blocks 4-5 */
    {256, 512, 4, 3, 2, 1, 1},   /* block 6 conv1 */
    {256, 512, 4, 1, 2, 0, 1},   /* block 6 downsample */
    {512, 512, 2, 3, 1, 1, 3},   /* blocks 6-7 */
};

static double best(int reps, const ddl_conv2d *g, int pass, const float *x, const float *w, float *y, float *dx,
                   float *dw, float *ws)
{
    double b = 1e9;
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        if (pass == 0)
            ddl_conv2d_forward(g, x, w, NULL, y, ws);
        else
            ddl_conv2d_backward(g, x, w, y, pass == 1 ? dx : NULL, pass == 2 ? dw : NULL, NULL, ws);
        double t = bench_now() - t0;
        b = t < b ? t : b;
    }
    return b;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 5, only = argc > 2 ? atoi(argv[2]) : -1; /* only: one layer (for perf) */
    int precisions = argc > 3 ? atoi(argv[3]) : 2;                        /* 1: bfloat16 alone */
    int one_pass = argc > 4 ? atoi(argv[4]) : -1;                         /* 0, 1, 2: that pass alone */
    int n_layers = (int)(sizeof layers / sizeof layers[0]);
    if (!ddl__bf16_path()) {
        printf("skipped: no AVX512-BF16 or AMX on this CPU\n");
        return 0;
    }
    double total[2][3] = {{0}};
    printf("%-22s %6s | %-26s | %-26s\n", "layer (x times)", "GFLOP", "bf16 fwd / dx / dw ms", "fp32 fwd / dx / dw ms");
    for (int s = 0; s < n_layers; s++) {
        if (only >= 0 && s != only)
            continue;
        ddl_conv2d g = {0};
        g.batch = 64, g.in_c = layers[s][0], g.out_c = layers[s][1], g.in_h = g.in_w = layers[s][2];
        g.k_h = g.k_w = layers[s][3], g.stride = layers[s][4], g.pad = layers[s][5];
        int oh = ddl_conv2d_out_h(&g), ow = ddl_conv2d_out_w(&g);
        size_t nx = (size_t)g.batch * g.in_c * g.in_h * g.in_w, ny = (size_t)g.batch * g.out_c * oh * ow;
        size_t nw = (size_t)g.in_c * g.out_c * g.k_h * g.k_w;
        float *x = malloc(nx * 4), *dx = malloc(nx * 4), *y = malloc(ny * 4), *w = malloc(nw * 4), *dw = malloc(nw * 4);
        float *ws = malloc((ddl_conv2d_workspace(&g) + 1) * 4);
        for (size_t i = 0; i < nx; i++)
            x[i] = (float)rand() / RAND_MAX - 0.5f;
        for (size_t i = 0; i < nw; i++)
            w[i] = (float)rand() / RAND_MAX - 0.5f;
        for (size_t i = 0; i < ny; i++)
            y[i] = (float)rand() / RAND_MAX - 0.5f;
        double flop = 2.0 * ny * g.in_c * g.k_h * g.k_w;
        char name[64];
        snprintf(name, sizeof name, "%d->%d %dx%d k%d s%d (x%d)", g.in_c, g.out_c, g.in_h, g.in_w, g.k_h, g.stride,
                 layers[s][6]);
        printf("%-22s %6.2f |", name, flop * 1e-9);
        for (int prec = 0; prec < precisions; prec++) {
            int was = ddl__set_precision(prec ? DDL_PRECISION_FP32 : DDL_PRECISION_BF16);
            for (int pass = 0; pass < 3; pass++) {
                if (one_pass >= 0 && pass != one_pass)
                    continue;
                double t = best(reps, &g, pass, x, w, y, dx, dw, ws);
                total[prec][pass] += t * layers[s][6];
                printf(" %7.2f", t * 1e3);
            }
            ddl__set_precision(was);
            printf(" |");
        }
        printf("\n");
        free(x), free(dx), free(y), free(w), free(dw), free(ws);
    }
    printf("%-29s |", "network (each layer x times)");
    for (int prec = 0; prec < precisions; prec++)
        printf(" %7.2f %7.2f %7.2f |", total[prec][0] * 1e3, total[prec][1] * 1e3, total[prec][2] * 1e3);
    printf("\n");
    return 0;
}
