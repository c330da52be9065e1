/* fuzz_common.h - what the libFuzzer targets of tests/fuzz/ share: writing an input to a file
 * of this process (the parsers under test read files, as they do in use), and the CRC repair of
 * the checkpoint targets. */
#ifndef DDL_FUZZ_COMMON_H
#define DDL_FUZZ_COMMON_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* fuzz_path: a file name of this process under $TMPDIR (default /dev/shm, else /tmp). */
static const char *fuzz_path(const char *tag)
{
    static char path[4][512];
    static int next;
    const char *dir = getenv("TMPDIR");
    if (!dir)
        dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "%s/ddl-fuzz-%d-%s", dir, (int)getpid(), tag);
    return p;
}

#include "ddl.h"

/* ---- checkpoints: fuzz_repair makes every CRC-32C of a checkpoint file right (header, section
 * headers, section bodies), so mutations get past the checksums into what they guard ---- */

static inline uint64_t fuzz_get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static inline void fuzz_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void fuzz_repair(uint8_t *b, size_t n)
{
    if (n < 32)
        return;
    fuzz_put32(b + 28, ddl_crc32c(0, b, 28));
    size_t at = 32;
    for (int i = 0; i < 5 && at + 32 <= n; i++) {
        uint64_t stored = fuzz_get64(b + at + 16);
        size_t body = n - (at + 32) < stored ? n - (at + 32) : (size_t)stored;
        fuzz_put32(b + at + 24, ddl_crc32c(0, b + at + 32, body));
        fuzz_put32(b + at + 28, ddl_crc32c(0, b + at, 28));
        if (stored > n - (at + 32))
            break;
        at += 32 + (size_t)stored;
    }
}

static void fuzz_write(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    if (size && fwrite(data, 1, size, f) != size)
        abort();
    fclose(f);
}

/* fuzz_seeds: the file at path as seeds dir/seed-K-MODE, one per mode byte 0..modes-1 in front. */
static inline void fuzz_seeds(const char *path, const char *dir, int k, int modes)
{
    static uint8_t buf[1 << 16];
    FILE *f = fopen(path, "rb");
    if (!f)
        abort();
    size_t n = fread(buf + 1, 1, sizeof buf - 1, f);
    fclose(f);
    for (int mode = 0; mode < modes; mode++) {
        char out[600];
        snprintf(out, sizeof out, "%s/seed-%d-%d", dir, k, mode);
        buf[0] = (uint8_t)mode;
        fuzz_write(out, buf, n + 1);
    }
}

#endif
