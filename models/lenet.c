/* lenet.c - LeNet-5 model plugin for 28x28 one-channel images, the classic PyTorch layout:
 * conv1 5x5x6 pad 2, ReLU, max-pool 2, conv2 5x5x16, ReLU, max-pool 2, fc1 400-120, ReLU,
 * fc2 120-84, ReLU, fc3 84-10 (optional dropout after fc1 and fc2). Parameter names and
 * layouts are PyTorch's. Only stores pointers in build(); never allocates. */
#include "ddl.h"

#include <string.h>

typedef struct lenet {
    ddl_conv2d g1, g2;            /* geometry at the full configured batch */
    int batch, n_classes;
    float drop;
    /* parameters and their gradients (views into the model's flat buffers) */
    float *w1, *b1, *w2, *b2, *wf1, *bf1, *wf2, *bf2, *wf3, *bf3;
    float *gw1, *gb1, *gw2, *gb2, *gwf1, *gbf1, *gwf2, *gbf2, *gwf3, *gbf3;
    /* activations */
    float *c1;     /* (B, 6, 28, 28) before ReLU */
    float *p1;     /* (B, 6, 14, 14) after ReLU */
    int32_t *a1;   /* argmax of p1 */
    float *c2;     /* (B, 16, 10, 10) before ReLU */
    float *p2;     /* (B, 400) after ReLU */
    int32_t *a2;
    float *f1, *f2; /* (B, 120), (B, 84) after ReLU and dropout */
    uint8_t *m1, *m2; /* dropout masks */
    float *ws;     /* conv workspace */
    /* gradients of activations */
    float *dc1, *dp1, *dc2, *dp2, *df1, *df2;
} lenet;

/* The layers a profile times (ddl_build_layer), in the order declared; each takes the ReLU,
 * and dropout, that follows it. */
enum { L_CONV1, L_POOL1, L_CONV2, L_POOL2, L_FC1, L_FC2, L_FC3 };

/* ---- build ---- */

/* declare_layers: the layers, with their FLOPs per sample from the geometry (conv1's backward
 * computes no input gradient: once, not twice). */
static void declare_layers(const lenet *n, ddl_model_build *b)
{
    double c1 = ddl_conv2d_flops(&n->g1), c2 = ddl_conv2d_flops(&n->g2), K = n->n_classes;
    ddl_build_layer(b, "conv1", "conv", 6, 28, 28, c1, c1);
    ddl_build_layer(b, "pool1", "maxpool+relu", 6, 14, 14, 0, 0);
    ddl_build_layer(b, "conv2", "conv", 16, 10, 10, c2, 2 * c2);
    ddl_build_layer(b, "pool2", "maxpool+relu", 16, 5, 5, 0, 0);
    ddl_build_layer(b, "fc1", "dense+relu", 120, 1, 1, 2.0 * 400 * 120, 4.0 * 400 * 120);
    ddl_build_layer(b, "fc2", "dense+relu", 84, 1, 1, 2.0 * 120 * 84, 4.0 * 120 * 84);
    ddl_build_layer(b, "fc3", "dense", n->n_classes, 1, 1, 2.0 * 84 * K, 4.0 * 84 * K);
}

static float *param(ddl_model_build *b, const char *name, int n_dims, int d0, int d1, int d2, int d3, int init,
                    int fan_in, int fan_out, float **grad)
{
    int shape[4] = {d0, d1, d2, d3};
    return ddl_build_param(b, name, n_dims, shape, init, fan_in, fan_out, grad);
}

static int lenet_build(void *self, const ddl_model_config *cfg, ddl_model_build *b)
{
    lenet *n = (lenet *)self;
    if (cfg->in_c != 1 || cfg->in_h != 28 || cfg->in_w != 28) {
        ddl_build_fail(b, "lenet: needs 1x28x28 input");
        return DDL_EINVAL;
    }
    int B = cfg->batch, K = cfg->n_classes;
    n->batch = B;
    n->n_classes = K;
    n->drop = cfg->dropout;
    n->g1 = (ddl_conv2d){.batch = B, .in_c = 1, .in_h = 28, .in_w = 28, .out_c = 6, .k_h = 5, .k_w = 5, .stride = 1, .pad = 2};
    n->g2 = (ddl_conv2d){.batch = B, .in_c = 6, .in_h = 14, .in_w = 14, .out_c = 16, .k_h = 5, .k_w = 5, .stride = 1, .pad = 0};
    n->w1 = param(b, "conv1.weight", 4, 6, 1, 5, 5, DDL_INIT_HE, 25, 150, &n->gw1);
    n->b1 = param(b, "conv1.bias", 1, 6, 0, 0, 0, DDL_INIT_ZERO, 25, 150, &n->gb1);
    n->w2 = param(b, "conv2.weight", 4, 16, 6, 5, 5, DDL_INIT_HE, 150, 400, &n->gw2);
    n->b2 = param(b, "conv2.bias", 1, 16, 0, 0, 0, DDL_INIT_ZERO, 150, 400, &n->gb2);
    n->wf1 = param(b, "fc1.weight", 2, 120, 400, 0, 0, DDL_INIT_HE, 400, 120, &n->gwf1);
    n->bf1 = param(b, "fc1.bias", 1, 120, 0, 0, 0, DDL_INIT_ZERO, 400, 120, &n->gbf1);
    n->wf2 = param(b, "fc2.weight", 2, 84, 120, 0, 0, DDL_INIT_HE, 120, 84, &n->gwf2);
    n->bf2 = param(b, "fc2.bias", 1, 84, 0, 0, 0, DDL_INIT_ZERO, 120, 84, &n->gbf2);
    n->wf3 = param(b, "fc3.weight", 2, K, 84, 0, 0, DDL_INIT_GLOROT, 84, K, &n->gwf3);
    n->bf3 = param(b, "fc3.bias", 1, K, 0, 0, 0, DDL_INIT_ZERO, 84, K, &n->gbf3);

    size_t ws1 = ddl_conv2d_workspace(&n->g1), ws2 = ddl_conv2d_workspace(&n->g2);
    n->ws = ddl_build_scratch(b, ws1 > ws2 ? ws1 : ws2);
    n->c1 = ddl_build_scratch(b, (size_t)B * 6 * 784);
    n->p1 = ddl_build_scratch(b, (size_t)B * 6 * 196);
    n->a1 = (int32_t *)ddl_build_scratch(b, (size_t)B * 6 * 196);
    n->c2 = ddl_build_scratch(b, (size_t)B * 16 * 100);
    n->p2 = ddl_build_scratch(b, (size_t)B * 400);
    n->a2 = (int32_t *)ddl_build_scratch(b, (size_t)B * 400);
    n->f1 = ddl_build_scratch(b, (size_t)B * 120);
    n->f2 = ddl_build_scratch(b, (size_t)B * 84);
    n->m1 = (uint8_t *)ddl_build_scratch(b, (size_t)B * 120 / 4 + 1);
    n->m2 = (uint8_t *)ddl_build_scratch(b, (size_t)B * 84 / 4 + 1);
    n->dc1 = ddl_build_scratch(b, (size_t)B * 6 * 784);
    n->dp1 = ddl_build_scratch(b, (size_t)B * 6 * 196);
    n->dc2 = ddl_build_scratch(b, (size_t)B * 16 * 100);
    n->dp2 = ddl_build_scratch(b, (size_t)B * 400);
    n->df1 = ddl_build_scratch(b, (size_t)B * 120);
    n->df2 = ddl_build_scratch(b, (size_t)B * 84);
    declare_layers(n, b);
    ddl_build_output(b, K, 1, 1);
    return DDL_OK;
}

/* ---- forward ---- */

static void lenet_forward(void *self, const float *x, int B, int training, ddl_rng *rng, float *logits)
{
    lenet *n = (lenet *)self;
    ddl_conv2d g1 = n->g1, g2 = n->g2;
    g1.batch = g2.batch = B;
    int prof = ddl_model_profiling(self); /* a profile times each layer; else one test each */
    /* ReLU after max-pool: max and ReLU commute, and the pooled tensor is 4x smaller. The
     * gradients are the same too: a pooled value <= 0 passes no gradient either way. */
    ddl_conv2d_forward(&g1, x, n->w1, n->b1, n->c1, n->ws);  /* (B, 6, 28, 28) */
    if (prof)
        ddl_model_layer_done(self, L_CONV1);
    ddl_maxpool_forward(B, 6, 28, 28, 2, 2, n->c1, n->p1, n->a1); /* (B, 6, 14, 14) */
    ddl_relu_forward((size_t)B * 6 * 196, n->p1, n->p1);
    if (prof)
        ddl_model_layer_done(self, L_POOL1);
    ddl_conv2d_forward(&g2, n->p1, n->w2, n->b2, n->c2, n->ws); /* (B, 16, 10, 10) */
    if (prof)
        ddl_model_layer_done(self, L_CONV2);
    ddl_maxpool_forward(B, 16, 10, 10, 2, 2, n->c2, n->p2, n->a2); /* (B, 400) */
    ddl_relu_forward((size_t)B * 400, n->p2, n->p2);
    if (prof)
        ddl_model_layer_done(self, L_POOL2);
    ddl_dense_forward(B, 400, 120, n->p2, n->wf1, n->bf1, n->f1);
    ddl_relu_forward((size_t)B * 120, n->f1, n->f1);
    if (n->drop > 0.0f)
        ddl_dropout_forward((size_t)B * 120, n->drop, training, rng, n->f1, n->f1, n->m1);
    if (prof)
        ddl_model_layer_done(self, L_FC1);
    ddl_dense_forward(B, 120, 84, n->f1, n->wf2, n->bf2, n->f2);
    ddl_relu_forward((size_t)B * 84, n->f2, n->f2);
    if (n->drop > 0.0f)
        ddl_dropout_forward((size_t)B * 84, n->drop, training, rng, n->f2, n->f2, n->m2);
    if (prof)
        ddl_model_layer_done(self, L_FC2);
    ddl_dense_forward(B, 84, n->n_classes, n->f2, n->wf3, n->bf3, logits); /* (B, K) */
    if (prof)
        ddl_model_layer_done(self, L_FC3);
}

/* ---- backward ---- */

static void lenet_backward(void *self, const float *x, int B, const float *dlogits, ddl_backward *pass)
{
    lenet *n = (lenet *)self;
    ddl_conv2d g1 = n->g1, g2 = n->g2;
    g1.batch = g2.batch = B;
    int prof = ddl_model_profiling(self);
    ddl_dense_backward(B, 84, n->n_classes, n->f2, n->wf3, dlogits, n->df2, n->gwf3, n->gbf3);
    if (prof)
        ddl_model_layer_done(self, L_FC3);
    ddl_backward_ready(pass, n->gwf3); /* the trainer may send these while the rest computes */
    if (n->drop > 0.0f)
        ddl_dropout_backward((size_t)B * 84, n->drop, n->m2, n->df2, n->df2);
    ddl_relu_backward((size_t)B * 84, n->f2, n->df2, n->df2);
    ddl_dense_backward(B, 120, 84, n->f1, n->wf2, n->df2, n->df1, n->gwf2, n->gbf2);
    if (prof)
        ddl_model_layer_done(self, L_FC2);
    ddl_backward_ready(pass, n->gwf2);
    if (n->drop > 0.0f)
        ddl_dropout_backward((size_t)B * 120, n->drop, n->m1, n->df1, n->df1);
    ddl_relu_backward((size_t)B * 120, n->f1, n->df1, n->df1);
    ddl_dense_backward(B, 400, 120, n->p2, n->wf1, n->df1, n->dp2, n->gwf1, n->gbf1);
    if (prof)
        ddl_model_layer_done(self, L_FC1);
    ddl_backward_ready(pass, n->gwf1);
    ddl_relu_backward((size_t)B * 400, n->p2, n->dp2, n->dp2);
    ddl_maxpool_backward(B, 16, 10, 10, 2, 2, n->dp2, n->a2, n->dc2);
    if (prof)
        ddl_model_layer_done(self, L_POOL2);
    ddl_conv2d_backward(&g2, n->p1, n->w2, n->dc2, n->dp1, n->gw2, n->gb2, n->ws);
    if (prof)
        ddl_model_layer_done(self, L_CONV2);
    ddl_backward_ready(pass, n->gw2);
    ddl_relu_backward((size_t)B * 6 * 196, n->p1, n->dp1, n->dp1);
    ddl_maxpool_backward(B, 6, 28, 28, 2, 2, n->dp1, n->a1, n->dc1);
    if (prof)
        ddl_model_layer_done(self, L_POOL1);
    ddl_conv2d_backward(&g1, x, n->w1, n->dc1, NULL, n->gw1, n->gb1, n->ws);
    if (prof)
        ddl_model_layer_done(self, L_CONV1);
}

/* ---- plugin ---- */

/* lenet_describe: the preset "lenet" of the layer graph builds this network, parameter for parameter. */
static size_t lenet_describe(const void *self, char *buf, size_t bytes)
{
    (void)self;
    ddl_graph *g = NULL;
    size_t n = 0;
    if (ddl_graph_create(NULL, &g) == DDL_OK && ddl_graph_preset(g, "lenet", NULL, 0) == DDL_OK)
        n = ddl_graph_format(g, buf, bytes);
    ddl_graph_destroy(g, NULL);
    return n;
}

static const ddl_model_plugin lenet_plugin = {
    .version = DDL_MODEL_VERSION,
    .name = "lenet",
    .self_bytes = sizeof(lenet),
    .build = lenet_build,
    .forward = lenet_forward,
    .backward = lenet_backward,
    .describe = lenet_describe,
};

const ddl_model_plugin *ddl_model_lenet(void) { return &lenet_plugin; }
