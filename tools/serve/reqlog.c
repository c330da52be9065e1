/* reqlog.c - the inference log of --log-requests FILE: one JSON line per predict or infer
 * request (time, model, the version that answered, status, the input's size and CRC-32C, the
 * answer kept short, latency), as Hopsworks' and KServe's loggers keep one. A request only formats
 * its line and copies it into a bounded queue; a writer thread of its own writes the file, so a
 * slow disk or a stalled pipe never holds a request: when the queue is full the line is dropped
 * and counted (/metrics). The file is moved to FILE.1 (the one before replaced) when the next
 * line would take it past --log-max-mb; a FILE that is not a regular file (a pipe, /dev/stdout)
 * is never moved. */
#include "serve.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LINE 512      /* bytes of one line at most (the answer is kept short to fit) */
#define CLOSE_WAIT_S 2 /* at close, how long the writer may take to write what is queued */

static struct {
    char path[1024];
    size_t max_bytes;
    int fd, regular;
    size_t size;       /* of the file now (the writer's) */
    pthread_mutex_t lock;
    pthread_cond_t more, done;
    char *lines;       /* (cap, LINE) */
    uint16_t *lens;
    int cap, head, count;
    int stop, finished, on;
    pthread_t writer;
    _Atomic uint64_t written, dropped, rotated, failed;
} lg = {.lock = PTHREAD_MUTEX_INITIALIZER, .more = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER,
        .fd = -1};

/* ---- the writer ---- */

static int open_file(char *err, size_t err_bytes)
{
    lg.fd = open(lg.path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    struct stat st;
    if (lg.fd < 0 || fstat(lg.fd, &st) != 0) {
        snprintf(err, err_bytes, "--log-requests %s: %s", lg.path, strerror(errno));
        return -1;
    }
    lg.regular = S_ISREG(st.st_mode);
    lg.size = lg.regular ? (size_t)st.st_size : 0;
    return 0;
}

/* rotate: FILE becomes FILE.1 (replacing it) and a new FILE is started. */
static void rotate(void)
{
    char old[1100], err[1200];
    snprintf(old, sizeof old, "%s.1", lg.path);
    close(lg.fd);
    lg.fd = -1;
    if (rename(lg.path, old) != 0)
        fprintf(stderr, "ddl-serve: --log-requests: cannot move %s to %s: %s\n", lg.path, old, strerror(errno));
    if (open_file(err, sizeof err) != 0)
        fprintf(stderr, "ddl-serve: %s; the log stops\n", err);
    atomic_fetch_add(&lg.rotated, 1);
}

static void write_line(const char *line, size_t n)
{
    if (lg.regular && lg.size > 0 && lg.size + n > lg.max_bytes)
        rotate();
    for (size_t at = 0; lg.fd >= 0 && at < n;) {
        ssize_t k = write(lg.fd, line + at, n - at);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            atomic_fetch_add(&lg.failed, 1);
            return;
        }
        at += (size_t)k;
    }
    lg.size += n;
    atomic_fetch_add_explicit(&lg.written, 1, memory_order_relaxed);
}

static void *writer(void *arg)
{
    (void)arg;
    char line[LINE];
    pthread_mutex_lock(&lg.lock);
    for (;;) {
        while (!lg.count && !lg.stop)
            pthread_cond_wait(&lg.more, &lg.lock);
        if (!lg.count)
            break;
        size_t n = lg.lens[lg.head];
        memcpy(line, lg.lines + (size_t)lg.head * LINE, n);
        lg.head = (lg.head + 1) % lg.cap, lg.count--;
        pthread_mutex_unlock(&lg.lock); /* the file is written without the lock: requests never wait on it */
        write_line(line, n);
        pthread_mutex_lock(&lg.lock);
    }
    lg.finished = 1;
    pthread_cond_signal(&lg.done);
    pthread_mutex_unlock(&lg.lock);
    return NULL;
}

int sv_reqlog_open(const char *path, size_t max_bytes, int queue_lines, char *err, size_t err_bytes)
{
    if (strlen(path) >= sizeof lg.path) {
        snprintf(err, err_bytes, "--log-requests: a path under %zu bytes", sizeof lg.path);
        return -1;
    }
    snprintf(lg.path, sizeof lg.path, "%s", path);
    lg.max_bytes = max_bytes;
    lg.cap = queue_lines;
    lg.lines = malloc((size_t)queue_lines * LINE);
    lg.lens = malloc((size_t)queue_lines * sizeof *lg.lens);
    if (!lg.lines || !lg.lens) {
        snprintf(err, err_bytes, "--log-requests: no memory for a queue of %d lines", queue_lines);
        return -1;
    }
    if (open_file(err, err_bytes) != 0)
        return -1;
    if (pthread_create(&lg.writer, NULL, writer, NULL) != 0) {
        snprintf(err, err_bytes, "--log-requests: cannot start the writer thread");
        return -1;
    }
    lg.on = 1;
    return 0;
}

void sv_reqlog_close(void)
{
    if (!lg.on)
        return;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += CLOSE_WAIT_S;
    pthread_mutex_lock(&lg.lock);
    lg.stop = 1;
    pthread_cond_signal(&lg.more);
    int rc = 0;
    while (!lg.finished && rc == 0)
        rc = pthread_cond_timedwait(&lg.done, &lg.lock, &until);
    int finished = lg.finished;
    pthread_mutex_unlock(&lg.lock);
    if (!finished) { /* stuck writing (a pipe nobody reads): left behind, the process is ending */
        fprintf(stderr, "ddl-serve: --log-requests: the writer is stuck on %s; %d lines not written\n", lg.path,
                lg.count);
        pthread_detach(lg.writer);
        return;
    }
    pthread_join(lg.writer, NULL);
    if (lg.fd >= 0)
        close(lg.fd);
    free(lg.lines), free(lg.lens);
    lg.on = 0;
}

/* ---- a request's line ---- */

#undef put /* metrics.c's, where the fuzz target compiles every file as one */
#define put(...) (at += (size_t)snprintf(line + (at < LINE ? at : LINE), at < LINE ? LINE - at : 0, __VA_ARGS__))

void sv_reqlog_request(const sv_reply *rep, const char *url, const unsigned char *body, size_t n, uint64_t micros)
{
    if (!lg.on || !rep->model)
        return;
    char line[LINE], stamp[32];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    size_t at = 0;
    /* the model's name is of [A-Za-z0-9_.-] and the route one of ours: nothing here needs escaping */
    put("{\"time\":\"%s.%03ldZ\",\"model\":\"%s\",\"version\":%d,\"route\":\"%s\",\"status\":%d,"
        "\"input_bytes\":%zu,\"input_crc32c\":\"%08x\",\"latency_us\":%llu", stamp, ts.tv_nsec / 1000000,
        rep->model->name, rep->version, strstr(url, "/infer") ? "infer" : "predict", rep->status, n,
        (unsigned)ddl_crc32c(0, body, n), (unsigned long long)micros);
    const sv_answer *a = &rep->answer;
    if (rep->status == 200 && a->n > 0) {
        put(",\"instances\":%d,\"top\":[", a->n);
        for (int i = 0; i < a->n && i < SV_ANSWER_TOP; i++)
            if (a->top[i] >= 0)
                put("%s{\"class\":%d,\"p\":%.6g}", i ? "," : "", a->top[i], (double)a->prob[i]);
        put("]");
    }
    put("}\n");
    if (at >= LINE) /* cannot happen with these fields; a cut line would not be JSON */
        return;
    pthread_mutex_lock(&lg.lock);
    if (lg.count == lg.cap) {
        pthread_mutex_unlock(&lg.lock);
        atomic_fetch_add_explicit(&lg.dropped, 1, memory_order_relaxed);
        return;
    }
    int slot = (lg.head + lg.count) % lg.cap;
    memcpy(lg.lines + (size_t)slot * LINE, line, at);
    lg.lens[slot] = (uint16_t)at;
    lg.count++;
    pthread_cond_signal(&lg.more);
    pthread_mutex_unlock(&lg.lock);
}

#undef put
#define put(...) (at += (size_t)snprintf(out + (at < cap ? at : cap), at < cap ? cap - at : 0, __VA_ARGS__))

size_t sv_reqlog_metrics(char *out, size_t cap)
{
    size_t at = 0;
    if (!lg.on)
        return 0;
    put("# HELP ddl_serve_log_lines_total Lines of the inference log (--log-requests): written, dropped (the "
        "queue was full), failed (the file refused them).\n# TYPE ddl_serve_log_lines_total counter\n"
        "ddl_serve_log_lines_total{result=\"written\"} %llu\nddl_serve_log_lines_total{result=\"dropped\"} %llu\n"
        "ddl_serve_log_lines_total{result=\"failed\"} %llu\n"
        "# HELP ddl_serve_log_rotations_total Times the inference log was moved to FILE.1.\n"
        "# TYPE ddl_serve_log_rotations_total counter\nddl_serve_log_rotations_total %llu\n",
        (unsigned long long)atomic_load(&lg.written), (unsigned long long)atomic_load(&lg.dropped),
        (unsigned long long)atomic_load(&lg.failed), (unsigned long long)atomic_load(&lg.rotated));
    return at < cap ? at : cap;
}

#undef put
