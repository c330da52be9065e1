/* src/graph/impl.h - what the layer graph's files share: the description (graph.c builds it,
 * text.c reads and writes it, presets.c fills it) and the plugin that builds a model from it
 * (plugin.c). The description's layout is graph.h's, the face the layers above read it through
 * (the ONNX exporter); the helpers here are src/graph's own. Not API. */
#ifndef DDL_GRAPH_IMPL_H
#define DDL_GRAPH_IMPL_H
#include "../core/impl.h"
#include "graph.h" /* the layout: ops, layers, the graph */

/* ---- geometry (geometry.c) ---- */
/* ddl__layer_conv2d: the kernel geometry of conv or deconv layer l at batch n, its input (c, h,
 * w), out channels out. ddl__layer_pool2d: a pool layer's. ddl__layer_out: the output (h, w) of
 * a conv, deconv or pool layer from its input's, in 64 bits (< 1: no output); 0, or -1 when the
 * geometry does not hold (why says which value; why may be NULL). */
ddl_conv2d ddl__layer_conv2d(const ddl__layer *l, int n, int c, int h, int w, int out);
ddl_pool2d ddl__layer_pool2d(const ddl__layer *l);
int ddl__layer_out(const ddl__layer *l, int c, int h, int w, int out, int64_t *oh, int64_t *ow, char *why,
                   size_t why_bytes);
/* ddl__layer_flops (layer_flops.c): FLOPs per sample of layer l, of input (in_c, in_h, in_w)
 * and out_c channels, forward and backward (dx: its backward computes the input's gradient). */
void ddl__layer_flops(const ddl__layer *l, int in_c, int in_h, int in_w, int out_c, int dx, double *fwd,
                      double *bwd);
/* ddl__layer_plain: 1 when l's geometry is that of k, stride and pad alone. */
int ddl__layer_plain(const ddl__layer *l);

/* ddl__graph_op_name: "conv", "maxpool", ... as the text format spells them; NULL if unknown. */
const char *ddl__graph_op_name(int op);
/* ddl__graph_op_find: DDL__OP_* of a name, -1 if none. */
int ddl__graph_op_find(const char *name);
/* ddl__graph_act_name: "leakyrelu", "sigmoid", ... of a DDL_ACT_* kind; NULL if unknown.
 * ddl__graph_act_find: the kind of a name, 0 if none. */
const char *ddl__graph_act_name(int kind);
int ddl__graph_act_find(const char *name);
/* ddl__graph_fail: record the first error (printf-style) and return -1. */
int ddl__graph_fail(ddl_graph *g, const char *fmt, ...) DDL__PRINTF(2, 3);

/* ddl__graph_layer_shape: the per-sample output shape (c, h, w) of layer i of g, whose input has
 * a fixed size (a DDL_CLASSES size resolves as 2 classes); DDL_EINVAL with the layer that cannot
 * be resolved, and why, in why. For the ONNX import, which checks each weight against it. */
int ddl__graph_layer_shape(const ddl_graph *g, int i, int *c, int *h, int *w, char *why, size_t why_bytes);

#endif
