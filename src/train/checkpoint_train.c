/* checkpoint_train.c - saving a trainer to a checkpoint and resuming one from it, over all
 * ranks: every rank's RNG state is gathered for a save, which rank 0 alone writes; for a resume
 * rank 0 alone reads and verifies the file, then broadcasts what every rank needs.
 * Owns the collective protocol of save and resume. Must not know the file format (checkpoint.c
 * does), allocate per training step, or leave ranks disagreeing: every rank returns rank 0's
 * status. */
#include "impl.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#define RESUME_ABSENT 1 /* internal status: DDL_RESUME_IF_EXISTS and no file */

/* What rank 0 tells every rank before the big broadcasts, as int64. */
enum { H_STATUS, H_STEP, H_EPOCH, H_POS, H_WORLD, H_MEAN, H_STD, H_NORM, H_NORM_MEAN,
       H_NORM_STD = H_NORM_MEAN + DDL_MAX_NORM_CHANNELS, H_COUNT = H_NORM_STD + DDL_MAX_NORM_CHANNELS };

static int64_t float_bits(float f)
{
    uint32_t v;
    memcpy(&v, &f, 4);
    return (int64_t)v;
}

static float bits_float(int64_t b)
{
    uint32_t v = (uint32_t)b;
    float f;
    memcpy(&f, &v, 4);
    return f;
}

/* comm_fail: record a comm failure on the trainer: "save of PATH at step 20: STAGE: why". */
static int comm_fail(ddl_trainer *t, int rc, const char *op, const char *path, const char *stage)
{
    return ddl__errf(t->err, sizeof t->err, rc, "%s %s at step %ld: %s: %s: %s", op, path ? path : "(null)", t->step,
                     stage, ddl_strerror(rc), ddl_comm_error(t->cfg.comm));
}

/* ---- save ---- */

static int save(ddl_trainer *t, const char *path, int background)
{
    ddl_comm *c = t->cfg.comm;
    const char *name = path ? path : "(no path)"; /* for messages */
    int rc = DDL_OK, world_rngs = t->world;
    if (t->shards) /* dropout is keyed by seed, step and shard (micro.c): no RNG state to gather */
        world_rngs = 1, t->rng_all[0] = t->drop_rng;
    else if (c)
        rc = ddl_comm_allgather(c, t->drop_rng.s, t->rng_all, 4, DDL_INT64);
    else
        t->rng_all[0] = t->drop_rng;
    if (rc == DDL_EMISMATCH || rc == DDL_EPEER || rc == DDL_ETIMEDOUT) /* the save's first collective */
        return ddl__errf(t->err, sizeof t->err, rc,
                         "ddl_trainer_save is collective: every rank must call it at the same step, not rank 0 "
                         "alone (the others send their RNG state; rank 0 writes the file): save of %s at step %ld: "
                         "%s: %s", name, t->step, ddl_strerror(rc), ddl_comm_error(c));
    if (rc != DDL_OK)
        return comm_fail(t, rc, "save of", path, "gathering the RNG states");
    int64_t status = t->rank == 0 ? ddl__trainer_write(t, path, t->rng_all, world_rngs, background) : DDL_OK;
    if (c && (rc = ddl_comm_broadcast(c, &status, 1, DDL_INT64, 0)) != DDL_OK)
        return comm_fail(t, rc, "save of", path, "waiting for rank 0 to write it");
    if (status != DDL_OK) {
        if (t->rank != 0)
            ddl__errf(t->err, sizeof t->err, (int)status, "rank 0 could not save the checkpoint %s: %s", name,
                      ddl_strerror((int)status));
        return (int)status;
    }
    ddl__log(t->cfg.log, t->cfg.log_ud, DDL_LOG_INFO, "checkpoint %s %s at step %ld (epoch %d, sample %ld)", name,
             background ? "taken (being written)" : "saved", t->step, t->epoch, t->pos);
    return DDL_OK;
}

typedef struct save_run {
    const char *path;
    int background;
} save_run;

static int save_call(ddl_trainer *t, void *ctx, int i)
{
    (void)i;
    const save_run *s = ctx;
    return save(t, s->path, s->background);
}

static int save_any(ddl_trainer *t, const char *path, int background)
{
    int64_t t0 = ddl_timeline_now();
    /* elastic: a failure while saving regroups, and the ranks that live save again (a rank that
     * missed rank 0's status takes it from a rank that got it: comm/replay.c) */
    static const ddl__calls calls = {.what = "checkpoint save", .n = 1, .call = save_call, .own_errors = 1};
    save_run s = {path, background};
    int rc = ddl__trainer_calls(t, &calls, &s, NULL);
    ddl_timeline_span(t->cfg.timeline, DDL_SPAN_CHECKPOINT, t->step, t0, ddl_timeline_now(), 0);
    return rc;
}

int ddl_trainer_save(ddl_trainer *t, const char *path) { return save_any(t, path, 0); }

int ddl_trainer_save_background(ddl_trainer *t, const char *path) { return save_any(t, path, 1); }

int ddl_trainer_save_pending(const ddl_trainer *t) { return t->rank == 0 ? ddl__saver_poll(t->saver) : 0; }

int ddl_trainer_save_wait(ddl_trainer *t)
{
    int64_t status = t->rank == 0 ? ddl__saver_wait(t->saver, t->err, sizeof t->err) : DDL_OK;
    int rc = t->cfg.comm ? ddl_comm_broadcast(t->cfg.comm, &status, 1, DDL_INT64, 0) : DDL_OK;
    if (rc != DDL_OK)
        return comm_fail(t, rc, "waiting for the checkpoint write of", "(the last one)", "rank 0's status");
    if (status != DDL_OK && t->rank != 0)
        ddl__errf(t->err, sizeof t->err, (int)status, "rank 0's background checkpoint write failed: %s",
                  ddl_strerror((int)status));
    return (int)status;
}

/* ---- resume ---- */

/* check_fits: the checkpoint continues this trainer: same model, optimizer and data. */
static int check_fits(ddl_trainer *t, const ddl_checkpoint *ck, const char *path)
{
    const ddl_checkpoint_info *in = &ck->info;
    char why[DDL_ERR_BYTES];
    if (ddl_checkpoint_check_model(ck, t->m, why, sizeof why) != DDL_OK)
        return ddl__errf(t->err, sizeof t->err, DDL_EINVAL, "%s: %s", path, why);
    size_t n_optim = ddl_optim_state_floats(&t->cfg.optim, t->m->n_params);
    if (in->optim.kind != t->cfg.optim.kind || in->n_optim != n_optim)
        return ddl__errf(t->err, sizeof t->err, DDL_EINVAL,
                         "%s: optimizer %s with %zu floats of state, expected %s with %zu", path,
                         in->optim.kind == DDL_OPTIM_ADAM ? "adam" : "sgd", in->n_optim,
                         t->cfg.optim.kind == DDL_OPTIM_ADAM ? "adam" : "sgd", n_optim);
    if (in->n_train != t->n_train)
        return ddl__errf(t->err, sizeof t->err, DDL_EINVAL,
                         "%s: written by a run with %lld training samples per epoch, this one has %ld (another data "
                         "set or --train-limit?)", path, (long long)in->n_train, t->n_train);
    if (in->batch != t->cfg.batch || in->seed != t->cfg.seed)
        ddl__log(t->cfg.log, t->cfg.log_ud, DDL_LOG_WARN,
                 "%s: written with global batch %d and seed %llu, resuming with batch %d and seed %llu: the run "
                 "continues, but not as the original would have", path, in->batch, (unsigned long long)in->seed,
                 t->cfg.batch, (unsigned long long)t->cfg.seed);
    return DDL_OK;
}

/* root_load: rank 0 reads the file and, once everything checks out, takes its state into the
 * model and the trainer's buffers; fills h for the other ranks. Returns the status. */
static int root_load(ddl_trainer *t, const char *path, int flags, int64_t h[H_COUNT])
{
    if (!path)
        return ddl__errf(t->err, sizeof t->err, DDL_EINVAL, "ddl_trainer_resume: no path");
    if ((flags & DDL_RESUME_IF_EXISTS) && access(path, F_OK) != 0 && errno == ENOENT)
        return RESUME_ABSENT;
    ddl_checkpoint *ck = NULL;
    int rc = ddl_checkpoint_open(path, t->alloc, &ck, t->err, sizeof t->err);
    if (rc == DDL_OK)
        rc = check_fits(t, ck, path);
    if (rc == DDL_OK) {
        const ddl_checkpoint_info *in = &ck->info;
        memcpy(t->m->params, ck->params, in->n_params * sizeof(float));
        if (t->m->n_buffers) /* check_fits checked them (ddl_checkpoint_check_model) */
            memcpy(t->m->buffers, ck->buffers, t->m->n_buffers * sizeof(float));
        if (in->n_optim)
            memcpy(t->opt_state, ck->optim, in->n_optim * sizeof(float));
        for (int r = 0; r < t->world; r++) /* another world size: rank r continues saved rank r % saved */
            t->rng_all[r] = ck->rngs[r % in->world_size];
        h[H_STEP] = in->step;
        h[H_EPOCH] = in->epoch;
        h[H_POS] = in->pos;
        h[H_WORLD] = in->world_size;
        h[H_MEAN] = float_bits(in->mean);
        h[H_STD] = float_bits(in->std);
        h[H_NORM] = in->n_norm;
        for (int c = 0; c < DDL_MAX_NORM_CHANNELS; c++)
            h[H_NORM_MEAN + c] = float_bits(in->norm_mean[c]), h[H_NORM_STD + c] = float_bits(in->norm_std[c]);
    }
    ddl_checkpoint_close(ck);
    return rc;
}

/* share: broadcast what rank 0 loaded to every rank. */
static int share(ddl_trainer *t, const char *path)
{
    ddl_comm *c = t->cfg.comm;
    size_t n_optim = ddl_optim_state_floats(&t->cfg.optim, t->m->n_params);
    int rc = ddl_comm_broadcast(c, t->m->params, t->m->n_params, DDL_FLOAT32, 0);
    if (rc == DDL_OK && t->m->n_buffers)
        rc = ddl_comm_broadcast(c, t->m->buffers, t->m->n_buffers, DDL_FLOAT32, 0);
    if (rc == DDL_OK && n_optim)
        rc = ddl_comm_broadcast(c, t->opt_state, n_optim, DDL_FLOAT32, 0);
    if (rc == DDL_OK)
        rc = ddl_comm_broadcast(c, t->rng_all, 4 * (size_t)t->world, DDL_INT64, 0);
    return rc == DDL_OK ? DDL_OK : comm_fail(t, rc, "resume from", path, "broadcasting its state");
}

/* apply: every rank takes the resumed position; the permutation is rebuilt for its epoch. */
static void apply(ddl_trainer *t, const int64_t h[H_COUNT])
{
    t->step = (long)h[H_STEP];
    t->epoch = (int)h[H_EPOCH];
    t->pos = (long)h[H_POS];
    t->perm_epoch = -1;
    t->drop_rng = t->rng_all[t->rank];
    ddl__trainer_reset_stats(t);
    ddl_model_set_norm(t->m, bits_float(h[H_MEAN]), bits_float(h[H_STD]));
    if (h[H_NORM]) {
        float mean[DDL_MAX_NORM_CHANNELS], std[DDL_MAX_NORM_CHANNELS];
        for (int c = 0; c < DDL_MAX_NORM_CHANNELS; c++)
            mean[c] = bits_float(h[H_NORM_MEAN + c]), std[c] = bits_float(h[H_NORM_STD + c]);
        ddl_model_set_norm_channels(t->m, mean, std); /* checked when the file was read */
    }
}

int ddl_trainer_resume(ddl_trainer *t, const char *path, int flags, int *saved_world)
{
    const char *name = path ? path : "(no path)"; /* for messages */
    int64_t h[H_COUNT] = {0};
    if (saved_world)
        *saved_world = 0;
    if (t->cfg.comm && ddl_comm_joined(t->cfg.comm, NULL))
        return DDL_OK; /* a replacement: its state came from the running ranks (ddl_trainer_create) */
    if (t->rank == 0)
        h[H_STATUS] = root_load(t, path, flags, h);
    int rc;
    if (t->cfg.comm && (rc = ddl_comm_broadcast(t->cfg.comm, h, H_COUNT, DDL_INT64, 0)) != DDL_OK)
        return comm_fail(t, rc, "resume from", path, "waiting for rank 0 to read it");
    if (h[H_STATUS] == RESUME_ABSENT)
        return DDL_OK;
    if (h[H_STATUS] != DDL_OK) {
        if (t->rank != 0)
            ddl__errf(t->err, sizeof t->err, (int)h[H_STATUS], "rank 0 could not resume from %s: %s", name,
                      ddl_strerror((int)h[H_STATUS]));
        return (int)h[H_STATUS];
    }
    if (t->cfg.comm && (rc = share(t, path)) != DDL_OK)
        return rc;
    apply(t, h);
    if (h[H_WORLD] != t->world)
        ddl__log(t->cfg.log, t->cfg.log_ud, DDL_LOG_WARN,
                 "%s: written by %d ranks, resumed on %d: the rest of epoch %d is re-sharded (the data position is "
                 "global), and dropout draws differ from the original run",
                 name, (int)h[H_WORLD], t->world, t->epoch + 1);
    ddl__log(t->cfg.log, t->cfg.log_ud, DDL_LOG_INFO, "resumed from %s at step %ld (epoch %d, sample %ld)", name,
             t->step, t->epoch, t->pos);
    if (saved_world)
        *saved_world = (int)h[H_WORLD];
    return DDL_OK;
}
