/* example_png.h - write an image of palette indices as a PNG file (8-bit indexed colour, one IDAT
 * chunk), for unet --predict's masks. Header-only, for the examples: copy it along. It needs
 * nothing beyond ddl.h (ddl_crc32 is the CRC-32 PNG chunks carry): the zlib stream in IDAT is
 * made of stored, uncompressed deflate blocks, so a copied example links with the flags of
 * `pkg-config --libs ddl` alone (a mask of 32x32 is 1 KB either way). Not named png.h: that is
 * libpng's header, which a copy beside it would shadow. */
#ifndef DDL_EXAMPLE_PNG_H
#define DDL_EXAMPLE_PNG_H

#include "ddl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline void png_put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16), p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* png_chunk: length, type, data, CRC-32 of type and data. */
static inline int png_chunk(FILE *f, const char *type, const unsigned char *data, size_t n)
{
    unsigned char be[4], c[4];
    png_put32(be, (uint32_t)n);
    png_put32(c, ddl_crc32(ddl_crc32(0, type, 4), data, n));
    return fwrite(be, 1, 4, f) == 4 && fwrite(type, 1, 4, f) == 4 && (!n || fwrite(data, 1, n, f) == n) &&
           fwrite(c, 1, 4, f) == 4;
}

/* png_zlib_stored: raw (n bytes) as a zlib stream of stored deflate blocks (RFC 1950/1951) into
 * out, which holds png_zlib_bound(n) bytes; returns the stream's length. */
static inline size_t png_zlib_bound(size_t n) { return 2 + n + 5 * (n / 65535 + 1) + 4; }
static inline size_t png_zlib_stored(const unsigned char *raw, size_t n, unsigned char *out)
{
    size_t at = 0, done = 0;
    uint32_t a = 1, b = 0; /* Adler-32 of raw */
    out[at++] = 0x78, out[at++] = 0x01; /* deflate, 32 KB window, no dictionary; (0x78 << 8 | 1) % 31 == 0 */
    do {
        size_t len = n - done < 65535 ? n - done : 65535;
        out[at++] = done + len == n; /* BFINAL on the last block; BTYPE 00: stored */
        out[at++] = (unsigned char)len, out[at++] = (unsigned char)(len >> 8);
        out[at++] = (unsigned char)~len, out[at++] = (unsigned char)(~len >> 8);
        memcpy(out + at, raw + done, len);
        for (size_t i = 0; i < len; i++)
            a = (a + raw[done + i]) % 65521, b = (b + a) % 65521;
        at += len;
        done += len;
    } while (done < n);
    png_put32(out + at, b << 16 | a);
    return at + 4;
}

/* png_write: w x h palette indices px (row by row) with n_colors colours rgb[n_colors][3] to
 * path. Returns 0, or -1 with why (a static string) in *why. */
static inline int png_write(const char *path, int w, int h, const uint8_t *px, const uint8_t (*rgb)[3], int n_colors,
                            const char **why)
{
    size_t raw_bytes = (size_t)h * (size_t)(w + 1); /* each row: filter type 0, then its indices */
    unsigned char *raw = (unsigned char *)malloc(raw_bytes);
    unsigned char *packed = (unsigned char *)malloc(png_zlib_bound(raw_bytes));
    FILE *f = raw && packed ? fopen(path, "wb") : NULL;
    int ok = f != NULL;
    *why = raw && packed ? "cannot create the file" : "out of memory";
    if (ok) {
        for (int y = 0; y < h; y++) {
            raw[(size_t)y * (w + 1)] = 0;
            memcpy(raw + (size_t)y * (w + 1) + 1, px + (size_t)y * w, (size_t)w);
        }
        unsigned char ihdr[13] = {0, 0, 0, 0, 0, 0, 0, 0, 8, 3, 0, 0, 0}; /* 8 bits, palette */
        png_put32(ihdr, (uint32_t)w);
        png_put32(ihdr + 4, (uint32_t)h);
        size_t packed_bytes = png_zlib_stored(raw, raw_bytes, packed);
        ok = fwrite("\x89PNG\r\n\x1a\n", 1, 8, f) == 8 && png_chunk(f, "IHDR", ihdr, sizeof ihdr) &&
             png_chunk(f, "PLTE", &rgb[0][0], (size_t)n_colors * 3) && png_chunk(f, "IDAT", packed, packed_bytes) &&
             png_chunk(f, "IEND", NULL, 0);
        ok = fclose(f) == 0 && ok;
        *why = "cannot write the file";
    }
    free(raw);
    free(packed);
    return ok ? 0 : -1;
}

#endif
