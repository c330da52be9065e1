/* onnx_import_bn.c - BatchNormalization in the ONNX import: a batchnorm layer of a layer's
 * channels, its running statistics kept for the model's buffers (gathered after the graph, in
 * the order the model declares them). Reaches the importer's tables only through onnx_impl.h. */
#include "onnx_impl.h"

#include <string.h>

static int count_is(const tensor *t, size_t n)
{
    size_t k;
    return ddl__onnx_count(t, &k) == 0 && k == n;
}

/* batchnorm: BatchNormalization of a layer's channels: scale, B, input_mean and input_var
 * initializers of (C) become weight, bias and the running statistics; epsilon and momentum
 * (ONNX's, which weighs the running value: PyTorch's is 1 - it) are kept. A training-mode
 * export's extra outputs (the running statistics it would write) are left undefined: a node
 * that reads them is refused. Its attributes are known (onnx_attrs.c) before it is called. */
int ddl__onnx_batchnorm(imp *m, ddl_graph *g, const node *n)
{
    int x = n->n_in == 5 ? ddl__onnx_layer_in(m, n, n->in[0]) : -1, c, h, wd, mode = 0, spatial = 1;
    if (n->n_in != 5)
        return ddl__onnx_fail(m, "node %s (BatchNormalization): %d inputs, ddl takes 5 (X, scale, B, mean, var)", n->name,
                    n->n_in);
    int t[4];
    static const char *const what[4] = {"scale", "B", "input_mean", "input_var"};
    for (int k = 0; k < 4; k++)
        if ((t[k] = ddl__onnx_const_in(m, n, n->in[k + 1], what[k])) < 0)
            return DDL_EINVAL;
    if (x < 0 || ddl__onnx_shape(m, g, n, x, &c, &h, &wd) != DDL_OK ||
        ddl__onnx_int_attr(m, n, "training_mode", 0, 0, 1, "0 or 1 (either: ddl trains with batch statistics, predicts "
                 "with the running ones)", &mode) != DDL_OK ||
        ddl__onnx_int_attr(m, n, "spatial", 1, 1, 1, "1 (statistics per channel)", &spatial) != DDL_OK)
        return DDL_EINVAL;
    attr ep = ddl__onnx_get(n, "epsilon"), mo = ddl__onnx_get(n, "momentum");
    float eps = ep.found ? ep.f : 1e-5f, mom = mo.found ? mo.f : 0.9f;
    if (!(eps > 0.0f && eps < 1e30f))
        return ddl__onnx_fail(m, "node %s (BatchNormalization): epsilon %g: ddl takes a finite epsilon > 0", n->name, (double)eps);
    if (!(mom >= 0.0f && mom <= 1.0f))
        return ddl__onnx_fail(m, "node %s (BatchNormalization): momentum %g: ddl takes 0 to 1", n->name, (double)mom);
    for (int k = 0; k < 4; k++) {
        char d[200];
        if (!count_is(&m->t[t[k]], (size_t)c) || m->t[t[k]].n_dims != 1)
            return ddl__onnx_fail(m, "node %s (BatchNormalization): %s %s has dims %s, the graph needs (%d) (its input's "
                        "channels)", n->name, what[k], m->t[t[k]].name, ddl__onnx_ints_text(m->t[t[k]].dims, m->t[t[k]].n_dims, d),
                        c);
        if (ddl__onnx_data_ok(m, n, &m->t[t[k]], what[k]) != DDL_OK)
            return DDL_EINVAL;
    }
    char name[DDL_GRAPH_NAME_BYTES];
    ddl__onnx_layer_name(g, &m->t[t[0]], name);
    int i = ddl_graph_batchnorm(g, x, name, 1.0f - mom, eps);
    int rc = ddl__onnx_added_w(m, g, n, i, t[0], t[1], 0);
    if (rc == DDL_OK)
        m->ps[i].mean = t[2], m->ps[i].var = t[3];
    return rc;
}

/* gather_buffers: the running statistics of every batchnorm, in the order the model declares
 * them (mean, then variance, per layer); ddl__onnx_batchnorm checked each holds its C float32s. */
int ddl__onnx_gather_buffers(imp *m, const ddl_graph *g, const ddl_allocator *alloc, ddl_onnx_import *out)
{
    size_t n = 0, at = 0;
    for (int i = 1; i < g->n; i++)
        if (g->layers[i].op == DDL__OP_BATCHNORM)
            n += 2 * (size_t)m->t[m->ps[i].mean].dims[0];
    if (!n)
        return DDL_OK;
    float *p = ddl__alloc(alloc, n * sizeof *p);
    if (!p)
        return ddl__onnx_fail(m, "out of memory for %zu running statistics", n);
    for (int i = 1; i < g->n; i++) {
        if (g->layers[i].op != DDL__OP_BATCHNORM)
            continue;
        size_t c = (size_t)m->t[m->ps[i].mean].dims[0];
        if (ddl__onnx_floats_of(&m->t[m->ps[i].mean], p + at, c) != 0 || ddl__onnx_floats_of(&m->t[m->ps[i].var], p + at + c, c) != 0) {
            ddl__free(alloc, p);
            return ddl__onnx_fail(m, "running statistics %s: not %zu float32 values", m->t[m->ps[i].mean].name, c);
        }
        at += 2 * c;
    }
    out->buffers = p;
    out->n_buffers = n;
    return DDL_OK;
}
