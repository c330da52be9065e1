/* src/data/augment.h - what the data layer offers the training loop beyond ddl.h: the random
 * flips and crops of DDL_AUGMENT_* (augment.c), drawn per sample from a seed so that every rank
 * and every resume draws the same. Not API. */
#ifndef DDL_DATA_AUGMENT_H
#define DDL_DATA_AUGMENT_H
#include "core/impl.h"

typedef struct ddl__augment {
    int flip;   /* mirror left to right */
    int dy, dx; /* the crop's offset in the padded image, -pad..pad */
} ddl__augment;
/* ddl__augment_draw: what sample `sample` of epoch `epoch` gets (flags DDL_AUGMENT_*). */
void ddl__augment_draw(uint64_t seed, int epoch, uint64_t sample, int flags, int pad, ddl__augment *a);
/* ddl__augment_image: dst (c, h, w) floats = the transformed src (c, h, w) pixels * scales[ch] +
 * shifts[ch] (padding: shifts[ch]); the pixels are bytes (src) or, src NULL, floats (fsrc);
 * scales NULL: shifts is {scale, shift} for every channel.
 * ddl__augment_mask: the same move of a (h, w) mask of bytes (src) or, src NULL, of uint16
 * (src16), into dst (padding: 0). */
void ddl__augment_image(const ddl__augment *a, const uint8_t *src, const float *fsrc, int c, int h, int w,
                        const float *scales, const float *shifts, float *dst);
void ddl__augment_mask(const ddl__augment *a, const uint8_t *src, const uint16_t *src16, int h, int w,
                       uint16_t *dst);

#endif
