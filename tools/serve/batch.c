/* batch.c - dynamic batching, as Triton's and TF Serving's batchers do it: the requests to one
 * model that arrive together run as one forward pass of up to --max-batch images. A request
 * that finds no group forming starts one and leads it: it waits up to --batch-timeout-us for
 * others to join (or until the group is full, or the server stops), closes it, runs every
 * member's images in one call of its own predictor and hands each member its outputs; a member
 * waits for the leader. Every answer is the bits the request gets alone: the predictor gives an
 * image the same outputs whatever its batch and place (src/core/gemm.c's batch-invariant mode,
 * tests/test_batch_same.c), and tests/test_serve_batch.sh checks it over HTTP.
 *
 * No thread is started: the leader is a request's own HTTP thread, so a group holds at most one
 * request per thread (--threads), and the leader's wait is bounded by the timeout, a member's by
 * its leader's wait and one forward pass. Members are of one version of the model (a group
 * does not mix weights across a reload). If the batched pass fails, each member runs alone
 * (sv_run_alone), so a request that cannot run gets its own error and does not fail the others.
 * Memory: a buffer of --max-batch images per HTTP thread, allocated when the thread first leads
 * a group and freed when the thread ends; nothing per request. */
#include "serve.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- one group ---- */

typedef struct member {
    sv_slot *s;          /* its pixels in, its outputs out */
    int n;               /* its images */
    int done, alone;     /* set by the leader, under the model's batch lock; alone: run it by
                          * itself (a group of one, or the group's pass failed) */
    int64_t t_join;      /* when it joined (monotonic us) */
    struct member *next;
} member;

typedef struct sv_group {
    sv_version *v;       /* the members' version */
    member *head, **tail;
    int images, closed;
} sv_group;

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- the leader's buffers, one set per thread ---- */

typedef struct tbuf {
    uint8_t *pixels;     /* (max_batch, c, h, w) of the largest model */
    float *probs;        /* (max_batch, C, H, W) */
    uint16_t *classes;   /* (max_batch, H, W) */
} tbuf;

static pthread_key_t tbuf_key;
static size_t px_room, out_room, cls_room; /* per image, the largest of the models */

static void tbuf_free(void *p)
{
    tbuf *t = p;
    if (t)
        free(t->pixels), free(t->probs), free(t->classes), free(t);
}

static tbuf *tbuf_get(void)
{
    tbuf *t = pthread_getspecific(tbuf_key);
    if (t)
        return t;
    size_t b = (size_t)sv_srv->max_batch;
    if (!(t = calloc(1, sizeof *t)) || !(t->pixels = malloc(b * px_room)) ||
        !(t->probs = malloc(b * out_room * sizeof(float))) || !(t->classes = malloc(b * cls_room * sizeof(uint16_t))) ||
        pthread_setspecific(tbuf_key, t) != 0) {
        tbuf_free(t);
        return NULL;
    }
    return t;
}

int sv_batch_init(sv_registry *r)
{
    if (pthread_key_create(&tbuf_key, tbuf_free) != 0)
        return -1;
    for (int i = 0; i < r->n; i++) {
        sv_model *m = &r->models[i];
        size_t in = (size_t)m->c * m->h * m->w, S = (size_t)m->oh * m->ow;
        px_room = in > px_room ? in : px_room;
        out_room = (size_t)m->C * S > out_room ? (size_t)m->C * S : out_room;
        cls_room = S > cls_room ? S : cls_room;
        pthread_mutex_init(&m->batch_mu, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&m->batch_grow, &ca);
        pthread_cond_init(&m->batch_done, &ca);
        pthread_condattr_destroy(&ca);
        m->batching = 1;
    }
    return 0;
}

void sv_batch_stop(sv_registry *r)
{
    atomic_store(&sv_srv->batch_stop, 1);
    for (int i = 0; i < r->n; i++) {
        sv_model *m = &r->models[i];
        if (!m->batching)
            continue;
        pthread_mutex_lock(&m->batch_mu);
        pthread_cond_broadcast(&m->batch_grow); /* a leader waiting for more: go now */
        pthread_mutex_unlock(&m->batch_mu);
    }
}

/* ---- metrics ---- */

static void observe_wait(sv_model *m, int64_t us)
{
    size_t b = 0;
    while (b < SV_WAIT_BUCKETS && us > sv_wait_bucket_us[b])
        b++;
    atomic_fetch_add_explicit(&m->wait_hist[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->wait_sum_us, (uint64_t)(us > 0 ? us : 0), memory_order_relaxed);
}

static void observe_batch(sv_model *m, int images)
{
    size_t b = 0;
    while (b < SV_BATCH_BUCKETS && images > sv_batch_bucket[b])
        b++;
    atomic_fetch_add_explicit(&m->batch_hist[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->batch_images, (uint64_t)images, memory_order_relaxed);
}

/* ---- running a group ---- */

/* run_group: the members' images in one pass of the leader's predictor (lead: the leader's
 * slot, first of the group); each member's outputs into its slot. 0, or -1: the pass failed. */
static int run_group(sv_model *m, sv_slot *lead, const sv_group *g)
{
    size_t in = (size_t)m->c * m->h * m->w, S = (size_t)m->oh * m->ow, out = (size_t)m->C * S;
    int cls = S == 1;
    tbuf *t = tbuf_get();
    if (!t)
        return -1;
    size_t at = 0;
    for (const member *e = g->head; e; at += (size_t)e->n, e = e->next)
        memcpy(t->pixels + at * in, e->s->pixels, (size_t)e->n * in);
    if (ddl_predictor_run(lead->pr, t->pixels, g->images, m->c, m->h, m->w, NULL, cls ? t->probs : NULL,
                          t->classes) != DDL_OK)
        return -1;
    at = 0;
    for (const member *e = g->head; e; at += (size_t)e->n, e = e->next) {
        if (cls)
            memcpy(e->s->probs, t->probs + at * out, (size_t)e->n * out * sizeof(float));
        memcpy(e->s->classes, t->classes + at * S, (size_t)e->n * S * sizeof(uint16_t));
    }
    return 0;
}

/* lead: g (the caller's, first member me) collects members until full, timed out or stopped,
 * then runs; called and returns with the lock held. */
static void lead(sv_model *m, sv_group *g, member *me)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    long long ns = (long long)dl.tv_nsec + (long long)sv_srv->batch_timeout_us * 1000;
    dl.tv_sec += (time_t)(ns / 1000000000), dl.tv_nsec = (long)(ns % 1000000000);
    while (!g->closed && g->images < sv_srv->max_batch && !atomic_load(&sv_srv->batch_stop))
        if (pthread_cond_timedwait(&m->batch_grow, &m->batch_mu, &dl) == ETIMEDOUT)
            break;
    g->closed = 1;
    if (m->forming == g)
        m->forming = NULL;
    int64_t t_run = now_us();
    for (member *e = g->head; e; e = e->next) {
        observe_wait(m, t_run - e->t_join);
        atomic_fetch_sub_explicit(&m->queued, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&m->batch_mu);
    int alone = g->head->next ? run_group(m, me->s, g) : -1; /* a group of one: its own run, below */
    pthread_mutex_lock(&m->batch_mu);
    observe_batch(m, g->images);
    for (member *e = g->head; e; e = e->next)
        e->alone = alone, e->done = 1;
    pthread_cond_broadcast(&m->batch_done);
}

int sv_batch_run(sv_model *m, sv_slot *s, int n, char *why, size_t why_bytes)
{
    member me = {.s = s, .n = n, .t_join = now_us()};
    pthread_mutex_lock(&m->batch_mu);
    atomic_fetch_add_explicit(&m->queued, 1, memory_order_relaxed);
    sv_group *g = m->forming;
    if (g && g->v == s->version && !g->closed && g->images + n <= sv_srv->max_batch) { /* join */
        *g->tail = &me, g->tail = &me.next;
        g->images += n;
        if (g->images >= sv_srv->max_batch)
            pthread_cond_broadcast(&m->batch_grow);
        while (!me.done)
            pthread_cond_wait(&m->batch_done, &m->batch_mu);
    } else { /* start a group; one forming that cannot take this request runs now */
        if (g) {
            g->closed = 1;
            pthread_cond_broadcast(&m->batch_grow);
        }
        sv_group own = {.v = s->version, .head = &me, .tail = &me.next, .images = n};
        m->forming = &own;
        lead(m, &own, &me);
    }
    pthread_mutex_unlock(&m->batch_mu);
    return me.alone ? sv_run_alone(s, m, n, why, why_bytes) : 0;
}
