/* fuzz_cache.c - libFuzzer target of the decoded cache's reader (src/data/cache.c): the input
 * after its first byte is one cache file given to ddl_dataset_load_cache. The first byte:
 * bit 0 clear, the header's and the payload's CRC-32 are made right first, so that mutations
 * get past the checksums to the sizes, key, names and targets they guard; bit 1 clear, the key
 * asked for is the one the file holds, so that the names and targets are read too. A data set
 * that loads is read to its last image byte, target and class name, and split as --val-split
 * does. Every input must give DDL_OK or an error with a message, never a crash, a leak or a
 * read out of bounds. Seeds: tests/fuzz/corpus/fuzz_cache/ (tests/fuzz/make_corpus.py). */
#include "ddl.h"
#include "fuzz_common.h"

#include <string.h>

static volatile uint8_t sink; /* reads the optimiser cannot drop */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* touch: every sample's last byte and target of d, and its class names. */
static void touch(const ddl_dataset *d)
{
    size_t per = (size_t)d->c * (size_t)d->h * (size_t)d->w, tper = (size_t)d->th * (size_t)d->tw;
    for (int i = 0; i < d->n; i++) {
        sink ^= d->images[(size_t)i * per + per - 1];
        size_t last = (size_t)i * tper + tper - 1;
        sink ^= d->targets ? d->targets[last] : (uint8_t)d->targets16[last];
    }
    for (int c = 0; d->class_names && c < d->n_classes; c++)
        sink ^= (uint8_t)strlen(d->class_names[c]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t n = size - 1;
    uint8_t *b = malloc(n + 1);
    if (!b)
        return 0;
    memcpy(b, data + 1, n);
    if (!(data[0] & 1) && n >= 64) {
        fuzz_put32(b + 56, ddl_crc32(0, b + 64, n - 64));
        fuzz_put32(b + 60, ddl_crc32(0, b, 60));
    }
    char key[4097] = "another key";
    if (!(data[0] & 2) && n >= 64) {
        size_t k = get32(b + 40), have = n - 64; /* the key: its length, then it, first in the payload */
        k = k < have ? k : have;
        k = k < sizeof key - 1 ? k : sizeof key - 1;
        memcpy(key, b + 64, k);
        key[k] = '\0';
    }
    const char *p = fuzz_path("cache");
    fuzz_write(p, b, n);
    free(b);
    char err[DDL_ERR_BYTES];
    err[0] = 0;
    ddl_dataset d, train, val;
    int rc = ddl_dataset_load_cache(p, key, NULL, &d, err, sizeof err);
    if (rc != DDL_OK) {
        if (!err[0] || d.images || d.owned)
            abort(); /* an error must say why, and leave nothing behind */
        return 0;
    }
    touch(&d);
    if (d.n >= 2 && ddl_dataset_split(&d, 0.5, 7, NULL, &train, &val, err, sizeof err) == DDL_OK) {
        touch(&train);
        touch(&val);
        ddl_dataset_free(&train);
        ddl_dataset_free(&val);
    }
    ddl_dataset_free(&d);
    return 0;
}
