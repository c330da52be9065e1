/* conv_depthwise.c - depthwise convolution (groups == in_c; out_c = in_c x a multiplier, output
 * channel oc reading input channel oc / multiplier), MobileNet's: any kernel, strides, pads and
 * dilation, forward and both backward passes, by direct loops over one padded plane at a time.
 * im2col would copy each input value k_h k_w times to feed a gemm of one row per channel; here
 * each tap is one multiply-add read straight from the padded plane. Uses only the workspace.
 *
 * A plane is padded once into (hp, wp) floats that hold every tap of every output and the whole
 * image (zeros around it), so the loops need no bounds. Summation order, fixed whatever the
 * threads: an output is its bias, then the taps in row-major order; an input gradient adds its
 * outputs' terms in order (multiplier, output row, tap); a weight gradient sums each sample's rows
 * in 8 lanes into a double, samples in order, and the bias gradient sums a sample's plane
 * (ddl__row_sum) into a double, samples in order. Threads: the forward pass and the input
 * gradient by (sample, channel) planes, the weight gradient by channel. */
#include "impl.h"

#include <string.h>

typedef struct dw_geo {
    int n, c, mult, h, w, oh, ow, kh, kw, sh, sw, pt, pl, dh, dw;
    int hp, wp;        /* the padded plane */
} dw_geo;

static dw_geo dw_view(const ddl_conv2d *g)
{
    ddl__conv_full f = ddl__conv2d_full(g);
    dw_geo q = {g->batch, g->in_c, g->out_c / g->in_c, g->in_h, g->in_w, ddl_conv2d_out_h(g), ddl_conv2d_out_w(g),
                g->k_h, g->k_w, f.sh, f.sw, f.pt, f.pl, f.dh, f.dw, 0, 0};
    int th = (q.oh - 1) * q.sh + (q.kh - 1) * q.dh + 1, tw = (q.ow - 1) * q.sw + (q.kw - 1) * q.dw + 1;
    q.hp = th > q.pt + q.h ? th : q.pt + q.h;
    q.wp = tw > q.pl + q.w ? tw : q.pl + q.w;
    return q;
}

/* task_floats: a task's scratch: the padded plane and the weight gradient's tap sums. */
static size_t task_floats(const dw_geo *q)
{
    return (size_t)q->hp * q->wp + 2 * (size_t)q->mult * q->kh * q->kw + 16;
}

int ddl__conv2d_dw_ok(const ddl_conv2d *g)
{
    ddl__conv_full f = ddl__conv2d_full(g);
    if (f.groups < 2 || f.groups != g->in_c || g->out_c % g->in_c || ddl_conv2d_out_h(g) < 1 || ddl_conv2d_out_w(g) < 1)
        return 0;
    dw_geo q = dw_view(g);
    return task_floats(&q) <= DDL__THREAD_SCRATCH;
}

size_t ddl__conv2d_dw_workspace(const ddl_conv2d *g)
{
    dw_geo q = dw_view(g);
    return task_floats(&q);
}

/* pad_plane: xp (hp, wp) = the (h, w) plane x at (pt, pl), zeros elsewhere. */
static void pad_plane(const dw_geo *q, const float *x, float *xp)
{
    memset(xp, 0, (size_t)q->pt * q->wp * sizeof *xp);
    for (int y = 0; y < q->h; y++) {
        float *dst = xp + (size_t)(q->pt + y) * q->wp;
        memset(dst, 0, (size_t)q->pl * sizeof *dst);
        memcpy(dst + q->pl, x + (size_t)y * q->w, (size_t)q->w * sizeof *x);
        memset(dst + q->pl + q->w, 0, (size_t)(q->wp - q->pl - q->w) * sizeof *dst);
    }
    memset(xp + (size_t)(q->pt + q->h) * q->wp, 0, (size_t)(q->hp - q->pt - q->h) * q->wp * sizeof *xp);
}

/* ---- forward ---- */

/* out_row: one output row from the padded plane, 16 outputs at a time in registers, SW a
 * constant where the caller can give one (stride 1 and 2 vectorise). */
static inline __attribute__((always_inline)) void out_row(const dw_geo *q, const float *xp, const float *wk, float bv,
                                                          int oy, float *row, int SW)
{
    int ox = 0;
    for (; ox + 16 <= q->ow; ox += 16) {
        float acc[16];
        for (int l = 0; l < 16; l++)
            acc[l] = bv;
        for (int ki = 0; ki < q->kh; ki++) {
            const float *xr = xp + (size_t)(oy * q->sh + ki * q->dh) * q->wp + (size_t)ox * SW;
            for (int kj = 0; kj < q->kw; kj++) {
                float wv = wk[ki * q->kw + kj];
                const float *xs = xr + kj * q->dw;
                for (int l = 0; l < 16; l++)
                    acc[l] += wv * xs[l * SW];
            }
        }
        memcpy(row + ox, acc, sizeof acc);
    }
    for (; ox < q->ow; ox++) {
        float a = bv;
        for (int ki = 0; ki < q->kh; ki++)
            for (int kj = 0; kj < q->kw; kj++)
                a += wk[ki * q->kw + kj] * xp[(size_t)(oy * q->sh + ki * q->dh) * q->wp + (size_t)ox * SW + kj * q->dw];
        row[ox] = a;
    }
}

typedef struct dw_job {
    const dw_geo *q;
    const float *x, *w, *b, *dy;
    float *y, *dx, *dwt, *db;
} dw_job;

DDL__HOT static void forward_plane(void *ctx, int t, float *xp)
{
    const dw_job *j = ctx;
    const dw_geo *q = j->q;
    int n = t / q->c, ic = t % q->c, taps = q->kh * q->kw;
    size_t op = (size_t)q->oh * q->ow;
    pad_plane(q, j->x + (size_t)t * q->h * q->w, xp);
    for (int m = 0; m < q->mult; m++) {
        int oc = ic * q->mult + m;
        const float *wk = j->w + (size_t)oc * taps;
        float bv = j->b ? j->b[oc] : 0.0f, *yo = j->y + ((size_t)n * q->c * q->mult + oc) * op;
        for (int oy = 0; oy < q->oh; oy++) {
            if (q->sw == 1)
                out_row(q, xp, wk, bv, oy, yo + (size_t)oy * q->ow, 1);
            else if (q->sw == 2)
                out_row(q, xp, wk, bv, oy, yo + (size_t)oy * q->ow, 2);
            else
                out_row(q, xp, wk, bv, oy, yo + (size_t)oy * q->ow, q->sw);
        }
    }
}

void ddl__conv2d_dw_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y,
                            float *ws)
{
    dw_geo q = dw_view(g);
    dw_job j = {&q, x, w, b, NULL, y, NULL, NULL, NULL};
    ddl__parallel_ws(q.n * q.c, forward_plane, &j, ws);
}

/* ---- input gradient ---- */

/* in_row: dxp's rows += wk's taps times one row of dy (SW as in out_row). */
static inline __attribute__((always_inline)) void in_row(const dw_geo *q, const float *dyr, const float *wk, int oy,
                                                         float *dxp, int SW)
{
    for (int ki = 0; ki < q->kh; ki++) {
        float *dr = dxp + (size_t)(oy * q->sh + ki * q->dh) * q->wp;
        for (int kj = 0; kj < q->kw; kj++) {
            float wv = wk[ki * q->kw + kj], *d = dr + kj * q->dw;
            for (int ox = 0; ox < q->ow; ox++)
                d[ox * SW] += wv * dyr[ox];
        }
    }
}

DDL__HOT static void dx_plane(void *ctx, int t, float *dxp)
{
    const dw_job *j = ctx;
    const dw_geo *q = j->q;
    int n = t / q->c, ic = t % q->c, taps = q->kh * q->kw;
    size_t op = (size_t)q->oh * q->ow;
    memset(dxp, 0, (size_t)q->hp * q->wp * sizeof *dxp);
    for (int m = 0; m < q->mult; m++) {
        int oc = ic * q->mult + m;
        const float *wk = j->w + (size_t)oc * taps, *dyo = j->dy + ((size_t)n * q->c * q->mult + oc) * op;
        for (int oy = 0; oy < q->oh; oy++) {
            if (q->sw == 1)
                in_row(q, dyo + (size_t)oy * q->ow, wk, oy, dxp, 1);
            else if (q->sw == 2)
                in_row(q, dyo + (size_t)oy * q->ow, wk, oy, dxp, 2);
            else
                in_row(q, dyo + (size_t)oy * q->ow, wk, oy, dxp, q->sw);
        }
    }
    float *dx = j->dx + (size_t)t * q->h * q->w;
    for (int y = 0; y < q->h; y++)
        memcpy(dx + (size_t)y * q->w, dxp + (size_t)(q->pt + y) * q->wp + q->pl, (size_t)q->w * sizeof *dx);
}

/* ---- weight and bias gradients ---- */

/* dot: sum of a[i] b[i sb] over n, in 8 lanes added in a fixed order. */
static inline __attribute__((always_inline)) float dot(const float *a, const float *b, int n, int sb)
{
    float s[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++)
            s[l] += a[i + l] * b[(i + l) * sb];
    for (; i < n; i++)
        s[i - (n & ~7)] += a[i] * b[i * sb];
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

/* tap_sum: one sample's dL/dw of tap (ki, kj) of the output plane dyo read against xp. */
static inline float tap_sum(const dw_geo *q, const float *xp, const float *dyo, int ki, int kj)
{
    float s = 0.0f;
    for (int oy = 0; oy < q->oh; oy++) {
        const float *xs = xp + (size_t)(oy * q->sh + ki * q->dh) * q->wp + kj * q->dw;
        const float *dr = dyo + (size_t)oy * q->ow;
        s += q->sw == 1 ? dot(dr, xs, q->ow, 1) : q->sw == 2 ? dot(dr, xs, q->ow, 2) : dot(dr, xs, q->ow, q->sw);
    }
    return s;
}

DDL__HOT static void dw_channel(void *ctx, int ic, float *ws)
{
    const dw_job *j = ctx;
    const dw_geo *q = j->q;
    int taps = q->kh * q->kw;
    size_t op = (size_t)q->oh * q->ow, plane = (size_t)q->hp * q->wp;
    float *xp = ws;
    double *acc = (double *)(void *)(ws + (plane + 1) / 2 * 2); /* mult x taps sums, 8-byte aligned */
    memset(acc, 0, (size_t)q->mult * taps * sizeof *acc);
    for (int n = 0; n < q->n; n++) {
        pad_plane(q, j->x + ((size_t)n * q->c + ic) * q->h * q->w, xp);
        for (int m = 0; m < q->mult; m++) {
            const float *dyo = j->dy + ((size_t)n * q->c * q->mult + (size_t)ic * q->mult + m) * op;
            for (int t = 0; t < taps; t++)
                acc[m * taps + t] += tap_sum(q, xp, dyo, t / q->kw, t % q->kw);
        }
    }
    for (int m = 0; m < q->mult; m++) {
        int oc = ic * q->mult + m;
        for (int t = 0; t < taps; t++)
            j->dwt[(size_t)oc * taps + t] += (float)acc[m * taps + t];
        if (j->db) {
            double s = 0.0;
            for (int n = 0; n < q->n; n++)
                s += ddl__row_sum(j->dy + ((size_t)n * q->c * q->mult + oc) * op, (int)op);
            j->db[oc] += (float)s;
        }
    }
}

/* bias_only: db += the sums of dy, when there is no weight gradient to compute beside them. */
static void bias_only(const dw_geo *q, const float *dy, float *db)
{
    int oc_n = q->c * q->mult;
    size_t op = (size_t)q->oh * q->ow;
    for (int oc = 0; oc < oc_n; oc++) {
        double s = 0.0;
        for (int n = 0; n < q->n; n++)
            s += ddl__row_sum(dy + ((size_t)n * oc_n + oc) * op, (int)op);
        db[oc] += (float)s;
    }
}

void ddl__conv2d_dw_backward(const ddl_conv2d *g, const float *x, const float *w, const float *dy, float *dx,
                             float *dw, float *db, float *ws)
{
    dw_geo q = dw_view(g);
    dw_job j = {&q, x, w, NULL, dy, NULL, dx, dw, db};
    if (dw)
        ddl__parallel_ws(q.c, dw_channel, &j, ws);
    else if (db)
        bias_only(&q, dy, db);
    if (dx)
        ddl__parallel_ws(q.n * q.c, dx_plane, &j, ws);
}
