/* batchnorm_fma.c - BatchNorm's per-row sums (batchnorm.c's row_moments and row_grads) on a CPU
 * of x86-64-v3 or later (AVX2 and FMA), four rows at a time, bit for bit what batchnorm.c's loops
 * give on such a CPU.
 *
 * A row's sums are 8 lanes, lane k adding elements k, k + 8, k + 16, ... in turn; an __m256 is
 * those 8 lanes, one add (and one FMA for the squares) a step. That order is a chain of one add a
 * step per row, so four rows (four samples of the channel) go side by side, and their sums join
 * the channel's doubles in sample order after. gcc's own vectorisation of the loops read each
 * lane's floats 128 at a time through permutes: on ResNet-18's 64-channel 32x32 BatchNorm (batch
 * 64), a third of the forward pass's time sat on one permute.
 *
 * The lanes' sum is batchnorm.c's lanes8 order, ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 +
 * a7)); a row's floats past its last 8 follow one at a time; d^2 and dy (x - m) are added by FMA,
 * as gcc contracts `b += d * d` on these CPUs (the clones batchnorm.c's DDL__HOT runs there). */
#include "impl.h"

/* Only where batchnorm.c's loops have their x86-64-v3 clone (DDL__CLONES: gcc; clang 14 has no
 * "x86-64-v3" for __builtin_cpu_supports, and its build runs the portable loops alone). */
#ifdef DDL__CLONES

#include <immintrin.h>
#include <math.h>

int ddl__bn_fma_ok(void) { return __builtin_cpu_supports("x86-64-v3"); }

/* lanes8: batchnorm.c's lanes8 of the 8 lanes of a */
DDL__AVX2 static inline float lanes8(__m256 a)
{
    __m128 e = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1)); /* e_k = a_k + a_{k+4} */
    __m128 f = _mm_add_ps(e, _mm_movehl_ps(e, e));                                  /* e0 + e2, e1 + e3 */
    return _mm_cvtss_f32(_mm_add_ss(f, _mm_movehdup_ps(f)));
}

/* step: 8 floats of a row into its lanes' sums a and b: u = p - k, v = u (moments), or u = p = dy,
 * v = x - k (gradient sums); a += u, b += u v by FMA */
DDL__AVX2 static inline void step(const float *p, const float *x, __m256 k, int grads, __m256 *a, __m256 *b)
{
    __m256 u = _mm256_loadu_ps(p), v;
    if (grads)
        v = _mm256_sub_ps(_mm256_loadu_ps(x), k);
    else
        v = u = _mm256_sub_ps(u, k);
    *a = _mm256_add_ps(*a, u);
    *b = _mm256_fmadd_ps(u, v, *b);
}

/* finish: a row's two sums: its lanes', then its floats from `body` to s one at a time */
DDL__AVX2 static inline void finish(const float *p, const float *x, int body, int s, float k, int grads, __m256 a, __m256 b,
                             float *ta, float *tb)
{
    float sa = lanes8(a), sb = lanes8(b);
    for (int i = body; i < s; i++) {
        float u = grads ? p[i] : p[i] - k, v = grads ? x[i] - k : u;
        sa += u;
        sb = fmaf(u, v, sb);
    }
    *ta = sa, *tb = sb;
}

#define ROWS 4

DDL__AVX2 static inline __attribute__((always_inline)) void sums(int n, int s, size_t plane, const float *x0,
                                                           const float *dy0, float k, int grads, double *s1,
                                                           double *s2)
{
    int body = s / 8 * 8;
    __m256 kv = _mm256_set1_ps(k);
    const float *p0 = grads ? dy0 : x0;
    double t1 = 0.0, t2 = 0.0;
    for (int n0 = 0; n0 < n; n0 += ROWS) {
        int rows = n - n0 < ROWS ? n - n0 : ROWS;
        size_t off[ROWS];
        __m256 a[ROWS], b[ROWS];
        for (int r = 0; r < ROWS; r++) {
            off[r] = (size_t)(n0 + (r < rows ? r : 0)) * plane; /* a missing row repeats the first */
            a[r] = b[r] = _mm256_setzero_ps();
        }
        for (int i = 0; i < body; i += 8)
            for (int r = 0; r < ROWS; r++)
                step(p0 + off[r] + i, x0 + off[r] + i, kv, grads, &a[r], &b[r]);
        for (int r = 0; r < rows; r++) {
            float ta, tb;
            finish(p0 + off[r], x0 + off[r], body, s, k, grads, a[r], b[r], &ta, &tb);
            t1 += ta;
            t2 += tb;
        }
    }
    *s1 = t1;
    *s2 = t2;
}

DDL__AVX2 void ddl__bn_sums_fma(int n, int s, size_t plane, const float *x0, const float *dy0, float k, double *s1, double *s2)
{
    if (dy0)
        sums(n, s, plane, x0, dy0, k, 1, s1, s2);
    else
        sums(n, s, plane, x0, NULL, k, 0, s1, s2);
}

/* ---- short rows: channels in blocks ----
 * On rows of a few floats (ResNet-18's 4x4 and 2x2 planes: 16 and 4), a channel's rows lie a
 * sample's plane apart (8 KB on 512 channels at 2x2): walking one channel's rows took each from
 * L2 for 16 bytes of its 64-byte line, every row of the channel in the same L1 set. A block of
 * nch neighbouring channels goes sample by sample instead, each row the same sums as above. */

/* row_sums: one row's sums (step and finish) */
DDL__AVX2 static inline void row_sums(const float *p, const float *x, int s, float k, int grads, float *ta, float *tb)
{
    int body = s / 8 * 8;
    __m256 kv = _mm256_set1_ps(k), a = _mm256_setzero_ps(), b = _mm256_setzero_ps();
    for (int i = 0; i < body; i += 8)
        step(p + i, x + i, kv, grads, &a, &b);
    finish(p, x, body, s, k, grads, a, b, ta, tb);
}

DDL__AVX2 static inline __attribute__((always_inline)) void block_sums(int n, int s, size_t plane, const float *x0,
                                                                 const float *dy0, int nch, const float *k, double *s1,
                                                                 double *s2)
{
    for (int c = 0; c < nch; c++)
        s1[c] = s2[c] = 0.0;
    for (int ni = 0; ni < n; ni++)
        for (int c = 0; c < nch; c++) {
            size_t off = (size_t)ni * plane + (size_t)c * s;
            float ta, tb;
            if (dy0)
                row_sums(dy0 + off, x0 + off, s, k[c], 1, &ta, &tb);
            else
                row_sums(x0 + off, x0 + off, s, k[c], 0, &ta, &tb); /* x unread */
            s1[c] += ta;
            s2[c] += tb;
        }
}

DDL__AVX2 void ddl__bn_block_sums_fma(int n, int s, size_t plane, const float *x0, const float *dy0, int nch, const float *k,
                               double *s1, double *s2)
{
    if (s == 4) /* ResNet-18's 2x2 and 4x4 planes: the rows' loops unrolled */
        block_sums(n, 4, plane, x0, dy0, nch, k, s1, s2);
    else if (s == 16)
        block_sums(n, 16, plane, x0, dy0, nch, k, s1, s2);
    else
        block_sums(n, s, plane, x0, dy0, nch, k, s1, s2);
}

/* spread: v[c] repeated s times for each of nch channels, into out */
static void spread(const float *v, int nch, int s, float *out)
{
    for (int c = 0; c < nch; c++)
        for (int i = 0; i < s; i++)
            out[c * s + i] = v[c];
}

DDL__AVX2 void ddl__bn_block_affine_fma(int n, int s, size_t plane, const float *x0, int nch, const float *m, const float *a,
                                 const float *b, float *y0)
{
    float ms[DDL__BN_SPAN], as[DDL__BN_SPAN], bs[DDL__BN_SPAN];
    int w = nch * s;
    if (w > DDL__BN_SPAN) /* not a short row: the caller's */
        return;
    spread(m, nch, s, ms), spread(a, nch, s, as), spread(b, nch, s, bs);
    for (int ni = 0; ni < n; ni++) {
        const float *x = x0 + (size_t)ni * plane;
        float *y = y0 + (size_t)ni * plane;
        for (int i = 0; i < w; i++)
            y[i] = fmaf(x[i] - ms[i], as[i], bs[i]);
    }
}

DDL__AVX2 void ddl__bn_block_dx_fma(int n, int s, size_t plane, const float *x0, const float *dy0, int nch, const float *m,
                             const float *gr, const float *md, const float *mdx, float *dx0)
{
    float ms[DDL__BN_SPAN], grs[DDL__BN_SPAN], mds[DDL__BN_SPAN], mdxs[DDL__BN_SPAN];
    int w = nch * s;
    if (w > DDL__BN_SPAN)
        return;
    spread(m, nch, s, ms), spread(gr, nch, s, grs), spread(md, nch, s, mds), spread(mdx, nch, s, mdxs);
    for (int ni = 0; ni < n; ni++) {
        const float *x = x0 + (size_t)ni * plane, *dy = dy0 + (size_t)ni * plane;
        float *dx = dx0 + (size_t)ni * plane;
        for (int i = 0; i < w; i++)
            dx[i] = grs[i] * fmaf(-(x[i] - ms[i]), mdxs[i], dy[i] - mds[i]);
    }
}

#else

int ddl__bn_fma_ok(void) { return 0; }
void ddl__bn_block_sums_fma(int n, int s, size_t plane, const float *x0, const float *dy0, int nch, const float *k,
                            double *s1, double *s2)
{
    (void)n, (void)s, (void)plane, (void)x0, (void)dy0, (void)nch, (void)k, (void)s1, (void)s2;
}
void ddl__bn_block_affine_fma(int n, int s, size_t plane, const float *x0, int nch, const float *m, const float *a,
                              const float *b, float *y0)
{
    (void)n, (void)s, (void)plane, (void)x0, (void)nch, (void)m, (void)a, (void)b, (void)y0;
}
void ddl__bn_block_dx_fma(int n, int s, size_t plane, const float *x0, const float *dy0, int nch, const float *m,
                          const float *gr, const float *md, const float *mdx, float *dx0)
{
    (void)n, (void)s, (void)plane, (void)x0, (void)dy0, (void)nch, (void)m, (void)gr, (void)md, (void)mdx, (void)dx0;
}
void ddl__bn_sums_fma(int n, int s, size_t plane, const float *x0, const float *dy0, float k, double *s1, double *s2)
{
    (void)n, (void)s, (void)plane, (void)x0, (void)dy0, (void)k, (void)s1, (void)s2;
}

#endif
