/* lenet_ops.c - where LeNet's training step spends its time: each of the ops of one step
 * (models/lenet.c's calls, batch 64, random data), in microseconds, the mean of 400 steps after
 * 50 untimed, at --threads N. The weights and gradients are a LeNet model's own flat buffers
 * (ddl_model_create), and the step's other parts are timed as ddl_trainer_step runs them (the
 * gradients zeroed, the loss, SGD with momentum), so the rows add up to a training step but
 * for the batch's copy. make bench (BENCH_ONLY=ops) runs it with 1 and 2 threads; it is how the
 * per-op figures of docs/BENCHMARKS.md were measured. Uses ddl.h only. */
#define _POSIX_C_SOURCE 200809L
#include "ddl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"

#define STEPS 400
#define WARMUP 50
#define MAX_OPS 24

static float *filled(size_t n)
{
    float *p = aligned_alloc(DDL_ALIGN, (n * sizeof(float) + DDL_ALIGN) / DDL_ALIGN * DDL_ALIGN);
    if (!p) {
        fprintf(stderr, "lenet_ops: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        p[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    return p;
}

static const char *names[MAX_OPS];
static double spent[MAX_OPS];

#define TIMED(label, call)                                                                                \
    do {                                                                                                  \
        double t0 = (1e6 * bench_now());                                                                             \
        call;                                                                                             \
        spent[k] += (1e6 * bench_now()) - t0;                                                                        \
        names[k++] = label;                                                                               \
    } while (0)

int main(int argc, char **argv)
{
    int threads = 1;
    if (argc == 3 && strcmp(argv[1], "--threads") == 0)
        threads = atoi(argv[2]);
    if (threads < 1 || (argc != 1 && argc != 3)) {
        fprintf(stderr, "usage: lenet_ops [--threads N]\n");
        return 2;
    }
    ddl_set_threads(threads);
    enum { B = 64, K = 10 };
    ddl_conv2d g1 = {.batch = B, .in_c = 1, .in_h = 28, .in_w = 28, .out_c = 6, .k_h = 5, .k_w = 5, .stride = 1, .pad = 2},
               g2 = {.batch = B, .in_c = 6, .in_h = 14, .in_w = 14, .out_c = 16, .k_h = 5, .k_w = 5, .stride = 1};
    size_t ws1 = ddl_conv2d_workspace(&g1), ws2 = ddl_conv2d_workspace(&g2);
    float *ws = filled(ws1 > ws2 ? ws1 : ws2), *x = filled(B * 784);
    ddl_model *m = NULL;
    char err[256];
    ddl_model_config mc = {.batch = B, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = K};
    if (ddl_model_create(ddl_model_lenet(), &mc, NULL, &m, err, sizeof err) != DDL_OK) {
        fprintf(stderr, "lenet_ops: %s\n", err);
        return 1;
    }
    ddl_model_init_weights(m, 1);
    /* the model's tensors in its order: conv1, conv2, fc1, fc2, fc3, each weight then bias */
    float *params = ddl_model_params(m), *grads = ddl_model_grads(m), *t[10], *g[10];
    for (int i = 0; i < 10; i++) {
        t[i] = params + ddl_model_tensor(m, i)->offset;
        g[i] = grads + ddl_model_tensor(m, i)->offset;
    }
    float *w1 = t[0], *b1 = t[1], *w2 = t[2], *b2 = t[3], *wf1 = t[4], *bf1 = t[5], *wf2 = t[6], *bf2 = t[7],
          *wf3 = t[8], *bf3 = t[9];
    float *gw1 = g[0], *gb1 = g[1], *gw2 = g[2], *gb2 = g[3], *gwf1 = g[4], *gbf1 = g[5], *gwf2 = g[6],
          *gbf2 = g[7], *gwf3 = g[8], *gbf3 = g[9];
    float *c1 = filled(B * 6 * 784), *p1 = filled(B * 6 * 196), *c2 = filled(B * 1600), *p2 = filled(B * 400),
          *f1 = filled(B * 120), *f2 = filled(B * 84), *logits = filled(B * K);
    float *dc1 = filled(B * 6 * 784), *dp1 = filled(B * 6 * 196), *dc2 = filled(B * 1600), *dp2 = filled(B * 400),
          *df1 = filled(B * 120), *df2 = filled(B * 84), *dlogits = filled(B * K);
    int32_t *a1 = (int32_t *)filled(B * 6 * 196), *a2 = (int32_t *)filled(B * 400);
    size_t n_params = ddl_model_n_params(m);
    ddl_optim_config opt = {.kind = DDL_OPTIM_SGD, .lr = 0.01f, .momentum = 0.9f};
    float *opt_state = calloc(ddl_optim_state_floats(&opt, n_params), sizeof(float));
    uint16_t labels[B];
    for (int i = 0; i < B; i++)
        labels[i] = (uint16_t)(rand() % K);
    int n_ops = 0;
    for (int step = 0; step < WARMUP + STEPS; step++) {
        int k = 0;
        if (step == WARMUP)
            memset(spent, 0, sizeof spent);
        TIMED("zero grads", ddl_model_zero_grads(m));
        TIMED("conv1 forward", ddl_conv2d_forward(&g1, x, w1, b1, c1, ws));
        TIMED("pool1 forward", ddl_maxpool_forward(B, 6, 28, 28, 2, 2, c1, p1, a1));
        TIMED("relu1 forward", ddl_relu_forward((size_t)B * 6 * 196, p1, p1));
        TIMED("conv2 forward", ddl_conv2d_forward(&g2, p1, w2, b2, c2, ws));
        TIMED("pool2 forward", ddl_maxpool_forward(B, 16, 10, 10, 2, 2, c2, p2, a2));
        TIMED("relu2 forward", ddl_relu_forward((size_t)B * 400, p2, p2));
        TIMED("fc1 forward", ddl_dense_forward(B, 400, 120, p2, wf1, bf1, f1));
        TIMED("fc2 forward", ddl_dense_forward(B, 120, 84, f1, wf2, bf2, f2));
        TIMED("fc3 forward", ddl_dense_forward(B, 84, K, f2, wf3, bf3, logits));
        TIMED("loss", ddl_softmax_xent(B, K, 1, logits, labels, 1.0f / B, NULL, dlogits));
        TIMED("fc3 backward", ddl_dense_backward(B, 84, K, f2, wf3, dlogits, df2, gwf3, gbf3));
        TIMED("fc2 backward", ddl_dense_backward(B, 120, 84, f1, wf2, df2, df1, gwf2, gbf2));
        TIMED("fc1 backward", ddl_dense_backward(B, 400, 120, p2, wf1, df1, dp2, gwf1, gbf1));
        TIMED("relu2 backward", ddl_relu_backward((size_t)B * 400, p2, dp2, dp2));
        TIMED("pool2 backward", ddl_maxpool_backward(B, 16, 10, 10, 2, 2, dp2, a2, dc2));
        TIMED("conv2 backward", ddl_conv2d_backward(&g2, p1, w2, dc2, dp1, gw2, gb2, ws));
        TIMED("relu1 backward", ddl_relu_backward((size_t)B * 6 * 196, p1, dp1, dp1));
        TIMED("pool1 backward", ddl_maxpool_backward(B, 6, 28, 28, 2, 2, dp1, a1, dc1));
        TIMED("conv1 backward", ddl_conv2d_backward(&g1, x, w1, dc1, NULL, gw1, gb1, ws));
        TIMED("optimizer", ddl_optim_step(&opt, 0.01f, step + 1, params, grads, opt_state, n_params));
        n_ops = k;
    }
    double total = 0.0;
    printf("LeNet step ops, batch %d, %d thread(s), mean of %d steps (us)\n", B, threads, STEPS);
    for (int i = 0; i < n_ops; i++) {
        printf("  %-16s %8.1f\n", names[i], spent[i] / STEPS);
        total += spent[i] / STEPS;
    }
    printf("  %-16s %8.1f   (%.0f images/s in the ops alone)\n", "total", total, B / total * 1e6);
    ddl_model_destroy(m);
    free(opt_state);
    return 0;
}
