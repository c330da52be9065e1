/* act.c - the activations PyTorch users write, beside ops.c's ReLU: LeakyReLU, Sigmoid, Tanh,
 * SiLU, GELU (erf, and the tanh approximation), Hardswish, Hardsigmoid, Clip (ReLU6), ELU, and
 * Softmax / LogSoftmax over any run of axes. Forward and backward of each, over the pool in
 * ranges whose cuts cannot change a bit (each value, or each softmax row, is computed alone, in a
 * fixed order); exp, erf and tanh are libm's in float, so a run gives the same bits at any thread
 * count. Formulas are written as the ONNX graphs PyTorch exports compute them (GELU's x / sqrt 2,
 * then erf, + 1, * x, * 0.5), so that another runtime's outputs agree to the last bits or nearly.
 * Nothing allocates. */
#include "impl.h"

#include <math.h>

#define GRAIN ((size_t)8192)      /* values per range: libm's exp and erf are some ns each */
#define SQRT2 1.41421356237f      /* float 1.4142135, the constant of PyTorch's GELU export */
#define GELU_K 0.7978845608f      /* sqrt(2 / pi) */
#define GELU_C 0.044715f
#define INV_SQRT_2PI 0.3989422804f

int ddl__act_grad_from_y(int kind, float alpha)
{
    switch (kind) {
    case DDL_ACT_SIGMOID:
    case DDL_ACT_TANH:
    case DDL_ACT_HARDSIGMOID:
    case DDL_ACT_CLIP: return 1;
    case DDL_ACT_LEAKY_RELU: return alpha >= 0.0f; /* then y > 0 exactly where x > 0 */
    case DDL_ACT_ELU: return alpha > 0.0f;
    default: return 0;
    }
}

/* ---- element-wise ---- */

typedef struct act_job {
    int kind;
    float alpha, beta;
    const float *x, *y, *dy;
    float *out;
} act_job;

/* sigmoids: s[k] = 1 / (1 + expf(-x[k])) for k < n <= ACT_CHUNK, the exponentials 16 at a time
 * (ddl__expf_n: the library's expf, its bits, in lanes); s may be x. */
#define ACT_CHUNK 256
static void sigmoids(size_t n, const float *x, float *s)
{
    for (size_t k = 0; k < n; k++)
        s[k] = -x[k];
    ddl__expf_n(n, s, s);
    for (size_t k = 0; k < n; k++)
        s[k] = 1.0f / (1.0f + s[k]);
}

/* clamp: lo <= v <= hi by selects (fminf and fmaxf do not vectorise without -ffinite-math-only);
 * a NaN stays NaN. */
static inline float clamp(float v, float lo, float hi)
{
    v = v < lo ? lo : v;
    return v > hi ? hi : v;
}

static void act_range(void *ctx, size_t lo, size_t hi)
{
    const act_job *j = ctx;
    const float *x = j->x, a = j->alpha, b = j->beta;
    float *y = j->out;
    switch (j->kind) {
    case DDL_ACT_LEAKY_RELU: /* selects of loaded values, then arithmetic on both: it vectorises */
        for (size_t i = lo; i < hi; i++) {
            float v = x[i], pos = v > 0.0f ? v : 0.0f, neg = v > 0.0f ? 0.0f : v;
            y[i] = pos + neg * a;
        }
        break;
    case DDL_ACT_SIGMOID:
        for (size_t i = lo; i < hi; i += ACT_CHUNK)
            sigmoids(hi - i < ACT_CHUNK ? hi - i : ACT_CHUNK, x + i, y + i);
        break;
    case DDL_ACT_TANH:
        for (size_t i = lo; i < hi; i++)
            y[i] = tanhf(x[i]);
        break;
    case DDL_ACT_SILU:
        for (size_t i = lo; i < hi; i += ACT_CHUNK) {
            float s[ACT_CHUNK];
            size_t n = hi - i < ACT_CHUNK ? hi - i : ACT_CHUNK;
            sigmoids(n, x + i, s);
            for (size_t k = 0; k < n; k++)
                y[i + k] = x[i + k] != x[i + k] ? s[k] : x[i + k] * s[k]; /* NaN: s's, as x * sigmoid(x) */
        }
        break;
    case DDL_ACT_GELU:
        for (size_t i = lo; i < hi; i++)
            y[i] = x[i] * (erff(x[i] / SQRT2) + 1.0f) * 0.5f;
        break;
    case DDL_ACT_GELU_TANH:
        for (size_t i = lo; i < hi; i++) {
            float v = x[i];
            y[i] = 0.5f * (v * (1.0f + tanhf(GELU_K * (v + GELU_C * (v * (v * v))))));
        }
        break;
    case DDL_ACT_HARDSWISH: /* x * hardsigmoid(x), hardsigmoid with alpha 1/6 and beta 0.5 */
        for (size_t i = lo; i < hi; i++)
            y[i] = x[i] * clamp(x[i] * (1.0f / 6.0f) + 0.5f, 0.0f, 1.0f);
        break;
    case DDL_ACT_HARDSIGMOID:
        for (size_t i = lo; i < hi; i++)
            y[i] = clamp(x[i] * a + b, 0.0f, 1.0f);
        break;
    case DDL_ACT_CLIP:
        for (size_t i = lo; i < hi; i++)
            y[i] = clamp(x[i], a, b);
        break;
    case DDL_ACT_ELU:
        for (size_t i = lo; i < hi; i++)
            y[i] = x[i] > 0.0f ? x[i] : a * expm1f(x[i]);
        break;
    default: break;
    }
}

/* act_grad_range: dx from y where ddl__act_grad_from_y says it can (so an in-place layer, whose x
 * is gone, and a copying one give the same bits), else from x. */
static void act_grad_range(void *ctx, size_t lo, size_t hi)
{
    const act_job *j = ctx;
    const float *x = j->x, *y = j->y, *dy = j->dy, a = j->alpha, b = j->beta;
    float *dx = j->out;
    switch (j->kind) {
    case DDL_ACT_LEAKY_RELU: {
        const float *m = a >= 0.0f ? y : x;
        for (size_t i = lo; i < hi; i++) {
            float k = m[i] > 0.0f ? 1.0f : a; /* a factor chosen, then the product */
            dx[i] = dy[i] * k;
        }
        break;
    }
    case DDL_ACT_SIGMOID:
        for (size_t i = lo; i < hi; i++)
            dx[i] = dy[i] * (y[i] * (1.0f - y[i]));
        break;
    case DDL_ACT_TANH:
        for (size_t i = lo; i < hi; i++)
            dx[i] = dy[i] * (1.0f - y[i] * y[i]);
        break;
    case DDL_ACT_SILU: /* s (1 + x (1 - s)) */
        for (size_t i = lo; i < hi; i += ACT_CHUNK) {
            float s[ACT_CHUNK];
            size_t n = hi - i < ACT_CHUNK ? hi - i : ACT_CHUNK;
            sigmoids(n, x + i, s);
            for (size_t k = 0; k < n; k++)
                dx[i + k] = dy[i + k] * (s[k] * (1.0f + x[i + k] * (1.0f - s[k])));
        }
        break;
    case DDL_ACT_GELU: /* Phi(x) + x phi(x) */
        for (size_t i = lo; i < hi; i++) {
            float v = x[i];
            dx[i] = dy[i] * (0.5f * (erff(v / SQRT2) + 1.0f) + v * INV_SQRT_2PI * expf(-0.5f * v * v));
        }
        break;
    case DDL_ACT_GELU_TANH:
        for (size_t i = lo; i < hi; i++) {
            float v = x[i], v2 = v * v, t = tanhf(GELU_K * (v + GELU_C * (v * v2)));
            dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * GELU_C * v2));
        }
        break;
    case DDL_ACT_HARDSWISH: /* 0 below -3, 1 above 3, x / 3 + 1/2 between (PyTorch's ends) */
        for (size_t i = lo; i < hi; i++) {
            float v = x[i], g = v * (1.0f / 3.0f) + 0.5f;
            g = v < -3.0f ? 0.0f : g;
            g = v > 3.0f ? 1.0f : g;
            dx[i] = dy[i] * g;
        }
        break;
    case DDL_ACT_HARDSIGMOID: /* alpha inside (0, 1): y is alpha x + beta there, whatever alpha's sign */
        for (size_t i = lo; i < hi; i++) {
            float k = ((y[i] > 0.0f) & (y[i] < 1.0f)) ? a : 0.0f;
            dx[i] = dy[i] * k;
        }
        break;
    case DDL_ACT_CLIP: /* 0 at the bounds, as PyTorch's hardtanh and ReLU6 */
        for (size_t i = lo; i < hi; i++) {
            float d = dy[i];
            dx[i] = ((y[i] > a) & (y[i] < b)) ? d : 0.0f;
        }
        break;
    case DDL_ACT_ELU: /* alpha e^x = y + alpha below 0 */
        if (a > 0.0f)
            for (size_t i = lo; i < hi; i++)
                dx[i] = y[i] > 0.0f ? dy[i] : dy[i] * (y[i] + a);
        else
            for (size_t i = lo; i < hi; i++)
                dx[i] = x[i] > 0.0f ? dy[i] : dy[i] * (a * expf(x[i]));
        break;
    default: break;
    }
}

void ddl_act_forward(int kind, float alpha, float beta, size_t count, const float *x, float *y)
{
    act_job j = {kind, alpha, beta, x, NULL, NULL, y};
    ddl__parallel_range(count, GRAIN, act_range, &j);
}

void ddl_act_backward(int kind, float alpha, float beta, size_t count, const float *x, const float *y,
                      const float *dy, float *dx)
{
    act_job j = {kind, alpha, beta, x, y, dy, dx};
    ddl__parallel_range(count, GRAIN, act_grad_range, &j);
}

/* ---- softmax ----
 * x is (outer, n, inner): rows of n values at stride inner. A range is of row blocks: LANES
 * neighbouring rows (inner positions, a cache line) at once, so that the loads along n are
 * contiguous and the loops over the lanes vectorise. Each row's max, sum and dot go in the order of n, in double for
 * the sums: a row's bits do not depend on its block or the range it is in. */

#define LANES 16

typedef struct sm_job {
    size_t n, inner, blocks_per_outer;
    int log;
    const float *x, *y, *dy;
    float *out;
} sm_job;

static void sm_range(void *ctx, size_t lo, size_t hi)
{
    const sm_job *j = ctx;
    size_t n = j->n, inner = j->inner;
    for (size_t blk = lo; blk < hi; blk++) {
        size_t o = blk / j->blocks_per_outer, i0 = blk % j->blocks_per_outer * LANES;
        size_t w = inner - i0 < LANES ? inner - i0 : LANES;
        const float *x = j->x + o * n * inner + i0;
        float *y = j->out + o * n * inner + i0;
        float mx[LANES];
        double sum[LANES];
        for (size_t l = 0; l < w; l++)
            mx[l] = x[l], sum[l] = 0.0;
        for (size_t k = 1; k < n; k++)
            for (size_t l = 0; l < w; l++)
                mx[l] = fmaxf(mx[l], x[k * inner + l]);
        for (size_t k = 0; k < n; k++)
            for (size_t l = 0; l < w; l++) {
                float e = expf(x[k * inner + l] - mx[l]);
                sum[l] += e;
                if (!j->log)
                    y[k * inner + l] = e;
            }
        for (size_t l = 0; l < w; l++) { /* log: (x - max) - log sum, as PyTorch: exact near the max */
            float r = j->log ? logf((float)sum[l]) : (float)(1.0 / sum[l]);
            for (size_t k = 0; k < n; k++)
                y[k * inner + l] = j->log ? (x[k * inner + l] - mx[l]) - r : y[k * inner + l] * r;
        }
    }
}

/* softmax: dx = y (dy - sum dy y); log softmax: dx = dy - e^y sum dy. */
static void sm_grad_range(void *ctx, size_t lo, size_t hi)
{
    const sm_job *j = ctx;
    size_t n = j->n, inner = j->inner;
    for (size_t blk = lo; blk < hi; blk++) {
        size_t o = blk / j->blocks_per_outer, i0 = blk % j->blocks_per_outer * LANES;
        size_t w = inner - i0 < LANES ? inner - i0 : LANES, at = o * n * inner + i0;
        const float *y = j->y + at, *dy = j->dy + at;
        float *dx = j->out + at;
        double dot[LANES];
        for (size_t l = 0; l < w; l++)
            dot[l] = 0.0;
        for (size_t k = 0; k < n; k++)
            for (size_t l = 0; l < w; l++)
                dot[l] += j->log ? (double)dy[k * inner + l] : (double)dy[k * inner + l] * y[k * inner + l];
        for (size_t l = 0; l < w; l++) {
            float d = (float)dot[l];
            for (size_t k = 0; k < n; k++) {
                size_t p = k * inner + l;
                dx[p] = j->log ? dy[p] - expf(y[p]) * d : y[p] * (dy[p] - d);
            }
        }
    }
}

static void sm_run(size_t outer, size_t n, size_t inner, int log, const float *x, const float *y, const float *dy,
                   float *out, void (*fn)(void *, size_t, size_t))
{
    size_t bpo = (inner + LANES - 1) / LANES;
    sm_job j = {n, inner, bpo, log, x, y, dy, out};
    if (outer && n && inner)
        ddl__parallel_range(outer * bpo, GRAIN / (n * LANES) + 1, fn, &j);
}

void ddl_softmax_forward(size_t outer, size_t n, size_t inner, int log, const float *x, float *y)
{
    sm_run(outer, n, inner, log, x, NULL, NULL, y, sm_range);
}

void ddl_softmax_backward(size_t outer, size_t n, size_t inner, int log, const float *y, const float *dy, float *dx)
{
    sm_run(outer, n, inner, log, NULL, y, dy, dx, sm_grad_range);
}
