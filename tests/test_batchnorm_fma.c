/* test_batchnorm_fma.c - BatchNorm's row sums on x86-64-v3 and later (src/core/batchnorm_fma.c)
 * bit for bit against a scalar reference of the order it documents: a row's floats in 8 lanes
 * (lane k: elements k, k + 8, ... in turn; squares and products added by one FMA each), the lanes
 * added as ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)), the floats past the last 8 one at a
 * time, and each row's sum added to a double in sample order. Rows of 1 to 1024 floats (no full
 * 8, one, a tail, the planes of ResNet-18 at 64x64), 1 to 65 samples (whole groups of the four
 * rows it takes at a time, and a last group short by one to three), rows a plane apart with other
 * channels between them. Values include -0.0. And the layer whole: ddl_batchnorm_forward_train and
 * _backward on 37 channels (short rows go in blocks of channels, sample by sample) give, at 1 and
 * 2 threads, each channel's bits of the same call on that channel alone. Elsewhere this test says
 * skipped. */
#include "ddl.h"
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int ddl__bn_fma_ok(void);
void ddl__bn_sums_fma(int n, int s, size_t plane, const float *x0, const float *dy0, float k, double *s1, double *s2);

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
    ddl__bn_sums_fma(n, s, plane, x0, NULL, k, &s1, &s2);
    ddl__bn_sums_fma(n, s, plane, x0, dy0, m, &sd, &sdx);
    int ok = !memcmp(&s1, &r1, sizeof s1) && !memcmp(&s2, &r2, sizeof s2) && !memcmp(&sd, &g1, sizeof sd) &&
             !memcmp(&sdx, &g2, sizeof sdx);
    if (!ok)
        fprintf(stderr, "  %d rows of %d: sums %.17g %.17g %.17g %.17g, the reference's %.17g %.17g %.17g %.17g\n", n,
                s, s1, s2, sd, sdx, r1, r2, g1, g2);
    CHECK(ok);
    free(x), free(dy);
}

/* whole: 37 channels of rows of s floats at once, against each channel alone */
static void whole(int s, int threads)
{
    enum { N = 5, C = 37 };
    size_t len = (size_t)N * C * s;
    float *x = malloc(len * sizeof *x), *dy = malloc(len * sizeof *dy), *y = malloc(len * sizeof *y);
    float *dx = malloc(len * sizeof *dx), *xc = malloc((size_t)N * s * sizeof *xc), *dyc = malloc((size_t)N * s * 4);
    float *yc = malloc((size_t)N * s * sizeof *yc), *dxc = malloc((size_t)N * s * sizeof *dxc);
    float gamma[C], beta[C], rm[C], rv[C], mr[2 * C], nm[C], nv[C], dg[C] = {0}, db[C] = {0};
    for (size_t i = 0; i < len; i++)
        x[i] = value(), dy[i] = value();
    for (int c = 0; c < C; c++)
        gamma[c] = value(), beta[c] = value(), rm[c] = value(), rv[c] = 1.0f + ddl_rng_uniform(&rng);
    ddl_set_threads(threads);
    ddl_batchnorm_forward_train(N, C, s, 0.1f, 1e-5f, x, gamma, beta, rm, rv, y, mr, nm, nv);
    ddl_batchnorm_backward(N, C, s, 1, x, gamma, mr, dy, dx, dg, db);
    ddl_set_threads(1);
    int ok = 1;
    for (int c = 0; c < C; c++) {
        float mrc[2], nmc, nvc, dgc = 0.0f, dbc = 0.0f;
        for (int n = 0; n < N; n++) {
            memcpy(xc + (size_t)n * s, x + ((size_t)n * C + c) * s, (size_t)s * sizeof *xc);
            memcpy(dyc + (size_t)n * s, dy + ((size_t)n * C + c) * s, (size_t)s * sizeof *dyc);
        }
        ddl_batchnorm_forward_train(N, 1, s, 0.1f, 1e-5f, xc, gamma + c, beta + c, rm + c, rv + c, yc, mrc, &nmc, &nvc);
        ddl_batchnorm_backward(N, 1, s, 1, xc, gamma + c, mrc, dyc, dxc, &dgc, &dbc);
        ok &= !memcmp(mrc, mr + 2 * c, sizeof mrc) && !memcmp(&nmc, nm + c, 4) && !memcmp(&nvc, nv + c, 4) &&
              !memcmp(&dgc, dg + c, 4) && !memcmp(&dbc, db + c, 4);
        for (int n = 0; n < N; n++)
            ok &= !memcmp(yc + (size_t)n * s, y + ((size_t)n * C + c) * s, (size_t)s * 4) &&
                  !memcmp(dxc + (size_t)n * s, dx + ((size_t)n * C + c) * s, (size_t)s * 4);
    }
    if (!ok)
        fprintf(stderr, "  %d channels of rows of %d at %d thread(s): not each channel's bits alone\n", C, s, threads);
    CHECK(ok);
    free(x), free(dy), free(y), free(dx), free(xc), free(dyc), free(yc), free(dxc);
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
    static const int wholes[] = {1, 4, 16, 20, 64, 100, 256};
    for (size_t i = 0; i < sizeof wholes / sizeof wholes[0]; i++)
        for (int t = 1; t <= 2; t++)
            whole(wholes[i], t);
    return TEST_END();
}
