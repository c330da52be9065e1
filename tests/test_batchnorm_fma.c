/* test_batchnorm_fma.c - BatchNorm's row sums on x86-64-v3 and later (src/core/batchnorm_fma.c)
 * bit for bit against a scalar reference of the order it documents: a row's floats in 8 lanes
 * (lane k: elements k, k + 8, ... in turn; squares and products added by one FMA each), the lanes
 * added as ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)), the floats past the last 8 one at a
 * time, and each row's sum added to a double in sample order. Rows of 1 to 1024 floats (no full
 * 8, one, a tail, the planes of ResNet-18 at 64x64), 1 to 65 samples (whole groups of the four
 * rows it takes at a time, and a last group short by one to three), rows a plane apart with other
 * channels between them. Values include -0.0. Elsewhere this test says skipped. */
#include "ddl.h"
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int ddl__bn_fma_ok(void);
void ddl__bn_moments_fma(int n, int s, size_t plane, const float *x0, float k0, double *s1, double *s2);
void ddl__bn_grads_fma(int n, int s, size_t plane, const float *x0, const float *dy0, float m, double *sd,
                       double *sdx);

static ddl_rng rng;

static float lanes8(const float a[8]) { return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7])); }

/* ref_row: the sums of u and of u v over a row, u = p - k (grads: p = dy, v = x - k) */
static void ref_row(const float *p, const float *x, int s, float k, int grads, float *ta, float *tb)
{
    float a[8] = {0}, b[8] = {0};
    int i = 0;
    for (; i + 8 <= s; i += 8)
        for (int l = 0; l < 8; l++) {
            float u = grads ? p[i + l] : p[i + l] - k, v = grads ? x[i + l] - k : u;
            a[l] = a[l] + u;
            b[l] = fmaf(u, v, b[l]);
        }
    float sa = lanes8(a), sb = lanes8(b);
    for (; i < s; i++) {
        float u = grads ? p[i] : p[i] - k, v = grads ? x[i] - k : u;
        sa = sa + u;
        sb = fmaf(u, v, sb);
    }
    *ta = sa, *tb = sb;
}

static float value(void) { return ddl_rng_below(&rng, 30) == 0 ? -0.0f : 4.0f * ddl_rng_uniform(&rng) - 1.0f; }

static void one(int n, int s)
{
    size_t plane = (size_t)3 * s + 5; /* other channels between a channel's rows */
    size_t len = (size_t)n * plane;
    float *x = malloc(len * sizeof *x), *dy = malloc(len * sizeof *dy);
    for (size_t i = 0; i < len; i++)
        x[i] = value(), dy[i] = value();
    const float *x0 = x + s, *dy0 = dy + s; /* the second channel */
    float k = x0[0], m = 1.25f;
    double r1 = 0.0, r2 = 0.0, g1 = 0.0, g2 = 0.0;
    for (int ni = 0; ni < n; ni++) {
        float a, b;
        ref_row(x0 + ni * plane, NULL, s, k, 0, &a, &b);
        r1 += a, r2 += b;
        ref_row(dy0 + ni * plane, x0 + ni * plane, s, m, 1, &a, &b);
        g1 += a, g2 += b;
    }
    double s1, s2, sd, sdx;
    ddl__bn_moments_fma(n, s, plane, x0, k, &s1, &s2);
    ddl__bn_grads_fma(n, s, plane, x0, dy0, m, &sd, &sdx);
    int ok = !memcmp(&s1, &r1, sizeof s1) && !memcmp(&s2, &r2, sizeof s2) && !memcmp(&sd, &g1, sizeof sd) &&
             !memcmp(&sdx, &g2, sizeof sdx);
    if (!ok)
        fprintf(stderr, "  %d rows of %d: sums %.17g %.17g %.17g %.17g, the reference's %.17g %.17g %.17g %.17g\n", n,
                s, s1, s2, sd, sdx, r1, r2, g1, g2);
    CHECK(ok);
    free(x), free(dy);
}

int main(void)
{
    ddl_rng_seed(&rng, 45);
    if (!ddl__bn_fma_ok()) {
        printf("skipped: not an x86-64-v3 CPU (AVX2 and FMA): BatchNorm's sums take batchnorm.c's loops\n");
        return TEST_END();
    }
    static const int sizes[] = {1, 4, 7, 8, 9, 16, 20, 64, 100, 256, 1024};
    static const int rows[] = {1, 2, 3, 4, 5, 8, 65};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
            one(rows[r], sizes[i]);
    return TEST_END();
}
