/* test_gemm_bf16.c - the bfloat16 products of --precision bf16 (gemm_bf16.c): the rounding on
 * chosen values (ties to even, subnormals, NaN, overflow); the AVX512-BF16 kernel against the
 * scalar reference, bit for bit, on sizes that are not multiples of its tiles (m, n, k odd, a
 * slice and a half of k, more rows than a packed block), all four transposes (conv's backward
 * uses A B^T and A^T B), alpha, C overwritten (not read: NaN there), wider leading dimensions,
 * nothing written outside C, sums small
 * enough to be flushed; ddl_gemm in bf16 precision giving the reference's bits, the same at 1
 * and 2 threads, close to float32 but not equal to it. Where the CPU has no AVX512-BF16 the
 * kernel's part prints "skipped: no AVX512-BF16" and the rest runs. AMX, whose order of sums is
 * its own: tests/test_gemm_bf16_amx.c (ddl_gemm's check here takes the AMX reference there). */
/* ddl-test: beside (computes, bounds no time) */
#include "ddl.h"
#include "check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_case.h"

/* internal (gemm_bf16.c, pool.c) */
uint16_t ddl__bf16_round(float x);
float ddl__bf16_float(uint16_t h);
int ddl__bf16_path(void);
int ddl__gemm_bf16_avx512_have(void);
int ddl__set_precision(int precision);
void ddl__gemm_bf16_ref(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                        const float *b, int ldb, int overwrite, float *c, int ldc);
void ddl__gemm_bf16_amx_ref(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                            const float *b, int ldb, int overwrite, float *c, int ldc);
void ddl__gemm_bf16_avx512(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                           const float *b, int ldb, int overwrite, float *c, int ldc);

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_round(void)
{
    CHECK(ddl__bf16_round(1.0f) == 0x3f80);
    CHECK(ddl__bf16_round(from_bits(0x3f808000u)) == 0x3f80); /* a tie: to the even 0x3f80 */
    CHECK(ddl__bf16_round(from_bits(0x3f818000u)) == 0x3f82); /* a tie: to the even 0x3f82 */
    CHECK(ddl__bf16_round(from_bits(0x3f808001u)) == 0x3f81); /* past the tie: up */
    CHECK(ddl__bf16_round(-3.14159274f) == 0xc049);
    CHECK(ddl__bf16_round(from_bits(0x00400000u)) == 0x0000); /* subnormal: zero */
    CHECK(ddl__bf16_round(from_bits(0x80400000u)) == 0x8000); /* of its sign */
    CHECK(ddl__bf16_round(from_bits(0x7f7fffffu)) == 0x7f80); /* the largest float rounds to infinity */
    CHECK(ddl__bf16_round(from_bits(0xff800000u)) == 0xff80);
    CHECK(ddl__bf16_round(from_bits(0x7f800001u)) == 0x7fc0); /* a signalling NaN made quiet */
    CHECK(ddl__bf16_float(0x3f80) == 1.0f && ddl__bf16_float(0xc000) == -2.0f);
}

static void test_kernel(void)
{
    static const int sizes[][3] = {{1, 1, 1},    {1, 33, 3},    {7, 15, 17},  {8, 16, 2},   {9, 17, 255},
                                   {17, 31, 256}, {13, 65, 257}, {130, 33, 19}, {3, 100, 513}, {64, 40, 300},
                                   {33, 1, 600},  {6, 47, 25},   {10, 120, 401}, {300, 600, 40}};
    int n = 0, bad = sweep(ddl__gemm_bf16_ref, ddl__gemm_bf16_avx512, sizes, sizeof sizes / sizeof sizes[0], 21, &n);
    CHECK(bad == 0);
    printf("AVX512-BF16 kernel against the reference: %d cases, %d differ\n", n, bad);
}

/* test_ddl_gemm: ddl_gemm in bf16 precision is the reference's product, the same at 1 and 2
 * threads (a product large enough to be cut into blocks), near float32's but not its bits. */
static void test_ddl_gemm(void)
{
    int m = 40, n = 1500, k = 300;
    size_t nc = (size_t)m * n;
    float *a = malloc((size_t)m * k * sizeof *a), *b = malloc((size_t)k * n * sizeof *b);
    float *ref = calloc(nc, sizeof *ref), *c1 = malloc(nc * sizeof *c1), *c2 = malloc(nc * sizeof *c2);
    float *f32 = malloc(nc * sizeof *f32);
    ddl_rng r;
    ddl_rng_seed(&r, 11);
    fill(&r, a, (size_t)m * k, 1.0f);
    fill(&r, b, (size_t)k * n, 1.0f);
    if (ddl__bf16_path() == 2) /* AMX: its own order (tests/test_gemm_bf16_amx.c) */
        ddl__gemm_bf16_amx_ref(0, 0, m, n, k, 1.0f, a, k, b, n, 0, ref, n);
    else
        ddl__gemm_bf16_ref(0, 0, m, n, k, 1.0f, a, k, b, n, 0, ref, n);
    ddl_gemm(0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, f32, n);
    int was = ddl__set_precision(DDL_PRECISION_BF16);
    ddl_set_threads(1);
    ddl_gemm(0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, c1, n);
    ddl_set_threads(2);
    ddl_gemm(0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, c2, n);
    ddl_set_threads(1);
    ddl__set_precision(was);
    CHECK(memcmp(c1, ref, nc * sizeof *c1) == 0);
    CHECK(memcmp(c1, c2, nc * sizeof *c1) == 0);
    double worst = 0.0;
    int differ = 0;
    for (size_t e = 0; e < nc; e++) {
        double d = fabs((double)c1[e] - f32[e]);
        worst = d > worst ? d : worst;
        differ += c1[e] != f32[e];
    }
    /* bfloat16 keeps 8 significant bits: each product off by up to ~2^-8 relative, 300 of them
     * of size ~1/3 in random directions: errors of ~0.02 */
    CHECK(worst < 0.1 && worst > 1e-4);
    CHECK(differ > (int)(nc / 2));
    printf("ddl_gemm bf16 against float32: largest difference %.4g, %d of %zu elements differ\n", worst, differ, nc);
    free(a), free(b), free(ref), free(c1), free(c2), free(f32);
}

int main(void)
{
    test_round();
    if (ddl__gemm_bf16_avx512_have() && ddl__bf16_path() != 0) {
        test_kernel();
        test_ddl_gemm();
    } else {
        printf("skipped: no AVX512-BF16 (the kernel and ddl_gemm's bf16 path)\n");
    }
    return TEST_END();
}
