/* clock.h - the benchmark programs' one clock: seconds on CLOCK_MONOTONIC, as a double. Include it
 * after the system headers; the file needs _POSIX_C_SOURCE (or _GNU_SOURCE) for clock_gettime.
 * (cores.c keeps its own: it is the probe a test or a user builds alone, `cc tools/bench/cores.c`.) */
#ifndef DDL_BENCH_CLOCK_H
#define DDL_BENCH_CLOCK_H

#include <time.h>

static double bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#endif
