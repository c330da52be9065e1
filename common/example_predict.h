/* example_predict.h - `--predict --model M` of lenet and unet: a trained model used on many images, on one
 * rank or on every rank ddlrun or mpirun starts. The images are cut into forward passes of
 * --batch images; each rank takes a contiguous run of whole passes, so every image is computed in
 * the same pass, with the same neighbours, as on one rank, and rank 0 gathers the results in
 * image order: its output is byte for byte a one-rank run's. Rank 0 prints accuracy (and for
 * segmentation dice and mean IoU), the confusion matrix and images/s, then one summary line;
 * lenet writes --out CSV, unet each scene's mask as a PNG. A bad file gives one line naming it
 * and exit 1. With --db (example_db.h) the images are the rows of a PostgreSQL table instead, and
 * each rank writes its predictions back into another. Header-only: copy it along with the example
 * (and example_common.h, example_png.h, example_db.h); what
 * only one of the two examples uses is static inline, so the other compiles it without a warning. */
#ifndef DDL_EXAMPLE_PREDICT_H
#define DDL_EXAMPLE_PREDICT_H

#include "ddl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "example_common.h"
#include "example_db.h"
#include "example_png.h"

/* ---- options ---- */

typedef struct predict_opts {
    int on;                  /* --predict */
    const char *model;       /* --model M: the checkpoint */
    const char *out;         /* --out CSV (lenet) */
    const char *images;      /* lenet: --images F (IDX); unet: --images DIR for the masks */
    const char *labels;      /* lenet: --labels F (IDX) */
    db_opts db;              /* --db CONNINFO --table T [--id C] [--image C] --out-table OUT [--db-timeout S] */
} predict_opts;

enum { OPT_PREDICT = 400, OPT_MODEL, OPT_OUT, OPT_LABELS, OPT_DB, OPT_TABLE, OPT_ID, OPT_IMAGE, OPT_OUT_TABLE,
       OPT_DB_TIMEOUT };

#define PREDICT_OPTIONS                                                                     \
    {"predict", no_argument, NULL, OPT_PREDICT}, {"model", required_argument, NULL, OPT_MODEL}, \
    {"out", required_argument, NULL, OPT_OUT}, {"labels", required_argument, NULL, OPT_LABELS}, \
    {"db", required_argument, NULL, OPT_DB}, {"table", required_argument, NULL, OPT_TABLE},     \
    {"id", required_argument, NULL, OPT_ID}, {"image", required_argument, NULL, OPT_IMAGE},     \
    {"out-table", required_argument, NULL, OPT_OUT_TABLE}, {"db-timeout", required_argument, NULL, OPT_DB_TIMEOUT}

/* predict_option: 1 if c is one of the --predict flags (now taken), else 0. */
static int predict_option(predict_opts *p, int c, const char *arg)
{
    switch (c) {
    case OPT_PREDICT: p->on = 1; return 1;
    case OPT_MODEL: p->model = arg; return 1;
    case OPT_OUT: p->out = arg; return 1;
    case OPT_LABELS: p->labels = arg; return 1;
    case OPT_DB: p->db.db = arg; return 1;
    case OPT_TABLE: p->db.table = arg; return 1;
    case OPT_ID: p->db.id = arg; return 1;
    case OPT_IMAGE: p->db.image = arg; return 1;
    case OPT_OUT_TABLE: p->db.out_table = arg; return 1;
    case OPT_DB_TIMEOUT: p->db.timeout = cli_int("--db-timeout", arg, 1, 86400); return 1;
    default: return 0;
    }
}

/* predict_options_done: --predict needs --model; --model, --out, --labels and --db need --predict;
 * --db needs --table and --out-table, and takes no --out or --labels. */
static void predict_options_done(const predict_opts *p)
{
    const char *db = db_options_check(&p->db);
    if (p->on && !p->model)
        cli_error("--predict needs --model CHECKPOINT");
    if (!p->on && (p->model || p->out || p->labels || p->db.db))
        cli_error("--model, --out, --labels and --db go with --predict");
    if (db)
        cli_error(db);
    if (p->db.db && (p->out || p->labels || p->images))
        cli_error("--db reads the images from the table and writes to --out-table: no --images, --out or --labels");
}

/* ---- ranks: whole forward passes each, gathered in order ---- */

typedef struct predict_run {
    const char *prog;    /* "lenet" */
    ddl_comm *comm;      /* NULL: one process */
    int rank, world, batch;
    ddl_predictor *pr;
    double t0;           /* when predicting started */
    const predict_opts *opts; /* set by predict_open */
} predict_run;

/* predict_say: where rank 0's report goes: standard output, or standard error when --out - puts
 * the CSV alone on standard output. */
static inline FILE *predict_say(const predict_run *r)
{
    return r->opts && r->opts->out && strcmp(r->opts->out, "-") == 0 ? stderr : stdout;
}

/* predict_fail: one line on stderr, "PROG: what" (with the rank when there are several). */
static int predict_fail(const predict_run *r, const char *what)
{
    if (r->world > 1)
        fprintf(stderr, "%s: rank %d: %s\n", r->prog, r->rank, what);
    else
        fprintf(stderr, "%s: %s\n", r->prog, what);
    return 1;
}

/* predict_agree: every rank's ok (1 or 0) in; 1 when all are ok. A rank that failed has said
 * why; the others stop with it instead of waiting for it. */
static int predict_agree(predict_run *r, int ok)
{
    int64_t bad = !ok;
    if (r->comm && ddl_comm_allreduce(r->comm, &bad, 1, DDL_INT64, DDL_MAX) != DDL_OK) {
        predict_fail(r, ddl_comm_error(r->comm));
        return 0;
    }
    return bad == 0;
}

/* predict_range: rank's images [*lo, *hi) of n: a contiguous run of whole passes of r->batch. */
static void predict_range(const predict_run *r, int rank, int n, int *lo, int *hi)
{
    long passes = (n + r->batch - 1) / r->batch;
    long first = passes * rank / r->world, last = passes * (rank + 1) / r->world;
    *lo = (int)(first * r->batch < n ? first * r->batch : n);
    *hi = (int)(last * r->batch < n ? last * r->batch : n);
}

/* predict_gather: rank 0 receives every rank's part of buf (n items of item_bytes, at their
 * places); the others send theirs. Returns 0, or 1 having said why. */
static int predict_gather(predict_run *r, int n, void *buf, size_t item_bytes)
{
    for (int q = 1; r->comm && q < r->world; q++) {
        int lo, hi, rc = DDL_OK;
        predict_range(r, q, n, &lo, &hi);
        unsigned char *at = (unsigned char *)buf + (size_t)lo * item_bytes;
        size_t bytes = (size_t)(hi - lo) * item_bytes;
        if (bytes && r->rank == 0)
            rc = ddl_comm_recv(r->comm, q, 14, at, bytes);
        else if (bytes && r->rank == q)
            rc = ddl_comm_send(r->comm, 0, 14, at, bytes);
        if (rc != DDL_OK)
            return predict_fail(r, ddl_comm_error(r->comm));
    }
    return 0;
}

/* predict_open: the checkpoint --model of plugin p, for passes of `batch` images. */
static ddl_predictor *predict_open(predict_run *r, const predict_opts *o, const ddl_model_plugin *p)
{
    char err[DDL_ERR_BYTES];
    ddl_predict_config pc = {.batch = r->batch, .plugin = p};
    ddl_predictor *pr = NULL;
    r->opts = o;
    if (ddl_predictor_open(o->model, &pc, NULL, &pr, err, sizeof err) != DDL_OK)
        predict_fail(r, err);
    return pr;
}

/* predict_run_images: this rank's images of the n in images (n, c, h, w) through the model, into
 * probs and classes at their places (either may be NULL); then gathered on rank 0. */
static int predict_run_images(predict_run *r, const uint8_t *images, int n, int c, int h, int w, float *probs,
                              size_t probs_per_image, uint16_t *classes, size_t classes_per_image)
{
    int lo, hi;
    predict_range(r, r->rank, n, &lo, &hi);
    size_t in_sz = (size_t)c * h * w;
    r->t0 = example_seconds();
    if (hi > lo && ddl_predictor_run(r->pr, images + (size_t)lo * in_sz, hi - lo, c, h, w, NULL,
                                     probs ? probs + (size_t)lo * probs_per_image : NULL,
                                     classes ? classes + (size_t)lo * classes_per_image : NULL) != DDL_OK)
        return predict_fail(r, ddl_predictor_error(r->pr));
    if ((probs && predict_gather(r, n, probs, probs_per_image * sizeof(float))) ||
        (classes && predict_gather(r, n, classes, classes_per_image * sizeof *classes)))
        return 1;
    return 0;
}

/* ---- what rank 0 prints ---- */

/* predict_report: the confusion matrix and the metrics of ev, then the summary line. */
static void predict_report(const predict_run *r, ddl_eval_stats *ev, int K, int n, int segmentation)
{
    double secs = example_seconds() - r->t0;
    FILE *say = predict_say(r);
    ddl_eval_metrics(ev, K);
    fprintf(say, "confusion matrix (rows: truth, columns: predicted)\n     ");
    for (int j = 0; j < K; j++)
        fprintf(say, " %7d", j);
    for (int i = 0; i < K; i++) {
        fprintf(say, "\n  %2d ", i);
        for (int j = 0; j < K; j++)
            fprintf(say, " %7lld", (long long)ev->confusion[i * K + j]);
    }
    fprintf(say, "\n");
    if (segmentation)
        fprintf(say, "summary: model=%s world=%d images=%d pixel_acc=%.4f dice=%.4f miou=%.4f images_per_sec=%.0f "
                     "wall_s=%.2f\n", r->prog, r->world, n, ev->accuracy, ev->dice, ev->miou, n / secs, secs);
    else
        fprintf(say, "summary: model=%s world=%d images=%d accuracy=%.4f images_per_sec=%.0f wall_s=%.2f\n", r->prog,
                r->world, n, ev->accuracy, n / secs, secs);
}

/* ---- lenet: classify the test set or an IDX file ---- */

/* load_idx: an IDX file of n images (n, 28, 28) or (n, 1, 28, 28) (want_dims 3), or of n
 * labels (n) (want_dims 1); 0, or 1 having said why. */
static inline int load_idx(predict_run *r, const char *path, int want_dims, uint8_t **data, int *n)
{
    char err[DDL_ERR_BYTES], why[DDL_ERR_BYTES + 128];
    int n_dims, dims[4];
    if (ddl_idx_load(path, NULL, data, &n_dims, dims, err, sizeof err) != DDL_OK)
        return predict_fail(r, err);
    int images = want_dims > 1, ok_shape = images ? (n_dims == 3 && dims[1] == 28 && dims[2] == 28) ||
                                                        (n_dims == 4 && dims[1] == 1 && dims[2] == 28 && dims[3] == 28)
                                                  : n_dims == 1;
    *n = dims[0];
    if (!ok_shape && images)
        snprintf(why, sizeof why, "%s: images of %dx%d%s, lenet takes 28x28 (IDX dimensions n, 28, 28)", path,
                 n_dims >= 3 ? dims[n_dims - 2] : 0, n_dims >= 3 ? dims[n_dims - 1] : 0,
                 n_dims == 4 && dims[1] != 1 ? " in several channels" : "");
    else if (!ok_shape)
        snprintf(why, sizeof why, "%s: %d dimensions, labels have 1 (IDX dimensions n)", path, n_dims);
    else if (*n == 0)
        snprintf(why, sizeof why, "%s: holds no %s (its header says 0)", path, images ? "images" : "labels");
    else
        return 0;
    free(*data);
    *data = NULL;
    return predict_fail(r, why);
}

/* write_csv: index,predicted,truth,p0..pK-1, one row per image; truth empty without labels; path
 * "-": standard output. */
static inline int write_csv(const predict_run *r, const char *path, int n, int K, const uint16_t *pred, const uint8_t *truth,
                     const float *probs)
{
    int to_stdout = strcmp(path, "-") == 0;
    FILE *f = to_stdout ? stdout : fopen(path, "w");
    if (!f) {
        char why[1100];
        snprintf(why, sizeof why, "%s: cannot create: %s", path, strerror(errno));
        return predict_fail(r, why);
    }
    fprintf(f, "index,predicted,truth");
    for (int c = 0; c < K; c++)
        fprintf(f, ",p%d", c);
    for (int i = 0; i < n; i++) {
        fprintf(f, "\n%d,%d,", i, pred[i]);
        if (truth)
            fprintf(f, "%d", truth[i]);
        for (int c = 0; c < K; c++)
            fprintf(f, ",%.6f", (double)probs[(size_t)i * K + c]);
    }
    fprintf(f, "\n");
    if (to_stdout ? fflush(f) != 0 : fclose(f) != 0) {
        char why[1100];
        snprintf(why, sizeof why, "%s: cannot write: %s", path, strerror(errno));
        return predict_fail(r, why);
    }
    return 0;
}

/* labels_twin: for images F named as Fashion-MNIST's (...images-idx3-ubyte...), F's labels file
 * (...labels-idx1-ubyte...) when it is there; else NULL. */
static inline const char *labels_twin(const char *images, char *twin, size_t bytes)
{
    const char *at = strstr(images, "images-idx3-ubyte");
    if (!at || strlen(images) >= bytes)
        return NULL;
    snprintf(twin, bytes, "%.*slabels-idx1-ubyte%s", (int)(at - images), images, at + strlen("images-idx3-ubyte"));
    FILE *f = fopen(twin, "rb");
    if (f)
        fclose(f);
    return f ? twin : NULL;
}

/* classify: lenet --predict. */
static inline int classify(predict_run *r, const predict_opts *o, const char *data_dir)
{
    ddl_dataset test = {0};
    uint8_t *images = NULL, *labels = NULL;
    int n = 0, n_labels = 0, ok = 1;
    char err[DDL_ERR_BYTES], why[2200], twin[1024];
    const char *labels_path = o->labels ? o->labels : o->images ? labels_twin(o->images, twin, sizeof twin) : NULL;
    if (!o->images) { /* the test set */
        ok = ddl_dataset_load_mnist(data_dir, "t10k", NULL, &test, err, sizeof err) == DDL_OK || predict_fail(r, err) == 0;
        n = test.n;
    } else {
        ok = load_idx(r, o->images, 3, &images, &n) == 0 &&
             (!labels_path || load_idx(r, labels_path, 1, &labels, &n_labels) == 0);
        if (ok && labels && n_labels != n) {
            snprintf(why, sizeof why, "%s: %d label%s for the %d image%s of %s", labels_path, n_labels,
                     n_labels == 1 ? "" : "s", n, n == 1 ? "" : "s", o->images);
            ok = predict_fail(r, why) == 0;
        }
        for (int i = 0; ok && labels && i < n; i++)
            if (labels[i] > 9) {
                snprintf(why, sizeof why, "%s: label %d of image %d, lenet has classes 0 to 9", labels_path,
                         labels[i], i);
                ok = predict_fail(r, why) == 0;
            }
    }
    const uint8_t *x = images ? images : test.images, *truth = labels ? labels : o->images ? NULL : test.targets;
    int K = ddl_model_get_config(ddl_predictor_model(r->pr))->n_classes;
    float *probs = ok ? (float *)calloc((size_t)n * K, sizeof(float)) : NULL;
    uint16_t *pred = ok ? (uint16_t *)calloc((size_t)n, sizeof *pred) : NULL;
    ok = predict_agree(r, ok && probs && pred) && predict_run_images(r, x, n, 1, 28, 28, probs, (size_t)K, pred, 1) == 0;
    if (ok && r->rank == 0) {
        ddl_eval_stats ev;
        memset(&ev, 0, sizeof ev);
        int64_t cm[10 * 10] = {0}; /* LeNet's 10 classes */
        ev.confusion = cm;
        for (int i = 0; truth && K <= 10 && i < n; i++)
            ev.confusion[truth[i] * K + pred[i]]++;
        fprintf(predict_say(r), "predicted %d image%s on %d rank%s with %s\n", n, n == 1 ? "" : "s", r->world, r->world > 1 ? "s" : "",
               o->model);
        if (truth)
            predict_report(r, &ev, K, n, 0);
        else
            fprintf(predict_say(r), "summary: model=lenet world=%d images=%d images_per_sec=%.0f (no labels)\n",
                    r->world, n,
                   n / (example_seconds() - r->t0));
        ok = !o->out || write_csv(r, o->out, n, K, pred, truth, probs) == 0;
    }
    free(probs), free(pred), free(images), free(labels);
    ddl_dataset_free(&test);
    return ok ? 0 : 1;
}

/* predict_lenet: lenet --predict --model M [--images F [--labels F]] [--out CSV]. */
static inline int predict_lenet(const predict_opts *o, const example_opts *e, ddl_comm *comm)
{
    predict_run r = {.prog = "lenet", .comm = comm, .rank = ddl_comm_rank(comm), .world = ddl_comm_size(comm),
                     .batch = e->batch};
    r.pr = predict_open(&r, o, ddl_model_lenet());
    int rc = !predict_agree(&r, r.pr != NULL) ? 1 : o->db.db ? db_score("lenet", &o->db, r.pr, comm, r.batch)
                                                              : classify(&r, o, e->data);
    ddl_predictor_close(r.pr);
    return rc;
}

/* ---- unet: segment scenes, masks as PNG ---- */

/* predict_segment: unet --predict on the scenes `test`: masks to dir/scene_NNNN.png (palette
 * rgb[n_colors]) when dir is given, metrics against test's targets. With --db, the table's rows
 * instead of the scenes, their masks into --out-table. */
static inline int predict_segment(predict_run *r, const ddl_dataset *test, const char *dir, const uint8_t (*rgb)[3],
                           int n_colors)
{
    if (r->opts && r->opts->db.db)
        return db_score(r->prog, &r->opts->db, r->pr, r->comm, r->batch);
    size_t S = (size_t)test->h * test->w;
    uint16_t *masks = (uint16_t *)calloc((size_t)test->n * S, sizeof *masks);
    uint8_t *picture = (uint8_t *)malloc(S); /* one mask as palette indices for png_write */
    int ok = predict_agree(r, masks && picture) &&
             predict_run_images(r, test->images, test->n, test->c, test->h, test->w, NULL, 0, masks, S) == 0;
    if (ok && r->rank == 0 && dir && mkdir(dir, 0777) != 0 && errno != EEXIST) {
        char why[1100];
        snprintf(why, sizeof why, "%s: cannot create: %s", dir, strerror(errno));
        ok = predict_fail(r, why) == 0;
    }
    for (int i = 0; ok && r->rank == 0 && dir && i < test->n; i++) {
        char path[1024], why[1100];
        const char *what = "";
        snprintf(path, sizeof path, "%s/scene_%04d.png", dir, i);
        for (size_t k = 0; k < S; k++)
            picture[k] = (uint8_t)masks[(size_t)i * S + k];
        if (png_write(path, test->w, test->h, picture, rgb, n_colors, &what) != 0) {
            snprintf(why, sizeof why, "%s: %s", path, what);
            ok = predict_fail(r, why) == 0;
        }
    }
    if (ok && r->rank == 0) {
        ddl_eval_stats ev;
        memset(&ev, 0, sizeof ev);
        int K = test->n_classes;
        int64_t *cm = (int64_t *)calloc((size_t)K * K, sizeof *cm);
        ev.confusion = cm;
        for (size_t k = 0; cm && k < (size_t)test->n * S; k++)
            ev.confusion[test->targets[k] * K + masks[k]]++;
        printf("predicted %d scenes of %dx%d on %d rank%s%s%s\n", test->n, test->h, test->w, r->world,
               r->world > 1 ? "s" : "", dir ? ", masks in " : "", dir ? dir : "");
        if (cm)
            predict_report(r, &ev, K, test->n, 1);
        free(cm);
    }
    free(masks), free(picture);
    return ok ? 0 : 1;
}

#endif
