/* winograd.h - what winograd.c (the passes, the products, F(2x2,3x3)'s transforms) shares with
 * winograd_f4.c (F(4x4,3x3)'s transforms): a layer's tiling and the vector types. Internal to
 * src/core. */
#ifndef DDL_WINOGRAD_H
#define DDL_WINOGRAD_H

#include "impl.h"

#include <string.h>

/* wino_geo: input (n, c, h, w) padded by pad, output (k, oh, ow), m x m outputs a tile (2 or 4)
 * read from an (m + 2) x (m + 2) block of the padded input, pts = (m + 2)^2 points of the
 * transform domain; th x tw tiles a sample, in blocks of nt tiles (the last one shorter). */
typedef struct wino_geo {
    int n, c, h, w, k, pad, oh, ow, m, pts, th, tw, nt, blocks;
    size_t vs, ms; /* floats from one transform point's V (c, nt), M (k, nt) to the next's */
} wino_geo;

/* The points' matrices of a task are one cache line more than their size apart: at exactly
 * c nt floats (a multiple of 1 KB) the transforms' 16 stores of a tile land in one L1 set and
 * evict each other (the cnn's 16 -> 16 layer at 64x64, batch 64, one thread: forward 16.9 ->
 * 10.5 ms, weight gradient 23.1 -> 12.3 ms). */
#define WINO_SKEW 16

typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4)));
typedef int v16i __attribute__((vector_size(64)));
#define LD(p) (*(const v16u *)(const void *)(p))
/* SHUFFLE(a, b, MASK): the 16 floats of a and b (lanes 0-15 a's, 16-31 b's) that MASK, a list of
 * 16 constant indices, names: gcc's __builtin_shuffle, clang's __builtin_shufflevector (make
 * fuzz builds with clang 14, which has no __builtin_shuffle) */
#ifdef __clang__
#define SHUFFLE(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define SHUFFLE(a, b, ...) __builtin_shuffle(a, b, (v16i){__VA_ARGS__})
#endif

/* spill: all 16 lanes of v at p, where the lanes past a row's end fall on floats written later
 * (or on the WINO_SKEW floats after a matrix): the transforms' matrices V (pts, c, nt) and DY
 * (pts, k, nt), filled in order of channel and tile, so the next segment's or channel's stores
 * overwrite what spilled. */
#define spill(p, v) (*(v16u *)(void *)(p) = (v))

/* padded_row: buf holds image row y of plane (h, w) at column pad, zeros around it (kept from the
 * first call: every copy writes the same columns); zero: the row of zeros, for a row outside.
 * *held: the row buf holds (-1: none yet). */
static inline const float *padded_row(const float *plane, int h, int w, int y, int pad, float *buf, int *held,
                                      const float *zero)
{
    if (y < 0 || y >= h)
        return zero;
    if (*held != y) {
        memcpy(buf + pad, plane + (size_t)y * w, (size_t)w * sizeof *buf);
        *held = y;
    }
    return buf;
}

/* The weights' transforms (G w G^T, and the weight gradient's G^T s G) go WINO_GROUP kernels at a
 * time, each point's WINO_GROUP floats stored (or read) together: the points' matrices are k c
 * floats apart, a multiple of 4 KB for most layers, and one kernel's 16 or 36 floats one by one
 * fell in one L1 set (F(4x4,3x3)'s weights_u was 45% of the cnn's 64 -> 64 forward pass at 16x16
 * so). WINO_UNFUSED: in the widest vectors the CPU has, with no fused multiply-adds (DDL__HOT's
 * clones fuse), so every clone rounds each product and sum as the scalar code does: the same bits
 * on any CPU path. */
#define WINO_GROUP 16
#ifdef DDL__CLONES
#define WINO_UNFUSED                                                                                \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), optimize("fp-contract=off")))
#else
#define WINO_UNFUSED
#endif

/* WINO2_ROWS: the padded rows a task of F(2x2,3x3) holds: 8 slots and a row of zeros (the AVX2
 * input_v's; winograd.c's takes 5) */
#define WINO2_ROWS 9

/* The AVX2 transforms' shared parts (8-float vectors: a tile's 4 columns one 128-bit load, two
 * runs of 4 tiles a vector): ddl__wino_pair: [4 floats at a | 4 floats at b];
 * ddl__wino_transpose4: in each 128-bit lane, r's 4 x 4 floats transposed into c. */
#ifdef DDL__CLONES
#include <immintrin.h>
#define WINO_AVX2_INLINE DDL__AVX2 static inline __attribute__((always_inline))

WINO_AVX2_INLINE __m256 ddl__wino_pair(const float *a, const float *b)
{
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(a)), _mm_loadu_ps(b), 1);
}

WINO_AVX2_INLINE void ddl__wino_transpose4(const __m256 r[4], __m256 c[4])
{
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    c[0] = _mm256_shuffle_ps(t0, t2, 0x44), c[1] = _mm256_shuffle_ps(t0, t2, 0xee);
    c[2] = _mm256_shuffle_ps(t1, t3, 0x44), c[3] = _mm256_shuffle_ps(t1, t3, 0xee);
}

/* F(2x2,3x3)'s transforms in 8-float vectors (winograd_f2_avx2.c), as winograd.c's input_v,
 * output_y and grad_dy, the same bits, where ddl__wino2_avx2 says: the AVX2 tiles run and the
 * output plane is whole tiles in rows of whole vectors (ow a multiple of 8, oh even). input_v's
 * rows: WINO2_ROWS of rl floats. */
int ddl__wino2_avx2(const wino_geo *q);
void ddl__wino2_input_v_avx2(const wino_geo *q, const float *x, int t0, int nt, float *v, float *rows, int rl);
void ddl__wino2_output_y_avx2(const wino_geo *q, const float *m, int t0, int nt, const float *b, float *y);
void ddl__wino2_grad_dy_avx2(const wino_geo *q, const float *dy, int t0, int nt, float *e);
#endif

/* F(4x4,3x3) (winograd_f4.c). _fits: the tiling it takes: a plane of whole 4x4 tiles cut into
 * bands of 16 (4 tile rows of 4, 2 of 8, or 1 of 16 or more: tw 4, 8 or a multiple of 16).
 * _rows: the floats of the padded rows input_v needs beside a task's matrices. The transforms
 * work a band at a time, t0 and nt whole bands; the others as winograd.c's of F(2x2,3x3). */
int ddl__wino4_fits(int oh, int ow);
size_t ddl__wino4_rows(const wino_geo *q);
void ddl__wino4_weights_u(int k, int c, const float *w, int flip, float *u);
void ddl__wino4_weights_out(int k, int c, const float *s, float *dw);
void ddl__wino4_input_v(const wino_geo *q, const float *x, int t0, int nt, float *v, float *rows);
void ddl__wino4_output_y(const wino_geo *q, const float *m, int t0, int nt, const float *b, float *y);
void ddl__wino4_grad_dy(const wino_geo *q, const float *dy, int t0, int nt, float *e);

#endif
