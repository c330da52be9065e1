/* tfevents.h - a reader of TensorBoard event files, for ddl-plot and the tests: TFRecord
 * framing with both masked CRC-32C checked (its own bitwise CRC, not the library's, so the tests
 * check ddl's writer against a second implementation), and the Event fields it needs, decoded
 * by field number (tensorflow/core/util/event.proto, tensorflow/core/framework/summary.proto):
 *   Event 1 wall_time, 2 step, 3 file_version, 5 summary; Summary 1 value (the first is kept);
 *   Value 1 tag, 2 simple_value, 4 image (1 height, 2 width, 3 colorspace, 4 encoded image),
 *   8 tensor (TensorProto 1 dtype, 4 tensor_content, 5 float_val, 6 double_val: TF2's scalars).
 * Unknown fields are skipped by their wire type. Files are opened with tfe_open (regular files
 * only). Header-only; for programs (it uses stdio). */
#ifndef DDL_TFEVENTS_H
#define DDL_TFEVENTS_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { TFE_OTHER = 0, TFE_VERSION = 1, TFE_SCALAR = 2, TFE_IMAGE = 3 };
enum { TFE_EVENT = 1, TFE_END = 0, TFE_TRUNCATED = -1, TFE_BAD_CRC = -2, TFE_BAD_EVENT = -3, TFE_TOO_BIG = -4 };

typedef struct tfe_event {
    int kind;                 /* TFE_* */
    double wall_time;
    int64_t step;
    char text[257];           /* the tag, or the file version */
    double value;             /* TFE_SCALAR */
    int height, width, colorspace;
    size_t image_bytes;       /* TFE_IMAGE: bytes of the encoded image */
    unsigned char png_head[8];/* its first bytes */
    uint64_t offset;          /* where the record starts in the file */
} tfe_event;

static uint32_t tfe_crc32c(const unsigned char *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    while (n--) {
        c ^= *p++;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    }
    return ~c;
}

static uint32_t tfe_masked(const unsigned char *p, size_t n)
{
    uint32_t c = tfe_crc32c(p, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static uint64_t tfe_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* tfe_field: the next field of [*p, end): its number, wire type, varint or fixed value, and for
 * length-delimited ones the body. 0 at the end, -1 when malformed. */
static int tfe_field(const unsigned char **p, const unsigned char *end, int *num, int *wire, uint64_t *v,
                     const unsigned char **body)
{
    if (*p >= end)
        return 0;
    uint64_t key = 0, x = 0;
    for (int s = 0;; s += 7) { /* the key */
        if (*p >= end || s > 63)
            return -1;
        key |= (uint64_t)(**p & 0x7f) << s;
        if (!(*(*p)++ & 0x80))
            break;
    }
    *num = (int)(key >> 3);
    *wire = (int)(key & 7);
    if (*wire == 0 || *wire == 2) {
        for (int s = 0;; s += 7) {
            if (*p >= end || s > 63)
                return -1;
            x |= (uint64_t)(**p & 0x7f) << s;
            if (!(*(*p)++ & 0x80))
                break;
        }
        *v = x;
        if (*wire == 2) {
            if (x > (uint64_t)(end - *p))
                return -1;
            *body = *p;
            *p += x;
        }
        return 1;
    }
    int n = *wire == 1 ? 8 : *wire == 5 ? 4 : 0;
    if (!n || end - *p < n)
        return -1;
    *v = tfe_le(*p, n);
    *p += n;
    return 1;
}

static double tfe_f32(uint64_t bits)
{
    uint32_t b = (uint32_t)bits;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static double tfe_f64(uint64_t bits)
{
    double d;
    memcpy(&d, &bits, 8);
    return d;
}

/* tfe_tensor: a scalar TensorProto (DT_FLOAT 1 or DT_DOUBLE 2) into *out; 0 if none. */
static int tfe_tensor(const unsigned char *p, const unsigned char *end, double *out)
{
    int num, wire, dtype = 0, got = 0;
    uint64_t v;
    const unsigned char *b = NULL;
    while (tfe_field(&p, end, &num, &wire, &v, &b) == 1) {
        if (num == 1 && wire == 0)
            dtype = (int)v;
        else if (num == 5 && wire == 5)
            *out = tfe_f32(v), got = 1;
        else if (num == 5 && wire == 2 && v >= 4)
            *out = tfe_f32(tfe_le(b, 4)), got = 1;
        else if (num == 6 && wire == 1)
            *out = tfe_f64(v), got = 1;
        else if (num == 6 && wire == 2 && v >= 8)
            *out = tfe_f64(tfe_le(b, 8)), got = 1;
        else if (num == 4 && wire == 2)
            got = 2, *out = v >= 8 && dtype == 2 ? tfe_f64(tfe_le(b, 8)) : v >= 4 ? tfe_f32(tfe_le(b, 4)) : 0;
    }
    return got;
}

/* tfe_value: Summary.Value into e. */
static int tfe_value(const unsigned char *p, const unsigned char *end, tfe_event *e)
{
    int num, wire, r;
    uint64_t v;
    const unsigned char *b = NULL;
    while ((r = tfe_field(&p, end, &num, &wire, &v, &b)) == 1) {
        if (num == 1 && wire == 2) {
            size_t n = v < sizeof e->text - 1 ? (size_t)v : sizeof e->text - 1;
            memcpy(e->text, b, n);
            e->text[n] = 0;
        } else if (num == 2 && wire == 5) {
            e->kind = TFE_SCALAR;
            e->value = tfe_f32(v);
        } else if (num == 8 && wire == 2 && tfe_tensor(b, b + v, &e->value)) {
            e->kind = TFE_SCALAR;
        } else if (num == 4 && wire == 2) {
            const unsigned char *q = b, *qe = b + v, *ib = NULL;
            int n2, w2;
            uint64_t v2;
            e->kind = TFE_IMAGE;
            while ((r = tfe_field(&q, qe, &n2, &w2, &v2, &ib)) == 1) {
                if (n2 == 1 && w2 == 0) e->height = (int)v2;
                else if (n2 == 2 && w2 == 0) e->width = (int)v2;
                else if (n2 == 3 && w2 == 0) e->colorspace = (int)v2;
                else if (n2 == 4 && w2 == 2) {
                    e->image_bytes = (size_t)v2;
                    memcpy(e->png_head, ib, v2 < 8 ? (size_t)v2 : 8);
                }
            }
            if (r < 0)
                return -1;
        }
    }
    return r;
}

/* tfe_decode: an Event's bytes into e. 0 or -1 (malformed). */
static int tfe_decode(const unsigned char *p, size_t n, tfe_event *e)
{
    const unsigned char *end = p + n, *b = NULL;
    int num, wire, r, first_value = 1;
    uint64_t v;
    while ((r = tfe_field(&p, end, &num, &wire, &v, &b)) == 1) {
        if (num == 1 && wire == 1)
            e->wall_time = tfe_f64(v);
        else if (num == 2 && wire == 0)
            e->step = (int64_t)v;
        else if (num == 3 && wire == 2) {
            size_t k = v < sizeof e->text - 1 ? (size_t)v : sizeof e->text - 1;
            e->kind = TFE_VERSION;
            memcpy(e->text, b, k);
            e->text[k] = 0;
        } else if (num == 5 && wire == 2) { /* Summary: its first value */
            const unsigned char *q = b, *qe = b + v, *vb = NULL;
            int n2, w2;
            uint64_t v2;
            while ((r = tfe_field(&q, qe, &n2, &w2, &v2, &vb)) == 1)
                if (n2 == 1 && w2 == 2 && first_value) {
                    first_value = 0;
                    if (tfe_value(vb, vb + v2, e) < 0)
                        return -1;
                }
            if (r < 0)
                return -1;
        }
    }
    return r < 0 ? -1 : 0;
}

/* tfe_open: path to read records from, if it is a regular file: anyone who may write in a log
 * directory can leave a FIFO there under an event file's name, and a reader that opened it would
 * wait for a writer forever (ddl-serve's workers did). So it is opened O_NONBLOCK, which a FIFO
 * cannot block, and checked with fstat before anything is read. NULL with why (naming path). */
static inline FILE *tfe_open(const char *path, char *why, size_t why_bytes)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        snprintf(why, why_bytes, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, why_bytes, "%s: not a regular file (mode %06o): not read", path, (unsigned)st.st_mode);
        close(fd);
        return NULL;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        snprintf(why, why_bytes, "%s: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

/* tfe_next: the next record of f into e (*buf, *cap: a buffer the caller frees). Returns
 * TFE_EVENT, TFE_END (clean end of file), TFE_TRUNCATED (a partial record at the end),
 * TFE_BAD_CRC, TFE_BAD_EVENT, TFE_TOO_BIG (over 256 MiB). */
static int tfe_next(FILE *f, tfe_event *e, unsigned char **buf, size_t *cap)
{
    unsigned char head[12], tail[4];
    memset(e, 0, sizeof *e);
    long at = ftell(f);
    e->offset = at < 0 ? 0 : (uint64_t)at;
    size_t got = fread(head, 1, 12, f);
    if (got == 0)
        return TFE_END;
    if (got < 12)
        return TFE_TRUNCATED;
    if (tfe_le(head + 8, 4) != tfe_masked(head, 8))
        return TFE_BAD_CRC;
    uint64_t n = tfe_le(head, 8);
    if (n > ((uint64_t)256 << 20))
        return TFE_TOO_BIG;
    struct stat st; /* a length past the file's end: nothing to allocate for (a hostile file asked 256 MiB) */
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && n + 4 > (uint64_t)st.st_size - e->offset - 12)
        return TFE_TRUNCATED;
    if (n + 1 > *cap) {
        unsigned char *nb = (unsigned char *)realloc(*buf, (size_t)n + 1);
        if (!nb)
            return TFE_TOO_BIG;
        *buf = nb;
        *cap = (size_t)n + 1;
    }
    if (fread(*buf, 1, (size_t)n, f) < n || fread(tail, 1, 4, f) < 4)
        return TFE_TRUNCATED;
    if (tfe_le(tail, 4) != tfe_masked(*buf, (size_t)n))
        return TFE_BAD_CRC;
    return tfe_decode(*buf, (size_t)n, e) == 0 ? TFE_EVENT : TFE_BAD_EVENT;
}

#endif
