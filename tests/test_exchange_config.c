/* test_exchange_config.c - the gradient exchange is the trainer's to configure: ddl_train_config's
 * overlap and bucket_kb, which ddl_train_config_from_env reads from DDL_OVERLAP and DDL_BUCKET_KB
 * (leaving what the environment does not set); 0 (and -1) is no overlap, bucket_kb 0 PyTorch
 * DDP's 25 MiB; every choice gives the same weights, on 2 ranks over shm. Out-of-range values,
 * in the config or the environment, are refused with the reason. */
#include "ddl.h"
#include "check.h"
#include "ranks.h"
#include "train/impl.h" /* what the trainer resolved: overlap, buckets, the exchange thread */

enum { N = 256, BATCH = 32, STEPS = 6 };
static uint8_t images[N * 784], labels[N];

/* run: STEPS steps of LeNet on 2 ranks with the trainer's overlap and bucket_kb, then (from_env)
 * what the environment says over them; the weights' CRC, and what the trainer resolved in
 * *overlap, *bucket_bytes and *threaded. */
static uint32_t run(int rank, int world, int from_env, int tr_overlap, int tr_kb, int *overlap, size_t *bucket_bytes,
                    int *threaded)
{
    ddl_comm_config cfg = make_config(rank, world, 20000);
    ddl_comm *c = NULL;
    char err[DDL_ERR_BYTES] = "";
    uint32_t crc = 0;
    if (ddl_comm_create(&cfg, NULL, &c, err, sizeof err) != DDL_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, err);
        CHECK(0);
        return 0;
    }
    ddl_dataset d = {.n = N, .c = 1, .h = 28, .w = 28, .th = 1, .tw = 1, .n_classes = 10, .images = images,
                     .targets = labels};
    ddl_model_config mc = {.batch = BATCH / world, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10};
    ddl_model *m = NULL;
    ddl_trainer *t = NULL;
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = BATCH, tc.comm = c, tc.overlap = tr_overlap, tc.bucket_kb = tr_kb;
    CHECK(!from_env || ddl_train_config_from_env(&tc, err, sizeof err) == DDL_OK);
    if (ddl_model_create(ddl_model_lenet(), &mc, NULL, &m, err, sizeof err) == DDL_OK &&
        ddl_trainer_create(&tc, m, &d, NULL, &t, err, sizeof err) == DDL_OK) {
        *overlap = t->overlap, *bucket_bytes = t->bucket_bytes, *threaded = t->xch.threaded;
        int rc = DDL_OK;
        for (int s = 0; s < STEPS && rc == DDL_OK; s++)
            rc = ddl_trainer_step(t, NULL);
        CHECK(rc == DDL_OK);
        crc = ddl_crc32(0, ddl_model_params(m), ddl_model_n_params(m) * sizeof(float));
    } else {
        fprintf(stderr, "rank %d: %s\n", rank, err);
        CHECK(0);
    }
    ddl_trainer_destroy(t);
    ddl_model_destroy(m);
    ddl_comm_destroy(c);
    return crc;
}

static void rank_body(int rank, int world, void *arg)
{
    (void)arg;
    int ov, th;
    size_t bb;
    /* the trainer's settings */
    uint32_t a = run(rank, world, 0, 1, 8, &ov, &bb, &th);
    CHECK(ov == 1 && bb == 8192 && th == 1);
    /* the environment's, read into the config (main set DDL_OVERLAP=1 DDL_BUCKET_KB=8) */
    uint32_t b = run(rank, world, 1, 0, 0, &ov, &bb, &th);
    CHECK(ov == 1 && bb == 8192 && th == 1);
    /* overlap -1 (the older name of 0): none; the trainer's bucket size */
    uint32_t c = run(rank, world, 0, -1, 16, &ov, &bb, &th);
    CHECK(ov == 0 && bb == 16384 && th == 0);
    /* neither: no overlap, PyTorch DDP's 25 MiB */
    uint32_t e = run(rank, world, 0, 0, 0, &ov, &bb, &th);
    CHECK(ov == 0 && bb == (size_t)25600 << 10 && th == 0);
    CHECK(a != 0 && a == b && a == c && a == e); /* the same sums whichever way */
    report_value("crc", a);
}

int main(void)
{
    ddl_rng r;
    ddl_rng_seed(&r, 3);
    for (int i = 0; i < N; i++) {
        labels[i] = (uint8_t)ddl_rng_below(&r, 10);
        for (int p = 0; p < 784; p++)
            images[i * 784 + p] = (uint8_t)(p / 78 == labels[i] ? 200 : ddl_rng_below(&r, 60));
    }
    setenv("DDL_OVERLAP", "1", 1);
    setenv("DDL_BUCKET_KB", "8", 1);
    run_ranks("shm", 2, rank_body, NULL, 120.0, -1);
    CHECK(ranks_value_conflicts == 0 && ranks_n_values == 1);

    /* out of range: refused, saying what is taken */
    ddl_model_config mc = {.batch = 8, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10};
    ddl_dataset d = {.n = N, .c = 1, .h = 28, .w = 28, .th = 1, .tw = 1, .n_classes = 10, .images = images,
                     .targets = labels};
    ddl_model *m = NULL;
    ddl_trainer *t = NULL;
    char err[DDL_ERR_BYTES];
    CHECK(ddl_model_create(ddl_model_lenet(), &mc, NULL, &m, err, sizeof err) == DDL_OK);
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = 8, tc.overlap = 3;
    CHECK(ddl_trainer_create(&tc, m, &d, NULL, &t, err, sizeof err) == DDL_EINVAL && strstr(err, "overlap 3"));
    tc.overlap = 0, tc.bucket_kb = -1;
    CHECK(ddl_trainer_create(&tc, m, &d, NULL, &t, err, sizeof err) == DDL_EINVAL && strstr(err, "bucket_kb -1"));

    /* the environment: what it does not set stays; a bad value is refused, naming the variable */
    unsetenv("DDL_OVERLAP");
    tc.overlap = 2, tc.bucket_kb = 64;
    CHECK(ddl_train_config_from_env(&tc, err, sizeof err) == DDL_OK && tc.overlap == 2 && tc.bucket_kb == 8);
    unsetenv("DDL_BUCKET_KB");
    CHECK(ddl_train_config_from_env(&tc, err, sizeof err) == DDL_OK && tc.overlap == 2 && tc.bucket_kb == 8);
    setenv("DDL_OVERLAP", "3", 1);
    CHECK(ddl_train_config_from_env(&tc, err, sizeof err) == DDL_EINVAL && strstr(err, "DDL_OVERLAP=3") &&
          tc.overlap == 2);
    setenv("DDL_OVERLAP", "1x", 1);
    CHECK(ddl_train_config_from_env(&tc, err, sizeof err) == DDL_EINVAL && strstr(err, "DDL_OVERLAP=1x"));
    unsetenv("DDL_OVERLAP");
    setenv("DDL_BUCKET_KB", "-4", 1);
    CHECK(ddl_train_config_from_env(&tc, err, sizeof err) == DDL_EINVAL && strstr(err, "DDL_BUCKET_KB=-4") &&
          tc.bucket_kb == 8);
    unsetenv("DDL_BUCKET_KB");
    ddl_model_destroy(m);
    return TEST_END();
}
