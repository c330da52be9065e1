/* resize.c - nearest and bilinear resizing of (H, W) planes, forward and backward, as ONNX's
 * Resize computes it (and onnxruntime: the source coordinate in float, clamped to the plane,
 * the four weights of a bilinear read as its products): what PyTorch's nn.Upsample and
 * F.interpolate export to. The kernels split the work by planes (sample, channel), one thread
 * each, so the backward pass, which scatters each output gradient into up to four input
 * pixels, adds them in the same order whatever the thread count. Allocates nothing; the
 * coordinates are computed as they are used (a division a row and a column). */
#include "impl.h"

#include <math.h>
#include <string.h>

#define GRAIN 32768 /* outputs a task takes at least */

/* source: the input coordinate of output coordinate x along an axis of in -> out pixels. */
static float source(int coord, int x, float scale, int out, int in)
{
    float xf = (float)x;
    switch (coord) {
    case DDL_RESIZE_HALF_PIXEL: return (xf + 0.5f) / scale - 0.5f;
    case DDL_RESIZE_PYTORCH_HALF_PIXEL: return out > 1 ? (xf + 0.5f) / scale - 0.5f : 0.0f;
    case DDL_RESIZE_ALIGN_CORNERS: return out == 1 ? 0.0f : xf * (float)(in - 1) / (float)(out - 1);
    default: return xf / scale; /* DDL_RESIZE_ASYMMETRIC */
    }
}

/* nearest: the input pixel of output x, rounded as the mode says and clamped to [0, in). */
static int nearest(const ddl_resize2d *r, int x, float scale, int out, int in)
{
    if (scale == 1.0f && out == in) /* onnxruntime maps an unscaled axis straight through */
        return x;
    float s = source(r->coord, x, scale, out, in);
    double v;
    switch (r->nearest) {
    case DDL_RESIZE_CEIL: v = ceil(s); break;
    case DDL_RESIZE_ROUND_PREFER_FLOOR: v = s == (float)(int64_t)s + 0.5f ? floor(s) : round(s); break;
    case DDL_RESIZE_ROUND_PREFER_CEIL: v = round(s); break;
    default: v = floor(s); break;
    }
    return v < 0.0 ? 0 : v >= (double)in ? in - 1 : (int)v;
}

/* linear: the two input pixels around output x and their weights (w0 for i0, w1 for i1). */
static void linear(const ddl_resize2d *r, int x, float scale, int out, int in, int *i0, int *i1, float *w0,
                   float *w1)
{
    float s = scale == 1.0f ? (float)x : source(r->coord, x, scale, out, in);
    s = s < 0.0f ? 0.0f : s > (float)(in - 1) ? (float)(in - 1) : s;
    int a = (int)s < in - 1 ? (int)s : in - 1, b = a + 1 < in - 1 ? a + 1 : in - 1;
    float da = fabsf(s - (float)a), db = fabsf(s - (float)b);
    if (a == b)
        da = db = 0.5f;
    *i0 = a, *i1 = b;
    *w0 = db, *w1 = da; /* the nearer pixel weighs more */
}

typedef struct job {
    const ddl_resize2d *r;
    const float *in;
    float *out;
} job;

static void forward_planes(void *ctx, size_t lo, size_t hi)
{
    const job *j = ctx;
    const ddl_resize2d *r = j->r;
    size_t isz = (size_t)r->in_h * r->in_w, osz = (size_t)r->out_h * r->out_w;
    for (size_t p = lo; p < hi; p++) {
        const float *x = j->in + p * isz;
        float *y = j->out + p * osz;
        for (int oy = 0; oy < r->out_h; oy++) {
            float *yr = y + (size_t)oy * r->out_w;
            if (r->mode == DDL_RESIZE_NEAREST) {
                const float *xr = x + (size_t)nearest(r, oy, r->scale_h, r->out_h, r->in_h) * r->in_w;
                for (int ox = 0; ox < r->out_w; ox++)
                    yr[ox] = xr[nearest(r, ox, r->scale_w, r->out_w, r->in_w)];
                continue;
            }
            int y1, y2, x1, x2;
            float wy1, wy2, wx1, wx2; /* wy1: y1's weight (onnxruntime's dy2) */
            linear(r, oy, r->scale_h, r->out_h, r->in_h, &y1, &y2, &wy1, &wy2);
            const float *r1 = x + (size_t)y1 * r->in_w, *r2 = x + (size_t)y2 * r->in_w;
            for (int ox = 0; ox < r->out_w; ox++) {
                linear(r, ox, r->scale_w, r->out_w, r->in_w, &x1, &x2, &wx1, &wx2);
                yr[ox] = wx1 * wy1 * r1[x1] + wx2 * wy1 * r1[x2] + wx1 * wy2 * r2[x1] + wx2 * wy2 * r2[x2];
            }
        }
    }
}

static void backward_planes(void *ctx, size_t lo, size_t hi)
{
    const job *j = ctx;
    const ddl_resize2d *r = j->r;
    size_t isz = (size_t)r->in_h * r->in_w, osz = (size_t)r->out_h * r->out_w;
    for (size_t p = lo; p < hi; p++) {
        const float *dy = j->in + p * osz;
        float *dx = j->out + p * isz;
        memset(dx, 0, isz * sizeof *dx);
        for (int oy = 0; oy < r->out_h; oy++) { /* row by row, left to right: a fixed order */
            const float *dr = dy + (size_t)oy * r->out_w;
            if (r->mode == DDL_RESIZE_NEAREST) {
                float *xr = dx + (size_t)nearest(r, oy, r->scale_h, r->out_h, r->in_h) * r->in_w;
                for (int ox = 0; ox < r->out_w; ox++)
                    xr[nearest(r, ox, r->scale_w, r->out_w, r->in_w)] += dr[ox];
                continue;
            }
            int y1, y2, x1, x2;
            float wy1, wy2, wx1, wx2;
            linear(r, oy, r->scale_h, r->out_h, r->in_h, &y1, &y2, &wy1, &wy2);
            float *r1 = dx + (size_t)y1 * r->in_w, *r2 = dx + (size_t)y2 * r->in_w;
            for (int ox = 0; ox < r->out_w; ox++) {
                linear(r, ox, r->scale_w, r->out_w, r->in_w, &x1, &x2, &wx1, &wx2);
                float d = dr[ox];
                r1[x1] += wx1 * wy1 * d;
                r1[x2] += wx2 * wy1 * d;
                r2[x1] += wx1 * wy2 * d;
                r2[x2] += wx2 * wy2 * d;
            }
        }
    }
}

static void run(const ddl_resize2d *r, const float *in, float *out, void (*fn)(void *, size_t, size_t))
{
    if (!r || r->batch < 1 || r->c < 1 || r->in_h < 1 || r->in_w < 1 || r->out_h < 1 || r->out_w < 1)
        return;
    job j = {r, in, out};
    size_t planes = (size_t)r->batch * r->c, per = (size_t)r->out_h * r->out_w;
    ddl__parallel_range(planes, GRAIN / per + 1, fn, &j);
}

void ddl_resize2d_forward(const ddl_resize2d *r, const float *x, float *y) { run(r, x, y, forward_planes); }

void ddl_resize2d_backward(const ddl_resize2d *r, const float *dy, float *dx) { run(r, dy, dx, backward_planes); }
