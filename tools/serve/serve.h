/* serve.h - what the files of ddl-serve share: the model registry (versions, hot reload), the
 * per-thread JSON arena, metrics, image decoding, the training data of --logdir, and the
 * request handlers. A program, not library code: it may exit, log to stderr and start threads.
 *   main.c      command line, the HTTP daemon, signals
 *   http.c      libmicrohttpd callbacks: connections, bodies and their limits, auth, routing
 *   hosts.c     which Host and Origin headers name this server (DNS rebinding, other sites)
 *   api.c       the routes: TF Serving, KServe v2, SageMaker, metrics, the page
 *   tfserving.c TF Serving's REST routes (and SageMaker's /invocations)
 *   kserve.c    KServe v2's routes (the Open Inference Protocol)
 *   predict.c   the predict path the protocols share: pixels in, one pass, JSON out
 *   batch.c     dynamic batching: requests that arrive together run as one pass (--max-batch)
 *   reply.c     the reply's buffer, JSON answers and {"error": ...}
 *   registry.c  models by name, versions with their predictors, the reload thread
 *   versions.c  a directory of numbered versions: which are loaded, /versions/N, the canary
 *   binary.c    KServe's binary tensors: lengths checked, raw values in, outputs out
 *   reqlog.c    the inference log (--log-requests): a writer thread, a bounded queue, rotation
 *   arena.c     jansson's and yajl's allocator: a bump arena per thread, reset after each request
 *   stream.c    the fast path of :predict: {"instances": [...]} parsed by events, no tree
 *   metrics.c   counters and latency histograms, Prometheus text
 *   image.c     image bodies to pixels, through the library's decoder and resize
 *   training.c  the event files of --logdir as JSON for the Training tab
 *   scenes.c    GET /api/scene/MODEL/N: a scene for the page's segmentation demo
 *   web.c       the page at /, embedded at build time */
#ifndef DDL_SERVE_H
#define DDL_SERVE_H

#include "ddl.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <yajl/yajl_common.h>

#define SV_MAX_MODELS 16
#define SV_MAX_BODY ((size_t)4 << 20)   /* bytes of a request body; larger: 413 */
#define SV_MAX_INPUT 65536              /* pixels of all instances of one request (lenet: 83) */
#define SV_BODY_TIMEOUT_S 10            /* a request's body must arrive within this (--body-timeout) */
#define SV_IDLE_TIMEOUT_S 15            /* an idle connection is closed after this (--idle-timeout) */

typedef struct sv_reply sv_reply;

/* ---- registry ---- */

/* One loaded checkpoint: `n_slots` predictors (one per HTTP thread), each with its buffers. */
typedef struct sv_slot {
    ddl_predictor *pr;
    uint8_t *pixels;   /* (max_inst, c, h, w) */
    float *probs;      /* (max_inst, C, H, W) */
    uint16_t *classes; /* (max_inst, H, W) */
    struct sv_slot *next_free;
    struct sv_version *version; /* the version it is a predictor of */
} sv_slot;

typedef struct sv_version {
    int number;        /* 1, 2, ... in the order loaded */
    int refs;          /* requests using it, +1 while current (under the model's lock) */
    sv_slot *free_slots;
    sv_slot *slots;
    int n_slots;
    ddl_checkpoint_info info;
    pthread_cond_t slot_free;
    char path[1100];   /* the file it was loaded from */
    _Atomic uint64_t n_answered; /* requests it answered (200) */
} sv_version;

#define SV_MAX_KEEP 16       /* versions of a directory kept loaded at most (--keep-versions) */
#define SV_MAX_REFUSED 16    /* refused versions remembered, not tried again until their file changes */
#define SV_MAX_VERSION 999999999 /* version numbers: 1 to this, decimal, no sign, no leading zero */

/* sv_refused: a version whose file did not load (or may not be loaded), as its file was then. */
typedef struct sv_refused {
    int number;
    int64_t mtime_ns, size, inode;
} sv_refused;

typedef struct sv_model {
    char name[64];
    char path[1024];
    int c, h, w;       /* input */
    int C, oh, ow;     /* output: classes, and H x W positions (1 x 1 for a classifier) */
    int max_inst;      /* instances per request */
    char kind[16];     /* "lenet", "unet" */
    float mean, std;
    pthread_mutex_t lock;
    sv_version *cur;
    /* what the file looked like when last read (reload when it changes) */
    int64_t mtime_ns, size, inode;
    /* metrics */
    _Atomic uint64_t n_req[6];          /* by status class: 1xx..5xx at [1..5] */
    _Atomic uint64_t n_err;
    _Atomic uint64_t hist[16];          /* latency buckets of metrics.c */
    _Atomic uint64_t sum_us;
    _Atomic int reloads, refused;
    /* a directory of numbered versions (versions.c): path is DIR, each version DIR/N/model.ckpt */
    int is_dir;
    char real[1024];   /* DIR with every symbolic link resolved: no version is read from outside it */
    sv_version *vers[SV_MAX_KEEP + 1]; /* loaded, oldest first, each holding a reference; the last is cur
                                        * (one more than kept while a new one takes an old one's place) */
    int n_vers;
    sv_refused refused_v[SV_MAX_REFUSED];
    int n_refused_v;
    char refused_why[300]; /* the last refusal, for the status route */
    int refused_number;
    uint64_t ignored_sum;  /* the names in DIR that are not versions, as last logged */
    int canary;            /* percent of unversioned requests to the newest version; -1: no canary */
    uint64_t canary_n;     /* requests the canary decided (under lock) */
    uint64_t canary_seed;
    /* dynamic batching (batch.c), when --max-batch > 1: the group forming, under batch_mu */
    int batching;
    pthread_mutex_t batch_mu;
    pthread_cond_t batch_grow, batch_done; /* a member joined (or stop); a group's pass is done */
    struct sv_group *forming;
    _Atomic uint64_t batch_hist[16];    /* passes by images, buckets of sv_batch_bucket */
    _Atomic uint64_t batch_images;
    _Atomic uint64_t wait_hist[16];     /* requests by their wait for a batch, sv_wait_bucket_us */
    _Atomic uint64_t wait_sum_us;
    _Atomic int queued;                 /* requests in a batch that waits to fill, now */
} sv_model;

typedef struct sv_registry {
    sv_model models[SV_MAX_MODELS];
    int n;
    int threads;       /* predictors per version */
    pthread_t watcher;
    int period_ms;     /* how often the reload thread looks at the files */
    _Atomic int stop;
    int watching;
    int keep;              /* versions of a directory kept loaded (--keep-versions) */
    uint64_t canary_seed;  /* --canary-seed */
} sv_registry;

int sv_registry_add(sv_registry *r, const char *name_eq_path, char *err, size_t err_bytes);
sv_model *sv_registry_find(sv_registry *r, const char *name, size_t name_len);
int sv_registry_watch(sv_registry *r, int period_ms);  /* start the reload thread */
void sv_registry_close(sv_registry *r);
/* sv_reload_check: reload m if its file changed; 1 reloaded, 0 unchanged, -1 refused. */
int sv_reload_check(sv_registry *r, sv_model *m);
/* acquire a predictor of the current version (waits for one); release gives it back. */
sv_version *sv_acquire(sv_model *m, sv_slot **slot);
void sv_release(sv_model *m, sv_version *v, sv_slot *slot);

/* sv_version_load, sv_version_free (registry.c): path loaded as version `number` of m, n
 * predictors (m's shapes set by the first load, kept by the later ones); NULL with err. */
sv_version *sv_version_load(sv_model *m, const char *path, int n, int number, char *err, size_t err_bytes);
void sv_version_free(sv_version *v);
/* sv_file_id: path's modification time, size and inode; -1 when it cannot be read. */
int sv_file_id(const char *path, int64_t *mtime_ns, int64_t *size, int64_t *inode);

/* ---- versions (versions.c) ---- */
/* sv_version_number: s (n bytes) as a version number: 1 to SV_MAX_VERSION in decimal, without
 * sign, space or leading zero; -1 for anything else ("../x", "01", "+1", 20 digits). */
int sv_version_number(const char *s, size_t n);
/* sv_versions_open: m->path is a directory: load its newest r->keep versions; -1 with err when
 * none loads. */
int sv_versions_open(sv_registry *r, sv_model *m, char *err, size_t err_bytes);
/* sv_versions_scan: look at m's directory again: load versions that appeared (the newest
 * r->keep that are not refused), drop those past keep or gone. 1 when a version was loaded. */
int sv_versions_scan(sv_registry *r, sv_model *m);
/* sv_acquire_for: a predictor of version want of m (0: the newest, or the canary's pick), or
 * NULL when want is not loaded. sv_acquire(m, slot) is sv_acquire_for(m, 0, slot). */
sv_version *sv_acquire_for(sv_model *m, int want, sv_slot **slot);
/* sv_version_state: version want's (0: the newest) number and checkpoint info; -1: not loaded. */
int sv_version_state(sv_model *m, int want, int *number, ddl_checkpoint_info *info);
/* sv_versions_list: the loaded version numbers of m, oldest first, into out (SV_MAX_KEEP); count. */
int sv_versions_list(sv_model *m, int *out);
/* sv_canary_newest: the canary's pick for request number k (0, 1, ...) under seed: 1 for the
 * newest version, 0 for the one before; splitmix64(seed + (k + 1) * golden) % 100 < percent. */
int sv_canary_newest(uint64_t seed, uint64_t k, int percent);
/* sv_registry_canary: --canary NAME=PERCENT for a directory model of r; -1 with err. */
int sv_registry_canary(sv_registry *r, const char *arg, char *err, size_t err_bytes);
/* sv_versions_metrics: the versions served and the requests each answered, Prometheus text. */
size_t sv_versions_metrics(const sv_registry *r, char *out, size_t cap);

/* ---- the inference log (reqlog.c) ---- */
/* sv_reqlog_open: --log-requests path: a writer thread and a queue of queue_lines lines; the file
 * is moved to path.1 when the next line would take it past max_bytes. -1 with err. */
int sv_reqlog_open(const char *path, size_t max_bytes, int queue_lines, char *err, size_t err_bytes);
/* sv_reqlog_request: one line for a request to model m (url, its body of n bytes) answered in
 * micros: queued for the writer, or dropped (counted) when the queue is full. Never blocks on
 * the file. No-op without --log-requests. */
void sv_reqlog_request(const sv_reply *rep, const char *url, const unsigned char *body, size_t n, uint64_t micros);
/* sv_reqlog_close: write what is queued (waiting at most 2 s for the file) and stop the writer. */
void sv_reqlog_close(void);
size_t sv_reqlog_metrics(char *out, size_t cap);
/* sv_answered: the request of rep was answered by version v with the n instances of slot s:
 * counted for v, named in the reply (X-Model-Version) and noted for the log. */
void sv_answered(sv_reply *rep, const sv_model *m, sv_version *v, const sv_slot *s, int n);

/* ---- arena (jansson's allocator) ---- */
void sv_arena_install(void);          /* before any thread: json_set_alloc_funcs */
int sv_arena_begin(void);             /* this thread's arena on: 0, or -1 (no memory) */
void sv_arena_end(void);              /* off and reset */
int sv_arena_exhausted(void);         /* the last parse ran out of arena */
void sv_arena_yajl_funcs(yajl_alloc_funcs *f);  /* yajl's allocator: the same arena */
void *sv_arena_alloc(size_t n);       /* n bytes (16-byte aligned) of this request's arena; NULL: full or off */
size_t sv_arena_bytes(void);          /* what one request's arena holds at most */

/* ---- metrics ---- */
#define SV_BATCH_BUCKETS 7
#define SV_WAIT_BUCKETS 10
extern const int sv_batch_bucket[SV_BATCH_BUCKETS];     /* images of a pass: 1, 2, 4, ... 64 */
extern const int64_t sv_wait_bucket_us[SV_WAIT_BUCKETS]; /* a request's wait for its batch */
void sv_metrics_observe(sv_model *m, int status, uint64_t micros);
void sv_metrics_other(int status);    /* a request for no model */
size_t sv_metrics_text(const sv_registry *r, char *out, size_t cap);

/* ---- images ---- */
/* The name of a model's one input, in both protocols' metadata and named requests. */
#define SV_INPUT_NAME "input"

/* sv_image_decode: a PNG, JPEG, PGM (P5 or P2) or PPM body of any size to the model's c x h x w
 * 8-bit pixels (grey, or RGB for c 3) in out (cap bytes), decoded and resized by the library as
 * training does (ddl_image_decode), its memory from the request's arena. Returns 0, or -1 with
 * why (the library's message, e.g. "the body: a damaged PNG file: ..."). */
int sv_image_decode(const unsigned char *body, size_t n, int c, int w, int h, uint8_t *out, size_t cap,
                    char *why, size_t why_bytes);

/* ---- training (--logdir) ---- */
/* sv_training_json: {"logdir", "runs": [...]}: the scalars of every run in dir (NULL: none). */
json_t *sv_training_json(const char *dir);

/* ---- scenes (scenes.c) ---- */
/* sv_scene: GET /api/scene/MODEL/N: scene N for segmentation model m, pixels and truth as rows. */
void sv_scene(sv_model *m, const char *arg, sv_reply *rep);

/* ---- protocols (tfserving.c, kserve.c) ---- */
void sv_model_state(sv_model *m, int *number, ddl_checkpoint_info *info);
json_t *sv_class_names(sv_model *m); /* the checkpoint's class names, or JSON null */
int sv_is_image(const char *ctype);  /* by its Content-Type only: image/... */
void sv_tfs_status(sv_model *m, sv_reply *rep);
void sv_tfs_metadata(sv_model *m, sv_reply *rep);
void sv_tfs_predict(sv_model *m, const char *ctype, const unsigned char *body, size_t n, sv_reply *rep);
void sv_v2_model(sv_model *m, sv_reply *rep);
void sv_v2_infer(sv_model *m, const unsigned char *body, size_t n, sv_reply *rep);

/* ---- web page ---- */
extern const unsigned char sv_web_index[];
extern const size_t sv_web_index_bytes;

/* ---- the daemon (http.c) ---- */
struct MHD_Daemon;
struct sockaddr;
struct MHD_Daemon *sv_http_start(const struct sockaddr *addr, int threads, int idle_timeout_s);
int sv_http_port(struct MHD_Daemon *d);
void sv_http_stop(struct MHD_Daemon *d);

/* ---- request handling (api.c) ---- */
/* sv_answer: a short account of an answer for the inference log: n instances, the first few's
 * top class and its probability (classifiers; class -1 for a segmentation). */
#define SV_ANSWER_TOP 4
typedef struct sv_answer {
    int n;
    int top[SV_ANSWER_TOP];
    float prob[SV_ANSWER_TOP];
} sv_answer;

struct sv_reply {
    int status;
    const char *type;  /* Content-Type */
    char *body;        /* caller buffer */
    size_t len, cap;
    sv_model *model;   /* for metrics; NULL: none */
    /* the request's Inference-Header-Content-Length (KServe's binary tensors; NULL: none) */
    const char *infer_header;
    size_t binary_header; /* the reply's JSON header length when binary outputs follow it (0: none) */
    int want_version;     /* the path's /versions/N (0: none: the newest, or the canary's pick) */
    int version;          /* the version that answered (0: none), named in a header and the log */
    sv_answer answer;     /* what it answered, for the inference log */
};

typedef struct sv_server {
    sv_registry reg;
    const char *logdir;
    const char *data;  /* --data DIR: Fashion-MNIST for /api/scene (NULL: Debian's path) */
    char token[256];   /* "" : no auth */
    int body_timeout_s; /* a body still arriving this long after its request began: closed */
    char listen_host[256];        /* --listen's host: a name the Host header may carry */
    const char *allow_hosts[16];  /* --allow-host: more names for Host and Origin */
    int n_allow_hosts, any_host;  /* any_host: --allow-host '*', no Host or Origin check */
    _Atomic uint64_t other_req[6];
    /* --canary NAME=PERCENT ... (applied once the models are loaded), the inference log */
    const char *canary[SV_MAX_MODELS];
    int n_canary;
    const char *log_path;  /* --log-requests FILE (NULL: none) */
    double log_max_mb;     /* --log-max-mb */
    int log_queue;         /* --log-queue: lines waiting for the writer at most */
    int max_batch;                /* --max-batch: images of one batched pass; 1: no batching */
    int batch_timeout_us;         /* --batch-timeout-us: how long a batch waits to fill */
    _Atomic int batch_stop;       /* stopping: batches wait no more */
} sv_server;

extern sv_server *sv_srv;   /* the one server of this process (set by main) */

/* sv_route_takes_body: a request to url by method has a body to read (predict and infer):
 * any other request's body is discarded as it arrives, never buffered. */
int sv_route_takes_body(const char *method, const char *url);
/* sv_route_is_probe: a health or readiness probe (GET /ping, /v2/health/live|ready,
 * /v2/models/NAME/ready, /v1/models/NAME): answered without the token, as Kubernetes needs. */
int sv_route_is_probe(const char *method, const char *url);
/* sv_host_check: NULL if the request's Host and Origin headers (NULL: absent) name this server,
 * else why not (into why). */
const char *sv_host_check(const char *host, const char *origin, char *why, size_t why_bytes);
/* sv_route: answer method url with body (n bytes, content type ctype) into rep. */
void sv_route(const char *method, const char *url, const char *ctype, const unsigned char *body, size_t n,
              sv_reply *rep);
/* sv_parse: body as a JSON object (in the arena); NULL with rep set to a 400 or 413. */
json_t *sv_parse(const unsigned char *body, size_t n, sv_reply *rep);
/* sv_error: rep = {"error": msg} with status. */
void sv_error(sv_reply *rep, int status, const char *fmt, ...);
#define SV_REPLY_MIN 4096   /* a reply buffer holds at least this */
/* sv_reply_reserve: room for n bytes in rep->body (the buffer is the connection's). */
int sv_reply_reserve(sv_reply *rep, size_t n);
/* sv_reply_json: j (consumed) encoded into rep with status; -1 (rep: a 500) when it cannot be.
 * Reals with 6 significant digits; sv_reply_json_exact: with up to 9, for sv_exact's values. */
int sv_reply_json(sv_reply *rep, int status, json_t *j);
int sv_reply_json_exact(sv_reply *rep, int status, json_t *j);

/* ---- predict path (predict.c) ---- */
/* sv_instance: instance i (JSON arrays of pixels) into dst (m's c*h*w bytes); -1 with why. */
int sv_instance(const sv_model *m, const json_t *j, int i, uint8_t *dst, char *why, size_t why_bytes);
/* sv_shape_ok: nested arrays of depth, lengths dims (ragged: not all alike) holding n pixels
 * make one instance of m: SV_CHW for [c*h*w], [h, w] (c = 1), [c, h, w] or [h, w, 1]; SV_HWC for
 * [h, w, c] (c > 1, and not also [c, h, w]: C == H == W is taken as (C, H, W)); 0 for none. */
#define SV_CHW 1
#define SV_HWC 2
int sv_shape_ok(const sv_model *m, int depth, const int *dims, int ragged, size_t n);
/* sv_to_chw: one instance of m's pixels (H, W, C) reordered in place to (C, H, W) (scratch from
 * the arena); -1 when the arena is full. */
int sv_to_chw(const sv_model *m, uint8_t *px);
/* sv_shapes_text: the shapes an instance of m may have, for an error, each with lead before its
 * dims ("" or "n, "); into s (n bytes), returns the length. */
size_t sv_shapes_text(const sv_model *m, const char *lead, char *s, size_t n);
/* sv_stream_instances: a body of exactly {"instances": [...]} that the tree path would accept,
 * parsed without a tree into dst (m->max_inst instances); their count, or 0: declined, parse it
 * with sv_parse (stream.c). */
int sv_stream_instances(const sv_model *m, const unsigned char *body, size_t n, uint8_t *dst);
/* sv_pixels: the numbers of j (arrays nested in any way) into dst, at most cap; *n: how many j
 * holds (those past cap counted, not written). */
int sv_pixels(const json_t *j, uint8_t *dst, size_t cap, size_t *n, char *why, size_t why_bytes);
/* sv_run: n instances of s->pixels through s's predictor into s->probs and s->classes; with
 * --max-batch, in one pass with other requests' (sv_batch_run): the same bits. sv_run_alone:
 * in a pass of their own. 0, or -1 with why. */
int sv_run(sv_slot *s, const sv_model *m, int n, char *why, size_t why_bytes);
int sv_run_alone(sv_slot *s, const sv_model *m, int n, char *why, size_t why_bytes);

/* ---- dynamic batching (batch.c) ---- */
/* sv_batch_init: batching for every model of r (after they are loaded, before the daemon);
 * 0, or -1. sv_batch_stop: batches forming run now and no later one waits (at shutdown).
 * sv_batch_run: s's n instances (n <= --max-batch) run in a pass with the requests to m that
 * arrive within --batch-timeout-us, their outputs into s; 0, or -1 with why. */
int sv_batch_init(sv_registry *r);
void sv_batch_stop(sv_registry *r);
int sv_batch_run(sv_model *m, sv_slot *s, int n, char *why, size_t why_bytes);
/* sv_probs_json, sv_mask_json: instance i's probabilities [C] (as sv_exact), or its mask [H][W]
 * of classes. */
json_t *sv_probs_json(const sv_model *m, const sv_slot *s, int i);
json_t *sv_mask_json(const sv_model *m, const sv_slot *s, int i);
/* sv_exact: a float32 as the double of its shortest decimal that reads back as the same float32
 * (6 to 9 digits): json_real of it, written by sv_reply_json_exact, is that decimal, so a
 * client that reads it as float32 gets the predictor's bits ("0.1", not "0.100000001"). */
double sv_exact(float f);
/* sv_reply_probs: {"predictions": [[p, ...], ...]} for n instances of a classifier, written
 * straight into rep (the text jansson would give for sv_exact values, without building the tree). */
int sv_reply_probs(sv_reply *rep, const sv_model *m, const sv_slot *s, int n);

/* ---- binary tensors (binary.c) ---- */
/* sv_binary_header: the Inference-Header-Content-Length value (digits only, at most the body's
 * body_bytes) into *json_bytes; -1 with rep set to a 400 naming it. */
int sv_binary_header(const char *value, size_t body_bytes, size_t *json_bytes, sv_reply *rep);
/* sv_binary_locate: where input `which` of inputs finds its binary data among the tail_bytes
 * after the JSON header (has_header: the request had one): 1 with *off and *size, 0 when it has
 * none ("data" in the JSON), -1 with rep set: a size that is not a byte count, both "data" and
 * binary, binary data without the header, sizes past the tail or not adding up to it. */
int sv_binary_locate(const json_t *inputs, size_t which, size_t tail_bytes, int has_header, size_t *off,
                     size_t *size, sv_reply *rep);
/* sv_binary_elem_bytes: bytes of one element of datatype dt (UINT8 .. FP64), 0 for one not taken. */
size_t sv_binary_elem_bytes(const char *dt);
/* sv_binary_pixels: count elements of dt, little-endian at src, to pixels in dst as the JSON path
 * takes them (0..255, rounded as lrint); -1 with why naming the first that is not. */
int sv_binary_pixels(const char *dt, const unsigned char *src, size_t count, uint8_t *dst, char *why,
                     size_t why_bytes);
/* sv_binary_out: an output sent as binary: count float32 (f32) or int32 (of u16: classes) values. */
typedef struct sv_binary_out {
    const float *f32;
    const uint16_t *u16;
    size_t count;
} sv_binary_out;
/* sv_binary_reply: ans (consumed: its binary outputs carry binary_data_size and no data) then the
 * n_outs outputs' bytes, little-endian, into rep (200, application/octet-stream, binary_header
 * set); -1 with rep a 500 when it cannot be. */
int sv_binary_reply(sv_reply *rep, json_t *ans, const sv_binary_out *outs, int n_outs);

#endif
