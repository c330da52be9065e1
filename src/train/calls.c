/* calls.c - the trainer's one recovery path: a sequence of collective calls that survives a
 * regroup (ddl__trainer_calls). Every place the trainer calls collectives goes through it: the
 * initial weights' broadcast, a step's shard all-reduce, the epoch's statistics and timing, the
 * evaluation, a checkpoint save, and a program's own calls (ddl_trainer_collectives and
 * ddl_trainer_allreduce_int).
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

/* ddl_trainer_collectives: a program's own sequence of calls, on the same path */
typedef struct program_run {
    int (*call)(void *ud, ddl_comm *comm, int i);
    void *ud;
} program_run;

static int program_call(ddl_trainer *t, void *ctx, int i)
{
    program_run *r = ctx;
    return r->call(r->ud, t->cfg.comm, i);
}

int ddl_trainer_collectives(ddl_trainer *t, const char *what, int n, int (*call)(void *ud, ddl_comm *comm, int i),
                            void *ud, int restart)
{
    if (!t || n < 0 || (n > 0 && !call))
        return DDL_EINVAL;
    if (!t->cfg.comm || n == 0)
        return DDL_OK;
    const ddl__calls calls = {.what = what && *what ? what : "a program's collectives", .n = n, .call = program_call,
                              .restart = restart ? 1 : 0};
    program_run r = {call, ud};
    int ahead = 0, rc = ddl__trainer_calls(t, &calls, &r, &ahead);
    if (rc == DDL_OK && ahead) /* between steps every rank is at one step: a joiner takes the state, not a
                                * rank in this sequence; should one, its results are not the sequence's */
        return ddl__errf(t->err, sizeof t->err, DDL_EPEER, "%s: this rank took the leader's state in a regroup, "
                         "so its results are not the sequence's", calls.what);
    return rc;
}

/* ddl_trainer_allreduce_int: one call of a program's own, from the value the program gave
 * whatever an attempt left */
typedef struct int_run {
    int64_t mine, *value;
    int op;
} int_run;

static int int_call(void *ud, ddl_comm *comm, int i)
{
    (void)i;
    int_run *r = ud;
    *r->value = r->mine;
    return ddl_comm_allreduce(comm, r->value, 1, DDL_INT64, r->op);
}

int ddl_trainer_allreduce_int(ddl_trainer *t, int64_t *value, int op)
{
    if (!t || !value || (op != DDL_SUM && op != DDL_MAX))
        return DDL_EINVAL;
    int_run r = {*value, value, op};
    return ddl_trainer_collectives(t, "all-reduce between steps", 1, int_call, &r, 0);
}
