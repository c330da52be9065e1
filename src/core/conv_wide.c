/* conv_wide.c - direct 3x3 and 5x5 convolution, stride 1, any padding up to k - 1 and any
 * channel count (U-Net's convolutions, LeNet's): the forward pass, the input gradient and the
 * weight gradient, without an im2col matrix. Uses only the caller's workspace.
 *
 * Rows are computed at the padded width wp ("wide" rows), so every tap of
 * every input channel is one contiguous vector load at a fixed offset; the wp - ow extra
 * columns are garbage and dropped. A micro-kernel keeps an 8-output-channel x 48-position tile
 * in registers across all input channels and taps: each input vector feeds 8 multiply-adds with
 * broadcast weights, packed (oc block, ic, tap, 8) so the kernel reads them in order. The
 * k x k taps are offsets (ki wp + kj) into the wide plane, so a 5x5 kernel is the same loop.
 *
 * The input gradient is the same kernel: dx is the convolution of dy, padded by k - 1 - pad,
 * with the weights flipped and in_c / out_c swapped. Summation order per output: input channels
 * in order, taps in row-major order, one fused multiply-add each, the same in every clone.
 *
 * The weight gradient keeps a tile of 16-lane sums (3 output channels x 9 taps for 3x3, 4 x 5,
 * a kernel row, for 5x5) in registers over all wide positions of one sample and one input
 * channel (dy copied into wide rows with zeros in the extra columns), adds them lane by lane to
 * sums in memory, and adds each weight's 16 lanes in a fixed order at the end of the batch. */
#include "impl.h"

#include <string.h>

#define WIDE_OCB 8 /* output channels per tile, at most (6 when that wastes fewer: LeNet's 6) */
#define WIDE_J 48  /* positions per tile: three 16-float vectors */
#define WIDE_MAX_TAPS 25

typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4)));

/* wide_geo: one sample's convolution seen by the kernel: c_in planes of (h, w) padded by pad
 * into (hp, wp) planes of plane floats, c_out outputs of (oh, ow), len wide positions, a k x k
 * kernel of taps = k k taps. A padded row is pad zeros then the w values, wp = w + pad: the
 * right border of a row is the left border of the next (a tap past the row's end reads the next
 * row's zeros), which saves pad wide positions a row (LeNet's conv2 input gradient: 196 positions
 * instead of 252). Requires pad <= k - 1, so that the ow outputs fit in wp. */
typedef struct wide_geo {
    int c_in, c_out, h, w, pad, k, taps, wp, hp, oh, ow, ocb; /* ocb: output channels per tile */
    size_t len, plane; /* len: oh * wp rounded up to WIDE_J; plane: >= hp * wp + reads past it */
} wide_geo;

static wide_geo wide_view(int c_in, int c_out, int h, int w, int pad, int k)
{
    wide_geo q = {c_in, c_out, h, w, pad, k, k * k, w + pad, h + 2 * pad, h + 2 * pad - k + 1,
                  w + 2 * pad - k + 1, WIDE_OCB, 0, 0};
    if ((c_out + 5) / 6 * 6 - c_out < (c_out + 7) / 8 * 8 - c_out)
        q.ocb = 6;
    q.len = ((size_t)q.oh * q.wp + WIDE_J - 1) / WIDE_J * WIDE_J;
    /* the last tile reads up to len - 1 + (k - 1)(wp + 1): keep that inside the (zeroed) plane */
    q.plane = (q.len + (size_t)(k - 1) * (q.wp + 1) + 15) / 16 * 16;
    return q;
}

/* tap_offsets: off[t] = the wide-plane offset of tap t = (ki, kj). */
static void tap_offsets(const wide_geo *q, size_t *off)
{
    for (int t = 0; t < q->taps; t++)
        off[t] = (size_t)(t / q->k) * q->wp + (size_t)(t % q->k);
}

/* grad_samples: samples per pass of the weight-gradient tiles, from the geometry alone (so the
 * sums are the same in any range): as many as fit GRAD_CHUNK floats of padded input and wide dy
 * rows, 1 to GRAD_MAX_SAMPLES. LeNet's planes are small: 8 samples a pass cut the adds to
 * memory 8-fold; U-Net's 64x64 planes take one. */
#define GRAD_CHUNK ((size_t)1 << 16)
#define GRAD_MAX_SAMPLES 8
static int grad_samples(const wide_geo *q)
{
    size_t per = (size_t)q->c_in * q->plane + (size_t)q->c_out * q->len, n = GRAD_CHUNK / per;
    return n < 1 ? 1 : n > GRAD_MAX_SAMPLES ? GRAD_MAX_SAMPLES : (int)n;
}

/* dw_floats: what dw_range needs for every channel group at once: ns padded inputs and wide dy
 * rows, every channel's lane sums and the spare's. */
static size_t dw_floats(const wide_geo *q)
{
    size_t ns = (size_t)grad_samples(q);
    return ns * ((size_t)q->c_in * q->plane + (size_t)q->c_out * q->len) +
           ((size_t)q->c_out + 1) * q->c_in * q->taps * 16;
}

/* grad_chunks: the chunks of a weight gradient cut by samples, or 0 to cut it by channel groups.
 * A small weight gradient (LeNet's; U-Net's on its 64x64 and 32x32 grids) is cut by samples when
 * the batch makes 2 chunks or more: a task takes task_samples(q) samples and every channel, so
 * each thread reads only the samples that it wrote itself in the ops before (cut by sample too).
 * Cut by channels, every thread reads every sample: half of them come from the other core's
 * cache, and the other core keeps copies, which have to be invalidated when the next step writes
 * those buffers again (LeNet at 2 threads: conv1's backward 130 -> 89 us, conv2's 412 -> 377,
 * pool1's forward 60 -> 54). Each chunk's dw
 * and db are kept apart and added in chunk order after: the same sums at any thread count. Only
 * the shape and the batch decide the cut. A chunk costs its lane sums' zeroing and adding up: 32
 * samples of LeNet's small planes (16 cost its one thread 3% of the step), 16 of planes of 1024
 * positions or more, enough to split U-Net's batch of 32 (at 2 threads 640 -> 673 images/s, 7 of
 * 7 alternated pairs ahead; 1 thread within noise). */
#define GRAD_TASK_SUMS ((size_t)1 << 16) /* lane sums (floats) a chunk may keep: 256 KB */
static int task_samples(const wide_geo *q) { return q->oh * q->ow >= 1024 ? 16 : 32; }

static int grad_chunks(const wide_geo *q, int batch)
{
    size_t sums = ((size_t)q->c_out + 1) * q->c_in * q->taps * 16; /* every channel's, and the spare */
    int per = task_samples(q);
    if (sums > GRAD_TASK_SUMS || dw_floats(q) > DDL__THREAD_SCRATCH || batch <= per)
        return 0;
    return (batch + per - 1) / per;
}

/* parts_at: where the chunks' parts start in the caller's workspace, past a task's own room
 * (64-byte aligned); parts_floats: their room (each chunk's dw, then each chunk's db in doubles,
 * from parts_db_at). */
static size_t parts_at(const wide_geo *q) { return (dw_floats(q) + 15) / 16 * 16; }

static size_t parts_db_at(const wide_geo *q, int chunks) /* the dbs, past the dws: 8-byte aligned */
{
    return ((size_t)chunks * q->c_out * q->c_in * q->taps + 1) / 2 * 2;
}

static size_t parts_floats(const wide_geo *q, int chunks)
{
    return parts_db_at(q, chunks) + 2 * (size_t)chunks * q->c_out;
}

static size_t oc_blocks(const wide_geo *q) { return (size_t)(q->c_out + q->ocb - 1) / q->ocb; }

/* floats: xp (c_in planes), one tile row of ocb wide outputs, and the packed weights. */
static size_t wide_floats(const wide_geo *q)
{
    return (size_t)q->c_in * q->plane + (size_t)q->ocb * q->len + oc_blocks(q) * q->ocb * (size_t)q->c_in * q->taps;
}

/* The kernels pay for whole tiles of WIDE_J positions: on small planes most of a tile is padding.
 * ResNet-18's 3x3 convolutions at batch 64, one thread, forward / weight gradient in ms, wide
 * against im2col + gemm (a throwaway harness, on a machine shared with builds: read the ratios): 64 channels at 16x16 9 / 19
 * against 18-28 / 49; 128 at 8x8 14-20 / 65-70 against 22-24 / 25-49; 256 at 4x4 27-29 / 183
 * against 17-25 / 24; 512 at 2x2 120-128 / 1157 against 38-48 / 28. So the wide kernels take a
 * plane when at least 3/4 of its tiles' positions are real (8x8 and up), and the weight gradient
 * from 256 real positions a plane (16x16 and up), or on smaller planes where the channels are
 * few (in x out <= 4096: LeNet's conv2, U-Net's 64 channels at 8x8, which it was built for and
 * where the two are even); the rest go to im2col + gemm. */
static int wide_fits(const ddl_conv2d *g, size_t min_real)
{
#ifdef DDL_NO_WIDE_CONV /* to measure against im2col + gemm */
    return 0;
#endif
    int k = g->k_h;
    if (!(g->in_c >= 1 && g->stride == 1 && ddl__conv2d_plain(g) && (k == 3 || k == 5) && g->k_w == k &&
          g->pad >= 0 && g->pad <= k - 1 && g->in_h + 2 * g->pad >= k && g->in_w + 2 * g->pad >= k))
        return 0;
    wide_geo q = wide_view(g->in_c, g->out_c, g->in_h, g->in_w, g->pad, k);
    size_t real = (size_t)q.oh * q.wp;
    return 4 * real >= 3 * q.len && (real >= min_real || (size_t)g->in_c * (size_t)g->out_c <= 4096);
}

int ddl__conv2d_wide_ok(const ddl_conv2d *g) { return wide_fits(g, 0); }

int ddl__conv2d_wide_dw_ok(const ddl_conv2d *g) { return wide_fits(g, 256); }

size_t ddl__conv2d_wide_workspace(const ddl_conv2d *g)
{
    int k = g->k_h;
    wide_geo f = wide_view(g->in_c, g->out_c, g->in_h, g->in_w, g->pad, k);
    wide_geo b = wide_view(g->out_c, g->in_c, f.oh, f.ow, k - 1 - g->pad, k);
    size_t a = wide_floats(&f), c = wide_floats(&b);
    int chunks = grad_chunks(&f, g->batch);
    size_t d = chunks ? parts_at(&f) + parts_floats(&f, chunks) : dw_floats(&f);
    a = a > c ? a : c;
    return a > d ? a : d;
}

/* ---- packing ---- */

/* pad_planes: xp (c, plane) = x (c, h, w) with pad zero rows above, pad zeros before each row
 * (the border on both sides, see wide_geo) and zeros after; every float written once (a memset
 * of the whole plane first cost more than the copy). */
static void pad_planes(const wide_geo *q, const float *x, float *xp)
{
    size_t top = (size_t)q->pad * q->wp, below = q->plane - (size_t)(q->pad + q->h) * q->wp;
    for (int c = 0; c < q->c_in; c++) {
        float *dst = xp + c * q->plane;
        memset(dst, 0, (top + q->pad) * sizeof *dst);
        dst += top;
        for (int y = 0; y < q->h; y++, dst += q->wp) {
            const float *src = x + ((size_t)c * q->h + y) * q->w;
            for (int i = 0; i < q->pad; i++)
                dst[i] = 0.0f;
            memcpy(dst + q->pad, src, (size_t)q->w * sizeof *src);
            for (int i = q->pad + q->w; i < q->wp; i++)
                dst[i] = 0.0f;
        }
        memset(dst, 0, below * sizeof *dst);
    }
}

/* pack_weights: wk (oc block, c_in, taps, ocb) from w. flip 0: w is the conv's (c_out,
 * c_in, k, k); flip 1: w is (c_in, c_out, k, k) of the conv being transposed, and taps are
 * reversed. Channels past c_out get zero weights. */
static void pack_weights(const wide_geo *q, const float *w, int flip, float *wk)
{
    size_t kk = (size_t)q->taps;
    for (size_t ob = 0; ob < oc_blocks(q); ob++)
        for (int ic = 0; ic < q->c_in; ic++)
            for (size_t t = 0; t < kk; t++)
                for (int o = 0; o < q->ocb; o++) {
                    int oc = (int)ob * q->ocb + o;
                    float v = 0.0f;
                    if (oc < q->c_out)
                        v = flip ? w[((size_t)ic * q->c_out + oc) * kk + (kk - 1 - t)] : w[((size_t)oc * q->c_in + ic) * kk + t];
                    wk[((ob * q->c_in + ic) * kk + t) * q->ocb + o] = v;
                }
}

/* ---- kernel ---- */

/* tap_rows: the taps [*t0, *t1) of the kernel rows that reach a row of data (not the zero rows
 * of the border) from some output row of the tile at wide position j; the others only add
 * zeros. LeNet's conv2 input gradient reads dy padded by 4 rows: 28% of its taps are skipped. */
static inline void tap_rows(const wide_geo *q, size_t j, int *t0, int *t1)
{
    int y0 = (int)(j / (size_t)q->wp), y1 = (int)((j + WIDE_J - 1) / (size_t)q->wp);
    y1 = y1 < q->oh - 1 ? y1 : q->oh - 1;
    int lo = q->pad - y1 > 0 ? q->pad - y1 : 0, hi = q->pad + q->h - y0 < q->k ? q->pad + q->h - y0 : q->k;
    *t0 = lo * q->k;
    *t1 = (hi > lo ? hi : lo) * q->k;
}

/* WIDE_TILE: acc (OCB, len) = sum over c_in input planes and the taps (at offsets off) of wk x
 * xp shifted, each tile over the taps tap_rows gives; OCB a constant, so the 3 OCB accumulators
 * stay in registers. */
#define WIDE_TILE(NAME, OCB)                                                                              \
    DDL__HOT static void NAME(const wide_geo *q, const size_t *off, const float *xp, const float *wk, float *acc) \
    {                                                                                                     \
        size_t len = q->len, plane = q->plane;                                                            \
        int c_in = q->c_in, taps = q->taps;                                                               \
        for (size_t j = 0; j < len; j += WIDE_J) {                                                        \
            int t0, t1;                                                                                   \
            tap_rows(q, j, &t0, &t1);                                                                     \
            v16 a0[OCB], a1[OCB], a2[OCB];                                                                \
            for (int o = 0; o < OCB; o++)                                                                 \
                a0[o] = a1[o] = a2[o] = (v16){0};                                                         \
            for (int ic = 0; ic < c_in; ic++) {                                                           \
                const float *xi = xp + (size_t)ic * plane + j, *wi = wk + (size_t)ic * taps * OCB;        \
                for (int t = t0; t < t1; t++) {                                                           \
                    v16 x0 = *(const v16u *)(xi + off[t]), x1 = *(const v16u *)(xi + off[t] + 16),        \
                        x2 = *(const v16u *)(xi + off[t] + 32);                                           \
                    for (int o = 0; o < OCB; o++) {                                                       \
                        float wv = wi[t * OCB + o];                                                       \
                        a0[o] += wv * x0;                                                                 \
                        a1[o] += wv * x1;                                                                 \
                        a2[o] += wv * x2;                                                                 \
                    }                                                                                     \
                }                                                                                         \
            }                                                                                             \
            for (int o = 0; o < OCB; o++) {                                                               \
                *(v16u *)(acc + o * len + j) = a0[o];                                                     \
                *(v16u *)(acc + o * len + j + 16) = a1[o];                                                \
                *(v16u *)(acc + o * len + j + 32) = a2[o];                                                \
            }                                                                                             \
        }                                                                                                 \
    }

WIDE_TILE(wide_tile8, 8)
WIDE_TILE(wide_tile6, 6)

/* ---- AVX2 tiles ----
 * The tiles above are written in 16-float vectors for AVX-512's 32 registers. Built for AVX2 (16
 * registers of 8 floats), their 24 and 27 vectors of sums went to the stack on every step: on an
 * AMD EPYC without AVX-512 (Zen 3), LeNet trained at 1,200 images/s, 78% of it in wide_tile8.
 * These are the same sums in 8-float vectors, in shapes that fit 16 registers: the forward tile
 * by G channels x V vectors (4 x 3 for 8 channels, 6 x 2 for 6), the weight gradient's by 2
 * channels x 5 taps, each half of the 16 lanes in turn. Every output gets the same fused
 * multiply-adds in the same order as in the clones (input channels, then taps; the lanes'
 * positions, samples, then wide positions), so the bits are the v3 clone's, and the v4 clone's.
 * They run where the clones would take the v3 build (ddl__avx2_tiles, impl.h). */
#ifdef DDL__CLONES
#include <immintrin.h>
#define WIDE_AVX2 1

/* WIDE_AVX2_TILE: the sums of channels o0 .. o0 + G - 1 (of the packed ocb) at the 8 V positions
 * from xi0's position 0, over the taps [t0, t1) of every input channel, stored to out (rows len
 * floats apart). */
#define WIDE_AVX2_TILE(NAME, G, V)                                                                        \
    DDL__AVX2 static inline __attribute__((always_inline)) void NAME(const float *xi0, size_t plane, int c_in,   \
                                                              int taps, int ocb, const float *wk,         \
                                                              const size_t *off, int t0, int t1,          \
                                                              float *out, size_t len)                     \
    {                                                                                                     \
        __m256 a[G][V];                                                                                   \
        for (int o = 0; o < G; o++)                                                                       \
            for (int v = 0; v < V; v++)                                                                   \
                a[o][v] = _mm256_setzero_ps();                                                            \
        for (int ic = 0; ic < c_in; ic++) {                                                               \
            const float *xi = xi0 + (size_t)ic * plane, *wi = wk + (size_t)ic * taps * ocb;               \
            for (int t = t0; t < t1; t++) {                                                               \
                __m256 x[V];                                                                              \
                for (int v = 0; v < V; v++)                                                               \
                    x[v] = _mm256_loadu_ps(xi + off[t] + 8 * v);                                          \
                for (int o = 0; o < G; o++) {                                                             \
                    __m256 wv = _mm256_broadcast_ss(wi + t * ocb + o);                                    \
                    for (int v = 0; v < V; v++)                                                           \
                        a[o][v] = _mm256_fmadd_ps(wv, x[v], a[o][v]);                                     \
                }                                                                                         \
            }                                                                                             \
        }                                                                                                 \
        for (int o = 0; o < G; o++)                                                                       \
            for (int v = 0; v < V; v++)                                                                   \
                _mm256_storeu_ps(out + o * len + 8 * v, a[o][v]);                                         \
    }

WIDE_AVX2_TILE(wide_avx2_4x3, 4, 3)
WIDE_AVX2_TILE(wide_avx2_6x2, 6, 2)

/* wide_tile_avx2: wide_tile8's or wide_tile6's acc by the tiles above, each WIDE_J positions
 * over the taps tap_rows gives for them (the clones' taps). */
DDL__AVX2 static void wide_tile_avx2(const wide_geo *q, const size_t *off, const float *xp, const float *wk, float *acc)
{
    for (size_t j = 0; j < q->len; j += WIDE_J) {
        int t0, t1;
        tap_rows(q, j, &t0, &t1);
        if (q->ocb == 8) {
            for (int o0 = 0; o0 < 8; o0 += 4)
                for (int p = 0; p < WIDE_J; p += 24)
                    wide_avx2_4x3(xp + j + p, q->plane, q->c_in, q->taps, 8, wk + o0, off, t0, t1,
                                  acc + o0 * q->len + j + p, q->len);
        } else {
            for (int p = 0; p < WIDE_J; p += 16)
                wide_avx2_6x2(xp + j + p, q->plane, q->c_in, q->taps, 6, wk, off, t0, t1, acc + j + p, q->len);
        }
    }
}
#endif

/* wide_tile: acc (ocb, len) of one block of output channels, by the tiles this CPU runs */
static void wide_tile(const wide_geo *q, const size_t *off, const float *xp, const float *wk, float *acc)
{
#ifdef WIDE_AVX2
    if (ddl__avx2_tiles()) {
        wide_tile_avx2(q, off, xp, wk, acc);
        return;
    }
#endif
    if (q->ocb == 6)
        wide_tile6(q, off, xp, wk, acc);
    else
        wide_tile8(q, off, xp, wk, acc);
}

/* wide_sample: y (c_out, oh, ow) of one sample's xp, plus b (may be NULL). */
static void wide_sample(const wide_geo *q, const float *xp, const float *wk, const float *b, float *acc, float *y)
{
    size_t p = (size_t)q->oh * q->ow, off[WIDE_MAX_TAPS];
    tap_offsets(q, off);
    for (size_t ob = 0; ob < oc_blocks(q); ob++) {
        const float *wb = wk + ob * q->c_in * q->taps * q->ocb;
        wide_tile(q, off, xp, wb, acc);
        for (int o = 0; o < q->ocb && (int)ob * q->ocb + o < q->c_out; o++) {
            int oc = (int)ob * q->ocb + o;
            float bv = b ? b[oc] : 0.0f, *yo = y + (size_t)oc * p;
            for (int oy = 0; oy < q->oh; oy++) {
                const float *src = acc + o * q->len + (size_t)oy * q->wp;
                for (int ox = 0; ox < q->ow; ox++)
                    yo[(size_t)oy * q->ow + ox] = src[ox] + bv;
            }
        }
    }
}

/* Threads: the forward pass and the input gradient go sample by sample, the weight gradient
 * by pairs of output channels (over every sample in order, as with one thread); each task pads
 * into its thread's scratch, the packed weights are shared. */

typedef struct wide_job {
    const wide_geo *q;
    int batch;
    const float *x, *wk, *b, *dy;
    float *y, *dw;
    int per; /* weight gradient: output-channel pairs per task */
} wide_job;

static void run_sample(void *ctx, int n, float *ws)
{
    const wide_job *j = ctx;
    const wide_geo *q = j->q;
    size_t in_sz = (size_t)q->c_in * q->h * q->w, out_sz = (size_t)q->c_out * q->oh * q->ow;
    float *xp = ws, *acc = ws + (size_t)q->c_in * q->plane;
    pad_planes(q, j->x + n * in_sz, xp);
    wide_sample(q, xp, j->wk, j->b, acc, j->y + n * out_sz);
}

/* wide_run: every sample of x (batch, c_in, h, w) into y (batch, c_out, oh, ow). */
static void wide_run(const wide_geo *q, int batch, const float *x, const float *w, int flip, const float *b,
                     float *y, float *ws)
{
    size_t task = (size_t)q->c_in * q->plane + (size_t)q->ocb * q->len; /* xp and acc */
    float *wk = ws + task;
    pack_weights(q, w, flip, wk);
    wide_job j = {q, batch, x, wk, b, NULL, y, NULL, 0};
    if (ddl__threads() > 1 && task <= DDL__THREAD_SCRATCH) {
        ddl__parallel_ws(batch, run_sample, &j, ws);
        return;
    }
    for (int n = 0; n < batch; n++)
        run_sample(&j, n, ws);
}

void ddl__conv2d_wide_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y,
                              float *ws)
{
    wide_geo q = wide_view(g->in_c, g->out_c, g->in_h, g->in_w, g->pad, g->k_h);
    wide_run(&q, g->batch, x, w, 0, b, y, ws);
}

void ddl__conv2d_wide_dx(const ddl_conv2d *g, const float *w, const float *dy, float *dx, float *ws)
{
    int k = g->k_h, oh = g->in_h + 2 * g->pad - k + 1, ow = g->in_w + 2 * g->pad - k + 1;
    wide_geo q = wide_view(g->out_c, g->in_c, oh, ow, k - 1 - g->pad, k); /* its outputs: (in_c, in_h, in_w) */
    wide_run(&q, g->batch, dy, w, 1, NULL, dx, ws);
}

/* ---- weight gradient ---- */

/* lanes: the sum of the 16 floats at v in a fixed pairwise order. */
static inline float lanes(const float *v)
{
    float s8[8];
    for (int i = 0; i < 8; i++)
        s8[i] = v[i] + v[i + 8];
    return ((s8[0] + s8[4]) + (s8[2] + s8[6])) + ((s8[1] + s8[5]) + (s8[3] + s8[7]));
}

/* GRAD_TILE_BODY: for OCG output channels o, m[o] (c_in, taps, 16 lanes), taps t0 .. t0 + n - 1
 * += dy[o] (len wide positions) x xp (c_in planes) shifted by the TG taps at off (n <= TG of them
 * real), over ns samples (xp's and dy's samples xs and ds floats apart): OCG x TG accumulators,
 * added lane by lane to the sums in memory once per ns samples (the 16 lanes are added together
 * once per batch: once per sample cost more than the products on LeNet's small planes). Each
 * shifted input (mostly a load across a cache line) feeds OCG multiply-adds.
 * KEEP(v) pins it in a register: left alone, gcc folds its load into every multiply-add, and the
 * loads become the bottleneck. */
#define GRAD_TILE_BODY(KEEP, OCG, TG)                                                                     \
    for (int ic = 0; ic < c_in; ic++) {                                                                   \
        v16 a[OCG][TG];                                                                                   \
        for (int o = 0; o < OCG; o++)                                                                     \
            for (int t = 0; t < TG; t++)                                                                  \
                a[o][t] = (v16){0};                                                                       \
        for (int s = 0; s < ns; s++) {                                                                    \
            const float *xi = xp + (size_t)s * xs + (size_t)ic * plane;                                   \
            for (size_t j = 0; j < len; j += 16) {                                                        \
                v16 d[OCG];                                                                               \
                for (int o = 0; o < OCG; o++)                                                             \
                    d[o] = *(const v16u *)(dy[o] + (size_t)s * ds + j);                                   \
                for (int t = 0; t < TG; t++) {                                                            \
                    v16 xv = *(const v16u *)(xi + j + off[t]);                                            \
                    KEEP(xv);                                                                             \
                    for (int o = 0; o < OCG; o++)                                                         \
                        a[o][t] += d[o] * xv;                                                             \
                }                                                                                         \
            }                                                                                             \
        }                                                                                                 \
        _Pragma("GCC unroll 4") for (int o = 0; o < OCG; o++)                                            \
            _Pragma("GCC unroll 16") for (int t = 0; t < TG; t++) /* unrolled: a stays in registers */   \
                if (t < n)                                                                                \
                    *(v16u *)(m[o] + ((size_t)ic * taps + t0 + t) * 16) += a[o][t];                       \
    }

#define GRAD_ARGS                                                                                         \
    size_t len, int c_in, size_t plane, int taps, int t0, int n, const size_t *off, int ns, size_t xs,     \
        const float *xp, size_t ds, const float *const *dy, float *const *m
#define GRAD_NO_KEEP(v) (void)0

/* GRAD_TILES: the portable and AVX2 build of a tile shape, and, where gcc can target it, an
 * AVX-512 build chosen at run time. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(DDL_NO_CLONES)
#define GRAD_HAVE_AVX512 1
#define GRAD_KEEP_ZMM(v) __asm__("" : "+v"(v))
#define GRAD_TILES(NAME, OCG, TG)                                                                         \
    DDL__HOT static void NAME(GRAD_ARGS) { GRAD_TILE_BODY(GRAD_NO_KEEP, OCG, TG) }                         \
    __attribute__((target("avx512f,fma"), optimize("fp-contract=fast"))) static void NAME##_avx512(GRAD_ARGS) \
    {                                                                                                     \
        GRAD_TILE_BODY(GRAD_KEEP_ZMM, OCG, TG)                                                            \
    }
#else
#define GRAD_TILES(NAME, OCG, TG)                                                                         \
    DDL__HOT static void NAME(GRAD_ARGS) { GRAD_TILE_BODY(GRAD_NO_KEEP, OCG, TG) }
#endif

/* Shapes (registers: OCG x TG sums, OCG dy vectors, one input): 3x3 as 3 channels x 9 taps (31 of
 * the 32 AVX-512 registers: each shifted input feeds 3 multiply-adds, where 2 x 9 fed 2 and ran the
 * cnn's and U-Net's weight gradients 1.1-1.25x slower: tools/bench/winograd_layers.c), with 2 x 9
 * for the channels that do not come in threes; 5x5 by kernel rows, 4 channels x 5 taps (3 x 5 when the
 * channels come in threes, as LeNet's 6). Without AVX-512, 3x3 goes in pairs. */
GRAD_TILES(grad_2x9, 2, 9)
GRAD_TILES(grad_3x9, 3, 9)
GRAD_TILES(grad_4x5, 4, 5)
GRAD_TILES(grad_3x5, 3, 5)

typedef void (*grad_fn)(GRAD_ARGS);

#ifdef WIDE_AVX2
/* grad_avx2_2x5: GRAD_TILE_BODY's sums for 2 channels x 5 taps in 8-float vectors (10 sums, 2 dy
 * vectors and an input: 13 of AVX2's 16 registers), lanes 0-7 of the 16 first and then lanes
 * 8-15: each lane adds the same products in the same order (samples, then positions 16 apart).
 * The input is pinned in a register, as GRAD_TILE_BODY's KEEP does: gcc folded its load into both
 * multiply-adds, 12 loads (half of them across a cache line) for 10 of them. Pinned, U-Net's
 * weight gradients run 1.1-1.4x faster on a Zen 3 (batch 32: 8 channels at 64x64 35 -> 45-47
 * GFLOP/s, 32 at 16x16 29 -> 43-53) and U-Net trains at 168-176 images/s against 148-173. */
DDL__AVX2 static void grad_avx2_2x5(GRAD_ARGS)
{
    for (int ic = 0; ic < c_in; ic++)
        for (int h = 0; h < 16; h += 8) {
            __m256 a[2][5];
            for (int o = 0; o < 2; o++)
                for (int t = 0; t < 5; t++)
                    a[o][t] = _mm256_setzero_ps();
            for (int s = 0; s < ns; s++) {
                const float *xi = xp + (size_t)s * xs + (size_t)ic * plane, *d0 = dy[0] + (size_t)s * ds;
                const float *d1 = dy[1] + (size_t)s * ds;
                for (size_t j = (size_t)h; j < len; j += 16) {
                    __m256 e0 = _mm256_loadu_ps(d0 + j), e1 = _mm256_loadu_ps(d1 + j);
                    for (int t = 0; t < 5; t++) {
                        __m256 xv = _mm256_loadu_ps(xi + j + off[t]);
                        __asm__("" : "+x"(xv)); /* one load for both channels (unpinned, gcc loads it twice) */
                        a[0][t] = _mm256_fmadd_ps(e0, xv, a[0][t]);
                        a[1][t] = _mm256_fmadd_ps(e1, xv, a[1][t]);
                    }
                }
            }
            for (int o = 0; o < 2; o++)
                for (int t = 0; t < 5; t++)
                    if (t < n) {
                        float *mo = m[o] + ((size_t)ic * taps + t0 + t) * 16 + h;
                        _mm256_storeu_ps(mo, _mm256_add_ps(_mm256_loadu_ps(mo), a[o][t]));
                    }
        }
}
#endif

/* grad_plan: how the output channels are cut into groups, one tile each: n_big groups of big_c
 * channels (tile big), then groups of small_c (tile small) up to c_out; the last group may reach
 * past c_out (its extra channels add into a spare). tg: taps per pass. */
typedef struct grad_plan {
    grad_fn big, small;
    int big_c, small_c, n_big, groups, tg;
} grad_plan;

static grad_plan grad_shape(const wide_geo *q)
{
    int avx512 = 0;
#ifdef GRAD_HAVE_AVX512
    avx512 = __builtin_cpu_supports("avx512f");
#define GRAD_PICK(NAME) (avx512 ? NAME##_avx512 : NAME)
#else
#define GRAD_PICK(NAME) ((void)avx512, NAME)
#endif
    int c = q->c_out;
    grad_plan p;
#ifdef WIDE_AVX2
    int avx2 = ddl__avx2_tiles();
    if (avx2 == 2 || (avx2 && !avx512)) /* pairs of channels, 5 taps a pass (3x3: 5 and 4) */
        return (grad_plan){grad_avx2_2x5, grad_avx2_2x5, 2, 2, (c + 1) / 2, (c + 1) / 2, 5};
#endif
    if (q->k == 3) { /* threes, and one or two pairs for the rest (one pair, with a spare, for 1);
                        * without AVX-512 (16 registers), pairs */
        int rest = !avx512 ? c : c % 3 == 1 && c >= 4 ? 4 : c % 3;
        p = (grad_plan){GRAD_PICK(grad_3x9), GRAD_PICK(grad_2x9), 3, 2, (c - rest) / 3, 0, 9};
        p.groups = p.n_big + (rest + 1) / 2;
    } else {
        int by3 = c % 4 != 0 && c % 3 == 0;
        grad_fn f = by3 ? GRAD_PICK(grad_3x5) : GRAD_PICK(grad_4x5);
        int oc = by3 ? 3 : 4;
        p = (grad_plan){f, f, oc, oc, (c + oc - 1) / oc, (c + oc - 1) / oc, 5};
    }
    return p;
#undef GRAD_PICK
}

/* group_first: the first channel of group i (c_out for i = groups). */
static int group_first(const grad_plan *p, const wide_geo *q, int i)
{
    int c = i <= p->n_big ? i * p->big_c : p->n_big * p->big_c + (i - p->n_big) * p->small_c;
    return c < q->c_out ? c : q->c_out;
}

/* dw_range: the channel groups [lo, hi) over samples [n_lo, n_hi) in order, ns at a time: each
 * sample padded once into xp, the groups' dy rows widened beside it, then one tile per group and
 * pass of tg taps (channels past c_out in the last group read its first row and add into a
 * spare); at the end each weight's 16 lanes are added to out (the groups' share of a dw). ws: ns
 * sets of c_in padded planes, ns sets of the groups' channels' wide rows, their channels' and a
 * spare's c_in taps 16 lane sums. */
static void dw_range(const wide_job *j, int lo, int hi, int n_lo, int n_hi, float *out, float *ws)
{
    const wide_geo *q = j->q;
    int ns = grad_samples(q);
    grad_plan p = grad_shape(q);
    int c0 = group_first(&p, q, lo), c1 = group_first(&p, q, hi);
    size_t in_sz = (size_t)q->c_in * q->h * q->w, out_sz = (size_t)q->c_out * q->oh * q->ow, kk = (size_t)q->c_in * q->taps;
    size_t xs = (size_t)q->c_in * q->plane, ds = (size_t)(c1 - c0) * q->len; /* one sample's xp, dyw */
    float *xp = ws, *dyw = xp + (size_t)ns * xs, *m = dyw + (size_t)ns * ds;
    float *spare = m + (size_t)(c1 - c0) * kk * 16;
    size_t off[WIDE_MAX_TAPS] = {0};
    tap_offsets(q, off);
    memset(dyw, 0, (size_t)ns * ds * sizeof *dyw); /* the extra columns and the tail stay 0 */
    memset(m, 0, (size_t)(c1 - c0) * kk * 16 * sizeof *m);
    for (int n0 = n_lo; n0 < n_hi; n0 += ns) {
        int k = n_hi - n0 < ns ? n_hi - n0 : ns;
        for (int s = 0; s < k; s++) {
            pad_planes(q, j->x + (size_t)(n0 + s) * in_sz, xp + (size_t)s * xs);
            for (int c = c0; c < c1; c++) {
                const float *src = j->dy + (size_t)(n0 + s) * out_sz + (size_t)c * q->oh * q->ow;
                float *dst = dyw + (size_t)s * ds + (size_t)(c - c0) * q->len;
                for (int y = 0; y < q->oh; y++)
                    for (int x = 0; x < q->ow; x++) /* rows of 10 to 64: a loop, not memcpy */
                        dst[(size_t)y * q->wp + x] = src[(size_t)y * q->ow + x];
            }
        }
        for (int i = lo; i < hi; i++) {
            int oc = group_first(&p, q, i), big = i < p.n_big, width = big ? p.big_c : p.small_c;
            const float *dy[4];
            float *mo[4];
            for (int o = 0; o < width; o++) {
                int real = oc + o < c1;
                dy[o] = dyw + (size_t)(real ? oc + o - c0 : oc - c0) * q->len;
                mo[o] = real ? m + (size_t)(oc + o - c0) * kk * 16 : spare;
            }
            for (int t0 = 0; t0 < q->taps; t0 += p.tg)
                (big ? p.big : p.small)(q->len, q->c_in, q->plane, q->taps, t0, q->taps - t0 < p.tg ? q->taps - t0 : p.tg,
                                        off + t0, k, xs, xp, ds, dy, mo);
        }
    }
    for (size_t e = 0; e < (size_t)(c1 - c0) * kk; e++)
        out[(size_t)c0 * kk + e] += lanes(m + e * 16);
}

static void dw_task(void *ctx, int t, float *ws)
{
    const wide_job *j = ctx;
    int groups = grad_shape(j->q).groups, lo = t * j->per, hi = lo + j->per < groups ? lo + j->per : groups;
    if (lo < hi)
        dw_range(j, lo, hi, 0, j->batch, j->dw, ws);
}

typedef struct chunk_parts {
    float *dw;   /* [chunks][c_out kk] */
    double *db;  /* [chunks][c_out], or NULL */
} chunk_parts;

typedef struct sample_job {
    const wide_job *w;
    chunk_parts parts;
} sample_job;

static void dw_chunk(void *ctx, int t, float *ws)
{
    const sample_job *sj = ctx;
    const wide_geo *q = sj->w->q;
    int per = task_samples(q), n_lo = t * per;
    int n_hi = n_lo + per < sj->w->batch ? n_lo + per : sj->w->batch;
    size_t kk = (size_t)q->c_in * q->taps, p = (size_t)q->oh * q->ow;
    float *dw = sj->parts.dw + (size_t)t * q->c_out * kk;
    memset(dw, 0, (size_t)q->c_out * kk * sizeof *dw);
    dw_range(sj->w, 0, grad_shape(q).groups, n_lo, n_hi, dw, ws);
    if (!sj->parts.db)
        return;
    double *db = sj->parts.db + (size_t)t * q->c_out;
    for (int c = 0; c < q->c_out; c++)
        db[c] = ddl__planes_sum(sj->w->dy + ((size_t)n_lo * q->c_out + c) * p, (size_t)q->c_out * p, n_hi - n_lo,
                                (int)p);
}

/* dw_by_samples: dw (and db, if not NULL) += the chunks' parts, added in chunk order. */
static void dw_by_samples(const wide_job *j, int chunks, float *db, float *ws)
{
    const wide_geo *q = j->q;
    size_t wn = (size_t)q->c_out * q->c_in * q->taps;
    float *parts = ws + parts_at(q);
    sample_job sj = {j, {parts, db ? (double *)(parts + parts_db_at(q, chunks)) : NULL}};
    ddl__parallel_ws(chunks, dw_chunk, &sj, ws);
    for (size_t e = 0; e < wn; e++) {
        float s = parts[e];
        for (int t = 1; t < chunks; t++)
            s += parts[(size_t)t * wn + e];
        j->dw[e] += s;
    }
    for (int c = 0; db && c < q->c_out; c++) {
        double s = 0.0;
        for (int t = 0; t < chunks; t++)
            s += sj.parts.db[(size_t)t * q->c_out + c];
        db[c] += (float)s;
    }
}

/* ddl__conv2d_wide_dw: dw += the weight gradient; with db not NULL and the cut by samples, db +=
 * the bias gradient too (returns 1; else 0, and the caller sums db). Threads: chunks of samples
 * (grad_chunks), or ranges of channel groups; each channel's sums are the same in any range and
 * with any tile shape. */
int ddl__conv2d_wide_dw(const ddl_conv2d *g, const float *x, const float *dy, float *dw, float *db, float *ws)
{
    wide_geo q = wide_view(g->in_c, g->out_c, g->in_h, g->in_w, g->pad, g->k_h);
    int threads = ddl__threads(), chunks = grad_chunks(&q, g->batch);
    grad_plan p = grad_shape(&q);
    int groups = p.groups;
    wide_job j = {&q, g->batch, x, NULL, NULL, dy, NULL, dw, groups};
    if (chunks) {
        dw_by_samples(&j, chunks, db, ws);
        return db != NULL;
    }
    size_t sums = (size_t)q.c_in * q.taps * 16, ns = (size_t)grad_samples(&q); /* one channel's lane sums */
    size_t fixed = ns * q.c_in * q.plane + sums, group = p.big_c * (ns * q.len + sums); /* xp, the spare */
    size_t fit = fixed + group <= DDL__THREAD_SCRATCH ? (DDL__THREAD_SCRATCH - fixed) / group : 0;
    if (threads > 1 && groups > 1 && fit > 0) {
        j.per = (groups + threads - 1) / threads;
        if ((size_t)j.per > fit)
            j.per = (int)fit;
        ddl__parallel_ws((groups + j.per - 1) / j.per, dw_task, &j, ws);
        return 0;
    }
    dw_range(&j, 0, groups, 0, g->batch, dw, ws); /* the caller's ws holds xp, every channel's rows and a spare */
    return 0;
}
