/* fuzz_serve.c - libFuzzer target of what ddl-serve parses of a request, through its own router
 * (tools/serve/api.c's sv_route, as http.c calls it once the headers are checked and the body is
 * in, inside a request's JSON arena): the predict bodies of TF Serving ({"instances": ...} by the
 * streaming parser or the tree, {"inputs": ...}, {"signature_name"...}), of KServe v2
 * ({"inputs": [{"name", "shape", "datatype", "data"}]}: shape and data into a tensor) and of
 * SageMaker's /invocations, image bodies (PNG, JPEG, PGM, PPM), the request path (models, versions,
 * scenes), the Host and Origin check, and the event files of --logdir (GET /api/training). Two
 * models are served: m, a LeNet (1x28x28 -> 10 classes), and u, a small U-Net (1x16x16 -> 3 classes
 * a pixel), made and saved at start.
 * Input: one mode byte, then the body (or what the mode says):
 *   0 POST /v1/models/m:predict, JSON      1 POST /v2/models/m/infer
 *   2 POST /v1/models/m:predict, image/png  3 POST /invocations, JSON
 *   4 POST /v1/models/u:predict, JSON      5 POST /v2/models/u/infer
 *   6 the Host header, a NUL, the Origin header (sv_host_check)
 *   7 GET of the path given (up to a NUL or 256 bytes)
 *   8 GET /api/training, the input being the one event file of --logdir
 *   9 POST /v2/models/m/infer with KServe's binary tensors: two bytes (big-endian) the value of
 *     Inference-Header-Content-Length, then the body (JSON header and binary data)
 * Every request must get a status from 200 to 599 and, from 400 on, a JSON {"error": ...}; never
 * a crash, a hang, a leak or undefined behaviour. The files of tools/serve/ but main.c, http.c
 * (libmicrohttpd) and web.c (the page) are compiled into this target; the Makefile links it with
 * jansson and yajl. With FUZZ_SEED_DIR set, initialisation writes request bodies there. */
#include "tools/serve/api.c"
#include "tools/serve/arena.c"
#include "tools/serve/batch.c"
#include "tools/serve/binary.c"
#include "tools/serve/hosts.c"
#include "tools/serve/image.c"
#include "tools/serve/kserve.c"
#include "tools/serve/metrics.c"
#include "tools/serve/predict.c"
#include "tools/serve/registry.c"
#include "tools/serve/reply.c"
#include "tools/serve/reqlog.c"
#include "tools/serve/scenes.c"
#include "tools/serve/stream.c"
#include "tools/serve/tfserving.c"
#include "tools/serve/training.c"
#include "tools/serve/versions.c"

#include "fuzz_common.h"

#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

const unsigned char sv_web_index[] = "<!doctype html><title>ddl-serve</title>";
const size_t sv_web_index_bytes = sizeof sv_web_index - 1;
static sv_server server;
sv_server *sv_srv = &server;
static char logdir[600], event_file[700];

/* ---- the models: trained one step on made-up images, saved, served ---- */

static void make_model(const ddl_model_plugin *p, int hw, int classes, int seg, const char *name)
{
    static uint8_t images[8 * 28 * 28], targets[8 * 28 * 28];
    for (size_t i = 0; i < sizeof images; i++)
        images[i] = (uint8_t)(i * 37), targets[i] = (uint8_t)(i * 7 % (size_t)classes);
    ddl_dataset d = {.n = 8, .c = 1, .h = hw, .w = hw, .n_classes = classes, .images = images, .targets = targets};
    d.th = d.tw = seg ? hw : 1;
    ddl_model_config mc = {.batch = 4, .in_c = 1, .in_h = hw, .in_w = hw, .n_classes = classes,
                           .plugin_config = &(ddl_unet_config){.depth = 1, .width = 2}};
    ddl_model *m = NULL;
    ddl_trainer *t = NULL;
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = 4;
    char arg[700], err[DDL_ERR_BYTES + 1024];
    snprintf(arg, sizeof arg, "%s=%s", name, fuzz_path(name));
    if (ddl_model_create(p, &mc, NULL, &m, err, sizeof err) != DDL_OK ||
        ddl_trainer_create(&tc, m, &d, NULL, &t, err, sizeof err) != DDL_OK || ddl_trainer_step(t, NULL) != DDL_OK ||
        ddl_trainer_save(t, strchr(arg, '=') + 1) != DDL_OK || sv_registry_add(&server.reg, arg, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_serve: model %s: %s\n", name, err);
        abort();
    }
    ddl_trainer_destroy(t);
    ddl_model_destroy(m);
}

/* ---- one request ---- */

static void check_reply(const sv_reply *rep)
{
    if (rep->status < 200 || rep->status > 599 || (rep->cap && rep->len > rep->cap))
        abort();
    if (rep->status >= 400) { /* {"error": "..."} */
        json_error_t je;
        json_t *j = json_loadb(rep->body, rep->len, 0, &je);
        if (!j || !json_is_string(json_object_get(j, "error")))
            abort();
        json_decref(j);
    }
}

static void request_h(const char *method, const char *url, const char *ctype, const uint8_t *body, size_t n,
                      const char *infer_header)
{
    sv_reply rep = {.infer_header = infer_header};
    if (sv_reply_reserve(&rep, SV_REPLY_MIN) != 0)
        abort();
    char *own = rep.body;
    if (sv_arena_begin() != 0)
        abort();
    sv_route(method, url, ctype, body, n, &rep);
    sv_arena_end();
    check_reply(&rep);
    free(rep.body == (char *)sv_web_index ? own : rep.body); /* the page is static */
}

static void request(const char *method, const char *url, const char *ctype, const uint8_t *body, size_t n)
{
    request_h(method, url, ctype, body, n, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > SV_MAX_BODY)
        return 0;
    const uint8_t *b = data + 1;
    size_t n = size - 1;
    char text[300];
    switch (data[0] % 10) {
    case 0: request("POST", "/v1/models/m:predict", "application/json", b, n); break;
    case 1: request("POST", "/v2/models/m/infer", "application/json", b, n); break;
    case 2: request("POST", "/v1/models/m:predict", "image/png", b, n); break;
    case 3: request("POST", "/invocations", "application/json", b, n); break;
    case 4: request("POST", "/v1/models/u:predict", "application/json", b, n); break;
    case 5: request("POST", "/v2/models/u/infer", "application/json", b, n); break;
    case 6: { /* Host NUL Origin */
        char host[300], why[400];
        size_t hn = strnlen((const char *)b, n < 299 ? n : 299);
        memcpy(host, b, hn), host[hn] = 0;
        size_t on = hn < n ? strnlen((const char *)b + hn + 1, n - hn - 1 < 299 ? n - hn - 1 : 299) : 0;
        if (hn < n)
            memcpy(text, b + hn + 1, on);
        text[on] = 0;
        (void)sv_host_check(host, hn < n ? text : NULL, why, sizeof why);
        (void)sv_host_check(n ? host : NULL, NULL, why, sizeof why);
        break;
    }
    case 7: {
        size_t un = strnlen((const char *)b, n < 256 ? n : 256);
        memcpy(text, b, un), text[un] = 0;
        request("GET", text, NULL, NULL, 0);
        request("POST", text, "application/json", (const uint8_t *)"{}", 2);
        (void)sv_route_is_probe("GET", text);
        (void)sv_route_takes_body("POST", text);
        break;
    }
    case 9:
        if (n >= 2) {
            snprintf(text, sizeof text, "%u", (unsigned)b[0] << 8 | b[1]);
            request_h("POST", "/v2/models/m/infer", "application/octet-stream", b + 2, n - 2, text);
        }
        break;
    default:
        fuzz_write(event_file, b, n);
        request("GET", "/api/training", NULL, NULL, 0);
        break;
    }
    return 0;
}

/* ---- seeds: bodies as clients send them ---- */

static void seed(const char *dir, const char *name, int mode, const char *body, size_t n)
{
    char path[600];
    uint8_t *b = malloc(n + 1);
    b[0] = (uint8_t)mode;
    memcpy(b + 1, body, n);
    snprintf(path, sizeof path, "%s/seed-%s", dir, name);
    fuzz_write(path, b, n + 1);
    free(b);
}

/* pixels: count numbers, nested as [[row], ...] (rows of w) or flat */
static size_t pixels(char *out, size_t cap, int count, int w)
{
    size_t a = 0;
    for (int i = 0; i < count && a + 16 < cap; i++)
        a += (size_t)snprintf(out + a, cap - a, "%s%s%d%s", w && i % w == 0 ? (i ? ",[" : "[") : i ? "," : "",
                              "", (i * 37) % 256, w && i % w == w - 1 ? "]" : "");
    return a;
}

static void write_seeds(const char *dir)
{
    static char body[1 << 16], px[1 << 15];
    size_t k;
    pixels(px, sizeof px, 28 * 28, 28);
    k = (size_t)snprintf(body, sizeof body, "{\"instances\": [[%s]]}", px);
    seed(dir, "tfs-instances", 0, body, k);
    k = (size_t)snprintf(body, sizeof body, "{\"signature_name\": \"serving_default\", \"instances\": [{\"input\": "
                         "[%s]}, [%s]]}", px, px);
    seed(dir, "tfs-named", 0, body, k);
    k = (size_t)snprintf(body, sizeof body, "{\"inputs\": [[%s]]}", px);
    seed(dir, "tfs-inputs", 3, body, k);
    pixels(px, sizeof px, 28 * 28, 0);
    k = (size_t)snprintf(body, sizeof body, "{\"id\": \"r1\", \"inputs\": [{\"name\": \"input\", \"shape\": [1, 1, "
                         "28, 28], \"datatype\": \"UINT8\", \"data\": [%s]}]}", px);
    seed(dir, "v2-infer", 1, body, k);
    k = (size_t)snprintf(body + 2, sizeof body - 2, "{\"inputs\": [{\"name\": \"input\", \"shape\": [1, 28, 28, 1], "
                         "\"datatype\": \"UINT8\", \"parameters\": {\"binary_data_size\": 784}}]}");
    body[0] = (char)(k >> 8), body[1] = (char)k;
    for (int i = 0; i < 28 * 28; i++)
        body[2 + k + (size_t)i] = (char)(i * 37);
    seed(dir, "v2-binary", 9, body, 2 + k + 28 * 28);
    pixels(px, sizeof px, 16 * 16, 16);
    k = (size_t)snprintf(body, sizeof body, "{\"instances\": [[%s]]}", px);
    seed(dir, "tfs-unet", 4, body, k);
    pixels(px, sizeof px, 16 * 16, 0);
    k = (size_t)snprintf(body, sizeof body, "{\"inputs\": [{\"name\": \"input\", \"shape\": [1, 16, 16], "
                         "\"datatype\": \"FP32\", \"data\": [%s]}]}", px);
    seed(dir, "v2-unet", 5, body, k);
    k = (size_t)snprintf(body, sizeof body, "P5\n28 28\n255\n");
    for (int i = 0; i < 28 * 28; i++)
        body[k++] = (char)(i * 37);
    seed(dir, "pgm", 2, body, k);
    seed(dir, "host", 6, "127.0.0.1:8501\0http://127.0.0.1:8501", 36);
    seed(dir, "host-v6", 6, "[::1]:8501\0null", 15);
    static const char *const urls[] = {"/v1/models/m", "/v1/models/m/metadata", "/v1/models/m/versions/1",
                                       "/v2/models/u/ready", "/v2/models/m/versions/1/infer", "/api/models",
                                       "/api/scene/u/3", "/metrics", "/v2", "/ping"};
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "url-%zu", i);
        seed(dir, name, 7, urls[i], strlen(urls[i]));
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    ddl_set_threads(1);
    sv_arena_install();
    server.reg.threads = 1;
    server.data = "/nonexistent"; /* scenes: the 404 that says where it looked, at once */
    snprintf(logdir, sizeof logdir, "%s", fuzz_path("logdir"));
    if (mkdir(logdir, 0700) != 0)
        abort();
    snprintf(event_file, sizeof event_file, "%s/events.out.tfevents.1.fuzz", logdir);
    server.logdir = logdir;
    make_model(ddl_model_lenet(), 28, 10, 0, "m");
    make_model(ddl_model_unet(), 16, 3, 1, "u");
    if (getenv("FUZZ_SEED_DIR"))
        write_seeds(getenv("FUZZ_SEED_DIR"));
    return 0;
}
