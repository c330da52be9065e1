/* onnx_import_channels.c - ONNX nodes that move a layer's channels and compute nothing: Concat
 * along the channels (of 1 to 64 inputs: a chain of concat layers), a Slice along the channels
 * (PyTorch's x.chunk(2, dim=1), x[:, a:b]) as a slice layer, and ShuffleNet's
 * channel shuffle as torch.onnx writes it (x.view(N, G, C / G, H, W), transpose(1, 2),
 * view(N, -1, H, W)) as a shuffle layer. The two values inside the shuffle exist only there
 * (m->pend, onnx_import_norm.c): any other reader is refused, named. Nothing is allocated. */
#include "onnx_impl.h"

#include <stdint.h>
#include <string.h>

#define fail ddl__onnx_fail

/* concat_of: [x, y] along the channels: an earlier concat layer of x and y when there is one (the
 * same values), else a new one. DenseNet's k-th torch.cat takes every feature before it: as a
 * chain of concats it is the (k - 1)-th's chain and one more, so k layers make k concats, not k^2 / 2
 * (DenseNet-121: 368 layers, not 845). */
static int concat_of(ddl_graph *g, int x, int y)
{
    for (int i = g->n - 1; i > x && i > y; i--)
        if (g->layers[i].op == DDL__OP_CONCAT && g->layers[i].in[0] == x && g->layers[i].in[1] == y)
            return i;
    return ddl_graph_concat(g, x, y);
}

int ddl__onnx_concat(imp *m, ddl_graph *g, const node *n)
{
    int x = n->n_in ? ddl__onnx_layer_in(m, n, n->in[0]) : -1;
    if (x < 0)
        return n->n_in ? DDL_EINVAL : fail(m, "node %s (Concat): no input", n->name);
    attr ax = ddl__onnx_get(n, "axis");
    int r = x ? ddl__onnx_rank(g, x) : 4;
    int64_t v = ax.found && ax.n == 1 ? ax.ints[0] : 0;
    char d[200];
    if (!ax.found || ax.n != 1 || (v < 0 ? v + r : v) != 1)
        return fail(m, "node %s (Concat): axis %s of %d-D inputs: ddl takes axis 1 only (the channels)", n->name,
                    ax.n >= 1 ? ddl__onnx_ints_text(ax.ints, ax.n, d) : "(none)", r);
    if (n->n_in == 1) /* DenseNet's first torch.cat, of a list of one */
        return ddl__onnx_define(m, n->out[0], x, -1);
    for (int i = 1; i < n->n_in; i++) {
        int y = ddl__onnx_layer_in(m, n, n->in[i]);
        if (y < 0)
            return DDL_EINVAL;
        if ((x = concat_of(g, x, y)) < 0)
            return fail(m, "node %s (Concat): %s", n->name, ddl_graph_error(g));
    }
    return ddl__onnx_added(m, g, n, x);
}

/* one_int: input k of n (or the attribute `name` before opset 10), one int64; 0, else -1. */
static int one_int(imp *m, const node *n, int k, const char *name, int64_t dflt, int64_t *v)
{
    attr a = ddl__onnx_get(n, name);
    if (a.found)
        return a.n == 1 ? (*v = a.ints[0], 0) : -1;
    if (k >= n->n_in || !n->in[k][0])
        return *v = dflt, 0;
    return ddl__onnx_ints(m, n->in[k], v, 1) == 1 ? 0 : -1;
}

int ddl__onnx_channel_slice(imp *m, ddl_graph *g, const node *n, int x)
{
    int c, h, w, r = ddl__onnx_rank(g, x);
    int64_t lo, hi, axis, step;
    if (one_int(m, n, 1, "starts", 0, &lo) || one_int(m, n, 2, "ends", 0, &hi) || one_int(m, n, 3, "axes", 0, &axis) ||
        one_int(m, n, 4, "steps", 1, &step))
        return fail(m, "node %s (Slice): its starts, ends, axes and steps: ddl takes one constant each (a slice "
                    "of one axis)", n->name);
    if (axis < 0)
        axis += r;
    if (axis != 1 || step != 1)
        return fail(m, "node %s (Slice): axis %lld, step %lld of a rank-%d layer: ddl slices the channels (axis 1) "
                    "with step 1", n->name, (long long)axis, (long long)step, r);
    if (ddl__onnx_shape(m, g, n, x, &c, &h, &w) != DDL_OK)
        return DDL_EINVAL;
    int64_t k = r == 2 ? (int64_t)c * h * w : c; /* ONNX's clamping: ends past the end (INT64_MAX) are the end */
    lo += lo < 0 ? k : 0, hi += hi < 0 ? k : 0;
    lo = lo < 0 ? 0 : lo > k ? k : lo, hi = hi < 0 ? 0 : hi > k ? k : hi;
    if (hi <= lo)
        return fail(m, "node %s (Slice): channels %lld to %lld of %lld: nothing left", n->name, (long long)lo,
                    (long long)hi - 1, (long long)k);
    if (lo == 0 && hi == k)
        return ddl__onnx_define(m, n->out[0], x, -1);
    return ddl__onnx_added(m, g, n, ddl_graph_slice(g, x, (int)lo, (int)(hi - lo)));
}

int ddl__onnx_shuffle_split(imp *m, const node *n, int x, int64_t groups)
{
    if (x == 0)
        return fail(m, "node %s (Reshape): a channel shuffle of the input itself", n->name);
    return ddl__onnx_new_pend(m, n, n->out[0], DDL__PEND_SPLIT5, x, (int)groups);
}

int ddl__onnx_shuffle_swap(imp *m, const node *n)
{
    const ddl__onnx_pend *p = n->n_in ? ddl__onnx_pending(m, n->in[0]) : NULL;
    if (!p || p->kind != DDL__PEND_SPLIT5)
        return -1;
    int64_t perm[8];
    char t[200];
    int k = ddl__onnx_attr_ints(n, "perm", perm, 8);
    if (k != 5 || perm[0] != 0 || perm[1] != 2 || perm[2] != 1 || perm[3] != 3 || perm[4] != 4)
        return fail(m, "node %s (Transpose): perm %s of a channel shuffle's (N, G, C / G, H, W): ddl takes "
                    "(0, 2, 1, 3, 4)", n->name, k > 0 ? ddl__onnx_ints_text(perm, k, t) : "(none)");
    return ddl__onnx_new_pend(m, n, n->out[0], DDL__PEND_SWAPPED, p->layer, p->groups);
}

int ddl__onnx_shuffle_join(imp *m, ddl_graph *g, const node *n, const int64_t *shape, int k)
{
    const ddl__onnx_pend *p = ddl__onnx_pending(m, n->in[0]);
    int c, h, w, x = p ? p->layer : -1, groups = p ? p->groups : 0;
    if (x < 0 || ddl__onnx_shape(m, g, n, x, &c, &h, &w) != DDL_OK)
        return DDL_EINVAL;
    /* (N, C, H, W) with 0s copying (N, C / G, G, H, W)'s dims and one -1 at most */
    const int64_t from[5] = {DDL__ONNX_BATCH, c / groups, groups, h, w}, want[4] = {DDL__ONNX_BATCH, c, h, w};
    int64_t out[4], known = 1, per = (int64_t)c * h * w;
    int free_at = -1, ok = k == 4;
    for (int j = 0; ok && j < 4; j++) {
        out[j] = shape[j] == 0 ? from[j] : shape[j];
        if (out[j] == -1 && free_at < 0)
            free_at = j;
        else if (j)
            known *= out[j], ok = out[j] >= 1 && out[j] <= INT32_MAX;
        else
            ok = out[j] == DDL__ONNX_BATCH;
    }
    if (ok && free_at > 0)
        out[free_at] = per % known ? -1 : per / known;
    for (int j = 0; ok && j < 4; j++)
        ok = out[j] == want[j];
    char t[200];
    if (!ok)
        return fail(m, "node %s (Reshape): a channel shuffle's values to %s: ddl takes them back to (N, %d, %d, %d)",
                    n->name, ddl__onnx_ints_text(shape, k < 8 ? k : 8, t), c, h, w);
    return ddl__onnx_added(m, g, n, ddl_graph_shuffle(g, x, groups));
}
