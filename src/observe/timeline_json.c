/* timeline_json.c - the Chrome trace-event file of a gathered timeline (the "JSON object
 * format" of Google's Trace Event Format, which Perfetto and chrome://tracing load): one process
 * per rank ("rank R", sorted by rank), one complete event ("ph":"X") per span with its step,
 * and its bytes for an all-reduce; times in microseconds from the first span of any rank. The
 * spans of a rank come sorted by start, so every track's timestamps are monotonic. Writes to
 * PATH.tmp and renames, so a reader never sees half a file. */
#include "impl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char *const span_names[] = {"data", "forward", "backward", "allreduce", "optimizer", "wait",
                                         "evaluate", "checkpoint", "user", "regroup"};
static const char *const span_cats[] = {"compute", "compute", "compute", "comm", "compute", "comm",
                                        "compute", "io", "user", "elastic"};

static void write_span(FILE *f, const ddl__span *s, int rank, int64_t origin)
{
    int kind = (int)(s->kind_step >> 48);
    int k = kind >= 0 && kind < (int)(sizeof span_names / sizeof *span_names) ? kind : DDL_SPAN_USER;
    fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":0,\"ts\":%.3f,\"dur\":%.3f,"
               "\"args\":{\"step\":%lld",
            span_names[k], span_cats[k], rank, (double)(s->t0 - origin) / 1e3, (double)(s->t1 - s->t0) / 1e3,
            (long long)(s->kind_step & 0xffffffffffff));
    if (kind == DDL_SPAN_ALLREDUCE)
        fprintf(f, ",\"bytes\":%lld", (long long)s->bytes);
    if (kind == DDL_SPAN_REGROUP)
        fprintf(f, ",\"world\":%lld", (long long)s->bytes);
    fputs("}}", f);
}

int ddl__timeline_json(const char *path, ddl__span *const *spans, const size_t *n, int world, char *err,
                       size_t err_bytes)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "timeline: path too long: %s", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return ddl__errf(err, err_bytes, DDL_EIO, "cannot create %s: %s", tmp, strerror(errno));
    int64_t origin = INT64_MAX;
    for (int r = 0; r < world; r++)
        if (n[r] && spans[r][0].t0 < origin)
            origin = spans[r][0].t0;
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"ddl %s\",\"ranks\":%d},\n"
               "\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,"
               "\"args\":{\"name\":\"rank 0\"}}",
            ddl_version_string(), world);
    for (int r = 0; r < world; r++) {
        if (r > 0)
            fprintf(f, ",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"rank %d\"}}",
                    r, r);
        fprintf(f, ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}}",
                r, r);
        for (size_t i = 0; i < n[r]; i++)
            write_span(f, &spans[r][i], r, origin);
    }
    fputs("\n]}\n", f);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        remove(tmp);
        return ddl__errf(err, err_bytes, DDL_EIO, "cannot write %s", tmp);
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        return ddl__errf(err, err_bytes, DDL_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(e));
    }
    return DDL_OK;
}
