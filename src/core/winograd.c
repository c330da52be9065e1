/* winograd.c - 3x3 stride-1 convolution by Winograd (Lavin and Gray, 2015): the forward pass,
 * the input gradient and the weight gradient, for a ddl_conv2d whose algo asks for it
 * (ddl__wino_ok says which layers: only where it measured faster than the direct kernels). Here
 * the passes, the products and F(2x2,3x3)'s transforms; F(4x4,3x3)'s, taken wherever a plane is
 * whole bands of its 4x4 tiles (fits4: the cnn's and U-Net's planes of 16x16 and up), are in
 * winograd_f4.c: the same passes with 36 points for 16. Uses only the caller's workspace
 * (ddl__wino_workspace floats) and the pool's scratch.
 *
 * Each 2x2 block of outputs ("tile") reads a 4x4 block d of the zero-padded input. With
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
 *   A^T = [1 1 1 0; 0 1 -1 -1],
 * a tile is y = A^T [(G w G^T) . (B^T d B)] A: 16 multiplies instead of 36, so the sum over input
 * channels becomes 16 independent matrix products (one per point xi of the 4x4 transform
 * domain) M[xi] (K, tiles) = U[xi] (K, C) V[xi] (C, tiles), U = G w G^T, V = B^T d B.
 *
 * Input gradient: dx is the convolution of dy, padded by 2 - pad, with w flipped and its two
 * channel axes swapped: the same forward pass with U made from that kernel.
 * Weight gradient: differentiating y's formula, dw = G^T [sum over tiles (A dy A^T) . (B^T d B)] G,
 * so the sum over tiles is again 16 products, Mw[xi] (K, C) = DY[xi] (K, tiles) V[xi]^T, and the
 * 3x3 result is taken out of the transform domain once at the end.
 *
 * Determinism: the work is cut into tasks fixed by the geometry alone (a block of one sample's
 * tiles, or of the batch's for F(4x4,3x3); for the weight gradient a fixed number of ranges of
 * blocks, their sums added in order at the end), every product of fixed shape inside its task:
 * the bits do not depend on the thread count. */
#include "winograd.h"

#define WINO_BUDGET ((size_t)1 << 17) /* floats of one task's V and M (512 KB, about L2) */
/* the weight gradient's: its products are sums over a block's tiles, and longer blocks pay more
 * than they cost in cache (at batch 32, one thread: the cnn's 32 -> 32 on 32x32 5.0 -> 3.6 ms,
 * 16 -> 32 4.7 -> 1.9 ms against 1 << 17; 1 << 15 made 16 -> 16 on 64x64 2.5 times slower) */
#define WINO_DW_BUDGET ((size_t)1 << 18)
#define WINO_DW_PARTS 8               /* ranges of the weight gradient's blocks, summed in order */

static wino_geo wino_view(int n, int c, int h, int w, int k, int pad, int m, size_t budget)
{
    wino_geo q = {n, c, h, w, k, pad, h + 2 * pad - 2, w + 2 * pad - 2, m, (m + 2) * (m + 2), 0, 0, 0, 0, 0, 0};
    q.th = (q.oh + m - 1) / m;
    q.tw = (q.ow + m - 1) / m;
    int tiles = q.th * q.tw;
    size_t per = (size_t)q.pts * (size_t)(c + k);
    int nt = (int)(budget / per) / 16 * 16;
    if (m == 4) { /* blocks of the whole batch's tiles, in whole vectors of 16 (bands), 32 where they fit */
        tiles *= n;
        nt = nt >= 32 ? nt / 32 * 32 : 16;
    }
    if (nt < 16)
        nt = 16;
    q.nt = nt > tiles ? tiles : nt;
    q.blocks = (tiles + q.nt - 1) / q.nt;
    q.vs = (size_t)c * q.nt + WINO_SKEW;
    q.ms = (size_t)k * q.nt + WINO_SKEW;
    return q;
}

/* row_floats: one of the rows the transforms read 16 tiles at a time: a padded image row (2 tw + 2
 * columns used) and the over-read of its last vectors. */
static int row_floats(const wino_geo *q) { return (2 * q->tw + 2 + 32 + 15) / 16 * 16; }

/* WINO_MAX_WIDTH: padded rows of at most this many floats, so a task's rows stay within the
 * scratch beside its V and M (see task_floats). */
#define WINO_MAX_WIDTH 8192

/* task_floats: one task's V (pts, c, nt) and M (pts, k, nt), plus the rows of the transforms: at
 * most 16 x 1024 x 16 + WINO2_ROWS row_floats for F(2x2,3x3) (fits takes c + k <= 1024), 36 x
 * 512 x 16 + 19 of F(4x4,3x3)'s (fits4: c + k <= 512), within the pool's DDL__THREAD_SCRATCH. */
static size_t task_floats(const wino_geo *q)
{
    return (size_t)q->pts * (q->vs + q->ms) + (q->m == 4 ? ddl__wino4_rows(q) : (size_t)WINO2_ROWS * row_floats(q));
}

/* vt_stride: a row of one point's V transposed (nt, c): c floats rounded up to the 32 the weight
 * gradient's products read at a time. dw_task_floats: a weight-gradient task's scratch, that
 * transposed point too (nt x 1024 more floats at most: within DDL__THREAD_SCRATCH beside
 * WINO_DW_BUDGET's V and DY). */
static size_t vt_stride(const wino_geo *q) { return (size_t)(q->c + 31) / 32 * 32; }

static size_t dw_task_floats(const wino_geo *q) { return task_floats(q) + (size_t)q->nt * vt_stride(q); }

/* The size rule, measured pass by pass (tools/bench/winograd_layers.c, BENCH_ONLY=winograd;
 * docs/TRAINING.md, "Winograd"): at batch 32, one thread, the forward pass and the input gradient
 * pay from 16 channels in and out and 48 together on planes of 32x32 and up (the cnn's 32 -> 32:
 * 3.20 -> 2.26 ms forward; 16 -> 32: 1.61 -> 1.32) and from 64 together on 16x16 (since the
 * transforms store whole vectors, spill: 64 -> 64 3.5-3.6 -> 2.3; U-Net's 32 -> 32 0.92-0.94 ->
 * 0.75-0.80, its input gradient 0.93-0.95 -> 0.75-0.82; 16 -> 32 a tie, 0.48-0.50 and
 * 0.44-0.51); not at 16 -> 16 (64x64: as fast as direct), nor on 8x8 planes (64 -> 64: 1.16-1.19
 * -> 1.16-1.22; 32 -> 64 0.60-0.62 -> 0.69-0.75), where a sample has 16 tiles. The weight
 * gradient pays from 32 channels in (where its products are outer products, outer_pays) and 64 in
 * and out together, on planes of 8x8 and up;
 * direct, ms -> Winograd, alternated runs of 2026-11-29 (since the transforms store whole vectors,
 * spill): the cnn's 64 -> 64 at 16x16 5.1-5.6 -> 2.8-3.0; 32 -> 64 2.5 -> 1.6; 32 -> 32 at 32x32
 * 3.9-4.9 -> 3.2-3.75; U-Net's 64 -> 64 at 8x8 2.1 -> 1.15; 32 -> 64 at 8x8 0.9-1.1 -> 0.6-0.7;
 * 32 -> 32 at 16x16 1.2-1.3 -> 1.0; 64 -> 32 at 16x16 2.4-2.5 -> 1.7. Not below, since
 * conv_wide.c's direct weight gradient runs 3 channels a tile: U-Net's 32 -> 16 at 32x32
 * 0.95-0.97x; with 16 in (dot products) 16 -> 32 at 16x16 0.65 direct, 1.4-1.5 Winograd. Below
 * these the transforms, which cost the same per pixel whatever the channel count, outweigh the
 * multiply-adds saved. */
#define WINO_MIN_CHANNELS 16 /* in and out */
#define WINO_MIN_SUM 48      /* in + out, on planes of WINO_BIG_PLANE */
#define WINO_BIG_PLANE 32
#define WINO_WIDE 64     /* in + out from which 16x16 planes pay */
#define WINO_DW_MIN_IN 32 /* channels in from which the weight gradient pays (outer_pays) */
#define WINO_DW_SUM 64    /* in + out, on planes of 8x8 and up */
/* F(4x4,3x3), where it tiles the plane (fits4: the cnn's and U-Net's planes of 16x16 and up), is
 * the faster Winograd wherever either pays, 1.6-1.9x F(2x2,3x3) from 32 channels (its weights'
 * transform 16 kernels at a time: one at a time it was 45% of a forward pass), and pays from
 * fewer channels: the forward pass and input gradient from 8 in and out and 24 together, the
 * weight gradient from 16 in and out. Batch 32, one thread, direct -> F(2x2) -> F(4x4) forward,
 * ms, BENCH_ONLY=winograd of 2026-11-29 16:00: the cnn's 64 -> 64 at 16x16 3.51 -> 2.45 -> 1.50,
 * 32 -> 32 at 32x32 3.36 -> 2.49 -> 1.85, 16 -> 16 at 64x64 3.61 -> 3.50 -> 2.73 (weight gradient
 * 4.14 -> 3.91 by F(4x4)); U-Net's 8 -> 16 at 32x32 0.46 -> 0.38, 16 -> 8 at 64x64 1.97 -> 1.90
 * (a tie in other runs), 8 -> 8 at 64x64 1.00 -> 0.90 (slower in three other runs: 1.03 -> 1.14),
 * its weight gradient with 8 out 1.5x slower (16 -> 8: 2.26 -> 3.40) and with 8 in near direct's
 * (8 -> 8 1.09 -> 1.01, 8 -> 16 0.54 -> 0.48: left direct, one run). */
#define WINO4_MIN_CHANNELS 8 /* in and out, the forward pass and input gradient */
#define WINO4_MIN_SUM 24     /* in + out */
#define WINO4_DW_MIN 16      /* in and out, the weight gradient (and outer_pays) */
/* With 8-float vectors (ddl__avx2_tiles: AVX2 and FMA, no AVX-512) the rule is the same but for
 * two weight gradients. tools/bench/winograd_layers.c of 2026-11-30 17:20 on an AMD EPYC Zen 3,
 * batch 32, one thread, direct -> Winograd forward / input gradient / weight gradient, ms:
 * F(2x2)'s weight gradient on 8x8 planes does not pay (U-Net's 64 -> 64 3.94 -> 5.36, 32 -> 64
 * 2.00 -> 2.69: its transforms, 16-float vectors, are half its time there), and F(4x4)'s pays
 * from 8 out (U-Net's 16 -> 8 at 64x64 5.39 -> 4.70, where all three passes pay: 5.02 / 4.41 ->
 * 3.69 / 3.60), though not from 8 in (8 -> 16 at 32x32 1.27 -> 1.46). The rest as above: the
 * cnn's 16 -> 16 at 64x64 8.38 / 8.15 / 10.76 -> 6.64 / 5.94 / 6.78, 64 -> 64 at 16x16 7.84 /
 * 7.95 / 11.96 -> 2.60 / 2.61 / 3.31; U-Net's 8 -> 8 at 64x64 a tie (2.26 / 2.22 -> 2.16 / 2.25). */
#define WINO4_NARROW_DW_OUT 8   /* out channels from which F(4x4)'s weight gradient pays, 8-float vectors */
#define WINO_NARROW_DW_PLANE 16 /* the smallest plane F(2x2)'s weight gradient pays on, 8-float vectors */
/* Where F(2x2,3x3)'s transforms run in 8-float vectors too (winograd_f2_avx2.c: padding 1, rows
 * of whole vectors, whole_vectors), every pass pays from 16 channels in and out on planes of 8x8
 * and up. winograd_layers.c and single layers of 2026-11-30 19:35 on the Zen 3, direct -> F(2x2)
 * forward / input gradient / weight gradient, ms: U-Net's 64 -> 64 at 8x8 2.68 / 2.78 / 4.33 ->
 * 1.15 / 1.14 / 1.49, 32 -> 64 1.33 / 1.43 / 2.30 -> 0.68 / 0.72 / 0.80; 16 -> 16 at 8x8 0.31 /
 * 0.30 / 0.41 -> 0.16 / 0.15 / 0.28; 16 -> 48 a tie in the weight gradient (0.86 -> 0.84); 16
 * -> 16 at 24x24 1.92 / 1.92 / 2.07 -> 1.42 / 1.43 / 1.87. */
#define WINO_WHOLE_MIN_PLANE 8

static int fits(const ddl_conv2d *g)
{
    if (!ddl__conv2d_plain(g) || g->stride != 1 || g->k_h != 3 || g->k_w != 3 || g->pad < 0 || g->pad > 2 ||
        g->batch < 1 || g->in_c < 1 || g->out_c < 1)
        return 0;
    return g->in_h + 2 * g->pad >= 3 && g->in_w + 2 * g->pad >= 3 && g->in_c + g->out_c <= 1024 &&
           g->in_w + 2 * g->pad <= WINO_MAX_WIDTH;
}

/* fits4: F(4x4,3x3) takes g: padding 1 (so the input gradient's plane is the output's), planes of
 * whole bands of 4x4 tiles (ddl__wino4_fits) and c + k <= 512 (its task's scratch). */
static int fits4(const ddl_conv2d *g)
{
    return fits(g) && g->pad == 1 && g->in_c + g->out_c <= 512 && ddl__wino4_fits(g->in_h, g->in_w);
}

/* whole_vectors: F(2x2,3x3)'s passes of g all run winograd_f2_avx2.c's transforms where the AVX2
 * tiles do (ddl__wino2_avx2: each pass's output plane rows of whole vectors, an even count) */
static int whole_vectors(const ddl_conv2d *g) { return g->pad == 1 && g->in_w % 8 == 0 && g->in_h % 2 == 0; }

/* takes: g asks for Winograd (g->algo) and fits it, and the size rule gives it the forward pass
 * and input gradient (dw 0) or the weight gradient (dw 1); DDL_CONV_WINOGRAD_ALL and
 * DDL_CONV_WINOGRAD4_ALL: every pass. The rule is the CPU's: with 8-float vectors (AVX2), the
 * narrow one. */
static int takes(const ddl_conv2d *g, int dw)
{
    if ((g->algo != DDL_CONV_WINOGRAD && g->algo != DDL_CONV_WINOGRAD_ALL && g->algo != DDL_CONV_WINOGRAD4_ALL) ||
        !fits(g))
        return 0;
    if (g->algo != DDL_CONV_WINOGRAD)
        return 1;
    int c = g->in_c, k = g->out_c, plane = g->in_h < g->in_w ? g->in_h : g->in_w, narrow = ddl__avx2_tiles();
    if (fits4(g))
        return dw ? c >= WINO4_DW_MIN && k >= (narrow ? WINO4_NARROW_DW_OUT : WINO4_DW_MIN)
                  : c >= WINO4_MIN_CHANNELS && k >= WINO4_MIN_CHANNELS && c + k >= WINO4_MIN_SUM;
    if (c < WINO_MIN_CHANNELS || k < WINO_MIN_CHANNELS)
        return 0;
    if (narrow && whole_vectors(g))
        return plane >= WINO_WHOLE_MIN_PLANE;
    if (dw)
        return plane >= (narrow ? WINO_NARROW_DW_PLANE : 8) && c >= WINO_DW_MIN_IN && c + k >= WINO_DW_SUM;
    return (plane >= WINO_BIG_PLANE && c + k >= WINO_MIN_SUM) || (plane >= 16 && c + k >= WINO_WIDE);
}

/* tile: the outputs a tile (2 or 4) of a layer's Winograd passes: F(4x4,3x3) wherever it fits,
 * but under DDL_CONV_WINOGRAD_ALL (F(2x2,3x3) on every layer, to test it). */
static int tile(const ddl_conv2d *g) { return g->algo != DDL_CONV_WINOGRAD_ALL && fits4(g) ? 4 : 2; }

int ddl__wino_ok(const ddl_conv2d *g) { return takes(g, 0); }

int ddl__wino_dw_ok(const ddl_conv2d *g) { return takes(g, 1); }

/* workspace: of the passes with tiles of m outputs */
static size_t workspace(const ddl_conv2d *g, int m)
{
    wino_geo f = wino_view(g->batch, g->in_c, g->in_h, g->in_w, g->out_c, g->pad, m, WINO_BUDGET);
    wino_geo b = wino_view(g->batch, g->out_c, f.oh, f.ow, g->in_c, 2 - g->pad, m, WINO_BUDGET);
    wino_geo d_ = wino_view(g->batch, g->in_c, g->in_h, g->in_w, g->out_c, g->pad, m, WINO_DW_BUDGET);
    size_t u = (size_t)f.pts * g->in_c * g->out_c, tf = task_floats(&f), tb = task_floats(&b);
    size_t t = tf > tb ? tf : tb;
    /* forward and input gradient: U then one task's scratch; weight gradient: the parts, then a
     * task's scratch (its V and its DY, of longer blocks) */
    size_t a = u + t, d = (size_t)WINO_DW_PARTS * u + dw_task_floats(&d_);
    return a > d ? a : d;
}

size_t ddl__wino_workspace(const ddl_conv2d *g)
{
    size_t a = workspace(g, 2), b = fits4(g) ? workspace(g, 4) : 0;
    return a > b ? a : b;
}

/* ---- transforms ---- */

/* weights_u: u (16, k, c) = G w G^T of each (k, c) kernel of w (k, c, 3, 3); flip: of w's
 * flipped kernel with the two channel axes swapped (w read as (c, k, 3, 3), u indexed (xi, k, c)
 * with k the rows of the input gradient's product). */
WINO_UNFUSED static void weights_u(int k, int c, const float *w, int flip, float *u)
{
    size_t kc = (size_t)k * c;
    for (size_t e0 = 0; e0 < kc; e0 += WINO_GROUP) { /* WINO_GROUP kernels at a time, each point's stored together */
        size_t n = kc - e0 < WINO_GROUP ? kc - e0 : WINO_GROUP;
        float g[9][WINO_GROUP] = {{0}}, t[4][3][WINO_GROUP], out[16][WINO_GROUP];
        for (size_t l = 0; l < n; l++) {
            size_t e = e0 + l, ko = e / (size_t)c, ci = e % (size_t)c;
            const float *src = flip ? w + (ci * (size_t)k + ko) * 9 : w + e * 9;
            for (int i = 0; i < 9; i++)
                g[i][l] = flip ? src[8 - i] : src[i];
        }
        for (int j = 0; j < 3; j++) /* t = G g */
            for (int l = 0; l < WINO_GROUP; l++) {
                t[0][j][l] = g[j][l];
                t[1][j][l] = 0.5f * (g[j][l] + g[3 + j][l] + g[6 + j][l]);
                t[2][j][l] = 0.5f * (g[j][l] - g[3 + j][l] + g[6 + j][l]);
                t[3][j][l] = g[6 + j][l];
            }
        for (int i = 0; i < 4; i++) /* (G g) G^T */
            for (int l = 0; l < WINO_GROUP; l++) {
                out[i * 4 + 0][l] = t[i][0][l];
                out[i * 4 + 1][l] = 0.5f * (t[i][0][l] + t[i][1][l] + t[i][2][l]);
                out[i * 4 + 2][l] = 0.5f * (t[i][0][l] - t[i][1][l] + t[i][2][l]);
                out[i * 4 + 3][l] = t[i][2][l];
            }
        for (int xi = 0; xi < 16; xi++)
            memcpy(u + (size_t)xi * kc + e0, out[xi], n * sizeof(float));
    }
}

/* put: the first n (<= 16) lanes of v at p: a whole vector, or lane by lane at a row's end
 * (the next floats belong to another row, already written). */
/* (the vector goes by address: GCC notes an ABI change for a 64-byte vector argument in a build
 * without AVX-512 enabled, though put is always inlined) */
static inline __attribute__((always_inline)) void put_at(float *p, const v16 *v, int n)
{
    if (n >= 16)
        *(v16u *)(void *)p = *v;
    else
        for (int l = 0; l < n; l++)
            p[l] = (*v)[l];
}
#define put(p, v, n) put_at((p), (const v16[1]){(v)}, (n))

/* get_at: the first n (<= 16) floats at p in v's lanes (the rest zero), no further read. */
static inline __attribute__((always_inline)) void get_at(v16 *v, const float *p, int n)
{
    if (n >= 16) {
        *v = LD(p);
        return;
    }
    *v = (v16){0};
    for (int l = 0; l < n; l++)
        (*v)[l] = p[l];
}

/* Padded rows: the transforms read a row of the zero-padded plane through vectors of 32
 * columns, with no test for the edges: the image row is copied between zeros first (one copy
 * a row a channel and block: consecutive tile rows share two input rows, kept in their slot).
 * A tile at padded column 2t reads columns 2t .. 2t + 3: the even and the odd ones of the 32
 * from 2t, then of the 32 from 2t + 2, give its four columns for 16 tiles at once. */
#define EVENS 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30
#define ODDS 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31

/* four_columns: the columns 2t .. 2t + 3 of tiles t .. t + 15 of padded row r (from r + 2t). */
#define FOUR_COLUMNS(r, c0, c1, c2, c3)                                                             \
    do {                                                                                            \
        v16 a_ = LD(r), b_ = LD((r) + 16), c_ = LD((r) + 2), d_ = LD((r) + 18);                     \
        c0 = SHUFFLE(a_, b_, EVENS), c1 = SHUFFLE(a_, b_, ODDS);                                    \
        c2 = SHUFFLE(c_, d_, EVENS), c3 = SHUFFLE(c_, d_, ODDS);                                    \
    } while (0)

/* segments: tiles [t0, t0 + nt) cut at tile rows: the loops below walk them with (ty, tx0,
 * tx1, at: the index of tile tx0 in the block). */
#define FOR_SEGMENTS(q, t0, nt, ty, tx0, tx1, at)                                                   \
    for (int at = 0, ty, tx0, tx1; at < (nt) &&                                                     \
                                   (ty = ((t0) + at) / (q)->tw, tx0 = ((t0) + at) % (q)->tw,        \
                                   tx1 = (q)->tw - tx0 > (nt) - at ? tx0 + (nt) - at : (q)->tw, 1); \
         at += tx1 - tx0)

/* input_v: v (16, c, nt) = B^T d B for tiles [t0, t0 + nt) of one sample x (c, h, w); rows:
 * 5 row_floats. */
DDL__HOT static void input_v(const wino_geo *q, const float *x, int t0, int nt, float *v, float *rows)
{
#ifdef DDL__CLONES
    if (ddl__wino2_avx2(q)) {
        ddl__wino2_input_v_avx2(q, x, t0, nt, v, rows, row_floats(q));
        return;
    }
#endif
    size_t cnt = q->vs;
    int rl = row_floats(q);
    const float *zero = rows + 4 * rl;
    memset(rows, 0, (size_t)5 * rl * sizeof *rows);
    for (int ci = 0; ci < q->c; ci++) {
        const float *plane = x + (size_t)ci * q->h * q->w;
        int held[4] = {-1, -1, -1, -1}; /* the image row in each slot (row y in slot y & 3) */
        FOR_SEGMENTS(q, t0, nt, ty, tx0, tx1, at)
        {
            int n = tx1 - tx0;
            const float *r[4];
            for (int i = 0; i < 4; i++) {
                int y = 2 * ty - q->pad + i;
                r[i] = padded_row(plane, q->h, q->w, y, q->pad, rows + (y & 3) * rl, &held[y & 3], zero) + 2 * tx0;
            }
            float *dst = v + (size_t)ci * q->nt + at;
            for (int t = 0; t < n; t += 16) {
                v16 d00, d01, d02, d03, d10, d11, d12, d13, d20, d21, d22, d23, d30, d31, d32, d33;
                FOUR_COLUMNS(r[0] + 2 * t, d00, d01, d02, d03);
                FOUR_COLUMNS(r[1] + 2 * t, d10, d11, d12, d13);
                FOUR_COLUMNS(r[2] + 2 * t, d20, d21, d22, d23);
                FOUR_COLUMNS(r[3] + 2 * t, d30, d31, d32, d33);
                /* f = B^T d, column by column */
                v16 f00 = d00 - d20, f01 = d01 - d21, f02 = d02 - d22, f03 = d03 - d23;
                v16 f10 = d10 + d20, f11 = d11 + d21, f12 = d12 + d22, f13 = d13 + d23;
                v16 f20 = d20 - d10, f21 = d21 - d11, f22 = d22 - d12, f23 = d23 - d13;
                v16 f30 = d10 - d30, f31 = d11 - d31, f32 = d12 - d32, f33 = d13 - d33;
                /* f B, row by row */
                spill(dst + 0 * cnt + t, f00 - f02), spill(dst + 1 * cnt + t, f01 + f02);
                spill(dst + 2 * cnt + t, f02 - f01), spill(dst + 3 * cnt + t, f01 - f03);
                spill(dst + 4 * cnt + t, f10 - f12), spill(dst + 5 * cnt + t, f11 + f12);
                spill(dst + 6 * cnt + t, f12 - f11), spill(dst + 7 * cnt + t, f11 - f13);
                spill(dst + 8 * cnt + t, f20 - f22), spill(dst + 9 * cnt + t, f21 + f22);
                spill(dst + 10 * cnt + t, f22 - f21), spill(dst + 11 * cnt + t, f21 - f23);
                spill(dst + 12 * cnt + t, f30 - f32), spill(dst + 13 * cnt + t, f31 + f32);
                spill(dst + 14 * cnt + t, f32 - f31), spill(dst + 15 * cnt + t, f31 - f33);
            }
        }
    }
}

/* the output transform's interleave: lanes 0-7 (LO) or 8-15 (HI) of a and b, a pair each */
#define LO_PAIRS 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23
#define HI_PAIRS 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31

/* output_y: y (k, oh, ow) of one sample, tiles [t0, t0 + nt), = A^T m A (+ b) from m (16, k, nt)
 * (read up to 15 floats past its end: the rows after it); rows: 4 row_floats. */
DDL__HOT static void output_y(const wino_geo *q, const float *m, int t0, int nt, const float *b, float *y, float *rows)
{
#ifdef DDL__CLONES
    if (ddl__wino2_avx2(q)) {
        ddl__wino2_output_y_avx2(q, m, t0, nt, b, y);
        return;
    }
#endif
    size_t knt = q->ms;
    int rl = row_floats(q);
    for (int ko = 0; ko < q->k; ko++) {
        float *plane = y + (size_t)ko * q->oh * q->ow, bias = b ? b[ko] : 0.0f;
        FOR_SEGMENTS(q, t0, nt, ty, tx0, tx1, at)
        {
            int n = tx1 - tx0;
            const float *s = m + (size_t)ko * q->nt + at;
            float *y0 = rows, *y1 = rows + rl, *y2 = rows + 2 * rl, *y3 = rows + 3 * rl;
            float *row0 = plane + (size_t)(2 * ty) * q->ow + 2 * tx0, *row1 = row0 + q->ow;
            int two = 2 * ty + 1 < q->oh;            /* the tile's second row is inside */
            int full = 2 * tx1 <= q->ow ? n : n - 1; /* an odd width: the last tile's second column is outside */
            for (int t = 0; t < n; t += 16) {
                v16 r00 = LD(s + 0 * knt + t) + LD(s + 4 * knt + t) + LD(s + 8 * knt + t);
                v16 r01 = LD(s + 1 * knt + t) + LD(s + 5 * knt + t) + LD(s + 9 * knt + t);
                v16 r02 = LD(s + 2 * knt + t) + LD(s + 6 * knt + t) + LD(s + 10 * knt + t);
                v16 r03 = LD(s + 3 * knt + t) + LD(s + 7 * knt + t) + LD(s + 11 * knt + t);
                v16 r10 = LD(s + 4 * knt + t) - LD(s + 8 * knt + t) - LD(s + 12 * knt + t);
                v16 r11 = LD(s + 5 * knt + t) - LD(s + 9 * knt + t) - LD(s + 13 * knt + t);
                v16 r12 = LD(s + 6 * knt + t) - LD(s + 10 * knt + t) - LD(s + 14 * knt + t);
                v16 r13 = LD(s + 7 * knt + t) - LD(s + 11 * knt + t) - LD(s + 15 * knt + t);
                v16 e0 = r00 + r01 + r02 + bias, o0 = r01 - r02 - r03 + bias;
                v16 e1 = r10 + r11 + r12 + bias, o1 = r11 - r12 - r13 + bias;
                if (t + 16 <= full) { /* 16 whole tiles: each row's columns interleaved, two vectors of 8 pairs */
                    *(v16u *)(void *)(row0 + 2 * t) = SHUFFLE(e0, o0, LO_PAIRS);
                    *(v16u *)(void *)(row0 + 2 * t + 16) = SHUFFLE(e0, o0, HI_PAIRS);
                    if (two) {
                        *(v16u *)(void *)(row1 + 2 * t) = SHUFFLE(e1, o1, LO_PAIRS);
                        *(v16u *)(void *)(row1 + 2 * t + 16) = SHUFFLE(e1, o1, HI_PAIRS);
                    }
                    continue;
                }
                /* the segment's last vector: through the rows, column by column up to the edge */
                *(v16u *)(void *)y0 = e0, *(v16u *)(void *)y1 = o0, *(v16u *)(void *)y2 = e1, *(v16u *)(void *)y3 = o1;
                for (int i = 0; i < 1 + two; i++) {
                    float *row = i ? row1 : row0;
                    const float *ev = i ? y2 : y0, *od = i ? y3 : y1;
                    for (int l = 0; t + l < full; l++)
                        row[2 * (t + l)] = ev[l], row[2 * (t + l) + 1] = od[l];
                    if (full < n)
                        row[2 * full] = ev[full - t];
                }
            }
        }
    }
}

/* grad_dy: e (16, k, nt) = A g A^T of each 2x2 block g of dy (k, oh, ow) (zeros past its edge),
 * tiles [t0, t0 + nt); rows: 3 row_floats. */
DDL__HOT static void grad_dy(const wino_geo *q, const float *dy, int t0, int nt, float *e, float *rows)
{
#ifdef DDL__CLONES
    if (ddl__wino2_avx2(q)) {
        ddl__wino2_grad_dy_avx2(q, dy, t0, nt, e);
        return;
    }
#endif
    size_t knt = q->ms;
    int rl = row_floats(q);
    const float *zero = rows + 2 * rl;
    memset(rows, 0, (size_t)3 * rl * sizeof *rows);
    for (int ko = 0; ko < q->k; ko++) {
        const float *plane = dy + (size_t)ko * q->oh * q->ow;
        int held[2] = {-1, -1};
        FOR_SEGMENTS(q, t0, nt, ty, tx0, tx1, at)
        {
            int n = tx1 - tx0, oy = 2 * ty;
            const float *r0 = padded_row(plane, q->oh, q->ow, oy, 0, rows, &held[0], zero) + 2 * tx0;
            const float *r1 = padded_row(plane, q->oh, q->ow, oy + 1, 0, rows + rl, &held[1], zero) + 2 * tx0;
            float *d = e + (size_t)ko * q->nt + at;
            for (int t = 0; t < n; t += 16) {
                v16 a0 = LD(r0 + 2 * t), b0 = LD(r0 + 2 * t + 16), a1 = LD(r1 + 2 * t), b1 = LD(r1 + 2 * t + 16);
                v16 g00 = SHUFFLE(a0, b0, EVENS), g01 = SHUFFLE(a0, b0, ODDS);
                v16 g10 = SHUFFLE(a1, b1, EVENS), g11 = SHUFFLE(a1, b1, ODDS);
                /* a = A g: rows g0, g0 + g1, g0 - g1, -g1; then a A^T the same along the row */
                v16 a00 = g00, a01 = g01, a10 = g00 + g10, a11 = g01 + g11;
                v16 a20 = g00 - g10, a21 = g01 - g11, a30 = -g10, a31 = -g11;
                spill(d + 0 * knt + t, a00), spill(d + 1 * knt + t, a00 + a01);
                spill(d + 2 * knt + t, a00 - a01), spill(d + 3 * knt + t, -a01);
                spill(d + 4 * knt + t, a10), spill(d + 5 * knt + t, a10 + a11);
                spill(d + 6 * knt + t, a10 - a11), spill(d + 7 * knt + t, -a11);
                spill(d + 8 * knt + t, a20), spill(d + 9 * knt + t, a20 + a21);
                spill(d + 10 * knt + t, a20 - a21), spill(d + 11 * knt + t, -a21);
                spill(d + 12 * knt + t, a30), spill(d + 13 * knt + t, a30 + a31);
                spill(d + 14 * knt + t, a30 - a31), spill(d + 15 * knt + t, -a31);
            }
        }
    }
}

/* weights_out: dw (k, c, 3, 3) += G^T s G of each (k, c) of s (16, k, c). */
WINO_UNFUSED static void weights_out(int k, int c, const float *s, float *dw)
{
    size_t kc = (size_t)k * c;
    float in[16][WINO_GROUP];
    for (size_t e = 0; e < kc; e++) {
        size_t l = e % WINO_GROUP;
        if (l == 0) /* the next WINO_GROUP kernels' points, each point's read together */
            for (int i = 0; i < 16; i++)
                memcpy(in[i], s + (size_t)i * kc + e, (kc - e < WINO_GROUP ? kc - e : WINO_GROUP) * sizeof(float));
        float x[4][4], t[3][4];
        for (int i = 0; i < 16; i++)
            x[i / 4][i % 4] = in[i][l];
        for (int j = 0; j < 4; j++) { /* t = G^T x */
            t[0][j] = x[0][j] + 0.5f * (x[1][j] + x[2][j]);
            t[1][j] = 0.5f * (x[1][j] - x[2][j]);
            t[2][j] = 0.5f * (x[1][j] + x[2][j]) + x[3][j];
        }
        float *dst = dw + e * 9;
        for (int i = 0; i < 3; i++) { /* t G */
            dst[i * 3 + 0] += t[i][0] + 0.5f * (t[i][1] + t[i][2]);
            dst[i * 3 + 1] += 0.5f * (t[i][1] - t[i][2]);
            dst[i * 3 + 2] += 0.5f * (t[i][1] + t[i][2]) + t[i][3];
        }
    }
}

/* ---- the products ---- */

/* product: m (k, nt) = u (k, c) v (c, nt), plus m where add; u's rows ldu floats apart, v's ldv
 * and m's ldm: one point of the transform domain. Forward: v is the input transform's output as
 * it lies, so nothing is packed: blocks of 8 rows of m by 32 tiles in 16 vector registers, each
 * column of u broadcast (every ddl_gemm call packed v again, and at these sizes, c of 16 to 64,
 * that cost as much as the multiply-adds). Weight gradient: the sum over a block's tiles, dy's
 * transform times x's transposed (transpose_v), as the same outer products (ddl_gemm's dot
 * products of rows, the form it had before, ran at about 80 GFLOP/s on 64 x 64 x 64: each
 * element's 16 lanes added across at the end of a block). Lanes past nt are computed from
 * whatever lies there and never stored (v's rows are followed by WINO_SKEW floats of the task's
 * scratch, or padded to 32). Each element sums its c terms in order from 0, then adds m, on any
 * CPU path. */
#define PROD_ROWS 8

#ifdef DDL__CLONES
#include <immintrin.h>

/* PROD_AVX2: product's sums for ROWS rows of m at 16 tiles from v's column 0, in 8-float vectors
 * (AVX2's 16 registers: 6 rows x 2 vectors of sums, 2 of v's, one of u's; product's 16-float
 * blocks of 16 or 8 x 2 rows left their sums on the stack there, and ran U-Net's Winograd 5x
 * slower than its direct convolutions). Each element sums its c terms in order from 0 by fused
 * multiply-adds, then adds m where add: product's bits. n: the tiles (<= 16) stored. */
#define PROD_AVX2(NAME, ROWS)                                                                             \
    DDL__AVX2 static inline __attribute__((always_inline)) void NAME(int c, int n, const float *u, size_t ldu,  \
                                                              const float *v, size_t ldv, float *m,       \
                                                              size_t ldm, int add)                        \
    {                                                                                                     \
        __m256 a[ROWS][2];                                                                                \
        _Pragma("GCC unroll 8") for (int r = 0; r < ROWS; r++)                                            \
            a[r][0] = a[r][1] = _mm256_setzero_ps();                                                      \
        for (int ci = 0; ci < c; ci++) {                                                                  \
            __m256 x0 = _mm256_loadu_ps(v + (size_t)ci * ldv), x1 = _mm256_loadu_ps(v + (size_t)ci * ldv + 8); \
            _Pragma("GCC unroll 8") for (int r = 0; r < ROWS; r++) {                                      \
                __m256 s = _mm256_broadcast_ss(u + (size_t)r * ldu + ci);                                 \
                a[r][0] = _mm256_fmadd_ps(s, x0, a[r][0]);                                                \
                a[r][1] = _mm256_fmadd_ps(s, x1, a[r][1]);                                                \
            }                                                                                             \
        }                                                                                                 \
        _Pragma("GCC unroll 8") for (int r = 0; r < ROWS; r++)                                            \
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {                                         \
                int lanes = n - 8 * h > 8 ? 8 : n - 8 * h;                                                \
                float *row = m + (size_t)r * ldm + 8 * h;                                                 \
                if (lanes == 8) {                                                                         \
                    _mm256_storeu_ps(row, add ? _mm256_add_ps(a[r][h], _mm256_loadu_ps(row)) : a[r][h]);  \
                } else if (lanes > 0) { /* a row's end: the next floats are another row's */              \
                    float t[8] = {0};                                                                     \
                    memcpy(t, row, add ? (size_t)lanes * sizeof *t : 0);                                  \
                    _mm256_storeu_ps(t, add ? _mm256_add_ps(a[r][h], _mm256_loadu_ps(t)) : a[r][h]);      \
                    memcpy(row, t, (size_t)lanes * sizeof *t);                                            \
                }                                                                                         \
            }                                                                                             \
    }

PROD_AVX2(prod_avx2_6, 6)
PROD_AVX2(prod_avx2_4, 4)
PROD_AVX2(prod_avx2_3, 3)
PROD_AVX2(prod_avx2_2, 2)
PROD_AVX2(prod_avx2_1, 1)

/* rows_after: how many rows the next block takes when rem are left: 6 while more than 8 remain,
 * then blocks of 4 or 3 rather than single rows. A block of one row has 2 chains of sums, each
 * multiply-add waiting for the last (4 cycles on Zen 3): a quarter of the core's rate, and 16 out
 * channels (6 + 6 + 4 ones) had spent 40% of the product's time in the last 4 rows. */
static int rows_after(int rem)
{
    static const int first[9] = {0, 1, 2, 3, 4, 3, 6, 4, 4};
    return rem > 8 ? 6 : first[rem];
}

DDL__AVX2 static void product_avx2(int k, int c, int nt, const float *u, size_t ldu, const float *v, size_t ldv, float *m,
                            size_t ldm, int add)
{
    for (int k0 = 0, rows; k0 < k; k0 += rows) {
        rows = rows_after(k - k0);
        const float *ur = u + (size_t)k0 * ldu;
        float *mr = m + (size_t)k0 * ldm;
        for (int t = 0; t < nt; t += 16)
            switch (rows) {
            case 6: prod_avx2_6(c, nt - t, ur, ldu, v + t, ldv, mr + t, ldm, add); break;
            case 4: prod_avx2_4(c, nt - t, ur, ldu, v + t, ldv, mr + t, ldm, add); break;
            case 3: prod_avx2_3(c, nt - t, ur, ldu, v + t, ldv, mr + t, ldm, add); break;
            case 2: prod_avx2_2(c, nt - t, ur, ldu, v + t, ldv, mr + t, ldm, add); break;
            default: prod_avx2_1(c, nt - t, ur, ldu, v + t, ldv, mr + t, ldm, add); break;
            }
    }
}
#endif

DDL__HOT static void product(int k, int c, int nt, const float *u, size_t ldu, const float *v, size_t ldv, float *m,
                             size_t ldm, int add)
{
#ifdef DDL__CLONES
    if (ddl__avx2_tiles()) {
        product_avx2(k, c, nt, u, ldu, v, ldv, m, ldm, add);
        return;
    }
#endif
    int k0 = 0;
    if (nt <= 16) /* one vector of tiles (F(4x4,3x3) on 16x16 planes): 16 rows at a time */
        for (; k0 + 2 * PROD_ROWS <= k; k0 += 2 * PROD_ROWS) {
            const float *ur = u + (size_t)k0 * ldu;
            v16 a[2 * PROD_ROWS] = {0};
            for (int ci = 0; ci < c; ci++) {
                v16 x = LD(v + (size_t)ci * ldv);
#pragma GCC unroll 16
                for (int r = 0; r < 2 * PROD_ROWS; r++)
                    a[r] += ur[(size_t)r * ldu + ci] * x;
            }
#pragma GCC unroll 16
            for (int r = 0; r < 2 * PROD_ROWS; r++) {
                float *row = m + (size_t)(k0 + r) * ldm;
                if (add) {
                    v16 g;
                    get_at(&g, row, nt);
                    a[r] += g;
                }
                put(row, a[r], nt);
            }
        }
    for (; k0 + PROD_ROWS <= k; k0 += PROD_ROWS) {
        const float *ur = u + (size_t)k0 * ldu;
        for (int t = 0; t < nt; t += 32) {
            v16 a0[PROD_ROWS] = {0}, a1[PROD_ROWS] = {0};
            for (int ci = 0; ci < c; ci++) {
                v16 x0 = LD(v + (size_t)ci * ldv + t), x1 = LD(v + (size_t)ci * ldv + t + 16);
#pragma GCC unroll 8
                for (int r = 0; r < PROD_ROWS; r++) {
                    float s = ur[(size_t)r * ldu + ci];
                    a0[r] += s * x0;
                    a1[r] += s * x1;
                }
            }
#pragma GCC unroll 8
            for (int r = 0; r < PROD_ROWS; r++) {
                float *row = m + (size_t)(k0 + r) * ldm + t;
                if (add) {
                    v16 g;
                    get_at(&g, row, nt - t);
                    a0[r] += g;
                    if (nt - t > 16) {
                        get_at(&g, row + 16, nt - t - 16);
                        a1[r] += g;
                    }
                }
                put(row, a0[r], nt - t);
                if (nt - t > 16)
                    put(row + 16, a1[r], nt - t - 16);
            }
        }
    }
    for (; k0 < k; k0++) /* the rows past the last block of 8 */
        for (int t = 0; t < nt; t += 16) {
            v16 a = {0};
            for (int ci = 0; ci < c; ci++)
                a += u[(size_t)k0 * ldu + ci] * LD(v + (size_t)ci * ldv + t);
            float *row = m + (size_t)k0 * ldm + t;
            if (add) {
                v16 g;
                get_at(&g, row, nt - t);
                a += g;
            }
            put(row, a, nt - t);
        }
}

/* transpose_v: vt (nt, ldvt) = v (c, nt) transposed, v's rows ldv floats apart: 16 channels by 16
 * tiles at a time in registers (the unpacks of pairs of floats, then of pairs of pairs, then two
 * rounds of 128-bit lane shuffles: gemm_bf16_avx512.c's transpose16), the edges one float at a
 * time. Every loop is unrolled, so r and t live in registers. */
#ifdef DDL__CLONES
/* transpose_avx2: transpose_v in 8 x 8 blocks of 8-float vectors (unpacks, shuffles, then 128-bit
 * lane swaps), for AVX2: gcc's AVX2 build of the 16-float permutes below took 6.4% of U-Net's
 * run with --conv winograd on an AMD EPYC Zen 3. The edges one float at a time. */
DDL__AVX2 static void transpose_avx2(int c, int nt, const float *v, size_t ldv, float *vt, size_t ldvt)
{
    int c8 = c / 8 * 8, n8 = nt / 8 * 8;
    for (int c0 = 0; c0 < c8; c0 += 8)
        for (int t0 = 0; t0 < n8; t0 += 8) {
            __m256 r[8], t[8], s[8];
            for (int i = 0; i < 8; i++)
                r[i] = _mm256_loadu_ps(v + (size_t)(c0 + i) * ldv + t0);
            for (int i = 0; i < 8; i += 2) {
                t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
                t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
            }
            for (int i = 0; i < 8; i += 4) {
                s[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
                s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
                s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
                s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
            }
            for (int i = 0; i < 4; i++) { /* s[i]: columns i and i + 4 of rows 0-3, s[i + 4] of rows 4-7 */
                _mm256_storeu_ps(vt + (size_t)(t0 + i) * ldvt + c0, _mm256_permute2f128_ps(s[i], s[i + 4], 0x20));
                _mm256_storeu_ps(vt + (size_t)(t0 + i + 4) * ldvt + c0, _mm256_permute2f128_ps(s[i], s[i + 4], 0x31));
            }
        }
    for (int ci = 0; ci < c; ci++) /* the edges */
        for (int t = ci < c8 ? n8 : 0; t < nt; t++)
            vt[(size_t)t * ldvt + ci] = v[(size_t)ci * ldv + t];
}
#endif

/* transpose_v's rounds: 32-bit, 64-bit and 128-bit pairs of two vectors */
#define LO32 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29
#define HI32 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31
#define LO64 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29
#define HI64 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31
#define EV128 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27
#define OD128 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31

DDL__HOT static void transpose_v(int c, int nt, const float *v, size_t ldv, float *vt, size_t ldvt)
{
#ifdef DDL__CLONES
    if (ddl__avx2_tiles()) {
        transpose_avx2(c, nt, v, ldv, vt, ldvt);
        return;
    }
#endif
    int c16 = c / 16 * 16, n16 = nt / 16 * 16;
    for (int c0 = 0; c0 < c16; c0 += 16)
        for (int t0 = 0; t0 < n16; t0 += 16) {
            v16 r[16], t[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++)
                r[i] = LD(v + (size_t)(c0 + i) * ldv + t0);
#pragma GCC unroll 8
            for (int i = 0; i < 16; i += 2) {
                t[i] = SHUFFLE(r[i], r[i + 1], LO32);
                t[i + 1] = SHUFFLE(r[i], r[i + 1], HI32);
            }
#pragma GCC unroll 4
            for (int i = 0; i < 16; i += 4) {
                r[i] = SHUFFLE(t[i], t[i + 2], LO64);
                r[i + 1] = SHUFFLE(t[i], t[i + 2], HI64);
                r[i + 2] = SHUFFLE(t[i + 1], t[i + 3], LO64);
                r[i + 3] = SHUFFLE(t[i + 1], t[i + 3], HI64);
            }
#pragma GCC unroll 2
            for (int h = 0; h < 16; h += 8)
#pragma GCC unroll 4
                for (int i = 0; i < 4; i++) {
                    t[h + i] = SHUFFLE(r[h + i], r[h + i + 4], EV128);
                    t[h + i + 4] = SHUFFLE(r[h + i], r[h + i + 4], OD128);
                }
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) {
                *(v16u *)(void *)(vt + (size_t)(t0 + i) * ldvt + c0) = SHUFFLE(t[i], t[i + 8], EV128);
                *(v16u *)(void *)(vt + (size_t)(t0 + i + 8) * ldvt + c0) = SHUFFLE(t[i], t[i + 8], OD128);
            }
        }
    for (int ci = 0; ci < c; ci++) /* the edges */
        for (int t = ci < c16 ? n16 : 0; t < nt; t++)
            vt[(size_t)t * ldvt + ci] = v[(size_t)ci * ldv + t];
}

/* ---- passes ---- */

typedef struct wino_job {
    wino_geo q;
    const float *x, *u, *b, *dy;
    float *y, *parts;
} wino_job;

/* The transforms of a tile size m: F(2x2,3x3)'s above, F(4x4,3x3)'s in winograd_f4.c. */
static void make_u(int m, int k, int c, const float *w, int flip, float *u)
{
    if (m == 4)
        ddl__wino4_weights_u(k, c, w, flip, u);
    else
        weights_u(k, c, w, flip, u);
}

static void take_out_dw(int m, int k, int c, const float *s, float *dw)
{
    if (m == 4)
        ddl__wino4_weights_out(k, c, s, dw);
    else
        weights_out(k, c, s, dw);
}

static void make_v(const wino_geo *q, const float *x, int t0, int nt, float *v, float *rows)
{
    if (q->m == 4)
        ddl__wino4_input_v(q, x, t0, nt, v, rows);
    else
        input_v(q, x, t0, nt, v, rows);
}

/* Tasks: F(2x2,3x3)'s blocks are one sample's tiles (q->blocks a sample); F(4x4,3x3)'s run
 * through the batch's tiles (q->blocks in all), so a 16x16 plane's 16 tiles do not make a block
 * alone. block_of: block b's sample (whose tensors the transforms get; 0 for F(4x4,3x3), whose
 * transforms take the batch and tiles counted through it), first tile and tile count. */
static int n_blocks(const wino_geo *q) { return q->m == 4 ? q->blocks : q->n * q->blocks; }

static void block_of(const wino_geo *q, int b, int *n, int *t0, int *nt)
{
    int tiles = q->m == 4 ? q->n * q->th * q->tw : q->th * q->tw;
    *n = q->m == 4 ? 0 : b / q->blocks;
    *t0 = (q->m == 4 ? b : b % q->blocks) * q->nt;
    *nt = tiles - *t0 < q->nt ? tiles - *t0 : q->nt;
}

/* conv_task: task i = block i: its outputs, in scratch. */
static void conv_task(void *ctx, int i, float *ws)
{
    const wino_job *j = ctx;
    const wino_geo *q = &j->q;
    int n, t0, nt;
    block_of(q, i, &n, &t0, &nt);
    float *v = ws, *m = v + (size_t)q->pts * q->vs, *rows = m + (size_t)q->pts * q->ms;
    const float *x = j->x + (size_t)n * q->c * q->h * q->w;
    float *y = j->y + (size_t)n * q->k * q->oh * q->ow;
    make_v(q, x, t0, nt, v, rows);
    size_t uk = (size_t)q->k * q->c, vk = q->vs, mk = q->ms;
    for (int xi = 0; xi < q->pts; xi++)
        product(q->k, q->c, nt, j->u + xi * uk, (size_t)q->c, v + xi * vk, (size_t)q->nt, m + xi * mk, (size_t)q->nt,
                0);
    if (q->m == 4)
        ddl__wino4_output_y(q, m, t0, nt, j->b, y);
    else
        output_y(q, m, t0, nt, j->b, y, rows);
}

/* run_conv: y = the convolution of x (q) with the kernels u, b added (may be NULL). */
static void run_conv(const wino_geo *q, const float *x, const float *u, const float *b, float *y, float *ws)
{
    wino_job j = {*q, x, u, b, NULL, y, NULL};
    ddl__parallel_ws(n_blocks(q), conv_task, &j, ws);
}

void ddl__wino_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y, float *ws)
{
    int m = tile(g);
    wino_geo q = wino_view(g->batch, g->in_c, g->in_h, g->in_w, g->out_c, g->pad, m, WINO_BUDGET);
    make_u(m, g->out_c, g->in_c, w, 0, ws);
    run_conv(&q, x, ws, b, y, ws + (size_t)q.pts * g->in_c * g->out_c);
}

/* outer_pays: the weight gradient's products as outer products over a transposed V (transpose_v,
 * then product) rather than ddl_gemm's dot products of rows: from 32 input channels (fewer leave
 * most of product's 32 lanes empty: 16 -> 16 at 64x64, 5.1 -> 8.2 ms), from 16 for F(4x4,3x3),
 * whose 36 products of 16 channels take product's 16-row kernel (16 -> 16 at 64x64: 10.1 -> 2.7-3.8
 * ms). Batch 32, one thread,
 * tools/bench/winograd_layers.c, alternated runs: the cnn's 64 -> 64 at 16x16 4.2-4.4 -> 3.4 ms;
 * 32 -> 64 2.7 -> 2.0-2.1; 32 -> 32 at 32x32 3.8-3.9 -> 3.2-3.75; U-Net's 64 -> 64 at 8x8
 * 1.7 -> 1.45. */
static int outer_pays(const wino_geo *q) { return q->c >= (q->m == 4 ? WINO4_DW_MIN : WINO_DW_MIN_IN); }

/* dw_task: part i (pts, k, c) = the sum over its blocks, in order, of DY V^T: F(2x2,3x3)'s of
 * samples [i n / P, (i + 1) n / P), F(4x4,3x3)'s blocks [i B / P, (i + 1) B / P) of the batch's. */
static void dw_task(void *ctx, int i, float *ws)
{
    const wino_job *j = ctx;
    const wino_geo *q = &j->q;
    long span = q->m == 4 ? q->blocks : q->n, per = q->m == 4 ? 1 : q->blocks;
    int b0 = (int)(i * span / WINO_DW_PARTS * per), b1 = (int)((i + 1) * span / WINO_DW_PARTS * per);
    size_t uk = (size_t)q->k * q->c, vk = q->vs, mk = q->ms;
    float *part = j->parts + (size_t)i * q->pts * uk;
    size_t ldvt = vt_stride(q);
    float *v = ws, *e = v + (size_t)q->pts * vk, *vt = e + (size_t)q->pts * mk, *rows = vt + (size_t)q->nt * ldvt;
    int outer = outer_pays(q);
    if (b0 == b1)
        memset(part, 0, (size_t)q->pts * uk * sizeof *part);
    for (int blk = b0; blk < b1; blk++) {
        int n, t0, nt, add = blk > b0;
        block_of(q, blk, &n, &t0, &nt);
        const float *x = j->x + (size_t)n * q->c * q->h * q->w, *dy = j->dy + (size_t)n * q->k * q->oh * q->ow;
        make_v(q, x, t0, nt, v, rows);
        if (q->m == 4)
            ddl__wino4_grad_dy(q, dy, t0, nt, e);
        else
            grad_dy(q, dy, t0, nt, e, rows);
        for (int xi = 0; xi < q->pts; xi++)
            if (outer) {
                transpose_v(q->c, nt, v + xi * vk, (size_t)q->nt, vt, ldvt);
                product(q->k, nt, q->c, e + xi * mk, (size_t)q->nt, vt, ldvt, part + xi * uk, (size_t)q->c, add);
            } else {
                ddl_gemm(0, 1, q->k, q->c, nt, 1.0f, e + xi * mk, q->nt, v + xi * vk, q->nt, add ? 1.0f : 0.0f,
                         part + xi * uk, q->c);
            }
    }
}

void ddl__wino_backward(const ddl_conv2d *g, const float *x, const float *w, const float *dy, float *dx, float *dw,
                        float *ws)
{
    int oh = g->in_h + 2 * g->pad - 2, ow = g->in_w + 2 * g->pad - 2, m = tile(g);
    if (dw) {
        wino_geo d = wino_view(g->batch, g->in_c, g->in_h, g->in_w, g->out_c, g->pad, m, WINO_DW_BUDGET);
        size_t u = (size_t)d.pts * g->in_c * g->out_c;
        wino_job j = {d, x, NULL, NULL, dy, NULL, ws};
        ddl__parallel_ws(WINO_DW_PARTS, dw_task, &j, ws + WINO_DW_PARTS * u);
        for (int i = 1; i < WINO_DW_PARTS; i++) /* the parts in order: the same sums on any thread count */
            for (size_t e = 0; e < u; e++)
                ws[e] += ws[(size_t)i * u + e];
        take_out_dw(m, g->out_c, g->in_c, ws, dw);
    }
    if (dx) {
        wino_geo b = wino_view(g->batch, g->out_c, oh, ow, g->in_c, 2 - g->pad, m, WINO_BUDGET);
        make_u(m, g->in_c, g->out_c, w, 1, ws);
        run_conv(&b, dy, ws, NULL, dx, ws + (size_t)b.pts * g->in_c * g->out_c);
    }
}
