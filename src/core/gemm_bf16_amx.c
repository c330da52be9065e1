/* gemm_bf16_amx.c - the bfloat16 products on AMX tiles (Intel Sapphire Rapids and later:
 * AMX-TILE, AMX-BF16), and the same loop over a C emulation of the tile instructions, so that
 * what cannot run here is still tested bit for bit (tests/test_gemm_bf16_amx.c, against
 * gemm_bf16.c's AMX reference) and, on an AMX CPU, checked against the emulation before it is
 * used (ddl__gemm_bf16_amx_check, called by gemm_bf16.c's path choice).
 *
 * The loop is gemm_bf16_amx_driver.h, included twice. Its order of sums differs from
 * AVX512-BF16's: tdpbf16ps keeps, per element of C, two float sums (the even and the odd terms
 * of the pairs) over a tile's 16 pairs of k, adds them, and adds that to C (Intel's SDM,
 * TDPBF16PS "Operation"); gemm_bf16.c's ddl__gemm_bf16_amx_ref states the order in scalar code.
 *
 * Linux hands a process the tile state only on request (arch_prctl ARCH_REQ_XCOMP_PERM): asked
 * once, by ddl__gemm_bf16_amx_have, before any tile instruction. A thread's tile configuration
 * is its own: every product loads it at its start and releases the tiles at its end, so pool
 * workers need nothing more. Nothing is allocated: ~200 KB of stack. */
#include "impl.h"
#include "amx_tiles.h"

#include <math.h>
#include <string.h>

#define MR 32  /* rows of C a block of tiles covers */
#define NR 32  /* its columns */
#define KC DDL__BF16_KC
#define KP (KC / 2) /* pairs of a slice: at most 8 blocks of 16 */
#define MC 128 /* rows of op(A) packed at a time (a multiple of MR) */
#define NC 256 /* columns of op(B) packed at a time when op(B) goes first (a multiple of NR) */

/* amx_config: tiles 0-7 of 16 rows of 64 bytes each, the rest unused. */
static void amx_config(amx_cfg *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg->colsb[t] = 64;
        cfg->rows[t] = 16;
    }
}

/* ---- packing and the last step (shared by both kinds of tiles) ---- */

static float op_at(int trans, const float *x, int ld, int row, int col)
{
    return trans ? x[(size_t)col * ld + row] : x[(size_t)row * ld + col];
}

/* pair: the bfloat16 pair of lo (k = p, the low half: bf16 element 2k of a dword) and hi. */
static uint32_t pair(float lo, float hi)
{
    return (uint32_t)ddl__bf16_round(lo) | (uint32_t)ddl__bf16_round(hi) << 16;
}

/* pack_a: rows [i0, i0 + mc) and depth [p0, p0 + kc) of op(A) into (panels of 16 rows, kb blocks,
 * 16 rows, 16 pairs): a tile's 1 KB contiguous; rows up to a multiple of MR and pairs up to kb * 16
 * zero. */
static void pack_a(int trans_a, const float *a, int lda, int i0, int mc, int p0, int kc, int kb, uint32_t *ap)
{
    int rows = (mc + MR - 1) / MR * MR;
    for (int r = 0; r < rows; r++) {
        uint32_t *panel = ap + (size_t)(r / 16) * kb * 256 + (size_t)(r % 16) * 16;
        for (int w = 0; w < kb * 16; w++) {
            int p = 2 * w;
            float lo = r < mc && p < kc ? op_at(trans_a, a, lda, i0 + r, p0 + p) : 0.0f;
            float hi = r < mc && p + 1 < kc ? op_at(trans_a, a, lda, i0 + r, p0 + p + 1) : 0.0f;
            panel[(size_t)(w / 16) * 256 + w % 16] = pair(lo, hi);
        }
    }
}

/* pack_b: depth [p0, p0 + kc) and columns [j0, j0 + nr) of op(B) into (kb * 16 pairs, NR)
 * words, each the pair of one column for k = p, p + 1 (the layout tdpbf16ps's B tile wants);
 * columns past nr and pairs past kc zero. */
static void pack_b(int trans_b, const float *b, int ldb, int p0, int kc, int j0, int nr, int kb, uint32_t *bp)
{
    for (int w = 0; w < kb * 16; w++) {
        int p = 2 * w;
        for (int j = 0; j < NR; j++) {
            float lo = j < nr && p < kc ? op_at(trans_b, b, ldb, p0 + p, j0 + j) : 0.0f;
            float hi = j < nr && p + 1 < kc ? op_at(trans_b, b, ldb, p0 + p + 1, j0 + j) : 0.0f;
            bp[(size_t)w * NR + j] = pair(lo, hi);
        }
    }
}

/* block_words: a block of mc rows and depth kc of op(A) packed (pack_a's layout). */
static size_t block_words(int mc, int kc)
{
    return (size_t)(mc + MR - 1) / MR * MR * ((((size_t)kc + 1) / 2 + 15) / 16 * 16);
}

/* a_at: where the block of rows [i0, ...) and depth [p0, p0 + kc) starts in op(A) packed whole
 * (gemm_bf16.c's layout) */
static size_t a_at(int m, int p0, int i0, int kc) { return ddl__bf16_a_at(m, p0, i0, kc, MC, block_words); }

size_t ddl__gemm_bf16_amx_packed_words(int m, int k) { return ddl__bf16_a_words(m, k, MC, block_words); }

/* epilogue: c (mr x nr, row stride ldc) = fmaf(alpha, sum, c), sum (MR x NR); fresh: c's old
 * values taken as +0, not read. */
static void epilogue(const float *sum, float alpha, float *c, int ldc, int mr, int nr, int fresh)
{
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            float *cij = c + (size_t)i * ldc + j;
            *cij = fmaf(alpha, sum[i * NR + j], fresh ? 0.0f : *cij);
        }
}

/* the driver over emulated tiles */
#define DRIVER ddl__gemm_bf16_amx_emu
#define DRIVER_WITH amx_emu_with
#define DRIVER_ATTR
#define AMX_TILES AMX_TILES_EMU
#include "amx_tile_ops.h"
#define PACK_A pack_a
#define PACK_B pack_b
#define EPILOGUE epilogue
#include "gemm_bf16_amx_driver.h"
#undef PACK_A
#undef PACK_B
#undef EPILOGUE

/* ---- the CPU's tiles ---- */

#if defined(__GNUC__) && defined(__x86_64__) && !defined(DDL_NO_CLONES) && defined(__linux__)

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "avx512_some.h"
#include "bf16_pack_avx512.h"

#define ARCH_REQ_XCOMP_PERM 0x1023 /* <asm/prctl.h>, Linux 5.16 */
#define XFEATURE_XTILEDATA 18

/* ---- packing with AVX-512 (every AMX CPU has AVX512-BF16): the bits of pack_a, pack_b, epilogue ---- */

#define AVX __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))


/* line16: the 16 floats at base + off, the first `valid` of them, the rest 0; nothing is read
 * (or pointed at) when valid <= 0. */
AVX static inline __m512 line16(const float *base, size_t off, int valid)
{
    return valid <= 0 ? _mm512_setzero_ps() : ddl__load_some(ddl__mask16(valid), base + off);
}

/* pack_a_avx: pack_a's layout. Untransposed, a tile row (a row's 32 values of k) is two loads and
 * one conversion; transposed (op(A)'s rows run along memory's), a tile's 16 columns of pairs are
 * made from 32 rows of memory and transposed in registers into its 16 rows: no gathers, which
 * took a third of the loop's time (ResNet-18's input gradients, w^T dy). */
AVX static void pack_a_avx(int trans_a, const float *a, int lda, int i0, int mc, int p0, int kc, int kb, uint32_t *ap)
{
    int rows = (mc + MR - 1) / MR * MR;
    for (int r0 = 0; r0 < rows; r0 += 16) {
        uint32_t *panel = ap + (size_t)(r0 / 16) * kb * 256;
        for (int q = 0; q < kb; q++) {
            int p = 32 * q;
            if (!trans_a) {
                for (int r = 0; r < 16; r++) {
                    int real = r0 + r < mc;
                    size_t off = (size_t)(i0 + r0 + r) * lda + p0 + p;
                    __m512 lo = line16(a, off, real ? kc - p : 0), hi = line16(a, off + 16, real ? kc - p - 16 : 0);
                    _mm512_storeu_si512(panel + (size_t)q * 256 + r * 16, ddl__bf16_row_pairs(lo, hi));
                }
                continue;
            }
            __m512i v[16];
            for (int w = 0; w < 16; w++) { /* pair w: rows p + 2w and p + 2w + 1 of memory */
                size_t off = (size_t)(p0 + p + 2 * w) * lda + i0 + r0;
                __m512 lo = line16(a, off, p + 2 * w < kc ? mc - r0 : 0);
                __m512 hi = line16(a, off + (size_t)lda, p + 2 * w + 1 < kc ? mc - r0 : 0);
                v[w] = ddl__bf16_pairs(lo, hi);
            }
            ddl__transpose16(v);
            for (int r = 0; r < 16; r++)
                _mm512_storeu_si512(panel + (size_t)q * 256 + r * 16, v[r]);
        }
    }
}

/* pack_b_avx: pack_b's layout. Untransposed, 16 columns of two rows of k converted, then
 * interleaved into pairs; transposed (op(B)'s columns run along memory's rows), 16 columns' 32
 * values of k converted a row at a time and transposed in registers into 16 rows of pairs: no
 * gathers (ResNet-18's weight gradients, dy col^T). */
AVX static void pack_b_avx(int trans_b, const float *b, int ldb, int p0, int kc, int j0, int nr, int kb, uint32_t *bp)
{
    if (!trans_b) {
        for (int w = 0; w < kb * 16; w++) {
            int p = 2 * w;
            for (int j = 0; j < NR; j += 16) {
                size_t at = (size_t)(p0 + p) * ldb + j0 + j;
                __m512 lo = line16(b, at, p < kc ? nr - j : 0), hi = line16(b, at + (size_t)ldb, p + 1 < kc ? nr - j : 0);
                _mm512_storeu_si512(bp + (size_t)w * NR + j, ddl__bf16_pairs(lo, hi));
            }
        }
        return;
    }
    for (int q = 0; q < kb; q++) {
        int p = 32 * q;
        for (int j = 0; j < NR; j += 16) {
            __m512i v[16];
            for (int c = 0; c < 16; c++) { /* column j + c: 32 values of k along memory */
                int real = j + c < nr;
                size_t at = (size_t)(j0 + j + c) * ldb + p0 + p;
                v[c] = ddl__bf16_row_pairs(line16(b, at, real ? kc - p : 0), line16(b, at + 16, real ? kc - p - 16 : 0));
            }
            ddl__transpose16(v);
            for (int w = 0; w < 16; w++)
                _mm512_storeu_si512(bp + (size_t)(16 * q + w) * NR + j, v[w]);
        }
    }
}

/* epilogue_avx: epilogue, 16 columns at a time. */
AVX static void epilogue_avx(const float *sum, float alpha, float *c, int ldc, int mr, int nr, int fresh)
{
    __m512 al = _mm512_set1_ps(alpha);
    __mmask16 m0 = ddl__mask16(nr), m1 = ddl__mask16(nr - 16);
    __mmask16 r0 = fresh ? 0 : m0, r1 = fresh ? 0 : m1; /* fresh: C's old values read as +0, not at all */
    for (int i = 0; i < mr; i++) {
        float *row = c + (size_t)i * ldc;
        __m512 s0 = _mm512_loadu_ps(sum + i * NR), s1 = _mm512_loadu_ps(sum + i * NR + 16);
        ddl__store_some(m0, row, _mm512_fmadd_ps(al, s0, ddl__load_some(r0, row)));
        if (nr > 16)
            ddl__store_some(m1, row + 16, _mm512_fmadd_ps(al, s1, ddl__load_some(r1, row + 16)));
    }
}

#define PACK_A pack_a_avx
#define PACK_B pack_b_avx
#define EPILOGUE epilogue_avx

/* emulated tiles (still amx_tile_ops.h's), AVX-512 packing: the CPU's loop but for the tile
 * instructions, testable on any CPU with AVX512-BF16 */
#define DRIVER ddl__gemm_bf16_amx_emu_avx512
#define DRIVER_WITH amx_emu_avx512_with
#define DRIVER_ATTR AVX
#include "gemm_bf16_amx_driver.h"

/* ddl__gemm_bf16_amx_pack: op(A) packed whole, as the loop packs it block by block */
AVX void ddl__gemm_bf16_amx_pack(int trans_a, int m, int k, const float *a, int lda, uint32_t *pa)
{
    for (int p0 = 0; p0 < k; p0 += KC) {
        int kc = k - p0 < KC ? k - p0 : KC, kb = ((kc + 1) / 2 + 15) / 16;
        for (int i0 = 0; i0 < m; i0 += MC)
            pack_a_avx(trans_a, a, lda, i0, m - i0 < MC ? m - i0 : MC, p0, kc, kb, pa + a_at(m, p0, i0, kc));
    }
}

void ddl__gemm_bf16_amx_emu_avx512_packed(const uint32_t *pa, int trans_b, int m, int n, int k, float alpha,
                                          const float *b, int ldb, int overwrite, float *c, int ldc)
{
    amx_emu_avx512_with(0, trans_b, m, n, k, alpha, NULL, 0, pa, b, ldb, overwrite, c, ldc);
}

#ifdef DDL_AMX_FREE_TILES
/* the loop with tiles that cost nothing, to measure on a CPU without AMX what the AMX path
 * spends besides its tile instructions (packing, the epilogue, im2col and the rest of a step):
 * a build with CPPFLAGS=-DDDL_AMX_FREE_TILES takes this as its AMX path (gemm_bf16.c). Loads and
 * products do nothing; a store writes its 16 rows of 64 bytes as zeros (a tile store's traffic),
 * so every product is zero: the figures are speeds, the results are wrong. */
#define DRIVER ddl__gemm_bf16_amx_free
#define DRIVER_WITH amx_free_with
#define DRIVER_ATTR AVX
#define AMX_TILES AMX_TILES_FREE
#include "amx_tile_ops.h"
#include "gemm_bf16_amx_driver.h"
#endif

/* the CPU's tiles */
#define DRIVER ddl__gemm_bf16_amx
#define DRIVER_WITH amx_with
#define DRIVER_ATTR __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))
#define AMX_TILES AMX_TILES_CPU
#include "amx_tile_ops.h"
#include "gemm_bf16_amx_driver.h"

void ddl__gemm_bf16_amx_packed(const uint32_t *pa, int trans_b, int m, int n, int k, float alpha, const float *b,
                               int ldb, int overwrite, float *c, int ldc)
{
#ifdef DDL_AMX_FREE_TILES
    amx_free_with(0, trans_b, m, n, k, alpha, NULL, 0, pa, b, ldb, overwrite, c, ldc);
#else
    amx_with(0, trans_b, m, n, k, alpha, NULL, 0, pa, b, ldb, overwrite, c, ldc);
#endif
}

/* cpu_amx: CPUID says AMX-TILE and AMX-BF16, and the OS saves the tile state (XCR0 bits 17, 18). */
static int cpu_amx(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 22)) || !(d & (1u << 24)))
        return 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) /* OSXSAVE: XGETBV may run */
        return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & (3u << 17)) == (3u << 17);
}

int ddl__gemm_bf16_amx_have(void)
{
    static _Atomic int have = -1; /* the request is per process: once is enough, twice harmless */
    int h = have;
    if (h < 0)
        have = h = cpu_amx() && syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
    return h;
}

#else

int ddl__gemm_bf16_amx_have(void) { return 0; }

void ddl__gemm_bf16_amx_pack(int trans_a, int m, int k, const float *a, int lda, uint32_t *pa)
{
    (void)trans_a, (void)m, (void)k, (void)a, (void)lda, (void)pa;
}

void ddl__gemm_bf16_amx_packed(const uint32_t *pa, int trans_b, int m, int n, int k, float alpha, const float *b,
                               int ldb, int overwrite, float *c, int ldc)
{
    (void)pa, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)b, (void)ldb, (void)overwrite, (void)c, (void)ldc;
}

void ddl__gemm_bf16_amx_emu_avx512_packed(const uint32_t *pa, int trans_b, int m, int n, int k, float alpha,
                                          const float *b, int ldb, int overwrite, float *c, int ldc)
{
    (void)pa, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)b, (void)ldb, (void)overwrite, (void)c, (void)ldc;
}

#ifdef DDL_AMX_FREE_TILES
void ddl__gemm_bf16_amx_free(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                             const float *b, int ldb, int overwrite, float *c, int ldc)
{
    ddl__gemm_bf16_amx_emu(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, overwrite, c, ldc);
}
#endif

void ddl__gemm_bf16_amx_emu_avx512(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                                   int lda, const float *b, int ldb, int overwrite, float *c, int ldc)
{
    ddl__gemm_bf16_amx_emu(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, overwrite, c, ldc);
}

void ddl__gemm_bf16_amx(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                        const float *b, int ldb, int overwrite, float *c, int ldc)
{
    (void)overwrite, (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b;
    (void)ldb, (void)c, (void)ldc;
}

#endif

/* ---- the check before first use ---- */

int ddl__gemm_bf16_amx_check(char *note, size_t note_bytes)
{
    enum { M = 33, N = 35, K = 290 }; /* edges of every kind, two slices of k: ~90 KB of stack */
    float a[M * K], b[K * N], tiles[M * N], emu[M * N];
    uint32_t s = 47;
    amx_check_fill(&s, a, M * K);
    amx_check_fill(&s, b, K * N);
    amx_check_fill(&s, tiles, M * N);
    memcpy(emu, tiles, sizeof emu);
    if (!ddl__gemm_bf16_amx_have())
        return ddl__errf(note, note_bytes, DDL_ENOTSUP, "AMX: this CPU or kernel has no AMX-BF16 tiles");
    ddl__gemm_bf16_amx(0, 1, M, N, K, 1.0f, a, K, b, K, 0, tiles, N);
    ddl__gemm_bf16_amx_emu(0, 1, M, N, K, 1.0f, a, K, b, K, 0, emu, N);
    for (int i = 0; i < M * N; i++)
        if (memcmp(&tiles[i], &emu[i], sizeof(float)) != 0)
            return ddl__errf(note, note_bytes, DDL_EMISMATCH,
                             "AMX: tdpbf16ps gave C[%d][%d] = %a where its emulation (Intel's SDM) gives %a: "
                             "AMX not used", i / N, i % N, (double)tiles[i], (double)emu[i]);
    return DDL_OK;
}
