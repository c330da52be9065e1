/* maxpool2.h - the plane walks of the 2x2 stride-2 max-pool's vector kernels (maxpool_avx512.c,
 * maxpool_avx2.c): every plane's row pairs in order, each by the kernel's own row function.
 * Internal to src/core. */
#ifndef DDL_CORE_MAXPOOL2_H
#define DDL_CORE_MAXPOOL2_H

#include "impl.h"

#include <string.h>

/* the forward of one row pair: the ow windows of rows r0 and r1 (= r0 + w), the first at index
 * top, into out and arg; the backward: rows r0 and r1 of dx from the windows' dy and argmax
 * (keep: +0 where a window's output is not > 0, or NULL) */
typedef void ddl__pool2_rows(const float *r0, int w, int ow, int top, float *out, int32_t *arg);
typedef void ddl__unpool2_rows(const float *dy, const int32_t *arg, const float *keep, int w, int ow, int top,
                               float *r0);

static inline void ddl__pool2_planes(size_t planes, int h, int w, const float *x, float *y, int32_t *argmax,
                                     ddl__pool2_rows *rows)
{
    int oh = h / 2, ow = w / 2;
    size_t hw = (size_t)h * w, ohw = (size_t)oh * ow;
    for (size_t plane = 0; plane < planes; plane++)
        for (int oy = 0; oy < oh; oy++)
            rows(x + plane * hw + (size_t)(2 * oy) * w, w, ow, 2 * oy * w, y + plane * ohw + (size_t)oy * ow,
                 argmax + plane * ohw + (size_t)oy * ow);
}

/* ddl__unpool2_planes: dx of every plane; the last column and row, in no window when w or h is
 * odd, zeros */
static inline void ddl__unpool2_planes(size_t planes, int h, int w, const float *dy, const int32_t *argmax,
                                       const float *keep, float *dx, ddl__unpool2_rows *rows)
{
    int oh = h / 2, ow = w / 2;
    size_t hw = (size_t)h * w, ohw = (size_t)oh * ow;
    for (size_t plane = 0; plane < planes; plane++) {
        float *d = dx + plane * hw;
        for (int oy = 0; oy < oh; oy++) {
            float *r0 = d + (size_t)(2 * oy) * w;
            size_t at = plane * ohw + (size_t)oy * ow;
            rows(dy + at, argmax + at, keep ? keep + at : NULL, w, ow, 2 * oy * w, r0);
            if (w % 2)
                r0[w - 1] = r0[2 * w - 1] = 0.0f;
        }
        if (h % 2)
            memset(d + (size_t)(h - 1) * w, 0, (size_t)w * sizeof *d);
    }
}

#endif
