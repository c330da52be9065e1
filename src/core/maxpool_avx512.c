/* maxpool_avx512.c - the 2x2, stride-2 max-pool (LeNet's and U-Net's), forward and backward, and
 * the windows of any other max-pool that lie inside the image (pool2d.c's), forward, on a CPU with
 * AVX-512, chosen at run time (ops.c asks first, else runs its scalar loops). Forward:
 * 16 windows of a row pair at a time, 32 floats of each row split into even and odd columns by
 * two permutes, then the scalar loop's four picks as masked blends, in its order: the first
 * maximum wins, a NaN wins over numbers (and the first NaN over later ones). Backward: each
 * window's four gradients written at once. Output, argmax and dx are the scalar loops', bit for
 * bit; the last windows of a row are masked, never a different path. */
#include "maxpool2.h"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(DDL_NO_CLONES)

#include <immintrin.h>
#include <string.h>

#include "avx512_some.h"

#define AVX512 __attribute__((target("avx512f")))

/* Rows of fewer windows stay with the scalar loops: LeNet's pool2 (5 a row) ran 36 -> 43 us forward
 * and 14 -> 39 backward at 2 threads on 16-lane steps mostly masked (lenet_ops, 3 alternated). */
#define MIN_WINDOWS 8

/* pick: where v beats the running maximum bv (greater, or a NaN over a number), take v and its
 * index. */
AVX512 static inline void pick(__m512 v, __m512i at, __m512 *bv, __m512i *best)
{
    __mmask16 take = _mm512_cmp_ps_mask(v, *bv, _CMP_GT_OQ) |
                     (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(*bv, *bv, _CMP_ORD_Q));
    *bv = _mm512_mask_blend_ps(take, *bv, v);
    *best = _mm512_mask_blend_epi32(take, *best, at);
}

/* row_pair: the ow windows of rows r0 and r1 (= r0 + w) of a plane, the first at index top. */
AVX512 static void row_pair(const float *r0, int w, int ow, int top, float *out, int32_t *arg)
{
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const float *r1 = r0 + w;
    for (int ox = 0; ox < ow; ox += 16) {
        int n = ow - ox < 16 ? ow - ox : 16; /* windows in this step */
        __mmask16 lo = (__mmask16)(n >= 8 ? 0xffff : (1u << 2 * n) - 1);
        __mmask16 hi = (__mmask16)(n >= 16 ? 0xffff : n <= 8 ? 0 : (1u << (2 * n - 16)) - 1);
        __m512 a0 = ddl__load_some(lo, r0 + 2 * ox), a1 = ddl__load_some(hi, r0 + 2 * ox + 16);
        __m512 b0 = ddl__load_some(lo, r1 + 2 * ox), b1 = ddl__load_some(hi, r1 + 2 * ox + 16);
        __m512i at = _mm512_add_epi32(_mm512_set1_epi32(top + 2 * ox), even);
        __m512 bv = _mm512_permutex2var_ps(a0, even, a1);
        __m512i best = at;
        pick(_mm512_permutex2var_ps(a0, odd, a1), _mm512_add_epi32(at, _mm512_set1_epi32(1)), &bv, &best);
        pick(_mm512_permutex2var_ps(b0, even, b1), _mm512_add_epi32(at, _mm512_set1_epi32(w)), &bv, &best);
        pick(_mm512_permutex2var_ps(b0, odd, b1), _mm512_add_epi32(at, _mm512_set1_epi32(w + 1)), &bv, &best);
        __mmask16 keep = (__mmask16)(n >= 16 ? 0xffff : (1u << n) - 1);
        ddl__store_some(keep, out + ox, bv);
        ddl__store_some_epi32(keep, arg + ox, best);
    }
}

/* ddl__maxpool_inside_avx512: pool2d.c's windows that lie wholly in the image, outputs [xa, xb)
 * of one row (windows of kh x kw taps dh, dw apart from row y0, column x0 + ox sw), 16 at a time,
 * every tap a masked load (stride 1), two and a permute (stride 2) or a gather, then pick: the
 * first tap taken, a later one where it beats the maximum so far, as pool2d.c's max_at in its
 * order, bit for bit. ResNet's 3x3 stride-2 pool: 31 -> 5-6 ms a batch of 64 (tools/bench/pool.c). */
AVX512 static void inside_row(const float *img, int w, int kh, int kw, int dh, int dw, int sw, int y0, int x0, int xa,
                              int xb, float *out, int32_t *arg)
{
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i step = _mm512_mullo_epi32(lane, _mm512_set1_epi32(sw));
    for (int ox = xa; ox < xb; ox += 16) {
        int n = xb - ox < 16 ? xb - ox : 16;
        __mmask16 keep = (__mmask16)(n >= 16 ? 0xffff : (1u << n) - 1);
        /* stride 2 reads floats 0 to 2n - 2, no further */
        __mmask16 lo = (__mmask16)(n >= 9 ? 0xffff : (1u << (2 * n - 1)) - 1);
        __mmask16 hi = (__mmask16)(n <= 8 ? 0 : (1u << (2 * n - 17)) - 1);
        __m512 bv = _mm512_setzero_ps();
        __m512i best = _mm512_setzero_si512();
        for (int i = 0; i < kh; i++)
            for (int k = 0; k < kw; k++) {
                int first = (y0 + i * dh) * w + x0 + k * dw + ox * sw;
                const float *p = img + first;
                __m512 v;
                if (sw == 1)
                    v = ddl__load_some(keep, p);
                else if (sw == 2)
                    v = _mm512_permutex2var_ps(ddl__load_some(lo, p), even, ddl__load_some(hi, p + 16));
                else
                    v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), keep, step, p, 4);
                __m512i at = _mm512_add_epi32(_mm512_set1_epi32(first), step);
                if (i == 0 && k == 0) {
                    bv = v, best = at;
                    continue;
                }
                pick(v, at, &bv, &best);
            }
        ddl__store_some(keep, out + ox, bv);
        ddl__store_some_epi32(keep, arg + ox, best);
    }
}

int ddl__maxpool_inside_avx512(const float *img, int w, int kh, int kw, int dh, int dw, int sw, int y0, int x0, int xa,
                               int xb, float *out, int32_t *arg)
{
    if (!__builtin_cpu_supports("avx512f"))
        return 0;
    inside_row(img, w, kh, kw, dh, dw, sw, y0, x0, xa, xb, out, arg);
    return 1;
}

int ddl__maxpool2_avx512(size_t planes, int h, int w, const float *x, float *y, int32_t *argmax)
{
    if (w / 2 < MIN_WINDOWS || !__builtin_cpu_supports("avx512f"))
        return 0;
    ddl__pool2_planes(planes, h, w, x, y, argmax, row_pair);
    return 1;
}


/* unpool_pair: the backward of row_pair: rows r0 and r1 (= r0 + w) of dx from the ow windows'
 * dy and argmax, every input in one window (stride 2), so each float is written once: dy where
 * the argmax points, else zero. 0.0f + dy is what the scalar scatter (zeros, then +=) writes, so
 * the bits are its bits (a -0.0 in dy comes out +0.0 in both). */
AVX512 static void unpool_pair(const float *dy, const int32_t *arg, const float *keep, int w, int ow, int top,
                               float *r0)
{
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i lo_idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi_idx = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    float *r1 = r0 + w;
    for (int ox = 0; ox < ow; ox += 16) {
        int n = ow - ox < 16 ? ow - ox : 16;
        __mmask16 some = (__mmask16)(n >= 16 ? 0xffff : (1u << n) - 1);
        __mmask16 lo = (__mmask16)(n >= 8 ? 0xffff : (1u << 2 * n) - 1);
        __mmask16 hi = (__mmask16)(n >= 16 ? 0xffff : n <= 8 ? 0 : (1u << (2 * n - 16)) - 1);
        __m512 g = _mm512_add_ps(_mm512_setzero_ps(), ddl__load_some(some, dy + ox));
        if (keep) /* +0 where the output is not > 0: the ReLU before the pool */
            g = _mm512_maskz_mov_ps(
                _mm512_cmp_ps_mask(ddl__load_some(some, keep + ox), _mm512_setzero_ps(), _CMP_GT_OQ), g);
        __m512i a = ddl__load_some_epi32(some, arg + ox);
        __m512i at = _mm512_add_epi32(_mm512_set1_epi32(top + 2 * ox), even);
        __m512 v00 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(a, at), g);
        __m512 v01 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(a, _mm512_add_epi32(at, _mm512_set1_epi32(1))), g);
        __m512 v10 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(a, _mm512_add_epi32(at, _mm512_set1_epi32(w))), g);
        __m512 v11 =
            _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(a, _mm512_add_epi32(at, _mm512_set1_epi32(w + 1))), g);
        ddl__store_some(lo, r0 + 2 * ox, _mm512_permutex2var_ps(v00, lo_idx, v01));
        ddl__store_some(hi, r0 + 2 * ox + 16, _mm512_permutex2var_ps(v00, hi_idx, v01));
        ddl__store_some(lo, r1 + 2 * ox, _mm512_permutex2var_ps(v10, lo_idx, v11));
        ddl__store_some(hi, r1 + 2 * ox + 16, _mm512_permutex2var_ps(v10, hi_idx, v11));
    }
}

int ddl__unpool2_avx512(size_t planes, int h, int w, const float *dy, const int32_t *argmax, const float *keep,
                        float *dx)
{
    if (w / 2 < MIN_WINDOWS || !__builtin_cpu_supports("avx512f"))
        return 0;
    ddl__unpool2_planes(planes, h, w, dy, argmax, keep, dx, unpool_pair);
    return 1;
}

#else

int ddl__maxpool_inside_avx512(const float *img, int w, int kh, int kw, int dh, int dw, int sw, int y0, int x0, int xa,
                               int xb, float *out, int32_t *arg)
{
    (void)img, (void)w, (void)kh, (void)kw, (void)dh, (void)dw, (void)sw, (void)y0, (void)x0, (void)xa, (void)xb;
    (void)out, (void)arg;
    return 0;
}

int ddl__maxpool2_avx512(size_t planes, int h, int w, const float *x, float *y, int32_t *argmax)
{
    (void)planes, (void)h, (void)w, (void)x, (void)y, (void)argmax;
    return 0;
}

int ddl__unpool2_avx512(size_t planes, int h, int w, const float *dy, const int32_t *argmax, const float *keep,
                        float *dx)
{
    (void)planes, (void)h, (void)w, (void)dy, (void)argmax, (void)keep, (void)dx;
    return 0;
}

#endif
