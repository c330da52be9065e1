/* gemm_amx.c - the bfloat16 product alone on AMX tiles against AVX512-BF16 and float32, GFLOP/s,
 * best of REPS, on shapes of the cnn preset's convolutions (im2col's: out_c x pixels x in_c*9)
 * and square ones: what amx.sh (BENCH_ONLY=amx) reports. On a CPU without AMX it says
 * "skipped: no AMX" and measures nothing. It calls the kernels directly (internals of
 * build/libddl.a); by hand: cc -O2 -I. tools/bench/gemm_amx.c build/libddl.a and make's LDLIBS. */
#include "ddl.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef void gemm_fn(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, int overwrite, float *c, int ldc);
gemm_fn ddl__gemm_bf16_amx, ddl__gemm_bf16_avx512;
int ddl__gemm_bf16_amx_have(void);
int ddl__gemm_bf16_avx512_have(void);
int ddl__gemm_bf16_amx_check(char *note, size_t note_bytes);

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* rate: GFLOP/s of fn (NULL: float32 ddl_gemm) on m x n x k, packing included, best of reps. */
static double rate(gemm_fn *fn, int m, int n, int k, int reps)
{
    float *a = malloc((size_t)m * k * 4), *b = malloc((size_t)k * n * 4), *c = malloc((size_t)m * n * 4);
    for (size_t i = 0; i < (size_t)m * k; i++)
        a[i] = (float)rand() / RAND_MAX;
    for (size_t i = 0; i < (size_t)k * n; i++)
        b[i] = (float)rand() / RAND_MAX;
    double best = 1e9;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        if (fn)
            fn(0, 0, m, n, k, 1.0f, a, k, b, n, 1, c, n);
        else
            ddl_gemm(0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
        double t = now() - t0;
        best = t < best ? t : best;
    }
    free(a), free(b), free(c);
    return 2.0 * m * n * k / best * 1e-9;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    char note[200];
    if (!ddl__gemm_bf16_amx_have()) {
        printf("skipped: no AMX\n");
        return 0;
    }
    if (ddl__gemm_bf16_amx_check(note, sizeof note) != DDL_OK) /* measured all the same: say so */
        printf("warning: %s\n", note);
    static const int shapes[][3] = {{16, 4096, 27},  {16, 4096, 144}, {32, 1024, 144}, {32, 1024, 288},
                                    {64, 256, 288},  {64, 256, 576},  {256, 256, 256}, {1024, 1024, 1024}};
    int avx = ddl__gemm_bf16_avx512_have();
    for (int s = 0; s < 8; s++) {
        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        double amx = rate(ddl__gemm_bf16_amx, m, n, k, reps);
        double bf = avx ? rate(ddl__gemm_bf16_avx512, m, n, k, reps) : 0.0, f32 = rate(NULL, m, n, k, reps);
        printf("gemm_amx: m=%d n=%d k=%d amx_gflops=%.1f avx512bf16_gflops=%.1f fp32_gflops=%.1f amx_over_fp32=%.2f\n",
               m, n, k, amx, bf, f32, amx / f32);
    }
    return 0;
}
