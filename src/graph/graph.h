/* src/graph/graph.h - the layer graph's face to the layers above that read a graph rather than
 * build one (the ONNX exporter, src/infer/onnx.c): the description's layout, its ops, its layers
 * and the graph itself (plain bytes, no pointers, so a model keeps a copy), and the helpers that
 * read a layer. What only src/graph's files share is in impl.h, which includes this. Not API. */
#ifndef DDL_GRAPH_GRAPH_H
#define DDL_GRAPH_GRAPH_H
#include "core/impl.h"

enum {
    DDL__OP_INPUT,
    DDL__OP_CONV,
    DDL__OP_DECONV,
    DDL__OP_MAXPOOL,
    DDL__OP_AVGPOOL,
    DDL__OP_GAP,
    DDL__OP_DENSE,
    DDL__OP_RELU,
    DDL__OP_DROPOUT,
    DDL__OP_GROUPNORM,
    DDL__OP_FLATTEN,
    DDL__OP_CONCAT,
    DDL__OP_ADD,
    DDL__OP_ACT,           /* an element-wise activation: act (DDL_ACT_*), alpha, beta */
    DDL__OP_SOFTMAX,       /* softmax over axes axis..axis_to; act 1: log softmax */
    DDL__OP_RESIZE,
    DDL__OP_BATCHNORM,
    DDL__OP_AFFINE,        /* x * scale + shift per channel, constants: out channels, k their offset in consts */
    DDL__OP_MUL,           /* in[0] * in[1], the second of the same shape or (C, 1, 1): broadcast */
    DDL__OP_SHUFFLE,       /* ShuffleNet's channel shuffle in `groups` groups */
    DDL__OP_SLICE,         /* channels k .. k + out - 1 of the input */
    DDL__N_OPS
};

/* One layer as described: sizes may be DDL_CLASSES (resolved from the model config). */
typedef struct ddl__layer {
    uint8_t op;            /* DDL__OP_* */
    uint8_t bias;          /* conv, dense: has a bias */
    int16_t in[2];         /* inputs (earlier layers); -1: none */
    int out;               /* conv, deconv: out channels; dense: outputs; input: channels */
    int k, stride, pad;    /* conv, deconv, pools; input: height (k) and width (stride) */
    int groups;            /* groupnorm: 0 for the largest <= 8 dividing the channels */
    float p;               /* dropout; < 0: cfg.dropout */
    char name[DDL_GRAPH_NAME_BYTES];
    /* Geometry beyond square kernels, one stride and one pad (conv, deconv, pools; geometry.c):
     * each 0 keeps k, stride and pad above, so older layers read the same. groups above is the
     * conv's too (0: 1). */
    int16_t kw, stride_w;         /* kernel width, column stride; 0: k, stride */
    int16_t pad_l, pad_b, pad_r;  /* with pads4: the left, bottom and right pads (pad: the top) */
    uint8_t pads4;                /* 0: pad on every side */
    uint8_t dil_h, dil_w;         /* dilation; 0: 1 */
    uint8_t out_pad_h, out_pad_w; /* deconv: output_padding */
    uint8_t ceil_mode;            /* pools: output size rounded up */
    uint8_t count_pad;            /* avgpool: count_include_pad */
    /* The settings of one kind of layer each, sharing their bytes (a graph holds 1024 layers, held
     * by value in every model built from it): an activation's or softmax's, a resize's, or a
     * batchnorm's. */
    union {
        struct {
            uint8_t act;           /* act: DDL_ACT_*; softmax: 1 for log softmax */
            int8_t axis, axis_to;  /* softmax: its axes of (C, H, W), 1 to 3 */
        };
        struct {
            uint8_t mode, coord, nearest; /* resize: DDL_RESIZE_* */
        };
    };
    union {
        struct {
            float alpha, beta;     /* act: its parameters (ddl_graph_act) */
        };
        struct {
            /* resize: k and stride hold the output's height and width when fixed (0: from the
             * scales); else output = floor(input * scale) */
            float scale_h, scale_w;
        };
        struct {
            float momentum, eps;   /* batchnorm: PyTorch's (running = (1 - momentum) running + momentum batch) */
        };
    };
} ddl__layer;

struct ddl_graph {
    int n;                 /* layers */
    int output;            /* -1: the last layer */
    int head;              /* DDL_HEAD_* */
    int failed;
    ddl__layer layers[DDL_GRAPH_MAX_LAYERS];
    char err[DDL_ERR_BYTES];
    int n_consts;          /* affine layers' scales and shifts, each layer's 2 * channels in a row */
    float consts[2 * DDL_GRAPH_MAX_AFFINE];
};

/* ---- reading a graph (geometry.c, graph.c, plugin.c) ---- */

/* ddl__layer_pads: l's four pads (top, left, bottom, right). */
void ddl__layer_pads(const ddl__layer *l, int pads[4]);

/* ddl__graph_layer_op: how the text format names layer l: its op's name, or an activation's
 * ("sigmoid", "logsoftmax", ...). */
const char *ddl__graph_layer_op(const ddl__layer *l);

/* ddl__graph_param_prefix: the prefix of layer i's parameters: its name, or its nn.Sequential
 * number (i - 1) when it has none. */
void ddl__graph_param_prefix(const ddl_graph *g, int i, char *out, size_t out_bytes);

/* ddl__graph_shape: the per-sample output shape (c, h, w) and groupnorm groups of layer i of a
 * model built by ddl_model_graph() (for exporters); the graph itself through *g. 0 if m is not
 * a graph model or i is out of range. */
int ddl__graph_shape(const ddl_model *m, int i, const ddl_graph **g, int *c, int *h, int *w, int *groups);

#endif
