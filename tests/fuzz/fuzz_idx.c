/* fuzz_idx.c - libFuzzer target of the IDX reader: one IDX file (raw or gzip, as the input's
 * first bytes say) through ddl_idx_load, and an MNIST split of two files (images, labels) cut
 * from the input through ddl_dataset_load_mnist. Every input must give DDL_OK or an error with
 * a message, never a crash, a leak or a read out of bounds. Seeds: FUZZ_SEED_DIR's, and
 * tests/fuzz/corpus/fuzz_idx/ (tests/fuzz/make_corpus.py: every dtype, gzip, MNIST pairs). */
#include "ddl.h"
#include "fuzz_common.h"

#include <string.h>
#include <sys/stat.h>
#ifdef DDL_WITH_ZLIB
#include <zlib.h>
#endif

static volatile uint8_t sink; /* reads the optimiser cannot drop */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- seeds (FUZZ_SEED_DIR): a raw and a gzip IDX file, an MNIST pair ---- */

static void seed(const char *dir, const char *name, const uint8_t *b, size_t n, int gz)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (!gz) {
        fuzz_write(p, b, n);
        return;
    }
#ifdef DDL_WITH_ZLIB
    fuzz_write(p, b, 1); /* the mode byte stays raw; the IDX file after it is gzip */
    char tmp[640];
    snprintf(tmp, sizeof tmp, "%s.gz.tmp", p);
    gzFile z = gzopen(tmp, "wb");
    gzwrite(z, b + 1, (unsigned)(n - 1));
    gzclose(z);
    FILE *in = fopen(tmp, "rb"), *out = fopen(p, "ab");
    int c;
    while (in && out && (c = fgetc(in)) != EOF)
        fputc(c, out);
    if (in)
        fclose(in);
    if (out)
        fclose(out);
    remove(tmp);
#endif
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *dir = getenv("FUZZ_SEED_DIR");
    if (!dir)
        return 0;
    static const uint8_t idx[] = {0, 0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8};
    seed(dir, "seed-raw", idx, sizeof idx, 0);
    seed(dir, "seed-gz", idx, sizeof idx, 1);
    /* mode 1, labels start 27 bytes in: images (2, 2, 2), then labels (2) */
    static const uint8_t pair[] = {1, 24, 0, 0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8,
                                   0, 0, 8, 1, 0, 0, 0, 2, 3, 9};
    seed(dir, "seed-mnist", pair, sizeof pair, 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[DDL_ERR_BYTES];
    if (size >= 1 && (data[0] & 1)) { /* an MNIST split: data[1..2] says where labels start */
        if (size < 3)
            return 0;
        size_t cut = 3 + ((size_t)data[1] | (size_t)data[2] << 8);
        if (cut > size)
            cut = size;
        const char *d = fuzz_path("mnist");
        mkdir(d, 0700);
        char ip[600], lp[600];
        snprintf(ip, sizeof ip, "%s/t10k-images-idx3-ubyte", d);
        snprintf(lp, sizeof lp, "%s/t10k-labels-idx1-ubyte", d);
        fuzz_write(ip, data + 3, cut - 3);
        fuzz_write(lp, data + cut, size - cut);
        ddl_dataset ds;
        int rc = ddl_dataset_load_mnist(d, "t10k", NULL, &ds, err, sizeof err);
        if (rc == DDL_OK) {
            float mean, std;
            ddl_dataset_stats(&ds, &mean, &std);
            ddl_dataset_free(&ds);
        } else if (!err[0]) {
            abort(); /* an error must say why */
        }
        return 0;
    }
    const char *p = fuzz_path("idx");
    fuzz_write(p, data + (size > 0), size - (size > 0));
    uint8_t *buf = NULL;
    int n_dims = 0, dims[4];
    int rc = ddl_idx_load(p, NULL, &buf, &n_dims, dims, err, sizeof err);
    if (rc == DDL_OK) {
        size_t total = 1;
        for (int i = 0; i < n_dims; i++)
            total *= (size_t)dims[i];
        for (size_t i = 0; i < total; i += 4096)
            sink ^= buf[i]; /* every byte it claims must be there */
        sink ^= buf[total - 1];
        free(buf);
    } else if (!err[0] || buf) {
        abort();
    }
    return 0;
}
