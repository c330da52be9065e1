/* onnx_import_shape.c - the shape arithmetic torch.onnx.export writes around reshapes and resizes
 * (Shape, Gather, Slice, Concat, Unsqueeze, Squeeze, Cast, and Mul, Add, Sub, Div of such values),
 * folded at import: the input's size is fixed, so each such value is a constant, but for the
 * batch size, which stays free (DDL__ONNX_BATCH) and may only reach a reshape's first dim. Then
 * Reshape and Flatten, taken where they keep the batch first: to (N, K) a flatten, to the same
 * shape nothing, to (N, G, -1) GroupNorm's pattern (onnx_import_norm.c); and the dispatch of the
 * nodes the helper files take. A folded value is a new tensor whose data lives in m->fold; an
 * Unsqueeze, Squeeze or Reshape of a constant is a view of its data under other dims. Nothing is
 * allocated; every count and index is checked before use. */
#include "onnx_impl.h"

#include <string.h>

#define MAXV 64 /* values of a folded vector */

/* A constant as values: int64 (i) or float (f), at most MAXV of them. */
typedef struct fv {
    int type, n_dims;
    int64_t dims[8];
    int n;
    int64_t i[MAXV];
    float f[MAXV];
} fv;

#define fail ddl__onnx_fail

/* text: "(N, 4, 7)": a folded shape, the free batch as N. */
static const char *text(const int64_t *v, int n, char out[200])
{
    size_t at = 0;
    out[at++] = '(';
    for (int i = 0; i < n && i < 8; i++)
        at += (size_t)(v[i] == DDL__ONNX_BATCH ? snprintf(out + at, 200 - at, "%sN", i ? ", " : "")
                                                : snprintf(out + at, 200 - at, "%s%lld", i ? ", " : "", (long long)v[i]));
    snprintf(out + at, 200 - at, "%s)", n > 8 ? ", ..." : "");
    return out;
}

int ddl__onnx_rank(const ddl_graph *g, int i)
{
    for (; i > 0; i = g->layers[i].in[0])
        switch (g->layers[i].op) {
        case DDL__OP_FLATTEN:
        case DDL__OP_DENSE: return 2;
        case DDL__OP_CONV:
        case DDL__OP_DECONV:
        case DDL__OP_MAXPOOL:
        case DDL__OP_AVGPOOL:
        case DDL__OP_GAP:
        case DDL__OP_GROUPNORM:
        case DDL__OP_RESIZE: return 4;
        default: break; /* element-wise: its input's */
        }
    return 4;
}

/* dims: layer i's dims as the file sees them, (N, c, h, w) or (N, c * h * w); its rank. */
static int dims(imp *m, const ddl_graph *g, const node *n, int i, int64_t d[4])
{
    int c, h, w;
    char why[DDL_ERR_BYTES];
    if (ddl__graph_layer_shape(g, i, &c, &h, &w, why, sizeof why) != DDL_OK)
        return fail(m, "node %s (%s): %s", n->name, n->op, why), -1;
    d[0] = DDL__ONNX_BATCH;
    if (ddl__onnx_rank(g, i) == 2) {
        d[1] = (int64_t)c * h * w;
        return 2;
    }
    d[1] = c, d[2] = h, d[3] = w;
    return 4;
}

int ddl__onnx_const(const imp *m, const char *name)
{
    int i = ddl__onnx_find(m, name);
    return i >= 0 ? m->v[i].tensor : -1;
}

static int add_tensor(imp *m, const node *n, const char *name, const tensor *like)
{
    if (m->n_t == MAX_TENSORS)
        return fail(m, "node %s (%s): more than %d constant tensors", n->name, n->op, MAX_TENSORS), -1;
    m->t[m->n_t] = *like;
    return ddl__onnx_define(m, name, -1, m->n_t) == DDL_OK ? m->n_t++ : -1;
}

int ddl__onnx_new_tensor(imp *m, const node *n, const char *name, int type, int n_dims, const int64_t *d,
                         const void *data)
{
    size_t count = 1, size = type == T_FLOAT ? 4 : 8;
    for (int k = 0; k < n_dims; k++)
        count *= (size_t)d[k]; /* each at most MAXV, n_dims at most 8 */
    if (count > (DDL__ONNX_FOLD_BYTES - m->n_fold) / size)
        return fail(m, "node %s (%s): the constants ddl folds take more than %d bytes", n->name, n->op,
                    DDL__ONNX_FOLD_BYTES), -1;
    tensor t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "%s", name);
    t.type = type, t.n_dims = n_dims;
    memcpy(t.dims, d, (size_t)n_dims * sizeof *d);
    unsigned char *p = m->fold + m->n_fold;
    for (size_t k = 0; k < count; k++)
        if (type == T_FLOAT)
            ddl__put_lef(p + 4 * k, ((const float *)data)[k]);
        else
            ddl__put_le64(p + 8 * k, (uint64_t)((const int64_t *)data)[k]);
    t.raw = (ddl__pb_slice){p, p + count * size};
    m->n_fold += count * size;
    return add_tensor(m, n, name, &t);
}

/* ---- folded values ---- */

/* get: input k of n as values: DDL_OK; 1 when it is a layer's output (*layer set); else the
 * error (not defined, empty, of a type or size ddl does not fold). */
static int get(imp *m, const node *n, int k, fv *v, int *layer)
{
    int i = k < n->n_in && n->in[k][0] ? ddl__onnx_find(m, n->in[k]) : -1;
    if (i < 0)
        return fail(m, "node %s (%s): input %d (%s) is not defined before it", n->name, n->op, k,
                    k < n->n_in ? n->in[k] : "none");
    if (m->v[i].layer >= 0) {
        *layer = m->v[i].layer;
        return 1;
    }
    if (m->v[i].tensor < 0)
        return fail(m, "node %s (%s): input %s is neither a constant nor a layer's output", n->name, n->op, n->in[k]);
    const tensor *t = &m->t[m->v[i].tensor];
    size_t c;
    memset(v, 0, sizeof *v);
    v->type = t->type, v->n_dims = t->n_dims;
    memcpy(v->dims, t->dims, sizeof v->dims);
    if (ddl__onnx_count(t, &c) != 0 || c > MAXV ||
        (t->type == T_INT64 ? ddl__onnx_ints_of(t, v->i, MAXV) != (int)c
                            : t->type != T_FLOAT || ddl__onnx_floats_of(t, v->f, c) != 0))
        return fail(m, "node %s (%s): input %s: ddl folds int64 and float constants of up to %d values (type %d, "
                    "or its data does not match its dims)", n->name, n->op, n->in[k], MAXV, t->type);
    v->n = (int)c;
    return DDL_OK;
}

/* const_get: input k as values, DDL_EINVAL if it is a layer's (what needs says it must be). */
static int const_get(imp *m, const node *n, int k, fv *v, const char *needs)
{
    int layer, rc = get(m, n, k, v, &layer);
    return rc == 1 ? fail(m, "node %s (%s): input %s must be %s, a constant at import", n->name, n->op, n->in[k],
                          needs)
                   : rc;
}

static int put(imp *m, const node *n, const fv *v)
{
    return ddl__onnx_new_tensor(m, n, n->out[0], v->type, v->n_dims, v->dims, v->type == T_FLOAT ? (const void *)v->f
                                                                                                  : (const void *)v->i) < 0
               ? DDL_EINVAL
               : DDL_OK;
}

/* view: node n's output as constant `src` under other dims (its count unchanged, checked). */
static int view(imp *m, const node *n, int src, int n_dims, const int64_t *d)
{
    tensor t = m->t[src];
    size_t before, after;
    t.n_dims = n_dims;
    memcpy(t.dims, d, (size_t)n_dims * sizeof *d);
    char a[200], b[200];
    if (ddl__onnx_count(&m->t[src], &before) != 0 || ddl__onnx_count(&t, &after) != 0 || before != after)
        return fail(m, "node %s (%s): %s of dims %s cannot become %s", n->name, n->op, m->t[src].name,
                    ddl__onnx_ints_text(m->t[src].dims, m->t[src].n_dims, a), ddl__onnx_ints_text(d, n_dims, b));
    return add_tensor(m, n, n->out[0], &t) < 0 ? DDL_EINVAL : DDL_OK;
}

/* axes: the axes of n (attribute before opset 13, else input 1) into a[*k]; with r > 0, each
 * made non-negative and checked to be within rank r. */
static int axes(imp *m, const node *n, int r, int64_t *a, int *k)
{
    attr at = ddl__onnx_get(n, "axes");
    fv v;
    *k = 0;
    if (at.found) {
        if (at.n < 0)
            return fail(m, "node %s (%s): axes: more than 8", n->name, n->op);
        for (int i = 0; i < at.n; i++)
            a[(*k)++] = at.ints[i];
    } else if (n->n_in > 1 && n->in[1][0]) {
        if (const_get(m, n, 1, &v, "its axes") != DDL_OK)
            return DDL_EINVAL;
        if (v.type != T_INT64 || v.n > 8)
            return fail(m, "node %s (%s): axes: not up to 8 int64s", n->name, n->op);
        for (int i = 0; i < v.n; i++)
            a[(*k)++] = v.i[i];
    }
    for (int i = 0; r > 0 && i < *k; i++) {
        a[i] += a[i] < 0 ? r : 0;
        if (a[i] < 0 || a[i] >= r)
            return fail(m, "node %s (%s): axis %lld of a rank-%d value", n->name, n->op, (long long)a[i], r);
    }
    return DDL_OK;
}

static int has(const int64_t *a, int k, int64_t x)
{
    for (int i = 0; i < k; i++)
        if (a[i] == x)
            return 1;
    return 0;
}

/* ---- the folding ops ---- */

static int shape_op(imp *m, const ddl_graph *g, const node *n)
{
    fv v;
    int i = ddl__onnx_find(m, n->in[0]), r;
    int64_t d[8];
    if (i >= 0 && m->v[i].layer >= 0) {
        if ((r = dims(m, g, n, m->v[i].layer, d)) < 0)
            return DDL_EINVAL;
    } else if (i >= 0 && m->v[i].tensor >= 0) { /* a constant of any size: its dims */
        const tensor *t = &m->t[m->v[i].tensor];
        r = t->n_dims;
        memcpy(d, t->dims, sizeof d);
    } else {
        return fail(m, "node %s (Shape): input %s is not defined before it", n->name, n->in[0]);
    }
    attr s = ddl__onnx_get(n, "start"), e = ddl__onnx_get(n, "end"); /* opset 15 */
    int64_t lo = s.found && s.n >= 1 ? s.ints[0] : 0, hi = e.found && e.n >= 1 ? e.ints[0] : r;
    lo += lo < 0 ? r : 0, hi += hi < 0 ? r : 0;
    lo = lo < 0 ? 0 : lo > r ? r : lo, hi = hi < lo ? lo : hi > r ? r : hi;
    memset(&v, 0, sizeof v);
    v.type = T_INT64, v.n_dims = 1, v.dims[0] = hi - lo, v.n = (int)(hi - lo);
    memcpy(v.i, d + lo, (size_t)v.n * sizeof *d);
    return put(m, n, &v);
}

static int gather_op(imp *m, const node *n)
{
    fv d, ix, v;
    int layer, rc = get(m, n, 0, &d, &layer), axis;
    if (rc == 1)
        return -1; /* a layer's values: not a shape */
    if (rc != DDL_OK || const_get(m, n, 1, &ix, "the indices") != DDL_OK)
        return DDL_EINVAL;
    attr a = ddl__onnx_get(n, "axis");
    axis = a.found && a.n >= 1 ? (int)a.ints[0] : 0;
    if (d.n_dims != 1 || (axis != 0 && axis != -1) || ix.type != T_INT64 || ix.n_dims > 1)
        return fail(m, "node %s (Gather): ddl folds a Gather of a vector (axis 0) by int64 indices, not axis %d of a "
                    "rank-%d constant by rank-%d indices", n->name, axis, d.n_dims, ix.n_dims);
    v = ix;
    v.type = d.type;
    for (int i = 0; i < ix.n; i++) {
        int64_t k = ix.i[i] < 0 ? ix.i[i] + d.n : ix.i[i];
        if (k < 0 || k >= d.n)
            return fail(m, "node %s (Gather): index %lld of %d values", n->name, (long long)ix.i[i], d.n);
        v.i[i] = d.i[k], v.f[i] = d.f[k];
    }
    return put(m, n, &v);
}

static int concat_op(imp *m, const node *n)
{
    fv v, p;
    int layer;
    for (int k = 0; k < n->n_in; k++) { /* layers: join() in onnx_import.c */
        int i = ddl__onnx_find(m, n->in[k]);
        if (i < 0 || m->v[i].tensor < 0)
            return -1;
    }
    memset(&v, 0, sizeof v);
    for (int k = 0; k < n->n_in; k++) {
        if (get(m, n, k, &p, &layer) != DDL_OK)
            return DDL_EINVAL;
        if (p.n_dims != 1 || (k && p.type != v.type) || v.n + p.n > MAXV)
            return fail(m, "node %s (Concat): ddl folds a Concat of up to %d values in vectors of one type",
                        n->name, MAXV);
        v.type = p.type;
        memcpy(v.i + v.n, p.i, (size_t)p.n * sizeof *p.i);
        memcpy(v.f + v.n, p.f, (size_t)p.n * sizeof *p.f);
        v.n += p.n;
    }
    attr a = ddl__onnx_get(n, "axis");
    if (!n->n_in || (a.found && a.n >= 1 && a.ints[0] != 0 && a.ints[0] != -1))
        return fail(m, "node %s (Concat): of vectors, ddl folds axis 0", n->name);
    v.n_dims = 1, v.dims[0] = v.n;
    return put(m, n, &v);
}

/* slice_op: Slice of a vector (axis 0), its starts, ends (and steps) as inputs or attributes; of a
 * layer: along its channels (onnx_import_channels.c). */
static int slice_op(imp *m, ddl_graph *g, const node *n)
{
    fv d, s, e, ax, st;
    int layer, rc = get(m, n, 0, &d, &layer);
    if (rc == 1) {
        int x = ddl__onnx_layer_in(m, n, n->in[0]);
        return x < 0 ? DDL_EINVAL : ddl__onnx_channel_slice(m, g, n, x);
    }
    int64_t lo, hi, step = 1, axis = 0;
    attr as = ddl__onnx_get(n, "starts"), ae = ddl__onnx_get(n, "ends"), aa = ddl__onnx_get(n, "axes");
    if (rc != DDL_OK)
        return rc;
    if (as.found) { /* before opset 10 */
        lo = as.n >= 1 ? as.ints[0] : 0, hi = ae.n >= 1 ? ae.ints[0] : 0, axis = aa.n >= 1 ? aa.ints[0] : 0;
        if (as.n != 1 || ae.n != 1 || (aa.found && aa.n != 1))
            return fail(m, "node %s (Slice): ddl folds slices of one axis", n->name);
    } else {
        if (const_get(m, n, 1, &s, "its starts") != DDL_OK || const_get(m, n, 2, &e, "its ends") != DDL_OK)
            return DDL_EINVAL;
        if ((n->n_in > 3 && n->in[3][0] && const_get(m, n, 3, &ax, "its axes") != DDL_OK) ||
            (n->n_in > 4 && n->in[4][0] && const_get(m, n, 4, &st, "its steps") != DDL_OK))
            return DDL_EINVAL;
        if (s.n != 1 || e.n != 1 || (n->n_in > 3 && n->in[3][0] && ax.n != 1) || (n->n_in > 4 && n->in[4][0] && st.n != 1))
            return fail(m, "node %s (Slice): ddl folds slices of one axis", n->name);
        lo = s.i[0], hi = e.i[0];
        axis = n->n_in > 3 && n->in[3][0] ? ax.i[0] : 0;
        step = n->n_in > 4 && n->in[4][0] ? st.i[0] : 1;
    }
    if (d.n_dims != 1 || (axis != 0 && axis != -1) || step == 0)
        return fail(m, "node %s (Slice): ddl folds a Slice of a vector along axis 0 with a step other than 0", n->name);
    int64_t k = d.n;
    step = step > k ? k + 1 : step < -k ? -(k + 1) : step; /* as far: the same values, and no overflow */
    lo += lo < 0 ? k : 0, hi += hi < 0 ? k : 0;
    if (step > 0)
        lo = lo < 0 ? 0 : lo > k ? k : lo, hi = hi < 0 ? 0 : hi > k ? k : hi;
    else
        lo = lo < 0 ? -1 : lo > k - 1 ? k - 1 : lo, hi = hi < -1 ? -1 : hi > k - 1 ? k - 1 : hi;
    fv v = d;
    v.n = 0;
    for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step, v.n++)
        v.i[v.n] = d.i[i], v.f[v.n] = d.f[i];
    v.dims[0] = v.n;
    return put(m, n, &v);
}

static int cast_op(imp *m, const node *n)
{
    fv v;
    int layer, rc = get(m, n, 0, &v, &layer);
    if (rc == 1)
        return -1;
    attr to = ddl__onnx_get(n, "to");
    int64_t t = to.found && to.n >= 1 ? to.ints[0] : -1;
    if (rc != DDL_OK)
        return rc;
    if (t != T_INT64 && t != T_FLOAT)
        return fail(m, "node %s (Cast): to %lld: ddl folds casts of constants to int64 (7) and float (1)", n->name,
                    (long long)t);
    for (int i = 0; i < v.n; i++) {
        if (v.type == T_INT64 && v.i[i] == DDL__ONNX_BATCH && t == T_FLOAT)
            return fail(m, "node %s (Cast): the batch size as a float: ddl leaves the batch size free", n->name);
        if (v.type == T_INT64 && v.i[i] != DDL__ONNX_BATCH)
            v.f[i] = (float)v.i[i];
        if (v.type == T_FLOAT) /* as numpy's astype: toward 0, and within int64 */
            v.i[i] = v.f[i] >= 9.2e18f || v.f[i] <= -9.2e18f || v.f[i] != v.f[i] ? 0 : (int64_t)v.f[i];
    }
    v.type = (int)t;
    return put(m, n, &v);
}

/* arith_op: Mul, Add, Sub or Div of two constants (one of them of one value, or both alike). */
static int arith_op(imp *m, const node *n)
{
    fv a, b;
    int la, lb;
    int ra = get(m, n, 0, &a, &la), ia = ddl__onnx_find(m, n->in[0]), ib = n->n_in > 1 ? ddl__onnx_find(m, n->in[1]) : -1;
    if (ia < 0 || ib < 0 || m->v[ia].tensor < 0 || m->v[ib].tensor < 0)
        return -1; /* a layer's values: not shape arithmetic */
    if (ra != DDL_OK || get(m, n, 1, &b, &lb) != DDL_OK)
        return DDL_EINVAL;
    if (a.type != b.type || (a.n != b.n && a.n != 1 && b.n != 1))
        return fail(m, "node %s (%s): ddl folds %s of constants of one type, of one value or the same count", n->name,
                    n->op, n->op);
    fv v = a.n >= b.n ? a : b;
    char op = n->op[0];
    for (int i = 0; i < v.n; i++) {
        int64_t x = a.i[a.n == 1 ? 0 : i], y = b.i[b.n == 1 ? 0 : i];
        float fx = a.f[a.n == 1 ? 0 : i], fy = b.f[b.n == 1 ? 0 : i];
        if (v.type == T_INT64 && (x == DDL__ONNX_BATCH || y == DDL__ONNX_BATCH))
            return fail(m, "node %s (%s): computes with the batch size, which ddl leaves free", n->name, n->op);
        if (v.type == T_INT64 && ((op == 'D' && y == 0) || x > INT32_MAX || x < -INT32_MAX || y > INT32_MAX ||
                                  y < -INT32_MAX))
            return fail(m, "node %s (%s): %lld and %lld: ddl folds shape arithmetic of values within 2^31 (and no "
                        "division by 0)", n->name, n->op, (long long)x, (long long)y);
        v.i[i] = op == 'M' ? x * y : op == 'A' ? x + y : op == 'S' ? x - y : op == 'D' ? x / y : 0;
        v.f[i] = op == 'M' ? fx * fy : op == 'A' ? fx + fy : op == 'S' ? fx - fy : fx / fy;
    }
    return put(m, n, &v);
}

/* ---- Unsqueeze, Squeeze, Reshape, Flatten ---- */

static int unsqueeze_op(imp *m, ddl_graph *g, const node *n, int squeeze)
{
    int i = ddl__onnx_find(m, n->in[0]), k, r;
    int64_t a[8], d[8];
    if (i < 0 || (m->v[i].layer < 0 && m->v[i].tensor < 0))
        return fail(m, "node %s (%s): input %s is not defined before it", n->name, n->op, n->in[0]);
    if (m->v[i].layer >= 0) { /* a layer: only a Squeeze of (N, C, 1, 1) to (N, C), a flatten */
        int x = m->v[i].layer;
        if (!squeeze || (r = dims(m, g, n, x, d)) < 0 || axes(m, n, r, a, &k) != DDL_OK)
            return squeeze ? DDL_EINVAL : -1;
        int ok = r == 4 && d[2] == 1 && d[3] == 1 && k == 2 && has(a, k, 2) && has(a, k, 3);
        if (!ok)
            return fail(m, "node %s (Squeeze): of a layer's output, ddl takes only the squeeze of (N, C, 1, 1) "
                        "to (N, C) (axes 2 and 3)", n->name);
        int x2 = ddl_graph_flatten(g, ddl__onnx_layer_in(m, n, n->in[0]));
        return ddl__onnx_added_w(m, g, n, x2, -1, -1, 0);
    }
    const tensor *t = &m->t[m->v[i].tensor];
    r = t->n_dims;
    if (axes(m, n, squeeze ? r : 0, a, &k) != DDL_OK)
        return DDL_EINVAL;
    if (!squeeze) { /* the axes index the output, of rank r + k */
        if (r + k > 8)
            return fail(m, "node %s (Unsqueeze): more than 8 dims", n->name);
        for (int j = 0; j < k; j++) {
            a[j] += a[j] < 0 ? r + k : 0;
            if (a[j] < 0 || a[j] >= r + k || has(a, j, a[j]))
                return fail(m, "node %s (Unsqueeze): axes out of range or repeated", n->name);
        }
        for (int o = 0, s = 0; o < r + k; o++)
            d[o] = has(a, k, o) ? 1 : t->dims[s++];
        return view(m, n, m->v[i].tensor, r + k, d);
    }
    int o = 0;
    for (int j = 0; j < r; j++)
        if (k ? !has(a, k, j) : t->dims[j] != 1)
            d[o++] = t->dims[j];
        else if (t->dims[j] != 1)
            return fail(m, "node %s (Squeeze): axis %d has %lld values, not 1", n->name, j, (long long)t->dims[j]);
    return view(m, n, m->v[i].tensor, o, d);
}

/* resolve: a reshape of a constant of dims d (rank r) to shape s (k values): 0 keeps d's, -1 the rest. */
static int resolve_const(imp *m, const node *n, const tensor *t, int64_t *s, int k, int allowzero)
{
    size_t total, known = 1;
    int free_at = -1;
    char a[200];
    if (ddl__onnx_count(t, &total) != 0 || k > 8)
        return fail(m, "node %s (Reshape): %s to more than 8 dims", n->name, t->name);
    for (int j = 0; j < k; j++) {
        if (s[j] == 0 && !allowzero && j < t->n_dims)
            s[j] = t->dims[j];
        if (s[j] == -1 && free_at < 0)
            free_at = j;
        else if (s[j] < 1)
            return fail(m, "node %s (Reshape): shape %s of %s", n->name, text(s, k, a), t->name);
        else
            known *= (size_t)s[j];
    }
    if (free_at >= 0)
        s[free_at] = known && total % known == 0 ? (int64_t)(total / known) : -1;
    return DDL_OK;
}

/* reshape_op: Reshape of a constant (a view), of a layer (a flatten, nothing, or GroupNorm's
 * (N, G, -1)), or of a value inside GroupNorm's pattern. */
static int reshape_op(imp *m, ddl_graph *g, const node *n)
{
    fv s;
    int i = ddl__onnx_find(m, n->in[0]);
    if (i < 0)
        return fail(m, "node %s (Reshape): input %s is not defined before it", n->name, n->in[0]);
    if (n->n_in < 2 || const_get(m, n, 1, &s, "its shape (folded from a chain of Shape, Gather, ... if need be)") !=
                           DDL_OK)
        return DDL_EINVAL;
    attr az = ddl__onnx_get(n, "allowzero");
    int allowzero = az.found && az.n >= 1 && az.ints[0] != 0, k = s.n;
    char a[200], b[200];
    if (s.type != T_INT64 || s.n_dims != 1 || k > 8)
        return fail(m, "node %s (Reshape): its shape %s, %s of rank %d, is not a vector of up to 8 int64s", n->name,
                    n->in[1], text(s.i, s.type == T_INT64 ? k : 0, a), s.n_dims);
    if (m->v[i].tensor >= 0)
        return resolve_const(m, n, &m->t[m->v[i].tensor], s.i, k, allowzero) == DDL_OK
                   ? view(m, n, m->v[i].tensor, k, s.i)
                   : DDL_EINVAL;
    const ddl__onnx_pend *p = m->v[i].layer < 0 ? ddl__onnx_pending(m, n->in[0]) : NULL;
    if (p && p->kind == DDL__PEND_SWAPPED) /* a pattern's value: a channel shuffle's reshape back */
        return ddl__onnx_shuffle_join(m, g, n, s.i, k);
    if (m->v[i].layer < 0) /* a pattern's value: GroupNorm's reshape back */
        return ddl__onnx_norm_reshape(m, g, n, -1, s.i, k);
    int x = m->v[i].layer;
    int64_t d[4], out[8];
    int r = dims(m, g, n, x, d);
    if (r < 0)
        return DDL_EINVAL;
    int64_t per = r == 2 ? d[1] : d[1] * d[2] * d[3], known = 1;
    int free_at = -1, ok = k >= 2;
    for (int j = 0; j < k && ok; j++) {
        out[j] = s.i[j] == 0 && !allowzero && j < r ? d[j] : s.i[j];
        if (out[j] == -1 && free_at < 0)
            free_at = j;
        else if (j ? out[j] < 1 || out[j] > INT32_MAX : out[j] != DDL__ONNX_BATCH)
            ok = 0;
        else if (j)
            known *= out[j];
    }
    if (ok && free_at == 0 && known == per) /* (-1, K): the batch inferred */
        out[0] = DDL__ONNX_BATCH;
    else if (ok && free_at > 0 && per % known == 0)
        out[free_at] = per / known;
    else
        ok = ok && free_at < 0 && known == per;
    if (!ok)
        return fail(m, "node %s (Reshape): to %s from %s: ddl takes reshapes that keep the batch first and its "
                    "size free, to (N, -1), the same shape or GroupNorm's (N, G, -1)", n->name, text(s.i, k, a),
                    text(d, r, b));
    if (k == 2 && r == 2)
        return ddl__onnx_define(m, n->out[0], ddl__onnx_layer_in(m, n, n->in[0]), -1);
    if (k == 2)
        return ddl__onnx_added_w(m, g, n, ddl_graph_flatten(g, ddl__onnx_layer_in(m, n, n->in[0])), -1, -1, 0);
    if (k == 4 && r == 4 && out[1] == d[1] && out[2] == d[2] && out[3] == d[3])
        return ddl__onnx_define(m, n->out[0], ddl__onnx_layer_in(m, n, n->in[0]), -1);
    if (k == 3 && r == 4)
        return ddl__onnx_norm_reshape(m, g, n, x, out, k);
    if (k == 4 && r == 2 && out[1] == d[1] && out[2] == 1 && out[3] == 1) /* SENet's gate: y.view(b, c, 1, 1) */
        return ddl__onnx_added_w(m, g, n, ddl_graph_global_avgpool(g, x), -1, -1, 0); /* a 1x1 pool: the values */
    if (k == 5 && r == 4 && out[1] * out[2] == d[1] && out[3] == d[2] && out[4] == d[3] && out[1] > 1 && out[2] > 1)
        return ddl__onnx_shuffle_split(m, n, x, out[1]); /* a channel shuffle's first step */
    return fail(m, "node %s (Reshape): to %s from %s: ddl takes reshapes to (N, -1), the same shape or GroupNorm's "
                "(N, G, -1)", n->name, text(out, k, a), text(d, r, b));
}

/* flatten_op: Flatten at axis 1 (or its negative), the batch first: a flatten layer. */
static int flatten_op(imp *m, ddl_graph *g, const node *n)
{
    int x = ddl__onnx_layer_in(m, n, n->in[0]);
    int64_t d[4];
    int r = x < 0 ? -1 : dims(m, g, n, x, d);
    if (r < 0)
        return DDL_EINVAL;
    attr a = ddl__onnx_get(n, "axis");
    int64_t axis = a.found && a.n >= 1 ? a.ints[0] : 1, at = axis < 0 ? axis + r : axis;
    if (at != 1)
        return fail(m, "node %s (Flatten): axis %lld of a rank-%d input: ddl keeps the batch axis alone first "
                    "(axis 1, or %d)", n->name, (long long)axis, r, 1 - r);
    if (r == 2) /* (N, K) already */
        return ddl__onnx_define(m, n->out[0], x, -1);
    return ddl__onnx_added_w(m, g, n, ddl_graph_flatten(g, x), -1, -1, 0);
}

/* reduce_mean_op: ReduceMean over the height and width of a 4-D layer (MnasNet's and some
 * squeeze-and-excitation blocks' x.mean([2, 3])): a global average pool, then a flatten unless
 * keepdims. Other axes are refused, naming them. */
static int reduce_mean_op(imp *m, ddl_graph *g, const node *n)
{
    int x = ddl__onnx_layer_in(m, n, n->in[0]);
    int64_t d[4], a[8];
    int k = 0, r = x < 0 ? -1 : dims(m, g, n, x, d);
    if (r < 0 || axes(m, n, r, a, &k) != DDL_OK)
        return DDL_EINVAL;
    attr kd = ddl__onnx_get(n, "keepdims"), ne = ddl__onnx_get(n, "noop_with_empty_axes");
    if (k == 0 && ne.found && ne.n >= 1 && ne.ints[0] != 0) /* opset 18: no axes is no reduction */
        return ddl__onnx_define(m, n->out[0], x, -1);
    if (r != 4 || k != 2 || !has(a, k, 2) || !has(a, k, 3)) {
        char t[200];
        return fail(m, "node %s (ReduceMean): axes %s of a rank-%d input: ddl takes the mean over the height and "
                    "width (axes 2 and 3), a global average pool", n->name, k ? text(a, k, t) : "(all)", r);
    }
    int p = ddl_graph_global_avgpool(g, x);
    if (kd.found && kd.n >= 1 && kd.ints[0] == 0 && p >= 0)
        p = ddl_graph_flatten(g, p);
    return ddl__onnx_added_w(m, g, n, p, -1, -1, 0);
}

/* transpose_op: Transpose (1, 0) of a 2-D constant, as torch writes a Linear without a bias in
 * training mode (MatMul(x, Transpose(W))): a view that only a MatMul's or Gemm's weight reads,
 * the tensor itself (its name, PyTorch's, is the layer's) taken the other way round; -1 else. */
static int transpose_op(imp *m, const node *n)
{
    int i = n->n_in ? ddl__onnx_find(m, n->in[0]) : -1, t = i >= 0 ? m->v[i].tensor : -1;
    int64_t perm[8];
    int k = ddl__onnx_attr_ints(n, "perm", perm, 8);
    if (t < 0 || m->t[t].n_dims != 2 || m->v[i].tview >= 0 || !(k <= 0 || (k == 2 && perm[0] == 1 && perm[1] == 0)))
        return -1;
    if (ddl__onnx_define(m, n->out[0], -1, -1) != DDL_OK)
        return DDL_EINVAL;
    m->v[m->n_v - 1].tview = t;
    return DDL_OK;
}

/* expand_op: Expand of a layer read only by Muls beside a layer of the shape it expands to
 * (SENet's x * y.expand_as(x)): nothing, as the mul layer broadcasts the same way. Anywhere else
 * the copies would be ddl's to make: refused. */
static int expand_op(imp *m, ddl_graph *g, const node *n)
{
    int x = ddl__onnx_layer_in(m, n, n->in[0]);
    int64_t d[4], to[8], want[4];
    int r = x < 0 ? -1 : dims(m, g, n, x, d), k = n->n_in > 1 ? ddl__onnx_ints(m, n->in[1], to, 8) : -1;
    if (r < 0)
        return DDL_EINVAL;
    int ok = k == 4 && r == 4, readers = ddl__onnx_readers(m, n->out[0], 0, NULL);
    for (int j = 1; ok && j < 4; j++) /* numpy's broadcast of d against the shape */
        want[j] = to[j] == 1 ? d[j] : to[j], ok = d[j] == 1 || to[j] == 1 || d[j] == to[j];
    for (int j = 0; ok && j < readers; j++) {
        node rd;
        int layer = -1, t = -1, c, h, w;
        ok = ddl__onnx_readers(m, n->out[0], j, &rd) == readers && strcmp(rd.op, "Mul") == 0 && rd.n_in == 2;
        const char *other = ok ? rd.in[strcmp(rd.in[0], n->out[0]) == 0] : "";
        ok = ok && ddl__onnx_value(m, other, &layer, &t) >= 0 && layer >= 0 && ddl__onnx_rank(g, layer) == 4 &&
             ddl__onnx_shape(m, g, n, layer, &c, &h, &w) == DDL_OK && c == want[1] && h == want[2] && w == want[3];
    }
    char a[200], b[200];
    if (!ok || readers < 1)
        return fail(m, "node %s (Expand): of %s to %s: ddl takes an Expand only as a Mul's operand beside a layer of "
                    "the shape it expands to (x * y.expand_as(x)), where the Mul broadcasts alike", n->name,
                    text(d, r, a), k > 0 ? text(to, k, b) : "(not a constant)");
    return ddl__onnx_define(m, n->out[0], x, -1);
}

/* ---- dispatch ---- */

int ddl__onnx_shape_node(imp *m, ddl_graph *g, const node *n)
{
    int rc = ddl__onnx_norm_node(m, g, n);
    if (rc != -1)
        return rc;
    const char *op = n->op;
    if (strcmp(op, "Resize") == 0 || strcmp(op, "Upsample") == 0)
        return ddl__onnx_resize(m, g, n);
    if (strcmp(op, "Shape") == 0)
        return shape_op(m, g, n);
    if (strcmp(op, "Gather") == 0)
        return gather_op(m, n);
    if (strcmp(op, "Concat") == 0)
        return concat_op(m, n);
    if (strcmp(op, "Slice") == 0)
        return slice_op(m, g, n);
    if (strcmp(op, "Transpose") == 0 && (rc = ddl__onnx_shuffle_swap(m, n)) != -1)
        return rc;
    if (strcmp(op, "Transpose") == 0)
        return transpose_op(m, n);
    if (strcmp(op, "Cast") == 0)
        return cast_op(m, n);
    if (strcmp(op, "Mul") == 0 || strcmp(op, "Add") == 0 || strcmp(op, "Sub") == 0 || strcmp(op, "Div") == 0)
        return arith_op(m, n);
    if (strcmp(op, "Unsqueeze") == 0 || strcmp(op, "Squeeze") == 0)
        return unsqueeze_op(m, g, n, op[0] == 'S');
    if (strcmp(op, "Reshape") == 0)
        return reshape_op(m, g, n);
    if (strcmp(op, "Flatten") == 0)
        return flatten_op(m, g, n);
    if (strcmp(op, "ReduceMean") == 0)
        return reduce_mean_op(m, g, n);
    if (strcmp(op, "Expand") == 0)
        return expand_op(m, g, n);
    return -1;
}
