/* conv1x1_avx512.c - the 1x1 stride-1 convolution (a segmentation head, a pointwise layer)
 * direct, on a CPU with AVX-512: forward, input gradient and weight gradient, with the bits of
 * conv.c's column matrix and ddl_gemm's AVX-512 kernels (gemm_avx512.c), which it replaces there.
 *
 * A 1x1 convolution's column matrix is its input: conv.c copied each chunk of samples into one
 * (channels, positions) matrix, made the product, copied it out to the samples and added the
 * bias in another pass. Here the product reads the samples where they lie (pointwise_avx512.h's
 * tiles: 4 output channels x 64 positions over the input channels) and adds the bias as the sums
 * leave the registers; the input gradient is the same tile over the output channels, and the
 * weight gradient keeps the product's 16-lane sums of 4 x 4 weights in registers over each chunk
 * of samples (whose x and dy, about conv.c's budget, stay in the L2 cache across the tiles).
 *
 * Each value gets the operations of the path it replaces: y = (1 x sum + 0) + bias, the sum over
 * input channels in order, one fused multiply-add each from +0 (the product's store into zeroed
 * memory, then the bias pass); dx = 0 + (1 x sum + 0) (col2im onto a zeroed plane); dw, per
 * chunk of conv.c's samples, 16 lanes over the chunk's positions reduced by
 * _mm512_reduce_add_ps into 1 x sum + 0 (a part), then dw + part, as gemm_avx512.c's dot
 * products (or, where a chunk is too short for them, one sum in order, as its outer products). */
#include "impl.h"

int ddl__conv1x1_geometry(const ddl_conv2d *g)
{
    ddl__conv_full f = ddl__conv2d_full(g);
    size_t p = (size_t)g->in_h * g->in_w;
    return g->k_h == 1 && g->k_w == 1 && f.sh == 1 && f.sw == 1 && f.dh == 1 && f.dw == 1 && !f.pt && !f.pl &&
           !f.pb && !f.pr && f.groups == 1 && g->batch > 0 && g->in_c >= 2 && g->in_c <= 256 && g->out_c >= 2 &&
           g->out_c <= 256 && p > 0 && p % 16 == 0;
}

static int enabled = 1;
int ddl__conv1x1_enable(int on)
{
    int was = enabled;
    enabled = on;
    return was;
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(DDL_NO_CLONES)

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "pointwise_avx512.h"

#define AVX512 __attribute__((target("avx512f,fma")))

/* The column matrix's copies cost most where a layer has few channels: the direct kernels were
 * faster up to 64 x 64 channels, and the packed product as fast or faster beyond (64 -> 256 and
 * 256 -> 256 at batch 32, forward and backward 6.5 against 6.8 ms and 5.0 against 5.3: its
 * weight gradient reads gathered rows). In a bfloat16 pass its bfloat16 product is faster from
 * 32 -> 64 on (3.2 against 4.0 ms forward and backward), slower up to 16 -> 32 (1.4 against
 * 1.0). */
#define MOST_FP32 4096 /* in_c out_c, float32 passes */
#define MOST_BF16 512  /* in bfloat16 passes */

int ddl__conv1x1_ok(const ddl_conv2d *g)
{
    int bf16 = ddl__precision() == DDL_PRECISION_BF16 && !ddl__invariant();
    return enabled && !ddl__avx2_tiles() && ddl__gemm_avx512_have() && ddl__conv1x1_geometry(g) &&
           (size_t)g->in_c * g->out_c <= (bf16 ? MOST_BF16 : MOST_FP32);
}

/* where the AVX2 tiles run: all three passes by conv1x1_avx2.c, float32 passes, as many channels
 * as above */
int ddl__conv1x1_avx2_ok(const ddl_conv2d *g)
{
    return enabled && ddl__avx2_tiles() && ddl__precision() != DDL_PRECISION_BF16 && ddl__conv1x1_geometry(g) &&
           (size_t)g->in_c * g->out_c <= MOST_FP32;
}

/* ---- forward and input gradient: rows of sums over channels ---- */

typedef struct rows_job {
    const ddl_conv2d *g;
    const float *src, *w, *b; /* src: x (forward) or dy (input gradient) */
    float *out;
    int fwd;
} rows_job;

/* tile: out rows [r0, r0 + rn) of one sample at vn vectors from position p. */
AVX512 static inline __attribute__((always_inline)) void tile(const rows_job *j, const float *src, float *out,
                                                              int r0, int rn, size_t p, int vn)
{
    const ddl_conv2d *g = j->g;
    size_t p_n = (size_t)g->in_h * g->in_w;
    const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
    __m512 acc[DDL__PW_R][DDL__PW_V];
    if (j->fwd) /* w (out_c, in_c): row oc, term ic */
        ddl__pw_sums(acc, j->w + (size_t)r0 * g->in_c, (size_t)g->in_c, 1, rn, src + p, p_n, g->in_c, vn);
    else /* w^T: row ic, term oc */
        ddl__pw_sums(acc, j->w + r0, 1, (size_t)g->in_c, rn, src + p, p_n, g->out_c, vn);
    for (int r = 0; r < rn; r++) {
        float *o = out + (size_t)(r0 + r) * p_n + p;
        __m512 bias = j->fwd && j->b ? _mm512_set1_ps(j->b[r0 + r]) : zero;
        for (int v = 0; v < vn; v++) {
            __m512 s = _mm512_fmadd_ps(one, acc[r][v], zero); /* the product's store */
            s = j->fwd ? (j->b ? _mm512_add_ps(s, bias) : s) : _mm512_add_ps(zero, s);
            _mm512_storeu_ps(o + 16 * v, s);
        }
    }
}

AVX512 static void rows_samples(void *ctx, size_t lo, size_t hi)
{
    const rows_job *j = ctx;
    const ddl_conv2d *g = j->g;
    int rows = j->fwd ? g->out_c : g->in_c, terms = j->fwd ? g->in_c : g->out_c;
    size_t p_n = (size_t)g->in_h * g->in_w;
    for (size_t n = lo; n < hi; n++) {
        const float *src = j->src + n * terms * p_n;
        float *out = j->out + n * rows * p_n;
        for (size_t p = 0; p < p_n; p += 16 * DDL__PW_V) {
            int vn = p_n - p < 16 * DDL__PW_V ? (int)(p_n - p) / 16 : DDL__PW_V;
            for (int r0 = 0; r0 < rows; r0 += DDL__PW_R) {
                if (rows - r0 >= DDL__PW_R && vn == DDL__PW_V)
                    tile(j, src, out, r0, DDL__PW_R, p, DDL__PW_V);
                else
                    tile(j, src, out, r0, rows - r0 < DDL__PW_R ? rows - r0 : DDL__PW_R, p, vn);
            }
        }
    }
}

void ddl__conv1x1_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y)
{
    rows_job j = {g, x, w, b, y, 1};
    ddl__parallel_range((size_t)g->batch, 1, rows_samples, &j);
}

void ddl__conv1x1_dx(const ddl_conv2d *g, const float *w, const float *dy, float *dx)
{
    rows_job j = {g, dy, w, NULL, dx, 0};
    ddl__parallel_range((size_t)g->batch, 1, rows_samples, &j);
}

/* ---- weight gradient ---- */

typedef struct dw_job {
    const ddl_conv2d *g;
    const float *x, *dy;
    float *dw;
    int nb, tasks; /* samples a chunk (conv.c's); ranges of output channels */
} dw_job;

void ddl__conv1x1_dw_in_order(const ddl_conv2d *g, const float *x, const float *dy, float *dw, int o0, int o1, int n0,
                              int m)
{
    size_t p_n = (size_t)g->in_h * g->in_w;
    for (int oc = o0; oc < o1; oc++)
        for (int ic = 0; ic < g->in_c; ic++) {
            float acc = 0.0f;
            for (int s = n0; s < n0 + m; s++) {
                const float *d = dy + ((size_t)s * g->out_c + oc) * p_n;
                const float *xs = x + ((size_t)s * g->in_c + ic) * p_n;
                for (size_t p = 0; p < p_n; p++)
                    acc = fmaf(d[p], xs[p], acc);
            }
            float *at = dw + (size_t)oc * g->in_c + ic;
            *at += fmaf(1.0f, acc, 0.0f);
        }
}

/* lanes_tile: dw rows [o0, o0 + rn) x columns [i0, i0 + in) += the tile's dot products over the
 * chunk of m samples from n0: 16 lanes each, in registers over the chunk (x and dy of a chunk
 * are about conv.c's budget, in the L2 cache across tiles), reduced by _mm512_reduce_add_ps
 * into 1 x sum + 0 and added. Columns past in (the last input channels) read the first again
 * and are not stored. */
AVX512 static inline __attribute__((always_inline)) void lanes_tile(const dw_job *j, int o0, int rn, int i0, int in,
                                                                    int n0, int m)
{
    const ddl_conv2d *g = j->g;
    size_t p_n = (size_t)g->in_h * g->in_w;
    __m512 acc[DDL__PW_R][DDL__PW_V];
    for (int r = 0; r < DDL__PW_R; r++)
        for (int t = 0; t < DDL__PW_V; t++)
            acc[r][t] = _mm512_setzero_ps();
    size_t bs = in == DDL__PW_V ? p_n : 0; /* fewer columns: every b row is the first, its sums dropped */
    for (int s = n0; s < n0 + m; s++)
        ddl__pw_lanes(acc, rn, j->dy + ((size_t)s * g->out_c + o0) * p_n, p_n, j->x + ((size_t)s * g->in_c + i0) * p_n,
                 bs, p_n / 16);
    for (int r = 0; r < rn; r++)
        for (int t = 0; t < in; t++) {
            float *at = j->dw + (size_t)(o0 + r) * g->in_c + i0 + t;
            *at += fmaf(1.0f, _mm512_reduce_add_ps(acc[r][t]), 0.0f);
        }
}

/* dw_range: task t's output channels (tiles of DDL__PW_R), over every chunk in order. */
AVX512 static void dw_range(void *ctx, int task)
{
    const dw_job *j = ctx;
    const ddl_conv2d *g = j->g;
    int tiles = (g->out_c + DDL__PW_R - 1) / DDL__PW_R, ic_n = g->in_c;
    int o_lo = task * tiles / j->tasks * DDL__PW_R, o_hi = (task + 1) * tiles / j->tasks * DDL__PW_R;
    if (o_hi > g->out_c)
        o_hi = g->out_c;
    size_t p_n = (size_t)g->in_h * g->in_w;
    for (int n0 = 0; n0 < g->batch; n0 += j->nb) {
        int m = g->batch - n0 < j->nb ? g->batch - n0 : j->nb;
        if ((size_t)m * p_n < DDL__PW_DOTS_K && ic_n >= DDL__PW_NARROW) {
            ddl__conv1x1_dw_in_order(g, j->x, j->dy, j->dw, o_lo, o_hi, n0, m);
            continue;
        }
        for (int o0 = o_lo; o0 < o_hi; o0 += DDL__PW_R)
            for (int i0 = 0; i0 < ic_n; i0 += DDL__PW_V) {
                int rn = o_hi - o0 < DDL__PW_R ? o_hi - o0 : DDL__PW_R;
                if (rn == DDL__PW_R && ic_n - i0 >= DDL__PW_V)
                    lanes_tile(j, o0, DDL__PW_R, i0, DDL__PW_V, n0, m);
                else if (ic_n - i0 >= DDL__PW_V)
                    lanes_tile(j, o0, rn, i0, DDL__PW_V, n0, m);
                else
                    for (int i = i0; i < ic_n; i++) /* the last input channels, one at a time */
                        lanes_tile(j, o0, rn, i, 1, n0, m);
            }
    }
}

void ddl__conv1x1_dw(const ddl_conv2d *g, const float *x, const float *dy, float *dw, int nb)
{
    int tiles = (g->out_c + DDL__PW_R - 1) / DDL__PW_R, threads = ddl__threads();
    dw_job j = {g, x, dy, dw, nb, threads < tiles ? threads : tiles};
    if (j.tasks > 1)
        ddl__parallel(j.tasks, dw_range, &j);
    else
        dw_range(&j, 0);
}

#else

int ddl__conv1x1_ok(const ddl_conv2d *g)
{
    (void)g;
    return 0;
}
int ddl__conv1x1_avx2_ok(const ddl_conv2d *g)
{
    (void)g;
    return 0;
}
void ddl__conv1x1_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y)
{
    (void)g, (void)x, (void)w, (void)b, (void)y;
}
void ddl__conv1x1_dx(const ddl_conv2d *g, const float *w, const float *dy, float *dx)
{
    (void)g, (void)w, (void)dy, (void)dx;
}
void ddl__conv1x1_dw(const ddl_conv2d *g, const float *x, const float *dy, float *dw, int nb)
{
    (void)g, (void)x, (void)dy, (void)dw, (void)nb;
}

#endif
