/* predict.c - the predict path shared by the three protocols: JSON pixel arrays (any nesting of
 * one instance's shape) or an image body into a predictor slot's pixel buffer, one forward
 * pass, and the answer as JSON into the reply. Runs inside the thread's arena (arena.c), so the
 * JSON trees cost no malloc; the slot's buffers hold pixels and outputs, so nothing else is
 * allocated either. Errors are the client's: 400 with what was expected and what was found. */
#include "serve.h"
#include "tools/shortest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- pixels from JSON ---- */

#define MAX_DEPTH 6

typedef struct flat {
    uint8_t *dst;
    size_t n, cap;     /* pixels seen; room (those past it are counted, not written) */
    int dims[MAX_DEPTH], depth;
    int ragged;        /* arrays of one depth differ in length */
    char why[200];
} flat;

/* flatten: the numbers of a (nested arrays) onto f->dst in order, noting each depth's length. */
static int flatten(flat *f, const json_t *a, int depth)
{
    if (json_is_array(a)) {
        if (depth >= MAX_DEPTH) {
            snprintf(f->why, sizeof f->why, "arrays nested deeper than %d", MAX_DEPTH);
            return -1;
        }
        int len = (int)json_array_size(a);
        if (f->depth <= depth)
            f->dims[depth] = len, f->depth = depth + 1;
        else if (f->dims[depth] != len)
            f->ragged = 1;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (flatten(f, json_array_get(a, i), depth + 1))
                return -1;
        return 0;
    }
    double v;
    if (json_is_integer(a))
        v = (double)json_integer_value(a);
    else if (json_is_real(a))
        v = json_real_value(a);
    else {
        snprintf(f->why, sizeof f->why, "pixel %zu is %s, expected a number from 0 to 255", f->n,
                 json_is_string(a) ? "a string" : json_is_object(a) ? "an object" : json_is_null(a) ? "null"
                                                                                             : "true or false");
        return -1;
    }
    if (!(v >= 0 && v <= 255)) {
        snprintf(f->why, sizeof f->why, "pixel %zu is %g, expected a number from 0 to 255", f->n, v);
        return -1;
    }
    if (f->n < f->cap) /* past it: only counted, so the error can give the shape that came */
        f->dst[f->n] = (uint8_t)lrint(v);
    f->n++;
    return 0;
}

int sv_pixels(const json_t *j, uint8_t *dst, size_t cap, size_t *n, char *why, size_t why_bytes)
{
    flat f = {.dst = dst, .cap = cap};
    int rc = flatten(&f, j, 0);
    *n = rc ? 0 : f.n;
    snprintf(why, why_bytes, "%s", rc ? f.why : "");
    return rc;
}

static void shape_text(const flat *f, char *s, size_t n)
{
    size_t at = (size_t)snprintf(s, n, "[");
    for (int d = 0; d < f->depth && at < n; d++)
        at += (size_t)snprintf(s + at, n - at, "%s%d", d ? ", " : "", f->dims[d]);
    if (at < n)
        snprintf(s + at, n - at, "]");
}

/* ---- layouts: (C, H, W) or (H, W, C) ---- */

/* sv_shape_ok: which layout an instance of dims is in. (C, H, W) is the model's own order (and
 * a flat list's); (H, W, C) is numpy's, PIL's and TensorFlow's. Both fit only when C == H == W,
 * and then (C, H, W) is taken. For a grey model the two orders are the same bytes. */
int sv_shape_ok(const sv_model *m, int depth, const int *dims, int ragged, size_t n)
{
    size_t in = (size_t)m->c * m->h * m->w;
    int d0 = depth > 0 ? dims[0] : 0, d1 = depth > 1 ? dims[1] : 0, d2 = depth > 2 ? dims[2] : 0;
    if (ragged || n != in)
        return 0;
    if ((depth == 1 && (size_t)d0 == in) || (depth == 2 && m->c == 1 && d0 == m->h && d1 == m->w) ||
        (depth == 3 && d0 == m->c && d1 == m->h && d2 == m->w))
        return SV_CHW;
    if (depth == 3 && d0 == m->h && d1 == m->w && d2 == m->c)
        return m->c == 1 ? SV_CHW : SV_HWC;
    return 0;
}

int sv_to_chw(const sv_model *m, uint8_t *px)
{
    size_t plane = (size_t)m->h * m->w, in = plane * (size_t)m->c;
    uint8_t *hwc = sv_arena_alloc(in);
    if (!hwc)
        return -1;
    memcpy(hwc, px, in);
    for (size_t p = 0; p < plane; p++)
        for (int c = 0; c < m->c; c++)
            px[(size_t)c * plane + p] = hwc[p * (size_t)m->c + (size_t)c];
    return 0;
}

size_t sv_shapes_text(const sv_model *m, const char *lead, char *s, size_t n)
{
    size_t in = (size_t)m->c * m->h * m->w;
    int k;
    if (m->c == 1)
        k = snprintf(s, n, "[%s%d, %d], [%s1, %d, %d], [%s%d, %d, 1] or [%s%zu]", lead, m->h, m->w, lead, m->h, m->w,
                     lead, m->h, m->w, lead, in);
    else
        k = snprintf(s, n, "[%s%d, %d, %d] (C, H, W), [%s%d, %d, %d] (H, W, C) or [%s%zu] (flat, in (C, H, W) order)",
                     lead, m->c, m->h, m->w, lead, m->h, m->w, m->c, lead, in);
    return k < 0 ? 0 : (size_t)k;
}

int sv_instance(const sv_model *m, const json_t *j, int i, uint8_t *dst, char *why, size_t why_bytes)
{
    size_t in = (size_t)m->c * m->h * m->w;
    flat f = {.dst = dst, .cap = in};
    if (flatten(&f, j, 0)) {
        snprintf(why, why_bytes, "instance %d: %s", i, f.why);
        return -1;
    }
    int layout = sv_shape_ok(m, f.depth, f.dims, f.ragged, f.n);
    if (layout == SV_HWC && sv_to_chw(m, dst) != 0) {
        snprintf(why, why_bytes, "instance %d: no memory left to reorder its pixels", i);
        return -1;
    }
    if (layout)
        return 0;
    char got[64], takes[200];
    shape_text(&f, got, sizeof got);
    sv_shapes_text(m, "", takes, sizeof takes);
    snprintf(why, why_bytes, "instance %d: shape %s%s, model %s takes %s pixels", i, f.ragged ? "(ragged) " : "", got,
             m->name, takes);
    return -1;
}

/* ---- running ---- */

int sv_run(sv_slot *s, const sv_model *m, int n, char *why, size_t why_bytes)
{
    if (m->batching && n <= sv_srv->max_batch) /* the model's batch state is mutable: m is only read here */
        return sv_batch_run((sv_model *)(uintptr_t)m, s, n, why, why_bytes);
    return sv_run_alone(s, m, n, why, why_bytes);
}

int sv_run_alone(sv_slot *s, const sv_model *m, int n, char *why, size_t why_bytes)
{
    if (ddl_predictor_run(s->pr, s->pixels, n, m->c, m->h, m->w, NULL, m->oh * m->ow == 1 ? s->probs : NULL,
                          s->classes) != DDL_OK) {
        snprintf(why, why_bytes, "%s", ddl_predictor_error(s->pr));
        return -1;
    }
    return 0;
}

/* ---- answers ---- */

json_t *sv_probs_json(const sv_model *m, const sv_slot *s, int i)
{
    json_t *a = json_array();
    for (int k = 0; k < m->C; k++)
        json_array_append_new(a, json_real(sv_exact(s->probs[(size_t)i * m->C + k])));
    return a;
}

double sv_exact(float f)
{
    char d[32];
    if (!isfinite(f))
        return 0.0; /* a softmax's output is finite; JSON has no other number */
    shortest_float(f, d, sizeof d);
    return strtod(d, NULL);
}

/* put_float: f (finite) as JSON in its shortest form that reads back as the same float32, written
 * as jansson writes a real ("%.Ng", ".0" after an integer, the exponent without '+' or leading
 * zeros): "0.0", "0.125", "0.100000001" never ("0.1"), "3.14159e-5". So a client that reads the
 * number as a float32 (numpy, PyTorch, onnxruntime) gets the predictor's bits. Into d (32
 * bytes); returns the length. */
static size_t put_float(char *d, float f)
{
    char t[32];
    if (!isfinite(f))
        f = 0.0f;
    shortest_float(f, t, sizeof t);
    size_t n = 0;
    const char *e = strchr(t, 'e');
    for (const char *p = t; *p && p != e; p++)
        d[n++] = *p;
    if (!e && !memchr(d, '.', n))
        d[n++] = '.', d[n++] = '0';
    if (e) { /* e-05 -> e-5, e+22 -> e22 */
        int x = atoi(e + 1);
        n += (size_t)snprintf(d + n, 16, "e%d", x);
    }
    return n;
}

int sv_reply_probs(sv_reply *rep, const sv_model *m, const sv_slot *s, int n)
{
    size_t need = 20 + (size_t)n * (3 + (size_t)m->C * 33);
    if (sv_reply_reserve(rep, need) != 0) {
        sv_error(rep, 500, "cannot encode the answer (%zu bytes)", need);
        return -1;
    }
    char *d = rep->body;
    size_t at = 0;
    memcpy(d, "{\"predictions\":[", 16);
    at = 16;
    for (int i = 0; i < n; i++) {
        d[at++] = i ? ',' : '[';
        if (i)
            d[at++] = '[';
        for (int k = 0; k < m->C; k++) {
            if (k)
                d[at++] = ',';
            at += put_float(d + at, s->probs[(size_t)i * m->C + k]);
        }
        d[at++] = ']';
    }
    d[at++] = ']';
    d[at++] = '}';
    rep->len = at;
    rep->status = 200;
    rep->type = "application/json";
    return 0;
}

json_t *sv_mask_json(const sv_model *m, const sv_slot *s, int i)
{
    json_t *rows = json_array();
    const uint16_t *cl = s->classes + (size_t)i * m->oh * m->ow;
    for (int y = 0; y < m->oh; y++) {
        json_t *row = json_array();
        for (int x = 0; x < m->ow; x++)
            json_array_append_new(row, json_integer(cl[y * m->ow + x]));
        json_array_append_new(rows, row);
    }
    return rows;
}
