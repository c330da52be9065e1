/* binary.c - KServe v2's binary tensor data extension (Triton's, KServe's, OpenVINO's): a request
 * body of a JSON header, its length in the Inference-Header-Content-Length header, followed by
 * the raw tensors of the inputs that say "parameters": {"binary_data_size": N}, in their order,
 * little-endian, row major; and a reply that puts outputs after its JSON the same way when the
 * request asks ("binary_data": true on a requested output, or "binary_data_output": true in the
 * request's parameters). Every length a client gives is checked against the body before it is
 * used: a header past the body, a size that is not a non-negative integer, sizes past the body's
 * end or short of it, an input with both "data" and binary data, are 400s naming what was wrong.
 * Knows the protocol's JSON, not the model: kserve.c decides shapes. */
#include "serve.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- the request ---- */

int sv_binary_header(const char *value, size_t body_bytes, size_t *json_bytes, sv_reply *rep)
{
    /* digits only: strtoull would take "-5" (as a huge number), " 5" and "+5" */
    size_t n = 0, k = 0;
    for (; value[k] >= '0' && value[k] <= '9' && k < 20; k++)
        n = n * 10 + (size_t)(value[k] - '0');
    if (!value[0] || value[k] || k > 15 || n > body_bytes) {
        sv_error(rep, 400, "Inference-Header-Content-Length: \"%.40s\": expected the JSON header's length in bytes, "
                 "from 0 to the body's %zu", value, body_bytes);
        return -1;
    }
    *json_bytes = n;
    return 0;
}

/* binary_size: input in's "binary_data_size" (1), none (0), or -1 with rep set. */
static int binary_size(const json_t *in, size_t i, size_t *size, sv_reply *rep)
{
    const json_t *p = json_object_get(in, "parameters");
    const json_t *b = json_object_get(p, "binary_data_size");
    if (!b)
        return 0;
    if (!json_is_integer(b) || json_integer_value(b) < 0) {
        sv_error(rep, 400, "inputs[%zu]: binary_data_size is not a byte count (a non-negative integer)", i);
        return -1;
    }
    if (json_object_get(in, "data")) {
        sv_error(rep, 400, "inputs[%zu]: both \"data\" and binary_data_size: its values are either in the JSON or "
                 "after it, not both", i);
        return -1;
    }
    *size = (size_t)json_integer_value(b);
    return 1;
}

int sv_binary_locate(const json_t *inputs, size_t which, size_t tail_bytes, int has_header, size_t *off,
                     size_t *size, sv_reply *rep)
{
    size_t at = 0;
    int found = 0;
    for (size_t i = 0; i < json_array_size(inputs); i++) {
        size_t sz = 0;
        int r = binary_size(json_array_get(inputs, i), i, &sz, rep);
        if (r < 0)
            return -1;
        if (r && !has_header) {
            sv_error(rep, 400, "inputs[%zu]: binary_data_size without an Inference-Header-Content-Length header "
                     "(the length of the JSON before the binary data)", i);
            return -1;
        }
        if (r && sz > tail_bytes - at) { /* compared with what is left: the sum cannot overflow */
            sv_error(rep, 400, "inputs[%zu]: binary_data_size %zu runs past the body: %zu bytes follow the JSON "
                     "header, %zu of them taken by the inputs before", i, sz, tail_bytes, at);
            return -1;
        }
        if (r && i == which)
            *off = at, *size = sz, found = 1;
        at += r ? sz : 0;
    }
    if (at != tail_bytes) {
        sv_error(rep, 400, "%zu bytes after the JSON header, the inputs' binary_data_size add up to %zu", tail_bytes,
                 at);
        return -1;
    }
    return found;
}

/* ---- values ---- */

size_t sv_binary_elem_bytes(const char *dt)
{
    static const struct { const char *name; size_t bytes; } t[] = {
        {"UINT8", 1}, {"INT8", 1}, {"UINT16", 2}, {"INT16", 2}, {"UINT32", 4}, {"INT32", 4},
        {"UINT64", 8}, {"INT64", 8}, {"FP32", 4}, {"FP64", 8}};
    for (size_t i = 0; dt && i < sizeof t / sizeof t[0]; i++)
        if (strcmp(dt, t[i].name) == 0)
            return t[i].bytes;
    return 0;
}

static uint64_t le_bytes(const unsigned char *p, size_t bytes)
{
    uint64_t v = 0;
    for (size_t b = bytes; b-- > 0;)
        v = v << 8 | p[b];
    return v;
}

/* value: element k of type dt at p as a double (exact for every pixel value a model takes). */
static double elem_value(const char *dt, const unsigned char *p)
{
    if (strcmp(dt, "FP32") == 0) {
        uint32_t u = (uint32_t)le_bytes(p, 4);
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    if (strcmp(dt, "FP64") == 0) {
        uint64_t u = le_bytes(p, 8);
        double d;
        memcpy(&d, &u, 8);
        return d;
    }
    size_t b = sv_binary_elem_bytes(dt);
    uint64_t u = le_bytes(p, b);
    if (dt[0] == 'I' && b < 8 && (u >> (8 * b - 1)) & 1) /* sign-extend */
        u |= ~(uint64_t)0 << (8 * b);
    return dt[0] == 'I' ? (double)(int64_t)u : (double)u;
}

int sv_binary_pixels(const char *dt, const unsigned char *src, size_t count, uint8_t *dst, char *why,
                     size_t why_bytes)
{
    size_t b = sv_binary_elem_bytes(dt);
    if (strcmp(dt, "UINT8") == 0) { /* raw pixels: nothing to check */
        memcpy(dst, src, count);
        return 0;
    }
    for (size_t k = 0; k < count; k++) {
        double v = elem_value(dt, src + k * b);
        if (!(v >= 0 && v <= 255)) { /* as the JSON path: rounded as lrint rounds, NaN refused */
            snprintf(why, why_bytes, "pixel %zu is %g, expected a number from 0 to 255", k, v);
            return -1;
        }
        dst[k] = (uint8_t)lrint(v);
    }
    return 0;
}

/* ---- the reply ---- */

int sv_binary_reply(sv_reply *rep, json_t *ans, const sv_binary_out *outs, int n_outs)
{
    size_t json = json_dumpb(ans, NULL, 0, JSON_COMPACT | JSON_REAL_PRECISION(9)), total = json;
    for (int i = 0; i < n_outs; i++)
        total += outs[i].count * 4;
    if (json == 0 || sv_reply_reserve(rep, total) != 0) {
        json_decref(ans);
        sv_error(rep, 500, "cannot encode the answer (%zu bytes)", total);
        return -1;
    }
    json_dumpb(ans, rep->body, json, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(ans);
    unsigned char *p = (unsigned char *)rep->body + json;
    for (int i = 0; i < n_outs; i++)
        for (size_t k = 0; k < outs[i].count; k++, p += 4) {
            uint32_t u;
            if (outs[i].f32) {
                memcpy(&u, &outs[i].f32[k], 4);
            } else {
                int32_t c = outs[i].u16[k];
                memcpy(&u, &c, 4);
            }
            p[0] = (unsigned char)u, p[1] = (unsigned char)(u >> 8), p[2] = (unsigned char)(u >> 16),
            p[3] = (unsigned char)(u >> 24);
        }
    rep->len = total;
    rep->status = 200;
    rep->type = "application/octet-stream";
    rep->binary_header = json;
    return 0;
}
