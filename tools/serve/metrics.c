/* metrics.c - what /metrics tells Prometheus: requests by model and status class, errors, a
 * latency histogram per model, the version served and the reloads done or refused. Counters are
 * relaxed atomics bumped by the HTTP threads; the text is written into the caller's buffer. */
#include "serve.h"

#include <stdio.h>

/* upper bounds of the latency buckets, microseconds (the last is +Inf) */
static const uint64_t bucket_us[] = {100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000,
                                     1000000};
#define N_BUCKETS (sizeof bucket_us / sizeof bucket_us[0])

/* dynamic batching (batch.c): images per pass, and a request's wait for its pass to start */
const int sv_batch_bucket[SV_BATCH_BUCKETS] = {1, 2, 4, 8, 16, 32, 64};
const int64_t sv_wait_bucket_us[SV_WAIT_BUCKETS] = {50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 100000};

void sv_metrics_observe(sv_model *m, int status, uint64_t us)
{
    int k = status / 100 >= 1 && status / 100 <= 5 ? status / 100 : 5;
    atomic_fetch_add_explicit(&m->n_req[k], 1, memory_order_relaxed);
    if (status >= 400)
        atomic_fetch_add_explicit(&m->n_err, 1, memory_order_relaxed);
    size_t b = 0;
    while (b < N_BUCKETS && us > bucket_us[b])
        b++;
    atomic_fetch_add_explicit(&m->hist[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->sum_us, us, memory_order_relaxed);
}

void sv_metrics_other(int status)
{
    int k = status / 100 >= 1 && status / 100 <= 5 ? status / 100 : 5;
    atomic_fetch_add_explicit(&sv_srv->other_req[k], 1, memory_order_relaxed);
}

#define LOAD(x) ((unsigned long long)atomic_load_explicit(&(x), memory_order_relaxed))

/* put: printf into out at *at, never past cap (the text is cut when cap is too small). */
#define put(...) (at += (size_t)snprintf(out + (at < cap ? at : cap), at < cap ? cap - at : 0, __VA_ARGS__))

/* batch_text: with --max-batch, the histograms of the batcher's passes (images each) and of the
 * requests' waits for theirs. */
static void batch_text(const sv_registry *r, char *out, size_t cap, size_t *at_)
{
    size_t at = *at_;
    int any = 0;
    for (int i = 0; i < r->n; i++)
        any |= r->models[i].batching;
    if (!any)
        return;
    put("# HELP ddl_serve_batch_size Images per forward pass of the dynamic batcher (--max-batch).\n"
        "# TYPE ddl_serve_batch_size histogram\n");
    for (int i = 0; i < r->n; i++) {
        const sv_model *m = &r->models[i];
        unsigned long long cum = 0;
        for (size_t b = 0; m->batching && b <= SV_BATCH_BUCKETS; b++) {
            cum += LOAD(m->batch_hist[b]);
            if (b < SV_BATCH_BUCKETS)
                put("ddl_serve_batch_size_bucket{model=\"%s\",le=\"%d\"} %llu\n", m->name, sv_batch_bucket[b], cum);
            else
                put("ddl_serve_batch_size_bucket{model=\"%s\",le=\"+Inf\"} %llu\n"
                    "ddl_serve_batch_size_sum{model=\"%s\"} %llu\n"
                    "ddl_serve_batch_size_count{model=\"%s\"} %llu\n", m->name, cum, m->name,
                    LOAD(m->batch_images), m->name, cum);
        }
    }
    put("# HELP ddl_serve_batch_wait_seconds Time a request waited for its batch's pass to start.\n"
        "# TYPE ddl_serve_batch_wait_seconds histogram\n");
    for (int i = 0; i < r->n; i++) {
        const sv_model *m = &r->models[i];
        unsigned long long cum = 0;
        for (size_t b = 0; m->batching && b <= SV_WAIT_BUCKETS; b++) {
            cum += LOAD(m->wait_hist[b]);
            if (b < SV_WAIT_BUCKETS)
                put("ddl_serve_batch_wait_seconds_bucket{model=\"%s\",le=\"%g\"} %llu\n", m->name,
                    sv_wait_bucket_us[b] / 1e6, cum);
            else
                put("ddl_serve_batch_wait_seconds_bucket{model=\"%s\",le=\"+Inf\"} %llu\n"
                    "ddl_serve_batch_wait_seconds_sum{model=\"%s\"} %.6f\n"
                    "ddl_serve_batch_wait_seconds_count{model=\"%s\"} %llu\n", m->name, cum, m->name,
                    LOAD(m->wait_sum_us) / 1e6, m->name, cum);
        }
    }
    put("# HELP ddl_serve_batch_queued Requests in a batch that waits to fill, now.\n"
        "# TYPE ddl_serve_batch_queued gauge\n");
    for (int i = 0; i < r->n; i++)
        if (r->models[i].batching)
            put("ddl_serve_batch_queued{model=\"%s\"} %d\n", r->models[i].name, atomic_load(&r->models[i].queued));
    *at_ = at;
}

size_t sv_metrics_text(const sv_registry *r, char *out, size_t cap)
{
    size_t at = 0;
    put("# HELP ddl_serve_requests_total Requests answered, by model and status class.\n"
        "# TYPE ddl_serve_requests_total counter\n");
    for (int i = 0; i < r->n; i++)
        for (int k = 1; k <= 5; k++)
            put("ddl_serve_requests_total{model=\"%s\",code=\"%dxx\"} %llu\n", r->models[i].name, k,
                LOAD(r->models[i].n_req[k]));
    for (int k = 1; k <= 5; k++)
        put("ddl_serve_requests_total{model=\"\",code=\"%dxx\"} %llu\n", k, LOAD(sv_srv->other_req[k]));
    put("# HELP ddl_serve_errors_total Requests for the model answered with 4xx or 5xx.\n"
        "# TYPE ddl_serve_errors_total counter\n");
    for (int i = 0; i < r->n; i++)
        put("ddl_serve_errors_total{model=\"%s\"} %llu\n", r->models[i].name, LOAD(r->models[i].n_err));
    put("# HELP ddl_serve_request_duration_seconds Time from the request's last byte to its answer.\n"
        "# TYPE ddl_serve_request_duration_seconds histogram\n");
    for (int i = 0; i < r->n; i++) {
        const sv_model *m = &r->models[i];
        unsigned long long cum = 0;
        for (size_t b = 0; b <= N_BUCKETS; b++) {
            cum += LOAD(m->hist[b]);
            if (b < N_BUCKETS)
                put("ddl_serve_request_duration_seconds_bucket{model=\"%s\",le=\"%g\"} %llu\n", m->name,
                    bucket_us[b] / 1e6, cum);
            else
                put("ddl_serve_request_duration_seconds_bucket{model=\"%s\",le=\"+Inf\"} %llu\n", m->name, cum);
        }
        put("ddl_serve_request_duration_seconds_sum{model=\"%s\"} %.6f\n", m->name, LOAD(m->sum_us) / 1e6);
        put("ddl_serve_request_duration_seconds_count{model=\"%s\"} %llu\n", m->name, cum);
    }
    batch_text(r, out, cap, &at);
    put("# HELP ddl_serve_model_reloads_total New checkpoint files loaded, and refused.\n"
        "# TYPE ddl_serve_model_reloads_total counter\n");
    for (int i = 0; i < r->n; i++)
        put("ddl_serve_model_reloads_total{model=\"%s\",result=\"loaded\"} %d\n"
            "ddl_serve_model_reloads_total{model=\"%s\",result=\"refused\"} %d\n", r->models[i].name,
            atomic_load(&r->models[i].reloads), r->models[i].name, atomic_load(&r->models[i].refused));
    at += sv_versions_metrics(r, out + (at < cap ? at : cap), at < cap ? cap - at : 0); /* versions.c */
    at += sv_reqlog_metrics(out + (at < cap ? at : cap), at < cap ? cap - at : 0);      /* reqlog.c */
    return at < cap ? at : cap;
}
