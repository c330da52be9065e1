/* kserve.c - the Open Inference Protocol (KServe v2) that Triton, KServe and OpenVINO speak:
 * GET /v2/models/NAME (name, versions, platform, input and output tensors),
 * GET /v2/models/NAME/ready, and POST /v2/models/NAME/infer with
 * {"inputs": [{"name", "shape": [n, ...], "datatype", "data": [...]}]} answering
 * {"model_name", "model_version", "outputs": [...]}: "probabilities" (FP32 [n, C]) and "classes"
 * (INT32 [n] or [n, H, W]); an input's data may follow the JSON as binary, and the outputs too
 * when asked (binary.c checks the lengths). /v2/models/NAME/versions/N reaches version N (api.c
 * reads N, rep->want_version carries it). The health routes are in api.c. */
#include "serve.h"

#include <string.h>

void sv_v2_model(sv_model *m, sv_reply *rep)
{
    int seg = m->oh * m->ow > 1, list[SV_MAX_KEEP + 1], n = sv_versions_list(m, list);
    json_t *vers = json_array();
    for (int i = 0; i < n; i++) {
        char ver[16];
        snprintf(ver, sizeof ver, "%d", list[i]);
        if (!rep->want_version || list[i] == rep->want_version) /* the path's version, or every one loaded */
            json_array_append_new(vers, json_string(ver));
    }
    json_t *outs = json_array();
    if (!seg)
        json_array_append_new(outs, json_pack("{s:s,s:s,s:[ii]}", "name", "probabilities", "datatype", "FP32",
                                              "shape", -1, m->C));
    json_array_append_new(outs, seg ? json_pack("{s:s,s:s,s:[iii]}", "name", "classes", "datatype", "INT32",
                                                "shape", -1, m->oh, m->ow)
                                    : json_pack("{s:s,s:s,s:[i]}", "name", "classes", "datatype", "INT32",
                                                "shape", -1));
    sv_reply_json(rep, 200, json_pack("{s:s,s:o,s:s,s:[{s:s,s:s,s:[iiii]}],s:o}", "name", m->name, "versions",
                                      vers, "platform", "ddl_c", "inputs", "name", SV_INPUT_NAME, "datatype", "UINT8",
                                      "shape", -1, m->c, m->h, m->w, "outputs", outs));
}

/* v2_input: the input named SV_INPUT_NAME of root into s: its shape [n, ...] must be n instances
 * of m's input in (C, H, W) or (H, W, C) (sv_shape_ok decides which), its data n * c*h*w pixels
 * (flat or nested, in the shape's order) in the JSON, or as binary_data_size bytes of the tail
 * (the tail_bytes after the JSON header; has_header: the request had one). n, or -1 with rep set. */
static int v2_input(sv_model *m, const json_t *root, sv_slot *s, const unsigned char *tail, size_t tail_bytes,
                    int has_header, sv_reply *rep)
{
    const json_t *inputs = json_object_get(root, "inputs"), *in = NULL;
    size_t which = 0;
    for (size_t i = 0; i < json_array_size(inputs) && !in; i++) { /* by name: the metadata's one input */
        const char *name = json_string_value(json_object_get(json_array_get(inputs, i), "name"));
        in = name && strcmp(name, SV_INPUT_NAME) == 0 ? json_array_get(inputs, which = i) : NULL;
    }
    const json_t *shape = json_object_get(in, "shape"), *data = json_object_get(in, "data");
    const char *dt = json_string_value(json_object_get(in, "datatype"));
    if (json_array_size(inputs) > 0 && !in) {
        const char *first = json_string_value(json_object_get(json_array_get(inputs, 0), "name"));
        sv_error(rep, 400, "inputs: no input named \"%s\" (this model's one input), found %s%.40s%s", SV_INPUT_NAME,
                 first ? "\"" : "one without a name", first ? first : "", first ? "\"" : "");
        return -1;
    }
    size_t off = 0, bin_bytes = 0;
    int bin = in ? sv_binary_locate(inputs, which, tail_bytes, has_header, &off, &bin_bytes, rep) : 0;
    if (bin < 0)
        return -1;
    if (!json_is_object(in) || !json_is_array(shape) || (!bin && !json_is_array(data)) || !dt) {
        sv_error(rep, 400, "expected {\"inputs\": [{\"name\": \"%s\", \"shape\", \"datatype\", \"data\"}]}%s",
                 SV_INPUT_NAME, has_header ? " (or binary_data_size in its parameters, the data after the JSON)"
                                           : "");
        return -1;
    }
    size_t elem = sv_binary_elem_bytes(dt);
    if (!elem && strcmp(dt, "FP16") != 0) {
        sv_error(rep, 400, "datatype \"%.32s\": expected a number type (UINT8, INT32, FP32, ...)", dt);
        return -1;
    }
    if (!elem && bin) {
        sv_error(rep, 400, "datatype FP16: not taken as binary data here (UINT8, FP32, ... are)");
        return -1;
    }
    size_t in_sz = (size_t)m->c * m->h * m->w, per = 1;
    long long n = json_integer_value(json_array_get(shape, 0));
    int dims[3] = {0}, depth = (int)json_array_size(shape) - 1, layout = 0;
    for (int d = 0; d < depth && depth <= 3 && per <= in_sz; d++) { /* no product past in_sz: no overflow */
        long long k = json_integer_value(json_array_get(shape, (size_t)d + 1));
        dims[d] = k >= 1 && k <= (long long)in_sz ? (int)k : 0;
        per *= (size_t)dims[d];
    }
    if (depth >= 1 && depth <= 3 && per == in_sz)
        layout = sv_shape_ok(m, depth, dims, 0, in_sz);
    if (n < 1 || n > m->max_inst || !layout) {
        char takes[240];
        sv_shapes_text(m, "n, ", takes, sizeof takes);
        sv_error(rep, 400, "shape: model %s takes %s with n from 1 to %d", m->name, takes, m->max_inst);
        return -1;
    }
    char why[300];
    size_t got, want = (size_t)n * in_sz; /* n <= max_inst: want * elem is small */
    if (bin && bin_bytes != want * elem) {
        sv_error(rep, 400, "inputs[%zu]: binary_data_size %zu, its shape [%lld, ...] of %s takes %zu bytes", which,
                 bin_bytes, n, dt, want * elem);
        return -1;
    }
    if (bin && sv_binary_pixels(dt, tail + off, want, s->pixels, why, sizeof why)) {
        sv_error(rep, 400, "inputs[%zu] (binary): %s", which, why);
        return -1;
    }
    if (!bin && (sv_pixels(data, s->pixels, want, &got, why, sizeof why) || got != want)) {
        sv_error(rep, 400, "data: %s%zu pixels for shape [%lld, ...], expected %zu", got ? "" : why, got, n, want);
        return -1;
    }
    for (long long i = 0; layout == SV_HWC && i < n; i++) /* the shape said (H, W, C) */
        if (sv_to_chw(m, s->pixels + (size_t)i * in_sz) != 0) {
            sv_error(rep, 413, "no memory left to reorder the pixels of instance %lld", i);
            return -1;
        }
    return (int)n;
}

#define OUT_PROBS 1
#define OUT_CLASSES 2

/* v2_wanted: the outputs root asks for (OUT_* bits; all when it names none) into *want, and
 * those it wants as binary data into *bin; -1 with rep set for an output the model has not. */
static int v2_wanted(const sv_model *m, const json_t *root, int *want, int *bin, sv_reply *rep)
{
    int seg = m->oh * m->ow > 1, all = seg ? OUT_CLASSES : OUT_PROBS | OUT_CLASSES;
    int bin_all = json_is_true(json_object_get(json_object_get(root, "parameters"), "binary_data_output"));
    const json_t *outs = json_object_get(root, "outputs");
    *want = outs ? 0 : all, *bin = outs || !bin_all ? 0 : all;
    if (outs && !json_is_array(outs)) {
        sv_error(rep, 400, "outputs: expected an array of {\"name\", \"parameters\"}");
        return -1;
    }
    for (size_t i = 0; i < json_array_size(outs); i++) {
        const json_t *o = json_array_get(outs, i);
        const char *name = json_string_value(json_object_get(o, "name"));
        int k = name && !seg && strcmp(name, "probabilities") == 0 ? OUT_PROBS
              : name && strcmp(name, "classes") == 0               ? OUT_CLASSES : 0;
        if (!k) {
            sv_error(rep, 400, "outputs[%zu]: no output named %s%.40s%s (this model's: %s)", i, name ? "\"" : "",
                     name ? name : "(none)", name ? "\"" : "", seg ? "classes" : "probabilities, classes");
            return -1;
        }
        const json_t *b = json_object_get(json_object_get(o, "parameters"), "binary_data");
        *want |= k;
        *bin |= (b ? json_is_true(b) : bin_all) ? k : 0;
    }
    return 0;
}

/* v2_answer: the outputs of n instances in s that root wants, as JSON or binary data. */
static void v2_answer(sv_model *m, const sv_version *v, const sv_slot *s, int n, int want, int bin,
                      const json_t *root, sv_reply *rep)
{
    json_t *outs = json_array();
    sv_binary_out b[2];
    int n_bin = 0, seg = m->oh * m->ow > 1;
    size_t S = (size_t)m->oh * m->ow;
    if (want & OUT_PROBS) {
        json_t *o = json_pack("{s:s,s:s,s:[ii]}", "name", "probabilities", "datatype", "FP32", "shape", n, m->C);
        size_t count = (size_t)n * m->C;
        if (bin & OUT_PROBS) {
            b[n_bin++] = (sv_binary_out){.f32 = s->probs, .count = count};
            json_object_set_new(o, "parameters", json_pack("{s:I}", "binary_data_size", (json_int_t)(count * 4)));
        } else {
            json_t *probs = json_array();
            for (size_t k = 0; k < count; k++)
                json_array_append_new(probs, json_real(sv_exact(s->probs[k])));
            json_object_set_new(o, "data", probs);
        }
        json_array_append_new(outs, o);
    }
    if (want & OUT_CLASSES) {
        json_t *o = seg ? json_pack("{s:s,s:s,s:[iii]}", "name", "classes", "datatype", "INT32", "shape", n, m->oh,
                                    m->ow)
                        : json_pack("{s:s,s:s,s:[i]}", "name", "classes", "datatype", "INT32", "shape", n);
        if (bin & OUT_CLASSES) {
            b[n_bin++] = (sv_binary_out){.u16 = s->classes, .count = (size_t)n * S};
            json_object_set_new(o, "parameters", json_pack("{s:I}", "binary_data_size", (json_int_t)(n * S * 4)));
        } else {
            json_t *classes = json_array();
            for (size_t k = 0; k < (size_t)n * S; k++)
                json_array_append_new(classes, json_integer(s->classes[k]));
            json_object_set_new(o, "data", classes);
        }
        json_array_append_new(outs, o);
    }
    char ver[16];
    snprintf(ver, sizeof ver, "%d", v->number);
    json_t *ans = json_pack("{s:s,s:s,s:o}", "model_name", m->name, "model_version", ver, "outputs", outs);
    json_t *id = json_object_get(root, "id");
    if (json_is_string(id))
        json_object_set(ans, "id", id);
    if (n_bin)
        sv_binary_reply(rep, ans, b, n_bin);
    else
        sv_reply_json_exact(rep, 200, ans);
}

void sv_v2_infer(sv_model *m, const unsigned char *body, size_t len, sv_reply *rep)
{
    size_t json_bytes = len; /* with Inference-Header-Content-Length: the JSON before the binary data */
    if (rep->infer_header && sv_binary_header(rep->infer_header, len, &json_bytes, rep) != 0)
        return;
    json_t *root = sv_parse(body, json_bytes, rep);
    int want, bin;
    if (!root || v2_wanted(m, root, &want, &bin, rep) != 0) {
        json_decref(root);
        return;
    }
    sv_slot *s;
    sv_version *v = sv_acquire_for(m, rep->want_version, &s);
    if (!v) {
        sv_error(rep, 404, "model %s: version %d is no longer served", m->name, rep->want_version);
        json_decref(root);
        return;
    }
    char why[300];
    int n = v2_input(m, root, s, body + json_bytes, len - json_bytes, rep->infer_header != NULL, rep);
    if (n > 0 && sv_run(s, m, n, why, sizeof why)) {
        sv_error(rep, 500, "%s", why);
        n = -1;
    }
    if (n > 0) {
        sv_answered(rep, m, v, s, n);
        v2_answer(m, v, s, n, want, bin, root, rep);
    }
    sv_release(m, v, s);
    json_decref(root);
}
