/* example_db.h - `--predict --db CONNINFO --table T --id ID --image IMG --out-table OUT`: ranks that
 * score a PostgreSQL table where it lives, through libpq. Used by lenet and unet (through
 * example_predict.h) and by ddl-train --predict.
 *
 * The split: the rows with a non-NULL ID, ORDER BY ID (a key: unique), cut into forward passes of
 * the predictor's batch; rank r of N takes a contiguous run of whole passes (the rule of
 * example_predict.h's predict_range), so each image is computed in the same pass, with the same
 * neighbours, as on one rank or by --predict on the same images as a file. Every rank reads from
 * one snapshot: rank 0 exports its transaction's (pg_export_snapshot) and the others import it,
 * so rows written meanwhile change no rank's share. A rank reads its share through a cursor, a
 * batch at a time (FETCH in binary), and writes each batch with COPY FROM STDIN on a second
 * connection in a transaction of its own: a rank that dies leaves whole batches behind, never
 * part of one. OUT is created when missing (rank 0, before any rank writes): ID of T's ID type,
 * then `class int, probabilities real[]` for a classifier, `mask bytea` (a byte per pixel, row by
 * row) for a segmentation model. Images are raw pixels (bytea of c*h*w bytes) or a PNG, JPEG, PGM
 * or PPM of any size, resized to the model's input as training does. Names are quoted with
 * PQescapeIdentifier, values passed as parameters. A bad row, a lost connection or an SQL error is one line naming the rank, the row's ID where there is
 * one, and what was wrong; every rank then exits 1.
 * Every wait for the server is bounded: connecting by libpq's connect_timeout (10 s unless the
 * string says otherwise), each query and each batch's COPY by --db-timeout S (default 300 s; the
 * connections are non-blocking and each wait a poll with the time left), so a server that stalls
 * (stopped, a lock never granted, a dead link) is an error naming the statement after S seconds,
 * never a hang. The server is asked to give up on its own a second later (statement_timeout, in
 * the connections' options unless the string sets options itself): a query the client stopped
 * waiting for does not run on.
 *
 * libpq is optional: the code is compiled with DDL_EXAMPLE_PQ defined (the Makefile defines it,
 * and links -lpq, where libpq-fe.h is); without it --db says the program was built without
 * libpq. Header-only: copy it along with the examples. A test hook: DDL_EXAMPLE_DB_DIE=R:B makes
 * rank R kill itself (SIGKILL) halfway through sending its B-th batch. */
#ifndef DDL_EXAMPLE_DB_H
#define DDL_EXAMPLE_DB_H

#include "ddl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct db_opts {
    const char *db;        /* --db CONNINFO: a libpq connection string or URI (postgresql:///DB) */
    const char *table;     /* --table T */
    const char *id;        /* --id COLUMN (default id) */
    const char *image;     /* --image COLUMN (default img) */
    const char *out_table; /* --out-table OUT */
    int timeout;           /* --db-timeout S: the longest a query or a batch's COPY waits for the
                            * server, in seconds (0: DB_TIMEOUT_DEFAULT) */
} db_opts;

#define DB_TIMEOUT_DEFAULT 300

/* db_options_check: NULL when the --db flags go together, else what is wrong. */
static inline const char *db_options_check(const db_opts *d)
{
    if (!d->db && (d->table || d->id || d->image || d->out_table || d->timeout))
        return "--table, --id, --image, --out-table and --db-timeout go with --db";
    if (d->db && (!d->table || !d->out_table))
        return "--db needs --table T and --out-table OUT";
    return NULL;
}

#ifdef DDL_EXAMPLE_PQ
#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <signal.h>
#include <time.h>

/* ---- state of one rank's run ---- */

typedef struct db_run {
    const char *prog;
    const db_opts *o;
    ddl_comm *comm;
    int rank, world, batch;
    ddl_predictor *pr;
    PGconn *rd, *wr;            /* reads (a cursor in one transaction), writes (a transaction per batch) */
    char *table, *id, *image_col, *out; /* quoted names (PQescapeIdentifier) */
    char id_type[256];
    int segment;                /* OUT gets a mask, not a class and probabilities */
    int timeout;                /* seconds: --db-timeout */
} db_run;

/* db_fail: one line on stderr, "PROG: rank R: what" (without the rank on one process). */
static inline int db_fail(const db_run *r, const char *what)
{
    size_t n = strlen(what);
    while (n && (what[n - 1] == '\n' || what[n - 1] == ' ')) /* libpq's messages end in a newline */
        n--;
    if (r->world > 1)
        fprintf(stderr, "%s: rank %d: %.*s\n", r->prog, r->rank, (int)n, what);
    else
        fprintf(stderr, "%s: %.*s\n", r->prog, (int)n, what);
    return 1;
}

/* db_agree: every rank's ok in; 1 when all are ok (as predict_agree). */
static inline int db_agree(db_run *r, int ok)
{
    int64_t bad = !ok;
    if (r->comm && ddl_comm_allreduce(r->comm, &bad, 1, DDL_INT64, DDL_MAX) != DDL_OK) {
        db_fail(r, ddl_comm_error(r->comm));
        return 0;
    }
    return bad == 0;
}

/* db_now: seconds on the monotonic clock. */
static inline double db_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* db_pump: send c's pending output and, with `answer`, read until its next result is ready (or
 * the connection is in COPY IN), waiting at most until deadline (db_now's clock). 0, or 1 having
 * said why: libpq's error, or that the server did not answer `what` in time. */
static inline int db_pump(const db_run *r, PGconn *c, double deadline, const char *what, int answer)
{
    char why[1400];
    for (;;) {
        int f = PQflush(c); /* 0: all sent, 1: more to send, -1: failed */
        if (f < 0)
            break;
        if (f == 0 && (!answer || !PQisBusy(c)))
            return 0;
        double left = deadline - db_now();
        if (left <= 0) {
            snprintf(why, sizeof why, "%s: the database did not answer within %d s (--db-timeout): %.120s", r->o->table,
                     r->timeout, what);
            return db_fail(r, why);
        }
        struct pollfd p = {.fd = PQsocket(c), .events = (short)(POLLIN | (f ? POLLOUT : 0))};
        int n = poll(&p, 1, (int)(left * 1000) + 1);
        if (n < 0 && errno != EINTR) {
            snprintf(why, sizeof why, "%s: waiting for the database: %s", r->o->table, strerror(errno));
            return db_fail(r, why);
        }
        if (n > 0 && (p.revents & (POLLIN | POLLERR | POLLHUP)) && !PQconsumeInput(c))
            break;
    }
    snprintf(why, sizeof why, "%s: %s", r->o->table, PQerrorMessage(c));
    return db_fail(r, why);
}

/* db_results: the results of what c sent, read within the deadline: the last one, or the first
 * that failed; a COPY IN ends what the statement answers. The result when it is
 * PGRES_COMMAND_OK, PGRES_TUPLES_OK or PGRES_COPY_IN (the caller clears it), else NULL having
 * said why: the server's error after `label`, or that it did not answer `what` in time. */
static inline PGresult *db_results(const db_run *r, PGconn *c, double deadline, const char *what, const char *label)
{
    PGresult *res = NULL, *next;
    for (;;) {
        if (db_pump(r, c, deadline, what, 1) != 0) {
            PQclear(res);
            return NULL;
        }
        if ((next = PQgetResult(c)) == NULL)
            break;
        if (PQresultStatus(next) == PGRES_COPY_IN) {
            PQclear(res);
            return next;
        }
        if (res && PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK)
            PQclear(next);
        else
            PQclear(res), res = next;
    }
    if (res && (PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK))
        return res;
    char why[1400];
    snprintf(why, sizeof why, "%s: %s", label, res ? PQresultErrorMessage(res) : PQerrorMessage(c));
    db_fail(r, why);
    PQclear(res);
    return NULL;
}

/* db_sql: run sql (params as text) on c, results in `binary` format or text, all within the
 * timeout: db_results's. */
static inline PGresult *db_sql(const db_run *r, PGconn *c, const char *sql, int n_params, const char *const *params,
                               int binary)
{
    double deadline = db_now() + r->timeout;
    if (!PQsendQueryParams(c, sql, n_params, NULL, params, NULL, NULL, binary)) {
        char why[1400];
        snprintf(why, sizeof why, "%s: %s", r->o->table, PQerrorMessage(c));
        db_fail(r, why);
        return NULL;
    }
    return db_results(r, c, deadline, sql, r->o->table);
}

/* db_do: db_sql with the result dropped; 0, or 1 having said why. */
static inline int db_do(const db_run *r, PGconn *c, const char *sql, int n_params, const char *const *params)
{
    PGresult *res = db_sql(r, c, sql, n_params, params, 0);
    PQclear(res);
    return res ? 0 : 1;
}

/* db_connect: a connection to --db (10 s to connect unless the string says otherwise), made
 * non-blocking (db_pump waits on it), whose statements the server cancels itself a second after
 * --db-timeout (unless the string sets options). */
static inline PGconn *db_connect(const db_run *r)
{
    char options[64];
    snprintf(options, sizeof options, "-c statement_timeout=%ld", (long)r->timeout * 1000 + 1000);
    const char *keys[] = {"connect_timeout", "fallback_application_name", "options", "dbname", NULL};
    const char *vals[] = {"10", r->prog, options, r->o->db, NULL};
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    if (c && PQstatus(c) == CONNECTION_OK && PQsetnonblocking(c, 1) == 0)
        return c;
    char why[1400];
    snprintf(why, sizeof why, "cannot connect to the database: %s", c ? PQerrorMessage(c) : "out of memory");
    db_fail(r, why);
    PQfinish(c);
    return NULL;
}

/* db_quote: name quoted as an SQL identifier (PQescapeIdentifier), or NULL having said why. */
static inline char *db_quote(const db_run *r, const char *name)
{
    char *q = PQescapeIdentifier(r->rd, name, strlen(name));
    if (!q)
        db_fail(r, PQerrorMessage(r->rd));
    return q;
}

/* ---- the snapshot every rank reads ---- */

/* db_snapshot: rank 0 opens its read transaction and exports the snapshot; the others open
 * theirs on it. 0, or 1 having said why (every rank learns it through db_agree). */
static inline int db_snapshot(db_run *r)
{
    int64_t id[8] = {0}; /* the snapshot's name, e.g. 00000003-0000001B-1, sent as bytes */
    int ok = db_do(r, r->rd, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL) == 0;
    if (ok && r->rank == 0 && r->world > 1) {
        PGresult *res = db_sql(r, r->rd, "SELECT pg_export_snapshot()", 0, NULL, 0);
        ok = res && PQntuples(res) == 1 && (size_t)PQgetlength(res, 0, 0) < sizeof id;
        if (ok)
            memcpy(id, PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0));
        PQclear(res);
    }
    if (!db_agree(r, ok))
        return 1;
    if (r->world > 1 && ddl_comm_broadcast(r->comm, id, 8, DDL_INT64, 0) != DDL_OK)
        return db_fail(r, ddl_comm_error(r->comm));
    if (r->rank > 0) {
        char sql[128], *name = (char *)id;
        name[sizeof id - 1] = 0;
        for (const char *p = name; *p; p++) /* hex digits and dashes: nothing to quote */
            if (!((*p >= '0' && *p <= '9') || (*p >= 'A' && *p <= 'F') || *p == '-'))
                return db_fail(r, "rank 0 sent a snapshot name that is not one");
        snprintf(sql, sizeof sql, "SET TRANSACTION SNAPSHOT '%s'", name);
        ok = db_do(r, r->rd, sql, 0, NULL) == 0;
    }
    return db_agree(r, ok) ? 0 : 1; /* rank 0 keeps its transaction (and the snapshot) open */
}

/* db_columns: T's ID type into r->id_type; IMG must be bytea. 0, or 1 having said why. */
static inline int db_columns(db_run *r)
{
    const char *sql = "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
                      "WHERE a.attrelid = $1::regclass AND a.attname IN ($2, $3) AND NOT a.attisdropped";
    const char *params[] = {r->table, r->o->id, r->o->image};
    PGresult *res = db_sql(r, r->rd, sql, 3, params, 0);
    if (!res)
        return 1;
    const char *img_type = NULL;
    r->id_type[0] = 0;
    for (int i = 0; i < PQntuples(res); i++)
        if (strcmp(PQgetvalue(res, i, 0), r->o->id) == 0)
            snprintf(r->id_type, sizeof r->id_type, "%s", PQgetvalue(res, i, 1));
        else
            img_type = PQgetvalue(res, i, 1);
    char why[1400];
    int rc = 0;
    if (!r->id_type[0])
        snprintf(why, sizeof why, "table %s has no column %s (--id)", r->o->table, r->o->id), rc = 1;
    else if (!img_type)
        snprintf(why, sizeof why, "table %s has no column %s (--image)", r->o->table, r->o->image), rc = 1;
    else if (strcmp(img_type, "bytea") != 0)
        snprintf(why, sizeof why, "column %s of %s is %s; images are bytea (raw pixels, PNG or JPEG)", r->o->image,
                 r->o->table, img_type), rc = 1;
    PQclear(res);
    return rc ? db_fail(r, why) : 0;
}

/* ---- one batch: decode, predict, COPY ---- */

/* db_pixels: row i's image (bytes, n) as the model's (c, h, w) pixels into px. */
static inline int db_pixels(const db_run *r, const char *id, const unsigned char *b, size_t n, int c, int h, int w,
                            uint8_t *px)
{
    size_t want = (size_t)c * h * w;
    /* as the extension's ddl_predict: a PNG's or JPEG's signature makes the bytes an image, a PGM's
     * or PPM's (plain letters) only when they are not the raw pixels' size; any size, resized */
    int pnm = n >= 3 && b[0] == 'P' && (b[1] == '5' || b[1] == '6') && (b[2] == ' ' || b[2] == '\n' || b[2] == '\r' ||
                                                                       b[2] == '\t');
    const char *format = n >= 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0          ? "PNG"
                         : n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff ? "JPEG"
                         : pnm && n != want                                       ? (b[1] == '5' ? "PGM" : "PPM")
                                                                                  : NULL;
    char err[DDL_ERR_BYTES], why[DDL_ERR_BYTES + 600];
    if (!format && n == want) {
        memcpy(px, b, want);
        return 0;
    }
    if (!format)
        snprintf(why, sizeof why, "row %s=%s of %s: an image of %zu bytes, neither PNG, JPEG, PGM nor PPM; the model "
                 "takes %zu bytes of raw pixels (%d x %d x %d) or an image file of any size (resized to %d x %d)",
                 r->o->id, id, r->o->table, n, want, c, h, w, w, h);
    else if (ddl_image_decode(format, b, n, c, h, w, 0, NULL, px, err, sizeof err) != DDL_OK)
        snprintf(why, sizeof why, "row %s=%s of %s: a %s image of %zu bytes the model cannot take: %s", r->o->id, id,
                 r->o->table, format, n, err);
    else
        return 0;
    return db_fail(r, why);
}

/* db_buf: a growing byte buffer for the COPY text of one batch. */
typedef struct db_buf {
    char *p;
    size_t n, cap;
    int oom;
} db_buf;

static inline void db_put(db_buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = (char *)realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

/* db_put_text: s as a COPY text field (backslash, tab, newline and return escaped). */
static inline void db_put_text(db_buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char e = s[i] == '\\' ? '\\' : s[i] == '\t' ? 't' : s[i] == '\n' ? 'n' : s[i] == '\r' ? 'r' : 0;
        if (e) {
            char two[2] = {'\\', e};
            db_put(b, two, 2);
        } else
            db_put(b, s + i, 1);
    }
}

/* db_die_hook: DDL_EXAMPLE_DB_DIE=R:B, rank R's B-th batch (from 1): 1 there, else 0. */
static inline int db_die_hook(const db_run *r, int batch_no)
{
    const char *e = getenv("DDL_EXAMPLE_DB_DIE");
    int rank, b;
    return e && sscanf(e, "%d:%d", &rank, &b) == 2 && rank == r->rank && b == batch_no;
}

/* db_put_copy: n bytes of COPY data queued on c and sent, within the deadline. 0, or 1 having
 * said why. */
static inline int db_put_copy(const db_run *r, PGconn *c, const char *p, size_t n, double deadline, const char *what)
{
    int rc;
    while ((rc = PQputCopyData(c, p, (int)n)) == 0) /* not queued: libpq's buffer is full */
        if (db_pump(r, c, deadline, what, 0) != 0)
            return 1;
    if (rc == 1 && db_pump(r, c, deadline, what, 0) == 0)
        return 0;
    if (rc != 1) {
        char why[1400];
        snprintf(why, sizeof why, "%s: %s", what, PQerrorMessage(c));
        db_fail(r, why);
    }
    return 1;
}

/* db_copy: the batch's COPY text into OUT in a transaction of its own. 0, or 1 having said why.
 * On a failure the transaction is left open: every rank then exits, and the connection closing
 * rolls it back (a ROLLBACK sent to a server that stalled would wait for it again). */
static inline int db_copy(db_run *r, const db_buf *b, int batch_no, const char *first_id)
{
    char sql[1200], what[1000];
    snprintf(sql, sizeof sql, "COPY %s (%s, %s) FROM STDIN", r->out, r->id,
             r->segment ? "mask" : "class, probabilities");
    snprintf(what, sizeof what, "writing the batch from row %s=%s into %s", r->o->id, first_id, r->o->out_table);
    if (db_do(r, r->wr, "BEGIN", 0, NULL) != 0)
        return 1;
    PGresult *res = db_sql(r, r->wr, sql, 0, NULL, 0);
    if (!res)
        return 1;
    int in_copy = PQresultStatus(res) == PGRES_COPY_IN;
    PQclear(res);
    if (!in_copy)
        return db_fail(r, "COPY FROM STDIN did not start");
    double deadline = db_now() + r->timeout;
    if (db_die_hook(r, batch_no)) { /* the test hook: half the batch sent, then gone */
        db_put_copy(r, r->wr, b->p, b->n / 2, deadline, what);
        fprintf(stderr, "%s: rank %d: DDL_EXAMPLE_DB_DIE: killed halfway through batch %d\n", r->prog, r->rank,
                batch_no);
        fflush(stderr);
        raise(SIGKILL);
    }
    if (db_put_copy(r, r->wr, b->p, b->n, deadline, what) != 0)
        return 1;
    int rc;
    while ((rc = PQputCopyEnd(r->wr, NULL)) == 0)
        if (db_pump(r, r->wr, deadline, what, 0) != 0)
            return 1;
    res = rc == 1 ? db_results(r, r->wr, deadline, what, what) : NULL;
    if (rc != 1) {
        char why[1400];
        snprintf(why, sizeof why, "%s: %s", what, PQerrorMessage(r->wr));
        return db_fail(r, why);
    }
    if (!res)
        return 1;
    PQclear(res);
    return db_do(r, r->wr, "COMMIT", 0, NULL);
}

/* ---- a rank's run ---- */

/* db_score_rows: rank's share of the n rows, a batch at a time; *done counts rows written. */
static inline int db_score_rows(db_run *r, long n, long *done)
{
    const ddl_model_config *mc = ddl_model_get_config(ddl_predictor_model(r->pr));
    int c = mc->in_c, h = mc->in_h, w = mc->in_w, K = mc->n_classes, oc, oh, ow;
    ddl_model_output_shape(ddl_predictor_model(r->pr), &oc, &oh, &ow);
    int segment = r->segment = oh != 1 || ow != 1;
    size_t in_sz = (size_t)c * h * w, S = (size_t)oh * ow;
    long passes = (n + r->batch - 1) / r->batch;
    long lo = passes * r->rank / r->world * r->batch, hi = passes * (r->rank + 1) / r->world * r->batch;
    lo = lo < n ? lo : n, hi = hi < n ? hi : n;
    uint8_t *px = (uint8_t *)malloc((size_t)r->batch * in_sz);
    float *probs = segment ? NULL : (float *)malloc((size_t)r->batch * K * sizeof(float));
    uint16_t *cls = (uint16_t *)malloc((size_t)r->batch * (segment ? S : 1) * sizeof(uint16_t));
    db_buf b = {0};
    char sql[1600], fetch[64], why[1400], prev[256] = "";
    int rc = px && cls && (segment || probs) ? 0 : db_fail(r, "out of memory for a batch");
    /* t.ID: the column, not the output column ID::text (named ID too), which sorts as text */
    snprintf(sql, sizeof sql, "DECLARE ddl_rows NO SCROLL CURSOR FOR SELECT t.%s::text, t.%s FROM %s t WHERE t.%s IS NOT "
             "NULL ORDER BY t.%s OFFSET %ld LIMIT %ld", r->id, r->image_col, r->table, r->id, r->id, lo, hi - lo);
    if (rc == 0 && hi > lo)
        rc = db_do(r, r->rd, sql, 0, NULL);
    snprintf(fetch, sizeof fetch, "FETCH FORWARD %d FROM ddl_rows", r->batch);
    for (int batch_no = 1; rc == 0 && *done < hi - lo; batch_no++) {
        PGresult *res = db_sql(r, r->rd, fetch, 0, NULL, 1);
        int m = res ? PQntuples(res) : 0;
        if (!res)
            rc = 1;
        else if (m == 0 || m > r->batch)
            rc = db_fail(r, "the table changed under the snapshot (a batch came short)");
        char first[256] = "";
        for (int i = 0; rc == 0 && i < m; i++) {
            char id[256];
            snprintf(id, sizeof id, "%.*s", PQgetlength(res, i, 0), PQgetvalue(res, i, 0));
            if (i == 0)
                snprintf(first, sizeof first, "%s", id);
            if (prev[0] && strcmp(prev, id) == 0) {
                snprintf(why, sizeof why, "row %s=%s of %s: the id appears twice; --id must be a key", r->o->id, id,
                         r->o->table);
                rc = db_fail(r, why);
            } else if (PQgetisnull(res, i, 1)) {
                snprintf(why, sizeof why, "row %s=%s of %s: the image (%s) is NULL", r->o->id, id, r->o->table,
                         r->o->image);
                rc = db_fail(r, why);
            } else
                rc = db_pixels(r, id, (const unsigned char *)PQgetvalue(res, i, 1), (size_t)PQgetlength(res, i, 1),
                               c, h, w, px + (size_t)i * in_sz);
            snprintf(prev, sizeof prev, "%s", id);
        }
        if (rc == 0 && ddl_predictor_run(r->pr, px, m, c, h, w, NULL, probs, cls) != DDL_OK)
            rc = db_fail(r, ddl_predictor_error(r->pr));
        b.n = 0;
        for (int i = 0; rc == 0 && i < m; i++) {
            char num[64];
            db_put_text(&b, PQgetvalue(res, i, 0), (size_t)PQgetlength(res, i, 0));
            if (!segment) {
                db_put(&b, num, (size_t)snprintf(num, sizeof num, "\t%d\t{", cls[i]));
                for (int k = 0; k < K; k++)
                    db_put(&b, num, (size_t)snprintf(num, sizeof num, "%s%.9g", k ? "," : "",
                                                     (double)probs[(size_t)i * K + k]));
                db_put(&b, "}\n", 2);
            } else { /* bytea in hex, its backslash doubled for COPY's text format */
                static const char hex[] = "0123456789abcdef";
                db_put(&b, "\t\\\\x", 4);
                for (size_t k = 0; k < S; k++) {
                    unsigned v = cls[(size_t)i * S + k] > 255 ? 255 : cls[(size_t)i * S + k];
                    char two[2] = {hex[v >> 4], hex[v & 15]};
                    db_put(&b, two, 2);
                }
                db_put(&b, "\n", 1);
            }
        }
        if (rc == 0 && b.oom)
            rc = db_fail(r, "out of memory for a batch's COPY");
        if (rc == 0)
            rc = db_copy(r, &b, batch_no, first);
        if (rc == 0)
            *done += m;
        PQclear(res);
    }
    free(px), free(probs), free(cls), free(b.p);
    return rc;
}

/* db_score: every rank's part of --predict --db: rank's share of T scored by pr (whose batch is
 * `batch`) into OUT; rank 0 prints the rows and rows/s. Collective over comm (NULL: one
 * process). Returns the exit status: 0, or 1 on every rank when any failed. */
static inline int db_score(const char *prog, const db_opts *o, ddl_predictor *pr, ddl_comm *comm, int batch)
{
    db_run r = {.prog = prog, .o = o, .comm = comm, .rank = comm ? ddl_comm_rank(comm) : 0,
                .world = comm ? ddl_comm_size(comm) : 1, .batch = batch > 0 ? batch : 64, .pr = pr,
                .timeout = o->timeout > 0 ? o->timeout : DB_TIMEOUT_DEFAULT};
    db_opts dflt = *o;
    dflt.id = o->id ? o->id : "id";
    dflt.image = o->image ? o->image : "img";
    r.o = &dflt;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int ok = pr && (r.rd = db_connect(&r)) != NULL && (r.wr = db_connect(&r)) != NULL;
    ok = ok && (r.table = db_quote(&r, dflt.table)) && (r.id = db_quote(&r, dflt.id)) &&
         (r.image_col = db_quote(&r, dflt.image)) && (r.out = db_quote(&r, dflt.out_table));
    ok = db_agree(&r, ok) && db_snapshot(&r) == 0;
    long n = 0, done = 0;
    if (ok) {
        char sql[1200];
        snprintf(sql, sizeof sql, "SELECT count(%s) FROM %s", r.id, r.table);
        PGresult *res = db_columns(&r) == 0 ? db_sql(&r, r.rd, sql, 0, NULL, 0) : NULL;
        ok = res != NULL;
        n = res ? atol(PQgetvalue(res, 0, 0)) : 0;
        PQclear(res);
    }
    if (db_agree(&r, ok) && r.rank == 0) { /* OUT, before any rank writes into it */
        const ddl_model *m = ddl_predictor_model(pr);
        int oc, oh, ow;
        ddl_model_output_shape(m, &oc, &oh, &ow);
        char sql[1600];
        snprintf(sql, sizeof sql, "CREATE TABLE IF NOT EXISTS %s (%s %s, %s)", r.out, r.id, r.id_type,
                 oh == 1 && ow == 1 ? "class int, probabilities real[]" : "mask bytea");
        ok = db_do(&r, r.wr, sql, 0, NULL) == 0;
    }
    ok = db_agree(&r, ok) && db_score_rows(&r, n, &done) == 0;
    if (ok) /* the read transaction's end (on a failure, closing the connection ends it) */
        ok = db_do(&r, r.rd, "COMMIT", 0, NULL) == 0;
    int all = db_agree(&r, ok);
    int64_t rows = done;
    if (all && comm && ddl_comm_allreduce(comm, &rows, 1, DDL_INT64, DDL_SUM) != DDL_OK)
        all = db_fail(&r, ddl_comm_error(comm)) == 0;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (all && r.rank == 0)
        printf("scored %lld row%s of %s into %s on %d rank%s in %.2f s (%.0f rows/s)\n", (long long)rows,
               rows == 1 ? "" : "s", dflt.table,
               dflt.out_table, r.world, r.world > 1 ? "s" : "", secs, secs > 0 ? (double)rows / secs : 0.0);
    PQfreemem(r.table), PQfreemem(r.id), PQfreemem(r.image_col), PQfreemem(r.out);
    PQfinish(r.rd), PQfinish(r.wr);
    return all ? 0 : 1;
}

#else /* built without libpq */

static inline int db_score(const char *prog, const db_opts *o, ddl_predictor *pr, ddl_comm *comm, int batch)
{
    (void)o, (void)pr, (void)batch;
    if (!comm || ddl_comm_rank(comm) == 0)
        fprintf(stderr, "%s: --db: built without libpq (install libpq-dev, then build with -DDDL_EXAMPLE_PQ and "
                        "-lpq)\n", prog);
    return 1;
}

#endif

#endif
