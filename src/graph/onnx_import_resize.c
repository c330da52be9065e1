/* onnx_import_resize.c - Resize (opsets 10 to 18) and Upsample (7 to 9) as ddl's resize layer:
 * modes nearest and linear (bilinear on H and W), the coordinate transforms asymmetric,
 * half_pixel, pytorch_half_pixel and align_corners, the nearest roundings floor, ceil and the two
 * round_prefer_*, by scales or by sizes (constants, or folded from Shape, Slice and Concat by
 * onnx_import_shape.c), the batch and channels left as they are. Before opset 11 the transform is
 * asymmetric and nearest rounds down when enlarging, up when shrinking (as onnxruntime reads
 * those opsets). Any other mode or attribute value (cubic, exclude_outside, antialias,
 * tf_crop_and_resize, tf_half_pixel_for_nn, half_pixel_symmetric, keep_aspect_ratio_policy) is
 * refused, the node, the attribute and its value named. */
#include "onnx_impl.h"

#include <string.h>

#define fail ddl__onnx_fail

/* str_attr: node n's string attribute `name` into out (dflt when absent). */
static void str_attr(const node *n, const char *name, const char *dflt, char *out, size_t bytes)
{
    snprintf(out, bytes, "%s", dflt);
    for (int i = 0; i < n->n_attrs; i++) {
        ddl__pb_slice s = n->attrs[i];
        ddl__pb_field f;
        char an[64] = "", v[64] = "";
        int has = 0;
        while (ddl__pb_next(&s, &f) > 0) {
            if (f.number == 1)
                ddl__pb_str(&f, an, sizeof an);
            if (f.number == 4 && f.wire == 2) {
                size_t k = (size_t)(f.s.end - f.s.p) < sizeof v - 1 ? (size_t)(f.s.end - f.s.p) : sizeof v - 1;
                memcpy(v, f.s.p, k);
                v[k] = '\0';
                has = 1;
            }
        }
        if (has && strcmp(an, name) == 0) {
            snprintf(out, bytes, "%s", v);
            return;
        }
    }
}

/* floats_attr: the floats of attribute `name` (packed or not) into out[max]; their count, -1 if none. */
static int floats_attr(const node *n, const char *name, float *out, int max)
{
    for (int i = 0; i < n->n_attrs; i++) {
        ddl__pb_slice s = n->attrs[i];
        ddl__pb_field f;
        char an[64] = "";
        int k = 0;
        while (ddl__pb_next(&s, &f) > 0) {
            if (f.number == 1)
                ddl__pb_str(&f, an, sizeof an);
            if (f.number == 7 && f.wire == 5 && k < max) {
                uint32_t u = (uint32_t)f.v;
                memcpy(&out[k++], &u, sizeof u);
            }
            if (f.number == 7 && f.wire == 2)
                for (const unsigned char *p = f.s.p; p + 4 <= f.s.end && k < max; p += 4)
                    out[k++] = ddl__get_lef(p);
        }
        if (strcmp(an, name) == 0)
            return k;
    }
    return -1;
}

/* word: the index of v in words[n], or -1. */
static int word(const char *v, const char *const *words, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(v, words[i]) == 0)
            return i;
    return -1;
}

/* input_of: input k of n as a constant with values (empty name or no values: 0 values); the
 * count, -1 with the error. Up to max floats into f, or int64s into v (each holds max). */
static int input_of(imp *m, const node *n, int k, float *f, int64_t *v, int max)
{
    if (k >= n->n_in || !n->in[k][0])
        return 0;
    int t = ddl__onnx_const(m, n->in[k]);
    size_t c = 0;
    if (t < 0)
        return fail(m, "node %s (%s): input %s must be a constant (folded at import if computed)", n->name, n->op,
                    n->in[k]), -1;
    const tensor *x = &m->t[t];
    if (ddl__onnx_count(x, &c) != 0 || c > (size_t)max ||
        (x->type == T_FLOAT ? ddl__onnx_floats_of(x, f, c) != 0 : ddl__onnx_ints_of(x, v, max) != (int)c))
        return fail(m, "node %s (%s): input %s: not up to %d float or int64 values", n->name, n->op, n->in[k], max),
               -1;
    return (int)c;
}

static const char *const coords[] = {"asymmetric", "half_pixel", "pytorch_half_pixel", "align_corners"};
static const char *const rounds[] = {"floor", "ceil", "round_prefer_floor", "round_prefer_ceil"};

/* attrs: mode, transform and rounding of opset 11 and later, each honoured or refused. */
static int attrs(imp *m, const node *n, int *mode, int *coord, int *round)
{
    char v[64];
    str_attr(n, "mode", "nearest", v, sizeof v);
    if ((*mode = word(v, (const char *const[]){"nearest", "linear"}, 2)) < 0)
        return fail(m, "node %s (Resize): mode %s: ddl takes nearest and linear", n->name, v);
    str_attr(n, "coordinate_transformation_mode", "half_pixel", v, sizeof v);
    if ((*coord = word(v, coords, 4)) < 0)
        return fail(m, "node %s (Resize): coordinate_transformation_mode %s: ddl takes asymmetric, half_pixel, "
                    "pytorch_half_pixel and align_corners", n->name, v);
    str_attr(n, "nearest_mode", "round_prefer_floor", v, sizeof v);
    if ((*round = word(v, rounds, 4)) < 0)
        return fail(m, "node %s (Resize): nearest_mode %s: ddl takes floor, ceil, round_prefer_floor and "
                    "round_prefer_ceil", n->name, v);
    str_attr(n, "keep_aspect_ratio_policy", "stretch", v, sizeof v);
    if (strcmp(v, "stretch") != 0)
        return fail(m, "node %s (Resize): keep_aspect_ratio_policy %s: ddl takes stretch", n->name, v);
    attr ex = ddl__onnx_get(n, "exclude_outside"), aa = ddl__onnx_get(n, "antialias");
    if (ex.found && (ex.n < 1 || ex.ints[0] != 0))
        return fail(m, "node %s (Resize): exclude_outside %lld: ddl takes 0", n->name,
                    (long long)(ex.n >= 1 ? ex.ints[0] : -1));
    if (aa.found && (aa.n < 1 || aa.ints[0] != 0))
        return fail(m, "node %s (Resize): antialias %lld: ddl takes 0", n->name, (long long)(aa.n >= 1 ? aa.ints[0] : -1));
    return DDL_OK; /* cubic_coeff_a: cubic's alone; extrapolation_value: tf_crop_and_resize's alone */
}

/* spread: values given for `axes` (opset 18) as four, the others 1 (scales) or the input's (sizes). */
static int spread(imp *m, const node *n, int k, float *f, int64_t *v, const int64_t *d)
{
    attr ax = ddl__onnx_get(n, "axes");
    if (!ax.found)
        return k == 4 ? DDL_OK : fail(m, "node %s (Resize): %d scales or sizes for a rank-4 input", n->name, k);
    float f4[4] = {1, 1, 1, 1};
    int64_t v4[4] = {d[0], d[1], d[2], d[3]};
    int seen[4] = {0};
    if (ax.n != k)
        return fail(m, "node %s (Resize): %d axes for %d scales or sizes", n->name, ax.n, k);
    for (int i = 0; i < k; i++) {
        int64_t a = ax.ints[i] < 0 ? ax.ints[i] + 4 : ax.ints[i];
        if (a < 0 || a > 3 || seen[a]++)
            return fail(m, "node %s (Resize): axes: %lld out of range or repeated", n->name, (long long)ax.ints[i]);
        f4[a] = f[i], v4[a] = v[i];
    }
    memcpy(f, f4, sizeof f4);
    memcpy(v, v4, sizeof v4);
    return DDL_OK;
}

int ddl__onnx_resize(imp *m, ddl_graph *g, const node *n)
{
    int x = ddl__onnx_layer_in(m, n, n->in[0]), c, h, w, mode = 0, coord = 0, round = 0, up = n->op[0] == 'U';
    char why[DDL_ERR_BYTES], a[200];
    if (x < 0)
        return DDL_EINVAL;
    if (ddl__graph_layer_shape(g, x, &c, &h, &w, why, sizeof why) != DDL_OK)
        return fail(m, "node %s (%s): %s", n->name, n->op, why);
    if (ddl__onnx_rank(g, x) != 4)
        return fail(m, "node %s (%s): of a flat (N, %d) input: ddl resizes (N, C, H, W) images", n->name, n->op, c * h * w);
    float f[8] = {0};
    int64_t v[8] = {0}, d[4] = {DDL__ONNX_BATCH, c, h, w};
    int ns, nz = 0;
    if (up || m->opset < 11) { /* Upsample, Resize-10: scales as input 1 (or Upsample-7's attribute) */
        char mv[64];
        str_attr(n, "mode", "nearest", mv, sizeof mv);
        mode = word(mv, (const char *const[]){"nearest", "linear", "bilinear"}, 3);
        if (mode < 0)
            return fail(m, "node %s (%s): mode %s: ddl takes nearest and linear", n->name, n->op, mv);
        mode = mode ? DDL_RESIZE_LINEAR : DDL_RESIZE_NEAREST;
        ns = n->n_in > 1 ? input_of(m, n, 1, f, v, 8) : floats_attr(n, "scales", f, 8);
        if (ns <= 0 && n->n_in <= 1)
            return fail(m, "node %s (%s): no scales", n->name, n->op);
        coord = DDL_RESIZE_ASYMMETRIC;
    } else {
        if (attrs(m, n, &mode, &coord, &round) != DDL_OK || (ns = input_of(m, n, 2, f, v, 8)) < 0 ||
            (nz = input_of(m, n, 3, f + 4, v + 4, 4)) < 0) /* f + 4: sizes are int64, v + 4 theirs (4 dims) */
            return DDL_EINVAL;
        if ((ns > 0) == (nz > 0))
            return fail(m, "node %s (Resize): %s: ddl takes scales or sizes, one of them", n->name,
                        ns ? "both scales and sizes" : "neither scales nor sizes");
    }
    if (ns < 0)
        return DDL_EINVAL;
    if (ns > 0) {
        int k = up || m->opset < 11 ? 1 : 2, t = k < n->n_in ? ddl__onnx_const(m, n->in[k]) : -1;
        if (t >= 0 && m->t[t].type != T_FLOAT) /* t < 0: Upsample-7's attribute, floats */
            return fail(m, "node %s (%s): scales %s: not float", n->name, n->op, n->in[k]);
        if (spread(m, n, ns, f, v, d) != DDL_OK)
            return DDL_EINVAL;
        if (f[0] != 1.0f || f[1] != 1.0f || !(f[2] > 0.0f && f[2] < 1e6f) || !(f[3] > 0.0f && f[3] < 1e6f))
            return fail(m, "node %s (%s): scales (%g, %g, %g, %g): ddl resizes H and W (scales > 0), the batch and "
                        "channels by 1", n->name, n->op, (double)f[0], (double)f[1], (double)f[2], (double)f[3]);
        if (up || m->opset < 11) { /* onnxruntime's rounding there: down when enlarging, up when shrinking */
            if ((f[2] < 1.0f) != (f[3] < 1.0f) && mode == DDL_RESIZE_NEAREST)
                return fail(m, "node %s (%s): scales %g and %g: before opset 11, nearest rounds down one way and up "
                            "the other, which ddl does not", n->name, n->op, (double)f[2], (double)f[3]);
            round = f[2] < 1.0f ? DDL_RESIZE_CEIL : DDL_RESIZE_FLOOR;
        }
        return ddl__onnx_added_w(m, g, n, ddl_graph_resize(g, x, mode, coord, round, f[2], f[3], 0, 0), -1, -1, 0);
    }
    const tensor *t = &m->t[ddl__onnx_const(m, n->in[3])];
    if (t->type != T_INT64 || spread(m, n, nz, f, v + 4, d) != DDL_OK)
        return t->type != T_INT64 ? fail(m, "node %s (Resize): sizes %s: not int64", n->name, n->in[3]) : DDL_EINVAL;
    int64_t *s = v + 4;
    if (s[0] != DDL__ONNX_BATCH || s[1] != c || s[2] < 1 || s[3] < 1 || s[2] > 1 << 24 || s[3] > 1 << 24)
        return fail(m, "node %s (Resize): sizes %s of (N, %d, %d, %d): ddl takes the batch left free (N, from the "
                    "input's Shape) and the channels as they are", n->name, ddl__onnx_ints_text(s, 4, a), c, h, w);
    return ddl__onnx_added_w(m, g, n, ddl_graph_resize(g, x, mode, coord, round, 0.0f, 0.0f, (int)s[2], (int)s[3]), -1,
                           -1, 0);
}
