/* src/graph/impl.h - the layer graph's private layout, shared by its files: the description
 * (graph.c builds it, text.c reads and writes it, presets.c fills it) and the plugin that builds
 * a model from it (plugin.c). A graph is plain bytes, no pointers, so a model keeps a copy.
 * Not API. */
#ifndef DDL_GRAPH_IMPL_H
#define DDL_GRAPH_IMPL_H
#include "../core/impl.h"

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
    DDL__OP_AFFINE,        /* x * scale + shift per channel, constants: out channels, k their offset in consts */
    DDL__N_OPS
};

/* One layer as described: sizes may be DDL_CLASSES (resolved from the model config). */
typedef struct ddl__layer {
    uint8_t op;            /* DDL__OP_* */
    uint8_t bias;          /* conv: has a bias */
    int16_t in[2];         /* inputs (earlier layers); -1: none */
    int out;               /* conv, deconv: out channels; dense: outputs; input: channels */
    int k, stride, pad;    /* conv, deconv, pools; input: height (k) and width (stride) */
    int groups;            /* groupnorm: 0 for the largest <= 8 dividing the channels */
    float p;               /* dropout; < 0: cfg.dropout */
    char name[DDL_GRAPH_NAME_BYTES];
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

/* ddl__graph_op_name: "conv", "maxpool", ... as the text format spells them; NULL if unknown. */
const char *ddl__graph_op_name(int op);
/* ddl__graph_op_find: DDL__OP_* of a name, -1 if none. */
int ddl__graph_op_find(const char *name);
/* ddl__graph_fail: record the first error (printf-style) and return -1. */
int ddl__graph_fail(ddl_graph *g, const char *fmt, ...) DDL__PRINTF(2, 3);
/* ddl__graph_param_prefix: the prefix of layer i's parameters: its name, or its nn.Sequential
 * number (i - 1) when it has none. */
void ddl__graph_param_prefix(const ddl_graph *g, int i, char *out, size_t out_bytes);

/* ddl__graph_layer_shape: the per-sample output shape (c, h, w) of layer i of g, whose input has
 * a fixed size (a DDL_CLASSES size resolves as 2 classes); DDL_EINVAL with the layer that cannot
 * be resolved, and why, in why. For the ONNX import, which checks each weight against it. */
int ddl__graph_layer_shape(const ddl_graph *g, int i, int *c, int *h, int *w, char *why, size_t why_bytes);

/* ddl__graph_shape: the per-sample output shape (c, h, w) and groupnorm groups of layer i of a
 * model built by ddl_model_graph() (for exporters); the graph itself through *g. 0 if m is not
 * a graph model or i is out of range. */
int ddl__graph_shape(const ddl_model *m, int i, const ddl_graph **g, int *c, int *h, int *w, int *groups);

#endif
