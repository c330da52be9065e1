/* state.c - the trainer's small changes of state that the loop, the recovery (elastic.c) and
 * resuming (checkpoint_train.c) share: the shards dealt for a rank, an epoch's statistics begun
 * again, a failure recorded. Below the three, so that none reaches back into another. */
#include "impl.h"

void ddl__trainer_deal(ddl_trainer *t)
{
    if (!t->shards)
        return;
    t->shard_first = t->rank * t->shards / t->world;
    t->micro = (t->rank + 1) * t->shards / t->world - t->shard_first;
}

void ddl__trainer_reset_stats(ddl_trainer *t)
{
    t->loss_sum = 0.0;
    t->correct = t->counted = 0;
    t->epoch_start_pos = t->pos;
    t->epoch_start_step = t->step;
    t->epoch_secs = 0.0;
    t->compute_ns = t->allreduce_ns = 0;
    t->last_ar_end = 0;
}

int ddl__trainer_fail(ddl_trainer *t, int rc, const char *what)
{
    const char *detail = t->cfg.comm ? ddl_comm_error(t->cfg.comm) : "";
    ddl__errf(t->err, sizeof t->err, rc, "%s at step %ld: %s%s%s", what, t->step, ddl_strerror(rc),
              detail[0] ? ": " : "", detail);
    return rc;
}
