/* test_infer.c - the predictor and the exporters through ddl.h: a checkpoint of a briefly trained
 * LeNet and U-Net loaded for inference gives the trainer's model's logits, probabilities that
 * sum to 1 and the argmax classes, the same bits whatever the calls are cut into, and allocates
 * nothing per call (a counting allocator). A missing, truncated or foreign file, a model of
 * another kind, images of the wrong shape and a failing allocator each give their code and a
 * message naming what was wrong. Exports: .npz and .onnx written, another extension refused
 * with nothing written, ONNX of a model it does not know refused. ddl_eval_metrics on a known
 * confusion matrix.
 *
 *   test_infer --reference CKPT DATA_DIR N OUT_DIR   (for tests/test_onnx.sh; DATA_DIR: Fashion-MNIST's
 *                                                    IDX files, or an image folder CLASS/FILE)
 * writes the first N inputs (t10k images for lenet, scenes made from them for unet) as
 * OUT_DIR/pixels.f32 (N, C, H, W) raw pixels, ddl's logits as OUT_DIR/logits.f32 and the shapes
 * as OUT_DIR/shape.txt ("N C H W K OH OW").
 *   test_infer --onnx-cases LIST                     (for tests/onnx/node_tests.py: onnx_run.h) */
#include "ddl.h"
#include "check.h"
#include "onnx_run.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_TRAIN 64

static char dir[256];
static uint8_t img[N_TRAIN * 784], lab[N_TRAIN];

/* ---- a counting allocator that can fail its Nth call ---- */

typedef struct counting {
    long calls, fail_at; /* fail_at 0: never */
} counting;

static void *count_alloc(void *ud, size_t bytes)
{
    counting *c = (counting *)ud;
    return ++c->calls == c->fail_at ? NULL : malloc(bytes);
}

static void count_free(void *ud, void *p)
{
    (void)ud;
    free(p);
}

/* ---- checkpoints to load ---- */

/* save: train model p for cfg for two steps on synthetic data (digit-like bars), save to path. */
static int save(const ddl_model_plugin *p, ddl_model_config mc, const char *path, ddl_model **keep)
{
    ddl_rng r;
    ddl_rng_seed(&r, 3);
    size_t px = (size_t)mc.in_h * mc.in_w;
    static uint8_t targets[N_TRAIN * 784];
    for (int i = 0; i < N_TRAIN; i++) {
        lab[i] = (uint8_t)ddl_rng_below(&r, 10);
        for (size_t k = 0; k < px; k++) {
            img[i * px + k] = (uint8_t)(k * 10 / px == lab[i] ? 220 : ddl_rng_below(&r, 60));
            targets[i * px + k] = img[i * px + k] > 100 ? (uint8_t)(1 + lab[i] % (mc.n_classes - 1)) : 0;
        }
    }
    int seg = mc.n_classes != 10;
    ddl_dataset d = {.n = N_TRAIN, .c = 1, .h = mc.in_h, .w = mc.in_w, .th = seg ? mc.in_h : 1,
                     .tw = seg ? mc.in_w : 1, .n_classes = mc.n_classes, .images = img, .targets = seg ? targets : lab};
    ddl_model *m = NULL;
    ddl_trainer *t = NULL;
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = mc.batch;
    int rc = ddl_model_create(p, &mc, NULL, &m, NULL, 0);
    if (rc == DDL_OK) {
        ddl_model_set_norm(m, 0.1f, 0.25f);
        rc = ddl_trainer_create(&tc, m, &d, NULL, &t, NULL, 0);
    }
    for (int s = 0; s < 2 && rc == DDL_OK; s++)
        rc = ddl_trainer_step(t, NULL);
    if (rc == DDL_OK)
        rc = ddl_trainer_save(t, path);
    ddl_trainer_destroy(t);
    if (keep && rc == DDL_OK)
        *keep = m;
    else
        ddl_model_destroy(m);
    return rc;
}

/* ---- predictions ---- */

/* expect_forward: logits of images[0..n) as the trained model m computes them, normalised as the
 * trainer does, in passes of m's batch. */
static void expect_forward(ddl_model *m, const uint8_t *images, int n, size_t px, float *out, size_t out_sz)
{
    float mean, std, *x = (float *)malloc((size_t)n * px * sizeof(float));
    ddl_model_norm(m, &mean, &std);
    float scale = 1.0f / (255.0f * std), shift = -mean / std;
    for (size_t k = 0; k < (size_t)n * px; k++)
        x[k] = (float)images[k] * scale + shift;
    for (int first = 0, B = ddl_model_get_config(m)->batch; first < n; first += B) {
        int b = n - first < B ? n - first : B;
        memcpy(out + (size_t)first * out_sz, ddl_model_forward(m, x + (size_t)first * px, b, 0, NULL),
               (size_t)b * out_sz * sizeof(float));
    }
    free(x);
}

static void test_predict(const ddl_model_plugin *p, ddl_model_config mc, const char *path)
{
    ddl_model *trained = NULL;
    CHECK(save(p, mc, path, &trained) == DDL_OK);
    if (!trained)
        return;
    counting cnt = {0, 0};
    ddl_allocator a = {count_alloc, count_free, &cnt};
    ddl_predict_config pc = {.batch = 4, .plugin = NULL};
    ddl_predictor *pr = NULL;
    char err[DDL_ERR_BYTES] = "";
    CHECK(ddl_predictor_open(path, &pc, &a, &pr, err, sizeof err) == DDL_OK);
    if (!pr) {
        fprintf(stderr, "%s\n", err);
        ddl_model_destroy(trained);
        return;
    }
    const ddl_model *m = ddl_predictor_model(pr);
    int K, oh, ow, n = 10;
    ddl_model_output_shape(m, &K, &oh, &ow);
    size_t px = (size_t)mc.in_h * mc.in_w, S = (size_t)oh * ow, out_sz = (size_t)K * S;
    CHECK(strcmp(ddl_model_name(m), p->name) == 0 && ddl_model_get_config(m)->batch == 4);
    CHECK(ddl_predictor_info(pr)->step == 2);
    CHECK(ddl_model_crc(m) == ddl_model_crc(trained)); /* the weights, bit for bit */
    float *logits = calloc((size_t)n * out_sz, 4), *probs = calloc((size_t)n * out_sz, 4);
    float *again = calloc((size_t)n * out_sz, 4), *want = calloc((size_t)n * out_sz, 4);
    uint16_t *classes = calloc((size_t)n * S, sizeof *classes);
    long before = cnt.calls;
    CHECK(ddl_predictor_run(pr, img, n, 1, mc.in_h, mc.in_w, logits, probs, classes) == DDL_OK);
    /* the same images cut at multiples of the batch: the same bits */
    CHECK(ddl_predictor_run(pr, img, 8, 1, mc.in_h, mc.in_w, again, NULL, NULL) == DDL_OK);
    CHECK(ddl_predictor_run(pr, img + 8 * px, 2, 1, mc.in_h, mc.in_w, again + 8 * out_sz, NULL, NULL) == DDL_OK);
    CHECK(memcmp(logits, again, (size_t)n * out_sz * 4) == 0);
    CHECK(cnt.calls == before); /* nothing allocated per call */
    expect_forward(trained, img, n, px, want, out_sz);
    double worst = 0, sum_err = 0;
    int argmax_ok = 1;
    for (int i = 0; i < n; i++)
        for (size_t s = 0; s < S; s++) {
            double sum = 0;
            int best = 0;
            for (int c = 0; c < K; c++) {
                size_t at = (size_t)i * out_sz + (size_t)c * S + s;
                double d = logits[at] - want[at];
                worst = d * d > worst * worst ? (d < 0 ? -d : d) : worst;
                sum += probs[at];
                if (logits[at] > logits[(size_t)i * out_sz + (size_t)best * S + s])
                    best = c;
            }
            sum_err = (sum - 1) * (sum - 1) > sum_err * sum_err ? (sum > 1 ? sum - 1 : 1 - sum) : sum_err;
            argmax_ok &= classes[(size_t)i * S + s] == best;
        }
    CHECK_NEAR(worst, 0.0, 1e-4); /* the trainer's model ran batch 8 at once: rounding may differ */
    CHECK_NEAR(sum_err, 0.0, 1e-5);
    CHECK(argmax_ok);

    /* images of the wrong shape, and bad counts */
    CHECK(ddl_predictor_run(pr, img, 1, 1, mc.in_h + 4, mc.in_w, logits, NULL, NULL) == DDL_EINVAL);
    char want_msg[128];
    snprintf(want_msg, sizeof want_msg, "images of 1x%dx%d, model %s takes 1x%dx%d", mc.in_h + 4, mc.in_w, p->name,
             mc.in_h, mc.in_w);
    CHECK(strstr(ddl_predictor_error(pr), want_msg) != NULL);
    CHECK(ddl_predictor_run(pr, img, -1, 1, mc.in_h, mc.in_w, logits, NULL, NULL) == DDL_EINVAL);
    CHECK(ddl_predictor_run(pr, NULL, 3, 1, mc.in_h, mc.in_w, logits, NULL, NULL) == DDL_EINVAL);
    CHECK(ddl_predictor_run(pr, img, 0, 1, mc.in_h, mc.in_w, NULL, NULL, NULL) == DDL_OK);
    CHECK(ddl_predictor_error(pr)[0] == '\0');
    ddl_predictor_close(pr);
    free(logits), free(probs), free(again), free(want), free(classes);
    ddl_model_destroy(trained);
}

/* ---- bad files ---- */

static void expect_open(const char *path, const ddl_model_plugin *p, int code, const char *msg)
{
    ddl_predict_config pc = {.batch = 2, .plugin = p};
    ddl_predictor *pr = (ddl_predictor *)&pc; /* must come back NULL */
    char err[DDL_ERR_BYTES] = "";
    int rc = ddl_predictor_open(path, &pc, NULL, &pr, err, sizeof err);
    CHECK(rc == code);
    CHECK(pr == NULL);
    CHECK(strstr(err, path) != NULL); /* names the file */
    CHECK(strstr(err, msg) != NULL);
    if (rc != code || !strstr(err, msg))
        fprintf(stderr, "  %s: got %d \"%s\", expected %d \"%s\"\n", path, rc, err, code, msg);
    ddl_predictor_close(pr == (ddl_predictor *)&pc ? NULL : pr);
}

static void test_bad_files(const char *lenet_path, const char *unet_path)
{
    char p[300];
    snprintf(p, sizeof p, "%s/missing", dir);
    expect_open(p, NULL, DDL_EIO, "cannot open");
    snprintf(p, sizeof p, "%s/cut", dir);
    FILE *in = fopen(lenet_path, "rb"), *out = fopen(p, "wb");
    char buf[5000];
    size_t got = in ? fread(buf, 1, sizeof buf, in) : 0;
    if (out)
        fwrite(buf, 1, got, out), fclose(out);
    if (in)
        fclose(in);
    expect_open(p, NULL, DDL_ECORRUPT, "truncated");
    snprintf(p, sizeof p, "%s/text", dir);
    out = fopen(p, "wb");
    if (out)
        fputs("not a checkpoint, only some text that is long enough to have a header\n", out), fclose(out);
    expect_open(p, NULL, DDL_ECORRUPT, "not a ddl checkpoint");
    expect_open(lenet_path, ddl_model_unet(), DDL_EINVAL, "a checkpoint of model lenet, expected unet");
    expect_open(unet_path, ddl_model_lenet(), DDL_EINVAL, "a checkpoint of model unet, expected lenet");
    expect_open(dir, NULL, DDL_EIO, "directory");
    ddl_predict_config neg = {.batch = -1};
    ddl_predictor *pr = NULL;
    CHECK(ddl_predictor_open(lenet_path, &neg, NULL, &pr, NULL, 0) == DDL_EINVAL && !pr);
    CHECK(ddl_predictor_open(NULL, NULL, NULL, &pr, NULL, 0) == DDL_EINVAL && !pr);
}

/* A plugin the library does not have: the checkpoint names "tiny"; it opens only when given. */
static float *tw, *tb;
static int tiny_build(void *self, const ddl_model_config *cfg, ddl_model_build *b)
{
    int ws[2] = {10, 784}, bs[1] = {10};
    (void)self, (void)cfg;
    tw = ddl_build_param(b, "fc.weight", 2, ws, DDL_INIT_GLOROT, 784, 10, NULL);
    tb = ddl_build_param(b, "fc.bias", 1, bs, DDL_INIT_ZERO, 784, 10, NULL);
    ddl_build_output(b, 10, 1, 1);
    return DDL_OK;
}
static void tiny_forward(void *self, const float *x, int batch, int training, ddl_rng *rng, float *logits)
{
    (void)self, (void)training, (void)rng;
    ddl_dense_forward(batch, 784, 10, x, tw, tb, logits);
}
static void tiny_backward(void *self, const float *x, int batch, const float *dlogits, ddl_backward *pass)
{
    (void)pass; /* one layer: nothing to report before the end */
    (void)self, (void)x, (void)batch, (void)dlogits;
}
static const ddl_model_plugin tiny = {.version = DDL_MODEL_VERSION, .name = "tiny", .build = tiny_build,
                                      .forward = tiny_forward, .backward = tiny_backward};

/* a checkpoint of a run that diverged: refused by the predictor (so by --predict and by
 * ddl-serve's hot reload), the weight named */
static void test_diverged(void)
{
    char p[300], err[DDL_ERR_BYTES] = "";
    snprintf(p, sizeof p, "%s/diverged", dir);
    ddl_model_config mc = {.batch = 8, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10};
    static uint8_t images[16 * 784], labels[16];
    ddl_dataset d = {.n = 16, .c = 1, .h = 28, .w = 28, .th = 1, .tw = 1, .n_classes = 10, .images = images,
                     .targets = labels};
    ddl_model *m = NULL;
    ddl_trainer *t = NULL;
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = 8;
    CHECK(ddl_model_create(ddl_model_lenet(), &mc, NULL, &m, NULL, 0) == DDL_OK);
    CHECK(m && ddl_trainer_create(&tc, m, &d, NULL, &t, NULL, 0) == DDL_OK);
    if (!t)
        return;
    ddl_model_params(m)[7] = NAN;
    CHECK(ddl_trainer_save(t, p) == DDL_OK);
    ddl_predictor *pr = NULL;
    CHECK(ddl_predictor_open(p, NULL, NULL, &pr, err, sizeof err) == DDL_EINVAL && pr == NULL);
    CHECK(strstr(err, "weight conv1.weight[7] is nan: the run diverged") != NULL);
    ddl_model_params(m)[7] = 0.0f;
    ddl_model_params(m)[ddl_model_n_params(m) - 1] = INFINITY;
    CHECK(ddl_trainer_save(t, p) == DDL_OK);
    CHECK(ddl_predictor_open(p, NULL, NULL, &pr, err, sizeof err) == DDL_EINVAL && strstr(err, "fc3.bias[9] is inf"));
    ddl_trainer_destroy(t);
    ddl_model_destroy(m);
}

static void test_custom_model(void)
{
    char p[300], out[320], err[DDL_ERR_BYTES] = "";
    snprintf(p, sizeof p, "%s/tiny", dir);
    ddl_model_config mc = {.batch = 8, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10};
    CHECK(save(&tiny, mc, p, NULL) == DDL_OK);
    expect_open(p, NULL, DDL_EINVAL, "a checkpoint of model \"tiny\", which this ddl does not have");
    ddl_predict_config pc = {.batch = 3, .plugin = &tiny};
    ddl_predictor *pr = NULL;
    CHECK(ddl_predictor_open(p, &pc, NULL, &pr, err, sizeof err) == DDL_OK);
    ddl_predictor_close(pr);
    ddl_checkpoint *ck = NULL;
    CHECK(ddl_checkpoint_open(p, NULL, &ck, NULL, 0) == DDL_OK);
    snprintf(out, sizeof out, "%s/tiny.onnx", dir);
    CHECK(ddl_export(ck, out, NULL, err, sizeof err) == DDL_ENOTSUP);
    CHECK(strstr(err, "carries no layer graph: ONNX export needs one") != NULL && access(out, F_OK) != 0);
    snprintf(out, sizeof out, "%s/tiny.npz", dir);
    CHECK(ddl_export(ck, out, NULL, err, sizeof err) == DDL_OK && access(out, F_OK) == 0);
    ddl_checkpoint_close(ck);
}

/* test_alloc_failures: every allocation of open and of both exports fails once in turn: an
 * error with a message, never a crash or a leak (ASan's leak check). */
static void test_alloc_failures(const char *path)
{
    int opened_after = 0, exported_after = 0;
    char out[300];
    snprintf(out, sizeof out, "%s/fail.onnx", dir);
    for (long k = 1; k < 40 && (!opened_after || !exported_after); k++) {
        counting cnt = {0, k};
        ddl_allocator a = {count_alloc, count_free, &cnt};
        ddl_predictor *pr = NULL;
        char err[DDL_ERR_BYTES] = "";
        int rc = ddl_predictor_open(path, NULL, &a, &pr, err, sizeof err);
        CHECK(rc == DDL_OK || (rc != DDL_OK && !pr && err[0]));
        opened_after = opened_after ? opened_after : rc == DDL_OK ? (int)k : 0;
        ddl_predictor_close(pr);
        ddl_checkpoint *ck = NULL;
        if (ddl_checkpoint_open(path, NULL, &ck, NULL, 0) != DDL_OK)
            continue;
        cnt = (counting){0, k};
        rc = ddl_export(ck, out, &a, err, sizeof err);
        CHECK(rc == DDL_OK || rc == DDL_ENOMEM);
        exported_after = exported_after ? exported_after : rc == DDL_OK ? (int)k : 0;
        ddl_checkpoint_close(ck);
    }
    CHECK(opened_after > 1 && exported_after > 1);
}

/* ---- exports ---- */

static void test_exports(const char *path)
{
    ddl_checkpoint *ck = NULL;
    char out[300], err[DDL_ERR_BYTES];
    CHECK(ddl_checkpoint_open(path, NULL, &ck, NULL, 0) == DDL_OK);
    if (!ck)
        return;
    snprintf(out, sizeof out, "%s/m.onnx", dir);
    CHECK(ddl_export(ck, out, NULL, err, sizeof err) == DDL_OK);
    FILE *f = fopen(out, "rb");
    unsigned char head[2] = {0, 0};
    CHECK(f && fread(head, 1, 2, f) == 2 && head[0] == 0x08 && head[1] == 7); /* ir_version 7 comes first */
    if (f)
        fclose(f);
    snprintf(out, sizeof out, "%s/m.NPZ", dir);
    CHECK(ddl_export(ck, out, NULL, err, sizeof err) == DDL_OK && access(out, F_OK) == 0);
    snprintf(out, sizeof out, "%s/m.pt", dir);
    CHECK(ddl_export(ck, out, NULL, err, sizeof err) == DDL_ENOTSUP && access(out, F_OK) != 0);
    CHECK(strstr(err, "m.pt: unknown format \".pt\": export writes .npz (numpy) or .onnx (ONNX)") != NULL);
    snprintf(out, sizeof out, "%s/noext", dir);
    CHECK(ddl_export(ck, out, NULL, err, sizeof err) == DDL_ENOTSUP && strstr(err, "no extension") != NULL);
    snprintf(out, sizeof out, "%s/no/such/dir/m.onnx", dir);
    CHECK(ddl_export(ck, out, NULL, err, sizeof err) == DDL_EIO && strstr(err, "cannot create") != NULL);
    ddl_checkpoint_close(ck);
}

/* test_import_load: a checkpoint exported as ONNX, imported back and finished by
 * ddl_onnx_import_load: the import's weights in the model, the checkpoint's normalisation back
 * from the scaling the export put in front of the graph; a model the weights do not fit is
 * refused, named, and left as it was. */
static void test_import_load(const char *path)
{
    ddl_checkpoint *ck = NULL;
    char out[300], err[DDL_ERR_BYTES] = "";
    CHECK(ddl_checkpoint_open(path, NULL, &ck, NULL, 0) == DDL_OK);
    if (!ck)
        return;
    const ddl_checkpoint_info *in = ddl_checkpoint_get_info(ck);
    snprintf(out, sizeof out, "%s/load.onnx", dir);
    CHECK(ddl_export(ck, out, NULL, err, sizeof err) == DDL_OK);
    ddl_graph *g = NULL;
    ddl_onnx_import im;
    memset(&im, 0, sizeof im);
    ddl_model *m = NULL, *other = NULL;
    CHECK(ddl_graph_create(NULL, &g) == DDL_OK && ddl_graph_import_onnx(g, out, NULL, &im, err, sizeof err) == DDL_OK);
    ddl_model_config mc = {.batch = 2, .in_c = im.in_c, .in_h = im.in_h, .in_w = im.in_w, .n_classes = 2, .plugin_config = g};
    int c = 0, h, w;
    CHECK(ddl_graph_output_shape(g, &mc, &c, &h, &w) == DDL_OK && c == in->model_cfg.n_classes);
    mc.n_classes = c;
    CHECK(ddl_model_create(ddl_model_graph(), &mc, NULL, &m, err, sizeof err) == DDL_OK);
    if (m) {
        CHECK(ddl_onnx_import_load(&im, m, err, sizeof err) == DDL_OK);
        CHECK(ddl_model_n_params(m) == in->n_params &&
              memcmp(ddl_model_params(m), im.params, im.n_params * sizeof(float)) == 0);
        float mean, std;
        ddl_model_norm(m, &mean, &std);
        CHECK_NEAR(mean, in->mean, 1e-5 * fabs(in->mean) + 1e-6);
        CHECK_NEAR(std, in->std, 1e-5 * in->std);
    }
    ddl_model_config lc = {.batch = 2, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 3};
    CHECK(ddl_model_create(ddl_model_lenet(), &lc, NULL, &other, err, sizeof err) == DDL_OK);
    if (other) {
        ddl_model_params(other)[0] = 42.0f;
        CHECK(ddl_onnx_import_load(&im, other, err, sizeof err) == DDL_EINVAL);
        CHECK(strstr(err, "weights do not fit the model built from its graph") != NULL);
        CHECK(ddl_model_params(other)[0] == 42.0f);
    }
    CHECK(ddl_onnx_import_load(NULL, m, err, sizeof err) == DDL_EINVAL);
    ddl_model_destroy(other);
    ddl_model_destroy(m);
    ddl_onnx_import_free(&im, NULL);
    ddl_graph_destroy(g, NULL);
    ddl_checkpoint_close(ck);
}

static void test_metrics(void)
{
    ddl_eval_stats e;
    memset(&e, 0, sizeof e);
    /* 3 classes, truth rows: background 0 (8 right, 2 as class 1), class 1 (3 right, 1 as 0), class 2 (4 right) */
    int64_t cm[9] = {8, 2, 0, 1, 3, 0, 0, 0, 4};
    e.confusion = cm;
    ddl_eval_metrics(&e, 3);
    CHECK_NEAR(e.accuracy, 15.0 / 18.0, 1e-12);
    CHECK_NEAR(e.dice, 2.0 * 7 / (2.0 * 7 + 2 + 1), 1e-12); /* foreground: tp 7, fp 2, fn 1 */
    CHECK_NEAR(e.miou, (8.0 / 11 + 3.0 / 6 + 1.0) / 3, 1e-12);
}

/* ---- --reference: inputs and ddl's logits for tests/test_onnx.sh ---- */

static int write_file(const char *d, const char *name, const void *p, size_t n)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", d, name);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(p, 1, n, f) == n;
    return (f && fclose(f) == 0 && ok) ? 0 : -1;
}

static int reference(const char *ckpt, const char *data, int n, const char *out)
{
    char err[DDL_ERR_BYTES];
    ddl_predict_config pc = {.batch = 16};
    ddl_predictor *pr = NULL;
    ddl_dataset items = {0}, scenes = {0};
    int rc = ddl_predictor_open(ckpt, &pc, NULL, &pr, err, sizeof err);
    const ddl_model_config *mc = rc == DDL_OK ? ddl_model_get_config(ddl_predictor_model(pr)) : NULL;
    char idx[4096];
    snprintf(idx, sizeof idx, "%s/t10k-labels-idx1-ubyte.gz", data);
    int folder = access(idx, F_OK) != 0 && (idx[strlen(idx) - 3] = '\0', access(idx, F_OK) != 0);
    if (rc == DDL_OK && folder) { /* an image folder (CLASS/FILE), at the model's size */
        ddl_folder_config fc = {.channels = mc->in_c, .height = mc->in_h, .width = mc->in_w};
        rc = ddl_dataset_load_folder(data, &fc, NULL, &items, NULL, err, sizeof err);
    } else if (rc == DDL_OK) {
        rc = ddl_dataset_load_mnist(data, "t10k", NULL, &items, err, sizeof err);
    }
    const ddl_dataset *d = &items;
    if (rc == DDL_OK && mc->in_h != items.h) { /* a U-Net: scenes of its size made from the items */
        rc = ddl_dataset_make_scenes(&items, n, mc->in_h, 3, 99, NULL, &scenes, err, sizeof err);
        d = &scenes;
    }
    if (rc != DDL_OK) {
        fprintf(stderr, "test_infer --reference: %s\n", err);
        ddl_predictor_close(pr);
        ddl_dataset_free(&items);
        return 1;
    }
    int K, oh, ow;
    ddl_model_output_shape(ddl_predictor_model(pr), &K, &oh, &ow);
    size_t in_sz = (size_t)d->c * d->h * d->w, out_sz = (size_t)K * oh * ow;
    n = n < d->n ? n : d->n;
    float *pixels = malloc((size_t)n * in_sz * 4), *logits = malloc((size_t)n * out_sz * 4);
    for (size_t k = 0; k < (size_t)n * in_sz; k++)
        pixels[k] = d->images[k];
    rc = ddl_predictor_run(pr, d->images, n, d->c, d->h, d->w, logits, NULL, NULL);
    char shape[128];
    snprintf(shape, sizeof shape, "%d %d %d %d %d %d %d\n", n, d->c, d->h, d->w, K, oh, ow);
    if (rc == DDL_OK)
        rc = write_file(out, "pixels.f32", pixels, (size_t)n * in_sz * 4) ||
             write_file(out, "logits.f32", logits, (size_t)n * out_sz * 4) ||
             write_file(out, "shape.txt", shape, strlen(shape));
    free(pixels), free(logits);
    ddl_predictor_close(pr);
    ddl_dataset_free(&items);
    ddl_dataset_free(&scenes);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[1], "--reference") == 0)
        return reference(argv[2], argv[3], atoi(argv[4]), argv[5]);
    if (argc == 3 && strcmp(argv[1], "--onnx-cases") == 0)
        return onnx_run_cases(argv[2]);
    snprintf(dir, sizeof dir, "/tmp/ddl_test_infer_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char lenet_path[300], unet_path[300];
    snprintf(lenet_path, sizeof lenet_path, "%s/lenet", dir);
    snprintf(unet_path, sizeof unet_path, "%s/unet", dir);
    test_predict(ddl_model_lenet(), (ddl_model_config){.batch = 8, .in_c = 1, .in_h = 28, .in_w = 28,
                                                       .n_classes = 10, .dropout = 0.2f}, lenet_path);
    test_predict(ddl_model_unet(), (ddl_model_config){.batch = 8, .in_c = 1, .in_h = 16, .in_w = 16,
                                                      .n_classes = 4, .plugin_config = &(ddl_unet_config){.depth = 2, .width = 4}}, unet_path);
    test_bad_files(lenet_path, unet_path);
    test_diverged();
    test_custom_model();
    test_alloc_failures(unet_path);
    test_exports(lenet_path);
    test_exports(unet_path);
    test_import_load(lenet_path);
    test_import_load(unet_path);
    test_metrics();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return TEST_END();
}
