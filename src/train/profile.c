/* profile.c - the trainer's side of a ddl_profile (ddl_train_config.profile): at set-up the peak
 * is measured (again at each epoch's statistics, the best kept) and every model copy told to
 * time its training passes; after each step the step's split is added and what each copy timed
 * is taken into the profile. Each copy times its own layers (micro-batches may run side by
 * side), so the sums happen here, on the trainer's thread, between steps. Nothing allocates. */
#include "impl.h"

#include <string.h>

/* cores: what a layer's time ran on: the parts side by side, a thread each (micro.c's rule), or
 * the kernels on every thread. */
static int cores(const ddl_trainer *t)
{
    int threads = ddl__threads();
    int side = t->micro > 1 && (t->sync.on || (threads > 1 && t->micro % threads == 0));
    return side ? 1 : threads;
}

void ddl__trainer_profile_start(ddl_trainer *t)
{
    ddl_profile *p = t->cfg.profile;
    if (!p)
        return;
    memset(p, 0, sizeof *p);
    p->peak_gflops = ddl_cpu_peak_gflops(&p->peak_isa);
    p->rank = t->rank, p->world = t->world;
    p->parts = t->micro, p->threads = ddl__threads(), p->cores = cores(t);
    for (int r = 0; r < t->micro_max; r++) {
        ddl_model_profile(t->replica[r], 1);
        (void)ddl_model_profile_take(t->replica[r], p); /* the layers described; nothing timed yet */
    }
}

void ddl__trainer_profile_step(ddl_trainer *t, const int64_t ts[6])
{
    ddl_profile *p = t->cfg.profile;
    p->steps++;
    p->data_ns += ts[1] - ts[0];
    p->compute_ns += ts[3] - ts[1];
    p->allreduce_ns += ts[4] - ts[3];
    p->optimizer_ns += ts[5] - ts[4];
    p->step_ns += ts[5] - ts[0];
    p->parts = t->micro, p->threads = ddl__threads(), p->cores = cores(t);
    for (int r = 0; r < t->micro_max; r++)
        (void)ddl_model_profile_take(t->replica[r], p);
}

void ddl__trainer_profile_epoch(ddl_trainer *t)
{
    ddl_profile *p = t->cfg.profile;
    if (!p)
        return;
    /* the best of this and every measure before: on a shared vCPU a slow spell can last the 80 ms
     * of one (80.5 GFLOP/s at a cnn's start on an AMD EPYC that measures 100), which would
     * overstate every layer's share of the peak by a quarter */
    const char *isa = NULL;
    double g = ddl_cpu_peak_gflops(&isa);
    if (g > p->peak_gflops)
        p->peak_gflops = g, p->peak_isa = isa;
}

void ddl__trainer_profile_stop(ddl_trainer *t)
{
    if (t->cfg.profile) /* the caller's own passes are not timed after the trainer */
        ddl_model_profile(t->m, 0);
}
