/* gemm_avx512.c - ddl_gemm's products on a CPU with AVX-512, chosen at run time (gemm.c asks
 * first and falls back to OpenBLAS or its built-in kernel). The products ddl sends here are
 * small (LeNet's dense layers: 64 x 120 x 400; U-Net's transposed convolutions: 11 x 512 x 8),
 * where OpenBLAS 0.3.21 runs its AVX2 kernel at half of what the core's 512-bit multiply-adds
 * give (tools/bench/kernels: from as fast as it, LeNet's fc3, to 5x faster on those shapes).
 * Two kernels:
 * - outer products: an 8 x 32 tile of C in 16 registers, k in slices of KC; op(A) packed into
 *   8-row panels (MC rows at a time), op(B) read in place where its rows are contiguous and the
 *   panel full, else packed into 32-column panels;
 * - dot products, for A B^T with a long k (or few columns): both operands have k contiguous, so
 *   nothing is packed; a 4 x 4 tile of sums, each over 16 lanes of k, then a fixed tree.
 * Every element of C gets the same operations wherever its tile lies (edges are zero-padded or
 * masked, never another path), so a product cut into blocks gives the same bits as the whole:
 * ddl_gemm's threads depend on that. gemm.c scales C by beta first; these only add. Nothing is
 * allocated: ~96 KB of stack. */
#include "impl.h"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(DDL_NO_CLONES)

#include <immintrin.h>
#include <math.h>

#include "avx512_some.h"

#define AVX512 __attribute__((target("avx512f,fma")))

/* ---- outer products ---- */

#define MR 8   /* rows of a tile */
#define NR 32  /* columns of a tile: two 16-float registers */
#define KC 256 /* depth of a slice */
#define MC 64  /* rows of op(A) packed at a time */

/* pack_a: rows [i0, i0 + mc) and depth [p0, p0 + kc) of op(A) into (mc / MR panels, kc, MR), rows
 * past mc zero. */
static void pack_a(int trans_a, const float *a, int lda, int i0, int mc, int p0, int kc, float *ap)
{
    for (int ir = 0; ir < mc; ir += MR) {
        int mr = mc - ir < MR ? mc - ir : MR;
        float *panel = ap + (size_t)ir * kc;
        if (trans_a) { /* op(A)'s rows are A's columns: MR of them side by side in each row of A */
            for (int p = 0; p < kc; p++) {
                const float *src = a + (size_t)(p0 + p) * lda + i0 + ir;
                for (int i = 0; i < MR; i++)
                    panel[p * MR + i] = i < mr ? src[i] : 0.0f;
            }
            continue;
        }
        for (int i = 0; i < MR; i++) { /* each row of A read along, written across the panel */
            const float *src = a + (size_t)(i0 + ir + i) * lda + p0;
            for (int p = 0; p < kc; p++)
                panel[p * MR + i] = i < mr ? src[p] : 0.0f;
        }
    }
}

/* pack_b: depth [p0, p0 + kc) and columns [j0, j0 + nr) of op(B) into (kc, NR), columns past nr
 * zero. */
static void pack_b(int trans_b, const float *b, int ldb, int p0, int kc, int j0, int nr, float *bp)
{
    if (trans_b) { /* op(B)'s columns are B's rows: read each along, write it down the panel */
        for (int j = 0; j < NR; j++) {
            const float *src = b + (size_t)(j0 + j) * ldb + p0;
            for (int p = 0; p < kc; p++)
                bp[p * NR + j] = j < nr ? src[p] : 0.0f;
        }
        return;
    }
    for (int p = 0; p < kc; p++) {
        const float *src = b + (size_t)(p0 + p) * ldb + j0;
        for (int j = 0; j < NR; j++)
            bp[p * NR + j] = j < nr ? src[j] : 0.0f;
    }
}

/* micro: c (mr x nr of an MR x NR tile, row stride ldc) += alpha * ap (kc, MR) bp (kc, NR, row
 * stride ldbp). The update of C is masked to nr columns: the same instructions for every tile. */
AVX512 static void micro(int kc, const float *restrict ap, const float *restrict bp, int ldbp, float alpha, float *c,
                         int ldc, int mr, int nr)
{
    __m512 acc[MR][2];
    for (int i = 0; i < MR; i++)
        acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int p = 0; p < kc; p++) {
        __m512 b0 = _mm512_loadu_ps(bp + (size_t)p * ldbp), b1 = _mm512_loadu_ps(bp + (size_t)p * ldbp + 16);
        for (int i = 0; i < MR; i++) {
            __m512 av = _mm512_set1_ps(ap[p * MR + i]);
            acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
        }
    }
    __mmask16 m0 = (__mmask16)(nr >= 16 ? 0xffff : (1u << nr) - 1);
    __mmask16 m1 = (__mmask16)(nr >= NR ? 0xffff : nr <= 16 ? 0 : (1u << (nr - 16)) - 1);
    __m512 al = _mm512_set1_ps(alpha);
    for (int i = 0; i < mr; i++) {
        float *row = c + (size_t)i * ldc;
        ddl__store_some(m0, row, _mm512_fmadd_ps(al, acc[i][0], ddl__load_some(m0, row)));
        ddl__store_some(m1, row + 16, _mm512_fmadd_ps(al, acc[i][1], ddl__load_some(m1, row + 16)));
    }
}

static void outer(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                  int ldb, float *c, int ldc)
{
    _Alignas(64) float ap[MC * KC];
    _Alignas(64) float bp[KC * NR];
    for (int p0 = 0; p0 < k; p0 += KC) {
        int kc = k - p0 < KC ? k - p0 : KC;
        for (int i0 = 0; i0 < m; i0 += MC) {
            int mc = m - i0 < MC ? m - i0 : MC;
            pack_a(trans_a, a, lda, i0, mc, p0, kc, ap);
            for (int j0 = 0; j0 < n; j0 += NR) {
                int nr = n - j0 < NR ? n - j0 : NR;
                const float *panel = b + (size_t)p0 * ldb + j0; /* B's rows, where they are contiguous */
                int ldp = ldb;
                if (trans_b || nr < NR) {
                    pack_b(trans_b, b, ldb, p0, kc, j0, nr, bp);
                    panel = bp;
                    ldp = NR;
                }
                for (int ir = 0; ir < mc; ir += MR)
                    micro(kc, ap + (size_t)ir * kc, panel, ldp, alpha, c + (size_t)(i0 + ir) * ldc + j0, ldc,
                          mc - ir < MR ? mc - ir : MR, nr);
            }
        }
    }
}

/* ---- dot products: C += alpha A B^T, A (m, k) and B (n, k) by rows ---- */

#define TI 4 /* rows of A per tile */
#define TJ 4 /* rows of B per tile */

/* DOT_STEP: acc += the products over 16 lanes of k (LOAD masks the last) of rows a[0, ti) and
 * b[0, tj). */
#define DOT_STEP(LOAD)                                                                                                 \
    do {                                                                                                               \
        __m512 av[TI], bv[TJ];                                                                                         \
        for (int i = 0; i < TI; i++)                                                                                   \
            av[i] = i < ti ? LOAD(a + (size_t)i * lda + p) : _mm512_setzero_ps();                                      \
        for (int j = 0; j < TJ; j++)                                                                                   \
            bv[j] = j < tj ? LOAD(b + (size_t)j * ldb + p) : _mm512_setzero_ps();                                      \
        for (int i = 0; i < TI; i++)                                                                                   \
            for (int j = 0; j < TJ; j++)                                                                               \
                acc[i][j] = _mm512_fmadd_ps(av[i], bv[j], acc[i][j]);                                                  \
    } while (0)
#define FULL_LOAD(at) _mm512_loadu_ps(at)
#define TAIL_LOAD(at) _mm512_maskz_loadu_ps(mk, at)

/* dot_tile: the ti x tj (<= TI x TJ) sums of rows a[0, ti) with rows b[0, tj): 16 lanes each over
 * k (the last step masked, the same for every tile), then _mm512_reduce_add_ps's fixed tree. */
AVX512 static void dot_tile(int ti, int tj, int k, float alpha, const float *a, int lda, const float *b, int ldb,
                            float *c, int ldc)
{
    __m512 acc[TI][TJ];
    for (int i = 0; i < TI; i++)
        for (int j = 0; j < TJ; j++)
            acc[i][j] = _mm512_setzero_ps();
    int p = 0;
    for (; p + 16 <= k; p += 16)
        DOT_STEP(FULL_LOAD);
    if (p < k) {
        __mmask16 mk = (__mmask16)((1u << (k - p)) - 1);
        DOT_STEP(TAIL_LOAD);
    }
    for (int i = 0; i < ti; i++)
        for (int j = 0; j < tj; j++) {
            float *at = c + (size_t)i * ldc + j;
            *at = fmaf(alpha, _mm512_reduce_add_ps(acc[i][j]), *at);
        }
}

static void dots(int m, int n, int k, float alpha, const float *a, int lda, const float *b, int ldb, float *c, int ldc)
{
    for (int i0 = 0; i0 < m; i0 += TI)
        for (int j0 = 0; j0 < n; j0 += TJ)
            dot_tile(m - i0 < TI ? m - i0 : TI, n - j0 < TJ ? n - j0 : TJ, k, alpha, a + (size_t)i0 * lda, lda,
                     b + (size_t)j0 * ldb, ldb, c + (size_t)i0 * ldc + j0, ldc);
}

/* ---- entry ---- */

/* Which products go where, measured in LeNet's step (tools/bench/lenet_ops, 3 alternated runs)
 * and alone (tools/bench/kernels): A B^T by dots where k is long (LeNet's fc1 forward, k 400:
 * 71 -> 42 us a step against packing B, which transposes it; U-Net's 11 x 8 x 12288: 14 us
 * against OpenBLAS's 72) or where op(B) has fewer than NARROW columns (LeNet's fc3, 10: 6.5 ->
 * 2.9 us), but packed where k is short (fc2, k 120: 19.5 us packed, 24.5 by dots). Other
 * products with fewer than NARROW columns are left to the backend: a 32-column tile would be
 * mostly empty. */
#define DOTS_MIN_K 256
#define NARROW 16

int ddl__gemm_avx512_have(void) { return __builtin_cpu_supports("avx512f") ? 1 : 0; }

int ddl__gemm_avx512_takes(int trans_a, int trans_b, int n)
{
    if (!__builtin_cpu_supports("avx512f"))
        return 0;
    return n >= NARROW || (!trans_a && trans_b) ? 1 : 0;
}

void ddl__gemm_avx512(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                      const float *b, int ldb, float *c, int ldc)
{
    if (!trans_a && trans_b && (k >= DOTS_MIN_K || n < NARROW))
        dots(m, n, k, alpha, a, lda, b, ldb, c, ldc);
    else
        outer(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, c, ldc);
}

#else

int ddl__gemm_avx512_have(void) { return 0; }

int ddl__gemm_avx512_takes(int trans_a, int trans_b, int n)
{
    (void)trans_a, (void)trans_b, (void)n;
    return 0;
}

void ddl__gemm_avx512(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                      const float *b, int ldb, float *c, int ldc)
{
    (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b;
    (void)ldb, (void)c, (void)ldc;
}

#endif
