/* reply.c - the reply a handler writes: its buffer (the connection's, grown on demand and kept
 * for the next request), a JSON answer, and the {"error": ...} answer every handler gives for
 * what it refuses. Below every handler and http.c, calling none of them. */
#include "serve.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int sv_reply_reserve(sv_reply *rep, size_t n)
{
    if (n + 1 <= rep->cap)
        return 0;
    size_t cap = rep->cap ? rep->cap : SV_REPLY_MIN;
    while (cap < n + 1)
        cap *= 2;
    char *b = realloc(rep->cap ? rep->body : NULL, cap);
    if (!b)
        return -1;
    rep->body = b, rep->cap = cap;
    return 0;
}

static int reply_json(sv_reply *rep, int status, json_t *j, int digits)
{
    size_t need = json_dumpb(j, NULL, 0, JSON_COMPACT | JSON_REAL_PRECISION(digits));
    if (need == 0 || sv_reply_reserve(rep, need) != 0) {
        json_decref(j);
        sv_error(rep, 500, "cannot encode the answer (%zu bytes)", need);
        return -1;
    }
    rep->len = json_dumpb(j, rep->body, rep->cap, JSON_COMPACT | JSON_REAL_PRECISION(digits));
    rep->status = status;
    rep->type = "application/json";
    json_decref(j);
    return 0;
}

int sv_reply_json(sv_reply *rep, int status, json_t *j) { return reply_json(rep, status, j, 6); }

/* 9 digits tell every float32 apart; sv_exact's values print in their shortest form with them */
int sv_reply_json_exact(sv_reply *rep, int status, json_t *j) { return reply_json(rep, status, j, 9); }

void sv_error(sv_reply *rep, int status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rep->status = status;
    rep->type = "application/json";
    /* escaped by jansson; fits: the reply buffer holds at least SV_REPLY_MIN bytes */
    json_t *j = json_pack("{ss}", "error", msg);
    rep->len = j ? json_dumpb(j, rep->body, rep->cap, JSON_COMPACT) : 0;
    if (!j || rep->len > rep->cap)
        rep->len = (size_t)snprintf(rep->body, rep->cap, "{\"error\":\"internal error\"}");
    json_decref(j);
}
