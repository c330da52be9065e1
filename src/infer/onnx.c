/* onnx.c - ddl_export_onnx: a lenet or unet checkpoint as an ONNX model (IR version 7, opset 13)
 * that any ONNX runtime runs. The graph takes raw pixels 0..255 as float and normalises them as
 * the trainer does (x * 1 / (255 std) + -mean / std), then runs the network as models/lenet.c and
 * models/unet.c do, layer for layer; weights are initializers under PyTorch's names. Model
 * plugins are opaque, so this file describes the two built-in networks a second time: a change
 * to either must be made here too (tests/test_onnx.sh compares an ONNX runtime's logits with
 * ddl's and fails when they part). Encoded with pb.c; the field numbers are onnx.proto's. */
#include "impl.h"

#include <stdio.h>
#include <string.h>

/* onnx.proto field numbers and enum values used below */
enum { MODEL_IR_VERSION = 1, MODEL_PRODUCER = 2, MODEL_PRODUCER_VERSION = 3, MODEL_GRAPH = 7, MODEL_OPSET = 8,
       OPSET_VERSION = 2 };
enum { GRAPH_NODE = 1, GRAPH_NAME = 2, GRAPH_INITIALIZER = 5, GRAPH_INPUT = 11, GRAPH_OUTPUT = 12 };
enum { NODE_INPUT = 1, NODE_OUTPUT = 2, NODE_OP_TYPE = 4, NODE_ATTRIBUTE = 5 };
enum { ATTR_NAME = 1, ATTR_F = 2, ATTR_I = 3, ATTR_INTS = 8, ATTR_TYPE = 20, ATTR_FLOAT = 1, ATTR_INT = 2,
       ATTR_INTS_TYPE = 7 };
enum { TENSOR_DIMS = 1, TENSOR_DATA_TYPE = 2, TENSOR_NAME = 8, TENSOR_RAW = 9, TYPE_FLOAT = 1, TYPE_INT64 = 7 };
enum { VALUE_NAME = 1, VALUE_TYPE = 2, TYPE_TENSOR = 1, TENSOR_ELEM_TYPE = 1, TENSOR_SHAPE = 2, SHAPE_DIM = 1,
       DIM_VALUE = 1, DIM_PARAM = 2 };

#define IR_VERSION 7
#define OPSET 13
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
            ddl__export_le32(p + 4 * k, f[k]);
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

static const int64_t two[2] = {2, 2}, one = 1;

/* conv: Conv of x with weight `w` (out, in, k, k), bias `bias` (NULL: none), stride 1, pad. */
static const char *conv(onnx *o, const char *x, const char *w, const char *bias, int pad)
{
    const ddl_param_info *t = find(o, w);
    int64_t k[2] = {t ? t->shape[2] : 1, t ? t->shape[3] : 1}, pads[4] = {pad, pad, pad, pad};
    param(o, w, 0, NULL);
    if (bias)
        param(o, bias, 0, NULL);
    const char *out = fresh(o, NULL, 0);
    size_t at = node_begin(o, "Conv", out, x, w, bias);
    attr(o, "kernel_shape", 2, k, NULL);
    attr(o, "pads", 4, pads, NULL);
    ddl__pb_end(&o->pb, at);
    return out;
}

/* by_two: a node of kernel 2x2 and stride 2 (MaxPool; ConvTranspose with weight w, bias b). */
static const char *by_two(onnx *o, const char *type, const char *x, const char *w, const char *b)
{
    const char *out = fresh(o, NULL, 0);
    size_t at = node_begin(o, type, out, x, w, b);
    attr(o, "kernel_shape", 2, two, NULL);
    attr(o, "strides", 2, two, NULL);
    ddl__pb_end(&o->pb, at);
    return out;
}

static const char *pool(onnx *o, const char *x) { return by_two(o, "MaxPool", x, NULL, NULL); }

/* dense: Gemm x W^T + b with PyTorch's Linear weight LAYER.weight (out, in), LAYER.bias (out). */
static const char *dense(onnx *o, const char *x, int layer)
{
    const char *w = param(o, fresh(o, "fc%d.weight", layer), 0, NULL);
    const char *b = param(o, fresh(o, "fc%d.bias", layer), 0, NULL);
    const char *out = fresh(o, NULL, 0);
    size_t at = node_begin(o, "Gemm", out, x, w, b);
    attr(o, "transB", -1, &one, NULL);
    ddl__pb_end(&o->pb, at);
    return out;
}

/* normalise: the graph input "pixels" as the trainer normalises: x * scale + shift. */
static const char *normalise(onnx *o)
{
    const ddl_checkpoint_info *in = ddl_checkpoint_get_info(o->ck);
    float scale = 1.0f / (255.0f * in->std), shift = -in->mean / in->std;
    return op(o, "Add", op(o, "Mul", "pixels", scalar(o, scale)), scalar(o, shift));
}

/* ---- lenet (models/lenet.c) ---- */

static const char *lenet_graph(onnx *o)
{
    const char *x = normalise(o);
    x = op(o, "Relu", pool(o, conv(o, x, "conv1.weight", "conv1.bias", 2)), NULL);
    x = op(o, "Relu", pool(o, conv(o, x, "conv2.weight", "conv2.bias", 0)), NULL);
    const char *flat = fresh(o, NULL, 0);
    size_t at = node_begin(o, "Flatten", flat, x, NULL, NULL);
    attr(o, "axis", -1, &one, NULL);
    ddl__pb_end(&o->pb, at);
    x = op(o, "Relu", dense(o, flat, 1), NULL);
    x = op(o, "Relu", dense(o, x, 2), NULL);
    return dense(o, x, 3);
}

/* ---- unet (models/unet.c) ---- */

/* groups_for: GroupNorm's group count for c channels, as models/unet.c chooses it. */
static int groups_for(int c)
{
    int g = c < 8 ? c : 8;
    while (c % g)
        g--;
    return g;
}

/* group_norm: GroupNorm of x (N, c, h, w) with PREFIX.weight and PREFIX.bias, as PyTorch exports
 * it: reshape to (N, groups, rest), InstanceNormalization, reshape back, scale and shift. */
static const char *group_norm(onnx *o, const char *x, const char *prefix, int c, int h, int w)
{
    int g = groups_for(c);
    float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1}, zeros[8] = {0}, eps = GN_EPS;
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
    snprintf(name, NAME, "%.20s.weight", prefix);
    const char *gamma = param(o, fresh(o, name, 0), 3, c11);
    snprintf(name, NAME, "%.20s.bias", prefix);
    const char *beta = param(o, fresh(o, name, 0), 3, c11);
    return op(o, "Add", op(o, "Mul", op(o, "Reshape", normed, sc), gamma), beta);
}

/* block: conv 3x3 (no bias) -> GroupNorm -> ReLU, twice, as unet.c's block; prefix "down%d",
 * "bottom" or "up%d" with level l. */
static const char *block(onnx *o, const char *x, const char *prefix, int l, int c, int h, int w)
{
    char p[16], name[NAME];
    snprintf(p, sizeof p, prefix, l);
    for (int k = 1; k <= 2; k++) {
        snprintf(name, NAME, "%s.conv%d.weight", p, k);
        const char *y = conv(o, x, fresh(o, name, 0), NULL, 1);
        snprintf(name, NAME, "%s.norm%d", p, k);
        x = op(o, "Relu", group_norm(o, y, name, c, h, w), NULL);
    }
    return x;
}

/* up: transposed conv 2x2 stride 2 of x, up%d.up.weight (2c, c, 2, 2) and .bias (c). */
static const char *up(onnx *o, const char *x, int l)
{
    const char *w = param(o, fresh(o, "up%d.up.weight", l), 0, NULL);
    return by_two(o, "ConvTranspose", x, w, param(o, fresh(o, "up%d.up.bias", l), 0, NULL));
}

/* unet_graph: depth and width from the tensors (down0.conv1.weight (width, in_c, 3, 3), ...). */
static const char *unet_graph(onnx *o)
{
    const ddl_checkpoint_info *in = ddl_checkpoint_get_info(o->ck);
    const ddl_param_info *first = find(o, "down0.conv1.weight");
    int depth = 0, width = first ? first->shape[0] : 0, h = in->model_cfg.in_h, w = in->model_cfg.in_w;
    char name[NAME];
    const char *skip[16], *x = normalise(o);
    do
        snprintf(name, NAME, "down%d.conv1.weight", depth);
    while (find(o, name) && ++depth < 16);
    if (!width || depth < 1 || depth >= 16) {
        fail(o, "not a U-Net of levels down0, down1, ...", "");
        return x;
    }
    for (int l = 0; l < depth; l++, h /= 2, w /= 2)
        x = pool(o, skip[l] = block(o, x, "down%d", l, width << l, h, w));
    x = block(o, x, "bottom", 0, width << depth, h, w);
    for (int l = depth - 1; l >= 0; l--) {
        h *= 2, w *= 2;
        const char *cat = fresh(o, NULL, 0);
        size_t at = node_begin(o, "Concat", cat, skip[l], up(o, x, l), NULL);
        attr(o, "axis", -1, &one, NULL);
        ddl__pb_end(&o->pb, at);
        x = block(o, cat, "up%d", l, width << l, h, w);
    }
    return conv(o, x, "head.weight", "head.bias", 0);
}

/* ---- the model ---- */

/* check: the checkpoint's tensors are those of the model it names (ddl_checkpoint_check_model
 * on a model built for its configuration), so every tensor the graph reads is there. */
static int check(const ddl_checkpoint *ck, const char *path, char *err, size_t err_bytes)
{
    const ddl_checkpoint_info *in = ddl_checkpoint_get_info(ck);
    const ddl_model_plugin *p = ddl_model_find(in->model);
    if (!p || (strcmp(in->model, "lenet") != 0 && strcmp(in->model, "unet") != 0))
        return ddl__errf(err, err_bytes, DDL_ENOTSUP, "%s: a checkpoint of model \"%.47s\": ONNX export knows lenet "
                         "and unet only; nothing exported", path, in->model);
    ddl_model_config mc = in->model_cfg;
    mc.batch = 1;
    ddl_model *m = NULL;
    char why[DDL_ERR_BYTES];
    int rc = ddl_model_create(p, &mc, NULL, &m, why, sizeof why);
    if (rc == DDL_OK)
        rc = ddl_checkpoint_check_model(ck, m, why, sizeof why);
    ddl_model_destroy(m);
    return rc == DDL_OK ? DDL_OK : ddl__errf(err, err_bytes, rc, "%s: %s; nothing exported", path, why);
}

int ddl_export_onnx(const ddl_checkpoint *ck, const char *path, const ddl_allocator *alloc, char *err,
                    size_t err_bytes)
{
    if (!ck || !path)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_export_onnx: no checkpoint or no path given");
    int checked = check(ck, path, err, err_bytes);
    if (checked != DDL_OK)
        return checked;
    const ddl_checkpoint_info *in = ddl_checkpoint_get_info(ck);
    const ddl_model_config *mc = &in->model_cfg;
    onnx *o = (onnx *)ddl__alloc(alloc, sizeof *o);
    if (!o)
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: out of memory building the ONNX model", path);
    memset(o, 0, sizeof *o);
    o->pb.alloc = alloc;
    o->ck = ck;
    ddl__pb *b = &o->pb;
    int lenet = strcmp(in->model, "lenet") == 0;
    ddl__pb_varint(b, MODEL_IR_VERSION, IR_VERSION);
    ddl__pb_string(b, MODEL_PRODUCER, "ddl");
    ddl__pb_string(b, MODEL_PRODUCER_VERSION, ddl_version_string());
    size_t graph = ddl__pb_begin(b, MODEL_GRAPH);
    ddl__pb_string(b, GRAPH_NAME, in->model);
    const char *logits = lenet ? lenet_graph(o) : unet_graph(o);
    ddl__pb_end(b, node_begin(o, "Identity", "logits", logits, NULL, NULL));
    int in_dims[3] = {mc->in_c, mc->in_h, mc->in_w}, out_dims[3] = {mc->n_classes, mc->in_h, mc->in_w};
    value_info(o, GRAPH_INPUT, "pixels", 4, in_dims);
    value_info(o, GRAPH_OUTPUT, "logits", lenet ? 2 : 4, out_dims);
    ddl__pb_end(b, graph);
    size_t opset = ddl__pb_begin(b, MODEL_OPSET);
    ddl__pb_varint(b, OPSET_VERSION, OPSET);
    ddl__pb_end(b, opset);
    int rc;
    if (o->bad)
        rc = ddl__errf(err, err_bytes, DDL_EINVAL, "%s: %s; nothing exported", path, o->err);
    else if (!ddl__pb_ok(b))
        rc = ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: out of memory building the ONNX model", path);
    else
        rc = ddl__export_write(path, b->buf, b->len, err, err_bytes);
    ddl__pb_free(b);
    ddl__free(alloc, o);
    return rc;
}
