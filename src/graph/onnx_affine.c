/* onnx_affine.c - Mul, Div, Add and Sub of a constant, as the ONNX importer takes them: a scalar
 * or one value per channel, broadcast the numpy way (right-aligned: (C, 1, 1) and (1, C, 1, 1) on
 * an image (N, C, H, W), (C) and (1, C) on a vector (N, C)); either operand may be the constant
 * (1 - x is -x + 1; 2 / x is refused: not affine). Each becomes x * scale + shift per channel:
 * on the input, composed into one normalisation; elsewhere, an affine layer. Knows nothing of
 * protobuf or graphs. */
#include "onnx_impl.h"

#include <math.h>
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

void ddl__onnx_norm_compose(ddl__onnx_norm *a, const float *s, const float *t)
{
    for (int i = 0; i < a->c; i++) {
        a->scale[i] *= s[i];
        a->shift[i] = a->shift[i] * s[i] + t[i];
    }
}

int ddl__onnx_norm_uniform(const ddl__onnx_norm *a)
{
    for (int i = 1; i < a->c; i++)
        if (a->scale[i] != a->scale[0] || a->shift[i] != a->shift[0])
            return 0;
    return 1;
}

int ddl__onnx_norm_fits(const ddl__onnx_norm *a)
{
    if (!ddl__onnx_norm_uniform(a) && (a->c < 2 || a->c > DDL_MAX_NORM_CHANNELS))
        return 0;
    for (int i = 0; i < a->c; i++) /* ddl's normalisation divides by a positive std */
        if (!(isfinite(a->scale[i]) && a->scale[i] > 0.0f && isfinite(a->shift[i]) &&
              isfinite(1.0f / (255.0f * a->scale[i]))))
            return 0;
    return 1;
}
