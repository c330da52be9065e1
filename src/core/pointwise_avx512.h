/* pointwise_avx512.h - the register tiles of the products whose depth is channels alone, shared
 * by the direct 1x1 convolution (conv1x1_avx512.c) and the 2x2 stride-2 transposed convolution
 * (deconv2x2_avx512.c). Each sum is ddl_gemm's AVX-512 kernels' (gemm_avx512.c): one fused
 * multiply-add a term, in order, from +0; so the kernels keep the bits of the column matrix and
 * product they replace. Include inside a file's x86-64 section. */
#ifndef DDL_CORE_POINTWISE_AVX512_H
#define DDL_CORE_POINTWISE_AVX512_H

#include <immintrin.h>
#include <stddef.h>

#define DDL__PW_R 4 /* rows of a tile */
#define DDL__PW_V 4 /* vectors of 16 positions of a tile (ddl__pw_sums) or b rows (ddl__pw_lanes) */

/* gemm_avx512.c's dot products take a weight gradient's sums over at least DDL__PW_DOTS_K positions,
 * or of fewer than DDL__PW_NARROW columns; its outer products the others (one sum in order) */
#define DDL__PW_DOTS_K 256
#define DDL__PW_NARROW 16

#define DDL__PW_INLINE static inline __attribute__((always_inline, target("avx512f,fma")))

/* ddl__pw_sums: acc[r][v] = the sum over t in [0, t_n), in order, of w[r rs + t ts] times src[t sts +
 * 16 v .. + 16), from +0, for rows r < rn (rows past rn take row 0's weights; their sums are not
 * to be used) and vectors v < vn (zeros past vn). Called with constant rn and vn, the tests
 * fold away. */
DDL__PW_INLINE void ddl__pw_sums(__m512 acc[DDL__PW_R][DDL__PW_V], const float *w, size_t rs, size_t ts, int rn,
                                 const float *src, size_t sts, int t_n, int vn)
{
    const float *wr[DDL__PW_R];
    for (int r = 0; r < DDL__PW_R; r++) {
        wr[r] = w + (size_t)(r < rn ? r : 0) * rs;
        for (int v = 0; v < DDL__PW_V; v++)
            acc[r][v] = _mm512_setzero_ps();
    }
    for (int t = 0; t < t_n; t++) {
        const float *st = src + (size_t)t * sts;
        __m512 d[DDL__PW_V];
        for (int v = 0; v < DDL__PW_V; v++)
            d[v] = v < vn ? _mm512_loadu_ps(st + 16 * v) : _mm512_setzero_ps();
        for (int r = 0; r < DDL__PW_R; r++) {
            __m512 wv = _mm512_set1_ps(wr[r][(size_t)t * ts]);
            for (int v = 0; v < DDL__PW_V; v++)
                acc[r][v] = _mm512_fmadd_ps(wv, d[v], acc[r][v]);
        }
    }
}

/* ddl__pw_lanes: acc[r][t] += a_r times b_t, 16 positions a step over `steps` steps in order, for the
 * a rows a_r = a + r as (r < rn; the rest read as zeros) and the DDL__PW_V b rows b_t = b + t bs: a
 * dot product's lanes (position c of a chunk in lane c mod 16). The caller keeps acc over the
 * chunk's samples (in registers, where rn is a constant). */
DDL__PW_INLINE void ddl__pw_lanes(__m512 acc[DDL__PW_R][DDL__PW_V], int rn, const float *a, size_t as,
                                  const float *b, size_t bs, size_t steps)
{
    const __m512 zero = _mm512_setzero_ps();
    for (size_t c = 0; c < steps; c++) {
        __m512 av[DDL__PW_R];
        for (int r = 0; r < DDL__PW_R; r++)
            av[r] = r < rn ? _mm512_loadu_ps(a + (size_t)r * as + 16 * c) : zero;
        for (int t = 0; t < DDL__PW_V; t++) {
            __m512 bv = _mm512_loadu_ps(b + (size_t)t * bs + 16 * c);
            for (int r = 0; r < DDL__PW_R; r++)
                acc[r][t] = _mm512_fmadd_ps(av[r], bv, acc[r][t]);
        }
    }
}

#endif
