/* peak.c - one core's float32 multiply-add peak, for a profile's "% of peak": the loop of
 * tools/bench/cores.c (12 independent sums of 16-float vectors, bound by the FMA units, not by
 * memory), in the widest vectors the CPU has, chosen at run time (a clone per ISA), and short:
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

/* where DDL__HOT's clones may be (src/core/impl.h: not under ThreadSanitizer, whose runtime is
 * not up when a clone's resolver runs) */
#ifdef DDL__CLONES
#define PEAK_CLONES __attribute__((target_clones("avx512f", "avx2,fma", "default")))
#else
#define PEAK_CLONES
#endif

/* burn: a slice of multiply-adds on 12 sums kept in registers; its GFLOP/s. The factors come
 * through volatiles (nothing folds) and the sums go to one each round (nothing is left out). */
PEAK_CLONES static double burn(void)
{
    static volatile float mul = 0.9999999f, add = 1e-7f;
    volatile float sink;
    const v16 m = (v16){0} + mul, a = (v16){0} + add;
    v16 s0 = m, s1 = s0 + a, s2 = s1 + a, s3 = s2 + a, s4 = s3 + a, s5 = s4 + a;
    v16 s6 = s5 + a, s7 = s6 + a, s8 = s7 + a, s9 = s8 + a, s10 = s9 + a, s11 = s10 + a;
    int64_t t0 = now_ns(), t;
    long rounds = 0;
    do {
        for (int k = 0; k < INNER; k++) {
            s0 = s0 * m + a, s1 = s1 * m + a, s2 = s2 * m + a, s3 = s3 * m + a;
            s4 = s4 * m + a, s5 = s5 * m + a, s6 = s6 * m + a, s7 = s7 * m + a;
            s8 = s8 * m + a, s9 = s9 * m + a, s10 = s10 * m + a, s11 = s11 * m + a;
        }
        rounds++;
        t = now_ns();
        v16 s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)) + ((s8 + s9) + (s10 + s11));
        sink = s[0] + s[15];
    } while (t - t0 < SLICE_NS);
    (void)sink;
    return (double)rounds * INNER * 12 * 16 * 2 / (double)(t - t0);
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
