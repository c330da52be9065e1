/* results.c - ddl-sweep's trials and DIR/results.csv: one row per finished trial (its
 * values, the metric, status, exit code, wall time, epochs run, slot, attempts), appended under
 * an flock and fsync'ed as each trial ends, so that a crash loses no finished trial and Slurm
 * array tasks (--run-index) can share the file; read back for --resume; the final table sorted
 * by the metric. Values hold no commas or quotes (space.c refuses them): no CSV quoting.
 * A parameter named like one of the file's own columns (--grid epochs=1,3: "epochs" is also the
 * epochs a trial ran) gets the column "param/NAME", and a metric named so "metric/NAME": every
 * column name is unique, as pandas and spreadsheets want. A trial that ran to its end (or to an
 * ASHA stop) but diverged (test accuracy at chance, or a loss NaN or infinite) has the status
 * "diverged", and is never the best. */
#include "sweep.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/outfile.h"

/* the states' names in results.csv, in TRIAL_* order */
static const char *const trial_status[] = {"pending", "running", "ok", "stopped", "failed", "usage", "no-metric"};

/* the file's own columns, beside the parameters and the metric */
static const char *const results_fixed[] = {"trial", "status", "exit", "wall_s", "epochs", "slot", "attempts"};

static int results_is_fixed(const char *name)
{
    for (size_t i = 0; i < sizeof results_fixed / sizeof results_fixed[0]; i++)
        if (!strcmp(name, results_fixed[i]))
            return 1;
    return 0;
}

/* results_metric_col: the metric's column: its name, "metric/NAME" if a column of the file has it. */
void results_metric_col(const char *metric, char *out, size_t cap)
{
    snprintf(out, cap, "%s%s", results_is_fixed(metric) ? "metric/" : "", metric);
}

/* results_param_col: parameter i's column: its name, "param/NAME" if the file or the metric has it. */
void results_param_col(const sweep_space *s, int i, const char *metric, char *out, size_t cap)
{
    const char *n = s->p[i].name;
    char m[SWEEP_VALUE_BYTES + 8];
    results_metric_col(metric, m, sizeof m);
    snprintf(out, cap, "%s%s", results_is_fixed(n) || !strcmp(n, m) ? "param/" : "", n);
}

/* results_header: "trial,P1,...,METRIC,status,exit,wall_s,epochs,slot,attempts". */
void results_header(const sweep_space *s, const char *metric, char *out, size_t cap)
{
    char col[SWEEP_VALUE_BYTES + 16];
    snprintf(out, cap, "trial");
    for (int i = 0; i < s->n; i++) {
        results_param_col(s, i, metric, col, sizeof col);
        snprintf(out + strlen(out), cap - strlen(out), ",%s", col);
    }
    results_metric_col(metric, col, sizeof col);
    snprintf(out + strlen(out), cap - strlen(out), ",%s,status,exit,wall_s,epochs,slot,attempts", col);
}

const char *results_status(const sweep_trial *t)
{
    return t->diverged ? "diverged" : trial_status[t->state];
}

void results_row(const sweep_space *s, const sweep_trial *t, char *out, size_t cap)
{
    snprintf(out, cap, "%ld", t->id);
    for (int i = 0; i < s->n; i++)
        snprintf(out + strlen(out), cap - strlen(out), ",%s", t->values[i]);
    if (t->has_metric)
        snprintf(out + strlen(out), cap - strlen(out), ",%.6g", t->metric);
    else
        snprintf(out + strlen(out), cap - strlen(out), ",");
    snprintf(out + strlen(out), cap - strlen(out), ",%s,%d,%.1f,%d,%s,%d", results_status(t), t->exit_code,
             t->wall_s, t->epochs, t->slot, t->attempts);
}

/* results_append: the row (and the header first if the file is empty), under an exclusive flock,
 * then fsync: on disk before the next trial starts; never through a link (outfile.h). Returns
 * 0, or -1 with why. */
int results_append(const char *path, const char *header, const char *row, char *why, size_t why_bytes)
{
    int fd = outfile_append(path, why, why_bytes);
    if (fd < 0)
        return -1;
    struct stat st;
    char buf[8192];
    int n = 0, rc = flock(fd, LOCK_EX) == 0 && fstat(fd, &st) == 0 ? 0 : -1;
    if (rc == 0 && st.st_size == 0)
        n = snprintf(buf, sizeof buf, "%s\n", header);
    if (row)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "%s\n", row);
    if (rc == 0 && n > 0 && write(fd, buf, (size_t)n) != n)
        rc = -1;
    if (rc == 0 && fsync(fd) != 0)
        rc = -1;
    if (rc)
        snprintf(why, why_bytes, "%s: %s", path, strerror(errno));
    close(fd); /* drops the lock */
    return rc;
}

/* results_load: the rows of an existing results.csv back into trials (matched by trial number and
 * values): every row but "failed" is final, so --resume skips it. A file written by another search
 * (another header) is refused. Returns the number of rows taken; -1: no file. */
long results_load(const char *path, const char *header, const sweep_space *s, sweep_trial *trials, long n)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    static char line[8192];
    long taken = 0;
    for (int ln = 1; fgets(line, sizeof line, f); ln++) {
        line[strcspn(line, "\r\n")] = '\0';
        if (ln == 1) {
            if (strcmp(line, header))
                sweep_die("%s was written by another search: its columns are\n  %s\nnot\n  %s\n(give another --out, "
                          "or remove the file)", path, line, header);
            continue;
        }
        char *f_[SWEEP_MAX_PARAMS + 8], *rest = line;
        int k = 0;
        while (k < s->n + 8 && rest) /* strsep keeps empty fields (a missing metric) */
            f_[k++] = strsep(&rest, ",");
        k += rest != NULL; /* more fields than a row has */
        char *end;
        long id = strtol(f_[0], &end, 10);
        if (k != s->n + 8 || *end || id < 0 || id >= n) {
            sweep_warn("%s line %d: not a row of this search; ignored", path, ln);
            continue;
        }
        sweep_trial *t = &trials[id];
        int same = 1;
        for (int i = 0; i < s->n; i++)
            same &= !strcmp(f_[1 + i], t->values[i]);
        char **r = f_ + 1 + s->n; /* metric, status, exit, wall_s, epochs, slot, attempts */
        int st = TRIAL_OK, diverged = !strcmp(r[1], "diverged");
        while (!diverged && st <= TRIAL_NO_METRIC && strcmp(trial_status[st], r[1]))
            st++;
        if (!same || st > TRIAL_NO_METRIC) {
            sweep_warn("%s line %d: trial %ld has other values or status here; ignored", path, ln, id);
            continue;
        }
        if (st == TRIAL_FAILED) /* a crash may not happen again: run it */
            continue;
        t->state = st;
        t->diverged = diverged;
        t->has_metric = r[0][0] != '\0';
        t->metric = t->has_metric ? strtod(r[0], NULL) : 0;
        t->exit_code = atoi(r[2]);
        t->wall_s = strtod(r[3], NULL);
        t->epochs = atoi(r[4]);
        snprintf(t->slot, sizeof t->slot, "%s", r[5]);
        t->attempts = atoi(r[6]);
        t->resumed = 1;
        taken++;
    }
    fclose(f);
    return taken;
}

/* ---- the final table ---- */

static int table_minimize; /* qsort's comparison has no user pointer */

/* table_order: ok trials by metric (best first), then stopped ones by metric, then diverged
 * ones, then the rest. */
static int table_order(const void *a, const void *b)
{
    const sweep_trial *x = *(sweep_trial *const *)a, *y = *(sweep_trial *const *)b;
    int gx = x->diverged ? 2 : x->state == TRIAL_OK ? 0 : x->state == TRIAL_STOPPED ? 1 : 3;
    int gy = y->diverged ? 2 : y->state == TRIAL_OK ? 0 : y->state == TRIAL_STOPPED ? 1 : 3;
    if (gx != gy)
        return gx - gy;
    if (gx < 2 && x->metric != y->metric)
        return (x->metric < y->metric) == table_minimize ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* results_table: every trial that has a result, sorted; returns the best ok trial or NULL. */
const sweep_trial *results_table(const sweep_space *s, sweep_trial *trials, long n, const char *metric,
                                 int minimize)
{
    sweep_trial **order = malloc(sizeof *order * (size_t)(n ? n : 1));
    long m = 0;
    if (!order)
        sweep_fatal("out of memory");
    for (long i = 0; i < n; i++)
        if (trials[i].state >= TRIAL_OK)
            order[m++] = &trials[i];
    table_minimize = minimize;
    qsort(order, (size_t)m, sizeof *order, table_order);
    char col[SWEEP_VALUE_BYTES + 16];
    printf("\n%-6s", "trial");
    for (int i = 0; i < s->n; i++) {
        results_param_col(s, i, metric, col, sizeof col);
        printf(" %-12s", col);
    }
    results_metric_col(metric, col, sizeof col);
    printf(" %-10s %-9s %5s %8s %6s  %s\n", col, "status", "exit", "wall_s", "epochs", "slot");
    for (long k = 0; k < m; k++) {
        const sweep_trial *t = order[k];
        printf("%-6ld", t->id);
        for (int i = 0; i < s->n; i++)
            printf(" %-12s", t->values[i]);
        char mv[32] = "-";
        if (t->has_metric)
            snprintf(mv, sizeof mv, "%.4f", t->metric);
        printf(" %-10s %-9s %5d %8.1f %6d  %s%s\n", mv, results_status(t), t->exit_code, t->wall_s, t->epochs,
               t->slot, t->resumed ? " (earlier run)" : "");
    }
    const sweep_trial *best = m && order[0]->state == TRIAL_OK && !order[0]->diverged ? order[0] : NULL;
    free(order);
    return best;
}
