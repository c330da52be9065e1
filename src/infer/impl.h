/* src/infer/impl.h - private to the inference layer: the predictor's layout (predictor.c). Not
 * API. The layer reads checkpoints and builds models through the core; it knows nothing of
 * trainers or ranks. The file formats it writes are src/formats' (npz.c, and the protobuf codec
 * the ONNX exporter encodes with, pb.h). */
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

#endif
