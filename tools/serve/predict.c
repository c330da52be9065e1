/* predict.c - the predict path shared by the three protocols: JSON pixel arrays (any nesting of
 * one instance's shape) or an image body into a predictor slot's pixel buffer, one forward
 * pass, and the answer as JSON into the reply. Runs inside the thread's arena (arena.c), so the
 * JSON trees cost no malloc; the slot's buffers hold pixels and outputs, so nothing else is
 * allocated either. Errors are the client's: 400 with what was expected and what was found. */
#include "serve.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- pixels from JSON ---- */

#define MAX_DEPTH 6

typedef struct flat {
    uint8_t *dst;
    size_t n, cap;     /* pixels written; room */
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
    if (f->n == f->cap) {
        snprintf(f->why, sizeof f->why, "more than %zu pixels", f->cap);
        return -1;
    }
    f->dst[f->n++] = (uint8_t)lrint(v);
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

/* one_instance: instance i of m from j into dst; its shape must be [c*h*w], [h, w] (c = 1),
 * [c, h, w] or [h, w, c] (c = 1). */
int sv_shape_ok(const sv_model *m, int depth, const int *dims, int ragged, size_t n)
{
    size_t in = (size_t)m->c * m->h * m->w;
    int d0 = depth > 0 ? dims[0] : 0, d1 = depth > 1 ? dims[1] : 0, d2 = depth > 2 ? dims[2] : 0;
    return !ragged && n == in &&
           ((depth == 1 && (size_t)d0 == in) || (depth == 2 && m->c == 1 && d0 == m->h && d1 == m->w) ||
            (depth == 3 && d0 == m->c && d1 == m->h && d2 == m->w) ||
            (depth == 3 && m->c == 1 && d0 == m->h && d1 == m->w && d2 == 1));
}

int sv_instance(const sv_model *m, const json_t *j, int i, uint8_t *dst, char *why, size_t why_bytes)
{
    size_t in = (size_t)m->c * m->h * m->w;
    flat f = {.dst = dst, .cap = in};
    if (flatten(&f, j, 0)) {
        snprintf(why, why_bytes, "instance %d: %s", i, f.why);
        return -1;
    }
    int ok = sv_shape_ok(m, f.depth, f.dims, f.ragged, f.n);
    if (ok)
        return 0;
    char got[64];
    shape_text(&f, got, sizeof got);
    snprintf(why, why_bytes, "instance %d: shape %s%s, model %s takes [%zu], [%d, %d], [%d, %d, %d] or [%d, %d, 1] "
             "pixels", i, f.ragged ? "(ragged) " : "", got, m->name, in, m->h, m->w, m->c, m->h, m->w, m->h, m->w);
    return -1;
}

/* ---- running ---- */

int sv_run(sv_slot *s, const sv_model *m, int n, char *why, size_t why_bytes)
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
        json_array_append_new(a, json_real(s->probs[(size_t)i * m->C + k]));
    return a;
}

/* put_g6: v (finite, >= 0) as JSON with 6 significant digits, as jansson's
 * JSON_REAL_PRECISION(6) writes it ("%.6g", with ".0" after an integer and the exponent
 * without '+' or leading zeros): "0.0", "0.125", "3.14159e-5". Into d (24 bytes); returns the
 * length. */
static size_t put_g6(char *d, double v)
{
    if (!(v > 0.0)) {
        memcpy(d, "0.0", 3);
        return 3;
    }
    double x = v;
    int e = 5; /* decimal exponent of the first of the six digits of x */
    while (x < 1e5)
        x *= 10.0, e--;
    while (x >= 1e6)
        x /= 10.0, e++;
    long long m = llround(x);
    if (m >= 1000000)
        m /= 10, e++;
    char dig[6];
    int nd = 6;
    for (int k = 5; k >= 0; k--, m /= 10)
        dig[k] = (char)('0' + m % 10);
    while (nd > 1 && dig[nd - 1] == '0')
        nd--;
    size_t n = 0;
    if (e < -4 || e >= 6) { /* d.ddddde-XX */
        d[n++] = dig[0];
        if (nd > 1)
            d[n++] = '.';
        for (int k = 1; k < nd; k++)
            d[n++] = dig[k];
        n += (size_t)snprintf(d + n, 8, "e%d", e); /* jansson drops the '+' and leading zeros */
    } else if (e < 0) { /* 0.000ddd */
        d[n++] = '0', d[n++] = '.';
        for (int k = -1; k > e; k--)
            d[n++] = '0';
        for (int k = 0; k < nd; k++)
            d[n++] = dig[k];
    } else { /* ddd.ddd or ddd.0 */
        for (int k = 0; k <= e; k++)
            d[n++] = k < nd ? dig[k] : '0';
        d[n++] = '.';
        if (nd <= e + 1)
            d[n++] = '0';
        for (int k = e + 1; k < nd; k++)
            d[n++] = dig[k];
    }
    return n;
}

int sv_reply_probs(sv_reply *rep, const sv_model *m, const sv_slot *s, int n)
{
    size_t need = 20 + (size_t)n * (3 + (size_t)m->C * 25);
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
            at += put_g6(d + at, s->probs[(size_t)i * m->C + k]);
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
