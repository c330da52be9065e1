/* elastic.c - the trainer's side of elastic training: a collective that failed on an elastic
 * comm becomes a regroup (ddl_comm_regroup), after which the ranks that live go on.
 *
 * Why the weights keep their bits: in elastic mode the global batch is V shards whose sample
 * ranges depend on the batch alone, each shard's gradient is computed the same way whoever holds
 * it (dropout keyed by seed, step and shard), and ddl_comm_allreduce_shards adds the V gradients
 * in one order whatever the dealing. The optimizer steps only after that all-reduce succeeded, so
 * a rank whose all-reduce failed still holds the weights before the step and redoes it with the
 * shards dealt among the survivors. A rank whose all-reduce had already completed (a ring can end
 * on some ranks before a late failure) is ahead: the regroup names the lowest rank that completed
 * the most steps; the ranks at that step send their state (step, data position, weights, optimizer
 * state) in stripes to the ranks behind, and a CRC of it is compared on all. */
#include "impl.h"

#include <stdio.h>
#include <string.h>

/* The state's transfer: every rank tells its step (an allgather); the ranks at the highest are
 * sources, the others targets. Weights and optimizer state are cut into as many stripes as there
 * are sources, and source i sends stripe i of both to every target, targets in rank order, so the
 * senders' work is shared and no rank forwards what it does not need (a chain broadcast makes
 * every rank copy all of it). The leader sends the step and data position first. */
#define SYNC_TAG 0x73796e63 /* "sync" */

/* stripe_start: where stripe i of k of n elements begins (the first n % k stripes one longer) */
static size_t stripe_start(size_t n, int k, int i)
{
    size_t q = n / (size_t)k, rem = n % (size_t)k;
    return q * (size_t)i + ((size_t)i < rem ? (size_t)i : rem);
}

static int stripes(ddl_comm *c, float *v, size_t n, int k, int i, int peer, int sending)
{
    size_t a = stripe_start(n, k, i), b = stripe_start(n, k, i + 1);
    if (b == a)
        return DDL_OK;
    return sending ? ddl_comm_send(c, peer, SYNC_TAG, v + a, (b - a) * sizeof(float))
                   : ddl_comm_recv(c, peer, SYNC_TAG, v + a, (b - a) * sizeof(float));
}

static int transfer(ddl_trainer *t, int leader, int64_t head[3], size_t n_opt, int *sources)
{
    ddl_comm *c = t->cfg.comm;
    int w = t->world, me = t->rank, k = 0, source = 0, rc = DDL_OK;
    int64_t top = t->step;
    if ((rc = ddl_comm_allgather(c, &top, t->steps_all, 1, DDL_INT64)) != DDL_OK)
        return rc;
    top = t->steps_all[leader];
    for (int r = 0; r < w; r++)
        if (t->steps_all[r] == top)
            source |= r == me, k++;
    *sources = k;
    for (int b = 0; b < w && rc == DDL_OK; b++) {
        if (t->steps_all[b] == top || (!source && b != me))
            continue; /* b is up to date; or this rank is a target other than b */
        if (me == leader)
            rc = ddl_comm_send(c, b, SYNC_TAG, head, 3 * sizeof(int64_t));
        else if (me == b)
            rc = ddl_comm_recv(c, leader, SYNC_TAG, head, 3 * sizeof(int64_t));
        for (int r = 0, i = 0; r < w && rc == DDL_OK; r++) {
            if (t->steps_all[r] != top)
                continue;
            if (r == me || me == b) {
                int sending = r == me, peer = sending ? b : r;
                rc = stripes(c, t->m->params, t->m->n_params, k, i, peer, sending);
                if (rc == DDL_OK && t->m->n_buffers) /* BatchNorm's running statistics */
                    rc = stripes(c, t->m->buffers, t->m->n_buffers, k, i, peer, sending);
                if (rc == DDL_OK && n_opt)
                    rc = stripes(c, t->opt_state, n_opt, k, i, peer, sending);
            }
            i++;
        }
    }
    return rc;
}

static uint32_t state_crc(const ddl_trainer *t, size_t n_opt)
{
    uint32_t crc = ddl_crc32(0, t->m->params, t->m->n_params * sizeof(float));
    if (t->m->n_buffers)
        crc = ddl_crc32(crc, t->m->buffers, t->m->n_buffers * sizeof(float));
    return ddl_crc32(crc, t->opt_state, n_opt * sizeof(float));
}

int ddl__trainer_sync(ddl_trainer *t, int leader, long top, int *ahead)
{
    ddl_comm *c = t->cfg.comm;
    int64_t head[3] = {t->step, t->pos, t->epoch};
    long was = t->step;
    size_t n_opt = ddl_optim_state_floats(&t->cfg.optim, t->m->n_params);
    /* the hash: every rank's CRC-32 of weights and optimizer state; the largest and the smallest
     * (as the largest of its negation) must be ours. A rank with the newest state hashes it while
     * it waits for the others (a joiner sets up), the others once they received it. */
    uint32_t crc = t->step == top ? state_crc(t, n_opt) : 0;
    int rc = ddl_comm_barrier(c), sources = 0; /* a joiner may still be setting up: timed from here */
    int64_t t0 = ddl_timeline_now();
    if (rc == DDL_OK)
        rc = transfer(t, leader, head, n_opt, &sources);
    if (rc == DDL_OK && head[0] != (int64_t)was)
        crc = state_crc(t, n_opt);
    int64_t hash[2] = {(int64_t)crc, -(int64_t)crc};
    if (rc == DDL_OK)
        rc = ddl_comm_allreduce(c, hash, 2, DDL_INT64, DDL_MAX);
    if (rc != DDL_OK)
        return rc;
    if (hash[0] != (int64_t)crc || -hash[1] != (int64_t)crc)
        return ddl__errf(t->err, sizeof t->err, DDL_EMISMATCH, "state transfer at step %ld: rank %d holds CRC %08x "
                         "of weights and optimizer state, others %08llx to %08llx", (long)head[0], t->rank,
                         (unsigned)crc, (unsigned long long)-hash[1], (unsigned long long)hash[0]);
    t->step = (long)head[0];
    t->pos = (long)head[1];
    t->epoch = (int)head[2];
    *ahead = t->step > was;
    double ms = (double)(ddl_timeline_now() - t0) * 1e-6, mb = (double)(t->m->n_params + n_opt) * 4e-6;
    if (*ahead || t->rank == leader) /* verbose: the regroup's line (its leader's) says ranks take the state */
        ddl__log(t->cfg.log, t->cfg.log_ud, DDL_LOG_INFO, "elastic: state %s %d rank%s (in stripes; the step from rank "
                 "%d) at step %ld: %.1f MB (weights and optimizer state) in %.1f ms, %.3f GB/s, CRC %08x on every "
                 "rank", *ahead ? "received from" : "sent by", sources, sources == 1 ? "" : "s", leader, t->step, mb,
                 ms, ms > 0 ? mb / ms : 0.0, (unsigned)crc);
    if (*ahead) /* this epoch's statistics count from here on this rank */
        ddl__trainer_reset_stats(t);
    return DDL_OK;
}

/* stop_below_min: fewer than the minimum live: the survivor with the newest state (the leader)
 * writes it to cfg.stop_checkpoint, alone; every survivor fails saying so. */
static int stop_below_min(ddl_trainer *t, int st, const char *what, const ddl_regroup *g)
{
    const char *path = t->cfg.stop_checkpoint;
    char saved[512] = "no checkpoint written (none asked for)";
    if (path && g->rank == g->leader && t->step == g->step) {
        int rc = ddl__trainer_save_alone(t, path);
        if (rc == DDL_OK)
            snprintf(saved, sizeof saved, "checkpoint %.200s written by this rank at step %ld: resume from it",
                     path, t->step);
        else
            snprintf(saved, sizeof saved, "could not write checkpoint %.200s: %.200s", path, t->err);
        ddl__log(t->cfg.log, t->cfg.log_ud, rc == DDL_OK ? DDL_LOG_WARN : DDL_LOG_ERROR, "elastic: %s", saved);
    } else if (path) {
        snprintf(saved, sizeof saved, "rank %d of the survivors (step %ld) writes checkpoint %.200s", g->leader,
                 g->step, path);
    }
    return ddl__errf(t->err, sizeof t->err, st, "%s at step %ld failed (%.200s), and the job stops: %.300s; %s",
                     what, t->step, g->why, ddl_comm_error(t->cfg.comm), saved);
}

int ddl__trainer_recover(ddl_trainer *t, int rc, const char *what, int *ahead)
{
    *ahead = 0;
    if (!t->elastic || (rc != DDL_EPEER && rc != DDL_ETIMEDOUT))
        return ddl__trainer_fail(t, rc, what);
    ddl_comm *c = t->cfg.comm;
    for (;;) { /* a failure during the state's transfer regroups again, with fewer */
        ddl_regroup g;
        int old_world = ddl_comm_size(c);
        int st = ddl_comm_regroup(c, t->step, &g);
        if (st != DDL_OK && g.below_min)
            return stop_below_min(t, st, what, &g);
        if (st != DDL_OK)
            return ddl__errf(t->err, sizeof t->err, st, "%s at step %ld failed (%s), and no regroup followed: %s",
                             what, t->step, g.why, ddl_comm_error(c));
        char lost[64] = "none lost";
        if (g.n_lost == 0 && g.world > old_world)
            snprintf(lost, sizeof lost, "%d joined", g.world - old_world);
        for (int k = 0, n = 0; k < g.n_lost && n < (int)sizeof lost - 16; k++)
            n += snprintf(lost + n, sizeof lost - (size_t)n, "%s%d", k ? "," : g.n_lost == 1 ? "lost rank " : "lost ranks ",
                          g.lost[k]);
        t->rank = g.rank;
        t->world = g.world;
        t->regroups++;
        ddl__trainer_deal(t);
        /* one line a regroup, from its leader; each rank's own part only at DDL_LOG_INFO */
        ddl__log(t->cfg.log, t->cfg.log_ud, g.rank == g.leader ? DDL_LOG_WARN : DDL_LOG_INFO,
                 "elastic: world %d -> %d at step %ld (%s; regroup %d took %.0f ms%s); cause: %s", old_world, g.world,
                 g.step, lost, g.generation, g.ms, g.behind ? ", ranks behind take the leader's state" : "", g.why);
        ddl__log(t->cfg.log, t->cfg.log_ud, DDL_LOG_INFO, "elastic: this rank is now %d of %d, shards %d..%d of %d "
                 "(regroup %d)", g.rank, g.world, t->shard_first, t->shard_first + t->micro - 1, t->shards, g.generation);
        int64_t now = ddl_timeline_now();
        ddl_timeline_span(t->cfg.timeline, DDL_SPAN_REGROUP, t->step, now - (int64_t)(g.ms * 1e6), now,
                          (uint64_t)g.world);
        if (!g.behind || (st = ddl__trainer_sync(t, g.leader, g.step, ahead)) == DDL_OK)
            return DDL_OK;
        rc = st;
    }
}
