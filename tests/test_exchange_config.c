/* test_exchange_config.c - the gradient exchange is the trainer's to configure: ddl_train_config's
 * overlap and bucket_kb win over the comm's (DDL_OVERLAP, DDL_BUCKET_KB), 0 takes the comm's and
 * overlap -1 turns it off whatever the comm says; every choice gives the same weights, on 2 ranks
 * over shm. Out-of-range values are refused with the reason. */
#include "ddl.h"
#include "check.h"
#include "ranks.h"
#include "train/impl.h" /* what the trainer resolved: overlap, buckets, the exchange thread */

enum { N = 256, BATCH = 32, STEPS = 6 };
static uint8_t images[N * 784], labels[N];

/* run: STEPS steps of LeNet on 2 ranks with the comm's overlap and bucket_kb and the trainer's;
 * the weights' CRC, and what the trainer resolved in *overlap, *bucket_bytes and *threaded. */
static uint32_t run(int rank, int world, int comm_overlap, int comm_kb, int tr_overlap, int tr_kb, int *overlap,
                    size_t *bucket_bytes, int *threaded)
{
    ddl_comm_config cfg = make_config(rank, world, 20000);
    cfg.overlap = comm_overlap, cfg.bucket_kb = comm_kb;
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
    /* the trainer's settings over a comm that says nothing */
    uint32_t a = run(rank, world, 0, 0, 1, 8, &ov, &bb, &th);
    CHECK(ov == 1 && bb == 8192 && th == 1);
    /* the comm's (as DDL_OVERLAP=1 DDL_BUCKET_KB=8 set them) when the trainer's are 0 */
    uint32_t b = run(rank, world, 1, 8, 0, 0, &ov, &bb, &th);
    CHECK(ov == 1 && bb == 8192 && th == 1);
    /* overlap -1: none, whatever the comm says; the trainer's bucket size wins */
    uint32_t c = run(rank, world, 1, 8, -1, 16, &ov, &bb, &th);
    CHECK(ov == 0 && bb == 16384 && th == 0);
    /* neither: no overlap, PyTorch DDP's 25 MiB */
    uint32_t e = run(rank, world, 0, 0, 0, 0, &ov, &bb, &th);
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
    ddl_model_destroy(m);
    return TEST_END();
}
