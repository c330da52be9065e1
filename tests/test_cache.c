/* test_cache.c - the decoded data cache: a data set comes back byte for byte with its class
 * names; another key, a truncated or damaged file, a missing one and a file of another kind are
 * each refused with their own code, and nothing is taken from them. */
#include "check.h"
#include "ddl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    /* without class names */
    d.class_names = NULL;
    CHECK(ddl_dataset_save_cache(&d, "k", path, err, sizeof err) == DDL_OK);
    CHECK(ddl_dataset_load_cache(path, "k", NULL, &e, err, sizeof err) == DDL_OK && e.class_names == NULL);
    ddl_dataset_free(&e);
    unlink(path);
    return TEST_END();
}
