/* cores.c - what the cores of this machine can do right now, for make bench: the 2-thread and
 * 2-rank figures are only as good as the second core. On shared virtual machines a core can run
 * at half the speed of the other for minutes (a busy neighbour on its physical core), so a
 * speedup of 1.5x may be all the machine had to give.
 *
 * A multiply-add loop (16-float vectors, 12 independent sums: bound by the core's FMA units, not
 * memory) runs SLICE_MS pinned to each core alone, then on every core at once; ROUNDS rounds,
 * medians. Prints one line:
 *   cores: n=2 alone=A0,A1 together=T0,T1 gflops ceiling=C
 * where ceiling = (T0 + T1 + ...) / mean(A): the speedup that perfectly parallel compute-bound
 * work could get from all cores over one. Usage: cores [ROUNDS] (default 5). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_CPUS 16
#define SLICE_MS 150
#define INNER 4096 /* multiply-adds of each sum between clock reads */

typedef float v16 __attribute__((vector_size(64)));

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* burn: SLICE_MS of multiply-adds on 12 sums kept in registers; returns GFLOP/s. */
__attribute__((target_clones("avx512f", "avx2,fma", "default"))) static double burn(void)
{
    static volatile float mul = 0.9999999f, add = 1e-7f; /* unknown to the compiler: nothing folds */
    const v16 m = (v16){0} + mul, a = (v16){0} + add;
    v16 s0 = m, s1 = s0 + a, s2 = s1 + a, s3 = s2 + a, s4 = s3 + a, s5 = s4 + a;
    v16 s6 = s5 + a, s7 = s6 + a, s8 = s7 + a, s9 = s8 + a, s10 = s9 + a, s11 = s10 + a;
    static volatile v16 sink; /* written each round: the sums cannot be left for later */
    double t0 = now_s(), t;
    long rounds = 0;
    do {
        for (int k = 0; k < INNER; k++) {
            s0 = s0 * m + a, s1 = s1 * m + a, s2 = s2 * m + a, s3 = s3 * m + a;
            s4 = s4 * m + a, s5 = s5 * m + a, s6 = s6 * m + a, s7 = s7 * m + a;
            s8 = s8 * m + a, s9 = s9 * m + a, s10 = s10 * m + a, s11 = s11 * m + a;
        }
        rounds++;
        t = now_s();
        sink = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)) + ((s8 + s9) + (s10 + s11)); /* each round */
    } while (t - t0 < SLICE_MS * 1e-3);
    (void)sink;
    return (double)rounds * INNER * 12 * 16 * 2 / (t - t0) * 1e-9;
}

typedef struct run {
    int cpu;
    double gflops;
} run;

static void *pinned(void *arg)
{
    run *r = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(r->cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
        r->gflops = -1;
    else
        r->gflops = burn();
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
    static double alone[MAX_CPUS][100], together[MAX_CPUS][100];
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < n; i++) {
            run one = {cpus[i], 0};
            pthread_t t;
            if (pthread_create(&t, NULL, pinned, &one) != 0)
                return perror("cores: pthread_create"), 1;
            pthread_join(t, NULL);
            alone[i][r] = one.gflops;
        }
        run all[MAX_CPUS];
        pthread_t t[MAX_CPUS];
        for (int i = 0; i < n; i++) {
            all[i] = (run){cpus[i], 0};
            if (pthread_create(&t[i], NULL, pinned, &all[i]) != 0)
                return perror("cores: pthread_create"), 1;
        }
        for (int i = 0; i < n; i++) {
            pthread_join(t[i], NULL);
            together[i][r] = all[i].gflops;
        }
    }
    double a[MAX_CPUS], g[MAX_CPUS], mean = 0, sum = 0;
    for (int i = 0; i < n; i++) {
        a[i] = median(alone[i], rounds), g[i] = median(together[i], rounds);
        if (a[i] < 0 || g[i] < 0) {
            fprintf(stderr, "cores: cannot pin a thread to cpu %d\n", cpus[i]);
            return 1;
        }
        mean += a[i] / n, sum += g[i];
    }
    printf("cores: n=%d alone=", n);
    for (int i = 0; i < n; i++)
        printf("%s%.1f", i ? "," : "", a[i]);
    printf(" together=");
    for (int i = 0; i < n; i++)
        printf("%s%.1f", i ? "," : "", g[i]);
    printf(" gflops ceiling=%.2f\n", sum / mean);
    return 0;
}
