/* image.c - an image body to the model's pixels, through the library's decoder and resize
 * (ddl_image_decode: PNG, JPEG, binary PGM and PPM, converted to the model's channels as PIL's
 * convert("L" or "RGB") does, resized to its input as PIL's BILINEAR does), so that ddl-serve
 * sees the pixels training, ddl-train --predict, the C predictor and the PostgreSQL extension
 * see for the same file. An image may be of any size. What it costs is bounded twice: by the
 * library before anything is decoded (2^26 pixels, a PNG's compressed data by what its rows
 * can need, a JPEG's scans), and by the request's arena (arena.c), where the decoder's memory
 * comes from, so no body makes this thread hold more than its arena; and here, a PNG's deflated
 * text and colour profile (png_packed), which a server's strangers could use. A PGM the library does
 * not read (text P2, or a maxval below 255) is rewritten as binary P5 of maxval 255 first
 * (value * 255 / maxval), in the arena too: only its header and numbers are read here. */
#include "serve.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* ---- PGM that the library does not read ---- */

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

/* pgm_to_p5: a P2 or P5 body whose maxval is 1 to 255 as a P5 of maxval 255 in the arena
 * (*out, *out_n); P5 of maxval 255 is left as it is (*out = body). Returns 0, or -1 with why. */
static int pgm_to_p5(const unsigned char *body, size_t n, const unsigned char **out, size_t *out_n, char *why,
                     size_t why_bytes)
{
    const unsigned char *p = body + 2, *end = body + n;
    int text = body[1] == '2';
    long iw = pgm_int(&p, end), ih = pgm_int(&p, end), maxval = pgm_int(&p, end);
    if (iw < 1 || ih < 1 || maxval < 1 || maxval > 255) {
        snprintf(why, why_bytes, "PGM header: expected width, height and a maxval of 1 to 255");
        return -1;
    }
    *out = body, *out_n = n;
    if (!text && maxval == 255)
        return 0; /* the library's own */
    size_t S = (size_t)iw * (size_t)ih;
    if (!text && (p >= end || (size_t)(end - p - 1) < S)) {
        snprintf(why, why_bytes, "PGM: %zu pixel bytes, expected %zu for %ldx%ld", p >= end ? 0 : (size_t)(end - p - 1),
                 S, iw, ih);
        return -1;
    }
    if (text && S > n / 2 + 1) { /* a text pixel takes two bytes at least: no arena for a lie */
        snprintf(why, why_bytes, "PGM: %ldx%ld pixels cannot be in a text body of %zu bytes", iw, ih, n);
        return -1;
    }
    char head[48];
    int hn = snprintf(head, sizeof head, "P5\n%ld %ld\n255\n", iw, ih);
    unsigned char *b = sv_arena_alloc((size_t)hn + S);
    if (!b) {
        snprintf(why, why_bytes, "PGM: %ldx%ld pixels are more than this server decodes", iw, ih);
        return -1;
    }
    memcpy(b, head, (size_t)hn);
    p += !text; /* the one blank after maxval */
    for (size_t k = 0; k < S; k++) {
        long v = text ? pgm_int(&p, end) : *p++;
        if (v < 0 || v > maxval) {
            snprintf(why, why_bytes, "PGM: pixel %zu missing or above maxval %ld", k, maxval);
            return -1;
        }
        b[hn + k] = (uint8_t)(v * 255 / maxval);
    }
    *out = b, *out_n = (size_t)hn + S;
    return 0;
}

/* ---- PNG's compressed text ---- */

#define PNG_PACKED_MAX 16384 /* bytes of zTXt, iTXt and iCCP chunks: inflated up to 1032 times */

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* png_packed: refuse a PNG body with more than PNG_PACKED_MAX bytes of deflated text and colour
 * profile. They say nothing of the pixels, and libpng inflates each to 8 MB before it gives up
 * (~0.1 s of a worker for a 0.5 MB body): fine for the files of training, not for a server's
 * strangers. Walks the chunks' lengths only; the rest (IDAT's bound, a chunk running past the
 * end, CRCs) is the library's and libpng's. Returns 0, or -1 with why. */
static int png_packed(const unsigned char *body, size_t n, char *why, size_t why_bytes)
{
    size_t packed = 0;
    for (size_t at = 8; at + 12 <= n;) {
        size_t len = be32(body + at);
        const unsigned char *t = body + at + 4;
        if ((!memcmp(t, "zTXt", 4) || !memcmp(t, "iTXt", 4) || !memcmp(t, "iCCP", 4)) && (packed += len) > PNG_PACKED_MAX) {
            snprintf(why, why_bytes, "PNG: more than %d bytes of compressed text and colour profile: refused",
                     PNG_PACKED_MAX);
            return -1;
        }
        if (len > n - at - 12 || !memcmp(t, "IEND", 4)) /* past the end: the library says so */
            break;
        at += len + 12;
    }
    return 0;
}

/* ---- the library's decoder, in the arena ---- */

static void *decode_alloc(void *ud, size_t bytes)
{
    (void)ud;
    return sv_arena_alloc(bytes);
}

static void decode_free(void *ud, void *p) { (void)ud, (void)p; } /* with the arena, after the request */

int sv_image_decode(const unsigned char *body, size_t n, int c, int w, int h, uint8_t *out, size_t cap, char *why,
                    size_t why_bytes)
{
    if ((size_t)c * w * h > cap) {
        snprintf(why, why_bytes, "an image of %dx%dx%d does not fit", c, w, h);
        return -1;
    }
    if (n >= 3 && body[0] == 'P' && (body[1] == '5' || body[1] == '2') && isspace(body[2]) &&
        pgm_to_p5(body, n, &body, &n, why, why_bytes))
        return -1;
    if (n >= 8 && memcmp(body, "\x89PNG\r\n\x1a\n", 8) == 0 && png_packed(body, n, why, why_bytes))
        return -1;
    ddl_allocator alloc = {.alloc = decode_alloc, .free = decode_free};
    char err[DDL_ERR_BYTES];
    int rc = ddl_image_decode("the body", body, n, c, h, w, 0, &alloc, out, err, sizeof err);
    if (rc == DDL_ENOMEM && sv_arena_exhausted())
        snprintf(why, why_bytes, "the image needs more than the %zu MB this server decodes an image in: send a "
                 "smaller one (the model takes %dx%d)", sv_arena_bytes() >> 20, w, h);
    else if (rc != DDL_OK)
        snprintf(why, why_bytes, "%s", err);
    return rc == DDL_OK ? 0 : -1;
}
