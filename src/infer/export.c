/* export.c - ddl_export: the format from the path's extension, handed to npz.c or onnx.c. */
#include "impl.h"

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
