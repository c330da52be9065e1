/* quickstart.c - the program of README.md's "Using the library", whole: LeNet on Fashion-MNIST on
 * as many ranks as ddlrun starts, 5 epochs, rank 0 printing each. tests/test_readme.sh checks that
 * README shows exactly this file (from the #include on) and builds and runs it.
 *
 *   build/bin/ddlrun -n 2 build/bin/quickstart */
#include "ddl.h"

#include <stdio.h>

int main(void)
{
    char err[DDL_ERR_BYTES];
    ddl_comm_config cc;
    ddl_comm_env env; /* text the config may point into, such as torchrun's master address */
    ddl_comm *comm = NULL; /* NULL: one process */
    if (ddl_comm_config_from_env(&cc, &env, err, sizeof err) != DDL_OK) { /* rank and world from ddlrun */
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (cc.world_size > 1 && ddl_comm_create(&cc, NULL, &comm, err, sizeof err) != DDL_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int world = comm ? ddl_comm_size(comm) : 1, rank = comm ? ddl_comm_rank(comm) : 0;

    const char *dir = "/usr/share/datasets/fashion-mnist";
    ddl_dataset train = {0}, test = {0};
    ddl_model *model = NULL;
    ddl_trainer *trainer = NULL;
    ddl_model_config mc = {.batch = (64 + world - 1) / world, /* each rank takes its part of 64 */
                           .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10};
    ddl_train_config tc;
    ddl_train_config_default(&tc); /* SGD lr 0.01 momentum 0.9, global batch 64 */
    tc.comm = comm;
    int rc = ddl_dataset_load_mnist(dir, "train", NULL, &train, err, sizeof err);
    if (rc == DDL_OK)
        rc = ddl_dataset_load_mnist(dir, "t10k", NULL, &test, err, sizeof err);
    if (rc == DDL_OK)
        rc = ddl_model_create(ddl_model_lenet(), &mc, NULL, &model, err, sizeof err);
    if (rc == DDL_OK) {
        ddl_model_set_norm(model, 0.2860f, 0.3530f); /* Fashion-MNIST's mean and std */
        rc = ddl_trainer_create(&tc, model, &train, NULL, &trainer, err, sizeof err);
    }
    for (int epoch = 1; rc == DDL_OK && epoch <= 5; epoch++) {
        ddl_epoch_stats es;
        ddl_eval_stats ev;
        rc = ddl_trainer_epoch(trainer, &es);
        if (rc == DDL_OK)
            rc = ddl_trainer_evaluate(trainer, &test, &ev);
        if (rc != DDL_OK)
            snprintf(err, sizeof err, "%s", ddl_trainer_error(trainer));
        else if (rank == 0)
            printf("epoch %d: loss %.4f, test accuracy %.4f\n", epoch, es.loss, ev.accuracy);
    }
    if (rc != DDL_OK)
        fprintf(stderr, "rank %d: %s\n", rank, err);
    ddl_trainer_destroy(trainer);
    ddl_model_destroy(model);
    ddl_dataset_free(&train);
    ddl_dataset_free(&test);
    ddl_comm_destroy(comm);
    return rc == DDL_OK ? 0 : 1;
}
