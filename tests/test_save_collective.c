/* test_save_collective.c - ddl_trainer_save is collective, and a program that calls it on rank 0
 * only (PyTorch's habit: `if rank == 0: torch.save(...)`) is told so, quickly: rank 0's error
 * says that every rank must call ddl_trainer_save, whether rank 1 went on training (its
 * all-reduce meets the save's gather) or ended (closed its comm); no rank waits past the
 * comm's timeout, and no file is left behind. Over shm and tcp, 2 ranks. */
#include "ddl.h"
#include "check.h"
#include "ranks.h"

#include <string.h>

enum { N = 64, BATCH = 8, TIMEOUT_MS = 3000 };

static uint8_t images[N * 784], labels[N];
static char path[256];

/* rank_body: arg 0: rank 1 steps on while rank 0 saves; arg 1: rank 1 ends instead. */
static void rank_body(int rank, int world, void *arg)
{
    int rank1_ends = *(const int *)arg;
    ddl_comm_config cfg = make_config(rank, world, TIMEOUT_MS);
    ddl_comm *c = ranks_open(&cfg);
    if (!c)
        return;
    ddl_dataset d = {.n = N, .c = 1, .h = 28, .w = 28, .th = 1, .tw = 1, .n_classes = 10, .images = images,
                     .targets = labels};
    ddl_model_config mc = {.batch = BATCH / world, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10};
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = BATCH;
    tc.comm = c;
    ddl_model *m = NULL;
    ddl_trainer *tr = NULL;
    char err[DDL_ERR_BYTES] = "";
    int rc = ddl_model_create(ddl_model_lenet(), &mc, NULL, &m, err, sizeof err);
    if (rc == DDL_OK)
        rc = ddl_trainer_create(&tc, m, &d, NULL, &tr, err, sizeof err);
    if (rc == DDL_OK)
        rc = ddl_trainer_step(tr, NULL);
    CHECK(rc == DDL_OK);
    double t0 = ranks_now();
    if (rc == DDL_OK && rank == 0) {
        rc = ddl_trainer_save(tr, path); /* the mistake: rank 0 alone */
        const char *msg = ddl_trainer_error(tr);
        CHECK(rc != DDL_OK);
        CHECK(strstr(msg, "ddl_trainer_save is collective: every rank must call it") != NULL);
        CHECK(strstr(msg, path) != NULL);
        if (rc == DDL_OK || !strstr(msg, "every rank must call it"))
            fprintf(stderr, "rank 0: save on rank 0 only: %s: %s\n", ddl_strerror(rc), msg);
        CHECK(access(path, F_OK) != 0);
    } else if (rc == DDL_OK && !rank1_ends) {
        rc = ddl_trainer_step(tr, NULL); /* meets rank 0's save: must fail, not hang */
        CHECK(rc != DDL_OK);
    }
    double secs = ranks_now() - t0;
    CHECK(secs < TIMEOUT_MS / 1000.0 + 2.0);
    if (secs >= TIMEOUT_MS / 1000.0 + 2.0)
        fprintf(stderr, "rank %d: %.1f s to fail\n", rank, secs);
    ddl_trainer_destroy(tr);
    ddl_model_destroy(m);
    ddl_comm_destroy(c);
}

int main(void)
{
    for (int i = 0; i < N * 784; i++)
        images[i] = (uint8_t)(i * 31);
    for (int i = 0; i < N; i++)
        labels[i] = (uint8_t)(i % 10);
    snprintf(path, sizeof path, "/tmp/ddl-test-save-collective-%d.ckpt", (int)getpid());
    static const int steps_on = 0, ends = 1;
    const char *names[] = {"shm", "tcp"};
    for (int t = 0; t < 2; t++) {
        if (!ddl_transport_find(names[t]))
            continue;
        run_ranks(names[t], 2, rank_body, (void *)&steps_on, 30.0, -1);
        run_ranks(names[t], 2, rank_body, (void *)&ends, 30.0, -1);
    }
    remove(path);
    return TEST_END();
}
