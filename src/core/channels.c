/* channels.c - layers that move whole channel planes and compute nothing: ShuffleNet's channel
 * shuffle and a slice of channels (PyTorch's x.chunk(2, dim=1) and x[:, a:b]), forward and
 * backward. Each plane is one memcpy; the samples are split over the pool's threads, so any
 * thread count gives the same bits. */
#include "impl.h"

#include <string.h>

#define GRAIN_FLOATS ((size_t)16384) /* as ops.c: a task moves at least this many floats */

/* one job of either kind: a shuffle (c, groups, inverse) or a slice (in_c, out_c, at, add) */
typedef struct channels_job {
    int c, groups, inverse, add;
    size_t s, in_c, out_c, at;   /* plane size; input and output channels a sample; slice: its start */
    const float *x;
    float *y;
} channels_job;

/* shuffle_samples: channel i * (c / groups) + j of x goes to channel j * groups + i of y (the
 * inverse: back) */
static void shuffle_samples(void *arg, size_t lo, size_t hi)
{
    const channels_job *j = (const channels_job *)arg;
    size_t per = (size_t)(j->c / j->groups), plane = j->s * sizeof(float);
    for (size_t n = lo; n < hi; n++) {
        const float *x = j->x + n * j->c * j->s;
        float *y = j->y + n * j->c * j->s;
        for (size_t i = 0; i < (size_t)j->groups; i++)
            for (size_t k = 0; k < per; k++) {
                size_t src = i * per + k, dst = k * (size_t)j->groups + i;
                if (j->inverse)
                    memcpy(y + src * j->s, x + dst * j->s, plane);
                else
                    memcpy(y + dst * j->s, x + src * j->s, plane);
            }
    }
}

void ddl__shuffle_channels(int n, int c, int groups, size_t s, const float *x, float *y, int inverse)
{
    channels_job j = {.c = c, .groups = groups, .inverse = inverse, .s = s, .x = x, .y = y};
    ddl__parallel_range((size_t)n, GRAIN_FLOATS / ((size_t)c * s + 1) + 1, shuffle_samples, &j);
}

/* slice_samples: forward (add < 0): y's out_c channels are x's from `at`; backward: y, of in_c
 * channels, gets x (out_c channels) at `at`, zeros elsewhere, or (add) x added there alone */
static void slice_samples(void *arg, size_t lo, size_t hi)
{
    const channels_job *j = (const channels_job *)arg;
    for (size_t n = lo; n < hi; n++) {
        if (j->add < 0) {
            memcpy(j->y + n * j->out_c * j->s, j->x + (n * j->in_c + j->at) * j->s, j->out_c * j->s * sizeof(float));
            continue;
        }
        float *y = j->y + n * j->in_c * j->s;
        const float *x = j->x + n * j->out_c * j->s;
        size_t from = j->at * j->s, len = j->out_c * j->s, all = j->in_c * j->s;
        if (j->add) {
            for (size_t k = 0; k < len; k++)
                y[from + k] += x[k];
            continue;
        }
        memset(y, 0, from * sizeof(float));
        memcpy(y + from, x, len * sizeof(float));
        memset(y + from + len, 0, (all - from - len) * sizeof(float));
    }
}

void ddl__slice_channels(int n, int c, int start, int count, size_t s, const float *x, float *y)
{
    channels_job j = {.add = -1, .s = s, .in_c = (size_t)c, .out_c = (size_t)count, .at = (size_t)start, .x = x,
                     .y = y};
    ddl__parallel_range((size_t)n, GRAIN_FLOATS / ((size_t)count * s + 1) + 1, slice_samples, &j);
}

void ddl__slice_channels_backward(int n, int c, int start, int count, size_t s, const float *dy, float *dx, int add)
{
    channels_job j = {.add = add != 0, .s = s, .in_c = (size_t)c, .out_c = (size_t)count, .at = (size_t)start,
                     .x = dy, .y = dx};
    ddl__parallel_range((size_t)n, GRAIN_FLOATS / ((size_t)c * s + 1) + 1, slice_samples, &j);
}
