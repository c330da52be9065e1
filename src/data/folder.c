/* folder.c - image files as data: one file (ddl_image_load) and a folder of class folders
 * (ddl_dataset_load_folder: DIR/CLASS/FILE, FILE a .jpg, .jpeg, .png, .pgm or .ppm, classes in
 * sorted name order), each image decoded once, converted to the model's channels and resized to its input size.
 * Owns: finding the files in a stable order, decoding them side by side on ddl's thread pool,
 * the class names, and what a bad file does (an error naming it, or skipped and counted).
 * Must not: depend on the order threads finish in (every file has its own place and the first
 * bad one in sorted order is the one reported), or allocate except through the caller's
 * allocator. */
#include "impl.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define PATH_BYTES 4096

/* ---- one file ---- */

int ddl_image_decode(const char *name, const void *bytes, size_t n, int channels, int height, int width, int exact,
                     const ddl_allocator *alloc, uint8_t *out, char *err, size_t err_bytes)
{
    if (!name || !bytes || !out || (channels != 1 && channels != 3) || height < 1 || width < 1 || height > 65536 ||
        width > 65536)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_image_decode: a name, bytes, out, channels 1 or 3 and a "
                         "size");
    ddl__image im;
    int rc = ddl__image_decode(name, (const unsigned char *)bytes, n, channels, exact ? width : 0, exact ? height : 0,
                               alloc, &im, err, err_bytes);
    if (rc)
        return rc;
    size_t plane = (size_t)height * (size_t)width;
    uint8_t *hwc = (uint8_t *)ddl__alloc(alloc, plane * (size_t)channels);
    if (!hwc || ddl__resize(im.px, im.w, im.h, channels, hwc, width, height, alloc) != DDL_OK)
        rc = ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: cannot allocate the resized image", name);
    for (size_t p = 0; rc == DDL_OK && p < plane; p++) /* (H, W, C) -> (C, H, W) */
        for (int c = 0; c < channels; c++)
            out[(size_t)c * plane + p] = hwc[p * (size_t)channels + (size_t)c];
    ddl__free(alloc, hwc);
    ddl__free(alloc, im.px);
    return rc;
}

int ddl_image_load(const char *path, int channels, int height, int width, const ddl_allocator *alloc, uint8_t *out,
                   char *err, size_t err_bytes)
{
    if (!path || !out || (channels != 1 && channels != 3) || height < 1 || width < 1 || height > 65536 ||
        width > 65536)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_image_load: a path, out, channels 1 or 3 and a size");
    unsigned char *b = NULL;
    size_t n = 0;
    int rc = ddl__read_file(path, (uint64_t)1 << 30, alloc, &b, &n, err, err_bytes);
    if (rc)
        return rc;
    rc = ddl_image_decode(path, b, n, channels, height, width, 0, alloc, out, err, err_bytes);
    ddl__free(alloc, b);
    return rc;
}

/* ---- listing a folder ---- */

static int is_image_name(const char *name)
{
    static const char *const ext[] = {".jpg", ".jpeg", ".png", ".pgm", ".ppm"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
        size_t e = strlen(ext[i]);
        if (n > e && strcasecmp(name + n - e, ext[i]) == 0)
            return 1;
    }
    return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* list: the names in dir that are directories (dirs) or image files (!dirs: regular files only,
 * so that a FIFO named x.png is never opened), sorted, hidden ones left out, as one block of
 * strings *mem with pointers *names. */
static int list(const char *dir, int dirs, const ddl_allocator *alloc, char ***names, int *count, void **mem,
                char *err, size_t err_bytes)
{
    *names = NULL, *count = 0, *mem = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return ddl__errf(err, err_bytes, DDL_EIO, "%s: cannot open the folder: %s", dir, strerror(errno));
    size_t chars = 0;
    int n = 0;
    for (int pass = 0; pass < 2; pass++) {
        char *at = NULL;
        if (pass == 1) {
            *mem = ddl__alloc(alloc, (size_t)n * sizeof(char *) + chars + 1);
            if (!*mem) {
                closedir(d);
                return ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: cannot allocate the list of files", dir);
            }
            *names = (char **)*mem;
            at = (char *)(*names + n);
            rewinddir(d);
        }
        int k = 0;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char path[PATH_BYTES];
            struct stat st;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            int got = stat(path, &st) == 0;
            if (dirs ? !(got && S_ISDIR(st.st_mode)) : !(got && S_ISREG(st.st_mode) && is_image_name(e->d_name)))
                continue;
            if (pass == 0) {
                n++;
                chars += strlen(e->d_name) + 1;
            } else if (k < n) {
                (*names)[k++] = strcpy(at, e->d_name);
                at += strlen(e->d_name) + 1;
            }
        }
        if (pass == 1)
            n = k; /* the folder may have changed between the passes */
    }
    closedir(d);
    qsort(*names, (size_t)n, sizeof(char *), by_name);
    *count = n;
    return DDL_OK;
}

/* ---- decoding on the pool ---- */

typedef struct job {
    const ddl_folder_config *cfg;
    const ddl_allocator *alloc;
    const char *const *paths;
    uint8_t *images;
    int *status;
} job;

static void decode_task(void *ctx, int i)
{
    job *j = ctx;
    size_t bytes = (size_t)j->cfg->channels * (size_t)j->cfg->height * (size_t)j->cfg->width;
    char err[8];
    j->status[i] = ddl_image_load(j->paths[i], j->cfg->channels, j->cfg->height, j->cfg->width, j->alloc,
                                  j->images + (size_t)i * bytes, err, sizeof err);
}

/* ---- the data set ---- */

typedef struct found {
    void *class_mem, **file_mem; /* the lists, freed at the end */
    char **classes;
    int n_classes, n;
    char **paths;                /* n full paths, in one block */
    uint16_t *labels;
    void *path_mem;
} found;

static void found_free(found *f, const ddl_allocator *alloc)
{
    for (int c = 0; f->file_mem && c < f->n_classes; c++)
        ddl__free(alloc, f->file_mem[c]);
    ddl__free(alloc, f->file_mem);
    ddl__free(alloc, f->class_mem);
    ddl__free(alloc, f->path_mem);
}

/* find: every class folder and image file, in sorted order, with full paths and labels. */
static int find(const char *dir, const ddl_allocator *alloc, found *f, char *err, size_t err_bytes)
{
    memset(f, 0, sizeof *f);
    int rc = list(dir, 1, alloc, &f->classes, &f->n_classes, &f->class_mem, err, err_bytes);
    if (rc)
        return rc;
    if (f->n_classes == 0)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "%s: no class folders (expected DIR/CLASS/IMAGE files)", dir);
    if (f->n_classes > DDL_MAX_CLASSES)
        return ddl__errf(err, err_bytes, DDL_ENOTSUP, "%s: %d class folders: ddl takes at most %d", dir,
                         f->n_classes, DDL_MAX_CLASSES);
    char ***files = (char ***)ddl__alloc(alloc, (size_t)f->n_classes * (sizeof(char **) + sizeof(int)));
    f->file_mem = (void **)ddl__alloc(alloc, (size_t)f->n_classes * sizeof(void *));
    if (!files || !f->file_mem) {
        ddl__free(alloc, files);
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: cannot allocate the lists", dir);
    }
    memset(f->file_mem, 0, (size_t)f->n_classes * sizeof(void *));
    int *counts = (int *)(files + f->n_classes);
    size_t chars = 0;
    for (int c = 0; c < f->n_classes && !rc; c++) {
        char sub[PATH_BYTES];
        snprintf(sub, sizeof sub, "%s/%s", dir, f->classes[c]);
        rc = list(sub, 0, alloc, &files[c], &counts[c], &f->file_mem[c], err, err_bytes);
        for (int i = 0; !rc && i < counts[c]; i++)
            chars += strlen(sub) + strlen(files[c][i]) + 2;
        f->n += rc ? 0 : counts[c];
    }
    if (!rc && f->n == 0)
        rc = ddl__errf(err, err_bytes, DDL_EINVAL, "%s: %d class folders and no image in them (.jpg, .jpeg, .png, "
                       ".pgm, .ppm)", dir, f->n_classes);
    for (int c = 0; !rc && c < f->n_classes; c++) /* a class no sample can have: a folder left over, surely */
        if (counts[c] == 0)
            rc = ddl__errf(err, err_bytes, DDL_EINVAL, "%s/%s: a class folder with no image in it (.jpg, .jpeg, .png, "
                           ".pgm, .ppm): add its images or remove it", dir, f->classes[c]);
    if (!rc && !(f->path_mem = ddl__alloc(alloc, (size_t)f->n * (sizeof(char *) + sizeof(uint16_t)) + chars)))
        rc = ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: cannot allocate the paths", dir);
    if (!rc) {
        f->paths = (char **)f->path_mem;
        f->labels = (uint16_t *)(void *)(f->paths + f->n);
        char *at = (char *)(f->labels + f->n);
        for (int c = 0, i = 0; c < f->n_classes; c++)
            for (int k = 0; k < counts[c]; k++, i++) {
                f->paths[i] = at;
                f->labels[i] = (uint16_t)c;
                at += sprintf(at, "%s/%s/%s", dir, f->classes[c], files[c][k]) + 1;
            }
    }
    ddl__free(alloc, files);
    return rc;
}

/* ---- keeping what decoded ---- */

/* The files skip_bad leaves out are logged by name, the first SKIP_NAMED of them in sorted
 * order (each decoded again for its message: the pool's tasks keep only a status), then one
 * line with the count of the rest. */
#define SKIP_NAMED 10

/* the block that ddl_dataset_load_folder fills: images (n, C, H, W) of per bytes each, labels
 * (bytes, or uint16 when wide) at lb_at, the pool's status per file */
typedef struct carved {
    uint8_t *block;
    size_t per, lb_at;
    int wide;
    const int *status;
} carved;

static int label_at(const carved *b, int i)
{
    return b->wide ? ((const uint16_t *)(const void *)(b->block + b->lb_at))[i] : b->block[b->lb_at + (size_t)i];
}

/* keep: the images that decoded moved to the front of the block, in order, with their labels;
 * the first bad one an error (again, for its message) or, with skip_bad, left out and logged.
 * A class that keeps no image is an error naming it. *kept: how many stay. */
static int keep(const char *dir, const ddl_folder_config *cfg, const ddl_allocator *alloc, const found *f,
                const carved *b, int *kept, char *err, size_t err_bytes)
{
    int rc = DDL_OK, n = 0, left_out = 0;
    char named[DDL_ERR_BYTES + 16], why[DDL_ERR_BYTES];
    for (int i = 0; i < f->n && !rc; i++) {
        if (b->status[i] != DDL_OK && cfg->skip_bad) {
            if (cfg->log && left_out++ < SKIP_NAMED) { /* slot i is free: decoded again into it */
                why[0] = '\0';
                ddl_image_load(f->paths[i], cfg->channels, cfg->height, cfg->width, alloc,
                               b->block + (size_t)i * b->per, why, sizeof why);
                snprintf(named, sizeof named, "left out %s", why[0] ? why : f->paths[i]);
                cfg->log(cfg->log_ud, DDL_LOG_WARN, named);
            }
            continue;
        }
        if (b->status[i] != DDL_OK) /* the first bad file in sorted order, again for its message */
            rc = ddl_image_load(f->paths[i], cfg->channels, cfg->height, cfg->width, alloc,
                                b->block + (size_t)n * b->per, err, err_bytes);
        else if (n != i)
            memmove(b->block + (size_t)n * b->per, b->block + (size_t)i * b->per, b->per);
        if (b->wide)
            ((uint16_t *)(void *)(b->block + b->lb_at))[n] = f->labels[i];
        else
            b->block[b->lb_at + (size_t)n] = (uint8_t)f->labels[i];
        n++;
    }
    if (!rc && left_out > SKIP_NAMED) {
        snprintf(named, sizeof named, "left out %d more images that could not be decoded", left_out - SKIP_NAMED);
        cfg->log(cfg->log_ud, DDL_LOG_WARN, named);
    }
    *kept = n;
    if (!rc && n == 0)
        return ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: none of the %d images could be read", dir, f->n);
    /* labels ascend with the files (class by class): a class missing from them kept nothing */
    for (int i = 0, c = 0; !rc && c < f->n_classes; c++) {
        while (i < n && label_at(b, i) < c)
            i++;
        if (i == n || label_at(b, i) != c)
            rc = ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s/%s: none of this class's images could be decoded", dir,
                           f->classes[c]);
    }
    return rc;
}

int ddl_dataset_load_folder(const char *dir, const ddl_folder_config *cfg, const ddl_allocator *alloc,
                            ddl_dataset *out, int *n_skipped, char *err, size_t err_bytes)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (n_skipped)
        *n_skipped = 0;
    if (!dir || !cfg || !out || (cfg->channels != 1 && cfg->channels != 3) || cfg->height < 1 || cfg->width < 1 ||
        cfg->height > 4096 || cfg->width > 4096)
        return ddl__errf(err, err_bytes, DDL_EINVAL,
                         "ddl_dataset_load_folder: a folder, out, channels 1 or 3 and a size of 1 to 4096");
    found f;
    int rc = find(dir, alloc, &f, err, err_bytes);
    size_t per = (size_t)cfg->channels * (size_t)cfg->height * (size_t)cfg->width, names = 0;
    for (int c = 0; !rc && c < f.n_classes; c++)
        names += strlen(f.classes[c]) + 1;
    /* one block: images (n, C, H, W), labels (n: bytes, or uint16 past 256 classes), status (n
     * ints), class names */
    int wide = !rc && f.n_classes > 256;
    size_t img = (size_t)f.n * per, lb_at = ddl__align_up(img);
    size_t st_at = ddl__align_up(lb_at + (size_t)f.n * (wide ? sizeof(uint16_t) : 1));
    size_t nm_at = st_at + (size_t)f.n * sizeof(int);
    uint8_t *block = NULL;
    if (!rc && !(block = (uint8_t *)ddl__alloc(alloc, ddl__align_up(nm_at) + (size_t)f.n_classes * sizeof(char *) +
                                                              names)))
        rc = ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: cannot allocate %zu bytes for %d images", dir, img, f.n);
    int kept = 0;
    if (!rc) {
        job j = {.cfg = cfg, .alloc = alloc, .paths = (const char *const *)f.paths, .images = block,
                 .status = (int *)(block + st_at)};
        ddl__parallel(f.n, decode_task, &j);
        carved b = {.block = block, .per = per, .lb_at = lb_at, .wide = wide, .status = j.status};
        rc = keep(dir, cfg, alloc, &f, &b, &kept, err, err_bytes);
    }
    if (rc) {
        ddl__free(alloc, block);
        found_free(&f, alloc);
        return rc;
    }
    const char **cn = (const char **)(block + ddl__align_up(nm_at));
    char *at = (char *)(cn + f.n_classes);
    for (int c = 0; c < f.n_classes; c++) {
        cn[c] = strcpy(at, f.classes[c]);
        at += strlen(at) + 1;
    }
    if (n_skipped)
        *n_skipped = f.n - kept;
    *out = (ddl_dataset){.n = kept, .c = cfg->channels, .h = cfg->height, .w = cfg->width, .th = 1, .tw = 1,
                         .n_classes = f.n_classes, .images = block, .targets = wide ? NULL : block + lb_at,
                         .targets16 = wide ? (const uint16_t *)(void *)(block + lb_at) : NULL, .owned = block,
                         .alloc = alloc, .class_names = cn};
    found_free(&f, alloc);
    return DDL_OK;
}
