/* ddl.c - the PostgreSQL extension ddl: ddl_predict, ddl_predict_proba, ddl_segment and
 * ddl_class_names score images held in a table with a model file from the directory in the GUC
 * ddl.model_dir (pg/ddl--0.1.sql declares them); batch.c scores arrays of them (pgddl.h).
 * Owns: ddl.model_dir (superusers only) and ddl.batch_size, the backend's cache of open
 * predictors (a memory context under TopMemoryContext: a model is loaded at its first use, its
 * file checked once per statement and read again when it changed, at most MAX_MODELS kept; a
 * second predictor of the same file for the _batch functions, opened at their first use), the
 * bytea -> pixels step (raw pixels where they lie, or a PNG, JPEG, PGM or PPM of any size decoded
 * and resized into the model's buffer), and turning every failure into an SQL error that names
 * what was wrong, and letting PostgreSQL's interrupts (a cancel, statement_timeout,
 * pg_terminate_backend) in between the library's calls of a row (each of them bounded: an
 * image's decoding by its size, see ddl_image_decode).
 * Must not: open anything but a plain file directly in ddl.model_dir; allocate per row beyond
 * the result it returns (raw pixels are read in place, the predictor allocates nothing per run,
 * each model keeps its own buffers); start threads (ddl's pool stays at one thread, and the
 * library is built without OpenBLAS for this); call ereport while the library is inside a call
 * (it returns a status, then this file raises the error, so no longjmp crosses ddl). */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "pgddl.h"

PG_MODULE_MAGIC;

#define MAX_MODELS 16   /* models open at once in one backend; the least recently used goes */
#define NAME_BYTES PGDDL_NAME_BYTES

void _PG_init(void);

/* ---- ddl.model_dir, ddl.batch_size ---- */

static char *model_dir = NULL;
int pgddl_batch_size = 64;
int pgddl_batch_memory = 4096; /* kB */

static bool check_model_dir(char **newval, void **extra, GucSource source)
{
    if (*newval && (*newval)[0] && (*newval)[0] != '/') {
        GUC_check_errdetail("ddl.model_dir must be an absolute path (or empty: no models).");
        return false;
    }
    return true;
}

void _PG_init(void)
{
    DefineCustomStringVariable("ddl.model_dir", "Directory the ddl functions load model files from.",
                               "The functions take a file name in it, never a path. Only superusers set it.",
                               &model_dir, "", PGC_SUSET, 0, check_model_dir, NULL, NULL);
    DefineCustomIntVariable("ddl.batch_size", "Most images per forward pass of the ddl _batch functions.",
                            "Each model a backend has scored with them holds buffers for a pass.",
                            &pgddl_batch_size, 64, 1, 1024, PGC_USERSET, 0, NULL, NULL, NULL);
    DefineCustomIntVariable("ddl.batch_memory", "Most buffer memory of a forward pass of the ddl _batch functions.",
                            "A model whose images need more per pass runs fewer of them at once (at least one).",
                            &pgddl_batch_memory, 4096, 64, MAX_KILOBYTES, PGC_USERSET, GUC_UNIT_KB, NULL, NULL, NULL);
    MarkGUCPrefixReserved("ddl");
}

/* ---- memory: the library's allocations in PostgreSQL's contexts ---- */

/* ctx_alloc: bytes from the memory context ud, 16-byte aligned as ddl asks (palloc gives 8):
 * the offset to the start of the chunk is in the byte before. NULL when memory is short (never
 * an ERROR: the library is inside a call). */
static void *ctx_alloc(void *ud, size_t bytes)
{
    unsigned char *raw;
    unsigned char off;

    if (bytes > MaxAllocHugeSize - 16)
        return NULL;
    raw = MemoryContextAllocExtended((MemoryContext) ud, bytes + 16, MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
    if (!raw)
        return NULL;
    off = (unsigned char) (16 - ((uintptr_t) raw & 15)); /* 1 to 16 */
    raw[off - 1] = off;
    return raw + off;
}

static void ctx_free(void *ud, void *ptr)
{
    unsigned char *p = ptr;

    if (p)
        pfree(p - p[-1]);
}

static MemoryContext cache_ctx = NULL;
static ddl_allocator cache_alloc;  /* into cache_ctx; predictors keep a pointer to it */

static void cache_init(void)
{
    if (cache_ctx)
        return;
    cache_ctx = AllocSetContextCreate(TopMemoryContext, "ddl models", ALLOCSET_DEFAULT_SIZES);
    cache_alloc.alloc = ctx_alloc;
    cache_alloc.free = ctx_free;
    cache_alloc.ud = cache_ctx;
}

/* ---- the cache of open models ---- */

static model_entry *models[MAX_MODELS];
static uint64 use_clock = 0;

static void drop(int slot)
{
    model_entry *e = models[slot];

    ddl_predictor_close(e->pred);
    ddl_predictor_close(e->bpred);
    pfree(e->pixels);
    pfree(e->mask);
    pfree(e);
    models[slot] = NULL;
}

/* same_file: the file at a path is still the one loaded (a replaced or rewritten file differs
 * in inode, size or modification time). */
static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* model_name: the model argument as a file name, or an ERROR saying why it is not one. */
static void model_name(text *arg, char *name)
{
    int n = VARSIZE_ANY_EXHDR(arg);
    const char *s = VARDATA_ANY(arg);

    if (n == 0)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("ddl: the model name is empty"),
                        errhint("Name a model file in ddl.model_dir, such as 'lenet.ddl'.")));
    if (n >= NAME_BYTES)
        ereport(ERROR, (errcode(ERRCODE_NAME_TOO_LONG),
                        errmsg("ddl: a model name of %d bytes; a file name has at most %d", n, NAME_BYTES - 1)));
    memcpy(name, s, n);
    name[n] = '\0';
    if (strchr(name, '/') || strstr(name, ".."))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("ddl: model \"%s\" is a path, not a file name", name),
                        errdetail("A model is named by its file name in ddl.model_dir; \"/\" and \"..\" are refused.")));
}

/* load_error: the SQL error for a library status. */
static int load_errcode(int rc)
{
    switch (rc) {
    case DDL_ENOMEM: return ERRCODE_OUT_OF_MEMORY;
    case DDL_ECORRUPT: return ERRCODE_DATA_CORRUPTED;
    case DDL_ENOTSUP: return ERRCODE_FEATURE_NOT_SUPPORTED;
    case DDL_EIO: return ERRCODE_IO_ERROR;
    default: return ERRCODE_INVALID_PARAMETER_VALUE;
    }
}

/* load: open the model file at path (its stat in st) into a new entry, or an ERROR. */
static model_entry *load(const char *path, const char *name, const struct stat *st)
{
    ddl_predict_config pc = {.batch = 1, .plugin = NULL}; /* one row at a time */
    char err[DDL_ERR_BYTES];
    ddl_predictor *pred = NULL;
    const ddl_model_config *mc;
    model_entry *e;
    Size before = MemoryContextMemAllocated(cache_ctx, false), bytes;
    int rc;

    rc = ddl_predictor_open(path, &pc, &cache_alloc, &pred, err, sizeof err);
    if (rc != DDL_OK)
        ereport(ERROR, (errcode(load_errcode(rc)), errmsg("ddl: cannot load model \"%s\": %s", name, err)));
    bytes = MemoryContextMemAllocated(cache_ctx, false) - before;
    e = MemoryContextAllocExtended(cache_ctx, sizeof *e, MCXT_ALLOC_ZERO | MCXT_ALLOC_NO_OOM);
    if (e) {
        e->row_bytes = bytes;
        mc = ddl_model_get_config(ddl_predictor_model(pred));
        e->c = mc->in_c;
        e->h = mc->in_h;
        e->w = mc->in_w;
        ddl_model_output_shape(ddl_predictor_model(pred), &e->classes, &e->oh, &e->ow);
        e->pixels = MemoryContextAllocExtended(cache_ctx, (Size) e->c * e->h * e->w, MCXT_ALLOC_NO_OOM);
        e->mask = MemoryContextAllocExtended(cache_ctx, (Size) e->oh * e->ow * sizeof(uint16), MCXT_ALLOC_NO_OOM);
    }
    if (!e || !e->pixels || !e->mask) {
        ddl_predictor_close(pred);
        if (e && e->pixels)
            pfree(e->pixels);
        if (e && e->mask)
            pfree(e->mask);
        if (e)
            pfree(e);
        ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("ddl: out of memory loading model \"%s\"", name)));
    }
    e->pred = pred;
    strlcpy(e->path, path, sizeof e->path);
    strlcpy(e->name, name, sizeof e->name);
    e->st = *st;
    return e;
}

/* pgddl_get_model: the open model for the SQL argument, loaded (or loaded again, when its file
 * changed) as needed; the file is looked at once per statement. Or an ERROR. */
model_entry *pgddl_get_model(text *arg)
{
    char name[NAME_BYTES], path[MAXPGPATH];
    TimestampTz stmt = GetCurrentStatementStartTimestamp();
    struct stat st;
    int slot = -1, free_slot = -1, i;

    model_name(arg, name);
    if (!model_dir || !model_dir[0])
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE), errmsg("ddl: ddl.model_dir is not set"),
                        errhint("A superuser sets it to the directory of the model files: "
                                "LOAD 'ddl'; ALTER SYSTEM SET ddl.model_dir = '/path/to/models'; "
                                "SELECT pg_reload_conf(); (sessions started after it see it).")));
    if (snprintf(path, sizeof path, "%s/%s", model_dir, name) >= (int) sizeof path)
        ereport(ERROR, (errcode(ERRCODE_NAME_TOO_LONG), errmsg("ddl: the path of model \"%s\" is too long", name)));
    cache_init();
    for (i = 0; i < MAX_MODELS; i++) {
        if (models[i] && strcmp(models[i]->path, path) == 0)
            slot = i;
        else if (!models[i] && free_slot < 0)
            free_slot = i;
    }
    if (slot >= 0 && models[slot]->checked == stmt) {
        models[slot]->used = ++use_clock;
        return models[slot];
    }
    if (stat(path, &st) != 0) {
        int err = errno;

        if (slot >= 0)
            drop(slot);
        if (err == ENOENT || err == ENOTDIR)
            ereport(ERROR, (errcode(ERRCODE_UNDEFINED_FILE),
                            errmsg("ddl: no model \"%s\" in ddl.model_dir (%s)", name, model_dir)));
        errno = err;
        ereport(ERROR, (errcode_for_file_access(), errmsg("ddl: cannot read model \"%s\": %m", name)));
    }
    if (!S_ISREG(st.st_mode)) {
        if (slot >= 0)
            drop(slot);
        ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
                        errmsg("ddl: model \"%s\" in ddl.model_dir (%s) is not a file", name, model_dir)));
    }
    if (slot >= 0 && same_file(&models[slot]->st, &st)) {
        models[slot]->checked = stmt;
        models[slot]->used = ++use_clock;
        return models[slot];
    }
    if (slot >= 0) { /* the file changed: the new one replaces it, or the error says why not */
        drop(slot);
        free_slot = slot;
    }
    if (free_slot < 0) { /* full: the least recently used goes */
        free_slot = 0;
        for (i = 1; i < MAX_MODELS; i++)
            if (models[i]->used < models[free_slot]->used)
                free_slot = i;
        drop(free_slot);
    }
    models[free_slot] = load(path, name, &st);
    models[free_slot]->checked = stmt;
    models[free_slot]->used = ++use_clock;
    return models[free_slot];
}

/* open_batch: a predictor of e's file of `batch` images per pass into e->bpred, and the bytes it
 * took; the file must still be the one e was loaded from (stat after the open): a file replaced
 * in between would give another model's answers under e's name, so that is an ERROR, and the
 * next statement loads the new file. Or an ERROR saying why it does not load. */
static Size open_batch(model_entry *e, int batch)
{
    ddl_predict_config pc = {.batch = batch, .plugin = NULL};
    char err[DDL_ERR_BYTES];
    ddl_predictor *pred = NULL;
    Size before;
    struct stat st;
    int rc;

    ddl_predictor_close(e->bpred);
    e->bpred = NULL;
    e->bbatch = 0; /* until the new one is open: an ERROR below leaves none */
    before = MemoryContextMemAllocated(cache_ctx, false);
    rc = ddl_predictor_open(e->path, &pc, &cache_alloc, &pred, err, sizeof err);
    if (rc != DDL_OK)
        ereport(ERROR, (errcode(load_errcode(rc)), errmsg("ddl: cannot load model \"%s\": %s", e->name, err)));
    if (stat(e->path, &st) != 0 || !same_file(&st, &e->st)) {
        ddl_predictor_close(pred);
        e->checked = 0; /* the next statement looks at the file again */
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("ddl: model \"%s\" changed on disk during the statement", e->name),
                        errhint("Run the statement again: it loads the new file.")));
    }
    e->bpred = pred;
    e->bbatch = batch;
    return MemoryContextMemAllocated(cache_ctx, false) - before;
}

/* pgddl_batch_predictor: a second predictor of e's file, for the _batch functions: the row
 * functions keep theirs at one image per pass, so a backend that never scores an array holds no
 * buffers for more. Its pass is ddl.batch_size images, or as many as ddl.batch_memory holds:
 * a pass runs fastest while its buffers stay in the core's caches (measured in CPU time: LeNet,
 * 0.07 MB an image, runs 1.7x faster in passes of 16 to 64 than one at a time, and a third slower
 * than that in passes of 256; U-Net at 64 x 64, 3.5 MB an image, is fastest one at a time and
 * loses 40% at 16). The bytes an image takes are
 * measured once, as a predictor of 2 images against the row predictor of 1; a pass of one image
 * is the row predictor's, so such a model is held once. */
ddl_predictor *pgddl_batch_predictor(model_entry *e)
{
    Size budget = (Size) pgddl_batch_memory * 1024;
    int batch = 1;

    if (e->bbatch > 0 && e->bmax == pgddl_batch_size && e->bkb == pgddl_batch_memory)
        return e->bbatch == 1 ? e->pred : e->bpred;
    if (pgddl_batch_size > 1 && e->image_bytes == 0) {
        Size two = open_batch(e, 2);

        e->image_bytes = two > e->row_bytes ? two - e->row_bytes : 1;
    }
    if (pgddl_batch_size > 1)
        batch = (int) Max(1, Min((Size) pgddl_batch_size, budget / e->image_bytes));
    if (batch == 1) { /* a pass of one: the row predictor is that already */
        ddl_predictor_close(e->bpred);
        e->bpred = NULL;
        e->bbatch = 1;
    } else if (!e->bpred || e->bbatch != batch)
        open_batch(e, batch);
    e->bmax = pgddl_batch_size;
    e->bkb = pgddl_batch_memory;
    return e->bbatch == 1 ? e->pred : e->bpred;
}

/* ---- images ---- */

/* image_format: "PNG" or "JPEG" when the bytes begin with that format's signature, "PGM" or "PPM"
 * for a binary PGM or PPM header (P5 or P6 and a blank), else NULL. */
static const char *image_format(const uint8 *b, size_t n)
{
    static const uint8 png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

    if (n >= 8 && memcmp(b, png, 8) == 0)
        return "PNG";
    if (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff)
        return "JPEG";
    if (n >= 3 && b[0] == 'P' && (b[1] == '5' || b[1] == '6') &&
        (b[2] == ' ' || b[2] == '\n' || b[2] == '\r' || b[2] == '\t'))
        return b[1] == '5' ? "PGM" : "PPM";
    return NULL;
}

/* pgddl_image_pixels: the image as the model's (c, h, w) bytes: raw pixels where they lie, or an image
 * file of any size decoded and resized to the model's input as training does (ddl_image_decode:
 * the pixels of ddl-train --predict and ddl-serve), into the model's buffer, its scratch memory
 * in the row's context; or an ERROR. A PNG's or JPEG's signature makes the bytes an image; a
 * PGM's or PPM's, being plain letters, does so only when they are not the raw pixels' size. */
const uint8 *pgddl_image_pixels(model_entry *e, bytea *img)
{
    const uint8 *b = (const uint8 *) VARDATA_ANY(img);
    size_t n = VARSIZE_ANY_EXHDR(img), want = (size_t) e->c * e->h * e->w;
    const char *format = image_format(b, n);
    ddl_allocator scratch = {ctx_alloc, ctx_free, CurrentMemoryContext};
    char err[DDL_ERR_BYTES];
    int rc;

    CHECK_FOR_INTERRUPTS();
    if (n == want && (!format || strcmp(format, "PGM") == 0 || strcmp(format, "PPM") == 0))
        return b;
    if (!format)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("ddl: an image of %zu bytes, neither PNG, JPEG, PGM nor PPM; model \"%s\" takes %zu "
                               "bytes of raw pixels (%d x %d x %d) or an image file of any size (resized to %d x %d)",
                               n, e->name, want, e->c, e->h, e->w, e->w, e->h)));
    rc = ddl_image_decode(format, b, n, e->c, e->h, e->w, 0, &scratch, e->pixels, err, sizeof err);
    if (rc != DDL_OK)
        ereport(ERROR, (errcode(rc == DDL_ENOMEM ? ERRCODE_OUT_OF_MEMORY
                                : rc == DDL_EINVAL ? ERRCODE_INVALID_PARAMETER_VALUE
                                : rc == DDL_ENOTSUP ? ERRCODE_FEATURE_NOT_SUPPORTED
                                : ERRCODE_INVALID_BINARY_REPRESENTATION),
                        errmsg("ddl: a %s image of %zu bytes that model \"%s\" cannot take: %s", format, n, e->name,
                               err)));
    return e->pixels;
}

/* predict: one image through the model: probabilities into probs (classes floats, may be NULL),
 * the class of every output position into e->mask. */
static void predict(model_entry *e, const uint8 *px, float *probs)
{
    CHECK_FOR_INTERRUPTS();
    if (ddl_predictor_run(e->pred, px, 1, e->c, e->h, e->w, NULL, probs, e->mask) != DDL_OK)
        ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
                        errmsg("ddl: model \"%s\": %s", e->name, ddl_predictor_error(e->pred))));
}

void pgddl_need_classifier(const model_entry *e, const char *fn)
{
    if (e->oh * e->ow != 1)
        ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
                        errmsg("ddl: %s takes a classifier; model \"%s\" segments (its output is %d x %d x %d)", fn,
                               e->name, e->classes, e->oh, e->ow),
                        errhint("Use ddl_segment for a segmentation model.")));
}

void pgddl_need_segmenter(const model_entry *e, const char *fn)
{
    if (e->oh * e->ow == 1)
        ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
                        errmsg("ddl: %s takes a segmentation model; model \"%s\" classifies (%d classes)", fn,
                               e->name, e->classes),
                        errhint("Use ddl_predict or ddl_predict_proba for a classifier.")));
    if (e->classes > 256)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                        errmsg("ddl: model \"%s\" has %d classes; a mask of bytes holds 256", e->name, e->classes)));
}

ArrayType *pgddl_float4_array(int n)
{
    Size bytes = ARR_OVERHEAD_NONULLS(1) + (Size) n * sizeof(float4);
    ArrayType *a = (ArrayType *) palloc0(bytes);

    SET_VARSIZE(a, bytes);
    a->ndim = 1;
    a->dataoffset = 0;
    a->elemtype = FLOAT4OID;
    ARR_DIMS(a)[0] = n;
    ARR_LBOUND(a)[0] = 1;
    return a;
}

/* ---- the SQL functions ---- */

PG_FUNCTION_INFO_V1(pgddl_predict);
PG_FUNCTION_INFO_V1(pgddl_predict_proba);
PG_FUNCTION_INFO_V1(pgddl_segment);
PG_FUNCTION_INFO_V1(pgddl_class_names);

/* ddl_predict(model text, image bytea) returns int: the class, 0 to classes - 1. */
Datum pgddl_predict(PG_FUNCTION_ARGS)
{
    model_entry *e = pgddl_get_model(PG_GETARG_TEXT_PP(0));

    pgddl_need_classifier(e, "ddl_predict");
    predict(e, pgddl_image_pixels(e, PG_GETARG_BYTEA_PP(1)), NULL);
    PG_RETURN_INT32((int32) e->mask[0]);
}

/* ddl_predict_proba(model text, image bytea) returns real[]: classes probabilities, written by
 * the model straight into the array it returns. */
Datum pgddl_predict_proba(PG_FUNCTION_ARGS)
{
    model_entry *e = pgddl_get_model(PG_GETARG_TEXT_PP(0));
    const uint8 *px;
    ArrayType *a;

    pgddl_need_classifier(e, "ddl_predict_proba");
    px = pgddl_image_pixels(e, PG_GETARG_BYTEA_PP(1));
    a = pgddl_float4_array(e->classes);
    predict(e, px, (float *) ARR_DATA_PTR(a));
    PG_RETURN_ARRAYTYPE_P(a);
}

/* ddl_segment(model text, image bytea) returns bytea: (oh, ow) bytes, each pixel's class. */
Datum pgddl_segment(PG_FUNCTION_ARGS)
{
    model_entry *e = pgddl_get_model(PG_GETARG_TEXT_PP(0));
    const uint8 *px;
    bytea *out;
    uint8 *mask;
    Size n, i;

    pgddl_need_segmenter(e, "ddl_segment");
    px = pgddl_image_pixels(e, PG_GETARG_BYTEA_PP(1));
    predict(e, px, NULL);
    n = (Size) e->oh * e->ow;
    out = (bytea *) palloc(VARHDRSZ + n);
    SET_VARSIZE(out, VARHDRSZ + n);
    mask = (uint8 *) VARDATA(out);
    for (i = 0; i < n; i++)
        mask[i] = (uint8) e->mask[i];
    PG_RETURN_BYTEA_P(out);
}

/* ddl_class_names(model text) returns text[]: the names the checkpoint carries, or NULL. */
Datum pgddl_class_names(PG_FUNCTION_ARGS)
{
    model_entry *e = pgddl_get_model(PG_GETARG_TEXT_PP(0));
    const char *const *names = ddl_predictor_class_names(e->pred);
    Datum *d;
    int i;

    if (!names)
        PG_RETURN_NULL();
    d = (Datum *) palloc(sizeof(Datum) * e->classes);
    for (i = 0; i < e->classes; i++)
        d[i] = CStringGetTextDatum(names[i]);
    PG_RETURN_ARRAYTYPE_P(construct_array(d, e->classes, TEXTOID, -1, false, TYPALIGN_INT));
}
