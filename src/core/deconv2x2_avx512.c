/* deconv2x2_avx512.c - the 2x2 stride-2 transposed convolution (U-Net's upsampling) direct, on
 * a CPU with AVX-512: forward, input gradient and weight gradient, with the bits of conv.c's
 * column matrix and ddl_gemm's AVX-512 kernels (gemm_avx512.c), which it replaces there.
 *
 * With k == s the taps do not overlap: output pixel (2i + a, 2j + b) of channel oc is one sum
 * over the input channels at (i, j), weight (ic, oc, a, b). conv.c made the (oc a b, positions)
 * column matrix by a product, zeroed the output, added the matrix onto it and added the bias in
 * three more passes; here each sum goes to its pixel as it leaves the registers
 * (pointwise_avx512.h's tile, the 4 taps of an output channel its rows): 16 positions' sums of
 * b = 0 and b = 1 interleaved by two permutes. The backward splits each block of dy into its
 * taps once (the permutes split a row's even and odd columns), for the input gradient and for
 * the weight gradient's 16-lane sums, a chunk of samples a task.
 *
 * Each value gets the operations of the path it replaces: the forward sum over input channels in
 * order, one fused multiply-add each from +0, then 1 x sum + 0 (the product's store), + 0 (the
 * zeroed output) and + bias; dx likewise over (oc, a, b) in order; dw, per chunk of conv.c's
 * samples, 16 lanes over the chunk's positions (position p in lane p mod 16) reduced by
 * _mm512_reduce_add_ps and added to dw by fmaf in chunk order, as gemm_avx512.c's dot products
 * (or, where a chunk is too short for them, one sum in order, as its outer products). U-Net's
 * three, 1 thread: tools/bench/kernels.c's "U-Net up" lines and docs/BENCHMARKS.md. */
#include "deconv2x2.h"

int ddl__deconv2x2_geometry(const ddl_conv2d *g)
{
    ddl__conv_full f = ddl__conv2d_full(g);
    size_t p = (size_t)g->in_h * g->in_w;
    return g->k_h == 2 && g->k_w == 2 && f.sh == 2 && f.sw == 2 && f.dh == 1 && f.dw == 1 && !f.pt && !f.pl &&
           !f.pb && !f.pr && !f.oph && !f.opw && f.groups == 1 && g->batch > 0 && g->in_c >= 2 && g->in_c <= 256 &&
           g->out_c > 0 && g->out_c <= 64 && g->in_w % 8 == 0 && p > 0 && p % 16 == 0;
}

/* The backward's lanes stay in the L2 cache up to 32 x 32 channels (256 KB): U-Net's up0 and up1,
 * backward 1.09 -> 0.62 and 0.80 -> 0.52 ms. Past it (up2, 64 -> 32 channels of 8x8 planes, 512 KB)
 * they went to memory every block, and the column matrix, whose dot products keep each sum in
 * registers over a chunk, took 0.50 ms against 0.59. */
#define BACK_MOST 1024 /* in_c out_c */

static int enabled = 1;
int ddl__deconv2x2_enable(int on)
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

int ddl__deconv2x2_ok(const ddl_conv2d *g, int backward)
{
    if (!enabled || !ddl__deconv2x2_geometry(g))
        return 0;
    if (!backward || (size_t)g->in_c * g->out_c <= BACK_MOST)
        return ddl__avx2_tiles() || ddl__gemm_avx512_have(); /* deconv2x2_avx2.c's, or these */
    return 0;
}

/* ---- forward ---- */

typedef struct fwd_job {
    const ddl_conv2d *g;
    const float *x, *w, *b;
    float *y;
} fwd_job;

/* out_channel: the 4 taps' sums of output channel oc at vn vectors of positions from p of sample
 * xn (pointwise_avx512.h's tile: the taps are its rows), then out to their pixels: the product's
 * store (1 x sum + 0), the zeroed output's + 0, then the bias; b = 0 and b = 1 interleaved. */
AVX512 static inline __attribute__((always_inline)) void out_channel(const fwd_job *j, const float *xn, float *yo,
                                                                     int oc, size_t p, int vn, walk *wk)
{
    const ddl_conv2d *g = j->g;
    size_t p_n = (size_t)g->in_h * g->in_w, w2 = 2 * (size_t)g->in_w;
    const __m512i lo_idx = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i hi_idx = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
    __m512 acc[DDL__PW_R][DDL__PW_V]; /* rows: the taps a 2 + b; w[ic, oc, a, b] */
    ddl__pw_sums(acc, j->w + (size_t)oc * 4, 1, 4 * (size_t)g->out_c, DDL__PW_R, xn + p, p_n, g->in_c, vn);
    __m512 bias = j->b ? _mm512_set1_ps(j->b[oc]) : zero;
    for (int v = 0; v < vn; v++) {
        walk_step(wk);
        for (int a = 0; a < 2; a++) {
            __m512 v0 = _mm512_add_ps(zero, _mm512_fmadd_ps(one, acc[2 * a][v], zero));
            __m512 v1 = _mm512_add_ps(zero, _mm512_fmadd_ps(one, acc[2 * a + 1][v], zero));
            __m512 r0 = _mm512_permutex2var_ps(v0, lo_idx, v1), r1 = _mm512_permutex2var_ps(v0, hi_idx, v1);
            if (j->b)
                r0 = _mm512_add_ps(r0, bias), r1 = _mm512_add_ps(r1, bias);
            _mm512_storeu_ps(yo + wk->off[0] + (size_t)a * w2, r0);
            _mm512_storeu_ps(yo + wk->off[1] + (size_t)a * w2, r1);
        }
    }
}

AVX512 static void fwd_samples(void *ctx, size_t lo, size_t hi)
{
    const fwd_job *j = ctx;
    const ddl_conv2d *g = j->g;
    int ic_n = g->in_c, oc_n = g->out_c;
    size_t p_n = (size_t)g->in_h * g->in_w, op = 4 * p_n;
    for (size_t n = lo; n < hi; n++)
        for (int oc = 0; oc < oc_n; oc++) {
            const float *xn = j->x + n * ic_n * p_n;
            float *yo = j->y + (n * oc_n + (size_t)oc) * op;
            walk wk = {(size_t)g->in_w, 0, 0, {0, 0}};
            for (size_t p = 0; p < p_n; p += 16 * DDL__PW_V) {
                if (p_n - p >= 16 * DDL__PW_V)
                    out_channel(j, xn, yo, oc, p, DDL__PW_V, &wk);
                else
                    out_channel(j, xn, yo, oc, p, (int)(p_n - p) / 16, &wk);
            }
        }
}

void ddl__deconv2x2_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y)
{
    if (ddl__avx2_tiles()) {
        ddl__deconv2x2_forward_avx2(g, x, w, b, y);
        return;
    }
    fwd_job j = {g, x, w, b, y};
    ddl__parallel_range((size_t)g->batch, 1, fwd_samples, &j);
}

/* ---- backward ----
 * A task a chunk of conv.c's samples, so that each thread reads its own part of dy once. By
 * blocks of the chunk's positions (its samples' planes one after another): each block of dy is
 * split once into its taps, dd (oc a b, block positions), in the L1 or L2 cache, and the weight
 * gradient's lanes and the input gradient read the taps from there. A chunk's weight gradient
 * sums go to its part, and the parts are added to dw in chunk order after the tasks, as the
 * column matrix's product added them: the bits do not depend on the thread count. Where the AVX2
 * tiles run, deconv2x2_avx2.c's chunks do the same in 8-float vectors (the job, the walk and the
 * chunk's plan, ddl__deconv2x2_chunk_start, are deconv2x2.h's). */

/* split: dd (k rows of `len` floats) = the taps of dy at the chunk's flat positions [c0, c0 +
 * len): row oc 4 + a 2 + b at column c - c0 holds dy[s, oc, 2i + a, 2j + b] for the position
 * (i, j) of c. */
AVX512 static void split(const ddl__deconv2x2_back *j, int n0, size_t c0, size_t len, float *dd)
{
    const ddl_conv2d *g = j->g;
    int oc_n = g->out_c, w = g->in_w;
    size_t op = 4 * (size_t)g->in_h * w;
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    place q = {(size_t)g->in_h * w, 0, 0};
    place_at(&q, n0, c0);
    walk wk = {(size_t)w, q.p / (size_t)w, q.p % (size_t)w, {0, 0}};
    for (size_t c = 0; c < len; c += 16) {
        walk_step(&wk);
        for (int oc = 0; oc < oc_n; oc++) {
            const float *dyo = j->dy + (q.s * oc_n + (size_t)oc) * op;
            for (int a = 0; a < 2; a++) {
                __m512 r0 = _mm512_loadu_ps(dyo + wk.off[0] + (size_t)a * 2 * w);
                __m512 r1 = _mm512_loadu_ps(dyo + wk.off[1] + (size_t)a * 2 * w);
                float *row = dd + (size_t)(oc * 4 + 2 * a) * len + c;
                _mm512_store_ps(row, _mm512_permutex2var_ps(r0, even, r1));
                _mm512_store_ps(row + len, _mm512_permutex2var_ps(r0, odd, r1));
            }
        }
        place_step(&q);
        if (q.p == 0)
            wk.i = 0, wk.j = 0;
    }
}

/* lanes_block: lanes of input channels [i0, i0 + in) (in <= DDL__PW_R) and output channel oc += x
 * times the taps dd at the flat positions [c0, c0 + len) (place q0), in order, 16 lanes
 * (pointwise_avx512.h's tile: x's rows by the taps' rows), a sample's run of the block at a time. */
AVX512 static inline __attribute__((always_inline)) void lanes_block(const ddl__deconv2x2_back *j, float *lanes, int i0,
                                                                      int in, int oc, place q0, size_t len,
                                                                      const float *dd)
{
    const ddl_conv2d *g = j->g;
    size_t k = 4 * (size_t)g->out_c;
    const __m512 zero = _mm512_setzero_ps();
    __m512 acc[DDL__PW_R][DDL__PW_V];
    float *lane = lanes + ((size_t)i0 * k + (size_t)oc * 4) * 16;
    for (int r = 0; r < DDL__PW_R; r++)
        for (int t = 0; t < DDL__PW_V; t++)
            acc[r][t] = r < in ? _mm512_load_ps(lane + ((size_t)r * k + (size_t)t) * 16) : zero;
    const float *d0 = dd + (size_t)oc * 4 * len;
    place q = q0;
    for (size_t c = 0; c < len;) {
        size_t run = q.p_n - q.p < len - c ? q.p_n - q.p : len - c; /* positions of this sample */
        ddl__pw_lanes(acc, in, j->x + (q.s * g->in_c + (size_t)i0) * q.p_n + q.p, q.p_n, d0 + c, len, run / 16);
        c += run, q.s++, q.p = 0;
    }
    for (int r = 0; r < in; r++)
        for (int t = 0; t < DDL__PW_V; t++)
            _mm512_store_ps(lane + ((size_t)r * k + (size_t)t) * 16, acc[r][t]);
}

/* dx_group: dx of input channels [i0, i0 + in) (in <= DDL__PW_R) at pv vectors of 16 flat positions
 * from column c of dd (place q) = the sums over (oc, a, b) in order of w times the taps
 * (pointwise_avx512.h's tile), then stored as the product stores them into a zeroed dx (1 x sum
 * + 0). */
AVX512 static inline __attribute__((always_inline)) void dx_group(const ddl__deconv2x2_back *j, int i0, int in, place q,
                                                                   const float *dd, size_t len, size_t c, int pv)
{
    const ddl_conv2d *g = j->g;
    size_t k = 4 * (size_t)g->out_c;
    const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
    __m512 acc[DDL__PW_R][DDL__PW_V];
    ddl__pw_sums(acc, j->w + (size_t)i0 * k, k, 1, in, dd + c, len, (int)k, pv);
    for (int v = 0; v < pv; v++) {
        float *out = j->dx + (q.s * g->in_c + (size_t)i0) * q.p_n + q.p;
        for (int r = 0; r < in; r++)
            _mm512_storeu_ps(out + (size_t)r * q.p_n, _mm512_fmadd_ps(one, acc[r][v], zero));
        place_step(&q);
    }
}

/* back_chunk: chunk t's dx, and its weight gradient's sums into its part. */
AVX512 static void back_chunk(void *ctx, int t, float *scratch)
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
        split(j, n0, c0, len, dd);
        place q = {p_n, 0, 0};
        place_at(&q, n0, c0);
        /* dd's rows of one output channel through every tile, then dd's columns of 64
         * positions through every tile: each in the L1 cache while the tiles read it */
        for (int oc = 0; by_lanes && oc < g->out_c; oc++)
            for (int i0 = 0; i0 < g->in_c; i0 += DDL__PW_R) {
                if (g->in_c - i0 >= DDL__PW_R) /* a whole tile: its loops without the spare rows' tests */
                    lanes_block(j, lanes, i0, DDL__PW_R, oc, q, len, dd);
                else
                    lanes_block(j, lanes, i0, g->in_c - i0, oc, q, len, dd);
            }
        for (size_t c = 0; j->dx && c < len; c += 64) {
            int pv = len - c < 64 ? (int)(len - c) / 16 : 4;
            for (int i0 = 0; i0 < g->in_c; i0 += DDL__PW_R) {
                if (g->in_c - i0 >= DDL__PW_R && pv == 4)
                    dx_group(j, i0, DDL__PW_R, q, dd, len, c, 4);
                else
                    dx_group(j, i0, g->in_c - i0 < DDL__PW_R ? g->in_c - i0 : DDL__PW_R, q, dd, len, c, pv);
            }
            for (int v = 0; v < pv; v++)
                place_step(&q);
        }
    }
    for (size_t e = 0; by_lanes && e < (size_t)g->in_c * k; e++)
        part[e] = _mm512_reduce_add_ps(_mm512_load_ps(lanes + e * 16));
}

size_t ddl__deconv2x2_dw_workspace(const ddl_conv2d *g, int nb)
{
    if ((size_t)g->in_c * g->out_c > BACK_MOST) /* the column matrix's backward */
        return 0;
    return DDL__DECONV2X2_SCRATCH(g) + (size_t)((g->batch + nb - 1) / nb) * g->in_c * 4 * g->out_c;
}

void ddl__deconv2x2_backward(const ddl_conv2d *g, const float *x, const float *w, const float *dy, float *dx,
                             float *dw, int nb, float *ws)
{
    int chunks = (g->batch + nb - 1) / nb;
    ddl__deconv2x2_back j = {g, x, w, dy, dx, dw, ws + DDL__DECONV2X2_SCRATCH(g), nb};
    void (*chunk)(void *, int, float *) = ddl__avx2_tiles() ? ddl__deconv2x2_back_chunk_avx2 : back_chunk;
    if (chunks > 1 && ddl__threads() > 1 && DDL__DECONV2X2_SCRATCH(g) <= DDL__THREAD_SCRATCH)
        ddl__parallel_ws(chunks, chunk, &j, ws);
    else
        for (int t = 0; t < chunks; t++)
            chunk(&j, t, ws);
    size_t wn = (size_t)g->in_c * 4 * g->out_c;
    for (int t = 0; dw && t < chunks; t++) /* in chunk order: the product's dw + sum */
        for (size_t e = 0; e < wn; e++)
            dw[e] = fmaf(1.0f, j.parts[(size_t)t * wn + e], dw[e]);
}

#else

int ddl__deconv2x2_ok(const ddl_conv2d *g, int backward)
{
    (void)g, (void)backward;
    return 0;
}
void ddl__deconv2x2_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y)
{
    (void)g, (void)x, (void)w, (void)b, (void)y;
}
size_t ddl__deconv2x2_dw_workspace(const ddl_conv2d *g, int nb)
{
    (void)g, (void)nb;
    return 0;
}
void ddl__deconv2x2_backward(const ddl_conv2d *g, const float *x, const float *w, const float *dy, float *dx,
                             float *dw, int nb, float *ws)
{
    (void)g, (void)x, (void)w, (void)dy, (void)dx, (void)dw, (void)nb, (void)ws;
}

#endif
