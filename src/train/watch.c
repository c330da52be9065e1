/* watch.c - what the trainer tells about its own speed: every rank's compute and all-reduce
 * time of the epoch, gathered for ddl_epoch_stats (which rank is the straggler, what fraction of
 * the time goes to communication), and a quick all-reduce probe at the gradient's size.
 * Measures only: never prints, allocates nothing (the gather buffer is the trainer's). */
#include "impl.h"

#include <string.h>

int ddl__trainer_timing(ddl_trainer *t, ddl_epoch_stats *out)
{
    int64_t mine[2] = {t->compute_ns, t->allreduce_ns};
    if (t->cfg.comm) {
        int rc = ddl_comm_allgather(t->cfg.comm, mine, t->timing_all, 2, DDL_INT64);
        if (rc != DDL_OK)
            return rc;
    } else {
        memcpy(t->timing_all, mine, sizeof mine);
    }
    if (!out)
        return DDL_OK;
    out->compute_seconds = (double)mine[0] * 1e-9;
    out->allreduce_seconds = (double)mine[1] * 1e-9;
    int64_t compute = 0, comm = 0, slow = -1, fast = INT64_MAX;
    for (int r = 0; r < t->world; r++) {
        int64_t c = t->timing_all[2 * r], a = t->timing_all[2 * r + 1];
        compute += c;
        comm += a;
        if (c > slow) {
            slow = c;
            out->slowest_rank = r;
        }
        fast = c < fast ? c : fast;
    }
    out->slowest_seconds = (double)slow * 1e-9;
    out->fastest_seconds = (double)fast * 1e-9;
    out->comm_frac = compute + comm > 0 ? (double)comm / (double)(compute + comm) : 0.0;
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
