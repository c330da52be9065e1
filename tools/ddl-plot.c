/* ddl-plot.c - TensorBoard event files to a PNG chart, for those without TensorBoard: loss and
 * accuracy per epoch side by side, one coloured line per run, so several runs compare at a
 * glance. Each operand is a run: an event file, or a directory whose events.out.tfevents.*
 * files are read in name order. With --dump it prints every record instead (the tests compare
 * that with what the training program printed), and says where a file ends early or is corrupt.
 *
 *   build/bin/ddl-plot [-o chart.png] [--loss-tag T] [--acc-tag T] [--size WxH] RUN...
 *   build/bin/ddl-plot --dump RUN...
 *
 * Reads files with tools/tfevents.h (both CRCs checked); draws with its own 5x7 font and writes
 * the PNG with libpng. Exit status: 0; 1 when a file cannot be read or holds a corrupt record
 * (a truncated last record is reported and what comes before it is used); 2 for a bad command
 * line. A diverged run's NaN and infinite values are drawn as marks on a panel's edge, not
 * lines, and said on stderr. */
#include "ddl.h"

#include <dirent.h>
#include <getopt.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/cli.h"
#include "tools/tfevents.h"

#define USAGE                                                                                       \
    "usage: ddl-plot [OPTION]... RUN...\n"                                                          \
    "Draw loss and accuracy per epoch of one or more runs (event files, or directories of them,\n" \
    "as lenet --logdir DIR writes) into one PNG, one line per run.\n"                               \
    "  -o, --output FILE   the chart (default chart.png)\n"                                         \
    "  --loss-tag TAG      left panel (default epoch/train_loss)\n"                                 \
    "  --acc-tag TAG       right panel (default test/accuracy)\n"                                   \
    "  --size WxH          pixels (default 960x400)\n"                                              \
    "  --dump              print every record (step, tag, value) instead of drawing\n"              \
    "  --help, --version   this text; the version\n"

/* ---- reading ---- */

typedef struct series {
    double *x, *y;
    size_t n, cap;
} series;

typedef struct run {
    char name[64];
    series loss, acc;
} run;

static int add_point(series *s, double x, double y)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        double *nx = (double *)realloc(s->x, cap * sizeof(double)), *ny;
        if (!nx)
            return -1;
        s->x = nx;
        ny = (double *)realloc(s->y, cap * sizeof(double));
        if (!ny)
            return -1;
        s->y = ny;
        s->cap = cap;
    }
    s->x[s->n] = x;
    s->y[s->n++] = y;
    return 0;
}

static const char *tfe_what(int rc)
{
    switch (rc) {
    case TFE_TRUNCATED: return "truncated record";
    case TFE_BAD_CRC: return "CRC mismatch";
    case TFE_BAD_EVENT: return "malformed Event";
    default: return "record too large";
    }
}

/* read_file: every record of path, printed (dump) or added to r. Returns 0, or 1 for an
 * unreadable file or a corrupt record; a truncated last record is only reported. */
static int read_file(const char *path, run *r, const char *loss_tag, const char *acc_tag, int dump)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "ddl-plot: cannot open %s\n", path);
        return 1;
    }
    unsigned char *buf = NULL;
    size_t cap = 0, records = 0;
    tfe_event e;
    int rc, status = 0;
    while ((rc = tfe_next(f, &e, &buf, &cap)) == TFE_EVENT) {
        records++;
        if (dump && e.kind == TFE_VERSION)
            printf("%s: version %s\n", path, e.text);
        else if (dump && e.kind == TFE_SCALAR)
            printf("%s: step %lld wall %.3f scalar %s %.9g\n", path, (long long)e.step, e.wall_time, e.text, e.value);
        else if (dump && e.kind == TFE_IMAGE)
            printf("%s: step %lld wall %.3f image %s %dx%d colorspace %d %zu bytes%s\n", path, (long long)e.step,
                   e.wall_time, e.text, e.width, e.height, e.colorspace, e.image_bytes,
                   memcmp(e.png_head, "\x89PNG\r\n\x1a\n", 8) == 0 ? " png" : "");
        if (e.kind == TFE_SCALAR && strcmp(e.text, loss_tag) == 0 && add_point(&r->loss, (double)e.step, e.value))
            status = 1;
        if (e.kind == TFE_SCALAR && strcmp(e.text, acc_tag) == 0 && add_point(&r->acc, (double)e.step, e.value))
            status = 1;
    }
    if (rc != TFE_END) {
        fprintf(stderr, "ddl-plot: %s: %s at byte %llu, after %zu whole records\n", path, tfe_what(rc),
                (unsigned long long)e.offset, records);
        status = rc == TFE_TRUNCATED ? status : 1;
    }
    if (dump)
        printf("%s: %zu records%s\n", path, records, rc == TFE_END ? "" : rc == TFE_TRUNCATED ? ", truncated" : ", corrupt");
    free(buf);
    fclose(f);
    return status;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* read_run: a file, or the event files of a directory in name order. */
static int read_run(const char *path, run *r, const char *loss_tag, const char *acc_tag, int dump)
{
    const char *base = strrchr(path, '/');
    snprintf(r->name, sizeof r->name, "%s", base && base[1] ? base + 1 : path);
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return read_file(path, r, loss_tag, acc_tag, dump);
    DIR *d = opendir(path);
    if (!d) {
        fprintf(stderr, "ddl-plot: cannot open %s\n", path);
        return 1;
    }
    char *names[1024];
    int n = 0, status = 0;
    for (struct dirent *de; (de = readdir(d)) && n < 1024;)
        if (strstr(de->d_name, "tfevents") && (names[n] = (char *)malloc(strlen(path) + strlen(de->d_name) + 2)))
            sprintf(names[n++], "%s/%s", path, de->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    for (int i = 0; i < n; i++) {
        status |= read_file(names[i], r, loss_tag, acc_tag, dump);
        free(names[i]);
    }
    if (n == 0)
        fprintf(stderr, "ddl-plot: no event files in %s\n", path);
    return status | (n == 0);
}

#include "tools/plot_draw.h"

/* say_nonfinite: a note for each series of r holding NaN or infinities (a diverged run). */
static void say_nonfinite(const run *r, const char *loss_tag, const char *acc_tag)
{
    for (int k = 0; k < 2; k++) {
        const series *s = k ? &r->acc : &r->loss;
        size_t bad = 0;
        for (size_t i = 0; i < s->n; i++)
            bad += !isfinite(s->y[i]);
        if (bad)
            fprintf(stderr, "ddl-plot: %s: %zu value%s of %s %s NaN or infinite (diverged?): drawn as x on the "
                    "panel's edge\n", r->name, bad, bad == 1 ? "" : "s", k ? acc_tag : loss_tag, bad == 1 ? "is" : "are");
    }
}

int main(int argc, char **argv)
{
    static const struct option options[] = {{"output", required_argument, NULL, 'o'},
                                            {"loss-tag", required_argument, NULL, 'l'},
                                            {"acc-tag", required_argument, NULL, 'a'},
                                            {"size", required_argument, NULL, 's'},
                                            {"dump", no_argument, NULL, 'd'},
                                            CLI_HELP_VERSION,
                                            {NULL, 0, NULL, 0}};
    const char *out = "chart.png", *loss_tag = "epoch/train_loss", *acc_tag = "test/accuracy";
    int dump = 0, width = 960, height = 400;
    cli_start(argv, "ddl-plot");
    for (int c; (c = getopt_long(argc, argv, "ho:", options, NULL)) != -1;)
        switch (c) {
        case 'h': cli_help(USAGE); break;
        case 'V': cli_version(); break;
        case 'o': out = optarg; break;
        case 'l': loss_tag = optarg; break;
        case 'a': acc_tag = optarg; break;
        case 'd': dump = 1; break;
        case 's':
            if (sscanf(optarg, "%dx%d", &width, &height) != 2 || width < 320 || height < 200 || width > 8000 ||
                height > 8000)
                cli_error("--size: expected WxH, 320x200 to 8000x8000");
            break;
        default: cli_try();
        }
    if (optind >= argc)
        cli_error("no run given");
    int n_runs = argc - optind, status = 0;
    run *runs = (run *)calloc((size_t)n_runs, sizeof(run));
    if (!runs)
        return 1;
    for (int i = 0; i < n_runs; i++)
        status |= read_run(argv[optind + i], &runs[i], loss_tag, acc_tag, dump);
    if (!dump) {
        for (int i = 0; i < n_runs; i++)
            say_nonfinite(&runs[i], loss_tag, acc_tag);
        int rc = draw_chart(out, runs, n_runs, loss_tag, acc_tag, width, height);
        if (rc == 0)
            printf("ddl-plot: wrote %s (%d run%s)\n", out, n_runs, n_runs == 1 ? "" : "s");
        status |= rc;
    }
    for (int i = 0; i < n_runs; i++) {
        free(runs[i].loss.x), free(runs[i].loss.y);
        free(runs[i].acc.x), free(runs[i].acc.y);
    }
    free(runs);
    return status;
}
