/* micro.c - micro-batches: a rank's batch cut into parts, each through its own copy of the model
 * (a replica: the same plugin and parameters, its own gradients and activations), the parts'
 * gradients then added into the model's in part order. The cut depends only on the batch and
 * the configuration, never on the thread count, so the sums are the same bits at any count.
 *
 * Why: threads inside each kernel hand every activation from core to core between kernels (a
 * kernel cut by samples, the next by channels or columns), and a core that writes lines the other
 * holds must first have them invalidated. A part per thread keeps each sample's data on one core
 * from the first layer to the last; only the weights (read by all) and the gradients (added once)
 * cross. LeNet at 2 threads, one step (a harness of 2 replicas of batch 32 against one model of
 * 64 with the pool in each kernel, 3 alternated runs): 846-974 us against 961-1039; the parts
 * one after another on 1 thread cost what the whole batch does (1536-1581 us against 1495-1562).
 *
 * With as many threads as parts, or a divisor, the parts run side by side on the pool (a
 * kernel called inside a task runs on its thread); otherwise one after another, each with the
 * pool in its kernels. Replica 0 is the trainer's model itself; the others are built at set-up
 * and take the model's parameters at the start of every part. With 2 ranks or more the
 * gradient all-reduce can start only once the parts are added, so nothing would overlap
 * backward (DDL_OVERLAP): there "auto" makes one part, and the trainer warns when parts and
 * overlap are both asked for. */
#include "impl.h"

#include <stdio.h>
#include <string.h>

#define PART_SAMPLES 32 /* samples a part when the configuration says 0 (auto) */

int ddl__micro_parts(const ddl_train_config *cfg, int local)
{
    if (cfg->shards > 0) /* the block of shards: ddl__trainer_deal */
        return 1;
    if (cfg->micro_batches == 0 && ddl_comm_size(cfg->comm) > 1)
        return 1; /* ranks keep what DDL_OVERLAP overlaps (parts end only after the last backward) */
    int parts = cfg->micro_batches > 0 ? cfg->micro_batches : local / PART_SAMPLES;
    if (parts > local)
        parts = local;
    if (parts > DDL_MAX_MICRO_BATCHES)
        parts = DDL_MAX_MICRO_BATCHES;
    return parts < 1 ? 1 : parts;
}

int ddl__micro_start(ddl_trainer *t, char *err, size_t err_bytes)
{
    ddl_model *m = t->m;
    t->replica[0] = m;
    ddl_model_config mc = m->cfg;
    mc.batch = t->shards ? (t->cfg.batch + t->shards - 1) / t->shards : (m->cfg.batch + t->micro - 1) / t->micro;
    for (int r = 1; r < t->micro_max; r++) {
        char why[DDL_ERR_BYTES];
        int rc = ddl_model_create(m->plugin, &mc, t->alloc, &t->replica[r], why, sizeof why);
        if (rc == DDL_OK && t->replica[r]->n_params != m->n_params) {
            rc = DDL_EINVAL;
            snprintf(why, sizeof why, "%s has %zu parameters at batch %d, %zu at %d", m->plugin->name,
                     t->replica[r]->n_params, mc.batch, m->n_params, m->cfg.batch);
        }
        if (rc != DDL_OK) {
            ddl__micro_stop(t);
            return ddl__errf(err, err_bytes, rc, "micro-batch %d of %d: %s", r + 1, t->micro_max, why);
        }
    }
    return DDL_OK;
}

void ddl__micro_stop(ddl_trainer *t)
{
    for (int r = 1; r < DDL_MAX_MICRO_BATCHES; r++) {
        ddl_model_destroy(t->replica[r]);
        t->replica[r] = NULL;
    }
}

typedef struct micro_job {
    ddl_trainer *t;
    int n, b;        /* this rank's samples; the global batch */
} micro_job;

/* part_in: forward, loss and backward of part r on replica r, its gradients zeroed first. */
static void part_in(void *ctx, int r)
{
    const micro_job *j = ctx;
    ddl_trainer *t = j->t;
    ddl_model *m = t->replica[r];
    int C = t->m->out_c, S = t->positions, lo = (int)((int64_t)j->n * r / t->micro);
    int cnt = (int)((int64_t)j->n * (r + 1) / t->micro) - lo;
    if (t->shards) { /* shard k's samples are [b k / V, b (k + 1) / V) of the global batch, whoever holds it */
        int64_t k = t->shard_first + r, V = t->shards, base = (int64_t)j->b * t->shard_first / V;
        lo = (int)((int64_t)j->b * k / V - base);
        cnt = (int)((int64_t)j->b * (k + 1) / V - base) - lo;
    }
    size_t out = (size_t)lo * C * S;
    if (r > 0) {
        memcpy(m->params, t->m->params, m->n_params * sizeof(float));
        memcpy(m->buffers, t->m->buffers, m->n_buffers * sizeof(float));
        memcpy(m->next, t->m->buffers, m->n_buffers * sizeof(float)); /* a part of no samples: no change */
    }
    memset(m->grads, 0, m->n_params * sizeof(float));
    t->micro_loss[r] = 0.0;
    t->micro_correct[r] = 0;
    if (t->sync.on && cnt < 1) { /* no samples: the BatchNorm rounds alone, which the others wait for */
        ddl_model_forward(m, t->x, 0, 1, &t->micro_rng[r]);
        ddl_model_backward(m, t->x, 0, t->dlogits);
    }
    if (cnt < 1)
        return;
    if (t->sync.on)
        t->sync.first[r] = t->sync.base + lo;
    const float *x = t->x + (size_t)lo * t->sample_bytes;
    const uint16_t *y = t->y + (size_t)lo * S;
    const float *logits = ddl_model_forward(m, x, cnt, 1, &t->micro_rng[r]);
    double loss = ddl_softmax_xent(cnt, C, S, logits, y, 1.0f / ((float)j->b * (float)S), t->probs + out,
                                   t->dlogits + out) / S;
    if (t->cfg.dice_weight > 0.0f)
        loss += t->cfg.dice_weight *
                ddl_dice_loss(cnt, C, S, t->probs + out, y, t->cfg.dice_weight / (float)j->b, t->dlogits + out);
    t->micro_loss[r] = loss;
    t->micro_correct[r] = ddl__count_correct(logits, y, cnt, C, S, NULL);
    if (r == 0)
        t->micro_mid = ddl_timeline_now();
    ddl_model_backward(m, x, cnt, t->dlogits + out);
}

/* part: part_in in the trainer's precision: sync_bn's part threads are not the pool's, which
 * carries it to its tasks. */
static void part(void *ctx, int r)
{
    int was = ddl__set_precision(((const micro_job *)ctx)->t->cfg.precision);
    part_in(ctx, r);
    ddl__set_precision(was);
}

/* add_parts: the model's gradients += every other part's, in part order, element by element
 * (with the tails: the buffers' next values, which combine_buffers in train.c averages). */
static void add_parts(void *ctx, size_t lo, size_t hi)
{
    const ddl_trainer *t = ctx;
    float *g = t->m->grads;
    for (int r = 1; r < t->micro; r++) {
        const float *p = t->replica[r]->grads;
        for (size_t i = lo; i < hi; i++)
            g[i] += p[i];
    }
}

double ddl__micro_pass(ddl_trainer *t, int n, int b, int64_t *mid)
{
    micro_job j = {t, n, b};
    t->micro_mid = ddl_timeline_now(); /* part 0's forward ends later, unless it has no samples */
    for (int r = 0; r < t->micro; r++) /* shards: a function of the shard and the step alone */
        ddl_rng_seed(&t->micro_rng[r], t->shards ? t->cfg.seed ^ ((uint64_t)(t->step + 1) << 20) ^
                                                       (uint64_t)(t->shard_first + r) * 0x9E3779B97F4A7C15ull
                                                 : ddl_rng_next(&t->drop_rng));
    int threads = ddl__threads();
    if (t->sync.on) /* the parts meet at every BatchNorm layer: side by side on threads of their own */
        ddl__syncbn_run(t, part, &j);
    else if (threads > 1 && t->micro % threads == 0)
        ddl__parallel(t->micro, part, &j);
    else
        for (int r = 0; r < t->micro; r++)
            part(&j, r);
    if (!t->shards) /* shards: ddl_comm_allreduce_shards adds them (train.c); sync_bn: every part's
                     * buffers are the same, the model's own are kept */
        ddl__parallel_range(t->m->n_params + (t->sync.on ? 0 : t->m->n_buffers), 16384, add_parts, t);
    if (t->buckets) /* only now are the gradients final: every bucket is cut after (no overlap) */
        ddl__exchange_begin(&t->xch);
    double loss = 0.0;
    for (int r = 0; r < t->micro; r++) {
        loss += t->micro_loss[r];
        t->correct += t->micro_correct[r];
    }
    t->counted += (int64_t)n * t->positions;
    *mid = t->micro_mid;
    return loss;
}
