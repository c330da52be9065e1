/* pb_read.c - a protobuf reader for ONNX files: walk the fields of one message, each a number, a
 * wire type and a value (a varint, a fixed 32 or 64 bits, or a length-delimited slice of the
 * buffer, which is itself a message, a string, bytes or a packed array). Nothing is copied or
 * allocated: slices point into the caller's buffer. Every length is checked against what is left
 * before it is used; a malformed message stops the walk with an error the caller reports. */
#include "onnx_impl.h"

#include <string.h>

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
