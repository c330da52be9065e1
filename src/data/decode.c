/* decode.c - one image file's bytes to 8-bit pixels: JPEG (libjpeg-turbo), PNG (libpng's
 * simplified API), binary PGM and PPM (by hand), as gray (1 channel) or RGB (3), interleaved
 * (H, W, C), as PIL's Image.open(f).convert("L" or "RGB") gives them: gray from colour is
 * ITU-R BT.601 luma in PIL's fixed point, colour from gray repeats the value, alpha is dropped.
 * Owns: telling the format from the first bytes, bounding the work before decoding (the image's
 * size, DDL__IMAGE_MAX_PIXELS; a PNG's compressed data by that size; a JPEG's scans), and turning
 * every decoder's complaint into a message naming the file.
 * Must not: allocate except through the caller's allocator (the decoders' own small state
 * aside), print, or exit (libjpeg's default error handler would: ours jumps back). */
#include "impl.h"

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#ifdef DDL_WITH_JPEG
#include <jpeglib.h>
#endif
#ifdef DDL_WITH_PNG
#include <png.h>
#endif

/* ---- channels ---- */

/* to_channels: n pixels of src_c channels (1, 3, or 4: RGBA, alpha dropped) as want_c in dst
 * (dst may be src when want_c <= src_c: it is written front to back). Luma in PIL's fixed point
 * (ITU-R BT.601: 0.299 R + 0.587 G + 0.114 B, rounded), so gray images match PIL's convert("L"). */
static void to_channels(const uint8_t *src, int src_c, uint8_t *dst, int want_c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = src + i * (size_t)src_c;
        if (want_c == 1)
            dst[i] = src_c == 1 ? p[0] : (uint8_t)((19595u * p[0] + 38470u * p[1] + 7471u * p[2] + 0x8000u) >> 16);
        else if (src_c == 1)
            dst[3 * i] = dst[3 * i + 1] = dst[3 * i + 2] = p[0];
        else
            memmove(dst + 3 * i, p, 3); /* RGB or RGBA: PIL's convert("RGB") drops alpha too */
    }
}

/* size_check: the size a header claims, before anything is decoded: at most DDL__IMAGE_MAX_PIXELS,
 * and exactly want->w x want->h when want->w is set. */
static int size_check(const char *path, long w, long h, const ddl__image *want, char *err, size_t err_bytes)
{
    if (!(w >= 1 && h >= 1 && (uint64_t)w * (uint64_t)h <= DDL__IMAGE_MAX_PIXELS))
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: %ld x %ld pixels: expected 1 to %llu in all", path, w, h,
                         (unsigned long long)DDL__IMAGE_MAX_PIXELS);
    if (want->w && (w != want->w || h != want->h))
        return ddl__errf(err, err_bytes, DDL_EINVAL, "%s: an image of %ldx%ld, expected %dx%d", path, w, h, want->w,
                         want->h);
    return DDL_OK;
}

/* ---- PGM and PPM (binary, maxval 255) ---- */

/* pnm_int: the next decimal field of the header, after white space and # comments. */
static long pnm_int(const unsigned char *b, size_t n, size_t *at)
{
    for (;;) {
        while (*at < n && (b[*at] == ' ' || b[*at] == '\t' || b[*at] == '\n' || b[*at] == '\r'))
            (*at)++;
        if (*at < n && b[*at] == '#')
            while (*at < n && b[*at] != '\n')
                (*at)++;
        else
            break;
    }
    long v = 0;
    size_t start = *at;
    while (*at < n && b[*at] >= '0' && b[*at] <= '9' && v < 1000000000L)
        v = v * 10 + (b[(*at)++] - '0');
    return *at == start ? -1 : v;
}

static int decode_pnm(const char *path, const unsigned char *b, size_t n, int want_c, const ddl_allocator *alloc,
                      ddl__image *im, char *err, size_t err_bytes)
{
    int src_c = b[1] == '5' ? 1 : 3;
    size_t at = 2;
    long w = pnm_int(b, n, &at), h = pnm_int(b, n, &at), maxval = pnm_int(b, n, &at);
    if (w < 0 || h < 0 || maxval < 0 || at >= n)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: a damaged P%c header", path, b[1]);
    if (maxval != 255)
        return ddl__errf(err, err_bytes, DDL_ENOTSUP, "%s: maxval %ld: ddl reads 8-bit PGM and PPM (maxval 255)", path,
                         maxval);
    int rc = size_check(path, w, h, im, err, err_bytes);
    if (rc)
        return rc;
    at++; /* the single white space after maxval */
    size_t px = (size_t)w * (size_t)h, need = px * (size_t)src_c;
    if (n - at < need)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: %zu bytes of pixels, expected %zu for %ld x %ld", path,
                         n - at, need, w, h);
    if (!(im->px = (uint8_t *)ddl__alloc(alloc, px * (size_t)want_c)))
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: cannot allocate the pixels", path);
    to_channels(b + at, src_c, im->px, want_c, px);
    im->w = (int)w, im->h = (int)h, im->c = want_c;
    return DDL_OK;
}

/* ---- JPEG ---- */

#ifdef DDL_WITH_JPEG
typedef struct jpeg_fail {
    struct jpeg_error_mgr mgr;
    jmp_buf back;
    int max_scans; /* what jpeg_scan_limit allows this image */
    int too_many_scans; /* set by jpeg_scan_limit before it jumps back */
} jpeg_fail;

static void jpeg_fail_exit(j_common_ptr cinfo)
{
    jpeg_fail *f = (jpeg_fail *)cinfo->err;
    longjmp(f->back, 1);
}

/* jpeg_warned: libjpeg only warns about a file cut short (and fills the rest with gray) or about
 * damaged data it decodes anyway (a scan out of the progression's order, say): the image is
 * refused, at once, so that a file of thousands of such scans costs no more than its first. */
static void jpeg_warned(j_common_ptr cinfo, int level)
{
    if (level < 0)
        cinfo->err->error_exit(cinfo);
}

/* A progressive JPEG may hold many scans, each a pass over the whole image: a 300 KB file of
 * 8192 x 8192 pixels and 400 scans cost 13 s. libjpeg-turbo's own tools stop at 500 scans
 * (TJPARAM_SCANLIMIT); this progress monitor stops at 500 or at JPEG_SCAN_PIXELS pixels over
 * all scans, whichever comes first (through the error exit): 16 scans at the largest size,
 * where libjpeg's own progressive scripts write 6 (gray) or 10 (colour). */
#define JPEG_MAX_SCANS 500
#define JPEG_SCAN_PIXELS ((uint64_t)1 << 30)

static void jpeg_scan_limit(j_common_ptr cinfo)
{
    jpeg_fail *f = (jpeg_fail *)cinfo->err;
    if (cinfo->is_decompressor && ((j_decompress_ptr)cinfo)->input_scan_number > f->max_scans) {
        f->too_many_scans = 1;
        cinfo->err->error_exit(cinfo);
    }
}

/* cmyk_to_rgb: a CMYK or YCCK JPEG's pixels (libjpeg gives both as CMYK, inverted as Adobe writes
 * them, which PIL assumes of every CMYK JPEG: its "CMYK;I") as RGB, in place (4 bytes a pixel
 * in, 3 out), with PIL's cmyk2rgb: each of R, G, B is (255 - k) - (c (255 - k)) / 255, rounded as
 * its MULDIV255. */
static void cmyk_to_rgb(uint8_t *px, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = px + 4 * i;
        unsigned nk = p[3]; /* 255 - k, k being inverted in the file */
        uint8_t rgb[3];
        for (int j = 0; j < 3; j++) {
            unsigned t = (255u - p[j]) * nk + 128u;
            rgb[j] = (uint8_t)(nk - (((t >> 8) + t) >> 8));
        }
        memcpy(px + 3 * i, rgb, 3);
    }
}

static int decode_jpeg(const char *path, const unsigned char *b, size_t n, int want_c, const ddl_allocator *alloc,
                       ddl__image *im, char *err, size_t err_bytes)
{
    struct jpeg_decompress_struct ci;
    jpeg_fail f;
    uint8_t *volatile px = NULL;
    volatile int rc = DDL_OK;
    ci.err = jpeg_std_error(&f.mgr);
    f.mgr.error_exit = jpeg_fail_exit;
    f.mgr.emit_message = jpeg_warned;
    f.max_scans = JPEG_MAX_SCANS;
    f.too_many_scans = 0;
    struct jpeg_progress_mgr progress = {.progress_monitor = jpeg_scan_limit};
    if (setjmp(f.back)) {
        char msg[JMSG_LENGTH_MAX];
        f.mgr.format_message((j_common_ptr)&ci, msg);
        unsigned w = (unsigned)ci.image_width, h = (unsigned)ci.image_height;
        jpeg_destroy_decompress(&ci);
        ddl__free(alloc, px);
        im->px = NULL;
        if (f.too_many_scans)
            return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: a progressive JPEG of more than %d scans: refused (a "
                             "%u x %u image may have %d)", path, f.max_scans, w, h, f.max_scans);
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: a damaged JPEG file: %s", path, msg);
    }
    jpeg_create_decompress(&ci);
    ci.progress = &progress;
    jpeg_mem_src(&ci, b, (unsigned long)n);
    jpeg_read_header(&ci, TRUE);
    int cmyk = ci.jpeg_color_space == JCS_CMYK || ci.jpeg_color_space == JCS_YCCK;
    if (!(rc = size_check(path, (long)ci.image_width, (long)ci.image_height, im, err, err_bytes))) {
        uint64_t most = JPEG_SCAN_PIXELS / ((uint64_t)ci.image_width * ci.image_height);
        f.max_scans = most < JPEG_MAX_SCANS ? (int)most : JPEG_MAX_SCANS;
        /* as PIL decodes: gray as gray, CMYK and YCCK as CMYK, the rest as RGB */
        ci.out_color_space = ci.jpeg_color_space == JCS_GRAYSCALE ? JCS_GRAYSCALE : cmyk ? JCS_CMYK : JCS_RGB;
        jpeg_start_decompress(&ci);
        size_t row = (size_t)ci.output_width * (size_t)ci.output_components;
        int most_c = want_c > ci.output_components ? want_c : ci.output_components;
        px = (uint8_t *)ddl__alloc(alloc, (size_t)ci.output_width * (size_t)ci.output_height * (size_t)most_c);
        if (!px)
            rc = ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: cannot allocate the pixels", path);
        while (!rc && ci.output_scanline < ci.output_height) {
            JSAMPROW r = px + row * ci.output_scanline;
            jpeg_read_scanlines(&ci, &r, 1);
        }
        if (!rc)
            jpeg_finish_decompress(&ci);
        if (!rc) {
            size_t n_px = (size_t)ci.output_width * (size_t)ci.output_height;
            int have_c = ci.output_components;
            if (cmyk) /* PIL's convert("L") of CMYK goes through RGB too */
                cmyk_to_rgb(px, n_px), have_c = 3;
            if (have_c == 1 && want_c == 3) /* back to front: the gray values are at the start */
                for (size_t i = n_px; i-- > 0;)
                    px[3 * i] = px[3 * i + 1] = px[3 * i + 2] = px[i];
            else
                to_channels(px, have_c, px, want_c, n_px);
            im->w = (int)ci.output_width, im->h = (int)ci.output_height, im->c = want_c;
        }
    }
    jpeg_destroy_decompress(&ci);
    if (rc) {
        ddl__free(alloc, px);
        return rc;
    }
    im->px = px;
    return DDL_OK;
}
#endif

/* ---- PNG ---- */

#ifdef DDL_WITH_PNG
static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* png_bound: the compressed image data (IDAT) a header of w x h can need, checked before libpng
 * inflates any of it. libpng inflates every IDAT byte after the last row before it says "too
 * much image data", and only warns then: 1 MB of deflated zeros behind a 100 x 100 image cost
 * seconds and still decoded. The rows are h * (1 + row bytes) inflated (up to 8 bytes a pixel,
 * plus Adam7's filter bytes); a deflate stream is at most 1/8 larger than its data (fixed
 * Huffman codes of 9 bits a byte) plus block and zlib headers, which 1 KiB of slack covers: so
 * the inflating is bounded by the header's size (ddl-serve's tools/serve/image.c bounds its PNGs
 * the same way). The other chunks are bounded by libpng (an iCCP inflates to 8 MB at most) and by
 * the file: one that runs past its end is refused here. Walks lengths only: CRCs and the rest are
 * libpng's. */
static int png_bound(const char *path, const unsigned char *b, size_t n, char *err, size_t err_bytes)
{
    if (n < 33 || memcmp(b + 12, "IHDR", 4) != 0 || be32(b + 8) != 13)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: a damaged PNG file: no IHDR chunk first", path);
    uint64_t w = be32(b + 16), h = be32(b + 20);
    static const int channels[7] = {1, 0, 3, 1, 2, 0, 4}; /* by colour type; 0: not one */
    int depth = b[24], ctype = b[25], interlaced = b[28] != 0;
    int ch = ctype < 7 ? channels[ctype] : 0;
    if (!ch || depth < 1 || depth > 16) /* libpng names what is wrong */
        return DDL_OK;
    uint64_t row = (w * (uint64_t)ch * (uint64_t)depth + 7) / 8; /* w < 2^32: no overflow */
    uint64_t rows = h * (1 + row) + (interlaced ? 7 * (h + 8) : 0);
    uint64_t cap = rows + rows / 8 + 1024, idat = 0;
    for (size_t at = 8; at + 12 <= n;) {
        size_t len = be32(b + at);
        if (len > n - at - 12) /* libpng would take the chunk's word for it first (a 257-byte file whose
                                * tEXt claimed 1.6 GB cost 8 s before "read beyond end of data") */
            return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: a damaged PNG file: its %.4s chunk of %zu bytes "
                             "runs past the end of the file (%zu bytes)", path, (const char *)b + at + 4, len, n);
        if (memcmp(b + at + 4, "IDAT", 4) == 0 && (idat += len) > cap)
            return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: %llu or more bytes of compressed image data for a "
                             "%llu x %llu PNG, whose rows need at most %llu: refused (a decompression bomb?)", path,
                             (unsigned long long)idat, (unsigned long long)w, (unsigned long long)h,
                             (unsigned long long)cap);
        if (memcmp(b + at + 4, "IEND", 4) == 0)
            break;
        at += len + 12;
    }
    return DDL_OK;
}

static int decode_png(const char *path, const unsigned char *b, size_t n, int want_c, const ddl_allocator *alloc,
                      ddl__image *im, char *err, size_t err_bytes)
{
    int rc = png_bound(path, b, n, err, err_bytes);
    if (rc)
        return rc;
    png_image pi;
    memset(&pi, 0, sizeof pi);
    pi.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&pi, b, n))
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: a damaged PNG file: %s", path, pi.message);
    rc = size_check(path, (long)pi.width, (long)pi.height, im, err, err_bytes);
    if (rc) {
        png_image_free(&pi);
        return rc;
    }
    /* decoded as RGBA (gray and palette expanded), alpha then dropped as PIL's convert does */
    pi.format = PNG_FORMAT_RGBA;
    size_t px = (size_t)pi.width * (size_t)pi.height;
    uint8_t *buf = (uint8_t *)ddl__alloc(alloc, px * 4);
    if (!buf) {
        png_image_free(&pi);
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: cannot allocate the pixels", path);
    }
    if (!png_image_finish_read(&pi, NULL, buf, 0, NULL)) {
        ddl__free(alloc, buf);
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: a damaged PNG file: %s", path, pi.message);
    }
    to_channels(buf, 4, buf, want_c, px);
    im->px = buf, im->w = (int)pi.width, im->h = (int)pi.height, im->c = want_c;
    return DDL_OK;
}
#endif

/* ---- the format from the first bytes ---- */

int ddl__image_decode(const char *path, const unsigned char *b, size_t n, int want_c, int want_w, int want_h,
                      const ddl_allocator *alloc, ddl__image *im, char *err, size_t err_bytes)
{
    memset(im, 0, sizeof *im);
    im->w = want_w, im->h = want_h; /* what size_check wants, until the decoder fills im */
    if (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff) {
#ifdef DDL_WITH_JPEG
        return decode_jpeg(path, b, n, want_c, alloc, im, err, err_bytes);
#else
        return ddl__errf(err, err_bytes, DDL_ENOTSUP, "%s: a JPEG file, and this build has no libjpeg "
                         "(make WITH_JPEG=1 with libjpeg62-turbo-dev installed)", path);
#endif
    }
    if (n >= 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0) {
#ifdef DDL_WITH_PNG
        return decode_png(path, b, n, want_c, alloc, im, err, err_bytes);
#else
        return ddl__errf(err, err_bytes, DDL_ENOTSUP, "%s: a PNG file, and this build has no libpng "
                         "(make WITH_PNG=1 with libpng-dev installed)", path);
#endif
    }
    if (n >= 3 && b[0] == 'P' && (b[1] == '5' || b[1] == '6'))
        return decode_pnm(path, b, n, want_c, alloc, im, err, err_bytes);
    return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: not a JPEG, PNG, PGM or PPM file (it starts %02x %02x %02x %02x)",
                     path, n > 0 ? b[0] : 0, n > 1 ? b[1] : 0, n > 2 ? b[2] : 0, n > 3 ? b[3] : 0);
}
