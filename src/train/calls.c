/* calls.c - the trainer's one recovery path: a sequence of collective calls that survives a
 * regroup (ddl__trainer_calls). Every place the trainer calls collectives goes through it: the
 * initial weights' broadcast, a step's shard all-reduce, the epoch's statistics and timing, the
 * evaluation, a checkpoint save and ddl_trainer_allreduce_int.
 *
 * Why one path: a collective can complete on some ranks and fail on others (a ring's last step).
 * After the regroup each rank goes on at the call that failed for it: the ranks that completed
 * call i retry i + 1, the others retry i and are handed the result a rank that completed it kept
 * (comm/replay.c), so the calls match again. Written out at each site, one site resumed a pair of
 * calls differently from another. And a failed all-reduce leaves its buffer half reduced, so
 * each call sets its own inputs every time it is made, never reusing what an attempt left.
 *
 * Some sequences carry what depends on the world: the initial weights come from the new rank 0,
 * a step's gradients from the shards dealt again, an evaluation from each rank's new part. They
 * start again from their first call after a regroup (restart), with prepare run again. A rank
 * that took a later state in the regroup (the leader's weights: it was a step behind) ends the
 * sequence: the rank it took the state from had completed it. */
#include "impl.h"

int ddl__trainer_calls(ddl_trainer *t, const ddl__calls *s, void *ctx, int *ahead)
{
    int rc = DDL_OK, i = 0, took = 0;
    if (ahead)
        *ahead = 0;
    if (s->prepare && (rc = s->prepare(t, ctx)) != DDL_OK)
        return rc;
    while (i < s->n) {
        if ((rc = s->call(t, ctx, i)) == DDL_OK) {
            i++;
            continue;
        }
        if (s->own_errors && (!t->elastic || (rc != DDL_EPEER && rc != DDL_ETIMEDOUT)))
            return rc; /* no regroup helps, and the call said what failed */
        if ((rc = ddl__trainer_recover(t, rc, s->what, &took)) != DDL_OK)
            return rc;
        if (took) {
            if (ahead)
                *ahead = 1;
            return DDL_OK;
        }
        if (s->restart) {
            i = 0;
            if (s->prepare && (rc = s->prepare(t, ctx)) != DDL_OK)
                return rc;
        }
    }
    return DDL_OK;
}

/* ddl_trainer_allreduce_int: a program's own value between steps, one call of the recovery path
 * (calls.c), from the value the program gave whatever an attempt left. */
typedef struct int_run {
    int64_t mine, *value;
    int op;
} int_run;

static int int_call(ddl_trainer *t, void *ctx, int i)
{
    (void)i;
    int_run *r = ctx;
    *r->value = r->mine;
    return ddl_comm_allreduce(t->cfg.comm, r->value, 1, DDL_INT64, r->op);
}

int ddl_trainer_allreduce_int(ddl_trainer *t, int64_t *value, int op)
{
    if (!t || !value || (op != DDL_SUM && op != DDL_MAX))
        return DDL_EINVAL;
    if (!t->cfg.comm)
        return DDL_OK;
    static const ddl__calls calls = {.what = "all-reduce between steps", .n = 1, .call = int_call};
    int_run r = {*value, value, op};
    return ddl__trainer_calls(t, &calls, &r, NULL);
}
