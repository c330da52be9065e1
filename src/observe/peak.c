/* peak.c - one core's float32 multiply-add peak, for a profile's "% of peak": the loop of
 * tools/bench/cores.c (12 independent sums of vectors, bound by the FMA units, not by memory), in
 * the widest vectors the CPU has, chosen at run time (a build per ISA), and short:
 * the best of four slices of 20 ms, so a trainer can measure it at start. Runs on the calling
 * thread; allocates nothing, keeps no state. */
#include "impl.h"

#include <time.h>

#define SLICE_NS 20000000 /* 20 ms a slice */
#define SLICES 4
#define INNER 1024 /* multiply-adds of each sum between clock reads */

typedef float v16 __attribute__((vector_size(64)));

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* BURN: a function NAME that runs a slice of multiply-adds on 12 sums of vectors of LANES floats,
 * kept in registers; its GFLOP/s. The factors come through volatiles (nothing folds) and the sums
 * go to one each round (nothing is left out). The vectors are the registers' width: 12 sums of 16
 * floats built for AVX2 (16 registers of 8) went to the stack, and the loop read 6.7 GFLOP/s on
 * an AMD EPYC (Zen 3) that runs 100 in 8-float vectors. */
#define BURN(NAME, LANES, ATTR)                                                                           \
    ATTR static double NAME(void)                                                                         \
    {                                                                                                     \
        typedef float vec __attribute__((vector_size(LANES * 4)));                                        \
        static volatile float mul = 0.9999999f, add = 1e-7f;                                              \
        volatile float sink;                                                                              \
        const vec m = (vec){0} + mul, a = (vec){0} + add;                                                 \
        vec s0 = m, s1 = s0 + a, s2 = s1 + a, s3 = s2 + a, s4 = s3 + a, s5 = s4 + a;                      \
        vec s6 = s5 + a, s7 = s6 + a, s8 = s7 + a, s9 = s8 + a, s10 = s9 + a, s11 = s10 + a;              \
        int64_t t0 = now_ns(), t;                                                                         \
        long rounds = 0;                                                                                  \
        do {                                                                                              \
            for (int k = 0; k < INNER; k++) {                                                             \
                s0 = s0 * m + a, s1 = s1 * m + a, s2 = s2 * m + a, s3 = s3 * m + a;                       \
                s4 = s4 * m + a, s5 = s5 * m + a, s6 = s6 * m + a, s7 = s7 * m + a;                       \
                s8 = s8 * m + a, s9 = s9 * m + a, s10 = s10 * m + a, s11 = s11 * m + a;                   \
            }                                                                                             \
            rounds++;                                                                                     \
            t = now_ns();                                                                                 \
            vec s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)) + ((s8 + s9) + (s10 + s11));        \
            sink = s[0] + s[LANES - 1];                                                                   \
        } while (t - t0 < SLICE_NS);                                                                      \
        (void)sink;                                                                                       \
        return (double)rounds * INNER * 12 * LANES * 2 / (double)(t - t0);                                \
    }

/* where the target builds may be (src/core/impl.h: as DDL__HOT's clones) */
#ifdef DDL__CLONES
BURN(burn_avx512, 16, __attribute__((target("avx512f"), optimize("fp-contract=fast"))))
BURN(burn_avx2, 8, __attribute__((target("avx2,fma"), optimize("fp-contract=fast"))))
#endif
BURN(burn_sse, 4, )

static double burn(void)
{
#ifdef DDL__CLONES
    if (__builtin_cpu_supports("avx512f"))
        return burn_avx512();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return burn_avx2();
#endif
    return burn_sse();
}

static const char *isa(void)
{
#ifdef DDL__CLONES
    if (__builtin_cpu_supports("avx512f"))
        return "avx512";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "avx2";
#endif
    return "scalar";
}

double ddl_cpu_peak_gflops(const char **which)
{
    double best = 0.0;
    for (int i = 0; i < SLICES; i++) { /* the first slices also wake the vector units up */
        double g = burn();
        best = g > best ? g : best;
    }
    if (which)
        *which = isa();
    return best;
}
