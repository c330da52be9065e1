/* test_events.c - ddl_summary_writer against a second implementation (tools/tfevents.h, its own
 * CRC-32C): every record's two CRCs, the first Event's file_version, scalars and an image
 * decoded back; a file cut at every byte of its last record still gives every earlier record;
 * a write that fails (file size limit) leaves only whole records and is sticky; the file name.
 * And ddl_timeline on one process: spans kept, dropped past max_spans, out-of-range steps
 * ignored, a JSON file written. */
#include "ddl.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "check.h"
#include "tools/tfevents.h"

/* read_all: every event of path into ev (up to max); returns the count; *end the last status. */
static int read_all(const char *path, tfe_event *ev, int max, int *end)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return *end = -100, 0;
    unsigned char *buf = NULL;
    size_t cap = 0;
    int n = 0, rc;
    tfe_event e;
    while ((rc = tfe_next(f, &e, &buf, &cap)) == TFE_EVENT)
        if (n < max)
            ev[n++] = e;
    *end = rc;
    free(buf);
    fclose(f);
    return n;
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static void test_writer(const char *dir)
{
    char err[DDL_ERR_BYTES];
    ddl_summary_writer *w = NULL;
    CHECK(ddl_summary_writer_create(dir, NULL, &w, err, sizeof err) == DDL_OK);
    if (!w)
        return;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char want[512];
    snprintf(want, sizeof want, ".%s.%ld", host, (long)getpid());
    const char *path = ddl_summary_writer_path(w);
    CHECK(strstr(path, "/events.out.tfevents.") != NULL);
    CHECK(strlen(path) > strlen(want) && strcmp(path + strlen(path) - strlen(want), want) == 0);
    CHECK(file_size(path) > 0); /* the version record is written at once */
    for (int i = 0; i < 100; i++)
        CHECK(ddl_summary_writer_scalar(w, i % 2 ? "train/loss" : "test/accuracy", i * 10, 0.5 + i * 0.25) == DDL_OK);
    uint8_t px[6 * 4 * 3];
    for (int i = 0; i < (int)sizeof px; i++)
        px[i] = (uint8_t)(i * 7);
    int img = ddl_summary_writer_image(w, "test/scenes", 7, px, 6, 4, 3);
    CHECK(img == DDL_OK || img == DDL_ENOTSUP);
    CHECK(ddl_summary_writer_scalar(w, "", 1, 1.0) == DDL_EINVAL);
    CHECK(ddl_summary_writer_image(w, "x", 1, px, 0, 4, 3) == DDL_EINVAL);
    CHECK(ddl_summary_writer_flush(w) == DDL_OK);
    CHECK(ddl_summary_writer_bytes(w) == (uint64_t)file_size(path));

    static tfe_event ev[200];
    int end, n = read_all(path, ev, 200, &end);
    CHECK(end == TFE_END);
    CHECK(n == 101 + (img == DDL_OK));
    CHECK(ev[0].kind == TFE_VERSION && strcmp(ev[0].text, "brain.Event:2") == 0);
    CHECK(ev[0].wall_time > 1.6e9);
    CHECK(ev[3].kind == TFE_SCALAR && strcmp(ev[3].text, "test/accuracy") == 0 && ev[3].step == 20);
    CHECK_NEAR(ev[3].value, 1.0, 1e-7);
    CHECK(ev[100].kind == TFE_SCALAR && strcmp(ev[100].text, "train/loss") == 0 && ev[100].step == 990);
    CHECK_NEAR(ev[100].value, 25.25, 1e-5);
    CHECK(ev[1].step == 0); /* proto3 leaves step 0 out: the reader's default */
    if (img == DDL_OK) {
        CHECK(ev[101].kind == TFE_IMAGE && strcmp(ev[101].text, "test/scenes") == 0 && ev[101].step == 7);
        CHECK(ev[101].height == 6 && ev[101].width == 4 && ev[101].colorspace == 3);
        CHECK(memcmp(ev[101].png_head, "\x89PNG\r\n\x1a\n", 8) == 0);
    }

    /* a copy cut inside the last record: every earlier record reads, the end is reported */
    long size = file_size(path);
    char cut[4096];
    snprintf(cut, sizeof cut, "%s/cut", dir);
    FILE *in = fopen(path, "rb");
    unsigned char *all = (unsigned char *)malloc((size_t)size);
    CHECK(in && all && fread(all, 1, (size_t)size, in) == (size_t)size);
    if (in)
        fclose(in);
    long last = (long)ev[n - 1].offset;
    int cuts_ok = 1;
    for (long at = last + 1; at < size && all; at++) {
        FILE *o = fopen(cut, "wb");
        fwrite(all, 1, (size_t)at, o);
        fclose(o);
        int m = read_all(cut, ev, 200, &end);
        cuts_ok &= m == n - 1 && end == TFE_TRUNCATED;
    }
    CHECK(cuts_ok);
    /* a flipped bit in a record's data is caught by its CRC */
    if (all) {
        all[last + 14] ^= 1;
        FILE *o = fopen(cut, "wb");
        fwrite(all, 1, (size_t)size, o);
        fclose(o);
        CHECK(read_all(cut, ev, 200, &end) == n - 1 && end == TFE_BAD_CRC);
    }
    free(all);
    remove(cut);

    /* a failing write (the file may not grow past 300 more bytes): cut back to whole records,
     * sticky, and what was written before is intact */
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = (rlim_t)(size + 300);
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    int rc = DDL_OK;
    for (int i = 0; i < 50 && rc == DDL_OK; i++)
        rc = ddl_summary_writer_scalar(w, "train/loss", 2000 + i, i);
    if (rc == DDL_OK)
        rc = ddl_summary_writer_flush(w);
    CHECK(rc == DDL_EIO);
    CHECK(strstr(ddl_summary_writer_error(w), "write") != NULL);
    CHECK(ddl_summary_writer_scalar(w, "train/loss", 3000, 1.0) == DDL_EIO); /* sticky */
    CHECK(ddl_summary_writer_flush(w) == DDL_EIO);
    setrlimit(RLIMIT_FSIZE, &old);
    n = read_all(path, ev, 200, &end);
    CHECK(end == TFE_END);
    CHECK(n == 101 + (img == DDL_OK));
    CHECK(file_size(path) == size);
    ddl_summary_writer_destroy(w);

    CHECK(ddl_summary_writer_create("/proc/no/such/dir", NULL, &w, err, sizeof err) == DDL_EIO && w == NULL);
    CHECK(strstr(err, "/proc/no/such/dir") != NULL);
}

static void test_timeline(const char *dir)
{
    char err[DDL_ERR_BYTES], path[4096];
    ddl_timeline *tl = NULL;
    ddl_timeline_config tc = {.first_step = 2, .last_step = 3, .max_spans = 4};
    CHECK(ddl_timeline_create(&tc, NULL, &tl, err, sizeof err) == DDL_OK);
    tc.max_spans = 0;
    ddl_timeline *bad = NULL;
    CHECK(ddl_timeline_create(&tc, NULL, &bad, err, sizeof err) == DDL_EINVAL && bad == NULL);
    if (!tl)
        return;
    int64_t t = ddl_timeline_now();
    for (int step = 1; step <= 4; step++)
        for (int k = DDL_SPAN_DATA; k <= DDL_SPAN_ALLREDUCE; k++)
            ddl_timeline_span(tl, k, step, t + step * 1000 + k * 100, t + step * 1000 + k * 100 + 50, 8);
    CHECK(ddl_timeline_wants(tl, 2) && !ddl_timeline_wants(tl, 4) && !ddl_timeline_wants(NULL, 2));
    CHECK(ddl_timeline_count(tl) == 4);
    CHECK(ddl_timeline_dropped(tl) == 4);
    snprintf(path, sizeof path, "%s/tl.json", dir);
    CHECK(ddl_timeline_write(tl, NULL, path, err, sizeof err) == DDL_OK);
    FILE *f = fopen(path, "r");
    char buf[8192] = "";
    size_t got = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[got] = 0;
    CHECK(strstr(buf, "\"traceEvents\"") != NULL);
    CHECK(strstr(buf, "\"step\":3") == NULL); /* step 3's spans found it full */
    CHECK(strstr(buf, "\"name\":\"allreduce\"") != NULL && strstr(buf, "\"bytes\":8") != NULL);
    CHECK(strstr(buf, "\"name\":\"backward\"") != NULL && strstr(buf, "\"step\":2") != NULL);
    CHECK(strstr(buf, "\"step\":1") == NULL);
    ddl_timeline_destroy(tl);
}

int main(void)
{
    char dir[] = "/tmp/ddl_events_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char sub[64];
    snprintf(sub, sizeof sub, "%s/run", dir);
    test_writer(sub);
    test_timeline(dir);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    return TEST_END();
}
