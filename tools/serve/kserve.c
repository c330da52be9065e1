/* kserve.c - the Open Inference Protocol (KServe v2) that Triton, KServe and OpenVINO speak:
 * GET /v2/models/NAME (name, versions, platform, input and output tensors),
 * GET /v2/models/NAME/ready, and POST /v2/models/NAME/infer with
 * {"inputs": [{"name", "shape": [n, ...], "datatype", "data": [...]}]} answering
 * {"model_name", "model_version", "outputs": [...]}: "probabilities" (FP32 [n, C]) and "classes"
 * (INT32 [n] or [n, H, W]). The health routes are in api.c. */
#include "serve.h"

#include <string.h>

void sv_v2_model(sv_model *m, sv_reply *rep)
{
    int v, seg = m->oh * m->ow > 1;
    ddl_checkpoint_info in;
    char ver[16];
    sv_model_state(m, &v, &in);
    snprintf(ver, sizeof ver, "%d", v);
    json_t *outs = json_array();
    if (!seg)
        json_array_append_new(outs, json_pack("{s:s,s:s,s:[ii]}", "name", "probabilities", "datatype", "FP32",
                                              "shape", -1, m->C));
    json_array_append_new(outs, seg ? json_pack("{s:s,s:s,s:[iii]}", "name", "classes", "datatype", "INT32",
                                                "shape", -1, m->oh, m->ow)
                                    : json_pack("{s:s,s:s,s:[i]}", "name", "classes", "datatype", "INT32",
                                                "shape", -1));
    sv_reply_json(rep, 200, json_pack("{s:s,s:[s],s:s,s:[{s:s,s:s,s:[iiii]}],s:o}", "name", m->name, "versions",
                                      ver, "platform", "ddl_c", "inputs", "name", SV_INPUT_NAME, "datatype", "UINT8",
                                      "shape", -1, m->c, m->h, m->w, "outputs", outs));
}

/* v2_input: inputs[0] of root into s: its shape [n, ...] must be n instances of m's input in
 * (C, H, W) or (H, W, C) (sv_shape_ok decides which), its data n * c*h*w pixels (flat or nested,
 * in the shape's order). n, or -1 with rep set. */
static int v2_input(sv_model *m, const json_t *root, sv_slot *s, sv_reply *rep)
{
    const json_t *inputs = json_object_get(root, "inputs"), *in = NULL;
    for (size_t i = 0; i < json_array_size(inputs) && !in; i++) { /* by name: the metadata's one input */
        const char *name = json_string_value(json_object_get(json_array_get(inputs, i), "name"));
        in = name && strcmp(name, SV_INPUT_NAME) == 0 ? json_array_get(inputs, i) : NULL;
    }
    const json_t *shape = json_object_get(in, "shape"), *data = json_object_get(in, "data");
    const char *dt = json_string_value(json_object_get(in, "datatype"));
    if (json_array_size(inputs) > 0 && !in) {
        const char *first = json_string_value(json_object_get(json_array_get(inputs, 0), "name"));
        sv_error(rep, 400, "inputs: no input named \"%s\" (this model's one input), found %s%.40s%s", SV_INPUT_NAME,
                 first ? "\"" : "one without a name", first ? first : "", first ? "\"" : "");
        return -1;
    }
    if (!json_is_object(in) || !json_is_array(shape) || !json_is_array(data) || !dt) {
        sv_error(rep, 400, "expected {\"inputs\": [{\"name\": \"%s\", \"shape\", \"datatype\", \"data\"}]}",
                 SV_INPUT_NAME);
        return -1;
    }
    static const char *const types[] = {"UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
                                        "FP16", "FP32", "FP64"};
    size_t t = 0;
    while (t < sizeof types / sizeof types[0] && strcmp(types[t], dt) != 0)
        t++;
    if (t == sizeof types / sizeof types[0]) {
        sv_error(rep, 400, "datatype \"%.32s\": expected a number type (UINT8, INT32, FP32, ...)", dt);
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
    size_t got;
    if (sv_pixels(data, s->pixels, (size_t)n * in_sz, &got, why, sizeof why) || got != (size_t)n * in_sz) {
        sv_error(rep, 400, "data: %s%zu pixels for shape [%lld, ...], expected %zu", got ? "" : why, got, n,
                 (size_t)n * in_sz);
        return -1;
    }
    for (long long i = 0; layout == SV_HWC && i < n; i++) /* the shape said (H, W, C) */
        if (sv_to_chw(m, s->pixels + (size_t)i * in_sz) != 0) {
            sv_error(rep, 413, "no memory left to reorder the pixels of instance %lld", i);
            return -1;
        }
    return (int)n;
}

void sv_v2_infer(sv_model *m, const unsigned char *body, size_t len, sv_reply *rep)
{
    json_t *root = sv_parse(body, len, rep);
    if (!root)
        return;
    sv_slot *s;
    sv_version *v = sv_acquire(m, &s);
    char why[300];
    int n = v2_input(m, root, s, rep), seg = m->oh * m->ow > 1;
    if (n > 0 && sv_run(s, m, n, why, sizeof why)) {
        sv_error(rep, 500, "%s", why);
        n = -1;
    }
    if (n > 0) {
        json_t *outs = json_array(), *probs = json_array(), *classes = json_array();
        size_t S = (size_t)m->oh * m->ow;
        for (size_t k = 0; !seg && k < (size_t)n * m->C; k++)
            json_array_append_new(probs, json_real(sv_exact(s->probs[k])));
        for (size_t k = 0; k < (size_t)n * S; k++)
            json_array_append_new(classes, json_integer(s->classes[k]));
        if (!seg)
            json_array_append_new(outs, json_pack("{s:s,s:s,s:[ii],s:o}", "name", "probabilities", "datatype",
                                                  "FP32", "shape", n, m->C, "data", probs));
        else
            json_decref(probs);
        json_array_append_new(outs, seg ? json_pack("{s:s,s:s,s:[iii],s:o}", "name", "classes", "datatype", "INT32",
                                                    "shape", n, m->oh, m->ow, "data", classes)
                                        : json_pack("{s:s,s:s,s:[i],s:o}", "name", "classes", "datatype", "INT32",
                                                    "shape", n, "data", classes));
        char ver[16];
        snprintf(ver, sizeof ver, "%d", v->number);
        json_t *ans = json_pack("{s:s,s:s,s:o}", "model_name", m->name, "model_version", ver, "outputs", outs);
        json_t *id = json_object_get(root, "id");
        if (json_is_string(id))
            json_object_set(ans, "id", id);
        sv_reply_json_exact(rep, 200, ans);
    }
    sv_release(m, v, s);
    json_decref(root);
}
