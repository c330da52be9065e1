/* deconv2x2_chunk.c - what the 2x2 stride-2 transposed convolution's two direct backwards
 * (deconv2x2_avx512.c's and deconv2x2_avx2.c's) do alike for a chunk of samples, in plain C: its
 * plan (deconv2x2.h), and the weight gradient of a chunk too short for the 16 lanes, one sum in
 * order. */
#include "deconv2x2.h"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(DDL_NO_CLONES)

#include <math.h>
#include <string.h>

#include "pointwise_avx512.h" /* DDL__PW_DOTS_K, DDL__PW_NARROW: where the weight gradient goes by lanes */

void ddl__deconv2x2_in_order(const ddl__deconv2x2_back *j, float *part, int n0, int m)
{
    const ddl_conv2d *g = j->g;
    int oc_n = g->out_c, w = g->in_w, k = 4 * oc_n;
    size_t p_n = (size_t)g->in_h * w, op = 4 * p_n;
    for (int r = 0; r < g->in_c; r++)
        for (int oc = 0; oc < oc_n; oc++)
            for (int t = 0; t < 4; t++) {
                int a = t / 2, b = t % 2;
                float acc = 0.0f;
                for (int s = n0; s < n0 + m; s++) {
                    const float *xs = j->x + ((size_t)s * g->in_c + r) * p_n;
                    const float *dyo = j->dy + ((size_t)s * oc_n + oc) * op;
                    for (size_t p = 0; p < p_n; p++) {
                        size_t i = p / (size_t)w, jj = p % (size_t)w;
                        acc = fmaf(xs[p], dyo[(2 * i + (size_t)a) * 2 * (size_t)w + 2 * jj + (size_t)b], acc);
                    }
                }
                part[(size_t)r * k + oc * 4 + t] = acc;
            }
}

int ddl__deconv2x2_chunk_start(const ddl__deconv2x2_back *j, int t, float *scratch, ddl__deconv2x2_chunk *c)
{
    const ddl_conv2d *g = j->g;
    c->k = 4 * g->out_c, c->n0 = t * j->nb, c->m = g->batch - c->n0 < j->nb ? g->batch - c->n0 : j->nb;
    c->p_n = (size_t)g->in_h * g->in_w, c->cols = (size_t)c->m * c->p_n, c->block = ddl__deconv2x2_block(c->k);
    c->lanes = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    c->dd = c->lanes + ddl__deconv2x2_lanes_floats(g);
    c->part = j->parts + (size_t)t * g->in_c * c->k;
    c->by_lanes = j->dw && (c->cols >= DDL__PW_DOTS_K || c->k < DDL__PW_NARROW);
    if (j->dw && !c->by_lanes)
        ddl__deconv2x2_in_order(j, c->part, c->n0, c->m);
    if (!c->by_lanes && !j->dx)
        return 0;
    if (c->by_lanes)
        memset(c->lanes, 0, ddl__deconv2x2_lanes_floats(g) * sizeof(float));
    return 1;
}

#endif
