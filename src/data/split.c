/* split.c - a validation set taken from a training set (--val-split F, Keras's validation_split):
 * which samples go is a function of the seed alone, so every rank and every run takes the same.
 * Owns: the choice (a seeded Fisher-Yates shuffle of the indices; the first round(n F) are the
 * validation samples) and copying both parts, each in its original order, into blocks of their
 * own. Must not: change the source, or allocate except through the caller's allocator. */
#include "impl.h"

#include <math.h>
#include <string.h>

/* part: the samples of d whose flag equals want, in order, into a new data set. */
static int part(const ddl_dataset *d, const uint8_t *is_val, int want, int n, const ddl_allocator *alloc,
                ddl_dataset *out)
{
    /* bytes per sample of images and of targets, whichever kind d has */
    size_t per = (size_t)d->c * (size_t)d->h * (size_t)d->w * ddl__pixel_bytes(d);
    size_t tper = (size_t)d->th * (size_t)d->tw * ddl__target_bytes(d);
    const uint8_t *px = ddl__pixel_data(d), *tg = ddl__target_data(d);
    size_t names = 0;
    for (int c = 0; d->class_names && c < d->n_classes; c++)
        names += strlen(d->class_names[c]) + 1;
    size_t img = (size_t)n * per, tg_at = ddl__align_up(img), nm_at = ddl__align_up(tg_at + (size_t)n * tper);
    uint8_t *block = (uint8_t *)ddl__alloc(alloc, nm_at + (d->class_names ? (size_t)d->n_classes * sizeof(char *) : 0) +
                                                      names + 1);
    if (!block)
        return DDL_ENOMEM;
    for (int i = 0, k = 0; i < d->n; i++)
        if (is_val[i] == want) {
            memcpy(block + (size_t)k * per, px + (size_t)i * per, per);
            memcpy(block + tg_at + (size_t)k * tper, tg + (size_t)i * tper, tper);
            k++;
        }
    const char **cn = NULL;
    if (d->class_names) {
        cn = (const char **)(block + nm_at);
        char *at = (char *)(cn + d->n_classes);
        for (int c = 0; c < d->n_classes; c++) {
            cn[c] = strcpy(at, d->class_names[c]);
            at += strlen(at) + 1;
        }
    }
    *out = *d;
    out->n = n;
    out->images = d->images ? block : NULL;
    out->fimages = d->images ? NULL : (const float *)(void *)block;
    out->targets = d->targets ? block + tg_at : NULL;
    out->targets16 = d->targets ? NULL : (const uint16_t *)(void *)(block + tg_at);
    out->owned = block;
    out->alloc = alloc;
    out->class_names = cn;
    return DDL_OK;
}

int ddl_dataset_split(const ddl_dataset *d, double fraction, uint64_t seed, const ddl_allocator *alloc,
                      ddl_dataset *train, ddl_dataset *val, char *err, size_t err_bytes)
{
    if (train)
        memset(train, 0, sizeof *train);
    if (val)
        memset(val, 0, sizeof *val);
    if (!d || !(d->images || d->fimages) || !(d->targets || d->targets16) || !train || !val || !(fraction > 0.0 && fraction < 1.0))
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_dataset_split: a data set and a fraction between 0 and 1 "
                         "(exclusive), got %g", fraction);
    int n_val = (int)floor(d->n * fraction + 0.5);
    if (n_val < 1 || n_val >= d->n)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_dataset_split: %g of %d samples is %d: each part needs at "
                         "least one sample", fraction, d->n, n_val);
    uint32_t *idx = (uint32_t *)ddl__alloc(alloc, (size_t)d->n * (sizeof(uint32_t) + 1));
    if (!idx)
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "ddl_dataset_split: cannot allocate %d indices", d->n);
    uint8_t *is_val = (uint8_t *)(idx + d->n);
    ddl_rng r;
    ddl_rng_seed(&r, seed);
    for (int i = 0; i < d->n; i++)
        idx[i] = (uint32_t)i, is_val[i] = 0;
    for (int i = d->n - 1; i > 0; i--) {
        int j = (int)(ddl_rng_next(&r) % (uint64_t)(i + 1));
        uint32_t t = idx[i];
        idx[i] = idx[j], idx[j] = t;
    }
    for (int i = 0; i < n_val; i++)
        is_val[idx[i]] = 1;
    int rc = part(d, is_val, 1, n_val, alloc, val);
    if (rc == DDL_OK && (rc = part(d, is_val, 0, d->n - n_val, alloc, train)) != DDL_OK)
        ddl_dataset_free(val);
    ddl__free(alloc, idx);
    return rc == DDL_OK ? DDL_OK
                        : ddl__errf(err, err_bytes, rc, "ddl_dataset_split: cannot allocate the two parts of %d samples",
                                    d->n);
}
