/* predict.c - ddl-train --predict: a trained model (any checkpoint: the layer graph travels in
 * it) on image files, each decoded and resized as training did, in batches. --images is a file,
 * a folder of files, or a folder of CLASS folders (then the folder name is the truth where it is
 * one of the model's class names, and the accuracy is printed); a single file's class and its
 * probability are printed. The CSV (--out FILE, or - for standard output) has one row per file:
 * file, predicted class name, one probability per class (the float32's shortest exact decimal). Runs on rank 0; other ranks return.
 * With --db (tr_predict_db) every rank scores its share of a PostgreSQL table instead. */
#include "train.h"
#include "tools/shortest.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#define MAX_FILES 1000000

typedef struct files {
    char **path;
    int *truth; /* class index, or -1 */
    int n, cap;
} files;

static int has_image_ext(const char *name)
{
    static const char *const ext[] = {".jpg", ".jpeg", ".png", ".pgm", ".ppm"};
    const char *dot = strrchr(name, '.');
    for (size_t i = 0; dot && i < sizeof ext / sizeof ext[0]; i++)
        if (strcasecmp(dot, ext[i]) == 0)
            return 1;
    return 0;
}

static int push(files *f, const char *path, int truth)
{
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 256;
        char **p = realloc(f->path, (size_t)cap * sizeof *p);
        int *t = p ? realloc(f->truth, (size_t)cap * sizeof *t) : NULL;
        if (p)
            f->path = p;
        if (!p || !t || cap > MAX_FILES)
            return -1;
        f->truth = t;
        f->cap = cap;
    }
    if (!(f->path[f->n] = strdup(path)))
        return -1;
    f->truth[f->n++] = truth;
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

static int class_of(const char *name, const char *const *names, int k)
{
    for (int i = 0; names && i < k; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

/* collect: the image files of dir (sorted), and of its sub-folders one level down. */
static int collect(const char *dir, int depth, int truth, const char *const *names, int k, files *f)
{
    struct dirent **list;
    int n = scandir(dir, &list, NULL, by_name), rc = n < 0 ? -1 : 0;
    for (int i = 0; i < n; i++) {
        const char *e = list[i]->d_name;
        char p[4096];
        struct stat st;
        if (e[0] != '.' && rc == 0 && snprintf(p, sizeof p, "%s/%s", dir, e) < (int)sizeof p && stat(p, &st) == 0) {
            if (S_ISDIR(st.st_mode) && depth == 0)
                rc = collect(p, 1, class_of(e, names, k), names, k, f);
            else if (S_ISREG(st.st_mode) && has_image_ext(e))
                rc = push(f, p, truth);
        }
        free(list[i]);
    }
    free(list);
    return rc;
}

static void files_free(files *f)
{
    for (int i = 0; i < f->n; i++)
        free(f->path[i]);
    free(f->path);
    free(f->truth);
}

/* write_csv: the header (file,predicted,p_NAME...) and a row per file, into path ("-": standard
 * output). */
static int write_csv(const char *path, const files *f, const uint16_t *pred, const float *probs, int k,
                     const char *const *names)
{
    int to_stdout = strcmp(path, "-") == 0;
    FILE *out = to_stdout ? stdout : fopen(path, "w");
    if (!out)
        return -1;
    fprintf(out, "file,predicted");
    for (int c = 0; c < k; c++)
        names ? fprintf(out, ",p_%s", names[c]) : fprintf(out, ",p%d", c);
    fputc('\n', out);
    for (int i = 0; i < f->n; i++) {
        fprintf(out, "\"%s\",", f->path[i]);
        names ? fprintf(out, "%s", names[pred[i]]) : fprintf(out, "%d", pred[i]);
        for (int c = 0; c < k; c++) { /* the predictor's bits, as ddl-serve writes them */
            char p[32];
            shortest_float(probs[(size_t)i * k + c], p, sizeof p);
            fprintf(out, ",%s", p);
        }
        fputc('\n', out);
    }
    return to_stdout ? (fflush(out) != 0 || ferror(out) ? -1 : 0) : fclose(out);
}

/* say_one: the class of a single file, by name where the checkpoint has names, and its probability. */
static void say_one(FILE *to, const files *f, const uint16_t *pred, const float *probs, int k, const char *const *names)
{
    fprintf(to, "%s: ", f->path[0]);
    names ? fprintf(to, "%s", names[pred[0]]) : fprintf(to, "class %d", pred[0]);
    fprintf(to, " (p %.4f)\n", (double)probs[pred[0] < k ? pred[0] : 0]);
}

/* classify: decode f's images in batches and run the predictor over them. */
static int classify(ddl_predictor *pr, const files *f, uint16_t *pred, float *probs)
{
    const ddl_model_config *mc = ddl_model_get_config(ddl_predictor_model(pr));
    size_t one = (size_t)mc->in_c * mc->in_h * mc->in_w;
    int batch = mc->batch;
    uint8_t *px = malloc((size_t)batch * one);
    int rc = px ? 0 : 1;
    char err[DDL_ERR_BYTES];
    for (int first = 0; rc == 0 && first < f->n; first += batch) {
        int b = f->n - first < batch ? f->n - first : batch;
        for (int i = 0; i < b && rc == 0; i++)
            if (ddl_image_load(f->path[first + i], mc->in_c, mc->in_h, mc->in_w, NULL, px + (size_t)i * one, err,
                               sizeof err) != DDL_OK)
                fprintf(stderr, "ddl-train: %s\n", err), rc = 1;
        if (rc == 0 && ddl_predictor_run(pr, px, b, mc->in_c, mc->in_h, mc->in_w, NULL,
                                         probs + (size_t)first * mc->n_classes, pred + first) != DDL_OK)
            fprintf(stderr, "ddl-train: %s\n", ddl_predictor_error(pr)), rc = 1;
    }
    free(px);
    return rc;
}

int tr_predict_run(const tr_predict *p)
{
    char err[DDL_ERR_BYTES];
    ddl_predict_config pc = {.batch = p->batch > 0 ? p->batch : 64};
    ddl_predictor *pr = NULL;
    if (ddl_predictor_open(p->model, &pc, NULL, &pr, err, sizeof err) != DDL_OK) {
        fprintf(stderr, "ddl-train: %s\n", err);
        return 1;
    }
    const ddl_model_config *mc = ddl_model_get_config(ddl_predictor_model(pr));
    const char *const *names = ddl_predictor_class_names(pr);
    int k = mc->n_classes, rc = 0;
    int oc, oh, ow;
    ddl_model_output_shape(ddl_predictor_model(pr), &oc, &oh, &ow);
    files f = {0};
    struct stat st;
    if (oh != 1 || ow != 1)
        fprintf(stderr, "ddl-train: %s: --predict on files classifies; this model segments\n", p->model), rc = 1;
    else if (stat(p->images, &st) != 0)
        fprintf(stderr, "ddl-train: %s: no such file or folder\n", p->images), rc = 1;
    else if ((S_ISDIR(st.st_mode) ? collect(p->images, 0, -1, names, k, &f) : push(&f, p->images, -1)) != 0)
        fprintf(stderr, "ddl-train: %s: cannot list its images\n", p->images), rc = 1;
    else if (f.n == 0)
        fprintf(stderr, "ddl-train: %s: no .jpg, .jpeg, .png, .pgm or .ppm file in it\n", p->images), rc = 1;
    uint16_t *pred = rc ? NULL : malloc((size_t)f.n * sizeof *pred);
    float *probs = rc ? NULL : malloc((size_t)f.n * (size_t)k * sizeof *probs);
    if (!rc && (!pred || !probs))
        fprintf(stderr, "ddl-train: out of memory for %d image%s\n", f.n, f.n == 1 ? "" : "s"), rc = 1;
    double t0 = (double)clock();
    if (!rc)
        rc = classify(pr, &f, pred, probs);
    if (!rc) {
        int known = 0, right = 0;
        for (int i = 0; i < f.n; i++)
            if (f.truth[i] >= 0)
                known++, right += f.truth[i] == pred[i];
        FILE *say = p->out && strcmp(p->out, "-") == 0 ? stderr : stdout; /* --out -: the CSV alone on stdout */
        if (f.n == 1)
            say_one(say, &f, pred, probs, k, names);
        fprintf(say, "predicted %d image%s in %.2f s", f.n, f.n == 1 ? "" : "s",
                ((double)clock() - t0) / CLOCKS_PER_SEC);
        if (known)
            fprintf(say, ": accuracy %.4f on the %d whose folder names their class", (double)right / known, known);
        fprintf(say, "\n");
        fflush(say);
        if (p->out && write_csv(p->out, &f, pred, probs, k, names) != 0)
            fprintf(stderr, "ddl-train: %s: cannot write the CSV\n", p->out), rc = 1;
    }
    free(pred);
    free(probs);
    files_free(&f);
    ddl_predictor_close(pr);
    return rc;
}

int tr_predict_db(const tr_predict *p, ddl_comm *comm)
{
    char err[DDL_ERR_BYTES];
    ddl_predict_config pc = {.batch = p->batch > 0 ? p->batch : 64};
    ddl_predictor *pr = NULL;
    int64_t bad = ddl_predictor_open(p->model, &pc, NULL, &pr, err, sizeof err) != DDL_OK;
    if (bad)
        fprintf(stderr, "ddl-train: rank %d: %s\n", comm ? ddl_comm_rank(comm) : 0, err);
    if (comm && ddl_comm_allreduce(comm, &bad, 1, DDL_INT64, DDL_MAX) != DDL_OK)
        fprintf(stderr, "ddl-train: %s\n", ddl_comm_error(comm)), bad = 1;
    int rc = bad ? 1 : db_score("ddl-train", &p->db, pr, comm, pc.batch);
    ddl_predictor_close(pr);
    return rc;
}
