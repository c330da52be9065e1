/* onnx_affine.c - Mul, Div, Add and Sub of a constant, as the ONNX importer takes them (and, at
 * the end, Mul of two layers: the mul layer's gates): a scalar
 * or one value per channel, broadcast the numpy way (right-aligned: (C, 1, 1) and (1, C, 1, 1) on
 * an image (N, C, H, W), (C) and (1, C) on a vector (N, C)); either operand may be the constant
 * (1 - x is -x + 1; 2 / x is refused: not affine). Each becomes x * scale + shift per channel:
 * on the input, composed into one normalisation; elsewhere, an affine layer. The arithmetic
 * first, then the nodes, through the importer's helpers (onnx_impl.h). */
#include "onnx_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int ddl__onnx_per_channel(const int64_t *dims, int nd, const float *vals, size_t n, int c, int rank, float *v)
{
    if (c < 1 || c > DDL__ONNX_MAX_CHANNELS || nd > rank)
        return -1;
    if (n == 1) { /* a scalar, of any rank of 1s */
        for (int i = 0; i < c; i++)
            v[i] = vals[0];
        return 0;
    }
    /* right-aligned: the channel dim is rank - 1 from the end of an image's (N, C, H, W) ... */
    int ch = rank == 4 ? nd - 3 : nd - 1; /* ... or the last of a vector's (N, C) */
    for (int i = 0; i < nd; i++)
        if (dims[i] != (i == ch ? c : 1))
            return -1;
    if (ch < 0 || n != (size_t)c)
        return -1;
    memcpy(v, vals, (size_t)c * sizeof *v);
    return 0;
}

int ddl__onnx_affine_of(char op, int const_first, const float *v, int c, float *s, float *t)
{
    for (int i = 0; i < c; i++) {
        s[i] = 1.0f, t[i] = 0.0f;
        if (op == 'M')
            s[i] = v[i];
        else if (op == 'A')
            t[i] = v[i];
        else if (op == 'S' && const_first) /* v - x */
            s[i] = -1.0f, t[i] = v[i];
        else if (op == 'S')
            t[i] = -v[i];
        else if (op == 'D' && !const_first && v[i] != 0.0f && isfinite(1.0f / v[i]))
            s[i] = 1.0f / v[i];
        else
            return -1; /* v / x is not affine; x / 0 is no number */
    }
    return 0;
}

void ddl__onnx_map_compose(ddl__onnx_chan_map *a, const float *s, const float *t)
{
    for (int i = 0; i < a->c; i++) {
        a->scale[i] *= s[i];
        a->shift[i] = a->shift[i] * s[i] + t[i];
    }
}

int ddl__onnx_map_uniform(const ddl__onnx_chan_map *a)
{
    for (int i = 1; i < a->c; i++)
        if (a->scale[i] != a->scale[0] || a->shift[i] != a->shift[0])
            return 0;
    return 1;
}

int ddl__onnx_map_fits(const ddl__onnx_chan_map *a)
{
    if (!ddl__onnx_map_uniform(a) && (a->c < 2 || a->c > DDL_MAX_NORM_CHANNELS))
        return 0;
    for (int i = 0; i < a->c; i++) /* ddl's normalisation divides by a positive std */
        if (!(isfinite(a->scale[i]) && a->scale[i] > 0.0f && isfinite(a->shift[i]) &&
              isfinite(1.0f / (255.0f * a->scale[i]))))
            return 0;
    return 1;
}

/* ---- the nodes ---- */

int ddl__onnx_input_read(imp *m, const node *n)
{
    ddl__onnx_chan_map *a = &m->in_norm;
    m->input_touched = 1;
    if (ddl__onnx_map_fits(a))
        return DDL_OK;
    m->in_affine = ddl_graph_affine(m->g, 0, a->c, a->scale, a->shift);
    if (m->in_affine < 0)
        return ddl__onnx_fail(m, "node %s (%s): the input's normalisation: %s", n->name, n->op,
                              ddl_graph_error(m->g));
    for (int c = 0; c < a->c; c++)
        a->scale[c] = 1.0f, a->shift[c] = 0.0f;
    return DDL_OK;
}

/* per_channel_const: constant t as ch values v for a value of that many channels and rank r;
 * DDL_OK, or the error naming it. */
static int per_channel_const(imp *m, const node *n, const tensor *t, int ch, int r, const char *what, float *v)
{
    size_t k;
    char d[200];
    float vals[DDL__ONNX_MAX_CHANNELS];
    if (t->type == T_FLOAT && ddl__onnx_count(t, &k) == 0 && k <= DDL__ONNX_MAX_CHANNELS &&
        ddl__onnx_data_ok(m, n, t, what) == DDL_OK && ddl__onnx_floats_of(t, vals, k) == 0 &&
        ddl__onnx_per_channel(t->dims, t->n_dims, vals, k, ch, r, v) == 0)
        return DDL_OK;
    if (m->err[0])
        return DDL_EINVAL;
    return ddl__onnx_fail(m, "node %s (%s): constant %s of dims %s: ddl takes a scalar or one value per channel "
                          "(%s%d%s) of its input's %d", n->name, n->op, t->name,
                          ddl__onnx_ints_text(t->dims, t->n_dims, d), r == 4 ? "(1, " : "(", ch,
                          r == 4 ? ", 1, 1)" : ")", ch);
}

int ddl__onnx_affine_node(imp *m, ddl_graph *g, const node *n)
{
    int a = ddl__onnx_find(m, n->in[0]), c = n->n_in > 1 ? ddl__onnx_find(m, n->in[1]) : -1, first = 0;
    if (a >= 0 && c >= 0 && m->v[a].tensor >= 0 && m->v[c].layer >= 0) { /* constant first */
        int s = a;
        a = c, c = s, first = 1;
    }
    if (n->n_in != 2 || a < 0 || c < 0 || m->v[a].layer < 0 || m->v[c].tensor < 0)
        return -1; /* not this case */
    const tensor *t = &m->t[m->v[c].tensor];
    int layer = m->v[a].layer, ch, h, w;
    if (layer == 0 && m->in_affine > 0 && m->v[a].stage == m->stage)
        layer = m->in_affine;
    if (ddl__onnx_shape(m, g, n, layer, &ch, &h, &w) != DDL_OK)
        return DDL_EINVAL;
    int r = layer ? ddl__onnx_rank(g, layer) : 4;
    float v[DDL__ONNX_MAX_CHANNELS], s[DDL__ONNX_MAX_CHANNELS], sh[DDL__ONNX_MAX_CHANNELS];
    const char *what = n->op[0] == 'A' && g->layers[layer].op == DDL__OP_DENSE ? "bias" : "constant";
    if (per_channel_const(m, n, t, ch, r, what, v) != DDL_OK)
        return DDL_EINVAL;
    if (ddl__onnx_affine_of(n->op[0], first, v, ch, s, sh) != 0)
        return ddl__onnx_fail(m, "node %s (%s): %s: ddl takes x * c, x / c, x + c, c + x, x - c and c - x of a "
                              "constant c (no zero divisor)", n->name, n->op,
                              first && n->op[0] == 'D' ? "c / x is not affine" : "x / 0");
    for (int i = 0; i < ch; i++)
        if (s[i] == 0.0f) /* the output a constant: nothing before it would ever train */
            return ddl__onnx_fail(m, "node %s (%s): constant %s: a scale of 0 in channel %d: ddl takes non-zero "
                                  "scales", n->name, n->op, t->name, i);
    if (m->v[a].layer == 0 && !m->input_touched && m->v[a].stage == m->stage) {
        ddl__onnx_map_compose(&m->in_norm, s, sh);
        m->stage++;
        return ddl__onnx_define(m, n->out[0], 0, -1);
    }
    if (n->op[0] == 'A' && g->layers[layer].op == DDL__OP_DENSE && m->ps[layer].b < 0 && t->n_dims &&
        t->dims[t->n_dims - 1] == ch && ddl__onnx_readers(m, m->v[a].name, 0, NULL) == 1) {
        m->ps[layer].b = m->v[c].tensor; /* MatMul + Add, the Add alone reading it: the Linear's bias */
        g->layers[layer].bias = 1;
        return ddl__onnx_define(m, n->out[0], layer, -1);
    }
    int x = ddl__onnx_layer_in(m, n, m->v[a].name);
    return x < 0 ? DDL_EINVAL : ddl__onnx_added(m, g, n, ddl_graph_affine(g, x, ch, s, sh));
}

void ddl__onnx_out_norm(const imp *m, ddl_onnx_import *out)
{
    const ddl__onnx_chan_map *a = &m->in_norm;
    int uniform = ddl__onnx_map_uniform(a);
    out->scale = a->c ? a->scale[0] : 1.0f;
    out->shift = a->c ? a->shift[0] : 0.0f;
    out->n_norm = uniform || a->c > DDL_MAX_NORM_CHANNELS ? 0 : a->c; /* more: a layer did it */
    for (int c = 0; c < out->n_norm; c++)
        out->norm_scale[c] = a->scale[c], out->norm_shift[c] = a->shift[c];
    out->own_norm = m->stage > 0;
    out->output_softmax = m->output_softmax;
}

/* ddl__onnx_mul_layers: a Mul of two layers' outputs (squeeze-and-excitation's x * sigmoid(...)):
 * ddl's mul layer, which takes two of the same shape, or a (N, C, 1, 1) or (N, 1, H, W) and a
 * (N, C, H, W): what ONNX's broadcast gives for them. Any other pair (other ranks, channels or
 * planes that differ) is refused here, naming both shapes. */
int ddl__onnx_mul_layers(imp *m, ddl_graph *g, const node *n)
{
    int x = ddl__onnx_layer_in(m, n, n->in[0]), y = x < 0 ? -1 : ddl__onnx_layer_in(m, n, n->in[1]), s[2][3];
    if (y < 0 || ddl__onnx_shape(m, g, n, x, &s[0][0], &s[0][1], &s[0][2]) != DDL_OK ||
        ddl__onnx_shape(m, g, n, y, &s[1][0], &s[1][1], &s[1][2]) != DDL_OK)
        return DDL_EINVAL;
    int r0 = x ? ddl__onnx_rank(g, x) : 4, r1 = y ? ddl__onnx_rank(g, y) : 4;
    int planes = s[0][1] == s[1][1] && s[0][2] == s[1][2], one0 = s[0][1] == 1 && s[0][2] == 1;
    int one1 = s[1][1] == 1 && s[1][2] == 1, chans = s[0][0] == s[1][0];
    int spatial = r0 == 4 && planes && (s[0][0] == 1 || s[1][0] == 1); /* (N, 1, H, W): a gate a position */
    if (r0 != r1 || !(spatial || (chans && (planes || (r0 == 4 && (one0 || one1)))))) {
        char d0[40], d1[40];
        snprintf(d0, sizeof d0, r0 == 4 ? "(N, %d, %d, %d)" : "(N, %d)", s[0][0] * (r0 == 4 ? 1 : s[0][1] * s[0][2]),
                 s[0][1], s[0][2]);
        snprintf(d1, sizeof d1, r1 == 4 ? "(N, %d, %d, %d)" : "(N, %d)", s[1][0] * (r1 == 4 ? 1 : s[1][1] * s[1][2]),
                 s[1][1], s[1][2]);
        return ddl__onnx_fail(m, "node %s (Mul): inputs %s and %s: ddl multiplies two layers of the same shape, or a (N, C, 1, "
                    "1) or (N, 1, H, W) and a (N, C, H, W)", n->name, d0, d1);
    }
    return ddl__onnx_added(m, g, n, ddl_graph_mul(g, x, y));
}
