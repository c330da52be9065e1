/* lenet.c - train LeNet-5 on Fashion-MNIST, on one rank or on as many as ddlrun/mpirun start.
 *
 *   build/bin/lenet [--data DIR] [--epochs N] [--batch B] [--lr X] [--momentum M]
 *                   [--optimizer sgd|adam] [--weight-decay W] [--schedule constant|step|cosine]
 *                   [--warmup STEPS] [--seed S] [--train-limit N] [--threads N] [--quiet]
 *                   [--checkpoint PATH [--checkpoint-every STEPS] [--resume]] [--save PATH]
 *
 * Rank 0 prints loss, test accuracy and images/s per epoch, then one summary line. */
#include "ddl.h"

#include <stdio.h>

#include "example_common.h"

int main(int argc, char **argv)
{
    example_opts o;
    example_defaults(&o, "lenet");
    o.data = "/usr/share/datasets/fashion-mnist";
    if (example_parse(&o, argc, argv) != 0)
        return 2;

    char err[DDL_ERR_BYTES];
    ddl_comm *comm = NULL;
    if (example_comm(&comm, err) != DDL_OK) {
        fprintf(stderr, "lenet: %s\n", err);
        ddl_comm_destroy(comm);
        return 1;
    }
    int world = comm ? ddl_comm_size(comm) : 1;

    ddl_dataset train = {0}, test = {0};
    int rc = ddl_dataset_load_mnist(o.data, "train", NULL, &train, err, sizeof err);
    if (rc == DDL_OK)
        rc = ddl_dataset_load_mnist(o.data, "t10k", NULL, &test, err, sizeof err);
    if (rc != DDL_OK) {
        fprintf(stderr, "lenet: %s\n", err);
        ddl_comm_destroy(comm);
        return 1;
    }
    float mean, std;
    ddl_dataset_stats(&train, &mean, &std); /* Fashion-MNIST: 0.2860, 0.3530 */

    ddl_model_config mc = {.batch = (o.batch + world - 1) / world, .in_c = 1, .in_h = 28, .in_w = 28,
                           .n_classes = 10, .dropout = o.dropout};
    ddl_model *model = NULL;
    rc = ddl_model_create(ddl_model_lenet(), &mc, NULL, &model, err, sizeof err);
    if (rc != DDL_OK) {
        fprintf(stderr, "lenet: cannot build the model: %s\n", err);
    } else {
        ddl_model_set_norm(model, mean, std);
        rc = example_train(&o, comm, model, &train, &test);
        ddl_model_destroy(model);
    }
    ddl_dataset_free(&train);
    ddl_dataset_free(&test);
    ddl_comm_destroy(comm);
    return rc == DDL_OK ? 0 : 1;
}
