/* bind.h - what ddlrun's ranks may use: their CPUs (raise_open_files, at the end: their open
 * files). ddlrun --bind cores: each of a host's N ranks on its own share of the CPUs ddlrun may
 * use, as mpirun --bind-to core does. Local rank i of N takes CPUs [i C / N, (i + 1) C / N) of
 * the C allowed ones (sched_getaffinity), so a rank's threads stay together and the ranks stop
 * trading cores: the scheduler may move a rank to the other vCPU now and then, and its working
 * set has to follow. Measured on 2 vCPUs, LeNet's 2 ranks over shm, alternated pairs: 68.4-69.3K
 * images/s free against 69.5-72.6K bound (4 of 4 pairs ahead), half an hour later 61.2-71.4K
 * against 61.8-68.5K (3 of 4 ahead, one behind); U-Net 747-767 against 713-777. Not the default,
 * then. Where there are more ranks than CPUs nothing is bound (ddlrun says so). For programs only
 * (ddlrun). */
#ifndef DDL_BIND_H
#define DDL_BIND_H

#include <sched.h> /* CPU_COUNT and sched_setaffinity: the build defines _GNU_SOURCE */
#include <sys/resource.h>

/* bind_cpus: how many CPUs this process may run on (0 if that cannot be read). */
static int bind_cpus(void)
{
    cpu_set_t set;
    return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
}

/* bind_rank: restrict this process (a rank about to exec) to its share, local rank `local` of
 * `n`; 0, or -1 with errno set. Call only where bind_cpus() >= n. */
static int bind_rank(int local, int n)
{
    cpu_set_t all, mine;
    if (sched_getaffinity(0, sizeof all, &all) != 0)
        return -1;
    int c = CPU_COUNT(&all), lo = (int)((long)local * c / n), hi = (int)((long)(local + 1) * c / n), k = 0;
    CPU_ZERO(&mine);
    for (int cpu = 0; cpu < CPU_SETSIZE && k < hi; cpu++)
        if (CPU_ISSET(cpu, &all)) {
            if (k >= lo)
                CPU_SET(cpu, &mine);
            k++;
        }
    return sched_setaffinity(0, sizeof mine, &mine);
}

/* raise_open_files: the ranks inherit ddlrun's limit on open files; a rank of a large job over
 * zmq needs about 5 per rank of the job, more than the usual soft limit of 1024 allows at 200
 * ranks. Raised to the hard limit, as far as we may without privileges. */
static inline void raise_open_files(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
}

#endif
