/* checkpoint_bufs.c - section BUFS of a checkpoint: the model's buffers (ddl_build_buffer:
 * BatchNorm's running mean and variance), which resume, prediction and export need as they need
 * the weights. Layout, little endian:
 *     u32 n | n x 84-byte tensor records (as section TENS: name[48], u32 dims, u32 shape[4],
 *     u64 offset, u64 count) | f32 values, buffer after buffer
 * Files of models without buffers have no BUFS (and read as they did). Reading trusts nothing:
 * the records must tile the values exactly, and every length is checked against the section. */
#include "checkpoint.h"

#include <limits.h>
#include <string.h>

#define REC_BYTES 84

size_t ddl__checkpoint_bufs_bytes(const ddl_model *m)
{
    return m->n_buffers ? 4 + (size_t)m->n_buf_tensors * REC_BYTES + m->n_buffers * 4 : 0;
}

void ddl__checkpoint_bufs_encode(const ddl_model *m, unsigned char *p)
{
    ddl__put_le32(p, (uint32_t)m->n_buf_tensors);
    p += 4;
    for (int i = 0; i < m->n_buf_tensors; i++, p += REC_BYTES) {
        const ddl_param_info *t = &m->buf_tensors[i];
        memset(p, 0, REC_BYTES);
        memcpy(p, t->name, strnlen(t->name, DDL__NAME_BYTES - 1));
        ddl__put_le32(p + 48, (uint32_t)t->n_dims);
        for (int d = 0; d < 4; d++)
            ddl__put_le32(p + 52 + 4 * d, (uint32_t)t->shape[d]);
        ddl__put_le64(p + 68, t->offset);
        ddl__put_le64(p + 76, t->count);
    }
    for (size_t i = 0; i < m->n_buffers; i++)
        ddl__put_lef(p + 4 * i, m->buffers[i]);
}

static int corrupt(const char *path, const char *what, char *err, size_t err_bytes)
{
    return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: section BUFS (running statistics): %s: the file is corrupt",
                     path, what);
}

int ddl__checkpoint_bufs_decode(ddl_checkpoint *ck, const unsigned char *p, size_t n, const char *path, char *err,
                                size_t err_bytes)
{
    if (n < 4)
        return corrupt(path, "shorter than its count", err, err_bytes);
    uint32_t k = ddl__get_le32(p);
    if (k < 1 || k > DDL_MAX_BUFFERS || (size_t)k * REC_BYTES > n - 4)
        return corrupt(path, "a count of buffers out of 1 to 128, or records longer than the section", err, err_bytes);
    const unsigned char *rec = p + 4;
    uint64_t next = 0, room = (n - 4 - (size_t)k * REC_BYTES) / 4;
    for (uint32_t i = 0; i < k; i++, rec += REC_BYTES) {
        ddl_param_info *t = &ck->buf_tensors[i];
        memcpy(ck->buf_names[i], rec, DDL__NAME_BYTES);
        t->name = ck->buf_names[i];
        t->n_dims = (int)ddl__get_le32(rec + 48);
        uint64_t count = 1, off = ddl__get_le64(rec + 68), cnt = ddl__get_le64(rec + 76);
        int ok = ck->buf_names[i][DDL__NAME_BYTES - 1] == '\0' && ck->buf_names[i][0] && t->n_dims >= 1 &&
                 t->n_dims <= 4;
        for (int d = 0; d < 4 && ok; d++) {
            uint32_t s = ddl__get_le32(rec + 52 + 4 * d);
            ok = s >= 1 && s <= INT_MAX && (d < t->n_dims || s == 1);
            t->shape[d] = (int)s;
            count *= ok ? s : 1;
            ok = ok && count <= room;
        }
        if (!ok || off != next || cnt != count || off + cnt > room)
            return corrupt(path, "a buffer record is impossible (name, 1 to 4 dims, count = product of the shape, "
                           "placed after the one before, within the section)", err, err_bytes);
        t->offset = (size_t)off;
        t->count = (size_t)cnt;
        next = off + cnt;
    }
    if (next != room || (n - 4 - (size_t)k * REC_BYTES) % 4)
        return corrupt(path, "its values are not exactly those of its records", err, err_bytes);
    ck->buffers = (float *)ddl__alloc(ck->alloc, (size_t)next * sizeof(float) + 1);
    if (!ck->buffers)
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: cannot allocate %llu floats of running statistics", path,
                         (unsigned long long)next);
    for (uint64_t i = 0; i < next; i++)
        ck->buffers[i] = ddl__get_lef(rec + 4 * i);
    ck->n_buffers = (size_t)next;
    ck->n_buf_tensors = (int)k;
    return DDL_OK;
}

/* ---- getters ---- */

const float *ddl_checkpoint_buffers(const ddl_checkpoint *ck) { return ck ? ck->buffers : NULL; }
size_t ddl_checkpoint_n_buffers(const ddl_checkpoint *ck) { return ck ? ck->n_buffers : 0; }
int ddl_checkpoint_n_buffer_tensors(const ddl_checkpoint *ck) { return ck ? ck->n_buf_tensors : 0; }

const ddl_param_info *ddl_checkpoint_buffer_tensor(const ddl_checkpoint *ck, int i)
{
    return ck && i >= 0 && i < ck->n_buf_tensors ? &ck->buf_tensors[i] : NULL;
}

int ddl__checkpoint_bufs_check(const ddl_checkpoint *ck, const ddl_model *m, char *err, size_t err_bytes)
{
    if (ck->n_buf_tensors != m->n_buf_tensors)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "the checkpoint holds %d buffers (running statistics), the model "
                         "%d", ck->n_buf_tensors, m->n_buf_tensors);
    for (int i = 0; i < m->n_buf_tensors; i++) {
        const ddl_param_info *a = &ck->buf_tensors[i], *b = &m->buf_tensors[i];
        if (strcmp(a->name, b->name) != 0 || a->count != b->count || a->offset != b->offset)
            return ddl__errf(err, err_bytes, DDL_EINVAL, "buffer %d is %s of %zu values in the checkpoint, the model "
                             "expects %s of %zu", i, a->name, a->count, b->name, b->count);
    }
    return DDL_OK;
}

int ddl_checkpoint_load_buffers(const ddl_checkpoint *ck, ddl_model *m, char *err, size_t err_bytes)
{
    if (!ck || !m)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_checkpoint_load_buffers: no checkpoint or no model");
    int rc = ddl__checkpoint_bufs_check(ck, m, err, err_bytes);
    if (rc == DDL_OK && m->n_buffers)
        memcpy(m->buffers, ck->buffers, m->n_buffers * sizeof(float));
    return rc;
}
