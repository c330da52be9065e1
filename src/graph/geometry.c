/* geometry.c - convolution and pooling geometry of graph layers beyond k, stride and pad: the
 * _ex calls of ddl.h that add such layers, and what plugin.c, text.c and the ONNX files read of
 * them (the kernels' geometry structs, output sizes, pads). A layer whose extra fields are all 0
 * is the layer of before they existed, byte for byte: the _ex calls write 0 wherever a value
 * equals its default, so that a geometry that is plain stays plain (and fast). Knows nothing of
 * models or memory beyond the graph's own bytes. */
#include "impl.h"

#include <string.h>

#define MAX16 32767 /* kernel widths, strides and pads are int16_t in a layer */
#define MAX8 255    /* dilations and output padding: uint8_t */

void ddl__layer_pads(const ddl__layer *l, int pads[4])
{
    pads[0] = l->pad;
    pads[1] = l->pads4 ? l->pad_l : l->pad;
    pads[2] = l->pads4 ? l->pad_b : l->pad;
    pads[3] = l->pads4 ? l->pad_r : l->pad;
}

static int kw_of(const ddl__layer *l) { return l->kw ? l->kw : l->k; }
static int sw_of(const ddl__layer *l) { return l->stride_w ? l->stride_w : l->stride; }

int ddl__layer_plain(const ddl__layer *l)
{
    return !l->kw && !l->stride_w && !l->pads4 && !l->dil_h && !l->dil_w && !l->out_pad_h && !l->out_pad_w &&
           !l->ceil_mode && !l->count_pad && (l->op == DDL__OP_GROUPNORM || l->groups <= 1);
}

ddl_conv2d ddl__layer_conv2d(const ddl__layer *l, int n, int c, int h, int w, int out)
{
    ddl_conv2d g = {.batch = n, .in_c = c, .in_h = h, .in_w = w, .out_c = out, .k_h = l->k, .k_w = kw_of(l),
                    .stride = l->stride, .pad = l->pad};
    if (ddl__layer_plain(l))
        return g; /* the struct of before the appended fields */
    int pads[4];
    ddl__layer_pads(l, pads);
    g.stride_w = sw_of(l);
    g.dilation_h = l->dil_h ? l->dil_h : 1;
    g.dilation_w = l->dil_w ? l->dil_w : 1;
    g.groups = l->groups > 1 ? l->groups : 1;
    g.pads4 = 1;
    g.pad_t = pads[0], g.pad_l = pads[1], g.pad_b = pads[2], g.pad_r = pads[3];
    g.out_pad_h = l->out_pad_h, g.out_pad_w = l->out_pad_w;
    return g;
}

ddl_pool2d ddl__layer_pool2d(const ddl__layer *l)
{
    int pads[4];
    ddl__layer_pads(l, pads);
    ddl_pool2d p = {l->k, kw_of(l), l->stride, sw_of(l), pads[0], pads[1], pads[2], pads[3],
                    l->dil_h ? l->dil_h : 1, l->dil_w ? l->dil_w : 1, l->ceil_mode, l->count_pad};
    return p;
}

int ddl__layer_out(const ddl__layer *l, int c, int h, int w, int out, int64_t *oh, int64_t *ow, char *why,
                   size_t why_bytes)
{
    int pads[4], kh = l->k, kw = kw_of(l), sh = l->stride, sw = sw_of(l);
    int dh = l->dil_h ? l->dil_h : 1, dw = l->dil_w ? l->dil_w : 1;
    ddl__layer_pads(l, pads);
    if (l->op == DDL__OP_CONV) { /* as ddl_conv2d_out_h, without its int overflow; no window: 0 */
        int64_t a = h + (int64_t)pads[0] + pads[2] - (int64_t)dh * (kh - 1) - 1;
        int64_t b = w + (int64_t)pads[1] + pads[3] - (int64_t)dw * (kw - 1) - 1;
        *oh = a < 0 ? 0 : a / sh + 1;
        *ow = b < 0 ? 0 : b / sw + 1;
        int g = l->groups > 1 ? l->groups : 1;
        if (g > 1 && (c % g || out % g))
            return ddl__errf(why, why_bytes, DDL_EINVAL, "%d groups: they must divide the %d input and %d output "
                             "channels", g, c, out);
        return DDL_OK;
    }
    if (l->op == DDL__OP_DECONV) {
        *oh = (h - 1) * (int64_t)sh - pads[0] - pads[2] + (int64_t)dh * (kh - 1) + 1 + l->out_pad_h;
        *ow = (w - 1) * (int64_t)sw - pads[1] - pads[3] + (int64_t)dw * (kw - 1) + 1 + l->out_pad_w;
        return DDL_OK;
    }
    ddl_pool2d p = ddl__layer_pool2d(l);
    *oh = ddl_pool2d_out(&p, 0, h);
    *ow = ddl_pool2d_out(&p, 1, w);
    if (*oh >= 1 && *ow >= 1 && !ddl_pool2d_ok(&p, l->op == DDL__OP_AVGPOOL, h, w))
        return ddl__errf(why, why_bytes, DDL_EINVAL, "a %dx%d input: a window of the %dx%d kernel (dilation %dx%d, "
                         "pads %d,%d,%d,%d) holds no value of it", h, w, kh, kw, dh, dw, pads[0], pads[1], pads[2],
                         pads[3]);
    return DDL_OK;
}

/* ---- the _ex calls ---- */

/* range: v within [lo, hi], else the graph's error naming the layer and the field. */
static int range(ddl_graph *g, const char *op, const char *field, int v, int lo, int hi)
{
    if (v >= lo && v <= hi)
        return 0;
    ddl__graph_fail(g, "layer %d (%s): %s %d: ddl takes %d to %d", g->n, op, field, v, lo, hi);
    return -1;
}

/* set_pads: the pads into l: pad alone when all four are equal (plain), else pads4. */
static void set_pads(ddl__layer *l, int t, int le, int b, int r)
{
    l->pad = t;
    if (le == t && b == t && r == t)
        return;
    l->pads4 = 1;
    l->pad_l = (int16_t)le, l->pad_b = (int16_t)b, l->pad_r = (int16_t)r;
}

/* set_common: kernel, strides, pads and dilation of layer l, each stored as 0 where it is the
 * default (kw == k, stride_w == stride, dilation 1). */
static void set_common(ddl__layer *l, int kh, int kw, int sh, int sw, const int pads[4], int dh, int dw)
{
    l->k = kh, l->stride = sh;
    l->kw = (int16_t)(kw && kw != kh ? kw : 0);
    l->stride_w = (int16_t)(sw && sw != sh ? sw : 0);
    set_pads(l, pads[0], pads[1], pads[2], pads[3]);
    l->dil_h = (uint8_t)(dh > 1 ? dh : 0);
    l->dil_w = (uint8_t)(dw > 1 ? dw : 0);
}

static int conv_ex(ddl_graph *g, int op, int x, const char *name, const ddl_conv_geometry *c)
{
    const char *what = ddl__graph_op_name(op);
    if (!g || g->failed)
        return -1;
    if (!c)
        return ddl__graph_fail(g, "layer %d (%s): no geometry given", g->n, what);
    int kw = c->k_w ? c->k_w : c->k_h, sh = c->stride_h ? c->stride_h : 1, sw = c->stride_w ? c->stride_w : sh;
    int dh = c->dilation_h ? c->dilation_h : 1, dw = c->dilation_w ? c->dilation_w : dh;
    if (range(g, what, "k_h", c->k_h, 1, MAX16) || range(g, what, "k_w", kw, 1, MAX16) ||
        range(g, what, "stride_h", sh, 1, MAX16) || range(g, what, "stride_w", sw, 1, MAX16) ||
        range(g, what, "pad_t", c->pad_t, 0, MAX16) || range(g, what, "pad_l", c->pad_l, 0, MAX16) ||
        range(g, what, "pad_b", c->pad_b, 0, MAX16) || range(g, what, "pad_r", c->pad_r, 0, MAX16) ||
        range(g, what, "dilation_h", dh, 1, MAX8) || range(g, what, "dilation_w", dw, 1, MAX8) ||
        range(g, what, "groups", c->groups, 0, 1 << 20) || range(g, what, "out_pad_h", c->out_pad_h, 0, MAX8) ||
        range(g, what, "out_pad_w", c->out_pad_w, 0, MAX8))
        return -1;
    if (op == DDL__OP_DECONV && c->groups > 1)
        return ddl__graph_fail(g, "layer %d (deconv): groups %d: ddl's transposed convolution takes no groups", g->n,
                               c->groups);
    if (op == DDL__OP_CONV && (c->out_pad_h || c->out_pad_w))
        return ddl__graph_fail(g, "layer %d (conv): output padding %d,%d: only a transposed convolution has one",
                               g->n, c->out_pad_h, c->out_pad_w);
    if (op == DDL__OP_DECONV && c->no_bias)
        return ddl__graph_fail(g, "layer %d (deconv): no_bias: ddl's transposed convolution always has a bias", g->n);
    /* the layer of the plain call (its checks, its name), then the rest of the geometry */
    int i = op == DDL__OP_CONV ? ddl_graph_conv2d(g, x, name, c->out_c, c->k_h, sh, 0, !c->no_bias)
                               : ddl_graph_deconv2d(g, x, name, c->out_c, c->k_h, sh, 0);
    if (i < 0)
        return -1;
    ddl__layer *l = &g->layers[i];
    const int pads[4] = {c->pad_t, c->pad_l, c->pad_b, c->pad_r};
    set_common(l, c->k_h, kw, sh, sw, pads, dh, dw);
    l->groups = c->groups > 1 ? c->groups : 0;
    l->out_pad_h = (uint8_t)c->out_pad_h, l->out_pad_w = (uint8_t)c->out_pad_w;
    return i;
}

int ddl_graph_conv2d_ex(ddl_graph *g, int x, const char *name, const ddl_conv_geometry *geo)
{
    return conv_ex(g, DDL__OP_CONV, x, name, geo);
}

int ddl_graph_deconv2d_ex(ddl_graph *g, int x, const char *name, const ddl_conv_geometry *geo)
{
    return conv_ex(g, DDL__OP_DECONV, x, name, geo);
}

static int pool_ex(ddl_graph *g, int op, int x, const ddl_pool2d *p)
{
    const char *what = ddl__graph_op_name(op);
    if (!g || g->failed)
        return -1;
    if (!p)
        return ddl__graph_fail(g, "layer %d (%s): no geometry given", g->n, what);
    int kw = p->k_w ? p->k_w : p->k_h, sh = p->stride_h, sw = p->stride_w ? p->stride_w : sh;
    int dh = p->dilation_h ? p->dilation_h : 1, dw = p->dilation_w ? p->dilation_w : dh;
    if (range(g, what, "k_h", p->k_h, 1, MAX16) || range(g, what, "k_w", kw, 1, MAX16) ||
        range(g, what, "stride_h", sh, 1, MAX16) || range(g, what, "stride_w", sw, 1, MAX16) ||
        range(g, what, "pad_t", p->pad_t, 0, MAX16) || range(g, what, "pad_l", p->pad_l, 0, MAX16) ||
        range(g, what, "pad_b", p->pad_b, 0, MAX16) || range(g, what, "pad_r", p->pad_r, 0, MAX16) ||
        range(g, what, "dilation_h", dh, 1, op == DDL__OP_AVGPOOL ? 1 : MAX8) ||
        range(g, what, "dilation_w", dw, 1, op == DDL__OP_AVGPOOL ? 1 : MAX8) ||
        range(g, what, "ceil_mode", p->ceil_mode, 0, 1) ||
        range(g, what, "count_include_pad", p->count_include_pad, 0, op == DDL__OP_AVGPOOL ? 1 : 0))
        return -1;
    int i = op == DDL__OP_MAXPOOL ? ddl_graph_maxpool(g, x, p->k_h, sh) : ddl_graph_avgpool(g, x, p->k_h, sh);
    if (i < 0)
        return -1;
    ddl__layer *l = &g->layers[i];
    const int pads[4] = {p->pad_t, p->pad_l, p->pad_b, p->pad_r};
    set_common(l, p->k_h, kw, sh, sw, pads, dh, dw);
    l->ceil_mode = (uint8_t)p->ceil_mode;
    /* count_include_pad changes nothing without padding: kept only with it, so a plain pool stays plain */
    l->count_pad = (uint8_t)(p->count_include_pad && (pads[0] || pads[1] || pads[2] || pads[3]));
    return i;
}

int ddl_graph_maxpool_ex(ddl_graph *g, int x, const ddl_pool2d *p) { return pool_ex(g, DDL__OP_MAXPOOL, x, p); }
int ddl_graph_avgpool_ex(ddl_graph *g, int x, const ddl_pool2d *p) { return pool_ex(g, DDL__OP_AVGPOOL, x, p); }
