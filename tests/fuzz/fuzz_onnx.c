/* fuzz_onnx.c - libFuzzer target of the ONNX importer (src/graph/onnx_import.c, src/formats/pb.c): the
 * input, written as f.onnx, through ddl_graph_import_onnx; an import that succeeds is built as a
 * model and its weights copied in, as the predictor does. Every input must give DDL_OK or an error
 * with a message, never a crash, a leak or a read out of bounds. Seeds: tests/fuzz/corpus/fuzz_onnx
 * (tests/fuzz/make_corpus.sh: the tests' ONNX files, PyTorch's layouts, hostile files), with the
 * dictionary tests/fuzz/fuzz_onnx.dict; make fuzz passes both. */
#include "ddl.h"
#include "fuzz_common.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[DDL_ERR_BYTES];
    err[0] = 0;
    const char *p = fuzz_path("f.onnx");
    fuzz_write(p, data, size);
    ddl_allocator a = fuzz_allocator(); /* more than 256 MiB: DDL_ENOMEM */
    ddl_graph *g = NULL;
    if (ddl_graph_create(&a, &g) != DDL_OK)
        return 0;
    ddl_onnx_import im;
    int rc = ddl_graph_import_onnx(g, p, &a, &im, err, sizeof err);
    if (rc == DDL_OK) {
        ddl_model_config mc = {.batch = 1, .in_c = im.in_c, .in_h = im.in_h, .in_w = im.in_w, .n_classes = 2,
                               .plugin_config = g};
        int c, h, w;
        ddl_model *m = NULL;
        size_t in = (size_t)im.in_c * (size_t)im.in_h * (size_t)im.in_w;
        if (in <= 1 << 16 && ddl_graph_output_shape(g, &mc, &c, &h, &w) == DDL_OK &&
            c >= 2 && c <= DDL_MAX_CLASSES && (mc.n_classes = c, 1) &&
            ddl_model_create(ddl_model_graph(), &mc, &a, &m, err, sizeof err) == DDL_OK) {
            if (ddl_onnx_import_load(&im, m, err, sizeof err) != DDL_OK)
                abort(); /* an import's weights and running statistics fit the model its graph builds */
            static float x[1 << 12];
            if (in <= sizeof x / sizeof x[0])
                ddl_model_forward(m, x, 1, 0, NULL); /* the kernels at the imported geometry */
        }
        ddl_model_destroy(m);
        ddl_onnx_import_free(&im, &a);
    } else if (!err[0]) {
        abort();
    }
    ddl_graph_destroy(g, &a);
    unlink(p);
    return 0;
}
