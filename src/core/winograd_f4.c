/* winograd_f4.c - the transforms of Winograd F(4x4,3x3) (Lavin and Gray, 2015): a 4x4 block of
 * outputs ("tile") from a 6x6 block d of the padded input, y = A^T [(G w G^T) . (B^T d B)] A,
 * with
 *   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1],
 *   G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1],
 *   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]:
 * 36 multiplies for 16 outputs (F(2x2,3x3): 16 for 4), so 36 products per block where F(2x2)
 * has 16 (winograd.c runs them, and the passes). The weight gradient is G^T [sum over tiles
 * (A dy A^T) . (B^T d B)] G. Its larger coefficients make it less exact than F(2x2,3x3): the
 * error is measured in tests/test_winograd.c and docs/TRAINING.md ("Winograd").
 *
 * The vectors hold 16 tiles: a band of 4 tile rows of 4 (a 16x16 plane), 2 of 8 (32x32) or 1 row
 * of 16 (64 columns and wider), so a sample of a 16x16 plane fills a vector. The planes are whole
 * tiles (ddl__wino4_fits): no edges to cut, every store a whole vector. A band's tiles are its
 * lanes in row order; a sample's tiles go band by band.
 *
 * Each tile row's data is 4 vectors (S0..S3: the band's rows of 16 columns, or one row's 64),
 * taken apart into the tiles' columns by two rounds of two-vector permutes (gather) and put back
 * together the same way (scatter). The multipliers in the vector code are powers of two, so a
 * fused multiply-add gives the same bits as a multiply and an add: every CPU path agrees. */
#include "winograd.h"

#define WINO4_SLOTS 18 /* padded rows a band reads: 4 tile rows of 4, plus 2 */

/* a band: its sample, its first tile row and column, its tile rows R and columns C (R C = 16) */
typedef struct band {
    int n, ty0, tx0, rows, cols;
} band;

/* band_of: the band of the batch's tiles t .. t + 15 (t a multiple of 16: the tiles are counted
 * through the batch, a sample's bands in order) */
static band band_of(const wino_geo *q, int t)
{
    int cols = q->tw < 16 ? q->tw : 16, per_row = q->tw / cols, per_sample = q->th * q->tw / 16, b = t / 16;
    int in = b % per_sample;
    band r = {b / per_sample, (in / per_row) * (16 / cols), (in % per_row) * cols, 16 / cols, cols};
    return r;
}

/* source k (0..3) of a band's tile row: its tile row (ry) and its 16 columns (off) */
static inline int src_row(const band *d, int k) { return k * d->rows / 4; }
static inline int src_off(const band *d, int k) { return 16 * (k % (4 / d->rows)); }

int ddl__wino4_fits(int oh, int ow)
{
    if (oh < 4 || ow < 4 || oh % 4 || ow % 4)
        return 0;
    int th = oh / 4, tw = ow / 4;
    if (tw != 4 && tw != 8 && tw % 16)
        return 0;
    return th % (16 / (tw < 16 ? tw : 16)) == 0;
}

/* row_len: a padded row (4 tw + 2 columns) and the over-read of its last sources */
static int row_len(const wino_geo *q) { return (4 * q->tw + 2 + 32 + 15) / 16 * 16; }

size_t ddl__wino4_rows(const wino_geo *q) { return (size_t)(WINO4_SLOTS + 1) * row_len(q); }

/* the permutes: lane j of a source pair's first round holds column c of tile j % 8 (P: c = j / 8,
 * Q: 2 + j / 8); the second round joins the low or high halves of two */
#define PICK_P 0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29
#define PICK_Q 2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31
#define LOWS 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23
#define HIGHS 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31
/* the scatter's second round: a source vector's 16 columns back from P and Q */
#define PUT_LO 0, 8, 16, 24, 1, 9, 17, 25, 2, 10, 18, 26, 3, 11, 19, 27
#define PUT_HI 4, 12, 20, 28, 5, 13, 21, 29, 6, 14, 22, 30, 7, 15, 23, 31

/* gather: the columns c0..c3 of the band's 16 tiles (the lanes) from the sources s[0..3]; with
 * six, c4 and c5 too (columns 4 and 5: the sources read 4 floats on) */
#define GATHER4(s, c0, c1, c2, c3)                                                               \
    do {                                                                                         \
        v16 s0_ = LD((s)[0]), s1_ = LD((s)[1]), s2_ = LD((s)[2]), s3_ = LD((s)[3]);              \
        v16 p01_ = SHUFFLE(s0_, s1_, PICK_P), p23_ = SHUFFLE(s2_, s3_, PICK_P);                  \
        v16 q01_ = SHUFFLE(s0_, s1_, PICK_Q), q23_ = SHUFFLE(s2_, s3_, PICK_Q);                  \
        c0 = SHUFFLE(p01_, p23_, LOWS), c1 = SHUFFLE(p01_, p23_, HIGHS);                         \
        c2 = SHUFFLE(q01_, q23_, LOWS), c3 = SHUFFLE(q01_, q23_, HIGHS);                         \
    } while (0)

#define GATHER6(s, c0, c1, c2, c3, c4, c5)                                                        \
    do {                                                                                          \
        GATHER4(s, c0, c1, c2, c3);                                                               \
        v16 t0_ = LD((s)[0] + 4), t1_ = LD((s)[1] + 4), t2_ = LD((s)[2] + 4), t3_ = LD((s)[3] + 4); \
        v16 u01_ = SHUFFLE(t0_, t1_, PICK_P), u23_ = SHUFFLE(t2_, t3_, PICK_P);                   \
        c4 = SHUFFLE(u01_, u23_, LOWS), c5 = SHUFFLE(u01_, u23_, HIGHS);                          \
    } while (0)

/* B^T along 6 values: 4 d0 - 5 d2 + d4, ..., 4 d1 - 5 d3 + d5, with multipliers 2 and 4 only */
#define BT6(d, v)                                                                               \
    do {                                                                                        \
        __typeof__((d)[0]) a_ = (d)[4] - 4.0f * (d)[2], b_ = (d)[3] - 4.0f * (d)[1];            \
        __typeof__((d)[0]) c_ = (d)[4] - (d)[2], e_ = 2.0f * ((d)[3] - (d)[1]);                 \
        (v)[0] = 4.0f * ((d)[0] - (d)[2]) + c_, (v)[1] = a_ + b_, (v)[2] = a_ - b_;             \
        (v)[3] = c_ + e_, (v)[4] = c_ - e_, (v)[5] = 4.0f * ((d)[1] - (d)[3]) + ((d)[5] - (d)[3]); \
    } while (0)

/* A^T along 6 values to 4 */
#define AT6(m, y)                                                                                \
    do {                                                                                         \
        __typeof__((m)[0]) a_ = (m)[1] + (m)[2], b_ = (m)[1] - (m)[2], c_ = (m)[3] + (m)[4];     \
        __typeof__((m)[0]) d_ = (m)[3] - (m)[4];                                                 \
        (y)[0] = (m)[0] + a_ + c_, (y)[1] = b_ + 2.0f * d_, (y)[2] = a_ + 4.0f * c_;             \
        (y)[3] = b_ + 8.0f * d_ + (m)[5];                                                        \
    } while (0)

/* A along 4 values to 6 (the weight gradient's dy) */
#define A4(g, a)                                                                                 \
    do {                                                                                         \
        __typeof__((g)[0]) p_ = (g)[0] + (g)[2], q_ = (g)[1] + (g)[3];                           \
        __typeof__((g)[0]) r_ = (g)[0] + 4.0f * (g)[2], s_ = 2.0f * (g)[1] + 8.0f * (g)[3];      \
        (a)[0] = (g)[0], (a)[1] = p_ + q_, (a)[2] = p_ - q_, (a)[3] = r_ + s_, (a)[4] = r_ - s_; \
        (a)[5] = (g)[3];                                                                         \
    } while (0)

/* ---- AVX2 ----
 * The code above is in 16-float vectors, for AVX-512; gcc's AVX2 build of it (the x86-64-v3
 * clone) emulates each two-vector permute of 16 floats by several and keeps h's 36 vectors of 16
 * floats on the stack: on an AMD EPYC without AVX-512 (Zen 3) input_v took 17% of U-Net's run
 * with --conv winograd. Here a band goes as two halves of 8 tiles (sources 0 and 1, then 2 and
 * 3: tiles 0-7 and 8-15) in 8-float vectors: a tile's 4 columns are one 128-bit load, the tiles
 * i and i + 4 of a half share a vector, and a 4 x 4 transpose in each 128-bit lane gives the
 * columns in tile order. The same operations on each tile as above: the same bits. They run where
 * the AVX2 tiles do (ddl__avx2_tiles). */
#ifdef DDL__CLONES
#define WINO4_AVX2 1
#define WINO4_AVX2_ON() ddl__avx2_tiles()

/* load_pair: [tile i's 4 floats at a + 4 i | tile i + 4's at b + 4 i] */
WINO_AVX2_INLINE __m256 load_pair(const float *a, const float *b, int i)
{
    return ddl__wino_pair(a + 4 * i, b + 4 * i);
}

/* gather8: columns 0 .. n - 1 (4 or 6) of the 8 tiles whose columns start at a (tiles 0-3) and b
 * (tiles 4-7), tile j in lane j; columns 4 and 5 are read 4 floats on, as GATHER6 reads them */
WINO_AVX2_INLINE void gather8(const float *a, const float *b, int n, __m256 *c)
{
    __m256 r[4];
    for (int i = 0; i < 4; i++)
        r[i] = load_pair(a, b, i);
    ddl__wino_transpose4(r, c);
    if (n == 6) {
        __m256 u[4], w[4];
        for (int i = 0; i < 4; i++)
            u[i] = load_pair(a + 4, b + 4, i);
        ddl__wino_transpose4(u, w);
        c[4] = w[0], c[5] = w[1];
    }
}

/* input_band_avx2: input_v's transform of band d, whose padded rows are row[], into dst */
DDL__AVX2 static void input_band_avx2(const band *d, const float *const *row, float *dst, size_t cnt)
{
    for (int hf = 0; hf < 2; hf++) {
        __m256 h[6][6];
        for (int r = 0; r < 6; r++) {
            __m256 c[6];
            gather8(row[4 * src_row(d, 2 * hf) + r] + src_off(d, 2 * hf),
                    row[4 * src_row(d, 2 * hf + 1) + r] + src_off(d, 2 * hf + 1), 6, c);
            BT6(c, h[r]);
        }
        for (int j = 0; j < 6; j++) {
            __m256 col[6] = {h[0][j], h[1][j], h[2][j], h[3][j], h[4][j], h[5][j]}, o[6];
            BT6(col, o);
            for (int i = 0; i < 6; i++)
                _mm256_storeu_ps(dst + (size_t)(i * 6 + j) * cnt + 8 * hf, o[i]);
        }
    }
}

/* output_band_avx2: output_y's A^T m A (+ bias) of band d, from s (points knt floats apart), into
 * the plane */
DDL__AVX2 static void output_band_avx2(const wino_geo *q, const band *d, const float *s, size_t knt, float bias,
                                       float *plane)
{
    for (int hf = 0; hf < 2; hf++) {
        __m256 t[4][6];
        for (int j = 0; j < 6; j++) {
            __m256 col[6], o[4];
            for (int i = 0; i < 6; i++)
                col[i] = _mm256_loadu_ps(s + (size_t)(i * 6 + j) * knt + 8 * hf);
            AT6(col, o);
            for (int r = 0; r < 4; r++)
                t[r][j] = o[r];
        }
        for (int r = 0; r < 4; r++) {
            __m256 o[4], p[4];
            AT6(t[r], o);
            for (int c = 0; c < 4; c++)
                o[c] += bias;
            ddl__wino_transpose4(o, p); /* p[i]: [tile i's 4 outputs | tile i + 4's] */
            float *a = plane + (size_t)(4 * (d->ty0 + src_row(d, 2 * hf)) + r) * q->ow + 4 * d->tx0 + src_off(d, 2 * hf);
            float *b = plane + (size_t)(4 * (d->ty0 + src_row(d, 2 * hf + 1)) + r) * q->ow + 4 * d->tx0 +
                       src_off(d, 2 * hf + 1);
            for (int i = 0; i < 4; i++) {
                _mm_storeu_ps(a + 4 * i, _mm256_castps256_ps128(p[i]));
                _mm_storeu_ps(b + 4 * i, _mm256_extractf128_ps(p[i], 1));
            }
        }
    }
}

/* grad_band_avx2: grad_dy's A g A^T of band d of the plane into dst */
DDL__AVX2 static void grad_band_avx2(const wino_geo *q, const band *d, const float *plane, float *dst, size_t knt)
{
    for (int hf = 0; hf < 2; hf++) {
        __m256 a[4][6];
        for (int r = 0; r < 4; r++) {
            __m256 g[4];
            gather8(plane + (size_t)(4 * (d->ty0 + src_row(d, 2 * hf)) + r) * q->ow + 4 * d->tx0 + src_off(d, 2 * hf),
                    plane + (size_t)(4 * (d->ty0 + src_row(d, 2 * hf + 1)) + r) * q->ow + 4 * d->tx0 +
                        src_off(d, 2 * hf + 1),
                    4, g);
            A4(g, a[r]);
        }
        for (int j = 0; j < 6; j++) {
            __m256 col[4] = {a[0][j], a[1][j], a[2][j], a[3][j]}, o[6];
            A4(col, o);
            for (int i = 0; i < 6; i++)
                _mm256_storeu_ps(dst + (size_t)(i * 6 + j) * knt + 8 * hf, o[i]);
        }
    }
}
#else
#define WINO4_AVX2_ON() 0
#endif

/* input_v: v (36, c, nt) = B^T d B for tiles [t0, t0 + nt) (whole bands, counted through the
 * batch) of x (n, c, h, w); rows: ddl__wino4_rows floats. */
DDL__HOT void ddl__wino4_input_v(const wino_geo *q, const float *x, int t0, int nt, float *v, float *rows)
{
    size_t cnt = q->vs;
    int rl = row_len(q), avx2 = WINO4_AVX2_ON();
    (void)avx2;
    const float *zero = rows + WINO4_SLOTS * rl;
    memset(rows, 0, ddl__wino4_rows(q) * sizeof *rows);
    for (int ci = 0; ci < q->c; ci++) {
        int held[WINO4_SLOTS]; /* the row in each slot, as sample h + image row */
        for (int i = 0; i < WINO4_SLOTS; i++)
            held[i] = -1;
        for (int at = 0; at < nt; at += 16) {
            band d = band_of(q, t0 + at);
            const float *plane = x + ((size_t)d.n * q->c + ci) * q->h * q->w, *row[WINO4_SLOTS];
            for (int p = 0; p < 4 * d.rows + 2; p++) { /* padded rows: the image's between zeros */
                int py = 4 * d.ty0 + p, y = py - q->pad, slot = py % WINO4_SLOTS, key = d.n * q->h + y;
                float *buf = rows + (size_t)slot * rl;
                if (y < 0 || y >= q->h) {
                    row[p] = zero + 4 * d.tx0;
                    continue;
                }
                if (held[slot] != key) {
                    memcpy(buf + q->pad, plane + (size_t)y * q->w, (size_t)q->w * sizeof *buf);
                    held[slot] = key;
                }
                row[p] = buf + 4 * d.tx0;
            }
            float *dst = v + (size_t)ci * q->nt + at;
#ifdef WINO4_AVX2
            if (avx2) {
                input_band_avx2(&d, row, dst, cnt);
                continue;
            }
#endif
            v16 h[6][6];
            for (int r = 0; r < 6; r++) {
                const float *s[4];
                for (int k = 0; k < 4; k++)
                    s[k] = row[4 * src_row(&d, k) + r] + src_off(&d, k);
                v16 c[6];
                GATHER6(s, c[0], c[1], c[2], c[3], c[4], c[5]);
                BT6(c, h[r]);
            }
            for (int j = 0; j < 6; j++) {
                v16 col[6] = {h[0][j], h[1][j], h[2][j], h[3][j], h[4][j], h[5][j]}, o[6];
                BT6(col, o);
                for (int i = 0; i < 6; i++)
                    spill(dst + (size_t)(i * 6 + j) * cnt, o[i]);
            }
        }
    }
}

/* output_y: y (n, k, oh, ow), tiles [t0, t0 + nt) (whole bands, counted through the batch), =
 * A^T m A (+ b) from m (36, k, nt). */
DDL__HOT void ddl__wino4_output_y(const wino_geo *q, const float *m, int t0, int nt, const float *b, float *y)
{
    size_t knt = q->ms;
    int avx2 = WINO4_AVX2_ON();
    (void)avx2;
    for (int ko = 0; ko < q->k; ko++) {
        float bias = b ? b[ko] : 0.0f;
        for (int at = 0; at < nt; at += 16) {
            band d = band_of(q, t0 + at);
            float *plane = y + ((size_t)d.n * q->k + ko) * q->oh * q->ow;
            const float *s = m + (size_t)ko * q->nt + at;
#ifdef WINO4_AVX2
            if (avx2) {
                output_band_avx2(q, &d, s, knt, bias, plane);
                continue;
            }
#endif
            v16 t[4][6];
            for (int j = 0; j < 6; j++) { /* A^T down each column */
                v16 col[6], o[4];
                for (int i = 0; i < 6; i++)
                    col[i] = LD(s + (size_t)(i * 6 + j) * knt);
                AT6(col, o);
                for (int r = 0; r < 4; r++)
                    t[r][j] = o[r];
            }
            for (int r = 0; r < 4; r++) { /* then along each row, and back into the plane's rows */
                v16 o[4];
                AT6(t[r], o);
                for (int c = 0; c < 4; c++)
                    o[c] += bias;
                v16 p01 = SHUFFLE(o[0], o[1], LOWS), p23 = SHUFFLE(o[0], o[1], HIGHS);
                v16 q01 = SHUFFLE(o[2], o[3], LOWS), q23 = SHUFFLE(o[2], o[3], HIGHS);
                v16 out[4] = {SHUFFLE(p01, q01, PUT_LO), SHUFFLE(p01, q01, PUT_HI),
                              SHUFFLE(p23, q23, PUT_LO), SHUFFLE(p23, q23, PUT_HI)};
                for (int k = 0; k < 4; k++) {
                    float *dst = plane + (size_t)(4 * (d.ty0 + src_row(&d, k)) + r) * q->ow + 4 * d.tx0 + src_off(&d, k);
                    *(v16u *)(void *)dst = out[k];
                }
            }
        }
    }
}

/* grad_dy: e (36, k, nt) = A g A^T of each 4x4 block g of dy (n, k, oh, ow), tiles [t0, t0 + nt)
 * (whole bands, counted through the batch). */
DDL__HOT void ddl__wino4_grad_dy(const wino_geo *q, const float *dy, int t0, int nt, float *e)
{
    size_t knt = q->ms;
    int avx2 = WINO4_AVX2_ON();
    (void)avx2;
    for (int ko = 0; ko < q->k; ko++) {
        for (int at = 0; at < nt; at += 16) {
            band d = band_of(q, t0 + at);
            const float *plane = dy + ((size_t)d.n * q->k + ko) * q->oh * q->ow;
            float *dst = e + (size_t)ko * q->nt + at;
#ifdef WINO4_AVX2
            if (avx2) {
                grad_band_avx2(q, &d, plane, dst, knt);
                continue;
            }
#endif
            v16 a[4][6];
            for (int r = 0; r < 4; r++) { /* A along each row */
                const float *s[4];
                for (int k = 0; k < 4; k++)
                    s[k] = plane + (size_t)(4 * (d.ty0 + src_row(&d, k)) + r) * q->ow + 4 * d.tx0 + src_off(&d, k);
                v16 g[4];
                GATHER4(s, g[0], g[1], g[2], g[3]);
                A4(g, a[r]);
            }
            for (int j = 0; j < 6; j++) { /* then down each column */
                v16 col[4] = {a[0][j], a[1][j], a[2][j], a[3][j]}, o[6];
                A4(col, o);
                for (int i = 0; i < 6; i++)
                    spill(dst + (size_t)(i * 6 + j) * knt, o[i]);
            }
        }
    }
}

/* G (6 x 3), in double: the weights' transforms are computed in double and rounded once */
static const double G4[6][3] = {{0.25, 0, 0},
                                {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                {0, 0, 1}};

/* weights_u: u (36, k, c) = G w G^T of each (k, c) kernel of w (k, c, 3, 3); flip: of w's flipped
 * kernel with the two channel axes swapped (as winograd.c's weights_u). */
WINO_UNFUSED void ddl__wino4_weights_u(int k, int c, const float *w, int flip, float *u)
{
    size_t kc = (size_t)k * c;
    for (size_t e0 = 0; e0 < kc; e0 += WINO_GROUP) {
        size_t n = kc - e0 < WINO_GROUP ? kc - e0 : WINO_GROUP;
        double g[9][WINO_GROUP] = {{0}}, t[6][3][WINO_GROUP];
        float out[36][WINO_GROUP];
        for (size_t l = 0; l < n; l++) { /* the group's kernels side by side, the loops below along them */
            size_t e = e0 + l, ko = e / (size_t)c, ci = e % (size_t)c;
            const float *src = flip ? w + (ci * (size_t)k + ko) * 9 : w + e * 9;
            for (int i = 0; i < 9; i++)
                g[i][l] = flip ? src[8 - i] : src[i];
        }
        for (int i = 0; i < 6; i++) /* t = G g */
            for (int j = 0; j < 3; j++)
                for (int l = 0; l < WINO_GROUP; l++)
                    t[i][j][l] = G4[i][0] * g[j][l] + G4[i][1] * g[3 + j][l] + G4[i][2] * g[6 + j][l];
        for (int i = 0; i < 6; i++) /* (G g) G^T */
            for (int j = 0; j < 6; j++)
                for (int l = 0; l < WINO_GROUP; l++)
                    out[i * 6 + j][l] = (float)(t[i][0][l] * G4[j][0] + t[i][1][l] * G4[j][1] + t[i][2][l] * G4[j][2]);
        for (int xi = 0; xi < 36; xi++)
            memcpy(u + (size_t)xi * kc + e0, out[xi], n * sizeof(float));
    }
}

/* weights_out: dw (k, c, 3, 3) += G^T s G of each (k, c) of s (36, k, c). */
WINO_UNFUSED void ddl__wino4_weights_out(int k, int c, const float *s, float *dw)
{
    size_t kc = (size_t)k * c;
    for (size_t e0 = 0; e0 < kc; e0 += WINO_GROUP) {
        size_t n = kc - e0 < WINO_GROUP ? kc - e0 : WINO_GROUP;
        float in[36][WINO_GROUP];
        for (int xi = 0; xi < 36; xi++)
            memcpy(in[xi], s + (size_t)xi * kc + e0, n * sizeof(float));
        for (size_t l = 0; l < n; l++) {
            double t[3][6];
            for (int j = 0; j < 6; j++) /* t = G^T s */
                for (int a = 0; a < 3; a++) {
                    double sum = 0;
                    for (int i = 0; i < 6; i++)
                        sum += G4[i][a] * in[i * 6 + j][l];
                    t[a][j] = sum;
                }
            float *dst = dw + (e0 + l) * 9;
            for (int a = 0; a < 3; a++) /* t G */
                for (int b = 0; b < 3; b++) {
                    double sum = 0;
                    for (int j = 0; j < 6; j++)
                        sum += t[a][j] * G4[j][b];
                    dst[a * 3 + b] += (float)sum;
                }
        }
    }
}
