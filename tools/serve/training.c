/* training.c - GET /api/training: the scalars of the runs in --logdir for the Training tab. A
 * run is a directory holding events.out.tfevents.* files, --logdir itself or one below it
 * (tools/eventdirs.h: as TensorBoard and ddl-plot find them), named by its path relative to
 * --logdir (a sweep's trial-0003/logs is "trial-0003"; a run in --logdir itself takes its name).
 * Its files are read in name order with tools/tfevents.h (both CRCs checked; a truncated last
 * record, as a run being written leaves, ends the file quietly) and the loss and accuracy tags go
 * out as [[step, value], ...] per tag. The per-epoch tags (test/..., epoch/...) are logged at step =
 * epoch, which on the step axis of the per-step ones would pile up at its left edge: they go out
 * as [[step, value, epoch], ...], step being the last training step logged before them (the
 * epoch's end), or the epoch when no step was logged. At most SV_MAX_POINTS points per series
 * (the earliest are thinned), so the answer stays small however long training runs. */
#include "serve.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/eventdirs.h"
#include "tools/tfevents.h"

#define SV_MAX_POINTS 2000
#define SV_MAX_RUNS 32

static const char *const tags[] = {"train/loss", "train/accuracy", "test/loss", "test/accuracy",
                                   "epoch/train_loss", "epoch/train_accuracy"};
#define N_TAGS (sizeof tags / sizeof tags[0])

/* add: (step, value[, epoch]) to the series; a full series keeps every other point and goes on. */
static void add(json_t *series, int64_t step, double value, int64_t epoch)
{
    if (json_array_size(series) >= SV_MAX_POINTS)
        for (size_t i = 1; i < json_array_size(series); i++)
            json_array_remove(series, i);
    json_t *pt = epoch < 0 ? json_pack("[If]", (json_int_t)step, value)
                           : json_pack("[IfI]", (json_int_t)step, value, (json_int_t)epoch);
    if (pt)
        json_array_append_new(series, pt);
}

/* read_file: the scalars of one event file into the run's series; *last_step: the last
 * training step logged so far in the run. 0, or -1 for a corrupt record. */
static int read_file(const char *path, json_t **series, int64_t *last_step)
{
    char why[4200];
    FILE *f = tfe_open(path, why, sizeof why);
    if (!f)
        return 0; /* gone since the scan (a run being replaced), or no file (a FIFO would block the worker) */
    unsigned char *buf = NULL;
    size_t cap = 0;
    tfe_event e;
    int rc;
    while ((rc = tfe_next(f, &e, &buf, &cap)) == TFE_EVENT)
        for (size_t t = 0; e.kind == TFE_SCALAR && t < N_TAGS; t++) {
            if (strcmp(e.text, tags[t]) != 0)
                continue;
            if (strncmp(e.text, "train/", 6) == 0) {
                *last_step = e.step;
                add(series[t], e.step, e.value, -1);
            } else {
                add(series[t], *last_step >= 0 ? *last_step : e.step, e.value, e.step);
            }
        }
    free(buf);
    fclose(f);
    return rc == TFE_END || rc == TFE_TRUNCATED ? 0 : -1;
}

/* read_run: a run's files into {"name", "dir", tag: [[step, value]...]}. */
static json_t *read_run(const evd_run *r, const char *logdir)
{
    size_t n = strlen(logdir);
    const char *rel = strncmp(r->dir, logdir, n) == 0 && r->dir[n] ? r->dir + n : ".";
    rel += strspn(rel, "/"); /* --logdir DIR or DIR/ */
    json_t *run = json_pack("{ssss}", "name", r->label, "dir", rel), *series[N_TAGS];
    if (!run)
        return NULL;
    for (size_t t = 0; t < N_TAGS; t++)
        json_object_set_new(run, tags[t], series[t] = json_array());
    int64_t last_step = -1;
    int bad = 0;
    for (int k = 0; k < r->n_files; k++)
        bad |= read_file(r->files[k], series, &last_step);
    if (bad)
        json_object_set_new(run, "error", json_string("corrupt record"));
    return run;
}

json_t *sv_training_json(const char *dir)
{
    json_t *root = json_pack("{s:s?,s:[]}", "logdir", dir, "runs");
    evd_list l = {0};
    if (root && dir && evd_find(dir, SV_MAX_RUNS, &l) == 0)
        for (int i = 0; i < l.n; i++) {
            json_t *run = read_run(&l.runs[i], dir);
            if (run)
                json_array_append_new(json_object_get(root, "runs"), run);
        }
    if (root && l.truncated)
        json_object_set_new(root, "truncated", json_integer(SV_MAX_RUNS));
    evd_free(&l);
    return root;
}
