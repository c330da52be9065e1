/* src/core/impl.h - private helpers of the core, shared by the layers above it (comm, train,
 * data, transports, models) and the private layout of ddl_model.
 * Not API: nothing here is for users or out-of-tree plugins. */
#ifndef DDL_CORE_IMPL_H
#define DDL_CORE_IMPL_H
#include "ddl.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#if defined(__GNUC__)
#define DDL__PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define DDL__PRINTF(f, a)
#endif

/* ddl__text: text appended to a caller's buffer as snprintf fills one (ddl_graph_format,
 * ddl_profile_format): len counts every byte asked for (what the buffer needs, less its NUL), what
 * fits is written and NUL-terminated, and a NULL buffer only counts. */
typedef struct ddl__text {
    char *buf;
    size_t bytes, len;
} ddl__text;
void ddl__text_put(ddl__text *o, const char *fmt, ...) DDL__PRINTF(2, 3);

/* ddl__env_int: the first of the NULL-ended names set in the environment, as an int, in *out
 * (*found 1); none set: *out untouched, *found 0. DDL_EINVAL names the variable that is not an
 * int. */
int ddl__env_int(const char *const *names, int *out, int *found, char *err, size_t err_bytes);

/* ddl__errf: format a message into err (err_bytes, may be 0) and return status. */
int ddl__errf(char *err, size_t err_bytes, int status, const char *fmt, ...) DDL__PRINTF(4, 5);

/* ddl__alloc / ddl__free: through the hooks, or malloc/free when a is NULL; what ddl__alloc
 * returns is always DDL_ALIGN-aligned (the one alignment rule, util.c). Without hooks, blocks of
 * DDL__HUGE_MIN bytes or more are DDL__HUGE_PAGE-aligned and asked to use huge pages. */
#define DDL__HUGE_PAGE ((size_t)2 << 20)
#define DDL__HUGE_MIN (2 * DDL__HUGE_PAGE)
void *ddl__alloc(const ddl_allocator *a, size_t bytes);
void ddl__free(const ddl_allocator *a, void *p);
/* ddl__alloc_plain / ddl__free_plain: exactly what the hooks give, for memory the caller frees
 * itself with them (ddl_idx_load's buffer). */
void *ddl__alloc_plain(const ddl_allocator *a, size_t bytes);
void ddl__free_plain(const ddl_allocator *a, void *p);

/* ---- byte order: the one set of little-endian helpers of every file and message format ---- */
/* ddl__put_le / ddl__get_le: the low `bytes` bytes (1..8) of v, little endian, as on every wire. */
static inline void ddl__put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint64_t ddl__get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}
static inline void ddl__put_le16(unsigned char *p, uint16_t v) { ddl__put_le(p, v, 2); }
static inline void ddl__put_le32(unsigned char *p, uint32_t v) { ddl__put_le(p, v, 4); }
static inline void ddl__put_le64(unsigned char *p, uint64_t v) { ddl__put_le(p, v, 8); }
static inline uint16_t ddl__get_le16(const unsigned char *p) { return (uint16_t)ddl__get_le(p, 2); }
static inline uint32_t ddl__get_le32(const unsigned char *p) { return (uint32_t)ddl__get_le(p, 4); }
static inline uint64_t ddl__get_le64(const unsigned char *p) { return ddl__get_le(p, 8); }
/* ddl__put_lef / ddl__get_lef: a float32 by its bits. */
static inline void ddl__put_lef(unsigned char *p, float f)
{
    uint32_t v;
    memcpy(&v, &f, 4);
    ddl__put_le32(p, v);
}
static inline float ddl__get_lef(const unsigned char *p)
{
    uint32_t v = ddl__get_le32(p);
    float f;
    memcpy(&f, &v, 4);
    return f;
}

/* ddl__align_up: round n up to a multiple of DDL_ALIGN. */
static inline size_t ddl__align_up(size_t n) { return (n + DDL_ALIGN - 1) & ~(size_t)(DDL_ALIGN - 1); }

/* ---- threads (pool.c) ---- */
#define DDL__MAX_THREADS 64
/* ddl__pool_resize: n threads in all (n - 1 workers), created now; returns the count in use. */
int ddl__pool_resize(int n);
/* ddl__threads: threads ddl__parallel uses (1: the caller alone). */
int ddl__threads(void);
/* ddl__parallel: fn(ctx, i) for every i in [0, n), spread over the pool; returns when all are
 * done. Task i must compute the same whichever thread runs it, and tasks must not overlap in
 * what they write. */
void ddl__parallel(int n, void (*fn)(void *ctx, int task), void *ctx);
/* ddl__parallel_ws: as ddl__parallel, and fn gets scratch: DDL__THREAD_SCRATCH floats of the
 * thread that runs the task, or `ws` when the tasks run one after another in the caller (one
 * thread, a nested call, the pool busy). Returns 1 if the pool ran them. A kernel whose task
 * needs more than DDL__THREAD_SCRATCH floats must not use it. */
#define DDL__THREAD_SCRATCH ((size_t)1 << 19)
/* ddl__parallel_range: fn(ctx, lo, hi) over [0, n) cut into up to RANGE_CUTS ranges per thread,
 * none under `grain` items (all of it in the caller when n < 2 grain), their count a multiple of
 * the threads where there are more than threads (so each thread's share is the same part of [0,
 * n) as in the kernels before and after it: LeNet's relu2 at 2 threads in 3 ranges took 4.6 us,
 * in 2 3.5): for work whose items are independent, so that where the cuts fall cannot change a
 * bit. */
void ddl__parallel_range(size_t n, size_t grain, void (*fn)(void *ctx, size_t lo, size_t hi), void *ctx);
int ddl__parallel_ws(int n, void (*fn)(void *ctx, int task, float *scratch), void *ctx, float *ws);
/* ddl__set_invariant: on 1, this thread's matrix products (and those of the pool tasks it starts,
 * which run in the caller's mode) give each element the same bits whatever the shape it is part
 * of (a sample's, alone or in any batch; gemm.c): inference's mode, set by the predictor; 0, the
 * default, is training's dispatch. Returns the mode before. ddl__invariant: the mode now. */
int ddl__set_invariant(int on);
int ddl__invariant(void);

/* ddl__now: monotonic seconds. */
double ddl__now(void);
/* SHA-256 and HMAC (sha256.c: the handshake's and the heartbeat's). */
#define DDL__SHA256_BYTES 32
/* ddl__sha256: out = SHA-256 of data[bytes]. */
void ddl__sha256(const void *data, size_t bytes, unsigned char out[DDL__SHA256_BYTES]);
/* ddl__hmac_sha256: out = HMAC-SHA256 with key[key_bytes] of msg[msg_bytes] (RFC 2104). */
void ddl__hmac_sha256(const void *key, size_t key_bytes, const void *msg, size_t msg_bytes,
                      unsigned char out[DDL__SHA256_BYTES]);
/* ddl__ct_equal: 1 if a and b hold the same bytes; time does not depend on where they differ. */
int ddl__ct_equal(const void *a, const void *b, size_t bytes);

/* ddl__now_ms: monotonic milliseconds. */
int64_t ddl__now_ms(void);
/* ddl__remaining_ms: milliseconds left until deadline_ms (ddl__now_ms time): >= 0, capped at
 * 1e9 so that it fits a poll timeout. */
int ddl__remaining_ms(int64_t deadline_ms);


/* ddl__log: call the log callback, if any, with a formatted message. */
void ddl__log(ddl_log_fn fn, void *ud, int level, const char *fmt, ...) DDL__PRINTF(4, 5);

/* ddl__avx2_tiles: where the AVX2 tiles run in place of a DDL__HOT kernel written in 16-float
 * vectors (conv_wide.c's tiles, winograd.c's product: in the clones' AVX2 build their sums went to
 * the stack): 1 where the clones would take their AVX2 build (x86-64-v3, not v4), 2 where
 * ddl__avx2_tiles_enable(2) forces them on any CPU with AVX2 and FMA, 0 elsewhere or after
 * ddl__avx2_tiles_enable(0) (then the clones run; tests compare the two, which give the same
 * bits). ddl__avx2_tiles_enable returns the setting before, or -1 where there are no AVX2 tiles
 * (a build without clones, a CPU without AVX2 and FMA). */
int ddl__avx2_tiles(void);
int ddl__avx2_tiles_enable(int on);

/* ddl__reduce16: the sum of 16 lanes in _mm512_reduce_add_ps's order (GCC's: the two halves, then
 * the quarters, then the pairs), in scalars: for the AVX2 kernels that keep an AVX-512 kernel's 16
 * lanes in two halves of 8 (deconv2x2_avx2.c, conv1x1_avx2.c) */
static inline float ddl__reduce16(const float *l)
{
    float t3[8], t6[4];
    for (int i = 0; i < 8; i++)
        t3[i] = l[8 + i] + l[i];
    for (int i = 0; i < 4; i++)
        t6[i] = t3[4 + i] + t3[i];
    return (t6[0] + t6[2]) + (t6[1] + t6[3]);
}

/* DDL__HOT: hot kernels get an AVX-512 and an AVX2+FMA clone, picked at load time by the CPU
 * (one binary for any x86-64; the rest of the library stays x86-64-v2), and fused multiply-adds.
 * Not under ThreadSanitizer: the clones' resolver runs while the program is relocated, before
 * TSan's runtime is up, and its instrumented entry crashed every program before main.
 * -DDDL_NO_CLONES builds only what -march says, to test the portable and AVX2 code on any CPU. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_THREAD__) && \
    !defined(DDL_NO_CLONES)
#define DDL__CLONES 1 /* a function may have target_clones */
#define DDL__HOT                                                                                         \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), optimize("fp-contract=fast")))
/* DDL__LANES: the same clones without fused multiply-adds: for loops whose lanes must give the
 * bits of the portable code (a row's 8 lanes, each summed in order, vectorise as they are). */
#define DDL__LANES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DDL__HOT
#define DDL__LANES
#endif
/* DDL__AVX2: a kernel written for AVX2 and FMA, run only where the CPU has them (batchnorm_fma.c's
 * sums, the AVX2 tiles) */
#if defined(__GNUC__) && defined(__x86_64__)
#define DDL__AVX2 __attribute__((target("avx2,fma")))
#endif

/* ddl__gemm_plan: the blocks ddl_gemm cuts C = alpha op(A) op(B) + beta C into (fixed, whatever
 * the thread count), so that an op can run the blocks of independent products in one job of the
 * pool; returns their number (0 for an empty C). ddl__gemm_block(p, t) computes block t: every
 * element of C comes out of the same call as in ddl_gemm. */
typedef struct ddl__gemm_blocks {
    int trans_a, trans_b, m, n, k, lda, ldb, ldc, by_cols, step, n_blocks;
    float alpha, beta;
    const float *a, *b;
    float *c;
    int invariant;     /* ddl__invariant() when planned */
    int bf16;          /* ddl__precision() == DDL_PRECISION_BF16 when planned (and not invariant) */
} ddl__gemm_blocks;
int ddl__gemm_plan(ddl__gemm_blocks *p, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                   int lda, const float *b, int ldb, float beta, float *c, int ldc);
void ddl__gemm_block(const ddl__gemm_blocks *p, int t);

/* The AVX-512 kernels of ddl_gemm (gemm_avx512.c). ddl__gemm_avx512_takes: 1 when this CPU and
 * build have them and they take op(A) op(B) of n columns; ddl__gemm_avx512: then C +=
 * alpha op(A) op(B) (m, n, k > 0), the same bits for every element wherever the product is cut. */
int ddl__gemm_avx512_takes(int trans_a, int trans_b, int n);
int ddl__gemm_avx512_have(void); /* 1: this CPU and build have them, for any product */
void ddl__gemm_avx512(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                      const float *b, int ldb, float *c, int ldc);

/* ddl__expf_n: y[i] = expf(x[i]) for i < n (y may be x), the C library's bits, 16 lanes at a time
 * on AVX-512, 8 on AVX2 with FMA (expf_lanes.c); ddl__expf_lanes: the lanes in use (16 or 8: the
 * CPU has them and they gave the library's bits in a check before first use), 0 where it is the
 * library's loop. ddl__expf_use (tests): use the lanes of that width (0: the library's loop) where
 * this CPU has them and they pass the check; returns ddl__expf_lanes(). */
void ddl__expf_n(size_t n, const float *x, float *y);
int ddl__expf_lanes(void);
int ddl__expf_use(int width);
/* ddl__maxpool_inside_avx512: outputs [xa, xb) of one row of a max-pool whose windows (kh x kw taps
 * dh, dw apart, from image row y0 and column x0 + ox sw) lie inside the (., w) image img, value and
 * index as pool2d.c's loop; 0 (nothing done) without AVX-512. */
int ddl__maxpool_inside_avx512(const float *img, int w, int kh, int kw, int dh, int dw, int sw, int y0, int x0, int xa,
                               int xb, float *out, int32_t *arg);
/* ddl__maxpool2_avx512: the 2x2 stride-2 max-pool of `planes` (h, w) planes, output and argmax as
 * ops.c's scalar loop gives them, on AVX-512 (maxpool_avx512.c); 0 when this CPU or build has
 * none (the caller runs the loop). */
int ddl__maxpool2_avx512(size_t planes, int h, int w, const float *x, float *y, int32_t *argmax);
/* ddl__unpool2_avx512: its backward, dx (planes, h, w) written whole from dy and argmax, as ops.c's
 * scatter gives it (with keep, the pool's output y, a window's dy only where y > 0: the ReLU
 * before the pool folded in); 0 when this CPU or build has none. */
int ddl__unpool2_avx512(size_t planes, int h, int w, const float *dy, const int32_t *argmax, const float *keep,
                        float *dx);
/* ddl__maxpool2_avx2 / ddl__unpool2_avx2: the same where the AVX2 tiles run (maxpool_avx2.c;
 * rows of 8 windows and more); 0 elsewhere. */
int ddl__maxpool2_avx2(size_t planes, int h, int w, const float *x, float *y, int32_t *argmax);
int ddl__unpool2_avx2(size_t planes, int h, int w, const float *dy, const int32_t *argmax, const float *keep,
                      float *dx);
/* ddl__maxpool_backward_keep: ddl_maxpool_backward, and with keep as ddl__unpool2_avx512's. */
void ddl__maxpool_backward_keep(int n, int c, int h, int w, int k, int stride, const float *dy,
                                const int32_t *argmax, const float *keep, float *dx);
/* conv.c's im2col and col2im on AVX-512 (im2col_avx512.c), bit for bit its loops'.
 * ddl__im2col_s2_row: dst[i] = src[2 i] for i < n; only where ddl__im2col_s2_ok (AVX-512).
 * ddl__im2col_tiny_avx512 / ddl__col2im_tiny_avx512: im2col and col2im of planes of at most 16
 * positions and no more pixels, through its map src (tap t, position pos: the pixel, or hw for
 * the padding); only where ddl__im2col_tiny_ok (AVX-512, at most 64 taps of such planes). */
int ddl__im2col_s2_ok(void);
void ddl__im2col_s2_row(const float *src, int n, float *dst);
int ddl__im2col_tiny_ok(int hw, int p, int taps);
void ddl__im2col_tiny_avx512(const int32_t *src, int taps, int hw, int p, int c, int cs, int nb, const float *x,
                             float *col, size_t ld);
void ddl__col2im_tiny_avx512(const int32_t *src, int taps, int hw, int p, int c, int cs, int nb, const float *col,
                             size_t ld, float *x);
/* ddl__im2col_shift_avx512 / ddl__col2im_shift_avx512 (im2col_shift_avx512.c): im2col and col2im,
 * bit for bit conv.c's loops', of a stride-1 convolution whose output rows are as wide as the
 * image's (ow = w): each tap's row of the column matrix is the plane shifted, the padding zero.
 * Only where ddl__im2col_shift_ok (AVX-512, at most 64 taps, taps x 16-float vectors of the
 * plane at most 4096). */
typedef struct ddl__shift_geo {
    int h, w, oh;     /* the image; the output is oh x w */
    int kh, kw, pt, pl, dh, dw;
} ddl__shift_geo;
int ddl__im2col_shift_ok(const ddl__shift_geo *g);
void ddl__im2col_shift_avx512(const ddl__shift_geo *g, int c, int cs, int nb, const float *x, float *col, size_t ld);
void ddl__col2im_shift_avx512(const ddl__shift_geo *g, int c, int cs, int nb, const float *col, size_t ld, float *x);

/* Wide-row direct convolution for 3x3 and 5x5 kernels, stride 1 (conv_wide.c): forward, dx, and
 * dw (accumulated). */
/* ddl__row_sum: sum of x[0, n) in 8 lanes added in a fixed order (ops.c). */
float ddl__row_sum(const float *x, int n);
/* ddl__planes_sum: the sum, in a double, of ddl__row_sum(x + i stride, n) over the planes i in
 * [0, planes) in order, the same bits (ops.c: several planes' sums side by side, faster than one
 * at a time): a bias gradient's sum of one channel's planes over the samples. */
double ddl__planes_sum(const float *x, size_t stride, int planes, int n);

/* _ok: the wide kernels take g's forward and input gradient (planes of 8x8 and up); _dw_ok: its
 * weight gradient too (16x16 and up); the rest is im2col + gemm's (conv.c). */
int ddl__conv2d_wide_ok(const ddl_conv2d *g);
int ddl__conv2d_wide_dw_ok(const ddl_conv2d *g);
size_t ddl__conv2d_wide_workspace(const ddl_conv2d *g);
void ddl__conv2d_wide_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y,
                              float *ws);
void ddl__conv2d_wide_dx(const ddl_conv2d *g, const float *w, const float *dy, float *dx, float *ws);
int ddl__conv2d_wide_dw(const ddl_conv2d *g, const float *x, const float *dy, float *dw, float *db, float *ws);

/* The 1x1 stride-1 convolution direct (conv1x1_avx512.c), with the float32 bits of conv.c's
 * column matrix and products. _geometry: no padding, dilation or groups, 2 to 256 input and
 * output channels, planes of a multiple of 16 positions; _ok: that, on a CPU with AVX-512, and
 * not turned off by ddl__conv1x1_enable(0) (tests compare the two paths; it returns the setting
 * before). _dw: dw += the weight gradient by conv.c's chunks of nb samples. */
int ddl__conv1x1_geometry(const ddl_conv2d *g);
int ddl__conv1x1_ok(const ddl_conv2d *g);
int ddl__conv1x1_enable(int on);
void ddl__conv1x1_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y);
void ddl__conv1x1_dx(const ddl_conv2d *g, const float *w, const float *dy, float *dx);
void ddl__conv1x1_dw(const ddl_conv2d *g, const float *x, const float *dy, float *dw, int nb);
/* ddl__conv1x1_avx2_ok: where the AVX2 tiles run (ddl__avx2_tiles; _ok is then 0), the three
 * passes by conv1x1_avx2.c, the same bits as the AVX-512 kernels'. _dw_in_order: dw rows [o0, o1)
 * += each weight's sum over samples [n0, n0 + m) position by position from +0, as 1 x sum + 0 (the
 * outer products' order, for a chunk too short for the dot products; both kernels') */
int ddl__conv1x1_avx2_ok(const ddl_conv2d *g);
void ddl__conv1x1_forward_avx2(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y);
void ddl__conv1x1_dx_avx2(const ddl_conv2d *g, const float *w, const float *dy, float *dx);
void ddl__conv1x1_dw_avx2(const ddl_conv2d *g, const float *x, const float *dy, float *dw, int nb);
void ddl__conv1x1_dw_in_order(const ddl_conv2d *g, const float *x, const float *dy, float *dw, int o0, int o1, int n0,
                              int m);

/* The 2x2 stride-2 transposed convolution direct (deconv2x2_avx512.c), with the float32 bits of
 * conv.c's column matrix and products, in a bfloat16 pass too (there it is faster than the
 * bfloat16 product, and exact to float32). _geometry: k 2, stride 2, no padding, dilation,
 * groups or output padding, 2 to 256 input channels, 1 to 64 output channels, rows a multiple
 * of 8 and planes of 16; _ok: that, on a CPU with AVX-512, for the forward pass (backward 0) or
 * the backward (1: up to 1024 in_c out_c; more stay the column matrix's), and where the AVX2
 * tiles run, for the forward pass. _backward: dx (may be
 * NULL), and dw (may be NULL) += the weight gradient by conv.c's chunks of nb samples, a chunk a
 * task, in ws (_dw_workspace floats). */
int ddl__deconv2x2_geometry(const ddl_conv2d *g);
int ddl__deconv2x2_ok(const ddl_conv2d *g, int backward);
/* ddl__deconv2x2_enable: on 0, no call takes the direct kernels (tests compare them with conv.c's
 * column matrix); returns the setting before. */
int ddl__deconv2x2_enable(int on);
size_t ddl__deconv2x2_dw_workspace(const ddl_conv2d *g, int nb);
void ddl__deconv2x2_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y);
/* ddl__deconv2x2_forward_avx2: the forward pass in AVX2 (deconv2x2_avx2.c), the same bits; _ok and
 * _forward take it where the AVX2 tiles run (ddl__avx2_tiles), and the backward stays the column
 * matrix's there */
void ddl__deconv2x2_forward_avx2(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y);
void ddl__deconv2x2_backward(const ddl_conv2d *g, const float *x, const float *w, const float *dy, float *dx,
                             float *dw, int nb, float *ws);

/* ddl__conv_full: a ddl_conv2d's geometry with the appended fields' defaults resolved: strides,
 * dilations, the four pads, groups and output padding (conv.c and conv_depthwise.c read it). */
typedef struct ddl__conv_full {
    int sh, sw, dh, dw, pt, pl, pb, pr, groups, oph, opw;
} ddl__conv_full;
static inline ddl__conv_full ddl__conv2d_full(const ddl_conv2d *g)
{
    ddl__conv_full f = {g->stride, g->stride_w ? g->stride_w : g->stride, g->dilation_h ? g->dilation_h : 1,
                        g->dilation_w ? g->dilation_w : 1, g->pad, g->pad, g->pad, g->pad,
                        g->groups ? g->groups : 1, g->out_pad_h, g->out_pad_w};
    if (g->pads4)
        f.pt = g->pad_t, f.pl = g->pad_l, f.pb = g->pad_b, f.pr = g->pad_r;
    return f;
}
/* ddl__conv2d_plain: 1 when g is the geometry of before the appended fields (one stride, pad on
 * every side, no dilation, groups or output padding): the fast paths take only it. */
static inline int ddl__conv2d_plain(const ddl_conv2d *g)
{
    ddl__conv_full f = ddl__conv2d_full(g);
    return f.sw == f.sh && f.dh == 1 && f.dw == 1 && f.groups == 1 && f.pt == g->pad && f.pl == g->pad &&
           f.pb == g->pad && f.pr == g->pad && f.oph == 0 && f.opw == 0;
}

/* Depthwise convolution (conv_depthwise.c): groups == in_c, out_c a multiple of it (each output
 * channel reads one input channel), any kernel, strides, pads and dilation; direct loops over
 * padded planes instead of im2col. _ok: 1 when it takes g; _workspace: its floats. */
int ddl__conv2d_dw_ok(const ddl_conv2d *g);
size_t ddl__conv2d_dw_workspace(const ddl_conv2d *g);
void ddl__conv2d_dw_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y,
                            float *ws);
void ddl__conv2d_dw_backward(const ddl_conv2d *g, const float *x, const float *w, const float *dy, float *dx,
                             float *dw, float *db, float *ws);
/* Winograd F(2x2,3x3) and F(4x4,3x3) for 3x3 stride-1 convolutions (winograd.c). _ok: 1 when g asks for it
 * (g->algo) and its size rule gives it the forward pass and the input gradient; _dw_ok: the
 * weight gradient (the rule is pass by pass); _workspace: its floats (either); _backward: dw +=
 * (dw may be NULL), dx = (dx may be NULL); the bias gradient is the caller's. */
int ddl__wino_ok(const ddl_conv2d *g);
int ddl__wino_dw_ok(const ddl_conv2d *g);
size_t ddl__wino_workspace(const ddl_conv2d *g);
void ddl__wino_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y, float *ws);
void ddl__wino_backward(const ddl_conv2d *g, const float *x, const float *w, const float *dy, float *dx, float *dw,
                        float *ws);
/* ddl__act_grad_from_y: 1 when ddl_act_backward of this kind (and alpha) reads y alone, so the
 * layer may run in place over its input (act.c). */
int ddl__act_grad_from_y(int kind, float alpha);

/* ---- the model object (model.c; train/ reads it) ---- */
#define DDL__NAME_BYTES 48
#define DDL__MODEL_SELF_MAX (1 << 20) /* bytes of a plugin's own state (ddl_model_plugin.self_bytes) */

/* A data set's arrays, whichever of each pair holds them (ddl.h: images or fimages, targets or
 * targets16): the bytes of one pixel (1 or 4) and of one target (1 or 2), the arrays, and
 * target i as an int. */
static inline size_t ddl__pixel_bytes(const ddl_dataset *d) { return d->images ? 1 : sizeof(float); }
static inline size_t ddl__target_bytes(const ddl_dataset *d) { return d->targets ? 1 : sizeof(uint16_t); }
static inline const void *ddl__pixel_data(const ddl_dataset *d)
{
    return d->images ? (const void *)d->images : (const void *)d->fimages;
}
static inline const void *ddl__target_data(const ddl_dataset *d)
{
    return d->targets ? (const void *)d->targets : (const void *)d->targets16;
}
static inline int ddl__target_at(const ddl_dataset *d, size_t i)
{
    return d->targets ? d->targets[i] : d->targets16[i];
}

/* ddl__count_correct (metrics.c): positions of n samples of logits (n, C, S) whose predicted
 * class (the first of the largest logits) is the label in y; with confusion (C x C,
 * [label][predicted]) non-NULL, counts every position there too. */
int64_t ddl__count_correct(const float *logits, const uint16_t *y, int n, int C, int S, int64_t *confusion);

struct ddl_model {
    void *mem;                   /* the caller's memory: the model starts at its first DDL_ALIGN boundary */
    const ddl_model_plugin *plugin;
    ddl_model_config cfg;
    void *self;                  /* plugin state: plugin->self_bytes */
    float *params, *grads;       /* n_params each, contiguous, tensor after tensor */
    size_t n_params;
    int n_tensors;
    ddl_param_info tensors[DDL_MAX_PARAMS];
    char names[DDL_MAX_PARAMS][DDL__NAME_BYTES];
    int out_c, out_h, out_w;     /* logits per sample */
    float *logits;               /* (cfg.batch, out_c, out_h, out_w) */
    unsigned char *scratch;      /* the layers' activations and workspaces (scratch_bytes), untouched at init */
    size_t scratch_bytes;
    float mean, std;             /* input normalisation, part of the model */
    int n_norm;                  /* > 0: per channel (in_c of them) instead */
    float norm_mean[DDL_MAX_NORM_CHANNELS], norm_std[DDL_MAX_NORM_CHANNELS];
    const ddl_allocator *alloc;  /* set by ddl_model_create, NULL after ddl_model_init */
    int owned;                   /* 1: ddl_model_destroy frees the memory */
    /* ddl_backward_ready calls this during backward (set by a trainer; NULL: nobody listens):
     * the gradients from element `from` to the end are final. */
    void (*on_ready)(void *ud, size_t from);
    void *on_ready_ud;
    struct ddl_backward {        /* the pass backward reports to: this model, while it runs */
        struct ddl_model *m;     /* NULL outside a backward pass */
    } pass;
    /* buffers (ddl_build_buffer): n_buffers floats after the parameters; next, their values after
     * a forward pass in training mode, is the gradient block's tail (grads + n_params) */
    float *buffers, *next;
    size_t n_buffers;
    int n_buf_tensors;
    ddl_param_info buf_tensors[DDL_MAX_BUFFERS];
    char buf_names[DDL_MAX_BUFFERS][DDL__NAME_BYTES];
    int hold_buffers;            /* 1 (a trainer's): forward leaves next for the trainer to combine */
    /* synchronised BatchNorm (ddl__model_sync): set by a trainer around its training passes
     * only (NULL: every layer normalises with the batch it is given). n_sync layers call it,
     * with rows of at most sync_width floats per sample (ddl__build_sync). */
    int (*sync)(void *ud, const float *rows, int n, int width, double *tot, long *n_all);
    void *sync_ud;
    int n_sync;
    size_t sync_width;
    /* profiling (profile.c): the layers the plugin declared (ddl_build_layer), in the model's
     * block, each with what its timed passes took since the last ddl_model_profile_take. */
    ddl_profile_layer *layers;
    int n_layers;
    int profiling;               /* ddl_model_profile: training passes are timed */
    int prof_pass;               /* the timed pass in progress: 0 forward, 1 backward; -1 none */
    int prof_batch;              /* its samples */
    int64_t prof_last;           /* when it began or its last layer ended (ns) */
};

/* ddl__profile_begin (profile.c): a pass of batch samples begins (pass 0 forward, 1 backward):
 * timed when m is profiling and, forward, training. Called by model.c behind m->profiling. */
void ddl__profile_begin(ddl_model *m, int pass, int batch, int training);
/* ddl__profile_mark: layer (an index of m->layers, else ignored) ended now in the timed pass. */
void ddl__profile_mark(ddl_model *m, int layer);
/* ddl__profile_describe: layer entry l as ddl_build_layer was told (strings cut to fit), its
 * times zero. */
void ddl__profile_describe(ddl_profile_layer *l, const char *name, const char *kind, int c, int h, int w,
                           double fwd_flops, double bwd_flops);

/* ---- synchronised statistics (model.c): the hook a trainer sets for sync BatchNorm ----
 * ddl__build_sync: for a plugin's build: one of its layers takes statistics over the whole
 * global batch in training passes, in rounds of at most width floats per sample.
 * ddl__model_synced: 1 when the model of plugin state `self` has a sync hook set (then a
 * training pass must make every round of its layers, and a pass of batch 0, which the core
 * then allows, makes them with no samples: a part of the global batch that holds none).
 * ddl__model_sync: one round: rows (n, width) are this pass's samples' partial sums, one row
 * per sample; tot (width) gets each column summed over every sample of the global batch, in
 * the samples' global order (the same bits however the batch is cut), *n_all the global
 * batch's samples. DDL_OK, or the round's failure (tot then zero; the trainer reports it). */
void ddl__build_sync(ddl_model_build *b, size_t width);

/* BatchNorm over a global batch (batchnorm.c), a part's x, y, dy, dx (n, c, s) as the
 * ddl_batchnorm_* kernels'. sync_rows: rows (n, c): per sample and channel the sum of x over s,
 * or with mean_rstd of (x - mean)^2. sync_mean: mean_rstd's means from the global sums (count:
 * the global batch's values per channel, N S). sync_forward: from the global sums of squares,
 * rstd, y (n may be 0: the running statistics alone) and the running statistics' next values.
 * sync_grad_rows: rows (n, 2c): per sample the sums of dy, then of dy (x - mean). sync_backward:
 * dgamma and dbeta += this part's (from its rows), dx through the global sums tot (2c). */
void ddl__bn_sync_rows(int n, int c, int s, const float *x, const float *mean_rstd, float *rows);
void ddl__bn_sync_mean(int c, double count, const double *sum, float *mean_rstd);
void ddl__bn_sync_forward(int n, int c, int s, double count, float momentum, float eps, const double *sq,
                          const float *x, const float *gamma, const float *beta, const float *run_mean,
                          const float *run_var, float *y, float *mean_rstd, float *next_mean, float *next_var);
void ddl__bn_sync_grad_rows(int n, int c, int s, const float *x, const float *mean_rstd, const float *dy,
                            float *rows);
void ddl__bn_sync_backward(int n, int c, int s, double count, const float *x, const float *gamma,
                           const float *mean_rstd, const float *dy, const float *rows, const double *tot, float *dx,
                           float *dgamma, float *dbeta);
int ddl__model_synced(const void *self);
/* ddl__model_touch: writes the model's scratch once (model.c), so that a trainer's first step
 * does not pay the page faults of memory the kernel has not handed out yet. */
void ddl__model_touch(ddl_model *m);
int ddl__model_sync(void *self, const float *rows, int n, int width, double *tot, long *n_all);

/* ddl__norm_affine: the scale and shift that normalise channel c's bytes: x = p * scale + shift
 * (the model's one mean and std, or channel c's). */
static inline void ddl__norm_affine(const ddl_model *m, int c, float *scale, float *shift)
{
    float mean = m->n_norm ? m->norm_mean[c] : m->mean, std = m->n_norm ? m->norm_std[c] : m->std;
    *scale = 1.0f / (255.0f * std);
    *shift = -mean / std;
}

/* ddl__shuffle_channels (channels.c): ShuffleNet's channel shuffle of x (n, c, s) into y: channel
 * i * (c / groups) + j goes to j * groups + i (x.view(n, groups, c / groups, ..).transpose(1, 2));
 * inverse: the other way, its backward. groups divides c; y is not x.
 * ddl__slice_channels: y (n, count, s) = x (n, c, s)[:, start:start + count].
 * ddl__slice_channels_backward: dx (n, c, s) = dy in channels start..start + count - 1 and zeros
 * elsewhere, or with add, dy added into those channels of dx alone. */
void ddl__shuffle_channels(int n, int c, int groups, size_t s, const float *x, float *y, int inverse);
void ddl__slice_channels(int n, int c, int start, int count, size_t s, const float *x, float *y);
void ddl__slice_channels_backward(int n, int c, int start, int count, size_t s, const float *dy, float *dx, int add);

/* ddl__mul_forward / _backward (mul.c): y = a * b over a (n, c, s), b (n, c, sb) with sb = s, or sb =
 * 1: one value per sample and channel for every position; da = dy * b, db = dy * a (sb = 1: its
 * sum over the positions). da or db may be NULL (not wanted); none may alias another. */
void ddl__mul_forward(int n, int c, size_t s, size_t sb, const float *a, const float *b, float *y);
void ddl__mul_backward(int n, int c, size_t s, size_t sb, const float *a, const float *b, const float *dy, float *da,
                       float *db);
/* ddl__mul_spatial_forward / _backward: the same with b (n, 1, s), one value a position for every
 * channel; db = the sum of dy * a over the channels, in order. */
void ddl__mul_spatial_forward(int n, int c, size_t s, const float *a, const float *b, float *y);
void ddl__mul_spatial_backward(int n, int c, size_t s, const float *a, const float *b, const float *dy, float *da,
                               float *db);

/* ddl__affine_channels_forward / _backward (affine.c): y = x * scale[c] + shift[c] over x (n, c, s);
 * dx = dy * scale[c]. y may be x, dx may be dy. */
void ddl__affine_channels_forward(int n, int c, size_t s, const float *x, const float *scale, const float *shift,
                                  float *y);
void ddl__affine_channels_backward(int n, int c, size_t s, const float *dy, const float *scale, float *dx);

/* ---- bfloat16 products (gemm_bf16.c, gemm_bf16_avx512.c) ----
 * ddl__set_precision: DDL_PRECISION_BF16 makes this thread's ddl_gemm products (and those of
 * the pool tasks it starts, as ddl__set_invariant's mode) bfloat16 products with float32 sums,
 * and ddl_conv2d's passes take conv_bf16.c's direct kernels where they fit, else im2col's path
 * (conv_wide.c's and Winograd's kernels are float32's); a trainer sets
 * it around its training passes. Returns the precision before; ddl__precision: the one now.
 * The invariant mode (inference) wins over it. */
int ddl__set_precision(int precision);
int ddl__precision(void);
enum { DDL__BF16_NONE, DDL__BF16_AVX512, DDL__BF16_AMX };
#define DDL__BF16_KC 256 /* depth of a slice: the sums' order (gemm_bf16.c) */
/* ddl__bf16_b_first: whether a bfloat16 kernel that packs op(A) mc rows and op(B) nc columns
 * at a time should pack op(B) first, once a slice, and op(A) once for each of its blocks, rather
 * than op(A) once a slice and op(B) once for each block of rows: the order that packs fewer
 * elements. The first serves products of many rows (ResNet-18's input gradients, w^T dy of 4608
 * rows: dy was packed 36 times), the second those of many columns. The order changes no value:
 * each element of C gets the same sums. */
int ddl__bf16_b_first(int m, int n, int mc, int nc);
/* ddl__bf16_path: the bfloat16 path of this CPU and build (DDL_CPU_NO_BF16=1: none; DDL_CPU_NO_AMX=1:
 * not AMX), read once. */
int ddl__bf16_path(void);
const char *ddl__bf16_path_name(int path);
/* ddl__bf16_round: x to bfloat16, to nearest even (a subnormal to a zero of its sign, NaN quiet);
 * ddl__bf16_float: back to float, exactly. */
uint16_t ddl__bf16_round(float x);
float ddl__bf16_float(uint16_t h);
/* ddl__bf16_ftz: a subnormal float becomes a zero of its sign (what vdpbf16ps writes, and what
 * tdpbf16ps reads and writes): the scalar references' and the AMX emulation's one rule. */
float ddl__bf16_ftz(float v);
/* C += alpha op(A) op(B) (C row-major, m x n; overwrite 1: C's old values are taken as +0, not
 * read) in bfloat16 with float32 sums, in the order gemm_bf16.c defines: ddl__gemm_bf16 by this
 * CPU's path; _ref by scalar code (the reference the paths match bit for bit); _avx512 by
 * vdpbf16ps (only where _avx512_have says 1). */
void ddl__gemm_bf16(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                    const float *b, int ldb, int overwrite, float *c, int ldc);
void ddl__gemm_bf16_ref(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                        const float *b, int ldb, int overwrite, float *c, int ldc);
int ddl__gemm_bf16_avx512_have(void);
void ddl__gemm_bf16_avx512(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                           const float *b, int ldb, int overwrite, float *c, int ldc);
/* The AMX path (gemm_bf16_amx.c): its own order of sums (tdpbf16ps's: per tile of 16 pairs of k,
 * an even and an odd sum, added, then added to the slice's sum; gemm_bf16.c says it in full),
 * so its own reference, _amx_ref. _amx by the CPU's tiles (only where _amx_have says 1: it also
 * asks Linux for the tile state, once); _amx_emu the same loop over a C emulation of the tile
 * instructions (packing in C), on any CPU. _amx_check: the tiles against the emulation on a small product:
 * DDL_OK, or a code and one line in note saying what differed (gemm_bf16.c's path choice). */
void ddl__gemm_bf16_amx_ref(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                            const float *b, int ldb, int overwrite, float *c, int ldc);
int ddl__gemm_bf16_amx_have(void);
void ddl__gemm_bf16_amx(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                        const float *b, int ldb, int overwrite, float *c, int ldc);
void ddl__gemm_bf16_amx_emu(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                            const float *b, int ldb, int overwrite, float *c, int ldc);
/* _amx_emu_avx512: the CPU's loop (AVX-512 packing) over emulated tiles: only where
 * ddl__gemm_bf16_avx512_have says 1 (elsewhere _amx_emu's). */
void ddl__gemm_bf16_amx_emu_avx512(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                                   int lda, const float *b, int ldb, int overwrite, float *c, int ldc);
int ddl__gemm_bf16_amx_check(char *note, size_t note_bytes);
/* ddl__cb_amx_check: the direct convolution's AMX kernels (conv_bf16_amx.c: tiles of fewer rows
 * and columns, loads at 2-byte boundaries) on the CPU's tiles against their emulation, forward
 * and weight gradient: as _amx_check. conv_bf16.c runs it once, on the AMX path's first direct
 * convolution (or at ddl__conv2d_bf16_amx_note); if it fails, those convolutions take im2col and
 * the product (whose tiles passed theirs), and ddl__conv2d_bf16_amx_note says why ("" otherwise,
 * and where AMX is not the path). */
int ddl__cb_amx_check(char *note, size_t note_bytes);
const char *ddl__conv2d_bf16_amx_note(void);
/* op(A) packed once for many products with it (a convolution's weights, chunk after chunk of
 * samples): _packed_words(m, k) the room, in 32-bit words, of op(A) (m x k) packed whole for a
 * path's loop; _pack fills it; _packed(pa, ...) is the product with op(A) read from pa, the same
 * bits as packing it on the way. ddl__gemm_bf16_packed_words is this CPU's path's (0 without
 * one); ddl__gemm_packed (gemm.c): C (m x n) = op(A) op(B) in bfloat16, over the threads as
 * ddl_gemm's bfloat16 products. */
size_t ddl__gemm_bf16_packed_words(int m, int k);
/* The layout of op(A) packed whole, either loop's: slice after slice of DDL__BF16_KC, each its
 * blocks of mc rows in order, a block of `rows` rows and depth kc taking block_words(rows, kc)
 * (the loop's own packing of one). _a_at: where the block of rows [i0, ...) and depth [p0, p0 +
 * kc) starts; _a_words: the whole, m x k. */
size_t ddl__bf16_a_at(int m, int p0, int i0, int kc, int mc, size_t (*block_words)(int rows, int kc));
size_t ddl__bf16_a_words(int m, int k, int mc, size_t (*block_words)(int rows, int kc));
void ddl__gemm_bf16_pack(int trans_a, int m, int k, const float *a, int lda, uint32_t *pa);
void ddl__gemm_bf16_packed(const uint32_t *pa, int trans_b, int m, int n, int k, float alpha, const float *b, int ldb,
                           int overwrite, float *c, int ldc);
void ddl__gemm_packed(const uint32_t *pa, int trans_b, int m, int n, int k, const float *b, int ldb, float *c, int ldc);
size_t ddl__gemm_bf16_avx512_packed_words(int m, int k);
void ddl__gemm_bf16_avx512_pack(int trans_a, int m, int k, const float *a, int lda, uint32_t *pa);
void ddl__gemm_bf16_avx512_packed(const uint32_t *pa, int trans_b, int m, int n, int k, float alpha, const float *b,
                                  int ldb, int overwrite, float *c, int ldc);
size_t ddl__gemm_bf16_amx_packed_words(int m, int k);
void ddl__gemm_bf16_amx_pack(int trans_a, int m, int k, const float *a, int lda, uint32_t *pa);
void ddl__gemm_bf16_amx_packed(const uint32_t *pa, int trans_b, int m, int n, int k, float alpha, const float *b,
                               int ldb, int overwrite, float *c, int ldc);
void ddl__gemm_bf16_amx_emu_avx512_packed(const uint32_t *pa, int trans_b, int m, int n, int k, float alpha,
                                          const float *b, int ldb, int overwrite, float *c, int ldc);
#ifdef DDL_AMX_FREE_TILES /* a build to measure AMX's loop without its tiles (gemm_bf16_amx.c) */
void ddl__gemm_bf16_amx_free(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                             const float *b, int ldb, int overwrite, float *c, int ldc);
#endif
/* ddl__bf16_choose: the path of a CPU with amx / avx512 (1 or 0) and the environment's no_bf16,
 * no_amx: AMX only if amx_check passes (its failure, or AMX hidden, said in note); else
 * AVX512-BF16; else none. ddl__bf16_path's choice, apart so that a test can feed it. */
int ddl__bf16_choose(int no_bf16, int no_amx, int amx, int (*amx_check)(char *, size_t), int avx512, char *note,
                     size_t note_bytes);
/* ddl__bf16_path_note: why the path is not the fastest the CPU has (AMX hidden or failing its
 * check), or "" (a static string, set with the path). */
const char *ddl__bf16_path_note(void);

/* BatchNorm's sums over a channel's n rows of s floats (plane floats apart), on x86-64-v3 and
 * later (batchnorm_fma.c), in batchnorm.c's order there: ddl__bn_sums_fma, with dy0 NULL the sums
 * of d = x - k and of d^2, else of dy and of dy (x - k) (k: the mean); each row's sum added to the
 * double in sample order. Only where ddl__bn_fma_ok. */
int ddl__bn_fma_ok(void);
void ddl__bn_sums_fma(int n, int s, size_t plane, const float *x0, const float *dy0, float k, double *s1, double *s2);
/* The same for a block of nch neighbouring channels (channel c's rows at x0 + c s), sample by
 * sample, for short rows: ddl__bn_block_sums_fma, the moments about k[c] (dy0 NULL) or the
 * gradient sums about k[c] = the mean; _affine, y = (x - m) a + b by FMA; _dx, dx = gr ((dy - md)
 * - (x - m) mdx), the product subtracted by FMA. A block is at most DDL__BN_SPAN floats a sample
 * (nch s). */
#define DDL__BN_SPAN 256
void ddl__bn_block_sums_fma(int n, int s, size_t plane, const float *x0, const float *dy0, int nch, const float *k,
                            double *s1, double *s2);
void ddl__bn_block_affine_fma(int n, int s, size_t plane, const float *x0, int nch, const float *m, const float *a,
                              const float *b, float *y0);
void ddl__bn_block_dx_fma(int n, int s, size_t plane, const float *x0, const float *dy0, int nch, const float *m,
                          const float *gr, const float *md, const float *mdx, float *dx0);

/* ---- direct bfloat16 convolution (conv_bf16.c, conv_bf16_avx512.c) ----
 * ddl__conv2d_bf16_ok: 1 when the calling thread's pass is bfloat16 (and not invariant), this
 * CPU's path is AVX512-BF16 and g is a 3x3 or 5x5, stride 1 convolution of planes the kernels
 * take (8x8 and up); _fits: the same whatever the precision (the workspace's question). Then
 * _forward, _dx and _dw (dw +=; the bias gradient is the caller's) run without a column matrix,
 * in _workspace(g) floats of ws; _dw only where _dw_fits (planes of 16x16 and up: smaller ones
 * are im2col's). The _ref functions: the scalar reference, bit for bit. */
int ddl__conv2d_bf16_ok(const ddl_conv2d *g);
int ddl__conv2d_bf16_fits(const ddl_conv2d *g);
int ddl__conv2d_bf16_dw_fits(const ddl_conv2d *g);
size_t ddl__conv2d_bf16_workspace(const ddl_conv2d *g);
void ddl__conv2d_bf16_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y,
                              float *ws);
void ddl__conv2d_bf16_forward_relu(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y,
                                   float *ws);
void ddl__conv2d_bf16_dx(const ddl_conv2d *g, const float *w, const float *dy, float *dx, float *ws);
void ddl__conv2d_bf16_dw(const ddl_conv2d *g, const float *x, const float *dy, float *dw, float *ws);
void ddl__conv2d_bf16_ref_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y);
void ddl__conv2d_bf16_ref_dx(const ddl_conv2d *g, const float *w, const float *dy, float *dx);
void ddl__conv2d_bf16_ref_dw(const ddl_conv2d *g, const float *x, const float *dy, float *dw);
/* ddl__conv2d_forward_relu: ddl_conv2d_forward, then y = max(y, 0) in place as ddl_relu_forward
 * gives it (the graph's conv with its ReLU after it): in the copy of the outputs where the
 * direct bfloat16 kernels run, else a pass after. */
void ddl__conv2d_forward_relu(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y,
                              float *ws);
/* ddl__maxpool2d_backward_relu: ddl_maxpool2d_backward with the ReLU before the pool folded in:
 * a window's gradient goes to its maximum only where the window's output y > 0 (the ReLU's
 * output there), else +0: ddl_maxpool2d_backward then ddl_relu_backward, bit for bit. */
void ddl__maxpool2d_backward_relu(const ddl_pool2d *p, int n, int c, int h, int w, const float *dy,
                                  const int32_t *argmax, const float *y, float *dx);
/* ddl__conv2d_bf16_amx_emulate: on 1, the direct bfloat16 convolutions take the AMX kernels'
 * layout and order over emulated tiles (conv_bf16_amx.c) on any CPU with AVX512-BF16, and the
 * references give that order: for tests; 0 (the default): the CPU's path. Set it while no pass
 * runs. */
void ddl__conv2d_bf16_amx_emulate(int on);

#endif
