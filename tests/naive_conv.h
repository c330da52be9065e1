/* naive_conv.h - the convolutions by their definition, loop by loop: the references tests/test_ops.c
 * checks ddl's convolution kernels against (every tap summed in the plain order, no blocking, no
 * vector code, so nothing they share with the kernels can hide a mistake). Include after ddl.h. */
#ifndef DDL_TEST_NAIVE_CONV_H
#define DDL_TEST_NAIVE_CONV_H
#include <string.h>

/* naive_conv: y (N, out_c, oh, ow) by the definition, in double. */
static void naive_conv(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y)
{
    int oh = ddl_conv2d_out_h(g), ow = ddl_conv2d_out_w(g);
    for (int n = 0; n < g->batch; n++)
        for (int o = 0; o < g->out_c; o++)
            for (int oy = 0; oy < oh; oy++)
                for (int ox = 0; ox < ow; ox++) {
                    double s = b ? b[o] : 0.0;
                    for (int i = 0; i < g->in_c; i++)
                        for (int ki = 0; ki < g->k_h; ki++)
                            for (int kj = 0; kj < g->k_w; kj++) {
                                int iy = oy * g->stride - g->pad + ki, ix = ox * g->stride - g->pad + kj;
                                if (iy < 0 || iy >= g->in_h || ix < 0 || ix >= g->in_w)
                                    continue;
                                s += (double)x[((size_t)(n * g->in_c + i) * g->in_h + iy) * g->in_w + ix] *
                                     w[((size_t)(o * g->in_c + i) * g->k_h + ki) * g->k_w + kj];
                            }
                    y[((size_t)(n * g->out_c + o) * oh + oy) * ow + ox] = (float)s;
                }
}

/* naive_conv_backward: dx = dL/dx, dw = dL/dw (both overwritten) by scattering every tap. */
static void naive_conv_backward(const ddl_conv2d *g, const float *x, const float *w, const float *dy, float *dx,
                                float *dw)
{
    int oh = ddl_conv2d_out_h(g), ow = ddl_conv2d_out_w(g);
    memset(dx, 0, (size_t)g->batch * g->in_c * g->in_h * g->in_w * sizeof *dx);
    memset(dw, 0, (size_t)g->out_c * g->in_c * g->k_h * g->k_w * sizeof *dw);
    for (int n = 0; n < g->batch; n++)
        for (int o = 0; o < g->out_c; o++)
            for (int oy = 0; oy < oh; oy++)
                for (int ox = 0; ox < ow; ox++) {
                    float d = dy[((size_t)(n * g->out_c + o) * oh + oy) * ow + ox];
                    for (int i = 0; i < g->in_c; i++)
                        for (int ki = 0; ki < g->k_h; ki++)
                            for (int kj = 0; kj < g->k_w; kj++) {
                                int iy = oy * g->stride - g->pad + ki, ix = ox * g->stride - g->pad + kj;
                                if (iy < 0 || iy >= g->in_h || ix < 0 || ix >= g->in_w)
                                    continue;
                                size_t xi = ((size_t)(n * g->in_c + i) * g->in_h + iy) * g->in_w + ix;
                                size_t wi = ((size_t)(o * g->in_c + i) * g->k_h + ki) * g->k_w + kj;
                                dx[xi] += d * w[wi];
                                dw[wi] += d * x[xi];
                            }
                }
}

/* naive_deconv: y (N, out_c, OH, OW): every input pixel scatters its weighted kernel. */
static void naive_deconv(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y)
{
    int oh = ddl_deconv2d_out_h(g), ow = ddl_deconv2d_out_w(g);
    size_t plane = (size_t)oh * ow;
    for (int n = 0; n < g->batch; n++)
        for (int o = 0; o < g->out_c; o++)
            for (size_t t = 0; t < plane; t++)
                y[(size_t)(n * g->out_c + o) * plane + t] = b ? b[o] : 0.0f;
    for (int n = 0; n < g->batch; n++)
        for (int i = 0; i < g->in_c; i++)
            for (int iy = 0; iy < g->in_h; iy++)
                for (int ix = 0; ix < g->in_w; ix++) {
                    float v = x[((size_t)(n * g->in_c + i) * g->in_h + iy) * g->in_w + ix];
                    for (int o = 0; o < g->out_c; o++)
                        for (int ki = 0; ki < g->k_h; ki++)
                            for (int kj = 0; kj < g->k_w; kj++) {
                                int oy = iy * g->stride - g->pad + ki, ox = ix * g->stride - g->pad + kj;
                                if (oy < 0 || oy >= oh || ox < 0 || ox >= ow)
                                    continue;
                                y[(size_t)(n * g->out_c + o) * plane + (size_t)oy * ow + ox] +=
                                    v * w[((size_t)(i * g->out_c + o) * g->k_h + ki) * g->k_w + kj];
                            }
                }
}

#endif
