/* data.c - the data sets of ddl-train, from what the user has: an image folder with a sub-folder
 * per class, a numpy array of images with one of labels or masks, or a directory of IDX files
 * as Fashion-MNIST ships them. A validation set is its own folder or file, or a seeded part of
 * the training set (--val-split). Every failure names the file. */
#include "train.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* is_idx_dir: dir holds train-images-idx3-ubyte[.gz] (or t10k's): Fashion-MNIST's layout. */
static int is_idx_dir(const char *dir, const char **split)
{
    static const char *const splits[] = {"train", "t10k"};
    for (int i = 0; i < 2; i++)
        for (int gz = 0; gz < 2; gz++) {
            char p[4096];
            snprintf(p, sizeof p, "%s/%s-images-idx3-ubyte%s", dir, splits[i], gz ? ".gz" : "");
            struct stat st;
            if (stat(p, &st) == 0) {
                *split = splits[i];
                return 1;
            }
        }
    return 0;
}

/* load_one: one set from path (and targets for numpy); split is IDX's "train" or "t10k". */
static int load_one(const tr_data *o, const char *path, const char *targets, const char *split, ddl_dataset *d,
                    int *skipped, char *err, size_t err_bytes)
{
    const char *found = NULL;
    if (targets)
        return ddl_dataset_load_numpy(path, targets, NULL, d, err, err_bytes);
    if (is_dir(path) && is_idx_dir(path, &found))
        return ddl_dataset_load_mnist(path, split ? split : found, NULL, d, err, err_bytes);
    if (is_dir(path)) {
        ddl_folder_config fc = {.channels = o->channels, .height = o->height, .width = o->width,
                                .skip_bad = o->skip_bad};
        int n = 0, rc = ddl_dataset_load_folder(path, &fc, NULL, d, &n, err, err_bytes);
        *skipped += n;
        return rc;
    }
    const char *dot = strrchr(path, '.');
    if (dot && (strcmp(dot, ".npy") == 0 || strcmp(dot, ".npz") == 0))
        snprintf(err, err_bytes, "%s: a numpy file needs its labels or masks: --targets FILE (--val-targets, "
                 "--test-targets for the others)", path);
    else
        snprintf(err, err_bytes, "%s: not a directory of class folders or of IDX files, nor a .npy or .npz file "
                 "with --targets", path);
    return DDL_EINVAL;
}

int tr_load(const tr_data *o, tr_sets *s, char *err, size_t err_bytes)
{
    memset(s, 0, sizeof *s);
    ddl_dataset all = {0};
    const char *idx_split = NULL;
    int idx = !o->train_targets && is_dir(o->train) && is_idx_dir(o->train, &idx_split);
    int rc = load_one(o, o->train, o->train_targets, idx ? "train" : NULL, &all, &s->skipped, err, err_bytes);
    if (rc == DDL_OK && o->val_split > 0) {
        rc = ddl_dataset_split(&all, o->val_split, o->seed, NULL, &s->train, &s->val, err, err_bytes);
        ddl_dataset_free(&all);
        s->has_val = rc == DDL_OK;
    } else {
        s->train = all;
    }
    if (rc == DDL_OK && o->val) {
        rc = load_one(o, o->val, o->val_targets, NULL, &s->val, &s->skipped, err, err_bytes);
        s->has_val = rc == DDL_OK;
    }
    /* an IDX directory holds its own test set (t10k) when no other is named */
    const char *test = o->test ? o->test : idx ? o->train : NULL;
    if (rc == DDL_OK && test) {
        rc = load_one(o, test, o->test_targets, o->test ? NULL : "t10k", &s->test, &s->skipped, err, err_bytes);
        s->has_test = rc == DDL_OK;
    }
    if (rc != DDL_OK)
        tr_free(s);
    return rc;
}

void tr_free(tr_sets *s)
{
    ddl_dataset_free(&s->train);
    ddl_dataset_free(&s->val);
    ddl_dataset_free(&s->test);
    memset(s, 0, sizeof *s);
}
