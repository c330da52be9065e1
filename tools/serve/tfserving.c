/* tfserving.c - the TensorFlow Serving REST subset clients already speak: GET /v1/models/NAME
 * (version status), GET /v1/models/NAME/metadata (signature, shapes, classes, normalisation)
 * and POST /v1/models/NAME:predict with {"instances": [...]} (or "inputs"), each instance in
 * (C, H, W) or (H, W, C) (predict.c decides which), or an image body (PNG, JPEG, PGM, PPM) of any
 * size, answering {"predictions": [...]}: class probabilities, or a mask of classes per pixel
 * for a segmentation model. SageMaker's POST /invocations is the same predict. Each route takes
 * /versions/N after the name (rep->want_version: that loaded version; 0: the newest, or the
 * canary's pick). */
#include "serve.h"

#include <string.h>
#include <strings.h>

/* sv_model_state: the current version's number and checkpoint info, read under the lock. */
void sv_model_state(sv_model *m, int *number, ddl_checkpoint_info *info)
{
    pthread_mutex_lock(&m->lock);
    *number = m->cur->number;
    *info = m->cur->info;
    pthread_mutex_unlock(&m->lock);
}

/* class_names: version want's (0: the newest) class names (the checkpoint's), or null; copied
 * under the lock, so a reload cannot free them meanwhile. */
static json_t *class_names(sv_model *m, int want)
{
    json_t *a = NULL;
    pthread_mutex_lock(&m->lock);
    const sv_version *v = m->cur;
    for (int i = 0; want && i < m->n_vers; i++)
        v = m->vers[i]->number == want ? m->vers[i] : v;
    const char *const *names = ddl_predictor_class_names(v->slots[0].pr);
    for (int i = 0; names && i < m->C; i++) {
        a = a ? a : json_array();
        json_array_append_new(a, json_string(names[i]));
    }
    pthread_mutex_unlock(&m->lock);
    return a ? a : json_null();
}

json_t *sv_class_names(sv_model *m) { return class_names(m, 0); }

/* normalisation: what the server does to the pixels: one mean and std, or one per channel. */
static json_t *normalisation(const sv_model *m, const ddl_checkpoint_info *in)
{
    if (!in->n_norm)
        return json_pack("{s:f,s:f}", "mean", (double)m->mean, "std", (double)m->std);
    json_t *mean = json_array(), *std = json_array();
    for (int c = 0; c < in->n_norm; c++) {
        json_array_append_new(mean, json_real(in->norm_mean[c]));
        json_array_append_new(std, json_real(in->norm_std[c]));
    }
    return json_pack("{s:o,s:o}", "mean", mean, "std", std);
}

/* version_status: TF Serving's status of one version. */
static json_t *version_status(int number, const char *state, const char *code, const char *message)
{
    char ver[16];
    snprintf(ver, sizeof ver, "%d", number);
    return json_pack("{s:s,s:s,s:{s:s,s:s}}", "version", ver, "state", state, "status", "error_code", code,
                     "error_message", message);
}

/* sv_tfs_status: GET /v1/models/NAME[/versions/N]: the versions loaded, newest first (or the one
 * the path names), and a directory's last refused version as TF Serving shows one that failed. */
void sv_tfs_status(sv_model *m, sv_reply *rep)
{
    int v, list[SV_MAX_KEEP + 1], n = sv_versions_list(m, list);
    ddl_checkpoint_info in;
    if (sv_version_state(m, rep->want_version, &v, &in) != 0) {
        sv_error(rep, 404, "model %s: version %d is no longer served", m->name, rep->want_version);
        return;
    }
    json_t *st = json_array();
    for (int i = n; i-- > 0;)
        if (!rep->want_version || list[i] == rep->want_version)
            json_array_append_new(st, version_status(list[i], "AVAILABLE", "OK", ""));
    pthread_mutex_lock(&m->lock);
    char why[sizeof m->refused_why];
    int refused = m->refused_number;
    memcpy(why, m->refused_why, sizeof why);
    json_t *p = NULL;
    for (int i = 0; i < m->n_vers && !p; i++) /* the file version v was loaded from */
        p = m->vers[i]->number == v ? json_string(m->vers[i]->path) : NULL;
    pthread_mutex_unlock(&m->lock);
    p = p ? p : json_string(m->path);
    if (!rep->want_version && m->is_dir && refused > list[n - 1])
        json_array_append_new(st, version_status(refused, "END", "UNKNOWN", why));
    sv_reply_json(rep, 200, json_pack("{s:o,s:{s:o,s:I,s:i,s:i,s:i}}", "model_version_status", st, "ddl", "path", p,
                                      "step", (json_int_t)in.step, "epoch", in.epoch, "reloads",
                                      atomic_load(&m->reloads), "refused", atomic_load(&m->refused)));
}

static json_t *dims(int a, int b, int c)
{
    return json_pack("{s:[{s:s},{s:i},{s:i},{s:i}]}", "dim", "size", "-1", "size", a, "size", b, "size", c);
}

void sv_tfs_metadata(sv_model *m, sv_reply *rep)
{
    int v;
    ddl_checkpoint_info in;
    char ver[16];
    if (sv_version_state(m, rep->want_version, &v, &in) != 0) {
        sv_error(rep, 404, "model %s: version %d is no longer served", m->name, rep->want_version);
        return;
    }
    snprintf(ver, sizeof ver, "%d", v);
    int seg = m->oh * m->ow > 1;
    json_t *sig = json_pack("{s:{s:{s:s,s:s,s:o}},s:{s:{s:s,s:s,s:o}},s:s}", "inputs", SV_INPUT_NAME, "name",
                            "pixels", "dtype", "DT_UINT8", "tensor_shape", dims(m->c, m->h, m->w), "outputs",
                            "predictions", "name", seg ? "classes" : "probabilities", "dtype",
                            seg ? "DT_UINT8" : "DT_FLOAT", "tensor_shape", seg ? dims(1, m->oh, m->ow)
                                                                               : dims(m->C, 1, 1),
                            "method_name", "tensorflow/serving/predict");
    sv_reply_json(rep, 200, json_pack("{s:{s:s,s:s,s:s},s:{s:{s:{s:o}}},s:{s:s,s:s,s:[iii],s:[iii],s:i,s:o,s:o,"
                                      "s:s,s:i,s:I,s:i}}",
                                      "model_spec", "name", m->name, "signature_name", "serving_default", "version",
                                      ver, "metadata", "signature_def", "signature_def", "serving_default", sig,
                                      "ddl", "model", m->kind, "task", seg ? "segmentation" : "classification",
                                      "input", m->c, m->h, m->w, "output", m->C, m->oh, m->ow, "classes", m->C,
                                      "class_names", class_names(m, v), "normalisation", normalisation(m, &in),
                                      "input_scale", "raw pixels 0..255: the server normalises them",
                                      "max_instances", m->max_inst, "step", (json_int_t)in.step, "version", v));
}

/* sv_is_image: the body is an image: its Content-Type says so (image/png, image/x-portable-graymap,
 * ...). Not sniffed from its bytes: a web page elsewhere can send a cross-site POST of text/plain
 * without asking first, but not of image/png, so an image never arrives by such a request. */
int sv_is_image(const char *ctype)
{
    return ctype && strncasecmp(ctype, "image/", 6) == 0;
}

/* sv_parse: body as a JSON object, in the arena; NULL with rep set (400, or 413 too complex). */
json_t *sv_parse(const unsigned char *body, size_t n, sv_reply *rep)
{
    json_error_t e;
    json_t *root = json_loadb((const char *)body, n, 0, &e);
    if (!root && sv_arena_exhausted())
        sv_error(rep, 413, "the JSON body is too complex (more values than this server parses in one request)");
    else if (!root)
        sv_error(rep, 400, "malformed JSON: %s (line %d, column %d)", e.text, e.line, e.column);
    else if (!json_is_object(root)) {
        sv_error(rep, 400, "expected a JSON object");
        json_decref(root);
        root = NULL;
    }
    return root;
}

/* named: the value of the model's one named input in obj ({"input": ...}, TF Serving's named
 * form), or NULL with rep set, naming what was there instead. */
static const json_t *named(const json_t *obj, const char *where, sv_reply *rep)
{
    const json_t *v = json_object_get(obj, SV_INPUT_NAME);
    if (!v || json_object_size(obj) != 1) {
        const char *first = json_object_iter_key(json_object_iter((json_t *)obj));
        sv_error(rep, 400, "%s: expected the one input \"%s\" (the signature's), found %s%.40s%s", where,
                 SV_INPUT_NAME, first ? "\"" : "nothing", first ? first : "", first && json_object_size(obj) > 1 ?
                 "\" and more" : first ? "\"" : "");
        return NULL;
    }
    return v;
}

/* instances: the instances of root into slot s, in TF Serving's row form ({"instances": [...]},
 * each an array of pixels or {"input": [...]}) or its columnar form ({"inputs": [...]} or
 * {"inputs": {"input": [...]}}); their count, or -1 with rep set. */
static int instances(sv_model *m, const json_t *root, sv_slot *s, sv_reply *rep)
{
    const json_t *in = json_object_get(root, "instances");
    in = in ? in : json_object_get(root, "inputs");
    if (json_is_object(in) && !(in = named(in, "inputs", rep)))
        return -1;
    int n = (int)json_array_size(in);
    char why[300];
    if (!json_is_array(in) || n < 1 || n > m->max_inst) {
        sv_error(rep, 400, "expected {\"instances\": [...]} with 1 to %d instances, found %s", m->max_inst,
                 !in ? "no \"instances\"" : !json_is_array(in) ? "\"instances\" not an array" : "another count");
        return -1;
    }
    size_t in_sz = (size_t)m->c * m->h * m->w;
    for (int i = 0; i < n; i++) {
        const json_t *one = json_array_get(in, (size_t)i);
        snprintf(why, sizeof why, "instance %d", i);
        if (json_is_object(one) && !(one = named(one, why, rep)))
            return -1;
        if (sv_instance(m, one, i, s->pixels + (size_t)i * in_sz, why, sizeof why)) {
            sv_error(rep, 400, "%s", why);
            return -1;
        }
    }
    return n;
}

void sv_tfs_predict(sv_model *m, const char *ctype, const unsigned char *body, size_t len, sv_reply *rep)
{
    json_t *root = NULL;
    char why[300];
    int image = sv_is_image(ctype);
    sv_slot *s;
    sv_version *v = sv_acquire_for(m, rep->want_version, &s);
    if (!v) {
        sv_error(rep, 404, "model %s: version %d is no longer served", m->name, rep->want_version);
        return;
    }
    int n = image ? 1 : sv_stream_instances(m, body, len, s->pixels);
    if (image && sv_image_decode(body, len, m->c, m->w, m->h, s->pixels, (size_t)m->max_inst * m->c * m->h * m->w, why,
                                 sizeof why)) {
        sv_error(rep, sv_arena_exhausted() ? 413 : 400, "%s", why);
        n = -1;
    } else if (n == 0) /* declined by the fast path: the tree gives the answer or the error */
        n = (root = sv_parse(body, len, rep)) ? instances(m, root, s, rep) : -1;
    if (n > 0 && sv_run(s, m, n, why, sizeof why)) {
        sv_error(rep, 500, "%s", why);
        n = -1;
    }
    if (n > 0)
        sv_answered(rep, m, v, s, n);
    if (n > 0 && m->oh * m->ow == 1) {
        sv_reply_probs(rep, m, s, n);
    } else if (n > 0) {
        json_t *preds = json_array();
        for (int i = 0; i < n; i++)
            json_array_append_new(preds, m->oh * m->ow > 1 ? sv_mask_json(m, s, i) : sv_probs_json(m, s, i));
        sv_reply_json_exact(rep, 200, json_pack("{s:o}", "predictions", preds));
    }
    sv_release(m, v, s);
    json_decref(root);
}
