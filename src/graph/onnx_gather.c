/* onnx_gather.c - the ONNX import's last step: the weights of every layer copied out of the file
 * into one block, in the order ddl_model_graph() declares them (per layer: weight, then bias; a
 * Gemm or MatMul weight of (in, out) transposed; a groupnorm's weight and bias composed by
 * onnx_import_norm.c), then BatchNorm's running statistics (onnx_import_bn.c). The nodes checked
 * every dim against the graph before: layer_floats holds the block to what it copies. */
#include "onnx_impl.h"

#include <stdint.h>
#include <string.h>

/* layer_floats: the floats layer i takes from the file (its weight, and its bias unless a conv
 * has none) into *k and *n; -1 if the weight's dims are not a size or the sum overflows. The
 * nodes checked every dim against the graph: this holds gather's buffer to what it copies. */
static int layer_floats(const imp *m, const ddl__layer *l, int i, size_t *k, size_t *n)
{
    if (l->op == DDL__OP_GROUPNORM) { /* weight and bias of its channels: onnx_import_norm.c */
        size_t c = (size_t)m->norm[i].c;
        *k = 0;
        if (c < 1 || *n > SIZE_MAX / 8 - 2 * c)
            return -1;
        *n += 2 * c;
        return 0;
    }
    const tensor *w = &m->t[m->ps[i].w];
    int bn = l->op == DDL__OP_BATCHNORM, out = bn ? (int)w->dims[0] : l->out; /* batchnorm: (C) */
    size_t b = (l->op == DDL__OP_CONV || l->op == DDL__OP_DENSE) && !l->bias ? 0 : (size_t)out;
    if (out < 1 || w->n_dims != (l->op == DDL__OP_DENSE ? 2 : bn ? 1 : 4) || ddl__onnx_count(w, k) != 0 ||
        *k > SIZE_MAX / 8 - b || *n > SIZE_MAX / 8 - (*k + b))
        return -1;
    *n += *k + b;
    return 0;
}

static int has_params(const ddl__layer *l)
{
    return l->op == DDL__OP_CONV || l->op == DDL__OP_DECONV || l->op == DDL__OP_DENSE || l->op == DDL__OP_GROUPNORM ||
           l->op == DDL__OP_BATCHNORM;
}

/* ddl__onnx_gather: the weights in the order ddl_model_graph() declares them (per layer: weight, bias). */
int ddl__onnx_gather(imp *m, const ddl_graph *g, const ddl_allocator *alloc, ddl_onnx_import *out)
{
    size_t n = 0, k = 0;
    for (int i = 1; i < g->n; i++)
        if (has_params(&g->layers[i]) && layer_floats(m, &g->layers[i], i, &k, &n) != 0)
            return ddl__onnx_fail(m, "weight %s: dims that are no size", m->ps[i].w >= 0 ? m->t[m->ps[i].w].name : "(norm)");
    float *p = ddl__alloc(alloc, (n ? n : 1) * sizeof *p), *t = NULL;
    if (!p)
        return ddl__onnx_fail(m, "out of memory for %zu weights", n);
    size_t at = 0;
    for (int i = 1; i < g->n; i++) {
        const ddl__layer *l = &g->layers[i];
        if (!has_params(l))
            continue;
        if (l->op == DDL__OP_GROUPNORM) {
            if (ddl__onnx_norm_params(m, i, m->norm[i].c, p + at) != DDL_OK) {
                ddl__free(alloc, p);
                return DDL_EINVAL;
            }
            at += 2 * (size_t)m->norm[i].c;
            continue;
        }
        const tensor *w = &m->t[m->ps[i].w];
        size_t left = n - at;
        ddl__onnx_count(w, &k); /* layer_floats checked it, and that at + k + out <= n */
        if (k > left || ddl__onnx_floats_of(w, p + at, k) != 0) {
            ddl__free(alloc, p);
            return ddl__onnx_fail(m, "weight %s: not %zu float32 values", w->name, k);
        }
        if (m->ps[i].transpose) { /* (in, out) -> (out, in) */
            size_t in = (size_t)w->dims[0], o = (size_t)w->dims[1];
            if (!(t = ddl__alloc(alloc, k * sizeof *t))) {
                ddl__free(alloc, p);
                return ddl__onnx_fail(m, "out of memory");
            }
            for (size_t r = 0; r < in; r++)
                for (size_t c = 0; c < o; c++)
                    t[c * in + r] = p[at + r * o + c];
            memcpy(p + at, t, k * sizeof *t);
            ddl__free(alloc, t);
        }
        at += k;
        if ((l->op == DDL__OP_CONV || l->op == DDL__OP_DENSE) && !l->bias)
            continue;
        int lo = l->op == DDL__OP_BATCHNORM ? (int)w->dims[0] : l->out;
        size_t nb = 0; /* a bias of one value (Gemm's broadcast C): that value for every output */
        if (m->ps[i].b >= 0 && ddl__onnx_count(&m->t[m->ps[i].b], &nb) == 0 && nb == 1 && lo > 1 &&
            ddl__onnx_floats_of(&m->t[m->ps[i].b], p + at, 1) == 0)
            for (int o = 1; o < lo; o++)
                p[at + o] = p[at];
        else if (m->ps[i].b >= 0 && ddl__onnx_floats_of(&m->t[m->ps[i].b], p + at, (size_t)lo) != 0) {
            ddl__free(alloc, p);
            return ddl__onnx_fail(m, "bias %s: not %d float32 values", m->t[m->ps[i].b].name, lo);
        }
        if (m->ps[i].b < 0)
            memset(p + at, 0, (size_t)lo * sizeof *p);
        at += (size_t)lo;
    }
    out->params = p;
    out->n_params = n;
    int rc = ddl__onnx_gather_buffers(m, g, alloc, out);
    if (rc != DDL_OK) {
        ddl__free(alloc, p);
        out->params = NULL, out->n_params = 0;
    }
    return rc;
}
