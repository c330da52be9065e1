/* canvas.h - an RGB picture in memory, drawn with rectangles, lines and a 5x7 font, and written
 * as a PNG through libpng: the drawing of ddl-plot's charts (tools/ddl-plot.c, and its timeline,
 * tools/timeline_chart.h). Static functions, for the one program that includes it. */
#ifndef DDL_TOOLS_CANVAS_H
#define DDL_TOOLS_CANVAS_H

#include <ctype.h>
#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct canvas {
    int w, h;
    uint8_t *px; /* (h, w, 3) */
} canvas;

static const uint8_t run_colors[8][3] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44},  {214, 39, 40},
                                         {148, 103, 189}, {140, 86, 75}, {227, 119, 194}, {127, 127, 127}};

/* 5x7 glyphs, a row a byte, bit 4 the leftmost pixel (the HD44780's shapes). */
static const uint8_t font_digits[10][7] = {
    {14, 17, 19, 21, 25, 17, 14}, {4, 12, 4, 4, 4, 4, 14},   {14, 17, 1, 2, 4, 8, 31},  {31, 2, 4, 2, 1, 17, 14},
    {2, 6, 10, 18, 31, 2, 2},     {31, 16, 30, 1, 1, 17, 14}, {6, 8, 16, 30, 17, 17, 14}, {31, 1, 2, 4, 8, 8, 8},
    {14, 17, 17, 14, 17, 17, 14}, {14, 17, 17, 15, 1, 2, 12}};
static const uint8_t font_lower[26][7] = {
    {0, 0, 14, 1, 15, 17, 15},   {16, 16, 22, 25, 17, 17, 30}, {0, 0, 14, 16, 16, 17, 14}, {1, 1, 13, 19, 17, 17, 15},
    {0, 0, 14, 17, 31, 16, 14},  {6, 9, 8, 28, 8, 8, 8},       {0, 15, 17, 17, 15, 1, 14}, {16, 16, 22, 25, 17, 17, 17},
    {4, 0, 12, 4, 4, 4, 14},     {2, 0, 6, 2, 2, 18, 12},      {16, 16, 18, 20, 24, 20, 18}, {12, 4, 4, 4, 4, 4, 14},
    {0, 0, 26, 21, 21, 17, 17},  {0, 0, 22, 25, 17, 17, 17},   {0, 0, 14, 17, 17, 17, 14}, {0, 0, 30, 17, 30, 16, 16},
    {0, 0, 13, 19, 15, 1, 1},    {0, 0, 22, 25, 16, 16, 16},   {0, 0, 14, 16, 14, 1, 30},  {8, 8, 28, 8, 8, 9, 6},
    {0, 0, 17, 17, 17, 19, 13},  {0, 0, 17, 17, 17, 10, 4},    {0, 0, 17, 17, 21, 21, 10}, {0, 0, 17, 10, 4, 10, 17},
    {0, 0, 17, 17, 15, 1, 14},   {0, 0, 31, 2, 4, 8, 31}};

static const uint8_t *glyph(int ch)
{
    static const uint8_t dot[7] = {0, 0, 0, 0, 0, 12, 12}, minus[7] = {0, 0, 0, 31, 0, 0, 0},
                         under[7] = {0, 0, 0, 0, 0, 0, 31}, slash[7] = {0, 1, 2, 4, 8, 16, 0},
                         plus[7] = {0, 4, 4, 31, 4, 4, 0}, blank[7] = {0};
    ch = tolower(ch);
    if (ch >= '0' && ch <= '9')
        return font_digits[ch - '0'];
    if (ch >= 'a' && ch <= 'z')
        return font_lower[ch - 'a'];
    return ch == '.' ? dot : ch == '-' ? minus : ch == '_' ? under : ch == '/' ? slash : ch == '+' ? plus : blank;
}

static void put_px(canvas *c, int x, int y, const uint8_t rgb[3])
{
    if (x >= 0 && y >= 0 && x < c->w && y < c->h)
        memcpy(c->px + ((size_t)y * (size_t)c->w + (size_t)x) * 3, rgb, 3);
}

static void fill(canvas *c, int x, int y, int w, int h, const uint8_t rgb[3])
{
    for (int j = y; j < y + h; j++)
        for (int i = x; i < x + w; i++)
            put_px(c, i, j, rgb);
}

/* text: s at (x, y) top-left, scale 2 (10x14 pixels a glyph, 12 apart); returns its width. */
static int text(canvas *c, int x, int y, const char *s, const uint8_t rgb[3])
{
    int x0 = x;
    for (; *s; s++, x += 12) {
        const uint8_t *g = glyph((unsigned char)*s);
        for (int row = 0; row < 7; row++)
            for (int col = 0; col < 5; col++)
                if (g[row] & (16 >> col))
                    fill(c, x + 2 * col, y + 2 * row, 2, 2, rgb);
    }
    return x - x0;
}

static void line(canvas *c, int x0, int y0, int x1, int y1, const uint8_t rgb[3])
{
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, e = dx + dy;
    for (;;) {
        fill(c, x0 - 1, y0 - 1, 3, 3, rgb);
        if (x0 == x1 && y0 == y1)
            break;
        int e2 = 2 * e;
        if (e2 >= dy)
            e += dy, x0 += sx;
        if (e2 <= dx)
            e += dx, y0 += sy;
    }
}

/* mark: an x at (px, py), where a value that is not finite would be. */
static void mark(canvas *c, int px, int py, const uint8_t rgb[3])
{
    line(c, px - 5, py - 5, px + 5, py + 5, rgb);
    line(c, px - 5, py + 5, px + 5, py - 5, rgb);
}

static int write_png(const char *path, const canvas *c)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "ddl-plot: cannot create %s\n", path);
        return 1;
    }
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info || setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        fclose(f);
        fprintf(stderr, "ddl-plot: cannot write %s\n", path);
        return 1;
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)c->w, (png_uint_32)c->h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < c->h; y++)
        png_write_row(png, c->px + (size_t)y * (size_t)c->w * 3);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return fclose(f) == 0 ? 0 : 1;
}

#endif
