/* lenet_ops.c - where LeNet's training step spends its time: each of the ops of one step
 * (models/lenet.c's calls, batch 64, random data), in microseconds, the mean of 400 steps after
 * 50 untimed, at --threads N. make bench (BENCH_ONLY=ops) runs it with 1 and 2 threads; it is
 * how the per-op figures of README's Benchmarks section were measured. Uses ddl.h only. */
#define _POSIX_C_SOURCE 200809L
#include "ddl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STEPS 400
#define WARMUP 50
#define MAX_OPS 24

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

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
        double t0 = now_us();                                                                             \
        call;                                                                                             \
        spent[k] += now_us() - t0;                                                                        \
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
    ddl_conv2d g1 = {B, 1, 28, 28, 6, 5, 5, 1, 2}, g2 = {B, 6, 14, 14, 16, 5, 5, 1, 0};
    size_t ws1 = ddl_conv2d_workspace(&g1), ws2 = ddl_conv2d_workspace(&g2);
    float *ws = filled(ws1 > ws2 ? ws1 : ws2), *x = filled(B * 784);
    float *w1 = filled(150), *b1 = filled(6), *w2 = filled(2400), *b2 = filled(16), *wf1 = filled(48000),
          *bf1 = filled(120), *wf2 = filled(120 * 84), *bf2 = filled(84), *wf3 = filled(840), *bf3 = filled(K);
    float *gw1 = filled(150), *gb1 = filled(6), *gw2 = filled(2400), *gb2 = filled(16), *gwf1 = filled(48000),
          *gbf1 = filled(120), *gwf2 = filled(120 * 84), *gbf2 = filled(84), *gwf3 = filled(840), *gbf3 = filled(K);
    float *c1 = filled(B * 6 * 784), *p1 = filled(B * 6 * 196), *c2 = filled(B * 1600), *p2 = filled(B * 400),
          *f1 = filled(B * 120), *f2 = filled(B * 84), *logits = filled(B * K);
    float *dc1 = filled(B * 6 * 784), *dp1 = filled(B * 6 * 196), *dc2 = filled(B * 1600), *dp2 = filled(B * 400),
          *df1 = filled(B * 120), *df2 = filled(B * 84), *dlogits = filled(B * K);
    int32_t *a1 = (int32_t *)filled(B * 6 * 196), *a2 = (int32_t *)filled(B * 400);
    int n_ops = 0;
    for (int step = 0; step < WARMUP + STEPS; step++) {
        int k = 0;
        if (step == WARMUP)
            memset(spent, 0, sizeof spent);
        TIMED("conv1 forward", ddl_conv2d_forward(&g1, x, w1, b1, c1, ws));
        TIMED("pool1 forward", ddl_maxpool_forward(B, 6, 28, 28, 2, 2, c1, p1, a1));
        TIMED("relu1 forward", ddl_relu_forward((size_t)B * 6 * 196, p1, p1));
        TIMED("conv2 forward", ddl_conv2d_forward(&g2, p1, w2, b2, c2, ws));
        TIMED("pool2 forward", ddl_maxpool_forward(B, 16, 10, 10, 2, 2, c2, p2, a2));
        TIMED("relu2 forward", ddl_relu_forward((size_t)B * 400, p2, p2));
        TIMED("fc1 forward", ddl_dense_forward(B, 400, 120, p2, wf1, bf1, f1));
        TIMED("fc2 forward", ddl_dense_forward(B, 120, 84, f1, wf2, bf2, f2));
        TIMED("fc3 forward", ddl_dense_forward(B, 84, K, f2, wf3, bf3, logits));
        TIMED("fc3 backward", ddl_dense_backward(B, 84, K, f2, wf3, dlogits, df2, gwf3, gbf3));
        TIMED("fc2 backward", ddl_dense_backward(B, 120, 84, f1, wf2, df2, df1, gwf2, gbf2));
        TIMED("fc1 backward", ddl_dense_backward(B, 400, 120, p2, wf1, df1, dp2, gwf1, gbf1));
        TIMED("relu2 backward", ddl_relu_backward((size_t)B * 400, p2, dp2, dp2));
        TIMED("pool2 backward", ddl_maxpool_backward(B, 16, 10, 10, 2, 2, dp2, a2, dc2));
        TIMED("conv2 backward", ddl_conv2d_backward(&g2, p1, w2, dc2, dp1, gw2, gb2, ws));
        TIMED("relu1 backward", ddl_relu_backward((size_t)B * 6 * 196, p1, dp1, dp1));
        TIMED("pool1 backward", ddl_maxpool_backward(B, 6, 28, 28, 2, 2, dp1, a1, dc1));
        TIMED("conv1 backward", ddl_conv2d_backward(&g1, x, w1, dc1, NULL, gw1, gb1, ws));
        n_ops = k;
    }
    double total = 0.0;
    printf("LeNet step ops, batch %d, %d thread(s), mean of %d steps (us)\n", B, threads, STEPS);
    for (int i = 0; i < n_ops; i++) {
        printf("  %-16s %8.1f\n", names[i], spent[i] / STEPS);
        total += spent[i] / STEPS;
    }
    printf("  %-16s %8.1f   (%.0f images/s in the ops alone)\n", "total", total, B / total * 1e6);
    return 0;
}
