/* training.c - GET /api/training: the scalars of the runs in --logdir for the Training tab. A
 * run is an events.out.tfevents.* file in the directory or in one of its subdirectories; its
 * records are read with tools/tfevents.h (both CRCs checked; a truncated last record, as a
 * run being written leaves, ends the file quietly) and the loss and accuracy tags go out as
 * [[step, value], ...] per tag. At most SV_MAX_POINTS points per series (the earliest are
 * thinned), so the answer stays small however long training runs. */
#include "serve.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/tfevents.h"

#define SV_MAX_POINTS 2000
#define SV_MAX_RUNS 32

static const char *const tags[] = {"train/loss", "train/accuracy", "test/loss", "test/accuracy",
                                   "epoch/train_loss", "epoch/train_accuracy"};
#define N_TAGS (sizeof tags / sizeof tags[0])

/* add: (step, value) to the series; a full series keeps every other point and goes on. */
static void add(json_t *series, int64_t step, double value)
{
    if (json_array_size(series) >= SV_MAX_POINTS)
        for (size_t i = 1; i < json_array_size(series); i++)
            json_array_remove(series, i);
    json_t *pt = json_pack("[If]", (json_int_t)step, value);
    if (pt)
        json_array_append_new(series, pt);
}

/* read_run: the event file path into a run object {"name", "file", tag: [[step, value]...]}. */
static json_t *read_run(const char *path, const char *name)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    json_t *run = json_pack("{ss}", "name", name), *series[N_TAGS];
    for (size_t t = 0; t < N_TAGS; t++)
        json_object_set_new(run, tags[t], series[t] = json_array());
    unsigned char *buf = NULL;
    size_t cap = 0;
    tfe_event e;
    int rc;
    while ((rc = tfe_next(f, &e, &buf, &cap)) == TFE_EVENT)
        for (size_t t = 0; e.kind == TFE_SCALAR && t < N_TAGS; t++)
            if (strcmp(e.text, tags[t]) == 0)
                add(series[t], e.step, e.value);
    if (rc != TFE_END && rc != TFE_TRUNCATED)
        json_object_set_new(run, "error", json_string("corrupt record"));
    free(buf);
    fclose(f);
    return run;
}

/* scan: event files in dir (and, at depth 0, in its subdirectories) onto runs. */
static void scan(json_t *runs, const char *dir, const char *prefix, int depth)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)) && json_array_size(runs) < SV_MAX_RUNS) {
        char path[2048], name[600];
        struct stat st;
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (stat(path, &st) != 0)
            continue;
        snprintf(name, sizeof name, "%s%s%s", prefix, *prefix ? "/" : "", de->d_name);
        if (S_ISDIR(st.st_mode) && depth == 0)
            scan(runs, path, de->d_name, 1);
        else if (S_ISREG(st.st_mode) && strncmp(de->d_name, "events.out.tfevents.", 20) == 0) {
            json_t *run = read_run(path, *prefix ? prefix : ".");
            if (run)
                json_array_append_new(runs, run);
        }
    }
    if (d)
        closedir(d);
}

json_t *sv_training_json(const char *dir)
{
    json_t *root = json_pack("{s:s?,s:[]}", "logdir", dir, "runs");
    if (root && dir)
        scan(json_object_get(root, "runs"), dir, "", 0);
    return root;
}
