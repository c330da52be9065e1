/* conv_bf16.c - direct bfloat16 convolution (--precision bf16): 3x3 and 5x5, stride 1, pad up
 * to k - 1, forward, input gradient and weight gradient without a column matrix, on
 * conv_bf16_avx512.c's vdpbf16ps kernels; and the scalar reference they match bit for bit
 * (tests/test_conv_bf16_direct.c). conv.c sends a bfloat16 pass here when ddl__conv2d_bf16_ok.
 *
 * im2col + the bfloat16 product (conv.c, gemm_bf16*.c) wrote and packed 9 copies of every input
 * value a pass; here each sample is rounded once into the layout the instruction reads: for the
 * forward pass and the input gradient, two channels of a pixel in one 32-bit word (channel 2i in
 * the low half), in conv_wide.c's wide rows, so that a tap of a channel pair is one load; for the
 * weight gradient, whose sums run over positions, plain bfloat16 planes (a word: two neighbouring
 * positions).
 *
 * The sums, the same on every path and at any thread count:
 *  - forward (and input gradient, the forward of dy padded by k - 1 - pad with the weights
 *    flipped and transposed): each output from +0 over the channel pairs in order, each pair over
 *    the taps in row-major order (every tap: the padding's zeros are added too), one step a tap:
 *    acc = ftz(fmaf(x_hi, w_hi, acc)), then acc = ftz(fmaf(x_lo, w_lo, acc)) with x and w rounded
 *    to bfloat16 (a missing odd channel 0); then y = acc + bias (or + 0);
 *  - weight gradient: for each weight, 16 lane sums m from +0; the samples in passes of
 *    dw_samples, the wide positions in blocks of dw_block (both fixed by the geometry); for each
 *    pass and block, each lane l from +0 over the pass's samples in order, each over the position
 *    pairs (j + 2l, j + 2l + 1) of the block, j = j0, j0 + 32, ... (dy 0 past the real
 *    positions), the same two-step pair as above; then m[l] += it; at the end
 *    dw += the lanes added pairwise (conv_wide.c's order).
 * Threads: forward and input gradient by samples, the weight gradient by ranges of output-channel
 * groups (each weight's sums over every sample in order, whatever the range). Nothing allocates. */
#include "impl.h"
#include "amx_tiles.h"
#include "conv_bf16_kernels.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

static int amx_emulated; /* ddl__conv2d_bf16_amx_emulate */

void ddl__conv2d_bf16_amx_emulate(int on) { amx_emulated = on; }

static int amx_checked; /* the kernels on this CPU's tiles matched their emulation */
static char amx_note[200];

static void amx_check_once(void)
{
#ifdef DDL_AMX_FREE_TILES /* tiles that do nothing: nothing to check, the results are wrong anyway */
    amx_checked = 1;
#else
    amx_checked = ddl__cb_amx_check(amx_note, sizeof amx_note) == DDL_OK;
#endif
}



/* amx_now: the AMX kernels run (on the CPU's tiles once they passed their check, or emulated
 * ones for a test). */
static int amx_now(void)
{
    if (amx_emulated)
        return 1;
    if (ddl__bf16_path() != DDL__BF16_AMX)
        return 0;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, amx_check_once);
    return amx_checked;
}

const char *ddl__conv2d_bf16_amx_note(void)
{
    (void)amx_now(); /* the check, once, where AMX is the path */
    return amx_note;
}

static ddl__cb_geo cb_view(int c_in, int c_out, int h, int w, int pad, int k)
{
    int cp = (c_in + 1) / 2;
    ddl__cb_geo q = {c_in, c_out, h, w, pad, k, k * k, w + pad, h + 2 * pad, h + 2 * pad - k + 1,
                     w + 2 * pad - k + 1, 8, cp, 0, 0, 0, 0, 0, 1, cp, cp};
    if (c_out <= 4)
        q.ocb = 4;
    if (amx_now()) { /* runs of up to 16 pairs, as even as they go: 17 pairs are 2 runs of 9 */
        q.amx = 1;
        q.ocb = 16;
        q.nch = (cp + 15) / 16;
        q.kch = (cp + q.nch - 1) / q.nch;
        q.cpad = q.nch * q.kch;
    }
    size_t real = (size_t)q.oh * q.wp, reach = (size_t)(k - 1) * (q.wp + 1);
    q.len = (real + DDL__CB_J - 1) / DDL__CB_J * DDL__CB_J;
    q.plane = (q.len + reach + 15) / 16 * 16; /* the last tile's reads stay inside */
    q.dlen = (real + DDL__CB_DJ - 1) / DDL__CB_DJ * DDL__CB_DJ;
    q.dplane = (q.dlen + reach + 31) / 32 * 32;
    return q;
}

static ddl__cb_geo cb_dx_view(const ddl_conv2d *g)
{
    int k = g->k_h;
    return cb_view(g->out_c, g->in_c, g->in_h + 2 * g->pad - k + 1, g->in_w + 2 * g->pad - k + 1, k - 1 - g->pad, k);
}

static size_t oc_blocks(const ddl__cb_geo *q) { return (size_t)(q->c_out + q->ocb - 1) / q->ocb; }

/* FWD_CHUNK: wide positions the forward tiles sweep before their sums are copied out: 16 tiles,
 * so that the ocb rows of sums stay in the L1 cache (24 KB) between the two (a 64x64 plane's
 * whole row of tiles, 133 KB, went through L2). */
#define FWD_CHUNK ((size_t)16 * DDL__CB_J)

/* fwd_task: a sample's pairs and a chunk's sums (floats); fwd_weights: the packed weight pairs. */
static size_t fwd_task(const ddl__cb_geo *q) { return (size_t)q->cpad * q->plane + (size_t)q->ocb * FWD_CHUNK; }
static size_t fwd_weights(const ddl__cb_geo *q) { return oc_blocks(q) * q->ocb * (size_t)q->cpad * q->taps; }

/* dw_samples: samples a pass of the weight-gradient tiles, from the geometry alone (the sums'
 * order): as many as fit DW_CHUNK floats of bfloat16 input planes and dy rows, 1 to 16. A tile's
 * sums are added to memory once a pass: on 16x16 planes a sample is only 9 steps of the tile, on
 * 8x8 planes 3 (ResNet-18's 128 -> 128 at 8x8: 10.8 -> 9.5 ms with up to 16 samples, not 8;
 * tools/bench/resnet_layers.c). */
#define DW_CHUNK ((size_t)1 << 18)
static int dw_samples(const ddl__cb_geo *q)
{
    size_t per = ((size_t)q->c_in * q->dplane + (size_t)q->c_out * q->dlen) / 2, n = DW_CHUNK / per;
    return n < 1 ? 1 : n > 16 ? 16 : (int)n;
}

/* The weight gradient's ranges: dw_fixed, what a range needs whatever its width (a pass's input
 * planes in bfloat16); dw_group, what a group of DDL__CB_OCG output
 * channels adds (their bfloat16 dy rows for a pass, their lane sums). */
static size_t dw_fixed(const ddl__cb_geo *q)
{
    return (size_t)dw_samples(q) * q->c_in * q->dplane / 2;
}
static size_t dw_group(const ddl__cb_geo *q)
{
    return DDL__CB_OCG * ((size_t)dw_samples(q) * q->dlen / 2 + (size_t)q->c_in * q->taps * 16);
}
static int dw_groups(const ddl__cb_geo *q) { return (q->c_out + DDL__CB_OCG - 1) / DDL__CB_OCG; }

/* dw_per: groups a range, at most: as many as fit a thread's scratch (1 at least). */
static int dw_per(const ddl__cb_geo *q)
{
    int groups = dw_groups(q);
    size_t fixed = dw_fixed(q), fit = fixed + dw_group(q) <= DDL__THREAD_SCRATCH ? (DDL__THREAD_SCRATCH - fixed) / dw_group(q) : 1;
    return fit < (size_t)groups ? (int)fit : groups;
}

/* fits: the kernels take q when at least 3/4 of their tiles' positions are real (conv_wide.c's
 * rule: smaller planes, ResNet-18's 4x4 and 2x2, are im2col's). */
static int fits(const ddl__cb_geo *q)
{
    size_t real = (size_t)q->oh * q->wp;
    return 4 * real >= 3 * q->len && 4 * real >= 3 * q->dlen;
}

static int geometry_ok(const ddl_conv2d *g)
{
    int k = g->k_h;
    if (!(g->batch >= 1 && g->in_c >= 1 && g->out_c >= 1 && g->stride == 1 && ddl__conv2d_plain(g) &&
          (k == 3 || k == 5) && g->k_w == k && g->pad >= 0 && g->pad <= k - 1 && g->in_h + 2 * g->pad >= k &&
          g->in_w + 2 * g->pad >= k))
        return 0;
    ddl__cb_geo f = cb_view(g->in_c, g->out_c, g->in_h, g->in_w, g->pad, k), b = cb_dx_view(g);
    return fits(&f) && fits(&b);
}

int ddl__conv2d_bf16_fits(const ddl_conv2d *g)
{
#ifdef DDL_NO_BF16_CONV /* to measure against im2col + the bfloat16 product */
    return 0;
#endif
    /* AMX: the tiles convolve, AVX-512 converts (every AMX CPU has AVX512-BF16) */
    return (ddl__bf16_path() == DDL__BF16_AVX512 || amx_now()) && ddl__cb_avx512_have() && geometry_ok(g);
}

/* DW_MIN_STEPS: the weight gradient's tile steps a sample (wide positions / DDL__CB_DJ) below
 * which im2col and the bfloat16 product take that pass: a tile's sums go to memory once a pass,
 * and on an 8x8 plane a sample is 3 steps. ResNet-18's 128 -> 128 at 8x8 (tools/bench/
 * resnet_layers.c): 9.1-9.5 ms direct, 5.6-5.8 by im2col; its 64 -> 64 at 16x16 (9 steps):
 * 5.2 direct, 7.8 by im2col; the forward pass and input gradient stay direct (at 8x8 the input
 * gradient took 6.6-6.8 ms by im2col against 5.4). */
#define DW_MIN_STEPS 8

int ddl__conv2d_bf16_dw_fits(const ddl_conv2d *g)
{
    if (!ddl__conv2d_bf16_fits(g))
        return 0;
    ddl__cb_geo q = cb_view(g->in_c, g->out_c, g->in_h, g->in_w, g->pad, g->k_h);
    return q.amx || q.dlen >= (size_t)DW_MIN_STEPS * DDL__CB_DJ;
}

int ddl__conv2d_bf16_ok(const ddl_conv2d *g)
{
    return ddl__precision() == DDL_PRECISION_BF16 && !ddl__invariant() && ddl__conv2d_bf16_fits(g);
}

size_t ddl__conv2d_bf16_workspace(const ddl_conv2d *g)
{
    if (!geometry_ok(g))
        return 0;
    ddl__cb_geo f = cb_view(g->in_c, g->out_c, g->in_h, g->in_w, g->pad, g->k_h), b = cb_dx_view(g);
    size_t a = fwd_task(&f) + fwd_weights(&f), c = fwd_task(&b) + fwd_weights(&b);
    size_t d = f.amx ? ddl__cb_dw_amx_workspace(&f) : dw_fixed(&f) + (size_t)dw_per(&f) * dw_group(&f);
    a = a > c ? a : c;
    return a > d ? a : d;
}

/* ---- forward and input gradient ---- */

static uint32_t pair(float lo, float hi) { return ddl__bf16_round(lo) | (uint32_t)ddl__bf16_round(hi) << 16; }

/* weight_pair: the pair of input channels 2c, 2c + 1 for output channel oc and tap t; flip as
 * conv_wide.c's (w of the conv being transposed, taps reversed). Channels past c_out or c_in:
 * zeros. */
static uint32_t weight_pair(const ddl__cb_geo *q, const float *w, int flip, int oc, int c, size_t t)
{
    size_t kk = (size_t)q->taps;
    float v[2] = {0.0f, 0.0f};
    for (int h = 0; h < 2 && oc < q->c_out; h++) {
        int ic = 2 * c + h;
        if (ic < q->c_in)
            v[h] = flip ? w[((size_t)ic * q->c_out + oc) * kk + (kk - 1 - t)] : w[((size_t)oc * q->c_in + ic) * kk + t];
    }
    return pair(v[0], v[1]);
}

/* pack_weights: wk, for each block of ocb output channels, (cp, taps, ocb) weight pairs for the
 * AVX512-BF16 kernel; (taps, nch, 16, kch) for AMX's (a tile A of 16 channels x kch pairs). */
static void pack_weights(const ddl__cb_geo *q, const float *w, int flip, uint32_t *wk)
{
    size_t kk = (size_t)q->taps;
    for (size_t ob = 0; ob < oc_blocks(q); ob++, wk += (size_t)q->cpad * kk * q->ocb)
        for (int c = 0; c < q->cpad; c++)
            for (size_t t = 0; t < kk; t++)
                for (int o = 0; o < q->ocb; o++) {
                    size_t at = q->amx ? ((t * q->nch + (size_t)(c / q->kch)) * 16 + o) * q->kch + (size_t)(c % q->kch)
                                       : ((size_t)c * kk + t) * q->ocb + o;
                    wk[at] = weight_pair(q, w, flip, (int)ob * q->ocb + o, c, t);
                }
}

typedef struct fwd_job {
    const ddl__cb_geo *q;
    const float *x, *b;
    const uint32_t *wk;
    float *y;
    int relu; /* y = max(y, 0) as it is copied out */
} fwd_job;

static void fwd_sample(void *ctx, int n, float *ws)
{
    const fwd_job *j = ctx;
    const ddl__cb_geo *q = j->q;
    size_t in_sz = (size_t)q->c_in * q->h * q->w, p = (size_t)q->oh * q->ow, off[DDL__CB_MAX_TAPS];
    uint32_t *xp = (uint32_t *)ws;
    float *acc = ws + (size_t)q->cpad * q->plane, *y = j->y + (size_t)n * q->c_out * p; /* acc: (ocb, FWD_CHUNK) */
    ddl__cb_tap_offsets(q, off);
    ddl__cb_pairs_avx512(q, j->x + (size_t)n * in_sz, xp);
    memset(xp + (size_t)q->cp * q->plane, 0, (size_t)(q->cpad - q->cp) * q->plane * sizeof *xp); /* AMX's last run */
    void (*kernel)(const ddl__cb_geo *, const size_t *, size_t, size_t, const uint32_t *, const uint32_t *, float *,
                   size_t) = !q->amx ? ddl__cb_fwd_avx512 : amx_emulated ? ddl__cb_fwd_amx_emu : ddl__cb_fwd_amx;
    for (size_t j0 = 0; j0 < q->len; j0 += FWD_CHUNK) /* a chunk's input rows stay in L1 over the blocks */
        for (size_t ob = 0; ob < oc_blocks(q); ob++) {
            size_t j1 = j0 + FWD_CHUNK < q->len ? j0 + FWD_CHUNK : q->len;
            kernel(q, off, j0, j1, xp, j->wk + ob * q->cpad * q->taps * q->ocb, acc, FWD_CHUNK);
            for (int o = 0; o < q->ocb && (int)ob * q->ocb + o < q->c_out; o++) {
                int oc = (int)ob * q->ocb + o;
                float bv = j->b ? j->b[oc] : 0.0f, *yo = y + (size_t)oc * p;
                for (size_t oy = j0 / (size_t)q->wp; oy < (size_t)q->oh && oy * q->wp < j1; oy++) {
                    /* the row's real positions inside the chunk */
                    size_t row = oy * q->wp, a = row < j0 ? j0 - row : 0, e = j1 - row < (size_t)q->ow ? j1 - row : (size_t)q->ow;
                    if (a < e)
                        ddl__cb_add_avx512(acc + (size_t)o * FWD_CHUNK + (row + a - j0), e - a, bv, j->relu,
                                           yo + oy * q->ow + a);
                }
            }
        }
    ddl__cb_add_fence_avx512(); /* its streaming stores seen by every thread before the pass returns */
}

static void fwd_run(const ddl__cb_geo *q, int batch, const float *x, const float *w, int flip, const float *b,
                    int relu, float *y, float *ws)
{
    size_t task = fwd_task(q);
    uint32_t *wk = (uint32_t *)(ws + task);
    pack_weights(q, w, flip, wk);
    fwd_job j = {q, x, b, wk, y, relu};
    if (ddl__threads() > 1 && batch > 1 && task <= DDL__THREAD_SCRATCH) {
        ddl__parallel_ws(batch, fwd_sample, &j, ws);
        return;
    }
    for (int n = 0; n < batch; n++)
        fwd_sample(&j, n, ws);
}

void ddl__conv2d_bf16_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y,
                              float *ws)
{
    ddl__cb_geo q = cb_view(g->in_c, g->out_c, g->in_h, g->in_w, g->pad, g->k_h);
    fwd_run(&q, g->batch, x, w, 0, b, 0, y, ws);
}

void ddl__conv2d_bf16_forward_relu(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y,
                                   float *ws)
{
    ddl__cb_geo q = cb_view(g->in_c, g->out_c, g->in_h, g->in_w, g->pad, g->k_h);
    fwd_run(&q, g->batch, x, w, 0, b, 1, y, ws);
}

void ddl__conv2d_bf16_dx(const ddl_conv2d *g, const float *w, const float *dy, float *dx, float *ws)
{
    ddl__cb_geo q = cb_dx_view(g);
    fwd_run(&q, g->batch, dy, w, 1, NULL, 0, dx, ws);
}

/* ---- weight gradient ---- */

/* lanes: the 16 floats at v added pairwise in a fixed order (conv_wide.c's). */
static float lanes(const float *v)
{
    float s8[8];
    for (int i = 0; i < 8; i++)
        s8[i] = v[i] + v[i + 8];
    return ((s8[0] + s8[4]) + (s8[2] + s8[6])) + ((s8[1] + s8[5]) + (s8[3] + s8[7]));
}

typedef struct dw_job {
    const ddl__cb_geo *q;
    int batch, per;
    const float *x, *dy;
    float *dw;
} dw_job;

/* dw_range: the groups [t per, t per + per) of output channels: every sample in order, ns a
 * pass, into their lane sums, then dw += each weight's lanes. */
static void dw_range(void *ctx, int t, float *ws)
{
    const dw_job *j = ctx;
    const ddl__cb_geo *q = j->q;
    int lo = t * j->per, groups = dw_groups(q), hi = lo + j->per < groups ? lo + j->per : groups;
    int nch = DDL__CB_OCG * (hi - lo), c0 = DDL__CB_OCG * lo, ns = dw_samples(q);
    size_t in_sz = (size_t)q->c_in * q->h * q->w, p = (size_t)q->oh * q->ow, kk = (size_t)q->c_in * q->taps;
    size_t xs = (size_t)q->c_in * q->dplane, ds = (size_t)nch * q->dlen, block = ddl__cb_dw_block(q), off[DDL__CB_MAX_TAPS];
    ddl__cb_tap_offsets(q, off);
    uint16_t *xb = (uint16_t *)ws, *dyb = xb + (size_t)ns * xs;
    float *m = (float *)(dyb + (size_t)ns * ds);
    memset(m, 0, (size_t)nch * kk * 16 * sizeof *m);
    for (int n0 = 0; n0 < j->batch; n0 += ns) {
        int k = j->batch - n0 < ns ? j->batch - n0 : ns;
        for (int s = 0; s < k; s++) {
            for (int ic = 0; ic < q->c_in; ic++) /* padded: pad rows above, pad zeros before each row */
                ddl__cb_plane_avx512(j->x + (size_t)(n0 + s) * in_sz + (size_t)ic * q->h * q->w, q->h, q->w,
                                     (size_t)q->pad * q->wp + (size_t)q->pad, (size_t)q->wp, q->dplane,
                                     xb + (size_t)s * xs + (size_t)ic * q->dplane);
            for (int c = 0; c < nch; c++) { /* the last group's spare channels: zero rows */
                int real = c0 + c < q->c_out;
                ddl__cb_plane_avx512(j->dy + ((size_t)(n0 + s) * q->c_out + (real ? c0 + c : 0)) * p, real ? q->oh : 0,
                                     q->ow, 0, (size_t)q->wp, q->dlen, dyb + (size_t)s * ds + (size_t)c * q->dlen);
            }
        }
        for (size_t j0 = 0; j0 < q->dlen; j0 += block)
            for (int g = 0; g < hi - lo; g++) {
                const uint16_t *dy[DDL__CB_OCG];
                float *mo[DDL__CB_OCG];
                for (int o = 0; o < DDL__CB_OCG; o++) {
                    dy[o] = dyb + (size_t)(DDL__CB_OCG * g + o) * q->dlen;
                    mo[o] = m + (size_t)(DDL__CB_OCG * g + o) * kk * 16;
                }
                ddl__cb_dw_avx512(q, off, j0, j0 + block < q->dlen ? j0 + block : q->dlen, k, xb, xs, dy, ds, mo);
            }
    }
    for (int c = 0; c < nch && c0 + c < q->c_out; c++)
        for (size_t e = 0; e < kk; e++)
            j->dw[(size_t)(c0 + c) * kk + e] += lanes(m + ((size_t)c * kk + e) * 16);
}

void ddl__conv2d_bf16_dw(const ddl_conv2d *g, const float *x, const float *dy, float *dw, float *ws)
{
    ddl__cb_geo q = cb_view(g->in_c, g->out_c, g->in_h, g->in_w, g->pad, g->k_h);
    if (q.amx) {
        ddl__cb_dw_amx(&q, g->batch, x, dy, dw, ws, amx_emulated);
        return;
    }
    int per = dw_per(&q);
    dw_job j = {&q, g->batch, per, x, dy, dw};
    ddl__cb_ranges(dw_groups(&q), per, dw_fixed(&q) + (size_t)per * dw_group(&q), &j.per, dw_range, &j, ws);
}

/* ---- the reference ---- */

static float r16(float v) { return ddl__bf16_float(ddl__bf16_round(v)); }

/* step: one vdpbf16ps lane: the high pair's product first, then the low one's. */
static float step(float acc, float x_lo, float x_hi, float w_lo, float w_hi)
{
    acc = ddl__bf16_ftz(fmaf(r16(x_hi), r16(w_hi), acc));
    return ddl__bf16_ftz(fmaf(r16(x_lo), r16(w_lo), acc));
}

/* ref_output: one output's sum (x one sample) in the AVX512-BF16 kernel's order: from +0, pair
 * by pair and tap by tap, one vdpbf16ps step each. */
static float ref_output(const ddl__cb_geo *q, const float *x, const float *w, int flip, int oc, int oy, int ox)
{
    float acc = 0.0f;
    for (int c = 0; c < q->cp; c++)
        for (int t = 0; t < q->taps; t++) {
            int iy = oy + t / q->k - q->pad, ix = ox + t % q->k - q->pad, in = iy >= 0 && iy < q->h && ix >= 0 && ix < q->w;
            uint32_t wp = weight_pair(q, w, flip, oc, c, (size_t)t);
            float xv[2] = {0.0f, 0.0f};
            for (int i = 0; i < 2 && in; i++)
                if (2 * c + i < q->c_in)
                    xv[i] = x[((size_t)(2 * c + i) * q->h + iy) * q->w + ix];
            acc = step(acc, xv[0], xv[1], bits_float(wp << 16), bits_float(wp & 0xffff0000u));
        }
    return acc;
}

/* ref_amx_output: one output's sum in the AMX kernel's order: from +0, tap by tap and run by run
 * of kch pairs, each run one tdpbf16ps (amx_tiles.h): two sums from +0, of the low halves' and
 * of the high halves' products, pair by pair, added, then added to the output's. */
static float ref_amx_output(const ddl__cb_geo *q, const float *x, const float *w, int flip, int oc, int oy, int ox)
{
    float acc = 0.0f;
    for (int t = 0; t < q->taps; t++) {
        int iy = oy + t / q->k - q->pad, ix = ox + t % q->k - q->pad, in = iy >= 0 && iy < q->h && ix >= 0 && ix < q->w;
        for (int h = 0; h < q->nch; h++) {
            float even = 0.0f, odd = 0.0f;
            for (int c = h * q->kch; c < (h + 1) * q->kch; c++) {
                uint32_t wp = weight_pair(q, w, flip, oc, c, (size_t)t);
                float xv[2] = {0.0f, 0.0f};
                for (int i = 0; i < 2 && in; i++)
                    if (2 * c + i < q->c_in)
                        xv[i] = r16(x[((size_t)(2 * c + i) * q->h + iy) * q->w + ix]);
                even = ftz(fmaf(daz(bits_float(wp << 16)), daz(xv[0]), even));
                odd = ftz(fmaf(daz(bits_float(wp & 0xffff0000u)), daz(xv[1]), odd));
            }
            acc = ftz(daz(acc) + ftz(even + odd));
        }
    }
    return acc;
}

/* ref_conv: y = the convolution of q on x (batch samples) with w (flip: as pack_weights), + b. */
static void ref_conv(const ddl__cb_geo *q, int batch, const float *x, const float *w, int flip, const float *b,
                     float *y)
{
    for (int n = 0; n < batch; n++)
        for (int oc = 0; oc < q->c_out; oc++)
            for (int oy = 0; oy < q->oh; oy++)
                for (int ox = 0; ox < q->ow; ox++) {
                    const float *xn = x + (size_t)n * q->c_in * q->h * q->w;
                    float acc = q->amx ? ref_amx_output(q, xn, w, flip, oc, oy, ox) : ref_output(q, xn, w, flip, oc, oy, ox);
                    y[(((size_t)n * q->c_out + oc) * q->oh + oy) * q->ow + ox] = acc + (b ? b[oc] : 0.0f);
                }
}

void ddl__conv2d_bf16_ref_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y)
{
    ddl__cb_geo q = cb_view(g->in_c, g->out_c, g->in_h, g->in_w, g->pad, g->k_h);
    ref_conv(&q, g->batch, x, w, 0, b, y);
}

void ddl__conv2d_bf16_ref_dx(const ddl_conv2d *g, const float *w, const float *dy, float *dx)
{
    ddl__cb_geo q = cb_dx_view(g);
    ref_conv(&q, g->batch, dy, w, 1, NULL, dx);
}

/* wide_dy / wide_x: the value at wide position p of a sample's dy plane (0 past the real ones)
 * and of its input plane padded (0 in the borders). */
static float wide_dy(const ddl__cb_geo *q, const float *dy, size_t p)
{
    size_t row = p / (size_t)q->wp, col = p % (size_t)q->wp;
    return row < (size_t)q->oh && col < (size_t)q->ow ? dy[row * q->ow + col] : 0.0f;
}

static float wide_x(const ddl__cb_geo *q, const float *x, size_t p)
{
    long iy = (long)(p / (size_t)q->wp) - q->pad, ix = (long)(p % (size_t)q->wp) - q->pad;
    return iy >= 0 && iy < q->h && ix >= 0 ? x[(size_t)iy * q->w + (size_t)ix] : 0.0f;
}

/* ref_dw_amx: the weight gradient in the AMX kernel's order (conv_bf16_kernels.h) */
static void ref_dw_amx(const ddl__cb_geo *q, int batch, const float *x, const float *dy, float *dw)
{
    size_t off[DDL__CB_MAX_TAPS], hw = (size_t)q->h * q->w, p = (size_t)q->oh * q->ow, block;
    int ns;
    ddl__cb_dw_amx_order(q, &ns, &block);
    ddl__cb_tap_offsets(q, off);
    for (int oc = 0; oc < q->c_out; oc++)
        for (int ic = 0; ic < q->c_in; ic++)
            for (int t = 0; t < q->taps; t++) {
                float sum = 0.0f;
                for (int n0 = 0; n0 < batch; n0 += ns)
                    for (size_t j0 = 0; j0 < q->dlen; j0 += block)
                        for (int n = n0; n < n0 + ns && n < batch; n++) {
                            const float *xs = x + ((size_t)n * q->c_in + ic) * hw, *ds = dy + ((size_t)n * q->c_out + oc) * p;
                            for (size_t j = j0; j < j0 + block && j < q->dlen; j += 32) {
                                float even = 0.0f, odd = 0.0f;
                                for (size_t e = j; e < j + 32; e += 2) {
                                    even = ftz(fmaf(daz(r16(wide_x(q, xs, e + off[t]))), daz(r16(wide_dy(q, ds, e))), even));
                                    odd = ftz(fmaf(daz(r16(wide_x(q, xs, e + 1 + off[t]))), daz(r16(wide_dy(q, ds, e + 1))), odd));
                                }
                                sum = ftz(daz(sum) + ftz(even + odd));
                            }
                        }
                dw[((size_t)oc * q->c_in + ic) * q->taps + t] += sum;
            }
}

void ddl__conv2d_bf16_ref_dw(const ddl_conv2d *g, const float *x, const float *dy, float *dw)
{
    ddl__cb_geo q = cb_view(g->in_c, g->out_c, g->in_h, g->in_w, g->pad, g->k_h);
    if (q.amx) {
        ref_dw_amx(&q, g->batch, x, dy, dw);
        return;
    }
    size_t off[DDL__CB_MAX_TAPS], hw = (size_t)q.h * q.w, p = (size_t)q.oh * q.ow;
    size_t block = ddl__cb_dw_block(&q);
    int ns = dw_samples(&q);
    ddl__cb_tap_offsets(&q, off);
    for (int oc = 0; oc < q.c_out; oc++)
        for (int ic = 0; ic < q.c_in; ic++)
            for (int t = 0; t < q.taps; t++) {
                float m[16] = {0};
                for (int n0 = 0; n0 < g->batch; n0 += ns)
                    for (size_t j0 = 0; j0 < q.dlen; j0 += block)
                    for (int l = 0; l < 16; l++) {
                        float a = 0.0f;
                        for (int n = n0; n < n0 + ns && n < g->batch; n++) {
                            const float *xs = x + ((size_t)n * q.c_in + ic) * hw;
                            const float *ds = dy + ((size_t)n * q.c_out + oc) * p;
                            for (size_t j = j0 + 2 * (size_t)l; j < j0 + block && j < q.dlen; j += DDL__CB_DJ)
                                a = step(a, wide_dy(&q, ds, j), wide_dy(&q, ds, j + 1), wide_x(&q, xs, j + off[t]),
                                         wide_x(&q, xs, j + 1 + off[t]));
                        }
                        m[l] += a;
                    }
                dw[((size_t)oc * q.c_in + ic) * q.taps + t] += lanes(m);
            }
}
