/* conv_bf16_amx_loop.h - the one body of the direct bfloat16 convolution's AMX kernels, included
 * by conv_bf16_amx.c once per kind of tiles (the CPU's, the emulated ones of amx_tiles.h, and the
 * free ones of a DDL_AMX_FREE_TILES build), so that the loop the tests run over emulated tiles is
 * the loop the CPU runs. The includer defines FWD and DW (the functions' names), LOOP_ATTR, and
 * includes amx_tile_ops.h for the kind of tiles; this file undefines FWD, DW and LOOP_ATTR.
 *
 * Forward (and input gradient): output channels are a tile's 16 rows (C, tiles 0-2: 16 channels
 * x 48 wide positions), the weights of a tap and a run of kch channel pairs are A (tile 3: 16
 * rows x kch pairs), and the input's pair planes are B as they lie: row r of B is pair plane
 * h kch + r from the position j + off[t] on, so a tile load with the planes' stride reads it
 * (tiles 4-6), with no column matrix and no packing.
 *
 * Weight gradient: for a group (a tap, up to 2 blocks of icr input channels and 2 of ocr output
 * channels: C tiles 0-3, kept in m between blocks of positions), A is 16 position pairs of icr
 * input planes in bfloat16 from the tap's offset on (tiles 4-5: a load at any 2-byte boundary),
 * B the same 16 position pairs of dy transposed, ocr output channels a row (tiles 6-7). */

LOOP_ATTR void FWD(const ddl__cb_geo *q, const size_t *off, size_t j0, size_t j1, const uint32_t *xp, const uint32_t *wk,
                   float *acc, size_t ld)
{
    T_STATE
    amx_cfg cfg;
    fwd_config(&cfg, q->kch);
    T_CONFIG(&cfg);
    size_t a_words = (size_t)16 * q->kch, b_stride = q->plane * 4, run = (size_t)q->kch * q->plane;
    for (size_t j = j0; j < j1; j += 48) {
        T_ZERO(0);
        T_ZERO(1);
        T_ZERO(2);
        const uint32_t *a = wk;
        for (int t = 0; t < q->taps; t++)
            for (int h = 0; h < q->nch; h++, a += a_words) {
                const uint32_t *b = xp + (size_t)h * run + j + off[t];
                T_LOAD(3, a, q->kch * 4);
                T_LOAD(4, b, b_stride);
                T_LOAD(5, b + 16, b_stride);
                T_LOAD(6, b + 32, b_stride);
                T_DP(0, 3, 4);
                T_DP(1, 3, 5);
                T_DP(2, 3, 6);
            }
        float *c = acc + (j - j0);
        T_STORE(0, c, ld * 4);
        T_STORE(1, c + 16, ld * 4);
        T_STORE(2, c + 32, ld * 4);
    }
    T_RELEASE();
}

/* DW: for the groups [g0, g1), C += the products over the positions [j0, j1) of the ns samples
 * of xb (icpad planes of dplane bfloat16 a sample, xs apart) and dyt ((dlen / 2, ocs) words a
 * sample, ts apart); C loaded from and stored to m (4 tiles of icr x ocr floats a group). */
LOOP_ATTR static void DW(const ddl__cb_geo *q, const amx_dw *d, const size_t *off, size_t j0, size_t j1, int ns,
                  const uint16_t *xb, const uint32_t *dyt, int g0, int g1, float *m)
{
    T_STATE
    amx_cfg cfg;
    dw_config(&cfg, d->icr, d->ocr);
    T_CONFIG(&cfg);
    size_t tile = (size_t)d->icr * d->ocr, a_stride = q->dplane * 2, b_stride = (size_t)d->ocs * 4;
    for (int g = g0; g < g1; g++) {
        int t = g / (d->ig * d->og), ib = 2 * (g / d->og % d->ig), ob = 2 * (g % d->og);
        int two_i = ib + 1 < d->icn, two_o = ob + 1 < d->ocn;
        float *mg = m + (size_t)(g - g0) * 4 * tile;
        T_LOAD(0, mg, d->ocr * 4);
        T_LOAD(1, mg + tile, d->ocr * 4);
        T_LOAD(2, mg + 2 * tile, d->ocr * 4);
        T_LOAD(3, mg + 3 * tile, d->ocr * 4);
        for (int s = 0; s < ns; s++)
            for (size_t j = j0; j < j1; j += 32) {
                const uint16_t *a = xb + (size_t)s * d->xs + (size_t)ib * d->icr * q->dplane + j + off[t];
                const uint32_t *b = dyt + (size_t)s * d->ts + j / 2 * d->ocs + (size_t)ob * d->ocr;
                T_LOAD(4, a, a_stride);
                T_LOAD(6, b, b_stride);
                T_DP(0, 4, 6);
                if (two_o) {
                    T_LOAD(7, b + d->ocr, b_stride);
                    T_DP(1, 4, 7);
                }
                if (two_i) {
                    T_LOAD(5, a + (size_t)d->icr * q->dplane, a_stride);
                    T_DP(2, 5, 6);
                    if (two_o)
                        T_DP(3, 5, 7);
                }
            }
        T_STORE(0, mg, d->ocr * 4);
        T_STORE(1, mg + tile, d->ocr * 4);
        T_STORE(2, mg + 2 * tile, d->ocr * 4);
        T_STORE(3, mg + 3 * tile, d->ocr * 4);
    }
    T_RELEASE();
}

#undef FWD
#undef DW
#undef LOOP_ATTR
