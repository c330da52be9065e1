/* file.c - a whole file into memory, for the loaders that parse from a buffer (npy.c, folder.c):
 * one regular file of at most a given size, read through the caller's allocator, with a message
 * naming the file when it cannot be. The open does not wait: a FIFO (or a device) is refused
 * from its fstat, where a blocking open would wait for a writer forever. */
#include "impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ddl__read_file(const char *path, uint64_t max_bytes, const ddl_allocator *alloc, unsigned char **buf,
                   size_t *bytes, char *err, size_t err_bytes)
{
    *buf = NULL;
    *bytes = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0)
        return ddl__errf(err, err_bytes, DDL_EIO, "%s: cannot open: %s", path, strerror(errno));
    int rc = DDL_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        rc = ddl__errf(err, err_bytes, DDL_EIO, "%s: not a regular file", path);
    else if ((uint64_t)st.st_size > max_bytes)
        rc = ddl__errf(err, err_bytes, DDL_EINVAL, "%s: %lld bytes: larger than the %llu ddl reads", path,
                       (long long)st.st_size, (unsigned long long)max_bytes);
    else if (!(*buf = (unsigned char *)ddl__alloc(alloc, (size_t)st.st_size + 1)))
        rc = ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: cannot allocate %lld bytes to read it", path,
                       (long long)st.st_size);
    for (size_t want = rc ? 0 : (size_t)st.st_size; *bytes < want;) {
        ssize_t r = read(fd, *buf + *bytes, want - *bytes);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = ddl__errf(err, err_bytes, DDL_EIO, "%s: read %zu of %lld bytes%s%s", path, *bytes,
                           (long long)st.st_size, r ? ": " : "", r ? strerror(errno) : "");
            break;
        }
        *bytes += (size_t)r;
    }
    close(fd);
    if (rc != DDL_OK) {
        ddl__free(alloc, *buf);
        *buf = NULL;
        *bytes = 0;
    }
    return rc;
}
