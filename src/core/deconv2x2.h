/* deconv2x2.h - what the 2x2 stride-2 transposed convolution's direct backward shares between
 * its AVX-512 kernels (deconv2x2_avx512.c, which also runs the passes) and its AVX2 ones
 * (deconv2x2_avx2.c): the job, the walk through a chunk's positions, the task's scratch and the
 * one-sum weight gradient of a short chunk. Internal to src/core. */
#ifndef DDL_CORE_DECONV2X2_H
#define DDL_CORE_DECONV2X2_H

#include "impl.h"

#define DD_BLOCK 256    /* positions a block (fewer where dd would pass DD_FLOATS) */
#define DD_FLOATS 32768 /* dd's size at most (128 KB) */

typedef struct ddl__deconv2x2_back {
    const ddl_conv2d *g;
    const float *x, *w, *dy;
    float *dx, *dw, *parts; /* parts: (chunk, ic, oc a b), each chunk's sums */
    int nb;                 /* samples a chunk (conv.c's) */
} ddl__deconv2x2_back;

/* place: samples and positions of a chunk, 16 at a time; s, p the sample and position of the
 * flat position c. */
typedef struct place {
    size_t p_n, s, p;
} place;

static inline void place_at(place *q, int n0, size_t c)
{
    q->s = (size_t)n0 + c / q->p_n;
    q->p = c % q->p_n;
}

static inline void place_step(place *q)
{
    q->p += 16;
    if (q->p == q->p_n)
        q->s++, q->p = 0;
}

/* The 16 positions from a multiple of 16 are two runs of 8, each within a row (w % 8 == 0). A
 * walk goes along a plane 16 positions a step; at each, run r's 16 floats (its 8 positions'
 * b = 0 and b = 1) lie at off[r] in the output plane (2h, 2w) for tap row a = 0, off[r] + 2w
 * for a = 1. */
typedef struct walk {
    size_t w, i, j; /* the row width; the next run's row and column */
    size_t off[2];
} walk;

static inline void walk_step(walk *k)
{
    for (int r = 0; r < 2; r++) {
        k->off[r] = 4 * k->i * k->w + 2 * k->j;
        k->j += 8;
        if (k->j == k->w)
            k->j = 0, k->i++;
    }
}

/* A task's scratch: its lanes (ic, oc a b, 16), 64-byte aligned, then dd (oc a b, block). */
static inline size_t ddl__deconv2x2_lanes_floats(const ddl_conv2d *g) { return (size_t)g->in_c * 4 * g->out_c * 16; }
#define DDL__DECONV2X2_SCRATCH(g) (16 + ddl__deconv2x2_lanes_floats(g) + DD_FLOATS)

/* ddl__deconv2x2_block: positions a block of dd, for k = 4 out_c rows */
static inline size_t ddl__deconv2x2_block(int k)
{
    size_t block = (size_t)DD_FLOATS / (size_t)k / 16 * 16;
    return block > DD_BLOCK ? DD_BLOCK : block;
}

/* ddl__deconv2x2_in_order: part (ic, oc a b) = each weight's sum over samples [n0, n0 + m),
 * position by position, one sum from +0 (the outer products' order, for a chunk too short for
 * the dot products; deconv2x2_avx512.c). */
void ddl__deconv2x2_in_order(const ddl__deconv2x2_back *j, float *part, int n0, int m);

/* ddl__deconv2x2_chunk: a task's chunk t: its samples [n0, n0 + m), k = 4 out_c rows of taps,
 * cols = m p_n positions in blocks of `block`; lanes and dd in the task's scratch; part: its
 * weight gradient's sums. by_lanes: the weight gradient by 16 lanes (else, where there is one, in
 * order, done by ddl__deconv2x2_chunk_start). */
typedef struct ddl__deconv2x2_chunk {
    int k, n0, m, by_lanes;
    size_t p_n, cols, block;
    float *lanes, *dd, *part;
} ddl__deconv2x2_chunk;

/* ddl__deconv2x2_chunk_start: chunk t's plan into c, its weight gradient summed in order where the
 * chunk is too short for lanes, its lanes zeroed where it is not; 0 where nothing is left to do
 * (no dx, and dw done) */
int ddl__deconv2x2_chunk_start(const ddl__deconv2x2_back *j, int t, float *scratch, ddl__deconv2x2_chunk *c);

/* ddl__deconv2x2_back_chunk_avx2: chunk t's dx and weight-gradient part as deconv2x2_avx512.c's
 * back_chunk, the same bits, in 8-float vectors (deconv2x2_avx2.c; where ddl__avx2_tiles). */
void ddl__deconv2x2_back_chunk_avx2(void *ctx, int t, float *scratch);

#endif
