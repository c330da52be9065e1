/* onnx_impl.h - what the ONNX importer's files share: the protobuf reader (pb_read.c), the
 * importer (onnx_import.c) and the files of operator families it hands nodes to
 * (onnx_import_act.c). Private to src/graph. */
#ifndef DDL_GRAPH_ONNX_IMPL_H
#define DDL_GRAPH_ONNX_IMPL_H
#include "impl.h"

typedef struct ddl__pb_slice {
    const unsigned char *p, *end;
} ddl__pb_slice;

typedef struct ddl__pb_field {
    int number, wire;      /* field number; wire type 0, 1, 2 or 5 */
    uint64_t v;            /* a varint, or the bits of a fixed 32/64 */
    ddl__pb_slice s;       /* wire type 2: the bytes */
} ddl__pb_field;

/* ddl__pb_next: the next field of message m into f: 1, 0 at the end, -1 if malformed. */
int ddl__pb_next(ddl__pb_slice *m, ddl__pb_field *f);
/* ddl__pb_str: a string field into out (NUL added); -1 if too long or holding a NUL. */
int ddl__pb_str(const ddl__pb_field *f, char *out, size_t bytes);
/* ddl__pb_ints: the int64s of a repeated field (packed, or one element) appended to out[*n..max). */
int ddl__pb_ints(const ddl__pb_field *f, int64_t *out, int max, int *n);

/* ---- what onnx_import.c lends the files of operator families ---- */

#define DDL__ONNX_NAME 160     /* bytes of a value's name */
#define DDL__ONNX_MAX_IO 8     /* inputs or outputs of a node */
#define DDL__ONNX_ABSORBED (-2) /* value.tensor of a node's output that a pattern already made */

typedef struct imp ddl__onnx_imp; /* the import in progress (onnx_import.c) */
typedef struct ddl__onnx_node {
    char op[64], name[DDL__ONNX_NAME];
    char in[DDL__ONNX_MAX_IO][DDL__ONNX_NAME], out[DDL__ONNX_MAX_IO][DDL__ONNX_NAME];
    int n_in, n_out;
    ddl__pb_slice attrs[32];
    int n_attrs;
} ddl__onnx_node;

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

#endif
