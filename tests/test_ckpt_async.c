/* test_ckpt_async.c - checkpoints written off the training thread (ddl_trainer_save_background):
 * the file is the one ddl_trainer_save writes at the same step, byte for byte (so a resume from
 * it is exact); two saves in a row wait for each other rather than pile up; a write that fails is
 * returned by the next call, named; ddl_trainer_save after a background save leaves its own file;
 * and the time a U-Net step is blocked by a save (the state encoded, not written): at most 5 ms,
 * where a whole save (fsync included) takes longer. */
#define _POSIX_C_SOURCE 200809L
#include "ddl.h"
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N 32
#define HW 64

static uint8_t img[N * HW * HW], lab[N * HW * HW];
static char dir[256];

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static unsigned char *slurp(const char *p, size_t *n)
{
    FILE *f = fopen(p, "rb");
    unsigned char *b = NULL;
    *n = 0;
    if (f && fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        rewind(f);
        b = len > 0 ? malloc((size_t)len) : NULL;
        if (b && fread(b, 1, (size_t)len, f) == (size_t)len)
            *n = (size_t)len;
    }
    if (f)
        fclose(f);
    return b;
}

static int same_file(const char *a, const char *b)
{
    size_t na, nb;
    unsigned char *x = slurp(a, &na), *y = slurp(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x), free(y);
    return same;
}

/* a U-Net (the unet example's defaults: depth 3, width 8, 11 classes) and its trainer, Adam */
static int open_unet(ddl_model **m, ddl_trainer **t, ddl_dataset *d)
{
    ddl_rng r;
    ddl_rng_seed(&r, 3);
    for (size_t i = 0; i < sizeof img; i++)
        img[i] = (uint8_t)ddl_rng_below(&r, 256), lab[i] = (uint8_t)(img[i] / 24);
    *d = (ddl_dataset){.n = N, .c = 1, .h = HW, .w = HW, .th = HW, .tw = HW, .n_classes = 11, .images = img,
                       .targets = lab};
    ddl_model_config mc = {.batch = 8, .in_c = 1, .in_h = HW, .in_w = HW, .n_classes = 11,
                           .plugin_config = &(ddl_unet_config){.depth = 3, .width = 8}};
    if (ddl_model_create(ddl_model_unet(), &mc, NULL, m, NULL, 0) != DDL_OK)
        return -1;
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = 8;
    tc.optim.kind = DDL_OPTIM_ADAM;
    tc.optim.lr = 1e-3f;
    return ddl_trainer_create(&tc, *m, d, NULL, t, NULL, 0);
}

static double median5(double *v)
{
    for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 5; j++)
            if (v[j] < v[i]) {
                double s = v[i];
                v[i] = v[j], v[j] = s;
            }
    return v[2];
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/ddl-test-ckasync-%d", (int)getpid());
    char cmd[300], a[300], b[300], bad[300];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    CHECK(system(cmd) == 0);
    snprintf(a, sizeof a, "%s/bg.ckpt", dir);
    snprintf(b, sizeof b, "%s/sync.ckpt", dir);
    snprintf(bad, sizeof bad, "%s/no-such-dir/x.ckpt", dir);
    ddl_model *m = NULL;
    ddl_trainer *t = NULL;
    ddl_dataset d;
    CHECK(open_unet(&m, &t, &d) == 0);
    if (!t)
        return TEST_END();
    CHECK(ddl_trainer_step(t, NULL) == DDL_OK);

    /* the same bytes as a save at once, at the same step */
    CHECK(ddl_trainer_save_background(t, a) == DDL_OK);
    CHECK(ddl_trainer_save_wait(t) == DDL_OK);
    CHECK(ddl_trainer_save_pending(t) == 0);
    CHECK(ddl_trainer_save(t, b) == DDL_OK);
    CHECK(same_file(a, b));

    /* two in a row: the second waits for the first; each file is its step's */
    CHECK(ddl_trainer_step(t, NULL) == DDL_OK);
    CHECK(ddl_trainer_save_background(t, a) == DDL_OK);
    CHECK(ddl_trainer_save_background(t, b) == DDL_OK);
    CHECK(ddl_trainer_save_wait(t) == DDL_OK);
    CHECK(same_file(a, b));
    ddl_checkpoint *ck = NULL;
    CHECK(ddl_checkpoint_open(a, NULL, &ck, NULL, 0) == DDL_OK && ck && ddl_checkpoint_get_info(ck)->step == 2);
    ddl_checkpoint_close(ck);

    /* a write that fails: said by the next call, with the path; then saves work again */
    CHECK(ddl_trainer_save_background(t, bad) == DDL_OK);
    int rc = ddl_trainer_save_wait(t);
    CHECK(rc == DDL_EIO);
    CHECK(strstr(ddl_trainer_error(t), "no-such-dir") != NULL);
    if (rc != DDL_EIO)
        fprintf(stderr, "failed write: %d: %s\n", rc, ddl_trainer_error(t));
    CHECK(ddl_trainer_save_background(t, bad) == DDL_OK);
    CHECK(ddl_trainer_save_background(t, a) == DDL_EIO); /* the failure, named, and this save not made */
    CHECK(ddl_trainer_save_background(t, a) == DDL_OK);
    CHECK(ddl_trainer_save(t, b) == DDL_OK); /* waits for the write of a first */
    CHECK(same_file(a, b));

    /* what a step is blocked for: background (the state encoded) against a whole save */
    double bg[5], sync[5];
    for (int i = 0; i < 5; i++) {
        CHECK(ddl_trainer_step(t, NULL) == DDL_OK);
        CHECK(ddl_trainer_save_wait(t) == DDL_OK); /* the previous write done: only this save is timed */
        double t0 = now_s();
        CHECK(ddl_trainer_save_background(t, a) == DDL_OK);
        double t1 = now_s();
        CHECK(ddl_trainer_save_wait(t) == DDL_OK);
        double t2 = now_s();
        CHECK(ddl_trainer_save(t, b) == DDL_OK);
        double t3 = now_s();
        bg[i] = t1 - t0, sync[i] = t3 - t2;
    }
    double mb = median5(bg) * 1e3, ms = median5(sync) * 1e3;
    printf("U-Net (depth 3, width 8, Adam): a step blocked %.2f ms by a background save, %.2f ms by a save at once "
           "(medians of 5)\n", mb, ms);
    CHECK(mb <= 5.0);
    CHECK(mb < ms);
    ddl_trainer_destroy(t);
    ddl_model_destroy(m);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    return TEST_END();
}
