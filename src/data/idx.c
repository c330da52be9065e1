/* idx.c - IDX files (the MNIST format) and the data sets built from them.
 * Owns: reading raw or gzip IDX files of unsigned bytes, checking every header field and the
 * exact data length, loading an MNIST-layout split into a ddl_dataset, pixel statistics.
 * Must not: allocate except through the caller's allocator, trust any size a file states
 * before checking it, or print: every failure goes into err with the file name, what was
 * expected and what was found. */
#include "core/impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef DDL_WITH_ZLIB
#include <zlib.h>
#endif

/* Largest data part of one IDX file: keeps every count an int and every gzread length valid. */
#define IDX_MAX_BYTES ((uint64_t)INT_MAX)
#define IDX_TYPE_UBYTE 0x08
#define IDX_PATH_BYTES 4096
#define IDX_DEFLATE_RATIO 1032 /* deflate's largest expansion: 258 bytes from about 2 bits */

/* ---- byte source: a raw file or a gzip stream ---- */

typedef struct idx_src {
    const char *path;
    FILE *f;            /* raw file (NULL when gzip) */
#ifdef DDL_WITH_ZLIB
    gzFile gz;          /* gzip stream (NULL when raw) */
#endif
    int is_gz;
    int gz_cut;          /* the gzip stream ended before its end (zlib: unexpected end of file) */
    long long file_bytes; /* size of the file (raw or gzip) */
} idx_src;

/* src_fopen: open path for reading, a regular file only, so that its size bounds what it can
 * hold (a FIFO or a device is refused, and its open does not wait for a writer). */
static FILE *src_fopen(const char *path, long long *bytes, char *err, size_t err_bytes, int *rc)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    const char *why = NULL;
    if (fd < 0 || fstat(fd, &st) != 0)
        why = strerror(errno);
    else if (S_ISDIR(st.st_mode))
        why = "is a directory, expected an IDX file";
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file, expected an IDX file";
    FILE *f = NULL;
    if (!why && (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0 || !(f = fdopen(fd, "rb"))))
        why = strerror(errno);
    if (why) {
        *rc = ddl__errf(err, err_bytes, DDL_EIO, "%s: cannot %s: %s", path, fd < 0 ? "open" : "read", why);
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    *bytes = (long long)st.st_size;
    return f;
}

/* src_open: open path, detect gzip by its magic 1f 8b. DDL_EIO if it cannot be opened. */
static int src_open(idx_src *s, const char *path, char *err, size_t err_bytes)
{
    memset(s, 0, sizeof *s);
    s->path = path;
    int rc = DDL_OK;
    if (!(s->f = src_fopen(path, &s->file_bytes, err, err_bytes, &rc)))
        return rc;
    unsigned char m[2];
    size_t got = fread(m, 1, 2, s->f);
    s->is_gz = got == 2 && m[0] == 0x1f && m[1] == 0x8b;
    if (!s->is_gz) {
        rewind(s->f);
        return DDL_OK;
    }
#ifdef DDL_WITH_ZLIB
    /* The descriptor's offset is wherever stdio's read-ahead left it: rewind it for zlib. */
    int fd = dup(fileno(s->f));
    fclose(s->f);
    s->f = NULL;
    if (fd < 0 || lseek(fd, 0, SEEK_SET) != 0 || !(s->gz = gzdopen(fd, "rb"))) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return ddl__errf(err, err_bytes, DDL_EIO, "%s: cannot open gzip stream: %s", path,
                         e ? strerror(e) : "out of memory");
    }
    gzbuffer(s->gz, 1 << 17);
    return DDL_OK;
#else
    fclose(s->f);
    s->f = NULL;
    return ddl__errf(err, err_bytes, DDL_ENOTSUP,
                     "%s: gzip file, but ddl was built without zlib: rebuild with zlib (WITH_ZLIB=1, "
                     "zlib1g-dev) or gunzip the file",
                     path);
#endif
}

static void src_close(idx_src *s)
{
    if (s->f)
        fclose(s->f);
    s->f = NULL;
#ifdef DDL_WITH_ZLIB
    if (s->gz)
        gzclose(s->gz);
    s->gz = NULL;
#endif
}

#ifdef DDL_WITH_ZLIB
/* gz_read: read up to n bytes into buf; *got the count. A stream that ends early only reads
 * short and sets gz_cut (the caller says what is missing); any other zlib error fails here. */
static int gz_read(idx_src *s, void *buf, size_t n, size_t *got, char *err, size_t err_bytes)
{
    unsigned char *p = (unsigned char *)buf;
    *got = 0;
    while (*got < n) {
        size_t want = n - *got;
        if (want > (1u << 30))
            want = 1u << 30;
        int r = gzread(s->gz, p + *got, (unsigned)want);
        if (r <= 0)
            break;
        *got += (size_t)r;
    }
    int zerr = Z_OK;
    const char *msg = gzerror(s->gz, &zerr);
    if (zerr == Z_OK || zerr == Z_STREAM_END)
        return DDL_OK;
    if (zerr == Z_BUF_ERROR) {
        s->gz_cut = 1;
        return DDL_OK;
    }
    if (zerr == Z_ERRNO)
        return ddl__errf(err, err_bytes, DDL_EIO, "%s: cannot read: %s", s->path, strerror(errno));
    if (zerr == Z_MEM_ERROR)
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: out of memory in zlib", s->path);
    /* zlib prefixes its own name for the file ("<fd:3>: incorrect data check"): drop it */
    const char *colon = msg ? strstr(msg, ": ") : NULL;
    const char *why = colon ? colon + 2 : msg ? msg : "unknown zlib error";
    return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: gzip data corrupt: %s, expected a valid gzip stream",
                     s->path, why);
}
#endif

/* src_read: read up to n bytes; fewer only at the end of the data. `what` names the part being
 * read for error messages ("header", "data"). */
static int src_read(idx_src *s, void *buf, size_t n, size_t *got, const char *what, char *err, size_t err_bytes)
{
#ifdef DDL_WITH_ZLIB
    if (s->is_gz)
        return gz_read(s, buf, n, got, err, err_bytes);
#endif
    *got = fread(buf, 1, n, s->f);
    if (*got < n && ferror(s->f))
        return ddl__errf(err, err_bytes, DDL_EIO, "%s: cannot read the %s: %s", s->path, what, strerror(errno));
    return DDL_OK;
}

/* cut_note: what to add to a "truncated" message when the gzip stream itself was cut. */
static const char *cut_note(const idx_src *s) { return s->gz_cut ? " (gzip stream ends early)" : ""; }

/* ---- IDX header ---- */

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* check_magic: 0, 0, type 0x08 (unsigned byte), dims 1..4; want_dims (0: any) fixes the count. */
static int check_magic(const char *path, uint32_t magic, int want_dims, char *err, size_t err_bytes)
{
    int nd = (int)(magic & 0xff);
    if (want_dims) {
        uint32_t want = (uint32_t)IDX_TYPE_UBYTE << 8 | (uint32_t)want_dims;
        if (magic != want)
            return ddl__errf(err, err_bytes, DDL_ECORRUPT,
                             "%s: bad magic 0x%08x, expected 0x%08x (unsigned bytes, %d dim%s)", path,
                             (unsigned)magic, (unsigned)want, want_dims, want_dims == 1 ? "" : "s");
        return DDL_OK;
    }
    if (nd < 1 || nd > 4)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT,
                         "%s: bad magic 0x%08x: %d dims, expected 0x00000801 to 0x00000804 (unsigned bytes, "
                         "1 to 4 dims)",
                         path, (unsigned)magic, nd);
    if ((magic >> 8) != IDX_TYPE_UBYTE)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT,
                         "%s: bad magic 0x%08x, expected 0x%08x (unsigned bytes, %d dim%s)", path,
                         (unsigned)magic, (unsigned)(IDX_TYPE_UBYTE << 8 | nd), nd, nd == 1 ? "" : "s");
    return DDL_OK;
}

/* idx_header: read and check the header; dims and the data size in *bytes. */
/* foreign_kind: what a file that starts with h[0..3] is when it is a format people mistake for
 * IDX (an image, a numpy array), or NULL. */
static const char *foreign_kind(const unsigned char h[4])
{
    if (memcmp(h, "\x89PNG", 4) == 0)
        return "a PNG image";
    if (h[0] == 0xff && h[1] == 0xd8 && h[2] == 0xff)
        return "a JPEG image";
    if (memcmp(h, "\x93NUM", 4) == 0)
        return "a numpy array (.npy)";
    if (memcmp(h, "PK\3\4", 4) == 0)
        return "a zip file (numpy's .npz?)";
    if (h[0] == 'P' && (h[1] == '5' || h[1] == '6') && (h[2] == '\n' || h[2] == ' ' || h[2] == '\r' || h[2] == '\t'))
        return h[1] == '5' ? "a PGM image" : "a PPM image";
    return NULL;
}

static int idx_header(idx_src *s, int want_dims, int *n_dims, int dims[4], size_t *bytes, char *err,
                      size_t err_bytes)
{
    unsigned char h[20];
    size_t got;
    int rc = src_read(s, h, 4, &got, "header", err, err_bytes);
    if (rc)
        return rc;
    if (got < 4)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: truncated header: expected 4 bytes of magic, found %zu%s",
                         s->path, got, cut_note(s));
    const char *kind = foreign_kind(h);
    if (kind)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: %s, not an IDX file: load images with "
                         "ddl_dataset_load_folder or ddl_image_load, numpy arrays with ddl_dataset_load_numpy",
                         s->path, kind);
    uint32_t magic = be32(h);
    if ((rc = check_magic(s->path, magic, want_dims, err, err_bytes)))
        return rc;
    int nd = (int)(magic & 0xff);
    size_t need = 4 * (size_t)nd;
    if ((rc = src_read(s, h + 4, need, &got, "header", err, err_bytes)))
        return rc;
    if (got < need)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT,
                         "%s: truncated header: expected %zu bytes (magic and %d dims), found %zu%s",
                         s->path, 4 + need, nd, 4 + got, cut_note(s));
    uint32_t d[4];
    double total = 1.0; /* exact up to the limit; rounding never takes a larger product below it */
    for (int i = 0; i < nd; i++) {
        d[i] = be32(h + 4 + 4 * i);
        if (d[i] == 0)
            return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: dimension %d of %d is 0, expected at least 1",
                             s->path, i + 1, nd);
        total *= d[i];
    }
    if (total > (double)IDX_MAX_BYTES) {
        char shape[64];
        int o = 0;
        for (int i = 0; i < nd; i++)
            o += snprintf(shape + o, sizeof shape - (size_t)o, "%s%u", i ? " x " : "", (unsigned)d[i]);
        return ddl__errf(err, err_bytes, DDL_ECORRUPT,
                         "%s: data too large: dims %s make %.0f bytes, expected at most %llu", s->path, shape,
                         total, (unsigned long long)IDX_MAX_BYTES);
    }
    for (int i = 0; i < nd; i++)
        dims[i] = (int)d[i];
    for (int i = nd; i < 4; i++)
        dims[i] = 0;
    *n_dims = nd;
    *bytes = (size_t)total;
    return DDL_OK;
}

/* check_size: tell before allocating. A raw file must hold exactly header + data; a gzip file
 * cannot hold more than deflate's largest expansion of its size (a 31-byte file claiming 2 GiB
 * is refused here, not found out after allocating them). */
static int check_size(const idx_src *s, int n_dims, size_t bytes, char *err, size_t err_bytes)
{
    if (s->is_gz) {
        uint64_t most = (uint64_t)s->file_bytes * IDX_DEFLATE_RATIO, want = 4 + 4 * (uint64_t)n_dims + bytes;
        if (want > most)
            return ddl__errf(err, err_bytes, DDL_ECORRUPT,
                             "%s: data too large for the file: the dims make %zu bytes of data, but a gzip file of "
                             "%lld bytes holds at most %llu (deflate expands at most %d times)", s->path, bytes,
                             s->file_bytes, (unsigned long long)most, IDX_DEFLATE_RATIO);
        return DDL_OK;
    }
    long long have = s->file_bytes - 4 - 4LL * n_dims;
    if (have < (long long)bytes)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: truncated: expected %zu bytes of data, found %lld",
                         s->path, bytes, have);
    if (have > (long long)bytes)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT,
                         "%s: trailing bytes: expected %zu bytes of data, found %lld (%lld extra)", s->path,
                         bytes, have, have - (long long)bytes);
    return DDL_OK;
}

/* idx_body: read exactly `bytes` of data into buf and make sure nothing follows. */
static int idx_body(idx_src *s, uint8_t *buf, size_t bytes, char *err, size_t err_bytes)
{
    size_t got;
    int rc = src_read(s, buf, bytes, &got, "data", err, err_bytes);
    if (rc)
        return rc;
    if (got < bytes)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: truncated: expected %zu bytes of data, found %zu%s",
                         s->path, bytes, got, cut_note(s));
    unsigned char extra[4096];
    size_t n_extra = 0;
    do { /* count what follows, also making zlib check the gzip trailer (CRC and length) */
        if ((rc = src_read(s, extra, sizeof extra, &got, "data", err, err_bytes)))
            return rc;
        n_extra += got;
    } while (got == sizeof extra && n_extra < (1u << 20));
    if (n_extra)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT,
                         "%s: trailing bytes: expected %zu bytes of data, found %s%zu extra after them", s->path,
                         bytes, got == sizeof extra ? "at least " : "", n_extra);
    if (s->gz_cut)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT,
                         "%s: gzip stream ends early: expected its trailer (CRC-32 and length) after the %zu "
                         "bytes of data, found the end of the file",
                         s->path, bytes);
    return DDL_OK;
}

/* ---- loading one file ---- */

/* idx_open: open path and check its header (want_dims dims, 0: any) against the file's size.
 * On failure the source is closed. */
static int idx_open(idx_src *s, const char *path, int want_dims, int *n_dims, int dims[4], size_t *bytes,
                    char *err, size_t err_bytes)
{
    int rc = src_open(s, path, err, err_bytes);
    if (rc)
        return rc;
    if (!(rc = idx_header(s, want_dims, n_dims, dims, bytes, err, err_bytes)))
        rc = check_size(s, *n_dims, *bytes, err, err_bytes);
    if (rc)
        src_close(s);
    return rc;
}

int ddl_idx_load(const char *path, const ddl_allocator *alloc, uint8_t **data, int *n_dims, int dims[4],
                 char *err, size_t err_bytes)
{
    if (data)
        *data = NULL;
    if (!path || !data || !n_dims || !dims)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_idx_load: path, data, n_dims and dims must not be NULL");
    idx_src s;
    size_t bytes = 0;
    int rc = idx_open(&s, path, 0, n_dims, dims, &bytes, err, err_bytes);
    if (rc)
        return rc;
    uint8_t *buf = (uint8_t *)ddl__alloc_plain(alloc, bytes); /* the caller frees it with alloc */
    if (!buf)
        rc = ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: cannot allocate %zu bytes for the data", path, bytes);
    else
        rc = idx_body(&s, buf, bytes, err, err_bytes);
    src_close(&s);
    if (rc) {
        ddl__free_plain(alloc, buf);
        return rc;
    }
    *data = buf;
    return DDL_OK;
}

/* ---- MNIST-layout data sets ---- */

/* mnist_path: DIR/SPLIT-KIND-ubyte.gz if it exists, else without .gz (whose absence open reports). */
static int mnist_path(char *buf, const char *dir, const char *split, const char *kind, char *err,
                      size_t err_bytes)
{
    int n = snprintf(buf, IDX_PATH_BYTES, "%s/%s-%s-ubyte.gz", dir, split, kind);
    if (n < 0 || n >= IDX_PATH_BYTES)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "%s/%s-%s-ubyte.gz: path longer than %d bytes", dir, split,
                         kind, IDX_PATH_BYTES - 1);
    if (access(buf, F_OK) != 0)
        buf[n - 3] = '\0';
    return DDL_OK;
}

/* check_labels: every label is a class below 10. */
static int check_labels(const char *lpath, const uint8_t *labels, int n, char *err, size_t err_bytes)
{
    for (int i = 0; i < n; i++)
        if (labels[i] >= 10)
            return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: label %d at sample %d, expected 0 to 9", lpath,
                             labels[i], i);
    return DDL_OK;
}

/* mnist_read: both headers first (so a count mismatch is found before any data is read), then
 * one block for images (n, h, w) followed by labels (n), which d->owned keeps. */
static int mnist_read(const char *ipath, const char *lpath, const ddl_allocator *alloc, ddl_dataset *d,
                      char *err, size_t err_bytes)
{
    idx_src si, sl;
    int ind, lnd, idims[4], ldims[4];
    size_t ibytes, lbytes;
    int rc = idx_open(&si, ipath, 3, &ind, idims, &ibytes, err, err_bytes);
    if (rc)
        return rc;
    if ((rc = idx_open(&sl, lpath, 1, &lnd, ldims, &lbytes, err, err_bytes))) {
        src_close(&si);
        return rc;
    }
    uint8_t *block = NULL;
    if (idims[0] != ldims[0])
        rc = ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: %d labels, expected %d, the image count of %s", lpath,
                       ldims[0], idims[0], ipath);
    else if (!(block = (uint8_t *)ddl__alloc(alloc, ibytes + lbytes)))
        rc = ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: cannot allocate %zu bytes for the data set", ipath,
                       ibytes + lbytes);
    if (!rc)
        rc = idx_body(&si, block, ibytes, err, err_bytes);
    if (!rc)
        rc = idx_body(&sl, block + ibytes, lbytes, err, err_bytes);
    if (!rc)
        rc = check_labels(lpath, block + ibytes, ldims[0], err, err_bytes);
    src_close(&si);
    src_close(&sl);
    if (rc) {
        ddl__free(alloc, block);
        return rc;
    }
    *d = (ddl_dataset){.n = idims[0], .c = 1, .h = idims[1], .w = idims[2], .th = 1, .tw = 1, .n_classes = 10,
                       .images = block, .targets = block + ibytes, .owned = block, .alloc = alloc};
    return DDL_OK;
}

int ddl_dataset_load_mnist(const char *dir, const char *split, const ddl_allocator *alloc, ddl_dataset *out,
                           char *err, size_t err_bytes)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!dir || !split || !out || !*split)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_dataset_load_mnist: dir, split and out must be given");
    char ipath[IDX_PATH_BYTES], lpath[IDX_PATH_BYTES];
    int rc = mnist_path(ipath, dir, split, "images-idx3", err, err_bytes);
    if (!rc)
        rc = mnist_path(lpath, dir, split, "labels-idx1", err, err_bytes);
    if (!rc)
        rc = mnist_read(ipath, lpath, alloc, out, err, err_bytes);
    return rc;
}

/* ---- statistics and lifetime ---- */

/* hist_stats: mean and standard deviation, scaled to [0, 1], of the n bytes counted in hist. A
 * histogram of the 256 byte values gives exact sums in integers, then one pass in double. */
static void hist_stats(const uint64_t hist[256], uint64_t n, float *mean, float *std)
{
    double sum = 0.0, m = 0.0, var = 0.0;
    for (int v = 0; v < 256; v++)
        sum += (double)hist[v] * (v / 255.0);
    if (n)
        m = sum / (double)n;
    for (int v = 0; v < 256; v++)
        var += (double)hist[v] * (v / 255.0 - m) * (v / 255.0 - m);
    if (n)
        var /= (double)n;
    if (mean)
        *mean = (float)m;
    if (std)
        *std = (float)sqrt(var);
}

/* float_stats: mean and standard deviation of channels [c0, c1) of d's float pixels (as they
 * are: floats are on the scale of a byte / 255 already), two passes in double. */
static void float_stats(const ddl_dataset *d, int c0, int c1, float *mean, float *std)
{
    size_t plane = (size_t)d->h * (size_t)d->w, n = (size_t)d->n * (size_t)(c1 - c0) * plane;
    double sum = 0.0, var = 0.0;
    for (int pass = 0; pass < 2; pass++) {
        double m = n ? sum / (double)n : 0.0;
        for (size_t s = 0; s < (size_t)d->n; s++)
            for (int c = c0; c < c1; c++) {
                const float *p = d->fimages + (s * (size_t)d->c + (size_t)c) * plane;
                for (size_t i = 0; i < plane; i++)
                    if (pass == 0)
                        sum += p[i];
                    else
                        var += ((double)p[i] - m) * ((double)p[i] - m);
            }
    }
    if (mean)
        *mean = n ? (float)(sum / (double)n) : 0.0f;
    if (std)
        *std = n ? (float)sqrt(var / (double)n) : 0.0f;
}

void ddl_dataset_stats(const ddl_dataset *d, float *mean, float *std)
{
    if (d && !d->images && d->fimages) {
        float_stats(d, 0, d->c, mean, std);
        return;
    }
    uint64_t hist[256] = {0};
    size_t n = d && d->images ? (size_t)d->n * (size_t)d->c * (size_t)d->h * (size_t)d->w : 0;
    for (size_t i = 0; i < n; i++)
        hist[d->images[i]]++;
    hist_stats(hist, n, mean, std);
}

void ddl_dataset_stats_channels(const ddl_dataset *d, float *mean, float *std)
{
    if (!d || !(d->images || d->fimages) || d->c < 1)
        return;
    size_t plane = (size_t)d->h * (size_t)d->w;
    for (int c = 0; c < d->c; c++) { /* each channel as ddl_dataset_stats does all: a histogram */
        if (!d->images) {
            float_stats(d, c, c + 1, &mean[c], &std[c]);
            continue;
        }
        uint64_t hist[256] = {0}, n = 0;
        for (size_t s = 0; s < (size_t)d->n; s++) {
            const uint8_t *p = d->images + (s * (size_t)d->c + (size_t)c) * plane;
            for (size_t i = 0; i < plane; i++)
                hist[p[i]]++;
            n += plane;
        }
        hist_stats(hist, n, &mean[c], &std[c]);
    }
}

void ddl_dataset_free(ddl_dataset *d)
{
    if (!d)
        return;
    ddl__free(d->alloc, d->owned);
    memset(d, 0, sizeof *d);
}
