/* conv1x1_avx2.c - the 1x1 stride-1 convolution's three passes direct (a
 * segmentation head, a pointwise layer) where the AVX2 tiles run (ddl__avx2_tiles: AVX2 and FMA,
 * no AVX-512), in place of conv.c's column matrix and OpenBLAS's product, with the bits of
 * conv1x1_avx512.c's: each sum over the terms (input channels forward, output channels for the
 * input gradient) in order, one fused multiply-add each from +0, then y = (1 x sum + 0) + bias, dx
 * = 0 + (1 x sum + 0). In 8-float vectors, a tile is 4 rows x 24 positions (12 sums, 3 vectors of
 * the source and a weight: AVX2's 16 registers). The weight gradient too (below).
 * Which layers: ddl__conv1x1_avx2_ok (conv1x1_avx512.c, beside the AVX-512 kernels' rule). */
#include "impl.h"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(DDL_NO_CLONES)

#include <immintrin.h>
#include <math.h>

#include "pointwise_avx512.h" /* DDL__PW_DOTS_K, DDL__PW_NARROW: where the weight gradient goes by lanes */

#define TR 4 /* rows of a tile */
#define TV 3 /* vectors of 8 positions */

typedef struct rows_job {
    const ddl_conv2d *g;
    const float *src, *w, *b; /* src: x (forward) or dy (input gradient) */
    float *out;
    int fwd;
} rows_job;

/* tile: out rows [r0, r0 + rn) of one sample at nv vectors from position p (rows past rn read
 * row r0's weights; their sums are not stored) */
DDL__AVX2 static inline __attribute__((always_inline)) void tile(const rows_job *j, const float *src, float *out,
                                                                int r0, int rn, size_t p, int nv)
{
    const ddl_conv2d *g = j->g;
    size_t p_n = (size_t)g->in_h * g->in_w;
    int terms = j->fwd ? g->in_c : g->out_c;
    size_t rs = j->fwd ? (size_t)g->in_c : 1, ts = j->fwd ? 1 : (size_t)g->in_c; /* w (out_c, in_c) */
    const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
    const float *wr[TR];
    __m256 acc[TR][TV];
    _Pragma("GCC unroll 4") for (int r = 0; r < TR; r++) {
        wr[r] = j->w + (size_t)(r0 + (r < rn ? r : 0)) * rs;
        _Pragma("GCC unroll 4") for (int v = 0; v < TV; v++)
            acc[r][v] = zero;
    }
    for (int t = 0; t < terms; t++) {
        const float *st = src + (size_t)t * p_n + p;
        __m256 d[TV];
        _Pragma("GCC unroll 4") for (int v = 0; v < TV; v++)
            d[v] = v < nv ? _mm256_loadu_ps(st + 8 * v) : zero;
        _Pragma("GCC unroll 4") for (int r = 0; r < TR; r++) {
            __m256 wv = _mm256_broadcast_ss(wr[r] + (size_t)t * ts);
            _Pragma("GCC unroll 4") for (int v = 0; v < TV; v++)
                acc[r][v] = _mm256_fmadd_ps(wv, d[v], acc[r][v]);
        }
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < rn; r++) {
        float *o = out + (size_t)(r0 + r) * p_n + p;
        __m256 bias = j->fwd && j->b ? _mm256_set1_ps(j->b[r0 + r]) : zero;
        _Pragma("GCC unroll 4") for (int v = 0; v < nv; v++) {
            __m256 s = _mm256_fmadd_ps(one, acc[r][v], zero); /* the product's store */
            s = j->fwd ? (j->b ? _mm256_add_ps(s, bias) : s) : _mm256_add_ps(zero, s);
            _mm256_storeu_ps(o + 8 * v, s);
        }
    }
}

DDL__AVX2 static void rows_samples(void *ctx, size_t lo, size_t hi)
{
    const rows_job *j = ctx;
    const ddl_conv2d *g = j->g;
    int rows = j->fwd ? g->out_c : g->in_c, terms = j->fwd ? g->in_c : g->out_c;
    size_t p_n = (size_t)g->in_h * g->in_w;
    for (size_t n = lo; n < hi; n++) {
        const float *src = j->src + n * terms * p_n;
        float *out = j->out + n * rows * p_n;
        for (size_t p = 0; p < p_n; p += 8 * TV) {
            int nv = p_n - p < 8 * TV ? (int)(p_n - p) / 8 : TV;
            for (int r0 = 0; r0 < rows; r0 += TR) {
                if (rows - r0 >= TR && nv == TV)
                    tile(j, src, out, r0, TR, p, TV);
                else
                    tile(j, src, out, r0, rows - r0 < TR ? rows - r0 : TR, p, nv);
            }
        }
    }
}

void ddl__conv1x1_forward_avx2(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y)
{
    rows_job j = {g, x, w, b, y, 1};
    ddl__parallel_range((size_t)g->batch, 1, rows_samples, &j);
}

void ddl__conv1x1_dx_avx2(const ddl_conv2d *g, const float *w, const float *dy, float *dx)
{
    rows_job j = {g, dy, w, NULL, dx, 0};
    ddl__parallel_range((size_t)g->batch, 1, rows_samples, &j);
}

/* ---- weight gradient ----
 * conv1x1_avx512.c's in 8-float vectors: per chunk of conv.c's samples, each weight's 16 lanes
 * over the chunk's positions (position c in lane c mod 16), here two halves of 8 one after the
 * other within each sample, reduced as _mm512_reduce_add_ps (ddl__reduce16) into 1 x sum + 0
 * and added; a chunk of fewer than DDL__PW_DOTS_K positions over DDL__PW_NARROW input channels or
 * more one sum in order. A tile is 2 output x 4 input channels (8 sums, 2 vectors of dy and 4 of
 * x). U-Net's head (8 -> 11 at 64x64, batch 32, one thread, best of 40): 1.41-1.63 ms by the
 * column matrix, 0.87-1.06 so. */

#define GR 2 /* output channels of a weight-gradient tile */
#define GV 4 /* input channels */

typedef struct dw_job {
    const ddl_conv2d *g;
    const float *x, *dy;
    float *dw;
    int nb, tasks; /* samples a chunk (conv.c's); ranges of output channels */
} dw_job;

/* dw_tile: dw rows [o0, o0 + rn) x columns [i0, i0 + vn) += their lanes' sums over the chunk of m
 * samples from n0 (rows past rn read as zeros, columns past vn read column i0; neither stored) */
DDL__AVX2 static inline __attribute__((always_inline)) void dw_tile(const dw_job *j, int o0, int rn, int i0, int vn,
                                                                   int n0, int m)
{
    const ddl_conv2d *g = j->g;
    size_t p_n = (size_t)g->in_h * g->in_w;
    const __m256 zero = _mm256_setzero_ps();
    float lanes[GR][GV][16] __attribute__((aligned(32))) = {{{0}}};
    for (int s = n0; s < n0 + m; s++) /* a sample's rows stay in the L2 cache for its second half */
        for (int h = 0; h < 2; h++) {
            __m256 acc[GR][GV];
            _Pragma("GCC unroll 4") for (int r = 0; r < GR; r++)
                _Pragma("GCC unroll 4") for (int t = 0; t < GV; t++)
                    acc[r][t] = _mm256_load_ps(lanes[r][t] + 8 * h);
            const float *a = j->dy + ((size_t)s * g->out_c + (size_t)o0) * p_n + 8 * (size_t)h;
            const float *b = j->x + ((size_t)s * g->in_c + (size_t)i0) * p_n + 8 * (size_t)h;
            for (size_t c = 0; c < p_n; c += 16) {
                __m256 av[GR], bv[GV];
                _Pragma("GCC unroll 4") for (int r = 0; r < GR; r++)
                    av[r] = r < rn ? _mm256_loadu_ps(a + (size_t)r * p_n + c) : zero;
                _Pragma("GCC unroll 4") for (int t = 0; t < GV; t++)
                    bv[t] = _mm256_loadu_ps(b + (size_t)(t < vn ? t : 0) * p_n + c);
                _Pragma("GCC unroll 4") for (int r = 0; r < GR; r++)
                    _Pragma("GCC unroll 4") for (int t = 0; t < GV; t++)
                        acc[r][t] = _mm256_fmadd_ps(av[r], bv[t], acc[r][t]);
            }
            _Pragma("GCC unroll 4") for (int r = 0; r < GR; r++)
                _Pragma("GCC unroll 4") for (int t = 0; t < GV; t++)
                    _mm256_store_ps(lanes[r][t] + 8 * h, acc[r][t]);
        }
    for (int r = 0; r < rn; r++)
        for (int t = 0; t < vn; t++) {
            float *at = j->dw + (size_t)(o0 + r) * g->in_c + (size_t)(i0 + t);
            *at += fmaf(1.0f, ddl__reduce16(lanes[r][t]), 0.0f);
        }
}

/* dw_range: task t's output channels (tiles of GR), over every chunk in order */
DDL__AVX2 static void dw_range(void *ctx, int task)
{
    const dw_job *j = ctx;
    const ddl_conv2d *g = j->g;
    int tiles = (g->out_c + GR - 1) / GR, ic_n = g->in_c;
    int o_lo = task * tiles / j->tasks * GR, o_hi = (task + 1) * tiles / j->tasks * GR;
    if (o_hi > g->out_c)
        o_hi = g->out_c;
    size_t p_n = (size_t)g->in_h * g->in_w;
    for (int n0 = 0; n0 < g->batch; n0 += j->nb) {
        int m = g->batch - n0 < j->nb ? g->batch - n0 : j->nb;
        if ((size_t)m * p_n < DDL__PW_DOTS_K && ic_n >= DDL__PW_NARROW) {
            ddl__conv1x1_dw_in_order(g, j->x, j->dy, j->dw, o_lo, o_hi, n0, m);
            continue;
        }
        for (int o0 = o_lo; o0 < o_hi; o0 += GR)
            for (int i0 = 0; i0 < ic_n; i0 += GV) {
                int rn = o_hi - o0 < GR ? o_hi - o0 : GR, vn = ic_n - i0 < GV ? ic_n - i0 : GV;
                if (rn == GR && vn == GV) /* a whole tile: its loops without the spares' tests */
                    dw_tile(j, o0, GR, i0, GV, n0, m);
                else
                    dw_tile(j, o0, rn, i0, vn, n0, m);
            }
    }
}

void ddl__conv1x1_dw_avx2(const ddl_conv2d *g, const float *x, const float *dy, float *dw, int nb)
{
    int tiles = (g->out_c + GR - 1) / GR, threads = ddl__threads();
    dw_job j = {g, x, dy, dw, nb, threads < tiles ? threads : tiles};
    if (j.tasks > 1)
        ddl__parallel(j.tasks, dw_range, &j);
    else
        dw_range(&j, 0);
}

#else

void ddl__conv1x1_forward_avx2(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y)
{
    (void)g, (void)x, (void)w, (void)b, (void)y;
}
void ddl__conv1x1_dx_avx2(const ddl_conv2d *g, const float *w, const float *dy, float *dx)
{
    (void)g, (void)w, (void)dy, (void)dx;
}
void ddl__conv1x1_dw_avx2(const ddl_conv2d *g, const float *x, const float *dy, float *dw, int nb)
{
    (void)g, (void)x, (void)dy, (void)dw, (void)nb;
}

#endif
