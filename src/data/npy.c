/* npy.c - numpy's array files: a .npy file, or one member of a .npz (a zip of .npy files, each
 * stored or deflated, with the zip64 fields numpy writes) into a ddl_npy.
 * Owns: reading the whole file, the zip directory, inflating a member (zlib) and checking its
 * CRC-32, the .npy header (version 1 to 3, its dict: descr, fortran_order, shape) against the
 * exact data length.
 * Must not: allocate except through the caller's allocator, trust a size or offset the file
 * states before checking it against the file, or print: every failure names the file (and
 * member) and says what was expected and what was found. */
#include "impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef DDL_WITH_ZLIB
#include <zlib.h>
#endif

#define NPY_MAX_FILE ((uint64_t)1 << 36) /* 64 GiB: larger is surely not meant */
#define NPY_NAME_BYTES 512
#define ZIP_EOCD_BYTES 22
#define ZIP_CENTRAL_BYTES 46
#define ZIP_LOCAL_BYTES 30
#define ZIP_MAX_COMMENT 65535
#define ZIP_DEFLATE_RATIO 1032 /* deflate's largest expansion: 258 bytes from about 2 bits */

/* ---- the .npy header ---- */

/* dict_value: the text after 'key': in the header dict h (NUL-terminated), or NULL. */
static const char *dict_value(const char *h, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(h, pat);
    if (!p)
        return NULL;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    if (*p != ':')
        return NULL;
    for (p++; *p == ' '; p++)
        ;
    return p;
}

static const struct {
    const char *descr;
    int dtype, size;
} dtypes[] = {
    {"|u1", DDL_NPY_UINT8, 1}, {"<u1", DDL_NPY_UINT8, 1}, {"|b1", DDL_NPY_BOOL, 1},  {"|i1", DDL_NPY_INT8, 1},
    {"<i4", DDL_NPY_INT32, 4}, {"<i8", DDL_NPY_INT64, 8}, {"<f4", DDL_NPY_FLOAT32, 4}, {"<f8", DDL_NPY_FLOAT64, 8},
};

int ddl_npy_dtype_bytes(int dtype)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].dtype == dtype)
            return dtypes[i].size;
    return 0;
}

/* parse_shape: "(a, b, c)" into a->shape; "()" is a scalar. */
static int parse_shape(const char *p, ddl_npy *a)
{
    if (*p++ != '(')
        return -1;
    a->n_dims = 0;
    a->count = 1;
    for (;;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == ')')
            return 0;
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || a->n_dims == DDL_NPY_MAX_DIMS || (v && a->count > INT64_MAX / v))
            return -1;
        a->shape[a->n_dims++] = v;
        a->count *= v;
        p = end;
        if (*p == 'L')
            p++;
    }
}

/* parse_npy: the .npy in b[bytes] (what names it in messages) into a, its data copied into memory
 * from alloc. */
static int parse_npy(const char *what, const unsigned char *b, size_t bytes, const ddl_allocator *alloc, ddl_npy *a,
                     char *err, size_t err_bytes)
{
    if (bytes < 10 || memcmp(b, "\x93NUMPY", 6) != 0)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: not a .npy array (expected the magic \\x93NUMPY)", what);
    int major = b[6];
    size_t hl = major == 1 ? ddl__get_le(b + 8, 2) : bytes >= 12 ? ddl__get_le(b + 8, 4) : 0;
    size_t start = (major == 1 ? 10 : 12) + hl;
    if (major < 1 || major > 3)
        return ddl__errf(err, err_bytes, DDL_ENOTSUP, "%s: .npy version %d.%d, expected 1.0 to 3.0", what, major, b[7]);
    if (hl == 0 || hl > 65536 || start > bytes)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: header of %zu bytes in a file of %zu", what, hl, bytes);
    char h[65537];
    memcpy(h, b + start - hl, hl);
    h[hl] = '\0';
    const char *descr = dict_value(h, "descr"), *fo = dict_value(h, "fortran_order"), *sh = dict_value(h, "shape");
    if (!descr || !fo || !sh)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: header without descr, fortran_order or shape: %.120s", what, h);
    int size = 0;
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0] && !size; i++)
        if (strncmp(descr + 1, dtypes[i].descr, 3) == 0 && descr[4] == descr[0]) {
            a->dtype = dtypes[i].dtype;
            size = dtypes[i].size;
        }
    if (!size)
        return ddl__errf(err, err_bytes, DDL_ENOTSUP,
                         "%s: dtype %.12s: ddl reads uint8, int8, bool, int32, int64, float32 and float64, little endian",
                         what, descr);
    if (strncmp(fo, "False", 5) != 0)
        return ddl__errf(err, err_bytes, DDL_ENOTSUP,
                         "%s: fortran_order is True: save it in C order (np.ascontiguousarray) first", what);
    if (parse_shape(sh, a) != 0)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: cannot read the shape %.60s", what, sh);
    uint64_t want = (uint64_t)a->count * (uint64_t)size;
    if (a->count > (int64_t)(NPY_MAX_FILE / (uint64_t)size) || want != bytes - start)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: shape %.60s of %.12s needs %llu bytes of data, found %zu",
                         what, sh, descr, (unsigned long long)want, bytes - start);
    a->data = ddl__alloc_plain(alloc, want ? (size_t)want : 1);
    if (!a->data)
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: cannot allocate %llu bytes", what, (unsigned long long)want);
    memcpy(a->data, b + start, (size_t)want);
    return DDL_OK;
}

/* ---- .npz: a zip of .npy files ---- */

typedef struct zip_entry {
    char name[NPY_NAME_BYTES];
    int method;
    uint32_t crc;
    uint64_t csize, usize, local;
} zip_entry;

/* zip64: the zip64 extra field (id 1) of a central entry gives the sizes and offset set to ~0. */
static void zip64(const unsigned char *x, size_t n, zip_entry *e)
{
    for (size_t i = 0; i + 4 <= n;) {
        size_t id = ddl__get_le(x + i, 2), len = ddl__get_le(x + i + 2, 2), at = i + 4;
        if (id == 1) {
            uint64_t *f[3] = {&e->usize, &e->csize, &e->local};
            for (int k = 0; k < 3; k++)
                if (*f[k] == 0xffffffffu && at + 8 <= i + 4 + len && at + 8 <= n) {
                    *f[k] = ddl__get_le(x + at, 8);
                    at += 8;
                }
        }
        i += 4 + len;
    }
}

/* zip_find: the central directory entry of member (NAME.npy); list gets the members' names. */
static int zip_find(const char *path, const unsigned char *b, size_t bytes, const char *member, zip_entry *e,
                    char *list, size_t list_bytes, int *n_members, char *err, size_t err_bytes)
{
    size_t eocd = 0;
    int found = 0;
    for (size_t i = bytes >= ZIP_EOCD_BYTES ? bytes - ZIP_EOCD_BYTES + 1 : 0;
         i-- > 0 && bytes - i <= ZIP_EOCD_BYTES + ZIP_MAX_COMMENT;)
        if (memcmp(b + i, "PK\5\6", 4) == 0) {
            eocd = i;
            found = 1;
            break;
        }
    if (!found)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: not a zip file (.npz): no end of central directory", path);
    uint64_t count = ddl__get_le(b + eocd + 10, 2), at = ddl__get_le(b + eocd + 16, 4);
    if (at > eocd)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: the zip directory starts at %llu, past its end at %zu",
                         path, (unsigned long long)at, eocd);
    *n_members = 0;
    list[0] = '\0';
    int hit = 0;
    for (uint64_t k = 0; k < count; k++) {
        if (at + ZIP_CENTRAL_BYTES > eocd || memcmp(b + at, "PK\1\2", 4) != 0)
            return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: zip directory entry %llu is damaged", path,
                             (unsigned long long)k);
        size_t nl = ddl__get_le(b + at + 28, 2), xl = ddl__get_le(b + at + 30, 2), cl = ddl__get_le(b + at + 32, 2);
        if (at + ZIP_CENTRAL_BYTES + nl + xl + cl > eocd)
            return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: zip directory entry %llu runs past the directory", path,
                             (unsigned long long)k);
        zip_entry z = {.method = (int)ddl__get_le(b + at + 10, 2), .crc = (uint32_t)ddl__get_le(b + at + 16, 4),
                       .csize = ddl__get_le(b + at + 20, 4), .usize = ddl__get_le(b + at + 24, 4),
                       .local = ddl__get_le(b + at + 42, 4)};
        size_t copy = nl < NPY_NAME_BYTES - 1 ? nl : NPY_NAME_BYTES - 1;
        memcpy(z.name, b + at + ZIP_CENTRAL_BYTES, copy);
        z.name[copy] = '\0';
        zip64(b + at + ZIP_CENTRAL_BYTES + nl, xl, &z);
        size_t used = strlen(list);
        if (used + copy + 3 < list_bytes)
            snprintf(list + used, list_bytes - used, "%s%.*s", used ? ", " : "",
                     (int)(copy > 4 && strcmp(z.name + copy - 4, ".npy") == 0 ? copy - 4 : copy), z.name);
        (*n_members)++;
        char want[NPY_NAME_BYTES];
        snprintf(want, sizeof want, "%s.npy", member ? member : "");
        if ((member && (strcmp(z.name, want) == 0 || strcmp(z.name, member) == 0)) || (!member && k == 0)) {
            *e = z;
            hit = 1;
        }
        at += ZIP_CENTRAL_BYTES + nl + xl + cl;
    }
    return hit ? DDL_OK : ddl__errf(err, err_bytes, DDL_EINVAL, "%s: no array '%s' (it holds: %s)", path,
                                    member ? member : "", list[0] ? list : "nothing");
}

/* inflate_member: the raw deflate stream in[in_bytes] into exactly out[out_bytes]. */
static int inflate_member(const char *what, const unsigned char *in, size_t in_bytes, unsigned char *out,
                          size_t out_bytes, char *err, size_t err_bytes)
{
#ifdef DDL_WITH_ZLIB
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, -MAX_WBITS) != Z_OK)
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: zlib could not start", what);
    size_t in_done = 0, out_done = 0;
    int zr = Z_OK;
    while (zr == Z_OK) { /* avail_in and avail_out are 32-bit: at most 1 GiB at a time */
        size_t in_left = in_bytes - in_done, out_left = out_bytes - out_done;
        z.next_in = (Bytef *)(uintptr_t)(in + in_done);
        z.avail_in = (uInt)(in_left < (1u << 30) ? in_left : (1u << 30));
        z.next_out = out + out_done;
        z.avail_out = (uInt)(out_left < (1u << 30) ? out_left : (1u << 30));
        uInt ai = z.avail_in, ao = z.avail_out;
        zr = inflate(&z, Z_NO_FLUSH);
        in_done += ai - z.avail_in;
        out_done += ao - z.avail_out;
        if (zr == Z_OK && ai == z.avail_in && ao == z.avail_out)
            zr = Z_BUF_ERROR; /* no progress: the stream is cut short, or longer than stated */
    }
    int rc = DDL_OK;
    if (zr != Z_STREAM_END || out_done != out_bytes)
        rc = ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: deflated data is damaged (%s after %zu of %zu bytes)", what,
                       z.msg ? z.msg : zr == Z_STREAM_END ? "ended early" : "cut short", out_done, out_bytes);
    inflateEnd(&z);
    return rc;
#else
    (void)in, (void)in_bytes, (void)out, (void)out_bytes;
    return ddl__errf(err, err_bytes, DDL_ENOTSUP, "%s: deflated, and this build has no zlib", what);
#endif
}

/* zip_member: the member e's bytes, stored or inflated, CRC-checked, into memory from alloc. */
static int zip_member(const char *what, const unsigned char *b, size_t bytes, const zip_entry *e,
                      const ddl_allocator *alloc, unsigned char **out, char *err, size_t err_bytes)
{
    if (e->local > bytes || bytes - e->local < ZIP_LOCAL_BYTES) /* not local + 30 > bytes: it may wrap */
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: the member's local header at %llu is past the end of the "
                         "file (%zu bytes)", what, (unsigned long long)e->local, bytes);
    if (memcmp(b + e->local, "PK\3\4", 4) != 0)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: the member's local header at %llu is missing", what,
                         (unsigned long long)e->local);
    uint64_t data = e->local + ZIP_LOCAL_BYTES + ddl__get_le(b + e->local + 26, 2) + ddl__get_le(b + e->local + 28, 2);
    if (data > bytes || e->csize > bytes - data || e->usize > NPY_MAX_FILE)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: %llu bytes of data at %llu, past the end of the file (%zu)",
                         what, (unsigned long long)e->csize, (unsigned long long)data, bytes);
    if (e->method != 0 && e->method != 8)
        return ddl__errf(err, err_bytes, DDL_ENOTSUP, "%s: zip method %d: ddl reads stored (0) and deflated (8) members",
                         what, e->method);
    if (e->method == 8 && e->usize / ZIP_DEFLATE_RATIO > e->csize)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: %llu deflated bytes cannot hold the %llu claimed", what,
                         (unsigned long long)e->csize, (unsigned long long)e->usize);
    if (e->method == 0 && e->csize != e->usize)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: stored member of %llu bytes claims %llu", what,
                         (unsigned long long)e->csize, (unsigned long long)e->usize);
#ifndef DDL_WITH_ZLIB
    if (e->method == 8)
        return ddl__errf(err, err_bytes, DDL_ENOTSUP, "%s: a deflated member (np.savez_compressed) needs zlib: this "
                         "build has none (make WITH_ZLIB=1 with zlib1g-dev installed)", what);
#endif
    unsigned char *u = (unsigned char *)ddl__alloc_plain(alloc, e->usize ? (size_t)e->usize : 1);
    if (!u)
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: cannot allocate %llu bytes", what, (unsigned long long)e->usize);
    int rc = e->method == 0 ? (memcpy(u, b + data, (size_t)e->usize), DDL_OK)
                            : inflate_member(what, b + data, (size_t)e->csize, u, (size_t)e->usize, err, err_bytes);
    uint32_t crc = rc == DDL_OK ? ddl_crc32(0, u, (size_t)e->usize) : 0;
    if (rc == DDL_OK && crc != e->crc)
        rc = ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: CRC-32 %08x, the zip directory says %08x: damaged", what,
                       (unsigned)crc, (unsigned)e->crc);
    if (rc != DDL_OK) {
        ddl__free_plain(alloc, u);
        return rc;
    }
    *out = u;
    return DDL_OK;
}

/* ---- loading ---- */

int ddl_npy_load(const char *spec, const ddl_allocator *alloc, ddl_npy *out, char *err, size_t err_bytes)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!spec || !out || !*spec)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_npy_load: a path and out must be given");
    char path[4096], what[4096 + NPY_NAME_BYTES];
    snprintf(path, sizeof path, "%s", spec);
    const char *member = NULL;
    char *colon = strstr(path, ".npz:");
    if (colon) {
        colon[4] = '\0';
        member = colon + 5;
    }
    unsigned char *b = NULL, *m = NULL;
    size_t bytes = 0;
    int rc = ddl__read_file(path, NPY_MAX_FILE, alloc, &b, &bytes, err, err_bytes);
    if (rc)
        return rc;
    int is_zip = bytes >= 4 && memcmp(b, "PK\3\4", 4) == 0;
    if (!is_zip) {
        snprintf(what, sizeof what, "%s", path);
        rc = member ? ddl__errf(err, err_bytes, DDL_EINVAL, "%s: not a zip file (.npz), so it has no array '%s'", path,
                                member)
                    : parse_npy(what, b, bytes, alloc, out, err, err_bytes);
    } else {
        zip_entry e;
        char list[512];
        int n_members = 0;
        rc = zip_find(path, b, bytes, member, &e, list, sizeof list, &n_members, err, err_bytes);
        if (rc == DDL_OK && !member && n_members > 1)
            rc = ddl__errf(err, err_bytes, DDL_EINVAL, "%s holds %d arrays (%s): name one, as %s:%.*s", path, n_members,
                           list, path, (int)strcspn(list, ","), list);
        snprintf(what, sizeof what, "%s:%s", path, rc == DDL_OK ? e.name : "");
        if (rc == DDL_OK)
            rc = zip_member(what, b, bytes, &e, alloc, &m, err, err_bytes);
        if (rc == DDL_OK && m)
            rc = parse_npy(what, m, (size_t)e.usize, alloc, out, err, err_bytes);
        ddl__free_plain(alloc, m);
    }
    ddl__free(alloc, b);
    if (rc)
        memset(out, 0, sizeof *out);
    return rc;
}

void ddl_npy_free(ddl_npy *a, const ddl_allocator *alloc)
{
    if (!a)
        return;
    ddl__free_plain(alloc, a->data);
    memset(a, 0, sizeof *a);
}
