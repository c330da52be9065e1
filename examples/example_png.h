/* png.h - write an image of palette indices as a PNG file (8-bit indexed colour, one IDAT chunk
 * compressed with zlib), for unet --predict's masks. Header-only, for the examples: copy it
 * along. Without zlib (a build with WITH_ZLIB=0) png_write refuses, saying so. */
#ifndef DDL_EXAMPLE_PNG_H
#define DDL_EXAMPLE_PNG_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef DDL_WITH_ZLIB
#include <zlib.h>

/* png_chunk: length, type, data, CRC-32 of type and data. */
static inline int png_chunk(FILE *f, const char *type, const unsigned char *data, size_t n)
{
    unsigned char be[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16), (unsigned char)(n >> 8),
                           (unsigned char)n};
    unsigned long crc = crc32(crc32(0L, Z_NULL, 0), (const Bytef *)type, 4);
    crc = n ? crc32(crc, data, (uInt)n) : crc;
    unsigned char c[4] = {(unsigned char)(crc >> 24), (unsigned char)(crc >> 16), (unsigned char)(crc >> 8),
                          (unsigned char)crc};
    return fwrite(be, 1, 4, f) == 4 && fwrite(type, 1, 4, f) == 4 && (!n || fwrite(data, 1, n, f) == n) &&
           fwrite(c, 1, 4, f) == 4;
}
#endif

/* png_write: w x h palette indices px (row by row) with n_colors colours rgb[n_colors][3] to
 * path. Returns 0, or -1 with why (a static string, or errno's) in *why. */
static inline int png_write(const char *path, int w, int h, const uint8_t *px, const uint8_t (*rgb)[3], int n_colors,
                     const char **why)
{
#ifndef DDL_WITH_ZLIB
    (void)path, (void)w, (void)h, (void)px, (void)rgb, (void)n_colors;
    *why = "this build has no zlib (WITH_ZLIB=0) to compress PNG data";
    return -1;
#else
    size_t raw_bytes = (size_t)h * (size_t)(w + 1); /* each row: filter type 0, then its indices */
    uLongf packed_bytes = compressBound((uLong)raw_bytes);
    unsigned char *raw = (unsigned char *)malloc(raw_bytes), *packed = (unsigned char *)malloc(packed_bytes);
    FILE *f = raw && packed ? fopen(path, "wb") : NULL;
    int ok = f != NULL;
    *why = raw && packed ? "cannot create the file" : "out of memory";
    if (ok) {
        for (int y = 0; y < h; y++) {
            raw[(size_t)y * (w + 1)] = 0;
            memcpy(raw + (size_t)y * (w + 1) + 1, px + (size_t)y * w, (size_t)w);
        }
        unsigned char ihdr[13] = {(unsigned char)(w >> 24), (unsigned char)(w >> 16), (unsigned char)(w >> 8),
                                  (unsigned char)w, (unsigned char)(h >> 24), (unsigned char)(h >> 16),
                                  (unsigned char)(h >> 8), (unsigned char)h, 8, 3, 0, 0, 0}; /* 8 bits, palette */
        ok = compress2(packed, &packed_bytes, raw, (uLong)raw_bytes, 9) == Z_OK &&
             fwrite("\x89PNG\r\n\x1a\n", 1, 8, f) == 8 && png_chunk(f, "IHDR", ihdr, sizeof ihdr) &&
             png_chunk(f, "PLTE", &rgb[0][0], (size_t)n_colors * 3) && png_chunk(f, "IDAT", packed, packed_bytes) &&
             png_chunk(f, "IEND", NULL, 0);
        ok = fclose(f) == 0 && ok;
        *why = "cannot write the file";
    }
    free(raw);
    free(packed);
    return ok ? 0 : -1;
#endif
}

#endif
