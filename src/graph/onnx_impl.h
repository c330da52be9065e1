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

#endif
