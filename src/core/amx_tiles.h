/* amx_tiles.h - what the AMX loops share (gemm_bf16_amx.c's product, conv_bf16_amx.c's
 * convolution): the tile configuration ldtilecfg reads, and a C emulation of the tile
 * instructions after Intel's SDM (TILELOADD, TDPBF16PS, TILESTORED), so that a loop written once
 * runs over the CPU's tiles or over these, and what cannot run here is still tested bit for bit.
 * Static functions: each includer gets its own copy. */
#ifndef DDL_AMX_TILES_H
#define DDL_AMX_TILES_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* amx_cfg: the 64 bytes ldtilecfg reads (palette 1). */
typedef struct amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;
_Static_assert(sizeof(amx_cfg) == 64, "ldtilecfg reads 64 bytes");

typedef struct amx_emu {
    int rows[8], colsb[8];
    _Alignas(64) unsigned char t[8][16][64];
} amx_emu;

static inline float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* daz: a subnormal input read as a zero of its sign; ftz: a subnormal result written as one (the
 * same operation, named for where the SDM applies it). NaNs are left to fmaf's propagation: the
 * SDM does not say which of several NaN inputs the tiles keep (none reach them in training). */
static inline float daz(float v) { return ddl__bf16_ftz(v); }
static inline float ftz(float v) { return daz(v); }

static inline void emu_config(amx_emu *e, const amx_cfg *cfg)
{
    memset(e, 0, sizeof *e);
    for (int t = 0; t < 8; t++)
        e->rows[t] = cfg->rows[t], e->colsb[t] = cfg->colsb[t];
}

static inline void emu_zero(amx_emu *e, int t) { memset(e->t[t], 0, sizeof e->t[t]); }

/* TILELOADD: rows of colsb bytes from p, stride bytes apart; the rest of the tile zero. */
static inline void emu_load(amx_emu *e, int t, const void *p, size_t stride)
{
    emu_zero(e, t);
    for (int r = 0; r < e->rows[t]; r++)
        memcpy(e->t[t][r], (const unsigned char *)p + r * stride, (size_t)e->colsb[t]);
}

static inline void emu_store(const amx_emu *e, int t, void *p, size_t stride)
{
    for (int r = 0; r < e->rows[t]; r++)
        memcpy((unsigned char *)p + r * stride, e->t[t][r], (size_t)e->colsb[t]);
}

static inline uint32_t emu_word(const amx_emu *e, int t, int row, int col)
{
    uint32_t w;
    memcpy(&w, e->t[t][row] + 4 * col, sizeof w);
    return w;
}

/* TDPBF16PS tc, ta, tb: per row m, two sums per column n from +0 (the even and the odd terms),
 * over k: each an FMA of the exact product with one rounding to nearest even, inputs read with
 * DAZ and the result flushed (FTZ); then C = C + (even + odd), each addition so rounded. */
static inline void emu_dp(amx_emu *e, int tc, int ta, int tb)
{
    for (int m = 0; m < e->rows[tc]; m++) {
        float tmp[32] = {0};
        int nk = e->colsb[ta] / 4, nn = e->colsb[tc] / 4;
        for (int k = 0; k < nk; k++) {
            uint32_t aw = emu_word(e, ta, m, k);
            float a0 = daz(bits_float(aw << 16)), a1 = daz(bits_float(aw & 0xffff0000u));
            for (int n = 0; n < nn; n++) {
                uint32_t bw = emu_word(e, tb, k, n);
                tmp[2 * n] = ftz(fmaf(a0, daz(bits_float(bw << 16)), tmp[2 * n]));
                tmp[2 * n + 1] = ftz(fmaf(a1, daz(bits_float(bw & 0xffff0000u)), tmp[2 * n + 1]));
            }
        }
        for (int n = 0; n < nn; n++) {
            float cv;
            memcpy(&cv, e->t[tc][m] + 4 * n, sizeof cv);
            cv = ftz(daz(cv) + ftz(tmp[2 * n] + tmp[2 * n + 1]));
            memcpy(e->t[tc][m] + 4 * n, &cv, sizeof cv);
        }
    }
}

/* amx_check_fill: n values of random sign, 8 significant bits and exponents over 2^-12..2^12, so
 * that the order of the sums shows in their bits. */
static inline void amx_check_fill(uint32_t *s, float *x, int n)
{
    for (int i = 0; i < n; i++) {
        *s = *s * 1664525u + 1013904223u;
        uint32_t r = *s >> 8;
        x[i] = ldexpf(1.0f + (float)(r & 0xff) / 256.0f, (int)((r >> 8) % 25) - 12) * ((r >> 16) & 1 ? -1.0f : 1.0f);
    }
}

#if defined(DDL_AMX_FREE_TILES) && defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
/* amx_free_store: a DDL_AMX_FREE_TILES build's tile store, a tile's traffic without its values
 * (rows of colsb bytes of zeros, stride apart): that build measures the AMX loops without their
 * tiles. */
__attribute__((target("avx512f,avx512bw"))) static inline void amx_free_store(void *p, size_t stride, int rows,
                                                                               int colsb)
{
    __mmask64 m = colsb >= 64 ? ~0ULL : (1ULL << colsb) - 1;
    for (int r = 0; r < rows; r++)
        _mm512_mask_storeu_epi8((char *)p + r * stride, m, _mm512_setzero_si512());
}
#endif

#endif
