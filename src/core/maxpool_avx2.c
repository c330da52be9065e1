/* maxpool_avx2.c - the 2x2, stride-2 max-pool (LeNet's, U-Net's, the cnn preset's), forward and
 * backward, where the AVX2 tiles run (ddl__avx2_tiles: AVX2 and FMA, no AVX-512), as
 * maxpool_avx512.c does there, with the scalar loops' outputs, argmax and dx bit for bit. Forward:
 * 8 windows of a row pair at a time, 16 floats of each row split into even and odd columns by a
 * shuffle and a permute, then the scalar loop's four picks as blends, in its order: the first
 * maximum wins, a NaN wins over numbers (and the first NaN over later ones). Backward: each
 * window's four gradients written at once (0 + dy where the argmax points, else +0: what the
 * scalar scatter, zeros then +=, writes). A row's last windows (fewer than 8) as the last 8
 * again. Rows of fewer than 8 windows (LeNet's second pool) stay with the scalar loops. */
#include "maxpool2.h"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(DDL_NO_CLONES)

#include <immintrin.h>

/* pick: where v beats the running maximum bv (greater, or a NaN over a number), take v and its
 * index (ops.c's pick, 8 windows). */
DDL__AVX2 static inline void pick(__m256 v, __m256i at, __m256 *bv, __m256i *best)
{
    __m256 take = _mm256_or_ps(_mm256_cmp_ps(v, *bv, _CMP_GT_OQ),
                               _mm256_and_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q), _mm256_cmp_ps(*bv, *bv, _CMP_ORD_Q)));
    *bv = _mm256_blendv_ps(*bv, v, take);
    *best = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(*best), _mm256_castsi256_ps(at), take));
}

/* columns: the even (odd 0) or odd (odd 1) floats of the 16 at p, in order */
DDL__AVX2 static inline __m256 columns(const float *p, int odd)
{
    __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
    __m256 s = odd ? _mm256_shuffle_ps(a, b, 0xdd) : _mm256_shuffle_ps(a, b, 0x88); /* a0 a2 b0 b2 | a4 a6 b4 b6 */
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(s), 0xd8));
}

/* windows8: the 8 windows from ox of rows r0 and r1 (= r0 + w) of a plane, the first window's
 * index top + 2 ox. */
DDL__AVX2 static inline void windows8(const float *r0, int w, int ox, int top, float *out, int32_t *arg)
{
    const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    const float *r1 = r0 + w;
    __m256i at = _mm256_add_epi32(_mm256_set1_epi32(top + 2 * ox), even);
    __m256 bv = columns(r0 + 2 * ox, 0);
    __m256i best = at;
    pick(columns(r0 + 2 * ox, 1), _mm256_add_epi32(at, _mm256_set1_epi32(1)), &bv, &best);
    pick(columns(r1 + 2 * ox, 0), _mm256_add_epi32(at, _mm256_set1_epi32(w)), &bv, &best);
    pick(columns(r1 + 2 * ox, 1), _mm256_add_epi32(at, _mm256_set1_epi32(w + 1)), &bv, &best);
    _mm256_storeu_ps(out + ox, bv);
    _mm256_storeu_si256((__m256i *)(arg + ox), best);
}

/* row_pair: the ow (>= 8) windows of rows r0 and r1 of a plane, the first at index top: 8 at a
 * time, and a row's last few as the last 8 again (the windows they share get the same values;
 * one by one they had made LeNet's 14-window rows slower than the scalar loop). */
DDL__AVX2 static void row_pair(const float *r0, int w, int ow, int top, float *out, int32_t *arg)
{
    int ox = 0;
    for (; ox + 8 <= ow; ox += 8)
        windows8(r0, w, ox, top, out, arg);
    if (ox < ow)
        windows8(r0, w, ow - 8, top, out, arg);
}

int ddl__maxpool2_avx2(size_t planes, int h, int w, const float *x, float *y, int32_t *argmax)
{
    if (w / 2 < 8 || !ddl__avx2_tiles())
        return 0;
    ddl__pool2_planes(planes, h, w, x, y, argmax, row_pair);
    return 1;
}

/* unpool8: the backward of windows8: rows r0 and r1 (= r0 + w) of dx at the 8 windows from ox,
 * from their dy and argmax, each float written once. keep: +0 where the window's output is not
 * > 0. */
DDL__AVX2 static inline void unpool8(const float *dy, const int32_t *arg, const float *keep, int w, int ox, int top,
                                     float *r0)
{
    const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    const __m256 zero = _mm256_setzero_ps();
    __m256 g = _mm256_add_ps(zero, _mm256_loadu_ps(dy + ox));
    if (keep)
        g = _mm256_and_ps(g, _mm256_cmp_ps(_mm256_loadu_ps(keep + ox), zero, _CMP_GT_OQ));
    __m256i a = _mm256_loadu_si256((const __m256i *)(arg + ox));
    __m256i at = _mm256_add_epi32(_mm256_set1_epi32(top + 2 * ox), even);
    __m256 v[4];
    const int step[4] = {0, 1, w, w + 1};
    for (int t = 0; t < 4; t++) {
        __m256i here = _mm256_cmpeq_epi32(a, _mm256_add_epi32(at, _mm256_set1_epi32(step[t])));
        v[t] = _mm256_and_ps(g, _mm256_castsi256_ps(here));
    }
    for (int r = 0; r < 2; r++) { /* window i's two floats of row r: v[2r] lane i, v[2r + 1] lane i */
        __m256 lo = _mm256_unpacklo_ps(v[2 * r], v[2 * r + 1]), hi = _mm256_unpackhi_ps(v[2 * r], v[2 * r + 1]);
        float *row = r0 + (size_t)r * w + 2 * ox;
        _mm256_storeu_ps(row, _mm256_permute2f128_ps(lo, hi, 0x20));
        _mm256_storeu_ps(row + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
    }
}

/* unpool_pair: the backward of row_pair, its windows as it takes them */
DDL__AVX2 static void unpool_pair(const float *dy, const int32_t *arg, const float *keep, int w, int ow, int top,
                                  float *r0)
{
    int ox = 0;
    for (; ox + 8 <= ow; ox += 8)
        unpool8(dy, arg, keep, w, ox, top, r0);
    if (ox < ow)
        unpool8(dy, arg, keep, w, ow - 8, top, r0);
}

int ddl__unpool2_avx2(size_t planes, int h, int w, const float *dy, const int32_t *argmax, const float *keep,
                      float *dx)
{
    if (w / 2 < 8 || !ddl__avx2_tiles())
        return 0;
    ddl__unpool2_planes(planes, h, w, dy, argmax, keep, dx, unpool_pair);
    return 1;
}

#else

int ddl__maxpool2_avx2(size_t planes, int h, int w, const float *x, float *y, int32_t *argmax)
{
    (void)planes, (void)h, (void)w, (void)x, (void)y, (void)argmax;
    return 0;
}

int ddl__unpool2_avx2(size_t planes, int h, int w, const float *dy, const int32_t *argmax, const float *keep,
                      float *dx)
{
    (void)planes, (void)h, (void)w, (void)dy, (void)argmax, (void)keep, (void)dx;
    return 0;
}

#endif
