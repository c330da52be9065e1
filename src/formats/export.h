/* src/formats/export.h - what the exporters share (export_io.c): the ONNX exporter
 * (src/infer/onnx.c) and npz.c build a file's image in memory, then write it with
 * ddl__export_write. Not API. */
#ifndef DDL_FORMATS_EXPORT_H
#define DDL_FORMATS_EXPORT_H
#include "core/impl.h"

/* ddl__export_write: write n bytes to path; on failure remove what was written and say why. */
int ddl__export_write(const char *path, const void *p, size_t n, char *err, size_t err_bytes);

#endif
