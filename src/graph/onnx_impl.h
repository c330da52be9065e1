/* onnx_impl.h - what the ONNX importer's files share: the protobuf reader (pb_read.c), the
 * importer (onnx_import.c) and its helpers for shape arithmetic, reshapes and resizing
 * (onnx_import_shape.c) and normalisation patterns (onnx_import_norm.c). Private to src/graph. */
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

/* ---- the importer's tables (onnx_import.c owns them; its helpers read and add to them) ---- */

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

/* A value that exists only inside a pattern ddl recognises (GroupNorm's (N, G, -1) reshape),
 * or one whose reader would see something else than the file says (folded into a layer). */
typedef struct ddl__onnx_pend {
    char name[NAME];
    int kind;                  /* DDL__PEND_* */
    int layer, groups;         /* the layer it is made from; its groups */
    int s, b;                  /* InstanceNormalization's scale and bias tensors */
} ddl__onnx_pend;
enum { DDL__PEND_GROUPED = 1, DDL__PEND_NORMED, DDL__PEND_FOLDED };
#define DDL__ONNX_MAX_PEND 64

/* Where a groupnorm layer's weight and bias come from: weight[c] = s[c / cg] * mul[c], bias[c] =
 * b[c / cg] * mul[c] + add[c] (cg: channels per group of s and b; a tensor -1: 1 or 0). */
typedef struct ddl__onnx_norm {
    int s, b, mul, add;
    int c, per;                /* the layer's channels; how many each value of s and b covers */
    int stage;                 /* 0: done; 1: a Mul may follow (then 2: an Add may) */
    char tail[NAME];           /* the value a following Mul or Add must read */
} ddl__onnx_norm;

#define DDL__ONNX_FOLD_BYTES (1 << 20) /* constants computed at import: shapes, scales */
#define DDL__ONNX_BATCH INT64_MIN      /* the batch size in a folded shape: left free */

typedef struct imp {
    tensor t[MAX_TENSORS];
    value v[MAX_VALUES];
    param_src ps[DDL_GRAPH_MAX_LAYERS]; /* by layer */
    int n_t, n_v;
    int input_touched;         /* a layer already reads the input: no more normalisation */
    float scale, shift;        /* pixels p -> p * scale + shift before the first layer */
    char input[NAME], output[NAME];
    char err[DDL_ERR_BYTES];
    /* onnx_import_shape.c and onnx_import_norm.c: constants folded at import, values that
     * exist only inside a pattern, where each groupnorm layer's weight and bias come from */
    int n_pend, opset;
    size_t n_fold;
    ddl__onnx_pend pend[DDL__ONNX_MAX_PEND];
    ddl__onnx_norm norm[DDL_GRAPH_MAX_LAYERS]; /* by layer */
    unsigned char fold[DDL__ONNX_FOLD_BYTES];
} imp;

typedef struct node {
    char op[64], name[NAME];
    char in[MAX_IO][NAME], out[MAX_IO][NAME];
    int n_in, n_out;
    ddl__pb_slice attrs[32];
    int n_attrs;
} node;

typedef struct attr {
    int found, n;              /* n < 0: more than 8 ints, or not protobuf */
    int64_t ints[8];
    float f;
    char str[16];              /* a string's first 15 bytes (auto_pad) */
    ddl__pb_slice t;
} attr;

/* Shared from onnx_import.c (each as its static namesake there). */
int ddl__onnx_fail(imp *m, const char *fmt, ...) DDL__PRINTF(2, 3);
int ddl__onnx_find(const imp *m, const char *name);
int ddl__onnx_define(imp *m, const char *name, int layer, int t);
attr ddl__onnx_get(const node *n, const char *name);
int ddl__onnx_layer_in(imp *m, const node *n, const char *name);
int ddl__onnx_count(const tensor *t, size_t *n);
int ddl__onnx_ints_of(const tensor *t, int64_t *out, int max);
int ddl__onnx_floats_of(const tensor *t, float *out, size_t n);
int ddl__onnx_data_ok(imp *m, const node *n, const tensor *t, const char *what);
int ddl__onnx_added(imp *m, ddl_graph *g, const node *n, int i, int w, int b, int transpose);
const char *ddl__onnx_ints_text(const int64_t *v, int n, char out[200]);
void ddl__onnx_layer_name(const ddl_graph *g, const tensor *w, char *out);

/* onnx_import_shape.c: ddl__onnx_node: node n if it is one the helpers take (shape arithmetic
 * on constants, Shape, Reshape, Flatten, Resize, Upsample, the norms and their patterns);
 * -1 when it is not, else DDL_OK or DDL_EINVAL with m->err set. */
int ddl__onnx_node(imp *m, ddl_graph *g, const node *n);
/* ddl__onnx_rank: the rank of layer i's output as the ONNX file sees it (2 after a flatten or a
 * dense layer, else 4). */
int ddl__onnx_rank(const ddl_graph *g, int i);
/* ddl__onnx_const: the constant tensor `name` is (-1: none); ddl__onnx_new_tensor: a constant
 * computed at import (its data copied into m->fold), defined as `name`; its index or -1. */
int ddl__onnx_const(const imp *m, const char *name);
int ddl__onnx_new_tensor(imp *m, const node *n, const char *name, int type, int n_dims, const int64_t *dims,
                         const void *data);

/* onnx_import_resize.c: Resize (opsets 10 to 18) and Upsample (7 to 9) as a resize layer. */
int ddl__onnx_resize(imp *m, ddl_graph *g, const node *n);

/* onnx_import_norm.c: InstanceNormalization, GroupNormalization and torch's GroupNorm pattern
 * (Reshape to (N, G, -1), InstanceNormalization, Reshape back, Mul, Add); -1: not one. The
 * reshapes reach it from onnx_import_shape.c: ddl__onnx_norm_reshape with the shape resolved. */
int ddl__onnx_norm_node(imp *m, ddl_graph *g, const node *n);
int ddl__onnx_norm_reshape(imp *m, ddl_graph *g, const node *n, int x, const int64_t *shape, int k);
/* ddl__onnx_norm_params: groupnorm layer i's weight then bias (c each) into p. */
int ddl__onnx_norm_params(imp *m, int i, int c, float *p);

#endif
