/* png.c - pixels to a PNG in memory, for the image summaries of event files, through libpng
 * (WITH_PNG=1, Debian's libpng-dev). The output buffer comes from the caller's allocator, sized
 * once for the worst case (stored deflate blocks); libpng's own small structures come from
 * malloc, as zlib's do elsewhere. Without libpng every call returns DDL_ENOTSUP. */
#include "impl.h"

#ifdef DDL_WITH_PNG
#include <png.h>
#include <setjmp.h>
#include <string.h>

typedef struct png_sink {
    unsigned char *buf;
    size_t used, cap;
    int overflow;
} png_sink;

static void sink_write(png_structp png, png_bytep data, size_t n)
{
    png_sink *s = (png_sink *)png_get_io_ptr(png);
    if (n > s->cap - s->used) {
        s->overflow = 1;
        png_error(png, "PNG larger than its buffer");
    }
    memcpy(s->buf + s->used, data, n);
    s->used += n;
}

static void sink_flush(png_structp png) { (void)png; }

/* encode: the PNG of pixels into sink (libpng's errors longjmp back here). */
static int encode(png_sink *sink, const uint8_t *pixels, int height, int width, int channels)
{
    static const int color[5] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                                 PNG_COLOR_TYPE_RGB_ALPHA};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_write_struct(&png, NULL);
        return DDL_ENOMEM;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        return sink->overflow ? DDL_ENOMEM : DDL_EINVAL;
    }
    png_set_write_fn(png, sink, sink_write, sink_flush);
    png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, 8, color[channels], PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < height; y++)
        png_write_row(png, (png_const_bytep)(pixels + (size_t)y * (size_t)width * (size_t)channels));
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return DDL_OK;
}

int ddl__png_encode(const uint8_t *pixels, int height, int width, int channels, const ddl_allocator *alloc,
                    unsigned char **png, size_t *png_bytes, char *err, size_t err_bytes)
{
    *png = NULL;
    *png_bytes = 0;
    if (!pixels || height < 1 || width < 1 || height > 16384 || width > 16384 || channels < 1 || channels > 4)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "image of %dx%d pixels, %d channels: expected 1 to 16384 "
                         "pixels a side, 1 to 4 channels", height, width, channels);
    /* Worst case: the raw rows (a filter byte each) as deflate stores incompressible data (zlib's
     * deflateBound adds under raw / 2048), in IDAT chunks of 8 KiB (12 bytes each), plus the
     * signature, IHDR and IEND: raw + raw / 256 + 2 KiB holds them. */
    size_t raw = (size_t)height * ((size_t)width * (size_t)channels + 1);
    png_sink sink = {NULL, 0, raw + raw / 256 + 2048, 0};
    sink.buf = (unsigned char *)ddl__alloc(alloc, sink.cap);
    if (!sink.buf)
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "PNG: cannot allocate %zu bytes", sink.cap);
    int rc = encode(&sink, pixels, height, width, channels);
    if (rc != DDL_OK) {
        ddl__free(alloc, sink.buf);
        return ddl__errf(err, err_bytes, rc, "PNG of %dx%d pixels: libpng failed", height, width);
    }
    *png = sink.buf;
    *png_bytes = sink.used;
    return DDL_OK;
}

#else

int ddl__png_encode(const uint8_t *pixels, int height, int width, int channels, const ddl_allocator *alloc,
                    unsigned char **png, size_t *png_bytes, char *err, size_t err_bytes)
{
    (void)pixels, (void)height, (void)width, (void)channels, (void)alloc;
    *png = NULL;
    *png_bytes = 0;
    return ddl__errf(err, err_bytes, DDL_ENOTSUP, "image summaries need libpng: ddl was built with WITH_PNG=0");
}

#endif
