/* checkpoint_async.c - checkpoints written off the training thread (ddl_trainer_save_background).
 * The save's collective part stays on the step, and the state is copied there into a snapshot
 * (the weights, the buffers, the optimizer state, the RNG states, the description, and the model
 * object itself, its weights pointing into the snapshot): the file is the state of that step,
 * bit for bit. A writer thread of the trainer's then encodes the snapshot into a file image
 * (CRCs, compression) and puts it on disk as ddl_trainer_save does (path.tmp, fsync, rename,
 * fsync of the directory: a kill during the write leaves the previous checkpoint whole). The
 * snapshot and the image are sized at the first background save and kept. One write at a time:
 * a save that finds the previous one still writing waits for it (a slow disk delays the next save
 * rather than piling saves up), at most DDL__SAVE_WAIT_S seconds, then fails naming the write
 * that is stuck. U-Net (depth 3, width 8, Adam): encoding on the step blocked it 10 ms, the copy
 * blocks it well under 1 (tests/test_ckpt_async.c). The writer runs at nice 10 (writer()). */
#include "impl.h"

#include <errno.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define DDL__SAVE_WAIT_S 600 /* the longest a save waits for the previous write (a disk, not a peer) */

struct ddl__saver {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int busy, stop;          /* an image waits or is being written; the thread is to end */
    int status;              /* the last write's (DDL_OK before any) */
    char path[4096];
    ddl__checkpoint_src src; /* the snapshot: src.m is &model, its arrays the ones below */
    struct ddl_model model;
    float *params, *buffers, *optim;
    ddl_rng *rngs;
    unsigned char *desc;
    size_t n_params, n_buffers, n_optim, n_rngs, n_desc; /* what the snapshot holds room for */
    unsigned char *img;
    size_t cap;
    char err[DDL_ERR_BYTES];
};

static void *writer(void *arg)
{
    ddl__saver *s = arg;
    /* Below the training thread: woken by a save, the writer at the same priority took the saving
     * thread's core from it (the scheduler favours a thread that has slept), and the step that
     * saved was held up 2-5 ms on a 2-vCPU AMD EPYC (tests/test_ckpt_async.c); at nice 10,
     * 0.2-0.3 ms. It still gets a tenth of a busy core, and all of an idle one. Linux: per thread. */
    setpriority(PRIO_PROCESS, (id_t)gettid(), 10);
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->busy && !s->stop)
            pthread_cond_wait(&s->cv, &s->mu);
        if (!s->busy)
            break; /* stop, and nothing left to write */
        pthread_mutex_unlock(&s->mu);
        char err[DDL_ERR_BYTES] = "";
        size_t bound = s->cap, len = 0;
        int rc = ddl__checkpoint_image(s->path, &s->src, s->img, &bound, &len, err, sizeof err);
        if (rc == DDL_OK)
            rc = ddl__checkpoint_put(s->path, s->img, len, s->src.bytes_per_sec, err, sizeof err);
        pthread_mutex_lock(&s->mu);
        s->status = rc;
        memcpy(s->err, err, sizeof err);
        s->busy = 0;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int ddl__saver_wait(ddl__saver *s, char *err, size_t err_bytes)
{
    if (!s)
        return DDL_OK;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += DDL__SAVE_WAIT_S;
    pthread_mutex_lock(&s->mu);
    int timed_out = 0;
    while (s->busy && !timed_out)
        timed_out = pthread_cond_timedwait(&s->cv, &s->mu, &until) == ETIMEDOUT;
    int rc = s->busy ? DDL_ETIMEDOUT : s->status;
    if (s->busy)
        ddl__errf(err, err_bytes, rc, "the checkpoint write of %s has not ended after %d s (a stuck disk?)", s->path,
                  DDL__SAVE_WAIT_S);
    else if (rc != DDL_OK)
        ddl__errf(err, err_bytes, rc, "the background checkpoint write failed: %s", s->err);
    s->status = DDL_OK; /* reported once */
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int ddl__saver_poll(ddl__saver *s)
{
    if (!s)
        return 0;
    pthread_mutex_lock(&s->mu);
    int rc = s->busy ? 1 : s->status;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* fits: the snapshot s holds room for src's arrays and its image (bound bytes) */
static int fits(const ddl__saver *s, const ddl__checkpoint_src *src, size_t bound)
{
    return s->cap >= bound && s->n_params >= src->m->n_params && s->n_buffers >= src->m->n_buffers &&
           s->n_optim >= src->info.n_optim && s->n_rngs >= (size_t)src->info.world_size && s->n_desc >= src->desc_bytes;
}

/* make: a saver with room for src (its thread started). */
static ddl__saver *make(const ddl_allocator *alloc, const ddl__checkpoint_src *src, size_t bound)
{
    ddl__saver *s = ddl__alloc(alloc, sizeof *s);
    if (!s)
        return NULL;
    memset(s, 0, sizeof *s);
    s->n_params = src->m->n_params, s->n_buffers = src->m->n_buffers, s->n_optim = src->info.n_optim;
    s->n_rngs = (size_t)src->info.world_size, s->n_desc = src->desc_bytes, s->cap = bound;
    s->params = ddl__alloc(alloc, (s->n_params + 1) * sizeof(float));
    s->buffers = ddl__alloc(alloc, (s->n_buffers + 1) * sizeof(float));
    s->optim = ddl__alloc(alloc, (s->n_optim + 1) * sizeof(float));
    s->rngs = ddl__alloc(alloc, (s->n_rngs + 1) * sizeof(ddl_rng));
    s->desc = ddl__alloc(alloc, s->n_desc + 1);
    s->img = ddl__alloc(alloc, bound);
    if (!s->params || !s->buffers || !s->optim || !s->rngs || !s->desc || !s->img) {
        ddl__free(alloc, s->params), ddl__free(alloc, s->buffers), ddl__free(alloc, s->optim);
        ddl__free(alloc, s->rngs), ddl__free(alloc, s->desc), ddl__free(alloc, s->img);
        ddl__free(alloc, s);
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->thread, NULL, writer, s) != 0) {
        s->thread = 0;
        ddl__saver_close(s, alloc);
        return NULL;
    }
    return s;
}

int ddl__saver_submit(ddl__saver **sp, const ddl_allocator *alloc, const char *path, const ddl__checkpoint_src *src,
                      char *err, size_t err_bytes)
{
    size_t bound = 0, len = 0;
    int rc = ddl__checkpoint_image(path, src, NULL, &bound, &len, err, err_bytes); /* checks what it can now */
    if (rc != DDL_OK)
        return rc;
    if (strlen(path) >= sizeof((*sp)->path))
        return ddl__errf(err, err_bytes, DDL_EINVAL, "%s: a path of %zu bytes, at most %zu", path, strlen(path),
                         sizeof((*sp)->path) - 1);
    ddl__saver *s = *sp;
    if (s && (rc = ddl__saver_wait(s, err, err_bytes)) != DDL_OK)
        return rc; /* the previous write's failure, said now; this save is not made */
    if (s && !fits(s, src, bound)) { /* the state does not grow, but a description might: start anew */
        ddl__saver_close(s, alloc);
        *sp = s = NULL;
    }
    if (!s && !(*sp = s = make(alloc, src, bound)))
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: cannot make the background checkpoint writer (%zu bytes "
                         "of snapshot and image, and a thread)", path, bound);
    /* the writer is idle (waited above): the snapshot is ours until busy is set */
    const ddl_model *m = src->m;
    memcpy(&s->model, m, sizeof s->model);
    memcpy(s->params, m->params, m->n_params * sizeof(float));
    if (m->n_buffers)
        memcpy(s->buffers, m->buffers, m->n_buffers * sizeof(float));
    if (src->info.n_optim)
        memcpy(s->optim, src->optim, src->info.n_optim * sizeof(float));
    memcpy(s->rngs, src->rngs, (size_t)src->info.world_size * sizeof(ddl_rng));
    if (src->desc_bytes)
        memcpy(s->desc, src->desc, src->desc_bytes);
    s->model.params = s->params, s->model.buffers = s->n_buffers ? s->buffers : NULL;
    pthread_mutex_lock(&s->mu);
    s->src = *src;
    s->src.m = &s->model, s->src.optim = s->optim, s->src.rngs = s->rngs;
    s->src.desc = src->desc_bytes ? s->desc : NULL;
    snprintf(s->path, sizeof s->path, "%s", path);
    s->busy = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return DDL_OK;
}

void ddl__saver_close(ddl__saver *s, const ddl_allocator *alloc)
{
    if (!s)
        return;
    if (s->thread && ddl__saver_wait(s, NULL, 0) == DDL_ETIMEDOUT) {
        pthread_detach(s->thread); /* a write stuck on the disk: left to it, never waited for */
        return;
    }
    if (s->thread) {
        pthread_mutex_lock(&s->mu);
        s->stop = 1; /* the writer ends its write first */
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
    }
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    ddl__free(alloc, s->params), ddl__free(alloc, s->buffers), ddl__free(alloc, s->optim);
    ddl__free(alloc, s->rngs), ddl__free(alloc, s->desc), ddl__free(alloc, s->img);
    ddl__free(alloc, s);
}
