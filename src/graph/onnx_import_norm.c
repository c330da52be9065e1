/* onnx_import_norm.c - normalisations as ddl's groupnorm layer: InstanceNormalization of a layer
 * (nn.InstanceNorm2d, affine or not: groups = channels), opset 18's GroupNormalization (scale and
 * bias per group), and what torch 1.13 writes for nn.GroupNorm: Reshape to (N, G, -1),
 * InstanceNormalization with a scale and bias per group (ones and zeros), Reshape back to the
 * input's shape, Mul by the weight (C, 1, 1), Add of the bias (C, 1, 1). The values inside the
 * pattern exist only there (m->pend): any other reader is refused, named. The Mul and the Add
 * become the layer's weight and bias only while nothing else reads the layer's output; the value
 * before them is then marked, so that a later reader is refused rather than handed the folded
 * one. Where the Mul or Add cannot fold, they are left to the nodes that follow (a per-channel
 * Mul of its own). The epsilon must be ddl's, PyTorch's 1e-5. Nothing is allocated. */
#include "onnx_impl.h"

#include <string.h>

#define fail ddl__onnx_fail

/* ---- values inside the pattern ---- */

#define pending ddl__onnx_pending
#define new_pend ddl__onnx_new_pend

/* pending: the pattern value `name` is, NULL if it is none (a layer's output or a constant). */
ddl__onnx_pend *ddl__onnx_pending(imp *m, const char *name)
{
    int i = m->n_pend ? ddl__onnx_find(m, name) : -1;
    if (i < 0 || m->v[i].layer >= 0 || m->v[i].tensor >= 0)
        return NULL;
    for (int k = m->n_pend - 1; k >= 0; k--)
        if (strcmp(m->pend[k].name, name) == 0)
            return &m->pend[k];
    return NULL;
}

int ddl__onnx_new_pend(imp *m, const node *n, const char *name, int kind, int layer, int groups)
{
    if (m->n_pend == DDL__ONNX_MAX_PEND)
        return fail(m, "node %s (%s): more than %d GroupNorm or channel shuffle patterns", n->name, n->op,
                    DDL__ONNX_MAX_PEND);
    ddl__onnx_pend *p = &m->pend[m->n_pend++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->kind = kind, p->layer = layer, p->groups = groups;
    return ddl__onnx_define(m, p->name, -1, -1);
}

/* refuse_pending: n reads a pattern value where the pattern does not go on; the error, or DDL_OK. */
static int refuse_pending(imp *m, const node *n)
{
    for (int k = 0; k < n->n_in; k++) {
        const ddl__onnx_pend *p = n->in[k][0] ? pending(m, n->in[k]) : NULL;
        if (!p || (k == 0 && p->kind == DDL__PEND_GROUPED && strcmp(n->op, "InstanceNormalization") == 0) ||
            (k == 0 && (p->kind == DDL__PEND_NORMED || p->kind == DDL__PEND_SWAPPED) && strcmp(n->op, "Reshape") == 0) ||
            (k == 0 && p->kind == DDL__PEND_SPLIT5 && strcmp(n->op, "Transpose") == 0))
            continue;
        return fail(m, "node %s (%s): reads %s, %s", n->name, n->op, n->in[k],
                    p->kind == DDL__PEND_GROUPED ? "a layer's output reshaped to (N, G, -1), which ddl takes only as "
                                                   "the input of GroupNorm's InstanceNormalization"
                    : p->kind == DDL__PEND_SPLIT5 ? "a layer's output reshaped to (N, G, C / G, H, W), which ddl takes "
                                                    "only as a channel shuffle's, transposed (0, 2, 1, 3, 4)"
                    : p->kind == DDL__PEND_SWAPPED ? "a channel shuffle's transposed 5-D values, which ddl takes only "
                                                     "reshaped back to (N, C, H, W)"
                    : p->kind == DDL__PEND_NORMED ? "GroupNorm's normalised (N, G, -1) values, which ddl takes only "
                                                    "reshaped back to the input's shape"
                                                  : "a GroupNorm's output before its weight or bias, which ddl folded "
                                                    "into the layer: nothing else may read it");
    }
    return DDL_OK;
}

/* ---- checks ---- */

static int eps_ok(imp *m, const node *n)
{
    attr e = ddl__onnx_get(n, "epsilon");
    if (e.found && e.f != 1e-5f)
        return fail(m, "node %s (%s): epsilon %g: ddl's GroupNorm takes 1e-05 (PyTorch's default)", n->name, n->op,
                    (double)e.f);
    return DDL_OK;
}

/* vec: input k of n, a float constant of `count` values (any dims); its tensor, -1 with the error. */
static int vec(imp *m, const node *n, int k, size_t count, const char *what)
{
    int t = k < n->n_in && n->in[k][0] ? ddl__onnx_const(m, n->in[k]) : -1;
    size_t c = 0;
    char d[200];
    if (t < 0)
        return fail(m, "node %s (%s): its %s (%s) must be a constant", n->name, n->op, what,
                    k < n->n_in ? n->in[k] : "none"), -1;
    if (ddl__onnx_count(&m->t[t], &c) != 0 || c != count)
        return fail(m, "node %s (%s): %s %s has dims %s, ddl needs %zu values", n->name, n->op, what, m->t[t].name,
                    ddl__onnx_ints_text(m->t[t].dims, m->t[t].n_dims, d), count), -1;
    return ddl__onnx_data_ok(m, n, &m->t[t], what) == DDL_OK ? t : -1;
}

/* channels: layer x's channels, its output 4-D; -1 with the error. */
static int channels(imp *m, const ddl_graph *g, const node *n, int x, int *h, int *w)
{
    int c;
    char why[DDL_ERR_BYTES];
    if (ddl__graph_layer_shape(g, x, &c, h, w, why, sizeof why) != DDL_OK)
        return fail(m, "node %s (%s): %s", n->name, n->op, why), -1;
    if (ddl__onnx_rank(g, x) != 4)
        return fail(m, "node %s (%s): of a flat (N, %d) input: ddl normalises (N, C, H, W) images", n->name, n->op,
                    c * *h * *w), -1;
    return c;
}

/* norm_layer: a groupnorm of x in `groups` groups, its weight and bias from s and b (one value
 * each per c / groups channels); named after the scale tensor where it has a name. */
static int norm_layer(imp *m, ddl_graph *g, const node *n, int x, int c, int groups, int s, int b)
{
    char name[DDL_GRAPH_NAME_BYTES] = "";
    if (s >= 0)
        ddl__onnx_layer_name(g, &m->t[s], name);
    int i = ddl_graph_groupnorm(g, x, name, groups);
    if (i < 0)
        return fail(m, "node %s (%s): %s", n->name, n->op, ddl_graph_error(g)), -1;
    if (x == 0)
        m->input_touched = 1;
    m->norm[i] = (ddl__onnx_norm){.s = s, .b = b, .mul = -1, .add = -1, .c = c, .per = c / groups};
    return i;
}

/* ---- the nodes ---- */

/* instance_norm: of a layer (groups = channels), or of GroupNorm's (N, G, -1) reshape. */
static int instance_norm(imp *m, ddl_graph *g, const node *n)
{
    const ddl__onnx_pend *p = pending(m, n->in[0]);
    int x = p ? p->layer : ddl__onnx_layer_in(m, n, n->in[0]), h, w;
    int c = x < 0 ? -1 : channels(m, g, n, x, &h, &w), groups = p ? p->groups : c;
    if (c < 0 || eps_ok(m, n) != DDL_OK)
        return DDL_EINVAL;
    int s = vec(m, n, 1, (size_t)groups, "scale"), b = s < 0 ? -1 : vec(m, n, 2, (size_t)groups, "bias");
    int i = b < 0 ? -1 : norm_layer(m, g, n, x, c, groups, s, b);
    if (i < 0)
        return DDL_EINVAL;
    if (!p)
        return ddl__onnx_added_w(m, g, n, i, -1, -1, 0);
    char why[DDL_ERR_BYTES];
    if (ddl__graph_layer_shape(g, i, &c, &h, &w, why, sizeof why) != DDL_OK)
        return fail(m, "node %s (%s): %s", n->name, n->op, why);
    return new_pend(m, n, n->out[0], DDL__PEND_NORMED, i, groups);
}

/* group_norm: opset 18's GroupNormalization, its scale and bias one value per group. */
static int group_norm(imp *m, ddl_graph *g, const node *n)
{
    int x = ddl__onnx_layer_in(m, n, n->in[0]), h, w;
    int c = x < 0 ? -1 : channels(m, g, n, x, &h, &w);
    attr ng = ddl__onnx_get(n, "num_groups"), st = ddl__onnx_get(n, "stash_type");
    if (c < 0 || eps_ok(m, n) != DDL_OK)
        return DDL_EINVAL;
    int64_t groups = ng.found && ng.n >= 1 ? ng.ints[0] : 0;
    if (groups < 1 || groups > c || c % groups)
        return fail(m, "node %s (GroupNormalization): num_groups %lld: ddl takes groups that divide the %d channels",
                    n->name, (long long)groups, c);
    if (st.found && (st.n < 1 || st.ints[0] != 1))
        return fail(m, "node %s (GroupNormalization): stash_type %lld: ddl computes in float (1)", n->name,
                    (long long)(st.n >= 1 ? st.ints[0] : -1));
    int s = vec(m, n, 1, (size_t)groups, "scale (one per group, as opset 18 has it)");
    int b = s < 0 ? -1 : vec(m, n, 2, (size_t)groups, "bias (one per group, as opset 18 has it)");
    int i = b < 0 ? -1 : norm_layer(m, g, n, x, c, (int)groups, s, b);
    return i < 0 ? DDL_EINVAL : ddl__onnx_added_w(m, g, n, i, -1, -1, 0);
}

int ddl__onnx_norm_reshape(imp *m, ddl_graph *g, const node *n, int x, const int64_t *shape, int k)
{
    int h, w, c;
    char a[200];
    if (x >= 0) { /* (N, G, -1) of a layer's output, shape resolved: GroupNorm's first step */
        if ((c = channels(m, g, n, x, &h, &w)) < 0)
            return DDL_EINVAL;
        int64_t groups = shape[1];
        if (k != 3 || groups < 1 || groups > c || c % groups)
            return fail(m, "node %s (Reshape): to %s of %d channels: ddl takes (N, G, -1) only as GroupNorm's, with "
                        "G dividing the channels", n->name, ddl__onnx_ints_text(shape + 1, k - 1, a), c);
        if (x == 0)
            m->input_touched = 1;
        return new_pend(m, n, n->out[0], DDL__PEND_GROUPED, x, (int)groups);
    }
    const ddl__onnx_pend *p = pending(m, n->in[0]);
    if (!p || p->kind != DDL__PEND_NORMED)
        return refuse_pending(m, n);
    int i = p->layer;
    char why[DDL_ERR_BYTES];
    if (ddl__graph_layer_shape(g, i, &c, &h, &w, why, sizeof why) != DDL_OK)
        return fail(m, "node %s (Reshape): %s", n->name, why);
    const int64_t want[4] = {DDL__ONNX_BATCH, c, h, w}, data[3] = {DDL__ONNX_BATCH, p->groups, (int64_t)c / p->groups * h * w};
    int64_t out[4], known = 1;
    int free_at = -1, ok = k == 4;
    for (int j = 0; ok && j < 4; j++) {
        out[j] = shape[j] == 0 && j < 3 ? data[j] : shape[j];
        if (out[j] == -1 && free_at < 0)
            free_at = j;
        else if (j && out[j] >= 1 && out[j] <= INT32_MAX)
            known *= out[j];
        else
            ok = j == 0 && out[j] == DDL__ONNX_BATCH;
    }
    int64_t per = (int64_t)c * h * w;
    if (ok && free_at >= 0)
        out[free_at] = free_at == 0 ? (known == per ? DDL__ONNX_BATCH : -1) : per % known ? -1 : per / known;
    for (int j = 0; ok && j < 4; j++)
        ok = out[j] == want[j];
    if (!ok)
        return fail(m, "node %s (Reshape): GroupNorm's values back to a shape of %d values %s: ddl takes the input's "
                    "(N, %d, %d, %d)", n->name, k, ddl__onnx_ints_text(shape, k < 8 ? k : 8, a), c, h, w);
    ddl__onnx_norm *q = &m->norm[i];
    q->stage = 1;
    snprintf(q->tail, sizeof q->tail, "%s", n->out[0]);
    return ddl__onnx_define(m, n->out[0], i, -1);
}

/* fold: a Mul by the weight, or an Add of the bias, (C, 1, 1) or (1, C, 1, 1), right after
 * GroupNorm's reshape back, into the layer; -1 where it is not that. */
static int fold(imp *m, ddl_graph *g, const node *n)
{
    int mul = n->op[0] == 'M';
    for (int side = 0; side < 2 && n->n_in == 2; side++) {
        int a = ddl__onnx_find(m, n->in[side]), t = ddl__onnx_const(m, n->in[1 - side]);
        int i = a >= 0 ? m->v[a].layer : -1;
        if (i < 1 || t < 0 || g->layers[i].op != DDL__OP_GROUPNORM || i != g->n - 1)
            continue;
        ddl__onnx_norm *q = &m->norm[i];
        const tensor *c = &m->t[t];
        if (!q->stage || (mul && q->stage != 1) || strcmp(q->tail, n->in[side]) != 0)
            continue;
        for (int v = a + 1; v < m->n_v; v++)
            if (m->v[v].layer == i) /* another name for the layer's output: it reads what is there now */
                return -1;
        int per_channel = (c->n_dims == 3 && c->dims[0] == q->c && c->dims[1] == 1 && c->dims[2] == 1) ||
                          (c->n_dims == 4 && c->dims[0] == 1 && c->dims[1] == q->c && c->dims[2] == 1 && c->dims[3] == 1);
        if (!per_channel)
            return -1;
        if (ddl__onnx_data_ok(m, n, c, mul ? "weight" : "bias") != DDL_OK)
            return DDL_EINVAL;
        if (mul && !g->layers[i].name[0]) {
            char name[DDL_GRAPH_NAME_BYTES];
            ddl__onnx_layer_name(g, c, name);
            if (name[0] && ddl_graph_name(g, i, name) < 0)
                return fail(m, "node %s (%s): %s", n->name, n->op, ddl_graph_error(g));
        }
        if (new_pend(m, n, n->in[side], DDL__PEND_FOLDED, i, 0) != DDL_OK)
            return DDL_EINVAL;
        if (mul)
            q->mul = t, q->stage = 2;
        else
            q->add = t, q->stage = 0;
        snprintf(q->tail, sizeof q->tail, "%s", q->stage ? n->out[0] : "");
        return ddl__onnx_define(m, n->out[0], i, -1);
    }
    return -1;
}

int ddl__onnx_norm_node(imp *m, ddl_graph *g, const node *n)
{
    if (strcmp(n->op, "InstanceNormalization") == 0)
        return refuse_pending(m, n) != DDL_OK ? DDL_EINVAL : instance_norm(m, g, n);
    if (strcmp(n->op, "GroupNormalization") == 0)
        return refuse_pending(m, n) != DDL_OK ? DDL_EINVAL : group_norm(m, g, n);
    if (m->n_pend && refuse_pending(m, n) != DDL_OK)
        return DDL_EINVAL;
    if (strcmp(n->op, "Mul") == 0 || strcmp(n->op, "Add") == 0)
        return fold(m, g, n);
    return -1;
}

/* ---- the weights ---- */

static float at(const tensor *t, size_t i)
{
    const ddl__pb_slice *d = t->raw.p ? &t->raw : &t->floats; /* checked by data_ok at the node */
    return ddl__get_lef(d->p + 4 * i);
}

int ddl__onnx_norm_params(imp *m, int i, int c, float *p)
{
    const ddl__onnx_norm *q = &m->norm[i];
    if (c != q->c || q->per < 1)
        return fail(m, "layer %d: a groupnorm ddl did not make", i);
    for (int ch = 0; ch < c; ch++) {
        float s = q->s >= 0 ? at(&m->t[q->s], (size_t)(ch / q->per)) : 1.0f;
        float b = q->b >= 0 ? at(&m->t[q->b], (size_t)(ch / q->per)) : 0.0f;
        float mu = q->mul >= 0 ? at(&m->t[q->mul], (size_t)ch) : 1.0f, ad = q->add >= 0 ? at(&m->t[q->add], (size_t)ch) : 0.0f;
        p[ch] = q->mul >= 0 ? s * mu : s; /* exactly PyTorch's weight and bias when s is 1 and b 0 */
        p[c + ch] = q->mul >= 0 ? b * mu + ad : b + ad;
    }
    return DDL_OK;
}
