/* checkpoint_desc.c - section DESC of a checkpoint: what a program needs to rebuild the model
 * without having it compiled in (the layer graph's text, from ddl_model_describe) and to print
 * predictions by name (the class names of the training data). Layout, little endian:
 *     u32 n | n bytes of graph text (no NUL; n = 0: none) | u32 k | k x (u16 len | len bytes)
 * k is 0 or the model's class count. Reading trusts nothing: every length is checked against the
 * section before it is used, and the text may hold no NUL. */
#include "checkpoint.h"

#include <string.h>

#define DESC_MAX_NAME 255

int ddl__checkpoint_desc_encode(const ddl_model *m, const char *const *class_names, int n_names,
                                const ddl_allocator *alloc, unsigned char **out, size_t *bytes)
{
    *out = NULL;
    *bytes = 0;
    size_t arch = ddl_model_describe(m, NULL, 0), n = 8 + arch;
    /* names only when they name every output (data of 3 classes on a model of 5 outputs: none) */
    int k = class_names && n_names == m->cfg.n_classes ? n_names : 0;
    for (int i = 0; i < k; i++)
        n += 2 + strnlen(class_names[i], DESC_MAX_NAME);
    if (!arch && !k)
        return DDL_OK;
    unsigned char *p = ddl__alloc(alloc, n + 1); /* + 1: ddl_model_describe's NUL */
    if (!p)
        return DDL_ENOMEM;
    ddl__put_le32(p, (uint32_t)arch);
    if (arch)
        ddl_model_describe(m, (char *)p + 4, arch + 1);
    unsigned char *q = p + 4 + arch;
    ddl__put_le32(q, (uint32_t)k);
    q += 4;
    for (int i = 0; i < k; i++) {
        size_t len = strnlen(class_names[i], DESC_MAX_NAME);
        ddl__put_le16(q, (uint16_t)len);
        memcpy(q + 2, class_names[i], len);
        q += 2 + len;
    }
    *out = p;
    *bytes = n;
    return DDL_OK;
}

static int corrupt(const char *path, const char *what, char *err, size_t err_bytes)
{
    return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: section DESC (model description): %s", path, what);
}

int ddl__checkpoint_desc_decode(ddl_checkpoint *ck, const unsigned char *p, size_t n, const char *path, char *err,
                                size_t err_bytes)
{
    if (n < 8)
        return corrupt(path, "shorter than its two counts", err, err_bytes);
    size_t arch = ddl__get_le32(p);
    if (arch > n - 8 || memchr(p + 4, '\0', arch))
        return corrupt(path, "the graph text is longer than the section, or holds a NUL", err, err_bytes);
    const unsigned char *q = p + 4 + arch, *end = p + n;
    uint32_t k = ddl__get_le32(q);
    q += 4;
    if (k && (int64_t)k != ck->info.model_cfg.n_classes)
        return corrupt(path, "the number of class names is not the model's class count", err, err_bytes);
    /* one block: the pointer array, the text and each name with its NUL */
    size_t need = (size_t)k * sizeof(char *) + arch + 1 + (size_t)(end - q) + k;
    unsigned char *mem = ddl__alloc(ck->alloc, need);
    if (!mem)
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: cannot allocate %zu bytes for the model description", path,
                         need);
    const char **names = (const char **)(void *)mem;
    char *text = (char *)mem + (size_t)k * sizeof(char *);
    memcpy(text, p + 4, arch);
    text[arch] = '\0';
    char *at = text + arch + 1;
    for (uint32_t i = 0; i < k; i++) {
        size_t len = (size_t)(end - q) >= 2 ? ddl__get_le16(q) : SIZE_MAX;
        if (len == SIZE_MAX || len > (size_t)(end - q) - 2 || memchr(q + 2, '\0', len) || len == 0) {
            ddl__free(ck->alloc, mem);
            return corrupt(path, "a class name is empty, longer than the section or holds a NUL", err, err_bytes);
        }
        memcpy(at, q + 2, len);
        at[len] = '\0';
        names[i] = at;
        at += len + 1;
        q += 2 + len;
    }
    if (q != end) {
        ddl__free(ck->alloc, mem);
        return corrupt(path, "bytes after the last class name", err, err_bytes);
    }
    ck->desc = mem;
    ck->arch = arch ? text : NULL;
    ck->class_names = k ? names : NULL;
    return DDL_OK;
}

const char *ddl_checkpoint_arch(const ddl_checkpoint *ck) { return ck ? ck->arch : NULL; }
const char *const *ddl_checkpoint_class_names(const ddl_checkpoint *ck) { return ck ? ck->class_names : NULL; }
