/* http.c - ddl-serve on libmicrohttpd: one context per connection (its body and reply buffers,
 * reused by every request of a keep-alive connection, so a steady client costs no malloc of
 * ours), the bearer token, and the limits that keep a hostile client from holding memory or a
 * thread: a declared body over SV_MAX_BODY is answered 413 before it is read, an undeclared
 * (chunked) one is cut off when it passes the limit, a body still arriving --body-timeout seconds
 * after the request began closes the connection, headers are bounded by the connection's memory
 * pool, and an idle connection is closed after --idle-timeout seconds (MHD's timeout). Only the
 * routes that read a body (predict, infer) buffer one: any other body is dropped as it arrives.
 * A buffer grown past KEEP_BYTES by one request is freed when that request completes, so a
 * thousand idle keep-alive clients hold no large body or reply each. */
#include "serve.h"

#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KEEP_BYTES 65536   /* a connection keeps buffers up to this between requests */
#define DRAIN_MS 2000      /* at shutdown, how long requests under way may take to be answered */

/* requests begun and not yet completed (answered, or their connection closed), and whether the
 * server is stopping: then new requests are a 503, and sv_http_stop waits for these first */
static _Atomic int active, draining;

typedef struct conn {
    unsigned char *body;
    size_t len, cap;
    char *out;
    size_t out_cap;
    int64_t t0;            /* when the request began (monotonic microseconds) */
    int drop_body;         /* the route reads no body: discard it */
} conn;

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- buffers ---- */

static int body_append(conn *k, const char *data, size_t n)
{
    if (k->len + n > k->cap) {
        size_t cap = k->cap ? k->cap : 4096;
        while (cap < k->len + n)
            cap *= 2;
        unsigned char *b = realloc(k->body, cap);
        if (!b)
            return -1;
        k->body = b, k->cap = cap;
    }
    memcpy(k->body + k->len, data, n);
    k->len += n;
    return 0;
}

/* ---- answering ---- */

static enum MHD_Result send_reply(struct MHD_Connection *c, conn *k, sv_reply *rep)
{
    if (rep->cap) /* the reply grew the connection's buffer: keep it */
        k->out = rep->body, k->out_cap = rep->cap;
    struct MHD_Response *r = MHD_create_response_from_buffer(rep->len, rep->body, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, rep->type ? rep->type : "application/json");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    char num[24];
    if (rep->binary_header) /* KServe's binary tensors: the JSON is this long, the outputs follow */
        snprintf(num, sizeof num, "%zu", rep->binary_header),
            MHD_add_response_header(r, "Inference-Header-Content-Length", num);
    if (rep->version) /* the model version that answered */
        snprintf(num, sizeof num, "%d", rep->version), MHD_add_response_header(r, "X-Model-Version", num);
    if (rep->status == 401)
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"ddl-serve\"");
    if (rep->type && strncmp(rep->type, "text/html", 9) == 0) /* the page loads nothing from elsewhere */
        MHD_add_response_header(r, "Content-Security-Policy",
                                "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                                "img-src 'self' data: blob:; connect-src 'self'");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)rep->status, r);
    MHD_destroy_response(r);
    return ret;
}

/* early: a reply before the body is read (401, 413): MHD then closes the connection. */
static enum MHD_Result early(struct MHD_Connection *c, conn *k, int status, const char *msg)
{
    sv_reply rep = {.body = k->out, .cap = k->out_cap};
    if (sv_reply_reserve(&rep, SV_REPLY_MIN))
        return MHD_NO;
    sv_error(&rep, status, "%s", msg);
    sv_metrics_other(status);
    return send_reply(c, k, &rep);
}

/* authorized: the request carries "Authorization: Bearer TOKEN" (compared in constant time). */
static int authorized(struct MHD_Connection *c)
{
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    const char *t = sv_srv->token;
    if (!h || strncmp(h, "Bearer ", 7) != 0)
        return 0;
    h += 7;
    size_t n = strlen(t), m = strlen(h);
    unsigned diff = (unsigned)(n ^ m);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)t[i] ^ (unsigned char)(i < m ? h[i] : 0);
    return diff == 0;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **req_cls)
{
    (void)cls, (void)version;
    conn *k = *req_cls;
    if (!k) { /* the headers are in: check them before any body is read */
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        if (!ci || !(k = ci->socket_context))
            return MHD_NO;
        *req_cls = k;
        atomic_fetch_add(&active, 1);
        k->len = 0;
        k->t0 = now_us();
        k->drop_body = !sv_route_takes_body(method, url);
        char why[400];
        if (atomic_load(&draining))
            return early(c, k, 503, "the server is stopping");
        if (sv_host_check(MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST),
                          MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ORIGIN), why, sizeof why))
            return early(c, k, 403, why);
        if (sv_srv->token[0] && strcmp(url, "/") != 0 && strcmp(url, "/index.html") != 0 &&
            !sv_route_is_probe(method, url) && !authorized(c))
            return early(c, k, 401, "missing or wrong bearer token (Authorization: Bearer TOKEN)");
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > SV_MAX_BODY)
            return early(c, k, 413, "the body is larger than this server takes (4 MiB)");
        return MHD_YES;
    }
    if (*upload_size) {
        if (now_us() - k->t0 > (int64_t)sv_srv->body_timeout_s * 1000000 || k->len + *upload_size > SV_MAX_BODY)
            return MHD_NO; /* too slow or too large (undeclared length): close */
        if (!k->drop_body && body_append(k, upload, *upload_size))
            return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    sv_reply rep = {.body = k->out, .cap = k->out_cap};
    if (!rep.cap && sv_reply_reserve(&rep, SV_REPLY_MIN))
        return MHD_NO;
    k->out = rep.body, k->out_cap = rep.cap;
    const char *ctype = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    rep.infer_header = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Inference-Header-Content-Length");
    int64_t t = now_us();
    if (sv_arena_begin() != 0)
        sv_error(&rep, 503, "out of memory");
    else
        sv_route(method, url, ctype, k->body, k->len, &rep);
    sv_arena_end();
    if (rep.model)
        sv_metrics_observe(rep.model, rep.status, (uint64_t)(now_us() - t));
    else
        sv_metrics_other(rep.status);
    return send_reply(c, k, &rep);
}

/* ---- connections ---- */

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    (void)cls, (void)c;
    conn *k = *socket_context;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        *socket_context = calloc(1, sizeof(conn));
    else if (k) {
        free(k->body), free(k->out), free(k);
        *socket_context = NULL;
    }
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls, enum MHD_RequestTerminationCode code)
{
    (void)cls, (void)c, (void)code;
    conn *k = *req_cls;
    if (k)
        atomic_fetch_sub(&active, 1);
    if (k && k->cap > KEEP_BYTES) { /* a large body: give its memory back */
        free(k->body);
        k->body = NULL, k->cap = 0;
    }
    if (k && k->out_cap > KEEP_BYTES) { /* a large reply, now sent: likewise */
        free(k->out);
        k->out = NULL, k->out_cap = 0;
    }
    *req_cls = NULL;
}

struct MHD_Daemon *sv_http_start(const struct sockaddr *addr, int threads, int idle_timeout_s)
{
    return MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_TURBO | MHD_USE_ERROR_LOG, 0,
                            NULL, NULL, handle, NULL, MHD_OPTION_SOCK_ADDR, addr, MHD_OPTION_THREAD_POOL_SIZE,
                            (unsigned)threads, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)idle_timeout_s,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)4000, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                            (size_t)32768, MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)1024,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL, MHD_OPTION_NOTIFY_COMPLETED,
                            on_completed, NULL, MHD_OPTION_END);
}

int sv_http_port(struct MHD_Daemon *d)
{
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    return i ? (int)i->port : -1;
}

/* sv_http_stop: requests under way (a batch forming among them: sv_batch_stop runs it first) are
 * answered, for up to DRAIN_MS, before the daemon closes every connection. */
void sv_http_stop(struct MHD_Daemon *d)
{
    atomic_store(&draining, 1);
    for (int ms = 0; ms < DRAIN_MS && atomic_load(&active) > 0; ms++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(d);
}
