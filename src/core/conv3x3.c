/* conv3x3.c - direct 3x3 convolution, stride 1, any padding and channel count (U-Net's
 * convolutions): the forward pass, the input gradient and the weight gradient, without an
 * im2col matrix. Uses only the caller's workspace.
 *
 * As conv_direct.c, rows are computed at the padded width wp ("wide" rows), so every tap of
 * every input channel is one contiguous vector load at a fixed offset; the wp - ow extra
 * columns are garbage and dropped. A micro-kernel keeps an 8-output-channel x 48-position tile
 * in registers across all input channels and taps: each input vector feeds 8 multiply-adds with
 * broadcast weights, packed (oc block, ic, tap, 8) so the kernel reads them in order.
 *
 * The input gradient is the same kernel: dx is the convolution of dy, padded by 2 - pad, with
 * the weights flipped and in_c / out_c swapped. Summation order per output: input channels in
 * order, taps in row-major order, one fused multiply-add each, the same in every clone.
 *
 * The weight gradient keeps a 2-output-channel x 9-tap tile of 16-lane sums in registers over
 * all wide positions of one sample and one input channel (dy copied into wide rows with zeros
 * in the extra columns), then adds each tap's 16 lanes to dw in a fixed order. */
#include "impl.h"

#include <string.h>

#define WIDE_OCB 8 /* output channels per tile */
#define WIDE_J 48  /* positions per tile: three 16-float vectors */

typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4)));

/* wide_geo: one sample's convolution seen by the kernel: c_in planes of (h, w) padded by pad
 * into (hp, wp) planes of plane floats, c_out outputs of (oh, ow), len wide positions. */
typedef struct wide_geo {
    int c_in, c_out, h, w, pad, wp, hp, oh, ow;
    size_t len, plane; /* len: oh * wp rounded up to WIDE_J; plane: >= hp * wp + reads past it */
} wide_geo;

static wide_geo wide_view(int c_in, int c_out, int h, int w, int pad)
{
    wide_geo q = {c_in, c_out, h, w, pad, w + 2 * pad, h + 2 * pad, h + 2 * pad - 2, w + 2 * pad - 2, 0, 0};
    q.len = ((size_t)q.oh * q.wp + WIDE_J - 1) / WIDE_J * WIDE_J;
    /* the last tile reads up to len - 1 + 2 wp + 2: keep that inside the (zeroed) plane */
    q.plane = (q.len + 2 * (size_t)q.wp + 2 + 15) / 16 * 16;
    return q;
}

static size_t oc_blocks(int c_out) { return (size_t)(c_out + WIDE_OCB - 1) / WIDE_OCB; }

/* floats: xp (c_in planes), one tile row of WIDE_OCB wide outputs, and the packed weights. */
static size_t wide_floats(const wide_geo *q)
{
    return (size_t)q->c_in * q->plane + (size_t)WIDE_OCB * q->len +
           oc_blocks(q->c_out) * WIDE_OCB * (size_t)q->c_in * 9;
}

int ddl__conv2d_wide_ok(const ddl_conv2d *g)
{
#ifdef DDL_NO_WIDE_CONV /* to measure against im2col + gemm */
    return 0;
#endif
    return g->in_c > 1 && g->stride == 1 && g->k_h == 3 && g->k_w == 3 && g->pad >= 0 && g->pad <= 2 &&
           g->in_h + 2 * g->pad >= 3 && g->in_w + 2 * g->pad >= 3;
}

size_t ddl__conv2d_wide_workspace(const ddl_conv2d *g)
{
    wide_geo f = wide_view(g->in_c, g->out_c, g->in_h, g->in_w, g->pad);
    wide_geo b = wide_view(g->out_c, g->in_c, f.oh, f.ow, 2 - g->pad);
    size_t a = wide_floats(&f), c = wide_floats(&b), d = (size_t)g->in_c * f.plane + (size_t)g->out_c * f.len + (size_t)g->in_c * 9;
    a = a > c ? a : c;
    return a > d ? a : d;
}

/* ---- packing ---- */

/* pad_planes: xp (c, plane) = x (c, h, w) with a zero border of pad and zeros after; every float
 * written once (a memset of the whole plane first cost more than the copy). */
static void pad_planes(const wide_geo *q, const float *x, float *xp)
{
    size_t top = (size_t)q->pad * q->wp, below = q->plane - (size_t)(q->pad + q->h) * q->wp;
    for (int c = 0; c < q->c_in; c++) {
        float *dst = xp + c * q->plane;
        memset(dst, 0, (top + q->pad) * sizeof *dst);
        dst += top;
        for (int y = 0; y < q->h; y++, dst += q->wp) {
            const float *src = x + ((size_t)c * q->h + y) * q->w;
            for (int i = 0; i < q->pad; i++)
                dst[i] = 0.0f;
            memcpy(dst + q->pad, src, (size_t)q->w * sizeof *src);
            for (int i = q->pad + q->w; i < q->wp; i++)
                dst[i] = 0.0f;
        }
        memset(dst, 0, below * sizeof *dst);
    }
}

/* pack_weights: wk (oc block, c_in, 9, WIDE_OCB) from w. flip 0: w is the conv's (c_out, c_in,
 * 3, 3); flip 1: w is (c_in, c_out, 3, 3) of the conv being transposed, and taps are reversed.
 * Channels past c_out get zero weights. */
static void pack_weights(const wide_geo *q, const float *w, int flip, float *wk)
{
    for (size_t ob = 0; ob < oc_blocks(q->c_out); ob++)
        for (int ic = 0; ic < q->c_in; ic++)
            for (int t = 0; t < 9; t++)
                for (int o = 0; o < WIDE_OCB; o++) {
                    int oc = (int)ob * WIDE_OCB + o;
                    float v = 0.0f;
                    if (oc < q->c_out)
                        v = flip ? w[((size_t)ic * q->c_out + oc) * 9 + (8 - t)] : w[((size_t)oc * q->c_in + ic) * 9 + t];
                    wk[((ob * q->c_in + ic) * 9 + t) * WIDE_OCB + o] = v;
                }
}

/* ---- kernel ---- */

/* wide_tile: acc (WIDE_OCB, len) = sum over c_in input planes and 9 taps of wk x xp shifted. */
DDL__HOT
static void wide_tile(size_t len, int c_in, size_t plane, int wp, const float *xp, const float *wk, float *acc)
{
    const size_t off[9] = {0, 1, 2, (size_t)wp, (size_t)wp + 1, (size_t)wp + 2, 2 * (size_t)wp,
                           2 * (size_t)wp + 1, 2 * (size_t)wp + 2};
    for (size_t j = 0; j < len; j += WIDE_J) {
        v16 a0[WIDE_OCB], a1[WIDE_OCB], a2[WIDE_OCB];
        for (int o = 0; o < WIDE_OCB; o++)
            a0[o] = a1[o] = a2[o] = (v16){0};
        for (int ic = 0; ic < c_in; ic++) {
            const float *xi = xp + (size_t)ic * plane + j, *wi = wk + (size_t)ic * 9 * WIDE_OCB;
            for (int t = 0; t < 9; t++) {
                v16 x0 = *(const v16u *)(xi + off[t]), x1 = *(const v16u *)(xi + off[t] + 16),
                    x2 = *(const v16u *)(xi + off[t] + 32);
                for (int o = 0; o < WIDE_OCB; o++) {
                    float wv = wi[t * WIDE_OCB + o];
                    a0[o] += wv * x0;
                    a1[o] += wv * x1;
                    a2[o] += wv * x2;
                }
            }
        }
        for (int o = 0; o < WIDE_OCB; o++) {
            *(v16u *)(acc + o * len + j) = a0[o];
            *(v16u *)(acc + o * len + j + 16) = a1[o];
            *(v16u *)(acc + o * len + j + 32) = a2[o];
        }
    }
}

/* wide_sample: y (c_out, oh, ow) of one sample's xp, plus b (may be NULL). */
static void wide_sample(const wide_geo *q, const float *xp, const float *wk, const float *b, float *acc, float *y)
{
    size_t p = (size_t)q->oh * q->ow;
    for (size_t ob = 0; ob < oc_blocks(q->c_out); ob++) {
        wide_tile(q->len, q->c_in, q->plane, q->wp, xp, wk + ob * q->c_in * 9 * WIDE_OCB, acc);
        for (int o = 0; o < WIDE_OCB && (int)ob * WIDE_OCB + o < q->c_out; o++) {
            int oc = (int)ob * WIDE_OCB + o;
            float bv = b ? b[oc] : 0.0f, *yo = y + (size_t)oc * p;
            for (int oy = 0; oy < q->oh; oy++) {
                const float *src = acc + o * q->len + (size_t)oy * q->wp;
                for (int ox = 0; ox < q->ow; ox++)
                    yo[(size_t)oy * q->ow + ox] = src[ox] + bv;
            }
        }
    }
}

/* Threads: the forward pass and the input gradient go sample by sample, the weight gradient
 * by pairs of output channels (over every sample in order, as with one thread); each task pads
 * into its thread's scratch, the packed weights are shared. */

typedef struct wide_job {
    const wide_geo *q;
    int batch;
    const float *x, *wk, *b, *dy;
    float *y, *dw;
    int per; /* weight gradient: output-channel pairs per task */
} wide_job;

static void run_sample(void *ctx, int n, float *ws)
{
    const wide_job *j = ctx;
    const wide_geo *q = j->q;
    size_t in_sz = (size_t)q->c_in * q->h * q->w, out_sz = (size_t)q->c_out * q->oh * q->ow;
    float *xp = ws, *acc = ws + (size_t)q->c_in * q->plane;
    pad_planes(q, j->x + n * in_sz, xp);
    wide_sample(q, xp, j->wk, j->b, acc, j->y + n * out_sz);
}

/* wide_run: every sample of x (batch, c_in, h, w) into y (batch, c_out, oh, ow). */
static void wide_run(const wide_geo *q, int batch, const float *x, const float *w, int flip, const float *b,
                     float *y, float *ws)
{
    size_t task = (size_t)q->c_in * q->plane + (size_t)WIDE_OCB * q->len; /* xp and acc */
    float *wk = ws + task;
    pack_weights(q, w, flip, wk);
    wide_job j = {q, batch, x, wk, b, NULL, y, NULL, 0};
    if (ddl__threads() > 1 && task <= DDL__THREAD_SCRATCH) {
        ddl__parallel_ws(batch, run_sample, &j, ws);
        return;
    }
    for (int n = 0; n < batch; n++)
        run_sample(&j, n, ws);
}

void ddl__conv2d_wide_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y,
                              float *ws)
{
    wide_geo q = wide_view(g->in_c, g->out_c, g->in_h, g->in_w, g->pad);
    wide_run(&q, g->batch, x, w, 0, b, y, ws);
}

void ddl__conv2d_wide_dx(const ddl_conv2d *g, const float *w, const float *dy, float *dx, float *ws)
{
    int oh = g->in_h + 2 * g->pad - 2, ow = g->in_w + 2 * g->pad - 2;
    wide_geo q = wide_view(g->out_c, g->in_c, oh, ow, 2 - g->pad); /* its outputs: (in_c, in_h, in_w) */
    wide_run(&q, g->batch, dy, w, 1, NULL, dx, ws);
}

/* ---- weight gradient ---- */

/* lanes: the sum of v's 16 lanes in a fixed pairwise order. */
static inline float lanes(v16 v)
{
    float s8[8];
    for (int i = 0; i < 8; i++)
        s8[i] = v[i] + v[i + 8];
    return ((s8[0] + s8[4]) + (s8[2] + s8[6])) + ((s8[1] + s8[5]) + (s8[3] + s8[7]));
}

/* GRAD_TILE_BODY: dw0, dw1 (c_in, 9) += dy0, dy1 (len wide positions each) x xp (c_in planes)
 * shifted by each tap: two output channels, 18 accumulators. KEEP(v) pins the shifted input in a
 * register: left alone, gcc folds its load into both multiply-adds, and the loads (most of them
 * across a cache line) become the bottleneck. */
#define GRAD_TILE_BODY(KEEP)                                                                              \
    const size_t off[9] = {0, 1, 2, (size_t)wp, (size_t)wp + 1, (size_t)wp + 2, 2 * (size_t)wp,            \
                           2 * (size_t)wp + 1, 2 * (size_t)wp + 2};                                       \
    for (int ic = 0; ic < c_in; ic++) {                                                                   \
        const float *xi = xp + (size_t)ic * plane;                                                        \
        v16 a0[9], a1[9];                                                                                 \
        for (int t = 0; t < 9; t++)                                                                       \
            a0[t] = a1[t] = (v16){0};                                                                     \
        for (size_t j = 0; j < len; j += 16) {                                                            \
            v16 d0 = *(const v16u *)(dy0 + j), d1 = *(const v16u *)(dy1 + j);                             \
            for (int t = 0; t < 9; t++) {                                                                 \
                v16 xv = *(const v16u *)(xi + j + off[t]);                                                \
                KEEP(xv);                                                                                 \
                a0[t] += d0 * xv;                                                                         \
                a1[t] += d1 * xv;                                                                         \
            }                                                                                             \
        }                                                                                                 \
        for (int t = 0; t < 9; t++) {                                                                     \
            dw0[ic * 9 + t] += lanes(a0[t]);                                                              \
            dw1[ic * 9 + t] += lanes(a1[t]);                                                              \
        }                                                                                                 \
    }

#define GRAD_NO_KEEP(v) (void)0

/* grad_tile: the portable and AVX2 build of the tile. */
DDL__HOT
static void grad_tile(size_t len, int c_in, size_t plane, int wp, const float *xp, const float *dy0,
                      const float *dy1, float *dw0, float *dw1)
{
    GRAD_TILE_BODY(GRAD_NO_KEEP)
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(DDL_NO_CLONES)
#define GRAD_HAVE_AVX512 1
#define GRAD_KEEP_ZMM(v) __asm__("" : "+v"(v))

/* grad_tile_avx512: the same tile for CPUs with AVX-512, chosen at run time. */
__attribute__((target("avx512f,fma"), optimize("fp-contract=fast"))) static void
grad_tile_avx512(size_t len, int c_in, size_t plane, int wp, const float *xp, const float *dy0, const float *dy1,
                 float *dw0, float *dw1)
{
    GRAD_TILE_BODY(GRAD_KEEP_ZMM)
}
#endif

typedef void (*grad_fn)(size_t len, int c_in, size_t plane, int wp, const float *xp, const float *dy0,
                        const float *dy1, float *dw0, float *dw1);

static grad_fn grad_pick(void)
{
#ifdef GRAD_HAVE_AVX512
    if (__builtin_cpu_supports("avx512f"))
        return grad_tile_avx512;
#endif
    return grad_tile;
}

/* dw_range: the output-channel pairs [lo, hi) over every sample in order: each sample padded
 * once into xp, the pairs' dy rows widened after it, then one tile per pair (an odd last channel
 * pairs with itself, its second row going to a spare). ws: xp, 2 (hi - lo) wide rows, a spare
 * of c_in 9 floats. */
static void dw_range(const wide_job *j, int lo, int hi, float *ws)
{
    const wide_geo *q = j->q;
    int c0 = 2 * lo, c1 = 2 * hi < q->c_out ? 2 * hi : q->c_out;
    float *xp = ws, *dyw = ws + (size_t)q->c_in * q->plane, *spare = dyw + (size_t)(c1 - c0) * q->len;
    size_t in_sz = (size_t)q->c_in * q->h * q->w, out_sz = (size_t)q->c_out * q->oh * q->ow, kk = (size_t)q->c_in * 9;
    grad_fn tile = grad_pick();
    memset(dyw, 0, (size_t)(c1 - c0) * q->len * sizeof *dyw); /* the extra columns and the tail stay 0 */
    for (int n = 0; n < j->batch; n++) {
        pad_planes(q, j->x + n * in_sz, xp);
        for (int c = c0; c < c1; c++)
            for (int y = 0; y < q->oh; y++)
                memcpy(dyw + (size_t)(c - c0) * q->len + (size_t)y * q->wp,
                       j->dy + n * out_sz + ((size_t)c * q->oh + y) * q->ow, (size_t)q->ow * sizeof *dyw);
        for (int oc = c0; oc < c1; oc += 2) {
            const float *d0 = dyw + (size_t)(oc - c0) * q->len;
            int two = oc + 1 < c1;
            tile(q->len, q->c_in, q->plane, q->wp, xp, d0, two ? d0 + q->len : d0, j->dw + oc * kk,
                 two ? j->dw + (oc + 1) * kk : spare);
        }
    }
}

static void dw_task(void *ctx, int t, float *ws)
{
    const wide_job *j = ctx;
    int pairs = (j->q->c_out + 1) / 2, lo = t * j->per, hi = lo + j->per < pairs ? lo + j->per : pairs;
    if (lo < hi)
        dw_range(j, lo, hi, ws);
}

/* Threads: ranges of output-channel pairs; each pair's sums are the same in any range. */
void ddl__conv2d_wide_dw(const ddl_conv2d *g, const float *x, const float *dy, float *dw, float *ws)
{
    wide_geo q = wide_view(g->in_c, g->out_c, g->in_h, g->in_w, g->pad);
    int pairs = (q.c_out + 1) / 2, threads = ddl__threads();
    wide_job j = {&q, g->batch, x, NULL, NULL, dy, NULL, dw, pairs};
    size_t fixed = (size_t)q.c_in * q.plane + (size_t)q.c_in * 9; /* xp and the spare row of dw */
    size_t fit = fixed + 2 * q.len <= DDL__THREAD_SCRATCH ? (DDL__THREAD_SCRATCH - fixed) / (2 * q.len) : 0;
    if (threads > 1 && pairs > 1 && fit > 0) {
        j.per = (pairs + threads - 1) / threads;
        if ((size_t)j.per > fit)
            j.per = (int)fit;
        ddl__parallel_ws((pairs + j.per - 1) / j.per, dw_task, &j, ws);
        return;
    }
    dw_range(&j, 0, pairs, ws); /* the caller's ws holds xp, every channel's rows and a spare */
}
