/* maxpool_avx512.c - the 2x2, stride-2 max-pool forward (LeNet's and U-Net's) on a CPU with
 * AVX-512, chosen at run time (ops.c asks first, else runs its scalar loop). 16 windows of a row
 * pair at a time: 32 floats of each row split into even and odd columns by two permutes, then
 * the scalar loop's four picks as masked blends, in its order: the first maximum wins, a NaN wins
 * over numbers (and the first NaN over later ones). So the output and the argmax are the scalar
 * loop's, bit for bit; the last windows of a row are masked, never a different path. */
#include "impl.h"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(DDL_NO_CLONES)

#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f")))

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
        __m512 a0 = _mm512_maskz_loadu_ps(lo, r0 + 2 * ox), a1 = _mm512_maskz_loadu_ps(hi, r0 + 2 * ox + 16);
        __m512 b0 = _mm512_maskz_loadu_ps(lo, r1 + 2 * ox), b1 = _mm512_maskz_loadu_ps(hi, r1 + 2 * ox + 16);
        __m512i at = _mm512_add_epi32(_mm512_set1_epi32(top + 2 * ox), even);
        __m512 bv = _mm512_permutex2var_ps(a0, even, a1);
        __m512i best = at;
        pick(_mm512_permutex2var_ps(a0, odd, a1), _mm512_add_epi32(at, _mm512_set1_epi32(1)), &bv, &best);
        pick(_mm512_permutex2var_ps(b0, even, b1), _mm512_add_epi32(at, _mm512_set1_epi32(w)), &bv, &best);
        pick(_mm512_permutex2var_ps(b0, odd, b1), _mm512_add_epi32(at, _mm512_set1_epi32(w + 1)), &bv, &best);
        __mmask16 keep = (__mmask16)(n >= 16 ? 0xffff : (1u << n) - 1);
        _mm512_mask_storeu_ps(out + ox, keep, bv);
        _mm512_mask_storeu_epi32(arg + ox, keep, best);
    }
}

int ddl__maxpool2_avx512(size_t planes, int h, int w, const float *x, float *y, int32_t *argmax)
{
    if (!__builtin_cpu_supports("avx512f"))
        return 0;
    int oh = h / 2, ow = w / 2;
    size_t hw = (size_t)h * w, ohw = (size_t)oh * ow;
    for (size_t plane = 0; plane < planes; plane++)
        for (int oy = 0; oy < oh; oy++)
            row_pair(x + plane * hw + (size_t)(2 * oy) * w, w, ow, 2 * oy * w, y + plane * ohw + (size_t)oy * ow,
                     argmax + plane * ohw + (size_t)oy * ow);
    return 1;
}

#else

int ddl__maxpool2_avx512(size_t planes, int h, int w, const float *x, float *y, int32_t *argmax)
{
    (void)planes, (void)h, (void)w, (void)x, (void)y, (void)argmax;
    return 0;
}

#endif
