/* watch.c - what the trainer tells about its own speed: every rank's compute and all-reduce
 * time of the epoch, gathered for ddl_epoch_stats (which rank is the straggler, what fraction of
 * the time goes to communication), and a quick all-reduce probe at the gradient's size.
 * Measures only: never prints, allocates nothing. */
#include "impl.h"

#include <string.h>

/* Every rank's compute and all-reduce time, as two all-reduces whose results do not depend on
 * the world size (an elastic comm can hand either to a rank that missed it: comm/replay.c): the
 * sums, and the most and least compute time, each with its rank in the low bits. One sequence
 * of the trainer's recovery path (calls.c). */
#define RANK_BITS 12 /* ranks below 4096; 2^51 ns is 26 days */

typedef struct timing {
    int64_t sums[2], ends[2];
} timing;

static int timing_call(ddl_trainer *t, void *ctx, int i)
{
    timing *tm = ctx;
    ddl_comm *c = t->cfg.comm; /* none: this rank's own values */
    if (i == 0) {
        tm->sums[0] = t->compute_ns, tm->sums[1] = t->allreduce_ns;
        return c ? ddl_comm_allreduce(c, tm->sums, 2, DDL_INT64, DDL_SUM) : DDL_OK;
    }
    tm->ends[0] = t->compute_ns << RANK_BITS | t->rank, tm->ends[1] = -(t->compute_ns << RANK_BITS);
    return c ? ddl_comm_allreduce(c, tm->ends, 2, DDL_INT64, DDL_MAX) : DDL_OK;
}

int ddl__trainer_timing(ddl_trainer *t, ddl_epoch_stats *out)
{
    static const ddl__calls calls = {.what = "epoch timing", .n = 2, .call = timing_call};
    timing tm;
    int rc = ddl__trainer_calls(t, &calls, &tm, NULL);
    if (rc != DDL_OK || !out)
        return rc;
    const int64_t *sums = tm.sums, *ends = tm.ends;
    out->compute_seconds = (double)t->compute_ns * 1e-9;
    out->allreduce_seconds = (double)t->allreduce_ns * 1e-9;
    out->slowest_rank = (int)(ends[0] & ((1 << RANK_BITS) - 1));
    out->slowest_seconds = (double)(ends[0] >> RANK_BITS) * 1e-9;
    out->fastest_seconds = (double)(-ends[1] >> RANK_BITS) * 1e-9;
    out->comm_frac = sums[0] + sums[1] > 0 ? (double)sums[1] / (double)(sums[0] + sums[1]) : 0.0;
    return DDL_OK;
}

int ddl_trainer_probe(ddl_trainer *t, int reps, double *seconds)
{
    if (seconds)
        *seconds = 0.0;
    if (!t || reps < 1)
        return DDL_EINVAL;
    ddl_comm *c = t->cfg.comm;
    if (!c)
        return DDL_OK;
    ddl_model_zero_grads(t->m); /* sums of zeros stay zeros: nothing can overflow */
    int rc = ddl_comm_allreduce(c, t->m->grads, t->m->n_params, DDL_FLOAT32, DDL_SUM); /* warm-up */
    double t0 = ddl__now();
    for (int i = 0; i < reps && rc == DDL_OK; i++)
        rc = ddl_comm_allreduce(c, t->m->grads, t->m->n_params, DDL_FLOAT32, DDL_SUM);
    float mean = (float)((ddl__now() - t0) / reps);
    if (rc == DDL_OK) /* the slowest rank's time is everybody's */
        rc = ddl_comm_allreduce(c, &mean, 1, DDL_FLOAT32, DDL_MAX);
    if (rc != DDL_OK)
        return ddl__errf(t->err, sizeof t->err, rc, "all-reduce probe: %s: %s", ddl_strerror(rc), ddl_comm_error(c));
    if (seconds)
        *seconds = mean;
    return DDL_OK;
}
