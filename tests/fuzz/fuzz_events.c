/* fuzz_events.c - libFuzzer target of the reader of TensorBoard event files (tools/tfevents.h),
 * which ddl-serve's Training tab (--logdir, whose files anyone allowed to write there may have
 * made) and ddl-plot use. Input: one mode byte, then the file. Mode bit 0: first make every
 * record's two masked CRC-32C right, so that mutations get past the framing into the Event,
 * Summary, Value, Image and TensorProto fields. The file goes through tfe_open and tfe_next to
 * its end, as the readers take it. Every input must end in TFE_END or an error code, never a
 * crash, a read past the record, a huge allocation or a leak. With FUZZ_SEED_DIR set,
 * initialisation writes there files the library's own summary writer made (scalars, an image). */
#include "ddl.h"
#include "fuzz_common.h"
#include "tools/tfevents.h"

#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* repair: both masked CRCs of every whole record */
static void repair(uint8_t *b, size_t n)
{
    size_t at = 0;
    while (n - at >= 12) {
        put_le(b + at + 8, tfe_masked(b + at, 8), 4);
        uint64_t len = tfe_le(b + at, 8);
        if (len > n - at - 12 || n - at - 12 - len < 4)
            return;
        put_le(b + at + 12 + len, tfe_masked(b + at + 12, (size_t)len), 4);
        at += 12 + (size_t)len + 4;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t *b = malloc(size);
    if (!b)
        return 0;
    memcpy(b, data + 1, size - 1);
    if (data[0] & 1)
        repair(b, size - 1);
    const char *p = fuzz_path("events");
    fuzz_write(p, b, size - 1);
    free(b);
    char why[600];
    FILE *f = tfe_open(p, why, sizeof why);
    if (!f)
        abort(); /* a regular file of ours */
    unsigned char *buf = NULL;
    size_t cap = 0, records = 0;
    tfe_event e;
    int rc;
    while ((rc = tfe_next(f, &e, &buf, &cap)) == TFE_EVENT) {
        records++;
        if (!memchr(e.text, 0, sizeof e.text) || e.offset > size)
            abort();
    }
    if (rc > TFE_EVENT || rc < TFE_TOO_BIG)
        abort();
    free(buf);
    fclose(f);
    return 0;
}

/* ---- seeds: what the library's summary writer writes ---- */

static void write_seeds(const char *dir)
{
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s", fuzz_path("seeddir"));
    ddl_summary_writer *w = NULL;
    if (ddl_summary_writer_create(tmp, NULL, &w, NULL, 0) != DDL_OK)
        abort();
    uint8_t px[8 * 8 * 3];
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (uint8_t)(i * 13);
    for (int s = 1; s <= 3; s++) {
        ddl_summary_writer_scalar(w, "train/loss", s * 100, 2.0 / s);
        ddl_summary_writer_scalar(w, "test/accuracy", s, 0.5 + 0.1 * s);
    }
    ddl_summary_writer_scalar(w, "train/loss", 400, 0.0 / 0.0); /* a diverged run logs nan */
    ddl_summary_writer_image(w, "input", 1, px, 8, 8, 3); /* DDL_ENOTSUP without PNG: scalars only */
    ddl_summary_writer_image(w, "mask", 1, px, 8, 8, 1);
    char path[600];
    snprintf(path, sizeof path, "%s", ddl_summary_writer_path(w));
    ddl_summary_writer_destroy(w);
    fuzz_seeds(path, dir, 1, 2);
    /* a file of one version record only, as a run that has logged nothing yet */
    snprintf(tmp, sizeof tmp, "%s", fuzz_path("seeddir2"));
    if (ddl_summary_writer_create(tmp, NULL, &w, NULL, 0) != DDL_OK)
        abort();
    snprintf(path, sizeof path, "%s", ddl_summary_writer_path(w));
    ddl_summary_writer_destroy(w);
    fuzz_seeds(path, dir, 2, 2);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    if (getenv("FUZZ_SEED_DIR"))
        write_seeds(getenv("FUZZ_SEED_DIR"));
    return 0;
}
