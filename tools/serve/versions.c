/* versions.c - a model given as a directory of numbered versions, as TF Serving keeps them
 * (DIR/1/model.ckpt, DIR/2/model.ckpt, ...): the newest --keep-versions of them are loaded; the
 * newest answers requests that name no version (or the canary splits them between it and the
 * one before), /versions/N reaches the others. The reload thread scans DIR: a version that
 * appears is loaded in the background and made current; one that does not load is refused
 * (logged once, not tried again until its file changes) while the versions before keep serving;
 * versions past the newest K, or whose directory went, are dropped (the last request using one
 * frees it). What DIR holds is checked before anything is read: a name that is not a version
 * number (1 to 999999999, no sign or leading zero) is ignored, and a version whose file resolves
 * outside DIR (a symbolic link out of it) is refused. Version numbers in request paths are read
 * by the same rule and only looked up among the loaded versions, never made into a path. */
#include "serve.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CKPT "model.ckpt"   /* a version's file in its directory */
#define MAX_SEEN 256        /* the highest version numbers of DIR one scan considers */

int sv_version_number(const char *s, size_t n)
{
    if (n < 1 || n > 9 || s[0] == '0') /* 9 digits: every one fits an int, none wraps */
        return -1;
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* ---- what DIR holds ---- */

typedef struct seen {
    int number[MAX_SEEN]; /* the highest version numbers, highest first */
    int n;
    uint64_t ignored_sum; /* of the names that are not versions: changes when they do */
    char ignored[4][80];  /* the first few, for the log */
    int n_ignored;
} seen;

static void seen_add(seen *s, int v)
{
    int i = s->n < MAX_SEEN ? s->n++ : MAX_SEEN;
    while (i > 0 && s->number[i - 1] < v) {
        if (i < MAX_SEEN)
            s->number[i] = s->number[i - 1];
        i--;
    }
    if (i < MAX_SEEN)
        s->number[i] = v;
}

static int list_dir(const sv_model *m, seen *s)
{
    DIR *d = opendir(m->path);
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') /* ".", "..", and hidden names (a version being written) */
            continue;
        int v = sv_version_number(e->d_name, strlen(e->d_name));
        if (v > 0) {
            seen_add(s, v);
            continue;
        }
        uint64_t h = 1469598103934665603ull; /* FNV-1a, summed: the same whatever readdir's order */
        for (const char *p = e->d_name; *p; p++)
            h = (h ^ (unsigned char)*p) * 1099511628211ull;
        s->ignored_sum += h;
        if (s->n_ignored < 4)
            snprintf(s->ignored[s->n_ignored], sizeof s->ignored[0], "%.60s%s", e->d_name,
                     strlen(e->d_name) > 60 ? "..." : "");
        s->n_ignored++;
    }
    closedir(d);
    return 0;
}

/* version_path: DIR/v/model.ckpt with every link resolved, into out: 0; 1 when it is not there
 * (yet); -1 with why when it may not be read (outside DIR, not a regular file). */
static int version_path(const sv_model *m, int v, char *out, size_t out_bytes, char *why, size_t why_bytes)
{
    char p[1100];
    snprintf(p, sizeof p, "%s/%d/" CKPT, m->path, v);
    char *real = realpath(p, NULL);
    if (!real)
        return 1;
    size_t k = strlen(m->real);
    struct stat st;
    int rc = 0;
    if (strncmp(real, m->real, k) != 0 || real[k] != '/') {
        snprintf(why, why_bytes, "%.400s resolves to %.300s, outside %.400s (a symbolic link out of the model's directory)", p,
                 real, m->real);
        rc = -1;
    } else if (stat(real, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, why_bytes, "%s is not a regular file", p);
        rc = -1;
    } else if (strlen(real) >= out_bytes) {
        snprintf(why, why_bytes, "%s: its path is longer than %zu bytes", p, out_bytes - 1);
        rc = -1;
    } else
        snprintf(out, out_bytes, "%s", real);
    free(real);
    return rc;
}

/* ---- refused versions ---- */

static void nominal_id(const sv_model *m, int v, sv_refused *id)
{
    char p[1100];
    snprintf(p, sizeof p, "%s/%d/" CKPT, m->path, v);
    id->number = v;
    if (sv_file_id(p, &id->mtime_ns, &id->size, &id->inode) != 0)
        id->mtime_ns = id->size = id->inode = -1;
}

static int is_refused(const sv_model *m, const sv_refused *id)
{
    for (int i = 0; i < m->n_refused_v; i++) {
        const sv_refused *r = &m->refused_v[i];
        if (r->number == id->number && r->mtime_ns == id->mtime_ns && r->size == id->size && r->inode == id->inode)
            return 1;
    }
    return 0;
}

static void refuse(sv_model *m, const sv_refused *id, const char *why)
{
    int slot = 0;
    while (slot < m->n_refused_v && m->refused_v[slot].number != id->number)
        slot++;
    if (slot == SV_MAX_REFUSED) /* full: the oldest entry goes (that version may be tried again) */
        memmove(m->refused_v, m->refused_v + 1, sizeof m->refused_v - sizeof m->refused_v[0]), slot--;
    else if (slot == m->n_refused_v)
        m->n_refused_v++;
    m->refused_v[slot] = *id;
    atomic_fetch_add(&m->refused, 1);
    pthread_mutex_lock(&m->lock);
    m->refused_number = id->number;
    snprintf(m->refused_why, sizeof m->refused_why, "%.299s", why);
    int cur = m->cur ? m->cur->number : 0;
    pthread_mutex_unlock(&m->lock);
    if (cur)
        fprintf(stderr, "ddl-serve: model %s: version %d refused, version %d keeps serving: %s\n", m->name,
                id->number, cur, why);
    else
        fprintf(stderr, "ddl-serve: model %s: version %d refused: %s\n", m->name, id->number, why);
}

/* ---- the loaded set ---- */

static int loaded(const sv_model *m, int v)
{
    for (int i = 0; i < m->n_vers; i++)
        if (m->vers[i]->number == v)
            return 1;
    return 0;
}

/* unload: version i leaves the loaded set; the last request using it frees it. */
static void unload(sv_model *m, int i, const char *why)
{
    pthread_mutex_lock(&m->lock);
    sv_version *v = m->vers[i];
    memmove(m->vers + i, m->vers + i + 1, (size_t)(m->n_vers - i - 1) * sizeof m->vers[0]);
    m->n_vers--;
    m->cur = m->vers[m->n_vers - 1];
    int last = --v->refs == 0, number = v->number;
    pthread_mutex_unlock(&m->lock);
    if (last)
        sv_version_free(v);
    fprintf(stderr, "ddl-serve: model %s: version %d dropped (%s)\n", m->name, number, why);
}

/* insert: v joins the loaded set in order of number; the newest is current. */
static void insert(sv_model *m, sv_version *v)
{
    v->refs = 1;
    pthread_mutex_lock(&m->lock);
    int i = m->n_vers;
    while (i > 0 && m->vers[i - 1]->number > v->number)
        m->vers[i] = m->vers[i - 1], i--;
    m->vers[i] = v;
    m->n_vers++;
    m->cur = m->vers[m->n_vers - 1];
    pthread_mutex_unlock(&m->lock);
}

static int listed(const int *a, int n, int v)
{
    for (int i = 0; i < n; i++)
        if (a[i] == v)
            return 1;
    return 0;
}

/* ---- scanning ---- */

/* scan: the newest r->keep versions of DIR that load are loaded (from the newest down), the
 * others dropped. The number of versions loaded now; err says the last refusal. */
static int scan(sv_registry *r, sv_model *m, int startup, char *err, size_t err_bytes)
{
    seen s = {0};
    char real[PATH_MAX];
    if (!realpath(m->path, real) || strlen(real) >= sizeof m->real || list_dir(m, &s) != 0) {
        snprintf(err, err_bytes, "%s: cannot read the directory", m->path);
        return 0;
    }
    memcpy(m->real, real, strlen(real) + 1);
    if (s.ignored_sum != m->ignored_sum) {
        m->ignored_sum = s.ignored_sum;
        for (int i = 0; i < s.n_ignored && i < 4; i++)
            fprintf(stderr, "ddl-serve: model %s: %s/%s is not a version (a number from 1 to %d), ignored\n", m->name,
                    m->path, s.ignored[i], SV_MAX_VERSION);
        if (s.n_ignored > 4)
            fprintf(stderr, "ddl-serve: model %s: and %d more names that are not versions\n", m->name, s.n_ignored - 4);
    }
    int keep = r->keep < 1 ? 1 : r->keep > SV_MAX_KEEP ? SV_MAX_KEEP : r->keep, aspired[SV_MAX_KEEP], n_asp = 0;
    int n_loaded = 0;
    for (int i = 0; i < s.n && n_asp < keep; i++) {
        int v = s.number[i];
        if (loaded(m, v)) {
            aspired[n_asp++] = v;
            continue;
        }
        sv_refused id;
        nominal_id(m, v, &id);
        if (is_refused(m, &id))
            continue;
        char path[1100], why[DDL_ERR_BYTES + 1200];
        int pr = version_path(m, v, path, sizeof path, why, sizeof why);
        if (pr == 1)
            continue; /* DIR/v without its file yet */
        sv_version *nv = pr == 0 ? sv_version_load(m, path, r->threads, v, why, sizeof why) : NULL;
        if (!nv) {
            refuse(m, &id, why);
            snprintf(err, err_bytes, "version %d: %s", v, why);
            continue;
        }
        fprintf(stderr, "ddl-serve: model %s: version %d loaded from %s (step %lld)\n", m->name, v, path,
                (long long)nv->info.step);
        insert(m, nv);
        aspired[n_asp++] = v;
        for (int k = 0; m->n_vers > keep && k < m->n_vers; k++)
            if (!listed(aspired, n_asp, m->vers[k]->number)) { /* the oldest not wanted makes room */
                unload(m, k, "--keep-versions");
                break;
            }
        n_loaded++;
        if (!startup)
            atomic_fetch_add(&m->reloads, 1);
    }
    for (int k = 0; n_asp > 0 && k < m->n_vers;) /* never the last one: it serves until another loads */
        if (!listed(aspired, n_asp, m->vers[k]->number))
            unload(m, k, listed(s.number, s.n, m->vers[k]->number) ? "--keep-versions" : "its directory is gone");
        else
            k++;
    return n_loaded;
}

int sv_versions_open(sv_registry *r, sv_model *m, char *err, size_t err_bytes)
{
    m->is_dir = 1;
    char why[DDL_ERR_BYTES + 1300] = "";
    scan(r, m, 1, why, sizeof why);
    if (m->n_vers == 0) {
        snprintf(err, err_bytes, "--model %s=%s: no version loads (each is DIR/N/" CKPT ", N from 1)%s%s", m->name,
                 m->path, why[0] ? ": " : "", why);
        return -1;
    }
    return 0;
}

int sv_versions_scan(sv_registry *r, sv_model *m)
{
    char why[DDL_ERR_BYTES + 1300];
    return scan(r, m, 0, why, sizeof why) > 0;
}

/* ---- requests ---- */

int sv_canary_newest(uint64_t seed, uint64_t k, int percent)
{
    uint64_t z = seed + (k + 1) * 0x9E3779B97F4A7C15ull; /* splitmix64's k-th output from seed */
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (int)(z % 100) < percent;
}

sv_version *sv_acquire_for(sv_model *m, int want, sv_slot **slot)
{
    pthread_mutex_lock(&m->lock);
    sv_version *v = want ? NULL : m->cur;
    for (int i = 0; want && i < m->n_vers; i++)
        if (m->vers[i]->number == want)
            v = m->vers[i];
    if (!want && m->canary >= 0 && m->n_vers >= 2 && !sv_canary_newest(m->canary_seed, m->canary_n++, m->canary))
        v = m->vers[m->n_vers - 2];
    if (!v) {
        pthread_mutex_unlock(&m->lock);
        return NULL;
    }
    v->refs++;
    while (!v->free_slots)
        pthread_cond_wait(&v->slot_free, &m->lock);
    *slot = v->free_slots;
    v->free_slots = (*slot)->next_free;
    pthread_mutex_unlock(&m->lock);
    return v;
}

int sv_version_state(sv_model *m, int want, int *number, ddl_checkpoint_info *info)
{
    pthread_mutex_lock(&m->lock);
    sv_version *v = want ? NULL : m->cur;
    for (int i = 0; want && i < m->n_vers; i++)
        if (m->vers[i]->number == want)
            v = m->vers[i];
    if (v)
        *number = v->number, *info = v->info;
    pthread_mutex_unlock(&m->lock);
    return v ? 0 : -1;
}

int sv_versions_list(sv_model *m, int *out)
{
    pthread_mutex_lock(&m->lock);
    int n = m->n_vers;
    for (int i = 0; i < n; i++)
        out[i] = m->vers[i]->number;
    pthread_mutex_unlock(&m->lock);
    return n;
}

void sv_answered(sv_reply *rep, const sv_model *m, sv_version *v, const sv_slot *s, int n)
{
    atomic_fetch_add_explicit(&v->n_answered, 1, memory_order_relaxed);
    rep->version = v->number;
    rep->answer.n = n;
    for (int i = 0; i < n && i < SV_ANSWER_TOP; i++) {
        const float *p = s->probs + (size_t)i * m->C;
        int top = 0;
        for (int k = 1; m->oh * m->ow == 1 && k < m->C; k++)
            top = p[k] > p[top] ? k : top;
        rep->answer.top[i] = m->oh * m->ow == 1 ? top : -1;
        rep->answer.prob[i] = m->oh * m->ow == 1 ? p[top] : 0.0f;
    }
}

/* ---- the command line and /metrics ---- */

int sv_registry_canary(sv_registry *r, const char *arg, char *err, size_t err_bytes)
{
    const char *eq = strrchr(arg, '=');
    sv_model *m = eq ? sv_registry_find(r, arg, (size_t)(eq - arg)) : NULL;
    int pct = -1;
    for (const char *p = eq ? eq + 1 : ""; *p && p - eq <= 3 && *p >= '0' && *p <= '9'; p++)
        pct = (pct < 0 ? 0 : pct * 10) + (*p - '0');
    if (!eq || pct < 0 || pct > 100 || strlen(eq + 1) > 3 || eq[1 + strspn(eq + 1, "0123456789")]) {
        snprintf(err, err_bytes, "--canary %s: expected NAME=PERCENT (0 to 100)", arg);
        return -1;
    }
    if (!m || !m->is_dir) {
        snprintf(err, err_bytes, "--canary %s: %s", arg, !m ? "no --model of that name"
                 : "that model is one file, not a directory of versions (DIR/1/model.ckpt, ...)");
        return -1;
    }
    if (r->keep < 2) {
        snprintf(err, err_bytes, "--canary %s: needs --keep-versions 2 or more (the version before the newest)", arg);
        return -1;
    }
    m->canary = pct;
    m->canary_seed = r->canary_seed;
    return 0;
}

#undef put
#define put(...) (at += (size_t)snprintf(out + (at < cap ? at : cap), at < cap ? cap - at : 0, __VA_ARGS__))

size_t sv_versions_metrics(const sv_registry *r, char *out, size_t cap)
{
    size_t at = 0;
    put("# HELP ddl_serve_model_version The newest version of each model (the one requests naming none get, "
        "but the canary's share).\n# TYPE ddl_serve_model_version gauge\n");
    for (int i = 0; i < r->n; i++) {
        int v;
        ddl_checkpoint_info in;
        if (sv_version_state((sv_model *)&r->models[i], 0, &v, &in) == 0)
            put("ddl_serve_model_version{model=\"%s\"} %d\n", r->models[i].name, v);
    }
    put("# HELP ddl_serve_version_requests_total Requests answered, by the version that answered (versions loaded).\n"
        "# TYPE ddl_serve_version_requests_total counter\n");
    for (int i = 0; i < r->n; i++) {
        sv_model *m = (sv_model *)&r->models[i];
        pthread_mutex_lock(&m->lock);
        for (int k = 0; k < m->n_vers; k++)
            put("ddl_serve_version_requests_total{model=\"%s\",version=\"%d\"} %llu\n", m->name, m->vers[k]->number,
                (unsigned long long)atomic_load_explicit(&m->vers[k]->n_answered, memory_order_relaxed));
        pthread_mutex_unlock(&m->lock);
    }
    return at < cap ? at : cap;
}

#undef put
