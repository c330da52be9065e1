/* fuzz_image.c - libFuzzer target of image decoding (src/data/decode.c, resize.c): the input
 * after its first byte is one file given to ddl_image_load; the first byte picks the channels
 * (1 or 3) and the size it is resized to (1 to 64 on each side). Every input must give DDL_OK or
 * an error with a message, never a crash, a leak or a read out of bounds. Seeds: a PGM, a PPM
 * (FUZZ_SEED_DIR), and tests/fuzz/corpus/fuzz_image/ (tests/fuzz/make_corpus.py). */
#include "ddl.h"
#include "fuzz_common.h"

#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

FUZZ_ASAN_QUARANTINE_64MB /* images near ddl's 2^26 pixels (fuzz_common.h) */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *dir = getenv("FUZZ_SEED_DIR");
    if (!dir)
        return 0;
    char p[600];
    static const uint8_t pgm[] = "\x21P5\n# a comment\n3 2\n255\n\x01\x02\x03\x04\x05\x06";
    static const uint8_t ppm[] = "\x86P6 2 1 255\n\x10\x20\x30\x40\x50\x60";
    snprintf(p, sizeof p, "%s/seed-pgm", dir);
    fuzz_write(p, pgm, sizeof pgm - 1);
    snprintf(p, sizeof p, "%s/seed-ppm", dir);
    fuzz_write(p, ppm, sizeof ppm - 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int c = (data[0] & 1) ? 3 : 1, side = 1 + ((data[0] >> 1) & 63);
    static uint8_t out[3 * 64 * 64];
    char err[DDL_ERR_BYTES];
    err[0] = 0;
    const char *p = fuzz_path("image");
    fuzz_write(p, data + 1, size - 1);
    int rc = ddl_image_load(p, c, side, (side * 7) % 64 + 1, NULL, out, err, sizeof err);
    if (rc != DDL_OK && !err[0])
        abort();
    return 0;
}
