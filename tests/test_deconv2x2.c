/* test_deconv2x2.c - the direct 2x2 stride-2 transposed convolution (deconv2x2_avx512.c): y, dx,
 * dw and db are, bit for bit, those of conv.c's column matrix and products (the path it replaced,
 * run here with the kernels turned off), on geometries chosen to reach its edges: U-Net's three;
 * input and output channel counts not multiples of 4 (the tiles' spare rows); rows of 8 and 24
 * (the 16 positions of a step in two rows); a batch in several chunks, their last short; a chunk
 * short enough that the product summed dw in order, not in lanes, with 16 (oc, a, b) columns and
 * with fewer; 256 input channels and 64 output channels (the most it takes). At 1, 2 and 3
 * threads; dx alone and dw alone; dw and db added to, not written; a bias of -0 and zeros in x.
 * In a bfloat16 pass the kernels give the same float32 bits (they are faster than its product).
 * Also: geometries past the kernels' (65 output channels, padding, rows of 12, a 3x3 kernel)
 * stay conv.c's. Skipped where the CPU has no AVX-512. */
/* ddl-test: beside (computes, bounds no time) */
#include "ddl.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

int ddl__deconv2x2_ok(const ddl_conv2d *g);
int ddl__deconv2x2_enable(int on);
int ddl__set_precision(int precision);

static float rnd(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

typedef struct pass {
    float *y, *dx, *dw, *db;
} pass;

/* run: the forward and backward passes of g (dx, dw: which the backward computes), at threads;
 * dw and db start from the values of seed 7, as an accumulated gradient. */
static pass run(const ddl_conv2d *g, const float *x, const float *w, const float *b, const float *dy, int want_dx,
                int want_dw, int threads)
{
    size_t nx = (size_t)g->batch * g->in_c * g->in_h * g->in_w, ny = nx / g->in_c * g->out_c * 4;
    size_t nw = (size_t)g->in_c * g->out_c * 4;
    pass p = {malloc(ny * 4), calloc(nx, 4), malloc(nw * 4), malloc((size_t)g->out_c * 4)};
    unsigned s = 7;
    for (size_t i = 0; i < nw; i++)
        p.dw[i] = rnd(&s);
    for (int i = 0; i < g->out_c; i++)
        p.db[i] = rnd(&s);
    float *ws = calloc(ddl_deconv2d_workspace(g) + 16, 4);
    ddl_set_threads(threads);
    ddl_deconv2d_forward(g, x, w, b, p.y, ws);
    ddl_deconv2d_backward(g, x, w, dy, want_dx ? p.dx : NULL, want_dw ? p.dw : NULL, p.db, ws);
    ddl_set_threads(1);
    free(ws);
    return p;
}

static void drop(pass p) { free(p.y), free(p.dx), free(p.dw), free(p.db); }

static int same(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

/* one: geometry (batch, in_c, out_c, h, w): the direct passes against conv.c's */
static void one(int batch, int in_c, int out_c, int h, int w)
{
    ddl_conv2d g = {.batch = batch, .in_c = in_c, .in_h = h, .in_w = w, .out_c = out_c, .k_h = 2, .k_w = 2,
                    .stride = 2, .pad = 0};
    size_t nx = (size_t)batch * in_c * h * w, ny = (size_t)batch * out_c * 4 * h * w, nw = (size_t)in_c * out_c * 4;
    float *x = malloc(nx * 4), *w4 = malloc(nw * 4), *b = malloc((size_t)out_c * 4), *dy = malloc(ny * 4);
    unsigned s = (unsigned)(batch * 131 + in_c * 17 + out_c * 5 + h + w);
    for (size_t i = 0; i < nx; i++)
        x[i] = i % 11 == 3 ? 0.0f : rnd(&s);
    for (size_t i = 0; i < nw; i++)
        w4[i] = rnd(&s);
    for (int i = 0; i < out_c; i++)
        b[i] = i == 0 ? -0.0f : rnd(&s);
    for (size_t i = 0; i < ny; i++)
        dy[i] = rnd(&s);
    CHECK(ddl__deconv2x2_ok(&g));
    int was = ddl__deconv2x2_enable(0);
    CHECK(!ddl__deconv2x2_ok(&g));
    pass ref = run(&g, x, w4, b, dy, 1, 1, 1);
    ddl__deconv2x2_enable(was);
    int good = 1;
    for (int threads = 1; threads <= 3; threads++) {
        pass p = run(&g, x, w4, b, dy, 1, 1, threads);
        int ok = same(p.y, ref.y, ny) && same(p.dx, ref.dx, nx) && same(p.dw, ref.dw, nw) && same(p.db, ref.db, out_c);
        CHECK(ok);
        good &= ok;
        drop(p);
    }
    pass only_dx = run(&g, x, w4, b, dy, 1, 0, 2), only_dw = run(&g, x, w4, b, dy, 0, 1, 2);
    CHECK(same(only_dx.dx, ref.dx, nx));
    CHECK(same(only_dw.dw, ref.dw, nw));
    int bf = ddl__set_precision(DDL_PRECISION_BF16);
    pass p16 = run(&g, x, w4, b, dy, 1, 1, 2);
    ddl__set_precision(bf);
    CHECK(same(p16.y, ref.y, ny) && same(p16.dx, ref.dx, nx) && same(p16.dw, ref.dw, nw));
    printf("  %2d x %3d -> %2d channels, %2dx%-2d: %s\n", batch, in_c, out_c, h, w,
           good ? "the column matrix's bits at 1, 2 and 3 threads" : "NOT the column matrix's bits");
    drop(only_dx), drop(only_dw), drop(p16), drop(ref);
    free(x), free(w4), free(b), free(dy);
}

int main(void)
{
    ddl_conv2d probe = {.batch = 1, .in_c = 2, .in_h = 2, .in_w = 8, .out_c = 1, .k_h = 2, .k_w = 2, .stride = 2};
    if (!ddl__deconv2x2_ok(&probe)) {
        printf("skipped: the direct transposed convolution needs AVX-512\n");
        return TEST_END();
    }
    one(32, 16, 8, 32, 32);  /* U-Net's up0: chunks of 5 samples, the last of 2 */
    one(32, 32, 16, 16, 16); /* up1 */
    one(32, 64, 32, 8, 8);   /* up2: a step's 16 positions in two rows */
    one(3, 5, 3, 4, 24);     /* spare input and output channels; rows of 24 (a step across rows) */
    one(3, 2, 4, 2, 8);      /* 48 positions a chunk, 16 columns: dw summed in order */
    one(2, 3, 2, 2, 8);      /* 32 positions, 8 columns: dw by lanes however short */
    one(2, 256, 64, 2, 8);   /* the most channels the kernels take */
    one(1, 7, 1, 16, 40);    /* one sample, one output channel */
    /* past the kernels: conv.c's path */
    ddl_conv2d wide = {.batch = 1, .in_c = 4, .in_h = 4, .in_w = 8, .out_c = 65, .k_h = 2, .k_w = 2, .stride = 2};
    ddl_conv2d padded = {.batch = 1, .in_c = 4, .in_h = 4, .in_w = 8, .out_c = 4, .k_h = 2, .k_w = 2, .stride = 2,
                         .pad = 1};
    ddl_conv2d rows = {.batch = 1, .in_c = 4, .in_h = 4, .in_w = 12, .out_c = 4, .k_h = 2, .k_w = 2, .stride = 2};
    ddl_conv2d k3 = {.batch = 1, .in_c = 4, .in_h = 4, .in_w = 8, .out_c = 4, .k_h = 3, .k_w = 3, .stride = 2};
    CHECK(!ddl__deconv2x2_ok(&wide) && !ddl__deconv2x2_ok(&padded) && !ddl__deconv2x2_ok(&rows) &&
          !ddl__deconv2x2_ok(&k3));
    return TEST_END();
}
