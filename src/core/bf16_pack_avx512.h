/* bf16_pack_avx512.h - the register moves both bfloat16 products' packing is made of
 * (gemm_bf16_avx512.c, gemm_bf16_amx.c): two rows of k rounded and interleaved into pairs, and a
 * 16 x 16 transpose of 32-bit words, which turns 16 rows of pairs into 16 columns of them without
 * a gather. Rounding is vcvtne2ps2bf16's (to nearest even, a subnormal to zero: ddl__bf16_round);
 * the rest only moves bits. Include it inside a file's x86-64 section. */
#ifndef DDL_CORE_BF16_PACK_AVX512_H
#define DDL_CORE_BF16_PACK_AVX512_H

#include <immintrin.h>

#define DDL__BF16_PACK __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

/* ddl__bf16_pairs: 16 floats of lo (k = p) and 16 of hi (k = p + 1) rounded and interleaved into
 * 16 pairs, lane i the pair (lo[i], hi[i]), lo in the low half. */
DDL__BF16_PACK static inline __m512i ddl__bf16_pairs(__m512 lo, __m512 hi)
{
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

/* ddl__bf16_row_pairs: 32 consecutive floats (lo: k = p .. p + 15, hi: p + 16 .. p + 31) as
 * their 16 pairs in order: lane i the pair (p + 2i, p + 2i + 1). */
DDL__BF16_PACK static inline __m512i ddl__bf16_row_pairs(__m512 lo, __m512 hi)
{
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* ddl__transpose16: the 16 x 16 words of r transposed in registers (unpacks, then 128-bit
 * shuffles): word j of r[i] becomes word i of r[j]. */
DDL__BF16_PACK static inline void ddl__transpose16(__m512i r[16])
{
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int h = 0; h < 16; h += 8)
        for (int i = 0; i < 4; i++) {
            t[h + i] = _mm512_shuffle_i32x4(r[h + i], r[h + i + 4], 0x88);
            t[h + i + 4] = _mm512_shuffle_i32x4(r[h + i], r[h + i + 4], 0xdd);
        }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
    }
}

#endif
