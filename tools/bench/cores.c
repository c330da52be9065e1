/* cores.c - what the cores of this machine can do right now, for make bench: the 2-thread and
 * 2-rank figures are only as good as the second core. On shared virtual machines a core can run
 * at half the speed of the other for minutes (a busy neighbour on its physical core), so a
 * speedup of 1.5x may be all the machine had to give.
 *
 * A multiply-add loop (the widest vectors the CPU has, 12 independent sums: bound by the core's FMA units, not
 * memory) runs SLICE_MS pinned to each core alone, then on every core at once; ROUNDS rounds,
 * medians; then the same for reading 64 MiB per core (stream); then the hand-off: the first core
 * writes 1 MiB, and it or the second core reads it back (what a kernel pays when its input was
 * written by the other thread). Prints one line:
 *   cores: n=2 alone=A0,A1 together=T0,T1 gflops ceiling=C mem_alone=.. mem_together=.. gbs mem_ceiling=M
 *          handoff_local=L handoff_remote=R gbs
 * where ceiling = (T0 + T1 + ...) / mean(A): the speedup that perfectly parallel compute-bound
 * work could get from all cores over one; mem_ceiling the same for memory-bound work; L and R
 * the read rates of 1 MiB just written by the same core and by another.
 * Usage: cores [ROUNDS] (default 5). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CPUS 16
#define SLICE_MS 150
#define INNER 4096 /* multiply-adds of each sum between clock reads */

typedef float v16 __attribute__((vector_size(64)));

static double median(double *v, int n);

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* BURN: NAME, SLICE_MS of multiply-adds on 12 sums of LANES-float vectors kept in registers;
 * returns GFLOP/s. The vectors are the registers' width: 12 sums of 16 floats built for AVX2 (16
 * registers of 8) went to the stack, and the loop read 6.7 GFLOP/s on an AMD EPYC (Zen 3) that
 * runs 100 in 8-float vectors. */
#define BURN(NAME, LANES, ATTR)                                                                           \
    ATTR static double NAME(void)                                                                         \
    {                                                                                                     \
        typedef float vec __attribute__((vector_size(LANES * 4)));                                        \
        static volatile float mul = 0.9999999f, add = 1e-7f; /* unknown to the compiler: nothing folds */ \
        const vec m = (vec){0} + mul, a = (vec){0} + add;                                                 \
        vec s0 = m, s1 = s0 + a, s2 = s1 + a, s3 = s2 + a, s4 = s3 + a, s5 = s4 + a;                      \
        vec s6 = s5 + a, s7 = s6 + a, s8 = s7 + a, s9 = s8 + a, s10 = s9 + a, s11 = s10 + a;              \
        static volatile vec sink; /* written each round: the sums cannot be left for later */             \
        double t0 = now_s(), t;                                                                           \
        long rounds = 0;                                                                                  \
        do {                                                                                              \
            for (int k = 0; k < INNER; k++) {                                                             \
                s0 = s0 * m + a, s1 = s1 * m + a, s2 = s2 * m + a, s3 = s3 * m + a;                       \
                s4 = s4 * m + a, s5 = s5 * m + a, s6 = s6 * m + a, s7 = s7 * m + a;                       \
                s8 = s8 * m + a, s9 = s9 * m + a, s10 = s10 * m + a, s11 = s11 * m + a;                   \
            }                                                                                             \
            rounds++;                                                                                     \
            t = now_s();                                                                                  \
            sink = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)) + ((s8 + s9) + (s10 + s11));         \
        } while (t - t0 < SLICE_MS * 1e-3);                                                               \
        (void)sink;                                                                                       \
        return (double)rounds * INNER * 12 * LANES * 2 / (t - t0) * 1e-9;                                 \
    }

#if defined(__GNUC__) && defined(__x86_64__)
BURN(burn_avx512, 16, __attribute__((target("avx512f"))))
BURN(burn_avx2, 8, __attribute__((target("avx2,fma"))))
#endif
BURN(burn_sse, 4, )

static double burn(void)
{
#if defined(__GNUC__) && defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f"))
        return burn_avx512();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return burn_avx2();
#endif
    return burn_sse();
}

/* stream: SLICE_MS of reading buf (MEM_FLOATS floats, bigger than any cache) in 16-float
 * vectors; returns GB/s. Memory is shared by the cores (and by neighbours on a shared host): a
 * kernel bound by it gains less from a second core than the FMA loop shows. */
#define MEM_FLOATS ((size_t)16 << 20) /* 64 MiB */

/* sum_floats: read count floats (a multiple of 64) in 16-float vectors, 4 sums; their total. */
__attribute__((target_clones("avx512f", "avx2", "default"))) static float sum_floats(const float *buf, size_t count)
{
    v16 a = {0}, b = {0}, c = {0}, d = {0};
    for (size_t i = 0; i < count; i += 64) {
        v16 x, y, z, w;
        memcpy(&x, buf + i, sizeof x), memcpy(&y, buf + i + 16, sizeof y);
        memcpy(&z, buf + i + 32, sizeof z), memcpy(&w, buf + i + 48, sizeof w);
        a += x, b += y, c += z, d += w;
    }
    v16 e = (a + b) + (c + d);
    return e[0] + e[15];
}

static double stream(const float *buf)
{
    static volatile float sink;
    double t0 = now_s(), t;
    long passes = 0;
    do {
        sink = sum_floats(buf, MEM_FLOATS);
        passes++;
        t = now_s();
    } while (t - t0 < SLICE_MS * 1e-3);
    (void)sink;
    return (double)passes * MEM_FLOATS * sizeof(float) / (t - t0) * 1e-9;
}

/* ---- hand-off: 1 MiB written by the first core, read back by it or by the second ---- */

#define HANDOFF_FLOATS ((size_t)1 << 18) /* 1 MiB: about a LeNet layer's activations at batch 64 */
#define HANDOFF_REPS 64

typedef struct handoff {
    int cpu[2];
    float *buf;
    _Atomic int step;         /* 2 k + 1: written in rep k; 2 k + 2: read */
    double us[2][HANDOFF_REPS / 2];
    int ok[2];
} handoff;

/* handoff_side: pinned to h->cpu[side]; side 0 writes every rep, the reader alternates (even
 * reps side 0, odd reps side 1) and times its read. */
typedef struct handoff_arg {
    handoff *h;
    int side;
} handoff_arg;

static void *handoff_side(void *arg)
{
    handoff *h = ((handoff_arg *)arg)->h;
    int side = ((handoff_arg *)arg)->side;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(h->cpu[side], &set);
    h->ok[side] = pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
    static volatile float sink;
    for (int k = 0; k < HANDOFF_REPS; k++) {
        if (side == 0) {
            for (size_t i = 0; i < HANDOFF_FLOATS; i++)
                h->buf[i] = (float)(i & 1023) + (float)k;
            atomic_store(&h->step, 2 * k + 1);
        }
        while (atomic_load(&h->step) < 2 * k + 1)
            __builtin_ia32_pause();
        if (side == k % 2) {
            double t0 = now_s();
            sink = sum_floats(h->buf, HANDOFF_FLOATS);
            h->us[side][k / 2] = (now_s() - t0) * 1e6;
            atomic_store(&h->step, 2 * k + 2);
        }
        while (atomic_load(&h->step) < 2 * k + 2)
            __builtin_ia32_pause();
    }
    (void)sink;
    return NULL;
}

/* measure_handoff: GB/s of reading 1 MiB written by the same core (local) and by another (remote). */
static int measure_handoff(const int *cpus, double *local, double *remote)
{
    static handoff h;
    h.cpu[0] = cpus[0], h.cpu[1] = cpus[1], h.step = 0;
    if (!(h.buf = aligned_alloc(64, HANDOFF_FLOATS * sizeof(float))))
        return -1;
    handoff_arg args[2] = {{&h, 0}, {&h, 1}};
    pthread_t t[2];
    int st = 0;
    for (int i = 0; i < 2 && st == 0; i++)
        st = pthread_create(&t[i], NULL, handoff_side, &args[i]);
    if (st != 0) { /* the first side waits for ever without the second: it is never left alone */
        fprintf(stderr, "cores: cannot start the hand-off threads\n");
        exit(1);
    }
    pthread_join(t[0], NULL), pthread_join(t[1], NULL);
    free(h.buf);
    double bytes = HANDOFF_FLOATS * sizeof(float) * 1e-3; /* per us: GB/s */
    *local = bytes / median(h.us[0], HANDOFF_REPS / 2), *remote = bytes / median(h.us[1], HANDOFF_REPS / 2);
    return h.ok[0] && h.ok[1] ? 0 : -1;
}

typedef struct run {
    int cpu;
    const float *buf; /* NULL: the FMA loop; else stream over it */
    double rate;      /* GFLOP/s or GB/s; < 0: cannot pin */
} run;

static void *pinned(void *arg)
{
    run *r = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(r->cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
        r->rate = -1;
    else
        r->rate = r->buf ? stream(r->buf) : burn();
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* measure: rounds x (each cpu alone, then all at once) of the FMA loop (bufs NULL) or of stream
 * (bufs[i] for cpu i); medians into alone[] and together[]. 0, or -1 if a thread cannot be
 * pinned or started. */
static int measure(const int *cpus, int n, float *const *bufs, int rounds, double *alone, double *together)
{
    static double a[MAX_CPUS][100], g[MAX_CPUS][100];
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < n; i++) {
            run one = {cpus[i], bufs ? bufs[i] : NULL, 0};
            pthread_t t;
            if (pthread_create(&t, NULL, pinned, &one) != 0)
                return -1;
            pthread_join(t, NULL);
            a[i][r] = one.rate;
        }
        run all[MAX_CPUS];
        pthread_t t[MAX_CPUS];
        for (int i = 0; i < n; i++) {
            all[i] = (run){cpus[i], bufs ? bufs[i] : NULL, 0};
            if (pthread_create(&t[i], NULL, pinned, &all[i]) != 0)
                return -1;
        }
        for (int i = 0; i < n; i++) {
            pthread_join(t[i], NULL);
            g[i][r] = all[i].rate;
        }
    }
    for (int i = 0; i < n; i++) {
        alone[i] = median(a[i], rounds), together[i] = median(g[i], rounds);
        if (alone[i] < 0 || together[i] < 0)
            return -1;
    }
    return 0;
}

/* print: " NAME_alone=A0,A1 NAME_together=T0,T1 UNIT NAME_ceiling=C" */
static void print(const char *name, const char *unit, int n, const double *alone, const double *together)
{
    double mean = 0, sum = 0;
    printf(" %salone=", name);
    for (int i = 0; i < n; i++)
        printf("%s%.1f", i ? "," : "", alone[i]), mean += alone[i] / n;
    printf(" %stogether=", name);
    for (int i = 0; i < n; i++)
        printf("%s%.1f", i ? "," : "", together[i]), sum += together[i];
    printf(" %s %sceiling=%.2f", unit, name, sum / mean);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    if (rounds < 1 || rounds > 100) {
        fprintf(stderr, "usage: cores [ROUNDS from 1 to 100]\n");
        return 2;
    }
    cpu_set_t mine;
    if (sched_getaffinity(0, sizeof mine, &mine) != 0)
        return perror("cores: sched_getaffinity"), 1;
    int cpus[MAX_CPUS], n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < MAX_CPUS; c++)
        if (CPU_ISSET(c, &mine))
            cpus[n++] = c;
    float *bufs[MAX_CPUS];
    for (int i = 0; i < n; i++) {
        if (!(bufs[i] = malloc(MEM_FLOATS * sizeof(float))))
            return fprintf(stderr, "cores: out of memory\n"), 1;
        for (size_t k = 0; k < MEM_FLOATS; k++)
            bufs[i][k] = (float)(k & 255);
    }
    double fa[MAX_CPUS], ft[MAX_CPUS], ma[MAX_CPUS], mt[MAX_CPUS];
    if (measure(cpus, n, NULL, rounds, fa, ft) != 0 || measure(cpus, n, bufs, rounds, ma, mt) != 0) {
        fprintf(stderr, "cores: cannot run a thread pinned to each of the %d cpus\n", n);
        return 1;
    }
    double hl = 0, hr = 0;
    if (n >= 2 && measure_handoff(cpus, &hl, &hr) != 0)
        hl = hr = 0;
    printf("cores: n=%d", n);
    print("", "gflops", n, fa, ft);
    print("mem_", "gbs", n, ma, mt);
    if (hl > 0)
        printf(" handoff_local=%.1f handoff_remote=%.1f gbs", hl, hr);
    printf("\n");
    for (int i = 0; i < n; i++)
        free(bufs[i]);
    return 0;
}
