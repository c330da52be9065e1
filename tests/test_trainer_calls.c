/* test_trainer_calls.c - a program's own collectives on an elastic comm (ddl_trainer_collectives):
 * four LeNet ranks train two steps, then run a sequence of their own: an all-reduce of 1 MiB
 * (a confusion matrix of 362 classes), a broadcast from rank 0 and an all-reduce MAX. Rank 2 is
 * killed (SIGKILL) as it starts the second call, after all four completed the first. The three
 * others must finish the sequence through the regroup: the first call's result is the four
 * ranks' sum, the broadcast rank 0's values, the MAX over the survivors; then the trainer steps
 * on with a world of 3, and ddl_trainer_allreduce_int sums over the three. A sequence with
 * restart 1 starts again at call 0 with the world it then has. Without the recovery path the
 * second call returns DDL_EPEER and the checks fail. Also: the arguments are checked, and a
 * trainer without a comm makes no call. Over tcp and shm. */
#include "check.h"
#include "ranks.h"

#include <stdint.h>

enum { N_SAMPLES = 256, VICTIM = 2, LARGE_N = 1 << 18 };

static uint8_t images[N_SAMPLES * 784], labels[N_SAMPLES];

static void make_data(ddl_dataset *d)
{
    ddl_rng r;
    ddl_rng_seed(&r, 3);
    for (int i = 0; i < N_SAMPLES; i++) {
        labels[i] = (uint8_t)ddl_rng_below(&r, 10);
        for (int p = 0; p < 784; p++)
            images[i * 784 + p] = (uint8_t)ddl_rng_below(&r, 256);
    }
    memset(d, 0, sizeof *d);
    d->n = N_SAMPLES;
    d->c = 1;
    d->h = d->w = 28;
    d->th = d->tw = 1;
    d->n_classes = 10;
    d->images = images;
    d->targets = labels;
}

/* make_trainer: LeNet on the data, a global batch of `batch` in `shards` shards (0: none) over c */
static ddl_trainer *make_trainer(ddl_comm *c, int batch, int shards, ddl_dataset *d, ddl_model **m)
{
    char err[DDL_ERR_BYTES];
    ddl_model_config mc = {.batch = 16, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10};
    ddl_trainer *tr = NULL;
    *m = NULL;
    CHECK(ddl_model_create(ddl_model_lenet(), &mc, NULL, m, err, sizeof err) == DDL_OK);
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = batch;
    tc.shards = shards;
    tc.comm = c;
    tc.seed = 9;
    int rc = *m ? ddl_trainer_create(&tc, *m, d, NULL, &tr, err, sizeof err) : DDL_EINVAL;
    if (rc != DDL_OK)
        fprintf(stderr, "trainer: %s\n", err);
    CHECK(rc == DDL_OK);
    return tr;
}

/* the program's sequence: what each call computes, from the rank it had at the start */
typedef struct seq {
    int first_rank, attempts[3];
    float *large;
    int64_t bcast[8], max;
} seq;

static int seq_call(void *ud, ddl_comm *comm, int i)
{
    seq *s = ud;
    s->attempts[i]++;
    if (i == 0) {
        for (int j = 0; j < LARGE_N; j++) /* set every time: an attempt leaves the buffer half reduced */
            s->large[j] = (float)((s->first_rank + 1) * (j % 7));
        return ddl_comm_allreduce(comm, s->large, LARGE_N, DDL_FLOAT32, DDL_SUM);
    }
    if (i == 1) {
        if (s->first_rank == VICTIM) {
            usleep(200 * 1000); /* the first call has ended everywhere */
            raise(SIGKILL);
        }
        for (int j = 0; j < 8; j++)
            s->bcast[j] = ddl_comm_rank(comm) == 0 ? 100 + j : -1;
        return ddl_comm_broadcast(comm, s->bcast, 8, DDL_INT64, 0);
    }
    s->max = s->first_rank;
    return ddl_comm_allreduce(comm, &s->max, 1, DDL_INT64, DDL_MAX);
}

/* restart_call: one call whose input is the world it runs in */
static int restart_call(void *ud, ddl_comm *comm, int i)
{
    (void)i;
    int64_t *v = ud;
    *v = ddl_comm_size(comm);
    return ddl_comm_allreduce(comm, v, 1, DDL_INT64, DDL_SUM);
}

static void rank_body(int rank, int world, void *p)
{
    (void)p;
    ddl_comm_config cfg = make_config(rank, world, 20000);
    cfg.heartbeat_timeout_ms = 1000;
    cfg.heartbeat_interval_ms = 100;
    cfg.elastic_min = 2;
    cfg.elastic_max = world;
    ddl_comm *c = ranks_open(&cfg);
    if (!c)
        return;
    ddl_dataset d;
    make_data(&d);
    ddl_model *m;
    ddl_trainer *tr = make_trainer(c, 32, 4, &d, &m);
    int rc = tr ? DDL_OK : DDL_EINVAL;
    for (int s = 0; s < 2 && rc == DDL_OK; s++)
        CHECK((rc = ddl_trainer_step(tr, NULL)) == DDL_OK);
    seq s = {.first_rank = rank, .large = malloc(LARGE_N * sizeof(float))};
    if (rc == DDL_OK && s.large) {
        rc = ddl_trainer_collectives(tr, "the test's sequence", 3, seq_call, &s, 0);
        if (rc != DDL_OK)
            fprintf(stderr, "rank %d: %s\n", rank, ddl_trainer_error(tr));
        CHECK(rc == DDL_OK);
        int same = 1;
        for (int j = 0; j < LARGE_N; j++) /* 1 + 2 + 3 + 4 ranks' (j % 7) */
            same &= s.large[j] == (float)(10 * (j % 7));
        CHECK(same);
        for (int j = 0; j < 8; j++)
            CHECK(s.bcast[j] == 100 + j);
        CHECK(s.max == 3);
        CHECK(ddl_comm_size(c) == 3);
        CHECK(s.attempts[0] == 1); /* call 0 completed everywhere before the kill: never made again */
        CHECK(s.attempts[1] >= 1 && s.attempts[2] >= 1);
    }
    if (rc == DDL_OK) {
        CHECK(ddl_trainer_step(tr, NULL) == DDL_OK);
        int64_t one = 1;
        CHECK(ddl_trainer_allreduce_int(tr, &one, DDL_SUM) == DDL_OK && one == 3);
        int64_t worlds = -1;
        CHECK(ddl_trainer_collectives(tr, NULL, 1, restart_call, &worlds, 1) == DDL_OK && worlds == 9);
    }
    free(s.large);
    ddl_trainer_destroy(tr);
    ddl_model_destroy(m);
    ddl_comm_destroy(c);
}

static int never(void *ud, ddl_comm *comm, int i)
{
    (void)comm;
    (void)i;
    (*(int *)ud)++;
    return DDL_EINVAL;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    /* arguments, and a trainer of one process */
    ddl_dataset d;
    make_data(&d);
    ddl_model *m;
    ddl_trainer *tr = make_trainer(NULL, 16, 0, &d, &m);
    int made = 0;
    CHECK(ddl_trainer_collectives(NULL, NULL, 1, never, &made, 0) == DDL_EINVAL);
    CHECK(ddl_trainer_collectives(tr, NULL, -1, never, &made, 0) == DDL_EINVAL);
    CHECK(ddl_trainer_collectives(tr, NULL, 1, NULL, &made, 0) == DDL_EINVAL);
    CHECK(ddl_trainer_collectives(tr, NULL, 2, never, &made, 0) == DDL_OK && made == 0); /* no comm: no call */
    ddl_trainer_destroy(tr);
    ddl_model_destroy(m);

    const char *tps[] = {"tcp", "shm"};
    for (int t = 0; t < 2; t++) {
        fprintf(stderr, "%s: rank %d killed in a program's own sequence of collectives\n", tps[t], VICTIM);
        run_ranks(tps[t], 4, rank_body, NULL, 30, VICTIM);
    }
    return TEST_END();
}
