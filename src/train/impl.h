/* src/train/impl.h - private to the training layer: the layout of ddl_trainer (train.c,
 * checkpoint_train.c: saving and resuming a trainer, over the file format of
 * src/formats/checkpoint.h). Not API. */
#ifndef DDL_TRAIN_IMPL_H
#define DDL_TRAIN_IMPL_H
#include "core/impl.h"
#include "formats/checkpoint.h"

#include <pthread.h>

/* the gradient buckets' size when ddl_train_config.bucket_kb is 0: PyTorch DDP's 25 MiB */
#define DDL__BUCKET_KB_DEFAULT 25600

/* ---- the gradient exchange (exchange.c) ---- */
typedef struct ddl__bucket {
    size_t lo, hi;          /* elements [lo, hi) of the flat gradient buffer */
} ddl__bucket;

typedef struct ddl__exchange {
    ddl_comm *comm;
    ddl_model *m;
    float *grads, *residual; /* residual: DDL_COMPRESS's error feedback, or NULL */
    size_t n, bucket;        /* gradient floats; floats per bucket */
    ddl__bucket *list;       /* this step's buckets, in the order they are all-reduced */
    size_t cap, queued, done;
    size_t ready_lo, cut_lo; /* backward: [ready_lo, n) final; [cut_lo, n) handed out */
    int rc;                  /* the first failure of this step */
    int threaded, stop;      /* DDL_OVERLAP=1 or 2: the thread runs */
    int realtime;            /* DDL_OVERLAP=2 and the thread got SCHED_FIFO */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} ddl__exchange;

/* buckets_max: list entries a step can need. start: set x up (and its thread, for overlap 1 or
 * 2), buckets of bucket_bytes; stop: join it. begin: before backward; finish: after it, every bucket all-reduced,
 * DDL_OK or the first failure. */
size_t ddl__exchange_buckets_max(size_t n, size_t bucket_floats);
int ddl__exchange_start(ddl__exchange *x, ddl_comm *c, ddl_model *m, float *residual, ddl__bucket *list,
                        size_t cap, int overlap, size_t bucket_bytes, char *err, size_t err_bytes);
void ddl__exchange_stop(ddl__exchange *x);
void ddl__exchange_begin(ddl__exchange *x);
int ddl__exchange_finish(ddl__exchange *x);

/* ---- synchronised BatchNorm (syncbn.c) ---- */
typedef struct ddl__syncbn ddl__syncbn;
typedef struct ddl__sync_part { /* the hook's ud for part r */
    ddl__syncbn *s;
    int r;
} ddl__sync_part;

struct ddl__syncbn {
    int on;                  /* cfg.sync_bn, and the model has layers that synchronise */
    ddl_comm *comm;          /* NULL or a world of 1: the rank's parts alone */
    int world;
    size_t width, batch;     /* the model's widest round (floats per sample); cfg.batch */
    float *rows;             /* (batch, width): every sample's row, at its global index */
    double *tot;             /* (width): the round's sums over the global batch */
    /* this step's */
    int parts;               /* the rank's parts: each round waits for all of them */
    int n_all, base, n_rank; /* the global batch's samples; this rank's first and count */
    int first[DDL_MAX_MICRO_BATCHES]; /* part r's first sample in the global batch */
    /* the meeting point of a round (mu guards what follows) */
    pthread_mutex_t mu;
    pthread_cond_t met;      /* a round's sums are ready (gen moved) */
    int arrived, round_width;
    unsigned gen;
    int rc;                  /* the step's first failure: later rounds return it at once */
    char err[DDL_ERR_BYTES];
    ddl__sync_part ctx[DDL_MAX_MICRO_BATCHES];
    /* the part threads: part r >= 1 on thread r - 1, part 0 on the caller */
    pthread_cond_t wake, finished;
    int n_threads, ready, stop, done;
    unsigned go;
    void (*fn)(void *ctx, int r);
    void *fn_ctx;
    pthread_t tid[DDL_MAX_MICRO_BATCHES];
};

/* ddl__syncbn_refuse: DDL_OK, or DDL_EINVAL naming why cfg cannot synchronise BatchNorm exactly
 * (an elastic comm, compression, overlap) on world ranks with the trainer's overlap.
 * carve: its rows and sums in the trainer's arena (t->sync.on, width and batch set).
 * start: its lock and the part threads (micro_max - 1 of them); stop: join and free them.
 * begin: before a step's pass: a global batch of b, this rank's samples [base, base + n) of it:
 * the hooks set on the step's parts. end: the hooks cleared; DDL_OK or the step's failure
 * (its detail in t->err). run: fn(ctx, r) for every part r < t->micro at once (part 0 here). */
int ddl__syncbn_refuse(const ddl_train_config *cfg, int world, int overlap, char *err, size_t err_bytes);
void ddl__syncbn_carve(ddl__syncbn *s, ddl_arena *a);
int ddl__syncbn_start(ddl_trainer *t, char *err, size_t err_bytes);
void ddl__syncbn_stop(ddl_trainer *t);
void ddl__syncbn_begin(ddl_trainer *t, int b, int base, int n);
int ddl__syncbn_end(ddl_trainer *t);
void ddl__syncbn_run(ddl_trainer *t, void (*fn)(void *ctx, int r), void *ctx);

/* ---- the trainer ---- */
struct ddl_trainer {
    ddl_train_config cfg;
    ddl_model *m;
    const ddl_dataset *data;
    const ddl_allocator *alloc;
    int rank, world;
    long n_train;           /* samples used per epoch (train_limit applied) */
    int positions;          /* target positions per sample: th * tw */
    size_t sample_bytes;    /* c * h * w */
    uint32_t *perm;         /* (n_train) this epoch's order */
    float *x;               /* (model batch, c, h, w) normalised inputs */
    uint16_t *y;            /* (model batch, th, tw) targets */
    float *probs, *dlogits; /* (model batch, classes, positions) */
    float *opt_state;
    float *residual;        /* DDL_COMPRESS: this rank's rounding errors of the gradients, sent with the
                             * next step's (error feedback); NULL without compression */
    ddl__bucket *buckets;   /* for xch: NULL without a comm of 2 ranks or more */
    size_t n_buckets;
    ddl__exchange xch;      /* the gradient all-reduce (exchange.c) */
    int overlap;            /* 0, 1 or 2: the config's, else the comm's (ddl__trainer_exchange) */
    size_t bucket_bytes;    /* the config's bucket_kb, else the comm's, in bytes */
    long step;              /* optimizer steps done */
    int epoch;              /* current epoch, from 0 */
    long pos;               /* samples of this epoch consumed (global) */
    int perm_epoch;         /* epoch perm was built for, -1 for none */
    ddl_rng drop_rng;       /* dropout */
    double loss_sum;        /* this epoch, this rank: sum of per-sample losses */
    int64_t correct, counted; /* this epoch, this rank: positions */
    long epoch_start_pos;   /* pos and step when these statistics started (epoch start or resume) */
    long epoch_start_step;
    double epoch_secs;      /* this epoch, this rank: seconds spent in ddl_trainer_step */
    int64_t compute_ns;     /* this epoch, this rank: between gradient all-reduces (ddl_epoch_stats) */
    int64_t allreduce_ns;   /* this epoch, this rank: in gradient all-reduces */
    int64_t last_ar_end;    /* ddl_timeline_now() when the last all-reduce of this epoch ended, 0: none */
    float last_lr;          /* learning rate of the last step */
    int64_t *confusion;     /* (C x C) of the last evaluation, ddl_eval_stats.confusion points here */
    ddl_rng *rng_all;       /* (world) every rank's drop_rng, gathered by checkpoint saves */
    int64_t *steps_all;     /* (elastic max) every rank's step, gathered by a state transfer (elastic.c) */
    /* micro-batches (micro.c) */
    int micro;              /* parts of this rank's batch (1: the model alone) */
    int micro_max;          /* replicas built: the most parts a rank may hold (elastic: at the fewest ranks) */
    int shards, shard_first; /* cfg.shards (0: off; elastic: the comm's maximum world) and this rank's
                              * first shard: its parts are shards shard_first .. shard_first + micro - 1 */
    int elastic;            /* the comm is elastic: a failed collective regroups (elastic.c) */
    int regroups;           /* membership changes so far */
    ddl_model *replica[DDL_MAX_MICRO_BATCHES]; /* [0]: m; the others built by ddl__micro_start */
    ddl_rng micro_rng[DDL_MAX_MICRO_BATCHES];  /* each part's dropout, drawn from drop_rng */
    double micro_loss[DDL_MAX_MICRO_BATCHES];  /* this step's, per part */
    int64_t micro_correct[DDL_MAX_MICRO_BATCHES];
    int64_t micro_mid;      /* when part 0's forward (and loss) ended */
    char err[DDL_ERR_BYTES];
    ddl__syncbn sync;       /* cfg.sync_bn: BatchNorm over the whole global batch (syncbn.c) */
    struct ddl__saver *saver; /* rank 0: the background checkpoint writer (checkpoint_async.c), NULL until used */
};

/* micro-batches (micro.c). parts: how many for a configuration and a local batch. start: build
 * the replicas of t->m for t->micro parts (DDL_OK, or the failure in err); stop: free them.
 * pass: forward, loss and backward of n samples (t->x, t->y) of a global batch of b in parts,
 * their gradients added into t->m's, handed to the exchange if there is one (begun); returns
 * the loss summed over the samples, counts the correct ones; *mid: when part 0's forward ended. */
int ddl__micro_parts(const ddl_train_config *cfg, int local);
/* ddl__trainer_deal (state.c): this rank's block of the shards for t->rank of t->world (rank r holds shards
 * [r V / w, (r + 1) V / w)): shard_first and micro. */
void ddl__trainer_deal(ddl_trainer *t);
/* ddl__trainer_recover (elastic.c): after a trainer collective failed with rc: on an elastic comm,
 * regroup, bring the ranks that are behind to the leader's state (weights, optimizer state, step,
 * data position) and deal the shards again: DDL_OK, and the caller redoes its call (unless
 * *ahead: this rank received a later state, and the step in flight is already done). Otherwise,
 * or if the regroup fails, the failure (in t->err). */
int ddl__trainer_fail(ddl_trainer *t, int rc, const char *what); /* state.c: t->err = what failed, and why */
/* ddl__trainer_sync (elastic.c): collective: the leader's step, data position, weights and
 * optimizer state to every rank, then checked by a hash on all (DDL_EMISMATCH if one differs);
 * *ahead when this rank's step moved on. */
int ddl__trainer_sync(ddl_trainer *t, int leader, long top, int *ahead);
int ddl__trainer_recover(ddl_trainer *t, int rc, const char *what, int *ahead);
/* ddl__trainer_calls (calls.c): run a sequence of n collective calls so that it survives a regroup
 * on an elastic comm: prepare (or NULL) first, then call(t, ctx, i) for i = 0 .. n - 1, each
 * setting its own inputs whenever it is made. A call that fails regroups (ddl__trainer_recover);
 * then the sequence resumes at the call that failed, or with restart from prepare and call 0.
 * DDL_OK (*ahead, if not NULL: this rank took a later state in a regroup, and the sequence ended
 * there), or the failure (t->err says what). */
typedef struct ddl__calls {
    const char *what; /* for the messages: "epoch statistics" */
    int n;
    int (*call)(ddl_trainer *t, void *ctx, int i);
    int (*prepare)(ddl_trainer *t, void *ctx);
    int restart;
    int own_errors; /* the calls set t->err themselves: a failure no regroup helps is returned as it is */
} ddl__calls;
int ddl__trainer_calls(ddl_trainer *t, const ddl__calls *s, void *ctx, int *ahead);
/* ddl__trainer_write (checkpoint_write.c): this rank writes the trainer's state to path, or with
 * background hands it to the writer thread (checkpoint_async.c). rngs: world_rngs RNG states,
 * one per rank. Returns the status (t->err says why). */
int ddl__trainer_write(ddl_trainer *t, const char *path, const ddl_rng *rngs, int world_rngs, int background);
/* ddl__trainer_save_alone (checkpoint_write.c): this rank writes the trainer's state to path, with
 * no collective (elastic training's last survivors). */
int ddl__trainer_save_alone(ddl_trainer *t, const char *path);
int ddl__micro_start(ddl_trainer *t, char *err, size_t err_bytes);
void ddl__micro_stop(ddl_trainer *t);
double ddl__micro_pass(ddl_trainer *t, int n, int b, int64_t *mid);
/* ddl__trainer_reset_stats (state.c): start the statistics of an epoch at the current position (epoch
 * start, or resume). */
void ddl__trainer_reset_stats(ddl_trainer *t);
/* profiling (profile.c), with cfg.profile set: start: reset the profile, measure the peak and
 * time every model copy; step: add a step's times (ts as account()'s: start, forward, backward,
 * all-reduce, optimizer, end) and the layers' since the last; stop: untime the model. */
void ddl__trainer_profile_start(ddl_trainer *t);
void ddl__trainer_profile_step(ddl_trainer *t, const int64_t ts[6]);
void ddl__trainer_profile_epoch(ddl_trainer *t);
void ddl__trainer_profile_stop(ddl_trainer *t);
/* ddl__trainer_timing: fill the timing fields of *out (NULL: gather only), gathering every rank's
 * times (watch.c). Collective, surviving a regroup. DDL_OK or the failure (t->err). */
int ddl__trainer_timing(ddl_trainer *t, ddl_epoch_stats *out);

/* The background checkpoint writer (checkpoint_async.c). submit: src's state copied now into
 * the writer's snapshot (made at the first call, *s NULL, and kept), then encoded and written to
 * path by its thread; it first waits for the previous write and returns its failure, if any,
 * instead of saving. wait: until no write is in flight (at most 600 s: DDL_ETIMEDOUT), returning the last
 * write's status once. close: wait (at most as long), end the thread, free (s may be NULL); a write
 * still stuck after that is left to its thread, detached, with its memory. */
typedef struct ddl__saver ddl__saver;
int ddl__saver_submit(ddl__saver **s, const ddl_allocator *alloc, const char *path, const ddl__checkpoint_src *src,
                      char *err, size_t err_bytes);
int ddl__saver_wait(ddl__saver *s, char *err, size_t err_bytes);
/* ddl__saver_poll: 1 while a write is in flight, else the last write's status (not reset). */
int ddl__saver_poll(ddl__saver *s);
void ddl__saver_close(ddl__saver *s, const ddl_allocator *alloc);

#endif
