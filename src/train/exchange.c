/* exchange.c - the trainer's gradient all-reduce, in buckets cut in backward order, and with
 * DDL_OVERLAP=1 on a thread of its own while backward computes the earlier layers.
 *
 * Buckets: the model says during backward which gradients are final (ddl_model_grads_ready:
 * "from element k to the end"); once the final ones not yet handed out reach the bucket size,
 * they become the next bucket. After backward the rest is cut from the top in buckets of the
 * bucket size. The cuts depend only on the model and the bucket size, and each bucket is one
 * all-reduce (float32, or compressed with the residual's matching slice), so overlap on and off
 * make the same calls on the same slices in the same order: the same sums, bit for bit. Only when
 * they run differs.
 *
 * The thread (started by the trainer only with overlap 1 or 2, joined when it is destroyed) is the
 * only user of the comm while backward runs: the caller's thread touches the comm again only
 * after ddl__exchange_finish has waited for every bucket. Each all-reduce waits at most the
 * comm's timeout (and the heartbeat names a stalled rank sooner), so that wait is bounded too. */
#include "impl.h"

#include <sched.h>
#include <string.h>

static void handout(ddl__exchange *x, size_t lo, size_t hi)
{
    if (x->threaded)
        pthread_mutex_lock(&x->mu);
    if (x->queued < x->cap) /* cap covers every cut (buckets_max) */
        x->list[x->queued++] = (ddl__bucket){lo, hi};
    if (x->threaded) {
        pthread_cond_broadcast(&x->cv);
        pthread_mutex_unlock(&x->mu);
        /* let the woken thread start the bucket now: where every core computes, Linux otherwise
         * runs it only when backward ends (two hosts of 2 vCPUs: overlap 0.72 -> 0.82x of no
         * overlap, overlap + bf16 23.4K -> 24.9K images/s, 2 alternated pairs of 2 runs) */
        sched_yield();
    }
}

/* on_ready: backward made gradients [from, n) final */
static void on_ready(void *ud, size_t from)
{
    ddl__exchange *x = ud;
    if (from >= x->ready_lo)
        return; /* not further down: nothing new */
    x->ready_lo = from;
    if (x->cut_lo - x->ready_lo >= x->bucket) {
        handout(x, x->ready_lo, x->cut_lo);
        x->cut_lo = x->ready_lo;
    }
}

static int reduce_bucket(ddl__exchange *x, ddl__bucket b)
{
    if (x->residual)
        return ddl_comm_allreduce_compressed(x->comm, x->grads + b.lo, b.hi - b.lo, DDL_SUM, x->residual + b.lo);
    return ddl_comm_allreduce(x->comm, x->grads + b.lo, b.hi - b.lo, DDL_FLOAT32, DDL_SUM);
}

static void *exchange_thread(void *arg)
{
    ddl__exchange *x = arg;
    pthread_mutex_lock(&x->mu);
    for (;;) {
        while (!x->stop && x->done == x->queued)
            pthread_cond_wait(&x->cv, &x->mu);
        if (x->stop)
            break;
        ddl__bucket b = x->list[x->done];
        int failed = x->rc != DDL_OK;
        pthread_mutex_unlock(&x->mu);
        int rc = failed ? DDL_OK : reduce_bucket(x, b); /* after a failure the rest is skipped */
        pthread_mutex_lock(&x->mu);
        if (rc != DDL_OK && x->rc == DDL_OK)
            x->rc = rc;
        x->done++;
        pthread_cond_broadcast(&x->cv);
    }
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

size_t ddl__exchange_buckets_max(size_t n, size_t bucket_floats)
{
    return n / (bucket_floats ? bucket_floats : 1) + DDL_MAX_PARAMS + 2;
}

int ddl__exchange_start(ddl__exchange *x, ddl_comm *c, ddl_model *m, float *residual, ddl__bucket *list,
                        size_t cap, int overlap, size_t bucket_bytes, char *err, size_t err_bytes)
{
    memset(x, 0, sizeof *x);
    x->comm = c, x->m = m, x->grads = m->grads, x->n = m->n_params, x->residual = residual;
    x->bucket = bucket_bytes / sizeof(float);
    x->bucket = x->bucket ? x->bucket : 1;
    x->list = list, x->cap = cap;
    if (!overlap)
        return DDL_OK;
    if (pthread_mutex_init(&x->mu, NULL) != 0)
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "overlap: cannot create a mutex");
    if (pthread_cond_init(&x->cv, NULL) != 0) {
        pthread_mutex_destroy(&x->mu);
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "overlap: cannot create a condition variable");
    }
    /* overlap 2: the thread at real-time priority, so that a bucket starts when it is handed over
     * even where every core computes (two hosts of 2 vCPUs over tbf: 1.16x the images/s of no
     * overlap, overlap 1 0.81x; 3 alternated runs, as root). Needs CAP_SYS_NICE or an RLIMIT_RTPRIO;
     * without, the thread starts as with overlap 1 (the trainer warns). Its waits are bounded spins
     * then sleeps, so it never holds a core for long. */
    pthread_attr_t attr;
    struct sched_param prio = {.sched_priority = 1};
    int rt = overlap == 2 && pthread_attr_init(&attr) == 0;
    if (rt) {
        rt = pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED) == 0 &&
             pthread_attr_setschedpolicy(&attr, SCHED_FIFO) == 0 && pthread_attr_setschedparam(&attr, &prio) == 0 &&
             pthread_create(&x->thread, &attr, exchange_thread, x) == 0;
        pthread_attr_destroy(&attr);
    }
    x->realtime = rt;
    if (!rt && pthread_create(&x->thread, NULL, exchange_thread, x) != 0) {
        pthread_cond_destroy(&x->cv);
        pthread_mutex_destroy(&x->mu);
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "overlap: cannot start the all-reduce thread");
    }
    x->threaded = 1;
    return DDL_OK;
}

void ddl__exchange_stop(ddl__exchange *x)
{
    if (!x->threaded)
        return;
    pthread_mutex_lock(&x->mu);
    x->stop = 1;
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
    pthread_join(x->thread, NULL);
    pthread_cond_destroy(&x->cv);
    pthread_mutex_destroy(&x->mu);
    x->threaded = 0;
}

void ddl__exchange_begin(ddl__exchange *x)
{
    if (x->threaded)
        pthread_mutex_lock(&x->mu);
    x->queued = x->done = 0; /* the thread is idle: the last finish waited for it */
    x->rc = DDL_OK;
    if (x->threaded)
        pthread_mutex_unlock(&x->mu);
    x->ready_lo = x->cut_lo = x->n;
    x->m->on_ready = on_ready;
    x->m->on_ready_ud = x;
}

int ddl__exchange_finish(ddl__exchange *x)
{
    x->m->on_ready = NULL;
    while (x->cut_lo > 0) { /* the rest, from the top, in buckets of the bucket size */
        size_t lo = x->cut_lo > x->bucket ? x->cut_lo - x->bucket : 0;
        handout(x, lo, x->cut_lo);
        x->cut_lo = lo;
    }
    if (!x->threaded) {
        for (size_t i = 0; i < x->queued; i++) {
            int rc = reduce_bucket(x, x->list[i]);
            if (rc != DDL_OK)
                return rc;
        }
        return DDL_OK;
    }
    pthread_mutex_lock(&x->mu);
    while (x->done < x->queued)
        pthread_cond_wait(&x->cv, &x->mu);
    int rc = x->rc;
    pthread_mutex_unlock(&x->mu);
    return rc;
}
