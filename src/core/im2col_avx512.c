/* im2col_avx512.c - conv.c's im2col and col2im on a CPU with AVX-512, chosen at run time.
 *
 * Stride-2 rows (ResNet-18's 7x7 stem): a row of the column matrix takes every other pixel of an
 * image row; 16 of them are two loads and one permute, where the scalar loop took each alone (40%
 * of the stem's bfloat16 forward pass).
 *
 * Tiny planes: im2col and col2im for planes that fit a vector: at most 16 pixels in and at
 * least as many positions out, at most 16 (ResNet-18's 4x4 and 2x2 planes at 64x64 input, stride
 * 1; its 4x4 -> 2x2 stride-2 layers wrote 4 lanes a store this way and were slower: they keep the
 * scalar loops), chosen at run time (conv.c asks first, else runs its scalar loops over the same
 * map). S = 16 / max(pixels, positions) samples share a vector: their planes
 * side by side in the lanes. A tap is one permute of that vector (its column entries, the padding's
 * zeros masked in) and one store of S samples' positions, which lie side by side in the column
 * matrix's row; col2im permutes a row's entries back onto their pixels and adds them, tap by tap,
 * to sums from +0. A pixel gets its taps' entries in the scalar loop's order (at most one entry of a
 * tap lands on a pixel), so the bits are conv.c's. ResNet-18 bf16, 512 -> 512 at 2x2: the scalar
 * col2im took a quarter of the input gradient's time (tools/bench/resnet_layers.c). */
#include "impl.h"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(DDL_NO_CLONES)

#include <immintrin.h>
#include <string.h>

#include "avx512_some.h"

#define AVX512 __attribute__((target("avx512f")))

#define MAX_TAPS 64

int ddl__im2col_tiny_ok(int hw, int p, int taps)
{
    return hw <= p && p <= 16 && taps <= MAX_TAPS && __builtin_cpu_supports("avx512f");
}

/* per: the samples a vector holds. */
static int per(int hw, int p) { return 16 / (hw > p ? hw : p); }

int ddl__im2col_s2_ok(void) { return __builtin_cpu_supports("avx512f"); }

AVX512 void ddl__im2col_s2_row(const float *src, int n, float *dst)
{
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    for (int i = 0; i < n; i += 16) {
        int left = 2 * (n - i) - 1; /* the floats of src from 2 i that are read: 2 (n - i) - 1 */
        __m512 a = _mm512_maskz_loadu_ps(ddl__mask16(left), src + 2 * i);
        __m512 b = _mm512_maskz_loadu_ps(ddl__mask16(left - 16), src + 2 * i + 16);
        _mm512_mask_storeu_ps(dst + i, ddl__mask16(n - i), _mm512_permutex2var_ps(a, even, b));
    }
}

/* tap_perms: for each tap, the permute and its lanes. Forward (im2col): output lane s p + pos reads
 * input lane s hw + its pixel, the padding's lanes unset (zeros); back (col2im): pixel lane
 * s hw + pix takes entry lane s p + pos, the pixels no entry of the tap lands on unset. */
static void tap_perms(const int32_t *src, int taps, int hw, int p, int back, int32_t (*at)[16], __mmask16 *lanes)
{
    int S = per(hw, p);
    for (int t = 0; t < taps; t++) {
        unsigned m = 0;
        memset(at[t], 0, sizeof at[t]);
        for (int s = 0; s < S; s++)
            for (int pos = 0; pos < p; pos++) {
                int32_t pix = src[t * p + pos];
                if (pix >= hw)
                    continue;
                int to = back ? s * hw + pix : s * p + pos, from = back ? s * p + pos : s * hw + pix;
                at[t][to] = from;
                m |= 1u << to;
            }
        lanes[t] = (__mmask16)m;
    }
}

/* planes: lane s hw + j of the result: pixel j of sample s's plane (samples cs hw floats apart
 * from x), for the `have` samples present; the rest zero. */
AVX512 static __m512 planes(const float *x, size_t stride, int hw, int have)
{
    if (have == 1)
        return _mm512_maskz_loadu_ps(ddl__mask16(hw), x);
    float lanes[16] = {0};
    for (int s = 0; s < have; s++)
        for (int j = 0; j < hw; j++)
            lanes[s * hw + j] = x[(size_t)s * stride + j];
    return _mm512_loadu_ps(lanes);
}

AVX512 void ddl__im2col_tiny_avx512(const int32_t *src, int taps, int hw, int p, int c, int cs, int nb, const float *x,
                             float *col, size_t ld)
{
    int S = per(hw, p);
    int32_t at[MAX_TAPS][16];
    __mmask16 valid[MAX_TAPS];
    tap_perms(src, taps, hw, p, 0, at, valid);
    size_t plane = (size_t)cs * hw;
    for (int ci = 0; ci < c; ci++)
        for (int n0 = 0; n0 < nb; n0 += S) {
            int have = nb - n0 < S ? nb - n0 : S;
            __m512 v = planes(x + (size_t)n0 * plane + (size_t)ci * hw, plane, hw, have);
            __mmask16 out = ddl__mask16(have * p);
            float *c0 = col + (size_t)ci * taps * ld + (size_t)n0 * p;
            for (int t = 0; t < taps; t++)
                _mm512_mask_storeu_ps(c0 + (size_t)t * ld, out, _mm512_maskz_permutexvar_ps(valid[t], _mm512_loadu_si512(at[t]), v));
        }
}

AVX512 void ddl__col2im_tiny_avx512(const int32_t *src, int taps, int hw, int p, int c, int cs, int nb, const float *col,
                             size_t ld, float *x)
{
    int S = per(hw, p);
    int32_t at[MAX_TAPS][16];
    __mmask16 hit[MAX_TAPS];
    tap_perms(src, taps, hw, p, 1, at, hit);
    size_t plane = (size_t)cs * hw;
    for (int ci = 0; ci < c; ci++)
        for (int n0 = 0; n0 < nb; n0 += S) {
            int have = nb - n0 < S ? nb - n0 : S;
            __mmask16 in = ddl__mask16(have * p);
            const float *c0 = col + (size_t)ci * taps * ld + (size_t)n0 * p;
            __m512 sum = _mm512_setzero_ps();
            for (int t = 0; t < taps; t++) {
                __m512 e = _mm512_maskz_loadu_ps(in, c0 + (size_t)t * ld);
                sum = _mm512_mask_add_ps(sum, hit[t], sum, _mm512_permutexvar_ps(_mm512_loadu_si512(at[t]), e));
            }
            float *x0 = x + (size_t)n0 * plane + (size_t)ci * hw;
            if (have == 1) {
                _mm512_mask_storeu_ps(x0, ddl__mask16(hw), sum);
                continue;
            }
            float lanes[16];
            _mm512_storeu_ps(lanes, sum);
            for (int s = 0; s < have; s++)
                for (int j = 0; j < hw; j++)
                    x0[(size_t)s * plane + j] = lanes[s * hw + j];
        }
}

#else

int ddl__im2col_s2_ok(void) { return 0; }
void ddl__im2col_s2_row(const float *src, int n, float *dst) { (void)src, (void)n, (void)dst; }
int ddl__im2col_tiny_ok(int hw, int p, int taps)
{
    (void)hw, (void)p, (void)taps;
    return 0;
}
void ddl__im2col_tiny_avx512(const int32_t *src, int taps, int hw, int p, int c, int cs, int nb, const float *x,
                             float *col, size_t ld)
{
    (void)src, (void)taps, (void)hw, (void)p, (void)c, (void)cs, (void)nb, (void)x, (void)col, (void)ld;
}
void ddl__col2im_tiny_avx512(const int32_t *src, int taps, int hw, int p, int c, int cs, int nb, const float *col,
                             size_t ld, float *x)
{
    (void)src, (void)taps, (void)hw, (void)p, (void)c, (void)cs, (void)nb, (void)col, (void)ld, (void)x;
}

#endif
