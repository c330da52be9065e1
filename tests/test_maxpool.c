/* test_maxpool.c - the 2x2 stride-2 max-pool, forward and backward, bit for bit against a plain
 * loop and a plain scatter (the AVX-512 rows of src/core/maxpool_avx512.c where the CPU has them,
 * the AVX2 rows of maxpool_avx2.c where it has AVX2 alone, else ops.c's scalar loops): output,
 * argmax and dx, for values drawn from a few with ties, both zeros, both infinities and NaNs of
 * two payloads; every row width from 2 to 70 (the 16- and 8-window steps and every tail, and the
 * short rows left to the scalar loops) and odd heights and
 * widths (the last row or column in no window). And the backward with the ReLU before the pool
 * folded in (ddl__maxpool2d_backward_relu, the layer graph's conv, ReLU, max-pool): the plain
 * backward then ddl_relu_backward, bit for bit, for the 2x2 window and for overlapping, padded and
 * ceil-mode windows (pool2d.c's loop). Finite-difference checks of the op are in test_ops.c. */
#include "ddl.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

void ddl__maxpool2d_backward_relu(const ddl_pool2d *p, int n, int c, int h, int w, const float *dy,
                                  const int32_t *argmax, const float *y, float *dx);

static ddl_rng rng;

static float *alloc_f(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof *p);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

/* one width w (height 4 + w % 3): forward and backward against the plain loop and scatter */
static void pool2_exact(int w)
{
    uint32_t nan_a = 0x7fc00001u, nan_b = 0xffc00002u;
    float vals[10] = {-INFINITY, -1.0f, -0.0f, 0.0f, 1.0f, 2.0f, 2.0f, INFINITY, 0.0f, 0.0f};
    memcpy(&vals[8], &nan_a, sizeof nan_a);
    memcpy(&vals[9], &nan_b, sizeof nan_b);
    int h = 4 + w % 3, n = 2, c = 3, oh = h / 2, ow = w / 2;
    size_t nx = (size_t)n * c * h * w, ny = (size_t)n * c * oh * ow;
    float *x = alloc_f(nx), *y = alloc_f(ny), *want = alloc_f(ny);
    int32_t *arg = calloc(ny, sizeof *arg), *want_arg = calloc(ny, sizeof *want_arg);
    for (size_t i = 0; i < nx; i++) /* NaNs rare enough that most windows hold numbers */
        x[i] = vals[ddl_rng_below(&rng, 100) < 4 ? 8 + ddl_rng_below(&rng, 2) : ddl_rng_below(&rng, 8)];
    for (int p = 0; p < n * c; p++)
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                const float *img = x + (size_t)p * h * w;
                int best = 2 * oy * w + 2 * ox, at[3] = {best + 1, best + w, best + w + 1};
                float bv = img[best];
                for (int q = 0; q < 3; q++)
                    if (img[at[q]] > bv || (isnan(img[at[q]]) && !isnan(bv)))
                        bv = img[at[q]], best = at[q];
                want[((size_t)p * oh + oy) * ow + ox] = bv;
                want_arg[((size_t)p * oh + oy) * ow + ox] = best;
            }
    ddl_maxpool_forward(n, c, h, w, 2, 2, x, y, arg);
    int same = memcmp(y, want, ny * sizeof *y) == 0 && memcmp(arg, want_arg, ny * sizeof *arg) == 0;
    if (!same)
        fprintf(stderr, "  maxpool 2x2 h %d w %d: not the plain loop's output or argmax\n", h, w);
    CHECK(same);
    /* backward: dx written whole (over NaN), the plain scatter's bits: zeros, then += dy at
     * each argmax (so a -0.0 in dy lands as +0.0) */
    float *dy = alloc_f(ny), *dx = alloc_f(nx), *want_dx = alloc_f(nx);
    for (size_t i = 0; i < ny; i++)
        dy[i] = 2.0f * ddl_rng_uniform(&rng) - 1.0f;
    for (size_t i = 0; i < ny; i += 7)
        dy[i] = -0.0f;
    for (size_t i = 0; i < nx; i++)
        dx[i] = NAN, want_dx[i] = 0.0f;
    for (int p = 0; p < n * c; p++)
        for (size_t o = 0; o < (size_t)oh * ow; o++)
            want_dx[(size_t)p * h * w + (size_t)want_arg[(size_t)p * oh * ow + o]] +=
                dy[(size_t)p * oh * ow + o];
    ddl_maxpool_backward(n, c, h, w, 2, 2, dy, want_arg, dx);
    same = memcmp(dx, want_dx, nx * sizeof *dx) == 0;
    if (!same)
        fprintf(stderr, "  maxpool 2x2 h %d w %d: backward is not the plain scatter's\n", h, w);
    CHECK(same);
    free(x), free(y), free(want), free(arg), free(want_arg), free(dy), free(dx), free(want_dx);
}

/* one value of a ReLU's input or output: ties, both zeros, negatives, a NaN now and then */
static float pick_value(void)
{
    static const float vals[8] = {-2.0f, -1.0f, -0.0f, 0.0f, 0.5f, 1.0f, 1.0f, 3.0f};
    return ddl_rng_below(&rng, 100) < 3 ? NAN : vals[ddl_rng_below(&rng, 8)];
}

/* the backward with the ReLU folded in, against the plain backward then ddl_relu_backward on the
 * pool's input x (the ReLU's output): dx over NaN, so every float is checked as written */
static void relu_folded(const char *what, const ddl_pool2d *p, int h, int w)
{
    int n = 2, c = 3, oh = ddl_pool2d_out(p, 0, h), ow = ddl_pool2d_out(p, 1, w);
    CHECK(ddl_pool2d_ok(p, 0, h, w) && oh > 0 && ow > 0);
    size_t nx = (size_t)n * c * h * w, ny = (size_t)n * c * oh * ow;
    float *x = alloc_f(nx), *y = alloc_f(ny), *dy = alloc_f(ny), *dx = alloc_f(nx), *want = alloc_f(nx);
    int32_t *arg = calloc(ny, sizeof *arg);
    for (size_t i = 0; i < nx; i++)
        x[i] = pick_value();
    for (size_t i = 0; i < ny; i++)
        dy[i] = i % 7 ? 2.0f * ddl_rng_uniform(&rng) - 1.0f : -0.0f;
    ddl_maxpool2d_forward(p, n, c, h, w, x, y, arg);
    ddl_maxpool2d_backward(p, n, c, h, w, dy, arg, want);
    ddl_relu_backward(nx, x, want, want);
    for (size_t i = 0; i < nx; i++)
        dx[i] = NAN;
    ddl__maxpool2d_backward_relu(p, n, c, h, w, dy, arg, y, dx);
    int same = memcmp(dx, want, nx * sizeof *dx) == 0;
    if (!same)
        fprintf(stderr, "  %s, %dx%d: the ReLU folded into the backward is not the backward then the ReLU's\n", what,
                h, w);
    CHECK(same);
    free(x), free(y), free(dy), free(dx), free(want), free(arg);
}

int main(void)
{
    ddl_rng_seed(&rng, 77);
    for (int w = 2; w <= 70; w++)
        pool2_exact(w);
    const ddl_pool2d two = {2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0};
    const ddl_pool2d overlap = {3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0}; /* ResNet's stem */
    const ddl_pool2d ceil = {3, 2, 2, 1, 1, 0, 0, 1, 0, 0, 1, 0};
    const ddl_pool2d dilated = {3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 0, 0};
    for (int w = 4; w <= 40; w += 3) { /* 2x2: short rows (the scalar loop) and the AVX-512 rows */
        relu_folded("2x2 stride 2", &two, 6 + w % 2, w);
        relu_folded("3x3 stride 2 pad 1", &overlap, 9, w);
    }
    relu_folded("3x2 strides 2,1 ceil", &ceil, 9, 11);
    relu_folded("3x3 dilation 2 pad 2", &dilated, 8, 10);
    return TEST_END();
}
