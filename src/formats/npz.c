/* npz.c - ddl_export_npz: a checkpoint's weights as numpy's .npz, a zip of stored
 * (uncompressed) .npy files, version 1.0, little-endian float32, with PyTorch's names and
 * layouts, plus input_mean and input_std. The whole zip is built in memory (about the size of
 * the weights), then written; a tensor name that could not be a member name as it is, is
 * refused before anything is written. Fixed dates (1980-01-01): the same checkpoint gives the
 * same bytes. The checkpoint is read through ddl.h alone. */
#include "export.h"

#include <stdio.h>
#include <string.h>

#define LOCAL_BYTES 30   /* zip local file header */
#define CENTRAL_BYTES 46 /* central directory entry */
#define END_BYTES 22     /* end of central directory */
#define NPY_DICT 256     /* room for the .npy header's dict */

/* ---- names ---- */

/* name_at: tensor i's name, the buffers (running statistics) numbered after the parameters. */
static const char *name_at(const ddl_checkpoint *ck, int i)
{
    int n = ddl_checkpoint_get_info(ck)->n_tensors;
    return i < n ? ddl_checkpoint_tensor(ck, i)->name : ddl_checkpoint_buffer_tensor(ck, i - n)->name;
}

/* names_ok: every tensor name can be a member NAME.npy as it is: letters, digits, '_' and '.'
 * only (PyTorch's "conv1.weight"), none taken twice or by input_mean and input_std. A name from
 * the file is never made a path ("../x", "/x", control characters). */
static int names_ok(const ddl_checkpoint *ck, const char *path, char *err, size_t err_bytes)
{
    const ddl_checkpoint_info *in = ddl_checkpoint_get_info(ck);
    for (int i = 0; i < in->n_tensors + ddl_checkpoint_n_buffer_tensors(ck); i++) {
        const char *name = name_at(ck, i), *why = NULL;
        if (strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.") != strlen(name))
            why = "export takes only names of letters, digits, '_' and '.'";
        else if (strcmp(name, "input_mean") == 0 || strcmp(name, "input_std") == 0)
            why = "that name is export's own (the input normalisation)";
        for (int k = 0; k < i && !why; k++)
            if (strcmp(name, name_at(ck, k)) == 0)
                why = "so is an earlier tensor";
        if (why) {
            char text[4 * DDL__NAME_BYTES];
            size_t o = 0; /* the name as printable text: other bytes, '\\' and '"' as \xNN */
            for (const unsigned char *p = (const unsigned char *)name; *p && o + 5 < sizeof text; p++)
                o += *p >= 0x20 && *p < 0x7f && *p != '\\' && *p != '"'
                         ? (size_t)snprintf(text + o, sizeof text - o, "%c", *p)
                         : (size_t)snprintf(text + o, sizeof text - o, "\\x%02x", *p);
            text[o] = '\0';
            return ddl__errf(err, err_bytes, DDL_EINVAL, "%s: tensor %d is named \"%s\": %s; nothing exported", path,
                             i, text, why);
        }
    }
    return DDL_OK;
}

/* ---- .npy members ---- */

/* npy_header: the .npy header of a float32 array of shape (shape[0..n_dims)) into h; its length,
 * padded with blanks so the data starts at a multiple of 64. n_dims 0: a scalar. */
static size_t npy_header(unsigned char *h, int n_dims, const int *shape)
{
    char dict[NPY_DICT];
    int o = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    for (int d = 0; d < n_dims; d++)
        o += snprintf(dict + o, sizeof dict - (size_t)o, "%d,%s", shape[d], d + 1 < n_dims ? " " : "");
    o += snprintf(dict + o, sizeof dict - (size_t)o, "), }");
    size_t hl = 10 + (size_t)o + 1, pad = (64 - hl % 64) % 64; /* magic, version, length, dict, '\n' */
    memcpy(h, "\x93NUMPY\x01\x00", 8);
    ddl__put_le(h + 8, (uint64_t)o + 1 + pad, 2);
    memcpy(h + 10, dict, (size_t)o);
    memset(h + 10 + o, ' ', pad);
    h[hl + pad - 1] = '\n';
    return hl + pad;
}

typedef struct zip {
    unsigned char *p;       /* the whole file: members, then the central directory */
    size_t len;
    unsigned char *central; /* central directory entries, built beside */
    size_t central_len;
    int members;
} zip;

/* member_bytes: bytes of NAME.npy in the zip and in the central directory, for sizing. */
static size_t member_bytes(const char *name, size_t count, size_t *central)
{
    size_t nl = strlen(name) + 4;
    *central += CENTRAL_BYTES + nl;
    return LOCAL_BYTES + nl + 10 + NPY_DICT + 64 + 4 * count;
}

/* add: member NAME.npy holding v[count] of shape (shape[0..n_dims)). */
static void add(zip *z, const char *name, const float *v, size_t count, int n_dims, const int *shape)
{
    char file[DDL__NAME_BYTES + 16];
    size_t nl = (size_t)snprintf(file, sizeof file, "%s.npy", name);
    unsigned char *h = z->p + z->len, *data = h + LOCAL_BYTES + nl;
    size_t n = npy_header(data, n_dims, shape);
    for (size_t k = 0; k < count; k++)
        ddl__put_lef(data + n + 4 * k, v[k]);
    n += 4 * count;
    uint32_t crc = ddl_crc32(0, data, n);
    unsigned char *c = z->central + z->central_len;
    memset(h, 0, LOCAL_BYTES);
    memset(c, 0, CENTRAL_BYTES);
    ddl__put_le(h, 0x04034b50, 4), ddl__put_le(h + 4, 20, 2), ddl__put_le(h + 12, 0x21, 2); /* 2.0, 1980-01-01 */
    ddl__put_le(h + 14, crc, 4), ddl__put_le(h + 18, n, 4), ddl__put_le(h + 22, n, 4), ddl__put_le(h + 26, nl, 2);
    memcpy(h + LOCAL_BYTES, file, nl);
    ddl__put_le(c, 0x02014b50, 4), ddl__put_le(c + 4, 20, 2), ddl__put_le(c + 6, 20, 2);
    ddl__put_le(c + 14, 0x21, 2), ddl__put_le(c + 16, crc, 4), ddl__put_le(c + 20, n, 4);
    ddl__put_le(c + 24, n, 4), ddl__put_le(c + 28, nl, 2), ddl__put_le(c + 42, z->len, 4);
    memcpy(c + CENTRAL_BYTES, file, nl);
    z->central_len += CENTRAL_BYTES + nl;
    z->len += LOCAL_BYTES + nl + n;
    z->members++;
}

int ddl_export_npz(const ddl_checkpoint *ck, const char *path, const ddl_allocator *alloc, char *err,
                   size_t err_bytes)
{
    if (!ck || !path)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_export_npz: no checkpoint or no path given");
    const ddl_checkpoint_info *in = ddl_checkpoint_get_info(ck);
    int rc = names_ok(ck, path, err, err_bytes);
    if (rc != DDL_OK)
        return rc;
    /* the input normalisation: scalars, or one per channel (C,) */
    size_t nn = in->n_norm ? (size_t)in->n_norm : 1;
    size_t central = 0, total = member_bytes("input_mean", nn, &central) + member_bytes("input_std", nn, &central);
    for (int i = 0; i < in->n_tensors; i++)
        total += member_bytes(ddl_checkpoint_tensor(ck, i)->name, ddl_checkpoint_tensor(ck, i)->count, &central);
    for (int i = 0; i < ddl_checkpoint_n_buffer_tensors(ck); i++) /* BatchNorm's running statistics */
        total += member_bytes(ddl_checkpoint_buffer_tensor(ck, i)->name, ddl_checkpoint_buffer_tensor(ck, i)->count,
                              &central);
    if (total + central + END_BYTES > 0xFFFFFFFFu)
        return ddl__errf(err, err_bytes, DDL_ENOTSUP, "%s: larger than 4 GB: zip64 is not supported", path);
    zip z = {.p = (unsigned char *)ddl__alloc(alloc, total + 2 * central + END_BYTES)};
    if (!z.p)
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: cannot allocate %zu bytes for the .npz", path, total);
    z.central = z.p + total + central + END_BYTES;
    const float *w = ddl_checkpoint_params(ck);
    for (int i = 0; i < in->n_tensors; i++) {
        const ddl_param_info *t = ddl_checkpoint_tensor(ck, i);
        add(&z, t->name, w + t->offset, t->count, t->n_dims, t->shape);
    }
    for (int i = 0; i < ddl_checkpoint_n_buffer_tensors(ck); i++) { /* state_dict's names: bn1.running_mean */
        const ddl_param_info *t = ddl_checkpoint_buffer_tensor(ck, i);
        add(&z, t->name, ddl_checkpoint_buffers(ck) + t->offset, t->count, t->n_dims, t->shape);
    }
    const int nshape[1] = {in->n_norm};
    add(&z, "input_mean", in->n_norm ? in->norm_mean : &in->mean, nn, in->n_norm ? 1 : 0, nshape);
    add(&z, "input_std", in->n_norm ? in->norm_std : &in->std, nn, in->n_norm ? 1 : 0, nshape);
    size_t at = z.len;
    memmove(z.p + at, z.central, z.central_len); /* the central directory follows the members */
    unsigned char *e = z.p + at + z.central_len;
    memset(e, 0, END_BYTES);
    ddl__put_le(e, 0x06054b50, 4), ddl__put_le(e + 8, (uint64_t)z.members, 2);
    ddl__put_le(e + 10, (uint64_t)z.members, 2), ddl__put_le(e + 12, z.central_len, 4), ddl__put_le(e + 16, at, 4);
    rc = ddl__export_write(path, z.p, at + z.central_len + END_BYTES, err, err_bytes);
    ddl__free(alloc, z.p);
    return rc;
}
