/* augment.c - random horizontal flips and random crops of padded images, as torchvision's
 * RandomHorizontalFlip and RandomCrop(padding=P) make them, applied while a sample is gathered.
 * What a sample gets is a pure function of (seed, epoch, sample index): no generator state
 * travels between steps, so every world size, thread count and resumed run sees the same
 * augmented samples. Masks move with their images. Allocates nothing. */
#include "impl.h"

#include <string.h>

/* mix: splitmix64's finaliser, to spread (seed, epoch, sample) over 64 bits. */
static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void ddl__augment_draw(uint64_t seed, int epoch, uint64_t sample, int flags, int pad, ddl__augment *a)
{
    uint64_t r = mix(mix(mix(seed ^ 0x61756721ull) + (uint64_t)epoch) + sample);
    a->flip = (flags & DDL_AUGMENT_FLIP) ? (int)(r & 1) : 0;
    int span = 2 * pad + 1;
    a->dy = (flags & DDL_AUGMENT_CROP) ? (int)((r >> 8) % (uint64_t)span) - pad : 0;
    a->dx = (flags & DDL_AUGMENT_CROP) ? (int)((r >> 32) % (uint64_t)span) - pad : 0;
}

/* source column of output column x, or -1 outside the image */
static inline int src_x(const ddl__augment *a, int x, int w)
{
    int sx = x + a->dx;
    if (a->flip)
        sx = w - 1 - sx;
    return sx >= 0 && sx < w ? sx : -1;
}

void ddl__augment_image(const ddl__augment *a, const uint8_t *src, const float *fsrc, int c, int h, int w,
                        const float *scales, const float *shifts, float *dst)
{
    for (int ch = 0; ch < c; ch++)
        for (int y = 0; y < h; y++) {
            /* scales NULL: shifts holds the one scale and shift of every channel */
            float scale = scales ? scales[ch] : shifts[0], shift = scales ? shifts[ch] : shifts[1];
            int sy = y + a->dy;
            float *out = dst + ((size_t)ch * h + y) * w;
            if (sy < 0 || sy >= h) { /* padding: a black pixel, normalised */
                for (int x = 0; x < w; x++)
                    out[x] = shift;
                continue;
            }
            size_t row = ((size_t)ch * h + sy) * w;
            for (int x = 0; x < w; x++) {
                int sx = src_x(a, x, w);
                float v = sx < 0 ? 0.0f : src ? (float)src[row + sx] : fsrc[row + sx];
                out[x] = sx < 0 ? shift : v * scale + shift;
            }
        }
}

void ddl__augment_mask(const ddl__augment *a, const uint8_t *src, const uint16_t *src16, int h, int w,
                       uint16_t *dst)
{
    for (int y = 0; y < h; y++) {
        int sy = y + a->dy;
        for (int x = 0; x < w; x++) {
            int sx = src_x(a, x, w);
            size_t at = (size_t)sy * w + sx;
            dst[(size_t)y * w + x] = sy < 0 || sy >= h || sx < 0 ? 0 : src ? src[at] : src16[at];
        }
    }
}
