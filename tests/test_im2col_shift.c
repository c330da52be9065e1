/* test_im2col_shift.c - im2col and col2im by shifted loads (src/core/im2col_shift_avx512.c), for
 * stride-1 convolutions whose output rows are as wide as the image's: bit for bit against plain
 * loops over the geometry (not the kernel's masks). Geometries: ResNet's 3x3 padding 1 at 16x16,
 * 8x8, 4x4 and 2x2, and at 64x64 (the largest 3x3 plane it takes); planes whose position count is
 * no multiple of 16 and rows that do not divide 16 (5x7); 5x5 taps padding 2; dilation 2; no
 * vertical padding (fewer output rows than image rows); padding on the left only; 1x1. On one
 * group's channels of samples with more (cs > c), odd batches; values include -0.0 and NaNs
 * (col2im adds -0.0 onto +0 as the loops do). The column matrix's floats past the batch's columns
 * and the other group's channels must come out untouched; the image is allocated to its last
 * float. Elsewhere than AVX-512 this test says skipped. */
#include "ddl.h"
#include "check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct ddl__shift_geo {
    int h, w, oh;
    int kh, kw, pt, pl, dh, dw;
} ddl__shift_geo;
int ddl__im2col_shift_ok(const ddl__shift_geo *g);
void ddl__im2col_shift_avx512(const ddl__shift_geo *g, int c, int cs, int nb, const float *x, float *col, size_t ld);
void ddl__col2im_shift_avx512(const ddl__shift_geo *g, int c, int cs, int nb, const float *col, size_t ld, float *x);

static ddl_rng rng;

static float value(void)
{
    uint32_t nan = 0x7fc00005u;
    float v;
    switch (ddl_rng_below(&rng, 20)) {
    case 0: return -0.0f;
    case 1: memcpy(&v, &nan, sizeof v); return v;
    default: return 2.0f * ddl_rng_uniform(&rng) - 1.0f;
    }
}

/* pixel: the pixel tap (ki, kj) of position pos reads, or -1 for the padding */
static int pixel(const ddl__shift_geo *g, int ki, int kj, int pos)
{
    int iy = pos / g->w + ki * g->dh - g->pt, ix = pos % g->w + kj * g->dw - g->pl;
    return iy < 0 || iy >= g->h || ix < 0 || ix >= g->w ? -1 : iy * g->w + ix;
}

static void one(const ddl__shift_geo *g, int c, int cs, int nb)
{
    int hw = g->h * g->w, p = g->oh * g->w, taps = g->kh * g->kw;
    size_t ld = (size_t)nb * p + 5, nx = (size_t)nb * cs * hw, ncol = (size_t)c * taps * ld;
    float *x = malloc(nx * sizeof *x), *col = malloc(ncol * sizeof *col), *want = malloc(ncol * sizeof *want);
    float *dx = malloc(nx * sizeof *dx), *want_dx = malloc(nx * sizeof *dx), *plane = malloc((size_t)hw * sizeof *plane);
    for (size_t i = 0; i < nx; i++)
        x[i] = value();
    for (size_t i = 0; i < ncol; i++)
        col[i] = want[i] = 7.0f; /* the padding past the batch's columns: must stay */
    for (int ci = 0; ci < c; ci++)
        for (int t = 0; t < taps; t++)
            for (int n = 0; n < nb; n++)
                for (int pos = 0; pos < p; pos++) {
                    int pix = pixel(g, t / g->kw, t % g->kw, pos);
                    want[(size_t)(ci * taps + t) * ld + (size_t)n * p + pos] =
                        pix < 0 ? 0.0f : x[((size_t)n * cs + ci) * hw + pix];
                }
    ddl__im2col_shift_avx512(g, c, cs, nb, x, col, ld);
    int ok = memcmp(col, want, ncol * sizeof *col) == 0;
    if (!ok)
        fprintf(stderr, "  im2col %dx%d -> %dx%d, taps %dx%d pad %d,%d dil %d,%d, c %d of %d, batch %d: not the loops' bits\n",
                g->h, g->w, g->oh, g->w, g->kh, g->kw, g->pt, g->pl, g->dh, g->dw, c, cs, nb);
    CHECK(ok);
    for (size_t i = 0; i < ncol; i++)
        col[i] = value();
    for (size_t i = 0; i < nx; i++)
        dx[i] = want_dx[i] = 5.0f; /* the other group's channels: must stay */
    for (int n = 0; n < nb; n++)
        for (int ci = 0; ci < c; ci++) {
            memset(plane, 0, (size_t)hw * sizeof *plane);
            for (int t = 0; t < taps; t++)
                for (int pos = 0; pos < p; pos++) {
                    int pix = pixel(g, t / g->kw, t % g->kw, pos);
                    if (pix >= 0)
                        plane[pix] += col[(size_t)(ci * taps + t) * ld + (size_t)n * p + pos];
                }
            memcpy(want_dx + ((size_t)n * cs + ci) * hw, plane, (size_t)hw * sizeof *plane);
        }
    ddl__col2im_shift_avx512(g, c, cs, nb, col, ld, dx);
    ok = memcmp(dx, want_dx, nx * sizeof *dx) == 0;
    if (!ok)
        fprintf(stderr, "  col2im %dx%d -> %dx%d, taps %dx%d pad %d,%d dil %d,%d, c %d of %d, batch %d: not the loops' bits\n",
                g->h, g->w, g->oh, g->w, g->kh, g->kw, g->pt, g->pl, g->dh, g->dw, c, cs, nb);
    CHECK(ok);
    free(x), free(col), free(want), free(dx), free(want_dx), free(plane);
}

int main(void)
{
    ddl_rng_seed(&rng, 48);
    static const ddl__shift_geo resnet = {16, 16, 16, 3, 3, 1, 1, 1, 1};
    if (!ddl__im2col_shift_ok(&resnet)) {
        printf("skipped: no AVX-512 (im2col and col2im by shifted loads)\n");
        return TEST_END();
    }
    /* h, w, oh, kh, kw, pt, pl, dh, dw */
    static const ddl__shift_geo geos[] = {
        {16, 16, 16, 3, 3, 1, 1, 1, 1}, {8, 8, 8, 3, 3, 1, 1, 1, 1},  {4, 4, 4, 3, 3, 1, 1, 1, 1},
        {2, 2, 2, 3, 3, 1, 1, 1, 1},    {5, 7, 5, 3, 3, 1, 1, 1, 1},  {9, 9, 9, 5, 5, 2, 2, 1, 1},
        {8, 8, 8, 3, 3, 2, 2, 2, 2},    {6, 10, 4, 3, 3, 0, 1, 1, 1}, {3, 20, 3, 1, 3, 0, 2, 1, 1},
        {1, 1, 1, 1, 1, 0, 0, 1, 1},    {64, 64, 64, 3, 3, 1, 1, 1, 1}};
    static const int batches[] = {1, 3, 4};
    for (size_t i = 0; i < sizeof geos / sizeof geos[0]; i++) {
        CHECK(ddl__im2col_shift_ok(&geos[i]));
        for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++)
            one(&geos[i], 2, 3, batches[b]);
    }
    /* too many masks for the stack (25 taps x 256 vectors), or too many taps: the loops keep them */
    static const ddl__shift_geo big = {64, 64, 64, 5, 5, 2, 2, 1, 1}, wide = {9, 9, 9, 9, 9, 4, 4, 1, 1};
    CHECK(!ddl__im2col_shift_ok(&big));
    CHECK(!ddl__im2col_shift_ok(&wide));
    return TEST_END();
}
