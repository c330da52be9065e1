/* gemm_bf16_amx_driver.h - the one body of the AMX bfloat16 product, included by
 * gemm_bf16_amx.c once per kind of tiles: the CPU's (tileloadd, tdpbf16ps, tilestored) and a C
 * emulation of what Intel's SDM says those instructions do. Written once so that what the
 * emulation is tested against (gemm_bf16.c's AMX reference, tests/test_gemm_bf16_amx.c) is the
 * very loop the CPU runs: only the tile operations differ.
 *
 * The includer defines, before including this file:
 *   DRIVER        the function's name; DRIVER_ATTR its attributes (a target, or nothing);
 *   DRIVER_WITH   the name of the static loop beneath it, which also takes op(A) packed whole
 *                 (pa, a_at's layout; NULL: packed here block by block)
 *   the T_ tile operations: amx_tile_ops.h, included for the kind of tiles
 *   PACK_A, PACK_B, EPILOGUE  the helpers it calls (gemm_bf16_amx.c: in C, or with AVX-512,
 *                 which every AMX CPU has; the same bits either way)
 * It undefines DRIVER, DRIVER_WITH and DRIVER_ATTR at its end; the tile operations and the
 * helpers stay defined (the next loop over the same kind of tiles needs no new include).
 *
 * Tiles: C is 2 x 2 tiles of 16 x 16 floats (tmm0-3: a 32 x 32 block), A two tiles of 16 rows
 * x 16 pairs of k (tmm4-5), B two tiles of 16 pairs of k x 16 columns (tmm6-7). Every tile is
 * full (16 rows of 64 bytes): edges are zero-padded in the packed copies, so each element of C
 * gets the same instructions wherever its block lies, and a product cut into parts gives the
 * bits of the whole (ddl_gemm's threads). The sums: k in slices of DDL__BF16_KC, a slice's
 * tiles summed into C tiles zeroed at its start, then C = fmaf(alpha, sum, C) (epilogue). The
 * packing order (op(A) or op(B) first, NC columns a block) is ddl__bf16_b_first's. */

DRIVER_ATTR static void DRIVER_WITH(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                                    const uint32_t *pa, const float *b, int ldb, int overwrite, float *c, int ldc)
{
    _Alignas(64) uint32_t ap_own[MC * KP]; /* (MC / 16 panels, kb, 16 rows, 16 pairs) */
    _Alignas(64) uint32_t bp[KP * NC]; /* panels of (kb * 16 pairs, NR columns): the "VNNI" layout */
    _Alignas(64) float sum[MR * NR];   /* a 32 x 32 block of a slice's sums */
    T_STATE
    amx_cfg cfg;
    amx_config(&cfg);
    T_CONFIG(&cfg);
    int by_b = ddl__bf16_b_first(m, n, MC, NC), nc_max = by_b ? NC : n > 0 ? n : 1;
    for (int p0 = 0; p0 < k; p0 += KC) {
        int kc = k - p0 < KC ? k - p0 : KC, kb = ((kc + 1) / 2 + 15) / 16;
        size_t panel_words = (size_t)kb * 16 * NR;
        for (int jc = 0; jc < n; jc += nc_max) { /* op(B) first: its block's panels packed once */
            int nc = n - jc < nc_max ? n - jc : nc_max;
            for (int j0 = 0; by_b && j0 < nc; j0 += NR)
                PACK_B(trans_b, b, ldb, p0, kc, jc + j0, nc - j0 < NR ? nc - j0 : NR, kb, bp + j0 / NR * panel_words);
            for (int i0 = 0; i0 < m; i0 += MC) {
                int mc = m - i0 < MC ? m - i0 : MC;
                const uint32_t *ap = pa ? pa + a_at(m, p0, i0, kc) : ap_own;
                if (!pa)
                    PACK_A(trans_a, a, lda, i0, mc, p0, kc, kb, ap_own);
                for (int j0 = 0; j0 < nc; j0 += NR) {
                    int nr = nc - j0 < NR ? nc - j0 : NR;
                    const uint32_t *bq = by_b ? bp + j0 / NR * panel_words : bp;
                    if (!by_b) /* op(A) first: a panel of op(B) at a time, for the block's rows */
                        PACK_B(trans_b, b, ldb, p0, kc, jc + j0, nr, kb, bp);
                    for (int ir = 0; ir < mc; ir += MR) {
                        const uint32_t *a0 = ap + (size_t)ir * kb * 16, *a1 = a0 + (size_t)kb * 256;
                        T_ZERO(0);
                        T_ZERO(1);
                        T_ZERO(2);
                        T_ZERO(3);
                        for (int q = 0; q < kb; q++) {
                            T_LOAD(4, a0 + (size_t)q * 256, 64);
                            T_LOAD(5, a1 + (size_t)q * 256, 64);
                            T_LOAD(6, bq + (size_t)q * 16 * NR, NR * 4);
                            T_LOAD(7, bq + (size_t)q * 16 * NR + 16, NR * 4);
                            T_DP(0, 4, 6);
                            T_DP(1, 4, 7);
                            T_DP(2, 5, 6);
                            T_DP(3, 5, 7);
                        }
                        T_STORE(0, sum, NR * 4);
                        T_STORE(1, sum + 16, NR * 4);
                        T_STORE(2, sum + 16 * NR, NR * 4);
                        T_STORE(3, sum + 16 * NR + 16, NR * 4);
                        EPILOGUE(sum, alpha, c + (size_t)(i0 + ir) * ldc + jc + j0, ldc, mc - ir < MR ? mc - ir : MR,
                                 nr, overwrite && p0 == 0);
                    }
                }
            }
        }
    }
    T_RELEASE();
}

/* op(A) packed here, block by block */
DRIVER_ATTR void DRIVER(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                        const float *b, int ldb, int overwrite, float *c, int ldc)
{
    DRIVER_WITH(trans_a, trans_b, m, n, k, alpha, a, lda, NULL, b, ldb, overwrite, c, ldc);
}
#undef DRIVER_WITH
#undef DRIVER
#undef DRIVER_ATTR
