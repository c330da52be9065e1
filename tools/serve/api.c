/* api.c - which handler answers which request: the page, the JSON the page reads
 * (/api/models, /api/training, /api/scene), health and metrics, then the three protocols. The path names
 * the model (/v1/models/NAME..., /v2/models/NAME...); an unknown one is a 404 naming the models
 * served. Knows nothing of sockets: http.c gives it a complete request and sends what it sets. */
#include "serve.h"

#include <string.h>
#include <time.h>

static int is(const char *a, const char *b) { return strcmp(a, b) == 0; }

static int ends(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && strcmp(s + n - m, tail) == 0;
}

int sv_route_takes_body(const char *method, const char *url)
{
    return is(method, "POST") && (is(url, "/invocations") || ends(url, ":predict") || ends(url, "/infer"));
}

/* sv_route_is_probe: a health or readiness probe, which Kubernetes (and load balancers) send
 * without credentials: GET /ping, /v2/health/live, /v2/health/ready, /v2/models/NAME/ready and
 * /v1/models/NAME (TF Serving's status). They say whether the server and a model are up, nothing
 * of the model's weights or of any request, so they answer without the token. */
int sv_route_is_probe(const char *method, const char *url)
{
    if (!is(method, "GET") && !is(method, "HEAD"))
        return 0;
    if (is(url, "/ping") || is(url, "/v2/health/live") || is(url, "/v2/health/ready"))
        return 1;
    if (strncmp(url, "/v1/models/", 11) == 0) /* the status itself, no tail (not /metadata) */
        return url[11] && !strpbrk(url + 11, "/:");
    if (strncmp(url, "/v2/models/", 11) == 0) {
        const char *slash = strchr(url + 11, '/');
        return slash && slash > url + 11 && is(slash, "/ready");
    }
    return 0;
}

static void models(sv_reply *rep)
{
    json_t *list = json_array();
    for (int i = 0; i < sv_srv->reg.n; i++) {
        sv_model *m = &sv_srv->reg.models[i];
        int v;
        ddl_checkpoint_info in;
        sv_model_state(m, &v, &in);
        json_array_append_new(list, json_pack("{s:s,s:s,s:i,s:[iii],s:[iii],s:i,s:I,s:o}", "name", m->name, "model",
                                              m->kind, "version", v, "input", m->c, m->h, m->w, "output", m->C,
                                              m->oh, m->ow, "max_instances", m->max_inst, "step",
                                              (json_int_t)in.step, "class_names", sv_class_names(m)));
    }
    sv_reply_json(rep, 200, json_pack("{s:o,s:b}", "models", list, "training", sv_srv->logdir != NULL));
}

static void training(sv_reply *rep)
{
    json_t *j = sv_training_json(sv_srv->logdir);
    if (!j)
        sv_error(rep, 500, "cannot read the event files of --logdir");
    else
        sv_reply_json(rep, 200, j);
}

static void text(sv_reply *rep, int status, const char *type, const char *s)
{
    size_t n = strlen(s);
    if (sv_reply_reserve(rep, n) == 0) {
        memcpy(rep->body, s, n);
        rep->len = n, rep->status = status, rep->type = type;
    }
}

static void not_found(sv_reply *rep, const char *name, size_t n)
{
    char list[SV_MAX_MODELS * 66] = "";
    for (int i = 0; i < sv_srv->reg.n; i++)
        strcat(strcat(list, i ? ", " : ""), sv_srv->reg.models[i].name);
    sv_error(rep, 404, "no model \"%.*s\" here (served: %s)", (int)(n > 64 ? 64 : n), name, list);
}

/* scene: /api/scene/MODEL/N */
static void scene(const char *rest, sv_reply *rep)
{
    size_t len = strcspn(rest, "/");
    sv_model *m = sv_registry_find(&sv_srv->reg, rest, len);
    if (!m)
        not_found(rep, rest, len);
    else if (rest[len] != '/')
        sv_error(rep, 404, "expected /api/scene/MODEL/N");
    else
        sv_scene(m, rest + len + 1, rep);
}

/* model_route: /v1/models/NAME[...] and /v2/models/NAME[...]: rest is after "models/". */
static void model_route(int v2, const char *method, const char *rest, const char *ctype, const unsigned char *body,
                        size_t n, sv_reply *rep)
{
    size_t len = strcspn(rest, "/:");
    sv_model *m = sv_registry_find(&sv_srv->reg, rest, len);
    const char *tail = rest + len;
    if (!m) {
        not_found(rep, rest, len);
        return;
    }
    rep->model = m;
    int get = is(method, "GET"), post = is(method, "POST");
    if (strncmp(tail, "/versions/", 10) == 0) { /* TF Serving's and KServe's versioned paths */
        const char *num = tail + 10;
        size_t k = strcspn(num, "/:");
        int want = sv_version_number(num, k), v, list[SV_MAX_KEEP + 1], n_list = sv_versions_list(m, list);
        ddl_checkpoint_info in;
        if (want < 0 || sv_version_state(m, want, &v, &in) != 0) {
            char served[SV_MAX_KEEP * 12 + 1] = "";
            for (int i = n_list; i-- > 0;)
                snprintf(served + strlen(served), sizeof served - strlen(served), "%s%d", i < n_list - 1 ? ", " : "",
                         list[i]);
            sv_error(rep, 404, "model %s: version %.*s is not served (version%s %s %s: %s)", m->name,
                     (int)(k > 20 ? 20 : k), num, n_list > 1 ? "s" : "", served, n_list > 1 ? "are" : "is",
                     m->is_dir ? "the newest that load of its directory, --keep-versions of them"
                               : "the latest file; the version counts reloads");
            return;
        }
        rep->want_version = want;
        tail = num + k;
    }
    if (!v2 && get && is(tail, ""))
        sv_tfs_status(m, rep);
    else if (!v2 && get && is(tail, "/metadata"))
        sv_tfs_metadata(m, rep);
    else if (!v2 && post && is(tail, ":predict"))
        sv_tfs_predict(m, ctype, body, n, rep);
    else if (v2 && get && is(tail, ""))
        sv_v2_model(m, rep);
    else if (v2 && get && is(tail, "/ready"))
        sv_reply_json(rep, 200, json_pack("{s:s,s:b}", "name", m->name, "ready", 1));
    else if (v2 && post && is(tail, "/infer"))
        sv_v2_infer(m, body, n, rep);
    else if (is(tail, "") || is(tail, "/metadata") || is(tail, ":predict") || is(tail, "/ready") ||
             is(tail, "/infer"))
        sv_error(rep, 405, "%s is not allowed on this path", method);
    else
        sv_error(rep, 404, "no such path for model %s", m->name);
}

static void route(const char *method, const char *url, const char *ctype, const unsigned char *body, size_t n,
                  sv_reply *rep);

void sv_route(const char *method, const char *url, const char *ctype, const unsigned char *body, size_t n,
              sv_reply *rep)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    route(method, url, ctype, body, n, rep);
    if (rep->model && sv_route_takes_body(method, url)) { /* a predict or infer: the inference log's line */
        clock_gettime(CLOCK_MONOTONIC, &t1);
        sv_reqlog_request(rep, url, body, n,
                          (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000));
    }
}

static void route(const char *method, const char *url, const char *ctype, const unsigned char *body, size_t n,
                  sv_reply *rep)
{
    int get = is(method, "GET") || is(method, "HEAD");
    rep->model = NULL;
    if (strncmp(url, "/v1/models/", 11) == 0)
        model_route(0, method, url + 11, ctype, body, n, rep);
    else if (strncmp(url, "/v2/models/", 11) == 0)
        model_route(1, method, url + 11, ctype, body, n, rep);
    else if (is(url, "/invocations") && is(method, "POST"))
        (rep->model = &sv_srv->reg.models[0]), sv_tfs_predict(rep->model, ctype, body, n, rep);
    else if (!get && (is(url, "/") || is(url, "/ping") || is(url, "/metrics") || strncmp(url, "/v2", 3) == 0 ||
                      strncmp(url, "/api/", 5) == 0))
        sv_error(rep, 405, "%s is not allowed on this path", method);
    else if (is(url, "/") || is(url, "/index.html")) {
        rep->body = (char *)sv_web_index, rep->len = sv_web_index_bytes, rep->cap = 0; /* static: not copied */
        rep->status = 200, rep->type = "text/html; charset=utf-8";
    } else if (is(url, "/ping"))
        text(rep, 200, "application/json", "{\"status\":\"healthy\"}");
    else if (is(url, "/v2/health/live"))
        text(rep, 200, "application/json", "{\"live\":true}");
    else if (is(url, "/v2/health/ready"))
        text(rep, 200, "application/json", "{\"ready\":true}");
    else if (is(url, "/v2"))
        sv_reply_json(rep, 200, json_pack("{s:s,s:s,s:[s]}", "name", "ddl-serve", "version", ddl_version_string(),
                                          "extensions", "binary_tensor_data"));
    else if (is(url, "/metrics")) {
        if (sv_reply_reserve(rep, 65536) == 0) {
            rep->len = sv_metrics_text(&sv_srv->reg, rep->body, rep->cap);
            rep->status = 200, rep->type = "text/plain; version=0.0.4";
        }
    } else if (is(url, "/api/models"))
        models(rep);
    else if (strncmp(url, "/api/scene/", 11) == 0)
        scene(url + 11, rep);
    else if (is(url, "/api/training"))
        training(rep);
    else
        sv_error(rep, 404, "no such path: %.200s", url);
}
