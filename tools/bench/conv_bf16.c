/* conv_bf16.c - the cnn preset's convolutions (64x64 RGB, batch 64) timed alone, forward and
 * backward, in float32 and in bfloat16 (the calling thread's precision, as the trainer sets it),
 * best of REPS: the figures docs/BENCHMARKS.md's bfloat16 section gives per layer. bf16.sh
 * builds it against build/libddl.a (it calls ddl__set_precision and ddl__gemm_bf16, internals
 * of the library); by hand: cc -O2 -I. tools/bench/conv_bf16.c build/libddl.a and make's LDLIBS. */
#include "ddl.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"
#include "gemm_rate.h"

int ddl__set_precision(int precision);
int ddl__bf16_path(void);
gemm_fn ddl__gemm_bf16;


int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    if (!ddl__bf16_path()) { /* the scalar reference would take minutes */
        printf("skipped: no AVX512-BF16 or AMX on this CPU\n");
        return 0;
    }
    static const int shapes[][3] = {{3, 16, 64}, {16, 16, 64}, {16, 32, 32}, {32, 32, 32}, {32, 64, 16}, {64, 64, 16}};
    for (int s = 0; s < 6; s++) {
        ddl_conv2d g = {0};
        g.batch = 64, g.in_c = shapes[s][0], g.out_c = shapes[s][1], g.in_h = g.in_w = shapes[s][2];
        g.k_h = g.k_w = 3, g.stride = 1, g.pad = 1;
        size_t nx = (size_t)g.batch * g.in_c * g.in_h * g.in_w, ny = (size_t)g.batch * g.out_c * g.in_h * g.in_w;
        size_t nw = (size_t)g.in_c * g.out_c * 9;
        float *x = malloc(nx * 4), *dx = malloc(nx * 4), *y = malloc(ny * 4), *w = malloc(nw * 4), *dw = malloc(nw * 4);
        float *ws = malloc((ddl_conv2d_workspace(&g) + 1) * 4);
        for (size_t i = 0; i < nx; i++)
            x[i] = (float)rand() / RAND_MAX - 0.5f;
        for (size_t i = 0; i < nw; i++)
            w[i] = (float)rand() / RAND_MAX - 0.5f;
        double flop = 2.0 * ny * g.in_c * 9;
        printf("%2d->%2d %2dx%-2d", g.in_c, g.out_c, g.in_h, g.in_w);
        for (int prec = 0; prec < 2; prec++) {
            int was = ddl__set_precision(prec ? DDL_PRECISION_BF16 : DDL_PRECISION_FP32);
            double bf = 1e9, bb = 1e9;
            for (int r = 0; r < reps; r++) {
                double t0 = bench_now();
                ddl_conv2d_forward(&g, x, w, NULL, y, ws);
                double t1 = bench_now();
                ddl_conv2d_backward(&g, x, w, y, dx, dw, NULL, ws);
                double t2 = bench_now();
                bf = t1 - t0 < bf ? t1 - t0 : bf;
                bb = t2 - t1 < bb ? t2 - t1 : bb;
            }
            ddl__set_precision(was);
            printf("  %s fwd %6.2f ms (%5.1f GFLOP/s) bwd %6.2f ms (%5.1f)", prec ? "bf16" : "fp32", bf * 1e3,
                   flop / bf * 1e-9, bb * 1e3, 2 * flop / bb * 1e-9);
        }
        printf("\n");
        free(x), free(dx), free(y), free(w), free(dw), free(ws);
    }
    /* the products of the forward passes (out_c, 64 x 64 / 4^i positions of 10 samples, in_c 9),
     * and a square one where packing is amortized */
    static const int gm[][3] = {{16, 40960, 144}, {32, 10240, 288}, {64, 2560, 576}, {128, 4096, 1152}, {16, 40976, 144}, {16, 4096, 144}, {16, 4112, 144}};
    for (int s = 0; s < 7; s++)
        printf("bf16 product %3d x %5d x %4d: %6.1f GFLOP/s\n", gm[s][0], gm[s][1], gm[s][2],
               gemm_rate(ddl__gemm_bf16, gm[s][0], gm[s][1], gm[s][2], reps));
    return 0;
}
