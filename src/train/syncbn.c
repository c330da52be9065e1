/* syncbn.c - synchronised BatchNorm (ddl_train_config.sync_bn): every BatchNorm layer of a
 * training step normalises with the statistics of the whole global batch, every rank's and
 * every part's (micro-batch or shard) samples.
 *
 * A layer's round (ddl__model_sync, called by the graph plugin in a training pass): each part
 * hands its samples' rows (per sample, the sums over its values of a channel) and they go to
 * the rows of an (global batch x width) scratch at the samples' global indices; once the
 * rank's parts have all come, the last one all-reduces that scratch over the ranks (every rank
 * zeroes the rows it does not hold, so each element is one rank's value plus zeros: exact,
 * whatever order the all-reduce adds in) and sums each column in sample order, in double. Every
 * part of every rank gets those sums, the same bits however the batch is cut: the single
 * process runs the same code, and with shards V any world size trains to its bits.
 *
 * The parts of a rank must reach each round together, so under sync_bn they run side by side,
 * part 0 on the caller's thread and each other one on a thread of its own, started with the
 * trainer (the caller asked for them by setting sync_bn) and parked between steps. Their
 * kernels share the pool: the first to ask gets it, the others run theirs on their own thread
 * (pool.c); a kernel's bits do not depend on that. A round waits at most SYNC_WAIT_S for the
 * rank's other parts; the all-reduce is bounded by the comm's timeout. After a failure every
 * later round of the step returns it at once, so the parts finish and the step reports it.
 *
 * Nothing here allocates per step: the scratch is carved with the trainer, the threads made
 * at its creation. Knows nothing of BatchNorm's arithmetic (core/batchnorm.c has it). */
#include "impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define SYNC_WAIT_S 600 /* a round's wait for the rank's other parts (they compute up to it) */

/* ---- the round ---- */

static void fail_locked(ddl__syncbn *s, int rc, const char *fmt, ...) DDL__PRINTF(3, 4);
static void fail_locked(ddl__syncbn *s, int rc, const char *fmt, ...)
{
    if (s->rc != DDL_OK)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    s->rc = rc;
    pthread_cond_broadcast(&s->met); /* the waiting parts return it */
}

/* combine: the round's rows of every rank, then the sums over the global batch in sample order. */
static void combine(ddl__syncbn *s, int width)
{
    size_t w = (size_t)width, all = (size_t)s->n_all * w;
    if (s->comm && s->world > 1) {
        size_t lo = (size_t)s->base * w, hi = lo + (size_t)s->n_rank * w;
        memset(s->rows, 0, lo * sizeof(float));
        memset(s->rows + hi, 0, (all - hi) * sizeof(float));
        int rc = ddl_comm_allreduce(s->comm, s->rows, all, DDL_FLOAT32, DDL_SUM);
        if (rc != DDL_OK) {
            fail_locked(s, rc, "all-reduce of BatchNorm's sums (%zu floats): %s: %s", all, ddl_strerror(rc),
                        ddl_comm_error(s->comm));
            return;
        }
    }
    for (size_t c = 0; c < w; c++)
        s->tot[c] = 0.0;
    for (size_t i = 0; i < (size_t)s->n_all; i++) /* each column in the samples' order */
        for (size_t c = 0; c < w; c++)
            s->tot[c] += (double)s->rows[i * w + c];
}

/* wait_round: until the round of generation gen is combined (or the step failed); mu held. */
static void wait_round(ddl__syncbn *s, unsigned gen, int r)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += SYNC_WAIT_S;
    while (s->gen == gen && s->rc == DDL_OK)
        if (pthread_cond_timedwait(&s->met, &s->mu, &dl) == ETIMEDOUT && s->gen == gen)
            fail_locked(s, DDL_ETIMEDOUT, "part %d of %d waited %d s at a BatchNorm layer for the rank's other "
                        "parts (%d came)", r + 1, s->parts, SYNC_WAIT_S, s->arrived);
}

/* round_hook: the model's sync hook (ddl__model_sync) for part p->r. */
static int round_hook(void *ud, const float *rows, int n, int width, double *tot, long *n_all)
{
    const ddl__sync_part *p = ud;
    ddl__syncbn *s = p->s;
    int r = p->r, rc;
    *n_all = s->n_all;
    /* the part's own rows, outside the lock: no other part writes them, and the last round's
     * combine finished before this part could leave it */
    int fits = width >= 1 && (size_t)width <= s->width && n >= 0 && s->first[r] + n <= s->n_all;
    if (fits && n > 0)
        memcpy(s->rows + (size_t)s->first[r] * (size_t)width, rows, (size_t)n * (size_t)width * sizeof(float));
    pthread_mutex_lock(&s->mu);
    if (!fits)
        fail_locked(s, DDL_EINVAL, "part %d: a round of %d samples from %d, %d floats each, does not fit the "
                    "global batch of %d and rounds of %zu", r + 1, n, s->first[r], width, s->n_all, s->width);
    else if (s->arrived > 0 && width != s->round_width)
        fail_locked(s, DDL_EMISMATCH, "part %d came to a round of %d floats a sample, the others to one of %d",
                    r + 1, width, s->round_width);
    if (s->rc == DDL_OK) {
        unsigned gen = s->gen;
        s->round_width = width;
        if (++s->arrived == s->parts) { /* the last of the rank's parts combines for all */
            combine(s, width);
            s->arrived = 0;
            s->gen++;
            pthread_cond_broadcast(&s->met);
        } else {
            wait_round(s, gen, r);
        }
    }
    rc = s->rc;
    if (rc == DDL_OK) /* s->tot stays until every part (this one too) has come to the next round */
        memcpy(tot, s->tot, (size_t)width * sizeof *tot);
    else
        memset(tot, 0, (size_t)(width > 0 ? width : 0) * sizeof *tot);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* ---- set-up ---- */

int ddl__syncbn_refuse(const ddl_train_config *cfg, int world, int overlap, char *err, size_t err_bytes)
{
    if (!cfg->sync_bn || world < 2)
        return DDL_OK;
    if (ddl_comm_elastic_min(cfg->comm) > 0)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "sync_bn: not on an elastic comm: a regroup in the middle of "
                         "a step cannot redo BatchNorm's rounds of sums (run on a fixed number of ranks)");
    if (ddl_comm_compression(cfg->comm) != DDL_COMPRESS_NONE)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "sync_bn: not with gradient compression (DDL_COMPRESS): "
                         "rounded gradients are not one process's bits");
    if (overlap && !cfg->shards)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "sync_bn: not with overlap %d (DDL_OVERLAP): BatchNorm's "
                         "backward all-reduces its sums on the comm the overlapped gradient all-reduce is using "
                         "(set overlap -1, or DDL_OVERLAP=0)", overlap);
    return DDL_OK;
}

void ddl__syncbn_carve(ddl__syncbn *s, ddl_arena *a)
{
    if (!s->on)
        return;
    s->rows = (float *)ddl_arena_alloc(a, s->batch * s->width * sizeof(float));
    s->tot = (double *)ddl_arena_alloc(a, s->width * sizeof(double));
}

/* part_thread: runs part p->r of every step the trainer starts (ddl__syncbn_run). */
static void *part_thread(void *arg)
{
    const ddl__sync_part *p = arg;
    ddl__syncbn *s = p->s;
    unsigned seen = 0;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->stop && s->go == seen)
            pthread_cond_wait(&s->wake, &s->mu);
        if (s->stop)
            break;
        seen = s->go;
        void (*fn)(void *, int) = s->fn;
        void *ctx = s->fn_ctx;
        int parts = s->parts;
        pthread_mutex_unlock(&s->mu);
        if (p->r < parts)
            fn(ctx, p->r);
        pthread_mutex_lock(&s->mu);
        if (++s->done == s->n_threads)
            pthread_cond_signal(&s->finished);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int ddl__syncbn_start(ddl_trainer *t, char *err, size_t err_bytes)
{
    ddl__syncbn *s = &t->sync;
    if (!s->on)
        return DDL_OK;
    s->comm = t->cfg.comm;
    s->world = t->world;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->met, NULL);
    pthread_cond_init(&s->wake, NULL);
    pthread_cond_init(&s->finished, NULL);
    s->ready = 1;
    for (int r = 0; r < DDL_MAX_MICRO_BATCHES; r++)
        s->ctx[r] = (ddl__sync_part){s, r};
    for (int r = 1; r < t->micro_max; r++) {
        int rc = pthread_create(&s->tid[r - 1], NULL, part_thread, &s->ctx[r]);
        if (rc != 0) {
            ddl__syncbn_stop(t);
            return ddl__errf(err, err_bytes, DDL_ENOMEM, "sync_bn: cannot start the thread of part %d of %d: %s",
                             r + 1, t->micro_max, strerror(rc));
        }
        s->n_threads++;
    }
    return DDL_OK;
}

void ddl__syncbn_stop(ddl_trainer *t)
{
    ddl__syncbn *s = &t->sync;
    if (!s->ready)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->n_threads; i++)
        pthread_join(s->tid[i], NULL);
    s->n_threads = 0;
    pthread_cond_destroy(&s->finished);
    pthread_cond_destroy(&s->wake);
    pthread_cond_destroy(&s->met);
    pthread_mutex_destroy(&s->mu);
    s->ready = 0;
}

/* ---- a step ---- */

void ddl__syncbn_begin(ddl_trainer *t, int b, int base, int n)
{
    ddl__syncbn *s = &t->sync;
    s->parts = t->micro;
    s->n_all = b;
    s->base = base;
    s->n_rank = n;
    s->arrived = 0;
    s->rc = DDL_OK;
    s->err[0] = '\0';
    for (int r = 0; r < t->micro; r++) {
        s->first[r] = base; /* micro.c's part() sets its own */
        t->replica[r]->sync = round_hook;
        t->replica[r]->sync_ud = &s->ctx[r];
    }
}

int ddl__syncbn_end(ddl_trainer *t)
{
    ddl__syncbn *s = &t->sync;
    for (int r = 0; r < t->micro; r++) /* the caller's own passes normalise alone again */
        t->replica[r]->sync = NULL;
    if (s->rc != DDL_OK)
        ddl__errf(t->err, sizeof t->err, s->rc, "synchronised BatchNorm at step %ld: %s", t->step, s->err);
    return s->rc;
}

void ddl__syncbn_run(ddl_trainer *t, void (*fn)(void *ctx, int r), void *ctx)
{
    ddl__syncbn *s = &t->sync;
    if (t->micro < 2) { /* one part: nobody to meet */
        fn(ctx, 0);
        return;
    }
    pthread_mutex_lock(&s->mu);
    s->fn = fn;
    s->fn_ctx = ctx;
    s->done = 0;
    s->go++;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->mu);
    fn(ctx, 0);
    pthread_mutex_lock(&s->mu);
    while (s->done < s->n_threads) /* each part's rounds are bounded: it ends */
        pthread_cond_wait(&s->finished, &s->mu);
    pthread_mutex_unlock(&s->mu);
}
