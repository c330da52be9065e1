/* bf16_conv_pass.h - what the bfloat16 convolution tests (test_conv_bf16_direct.c,
 * test_conv_bf16_amx.c) share: their draws (rnd), the internal calls they reach, and one pass:
 * forward and backward through the public calls in bf16 precision at `threads`, then the scalar
 * reference of each on one thread. Include it after ddl.h. */
#ifndef DDL_TESTS_BF16_CONV_PASS_H
#define DDL_TESTS_BF16_CONV_PASS_H

int ddl__set_precision(int precision);
int ddl__conv2d_bf16_fits(const ddl_conv2d *g);
void ddl__conv2d_bf16_ref_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y);
void ddl__conv2d_bf16_ref_dx(const ddl_conv2d *g, const float *w, const float *dy, float *dx);
void ddl__conv2d_bf16_ref_dw(const ddl_conv2d *g, const float *x, const float *dy, float *dw);

/* rnd: a draw in [-1, 1) from the state *s */
static float rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* bf16_pass: y, dx and dw (+=), db (+=) by ddl_conv2d_forward and _backward in bf16 at `threads`;
 * ry, rdx and rdw (+=) by the references (their order: the AMX kernels' where the test emulates
 * them, else AVX512-BF16's). Leaves one thread and the precision as they were. */
static void bf16_pass(const ddl_conv2d *g, int threads, const float *x, const float *w, const float *b,
                      const float *dy, float *y, float *dx, float *dw, float *db, float *ws, float *ry, float *rdx,
                      float *rdw)
{
    ddl_set_threads(threads);
    int was = ddl__set_precision(DDL_PRECISION_BF16);
    ddl_conv2d_forward(g, x, w, b, y, ws);
    ddl_conv2d_backward(g, x, w, dy, dx, dw, db, ws);
    ddl__set_precision(was);
    ddl_set_threads(1);
    ddl__conv2d_bf16_ref_forward(g, x, w, b, ry);
    ddl__conv2d_bf16_ref_dx(g, w, dy, rdx);
    ddl__conv2d_bf16_ref_dw(g, x, dy, rdw);
}

#endif
