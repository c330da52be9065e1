/* gemm_bf16_avx512.c - the bfloat16 products on a CPU with AVX512-BF16 (AMD Zen 4 and 5, Intel
 * from Cooper Lake): vdpbf16ps adds, in each of 16 float lanes, the products of two bfloat16
 * pairs. The summation order is gemm_bf16.c's reference, bit for bit.
 * Blocking as gemm_avx512.c's outer products: k in slices of DDL__BF16_KC; op(A) packed, MC rows
 * at a time, into MR-row panels of bfloat16 pairs (one 32-bit word per row and pair of k); op(B)
 * packed into NR-column panels of pairs (kc / 2 rows of NR words: the two values of a column for
 * k = p, p + 1 side by side, p in the low half, as vdpbf16ps pairs them); an MR x NR tile of C in
 * 16 registers. Packing rounds (vcvtne2ps2bf16: to nearest even, a subnormal to zero, as
 * ddl__bf16_round) and zero-pads the edges, so every element of C gets the same instructions
 * wherever its tile lies: a product cut into blocks gives the bits of the whole (ddl_gemm's
 * threads). Nothing is allocated: ~210 KB of stack (op(B) packed 256 columns at a time). */
#include "impl.h"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(DDL_NO_CLONES)

#include <immintrin.h>
#include <string.h>

#include "avx512_some.h"
#include "bf16_pack_avx512.h"

#define BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

#define MR 8   /* rows of a tile */
#define NR 32  /* columns of a tile: two 16-float registers */
#define KC DDL__BF16_KC
#define KP (KC / 2) /* pairs of a slice */
#define MC 128 /* rows of op(A) packed at a time */
#define NC 256 /* columns of op(B) packed at a time when op(B) is packed first (b_first) */

/* across: rows whose k runs along memory (op(A) untransposed, op(B) transposed), 8 of them or
 * a multiple of 16 (row r at src + r ld, `valid` of them real, the rest zero), depth kc, into
 * (kp, rows) pairs at dst: each row's 32 values of k converted to 16 pairs, 16 rows' pairs
 * transposed in registers (8 rows: with 8 of zeros) and stored a pair of k at a time. op(A)'s 8
 * rows were converted, then dealt out a word at a time: 3-4% of a bfloat16 ResNet-18 step. */
BF16 static void across(const float *src, size_t ld, int rows, int valid, int kc, uint32_t *dst)
{
    for (int r0 = 0; r0 < rows; r0 += 16)
        for (int p = 0; p < kc; p += 32) {
            __m512i v[16];
            for (int r = 0; r < 16; r++) {
                if (r0 + r >= valid || r0 + r >= rows) {
                    v[r] = _mm512_setzero_si512();
                    continue;
                }
                const float *at = src + (size_t)(r0 + r) * ld + p;
                v[r] = ddl__bf16_row_pairs(ddl__load_some(ddl__mask16(kc - p), at),
                                           ddl__load_some(ddl__mask16(kc - p - 16), at + 16));
            }
            ddl__transpose16(v);
            int nq = (kc - p + 1) / 2 < 16 ? (kc - p + 1) / 2 : 16;
            for (int q = 0; q < nq; q++) {
                uint32_t *out = dst + (size_t)(p / 2 + q) * rows + r0;
                if (rows < 16)
                    _mm256_storeu_si256((__m256i *)(void *)out, _mm512_castsi512_si256(v[q]));
                else
                    _mm512_storeu_si512(out, v[q]);
            }
        }
}

/* down: rows whose k runs down memory (op(A) transposed, op(B) untransposed): for each pair of k,
 * two rows of memory give `cols` (8 or 32, `valid` real) pairs side by side. */
BF16 static void down(const float *src, size_t ld, int cols, int valid, int kc, uint32_t *dst)
{
    int kp = (kc + 1) / 2;
    for (int q = 0; q < kp; q++) {
        const float *r0 = src + (size_t)(2 * q) * ld, *r1 = r0 + ld;
        int two = 2 * q + 1 < kc;
        for (int j = 0; j < cols; j += 16) {
            __mmask16 m = ddl__mask16(valid - j);
            __m512 lo = ddl__load_some(m, r0 + j);
            __m512 hi = two ? ddl__load_some(m, r1 + j) : _mm512_setzero_ps();
            ddl__store_some_epi32(ddl__mask16(cols - j), dst + (size_t)q * cols + j, ddl__bf16_pairs(lo, hi));
        }
    }
}

/* pack_a: rows [i0, i0 + mc) and depth [p0, p0 + kc) of op(A) into (mc / MR panels, kp, MR) pairs,
 * rows past mc and a missing last term zero. */
BF16 static void pack_a(int trans_a, const float *a, int lda, int i0, int mc, int p0, int kc, uint32_t *ap)
{
    int kp = (kc + 1) / 2;
    for (int ir = 0; ir < mc; ir += MR) {
        int mr = mc - ir < MR ? mc - ir : MR;
        uint32_t *panel = ap + (size_t)ir * kp;
        if (trans_a)
            down(a + (size_t)p0 * lda + i0 + ir, (size_t)lda, MR, mr, kc, panel);
        else
            across(a + (size_t)(i0 + ir) * lda + p0, (size_t)lda, MR, mr, kc, panel);
    }
}

/* pack_b: depth [p0, p0 + kc) and columns [j0, j0 + nr) of op(B) into (kp, NR) pairs, columns
 * past nr and a missing last term zero. */
BF16 static void pack_b(int trans_b, const float *b, int ldb, int p0, int kc, int j0, int nr, uint32_t *bp)
{
    if (trans_b)
        across(b + (size_t)j0 * ldb + p0, (size_t)ldb, NR, nr, kc, bp);
    else
        down(b + (size_t)p0 * ldb + j0, (size_t)ldb, NR, nr, kc, bp);
}

/* micro: c (mr x nr of an MR x NR tile, row stride ldc) += alpha * ap (kp, MR) bp (kp, NR). */
BF16 static void micro(int kp, const uint32_t *restrict ap, const uint32_t *restrict bp, float alpha, float *c,
                       int ldc, int mr, int nr, int fresh)
{
    __m512 acc[MR][2];
    for (int i = 0; i < MR; i++)
        acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int q = 0; q < kp; q++) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp + (size_t)q * NR);
        __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + (size_t)q * NR + 16);
        for (int i = 0; i < MR; i++) {
            __m512bh av = (__m512bh)_mm512_set1_epi32((int)ap[q * MR + i]);
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], av, b0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], av, b1);
        }
    }
    __mmask16 m0 = (__mmask16)(nr >= 16 ? 0xffff : (1u << nr) - 1);
    __mmask16 m1 = (__mmask16)(nr >= NR ? 0xffff : nr <= 16 ? 0 : (1u << (nr - 16)) - 1);
    __m512 al = _mm512_set1_ps(alpha);
    __mmask16 r0 = fresh ? 0 : m0, r1 = fresh ? 0 : m1; /* fresh: C's old values read as +0, not at all */
    for (int i = 0; i < mr; i++) {
        float *row = c + (size_t)i * ldc;
        ddl__store_some(m0, row, _mm512_fmadd_ps(al, acc[i][0], ddl__load_some(r0, row)));
        ddl__store_some(m1, row + 16, _mm512_fmadd_ps(al, acc[i][1], ddl__load_some(r1, row + 16)));
    }
}

int ddl__gemm_bf16_avx512_have(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16")
               ? 1
               : 0;
}

/* block_words: a block of mc rows and depth kc of op(A) packed (pack_a's panels). */
static size_t block_words(int mc, int kc) { return (size_t)(mc + MR - 1) / MR * MR * ((kc + 1) / 2); }

/* a_at: where the block of rows [i0, ...) and depth [p0, p0 + kc) starts in op(A) packed whole
 * (gemm_bf16.c's layout) */
static size_t a_at(int m, int p0, int i0, int kc) { return ddl__bf16_a_at(m, p0, i0, kc, MC, block_words); }

size_t ddl__gemm_bf16_avx512_packed_words(int m, int k) { return ddl__bf16_a_words(m, k, MC, block_words); }

BF16 void ddl__gemm_bf16_avx512_pack(int trans_a, int m, int k, const float *a, int lda, uint32_t *pa)
{
    for (int p0 = 0; p0 < k; p0 += KC) {
        int kc = k - p0 < KC ? k - p0 : KC;
        for (int i0 = 0; i0 < m; i0 += MC)
            pack_a(trans_a, a, lda, i0, m - i0 < MC ? m - i0 : MC, p0, kc, pa + a_at(m, p0, i0, kc));
    }
}

/* product: the product, op(A) packed here block by block, or read from pa (op(A) packed whole). */
BF16 static void product(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                         const uint32_t *pa, const float *b, int ldb, int overwrite, float *c, int ldc)
{
    _Alignas(64) uint32_t ap_own[MC * KP];
    _Alignas(64) uint32_t bp[KP * NC];
    int by_b = ddl__bf16_b_first(m, n, MC, NC), nc_max = by_b ? NC : n > 0 ? n : 1;
    for (int p0 = 0; p0 < k; p0 += KC) {
        int kc = k - p0 < KC ? k - p0 : KC, kp = (kc + 1) / 2, fresh = overwrite && p0 == 0;
        for (int jc = 0; jc < n; jc += nc_max) { /* op(B) first: its block's panels packed once */
            int nc = n - jc < nc_max ? n - jc : nc_max;
            for (int j0 = 0; by_b && j0 < nc; j0 += NR)
                pack_b(trans_b, b, ldb, p0, kc, jc + j0, nc - j0 < NR ? nc - j0 : NR, bp + (size_t)j0 * kp);
            for (int i0 = 0; i0 < m; i0 += MC) {
                int mc = m - i0 < MC ? m - i0 : MC;
                const uint32_t *ap = pa ? pa + a_at(m, p0, i0, kc) : ap_own;
                if (!pa)
                    pack_a(trans_a, a, lda, i0, mc, p0, kc, ap_own);
                for (int j0 = 0; j0 < nc; j0 += NR) {
                    int nr = nc - j0 < NR ? nc - j0 : NR;
                    const uint32_t *panel = by_b ? bp + (size_t)j0 * kp : bp;
                    if (!by_b) /* op(A) first: a panel of op(B) at a time, for the block's rows */
                        pack_b(trans_b, b, ldb, p0, kc, jc + j0, nr, bp);
                    for (int ir = 0; ir < mc; ir += MR)
                        micro(kp, ap + (size_t)ir * kp, panel, alpha, c + (size_t)(i0 + ir) * ldc + jc + j0, ldc,
                              mc - ir < MR ? mc - ir : MR, nr, fresh);
                }
            }
        }
    }
}

void ddl__gemm_bf16_avx512(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                           const float *b, int ldb, int overwrite, float *c, int ldc)
{
    product(trans_a, trans_b, m, n, k, alpha, a, lda, NULL, b, ldb, overwrite, c, ldc);
}

void ddl__gemm_bf16_avx512_packed(const uint32_t *pa, int trans_b, int m, int n, int k, float alpha, const float *b,
                                  int ldb, int overwrite, float *c, int ldc)
{
    product(0, trans_b, m, n, k, alpha, NULL, 0, pa, b, ldb, overwrite, c, ldc);
}

#else

int ddl__gemm_bf16_avx512_have(void) { return 0; }
size_t ddl__gemm_bf16_avx512_packed_words(int m, int k) { (void)m, (void)k; return 0; }
void ddl__gemm_bf16_avx512_pack(int trans_a, int m, int k, const float *a, int lda, uint32_t *pa)
{
    (void)trans_a, (void)m, (void)k, (void)a, (void)lda, (void)pa;
}
void ddl__gemm_bf16_avx512_packed(const uint32_t *pa, int trans_b, int m, int n, int k, float alpha, const float *b,
                                  int ldb, int overwrite, float *c, int ldc)
{
    (void)pa, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)b, (void)ldb, (void)overwrite, (void)c, (void)ldc;
}

void ddl__gemm_bf16_avx512(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                           const float *b, int ldb, int overwrite, float *c, int ldc)
{
    (void)overwrite, (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b;
    (void)ldb, (void)c, (void)ldc;
}

#endif
