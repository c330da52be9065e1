/* onnx_import.c - ddl_graph_import_onnx: a layer graph and its weights from an ONNX file that
 * another tool wrote (PyTorch's torch.onnx.export, onnx.helper, ddl's own export). Nodes are
 * taken in file order (ONNX keeps them topologically sorted) and each becomes a layer: Conv,
 * ConvTranspose, Relu, MaxPool, AveragePool, GlobalAveragePool, Gemm, MatMul (+ Add of a bias),
 * Flatten, Reshape to (N, -1), Concat, Add, Dropout and Identity (nothing at inference), a last
 * Softmax (dropped: ddl's output is the logits). A Mul/Div then Add/Sub of constants on the input
 * (how ddl's export and many exporters scale pixels) becomes the input normalisation. Whatever
 * else is refused with the node named: ddl trains what it imports, so it imports only what it
 * can train. Every length in the file is checked before use; nothing is allocated per node. */
#include "onnx_impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define NAME 160               /* bytes of a value's name */
#define MAX_TENSORS 4096
#define MAX_VALUES 8192
#define MAX_IO 8               /* inputs or outputs of a node */
#define MAX_FILE ((uint64_t)1 << 31)

enum { T_FLOAT = 1, T_INT64 = 7 };

typedef struct tensor {
    char name[NAME];
    int type, n_dims;
    int64_t dims[8];
    ddl__pb_slice raw, floats, ints; /* raw_data, float_data, int64_data */
} tensor;

typedef struct value {
    char name[NAME];
    int layer;                 /* a layer's output, or -1 */
    int tensor;                /* a constant, or -1 */
} value;

typedef struct param_src {
    int w, b;                  /* tensors of the weight and the bias (-1: zeros) */
    int transpose;             /* the weight is (in, out): Gemm without transB, MatMul */
} param_src;

typedef struct imp {
    tensor t[MAX_TENSORS];
    value v[MAX_VALUES];
    param_src ps[DDL_GRAPH_MAX_LAYERS]; /* by layer */
    int n_t, n_v;
    int input_touched;         /* a layer already reads the input: no more normalisation */
    float scale, shift;        /* pixels p -> p * scale + shift before the first layer */
    char input[NAME], output[NAME];
    char err[DDL_ERR_BYTES];
} imp;

typedef struct node {
    char op[64], name[NAME];
    char in[MAX_IO][NAME], out[MAX_IO][NAME];
    int n_in, n_out;
    ddl__pb_slice attrs[32];
    int n_attrs;
} node;

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

static size_t count(const tensor *t)
{
    size_t n = 1;
    for (int i = 0; i < t->n_dims; i++)
        n *= t->dims[i] > 0 ? (size_t)t->dims[i] : 0;
    return n;
}

/* floats_of: tensor t's n floats into out (n == count(t), checked by the caller); -1 if its data
 * is not n little-endian float32 values. */
static int floats_of(const tensor *t, float *out, size_t n)
{
    const ddl__pb_slice *s = t->raw.p ? &t->raw : &t->floats;
    if (t->type != T_FLOAT || (size_t)(s->end - s->p) != 4 * n)
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
static int scalar_of(const tensor *t, float *v) { return count(t) == 1 && floats_of(t, v, 1) == 0 ? 0 : -1; }

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
            bad |= n->n_in == MAX_IO || ddl__pb_str(&f, n->in[n->n_in++], NAME) != 0;
        else if (f.number == 2)
            bad |= n->n_out == MAX_IO || ddl__pb_str(&f, n->out[n->n_out++], NAME) != 0;
        else if (f.number == 3)
            bad |= ddl__pb_str(&f, n->name, NAME) != 0;
        else if (f.number == 4)
            bad |= ddl__pb_str(&f, n->op, sizeof n->op) != 0;
        else if (f.number == 5 && n->n_attrs < 32)
            n->attrs[n->n_attrs++] = f.s;
    }
    if (!n->name[0] && n->n_out)
        snprintf(n->name, sizeof n->name, "(unnamed, output %.100s)", n->out[0]);
    if (r < 0 || bad || !n->n_out || !n->op[0])
        return fail(m, "a damaged node (after %.100s)", n->name[0] ? n->name : "the start");
    return DDL_OK;
}

typedef struct attr {
    int found, n;
    int64_t ints[8];
    float f;
    ddl__pb_slice t;
} attr;

/* get: node n's attribute `name` (ints, an int, a float or a tensor). */
static attr get(const node *n, const char *name)
{
    attr a = {0};
    for (int i = 0; i < n->n_attrs; i++) {
        ddl__pb_slice s = n->attrs[i];
        ddl__pb_field f;
        char an[64] = "";
        attr x = {0};
        while (ddl__pb_next(&s, &f) > 0) {
            if (f.number == 1)
                ddl__pb_str(&f, an, sizeof an);
            else if (f.number == 2 && f.wire == 5) {
                uint32_t u = (uint32_t)f.v;
                memcpy(&x.f, &u, 4);
            } else if (f.number == 3)
                x.ints[0] = (int64_t)f.v, x.n = x.n ? x.n : 1;
            else if (f.number == 5)
                x.t = f.s;
            else if (f.number == 8)
                ddl__pb_ints(&f, x.ints, 8, &x.n);
        }
        if (strcmp(an, name) == 0) {
            x.found = 1;
            return x;
        }
    }
    return a;
}

/* square: an attribute of two equal values (or of four, pads) or absent; its value or -1. */
static int square(const node *n, const char *name, int absent)
{
    attr a = get(n, name);
    if (!a.found)
        return absent;
    for (int i = 1; i < a.n; i++)
        if (a.ints[i] != a.ints[0])
            return -1;
    return a.n ? (int)a.ints[0] : absent;
}

/* layer_in: the layer value `name` is; -1 with the error set. */
static int layer_in(imp *m, const node *n, const char *name)
{
    int i = find(m, name);
    if (i >= 0 && m->v[i].layer >= 0) {
        if (m->v[i].layer == 0)
            m->input_touched = 1;
        return m->v[i].layer;
    }
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
    snprintf(out, DDL_GRAPH_NAME_BYTES, "%s", ok ? s : "");
}

/* added: record layer i (or the graph's error) as node n's output. */
static int added(imp *m, ddl_graph *g, const node *n, int i, int w, int b, int transpose)
{
    if (i < 0)
        return fail(m, "node %s (%s): %s", n->name, n->op, ddl_graph_error(g));
    m->ps[i] = (param_src){w, b, transpose};
    return define(m, n->out[0], i, -1);
}

/* ---- the layers ---- */

static int conv(imp *m, ddl_graph *g, const node *n, int transposed)
{
    int x = layer_in(m, n, n->in[0]), w = n->n_in > 1 ? const_in(m, n, n->in[1], "weight") : -1;
    int b = n->n_in > 2 && n->in[2][0] ? const_in(m, n, n->in[2], "bias") : -1;
    if (x < 0 || w < 0 || (n->n_in > 2 && n->in[2][0] && b < 0))
        return DDL_EINVAL;
    const tensor *W = &m->t[w];
    int k = square(n, "kernel_shape", W->n_dims == 4 ? (int)W->dims[2] : -1), s = square(n, "strides", 1);
    int pad = square(n, "pads", 0), dil = square(n, "dilations", 1), group = square(n, "group", 1);
    attr ap = get(n, "auto_pad"), op = get(n, "output_padding");
    if (W->n_dims != 4 || W->dims[2] != W->dims[3] || k != W->dims[2] || s < 1 || pad < 0 || dil != 1 || group != 1 ||
        (ap.found && ap.t.p) || (op.found && (op.ints[0] || op.ints[1])))
        return fail(m, "node %s (%s): ddl takes square kernels, equal strides and pads, no dilation, groups or "
                    "output padding", n->name, n->op);
    char name[DDL_GRAPH_NAME_BYTES];
    layer_name(g, W, name);
    int out = (int)W->dims[transposed ? 1 : 0];
    int i = transposed ? ddl_graph_deconv2d(g, x, name, out, k, s, pad)
                       : ddl_graph_conv2d(g, x, name, out, k, s, pad, b >= 0);
    return added(m, g, n, i, w, b, 0);
}

static int pool(imp *m, ddl_graph *g, const node *n, int avg)
{
    int x = layer_in(m, n, n->in[0]), k = square(n, "kernel_shape", -1), s = square(n, "strides", 1);
    if (x < 0)
        return DDL_EINVAL;
    if (k < 1 || s < 1 || square(n, "pads", 0) != 0 || square(n, "ceil_mode", 0) != 0 || square(n, "dilations", 1) != 1)
        return fail(m, "node %s (%s): ddl pools square windows without padding, dilation or ceil_mode", n->name, n->op);
    return added(m, g, n, avg ? ddl_graph_avgpool(g, x, k, s) : ddl_graph_maxpool(g, x, k, s), -1, -1, 0);
}

/* dense: Gemm (B (out, in) with transB 1, else (in, out)) or MatMul (B (in, out), the bias from
 * an Add that follows). */
static int dense(imp *m, ddl_graph *g, const node *n, int gemm)
{
    int x = layer_in(m, n, n->in[0]), w = n->n_in > 1 ? const_in(m, n, n->in[1], "weight") : -1;
    int b = gemm && n->n_in > 2 && n->in[2][0] ? const_in(m, n, n->in[2], "bias") : -1;
    if (x < 0 || w < 0 || (gemm && n->n_in > 2 && n->in[2][0] && b < 0))
        return DDL_EINVAL;
    attr ta = get(n, "transA"), tb = get(n, "transB"), al = get(n, "alpha"), be = get(n, "beta");
    int transposed = !(gemm && tb.found && tb.ints[0] == 1);
    const tensor *W = &m->t[w];
    int out = W->n_dims == 2 ? (int)W->dims[transposed ? 1 : 0] : 0;
    if (W->n_dims != 2 || (ta.found && ta.ints[0]) || (al.found && al.f != 1.0f) || (be.found && be.f != 1.0f) ||
        (b >= 0 && count(&m->t[b]) != (size_t)out))
        return fail(m, "node %s (%s): ddl takes a 2-D weight, no transA, alpha and beta 1, a bias of the outputs",
                    n->name, n->op);
    char name[DDL_GRAPH_NAME_BYTES];
    layer_name(g, W, name);
    return added(m, g, n, ddl_graph_dense(g, x, name, out), w, b, transposed);
}

/* flatten: Flatten (axis 1) or Reshape to (N, -1) with a constant shape of two values. */
static int flatten(imp *m, ddl_graph *g, const node *n)
{
    int x = layer_in(m, n, n->in[0]);
    if (x < 0)
        return DDL_EINVAL;
    if (strcmp(n->op, "Reshape") == 0) {
        int t = n->n_in > 1 ? const_in(m, n, n->in[1], "shape") : -1;
        int64_t s[8];
        int k = t >= 0 ? ints_of(&m->t[t], s, 8) : -1;
        if (t < 0 || k != 2 || (s[1] != -1 && s[0] != -1 && s[0] != 0 && s[0] != 1))
            return t < 0 ? DDL_EINVAL
                         : fail(m, "node %s (Reshape): ddl reshapes only to (N, -1) (flatten); computed shapes "
                                "(Shape, Gather, ...) are not taken: export torch.flatten(x, 1)", n->name);
    } else if (square(n, "axis", 1) != 1) {
        return fail(m, "node %s (Flatten): ddl flattens from axis 1 only", n->name);
    }
    return added(m, g, n, ddl_graph_flatten(g, x), -1, -1, 0);
}

/* affine: Mul, Div, Add or Sub of a constant: on the input (before any layer reads it), the
 * input normalisation; an Add of a vector after MatMul, its bias. */
static int affine(imp *m, ddl_graph *g, const node *n)
{
    int a = find(m, n->in[0]), c = n->n_in > 1 ? find(m, n->in[1]) : -1;
    if (a >= 0 && c >= 0 && m->v[a].tensor >= 0 && m->v[c].layer >= 0) { /* constant first */
        int s = a;
        a = c, c = s;
    }
    if (a < 0 || c < 0 || m->v[a].layer < 0 || m->v[c].tensor < 0)
        return -1; /* not this case */
    const tensor *t = &m->t[m->v[c].tensor];
    int layer = m->v[a].layer;
    float v;
    if (layer == 0 && !m->input_touched && scalar_of(t, &v) == 0) {
        char op = n->op[0];
        if (op == 'M')
            m->scale *= v, m->shift *= v;
        else if (op == 'D' && v != 0.0f)
            m->scale /= v, m->shift /= v;
        else if (op == 'A')
            m->shift += v;
        else if (op == 'S')
            m->shift -= v;
        else
            return -1;
        return define(m, n->out[0], 0, -1);
    }
    if (strcmp(n->op, "Add") == 0 && layer > 0 && g->layers[layer].op == DDL__OP_DENSE && m->ps[layer].b < 0 &&
        t->type == T_FLOAT && count(t) == (size_t)g->layers[layer].out) {
        m->ps[layer].b = m->v[c].tensor; /* MatMul + Add: the Linear's bias */
        return define(m, n->out[0], layer, -1);
    }
    return -1;
}

/* join: Add or Concat (axis 1) of layers. */
static int join(imp *m, ddl_graph *g, const node *n)
{
    if (strcmp(n->op, "Concat") == 0 && square(n, "axis", -1) != 1)
        return fail(m, "node %s (Concat): ddl joins along channels (axis 1) only", n->name);
    int x = n->n_in ? layer_in(m, n, n->in[0]) : -1;
    for (int i = 1; x >= 0 && i < n->n_in; i++) {
        int y = layer_in(m, n, n->in[i]);
        x = y < 0 ? -1 : n->op[0] == 'A' ? ddl_graph_add(g, x, y) : ddl_graph_concat(g, x, y);
        if (x < 0 && y >= 0)
            return fail(m, "node %s (%s): %s", n->name, n->op, ddl_graph_error(g));
    }
    return x < 0 || n->n_in < 2 ? (n->n_in < 2 ? fail(m, "node %s (%s): needs two inputs", n->name, n->op) : DDL_EINVAL)
                                : added(m, g, n, x, -1, -1, 0);
}

/* alias: the node changes nothing ddl keeps (Identity, Dropout at inference, a last Softmax). */
static int alias(imp *m, const node *n)
{
    int i = find(m, n->in[0]);
    if (i < 0)
        return fail(m, "node %s (%s): input %s is not defined before it", n->name, n->op, n->in[0]);
    return define(m, n->out[0], m->v[i].layer, m->v[i].tensor);
}

static int one_node(imp *m, ddl_graph *g, const node *n)
{
    const char *op = n->op;
    if (strcmp(op, "Conv") == 0 || strcmp(op, "ConvTranspose") == 0)
        return conv(m, g, n, op[4] == 'T');
    if (strcmp(op, "MaxPool") == 0 || strcmp(op, "AveragePool") == 0)
        return pool(m, g, n, op[0] == 'A');
    if (strcmp(op, "Gemm") == 0 || strcmp(op, "MatMul") == 0)
        return dense(m, g, n, op[0] == 'G');
    if (strcmp(op, "Flatten") == 0 || strcmp(op, "Reshape") == 0)
        return flatten(m, g, n);
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
        int rc = affine(m, g, n);
        if (rc != -1)
            return rc;
        if (strcmp(op, "Add") == 0)
            return join(m, g, n);
        return fail(m, "node %s (%s): ddl takes %s only of the input by a constant (its normalisation)", n->name, op,
                    op);
    }
    if (strcmp(op, "Concat") == 0)
        return join(m, g, n);
    if (strcmp(op, "Identity") == 0 || strcmp(op, "Dropout") == 0)
        return alias(m, n);
    if (strcmp(op, "Pad") == 0) { /* PyTorch puts a Pad of zeros before avg_pool2d: nothing to do */
        int t = n->n_in > 1 ? find(m, n->in[1]) : -1;
        int64_t pads[16];
        int k = t >= 0 && m->v[t].tensor >= 0 ? ints_of(&m->t[m->v[t].tensor], pads, 16) : -1;
        attr pa = get(n, "pads"); /* before opset 11 */
        if (k < 0 && pa.found)
            for (k = 0; k < pa.n; k++)
                pads[k] = pa.ints[k];
        for (int i = 0; i < k; i++)
            if (pads[i] != 0)
                k = -1;
        if (k >= 0)
            return alias(m, n);
        return fail(m, "node %s (Pad): ddl takes only a Pad of zeros (pad inside Conv instead)", n->name);
    }
    if ((strcmp(op, "Softmax") == 0 || strcmp(op, "LogSoftmax") == 0) && strcmp(n->out[0], m->output) == 0)
        return alias(m, n); /* the logits are ddl's output; the loss and the predictor apply the softmax */
    if (strcmp(op, "BatchNormalization") == 0)
        return fail(m, "node %s (BatchNormalization): ddl trains without batch statistics; use GroupNorm, or "
                    "fold it into the conv (fuse_conv_bn_eval) before exporting", n->name);
    return fail(m, "node %s (%s): ddl cannot train this operator (it takes Conv, ConvTranspose, Relu, MaxPool, "
                "AveragePool, GlobalAveragePool, Gemm, MatMul, Flatten, Reshape to (N, -1), Concat, Add, Dropout, "
                "Identity, a last Softmax)", n->name, op);
}

/* ---- the model ---- */

/* graph_io: the graph's input (the first that is no initializer: its C, H, W) and output. */
static int graph_io(imp *m, ddl_graph *g, ddl__pb_slice graph)
{
    ddl__pb_field f;
    int r, dims[4] = {0}, nd = 0;
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
                        int v = 0;
                        while (e.number == 1 && ddl__pb_next(&d, &dv) > 0)
                            v = dv.number == 1 ? (int)dv.v : v;
                        if (e.number == 1 && nd < 4)
                            dims[nd++] = v;
                    }
        }
        if (f.number == 12 && !m->output[0])
            snprintf(m->output, NAME, "%s", name);
        if (f.number == 11 && !m->input[0] && find(m, name) < 0) {
            snprintf(m->input, NAME, "%s", name);
            if (nd != 4 || dims[1] < 1 || dims[2] < 1 || dims[3] < 1)
                return fail(m, "input %s: ddl takes images (N, C, H, W) of a fixed C, H and W", name);
            if (ddl_graph_input(g, dims[1], dims[2], dims[3]) < 0 || define(m, name, 0, -1) != DDL_OK)
                return fail(m, "input %s: %s", name, ddl_graph_error(g));
        }
    }
    if (r < 0 || !m->input[0] || !m->output[0])
        return fail(m, "a graph without an image input or an output");
    return DDL_OK;
}

/* gather: the weights in the order ddl_model_graph() declares them (per layer: weight, bias). */
static int gather(imp *m, const ddl_graph *g, const ddl_allocator *alloc, ddl_onnx_import *out)
{
    size_t n = 0;
    for (int i = 1; i < g->n; i++) {
        const ddl__layer *l = &g->layers[i];
        if (l->op == DDL__OP_CONV || l->op == DDL__OP_DECONV || l->op == DDL__OP_DENSE)
            n += count(&m->t[m->ps[i].w]) + (l->op == DDL__OP_CONV && !l->bias ? 0 : (size_t)l->out);
    }
    float *p = ddl__alloc(alloc, (n ? n : 1) * sizeof *p);
    if (!p)
        return fail(m, "out of memory for %zu weights", n);
    size_t at = 0;
    for (int i = 1; i < g->n; i++) {
        const ddl__layer *l = &g->layers[i];
        if (l->op != DDL__OP_CONV && l->op != DDL__OP_DECONV && l->op != DDL__OP_DENSE)
            continue;
        const tensor *w = &m->t[m->ps[i].w];
        size_t k = count(w);
        if (floats_of(w, p + at, k) != 0) {
            ddl__free(alloc, p);
            return fail(m, "weight %s: not %zu float32 values", w->name, k);
        }
        if (m->ps[i].transpose) { /* (in, out) -> (out, in), through the bias's place as scratch: */
            size_t in = (size_t)w->dims[0], o = (size_t)w->dims[1];
            float *t = ddl__alloc(alloc, k * sizeof *t);
            if (!t) {
                ddl__free(alloc, p);
                return fail(m, "out of memory");
            }
            for (size_t r = 0; r < in; r++)
                for (size_t c = 0; c < o; c++)
                    t[c * in + r] = p[at + r * o + c];
            memcpy(p + at, t, k * sizeof *t);
            ddl__free(alloc, t);
        }
        at += k;
        if (l->op == DDL__OP_CONV && !l->bias)
            continue;
        if (m->ps[i].b >= 0 && floats_of(&m->t[m->ps[i].b], p + at, (size_t)l->out) != 0) {
            ddl__free(alloc, p);
            return fail(m, "bias %s: not %d float32 values", m->t[m->ps[i].b].name, l->out);
        }
        if (m->ps[i].b < 0)
            memset(p + at, 0, (size_t)l->out * sizeof *p);
        at += (size_t)l->out;
    }
    out->params = p;
    out->n_params = n;
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
        memset(m, 0, sizeof *m);
        m->scale = 1.0f;
        rc = model(m, g, (ddl__pb_slice){buf, buf + st.st_size});
        if (rc == DDL_OK)
            rc = gather(m, g, alloc, out);
        if (rc != DDL_OK)
            ddl__errf(err, err_bytes, rc, "%s: %s", path, m->err);
        ddl_graph_input_shape(g, &out->in_c, &out->in_h, &out->in_w);
        out->scale = m->scale;
        out->shift = m->shift;
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
        im->params = NULL;
    }
}
