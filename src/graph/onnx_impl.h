/* onnx_impl.h - what the ONNX importer's files share: the protobuf reader (src/formats/pb.h), the
 * importer (onnx_import.c) and the files of operator families it hands nodes to: geometry
 * (onnx_import_geometry.c), activations (onnx_import_act.c), shape arithmetic and reshapes
 * (onnx_import_shape.c), resizing (onnx_import_resize.c), normalisation patterns
 * (onnx_import_norm.c), BatchNormalization (onnx_import_bn.c) and constants per channel
 * (onnx_affine.c); the table of attributes each op has (onnx_attrs.c). Private to src/graph. */
#ifndef DDL_GRAPH_ONNX_IMPL_H
#define DDL_GRAPH_ONNX_IMPL_H
#include "impl.h"
#include "formats/pb.h" /* the protobuf reader */

/* ---- the importer's tables (onnx_import.c owns them; the family files read and add to them) ---- */

#define NAME 160               /* bytes of a value's name */
#define MAX_TENSORS 4096
#define MAX_VALUES 8192
#define MAX_IO 8               /* outputs of a node */
#define MAX_IN 64              /* inputs of a node: DenseNet-201's widest Concat takes 49 */
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
    int padded;                /* the layer's output through a Pad of zeros not yet folded (conv()) */
    int pad[4];                /* its pads: top, left, bottom, right */
    int stage;                 /* layer 0: the input after this many constants folded into it */
    int tview;                 /* a Transpose (1, 0) of this 2-D constant (else -1): a MatMul's or
                                * Gemm's weight alone reads it (torch's Linear without a bias) */
} value;

typedef struct param_src {
    int w, b;                  /* tensors of the weight and the bias (-1: zeros) */
    int transpose;             /* the weight is (in, out): Gemm without transB, MatMul */
    int mean, var;             /* BatchNormalization: its running statistics' tensors */
} param_src;

/* A value that exists only inside a pattern ddl recognises (GroupNorm's (N, G, -1) reshape),
 * or one whose reader would see something else than the file says (folded into a layer). */
typedef struct ddl__onnx_pend {
    char name[NAME];
    int kind;                  /* DDL__PEND_* */
    int layer, groups;         /* the layer it is made from; its groups */
    int s, b;                  /* InstanceNormalization's scale and bias tensors */
} ddl__onnx_pend;
enum { DDL__PEND_GROUPED = 1, DDL__PEND_NORMED, DDL__PEND_FOLDED, DDL__PEND_SPLIT5, DDL__PEND_SWAPPED };
#define DDL__ONNX_MAX_PEND 64

/* Where a groupnorm layer's weight and bias come from: weight[c] = s[c / cg] * mul[c], bias[c] =
 * b[c / cg] * mul[c] + add[c] (cg: channels per group of s and b; a tensor -1: 1 or 0). */
typedef struct ddl__onnx_norm {
    int s, b, mul, add;
    int c, per;                /* the layer's channels; how many each value of s and b covers */
    int stage;                 /* 0: done; 1: a Mul may follow (then 2: an Add may) */
    char tail[NAME];           /* the value a following Mul or Add must read */
} ddl__onnx_norm;

/* ---- constants applied per channel (onnx_affine.c) ---- */

#define DDL__ONNX_MAX_CHANNELS 128 /* of a constant applied per channel */

/* an affine map per channel: x[c] -> x[c] * scale[c] + shift[c] */
typedef struct ddl__onnx_chan_map {
    int c;
    float scale[DDL__ONNX_MAX_CHANNELS], shift[DDL__ONNX_MAX_CHANNELS];
} ddl__onnx_chan_map;

#define DDL__ONNX_FOLD_BYTES (1 << 20) /* constants computed at import: shapes, scales */
#define DDL__ONNX_BATCH INT64_MIN      /* the batch size in a folded shape: left free */

typedef struct imp {
    tensor t[MAX_TENSORS];
    value v[MAX_VALUES];
    param_src ps[DDL_GRAPH_MAX_LAYERS]; /* by layer */
    int n_t, n_v;
    int input_touched;         /* a layer already reads the input: no more normalisation */
    int stage;                 /* constants folded into the input so far */
    int in_affine;             /* the affine layer that does the input's normalisation where ddl's
                                * cannot (a negative scale, over DDL_MAX_NORM_CHANNELS channels); 0: none */
    int in_n;                  /* the input's batch (0: not fixed) */
    int output_softmax;        /* 1 Softmax, 2 LogSoftmax over the channels, dropped at the output */
    ddl__onnx_chan_map in_norm; /* pixels p -> p * scale + shift per channel before the first layer */
    ddl_graph *g;              /* the graph being built */
    char input[NAME], output[NAME];
    char err[DDL_ERR_BYTES];
    ddl__pb_slice graph;       /* the GraphProto: patterns look ahead at the nodes after one */
    int opset;
    /* onnx_import_shape.c and onnx_import_norm.c: constants folded at import, values that
     * exist only inside a pattern, where each groupnorm layer's weight and bias come from */
    int n_pend;
    size_t n_fold;
    ddl__onnx_pend pend[DDL__ONNX_MAX_PEND];
    ddl__onnx_norm norm[DDL_GRAPH_MAX_LAYERS]; /* by layer */
    unsigned char fold[DDL__ONNX_FOLD_BYTES];
} imp;

typedef struct attr {
    int found, n;              /* n < 0: more than 8 ints, or not protobuf */
    int64_t ints[8];
    float f;
    char str[16];              /* a string's first 15 bytes (auto_pad) */
    ddl__pb_slice t;
} attr;

/* ---- geometry (onnx_import_geometry.c) ----
 * What a Conv, ConvTranspose, MaxPool or AveragePool node's attributes say, as onnx_import.c
 * read them, turned into the graph's geometry: auto_pad resolved against the input's size,
 * ConvTranspose's output_shape into pads and output padding, every value checked. */
typedef struct ddl__onnx_intlist {
    int found, n;              /* n < 0: not a list of at most 8 ints */
    int64_t v[8];
} ddl__onnx_intlist;
typedef struct ddl__onnx_geo {
    ddl__onnx_intlist kernel_shape, strides, pads, dilations, output_padding, output_shape;
    ddl__onnx_intlist group, ceil_mode, count_include_pad, storage_order;
    int has_auto_pad;
    char auto_pad[16];
} ddl__onnx_geo;
enum { DDL__ONNX_CONV, DDL__ONNX_CONV_T, DDL__ONNX_MAXPOOL, DDL__ONNX_AVGPOOL };
/* ddl__onnx_conv_geometry: the geometry of a Conv (kind DDL__ONNX_CONV) or ConvTranspose whose
 * input is (c, h, w) and weight (d0, d1, k_h, k_w) into *g (out_c too); ddl__onnx_pool_geometry:
 * a pool's. DDL_OK, or DDL_EINVAL with "ATTRIBUTE VALUE: why" in why. */
int ddl__onnx_conv_geometry(int kind, const ddl__onnx_geo *a, int c, int h, int w, const int64_t wdims[4],
                            ddl_conv_geometry *g, char *why, size_t why_bytes);
int ddl__onnx_pool_geometry(int kind, const ddl__onnx_geo *a, int h, int w, ddl_pool2d *p, char *why,
                            size_t why_bytes);
/* ---- what onnx_import.c lends the files of operator families ---- */

#define DDL__ONNX_NAME NAME
#define DDL__ONNX_MAX_IO MAX_IO
#define DDL__ONNX_MAX_IN MAX_IN
#define DDL__ONNX_ABSORBED (-2) /* value.tensor of a node's output that a pattern already made */

typedef struct imp ddl__onnx_imp; /* the import in progress (onnx_import.c) */
typedef struct ddl__onnx_node {
    char op[64], name[DDL__ONNX_NAME];
    char in[DDL__ONNX_MAX_IN][DDL__ONNX_NAME], out[DDL__ONNX_MAX_IO][DDL__ONNX_NAME];
    int n_in, n_out;
    ddl__pb_slice attrs[32];
    int n_attrs;
} ddl__onnx_node;
typedef ddl__onnx_node node;

/* ddl__onnx_mul_layers (onnx_affine.c): a Mul of two layers as a mul layer, or refused naming both
 * shapes. */
int ddl__onnx_mul_layers(ddl__onnx_imp *m, ddl_graph *g, const ddl__onnx_node *n);
/* ddl__onnx_fail: the import's error (printf-style); returns DDL_EINVAL. */
int ddl__onnx_fail(ddl__onnx_imp *m, const char *fmt, ...) DDL__PRINTF(2, 3);
/* ddl__onnx_attr: node n's attribute `name` as a float (f) and/or its first int (i, with the
 * count of ints in *n_ints: -1 when damaged); 0 when absent (then nothing is written). */
int ddl__onnx_attr(const ddl__onnx_node *n, const char *name, float *f, int64_t *i, int *n_ints);
/* ddl__onnx_attr_ints: node n's attribute `name` as at most max (<= 8) ints into out: their
 * count, 0 when absent, -1 when damaged or longer. */
int ddl__onnx_attr_ints(const ddl__onnx_node *n, const char *name, int64_t *out, int max);
/* ddl__onnx_layer_in: the layer value `name` is (a layer's output), -1 with the error set. */
int ddl__onnx_layer_in(ddl__onnx_imp *m, const ddl__onnx_node *n, const char *name);
/* ddl__onnx_value: the layer (-1: none) and tensor (-1: none, or DDL__ONNX_ABSORBED) of value
 * `name`; -1 when it is not defined yet. */
int ddl__onnx_value(const ddl__onnx_imp *m, const char *name, int *layer, int *tensor);
/* ddl__onnx_define: name is layer's output (or tensor's); DDL_OK or the error. */
int ddl__onnx_define(ddl__onnx_imp *m, const char *name, int layer, int tensor);
/* ddl__onnx_added: record layer i (or the graph's error, i < 0) as node n's first output, once
 * its shape resolves; DDL_OK or the error. */
int ddl__onnx_added(ddl__onnx_imp *m, ddl_graph *g, const ddl__onnx_node *n, int i);
/* ddl__onnx_shape: the per-sample shape of layer i; DDL_OK or the error naming node n. */
int ddl__onnx_shape(ddl__onnx_imp *m, const ddl_graph *g, const ddl__onnx_node *n, int i, int *c, int *h, int *w);
/* ddl__onnx_scalar: value `name` is a float constant of one value: an initializer, a Constant
 * node before, or one after (the file's order): 0 and *v, else -1. */
int ddl__onnx_scalar(ddl__onnx_imp *m, const char *name, float *v);
/* ddl__onnx_ints: value `name` is an INT64 constant of at most max values: their count, else -1. */
int ddl__onnx_ints(ddl__onnx_imp *m, const char *name, int64_t *out, int max);
/* ddl__onnx_readers (onnx_scan.c): how many nodes of the graph read value `name` (a graph output counts as one
 * more), and the k-th of them (file order) in *out when there is one. */
int ddl__onnx_readers(ddl__onnx_imp *m, const char *name, int k, ddl__onnx_node *out);
/* ddl__onnx_producer (onnx_scan.c): the node whose first output is `name`, into *out: 0, else -1. */
int ddl__onnx_producer(ddl__onnx_imp *m, const char *name, ddl__onnx_node *out);
/* ddl__onnx_node_read: the node of NodeProto bytes s into *out; DDL_OK or the error.
 * ddl__onnx_graph: the model's GraphProto (onnx_scan.c walks it). */
int ddl__onnx_node_read(ddl__onnx_imp *m, ddl__pb_slice s, ddl__onnx_node *out);
ddl__pb_slice ddl__onnx_graph(const ddl__onnx_imp *m);
/* ddl__onnx_opset: the default domain's opset of the model; ddl__onnx_output: the graph's output. */
int ddl__onnx_opset(const ddl__onnx_imp *m);
const char *ddl__onnx_output(const ddl__onnx_imp *m);

/* ddl__onnx_act: node n if it is an activation or softmax (onnx_import_act.c), or part of a
 * pattern that makes one (SiLU, GELU, Hardswish as PyTorch exports them): DDL_OK, or the error;
 * -1 when n is none of these (the caller goes on). */
int ddl__onnx_act(ddl__onnx_imp *m, ddl_graph *g, const ddl__onnx_node *n);

/* ---- shared with onnx_import_shape.c, onnx_import_norm.c and onnx_import_resize.c (each as its
 * static namesake in onnx_import.c; ddl__onnx_added_w: ddl__onnx_added with the layer's weight
 * and bias tensors) ---- */
int ddl__onnx_find(const imp *m, const char *name);
int ddl__onnx_const_in(imp *m, const node *n, const char *name, const char *what);
int ddl__onnx_int_attr(imp *m, const node *n, const char *name, int64_t dflt, int64_t lo, int64_t hi, const char *need,
                       int *v);
attr ddl__onnx_get(const node *n, const char *name);
int ddl__onnx_count(const tensor *t, size_t *n);
int ddl__onnx_ints_of(const tensor *t, int64_t *out, int max);
int ddl__onnx_floats_of(const tensor *t, float *out, size_t n);
int ddl__onnx_data_ok(imp *m, const node *n, const tensor *t, const char *what);
int ddl__onnx_added_w(imp *m, ddl_graph *g, const node *n, int i, int w, int b, int transpose);
const char *ddl__onnx_ints_text(const int64_t *v, int n, char out[200]);
void ddl__onnx_layer_name(const ddl_graph *g, const tensor *w, char *out);

/* onnx_import_shape.c: ddl__onnx_shape_node: node n if it is one the helpers take (shape
 * arithmetic on constants, Shape, Reshape, Flatten, Resize, Upsample, the norms and their
 * patterns); -1 when it is not, else DDL_OK or DDL_EINVAL with m->err set. */
int ddl__onnx_shape_node(imp *m, ddl_graph *g, const node *n);
/* ddl__onnx_rank: the rank of layer i's output as the ONNX file sees it (2 after a flatten or a
 * dense layer, else 4). */
int ddl__onnx_rank(const ddl_graph *g, int i);
/* ddl__onnx_const: the constant tensor `name` is (-1: none); ddl__onnx_new_tensor: a constant
 * computed at import (its data copied into m->fold), defined as `name`; its index or -1. */
int ddl__onnx_const(const imp *m, const char *name);
int ddl__onnx_new_tensor(imp *m, const node *n, const char *name, int type, int n_dims, const int64_t *dims,
                         const void *data);

/* onnx_import_bn.c: ddl__onnx_batchnorm: a BatchNormalization node as a batchnorm layer;
 * ddl__onnx_gather_buffers: every batchnorm's running statistics into out->buffers (mean, then
 * variance, per layer). DDL_OK, or DDL_EINVAL / the allocation's failure with m->err set. */
int ddl__onnx_batchnorm(imp *m, ddl_graph *g, const node *n);
int ddl__onnx_gather_buffers(imp *m, const ddl_graph *g, const ddl_allocator *alloc, ddl_onnx_import *out);

/* onnx_gather.c: every layer's weights into out->params (and the running statistics into
 * out->buffers): DDL_OK, or DDL_EINVAL / the allocation's failure with m->err set. */
int ddl__onnx_gather(imp *m, const ddl_graph *g, const ddl_allocator *alloc, ddl_onnx_import *out);

/* onnx_import_resize.c: Resize (opsets 10 to 18) and Upsample (7 to 9) as a resize layer. */
int ddl__onnx_resize(imp *m, ddl_graph *g, const node *n);

/* onnx_import_norm.c: InstanceNormalization, GroupNormalization and torch's GroupNorm pattern
 * (Reshape to (N, G, -1), InstanceNormalization, Reshape back, Mul, Add); -1: not one. The
 * reshapes reach it from onnx_import_shape.c: ddl__onnx_norm_reshape with the shape resolved. */
int ddl__onnx_norm_node(imp *m, ddl_graph *g, const node *n);
int ddl__onnx_norm_reshape(imp *m, ddl_graph *g, const node *n, int x, const int64_t *shape, int k);
/* ddl__onnx_pending: the pattern value `name` is (NULL: a layer's output or a constant);
 * ddl__onnx_new_pend: `name` a pattern value of kind made from layer (DDL_OK or the error). */
ddl__onnx_pend *ddl__onnx_pending(imp *m, const char *name);
int ddl__onnx_new_pend(imp *m, const node *n, const char *name, int kind, int layer, int groups);

/* onnx_import_channels.c: channels moved, not computed. ddl__onnx_concat: Concat of layers along
 * the channels (axis 1), a chain of concat layers that reuses an earlier one of the same inputs;
 * of one input, that input. ddl__onnx_channel_slice: a Slice of a
 * layer's output along the channels as a slice layer. ShuffleNet's channel shuffle, as torch
 * writes it: Reshape of a layer to (N, G, C / G, H, W) (ddl__onnx_shuffle_split, from
 * onnx_import_shape.c's Reshape), Transpose (0, 2, 1, 3, 4) (ddl__onnx_shuffle_swap; -1 when the
 * Transpose reads no such value), Reshape back to (N, C, H, W) (ddl__onnx_shuffle_join): a
 * shuffle layer. DDL_OK, or DDL_EINVAL with the node named. */
int ddl__onnx_concat(imp *m, ddl_graph *g, const node *n);
int ddl__onnx_channel_slice(imp *m, ddl_graph *g, const node *n, int x);
int ddl__onnx_shuffle_split(imp *m, const node *n, int x, int64_t groups);
int ddl__onnx_shuffle_swap(imp *m, const node *n);
int ddl__onnx_shuffle_join(imp *m, ddl_graph *g, const node *n, const int64_t *shape, int k);
/* ddl__onnx_norm_params: groupnorm layer i's weight then bias (c each) into p. */
int ddl__onnx_norm_params(imp *m, int i, int c, float *p);

/* ---- the attributes ONNX defines (onnx_attrs.c) ---- */

/* ddl__onnx_attr_known: attribute `name` is one ONNX defines for `op`; 1 too for an op the table
 * does not list (refused for itself). */
int ddl__onnx_attr_known(const char *op, const char *name);
/* ddl__onnx_attrs_known: every attribute (AttributeProto) of a node of op is known; 0 with the
 * first that is not, its name and its value as text, in name and val. */
int ddl__onnx_attrs_known(const char *op, const ddl__pb_slice *attrs, int n_attrs, char name[64], char val[64]);

/* ---- constants applied per channel (onnx_affine.c) ---- */

/* ddl__onnx_per_channel: the n values (dims, nd) of a constant applied to a value of c channels
 * and rank 2 (N, C) or 4 (N, C, H, W), as c values into v: a scalar repeated, or one per channel
 * broadcast the numpy way; -1 if it is neither (it would change the value's shape, or broadcast
 * along H, W or N). */
int ddl__onnx_per_channel(const int64_t *dims, int nd, const float *vals, size_t n, int c, int rank, float *v);
/* ddl__onnx_affine_of: Mul, Add, Sub or Div ('M', 'A', 'S', 'D') of c values v, the constant the
 * first operand or not, as x * s + t; -1 when it is not affine (v / x, or x / 0). */
int ddl__onnx_affine_of(char op, int const_first, const float *v, int c, float *s, float *t);
/* ddl__onnx_map_compose: a = (s, t) after a. ddl__onnx_map_uniform: the same scale and shift in
 * every channel. ddl__onnx_map_fits: a is a normalisation ddl's models do ((p / 255 - mean) /
 * std, one or one per channel up to DDL_MAX_NORM_CHANNELS, std > 0): positive finite scales,
 * finite shifts. */
void ddl__onnx_map_compose(ddl__onnx_chan_map *a, const float *s, const float *t);
int ddl__onnx_map_uniform(const ddl__onnx_chan_map *a);
int ddl__onnx_map_fits(const ddl__onnx_chan_map *a);
/* ddl__onnx_affine_node: a Mul, Div, Add or Sub of a layer and a constant (onnx_affine.c): on the
 * input before any layer reads it, folded into its normalisation; an Add of a vector after
 * MatMul, its bias; anywhere else, an affine layer. -1 when it is not a layer and a constant.
 * ddl__onnx_input_read: the first layer reads the input: the constants folded into it so far
 * are its normalisation, ddl's own where it can, else an affine layer first. ddl__onnx_out_norm:
 * the input's normalisation and the dropped softmax into out. */
int ddl__onnx_affine_node(imp *m, ddl_graph *g, const node *n);
int ddl__onnx_input_read(imp *m, const node *n);
void ddl__onnx_out_norm(const imp *m, ddl_onnx_import *out);

#endif
