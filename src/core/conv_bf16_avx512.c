/* conv_bf16_avx512.c - the direct bfloat16 convolution's kernels on a CPU with AVX512-BF16:
 * vdpbf16ps adds, in each of 16 float lanes, the products of one pair of bfloat16 (the high
 * half's first, then the low half's, each with one rounding and a subnormal sum flushed to
 * zero: gemm_bf16.c's reference, tested there and in tests/test_conv_bf16_direct.c).
 *
 * Forward (and input gradient): conv_wide.c's tile with pairs of input channels in place of
 * channels: lanes are 16 wide positions, a word holds the two channels of a pixel, so each tap of
 * each channel pair is one unaligned load, feeding ocb vdpbf16ps with broadcast weight pairs; an
 * ocb x 48 tile of sums stays in registers over every pair and tap.
 * Weight gradient: the sum runs over positions, so a word holds two neighbouring positions: dy's
 * rows and each input plane are plain bfloat16 arrays, and a tap at offset off reads 16 words
 * from element j + off (odd offsets too: a load at a 2-byte boundary). A tile keeps 3 output
 * channels x 9 taps of 16 lane sums (27 registers) over a block of positions of a pass's
 * samples; the driver adds lanes last. */
#include "impl.h"
#include "conv_bf16_kernels.h"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(DDL_NO_CLONES)

#include <immintrin.h>
#include <string.h>

#include "avx512_some.h"
#include "bf16_pack_avx512.h"

#define BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))


/* pairs: 16 floats lo and 16 hi rounded to bfloat16 and interleaved: word i = lo[i] | hi[i] << 16. */
BF16 static inline __m512i pairs(__m512 lo, __m512 hi)
{
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

BF16 void ddl__cb_pairs_avx512(const ddl__cb_geo *q, const float *x, uint32_t *xp)
{
    size_t hw = (size_t)q->h * q->w, top = (size_t)q->pad * q->wp + (size_t)q->pad;
    size_t rows_end = (size_t)(q->pad + q->h) * q->wp;
    for (int c = 0; c < q->cp; c++) {
        uint32_t *dst = xp + (size_t)c * q->plane;
        const float *lo = x + (size_t)(2 * c) * hw, *hi = 2 * c + 1 < q->c_in ? lo + hw : NULL;
        memset(dst, 0, top * sizeof *dst);
        for (int y = 0; y < q->h; y++) {
            uint32_t *row = dst + (size_t)(q->pad + y) * q->wp + q->pad; /* then w words, then the next row's pad */
            for (int x0 = 0; x0 < q->w; x0 += 16) {
                __mmask16 m = ddl__mask16(q->w - x0);
                __m512 a = ddl__load_some(m, lo + (size_t)y * q->w + x0);
                __m512 b = hi ? ddl__load_some(m, hi + (size_t)y * q->w + x0) : _mm512_setzero_ps();
                ddl__store_some_epi32(m, row + x0, pairs(a, b));
            }
            /* the zeros after the row: the next row's left border (or the first row below) */
            for (int i = 0; i < q->pad; i++)
                row[q->w + i] = 0;
        }
        memset(dst + rows_end + q->pad, 0, (q->plane - rows_end - (size_t)q->pad) * sizeof *dst);
    }
}

BF16 void ddl__cb_plane_avx512(const float *src, int rows, int cols, size_t top, size_t stride, size_t n,
                               uint16_t *dst)
{
    memset(dst, 0, n * sizeof *dst);
    for (int r = 0; r < rows; r++) {
        uint16_t *row = dst + top + (size_t)r * stride;
        const float *in = src + (size_t)r * cols;
        for (int c = 0; c < cols; c += 16) {
            __mmask16 m = ddl__mask16(cols - c);
            __m256bh v = _mm512_cvtneps_pbh(ddl__load_some(m, in + c));
            ddl__store_some_epi16(m, row + c, (__m256i)v);
        }
    }
}

BF16 void ddl__cb_add_fence_avx512(void) { _mm_sfence(); }

BF16 void ddl__cb_transpose_avx512(const uint32_t *src, size_t rows, size_t cols, uint32_t *dst)
{
    for (size_t r0 = 0; r0 < rows; r0 += 16)
        for (size_t c0 = 0; c0 < cols; c0 += 16) {
            __m512i v[16];
            for (int r = 0; r < 16; r++)
                v[r] = _mm512_loadu_si512(src + (r0 + (size_t)r) * cols + c0);
            ddl__transpose16(v);
            for (int c = 0; c < 16; c++)
                _mm512_storeu_si512(dst + (c0 + (size_t)c) * rows + r0, v[c]);
        }
}

/* Rows of whole cache lines (the 64x64, 32x32 and 16x16 planes' rows) go by streaming stores:
 * a layer's outputs for the batch do not stay in the caches, and a plain store first reads each
 * line it writes (the cnn preset in bfloat16 +3%, with AMX's free tiles +12%, where this copy was
 * 17% of the step). */
BF16 void ddl__cb_add_avx512(const float *src, size_t n, float b, int relu, float *dst)
{
    __m512 bv = _mm512_set1_ps(b), zero = _mm512_setzero_ps();
    /* max(v, +0) gives +0 where v is NaN or -0 (maxps's second operand): ddl_relu_forward's bits */
    if (!((uintptr_t)dst & 63) && !(n & 15)) {
        for (size_t i = 0; i < n; i += 16) {
            __m512 v = _mm512_add_ps(_mm512_loadu_ps(src + i), bv);
            _mm512_stream_ps(dst + i, relu ? _mm512_max_ps(v, zero) : v);
        }
        return;
    }
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = ddl__mask16((int)(n - i < 16 ? n - i : 16));
        __m512 v = _mm512_add_ps(ddl__load_some(m, src + i), bv);
        ddl__store_some(m, dst + i, relu ? _mm512_max_ps(v, zero) : v);
    }
}

/* FWD_TILE: ddl__cb_fwd_avx512 for OCB output channels a tile (3 OCB sums in registers). */
#define FWD_TILE(NAME, OCB)                                                                               \
    BF16 static void NAME(const ddl__cb_geo *q, const size_t *off, size_t j0, size_t j1, const uint32_t *xp, \
                          const uint32_t *wk, float *acc, size_t ld)                                      \
    {                                                                                                     \
        size_t plane = q->plane;                                                                          \
        int cp = q->cp, taps = q->taps;                                                                   \
        for (size_t j = j0; j < j1; j += DDL__CB_J) {                                                     \
            __m512 a0[OCB], a1[OCB], a2[OCB];                                                             \
            for (int o = 0; o < OCB; o++)                                                                 \
                a0[o] = a1[o] = a2[o] = _mm512_setzero_ps();                                              \
            for (int c = 0; c < cp; c++) {                                                                \
                const uint32_t *xi = xp + (size_t)c * plane + j, *wi = wk + (size_t)c * taps * OCB;      \
                for (int t = 0; t < taps; t++) {                                                          \
                    const uint32_t *xt = xi + off[t];                                                     \
                    __m512bh x0 = (__m512bh)_mm512_loadu_si512(xt);                                       \
                    __m512bh x1 = (__m512bh)_mm512_loadu_si512(xt + 16);                                  \
                    __m512bh x2 = (__m512bh)_mm512_loadu_si512(xt + 32);                                  \
                    for (int o = 0; o < OCB; o++) {                                                       \
                        __m512bh wv = (__m512bh)_mm512_set1_epi32((int)wi[t * OCB + o]);                  \
                        a0[o] = _mm512_dpbf16_ps(a0[o], x0, wv);                                          \
                        a1[o] = _mm512_dpbf16_ps(a1[o], x1, wv);                                          \
                        a2[o] = _mm512_dpbf16_ps(a2[o], x2, wv);                                          \
                    }                                                                                     \
                }                                                                                         \
            }                                                                                             \
            for (int o = 0; o < OCB; o++) {                                                               \
                _mm512_storeu_ps(acc + o * ld + (j - j0), a0[o]);                                         \
                _mm512_storeu_ps(acc + o * ld + (j - j0) + 16, a1[o]);                                    \
                _mm512_storeu_ps(acc + o * ld + (j - j0) + 32, a2[o]);                                    \
            }                                                                                             \
        }                                                                                                 \
    }

FWD_TILE(fwd8, 8)
FWD_TILE(fwd4, 4)

void ddl__cb_fwd_avx512(const ddl__cb_geo *q, const size_t *off, size_t j0, size_t j1, const uint32_t *xp,
                        const uint32_t *wk, float *acc, size_t ld)
{
    if (q->ocb == 4)
        fwd4(q, off, j0, j1, xp, wk, acc, ld);
    else
        fwd8(q, off, j0, j1, xp, wk, acc, ld);
}

BF16 void ddl__cb_dw_avx512(const ddl__cb_geo *q, const size_t *off, size_t j0, size_t j1, int ns,
                            const uint16_t *xb, size_t xs, const uint16_t *const *dy, size_t ds, float *const *m)
{
    int taps = q->taps;
    for (int t0 = 0; t0 < taps; t0 += DDL__CB_TG) {
        int n = taps - t0 < DDL__CB_TG ? taps - t0 : DDL__CB_TG;
        size_t o9[DDL__CB_TG]; /* a pass's offsets; past the last tap, its first again (not stored) */
        for (int t = 0; t < DDL__CB_TG; t++)
            o9[t] = off[t0 + (t < n ? t : 0)];
        for (int ic = 0; ic < q->c_in; ic++) {
            __m512 a[DDL__CB_OCG][DDL__CB_TG];
            for (int o = 0; o < DDL__CB_OCG; o++)
                for (int t = 0; t < DDL__CB_TG; t++)
                    a[o][t] = _mm512_setzero_ps();
            for (int s = 0; s < ns; s++) {
                const uint16_t *xi = xb + (size_t)s * xs + (size_t)ic * q->dplane;
                const uint16_t *d0 = dy[0] + (size_t)s * ds, *d1 = dy[1] + (size_t)s * ds, *d2 = dy[2] + (size_t)s * ds;
                for (size_t j = j0; j < j1; j += DDL__CB_DJ) {
                    __m512bh v0 = (__m512bh)_mm512_loadu_si512(d0 + j), v1 = (__m512bh)_mm512_loadu_si512(d1 + j);
                    __m512bh v2 = (__m512bh)_mm512_loadu_si512(d2 + j);
                    for (int t = 0; t < DDL__CB_TG; t++) {
                        __m512bh xv = (__m512bh)_mm512_loadu_si512(xi + j + o9[t]);
                        a[0][t] = _mm512_dpbf16_ps(a[0][t], v0, xv);
                        a[1][t] = _mm512_dpbf16_ps(a[1][t], v1, xv);
                        a[2][t] = _mm512_dpbf16_ps(a[2][t], v2, xv);
                    }
                }
            }
            for (int o = 0; o < DDL__CB_OCG; o++)
                for (int t = 0; t < n; t++) {
                    float *sum = m[o] + ((size_t)ic * taps + t0 + t) * 16;
                    _mm512_storeu_ps(sum, _mm512_add_ps(_mm512_loadu_ps(sum), a[o][t]));
                }
        }
    }
}

int ddl__cb_avx512_have(void) { return ddl__gemm_bf16_avx512_have(); }

#else

int ddl__cb_avx512_have(void) { return 0; }
void ddl__cb_transpose_avx512(const uint32_t *src, size_t rows, size_t cols, uint32_t *dst)
{
    (void)src, (void)rows, (void)cols, (void)dst;
}
void ddl__cb_fwd_avx512(const ddl__cb_geo *q, const size_t *off, size_t j0, size_t j1, const uint32_t *xp,
                        const uint32_t *wk, float *acc, size_t ld)
{
    (void)q, (void)off, (void)j0, (void)j1, (void)xp, (void)wk, (void)acc, (void)ld;
}
void ddl__cb_pairs_avx512(const ddl__cb_geo *q, const float *x, uint32_t *xp) { (void)q, (void)x, (void)xp; }
void ddl__cb_add_avx512(const float *src, size_t n, float b, int relu, float *dst)
{
    (void)src, (void)n, (void)b, (void)relu, (void)dst;
}
void ddl__cb_add_fence_avx512(void) {}
void ddl__cb_plane_avx512(const float *src, int rows, int cols, size_t top, size_t stride, size_t n,
                          uint16_t *dst)
{
    (void)src, (void)rows, (void)cols, (void)top, (void)stride, (void)n, (void)dst;
}
void ddl__cb_dw_avx512(const ddl__cb_geo *q, const size_t *off, size_t j0, size_t j1, int ns,
                       const uint16_t *xb, size_t xs, const uint16_t *const *dy, size_t ds, float *const *m)
{
    (void)q, (void)off, (void)j0, (void)j1, (void)ns, (void)xb, (void)xs, (void)dy, (void)ds, (void)m;
}

#endif
