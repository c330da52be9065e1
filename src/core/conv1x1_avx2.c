/* conv1x1_avx2.c - the 1x1 stride-1 convolution's forward pass and input gradient direct (a
 * segmentation head, a pointwise layer) where the AVX2 tiles run (ddl__avx2_tiles: AVX2 and FMA,
 * no AVX-512), in place of conv.c's column matrix and OpenBLAS's product, with the bits of
 * conv1x1_avx512.c's: each sum over the terms (input channels forward, output channels for the
 * input gradient) in order, one fused multiply-add each from +0, then y = (1 x sum + 0) + bias, dx
 * = 0 + (1 x sum + 0). In 8-float vectors, a tile is 4 rows x 24 positions (12 sums, 3 vectors of
 * the source and a weight: AVX2's 16 registers). The weight gradient stays the column matrix's.
 * Which layers: ddl__conv1x1_avx2_ok (conv1x1_avx512.c, beside the AVX-512 kernels' rule). */
#include "impl.h"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(DDL_NO_CLONES)

#include <immintrin.h>

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

#else

void ddl__conv1x1_forward_avx2(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y)
{
    (void)g, (void)x, (void)w, (void)b, (void)y;
}
void ddl__conv1x1_dx_avx2(const ddl_conv2d *g, const float *w, const float *dy, float *dx)
{
    (void)g, (void)w, (void)dy, (void)dx;
}

#endif
