/* src/infer/impl.h - private to the inference layer: the predictor's layout (predictor.c), the
 * protobuf writer the ONNX exporter encodes with (pb.c), and what the exporters share
 * (export.c). Not API. The layer reads checkpoints and builds models through the core; it
 * knows nothing of trainers or ranks. */
#ifndef DDL_INFER_IMPL_H
#define DDL_INFER_IMPL_H
#include "core/impl.h"

/* ---- the predictor ---- */
struct ddl_predictor {
    void *mem;                  /* the one block: this struct, the input buffer, the model */
    const ddl_allocator *alloc;
    ddl_model *m;               /* built in mem by ddl_model_init */
    ddl_checkpoint_info info;   /* the checkpoint's header, kept for ddl_predictor_info */
    float *x;                   /* (batch, in_c, in_h, in_w) normalised inputs */
    const char *const *class_names; /* the checkpoint's, copied into mem; NULL: none */
    char err[DDL_ERR_BYTES];
};

/* ---- protobuf, the few field kinds ONNX needs (pb.c) ----
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

/* ---- what the exporters share (export.c) ---- */

/* ddl__export_write: write n bytes to path; on failure remove what was written and say why. */
int ddl__export_write(const char *path, const void *p, size_t n, char *err, size_t err_bytes);

#endif
