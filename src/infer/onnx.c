/* onnx.c - ddl_export_onnx: a checkpoint as an ONNX model (IR version 7, opset 13) that any
 * ONNX runtime runs. The graph takes raw pixels 0..255 as float and normalises them as the
 * trainer does (x * 1 / (255 std) + -mean / std), then runs the checkpoint's layer graph layer
 * for layer (the one it carries: graph models, and plugins that describe themselves, as lenet and
 * unet do; older lenet and unet checkpoints get their preset); weights are initializers under
 * PyTorch's names. tests/test_onnx.sh compares an ONNX runtime's logits with ddl's. Encoded with
 * src/formats/pb.c; the field numbers are onnx.proto's. The graph is read through its face,
 * src/graph/graph.h. */
#include "impl.h"
#include "formats/export.h"
#include "formats/pb.h"
#include "graph/graph.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* onnx.proto field numbers and enum values used below */
enum { MODEL_METADATA = 14, ENTRY_KEY = 1, ENTRY_VALUE = 2 }; /* StringStringEntryProto */
enum { MODEL_IR_VERSION = 1, MODEL_PRODUCER = 2, MODEL_PRODUCER_VERSION = 3, MODEL_GRAPH = 7, MODEL_OPSET = 8,
       OPSET_VERSION = 2 };
enum { GRAPH_NODE = 1, GRAPH_NAME = 2, GRAPH_INITIALIZER = 5, GRAPH_INPUT = 11, GRAPH_OUTPUT = 12 };
enum { NODE_INPUT = 1, NODE_OUTPUT = 2, NODE_OP_TYPE = 4, NODE_ATTRIBUTE = 5 };
enum { ATTR_NAME = 1, ATTR_F = 2, ATTR_I = 3, ATTR_INTS = 8, ATTR_TYPE = 20, ATTR_FLOAT = 1, ATTR_INT = 2,
       ATTR_INTS_TYPE = 7 };
enum { ATTR_S = 4, ATTR_STRING = 3 };
enum { TENSOR_DIMS = 1, TENSOR_DATA_TYPE = 2, TENSOR_NAME = 8, TENSOR_RAW = 9, TYPE_FLOAT = 1, TYPE_INT64 = 7 };
enum { VALUE_NAME = 1, VALUE_TYPE = 2, TYPE_TENSOR = 1, TENSOR_ELEM_TYPE = 1, TENSOR_SHAPE = 2, SHAPE_DIM = 1,
       DIM_VALUE = 1, DIM_PARAM = 2 };

#define IR_VERSION 7
#define OPSET 13
#define MAX_GROUPS 128  /* GroupNorm groups the exporter writes scale and shift vectors for */
#define GN_EPS 1e-5f    /* src/core/ops.c: GroupNorm's epsilon, as PyTorch's */
#define NAME 48         /* bytes of a value's name */
#define MAX_VALUES 1024 /* names of one graph: a U-Net of depth 6 takes about 400 */

typedef struct onnx {
    ddl__pb pb;
    const ddl_checkpoint *ck;
    int n_values;
    char values[MAX_VALUES][NAME]; /* v0, v1, ...: every name made stays valid to the end */
    int bad;                       /* a tensor the graph needs is missing or of another shape */
    char err[DDL_ERR_BYTES];
} onnx;

/* ---- graph pieces ---- */

static void fail(onnx *o, const char *what, const char *name)
{
    if (!o->bad)
        snprintf(o->err, sizeof o->err, "%s%s", what, name);
    o->bad = 1;
}

/* fresh: a new value name, or printf's format with one int argument (NULL: "v<n>"). */
static const char *fresh(onnx *o, const char *fmt, int arg)
{
    if (o->n_values == MAX_VALUES) {
        fail(o, "the graph needs more values than ", "the exporter holds");
        return "";
    }
    char *v = o->values[o->n_values];
    if (fmt)
        snprintf(v, NAME, fmt, arg);
    else
        snprintf(v, NAME, "v%d", o->n_values);
    o->n_values++;
    return v;
}

/* tensor: initializer `name` of dims[0..n_dims) from floats f, or int64s i when f is NULL. */
static void tensor(onnx *o, const char *name, int n_dims, const int64_t *dims, const float *f, const int64_t *i)
{
    ddl__pb *b = &o->pb;
    size_t at = ddl__pb_begin(b, GRAPH_INITIALIZER), count = 1, size = f ? 4 : 8;
    for (int d = 0; d < n_dims; d++) {
        ddl__pb_varint(b, TENSOR_DIMS, (uint64_t)dims[d]);
        count *= (size_t)dims[d];
    }
    ddl__pb_varint(b, TENSOR_DATA_TYPE, f ? TYPE_FLOAT : TYPE_INT64);
    ddl__pb_string(b, TENSOR_NAME, name);
    size_t raw = ddl__pb_begin(b, TENSOR_RAW); /* little endian, written in place */
    unsigned char *p = ddl__pb_reserve(b, count * size);
    for (size_t k = 0; p && k < count; k++) {
        if (f)
            ddl__put_lef(p + 4 * k, f[k]);
        else
            ddl__put_le(p + 8 * k, (uint64_t)i[k], 8);
    }
    ddl__pb_end(b, raw);
    ddl__pb_end(b, at);
}

/* scalar: a float initializer of shape () under a fresh name. */
static const char *scalar(onnx *o, float v)
{
    const char *name = fresh(o, NULL, 0);
    tensor(o, name, 0, NULL, &v, NULL);
    return name;
}

/* find: checkpoint tensor `name`, or NULL. */
static const ddl_param_info *find(const onnx *o, const char *name)
{
    for (int i = 0; i < ddl_checkpoint_get_info(o->ck)->n_tensors; i++)
        if (strcmp(ddl_checkpoint_tensor(o->ck, i)->name, name) == 0)
            return ddl_checkpoint_tensor(o->ck, i);
    return NULL;
}

/* param: initializer of checkpoint tensor `name` under its name, with its own dims, or with
 * n_dims dims given (GroupNorm's (C) as (C, 1, 1)); the count must match. Returns name. */
static const char *param(onnx *o, const char *name, int n_dims, const int64_t *dims)
{
    const ddl_param_info *t = find(o, name);
    int64_t own[4];
    size_t count = 1;
    if (t && !dims) {
        for (int d = 0; d < t->n_dims; d++)
            own[d] = t->shape[d];
        n_dims = t->n_dims;
        dims = own;
    }
    for (int d = 0; d < n_dims; d++)
        count *= (size_t)dims[d];
    if (!t || t->count != count)
        fail(o, "no tensor of the expected size named ", name);
    else
        tensor(o, name, n_dims, dims, ddl_checkpoint_params(o->ck) + t->offset, NULL);
    return name;
}

/* node_begin: a node of op with output out and inputs in0..in2 (NULL: none); attributes
 * follow, then ddl__pb_end. */
static size_t node_begin(onnx *o, const char *op, const char *out, const char *in0, const char *in1,
                         const char *in2)
{
    size_t at = ddl__pb_begin(&o->pb, GRAPH_NODE);
    const char *in[3] = {in0, in1, in2};
    for (int i = 0; i < 3 && in[i]; i++)
        ddl__pb_string(&o->pb, NODE_INPUT, in[i]);
    ddl__pb_string(&o->pb, NODE_OUTPUT, out);
    ddl__pb_string(&o->pb, NODE_OP_TYPE, op);
    return at;
}

/* attr: an INT attribute (n < 0: v[0]), an INTS one (v[0..n)), or a FLOAT one (f not NULL). */
static void attr(onnx *o, const char *name, int n, const int64_t *v, const float *f)
{
    size_t at = ddl__pb_begin(&o->pb, NODE_ATTRIBUTE);
    ddl__pb_string(&o->pb, ATTR_NAME, name);
    if (f)
        ddl__pb_float(&o->pb, ATTR_F, *f);
    else if (n < 0)
        ddl__pb_varint(&o->pb, ATTR_I, (uint64_t)v[0]);
    for (int i = 0; i < n; i++)
        ddl__pb_varint(&o->pb, ATTR_INTS, (uint64_t)v[i]);
    ddl__pb_varint(&o->pb, ATTR_TYPE, f ? ATTR_FLOAT : n < 0 ? ATTR_INT : ATTR_INTS_TYPE);
    ddl__pb_end(&o->pb, at);
}

/* op: a node without attributes; returns its output. */
static const char *op(onnx *o, const char *type, const char *in0, const char *in1)
{
    const char *out = fresh(o, NULL, 0);
    ddl__pb_end(&o->pb, node_begin(o, type, out, in0, in1, NULL));
    return out;
}

/* value_info: a graph input or output `name` of float (N, d[0], ...), n_dims in all, N free. */
static void value_info(onnx *o, int field, const char *name, int n_dims, const int *d)
{
    ddl__pb *b = &o->pb;
    size_t at = ddl__pb_begin(b, field);
    ddl__pb_string(b, VALUE_NAME, name);
    size_t type = ddl__pb_begin(b, VALUE_TYPE), tensor_type = ddl__pb_begin(b, TYPE_TENSOR);
    ddl__pb_varint(b, TENSOR_ELEM_TYPE, TYPE_FLOAT);
    size_t shape = ddl__pb_begin(b, TENSOR_SHAPE);
    for (int i = 0; i < n_dims; i++) {
        size_t dim = ddl__pb_begin(b, SHAPE_DIM);
        if (i == 0)
            ddl__pb_string(b, DIM_PARAM, "N");
        else
            ddl__pb_varint(b, DIM_VALUE, (uint64_t)d[i - 1]);
        ddl__pb_end(b, dim);
    }
    ddl__pb_end(b, shape);
    ddl__pb_end(b, tensor_type);
    ddl__pb_end(b, type);
    ddl__pb_end(b, at);
}

/* ---- layers ---- */

static const int64_t one = 1;

/* geometry: the attributes of a conv, deconv or pool layer's geometry beyond kernel_shape and
 * strides (written by the caller): pads (always for a convolution, as before; for a pool when it
 * has some), and dilations, group, output_padding, ceil_mode and count_include_pad where they
 * are not ONNX's defaults (geometry.c's fields). */
static void geometry(onnx *o, const ddl__layer *l, int conv)
{
    int p4[4];
    ddl__layer_pads(l, p4);
    int64_t pads[4] = {p4[0], p4[1], p4[2], p4[3]}, dil[2] = {l->dil_h ? l->dil_h : 1, l->dil_w ? l->dil_w : 1};
    int64_t op[2] = {l->out_pad_h, l->out_pad_w}, groups = l->groups, flag = 1;
    if (conv || pads[0] || pads[1] || pads[2] || pads[3])
        attr(o, "pads", 4, pads, NULL);
    if (dil[0] != 1 || dil[1] != 1)
        attr(o, "dilations", 2, dil, NULL);
    if (l->op == DDL__OP_CONV && groups > 1)
        attr(o, "group", -1, &groups, NULL);
    if (op[0] || op[1])
        attr(o, "output_padding", 2, op, NULL);
    if (l->ceil_mode)
        attr(o, "ceil_mode", -1, &flag, NULL);
    if (l->count_pad)
        attr(o, "count_include_pad", -1, &flag, NULL);
}

/* conv_like: Conv or ConvTranspose of x with PREFIX.weight and PREFIX.bias (bias may be absent). */
static const char *conv_like(onnx *o, const char *type, const char *x, const char *prefix, const ddl__layer *l)
{
    char wn[NAME], bn[NAME];
    snprintf(wn, NAME, "%.38s.weight", prefix);
    snprintf(bn, NAME, "%.38s.bias", prefix);
    const char *w = param(o, fresh(o, wn, 0), 0, NULL), *b = find(o, bn) ? param(o, fresh(o, bn, 0), 0, NULL) : NULL;
    int64_t k[2] = {l->k, l->kw ? l->kw : l->k}, st[2] = {l->stride, l->stride_w ? l->stride_w : l->stride};
    const char *out = fresh(o, NULL, 0);
    size_t at = node_begin(o, type, out, x, w, b);
    attr(o, "kernel_shape", 2, k, NULL);
    attr(o, "strides", 2, st, NULL);
    geometry(o, l, 1);
    ddl__pb_end(&o->pb, at);
    return out;
}

static const char *pool(onnx *o, const char *type, const char *x, const ddl__layer *l)
{
    int64_t k[2] = {l->k, l->kw ? l->kw : l->k}, st[2] = {l->stride, l->stride_w ? l->stride_w : l->stride};
    const char *out = fresh(o, NULL, 0);
    size_t at = node_begin(o, type, out, x, NULL, NULL);
    attr(o, "kernel_shape", 2, k, NULL);
    attr(o, "strides", 2, st, NULL);
    geometry(o, l, 0);
    ddl__pb_end(&o->pb, at);
    return out;
}

/* flat: x as (N, features): Flatten when it is still (N, C, H, W). */
static const char *flat(onnx *o, const char *x, int *rank)
{
    if (*rank == 2)
        return x;
    const char *out = fresh(o, NULL, 0);
    size_t at = node_begin(o, "Flatten", out, x, NULL, NULL);
    attr(o, "axis", -1, &one, NULL);
    ddl__pb_end(&o->pb, at);
    *rank = 2;
    return out;
}

/* dense: Gemm x W^T + b with PyTorch's Linear weight PREFIX.weight (out, in), PREFIX.bias (out). */
static const char *dense(onnx *o, const char *x, const char *prefix, int bias)
{
    char wn[NAME], bn[NAME];
    snprintf(wn, NAME, "%.38s.weight", prefix);
    snprintf(bn, NAME, "%.38s.bias", prefix);
    const char *w = param(o, fresh(o, wn, 0), 0, NULL), *b = bias ? param(o, fresh(o, bn, 0), 0, NULL) : NULL;
    const char *out = fresh(o, NULL, 0);
    size_t at = node_begin(o, "Gemm", out, x, w, b);
    attr(o, "transB", -1, &one, NULL);
    ddl__pb_end(&o->pb, at);
    return out;
}

/* normalise: the graph input "pixels" as the trainer normalises: x * scale + shift, with one
 * scale and shift, or one per channel as (C, 1, 1) tensors. */
static const char *normalise(onnx *o)
{
    const ddl_checkpoint_info *in = ddl_checkpoint_get_info(o->ck);
    float scale = 1.0f / (255.0f * in->std), shift = -in->mean / in->std;
    if (!in->n_norm)
        return op(o, "Add", op(o, "Mul", "pixels", scalar(o, scale)), scalar(o, shift));
    float sc[DDL_MAX_NORM_CHANNELS], sh[DDL_MAX_NORM_CHANNELS];
    for (int c = 0; c < in->n_norm; c++)
        sc[c] = 1.0f / (255.0f * in->norm_std[c]), sh[c] = -in->norm_mean[c] / in->norm_std[c];
    int64_t dims[3] = {in->n_norm, 1, 1};
    const char *a = fresh(o, NULL, 0), *b = fresh(o, NULL, 0);
    tensor(o, a, 3, dims, sc, NULL);
    tensor(o, b, 3, dims, sh, NULL);
    return op(o, "Add", op(o, "Mul", "pixels", a), b);
}

/* group_norm: GroupNorm of x (N, c, h, w) in g groups with PREFIX.weight and PREFIX.bias, as
 * PyTorch exports it: reshape to (N, g, rest), InstanceNormalization, reshape back, scale, shift. */
static const char *group_norm(onnx *o, const char *x, const char *prefix, int g, int c, int h, int w)
{
    float ones[MAX_GROUPS], zeros[MAX_GROUPS], eps = GN_EPS;
    if (g == c) { /* a group per channel: InstanceNormalization itself, as nn.InstanceNorm2d(affine) */
        char wn[NAME], bn[NAME];
        int64_t cc = c;
        snprintf(wn, NAME, "%.38s.weight", prefix);
        snprintf(bn, NAME, "%.38s.bias", prefix);
        const char *gamma = param(o, fresh(o, wn, 0), 1, &cc), *beta = param(o, fresh(o, bn, 0), 1, &cc);
        const char *out = fresh(o, NULL, 0);
        size_t at = node_begin(o, "InstanceNormalization", out, x, gamma, beta);
        attr(o, "epsilon", 0, NULL, &eps);
        ddl__pb_end(&o->pb, at);
        return out;
    }
    if (g > MAX_GROUPS) {
        fail(o, "a GroupNorm of more groups than the exporter holds: ", prefix);
        return x;
    }
    for (int i = 0; i < g; i++)
        ones[i] = 1.0f, zeros[i] = 0.0f;
    int64_t to_groups[3] = {0, g, -1}, back[4] = {0, c, h, w}, n3 = 3, n4 = 4, ng = g, c11[3] = {c, 1, 1};
    const char *sg = fresh(o, NULL, 0), *sc = fresh(o, NULL, 0), *on = fresh(o, NULL, 0), *ze = fresh(o, NULL, 0);
    tensor(o, sg, 1, &n3, NULL, to_groups);
    tensor(o, sc, 1, &n4, NULL, back);
    tensor(o, on, 1, &ng, ones, NULL);
    tensor(o, ze, 1, &ng, zeros, NULL);
    const char *normed = fresh(o, NULL, 0);
    size_t at = node_begin(o, "InstanceNormalization", normed, op(o, "Reshape", x, sg), on, ze);
    attr(o, "epsilon", 0, NULL, &eps);
    ddl__pb_end(&o->pb, at);
    char name[NAME];
    snprintf(name, NAME, "%.38s.weight", prefix);
    const char *gamma = param(o, fresh(o, name, 0), 3, c11);
    snprintf(name, NAME, "%.38s.bias", prefix);
    const char *beta = param(o, fresh(o, name, 0), 3, c11);
    return op(o, "Add", op(o, "Mul", op(o, "Reshape", normed, sc), gamma), beta);
}

/* ---- activations, as PyTorch 1.13 exports them (the importer knows these layouts) ---- */

/* op_f: a node of one input and one FLOAT attribute (LeakyRelu, Elu); returns its output. */
static const char *op_f(onnx *o, const char *type, const char *x, const char *name, float v)
{
    const char *out = fresh(o, NULL, 0);
    size_t at = node_begin(o, type, out, x, NULL, NULL);
    attr(o, name, 0, NULL, &v);
    ddl__pb_end(&o->pb, at);
    return out;
}

static const char *hard_sigmoid(onnx *o, const char *x, float alpha, float beta)
{
    const char *out = fresh(o, NULL, 0);
    size_t at = node_begin(o, "HardSigmoid", out, x, NULL, NULL);
    attr(o, "alpha", 0, NULL, &alpha);
    attr(o, "beta", 0, NULL, &beta);
    ddl__pb_end(&o->pb, at);
    return out;
}

/* gelu: x (1 + erf(x / sqrt 2)) / 2 as Div, Erf, Add, Mul, Mul; the tanh approximation as
 * torch.onnx writes nn.GELU(approximate='tanh'). */
static const char *gelu(onnx *o, const char *x, int approx)
{
    if (!approx)
        return op(o, "Mul", op(o, "Mul", x, op(o, "Add", op(o, "Erf", op(o, "Div", x, scalar(o, 1.41421356f)), NULL),
                                               scalar(o, 1.0f))), scalar(o, 0.5f));
    const char *cube = op(o, "Mul", x, op(o, "Mul", x, x));
    const char *kc = op(o, "Mul", scalar(o, 0.044715f), cube);
    const char *inner = op(o, "Mul", scalar(o, 0.7978845608f), op(o, "Add", x, kc));
    const char *t = op(o, "Add", scalar(o, 1.0f), op(o, "Tanh", inner, NULL));
    return op(o, "Mul", scalar(o, 0.5f), op(o, "Mul", x, t));
}

static const char *act(onnx *o, const char *x, const ddl__layer *l)
{
    switch (l->act) {
    case DDL_ACT_LEAKY_RELU: return op_f(o, "LeakyRelu", x, "alpha", l->alpha);
    case DDL_ACT_SIGMOID: return op(o, "Sigmoid", x, NULL);
    case DDL_ACT_TANH: return op(o, "Tanh", x, NULL);
    case DDL_ACT_SILU: return op(o, "Mul", x, op(o, "Sigmoid", x, NULL));
    case DDL_ACT_GELU: return gelu(o, x, 0);
    case DDL_ACT_GELU_TANH: return gelu(o, x, 1);
    case DDL_ACT_HARDSWISH: return op(o, "Mul", x, hard_sigmoid(o, x, 1.0f / 6.0f, 0.5f)); /* HardSwish: opset 14 */
    case DDL_ACT_HARDSIGMOID: return hard_sigmoid(o, x, l->alpha, l->beta);
    case DDL_ACT_ELU: return op_f(o, "Elu", x, "alpha", l->alpha);
    case DDL_ACT_CLIP: { /* an infinite bound: the input left out ("") */
        const char *out = fresh(o, NULL, 0), *lo = isfinite(l->alpha) ? scalar(o, l->alpha) : "";
        const char *hi = isfinite(l->beta) ? scalar(o, l->beta) : NULL;
        ddl__pb_end(&o->pb, node_begin(o, "Clip", out, x, lo, hi));
        return out;
    }
    default: fail(o, "an activation the exporter does not know: ", ddl__graph_layer_op(l)); return x;
    }
}

/* softmax: Softmax or LogSoftmax over one axis of x (rank 4, or 2: (N, C)); over several, x
 * reshaped to (N, before, axes, after), the softmax over axis 2, and back. */
static const char *softmax(onnx *o, const char *x, const ddl__layer *l, int rank, int c, int h, int w)
{
    const char *type = l->act ? "LogSoftmax" : "Softmax", *out = fresh(o, NULL, 0);
    int64_t axis = rank == 2 && l->axis == 1 ? 1 : l->axis, two = 2;
    if (l->axis == l->axis_to && (rank == 4 || l->axis == 1)) {
        size_t at = node_begin(o, type, out, x, NULL, NULL);
        attr(o, "axis", -1, &axis, NULL);
        ddl__pb_end(&o->pb, at);
        return out;
    }
    const int64_t d[3] = {c, h, w};
    int64_t grouped[4] = {0, 1, 1, 1}, back[4] = {0, c, h, w}, n4 = 4, nb = rank;
    for (int k = 0; k < 3; k++)
        grouped[k + 1 < l->axis ? 1 : k + 1 <= l->axis_to ? 2 : 3] *= d[k];
    const char *sg = fresh(o, NULL, 0), *sb = fresh(o, NULL, 0);
    tensor(o, sg, 1, &n4, NULL, grouped);
    tensor(o, sb, 1, &nb, NULL, back);
    size_t at = node_begin(o, type, out, op(o, "Reshape", x, sg), NULL, NULL);
    attr(o, "axis", -1, &two, NULL);
    ddl__pb_end(&o->pb, at);
    return op(o, "Reshape", out, sb);
}

/* attr_str: a STRING attribute. */
static void attr_str(onnx *o, const char *name, const char *v)
{
    size_t at = ddl__pb_begin(&o->pb, NODE_ATTRIBUTE);
    ddl__pb_string(&o->pb, ATTR_NAME, name);
    ddl__pb_string(&o->pb, ATTR_S, v);
    ddl__pb_varint(&o->pb, ATTR_TYPE, ATTR_STRING);
    ddl__pb_end(&o->pb, at);
}

/* resize: Resize of x (N, c, ...) by the layer's scales, or to its fixed size (h, w) through
 * sizes (N, c, h, w) made as PyTorch makes them: Shape, Slice of (N, c), Concat with (h, w). */
static const char *resize(onnx *o, const char *x, const ddl__layer *l, int h, int w)
{
    static const char *const modes[] = {"nearest", "linear"};
    static const char *const coords[] = {"asymmetric", "half_pixel", "pytorch_half_pixel", "align_corners"};
    static const char *const rounds[] = {"floor", "ceil", "round_prefer_floor", "round_prefer_ceil"};
    const char *scales = "", *sizes = NULL, *out = fresh(o, NULL, 0);
    if (l->k) {
        int64_t zero = 0, two = 2, hw[2] = {h, w};
        const char *z = fresh(o, NULL, 0), *t = fresh(o, NULL, 0), *s = fresh(o, NULL, 0);
        tensor(o, z, 1, &one, NULL, &zero);
        tensor(o, t, 1, &one, NULL, &two);
        tensor(o, s, 1, &two, NULL, hw);
        const char *nc = fresh(o, NULL, 0);
        ddl__pb_end(&o->pb, node_begin(o, "Slice", nc, op(o, "Shape", x, NULL), z, t)); /* (N, c) */
        sizes = fresh(o, NULL, 0);
        size_t at = node_begin(o, "Concat", sizes, nc, s, NULL);
        attr(o, "axis", -1, &zero, NULL);
        ddl__pb_end(&o->pb, at);
    } else {
        const float sc[4] = {1.0f, 1.0f, l->scale_h, l->scale_w};
        int64_t four = 4;
        scales = fresh(o, NULL, 0);
        tensor(o, scales, 1, &four, sc, NULL);
    }
    size_t at = ddl__pb_begin(&o->pb, GRAPH_NODE);
    const char *in[4] = {x, "", scales, sizes};
    for (int i = 0; i < 4 && in[i]; i++)
        ddl__pb_string(&o->pb, NODE_INPUT, in[i]);
    ddl__pb_string(&o->pb, NODE_OUTPUT, out);
    ddl__pb_string(&o->pb, NODE_OP_TYPE, "Resize");
    attr_str(o, "mode", modes[l->mode % 2]);
    attr_str(o, "coordinate_transformation_mode", coords[l->coord % 4]);
    attr_str(o, "nearest_mode", rounds[l->nearest % 4]);
    ddl__pb_end(&o->pb, at);
    return out;
}

/* batch_norm: BatchNormalization of x with PREFIX.weight, .bias and the running statistics
 * (the checkpoint's buffers .running_mean and .running_var): what evaluation computes. ONNX's
 * momentum is 1 - PyTorch's (it weighs the running value). */
static const char *batch_norm(onnx *o, const char *x, const char *prefix, const ddl__layer *l)
{
    const char *in[5] = {x, NULL, NULL, NULL, NULL};
    static const char *const what[4] = {"weight", "bias", "running_mean", "running_var"};
    const ddl_checkpoint *ck = o->ck;
    for (int k = 0; k < 4; k++) {
        char name[NAME];
        snprintf(name, NAME, "%.38s.%s", prefix, what[k]);
        in[k + 1] = fresh(o, name, 0);
        if (k < 2) {
            param(o, in[k + 1], 0, NULL);
            continue;
        }
        const ddl_param_info *t = NULL;
        for (int i = 0; i < ddl_checkpoint_n_buffer_tensors(ck) && !t; i++)
            if (strcmp(ddl_checkpoint_buffer_tensor(ck, i)->name, name) == 0)
                t = ddl_checkpoint_buffer_tensor(ck, i);
        int64_t n = t ? (int64_t)t->count : 0;
        if (!t)
            fail(o, "no running statistics in the checkpoint named ", name);
        else
            tensor(o, in[k + 1], 1, &n, ddl_checkpoint_buffers(ck) + t->offset, NULL);
    }
    const char *out = fresh(o, NULL, 0);
    size_t at = ddl__pb_begin(&o->pb, GRAPH_NODE);
    for (int i = 0; i < 5; i++)
        ddl__pb_string(&o->pb, NODE_INPUT, in[i]);
    ddl__pb_string(&o->pb, NODE_OUTPUT, out);
    ddl__pb_string(&o->pb, NODE_OP_TYPE, "BatchNormalization");
    float eps = l->eps, momentum = 1.0f - l->momentum;
    attr(o, "epsilon", 0, NULL, &eps);
    attr(o, "momentum", 0, NULL, &momentum);
    ddl__pb_end(&o->pb, at);
    return out;
}

/* affine: x * scale + shift per channel (the graph's constants): Mul and Add of (C, 1, 1), or of
 * (C) on a flat (N, C). */
static const char *affine(onnx *o, const char *x, const ddl_graph *g, const ddl__layer *l, int rank)
{
    int64_t dims[3] = {l->out, 1, 1};
    const char *s = fresh(o, NULL, 0), *t = fresh(o, NULL, 0);
    tensor(o, s, rank == 2 ? 1 : 3, dims, g->consts + l->k, NULL);
    tensor(o, t, rank == 2 ? 1 : 3, dims, g->consts + l->k + l->out, NULL);
    return op(o, "Add", op(o, "Mul", x, s), t);
}

/* reshape: x as `shape` (n values; 0: that dim as it is) */
static const char *reshape(onnx *o, const char *x, int n, const int64_t *shape)
{
    int64_t dims = n;
    const char *s = fresh(o, NULL, 0);
    tensor(o, s, 1, &dims, NULL, shape);
    return op(o, "Reshape", x, s);
}

/* unflat: x, a flat (N, K), as (N, K, 1, 1): a gate of one value a channel beside 4-D planes */
static const char *unflat(onnx *o, const char *x, int k)
{
    const int64_t shape[4] = {0, k, 1, 1}; /* 0: N as it is */
    return reshape(o, x, 4, shape);
}

/* shuffle: ShuffleNet's channel shuffle as PyTorch exports it: (N, G, C / G, H, W), the two
 * middle axes swapped, (N, C, H, W) again */
static const char *shuffle(onnx *o, const char *x, int groups, int c, int h, int w)
{
    const int64_t five[5] = {0, groups, c / groups, h, w}, four[4] = {0, c, h, w}, perm[5] = {0, 2, 1, 3, 4};
    const char *y = fresh(o, NULL, 0);
    size_t at = node_begin(o, "Transpose", y, reshape(o, x, 5, five), NULL, NULL);
    attr(o, "perm", 5, perm, NULL);
    ddl__pb_end(&o->pb, at);
    return reshape(o, y, 4, four);
}

/* slice: channels start .. start + count - 1 of x (Slice on axis 1) */
static const char *slice(onnx *o, const char *x, int start, int count)
{
    const int64_t one_dim = 1, v[3] = {start, (int64_t)start + count, 1};
    const char *t[3], *y = fresh(o, NULL, 0);
    for (int k = 0; k < 3; k++) {
        t[k] = fresh(o, NULL, 0);
        tensor(o, t[k], 1, &one_dim, NULL, &v[k]);
    }
    size_t at = node_begin(o, "Slice", y, x, t[0], t[1]);
    ddl__pb_string(&o->pb, NODE_INPUT, t[2]); /* the axes: a repeated field may go on after the others */
    ddl__pb_end(&o->pb, at);
    return y;
}

/* ---- the graph ---- */

/* layer: the ONNX nodes of graph layer i; val[] and rank[] hold every earlier layer's output. */
static void layer(onnx *o, const ddl_model *m, int i, const char **val, int *rank)
{
    const ddl_graph *g;
    int c, h, w, groups;
    ddl__graph_shape(m, i, &g, &c, &h, &w, &groups);
    const ddl__layer *l = &g->layers[i];
    const char *a = val[l->in[0]], *b = l->in[1] >= 0 ? val[l->in[1]] : NULL;
    int ra = rank[l->in[0]], rb = l->in[1] >= 0 ? rank[l->in[1]] : 0;
    char prefix[DDL_GRAPH_NAME_BYTES];
    ddl__graph_param_prefix(g, i, prefix, sizeof prefix);
    rank[i] = ra;
    switch (l->op) {
    case DDL__OP_CONV: val[i] = conv_like(o, "Conv", a, prefix, l); break;
    case DDL__OP_DECONV: val[i] = conv_like(o, "ConvTranspose", a, prefix, l); break;
    case DDL__OP_MAXPOOL: val[i] = pool(o, "MaxPool", a, l); break;
    case DDL__OP_AVGPOOL: val[i] = pool(o, "AveragePool", a, l); break;
    case DDL__OP_GAP: /* of a flat (N, K): 4-D first (SENet's y.view(b, c, 1, 1) imports as it) */
        val[i] = op(o, "GlobalAveragePool", ra == 2 ? unflat(o, a, c) : a, NULL), rank[i] = 4;
        break;
    case DDL__OP_DENSE: val[i] = dense(o, flat(o, a, &ra), prefix, l->bias), rank[i] = 2; break;
    case DDL__OP_RELU: val[i] = op(o, "Relu", a, NULL); break;
    case DDL__OP_DROPOUT: val[i] = a; break; /* inference: the identity */
    case DDL__OP_GROUPNORM: val[i] = group_norm(o, a, prefix, groups, c, h, w); break;
    case DDL__OP_FLATTEN: val[i] = flat(o, a, &ra), rank[i] = 2; break;
    case DDL__OP_BATCHNORM: val[i] = batch_norm(o, a, prefix, l); break;
    case DDL__OP_CONCAT:
    case DDL__OP_ADD:
        if (ra != rb) /* (C, 1, 1) beside (C): both flat */
            a = flat(o, a, &ra), b = flat(o, b, &rb);
        rank[i] = ra;
        if (l->op == DDL__OP_ADD) {
            val[i] = op(o, "Add", a, b);
        } else {
            val[i] = fresh(o, NULL, 0);
            size_t at = node_begin(o, "Concat", val[i], a, b, NULL);
            attr(o, "axis", -1, &one, NULL);
            ddl__pb_end(&o->pb, at);
        }
        break;
    case DDL__OP_MUL: /* ONNX broadcasts (N, C, 1, 1) over (N, C, H, W) as ddl does; a flat (N, C) goes 4-D first */
        if (ra != rb) {
            int k, kh, kw, kg;
            const ddl_graph *kgr;
            ddl__graph_shape(m, ra == 2 ? l->in[0] : l->in[1], &kgr, &k, &kh, &kw, &kg);
            if (ra == 2)
                a = unflat(o, a, k);
            else
                b = unflat(o, b, k);
            rank[i] = 4;
        }
        val[i] = op(o, "Mul", a, b);
        break;
    case DDL__OP_SHUFFLE: val[i] = shuffle(o, a, l->groups, c, h, w); break;
    case DDL__OP_SLICE: val[i] = slice(o, a, l->k, l->out); break;
    case DDL__OP_ACT: val[i] = act(o, a, l); break;
    case DDL__OP_SOFTMAX: val[i] = softmax(o, a, l, ra, c, h, w); break;
    case DDL__OP_RESIZE: val[i] = resize(o, a, l, h, w); break;
    case DDL__OP_AFFINE: val[i] = affine(o, a, g, l, ra); break;
    default: fail(o, "a layer the exporter does not know: ", prefix); val[i] = a; break;
    }
}

/* walk: the whole graph; returns the output value, flat (N, K) for a classifier. */
static const char *walk(onnx *o, const ddl_model *m, int *out_rank)
{
    const ddl_graph *g;
    int c, h, w, groups;
    ddl__graph_shape(m, 0, &g, &c, &h, &w, &groups);
    const char *val[DDL_GRAPH_MAX_LAYERS];
    int rank[DDL_GRAPH_MAX_LAYERS];
    val[0] = normalise(o);
    rank[0] = 4;
    for (int i = 1; i < g->n; i++)
        layer(o, m, i, val, rank);
    int x = ddl_graph_output_layer(g);
    ddl__graph_shape(m, x, &g, &c, &h, &w, &groups);
    *out_rank = rank[x];
    return h == 1 && w == 1 ? flat(o, val[x], out_rank) : val[x];
}

/* ---- the model ---- */

/* class_names: the checkpoint's class names as the metadata entry "ddl.class_names", a JSON array
 * of strings (escaped: the names come from folder names, which may hold anything). */
static void class_names(onnx *o, int k, const ddl_allocator *alloc)
{
    const char *const *names = ddl_checkpoint_class_names(o->ck);
    size_t need = 3;
    for (int i = 0; names && i < k; i++)
        need += 6 * strlen(names[i]) + 3;
    char *s = names ? (char *)ddl__alloc(alloc, need) : NULL;
    if (!s)
        return; /* no names, or no memory for them: the model without them */
    size_t at = 0;
    s[at++] = '[';
    for (int i = 0; i < k; i++) {
        at += (size_t)snprintf(s + at, need - at, "%s\"", i ? "," : "");
        for (const unsigned char *c = (const unsigned char *)names[i]; *c; c++)
            at += (size_t)(*c == '"' || *c == '\\' ? snprintf(s + at, need - at, "\\%c", *c)
                           : *c < 0x20          ? snprintf(s + at, need - at, "\\u%04x", *c)
                                                : snprintf(s + at, need - at, "%c", *c));
        s[at++] = '"';
    }
    s[at++] = ']';
    s[at] = '\0';
    size_t e = ddl__pb_begin(&o->pb, MODEL_METADATA);
    ddl__pb_string(&o->pb, ENTRY_KEY, "ddl.class_names");
    ddl__pb_string(&o->pb, ENTRY_VALUE, s);
    ddl__pb_end(&o->pb, e);
    ddl__free(alloc, s);
}

/* graph_of: the layer graph of the checkpoint: the one it carries, or, for lenet and unet
 * checkpoints written before checkpoints carried one, the preset that builds them. */
static int graph_of(const ddl_checkpoint *ck, ddl_graph *g, const char *path, char *err, size_t err_bytes)
{
    const ddl_checkpoint_info *in = ddl_checkpoint_get_info(ck);
    char why[DDL_ERR_BYTES], preset[32] = "";
    if (ddl_checkpoint_arch(ck)) {
        if (ddl_graph_parse(g, ddl_checkpoint_arch(ck), why, sizeof why) != DDL_OK)
            return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: its layer graph does not read: %s", path, why);
        return DDL_OK;
    }
    if (strcmp(in->model, "lenet") == 0)
        snprintf(preset, sizeof preset, "lenet");
    else if (strcmp(in->model, "unet") == 0) {
        const ddl_unet_config *u = (const ddl_unet_config *)ddl_checkpoint_plugin_config(ck);
        snprintf(preset, sizeof preset, "unet:%d:%d", u && u->depth > 0 ? u->depth : 3,
                 u && u->width > 0 ? u->width : 8);
    }
    if (!preset[0] || ddl_graph_preset(g, preset, why, sizeof why) != DDL_OK)
        return ddl__errf(err, err_bytes, DDL_ENOTSUP, "%s: a checkpoint of model \"%.47s\" that carries no layer "
                         "graph: ONNX export needs one (a graph model, or a plugin with describe()); nothing exported",
                         path, in->model);
    return DDL_OK;
}

/* build: the graph model of the checkpoint (batch 1), checked against its tensors, so every
 * tensor the walk reads is there. */
static int build(const ddl_checkpoint *ck, ddl_graph *g, ddl_model **m, const char *path, char *err,
                 size_t err_bytes)
{
    int rc = graph_of(ck, g, path, err, err_bytes);
    if (rc != DDL_OK)
        return rc;
    ddl_model_config mc = ddl_checkpoint_get_info(ck)->model_cfg;
    mc.batch = 1;
    mc.plugin_config = g;
    char why[DDL_ERR_BYTES];
    rc = ddl_model_create(ddl_model_graph(), &mc, NULL, m, why, sizeof why);
    if (rc == DDL_OK && (rc = ddl_checkpoint_check_model(ck, *m, why, sizeof why)) != DDL_OK) {
        ddl_model_destroy(*m); /* the checkpoint's tensors are not this graph's: nobody else frees it */
        *m = NULL;
    }
    return rc == DDL_OK ? DDL_OK : ddl__errf(err, err_bytes, rc, "%s: %s; nothing exported", path, why);
}

int ddl_export_onnx(const ddl_checkpoint *ck, const char *path, const ddl_allocator *alloc, char *err,
                    size_t err_bytes)
{
    if (!ck || !path)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_export_onnx: no checkpoint or no path given");
    const ddl_checkpoint_info *in = ddl_checkpoint_get_info(ck);
    const ddl_model_config *mc = &in->model_cfg;
    onnx *o = (onnx *)ddl__alloc(alloc, sizeof *o);
    ddl_graph *g = NULL;
    ddl_model *m = NULL;
    if (!o || ddl_graph_create(alloc, &g) != DDL_OK) {
        ddl__free(alloc, o);
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: out of memory building the ONNX model", path);
    }
    int built = build(ck, g, &m, path, err, err_bytes);
    if (built != DDL_OK) {
        ddl_graph_destroy(g, alloc);
        ddl__free(alloc, o);
        return built;
    }
    memset(o, 0, sizeof *o);
    o->pb.alloc = alloc;
    o->ck = ck;
    ddl__pb *b = &o->pb;
    ddl__pb_varint(b, MODEL_IR_VERSION, IR_VERSION);
    ddl__pb_string(b, MODEL_PRODUCER, "ddl");
    ddl__pb_string(b, MODEL_PRODUCER_VERSION, ddl_version_string());
    size_t graph = ddl__pb_begin(b, MODEL_GRAPH);
    ddl__pb_string(b, GRAPH_NAME, in->model);
    int out_rank, oc, oh, ow;
    const char *logits = walk(o, m, &out_rank);
    ddl__pb_end(b, node_begin(o, "Identity", "logits", logits, NULL, NULL));
    ddl_model_output_shape(m, &oc, &oh, &ow);
    int in_dims[3] = {mc->in_c, mc->in_h, mc->in_w}, out_dims[3] = {oc, oh, ow};
    value_info(o, GRAPH_INPUT, "pixels", 4, in_dims);
    value_info(o, GRAPH_OUTPUT, "logits", out_rank, out_dims);
    ddl__pb_end(b, graph);
    size_t opset = ddl__pb_begin(b, MODEL_OPSET);
    ddl__pb_varint(b, OPSET_VERSION, OPSET);
    ddl__pb_end(b, opset);
    class_names(o, oc, alloc);
    int rc;
    if (o->bad)
        rc = ddl__errf(err, err_bytes, DDL_EINVAL, "%s: %s; nothing exported", path, o->err);
    else if (!ddl__pb_ok(b))
        rc = ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: out of memory building the ONNX model", path);
    else
        rc = ddl__export_write(path, b->buf, b->len, err, err_bytes);
    ddl__pb_free(b);
    ddl__free(alloc, o);
    ddl_model_destroy(m);
    ddl_graph_destroy(g, alloc);
    return rc;
}
