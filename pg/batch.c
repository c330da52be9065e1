/* batch.c - the extension's functions of many rows per call: ddl_predict_batch,
 * ddl_predict_proba_batch and ddl_segment_batch take an array of images (bytea[], as
 * array_agg(img) builds it) and return a row per element, in the array's order (a NULL element
 * gives a NULL), as PostgresML's pgml.predict_batch does: so a query zips them with the ids it
 * aggregated the same way, or numbers them WITH ORDINALITY.
 * Owns: the call's state across its result rows (value per call: the array, an iterator over
 * it, and one chunk's pixels and results), and the chunks themselves: up to ddl.batch_size images
 * decoded as ddl_predict decodes them (pgddl_image_pixels) and run through the model's batch
 * predictor (pgddl_batch_predictor) in forward passes of as many as ddl.batch_memory allows. The
 * kernels give every image the same bits whatever the pass holds, so each row's answer is
 * ddl_predict's, bit for bit (tests/test_pg.sh).
 * Must not: allocate per row beyond the result (the chunk's buffers are the call's, made at its
 * first row); keep a pointer to the model entry across rows (another model's load may evict it:
 * each chunk looks the model up again, and a model whose shape changed meanwhile is an ERROR). */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include <string.h>

#include "pgddl.h"

typedef enum { CLASSES, PROBABILITIES, MASKS } batch_kind;

/* one call's state, in its multi-call memory */
typedef struct batch_state {
    const char *fn;       /* the SQL function's name, for errors */
    batch_kind kind;
    text *model;          /* the model argument */
    ArrayIterator it;     /* over the images, in storage order */
    int n, taken;         /* elements in the array; taken into chunks so far */
    int c, h, w, classes, oh, ow; /* the model's shape at the first row */
    int batch;            /* images decoded at a time: ddl.batch_size, or fewer for a shorter array
                           * (the predictor runs them in passes as ddl.batch_memory allows) */
    int have, next, at;   /* elements of this chunk; the next to return; its result's index */
    bool *null;           /* [batch]: the chunk's NULL elements */
    uint8 *px;            /* (batch, c, h, w): the chunk's images, its NULLs left out */
    float *probs;         /* (batch, classes), PROBABILITIES only */
    uint16 *cls;          /* (batch, oh, ow): each output position's class */
} batch_state;

/* the element an error happened at, for its CONTEXT line */
typedef struct where {
    const batch_state *s;
    int element;
} where;

static void where_callback(void *arg)
{
    const where *w = arg;

    errcontext("%s: image %d of %d in the array", w->s->fn, w->element, w->s->n);
}

/* start: the call's state from its arguments, the model loaded and of the kind fn takes. */
static batch_state *start(FunctionCallInfo fcinfo, const char *fn, batch_kind kind)
{
    model_entry *e = pgddl_get_model(PG_GETARG_TEXT_PP(0));
    ArrayType *a = PG_GETARG_ARRAYTYPE_P(1);
    batch_state *s = palloc0(sizeof *s);
    size_t in_bytes;

    if (kind == MASKS)
        pgddl_need_segmenter(e, fn);
    else
        pgddl_need_classifier(e, fn);
    s->fn = fn;
    s->kind = kind;
    s->model = PG_GETARG_TEXT_P_COPY(0);
    s->n = ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a));
    s->it = array_create_iterator(a, 0, NULL);
    s->c = e->c, s->h = e->h, s->w = e->w;
    s->classes = e->classes, s->oh = e->oh, s->ow = e->ow;
    s->batch = Min(pgddl_batch_size, Max(s->n, 1));
    in_bytes = (size_t) e->c * e->h * e->w;
    s->null = palloc((Size) s->batch * sizeof(bool));
    s->px = MemoryContextAllocHuge(CurrentMemoryContext, (Size) s->batch * in_bytes);
    s->cls = MemoryContextAllocHuge(CurrentMemoryContext, (Size) s->batch * e->oh * e->ow * sizeof(uint16));
    if (kind == PROBABILITIES)
        s->probs = palloc((Size) s->batch * e->classes * sizeof(float));
    return s;
}

/* chunk: the next up to `batch` elements decoded into s->px and run through the model. */
static void chunk(batch_state *s)
{
    model_entry *e = pgddl_get_model(s->model);
    ddl_predictor *p;
    size_t in_bytes = (size_t) s->c * s->h * s->w;
    ErrorContextCallback cb;
    where w = {s, 0};
    int k, m = 0;

    if (e->c != s->c || e->h != s->h || e->w != s->w || e->classes != s->classes || e->oh != s->oh ||
        e->ow != s->ow)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("ddl: model \"%s\" changed shape during %s", e->name, s->fn)));
    p = pgddl_batch_predictor(e);
    cb.callback = where_callback;
    cb.arg = &w;
    cb.previous = error_context_stack;
    error_context_stack = &cb;
    for (k = 0; k < s->batch && s->taken < s->n; k++, s->taken++) {
        Datum d;
        bool isnull;

        if (!array_iterate(s->it, &d, &isnull))
            elog(ERROR, "ddl: %s: the array ended at element %d of %d", s->fn, s->taken, s->n);
        s->null[k] = isnull;
        if (isnull)
            continue;
        w.element = s->taken + 1;
        memcpy(s->px + (size_t) m * in_bytes, pgddl_image_pixels(e, DatumGetByteaPP(d)), in_bytes);
        m++;
    }
    error_context_stack = cb.previous;
    CHECK_FOR_INTERRUPTS();
    if (ddl_predictor_run(p, s->px, m, s->c, s->h, s->w, NULL, s->probs, s->cls) != DDL_OK)
        ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
                        errmsg("ddl: model \"%s\": %s", e->name, ddl_predictor_error(p))));
    s->have = k;
    s->next = 0;
    s->at = 0;
}

/* result: the datum of result i of the chunk (not a NULL element). */
static Datum result(const batch_state *s, int i)
{
    Size n = (Size) s->oh * s->ow, k;
    ArrayType *a;
    bytea *out;
    uint8 *mask;

    switch (s->kind) {
    case CLASSES:
        return Int32GetDatum((int32) s->cls[i]);
    case PROBABILITIES: /* real[] of classes, as ddl_predict_proba builds it */
        a = pgddl_float4_array(s->classes);
        memcpy(ARR_DATA_PTR(a), s->probs + (size_t) i * s->classes, (size_t) s->classes * sizeof(float4));
        return PointerGetDatum(a);
    case MASKS:
        out = (bytea *) palloc(VARHDRSZ + n);
        SET_VARSIZE(out, VARHDRSZ + n);
        mask = (uint8 *) VARDATA(out);
        for (k = 0; k < n; k++)
            mask[k] = (uint8) s->cls[(size_t) i * n + k];
        return PointerGetDatum(out);
    }
    return (Datum) 0;
}

/* batch_srf: one row of fn's result per call; a chunk when the last one is used up. */
static Datum batch_srf(FunctionCallInfo fcinfo, const char *fn, batch_kind kind)
{
    FuncCallContext *fc;
    batch_state *s;
    bool null;

    if (SRF_IS_FIRSTCALL()) {
        MemoryContext old;

        fc = SRF_FIRSTCALL_INIT();
        old = MemoryContextSwitchTo(fc->multi_call_memory_ctx);
        fc->user_fctx = start(fcinfo, fn, kind);
        MemoryContextSwitchTo(old);
    }
    fc = SRF_PERCALL_SETUP();
    s = fc->user_fctx;
    if (s->next == s->have) {
        if (s->taken == s->n)
            SRF_RETURN_DONE(fc);
        chunk(s);
    }
    null = s->null[s->next++];
    if (null)
        SRF_RETURN_NEXT_NULL(fc);
    SRF_RETURN_NEXT(fc, result(s, s->at++));
}

PG_FUNCTION_INFO_V1(pgddl_predict_batch);
PG_FUNCTION_INFO_V1(pgddl_predict_proba_batch);
PG_FUNCTION_INFO_V1(pgddl_segment_batch);

/* ddl_predict_batch(model text, images bytea[]) returns setof int: each image's class. */
Datum pgddl_predict_batch(PG_FUNCTION_ARGS)
{
    return batch_srf(fcinfo, "ddl_predict_batch", CLASSES);
}

/* ddl_predict_proba_batch(model text, images bytea[]) returns setof real[]: each image's
 * probabilities. */
Datum pgddl_predict_proba_batch(PG_FUNCTION_ARGS)
{
    return batch_srf(fcinfo, "ddl_predict_proba_batch", PROBABILITIES);
}

/* ddl_segment_batch(model text, images bytea[]) returns setof bytea: each image's mask. */
Datum pgddl_segment_batch(PG_FUNCTION_ARGS)
{
    return batch_srf(fcinfo, "ddl_segment_batch", MASKS);
}
