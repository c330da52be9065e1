/* fuzz_common.h - what the libFuzzer targets of tests/fuzz/ share: writing an input to a file
 * of this process (the parsers under test read files, as they do in use). */
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

static void fuzz_write(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    if (size && fwrite(data, 1, size, f) != size)
        abort();
    fclose(f);
}

#endif
