/* impl.h - what the files of src/data share: a whole file in memory (file.c), decoded images
 * (decode.c) and the one resize (resize.c) that image folders and single images go through. */
#ifndef DDL_DATA_IMPL_H
#define DDL_DATA_IMPL_H
#include "core/impl.h"

/* The largest image decoded: 2^26 pixels (8192 x 8192), so that a small file that claims a huge
 * image (a decompression bomb) is refused before anything is allocated for it. */
#define DDL__IMAGE_MAX_PIXELS ((uint64_t)1 << 26)

/* ddl__read_file: the regular file path, of at most max_bytes, into *buf (from alloc, one byte
 * more than *bytes; free it with ddl__free). DDL_OK, DDL_EIO, DDL_EINVAL (too large) or DDL_ENOMEM,
 * with err naming path; *buf is NULL on failure. */
int ddl__read_file(const char *path, uint64_t max_bytes, const ddl_allocator *alloc, unsigned char **buf,
                   size_t *bytes, char *err, size_t err_bytes);

/* A decoded image: h rows of w pixels of c channels, interleaved (H, W, C). */
typedef struct ddl__image {
    int w, h, c;
    uint8_t *px; /* from the allocator given to ddl__image_decode */
} ddl__image;

/* ddl__image_decode: the file path's bytes b[n] (JPEG, PNG, binary PGM or PPM, told by their
 * first bytes) as want_c channels (1: gray, 3: RGB); want_w > 0: an image of another size than
 * want_w x want_h is refused (DDL_EINVAL) from its header, before it is decoded. DDL_OK, or
 * DDL_ECORRUPT (damaged, not an image, too large), DDL_ENOTSUP (a format or variant this build
 * does not read), DDL_ENOMEM, with err naming path. */
int ddl__image_decode(const char *path, const unsigned char *b, size_t n, int want_c, int want_w, int want_h,
                      const ddl_allocator *alloc, ddl__image *im, char *err, size_t err_bytes);

/* ddl__resize: src (sh, sw, c) interleaved into dst (dh, dw, c), antialiased bilinear, exactly
 * as PIL's Image.resize(BILINEAR) (and so torchvision's antialiased resize) computes it: 22-bit
 * fixed-point weights, the rows first, then the columns, each pass rounded to bytes. Scratch
 * memory from alloc; DDL_OK or DDL_ENOMEM. */
int ddl__resize(const uint8_t *src, int sw, int sh, int c, uint8_t *dst, int dw, int dh, const ddl_allocator *alloc);

#include "data/augment.h" /* the layer's face to training */

#endif
