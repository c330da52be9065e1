/* onnx_load.c - ddl_onnx_import_load: what an import gives (ddl_graph_import_onnx: weights,
 * running statistics, the input scaling the file starts with) put into the model built from its
 * graph, so that every caller (the predictor, ddl-train) finishes an imported model the same way.
 * It touches the model only through ddl.h, and only once the counts agree. */
#include "impl.h"

#include <string.h>

int ddl_onnx_import_load(const ddl_onnx_import *im, ddl_model *m, char *err, size_t err_bytes)
{
    if (!im || !m)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_onnx_import_load: an import and a model");
    if (ddl_model_n_params(m) != im->n_params)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "its %zu weights do not fit the model built from its graph (%zu)",
                         im->n_params, ddl_model_n_params(m));
    if (ddl_model_n_buffers(m) != im->n_buffers)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "its %zu running statistics do not fit the model built from its "
                         "graph (%zu)", im->n_buffers, ddl_model_n_buffers(m));
    if (im->n_params)
        memcpy(ddl_model_params(m), im->params, im->n_params * sizeof(float));
    ddl_model_set_buffers(m, im->buffers, im->n_buffers); /* BatchNorm's running statistics */
    /* pixels p -> p * scale + shift is ddl's (p / 255 - mean) / std with std 1 / (255 scale) and
     * mean -shift std; the importer kept per channel only what that can do (onnx_affine.c) */
    float std = 1.0f / (255.0f * (im->scale > 0 ? im->scale : 1.0f)), cm[DDL_MAX_NORM_CHANNELS],
          cs[DDL_MAX_NORM_CHANNELS];
    ddl_model_set_norm(m, -im->shift * std, std);
    for (int k = 0; k < im->n_norm; k++)
        cs[k] = 1.0f / (255.0f * im->norm_scale[k]), cm[k] = -im->norm_shift[k] * cs[k];
    if (im->n_norm)
        ddl_model_set_norm_channels(m, cm, cs);
    return DDL_OK;
}
