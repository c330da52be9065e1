/* test_im2col_avx512.c - conv.c's im2col and col2im on AVX-512 (src/core/im2col_avx512.c).
 * Stride-2 rows: every length from 1 to 70 (the 16-output steps and every tail), the source
 * exactly 2 n - 1 floats long (ASan sees a read past it), the floats after the row untouched.
 * Planes that fit a vector: bit for bit against plain loops over the same map (conv.c's
 * small_map: tap t, position pos -> the pixel, or hw for the padding): ResNet-18's 2x2 and 4x4
 * planes with 3x3 taps and padding 1, 1x1 planes and taps, a 3x3 plane with 2x2 taps, on one
 * group's channels of samples with more (cs > c), for batches that fill the vectors' samples and
 * ones that leave the last vector part empty. Values include -0.0 and NaNs; col2im adds -0.0 onto
 * +0 as the loop does. The column matrix's padding past the batch's columns and the other group's
 * channels must come out untouched. The AVX-512 code is reached only where ddl__im2col_tiny_ok
 * says so: elsewhere this test says skipped. */
#include "ddl.h"
#include "check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int ddl__im2col_s2_ok(void);
void ddl__im2col_s2_row(const float *src, int n, float *dst);
int ddl__im2col_tiny_ok(int hw, int p, int taps);
void ddl__im2col_tiny_avx512(const int32_t *src, int taps, int hw, int p, int c, int cs, int nb, const float *x,
                             float *col, size_t ld);
void ddl__col2im_tiny_avx512(const int32_t *src, int taps, int hw, int p, int c, int cs, int nb, const float *col,
                             size_t ld, float *x);

static ddl_rng rng;

/* one geometry: a (h, w) plane, k x k taps, stride s, padding pad */
typedef struct geo {
    int h, w, k, s, pad;
} geo;

static float value(void)
{
    uint32_t nan = 0x7fc00003u;
    float v;
    switch (ddl_rng_below(&rng, 20)) {
    case 0: return -0.0f;
    case 1: memcpy(&v, &nan, sizeof v); return v;
    default: return 2.0f * ddl_rng_uniform(&rng) - 1.0f;
    }
}

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

static void one(geo g, int c, int cs, int nb)
{
    int oh = (g.h + 2 * g.pad - g.k) / g.s + 1, ow = (g.w + 2 * g.pad - g.k) / g.s + 1;
    int hw = g.h * g.w, p = oh * ow, taps = g.k * g.k;
    int32_t src[16 * 64];
    for (int t = 0; t < taps; t++)
        for (int pos = 0; pos < p; pos++) {
            int iy = pos / ow * g.s - g.pad + t / g.k, ix = pos % ow * g.s - g.pad + t % g.k;
            src[t * p + pos] = iy < 0 || iy >= g.h || ix < 0 || ix >= g.w ? hw : iy * g.w + ix;
        }
    size_t ld = (size_t)nb * p + 5, nx = (size_t)nb * cs * hw, ncol = (size_t)c * taps * ld;
    float *x = malloc(nx * sizeof *x), *col = malloc(ncol * sizeof *col), *want = malloc(ncol * sizeof *want);
    float *dx = malloc(nx * sizeof *dx), *want_dx = malloc(nx * sizeof *dx);
    for (size_t i = 0; i < nx; i++)
        x[i] = value();
    for (size_t i = 0; i < ncol; i++)
        col[i] = want[i] = 7.0f; /* the padding: must stay */
    /* im2col: x's first c channels unfolded */
    for (int ci = 0; ci < c; ci++)
        for (int t = 0; t < taps; t++)
            for (int n = 0; n < nb; n++)
                for (int pos = 0; pos < p; pos++) {
                    int pix = src[t * p + pos];
                    want[(size_t)(ci * taps + t) * ld + (size_t)n * p + pos] =
                        pix == hw ? 0.0f : x[((size_t)n * cs + ci) * hw + pix];
                }
    ddl__im2col_tiny_avx512(src, taps, hw, p, c, cs, nb, x, col, ld);
    int ok = same_bits(col, want, ncol);
    if (!ok)
        fprintf(stderr, "  im2col %dx%d k%d s%d pad %d, c %d of %d, batch %d: not the loop's bits\n", g.h, g.w, g.k,
                g.s, g.pad, c, cs, nb);
    CHECK(ok);
    /* col2im: each pixel from +0, its entries added tap by tap; the other channels untouched */
    for (size_t i = 0; i < ncol; i++)
        col[i] = value();
    for (size_t i = 0; i < nx; i++)
        dx[i] = want_dx[i] = 5.0f;
    for (int n = 0; n < nb; n++)
        for (int ci = 0; ci < c; ci++) {
            float plane[17] = {0};
            for (int t = 0; t < taps; t++)
                for (int pos = 0; pos < p; pos++)
                    plane[src[t * p + pos]] += col[(size_t)(ci * taps + t) * ld + (size_t)n * p + pos];
            memcpy(want_dx + ((size_t)n * cs + ci) * hw, plane, (size_t)hw * sizeof *plane);
        }
    ddl__col2im_tiny_avx512(src, taps, hw, p, c, cs, nb, col, ld, dx);
    ok = same_bits(dx, want_dx, nx);
    if (!ok)
        fprintf(stderr, "  col2im %dx%d k%d s%d pad %d, c %d of %d, batch %d: not the loop's bits\n", g.h, g.w, g.k,
                g.s, g.pad, c, cs, nb);
    CHECK(ok);
    free(x), free(col), free(want), free(dx), free(want_dx);
}

static void stride2_rows(void)
{
    for (int n = 1; n <= 70; n++) {
        float *src = malloc((size_t)(2 * n - 1) * sizeof *src), dst[80];
        for (int i = 0; i < 2 * n - 1; i++)
            src[i] = value();
        for (int i = 0; i < 80; i++)
            dst[i] = 9.0f;
        ddl__im2col_s2_row(src, n, dst);
        int ok = 1;
        for (int i = 0; i < n; i++)
            ok &= memcmp(&dst[i], &src[2 * i], sizeof *dst) == 0;
        for (int i = n; i < 80; i++)
            ok &= dst[i] == 9.0f;
        if (!ok)
            fprintf(stderr, "  stride-2 row of %d: not every other float, or a float past it written\n", n);
        CHECK(ok);
        free(src);
    }
}

int main(void)
{
    ddl_rng_seed(&rng, 47);
    if (ddl__im2col_s2_ok())
        stride2_rows();
    else
        printf("skipped: no AVX-512 (the stride-2 rows)\n");
    /* which planes take the vector path: the output at least as wide as the input, both <= 16 */
    int stride2 = ddl__im2col_tiny_ok(16, 4, 9), big = ddl__im2col_tiny_ok(64, 64, 9);
    CHECK(!stride2 && !big);
    if (!ddl__im2col_tiny_ok(4, 4, 9)) {
        printf("skipped: no AVX-512 (the vector im2col and col2im of tiny planes)\n");
        return TEST_END();
    }
    static const geo geos[] = {{2, 2, 3, 1, 1}, {4, 4, 3, 1, 1}, {1, 1, 1, 1, 0}, {2, 2, 1, 1, 0},
                               {3, 3, 2, 1, 1}, {1, 1, 3, 1, 1}, {3, 5, 3, 1, 1}};
    static const int batches[] = {1, 3, 4, 5, 17};
    for (size_t g = 0; g < sizeof geos / sizeof geos[0]; g++) {
        int hw = geos[g].h * geos[g].w;
        int oh = (geos[g].h + 2 * geos[g].pad - geos[g].k) / geos[g].s + 1;
        int ow = (geos[g].w + 2 * geos[g].pad - geos[g].k) / geos[g].s + 1;
        CHECK(ddl__im2col_tiny_ok(hw, oh * ow, geos[g].k * geos[g].k));
        for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++)
            one(geos[g], 3, 5, batches[b]);
    }
    return TEST_END();
}
