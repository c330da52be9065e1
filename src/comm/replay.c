/* replay.c - an elastic comm keeps the result of its last collective, to hand to a rank that
 * missed it.
 *
 * Why: a collective can complete on some ranks and fail on others (a ring's last step, a tree's
 * leaf, when a rank dies in the middle). The ranks that completed it go on to their next call,
 * fail there, and regroup with those that did not; after the regroup the first retry their next
 * call and the others the call they missed, and the two would never match. No rank can complete a
 * collective that a live rank has not entered, so a rank is at most one call behind (a run of
 * broadcasts aside, where a leaf may lag more: not replayed). After the links are up again every
 * rank says how many calls it completed; the lowest rank that completed the most sends the kept
 * result to each rank one call behind, whose next call (it retries the one it missed) takes it
 * instead of running, if it is the same call (kind, type, operation, count). A result of any
 * size is kept (the buffer grows at the first call that needs it: an evaluation's confusion
 * matrix of many classes), but a step's all-reduce of shards is not (the trainer's gradients: a
 * rank behind on those takes the leader's state); an allgather's result is only taken at the world size it was made at; a
 * barrier is never kept, so a sequence that begins with one after a regroup (the trainer's state
 * transfer, which every rank runs from its start) drops whatever a rank missed.
 *
 * Only the outermost call counts (ddl_comm_allreduce_shards calls ddl_comm_allreduce inside);
 * calls inside a regroup do not either. A comm that is not elastic only counts its depth. */
#include "impl.h"

#include <string.h>

#define TAG 0x72706c79 /* "rply" */

/* room: buf holds at least bytes (<= DDL__REPLAY_MAX), grown with the comm's allocator; 0 or -1
 * (no memory: what it held is kept, as is its cap). */
static int room(ddl_comm *c, size_t bytes)
{
    ddl__replay *r = &c->rp;
    if (bytes <= r->cap)
        return 0;
    if (bytes > DDL__REPLAY_MAX)
        return -1;
    const ddl_allocator *a = c->alloc.alloc ? &c->alloc : NULL;
    unsigned char *b = (unsigned char *)ddl__alloc(a, bytes);
    if (!b)
        return -1;
    ddl__free(a, r->grown);
    r->buf = r->grown = b;
    r->cap = bytes;
    return 0;
}

int ddl__replay_enter(ddl_comm *c, const ddl__call *k, void *out, size_t bytes)
{
    if (!c)
        return 0;
    ddl__replay *r = &c->rp;
    if (r->depth++ > 0 || !r->pending)
        return 0;
    r->pending = 0;
    if (k->op == r->call.op && k->dtype == r->call.dtype && k->redop == r->call.redop &&
        k->count == r->call.count && bytes == r->bytes && (bytes == 0 || out)) {
        if (bytes)
            memcpy(out, r->buf, bytes);
        r->depth--;
        ddl__log(c->log, c->log_ud, DDL_LOG_INFO, "rank %d: the collective it missed before regroup %d (%zu bytes) "
                 "taken from rank %d", c->rank, c->generation, bytes, r->from);
        return 1;
    }
    ddl__log(c->log, c->log_ud, DDL_LOG_WARN, "rank %d: regroup %d handed it a missed collective (op %d, %llu "
             "elements) but its next call is another (op %d, %llu elements): running it", c->rank, c->generation,
             r->call.op, (unsigned long long)r->call.count, k->op, (unsigned long long)k->count);
    return 0;
}

int ddl__replay_leave(ddl_comm *c, const ddl__call *k, int st, const void *out, size_t bytes)
{
    if (!c)
        return st;
    ddl__replay *r = &c->rp;
    if (--r->depth > 0)
        return st;
    if (st != DDL_OK) /* a regroup after a step's all-reduce may let a joiner in (elastic.c) */
        c->failed_at_step = k->redop == DDL__REDOP_SHARDS;
    if (st != DDL_OK || !r->buf)
        return st;
    r->done++;
    r->kept = bytes != SIZE_MAX && (bytes == 0 || out) && room(c, bytes) == 0;
    if (!r->kept && bytes != SIZE_MAX)
        ddl__log(c->log, c->log_ud, DDL_LOG_WARN, "rank %d: no memory to keep the result of %zu bytes of its last "
                 "collective for a rank that may miss it", c->rank, bytes);
    if (r->kept) {
        r->call = *k;
        r->bytes = bytes;
        if (bytes)
            memcpy(r->buf, out, bytes);
    }
    return st;
}

int ddl__replay_share(ddl_comm *c)
{
    ddl__replay *r = &c->rp;
    int64_t all[2 * DDL__ELASTIC_MAX], mine[2] = {r->done, r->kept};
    r->pending = 0;
    r->done = 0;
    if (!r->buf || c->world < 2)
        return DDL_OK;
    r->depth++;
    int st = ddl_comm_allgather(c, mine, all, 2, DDL_INT64);
    int64_t top = -1;
    int from = -1;
    for (int j = 0; st == DDL_OK && j < c->world; j++)
        if (all[2 * j] > top)
            top = all[2 * j], from = j;
    if (st == DDL_OK && top > 0 && all[2 * from + 1]) {
        int64_t head[5] = {r->call.op, r->call.dtype, r->call.redop, (int64_t)r->call.count, (int64_t)r->bytes};
        int behind[DDL__ELASTIC_MAX], n = 0;
        for (int j = 0; j < c->world; j++)
            if (all[2 * j] == top - 1)
                behind[n++] = j;
        for (int i = 0; i < n && st == DDL_OK; i++) {
            if (c->rank == from) {
                st = ddl_comm_send(c, behind[i], TAG, head, sizeof head);
                if (st == DDL_OK && r->bytes)
                    st = ddl_comm_send(c, behind[i], TAG, r->buf, r->bytes);
            } else if (c->rank == behind[i]) {
                st = ddl_comm_recv(c, from, TAG, head, sizeof head);
                if (st == DDL_OK && (head[4] < 0 || head[4] > (int64_t)DDL__REPLAY_MAX))
                    st = ddl__comm_fail(c, DDL_EPROTO, "regroup: rank %d offered a missed result of %lld bytes",
                                        from, (long long)head[4]);
                if (st == DDL_OK && room(c, (size_t)head[4]) != 0)
                    st = ddl__comm_fail(c, DDL_ENOMEM, "regroup: no memory for the missed result of %lld bytes "
                                        "from rank %d", (long long)head[4], from);
                if (st == DDL_OK && head[4])
                    st = ddl_comm_recv(c, from, TAG, r->buf, (size_t)head[4]);
                if (st == DDL_OK) {
                    ddl__call k = {(int)head[0], (int)head[1], (int)head[2], (uint64_t)head[3], 0, 0};
                    r->call = k;
                    r->bytes = (size_t)head[4];
                    r->pending = 1;
                    r->from = from;
                }
            }
        }
    }
    r->depth--;
    r->kept = 0;
    return st;
}
