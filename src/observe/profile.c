/* profile.c - a ddl_profile as the table a program prints: a line per layer with its time per
 * step forward and backward, its GFLOP/s and their share of the cores' peak, then the layers'
 * sum and the step's split. Only formats: the trainer (src/train/profile.c) and the model
 * (src/core/profile.c) fill the struct. */
#include "impl.h"

#include <string.h>

static double ms(int64_t ns, int64_t steps) { return (double)ns * 1e-6 / (double)(steps > 0 ? steps : 1); }

static double pct(int64_t part, int64_t whole) { return whole > 0 ? 100.0 * (double)part / (double)whole : 0.0; }

/* rate: GFLOP/s and share of the peak of flops done in ns into a "%9.1f %7.1f"-wide field. */
static void rate(ddl__text *o, double flops, int64_t ns, double peak)
{
    if (flops <= 0 || ns <= 0) {
        ddl__text_put(o, " %9s %7s\n", "-", "-");
        return;
    }
    double g = flops / (double)ns;
    if (peak > 0)
        ddl__text_put(o, " %9.1f %6.1f%%\n", g, 100.0 * g / peak);
    else
        ddl__text_put(o, " %9.1f %7s\n", g, "-");
}

size_t ddl_profile_format(const ddl_profile *p, char *buf, size_t bytes)
{
    ddl__text o = {buf, bytes, 0};
    if (buf && bytes)
        buf[0] = '\0';
    if (!p)
        return 0;
    int cores = p->cores > 0 ? p->cores : 1;
    double peak = p->peak_gflops * cores;
    ddl__text_put(&o, "profile of rank %d", p->rank);
    if (p->world > 1)
        ddl__text_put(&o, " of %d (each rank times its own; this is rank %d's)", p->world, p->rank);
    ddl__text_put(&o, ": %lld steps, peak %.1f GFLOP/s a core (%s)", (long long)p->steps, p->peak_gflops,
        p->peak_isa ? p->peak_isa : "not measured");
    if (cores > 1)
        ddl__text_put(&o, ", layers measured against %d cores", cores);
    else if (p->parts > 1 && p->threads > 1)
        ddl__text_put(&o, ", %d parts side by side: layer times are thread time, summed", p->parts);
    else if (p->parts > 1)
        ddl__text_put(&o, ", %d parts one after another", p->parts);
    ddl__text_put(&o, "\n%-20s %-15s %-12s %9s %9s %9s %7s\n", "layer", "kind", "shape", "fwd ms", "bwd ms", "GFLOP/s",
        "% peak");
    int64_t fwd = 0, bwd = 0;
    double flops = 0;
    for (int i = 0; i < p->n_layers; i++) {
        const ddl_profile_layer *l = &p->layers[i];
        char shape[40];
        snprintf(shape, sizeof shape, "%dx%dx%d", l->c, l->h, l->w);
        double f = l->fwd_flops * (double)l->fwd_samples + l->bwd_flops * (double)l->bwd_samples;
        ddl__text_put(&o, "%-20.20s %-15.15s %-12s %9.3f %9.3f", l->name, l->kind, shape, ms(l->fwd_ns, p->steps),
            ms(l->bwd_ns, p->steps));
        rate(&o, f, l->fwd_ns + l->bwd_ns, peak);
        fwd += l->fwd_ns, bwd += l->bwd_ns, flops += f;
    }
    if (p->n_layers) {
        ddl__text_put(&o, "%-20s %-15s %-12s %9.3f %9.3f", "all layers", "", "", ms(fwd, p->steps), ms(bwd, p->steps));
        rate(&o, flops, fwd + bwd, peak);
    } else {
        ddl__text_put(&o, "(the model's plugin declares no layers: ddl_build_layer)\n");
    }
    int64_t s = p->step_ns;
    ddl__text_put(&o, "step %.3f ms: data %.3f (%.1f%%), compute %.3f (%.1f%%), all-reduce wait %.3f (%.1f%%), "
        "optimizer %.3f (%.1f%%)\n", ms(s, p->steps), ms(p->data_ns, p->steps), pct(p->data_ns, s),
        ms(p->compute_ns, p->steps), pct(p->compute_ns, s), ms(p->allreduce_ns, p->steps), pct(p->allreduce_ns, s),
        ms(p->optimizer_ns, p->steps), pct(p->optimizer_ns, s));
    return o.len;
}
