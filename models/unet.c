/* unet.c - U-Net model plugin for image segmentation (Ronneberger et al. 2015, small and
 * same-padded): `depth` levels down, a bottom block, `depth` levels up, then a 1x1 conv to
 * n_classes logits (N, K, H, W) at the input resolution.
 *
 *   block(cin -> c):  conv 3x3 pad 1 (no bias) -> GroupNorm -> ReLU -> conv 3x3 -> GroupNorm -> ReLU
 *   down l:           block(c_{l-1} -> c_l), its output kept as skip l, then max-pool 2x2
 *   bottom:           block(c_{depth-1} -> c_depth)
 *   up l:             transposed conv 2x2 stride 2 (c_{l+1} -> c_l), concat [skip l, up],
 *                     block(2 c_l -> c_l)
 *   head:             conv 1x1 (c_0 -> K) with bias
 * with c_l = width * 2^l. Convs before a GroupNorm have no bias: the norm's beta replaces it.
 *
 * GroupNorm (not BatchNorm) on purpose: its statistics are per sample, so the forward pass of a
 * sample does not depend on the other samples of the batch and data-parallel training needs no
 * synchronisation of statistics between ranks; the gradient all-reduce alone keeps the replicas
 * identical, and N ranks match one rank with the same global batch.
 *
 * Parameter names are PyTorch's module paths: "down0.conv1.weight", "down0.norm1.weight",
 * "down0.norm1.bias", ..., "bottom.conv1.weight", "up0.up.weight", "up0.up.bias",
 * "up0.conv1.weight", ..., "head.weight", "head.bias".
 *
 * Only stores pointers in build() (called twice: measuring, then real); never allocates; the
 * input size must be divisible by 2^depth. */
#include "ddl.h"

#include <stdio.h>
#include <string.h>

#define UNET_MAX_DEPTH 6      /* 14 * depth + 8 parameter tensors <= DDL_MAX_PARAMS */
#define UNET_DEFAULT_DEPTH 3
#define UNET_DEFAULT_WIDTH 8
#define UNET_MAX_CHANNELS 4096

/* ---- state ---- */

/* Two 3x3 convs, each followed by GroupNorm and ReLU. */
typedef struct block {
    ddl_conv2d g1, g2;            /* geometry at the full configured batch */
    int cin, c, s, groups;        /* in and out channels, positions per channel, norm groups */
    float *w1, *gamma1, *beta1, *w2, *gamma2, *beta2;        /* parameters */
    float *gw1, *ggamma1, *gbeta1, *gw2, *ggamma2, *gbeta2;  /* their gradients */
    float *a1, *h1, *a2, *h2;     /* (B, c, s): conv outputs, and norm+ReLU outputs */
    float *mr1, *mr2;             /* (B, groups, 2): mean and rstd per sample and group */
    int id;                       /* its first layer for profiles (ddl_build_layer): conv1, norm1,
                                   * conv2, norm2 follow each other */
} block;

typedef struct level {
    block down, up;               /* encoder block; decoder block (input 2 c) */
    float *pool;                  /* (B, c, s / 4) */
    int32_t *arg;                 /* argmax of pool */
    ddl_conv2d gu;                /* transposed conv c_{l+1} -> c */
    float *wu, *bu, *gwu, *gbu;   /* (c_{l+1}, c, 2, 2), (c) */
    float *upx;                   /* (B, c, s): transposed conv output */
    float *cat;                   /* (B, 2 c, s): [skip, upx] */
    float *dskip;                 /* (B, c, s): gradient of the skip, from the decoder */
    int id_pool, id_up, id_cat;   /* layers for profiles */
} level;

typedef struct unet {
    int depth, width, batch, n_classes, in_c, h, w;
    level lv[UNET_MAX_DEPTH];
    block bottom;
    ddl_conv2d gh;                /* head: 1x1 conv c_0 -> K */
    float *wh, *bh, *gwh, *gbh;
    float *ws;                    /* conv workspace, shared by every conv */
    float *dp, *dq;               /* ping-pong gradient buffers, each of the largest activation */
    int id_head;
    int conv_algo;                /* ddl_model_config.conv_algo: the 3x3 convolutions' algorithm */
    ddl_unet_config kept;         /* depth and width as built: the model's config points here */
} unet;

/* done: layer id has finished its part of a pass that a profile times (prof: ddl_model_profiling's
 * answer at the pass's start). */
static void done(void *self, int prof, int id)
{
    if (prof)
        ddl_model_layer_done(self, id);
}

/* ---- build ---- */

/* groups_for: the largest group count <= 8 that divides c (c = 4 gives 4 groups of 1). */
static int groups_for(int c)
{
    int g = c < 8 ? c : 8;
    while (c % g)
        g--;
    return g;
}

static float *param(ddl_model_build *b, const char *prefix, const char *name, int n_dims, const int *shape, int init,
                    int fan_in, int fan_out, float **grad)
{
    char full[64];
    snprintf(full, sizeof full, "%s.%s", prefix, name);
    return ddl_build_param(b, full, n_dims, shape, init, fan_in, fan_out, grad);
}

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* layer: declare a layer for profiles, named prefix.what; its index. */
static int layer(ddl_model_build *b, const char *prefix, const char *what, const char *kind, int c, int h, int w,
                 double fwd, double bwd)
{
    char name[64];
    snprintf(name, sizeof name, "%s%s%s", prefix, *what ? "." : "", what);
    return ddl_build_layer(b, name, kind, c, h, w, fwd, bwd);
}

/* build_block: parameters and activations of a block on an (h, w) grid, and its layers for
 * profiles (want_dx 0: its first conv hands back no gradient), its convolutions by algo
 * (ddl_model_config.conv_algo); returns its workspace. */
static size_t build_block(ddl_model_build *b, block *k, const char *prefix, int B, int cin, int c, int h, int w,
                          int want_dx, int algo)
{
    k->cin = cin;
    k->c = c;
    k->s = h * w;
    k->groups = groups_for(c);
    k->g1 = (ddl_conv2d){.batch = B, .in_c = cin, .in_h = h, .in_w = w, .out_c = c, .k_h = 3, .k_w = 3, .stride = 1, .pad = 1};
    k->g1.algo = algo; /* ddl_model_config.conv_algo */
    k->g2 = k->g1;
    k->g2.in_c = c;
    int s1[4] = {c, cin, 3, 3}, s2[4] = {c, c, 3, 3}, sc[1] = {c};
    k->w1 = param(b, prefix, "conv1.weight", 4, s1, DDL_INIT_HE, cin * 9, c * 9, &k->gw1);
    k->gamma1 = param(b, prefix, "norm1.weight", 1, sc, DDL_INIT_ONE, c, c, &k->ggamma1);
    k->beta1 = param(b, prefix, "norm1.bias", 1, sc, DDL_INIT_ZERO, c, c, &k->gbeta1);
    k->w2 = param(b, prefix, "conv2.weight", 4, s2, DDL_INIT_HE, c * 9, c * 9, &k->gw2);
    k->gamma2 = param(b, prefix, "norm2.weight", 1, sc, DDL_INIT_ONE, c, c, &k->ggamma2);
    k->beta2 = param(b, prefix, "norm2.bias", 1, sc, DDL_INIT_ZERO, c, c, &k->gbeta2);
    size_t act = (size_t)B * (size_t)c * (size_t)k->s;
    k->a1 = ddl_build_scratch(b, act);
    k->h1 = ddl_build_scratch(b, act);
    k->a2 = ddl_build_scratch(b, act);
    k->h2 = ddl_build_scratch(b, act);
    k->mr1 = ddl_build_scratch(b, (size_t)B * (size_t)k->groups * 2);
    k->mr2 = ddl_build_scratch(b, (size_t)B * (size_t)k->groups * 2);
    double f1 = ddl_conv2d_flops(&k->g1), f2 = ddl_conv2d_flops(&k->g2);
    k->id = layer(b, prefix, "conv1", "conv", c, h, w, f1, want_dx ? 2 * f1 : f1);
    layer(b, prefix, "norm1", "groupnorm+relu", c, h, w, 0, 0);
    layer(b, prefix, "conv2", "conv", c, h, w, f2, 2 * f2);
    layer(b, prefix, "norm2", "groupnorm+relu", c, h, w, 0, 0);
    return max_sz(ddl_conv2d_workspace(&k->g1), ddl_conv2d_workspace(&k->g2));
}

/* check_config: 1 if this plugin can build cfg; else 0 with a message in why. */
static int check_config(const ddl_model_config *cfg, int depth, int width, char *why, size_t why_bytes)
{
    if (depth < 1 || depth > UNET_MAX_DEPTH) {
        snprintf(why, why_bytes, "unet: depth %d: must be from 1 to %d", depth, UNET_MAX_DEPTH);
        return 0;
    }
    if (width < 1 || (long)width << depth > UNET_MAX_CHANNELS) {
        snprintf(why, why_bytes, "unet: width %d at depth %d: need width >= 1 and width * 2^depth <= %d", width,
                 depth, UNET_MAX_CHANNELS);
        return 0;
    }
    if (cfg->in_h % (1 << depth) || cfg->in_w % (1 << depth)) {
        snprintf(why, why_bytes, "unet: input %dx%d: height and width must be divisible by 2^depth = %d", cfg->in_h,
                 cfg->in_w, 1 << depth);
        return 0;
    }
    return 1;
}

/* build_levels: encoder and decoder levels and the bottom block; returns the largest workspace. */
static size_t build_levels(unet *n, ddl_model_build *b)
{
    int B = n->batch, D = n->depth, h = n->h, w = n->w, cin = n->in_c;
    size_t ws = 0;
    char prefix[32];
    for (int l = 0; l < D; l++, h /= 2, w /= 2) {
        level *v = &n->lv[l];
        int c = n->width << l;
        snprintf(prefix, sizeof prefix, "down%d", l);
        ws = max_sz(ws, build_block(b, &v->down, prefix, B, cin, c, h, w, l > 0, n->conv_algo));
        v->id_pool = layer(b, prefix, "pool", "maxpool", c, h / 2, w / 2, 0, 0);
        v->pool = ddl_build_scratch(b, (size_t)B * c * (h / 2) * (w / 2));
        v->arg = (int32_t *)ddl_build_scratch(b, (size_t)B * c * (h / 2) * (w / 2));
        cin = c;
    }
    ws = max_sz(ws, build_block(b, &n->bottom, "bottom", B, cin, n->width << D, h, w, 1, n->conv_algo));
    for (int l = D - 1; l >= 0; l--) {
        level *v = &n->lv[l];
        int c = n->width << l;
        h *= 2;
        w *= 2;
        snprintf(prefix, sizeof prefix, "up%d", l);
        v->gu = (ddl_conv2d){.batch = B, .in_c = 2 * c, .in_h = h / 2, .in_w = w / 2, .out_c = c, .k_h = 2, .k_w = 2, .stride = 2, .pad = 0};
        int su[4] = {2 * c, c, 2, 2}, sb[1] = {c};
        v->wu = param(b, prefix, "up.weight", 4, su, DDL_INIT_HE, 2 * c, c * 4, &v->gwu);
        v->bu = param(b, prefix, "up.bias", 1, sb, DDL_INIT_ZERO, 2 * c, c * 4, &v->gbu);
        ws = max_sz(ws, ddl_deconv2d_workspace(&v->gu));
        double fu = ddl_deconv2d_flops(&v->gu);
        v->id_up = layer(b, prefix, "up", "deconv", c, h, w, fu, 2 * fu);
        v->id_cat = layer(b, prefix, "cat", "concat", 2 * c, h, w, 0, 0);
        v->upx = ddl_build_scratch(b, (size_t)B * c * h * w);
        v->cat = ddl_build_scratch(b, (size_t)B * 2 * c * h * w);
        v->dskip = ddl_build_scratch(b, (size_t)B * c * h * w);
        ws = max_sz(ws, build_block(b, &v->up, prefix, B, 2 * c, c, h, w, 1, n->conv_algo));
    }
    return ws;
}

static int unet_build(void *self, const ddl_model_config *cfg, ddl_model_build *b)
{
    unet *n = (unet *)self;
    const ddl_unet_config *uc = (const ddl_unet_config *)cfg->plugin_config;
    n->depth = uc && uc->depth > 0 ? uc->depth : UNET_DEFAULT_DEPTH;
    n->width = uc && uc->width > 0 ? uc->width : UNET_DEFAULT_WIDTH;
    n->kept = (ddl_unet_config){.depth = n->depth, .width = n->width};
    ddl_build_plugin_config(b, &n->kept);
    char why[DDL_ERR_BYTES];
    if (!check_config(cfg, n->depth, n->width, why, sizeof why)) {
        ddl_build_fail(b, why);
        return DDL_EINVAL;
    }
    n->batch = cfg->batch;
    n->conv_algo = cfg->conv_algo;
    n->n_classes = cfg->n_classes;
    n->in_c = cfg->in_c;
    n->h = cfg->in_h;
    n->w = cfg->in_w;
    size_t ws = build_levels(n, b);
    int B = n->batch, c0 = n->width, K = n->n_classes;
    n->gh = (ddl_conv2d){.batch = B, .in_c = c0, .in_h = n->h, .in_w = n->w, .out_c = K, .k_h = 1, .k_w = 1, .stride = 1, .pad = 0};
    int sh[4] = {K, c0, 1, 1}, sk[1] = {K};
    n->wh = ddl_build_param(b, "head.weight", 4, sh, DDL_INIT_GLOROT, c0, K, &n->gwh);
    n->bh = ddl_build_param(b, "head.bias", 1, sk, DDL_INIT_ZERO, c0, K, &n->gbh);
    ws = max_sz(ws, ddl_conv2d_workspace(&n->gh));
    double fh = ddl_conv2d_flops(&n->gh);
    n->id_head = layer(b, "head", "", "conv", K, n->h, n->w, fh, 2 * fh);
    n->ws = ddl_build_scratch(b, ws);
    /* The largest gradient is a level-0 concat (2 c_0) or the input (in_c) at full resolution. */
    size_t big = (size_t)B * (size_t)(2 * c0 > n->in_c ? 2 * c0 : n->in_c) * (size_t)n->h * (size_t)n->w;
    n->dp = ddl_build_scratch(b, big);
    n->dq = ddl_build_scratch(b, big);
    ddl_build_output(b, K, n->h, n->w);
    return DDL_OK;
}

/* ---- forward ---- */

/* block_forward: h2 (B, c, s) of x (B, cin, s). */
static void block_forward(block *k, const float *x, int B, float *ws, void *self, int prof)
{
    ddl_conv2d g1 = k->g1, g2 = k->g2;
    g1.batch = g2.batch = B;
    ddl_conv2d_forward(&g1, x, k->w1, NULL, k->a1, ws);
    done(self, prof, k->id);
    ddl_groupnorm_relu_forward(B, k->c, k->s, k->groups, k->a1, k->gamma1, k->beta1, k->h1, k->mr1);
    done(self, prof, k->id + 1);
    ddl_conv2d_forward(&g2, k->h1, k->w2, NULL, k->a2, ws);
    done(self, prof, k->id + 2);
    ddl_groupnorm_relu_forward(B, k->c, k->s, k->groups, k->a2, k->gamma2, k->beta2, k->h2, k->mr2);
    done(self, prof, k->id + 3);
}

/* below: the output of the level under decoder level l (the bottom block under the deepest). */
static const float *below(const unet *n, int l)
{
    return l + 1 < n->depth ? n->lv[l + 1].up.h2 : n->bottom.h2;
}

static void unet_forward(void *self, const float *x, int B, int training, ddl_rng *rng, float *logits)
{
    unet *n = (unet *)self;
    (void)training; /* no dropout and no batch statistics: training and evaluation are the same */
    (void)rng;
    const float *in = x;
    int prof = ddl_model_profiling(self); /* a profile times each layer; else one test each */
    for (int l = 0; l < n->depth; l++) {
        level *v = &n->lv[l];
        int h = n->h >> l, w = n->w >> l;
        block_forward(&v->down, in, B, n->ws, self, prof);
        ddl_maxpool_forward(B, v->down.c, h, w, 2, 2, v->down.h2, v->pool, v->arg);
        done(self, prof, v->id_pool);
        in = v->pool;
    }
    block_forward(&n->bottom, in, B, n->ws, self, prof);
    for (int l = n->depth - 1; l >= 0; l--) {
        level *v = &n->lv[l];
        ddl_conv2d gu = v->gu;
        gu.batch = B;
        ddl_deconv2d_forward(&gu, below(n, l), v->wu, v->bu, v->upx, n->ws);          /* (B, c, s) */
        done(self, prof, v->id_up);
        ddl_concat_channels(B, v->down.c, v->down.c, v->down.s, v->down.h2, v->upx, v->cat); /* (B, 2c, s) */
        done(self, prof, v->id_cat);
        block_forward(&v->up, v->cat, B, n->ws, self, prof);
    }
    ddl_conv2d gh = n->gh;
    gh.batch = B;
    ddl_conv2d_forward(&gh, n->lv[0].up.h2, n->wh, n->bh, logits, n->ws); /* (B, K, H, W) */
    done(self, prof, n->id_head);
}

/* ---- backward ---- */

/* block_backward: from dy (B, c, s) in *p to dx (B, cin, s) in *p (dx may be NULL: first layer);
 * *q is scratch. Both buffers hold the largest activation. */
static void block_backward(block *k, const float *x, int B, float *p, float *q, float *ws, int want_dx, void *self,
                           int prof)
{
    ddl_conv2d g1 = k->g1, g2 = k->g2;
    g1.batch = g2.batch = B;
    ddl_groupnorm_relu_backward(B, k->c, k->s, k->groups, k->a2, k->gamma2, k->mr2, k->h2, p, q, k->ggamma2,
                                k->gbeta2);
    done(self, prof, k->id + 3);
    ddl_conv2d_backward(&g2, k->h1, k->w2, q, p, k->gw2, NULL, ws);
    done(self, prof, k->id + 2);
    ddl_groupnorm_relu_backward(B, k->c, k->s, k->groups, k->a1, k->gamma1, k->mr1, k->h1, p, q, k->ggamma1,
                                k->gbeta1);
    done(self, prof, k->id + 1);
    ddl_conv2d_backward(&g1, x, k->w1, q, want_dx ? p : NULL, k->gw1, NULL, ws);
    done(self, prof, k->id);
}

static void unet_backward(void *self, const float *x, int B, const float *dlogits, ddl_backward *pass)
{
    (void)pass; /* U-Net's gradients are one bucket by default: nothing to report before the end */
    unet *n = (unet *)self;
    float *p = n->dp, *q = n->dq;
    ddl_conv2d gh = n->gh;
    gh.batch = B;
    int prof = ddl_model_profiling(self);
    ddl_conv2d_backward(&gh, n->lv[0].up.h2, n->wh, dlogits, p, n->gwh, n->gbh, n->ws);
    done(self, prof, n->id_head);
    for (int l = 0; l < n->depth; l++) { /* decoder, top to bottom */
        level *v = &n->lv[l];
        ddl_conv2d gu = v->gu;
        gu.batch = B;
        block_backward(&v->up, v->cat, B, p, q, n->ws, 1, self, prof);          /* p: d cat (B, 2c, s) */
        ddl_split_channels(B, v->down.c, v->down.c, v->down.s, p, v->dskip, q);  /* q: d upx */
        done(self, prof, v->id_cat);
        ddl_deconv2d_backward(&gu, below(n, l), v->wu, q, p, v->gwu, v->gbu, n->ws); /* p: d below */
        done(self, prof, v->id_up);
    }
    int D = n->depth;
    block_backward(&n->bottom, n->lv[D - 1].pool, B, p, q, n->ws, 1, self, prof); /* p: d pool_{D-1} */
    for (int l = D - 1; l >= 0; l--) { /* encoder, bottom to top */
        level *v = &n->lv[l];
        int h = n->h >> l, w = n->w >> l;
        size_t count = (size_t)B * (size_t)v->down.c * (size_t)v->down.s;
        ddl_maxpool_backward(B, v->down.c, h, w, 2, 2, p, v->arg, q);
        ddl_add(count, q, v->dskip, p); /* the skip's gradient joins the pooled path's */
        done(self, prof, v->id_pool);
        block_backward(&v->down, l ? n->lv[l - 1].pool : x, B, p, q, n->ws, l > 0, self, prof);
    }
}

/* ---- plugin ---- */

/* unet_describe: the preset "unet:DEPTH:WIDTH" of the layer graph builds this network, parameter
 * for parameter (tests/test_graph.c checks the logits and gradients are the same bits). */
static size_t unet_describe(const void *self, char *buf, size_t bytes)
{
    const unet *n = (const unet *)self;
    char name[32];
    snprintf(name, sizeof name, "unet:%d:%d", n->depth, n->width);
    ddl_graph *g = NULL;
    size_t len = 0;
    if (ddl_graph_create(NULL, &g) == DDL_OK && ddl_graph_preset(g, name, NULL, 0) == DDL_OK)
        len = ddl_graph_format(g, buf, bytes);
    ddl_graph_destroy(g, NULL);
    return len;
}

static const ddl_model_plugin unet_plugin = {
    .version = DDL_MODEL_VERSION,
    .name = "unet",
    .self_bytes = sizeof(unet),
    .build = unet_build,
    .forward = unet_forward,
    .backward = unet_backward,
    .describe = unet_describe,
};

_Static_assert(sizeof(unet) <= 16384, "unet plugin state must fit the core's 16384 bytes");

const ddl_model_plugin *ddl_model_unet(void) { return &unet_plugin; }
