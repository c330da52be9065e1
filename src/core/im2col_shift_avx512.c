/* im2col_shift_avx512.c - conv.c's im2col and col2im for stride-1 convolutions whose output rows
 * are as wide as the image's (3x3 with padding 1: ResNet's and U-Net's), on AVX-512.
 *
 * There, position pos = oy w + ox of tap (ki, kj) reads pixel pos + shift, shift = (ki dh - pt) w
 * + kj dw - pl, for every position whose pixel lies in the image: a tap's row of the column matrix
 * is the plane itself, shifted, with the padding's entries zero. So 16 positions are one load at
 * the shift, the lanes that fall outside the image (a row above or below, or past a row's end
 * into the next) masked off, and one store. col2im is the same read the other way: 16 pixels take
 * their entry of each tap by one masked load at -shift, added tap by tap in (ki, kj) order to sums
 * from +0, the order conv.c's loops add in, so the bits are theirs (a lane a tap does not reach
 * keeps its sum, as the loops never touch it). The masks are made once a call, a 16-bit word for
 * each tap and 16 positions.
 *
 * conv.c's loops took these planes a float at a time through a map (8x8 and 16x16) or in short
 * row copies: in ResNet-18's bfloat16 step by im2col (the path the AMX tiles take) they were 18%
 * of the step (perf, build with -DDDL_NO_BF16_CONV). */
#include "impl.h"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(DDL_NO_CLONES)

#include <immintrin.h>
#include <stdint.h>

#include "avx512_some.h"

#define AVX512 __attribute__((target("avx512f")))

#define MAX_MASKS 4096 /* taps x vectors of a plane: 3x3 taps up to 64x64, 5x5 up to 32x32 */
#define MAX_TAPS 64

static int vectors(int n) { return (n + 15) / 16; }

int ddl__im2col_shift_ok(const ddl__shift_geo *g)
{
    int taps = g->kh * g->kw, v = vectors(g->h * g->w > g->oh * g->w ? g->h * g->w : g->oh * g->w);
    return taps >= 1 && taps <= MAX_TAPS && (long)taps * v <= MAX_MASKS && __builtin_cpu_supports("avx512f");
}

static int shift_of(const ddl__shift_geo *g, int ki, int kj) { return (ki * g->dh - g->pt) * g->w + kj * g->dw - g->pl; }

/* masks: for each tap t (ki, kj) and vector u of 16 lanes, the lanes that read: forward, lane
 * pos = 16 u + l is a position (pos < oh w) whose pixel lies in the image; back, lane pix is a
 * pixel (pix < h w) on which an entry of the tap lands, from a position inside the output. A
 * vector's rows and columns are carried from the one before (no division), and a tap's test is
 * two unsigned compares of them shifted: made a lane at a time, the masks took 81 of the 127 us
 * of a 64x64 plane's im2col of 16 channels, once for every sample. */
AVX512 static void masks(const ddl__shift_geo *g, int back, uint16_t *m)
{
    int n = back ? g->h * g->w : g->oh * g->w, nv = vectors(n), rows = back ? g->oh : g->h, taps = g->kh * g->kw;
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i w = _mm512_set1_epi32(g->w), one = _mm512_set1_epi32(1);
    const __m512i sixteen = _mm512_set1_epi32(16);
    /* lane l of vector u: position 16 u + l = y w + x; x starts 16 before vector 0 */
    __m512i y = _mm512_setzero_si512(), x = _mm512_sub_epi32(lane, sixteen);
    for (int u = 0; u < nv; u++) {
        x = _mm512_add_epi32(x, sixteen); /* 16 positions on, then x folded below w */
        for (int q = 0; q < 16 / g->w + 1; q++) {
            __mmask16 over = _mm512_cmpge_epi32_mask(x, w);
            x = _mm512_mask_sub_epi32(x, over, x, w), y = _mm512_mask_add_epi32(y, over, y, one);
        }
        __mmask16 in = ddl__mask16(n - 16 * u);
        for (int t = 0; t < taps; t++) {
            int dy = (t / g->kw) * g->dh - g->pt, dx = (t % g->kw) * g->dw - g->pl;
            if (back)
                dy = -dy, dx = -dx;
            __m512i ry = _mm512_add_epi32(y, _mm512_set1_epi32(dy)), rx = _mm512_add_epi32(x, _mm512_set1_epi32(dx));
            __mmask16 ok = _mm512_mask_cmplt_epu32_mask(in, ry, _mm512_set1_epi32(rows));
            m[t * nv + u] = (uint16_t)_mm512_mask_cmplt_epu32_mask(ok, rx, w);
        }
    }
}

/* at: p + i as an address, without forming an out-of-object pointer in C's sense (i may point
 * before the plane; its lanes there are masked off and never read). */
static inline const float *at(const float *p, ptrdiff_t i) { return (const float *)((uintptr_t)p + (uintptr_t)(i * 4)); }

AVX512 void ddl__im2col_shift_avx512(const ddl__shift_geo *g, int c, int cs, int nb, const float *x, float *col,
                                     size_t ld)
{
    uint16_t m[MAX_MASKS];
    masks(g, 0, m);
    int taps = g->kh * g->kw, hw = g->h * g->w, p = g->oh * g->w, nv = vectors(p);
    for (int ci = 0; ci < c; ci++)
        for (int n = 0; n < nb; n++) {
            const float *plane = x + ((size_t)n * cs + ci) * hw;
            float *c0 = col + (size_t)ci * taps * ld + (size_t)n * p;
            for (int t = 0; t < taps; t++) {
                const float *from = at(plane, shift_of(g, t / g->kw, t % g->kw));
                float *out = c0 + (size_t)t * ld;
                const uint16_t *mt = m + t * nv;
                for (int u = 0; u < nv; u++) {
                    __m512 v = _mm512_maskz_loadu_ps(mt[u], at(from, 16 * u));
                    _mm512_mask_storeu_ps(out + 16 * u, ddl__mask16(p - 16 * u), v);
                }
            }
        }
}

AVX512 void ddl__col2im_shift_avx512(const ddl__shift_geo *g, int c, int cs, int nb, const float *col, size_t ld,
                                     float *x)
{
    uint16_t m[MAX_MASKS];
    masks(g, 1, m);
    int taps = g->kh * g->kw, hw = g->h * g->w, p = g->oh * g->w, nv = vectors(hw);
    int32_t shift[MAX_TAPS];
    for (int t = 0; t < taps; t++)
        shift[t] = shift_of(g, t / g->kw, t % g->kw);
    for (int ci = 0; ci < c; ci++)
        for (int n = 0; n < nb; n++) {
            const float *c0 = col + (size_t)ci * taps * ld + (size_t)n * p;
            float *plane = x + ((size_t)n * cs + ci) * hw;
            for (int u = 0; u < nv; u++) {
                __m512 sum = _mm512_setzero_ps();
                for (int t = 0; t < taps; t++) {
                    __mmask16 k = m[t * nv + u];
                    __m512 e = _mm512_maskz_loadu_ps(k, at(c0 + (size_t)t * ld, 16 * u - shift[t]));
                    sum = _mm512_mask_add_ps(sum, k, sum, e);
                }
                _mm512_mask_storeu_ps(plane + 16 * u, ddl__mask16(hw - 16 * u), sum);
            }
        }
}

#else

int ddl__im2col_shift_ok(const ddl__shift_geo *g)
{
    (void)g;
    return 0;
}
void ddl__im2col_shift_avx512(const ddl__shift_geo *g, int c, int cs, int nb, const float *x, float *col, size_t ld)
{
    (void)g, (void)c, (void)cs, (void)nb, (void)x, (void)col, (void)ld;
}
void ddl__col2im_shift_avx512(const ddl__shift_geo *g, int c, int cs, int nb, const float *col, size_t ld, float *x)
{
    (void)g, (void)c, (void)cs, (void)nb, (void)col, (void)ld, (void)x;
}

#endif
