/* fuzz_infer.c - libFuzzer target of the inference entry points: one mode byte, then a
 * checkpoint file (seeds: small U-Nets, and tests/fuzz/corpus/fuzz_infer's graph checkpoints) or,
 * with mode bit 1, an ONNX file (the corpus's PyTorch-style exports), which is what ddl-serve and
 * the PostgreSQL extension open. Mode bit 0: first repair every CRC-32C of a checkpoint, so
 * mutations reach the tensor table and the weights. The file goes through ddl_predictor_open (the
 * model the checkpoint names, or the graph the ONNX file imports), a prediction of a few images of
 * the model's shape and one of the wrong shape, and, a checkpoint, ddl_export to .onnx and to
 * .npz. Every input must give DDL_OK or an error with a message, never a crash, a leak or a huge
 * allocation. With FUZZ_SEED_DIR set, initialisation writes the U-Net seeds there. */
#include "ddl.h"
#include "fuzz_common.h"

#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t pixels[4 * 16 * 16], targets[8 * 16 * 16];
static float out[4 * 16 * 16 * 16];
static uint16_t classes[4 * 16 * 16];

/* ---- seeds: U-Nets of depth 1 and 2, saved after a training step ---- */

static void write_seeds(const char *dir)
{
    ddl_dataset d = {.n = 8, .c = 1, .h = 16, .w = 16, .th = 16, .tw = 16, .n_classes = 3, .images = targets,
                     .targets = targets};
    const char *p = fuzz_path("seed");
    for (int depth = 1; depth <= 2; depth++) {
        ddl_model_config mc = {.batch = 4, .in_c = 1, .in_h = 16, .in_w = 16, .n_classes = 3,
                               .plugin_config = &(ddl_unet_config){.depth = depth, .width = 2}};
        ddl_model *m = NULL;
        ddl_trainer *t = NULL;
        ddl_train_config tc;
        ddl_train_config_default(&tc);
        tc.batch = 4;
        if (ddl_model_create(ddl_model_unet(), &mc, NULL, &m, NULL, 0) != DDL_OK ||
            ddl_trainer_create(&tc, m, &d, NULL, &t, NULL, 0) != DDL_OK || ddl_trainer_step(t, NULL) != DDL_OK ||
            ddl_trainer_save(t, p) != DDL_OK)
            abort();
        ddl_trainer_destroy(t);
        ddl_model_destroy(m);
        fuzz_seeds(p, dir, depth, 2);
    }
    remove(p);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    for (size_t i = 0; i < sizeof targets; i++)
        targets[i] = (uint8_t)(i * 7 % 3);
    for (size_t i = 0; i < sizeof pixels; i++)
        pixels[i] = (uint8_t)(i * 37);
    const char *dir = getenv("FUZZ_SEED_DIR");
    if (dir)
        write_seeds(dir);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int is_onnx = data[0] & 2;
    uint8_t *b = malloc(size);
    memcpy(b, data + 1, size - 1);
    if ((data[0] & 1) && !is_onnx)
        fuzz_repair(b, size - 1);
    const char *p = fuzz_path(is_onnx ? "m.onnx" : "ckpt"); /* the predictor knows ONNX by its name */
    fuzz_write(p, b, size - 1);
    free(b);
    char err[DDL_ERR_BYTES] = "";
    ddl_predict_config pc = {.batch = 2};
    ddl_predictor *pr = NULL;
    ddl_allocator a = fuzz_allocator(); /* more than 256 MiB: DDL_ENOMEM */
    if (ddl_predictor_open(p, &pc, &a, &pr, err, sizeof err) == DDL_OK) {
        const ddl_model_config *mc = ddl_model_get_config(ddl_predictor_model(pr));
        int K, oh, ow;
        ddl_model_output_shape(ddl_predictor_model(pr), &K, &oh, &ow);
        size_t in = (size_t)mc->in_c * mc->in_h * mc->in_w, o = (size_t)K * oh * ow;
        if (3 * in <= sizeof pixels && 3 * o <= sizeof out / sizeof out[0] && 3 * (size_t)oh * ow <= sizeof classes &&
            ddl_predictor_run(pr, pixels, 3, mc->in_c, mc->in_h, mc->in_w, out, out, classes) != DDL_OK)
            abort(); /* the model's own shape must run */
        if (ddl_predictor_run(pr, pixels, 1, mc->in_c > 1 ? mc->in_c - 1 : 2, mc->in_h, mc->in_w, out, NULL, NULL) !=
                DDL_EINVAL ||
            !ddl_predictor_error(pr)[0])
            abort();
        ddl_predictor_close(pr);
    } else if (!err[0] || pr) {
        abort();
    }
    ddl_checkpoint *ck = NULL;
    if (!is_onnx && ddl_checkpoint_open(p, NULL, &ck, NULL, 0) == DDL_OK) {
        const char *onnx = fuzz_path("x.onnx"), *npz = fuzz_path("x.npz");
        err[0] = '\0';
        if (ddl_export(ck, onnx, NULL, err, sizeof err) != DDL_OK && !err[0])
            abort();
        err[0] = '\0';
        if (ddl_export(ck, npz, NULL, err, sizeof err) != DDL_OK && !err[0])
            abort();
        remove(onnx);
        remove(npz);
        ddl_checkpoint_close(ck);
    }
    remove(p);
    return 0;
}
