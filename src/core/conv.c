/* conv.c - 2-D convolution and transposed convolution, forward and backward, as im2col / col2im
 * and ddl_gemm. Weights use PyTorch's layouts: conv (out_c, in_c, k_h, k_w), transposed conv
 * (in_c, out_c, k_h, k_w). Allocates nothing: all scratch is the caller's workspace.
 *
 * Several samples are unfolded side by side into one column matrix so that one gemm covers a
 * chunk of the batch; the number per chunk is a pure function of the geometry (so the
 * _workspace functions give the exact size) and keeps the workspace near CONV_BUDGET floats.
 * With more than one sample per chunk the gemm works on channel-major (C, nb * P) matrices,
 * so activations are gathered into and scattered out of that layout by memcpy of P floats. */
#include "impl.h"

#include <string.h>

/* Workspace target in floats (1 MB, about an L2 cache). Measured on LeNet at batch 64 (OpenBLAS,
 * 1 thread, forward + backward): conv1 2.2 ms in chunks of 10 samples against 3.0-3.8 ms as one
 * gemm over the whole batch, whose 5 MB column matrix falls out of cache between im2col and
 * gemm; one sample per gemm was no faster than chunks. -DCONV_BUDGET=n overrides, to measure. */
#ifndef CONV_BUDGET
#define CONV_BUDGET ((size_t)1 << 18)
#endif

/* ---- geometry ----
 * A convolution seen from its "image" side: the image (c, h, w) is unfolded by the kernel (kh,
 * kw), strides (sh, sw), top and left pads (pt, pl) and dilations (dh, dw) into columns, one per
 * output position (oh, ow); bottom and right pads only make more positions. For ddl_conv2d the
 * image is the input; for the transposed convolution it is the output. A grouped convolution
 * unfolds one group's c channels at a time, out of the cs channels of a sample. */

typedef struct conv_geo {
    int c, h, w;       /* image: channels of one group */
    int cs;            /* channels of a sample in memory: c times the groups */
    int kh, kw, sh, sw, pt, pl, dh, dw;
    int oh, ow;        /* positions */
    int valid;         /* stride 1, no padding or dilation: every tap inside the image */
} conv_geo;

int ddl_conv2d_out_h(const ddl_conv2d *g)
{
    ddl__conv_full f = ddl__conv2d_full(g);
    return (g->in_h + f.pt + f.pb - f.dh * (g->k_h - 1) - 1) / f.sh + 1;
}
int ddl_conv2d_out_w(const ddl_conv2d *g)
{
    ddl__conv_full f = ddl__conv2d_full(g);
    return (g->in_w + f.pl + f.pr - f.dw * (g->k_w - 1) - 1) / f.sw + 1;
}
int ddl_deconv2d_out_h(const ddl_conv2d *g)
{
    ddl__conv_full f = ddl__conv2d_full(g);
    return (g->in_h - 1) * f.sh - f.pt - f.pb + f.dh * (g->k_h - 1) + 1 + f.oph;
}
int ddl_deconv2d_out_w(const ddl_conv2d *g)
{
    ddl__conv_full f = ddl__conv2d_full(g);
    return (g->in_w - 1) * f.sw - f.pl - f.pr + f.dw * (g->k_w - 1) + 1 + f.opw;
}

static conv_geo view(const ddl_conv2d *g, int c, int h, int w, int oh, int ow)
{
    ddl__conv_full f = ddl__conv2d_full(g);
    int groups = f.groups > 0 ? f.groups : 1;
    conv_geo q = {c / groups, h, w, c, g->k_h, g->k_w, f.sh, f.sw, f.pt, f.pl, f.dh, f.dw, oh, ow, 0};
    q.valid = f.sh == 1 && f.sw == 1 && f.dh == 1 && f.dw == 1 && f.pt == 0 && f.pl == 0 && f.pb == 0 && f.pr == 0;
    return q;
}

static conv_geo conv_view(const ddl_conv2d *g)
{
    return view(g, g->in_c, g->in_h, g->in_w, ddl_conv2d_out_h(g), ddl_conv2d_out_w(g));
}

static conv_geo deconv_view(const ddl_conv2d *g)
{
    return view(g, g->out_c, ddl_deconv2d_out_h(g), ddl_deconv2d_out_w(g), g->in_h, g->in_w);
}

/* geo_ok: a geometry the passes take (else they do nothing): sizes and strides >= 1, pads >= 0,
 * groups dividing both channel counts (a transposed convolution: none). */
static int geo_ok(const ddl_conv2d *g, const conv_geo *q, int transposed)
{
    ddl__conv_full f = ddl__conv2d_full(g);
    return g->batch > 0 && g->in_c > 0 && g->out_c > 0 && g->k_h > 0 && g->k_w > 0 && f.sh > 0 && f.sw > 0 &&
           f.dh > 0 && f.dw > 0 && f.pt >= 0 && f.pl >= 0 && f.pb >= 0 && f.pr >= 0 && f.oph >= 0 && f.opw >= 0 &&
           f.groups > 0 && (transposed ? f.groups == 1 : g->in_c % f.groups == 0 && g->out_c % f.groups == 0) &&
           q->h > 0 && q->w > 0 && q->oh > 0 && q->ow > 0;
}

/* chunk: samples per gemm. rows_k: rows of the column matrix; rows_c: channels of the
 * channel-major buffer beside it; p: positions per sample. The budget grows to the weights'
 * size (rows_k x rows_c) where they are larger: each gemm packs the weights whole, so small
 * planes of many channels (ResNet-18's 512 at 2x2: 2.4M weights against 20K floats a sample)
 * packed them once per dozen samples, and the packing cost as much as the products. */
static int chunk(int batch, size_t rows_k, size_t rows_c, size_t p)
{
    size_t per = (rows_k + rows_c) * p, budget = rows_k * rows_c > CONV_BUDGET ? rows_k * rows_c : CONV_BUDGET;
    size_t nb = per ? budget / per : 1;
    if (nb < 1)
        nb = 1;
    return nb > (size_t)batch ? batch : (int)nb;
}

/* COL_PAD: floats a bfloat16 pass adds to the column matrix's rows when their length is a
 * multiple of 64 floats. The bfloat16 kernel packs op(B) a 32-column panel at a time, reading
 * every row of the slice (up to 256) in turn; rows 2^n floats apart (the cnn's 4096, 1024, 256
 * positions a sample) all fall in the same few sets of the L1 cache and the reads miss: on the
 * AMD EPYC, a 16 x 4096 x 144 product ran at 96 GFLOP/s with rows 4096 floats apart and 143 with
 * 4112 (tools/bench/conv_bf16.c). The padding changes no value: float32 passes keep their
 * layout (their products, OpenBLAS's, were measured and pinned on it). */
#define COL_PAD 16

/* col_ld: the row length of the column matrix of `cols` columns in the calling thread's pass. */
static size_t col_ld(int cols)
{
    int pad = ddl__precision() == DDL_PRECISION_BF16 && !ddl__invariant() && cols % 64 == 0;
    return (size_t)cols + (pad ? COL_PAD : 0);
}

/* ws_floats: column matrix (rows_k, nb P + COL_PAD), plus (rows_c, nb P) when nb > 1. */
static size_t ws_floats(int nb, size_t rows_k, size_t rows_c, size_t p)
{
    return (size_t)nb * p * (rows_k + (nb > 1 ? rows_c : 0)) + rows_k * COL_PAD;
}

/* ---- im2col / col2im ---- */

/* span: the positions ox in [lo, hi) whose tap kj lands inside the image row of width w. */
static void span(int w, int s, int pad, int kj, int ow, int *lo, int *hi)
{
    int t = pad - kj, t2 = w - 1 + pad - kj;
    int a = t > 0 ? (t + s - 1) / s : 0;
    int b = t2 < 0 ? 0 : t2 / s + 1;
    if (b > ow)
        b = ow;
    if (a > b)
        a = b;
    *lo = a;
    *hi = b;
}

/* im2col: col (c kh kw, ld) gets, in columns [0, nb oh ow), the unfolded images x (nb, cs, h, w)
 * (their first c channels); row (ci, ki, kj), column (n, oy, ox) holds x[n, ci, oy sh - pt + ki dh,
 * ox sw - pl + kj dw] or 0. */
/* im2col_valid: im2col for stride 1 and no padding (LeNet's conv2): every tap reads inside the
 * image, so a row of the column matrix is oh copies of ow contiguous floats, without bounds. */
static void im2col_valid(const conv_geo *q, int nb, const float *x, float *col, size_t ld)
{
    size_t hw = (size_t)q->h * q->w, p = (size_t)q->oh * q->ow;
    const int ow = q->ow;
    for (int ci = 0; ci < q->c; ci++)
        for (int ki = 0; ki < q->kh; ki++)
            for (int kj = 0; kj < q->kw; kj++) {
                float *row = col + ((size_t)(ci * q->kh + ki) * q->kw + kj) * ld;
                for (int n = 0; n < nb; n++) {
                    const float *src = x + ((size_t)n * q->cs + ci) * hw + (size_t)ki * q->w + kj;
                    float *dst = row + n * p;
                    for (int oy = 0; oy < q->oh; oy++, src += q->w, dst += ow)
                        memcpy(dst, src, (size_t)ow * sizeof *dst);
                }
            }
}

/* ---- small planes ----
 * Where rows are a few floats (ResNet's 8x8, 4x4 and 2x2 planes), the loops above spent more on
 * bounds and short copies than on moving data: their im2col and col2im took as long as the
 * product itself in a bfloat16 ResNet-18 step. There, a map made once a call gives each entry of
 * a plane's columns (tap t, position) its pixel, or a zero slot past the plane; each (sample,
 * channel) plane is copied next to that slot and its columns read through the map (im2col), or
 * its columns are added through the map in (tap, position) order onto a zeroed copy that then
 * becomes the plane (col2im): a pixel still gets its taps' sums in (ki, kj) order from +0, the
 * same bits. */
#define SMALL_PLANE 1024 /* a plane's floats at most */
#define SMALL_MAP 4096   /* its column entries (taps x positions) at most */
#define SMALL_ROW 16     /* its output rows' floats at most: longer ones copy well in the loops above */

/* small_map: whether q's planes are small; if so, src[e] for entry e = t p + pos (tap t, output
 * position pos): the pixel it reads, or h w for the padding. Entry e's place in the column matrix
 * is t ld + pos: a tap's positions are contiguous there. */
static int small_map(const conv_geo *q, int32_t *src)
{
    size_t hw = (size_t)q->h * q->w, p = (size_t)q->oh * q->ow, taps = (size_t)q->kh * q->kw;
    if (hw + 1 > SMALL_PLANE || taps * p > SMALL_MAP || q->ow > SMALL_ROW)
        return 0;
    size_t e = 0;
    for (int ki = 0; ki < q->kh; ki++)
        for (int kj = 0; kj < q->kw; kj++)
            for (int oy = 0; oy < q->oh; oy++)
                for (int ox = 0; ox < q->ow; ox++, e++) {
                    int iy = oy * q->sh - q->pt + ki * q->dh, ix = ox * q->sw - q->pl + kj * q->dw;
                    src[e] = iy < 0 || iy >= q->h || ix < 0 || ix >= q->w ? (int32_t)hw : iy * q->w + ix;
                }
    return 1;
}

/* im2col_small: tap by tap: a tap's p positions are p contiguous floats of the column matrix (at
 * t ld + pos), so no map of column offsets is read. (gcc does not turn the loop into vector
 * gathers; the contiguous stores alone gave 2712 -> 2071 perf samples in ResNet-18 bf16.) */
DDL__HOT static void im2col_small(const conv_geo *q, int nb, const float *x, float *col, size_t ld,
                                  const int32_t *src)
{
    float plane[SMALL_PLANE];
    size_t hw = (size_t)q->h * q->w, p = (size_t)q->oh * q->ow, taps = (size_t)q->kh * q->kw;
    plane[hw] = 0.0f;
    for (int ci = 0; ci < q->c; ci++)
        for (int n = 0; n < nb; n++) {
            memcpy(plane, x + ((size_t)n * q->cs + ci) * hw, hw * sizeof *plane);
            float *c = col + (size_t)ci * taps * ld + (size_t)n * p;
            for (size_t t = 0; t < taps; t++) {
                float *restrict out = c + t * ld;
                const int32_t *at = src + t * p;
                for (size_t pos = 0; pos < p; pos++)
                    out[pos] = plane[at[pos]];
            }
        }
}

/* col2im_small: tap by tap (the entries' order: each pixel's taps in (ki, kj) order), a tap's p
 * positions read as p contiguous floats of the column matrix. */
DDL__HOT static void col2im_small(const conv_geo *q, int nb, const float *col, size_t ld, float *x,
                                  const int32_t *src)
{
    float plane[SMALL_PLANE];
    size_t hw = (size_t)q->h * q->w, p = (size_t)q->oh * q->ow, taps = (size_t)q->kh * q->kw;
    for (int ci = 0; ci < q->c; ci++)
        for (int n = 0; n < nb; n++) {
            memset(plane, 0, (hw + 1) * sizeof *plane);
            const float *c = col + (size_t)ci * taps * ld + (size_t)n * p;
            for (size_t t = 0; t < taps; t++) {
                const float *in = c + t * ld;
                const int32_t *at = src + t * p;
                for (size_t pos = 0; pos < p; pos++)
                    plane[at[pos]] += in[pos];
            }
            memcpy(x + ((size_t)n * q->cs + ci) * hw, plane, hw * sizeof *plane);
        }
}

/* shift_geo: whether q's planes take im2col_shift_avx512.c's shifted loads (stride 1, output rows
 * as wide as the image's, AVX-512); if so, their geometry in g. */
static int shift_geo(const conv_geo *q, ddl__shift_geo *g)
{
    if (q->sh != 1 || q->sw != 1 || q->ow != q->w)
        return 0;
    *g = (ddl__shift_geo){.h = q->h, .w = q->w, .oh = q->oh, .kh = q->kh, .kw = q->kw, .pt = q->pt, .pl = q->pl,
                          .dh = q->dh, .dw = q->dw};
    return ddl__im2col_shift_ok(g);
}

/* unfold_way: how im2col and col2im take q's planes: by shifted loads (their geometry in sg), by
 * the map of a tiny or a small plane (in src), or by the row loops */
enum { WAY_ROWS, WAY_SHIFT, WAY_TINY, WAY_SMALL };
static int unfold_way(const conv_geo *q, ddl__shift_geo *sg, int32_t *src)
{
    int tiny = ddl__im2col_tiny_ok(q->h * q->w, q->oh * q->ow, q->kh * q->kw); /* its map is small */
    if (!tiny && shift_geo(q, sg))
        return WAY_SHIFT;
    if (small_map(q, src))
        return tiny ? WAY_TINY : WAY_SMALL;
    return WAY_ROWS;
}

static inline __attribute__((always_inline)) void im2col(const conv_geo *q, int nb, const float *x, float *col, size_t ld)
{
    if (q->valid) {
        im2col_valid(q, nb, x, col, ld);
        return;
    }
    ddl__shift_geo sg;
    int32_t map_src[SMALL_MAP];
    switch (unfold_way(q, &sg, map_src)) {
    case WAY_SHIFT: ddl__im2col_shift_avx512(&sg, q->c, q->cs, nb, x, col, ld); return;
    case WAY_TINY:
        ddl__im2col_tiny_avx512(map_src, q->kh * q->kw, q->h * q->w, q->oh * q->ow, q->c, q->cs, nb, x, col, ld);
        return;
    case WAY_SMALL: im2col_small(q, nb, x, col, ld, map_src); return;
    default: break;
    }
    size_t hw = (size_t)q->h * q->w, p = (size_t)q->oh * q->ow;
    int s2 = ddl__im2col_s2_ok(); /* stride-2 rows by vector permutes */
    for (int ci = 0; ci < q->c; ci++)
        for (int ki = 0; ki < q->kh; ki++)
            for (int kj = 0; kj < q->kw; kj++) {
                float *row = col + ((size_t)(ci * q->kh + ki) * q->kw + kj) * ld;
                int lo, hi;
                span(q->w, q->sw, q->pl, kj * q->dw, q->ow, &lo, &hi);
                for (int n = 0; n < nb; n++) {
                    const float *img = x + ((size_t)n * q->cs + ci) * hw;
                    for (int oy = 0; oy < q->oh; oy++) {
                        float *dst = row + n * p + (size_t)oy * q->ow;
                        int iy = oy * q->sh - q->pt + ki * q->dh;
                        /* plain loops, not memcpy / memset: rows are short (ow is 5 to 64) */
                        int a = lo, b = hi;
                        if (iy < 0 || iy >= q->h)
                            a = b = q->ow;
                        ptrdiff_t base = (ptrdiff_t)iy * q->w - q->pl + kj * q->dw; /* image index of ox = 0 */
                        for (int ox = 0; ox < a; ox++)
                            dst[ox] = 0.0f;
                        if (q->sw == 1)
                            for (int ox = a; ox < b; ox++)
                                dst[ox] = img[base + ox];
                        else if (q->sw == 2 && s2 && b > a)
                            ddl__im2col_s2_row(img + base + 2 * (ptrdiff_t)a, b - a, dst + a);
                        else
                            for (int ox = a; ox < b; ox++)
                                dst[ox] = img[base + (ptrdiff_t)ox * q->sw];
                        for (int ox = b; ox < q->ow; ox++)
                            dst[ox] = 0.0f;
                    }
                }
            }
}

/* col2im: x (nb, cs, h, w), its first c channels, = the sum of every column entry onto the pixel
 * im2col took it from. */
static inline __attribute__((always_inline)) void col2im(const conv_geo *q, int nb, const float *col, size_t ld, float *x)
{
    ddl__shift_geo sg;
    int32_t map_src[SMALL_MAP];
    switch (unfold_way(q, &sg, map_src)) {
    case WAY_SHIFT: ddl__col2im_shift_avx512(&sg, q->c, q->cs, nb, col, ld, x); return;
    case WAY_TINY:
        ddl__col2im_tiny_avx512(map_src, q->kh * q->kw, q->h * q->w, q->oh * q->ow, q->c, q->cs, nb, col, ld, x);
        return;
    case WAY_SMALL: col2im_small(q, nb, col, ld, x, map_src); return;
    default: break;
    }
    size_t hw = (size_t)q->h * q->w, p = (size_t)q->oh * q->ow;
    if (q->cs == q->c)
        memset(x, 0, (size_t)nb * q->c * hw * sizeof *x);
    else
        for (int n = 0; n < nb; n++) /* one group's channels of each sample */
            memset(x + (size_t)n * q->cs * hw, 0, (size_t)q->c * hw * sizeof *x);
    for (int ci = 0; ci < q->c; ci++)
        for (int ki = 0; ki < q->kh; ki++)
            for (int kj = 0; kj < q->kw; kj++) {
                const float *row = col + ((size_t)(ci * q->kh + ki) * q->kw + kj) * ld;
                int lo, hi;
                span(q->w, q->sw, q->pl, kj * q->dw, q->ow, &lo, &hi);
                for (int n = 0; n < nb; n++) {
                    float *img = x + ((size_t)n * q->cs + ci) * hw;
                    for (int oy = 0; oy < q->oh; oy++) {
                        int iy = oy * q->sh - q->pt + ki * q->dh;
                        if (iy < 0 || iy >= q->h)
                            continue;
                        const float *src = row + n * p + (size_t)oy * q->ow;
                        ptrdiff_t base = (ptrdiff_t)iy * q->w - q->pl + kj * q->dw;
                        if (q->sw == 1) {
                            float *dst = img + base + lo;
                            for (int ox = 0; ox < hi - lo; ox++)
                                dst[ox] += src[lo + ox];
                        } else {
                            for (int ox = lo; ox < hi; ox++)
                                img[base + (ptrdiff_t)ox * q->sw] += src[ox];
                        }
                    }
                }
            }
}

/* ---- layout helpers ---- */

/* gather: cm (c, nb p) = the samples of x (nb, c, p) side by side. */
static void gather(int nb, int c, size_t p, const float *x, float *cm)
{
    for (int n = 0; n < nb; n++)
        for (int ci = 0; ci < c; ci++)
            memcpy(cm + ((size_t)ci * nb + n) * p, x + ((size_t)n * c + ci) * p, p * sizeof *x);
}

/* scatter: y (nb, c, p) = cm (c, nb p) split back into samples. */
static void scatter(int nb, int c, size_t p, const float *cm, float *y)
{
    for (int n = 0; n < nb; n++)
        for (int ci = 0; ci < c; ci++)
            memcpy(y + ((size_t)n * c + ci) * p, cm + ((size_t)ci * nb + n) * p, p * sizeof *y);
}

/* ---- threads ----
 * The unfolding and layout copies of a chunk go sample by sample over the threads (each sample
 * writes only its own columns or its own image, in the order one thread would); the forward pass
 * of a convolution goes chunk by chunk, each in its thread's scratch. */

enum { UNF_IM2COL, UNF_COL2IM, UNF_GATHER, UNF_SCATTER };

typedef struct per_sample {
    int kind, nb, c;
    const conv_geo *q;
    size_t p, ld, img;
    const float *src;
    float *dst;
} per_sample;

static void sample_task(void *ctx, int n)
{
    const per_sample *j = ctx;
    switch (j->kind) {
    case UNF_IM2COL: im2col(j->q, 1, j->src + n * j->img, j->dst + n * j->p, j->ld); break;
    case UNF_COL2IM: col2im(j->q, 1, j->src + n * j->p, j->ld, j->dst + n * j->img); break;
    case UNF_GATHER:
        for (int ci = 0; ci < j->c; ci++)
            memcpy(j->dst + ((size_t)ci * j->nb + n) * j->p, j->src + ((size_t)n * j->c + ci) * j->p,
                   j->p * sizeof *j->dst);
        break;
    default:
        for (int ci = 0; ci < j->c; ci++)
            memcpy(j->dst + ((size_t)n * j->c + ci) * j->p, j->src + ((size_t)ci * j->nb + n) * j->p,
                   j->p * sizeof *j->dst);
    }
}

/* each_sample: the copy `kind` for nb samples, over the threads when there are several. */
static void each_sample(per_sample j)
{
    if (ddl__threads() > 1 && j.nb > 1) {
        ddl__parallel(j.nb, sample_task, &j);
        return;
    }
    conv_geo q = j.q ? *j.q : (conv_geo){0};
    switch (j.kind) {
    case UNF_IM2COL: im2col(&q, j.nb, j.src, j.dst, j.ld); break;
    case UNF_COL2IM: col2im(&q, j.nb, j.src, j.ld, j.dst); break;
    case UNF_GATHER: gather(j.nb, j.c, j.p, j.src, j.dst); break;
    default: scatter(j.nb, j.c, j.p, j.src, j.dst);
    }
}

static void par_im2col(const conv_geo *q, int nb, const float *x, float *col, size_t ld)
{
    per_sample j = {UNF_IM2COL, nb, q->c, q, (size_t)q->oh * q->ow, ld, (size_t)q->cs * q->h * q->w, x, col};
    each_sample(j);
}

static void par_col2im(const conv_geo *q, int nb, const float *col, size_t ld, float *x)
{
    per_sample j = {UNF_COL2IM, nb, q->c, q, (size_t)q->oh * q->ow, ld, (size_t)q->cs * q->h * q->w, col, x};
    each_sample(j);
}

static void par_gather(int nb, int c, size_t p, const float *x, float *cm)
{
    per_sample j = {UNF_GATHER, nb, c, NULL, p, 0, 0, x, cm};
    each_sample(j);
}

static void par_scatter(int nb, int c, size_t p, const float *cm, float *y)
{
    per_sample j = {UNF_SCATTER, nb, c, NULL, p, 0, 0, cm, y};
    each_sample(j);
}

/* add_bias: y (nb, c, p) += b (c); b may be NULL. */
static void add_bias(int nb, int c, size_t p, const float *b, float *y)
{
    if (!b)
        return;
    for (int n = 0; n < nb; n++)
        for (int ci = 0; ci < c; ci++) {
            float *row = y + ((size_t)n * c + ci) * p, bv = b[ci];
            for (size_t i = 0; i < p; i++)
                row[i] += bv;
        }
}

typedef struct bias_job {
    int nb, c;
    size_t p;
    const float *dy;
    float *db;
} bias_job;

static void bias_channels(void *ctx, size_t lo, size_t hi)
{
    const bias_job *j = ctx;
    size_t stride = (size_t)j->c * j->p; /* from one sample's plane of channel ci to the next's */
    for (size_t ci = lo; ci < hi; ci++)
        j->db[ci] += (float)ddl__planes_sum(j->dy + ci * j->p, stride, j->nb, (int)j->p);
}

/* bias_grad: db (c) += sums of dy (nb, c, p) over samples and positions; db may be NULL.
 * Channels go over the threads (each one's sum in the same order). */
static void bias_grad(int nb, int c, size_t p, const float *dy, float *db)
{
    if (!db)
        return;
    bias_job j = {nb, c, p, dy, db};
    ddl__parallel_range((size_t)c, (size_t)16384 / ((size_t)nb * p) + 1, bias_channels, &j);
}

/* ---- convolution ----
 * A grouped convolution runs one im2col and one gemm per group on each chunk: group gi's og
 * output channels from its c input channels, into its rows of the output. With one group the
 * calls are those of before groups existed. */

/* parts_floats: the weight gradient of every chunk, summed in chunk order after the chunks. */
static size_t parts_floats(const ddl_conv2d *g, int nb, size_t k)
{
    return (size_t)((g->batch + nb - 1) / nb) * g->out_c * k;
}

/* packed_floats: room for the weights packed once a bfloat16 pass (ddl__gemm_bf16_pack): w (og
 * x k) a group for the forward pass, w^T (k x og) for the input gradient, in turn; 0 on a CPU
 * without a bfloat16 path. Each chunk's product packed them again before: 64 times a pass on
 * ResNet-18's 16x16 layers, half of the AMX loop's packing of op(A). */
static size_t packed_floats(const ddl_conv2d *g, const conv_geo *q)
{
    int groups = q->cs / q->c, og = g->out_c / groups, k = q->c * g->k_h * g->k_w;
    size_t f = ddl__gemm_bf16_packed_words(og, k), t = ddl__gemm_bf16_packed_words(k, og);
    return (size_t)groups * (f > t ? f : t);
}

/* pack_weights: in a bfloat16 pass by im2col, w (trans 0: og x k a group) or w^T (trans 1)
 * packed into ws at `at` floats, once for every chunk's product; NULL in float32 passes. */
static const uint32_t *pack_weights(const ddl_conv2d *g, const conv_geo *q, const float *w, int trans, float *ws,
                                    size_t at)
{
    if (ddl__precision() != DDL_PRECISION_BF16 || ddl__invariant() || packed_floats(g, q) == 0)
        return NULL;
    int groups = q->cs / q->c, og = g->out_c / groups, k = q->c * g->k_h * g->k_w;
    uint32_t *pa = (uint32_t *)(void *)(ws + at);
    size_t words = trans ? ddl__gemm_bf16_packed_words(k, og) : ddl__gemm_bf16_packed_words(og, k);
    for (int gi = 0; gi < groups; gi++)
        ddl__gemm_bf16_pack(trans, trans ? k : og, trans ? og : k, w + (size_t)gi * og * k, k, pa + gi * words);
    return pa;
}

/* direct: 1 when the direct kernels (conv_wide.c) may run: float32 passes. In bfloat16 training
 * passes (ddl__set_precision) a convolution is conv_bf16.c's where ddl__conv2d_bf16_ok says so,
 * else im2col's, whose products gemm.c rounds. */
static int direct(void) { return ddl__precision() != DDL_PRECISION_BF16 || ddl__invariant(); }

size_t ddl_conv2d_workspace(const ddl_conv2d *g)
{
    conv_geo q = conv_view(g);
    if (!geo_ok(g, &q, 0))
        return 0;
    size_t k = (size_t)q.c * g->k_h * g->k_w, p = (size_t)q.oh * q.ow;
    int nb = chunk(g->batch, k, (size_t)g->out_c, p);
    size_t n = ws_floats(nb, k, (size_t)g->out_c, p) + parts_floats(g, nb, k) + packed_floats(g, &q);
    /* the wide kernels' or the depthwise kernel's; a wide conv whose weight gradient is im2col's
     * needs both (n above) */
    size_t fast = ddl__conv2d_wide_ok(g) ? ddl__conv2d_wide_workspace(g) : ddl__conv2d_dw_ok(g) ? ddl__conv2d_dw_workspace(g) : 0;
    /* bfloat16 passes take im2col on a CPU with a bfloat16 path, unless the direct bfloat16
     * kernels take all of this conv's passes (a small plane's weight gradient is im2col's): only
     * then is a wide conv's im2col room not kept */
    int bf16_direct = ddl__conv2d_bf16_fits(g);
    int no_bf16_im2col = ddl__conv2d_bf16_dw_fits(g) || ddl__bf16_path() == DDL__BF16_NONE;
    if ((ddl__conv2d_wide_dw_ok(g) && no_bf16_im2col) || ddl__conv2d_dw_ok(g))
        n = 0;
    if (bf16_direct) { /* the direct bfloat16 kernels' room (their passes then) */
        size_t bn = ddl__conv2d_bf16_workspace(g);
        fast = bn > fast ? bn : fast;
    }
    if (ddl__wino_ok(g) || ddl__wino_dw_ok(g)) { /* Winograd's room; im2col's too where a pass is direct */
        size_t wn = ddl__wino_workspace(g);
        fast = wn > fast ? wn : fast;
        if (no_bf16_im2col && ddl__wino_ok(g) && ddl__wino_dw_ok(g))
            n = 0;
    }
    return n > fast ? n : fast;
}

typedef struct conv_chunks {
    const ddl_conv2d *g;
    const conv_geo *q;
    const float *x, *w, *b;
    float *y;
    int nb;
    const uint32_t *pa; /* w packed (bfloat16 passes), or NULL */
} conv_chunks;

/* forward_chunk: samples [i nb, i nb + nb) of the batch, in ws. */
static void forward_chunk(void *ctx, int i, float *ws)
{
    const conv_chunks *j = ctx;
    const ddl_conv2d *g = j->g;
    conv_geo q = *j->q; /* a local copy: the unfolding's stores cannot change it */
    int k = q.c * g->k_h * g->k_w, n0 = i * j->nb, groups = q.cs / q.c, og = g->out_c / groups;
    size_t p = (size_t)q.oh * q.ow, in_sz = (size_t)g->in_c * g->in_h * g->in_w, out_sz = (size_t)g->out_c * p;
    size_t group_in = (size_t)q.c * g->in_h * g->in_w;
    int m = g->batch - n0 < j->nb ? g->batch - n0 : j->nb;
    int cols = m * (int)p;
    size_t ld = col_ld(cols);
    float *col = ws, *yc = ws + (size_t)k * ((size_t)j->nb * p + COL_PAD); /* col: (k, m p); yc: (out_c, m p) */
    float *yn = j->y + n0 * out_sz, *dst = m == 1 ? yn : yc;
    for (int gi = 0; gi < groups; gi++) {
        im2col(&q, m, j->x + n0 * in_sz + gi * group_in, col, ld);
        /* (og, m p) = w (og, k) col (k, m p): group gi's rows */
        if (j->pa)
            ddl__gemm_packed(j->pa + gi * ddl__gemm_bf16_packed_words(og, k), 0, og, cols, k, col, (int)ld,
                             dst + (size_t)gi * og * cols, cols);
        else
            ddl_gemm(0, 0, og, cols, k, 1.0f, j->w + (size_t)gi * og * k, k, col, (int)ld, 0.0f,
                     dst + (size_t)gi * og * cols, cols);
    }
    if (m > 1)
        scatter(m, g->out_c, p, yc, yn);
    add_bias(m, g->out_c, p, j->b, yn);
}

void ddl__conv2d_forward_relu(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y,
                              float *ws)
{
    conv_geo q = conv_view(g);
    if (geo_ok(g, &q, 0) && ddl__conv2d_bf16_ok(g)) { /* in the copy out of the sums */
        ddl__conv2d_bf16_forward_relu(g, x, w, b, y, ws);
        return;
    }
    ddl_conv2d_forward(g, x, w, b, y, ws);
    if (geo_ok(g, &q, 0))
        ddl_relu_forward((size_t)g->batch * g->out_c * q.oh * q.ow, y, y);
}

void ddl_conv2d_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y,
                        float *ws)
{
    conv_geo q = conv_view(g);
    if (!geo_ok(g, &q, 0))
        return;
    if (ddl__conv2d_bf16_ok(g)) {
        ddl__conv2d_bf16_forward(g, x, w, b, y, ws);
        return;
    }
    if (ddl__wino_ok(g) && direct()) {
        ddl__wino_forward(g, x, w, b, y, ws);
        return;
    }
    if (ddl__conv2d_wide_ok(g) && direct()) {
        ddl__conv2d_wide_forward(g, x, w, b, y, ws);
        return;
    }
    if (ddl__conv2d_dw_ok(g)) {
        ddl__conv2d_dw_forward(g, x, w, b, y, ws);
        return;
    }
    if (ddl__conv1x1_ok(g)) {
        ddl__conv1x1_forward(g, x, w, b, y);
        return;
    }
    if (ddl__conv1x1_avx2_ok(g)) {
        ddl__conv1x1_forward_avx2(g, x, w, b, y);
        return;
    }
    int k = q.c * g->k_h * g->k_w;
    size_t p = (size_t)q.oh * q.ow;
    int nb = chunk(g->batch, (size_t)k, (size_t)g->out_c, p), chunks = (g->batch + nb - 1) / nb;
    size_t task = ws_floats(nb, (size_t)k, (size_t)g->out_c, p);
    conv_chunks j = {g, &q, x, w, b, y, nb, pack_weights(g, &q, w, 0, ws, task + parts_floats(g, nb, (size_t)k))};
    if (chunks > 1 && ddl__threads() > 1 && task <= DDL__THREAD_SCRATCH) {
        ddl__parallel_ws(chunks, forward_chunk, &j, ws);
        return;
    }
    for (int i = 0; i < chunks; i++)
        forward_chunk(&j, i, ws);
}

typedef struct back_chunks {
    const ddl_conv2d *g;
    const conv_geo *q;
    const float *x, *w, *dy;
    float *dx, *parts;
    int nb;
    const uint32_t *pa; /* w^T packed (bfloat16 passes), or NULL */
    int first;          /* the chunk of task 0 (a wave's first) */
} back_chunks;

/* backward_chunk: task t is chunk i = first + t, samples [i nb, i nb + nb): their weight gradient
 * into parts (slot t), their dx; in ws. Group by group: the group's columns serve its dw, then
 * become its dx's. */
static void backward_chunk(void *ctx, int t, float *ws)
{
    const back_chunks *j = ctx;
    const ddl_conv2d *g = j->g;
    conv_geo q = *j->q;
    int i = j->first + t;
    int k = q.c * g->k_h * g->k_w, n0 = i * j->nb, m = g->batch - n0 < j->nb ? g->batch - n0 : j->nb;
    int groups = q.cs / q.c, og = g->out_c / groups;
    size_t p = (size_t)q.oh * q.ow, in_sz = (size_t)g->in_c * g->in_h * g->in_w, out_sz = (size_t)g->out_c * p;
    size_t group_in = (size_t)q.c * g->in_h * g->in_w;
    int cols = m * (int)p;
    size_t ld = col_ld(cols);
    float *col = ws, *dyc = ws + (size_t)k * ((size_t)j->nb * p + COL_PAD);
    const float *dyn = j->dy + n0 * out_sz, *d = dyn;
    if (m > 1) {
        gather(m, g->out_c, p, dyn, dyc);
        d = dyc;
    }
    for (int gi = 0; gi < groups; gi++) {
        const float *dg = d + (size_t)gi * og * cols, *wg = j->w + (size_t)gi * og * k;
        if (j->parts) {
            im2col(&q, m, j->x + n0 * in_sz + gi * group_in, col, ld);
            /* part (og, k) = dy (og, m p) col^T (m p, k) */
            ddl_gemm(0, 1, og, k, cols, 1.0f, dg, cols, col, (int)ld, 0.0f,
                     j->parts + ((size_t)t * g->out_c + (size_t)gi * og) * k, k);
        }
        if (j->dx) {
            /* dcol (k, m p) = w^T (k, og) dy (og, m p), then folded back onto dx */
            if (j->pa)
                ddl__gemm_packed(j->pa + gi * ddl__gemm_bf16_packed_words(k, og), 0, k, cols, og, dg, cols, col,
                                 (int)ld);
            else
                ddl_gemm(1, 0, k, cols, og, 1.0f, wg, k, dg, cols, 0.0f, col, (int)ld);
            col2im(&q, m, col, ld, j->dx + n0 * in_sz + gi * group_in);
        }
    }
}

void ddl_conv2d_backward(const ddl_conv2d *g, const float *x, const float *w, const float *dy, float *dx,
                         float *dw, float *db, float *ws)
{
    conv_geo q = conv_view(g);
    if (!geo_ok(g, &q, 0))
        return;
    int k = q.c * g->k_h * g->k_w;
    size_t p = (size_t)q.oh * q.ow;
    int nb = chunk(g->batch, (size_t)k, (size_t)g->out_c, p);
    if (ddl__conv2d_bf16_ok(g)) {
        if (dx)
            ddl__conv2d_bf16_dx(g, w, dy, dx, ws);
        if (!dw || ddl__conv2d_bf16_dw_fits(g)) {
            bias_grad(g->batch, g->out_c, p, dy, db);
            if (dw)
                ddl__conv2d_bf16_dw(g, x, dy, dw, ws);
            return;
        }
        dx = NULL; /* the weight gradient of a small plane: im2col's, below */
    }
    int wino_dx = ddl__wino_ok(g) && direct(), wino_dw = ddl__wino_dw_ok(g) && direct();
    if (wino_dx || wino_dw) { /* the passes the size rule gives Winograd; the others below */
        if (wino_dw)
            bias_grad(g->batch, g->out_c, p, dy, db);
        ddl__wino_backward(g, x, w, dy, wino_dx ? dx : NULL, wino_dw ? dw : NULL, ws);
        if (wino_dx && wino_dw)
            return;
        if (wino_dx)
            dx = NULL;
        else
            dw = NULL, db = NULL;
    }
    if (!dx && !dw) { /* nothing but the bias's left */
        bias_grad(g->batch, g->out_c, p, dy, db);
        return;
    }
    if (ddl__conv2d_wide_dw_ok(g) && direct()) {
        if (!dw || !ddl__conv2d_wide_dw(g, x, dy, dw, db, ws)) /* by samples it sums db too */
            bias_grad(g->batch, g->out_c, p, dy, db);
        if (dx)
            ddl__conv2d_wide_dx(g, w, dy, dx, ws);
        return;
    }
    if (ddl__conv2d_wide_ok(g) && dx && direct()) { /* the input gradient wide, the weights' below (dx NULL) */
        ddl__conv2d_wide_dx(g, w, dy, dx, ws);
        dx = NULL;
    }
    if (ddl__conv2d_dw_ok(g)) {
        ddl__conv2d_dw_backward(g, x, w, dy, dx, dw, db, ws);
        return;
    }
    bias_grad(g->batch, g->out_c, p, dy, db);
    if (ddl__conv1x1_ok(g)) { /* dw by the chunks below: the same sums */
        if (dw)
            ddl__conv1x1_dw(g, x, dy, dw, nb);
        if (dx)
            ddl__conv1x1_dx(g, w, dy, dx);
        return;
    }
    if (ddl__conv1x1_avx2_ok(g)) { /* as ddl__conv1x1_ok's, in 8-float vectors: the same sums */
        if (dw)
            ddl__conv1x1_dw_avx2(g, x, dy, dw, nb);
        if (dx)
            ddl__conv1x1_dx_avx2(g, w, dy, dx);
        return;
    }
    /* chunk by chunk, in waves of one chunk a thread, each wave's weight gradients added to dw
     * in chunk order after it: the same sums whatever the thread count, and the parts added
     * while they are in cache (all the chunks' parts first, then their sum, streamed 140 MB a
     * ResNet-18 step through memory: 5% of its bfloat16 step by im2col). Without dw, one wave. */
    size_t task = ws_floats(nb, (size_t)k, (size_t)g->out_c, p), wn = (size_t)g->out_c * k;
    int chunks = (g->batch + nb - 1) / nb;
    int par = chunks > 1 && ddl__threads() > 1 && task <= DDL__THREAD_SCRATCH;
    int wave = !dw ? chunks : par ? ddl__threads() : 1;
    back_chunks j = {g, &q, x, w, dy, dx, dw ? ws + task : NULL, nb,
                     dx ? pack_weights(g, &q, w, 1, ws, task + parts_floats(g, nb, (size_t)k)) : NULL, 0};
    for (j.first = 0; j.first < chunks; j.first += wave) {
        int n = chunks - j.first < wave ? chunks - j.first : wave;
        if (par && n > 1)
            ddl__parallel_ws(n, backward_chunk, &j, ws);
        else
            for (int t = 0; t < n; t++)
                backward_chunk(&j, t, ws);
        for (int t = 0; dw && t < n; t++)
            for (size_t e = 0; e < wn; e++)
                dw[e] += j.parts[(size_t)t * wn + e];
    }
}

/* ---- transposed convolution ----
 * The forward pass of a transposed convolution is the input-gradient pass of the convolution
 * whose input is this output, with the same weight tensor; and its backward is that
 * convolution's forward. */

size_t ddl_deconv2d_workspace(const ddl_conv2d *g)
{
    conv_geo q = deconv_view(g);
    if (!geo_ok(g, &q, 1))
        return 0;
    size_t k = (size_t)g->out_c * g->k_h * g->k_w, p = (size_t)q.oh * q.ow;
    int nb = chunk(g->batch, k, (size_t)g->in_c, p);
    size_t n = ws_floats(nb, k, (size_t)g->in_c, p);
    size_t direct2x2 = ddl__deconv2x2_geometry(g) ? ddl__deconv2x2_dw_workspace(g, nb) : 0; /* in any pass */
    return n > direct2x2 ? n : direct2x2;
}

void ddl_deconv2d_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y,
                          float *ws)
{
    conv_geo q = deconv_view(g);
    if (!geo_ok(g, &q, 1))
        return;
    if (ddl__deconv2x2_ok(g, 0)) {
        ddl__deconv2x2_forward(g, x, w, b, y);
        return;
    }
    int k = g->out_c * g->k_h * g->k_w;
    size_t p = (size_t)g->in_h * g->in_w, in_sz = (size_t)g->in_c * p, out_sz = (size_t)g->out_c * q.h * q.w;
    int nb = chunk(g->batch, (size_t)k, (size_t)g->in_c, p);
    float *col = ws, *xc = ws + (size_t)nb * k * p; /* col: (k, m p); xc: (in_c, m p) */
    for (int n0 = 0; n0 < g->batch; n0 += nb) {
        int m = g->batch - n0 < nb ? g->batch - n0 : nb;
        int cols = m * (int)p;
        const float *xn = x + n0 * in_sz, *xs = xn;
        if (m > 1) {
            par_gather(m, g->in_c, p, xn, xc);
            xs = xc;
        }
        /* col (k, m p) = w^T (k, in_c) x (in_c, m p) */
        ddl_gemm(1, 0, k, cols, g->in_c, 1.0f, w, k, xs, cols, 0.0f, col, cols);
        par_col2im(&q, m, col, (size_t)cols, y + n0 * out_sz);
        add_bias(m, g->out_c, (size_t)q.h * q.w, b, y + n0 * out_sz);
    }
}

void ddl_deconv2d_backward(const ddl_conv2d *g, const float *x, const float *w, const float *dy, float *dx,
                           float *dw, float *db, float *ws)
{
    conv_geo q = deconv_view(g);
    if (!geo_ok(g, &q, 1))
        return;
    int k = g->out_c * g->k_h * g->k_w;
    size_t p = (size_t)g->in_h * g->in_w, in_sz = (size_t)g->in_c * p, out_sz = (size_t)g->out_c * q.h * q.w;
    int nb = chunk(g->batch, (size_t)k, (size_t)g->in_c, p);
    float *col = ws, *xc = ws + (size_t)nb * k * p;
    bias_grad(g->batch, g->out_c, (size_t)q.h * q.w, dy, db);
    if (ddl__deconv2x2_ok(g, 1)) { /* dw by the chunks below: the same sums */
        ddl__deconv2x2_backward(g, x, w, dy, dx, dw, nb, ws);
        return;
    }
    for (int n0 = 0; n0 < g->batch; n0 += nb) {
        int m = g->batch - n0 < nb ? g->batch - n0 : nb;
        int cols = m * (int)p;
        par_im2col(&q, m, dy + n0 * out_sz, col, (size_t)cols);
        if (dw) {
            const float *xs = x + n0 * in_sz;
            if (m > 1) {
                par_gather(m, g->in_c, p, xs, xc);
                xs = xc;
            }
            /* dw (in_c, k) += x (in_c, m p) col^T (m p, k) */
            ddl_gemm(0, 1, g->in_c, k, cols, 1.0f, xs, cols, col, cols, 1.0f, dw, k);
        }
        if (dx) {
            /* dx (in_c, m p) = w (in_c, k) col (k, m p) */
            float *dxn = dx + n0 * in_sz;
            ddl_gemm(0, 0, g->in_c, cols, k, 1.0f, w, k, col, cols, 0.0f, m > 1 ? xc : dxn, cols);
            if (m > 1)
                par_scatter(m, g->in_c, p, xc, dxn);
        }
    }
}
