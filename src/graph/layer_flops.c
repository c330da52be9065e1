/* layer_flops.c - the FLOPs a graph layer does per sample, for profiles, from its geometry: 2 per
 * multiply-add of convolutions, transposed convolutions and dense layers, forward; backward the
 * weights' gradient (as many) and, where the layer hands its input a gradient, the input's (as
 * many again). Every other op counts 0 (ddl.h, "profiling", says so). */
#include "impl.h"

void ddl__layer_flops(const ddl__layer *l, int in_c, int in_h, int in_w, int out_c, int dx, double *fwd,
                      double *bwd)
{
    double f = 0.0;
    if (l->op == DDL__OP_CONV || l->op == DDL__OP_DECONV) {
        ddl_conv2d g = ddl__layer_conv2d(l, 1, in_c, in_h, in_w, out_c);
        f = l->op == DDL__OP_CONV ? ddl_conv2d_flops(&g) : ddl_deconv2d_flops(&g);
    } else if (l->op == DDL__OP_DENSE) {
        f = 2.0 * in_c * in_h * (double)in_w * out_c;
    }
    *fwd = f;
    *bwd = dx ? 2.0 * f : f;
}
