/* gemm_rate.h - GFLOP/s of one product on an m x n x k shape (packing included, best of reps,
 * random operands), for gemm_amx.c and conv_bf16.c: a bfloat16 kernel of the library's internals
 * (the gemm_fn shape) or, for NULL, float32 ddl_gemm. Include after ddl.h and clock.h. */
#ifndef DDL_BENCH_GEMM_RATE_H
#define DDL_BENCH_GEMM_RATE_H

#include <stdlib.h>

typedef void gemm_fn(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, int overwrite, float *c, int ldc);

static double gemm_rate(gemm_fn *fn, int m, int n, int k, int reps)
{
    float *a = malloc((size_t)m * k * 4), *b = malloc((size_t)k * n * 4), *c = malloc((size_t)m * n * 4);
    for (size_t i = 0; i < (size_t)m * k; i++)
        a[i] = (float)rand() / RAND_MAX;
    for (size_t i = 0; i < (size_t)k * n; i++)
        b[i] = (float)rand() / RAND_MAX;
    double best = 1e9;
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        if (fn)
            fn(0, 0, m, n, k, 1.0f, a, k, b, n, 1, c, n);
        else
            ddl_gemm(0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
        double t = bench_now() - t0;
        best = t < best ? t : best;
    }
    free(a), free(b), free(c);
    return 2.0 * m * n * k / best * 1e-9;
}

#endif
