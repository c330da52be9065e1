/* gemm_amx.c - the bfloat16 product alone on AMX tiles against AVX512-BF16 and float32, GFLOP/s,
 * best of REPS, on shapes of the cnn preset's convolutions (im2col's: out_c x pixels x in_c*9)
 * and square ones: what amx.sh (BENCH_ONLY=amx) reports. On a CPU without AMX it says
 * "skipped: no AMX" and measures nothing. It calls the kernels directly (internals of
 * build/libddl.a); by hand: cc -O2 -I. tools/bench/gemm_amx.c build/libddl.a and make's LDLIBS. */
#include "ddl.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"
#include "gemm_rate.h"

gemm_fn ddl__gemm_bf16_amx, ddl__gemm_bf16_avx512;
int ddl__gemm_bf16_amx_have(void);
int ddl__gemm_bf16_avx512_have(void);
int ddl__gemm_bf16_amx_check(char *note, size_t note_bytes);

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
        double amx = gemm_rate(ddl__gemm_bf16_amx, m, n, k, reps);
        double bf = avx ? gemm_rate(ddl__gemm_bf16_avx512, m, n, k, reps) : 0.0;
        double f32 = gemm_rate(NULL, m, n, k, reps);
        printf("gemm_amx: m=%d n=%d k=%d amx_gflops=%.1f avx512bf16_gflops=%.1f fp32_gflops=%.1f amx_over_fp32=%.2f\n",
               m, n, k, amx, bf, f32, amx / f32);
    }
    return 0;
}
