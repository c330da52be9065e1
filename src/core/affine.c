/* affine.c - a constant affine map per channel, y = x * scale[c] + shift[c] on (N, C, S), and its
 * backward dx = dy * scale[c]: the graph's parameter-free "affine" layer (an ONNX Mul or Add of a
 * per-channel constant). Single-threaded: one multiply-add a value, memory-bound. */
#include "impl.h"

void ddl__affine_channels_forward(int n, int c, size_t s, const float *x, const float *scale, const float *shift,
                                  float *y)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < c; k++) {
            const float *xi = x + ((size_t)i * c + k) * s;
            float *yi = y + ((size_t)i * c + k) * s, a = scale[k], b = shift[k];
            for (size_t j = 0; j < s; j++)
                yi[j] = xi[j] * a + b;
        }
}

void ddl__affine_channels_backward(int n, int c, size_t s, const float *dy, const float *scale, float *dx)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < c; k++) {
            const float *di = dy + ((size_t)i * c + k) * s;
            float *xi = dx + ((size_t)i * c + k) * s, a = scale[k];
            for (size_t j = 0; j < s; j++)
                xi[j] = di[j] * a;
        }
}
