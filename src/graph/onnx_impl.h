/* onnx_impl.h - what the ONNX importer's two files share: the protobuf reader (pb_read.c) and
 * the importer (onnx_import.c). Private to src/graph. */
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

/* ---- geometry (onnx_import_geometry.c) ----
 * What a Conv, ConvTranspose, MaxPool or AveragePool node's attributes say, as onnx_import.c
 * read them, turned into the graph's geometry: auto_pad resolved against the input's size,
 * ConvTranspose's output_shape into pads and output padding, every value checked. */
typedef struct ddl__onnx_ints {
    int found, n;              /* n < 0: not a list of at most 8 ints */
    int64_t v[8];
} ddl__onnx_ints;
typedef struct ddl__onnx_geo {
    ddl__onnx_ints kernel_shape, strides, pads, dilations, output_padding, output_shape;
    ddl__onnx_ints group, ceil_mode, count_include_pad, storage_order;
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

#endif
