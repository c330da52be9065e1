/* eventdirs.h - the runs under a directory, for ddl-plot and ddl-serve --logdir: as TensorBoard
 * does, every directory holding an events.out.tfevents.* file is a run, found in the given one
 * and in its sub-directories down to EVD_MAX_DEPTH levels (a sweep's DIR/trial-NNNN/logs is two).
 * A run is labelled by its directory relative to the given one, a last "logs" component dropped
 * (it names no run: ddl-sweep and the README put every run's files in a "logs" directory), so
 * DIR/trial-0003/logs is "trial-0003"; a run in the given directory itself is labelled by that
 * directory's base name (the parent's when it is "logs"), never "." or "logs". Runs come in name
 * order, and so do the files of a run (a resumed run's second file continues the first).
 * Header-only; for programs (it allocates). Hidden entries are skipped; symbolic links are
 * followed (as TensorBoard does), the depth bound stopping a loop. */
#ifndef DDL_EVENTDIRS_H
#define DDL_EVENTDIRS_H

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define EVD_MAX_DEPTH 6
#define EVD_PATH_BYTES 4096

typedef struct evd_run {
    char dir[EVD_PATH_BYTES]; /* the run's directory, as reachable from the caller's */
    char label[256];
    char **files;             /* its event files' paths, in name order; evd_free frees them */
    int n_files;
} evd_run;

typedef struct evd_list {
    evd_run *runs;
    int n, cap, max;          /* max: at most this many runs are kept */
    int truncated;            /* more runs were there than max */
} evd_list;

static int evd_is_event_file(const char *name) { return strncmp(name, "events.out.tfevents.", 20) == 0; }

/* evd_base: the last component of path (no trailing slash) into out; "logs" gives way to its
 * parent's name. path "." and "" use the working directory's real name. */
static void evd_base(const char *path, char *out, size_t cap)
{
    char real[PATH_MAX], *p;
    if (!realpath(path, real))
        snprintf(real, sizeof real, "%s", path);
    for (int k = 0; k < 2; k++) {
        size_t n = strlen(real);
        while (n > 1 && real[n - 1] == '/')
            real[--n] = '\0';
        p = strrchr(real, '/');
        const char *base = p ? p + 1 : real;
        if (k == 0 && strcmp(base, "logs") == 0 && p && p != real) {
            *p = '\0'; /* the parent names the run */
            continue;
        }
        snprintf(out, cap, "%s", *base ? base : "/");
        return;
    }
}

/* evd_label: rel (relative to root, "" for root itself) less a last "logs" component. */
static void evd_label(const char *root, const char *rel, char *out, size_t cap)
{
    char r[EVD_PATH_BYTES];
    snprintf(r, sizeof r, "%s", rel);
    size_t n = strlen(r);
    if (n >= 4 && strcmp(r + n - 4, "logs") == 0 && (n == 4 || r[n - 5] == '/'))
        r[n == 4 ? 0 : n - 5] = '\0';
    if (r[0])
        snprintf(out, cap, "%s", r);
    else
        evd_base(root, out, cap);
}

static int evd_by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

/* evd_add: a run at dir with these (sorted) file names; 0, or -1 out of memory. */
static int evd_add(evd_list *l, const char *root, const char *dir, const char *rel, struct dirent **ents, int n)
{
    if (l->n == l->max) {
        l->truncated = 1;
        return 0;
    }
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        evd_run *nr = (evd_run *)realloc(l->runs, (size_t)cap * sizeof *nr);
        if (!nr)
            return -1;
        l->runs = nr, l->cap = cap;
    }
    evd_run *r = &l->runs[l->n];
    memset(r, 0, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "%s", dir);
    evd_label(root, rel, r->label, sizeof r->label);
    if (!(r->files = (char **)calloc((size_t)n, sizeof *r->files)))
        return -1;
    l->n++; /* from here on evd_free frees what is filled in */
    for (int i = 0; i < n; i++) {
        if (!evd_is_event_file(ents[i]->d_name))
            continue;
        size_t len = strlen(dir) + strlen(ents[i]->d_name) + 2;
        if (!(r->files[r->n_files] = (char *)malloc(len)))
            return -1;
        snprintf(r->files[r->n_files++], len, "%s/%s", dir, ents[i]->d_name);
    }
    return 0;
}

/* evd_walk: dir (rel from root) and, depth allowing, its sub-directories. 0 or -1. */
static int evd_walk(evd_list *l, const char *root, const char *dir, const char *rel, int depth)
{
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, evd_by_name), rc = 0, files = 0;
    if (n < 0)
        return 0; /* unreadable: no runs there */
    for (int i = 0; i < n; i++)
        files += evd_is_event_file(ents[i]->d_name);
    if (files)
        rc = evd_add(l, root, dir, rel, ents, n);
    for (int i = 0; i < n && rc == 0 && depth < EVD_MAX_DEPTH; i++) {
        char path[EVD_PATH_BYTES], sub[EVD_PATH_BYTES];
        struct stat st;
        if (ents[i]->d_name[0] == '.' ||
            snprintf(path, sizeof path, "%s/%s", dir, ents[i]->d_name) >= (int)sizeof path ||
            stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", ents[i]->d_name);
        rc = evd_walk(l, root, path, sub, depth + 1);
    }
    for (int i = 0; i < n; i++)
        free(ents[i]);
    free(ents);
    return rc;
}

/* evd_find: the runs under root (at most max) into *l, which the caller zeroes and later passes
 * to evd_free. Returns 0, or -1 out of memory. No run found: l->n == 0. */
static int evd_find(const char *root, int max, evd_list *l)
{
    l->max = max;
    return evd_walk(l, root, root, "", 0);
}

static void evd_free(evd_list *l)
{
    for (int i = 0; i < l->n; i++) {
        for (int k = 0; k < l->runs[i].n_files; k++)
            free(l->runs[i].files[k]);
        free(l->runs[i].files);
    }
    free(l->runs);
    memset(l, 0, sizeof *l);
}

#endif
