/* conv_bf16.h - what the direct bfloat16 convolution's driver (conv_bf16.c) and its AVX512-BF16
 * kernels (conv_bf16_avx512.c) share: the geometry of one sample seen by the kernels, and the
 * kernels. Private to those two files and the tests' declarations; conv.c sees only impl.h's
 * ddl__conv2d_bf16_* functions. */
#ifndef DDL_CONV_BF16_H
#define DDL_CONV_BF16_H

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
/* ddl__cb_add_avx512: dst[0, n) = src[0, n) + b (a row of outputs copied out of the sums). */
void ddl__cb_add_avx512(const float *src, size_t n, float b, float *dst);
int ddl__cb_avx512_have(void);

#endif
