/* pgddl.h - what the extension's files share (private: PostgreSQL loads only ddl.so). ddl.c owns
 * ddl.model_dir, ddl.batch_size and ddl.batch_memory, the backend's cache of open models and the
 * bytea -> pixels step, and scores a row per call; batch.c scores the images of an array in
 * passes of up to ddl.batch_size images, as many as ddl.batch_memory holds, through a second
 * predictor of the same model file (or the row predictor, for passes of one). Every function here
 * raises an SQL ERROR rather than return a failure, and never while the library is inside a call. */
#ifndef PGDDL_H
#define PGDDL_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "utils/array.h"

#include <sys/stat.h>

#include "ddl.h"

#define PGDDL_NAME_BYTES 256 /* a model's file name: at most 255 bytes */

/* one open model of the backend's cache */
typedef struct model_entry {
    char path[MAXPGPATH];      /* ddl.model_dir/name: the key */
    char name[PGDDL_NAME_BYTES]; /* as the SQL call gave it */
    ddl_predictor *pred;       /* a row per pass (ddl_predict, ddl_predict_proba, ddl_segment) */
    int c, h, w;               /* input: (c, h, w) bytes */
    int classes, oh, ow;       /* output: (classes, oh, ow) scores */
    uint8 *pixels;             /* (c, h, w): a decoded image */
    uint16 *mask;              /* (oh, ow): the classes of one image */
    struct stat st;            /* the file as it was loaded */
    TimestampTz checked;       /* start of the statement that last looked at the file */
    uint64 used;               /* use_clock at the last use */
    ddl_predictor *bpred;      /* bbatch images per pass (the _batch functions); NULL until their first
                                * use, and when bbatch is 1 (they use pred then) */
    int bbatch;                /* 0 until the _batch functions' first use */
    int bmax, bkb;             /* ddl.batch_size and ddl.batch_memory that chose bbatch */
    Size row_bytes;            /* pred's memory: weights and one image's buffers */
    Size image_bytes;          /* a pass's buffers per image (0: not measured yet) */
} model_entry;

/* ddl.batch_size: the most images per forward pass of the _batch functions; ddl.batch_memory
 * (kB): the most buffer memory a pass may take, which makes a large model's passes shorter */
extern int pgddl_batch_size;
extern int pgddl_batch_memory;

/* pgddl_get_model: the open model for the SQL argument, loaded (or loaded again, when its file
 * changed) as needed; the file is looked at once per statement. */
model_entry *pgddl_get_model(text *arg);
/* pgddl_batch_predictor: e's predictor for the _batch functions, of ddl.batch_size images per
 * pass or as many as ddl.batch_memory holds (at least 1), opened from e's file at the first use
 * (again when those settings change) into the models' memory. */
ddl_predictor *pgddl_batch_predictor(model_entry *e);
/* pgddl_image_pixels: the image as e's (c, h, w) bytes, in place or decoded into e->pixels (valid
 * until the next call for e). */
const uint8 *pgddl_image_pixels(model_entry *e, bytea *img);
/* pgddl_need_classifier, pgddl_need_segmenter: an ERROR naming fn unless e is of that kind (and,
 * for a segmenter, has classes that fit a byte). */
void pgddl_need_classifier(const model_entry *e, const char *fn);
void pgddl_need_segmenter(const model_entry *e, const char *fn);
/* pgddl_float4_array: a real[] of n zeroes (palloc'd), to be written through ARR_DATA_PTR. */
ArrayType *pgddl_float4_array(int n);

#endif
