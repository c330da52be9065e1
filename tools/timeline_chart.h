/* timeline_chart.h - ddl-plot --timeline: a run's timeline (DDL_TIMELINE's Chrome trace, as
 * ddl_timeline_write writes it: one event a line) drawn as one lane per rank, each span a bar in
 * its kind's colour, so where the time went, which rank waited for which, and in an elastic run
 * where the world changed (a regroup: a red bar the lane's height) show at a glance. Reads only
 * the lines it knows ("ph":"X" spans and the ranks' names) and says which line it could not read.
 * Static functions, for ddl-plot.c, after tools/canvas.h. */
#ifndef DDL_TOOLS_TIMELINE_CHART_H
#define DDL_TOOLS_TIMELINE_CHART_H

#include <math.h>

typedef struct tl_span {
    int rank, kind;
    double t0, t1; /* ms */
} tl_span;

/* the span names ddl_timeline_write gives, in drawing order: a wait is drawn over its all-reduce */
static const char *const tl_kinds[] = {"data", "forward", "backward", "allreduce", "optimizer", "evaluate",
                                       "checkpoint", "user", "wait", "regroup"};
#define TL_KINDS ((int)(sizeof tl_kinds / sizeof tl_kinds[0]))
static const uint8_t tl_colors[TL_KINDS][3] = {
    {170, 170, 170}, {31, 119, 180}, {44, 160, 44},  {255, 127, 14}, {148, 103, 189},
    {140, 86, 75},   {227, 119, 194}, {188, 189, 34}, {255, 204, 153}, {214, 39, 40}};

/* tl_read: the spans of path into *out (malloc'd), *n of them, over *ranks lanes. 0, or 1 with the
 * reason on stderr. */
static int tl_read(const char *path, tl_span **out, int *n, int *ranks)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "ddl-plot: --timeline %s: cannot open it\n", path);
        return 1;
    }
    size_t cap = 1024;
    tl_span *v = (tl_span *)malloc(cap * sizeof *v);
    char buf[1024], name[32];
    int count = 0, lines = 0, seen_events = 0, bad = 0;
    *ranks = 0;
    while (v && fgets(buf, sizeof buf, f)) {
        lines++;
        if (strstr(buf, "\"traceEvents\""))
            seen_events = 1;
        if (!strstr(buf, "\"ph\":\"X\""))
            continue;
        int pid, tid, kind = -1;
        double ts, dur;
        const char *p = strstr(buf, "\"pid\":");
        if (sscanf(buf, "{\"name\":\"%31[^\"]\"", name) != 1 || !p ||
            sscanf(p, "\"pid\":%d,\"tid\":%d,\"ts\":%lf,\"dur\":%lf", &pid, &tid, &ts, &dur) != 4 || pid < 0 ||
            pid > 4095 || !isfinite(ts) || !isfinite(dur) || dur < 0) {
            fprintf(stderr, "ddl-plot: --timeline %s: line %d is not a span it can read: %.80s\n", path, lines, buf);
            bad = 1;
            break;
        }
        for (int k = 0; k < TL_KINDS; k++)
            if (!strcmp(name, tl_kinds[k]))
                kind = k;
        if (kind < 0)
            kind = 7; /* another's: drawn as the caller's own */
        if ((size_t)count == cap) {
            tl_span *w = (tl_span *)realloc(v, 2 * cap * sizeof *v);
            if (!w)
                break;
            v = w, cap *= 2;
        }
        v[count++] = (tl_span){pid, kind, ts * 1e-3, (ts + dur) * 1e-3};
        *ranks = pid + 1 > *ranks ? pid + 1 : *ranks;
    }
    fclose(f);
    if (!bad && (!seen_events || count == 0)) {
        fprintf(stderr, "ddl-plot: --timeline %s: %s\n", path,
                seen_events ? "no spans in it" : "not a timeline (no traceEvents: write one with DDL_TIMELINE)");
        bad = 1;
    }
    if (bad || !v) {
        free(v);
        return 1;
    }
    *out = v;
    *n = count;
    return 0;
}

/* tl_step: a tick spacing of about span / 8 ms: 1, 2 or 5 times a power of ten. */
static double tl_step(double span)
{
    double raw = span / 8, p = pow(10, floor(log10(raw > 0 ? raw : 1)));
    return raw <= p ? p : raw <= 2 * p ? 2 * p : raw <= 5 * p ? 5 * p : 10 * p;
}

/* tl_draw: the lanes into a PNG at path, width pixels wide. 0 or 1. */
static int tl_draw(const char *path, const tl_span *s, int n, int ranks, int width)
{
    const uint8_t black[3] = {0, 0, 0}, grey[3] = {200, 200, 200}, white[3] = {255, 255, 255};
    int lane = 34, left = 110, right = 20, top = 50, axis = 44, legend = 70;
    canvas c = {width, top + ranks * lane + axis + legend, NULL};
    c.px = (uint8_t *)malloc((size_t)c.w * (size_t)c.h * 3);
    if (!c.px) {
        fprintf(stderr, "ddl-plot: --timeline: no memory for a %dx%d picture\n", c.w, c.h);
        return 1;
    }
    fill(&c, 0, 0, c.w, c.h, white);
    double t0 = s[0].t0, t1 = s[0].t1;
    for (int i = 1; i < n; i++)
        t0 = s[i].t0 < t0 ? s[i].t0 : t0, t1 = s[i].t1 > t1 ? s[i].t1 : t1;
    if (t1 <= t0)
        t1 = t0 + 1;
    int plot_w = c.w - left - right;
    double ms_px = (t1 - t0) / plot_w;
    char label[64];
    snprintf(label, sizeof label, "timeline  %d rank%s  %.1f ms", ranks, ranks == 1 ? "" : "s", t1 - t0);
    text(&c, left, 14, label, black);
    double step = tl_step(t1 - t0);
    for (double t = 0; t <= t1 - t0 + 1e-9; t += step) { /* ticks: ms from the first span */
        int x = left + (int)(t / ms_px);
        fill(&c, x, top, 1, ranks * lane, grey);
        snprintf(label, sizeof label, "%g", t);
        text(&c, x - 6 * (int)strlen(label), top + ranks * lane + 8, label, black);
    }
    text(&c, left + plot_w - 24, top + ranks * lane + 26, "ms", black);
    for (int r = 0; r < ranks; r++) {
        snprintf(label, sizeof label, "rank %d", r);
        text(&c, 8, top + r * lane + lane / 2 - 7, label, black);
    }
    for (int k = 0; k < TL_KINDS; k++) /* kinds in order: waits over their all-reduces, regroups last */
        for (int i = 0; i < n; i++) {
            if (s[i].kind != k)
                continue;
            int x0 = left + (int)((s[i].t0 - t0) / ms_px), x1 = left + (int)((s[i].t1 - t0) / ms_px);
            int y = top + s[i].rank * lane + 4, h = lane - 8;
            if (k == 8) /* a wait: the lower half of its all-reduce */
                y += h / 2, h -= h / 2;
            if (k == 9) /* a regroup: the whole lane */
                y -= 3, h += 6;
            fill(&c, x0, y, x1 > x0 ? x1 - x0 : 1, h, tl_colors[k]);
        }
    int x = left, y = top + ranks * lane + axis;
    for (int k = 0; k < TL_KINDS; k++) {
        int w = 24 + 12 * (int)strlen(tl_kinds[k]) + 20;
        if (x + w > c.w - right)
            x = left, y += 24;
        fill(&c, x, y, 16, 14, tl_colors[k]);
        x += 22 + text(&c, x + 22, y, tl_kinds[k], black) + 14;
    }
    line(&c, left, top + ranks * lane, left + plot_w, top + ranks * lane, black);
    int rc = write_png(path, &c);
    free(c.px);
    return rc;
}

#endif
