/* test_cache.c - the decoded data cache: a data set comes back byte for byte with its class
 * names; another key, a truncated or damaged file, a missing one, a file of another kind, a
 * FIFO and a header whose sizes overflow are each refused with their own code, and nothing is taken from
 * them. */
#include "check.h"
#include "ddl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char path[64];

static size_t file_size(void)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    fseek(f, 0, SEEK_END);
    size_t n = (size_t)ftell(f);
    fclose(f);
    return n;
}

static void flip(long at)
{
    FILE *f = fopen(path, "r+b");
    fseek(f, at, SEEK_SET);
    int c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ 4, f);
    fclose(f);
}

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* forge: a cache at path whose header (right CRCs and all) claims n samples of c x h x w and
 * targets of th x tw (bytes, or 2 each past 256 classes), and holds only its key "k": sizes
 * that add up to its 1 byte of payload only when their products wrap around 64 bits. */
static void forge(uint32_t n, uint32_t c, uint32_t h, uint32_t w, uint32_t th, uint32_t tw, uint32_t classes)
{
    uint8_t b[65] = "DDLDSET";
    const uint32_t f[] = {1, n, c, h, w, th, tw, classes, 1, 0}; /* version, n .. tw, classes, key and names bytes */
    for (int i = 0; i < 10; i++)
        put_le(b + 8 + 4 * i, f[i], 4);
    put_le(b + 48, 1, 8);
    b[64] = 'k';
    put_le(b + 56, ddl_crc32(0, b + 64, 1), 4);
    put_le(b + 60, ddl_crc32(0, b, 60), 4);
    FILE *o = fopen(path, "wb");
    CHECK(o && fwrite(b, 1, sizeof b, o) == sizeof b);
    if (o)
        fclose(o);
}

int main(void)
{
    snprintf(path, sizeof path, "/tmp/ddl-test-cache-%d", (int)getpid());
    enum { N = 50 };
    static uint8_t images[N * 3 * 5 * 4], labels[N];
    for (size_t i = 0; i < sizeof images; i++)
        images[i] = (uint8_t)(i * 7);
    for (int i = 0; i < N; i++)
        labels[i] = (uint8_t)(i % 3);
    static const char *const names[3] = {"apple", "guava", "kiwi"};
    ddl_dataset d = {.n = N, .c = 3, .h = 5, .w = 4, .th = 1, .tw = 1, .n_classes = 3, .images = images,
                     .targets = labels, .class_names = names}, e;
    char err[DDL_ERR_BYTES];
    CHECK(ddl_dataset_save_cache(&d, "folder /x size 5x4", path, err, sizeof err) == DDL_OK);
    CHECK(ddl_dataset_load_cache(path, "folder /x size 5x4", NULL, &e, err, sizeof err) == DDL_OK);
    CHECK(e.n == N && e.c == 3 && e.h == 5 && e.w == 4 && e.n_classes == 3);
    CHECK(memcmp(e.images, images, sizeof images) == 0 && memcmp(e.targets, labels, sizeof labels) == 0);
    CHECK(e.class_names && strcmp(e.class_names[2], "kiwi") == 0);
    ddl_dataset_free(&e);
    CHECK(ddl_dataset_load_cache(path, "folder /x size 6x4", NULL, &e, err, sizeof err) == DDL_EMISMATCH);
    CHECK(strstr(err, "a cache of other data or another size") && e.images == NULL);
    size_t n = file_size();
    CHECK(truncate(path, (off_t)n - 1) == 0);
    CHECK(ddl_dataset_load_cache(path, "folder /x size 5x4", NULL, &e, err, sizeof err) == DDL_ECORRUPT);
    CHECK(strstr(err, "truncated") != NULL);
    CHECK(ddl_dataset_save_cache(&d, "folder /x size 5x4", path, err, sizeof err) == DDL_OK);
    flip(200); /* an image byte */
    CHECK(ddl_dataset_load_cache(path, "folder /x size 5x4", NULL, &e, err, sizeof err) == DDL_ECORRUPT);
    CHECK(strstr(err, "CRC-32 does not match") != NULL);
    CHECK(ddl_dataset_save_cache(&d, "folder /x size 5x4", path, err, sizeof err) == DDL_OK);
    flip(20); /* the header */
    CHECK(ddl_dataset_load_cache(path, "folder /x size 5x4", NULL, &e, err, sizeof err) == DDL_ECORRUPT);
    unlink(path);
    CHECK(ddl_dataset_load_cache(path, "k", NULL, &e, err, sizeof err) == DDL_EIO);
    CHECK(ddl_dataset_load_cache("/bin/sh", "k", NULL, &e, err, sizeof err) == DDL_ECORRUPT &&
          strstr(err, "not a ddl data cache"));
    /* sizes that overflow: 2^30 images of 4 x 65536 x 65536 bytes (2^64) and 2^30 targets of
     * 2^17 x 2^17 (2^64) add up to 0 in 64 bits; so do 2^31 images of 2 x 65536 x 65536 and
     * their targets of 65536 x 65536 x 2 bytes, and 2^31 does not fit the data set's int */
    forge(1u << 30, 4, 65536, 65536, 1u << 17, 1u << 17, 3);
    CHECK(ddl_dataset_load_cache(path, "k", NULL, &e, err, sizeof err) == DDL_ECORRUPT && e.images == NULL);
    CHECK(strstr(err, "out of range (n 1073741824, 4 x 65536 x 65536, targets 131072 x 131072") != NULL);
    forge(1u << 30, 4, 65536, 65536, 65536, 65536, 3); /* targets of 2^62 bytes: in range, do not add up */
    CHECK(ddl_dataset_load_cache(path, "k", NULL, &e, err, sizeof err) == DDL_ECORRUPT && e.images == NULL);
    CHECK(strstr(err, "do not add up") != NULL);
    forge(1u << 31, 2, 65536, 65536, 65536, 65536, 300);
    CHECK(ddl_dataset_load_cache(path, "k", NULL, &e, err, sizeof err) == DDL_ECORRUPT && e.images == NULL);
    CHECK(strstr(err, "out of range (n 2147483648") != NULL);
    unlink(path);
    /* a FIFO at the cache's path: refused at once, not waited on (the alarm fails the test) */
    CHECK(mkfifo(path, 0600) == 0);
    alarm(30);
    CHECK(ddl_dataset_load_cache(path, "k", NULL, &e, err, sizeof err) == DDL_EIO && strstr(err, "not a regular file"));
    alarm(0);
    unlink(path);
    /* without class names */
    d.class_names = NULL;
    CHECK(ddl_dataset_save_cache(&d, "k", path, err, sizeof err) == DDL_OK);
    CHECK(ddl_dataset_load_cache(path, "k", NULL, &e, err, sizeof err) == DDL_OK && e.class_names == NULL);
    ddl_dataset_free(&e);
    unlink(path);
    return TEST_END();
}
