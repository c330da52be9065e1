/* fuzz_common.h - what the libFuzzer targets of tests/fuzz/ share: writing an input to a file
 * of this process (the parsers under test read files, as they do in use), and the CRC repair of
 * the checkpoint targets. */
#ifndef DDL_FUZZ_COMMON_H
#define DDL_FUZZ_COMMON_H
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fuzz_dir[256]; /* where fuzz_path puts this process's files */

/* FUZZ_ASAN_QUARANTINE_64MB: for a fuzzer that decodes images. ASan keeps freed blocks in a
 * quarantine of 256 MB by default, so one image near the 2^26 pixels ddl decodes (256 MB as RGBA,
 * and libjpeg's coefficients beside it) stays mapped after it is freed, and a run's RSS neared the
 * 2048 MB of -rss_limit_mb; blocks above a 64 MB quarantine are unmapped when freed. */
#define FUZZ_ASAN_QUARANTINE_64MB                                                                          \
    const char *__asan_default_options(void);                                                              \
    const char *__asan_default_options(void) { return "quarantine_size_mb=64"; }

/* fuzz_cleanup: at exit, remove every ddl-fuzz-PID-* file of this process (and the files in
 * such a directory: fuzz_idx makes one), so that a run leaves nothing in /dev/shm. libFuzzer
 * ends with exit() when its time or runs are up, which runs this; a crash keeps them, beside
 * the artifact that reproduces it. */
static inline void fuzz_cleanup(void)
{
    char prefix[64], p[600], q[900];
    snprintf(prefix, sizeof prefix, "ddl-fuzz-%d-", (int)getpid());
    DIR *d = opendir(fuzz_dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", fuzz_dir, e->d_name);
        DIR *sub = opendir(p);
        for (struct dirent *f; sub && (f = readdir(sub));)
            if (strcmp(f->d_name, ".") && strcmp(f->d_name, ".."))
                snprintf(q, sizeof q, "%s/%s", p, f->d_name), unlink(q);
        if (sub)
            closedir(sub), rmdir(p);
        else
            unlink(p);
    }
    if (d)
        closedir(d);
}

/* fuzz_path: a file name of this process under $TMPDIR (default /dev/shm, else /tmp), removed
 * at exit (fuzz_cleanup). */
static inline const char *fuzz_path(const char *tag)
{
    static char path[4][512];
    static int next;
    if (!fuzz_dir[0]) {
        const char *dir = getenv("TMPDIR");
        if (!dir)
            dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(fuzz_dir, sizeof fuzz_dir, "%s", dir);
        atexit(fuzz_cleanup);
    }
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "%s/ddl-fuzz-%d-%s", fuzz_dir, (int)getpid(), tag);
    return p;
}

#include "ddl.h"

/* ---- fuzz_allocator: malloc, refusing more than FUZZ_ALLOC_MAX bytes at once. A model file may
 * ask for any memory (a deconv of stride 2^20 on a small input: gigabytes of activations), which
 * ddl must refuse with DDL_ENOMEM and a message; libFuzzer would report the request itself as a
 * crash (-rss_limit_mb). ---- */

#define FUZZ_ALLOC_MAX ((size_t)256 << 20)

static inline void *fuzz_alloc_fn(void *ud, size_t bytes)
{
    (void)ud;
    return bytes <= FUZZ_ALLOC_MAX ? malloc(bytes) : NULL;
}

static inline void fuzz_free_fn(void *ud, void *ptr)
{
    (void)ud;
    free(ptr);
}

static inline ddl_allocator fuzz_allocator(void) { return (ddl_allocator){fuzz_alloc_fn, fuzz_free_fn, NULL}; }

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

static inline void fuzz_write(const char *path, const uint8_t *data, size_t size)
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
