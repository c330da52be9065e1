/* bn.c - what a BatchNorm layer costs against the convolution before it, for make bench
 * (BENCH_ONLY=resnet): ResNet-18's 3x3 convolutions at 64x64 input (64 channels at 16x16, 128 at
 * 8x8, 256 at 4x4, 512 at 2x2), batch 64, one thread, training mode: the conv's forward and
 * backward (input and weight gradients) against ddl_batchnorm_forward_train and
 * ddl_batchnorm_backward on its output. Best of ROUNDS, random data. Prints one line a shape and
 * a last "bn_vs_conv: worst=P%" (the largest share; issue 45's target is <= 10%). Uses ddl.h. */
#define _POSIX_C_SOURCE 200809L
#include "ddl.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"

#define ROUNDS 5

static float *filled(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) {
        fprintf(stderr, "bn: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        p[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    return p;
}

/* one: conv c -> c, 3x3 pad 1 at s x s, then BatchNorm of its output; returns BN's share in %. */
static double one(int n, int c, int s)
{
    ddl_conv2d g = {.batch = n, .in_c = c, .in_h = s, .in_w = s, .out_c = c, .k_h = 3, .k_w = 3, .stride = 1, .pad = 1};
    size_t v = (size_t)n * c * s * s, wn = (size_t)c * c * 9;
    float *x = filled(v), *y = filled(v), *z = filled(v), *dy = filled(v), *dx = filled(v), *dz = filled(v);
    float *w = filled(wn), *dw = filled(wn), *ws = filled(ddl_conv2d_workspace(&g));
    float *gam = filled((size_t)c), *bet = filled((size_t)c), *rm = filled((size_t)c), *rv = filled((size_t)c);
    float *nm = filled((size_t)c), *nv = filled((size_t)c), *mr = filled(2 * (size_t)c), *dg = filled((size_t)c),
          *db = filled((size_t)c);
    for (int i = 0; i < c; i++)
        rv[i] = 1.0f, gam[i] = 1.0f;
    double conv = 1e30, bn = 1e30;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = bench_now();
        ddl_conv2d_forward(&g, x, w, NULL, y, ws);
        double t1 = bench_now();
        ddl_batchnorm_forward_train(n, c, s * s, 0.1f, 1e-5f, y, gam, bet, rm, rv, z, mr, nm, nv);
        ddl_batchnorm_backward(n, c, s * s, 1, y, gam, mr, dz, dy, dg, db);
        double t2 = bench_now();
        ddl_conv2d_backward(&g, x, w, dy, dx, dw, NULL, ws);
        double t3 = bench_now();
        if ((t1 - t0) + (t3 - t2) < conv)
            conv = (t1 - t0) + (t3 - t2);
        if (t2 - t1 < bn)
            bn = t2 - t1;
    }
    double share = 100.0 * bn / conv;
    printf("bn_vs_conv: channels=%d size=%dx%d batch=%d conv_ms=%.2f bn_ms=%.2f share=%.1f%%\n", c, s, s, n,
           conv * 1e3, bn * 1e3, share);
    free(x), free(y), free(z), free(dy), free(dx), free(dz), free(w), free(dw), free(ws);
    free(gam), free(bet), free(rm), free(rv), free(nm), free(nv), free(mr), free(dg), free(db);
    return share;
}

int main(void)
{
    ddl_set_threads(1);
    static const int shapes[4][2] = {{64, 16}, {128, 8}, {256, 4}, {512, 2}};
    double worst = 0.0;
    for (int i = 0; i < 4; i++) {
        double s = one(64, shapes[i][0], shapes[i][1]);
        worst = s > worst ? s : worst;
    }
    printf("bn_vs_conv: worst=%.1f%%\n", worst);
    return 0;
}
