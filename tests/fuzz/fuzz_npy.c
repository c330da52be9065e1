/* fuzz_npy.c - libFuzzer target of the numpy reader: the input's first byte picks what the rest
 * is. Even: one file, read by ddl_npy_load as f.npy (odd/2 picks f.npz:x, the named member).
 * Odd: a data set of two files cut from the input (data[1..2] says where the second starts)
 * through ddl_dataset_load_numpy. Every input must give DDL_OK or an error with a message,
 * never a crash, a leak or a read out of bounds. Seeds: a .npy and a stored .npz (FUZZ_SEED_DIR),
 * and tests/fuzz/corpus/fuzz_npy/ (tests/fuzz/make_corpus.py: every dtype and header version,
 * deflated members, zip64 fields). */
#include "ddl.h"
#include "fuzz_common.h"

#include <string.h>
#ifdef DDL_WITH_ZLIB
#include <zlib.h>
#endif

static volatile uint8_t sink;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- seeds (FUZZ_SEED_DIR) ---- */

/* npy: a version 1.0 .npy of uint8 (2, 2, 2) into b; its length. */
static size_t npy(uint8_t *b)
{
    static const char h[] = "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 2, 2), }";
    size_t hl = 64 - 10;
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (uint8_t)hl, b[9] = 0;
    memset(b + 10, ' ', hl);
    memcpy(b + 10, h, sizeof h - 1);
    b[10 + hl - 1] = '\n';
    for (int i = 0; i < 8; i++)
        b[64 + i] = (uint8_t)(i * 30);
    return 72;
}

static void put(uint8_t *p, uint32_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* zip1: a zip of one stored member x.npy holding m[n] into b; its length. */
static size_t zip1(uint8_t *b, const uint8_t *m, size_t n)
{
    uint32_t crc = 0;
#ifdef DDL_WITH_ZLIB
    crc = (uint32_t)crc32(0L, m, (uInt)n);
#endif
    size_t at = 0;
    memcpy(b, "PK\3\4", 4);
    memset(b + 4, 0, 26);
    put(b + 14, crc, 4), put(b + 18, (uint32_t)n, 4), put(b + 22, (uint32_t)n, 4), put(b + 26, 5, 2);
    memcpy(b + 30, "x.npy", 5);
    memcpy(b + 35, m, n);
    at = 35 + n;
    size_t central = at;
    memcpy(b + at, "PK\1\2", 4);
    memset(b + at + 4, 0, 42);
    put(b + at + 16, crc, 4), put(b + at + 20, (uint32_t)n, 4), put(b + at + 24, (uint32_t)n, 4);
    put(b + at + 28, 5, 2);
    memcpy(b + at + 46, "x.npy", 5);
    at += 51;
    memcpy(b + at, "PK\5\6", 4);
    memset(b + at + 4, 0, 18);
    put(b + at + 8, 1, 2), put(b + at + 10, 1, 2), put(b + at + 12, 51, 4), put(b + at + 16, (uint32_t)central, 4);
    return at + 22;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *dir = getenv("FUZZ_SEED_DIR");
    if (!dir)
        return 0;
    uint8_t a[80], z[256], out[512];
    size_t na = npy(a), nz = zip1(z, a, na);
    char p[600];
    out[0] = 0;
    memcpy(out + 1, a, na);
    snprintf(p, sizeof p, "%s/seed-npy", dir);
    fuzz_write(p, out, na + 1);
    out[0] = 2;
    memcpy(out + 1, z, nz);
    snprintf(p, sizeof p, "%s/seed-npz", dir);
    fuzz_write(p, out, nz + 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[DDL_ERR_BYTES];
    err[0] = 0;
    if (size < 1)
        return 0;
    if (data[0] & 1) { /* a data set: images, then targets from 3 + data[1..2] on */
        if (size < 3)
            return 0;
        size_t cut = 3 + ((size_t)data[1] | (size_t)data[2] << 8);
        cut = cut > size ? size : cut;
        const char *ip = fuzz_path("x.npy"), *tp = fuzz_path("y.npy");
        fuzz_write(ip, data + 3, cut - 3);
        fuzz_write(tp, data + cut, size - cut);
        ddl_dataset ds;
        int rc = ddl_dataset_load_numpy(ip, tp, NULL, &ds, err, sizeof err);
        if (rc == DDL_OK) {
            /* the last pixel (bytes, or floats in fimages) and target (bytes, or uint16) */
            size_t n = (size_t)ds.n * (size_t)ds.c * (size_t)ds.h * (size_t)ds.w;
            size_t t = (size_t)ds.n * (size_t)ds.th * (size_t)ds.tw;
            sink ^= ds.images ? ds.images[n - 1] : (uint8_t)(ds.fimages[n - 1] > 0.5f);
            sink ^= ds.targets ? ds.targets[t - 1] : (uint8_t)ds.targets16[t - 1];
            ddl_dataset_free(&ds);
        } else if (!err[0]) {
            abort();
        }
        return 0;
    }
    const char *p = fuzz_path((data[0] & 2) ? "f.npz" : "f.npy");
    fuzz_write(p, data + 1, size - 1);
    char spec[600];
    snprintf(spec, sizeof spec, "%s%s", p, (data[0] & 2) ? ":x" : "");
    ddl_npy a;
    int rc = ddl_npy_load(spec, NULL, &a, err, sizeof err);
    if (rc == DDL_OK) {
        size_t bytes = (size_t)a.count * (size_t)ddl_npy_dtype_bytes(a.dtype);
        if (bytes)
            sink ^= ((const uint8_t *)a.data)[bytes - 1];
        ddl_npy_free(&a, NULL);
    } else if (!err[0] || a.data) {
        abort();
    }
    return 0;
}
