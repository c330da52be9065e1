/* pool.c - the max-pool of any geometry (ddl_maxpool2d_*, pool2d.c) at ResNet-18's stem: 3x3,
 * stride 2, pad 1, on 64 channels at 32x32, batch 64, one thread, forward and backward; and the
 * plain 2x2 window (ops.c's kernel) on the same input for scale. Best of ROUNDS, random data.
 * Prints "pool: ..." lines in ms. For make bench (BENCH_ONLY=resnet). Uses ddl.h.
 * 2026-11-29, AMD EPYC, one thread, alternated: the 3x3 stride-2 forward took 31 ms when every
 * window went through pool2d.c's general loop, and 5.1-6.1 ms once the windows inside the image
 * went 16 at a time on AVX-512 (maxpool_avx512.c's ddl__maxpool_inside_avx512).
 * Also the 2x2 window at the cnn preset's first pool (16 channels of 64x64, 16.8 MB in: more than
 * the caches hold). Buffers are on 2 MiB boundaries, as ddl's large tensors are. 2026-11-29, same machine:
 * 3.0-3.3 ms forward and 1.9-2.3 backward with masked loads and stores throughout, 1.2-2.2 and
 * 0.9-1.1 with plain ones where the mask is full (maxpool_avx512.c's load_some), 3 alternated runs. */
#define _POSIX_C_SOURCE 200809L
#include "ddl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"

#define ROUNDS 7

/* buffer: n bytes on 2 MiB boundaries, as ddl's large tensors are (util.c: huge pages). */
static void *buffer(size_t n)
{
    size_t huge = (size_t)2 << 20;
    return aligned_alloc(huge, (n + huge - 1) / huge * huge);
}

/* shape: one pool over an n x c x h x w input, best of ROUNDS forward and backward. */
static int shape(const char *name, const ddl_pool2d *p, int n, int c, int h, int w)
{
    int oh = (h + p->pad_t + p->pad_b - p->k_h) / p->stride_h + 1;
    int ow = (w + p->pad_l + p->pad_r - p->k_w) / p->stride_w + 1;
    size_t nx = (size_t)n * c * h * w, ny = (size_t)n * c * oh * ow;
    float *x = buffer(nx * sizeof *x), *dx = buffer(nx * sizeof *dx);
    float *y = buffer(ny * sizeof *y), *dy = buffer(ny * sizeof *dy);
    int32_t *arg = buffer(ny * sizeof *arg);
    if (!x || !dx || !y || !dy || !arg) {
        fprintf(stderr, "pool: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < nx; i++)
        x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    for (size_t i = 0; i < ny; i++)
        dy[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    double f = 1e9, b = 1e9;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = bench_now();
        ddl_maxpool2d_forward(p, n, c, h, w, x, y, arg);
        double t1 = bench_now();
        ddl_maxpool2d_backward(p, n, c, h, w, dy, arg, dx);
        double t2 = bench_now();
        f = t1 - t0 < f ? t1 - t0 : f;
        b = t2 - t1 < b ? t2 - t1 : b;
    }
    printf("pool: %s, %dx%dx%dx%d: forward %.2f ms, backward %.2f ms\n", name, n, c, h, w, 1e3 * f, 1e3 * b);
    free(x), free(dx), free(y), free(dy), free(arg);
    return 0;
}

int main(void)
{
    ddl_pool2d stem = {.k_h = 3, .k_w = 3, .stride_h = 2, .stride_w = 2, .pad_t = 1, .pad_l = 1, .pad_b = 1, .pad_r = 1};
    ddl_pool2d two = {.k_h = 2, .k_w = 2, .stride_h = 2, .stride_w = 2};
    return shape("3x3 stride 2 pad 1 (ResNet's stem)", &stem, 64, 64, 32, 32) ||
           shape("2x2 stride 2 (LeNet's, U-Net's)", &two, 64, 64, 32, 32) ||
           shape("2x2 stride 2 (the cnn's first)", &two, 64, 16, 64, 64);
}
