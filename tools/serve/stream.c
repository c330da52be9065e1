/* stream.c - the fast path of :predict: a body of exactly {"instances": [...]} read by yajl's
 * event parser straight into the slot's pixel buffer, without building a tree of 784 nodes per
 * image (jansson's tree parse was 60% of the server's time under load). Anything else - another
 * key, a string, a value out of range, a wrong shape, malformed JSON - is declined, and the caller
 * parses the body again with jansson (tfserving.c), which gives the one error message for it. So
 * this file decides nothing about what is valid: it only accepts what the tree path would accept
 * with the same pixels (tested against it in tests/test_serve.sh). yajl allocates from the
 * thread's request arena (arena.c). */
#include "serve.h"

#include <math.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#define STREAM_MAX_DEPTH 6

typedef struct stream {
    const sv_model *m;
    uint8_t *dst;        /* the slot's pixels: max_inst instances of in_sz */
    size_t in_sz, n;     /* pixels per instance; pixels of the current instance */
    int level;           /* 0 outside, 1 in the object, 2 in "instances", 3.. in an instance */
    int seen_key;        /* the object's one key was "instances" */
    int count;           /* instances finished */
    int dims[STREAM_MAX_DEPTH], depth, ragged;
    unsigned seen;       /* bit d: an array of depth d has closed in this instance (dims[d] is set) */
    int len[STREAM_MAX_DEPTH];   /* elements so far of the open array at each instance depth */
} stream;

static int pixel(stream *s, double v)
{
    if (s->level < 3 || !(v >= 0 && v <= 255) || s->n == s->in_sz)
        return 0;
    s->len[s->level - 3]++;
    s->dst[(size_t)s->count * s->in_sz + s->n++] = (uint8_t)lrint(v);
    return 1;
}

static int on_integer(void *ctx, long long v) { return pixel(ctx, (double)v); }
static int on_double(void *ctx, double v) { return pixel(ctx, v); }
static int decline(void *ctx) { (void)ctx; return 0; }
static int decline_bool(void *ctx, int b) { (void)ctx; (void)b; return 0; }
static int decline_string(void *ctx, const unsigned char *v, size_t n) { (void)ctx; (void)v; (void)n; return 0; }

static int on_start_map(void *ctx)
{
    stream *s = ctx;
    if (s->level != 0)
        return 0;
    s->level = 1;
    return 1;
}

static int on_key(void *ctx, const unsigned char *k, size_t n)
{
    stream *s = ctx;
    if (s->level != 1 || s->seen_key || n != 9 || memcmp(k, "instances", 9) != 0)
        return 0;
    s->seen_key = 1;
    return 1;
}

static int on_end_map(void *ctx)
{
    stream *s = ctx;
    return s->level == 1 && s->seen_key && s->count > 0 && (s->level = 0, 1);
}

static int on_start_array(void *ctx)
{
    stream *s = ctx;
    if (s->level == 1 && s->seen_key) {
        s->level = 2;
        return 1;
    }
    if (s->level < 2 || s->level - 2 >= STREAM_MAX_DEPTH)
        return 0;
    if (s->level == 2) {     /* a new instance */
        if (s->count == s->m->max_inst)
            return 0;
        s->n = 0, s->depth = 0, s->ragged = 0, s->seen = 0;
    } else
        s->len[s->level - 3]++;
    s->len[s->level - 2] = 0;
    s->level++;
    return 1;
}

static int on_end_array(void *ctx)
{
    stream *s = ctx;
    if (s->level == 2) {
        s->level = 1;
        return 1;
    }
    if (s->level < 3)
        return 0;
    int d = s->level - 3, len = s->len[d];
    /* the innermost arrays close first: each depth's first length is its dimension (a check of
     * depth alone took [28][28]'s rows as ragged, and sent every nested instance to the tree) */
    if (!(s->seen & 1u << d))
        s->dims[d] = len, s->seen |= 1u << d, s->depth = d + 1 > s->depth ? d + 1 : s->depth;
    else if (s->dims[d] != len)
        s->ragged = 1;
    s->level--;
    if (s->level == 2) {     /* the instance is complete: the shape rule of the tree path */
        int layout = sv_shape_ok(s->m, s->depth, s->dims, s->ragged, s->n);
        if (!layout || (layout == SV_HWC && sv_to_chw(s->m, s->dst + (size_t)s->count * s->in_sz) != 0))
            return 0;
        s->count++;
    }
    return 1;
}

static const yajl_callbacks callbacks = {
    .yajl_null = decline,
    .yajl_boolean = decline_bool,
    .yajl_integer = on_integer,
    .yajl_double = on_double,
    .yajl_string = decline_string,
    .yajl_start_map = on_start_map,
    .yajl_map_key = on_key,
    .yajl_end_map = on_end_map,
    .yajl_start_array = on_start_array,
    .yajl_end_array = on_end_array,
};

int sv_stream_instances(const sv_model *m, const unsigned char *body, size_t n, uint8_t *dst)
{
    stream s = {.m = m, .dst = dst, .in_sz = (size_t)m->c * m->h * m->w};
    yajl_alloc_funcs af;
    sv_arena_yajl_funcs(&af);
    yajl_handle h = yajl_alloc(&callbacks, &af, &s);
    if (!h)
        return 0;
    int ok = yajl_parse(h, body, n) == yajl_status_ok && yajl_complete_parse(h) == yajl_status_ok &&
             s.level == 0 && s.count > 0;
    yajl_free(h);
    return ok ? s.count : 0;
}
