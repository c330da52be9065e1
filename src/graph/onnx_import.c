/* onnx_import.c - ddl_graph_import_onnx: a layer graph and its weights from an ONNX file that
 * another tool wrote (PyTorch's torch.onnx.export, onnx.helper, ddl's own export). Nodes are
 * taken in file order (ONNX keeps them topologically sorted) and each becomes a layer: Conv,
 * ConvTranspose, Relu, MaxPool, AveragePool, GlobalAveragePool, Gemm, MatMul (+ Add of a bias),
 * Flatten, Reshape to (N, -1), Concat, Add, Dropout (a dropout layer), Identity, a last
 * Softmax over the classes (dropped: ddl's output is the logits); activations and softmax layers
 * (and PyTorch's patterns of SiLU, GELU, Hardswish) in onnx_import_act.c, which sees every node
 * first; Flatten, Reshape and the shape arithmetic around them, Resize, and the normalisations
 * are onnx_import_shape.c's, _resize.c's and _norm.c's; BatchNormalization is
 * onnx_import_bn.c's (its running statistics gathered as the model's buffers). Mul, Div, Add and
 * Sub of a scalar or per-channel constant on the input (how ddl's export and many exporters scale
 * pixels) become the input normalisation, elsewhere an affine layer (onnx_affine.c); a Mul of two
 * layers (squeeze-and-excitation's gate) a mul layer, of the shapes it takes (onnx_affine.c). Every
 * attribute is one ONNX defines (onnx_attrs.c) and is honoured, or the node is refused naming it
 * and its value; whatever else is refused with the node named: ddl trains what it imports, so it
 * imports only what it can train, and never runs a node otherwise than ONNX does. Nothing from the file is trusted: every length is checked before use, every dim is
 * 1 or more and a weight's dims are those the graph resolves for its layer (ddl__graph_layer_shape),
 * its data exactly their count of floats, counts computed without overflow, all before gather
 * allocates or copies; a refused file names the node, the tensor and the value. Nothing is
 * allocated per node. */
#include "onnx_impl.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>


static int fail(imp *m, const char *fmt, ...) DDL__PRINTF(2, 3);
static int fail(imp *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err, sizeof m->err, fmt, ap);
    va_end(ap);
    return DDL_EINVAL;
}

/* ---- tensors and values ---- */

static int tensor_read(imp *m, ddl__pb_slice s, tensor *t)
{
    memset(t, 0, sizeof *t);
    ddl__pb_field f;
    int r;
    while ((r = ddl__pb_next(&s, &f)) > 0) {
        if (f.number == 1 && ddl__pb_ints(&f, t->dims, 8, &t->n_dims) != 0)
            return fail(m, "a tensor of more than 8 dimensions");
        if (f.number == 2)
            t->type = (int)f.v;
        if (f.number == 4 && f.wire == 2)
            t->floats = f.s;
        if (f.number == 7 && f.wire == 2)
            t->ints = f.s;
        if (f.number == 8 && ddl__pb_str(&f, t->name, sizeof t->name) != 0)
            return fail(m, "a tensor name longer than %d bytes", NAME - 1);
        if (f.number == 9)
            t->raw = f.s;
        if (f.number == 14 && f.v == 1)
            return fail(m, "tensor %s: its data is in an external file, which ddl does not read", t->name);
    }
    return r < 0 ? fail(m, "a damaged tensor (not protobuf)") : DDL_OK;
}

/* count: t's number of values into *n (1 for a scalar); -1 if a dim is negative or their product
 * does not fit a size_t (dims (2^62, 4) must not wrap to 0). */
static int count(const tensor *t, size_t *n)
{
    size_t k = 1;
    for (int i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0 || (uint64_t)t->dims[i] > SIZE_MAX)
            return -1;
        size_t d = (size_t)t->dims[i];
        if (d && k > SIZE_MAX / d)
            return -1;
        k *= d;
    }
    *n = k;
    return 0;
}

/* count_is: t holds exactly n values by its dims. */
static int count_is(const tensor *t, size_t n)
{
    size_t k;
    return count(t, &k) == 0 && k == n;
}

/* ints_text: "(4, -1, 3, 3)", n values of v into out (200 bytes hold 8 of any size). */
static const char *ints_text(const int64_t *v, int n, char out[200])
{
    size_t at = 0;
    out[at++] = '(';
    for (int i = 0; i < n && i < 8; i++)
        at += (size_t)snprintf(out + at, 200 - at, "%s%lld", i ? ", " : "", (long long)v[i]);
    snprintf(out + at, 200 - at, ")");
    return out;
}

/* data: where t's values are (raw_data, else float_data). */
static const ddl__pb_slice *data(const tensor *t) { return t->raw.p ? &t->raw : &t->floats; }

/* floats_of: tensor t's n floats into out (n == its count, checked by the caller); -1 if its data
 * is not n little-endian float32 values. */
static int floats_of(const tensor *t, float *out, size_t n)
{
    const ddl__pb_slice *s = data(t);
    if (t->type != T_FLOAT || n > SIZE_MAX / 4 || (size_t)(s->end - s->p) != 4 * n)
        return -1;
    for (size_t i = 0; i < n; i++) {
        out[i] = ddl__get_lef(s->p + 4 * i);
    }
    return 0;
}

/* ints_of: an INT64 tensor of at most max values (raw or int64_data); their count, -1 if not. */
static int ints_of(const tensor *t, int64_t *out, int max)
{
    int n = 0;
    if (t->type != T_INT64)
        return -1;
    if (t->raw.p) {
        size_t b = (size_t)(t->raw.end - t->raw.p);
        if (b % 8 || b / 8 > (size_t)max)
            return -1;
        for (size_t i = 0; i < b / 8; i++)
            out[n++] = (int64_t)ddl__get_le64(t->raw.p + 8 * i);
        return n;
    }
    ddl__pb_field f = {.wire = 2, .s = t->ints};
    return ddl__pb_ints(&f, out, max, &n) == 0 ? n : -1;
}

/* scalar_of: a FLOAT tensor of one value (any rank of 1s). */
static int scalar_of(const tensor *t, float *v) { return count_is(t, 1) && floats_of(t, v, 1) == 0 ? 0 : -1; }

static int find(const imp *m, const char *name)
{
    for (int i = m->n_v - 1; i >= 0; i--)
        if (strcmp(m->v[i].name, name) == 0)
            return i;
    return -1;
}

static int define(imp *m, const char *name, int layer, int t)
{
    if (m->n_v == MAX_VALUES)
        return fail(m, "more than %d values", MAX_VALUES);
    value *v = &m->v[m->n_v++];
    size_t len = strnlen(name, NAME - 1); /* name may be a tensor's own, never v's */
    memmove(v->name, name, len);
    v->name[len] = '\0';
    v->layer = layer;
    v->tensor = t;
    v->padded = 0;
    v->stage = m->stage;
    v->tview = -1;
    return DDL_OK;
}

static int add_tensor(imp *m, ddl__pb_slice s, const char *name_if_none)
{
    if (m->n_t == MAX_TENSORS)
        return fail(m, "more than %d constant tensors", MAX_TENSORS);
    int rc = tensor_read(m, s, &m->t[m->n_t]);
    if (rc == DDL_OK && name_if_none && !m->t[m->n_t].name[0])
        snprintf(m->t[m->n_t].name, NAME, "%s", name_if_none);
    if (rc != DDL_OK)
        return rc;
    int i = m->n_t++;
    return define(m, m->t[i].name, -1, i);
}

/* ---- nodes ---- */

static int node_read(imp *m, ddl__pb_slice s, node *n)
{
    memset(n, 0, sizeof *n);
    ddl__pb_field f;
    int r, bad = 0;
    while ((r = ddl__pb_next(&s, &f)) > 0) {
        if (f.number == 1)
            bad |= n->n_in == MAX_IN || ddl__pb_str(&f, n->in[n->n_in++], NAME) != 0;
        else if (f.number == 2)
            bad |= n->n_out == MAX_IO || ddl__pb_str(&f, n->out[n->n_out++], NAME) != 0;
        else if (f.number == 3)
            bad |= ddl__pb_str(&f, n->name, NAME) != 0;
        else if (f.number == 4)
            bad |= ddl__pb_str(&f, n->op, sizeof n->op) != 0;
        else if (f.number == 5 && n->n_attrs < 32)
            n->attrs[n->n_attrs++] = f.s;
        else if (f.number == 5) /* more than it holds: an attribute unchecked, so refused */
            bad = 1;
    }
    if (!n->name[0] && n->n_out)
        snprintf(n->name, sizeof n->name, "(unnamed, output %.100s)", n->out[0]);
    if (r < 0 || bad || !n->n_out || !n->op[0])
        return fail(m, "a damaged node (after %.100s)", n->name[0] ? n->name : "the start");
    return DDL_OK;
}

/* get: node n's attribute `name` (ints, an int, a float, a string or a tensor). */
static attr get(const node *n, const char *name)
{
    attr a = {0};
    for (int i = 0; i < n->n_attrs; i++) {
        ddl__pb_slice s = n->attrs[i];
        ddl__pb_field f;
        char an[64] = "";
        attr x = {0};
        int r;
        while ((r = ddl__pb_next(&s, &f)) > 0) {
            if (f.number == 1)
                ddl__pb_str(&f, an, sizeof an);
            else if (f.number == 2 && f.wire == 5) {
                uint32_t u = (uint32_t)f.v;
                memcpy(&x.f, &u, 4);
            } else if (f.number == 3 && f.wire == 0)
                x.ints[0] = (int64_t)f.v, x.n = x.n ? x.n : 1;
            else if (f.number == 4 && f.wire == 2)
                snprintf(x.str, sizeof x.str, "%.*s", (int)(f.s.end - f.s.p < 15 ? f.s.end - f.s.p : 15), f.s.p);
            else if (f.number == 5)
                x.t = f.s;
            else if (f.number == 8 && x.n >= 0 && ddl__pb_ints(&f, x.ints, 8, &x.n) != 0)
                x.n = -1;
        }
        if (r < 0)
            x.n = -1;
        if (strcmp(an, name) == 0) {
            x.found = 1;
            return x;
        }
    }
    return a;
}

/* int_attr: node n's attribute `name`, its values all equal (strides (2, 2), pads (1, 1, 1, 1))
 * and from lo to hi, into *v; dflt when absent. Else the error, naming the node and the values. */
static int int_attr(imp *m, const node *n, const char *name, int64_t dflt, int64_t lo, int64_t hi,
                    const char *need, int *v)
{
    attr a = get(n, name);
    int ok = !a.found || a.n >= 1;
    int64_t x = a.found && a.n >= 1 ? a.ints[0] : dflt;
    for (int i = 1; i < a.n; i++)
        ok &= a.ints[i] == x;
    if (!ok || x < lo || x > hi) {
        char t[200];
        return fail(m, "node %s (%s): %s %s: ddl takes %s", n->name, n->op, name,
                    a.n >= 1 ? ints_text(a.ints, a.n, t) : "(not a list of ints)", need);
    }
    *v = (int)x;
    return DDL_OK;
}

/* layer_in: the layer value `name` is; -1 with the error set. The input is taken only as it is
 * after every constant folded into it: the raw pixels are gone by then. */
static int layer_in(imp *m, const node *n, const char *name)
{
    int i = find(m, name);
    if (i >= 0 && m->v[i].padded && strcmp(n->op, "Conv") != 0 && strcmp(n->op, "AveragePool") != 0) {
        const int *p = m->v[i].pad;
        fail(m, "node %s (%s): input %s is a Pad of zeros (%d, %d, %d, %d), which ddl folds only into a Conv or "
             "an AveragePool", n->name, n->op, name, p[0], p[1], p[2], p[3]);
        return -1;
    }
    if (i >= 0 && m->v[i].layer == 0 && m->v[i].stage != m->stage) {
        fail(m, "node %s (%s): input %s is the model's input before the Mul, Div, Add or Sub that ddl folds into "
             "its normalisation, which every other node reads after it: ddl takes only one", n->name, n->op, name);
        return -1;
    }
    if (i >= 0 && m->v[i].layer == 0 && !m->input_touched && ddl__onnx_input_read(m, n) != DDL_OK)
        return -1;
    if (i >= 0 && m->v[i].layer >= 0)
        return m->v[i].layer == 0 && m->in_affine > 0 ? m->in_affine : m->v[i].layer;
    fail(m, "node %s (%s): input %s is %s", n->name, n->op, name,
         i < 0 ? "not defined before it" : "a constant where ddl needs a layer's output");
    return -1;
}

/* const_in: the constant tensor `name` is; -1 with the error set. */
static int const_in(imp *m, const node *n, const char *name, const char *what)
{
    int i = find(m, name);
    if (i >= 0 && m->v[i].tensor >= 0)
        return m->v[i].tensor;
    fail(m, "node %s (%s): its %s (%s) must be a constant (an initializer)", n->name, n->op, what, name);
    return -1;
}

/* layer_name: a name for the layer whose weight is tensor w: "conv1" of "conv1.weight", if valid. */
static void layer_name(const ddl_graph *g, const tensor *w, char *out)
{
    char s[NAME];
    snprintf(s, sizeof s, "%s", w->name);
    size_t l = strlen(s);
    if (l > 7 && strcmp(s + l - 7, ".weight") == 0)
        s[l - 7] = '\0';
    int ok = (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z');
    for (const char *p = s; ok && *p; p++)
        ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
             *p == '_' || *p == '-';
    ok = ok && strlen(s) < DDL_GRAPH_NAME_BYTES;
    for (int i = 0; ok && i < g->n; i++)
        ok = strcmp(g->layers[i].name, s) != 0;
    if (!ok)
        s[0] = '\0';
    memcpy(out, s, strlen(s) + 1); /* shorter than DDL_GRAPH_NAME_BYTES: checked above */
}

/* shape_of: the per-sample shape layer i resolves to (the graph so far, from the input's size). */
static int shape_of(imp *m, const ddl_graph *g, const node *n, int i, int *c, int *h, int *w)
{
    char why[DDL_ERR_BYTES];
    if (ddl__graph_layer_shape(g, i, c, h, w, why, sizeof why) != DDL_OK)
        return fail(m, "node %s (%s): %s", n->name, n->op, why);
    return DDL_OK;
}

/* added: record layer i (or the graph's error) as node n's output, once its shape resolves. */
static int added(imp *m, ddl_graph *g, const node *n, int i, int w, int b, int transpose)
{
    int c, h, wd;
    if (i < 0)
        return fail(m, "node %s (%s): %s", n->name, n->op, ddl_graph_error(g));
    if (shape_of(m, g, n, i, &c, &h, &wd) != DDL_OK)
        return DDL_EINVAL;
    m->ps[i] = (param_src){w, b, transpose, -1, -1};
    return define(m, n->out[0], i, -1); /* a second output (MaxPool's indices, Dropout's mask) stays
                                         * undefined: a node that reads it is refused */
}

/* ---- the weights: every dim, count and length checked before anything is read ---- */

/* dims_ok: t has nd dims, each 1 to INT_MAX (what the graph's layers hold). */
static int dims_ok(imp *m, const node *n, const tensor *t, const char *what, int nd)
{
    int ok = t->n_dims == nd;
    for (int i = 0; ok && i < nd; i++)
        ok = t->dims[i] >= 1 && t->dims[i] <= INT_MAX;
    char d[200];
    return ok ? DDL_OK
              : fail(m, "node %s (%s): %s %s has dims %s: ddl takes %d dims, each 1 to %d", n->name, n->op, what,
                     t->name, ints_text(t->dims, t->n_dims, d), nd, INT_MAX);
}

/* dims_are: t's dims (dims_ok) are want's, the shape the graph resolves; else the error, with why. */
static int dims_are(imp *m, const node *n, const tensor *t, const char *what, const int64_t *want, const char *why)
{
    int ok = 1;
    for (int i = 0; i < t->n_dims; i++)
        ok &= t->dims[i] == want[i];
    char d[200], e[200];
    return ok ? DDL_OK
              : fail(m, "node %s (%s): %s %s has dims %s, the graph needs %s (%s)", n->name, n->op, what, t->name,
                     ints_text(t->dims, t->n_dims, d), ints_text(want, t->n_dims, e), why);
}

/* data_ok: t holds float32 values, as many as its dims say, in raw_data or float_data. */
static int data_ok(imp *m, const node *n, const tensor *t, const char *what)
{
    const ddl__pb_slice *s = data(t);
    size_t k = 0, bytes = (size_t)(s->end - s->p);
    char d[200];
    if (t->type != T_FLOAT)
        return fail(m, "node %s (%s): %s %s: data type %d, ddl takes float (1)", n->name, n->op, what, t->name, t->type);
    if (count(t, &k) != 0 || k > SIZE_MAX / 4)
        return fail(m, "node %s (%s): %s %s: dims %s hold more values than memory can", n->name, n->op, what, t->name,
                    ints_text(t->dims, t->n_dims, d));
    if (bytes != 4 * k)
        return fail(m, "node %s (%s): %s %s: dims %s say %zu float32 values (%zu bytes), its %s holds %zu bytes",
                    n->name, n->op, what, t->name, ints_text(t->dims, t->n_dims, d), k, 4 * k,
                    t->raw.p ? "raw_data" : "float_data", bytes);
    return DDL_OK;
}

/* bias_ok: tensor b holds exactly `out` float32 values ((out) or (1, out)). */
static int bias_ok(imp *m, const node *n, const tensor *b, int out)
{
    char d[200];
    if (!count_is(b, (size_t)out))
        return fail(m, "node %s (%s): bias %s has dims %s, the graph needs %d values (the outputs)", n->name, n->op,
                    b->name, ints_text(b->dims, b->n_dims, d), out);
    return data_ok(m, n, b, "bias");
}

/* gemm_bias_ok: Gemm's C broadcasts to (N, out): dims (), (1), (out), (1, 1) or (1, out). */
static int gemm_bias_ok(imp *m, const node *n, const tensor *b, int out)
{
    int ok = b->n_dims <= 2 && (b->n_dims < 2 || b->dims[0] == 1);
    int64_t last = b->n_dims ? b->dims[b->n_dims - 1] : 1;
    char d[200];
    if (!ok || (last != 1 && last != out))
        return fail(m, "node %s (%s): bias %s has dims %s: ddl takes a bias that broadcasts to (N, %d): (), (1), "
                    "(%d), (1, 1) or (1, %d)", n->name, n->op, b->name, ints_text(b->dims, b->n_dims, d), out, out, out);
    return data_ok(m, n, b, "bias");
}

/* ---- the layers ---- */

/* pending_pads: the pads of a Pad of zeros whose output `name` is (1), or 0 and none. */
static int pending_pads(const imp *m, const char *name, int pads[4])
{
    int i = find(m, name);
    if (i < 0 || !m->v[i].padded)
        return 0;
    memcpy(pads, m->v[i].pad, sizeof m->v[i].pad);
    return 1;
}

/* conv_attrs: node n's geometry attributes, as onnx_import_geometry.c takes them. */
static void conv_attrs(const node *n, ddl__onnx_geo *g)
{
    static const char *const names[10] = {"kernel_shape", "strides", "pads", "dilations", "output_padding",
                                          "output_shape", "group", "ceil_mode", "count_include_pad", "storage_order"};
    ddl__onnx_intlist *at[10] = {&g->kernel_shape, &g->strides, &g->pads, &g->dilations, &g->output_padding,
                              &g->output_shape, &g->group, &g->ceil_mode, &g->count_include_pad, &g->storage_order};
    memset(g, 0, sizeof *g);
    for (int i = 0; i < 10; i++) {
        attr a = get(n, names[i]);
        at[i]->found = a.found;
        at[i]->n = a.n;
        memcpy(at[i]->v, a.ints, sizeof a.ints);
    }
    attr ap = get(n, "auto_pad");
    g->has_auto_pad = ap.found;
    snprintf(g->auto_pad, sizeof g->auto_pad, "%s", ap.str);
}

/* conv: Conv (weight (out, in / group, kh, kw), bias (out)) or ConvTranspose (weight (in, out, kh,
 * kw)), of any geometry (onnx_import_geometry.c). */
static int conv(imp *m, ddl_graph *g, const node *n, int transposed)
{
    int x = layer_in(m, n, n->in[0]), w = n->n_in > 1 ? const_in(m, n, n->in[1], "weight") : -1;
    int b = n->n_in > 2 && n->in[2][0] ? const_in(m, n, n->in[2], "bias") : -1;
    int c, h, wd;
    if (x < 0 || w < 0 || (n->n_in > 2 && n->in[2][0] && b < 0) || shape_of(m, g, n, x, &c, &h, &wd) != DDL_OK)
        return DDL_EINVAL;
    const tensor *W = &m->t[w];
    if (dims_ok(m, n, W, "weight", 4) != DDL_OK)
        return DDL_EINVAL;
    ddl__onnx_geo at;
    ddl_conv_geometry geo;
    char why[DDL_ERR_BYTES];
    int pp[4] = {0, 0, 0, 0}, padded = pending_pads(m, n->in[0], pp); /* a Pad of zeros before it */
    conv_attrs(n, &at);
    /* the weight against the graph first, named (the group and kernel_shape as the node says) */
    int64_t group = at.group.found && at.group.n == 1 ? at.group.v[0] : 1;
    int ks = at.kernel_shape.found && at.kernel_shape.n == 2 && at.kernel_shape.v[0] >= 1 &&
             at.kernel_shape.v[0] <= 32767 && at.kernel_shape.v[1] >= 1 && at.kernel_shape.v[1] <= 32767;
    int64_t want[4] = {transposed ? c : W->dims[0], transposed ? W->dims[1] : c / (group > 0 ? group : 1),
                       ks ? at.kernel_shape.v[0] : W->dims[2], ks ? at.kernel_shape.v[1] : W->dims[3]};
    snprintf(why, sizeof why, "its input has %d channels; group %lld", c, (long long)group);
    if (group >= 1 && group <= c && c % group == 0 && (!transposed || group == 1) &&
        dims_are(m, n, W, "weight", want, why) != DDL_OK)
        return DDL_EINVAL;
    if (ddl__onnx_conv_geometry(transposed ? DDL__ONNX_CONV_T : DDL__ONNX_CONV, &at, c, h + pp[0] + pp[2],
                                wd + pp[1] + pp[3], W->dims, &geo, why, sizeof why) != DDL_OK)
        return fail(m, "node %s (%s): %s", n->name, n->op, why);
    if (padded)
        geo.pad_t += pp[0], geo.pad_l += pp[1], geo.pad_b += pp[2], geo.pad_r += pp[3];
    if (data_ok(m, n, W, "weight") != DDL_OK || (b >= 0 && bias_ok(m, n, &m->t[b], geo.out_c) != DDL_OK))
        return DDL_EINVAL;
    geo.no_bias = !transposed && b < 0;
    char name[DDL_GRAPH_NAME_BYTES];
    layer_name(g, W, name);
    int i = transposed ? ddl_graph_deconv2d_ex(g, x, name, &geo) : ddl_graph_conv2d_ex(g, x, name, &geo);
    return added(m, g, n, i, w, b, 0);
}

/* pool: MaxPool (one output: ddl gives no Indices) or AveragePool, of any geometry. */
static int pool(imp *m, ddl_graph *g, const node *n, int avg)
{
    int x = layer_in(m, n, n->in[0]), c, h, wd;
    if (x < 0 || shape_of(m, g, n, x, &c, &h, &wd) != DDL_OK)
        return DDL_EINVAL;
    if (n->n_out > 1 && n->out[1][0])
        return fail(m, "node %s (MaxPool): a second output (Indices) %s: ddl gives none", n->name, n->out[1]);
    ddl__onnx_geo at;
    ddl_pool2d p;
    char why[DDL_ERR_BYTES];
    int pp[4] = {0, 0, 0, 0}, padded = pending_pads(m, n->in[0], pp); /* PyTorch's AvgPool2d: Pad, then pool */
    conv_attrs(n, &at);
    if (ddl__onnx_pool_geometry(avg ? DDL__ONNX_AVGPOOL : DDL__ONNX_MAXPOOL, &at, h + pp[0] + pp[2],
                                wd + pp[1] + pp[3], &p, why, sizeof why) != DDL_OK)
        return fail(m, "node %s (%s): %s", n->name, n->op, why);
    if (padded) { /* the zeros are values of its input: averaged as padding counted */
        ddl_pool2d q = p;
        int own = p.pad_t || p.pad_l || p.pad_b || p.pad_r;
        q.pad_t += pp[0], q.pad_l += pp[1], q.pad_b += pp[2], q.pad_r += pp[3], q.count_include_pad = 1;
        if ((own && !p.count_include_pad) || ddl_pool2d_out(&q, 0, h) != ddl_pool2d_out(&p, 0, h + pp[0] + pp[2]) ||
            ddl_pool2d_out(&q, 1, wd) != ddl_pool2d_out(&p, 1, wd + pp[1] + pp[3]))
            return fail(m, "node %s (AveragePool): after a Pad of zeros (%d, %d, %d, %d): ddl folds it only into pads "
                        "counted alike, and windows the same with and without it", n->name, pp[0], pp[1], pp[2],
                        pp[3]);
        p = q;
    }
    return added(m, g, n, avg ? ddl_graph_avgpool_ex(g, x, &p) : ddl_graph_maxpool_ex(g, x, &p), -1, -1, 0);
}

/* dense: Gemm (B (out, in) with transB 1, else (in, out)) or MatMul (B (in, out), the bias from
 * an Add that follows); in is what the graph resolves before it (c * h * w). */
static int dense(imp *m, ddl_graph *g, const node *n, int gemm)
{
    int vw = n->n_in > 1 ? find(m, n->in[1]) : -1, view = vw >= 0 ? m->v[vw].tview : -1; /* Transpose(W) */
    int x = layer_in(m, n, n->in[0]), w = view >= 0 ? view : n->n_in > 1 ? const_in(m, n, n->in[1], "weight") : -1;
    int b = gemm && n->n_in > 2 && n->in[2][0] ? const_in(m, n, n->in[2], "bias") : -1;
    int c, h, wd, tb = 0, zero;
    if (x < 0 || w < 0 || (gemm && n->n_in > 2 && n->in[2][0] && b < 0) || shape_of(m, g, n, x, &c, &h, &wd) != 0)
        return DDL_EINVAL;
    if (x == 0 || (ddl__onnx_rank(g, x) != 2 && !(gemm && h == 1 && wd == 1))) /* MatMul of (N, C, H, W): on W */
        return fail(m, "node %s (%s): its input is %s (N, %d, %d, %d): ddl takes %s of a flat (N, K) input (Flatten "
                    "first)", n->name, n->op, x == 0 ? "the model's image input" : "an image", c, h, wd, n->op);
    attr al = get(n, "alpha"), be = get(n, "beta");
    if ((gemm && int_attr(m, n, "transB", 0, 0, 1, "0 or 1", &tb) != DDL_OK) ||
        int_attr(m, n, "transA", 0, 0, 0, "0 (no transA)", &zero) != DDL_OK)
        return DDL_EINVAL;
    if ((al.found && al.f != 1.0f) || (be.found && be.f != 1.0f))
        return fail(m, "node %s (%s): alpha %g, beta %g: ddl takes 1 and 1", n->name, n->op,
                    (double)(al.found ? al.f : 1.0f), (double)(be.found ? be.f : 1.0f));
    int transposed = view >= 0 ? tb : !tb;
    const tensor *W = &m->t[w];
    if (dims_ok(m, n, W, "weight", 2) != DDL_OK)
        return DDL_EINVAL;
    int in = c * h * wd, out = (int)W->dims[transposed ? 1 : 0]; /* c * h * wd: at most INT_MAX, as resolved */
    int64_t want[2] = {transposed ? in : out, transposed ? out : in};
    char why[80];
    snprintf(why, sizeof why, "its input has %d values, %d x %d x %d", in, c, h, wd);
    if (dims_are(m, n, W, "weight", want, why) != DDL_OK || data_ok(m, n, W, "weight") != DDL_OK ||
        (b >= 0 && gemm_bias_ok(m, n, &m->t[b], out) != DDL_OK))
        return DDL_EINVAL;
    char name[DDL_GRAPH_NAME_BYTES];
    layer_name(g, W, name);
    /* no bias: nn.Linear(bias=False), or a MatMul whose bias an Add after it may give (onnx_affine.c) */
    return added(m, g, n, ddl_graph_linear(g, x, name, out, b >= 0), w, b, transposed);
}

/* alias: the node changes nothing ddl keeps (Identity, Dropout at inference, a last Softmax). */
static int alias(imp *m, const node *n)
{
    int i = find(m, n->in[0]);
    if (i < 0)
        return fail(m, "node %s (%s): input %s is not defined before it", n->name, n->op, n->in[0]);
    value v = m->v[i]; /* define may move the table's end, never an entry */
    int rc = define(m, n->out[0], v.layer, v.tensor);
    if (rc == DDL_OK && v.padded) /* a Pad not yet folded stays pending through it */
        m->v[m->n_v - 1].padded = 1, memcpy(m->v[m->n_v - 1].pad, v.pad, sizeof v.pad);
    return rc;
}

/* add_layers: Add of two layers or more, of one shape (a chain of add layers). */
static int add_layers(imp *m, ddl_graph *g, const node *n)
{
    int x = n->n_in ? layer_in(m, n, n->in[0]) : -1;
    for (int i = 1; x >= 0 && i < n->n_in; i++) {
        int y = layer_in(m, n, n->in[i]);
        x = y < 0 ? -1 : ddl_graph_add(g, x, y);
        if (x < 0 && y >= 0)
            return fail(m, "node %s (%s): %s", n->name, n->op, ddl_graph_error(g));
    }
    return x < 0 || n->n_in < 2 ? (n->n_in < 2 ? fail(m, "node %s (%s): needs two inputs", n->name, n->op) : DDL_EINVAL)
                                : added(m, g, n, x, -1, -1, 0);
}

/* pad_node: a Pad of constant zeros on the height and width of a layer's output (PyTorch's
 * AvgPool2d with padding, whose count_include_pad it is): kept on the value, for the Conv or
 * AveragePool that reads it to fold into its pads (layer_in refuses it to any other node). */
static int pad_node(imp *m, const node *n, const int64_t *pads, int k)
{
    attr mo = get(n, "mode"), va = get(n, "value");
    int ok = k == 8 && !pads[0] && !pads[1] && !pads[4] && !pads[5] && (!mo.found || strcmp(mo.str, "constant") == 0) &&
             (!va.found || va.f == 0.0f);
    for (int i = 0; ok && i < 8; i++)
        ok = pads[i] >= 0 && pads[i] <= 32767;
    if (ok && n->n_in > 2 && n->in[2][0]) { /* opset 11: the constant's value is an input */
        int t = find(m, n->in[2]);
        float v = 1.0f;
        ok = t >= 0 && m->v[t].tensor >= 0 && scalar_of(&m->t[m->v[t].tensor], &v) == 0 && v == 0.0f;
    }
    int x = ok ? layer_in(m, n, n->in[0]) : -1;
    if (!ok)
        return fail(m, "node %s (Pad): ddl takes a Pad of constant zeros of the height and width only, folded into "
                    "the Conv or AveragePool after it", n->name);
    if (x < 0 || define(m, n->out[0], x, -1) != DDL_OK)
        return DDL_EINVAL;
    value *v = &m->v[m->n_v - 1];
    v->padded = 1;
    v->pad[0] = (int)pads[2], v->pad[1] = (int)pads[3], v->pad[2] = (int)pads[6], v->pad[3] = (int)pads[7];
    return DDL_OK;
}

/* dropout: a dropout layer of the node's ratio (its attribute before opset 12, its second input
 * since, 0.5 when absent): the model trains with it and predicts without, whatever mode it was
 * exported in (training_mode is for the exporter's runtime). A ratio of 0 is nothing. */
static int dropout(imp *m, ddl_graph *g, const node *n)
{
    float p = 0.5f;
    attr ra = get(n, "ratio");
    if (ra.found)
        p = ra.f;
    if (n->n_in > 1 && n->in[1][0]) {
        int t = const_in(m, n, n->in[1], "ratio");
        if (t < 0 || !count_is(&m->t[t], 1) || floats_of(&m->t[t], &p, 1) != 0)
            return t < 0 ? DDL_EINVAL : fail(m, "node %s (Dropout): ratio %s: ddl takes one float", n->name, n->in[1]);
    }
    if (n->n_in > 2 && n->in[2][0] && const_in(m, n, n->in[2], "training_mode") < 0)
        return DDL_EINVAL;
    if (!(p >= 0.0f && p < 1.0f))
        return fail(m, "node %s (Dropout): ratio %g: ddl takes 0 <= ratio < 1", n->name, (double)p);
    int i = find(m, n->in[0]);
    if (p == 0.0f || (i >= 0 && m->v[i].tensor >= 0))
        return alias(m, n);
    int x = layer_in(m, n, n->in[0]);
    return x < 0 ? DDL_EINVAL : added(m, g, n, ddl_graph_dropout(g, x, p), -1, -1, 0);
}

static int one_node(imp *m, ddl_graph *g, const node *n)
{
    const char *op = n->op;
    char an[64], val[64];
    if (!ddl__onnx_attrs_known(op, n->attrs, n->n_attrs, an, val)) /* then each op honours or refuses each value */
        return fail(m, "node %s (%s): attribute %s = %s: ONNX defines no such attribute for %s, and ddl does not "
                    "guess", n->name, op, an, val, op);
    int act = ddl__onnx_act(m, g, n); /* activations and softmax: onnx_import_act.c */
    if (act != -1)
        return act;
    int shaped = ddl__onnx_shape_node(m, g, n); /* onnx_import_shape.c: shapes, reshapes, resizes, norms */
    if (shaped != -1)
        return shaped;
    if (strcmp(op, "Conv") == 0 || strcmp(op, "ConvTranspose") == 0)
        return conv(m, g, n, op[4] == 'T');
    if (strcmp(op, "MaxPool") == 0 || strcmp(op, "AveragePool") == 0)
        return pool(m, g, n, op[0] == 'A');
    if (strcmp(op, "Gemm") == 0 || strcmp(op, "MatMul") == 0)
        return dense(m, g, n, op[0] == 'G');
    if (strcmp(op, "Relu") == 0 || strcmp(op, "GlobalAveragePool") == 0) {
        int x = layer_in(m, n, n->in[0]);
        return x < 0 ? DDL_EINVAL
                     : added(m, g, n, op[0] == 'R' ? ddl_graph_relu(g, x) : ddl_graph_global_avgpool(g, x), -1, -1, 0);
    }
    if (strcmp(op, "Constant") == 0) {
        attr v = get(n, "value");
        if (!v.found || !v.t.p)
            return fail(m, "node %s (Constant): only a tensor value is taken", n->name);
        int rc = add_tensor(m, v.t, NULL);
        if (rc == DDL_OK) /* known by the node's output name */
            snprintf(m->v[m->n_v - 1].name, NAME, "%s", n->out[0]);
        return rc;
    }
    if (strcmp(op, "Mul") == 0 || strcmp(op, "Div") == 0 || strcmp(op, "Sub") == 0 || strcmp(op, "Add") == 0) {
        int rc = ddl__onnx_affine_node(m, g, n);
        if (rc != -1)
            return rc;
        if (strcmp(op, "Add") == 0)
            return add_layers(m, g, n);
        if (strcmp(op, "Mul") == 0 && n->n_in == 2)
            return ddl__onnx_mul_layers(m, g, n);
        return fail(m, "node %s (%s): ddl takes %s of a layer and a constant (a scalar or one value per channel)",
                    n->name, op, op);
    }
    if (strcmp(op, "Concat") == 0)
        return ddl__onnx_concat(m, g, n);
    if (strcmp(op, "Dropout") == 0)
        return dropout(m, g, n);
    if (strcmp(op, "Identity") == 0)
        return alias(m, n);
    if (strcmp(op, "Pad") == 0) { /* PyTorch puts a Pad of zeros before avg_pool2d: nothing to do */
        int t = n->n_in > 1 ? find(m, n->in[1]) : -1;
        int64_t pads[16];
        int k = t >= 0 && m->v[t].tensor >= 0 ? ints_of(&m->t[m->v[t].tensor], pads, 16) : -1;
        attr pa = get(n, "pads"); /* before opset 11 */
        if (k < 0 && pa.found)
            for (k = 0; k < pa.n; k++)
                pads[k] = pa.ints[k];
        int zero = k >= 0;
        for (int i = 0; i < k; i++)
            zero &= pads[i] == 0;
        if (zero)
            return alias(m, n);
        return pad_node(m, n, pads, k);
    }
    if ((strcmp(op, "Softmax") == 0 || strcmp(op, "LogSoftmax") == 0) && strcmp(n->out[0], m->output) == 0)
        return alias(m, n); /* the logits are ddl's output; the loss and the predictor apply the softmax */
    if (strcmp(op, "BatchNormalization") == 0)
        return ddl__onnx_batchnorm(m, g, n);
    /* where the list is: it no longer fits the 256 bytes of an error with the file's name before it */
    return fail(m, "node %.32s (%.20s): ddl cannot train this operator (docs/DATA.md, \"ONNX operators\", lists "
                "those it takes)", n->name, op);
}

/* ---- the model ---- */

/* graph_io: the graph's input (the first that is no initializer: its C, H, W) and output. */
static int graph_io(imp *m, ddl_graph *g, ddl__pb_slice graph)
{
    ddl__pb_field f;
    int r, nd = 0, c, h, w;
    int64_t dims[8] = {0};
    while ((r = ddl__pb_next(&graph, &f)) > 0) {
        char name[NAME] = "";
        ddl__pb_slice vi = f.s, tp, tt, sh;
        ddl__pb_field e;
        if ((f.number != 11 && f.number != 12) || f.wire != 2)
            continue;
        nd = 0;
        while (ddl__pb_next(&vi, &e) > 0) {
            if (e.number == 1)
                ddl__pb_str(&e, name, sizeof name);
            if (e.number != 2)
                continue;
            for (tp = e.s; ddl__pb_next(&tp, &e) > 0;)      /* TypeProto.tensor_type */
                for (tt = e.number == 1 ? e.s : (ddl__pb_slice){0, 0}; ddl__pb_next(&tt, &e) > 0;)
                    for (sh = e.number == 2 ? e.s : (ddl__pb_slice){0, 0}; ddl__pb_next(&sh, &e) > 0;) {
                        ddl__pb_slice d = e.s;  /* TensorShapeProto.dim: dim_value or a name */
                        ddl__pb_field dv;
                        int64_t v = 0; /* 0: a name (N), or none */
                        while (e.number == 1 && ddl__pb_next(&d, &dv) > 0)
                            v = dv.number == 1 ? (int64_t)dv.v : v;
                        if (e.number == 1 && nd < 8)
                            dims[nd] = v;
                        nd += e.number == 1 && nd < 9;
                    }
        }
        if (f.number == 12 && !m->output[0])
            snprintf(m->output, NAME, "%s", name);
        if (f.number == 11 && !m->input[0] && find(m, name) < 0) {
            snprintf(m->input, NAME, "%s", name);
            char t[200];
            int ok = nd == 4;
            for (int i = 1; ok && i < 4; i++)
                ok = dims[i] >= 1 && dims[i] <= INT_MAX;
            if (!ok)
                return fail(m, "input %s: dims %s%s: ddl takes images (N, C, H, W) of a fixed C, H and W, each 1 to %d",
                            name, ints_text(dims, nd < 8 ? nd : 8, t), nd > 8 ? " ..." : "", INT_MAX);
            char why[DDL_ERR_BYTES];
            m->in_n = dims[0] >= 1 && dims[0] <= INT_MAX ? (int)dims[0] : 0;
            m->in_norm.c = dims[1] < DDL__ONNX_MAX_CHANNELS ? (int)dims[1] : DDL__ONNX_MAX_CHANNELS;
            for (int k = 0; k < m->in_norm.c; k++)
                m->in_norm.scale[k] = 1.0f, m->in_norm.shift[k] = 0.0f;
            if (ddl_graph_input(g, (int)dims[1], (int)dims[2], (int)dims[3]) < 0 || define(m, name, 0, -1) != DDL_OK)
                return fail(m, "input %s: %s", name, ddl_graph_error(g));
            if (ddl__graph_layer_shape(g, 0, &c, &h, &w, why, sizeof why) != DDL_OK)
                return fail(m, "input %s: %s", name, why);
        }
    }
    if (r < 0 || !m->input[0] || !m->output[0])
        return fail(m, "a graph without an image input or an output");
    return DDL_OK;
}

/* model: check the opset, then the graph's initializers, input, nodes and output. */
static int model(imp *m, ddl_graph *g, ddl__pb_slice file)
{
    ddl__pb_field f;
    ddl__pb_slice graph = {0, 0};
    int r, opset = 0;
    while ((r = ddl__pb_next(&file, &f)) > 0) {
        if (f.number == 7 && f.wire == 2)
            graph = f.s;
        if (f.number == 8 && f.wire == 2) { /* OperatorSetIdProto: the default domain's version */
            ddl__pb_slice o = f.s;
            ddl__pb_field e;
            char domain[64] = "";
            int64_t v = 0;
            while (ddl__pb_next(&o, &e) > 0)
                e.number == 1 ? (void)ddl__pb_str(&e, domain, sizeof domain) : (void)(v = e.number == 2 ? (int64_t)e.v : v);
            if (!domain[0] || strcmp(domain, "ai.onnx") == 0)
                opset = (int)v;
        }
    }
    if (r < 0 || !graph.p)
        return fail(m, "not an ONNX model (no graph, or not protobuf)");
    if (opset < 7 || opset > 18)
        return fail(m, "opset %d: ddl reads opsets 7 to 18", opset);
    m->graph = graph;
    m->opset = opset;
    ddl__pb_slice s = graph;
    while ((r = ddl__pb_next(&s, &f)) > 0)
        if (f.number == 5 && f.wire == 2 && add_tensor(m, f.s, NULL) != DDL_OK)
            return DDL_EINVAL;
    int rc = graph_io(m, g, graph);
    for (s = graph; rc == DDL_OK && (r = ddl__pb_next(&s, &f)) > 0;)
        if (f.number == 1 && f.wire == 2) {
            node n;
            rc = node_read(m, f.s, &n);
            if (rc == DDL_OK)
                rc = one_node(m, g, &n);
        }
    if (rc != DDL_OK)
        return rc;
    int o = find(m, m->output);
    if (o < 0 || m->v[o].layer < 1)
        return fail(m, "output %s: not the output of a layer ddl made", m->output);
    return ddl_graph_output(g, m->v[o].layer, DDL_HEAD_XENT) < 0 ? fail(m, "%s", ddl_graph_error(g)) : DDL_OK;
}

int ddl_graph_import_onnx(ddl_graph *g, const char *path, const ddl_allocator *alloc, ddl_onnx_import *out, char *err,
                          size_t err_bytes)
{
    if (!g || !path || !out)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_graph_import_onnx: a graph, a path and out");
    memset(out, 0, sizeof *out);
    ddl_graph_init(g, sizeof *g);
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > MAX_FILE) {
        int e = errno;
        if (f)
            fclose(f);
        return ddl__errf(err, err_bytes, DDL_EIO, "%s: %s", path, f ? "not a regular file of at most 2 GiB" : strerror(e));
    }
    unsigned char *buf = ddl__alloc(alloc, (size_t)st.st_size + 1);
    imp *m = ddl__alloc(alloc, sizeof *m);
    int rc = !buf || !m ? DDL_ENOMEM : fread(buf, 1, (size_t)st.st_size, f) == (size_t)st.st_size ? DDL_OK : DDL_EIO;
    fclose(f);
    if (rc == DDL_OK) {
        /* the tables (2.5 MB) are written before they are read: a tensor or value when it is
         * defined, ps[i] when layer i is; clearing them all cost most of an import's time */
        m->n_t = m->n_v = m->input_touched = m->n_pend = m->stage = m->in_affine = m->in_n = 0;
        m->n_fold = 0;
        m->output_softmax = 0;
        m->in_norm.c = 0;
        m->g = g;
        m->input[0] = m->output[0] = m->err[0] = '\0';
        rc = model(m, g, (ddl__pb_slice){buf, buf + st.st_size});
        if (rc == DDL_OK)
            rc = ddl__onnx_gather(m, g, alloc, out);
        if (rc != DDL_OK) { /* a long directory gives way to the message: the file's own name stays */
            const char *base = strrchr(path, '/');
            int fits = strlen(path) + 2 + strlen(m->err) < err_bytes;
            ddl__errf(err, err_bytes, rc, "%s: %s", fits || !base ? path : base + 1, m->err);
        }
        ddl_graph_input_shape(g, &out->in_c, &out->in_h, &out->in_w);
        ddl__onnx_out_norm(m, out);
    } else {
        ddl__errf(err, err_bytes, rc, "%s: %s", path, rc == DDL_ENOMEM ? "out of memory" : "cannot read");
    }
    ddl__free(alloc, m);
    ddl__free(alloc, buf);
    if (rc != DDL_OK)
        ddl_graph_init(g, sizeof *g);
    return rc;
}

void ddl_onnx_import_free(ddl_onnx_import *im, const ddl_allocator *alloc)
{
    if (im) {
        ddl__free(alloc, im->params);
        ddl__free(alloc, im->buffers);
        im->params = NULL;
        im->buffers = NULL;
        im->n_buffers = 0;
    }
}

/* ---- lent to the files of operator families (onnx_impl.h) ---- */

int ddl__onnx_fail(imp *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err, sizeof m->err, fmt, ap);
    va_end(ap);
    return DDL_EINVAL;
}

int ddl__onnx_attr(const node *n, const char *name, float *f, int64_t *i, int *n_ints)
{
    attr a = get(n, name);
    if (!a.found) /* the caller's default stays */
        return 0;
    if (f)
        *f = a.f;
    if (i)
        *i = a.n >= 1 ? a.ints[0] : 0;
    if (n_ints)
        *n_ints = a.n;
    return 1;
}

int ddl__onnx_attr_ints(const node *n, const char *name, int64_t *out, int max)
{
    attr a = get(n, name);
    if (!a.found)
        return 0;
    if (a.n < 0 || a.n > max)
        return -1;
    memcpy(out, a.ints, (size_t)a.n * sizeof *out);
    return a.n;
}

int ddl__onnx_layer_in(imp *m, const node *n, const char *name) { return layer_in(m, n, name); }

int ddl__onnx_value(const imp *m, const char *name, int *layer, int *tens)
{
    int i = find(m, name);
    if (i >= 0)
        *layer = m->v[i].layer, *tens = m->v[i].tensor;
    return i;
}

int ddl__onnx_define(imp *m, const char *name, int layer, int t) { return define(m, name, layer, t); }

int ddl__onnx_added(imp *m, ddl_graph *g, const node *n, int i) { return added(m, g, n, i, -1, -1, 0); }

int ddl__onnx_shape(imp *m, const ddl_graph *g, const node *n, int i, int *c, int *h, int *w)
{
    return shape_of(m, g, n, i, c, h, w);
}

/* constant_node: the tensor a Constant node holds (its value, or value_float) into *t. */
static int constant_node(imp *m, const node *n, tensor *t, float *vf)
{
    attr v = get(n, "value"), f = get(n, "value_float");
    if (f.found) {
        *vf = f.f;
        return 1;
    }
    return v.found && v.t.p && tensor_read(m, v.t, t) == DDL_OK ? 0 : -1;
}

int ddl__onnx_scalar(imp *m, const char *name, float *v)
{
    int i = find(m, name);
    if (i >= 0)
        return m->v[i].tensor >= 0 ? scalar_of(&m->t[m->v[i].tensor], v) : -1;
    node n;
    tensor t;
    int k;
    if (ddl__onnx_producer(m, name, &n) != 0 || strcmp(n.op, "Constant") != 0 || (k = constant_node(m, &n, &t, v)) < 0)
        return -1;
    return k == 1 ? 0 : scalar_of(&t, v);
}

int ddl__onnx_ints(imp *m, const char *name, int64_t *out, int max)
{
    int i = find(m, name);
    if (i >= 0)
        return m->v[i].tensor >= 0 ? ints_of(&m->t[m->v[i].tensor], out, max) : -1;
    node n;
    tensor t;
    float f;
    if (ddl__onnx_producer(m, name, &n) != 0 || strcmp(n.op, "Constant") != 0 || constant_node(m, &n, &t, &f) != 0)
        return -1;
    return ints_of(&t, out, max);
}

int ddl__onnx_node_read(imp *m, ddl__pb_slice s, node *out) { return node_read(m, s, out); }

ddl__pb_slice ddl__onnx_graph(const imp *m) { return m->graph; }

int ddl__onnx_opset(const imp *m) { return m->opset; }
const char *ddl__onnx_output(const imp *m) { return m->output; }

int ddl__onnx_find(const imp *m, const char *name) { return find(m, name); }
int ddl__onnx_const_in(imp *m, const node *n, const char *name, const char *what) { return const_in(m, n, name, what); }
int ddl__onnx_int_attr(imp *m, const node *n, const char *name, int64_t dflt, int64_t lo, int64_t hi, const char *need,
                       int *v)
{
    return int_attr(m, n, name, dflt, lo, hi, need, v);
}
attr ddl__onnx_get(const node *n, const char *name) { return get(n, name); }
int ddl__onnx_count(const tensor *t, size_t *n) { return count(t, n); }
int ddl__onnx_ints_of(const tensor *t, int64_t *out, int max) { return ints_of(t, out, max); }
int ddl__onnx_floats_of(const tensor *t, float *out, size_t n) { return floats_of(t, out, n); }
int ddl__onnx_data_ok(imp *m, const node *n, const tensor *t, const char *what) { return data_ok(m, n, t, what); }
int ddl__onnx_added_w(imp *m, ddl_graph *g, const node *n, int i, int w, int b, int transpose)
{
    return added(m, g, n, i, w, b, transpose);
}
const char *ddl__onnx_ints_text(const int64_t *v, int n, char out[200]) { return ints_text(v, n, out); }
void ddl__onnx_layer_name(const ddl_graph *g, const tensor *w, char *out) { layer_name(g, w, out); }
