/* optim.c - optimizers (SGD with momentum, Adam) and learning-rate schedules over flat
 * buffers. Follows PyTorch's update rules so results can be compared with it. */
#include "impl.h"

#include <math.h>

/* ---- optimizers ---- */

size_t ddl_optim_state_floats(const ddl_optim_config *cfg, size_t n)
{
    return cfg->kind == DDL_OPTIM_ADAM ? 2 * n : n;
}

/* PyTorch SGD: g = grad + wd p; buf = momentum buf + g; p -= lr buf. buf starts at 0, which
 * equals PyTorch's buf = g on the first step. */
static void sgd_step(const ddl_optim_config *cfg, float lr, float *p, const float *g, float *buf, size_t n)
{
    const float wd = cfg->weight_decay, mu = cfg->momentum;
    if (mu == 0.0f) {
        for (size_t i = 0; i < n; i++)
            p[i] -= lr * (g[i] + wd * p[i]);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] + wd * p[i];
        buf[i] = mu * buf[i] + gi;
        p[i] -= lr * buf[i];
    }
}

/* PyTorch Adam (L2 weight decay added to the gradient): first moments mo, second ve. */
static void adam_step(const ddl_optim_config *cfg, float lr, long step, float *p, const float *g, float *mo,
                      float *ve, size_t n)
{
    const float b1 = cfg->beta1, b2 = cfg->beta2, eps = cfg->eps, wd = cfg->weight_decay;
    const float c1 = 1.0f - (float)pow(b1, (double)step), c2 = 1.0f - (float)pow(b2, (double)step);
    const float step_size = lr / c1, rc2 = 1.0f / sqrtf(c2);
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] + wd * p[i];
        mo[i] = b1 * mo[i] + (1.0f - b1) * gi;
        ve[i] = b2 * ve[i] + (1.0f - b2) * gi * gi;
        p[i] -= step_size * mo[i] / (sqrtf(ve[i]) * rc2 + eps);
    }
}

/* Threads: every element is updated alone, so ranges of them go to the pool and where the cuts
 * fall changes no bit. */
#define OPTIM_GRAIN ((size_t)8192)

typedef struct optim_job {
    const ddl_optim_config *cfg;
    float lr;
    long step;
    float *p, *state;
    const float *g;
    size_t n;
} optim_job;

static void optim_range(void *ctx, size_t lo, size_t hi)
{
    const optim_job *j = ctx;
    if (j->cfg->kind == DDL_OPTIM_ADAM) { /* state: m (n), then v (n) */
        float *ms = j->state + lo, *vs = j->state + j->n + lo;
        adam_step(j->cfg, j->lr, j->step, j->p + lo, j->g + lo, ms, vs, hi - lo);
    } else {
        sgd_step(j->cfg, j->lr, j->p + lo, j->g + lo, j->state + lo, hi - lo);
    }
}

void ddl_optim_step(const ddl_optim_config *cfg, float lr, long step, float *params, const float *grads,
                    float *state, size_t n)
{
    optim_job j = {cfg, lr, step < 1 ? 1 : step, params, state, grads, n};
    ddl__parallel_range(n, OPTIM_GRAIN, optim_range, &j);
}

/* ---- schedules ---- */

float ddl_schedule_lr(const ddl_schedule *s, float base_lr, long step)
{
    if (!s)
        return base_lr;
    if (s->warmup_steps > 0 && step < s->warmup_steps)
        return base_lr * (float)(step + 1) / (float)s->warmup_steps;
    long t = step - (s->warmup_steps > 0 ? s->warmup_steps : 0);
    switch (s->kind) {
    case DDL_SCHED_STEP:
        if (s->step_size <= 0)
            return base_lr;
        return base_lr * (float)pow((double)s->gamma, (double)(t / s->step_size));
    case DDL_SCHED_COSINE: {
        long span = s->total_steps - (s->warmup_steps > 0 ? s->warmup_steps : 0);
        if (span <= 0)
            return base_lr;
        double f = t >= span ? 1.0 : (double)t / (double)span;
        return s->min_lr + (base_lr - s->min_lr) * (float)(0.5 * (1.0 + cos(3.14159265358979323846 * f)));
    }
    default:
        return base_lr;
    }
}
