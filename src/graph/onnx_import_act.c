/* onnx_import_act.c - the activation and softmax nodes of an ONNX file, for onnx_import.c's
 * one_node(): Sigmoid, Tanh, LeakyRelu, Elu, HardSigmoid, HardSwish, Clip (ReLU6), Softmax and
 * LogSoftmax become ddl_graph_act / ddl_graph_softmax layers, and the patterns PyTorch 1.13
 * writes for the activations ONNX had no operator for become one layer each:
 *
 *     SiLU       Sigmoid(x) -> s, Mul(x, s)
 *     Hardswish  HardSigmoid(x, alpha 1/6, beta 1/2) -> s, Mul(x, s)       (opsets before 14)
 *     GELU       Div(x, sqrt 2) -> Erf -> Add 1 -> Mul x -> Mul 0.5          (or the Mul by 0.5
 *                taken first on x, or on the Add's output; a Mul by 1/sqrt 2 for the Div)
 *     GELU tanh  Mul(x, x) -> Mul x -> Mul 0.044715 -> Add x -> Mul sqrt(2/pi) -> Tanh -> Add 1
 *                -> then as GELU's tail
 *     softmax    Transpose(perm) -> Softmax(last axis) -> Transpose(back)  (dim 1 before opset 13)
 *     softmax    Reshape(N, before, axes, after) -> Softmax(axis 2) -> Reshape back (ddl's export
 *                of a softmax over several axes)
 *
 * A pattern is taken whole or not at all: each value inside it must be read by the next node of
 * the pattern alone (looked up over the whole graph, so a Sigmoid that other nodes read too stays
 * a sigmoid layer, and the Mul becomes a SiLU of its own), and each constant must be the one the
 * formula has (to 1e-5). The pattern's first node in the file's order (it reads only x and
 * constants) makes the layer; the outputs of the others are defined then, marked
 * DDL__ONNX_ABSORBED, and those nodes are passed over when their turn comes. Whatever does not
 * match is left to the caller (a Div or Mul of layers, an Erf alone: refused, named).
 *
 * Softmax follows the model's opset: before 13 the input is coerced to 2-D at the axis (one
 * softmax over that axis and all after it), from 13 on it is one axis. The axis counts the
 * ONNX tensor's dims: (N, C, H, W), or (N, C) after Flatten, Gemm, MatMul. A last Softmax over
 * the classes is left to the caller, which drops it (ddl's loss and predictor apply it). */
#include "onnx_impl.h"

#include <math.h>
#include <string.h>

enum { ANY, X, CONST }; /* what the other input of a pattern's node must be */
#define MAX_PAT 12      /* nodes of a pattern (GELU tanh: 10, and a Mul by 0.5 aside) */

typedef struct pat {
    ddl__onnx_imp *m;
    const char *x;                        /* the pattern's input value */
    char outs[MAX_PAT][DDL__ONNX_NAME];   /* every node's output; the last is the result */
    int n;
    ddl__onnx_node r;                     /* scratch: the node a step looks at */
} pat;

static int near(float v, float want) { return fabsf(v - want) <= 1e-5f * fabsf(want); }

static int is(const ddl__onnx_node *n, const char *op) { return strcmp(n->op, op) == 0; }

/* ---- patterns ---- */

/* step: the node that alone reads v (v is no graph output) is op, reading v and, for two
 * inputs, x (want X) or a constant near c (want CONST) or anything (ANY: its name into other);
 * its output joins the pattern. 0, or -1 when it is not so. */
static int step(pat *p, const char *v, const char *op, int want, float c, char *other)
{
    ddl__onnx_node *r = &p->r;
    if (p->n == MAX_PAT || ddl__onnx_readers(p->m, v, 0, r) != 1 || !is(r, op) || r->n_out < 1)
        return -1;
    if (want != ANY || !other) { /* one input (Erf, Tanh), or v and the other */
        int one = r->n_in == 1 && strcmp(r->in[0], v) == 0;
        int two = r->n_in == 2 && (strcmp(r->in[0], v) == 0 || strcmp(r->in[1], v) == 0);
        const char *o = two ? r->in[strcmp(r->in[0], v) == 0] : NULL;
        float k;
        if (!(want == ANY ? one : two) ||
            (want == X && strcmp(o, p->x) != 0) ||
            (want == CONST && (ddl__onnx_scalar(p->m, o, &k) != 0 || !near(k, c))))
            return -1;
    } else {
        if (r->n_in != 2 || (strcmp(r->in[0], v) != 0 && strcmp(r->in[1], v) != 0))
            return -1;
        snprintf(other, DDL__ONNX_NAME, "%s", r->in[strcmp(r->in[0], v) == 0]);
    }
    snprintf(p->outs[p->n++], DDL__ONNX_NAME, "%s", r->out[0]);
    return 0;
}

/* half_of_x: node n is Mul(x, 0.5) in either order. */
static int half_of_x(pat *p, const ddl__onnx_node *n)
{
    float k;
    if (!is(n, "Mul") || n->n_in != 2)
        return 0;
    int xi = strcmp(n->in[0], p->x) == 0 ? 0 : strcmp(n->in[1], p->x) == 0 ? 1 : -1;
    return xi >= 0 && ddl__onnx_scalar(p->m, n->in[1 - xi], &k) == 0 && near(k, 0.5f);
}

/* tail: a = 1 + f(x) -> x a / 2, in any of the three orders PyTorch and others write; half is
 * the output of a Mul(x, 0.5) the caller started from ("": none). */
static int tail(pat *p, const char *a, const char *half)
{
    char other[DDL__ONNX_NAME];
    int at = p->n;
    if (step(p, a, "Mul", ANY, 0.0f, other) != 0)
        return -1;
    float k;
    if (strcmp(other, p->x) == 0) /* x (1 + f) then * 0.5 */
        return half[0] ? -1 : step(p, p->outs[at], "Mul", CONST, 0.5f, NULL);
    if (ddl__onnx_scalar(p->m, other, &k) == 0) /* (1 + f) * 0.5 then * x */
        return half[0] || !near(k, 0.5f) ? -1 : step(p, p->outs[at], "Mul", X, 0.0f, NULL);
    /* (x * 0.5) (1 + f): other is that Mul's output, read by this Mul alone */
    ddl__onnx_node h;
    if (ddl__onnx_producer(p->m, other, &h) != 0 || !half_of_x(p, &h) || (half[0] && strcmp(half, other) != 0) ||
        ddl__onnx_readers(p->m, other, 0, NULL) != 1 || p->n == MAX_PAT)
        return -1;
    char result[DDL__ONNX_NAME]; /* the result stays last */
    snprintf(result, sizeof result, "%s", p->outs[at]);
    snprintf(p->outs[at], DDL__ONNX_NAME, "%s", other);
    snprintf(p->outs[p->n++], DDL__ONNX_NAME, "%s", result);
    return 0;
}

/* gelu_from: the GELU whose first node is s (Div(x, sqrt 2), Mul(x, 1/sqrt 2), or Mul(x, x) for
 * the tanh form): its kind, with p->outs filled; 0 if s starts none. */
static int gelu_from(pat *p, const ddl__onnx_node *s, const char *half)
{
    float k;
    p->n = 0;
    if (s->n_out < 1 || s->n_in != 2)
        return 0;
    snprintf(p->outs[p->n++], DDL__ONNX_NAME, "%s", s->out[0]);
    int xi = strcmp(s->in[0], p->x) == 0 ? 0 : 1;
    const char *o = s->in[1 - xi];
    if (is(s, "Mul") && strcmp(o, p->x) == 0) { /* x^2 -> x^3 -> ... -> tanh */
        char a[DDL__ONNX_NAME];
        if (step(p, s->out[0], "Mul", X, 0, NULL) || step(p, p->outs[1], "Mul", CONST, 0.044715f, NULL) ||
            step(p, p->outs[2], "Add", X, 0, NULL) || step(p, p->outs[3], "Mul", CONST, 0.7978845608f, NULL) ||
            step(p, p->outs[4], "Tanh", ANY, 0, NULL) || step(p, p->outs[5], "Add", CONST, 1.0f, NULL))
            return 0;
        snprintf(a, sizeof a, "%s", p->outs[6]);
        return tail(p, a, half) == 0 ? DDL_ACT_GELU_TANH : 0;
    }
    if (strcmp(s->in[xi], p->x) != 0 || ddl__onnx_scalar(p->m, o, &k) != 0 ||
        !(is(s, "Div") ? near(k, 1.41421356f) : is(s, "Mul") && near(k, 0.70710678f)))
        return 0;
    if (step(p, s->out[0], "Erf", ANY, 0, NULL) || step(p, p->outs[1], "Add", CONST, 1.0f, NULL))
        return 0;
    char a[DDL__ONNX_NAME];
    snprintf(a, sizeof a, "%s", p->outs[2]);
    return tail(p, a, half) == 0 ? DDL_ACT_GELU : 0;
}

/* make: the pattern's layer (kind of x's layer), its outputs defined: the last as the layer. */
static int make(pat *p, ddl_graph *g, const ddl__onnx_node *n, int kind)
{
    int x = ddl__onnx_layer_in(p->m, n, p->x);
    if (x < 0 || ddl__onnx_added(p->m, g, n, ddl_graph_act(g, x, kind, 0.0f, 0.0f)) != DDL_OK)
        return DDL_EINVAL;
    int layer = g->n - 1, rc = DDL_OK;
    for (int i = 0; i < p->n && rc == DDL_OK; i++)
        rc = ddl__onnx_define(p->m, p->outs[i], i == p->n - 1 ? layer : -1, DDL__ONNX_ABSORBED);
    return rc;
}

/* gelu: node n as the first node of a GELU, else -1. */
static int gelu(ddl__onnx_imp *m, ddl_graph *g, const ddl__onnx_node *n)
{
    pat q;
    memset(&q, 0, sizeof q);
    q.m = m;
    if (n->n_in != 2)
        return -1;
    for (int xi = 0; xi < 2; xi++) { /* which input is x: a layer's output */
        int layer, tens;
        if (ddl__onnx_value(m, n->in[xi], &layer, &tens) < 0 || layer < 0)
            continue;
        q.x = n->in[xi];
        int kind = gelu_from(&q, n, "");
        if (kind)
            return make(&q, g, n, kind);
        if (!half_of_x(&q, n)) /* Mul(x, 0.5) first: the chain starts at another reader of x */
            continue;
        ddl__onnx_node s;
        for (int k = 0; ddl__onnx_readers(m, q.x, k, &s) > k; k++)
            if ((is(&s, "Div") || is(&s, "Mul")) && strcmp(s.out[0], n->out[0]) != 0 &&
                (kind = gelu_from(&q, &s, n->out[0])) != 0)
                return make(&q, g, n, kind);
    }
    return -1;
}

/* ---- SiLU and Hardswish: x times an activation of x ---- */

/* gate_kind: what x * (layer i) is when layer i is a sigmoid of layer x (SiLU) or nn.Hardsigmoid's
 * HardSigmoid of it (Hardswish); 0 if neither. */
static int gate_kind(const ddl_graph *g, int i, int x)
{
    const ddl__layer *l = &g->layers[i];
    if (i < 1 || l->op != DDL__OP_ACT || l->in[0] != x)
        return 0;
    if (l->act == DDL_ACT_SIGMOID)
        return DDL_ACT_SILU;
    return l->act == DDL_ACT_HARDSIGMOID && near(l->alpha, 1.0f / 6.0f) && l->beta == 0.5f ? DDL_ACT_HARDSWISH : 0;
}

/* gated: an activation layer of kind for node n (Sigmoid, HardSigmoid): when the Mul(x, s) after
 * it alone reads its output s, that pair is one SiLU or Hardswish layer. */
static int gated(ddl__onnx_imp *m, ddl_graph *g, const ddl__onnx_node *n, int x, int kind, float alpha, float beta)
{
    int i = ddl_graph_act(g, x, kind, alpha, beta);
    if (ddl__onnx_added(m, g, n, i) != DDL_OK)
        return DDL_EINVAL;
    int gk = gate_kind(g, i, x);
    pat p;
    memset(&p, 0, sizeof p);
    p.m = m;
    p.x = n->in[0];
    if (!gk || step(&p, n->out[0], "Mul", X, 0.0f, NULL) != 0)
        return DDL_OK;
    ddl__layer *l = &g->layers[i]; /* nothing else reads it: it becomes the product */
    l->act = (uint8_t)gk, l->alpha = l->beta = 0.0f;
    return ddl__onnx_define(m, n->out[0], -1, DDL__ONNX_ABSORBED) != DDL_OK ? DDL_EINVAL
           : ddl__onnx_define(m, p.outs[0], i, DDL__ONNX_ABSORBED);
}

/* mul_gate: Mul(x, s) where s is a sigmoid (hardsigmoid) of x that other nodes read too: a SiLU
 * (Hardswish) of its own; -1 if n is no such Mul. */
static int mul_gate(ddl__onnx_imp *m, ddl_graph *g, const ddl__onnx_node *n)
{
    int l[2], t[2];
    if (n->n_in != 2 || ddl__onnx_value(m, n->in[0], &l[0], &t[0]) < 0 ||
        ddl__onnx_value(m, n->in[1], &l[1], &t[1]) < 0)
        return -1;
    for (int k = 0; k < 2; k++) {
        int gk = l[k] >= 1 && l[1 - k] >= 0 ? gate_kind(g, l[k], l[1 - k]) : 0;
        if (gk) {
            int x = ddl__onnx_layer_in(m, n, n->in[1 - k]);
            return x < 0 ? DDL_EINVAL : ddl__onnx_added(m, g, n, ddl_graph_act(g, x, gk, 0.0f, 0.0f));
        }
    }
    return -1;
}

/* ---- softmax ---- */

/* softmax_layer: a softmax of ONNX axis `axis` of x (rank-coerced before opset 13); out the name
 * its result takes (n's output, or the last Transpose's). */
static int softmax_layer(ddl__onnx_imp *m, ddl_graph *g, const ddl__onnx_node *n, int x, int64_t axis, int coerce,
                         const char *out)
{
    int rank = ddl__onnx_rank(g, x), log = is(n, "LogSoftmax"), c, h, w;
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 1 || a >= rank)
        return ddl__onnx_fail(m, "node %s (%s): axis %lld of a %d-D tensor: ddl takes axes 1 to %d (-%d to -1), "
                              "within a sample", n->name, n->op, (long long)axis, rank, rank - 1, rank - 1);
    if (ddl__onnx_shape(m, g, n, x, &c, &h, &w) != DDL_OK)
        return DDL_EINVAL;
    int to = coerce ? 3 : (int)a;
    if (rank == 2)
        a = to = 1;
    /* the last node, over the classes alone: ddl's output is the logits, its loss and predictor
     * apply this softmax (the caller drops the node) */
    if (strcmp(out, ddl__onnx_output(m)) == 0 && a == 1 && (to == 1 || (h == 1 && w == 1))) {
        m->output_softmax = log ? 2 : 1; /* ddl_onnx_import.output_softmax says so */
        return -1;
    }
    int i = ddl_graph_softmax(g, x, (int)a, to, log);
    if (ddl__onnx_added(m, g, n, i) != DDL_OK)
        return DDL_EINVAL;
    if (strcmp(out, n->out[0]) == 0)
        return DDL_OK;
    /* a node after this one (the pattern's) gives the result: this one is passed over too */
    return ddl__onnx_define(m, n->out[0], -1, DDL__ONNX_ABSORBED) != DDL_OK
               ? DDL_EINVAL
               : ddl__onnx_define(m, out, i, DDL__ONNX_ABSORBED);
}

static int softmax(ddl__onnx_imp *m, ddl_graph *g, const ddl__onnx_node *n)
{
    int64_t axis;
    int n_ints, coerce = ddl__onnx_opset(m) < 13;
    if (!ddl__onnx_attr(n, "axis", NULL, &axis, &n_ints))
        axis = coerce ? 1 : -1;
    else if (n_ints != 1)
        return ddl__onnx_fail(m, "node %s (%s): axis is not one int", n->name, n->op);
    int x = ddl__onnx_layer_in(m, n, n->in[0]);
    return x < 0 ? DDL_EINVAL : softmax_layer(m, g, n, x, axis, coerce, n->out[0]);
}

/* transposed: Transpose(x, perm) -> Softmax over the last axis -> Transpose back, as torch.onnx
 * writes softmax(x, dim) before opset 13: the softmax of x's axis perm[3]; -1 if n starts none. */
static int transposed(ddl__onnx_imp *m, ddl_graph *g, const ddl__onnx_node *n)
{
    ddl__onnx_node s, t;
    int64_t perm[8], back[8], axis;
    int k = ddl__onnx_attr_ints(n, "perm", perm, 8), nb, n_ints;
    if (k != 4 || perm[0] != 0 || ddl__onnx_readers(m, n->out[0], 0, &s) != 1 ||
        !(is(&s, "Softmax") || is(&s, "LogSoftmax")) || s.n_in != 1 || s.n_out < 1 ||
        !ddl__onnx_attr(&s, "axis", NULL, &axis, &n_ints) || n_ints != 1 || (axis != 3 && axis != -1) ||
        ddl__onnx_readers(m, s.out[0], 0, &t) != 1 || !is(&t, "Transpose") || t.n_out < 1)
        return -1;
    nb = ddl__onnx_attr_ints(&t, "perm", back, 8);
    int ok = nb == 4;
    for (int i = 0; ok && i < 4; i++)
        ok = perm[i] >= 0 && perm[i] < 4 && back[perm[i]] == i;
    int x = ok ? ddl__onnx_layer_in(m, n, n->in[0]) : -1;
    if (!ok || x < 0 || ddl__onnx_rank(g, x) != 4)
        return ok && x < 0 ? DDL_EINVAL : -1;
    if (ddl__onnx_define(m, s.out[0], -1, DDL__ONNX_ABSORBED) != DDL_OK)
        return DDL_EINVAL;
    int rc = softmax_layer(m, g, &s, x, perm[3], 0, t.out[0]);
    if (rc == -1) /* the last node, over the classes: dropped, as a last Softmax is */
        return ddl__onnx_define(m, t.out[0], x, DDL__ONNX_ABSORBED);
    return rc;
}

/* grouped: Reshape(x, (N, before, axes, after)) -> Softmax over axis 2 -> Reshape back to x's
 * shape, as ddl's export writes a softmax over several axes: that softmax; -1 if n starts none. */
static int grouped(ddl__onnx_imp *m, ddl_graph *g, const ddl__onnx_node *n)
{
    ddl__onnx_node s, t;
    int64_t to4[8], back[8], axis;
    int layer, tens, n_ints, c, h, w;
    if (n->n_in != 2 || ddl__onnx_value(m, n->in[0], &layer, &tens) < 0 || layer < 0 ||
        ddl__onnx_ints(m, n->in[1], to4, 8) != 4 || ddl__onnx_readers(m, n->out[0], 0, &s) != 1 ||
        !(is(&s, "Softmax") || is(&s, "LogSoftmax")) || s.n_in != 1 || s.n_out < 1 ||
        !ddl__onnx_attr(&s, "axis", NULL, &axis, &n_ints) || n_ints != 1 || (axis != 2 && axis != -2) ||
        ddl__onnx_readers(m, s.out[0], 0, &t) != 1 || !is(&t, "Reshape") || t.n_in != 2 || t.n_out < 1 ||
        strcmp(t.in[0], s.out[0]) != 0)
        return -1;
    int rank = ddl__onnx_rank(g, layer), nb = ddl__onnx_ints(m, t.in[1], back, 8);
    if (ddl__onnx_shape(m, g, n, layer, &c, &h, &w) != DDL_OK)
        return DDL_EINVAL;
    const int64_t d[3] = {c, h, w};
    /* the axes: the first run of (C, H, W) whose product is to4[1] before them, to4[2] in them */
    int a = 0, b = 0, ok = nb == rank && to4[0] == 0 && (rank == 4 ? back[1] == c && back[2] == h && back[3] == w
                                                                    : back[1] == (int64_t)c * h * w);
    for (int i = 1; ok && !a && i <= 3; i++) {
        int64_t pre = 1, in = 1;
        for (int k = 1; k < i; k++)
            pre *= d[k - 1];
        for (int j = i; !a && j <= 3; j++) {
            in *= d[j - 1];
            if (pre == to4[1] && in == to4[2] && pre * in * to4[3] == (int64_t)c * h * w)
                a = i, b = j;
        }
    }
    if (!ok || !a || back[0] != 0)
        return -1;
    int x = ddl__onnx_layer_in(m, n, n->in[0]);
    if (x < 0 || ddl__onnx_added(m, g, n, ddl_graph_softmax(g, x, a, b, is(&s, "LogSoftmax"))) != DDL_OK)
        return DDL_EINVAL;
    return ddl__onnx_define(m, n->out[0], -1, DDL__ONNX_ABSORBED) != DDL_OK ||
                   ddl__onnx_define(m, s.out[0], -1, DDL__ONNX_ABSORBED) != DDL_OK
               ? DDL_EINVAL
               : ddl__onnx_define(m, t.out[0], g->n - 1, DDL__ONNX_ABSORBED);
}

/* ---- one node ---- */

/* simple: an activation node of its own; -1 if n is none. */
static int simple(ddl__onnx_imp *m, ddl_graph *g, const ddl__onnx_node *n)
{
    static const struct { const char *op; int kind; float alpha, beta; } ops[] = {
        {"Sigmoid", DDL_ACT_SIGMOID, 0, 0},   {"Tanh", DDL_ACT_TANH, 0, 0},
        {"LeakyRelu", DDL_ACT_LEAKY_RELU, 0.01f, 0}, {"Elu", DDL_ACT_ELU, 1.0f, 0},
        {"HardSigmoid", DDL_ACT_HARDSIGMOID, 0.2f, 0.5f}, {"HardSwish", DDL_ACT_HARDSWISH, 0, 0},
        {"Clip", DDL_ACT_CLIP, -INFINITY, INFINITY}};
    int k = 0;
    while (k < (int)(sizeof ops / sizeof ops[0]) && !is(n, ops[k].op))
        k++;
    if (k == (int)(sizeof ops / sizeof ops[0]))
        return -1;
    float a = ops[k].alpha, b = ops[k].beta;
    int x = n->n_in >= 1 ? ddl__onnx_layer_in(m, n, n->in[0]) : -1;
    if (x < 0)
        return n->n_in >= 1 ? DDL_EINVAL : ddl__onnx_fail(m, "node %s (%s): no input", n->name, n->op);
    if (ops[k].kind == DDL_ACT_CLIP) { /* bounds: attributes before opset 11, inputs from 11 on */
        ddl__onnx_attr(n, "min", &a, NULL, NULL) ? (void)0 : (void)(a = -INFINITY);
        ddl__onnx_attr(n, "max", &b, NULL, NULL) ? (void)0 : (void)(b = INFINITY);
        for (int i = 1; i < 3 && i < n->n_in; i++)
            if (n->in[i][0] && ddl__onnx_scalar(m, n->in[i], i == 1 ? &a : &b) != 0)
                return ddl__onnx_fail(m, "node %s (Clip): its %s (%s) is not a float constant of one value",
                                      n->name, i == 1 ? "min" : "max", n->in[i]);
    } else {
        ddl__onnx_attr(n, "alpha", &a, NULL, NULL);
        ddl__onnx_attr(n, "beta", &b, NULL, NULL);
    }
    if (ops[k].kind == DDL_ACT_SIGMOID || ops[k].kind == DDL_ACT_HARDSIGMOID)
        return gated(m, g, n, x, ops[k].kind, a, b);
    return ddl__onnx_added(m, g, n, ddl_graph_act(g, x, ops[k].kind, a, b));
}

int ddl__onnx_act(ddl__onnx_imp *m, ddl_graph *g, const ddl__onnx_node *n)
{
    int layer, tens, rc;
    if (n->n_out >= 1 && ddl__onnx_value(m, n->out[0], &layer, &tens) >= 0 && tens == DDL__ONNX_ABSORBED)
        return DDL_OK; /* a node inside a pattern an earlier node made */
    if ((rc = simple(m, g, n)) != -1)
        return rc;
    if (is(n, "Softmax") || is(n, "LogSoftmax"))
        return softmax(m, g, n);
    if (is(n, "Transpose"))
        return transposed(m, g, n);
    if (is(n, "Reshape") && (rc = grouped(m, g, n)) != -1)
        return rc;
    if ((is(n, "Div") || is(n, "Mul")) && (rc = gelu(m, g, n)) != -1)
        return rc;
    if (is(n, "Mul") && (rc = mul_gate(m, g, n)) != -1)
        return rc;
    if (is(n, "Erf"))
        return ddl__onnx_fail(m, "node %s (Erf): ddl takes Erf only inside a GELU as PyTorch writes it: Div(x, "
                              "sqrt 2), Erf, Add 1, Mul x, Mul 0.5, each read by the next alone", n->name);
    return -1;
}
