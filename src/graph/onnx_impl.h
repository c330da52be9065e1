/* onnx_impl.h - what the ONNX importer's files share: the protobuf reader (pb_read.c), the
 * table of attributes (onnx_attrs.c) and the importer (onnx_import.c). Private to src/graph. */
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

/* ddl__onnx_attr_known: attribute `attr` is one ONNX defines for `op` (onnx_attrs.c); 1 too for
 * an op the table does not list (refused for itself). */
int ddl__onnx_attr_known(const char *op, const char *attr);
/* ddl__onnx_attrs_known: every attribute (AttributeProto) of a node of op is known; 0 with the
 * first that is not, its name and its value as text, in name and val. */
int ddl__onnx_attrs_known(const char *op, const ddl__pb_slice *attrs, int n_attrs, char name[64], char val[64]);

/* ---- constants applied per channel (onnx_affine.c) ---- */

#define DDL__ONNX_MAX_CHANNELS 128 /* of a constant applied per channel */

/* an affine map per channel: x[c] -> x[c] * scale[c] + shift[c] */
typedef struct ddl__onnx_norm {
    int c;
    float scale[DDL__ONNX_MAX_CHANNELS], shift[DDL__ONNX_MAX_CHANNELS];
} ddl__onnx_norm;

/* ddl__onnx_per_channel: the n values (dims, nd) of a constant applied to a value of c channels
 * and rank 2 (N, C) or 4 (N, C, H, W), as c values into v: a scalar repeated, or one per channel
 * broadcast the numpy way; -1 if it is neither (it would change the value's shape, or broadcast
 * along H, W or N). */
int ddl__onnx_per_channel(const int64_t *dims, int nd, const float *vals, size_t n, int c, int rank, float *v);
/* ddl__onnx_affine_of: Mul, Add, Sub or Div ('M', 'A', 'S', 'D') of c values v, the constant the
 * first operand or not, as x * s + t; -1 when it is not affine (v / x, or x / 0). */
int ddl__onnx_affine_of(char op, int const_first, const float *v, int c, float *s, float *t);
/* ddl__onnx_norm_compose: a = (s, t) after a. */
void ddl__onnx_norm_compose(ddl__onnx_norm *a, const float *s, const float *t);
/* ddl__onnx_norm_uniform: the same scale and shift in every channel. */
int ddl__onnx_norm_uniform(const ddl__onnx_norm *a);
/* ddl__onnx_norm_fits: a is a normalisation ddl's models do ((p / 255 - mean) / std, one or one
 * per channel up to DDL_MAX_NORM_CHANNELS, std > 0): positive finite scales, finite shifts. */
int ddl__onnx_norm_fits(const ddl__onnx_norm *a);

#endif
