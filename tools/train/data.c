/* data.c - the data sets of ddl-train, from what the user has: an image folder with a sub-folder
 * per class, a numpy array of images with one of labels or masks, or a directory of IDX files
 * as Fashion-MNIST ships them. A validation set is its own folder or file, or a seeded part of
 * the training set (--val-split). Every failure names the file. */
#include "train.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
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

/* newest: the latest change (ns) of dir and of the folders in it: a file added, removed or
 * renamed in a class folder changes that folder's time. Files rewritten in place do not. */
static long long newest(const char *dir)
{
    struct stat st;
    long long t = stat(dir, &st) == 0 ? (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec : 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char p[4096];
        if (e->d_name[0] != '.' && snprintf(p, sizeof p, "%s/%s", dir, e->d_name) < (int)sizeof p &&
            stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
            long long m = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
            t = m > t ? m : t;
        }
    }
    if (d)
        closedir(d);
    return t;
}

/* say: the folder loader's lines (with --skip-bad, the files it left out), on rank 0 */
static void say(void *ud, int level, const char *msg)
{
    (void)ud, (void)level;
    fprintf(stderr, "ddl-train: %s\n", msg);
}

/* load_folder: an image folder, from the --cache file when it holds this folder decoded this way. */
static int load_folder(const tr_data *o, const char *path, const char *cache, ddl_dataset *d, tr_sets *s, char *err,
                       size_t err_bytes)
{
    char key[4400], real[4096];
    if (cache) {
        snprintf(key, sizeof key, "ddl-train folder %s channels %d size %dx%d skip_bad %d changed %lld",
                 realpath(path, real) ? real : path, o->channels, o->height, o->width, o->skip_bad, newest(path));
        int rc = ddl_dataset_load_cache(cache, key, NULL, d, err, err_bytes);
        if (rc == DDL_OK) {
            s->cached++;
            return DDL_OK;
        }
        if (rc != DDL_EIO && o->write_cache) /* damaged, or of other data: said, then made again */
            fprintf(stderr, "ddl-train: %s: decoding %s again\n", err, path);
    }
    ddl_folder_config fc = {.channels = o->channels, .height = o->height, .width = o->width, .skip_bad = o->skip_bad,
                            .log = o->write_cache ? say : NULL};
    int n = 0, rc = ddl_dataset_load_folder(path, &fc, NULL, d, &n, err, err_bytes);
    s->skipped += n;
    s->decoded++;
    if (rc == DDL_OK && cache && o->write_cache && ddl_dataset_save_cache(d, key, cache, err, err_bytes) != DDL_OK)
        fprintf(stderr, "ddl-train: %s (going on without it)\n", err);
    return rc;
}

/* load_one: one set from path (and targets for numpy); split is IDX's "train" or "t10k"; cache
 * the --cache file for an image folder (NULL: none). */
static int load_one(const tr_data *o, const char *path, const char *targets, const char *split, const char *cache,
                    ddl_dataset *d, tr_sets *s, char *err, size_t err_bytes)
{
    const char *found = NULL;
    if (targets)
        return ddl_dataset_load_numpy(path, targets, NULL, d, err, err_bytes);
    if (is_dir(path) && is_idx_dir(path, &found))
        return ddl_dataset_load_mnist(path, split ? split : found, NULL, d, err, err_bytes);
    if (is_dir(path))
        return load_folder(o, path, cache, d, s, err, err_bytes);
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
    char val_cache[4200], test_cache[4200];
    snprintf(val_cache, sizeof val_cache, "%s.val", o->cache ? o->cache : "");
    snprintf(test_cache, sizeof test_cache, "%s.test", o->cache ? o->cache : "");
    int idx = !o->train_targets && is_dir(o->train) && is_idx_dir(o->train, &idx_split);
    int rc = load_one(o, o->train, o->train_targets, idx ? "train" : NULL, o->cache, &all, s, err, err_bytes);
    if (rc == DDL_OK && o->val_split > 0) {
        rc = ddl_dataset_split(&all, o->val_split, o->seed, NULL, &s->train, &s->val, err, err_bytes);
        ddl_dataset_free(&all);
        s->has_val = rc == DDL_OK;
    } else {
        s->train = all;
    }
    if (rc == DDL_OK && o->val) {
        rc = load_one(o, o->val, o->val_targets, NULL, o->cache ? val_cache : NULL, &s->val, s, err, err_bytes);
        s->has_val = rc == DDL_OK;
    }
    /* an IDX directory holds its own test set (t10k) when no other is named */
    const char *test = o->test ? o->test : idx ? o->train : NULL;
    if (rc == DDL_OK && test) {
        rc = load_one(o, test, o->test_targets, o->test ? NULL : "t10k", o->cache ? test_cache : NULL, &s->test, s,
                      err, err_bytes);
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
