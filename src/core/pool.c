/* pool.c - the process's worker threads for ddl's own kernels, sized by ddl_set_threads. The
 * workers are created there (set-up), never per call, and park between calls: a short spin,
 * then a condition variable. ddl__parallel(n, fn, ctx) runs fn(ctx, 0..n-1) on the caller and
 * the workers and returns when every task is done. Thread s of T first runs its own share,
 * tasks [s n / T, (s + 1) n / T) in order, then takes what is left of the others' shares: so
 * consecutive kernels cut by sample find their samples in the cache of the core that wrote
 * them (LeNet's ops at 2 threads: 1240 to 890 us a step), and a thread that starts late or runs
 * slow is helped. Which thread runs task i still varies from call to call; what task i
 * computes must not, so that results do not depend on the thread count.
 * A call from inside a task, or from a second thread while the pool is busy, runs its tasks
 * in the calling thread. Each thread of the pool has a scratch buffer, allocated with the
 * workers, for kernels that need room per task (ddl__parallel_ws). A child process forked
 * while workers run goes on with none (pthread_atfork). */
#include "impl.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#define SPINS 20000 /* polls of a parked worker before it sleeps (tens of microseconds) */
#define RANGE_CUTS 4 /* ranges per thread of ddl__parallel_range: a faster core takes a slower one's last */
#define CLOSED 0xffffffffu /* a share's next task while the owner sets the next job up */

/* share: job number << 32 | the next unclaimed task of one thread's share, claimed by
 * compare-exchange (by its owner, or by another thread once that one's own share is done);
 * a cache line each, so that owners claiming their own tasks do not contend. */
typedef struct share {
    _Alignas(64) _Atomic uint64_t next;
} share;

/* thread_modes: how a thread's kernels compute (ddl__set_invariant, ddl__set_precision); a
 * parallel call hands its caller's to the tasks, so a task computes as its caller would. */
typedef struct thread_modes {
    int invariant, precision;
} thread_modes;

typedef struct pool {
    int threads;                 /* workers + the caller; 1: no workers */
    pthread_t tid[DDL__MAX_THREADS];
    float *scratch[DDL__MAX_THREADS]; /* [0]: the caller's; DDL__THREAD_SCRATCH floats each */
    pthread_mutex_t mu;
    pthread_cond_t wake;
    _Atomic uint32_t job;        /* the current job's number: workers wait for it to change */
    share shares[DDL__MAX_THREADS]; /* [threads]: each thread's share of the current job */
    _Atomic int done;            /* tasks of the current job finished */
    _Atomic int sleepers;        /* workers in pthread_cond_wait */
    _Atomic int busy;            /* a caller owns the pool */
    _Atomic int stop;
    void (*fn)(void *ctx, int task, float *scratch); /* the current job, written before its */
    void *ctx;                       /* shares, read only by a thread that claimed one of its tasks */
    _Atomic int n;                   /* its tasks (read after a share: atomic) */
    thread_modes modes;              /* the caller's, for its tasks: read, as ctx, with a task claimed */
} pool;

static pool P = {.threads = 1, .mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};
static _Thread_local thread_modes modes; /* the thread's, and its tasks' */
static _Thread_local int in_task;
static _Thread_local int my_slot; /* this thread's index in the pool (0: the caller) */
static pthread_mutex_t resize = PTHREAD_MUTEX_INITIALIZER;

static void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* share_end: the end of thread s's share of n tasks. */
static int share_end(int s, int n) { return (int)((int64_t)(s + 1) * n / P.threads); }

/* claim: the next task of share s of job `job`, or -1 if none is left (or another job began).
 * The share is read before n: a share of this job was opened after n was set. */
static int claim(int s, uint32_t job)
{
    uint64_t t = atomic_load(&P.shares[s].next);
    for (;;) {
        if ((uint32_t)(t >> 32) != job || (uint32_t)t >= (uint32_t)share_end(s, atomic_load(&P.n)))
            return -1;
        if (atomic_compare_exchange_weak(&P.shares[s].next, &t, t + 1))
            return (int)(uint32_t)t;
    }
}

/* run_tasks: this thread's share of job `job`, then what is left of the others', in order. */
static void run_tasks(uint32_t job)
{
    int ran = 0, T = P.threads;
    thread_modes was = modes;
    for (int k = 0; k < T; k++) {
        int s = (my_slot + k) % T, task;
        while ((task = claim(s, job)) >= 0) {
            if (!ran)
                modes = P.modes; /* read, as P.ctx, only with a task of this job claimed */
            in_task = 1;
            P.fn(P.ctx, task, P.scratch[my_slot]);
            in_task = 0;
            ran++;
        }
    }
    modes = was;
    if (ran)
        atomic_fetch_add(&P.done, ran);
}

static void *worker(void *arg)
{
    my_slot = (int)(intptr_t)arg;
    uint32_t seen = atomic_load(&P.job);
    for (;;) {
        uint32_t job;
        int spins = 0;
        while ((job = atomic_load(&P.job)) == seen && !atomic_load(&P.stop)) {
            if (++spins < SPINS) {
                relax();
                continue;
            }
            pthread_mutex_lock(&P.mu);
            atomic_fetch_add(&P.sleepers, 1);
            while (atomic_load(&P.job) == seen && !atomic_load(&P.stop))
                pthread_cond_wait(&P.wake, &P.mu);
            atomic_fetch_sub(&P.sleepers, 1);
            pthread_mutex_unlock(&P.mu);
            spins = 0;
        }
        if (atomic_load(&P.stop))
            return NULL;
        seen = job;
        run_tasks(job);
    }
}

static void wake_all(void)
{
    if (atomic_load(&P.sleepers) == 0)
        return;
    pthread_mutex_lock(&P.mu);
    pthread_cond_broadcast(&P.wake);
    pthread_mutex_unlock(&P.mu);
}

static void stop_workers(void)
{
    atomic_store(&P.stop, 1);
    pthread_mutex_lock(&P.mu);
    pthread_cond_broadcast(&P.wake);
    pthread_mutex_unlock(&P.mu);
    for (int i = 0; i < P.threads - 1; i++)
        pthread_join(P.tid[i], NULL);
    for (int i = 0; i < P.threads; i++) {
        free(P.scratch[i]);
        P.scratch[i] = NULL;
    }
    atomic_store(&P.stop, 0);
    P.threads = 1;
}

/* after fork: the child has only the thread that forked, so it goes on with no workers (their
 * scratch stays allocated: another thread may have been using the allocator) */
static void forked_child(void)
{
    for (int i = 0; i < DDL__MAX_THREADS; i++)
        P.scratch[i] = NULL;
    P.threads = 1;
    atomic_store(&P.busy, 0);
    atomic_store(&P.sleepers, 0);
    pthread_mutex_init(&P.mu, NULL);
    pthread_cond_init(&P.wake, NULL);
    pthread_mutex_init(&resize, NULL);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void register_atfork(void) { pthread_atfork(NULL, NULL, forked_child); }

int ddl__pool_resize(int n)
{
    pthread_once(&atfork_once, register_atfork);
    if (n < 1)
        n = 1;
    if (n > DDL__MAX_THREADS)
        n = DDL__MAX_THREADS;
    pthread_mutex_lock(&resize);
    int busy = 0;
    if (n != P.threads && !atomic_compare_exchange_strong(&P.busy, &busy, 1)) {
        pthread_mutex_unlock(&resize);
        return P.threads; /* in use by a call in progress: keep the size */
    }
    if (n != P.threads) {
        stop_workers();
        int made = 0;
        if (n > 1)
            P.scratch[0] = aligned_alloc(DDL_ALIGN, DDL__THREAD_SCRATCH * sizeof(float));
        while (P.scratch[0] && made < n - 1 &&
               (P.scratch[made + 1] = aligned_alloc(DDL_ALIGN, DDL__THREAD_SCRATCH * sizeof(float))) != NULL &&
               pthread_create(&P.tid[made], NULL, worker, (void *)(intptr_t)(made + 1)) == 0)
            made++;
        if (made + 1 < n && P.scratch[made + 1]) { /* allocated, but its thread could not be created */
            free(P.scratch[made + 1]);
            P.scratch[made + 1] = NULL;
        }
        P.threads = made + 1;
        if (made == 0) {
            free(P.scratch[0]);
            P.scratch[0] = NULL;
        }
        atomic_store(&P.busy, 0);
    }
    pthread_mutex_unlock(&resize);
    return P.threads;
}

int ddl__threads(void) { return P.threads; }

int ddl__set_invariant(int on)
{
    int was = modes.invariant;
    modes.invariant = on;
    return was;
}

int ddl__invariant(void) { return modes.invariant; }

int ddl__set_precision(int p)
{
    int was = modes.precision;
    modes.precision = p;
    return was;
}

int ddl__precision(void) { return modes.precision; }

int ddl__parallel_ws(int n, void (*fn)(void *ctx, int task, float *scratch), void *ctx, float *ws)
{
    int free_ = 0;
    if (n <= 0)
        return 0;
    if (n == 1 || P.threads == 1 || in_task || !atomic_compare_exchange_strong(&P.busy, &free_, 1)) {
        for (int i = 0; i < n; i++)
            fn(ctx, i, ws);
        return 0;
    }
    /* close the last job's shares first: a worker late in it, which may read the new n, must
     * not claim its "next" task (that would run a task of the new job twice) */
    uint32_t last = atomic_load(&P.job), job = last + 1;
    for (int s = 0; s < P.threads; s++)
        atomic_store(&P.shares[s].next, (uint64_t)last << 32 | CLOSED);
    P.fn = fn;
    P.ctx = ctx;
    P.modes = modes;
    atomic_store(&P.n, n);
    atomic_store(&P.done, 0);
    my_slot = 0; /* the owner of the pool uses scratch 0 */
    for (int s = 0; s < P.threads; s++) /* publishes fn, ctx and n */
        atomic_store(&P.shares[s].next, (uint64_t)job << 32 | (uint32_t)(s ? share_end(s - 1, n) : 0));
    atomic_store(&P.job, job);
    wake_all();
    run_tasks(job);
    for (int spins = 0; atomic_load(&P.done) < n; spins++)
        if (spins < SPINS)
            relax();
        else
            sched_yield(); /* a worker without a core: let it have ours */
    atomic_store(&P.busy, 0);
    return 1;
}

typedef struct plain {
    void (*fn)(void *ctx, int task);
    void *ctx;
} plain;

static void plain_task(void *ctx, int task, float *scratch)
{
    (void)scratch;
    const plain *p = ctx;
    p->fn(p->ctx, task);
}

void ddl__parallel(int n, void (*fn)(void *ctx, int task), void *ctx)
{
    plain p = {fn, ctx};
    ddl__parallel_ws(n, plain_task, &p, NULL);
}

typedef struct range_job {
    size_t n, per;
    void (*fn)(void *ctx, size_t lo, size_t hi);
    void *ctx;
} range_job;

static void range_task(void *ctx, int t)
{
    const range_job *j = ctx;
    size_t lo = (size_t)t * j->per, hi = lo + j->per < j->n ? lo + j->per : j->n;
    if (lo < hi)
        j->fn(j->ctx, lo, hi);
}

void ddl__parallel_range(size_t n, size_t grain, void (*fn)(void *ctx, size_t lo, size_t hi), void *ctx)
{
    size_t tasks = grain ? n / grain : n;
    if (tasks > (size_t)P.threads * RANGE_CUTS)
        tasks = (size_t)P.threads * RANGE_CUTS;
    if (tasks > (size_t)P.threads)
        tasks -= tasks % (size_t)P.threads;
    if (tasks < 2) {
        if (n)
            fn(ctx, 0, n);
        return;
    }
    range_job j = {n, (n + tasks - 1) / tasks, fn, ctx};
    ddl__parallel((int)tasks, range_task, &j);
}
