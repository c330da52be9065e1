/* ddl-plot.c - TensorBoard event files to a PNG chart, for those without TensorBoard: loss and
 * accuracy per epoch side by side, one coloured line per run, so several runs compare at a
 * glance. An operand is an event file (a run), or a directory: every directory in it or
 * below it (tools/eventdirs.h: as TensorBoard finds runs) holding events.out.tfevents.* files
 * is a run, labelled by its path relative to the operand (DIR/trial-0003/logs: "trial-0003"),
 * its files read in name order. With --dump it prints every record instead (the tests compare
 * that with what the training program printed), and says where a file ends early or is corrupt.
 *
 *   build/bin/ddl-plot [-o chart.png] [--loss-tag T] [--acc-tag T] [--size WxH] RUN...
 *   build/bin/ddl-plot --dump RUN...
 *
 * Reads files with tools/tfevents.h (both CRCs checked); draws with its own 5x7 font and writes
 * the PNG with libpng. Exit status: 0; 1 when a file cannot be read or holds a corrupt record
 * (a truncated last record is reported and what comes before it is used) or a directory holds
 * no event file (when no operand holds a run, no chart is written); 2 for a bad command line.
 * A diverged run's NaN and infinite values are drawn as marks on a panel's edge, not lines, and
 * said on stderr. */
#include "ddl.h"

#include <ctype.h>
#include <float.h>
#include <getopt.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/canvas.h"
#include "tools/cli.h"
#include "tools/eventdirs.h"
#include "tools/tfevents.h"
#include "tools/timeline_chart.h"

#define USAGE                                                                                       \
    "usage: ddl-plot [OPTION]... RUN...\n"                                                          \
    "       ddl-plot --timeline TRACE.json [-o FILE] [--size WxH]\n"                                 \
    "Draw loss and accuracy per epoch of one or more runs (event files, or directories: every\n"  \
    "directory in or below one holding event files is a run, as ddl-sweep's trial-NNNN/logs)\n"     \
    "into one PNG, one line per run.\n"                                                              \
    "  -o, --output FILE   the chart (default chart.png)\n"                                         \
    "  --loss-tag TAG      left panel (default epoch/train_loss)\n"                                 \
    "  --acc-tag TAG       right panel (default test/accuracy)\n"                                   \
    "  --size WxH          pixels (default 960x400)\n"                                              \
    "  --dump              print every record (step, tag, value) instead of drawing\n"              \
    "  --timeline TRACE    draw a timeline (DDL_TIMELINE's file) instead: a lane per rank, a bar a\n"  \
    "                      span (default timeline.png, 1200 pixels wide; --size's width)\n"          \
    "  --help, --version   this text; the version\n"

/* ---- reading ---- */

typedef struct series {
    double *x, *y;
    size_t n, cap;
} series;

#define PLOT_MAX_RUNS 64 /* per directory operand: a legend line each */

typedef struct run {
    char name[256];
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
    char why[4200];
    FILE *f = tfe_open(path, why, sizeof why);
    if (!f) {
        fprintf(stderr, "ddl-plot: cannot open %s\n", why);
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

/* read_dir: the runs under path (eventdirs.h: its sub-directories too, as TensorBoard finds
 * them) appended to *runs. Returns 0, 1 for an unreadable file, 2 when path holds no event file. */
static int read_dir(const char *path, run **runs, int *n_runs, const char *loss_tag, const char *acc_tag, int dump)
{
    evd_list l = {0};
    int status = 0;
    if (evd_find(path, PLOT_MAX_RUNS, &l) != 0) {
        fprintf(stderr, "ddl-plot: out of memory reading %s\n", path);
        evd_free(&l);
        return 1;
    }
    if (l.truncated)
        fprintf(stderr, "ddl-plot: %s: more than %d runs; the first %d (in name order) are drawn\n", path,
                PLOT_MAX_RUNS, PLOT_MAX_RUNS);
    run *grown = l.n ? (run *)realloc(*runs, (size_t)(*n_runs + l.n) * sizeof(run)) : *runs;
    if (l.n && !grown) {
        evd_free(&l);
        return 1;
    }
    *runs = grown;
    for (int i = 0; i < l.n; i++) {
        run *r = &grown[(*n_runs)++];
        memset(r, 0, sizeof *r);
        snprintf(r->name, sizeof r->name, "%s", l.runs[i].label);
        for (int k = 0; k < l.runs[i].n_files; k++)
            status |= read_file(l.runs[i].files[k], r, loss_tag, acc_tag, dump);
    }
    if (l.n == 0) {
        fprintf(stderr, "ddl-plot: no event files (events.out.tfevents.*) in %s or its sub-directories\n", path);
        status = 2;
    }
    evd_free(&l);
    return status;
}

/* read_run: an event file (one run named by the file), or the runs of a directory. As read_dir. */
static int read_run(const char *path, run **runs, int *n_runs, const char *loss_tag, const char *acc_tag, int dump)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return read_dir(path, runs, n_runs, loss_tag, acc_tag, dump);
    run *grown = (run *)realloc(*runs, (size_t)(*n_runs + 1) * sizeof(run));
    if (!grown)
        return 1;
    *runs = grown;
    run *r = &grown[(*n_runs)++];
    memset(r, 0, sizeof *r);
    const char *base = strrchr(path, '/');
    snprintf(r->name, sizeof r->name, "%s", base && base[1] ? base + 1 : path);
    return read_file(path, r, loss_tag, acc_tag, dump);
}

/* ---- drawing (tools/canvas.h): two line-chart panels with ticks, and a legend ---- */

/* panel: one chart of every run's series (which: 0 loss, 1 accuracy) in the box (x, y, w, h).
 * A diverged run logs NaN and infinities: they take no part in the axes' range (which they would
 * make infinite or NaN), break the line, and are drawn as an x on the top edge (NaN, +inf) or
 * the bottom one (-inf); every pixel coordinate is clamped to the plot, so no line is endless. */
static void panel(canvas *c, const run *runs, int n_runs, int which, const char *title, int x, int y, int w, int h)
{
    static const uint8_t black[3] = {0, 0, 0}, grey[3] = {220, 220, 220};
    double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
    for (int r = 0; r < n_runs; r++) {
        const series *s = which ? &runs[r].acc : &runs[r].loss;
        for (size_t i = 0; i < s->n; i++) {
            xmin = fmin(xmin, s->x[i]), xmax = fmax(xmax, s->x[i]);
            if (isfinite(s->y[i]))
                ymin = fmin(ymin, s->y[i]), ymax = fmax(ymax, s->y[i]);
        }
    }
    if (ymin > ymax) /* no finite value: an axis around 0 */
        ymin = 0, ymax = 1;
    text(c, x + w / 2 - 6 * (int)strlen(title), y, title, black);
    int L = x + 80, T = y + 30, W = w - 100, H = h - 80; /* the plot area */
    fill(c, L, T + H, W, 2, black);
    fill(c, L - 2, T, 2, H + 2, black);
    text(c, L + W / 2 - 30, T + H + 34, "epoch", black);
    if (xmin > xmax) {
        text(c, L + 20, T + H / 2, "no data", black);
        return;
    }
    if (xmax == xmin)
        xmax = xmin + 1;
    double pad = fmin((ymax - ymin) * 0.08, DBL_MAX / 4) + 1e-6;
    ymin = fmax(ymin, -DBL_MAX / 4), ymax = fmin(ymax, DBL_MAX / 4); /* ymax - ymin stays finite */
    ymin -= pad, ymax += pad;
    char lab[32];
    for (int k = 0; k <= 4; k++) { /* y ticks and grid */
        double v = ymin + (ymax - ymin) * k / 4;
        int py = T + H - (int)((double)H * k / 4);
        fill(c, L, py, W, 1, grey);
        snprintf(lab, sizeof lab, "%.3g", v);
        text(c, L - 10 - 12 * (int)strlen(lab), py - 7, lab, black);
    }
    int ticks = (int)(xmax - xmin) < 8 ? (int)(xmax - xmin) : 8;
    for (int k = 0; k <= ticks; k++) { /* x ticks */
        double v = xmin + (xmax - xmin) * k / (ticks ? ticks : 1);
        int px = L + (int)((double)W * (v - xmin) / (xmax - xmin));
        fill(c, px, T + H, 2, 6, black);
        snprintf(lab, sizeof lab, "%.0f", v);
        text(c, px - 6 * (int)strlen(lab), T + H + 10, lab, black);
    }
    for (int r = 0; r < n_runs; r++) {
        const series *s = which ? &runs[r].acc : &runs[r].loss;
        const uint8_t *col = run_colors[r % 8];
        int lx = 0, ly = 0, last = 0; /* the previous finite point, if the previous point was finite */
        for (size_t i = 0; i < s->n; i++) {
            int px = L + (int)((double)W * (s->x[i] - xmin) / (xmax - xmin));
            if (!isfinite(s->y[i])) {
                mark(c, px, s->y[i] < 0 ? T + H : T, col);
                last = 0;
                continue;
            }
            int py = T + H - (int)fmin(fmax((double)H * (s->y[i] - ymin) / (ymax - ymin), -10.0), H + 10.0);
            fill(c, px - 3, py - 3, 7, 7, col);
            if (last)
                line(c, lx, ly, px, py, col);
            lx = px, ly = py, last = 1;
        }
    }
}

/* draw_chart: the two panels and the legend into path. 0 or 1. */
static int draw_chart(const char *path, const run *runs, int n_runs, const char *loss_tag, const char *acc_tag,
                      int width, int height)
{
    static const uint8_t black[3] = {0, 0, 0};
    int legend = 24 * n_runs + 16;
    canvas c = {width, height + legend, (uint8_t *)malloc((size_t)width * (size_t)(height + legend) * 3)};
    if (!c.px)
        return 1;
    memset(c.px, 255, (size_t)c.w * (size_t)c.h * 3);
    panel(&c, runs, n_runs, 0, loss_tag, 0, 10, width / 2, height - 10);
    panel(&c, runs, n_runs, 1, acc_tag, width / 2, 10, width / 2, height - 10);
    for (int r = 0; r < n_runs; r++) {
        fill(&c, 80, height + 8 + 24 * r, 30, 8, run_colors[r % 8]);
        text(&c, 120, height + 4 + 24 * r, runs[r].name, black);
    }
    int rc = write_png(path, &c);
    free(c.px);
    return rc;
}

/* ---- main ---- */

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
                                            {"timeline", required_argument, NULL, 't'},
                                            CLI_HELP_VERSION,
                                            {NULL, 0, NULL, 0}};
    const char *out = NULL, *loss_tag = "epoch/train_loss", *acc_tag = "test/accuracy", *timeline = NULL;
    int dump = 0, width = 0, height = 400;
    cli_start(argv, "ddl-plot");
    for (int c; (c = getopt_long(argc, argv, "ho:", options, NULL)) != -1;)
        switch (c) {
        case 'h': cli_help(USAGE); break;
        case 'V': cli_version(); break;
        case 'o': out = optarg; break;
        case 'l': loss_tag = optarg; break;
        case 'a': acc_tag = optarg; break;
        case 'd': dump = 1; break;
        case 't': timeline = optarg; break;
        case 's':
            if (sscanf(optarg, "%dx%d", &width, &height) != 2 || width < 320 || height < 200 || width > 8000 ||
                height > 8000)
                cli_error("--size: expected WxH, 320x200 to 8000x8000");
            break;
        default: cli_try();
        }
    if (timeline) { /* tools/timeline_chart.h */
        if (optind < argc || dump)
            cli_error("--timeline draws one timeline: no runs, no --dump");
        tl_span *spans = NULL;
        int n = 0, ranks = 0;
        out = out ? out : "timeline.png";
        int rc = tl_read(timeline, &spans, &n, &ranks) || tl_draw(out, spans, n, ranks, width ? width : 1200);
        if (rc == 0)
            printf("ddl-plot: wrote %s (%d spans of %d rank%s)\n", out, n, ranks, ranks == 1 ? "" : "s");
        free(spans);
        return rc;
    }
    out = out ? out : "chart.png";
    width = width ? width : 960;
    if (optind >= argc)
        cli_error("no run given");
    int n_runs = 0, status = 0, missing = 0;
    run *runs = NULL;
    for (int i = optind; i < argc; i++) {
        int rc = read_run(argv[i], &runs, &n_runs, loss_tag, acc_tag, dump);
        missing |= rc == 2;
        status |= rc != 0;
    }
    if (!dump && n_runs == 0) /* nothing to draw: no chart, rather than an empty one */
        fprintf(stderr, "ddl-plot: no run found: %s not written\n", out);
    else if (!dump) {
        for (int i = 0; i < n_runs; i++)
            say_nonfinite(&runs[i], loss_tag, acc_tag);
        int rc = draw_chart(out, runs, n_runs, loss_tag, acc_tag, width, height);
        if (rc == 0) {
            printf("ddl-plot: wrote %s (%d run%s%s)\nddl-plot: runs:", out, n_runs, n_runs == 1 ? "" : "s",
                   missing ? "; an operand held none" : "");
            for (int i = 0; i < n_runs; i++) /* the legend's names, for a reader without the picture */
                printf("%s %s", i ? "," : "", runs[i].name);
            printf("\n");
        }
        status |= rc;
    }
    for (int i = 0; i < n_runs; i++) {
        free(runs[i].loss.x), free(runs[i].loss.y);
        free(runs[i].acc.x), free(runs[i].acc.y);
    }
    free(runs);
    return status;
}
