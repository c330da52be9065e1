/* winograd_layers.c - the 3x3 layers of the cnn preset (64x64 RGB, micro-batches of 32) and of U-Net
 * (64x64, batch 32, depth 3, width 8: encoder, bottom, decoder), forward + backward, direct against
 * Winograd F(2x2,3x3) (DDL_CONV_WINOGRAD_ALL) and F(4x4,3x3) (DDL_CONV_WINOGRAD4_ALL: F(2x2) where
 * it does not tile the plane) on every layer, whatever the size rule says, pass by pass; the
 * speed-up of the faster Winograd pass by pass, and which passes the size rule gives Winograd
 * (ddl__wino_ok, ddl__wino_dw_ok), one thread, in
 * thread CPU time (the machine is shared: time off the core is not counted), best of 9 rounds of
 * 5 calls: the figures the size rule in src/core/winograd.c comes from. Run by winograd.sh. */
#define _POSIX_C_SOURCE 200809L
#include "ddl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* internals of build/libddl.a (src/core/impl.h): which passes the size rule gives Winograd */
int ddl__wino_ok(const ddl_conv2d *g);
int ddl__wino_dw_ok(const ddl_conv2d *g);

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

/* layer: best seconds of one layer (n, c, h x h, k) with algo: the forward pass, the input
 * gradient and the weight gradient (with the bias's) apart. */
static void layer(int n, int c, int h, int k, int algo, double t[3])
{
    ddl_conv2d g = {.batch = n, .in_c = c, .in_h = h, .in_w = h, .out_c = k, .k_h = 3, .k_w = 3, .stride = 1, .pad = 1,
                    .algo = algo};
    size_t nx = (size_t)n * c * h * h, ny = (size_t)n * k * h * h, nw = (size_t)k * c * 9;
    float *x = filled(nx), *w = filled(nw), *y = filled(ny), *dy = filled(ny), *dx = filled(nx), *dw = filled(nw);
    float *db = filled((size_t)k), *ws = filled(ddl_conv2d_workspace(&g));
    t[0] = t[1] = t[2] = 1e9;
    for (int r = 0; r < 9; r++) {
        double t0 = cpu_s();
        for (int i = 0; i < 5; i++)
            ddl_conv2d_forward(&g, x, w, NULL, y, ws);
        double t1 = cpu_s();
        for (int i = 0; i < 5; i++) /* the first layer needs no input gradient */
            if (c != 3 && c != 1)
                ddl_conv2d_backward(&g, x, w, dy, dx, NULL, NULL, ws);
        double t2 = cpu_s();
        for (int i = 0; i < 5; i++)
            ddl_conv2d_backward(&g, x, w, dy, NULL, dw, db, ws);
        double t3 = cpu_s();
        t[0] = fmin(t[0], (t1 - t0) / 5);
        t[1] = fmin(t[1], (t2 - t1) / 5);
        t[2] = fmin(t[2], (t3 - t2) / 5);
    }
    free(x), free(w), free(y), free(dy), free(dx), free(dw), free(db), free(ws);
}

int main(void)
{
    /* batch 32: the cnn trains its batch of 64 in 2 micro-batches, U-Net's is 32 */
    static const int L[][4] = {{32, 3, 64, 16},  {32, 16, 64, 16}, {32, 16, 32, 32}, {32, 32, 32, 32},
                               {32, 32, 16, 64}, {32, 64, 16, 64}, {32, 1, 64, 8},   {32, 8, 64, 8},
                               {32, 8, 32, 16},  {32, 16, 32, 16}, {32, 16, 16, 32}, {32, 32, 16, 32},
                               {32, 32, 8, 64},  {32, 64, 8, 64},  {32, 64, 16, 32}, {32, 32, 32, 16},
                               {32, 16, 64, 8}};
    ddl_set_threads(1);
    printf("  layer (batch 32)      direct fwd/dx/dw ms   F(2x2) fwd/dx/dw ms   F(4x4) fwd/dx/dw ms   best winograd   the rule takes\n");
    for (size_t i = 0; i < sizeof L / sizeof *L; i++) {
        double d[3], w[3], w4[3];
        layer(L[i][0], L[i][1], L[i][2], L[i][3], DDL_CONV_DIRECT, d);
        layer(L[i][0], L[i][1], L[i][2], L[i][3], DDL_CONV_WINOGRAD_ALL, w);
        layer(L[i][0], L[i][1], L[i][2], L[i][3], DDL_CONV_WINOGRAD4_ALL, w4);
        ddl_conv2d g = {.batch = L[i][0], .in_c = L[i][1], .in_h = L[i][2], .in_w = L[i][2], .out_c = L[i][3],
                        .k_h = 3, .k_w = 3, .stride = 1, .pad = 1, .algo = DDL_CONV_WINOGRAD};
        double sd = d[0] + d[1] + d[2], sw = 0;
        for (int p = 0; p < 3; p++)
            sw += fmin(w[p], w4[p]);
        printf("  %s %2d->%-2d %2dx%-2d  %5.2f %5.2f %5.2f    %5.2f %5.2f %5.2f    %5.2f %5.2f %5.2f    %5.2fx    %s\n",
               i < 6 ? "cnn " : "unet", L[i][1], L[i][3], L[i][2], L[i][2], d[0] * 1e3, d[1] * 1e3, d[2] * 1e3,
               w[0] * 1e3, w[1] * 1e3, w[2] * 1e3, w4[0] * 1e3, w4[1] * 1e3, w4[2] * 1e3, sd / sw,
               ddl__wino_ok(&g) && ddl__wino_dw_ok(&g) ? "all"
               : ddl__wino_ok(&g)                      ? "fwd, dx"
               : ddl__wino_dw_ok(&g)                   ? "dw"
                                                       : "-");
    }
    return 0;
}
