/* train.h - what the files of ddl-train share: its options, the data sets it loads (data.c) and
 * --predict (predict.c); main.c trains. Private to the program. */
#ifndef DDL_TRAIN_TOOL_H
#define DDL_TRAIN_TOOL_H

#include "ddl.h"
#include "common/example_db.h"

/* Where the data comes from: an image folder (CLASS/FILE), a numpy file with --targets, or a
 * directory of IDX files (Fashion-MNIST's layout); validation and test sets the same way. */
typedef struct tr_data {
    const char *train, *train_targets;
    const char *val, *val_targets;
    const char *test, *test_targets;
    double val_split;        /* > 0: the validation set is this part of the training set */
    int channels, height, width; /* what image folders are decoded and resized to */
    int skip_bad;
    uint64_t seed;           /* of --val-split */
    const char *cache;       /* --cache FILE: image folders decoded once (FILE, FILE.val, FILE.test) */
    int write_cache;         /* this rank writes it (rank 0) */
} tr_data;

typedef struct tr_sets {
    ddl_dataset train, val, test;
    int has_val, has_test;
    int skipped;             /* --skip-bad: images left out, over all sets */
    int cached, decoded;     /* folders read from --cache, and decoded (and cached) */
} tr_sets;

/* tr_load: the sets o names, into s (free with tr_free). DDL_OK, or the loader's code with err
 * naming the file and what is wrong. */
int tr_load(const tr_data *o, tr_sets *s, char *err, size_t err_bytes);
void tr_free(tr_sets *s);

/* --predict: a trained model on image files (a folder of them, or CLASS/FILE folders, whose
 * names are taken as the truth when they are the model's class names). */
typedef struct tr_predict {
    const char *model, *images, *out;
    int batch;
    db_opts db;              /* --db: a PostgreSQL table's rows instead of --images */
} tr_predict;

/* tr_predict_run: classify, print accuracy when the truth is known, write the CSV (file,
 * predicted class name, one probability per class). Returns the exit status: 0, 1 (a file or
 * the model failed), 2 is the command line's. */
int tr_predict_run(const tr_predict *p);
/* tr_predict_db: --predict --db on every rank of comm (NULL: one process), each its share of the
 * table (example_db.h). Returns the exit status, 0 or 1, the same on every rank. */
int tr_predict_db(const tr_predict *p, ddl_comm *comm);

#endif
