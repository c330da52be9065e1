/* checkpoint.c - the checkpoint file format: the model signature, writing a file image
 * (header and lz4-compressed sections, each with its CRC-32C) atomically to disk, and reading
 * one back with every length bounded by the file size before anything is allocated.
 * Owns the bytes of the format. Must not know about ranks or the trainer (checkpoint_train.c
 * does), print, exit, or trust a single byte of a file before it is checked.
 * The writer can be held to a rate (ddl_train_config.save_bytes_per_sec), which also lets a test
 * kill a process in the middle of a save. */
#include "checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef DDL_WITH_LZ4
#include <lz4.h>
#endif

/* ---- format ----
 * header (32): magic "DDLCKPT\0" | u32 version | u32 flags (bit 0: lz4 was available) |
 *              u32 sections | u32 0 | u32 0 | u32 CRC-32C of bytes 0..27
 * section header (32): u32 id | u32 flags (bit 0: lz4) | u64 raw bytes | u64 stored bytes |
 *              u32 CRC-32C of the stored bytes | u32 CRC-32C of bytes 0..27
 * Sections in this order: META (fixed 256 bytes), TENS (84 per tensor: name[48], u32 dims,
 * u32 shape[4], u64 offset, u64 count), RNGS (32 per rank), WGTS (f32 each), OPTS (f32 each),
 * and, when the model describes itself or the data has class names, DESC (checkpoint_desc.c:
 * the layer graph's text and the class names; at most CK_DESC_MAX bytes), and, when the model
 * has buffers (BatchNorm's running statistics), BUFS after a DESC (checkpoint_bufs.c; an empty
 * DESC of 8 zero bytes when there is nothing to describe). Files without buffers are as before,
 * so the format's version stays 1: a reader that knows no BUFS refuses its 7 sections. */

#define CK_MAGIC "DDLCKPT"
#define CK_HEAD 32
#define CK_SEC_HEAD 32
#define CK_SECTIONS 7    /* at most; files without BUFS have 6, without DESC 5 */
#define CK_BUFS_MAX ((uint64_t)1 << 32) /* bytes of section BUFS: running statistics of 1G floats */
#define CK_DESC_MAX (1u << 20)
#define CK_META_BYTES 256
#define CK_TENSOR_BYTES 84
#define CK_RNG_BYTES 32
#define CK_FLAG_LZ4 1u
#define CK_MAX_PARAMS ((uint64_t)1 << 36) /* floats: a larger count is a lie, not a model */
#define CK_MAX_WORLD (1 << 20)
#define CK_PATH_BYTES 4096
#define CK_LZ4_MAX 0x7E000000u /* LZ4_MAX_INPUT_SIZE */

enum { SEC_META, SEC_TENS, SEC_RNGS, SEC_WGTS, SEC_OPTS, SEC_DESC, SEC_BUFS };
static const char sec_id[CK_SECTIONS][5] = {"META", "TENS", "RNGS", "WGTS", "OPTS", "DESC", "BUFS"};
static const char *const sec_what[CK_SECTIONS] = {"run metadata", "tensor table", "RNG states", "weights",
                                                  "optimizer state", "model description", "running statistics"};

/* ---- little-endian fields (core/impl.h's helpers) ---- */

static void put_floats(unsigned char *p, const float *f, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ddl__put_lef(p + 4 * i, f[i]);
}

static void get_floats(float *f, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        f[i] = ddl__get_lef(p + 4 * i);
}

/* ---- signature ---- */

/* sig_add: fold one tensor's name and shape into a signature. */
static uint32_t sig_add(uint32_t crc, const char *name, int n_dims, const int *shape)
{
    unsigned char b[4];
    crc = ddl_crc32c(crc, name, strlen(name) + 1);
    ddl__put_le32(b, (uint32_t)n_dims);
    crc = ddl_crc32c(crc, b, 4);
    for (int d = 0; d < n_dims; d++) {
        ddl__put_le32(b, (uint32_t)shape[d]);
        crc = ddl_crc32c(crc, b, 4);
    }
    return crc;
}

static uint32_t signature_of(const ddl_param_info *t, int n)
{
    uint32_t crc = 0;
    for (int i = 0; i < n; i++)
        crc = sig_add(crc, t[i].name, t[i].n_dims, t[i].shape);
    return crc;
}

uint32_t ddl_model_signature(const ddl_model *m) { return signature_of(m->tensors, m->n_tensors); }

/* ---- encoding the sections ---- */

/* is_unet: the header keeps two words of one plugin's settings, U-Net's depth and width (0 for
 * every other plugin): the format knows that plugin by the name its files carry, as it knows
 * "graph" (ddl_checkpoint_check_model), and calls no plugin. */
static int is_unet(const char *model) { return strcmp(model, "unet") == 0; }

static void meta_encode(unsigned char *p, const ddl_checkpoint_info *in)
{
    memset(p, 0, CK_META_BYTES);
    memcpy(p, in->model, strnlen(in->model, sizeof in->model - 1));
    ddl__put_le32(p + 48, in->signature);
    ddl__put_le32(p + 52, (uint32_t)in->n_tensors);
    ddl__put_le64(p + 56, in->n_params);
    ddl__put_le64(p + 64, in->n_optim);
    ddl__put_le64(p + 72, (uint64_t)in->step);
    ddl__put_le64(p + 80, (uint64_t)in->pos);
    ddl__put_le64(p + 88, (uint64_t)in->n_train);
    ddl__put_le64(p + 96, in->seed);
    ddl__put_le32(p + 104, (uint32_t)in->epoch);
    ddl__put_le32(p + 108, (uint32_t)in->world_size);
    ddl__put_le32(p + 112, (uint32_t)in->batch);
    ddl__put_le32(p + 116, (uint32_t)in->optim.kind);
    const float of[6] = {in->optim.lr, in->optim.momentum, in->optim.weight_decay, in->optim.beta1,
                         in->optim.beta2, in->optim.eps};
    put_floats(p + 120, of, 6);
    ddl__put_lef(p + 144, in->mean);
    ddl__put_lef(p + 148, in->std);
    const ddl_model_config *mc = &in->model_cfg;
    const ddl_unet_config *u = is_unet(in->model) ? (const ddl_unet_config *)mc->plugin_config : NULL;
    const int mi[7] = {mc->batch, mc->in_c, mc->in_h, mc->in_w, mc->n_classes, u ? u->depth : 0, u ? u->width : 0};
    for (int i = 0; i < 7; i++)
        ddl__put_le32(p + 152 + 4 * i, (uint32_t)mi[i]);
    ddl__put_lef(p + 180, mc->dropout);
    ddl__put_le32(p + 184, (uint32_t)in->n_norm); /* 0 in files from before per-channel normalisation */
    put_floats(p + 188, in->norm_mean, DDL_MAX_NORM_CHANNELS);
    put_floats(p + 204, in->norm_std, DDL_MAX_NORM_CHANNELS);
}

static void meta_decode(const unsigned char *p, ddl_checkpoint *ck)
{
    ddl_checkpoint_info *o = &ck->info;
    memcpy(o->model, p, sizeof o->model);
    o->signature = ddl__get_le32(p + 48);
    o->n_tensors = (int)(int32_t)ddl__get_le32(p + 52);
    o->n_params = (size_t)ddl__get_le64(p + 56); /* bounded by meta_check before use */
    o->n_optim = (size_t)ddl__get_le64(p + 64);
    o->step = (int64_t)ddl__get_le64(p + 72);
    o->pos = (int64_t)ddl__get_le64(p + 80);
    o->n_train = (int64_t)ddl__get_le64(p + 88);
    o->seed = ddl__get_le64(p + 96);
    o->epoch = (int)(int32_t)ddl__get_le32(p + 104);
    o->world_size = (int)(int32_t)ddl__get_le32(p + 108);
    o->batch = (int)(int32_t)ddl__get_le32(p + 112);
    o->optim.kind = (int)(int32_t)ddl__get_le32(p + 116);
    float of[6];
    get_floats(of, p + 120, 6);
    o->optim.lr = of[0], o->optim.momentum = of[1], o->optim.weight_decay = of[2];
    o->optim.beta1 = of[3], o->optim.beta2 = of[4], o->optim.eps = of[5];
    o->mean = ddl__get_lef(p + 144);
    o->std = ddl__get_lef(p + 148);
    int mi[7];
    for (int i = 0; i < 7; i++)
        mi[i] = (int)(int32_t)ddl__get_le32(p + 152 + 4 * i);
    o->model_cfg = (ddl_model_config){.batch = mi[0], .in_c = mi[1], .in_h = mi[2], .in_w = mi[3],
                                      .n_classes = mi[4], .dropout = ddl__get_lef(p + 180)};
    ck->unet = (ddl_unet_config){.depth = mi[5], .width = mi[6]};
    o->n_norm = (int)(int32_t)ddl__get_le32(p + 184);
    get_floats(o->norm_mean, p + 188, DDL_MAX_NORM_CHANNELS);
    get_floats(o->norm_std, p + 204, DDL_MAX_NORM_CHANNELS);
}

static void tens_encode(unsigned char *p, const ddl_param_info *t, int n)
{
    for (int i = 0; i < n; i++, p += CK_TENSOR_BYTES) {
        memset(p, 0, CK_TENSOR_BYTES);
        memcpy(p, t[i].name, strnlen(t[i].name, DDL__NAME_BYTES - 1));
        ddl__put_le32(p + 48, (uint32_t)t[i].n_dims);
        for (int d = 0; d < 4; d++)
            ddl__put_le32(p + 52 + 4 * d, (uint32_t)t[i].shape[d]);
        ddl__put_le64(p + 68, t[i].offset);
        ddl__put_le64(p + 76, t[i].count);
    }
}

static void rngs_encode(unsigned char *p, const ddl_rng *r, int n)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 4; k++)
            ddl__put_le64(p + (size_t)i * CK_RNG_BYTES + 8 * (size_t)k, r[i].s[k]);
}

/* ---- writing ---- */

typedef struct sec_out {
    const unsigned char *raw; /* encoded bytes (NULL: the floats below) */
    const float *floats;
    size_t raw_bytes;
} sec_out;

/* sec_bound: the most bytes a section can take in the image. */
static size_t sec_bound(size_t raw)
{
#ifdef DDL_WITH_LZ4
    if (raw > 0 && raw <= CK_LZ4_MAX)
        return CK_SEC_HEAD + (size_t)LZ4_compressBound((int)raw);
#endif
    return CK_SEC_HEAD + raw;
}

/* sec_put: encode section i at dst (scratch holds its raw bytes when it is floats); returns
 * the bytes it took. Compressed only when that makes it smaller. */
static size_t sec_put(unsigned char *dst, int i, const sec_out *s, unsigned char *scratch)
{
    const unsigned char *raw = s->raw;
    if (!raw) {
        put_floats(scratch, s->floats, s->raw_bytes / 4);
        raw = scratch;
    }
    unsigned char *body = dst + CK_SEC_HEAD;
    size_t stored = s->raw_bytes;
    uint32_t flags = 0;
#ifdef DDL_WITH_LZ4
    if (s->raw_bytes > 0 && s->raw_bytes <= CK_LZ4_MAX) {
        int c = LZ4_compress_default((const char *)raw, (char *)body, (int)s->raw_bytes,
                                     LZ4_compressBound((int)s->raw_bytes));
        if (c > 0 && (size_t)c < s->raw_bytes) {
            stored = (size_t)c;
            flags = CK_FLAG_LZ4;
        }
    }
#endif
    if (!flags && stored)
        memcpy(body, raw, stored);
    memcpy(dst, sec_id[i], 4);
    ddl__put_le32(dst + 4, flags);
    ddl__put_le64(dst + 8, s->raw_bytes);
    ddl__put_le64(dst + 16, stored);
    ddl__put_le32(dst + 24, ddl_crc32c(0, body, stored));
    ddl__put_le32(dst + 28, ddl_crc32c(0, dst, 28));
    return CK_SEC_HEAD + stored;
}

/* write_all: write n bytes; with bytes_per_sec > 0, in 4 KiB pieces, sleeping after each as
 * long as it takes to stay at that rate. */
static int write_all(int fd, const unsigned char *p, size_t n, long bytes_per_sec)
{
    size_t chunk = bytes_per_sec > 0 ? 4096 : n, done = 0;
    double start = ddl__now();
    while (n > 0) {
        size_t want = n < chunk ? n : chunk;
        ssize_t w = write(fd, p, want);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
        done += (size_t)w;
        double ahead = (double)done / (double)bytes_per_sec - (ddl__now() - start);
        if (bytes_per_sec > 0 && ahead > 0) {
            struct timespec ts = {(time_t)ahead, (long)((ahead - (double)(time_t)ahead) * 1e9)};
            nanosleep(&ts, NULL);
        }
    }
    return 0;
}

/* sync_dir: fsync the directory that holds path, so the rename itself is durable. */
static int sync_dir(const char *path)
{
    char dir[CK_PATH_BYTES];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc == 0 || errno == EINVAL ? 0 : -1; /* some file systems cannot sync a directory */
}

/* create_tmp: a new file at tmp, opened for writing. Whatever is at tmp (a leftover of a crash,
 * or a symlink or hard link planted there to make a save overwrite its target) is unlinked
 * first, never followed or truncated; O_EXCL then refuses anything planted in between. */
static int create_tmp(const char *tmp, char *err, size_t err_bytes)
{
    if (unlink(tmp) != 0 && errno != ENOENT)
        return ddl__errf(err, err_bytes, DDL_EIO, "%s: cannot create: cannot remove what is there: %s", tmp,
                         strerror(errno));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return ddl__errf(err, err_bytes, DDL_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    return fd;
}

/* ddl__checkpoint_put: img to path.tmp (a new file), fsync, rename over path, fsync the directory. */
int ddl__checkpoint_put(const char *path, const unsigned char *img, size_t n, long bytes_per_sec, char *err,
                        size_t err_bytes)
{
    char tmp[CK_PATH_BYTES];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "%s: path longer than %d bytes", path, CK_PATH_BYTES - 5);
    int fd = create_tmp(tmp, err, err_bytes);
    if (fd < 0)
        return fd;
    const char *what = NULL;
    if (write_all(fd, img, n, bytes_per_sec) != 0)
        what = "write";
    else if (fsync(fd) != 0)
        what = "fsync";
    int e = errno;
    if (close(fd) != 0 && !what) {
        what = "close";
        e = errno;
    }
    if (!what && rename(tmp, path) != 0) {
        what = "rename over the checkpoint";
        e = errno;
    }
    if (what) {
        unlink(tmp);
        return ddl__errf(err, err_bytes, DDL_EIO, "%s: cannot %s (%zu bytes): %s", tmp, what, n, strerror(e));
    }
    if (sync_dir(path) != 0)
        return ddl__errf(err, err_bytes, DDL_EIO, "%s: written, but cannot sync its directory: %s", path,
                         strerror(errno));
    return DDL_OK;
}

/* ddl__checkpoint_image: *bound the bytes the image needs (the sections at their worst and the
 * scratch); with img, the image itself and *len its length. */
int ddl__checkpoint_image(const char *path, const ddl__checkpoint_src *src, unsigned char *img, size_t *bound,
                          size_t *len, char *err, size_t err_bytes)
{
    const ddl_model *m = src->m;
    ddl_checkpoint_info info = src->info;
    memset(info.model, 0, sizeof info.model);
    snprintf(info.model, sizeof info.model, "%s", m->plugin->name);
    info.signature = ddl_model_signature(m);
    info.model_cfg = m->cfg;
    info.n_tensors = m->n_tensors;
    info.n_params = m->n_params;
    info.mean = m->mean;
    info.std = m->std;
    info.n_norm = m->n_norm;
    memcpy(info.norm_mean, m->norm_mean, sizeof info.norm_mean);
    memcpy(info.norm_std, m->norm_std, sizeof info.norm_std);
    unsigned char meta[CK_META_BYTES], tens[DDL_MAX_PARAMS * CK_TENSOR_BYTES];
    meta_encode(meta, &info);
    tens_encode(tens, m->tensors, m->n_tensors);
    size_t rng_bytes = (size_t)info.world_size * CK_RNG_BYTES, bufs_bytes = ddl__checkpoint_bufs_bytes(m);
    static const unsigned char no_desc[8]; /* no graph text, no class names */
    sec_out s[CK_SECTIONS] = {{meta, NULL, CK_META_BYTES},
                              {tens, NULL, (size_t)m->n_tensors * CK_TENSOR_BYTES},
                              {NULL, NULL, rng_bytes},
                              {NULL, m->params, m->n_params * 4},
                              {NULL, src->optim, info.n_optim * 4},
                              {src->desc_bytes ? src->desc : no_desc, NULL, src->desc_bytes ? src->desc_bytes : 8},
                              {NULL, NULL, bufs_bytes}};
    int n_sec = bufs_bytes ? CK_SECTIONS : src->desc_bytes ? CK_SECTIONS - 1 : CK_SECTIONS - 2;
    if (src->desc_bytes > CK_DESC_MAX)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "%s: a model description of %zu bytes (graph and class names), "
                         "at most %u", path, src->desc_bytes, CK_DESC_MAX);
    size_t total = CK_HEAD, scratch_bytes = rng_bytes;
    for (int i = 0; i < n_sec; i++) {
        total += sec_bound(s[i].raw_bytes);
        if (s[i].raw_bytes > scratch_bytes)
            scratch_bytes = s[i].raw_bytes;
    }
    *bound = total + scratch_bytes;
    if (!img)
        return DDL_OK;
    unsigned char *scratch = img + total, *rngs = NULL;
    size_t at = CK_HEAD;
    for (int i = 0; i < n_sec; i++) {
        if (i == SEC_RNGS) { /* encoded into the scratch, which sec_put then reads as raw */
            rngs_encode(scratch, src->rngs, info.world_size);
            rngs = scratch;
            s[i].raw = rngs;
        }
        if (i == SEC_BUFS) { /* likewise */
            ddl__checkpoint_bufs_encode(m, scratch);
            s[i].raw = scratch;
        }
        at += sec_put(img + at, i, &s[i], scratch);
    }
    memset(img, 0, CK_HEAD);
    memcpy(img, CK_MAGIC, 8);
    ddl__put_le32(img + 8, DDL_CHECKPOINT_VERSION);
#ifdef DDL_WITH_LZ4
    ddl__put_le32(img + 12, CK_FLAG_LZ4);
#endif
    ddl__put_le32(img + 16, (uint32_t)n_sec);
    ddl__put_le32(img + 28, ddl_crc32c(0, img, 28));
    *len = at;
    return DDL_OK;
}

int ddl__checkpoint_write(const char *path, const ddl_allocator *alloc, const ddl__checkpoint_src *src, char *err,
                          size_t err_bytes)
{
    size_t bound = 0, len = 0;
    int rc = ddl__checkpoint_image(path, src, NULL, &bound, &len, err, err_bytes);
    if (rc != DDL_OK)
        return rc;
    unsigned char *img = (unsigned char *)ddl__alloc(alloc, bound);
    if (!img)
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: cannot allocate %zu bytes for the checkpoint image", path,
                         bound);
    rc = ddl__checkpoint_image(path, src, img, &bound, &len, err, err_bytes);
    if (rc == DDL_OK)
        rc = ddl__checkpoint_put(path, img, len, src->bytes_per_sec, err, err_bytes);
    ddl__free(alloc, img);
    return rc;
}

/* ---- reading ---- */

typedef struct reader {
    const char *path;
    int fd;
    uint64_t size, at; /* file size and read offset */
    int sections;      /* the header's count: 5, 6 with DESC, 7 with BUFS */
    char *err;
    size_t err_bytes;
} reader;

/* rd_bytes: exactly n bytes at the current offset; the caller has checked n against the size. */
static int rd_bytes(reader *r, void *buf, size_t n, const char *what)
{
    unsigned char *p = (unsigned char *)buf;
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(r->fd, p + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return ddl__errf(r->err, r->err_bytes, DDL_EIO, "%s: cannot read the %s at byte %llu: %s", r->path, what,
                             (unsigned long long)(r->at + got), strerror(errno));
        if (k == 0)
            return ddl__errf(r->err, r->err_bytes, DDL_ECORRUPT,
                             "%s: the file shrank while it was read: expected %zu bytes of %s at byte %llu", r->path,
                             n, what, (unsigned long long)r->at);
        got += (size_t)k;
    }
    r->at += n;
    return DDL_OK;
}

static int rd_open(reader *r, const char *path, char *err, size_t err_bytes)
{
    memset(r, 0, sizeof *r);
    r->path = path;
    r->err = err;
    r->err_bytes = err_bytes;
    r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block the open */
    if (r->fd < 0)
        return ddl__errf(err, err_bytes, DDL_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(r->fd, &st) != 0)
        return ddl__errf(err, err_bytes, DDL_EIO, "%s: cannot stat: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return ddl__errf(err, err_bytes, DDL_EIO, "%s: is a directory, expected a checkpoint file", path);
    if (!S_ISREG(st.st_mode))
        return ddl__errf(err, err_bytes, DDL_EIO, "%s: not a regular file, expected a checkpoint file", path);
    r->size = (uint64_t)st.st_size;
    return DDL_OK;
}

static int rd_header(reader *r, ddl_checkpoint_info *info)
{
    unsigned char h[CK_HEAD];
    if (r->size < CK_HEAD)
        return ddl__errf(r->err, r->err_bytes, DDL_ECORRUPT,
                         "%s: truncated: expected a %d-byte checkpoint header, found a file of %llu bytes", r->path,
                         CK_HEAD, (unsigned long long)r->size);
    int rc = rd_bytes(r, h, CK_HEAD, "header");
    if (rc)
        return rc;
    if (memcmp(h, CK_MAGIC, 8) != 0)
        return ddl__errf(r->err, r->err_bytes, DDL_ECORRUPT,
                         "%s: not a ddl checkpoint: bad magic %02x %02x %02x %02x..., expected \"DDLCKPT\"", r->path,
                         h[0], h[1], h[2], h[3]);
    uint32_t version = ddl__get_le32(h + 8);
    if (version != DDL_CHECKPOINT_VERSION)
        return ddl__errf(r->err, r->err_bytes, DDL_ECORRUPT,
                         "%s: checkpoint format version %u, expected %d (written by another ddl version?)", r->path,
                         (unsigned)version, DDL_CHECKPOINT_VERSION);
    uint32_t want = ddl__get_le32(h + 28), got = ddl_crc32c(0, h, 28);
    if (want != got)
        return ddl__errf(r->err, r->err_bytes, DDL_ECORRUPT,
                         "%s: header CRC-32C is 0x%08x, expected 0x%08x stored in the file: the header is corrupt",
                         r->path, (unsigned)got, (unsigned)want);
    if (ddl__get_le32(h + 16) < CK_SECTIONS - 2 || ddl__get_le32(h + 16) > CK_SECTIONS || (ddl__get_le32(h + 12) & ~CK_FLAG_LZ4) != 0)
        return ddl__errf(r->err, r->err_bytes, DDL_ECORRUPT, "%s: header says %u sections and flags 0x%x, expected %d "
                         "to %d sections and flags 0 or 1", r->path, (unsigned)ddl__get_le32(h + 16), (unsigned)ddl__get_le32(h + 12),
                         CK_SECTIONS - 2, CK_SECTIONS);
    r->sections = (int)ddl__get_le32(h + 16);
    info->version = (int)version;
    info->compressed = (ddl__get_le32(h + 12) & CK_FLAG_LZ4) != 0;
    info->file_bytes = r->size;
    return DDL_OK;
}

/* sec_expect: the raw length section i must have, from the metadata read so far (DESC: any up
 * to CK_DESC_MAX, which sec_head checks). */
static uint64_t sec_expect(int i, const ddl_checkpoint_info *in)
{
    switch (i) {
    case SEC_DESC: return UINT64_MAX;
    case SEC_BUFS: return UINT64_MAX;
    case SEC_META: return CK_META_BYTES;
    case SEC_TENS: return (uint64_t)in->n_tensors * CK_TENSOR_BYTES;
    case SEC_RNGS: return (uint64_t)in->world_size * CK_RNG_BYTES;
    case SEC_WGTS: return (uint64_t)in->n_params * 4;
    default: return (uint64_t)in->n_optim * 4;
    }
}

/* sec_head: read and check section i's header; *stored and *lz4 describe its body. */
static int sec_head(reader *r, int i, const ddl_checkpoint_info *info, uint64_t *stored, uint64_t *raw_out, int *lz4,
                    uint32_t *crc)
{
    unsigned char h[CK_SEC_HEAD];
    unsigned long long at = (unsigned long long)r->at;
    if (r->size - r->at < CK_SEC_HEAD)
        return ddl__errf(r->err, r->err_bytes, DDL_ECORRUPT,
                         "%s: truncated at byte %llu: expected the %d-byte header of section %s (%s), found %llu bytes",
                         r->path, at, CK_SEC_HEAD, sec_id[i], sec_what[i], (unsigned long long)(r->size - r->at));
    int rc = rd_bytes(r, h, CK_SEC_HEAD, "section header");
    if (rc)
        return rc;
    uint32_t want = ddl__get_le32(h + 28), got = ddl_crc32c(0, h, 28);
    if (memcmp(h, sec_id[i], 4) != 0)
        return ddl__errf(r->err, r->err_bytes, DDL_ECORRUPT,
                         "%s: expected section %s (%s) at byte %llu, found id %02x %02x %02x %02x: the file is corrupt",
                         r->path, sec_id[i], sec_what[i], at, h[0], h[1], h[2], h[3]);
    if (want != got)
        return ddl__errf(r->err, r->err_bytes, DDL_ECORRUPT,
                         "%s: header of section %s (%s) at byte %llu has CRC-32C 0x%08x, expected 0x%08x: the file "
                         "is corrupt", r->path, sec_id[i], sec_what[i], at, (unsigned)got, (unsigned)want);
    uint32_t flags = ddl__get_le32(h + 4);
    uint64_t raw = ddl__get_le64(h + 8), expect = sec_expect(i, info);
    if ((i == SEC_DESC && raw >= 1 && raw <= CK_DESC_MAX) || (i == SEC_BUFS && raw >= 4 && raw <= CK_BUFS_MAX))
        expect = raw;
    *raw_out = raw;
    *stored = ddl__get_le64(h + 16);
    *crc = ddl__get_le32(h + 24);
    *lz4 = (flags & CK_FLAG_LZ4) != 0;
    if ((flags & ~CK_FLAG_LZ4) != 0 || raw != expect)
        return ddl__errf(r->err, r->err_bytes, DDL_ECORRUPT,
                         "%s: section %s (%s) holds %llu bytes with flags 0x%x, expected %llu bytes with flags 0 or 1",
                         r->path, sec_id[i], sec_what[i], (unsigned long long)raw, (unsigned)flags,
                         (unsigned long long)expect);
    if (*stored > r->size - r->at)
        return ddl__errf(r->err, r->err_bytes, DDL_ECORRUPT,
                         "%s: truncated: section %s (%s) needs %llu bytes after byte %llu, the file has %llu", r->path,
                         sec_id[i], sec_what[i], (unsigned long long)*stored, (unsigned long long)r->at,
                         (unsigned long long)(r->size - r->at));
    /* lz4 expands at most 255 times: a larger claim is a lie, refused before allocating */
    if ((!*lz4 && *stored != raw) || (*lz4 && (raw > CK_LZ4_MAX || *stored > raw || raw > *stored * 255 + 16)))
        return ddl__errf(r->err, r->err_bytes, DDL_ECORRUPT,
                         "%s: section %s (%s) claims %llu bytes stored for %llu bytes of data%s: impossible", r->path,
                         sec_id[i], sec_what[i], (unsigned long long)*stored, (unsigned long long)raw,
                         *lz4 ? " (lz4)" : "");
#ifndef DDL_WITH_LZ4
    if (*lz4)
        return ddl__errf(r->err, r->err_bytes, DDL_ENOTSUP,
                         "%s: section %s is lz4-compressed, but ddl was built without lz4 (WITH_LZ4=0): rebuild with "
                         "liblz4-dev", r->path, sec_id[i]);
#endif
    return DDL_OK;
}

#ifdef DDL_WITH_LZ4
/* lz4_more: add a length's extension bytes (255 each, then the last) when its 4 bits say 15. */
static int lz4_more(const unsigned char *p, size_t n, size_t *i, uint64_t *len)
{
    if (*len < 15)
        return 0;
    unsigned char b;
    do {
        if (*i >= n)
            return -1;
        b = p[(*i)++];
        *len += b;
    } while (b == 255);
    return 0;
}

/* lz4_len: the bytes the lz4 block p[n] decodes to, counted from its literal and match lengths
 * alone, or UINT64_MAX if it is no block. So a section is given only the buffer its data really
 * fills; LZ4_decompress_safe then checks the rest (match offsets). */
static uint64_t lz4_len(const unsigned char *p, size_t n)
{
    uint64_t out = 0;
    size_t i = 0;
    while (i < n) {
        unsigned tok = p[i++];
        uint64_t lit = tok >> 4, match = tok & 15;
        if (lz4_more(p, n, &i, &lit) || lit > n - i)
            return UINT64_MAX;
        i += (size_t)lit;
        out += lit;
        if (i == n)
            return out; /* the last sequence holds only literals */
        if (n - i < 2)
            return UINT64_MAX;
        i += 2; /* the match offset */
        if (lz4_more(p, n, &i, &match))
            return UINT64_MAX;
        out += match + 4;
    }
    return UINT64_MAX; /* empty, or ends with a match */
}
#endif

/* sec_read: read section i's body into *out, allocated from alloc (exactly its raw length, from
 * sec_expect; the caller frees it). Only bytes the file really holds are allocated: the stored
 * bytes are bounded by the file size, and an lz4 body's decoded length is counted before its
 * buffer is allocated. */
static int sec_read(reader *r, int i, const ddl_checkpoint_info *info, const ddl_allocator *alloc,
                    unsigned char **out, size_t *raw_bytes)
{
    *out = NULL;
    uint64_t stored = 0, raw = 0;
    int lz4 = 0;
    uint32_t want = 0;
    int rc = sec_head(r, i, info, &stored, &raw, &lz4, &want);
    if (raw_bytes)
        *raw_bytes = (size_t)raw;
    if (rc)
        return rc;
    unsigned char *body = (unsigned char *)ddl__alloc(alloc, stored ? (size_t)stored : 1);
    if (!body)
        return ddl__errf(r->err, r->err_bytes, DDL_ENOMEM, "%s: cannot allocate %llu bytes for section %s", r->path,
                         (unsigned long long)stored, sec_id[i]);
    unsigned long long at = (unsigned long long)r->at;
    rc = rd_bytes(r, body, (size_t)stored, sec_what[i]);
    uint32_t got = rc ? 0 : ddl_crc32c(0, body, (size_t)stored);
    if (!rc && got != want)
        rc = ddl__errf(r->err, r->err_bytes, DDL_ECORRUPT,
                       "%s: section %s (%s, %llu bytes at byte %llu) has CRC-32C 0x%08x, expected 0x%08x: the data is "
                       "corrupt", r->path, sec_id[i], sec_what[i], (unsigned long long)stored, at, (unsigned)got,
                       (unsigned)want);
    if (rc || !lz4) {
        if (rc)
            ddl__free(alloc, body);
        else
            *out = body; /* stored as it is: stored == raw */
        return rc;
    }
#ifdef DDL_WITH_LZ4
    uint64_t len = lz4_len(body, (size_t)stored);
    unsigned char *dst = NULL;
    if (len != raw)
        rc = ddl__errf(r->err, r->err_bytes, DDL_ECORRUPT,
                       "%s: section %s (%s) must hold %llu bytes, but its lz4 data %s%llu: the file is corrupt",
                       r->path, sec_id[i], sec_what[i], (unsigned long long)raw,
                       len == UINT64_MAX ? "is malformed after " : "decodes to ",
                       (unsigned long long)(len == UINT64_MAX ? stored : len));
    else if (!(dst = (unsigned char *)ddl__alloc(alloc, (size_t)raw)))
        rc = ddl__errf(r->err, r->err_bytes, DDL_ENOMEM, "%s: cannot allocate %llu bytes for section %s", r->path,
                       (unsigned long long)raw, sec_id[i]);
    else {
        int n = LZ4_decompress_safe((const char *)body, (char *)dst, (int)stored, (int)raw);
        if (n < 0 || (uint64_t)n != raw)
            rc = ddl__errf(r->err, r->err_bytes, DDL_ECORRUPT,
                           "%s: section %s (%s) does not decompress to its %llu bytes (lz4 gave %d)", r->path,
                           sec_id[i], sec_what[i], (unsigned long long)raw, n);
    }
    if (rc)
        ddl__free(alloc, dst);
    else
        *out = dst;
#endif
    ddl__free(alloc, body);
    return rc;
}

/* ---- checks of what was read ---- */

static int meta_check(const reader *r, const ddl_checkpoint_info *in)
{
    const char *bad = NULL;
    if (in->model[sizeof in->model - 1] != '\0' || !in->model[0])
        bad = "model name (empty or not terminated)";
    else if (in->n_tensors < 1 || in->n_tensors > DDL_MAX_PARAMS)
        bad = "tensor count (1 to 128)";
    else if (in->n_params < 1 || (uint64_t)in->n_params > CK_MAX_PARAMS)
        bad = "parameter count (1 to 2^36)";
    else if ((uint64_t)in->n_optim > 4 * (uint64_t)in->n_params)
        bad = "optimizer state size (at most 4 floats per parameter)";
    else if (in->world_size < 1 || in->world_size > CK_MAX_WORLD)
        bad = "world size (1 to 2^20)";
    else if (in->step < 0 || in->epoch < 0 || in->n_train < 1 || in->pos < 0 || in->pos > in->n_train)
        bad = "step, epoch or data position (0 <= position <= samples per epoch)";
    else if (in->batch < 1 || (in->optim.kind != DDL_OPTIM_SGD && in->optim.kind != DDL_OPTIM_ADAM))
        bad = "batch or optimizer kind";
    else if (!isfinite(in->mean) || !isfinite(in->std) || !(in->std > 0))
        bad = "input normalisation (finite mean, std > 0)";
    else if (in->n_norm && (in->n_norm != in->model_cfg.in_c || in->n_norm < 2 || in->n_norm > DDL_MAX_NORM_CHANNELS))
        bad = "per-channel normalisation (one per input channel, 2 to 4)";
    for (int c = 0; !bad && c < in->n_norm; c++)
        if (!isfinite(in->norm_mean[c]) || !isfinite(in->norm_std[c]) || !(in->norm_std[c] > 0))
            bad = "per-channel normalisation (finite means, stds > 0)";
    if (!bad)
        return DDL_OK;
    return ddl__errf(r->err, r->err_bytes, DDL_ECORRUPT, "%s: section META holds an impossible %s", r->path, bad);
}

/* tens_decode: the tensor table, checked: shapes match counts, tensors lie back to back and
 * fill the parameter buffer, and the signature matches. */
static int tens_decode(const reader *r, ddl_checkpoint *ck, const unsigned char *p)
{
    uint64_t next = 0;
    for (int i = 0; i < ck->info.n_tensors; i++, p += CK_TENSOR_BYTES) {
        ddl_param_info *t = &ck->tensors[i];
        memcpy(ck->names[i], p, DDL__NAME_BYTES);
        t->name = ck->names[i];
        t->n_dims = (int)ddl__get_le32(p + 48);
        uint64_t count = 1, off = ddl__get_le64(p + 68), cnt = ddl__get_le64(p + 76);
        int ok = ck->names[i][DDL__NAME_BYTES - 1] == '\0' && ck->names[i][0] && t->n_dims >= 1 && t->n_dims <= 4;
        for (int d = 0; d < 4 && ok; d++) {
            uint32_t s = ddl__get_le32(p + 52 + 4 * d);
            ok = s >= 1 && s <= INT_MAX && (d < t->n_dims || s == 1);
            t->shape[d] = (int)s;
            count *= ok ? s : 1;
            ok = ok && count <= CK_MAX_PARAMS;
        }
        if (!ok || off != next || cnt != count || off + cnt > (uint64_t)ck->info.n_params)
            return ddl__errf(r->err, r->err_bytes, DDL_ECORRUPT,
                             "%s: tensor %d of the table is impossible (name, 1 to 4 dims, count = product of the "
                             "shape, placed at float %llu within %zu floats)",
                             r->path, i, (unsigned long long)next, ck->info.n_params);
        t->offset = (size_t)off;
        t->count = (size_t)cnt;
        next = off + cnt;
    }
    if (next != (uint64_t)ck->info.n_params)
        return ddl__errf(r->err, r->err_bytes, DDL_ECORRUPT, "%s: the tensors hold %llu floats, expected %zu", r->path,
                         (unsigned long long)next, ck->info.n_params);
    uint32_t sig = signature_of(ck->tensors, ck->info.n_tensors);
    if (sig != ck->info.signature)
        return ddl__errf(r->err, r->err_bytes, DDL_ECORRUPT, "%s: tensor table signature 0x%08x, expected 0x%08x",
                         r->path, (unsigned)sig, (unsigned)ck->info.signature);
    return DDL_OK;
}

static void rngs_decode(ddl_rng *out, const unsigned char *p, int n)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 4; k++)
            out[i].s[k] = ddl__get_le64(p + (size_t)i * CK_RNG_BYTES + 8 * (size_t)k);
}

/* ---- opening a checkpoint ---- */

/* rd_small: META and TENS, decoded into ck. */
static int rd_small(reader *r, ddl_checkpoint *ck, const ddl_allocator *alloc)
{
    unsigned char *meta = NULL, *tens = NULL;
    int rc = sec_read(r, SEC_META, &ck->info, alloc, &meta, NULL);
    if (rc)
        return rc;
    ddl_checkpoint_info head = ck->info; /* what rd_header found */
    meta_decode(meta, ck);
    ddl__free(alloc, meta);
    ck->info.version = head.version;
    ck->info.compressed = head.compressed;
    ck->info.file_bytes = head.file_bytes;
    if ((rc = meta_check(r, &ck->info)))
        return rc;
    if ((rc = sec_read(r, SEC_TENS, &ck->info, alloc, &tens, NULL)))
        return rc;
    rc = tens_decode(r, ck, tens);
    ddl__free(alloc, tens);
    return rc;
}

/* rd_big: RNG states, weights and optimizer state. Each is allocated only once its section was
 * read and checked (sec_read), so a file that promises more than it holds is refused having
 * allocated no more than its own size. */
static int rd_big(reader *r, ddl_checkpoint *ck, const ddl_allocator *alloc)
{
    for (int i = SEC_RNGS; i <= SEC_OPTS; i++) {
        unsigned char *buf = NULL;
        int rc = sec_read(r, i, &ck->info, alloc, &buf, NULL);
        size_t raw = (size_t)sec_expect(i, &ck->info);
        if (rc == DDL_OK && i == SEC_RNGS) {
            if ((ck->rngs = (ddl_rng *)ddl__alloc(alloc, (size_t)ck->info.world_size * sizeof(ddl_rng))))
                rngs_decode(ck->rngs, buf, ck->info.world_size);
        } else if (rc == DDL_OK && i == SEC_WGTS) {
            if ((ck->params = (float *)ddl__alloc(alloc, raw)))
                get_floats(ck->params, buf, raw / 4);
        } else if (rc == DDL_OK && raw) {
            if ((ck->optim = (float *)ddl__alloc(alloc, raw)))
                get_floats(ck->optim, buf, raw / 4);
        }
        ddl__free(alloc, buf);
        if (rc)
            return rc;
        if ((i == SEC_RNGS && !ck->rngs) || (i == SEC_WGTS && !ck->params) || (i == SEC_OPTS && raw && !ck->optim))
            return ddl__errf(r->err, r->err_bytes, DDL_ENOMEM, "%s: cannot allocate %zu bytes for the %s", r->path,
                             raw, sec_what[i]);
    }
    for (int i = SEC_DESC; i < r->sections; i++) {
        unsigned char *buf = NULL;
        size_t raw = 0;
        int rc = sec_read(r, i, &ck->info, alloc, &buf, &raw);
        if (rc == DDL_OK && i == SEC_DESC)
            rc = ddl__checkpoint_desc_decode(ck, buf, raw, r->path, r->err, r->err_bytes);
        else if (rc == DDL_OK)
            rc = ddl__checkpoint_bufs_decode(ck, buf, raw, r->path, r->err, r->err_bytes);
        ddl__free(alloc, buf);
        if (rc)
            return rc;
    }
    if (r->at != r->size)
        return ddl__errf(r->err, r->err_bytes, DDL_ECORRUPT,
                         "%s: trailing bytes: expected the file to end at byte %llu, found %llu more bytes", r->path,
                         (unsigned long long)r->at, (unsigned long long)(r->size - r->at));
    return DDL_OK;
}

void ddl_checkpoint_close(ddl_checkpoint *ck)
{
    if (!ck)
        return;
    ddl__free(ck->alloc, ck->rngs);
    ddl__free(ck->alloc, ck->params);
    ddl__free(ck->alloc, ck->optim);
    ddl__free(ck->alloc, ck->desc);
    ddl__free(ck->alloc, ck->buffers);
    ddl__free(ck->alloc, ck);
}

int ddl_checkpoint_open(const char *path, const ddl_allocator *alloc, ddl_checkpoint **out, char *err,
                        size_t err_bytes)
{
    if (out)
        *out = NULL;
    if (!path || !out)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_checkpoint_open: path and out must not be NULL");
    ddl_checkpoint *ck = (ddl_checkpoint *)ddl__alloc(alloc, sizeof *ck);
    if (!ck)
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: cannot allocate the checkpoint", path);
    memset(ck, 0, sizeof *ck);
    ck->alloc = alloc;
    reader r;
    int rc = rd_open(&r, path, err, err_bytes);
    if (!rc)
        rc = rd_header(&r, &ck->info);
    if (!rc)
        rc = rd_small(&r, ck, alloc);
    if (!rc && (r.size * 255 + 16) / 4 < ck->info.n_params) /* cannot be there even compressed */
        rc = ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: %zu parameters cannot fit in a file of %llu bytes", path,
                       ck->info.n_params, (unsigned long long)r.size);
    if (!rc)
        rc = rd_big(&r, ck, alloc);
    if (r.fd >= 0)
        close(r.fd);
    if (rc) {
        ddl_checkpoint_close(ck);
        return rc;
    }
    *out = ck;
    return DDL_OK;
}

/* ---- getters and checks ---- */

const ddl_checkpoint_info *ddl_checkpoint_get_info(const ddl_checkpoint *ck) { return &ck->info; }
const void *ddl_checkpoint_plugin_config(const ddl_checkpoint *ck)
{
    return ck && is_unet(ck->info.model) ? &ck->unet : NULL;
}
const float *ddl_checkpoint_params(const ddl_checkpoint *ck) { return ck->params; }
const float *ddl_checkpoint_optim_state(const ddl_checkpoint *ck) { return ck->optim; }

const ddl_param_info *ddl_checkpoint_tensor(const ddl_checkpoint *ck, int i)
{
    return i >= 0 && i < ck->info.n_tensors ? &ck->tensors[i] : NULL;
}

/* shape_str: "[6,1,5,5]". */
static void shape_str(char *s, size_t n, const ddl_param_info *t)
{
    int o = snprintf(s, n, "[");
    for (int d = 0; d < t->n_dims && o > 0 && (size_t)o < n; d++)
        o += snprintf(s + o, n - (size_t)o, "%s%d", d ? "," : "", t->shape[d]);
    if (o > 0 && (size_t)o < n)
        snprintf(s + o, n - (size_t)o, "]");
}

int ddl_checkpoint_check_model(const ddl_checkpoint *ck, const ddl_model *m, char *err, size_t err_bytes)
{
    const ddl_checkpoint_info *in = &ck->info;
    /* a layer graph takes the weights of any model that described itself as one (same tensors);
     * the graph plugin is known by the name its checkpoints carry, as ddl_model_find knows it:
     * the format sits below src/graph and names no plugin */
    int as_graph = m->plugin->name && strcmp(m->plugin->name, "graph") == 0 && ck->arch;
    if (strcmp(in->model, m->plugin->name) != 0 && !as_graph)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "checkpoint of model %s, expected %s", in->model,
                         m->plugin->name);
    for (int i = 0; i < in->n_tensors || i < m->n_tensors; i++) {
        const ddl_param_info *a = i < in->n_tensors ? &ck->tensors[i] : NULL;
        const ddl_param_info *b = i < m->n_tensors ? &m->tensors[i] : NULL;
        char sa[64] = "nothing", sb[64] = "nothing";
        if (a)
            shape_str(sa, sizeof sa, a);
        if (b)
            shape_str(sb, sizeof sb, b);
        if (!a || !b || strcmp(a->name, b->name) != 0 || strcmp(sa, sb) != 0)
            return ddl__errf(err, err_bytes, DDL_EINVAL,
                             "checkpoint of another %s: tensor %d is %s %s in the checkpoint, expected %s %s",
                             in->model, i, a ? a->name : "", sa, b ? b->name : "", sb);
    }
    return ddl__checkpoint_bufs_check(ck, m, err, err_bytes);
}
