/* numpy_set.c - a ddl_dataset from numpy arrays: images (N, H, W), (N, H, W, C) or (N, C, H, W)
 * and labels (N,) or masks (N, H, W[, 1]), as Keras and PyTorch users save them.
 * Owns: deciding the layout from the shape, putting pixels in CHW order (bytes stay bytes; floats
 * stay floats, on the scale of a byte / 255), labels and masks as classes (bytes, or uint16 past
 * 256 classes), and refusing what does not fit with the array's name and shape.
 * Must not: guess silently (a shape that could be read two ways reads as Keras's NHWC, said in
 * ddl.h), or allocate except through the caller's allocator. The arrays are read by npy.c. */
#include "core/impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define SHAPE_TEXT 96

static void shape_text(const ddl_npy *a, char *s, size_t n)
{
    size_t used = (size_t)snprintf(s, n, "(");
    for (int i = 0; i < a->n_dims && used < n; i++)
        used += (size_t)snprintf(s + used, n - used, "%s%lld", i ? ", " : "", (long long)a->shape[i]);
    if (used < n)
        snprintf(s + used, n - used, "%s)", a->n_dims == 1 ? "," : "");
}

static const char *dtype_name(int dtype)
{
    static const char *const names[] = {"?", "uint8", "int8", "bool", "int32", "int64", "float32", "float64"};
    return dtype >= 1 && dtype <= DDL_NPY_FLOAT64 ? names[dtype] : "?";
}

/* value: element i of a as a double. */
static double value(const ddl_npy *a, int64_t i)
{
    switch (a->dtype) {
    case DDL_NPY_UINT8:
    case DDL_NPY_BOOL: return ((const uint8_t *)a->data)[i];
    case DDL_NPY_INT8: return ((const int8_t *)a->data)[i];
    case DDL_NPY_INT32: return ((const int32_t *)a->data)[i];
    case DDL_NPY_INT64: return (double)((const int64_t *)a->data)[i];
    case DDL_NPY_FLOAT32: return ((const float *)a->data)[i];
    default: return ((const double *)a->data)[i];
    }
}

static int is_float(const ddl_npy *a) { return a->dtype == DDL_NPY_FLOAT32 || a->dtype == DDL_NPY_FLOAT64; }

/* ---- images ---- */

/* image_layout: N, C, H, W of the images and whether channels come last (NHWC). */
static int image_layout(const char *spec, const ddl_npy *a, int dims[4], int *nhwc, char *err, size_t err_bytes)
{
    char sh[SHAPE_TEXT];
    shape_text(a, sh, sizeof sh);
    const int64_t *s = a->shape;
    *nhwc = 0;
    if (a->n_dims == 3) {
        dims[0] = (int)s[0], dims[1] = 1, dims[2] = (int)s[1], dims[3] = (int)s[2];
    } else if (a->n_dims == 4 && (s[3] == 1 || s[3] == 3)) {
        dims[0] = (int)s[0], dims[1] = (int)s[3], dims[2] = (int)s[1], dims[3] = (int)s[2];
        *nhwc = 1;
    } else if (a->n_dims == 4 && (s[1] == 1 || s[1] == 3)) {
        dims[0] = (int)s[0], dims[1] = (int)s[1], dims[2] = (int)s[2], dims[3] = (int)s[3];
    } else
        return ddl__errf(err, err_bytes, DDL_EINVAL,
                         "%s: images of shape %s: expected (N, H, W), (N, H, W, C) or (N, C, H, W) with C 1 or 3", spec,
                         sh);
    for (int i = 0; i < a->n_dims; i++)
        if (s[i] < 1 || s[i] > (1 << 24) || (i > 0 && s[i] > 65536))
            return ddl__errf(err, err_bytes, DDL_EINVAL, "%s: images of shape %s: a dimension out of range", spec, sh);
    if (a->dtype != DDL_NPY_UINT8 && !is_float(a))
        return ddl__errf(err, err_bytes, DDL_EINVAL, "%s: images of shape %s are %s: expected uint8, float32 or float64",
                         spec, sh, dtype_name(a->dtype));
    return DDL_OK;
}

/* float_scale: the factor that puts float pixels on the scale of a byte / 255: 1 for pixels in
 * 0..1 and for anything outside 0..255 (pre-normalised: kept as they are), 1 / 255 for pixels
 * in 0..255 with some above 1. Refuses NaN and infinities. */
static int float_scale(const char *spec, const ddl_npy *a, double *scale, char *err, size_t err_bytes)
{
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < a->count; i++) {
        double v = value(a, i);
        if (!isfinite(v))
            return ddl__errf(err, err_bytes, DDL_EINVAL, "%s: pixel %lld is %g: pixels must be finite", spec,
                             (long long)i, v);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    *scale = lo >= 0.0 && hi > 1.0 && hi <= 255.0 ? 1.0 / 255.0 : 1.0;
    return DDL_OK;
}

/* put_images: a's pixels (N, C, H, W) into out: bytes from uint8 arrays (out8), floats times
 * scale from float arrays (outf). */
static void put_images(const ddl_npy *a, const int d[4], int nhwc, double scale, uint8_t *out8, float *outf)
{
    size_t plane = (size_t)d[2] * (size_t)d[3], per = plane * (size_t)d[1];
    for (size_t n = 0; n < (size_t)d[0]; n++)
        for (size_t c = 0; c < (size_t)d[1]; c++)
            for (size_t p = 0; p < plane; p++) {
                size_t src = nhwc ? n * per + p * (size_t)d[1] + c : n * per + c * plane + p;
                if (out8)
                    out8[n * per + c * plane + p] = ((const uint8_t *)a->data)[src];
                else
                    outf[n * per + c * plane + p] = (float)(value(a, (int64_t)src) * scale);
            }
}

/* ---- targets ---- */

/* check_targets: the shape of labels (N,) or masks (N, H, W[, 1]) and their values; *th, *tw and
 * *n_classes as the data set wants them. */
static int check_targets(const char *spec, const ddl_npy *t, const int d[4], int *th, int *tw, int *n_classes,
                         char *err, size_t err_bytes)
{
    char sh[SHAPE_TEXT];
    shape_text(t, sh, sizeof sh);
    int labels = t->n_dims == 1;
    int masks = (t->n_dims == 3 || (t->n_dims == 4 && t->shape[3] == 1)) && t->shape[1] == d[2] && t->shape[2] == d[3];
    if ((!labels && !masks) || t->shape[0] != d[0])
        return ddl__errf(err, err_bytes, DDL_EINVAL,
                         "%s: targets of shape %s: expected labels (%d,) or masks (%d, %d, %d) or (%d, %d, %d, 1)", spec,
                         sh, d[0], d[0], d[2], d[3], d[0], d[2], d[3]);
    if (labels && is_float(t))
        return ddl__errf(err, err_bytes, DDL_EINVAL, "%s: labels of shape %s are %s: expected integers", spec, sh,
                         dtype_name(t->dtype));
    int threshold = is_float(t) || t->dtype == DDL_NPY_BOOL, top = 0;
    for (int64_t i = 0; !threshold && i < t->count; i++) {
        double v = value(t, i);
        if (v < 0 || v > DDL_MAX_CLASSES - 1)
            return ddl__errf(err, err_bytes, DDL_EINVAL, "%s: %s %.0f at index %lld: classes go from 0 to %d", spec,
                             labels ? "label" : "mask class", v, (long long)i, DDL_MAX_CLASSES - 1);
        top = (int)v > top ? (int)v : top;
    }
    *th = labels ? 1 : d[2];
    *tw = labels ? 1 : d[3];
    *n_classes = threshold ? 2 : top + 1 < 2 ? 2 : top + 1;
    return DDL_OK;
}

/* put_targets: t's classes (checked) into out8, or out16 past 256 classes; floats and bools
 * thresholded at 0.5. */
static void put_targets(const ddl_npy *t, uint8_t *out8, uint16_t *out16)
{
    int threshold = is_float(t) || t->dtype == DDL_NPY_BOOL;
    for (int64_t i = 0; i < t->count; i++) {
        double v = value(t, i);
        int k = threshold ? v >= 0.5 : (int)v;
        if (out8)
            out8[i] = (uint8_t)k;
        else
            out16[i] = (uint16_t)k;
    }
}

/* ---- the data set ---- */

int ddl_dataset_load_numpy(const char *images, const char *targets, const ddl_allocator *alloc, ddl_dataset *out,
                           char *err, size_t err_bytes)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!images || !targets || !out)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_dataset_load_numpy: images, targets and out must be given");
    ddl_npy x, y;
    int d[4] = {0}, nhwc = 0, th = 1, tw = 1, nc = 0;
    double scale = 1.0;
    int rc = ddl_npy_load(images, alloc, &x, err, err_bytes);
    if (rc)
        return rc;
    if ((rc = ddl_npy_load(targets, alloc, &y, err, err_bytes))) {
        ddl_npy_free(&x, alloc);
        return rc;
    }
    rc = image_layout(images, &x, d, &nhwc, err, err_bytes);
    if (rc == DDL_OK && is_float(&x))
        rc = float_scale(images, &x, &scale, err, err_bytes);
    if (rc == DDL_OK)
        rc = check_targets(targets, &y, d, &th, &tw, &nc, err, err_bytes);
    /* one block: images (bytes or floats), then targets (bytes, or u16 past 256 classes) */
    size_t ibytes = (size_t)x.count * (is_float(&x) ? sizeof(float) : 1), at = ddl__align_up(ibytes);
    size_t tbytes = (size_t)y.count * (nc > 256 ? sizeof(uint16_t) : 1);
    uint8_t *block = NULL;
    if (rc == DDL_OK && !(block = (uint8_t *)ddl__alloc(alloc, at + tbytes + 1)))
        rc = ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: cannot allocate %zu bytes for the data set", images,
                       at + tbytes);
    /* no arithmetic on a NULL block (a refused set): NULL + at is undefined */
    uint8_t *img8 = is_float(&x) ? NULL : block, *tg8 = nc > 256 || !block ? NULL : block + at;
    float *imgf = is_float(&x) ? (float *)(void *)block : NULL;
    uint16_t *tg16 = nc > 256 && block ? (uint16_t *)(void *)(block + at) : NULL;
    if (rc == DDL_OK) {
        put_targets(&y, tg8, tg16);
        put_images(&x, d, nhwc, scale, img8, imgf);
    }
    ddl_npy_free(&x, alloc);
    ddl_npy_free(&y, alloc);
    if (rc) {
        ddl__free(alloc, block);
        return rc;
    }
    *out = (ddl_dataset){.n = d[0], .c = d[1], .h = d[2], .w = d[3], .th = th, .tw = tw, .n_classes = nc,
                         .images = img8, .fimages = imgf, .targets = tg8, .targets16 = tg16, .owned = block,
                         .alloc = alloc};
    return DDL_OK;
}
