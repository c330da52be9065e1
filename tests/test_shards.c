/* test_shards.c - ddl_comm_allreduce_shards: V = 4 shards' vectors summed in the order an
 * all-reduce of 4 ranks adds them (the tree of halving.c), whoever holds which: 1 rank holding
 * all 4, 2 ranks (2 + 2, 1 + 3), 3 ranks (2 + 1 + 1) and 4 ranks give the same bits, over shm and
 * tcp, equal to ddl_comm_allreduce on 4 tcp ranks each holding one; integers sum exactly; blocks
 * that do not tile the shards are refused on every rank. Totals of 8 (the tree) and 6 (the ring)
 * dealt over 3 ranks give the bits of one process and of ddl_comm_allreduce on 8 and 6 ranks. And
 * training with ddl_train_config.shards = 4 (LeNet with dropout, two epochs, a short last batch)
 * gives the same weights on 1 rank, 2 ranks (shm) and 4 ranks (tcp). */
#include "check.h"
#include "ranks.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define V 4
#define COUNT 100003 /* above 64 KiB: the ring, in more than one piece per segment */

/* noisy: shard k's element i, so that sums depend on their order */
static float noisy(int k, size_t i)
{
    uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull + (uint64_t)(k + 1) * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    return (float)(x >> 40) / 16777216.0f * 2.0f - 1.0f;
}

/* a dealing: blocks[world - 1][rank] shards for each rank of a world of 1 to 4 */
static const int blocks[5][4][4] = {
    {{0}}, {{4}}, {{2, 2}, {1, 3}}, {{2, 1, 1}}, {{1, 1, 1, 1}},
};

typedef struct arg {
    int variant; /* which dealing of this world */
    int bad;     /* 1: rank 0 claims one shard too many */
} arg;

static void rank_body(int rank, int world, void *p)
{
    const arg *a = p;
    ddl_comm_config cfg = make_config(rank, world, 20000);
    ddl_comm *c = ranks_open(&cfg);
    if (!c)
        return;
    const int *b = blocks[world][a->variant];
    int first = 0;
    for (int r = 0; r < rank; r++)
        first += b[r];
    int n = b[rank] + (a->bad && rank == 0);
    float *bufs[V];
    for (int i = 0; i < n && i < V; i++) {
        bufs[i] = malloc(COUNT * sizeof(float));
        for (size_t e = 0; bufs[i] && e < COUNT; e++)
            bufs[i][e] = noisy(first + i, e);
    }
    int st = ddl_comm_allreduce_shards(c, bufs, first, n, V, COUNT);
    if (a->bad) {
        CHECK(st == DDL_EINVAL && strstr(ddl_comm_error(c), "do not tile"));
    } else {
        CHECK(st == DDL_OK);
        if (st != DDL_OK)
            fprintf(stderr, "rank %d of %d: %s\n", rank, world, ddl_comm_error(c));
        int same = 1;
        for (int i = 1; i < n; i++)
            same &= memcmp(bufs[i], bufs[0], COUNT * sizeof(float)) == 0;
        CHECK(same);
        report_value("sum", ddl_crc32(0, bufs[0], COUNT * sizeof(float)));
        /* integers: exact */
        for (int i = 0; i < n; i++)
            for (size_t e = 0; e < COUNT; e++)
                bufs[i][e] = (float)((int)((e * 7 + (size_t)(first + i) * 13) % 101) - 50);
        CHECK(ddl_comm_allreduce_shards(c, bufs, first, n, V, COUNT) == DDL_OK);
        size_t wrong = 0;
        for (size_t e = 0; e < COUNT; e++) {
            float want = 0.0f;
            for (int k = 0; k < V; k++)
                want += (float)((int)((e * 7 + (size_t)k * 13) % 101) - 50);
            wrong += bufs[n - 1][e] != want;
        }
        CHECK(wrong == 0);
    }
    for (int i = 0; i < n && i < V; i++)
        free(bufs[i]);
    ddl_comm_destroy(c);
}

/* plain: ddl_comm_allreduce on 4 (8, 6) ranks, rank k holding shard k */
static void rank_plain(int rank, int world, void *p)
{
    const char *key = p ? p : "sum";
    ddl_comm_config cfg = make_config(rank, world, 20000);
    ddl_comm *c = ranks_open(&cfg);
    if (!c)
        return;
    float *buf = malloc(COUNT * sizeof(float));
    for (size_t e = 0; buf && e < COUNT; e++)
        buf[e] = noisy(rank, e);
    CHECK(buf && ddl_comm_allreduce(c, buf, COUNT, DDL_FLOAT32, DDL_SUM) == DDL_OK);
    if (buf)
        report_value(key, ddl_crc32(0, buf, COUNT * sizeof(float)));
    free(buf);
    ddl_comm_destroy(c);
}

/* ---- other totals: 8 (the tree: a rank's pairs at one level reach two other ranks) and 6 (the
 * ring), dealt 3 + 3 + 2 and 2 + 2 + 2 over 3 ranks, against one process holding them all and
 * against ddl_comm_allreduce on 8 and 6 ranks (rank_plain) ---- */

static const int other_total[2] = {8, 6}, other_blocks[2][3] = {{3, 3, 2}, {2, 2, 2}};

/* other_sum: the CRC of the sum of `total` noisy shards, [first, first + n) held here (c NULL: all) */
static uint32_t other_sum(ddl_comm *c, int total, int first, int n)
{
    float *bufs[8];
    for (int i = 0; i < n; i++) {
        bufs[i] = malloc(COUNT * sizeof(float));
        for (size_t e = 0; bufs[i] && e < COUNT; e++)
            bufs[i][e] = noisy(first + i, e);
    }
    int st = ddl_comm_allreduce_shards(c, bufs, first, n, total, COUNT);
    CHECK(st == DDL_OK);
    if (st != DDL_OK && c)
        fprintf(stderr, "%d shards: %s\n", total, ddl_comm_error(c));
    uint32_t crc = ddl_crc32(0, bufs[0], COUNT * sizeof(float));
    for (int i = 0; i < n; i++)
        free(bufs[i]);
    return crc;
}

static void rank_other(int rank, int world, void *p)
{
    int k = *(const int *)p, first = 0;
    ddl_comm_config cfg = make_config(rank, world, 20000);
    ddl_comm *c = ranks_open(&cfg);
    if (!c)
        return;
    for (int r = 0; r < rank; r++)
        first += other_blocks[k][r];
    report_value(k ? "sum6" : "sum8", other_sum(c, other_total[k], first, other_blocks[k][rank]));
    ddl_comm_destroy(c);
}

/* ---- training with ddl_train_config.shards = 4: the same weights on 1, 2 and 4 ranks ---- */

enum { N_TRAIN = 203, BATCH = 64 }; /* the last batch of 11: shards of 2, 3, 3 and 3 samples */
static uint8_t images[N_TRAIN * 784], labels[N_TRAIN];

static uint32_t train_shards(ddl_comm *c, int world)
{
    ddl_dataset d = {.n = N_TRAIN, .c = 1, .h = 28, .w = 28, .th = 1, .tw = 1, .n_classes = 10, .images = images,
                     .targets = labels};
    ddl_model_config mc = {.batch = BATCH / world, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10, .dropout = 0.3f};
    ddl_model *m = NULL;
    ddl_trainer *t = NULL;
    char err[DDL_ERR_BYTES];
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = BATCH, tc.comm = c, tc.shards = V, tc.seed = 11;
    uint32_t crc = 0;
    if (ddl_model_create(ddl_model_lenet(), &mc, NULL, &m, err, sizeof err) == DDL_OK &&
        ddl_trainer_create(&tc, m, &d, NULL, &t, err, sizeof err) == DDL_OK) {
        ddl_epoch_stats es;
        int rc = ddl_trainer_epoch(t, &es);
        rc = rc == DDL_OK ? ddl_trainer_epoch(t, &es) : rc;
        CHECK(rc == DDL_OK && es.loss > 0);
        if (rc != DDL_OK)
            fprintf(stderr, "world %d: %s\n", world, ddl_trainer_error(t));
        crc = ddl_crc32(0, ddl_model_params(m), ddl_model_n_params(m) * sizeof(float));
    } else {
        fprintf(stderr, "world %d: %s\n", world, err);
        CHECK(0);
    }
    ddl_trainer_destroy(t);
    ddl_model_destroy(m);
    return crc;
}

static void rank_train(int rank, int world, void *p)
{
    (void)p;
    ddl_comm_config cfg = make_config(rank, world, 20000);
    ddl_comm *c = ranks_open(&cfg);
    if (!c)
        return;
    report_value("train", train_shards(c, world));
    ddl_comm_destroy(c);
}

int main(void)
{
    ddl_rng rng;
    ddl_rng_seed(&rng, 5);
    for (int i = 0; i < N_TRAIN; i++) {
        labels[i] = (uint8_t)ddl_rng_below(&rng, 10);
        for (int px = 0; px < 784; px++)
            images[i * 784 + px] = (uint8_t)(px / 78 == labels[i] ? 200 : ddl_rng_below(&rng, 60));
    }
    ranks_take_value("train", train_shards(NULL, 1)); /* one process: compared with the ranks' below */
    run_ranks("shm", 2, rank_train, NULL, 120, -1);
    run_ranks("tcp", 4, rank_train, NULL, 120, -1);
    /* shards that the world size does not divide: refused, saying why */
    {
        ddl_dataset d = {.n = N_TRAIN, .c = 1, .h = 28, .w = 28, .th = 1, .tw = 1, .n_classes = 10,
                         .images = images, .targets = labels};
        ddl_model_config mc = {.batch = 64, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10};
        ddl_model *m = NULL;
        ddl_trainer *t = NULL;
        char err[DDL_ERR_BYTES];
        ddl_train_config tc;
        ddl_train_config_default(&tc);
        tc.batch = 64, tc.shards = 9; /* more than DDL_MAX_MICRO_BATCHES on one rank */
        CHECK(ddl_model_create(ddl_model_lenet(), &mc, NULL, &m, err, sizeof err) == DDL_OK);
        CHECK(ddl_trainer_create(&tc, m, &d, NULL, &t, err, sizeof err) == DDL_EINVAL && strstr(err, "shards 9"));
        ddl_model_destroy(m);
    }
    static arg variants[] = {{0, 0}, {1, 0}, {0, 1}};
    static const char *const transports[] = {"shm", "tcp"};
    for (int t = 0; t < 2; t++) {
        for (int w = 1; w <= 4; w++) {
            run_ranks(transports[t], w, rank_body, &variants[0], 60, -1);
            if (w == 2)
                run_ranks(transports[t], w, rank_body, &variants[1], 60, -1);
        }
        run_ranks(transports[t], 2, rank_body, &variants[2], 60, -1); /* a bad dealing */
    }
    run_ranks("tcp", 4, rank_plain, NULL, 60, -1);
    static const int ks[2] = {0, 1};
    for (int k = 0; k < 2; k++) {
        ranks_take_value(k ? "sum6" : "sum8", other_sum(NULL, other_total[k], 0, other_total[k]));
        run_ranks("tcp", 3, rank_other, (void *)&ks[k], 60, -1);
        run_ranks("tcp", other_total[k], rank_plain, k ? "sum6" : "sum8", 60, -1);
    }
    CHECK(ranks_value_conflicts == 0 && ranks_n_values == 4); /* one "sum", "train", "sum8", "sum6" for every run */
    return TEST_END();
}
