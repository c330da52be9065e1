/* fuzz_checkpoint.c - libFuzzer target of the checkpoint reader. Input: one mode byte, then a
 * checkpoint file. Mode bit 0: first repair every CRC-32C (header, section headers, section
 * bodies), so mutations get past the checksums into the length checks, the metadata and tensor
 * table checks and lz4; bit 1: also resume a trainer of a small model from it. Every input
 * must give DDL_OK or an error with a message, never a crash, a leak or a huge allocation.
 * With FUZZ_SEED_DIR set, initialisation writes seed inputs (valid checkpoints) there. */
#include "ddl.h"
#include "fuzz_common.h"

#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
static volatile float sink; /* reads the optimiser cannot drop */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- a small model: dense 16 -> 4, and a block of zeros that lz4 compresses ---- */

typedef struct small {
    float *w, *b, *gw, *gb;
} small;

static int small_build(void *self, const ddl_model_config *cfg, ddl_model_build *b)
{
    small *s = (small *)self;
    int ws[2] = {4, 16}, bs[1] = {4}, zs[2] = {8, 32};
    (void)cfg;
    s->w = ddl_build_param(b, "fc.weight", 2, ws, DDL_INIT_GLOROT, 16, 4, &s->gw);
    s->b = ddl_build_param(b, "fc.bias", 1, bs, DDL_INIT_ZERO, 16, 4, &s->gb);
    ddl_build_param(b, "spare.weight", 2, zs, DDL_INIT_ZERO, 1, 1, NULL);
    ddl_build_output(b, 4, 1, 1);
    return DDL_OK;
}

static void small_forward(void *self, const float *x, int batch, int training, ddl_rng *rng, float *logits)
{
    small *s = (small *)self;
    (void)training, (void)rng;
    ddl_dense_forward(batch, 16, 4, x, s->w, s->b, logits);
}

static void small_backward(void *self, const float *x, int batch, const float *dlogits, ddl_backward *pass)
{
    (void)pass; /* one layer: nothing to report before the end */
    small *s = (small *)self;
    ddl_dense_backward(batch, 16, 4, x, s->w, dlogits, NULL, s->gw, s->gb);
}

static const ddl_model_plugin small_plugin = {.version = DDL_MODEL_VERSION, .name = "small",
                                              .self_bytes = sizeof(small), .build = small_build,
                                              .forward = small_forward, .backward = small_backward};

static uint8_t images[8 * 16], targets[8];
static ddl_dataset data = {.n = 8, .c = 1, .h = 4, .w = 4, .th = 1, .tw = 1, .n_classes = 4,
                           .images = images, .targets = targets};
static ddl_model *model;
static ddl_trainer *trainer;

/* ---- seeds ---- */

static void write_seeds(const char *dir)
{
    const char *p = fuzz_path("seed");
    for (int k = 0; k < 2; k++) {
        if (k)
            ddl_trainer_step(trainer, NULL);
        if (ddl_trainer_save(trainer, p) != DDL_OK)
            abort();
        fuzz_seeds(p, dir, k, 4);
    }
    remove(p);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    for (int i = 0; i < 8 * 16; i++)
        images[i] = (uint8_t)(i * 37);
    for (int i = 0; i < 8; i++)
        targets[i] = (uint8_t)(i % 4);
    ddl_model_config mc = {.batch = 4, .in_c = 1, .in_h = 4, .in_w = 4, .n_classes = 4};
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = 4;
    if (ddl_model_create(&small_plugin, &mc, NULL, &model, NULL, 0) != DDL_OK ||
        ddl_trainer_create(&tc, model, &data, NULL, &trainer, NULL, 0) != DDL_OK)
        abort();
    const char *dir = getenv("FUZZ_SEED_DIR");
    if (dir)
        write_seeds(dir);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data_in, size_t size)
{
    if (size < 1)
        return 0;
    int mode = data_in[0];
    uint8_t *b = malloc(size);
    memcpy(b, data_in + 1, size - 1);
    if (mode & 1)
        fuzz_repair(b, size - 1);
    const char *p = fuzz_path("ckpt");
    fuzz_write(p, b, size - 1);
    free(b);
    char err[DDL_ERR_BYTES];
    ddl_checkpoint *ck = NULL;
    err[0] = 0;
    int rc = ddl_checkpoint_open(p, NULL, &ck, err, sizeof err);
    if (rc == DDL_OK) {
        const ddl_checkpoint_info *in = ddl_checkpoint_get_info(ck);
        const float *w = ddl_checkpoint_params(ck);
        for (int i = 0; i < in->n_tensors; i++) {
            const ddl_param_info *t = ddl_checkpoint_tensor(ck, i);
            for (size_t k = 0; k < t->count; k++)
                sink += w[t->offset + k]; /* every tensor lies inside the weights */
        }
        const float *o = ddl_checkpoint_optim_state(ck);
        for (size_t k = 0; k < in->n_optim; k++)
            sink += o[k];
        ddl_checkpoint_check_model(ck, model, err, sizeof err);
        ddl_checkpoint_close(ck);
    } else if (!err[0] || ck) {
        abort();
    }
    if (mode & 2) {
        rc = ddl_trainer_resume(trainer, p, 0, NULL);
        if (rc == DDL_OK && (ddl_trainer_step(trainer, NULL) != DDL_OK))
            abort(); /* a checkpoint it accepted must be trainable */
        ddl_model_init_weights(model, 1);
    }
    return 0;
}
