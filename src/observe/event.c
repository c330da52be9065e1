/* event.c - the bytes of TensorBoard's event files, written by hand: the three protobuf field
 * kinds an Event needs (varint, 64-/32-bit fixed, length-delimited) and TFRecord's framing. It
 * knows no files and no clocks; summary.c decides what to write and when.
 *
 * The messages follow TensorFlow's protos (field numbers as there):
 *   tensorflow/core/util/event.proto (tensorboard/compat/proto/event.proto)
 *     Event    1 wall_time double (fixed64)   2 step int64 (varint)
 *              3 file_version string          5 summary Summary
 *   tensorflow/core/framework/summary.proto (tensorboard/compat/proto/summary.proto)
 *     Summary  1 value repeated Value
 *     Value    1 tag string   2 simple_value float (fixed32)   4 image Image
 *     Image    1 height int32   2 width int32   3 colorspace int32   4 encoded_image_string bytes
 * As proto3 serialisers do, a field at its default (step 0) is left out. Fields are written in
 * number order, except that the image is the last field of each message that holds it, so an
 * image's PNG bytes are the tail of the Event and need not be copied.
 *
 * The framing follows tensorflow/core/lib/io/record_writer.cc: uint64 length, uint32 masked
 * CRC-32C of those 8 bytes, the data, uint32 masked CRC-32C of the data, all little endian; the
 * mask is tensorflow/core/lib/hash/crc32c.h's Mask: rotate right by 15, add 0xa282ead8. */
#include "impl.h"

#include <string.h>

/* ---- protobuf ---- */

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2, WIRE_FIXED32 = 5 };

static size_t varint_bytes(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static unsigned char *put_varint(unsigned char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

static unsigned char *put_key(unsigned char *p, int field, int wire) { return put_varint(p, (uint64_t)field << 3 | (unsigned)wire); }

/* put_len: the key and length of a length-delimited field of `bytes` bytes (its body follows). */
static unsigned char *put_len(unsigned char *p, int field, size_t bytes)
{
    return put_varint(put_key(p, field, WIRE_LEN), bytes);
}

/* len_field_bytes: all bytes of a length-delimited field (keys here are one byte: fields < 16). */
static size_t len_field_bytes(size_t body) { return 1 + varint_bytes(body) + body; }

/* int_field_bytes: an int32/int64 varint field; 0 when v is 0 (proto3 leaves it out). */
static size_t int_field_bytes(int64_t v) { return v ? 1 + varint_bytes((uint64_t)v) : 0; }

static unsigned char *put_int(unsigned char *p, int field, int64_t v)
{
    return v ? put_varint(put_key(p, field, WIRE_VARINT), (uint64_t)v) : p;
}

/* ---- Event ---- */

/* value_body_bytes: Summary.Value: 1 tag, then 2 simple_value or 4 image (with its PNG). */
static size_t value_body_bytes(const ddl__event *e, size_t *image_body)
{
    size_t tag = len_field_bytes(strlen(e->text));
    if (e->kind == DDL__EVENT_SCALAR)
        return tag + 1 + 4;
    *image_body = int_field_bytes(e->height) + int_field_bytes(e->width) + int_field_bytes(e->colorspace) +
                  len_field_bytes(e->png_bytes);
    return tag + len_field_bytes(*image_body);
}

size_t ddl__event_encode(unsigned char *out, const ddl__event *e)
{
    unsigned char *p = put_key(out, 1, WIRE_FIXED64); /* Event.wall_time */
    uint64_t bits;
    memcpy(&bits, &e->wall_time, 8);
    ddl__put_le(p, bits, 8);
    p = put_int(p + 8, 2, e->step); /* Event.step */
    if (e->kind == DDL__EVENT_VERSION) {
        size_t n = strlen(e->text);
        p = put_len(p, 3, n); /* Event.file_version */
        memcpy(p, e->text, n);
        return (size_t)(p + n - out);
    }
    size_t image_body = 0, value_body = value_body_bytes(e, &image_body);
    p = put_len(p, 5, len_field_bytes(value_body)); /* Event.summary */
    p = put_len(p, 1, value_body);                  /* Summary.value */
    size_t tag = strlen(e->text);
    p = put_len(p, 1, tag); /* Value.tag */
    memcpy(p, e->text, tag);
    p += tag;
    if (e->kind == DDL__EVENT_SCALAR) {
        uint32_t f;
        memcpy(&f, &e->value, 4);
        p = put_key(p, 2, WIRE_FIXED32); /* Value.simple_value */
        ddl__put_le(p, f, 4);
        return (size_t)(p + 4 - out);
    }
    p = put_len(p, 4, image_body);    /* Value.image */
    p = put_int(p, 1, e->height);     /* Image.height */
    p = put_int(p, 2, e->width);      /* Image.width */
    p = put_int(p, 3, e->colorspace); /* Image.colorspace */
    p = put_len(p, 4, e->png_bytes);  /* Image.encoded_image_string: the PNG follows */
    return (size_t)(p - out);
}

/* ---- TFRecord framing ---- */

uint32_t ddl__masked_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

void ddl__record_head(unsigned char head[DDL__RECORD_HEAD], uint64_t data_bytes)
{
    ddl__put_le(head, data_bytes, 8);
    ddl__put_le(head + 8, ddl__masked_crc32c(ddl_crc32c(0, head, 8)), 4);
}
