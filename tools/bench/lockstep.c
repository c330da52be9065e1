/* lockstep.c - the most that synchronous data-parallel training can get from this machine's
 * cores, with nothing exchanged: LeNet's training step (ddl_trainer_step, batch 32 a process,
 * Fashion-MNIST, one thread) run by one process pinned to each of two CPUs, three ways:
 *   alone     one process at a time, on CPU 0 and on CPU 1;
 *   free      both at once, each at its own pace (2 lone ranks: make bench's "lone pair");
 *   lockstep  both at once, meeting at a barrier after every step, as 2 ranks meet at their
 *             all-reduce, but exchanging nothing.
 * On a shared virtual machine each vCPU's speed changes by phases of a tenth of a second to
 * seconds (LeNet's forward 570 against 830 us a step, the two vCPUs' phases independent of each
 * other): running free, each process keeps its own pace; in lockstep every step takes the slower
 * of the two. So lockstep / alone is the ceiling of 2 ranks' speed-up on this machine, and 2
 * ranks' images/s over lockstep's is what the all-reduce and ddl's own step cost on top.
 * ROUNDS rounds of the four runs, STEPS steps each after 30 untimed; medians. Prints one line:
 *   lockstep: alone=A0,A1 free=F lockstep=L images/s free_ceiling=F/mean(A) lockstep_ceiling=L/mean(A)
 * Usage: lockstep DATA_DIR [ROUNDS [STEPS]] (defaults 3 and 600). Uses ddl.h only. */
#define _GNU_SOURCE
#include "ddl.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"

#define BATCH 32
#define WARMUP 30
#define BARRIER_TIMEOUT_S 30.0 /* a partner that died or stopped: give up, never hang */

typedef struct shared {
    _Atomic long arrived; /* barrier arrivals, counted up for ever: round r ends at 2 * (r + 1) */
    double rate[2];       /* images/s of each process */
} shared;

static void die(const char *what, const char *err)
{
    fprintf(stderr, "lockstep: %s%s%s\n", what, err ? ": " : "", err ? err : "");
    exit(1);
}

/* wait until `target` arrivals: spin, as ddl's shm transport does while its peer computes */
static void barrier(shared *s, long *passed)
{
    long target = (*passed += 2);
    atomic_fetch_add(&s->arrived, 1);
    double start = 0.0;
    for (long spins = 0; atomic_load(&s->arrived) < target; spins++) {
        __builtin_ia32_pause();
        if ((spins & 0xffff) == 0) {
            double now = bench_now();
            if (start == 0.0)
                start = now;
            else if (now - start > BARRIER_TIMEOUT_S)
                die("the other process did not reach the barrier in 30 s", NULL);
        }
    }
}

/* one process: a LeNet trainer on CPU `cpu`; `sync` meets the other at the barrier every step */
static void run(const char *dir, int cpu, int sync, int steps, shared *s, int slot)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        die("cannot pin to the CPU", NULL);
    char err[DDL_ERR_BYTES];
    ddl_dataset train = {0};
    ddl_model *model = NULL;
    ddl_trainer *tr = NULL;
    ddl_model_config mc = {.batch = BATCH, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10};
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = BATCH;
    tc.micro_batches = 1; /* as a rank's */
    if (ddl_dataset_load_mnist(dir, "train", NULL, &train, err, sizeof err) != DDL_OK ||
        ddl_model_create(ddl_model_lenet(), &mc, NULL, &model, err, sizeof err) != DDL_OK ||
        ddl_trainer_create(&tc, model, &train, NULL, &tr, err, sizeof err) != DDL_OK)
        die("cannot start LeNet", err);
    long passed = 0;
    for (int i = 0; i < WARMUP; i++)
        if (ddl_trainer_step(tr, NULL) != DDL_OK)
            die("step", ddl_trainer_error(tr));
    if (sync)
        barrier(s, &passed);
    double t0 = bench_now();
    for (int i = 0; i < steps; i++) {
        if (ddl_trainer_step(tr, NULL) != DDL_OK)
            die("step", ddl_trainer_error(tr));
        if (sync)
            barrier(s, &passed);
    }
    s->rate[slot] = (double)steps * BATCH / (bench_now() - t0);
    ddl_trainer_destroy(tr);
    ddl_model_destroy(model);
    ddl_dataset_free(&train);
}

/* n processes (1 or 2) on CPUs cpus[0..n-1]; returns their images/s summed */
static double measure(const char *dir, const int *cpus, int n, int sync, int steps, shared *s)
{
    atomic_store(&s->arrived, 0);
    pid_t pids[2];
    for (int i = 0; i < n; i++) {
        s->rate[i] = 0.0;
        if ((pids[i] = fork()) < 0)
            die("cannot fork", NULL);
        if (pids[i] == 0) {
            run(dir, cpus[i], sync, steps, s, i);
            _exit(0);
        }
    }
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        int status;
        if (waitpid(pids[i], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            die("a measuring process failed", NULL);
        sum += s->rate[i];
    }
    return sync ? (double)n * (s->rate[0] < s->rate[n - 1] ? s->rate[0] : s->rate[n - 1]) : sum;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv)
{
    int rounds = argc > 2 ? atoi(argv[2]) : 3, steps = argc > 3 ? atoi(argv[3]) : 600;
    if (argc < 2 || argc > 4 || rounds < 1 || rounds > 50 || steps < 10 || steps > 100000) {
        fprintf(stderr, "usage: lockstep DATA_DIR [ROUNDS 1-50 [STEPS 10-100000]]\n");
        return 2;
    }
    cpu_set_t mine;
    if (sched_getaffinity(0, sizeof mine, &mine) != 0 || CPU_COUNT(&mine) < 2)
        die("needs 2 CPUs", NULL);
    int cpus[2], found = 0;
    for (int c = 0; c < CPU_SETSIZE && found < 2; c++)
        if (CPU_ISSET(c, &mine))
            cpus[found++] = c;
    shared *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED)
        die("cannot map shared memory", NULL);
    double a0[50], a1[50], fr[50], ls[50];
    for (int r = 0; r < rounds; r++) {
        a0[r] = measure(argv[1], &cpus[0], 1, 0, steps, s);
        a1[r] = measure(argv[1], &cpus[1], 1, 0, steps, s);
        fr[r] = measure(argv[1], cpus, 2, 0, steps, s);
        ls[r] = measure(argv[1], cpus, 2, 1, steps, s);
    }
    double A0 = median(a0, rounds), A1 = median(a1, rounds), F = median(fr, rounds), L = median(ls, rounds);
    double mean = 0.5 * (A0 + A1);
    printf("lockstep: alone=%.0f,%.0f free=%.0f lockstep=%.0f images/s free_ceiling=%.2f lockstep_ceiling=%.2f\n", A0,
           A1, F, L, F / mean, L / mean);
    return 0;
}
