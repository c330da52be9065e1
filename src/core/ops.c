/* ops.c - the element-wise and small compute ops of ddl.h's "tensors and ops": max pooling,
 * ReLU, dense (through ddl_gemm), dropout, softmax cross-entropy, dice loss, group norm, and
 * channel concat / split. Convolutions are in conv.c, the matrix product in gemm.c.
 * No op allocates; backward functions accumulate into parameter gradients and overwrite input
 * gradients, as ddl.h says. A target class index >= C (in softmax_xent) is ignored: it adds no
 * loss and no gradient, rather than reading out of bounds. */
#include "impl.h"

#include <math.h>
#include <string.h>

/* ---- max pooling ---- */

/* pick: the running maximum and its index; the first maximum wins, a NaN wins over numbers. */
static inline void pick(float v, int at, float *bv, int *best)
{
    if (v > *bv || (v != v && *bv == *bv)) {
        *bv = v;
        *best = at;
    }
}

/* maxpool2: the common 2x2 window with stride 2, unrolled (LeNet, U-Net). */
static void maxpool2(size_t planes, int h, int w, const float *x, float *y, int32_t *argmax)
{
    int oh = h / 2, ow = w / 2;
    size_t hw = (size_t)h * w, ohw = (size_t)oh * ow;
    for (size_t plane = 0; plane < planes; plane++) {
        const float *img = x + plane * hw;
        float *out = y + plane * ohw;
        int32_t *arg = argmax + plane * ohw;
        for (int oy = 0; oy < oh; oy++) {
            const float *r0 = img + (size_t)(2 * oy) * w, *r1 = r0 + w;
            for (int ox = 0; ox < ow; ox++) {
                int at = 2 * oy * w + 2 * ox, best = at;
                float bv = r0[2 * ox];
                pick(r0[2 * ox + 1], at + 1, &bv, &best);
                pick(r1[2 * ox], at + w, &bv, &best);
                pick(r1[2 * ox + 1], at + w + 1, &bv, &best);
                out[(size_t)oy * ow + ox] = bv;
                arg[(size_t)oy * ow + ox] = best;
            }
        }
    }
}

/* Threads: planes are independent; cut into ranges of at least GRAIN_FLOATS floats of input. */
#define GRAIN_FLOATS ((size_t)16384)

typedef struct pool2_job {
    int h, w;
    const float *x;
    float *y;
    int32_t *argmax;
    const float *dy;
    const int32_t *arg_in;
    float *dx;
} pool2_job;

static void maxpool2_planes(void *ctx, size_t lo, size_t hi)
{
    const pool2_job *j = ctx;
    size_t hw = (size_t)j->h * j->w, ohw = (size_t)(j->h / 2) * (j->w / 2);
    if (!ddl__maxpool2_avx512(hi - lo, j->h, j->w, j->x + lo * hw, j->y + lo * ohw, j->argmax + lo * ohw) &&
        !ddl__maxpool2_avx2(hi - lo, j->h, j->w, j->x + lo * hw, j->y + lo * ohw, j->argmax + lo * ohw))
        maxpool2(hi - lo, j->h, j->w, j->x + lo * hw, j->y + lo * ohw, j->argmax + lo * ohw);
}

void ddl_maxpool_forward(int n, int c, int h, int w, int k, int stride, const float *x, float *y,
                         int32_t *argmax)
{
    int oh = (h - k) / stride + 1, ow = (w - k) / stride + 1;
    if (k <= 0 || stride <= 0 || oh <= 0 || ow <= 0)
        return;
    if (k == 2 && stride == 2) {
        pool2_job j = {h, w, x, y, argmax, NULL, NULL, NULL};
        ddl__parallel_range((size_t)n * c, GRAIN_FLOATS / ((size_t)h * w) + 1, maxpool2_planes, &j);
        return;
    }
    size_t hw = (size_t)h * w, ohw = (size_t)oh * ow;
    for (size_t plane = 0; plane < (size_t)n * c; plane++) {
        const float *img = x + plane * hw;
        float *out = y + plane * ohw;
        int32_t *arg = argmax + plane * ohw;
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                int y0 = oy * stride, x0 = ox * stride;
                int best = y0 * w + x0; /* argmax: index within the (h, w) plane */
                float bv = img[best];
                for (int i = 0; i < k; i++)
                    for (int j = 0; j < k; j++) {
                        int at = (y0 + i) * w + x0 + j;
                        /* the first maximum wins; a NaN wins over numbers and spreads */
                        if (img[at] > bv || (isnan(img[at]) && !isnan(bv))) {
                            bv = img[at];
                            best = at;
                        }
                    }
                out[(size_t)oy * ow + ox] = bv;
                arg[(size_t)oy * ow + ox] = best;
            }
    }
}

typedef struct unpool_job {
    size_t hw, ohw;
    const float *dy;
    const int32_t *argmax;
    const float *keep; /* or NULL: a window's dy only where keep (the pool's output) > 0, else +0 */
    float *dx;
    int h, w; /* set for the 2x2 stride-2 window only */
} unpool_job;

static void unpool_planes(void *ctx, size_t lo, size_t hi)
{
    const unpool_job *j = ctx;
    const float *keep = j->keep ? j->keep + lo * j->ohw : NULL;
    if (j->h && (ddl__unpool2_avx512(hi - lo, j->h, j->w, j->dy + lo * j->ohw, j->argmax + lo * j->ohw, keep,
                                     j->dx + lo * j->hw) ||
                 ddl__unpool2_avx2(hi - lo, j->h, j->w, j->dy + lo * j->ohw, j->argmax + lo * j->ohw, keep,
                                   j->dx + lo * j->hw)))
        return;
    memset(j->dx + lo * j->hw, 0, (hi - lo) * j->hw * sizeof *j->dx);
    for (size_t plane = lo; plane < hi; plane++)
        for (size_t i = 0; i < j->ohw; i++) { /* += : overlapping windows may share a maximum */
            size_t o = plane * j->ohw + i;
            j->dx[plane * j->hw + (size_t)j->argmax[o]] += !j->keep || j->keep[o] > 0.0f ? j->dy[o] : 0.0f;
        }
}

void ddl_maxpool_backward(int n, int c, int h, int w, int k, int stride, const float *dy,
                          const int32_t *argmax, float *dx)
{
    ddl__maxpool_backward_keep(n, c, h, w, k, stride, dy, argmax, NULL, dx);
}

void ddl__maxpool_backward_keep(int n, int c, int h, int w, int k, int stride, const float *dy,
                                const int32_t *argmax, const float *keep, float *dx)
{
    int oh = (h - k) / stride + 1, ow = (w - k) / stride + 1;
    size_t hw = (size_t)h * w, ohw = (size_t)oh * ow;
    if (k <= 0 || stride <= 0 || oh <= 0 || ow <= 0) {
        memset(dx, 0, (size_t)n * c * hw * sizeof *dx);
        return;
    }
    unpool_job j = {hw, ohw, dy, argmax, keep, dx, k == 2 && stride == 2 ? h : 0, w};
    ddl__parallel_range((size_t)n * c, GRAIN_FLOATS / hw + 1, unpool_planes, &j);
}

/* ---- relu ---- */

typedef struct relu_job {
    const float *x, *dy;
    float *y;
} relu_job;

static void relu_range(void *ctx, size_t lo, size_t hi)
{
    const relu_job *j = ctx;
    for (size_t i = lo; i < hi; i++)
        j->y[i] = j->x[i] > 0.0f ? j->x[i] : 0.0f;
}

void ddl_relu_forward(size_t count, const float *x, float *y)
{
    relu_job j = {x, NULL, y};
    ddl__parallel_range(count, GRAIN_FLOATS / 2, relu_range, &j);
}

typedef struct add_job {
    const float *a, *b;
    float *y;
} add_job;

static void add_range(void *ctx, size_t lo, size_t hi)
{
    const add_job *j = ctx;
    for (size_t i = lo; i < hi; i++)
        j->y[i] = j->a[i] + j->b[i];
}

/* ddl_add: cut as a pass over planes is (thread s first takes its own share of [0, count)), so a
 * thread mostly adds what it wrote just before; U-Net's skip gradients took one thread 0.4 ms a
 * step at 64x64 while the other waited. */
void ddl_add(size_t count, const float *a, const float *b, float *y)
{
    add_job j = {a, b, y};
    ddl__parallel_range(count, GRAIN_FLOATS / 2, add_range, &j);
}

static void relu_grad_range(void *ctx, size_t lo, size_t hi)
{
    const relu_job *j = ctx;
    for (size_t i = lo; i < hi; i++) {
        float d = j->dy[i]; /* loaded unconditionally, so the loop vectorises without branches */
        j->y[i] = j->x[i] > 0.0f ? d : 0.0f;
    }
}

void ddl_relu_backward(size_t count, const float *y, const float *dy, float *dx)
{
    relu_job j = {y, dy, dx};
    ddl__parallel_range(count, GRAIN_FLOATS / 2, relu_grad_range, &j);
}

/* ---- dense ---- */

void ddl_dense_forward(int batch, int in, int out, const float *x, const float *w, const float *b, float *y)
{
    /* y (batch, out) = b, then += x (batch, in) w^T (in, out) */
    for (int i = 0; i < batch; i++)
        for (int j = 0; j < out; j++)
            y[(size_t)i * out + j] = b ? b[j] : 0.0f;
    ddl_gemm(0, 1, batch, out, in, 1.0f, x, in, w, in, 1.0f, y, out);
}

/* The weight and input gradients are independent products: their blocks (as ddl_gemm cuts them)
 * and the bias gradient run as one job, so that LeNet's fc2, two whole products, runs on both of
 * 2 threads (27 -> 17 us a step, lenet_ops), and fc1's 4 + 2 blocks share out without a wait
 * between them. */

typedef struct dense_grad_job {
    ddl__gemm_blocks dw, dx;
    int batch, out;
    const float *dy;
    float *db;
} dense_grad_job;

static void dense_grad_task(void *ctx, int t)
{
    const dense_grad_job *j = ctx;
    if (t < j->dw.n_blocks) {
        ddl__gemm_block(&j->dw, t);
        return;
    }
    t -= j->dw.n_blocks;
    if (t < j->dx.n_blocks) {
        ddl__gemm_block(&j->dx, t);
        return;
    }
    for (int o = 0; o < j->out; o++) { /* the bias gradient: one task */
        float s = 0.0f;
        for (int i = 0; i < j->batch; i++)
            s += j->dy[(size_t)i * j->out + o];
        j->db[o] += s;
    }
}

void ddl_dense_backward(int batch, int in, int out, const float *x, const float *w, const float *dy,
                        float *dx, float *dw, float *db)
{
    dense_grad_job j = {.batch = batch, .out = out, .dy = dy, .db = db};
    if (dw) /* dw (out, in) += dy^T (out, batch) x (batch, in) */
        ddl__gemm_plan(&j.dw, 1, 0, out, in, batch, 1.0f, dy, out, x, in, 1.0f, dw, in);
    if (dx) /* dx (batch, in) = dy (batch, out) w (out, in) */
        ddl__gemm_plan(&j.dx, 0, 0, batch, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
    ddl__parallel(j.dw.n_blocks + j.dx.n_blocks + (db ? 1 : 0), dense_grad_task, &j);
}

/* ---- dropout ---- */

void ddl_dropout_forward(size_t count, float p, int training, ddl_rng *rng, const float *x, float *y,
                         uint8_t *mask)
{
    if (!training || p <= 0.0f) { /* identity; the mask keeps everything so backward is too */
        if (y != x)
            memmove(y, x, count * sizeof *y);
        if (mask)
            memset(mask, 1, count);
        return;
    }
    float keep_scale = 1.0f / (1.0f - p);
    for (size_t i = 0; i < count; i++) {
        uint8_t keep = ddl_rng_uniform(rng) >= p;
        mask[i] = keep;
        y[i] = keep ? x[i] * keep_scale : 0.0f;
    }
}

void ddl_dropout_backward(size_t count, float p, const uint8_t *mask, const float *dy, float *dx)
{
    float keep_scale = p > 0.0f ? 1.0f / (1.0f - p) : 1.0f;
    for (size_t i = 0; i < count; i++)
        dx[i] = mask[i] ? dy[i] * keep_scale : 0.0f;
}

/* ---- softmax cross-entropy ----
 * Positions are processed in blocks of XENT_BLOCK along S with the class loop outside, so the
 * inner loops run over contiguous memory for segmentation logits (N, C, H*W). */

#define XENT_BLOCK 256

/* xent_block: loss sum of positions [s0, s0+len) of sample logits l (c, s); fills probs and
 * dlogits (may be NULL) for those positions. DDL__LANES: its loops run position by position, so
 * wider vectors give the same bits. */
DDL__LANES static double xent_block(int c, int s, int s0, int len, const float *l, const uint16_t *t,
                                    float scale, float *probs, float *dl)
{
    float mx[XENT_BLOCK], sum[XENT_BLOCK];
    for (int i = 0; i < len; i++)
        mx[i] = l[s0 + i];
    for (int ci = 1; ci < c; ci++)
        for (int i = 0; i < len; i++) { /* fmaxf, inline: a NaN maximum is replaced, a NaN logit ignored */
            float v = l[(size_t)ci * s + s0 + i];
            mx[i] = v > mx[i] || mx[i] != mx[i] ? v : mx[i];
        }
    for (int i = 0; i < len; i++)
        sum[i] = 0.0f;
    float e[XENT_BLOCK];
    for (int ci = 0; ci < c; ci++) { /* the exponentials wait in probs, if any, for the pass below */
        const float *lc = l + (size_t)ci * s + s0;
        for (int i = 0; i < len; i++)
            e[i] = lc[i] - mx[i];
        ddl__expf_n((size_t)len, e, e);
        for (int i = 0; i < len; i++)
            sum[i] += e[i];
        if (probs)
            memcpy(probs + (size_t)ci * s + s0, e, (size_t)len * sizeof *e);
    }
    double loss = 0.0;
    for (int i = 0; i < len; i++) {
        int ti = t[s0 + i];
        if (ti < c) /* -log softmax[t] = log sum + max - logit[t] */
            loss += (double)logf(sum[i]) + mx[i] - l[(size_t)ti * s + s0 + i];
        sum[i] = 1.0f / sum[i];
    }
    if (!probs && !dl)
        return loss;
    for (int ci = 0; ci < c; ci++) {
        size_t at0 = (size_t)ci * s + s0;
        if (!probs) {
            for (int i = 0; i < len; i++)
                e[i] = l[at0 + i] - mx[i];
            ddl__expf_n((size_t)len, e, e);
        }
        for (int i = 0; i < len; i++) {
            float pv = (probs ? probs[at0 + i] : e[i]) * sum[i];
            if (probs)
                probs[at0 + i] = pv;
            if (dl)
                dl[at0 + i] = scale * (pv - (t[s0 + i] == ci ? 1.0f : 0.0f));
        }
    }
    /* an ignored target (>= c) must get no gradient at all */
    if (dl)
        for (int i = 0; i < len; i++)
            if (t[s0 + i] >= c)
                for (int ci = 0; ci < c; ci++)
                    dl[(size_t)ci * s + s0 + i] = 0.0f;
    return loss;
}

/* Threads: blocks go over the threads, their losses into parts[], added in order afterwards
 * (as one thread adds them); more blocks than parts holds run in the caller. */
#define XENT_PARTS 4096

typedef struct xent_job {
    int c, s, per;
    const float *logits;
    const uint16_t *targets;
    float scale;
    float *probs, *dlogits;
    double *parts;
} xent_job;

static void xent_blocks(void *ctx, size_t lo, size_t hi)
{
    const xent_job *j = ctx;
    size_t cs = (size_t)j->c * j->s;
    for (size_t b = lo; b < hi; b++) {
        size_t ni = b / (size_t)j->per;
        int s0 = (int)(b % (size_t)j->per) * XENT_BLOCK, len = j->s - s0 < XENT_BLOCK ? j->s - s0 : XENT_BLOCK;
        j->parts[b] = xent_block(j->c, j->s, s0, len, j->logits + ni * cs, j->targets + ni * j->s, j->scale,
                                 j->probs ? j->probs + ni * cs : NULL, j->dlogits ? j->dlogits + ni * cs : NULL);
    }
}

double ddl_softmax_xent(int n, int c, int s, const float *logits, const uint16_t *targets, float scale,
                        float *probs, float *dlogits)
{
    double loss = 0.0, parts[XENT_PARTS];
    int per = (s + XENT_BLOCK - 1) / XENT_BLOCK;
    size_t blocks = (size_t)n * per;
    xent_job j = {c, s, per, logits, targets, scale, probs, dlogits, parts};
    if (ddl__threads() > 1 && blocks <= XENT_PARTS) {
        ddl__parallel_range(blocks, GRAIN_FLOATS / ((size_t)XENT_BLOCK * c) + 1, xent_blocks, &j);
        for (size_t b = 0; b < blocks; b++)
            loss += parts[b];
        return loss;
    }
    size_t cs = (size_t)c * s;
    for (int ni = 0; ni < n; ni++)
        for (int s0 = 0; s0 < s; s0 += XENT_BLOCK) {
            int len = s - s0 < XENT_BLOCK ? s - s0 : XENT_BLOCK;
            loss += xent_block(c, s, s0, len, logits + ni * cs, targets + (size_t)ni * s, scale,
                               probs ? probs + ni * cs : NULL, dlogits ? dlogits + ni * cs : NULL);
        }
    return loss;
}

/* ---- dice loss ----
 * Per sample, with p = p_fg = 1 - probs[0], t = [target >= 1], I = sum p t, P = sum p, T = sum t,
 * D = P + T + 1: L = 1 - (2 I + 1) / D, so dL/dp_s = (2 I + 1) / D^2 - 2 t_s / D. Through
 * p_fg = 1 - p_0 and the softmax Jacobian dp_0/dz_j = p_0 (delta_0j - p_j):
 * dL/dz_0 = -g p_0 (1 - p_0) and dL/dz_j = g p_0 p_j for j >= 1, with g = dL/dp_s. */

#define DICE_BLOCK 256
#define DICE_PARTS 4096 /* samples whose losses threads can keep apart (more: the caller alone) */

/* dice_sample: one sample's loss, its gradient added into dl (NULL: none). DDL__LANES: the
 * gradient's loops run position by position (the same bits in wider vectors); the sums stay one
 * chain each. */
DDL__LANES static double dice_sample(int c, int s, const float *pr, const uint16_t *t, float scale, float *dl)
{
    double inter = 0.0, psum = 0.0, tsum = 0.0;
    for (int i = 0; i < s; i++) {
        double pf = 1.0 - (double)pr[i], tf = t[i] >= 1 ? 1.0 : 0.0;
        inter += pf * tf;
        psum += pf;
        tsum += tf;
    }
    double d = psum + tsum + 1.0, num = 2.0 * inter + 1.0;
    if (!dl)
        return 1.0 - num / d;
    double base = num / (d * d), two_over_d = 2.0 / d;
    for (int i0 = 0; i0 < s; i0 += DICE_BLOCK) { /* classes outside: contiguous rows */
        int len = s - i0 < DICE_BLOCK ? s - i0 : DICE_BLOCK;
        double gs[DICE_BLOCK];
        for (int i = 0; i < len; i++) {
            double g = base - (t[i0 + i] >= 1 ? two_over_d : 0.0), p0 = pr[i0 + i];
            gs[i] = (double)scale * g * p0;
            dl[i0 + i] += (float)(-gs[i] * (1.0 - p0));
        }
        for (int ci = 1; ci < c; ci++) {
            const float *pc = pr + (size_t)ci * s + i0;
            float *dc = dl + (size_t)ci * s + i0;
            for (int i = 0; i < len; i++)
                dc[i] += (float)(gs[i] * pc[i]);
        }
    }
    return 1.0 - num / d;
}

typedef struct dice_job {
    int c, s;
    const float *probs;
    const uint16_t *targets;
    float scale;
    float *dlogits;
    double *parts;
} dice_job;

static void dice_samples(void *ctx, size_t lo, size_t hi)
{
    const dice_job *j = ctx;
    size_t cs = (size_t)j->c * j->s;
    for (size_t ni = lo; ni < hi; ni++)
        j->parts[ni] = dice_sample(j->c, j->s, j->probs + ni * cs, j->targets + ni * j->s, j->scale,
                                   j->dlogits ? j->dlogits + ni * cs : NULL);
}

/* Threads: samples go over the threads, their losses into parts[], added in sample order
 * afterwards, as one thread adds them: the same bits. */
double ddl_dice_loss(int n, int c, int s, const float *probs, const uint16_t *targets, float scale,
                     float *dlogits)
{
    double total = 0.0, parts[DICE_PARTS];
    dice_job j = {c, s, probs, targets, scale, dlogits, parts};
    if (ddl__threads() > 1 && n <= DICE_PARTS) {
        ddl__parallel_range((size_t)n, GRAIN_FLOATS / ((size_t)c * s) + 1, dice_samples, &j);
        for (int ni = 0; ni < n; ni++)
            total += parts[ni];
        return total;
    }
    size_t cs = (size_t)c * s;
    for (int ni = 0; ni < n; ni++)
        total += dice_sample(c, s, probs + ni * cs, targets + (size_t)ni * s, scale,
                             dlogits ? dlogits + ni * cs : NULL);
    return total;
}

/* ---- group normalisation ----
 * Per sample and group of cg = C / groups channels: mean and rstd = 1 / sqrt(var + eps) over
 * cg * S values (biased variance, eps 1e-5, as PyTorch's GroupNorm). gamma / beta may be NULL
 * (1 and 0). */

#define GN_EPS 1e-5

/* The row sums below keep 8 partial sums (lane k takes elements k, k + 8, ...), added in a fixed
 * order at the end, and the result is the same on every CPU. The 8 lanes are one 8-float vector
 * (gcc's vector extension): written as loops over 8 lanes, gcc read each lane's floats through
 * permutes (row_grads below took 6.6% of U-Net's step on a CPU with AVX2 and no AVX-512). */

static float lanes8(const float a[8]) { return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7])); }

typedef float row_v8 __attribute__((vector_size(32)));
typedef float row_v8u __attribute__((vector_size(32), aligned(4)));
#define ROW_LD8(p) (*(const row_v8u *)(const void *)(p))

/* ddl__row_sum: sum of x[0, n) (impl.h; also the bias gradients of conv.c, where one running
 * sum was a chain of n dependent adds). */
DDL__LANES float ddl__row_sum(const float *x, int n)
{
    row_v8 v = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        v += ROW_LD8(x + i);
    float a[8];
    memcpy(a, &v, sizeof a);
    float t = lanes8(a);
    for (; i < n; i++)
        t += x[i];
    return t;
}

/* row_sums: out[r] = ddl__row_sum(x + r stride, n) for the rows [0, rows), bit for bit, four rows
 * at a time: each row's 8 lanes are one chain of dependent adds in ddl__row_sum's order, and four
 * rows' chains side by side keep the adder busy where one row's waited on each add (the cnn's
 * block1.conv2 bias gradient at batch 32: 174-184 -> 121-127 us, tools/bench/kernels.c). */
DDL__HOT static void row_sums(const float *x, size_t stride, int rows, int n, float *out)
{
    int r = 0;
    for (; r + 4 <= rows; r += 4) {
        const float *p0 = x + (size_t)r * stride, *p1 = p0 + stride, *p2 = p1 + stride, *p3 = p2 + stride;
        row_v8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        int i = 0;
        for (; i + 8 <= n; i += 8) {
            a0 += ROW_LD8(p0 + i);
            a1 += ROW_LD8(p1 + i);
            a2 += ROW_LD8(p2 + i);
            a3 += ROW_LD8(p3 + i);
        }
        const row_v8 *acc[4] = {&a0, &a1, &a2, &a3};
        const float *ps[4] = {p0, p1, p2, p3};
        for (int q = 0; q < 4; q++) {
            float a[8];
            memcpy(a, acc[q], sizeof a);
            float t = lanes8(a);
            for (int j = i; j < n; j++)
                t += ps[q][j];
            out[r + q] = t;
        }
    }
    for (; r < rows; r++)
        out[r] = ddl__row_sum(x + (size_t)r * stride, n);
}

double ddl__planes_sum(const float *x, size_t stride, int planes, int n)
{
    double s = 0.0;
    for (int p0 = 0; p0 < planes; p0 += 8) {
        float sums[8];
        int rows = planes - p0 < 8 ? planes - p0 : 8;
        row_sums(x + (size_t)p0 * stride, stride, rows, n, sums);
        for (int r = 0; r < rows; r++) /* in order, as one plane's sum at a time added them */
            s += sums[r];
    }
    return s;
}

/* row_sqdev: sum of (x - m)^2 over x[0, n). */
DDL__LANES static float row_sqdev(const float *x, int n, float m)
{
    row_v8 v = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        row_v8 u = ROW_LD8(x + i) - m;
        v += u * u;
    }
    float a[8];
    memcpy(a, &v, sizeof a);
    float t = lanes8(a);
    for (; i < n; i++)
        t += (x[i] - m) * (x[i] - m);
    return t;
}

/* row_grads: *dg = sum of dy (x - m) r and *db = sum of dy over [0, n), dy masked by y (the
 * output of a ReLU after the norm: dy, or +0.0f where y <= 0, the bits ddl_relu_backward gives)
 * unless y is NULL; no fused multiply-adds (DDL__LANES), so every CPU gets the same bits. As
 * 8-float vectors, U-Net's share of its step in it went from 6.6% to 1.8% on an AMD EPYC without
 * AVX-512 (Zen 3), the same weights. */
typedef int32_t row_i8 __attribute__((vector_size(32)));

DDL__LANES
static void row_grads(const float *x, const float *dy, const float *y, int n, float m, float r, float *dg, float *db)
{
    row_v8 a = {0}, b = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        row_v8 d = ROW_LD8(dy + i);
        if (y) {
            row_i8 keep = ROW_LD8(y + i) > 0.0f; /* all ones, or 0: a NaN y gives +0.0f too */
            d = (row_v8)((row_i8)d & keep);
        }
        a += d * ((ROW_LD8(x + i) - m) * r);
        b += d;
    }
    float la[8], lb[8];
    memcpy(la, &a, sizeof la);
    memcpy(lb, &b, sizeof lb);
    float ta = lanes8(la), tb = lanes8(lb);
    for (; i < n; i++) {
        float d = y && !(y[i] > 0.0f) ? 0.0f : dy[i];
        ta += d * ((x[i] - m) * r);
        tb += d;
    }
    *dg = ta;
    *db = tb;
}

/* gn_forward_group: one (sample, group) of cg channels from ch0: mr = (mean, rstd), yg = the
 * normalised xg times gamma plus beta (with relu, then max(0, .)). DDL__HOT: its AVX2 / AVX-512
 * clone does the rows 8 lanes at a time. */
DDL__HOT
static void gn_forward_group(int cg, int s, int ch0, const float *xg, const float *gamma, const float *beta,
                             float *yg, float *mr, int relu)
{
    size_t gsz = (size_t)cg * s;
    double sum = 0.0, var = 0.0; /* float rows of s, summed in double */
    for (int ci = 0; ci < cg; ci++)
        sum += ddl__row_sum(xg + (size_t)ci * s, s);
    float m = (float)(sum / (double)gsz);
    for (int ci = 0; ci < cg; ci++)
        var += row_sqdev(xg + (size_t)ci * s, s, m);
    float r = (float)(1.0 / sqrt(var / (double)gsz + GN_EPS));
    mr[0] = m;
    mr[1] = r;
    for (int ci = 0; ci < cg; ci++) {
        int ch = ch0 + ci;
        float a = r * (gamma ? gamma[ch] : 1.0f), bb = beta ? beta[ch] : 0.0f;
        const float *xr = xg + (size_t)ci * s;
        float *yr = yg + (size_t)ci * s;
        if (relu) {
            for (int i = 0; i < s; i++) {
                float v = (xr[i] - m) * a + bb;
                yr[i] = v > 0.0f ? v : 0.0f; /* as ddl_relu_forward: NaN gives 0 */
            }
        } else {
            for (int i = 0; i < s; i++)
                yr[i] = (xr[i] - m) * a + bb;
        }
    }
}

/* Threads: the forward pass by samples (each (sample, group) stands alone), the backward pass
 * by groups (each group's dgamma and dbeta summed over the samples in order, as one thread). */
typedef struct gn_job {
    int n, c, s, groups;
    const float *x, *gamma, *beta, *dy;
    float *y, *mr, *dx, *dgamma, *dbeta;
    const float *mr_in;
    float *shares; /* backward by sample: each sample's dgamma (n, c), then its dbeta (n, c) */
    int relu;         /* forward: a ReLU after the norm */
    const float *out; /* backward: that ReLU's output, whose zeros mask dy (NULL: no ReLU) */
} gn_job;

static void gn_forward_samples(void *ctx, size_t lo, size_t hi)
{
    const gn_job *j = ctx;
    int cg = j->c / j->groups;
    for (size_t ni = lo; ni < hi; ni++)
        for (int gi = 0; gi < j->groups; gi++) {
            size_t off = (ni * j->c + (size_t)gi * cg) * j->s;
            gn_forward_group(cg, j->s, gi * cg, j->x + off, j->gamma, j->beta, j->y + off,
                             j->mr + (ni * j->groups + gi) * 2, j->relu);
        }
}

static void gn_forward(int n, int c, int s, int groups, const float *x, const float *gamma, const float *beta,
                       float *y, float *mean_rstd, int relu)
{
    if (groups <= 0 || c % groups)
        return;
    gn_job j = {n, c, s, groups, x, gamma, beta, NULL, y, mean_rstd, NULL, NULL, NULL, NULL, NULL, relu, NULL};
    ddl__parallel_range((size_t)n, GRAIN_FLOATS / ((size_t)c * s) + 1, gn_forward_samples, &j);
}

void ddl_groupnorm_forward(int n, int c, int s, int groups, const float *x, const float *gamma,
                           const float *beta, float *y, float *mean_rstd)
{
    gn_forward(n, c, s, groups, x, gamma, beta, y, mean_rstd, 0);
}

void ddl_groupnorm_relu_forward(int n, int c, int s, int groups, const float *x, const float *gamma,
                                const float *beta, float *y, float *mean_rstd)
{
    gn_forward(n, c, s, groups, x, gamma, beta, y, mean_rstd, 1);
}

/* PLAIN_DY: dy as it is; MASKED_DY: dy, or +0.0f where the ReLU after the norm gave y <= 0, the
 * bits ddl_relu_backward gives. A bit-and: written as a select of two loads, the loop did not
 * vectorise and U-Net ran 10% slower. */
#define PLAIN_DY(D, Y, i) ((void)(Y), (D)[i])
#define MASKED_DY(D, Y, i) masked_dy(D, Y, (size_t)(i))
static inline float masked_dy(const float *dy, const float *y, size_t i)
{
    uint32_t d;
    float out;
    memcpy(&d, dy + i, sizeof d);
    d &= -(uint32_t)(y[i] > 0.0f); /* all ones or +0.0f: the select, in a form that vectorises */
    memcpy(&out, &d, sizeof out);
    return out;
}

/* gn_backward_group: one (sample, group): dgamma, dbeta += over its channels (with `store`, =:
 * one sample's share, added later); dx (may be NULL) = rstd (dxh - mean(dxh) - xh mean(dxh xh)),
 * xh the normalised x, dxh = dy gamma, dy masked by the ReLU output y (NULL: none). */
DDL__HOT
static void gn_backward_group(int cg, int s, int ch0, const float *x, const float *gamma, float m, float r,
                              const float *dy, const float *y, float *dx, float *dgamma, float *dbeta, int store)
{
    double sum_d = 0.0, sum_dx = 0.0; /* sums of dxh and of dxh * xh */
    for (int ci = 0; ci < cg; ci++) {
        const float *xr = x + (size_t)ci * s, *dr = dy + (size_t)ci * s, *yr = y ? y + (size_t)ci * s : NULL;
        float gm = gamma ? gamma[ch0 + ci] : 1.0f, dg, dbt;
        row_grads(xr, dr, yr, s, m, r, &dg, &dbt);
        if (dgamma)
            dgamma[ch0 + ci] = store ? dg : dgamma[ch0 + ci] + dg;
        if (dbeta)
            dbeta[ch0 + ci] = store ? dbt : dbeta[ch0 + ci] + dbt;
        sum_d += (double)dbt * gm;
        sum_dx += (double)dg * gm;
    }
    if (!dx)
        return;
    double cnt = (double)cg * s;
    float md = (float)(sum_d / cnt), mdx = (float)(sum_dx / cnt);
    for (int ci = 0; ci < cg; ci++) {
        const float *xr = x + (size_t)ci * s, *dr = dy + (size_t)ci * s, *yr = y ? y + (size_t)ci * s : NULL;
        float *out = dx + (size_t)ci * s, gm = gamma ? gamma[ch0 + ci] : 1.0f;
        if (yr) {
            for (int i = 0; i < s; i++) {
                float xh = (xr[i] - m) * r;
                out[i] = r * (MASKED_DY(dr, yr, i) * gm - md - xh * mdx);
            }
        } else {
            for (int i = 0; i < s; i++) {
                float xh = (xr[i] - m) * r;
                out[i] = r * (PLAIN_DY(dr, yr, i) * gm - md - xh * mdx);
            }
        }
    }
}

static void gn_backward_groups(void *ctx, size_t lo, size_t hi)
{
    const gn_job *j = ctx;
    int cg = j->c / j->groups;
    for (int ni = 0; ni < j->n; ni++)
        for (size_t gi = lo; gi < hi; gi++) {
            size_t off = ((size_t)ni * j->c + gi * cg) * j->s;
            const float *mr = j->mr_in + ((size_t)ni * j->groups + gi) * 2;
            gn_backward_group(cg, j->s, (int)gi * cg, j->x + off, j->gamma, mr[0], mr[1], j->dy + off,
                              j->out ? j->out + off : NULL, j->dx ? j->dx + off : NULL, j->dgamma, j->dbeta, 0);
        }
}

/* gn_backward_samples: samples [lo, hi) whole, their dgamma and dbeta shares into j->shares:
 * cut by sample, the threads keep the samples they computed. */
static void gn_backward_samples(void *ctx, size_t lo, size_t hi)
{
    const gn_job *j = ctx;
    int cg = j->c / j->groups;
    float *pg = j->shares, *pb = j->shares + (size_t)j->n * j->c;
    for (size_t ni = lo; ni < hi; ni++)
        for (int gi = 0; gi < j->groups; gi++) {
            size_t off = (ni * j->c + (size_t)gi * cg) * j->s;
            const float *mr = j->mr_in + (ni * j->groups + (size_t)gi) * 2;
            gn_backward_group(cg, j->s, gi * cg, j->x + off, j->gamma, mr[0], mr[1], j->dy + off,
                              j->out ? j->out + off : NULL, j->dx ? j->dx + off : NULL, pg + ni * j->c,
                              pb + ni * j->c, 1);
        }
}

/* Threads: by sample when the per-sample shares of dgamma and dbeta fit GN_SHARES floats (U-Net:
 * 32 samples x 32 channels x 2), else by group over every sample. The same sums either way. */
#define GN_SHARES 4096

static void gn_backward(int n, int c, int s, int groups, const float *x, const float *gamma, const float *mean_rstd,
                        const float *y, const float *dy, float *dx, float *dgamma, float *dbeta)
{
    if (groups <= 0 || c % groups)
        return;
    float shares[GN_SHARES]; /* per sample dgamma and dbeta, added in sample order as by group */
    gn_job j = {n, c, s, groups, x, gamma, NULL, dy, NULL, NULL, dx, dgamma, dbeta, mean_rstd, shares, 0, y};
    if ((size_t)2 * n * c <= GN_SHARES) {
        ddl__parallel_range((size_t)n, GRAIN_FLOATS / ((size_t)c * s) + 1, gn_backward_samples, &j);
        for (int ni = 0; ni < n; ni++)
            for (int ch = 0; ch < c; ch++) {
                if (dgamma)
                    dgamma[ch] += shares[(size_t)ni * c + ch];
                if (dbeta)
                    dbeta[ch] += shares[((size_t)n + ni) * c + ch];
            }
        return;
    }
    ddl__parallel_range((size_t)groups, GRAIN_FLOATS / ((size_t)n * (c / groups) * s) + 1, gn_backward_groups, &j);
}

void ddl_groupnorm_backward(int n, int c, int s, int groups, const float *x, const float *gamma,
                            const float *mean_rstd, const float *dy, float *dx, float *dgamma, float *dbeta)
{
    gn_backward(n, c, s, groups, x, gamma, mean_rstd, NULL, dy, dx, dgamma, dbeta);
}

void ddl_groupnorm_relu_backward(int n, int c, int s, int groups, const float *x, const float *gamma,
                                 const float *mean_rstd, const float *y, const float *dy, float *dx, float *dgamma,
                                 float *dbeta)
{
    gn_backward(n, c, s, groups, x, gamma, mean_rstd, y, dy, dx, dgamma, dbeta);
}

/* ---- concat / split along channels ---- */

/* Threads: by sample, each a copy of its own bytes. */
typedef struct channels_job {
    size_t sa, sb;
    const float *a, *b, *ab; /* concat: a and b in; split: ab in */
    float *out_ab, *out_a, *out_b;
} channels_job;

static void concat_samples(void *ctx, size_t lo, size_t hi)
{
    const channels_job *j = ctx;
    for (size_t ni = lo; ni < hi; ni++) {
        memcpy(j->out_ab + ni * (j->sa + j->sb), j->a + ni * j->sa, j->sa * sizeof(float));
        memcpy(j->out_ab + ni * (j->sa + j->sb) + j->sa, j->b + ni * j->sb, j->sb * sizeof(float));
    }
}

static void split_samples(void *ctx, size_t lo, size_t hi)
{
    const channels_job *j = ctx;
    for (size_t ni = lo; ni < hi; ni++) {
        if (j->out_a)
            memcpy(j->out_a + ni * j->sa, j->ab + ni * (j->sa + j->sb), j->sa * sizeof(float));
        if (j->out_b)
            memcpy(j->out_b + ni * j->sb, j->ab + ni * (j->sa + j->sb) + j->sa, j->sb * sizeof(float));
    }
}

void ddl_concat_channels(int n, int ca, int cb, int s, const float *a, const float *b, float *y)
{
    channels_job j = {(size_t)ca * s, (size_t)cb * s, a, b, NULL, y, NULL, NULL};
    ddl__parallel_range((size_t)n, 4 * GRAIN_FLOATS / (j.sa + j.sb + 1) + 1, concat_samples, &j);
}

void ddl_split_channels(int n, int ca, int cb, int s, const float *dy, float *da, float *db)
{
    channels_job j = {(size_t)ca * s, (size_t)cb * s, NULL, NULL, dy, NULL, da, db};
    ddl__parallel_range((size_t)n, 4 * GRAIN_FLOATS / (j.sa + j.sb + 1) + 1, split_samples, &j);
}
