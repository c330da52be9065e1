/* image.c - an image body to the model's grey pixels: PNG (libpng's simplified API, any colour
 * type converted to 8-bit grey, alpha composed onto black) or PGM (binary P5 or text P2, maxval
 * up to 255). The size is read from the header and checked against the model's before a pixel
 * is decoded, so a small file claiming a huge image costs nothing. A PNG's compressed image data
 * is bounded too, by what its rows can take (png_bound), before libpng sees it: libpng inflates
 * every IDAT byte after the last row before it reports "too much image data", so a 1 MB body
 * of deflated zeros would cost seconds of a worker thread and still be answered 200. */
#include "serve.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef DDL_WITH_PNG
#include <png.h>
#endif

static int wrong_size(int iw, int ih, int w, int h, char *why, size_t why_bytes)
{
    snprintf(why, why_bytes, "image of %dx%d, the model takes %dx%d", iw, ih, w, h);
    return -1;
}

#ifdef DDL_WITH_PNG
#define PNG_PACKED_MAX 16384 /* bytes of zTXt, iTXt and iCCP chunks: inflated up to 1032 times */

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* png_bound: walk the chunks of body (lengths only, no CRC or inflating: libpng checks those)
 * and refuse an image other than w x h, or more IDAT bytes than a deflate stream of its rows
 * can need. The rows are h * (1 + row bytes) inflated (up to 8 bytes a pixel, plus Adam7's
 * filter bytes); a deflate stream is at most 1/8 larger than its data (fixed Huffman codes of
 * 9 bits a byte) plus its block and zlib headers, and 1 KiB of slack covers any encoder. So the
 * inflated bytes libpng can be made to produce are bounded by that too (deflate expands at most
 * ~1032 times): a few MB for the models served here, milliseconds. The other deflated chunks
 * (text, colour profile) say nothing of the pixels and get PNG_PACKED_MAX bytes in all (an sRGB
 * profile is 3 KB). Returns 0, or -1 with why. */
static int png_bound(const unsigned char *body, size_t n, int w, int h, char *why, size_t why_bytes)
{
    if (n < 33 || memcmp(body + 12, "IHDR", 4) != 0 || be32(body + 8) != 13) {
        snprintf(why, why_bytes, "not a PNG image: no IHDR chunk first");
        return -1;
    }
    uint32_t iw = be32(body + 16), ih = be32(body + 20);
    if (iw != (uint32_t)w || ih != (uint32_t)h)
        return wrong_size(iw > INT32_MAX ? -1 : (int)iw, ih > INT32_MAX ? -1 : (int)ih, w, h, why, why_bytes);
    static const int channels[7] = {1, 0, 3, 1, 2, 0, 4}; /* by colour type; 0: not one */
    int depth = body[24], ctype = body[25], interlaced = body[28] != 0;
    int ch = ctype < 7 ? channels[ctype] : 0;
    if (!ch || depth < 1 || depth > 16) {
        snprintf(why, why_bytes, "not a PNG image: colour type %d, bit depth %d", ctype, depth);
        return -1;
    }
    size_t row = ((size_t)w * (size_t)ch * (size_t)depth + 7) / 8;
    size_t rows = (size_t)h * (1 + row) + (interlaced ? (size_t)7 * (h + 8) : 0);
    size_t cap = rows + rows / 8 + 1024, idat = 0, packed = 0;
    for (size_t at = 8; at + 12 <= n;) {
        size_t len = be32(body + at);
        if (len > n - at - 12) { /* libpng would allocate what it claims (up to 2 GB), or skip it
                                   * 1 KiB at a time (6-9 s), before it found the body cut */
            snprintf(why, why_bytes, "PNG: a chunk of %zu bytes runs past the end of the body (%zu bytes are left)",
                     len, n - at - 12);
            return -1;
        }
        if (memcmp(body + at + 4, "IDAT", 4) == 0 && (idat += len) > cap) {
            snprintf(why, why_bytes, "PNG: %zu or more bytes of compressed image data for a %dx%d image, whose "
                     "rows need at most %zu: refused (a decompression bomb?)", idat, w, h, cap);
            return -1;
        }
        if ((!memcmp(body + at + 4, "zTXt", 4) || !memcmp(body + at + 4, "iTXt", 4) ||
             !memcmp(body + at + 4, "iCCP", 4)) && (packed += len) > PNG_PACKED_MAX) {
            snprintf(why, why_bytes, "PNG: more than %d bytes of compressed text and colour profile: refused",
                     PNG_PACKED_MAX);
            return -1;
        }
        if (memcmp(body + at + 4, "IEND", 4) == 0)
            break;
        at += len + 12;
    }
    return 0;
}

static int png_decode(const unsigned char *body, size_t n, int w, int h, uint8_t *out, size_t cap, char *why,
                      size_t why_bytes)
{
    if (png_bound(body, n, w, h, why, why_bytes))
        return -1;
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&im, body, n)) {
        snprintf(why, why_bytes, "not a PNG image: %s", im.message);
        return -1;
    }
    if ((int)im.width != w || (int)im.height != h) {
        png_image_free(&im);
        return wrong_size((int)im.width, (int)im.height, w, h, why, why_bytes);
    }
    im.format = PNG_FORMAT_GRAY;
    png_color black = {0, 0, 0};
    if ((size_t)w * h > cap || !png_image_finish_read(&im, &black, out, 0, NULL)) {
        snprintf(why, why_bytes, "damaged PNG image: %s", im.message);
        png_image_free(&im);
        return -1;
    }
    return 0;
}
#endif

/* pgm_int: the next decimal number of the header at *p (after blanks and # comments); -1 if none. */
static long pgm_int(const unsigned char **p, const unsigned char *end)
{
    while (*p < end && (isspace(**p) || **p == '#')) {
        if (**p == '#')
            while (*p < end && **p != '\n')
                (*p)++;
        else
            (*p)++;
    }
    long v = 0;
    int digits = 0;
    while (*p < end && isdigit(**p) && digits < 9)
        v = v * 10 + (*(*p)++ - '0'), digits++;
    return digits && (*p >= end || !isdigit(**p)) ? v : -1;
}

static int pgm_decode(const unsigned char *body, size_t n, int w, int h, uint8_t *out, size_t cap, char *why,
                      size_t why_bytes)
{
    const unsigned char *p = body + 2, *end = body + n;
    int text = body[1] == '2';
    long iw = pgm_int(&p, end), ih = pgm_int(&p, end), maxval = pgm_int(&p, end);
    if (iw < 1 || ih < 1 || maxval < 1 || maxval > 255) {
        snprintf(why, why_bytes, "PGM header: expected width, height and a maxval of 1 to 255");
        return -1;
    }
    if (iw != w || ih != h)
        return wrong_size((int)iw, (int)ih, w, h, why, why_bytes);
    if ((size_t)w * h > cap)
        return wrong_size((int)iw, (int)ih, w, h, why, why_bytes);
    size_t S = (size_t)w * h;
    if (!text) {
        p++; /* the one blank after maxval */
        if (p > end || (size_t)(end - p) < S) {
            snprintf(why, why_bytes, "PGM: %zu pixel bytes, expected %zu", p > end ? 0 : (size_t)(end - p), S);
            return -1;
        }
    }
    for (size_t k = 0; k < S; k++) {
        long v = text ? pgm_int(&p, end) : *p++;
        if (v < 0 || v > maxval) {
            snprintf(why, why_bytes, "PGM: pixel %zu missing or above maxval %ld", k, maxval);
            return -1;
        }
        out[k] = (uint8_t)(v * 255 / maxval);
    }
    return 0;
}

/* library_decode: through ddl_image_decode (JPEG, PPM, and any image for a colour model), the
 * size checked from the header before anything is decoded. */
static int library_decode(const unsigned char *body, size_t n, int c, int w, int h, uint8_t *out, size_t cap,
                          char *why, size_t why_bytes)
{
    char err[DDL_ERR_BYTES];
    if ((size_t)c * w * h > cap) {
        snprintf(why, why_bytes, "image of %dx%dx%d does not fit", c, w, h);
        return -1;
    }
    if (ddl_image_decode("the body", body, n, c, h, w, 1, NULL, out, err, sizeof err) != DDL_OK) {
        snprintf(why, why_bytes, "%s", err);
        return -1;
    }
    return 0;
}

int sv_image_decode(const unsigned char *body, size_t n, int c, int w, int h, uint8_t *out, size_t cap, char *why,
                    size_t why_bytes)
{
    int png = n >= 8 && memcmp(body, "\x89PNG\r\n\x1a\n", 8) == 0;
    if (png) {
#ifdef DDL_WITH_PNG
        if (c == 1)
            return png_decode(body, n, w, h, out, cap, why, why_bytes);
        return png_bound(body, n, w, h, why, why_bytes) ? -1 : library_decode(body, n, c, w, h, out, cap, why, why_bytes);
#else
        snprintf(why, why_bytes, "this ddl-serve was built without libpng: send PGM or JSON");
        return -1;
#endif
    }
    if (c == 1 && n >= 3 && body[0] == 'P' && (body[1] == '5' || body[1] == '2') && isspace(body[2]))
        return pgm_decode(body, n, w, h, out, cap, why, why_bytes);
    if ((n >= 3 && body[0] == 0xff && body[1] == 0xd8 && body[2] == 0xff) ||
        (n >= 3 && body[0] == 'P' && (body[1] == '5' || body[1] == '6') && isspace(body[2])))
        return library_decode(body, n, c, w, h, out, cap, why, why_bytes);
    snprintf(why, why_bytes, "the body is not a PNG, JPEG, PGM or PPM image");
    return -1;
}
