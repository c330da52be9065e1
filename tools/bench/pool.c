/* pool.c - the max-pool of any geometry (ddl_maxpool2d_*, pool2d.c) at ResNet-18's stem: 3x3,
 * stride 2, pad 1, on 64 channels at 32x32, batch 64, one thread, forward and backward; and the
 * plain 2x2 window (ops.c's kernel) on the same input for scale. Best of ROUNDS, random data.
 * Prints "pool: ..." lines in ms. For make bench (BENCH_ONLY=resnet). Uses ddl.h.
 * 2026-11-29, AMD EPYC, one thread, alternated: the 3x3 stride-2 forward took 31 ms when every
 * window went through pool2d.c's general loop, and 5.1-6.1 ms once the windows inside the image
 * went 16 at a time on AVX-512 (maxpool_avx512.c's ddl__maxpool_inside_avx512). */
#define _POSIX_C_SOURCE 200809L
#include "ddl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"

#define ROUNDS 7

int main(void)
{
    int n = 64, c = 64, h = 32, w = 32;
    ddl_pool2d stem = {.k_h = 3, .k_w = 3, .stride_h = 2, .stride_w = 2, .pad_t = 1, .pad_l = 1, .pad_b = 1, .pad_r = 1};
    ddl_pool2d two = {.k_h = 2, .k_w = 2, .stride_h = 2, .stride_w = 2};
    const ddl_pool2d *ps[2] = {&stem, &two};
    const char *names[2] = {"3x3 stride 2 pad 1 (ResNet's stem)", "2x2 stride 2 (LeNet's, U-Net's)"};
    size_t nx = (size_t)n * c * h * w, ny = (size_t)n * c * (h / 2) * (w / 2);
    float *x = malloc(nx * sizeof *x), *dx = malloc(nx * sizeof *dx), *y = malloc(ny * sizeof *y);
    float *dy = malloc(ny * sizeof *dy);
    int32_t *arg = malloc(ny * sizeof *arg);
    if (!x || !dx || !y || !dy || !arg) {
        fprintf(stderr, "pool: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < nx; i++)
        x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    for (size_t i = 0; i < ny; i++)
        dy[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    for (int k = 0; k < 2; k++) {
        double f = 1e9, b = 1e9;
        for (int r = 0; r < ROUNDS; r++) {
            double t0 = bench_now();
            ddl_maxpool2d_forward(ps[k], n, c, h, w, x, y, arg);
            double t1 = bench_now();
            ddl_maxpool2d_backward(ps[k], n, c, h, w, dy, arg, dx);
            double t2 = bench_now();
            f = t1 - t0 < f ? t1 - t0 : f;
            b = t2 - t1 < b ? t2 - t1 : b;
        }
        printf("pool: %s, %dx%dx%dx%d: forward %.2f ms, backward %.2f ms\n", names[k], n, c, h, w, 1e3 * f, 1e3 * b);
    }
    free(x), free(dx), free(y), free(dy), free(arg);
    return 0;
}
