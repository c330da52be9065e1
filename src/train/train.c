/* train.c - the training loop: shuffle with the seed, take this rank's contiguous part of every
 * global batch, forward, loss, backward, all-reduce gradients, optimizer step; evaluation with a
 * confusion matrix all-reduced over the ranks. Everything is allocated in ddl_trainer_create;
 * nothing allocates per step. Knows nothing of the transport in use. */

#include "impl.h"
#include "data/augment.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


/* ---- set-up ---- */

void ddl_train_config_default(ddl_train_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->epochs = 5;
    cfg->batch = 64;
    cfg->optim = (ddl_optim_config){.kind = DDL_OPTIM_SGD, .lr = 0.01f, .momentum = 0.9f, .beta1 = 0.9f,
                                    .beta2 = 0.999f, .eps = 1e-8f};
    cfg->schedule.kind = DDL_SCHED_CONSTANT;
    cfg->seed = 42;
}

/* ddl__trainer_fewest: the fewest ranks the job may have (elastic: the comm's minimum). */
static int ddl__trainer_fewest(const ddl_train_config *cfg, int world)
{
    int m = ddl_comm_elastic_min(cfg->comm);
    return m > 0 && m < world ? m : world;
}

int ddl_train_local_batch(int batch, int shards, const ddl_comm *comm)
{
    int world = ddl_comm_size(comm), fewest = ddl_comm_elastic_min(comm);
    if (fewest < 1 || fewest > world)
        fewest = world;
    if (shards < 1 && ddl_comm_elastic_min(comm) > 0 && world > 1)
        shards = ddl_comm_elastic_max(comm);
    if (shards < 1)
        return (batch + world - 1) / world;
    long most = (shards + fewest - 1) / fewest; /* shards a rank may hold; their samples at most: */
    return (int)(((long)batch * most + shards - 1) / shards);
}

static int check_shapes(const ddl_train_config *cfg, ddl_model *m, const ddl_dataset *d, int world, char *err,
                        size_t err_bytes)
{
    if (!cfg || !m)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "trainer: no configuration or no model given");
    const ddl_model_config *mc = &m->cfg;
    if (!d || d->n < 1 || !(d->images || d->fimages) || !(d->targets || d->targets16))
        return ddl__errf(err, err_bytes, DDL_EINVAL, "training set is empty");
    if ((d->images && d->fimages) || (d->targets && d->targets16))
        return ddl__errf(err, err_bytes, DDL_EINVAL, "data set has both images and fimages, or targets and "
                         "targets16: set one of each");
    if (d->c != mc->in_c || d->h != mc->in_h || d->w != mc->in_w)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "data is %dx%dx%d but model %s takes %dx%dx%d", d->c, d->h,
                         d->w, m->plugin->name, mc->in_c, mc->in_h, mc->in_w);
    if (d->th * d->tw != m->out_h * m->out_w)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "targets are %dx%d but the model predicts %dx%d", d->th, d->tw,
                         m->out_h, m->out_w);
    if (d->n_classes > m->out_c)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "data has %d classes, model %d", d->n_classes, m->out_c);
    if (cfg->batch < 1 || cfg->epochs < 0)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "batch must be >= 1 and epochs >= 0");
    if (cfg->micro_batches < 0 || cfg->micro_batches > DDL_MAX_MICRO_BATCHES)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "micro_batches is %d: it must be 0 (one per 32 samples) to %d",
                         cfg->micro_batches, DDL_MAX_MICRO_BATCHES);
    if ((cfg->augment & ~(DDL_AUGMENT_FLIP | DDL_AUGMENT_CROP)) || cfg->augment_pad < 0 ||
        cfg->augment_pad > (d->h < d->w ? d->h : d->w))
        return ddl__errf(err, err_bytes, DDL_EINVAL, "augment 0x%x with padding %d: expected DDL_AUGMENT_FLIP and "
                         "DDL_AUGMENT_CROP, and a padding of 0 to the image's smaller side", (unsigned)cfg->augment,
                         cfg->augment_pad);
    if (cfg->overlap < -1 || cfg->overlap > 2 || cfg->bucket_kb < 0 || cfg->bucket_kb > (1 << 20))
        return ddl__errf(err, err_bytes, DDL_EINVAL, "overlap %d must be 0 (none), 1 or 2 and bucket_kb %d in "
                         "[0 (25600), 1048576]", cfg->overlap, cfg->bucket_kb);
    int fewest = ddl__trainer_fewest(cfg, world), most = cfg->shards ? (cfg->shards + fewest - 1) / fewest : 0;
    if (cfg->shards < 0 || (cfg->shards > 0 && (cfg->shards < world || most > DDL_MAX_MICRO_BATCHES ||
                                                cfg->shards > cfg->batch || ddl_comm_compression(cfg->comm) != 0 ||
                                                (cfg->micro_batches && cfg->micro_batches != cfg->shards / world))))
        return ddl__errf(err, err_bytes, DDL_EINVAL, "shards %d: need at least the world size %d, at most %d per "
                         "rank at %d rank%s, at most the batch %d, no gradient compression and micro_batches 0 or "
                         "shards / world", cfg->shards, world, DDL_MAX_MICRO_BATCHES, fewest, fewest == 1 ? "" : "s",
                         cfg->batch);
    int local = ddl_train_local_batch(cfg->batch, cfg->shards, cfg->comm);
    if (local > mc->batch)
        return ddl__errf(err, err_bytes, DDL_EINVAL,
                         "global batch %d on %d ranks needs a model built for batch %d, not %d%s", cfg->batch, world,
                         local, mc->batch, fewest < world ? " (ddl_train_local_batch: elastic, down to the "
                         "minimum of ranks)" : "");
    return DDL_OK;
}

/* carve: lay the trainer's buffers out in an arena (measure pass when a->base is NULL). */
static void carve(ddl_trainer *t, ddl_arena *a, size_t n_train)
{
    size_t B = (size_t)t->m->cfg.batch, out = (size_t)t->m->out_c * (size_t)t->positions;
    t->perm = (uint32_t *)ddl_arena_alloc(a, n_train * sizeof(uint32_t));
    t->x = (float *)ddl_arena_alloc(a, B * t->sample_bytes * sizeof(float));
    t->y = (uint16_t *)ddl_arena_alloc(a, B * (size_t)t->positions * sizeof(uint16_t));
    t->probs = (float *)ddl_arena_alloc(a, B * out * sizeof(float));
    t->dlogits = (float *)ddl_arena_alloc(a, B * out * sizeof(float));
    t->opt_state = (float *)ddl_arena_alloc(a, ddl_optim_state_floats(&t->cfg.optim, t->m->n_params) * sizeof(float));
    /* an elastic job may grow past the ranks it started with, up to its maximum */
    size_t ranks = (size_t)(t->world > ddl_comm_elastic_max(t->cfg.comm) ? t->world : ddl_comm_elastic_max(t->cfg.comm));
    t->rng_all = (ddl_rng *)ddl_arena_alloc(a, ranks * sizeof(ddl_rng)); /* checkpoint.c */
    t->steps_all = ddl_comm_elastic_min(t->cfg.comm) > 0 ? (int64_t *)ddl_arena_alloc(a, ranks * sizeof(int64_t)) : NULL; /* elastic.c */
    t->confusion = (int64_t *)ddl_arena_alloc(a, ((size_t)t->m->out_c * (size_t)t->m->out_c + 1) * sizeof(int64_t));
    size_t bucket_floats = t->bucket_bytes / sizeof(float);
    t->n_buckets = t->world > 1 && !t->shards ? ddl__exchange_buckets_max(t->m->n_params, bucket_floats) : 0;
    t->buckets = t->n_buckets ? (ddl__bucket *)ddl_arena_alloc(a, t->n_buckets * sizeof(ddl__bucket)) : NULL;
    t->residual = ddl_comm_compression(t->cfg.comm) != DDL_COMPRESS_NONE && t->world > 1
                      ? (float *)ddl_arena_alloc(a, t->m->n_params * sizeof(float))
                      : NULL;
    ddl__syncbn_carve(&t->sync, a);
}

/* initial_call: rank 0's initial weights to every rank (call 0), then its buffers (1: BatchNorm's
 * running statistics, if any). */
static int initial_call(ddl_trainer *t, void *ctx, int i)
{
    (void)ctx;
    ddl_model *m = t->m;
    if (i == 0)
        return ddl_comm_broadcast(t->cfg.comm, m->params, m->n_params, DDL_FLOAT32, 0);
    return m->n_buffers ? ddl_comm_broadcast(t->cfg.comm, m->buffers, m->n_buffers, DDL_FLOAT32, 0) : DDL_OK;
}

/* check_precision: DDL_OK for float32, or for bfloat16 on a CPU with a path for it (gemm_bf16.c). */
static int check_precision(const ddl_train_config *cfg, char *err, size_t err_bytes)
{
    if (cfg->precision == DDL_PRECISION_FP32)
        return DDL_OK;
    if (cfg->precision != DDL_PRECISION_BF16)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "precision %d: not DDL_PRECISION_FP32 (0) or DDL_PRECISION_BF16 (1)",
                         cfg->precision);
    if (ddl__bf16_path() == DDL__BF16_NONE) {
        const char *hidden = getenv("DDL_CPU_NO_BF16");
        return ddl__errf(err, err_bytes, DDL_EINVAL, "precision bf16: this CPU has neither AVX512-BF16 nor AMX%s; "
                         "train in fp32", hidden && *hidden && strcmp(hidden, "0") ? " (DDL_CPU_NO_BF16 is set)" : "");
    }
    const char *note = ddl__bf16_path_note(); /* AMX passed over: hidden, or its tiles failed their check */
    if (*note)
        ddl__log(cfg->log, cfg->log_ud, strncmp(note, "AMX hidden", 10) ? DDL_LOG_WARN : DDL_LOG_INFO,
                 "precision bf16: %s", note);
    ddl__log(cfg->log, cfg->log_ud, DDL_LOG_INFO, "precision bf16: products on %s", ddl__bf16_path_name(ddl__bf16_path()));
    const char *conv_note = ddl__conv2d_bf16_amx_note(); /* the AMX convolution's tiles failed their check */
    if (*conv_note)
        ddl__log(cfg->log, cfg->log_ud, DDL_LOG_WARN, "precision bf16: %s", conv_note);
    return DDL_OK;
}

int ddl_trainer_create(const ddl_train_config *cfg_in, ddl_model *m, const ddl_dataset *train,
                       const ddl_allocator *alloc, ddl_trainer **out, char *err, size_t err_bytes)
{
    if (!out)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_trainer_create: out is NULL");
    *out = NULL;
    if (cfg_in && cfg_in->comm) /* a replacement asks the running job in now (its rank and world follow) */
        (void)ddl_comm_joined(cfg_in->comm, NULL);
    int world = cfg_in && cfg_in->comm ? ddl_comm_size(cfg_in->comm) : 1;
    ddl_train_config eff; /* elastic: shards default to the most ranks the job will have */
    if (cfg_in) {
        eff = *cfg_in;
        if (!eff.shards && world > 1 && ddl_comm_elastic_min(eff.comm) > 0)
            eff.shards = ddl_comm_elastic_max(eff.comm);
    }
    const ddl_train_config *cfg = cfg_in ? &eff : NULL;
    int rc = check_shapes(cfg, m, train, world, err, err_bytes);
    if (rc != DDL_OK)
        return rc;
    ddl_trainer tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.cfg = *cfg;
    tmp.m = m;
    tmp.world = world;
    tmp.rank = cfg->comm ? ddl_comm_rank(cfg->comm) : 0;
    tmp.n_train = cfg->train_limit > 0 && cfg->train_limit < train->n ? cfg->train_limit : train->n;
    tmp.positions = train->th * train->tw;
    tmp.sample_bytes = (size_t)train->c * (size_t)train->h * (size_t)train->w;
    tmp.micro = ddl__micro_parts(cfg, (cfg->batch + world - 1) / world);
    if (m->n_buffers && cfg->micro_batches == 0 && !cfg->shards)
        tmp.micro = 1; /* "auto" keeps a rank's batch whole: BatchNorm's statistics are the batch's, as PyTorch's */
    tmp.shards = cfg->shards;
    tmp.elastic = world > 1 && ddl_comm_elastic_min(cfg->comm) > 0;
    ddl__trainer_deal(&tmp);
    tmp.micro_max = cfg->shards ? (cfg->shards + ddl__trainer_fewest(cfg, world) - 1) / ddl__trainer_fewest(cfg, world)
                                : tmp.micro;
    tmp.overlap = cfg->overlap < 0 ? 0 : cfg->overlap;
    tmp.bucket_bytes = (size_t)(cfg->bucket_kb ? cfg->bucket_kb : DDL__BUCKET_KB_DEFAULT) << 10;
    if ((rc = ddl__syncbn_refuse(cfg, world, tmp.overlap, err, err_bytes)) != DDL_OK ||
        (rc = check_precision(cfg, err, err_bytes)) != DDL_OK)
        return rc;
    if (cfg->conv_algo && cfg->conv_algo != m->cfg.conv_algo)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "conv_algo %d: the model was built with conv_algo %d (its "
                         "workspace is sized for it): build it with ddl_model_config.conv_algo = %d", cfg->conv_algo,
                         m->cfg.conv_algo, cfg->conv_algo);
    tmp.sync.on = cfg->sync_bn && m->n_sync > 0; /* a model without BatchNorm has nothing to synchronise */
    tmp.sync.width = m->sync_width;
    tmp.sync.batch = (size_t)cfg->batch;

    ddl_arena a;
    ddl_arena_init(&a, NULL, 0);
    carve(&tmp, &a, (size_t)tmp.n_train);
    size_t head = ddl__align_up(sizeof(ddl_trainer)), bytes = head + ddl_arena_used(&a);
    unsigned char *mem = (unsigned char *)ddl__alloc(alloc, bytes); /* DDL_ALIGN-aligned: the arena fits exactly */
    if (!mem)
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "trainer: cannot allocate %zu bytes", bytes);
    ddl_trainer *t = (ddl_trainer *)mem;
    *t = tmp;
    ddl_arena_init(&a, mem + head, bytes - head);
    carve(t, &a, (size_t)t->n_train);
    memset(t->opt_state, 0, ddl_optim_state_floats(&t->cfg.optim, m->n_params) * sizeof(float));
    if (t->residual)
        memset(t->residual, 0, m->n_params * sizeof(float));
    t->data = train;
    t->alloc = alloc;
    t->perm_epoch = -1;
    ddl_rng_seed(&t->drop_rng, cfg->seed ^ 0x64726f70ull);
    if ((rc = ddl__micro_start(t, err, err_bytes)) != DDL_OK) {
        ddl__free(alloc, t);
        return rc;
    }
    for (int r = 0; r < t->micro_max; r++) /* the parts' buffers are combined after each step */
        t->replica[r]->hold_buffers = 1;
    if ((rc = ddl__syncbn_start(t, err, err_bytes)) != DDL_OK) {
        ddl__micro_stop(t);
        ddl__free(alloc, t);
        return rc;
    }

    if (t->buckets && (rc = ddl__exchange_start(&t->xch, cfg->comm, m, t->residual, t->buckets, t->n_buckets,
                                                t->overlap, t->bucket_bytes, err, err_bytes)) != DDL_OK) {
        ddl__syncbn_stop(t);
        ddl__micro_stop(t);
        ddl__free(alloc, t);
        return rc;
    }
    if (t->buckets && t->micro > 1 && t->overlap)
        ddl__log(cfg->log, cfg->log_ud, DDL_LOG_WARN,
                 "DDL_OVERLAP with %d micro-batches: the gradient all-reduce starts after the last one's backward "
                 "(nothing overlaps it); micro_batches = 0 or 1 keeps the overlap",
                 t->micro);
    if (t->buckets && t->overlap == 2 && !t->xch.realtime)
        ddl__log(cfg->log, cfg->log_ud, DDL_LOG_WARN,
                 "DDL_OVERLAP=2: the all-reduce thread may not run at real-time priority (needs CAP_SYS_NICE or "
                 "an RLIMIT_RTPRIO); it runs as with DDL_OVERLAP=1");
    ddl__trainer_profile_start(t); /* cfg->profile: the peak (<= 100 ms) and the layers to time */
    ddl__model_touch(m);           /* the activations' page faults here, not in the first step */
    /* Rank 0's initial weights are everybody's: from the seed, or the model's own (imported). */
    if (!cfg->keep_weights)
        ddl_model_init_weights(m, cfg->seed);
    ddl_regroup joined;
    if (cfg->comm && ddl_comm_joined(cfg->comm, &joined)) { /* a replacement: the running ranks' state */
        int ahead;
        t->step = -1; /* behind every rank, whatever the step: it receives the whole state */
        if ((rc = ddl__trainer_sync(t, joined.leader, joined.step, &ahead)) != DDL_OK) {
            ddl__trainer_fail(t, rc, "state of the running job");
            ddl__errf(err, err_bytes, rc, "%s", t->err);
            ddl_trainer_destroy(t);
            return rc;
        }
    } else if (cfg->comm) {
        /* elastic: the ranks that live broadcast again from the new rank 0 */
        static const ddl__calls calls = {.what = "broadcast of the initial weights", .n = 2, .call = initial_call,
                                         .restart = 1};
        if ((rc = ddl__trainer_calls(t, &calls, NULL, NULL)) != DDL_OK) {
            ddl__errf(err, err_bytes, rc, "%s", t->err);
            ddl_trainer_destroy(t);
            return rc;
        }
    }
    *out = t;
    return DDL_OK;
}

void ddl_trainer_destroy(ddl_trainer *t)
{
    if (t) {
        if (t->buckets)
            ddl__exchange_stop(&t->xch);
        ddl__syncbn_stop(t);
        ddl__micro_stop(t);
        ddl__saver_close(t->saver, t->alloc); /* a write in flight ends first */
        ddl__trainer_profile_stop(t);
        t->m->hold_buffers = 0; /* the caller's forward passes update them again */
        ddl__free(t->alloc, t);
    }
}

const char *ddl_trainer_error(const ddl_trainer *t) { return t ? t->err : "no trainer"; }
long ddl_trainer_step_count(const ddl_trainer *t) { return t->step; }
int ddl_trainer_epoch_index(const ddl_trainer *t) { return t->epoch; }
int ddl_trainer_micro_batches(const ddl_trainer *t) { return t->micro; }
int ddl_trainer_epoch_done(const ddl_trainer *t) { return t->pos >= t->n_train; }

/* ---- data ---- */

/* shuffle: the order of epoch e depends only on the seed and e, so every rank agrees and a
 * resumed run can rebuild it; in_order keeps the data's. */
static void shuffle(ddl_trainer *t)
{
    ddl_rng r;
    ddl_rng_seed(&r, t->cfg.seed * 0x9E3779B97F4A7C15ull + (uint64_t)t->epoch + 1);
    for (long i = 0; i < t->n_train; i++)
        t->perm[i] = (uint32_t)i;
    for (long i = t->cfg.in_order ? 0 : t->n_train - 1; i > 0; i--) {
        uint32_t j = ddl_rng_below(&r, (uint32_t)(i + 1));
        uint32_t tmp = t->perm[i];
        t->perm[i] = t->perm[j];
        t->perm[j] = tmp;
    }
    t->perm_epoch = t->epoch;
}

typedef struct gather_job {
    ddl_trainer *t;
    const ddl_dataset *d;
    const uint32_t *idx;
    long first;
    int augment;           /* DDL_AUGMENT_* for these samples (training only) */
} gather_job;

/* prefetch_bytes: every cache line of p[0, n) on its way in (the last one too: a sample need not
 * start on a line). Samples lie at random in a data set larger than the caches: fetched one after
 * another, a batch of 64 LeNet images took 39-42 us a step, asked for at once 11-12 (DDL_TIMELINE's
 * data span at one thread, 3 alternated runs; at two threads 26 -> 13). */
static void prefetch_bytes(const uint8_t *p, size_t n)
{
    for (size_t k = 0; k < n; k += 64)
        __builtin_prefetch(p + k);
    if (n)
        __builtin_prefetch(p + n - 1);
}

/* copy_targets: sample s's tb targets of d into y, widened to uint16. */
static void copy_targets(const ddl_dataset *d, size_t s, size_t tb, uint16_t *y)
{
    if (d->targets)
        for (size_t k = 0; k < tb; k++)
            y[k] = d->targets[s * tb + k];
    else
        memcpy(y, d->targets16 + s * tb, tb * sizeof *y);
}

static void gather_range(void *ctx, size_t lo, size_t hi)
{
    const gather_job *j = ctx;
    ddl_trainer *t = j->t;
    const ddl_dataset *d = j->d;
    /* bytes are normalised as x / 255, floats as they are: one scale more for them */
    float unit = d->images ? 1.0f : 255.0f;
    float scale = unit / (255.0f * t->m->std), shift = -t->m->mean / t->m->std;
    float cs[DDL_MAX_NORM_CHANNELS], ch[DDL_MAX_NORM_CHANNELS]; /* per channel, when the model has that */
    size_t sb = t->sample_bytes, tb = (size_t)t->positions, plane = sb / (size_t)d->c;
    size_t pb = ddl__pixel_bytes(d), yb = ddl__target_bytes(d);
    const uint8_t *pixels = ddl__pixel_data(d), *targets = ddl__target_data(d);
    for (int c = 0; c < t->m->n_norm; c++) {
        ddl__norm_affine(t->m, c, &cs[c], &ch[c]);
        cs[c] *= unit;
    }
    for (size_t i = lo; i < hi; i++) { /* ask for every line of the range's samples at once */
        size_t s = j->idx ? j->idx[i] : (size_t)j->first + i;
        prefetch_bytes(pixels + s * sb * pb, sb * pb);
        prefetch_bytes(targets + s * tb * yb, tb * yb);
    }
    for (size_t i = lo; i < hi; i++) {
        size_t s = j->idx ? j->idx[i] : (size_t)j->first + i;
        const uint8_t *src = d->images ? d->images + s * sb : NULL;
        const float *fsrc = d->images ? NULL : d->fimages + s * sb;
        float *dst = t->x + i * sb;
        uint16_t *y = t->y + i * tb;
        if (j->augment) {
            ddl__augment a;
            ddl__augment_draw(t->cfg.seed, t->epoch, s, j->augment, t->cfg.augment_pad ? t->cfg.augment_pad : 4, &a);
            if (t->m->n_norm)
                ddl__augment_image(&a, src, fsrc, d->c, d->h, d->w, cs, ch, dst);
            else
                ddl__augment_image(&a, src, fsrc, d->c, d->h, d->w, NULL, (const float[2]){scale, shift}, dst);
            if (d->th == d->h && d->tw == d->w && tb > 1) /* a mask: moved with its image */
                ddl__augment_mask(&a, d->targets ? d->targets + s * tb : NULL,
                                  d->targets ? NULL : d->targets16 + s * tb, d->h, d->w, y);
            else
                copy_targets(d, s, tb, y);
            continue;
        }
        if (src && t->m->n_norm)
            for (size_t c = 0, k = 0; c < (size_t)t->m->n_norm; c++)
                for (size_t e = k + plane; k < e; k++)
                    dst[k] = (float)src[k] * cs[c] + ch[c];
        else if (src)
            for (size_t k = 0; k < sb; k++)
                dst[k] = (float)src[k] * scale + shift;
        else if (t->m->n_norm)
            for (size_t c = 0, k = 0; c < (size_t)t->m->n_norm; c++)
                for (size_t e = k + plane; k < e; k++)
                    dst[k] = fsrc[k] * cs[c] + ch[c];
        else
            for (size_t k = 0; k < sb; k++)
                dst[k] = fsrc[k] * scale + shift;
        copy_targets(d, s, tb, y);
    }
}

/* gather: normalise samples idx[0..n) into t->x and copy their targets into t->y; samples go to
 * the pool in ranges (each alone: no bit depends on the cuts). */
static void gather(ddl_trainer *t, const ddl_dataset *d, const uint32_t *idx, long first, int n, int augment)
{
    gather_job j = {t, d, idx, first, augment};
    ddl__parallel_range((size_t)n, (size_t)4096 / (t->sample_bytes + 1) + 1, gather_range, &j);
}

/* ---- step ---- */

/* next_epoch: the previous epoch is over: start the next one and its statistics. */
static void next_epoch(ddl_trainer *t)
{
    t->epoch++;
    t->pos = 0;
    ddl__trainer_reset_stats(t);
}

/* local_pass: forward, loss and backward on this rank's n samples of a global batch of b;
 * *mid gets the time between forward (with the loss) and backward. */
static double local_pass_in(ddl_trainer *t, int n, int b, int64_t *mid)
{
    if (t->micro > 1 || t->shards)
        return ddl__micro_pass(t, n, b, mid);
    if (n < 1) { /* sync_bn, a rank of no samples: its BatchNorm rounds, which the others wait for */
        ddl_model_forward(t->m, t->x, 0, 1, &t->drop_rng);
        *mid = ddl_timeline_now();
        ddl_model_backward(t->m, t->x, 0, t->dlogits);
        return 0.0;
    }
    int C = t->m->out_c, S = t->positions;
    const float *logits = ddl_model_forward(t->m, t->x, n, 1, &t->drop_rng);
    /* Scale by the global batch so the sum over ranks is the gradient of the global mean. */
    double loss = ddl_softmax_xent(n, C, S, logits, t->y, 1.0f / ((float)b * (float)S), t->probs, t->dlogits) / S;
    if (t->cfg.dice_weight > 0.0f)
        loss += t->cfg.dice_weight *
                ddl_dice_loss(n, C, S, t->probs, t->y, t->cfg.dice_weight / (float)b, t->dlogits);
    t->correct += ddl__count_correct(logits, t->y, n, C, S, NULL);
    t->counted += (int64_t)n * S;
    *mid = ddl_timeline_now();
    if (t->buckets)
        ddl__exchange_begin(&t->xch); /* backward hands out final gradients as it goes */
    ddl_model_backward(t->m, t->x, n, t->dlogits);
    return loss;
}

/* local_pass: the pass in the configured precision (the pool's tasks inherit it; the threads of
 * sync_bn's parts set it themselves, micro.c); evaluation stays float32. */
static double local_pass(ddl_trainer *t, int n, int b, int64_t *mid)
{
    int was = ddl__set_precision(t->cfg.precision);
    double loss = local_pass_in(t, n, b, mid);
    ddl__set_precision(was);
    return loss;
}

/* combine_buffers: the model's buffers (BatchNorm's running statistics) after a step: the mean
 * of the values the step's parts wrote to their gradient blocks' tails (m->next), which the
 * shard all-reduce has summed in its fixed order (shards), or add_parts and this all-reduce sum
 * (micro-batches, ranks). A part is a shard, or a micro-batch of a rank: each normalised with
 * its own statistics, and the mean of their running statistics is the same on every rank. With
 * one part the buffers are its values, bit for bit. */
static int combine_buffers(ddl_trainer *t)
{
    ddl_model *m = t->m;
    if (!m->n_buffers)
        return DDL_OK;
    if (t->sync.on) { /* every part of every rank computed them from the same global statistics */
        memcpy(m->buffers, m->next, m->n_buffers * sizeof(float));
        return DDL_OK;
    }
    int parts = t->shards ? t->shards : t->micro * t->world;
    if (!t->shards && t->world > 1) {
        int rc = ddl_comm_allreduce(t->cfg.comm, m->next, m->n_buffers, DDL_FLOAT32, DDL_SUM);
        if (rc != DDL_OK)
            return ddl__trainer_fail(t, rc, "all-reduce of the running statistics");
    }
    for (size_t i = 0; i < m->n_buffers; i++)
        m->buffers[i] = m->next[i] / (float)parts;
    return DDL_OK;
}

/* account: this step's times: where the rank spent them for ddl_epoch_stats, and the spans of
 * the timeline, if any. ts: start, forward, backward, all-reduce, optimizer, end. */
static void account(ddl_trainer *t, const int64_t ts[6])
{
    t->compute_ns += ts[3] - (t->last_ar_end ? t->last_ar_end : ts[0]);
    t->allreduce_ns += ts[4] - ts[3];
    t->last_ar_end = ts[4];
    if (t->pos >= t->n_train) /* the epoch's last optimizer step has no next all-reduce */
        t->compute_ns += ts[5] - ts[4];
    t->epoch_secs += (double)(ts[5] - ts[0]) * 1e-9;
    if (t->cfg.profile)
        ddl__trainer_profile_step(t, ts);
    if (ddl_timeline_wants(t->cfg.timeline, t->step))
        for (int k = DDL_SPAN_DATA; k <= DDL_SPAN_OPTIMIZER; k++)
            ddl_timeline_span(t->cfg.timeline, k, t->step, ts[k], ts[k + 1],
                              k == DDL_SPAN_ALLREDUCE && t->cfg.comm ? t->m->n_params * sizeof(float) : 0);
}

/* A step's own part (its samples' forward and backward) and its shard all-reduce: one sequence
 * of the recovery path (calls.c), which starts again after a regroup with the shards dealt
 * again; what an earlier attempt counted is taken back, so a step redone counts once. */
typedef struct step_run {
    int64_t ts[6]; /* indexed by DDL_SPAN_DATA .. DDL_SPAN_OPTIMIZER, and the end */
    double l, loss_was;
    int64_t correct_was, counted_was;
    int b, n;
} step_run;

static int step_part(ddl_trainer *t, void *ctx)
{
    step_run *s = ctx;
    t->loss_sum = s->loss_was;
    t->correct = s->correct_was;
    t->counted = s->counted_was;
    s->ts[0] = ddl_timeline_now();
    if (t->m->n_buffers) /* a part that runs no forward pass adds the buffers as they are */
        memcpy(t->m->next, t->m->buffers, t->m->n_buffers * sizeof(float));
    if (t->perm_epoch != t->epoch)
        shuffle(t);
    int b = (int)(t->n_train - t->pos < t->cfg.batch ? t->n_train - t->pos : t->cfg.batch);
    long lo = t->pos + (long)b * t->rank / t->world, hi = t->pos + (long)b * (t->rank + 1) / t->world;
    if (t->shards) /* this rank's shards' samples */
        lo = t->pos + (long)((int64_t)b * t->shard_first / t->shards),
        hi = t->pos + (long)((int64_t)b * (t->shard_first + t->micro) / t->shards);
    int n = (int)(hi - lo);
    s->b = b, s->n = n;
    if ((t->micro == 1 && !t->shards) || n < 1) /* else each part zeroes its own, on the thread that fills them */
        ddl_model_zero_grads(t->m);
    s->l = 0.0;
    if (n > 0 || t->sync.on) { /* sync_bn: a rank of no samples still makes its BatchNorm rounds */
        if (n > 0)
            gather(t, t->data, t->perm + lo, 0, n, t->cfg.augment & (DDL_AUGMENT_FLIP | DDL_AUGMENT_CROP));
        s->ts[1] = ddl_timeline_now();
        if (t->sync.on)
            ddl__syncbn_begin(t, b, (int)(lo - t->pos), n);
        s->l = local_pass(t, n, b, &s->ts[2]);
        int src = t->sync.on ? ddl__syncbn_end(t) : DDL_OK;
        if (src != DDL_OK)
            return src;
        t->loss_sum += s->l;
    } else {
        s->ts[1] = s->ts[2] = ddl_timeline_now();
    }
    s->ts[3] = ddl_timeline_now();
    return DDL_OK;
}

/* step_shards: every shard's gradients, in the order of an all-reduce of V ranks, with the
 * tails: the buffers' next values (combine_buffers). */
static int step_shards(ddl_trainer *t, void *ctx, int i)
{
    (void)i;
    const step_run *s = ctx;
    float *bufs[DDL_MAX_MICRO_BATCHES];
    for (int r = 0; r < t->micro; r++) {
        if (s->n < 1 && r > 0 && !t->sync.on) { /* sync_bn: each part ran its (empty) pass */
            memset(t->replica[r]->grads, 0, t->m->n_params * sizeof(float));
            memcpy(t->replica[r]->next, t->m->buffers, t->m->n_buffers * sizeof(float));
        }
        bufs[r] = t->replica[r]->grads;
    }
    return ddl_comm_allreduce_shards(t->cfg.comm, bufs, t->shard_first, t->micro, t->shards,
                                     t->m->n_params + (t->sync.on ? 0 : t->m->n_buffers));
}

int ddl_trainer_step(ddl_trainer *t, double *loss)
{
    if (t->pos >= t->n_train)
        next_epoch(t);
    static const ddl__calls calls = {.what = "shard all-reduce", .n = 1, .call = step_shards, .prepare = step_part,
                                     .restart = 1};
    step_run s = {.loss_was = t->loss_sum, .correct_was = t->correct, .counted_was = t->counted};
    int ahead = 0, rc = t->shards ? ddl__trainer_calls(t, &calls, &s, &ahead) : step_part(t, &s);
    if (rc != DDL_OK)
        return rc;
    if (ahead) { /* the leader's state came: this step is done */
        if (loss)
            *loss = 0.0;
        return DDL_OK;
    }
    int64_t *ts = s.ts;
    if (t->buckets) { /* 2 ranks or more */
        if (s.n == 0 && !(t->sync.on && t->micro > 1)) /* no backward ran (the parts' pass begins it): cut all now */
            ddl__exchange_begin(&t->xch);
        if ((rc = ddl__exchange_finish(&t->xch)) != DDL_OK)
            return ddl__trainer_fail(t, rc, "gradient all-reduce");
    }
    if ((rc = combine_buffers(t)) != DDL_OK)
        return rc;
    ts[4] = ddl_timeline_now();
    float lr = ddl_schedule_lr(&t->cfg.schedule, t->cfg.optim.lr, t->step);
    t->step++;
    ddl_optim_step(&t->cfg.optim, lr, t->step, t->m->params, t->m->grads, t->opt_state, t->m->n_params);
    t->last_lr = lr;
    t->pos += s.b;
    ts[5] = ddl_timeline_now();
    account(t, ts);
    if (loss)
        *loss = s.n > 0 ? s.l / s.n : 0.0;
    return DDL_OK;
}

/* ---- epoch ---- */

/* The epoch's statistics: the loss, then the counts, summed over the ranks; one sequence of the
 * recovery path (calls.c), each call from this rank's own values. */
typedef struct stats_run {
    float loss;
    int64_t counts[2];
} stats_run;

static int stats_call(ddl_trainer *t, void *ctx, int i)
{
    stats_run *s = ctx;
    ddl_comm *c = t->cfg.comm; /* none: this rank's own values */
    if (i == 0) {
        s->loss = (float)t->loss_sum;
        return c ? ddl_comm_allreduce(c, &s->loss, 1, DDL_FLOAT32, DDL_SUM) : DDL_OK;
    }
    s->counts[0] = t->correct, s->counts[1] = t->counted;
    return c ? ddl_comm_allreduce(c, s->counts, 2, DDL_INT64, DDL_SUM) : DDL_OK;
}

int ddl_trainer_epoch_stats(ddl_trainer *t, ddl_epoch_stats *out)
{
    static const ddl__calls calls = {.what = "epoch statistics", .n = 2, .call = stats_call};
    stats_run s;
    ddl__trainer_profile_epoch(t); /* cfg->profile: the peak measured again, between epochs' timing */
    int rc = ddl__trainer_calls(t, &calls, &s, NULL);
    if (rc != DDL_OK)
        return rc;
    double loss = t->cfg.comm ? (double)s.loss : t->loss_sum; /* one process: the sum as it is */
    const int64_t *counts = s.counts;
    if (out) {
        memset(out, 0, sizeof *out);
        out->samples = t->pos - t->epoch_start_pos;
        out->steps = t->step - t->epoch_start_step;
        out->loss = out->samples ? loss / (double)out->samples : 0.0;
        out->accuracy = counts[1] ? (double)counts[0] / (double)counts[1] : 0.0;
        out->seconds = t->epoch_secs;
        out->images_per_sec = t->epoch_secs > 0 ? (double)out->samples / t->epoch_secs : 0.0;
        out->lr = t->last_lr;
    }
    if ((rc = ddl__trainer_timing(t, out)) != DDL_OK)
        return rc;
    if (out) {
        out->world = t->world;
        out->regroups = t->regroups;
    }
    return DDL_OK;
}

int ddl_trainer_epoch(ddl_trainer *t, ddl_epoch_stats *out)
{
    if (t->pos >= t->n_train)
        next_epoch(t);
    while (t->pos < t->n_train) {
        int rc = ddl_trainer_step(t, NULL);
        if (rc != DDL_OK)
            return rc;
    }
    return ddl_trainer_epoch_stats(t, out);
}

/* ---- evaluation ---- */

#define EVAL_LOSS_ONE 65536.0 /* the evaluation loss in fixed point: sums up to 1.4e14 fit in an int64 */

/* The evaluation: each rank's part of the test set (again after a regroup: the parts change with
 * the world), then one all-reduce, the loss in fixed point (2^-16) after the counts: a regroup
 * either finds every rank in it or some past it, whose sum (the world's before the loss, whole)
 * comm/replay.c hands the others' retry. Two calls could leave ranks in different ones. */
typedef struct eval_run {
    const ddl_dataset *test;
    ddl_eval_stats *out;
    double loss;
} eval_run;

static int eval_part(ddl_trainer *t, void *ctx)
{
    eval_run *e = ctx;
    int C = t->m->out_c, S = t->positions, B = t->m->cfg.batch;
    e->out->confusion = t->confusion;
    memset(t->confusion, 0, (size_t)C * (size_t)C * sizeof *t->confusion);
    long lo = (long)e->test->n * t->rank / t->world, hi = (long)e->test->n * (t->rank + 1) / t->world;
    e->loss = 0.0;
    for (long first = lo; first < hi; first += B) {
        int n = (int)(hi - first < B ? hi - first : B);
        gather(t, e->test, NULL, first, n, 0);
        const float *logits = ddl_model_forward(t->m, t->x, n, 0, &t->drop_rng);
        e->loss += ddl_softmax_xent(n, C, S, logits, t->y, 1.0f, NULL, NULL);
        (void)ddl__count_correct(logits, t->y, n, C, S, e->out->confusion);
    }
    return DDL_OK;
}

static int eval_reduce(ddl_trainer *t, void *ctx, int i)
{
    (void)i;
    eval_run *e = ctx;
    if (!t->cfg.comm)
        return DDL_OK;
    size_t cc = (size_t)t->m->out_c * (size_t)t->m->out_c;
    t->confusion[cc] = llround(e->loss * EVAL_LOSS_ONE);
    int rc = ddl_comm_allreduce(t->cfg.comm, t->confusion, cc + 1, DDL_INT64, DDL_SUM);
    if (rc == DDL_OK)
        e->loss = (double)t->confusion[cc] / EVAL_LOSS_ONE;
    return rc;
}

int ddl_trainer_evaluate(ddl_trainer *t, const ddl_dataset *test, ddl_eval_stats *out)
{
    memset(out, 0, sizeof *out);
    if (check_shapes(&t->cfg, t->m, test, t->world, t->err, sizeof t->err) != DDL_OK)
        return DDL_EINVAL;
    int64_t t0 = ddl_timeline_now();
    static const ddl__calls calls = {.what = "evaluation all-reduce", .n = 1, .call = eval_reduce,
                                         .prepare = eval_part, .restart = 1};
    eval_run e = {test, out, 0.0};
    int rc = ddl__trainer_calls(t, &calls, &e, NULL);
    if (rc != DDL_OK)
        return rc;
    out->samples = test->n;
    out->loss = e.loss / ((double)test->n * t->positions);
    ddl_eval_metrics(out, t->m->out_c);
    ddl_timeline_span(t->cfg.timeline, DDL_SPAN_EVALUATE, t->step, t0, ddl_timeline_now(), 0);
    return DDL_OK;
}
