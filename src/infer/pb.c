/* pb.c - a protobuf writer for the three field kinds the ONNX exporter needs: varints (wire type
 * 0: int32, int64, enums), length-delimited fields (wire type 2: strings, bytes, nested
 * messages) and floats (wire type 5). Repeated fields are written one element at a time, as
 * every protobuf reader accepts. A nested message is written in place, and when it is closed
 * its bytes move up by the size of its length prefix. Memory grows through the allocator;
 * after a failed allocation every call does nothing and ddl__pb_ok is 0. */
#include "impl.h"

#include <string.h>

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
