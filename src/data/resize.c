/* resize.c - the one image resize of ddl: antialiased bilinear, as PIL's Image.resize with
 * BILINEAR computes it for 8-bit images (Pillow's Resample.c: a triangle filter widened by the
 * scale when shrinking, weights in 22-bit fixed point, a horizontal pass into a byte image,
 * then a vertical one), so that a folder of photos gives the bytes torchvision's and Keras's
 * pipelines give. tests/test_images.c checks it against Pillow, byte for byte.
 * Owns: the weights and the two passes. Must not: allocate except through the caller's
 * allocator (once per call, at load time). */
#include "impl.h"

#include <math.h>
#include <string.h>

#define PRECISION_BITS (32 - 8 - 2)

static double triangle(double x)
{
    x = x < 0 ? -x : x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* kernel_size: the most taps one output sample uses, going from n_in to n_out samples. */
static int kernel_size(int n_in, int n_out)
{
    double scale = (double)n_in / n_out, filterscale = scale < 1.0 ? 1.0 : scale;
    return (int)ceil(filterscale) * 2 + 1;
}

/* coeffs: for each output sample i, the first input bounds[2i], the count bounds[2i + 1] and
 * the fixed-point weights k[i * ksize ...]. */
static void coeffs(int n_in, int n_out, int ksize, int *bounds, int32_t *k, double *w)
{
    double scale = (double)n_in / n_out, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = 1.0 * filterscale, ss = 1.0 / filterscale;
    for (int i = 0; i < n_out; i++) {
        double center = (i + 0.5) * scale, sum = 0.0;
        int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
        lo = lo < 0 ? 0 : lo;
        hi = (hi > n_in ? n_in : hi) - lo;
        for (int x = 0; x < hi; x++) {
            w[x] = triangle((x + lo - center + 0.5) * ss);
            sum += w[x];
        }
        for (int x = 0; x < ksize; x++) {
            double v = x < hi && sum != 0.0 ? w[x] / sum : 0.0;
            k[(size_t)i * (size_t)ksize + (size_t)x] = (int32_t)(v < 0 ? v * (1 << PRECISION_BITS) - 0.5
                                                                       : v * (1 << PRECISION_BITS) + 0.5);
        }
        bounds[2 * i] = lo;
        bounds[2 * i + 1] = hi;
    }
}

static uint8_t clip8(int32_t v)
{
    v >>= PRECISION_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* rows: src (sh, sw, c) -> tmp (sh, dw, c); all channels of a pixel in one pass over its taps. */
static void rows(const uint8_t *src, int sw, int sh, int c, uint8_t *tmp, int dw, int kx, const int *bh,
                 const int32_t *kh)
{
    for (int y = 0; y < sh; y++) {
        const uint8_t *line = src + (size_t)y * sw * c;
        uint8_t *out = tmp + (size_t)y * dw * c;
        for (int x = 0; x < dw; x++) {
            int32_t acc[4] = {1 << (PRECISION_BITS - 1), 1 << (PRECISION_BITS - 1), 1 << (PRECISION_BITS - 1),
                              1 << (PRECISION_BITS - 1)}; /* 255 x 2^22 fits: as Pillow, in 32 bits */
            const int32_t *k = kh + (size_t)x * kx;
            const uint8_t *s = line + (size_t)bh[2 * x] * c;
            for (int t = 0; t < bh[2 * x + 1]; t++)
                for (int ch = 0; ch < c; ch++)
                    acc[ch] += s[t * c + ch] * k[t];
            for (int ch = 0; ch < c; ch++)
                out[x * c + ch] = clip8(acc[ch]);
        }
    }
}

/* columns: tmp (sh, dw, c) -> dst (dh, dw, c), one output row at a time over whole input rows. */
static void columns(const uint8_t *tmp, int dw, int c, uint8_t *dst, int dh, int ky, const int *bv, const int32_t *kv,
                    int32_t *acc)
{
    size_t n = (size_t)dw * (size_t)c;
    for (int y = 0; y < dh; y++) {
        const int32_t *k = kv + (size_t)y * ky;
        for (size_t i = 0; i < n; i++)
            acc[i] = 1 << (PRECISION_BITS - 1);
        for (int t = 0; t < bv[2 * y + 1]; t++) {
            const uint8_t *s = tmp + (size_t)(bv[2 * y] + t) * n;
            int32_t w = k[t];
            for (size_t i = 0; i < n; i++)
                acc[i] += s[i] * w;
        }
        for (size_t i = 0; i < n; i++)
            dst[(size_t)y * n + i] = clip8(acc[i]);
    }
}

int ddl__resize(const uint8_t *src, int sw, int sh, int c, uint8_t *dst, int dw, int dh, const ddl_allocator *alloc)
{
    if (sw == dw && sh == dh) {
        memcpy(dst, src, (size_t)sw * (size_t)sh * (size_t)c);
        return DDL_OK;
    }
    int kx = kernel_size(sw, dw), ky = kernel_size(sh, dh), kmax = kx > ky ? kx : ky;
    size_t row = (size_t)dw * (size_t)c, tmp_bytes = (size_t)sh * row;
    size_t bytes = row * sizeof(int32_t) + ((size_t)dw * kx + (size_t)dh * ky) * sizeof(int32_t) +
                   2 * ((size_t)dw + (size_t)dh) * sizeof(int) + (size_t)kmax * sizeof(double) + tmp_bytes;
    unsigned char *mem = (unsigned char *)ddl__alloc(alloc, bytes);
    if (!mem)
        return DDL_ENOMEM;
    double *w = (double *)mem;
    int32_t *acc = (int32_t *)(w + kmax), *kh = acc + row, *kv = kh + (size_t)dw * kx;
    int *bh = (int *)(kv + (size_t)dh * ky), *bv = bh + 2 * dw;
    uint8_t *tmp = (uint8_t *)(bv + 2 * dh);
    coeffs(sw, dw, kx, bh, kh, w);
    coeffs(sh, dh, ky, bv, kv, w);
    rows(src, sw, sh, c, tmp, dw, kx, bh, kh);
    columns(tmp, dw, c, dst, dh, ky, bv, kv, acc);
    ddl__free(alloc, mem);
    return DDL_OK;
}
