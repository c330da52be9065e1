/* test_pointwise.c - the direct kernels of the layers whose products run over channels alone: the
 * 2x2 stride-2 transposed convolution (deconv2x2_avx512.c) and the 1x1 convolution
 * (conv1x1_avx512.c). y, dx, dw and db are, bit for bit, those of conv.c's column matrix and
 * products (the path they replaced, run here with the kernels turned off).
 * Transposed, on geometries chosen to reach its edges: U-Net's three;
 * input and output channel counts not multiples of 4 (the tiles' spare rows); rows of 8 and 24
 * (the 16 positions of a step in two rows); a batch in several chunks, their last short; a chunk
 * short enough that the product summed dw in order, not in lanes, with 16 (oc, a, b) columns and
 * with fewer; 256 input channels and 64 output channels (the most the forward takes), 32 and 32
 * (the most the backward takes). At 1, 2 and 3 threads; dx alone and dw alone; dw and db added
 * to, not written; a bias of -0 and zeros in x. In a bfloat16 pass the kernels give the same
 * float32 bits where they take it (they are faster than its product).
 * 1x1: U-Net's head (8 -> 11 channels, 64x64); channel counts not multiples of 4; planes of 16
 * and 48 positions (a tile's last vectors); a chunk short enough for dw in order; 256 input
 * channels, and 64 x 64 (the most the kernels take); several chunks; no bias. In a bfloat16 pass
 * the small ones (at most 512 weights) keep float32's bits, the others take bfloat16's product.
 * Also: geometries past the kernels' stay conv.c's. Skipped where the CPU has no AVX-512. */
/* ddl-test: beside (computes, bounds no time) */
#include "ddl.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

int ddl__deconv2x2_ok(const ddl_conv2d *g, int backward);
int ddl__deconv2x2_enable(int on);
int ddl__avx2_tiles(void);
int ddl__conv1x1_ok(const ddl_conv2d *g);
int ddl__conv1x1_enable(int on);
int ddl__set_precision(int precision);

static float rnd(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

enum { DECONV, CONV1 };

typedef struct layer {
    int kind;
    ddl_conv2d g;
    size_t nx, ny, nw;
} layer;

static layer make(int kind, int batch, int in_c, int out_c, int h, int w)
{
    int k = kind == DECONV ? 2 : 1;
    layer l = {kind, {.batch = batch, .in_c = in_c, .in_h = h, .in_w = w, .out_c = out_c, .k_h = k, .k_w = k,
                      .stride = k}, 0, 0, 0};
    l.nx = (size_t)batch * in_c * h * w;
    l.ny = (size_t)batch * out_c * h * w * (kind == DECONV ? 4 : 1);
    l.nw = (size_t)in_c * out_c * k * k;
    return l;
}

static int kernels_take(const layer *l)
{
    return l->kind == DECONV ? ddl__deconv2x2_ok(&l->g, 0) : ddl__conv1x1_ok(&l->g);
}

static int kernels_on(const layer *l, int on)
{
    return l->kind == DECONV ? ddl__deconv2x2_enable(on) : ddl__conv1x1_enable(on);
}

typedef struct pass {
    float *y, *dx, *dw, *db;
} pass;

/* run: the forward and backward passes of l (dx, dw: which the backward computes), at threads;
 * dw and db start from the values of seed 7, as an accumulated gradient. */
static pass run(const layer *l, const float *x, const float *w, const float *b, const float *dy, int want_dx,
                int want_dw, int threads)
{
    const ddl_conv2d *g = &l->g;
    pass p = {malloc(l->ny * 4), calloc(l->nx, 4), malloc(l->nw * 4), malloc((size_t)g->out_c * 4)};
    unsigned s = 7;
    for (size_t i = 0; i < l->nw; i++)
        p.dw[i] = rnd(&s);
    for (int i = 0; i < g->out_c; i++)
        p.db[i] = rnd(&s);
    size_t wn = l->kind == DECONV ? ddl_deconv2d_workspace(g) : ddl_conv2d_workspace(g);
    float *ws = calloc(wn + 16, 4), *dx = want_dx ? p.dx : NULL, *dw = want_dw ? p.dw : NULL;
    ddl_set_threads(threads);
    if (l->kind == DECONV) {
        ddl_deconv2d_forward(g, x, w, b, p.y, ws);
        ddl_deconv2d_backward(g, x, w, dy, dx, dw, p.db, ws);
    } else {
        ddl_conv2d_forward(g, x, w, b, p.y, ws);
        ddl_conv2d_backward(g, x, w, dy, dx, dw, p.db, ws);
    }
    ddl_set_threads(1);
    free(ws);
    return p;
}

static void drop(pass p) { free(p.y), free(p.dx), free(p.dw), free(p.db); }

static int same(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

static int same_pass(const layer *l, pass a, pass b)
{
    return same(a.y, b.y, l->ny) && same(a.dx, b.dx, l->nx) && same(a.dw, b.dw, l->nw) && same(a.db, b.db, (size_t)l->g.out_c);
}

/* one: the layer's direct passes against conv.c's; with_bias 0: no bias */
static void one(int kind, int batch, int in_c, int out_c, int h, int w, int with_bias)
{
    layer l = make(kind, batch, in_c, out_c, h, w);
    float *x = malloc(l.nx * 4), *w4 = malloc(l.nw * 4), *b = malloc((size_t)out_c * 4), *dy = malloc(l.ny * 4);
    unsigned s = (unsigned)(batch * 131 + in_c * 17 + out_c * 5 + h + w + kind);
    for (size_t i = 0; i < l.nx; i++)
        x[i] = i % 11 == 3 ? 0.0f : rnd(&s);
    for (size_t i = 0; i < l.nw; i++)
        w4[i] = rnd(&s);
    for (int i = 0; i < out_c; i++)
        b[i] = i == 0 ? -0.0f : rnd(&s);
    for (size_t i = 0; i < l.ny; i++)
        dy[i] = rnd(&s);
    const float *bias = with_bias ? b : NULL;
    CHECK(kernels_take(&l));
    int was = kernels_on(&l, 0);
    CHECK(!kernels_take(&l));
    pass ref = run(&l, x, w4, bias, dy, 1, 1, 1);
    kernels_on(&l, was);
    int good = 1;
    for (int threads = 1; threads <= 3; threads++) {
        pass p = run(&l, x, w4, bias, dy, 1, 1, threads);
        int ok = same_pass(&l, p, ref);
        CHECK(ok);
        good &= ok;
        drop(p);
    }
    pass only_dx = run(&l, x, w4, bias, dy, 1, 0, 2), only_dw = run(&l, x, w4, bias, dy, 0, 1, 2);
    CHECK(same(only_dx.dx, ref.dx, l.nx));
    CHECK(same(only_dw.dw, ref.dw, l.nw));
    int bf = ddl__set_precision(DDL_PRECISION_BF16);
    pass p16 = run(&l, x, w4, bias, dy, 1, 1, 2);
    ddl__set_precision(bf);
    /* float32's kernels in a bf16 pass too, where they take the pass; elsewhere bfloat16's product */
    int fwd32 = kind == DECONV || in_c * out_c <= 512, back32 = kind == DECONV ? in_c * out_c <= 1024 : fwd32;
    CHECK(same(p16.y, ref.y, l.ny) == fwd32);
    CHECK((same(p16.dx, ref.dx, l.nx) && same(p16.dw, ref.dw, l.nw)) == back32);
    printf("  %s %2d x %3d -> %2d channels, %2dx%-2d%s: %s\n", kind == DECONV ? "2x2 s2 transposed" : "1x1", batch,
           in_c, out_c, h, w, with_bias ? "" : ", no bias",
           good ? "the column matrix's bits at 1, 2 and 3 threads" : "NOT the column matrix's bits");
    drop(only_dx), drop(only_dw), drop(p16), drop(ref);
    free(x), free(w4), free(b), free(dy);
}

int main(void)
{
    layer probe = make(DECONV, 1, 2, 1, 2, 8);
    if (ddl__avx2_tiles() || !ddl__deconv2x2_ok(&probe.g, 1)) { /* AVX-512's kernels */
        printf("skipped: the direct kernels here are AVX-512's (with AVX2 alone, the transposed convolution's "
               "and the 1x1's are tested against their order in test_avx2_tiles)\n");
        return TEST_END();
    }
    one(DECONV, 32, 16, 8, 32, 32, 1);  /* U-Net's up0: chunks of 5 samples, the last of 2 */
    one(DECONV, 32, 32, 16, 16, 16, 1); /* up1 */
    one(DECONV, 32, 64, 32, 8, 8, 1);   /* up2: a step's 16 positions in two rows (its backward: below) */
    one(DECONV, 9, 32, 32, 8, 16, 1);   /* the most channels the backward takes; 4 chunks, the last short */
    one(DECONV, 3, 5, 3, 4, 24, 1);     /* spare input and output channels; rows of 24 (a step across rows) */
    one(DECONV, 3, 2, 4, 2, 8, 1);      /* 48 positions a chunk, 16 columns: dw summed in order */
    one(DECONV, 2, 3, 2, 2, 8, 0);      /* 32 positions, 8 columns: dw by lanes however short; no bias */
    one(DECONV, 2, 256, 64, 2, 8, 1);   /* the most channels the forward takes */
    one(DECONV, 1, 7, 1, 16, 40, 1);    /* one sample, one output channel */
    one(CONV1, 32, 8, 11, 64, 64, 1);   /* U-Net's head */
    one(CONV1, 3, 5, 7, 4, 12, 1);      /* spare rows both ways; 48 positions (3 vectors) */
    one(CONV1, 2, 19, 6, 4, 4, 1);      /* 32 positions a chunk over 19 channels: dw in order */
    one(CONV1, 2, 6, 3, 4, 4, 0);       /* fewer than 16 input channels: dw by lanes; no bias */
    one(CONV1, 2, 256, 16, 4, 8, 1);    /* the most input channels the kernels take */
    one(CONV1, 2, 64, 64, 4, 8, 1);     /* the most of both */
    one(CONV1, 40, 16, 32, 32, 32, 1);  /* 8 chunks of 5 samples */
    /* past the kernels: conv.c's path */
    ddl_conv2d wide = {.batch = 1, .in_c = 4, .in_h = 4, .in_w = 8, .out_c = 65, .k_h = 2, .k_w = 2, .stride = 2};
    ddl_conv2d padded = {.batch = 1, .in_c = 4, .in_h = 4, .in_w = 8, .out_c = 4, .k_h = 2, .k_w = 2, .stride = 2,
                         .pad = 1};
    ddl_conv2d rows = {.batch = 1, .in_c = 4, .in_h = 4, .in_w = 12, .out_c = 4, .k_h = 2, .k_w = 2, .stride = 2};
    ddl_conv2d k3 = {.batch = 1, .in_c = 4, .in_h = 4, .in_w = 8, .out_c = 4, .k_h = 3, .k_w = 3, .stride = 2};
    CHECK(!ddl__deconv2x2_ok(&wide, 0) && !ddl__deconv2x2_ok(&padded, 0) && !ddl__deconv2x2_ok(&rows, 0) &&
          !ddl__deconv2x2_ok(&k3, 0));
    /* the backward of more than 32 x 32 channels: the column matrix's (its lanes would not stay in
     * the cache) */
    layer up2 = make(DECONV, 1, 64, 32, 8, 8), c32 = make(DECONV, 1, 32, 32, 8, 8);
    CHECK(ddl__deconv2x2_ok(&up2.g, 0) && !ddl__deconv2x2_ok(&up2.g, 1) && ddl__deconv2x2_ok(&c32.g, 1));
    ddl_conv2d c_pad = {.batch = 1, .in_c = 4, .in_h = 4, .in_w = 4, .out_c = 4, .k_h = 1, .k_w = 1, .stride = 1,
                        .pad = 1};
    ddl_conv2d c_odd = {.batch = 1, .in_c = 4, .in_h = 7, .in_w = 7, .out_c = 4, .k_h = 1, .k_w = 1, .stride = 1};
    ddl_conv2d c_s2 = {.batch = 1, .in_c = 4, .in_h = 8, .in_w = 8, .out_c = 4, .k_h = 1, .k_w = 1, .stride = 2};
    ddl_conv2d c_one = {.batch = 1, .in_c = 4, .in_h = 4, .in_w = 4, .out_c = 1, .k_h = 1, .k_w = 1, .stride = 1};
    ddl_conv2d c_grp = {.batch = 1, .in_c = 4, .in_h = 4, .in_w = 4, .out_c = 4, .k_h = 1, .k_w = 1, .stride = 1,
                        .groups = 2};
    ddl_conv2d c_big = {.batch = 1, .in_c = 65, .in_h = 4, .in_w = 4, .out_c = 64, .k_h = 1, .k_w = 1, .stride = 1};
    CHECK(!ddl__conv1x1_ok(&c_pad) && !ddl__conv1x1_ok(&c_odd) && !ddl__conv1x1_ok(&c_s2) &&
          !ddl__conv1x1_ok(&c_one) && !ddl__conv1x1_ok(&c_grp) && !ddl__conv1x1_ok(&c_big));
    return TEST_END();
}
