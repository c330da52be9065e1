/* test_gemm_packed.c - op(A) packed once for many products (a convolution's weights in a
 * bfloat16 pass: gemm_bf16.c, conv.c): for each path this CPU can run, the product reading op(A)
 * packed whole gives the bits of the product that packs it on the way, on the shapes and
 * transposes of the products' own tests (blocks of rows past the first, slices of k past the
 * first, ragged edges), and the packing writes nothing past the room _packed_words gives; the
 * AVX512-BF16 loop and the AMX loop (AVX-512 packing, emulated tiles). ddl__gemm_packed, as
 * conv.c calls it, against ddl__gemm_bf16 at 1 and 2 threads. Where the CPU has no AVX512-BF16
 * it prints "skipped: no AVX512-BF16". */
/* ddl-test: beside (computes, bounds no time) */
#include "ddl.h"
#include "check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_case.h"

/* internal (gemm_bf16.c, gemm_bf16_avx512.c, gemm_bf16_amx.c, gemm.c) */
typedef void packed_fn(const uint32_t *pa, int trans_b, int m, int n, int k, float alpha, const float *b, int ldb,
                       int overwrite, float *c, int ldc);
int ddl__gemm_bf16_avx512_have(void);
int ddl__set_precision(int precision);
gemm_fn ddl__gemm_bf16, ddl__gemm_bf16_avx512, ddl__gemm_bf16_amx_emu_avx512;
packed_fn ddl__gemm_bf16_avx512_packed, ddl__gemm_bf16_amx_emu_avx512_packed;
size_t ddl__gemm_bf16_avx512_packed_words(int m, int k);
size_t ddl__gemm_bf16_amx_packed_words(int m, int k);
size_t ddl__gemm_bf16_packed_words(int m, int k);
void ddl__gemm_bf16_avx512_pack(int trans_a, int m, int k, const float *a, int lda, uint32_t *pa);
void ddl__gemm_bf16_amx_pack(int trans_a, int m, int k, const float *a, int lda, uint32_t *pa);
void ddl__gemm_bf16_pack(int trans_a, int m, int k, const float *a, int lda, uint32_t *pa);
void ddl__gemm_packed(const uint32_t *pa, int trans_b, int m, int n, int k, const float *b, int ldb, float *c, int ldc);

#define GUARD 64
static const uint32_t CANARY = 0xdeadbeefu;
static int overran; /* a packing wrote past its room */

/* the path under test: its room, its packing, its product from the packed op(A) */
static size_t (*words_of)(int m, int k);
static void (*pack_of)(int trans_a, int m, int k, const float *a, int lda, uint32_t *pa);
static packed_fn *product_of;

/* via_pack: a gemm_fn that packs op(A) whole, checks the guard band past its room, then runs the
 * product from it */
static void via_pack(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, int overwrite, float *c, int ldc)
{
    size_t words = words_of(m, k);
    uint32_t *pa = malloc((words + GUARD) * sizeof *pa);
    for (int i = 0; i < GUARD; i++)
        pa[words + i] = CANARY;
    pack_of(trans_a, m, k, a, lda, pa);
    for (int i = 0; i < GUARD; i++)
        overran += pa[words + i] != CANARY;
    product_of(pa, trans_b, m, n, k, alpha, b, ldb, overwrite, c, ldc);
    free(pa);
}

static int cases(gemm_fn *want, int *n_cases)
{
    static const int sizes[][3] = {{1, 1, 1},     {1, 33, 3},     {7, 15, 17},   {16, 16, 32}, {17, 31, 33},
                                   {9, 17, 255},  {31, 33, 256},  {13, 65, 257}, {33, 1, 600}, {130, 40, 19},
                                   {3, 100, 513}, {200, 70, 301}, {6, 47, 25},   {300, 600, 40}, {257, 9, 520}};
    return sweep(want, via_pack, sizes, sizeof sizes / sizeof sizes[0], 45, n_cases);
}

static void test_path(const char *name, gemm_fn *want, size_t (*words)(int, int),
                      void (*pack)(int, int, int, const float *, int, uint32_t *), packed_fn *product)
{
    words_of = words, pack_of = pack, product_of = product, overran = 0;
    int n = 0, bad = cases(want, &n);
    CHECK(n > 150 && bad == 0);
    CHECK(overran == 0);
    printf("%s: op(A) packed once against packed on the way: %d cases, %d differ, %d words written past the room\n",
           name, n, bad, overran);
}

/* test_conv_call: ddl__gemm_packed (C = op(A) op(B), over the threads) against ddl__gemm_bf16 on
 * a forward pass's shape and an input gradient's (op(A) transposed), at 1 and 2 threads */
static void test_conv_call(void)
{
    static const int shapes[][4] = {{64, 600, 576, 0}, {576, 512, 64, 1}, {130, 1100, 300, 0}};
    ddl_rng r;
    ddl_rng_seed(&r, 11);
    ddl__set_precision(DDL_PRECISION_BF16);
    int bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], ta = shapes[s][3];
        float *a = malloc((size_t)m * k * sizeof *a), *b = malloc((size_t)k * n * sizeof *b);
        float *want = malloc((size_t)m * n * sizeof *want), *got = malloc((size_t)m * n * sizeof *got);
        uint32_t *pa = malloc(ddl__gemm_bf16_packed_words(m, k) * sizeof *pa);
        fill(&r, a, (size_t)m * k, 1.0f);
        fill(&r, b, (size_t)k * n, 1.0f);
        ddl__gemm_bf16(ta, 0, m, n, k, 1.0f, a, ta ? m : k, b, n, 1, want, n);
        ddl__gemm_bf16_pack(ta, m, k, a, ta ? m : k, pa);
        for (int t = 1; t <= 2; t++) {
            ddl_set_threads(t);
            for (size_t e = 0; e < (size_t)m * n; e++)
                got[e] = NAN;
            ddl__gemm_packed(pa, 0, m, n, k, b, n, got, n);
            bad += memcmp(want, got, (size_t)m * n * sizeof *got) != 0;
        }
        free(a), free(b), free(want), free(got), free(pa);
    }
    ddl_set_threads(1);
    ddl__set_precision(DDL_PRECISION_FP32);
    CHECK(bad == 0);
    printf("ddl__gemm_packed against ddl__gemm_bf16, 3 shapes at 1 and 2 threads: %d differ\n", bad);
}

int main(void)
{
    if (!ddl__gemm_bf16_avx512_have()) {
        printf("skipped: no AVX512-BF16 (the packed products)\n");
        return TEST_END();
    }
    test_path("AVX512-BF16", ddl__gemm_bf16_avx512, ddl__gemm_bf16_avx512_packed_words, ddl__gemm_bf16_avx512_pack,
              ddl__gemm_bf16_avx512_packed);
    test_path("AMX loop (emulated tiles)", ddl__gemm_bf16_amx_emu_avx512, ddl__gemm_bf16_amx_packed_words,
              ddl__gemm_bf16_amx_pack, ddl__gemm_bf16_amx_emu_avx512_packed);
    test_conv_call();
    return TEST_END();
}
