/* plugin.c - the model plugin that builds a layer graph (ddl_model_graph): shapes resolved from
 * the model config, parameters declared in layer order (so the flat buffer and the overlap's
 * "ready" points follow the graph), activations laid out by the core's two-pass build, and a
 * backward pass derived from the graph: layers in reverse order, each handing its input the
 * gradient through the same core kernels the hand-written plugins call.
 *
 * Memory: a layer owns an output y and a gradient dy of (batch, c, h, w), except where it
 * works in place on its input's (ReLU and dropout on a layer nobody else reads, flatten, a
 * ReLU folded into the GroupNorm before it, an activation whose gradient needs only its output
 * after a conv, dense or GroupNorm: "alias"). A layer read by several others gets the
 * first gradient written into its dy and the others added, through one scratch buffer.
 * A ReLU in place runs inside a neighbour where the same bits come out: forward in the conv
 * before it (relu_after), backward in the max-pool that alone reads it (relu_before: the pool's
 * backward sends a window's gradient on only where its output is > 0).
 * Never allocates; keeps no state outside its own. */
#include "impl.h"

#include <limits.h>
#include <string.h>

/* What the build resolved for one layer, and its memory. */
typedef struct rt {
    int c, h, w;             /* per-sample shape of the output */
    size_t size;             /* c * h * w */
    int n_use;               /* layers that read it (+1 for the output) */
    int groups;              /* groupnorm's, resolved */
    float p;                 /* dropout's, resolved */
    uint8_t alias;           /* y and dy are the input's */
    uint8_t fused_relu;      /* groupnorm: the ReLU after it runs inside its kernels */
    uint8_t relu_after;      /* conv: the ReLU after it, in place, runs in its forward pass
                              * (ddl__conv2d_forward_relu) */
    uint8_t relu_before;     /* maxpool: the in-place ReLU before it, read by it alone, has its
                              * backward run in this one's (ddl__maxpool2d_backward_relu; y, the
                              * mask, then kept) */
    uint8_t relu_in_reader;  /* relu: its backward is its reader's (relu_before) */
    uint8_t const_y;         /* y is the caller's input (directly or through aliases): never written */
    uint8_t keep_y;          /* an activation's backward reads y (its own, or through aliases): a
                              * ReLU or dropout after it must not overwrite it */
    uint8_t grad;            /* a parameter at or before it: backward needs its dy */
    uint8_t written;         /* backward: dy holds a gradient */
    uint8_t bcast;           /* mul: 1 when in[1] is (C, 1, 1) and in[0] is not, 2 the other way round;
                              * 3 when in[1] is (1, H, W) and in[0] has more channels, 4 the other way */
    float *y, *dy, *wt, *bs, *gw, *gb; /* output, its gradient; parameters, their gradients */
    void *aux;               /* maxpool: argmax; dropout: mask; groupnorm, batchnorm: mean and rstd */
    float *run, *run_next;   /* batchnorm: running mean then variance (C each, the model's buffers), and
                              * where a training pass writes their next values */
} rt;

typedef struct gmodel {
    ddl_graph g;
    rt r[DDL_GRAPH_MAX_LAYERS];
    int out, batch;
    int training;            /* the last forward pass's: backward of an evaluation pass drops nothing */
    float *ws, *tmp, *tmp2;  /* conv workspace; two gradient scratch buffers of the largest layer */
    /* synchronised BatchNorm (a trainer's sync hook, ddl__model_sync): a pass's rows (batch, 2 C)
     * and the global batch's sums (2 C), C the widest batchnorm's; synced: the last forward was */
    float *bn_rows;
    double *bn_tot;
    int synced;
    int conv_algo; /* ddl_model_config.conv_algo, for every convolution's geometry */
} gmodel;

_Static_assert(sizeof(gmodel) <= DDL__MODEL_SELF_MAX, "the graph plugin's state must fit the core's limit");

/* ---- shapes ---- */

/* fail: the build's error (b), or, when only asked (b NULL: ddl_graph_output_shape,
 * ddl__graph_layer_shape), g's own: g is then the caller's private copy. */
static int fail(ddl_model_build *b, ddl_graph *g, int i, const char *fmt, ...) DDL__PRINTF(4, 5);
static int fail(ddl_model_build *b, ddl_graph *g, int i, const char *fmt, ...)
{
    char why[DDL_ERR_BYTES], prefix[48];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (g->layers[i].name[0])
        snprintf(prefix, sizeof prefix, "%s, ", g->layers[i].name);
    else
        prefix[0] = '\0';
    char msg[DDL_ERR_BYTES];
    snprintf(msg, sizeof msg, "graph: layer %d (%s%s): %.180s", i, prefix, ddl__graph_layer_op(&g->layers[i]), why);
    if (b)
        ddl_build_fail(b, msg);
    else
        snprintf(g->err, sizeof g->err, "%s", msg);
    return DDL_EINVAL;
}

static int groups_for(int c)
{
    int g = c < 8 ? c : 8;
    while (c % g)
        g--;
    return g;
}

/* shape_input: layer 0 from the config, where the graph leaves it open or agrees. */
static int shape_input(gmodel *m, const ddl_model_config *cfg, ddl_model_build *b)
{
    const ddl__layer *l = &m->g.layers[0];
    rt *r = &m->r[0];
    r->c = l->out > 0 ? l->out : cfg->in_c;
    r->h = l->k > 0 ? l->k : cfg->in_h;
    r->w = l->stride > 0 ? l->stride : cfg->in_w;
    r->size = (size_t)r->c * (size_t)r->h * (size_t)r->w;
    if (r->c != cfg->in_c || r->h != cfg->in_h || r->w != cfg->in_w)
        return fail(b, &m->g, 0, "the graph takes %dx%dx%d images, the model config gives %dx%dx%d", r->c, r->h,
                    r->w, cfg->in_c, cfg->in_h, cfg->in_w);
    if (r->size > INT_MAX)
        return fail(b, &m->g, 0, "%dx%dx%d images: more than %d values each", r->c, r->h, r->w, INT_MAX);
    return DDL_OK;
}

/* shape_layer: layer i's output shape from its inputs'. Computed in 64 bits and bounded: the
 * kernels take a sample's values, and its height times width, as an int. */
static int shape_layer(gmodel *m, int i, const ddl_model_config *cfg, ddl_model_build *b)
{
    const ddl__layer *l = &m->g.layers[i];
    const rt *a = &m->r[l->in[0]], *o = l->in[1] >= 0 ? &m->r[l->in[1]] : NULL;
    rt *r = &m->r[i];
    int out = l->out == DDL_CLASSES ? cfg->n_classes : l->out;
    int64_t c = a->c, h = a->h, w = a->w;
    switch (l->op) {
    case DDL__OP_CONV:
    case DDL__OP_DECONV: {
        char why[160];
        c = out;
        if (ddl__layer_out(l, a->c, a->h, a->w, out, &h, &w, why, sizeof why) != DDL_OK)
            return fail(b, &m->g, i, "%s", why);
        if ((h < 1 || w < 1) && ddl__layer_plain(l))
            return fail(b, &m->g, i, "a %dx%d input is too small for kernel %d, stride %d, pad %d", a->h, a->w, l->k,
                        l->stride, l->pad);
        if (h < 1 || w < 1)
            return fail(b, &m->g, i, "a %dx%d input is too small for its kernel, strides, pads and dilation", a->h,
                        a->w);
        break;
    }
    case DDL__OP_MAXPOOL:
    case DDL__OP_AVGPOOL: {
        char why[160];
        if (ddl__layer_plain(l) && (a->h < l->k || a->w < l->k))
            return fail(b, &m->g, i, "a %dx%d input is smaller than the %dx%d window", a->h, a->w, l->k, l->k);
        if (ddl__layer_out(l, a->c, a->h, a->w, 0, &h, &w, why, sizeof why) != DDL_OK)
            return fail(b, &m->g, i, "%s", why);
        if (h < 1 || w < 1)
            return fail(b, &m->g, i, "a %dx%d input is too small for its window, strides and pads", a->h, a->w);
        break;
    }
    case DDL__OP_GAP: h = w = 1; break;
    case DDL__OP_DENSE: c = out, h = w = 1; break;
    case DDL__OP_FLATTEN: c = (int64_t)a->size, h = w = 1; break;
    case DDL__OP_DROPOUT:
        r->p = l->p < 0.0f ? cfg->dropout : l->p;
        if (!(r->p >= 0.0f && r->p < 1.0f))
            return fail(b, &m->g, i, "drop probability %g: need 0 <= p < 1", (double)r->p);
        break;
    case DDL__OP_GROUPNORM:
        r->groups = l->groups ? l->groups : groups_for(a->c);
        if (a->c % r->groups)
            return fail(b, &m->g, i, "%d groups do not divide %d channels", r->groups, a->c);
        break;
    case DDL__OP_CONCAT:
        if (o->h != a->h || o->w != a->w)
            return fail(b, &m->g, i, "inputs of %dx%d and %dx%d: concat needs the same height and width", a->h, a->w,
                        o->h, o->w);
        c = (int64_t)a->c + o->c;
        break;
    case DDL__OP_AFFINE:
        if (l->out != a->c)
            return fail(b, &m->g, i, "%d scales and shifts for an input of %d channels", l->out, a->c);
        break;
    case DDL__OP_ADD:
        if (o->c != a->c || o->h != a->h || o->w != a->w)
            return fail(b, &m->g, i, "inputs of %dx%dx%d and %dx%dx%d: add needs the same shape", a->c, a->h, a->w,
                        o->c, o->h, o->w);
        break;
    case DDL__OP_MUL: {
        int a1 = a->h == 1 && a->w == 1, o1 = o->h == 1 && o->w == 1, planes = o->h == a->h && o->w == a->w;
        r->bcast = o->c == a->c ? (o1 && !a1 ? 1 : a1 && !o1 ? 2 : 0) : !planes ? 0 : o->c == 1 ? 3 : a->c == 1 ? 4 : 0;
        if ((o->c != a->c && !r->bcast) || (r->bcast % 3 == 0 && !planes))
            return fail(b, &m->g, i,
                        "inputs of %dx%dx%d and %dx%dx%d: mul needs the same shape, or one of C x 1 x 1 and the "
                        "other of C channels, or one of 1 x H x W and the other of H x W planes", a->c, a->h, a->w,
                        o->c, o->h, o->w);
        if (r->bcast == 2)
            h = o->h, w = o->w;
        if (r->bcast == 4)
            c = o->c;
        break;
    }
    case DDL__OP_SHUFFLE:
        if (a->c % l->groups)
            return fail(b, &m->g, i, "%d groups do not divide %d channels", l->groups, a->c);
        break;
    case DDL__OP_SLICE:
        if ((int64_t)l->k + l->out > a->c)
            return fail(b, &m->g, i, "channels %d to %d of an input of %d", l->k, l->k + l->out - 1, a->c);
        c = l->out;
        break;
    case DDL__OP_RESIZE: /* the scale times the size in float, truncated: onnxruntime's output size */
        h = l->k ? l->k : (int64_t)(l->scale_h * (float)a->h);
        w = l->stride ? l->stride : (int64_t)(l->scale_w * (float)a->w);
        if (h < 1 || w < 1)
            return fail(b, &m->g, i, "a %dx%d input scaled by %g, %g has no pixel left", a->h, a->w,
                        (double)l->scale_h, (double)l->scale_w);
        break;
    default: break;
    }
    if (c < 1 || c > INT_MAX || h > INT_MAX || w > INT_MAX || c * h > INT_MAX || c * h * w > INT_MAX)
        return fail(b, &m->g, i, "an output of %lld x %lld x %lld values: ddl takes 1 to %d per sample",
                    (long long)c, (long long)h, (long long)w, INT_MAX);
    r->c = (int)c, r->h = (int)h, r->w = (int)w;
    r->size = (size_t)r->c * (size_t)r->h * (size_t)r->w;
    return DDL_OK;
}

/* act_in_place: an activation may overwrite its input's output when nobody else reads it, its
 * gradient follows from its own output, and the input's backward does not read that output (a
 * conv, deconv or dense reads its input; a GroupNorm its input and, with a folded ReLU, its y). */
static int act_in_place(const ddl_graph *g, const ddl__layer *l, const rt *a, int sole)
{
    int in = g->layers[l->in[0]].op;
    return sole && !a->const_y && ddl__act_grad_from_y(l->act, l->alpha) &&
           (in == DDL__OP_CONV || in == DDL__OP_DECONV || in == DDL__OP_DENSE ||
            (in == DDL__OP_GROUPNORM && !a->fused_relu));
}

/* relu_foldable: layer i is a ReLU in place (not one a GroupNorm runs) whose one reader may run
 * its backward: its dy is then the reader's alone to write. */
static int relu_foldable(const ddl_graph *g, const rt *r, int i)
{
    const ddl__layer *l = &g->layers[i];
    return l->op == DDL__OP_RELU && r[i].alias && r[i].n_use == 1 && !r[l->in[0]].fused_relu;
}

/* plan: uses, gradients and aliases, once every shape is known. */
static int plan(gmodel *m, ddl_model_build *b)
{
    ddl_graph *g = &m->g;
    for (int i = 1; i < g->n; i++)
        for (int k = 0; k < 2; k++)
            if (g->layers[i].in[k] >= 0)
                m->r[g->layers[i].in[k]].n_use++;
    m->r[m->out].n_use++;
    for (int i = 1; i < g->n; i++)
        if (m->r[i].n_use == 0)
            return fail(b, g, i, "its output is not used: every layer must lead to the output (layer %d)", m->out);
    m->r[0].const_y = 1;
    for (int i = 1; i < g->n; i++) {
        const ddl__layer *l = &g->layers[i];
        rt *r = &m->r[i], *a = &m->r[l->in[0]];
        int op = l->op;
        r->grad = op == DDL__OP_CONV || op == DDL__OP_DECONV || op == DDL__OP_DENSE || op == DDL__OP_GROUPNORM ||
                  op == DDL__OP_BATCHNORM || a->grad || (l->in[1] >= 0 && m->r[l->in[1]].grad);
        int sole = a->n_use == 1; /* nobody else reads the input */
        if (op == DDL__OP_RELU && sole && g->layers[l->in[0]].op == DDL__OP_GROUPNORM && !a->fused_relu)
            a->fused_relu = 1, r->alias = 1;
        else if ((op == DDL__OP_RELU || op == DDL__OP_DROPOUT) && sole && !a->const_y && !a->keep_y) {
            r->alias = 1;
            a->relu_after = op == DDL__OP_RELU && g->layers[l->in[0]].op == DDL__OP_CONV;
        }
        else if (op == DDL__OP_FLATTEN && sole)
            r->alias = 1;
        else if (op == DDL__OP_ACT && act_in_place(g, l, a, sole))
            r->alias = 1;
        r->relu_before = op == DDL__OP_MAXPOOL && relu_foldable(g, m->r, l->in[0]);
        if (r->relu_before)
            a->relu_in_reader = 1;
        r->const_y = r->alias && a->const_y;
        r->keep_y = op == DDL__OP_ACT || op == DDL__OP_SOFTMAX || (r->alias && a->keep_y) ||
                    (op == DDL__OP_MAXPOOL && r->relu_before); /* its y is the mask */
    }
    return DDL_OK;
}

/* ---- build ---- */

static float *param(ddl_model_build *b, const char *prefix, const char *what, int n_dims, int d0, int d1, int d2,
                    int d3, int init, int fan_in, int fan_out, float **grad)
{
    char name[DDL_GRAPH_NAME_BYTES + 16];
    snprintf(name, sizeof name, "%s.%s", prefix, what);
    const int shape[4] = {d0, d1, d2, d3};
    return ddl_build_param(b, name, n_dims, shape, init, fan_in, fan_out, grad);
}

/* declare_params: layer i's parameters, PyTorch's names and layouts. */
static void declare_params(gmodel *m, int i, ddl_model_build *b)
{
    const ddl__layer *l = &m->g.layers[i];
    rt *r = &m->r[i];
    const rt *a = &m->r[l->in[0]];
    char pre[DDL_GRAPH_NAME_BYTES];
    ddl__graph_param_prefix(&m->g, i, pre, sizeof pre);
    int last = i == m->out, k = l->k, kw = l->kw ? l->kw : l->k, in = a->c, out = r->c;
    int init = last ? DDL_INIT_GLOROT : DDL_INIT_HE, groups = l->groups > 1 ? l->groups : 1;
    switch (l->op) {
    case DDL__OP_CONV: { /* (out, in / groups, k, kw) as Conv2d */
        int fi = in / groups * k * kw, fo = out / groups * k * kw;
        r->wt = param(b, pre, "weight", 4, out, in / groups, k, kw, init, fi, fo, &r->gw);
        if (l->bias)
            r->bs = param(b, pre, "bias", 1, out, 0, 0, 0, DDL_INIT_ZERO, fi, fo, &r->gb);
        break;
    }
    case DDL__OP_DECONV: /* (in, out, k, kw) as ConvTranspose2d */
        r->wt = param(b, pre, "weight", 4, in, out, k, kw, init, in, out * k * kw, &r->gw);
        r->bs = param(b, pre, "bias", 1, out, 0, 0, 0, DDL_INIT_ZERO, in, out * k * kw, &r->gb);
        break;
    case DDL__OP_DENSE: {
        int fi = (int)a->size;
        r->wt = param(b, pre, "weight", 2, out, fi, 0, 0, init, fi, out, &r->gw);
        if (l->bias)
            r->bs = param(b, pre, "bias", 1, out, 0, 0, 0, DDL_INIT_ZERO, fi, out, &r->gb);
        break;
    }
    case DDL__OP_GROUPNORM:
        r->wt = param(b, pre, "weight", 1, out, 0, 0, 0, DDL_INIT_ONE, out, out, &r->gw);
        r->bs = param(b, pre, "bias", 1, out, 0, 0, 0, DDL_INIT_ZERO, out, out, &r->gb);
        break;
    case DDL__OP_BATCHNORM: { /* the two buffers follow each other: the variance at run + C */
        char name[DDL_GRAPH_NAME_BYTES + 16];
        float *next_var;
        r->wt = param(b, pre, "weight", 1, out, 0, 0, 0, DDL_INIT_ONE, out, out, &r->gw);
        r->bs = param(b, pre, "bias", 1, out, 0, 0, 0, DDL_INIT_ZERO, out, out, &r->gb);
        snprintf(name, sizeof name, "%s.running_mean", pre);
        r->run = ddl_build_buffer(b, name, 1, &out, DDL_INIT_ZERO, &r->run_next);
        snprintf(name, sizeof name, "%s.running_var", pre);
        ddl_build_buffer(b, name, 1, &out, DDL_INIT_ONE, &next_var);
        break;
    }
    default: break;
    }
}

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* declare_memory: outputs, gradients and kernel state of every layer; the shared buffers. */
static void declare_memory(gmodel *m, ddl_model_build *b)
{
    size_t B = (size_t)m->batch, ws = 0, big = 0, bn_c = 0;
    for (int i = 1; i < m->g.n; i++) {
        rt *r = &m->r[i];
        const ddl__layer *l = &m->g.layers[i];
        size_t count = B * r->size;
        big = max_sz(big, count);
        if (!r->alias) {
            /* the output is written straight into the model's logits, unless its backward reads
             * it: the caller may have put dlogits there (ddl_model_check_grads does) */
            if (i != m->out || r->keep_y)
                r->y = ddl_build_scratch(b, count);
            if (r->grad && i != m->out) /* the output's is the caller's dlogits */
                r->dy = ddl_build_scratch(b, count);
        }
        const rt *a = &m->r[l->in[0]];
        ddl_conv2d geo = ddl__layer_conv2d(l, m->batch, a->c, a->h, a->w, r->c);
        geo.algo = m->conv_algo;
        if (l->op == DDL__OP_CONV)
            ws = max_sz(ws, ddl_conv2d_workspace(&geo));
        if (l->op == DDL__OP_DECONV)
            ws = max_sz(ws, ddl_deconv2d_workspace(&geo));
        if (l->op == DDL__OP_MAXPOOL)
            r->aux = ddl_build_scratch(b, count); /* int32 argmax, one per output */
        if (l->op == DDL__OP_DROPOUT && r->p > 0.0f)
            r->aux = ddl_build_scratch(b, count / 4 + 1); /* one byte per value */
        if (l->op == DDL__OP_GROUPNORM)
            r->aux = ddl_build_scratch(b, B * (size_t)r->groups * 2);
        if (l->op == DDL__OP_BATCHNORM) {
            r->aux = ddl_build_scratch(b, (size_t)r->c * 2);
            bn_c = max_sz(bn_c, (size_t)r->c);
            ddl__build_sync(b, 2 * (size_t)r->c);
        }
    }
    if (bn_c) {
        m->bn_rows = ddl_build_scratch(b, B * 2 * bn_c);
        m->bn_tot = (double *)(void *)ddl_build_scratch(b, 4 * bn_c); /* 2 C doubles; the arena aligns */
    }
    m->ws = ws ? ddl_build_scratch(b, ws) : NULL;
    m->tmp = ddl_build_scratch(b, big);
    m->tmp2 = ddl_build_scratch(b, big);
}

/* declare_layers: every layer after the input, for profiles (layer i is the model's i - 1): its
 * name, op, shape and FLOPs. */
static void declare_layers(gmodel *m, ddl_model_build *b)
{
    for (int i = 1; i < m->g.n; i++) {
        const ddl__layer *l = &m->g.layers[i];
        const rt *r = &m->r[i], *a = &m->r[l->in[0]];
        char name[DDL_GRAPH_NAME_BYTES];
        double fwd, bwd;
        ddl__graph_param_prefix(&m->g, i, name, sizeof name);
        ddl__layer_flops(l, a->c, a->h, a->w, r->c, a->grad, &fwd, &bwd);
        ddl_build_layer(b, name, ddl__graph_layer_op(l), r->c, r->h, r->w, fwd, bwd);
    }
}

static int graph_build(void *self, const ddl_model_config *cfg, ddl_model_build *b)
{
    gmodel *m = self;
    const ddl_graph *g = (const ddl_graph *)cfg->plugin_config;
    if (!g) {
        ddl_build_fail(b, "graph: the model config has no graph (ddl_model_config.plugin_config)");
        return DDL_EINVAL;
    }
    if (g->failed || g->n < 2) {
        char msg[DDL_ERR_BYTES];
        snprintf(msg, sizeof msg, "graph: %.240s", g->failed ? g->err : "no layer after the input");
        ddl_build_fail(b, msg);
        return DDL_EINVAL;
    }
    memcpy(&m->g, g, sizeof m->g);
    ddl_build_plugin_config(b, &m->g);
    m->out = ddl_graph_output_layer(&m->g);
    m->batch = cfg->batch;
    m->conv_algo = cfg->conv_algo;
    int rc = shape_input(m, cfg, b);
    for (int i = 1; i < m->g.n && rc == DDL_OK; i++)
        rc = shape_layer(m, i, cfg, b);
    if (rc == DDL_OK)
        rc = plan(m, b);
    if (rc != DDL_OK)
        return rc;
    const rt *o = &m->r[m->out];
    if (!o->grad)
        return fail(b, &m->g, m->out, "no layer before the output has parameters to train");
    if (o->c != cfg->n_classes)
        return fail(b, &m->g, m->out, "the output has %d channels, the model config %d classes", o->c,
                    cfg->n_classes);
    for (int i = 1; i < m->g.n; i++)
        declare_params(m, i, b);
    declare_memory(m, b);
    declare_layers(m, b);
    ddl_build_output(b, o->c, o->h, o->w);
    return DDL_OK;
}

/* ---- forward ---- */

/* resize_geo: layer i's resize at batch B; the scales a size implies as onnxruntime takes them. */
static ddl_resize2d resize_geo(const ddl__layer *l, const rt *a, const rt *r, int B)
{
    ddl_resize2d z = {.batch = B, .c = a->c, .in_h = a->h, .in_w = a->w, .out_h = r->h, .out_w = r->w,
                      .mode = l->mode, .coord = l->coord, .nearest = l->nearest, .scale_h = l->scale_h,
                      .scale_w = l->scale_w};
    if (l->k)
        z.scale_h = (float)r->h / (float)a->h, z.scale_w = (float)r->w / (float)a->w;
    return z;
}

/* softmax_dims: a softmax layer's (outer, n, inner): the batch and the axes before its own, its
 * axes, the axes after them, of (B, C, H, W). */
static void softmax_dims(const ddl__layer *l, const rt *r, int B, size_t sz[3])
{
    const size_t d[4] = {(size_t)B, (size_t)r->c, (size_t)r->h, (size_t)r->w};
    sz[0] = sz[1] = sz[2] = 1;
    for (int k = 0; k < 4; k++)
        sz[k < l->axis ? 0 : k <= l->axis_to ? 1 : 2] *= d[k];
}

/* bn_sync_forward: a batchnorm in training under a trainer's sync hook: the global batch's
 * mean (one round), then its variance around it (another), then y and the running statistics'
 * next values as every part of the batch computes them. B may be 0 (a part of no samples). */
static void bn_sync_forward(gmodel *m, const ddl__layer *l, rt *r, const rt *a, int B)
{
    int C = r->c, S = r->h * r->w;
    long n_all;
    ddl__bn_sync_rows(B, C, S, a->y, NULL, m->bn_rows);
    (void)ddl__model_sync(m, m->bn_rows, B, C, m->bn_tot, &n_all); /* a failure is the trainer's to report */
    double count = (double)n_all * S;
    ddl__bn_sync_mean(C, count, m->bn_tot, r->aux);
    ddl__bn_sync_rows(B, C, S, a->y, r->aux, m->bn_rows);
    (void)ddl__model_sync(m, m->bn_rows, B, C, m->bn_tot, &n_all);
    ddl__bn_sync_forward(B, C, S, count, l->momentum, l->eps, m->bn_tot, a->y, r->wt, r->bs, r->run, r->run + C,
                         r->y, r->aux, r->run_next, r->run_next + C);
}

/* bn_sync_backward: its backward: the global sums of dy and dy (x - mean) in one round. */
static void bn_sync_backward(gmodel *m, rt *r, const rt *a, int B, float *dx)
{
    int C = r->c, S = r->h * r->w;
    long n_all;
    ddl__bn_sync_grad_rows(B, C, S, a->y, r->aux, r->dy, m->bn_rows);
    (void)ddl__model_sync(m, m->bn_rows, B, 2 * C, m->bn_tot, &n_all);
    ddl__bn_sync_backward(B, C, S, (double)n_all * S, a->y, r->wt, r->aux, r->dy, m->bn_rows, m->bn_tot, dx, r->gw,
                          r->gb);
}

static void layer_forward(gmodel *m, int i, int B, int training, ddl_rng *rng)
{
    const ddl__layer *l = &m->g.layers[i];
    rt *r = &m->r[i];
    const rt *a = &m->r[l->in[0]], *o = l->in[1] >= 0 ? &m->r[l->in[1]] : NULL;
    size_t count = (size_t)B * r->size;
    ddl_conv2d geo = ddl__layer_conv2d(l, B, a->c, a->h, a->w, r->c);
    geo.algo = m->conv_algo;
    ddl_pool2d pg = ddl__layer_pool2d(l);
    if (r->alias)
        r->y = a->y, r->dy = a->dy;
    switch (l->op) {
    case DDL__OP_CONV:
        (r->relu_after ? ddl__conv2d_forward_relu : ddl_conv2d_forward)(&geo, a->y, r->wt, r->bs, r->y, m->ws);
        break;
    case DDL__OP_DECONV: ddl_deconv2d_forward(&geo, a->y, r->wt, r->bs, r->y, m->ws); break;
    case DDL__OP_MAXPOOL: ddl_maxpool2d_forward(&pg, B, a->c, a->h, a->w, a->y, r->y, r->aux); break;
    case DDL__OP_AVGPOOL: ddl_avgpool2d_forward(&pg, B, a->c, a->h, a->w, a->y, r->y); break;
    case DDL__OP_GAP: ddl_global_avgpool_forward(B, a->c, a->h * a->w, a->y, r->y); break;
    case DDL__OP_DENSE: ddl_dense_forward(B, (int)a->size, r->c, a->y, r->wt, r->bs, r->y); break;
    case DDL__OP_RELU:
        if (!(r->alias && (a->fused_relu || a->relu_after)))
            ddl_relu_forward(count, a->y, r->y);
        break;
    case DDL__OP_DROPOUT:
        if (r->p > 0.0f)
            ddl_dropout_forward(count, r->p, training, rng, a->y, r->y, r->aux);
        else if (r->y != a->y)
            memcpy(r->y, a->y, count * sizeof *r->y);
        break;
    case DDL__OP_GROUPNORM:
        if (r->fused_relu)
            ddl_groupnorm_relu_forward(B, r->c, r->h * r->w, r->groups, a->y, r->wt, r->bs, r->y, r->aux);
        else
            ddl_groupnorm_forward(B, r->c, r->h * r->w, r->groups, a->y, r->wt, r->bs, r->y, r->aux);
        break;
    case DDL__OP_FLATTEN:
        if (!r->alias)
            memcpy(r->y, a->y, count * sizeof *r->y);
        break;
    case DDL__OP_BATCHNORM:
        if (m->synced) /* the whole global batch's statistics */
            bn_sync_forward(m, l, r, a, B);
        else if (training) /* the batch's statistics; the running ones' next values for the model to keep */
            ddl_batchnorm_forward_train(B, r->c, r->h * r->w, l->momentum, l->eps, a->y, r->wt, r->bs, r->run,
                                        r->run + r->c, r->y, r->aux, r->run_next, r->run_next + r->c);
        else
            ddl_batchnorm_forward_eval(B, r->c, r->h * r->w, l->eps, a->y, r->wt, r->bs, r->run, r->run + r->c,
                                       r->y, r->aux);
        break;
    case DDL__OP_CONCAT: ddl_concat_channels(B, a->c, o->c, a->h * a->w, a->y, o->y, r->y); break;
    case DDL__OP_ADD: ddl_add(count, a->y, o->y, r->y); break;
    case DDL__OP_MUL: { /* the full input first, the broadcast one second */
        const rt *f = r->bcast % 2 == 0 && r->bcast ? o : a, *v = f == o ? a : o;
        if (r->bcast >= 3)
            ddl__mul_spatial_forward(B, r->c, (size_t)r->h * r->w, f->y, v->y, r->y);
        else
            ddl__mul_forward(B, r->c, (size_t)r->h * r->w, v->size / (size_t)r->c, f->y, v->y, r->y);
        break;
    }
    case DDL__OP_SHUFFLE: ddl__shuffle_channels(B, a->c, l->groups, (size_t)a->h * a->w, a->y, r->y, 0); break;
    case DDL__OP_SLICE: ddl__slice_channels(B, a->c, l->k, l->out, (size_t)a->h * a->w, a->y, r->y); break;
    case DDL__OP_ACT: ddl_act_forward(l->act, l->alpha, l->beta, count, a->y, r->y); break;
    case DDL__OP_SOFTMAX: {
        size_t sz[3];
        softmax_dims(l, r, B, sz);
        ddl_softmax_forward(sz[0], sz[1], sz[2], l->act, a->y, r->y);
        break;
    }
    case DDL__OP_RESIZE: {
        ddl_resize2d z = resize_geo(l, a, r, B);
        ddl_resize2d_forward(&z, a->y, r->y);
        break;
    }
    case DDL__OP_AFFINE:
        ddl__affine_channels_forward(B, r->c, (size_t)r->h * r->w, a->y, m->g.consts + l->k, m->g.consts + l->k + r->c,
                                     r->y);
        break;
    default: break;
    }
}

static void graph_forward(void *self, const float *x, int B, int training, ddl_rng *rng, float *logits)
{
    gmodel *m = self;
    m->r[0].y = (float *)(uintptr_t)x; /* read only: const_y keeps every layer from writing it */
    m->training = training;
    m->synced = training && ddl__model_synced(m);
    rt *o = &m->r[m->out];
    if (!o->alias && !o->keep_y)
        o->y = logits;
    int prof = ddl_model_profiling(m); /* once a pass: untimed, a test per layer */
    for (int i = 1; i < m->g.n; i++) {
        if (B > 0 || m->g.layers[i].op == DDL__OP_BATCHNORM) /* B 0: a synchronised part's rounds alone */
            layer_forward(m, i, B, training, rng);
        if (prof)
            ddl_model_layer_done(m, i - 1);
    }
    if (B > 0 && (o->alias || o->keep_y))
        memcpy(logits, o->y, (size_t)B * o->size * sizeof *logits);
}

/* ---- backward ---- */

/* target: where layer i's gradient from one reader goes: its dy if nobody wrote it yet, else a
 * scratch buffer that settle() adds in; NULL when nothing before i needs it. */
static float *target(gmodel *m, int i, float *scratch)
{
    rt *r = &m->r[i];
    if (!r->grad)
        return NULL;
    if (!r->written) {
        r->written = 1;
        return r->dy;
    }
    return scratch;
}

static void settle(gmodel *m, int i, const float *dx, size_t count)
{
    float *dy = m->r[i].dy;
    if (dx && dx != dy)
        ddl_add(count, dy, dx, dy);
}

/* pass: hand dy unchanged to layer i (add's inputs, a copying flatten, a dropout of 0). */
static void pass(gmodel *m, int i, const float *dy, size_t count)
{
    float *dx = target(m, i, m->tmp);
    if (dx && dx != dy && dx != m->tmp)
        memcpy(dx, dy, count * sizeof *dx);
    else
        settle(m, i, dx == m->tmp ? dy : NULL, count);
}

static void layer_backward(gmodel *m, int i, int B)
{
    const ddl__layer *l = &m->g.layers[i];
    rt *r = &m->r[i];
    int ia = l->in[0], ib = l->in[1];
    const rt *a = &m->r[ia], *o = ib >= 0 ? &m->r[ib] : NULL;
    size_t count = (size_t)B * r->size, ca = (size_t)B * a->size;
    ddl_conv2d geo = ddl__layer_conv2d(l, B, a->c, a->h, a->w, r->c);
    geo.algo = m->conv_algo;
    ddl_pool2d pg = ddl__layer_pool2d(l);
    float *dx = NULL;
    switch (l->op) {
    case DDL__OP_CONV:
        dx = target(m, ia, m->tmp);
        ddl_conv2d_backward(&geo, a->y, r->wt, r->dy, dx, r->gw, r->bs ? r->gb : NULL, m->ws);
        break;
    case DDL__OP_DECONV:
        dx = target(m, ia, m->tmp);
        ddl_deconv2d_backward(&geo, a->y, r->wt, r->dy, dx, r->gw, r->gb, m->ws);
        break;
    case DDL__OP_DENSE:
        dx = target(m, ia, m->tmp);
        ddl_dense_backward(B, (int)a->size, r->c, a->y, r->wt, r->dy, dx, r->gw, r->gb);
        break;
    case DDL__OP_GROUPNORM:
        dx = target(m, ia, m->tmp);
        if (r->fused_relu)
            ddl_groupnorm_relu_backward(B, r->c, r->h * r->w, r->groups, a->y, r->wt, r->aux, r->y, r->dy, dx, r->gw,
                                        r->gb);
        else
            ddl_groupnorm_backward(B, r->c, r->h * r->w, r->groups, a->y, r->wt, r->aux, r->dy, dx, r->gw, r->gb);
        break;
    case DDL__OP_BATCHNORM: /* through the batch statistics after a training pass */
        dx = target(m, ia, m->tmp);
        if (m->synced && m->training) {
            bn_sync_backward(m, r, a, B, dx);
            break;
        }
        ddl_batchnorm_backward(B, r->c, r->h * r->w, m->training, a->y, r->wt, r->aux, r->dy, dx, r->gw, r->gb);
        break;
    case DDL__OP_MAXPOOL:
        if ((dx = target(m, ia, m->tmp)))
            ddl__maxpool2d_backward_relu(&pg, B, a->c, a->h, a->w, r->dy, r->aux, r->relu_before ? r->y : NULL, dx);
        break;
    case DDL__OP_AVGPOOL:
        if ((dx = target(m, ia, m->tmp)))
            ddl_avgpool2d_backward(&pg, B, a->c, a->h, a->w, r->dy, dx);
        break;
    case DDL__OP_GAP:
        if ((dx = target(m, ia, m->tmp)))
            ddl_global_avgpool_backward(B, a->c, a->h * a->w, r->dy, dx);
        break;
    case DDL__OP_RELU:
        if (r->alias && (a->fused_relu || r->relu_in_reader)) /* the groupnorm's or the reader's backward does it */
            m->r[ia].written = 1;
        else if ((dx = target(m, ia, m->tmp)))
            ddl_relu_backward(count, r->y, r->dy, dx);
        break;
    case DDL__OP_DROPOUT:
        if (r->p <= 0.0f || !m->training)
            r->alias ? (void)(m->r[ia].written = 1) : pass(m, ia, r->dy, count);
        else if ((dx = target(m, ia, m->tmp)))
            ddl_dropout_backward(count, r->p, r->aux, r->dy, dx);
        break;
    case DDL__OP_FLATTEN:
        r->alias ? (void)(m->r[ia].written = 1) : pass(m, ia, r->dy, count);
        break;
    case DDL__OP_CONCAT: {
        float *da = target(m, ia, m->tmp), *db = target(m, ib, m->tmp2);
        ddl_split_channels(B, a->c, o->c, a->h * a->w, r->dy, da ? da : m->tmp, db ? db : m->tmp2);
        settle(m, ib, db == m->tmp2 ? db : NULL, (size_t)B * o->size);
        dx = da;
        break;
    }
    case DDL__OP_ADD:
        pass(m, ia, r->dy, count);
        pass(m, ib, r->dy, count);
        break;
    case DDL__OP_MUL: {
        int swap = r->bcast % 2 == 0 && r->bcast, fi = swap ? ib : ia, vi = swap ? ia : ib; /* full, broadcast */
        const rt *f = &m->r[fi], *v = &m->r[vi];
        float *df = target(m, fi, m->tmp), *dv = target(m, vi, m->tmp2);
        if ((df || dv) && r->bcast >= 3)
            ddl__mul_spatial_backward(B, r->c, (size_t)r->h * r->w, f->y, v->y, r->dy, df, dv);
        else if (df || dv)
            ddl__mul_backward(B, r->c, (size_t)r->h * r->w, v->size / (size_t)r->c, f->y, v->y, r->dy, df, dv);
        settle(m, fi, df == m->tmp ? df : NULL, (size_t)B * f->size);
        settle(m, vi, dv == m->tmp2 ? dv : NULL, (size_t)B * v->size);
        break;
    }
    case DDL__OP_SHUFFLE:
        if ((dx = target(m, ia, m->tmp)))
            ddl__shuffle_channels(B, a->c, l->groups, (size_t)a->h * a->w, r->dy, dx, 1);
        break;
    case DDL__OP_SLICE: /* a gradient already there: this slice's channels added into it alone */
        if (a->grad) {
            int add = m->r[ia].written;
            m->r[ia].written = 1;
            ddl__slice_channels_backward(B, a->c, l->k, l->out, (size_t)a->h * a->w, r->dy, m->r[ia].dy, add);
        }
        break;
    case DDL__OP_ACT: /* in place: a->y is r->y, which the kinds that may run so read alone */
        if ((dx = target(m, ia, m->tmp)))
            ddl_act_backward(l->act, l->alpha, l->beta, count, a->y, r->y, r->dy, dx);
        break;
    case DDL__OP_SOFTMAX:
        if ((dx = target(m, ia, m->tmp))) {
            size_t sz[3];
            softmax_dims(l, r, B, sz);
            ddl_softmax_backward(sz[0], sz[1], sz[2], l->act, r->y, r->dy, dx);
        }
        break;
    case DDL__OP_RESIZE:
        if ((dx = target(m, ia, m->tmp))) {
            ddl_resize2d z = resize_geo(l, a, r, B);
            ddl_resize2d_backward(&z, r->dy, dx);
        }
        break;
    case DDL__OP_AFFINE:
        if ((dx = target(m, ia, m->tmp)))
            ddl__affine_channels_backward(B, r->c, (size_t)r->h * r->w, r->dy, m->g.consts + l->k, dx);
        break;
    default: break;
    }
    if (dx == m->tmp)
        settle(m, ia, dx, ca);
}

static void graph_backward(void *self, const float *x, int B, const float *dlogits, ddl_backward *pass)
{
    gmodel *m = self;
    m->r[0].y = (float *)(uintptr_t)x;
    for (int i = 0; i < m->g.n; i++)
        m->r[i].written = 0;
    rt *o = &m->r[m->out];
    if (o->alias) /* the output's gradient lives in its input's buffer */
        memcpy(o->dy, dlogits, (size_t)B * o->size * sizeof *o->dy);
    else
        o->dy = (float *)(uintptr_t)dlogits; /* read only: nothing writes the output's dy */
    o->written = 1;
    int prof = ddl_model_profiling(m);
    for (int i = m->g.n - 1; i >= 1; i--) {
        if (B == 0 && m->g.layers[i].op != DDL__OP_BATCHNORM) /* a synchronised part of no samples */
            continue;
        layer_backward(m, i, B);
        if (prof)
            ddl_model_layer_done(m, i - 1);
        if (m->r[i].gw) /* this layer's gradients, and every later one's, are final */
            ddl_backward_ready(pass, m->r[i].gw);
    }
}

/* ---- plugin ---- */

static size_t graph_describe(const void *self, char *buf, size_t bytes)
{
    return ddl_graph_format(&((const gmodel *)self)->g, buf, bytes);
}

static const ddl_model_plugin graph_plugin = {
    .version = DDL_MODEL_VERSION,
    .name = "graph",
    .self_bytes = sizeof(gmodel),
    .build = graph_build,
    .forward = graph_forward,
    .backward = graph_backward,
    .describe = graph_describe,
};

const ddl_model_plugin *ddl_model_graph(void) { return &graph_plugin; }

/* shape_copy: a zeroed gmodel (about 200 KB: from malloc, not the stack) holding a copy of g's
 * first n layers, to shape them without building; NULL without memory. */
static gmodel *shape_copy(const ddl_graph *g, int n)
{
    gmodel *m = (gmodel *)ddl__alloc(NULL, sizeof *m);
    if (m) {
        memset(m, 0, sizeof *m);
        memcpy(&m->g, g, sizeof m->g);
        m->g.n = n;
    }
    return m;
}

int ddl_graph_output_shape(const ddl_graph *g, const ddl_model_config *cfg, int *c, int *h, int *w)
{
    if (!g || !cfg || g->failed || g->n < 2)
        return DDL_EINVAL;
    gmodel *m = shape_copy(g, g->n);
    if (!m)
        return DDL_ENOMEM;
    int rc = shape_input(m, cfg, NULL);
    for (int i = 1; i < g->n && rc == DDL_OK; i++)
        rc = shape_layer(m, i, cfg, NULL);
    if (rc == DDL_OK) {
        const rt *o = &m->r[ddl_graph_output_layer(g)];
        *c = o->c, *h = o->h, *w = o->w;
    }
    ddl__free(NULL, m);
    return rc;
}

int ddl__graph_layer_shape(const ddl_graph *g, int i, int *c, int *h, int *w, char *why, size_t why_bytes)
{
    if (!g || g->failed || i < 0 || i >= g->n)
        return ddl__errf(why, why_bytes, DDL_EINVAL, "layer %d: not in the graph (0 to %d)", i, g ? g->n - 1 : -1);
    const ddl__layer *in = &g->layers[0];
    if (in->out < 1 || in->k < 1 || in->stride < 1)
        return ddl__errf(why, why_bytes, DDL_EINVAL, "layer 0 (input): its size is not fixed");
    ddl_model_config cfg = {.batch = 1, .in_c = in->out, .in_h = in->k, .in_w = in->stride, .n_classes = 2};
    gmodel *m = shape_copy(g, i + 1);
    if (!m)
        return ddl__errf(why, why_bytes, DDL_ENOMEM, "layer %d: no memory to find its shape", i);
    int rc = shape_input(m, &cfg, NULL);
    for (int k = 1; k <= i && rc == DDL_OK; k++)
        rc = shape_layer(m, k, &cfg, NULL);
    if (rc != DDL_OK)
        ddl__errf(why, why_bytes, rc, "%s", m->g.err);
    else
        *c = m->r[i].c, *h = m->r[i].h, *w = m->r[i].w;
    ddl__free(NULL, m);
    return rc;
}

int ddl__graph_shape(const ddl_model *m, int i, const ddl_graph **g, int *c, int *h, int *w, int *groups)
{
    if (!m || m->plugin != &graph_plugin)
        return 0;
    const gmodel *gm = m->self;
    if (i < 0 || i >= gm->g.n)
        return 0;
    const rt *r = &gm->r[i];
    *g = &gm->g, *c = r->c, *h = r->h, *w = r->w, *groups = r->groups;
    return 1;
}
