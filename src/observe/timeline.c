/* timeline.c - ddl_timeline: what each rank did when, for a Chrome trace-event file (Perfetto,
 * chrome://tracing). A rank records spans (data, forward, backward, all-reduce, optimizer, ...)
 * into a buffer sized at creation: recording allocates nothing and never fails (spans past the
 * end are counted). At the end ddl_timeline_write gathers every rank's spans to rank 0 over the
 * comm's point-to-point calls, aligns the clocks, derives the waits, and timeline_json.c writes
 * the file. It knows nothing of the trainer that feeds it. */
#include "impl.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TAG 0x74696d65 /* "time": point-to-point messages of the gather */
#define PINGS 8        /* clock probes per rank; the fastest round trip gives the offset */

struct ddl_timeline {
    const ddl_allocator *alloc;
    ddl_timeline_config cfg;
    size_t n, dropped;
    ddl__span spans[]; /* (cfg.max_spans) */
};

int64_t ddl_timeline_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int ddl_timeline_create(const ddl_timeline_config *cfg, const ddl_allocator *alloc, ddl_timeline **out, char *err,
                        size_t err_bytes)
{
    if (!out)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_timeline_create: out is NULL");
    *out = NULL;
    if (!cfg || cfg->max_spans < 1 || cfg->max_spans > ((size_t)1 << 32) || cfg->first_step < 0 ||
        (cfg->last_step && cfg->last_step < cfg->first_step))
        return ddl__errf(err, err_bytes, DDL_EINVAL, "timeline: max_spans must be 1 to 2^32 and the steps "
                         "0 <= first <= last (last 0: no end)");
    size_t bytes = sizeof(ddl_timeline) + cfg->max_spans * sizeof(ddl__span);
    ddl_timeline *tl = (ddl_timeline *)ddl__alloc(alloc, bytes);
    if (!tl)
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "timeline: cannot allocate %zu bytes", bytes);
    memset(tl, 0, sizeof *tl);
    tl->alloc = alloc;
    tl->cfg = *cfg;
    *out = tl;
    return DDL_OK;
}

void ddl_timeline_destroy(ddl_timeline *tl)
{
    if (tl)
        ddl__free(tl->alloc, tl);
}

int ddl_timeline_wants(const ddl_timeline *tl, long step)
{
    return tl && step >= tl->cfg.first_step && (!tl->cfg.last_step || step <= tl->cfg.last_step);
}

void ddl_timeline_span(ddl_timeline *tl, int kind, long step, int64_t t0, int64_t t1, uint64_t bytes)
{
    if (!ddl_timeline_wants(tl, step) || kind < 0 || kind > 255)
        return;
    if (tl->n == tl->cfg.max_spans) {
        tl->dropped++;
        return;
    }
    tl->spans[tl->n++] = (ddl__span){t0, t1 > t0 ? t1 : t0, (int64_t)kind << 48 | (step & 0xffffffffffff),
                                     (int64_t)bytes};
}

size_t ddl_timeline_count(const ddl_timeline *tl) { return tl ? tl->n : 0; }
size_t ddl_timeline_dropped(const ddl_timeline *tl) { return tl ? tl->dropped : 0; }

/* ---- gather ---- */

/* clock_offsets: off[r] = rank r's clock minus rank 0's, from the fastest of PINGS round trips
 * (NTP's estimate: the reply was stamped half-way through the round trip). */
static int clock_offsets(ddl_comm *c, int64_t *off)
{
    int rank = ddl_comm_rank(c), world = ddl_comm_size(c), rc = DDL_OK;
    off[0] = 0;
    for (int r = 1; r < world && rc == DDL_OK; r++) {
        int64_t best = INT64_MAX;
        for (int i = 0; i < PINGS && rc == DDL_OK; i++) {
            int64_t a = ddl_timeline_now(), b = 0;
            if (rank == 0) {
                rc = ddl_comm_send(c, r, TAG, &a, 8);
                if (rc == DDL_OK)
                    rc = ddl_comm_recv(c, r, TAG, &b, 8);
                int64_t now = ddl_timeline_now();
                if (rc == DDL_OK && now - a < best) {
                    best = now - a;
                    off[r] = b - (a + now) / 2;
                }
            } else if (rank == r) {
                rc = ddl_comm_recv(c, 0, TAG, &a, 8);
                b = ddl_timeline_now();
                if (rc == DDL_OK)
                    rc = ddl_comm_send(c, 0, TAG, &b, 8);
            }
        }
    }
    return rc;
}

/* to_le: the spans' int64 fields little endian in place (a no-op on little-endian hosts), for
 * the wire; applied twice it is the identity. */
static void to_le(ddl__span *s, size_t n)
{
    int64_t *v = (int64_t *)s;
    for (size_t i = 0; i < 4 * n; i++) {
        unsigned char b[8];
        ddl__put_le(b, (uint64_t)v[i], 8);
        memcpy(&v[i], b, 8);
    }
}

static int cmp_span(const void *pa, const void *pb)
{
    const ddl__span *a = (const ddl__span *)pa, *b = (const ddl__span *)pb;
    if (a->t0 != b->t0)
        return a->t0 < b->t0 ? -1 : 1;
    return (a->t1 > b->t1) - (a->t1 < b->t1); /* the longer (enclosing) span first */
}

#define KIND(s) ((int)((s)->kind_step >> 48))
#define STEP(s) ((s)->kind_step & 0xffffffffffff)

/* add_waits: for every all-reduce, the wait for the last rank to enter it: from this rank's
 * entry to the latest entry of any rank into the same step's all-reduce (last_in, indexed by
 * step - first). spans[r] has room for n[r] more; n[r] grows. */
static void add_waits(ddl__span **spans, size_t *n, int world, int64_t *last_in, int64_t first, int64_t steps)
{
    for (int64_t i = 0; i < steps; i++)
        last_in[i] = INT64_MIN;
    for (int r = 0; r < world; r++)
        for (size_t i = 0; i < n[r]; i++)
            if (KIND(&spans[r][i]) == DDL_SPAN_ALLREDUCE && spans[r][i].t0 > last_in[STEP(&spans[r][i]) - first])
                last_in[STEP(&spans[r][i]) - first] = spans[r][i].t0;
    for (int r = 0; r < world; r++) {
        size_t n0 = n[r];
        for (size_t i = 0; i < n0; i++) {
            const ddl__span *s = &spans[r][i];
            int64_t last = KIND(s) == DDL_SPAN_ALLREDUCE ? last_in[STEP(s) - first] : s->t0;
            if (last > s->t0)
                spans[r][n[r]++] = (ddl__span){s->t0, last < s->t1 ? last : s->t1,
                                               (int64_t)DDL_SPAN_WAIT << 48 | STEP(s), 0};
        }
        qsort(spans[r], n[r], sizeof(ddl__span), cmp_span);
    }
}

/* step_range: the first and the number of steps the spans cover. */
static void step_range(ddl__span *const *spans, const size_t *n, int world, int64_t *first, int64_t *steps)
{
    int64_t lo = INT64_MAX, hi = -1;
    for (int r = 0; r < world; r++)
        for (size_t i = 0; i < n[r]; i++) {
            lo = STEP(&spans[r][i]) < lo ? STEP(&spans[r][i]) : lo;
            hi = STEP(&spans[r][i]) > hi ? STEP(&spans[r][i]) : hi;
        }
    *first = hi < 0 ? 0 : lo;
    *steps = hi < 0 ? 0 : hi - lo + 1;
}

/* gather_root: rank 0 receives every rank's spans into one block, in its own clock, and writes
 * the file. */
static int gather_root(ddl_timeline *tl, ddl_comm *c, const int64_t *counts, const int64_t *off, int world,
                       ddl__span *all, const char *path, char *err, size_t err_bytes)
{
    ddl__span **spans = (ddl__span **)ddl__alloc(tl->alloc, (size_t)world * (sizeof(ddl__span *) + sizeof(size_t)));
    if (!spans)
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "timeline: out of memory");
    size_t *n = (size_t *)(spans + world), at = 0;
    int rc = DDL_OK;
    for (int r = 0; r < world && rc == DDL_OK; r++) {
        spans[r] = all + at;
        n[r] = (size_t)counts[r];
        at += 2 * n[r]; /* room for a wait per span */
        if (r == 0)
            memcpy(spans[0], tl->spans, tl->n * sizeof(ddl__span));
        else if (n[r] && (rc = ddl_comm_recv(c, r, TAG, spans[r], n[r] * sizeof(ddl__span))) == DDL_OK)
            to_le(spans[r], n[r]);
        for (size_t i = 0; i < n[r]; i++) {
            spans[r][i].t0 -= off[r];
            spans[r][i].t1 -= off[r];
        }
        qsort(spans[r], n[r], sizeof(ddl__span), cmp_span);
    }
    if (rc != DDL_OK)
        ddl__errf(err, err_bytes, rc, "timeline gather: %s", ddl_comm_error(c));
    int64_t first = 0, steps = 0, *last_in = NULL;
    if (rc == DDL_OK) {
        step_range(spans, n, world, &first, &steps);
        last_in = (int64_t *)ddl__alloc(tl->alloc, (size_t)steps * sizeof(int64_t) + 8);
        rc = last_in ? DDL_OK : ddl__errf(err, err_bytes, DDL_ENOMEM, "timeline: out of memory");
    }
    if (rc == DDL_OK) {
        add_waits(spans, n, world, last_in, first, steps);
        rc = ddl__timeline_json(path, spans, n, world, err, err_bytes);
    }
    ddl__free(tl->alloc, last_in);
    ddl__free(tl->alloc, spans);
    return rc;
}

int ddl_timeline_write(ddl_timeline *tl, ddl_comm *comm, const char *path, char *err, size_t err_bytes)
{
    if (!tl || !path)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_timeline_write: no timeline or no path");
    int world = comm ? ddl_comm_size(comm) : 1, rank = comm ? ddl_comm_rank(comm) : 0;
    int64_t *meta = (int64_t *)ddl__alloc(tl->alloc, 2 * (size_t)world * sizeof(int64_t) + 8);
    int64_t mine = (int64_t)tl->n, ok = meta != NULL, total = 0, *counts = meta, *off = meta ? meta + world : NULL;
    int rc = DDL_OK;
    if (comm) /* every rank goes through the same collectives, whatever failed locally */
        rc = ddl_comm_allreduce(comm, &ok, 1, DDL_INT64, DDL_SUM);
    if (rc == DDL_OK && ok < world) {
        ddl__free(tl->alloc, meta);
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "timeline: out of memory on %lld rank(s)",
                         (long long)(world - ok));
    }
    if (rc == DDL_OK && comm)
        rc = ddl_comm_allgather(comm, &mine, counts, 1, DDL_INT64);
    else if (!comm)
        counts[0] = mine;
    if (rc == DDL_OK && comm)
        rc = clock_offsets(comm, off);
    else if (!comm)
        off[0] = 0;
    for (int r = 0; rc == DDL_OK && r < world; r++)
        total += counts[r];
    ddl__span *all = NULL;
    if (rc == DDL_OK && rank == 0) { /* rank 0 says whether it can take the spans */
        all = (ddl__span *)ddl__alloc(tl->alloc, (size_t)(2 * total + 1) * sizeof(ddl__span));
        ok = all != NULL;
    }
    if (rc == DDL_OK && comm)
        rc = ddl_comm_broadcast(comm, &ok, 1, DDL_INT64, 0);
    if (rc != DDL_OK)
        ddl__errf(err, err_bytes, rc, "timeline gather: %s", ddl_comm_error(comm));
    else if (!ok)
        rc = ddl__errf(err, err_bytes, DDL_ENOMEM, "timeline: rank 0 cannot hold %lld spans", (long long)total);
    else if (rank == 0)
        rc = gather_root(tl, comm, counts, off, world, all, path, err, err_bytes);
    else if (tl->n) {
        to_le(tl->spans, tl->n);
        rc = ddl_comm_send(comm, 0, TAG, tl->spans, tl->n * sizeof(ddl__span));
        to_le(tl->spans, tl->n);
        if (rc != DDL_OK)
            ddl__errf(err, err_bytes, rc, "timeline gather: %s", ddl_comm_error(comm));
    }
    ddl__free(tl->alloc, all);
    ddl__free(tl->alloc, meta);
    return rc;
}
