/* test_conv_bf16_amx.c - the direct bfloat16 convolution on AMX tiles (conv_bf16_amx.c), run
 * over emulated tiles (amx_tiles.h, Intel's SDM) on any CPU with AVX512-BF16: in a bfloat16 pass
 * ddl_conv2d_forward and _backward give the AMX reference's bits (conv_bf16.c's AMX order: tap
 * by tap, runs of up to 16 channel pairs, each run's even and odd sums added, then added to the
 * output's) for y and dx, and for dw (per tap, input channels x output channels += 16 position
 * pairs of the input planes x dy transposed; passes of samples, blocks of positions); on geometries that reach the loop's edges: 1 to 3
 * input channels (a run of 1 or 2 pairs, an odd channel's missing half), 17 and 20 pairs (two
 * runs of 9 and of 10: the zero plane after the 17th), 32 pairs (two full runs), output channels
 * not a multiple of 16 (a tile's spare rows; in dw, blocks of 10 and 11 channels), odd planes (the last 48 positions' spare ones), 5x5
 * with pad 0 to 4, dw's positions in blocks and its samples in passes; at 1 and 2 threads (the same bits). Also: the order is AMX's, not the
 * AVX512-BF16 kernel's (their bits differ where a sum has more than one run or tap).
 * On an AMX CPU, also the kernels on its tiles against their emulation (ddl__cb_amx_check, which
 * the path choice ran); elsewhere that part says "skipped: no AMX". Skipped where the CPU has no
 * AVX512-BF16 (the conversions the driver needs). */
/* ddl-test: beside (computes, bounds no time) */
#include "ddl.h"
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bf16_conv_pass.h"

void ddl__conv2d_bf16_amx_emulate(int on);
int ddl__cb_amx_check(char *note, size_t note_bytes);

static size_t differ(const float *a, const float *b, size_t n)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++)
        d += memcmp(a + i, b + i, sizeof *a) != 0;
    return d;
}

static float *fill(size_t n, unsigned *s, float scale)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = scale * rnd(s);
    return v;
}

static void one(ddl_conv2d g, int threads)
{
    int oh = ddl_conv2d_out_h(&g), ow = ddl_conv2d_out_w(&g);
    size_t nx = (size_t)g.batch * g.in_c * g.in_h * g.in_w, ny = (size_t)g.batch * g.out_c * oh * ow;
    size_t nw = (size_t)g.out_c * g.in_c * g.k_h * g.k_w;
    unsigned s = 5u + (unsigned)g.in_c * 13u + (unsigned)g.out_c;
    float *x = fill(nx, &s, 1.0f), *w = fill(nw, &s, 1.0f), *b = fill((size_t)g.out_c, &s, 1.0f);
    float *dy = fill(ny, &s, 1.0f), *dw = fill(nw, &s, 0.25f), *rdw = malloc(nw * 4), *db = calloc((size_t)g.out_c, 4);
    float *y = malloc(ny * 4), *dx = malloc(nx * 4), *ry = malloc(ny * 4), *rdx = malloc(nx * 4);
    float *vy = malloc(ny * 4), *vdx = malloc(nx * 4), *vdw = malloc(nw * 4), *dw0 = malloc(nw * 4);
    memcpy(rdw, dw, nw * 4);
    memcpy(dw0, dw, nw * 4);
    ddl__conv2d_bf16_amx_emulate(1);
    CHECK(ddl__conv2d_bf16_fits(&g));
    float *ws = malloc((ddl_conv2d_workspace(&g) + 1) * 4);
    bf16_pass(&g, threads, x, w, b, dy, y, dx, dw, db, ws, ry, rdx, rdw);
    ddl__conv2d_bf16_amx_emulate(0);
    ddl__conv2d_bf16_ref_forward(&g, x, w, b, vy); /* the AVX512-BF16 order */
    ddl__conv2d_bf16_ref_dx(&g, w, dy, vdx);
    memcpy(vdw, dw0, nw * 4);
    ddl__conv2d_bf16_ref_dw(&g, x, dy, vdw);
    size_t dy_diff = differ(y, ry, ny), dx_diff = differ(dx, rdx, nx), dw_diff = differ(dw, rdw, nw);
    size_t avx = differ(ry, vy, ny) + differ(rdx, vdx, nx) + differ(rdw, vdw, nw);
    printf("batch %d, %d -> %d, %dx%d, %dx%d pad %d, %d thread(s): y %s, dx %s, dw %s (emulated AMX against its "
           "reference); %zu of %zu values not the AVX512-BF16 order's\n",
           g.batch, g.in_c, g.out_c, g.in_h, g.in_w, g.k_h, g.k_w, g.pad, threads, dy_diff ? "DIFFERENT" : "same",
           dx_diff ? "DIFFERENT" : "same", dw_diff ? "DIFFERENT" : "same", avx, ny + nx + nw);
    CHECK(dy_diff == 0);
    CHECK(dx_diff == 0);
    CHECK(dw_diff == 0);
    if (g.in_c > 2 || g.k_h > 3) /* more than one run or tap of pairs: the orders part */
        CHECK(avx > 0);
    free(x), free(w), free(b), free(dy), free(dw), free(rdw), free(db), free(y), free(dx), free(ry), free(rdx);
    free(vy), free(vdx), free(vdw), free(dw0), free(ws);
}

int main(void)
{
    ddl_conv2d probe = {.batch = 1, .in_c = 1, .in_h = 8, .in_w = 8, .out_c = 1, .k_h = 3, .k_w = 3, .stride = 1, .pad = 1};
    ddl__conv2d_bf16_amx_emulate(1);
    int fits = ddl__conv2d_bf16_fits(&probe);
    ddl__conv2d_bf16_amx_emulate(0);
    if (!fits) {
        printf("skipped: no AVX512-BF16 (the AMX kernels' conversions; this CPU's bfloat16 path is %s)\n",
               ddl_cpu_bf16());
        return TEST_END();
    }
    static const int geo[][7] = {
        /* batch, in_c, out_c, h, w, k, pad */
        {2, 3, 16, 13, 11, 3, 1},  /* the cnn's first layer: 2 pairs, one half empty */
        {1, 1, 5, 9, 7, 3, 1},     /* one channel, 5 outputs: a tile's 11 spare rows */
        {2, 16, 16, 12, 12, 3, 1}, /* the cnn's shape: one run of 8 pairs */
        {1, 34, 20, 12, 13, 3, 1}, /* 17 pairs: two runs of 9 (a zero plane); 20 outputs: two blocks */
        {1, 33, 8, 12, 12, 3, 1},  /* 17 pairs, the last half empty */
        {1, 40, 24, 12, 10, 5, 2}, /* 20 pairs in runs of 10; 5x5 */
        {2, 64, 33, 8, 8, 3, 1},   /* 32 pairs: two full runs; 33 outputs: three blocks */
        {1, 2, 3, 9, 9, 5, 4},     /* pad k - 1 */
        {2, 3, 6, 11, 10, 3, 0},   /* no padding */
        {3, 3, 5, 40, 41, 3, 1},   /* dw's positions in two blocks */
        {4, 16, 16, 64, 64, 3, 1}, /* the cnn's 64x64 layer: dw in passes of 3 samples */
    };
    for (size_t i = 0; i < sizeof geo / sizeof geo[0]; i++) {
        ddl_conv2d g = {.batch = geo[i][0], .in_c = geo[i][1], .out_c = geo[i][2], .in_h = geo[i][3], .in_w = geo[i][4],
                        .k_h = geo[i][5], .k_w = geo[i][5], .stride = 1, .pad = geo[i][6]};
        one(g, 1);
        if (i == 2 || i == 7 || i == 11)
            one(g, 2);
    }
    if (!strcmp(ddl_cpu_bf16(), "AMX")) { /* the path was chosen: its check passed; run it again */
        char note[200] = "";
        int rc = ddl__cb_amx_check(note, sizeof note);
        printf("the CPU's tiles against their emulation, forward and weight gradient: %s\n", rc ? note : "the same");
        CHECK(rc == DDL_OK);
    } else {
        printf("skipped: no AMX (the convolution's kernels on the CPU's tiles against their emulation)\n");
    }
    return TEST_END();
}
