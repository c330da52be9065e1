/* test_batchnorm.c - the batchnorm layer: its forward pass in training mode against a
 * reference in double (batch mean, biased variance, the running statistics with PyTorch's
 * momentum and unbiased variance), evaluation with the running statistics, the backward pass
 * through the batch statistics by finite differences (training mode) and in evaluation mode, the
 * buffers (names, init, CRC, ddl_model_set_buffers) and the text format's round trip. */
#include "ddl.h"
#include "check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 4
#define C 3
#define S 16 /* 4 x 4 */

static ddl_model *build(const char *arch, int batch, int in_c, int hw, int classes)
{
    static _Alignas(64) unsigned char gmem[1 << 17]; /* >= ddl_graph_sizeof(): 1024 layers */
    ddl_graph *g = ddl_graph_init(gmem, sizeof gmem);
    char err[256];
    if (!g || ddl_graph_parse(g, arch, err, sizeof err) != DDL_OK) {
        fprintf(stderr, "parse: %s\n", err);
        return NULL;
    }
    ddl_model_config cfg = {.batch = batch, .in_c = in_c, .in_h = hw, .in_w = hw, .n_classes = classes, .plugin_config = g};
    ddl_model *m = NULL;
    if (ddl_model_create(ddl_model_graph(), &cfg, NULL, &m, err, sizeof err) != DDL_OK)
        fprintf(stderr, "build: %s\n", err);
    return m;
}

/* reference: per channel mean and biased variance of x (N, C, S) in double. */
static void reference(const float *x, double *mean, double *var)
{
    for (int c = 0; c < C; c++) {
        double s = 0, q = 0;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < S; i++)
                s += x[(n * C + c) * S + i];
        mean[c] = s / (N * S);
        for (int n = 0; n < N; n++)
            for (int i = 0; i < S; i++) {
                double d = x[(n * C + c) * S + i] - mean[c];
                q += d * d;
            }
        var[c] = q / (N * S);
    }
}

static void test_forward_backward(void)
{
    ddl_model *m = build("input 3 4 4\nbatchnorm bn momentum=0.25 eps=0.001\n", N, C, 4, C);
    CHECK(m != NULL);
    if (!m)
        return;
    CHECK(ddl_model_n_params(m) == 2 * C && ddl_model_n_buffers(m) == 2 * C);
    CHECK(ddl_model_n_buffer_tensors(m) == 2);
    CHECK(strcmp(ddl_model_buffer_tensor(m, 0)->name, "bn.running_mean") == 0);
    CHECK(strcmp(ddl_model_buffer_tensor(m, 1)->name, "bn.running_var") == 0);
    CHECK(ddl_model_buffer_tensor(m, 1)->offset == C && ddl_model_buffer_tensor(m, 2) == NULL);
    float *buf = ddl_model_buffers(m), *p = ddl_model_params(m);
    CHECK(buf[0] == 0.0f && buf[C] == 1.0f); /* running mean 0, variance 1 from the build */
    const float gamma[C] = {1.5f, -0.5f, 2.0f}, beta[C] = {0.1f, 0.2f, -0.3f};
    memcpy(p, gamma, sizeof gamma);
    memcpy(p + C, beta, sizeof beta);
    float x[N * C * S], dy[N * C * S];
    srand(7);
    for (int i = 0; i < N * C * S; i++) {
        int c = (i / S) % C;
        x[i] = (float)rand() / RAND_MAX * (1.0f + c) + (c == 2 ? 100.0f : 3.0f * c); /* channel 2: mean ~100 */
        dy[i] = (float)rand() / RAND_MAX - 0.5f;
    }
    double mean[C], var[C];
    reference(x, mean, var);
    const float *y = ddl_model_forward(m, x, N, 1, NULL);
    double worst = 0;
    for (int i = 0; i < N * C * S; i++) {
        int c = (i / S) % C;
        double want = (x[i] - mean[c]) / sqrt(var[c] + 1e-3) * gamma[c] + beta[c];
        worst = fmax(worst, fabs(y[i] - want));
    }
    CHECK(worst < 2e-5);
    for (int c = 0; c < C; c++) { /* running = 0.75 running + 0.25 batch, the variance unbiased */
        CHECK_NEAR(buf[c], 0.25 * mean[c], 1e-6 * (1 + fabs(mean[c])));
        CHECK_NEAR(buf[C + c], 0.75 + 0.25 * var[c] * (N * S) / (N * S - 1), 1e-6);
    }
    uint32_t crc = ddl_model_buffers_crc(m);
    CHECK(crc != 0);
    /* backward through the batch statistics: dgamma = sum dy xh, dbeta = sum dy */
    ddl_model_zero_grads(m);
    ddl_model_backward(m, x, N, dy);
    const float *gr = ddl_model_grads(m);
    for (int c = 0; c < C; c++) {
        double dg = 0, db = 0;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < S; i++) {
                int k = (n * C + c) * S + i;
                dg += dy[k] * (x[k] - mean[c]) / sqrt(var[c] + 1e-3);
                db += dy[k];
            }
        CHECK_NEAR(gr[c], dg, 1e-4);
        CHECK_NEAR(gr[C + c], db, 1e-5);
    }
    /* evaluation: the running statistics, which it leaves alone */
    y = ddl_model_forward(m, x, N, 0, NULL);
    worst = 0;
    for (int i = 0; i < N * C * S; i++) {
        int c = (i / S) % C;
        double want = (x[i] - buf[c]) / sqrt((double)buf[C + c] + 1e-3) * gamma[c] + beta[c];
        worst = fmax(worst, fabs(y[i] - want));
    }
    CHECK(worst < 2e-5);
    CHECK(ddl_model_buffers_crc(m) == crc);
    /* init_weights puts the buffers back; set_buffers takes exactly their count */
    ddl_model_init_weights(m, 1);
    CHECK(buf[0] == 0.0f && buf[C + 2] == 1.0f && ddl_model_buffers_crc(m) != crc);
    const float six[2 * C] = {1, 2, 3, 4, 5, 6};
    CHECK(ddl_model_set_buffers(m, six, 2 * C) == DDL_OK && buf[5] == 6.0f);
    CHECK(ddl_model_set_buffers(m, six, 2 * C - 1) == DDL_EINVAL);
    ddl_model_destroy(m);
}

/* Conv-BN-ReLU-GAP-dense: the backward pass against finite differences in both modes. */
static void test_gradcheck(void)
{
    const char *arch = "input 3 6 6\nconv c1 4 3 pad=1 bias=0\nbatchnorm bn1\nrelu\nconv c2 5 3 pad=1\n"
                       "batchnorm bn2 momentum=0.5\ngap\ndense fc classes\n";
    ddl_model *m = build(arch, 3, 3, 6, 3);
    CHECK(m != NULL);
    if (!m)
        return;
    ddl_model_init_weights(m, 5);
    float x[3 * 3 * 36];
    srand(11);
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
        x[i] = (float)rand() / RAND_MAX * 2.0f - 1.0f;
    char err[256];
    double worst = 1;
    int rc = ddl_model_check_grads_training(m, x, 3, 9, 12, 2e-2, &worst, err, sizeof err);
    CHECK(rc == DDL_OK);
    if (rc != DDL_OK)
        fprintf(stderr, "training: %s\n", err);
    /* evaluation mode, with running statistics that are not 0 and 1 */
    float *buf = ddl_model_buffers(m);
    for (size_t i = 0; i < ddl_model_n_buffers(m); i++)
        buf[i] = 0.5f + 0.1f * (float)(i % 5);
    rc = ddl_model_check_grads(m, x, 3, 9, 12, 2e-2, &worst, err, sizeof err);
    CHECK(rc == DDL_OK);
    if (rc != DDL_OK)
        fprintf(stderr, "evaluation: %s\n", err);
    ddl_model_destroy(m);
}

/* threads: by channel, so 1 and 3 threads give the same bits (outputs, gradients, buffers). */
static void test_threads(void)
{
    const char *arch = "input 3 16 16\nconv c1 24 3 pad=1 bias=0\nbatchnorm bn1\nrelu\ngap\ndense fc classes\n";
    ddl_model *m = build(arch, 8, 3, 16, 4);
    CHECK(m != NULL);
    if (!m)
        return;
    static float x[8 * 3 * 256], dl[8 * 4], out[2][8 * 4], grads[2][24 * 27 + 48 + 100], bufs[2][48];
    srand(3);
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
        x[i] = (float)rand() / RAND_MAX;
    for (int i = 0; i < 32; i++)
        dl[i] = (float)rand() / RAND_MAX - 0.5f;
    size_t np = ddl_model_n_params(m);
    CHECK(np <= sizeof grads[0] / sizeof grads[0][0] && ddl_model_n_buffers(m) == 48);
    for (int k = 0; k < 2 && np <= sizeof grads[0] / sizeof grads[0][0]; k++) {
        ddl_set_threads(k ? 3 : 1);
        ddl_model_init_weights(m, 4);
        memcpy(out[k], ddl_model_forward(m, x, 8, 1, NULL), sizeof out[k]);
        ddl_model_zero_grads(m);
        ddl_model_backward(m, x, 8, dl);
        memcpy(grads[k], ddl_model_grads(m), np * sizeof(float));
        memcpy(bufs[k], ddl_model_buffers(m), sizeof bufs[k]);
    }
    ddl_set_threads(1);
    CHECK(memcmp(out[0], out[1], sizeof out[0]) == 0);
    CHECK(memcmp(grads[0], grads[1], np * sizeof(float)) == 0);
    CHECK(memcmp(bufs[0], bufs[1], sizeof bufs[0]) == 0);
    ddl_model_destroy(m);
}

static void test_text(void)
{
    static _Alignas(64) unsigned char a[1 << 17], b[1 << 17]; /* >= ddl_graph_sizeof() */
    ddl_graph *g = ddl_graph_init(a, sizeof a), *h = ddl_graph_init(b, sizeof b);
    char err[256], t1[1024], t2[1024];
    const char *arch = "input 3 8 8\nconv 4 3\nbatchnorm\nbatchnorm b2 momentum=0.01 eps=0.00100000005\nrelu\n"
                       "gap\ndense classes\n";
    CHECK(ddl_graph_parse(g, arch, err, sizeof err) == DDL_OK);
    ddl_graph_format(g, t1, sizeof t1);
    CHECK(strstr(t1, "batchnorm\n") != NULL);
    CHECK(strstr(t1, "batchnorm b2 momentum=0.00999999978 eps=0.00100000005\n") != NULL);
    CHECK(ddl_graph_parse(h, t1, err, sizeof err) == DDL_OK);
    ddl_graph_format(h, t2, sizeof t2);
    CHECK(strcmp(t1, t2) == 0);
    /* unnamed: nn.Sequential's numbers, as the parameters */
    ddl_model_config cfg = {.batch = 2, .in_c = 3, .in_h = 8, .in_w = 8, .n_classes = 2, .plugin_config = g};
    ddl_model *m = NULL;
    CHECK(ddl_model_create(ddl_model_graph(), &cfg, NULL, &m, err, sizeof err) == DDL_OK);
    if (m) {
        CHECK(strcmp(ddl_model_buffer_tensor(m, 0)->name, "1.running_mean") == 0);
        CHECK(strcmp(ddl_model_tensor(m, 2)->name, "1.weight") == 0);
        ddl_model_destroy(m);
    }
    CHECK(ddl_graph_parse(g, "input 3 8 8\nbatchnorm momentum=-1\n", err, sizeof err) == DDL_EINVAL);
    CHECK(strstr(err, "line 2") && strstr(err, "momentum=-1"));
    CHECK(ddl_graph_parse(g, "input 3 8 8\nbatchnorm eps=x\n", err, sizeof err) == DDL_EINVAL);
    CHECK(strstr(err, "eps \"x\" is not a number") != NULL);
    ddl_graph_init(a, sizeof a);
    ddl_graph_input(g, 3, 8, 8);
    CHECK(ddl_graph_batchnorm(g, 0, "bn", 2.0f, 1e-5f) == -1);
    CHECK(strstr(ddl_graph_error(g), "momentum 2") != NULL);
}

/* step_mode: test_batchnorm --step DIR (tests/test_batchnorm.sh, tests/bn/bn_step.py): one training
 * step of a Conv-BN-ReLU network on DIR/in.f32 (x, labels, parameters), written to DIR/out.f32
 * (logits, the mean loss, the parameters after SGD with lr 0.1, the running statistics). */
static int step_mode(const char *dir)
{
    enum { SN = 4, IN = SN * 2 * 36, NP = 54 + 3 + 3 + 9 + 3 };
    float in[IN + SN + NP], out[SN * 3 + 1 + NP + 6], dl[SN * 3];
    uint16_t y[SN];
    char path[1024];
    snprintf(path, sizeof path, "%s/in.f32", dir);
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(in, sizeof(float), sizeof in / sizeof in[0], f) : 0;
    if (f)
        fclose(f);
    ddl_model *m = build("input 2 6 6\nconv c1 3 3 pad=1 bias=0\nbatchnorm bn1\nrelu\ngap\ndense fc 3\n", SN, 2, 6, 3);
    if (got != sizeof in / sizeof in[0] || !m || ddl_model_n_params(m) != NP) {
        fprintf(stderr, "test_batchnorm --step: cannot read %s, or no model of %d parameters\n", path, NP);
        return 1;
    }
    for (int i = 0; i < SN; i++)
        y[i] = (uint16_t)in[IN + i];
    memcpy(ddl_model_params(m), in + IN + SN, NP * sizeof(float));
    const float *logits = ddl_model_forward(m, in, SN, 1, NULL);
    memcpy(out, logits, SN * 3 * sizeof(float));
    out[SN * 3] = (float)(ddl_softmax_xent(SN, 3, 1, logits, y, 1.0f / SN, NULL, dl) / SN);
    ddl_model_zero_grads(m);
    ddl_model_backward(m, in, SN, dl);
    ddl_optim_config sgd = {.kind = DDL_OPTIM_SGD, .lr = 0.1f};
    float state[NP] = {0};
    ddl_optim_step(&sgd, 0.1f, 1, ddl_model_params(m), ddl_model_grads(m), state, NP);
    memcpy(out + SN * 3 + 1, ddl_model_params(m), NP * sizeof(float));
    memcpy(out + SN * 3 + 1 + NP, ddl_model_buffers(m), 6 * sizeof(float));
    snprintf(path, sizeof path, "%s/out.f32", dir);
    f = fopen(path, "wb");
    int ok = f && fwrite(out, sizeof out, 1, f) == 1;
    if (f)
        ok &= fclose(f) == 0;
    ddl_model_destroy(m);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--step") == 0)
        return step_mode(argv[2]);
    test_forward_backward();
    test_gradcheck();
    test_threads();
    test_text();
    return TEST_END();
}
