/* summary.c - ddl_summary_writer: TensorBoard event files. It owns one file,
 * DIR/events.out.tfevents.<seconds>.<host>.<pid> (TensorFlow's name, events_writer.cc, with the
 * pid as suffix), and a buffer of whole records sized at creation: a scalar allocates nothing.
 * The buffer goes to the file when it is full, when ddl_summary_writer_flush is called, and at
 * the first record after FLUSH_SECS, so a TensorBoard watching the directory follows the run.
 * A failed write is cut back (ftruncate) to the last whole record and the error is sticky: the
 * file never holds a broken record, and the caller hears of the failure at every later call
 * without anything more being written. event.c has the bytes; this file never prints. */
#include "impl.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define BUF_BYTES (64 * 1024) /* whole records waiting for the file */
#define FLUSH_SECS 5.0        /* a record older than this goes out with the next one */
#define MAX_TAG 256           /* bytes of a tag */

struct ddl_summary_writer {
    const ddl_allocator *alloc;
    int fd;
    int status;             /* DDL_OK, or the first failure (sticky) */
    uint64_t file_bytes;    /* bytes of whole records in the file */
    size_t used;            /* bytes waiting in buf */
    double last_flush;      /* ddl__now() of the last flush */
    char path[4096];
    char err[DDL_ERR_BYTES];
    unsigned char buf[BUF_BYTES];
};

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- writing ---- */

/* fail_io: cut the file back to its whole records and keep the error. */
static int fail_io(ddl_summary_writer *w, int errnum, const char *what)
{
    if (ftruncate(w->fd, (off_t)w->file_bytes) != 0) {
        /* nothing more to do: the error below is what the caller hears */
    }
    w->used = 0;
    w->status = DDL_EIO;
    ddl__errf(w->err, sizeof w->err, DDL_EIO, "%s: %s after %llu bytes: %s", w->path, what,
              (unsigned long long)w->file_bytes, strerror(errnum));
    return DDL_EIO;
}

/* write_all: iov[0..n) at the end of the file, whole or not at all. */
static int write_all(ddl_summary_writer *w, struct iovec *iov, int n)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += iov[i].iov_len;
    if (lseek(w->fd, (off_t)w->file_bytes, SEEK_SET) < 0)
        return fail_io(w, errno, "seek");
    for (size_t done = 0; done < total;) {
        ssize_t k = writev(w->fd, iov, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return fail_io(w, k < 0 ? errno : ENOSPC, "write");
        done += (size_t)k;
        while (n > 0 && (size_t)k >= iov[0].iov_len) { /* drop what went out */
            k -= (ssize_t)iov[0].iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov[0].iov_base = (char *)iov[0].iov_base + k;
            iov[0].iov_len -= (size_t)k;
        }
    }
    w->file_bytes += total;
    return DDL_OK;
}

int ddl_summary_writer_flush(ddl_summary_writer *w)
{
    if (!w)
        return DDL_EINVAL;
    if (w->status != DDL_OK)
        return w->status;
    w->last_flush = ddl__now();
    if (w->used == 0)
        return DDL_OK;
    struct iovec iov = {w->buf, w->used};
    int rc = write_all(w, &iov, 1);
    w->used = 0;
    return rc;
}

/* add_record: frame the event e (with its PNG, if any) and queue it; a record larger than the
 * buffer goes straight to the file after what is queued. */
static int add_record(ddl_summary_writer *w, const ddl__event *e, const unsigned char *png)
{
    if (w->status != DDL_OK)
        return w->status;
    unsigned char head[DDL__RECORD_HEAD + DDL__EVENT_MAX_HEAD(MAX_TAG)], tail[DDL__RECORD_TAIL];
    size_t body = ddl__event_encode(head + DDL__RECORD_HEAD, e), data = body + e->png_bytes;
    ddl__record_head(head, data);
    uint32_t crc = ddl_crc32c(0, head + DDL__RECORD_HEAD, body);
    if (png)
        crc = ddl_crc32c(crc, png, e->png_bytes);
    ddl__put_le(tail, ddl__masked_crc32c(crc), 4);
    size_t rec = DDL__RECORD_HEAD + data + DDL__RECORD_TAIL;
    int rc = DDL_OK;
    if (w->used + rec > BUF_BYTES || ddl__now() - w->last_flush > FLUSH_SECS)
        rc = ddl_summary_writer_flush(w);
    if (rc != DDL_OK)
        return rc;
    if (rec > BUF_BYTES) {
        struct iovec iov[3] = {{head, DDL__RECORD_HEAD + body}, {(void *)(uintptr_t)png, e->png_bytes},
                               {tail, DDL__RECORD_TAIL}};
        return write_all(w, iov, 3);
    }
    memcpy(w->buf + w->used, head, DDL__RECORD_HEAD + body);
    w->used += DDL__RECORD_HEAD + body;
    if (png)
        memcpy(w->buf + w->used, png, e->png_bytes);
    w->used += e->png_bytes;
    memcpy(w->buf + w->used, tail, DDL__RECORD_TAIL);
    w->used += DDL__RECORD_TAIL;
    return DDL_OK;
}

static int check_tag(ddl_summary_writer *w, const char *tag)
{
    if (!tag || !tag[0] || strlen(tag) > MAX_TAG)
        return ddl__errf(w->err, sizeof w->err, DDL_EINVAL, "summary tag must be 1 to %d bytes", MAX_TAG);
    return DDL_OK;
}

/* ---- API ---- */

int ddl_summary_writer_scalar(ddl_summary_writer *w, const char *tag, int64_t step, double value)
{
    if (!w)
        return DDL_EINVAL;
    if (check_tag(w, tag) != DDL_OK)
        return DDL_EINVAL;
    ddl__event e = {.kind = DDL__EVENT_SCALAR, .wall_time = wall_now(), .step = step, .text = tag,
                    .value = (float)value};
    return add_record(w, &e, NULL);
}

int ddl_summary_writer_image(ddl_summary_writer *w, const char *tag, int64_t step, const uint8_t *pixels,
                             int height, int width, int channels)
{
    if (!w)
        return DDL_EINVAL;
    if (check_tag(w, tag) != DDL_OK)
        return DDL_EINVAL;
    if (w->status != DDL_OK)
        return w->status;
    unsigned char *png = NULL;
    size_t png_bytes = 0;
    int rc = ddl__png_encode(pixels, height, width, channels, w->alloc, &png, &png_bytes, w->err, sizeof w->err);
    if (rc != DDL_OK)
        return rc;
    ddl__event e = {.kind = DDL__EVENT_IMAGE, .wall_time = wall_now(), .step = step, .text = tag,
                    .height = height, .width = width, .colorspace = channels, .png_bytes = png_bytes};
    rc = add_record(w, &e, png);
    ddl__free(w->alloc, png);
    return rc;
}

int ddl_summary_writer_create(const char *dir, const ddl_allocator *alloc, ddl_summary_writer **out, char *err,
                              size_t err_bytes)
{
    if (!out)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_summary_writer_create: out is NULL");
    *out = NULL;
    if (!dir || !dir[0])
        return ddl__errf(err, err_bytes, DDL_EINVAL, "summary writer: no directory given");
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return ddl__errf(err, err_bytes, DDL_EIO, "cannot create directory %s: %s", dir, strerror(errno));
    ddl_summary_writer *w = (ddl_summary_writer *)ddl__alloc(alloc, sizeof *w);
    if (!w)
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "summary writer: cannot allocate %zu bytes", sizeof *w);
    memset(w, 0, offsetof(ddl_summary_writer, buf));
    w->alloc = alloc;
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0)
        strcpy(host, "localhost");
    int n = snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%010lld.%s.%ld", dir, (long long)time(NULL),
                     host, (long)getpid());
    w->fd = n > 0 && (size_t)n < sizeof w->path ? open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644) : -1;
    if (w->fd < 0) {
        int rc = ddl__errf(err, err_bytes, DDL_EIO, "cannot create %s: %s", w->path,
                           n > 0 && (size_t)n < sizeof w->path ? strerror(errno) : "name too long");
        ddl__free(alloc, w);
        return rc;
    }
    ddl__event e = {.kind = DDL__EVENT_VERSION, .wall_time = wall_now(), .text = "brain.Event:2"};
    int rc = add_record(w, &e, NULL);
    if (rc == DDL_OK)
        rc = ddl_summary_writer_flush(w);
    if (rc != DDL_OK) {
        ddl__errf(err, err_bytes, rc, "%s", w->err);
        ddl_summary_writer_destroy(w);
        return rc;
    }
    *out = w;
    return DDL_OK;
}

void ddl_summary_writer_destroy(ddl_summary_writer *w)
{
    if (!w)
        return;
    ddl_summary_writer_flush(w);
    close(w->fd);
    ddl__free(w->alloc, w);
}

const char *ddl_summary_writer_path(const ddl_summary_writer *w) { return w ? w->path : ""; }
const char *ddl_summary_writer_error(const ddl_summary_writer *w) { return w ? w->err : "no summary writer"; }
uint64_t ddl_summary_writer_bytes(const ddl_summary_writer *w) { return w ? w->file_bytes + w->used : 0; }
