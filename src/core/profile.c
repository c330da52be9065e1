/* profile.c - per-layer timing of a model's passes: the table of layers a plugin declares
 * (ddl_build_layer, in model.c, fills it through ddl__profile_describe), the time of each layer
 * when a plugin marks its end (ddl_model_layer_done, in model.c, which finds the model from the
 * plugin's state, calls ddl__profile_mark), the FLOPs of a convolution's geometry, and
 * handing what was timed to a ddl_profile. Each model times only itself, so the trainer's
 * micro-batch copies on other threads never write the same counters. Nothing allocates; an
 * untimed model pays the tests on m->profiling in model.c and the plugin's one per layer. */
#include "impl.h"

#include <string.h>
#include <time.h>

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void ddl__profile_describe(ddl_profile_layer *l, const char *name, const char *kind, int c, int h, int w,
                           double fwd_flops, double bwd_flops)
{
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "%s", name ? name : "");
    snprintf(l->kind, sizeof l->kind, "%s", kind ? kind : "");
    l->c = c, l->h = h, l->w = w;
    l->fwd_flops = fwd_flops > 0 ? fwd_flops : 0.0;
    l->bwd_flops = bwd_flops > 0 ? bwd_flops : 0.0;
}

/* ---- timing ---- */

void ddl__profile_begin(ddl_model *m, int pass, int batch, int training)
{
    m->prof_pass = pass == 0 && !training ? -1 : pass; /* evaluation passes are not the step's */
    m->prof_batch = batch;
    m->prof_last = now_ns();
}

void ddl__profile_mark(ddl_model *m, int layer)
{
    if (m->prof_pass < 0 || layer < 0 || layer >= m->n_layers)
        return;
    int64_t t = now_ns();
    ddl_profile_layer *l = &m->layers[layer];
    if (m->prof_pass == 0)
        l->fwd_ns += t - m->prof_last, l->fwd_samples += m->prof_batch;
    else
        l->bwd_ns += t - m->prof_last, l->bwd_samples += m->prof_batch;
    m->prof_last = t;
}

void ddl_model_profile(ddl_model *m, int on)
{
    if (m) {
        m->profiling = on != 0;
        m->prof_pass = -1;
    }
}

int ddl_model_profile_take(ddl_model *m, ddl_profile *p)
{
    if (!m || !p)
        return DDL_EINVAL;
    if (p->n_layers == 0) { /* the first take describes the layers */
        for (int i = 0; i < m->n_layers; i++) {
            p->layers[i] = m->layers[i];
            p->layers[i].fwd_ns = p->layers[i].bwd_ns = p->layers[i].fwd_samples = p->layers[i].bwd_samples = 0;
        }
        p->n_layers = m->n_layers;
    }
    if (p->n_layers != m->n_layers)
        return DDL_EINVAL;
    for (int i = 0; i < m->n_layers; i++) {
        ddl_profile_layer *to = &p->layers[i], *from = &m->layers[i];
        if (strcmp(to->name, from->name) != 0)
            return DDL_EINVAL;
        to->fwd_ns += from->fwd_ns, to->bwd_ns += from->bwd_ns;
        to->fwd_samples += from->fwd_samples, to->bwd_samples += from->bwd_samples;
        from->fwd_ns = from->bwd_ns = from->fwd_samples = from->bwd_samples = 0;
    }
    return DDL_OK;
}

/* ---- FLOPs from the geometry: 2 per multiply-add, per sample ---- */

double ddl_conv2d_flops(const ddl_conv2d *g)
{
    int groups = g->groups > 1 ? g->groups : 1;
    return 2.0 * g->out_c * ddl_conv2d_out_h(g) * ddl_conv2d_out_w(g) * (double)(g->in_c / groups) * g->k_h * g->k_w;
}

double ddl_deconv2d_flops(const ddl_conv2d *g)
{
    return 2.0 * g->in_c * g->in_h * g->in_w * (double)g->out_c * g->k_h * g->k_w; /* each input pixel, a kernel */
}
