/* image.c - an image body to the model's grey pixels: PNG (libpng's simplified API, any colour
 * type converted to 8-bit grey, alpha composed onto black) or PGM (binary P5 or text P2, maxval
 * up to 255). The size is read from the header and checked against the model's before a pixel
 * is decoded, so a small file claiming a huge image costs nothing. */
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
static int png_decode(const unsigned char *body, size_t n, int w, int h, uint8_t *out, size_t cap, char *why,
                      size_t why_bytes)
{
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

int sv_image_decode(const unsigned char *body, size_t n, int w, int h, uint8_t *out, size_t cap, char *why,
                    size_t why_bytes)
{
    if (n >= 8 && memcmp(body, "\x89PNG\r\n\x1a\n", 8) == 0) {
#ifdef DDL_WITH_PNG
        return png_decode(body, n, w, h, out, cap, why, why_bytes);
#else
        snprintf(why, why_bytes, "this ddl-serve was built without libpng: send PGM or JSON");
        return -1;
#endif
    }
    if (n >= 3 && body[0] == 'P' && (body[1] == '5' || body[1] == '2') && isspace(body[2]))
        return pgm_decode(body, n, w, h, out, cap, why, why_bytes);
    snprintf(why, why_bytes, "the body is neither a PNG nor a PGM image");
    return -1;
}
