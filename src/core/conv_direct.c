/* conv_direct.c - direct convolution for one input channel and stride 1 (the first layer of
 * LeNet and U-Net), where im2col would copy the image k*k times to feed a gemm with only k*k
 * rows. Forward, and the weight gradient (not the input gradient: a first layer needs none).
 * Uses only the caller's workspace: one zero-padded image and one "wide" plane.
 *
 * The trick: output rows are computed at the padded width wp instead of ow, so each tap is one
 * long contiguous multiply-add over oh * wp floats (which vectorises well) instead of oh short
 * rows; the wp - ow extra columns are garbage and dropped (forward) or zeroed (gradient). */
#include "impl.h"

#include <string.h>

#define DIRECT_MAX_K 11

/* The hot loops are DDL__HOT (impl.h): AVX-512 and AVX2 clones chosen at load time. */

int ddl__conv2d_direct_ok(const ddl_conv2d *g)
{
#ifdef DDL_NO_DIRECT_CONV /* to measure against im2col + gemm */
    return 0;
#endif
    return g->in_c == 1 && g->stride == 1 && g->k_h <= DIRECT_MAX_K && g->k_w <= DIRECT_MAX_K &&
           g->in_h + 2 * g->pad >= g->k_h && g->in_w + 2 * g->pad >= g->k_w && g->pad >= 0;
}

/* spare_rows: zero rows after the padded image, enough for a read of 32 + k_w floats past it. */
static int spare_rows(const ddl_conv2d *g)
{
    int wp = g->in_w + 2 * g->pad;
    return (32 + g->k_w + wp - 1) / wp + 1;
}

size_t ddl__conv2d_direct_workspace(const ddl_conv2d *g)
{
    size_t wp = (size_t)(g->in_w + 2 * g->pad), hp = (size_t)(g->in_h + 2 * g->pad) + spare_rows(g);
    size_t oh = (size_t)(g->in_h + 2 * g->pad - g->k_h + 1);
    return hp * wp + oh * wp + 32;
}

/* pad_image: xp (h + 2 pad + spare, wp) = x (h, w) with a zero border; the spare zero rows let
 * the last taps of the wide rows, rounded up to 32, read past the last image row inside the buffer. */
static void pad_image(const ddl_conv2d *g, const float *x, float *xp, int wp)
{
    int hp = g->in_h + 2 * g->pad + spare_rows(g);
    memset(xp, 0, (size_t)hp * wp * sizeof *xp);
    for (int y = 0; y < g->in_h; y++)
        memcpy(xp + (size_t)(y + g->pad) * wp + g->pad, x + (size_t)y * g->in_w, (size_t)g->in_w * sizeof *x);
}

/* Eight floats; unaligned loads and stores go through the _u type. */
typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4)));

/* wide_forward: acc (oh, wp) = b + sum over taps of w (kh, kw) times xp shifted by the tap.
 * Blocks of 32 outputs stay in four vector registers across all taps (four independent
 * chains hide the multiply-add latency); len is rounded up to 32: the workspace has room, and
 * xp has spare zero rows to read from. */
DDL__HOT
static void wide_forward(size_t len, int kh, int kw, int wp, const float *xp, const float *w, float b, float *acc)
{
    int taps = kh * kw;
    size_t off[DIRECT_MAX_K * DIRECT_MAX_K];
    for (int t = 0; t < taps; t++)
        off[t] = (size_t)(t / kw) * wp + (size_t)(t % kw);
    for (size_t j = 0; j < len; j += 32) {
        v8 a0 = {b, b, b, b, b, b, b, b}, a1 = a0, a2 = a0, a3 = a0;
        for (int t = 0; t < taps; t++) {
            const float *src = xp + off[t] + j;
            v8 wv = {w[t], w[t], w[t], w[t], w[t], w[t], w[t], w[t]};
            a0 += wv * *(const v8u *)(src);
            a1 += wv * *(const v8u *)(src + 8);
            a2 += wv * *(const v8u *)(src + 16);
            a3 += wv * *(const v8u *)(src + 24);
        }
        *(v8u *)(acc + j) = a0;
        *(v8u *)(acc + j + 8) = a1;
        *(v8u *)(acc + j + 16) = a2;
        *(v8u *)(acc + j + 24) = a3;
    }
}

/* wide_grad: dw (kh, kw) += sum over j of dyw[j] * xp[j + tap offset]; dyw (oh, wp) has zeros
 * in its extra columns and up to the rounded length. Four vector accumulators per tap, summed
 * in a fixed order, so results do not depend on anything but the inputs. */
DDL__HOT
static void wide_grad(size_t len, int kh, int kw, int wp, const float *xp, const float *dyw, float *dw)
{
    for (int ki = 0; ki < kh; ki++)
        for (int kj = 0; kj < kw; kj++) {
            const float *src = xp + (size_t)ki * wp + kj;
            v8 a0 = {0}, a1 = a0, a2 = a0, a3 = a0;
            for (size_t j = 0; j < len; j += 32) {
                a0 += *(const v8u *)(dyw + j) * *(const v8u *)(src + j);
                a1 += *(const v8u *)(dyw + j + 8) * *(const v8u *)(src + j + 8);
                a2 += *(const v8u *)(dyw + j + 16) * *(const v8u *)(src + j + 16);
                a3 += *(const v8u *)(dyw + j + 24) * *(const v8u *)(src + j + 24);
            }
            v8 a = (a0 + a1) + (a2 + a3);
            dw[ki * kw + kj] += ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
        }
}

/* Threads: the forward pass is one task per sample, the gradient one per range of output
 * channels (over every sample in order, as with one thread), each in its thread's scratch. */

typedef struct direct_job {
    const ddl_conv2d *g;
    const float *x, *w, *b, *dy;
    float *y, *dw;
    int per; /* weight gradient: output channels per task */
} direct_job;

static void forward_sample(void *ctx, int n, float *ws)
{
    const direct_job *j = ctx;
    const ddl_conv2d *g = j->g;
    int wp = g->in_w + 2 * g->pad, oh = g->in_h + 2 * g->pad - g->k_h + 1, ow = wp - g->k_w + 1;
    size_t in_sz = (size_t)g->in_h * g->in_w, p = (size_t)oh * ow, kk = (size_t)g->k_h * g->k_w;
    float *xp = ws, *acc = ws + (size_t)(g->in_h + 2 * g->pad + spare_rows(g)) * wp;
    pad_image(g, j->x + n * in_sz, xp, wp);
    for (int oc = 0; oc < g->out_c; oc++) {
        wide_forward((size_t)oh * wp, g->k_h, g->k_w, wp, xp, j->w + oc * kk, j->b ? j->b[oc] : 0.0f, acc);
        float *yo = j->y + ((size_t)n * g->out_c + oc) * p; /* (oh, ow) */
        for (int oy = 0; oy < oh; oy++)
            memcpy(yo + (size_t)oy * ow, acc + (size_t)oy * wp, (size_t)ow * sizeof *acc);
    }
}

/* task_fits: a task's room fits a thread's scratch, so the pool may run the tasks. */
static int task_fits(const ddl_conv2d *g) { return ddl__conv2d_direct_workspace(g) <= DDL__THREAD_SCRATCH; }

void ddl__conv2d_direct_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y,
                                float *ws)
{
    direct_job j = {g, x, w, b, NULL, y, NULL, 0};
    if (ddl__threads() > 1 && task_fits(g)) {
        ddl__parallel_ws(g->batch, forward_sample, &j, ws);
        return;
    }
    for (int n = 0; n < g->batch; n++)
        forward_sample(&j, n, ws);
}

/* grad_range: output channels [lo, hi) over every sample in order, each image padded once. */
static void grad_range(const direct_job *j, int lo, int hi, float *ws)
{
    const ddl_conv2d *g = j->g;
    int wp = g->in_w + 2 * g->pad, oh = g->in_h + 2 * g->pad - g->k_h + 1, ow = wp - g->k_w + 1;
    size_t in_sz = (size_t)g->in_h * g->in_w, p = (size_t)oh * ow, kk = (size_t)g->k_h * g->k_w;
    float *xp = ws, *dyw = ws + (size_t)(g->in_h + 2 * g->pad + spare_rows(g)) * wp;
    memset(dyw, 0, ((size_t)oh * wp + 32) * sizeof *dyw); /* extra columns and the rounding stay 0 */
    for (int n = 0; n < g->batch; n++) {
        pad_image(g, j->x + n * in_sz, xp, wp);
        for (int oc = lo; oc < hi; oc++) {
            const float *d = j->dy + ((size_t)n * g->out_c + oc) * p;
            for (int oy = 0; oy < oh; oy++)
                memcpy(dyw + (size_t)oy * wp, d + (size_t)oy * ow, (size_t)ow * sizeof *d);
            wide_grad(((size_t)oh * wp + 31) / 32 * 32, g->k_h, g->k_w, wp, xp, dyw, j->dw + oc * kk);
        }
    }
}

static void grad_task(void *ctx, int t, float *ws)
{
    const direct_job *j = ctx;
    int lo = t * j->per, hi = lo + j->per < j->g->out_c ? lo + j->per : j->g->out_c;
    if (lo < hi)
        grad_range(j, lo, hi, ws);
}

/* Threads: ranges of output channels; each channel's sums are the same in any range. */
void ddl__conv2d_direct_grad(const ddl_conv2d *g, const float *x, const float *dy, float *dw, float *ws)
{
    int threads = ddl__threads();
    direct_job j = {g, x, NULL, NULL, dy, NULL, dw, (g->out_c + threads - 1) / threads};
    if (threads > 1 && g->out_c > 1 && task_fits(g)) {
        ddl__parallel_ws((g->out_c + j.per - 1) / j.per, grad_task, &j, ws);
        return;
    }
    grad_range(&j, 0, g->out_c, ws);
}
