/* deconv2x2_avx2.c - the 2x2 stride-2 transposed convolution's forward pass direct (U-Net's
 * upsampling) where the AVX2 tiles run (ddl__avx2_tiles: AVX2 and FMA, no AVX-512), in place of
 * conv.c's column matrix and OpenBLAS's product, with the bits of deconv2x2_avx512.c's forward:
 * each output the sum over the input channels in order, one fused multiply-add each from +0, then
 * 1 x sum + 0, + 0 and the bias. In 8-float vectors: a tile is the 4 taps (a, b) of one output
 * channel at 24 positions (12 sums, 3 vectors of x and a weight: AVX2's 16 registers), and the
 * sums of b = 0 and b = 1 are interleaved by an unpack and a 128-bit lane swap on the way to
 * their pixels. On an AMD EPYC without AVX-512 (Zen 3) the column matrix's forward ran at 13-24
 * GFLOP/s, 7.3 ms of U-Net's step. The backward (input gradient and weight gradient, up to
 * BACK_MOST weights as on AVX-512) likewise, with deconv2x2_avx512.c's bits: see below. */
#include "deconv2x2.h"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(DDL_NO_CLONES)

#include <immintrin.h>
#include <string.h>


#define TV 3 /* vectors of 8 positions a tile */

/* out_tile: output channel oc of sample xn (into its plane yo) at nv vectors of positions from p:
 * each vector 8 positions of one row (w % 8 == 0) */
DDL__AVX2 static inline __attribute__((always_inline)) void out_tile(const ddl_conv2d *g, const float *xn,
                                                                    const float *w, const float *b, float *yo,
                                                                    int oc, size_t p, int nv)
{
    size_t p_n = (size_t)g->in_h * g->in_w, iw = (size_t)g->in_w, wstride = 4 * (size_t)g->out_c;
    const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
    __m256 acc[4][TV];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
        _Pragma("GCC unroll 4") for (int v = 0; v < TV; v++)
            acc[r][v] = zero;
    const float *wt = w + (size_t)oc * 4; /* w (in_c, out_c, 2, 2): tap r of oc for input channel ic */
    for (int ic = 0; ic < g->in_c; ic++) {
        const float *xs = xn + (size_t)ic * p_n + p;
        __m256 d[TV];
        _Pragma("GCC unroll 4") for (int v = 0; v < TV; v++)
            d[v] = v < nv ? _mm256_loadu_ps(xs + 8 * v) : zero;
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
            __m256 wv = _mm256_broadcast_ss(wt + (size_t)ic * wstride + r);
            _Pragma("GCC unroll 4") for (int v = 0; v < TV; v++)
                acc[r][v] = _mm256_fmadd_ps(wv, d[v], acc[r][v]);
        }
    }
    __m256 bias = b ? _mm256_set1_ps(b[oc]) : zero;
    _Pragma("GCC unroll 4") for (int v = 0; v < nv; v++) {
        size_t q = p + 8 * (size_t)v, i = q / iw, j = q % iw;
        _Pragma("GCC unroll 4") for (int a = 0; a < 2; a++) {
            __m256 v0 = _mm256_add_ps(zero, _mm256_fmadd_ps(one, acc[2 * a][v], zero));
            __m256 v1 = _mm256_add_ps(zero, _mm256_fmadd_ps(one, acc[2 * a + 1][v], zero));
            __m256 lo = _mm256_unpacklo_ps(v0, v1), hi = _mm256_unpackhi_ps(v0, v1);
            __m256 r0 = _mm256_permute2f128_ps(lo, hi, 0x20), r1 = _mm256_permute2f128_ps(lo, hi, 0x31);
            if (b)
                r0 = _mm256_add_ps(r0, bias), r1 = _mm256_add_ps(r1, bias);
            float *dst = yo + (2 * i + (size_t)a) * 2 * iw + 2 * j;
            _mm256_storeu_ps(dst, r0);
            _mm256_storeu_ps(dst + 8, r1);
        }
    }
}

typedef struct fwd_job {
    const ddl_conv2d *g;
    const float *x, *w, *b;
    float *y;
} fwd_job;

DDL__AVX2 static void fwd_samples(void *ctx, size_t lo, size_t hi)
{
    const fwd_job *j = ctx;
    const ddl_conv2d *g = j->g;
    size_t p_n = (size_t)g->in_h * g->in_w;
    for (size_t n = lo; n < hi; n++)
        for (int oc = 0; oc < g->out_c; oc++) {
            const float *xn = j->x + n * (size_t)g->in_c * p_n;
            float *yo = j->y + (n * (size_t)g->out_c + (size_t)oc) * 4 * p_n;
            for (size_t p = 0; p < p_n; p += 8 * TV) {
                if (p_n - p >= 8 * TV)
                    out_tile(g, xn, j->w, j->b, yo, oc, p, TV);
                else
                    out_tile(g, xn, j->w, j->b, yo, oc, p, (int)(p_n - p) / 8);
            }
        }
}

void ddl__deconv2x2_forward_avx2(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y)
{
    fwd_job j = {g, x, w, b, y};
    ddl__parallel_range((size_t)g->batch, 1, fwd_samples, &j);
}

/* ---- backward ----
 * deconv2x2_avx512.c's back_chunk in 8-float vectors, the same operations on every value: dy's
 * blocks split into their taps (dd) by the same walk, the weight gradient's 16 lanes a weight
 * (position c of the chunk in lane c mod 16) summed as two halves of 8 and reduced as
 * _mm512_reduce_add_ps reduces them, dx's sums over (oc, a, b) in order from +0, stored as
 * 1 x sum + 0. A lanes tile is 2 input channels x the 4 taps of one output channel, one half at
 * a time (8 sums; 4 x 2 took 1.2x as long, 3 x 4 1.1x: U-Net's up0, 16 -> 8 at 32x32, batch 32,
 * one thread, dx and dw 2.32 ms by the column matrix, 1.75 so); a dx tile 4 input channels x 24
 * positions, as the forward's. */

/* split8: dd (k rows of `len` floats) = the taps of dy at the chunk's flat positions [c0, c0 +
 * len) (deconv2x2_avx512.c's split): a run's 16 floats, 8 positions' b = 0 and b = 1, parted by
 * a 128-bit lane swap and two shuffles */
DDL__AVX2 static void split8(const ddl__deconv2x2_back *j, int n0, size_t c0, size_t len, float *dd)
{
    const ddl_conv2d *g = j->g;
    int oc_n = g->out_c, w = g->in_w;
    size_t op = 4 * (size_t)g->in_h * w;
    place q = {(size_t)g->in_h * w, 0, 0};
    place_at(&q, n0, c0);
    walk wk = {(size_t)w, q.p / (size_t)w, q.p % (size_t)w, {0, 0}};
    for (size_t c = 0; c < len; c += 16) {
        walk_step(&wk);
        for (int oc = 0; oc < oc_n; oc++) {
            const float *dyo = j->dy + (q.s * oc_n + (size_t)oc) * op;
            for (int a = 0; a < 2; a++) {
                float *row = dd + (size_t)(oc * 4 + 2 * a) * len + c;
                for (int r = 0; r < 2; r++) {
                    const float *src = dyo + wk.off[r] + (size_t)a * 2 * w;
                    __m256 lo = _mm256_loadu_ps(src), hi = _mm256_loadu_ps(src + 8);
                    __m256 p = _mm256_permute2f128_ps(lo, hi, 0x20), s = _mm256_permute2f128_ps(lo, hi, 0x31);
                    _mm256_storeu_ps(row + 8 * r, _mm256_shuffle_ps(p, s, 0x88));
                    _mm256_storeu_ps(row + len + 8 * r, _mm256_shuffle_ps(p, s, 0xdd));
                }
            }
        }
        place_step(&q);
        if (q.p == 0)
            wk.i = 0, wk.j = 0;
    }
}

#define LR 2 /* input channels of a lanes tile */
#define LT 4 /* taps of a lanes tile */

/* lanes_half: half h (lanes 8 h .. 8 h + 7) of the lanes of input channels [i0, i0 + in) (in <=
 * LR; the rest read as zeros, not stored) and taps [t0, t0 + LT) of output channel oc += x times
 * the taps dd at the block's flat positions [0, len) (place q0), in order, a sample's run at a
 * time */
DDL__AVX2 static inline __attribute__((always_inline)) void lanes_half(const ddl__deconv2x2_back *j, float *lanes,
                                                                      int i0, int in, int oc, int t0, int h, place q0,
                                                                      size_t len, const float *dd)
{
    const ddl_conv2d *g = j->g;
    size_t k = 4 * (size_t)g->out_c;
    const __m256 zero = _mm256_setzero_ps();
    float *lane = lanes + ((size_t)i0 * k + (size_t)oc * 4 + (size_t)t0) * 16 + 8 * (size_t)h;
    __m256 acc[LR][LT];
    _Pragma("GCC unroll 4") for (int r = 0; r < LR; r++)
        _Pragma("GCC unroll 4") for (int t = 0; t < LT; t++)
            acc[r][t] = r < in ? _mm256_load_ps(lane + ((size_t)r * k + (size_t)t) * 16) : zero;
    const float *d0 = dd + ((size_t)oc * 4 + (size_t)t0) * len + 8 * (size_t)h;
    place q = q0;
    for (size_t c = 0; c < len;) {
        size_t run = q.p_n - q.p < len - c ? q.p_n - q.p : len - c; /* positions of this sample */
        const float *xr = j->x + (q.s * g->in_c + (size_t)i0) * q.p_n + q.p + 8 * (size_t)h;
        for (size_t s = 0; s < run; s += 16) {
            __m256 xv[LR], dv[LT];
            _Pragma("GCC unroll 4") for (int r = 0; r < LR; r++)
                xv[r] = r < in ? _mm256_loadu_ps(xr + (size_t)r * q.p_n + s) : zero;
            _Pragma("GCC unroll 4") for (int t = 0; t < LT; t++)
                dv[t] = _mm256_loadu_ps(d0 + (size_t)t * len + c + s);
            _Pragma("GCC unroll 4") for (int r = 0; r < LR; r++)
                _Pragma("GCC unroll 4") for (int t = 0; t < LT; t++)
                    acc[r][t] = _mm256_fmadd_ps(xv[r], dv[t], acc[r][t]);
        }
        c += run, q.s++, q.p = 0;
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < LR; r++)
        _Pragma("GCC unroll 4") for (int t = 0; t < LT; t++)
            if (r < in)
                _mm256_store_ps(lane + ((size_t)r * k + (size_t)t) * 16, acc[r][t]);
}

DDL__AVX2 static void lanes_block(const ddl__deconv2x2_back *j, float *lanes, int oc, place q, size_t len,
                                  const float *dd)
{
    int in_c = j->g->in_c;
    for (int i0 = 0; i0 < in_c; i0 += LR)
        for (int t0 = 0; t0 < 4; t0 += LT)
            for (int h = 0; h < 2; h++) {
                if (in_c - i0 >= LR) /* a whole tile: its loops without the spare rows' tests */
                    lanes_half(j, lanes, i0, LR, oc, t0, h, q, len, dd);
                else
                    lanes_half(j, lanes, i0, in_c - i0, oc, t0, h, q, len, dd);
            }
}

#define XR 4 /* input channels of a dx tile */
#define XV 3 /* vectors of 8 positions */

/* dx_tile: dx of input channels [i0, i0 + in) (rows past in take row i0's weights and are not
 * stored) at nv vectors of 8 flat positions from column c of the block (its flat position c0 +
 * c of chunk n0) = the sums over (oc, a, b) in order of w times the taps dd, from +0, stored as
 * 1 x sum + 0 */
DDL__AVX2 static inline __attribute__((always_inline)) void dx_tile(const ddl__deconv2x2_back *j, int i0, int in,
                                                                   int n0, size_t c0, const float *dd, size_t len,
                                                                   size_t c, int nv)
{
    const ddl_conv2d *g = j->g;
    int k = 4 * g->out_c;
    const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
    const float *wr[XR];
    __m256 acc[XR][XV];
    _Pragma("GCC unroll 4") for (int r = 0; r < XR; r++) {
        wr[r] = j->w + (size_t)(i0 + (r < in ? r : 0)) * (size_t)k;
        _Pragma("GCC unroll 4") for (int v = 0; v < XV; v++)
            acc[r][v] = zero;
    }
    for (int t = 0; t < k; t++) {
        const float *st = dd + (size_t)t * len + c;
        __m256 d[XV];
        _Pragma("GCC unroll 4") for (int v = 0; v < XV; v++)
            d[v] = v < nv ? _mm256_loadu_ps(st + 8 * v) : zero;
        _Pragma("GCC unroll 4") for (int r = 0; r < XR; r++) {
            __m256 wv = _mm256_broadcast_ss(wr[r] + t);
            _Pragma("GCC unroll 4") for (int v = 0; v < XV; v++)
                acc[r][v] = _mm256_fmadd_ps(wv, d[v], acc[r][v]);
        }
    }
    place q = {(size_t)g->in_h * g->in_w, 0, 0};
    _Pragma("GCC unroll 4") for (int v = 0; v < nv; v++) {
        place_at(&q, n0, c0 + c + 8 * (size_t)v); /* 8 positions of one sample (p_n % 16 == 0) */
        float *out = j->dx + (q.s * g->in_c + (size_t)i0) * q.p_n + q.p;
        _Pragma("GCC unroll 4") for (int r = 0; r < XR; r++)
            if (r < in)
                _mm256_storeu_ps(out + (size_t)r * q.p_n, _mm256_fmadd_ps(one, acc[r][v], zero));
    }
}

DDL__AVX2 void ddl__deconv2x2_back_chunk_avx2(void *ctx, int t, float *scratch)
{
    const ddl__deconv2x2_back *j = ctx;
    const ddl_conv2d *g = j->g;
    ddl__deconv2x2_chunk ch;
    if (!ddl__deconv2x2_chunk_start(j, t, scratch, &ch))
        return;
    int k = ch.k, n0 = ch.n0, by_lanes = ch.by_lanes;
    size_t p_n = ch.p_n, cols = ch.cols, block = ch.block;
    float *lanes = ch.lanes, *dd = ch.dd, *part = ch.part;
    for (size_t c0 = 0; c0 < cols; c0 += block) {
        size_t len = cols - c0 < block ? cols - c0 : block;
        split8(j, n0, c0, len, dd);
        place q = {p_n, 0, 0};
        place_at(&q, n0, c0);
        for (int oc = 0; by_lanes && oc < g->out_c; oc++)
            lanes_block(j, lanes, oc, q, len, dd);
        for (size_t c = 0; j->dx && c < len; c += 8 * XV) {
            int nv = len - c < 8 * XV ? (int)(len - c) / 8 : XV;
            for (int i0 = 0; i0 < g->in_c; i0 += XR) {
                if (g->in_c - i0 >= XR && nv == XV)
                    dx_tile(j, i0, XR, n0, c0, dd, len, c, XV);
                else
                    dx_tile(j, i0, g->in_c - i0 < XR ? g->in_c - i0 : XR, n0, c0, dd, len, c, nv);
            }
        }
    }
    for (size_t e = 0; by_lanes && e < (size_t)g->in_c * k; e++)
        part[e] = ddl__reduce16(lanes + e * 16);
}

#else

void ddl__deconv2x2_forward_avx2(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y)
{
    (void)g, (void)x, (void)w, (void)b, (void)y;
}

#endif
