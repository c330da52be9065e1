/* avx512_some.h - loads and stores of the first lanes of a vector (a mask of the lanes), as the
 * AVX-512 kernels' row tails need, that are plain whole-vector loads and stores where the mask is
 * full: on this project's AMD EPYC (Zen 5) a masked load that misses the cache waits about twice as
 * long as a plain one (perf put maxpool_avx512.c's time on the instruction after it), so a kernel
 * that masked every step of a row ran at half speed from memory. tools/bench/pool.c, the cnn's
 * first pool (64x16x64x64), 3 alternated runs: forward 3.0-3.3 -> 1.2-2.2 ms, backward 1.9-2.3 ->
 * 0.9-1.1. The lanes read and written, and so the bits, are the masked instructions'. Include it
 * inside a file's x86-64 section. */
#ifndef DDL_CORE_AVX512_SOME_H
#define DDL_CORE_AVX512_SOME_H

#include <immintrin.h>

#define DDL__FULL16 ((__mmask16)0xffff)

/* ddl__mask16: the first n lanes (n clamped to 0..16): a row's tail. */
static inline __mmask16 ddl__mask16(int n) { return (__mmask16)(n >= 16 ? 0xffff : n <= 0 ? 0 : (1u << n) - 1); }

__attribute__((target("avx512f"))) static inline __m512 ddl__load_some(__mmask16 m, const float *p)
{
    return m == DDL__FULL16 ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
}

__attribute__((target("avx512f"))) static inline __m512i ddl__load_some_epi32(__mmask16 m, const void *p)
{
    return m == DDL__FULL16 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi32(m, p);
}

__attribute__((target("avx512f"))) static inline void ddl__store_some(__mmask16 m, float *p, __m512 v)
{
    if (m == DDL__FULL16)
        _mm512_storeu_ps(p, v);
    else
        _mm512_mask_storeu_ps(p, m, v);
}

__attribute__((target("avx512f"))) static inline void ddl__store_some_epi32(__mmask16 m, void *p, __m512i v)
{
    if (m == DDL__FULL16)
        _mm512_storeu_si512(p, v);
    else
        _mm512_mask_storeu_epi32(p, m, v);
}

/* 16 bfloat16 (or any 16-bit words) of a 256-bit vector */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline void ddl__store_some_epi16(__mmask16 m, void *p,
                                                                                               __m256i v)
{
    if (m == DDL__FULL16)
        _mm256_storeu_si256((__m256i *)p, v);
    else
        _mm256_mask_storeu_epi16(p, m, v);
}

#endif
