/* cache.c - a decoded data set in one file, so a second start does not decode a folder of photos
 * again: ddl_dataset_save_cache writes it (atomically: PATH.tmp, fsync, rename) and
 * ddl_dataset_load_cache reads it back in one read, after checking its header and the CRC-32 of
 * everything. A key string (the caller's account of where the data came from and how it was
 * decoded) is stored and must match, so a cache of other data or another image size is never
 * taken. Layout, little endian:
 *   header (64): magic "DDLDSET\0" | u32 version | u32 n, c, h, w, th, tw, n_classes | u32 key bytes
 *                | u32 names bytes | u64 payload bytes | u32 CRC-32 of the payload | u32 CRC-32 of
 *                bytes 0..59
 *   payload:     key | class names, each NUL-terminated | images (n c h w) | targets (n th tw): bytes,
 *                or u16 when n_classes is above 256
 * Byte images only (floats come from numpy files, which need no decoding).
 * Allocates only through the caller's allocator; never trusts a length before checking it. */
#include "impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "DDLDSET"
#define VERSION 1
#define HEAD 64
#define MAX_KEY 4096

static int write_all(int fd, const void *p, size_t n)
{
    for (const unsigned char *b = p; n;) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w, n -= (size_t)w;
    }
    return 0;
}

/* target_bytes: the width of a cache's targets, from its classes. */
static size_t target_bytes(uint64_t n_classes)
{
    return n_classes > 256 ? 2 : 1;
}

/* targets_out: d's targets [at, at + n) as the cache stores them (wide: u16 little endian, else
 * bytes) into buf; 0, or -1 for a target that does not fit in a byte. */
static int targets_out(const ddl_dataset *d, int wide, size_t at, size_t n, unsigned char *buf)
{
    for (size_t i = 0; i < n; i++) {
        int v = ddl__target_at(d, at + i);
        if (wide)
            ddl__put_le16(buf + 2 * i, (uint16_t)v);
        else if (v > 255)
            return -1;
        else
            buf[i] = (unsigned char)v;
    }
    return 0;
}

/* targets_pass: the CRC of d's targets as stored (fd < 0), or write them to fd; 0 or -1. */
static int targets_pass(const ddl_dataset *d, int wide, size_t count, int fd, uint32_t *crc)
{
    unsigned char buf[8192];
    size_t per = wide ? sizeof buf / 2 : sizeof buf;
    for (size_t at = 0; at < count; at += per) {
        size_t n = count - at < per ? count - at : per, bytes = n * (wide ? 2 : 1);
        if (targets_out(d, wide, at, n, buf) != 0)
            return -1;
        if (fd < 0)
            *crc = ddl_crc32(*crc, buf, bytes);
        else if (write_all(fd, buf, bytes) != 0)
            return -1;
    }
    return 0;
}

int ddl_dataset_save_cache(const ddl_dataset *d, const char *key, const char *path, char *err, size_t err_bytes)
{
    if (!d || !d->images || !(d->targets || d->targets16) || !key || !path || strlen(key) > MAX_KEY)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_dataset_save_cache: a data set of byte images, a key (at "
                         "most %d bytes) and a path", MAX_KEY);
    int wide = target_bytes((uint64_t)d->n_classes) == 2;
    size_t names = 0, img = (size_t)d->n * d->c * d->h * d->w, tgt = (size_t)d->n * d->th * d->tw;
    for (int i = 0; d->class_names && i < d->n_classes; i++)
        names += strlen(d->class_names[i]) + 1;
    size_t klen = strlen(key);
    unsigned char h[HEAD] = {0};
    memcpy(h, MAGIC, 8);
    const uint32_t f[] = {VERSION, (uint32_t)d->n, (uint32_t)d->c, (uint32_t)d->h, (uint32_t)d->w, (uint32_t)d->th,
                          (uint32_t)d->tw, (uint32_t)d->n_classes, (uint32_t)klen, (uint32_t)names};
    for (int i = 0; i < 10; i++)
        ddl__put_le32(h + 8 + 4 * i, f[i]);
    ddl__put_le64(h + 48, klen + names + img + tgt * (wide ? 2 : 1));
    uint32_t c = ddl_crc32(0, (const unsigned char *)key, klen);
    for (int i = 0; d->class_names && i < d->n_classes; i++)
        c = ddl_crc32(c, (const unsigned char *)d->class_names[i], strlen(d->class_names[i]) + 1);
    c = ddl_crc32(c, d->images, img);
    if (targets_pass(d, wide, tgt, -1, &c) != 0)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "%s: a target above 255 in a data set of %d classes", path,
                         d->n_classes);
    ddl__put_le32(h + 56, c);
    ddl__put_le32(h + 60, ddl_crc32(0, h, 60));
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "%s: path too long", path);
    unlink(tmp); /* whatever was planted there is replaced, never followed */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return ddl__errf(err, err_bytes, DDL_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    int bad = write_all(fd, h, HEAD) || write_all(fd, key, klen);
    for (int i = 0; !bad && d->class_names && i < d->n_classes; i++)
        bad = write_all(fd, d->class_names[i], strlen(d->class_names[i]) + 1);
    bad = bad || write_all(fd, d->images, img) || targets_pass(d, wide, tgt, fd, NULL) || fsync(fd) != 0;
    int e = errno;
    bad = close(fd) != 0 || bad;
    if (bad || rename(tmp, path) != 0) {
        e = bad ? e : errno;
        unlink(tmp);
        return ddl__errf(err, err_bytes, DDL_EIO, "%s: cannot write the cache: %s", path, strerror(e));
    }
    return DDL_OK;
}

/* ---- reading ---- */

typedef struct head {
    uint32_t n, c, h, w, th, tw, k, key, names;
    uint64_t payload;
    uint32_t crc;
} head;

static int read_head(int fd, const char *path, uint64_t size, head *o, char *err, size_t err_bytes)
{
    unsigned char h[HEAD];
    if (size < HEAD || pread(fd, h, HEAD, 0) != HEAD || memcmp(h, MAGIC, 8) != 0)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: not a ddl data cache", path);
    if (ddl__get_le32(h + 60) != ddl_crc32(0, h, 60) || ddl__get_le32(h + 8) != VERSION)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: a damaged cache header, or another version", path);
    uint32_t *f[] = {&o->n, &o->c, &o->h, &o->w, &o->th, &o->tw, &o->k, &o->key, &o->names};
    for (int i = 0; i < 9; i++)
        *f[i] = ddl__get_le32(h + 12 + 4 * i);
    o->payload = ddl__get_le64(h + 48);
    o->crc = ddl__get_le32(h + 56);
    /* every field bounded before any product is taken, and each product checked against the
     * file: a header whose sizes overflow to the file's length (n 2^30 of 4 x 65536 x 65536 is
     * 2^64 bytes, 0 in 64 bits) would otherwise pass, and the data set point past its memory */
    if (o->n < 1 || o->n > INT32_MAX || o->c < 1 || o->c > 4 || o->h < 1 || o->w < 1 || o->h > 65536 ||
        o->w > 65536 || o->th < 1 || o->tw < 1 || o->th > 65536 || o->tw > 65536 || o->k < 1 ||
        o->k > DDL_MAX_CLASSES || o->key > MAX_KEY || o->names > o->k * 4097u || o->payload != size - HEAD)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: a cache whose header is out of range (n %u, %u x %u x %u, "
                         "targets %u x %u, %u classes) or not its %llu bytes (truncated?)", path, o->n, o->c, o->h,
                         o->w, o->th, o->tw, o->k, (unsigned long long)size);
    uint64_t per_img = (uint64_t)o->c * o->h * o->w, per_tgt = (uint64_t)o->th * o->tw * target_bytes(o->k);
    uint64_t room = o->payload >= (uint64_t)o->key + o->names ? o->payload - o->key - o->names : 0;
    uint64_t rest = o->n <= room / per_img ? room - o->n * per_img : 1; /* what the targets have */
    if (o->payload < (uint64_t)o->key + o->names || o->n > room / per_img || rest % per_tgt != 0 ||
        rest / per_tgt != o->n)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: a cache whose sizes do not add up to its %llu bytes "
                         "(truncated?)", path, (unsigned long long)size);
    return DDL_OK;
}

/* take_names: point names[0..k) into the NUL-separated list at p (names bytes); -1 if it is not k names. */
static int take_names(const char **names, uint32_t k, char *p, uint32_t bytes)
{
    uint32_t at = 0;
    for (uint32_t i = 0; i < k; i++) {
        char *end = at < bytes ? memchr(p + at, '\0', bytes - at) : NULL;
        if (!end || end == p + at)
            return -1;
        names[i] = p + at;
        at = (uint32_t)(end - p) + 1;
    }
    return at == bytes ? 0 : -1;
}

int ddl_dataset_load_cache(const char *path, const char *key, const ddl_allocator *alloc, ddl_dataset *out, char *err,
                           size_t err_bytes)
{
    if (!out || !path || !key)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_dataset_load_cache: a path, a key and out");
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO is refused below, not waited on */
    if (fd < 0)
        return ddl__errf(err, err_bytes, DDL_EIO, "%s: %s", path, strerror(errno));
    struct stat st;
    head h;
    int rc = fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)
                 ? ddl__errf(err, err_bytes, DDL_EIO, "%s: not a regular file", path)
                 : read_head(fd, path, (uint64_t)st.st_size, &h, err, err_bytes);
    size_t ptrs = rc ? 0 : ddl__align_up((size_t)h.k * sizeof(char *));
    unsigned char *mem = rc ? NULL : ddl__alloc(alloc, ptrs + (size_t)h.payload + 1); /* + 1: see the end */
    if (!rc && !mem)
        rc = ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: cannot allocate %llu bytes", path,
                       (unsigned long long)h.payload);
    unsigned char *p = mem ? mem + ptrs : NULL; /* NULL + 0 is undefined too */
    for (uint64_t got = 0; !rc && got < h.payload;) {
        ssize_t r = pread(fd, p + got, (size_t)(h.payload - got), HEAD + (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            rc = ddl__errf(err, err_bytes, DDL_EIO, "%s: cannot read: %s", path, r ? strerror(errno) : "short");
        got += r > 0 ? (uint64_t)r : 0;
    }
    close(fd);
    if (!rc && ddl_crc32(0, p, (size_t)h.payload) != h.crc)
        rc = ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: the cache's CRC-32 does not match: it is damaged", path);
    if (!rc && (h.key != strlen(key) || memcmp(p, key, h.key) != 0))
        rc = ddl__errf(err, err_bytes, DDL_EMISMATCH, "%s: a cache of other data or another size (%.*s)", path,
                       (int)(h.key < 200 ? h.key : 200), (const char *)p);
    const char **names = (const char **)(void *)mem;
    if (!rc && h.names && take_names(names, h.k, (char *)p + h.key, h.names) != 0)
        rc = ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: the cache's class names are damaged", path);
    if (rc) {
        ddl__free(alloc, mem);
        return rc;
    }
    uint8_t *img = p + h.key + h.names, *tg = img + (size_t)h.n * h.c * h.h * h.w;
    *out = (ddl_dataset){.n = (int)h.n, .c = (int)h.c, .h = (int)h.h, .w = (int)h.w, .th = (int)h.th, .tw = (int)h.tw,
                         .n_classes = (int)h.k, .images = img, .owned = mem, .alloc = alloc,
                         .class_names = h.names ? names : NULL};
    if (target_bytes(h.k) == 1) {
        out->targets = tg;
        return DDL_OK;
    }
    /* u16 little endian in the file, in this machine's order in memory, 2-aligned: the names
     * before them may leave them at an odd address, and then they move up one byte (mem has
     * room for it), last first so that nothing is overwritten before it is read */
    size_t count = (size_t)h.n * h.th * h.tw;
    uint16_t *dst = (uint16_t *)(void *)(tg + ((uintptr_t)tg & 1));
    for (size_t i = count; i-- > 0;)
        dst[i] = ddl__get_le16(tg + 2 * i);
    out->targets16 = dst;
    return DDL_OK;
}
