/* src/observe/impl.h - private to the observe layer: the protobuf and TFRecord encoder of the
 * event files (event.c), the PNG encoder (png.c), and the layouts of ddl_summary_writer
 * (summary.c) and ddl_timeline (timeline.c, timeline_json.c). Observe is fed by the layers above
 * it (train, the programs) and never calls up into them. Not API. */
#ifndef DDL_OBSERVE_IMPL_H
#define DDL_OBSERVE_IMPL_H
#include "core/impl.h"

/* ---- event records (event.c) ---- */

/* What one Event holds: the file version, or a Summary with one Value (a scalar, or an image
 * whose PNG bytes follow the encoded part). */
enum { DDL__EVENT_VERSION = 0, DDL__EVENT_SCALAR = 1, DDL__EVENT_IMAGE = 2 };

typedef struct ddl__event {
    int kind;              /* DDL__EVENT_* */
    double wall_time;      /* seconds since 1970 */
    int64_t step;
    const char *text;      /* VERSION: the file version; SCALAR, IMAGE: the tag */
    float value;           /* SCALAR */
    int height, width, colorspace; /* IMAGE: colorspace 1 grey, 2 grey + alpha, 3 RGB, 4 RGBA */
    size_t png_bytes;      /* IMAGE: bytes of the PNG that follow the encoded part */
} ddl__event;

/* Most bytes ddl__event_encode writes for a tag of tag_bytes (the PNG not counted). */
#define DDL__EVENT_MAX_HEAD(tag_bytes) (96 + (tag_bytes))
/* Bytes of a TFRecord's frame: 8 of length and 4 of its CRC before the data, 4 of CRC after. */
#define DDL__RECORD_HEAD 12
#define DDL__RECORD_TAIL 4

/* ddl__event_encode: the protobuf bytes of e into out (DDL__EVENT_MAX_HEAD bytes), all of the
 * Event but an image's PNG bytes, which come last; returns the bytes written. */
size_t ddl__event_encode(unsigned char *out, const ddl__event *e);
/* ddl__masked_crc32c: TensorFlow's masked CRC-32C of a record's length or data. */
uint32_t ddl__masked_crc32c(uint32_t crc);
/* ddl__record_head: the 12 bytes before a record's data_bytes of data. */
void ddl__record_head(unsigned char head[DDL__RECORD_HEAD], uint64_t data_bytes);

/* ---- PNG (png.c) ---- */

/* ddl__png_encode: pixels (height, width, channels) of 1 to 4 channels as a PNG in memory from
 * alloc; *png and *png_bytes are set on success, to be freed with ddl__free(alloc, *png).
 * Returns DDL_OK, DDL_EINVAL, DDL_ENOMEM, or DDL_ENOTSUP without libpng (WITH_PNG=0). */
int ddl__png_encode(const uint8_t *pixels, int height, int width, int channels, const ddl_allocator *alloc,
                    unsigned char **png, size_t *png_bytes, char *err, size_t err_bytes);

/* ---- the timeline (timeline.c records and gathers, timeline_json.c writes) ---- */

/* One span as it is kept and sent: times in ns of this rank's monotonic clock (after the
 * gather, of rank 0's). Four int64 fields, so that the gather moves them as DDL_INT64. */
typedef struct ddl__span {
    int64_t t0, t1;
    int64_t kind_step; /* kind << 48 | step */
    int64_t bytes;
} ddl__span;

/* ddl__timeline_json: write the spans of `world` ranks (spans[r][0..n[r])) as one Chrome
 * trace-event file at path. Returns DDL_OK or DDL_EIO with the reason in err. */
int ddl__timeline_json(const char *path, ddl__span *const *spans, const size_t *n, int world, char *err,
                       size_t err_bytes);

#endif
