/* conv_depthwise.c - depthwise convolution (groups == in_c; out_c = in_c x a multiplier, output
 * channel oc reading input channel oc / multiplier), MobileNet's: any kernel, strides, pads and
 * dilation, forward and both backward passes, by direct loops over one padded plane at a time.
 * im2col would copy each input value k_h k_w times to feed a gemm of one row per channel; here
 * each tap is one multiply-add read straight from the padded plane. Uses only the workspace.
 *
 * A plane is padded once into (hp, wp) floats that hold every tap of every output and the whole
 * image (zeros around it), so the loops need no bounds, and split by column into sw phases (the
 * columns c with c % sw == p side by side), so that at any stride the taps of 16 neighbouring
 * outputs are 16 neighbouring floats: one vector load, and 16 outputs in one register (a row
 * ends in a part vector whose extra lanes read the zero slack and are dropped). MobileNetV2's
 * 3x3 at 16x16, 144 channels, batch 64, one thread: forward 5.4 -> 2.1 ms, input gradient 7.1 ->
 * 3.6, weight gradient 8.8 -> 4.6, against loops of one float at a time. Summation order, fixed whatever the threads: an output is its bias, then the
 * taps in row-major order; an input gradient adds its outputs' terms in order (multiplier,
 * output row, tap); a weight gradient keeps 16 lane sums per tap over the samples and rows in
 * order, added up in a fixed order at the end, and the bias gradient sums a
 * sample's plane (ddl__row_sum's order) into a double, samples in order
 * (ddl__planes_sum). Threads: the forward pass and
 * the input gradient by (sample, channel) planes, the weight gradient by channel. Where the AVX2
 * tiles run (ddl__avx2_tiles: AVX2 and FMA, no AVX-512) each pass has a variant in 8-float vectors
 * with the same bits (the 16-float code's AVX2 clone moved its vectors through the stack): on an
 * AMD EPYC Zen 3, the MobileNetV2 layer above 21.2 / 7.1 / 20.4 -> 2.6 / 4.0 / 5.0 ms. */
#include "impl.h"

#include <string.h>

typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4)));
typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4)));
/* DW_AVX2: the AVX2 variants, contracted as DDL__HOT's clones are (their bits) */
#define DW_AVX2 __attribute__((target("avx2,fma"), optimize("fp-contract=fast")))

typedef struct dw_geo {
    int n, c, mult, h, w, oh, ow, kh, kw, sh, sw, pt, pl, dh, dw;
    int hp, wp;        /* the padded plane */
    int wq;            /* columns of one phase: ceil(wp / sw) and a vector of slack */
    size_t phase;      /* floats of one phase (hp wq) */
} dw_geo;

static dw_geo dw_view(const ddl_conv2d *g)
{
    ddl__conv_full f = ddl__conv2d_full(g);
    dw_geo q = {g->batch, g->in_c, g->out_c / g->in_c, g->in_h, g->in_w, ddl_conv2d_out_h(g), ddl_conv2d_out_w(g),
                g->k_h, g->k_w, f.sh, f.sw, f.pt, f.pl, f.dh, f.dw, 0, 0, 0, 0};
    int th = (q.oh - 1) * q.sh + (q.kh - 1) * q.dh + 1, tw = (q.ow - 1) * q.sw + (q.kw - 1) * q.dw + 1;
    q.hp = th > q.pt + q.h ? th : q.pt + q.h;
    q.wp = tw > q.pl + q.w ? tw : q.pl + q.w;
    q.wq = (q.wp + q.sw - 1) / q.sw + 16;
    q.phase = (size_t)q.hp * q.wq;
    return q;
}

/* plane_floats: a padded plane in its phases. task_floats: a task's scratch: the plane, dy's plane
 * with its rows widened to whole vectors, and the weight gradient's lane sums. */
static size_t plane_floats(const dw_geo *q) { return (q->sw * q->phase + 15) / 16 * 16; }
static size_t row_floats(const dw_geo *q) { return ((size_t)q->ow + 15) / 16 * 16; }

static size_t task_floats(const dw_geo *q)
{
    return plane_floats(q) + row_floats(q) * q->oh + (size_t)q->mult * q->kh * q->kw * 16 + 16;
}

#define MAX_TAPS 256 /* a kernel's taps whose offsets a pass keeps on its stack (larger: im2col) */

int ddl__conv2d_dw_ok(const ddl_conv2d *g)
{
    ddl__conv_full f = ddl__conv2d_full(g);
    if (f.groups < 2 || f.groups != g->in_c || g->out_c % g->in_c || ddl_conv2d_out_h(g) < 1 ||
        ddl_conv2d_out_w(g) < 1 || g->k_h * g->k_w > MAX_TAPS)
        return 0;
    dw_geo q = dw_view(g);
    return task_floats(&q) <= DDL__THREAD_SCRATCH;
}

size_t ddl__conv2d_dw_workspace(const ddl_conv2d *g)
{
    dw_geo q = dw_view(g);
    return task_floats(&q);
}

/* tap_offsets: off[t] = where tap t = (ki, kj) of output (0, 0) is in the phased plane (the
 * divisions once per pass, not per tap and vector); output (oy, ox) adds oy sh wq + ox. */
static void tap_offsets(const dw_geo *q, size_t *off)
{
    for (int ki = 0; ki < q->kh; ki++)
        for (int kj = 0; kj < q->kw; kj++) {
            int c = kj * q->dw;
            off[ki * q->kw + kj] = (size_t)(c % q->sw) * q->phase + (size_t)ki * q->dh * q->wq + (size_t)(c / q->sw);
        }
}

/* copy_plane: between the (h, w) plane x and its place at (pt, pl) in the phased plane xp, column
 * by column through the phases (in: x into xp; else xp into x). */
static void copy_plane(const dw_geo *q, float *x, float *xp, int in)
{
    int p0 = q->pl % q->sw, j0 = q->pl / q->sw;
    for (int y = 0; y < q->h; y++) {
        float *row = x + (size_t)y * q->w, *base = xp + (size_t)(q->pt + y) * q->wq;
        if (q->sw == 1) { /* plain loops, not memcpy: rows are short, and the call cost a third */
            float *v = base + q->pl;
            if (in)
                for (int c = 0; c < q->w; c++)
                    v[c] = row[c];
            else
                for (int c = 0; c < q->w; c++)
                    row[c] = v[c];
            continue;
        }
        for (int c = 0, p = p0, jj = j0; c < q->w; c++) {
            float *v = base + (size_t)p * q->phase + jj;
            in ? (void)(*v = row[c]) : (void)(row[c] = *v);
            if (++p == q->sw)
                p = 0, jj++;
        }
    }
}

/* pad_plane: xp = the (h, w) plane x at (pt, pl) of the padded plane, zeros elsewhere, by phase. */
static void pad_plane(const dw_geo *q, const float *x, float *xp)
{
    memset(xp, 0, q->sw * q->phase * sizeof *xp);
    copy_plane(q, (float *)(uintptr_t)x, xp, 1);
}

/* ---- forward ---- */

typedef struct dw_job {
    const dw_geo *q;
    const size_t *off; /* tap_offsets */
    const float *x, *w, *b, *dy;
    float *y, *dx, *dwt, *db;
} dw_job;

/* forward_walk: output plane t (its m outputs' channels) from the input plane padded into xp, 16
 * outputs a step; narrow: each 16 as two vectors of 8 (forward_plane_avx2, where the AVX2 tiles
 * run: the 16-float vectors' AVX2 clone moved them through the stack and general registers,
 * MobileNetV2's 3x3 at 16x16, 144 channels, batch 64, one thread, 2.0 GFLOP/s on an AMD EPYC Zen
 * 3). Each output gets the same operations in the same order either way: the same bits. Inlined
 * with a constant narrow into each caller. */
static inline __attribute__((always_inline)) void forward_walk(const dw_job *j, int t, float *xp, int narrow)
{
    const dw_geo *q = j->q;
    int n = t / q->c, ic = t % q->c, taps = q->kh * q->kw;
    size_t op = (size_t)q->oh * q->ow;
    pad_plane(q, j->x + (size_t)t * q->h * q->w, xp);
    for (int m = 0; m < q->mult; m++) {
        int oc = ic * q->mult + m;
        const float *wk = j->w + (size_t)oc * taps;
        float bv = j->b ? j->b[oc] : 0.0f, *yo = j->y + ((size_t)n * q->c * q->mult + oc) * op;
        for (int oy = 0; oy < q->oh; oy++) {
            float *row = yo + (size_t)oy * q->ow;
            const float *xr = xp + (size_t)oy * q->sh * q->wq;
            for (int ox = 0; ox < q->ow; ox += 16) {
                int whole = q->ow - ox >= 16;
                if (narrow) {
                    v8 a0 = (v8){0} + bv, a1 = a0;
                    for (int k = 0; k < taps; k++) {
                        const float *xk = xr + j->off[k] + ox;
                        a0 += wk[k] * *(const v8u *)xk;
                        a1 += wk[k] * *(const v8u *)(xk + 8);
                    }
                    if (whole)
                        *(v8u *)(row + ox) = a0, *(v8u *)(row + ox + 8) = a1;
                    else
                        for (int l = 0; l < q->ow - ox; l++)
                            row[ox + l] = l < 8 ? a0[l] : a1[l - 8];
                } else {
                    v16 acc = (v16){0} + bv;
                    for (int k = 0; k < taps; k++)
                        acc += wk[k] * *(const v16u *)(xr + j->off[k] + ox);
                    if (whole)
                        *(v16u *)(row + ox) = acc;
                    else
                        for (int l = 0; l < q->ow - ox; l++)
                            row[ox + l] = acc[l];
                }
            }
        }
    }
}

DDL__HOT static void forward_plane(void *ctx, int t, float *xp) { forward_walk(ctx, t, xp, 0); }

#ifdef DDL__CLONES
DW_AVX2 static void forward_plane_avx2(void *ctx, int t, float *xp) { forward_walk(ctx, t, xp, 1); }
#endif

void ddl__conv2d_dw_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y,
                            float *ws)
{
    dw_geo q = dw_view(g);
    size_t off[MAX_TAPS];
    tap_offsets(&q, off);
    dw_job j = {&q, off, x, w, b, NULL, y, NULL, NULL, NULL};
#ifdef DDL__CLONES
    if (ddl__avx2_tiles()) {
        ddl__parallel_ws(q.n * q.c, forward_plane_avx2, &j, ws);
        return;
    }
#endif
    ddl__parallel_ws(q.n * q.c, forward_plane, &j, ws);
}

/* ---- input gradient ---- */

/* wide_plane: dy's (oh, ow) plane into rows of whole vectors, zeros after each. */
static void wide_plane(const dw_geo *q, const float *dy, float *rows)
{
    int rf = (int)row_floats(q);
    for (int y = 0; y < q->oh; y++) {
        float *row = rows + (size_t)y * rf;
        const float *dyr = dy + (size_t)y * q->ow;
        int c = 0;
        for (; c < q->ow; c++)
            row[c] = dyr[c];
        for (; c < rf; c++)
            row[c] = 0.0f;
    }
}

/* dx_walk: input-gradient plane t, tap by tap, row by row (one row's stores never overlap the
 * next row's loads: tap by tap within a row they did, and the stalls tripled the pass), 16
 * floats a step; narrow: as two vectors of 8 (dx_plane_avx2; as forward_walk, the same bits) */
static inline __attribute__((always_inline)) void dx_walk(const dw_job *j, int t, float *ws, int narrow)
{
    const dw_geo *q = j->q;
    int n = t / q->c, ic = t % q->c, taps = q->kh * q->kw;
    size_t op = (size_t)q->oh * q->ow;
    float *dxp = ws, *row = ws + plane_floats(q);
    memset(dxp, 0, q->sw * q->phase * sizeof *dxp);
    for (int m = 0; m < q->mult; m++) {
        int oc = ic * q->mult + m;
        const float *wk = j->w + (size_t)oc * taps, *dyo = j->dy + ((size_t)n * q->c * q->mult + oc) * op;
        wide_plane(q, dyo, row); /* the extra lanes add 0 to the slack */
        for (int k = 0; k < taps; k++) {
            float wv = wk[k];
            for (int oy = 0; oy < q->oh; oy++) {
                float *d = dxp + (size_t)oy * q->sh * q->wq + j->off[k];
                const float *dr = row + (size_t)oy * row_floats(q);
                for (int ox = 0; ox < q->ow; ox += 16) {
                    if (narrow) {
                        *(v8u *)(d + ox) += wv * *(const v8u *)(dr + ox);
                        *(v8u *)(d + ox + 8) += wv * *(const v8u *)(dr + ox + 8);
                    } else {
                        *(v16u *)(d + ox) += wv * *(const v16u *)(dr + ox);
                    }
                }
            }
        }
    }
    copy_plane(q, j->dx + (size_t)t * q->h * q->w, dxp, 0);
}

DDL__HOT static void dx_plane(void *ctx, int t, float *ws) { dx_walk(ctx, t, ws, 0); }

#ifdef DDL__CLONES
DW_AVX2 static void dx_plane_avx2(void *ctx, int t, float *ws) { dx_walk(ctx, t, ws, 1); }
#endif

/* ---- weight and bias gradients ---- */

/* lanes: the sum of 16 lanes in a fixed pairwise order. */
static inline float lanes(const float *v)
{
    float s8[8];
    for (int i = 0; i < 8; i++)
        s8[i] = v[i] + v[i + 8];
    return ((s8[0] + s8[4]) + (s8[2] + s8[6])) + ((s8[1] + s8[5]) + (s8[3] + s8[7]));
}

/* dw_sums: channel ic's lane sums (mult, taps, 16) over the samples and rows in order, each tap's
 * 16 lanes in one vector, or with narrow in two of 8, lanes 0-7 and 8-15 apart (dw_sums_avx2; as
 * forward_walk, the same bits); inlined into dw_channel's clones and dw_sums_avx2 */
static inline __attribute__((always_inline)) void dw_sums(const dw_job *j, int ic, float *xp, float *row,
                                                          float *sums, int narrow)
{
    const dw_geo *q = j->q;
    int taps = q->kh * q->kw;
    size_t op = (size_t)q->oh * q->ow;
    for (int n = 0; n < q->n; n++) {
        pad_plane(q, j->x + ((size_t)n * q->c + ic) * q->h * q->w, xp);
        for (int m = 0; m < q->mult; m++) {
            const float *dyo = j->dy + ((size_t)n * q->c * q->mult + (size_t)ic * q->mult + m) * op;
            wide_plane(q, dyo, row); /* the extra lanes multiply the slack by 0 */
            for (int t = 0; t < taps; t++) {
                float *st = sums + ((size_t)m * taps + t) * 16;
                v16 s = *(v16u *)st;
                v8 s0 = *(v8u *)st, s1 = *(v8u *)(st + 8);
                for (int oy = 0; oy < q->oh; oy++) {
                    const float *xs = xp + (size_t)oy * q->sh * q->wq + j->off[t];
                    const float *dr = row + (size_t)oy * row_floats(q);
                    for (int ox = 0; ox < q->ow; ox += 16) {
                        if (narrow) {
                            s0 += *(const v8u *)(dr + ox) * *(const v8u *)(xs + ox);
                            s1 += *(const v8u *)(dr + ox + 8) * *(const v8u *)(xs + ox + 8);
                        } else {
                            s += *(const v16u *)(dr + ox) * *(const v16u *)(xs + ox);
                        }
                    }
                }
                if (narrow)
                    *(v8u *)st = s0, *(v8u *)(st + 8) = s1;
                else
                    *(v16u *)st = s;
            }
        }
    }
}

#ifdef DDL__CLONES
DW_AVX2 static void dw_sums_avx2(const dw_job *j, int ic, float *xp, float *row, float *sums)
{
    dw_sums(j, ic, xp, row, sums, 1);
}
#endif

DDL__HOT static void dw_channel(void *ctx, int ic, float *ws)
{
    const dw_job *j = ctx;
    const dw_geo *q = j->q;
    int taps = q->kh * q->kw;
    size_t op = (size_t)q->oh * q->ow;
    float *xp = ws, *row = ws + plane_floats(q), *sums = row + row_floats(q) * q->oh; /* (mult, taps, 16) */
    memset(sums, 0, (size_t)q->mult * taps * 16 * sizeof *sums);
#ifdef DDL__CLONES
    if (ddl__avx2_tiles())
        dw_sums_avx2(j, ic, xp, row, sums);
    else
#endif
        dw_sums(j, ic, xp, row, sums, 0);
    for (int m = 0; m < q->mult; m++) {
        int oc = ic * q->mult + m;
        for (int t = 0; t < taps; t++)
            j->dwt[(size_t)oc * taps + t] += lanes(sums + ((size_t)m * taps + t) * 16);
        if (j->db)
            j->db[oc] += (float)ddl__planes_sum(j->dy + (size_t)oc * op, (size_t)q->c * q->mult * op, q->n, (int)op);
    }
}

/* bias_only: db += the sums of dy, when there is no weight gradient to compute beside them. */
static void bias_only(const dw_geo *q, const float *dy, float *db)
{
    int oc_n = q->c * q->mult;
    size_t op = (size_t)q->oh * q->ow;
    for (int oc = 0; oc < oc_n; oc++)
        db[oc] += (float)ddl__planes_sum(dy + (size_t)oc * op, (size_t)oc_n * op, q->n, (int)op);
}

void ddl__conv2d_dw_backward(const ddl_conv2d *g, const float *x, const float *w, const float *dy, float *dx,
                             float *dw, float *db, float *ws)
{
    dw_geo q = dw_view(g);
    size_t off[MAX_TAPS];
    tap_offsets(&q, off);
    dw_job j = {&q, off, x, w, NULL, dy, NULL, dx, dw, db};
    if (dw)
        ddl__parallel_ws(q.c, dw_channel, &j, ws);
    else if (db)
        bias_only(&q, dy, db);
#ifdef DDL__CLONES
    if (dx && ddl__avx2_tiles()) {
        ddl__parallel_ws(q.n * q.c, dx_plane_avx2, &j, ws);
        return;
    }
#endif
    if (dx)
        ddl__parallel_ws(q.n * q.c, dx_plane, &j, ws);
}
