/* batchnorm.c - BatchNorm2d's kernels: the forward pass with the batch's statistics (and the
 * running statistics' next values) or with the running ones, and the backward pass through the
 * batch statistics. x, y, dy, dx are (N, C, S); a channel's values are N rows of S floats.
 *
 * Threads: by channel. Each channel's sums run over its rows in sample order, in 8 lanes added in
 * a fixed order, into a double per row: the same bits at any thread count. Never allocates. */
#include "impl.h"

#include <math.h>

#define GRAIN_FLOATS ((size_t)16384) /* as ops.c: a task reads at least this many floats */

/* ---- row sums (inlined into the DDL__HOT channel functions, which vectorise them) ---- */

static inline float lanes8(const float a[8]) { return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7])); }

/* row_moments: sums of d and of d^2 over a row, d = x - k: one pass for the mean and the variance.
 * k is a value of the channel (its first), so d is of the size of the spread, not of the mean,
 * and var = E[d^2] - E[d]^2 loses no more than two passes would (a channel of mean 100
 * and spread 3: test_batchnorm.c's reference in double agrees to 2e-5). */
static inline void row_moments(const float *x, int n, float k0, float *s1, float *s2)
{
    float a[8] = {0}, b[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) {
            float d = x[i + k] - k0;
            a[k] += d;
            b[k] += d * d;
        }
    float ta = lanes8(a), tb = lanes8(b);
    for (; i < n; i++) {
        float d = x[i] - k0;
        ta += d;
        tb += d * d;
    }
    *s1 = ta;
    *s2 = tb;
}

/* row_grads: sum of dy, and of dy (x - m), over a row. */
static inline void row_grads(const float *x, const float *dy, int n, float m, float *sd, float *sdx)
{
    float a[8] = {0}, b[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) {
            a[k] += dy[i + k];
            b[k] += dy[i + k] * (x[i + k] - m);
        }
    float ta = lanes8(a), tb = lanes8(b);
    for (; i < n; i++) {
        ta += dy[i];
        tb += dy[i] * (x[i] - m);
    }
    *sd = ta;
    *sdx = tb;
}

typedef struct bn_job {
    int n, c, s, batch_stats;
    float momentum, eps;
    const float *x, *gamma, *beta, *rmean, *rvar, *mr_in, *dy;
    float *y, *mr, *nmean, *nvar, *dx, *dgamma, *dbeta;
} bn_job;

/* ---- forward ---- */

/* affine: y = (x - m) a + b over channel ch's rows. */
DDL__HOT
static void affine(const bn_job *j, int ch, float m, float a, float b)
{
    size_t plane = (size_t)j->c * j->s;
    for (int ni = 0; ni < j->n; ni++) {
        const float *xr = j->x + ni * plane + (size_t)ch * j->s;
        float *yr = j->y + ni * plane + (size_t)ch * j->s;
        for (int i = 0; i < j->s; i++)
            yr[i] = (xr[i] - m) * a + b;
    }
}

/* stats: channel ch's mean and 1 / std from its shifted sums (k0: the shift), the running
 * statistics' next values, and the affine's a and b (y = (x - m) a + b); returns m. */
DDL__HOT static float stats(const bn_job *j, int ch, float k0, double s1, double s2, float *a, float *b)
{
    size_t cnt = (size_t)j->n * j->s;
    double dm = s1 / (double)cnt, sq = s2 - s1 * dm; /* sum of (x - mean)^2 */
    if (sq < 0.0)
        sq = 0.0;
    float m = (float)((double)k0 + dm);
    float r = (float)(1.0 / sqrt(sq / (double)cnt + (double)j->eps));
    float unbiased = (float)(cnt > 1 ? sq / (double)(cnt - 1) : sq); /* PyTorch's running variance */
    j->mr[2 * ch] = m;
    j->mr[2 * ch + 1] = r;
    if (j->nmean) {
        j->nmean[ch] = (1.0f - j->momentum) * j->rmean[ch] + j->momentum * m;
        j->nvar[ch] = (1.0f - j->momentum) * j->rvar[ch] + j->momentum * unbiased;
    }
    *a = r * (j->gamma ? j->gamma[ch] : 1.0f);
    *b = j->beta ? j->beta[ch] : 0.0f;
    return m;
}

/* train_channel: the batch's mean and biased variance of channel ch (one pass of shifted sums,
 * each row's added in double), y, and the running statistics' next values. A pass over x less
 * than mean-then-deviations: the forward pass of a 64-channel 64x64 batch of 64 took 25.6 ms in
 * three passes, a sixth of the 3x3 convolution before it. */
DDL__HOT
static void train_channel(const bn_job *j, int ch)
{
    size_t plane = (size_t)j->c * j->s;
    const float *x0 = j->x + (size_t)ch * j->s;
    float k0 = x0[0];
    double s1 = 0.0, s2 = 0.0;
    if (ddl__bn_fma_ok())
        ddl__bn_sums_fma(j->n, j->s, plane, x0, NULL, k0, &s1, &s2);
    else
        for (int ni = 0; ni < j->n; ni++) {
            float a, b;
            row_moments(x0 + ni * plane, j->s, k0, &a, &b);
            s1 += a;
            s2 += b;
        }
    float a, b, m = stats(j, ch, k0, s1, s2, &a, &b);
    affine(j, ch, m, a, b);
}

/* SHORT_ROW, BLOCK: rows of at most SHORT_ROW floats go BLOCK channels at a time (fewer past 256
 * floats a sample), sample by sample (batchnorm_fma.c says why), on the CPUs that take its sums;
 * the same bits as channel by channel. ResNet-18's BatchNorm at batch 64, forward + backward,
 * alone, one thread: 512 channels at 2x2 0.69-0.94 -> 0.26 ms, 256 at 4x4 0.47-0.56 -> 0.17,
 * 128 at 8x8 0.43-0.53 -> 0.36-0.41. */
#define SHORT_ROW 64
#define BLOCK 16

static int blocked(const bn_job *j) { return j->s <= SHORT_ROW && ddl__bn_fma_ok(); }

/* block_of: the channels of a block: BLOCK, fewer where a sample's block would pass DDL__BN_SPAN
 * floats (batchnorm_fma.c's room for a block's spread parameters) */
static int block_of(const bn_job *j) { return j->s <= DDL__BN_SPAN / BLOCK ? BLOCK : DDL__BN_SPAN / j->s; }

static void train_block(const bn_job *j, int c0, int nch)
{
    size_t plane = (size_t)j->c * j->s;
    const float *x0 = j->x + (size_t)c0 * j->s;
    float k[BLOCK] = {0}, m[BLOCK] = {0}, a[BLOCK] = {0}, b[BLOCK] = {0};
    double s1[BLOCK], s2[BLOCK];
    for (int c = 0; c < nch; c++)
        k[c] = x0[(size_t)c * j->s];
    ddl__bn_block_sums_fma(j->n, j->s, plane, x0, NULL, nch, k, s1, s2);
    for (int c = 0; c < nch; c++)
        m[c] = stats(j, c0 + c, k[c], s1[c], s2[c], &a[c], &b[c]);
    ddl__bn_block_affine_fma(j->n, j->s, plane, x0, nch, m, a, b, j->y + (size_t)c0 * j->s);
}

/* by_blocks: channels [lo, hi) one at a time (one), or in blocks (block) where the rows are short */
static void by_blocks(const bn_job *j, size_t lo, size_t hi, void (*one)(const bn_job *, int),
                      void (*block)(const bn_job *, int, int))
{
    int nb = blocked(j) ? block_of(j) : 1;
    for (size_t ch = lo; ch < hi; ch += nb) {
        if (nb == 1)
            one(j, (int)ch);
        else
            block(j, (int)ch, hi - ch < (size_t)nb ? (int)(hi - ch) : nb);
    }
}

static void train_range(void *ctx, size_t lo, size_t hi) { by_blocks(ctx, lo, hi, train_channel, train_block); }

static void eval_range(void *ctx, size_t lo, size_t hi)
{
    const bn_job *j = ctx;
    for (size_t ch = lo; ch < hi; ch++) {
        float m = j->rmean[ch], r = (float)(1.0 / sqrt((double)j->rvar[ch] + (double)j->eps));
        j->mr[2 * ch] = m;
        j->mr[2 * ch + 1] = r;
        affine(j, (int)ch, m, r * (j->gamma ? j->gamma[ch] : 1.0f), j->beta ? j->beta[ch] : 0.0f);
    }
}

static size_t grain(int n, int s) { return GRAIN_FLOATS / ((size_t)n * (size_t)s) + 1; }

void ddl_batchnorm_forward_train(int n, int c, int s, float momentum, float eps, const float *x, const float *gamma,
                                 const float *beta, const float *run_mean, const float *run_var, float *y,
                                 float *mean_rstd, float *next_mean, float *next_var)
{
    if (n < 1 || c < 1 || s < 1)
        return;
    bn_job j = {.n = n, .c = c, .s = s, .momentum = momentum, .eps = eps, .x = x, .gamma = gamma, .beta = beta,
                .rmean = run_mean, .rvar = run_var, .y = y, .mr = mean_rstd,
                .nmean = run_mean && run_var && next_var ? next_mean : NULL, .nvar = next_var};
    ddl__parallel_range((size_t)c, grain(n, s), train_range, &j);
}

void ddl_batchnorm_forward_eval(int n, int c, int s, float eps, const float *x, const float *gamma, const float *beta,
                                const float *run_mean, const float *run_var, float *y, float *mean_rstd)
{
    if (n < 1 || c < 1 || s < 1)
        return;
    bn_job j = {.n = n, .c = c, .s = s, .eps = eps, .x = x, .gamma = gamma, .beta = beta, .rmean = run_mean,
                .rvar = run_var, .y = y, .mr = mean_rstd};
    ddl__parallel_range((size_t)c, grain(n, s), eval_range, &j);
}

/* ---- backward ---- */

/* back_coeffs: from channel ch's sums sd = sum dy and sdx = sum dy (x - m): dgamma += sdx r,
 * dbeta += sd, and dx's coefficients: dx = gr (dy - md - (x - m) mdx) (md = mdx = 0 without the
 * batch statistics). */
DDL__HOT static void back_coeffs(const bn_job *j, int ch, double sd, double sdx, float *gr, float *md, float *mdx)
{
    size_t cnt = (size_t)j->n * j->s;
    float r = j->mr_in[2 * ch + 1], g = j->gamma ? j->gamma[ch] : 1.0f;
    float dg = (float)(sdx * r), db = (float)sd;
    if (j->dgamma)
        j->dgamma[ch] += dg;
    if (j->dbeta)
        j->dbeta[ch] += db;
    *gr = g * r;
    *md = j->batch_stats ? (float)(sd / (double)cnt) : 0.0f;
    *mdx = j->batch_stats ? (float)(sdx * r / (double)cnt) * r : 0.0f; /* mean(dy xh) r: per unit of x - m */
}

/* back_channel: with xh = (x - m) r: dgamma += sum dy xh, dbeta += sum dy; dx = g r (dy -
 * sum dy / M - xh sum dy xh / M) through the batch statistics (M = N S values), else g r dy. */
DDL__HOT
static void back_channel(const bn_job *j, int ch)
{
    size_t plane = (size_t)j->c * j->s;
    size_t off0 = (size_t)ch * j->s;
    float m = j->mr_in[2 * ch];
    double sd = 0.0, sdx = 0.0;
    if (ddl__bn_fma_ok())
        ddl__bn_sums_fma(j->n, j->s, plane, j->x + off0, j->dy + off0, m, &sd, &sdx);
    else
        for (int ni = 0; ni < j->n; ni++) {
            float a, b;
            row_grads(j->x + ni * plane + off0, j->dy + ni * plane + off0, j->s, m, &a, &b);
            sd += a;
            sdx += b;
        }
    float gr, md, mdx;
    back_coeffs(j, ch, sd, sdx, &gr, &md, &mdx);
    if (!j->dx)
        return;
    for (int ni = 0; ni < j->n; ni++) {
        const float *xr = j->x + ni * plane + off0, *dr = j->dy + ni * plane + off0;
        float *out = j->dx + ni * plane + off0;
        for (int i = 0; i < j->s; i++)
            out[i] = gr * (dr[i] - md - (xr[i] - m) * mdx);
    }
}

static void back_block(const bn_job *j, int c0, int nch)
{
    size_t plane = (size_t)j->c * j->s, off0 = (size_t)c0 * j->s;
    float m[BLOCK] = {0}, gr[BLOCK] = {0}, md[BLOCK] = {0}, mdx[BLOCK] = {0};
    double sd[BLOCK], sdx[BLOCK];
    for (int c = 0; c < nch; c++)
        m[c] = j->mr_in[2 * (c0 + c)];
    ddl__bn_block_sums_fma(j->n, j->s, plane, j->x + off0, j->dy + off0, nch, m, sd, sdx);
    for (int c = 0; c < nch; c++)
        back_coeffs(j, c0 + c, sd[c], sdx[c], &gr[c], &md[c], &mdx[c]);
    if (j->dx)
        ddl__bn_block_dx_fma(j->n, j->s, plane, j->x + off0, j->dy + off0, nch, m, gr, md, mdx, j->dx + off0);
}

static void back_range(void *ctx, size_t lo, size_t hi) { by_blocks(ctx, lo, hi, back_channel, back_block); }

void ddl_batchnorm_backward(int n, int c, int s, int batch_stats, const float *x, const float *gamma,
                            const float *mean_rstd, const float *dy, float *dx, float *dgamma, float *dbeta)
{
    if (n < 1 || c < 1 || s < 1)
        return;
    bn_job j = {.n = n, .c = c, .s = s, .batch_stats = batch_stats, .x = x, .gamma = gamma, .mr_in = mean_rstd,
                .dy = dy, .dx = dx, .dgamma = dgamma, .dbeta = dbeta};
    ddl__parallel_range((size_t)c, grain(n, s), back_range, &j);
}

/* ---- synchronised statistics (the graph's batchnorm layer under a trainer's sync hook) ----
 * A part of the global batch gives, per sample and channel, the sum over the sample's S
 * values (a row, in the fixed lanes of row_sum); the hook sums those rows over every sample of
 * the global batch in sample order. The rows of a sample are the same bits whichever part holds
 * it, so the totals, and everything computed from them, are too. Two rounds forward (the sum of
 * x, then of (x - mean)^2 around the global mean: the variance as accurate as two passes over
 * the whole batch), one backward (sum dy and sum dy (x - mean) together). */


static inline float row_sq(const float *x, int n, float m)
{
    float a[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) {
            float d = x[i + k] - m;
            a[k] += d * d;
        }
    float t = lanes8(a);
    for (; i < n; i++) {
        float d = x[i] - m;
        t += d * d;
    }
    return t;
}

typedef struct bn_sync_job {
    int n, c, s;
    double count;
    float momentum, eps;
    const float *x, *dy, *gamma, *beta, *rmean, *rvar, *rows;
    const double *tot;
    float *out, *y, *mr, *nmean, *nvar, *dx, *dgamma, *dbeta;
} bn_sync_job;

DDL__HOT
static void rows_range(void *ctx, size_t lo, size_t hi)
{
    const bn_sync_job *j = ctx;
    size_t plane = (size_t)j->c * j->s;
    for (size_t ch = lo; ch < hi; ch++)
        for (int ni = 0; ni < j->n; ni++) {
            const float *xr = j->x + ni * plane + ch * j->s;
            j->out[(size_t)ni * j->c + ch] = j->mr ? row_sq(xr, j->s, j->mr[2 * ch]) : ddl__row_sum(xr, j->s);
        }
}

DDL__HOT
static void grad_rows_range(void *ctx, size_t lo, size_t hi)
{
    const bn_sync_job *j = ctx;
    size_t plane = (size_t)j->c * j->s;
    for (size_t ch = lo; ch < hi; ch++)
        for (int ni = 0; ni < j->n; ni++) {
            size_t off = ni * plane + ch * j->s;
            float a, b;
            row_grads(j->x + off, j->dy + off, j->s, j->mr[2 * ch], &a, &b);
            j->out[(size_t)ni * 2 * j->c + ch] = a;
            j->out[(size_t)ni * 2 * j->c + j->c + ch] = b;
        }
}

void ddl__bn_sync_rows(int n, int c, int s, const float *x, const float *mean_rstd, float *rows)
{
    if (n < 1 || c < 1 || s < 1)
        return;
    bn_sync_job j = {.n = n, .c = c, .s = s, .x = x, .mr = (float *)(uintptr_t)mean_rstd, .out = rows};
    ddl__parallel_range((size_t)c, grain(n, s), rows_range, &j);
}

void ddl__bn_sync_mean(int c, double count, const double *sum, float *mean_rstd)
{
    for (int ch = 0; ch < c; ch++)
        mean_rstd[2 * ch] = count > 0 ? (float)(sum[ch] / count) : 0.0f;
}

static void sync_forward_range(void *ctx, size_t lo, size_t hi)
{
    const bn_sync_job *j = ctx;
    bn_job a = {.n = j->n, .c = j->c, .s = j->s, .x = j->x, .y = j->y};
    for (size_t ch = lo; ch < hi; ch++) {
        double sq = j->tot[ch], cnt = j->count > 0 ? j->count : 1.0;
        float m = j->mr[2 * ch], r = (float)(1.0 / sqrt(sq / cnt + (double)j->eps));
        float unbiased = (float)(cnt > 1 ? sq / (cnt - 1) : sq); /* PyTorch's running variance */
        j->mr[2 * ch + 1] = r;
        if (j->nmean) {
            j->nmean[ch] = (1.0f - j->momentum) * j->rmean[ch] + j->momentum * m;
            j->nvar[ch] = (1.0f - j->momentum) * j->rvar[ch] + j->momentum * unbiased;
        }
        if (j->n > 0)
            affine(&a, (int)ch, m, r * (j->gamma ? j->gamma[ch] : 1.0f), j->beta ? j->beta[ch] : 0.0f);
    }
}

void ddl__bn_sync_forward(int n, int c, int s, double count, float momentum, float eps, const double *sq,
                          const float *x, const float *gamma, const float *beta, const float *run_mean,
                          const float *run_var, float *y, float *mean_rstd, float *next_mean, float *next_var)
{
    if (n < 0 || c < 1 || s < 1)
        return;
    bn_sync_job j = {.n = n, .c = c, .s = s, .count = count, .momentum = momentum, .eps = eps, .tot = sq, .x = x,
                     .gamma = gamma, .beta = beta, .rmean = run_mean, .rvar = run_var, .y = y, .mr = mean_rstd,
                     .nmean = run_mean && run_var && next_var ? next_mean : NULL, .nvar = next_var};
    ddl__parallel_range((size_t)c, n > 0 ? grain(n, s) : (size_t)c, sync_forward_range, &j);
}

void ddl__bn_sync_grad_rows(int n, int c, int s, const float *x, const float *mean_rstd, const float *dy,
                            float *rows)
{
    if (n < 1 || c < 1 || s < 1)
        return;
    bn_sync_job j = {.n = n, .c = c, .s = s, .x = x, .dy = dy, .mr = (float *)(uintptr_t)mean_rstd, .out = rows};
    ddl__parallel_range((size_t)c, grain(n, s), grad_rows_range, &j);
}

/* sync_back_range: dgamma and dbeta from this part's own rows (its share of the gradient, which
 * the trainer adds over the parts as any other); dx through the global batch's statistics. */
DDL__HOT
static void sync_back_range(void *ctx, size_t lo, size_t hi)
{
    const bn_sync_job *j = ctx;
    size_t plane = (size_t)j->c * j->s, w = 2 * (size_t)j->c;
    for (size_t ch = lo; ch < hi; ch++) {
        float m = j->mr[2 * ch], r = j->mr[2 * ch + 1], g = j->gamma ? j->gamma[ch] : 1.0f;
        double sd = 0.0, sdx = 0.0;
        for (int ni = 0; ni < j->n; ni++) {
            sd += j->rows[ni * w + ch];
            sdx += j->rows[ni * w + j->c + ch];
        }
        if (j->dgamma)
            j->dgamma[ch] += (float)(sdx * r);
        if (j->dbeta)
            j->dbeta[ch] += (float)sd;
        if (!j->dx)
            continue;
        float gr = g * r, md = (float)(j->tot[ch] / j->count);
        float mdx = (float)(j->tot[j->c + ch] * r / j->count) * r; /* mean(dy xh) r: per unit of x - m */
        for (int ni = 0; ni < j->n; ni++) {
            const float *xr = j->x + ni * plane + ch * j->s, *dr = j->dy + ni * plane + ch * j->s;
            float *out = j->dx + ni * plane + ch * j->s;
            for (int i = 0; i < j->s; i++)
                out[i] = gr * (dr[i] - md - (xr[i] - m) * mdx);
        }
    }
}

void ddl__bn_sync_backward(int n, int c, int s, double count, const float *x, const float *gamma,
                           const float *mean_rstd, const float *dy, const float *rows, const double *tot, float *dx,
                           float *dgamma, float *dbeta)
{
    if (n < 1 || c < 1 || s < 1 || count <= 0)
        return;
    bn_sync_job j = {.n = n, .c = c, .s = s, .count = count, .x = x, .gamma = gamma, .mr = (float *)(uintptr_t)mean_rstd,
                     .dy = dy, .rows = rows, .tot = tot, .dx = dx, .dgamma = dgamma, .dbeta = dbeta};
    ddl__parallel_range((size_t)c, grain(n, s), sync_back_range, &j);
}
