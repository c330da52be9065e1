/* checkpoint_impl.h - private to src/checkpoint.c (the file format) and src/checkpoint_train.c
 * (saving and resuming a trainer): the reader's object and the writer's input. Not API. */
#ifndef DDL_CHECKPOINT_IMPL_H
#define DDL_CHECKPOINT_IMPL_H
#include "model_impl.h"

struct ddl_checkpoint {
    const ddl_allocator *alloc;
    ddl_checkpoint_info info;
    ddl_param_info tensors[DDL_MAX_PARAMS];
    char names[DDL_MAX_PARAMS][DDL__NAME_BYTES];
    ddl_rng *rngs;  /* (info.world_size) every rank's dropout RNG */
    float *params;  /* (info.n_params) */
    float *optim;   /* (info.n_optim), NULL when n_optim is 0 */
};

/* What ddl__checkpoint_write puts in a file: the model's tensors, weights and normalisation,
 * plus the fields of info that are not the model's (optim, step, epoch, pos, n_train, batch,
 * seed, world_size); the rest of info is filled from m. */
typedef struct ddl__checkpoint_src {
    const ddl_model *m;
    ddl_checkpoint_info info;
    const ddl_rng *rngs;  /* (info.world_size) */
    const float *optim;   /* (info.n_optim) */
} ddl__checkpoint_src;

/* ddl__checkpoint_write: write src to path atomically (path.tmp, fsync, rename, fsync of the
 * directory). The file image is allocated from alloc for the duration of the call. */
int ddl__checkpoint_write(const char *path, const ddl_allocator *alloc, const ddl__checkpoint_src *src, char *err,
                          size_t err_bytes);

#endif
