/* mul.c - the product of two layers' outputs, y = a * b on (N, C, S), where b has a's shape or
 * one value per sample and channel (N, C, 1), broadcast over the S positions: the graph's "mul"
 * layer (ONNX's Mul of two tensors: the x * sigmoid(...) of squeeze-and-excitation blocks); or b
 * of one value a sample and position (N, 1, S), broadcast over the C channels (a spatial gate, as
 * attention U-Nets and CBAM have). Its backward: da = dy * b, and db = dy * a or, broadcast, the
 * sum of dy * a over the positions (in order, in double, rounded once) or over the channels (in
 * channel order, in float). Single-threaded: one multiply a value, memory-bound. */
#include "impl.h"

#include <string.h>

void ddl__mul_forward(int n, int c, size_t s, size_t sb, const float *a, const float *b, float *y)
{
    for (size_t p = 0; p < (size_t)n * c; p++) {
        const float *ap = a + p * s, *bp = b + p * sb;
        float *yp = y + p * s;
        if (sb == 1)
            for (size_t j = 0; j < s; j++)
                yp[j] = ap[j] * bp[0];
        else
            for (size_t j = 0; j < s; j++)
                yp[j] = ap[j] * bp[j];
    }
}

void ddl__mul_backward(int n, int c, size_t s, size_t sb, const float *a, const float *b, const float *dy, float *da,
                       float *db)
{
    for (size_t p = 0; p < (size_t)n * c; p++) {
        const float *ap = a + p * s, *bp = b + p * sb, *dp = dy + p * s;
        if (da) {
            float *xp = da + p * s;
            for (size_t j = 0; j < s; j++)
                xp[j] = dp[j] * bp[sb == 1 ? 0 : j];
        }
        if (db && sb == 1) {
            double sum = 0.0;
            for (size_t j = 0; j < s; j++)
                sum += (double)dp[j] * ap[j];
            db[p] = (float)sum;
        } else if (db) {
            for (size_t j = 0; j < s; j++)
                db[p * s + j] = dp[j] * ap[j];
        }
    }
}

void ddl__mul_spatial_forward(int n, int c, size_t s, const float *a, const float *b, float *y)
{
    for (size_t p = 0; p < (size_t)n * c; p++) {
        const float *ap = a + p * s, *bp = b + p / (size_t)c * s;
        float *yp = y + p * s;
        for (size_t j = 0; j < s; j++)
            yp[j] = ap[j] * bp[j];
    }
}

void ddl__mul_spatial_backward(int n, int c, size_t s, const float *a, const float *b, const float *dy, float *da,
                               float *db)
{
    for (size_t p = 0; p < (size_t)n * c; p++) {
        const float *ap = a + p * s, *bp = b + p / (size_t)c * s, *dp = dy + p * s;
        float *gp = db ? db + p / (size_t)c * s : NULL;
        for (size_t j = 0; da && j < s; j++)
            da[p * s + j] = dp[j] * bp[j];
        if (gp && p % (size_t)c == 0)
            memset(gp, 0, s * sizeof *gp);
        for (size_t j = 0; gp && j < s; j++)
            gp[j] += dp[j] * ap[j];
    }
}
