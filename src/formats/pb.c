/* pb.c - the protobuf codec ONNX files are read and written with (pb.h).
 *
 * Reading: walk the fields of one message, each a number, a wire type and a value (a varint, a
 * fixed 32 or 64 bits, or a length-delimited slice of the buffer, which is itself a message, a
 * string, bytes or a packed array). Nothing is copied or allocated: slices point into the
 * caller's buffer. Every length is checked against what is left before it is used; a malformed
 * message stops the walk with an error the caller reports.
 *
 * Writing: the three field kinds the ONNX exporter needs: varints (wire type 0: int32, int64,
 * enums), length-delimited fields (wire type 2: strings, bytes, nested messages) and floats (wire
 * type 5). Repeated fields are written one element at a time, as every protobuf reader accepts.
 * A nested message is written in place, and when it is closed its bytes move up by the size of
 * its length prefix. Memory grows through the allocator; after a failed allocation every call
 * does nothing and ddl__pb_ok is 0. */
#include "pb.h"

#include <string.h>

/* ---- reading ---- */

static int varint(const unsigned char **p, const unsigned char *end, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end)
            return -1;
        unsigned char b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

int ddl__pb_next(ddl__pb_slice *m, ddl__pb_field *f)
{
    if (m->p >= m->end)
        return 0;
    uint64_t key;
    if (varint(&m->p, m->end, &key) != 0)
        return -1;
    f->number = (int)(key >> 3);
    f->wire = (int)(key & 7);
    f->v = 0;
    f->s = (ddl__pb_slice){NULL, NULL};
    switch (f->wire) {
    case 0: return varint(&m->p, m->end, &f->v) == 0 ? 1 : -1;
    case 1:
    case 5: {
        size_t n = f->wire == 1 ? 8 : 4;
        if ((size_t)(m->end - m->p) < n)
            return -1;
        for (size_t i = 0; i < n; i++)
            f->v |= (uint64_t)m->p[i] << (8 * i);
        m->p += n;
        return 1;
    }
    case 2: {
        uint64_t n;
        if (varint(&m->p, m->end, &n) != 0 || n > (uint64_t)(m->end - m->p))
            return -1;
        f->s = (ddl__pb_slice){m->p, m->p + n};
        m->p += n;
        return 1;
    }
    default: return -1; /* groups (3, 4) and unknown wire types: not in ONNX */
    }
}

int ddl__pb_str(const ddl__pb_field *f, char *out, size_t bytes)
{
    size_t n = (size_t)(f->s.end - f->s.p);
    if (f->wire != 2 || n >= bytes || memchr(f->s.p, '\0', n))
        return -1;
    memcpy(out, f->s.p, n);
    out[n] = '\0';
    return 0;
}

int ddl__pb_ints(const ddl__pb_field *f, int64_t *out, int max, int *n)
{
    if (f->wire == 0) { /* one element, not packed */
        if (*n >= max)
            return -1;
        out[(*n)++] = (int64_t)f->v;
        return 0;
    }
    if (f->wire != 2)
        return -1;
    const unsigned char *p = f->s.p;
    while (p < f->s.end) {
        uint64_t v;
        if (*n >= max || varint(&p, f->s.end, &v) != 0)
            return -1;
        out[(*n)++] = (int64_t)v;
    }
    return 0;
}

/* ---- writing ---- */

/* room: make space for n more bytes. */
static int room(ddl__pb *b, size_t n)
{
    if (b->failed)
        return 0;
    if (b->len + n <= b->cap)
        return 1;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n)
        cap *= 2;
    unsigned char *nb = (unsigned char *)ddl__alloc(b->alloc, cap);
    if (!nb) {
        b->failed = 1;
        return 0;
    }
    if (b->len)
        memcpy(nb, b->buf, b->len);
    ddl__free(b->alloc, b->buf);
    b->buf = nb;
    b->cap = cap;
    return 1;
}

/* varint_at: v as a base-128 varint at p (NULL: only count); returns its length, 1 to 10. */
static size_t varint_at(unsigned char *p, uint64_t v)
{
    size_t n = 0;
    do {
        if (p)
            p[n] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        n++;
        v >>= 7;
    } while (v);
    return n;
}

static void raw_varint(ddl__pb *b, uint64_t v)
{
    if (room(b, 10))
        b->len += varint_at(b->buf + b->len, v);
}

static void key(ddl__pb *b, int field, int wire) { raw_varint(b, (uint64_t)field << 3 | (uint64_t)wire); }

void ddl__pb_varint(ddl__pb *b, int field, uint64_t v)
{
    key(b, field, 0);
    raw_varint(b, v);
}

void ddl__pb_bytes(ddl__pb *b, int field, const void *p, size_t n)
{
    key(b, field, 2);
    raw_varint(b, n);
    if (n && room(b, n)) {
        memcpy(b->buf + b->len, p, n);
        b->len += n;
    }
}

void ddl__pb_string(ddl__pb *b, int field, const char *s) { ddl__pb_bytes(b, field, s, strlen(s)); }

void ddl__pb_float(ddl__pb *b, int field, float f)
{
    key(b, field, 5);
    if (room(b, 4)) {
        ddl__put_lef(b->buf + b->len, f);
        b->len += 4;
    }
}

size_t ddl__pb_begin(ddl__pb *b, int field)
{
    key(b, field, 2);
    return b->len; /* the message's bytes start here; its length goes in front of them */
}

void ddl__pb_end(ddl__pb *b, size_t begun)
{
    if (b->failed)
        return;
    size_t body = b->len - begun, prefix = varint_at(NULL, body);
    if (!room(b, prefix))
        return;
    memmove(b->buf + begun + prefix, b->buf + begun, body);
    varint_at(b->buf + begun, body);
    b->len += prefix;
}

unsigned char *ddl__pb_reserve(ddl__pb *b, size_t n)
{
    if (!room(b, n))
        return NULL;
    b->len += n;
    return b->buf + b->len - n;
}

int ddl__pb_ok(const ddl__pb *b) { return !b->failed; }

void ddl__pb_free(ddl__pb *b)
{
    ddl__free(b->alloc, b->buf);
    b->buf = NULL;
    b->len = b->cap = 0;
}
