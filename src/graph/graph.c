/* graph.c - building a layer graph from C: one call per layer, each checking what it can before
 * the shapes are known (inputs earlier than the layer, sizes, names); errors are sticky and name
 * the layer. Knows nothing of models or memory beyond the graph's own bytes. */
#include "impl.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

static const char *const op_names[DDL__N_OPS] = {"input",   "conv",    "deconv",    "maxpool", "avgpool",
                                                 "gap",     "dense",   "relu",      "dropout", "groupnorm",
                                                 "flatten", "concat",  "add",       "act",     "softmax",
                                                 "resize",  "batchnorm", "affine",    "mul",     "shuffle",
                                                 "slice"};

const char *ddl__graph_op_name(int op) { return op >= 0 && op < DDL__N_OPS ? op_names[op] : NULL; }

int ddl__graph_op_find(const char *name)
{
    for (int i = 0; i < DDL__N_OPS; i++)
        if (strcmp(op_names[i], name) == 0)
            return i;
    return -1;
}

/* the kinds' names in the text format, by DDL_ACT_* */
static const char *const act_names[] = {NULL,   "leakyrelu", "sigmoid",     "tanh", "silu", "gelu",
                                        "gelu_tanh", "hardswish", "hardsigmoid", "clip", "elu"};
#define N_ACT ((int)(sizeof act_names / sizeof act_names[0]))

const char *ddl__graph_act_name(int kind) { return kind > 0 && kind < N_ACT ? act_names[kind] : NULL; }

int ddl__graph_act_find(const char *name)
{
    for (int i = 1; i < N_ACT; i++)
        if (strcmp(act_names[i], name) == 0)
            return i;
    return 0;
}

const char *ddl__graph_layer_op(const ddl__layer *l)
{
    if (l->op == DDL__OP_ACT && ddl__graph_act_name(l->act))
        return ddl__graph_act_name(l->act);
    if (l->op == DDL__OP_SOFTMAX)
        return l->act ? "logsoftmax" : "softmax";
    return ddl__graph_op_name(l->op);
}

int ddl__graph_fail(ddl_graph *g, const char *fmt, ...)
{
    if (!g->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(g->err, sizeof g->err, fmt, ap);
        va_end(ap);
        g->failed = 1;
    }
    return -1;
}

void ddl__graph_param_prefix(const ddl_graph *g, int i, char *out, size_t out_bytes)
{
    if (g->layers[i].name[0])
        snprintf(out, out_bytes, "%s", g->layers[i].name);
    else
        snprintf(out, out_bytes, "%d", i - 1);
}

/* ---- lifecycle ---- */

size_t ddl_graph_sizeof(void) { return sizeof(ddl_graph); }

ddl_graph *ddl_graph_init(void *mem, size_t bytes)
{
    if (!mem || bytes < sizeof(ddl_graph) || (uintptr_t)mem % DDL_ALIGN)
        return NULL;
    ddl_graph *g = mem;
    memset(g, 0, sizeof *g);
    g->output = -1;
    return g;
}

int ddl_graph_create(const ddl_allocator *alloc, ddl_graph **out)
{
    if (!out)
        return DDL_EINVAL;
    void *mem = ddl__alloc(alloc, sizeof(ddl_graph));
    *out = mem ? ddl_graph_init(mem, sizeof(ddl_graph)) : NULL;
    return *out ? DDL_OK : DDL_ENOMEM;
}

void ddl_graph_destroy(ddl_graph *g, const ddl_allocator *alloc)
{
    if (g)
        ddl__free(alloc, g);
}

/* ---- layers ---- */

static int name_ok(const char *s)
{
    if (!isalpha((unsigned char)s[0]))
        return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '.' && *s != '_' && *s != '-')
            return 0;
    return 1;
}

/* add: append a layer of op with inputs a and b (-1: none) after checking them; its index or -1. */
static int add(ddl_graph *g, int op, int a, int b, const char *name)
{
    if (!g)
        return -1;
    if (g->failed)
        return -1;
    const char *what = op_names[op];
    if (g->n >= DDL_GRAPH_MAX_LAYERS)
        return ddl__graph_fail(g, "layer %d (%s): a graph holds at most %d layers", g->n, what,
                               DDL_GRAPH_MAX_LAYERS);
    if (op != DDL__OP_INPUT && g->n == 0)
        return ddl__graph_fail(g, "layer 0 (%s): the first layer must be the input", what);
    if (op == DDL__OP_INPUT && g->n > 0)
        return ddl__graph_fail(g, "layer %d (input): a graph has one input, layer 0", g->n);
    const int in[2] = {a, b};
    for (int i = 0; i < 2; i++)
        if (in[i] != -1 && (in[i] < 0 || in[i] >= g->n))
            return ddl__graph_fail(g, "layer %d (%s): input %d is not an earlier layer (0 to %d)", g->n, what, in[i],
                                   g->n - 1);
    if (op != DDL__OP_INPUT && a < 0)
        return ddl__graph_fail(g, "layer %d (%s): no input", g->n, what);
    if (name && name[0] && (strlen(name) >= DDL_GRAPH_NAME_BYTES || !name_ok(name)))
        return ddl__graph_fail(g, "layer %d (%s): name \"%.40s\": use 1 to %d letters, digits, '.', '_' or '-', "
                               "starting with a letter", g->n, what, name, DDL_GRAPH_NAME_BYTES - 1);
    if (name && name[0])
        for (int i = 0; i < g->n; i++)
            if (strcmp(g->layers[i].name, name) == 0)
                return ddl__graph_fail(g, "layer %d (%s): name \"%s\" is already layer %d's", g->n, what, name, i);
    ddl__layer *l = &g->layers[g->n];
    memset(l, 0, sizeof *l);
    l->op = (uint8_t)op;
    l->in[0] = (int16_t)a;
    l->in[1] = (int16_t)b;
    if (name)
        snprintf(l->name, sizeof l->name, "%s", name);
    return g->n++;
}

/* size_ok: n is a size (>= 1) or, where allowed, DDL_CLASSES. */
static int size_ok(int n, int classes_ok) { return n >= 1 || (classes_ok && n == DDL_CLASSES); }

int ddl_graph_input(ddl_graph *g, int c, int h, int w)
{
    int i = add(g, DDL__OP_INPUT, -1, -1, "");
    if (i < 0)
        return -1;
    const int d[3] = {c, h, w};
    for (int k = 0; k < 3; k++)
        if (d[k] < DDL_CLASSES)
            return ddl__graph_fail(g, "layer 0 (input): size %d: give >= 1, or 0 to take it from the config", d[k]);
    g->layers[i].out = c > 0 ? c : DDL_CLASSES;
    g->layers[i].k = h > 0 ? h : DDL_CLASSES;
    g->layers[i].stride = w > 0 ? w : DDL_CLASSES;
    return i;
}

static int conv_like(ddl_graph *g, int op, int x, const char *name, int out_c, int k, int stride, int pad, int bias)
{
    int i = add(g, op, x, -1, name);
    if (i < 0)
        return -1;
    if (!size_ok(out_c, 1) || k < 1 || stride < 1 || pad < 0 || pad >= k)
        return ddl__graph_fail(g, "layer %d (%s): %d channels, kernel %d, stride %d, pad %d: need channels, kernel "
                               "and stride >= 1 and 0 <= pad < kernel", i, op_names[op], out_c, k, stride, pad);
    ddl__layer *l = &g->layers[i];
    l->out = out_c, l->k = k, l->stride = stride, l->pad = pad, l->bias = (uint8_t)(bias != 0);
    return i;
}

int ddl_graph_conv2d(ddl_graph *g, int x, const char *name, int out_c, int k, int stride, int pad, int bias)
{
    return conv_like(g, DDL__OP_CONV, x, name, out_c, k, stride, pad, bias);
}

int ddl_graph_deconv2d(ddl_graph *g, int x, const char *name, int out_c, int k, int stride, int pad)
{
    return conv_like(g, DDL__OP_DECONV, x, name, out_c, k, stride, pad, 1);
}

static int pool(ddl_graph *g, int op, int x, int k, int stride)
{
    int i = add(g, op, x, -1, "");
    if (i < 0)
        return -1;
    if (k < 1 || stride < 1)
        return ddl__graph_fail(g, "layer %d (%s): kernel %d, stride %d: both must be >= 1", i, op_names[op], k, stride);
    g->layers[i].k = k;
    g->layers[i].stride = stride;
    return i;
}

int ddl_graph_maxpool(ddl_graph *g, int x, int k, int stride) { return pool(g, DDL__OP_MAXPOOL, x, k, stride); }
int ddl_graph_avgpool(ddl_graph *g, int x, int k, int stride) { return pool(g, DDL__OP_AVGPOOL, x, k, stride); }
int ddl_graph_global_avgpool(ddl_graph *g, int x) { return add(g, DDL__OP_GAP, x, -1, ""); }
int ddl_graph_relu(ddl_graph *g, int x) { return add(g, DDL__OP_RELU, x, -1, ""); }
int ddl_graph_flatten(ddl_graph *g, int x) { return add(g, DDL__OP_FLATTEN, x, -1, ""); }
int ddl_graph_concat(ddl_graph *g, int a, int b)
{
    return b < 0 && g && !g->failed ? ddl__graph_fail(g, "layer %d (concat): needs two inputs", g->n)
                                    : add(g, DDL__OP_CONCAT, a, b, "");
}
int ddl_graph_add(ddl_graph *g, int a, int b)
{
    return b < 0 && g && !g->failed ? ddl__graph_fail(g, "layer %d (add): needs two inputs", g->n)
                                    : add(g, DDL__OP_ADD, a, b, "");
}

int ddl_graph_mul(ddl_graph *g, int a, int b)
{
    return b < 0 && g && !g->failed ? ddl__graph_fail(g, "layer %d (mul): needs two inputs", g->n)
                                    : add(g, DDL__OP_MUL, a, b, "");
}

int ddl_graph_shuffle(ddl_graph *g, int x, int groups)
{
    int i = add(g, DDL__OP_SHUFFLE, x, -1, "");
    if (i >= 0 && groups < 2)
        return ddl__graph_fail(g, "layer %d (shuffle): %d groups: need 2 or more", i, groups);
    if (i >= 0)
        g->layers[i].groups = groups;
    return i;
}

int ddl_graph_slice(ddl_graph *g, int x, int start, int count)
{
    int i = add(g, DDL__OP_SLICE, x, -1, "");
    if (i >= 0 && (start < 0 || count < 1))
        return ddl__graph_fail(g, "layer %d (slice): channels from %d, %d of them: need a start >= 0 and a count >= 1",
                               i, start, count);
    if (i >= 0)
        g->layers[i].k = start, g->layers[i].out = count;
    return i;
}

int ddl_graph_affine(ddl_graph *g, int x, int channels, const float *scale, const float *shift)
{
    int i = add(g, DDL__OP_AFFINE, x, -1, "");
    if (i < 0)
        return -1;
    if (channels < 1 || channels > DDL_GRAPH_MAX_AFFINE || !scale || !shift)
        return ddl__graph_fail(g, "layer %d (affine): %d channels: need 1 to %d, a scale and a shift each", i,
                               channels, DDL_GRAPH_MAX_AFFINE);
    if (g->n_consts + 2 * channels > 2 * DDL_GRAPH_MAX_AFFINE)
        return ddl__graph_fail(g, "layer %d (affine): %d channels: the graph's affine layers hold %d in all", i,
                               channels, DDL_GRAPH_MAX_AFFINE);
    for (int c = 0; c < channels; c++)
        if (!isfinite(scale[c]) || !isfinite(shift[c]))
            return ddl__graph_fail(g, "layer %d (affine): channel %d: scale %g, shift %g: need finite values", i, c,
                                   (double)scale[c], (double)shift[c]);
    ddl__layer *l = &g->layers[i];
    l->out = channels;
    l->k = g->n_consts;
    memcpy(g->consts + g->n_consts, scale, (size_t)channels * sizeof *scale);
    memcpy(g->consts + g->n_consts + channels, shift, (size_t)channels * sizeof *shift);
    g->n_consts += 2 * channels;
    return i;
}

int ddl_graph_linear(ddl_graph *g, int x, const char *name, int out, int bias)
{
    int i = add(g, DDL__OP_DENSE, x, -1, name);
    if (i < 0)
        return -1;
    if (!size_ok(out, 1))
        return ddl__graph_fail(g, "layer %d (dense): %d outputs: need >= 1 (or DDL_CLASSES)", i, out);
    g->layers[i].out = out;
    g->layers[i].bias = (uint8_t)(bias != 0);
    return i;
}

int ddl_graph_dense(ddl_graph *g, int x, const char *name, int out) { return ddl_graph_linear(g, x, name, out, 1); }

int ddl_graph_dropout(ddl_graph *g, int x, float p)
{
    int i = add(g, DDL__OP_DROPOUT, x, -1, "");
    if (i < 0)
        return -1;
    if (!(p < 1.0f)) /* also NaN */
        return ddl__graph_fail(g, "layer %d (dropout): p %g: need p < 1 (negative: the config's dropout)", i,
                               (double)p);
    g->layers[i].p = p;
    return i;
}

int ddl_graph_groupnorm(ddl_graph *g, int x, const char *name, int groups)
{
    int i = add(g, DDL__OP_GROUPNORM, x, -1, name);
    if (i < 0)
        return -1;
    if (groups < 0)
        return ddl__graph_fail(g, "layer %d (groupnorm): %d groups: need >= 1, or 0 for automatic", i, groups);
    g->layers[i].groups = groups;
    return i;
}

/* ---- activations ---- */

int ddl_graph_act(ddl_graph *g, int x, int kind, float alpha, float beta)
{
    const char *what = ddl__graph_act_name(kind);
    int i = add(g, DDL__OP_ACT, x, -1, "");
    if (i < 0)
        return -1;
    if (!what)
        return ddl__graph_fail(g, "layer %d (act): kind %d is no DDL_ACT_* (1 to %d)", i, kind, N_ACT - 1);
    /* the bounds of a clip may be infinite (no bound on that side); nothing may be NaN */
    int finite = kind == DDL_ACT_CLIP ? alpha == alpha && beta == beta : isfinite(alpha) && isfinite(beta);
    if (!finite || (kind == DDL_ACT_CLIP && alpha > beta))
        return ddl__graph_fail(g, "layer %d (%s): alpha %g, beta %g: %s", i, what, (double)alpha, (double)beta,
                               kind == DDL_ACT_CLIP ? "need min <= max, neither NaN" : "need finite values");
    ddl__layer *l = &g->layers[i];
    l->act = (uint8_t)kind;
    l->alpha = alpha;
    l->beta = beta;
    return i;
}

int ddl_graph_softmax(ddl_graph *g, int x, int axis, int to, int log)
{
    int i = add(g, DDL__OP_SOFTMAX, x, -1, "");
    if (i < 0)
        return -1;
    if (axis < 1 || to < axis || to > 3)
        return ddl__graph_fail(g, "layer %d (%s): axes %d to %d: need 1 <= axis <= to <= 3 (1 the channels, 2 the "
                               "rows, 3 the columns)", i, log ? "logsoftmax" : "softmax", axis, to);
    ddl__layer *l = &g->layers[i];
    l->act = (uint8_t)(log != 0);
    l->axis = (int8_t)axis;
    l->axis_to = (int8_t)to;
    return i;
}

/* ---- resize ---- */

int ddl_graph_resize(ddl_graph *g, int x, int mode, int coord, int nearest, float scale_h, float scale_w, int out_h,
                     int out_w)
{
    int i = add(g, DDL__OP_RESIZE, x, -1, "");
    if (i < 0)
        return -1;
    if (mode < DDL_RESIZE_NEAREST || mode > DDL_RESIZE_LINEAR || coord < DDL_RESIZE_ASYMMETRIC ||
        coord > DDL_RESIZE_ALIGN_CORNERS || nearest < DDL_RESIZE_FLOOR || nearest > DDL_RESIZE_ROUND_PREFER_CEIL)
        return ddl__graph_fail(g, "layer %d (resize): mode %d, coord %d, nearest %d: not a DDL_RESIZE_* value", i, mode,
                               coord, nearest);
    int by_scale = scale_h > 0.0f && scale_w > 0.0f && out_h == 0 && out_w == 0;
    int by_size = out_h >= 1 && out_w >= 1 && scale_h == 0.0f && scale_w == 0.0f;
    if (!(by_scale || by_size) || (by_scale && !(scale_h < 1e6f && scale_w < 1e6f)))
        return ddl__graph_fail(g, "layer %d (resize): scales %g, %g and size %dx%d: give two scales > 0 (and below "
                               "1e6), or a size of 1 or more (and scales 0)", i, (double)scale_h, (double)scale_w,
                               out_h, out_w);
    ddl__layer *l = &g->layers[i];
    l->mode = (uint8_t)mode, l->coord = (uint8_t)coord, l->nearest = (uint8_t)nearest;
    l->scale_h = scale_h, l->scale_w = scale_w, l->k = out_h, l->stride = out_w;
    return i;
}

/* ---- batchnorm ---- */

int ddl_graph_batchnorm(ddl_graph *g, int x, const char *name, float momentum, float eps)
{
    int i = add(g, DDL__OP_BATCHNORM, x, -1, name);
    if (i < 0)
        return -1;
    if (momentum < 0.0f)
        momentum = DDL_BN_MOMENTUM;
    if (eps <= 0.0f)
        eps = DDL_BN_EPS;
    if (!(momentum <= 1.0f) || !(eps < 1e30f)) /* also NaN */
        return ddl__graph_fail(g, "layer %d (batchnorm): momentum %g, eps %g: need 0 <= momentum <= 1 and a finite "
                               "eps > 0", i, (double)momentum, (double)eps);
    g->layers[i].momentum = momentum;
    g->layers[i].eps = eps;
    return i;
}

int ddl_graph_name(ddl_graph *g, int i, const char *name)
{
    if (!g || g->failed)
        return -1;
    if (i < 0 || i >= g->n)
        return ddl__graph_fail(g, "naming layer %d: no such layer (0 to %d)", i, g->n - 1);
    if (!name || !name[0] || strlen(name) >= DDL_GRAPH_NAME_BYTES || !name_ok(name))
        return ddl__graph_fail(g, "layer %d: name \"%.40s\": use 1 to %d letters, digits, '.', '_' or '-', starting "
                               "with a letter", i, name ? name : "", DDL_GRAPH_NAME_BYTES - 1);
    for (int j = 0; j < g->n; j++)
        if (j != i && strcmp(g->layers[j].name, name) == 0)
            return ddl__graph_fail(g, "layer %d: name \"%s\" is already layer %d's", i, name, j);
    snprintf(g->layers[i].name, sizeof g->layers[i].name, "%s", name);
    return i;
}

int ddl_graph_output(ddl_graph *g, int x, int head)
{
    if (!g || g->failed)
        return -1;
    if (x < 1 || x >= g->n)
        return ddl__graph_fail(g, "output: layer %d is not a layer after the input (1 to %d)", x, g->n - 1);
    if (head != DDL_HEAD_XENT && head != DDL_HEAD_DICE)
        return ddl__graph_fail(g, "output: head %d: expected DDL_HEAD_XENT or DDL_HEAD_DICE", head);
    g->output = x;
    g->head = head;
    return x;
}

/* ---- getters ---- */

int ddl_graph_n_layers(const ddl_graph *g) { return g ? g->n : 0; }
int ddl_graph_output_layer(const ddl_graph *g) { return !g || g->n < 2 ? -1 : g->output >= 0 ? g->output : g->n - 1; }
int ddl_graph_head(const ddl_graph *g) { return g ? g->head : DDL_HEAD_XENT; }
const char *ddl_graph_error(const ddl_graph *g) { return g && g->failed ? g->err : ""; }

void ddl_graph_input_shape(const ddl_graph *g, int *c, int *h, int *w)
{
    const ddl__layer *in = g && g->n ? &g->layers[0] : NULL;
    *c = in && in->out > 0 ? in->out : 0;
    *h = in && in->k > 0 ? in->k : 0;
    *w = in && in->stride > 0 ? in->stride : 0;
}
