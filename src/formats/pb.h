/* src/formats/pb.h - the protobuf codec (pb.c), ONNX's wire format, for the ONNX importer
 * (src/graph/onnx_import*.c) and exporter (src/infer/onnx.c): both ends of one encoding in one
 * place. The reader walks the fields of a message in the caller's buffer, copying and allocating
 * nothing, every length checked against what is left; the writer appends the few field kinds the
 * exporter needs to a growing buffer. It knows protobuf's wire types, not onnx.proto's messages
 * (the importer and exporter name the fields). Not API. */
#ifndef DDL_FORMATS_PB_H
#define DDL_FORMATS_PB_H
#include "core/impl.h"

/* ---- reading ---- */

/* A message, or any length-delimited value: bytes [p, end) of the caller's buffer. */
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

/* ---- writing ----
 * A growing buffer of allocator memory. A nested message is opened with ddl__pb_begin and
 * closed with ddl__pb_end, which moves its bytes up to make room for their length. Every call
 * does nothing after a failed allocation; ddl__pb_ok says whether all fitted. */
typedef struct ddl__pb {
    const ddl_allocator *alloc;
    unsigned char *buf;
    size_t len, cap;
    int failed;
} ddl__pb;

void ddl__pb_varint(ddl__pb *b, int field, uint64_t v);              /* wire type 0: int32, int64, enum */
void ddl__pb_bytes(ddl__pb *b, int field, const void *p, size_t n);  /* wire type 2: bytes */
void ddl__pb_string(ddl__pb *b, int field, const char *s);           /* wire type 2: string */
void ddl__pb_float(ddl__pb *b, int field, float f);                  /* wire type 5: float */
unsigned char *ddl__pb_reserve(ddl__pb *b, size_t n);               /* n bytes to fill in, or NULL */
size_t ddl__pb_begin(ddl__pb *b, int field);                         /* wire type 2: a message */
void ddl__pb_end(ddl__pb *b, size_t begun);
int ddl__pb_ok(const ddl__pb *b);
void ddl__pb_free(ddl__pb *b);

#endif
