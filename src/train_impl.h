/* train_impl.h - the private layout of ddl_trainer, shared by train.c and checkpoint.c. */
#ifndef DDL_TRAIN_IMPL_H
#define DDL_TRAIN_IMPL_H
#include "model_impl.h"

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
    uint8_t *y;             /* (model batch, th, tw) targets */
    float *probs, *dlogits; /* (model batch, classes, positions) */
    float *opt_state;
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
    ddl_rng *rng_all;       /* (world) every rank's drop_rng, gathered by checkpoint saves */
    char err[DDL_ERR_BYTES];
};

#endif
