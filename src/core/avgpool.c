/* avgpool.c - average pooling over k x k windows and over whole planes (global), forward and
 * backward. Planes are independent, so they are spread over the thread pool in ranges whose
 * cuts cannot change a bit; each output is summed in the same order on any thread count. */
#include "impl.h"

#include <string.h>

#define GRAIN_FLOATS ((size_t)16384)

typedef struct avg_job {
    int h, w, k, stride, oh, ow;
    const float *in;
    float *out;
} avg_job;

static void avg_planes(void *ctx, size_t lo, size_t hi)
{
    const avg_job *j = ctx;
    size_t hw = (size_t)j->h * (size_t)j->w, ohw = (size_t)j->oh * (size_t)j->ow;
    float scale = 1.0f / (float)(j->k * j->k);
    for (size_t plane = lo; plane < hi; plane++) {
        const float *img = j->in + plane * hw;
        float *out = j->out + plane * ohw;
        for (int oy = 0; oy < j->oh; oy++)
            for (int ox = 0; ox < j->ow; ox++) {
                const float *win = img + (size_t)oy * j->stride * j->w + (size_t)ox * j->stride;
                float sum = 0.0f;
                for (int i = 0; i < j->k; i++)
                    for (int q = 0; q < j->k; q++)
                        sum += win[i * j->w + q];
                out[oy * j->ow + ox] = sum * scale;
            }
    }
}

void ddl_avgpool_forward(int n, int c, int h, int w, int k, int stride, const float *x, float *y)
{
    if (k <= 0 || stride <= 0 || h < k || w < k)
        return;
    avg_job j = {h, w, k, stride, (h - k) / stride + 1, (w - k) / stride + 1, x, y};
    ddl__parallel_range((size_t)n * c, GRAIN_FLOATS / ((size_t)h * w) + 1, avg_planes, &j);
}

/* unavg_planes: each input position gathers dy of the windows that cover it, in window order,
 * so overlapping windows (stride < k) add in one fixed order. */
static void unavg_planes(void *ctx, size_t lo, size_t hi)
{
    const avg_job *j = ctx;
    size_t hw = (size_t)j->h * (size_t)j->w, ohw = (size_t)j->oh * (size_t)j->ow;
    float scale = 1.0f / (float)(j->k * j->k);
    for (size_t plane = lo; plane < hi; plane++) {
        const float *dy = j->in + plane * ohw;
        float *dx = j->out + plane * hw;
        memset(dx, 0, hw * sizeof *dx);
        for (int oy = 0; oy < j->oh; oy++)
            for (int ox = 0; ox < j->ow; ox++) {
                float g = dy[oy * j->ow + ox] * scale;
                float *win = dx + (size_t)oy * j->stride * j->w + (size_t)ox * j->stride;
                for (int i = 0; i < j->k; i++)
                    for (int q = 0; q < j->k; q++)
                        win[i * j->w + q] += g;
            }
    }
}

void ddl_avgpool_backward(int n, int c, int h, int w, int k, int stride, const float *dy, float *dx)
{
    if (k <= 0 || stride <= 0 || h < k || w < k) {
        memset(dx, 0, (size_t)n * c * h * w * sizeof *dx);
        return;
    }
    avg_job j = {h, w, k, stride, (h - k) / stride + 1, (w - k) / stride + 1, dy, dx};
    ddl__parallel_range((size_t)n * c, GRAIN_FLOATS / ((size_t)h * w) + 1, unavg_planes, &j);
}

/* ---- global ---- */

typedef struct gap_job {
    size_t s;
    const float *in;
    float *out;
} gap_job;

static void gap_planes(void *ctx, size_t lo, size_t hi)
{
    const gap_job *j = ctx;
    for (size_t plane = lo; plane < hi; plane++) {
        const float *p = j->in + plane * j->s;
        float sum = 0.0f;
        for (size_t i = 0; i < j->s; i++)
            sum += p[i];
        j->out[plane] = sum / (float)j->s;
    }
}

static void ungap_planes(void *ctx, size_t lo, size_t hi)
{
    const gap_job *j = ctx;
    for (size_t plane = lo; plane < hi; plane++) {
        float g = j->in[plane] / (float)j->s;
        float *p = j->out + plane * j->s;
        for (size_t i = 0; i < j->s; i++)
            p[i] = g;
    }
}

void ddl_global_avgpool_forward(int n, int c, int s, const float *x, float *y)
{
    if (s < 1)
        return;
    gap_job j = {(size_t)s, x, y};
    ddl__parallel_range((size_t)n * c, GRAIN_FLOATS / (size_t)s + 1, gap_planes, &j);
}

void ddl_global_avgpool_backward(int n, int c, int s, const float *dy, float *dx)
{
    if (s < 1)
        return;
    gap_job j = {(size_t)s, dy, dx};
    ddl__parallel_range((size_t)n * c, GRAIN_FLOATS / (size_t)s + 1, ungap_planes, &j);
}
