/* gemm_bf16.c - the bfloat16 products of ddl_train_config.precision = DDL_PRECISION_BF16: which
 * path this CPU has (read once), the rounding, and a scalar reference that every vector path
 * must match bit for bit (tests/test_gemm_bf16.c). The kernels are in files of their own
 * (gemm_bf16_avx512.c); gemm.c sends a product here when the calling thread's precision
 * (ddl__set_precision, carried by the pool to its tasks as the invariant mode is) says bf16.
 *
 * What a product computes, on every path: C += alpha op(A) op(B) with each element of A and B
 * first rounded to bfloat16 (ddl__bf16_round), the products taken exactly (two bfloat16
 * significands fit a float's; a product below float's range too), and summed in float32 in this
 * order: k in slices of DDL__BF16_KC from 0; in a slice, an accumulator from +0 takes the pairs
 * (p, p + 1) of even p in order, the odd term first, then the even one, each added with one
 * rounding to nearest even (as fmaf) and a subnormal sum flushed to zero (what vdpbf16ps does
 * on AMD Zen 4, tested bit for bit; a missing last term is 0); then C = fmaf(alpha, acc, C).
 * Nothing here allocates. */
#include "impl.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- rounding ---- */

uint16_t ddl__bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) == 0) /* zero or subnormal: a zero of the same sign (the instruction's DAZ) */
        return (uint16_t)((u >> 16) & 0x8000u);
    if ((u & 0x7f800000u) == 0x7f800000u) /* infinity; NaN stays NaN, made quiet */
        return (uint16_t)((u >> 16) | ((u & 0x007fffffu) ? 0x0040u : 0u));
    u += 0x7fffu + ((u >> 16) & 1u); /* to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

float ddl__bf16_float(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float ddl__bf16_ftz(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    if ((u & 0x7f800000u) == 0)
        u &= 0x80000000u;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* ---- the kernels' blocking ---- */

int ddl__bf16_b_first(int m, int n, int mc, int nc)
{
    double a_first = (double)m + (double)n * ((m + mc - 1) / mc), b_first = (double)n + (double)m * ((n + nc - 1) / nc);
    return b_first < a_first;
}

/* ---- the reference ---- */

/* term: element (row, col) of op(x), rounded to bfloat16 as the kernels' packing rounds it. */
static float term(int trans, const float *x, int ld, int row, int col)
{
    return ddl__bf16_float(ddl__bf16_round(trans ? x[(size_t)col * ld + row] : x[(size_t)row * ld + col]));
}

void ddl__gemm_bf16_ref(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                        const float *b, int ldb, int overwrite, float *c, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float *cij = c + (size_t)i * ldc + j;
            if (overwrite)
                *cij = 0.0f;
            for (int p0 = 0; p0 < k; p0 += DDL__BF16_KC) {
                int end = k - p0 < DDL__BF16_KC ? k : p0 + DDL__BF16_KC;
                float acc = 0.0f;
                for (int p = p0; p < end; p += 2) {
                    float a0 = term(trans_a, a, lda, i, p);
                    float b0 = term(trans_b, b, ldb, p, j);
                    float a1 = 0.0f, b1 = 0.0f;
                    if (p + 1 < end) {
                        a1 = term(trans_a, a, lda, i, p + 1);
                        b1 = term(trans_b, b, ldb, p + 1, j);
                    }
                    /* a product is exact, even below float's range: one rounding, as fmaf's */
                    acc = ddl__bf16_ftz(fmaf(a1, b1, acc));
                    acc = ddl__bf16_ftz(fmaf(a0, b0, acc));
                }
                *cij = fmaf(alpha, acc, *cij);
            }
        }
}

/* ---- the reference of the AMX path ---- */

/* The AMX path (gemm_bf16_amx.c) sums in tdpbf16ps's order, which is not the one above: k in
 * slices of DDL__BF16_KC from 0; in a slice, blocks of 16 pairs (a tile's depth) from p0; in a
 * block, two accumulators from +0 take the even and the odd terms of each pair (p, p + 1) in
 * order (missing terms 0), each an fmaf flushed as above; their sum, so rounded and flushed, is
 * added to the slice's sum (from +0, flushed); then C = fmaf(alpha, sum, C). */
void ddl__gemm_bf16_amx_ref(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                            const float *b, int ldb, int overwrite, float *c, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float *cij = c + (size_t)i * ldc + j;
            if (overwrite)
                *cij = 0.0f;
            for (int p0 = 0; p0 < k; p0 += DDL__BF16_KC) {
                int end = k - p0 < DDL__BF16_KC ? k : p0 + DDL__BF16_KC;
                float sum = 0.0f;
                for (int b0 = p0; b0 < end; b0 += 32) {
                    float even = 0.0f, odd = 0.0f;
                    for (int p = b0; p < b0 + 32; p += 2) {
                        float a0 = 0.0f, bv0 = 0.0f, a1 = 0.0f, bv1 = 0.0f;
                        if (p < end) {
                            a0 = term(trans_a, a, lda, i, p);
                            bv0 = term(trans_b, b, ldb, p, j);
                        }
                        if (p + 1 < end) {
                            a1 = term(trans_a, a, lda, i, p + 1);
                            bv1 = term(trans_b, b, ldb, p + 1, j);
                        }
                        even = ddl__bf16_ftz(fmaf(a0, bv0, even));
                        odd = ddl__bf16_ftz(fmaf(a1, bv1, odd));
                    }
                    sum = ddl__bf16_ftz(sum + ddl__bf16_ftz(even + odd));
                }
                *cij = fmaf(alpha, sum, *cij);
            }
        }
}

/* ---- which path ---- */

/* DDL_CPU_NO_BF16=1 hides every bfloat16 path (a CPU without one: tests of the refusal), and
 * DDL_CPU_NO_AMX=1 hides AMX alone; both are read once, at the first question. */
static int env_on(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

static int path_now = DDL__BF16_NONE;
static char path_note[200]; /* ddl__bf16_path_note: written once, before path_now is read */

int ddl__bf16_choose(int no_bf16, int no_amx, int amx, int (*amx_check)(char *, size_t), int avx512, char *note,
                     size_t note_bytes)
{
    if (note_bytes)
        note[0] = 0;
    if (no_bf16)
        return DDL__BF16_NONE;
    if (amx && no_amx)
        snprintf(note, note_bytes, "AMX hidden by DDL_CPU_NO_AMX");
    else if (amx && amx_check(note, note_bytes) == DDL_OK)
        return DDL__BF16_AMX;
    return avx512 ? DDL__BF16_AVX512 : DDL__BF16_NONE;
}

/* detect: this CPU's choice, the environment read once (the AMX check runs once, on real tiles). */
static void detect(void)
{
    int no_bf16 = env_on("DDL_CPU_NO_BF16"), no_amx = env_on("DDL_CPU_NO_AMX");
    int amx = !no_bf16 && ddl__gemm_bf16_amx_have(); /* asks Linux for the tile state: only if it may be used */
    path_now = ddl__bf16_choose(no_bf16, no_amx, amx, ddl__gemm_bf16_amx_check, ddl__gemm_bf16_avx512_have(),
                                path_note, sizeof path_note);
#ifdef DDL_AMX_FREE_TILES /* gemm_bf16_amx.c: the AMX loop with tiles that cost nothing, to measure */
    if (path_now != DDL__BF16_NONE) {
        path_now = DDL__BF16_AMX;
        snprintf(path_note, sizeof path_note, "a DDL_AMX_FREE_TILES build: AMX's loop, tiles that do nothing (wrong results)");
    }
#endif
}

int ddl__bf16_path(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT; /* every thread sees one choice and one check */
    pthread_once(&once, detect);
    return path_now;
}

const char *ddl__bf16_path_note(void)
{
    (void)ddl__bf16_path();
    return path_note;
}

const char *ddl_cpu_bf16(void) { return ddl__bf16_path_name(ddl__bf16_path()); }

const char *ddl_cpu_bf16_note(void) { return ddl__bf16_path_note(); }

const char *ddl__bf16_path_name(int path)
{
    switch (path) {
    case DDL__BF16_AVX512: return "AVX512-BF16";
    case DDL__BF16_AMX: return "AMX";
    default: return "none";
    }
}

void ddl__gemm_bf16(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                    const float *b, int ldb, int overwrite, float *c, int ldc)
{
    if (m <= 0 || n <= 0 || k <= 0 || alpha == 0.0f)
        return;
    int path = ddl__bf16_path();
#ifdef DDL_AMX_FREE_TILES
    if (path == DDL__BF16_AMX)
        ddl__gemm_bf16_amx_free(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, overwrite, c, ldc);
    else
#endif
    if (path == DDL__BF16_AMX)
        ddl__gemm_bf16_amx(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, overwrite, c, ldc);
    else if (path == DDL__BF16_AVX512)
        ddl__gemm_bf16_avx512(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, overwrite, c, ldc);
    else /* not reached in training: the trainer refuses bf16 on such a CPU */
        ddl__gemm_bf16_ref(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, overwrite, c, ldc);
}

/* ---- op(A) packed once (impl.h) ---- */

size_t ddl__bf16_a_at(int m, int p0, int i0, int kc, int mc, size_t (*block_words)(int rows, int kc))
{
    size_t slice = (size_t)(m / mc) * block_words(mc, DDL__BF16_KC) + (m % mc ? block_words(m % mc, DDL__BF16_KC) : 0);
    return (size_t)(p0 / DDL__BF16_KC) * slice + (size_t)(i0 / mc) * block_words(mc, kc);
}

size_t ddl__bf16_a_words(int m, int k, int mc, size_t (*block_words)(int rows, int kc))
{
    if (m <= 0 || k <= 0)
        return 0;
    int p0 = (k - 1) / DDL__BF16_KC * DDL__BF16_KC, kc = k - p0, full = m / mc * mc;
    return ddl__bf16_a_at(m, p0, full, kc, mc, block_words) + (m % mc ? block_words(m % mc, kc) : 0);
}

size_t ddl__gemm_bf16_packed_words(int m, int k)
{
    int path = ddl__bf16_path();
    return path == DDL__BF16_AMX      ? ddl__gemm_bf16_amx_packed_words(m, k)
           : path == DDL__BF16_AVX512 ? ddl__gemm_bf16_avx512_packed_words(m, k)
                                      : 0;
}

void ddl__gemm_bf16_pack(int trans_a, int m, int k, const float *a, int lda, uint32_t *pa)
{
    int path = ddl__bf16_path();
    if (path == DDL__BF16_AMX)
        ddl__gemm_bf16_amx_pack(trans_a, m, k, a, lda, pa);
    else if (path == DDL__BF16_AVX512)
        ddl__gemm_bf16_avx512_pack(trans_a, m, k, a, lda, pa);
}

void ddl__gemm_bf16_packed(const uint32_t *pa, int trans_b, int m, int n, int k, float alpha, const float *b, int ldb,
                           int overwrite, float *c, int ldc)
{
    if (m <= 0 || n <= 0 || k <= 0 || alpha == 0.0f)
        return;
    int path = ddl__bf16_path();
    if (path == DDL__BF16_AMX)
        ddl__gemm_bf16_amx_packed(pa, trans_b, m, n, k, alpha, b, ldb, overwrite, c, ldc);
    else if (path == DDL__BF16_AVX512)
        ddl__gemm_bf16_avx512_packed(pa, trans_b, m, n, k, alpha, b, ldb, overwrite, c, ldc);
}
