/* onnx_import_geometry.c - the geometry of ONNX's Conv, ConvTranspose, MaxPool and AveragePool
 * (kernel_shape, strides, pads, dilations, group, auto_pad, output_padding, output_shape,
 * ceil_mode, count_include_pad, storage_order) as onnx_import.c read it, checked and turned into
 * ddl_conv_geometry and ddl_pool2d. auto_pad is resolved here against the input's size, as the
 * ONNX operator pages define it. Where the runtimes disagree (an odd total padding of a
 * ConvTranspose given by output_shape or SAME: onnxruntime puts the extra row at the other end
 * from the specification; a ceil_mode window that would start in the padding: PyTorch drops it,
 * the ONNX formula keeps it; the divisor of such a window counting the padding), the node is
 * refused, naming the attribute and its value: never silently one of two answers. */
#include "onnx_impl.h"

#include <stdio.h>
#include <string.h>

#define MAX16 32767 /* kernels, strides and pads: what a graph layer holds */
#define MAX8 255    /* dilations, output padding */

static const char *text(const ddl__onnx_intlist *a, char out[200])
{
    size_t at = 0;
    if (a->n < 0)
        return "(not a list of at most 8 ints)";
    out[at++] = '(';
    for (int i = 0; i < a->n && i < 8; i++)
        at += (size_t)snprintf(out + at, 200 - at, "%s%lld", i ? ", " : "", (long long)a->v[i]);
    snprintf(out + at, 200 - at, ")");
    return out;
}

/* list: attribute a (name) of n values (absent: dflt each), each from lo to hi, into v. */
static int list(const ddl__onnx_intlist *a, const char *name, int n, int64_t dflt, int64_t lo, int64_t hi, int64_t *v,
                char *why, size_t why_bytes)
{
    char t[200];
    for (int i = 0; i < n; i++)
        v[i] = dflt;
    if (!a->found)
        return DDL_OK;
    int ok = a->n == n;
    for (int i = 0; ok && i < n; i++)
        ok = a->v[i] >= lo && a->v[i] <= hi, v[i] = a->v[i];
    return ok ? DDL_OK
              : ddl__errf(why, why_bytes, DDL_EINVAL, "%s %s: ddl takes %d values (2-D) from %lld to %lld", name,
                          text(a, t), n, (long long)lo, (long long)hi);
}

/* one: a single-int attribute, from lo to hi (absent: dflt). */
static int one(const ddl__onnx_intlist *a, const char *name, int64_t dflt, int64_t lo, int64_t hi, const char *need,
               int64_t *v, char *why, size_t why_bytes)
{
    char t[200];
    *v = a->found && a->n == 1 ? a->v[0] : dflt;
    if (a->found && (a->n != 1 || *v < lo || *v > hi))
        return ddl__errf(why, why_bytes, DDL_EINVAL, "%s %s: ddl takes %s", name, text(a, t), need);
    return DDL_OK;
}

/* auto_pad: the mode of a (0 NOTSET, 1 VALID, 2 SAME_UPPER, 3 SAME_LOWER), -1 with why. */
static int mode(const ddl__onnx_geo *a, char *why, size_t why_bytes)
{
    static const char *const names[] = {"NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"};
    if (!a->has_auto_pad || !a->auto_pad[0])
        return 0;
    for (int i = 0; i < 4; i++)
        if (strcmp(a->auto_pad, names[i]) == 0)
            return i;
    ddl__errf(why, why_bytes, DDL_EINVAL, "auto_pad \"%s\": ONNX knows NOTSET, VALID, SAME_UPPER and SAME_LOWER",
              a->auto_pad);
    return -1;
}

/* same: SAME_UPPER (upper 1) or SAME_LOWER pads of one axis of a Conv or a pool: the output is
 * ceil(in / s), the padding it needs split with the odd one at the end (UPPER) or the start. */
static void same(int upper, int64_t in, int64_t k, int64_t s, int64_t d, int64_t *b, int64_t *e)
{
    int64_t out = (in + s - 1) / s, total = (out - 1) * s + (k - 1) * d + 1 - in;
    total = total < 0 ? 0 : total;
    *b = upper ? total / 2 : total - total / 2;
    *e = total - *b;
}

/* pads_of: the four pads (top, left, bottom, right) of a Conv or pool node, auto_pad resolved. */
static int pads_of(const ddl__onnx_geo *a, const int64_t in[2], const int64_t k[2], const int64_t s[2],
                   const int64_t d[2], int64_t pads[4], char *why, size_t why_bytes)
{
    int m = mode(a, why, why_bytes);
    if (m < 0 || list(&a->pads, "pads", 4, 0, 0, MAX16, pads, why, why_bytes) != DDL_OK)
        return DDL_EINVAL;
    if (m >= 1 && (pads[0] || pads[1] || pads[2] || pads[3])) {
        char t[200];
        return ddl__errf(why, why_bytes, DDL_EINVAL, "auto_pad %s with pads %s: ONNX takes one or the other",
                         a->auto_pad, text(&a->pads, t));
    }
    for (int i = 0; m >= 2 && i < 2; i++)
        same(m == 2, in[i], k[i], s[i], d[i], &pads[i], &pads[i + 2]);
    for (int i = 0; i < 4; i++)
        if (pads[i] > MAX16)
            return ddl__errf(why, why_bytes, DDL_EINVAL, "auto_pad %s: a pad of %lld: ddl takes up to %d", a->auto_pad,
                             (long long)pads[i], MAX16);
    return DDL_OK;
}

/* transposed_pads: ConvTranspose's pads and output padding from output_shape, or from auto_pad
 * SAME (output in * s): the total padding t = s (in - 1) + out_pad + (k - 1) d + 1 - out; below 0,
 * it is output padding; odd, the runtimes split it differently: refused. */
static int transposed_pads(const ddl__onnx_geo *a, const int64_t in[2], const int64_t k[2],
                           const int64_t s[2], const int64_t d[2], int64_t pads[4], int64_t op[2], char *why,
                           size_t why_bytes)
{
    int64_t out[2];
    char t[200];
    if (a->output_shape.found && list(&a->output_shape, "output_shape", 2, 1, 1, 1 << 30, out, why, why_bytes))
        return DDL_EINVAL;
    for (int i = 0; i < 2; i++) {
        if (!a->output_shape.found)
            out[i] = in[i] * s[i];
        int64_t total = s[i] * (in[i] - 1) + op[i] + (k[i] - 1) * d[i] + 1 - out[i];
        if (total < 0) {
            op[i] -= total;
            total = 0;
        }
        if (total % 2)
            return ddl__errf(why, why_bytes, DDL_EINVAL, "%s %s: an odd total padding of %lld, which onnxruntime "
                             "and the ONNX specification put at opposite ends: give pads and output_padding instead",
                             a->output_shape.found ? "output_shape" : "auto_pad",
                             a->output_shape.found ? text(&a->output_shape, t) : a->auto_pad, (long long)total);
        if (op[i] > MAX8 || total / 2 > MAX16)
            return ddl__errf(why, why_bytes, DDL_EINVAL, "output_shape %s: output padding %lld, pads %lld: ddl takes "
                             "up to %d and %d", text(&a->output_shape, t), (long long)op[i], (long long)(total / 2),
                             MAX8, MAX16);
        pads[i] = pads[i + 2] = total / 2;
    }
    return DDL_OK;
}

int ddl__onnx_conv_geometry(int kind, const ddl__onnx_geo *a, int c, int h, int w, const int64_t wdims[4],
                            ddl_conv_geometry *g, char *why, size_t why_bytes)
{
    int64_t k[2] = {wdims[2], wdims[3]}, s[2], d[2], pads[4] = {0, 0, 0, 0}, op[2] = {0, 0}, group, in[2] = {h, w};
    char t[200];
    int transposed = kind == DDL__ONNX_CONV_T;
    if (one(&a->group, "group", 1, 1, 1 << 20, "1 or more, dividing the channels", &group, why, why_bytes))
        return DDL_EINVAL;
    if (transposed && group != 1)
        return ddl__errf(why, why_bytes, DDL_EINVAL, "group (%lld): ddl's ConvTranspose takes no groups (1)",
                         (long long)group);
    if (k[0] > MAX16 || k[1] > MAX16)
        return ddl__errf(why, why_bytes, DDL_EINVAL, "a %lldx%lld kernel: ddl takes up to %d", (long long)k[0],
                         (long long)k[1], MAX16);
    if (!transposed && (c % group || wdims[0] % group || wdims[1] != c / group))
        return ddl__errf(why, why_bytes, DDL_EINVAL, "group (%lld): the weight (%lld, %lld, ...) must be (out, in / "
                         "group, ...) with in = %d and out divisible by the group", (long long)group,
                         (long long)wdims[0], (long long)wdims[1], c);
    if (transposed && wdims[0] != c)
        return ddl__errf(why, why_bytes, DDL_EINVAL, "the weight (%lld, %lld, ...) must be (in, out, ...) with in = %d",
                         (long long)wdims[0], (long long)wdims[1], c);
    if (a->kernel_shape.found && (a->kernel_shape.n != 2 || a->kernel_shape.v[0] != k[0] || a->kernel_shape.v[1] != k[1]))
        return ddl__errf(why, why_bytes, DDL_EINVAL, "kernel_shape %s: ddl takes the weight's (%lld, %lld)",
                         text(&a->kernel_shape, t), (long long)k[0], (long long)k[1]);
    if (list(&a->strides, "strides", 2, 1, 1, MAX16, s, why, why_bytes) ||
        list(&a->dilations, "dilations", 2, 1, 1, MAX8, d, why, why_bytes))
        return DDL_EINVAL;
    if (!transposed && a->output_padding.found)
        return ddl__errf(why, why_bytes, DDL_EINVAL, "output_padding %s: not a Conv attribute",
                         text(&a->output_padding, t));
    if (!transposed && a->output_shape.found)
        return ddl__errf(why, why_bytes, DDL_EINVAL, "output_shape %s: not a Conv attribute", text(&a->output_shape, t));
    if (transposed && list(&a->output_padding, "output_padding", 2, 0, 0, MAX8, op, why, why_bytes))
        return DDL_EINVAL;
    int m = mode(a, why, why_bytes);
    if (m < 0)
        return DDL_EINVAL;
    if (transposed && (a->output_shape.found || m >= 2)) {
        if (transposed_pads(a, in, k, s, d, pads, op, why, why_bytes))
            return DDL_EINVAL;
    } else if (pads_of(a, in, k, s, d, pads, why, why_bytes)) {
        return DDL_EINVAL;
    }
    *g = (ddl_conv_geometry){(int)(transposed ? wdims[1] : wdims[0]), (int)k[0], (int)k[1], (int)s[0], (int)s[1],
                             (int)pads[0], (int)pads[1], (int)pads[2], (int)pads[3], (int)d[0], (int)d[1],
                             (int)group, 0, (int)op[0], (int)op[1]};
    return DDL_OK;
}

int ddl__onnx_pool_geometry(int kind, const ddl__onnx_geo *a, int h, int w, ddl_pool2d *p, char *why,
                            size_t why_bytes)
{
    int64_t k[2], s[2], d[2], pads[4], in[2] = {h, w}, ceil_mode, count_pad, order;
    int avg = kind == DDL__ONNX_AVGPOOL;
    char t[200];
    if (!a->kernel_shape.found)
        return ddl__errf(why, why_bytes, DDL_EINVAL, "no kernel_shape: ONNX requires one");
    if (avg && a->dilations.found && list(&a->dilations, "dilations", 2, 1, 1, 1, d, why, why_bytes))
        return ddl__errf(why, why_bytes, DDL_EINVAL, "dilations %s: ddl's AveragePool takes none (1, 1)",
                         text(&a->dilations, t));
    if (list(&a->kernel_shape, "kernel_shape", 2, 1, 1, MAX16, k, why, why_bytes) ||
        list(&a->strides, "strides", 2, 1, 1, MAX16, s, why, why_bytes) ||
        list(&a->dilations, "dilations", 2, 1, 1, avg ? 1 : MAX8, d, why, why_bytes) ||
        one(&a->ceil_mode, "ceil_mode", 0, 0, 1, "0 or 1", &ceil_mode, why, why_bytes) ||
        one(&a->count_include_pad, "count_include_pad", 0, 0, avg, avg ? "0 or 1" : "0 (not a MaxPool attribute)",
            &count_pad, why, why_bytes) ||
        one(&a->storage_order, "storage_order", 0, 0, 0, "0 (row major; ddl gives no Indices)", &order, why,
            why_bytes) ||
        pads_of(a, in, k, s, d, pads, why, why_bytes))
        return DDL_EINVAL;
    *p = (ddl_pool2d){(int)k[0], (int)k[1], (int)s[0], (int)s[1], (int)pads[0], (int)pads[1], (int)pads[2],
                      (int)pads[3], (int)d[0], (int)d[1], (int)ceil_mode, (int)count_pad};
    for (int i = 0; ceil_mode && i < 2; i++) {
        int64_t span = in[i] + pads[i] + pads[i + 2] - (k[i] - 1) * d[i] - 1;
        int64_t out = span < 0 ? 0 : (span + s[i] - 1) / s[i] + 1; /* the ONNX formula */
        if (out >= 1 && ddl_pool2d_out(p, i, (int)in[i]) != out)
            return ddl__errf(why, why_bytes, DDL_EINVAL, "ceil_mode 1: the last window of %s would start in the "
                             "padding, which PyTorch drops and the ONNX formula keeps", i ? "a row" : "a column");
        if (count_pad && out >= 1 && (out - 1) * s[i] - pads[i] + k[i] > in[i] + pads[i + 2])
            return ddl__errf(why, why_bytes, DDL_EINVAL, "ceil_mode 1 with count_include_pad 1: a window runs past "
                             "the padding, which the runtimes count differently (pads %s)", text(&a->pads, t));
    }
    return DDL_OK;
}
