/* conv_bf16_kernels.h - what the direct bfloat16 convolution's driver (conv_bf16.c) and its
 * kernels (conv_bf16_avx512.c, conv_bf16_amx.c) share: the geometry of one sample seen by the
 * kernels, and the kernels. Private to those files; conv.c sees only impl.h's ddl__conv2d_bf16_*
 * functions. */
#ifndef DDL_CONV_BF16_KERNELS_H
#define DDL_CONV_BF16_KERNELS_H

#include "impl.h"

#include <stddef.h>
#include <stdint.h>

#define DDL__CB_J 48       /* forward tile: positions (three 16-lane vectors) */
#define DDL__CB_DJ 32      /* weight-gradient tile: positions (16 lanes of position pairs) */
#define DDL__CB_TG 9       /* weight-gradient tile: taps per pass */
#define DDL__CB_OCG 3      /* weight-gradient tile: output channels */
#define DDL__CB_MAX_TAPS 25

/* ddl__cb_geo: one sample's convolution as the kernels see it (conv_wide.c's wide rows): c_in
 * planes of (h, w) padded by pad into rows of wp = w + pad (the right border of a row is the
 * left of the next), c_out outputs of (oh, ow) computed at the width wp, a k x k kernel of taps.
 * Forward: the input as cp channel pairs, each a plane of `plane` 32-bit words (channel 2i in
 * the low half, 2i + 1 in the high: vdpbf16ps's pairs), len wide positions (a multiple of
 * DDL__CB_J), ocb output channels a tile. Weight gradient: each input channel a plane of dplane
 * bfloat16 (pairs of neighbouring positions), dy in rows of dlen (a multiple of DDL__CB_DJ). */
typedef struct ddl__cb_geo {
    int c_in, c_out, h, w, pad, k, taps, wp, hp, oh, ow, ocb, cp;
    size_t len, plane, dlen, dplane;
    /* AMX (amx 1): the channel pairs in nch runs of kch (a tile's depth, at most 16), cpad =
     * nch kch planes (those past cp zero); ocb 16 (a tile's rows). AVX512-BF16: 0, 1, cp, cp. */
    int amx, nch, kch, cpad;
} ddl__cb_geo;

/* ddl__cb_fwd_avx512: acc (ocb rows ld apart) = the sums of one sample at the wide positions
 * [j0, j1) (multiples of DDL__CB_J): over the cp pair planes xp and the taps at off, wk (cp,
 * taps, ocb) weight pairs; each output's sum from +0, pair by pair and tap by tap, one vdpbf16ps
 * each. */
void ddl__cb_fwd_avx512(const ddl__cb_geo *q, const size_t *off, size_t j0, size_t j1, const uint32_t *xp,
                        const uint32_t *wk, float *acc, size_t ld);
/* ddl__cb_pairs_avx512: xp (cp planes) = x (c_in, h, w) rounded to bfloat16, two channels a word,
 * in wide rows padded with zeros (every word of every plane written). */
void ddl__cb_pairs_avx512(const ddl__cb_geo *q, const float *x, uint32_t *xp);
/* ddl__cb_plane_avx512: dst[0, n) = zeros but for the plane src (rows, cols) rounded to
 * bfloat16, its row r at dst + top + r stride (a plane in wide rows, padded). */
void ddl__cb_plane_avx512(const float *src, int rows, int cols, size_t top, size_t stride, size_t n,
                          uint16_t *dst);
/* ddl__cb_dw_avx512: for the DDL__CB_OCG output channels of dy[o] (rows of dlen bfloat16, ns
 * samples ds apart) and every input channel ic of xb (c_in planes of dplane bfloat16, samples xs
 * apart), m[o] (c_in, taps, 16 lanes) += the 16 lane sums of the ns samples' wide positions
 * [j0, j1) (multiples of DDL__CB_DJ), each from +0 over the samples in order and their position
 * pairs in order, one vdpbf16ps each. */
void ddl__cb_dw_avx512(const ddl__cb_geo *q, const size_t *off, size_t j0, size_t j1, int ns, const uint16_t *xb,
                       size_t xs, const uint16_t *const *dy, size_t ds, float *const *m);
/* ddl__cb_add_avx512: dst[0, n) = src[0, n) + b (a row of outputs copied out of the sums), then
 * with relu max(., 0) as ddl_relu_forward gives it; by streaming stores where dst is whole cache
 * lines; ddl__cb_add_fence_avx512 after the last. */
void ddl__cb_add_avx512(const float *src, size_t n, float b, int relu, float *dst);
void ddl__cb_add_fence_avx512(void);
int ddl__cb_avx512_have(void);

/* ddl__cb_tap_offsets: off[t], tap t's offset in wide positions. */
static inline void ddl__cb_tap_offsets(const ddl__cb_geo *q, size_t *off)
{
    for (int t = 0; t < q->taps; t++)
        off[t] = (size_t)(t / q->k) * q->wp + (size_t)(t % q->k);
}

/* ddl__cb_dw_block: wide positions a block of the weight-gradient tiles (a multiple of
 * DDL__CB_DJ): dlen cut into near-equal blocks of at most DDL__CB_DW_BLOCK, so that a block of
 * every input plane and every dy row of a range stays in the L1 cache while the range's channel
 * groups read it (64x64 planes read whole went to L2 for each group). */
#define DDL__CB_DW_BLOCK ((size_t)1024)
static inline size_t ddl__cb_dw_block(const ddl__cb_geo *q)
{
    size_t blocks = (q->dlen + DDL__CB_DW_BLOCK - 1) / DDL__CB_DW_BLOCK, b = (q->dlen + blocks - 1) / blocks;
    return (b + DDL__CB_DJ - 1) / DDL__CB_DJ * DDL__CB_DJ;
}
/* ddl__cb_ranges: a weight gradient's groups [0, groups) cut into ranges of at most per groups
 * (what fits a thread's scratch; a range then needs task floats), narrowed to at least one range
 * a thread where a task fits the pool's scratch; *width = the ranges' width (fn reads it through
 * ctx), then fn(ctx, r, scratch) for each range r, on the pool or in the caller with ws. Each
 * weight is one range's, so where the cuts fall changes no bit. */
static inline void ddl__cb_ranges(int groups, int per, size_t task, int *width, void (*fn)(void *, int, float *),
                                  void *ctx, float *ws)
{
    int threads = ddl__threads(), pooled = threads > 1 && task <= DDL__THREAD_SCRATCH;
    if (pooled) {
        int even = (groups + threads - 1) / threads;
        per = even < per ? even : per;
    }
    *width = per;
    int ranges = (groups + per - 1) / per;
    if (pooled && ranges > 1) {
        ddl__parallel_ws(ranges, fn, ctx, ws);
        return;
    }
    for (int r = 0; r < ranges; r++)
        fn(ctx, r, ws);
}

/* ddl__cb_transpose_avx512: dst (cols, rows) = src (rows, cols) of 32-bit words, both multiples
 * of 16. */
void ddl__cb_transpose_avx512(const uint32_t *src, size_t rows, size_t cols, uint32_t *dst);

/* ddl__cb_fwd_amx: ddl__cb_fwd_avx512 on AMX tiles (conv_bf16_amx.c), wk in (taps, nch, 16
 * output channels, kch) weight pairs for the block: each output from +0, tap by tap and run by
 * run of kch pairs, one tdpbf16ps each (its two sums, even and odd terms, added, then added to
 * the output's); ddl__cb_fwd_amx_emu the same loop over emulated tiles (Intel's SDM), on any
 * CPU. len's positions go 48 at a time (three tiles of 16). */
void ddl__cb_fwd_amx(const ddl__cb_geo *q, const size_t *off, size_t j0, size_t j1, const uint32_t *xp,
                     const uint32_t *wk, float *acc, size_t ld);
void ddl__cb_fwd_amx_emu(const ddl__cb_geo *q, const size_t *off, size_t j0, size_t j1, const uint32_t *xp,
                         const uint32_t *wk, float *acc, size_t ld);


/* The weight gradient on AMX (conv_bf16_amx.c): dw += the sums of q on batch samples of x and dy
 * (ws: ddl__cb_dw_amx_workspace floats; emulated: over emulated tiles). For each tap, a tile
 * C (input channels x output channels) += A (input channels x 16 position pairs: the bfloat16
 * planes as they lie, read from the tap's offset) x B (16 position pairs x output channels: dy
 * rounded and transposed once a sample). Each weight's sum from +0, in passes of ns samples
 * (ddl__cb_dw_amx_order), each pass's wide positions in blocks, each block over the pass's
 * samples in order, each sample's 32 positions at a time: one tdpbf16ps; then dw += it. */
size_t ddl__cb_dw_amx_workspace(const ddl__cb_geo *q);
void ddl__cb_dw_amx(const ddl__cb_geo *q, int batch, const float *x, const float *dy, float *dw, float *ws,
                    int emulated);
void ddl__cb_dw_amx_order(const ddl__cb_geo *q, int *ns, size_t *block);

#endif
