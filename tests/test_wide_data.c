/* test_wide_data.c - data past bytes: more than 256 classes (uint16 targets) and float pixels,
 * through the trainer, the validation split, the decoded cache and the folder loader.
 * - 1,000 classes train: each image lights the pixel of its class (plus noise); a dense layer
 *   learns it to >= 0.95 accuracy on held-out images, and the confusion matrix is 1000 x 1000.
 * - the same bytes given as uint16 targets, or as float pixels (byte / 255), train as the byte
 *   set does: uint16 targets to the same bits, floats to the same loss within rounding.
 * - split, cache and folder keep targets16 and fimages as they were. */
#include "ddl.h"
#include "tests/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char err[DDL_ERR_BYTES];

enum { SIDE = 32, PX = SIDE * SIDE, K = 1000 };

/* lit: n images of one channel, SIDE x SIDE; image i is class (i * 7 + seed) % K: its pixel
 * lit at 200-255, the others noise below 30. */
static void lit(int n, int seed, uint8_t *img, uint16_t *lab)
{
    ddl_rng r;
    ddl_rng_seed(&r, (uint64_t)seed);
    for (int i = 0; i < n; i++) {
        int k = (i * 7 + seed) % K;
        lab[i] = (uint16_t)k;
        for (int p = 0; p < PX; p++)
            img[(size_t)i * PX + p] = (uint8_t)(p == k ? 200 + ddl_rng_below(&r, 56) : ddl_rng_below(&r, 30));
    }
}

/* dense_model: flatten -> dense(classes), for one-channel SIDE x SIDE images. */
static ddl_model *dense_model(int classes, int batch)
{
    ddl_graph *g = NULL;
    ddl_model *m = NULL;
    if (ddl_graph_create(NULL, &g) != DDL_OK)
        return NULL;
    int x = ddl_graph_input(g, 1, SIDE, SIDE);
    ddl_graph_output(g, ddl_graph_dense(g, ddl_graph_flatten(g, x), "fc", DDL_CLASSES), DDL_HEAD_XENT);
    ddl_model_config mc = {.batch = batch, .in_c = 1, .in_h = SIDE, .in_w = SIDE, .n_classes = classes, .plugin_config = g};
    if (ddl_model_create(ddl_model_graph(), &mc, NULL, &m, err, sizeof err) != DDL_OK)
        fprintf(stderr, "  model: %s\n", err);
    ddl_graph_destroy(g, NULL);
    return m;
}

/* train: a few epochs of d; the final weights' CRC, the last epoch's loss and test accuracy. */
static uint32_t train(const ddl_dataset *d, const ddl_dataset *test, int classes, int epochs, double *loss,
                      double *accuracy, int64_t *confusion_sum, const char *save)
{
    ddl_model *m = dense_model(classes, 50);
    ddl_trainer *t = NULL;
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = 50;
    tc.epochs = epochs;
    tc.optim.lr = 0.1f;
    tc.optim.momentum = 0.9f;
    uint32_t crc = 0;
    ddl_model_set_norm(m, 0.15f, 0.2f);
    if (m && ddl_trainer_create(&tc, m, d, NULL, &t, err, sizeof err) == DDL_OK) {
        ddl_epoch_stats es = {0};
        for (int e = 0; e < epochs; e++)
            CHECK(ddl_trainer_epoch(t, &es) == DDL_OK);
        *loss = es.loss;
        ddl_eval_stats ev;
        CHECK(ddl_trainer_evaluate(t, test, &ev) == DDL_OK);
        *accuracy = ev.accuracy;
        *confusion_sum = 0;
        for (size_t i = 0; i < (size_t)classes * classes; i++)
            *confusion_sum += ev.confusion[i];
        crc = ddl_crc32(0, ddl_model_params(m), ddl_model_n_params(m) * sizeof(float));
        CHECK(!save || ddl_trainer_save(t, save) == DDL_OK);
    } else
        fprintf(stderr, "  trainer: %s\n", err);
    ddl_trainer_destroy(t);
    ddl_model_destroy(m);
    return crc;
}

static void thousand_classes(void)
{
    enum { N = 4000, NT = 1000 };
    static uint8_t img[N * PX], timg[NT * PX];
    static uint16_t lab[N], tlab[NT];
    lit(N, 1, img, lab);
    lit(NT, 3, timg, tlab);
    ddl_dataset d = {.n = N, .c = 1, .h = SIDE, .w = SIDE, .th = 1, .tw = 1, .n_classes = K, .images = img,
                     .targets16 = lab};
    ddl_dataset test = d;
    test.n = NT, test.images = timg, test.targets16 = tlab;
    double loss, acc;
    int64_t total;
    CHECK(train(&d, &test, K, 10, &loss, &acc, &total, NULL) != 0);
    printf("1000 classes: loss %.4f, test accuracy %.4f\n", loss, acc);
    CHECK(acc >= 0.95);
    CHECK(total == NT); /* every test image in the 1000 x 1000 confusion matrix */

    /* a model of more than DDL_MAX_CLASSES classes is refused, naming the limit */
    ddl_model *m = dense_model(DDL_MAX_CLASSES + 1, 8);
    CHECK(m == NULL && strstr(err, "2 to 1024"));
    ddl_model_destroy(m);
}

/* ---- the same data in other forms trains the same ---- */

static void same_as_bytes(void)
{
    enum { N = 600, C = 200 };
    static uint8_t img[N * PX], lab8[N];
    static uint16_t lab[N];
    static float fimg[N * PX];
    lit(N, 5, img, lab);
    for (int i = 0; i < N; i++)
        lab[i] = (uint16_t)(lab[i] % C), lab8[i] = (uint8_t)lab[i];
    for (size_t i = 0; i < (size_t)N * PX; i++)
        fimg[i] = img[i] / 255.0f;
    ddl_dataset bytes = {.n = N, .c = 1, .h = SIDE, .w = SIDE, .th = 1, .tw = 1, .n_classes = C, .images = img,
                         .targets = lab8};
    ddl_dataset wide = bytes, floats = bytes;
    wide.targets = NULL, wide.targets16 = lab;
    floats.images = NULL, floats.fimages = fimg;
    double l1, l2, l3, a1, a2, a3;
    int64_t s;
    char path[128];
    snprintf(path, sizeof path, "/tmp/ddl-test-wide-%d.ckpt", (int)getpid());
    uint32_t c1 = train(&bytes, &bytes, C, 2, &l1, &a1, &s, NULL), c2 = train(&wide, &wide, C, 2, &l2, &a2, &s, NULL);
    (void)train(&floats, &floats, C, 2, &l3, &a3, &s, path);
    CHECK(c1 != 0 && c1 == c2); /* uint16 targets: the same bits */
    CHECK(fabs(l1 - l3) <= 1e-4 * fabs(l1) && fabs(a1 - a3) <= 0.01); /* floats: within rounding */
    printf("bytes: loss %.6f acc %.4f; uint16 targets: %.6f; float pixels: %.6f acc %.4f\n", l1, a1, l2, l3, a3);

    /* the model trained on floats predicts floats (ddl_predictor_run_float) as bytes / 255 */
    ddl_predictor *p = NULL;
    CHECK(ddl_predictor_open(path, NULL, NULL, &p, err, sizeof err) == DDL_OK);
    static float lb[8 * C], lf[8 * C];
    uint16_t kb[8], kf[8];
    CHECK(p && ddl_predictor_run(p, img, 8, 1, SIDE, SIDE, lb, NULL, kb) == DDL_OK &&
          ddl_predictor_run_float(p, fimg, 8, 1, SIDE, SIDE, lf, NULL, kf) == DDL_OK);
    int close = memcmp(kb, kf, sizeof kb) == 0;
    for (int i = 0; i < 8 * C; i++)
        close &= fabsf(lb[i] - lf[i]) <= 1e-4f * (1.0f + fabsf(lb[i]));
    CHECK(close);
    ddl_predictor_close(p);
    unlink(path);

    /* both of a pair set: refused */
    ddl_dataset both = bytes;
    both.fimages = fimg;
    ddl_model *m = dense_model(C, 50);
    ddl_trainer *t = NULL;
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = 50;
    CHECK(ddl_trainer_create(&tc, m, &both, NULL, &t, err, sizeof err) == DDL_EINVAL && strstr(err, "set one of each"));
    ddl_model_destroy(m);

    /* per-channel statistics of floats are those of the bytes / 255 */
    float mb, sb, mf, sf;
    ddl_dataset_stats(&bytes, &mb, &sb);
    ddl_dataset_stats_channels(&floats, &mf, &sf);
    CHECK(fabsf(mb - mf) < 1e-5f && fabsf(sb - sf) < 1e-5f);
}

/* ---- split, cache and folder keep them ---- */

static void split_and_cache(void)
{
    enum { N = 300 };
    static uint8_t img[N * PX];
    static uint16_t lab[N];
    static float fimg[N * PX];
    lit(N, 9, img, lab);
    for (size_t i = 0; i < (size_t)N * PX; i++)
        fimg[i] = (float)img[i] - 100.0f; /* pre-normalised: negative values too */
    ddl_dataset d = {.n = N, .c = 1, .h = SIDE, .w = SIDE, .th = 1, .tw = 1, .n_classes = K, .fimages = fimg,
                     .targets16 = lab};
    ddl_dataset tr, va;
    CHECK(ddl_dataset_split(&d, 0.1, 7, NULL, &tr, &va, err, sizeof err) == DDL_OK);
    CHECK(tr.n + va.n == N && tr.fimages && va.targets16 && !tr.images && !va.targets);
    /* every sample of either part is one of d's, image and label together */
    int found = 0;
    for (int i = 0; i < va.n; i++)
        for (int j = 0; j < N; j++)
            if (memcmp(va.fimages + (size_t)i * PX, fimg + (size_t)j * PX, PX * sizeof(float)) == 0) {
                found += va.targets16[i] == lab[j];
                break;
            }
    CHECK(found == va.n);
    ddl_dataset_free(&tr), ddl_dataset_free(&va);

    /* the cache: byte images with uint16 targets round-trip (floats are refused: they need no decoding) */
    char path[128];
    snprintf(path, sizeof path, "/tmp/ddl-test-wide-%d.cache", (int)getpid());
    CHECK(ddl_dataset_save_cache(&d, "k", path, err, sizeof err) == DDL_EINVAL && strstr(err, "byte images"));
    d.images = img, d.fimages = NULL;
    CHECK(ddl_dataset_save_cache(&d, "k", path, err, sizeof err) == DDL_OK);
    ddl_dataset back;
    CHECK(ddl_dataset_load_cache(path, "k", NULL, &back, err, sizeof err) == DDL_OK);
    CHECK(back.n == N && back.n_classes == K && back.targets16 && !back.targets &&
          memcmp(back.targets16, lab, sizeof lab) == 0 && memcmp(back.images, img, sizeof img) == 0);
    ddl_dataset_free(&back);
    /* 200 classes in uint16: stored as bytes, read back as bytes */
    for (int i = 0; i < N; i++)
        lab[i] = (uint16_t)(lab[i] % 200);
    d.n_classes = 200;
    CHECK(ddl_dataset_save_cache(&d, "k", path, err, sizeof err) == DDL_OK);
    CHECK(ddl_dataset_load_cache(path, "k", NULL, &back, err, sizeof err) == DDL_OK);
    int same = back.targets != NULL;
    for (int i = 0; same && i < N; i++)
        same = back.targets[i] == lab[i];
    CHECK(same);
    ddl_dataset_free(&back);
    unlink(path);
}

/* folder_of_300: 300 class folders of one 4x4 PGM each load with uint16 labels in name order. */
static void folder_of_300(void)
{
    char dir[128], sub[256], file[300];
    snprintf(dir, sizeof dir, "/tmp/ddl-test-wide-%d", (int)getpid());
    mkdir(dir, 0700);
    for (int c = 0; c < 300; c++) {
        snprintf(sub, sizeof sub, "%s/class%03d", dir, c);
        mkdir(sub, 0700);
        snprintf(file, sizeof file, "%s/a.pgm", sub);
        FILE *f = fopen(file, "wb");
        if (f) {
            fprintf(f, "P5 4 4 255\n");
            for (int p = 0; p < 16; p++)
                fputc(c % 256, f);
            fclose(f);
        }
    }
    ddl_folder_config fc = {.channels = 1, .height = 4, .width = 4};
    ddl_dataset d;
    int rc = ddl_dataset_load_folder(dir, &fc, NULL, &d, NULL, err, sizeof err);
    CHECK(rc == DDL_OK);
    if (rc == DDL_OK) {
        CHECK(d.n == 300 && d.n_classes == 300 && d.targets16 && !d.targets);
        int ok = 1;
        for (int i = 0; ok && i < 300; i++)
            ok = d.targets16[i] == i && d.images[(size_t)i * 16] == i % 256 && strcmp(d.class_names[i] + 5, "") != 0;
        CHECK(ok && strcmp(d.class_names[299], "class299") == 0);
        ddl_dataset_free(&d);
    } else
        fprintf(stderr, "  folder: %s\n", err);
    for (int c = 0; c < 300; c++) {
        snprintf(file, sizeof file, "%s/class%03d/a.pgm", dir, c);
        unlink(file);
        snprintf(sub, sizeof sub, "%s/class%03d", dir, c);
        rmdir(sub);
    }
    rmdir(dir);
}

int main(void)
{
    thousand_classes();
    same_as_bytes();
    split_and_cache();
    folder_of_300();
    return TEST_END();
}
