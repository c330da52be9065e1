/* gemm_case.h - one case of a bfloat16 product against another, bit for bit, for
 * test_gemm_bf16.c (the AVX512-BF16 kernel against its reference) and test_gemm_bf16_amx.c (the
 * AMX loop against its own): random operands with wider leading dimensions, C over a guard band,
 * and with overwrite, NaN in C that must not be read; and the sweep of shapes both run. */
#ifndef DDL_TESTS_GEMM_CASE_H
#define DDL_TESTS_GEMM_CASE_H

#include "ddl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void gemm_fn(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, int overwrite, float *c, int ldc);

static void fill(ddl_rng *r, float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = scale * (2.0f * ddl_rng_uniform(r) - 1.0f);
}

/* one_case: want against got on op(A) (m, k) op(B) (k, n), C (m, n) of row stride n + 3 over a
 * guard band; 1 if the bits agree and nothing outside C moved. */
static int one_case(gemm_fn *want, gemm_fn *got, ddl_rng *r, int ta, int tb, int m, int n, int k, float alpha,
                    float scale, float c_scale, int overwrite)
{
    int lda = (ta ? m : k) + 2, ldb = (tb ? k : n) + 1, ldc = n + 3;
    size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? n : k) * ldb, nc = (size_t)m * ldc + 8;
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b);
    float *c1 = malloc(nc * sizeof *c1), *c2 = malloc(nc * sizeof *c2);
    fill(r, a, na, scale);
    fill(r, b, nb, scale);
    fill(r, c1, nc, c_scale);
    memcpy(c2, c1, nc * sizeof *c1);
    if (overwrite) /* the kernel must not read C: NaN there would stay */
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                c2[(size_t)i * ldc + j] = NAN;
    want(ta, tb, m, n, k, alpha, a, lda, b, ldb, overwrite, c1, ldc);
    got(ta, tb, m, n, k, alpha, a, lda, b, ldb, overwrite, c2, ldc);
    int same = memcmp(c1, c2, nc * sizeof *c1) == 0;
    if (!same)
        for (size_t e = 0; e < nc; e++)
            if (memcmp(&c1[e], &c2[e], sizeof *c1) != 0) {
                fprintf(stderr, "ta %d tb %d m %d n %d k %d: element %zu (row %zu col %zu): want %.9g got %.9g\n", ta,
                        tb, m, n, k, e, e / ldc, e % ldc, c1[e], c2[e]);
                break;
            }
    free(a), free(b), free(c1), free(c2);
    return same;
}

/* sweep: want against got on every shape of sizes (m, n, k), each transpose and alpha 1, 0.5 and
 * C overwritten; then products near the smallest normal floats into a zero C (which would hide
 * them), m 9, n 19, k tiny_k: sums that fall subnormal are flushed to zero. Returns the cases
 * that differ; *n_cases gets how many ran. Operands from seed 7. */
static int sweep(gemm_fn *want, gemm_fn *got, const int (*sizes)[3], size_t n_sizes, int tiny_k, int *n_cases)
{
    ddl_rng r;
    ddl_rng_seed(&r, 7);
    int bad = 0, n = 0;
    for (size_t s = 0; s < n_sizes; s++)
        for (int t = 0; t < 4; t++)
            for (int al = 0; al < 3; al++, n++)
                bad += !one_case(want, got, &r, t >> 1, t & 1, sizes[s][0], sizes[s][1], sizes[s][2],
                                 al == 1 ? 0.5f : 1.0f, 1.0f, 1.0f, al == 2);
    for (int t = 0; t < 4; t++, n++)
        bad += !one_case(want, got, &r, t >> 1, t & 1, 9, 19, tiny_k, 1.0f, 1.5e-19f, 0.0f, 0);
    *n_cases = n;
    return bad;
}

#endif
