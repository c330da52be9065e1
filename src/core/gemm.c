/* gemm.c - ddl_gemm, the one matrix product every op goes through, split over ddl's threads.
 * On a CPU with AVX-512 most products go to ddl's own kernels (gemm_avx512.c). The others go to
 * the backend: with DDL_WITH_OPENBLAS cblas_sgemm; otherwise a built-in kernel (GotoBLAS-style
 * packing into small stack blocks and a register-tiled micro-kernel written so gcc -O3
 * vectorises it). It allocates nothing and keeps no state. */
#include "impl.h"

#include <math.h>
#include <string.h>

#ifdef DDL_WITH_OPENBLAS
#include <cblas.h>
#endif

/* scale_c: C = beta * C; beta == 0 overwrites (NaN in C does not survive, as in BLAS). */
static void scale_c(int m, int n, float beta, float *c, int ldc)
{
    if (beta == 1.0f)
        return;
    for (int i = 0; i < m; i++) {
        float *row = c + (size_t)i * ldc;
        if (beta == 0.0f)
            memset(row, 0, (size_t)n * sizeof *row);
        else
            for (int j = 0; j < n; j++)
                row[j] *= beta;
    }
}

#ifdef DDL_WITH_OPENBLAS

/* ---- OpenBLAS ---- */

static void backend_one(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                        const float *b, int ldb, float beta, float *c, int ldc)
{
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n,
                k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* gemm_row: m == 1 (a batch of one): a matrix-vector product, without packing B. */
static int gemm_row(int trans_a, int trans_b, int n, int k, float alpha, const float *a, int lda, const float *b,
                    int ldb, float beta, float *c)
{
    if (k <= 0)
        return 0;
    cblas_sgemv(CblasRowMajor, trans_b ? CblasNoTrans : CblasTrans, trans_b ? n : k, trans_b ? k : n, alpha, b,
                ldb, a, trans_a ? lda : 1, beta, c, 1);
    return 1;
}

const char *ddl_gemm_backend(void) { return "openblas"; }

static void blas_threads(void) { openblas_set_num_threads(1); /* ddl's pool splits the products */ }

#endif

/* ---- built-in kernel ----
 * The backend when there is no OpenBLAS; with it, the kernel of batch-invariant products on a
 * CPU without AVX-512 (see the batch-invariant products below).
 * Blocking: for each KC-deep slice of k and each MC-row block of op(A), op(A) is packed into
 * MR-row panels (p-major, so the micro-kernel reads MR floats per step); then for each NR-column
 * panel of op(B) that panel is packed (NR floats per step) and the micro-kernel computes an
 * MR x NR tile of C in registers. Packing zero-pads the edges, so the kernel always runs full
 * tiles and only the store is clipped. Stack use: MC * KC + KC * NR floats (~36 KB). */

#define GEMM_MR 4
#define GEMM_NR 16
#define GEMM_KC 256
#define GEMM_MC 32

/* pack_a: rows [i0, i0+mc) and depth [p0, p0+kc) of op(A) into ap: (mc/MR panels, kc, MR). */
static void pack_a(int trans_a, const float *a, int lda, int i0, int mc, int p0, int kc, float *ap)
{
    for (int ir = 0; ir < mc; ir += GEMM_MR) {
        int mr = mc - ir < GEMM_MR ? mc - ir : GEMM_MR;
        float *dst = ap + (size_t)ir * kc;
        for (int p = 0; p < kc; p++) {
            for (int i = 0; i < GEMM_MR; i++) {
                float v = 0.0f;
                if (i < mr) {
                    size_t row = (size_t)(i0 + ir + i), col = (size_t)(p0 + p);
                    v = trans_a ? a[col * lda + row] : a[row * lda + col];
                }
                dst[p * GEMM_MR + i] = v;
            }
        }
    }
}

/* pack_b: depth [p0, p0+kc) and columns [j0, j0+NR) of op(B) into bp: (kc, NR). */
static void pack_b(int trans_b, const float *b, int ldb, int p0, int kc, int j0, int nr, float *bp)
{
    if (!trans_b) {
        for (int p = 0; p < kc; p++) {
            const float *src = b + (size_t)(p0 + p) * ldb + j0;
            float *dst = bp + p * GEMM_NR;
            int j = 0;
            for (; j < nr; j++)
                dst[j] = src[j];
            for (; j < GEMM_NR; j++)
                dst[j] = 0.0f;
        }
        return;
    }
    /* op(B)[p][j] = b[j][p]: read each row of b contiguously */
    for (int j = 0; j < nr; j++) {
        const float *src = b + (size_t)(j0 + j) * ldb + p0;
        for (int p = 0; p < kc; p++)
            bp[p * GEMM_NR + j] = src[p];
    }
    for (int j = nr; j < GEMM_NR; j++)
        for (int p = 0; p < kc; p++)
            bp[p * GEMM_NR + j] = 0.0f;
}

/* store: c (mr x nr valid of an MR x NR tile, row stride ldc) += alpha * acc. */
static void store(const float *acc, float alpha, float *c, int ldc, int mr, int nr)
{
    if (mr == GEMM_MR && nr == GEMM_NR) { /* the common full tile, with constant bounds */
        for (int i = 0; i < GEMM_MR; i++)
            for (int j = 0; j < GEMM_NR; j++)
                c[(size_t)i * ldc + j] += alpha * acc[i * GEMM_NR + j];
        return;
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            c[(size_t)i * ldc + j] += alpha * acc[i * GEMM_NR + j];
}

#if defined(__GNUC__)
/* GNU vector types pin the accumulators in registers; plain loops let gcc spill them. */
typedef float gemm_v4 __attribute__((vector_size(16)));

/* micro_sse: c += alpha * ap (kc, MR) bp (kc, NR), as NR / 8 passes of a 4 x 8 tile: eight
 * SSE accumulators, two B vectors and a broadcast fit the 16 registers. */
static void micro_sse(int kc, const float *restrict ap, const float *restrict bp, int ldbp, float alpha, float *c,
                      int ldc, int mr, int nr)
{
    float out[GEMM_MR * GEMM_NR];
    for (int jh = 0; jh < GEMM_NR; jh += 8) {
        gemm_v4 acc[GEMM_MR][2];
        for (int i = 0; i < GEMM_MR; i++)
            acc[i][0] = acc[i][1] = (gemm_v4){0, 0, 0, 0};
        for (int p = 0; p < kc; p++) {
            gemm_v4 b0, b1;
            memcpy(&b0, bp + (size_t)p * ldbp + jh, sizeof b0);
            memcpy(&b1, bp + (size_t)p * ldbp + jh + 4, sizeof b1);
            for (int i = 0; i < GEMM_MR; i++) {
                float av = ap[p * GEMM_MR + i];
                gemm_v4 a = {av, av, av, av};
                acc[i][0] += a * b0;
                acc[i][1] += a * b1;
            }
        }
        for (int i = 0; i < GEMM_MR; i++) {
            memcpy(out + i * GEMM_NR + jh, &acc[i][0], sizeof acc[i][0]);
            memcpy(out + i * GEMM_NR + jh + 4, &acc[i][1], sizeof acc[i][1]);
        }
    }
    store(out, alpha, c, ldc, mr, nr);
}
#else
/* micro_sse: portable C: c += alpha * ap (kc, MR) bp (kc, NR). */
static void micro_sse(int kc, const float *restrict ap, const float *restrict bp, int ldbp, float alpha, float *c,
                      int ldc, int mr, int nr)
{
    float acc[GEMM_MR * GEMM_NR] = {0};
    for (int p = 0; p < kc; p++)
        for (int i = 0; i < GEMM_MR; i++)
            for (int j = 0; j < GEMM_NR; j++)
                acc[i * GEMM_NR + j] += ap[p * GEMM_MR + i] * bp[(size_t)p * ldbp + j];
    store(acc, alpha, c, ldc, mr, nr);
}
#endif

/* DDL_GEMM_NO_AVX2 (a -D flag) forces the SSE kernel, to test it on an AVX2 machine. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(DDL_GEMM_NO_AVX2)
#define GEMM_HAVE_AVX2 1
typedef float gemm_v8 __attribute__((vector_size(32)));

/* micro_avx2: the same product as one 4 x 16 tile in 8 AVX registers with fused multiply-adds,
 * chosen at run time when the CPU has AVX2 and FMA (as OpenBLAS picks its kernel by CPU). */
__attribute__((target("avx2,fma"))) static void micro_avx2(int kc, const float *restrict ap,
                                                           const float *restrict bp, int ldbp, float alpha,
                                                           float *c, int ldc, int mr, int nr)
{
    gemm_v8 acc[GEMM_MR][2];
    float out[GEMM_MR * GEMM_NR];
    for (int i = 0; i < GEMM_MR; i++)
        acc[i][0] = acc[i][1] = (gemm_v8){0, 0, 0, 0, 0, 0, 0, 0};
    for (int p = 0; p < kc; p++) {
        gemm_v8 b0, b1;
        memcpy(&b0, bp + (size_t)p * ldbp, sizeof b0);
        memcpy(&b1, bp + (size_t)p * ldbp + 8, sizeof b1);
        for (int i = 0; i < GEMM_MR; i++) {
            float av = ap[p * GEMM_MR + i];
            gemm_v8 a = {av, av, av, av, av, av, av, av};
            acc[i][0] = __builtin_ia32_vfmaddps256(a, b0, acc[i][0]);
            acc[i][1] = __builtin_ia32_vfmaddps256(a, b1, acc[i][1]);
        }
    }
    for (int i = 0; i < GEMM_MR; i++) {
        memcpy(out + i * GEMM_NR, &acc[i][0], sizeof acc[i][0]);
        memcpy(out + i * GEMM_NR + 8, &acc[i][1], sizeof acc[i][1]);
    }
    store(out, alpha, c, ldc, mr, nr);
}
#endif

typedef void (*micro_fn)(int kc, const float *ap, const float *bp, int ldbp, float alpha, float *c, int ldc, int mr,
                         int nr);

static void builtin_one(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                        const float *b, int ldb, float beta, float *c, int ldc)
{
    _Alignas(64) float ap[GEMM_MC * GEMM_KC];
    _Alignas(64) float bp[GEMM_KC * GEMM_NR];
    if (m <= 0 || n <= 0)
        return;
    scale_c(m, n, beta, c, ldc);
    if (k <= 0 || alpha == 0.0f)
        return;
    micro_fn micro = micro_sse;
#ifdef GEMM_HAVE_AVX2
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        micro = micro_avx2;
#endif
    for (int p0 = 0; p0 < k; p0 += GEMM_KC) {
        int kc = k - p0 < GEMM_KC ? k - p0 : GEMM_KC;
        for (int i0 = 0; i0 < m; i0 += GEMM_MC) {
            int mc = m - i0 < GEMM_MC ? m - i0 : GEMM_MC;
            pack_a(trans_a, a, lda, i0, mc, p0, kc, ap);
            for (int j0 = 0; j0 < n; j0 += GEMM_NR) {
                int nr = n - j0 < GEMM_NR ? n - j0 : GEMM_NR;
                /* a full panel of an untransposed B is read in place: its rows are contiguous */
                const float *bsrc = b + (size_t)p0 * ldb + j0;
                int ldbp = ldb;
                if (trans_b || nr < GEMM_NR) {
                    pack_b(trans_b, b, ldb, p0, kc, j0, nr, bp);
                    bsrc = bp;
                    ldbp = GEMM_NR;
                }
                for (int ir = 0; ir < mc; ir += GEMM_MR) {
                    int mr = mc - ir < GEMM_MR ? mc - ir : GEMM_MR;
                    micro(kc, ap + (size_t)ir * kc, bsrc, ldbp, alpha, c + (size_t)(i0 + ir) * ldc + j0, ldc, mr,
                          nr);
                }
            }
        }
    }
}

#ifndef DDL_WITH_OPENBLAS

static void backend_one(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                        const float *b, int ldb, float beta, float *c, int ldc)
{
    builtin_one(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static int gemm_row(int trans_a, int trans_b, int n, int k, float alpha, const float *a, int lda, const float *b,
                    int ldb, float beta, float *c)
{
    (void)trans_a, (void)trans_b, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb;
    (void)beta, (void)c;
    return 0;
}

const char *ddl_gemm_backend(void) { return "builtin"; }

static void blas_threads(void) {}

#endif

/* gemm_one: one product, by the AVX-512 kernels where the CPU has them (gemm_avx512.c), else by
 * the backend. */
static void gemm_one(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc)
{
    if (!ddl__gemm_avx512_takes(trans_a, trans_b, n)) {
        backend_one(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    scale_c(m, n, beta, c, ldc);
    if (k > 0 && alpha != 0.0f)
        ddl__gemm_avx512(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, c, ldc);
}

/* ---- batch-invariant products (inference) ----
 * A product's rows are a batch's samples (dense layers) and its columns their positions (conv
 * through im2col), so where a sample's numbers lie in C, and how many others there are, depend
 * on the batch. OpenBLAS sums differently by shape: cblas_sgemv for one row, and tiles of other
 * kernels at the edges of sgemm; the AVX-512 kernels are sent only the shapes they are fastest
 * on. So a sample's logits changed in their last bits with the batch it came in. ddl's own
 * kernels (AVX-512, else the built-in one) give every element of C the same operations wherever
 * its tile lies: in this mode every product goes to them, and an image's logits are the same
 * bits alone or at any place of any batch (tests/test_batch_same.c). Training stays on the
 * dispatch above, whose bits the pinned weights_crc values hold; the predictor sets this mode
 * (ddl__set_invariant) around its forward passes. The mode is the calling thread's, carried by
 * the pool to the threads that run its tasks (pool.c). */

static void gemm_invariant(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                           const float *b, int ldb, float beta, float *c, int ldc)
{
    if (!ddl__gemm_avx512_have()) {
        builtin_one(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    scale_c(m, n, beta, c, ldc);
    if (k > 0 && alpha != 0.0f)
        ddl__gemm_avx512(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, c, ldc);
}

/* ---- threads ----
 * A large product is cut into fixed blocks of C's columns (or of its rows, when it has few
 * columns; or into two halves of its columns, for a weight gradient), the same whatever the
 * thread count, and the blocks are shared out over the threads.
 * Every block is one call, so each element of C comes out of the same call on every thread
 * count: the result does not depend on it. (Cutting by the thread count would not do: where a
 * block ends changes how OpenBLAS tiles it, and so the rounding of the elements at its edges.
 * The bfloat16 kernels' elements do not depend on where a block ends, so their products are cut
 * one block a thread: bf16_blocks.) */

#define BLOCK_MIN_WORK ((double)(1 << 20)) /* m n k below which a product stays whole */
#define BLOCK_COLS 512
#define BLOCK_ROWS 32

/* bf16_blocks: a bfloat16 product's blocks: one a thread along the same side. Its kernels give
 * every element of C the same sums wherever a block ends (gemm_bf16.c), so the cut may follow the
 * thread count; each block packs its own op(A) and op(B), and blocks of 32 rows packed the
 * 4608 x 256 column matrix of ResNet-18's 512-channel layers 16 times a forward pass, a fifth of
 * its time (tools/bench/resnet_layers.c). */
static void bf16_blocks(ddl__gemm_blocks *p)
{
    int len = p->by_cols ? p->n : p->m, t = ddl__threads(), unit = p->by_cols ? 32 : 8;
    int step = t > 1 ? ((len + t - 1) / t + unit - 1) / unit * unit : len;
    p->step = step;
    p->n_blocks = (len + step - 1) / step;
}

int ddl__gemm_plan(ddl__gemm_blocks *p, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                   int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    *p = (ddl__gemm_blocks){trans_a, trans_b, m, n, k, lda, ldb, ldc, 0, 0, 0, alpha, beta, a, b, c, ddl__invariant(),
                            !ddl__invariant() && ddl__precision() == DDL_PRECISION_BF16};
    if (m <= 0 || n <= 0)
        return 0;
    p->step = m; /* one block: the whole product */
    p->n_blocks = 1;
    /* A weight gradient dy^T x with x the wider: two halves of its columns, so that each thread
     * reads half of x, not all of it, and the next step's writes of x (by sample, on both
     * threads) find half as many lines in the other core's cache (LeNet's fc1 at 2 threads:
     * backward 69 -> 56 us a step, pool2's forward 54 -> 48; lenet_ops, 4 alternated runs) */
    if (k > 0 && (double)m * n * k >= BLOCK_MIN_WORK && trans_a && !trans_b && n >= m && n >= 256 &&
        n < 2 * BLOCK_COLS) {
        p->by_cols = 1;
        p->step = ((n + 1) / 2 + 15) / 16 * 16;
        p->n_blocks = (n + p->step - 1) / p->step;
    } else if (k > 0 && (double)m * n * k >= BLOCK_MIN_WORK && (n >= 2 * BLOCK_COLS || m >= 2 * BLOCK_ROWS)) {
        p->by_cols = n >= 2 * BLOCK_COLS;
        p->step = p->by_cols ? BLOCK_COLS : BLOCK_ROWS;
        int len = p->by_cols ? n : m;
        p->n_blocks = (len + p->step - 1) / p->step;
    }
    if (p->bf16 && p->n_blocks > 1)
        bf16_blocks(p);
    return p->n_blocks;
}

/* gemm_bf16_one: one product in bfloat16 (gemm_bf16.c): every element by the same operations
 * wherever the block lies, as the AVX-512 kernels. */
static void gemm_bf16_one(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                          const float *b, int ldb, float beta, float *c, int ldc)
{
    if (m <= 0 || n <= 0)
        return;
    int overwrite = beta == 0.0f && k > 0 && alpha != 0.0f; /* the kernel writes C whole: no zeroing first */
    if (!overwrite)
        scale_c(m, n, beta, c, ldc);
    ddl__gemm_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, overwrite, c, ldc);
}

typedef void (*one_fn)(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                       const float *b, int ldb, float beta, float *c, int ldc);

void ddl__gemm_block(const ddl__gemm_blocks *p, int t)
{
    one_fn one = p->invariant ? gemm_invariant : p->bf16 ? gemm_bf16_one : gemm_one;
    if (p->n_blocks == 1) {
        if (p->m == 1 && !p->invariant && !p->bf16 && gemm_row(p->trans_a, p->trans_b, p->n, p->k, p->alpha, p->a, p->lda, p->b,
                                                   p->ldb, p->beta, p->c))
            return;
        one(p->trans_a, p->trans_b, p->m, p->n, p->k, p->alpha, p->a, p->lda, p->b, p->ldb, p->beta, p->c, p->ldc);
        return;
    }
    int lo = t * p->step, len = (p->by_cols ? p->n : p->m) - lo;
    if (len > p->step)
        len = p->step;
    if (p->by_cols)
        one(p->trans_a, p->trans_b, p->m, len, p->k, p->alpha, p->a, p->lda,
            p->b + (p->trans_b ? (size_t)lo * p->ldb : (size_t)lo), p->ldb, p->beta, p->c + lo, p->ldc);
    else
        one(p->trans_a, p->trans_b, len, p->n, p->k, p->alpha, p->a + (p->trans_a ? (size_t)lo : (size_t)lo * p->lda),
            p->lda, p->b, p->ldb, p->beta, p->c + (size_t)lo * p->ldc, p->ldc);
}

static void gemm_task(void *ctx, int t) { ddl__gemm_block(ctx, t); }

void ddl_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
              const float *b, int ldb, float beta, float *c, int ldc)
{
    ddl__gemm_blocks p;
    int blocks = ddl__gemm_plan(&p, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (blocks == 1)
        ddl__gemm_block(&p, 0);
    else if (blocks > 1)
        ddl__parallel(blocks, gemm_task, &p);
}

/* ---- a bfloat16 product whose op(A) is packed already (impl.h) ----
 * Cut into one block of C's columns a thread (of 32 columns at least), as bf16_blocks cuts:
 * each block reads all of op(A) packed, none packs it again. */

typedef struct packed_blocks {
    const uint32_t *pa;
    const float *b;
    float *c;
    int trans_b, m, n, k, ldb, ldc, step;
} packed_blocks;

static void packed_task(void *ctx, int t)
{
    const packed_blocks *p = ctx;
    int lo = t * p->step, len = p->n - lo < p->step ? p->n - lo : p->step;
    ddl__gemm_bf16_packed(p->pa, p->trans_b, p->m, len, p->k, 1.0f, p->b + (p->trans_b ? (size_t)lo * p->ldb : (size_t)lo),
                          p->ldb, 1, p->c + lo, p->ldc);
}

void ddl__gemm_packed(const uint32_t *pa, int trans_b, int m, int n, int k, const float *b, int ldb, float *c, int ldc)
{
    if (m <= 0 || n <= 0)
        return;
    if (k <= 0) {
        scale_c(m, n, 0.0f, c, ldc);
        return;
    }
    int t = ddl__threads(), split = t > 1 && (double)m * n * k >= BLOCK_MIN_WORK && n >= 64;
    int step = split ? ((n + t - 1) / t + 31) / 32 * 32 : n;
    packed_blocks p = {pa, b, c, trans_b, m, n, k, ldb, ldc, step};
    int blocks = (n + step - 1) / step;
    if (blocks > 1)
        ddl__parallel(blocks, packed_task, &p);
    else
        packed_task(&p, 0);
}

int ddl_set_threads(int n)
{
    blas_threads();
    return ddl__pool_resize(n);
}
