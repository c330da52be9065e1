/* gradcheck.c - ddl_model_check_grads: a model's backward pass against central finite
 * differences, the test every hand-written plugin and every graph layer owes (kann's
 * kad_check_grad). Works on any model through the public calls; allocates nothing (r is drawn
 * again from its seed wherever it is needed, and the loss is summed in double). */
#include "impl.h"

#include <math.h>
#include <string.h>

/* pass: a forward pass in evaluation mode, or in training mode with dropout drawn again from
 * seed (the same masks every pass, so the loss is a function of the weights). */
static float *pass(ddl_model *m, const float *x, int batch, uint64_t seed, int training)
{
    ddl_rng drop;
    ddl_rng_seed(&drop, seed ^ 0x5DEECE66Dull);
    return (float *)(uintptr_t)ddl_model_forward(m, x, batch, training, training ? &drop : NULL);
}

/* loss: sum(logits * r) of a forward pass, r drawn from seed. */
static double loss(ddl_model *m, const float *x, int batch, uint64_t seed, int training)
{
    const float *y = pass(m, x, batch, seed, training);
    int c, h, w;
    ddl_model_output_shape(m, &c, &h, &w);
    size_t n = (size_t)batch * (size_t)c * (size_t)h * (size_t)w;
    ddl_rng r;
    ddl_rng_seed(&r, seed);
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += (double)y[i] * (double)ddl_rng_normal(&r);
    return sum;
}

/* slopes: the one-sided differences (L(w + e) - L(w)) / e and (L(w) - L(w - e)) / e at the
 * parameter *w (restored after); their mean is the central difference. They differ by the jump of
 * the slope where a ReLU or max-pool kink lies within e, where no difference can be trusted. */
static void slopes(ddl_model *m, const float *x, int batch, uint64_t seed, int training, float *w, float e,
                   double *fwd, double *bwd)
{
    float keep = *w;
    double mid = loss(m, x, batch, seed, training);
    *w = keep + e;
    double up = loss(m, x, batch, seed, training);
    *w = keep - e;
    double down = loss(m, x, batch, seed, training);
    *w = keep;
    *fwd = (up - mid) / (double)e;
    *bwd = (mid - down) / (double)e;
}

static double err_of(double a, double b) { return fabs(a - b) / fmax(fabs(a) + fabs(b), 1e-2); }

static int check(ddl_model *m, const float *x, int batch, uint64_t seed, int training, int per_tensor, double tol,
                 double *worst, char *err, size_t err_bytes)
{
    if (worst)
        *worst = 0.0;
    if (!m || !x || batch < 1 || batch > ddl_model_get_config(m)->batch || per_tensor < 1)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_model_check_grads: no model or input, batch %d out of 1 "
                         "to the model's, or per_tensor %d < 1", batch, per_tensor);
    /* analytic: dL/dlogits = r, written into the model's logits buffer after the forward pass */
    float *y = pass(m, x, batch, seed, training);
    int c, h, w;
    ddl_model_output_shape(m, &c, &h, &w);
    size_t n = (size_t)batch * (size_t)c * (size_t)h * (size_t)w;
    ddl_rng r;
    ddl_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        y[i] = ddl_rng_normal(&r);
    ddl_model_zero_grads(m);
    ddl_model_backward(m, x, batch, y);
    float *p = ddl_model_params(m), *g = ddl_model_grads(m);
    double bad = -1.0;
    size_t skipped = 0, checked = 0;
    char where[DDL_ERR_BYTES] = "";
    for (int t = 0; t < ddl_model_n_tensors(m); t++) {
        const ddl_param_info *ti = ddl_model_tensor(m, t);
        size_t step = ti->count > (size_t)per_tensor ? ti->count / (size_t)per_tensor : 1;
        for (size_t k = 0; k < ti->count; k += step) {
            size_t at = ti->offset + k;
            float keep = p[at], e = 2e-3f * fmaxf(1.0f, fabsf(keep));
            double fwd, bwd;
            slopes(m, x, batch, seed, training, p + at, e, &fwd, &bwd);
            if (err_of(fwd, bwd) > tol / 2) { /* a kink within e: no verdict here */
                skipped++;
                continue;
            }
            double num = (fwd + bwd) / 2, ana = g[at], rel = err_of(ana, num);
            checked++;
            if (rel > bad) {
                bad = rel;
                snprintf(where, sizeof where, "%s[%zu]: backward %.6g, finite differences %.6g", ti->name, k, ana, num);
            }
        }
    }
    if (worst)
        *worst = bad < 0.0 ? 0.0 : bad;
    if (bad > tol)
        return ddl__errf(err, err_bytes, DDL_EMISMATCH, "gradient check: error %.3g > %.3g at %s", bad, tol, where);
    if (checked < skipped)
        return ddl__errf(err, err_bytes, DDL_EMISMATCH, "gradient check: only %zu of %zu entries away from kinks "
                         "(ReLU, max-pool): use smoother inputs or fewer samples", checked, checked + skipped);
    ddl__errf(err, err_bytes, DDL_OK, "worst %.3g at %s (%zu entries checked, %zu next to a kink)",
              bad < 0.0 ? 0.0 : bad, where, checked, skipped);
    return DDL_OK;
}

int ddl_model_check_grads(ddl_model *m, const float *x, int batch, uint64_t seed, int per_tensor, double tol,
                          double *worst, char *err, size_t err_bytes)
{
    return check(m, x, batch, seed, 0, per_tensor, tol, worst, err, err_bytes);
}

int ddl_model_check_grads_training(ddl_model *m, const float *x, int batch, uint64_t seed, int per_tensor, double tol,
                                   double *worst, char *err, size_t err_bytes)
{
    return check(m, x, batch, seed, 1, per_tensor, tol, worst, err, err_bytes);
}
