/* export.c - ddl_export: the format from the path's extension, and what the exporters share:
 * writing a finished image to its file (a failed write leaves no partial file) and float bytes. */
#include "impl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* ends_with: s ends in ext, compared without case (".ONNX" is ".onnx"). */
static int ends_with(const char *s, const char *ext)
{
    size_t n = strlen(s), k = strlen(ext);
    return n > k && strncasecmp(s + n - k, ext, k) == 0;
}

int ddl_export(const ddl_checkpoint *ck, const char *path, const ddl_allocator *alloc, char *err, size_t err_bytes)
{
    if (!ck || !path)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_export: no checkpoint or no path given");
    if (ends_with(path, ".npz"))
        return ddl_export_npz(ck, path, alloc, err, err_bytes);
    if (ends_with(path, ".onnx"))
        return ddl_export_onnx(ck, path, alloc, err, err_bytes);
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash))
        return ddl__errf(err, err_bytes, DDL_ENOTSUP, "%s: no extension to tell the format by: export writes .npz "
                         "(numpy) or .onnx (ONNX); nothing exported", path);
    return ddl__errf(err, err_bytes, DDL_ENOTSUP, "%s: unknown format \"%s\": export writes .npz (numpy) or .onnx "
                     "(ONNX); nothing exported", path, dot);
}

int ddl__export_write(const char *path, const void *p, size_t n, char *err, size_t err_bytes)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return ddl__errf(err, err_bytes, DDL_EIO, "%s: cannot create: %s", path, strerror(errno));
    int ok = fwrite(p, 1, n, f) == n, e = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    if (ok)
        return DDL_OK;
    remove(path);
    return ddl__errf(err, err_bytes, DDL_EIO, "%s: cannot write %zu bytes: %s", path, n, strerror(e));
}

void ddl__export_le32(unsigned char *p, float f)
{
    uint32_t bits;
    memcpy(&bits, &f, 4);
    ddl__put_le(p, bits, 4);
}
