/* outfile.h - output files of programs (ddlrun's --log-dir, ddl-sweep's --out) in a directory
 * another user might write to. Such a user could plant a symlink (or a hard link) named like
 * the next output, and the program would overwrite the victim's file it points to. So: a
 * directory that exists already must be ours and not writable by others unless sticky (then
 * nobody can plant anything in it but us, and in a sticky one nobody can replace our files); a
 * file we write anew is unlinked and created with O_EXCL | O_NOFOLLOW, as checkpoints are; a file
 * we append to (results.csv, output.log) is opened with O_NOFOLLOW and must be a regular file of
 * ours with one link. A directory a program writes into all along (ddlrun's --log-dir: a restart or
 * a replacement writes its log again) is held open: outdir_open walks the path one component at a
 * time from a descriptor, never through a link another user planted, and the files are then made
 * relative to the descriptor (outfile_create_at), so that swapping a parent for a link to some
 * private directory later changes nothing. Header-only, for programs: these return -1 and say why;
 * the caller exits. */
#ifndef DDL_OUTFILE_H
#define DDL_OUTFILE_H

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* outdir_owned: 0 if the directory st describes is ours and nobody else may write into it (or
 * it has the sticky bit); -1 with why (naming path). */
static inline int outdir_owned(const struct stat *st, const char *path, char *why, size_t why_bytes)
{
    if (st->st_uid != geteuid()) {
        snprintf(why, why_bytes, "%s belongs to uid %u, not to us (uid %u): another user could plant links in it; "
                 "give a directory of our own", path, (unsigned)st->st_uid, (unsigned)geteuid());
        return -1;
    }
    if ((st->st_mode & S_IWOTH) && !(st->st_mode & S_ISVTX)) {
        snprintf(why, why_bytes, "%s is writable by every user (mode %04o) without the sticky bit: another user "
                 "could plant links in it; chmod o-w it", path, (unsigned)(st->st_mode & 07777));
        return -1;
    }
    return 0;
}

/* outdir_check: 0 if path is a directory we may write outputs into; -1 with why (naming path). */
static inline int outdir_check(const char *path, char *why, size_t why_bytes)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        snprintf(why, why_bytes, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (S_ISLNK(st.st_mode) && st.st_uid != geteuid()) { /* ours: the user's own way to put it elsewhere */
        snprintf(why, why_bytes, "%s is a symbolic link of uid %u, not ours (uid %u): not followed", path,
                 (unsigned)st.st_uid, (unsigned)geteuid());
        return -1;
    }
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(why, why_bytes, "%s: %s", path, errno ? strerror(errno) : "not a directory");
        return -1;
    }
    return outdir_owned(&st, path, why, why_bytes);
}

/* outdir_make: mkdir path (0755) unless it exists, then outdir_check. */
static inline int outdir_make(const char *path, char *why, size_t why_bytes)
{
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        snprintf(why, why_bytes, "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    errno = 0;
    return outdir_check(path, why, why_bytes);
}

/* outdir_fd_check: outdir_check's tests on an open directory (path: for the message). */
static inline int outdir_fd_check(int fd, const char *path, char *why, size_t why_bytes)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(why, why_bytes, "%s: not a directory", path);
        return -1;
    }
    return outdir_owned(&st, path, why, why_bytes);
}

/* outdir_walk: path relative to the directory at (absolute paths from /) as a new descriptor,
 * each component opened with O_NOFOLLOW | O_DIRECTORY from the one before; a symbolic link is
 * followed only if it belongs to us or to root (*links bounds how many), its target walked the
 * same way; with make, a missing last component is made (0755). -1 with why. */
static inline int outdir_walk(int at, const char *path, int make, int *links, const char *whole, char *why,
                              size_t why_bytes)
{
    int fd = path[0] == '/' ? open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : fcntl(at, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(why, why_bytes, "%s: %s", whole, strerror(errno));
        return -1;
    }
    const char *p = path;
    while (*p) {
        char name[256];
        size_t n = strcspn(p, "/");
        const char *next = p + n + strspn(p + n, "/");
        if (n == 0 || (n == 1 && p[0] == '.')) {
            p = next;
            continue;
        }
        if (n >= sizeof name) {
            snprintf(why, why_bytes, "%s: a component is longer than %zu bytes", whole, sizeof name - 1);
            close(fd);
            return -1;
        }
        memcpy(name, p, n);
        name[n] = '\0';
        int last = *next == '\0', sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0 && errno == ENOENT && last && make) {
            if (mkdirat(fd, name, 0755) != 0 && errno != EEXIST) {
                snprintf(why, why_bytes, "cannot create %s: %s", whole, strerror(errno));
                close(fd);
                return -1;
            }
            sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        struct stat st;
        if (sub < 0 && (errno == ELOOP || errno == ENOTDIR) && fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISLNK(st.st_mode)) {
            char target[4096];
            ssize_t k = st.st_uid == geteuid() || st.st_uid == 0 ? readlinkat(fd, name, target, sizeof target - 1) : -1;
            if (st.st_uid != geteuid() && st.st_uid != 0) {
                snprintf(why, why_bytes, "%.*s is a symbolic link of uid %u, not ours (uid %u): not followed",
                         (int)(p - path + (ptrdiff_t)n), path, (unsigned)st.st_uid, (unsigned)geteuid());
                close(fd);
                return -1;
            }
            if (k <= 0 || --*links < 0) {
                snprintf(why, why_bytes, "%s: %s", whole, k <= 0 ? strerror(errno) : "too many symbolic links");
                close(fd);
                return -1;
            }
            target[k] = '\0';
            sub = outdir_walk(fd, target, make && last, links, whole, why, why_bytes);
            if (sub < 0) {
                close(fd);
                return -1;
            }
        } else if (sub < 0) {
            snprintf(why, why_bytes, "%s: %s", whole, strerror(errno));
            close(fd);
            return -1;
        }
        close(fd);
        fd = sub;
        p = next;
    }
    return fd;
}

/* outdir_open: path (made 0755 if missing, its parents must exist) as a directory descriptor we
 * may make outputs in (outdir_check's tests), walked by outdir_walk; -1 with why. */
static inline int outdir_open(const char *path, char *why, size_t why_bytes)
{
    int links = 40;
    int fd = outdir_walk(AT_FDCWD, path, 1, &links, path, why, why_bytes);
    if (fd >= 0 && outdir_fd_check(fd, path, why, why_bytes) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* outfile_create_at: outfile_create of name in the directory dir (a descriptor). */
static inline int outfile_create_at(int dir, const char *name)
{
    if (unlinkat(dir, name, 0) != 0 && errno != ENOENT)
        return -1;
    return openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
}

/* outfile_create: a new file at path for writing (whatever was there unlinked, never followed);
 * the descriptor, or -1 with errno (EEXIST: something was planted between unlink and open). */
static inline int outfile_create(const char *path)
{
    if (unlink(path) != 0 && errno != ENOENT)
        return -1;
    return open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
}

/* outfile_append: path opened to append (created if missing); -1 with why if it is a symbolic
 * link, or not a regular file of ours with one link (a hard link to someone's file). */
static inline int outfile_append(const char *path, char *why, size_t why_bytes)
{
    /* O_NONBLOCK: a FIFO planted there fails (ENXIO) instead of blocking; no effect on a file */
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    struct stat st;
    memset(&st, 0, sizeof st);
    if (fd < 0) {
        snprintf(why, why_bytes, "%s: %s", path, errno == ELOOP ? "a symbolic link: not followed" : strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1) {
        snprintf(why, why_bytes, "%s: not a regular file of ours with one link (uid %u, %u links): not written", path,
                 (unsigned)st.st_uid, (unsigned)st.st_nlink);
        close(fd);
        return -1;
    }
    return fd;
}

#endif
