/* pool2d.c - max and average pooling of any geometry (ddl.h's ddl_pool2d: rectangular windows,
 * a stride per axis, a pad per side, dilation for the maximum, ceil_mode, count_include_pad),
 * forward and backward. A plain window (square, one stride, no padding, dilation or ceil
 * overhang) goes to ops.c's and avgpool.c's kernels, so the presets keep their bits and speed.
 * Planes are independent: spread over the threads in ranges whose cuts cannot change a bit.
 * Each output's window is read in row-major order; the maximum keeps the first largest value
 * (a NaN over numbers), as ops.c's loop; padding never wins. The average's input gradient adds
 * its windows in output order. */
#include "impl.h"

#include <math.h>
#include <string.h>

#define GRAIN_FLOATS ((size_t)16384)

typedef struct pgeo {
    int h, w, oh, ow, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, count_pad;
} pgeo;

static int dil(int d) { return d > 0 ? d : 1; }

int ddl_pool2d_out(const ddl_pool2d *p, int axis, int in)
{
    int k = axis ? p->k_w : p->k_h, s = axis ? p->stride_w : p->stride_h, d = dil(axis ? p->dilation_w : p->dilation_h);
    int a = axis ? p->pad_l : p->pad_t, b = axis ? p->pad_r : p->pad_b;
    if (k < 1 || s < 1 || a < 0 || b < 0 || in < 1)
        return 0;
    long long span = (long long)in + a + b - (long long)d * (k - 1) - 1;
    if (span < 0)
        return 0;
    long long out = (p->ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (p->ceil_mode && (out - 1) * s >= (long long)in + a) /* PyTorch: no window starts in the bottom pad */
        out--;
    return out > 0x7fffffff ? 0 : (int)out;
}

static pgeo view(const ddl_pool2d *p, int h, int w)
{
    pgeo q = {h, w, ddl_pool2d_out(p, 0, h), ddl_pool2d_out(p, 1, w), p->k_h, p->k_w, p->stride_h, p->stride_w,
              p->pad_t, p->pad_l, p->pad_b, p->pad_r, dil(p->dilation_h), dil(p->dilation_w), p->count_include_pad};
    return q;
}

/* plain: the geometry ops.c's and avgpool.c's kernels compute (their output size included). */
static int plain(const ddl_pool2d *p, int h, int w)
{
    return p->k_h == p->k_w && p->stride_h == p->stride_w && !p->pad_t && !p->pad_l && !p->pad_b && !p->pad_r &&
           dil(p->dilation_h) == 1 && dil(p->dilation_w) == 1 && h >= p->k_h && w >= p->k_w &&
           ddl_pool2d_out(p, 0, h) == (h - p->k_h) / p->stride_h + 1 && ddl_pool2d_out(p, 1, w) == (w - p->k_w) / p->stride_w + 1;
}

/* taps: the window's first and last tap (lo, hi) inside [0, n) on one axis, for the window
 * starting at `start` of k taps d apart; hi < lo when none is inside. */
static void taps(int start, int k, int d, int n, int *lo, int *hi)
{
    int a = start < 0 ? (-start + d - 1) / d : 0, b = k - 1;
    if (start + (long long)b * d > n - 1)
        b = (n - 1 - start) < 0 ? -1 : (n - 1 - start) / d;
    *lo = a;
    *hi = b;
}

int ddl_pool2d_ok(const ddl_pool2d *p, int avg, int h, int w)
{
    if (!p || p->k_h < 1 || p->k_w < 1 || p->stride_h < 1 || p->stride_w < 1 || p->pad_t < 0 || p->pad_l < 0 ||
        p->pad_b < 0 || p->pad_r < 0 || p->dilation_h < 0 || p->dilation_w < 0)
        return 0;
    if (avg && (dil(p->dilation_h) != 1 || dil(p->dilation_w) != 1))
        return 0;
    pgeo q = view(p, h, w);
    if (q.oh < 1 || q.ow < 1)
        return 0;
    for (int oy = 0; oy < q.oh; oy++) { /* every window holds a tap of the image */
        int lo, hi;
        taps(oy * q.sh - q.pt, q.kh, q.dh, q.h, &lo, &hi);
        if (hi < lo)
            return 0;
    }
    for (int ox = 0; ox < q.ow; ox++) {
        int lo, hi;
        taps(ox * q.sw - q.pl, q.kw, q.dw, q.w, &lo, &hi);
        if (hi < lo)
            return 0;
    }
    return 1;
}

/* ---- max ---- */

typedef struct pjob {
    const pgeo *q;
    const float *in;
    float *out;
    int32_t *arg;
    const int32_t *arg_in;
    const float *keep; /* unpooling: as ddl__maxpool2d_backward_relu's y, or NULL */
} pjob;

/* max_at: the general window, output (oy, ox) of one plane, its taps clipped to the image. */
static void max_at(const pgeo *q, const float *img, int oy, int ox, float *out, int32_t *arg)
{
    int y0 = oy * q->sh - q->pt, x0 = ox * q->sw - q->pl, i0, i1, j0, j1, best = -1;
    taps(y0, q->kh, q->dh, q->h, &i0, &i1);
    taps(x0, q->kw, q->dw, q->w, &j0, &j1);
    float bv = -INFINITY;
    for (int i = i0; i <= i1; i++)
        for (int k = j0; k <= j1; k++) {
            int at = (y0 + i * q->dh) * q->w + x0 + k * q->dw;
            float v = img[at];
            if (best < 0 || v > bv || (isnan(v) && !isnan(bv)))
                bv = v, best = at;
        }
    *out = bv;
    *arg = best;
}

/* inside: the outputs [*a, *b) on one axis whose windows (k taps d apart, from o s - pad) lie in [0, n) */
static void inside(int out, int s, int pad, int k, int d, int n, int *a, int *b)
{
    int lo = (pad + s - 1) / s, last = n - 1 - (k - 1) * d + pad; /* o s - pad >= 0; o s - pad + (k - 1) d <= n - 1 */
    int hi = last < 0 ? 0 : last / s + 1;
    if (hi > out)
        hi = out;
    if (lo > hi)
        lo = hi;
    *a = lo;
    *b = hi;
}

static void max_planes(void *ctx, size_t lo, size_t hi)
{
    const pjob *j = ctx;
    const pgeo *q = j->q;
    size_t hw = (size_t)q->h * q->w, ohw = (size_t)q->oh * q->ow;
    int ya, yb, xa, xb;
    inside(q->oh, q->sh, q->pt, q->kh, q->dh, q->h, &ya, &yb);
    inside(q->ow, q->sw, q->pl, q->kw, q->dw, q->w, &xa, &xb);
    for (size_t plane = lo; plane < hi; plane++) {
        const float *img = j->in + plane * hw;
        for (int oy = 0; oy < q->oh; oy++) {
            float *out = j->out + plane * ohw + (size_t)oy * q->ow;
            int32_t *arg = j->arg + plane * ohw + (size_t)oy * q->ow;
            int a = oy >= ya && oy < yb ? xa : q->ow, b = oy >= ya && oy < yb ? xb : q->ow;
            for (int ox = 0; ox < a; ox++)
                max_at(q, img, oy, ox, out + ox, arg + ox);
            int y0 = oy * q->sh - q->pt;
            if (a < b &&
                !ddl__maxpool_inside_avx512(img, q->w, q->kh, q->kw, q->dh, q->dw, q->sw, y0, -q->pl, a, b, out, arg))
                for (int ox = a; ox < b; ox++)
                    max_at(q, img, oy, ox, out + ox, arg + ox);
            for (int ox = b; ox < q->ow; ox++)
                max_at(q, img, oy, ox, out + ox, arg + ox);
        }
    }
}

void ddl_maxpool2d_forward(const ddl_pool2d *p, int n, int c, int h, int w, const float *x, float *y,
                           int32_t *argmax)
{
    if (plain(p, h, w)) {
        ddl_maxpool_forward(n, c, h, w, p->k_h, p->stride_h, x, y, argmax);
        return;
    }
    if (!ddl_pool2d_ok(p, 0, h, w))
        return;
    pgeo q = view(p, h, w);
    pjob j = {&q, x, y, argmax, NULL, NULL};
    ddl__parallel_range((size_t)n * c, GRAIN_FLOATS / ((size_t)h * w) + 1, max_planes, &j);
}

static void unmax_planes(void *ctx, size_t lo, size_t hi)
{
    const pjob *j = ctx;
    const pgeo *q = j->q;
    size_t hw = (size_t)q->h * q->w, ohw = (size_t)q->oh * q->ow;
    memset(j->out + lo * hw, 0, (hi - lo) * hw * sizeof *j->out);
    for (size_t plane = lo; plane < hi; plane++)
        for (size_t i = 0; i < ohw; i++) /* windows in order: overlapping ones may share a maximum */
            if (j->arg_in[plane * ohw + i] >= 0)
                j->out[plane * hw + (size_t)j->arg_in[plane * ohw + i]] +=
                    !j->keep || j->keep[plane * ohw + i] > 0.0f ? j->in[plane * ohw + i] : 0.0f;
}

void ddl_maxpool2d_backward(const ddl_pool2d *p, int n, int c, int h, int w, const float *dy,
                            const int32_t *argmax, float *dx)
{
    ddl__maxpool2d_backward_relu(p, n, c, h, w, dy, argmax, NULL, dx);
}

void ddl__maxpool2d_backward_relu(const ddl_pool2d *p, int n, int c, int h, int w, const float *dy,
                                  const int32_t *argmax, const float *y, float *dx)
{
    if (plain(p, h, w)) {
        ddl__maxpool_backward_keep(n, c, h, w, p->k_h, p->stride_h, dy, argmax, y, dx);
        return;
    }
    if (!ddl_pool2d_ok(p, 0, h, w)) {
        memset(dx, 0, (size_t)n * c * h * w * sizeof *dx);
        return;
    }
    pgeo q = view(p, h, w);
    pjob j = {&q, dy, dx, NULL, argmax, y};
    ddl__parallel_range((size_t)n * c, GRAIN_FLOATS / ((size_t)h * w) + 1, unmax_planes, &j);
}

/* ---- average ---- */

/* divisor: the taps window (oy, ox) averages: those inside the image, or with count_pad those
 * inside the padded image (a ceil_mode window past it counts only up to its edge, as PyTorch). */
static int divisor(const pgeo *q, int y0, int x0, int i0, int i1, int j0, int j1)
{
    if (!q->count_pad)
        return (i1 - i0 + 1) * (j1 - j0 + 1);
    int ye = y0 + q->kh, xe = x0 + q->kw;
    ye = ye < q->h + q->pb ? ye : q->h + q->pb;
    xe = xe < q->w + q->pr ? xe : q->w + q->pr;
    return (ye - y0) * (xe - x0);
}

static void avg_planes(void *ctx, size_t lo, size_t hi)
{
    const pjob *j = ctx;
    const pgeo *q = j->q;
    size_t hw = (size_t)q->h * q->w, ohw = (size_t)q->oh * q->ow;
    for (size_t plane = lo; plane < hi; plane++) {
        const float *img = j->in + plane * hw;
        for (int oy = 0; oy < q->oh; oy++) {
            int y0 = oy * q->sh - q->pt, i0, i1;
            taps(y0, q->kh, 1, q->h, &i0, &i1);
            for (int ox = 0; ox < q->ow; ox++) {
                int x0 = ox * q->sw - q->pl, j0, j1;
                taps(x0, q->kw, 1, q->w, &j0, &j1);
                float sum = 0.0f;
                for (int i = i0; i <= i1; i++)
                    for (int k = j0; k <= j1; k++)
                        sum += img[(y0 + i) * q->w + x0 + k];
                j->out[plane * ohw + (size_t)oy * q->ow + ox] = sum / (float)divisor(q, y0, x0, i0, i1, j0, j1);
            }
        }
    }
}

void ddl_avgpool2d_forward(const ddl_pool2d *p, int n, int c, int h, int w, const float *x, float *y)
{
    if (plain(p, h, w)) {
        ddl_avgpool_forward(n, c, h, w, p->k_h, p->stride_h, x, y);
        return;
    }
    if (!ddl_pool2d_ok(p, 1, h, w))
        return;
    pgeo q = view(p, h, w);
    pjob j = {&q, x, y, NULL, NULL, NULL};
    ddl__parallel_range((size_t)n * c, GRAIN_FLOATS / ((size_t)h * w) + 1, avg_planes, &j);
}

static void unavg_planes(void *ctx, size_t lo, size_t hi)
{
    const pjob *j = ctx;
    const pgeo *q = j->q;
    size_t hw = (size_t)q->h * q->w, ohw = (size_t)q->oh * q->ow;
    memset(j->out + lo * hw, 0, (hi - lo) * hw * sizeof *j->out);
    for (size_t plane = lo; plane < hi; plane++) {
        float *dx = j->out + plane * hw;
        for (int oy = 0; oy < q->oh; oy++) {
            int y0 = oy * q->sh - q->pt, i0, i1;
            taps(y0, q->kh, 1, q->h, &i0, &i1);
            for (int ox = 0; ox < q->ow; ox++) {
                int x0 = ox * q->sw - q->pl, j0, j1;
                taps(x0, q->kw, 1, q->w, &j0, &j1);
                float g = j->in[plane * ohw + (size_t)oy * q->ow + ox] / (float)divisor(q, y0, x0, i0, i1, j0, j1);
                for (int i = i0; i <= i1; i++)
                    for (int k = j0; k <= j1; k++)
                        dx[(y0 + i) * q->w + x0 + k] += g;
            }
        }
    }
}

void ddl_avgpool2d_backward(const ddl_pool2d *p, int n, int c, int h, int w, const float *dy, float *dx)
{
    if (plain(p, h, w)) {
        ddl_avgpool_backward(n, c, h, w, p->k_h, p->stride_h, dy, dx);
        return;
    }
    if (!ddl_pool2d_ok(p, 1, h, w)) {
        memset(dx, 0, (size_t)n * c * h * w * sizeof *dx);
        return;
    }
    pgeo q = view(p, h, w);
    pjob j = {&q, dy, dx, NULL, NULL, NULL};
    ddl__parallel_range((size_t)n * c, GRAIN_FLOATS / ((size_t)h * w) + 1, unavg_planes, &j);
}
