/* checkpoint_write.c - one rank writes the trainer's state to a checkpoint: rank 0 of a save
 * (checkpoint_train.c, the collective protocol), or a survivor alone (elastic.c, below the
 * elastic minimum). It fills the file format's input (src/formats/checkpoint.h) from the trainer
 * and writes it now, or hands it to the background writer (checkpoint_async.c). */
#include "impl.h"

#include <string.h>

int ddl__trainer_write(ddl_trainer *t, const char *path, const ddl_rng *rngs, int world_rngs, int background)
{
    ddl__checkpoint_src src;
    memset(&src, 0, sizeof src);
    src.m = t->m;
    src.info.optim = t->cfg.optim;
    src.info.n_optim = ddl_optim_state_floats(&t->cfg.optim, t->m->n_params);
    src.info.step = t->step;
    src.info.epoch = t->epoch;
    src.info.pos = t->pos;
    src.info.n_train = t->n_train;
    src.info.batch = t->cfg.batch;
    src.info.seed = t->cfg.seed;
    src.info.world_size = world_rngs;
    src.rngs = rngs;
    src.optim = t->opt_state;
    src.bytes_per_sec = t->cfg.save_bytes_per_sec;
    unsigned char *desc = NULL;
    if (ddl__checkpoint_desc_encode(t->m, t->data ? t->data->class_names : NULL, t->data ? t->data->n_classes : 0,
                                    t->alloc, &desc, &src.desc_bytes) != DDL_OK)
        src.desc_bytes = 0; /* the weights matter more than their description: saved without */
    src.desc = desc;
    int status = !path ? ddl__errf(t->err, sizeof t->err, DDL_EINVAL, "ddl_trainer_save: no path")
                 : background ? ddl__saver_submit(&t->saver, t->alloc, path, &src, t->err, sizeof t->err)
                 : ddl__saver_wait(t->saver, t->err, sizeof t->err); /* an earlier background write first */
    if (path && !background && status != DDL_OK) /* said, and this save still made */
        ddl__log(t->cfg.log, t->cfg.log_ud, DDL_LOG_WARN, "%s", t->err);
    if (path && !background)
        status = ddl__checkpoint_write(path, t->alloc, &src, t->err, sizeof t->err);
    ddl__free(t->alloc, desc);
    return status;
}

int ddl__trainer_save_alone(ddl_trainer *t, const char *path)
{
    return ddl__trainer_write(t, path, &t->drop_rng, 1, 0); /* with shards no rank's RNG state matters (micro.c) */
}
