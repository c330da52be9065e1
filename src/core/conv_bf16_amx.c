/* conv_bf16_amx.c - the direct bfloat16 convolution's kernels on AMX tiles (conv_bf16.c's
 * driver calls them on a CPU whose bfloat16 path is AMX), and the same loops over emulated tiles
 * (amx_tiles.h), which tests/test_conv_bf16_amx.c runs against conv_bf16.c's AMX reference bit
 * for bit on any CPU with AVX512-BF16 (the driver's conversions need it). On an AMX CPU the tile
 * instructions were checked against the emulation before the path was chosen (gemm_bf16.c's
 * ddl__gemm_bf16_amx_check), and these kernels are, on their own tile shapes, before the first
 * direct convolution uses them (ddl__cb_amx_check, called once by conv_bf16.c).
 *
 * im2col and the product (the AMX path's way before this file) unfolded every input value into 9
 * copies and packed them into tiles: on the cnn preset that left the AMX path, with tiles that
 * cost nothing, at 1.45x float32 (a DDL_AMX_FREE_TILES build). Here the tiles read the pair
 * planes the AVX512-BF16 kernels read: the loop is conv_bf16_amx_loop.h. */
#include "impl.h"
#include "amx_tiles.h"
#include "conv_bf16_kernels.h"

/* fwd_config: C tiles 0-2 (16 x 16 floats), A tile 3 (16 rows x kch pairs), B tiles 4-6 (kch
 * pairs x 16 positions). */
static void fwd_config(amx_cfg *cfg, int kch)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->palette = 1;
    for (int t = 0; t < 7; t++) {
        cfg->rows[t] = (uint8_t)(t >= 4 ? kch : 16);
        cfg->colsb[t] = (uint16_t)(t == 3 ? 4 * kch : 64);
    }
}

/* amx_dw: the weight gradient's tiles: input channels in icn blocks of icr (a tile's rows),
 * output channels in ocn blocks of ocr (its columns; dy's transposed rows ocs words, a multiple of
 * 16), groups of a tap, ig pairs of input blocks and og pairs of output blocks; ns samples a pass,
 * xs bfloat16 of input planes and ts words of dy a sample. */
typedef struct amx_dw {
    int icn, icr, ocn, ocr, ocs, ig, og, groups, ns;
    size_t xs, ts, block;
} amx_dw;

/* AMX_DW_CHUNK: floats of a pass's planes and dy (as conv_bf16.c's DW_CHUNK: they stay in L2) */
#define AMX_DW_CHUNK ((size_t)1 << 18)

static amx_dw dw_view(const ddl__cb_geo *q)
{
    amx_dw d;
    d.icn = (q->c_in + 15) / 16, d.icr = (q->c_in + d.icn - 1) / d.icn;
    d.ocn = (q->c_out + 15) / 16, d.ocr = (q->c_out + d.ocn - 1) / d.ocn;
    d.ocs = (d.ocn * d.ocr + 15) / 16 * 16;
    d.ig = (d.icn + 1) / 2, d.og = (d.ocn + 1) / 2, d.groups = q->taps * d.ig * d.og;
    d.xs = (size_t)d.icn * d.icr * q->dplane, d.ts = q->dlen / 2 * d.ocs;
    size_t per = (d.xs + 1) / 2 + d.ts, n = AMX_DW_CHUNK / per;
    d.ns = n < 1 ? 1 : n > 16 ? 16 : (int)n;
    d.block = ddl__cb_dw_block(q);
    return d;
}

void ddl__cb_dw_amx_order(const ddl__cb_geo *q, int *ns, size_t *block)
{
    amx_dw d = dw_view(q);
    *ns = d.ns, *block = d.block;
}

/* dw_config: C tiles 0-3 (icr x ocr floats), A tiles 4-5 (icr rows x 16 pairs), B tiles 6-7 (16
 * pairs x ocr words). */
static void dw_config(amx_cfg *cfg, int icr, int ocr)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg->rows[t] = (uint8_t)(t >= 6 ? 16 : icr);
        cfg->colsb[t] = (uint16_t)(t == 4 || t == 5 ? 64 : 4 * ocr);
    }
}

/* the loop over emulated tiles */
#define FWD ddl__cb_fwd_amx_emu
#define DW dw_emu
#define LOOP_ATTR
#define AMX_TILES AMX_TILES_EMU
#include "amx_tile_ops.h"
#include "conv_bf16_amx_loop.h"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(DDL_NO_CLONES) && defined(__linux__)

#include <immintrin.h>

#define FWD ddl__cb_fwd_amx
#define DW dw_cpu
#ifdef DDL_AMX_FREE_TILES /* the loop with tiles that cost nothing: a speed, wrong results (gemm_bf16_amx.c) */
#define LOOP_ATTR __attribute__((target("avx512f,avx512bw")))
#define AMX_TILES AMX_TILES_FREE
#else
#define LOOP_ATTR __attribute__((target("amx-tile,amx-bf16,avx512f")))
#define AMX_TILES AMX_TILES_CPU
#endif
#include "amx_tile_ops.h"
#include "conv_bf16_amx_loop.h"

/* words: n random bfloat16 (amx_check_fill's values, their high halves) in pairs */
static void check_words(uint32_t *s, uint32_t *w, int n)
{
    float v[2];
    for (int i = 0; i < n; i++) {
        amx_check_fill(s, v, 2);
        uint32_t lo, hi;
        memcpy(&lo, &v[0], 4);
        memcpy(&hi, &v[1], 4);
        w[i] = lo >> 16 | (hi & 0xffff0000u);
    }
}

/* check_same: the tiles' n sums against the emulation's, or a line in note. */
static int check_same(const float *tiles, const float *emu, int n, const char *what, char *note, size_t note_bytes)
{
    for (int i = 0; i < n; i++)
        if (memcmp(&tiles[i], &emu[i], sizeof(float)) != 0)
            return ddl__errf(note, note_bytes, DDL_EMISMATCH,
                             "AMX: the %s convolution's tiles gave sum %d = %a where their emulation gives %a: "
                             "convolutions by im2col and the product", what, i, (double)tiles[i], (double)emu[i]);
    return DDL_OK;
}

int ddl__cb_amx_check(char *note, size_t note_bytes)
{
    /* forward: 34 -> 16 channels (17 pairs: runs of 9, tiles of 9 rows and 36 bytes), a 5 x 6
     * plane, 3 x 3, pad 1: one block of 48 positions */
    ddl__cb_geo f = {34, 16, 5, 6, 1, 3, 9, 7, 7, 5, 6, 16, 17, 48, 64, 64, 96, 1, 2, 9, 18};
    /* weight gradient: 20 -> 24 channels (blocks of 10 and 12: tiles of 10 rows and 48 bytes),
     * 2 samples, 64 positions (two steps of 32) */
    ddl__cb_geo g = {20, 24, 5, 6, 1, 3, 9, 7, 7, 5, 6, 16, 10, 48, 64, 64, 96, 1, 1, 10, 10};
    amx_dw d = dw_view(&g);
    enum { XP = 18 * 64, WK = 9 * 2 * 16 * 9, ACC = 16 * 48, XB = 2 * 20 * 96 / 2, DY = 2 * 32 * 32, M = 9 * 4 * 120 };
    uint32_t xp[XP], wk[WK], xb[XB], dy[DY]; /* ~70 KB of stack, as the product's check */
    float acc[2][ACC], m[2][M];
    size_t off[DDL__CB_MAX_TAPS];
    uint32_t s = 53;
    if (d.icr != 10 || d.ocr != 12 || d.ocs != 32 || d.groups != 9)
        return ddl__errf(note, note_bytes, DDL_EINVAL, "AMX: the convolution check's geometry is not its own");
    check_words(&s, xp, XP);
    check_words(&s, wk, WK);
    check_words(&s, xb, XB);
    check_words(&s, dy, DY);
    ddl__cb_tap_offsets(&f, off);
    ddl__cb_fwd_amx(&f, off, 0, 48, xp, wk, acc[0], 48);
    ddl__cb_fwd_amx_emu(&f, off, 0, 48, xp, wk, acc[1], 48);
    int rc = check_same(acc[0], acc[1], ACC, "forward", note, note_bytes);
    if (rc != DDL_OK)
        return rc;
    memset(m, 0, sizeof m);
    dw_cpu(&g, &d, off, 0, 64, 2, (const uint16_t *)xb, dy, 0, 9, m[0]);
    dw_emu(&g, &d, off, 0, 64, 2, (const uint16_t *)xb, dy, 0, 9, m[1]);
    return check_same(m[0], m[1], M, "weight gradient's", note, note_bytes);
}

#else

int ddl__cb_amx_check(char *note, size_t note_bytes)
{
    return ddl__errf(note, note_bytes, DDL_ENOTSUP, "AMX: not built for this CPU");
}

static void dw_cpu(const ddl__cb_geo *q, const amx_dw *d, const size_t *off, size_t j0, size_t j1, int ns,
                   const uint16_t *xb, const uint32_t *dyt, int g0, int g1, float *m)
{
    dw_emu(q, d, off, j0, j1, ns, xb, dyt, g0, g1, m); /* not reached: no AMX path without the CPU's tiles */
}

void ddl__cb_fwd_amx(const ddl__cb_geo *q, const size_t *off, size_t j0, size_t j1, const uint32_t *xp,
                     const uint32_t *wk, float *acc, size_t ld)
{
    ddl__cb_fwd_amx_emu(q, off, j0, j1, xp, wk, acc, ld); /* not reached: no AMX path without the CPU's tiles */
}

#endif

/* ---- the weight gradient's driver ---- */

/* dw_fixed / dw_group: a range's room (floats) whatever its groups (a pass's planes and dy, and
 * one sample's dy in bfloat16 rows before its transposition), and what each group adds (its 4
 * tiles of sums). */
static size_t dw_fixed(const ddl__cb_geo *q, const amx_dw *d)
{
    return ((size_t)d->ns * d->xs + 1) / 2 + (size_t)d->ns * d->ts + (size_t)d->ocs * q->dlen / 2;
}
static size_t dw_group(const amx_dw *d) { return (size_t)4 * d->icr * d->ocr; }

/* dw_per: groups a range: as many as fit a thread's scratch (1 at least) */
static int dw_per(const ddl__cb_geo *q, const amx_dw *d)
{
    size_t fixed = dw_fixed(q, d), fit = fixed + dw_group(d) <= DDL__THREAD_SCRATCH ? (DDL__THREAD_SCRATCH - fixed) / dw_group(d) : 1;
    return fit < (size_t)d->groups ? (int)fit : d->groups;
}

size_t ddl__cb_dw_amx_workspace(const ddl__cb_geo *q)
{
    amx_dw d = dw_view(q);
    return dw_fixed(q, &d) + (size_t)dw_per(q, &d) * dw_group(&d);
}

typedef struct dw_job {
    const ddl__cb_geo *q;
    const amx_dw *d;
    int batch, per, emulated;
    const float *x, *dy;
    float *dw;
} dw_job;

/* dw_range: the groups [r per, r per + per): every pass of samples rounded (x into bfloat16
 * planes, dy into bfloat16 rows, then transposed), its blocks of positions through the tiles;
 * then dw += the sums. */
static void dw_range(void *ctx, int r, float *ws)
{
    const dw_job *j = ctx;
    const ddl__cb_geo *q = j->q;
    const amx_dw *d = j->d;
    int g0 = r * j->per, g1 = g0 + j->per < d->groups ? g0 + j->per : d->groups;
    size_t hw = (size_t)q->h * q->w, p = (size_t)q->oh * q->ow, tile = (size_t)d->icr * d->ocr, off[DDL__CB_MAX_TAPS];
    ddl__cb_tap_offsets(q, off);
    uint16_t *xb = (uint16_t *)ws;
    uint32_t *dyt = (uint32_t *)(ws + ((size_t)d->ns * d->xs + 1) / 2), *rows = dyt + (size_t)d->ns * d->ts;
    float *m = (float *)(rows + (size_t)d->ocs * q->dlen / 2);
    memset(m, 0, (size_t)(g1 - g0) * 4 * tile * sizeof *m);
    for (int n0 = 0; n0 < j->batch; n0 += d->ns) {
        int k = j->batch - n0 < d->ns ? j->batch - n0 : d->ns;
        for (int s = 0; s < k; s++) {
            const float *xn = j->x + (size_t)(n0 + s) * q->c_in * hw, *dn = j->dy + (size_t)(n0 + s) * q->c_out * p;
            for (int ic = 0; ic < d->icn * d->icr; ic++) /* padded: pad rows above, pad zeros before each row */
                ddl__cb_plane_avx512(ic < q->c_in ? xn + (size_t)ic * hw : xn, ic < q->c_in ? q->h : 0, q->w,
                                     (size_t)q->pad * q->wp + (size_t)q->pad, (size_t)q->wp, q->dplane,
                                     xb + (size_t)s * d->xs + (size_t)ic * q->dplane);
            for (int oc = 0; oc < d->ocs; oc++) /* spare channels: zero rows */
                ddl__cb_plane_avx512(oc < q->c_out ? dn + (size_t)oc * p : dn, oc < q->c_out ? q->oh : 0, q->ow, 0,
                                     (size_t)q->wp, q->dlen, (uint16_t *)(rows + (size_t)oc * q->dlen / 2));
            ddl__cb_transpose_avx512(rows, (size_t)d->ocs, q->dlen / 2, dyt + (size_t)s * d->ts);
        }
        for (size_t j0 = 0; j0 < q->dlen; j0 += d->block) {
            size_t j1 = j0 + d->block < q->dlen ? j0 + d->block : q->dlen;
            (j->emulated ? dw_emu : dw_cpu)(q, d, off, j0, j1, k, xb, dyt, g0, g1, m);
        }
    }
    for (int g = g0; g < g1; g++) {
        int t = g / (d->ig * d->og), ib = 2 * (g / d->og % d->ig), ob = 2 * (g % d->og);
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++)
                for (int i = 0; i < d->icr; i++)
                    for (int o = 0; o < d->ocr; o++) {
                        int ic = (ib + a) * d->icr + i, oc = (ob + b) * d->ocr + o;
                        if (ib + a < d->icn && ob + b < d->ocn && ic < q->c_in && oc < q->c_out)
                            j->dw[((size_t)oc * q->c_in + ic) * q->taps + t] +=
                                m[((size_t)(g - g0) * 4 + 2 * a + b) * tile + (size_t)i * d->ocr + o];
                    }
    }
}

void ddl__cb_dw_amx(const ddl__cb_geo *q, int batch, const float *x, const float *dy, float *dw, float *ws,
                    int emulated)
{
    amx_dw d = dw_view(q);
    int per = dw_per(q, &d);
    dw_job j = {q, &d, batch, per, emulated, x, dy, dw};
    ddl__cb_ranges(d.groups, per, dw_fixed(q, &d) + (size_t)per * dw_group(&d), &j.per, dw_range, &j, ws);
}
