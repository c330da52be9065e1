/* registry.c - the models ddl-serve answers for, by name. Each model has a current version: the
 * checkpoint loaded into one predictor per HTTP thread, with the buffers a request needs, so a
 * request allocates nothing. A request holds a reference to the version it started on; the
 * reload thread, seeing the file replaced (mtime, size or inode changed), loads the new file in
 * the background and makes it current under the model's lock; the old version is freed by the
 * last request that used it. A file that does not load is refused with one log line and the
 * current version keeps serving. A model given as a directory of numbered versions keeps several
 * loaded at once: versions.c scans it, and this file's loads and references serve it as they
 * serve a file. Does not know HTTP or JSON. */
#include "serve.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* ---- versions ---- */

void sv_version_free(sv_version *v)
{
    if (!v)
        return;
    for (int i = 0; i < v->n_slots; i++) {
        ddl_predictor_close(v->slots[i].pr);
        free(v->slots[i].pixels), free(v->slots[i].probs), free(v->slots[i].classes);
    }
    free(v->slots);
    pthread_cond_destroy(&v->slot_free);
    free(v);
}

sv_version *sv_version_load(sv_model *m, const char *path, int n, int number, char *err, size_t err_bytes)
{
    sv_version *v = calloc(1, sizeof *v);
    if (!v || !(v->slots = calloc((size_t)n, sizeof *v->slots))) {
        free(v);
        snprintf(err, err_bytes, "out of memory");
        return NULL;
    }
    pthread_cond_init(&v->slot_free, NULL);
    v->number = number;
    snprintf(v->path, sizeof v->path, "%s", path);
    for (int i = 0; i < n; i++, v->n_slots++) {
        sv_slot *s = &v->slots[i];
        ddl_predict_config pc = {.batch = 16};
        if (ddl_predictor_open(path, &pc, NULL, &s->pr, err, err_bytes) != DDL_OK)
            break;
        const ddl_model *md = ddl_predictor_model(s->pr);
        const ddl_model_config *mc = ddl_model_get_config(md);
        int C, oh, ow;
        ddl_model_output_shape(md, &C, &oh, &ow);
        if (m->c && (mc->in_c != m->c || mc->in_h != m->h || mc->in_w != m->w || C != m->C || oh != m->oh ||
                     ow != m->ow || strcmp(m->kind, ddl_model_name(md)) != 0)) {
            snprintf(err, err_bytes, "%s: a %s of %dx%dx%d -> %dx%dx%d, the served model is a %s of %dx%dx%d -> "
                     "%dx%dx%d", path, ddl_model_name(md), mc->in_c, mc->in_h, mc->in_w, C, oh, ow, m->kind,
                     m->c, m->h, m->w, m->C, m->oh, m->ow);
            ddl_predictor_close(s->pr);
            s->pr = NULL;
            break;
        }
        if (!m->c) {
            m->c = mc->in_c, m->h = mc->in_h, m->w = mc->in_w, m->C = C, m->oh = oh, m->ow = ow;
            snprintf(m->kind, sizeof m->kind, "%s", ddl_model_name(md));
            m->max_inst = SV_MAX_INPUT / (m->c * m->h * m->w);
            m->max_inst = m->max_inst < 1 ? 1 : m->max_inst > 64 ? 64 : m->max_inst;
        }
        size_t in = (size_t)m->c * m->h * m->w, S = (size_t)oh * ow;
        s->pixels = malloc((size_t)m->max_inst * in);
        s->probs = malloc((size_t)m->max_inst * C * S * sizeof(float));
        s->classes = malloc((size_t)m->max_inst * S * sizeof *s->classes);
        if (!s->pixels || !s->probs || !s->classes) {
            snprintf(err, err_bytes, "out of memory");
            v->n_slots++;
            break;
        }
        s->next_free = v->free_slots;
        v->free_slots = s;
        s->version = v;
        v->info = *ddl_predictor_info(s->pr);
    }
    if (v->n_slots < n || !v->slots[n - 1].classes) {
        sv_version_free(v);
        return NULL;
    }
    ddl_model_norm(ddl_predictor_model(v->slots[0].pr), &m->mean, &m->std);
    return v;
}

/* ---- the file's identity ---- */

int sv_file_id(const char *path, int64_t *mtime_ns, int64_t *size, int64_t *inode)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    *mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    *size = (int64_t)st.st_size;
    *inode = (int64_t)st.st_ino;
    return 0;
}

/* ---- public ---- */

int sv_registry_add(sv_registry *r, const char *arg, char *err, size_t err_bytes)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1] || (size_t)(eq - arg) >= sizeof r->models[0].name) {
        snprintf(err, err_bytes, "--model %s: expected NAME=PATH (NAME of 1 to 63 characters)", arg);
        return -1;
    }
    for (const char *p = arg; p < eq; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.", *p)) {
            snprintf(err, err_bytes, "--model %s: NAME takes letters, digits, '_', '-' and '.'", arg);
            return -1;
        }
    if (sv_registry_find(r, arg, (size_t)(eq - arg))) {
        snprintf(err, err_bytes, "--model %.*s given twice", (int)(eq - arg), arg);
        return -1;
    }
    if (r->n == SV_MAX_MODELS || strlen(eq + 1) >= sizeof r->models[0].path) {
        snprintf(err, err_bytes, "--model %s: at most %d models, paths under 1024 bytes", arg, SV_MAX_MODELS);
        return -1;
    }
    sv_model *m = &r->models[r->n];
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%.*s", (int)(eq - arg), arg);
    snprintf(m->path, sizeof m->path, "%s", eq + 1);
    m->canary = -1;
    pthread_mutex_init(&m->lock, NULL);
    struct stat st;
    if (stat(m->path, &st) == 0 && S_ISDIR(st.st_mode)) { /* DIR/1/model.ckpt, DIR/2/...: versions.c */
        if (sv_versions_open(r, m, err, err_bytes) != 0) {
            pthread_mutex_destroy(&m->lock);
            return -1;
        }
    } else {
        sv_file_id(m->path, &m->mtime_ns, &m->size, &m->inode);
        if (!(m->cur = sv_version_load(m, m->path, r->threads, 1, err, err_bytes))) {
            pthread_mutex_destroy(&m->lock);
            return -1;
        }
        m->cur->refs = 1;
        m->vers[0] = m->cur, m->n_vers = 1;
    }
    r->n++;
    return 0;
}

sv_model *sv_registry_find(sv_registry *r, const char *name, size_t n)
{
    for (int i = 0; i < r->n; i++)
        if (strlen(r->models[i].name) == n && memcmp(r->models[i].name, name, n) == 0)
            return &r->models[i];
    return NULL;
}

sv_version *sv_acquire(sv_model *m, sv_slot **slot) { return sv_acquire_for(m, 0, slot); }

void sv_release(sv_model *m, sv_version *v, sv_slot *slot)
{
    pthread_mutex_lock(&m->lock);
    slot->next_free = v->free_slots;
    v->free_slots = slot;
    pthread_cond_signal(&v->slot_free);
    int last = --v->refs == 0;
    pthread_mutex_unlock(&m->lock);
    if (last)
        sv_version_free(v);
}

int sv_reload_check(sv_registry *r, sv_model *m)
{
    if (m->is_dir)
        return sv_versions_scan(r, m);
    int64_t t, sz, ino;
    if (sv_file_id(m->path, &t, &sz, &ino) != 0 || (t == m->mtime_ns && sz == m->size && ino == m->inode))
        return 0;
    m->mtime_ns = t, m->size = sz, m->inode = ino; /* this file is tried once */
    char err[DDL_ERR_BYTES + 512];
    pthread_mutex_lock(&m->lock);
    int next = m->cur->number + 1;
    pthread_mutex_unlock(&m->lock);
    sv_version *v = sv_version_load(m, m->path, r->threads, next, err, sizeof err);
    if (!v) {
        atomic_fetch_add(&m->refused, 1);
        fprintf(stderr, "ddl-serve: model %s: new file refused, version %d keeps serving: %s\n", m->name, next - 1,
                err);
        return -1;
    }
    v->refs = 1;
    pthread_mutex_lock(&m->lock);
    sv_version *old = m->cur;
    m->cur = m->vers[0] = v;
    int last = --old->refs == 0;
    pthread_mutex_unlock(&m->lock);
    if (last)
        sv_version_free(old);
    atomic_fetch_add(&m->reloads, 1);
    fprintf(stderr, "ddl-serve: model %s: version %d loaded from %s (step %lld)\n", m->name, v->number, m->path,
            (long long)v->info.step);
    return 1;
}

static void *watch(void *arg)
{
    sv_registry *r = arg;
    while (!atomic_load(&r->stop)) {
        for (int i = 0; i < r->n; i++)
            sv_reload_check(r, &r->models[i]);
        struct timespec ts = {r->period_ms / 1000, (long)(r->period_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

int sv_registry_watch(sv_registry *r, int period_ms)
{
    r->period_ms = period_ms;
    r->watching = pthread_create(&r->watcher, NULL, watch, r) == 0;
    return r->watching ? 0 : -1;
}

void sv_registry_close(sv_registry *r)
{
    atomic_store(&r->stop, 1);
    if (r->watching)
        pthread_join(r->watcher, NULL);
    for (int i = 0; i < r->n; i++) {
        for (int k = 0; k < r->models[i].n_vers; k++)
            sv_version_free(r->models[i].vers[k]);
        pthread_mutex_destroy(&r->models[i].lock);
    }
    r->n = 0;
}
