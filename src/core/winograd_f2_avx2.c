/* winograd_f2_avx2.c - F(2x2,3x3)'s transforms (winograd.c's input_v, output_y and grad_dy) in
 * 8-float vectors, for a CPU without AVX-512 (ddl__avx2_tiles). winograd.c's hold one tile row's
 * tiles in 16-float vectors: on an 8x8 plane (4 tiles a row) 12 of the 16 lanes were empty, and
 * gcc's AVX2 build of their two-vector permutes takes several instructions each: input_v was 54%
 * of U-Net's bottom 64 -> 64 by F(2x2,3x3), its three passes, on an AMD EPYC Zen 3.
 *
 * Here a vector holds 8 consecutive tiles of a block: two runs of 4, each in one tile row (the
 * rows are whole runs: tw, ow / 2, a multiple of 4), the second run possibly the next row's
 * first. A tile's 4 input columns are one 128-bit load, and a 4 x 4 transpose in each 128-bit
 * lane gives the columns in tile order (as winograd_f4.c's AVX2 gather). A block whose tile count
 * is 4 past a multiple of 8 takes its last run twice; the second copy's lanes are stored past the
 * block's tiles, where winograd.c's 16-float stores spill too (the next channel's stores, or the
 * WINO_SKEW floats after a point's matrix, take them), and never into an output plane.
 *
 * Each tile gets winograd.c's additions in its order, so the bits are its bits on any CPU path
 * (tests/test_avx2_tiles.c compares them). */
#include "winograd.h"

#ifdef DDL__CLONES

int ddl__wino2_avx2(const wino_geo *q) { return q->m == 2 && q->ow % 8 == 0 && q->oh % 2 == 0 && ddl__avx2_tiles(); }

/* second: the first tile of a vector's second run: 4 on, or the first run again at a block's
 * end */
static inline int second(int t, int at, int nt) { return at + 4 < nt ? t + 4 : t; }

/* input_row: padded row i (0..3) of tile t's 4x4 block, at the tile's first column (rows: slot y
 * & 7 holds image row y; a vector's two runs read 6 rows at most, so none evicts another) */
static inline const float *input_row(const wino_geo *q, const float *plane, int t, int i, float *rows, int rl,
                                     int *held, const float *zero)
{
    int ty = t / q->tw, tx = t % q->tw, y = 2 * ty - q->pad + i;
    return padded_row(plane, q->h, q->w, y, q->pad, rows + (size_t)(y & 7) * rl, &held[y & 7], zero) + 2 * tx;
}

/* input_v: v (16, c, nt) = B^T d B for tiles [t0, t0 + nt) of one sample x (c, h, w); rows:
 * WINO2_ROWS of rl floats (8 slots and a row of zeros). */
DDL__AVX2 void ddl__wino2_input_v_avx2(const wino_geo *q, const float *x, int t0, int nt, float *v, float *rows, int rl)
{
    size_t cnt = q->vs;
    const float *zero = rows + 8 * (size_t)rl;
    memset(rows, 0, (size_t)WINO2_ROWS * rl * sizeof *rows);
    for (int ci = 0; ci < q->c; ci++) {
        const float *plane = x + (size_t)ci * q->h * q->w;
        int held[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
        float *dst = v + (size_t)ci * q->nt;
        for (int at = 0; at < nt; at += 8) {
            int ta = t0 + at, tb = second(ta, at, nt);
            __m256 d[4][4];
            for (int i = 0; i < 4; i++) {
                const float *a = input_row(q, plane, ta, i, rows, rl, held, zero);
                const float *b = input_row(q, plane, tb, i, rows, rl, held, zero);
                __m256 r[4];
                for (int j = 0; j < 4; j++) /* tiles j and 4 + j, 2 columns apart */
                    r[j] = ddl__wino_pair(a + 2 * j, b + 2 * j);
                ddl__wino_transpose4(r, d[i]); /* d[i][k]: column k of row i, tile by lane */
            }
            __m256 f[4][4]; /* f = B^T d, column by column */
            for (int k = 0; k < 4; k++) {
                f[0][k] = d[0][k] - d[2][k], f[1][k] = d[1][k] + d[2][k];
                f[2][k] = d[2][k] - d[1][k], f[3][k] = d[1][k] - d[3][k];
            }
            for (int i = 0; i < 4; i++) { /* f B, row by row */
                float *p = dst + (size_t)(4 * i) * cnt + at;
                _mm256_storeu_ps(p, f[i][0] - f[i][2]);
                _mm256_storeu_ps(p + cnt, f[i][1] + f[i][2]);
                _mm256_storeu_ps(p + 2 * cnt, f[i][2] - f[i][1]);
                _mm256_storeu_ps(p + 3 * cnt, f[i][1] - f[i][3]);
            }
        }
    }
}

/* output_y: y (k, oh, ow) of one sample, tiles [t0, t0 + nt), = A^T m A (+ b) from m (16, k,
 * nt) (read up to 4 floats past its end, as winograd.c's 15). */
DDL__AVX2 void ddl__wino2_output_y_avx2(const wino_geo *q, const float *m, int t0, int nt, const float *b, float *y)
{
    size_t knt = q->ms;
    for (int ko = 0; ko < q->k; ko++) {
        float *plane = y + (size_t)ko * q->oh * q->ow, bias = b ? b[ko] : 0.0f;
        const float *s = m + (size_t)ko * q->nt;
        for (int at = 0; at < nt; at += 8) {
            __m256 p[16];
            for (int i = 0; i < 16; i++)
                p[i] = _mm256_loadu_ps(s + (size_t)i * knt + at);
            __m256 r00 = p[0] + p[4] + p[8], r01 = p[1] + p[5] + p[9], r02 = p[2] + p[6] + p[10];
            __m256 r03 = p[3] + p[7] + p[11], r10 = p[4] - p[8] - p[12], r11 = p[5] - p[9] - p[13];
            __m256 r12 = p[6] - p[10] - p[14], r13 = p[7] - p[11] - p[15];
            __m256 e0 = r00 + r01 + r02 + bias, o0 = r01 - r02 - r03 + bias;
            __m256 e1 = r10 + r11 + r12 + bias, o1 = r11 - r12 - r13 + bias;
            /* each output row's pairs (even, odd column) in tile order: tiles 0-1 | 4-5, 2-3 | 6-7 */
            __m256 lo0 = _mm256_unpacklo_ps(e0, o0), hi0 = _mm256_unpackhi_ps(e0, o0);
            __m256 lo1 = _mm256_unpacklo_ps(e1, o1), hi1 = _mm256_unpackhi_ps(e1, o1);
            int ta = t0 + at;
            float *ra = plane + (size_t)(2 * (ta / q->tw)) * q->ow + 2 * (ta % q->tw);
            _mm256_storeu_ps(ra, _mm256_permute2f128_ps(lo0, hi0, 0x20));
            _mm256_storeu_ps(ra + q->ow, _mm256_permute2f128_ps(lo1, hi1, 0x20));
            if (at + 4 < nt) {
                int tb = ta + 4;
                float *rb = plane + (size_t)(2 * (tb / q->tw)) * q->ow + 2 * (tb % q->tw);
                _mm256_storeu_ps(rb, _mm256_permute2f128_ps(lo0, hi0, 0x31));
                _mm256_storeu_ps(rb + q->ow, _mm256_permute2f128_ps(lo1, hi1, 0x31));
            }
        }
    }
}

/* grad_dy: e (16, k, nt) = A g A^T of each 2x2 block g of dy (k, oh, ow), tiles [t0, t0 + nt). */
DDL__AVX2 void ddl__wino2_grad_dy_avx2(const wino_geo *q, const float *dy, int t0, int nt, float *e)
{
    size_t knt = q->ms;
    for (int ko = 0; ko < q->k; ko++) {
        const float *plane = dy + (size_t)ko * q->oh * q->ow;
        float *d = e + (size_t)ko * q->nt;
        for (int at = 0; at < nt; at += 8) {
            int ta = t0 + at, tb = second(ta, at, nt);
            const float *a = plane + (size_t)(2 * (ta / q->tw)) * q->ow + 2 * (ta % q->tw);
            const float *b = plane + (size_t)(2 * (tb / q->tw)) * q->ow + 2 * (tb % q->tw);
            __m256 g[2][2]; /* g[row][column], tile by lane */
            for (int i = 0; i < 2; i++) {
                __m256 ra = _mm256_loadu_ps(a + (size_t)i * q->ow), rb = _mm256_loadu_ps(b + (size_t)i * q->ow);
                __m256 lo = _mm256_permute2f128_ps(ra, rb, 0x20), hi = _mm256_permute2f128_ps(ra, rb, 0x31);
                g[i][0] = _mm256_shuffle_ps(lo, hi, 0x88), g[i][1] = _mm256_shuffle_ps(lo, hi, 0xdd);
            }
            /* a = A g: rows g0, g0 + g1, g0 - g1, -g1; then a A^T the same along the row */
            __m256 r[4][2] = {{g[0][0], g[0][1]},
                              {g[0][0] + g[1][0], g[0][1] + g[1][1]},
                              {g[0][0] - g[1][0], g[0][1] - g[1][1]},
                              {-g[1][0], -g[1][1]}};
            for (int i = 0; i < 4; i++) {
                float *p = d + (size_t)(4 * i) * knt + at;
                _mm256_storeu_ps(p, r[i][0]);
                _mm256_storeu_ps(p + knt, r[i][0] + r[i][1]);
                _mm256_storeu_ps(p + 2 * knt, r[i][0] - r[i][1]);
                _mm256_storeu_ps(p + 3 * knt, -r[i][1]);
            }
        }
    }
}

#endif
