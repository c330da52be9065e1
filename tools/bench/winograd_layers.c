/* winograd_layers.c - the 3x3 layers of the cnn preset (64x64 RGB, batch 64) and of U-Net
 * (64x64, batch 32, depth 3, width 8: encoder, bottom, decoder), forward + backward, direct against
 * Winograd on every layer (DDL_CONV_WINOGRAD_ALL, whatever the size rule says), one thread, in
 * thread CPU time (the machine is shared: time off the core is not counted), best of 9 rounds of
 * 5 calls: the figures the size rule in src/core/winograd.c comes from. Run by winograd.sh. */
#define _POSIX_C_SOURCE 200809L
#include "ddl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float *filled(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) {
        fprintf(stderr, "winograd_layers: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        p[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    return p;
}

/* layer: best forward and backward seconds of one layer (n, c, h x h, k) with algo. */
static void layer(int n, int c, int h, int k, int algo, double *f, double *b)
{
    ddl_conv2d g = {.batch = n, .in_c = c, .in_h = h, .in_w = h, .out_c = k, .k_h = 3, .k_w = 3, .stride = 1, .pad = 1,
                    .algo = algo};
    size_t nx = (size_t)n * c * h * h, ny = (size_t)n * k * h * h, nw = (size_t)k * c * 9;
    float *x = filled(nx), *w = filled(nw), *y = filled(ny), *dy = filled(ny), *dx = filled(nx), *dw = filled(nw);
    float *db = filled((size_t)k), *ws = filled(ddl_conv2d_workspace(&g));
    *f = *b = 1e9;
    for (int r = 0; r < 9; r++) {
        double t0 = cpu_s();
        for (int i = 0; i < 5; i++)
            ddl_conv2d_forward(&g, x, w, NULL, y, ws);
        double t1 = cpu_s();
        for (int i = 0; i < 5; i++) /* the first layer needs no input gradient */
            ddl_conv2d_backward(&g, x, w, dy, c == 3 || c == 1 ? NULL : dx, dw, db, ws);
        double t2 = cpu_s();
        *f = fmin(*f, (t1 - t0) / 5);
        *b = fmin(*b, (t2 - t1) / 5);
    }
    free(x), free(w), free(y), free(dy), free(dx), free(dw), free(db), free(ws);
}

int main(void)
{
    static const int L[][4] = {{64, 3, 64, 16},  {64, 16, 64, 16}, {64, 16, 32, 32}, {64, 32, 32, 32},
                               {64, 32, 16, 64}, {64, 64, 16, 64}, {32, 1, 64, 8},   {32, 8, 64, 8},
                               {32, 8, 32, 16},  {32, 16, 32, 16}, {32, 16, 16, 32}, {32, 32, 16, 32},
                               {32, 32, 8, 64},  {32, 64, 8, 64},  {32, 64, 16, 32}, {32, 32, 32, 16},
                               {32, 16, 64, 8}};
    ddl_set_threads(1);
    for (size_t i = 0; i < sizeof L / sizeof *L; i++) {
        double f0, b0, f1, b1;
        layer(L[i][0], L[i][1], L[i][2], L[i][3], DDL_CONV_DIRECT, &f0, &b0);
        layer(L[i][0], L[i][1], L[i][2], L[i][3], DDL_CONV_WINOGRAD_ALL, &f1, &b1);
        printf("  %s N%d %d->%d %dx%d: direct %.2f + %.2f ms, winograd %.2f + %.2f ms, winograd %.2fx\n",
               L[i][0] == 64 ? "cnn " : "unet", L[i][0], L[i][1], L[i][3], L[i][2], L[i][2], f0 * 1e3, b0 * 1e3,
               f1 * 1e3, b1 * 1e3, (f0 + b0) / (f1 + b1));
    }
    return 0;
}
