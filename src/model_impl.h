/* model_impl.h - the private layout of ddl_model, shared by model.c and train.c. */
#ifndef DDL_MODEL_IMPL_H
#define DDL_MODEL_IMPL_H
#include "ddl_impl.h"

#define DDL__NAME_BYTES 48

struct ddl_model {
    const ddl_model_plugin *plugin;
    ddl_model_config cfg;
    void *self;                  /* plugin state: plugin->self_bytes */
    float *params, *grads;       /* n_params each, contiguous, tensor after tensor */
    size_t n_params;
    int n_tensors;
    ddl_param_info tensors[DDL_MAX_PARAMS];
    char names[DDL_MAX_PARAMS][DDL__NAME_BYTES];
    int out_c, out_h, out_w;     /* logits per sample */
    float *logits;               /* (cfg.batch, out_c, out_h, out_w) */
    float mean, std;             /* input normalisation, part of the model */
    const ddl_allocator *alloc;  /* set by ddl_model_create, NULL after ddl_model_init */
    int owned;                   /* 1: ddl_model_destroy frees the memory */
};

#endif
