/* export_io.c - what the exporters (npz.c, src/infer/onnx.c) share: writing a finished image to
 * its file (a failed write leaves no partial file). */
#include "export.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

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

