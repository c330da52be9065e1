/* test_augment.c - flips and crops: a pure function of (seed, epoch, sample), applied exactly
 * (a mirror, a shift with black padding, masks moved with their images), and training with them
 * resumes bit-exactly and is the same on 1 and 2 threads. */
#include "check.h"
#include "ddl.h"
#include "data/impl.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void draws(void)
{
    int flips = 0, seen[9] = {0}, differ = 0;
    for (uint64_t s = 0; s < 4000; s++) {
        ddl__augment a, b, c;
        ddl__augment_draw(42, 3, s, DDL_AUGMENT_FLIP | DDL_AUGMENT_CROP, 4, &a);
        ddl__augment_draw(42, 3, s, DDL_AUGMENT_FLIP | DDL_AUGMENT_CROP, 4, &b);
        ddl__augment_draw(42, 4, s, DDL_AUGMENT_FLIP | DDL_AUGMENT_CROP, 4, &c);
        CHECK(memcmp(&a, &b, sizeof a) == 0);
        differ += memcmp(&a, &c, sizeof a) != 0;
        flips += a.flip;
        if (a.dx < -4 || a.dx > 4 || a.dy < -4 || a.dy > 4)
            CHECK(0);
        else
            seen[a.dx + 4]++;
    }
    CHECK(flips > 1800 && flips < 2200);
    for (int i = 0; i < 9; i++)
        CHECK(seen[i] > 300);
    CHECK(differ > 3500);
    ddl__augment a;
    ddl__augment_draw(42, 3, 7, DDL_AUGMENT_FLIP, 4, &a); /* no crop asked: no shift */
    CHECK(a.dx == 0 && a.dy == 0);
    ddl__augment_draw(42, 3, 7, 0, 4, &a);
    CHECK(a.flip == 0 && a.dx == 0 && a.dy == 0);
}

static void moves(void)
{
    uint8_t img[2 * 3 * 4], mask[3 * 4];
    uint16_t m2[12], m16[12], wide[12];
    float fimg[24], fout[24];
    for (int i = 0; i < 24; i++)
        img[i] = (uint8_t)(i + 1), fimg[i] = (float)(i + 1) / 8.0f;
    for (int i = 0; i < 12; i++)
        mask[i] = (uint8_t)(i % 3 + 1), wide[i] = (uint16_t)(mask[i] * 300);
    float out[24];
    ddl__augment flip = {1, 0, 0}, shift = {0, 1, -1};
    ddl__augment_image(&flip, img, NULL, 2, 3, 4, NULL, (const float[2]){1.0f, 0.0f}, out);
    for (int c = 0; c < 2; c++)
        for (int y = 0; y < 3; y++)
            for (int x = 0; x < 4; x++)
                CHECK(out[(c * 3 + y) * 4 + x] == img[(c * 3 + y) * 4 + 3 - x]);
    ddl__augment_image(&shift, img, NULL, 2, 3, 4, NULL, (const float[2]){2.0f, -5.0f}, out);
    /* output (y, x) takes source (y + 1, x - 1): the last row and the first column are padding */
    for (int c = 0; c < 2; c++)
        for (int y = 0; y < 3; y++)
            for (int x = 0; x < 4; x++) {
                int sy = y + 1, sx = x - 1;
                float want = sy > 2 || sx < 0 ? -5.0f : img[(c * 3 + sy) * 4 + sx] * 2.0f - 5.0f;
                CHECK(out[(c * 3 + y) * 4 + x] == want);
            }
    ddl__augment both = {1, 1, -1};
    ddl__augment_mask(&both, mask, NULL, 3, 4, m2);
    ddl__augment_image(&both, mask, NULL, 1, 3, 4, NULL, (const float[2]){1.0f, 0.0f}, out);
    for (int i = 0; i < 12; i++)
        CHECK((float)m2[i] == out[i]); /* the mask moves as a one-channel image does */
    ddl__augment_mask(&both, NULL, wide, 3, 4, m16); /* uint16 masks (more than 256 classes) the same way */
    for (int i = 0; i < 12; i++)
        CHECK(m16[i] == m2[i] * 300);
    /* float pixels move as bytes do: the same picture at 1/8 the scale */
    ddl__augment_image(&shift, img, NULL, 2, 3, 4, NULL, (const float[2]){1.0f, 0.0f}, out);
    ddl__augment_image(&shift, NULL, fimg, 2, 3, 4, NULL, (const float[2]){8.0f, 0.0f}, fout);
    for (int i = 0; i < 24; i++)
        CHECK(fout[i] == out[i]);
}

/* ---- training ---- */

enum { N = 96, C = 3, H = 10, W = 10 };
static uint8_t images[N * C * H * W], labels[N];

static uint32_t train(int augment, int threads, int steps, const char *save, const char *resume)
{
    char err[DDL_ERR_BYTES];
    ddl_graph *g = NULL;
    ddl_graph_create(NULL, &g);
    ddl_graph_parse(g, "input\nconv c 6 3 pad=1\nrelu\nmaxpool 2\ndense fc classes\n", err, sizeof err);
    ddl_dataset d = {.n = N, .c = C, .h = H, .w = W, .th = 1, .tw = 1, .n_classes = 4, .images = images,
                     .targets = labels};
    ddl_model_config mc = {.batch = 16, .in_c = C, .in_h = H, .in_w = W, .n_classes = 4, .plugin_config = g};
    ddl_model *m = NULL;
    ddl_trainer *t = NULL;
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = 16;
    tc.augment = augment;
    tc.augment_pad = 2;
    ddl_set_threads(threads);
    uint32_t crc = 0;
    if (ddl_model_create(ddl_model_graph(), &mc, NULL, &m, err, sizeof err) == DDL_OK &&
        ddl_trainer_create(&tc, m, &d, NULL, &t, err, sizeof err) == DDL_OK) {
        if (resume)
            CHECK(ddl_trainer_resume(t, resume, 0, NULL) == DDL_OK);
        for (int i = 0; i < steps; i++)
            CHECK(ddl_trainer_step(t, NULL) == DDL_OK);
        if (save)
            CHECK(ddl_trainer_save(t, save) == DDL_OK);
        crc = ddl_model_crc(m);
    } else {
        fprintf(stderr, "train: %s\n", err);
        CHECK(0);
    }
    ddl_trainer_destroy(t);
    ddl_model_destroy(m);
    ddl_graph_destroy(g, NULL);
    ddl_set_threads(1);
    return crc;
}

static void training(void)
{
    ddl_rng r;
    ddl_rng_seed(&r, 1);
    for (int i = 0; i < N; i++)
        labels[i] = (uint8_t)(i % 4);
    for (size_t i = 0; i < sizeof images; i++)
        images[i] = (uint8_t)ddl_rng_below(&r, 256);
    int all = DDL_AUGMENT_FLIP | DDL_AUGMENT_CROP;
    char path[64];
    snprintf(path, sizeof path, "/tmp/ddl-test-augment-%d.ckpt", (int)getpid());
    uint32_t plain = train(0, 1, 14, NULL, NULL), aug = train(all, 1, 14, NULL, NULL);
    CHECK(plain != aug);
    CHECK(train(DDL_AUGMENT_FLIP, 1, 14, NULL, NULL) != aug);
    CHECK(train(all, 2, 14, NULL, NULL) == aug); /* threads change no bit */
    train(all, 1, 8, path, NULL);                  /* 8 steps: into the second epoch of 6 */
    CHECK(train(all, 1, 6, NULL, path) == aug);    /* resumed: the same samples, flipped alike */
    unlink(path);
    /* a bad configuration is refused */
    char err[DDL_ERR_BYTES] = "";
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.augment = 8;
    ddl_model_config mc = {.batch = 64, .in_c = C, .in_h = H, .in_w = W, .n_classes = 4};
    ddl_graph *g = NULL;
    ddl_graph_create(NULL, &g);
    ddl_graph_preset(g, "cnn:2", NULL, 0);
    mc.plugin_config = g;
    ddl_model *m = NULL;
    ddl_trainer *t = NULL;
    ddl_dataset d = {.n = N, .c = C, .h = H, .w = W, .th = 1, .tw = 1, .n_classes = 4, .images = images,
                     .targets = labels};
    CHECK(ddl_model_create(ddl_model_graph(), &mc, NULL, &m, err, sizeof err) == DDL_OK);
    CHECK(ddl_trainer_create(&tc, m, &d, NULL, &t, err, sizeof err) == DDL_EINVAL && strstr(err, "augment 0x8"));
    ddl_model_destroy(m);
    ddl_graph_destroy(g, NULL);
}

int main(void)
{
    draws();
    moves();
    training();
    return TEST_END();
}
