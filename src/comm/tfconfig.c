/* tfconfig.c - TF_CONFIG, the JSON that TensorFlow's MultiWorkerMirroredStrategy reads and that
 * Kubeflow's TFJob (and Vertex AI, and the launchers that copy them) set in every worker:
 *   {"cluster": {"chief": ["h0:2222"], "worker": ["h1:2222", "h2:2222"]},
 *    "task": {"type": "worker", "index": 1}}
 * read as DDL_PEERS, DDL_RANK and DDL_WORLD_SIZE would be: ranks in TensorFlow's order (the
 * chief, when there is one, is worker 0 and worker i is rank i + 1; "master" is the chief's old
 * name), every rank's address its entry, where it listens. A small strict parser of exactly this
 * shape: bounded (the value's length, the nesting, each address), no allocation, and anything
 * else refused naming what it found: malformed JSON, a parameter server or an evaluator (ddl has
 * neither), a sparse cluster, a duplicate key. Other keys (environment, job, rpc_layer, trial)
 * are skipped. Knows nothing of the environment: env.c hands it the value. */
#include "impl.h"

#include <string.h>

#define TF_MAX_BYTES (1 << 20) /* a TF_CONFIG longer than this is refused, not read */
#define TF_MAX_DEPTH 16        /* nesting of the skipped values */
#define TF_ADDR_BYTES 256      /* one "host:port" */

typedef struct tf_parser {
    const char *s;
    size_t i, n;
    char *err;
    size_t err_bytes;
} tf_parser;

/* every failure says where: the byte offset, and what was expected there */
static int bad(tf_parser *p, const char *what)
{
    return ddl__errf(p->err, p->err_bytes, DDL_EINVAL, "TF_CONFIG: %s at byte %zu", what, p->i);
}

static void ws(tf_parser *p)
{
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

/* eat: skip blanks, then c if it is next (1), else 0 and nothing eaten. */
static int eat(tf_parser *p, char c)
{
    ws(p);
    if (p->i < p->n && p->s[p->i] == c)
        return p->i++, 1;
    return 0;
}

static int hex(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* string: a JSON string; its ASCII text into out (cap bytes; NULL: skipped) and its length
 * into *len. A kept string longer than cap - 1 is cut (*len says so); a kept string takes no
 * character past ASCII (no address or name ddl reads needs one). */
static int string(tf_parser *p, char *out, size_t cap, size_t *len)
{
    size_t k = 0;
    if (!eat(p, '"'))
        return bad(p, "expected a string");
    for (;;) {
        if (p->i >= p->n)
            return bad(p, "unterminated string");
        unsigned char c = (unsigned char)p->s[p->i++];
        if (c == '"')
            break;
        if (c < 0x20)
            return p->i--, bad(p, "a control character in a string");
        if (c == '\\') {
            if (p->i >= p->n)
                return bad(p, "unterminated string");
            char e = p->s[p->i++];
            const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t", *at = strchr(from, e);
            if (e == 'u') {
                int v = 0;
                for (int j = 0; j < 4; j++, p->i++)
                    if (p->i >= p->n || hex(p->s[p->i]) < 0)
                        return bad(p, "expected 4 hex digits after \\u");
                    else
                        v = v * 16 + hex(p->s[p->i]);
                c = (unsigned char)(v < 0x80 ? v : 0x80);
            } else if (e && at) {
                c = (unsigned char)to[at - from];
            } else {
                return p->i--, bad(p, "an unknown escape in a string");
            }
        }
        if (out && (c >= 0x80 || c < 0x20))
            return p->i--, bad(p, "a character other than printable ASCII in a name or address");
        if (out && k + 1 < cap)
            out[k] = (char)c;
        k++;
    }
    if (out)
        out[k < cap ? k : cap - 1] = '\0';
    if (len)
        *len = k;
    return DDL_OK;
}

/* number: a JSON number; with integer (not NULL) it must be one, 0 to 1 << 20, into *integer. */
static int number(tf_parser *p, long *integer)
{
    ws(p);
    size_t start = p->i;
    long v = 0;
    int neg = p->i < p->n && p->s[p->i] == '-', digits = 0, frac = 0;
    p->i += (size_t)neg;
    for (; p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9'; p->i++, digits++)
        v = v < (1L << 24) ? v * 10 + (p->s[p->i] - '0') : v;
    if (!digits || (digits > 1 && p->s[start + (size_t)neg] == '0'))
        return p->i = start, bad(p, "expected a number");
    if (p->i < p->n && p->s[p->i] == '.') {
        p->i++, frac = 1;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
            return bad(p, "expected a digit after '.'");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++, frac = 1;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-'))
            p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
            return bad(p, "expected a digit in the exponent");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
    }
    if (integer && (neg || frac || v > (1L << 20)))
        return p->i = start, bad(p, "task.index: expected an integer from 0 to 1048576");
    if (integer)
        *integer = v;
    return DDL_OK;
}

/* word: true, false or null. */
static int word(tf_parser *p)
{
    static const char *const words[] = {"true", "false", "null"};
    ws(p);
    for (int k = 0; k < 3; k++) {
        size_t n = strlen(words[k]);
        if (p->n - p->i >= n && memcmp(p->s + p->i, words[k], n) == 0)
            return p->i += n, DDL_OK;
    }
    return bad(p, "expected a JSON value");
}

/* skip: any JSON value, nested at most TF_MAX_DEPTH deep. */
static int skip(tf_parser *p, int depth)
{
    ws(p);
    if (depth > TF_MAX_DEPTH)
        return bad(p, "nested too deep");
    char c = p->i < p->n ? p->s[p->i] : 0;
    int st = DDL_OK;
    if (c == '"')
        return string(p, NULL, 0, NULL);
    if (c == '-' || (c >= '0' && c <= '9'))
        return number(p, NULL);
    if (c != '{' && c != '[')
        return word(p);
    p->i++;
    char close = c == '{' ? '}' : ']';
    if (eat(p, close))
        return DDL_OK;
    do {
        if (c == '{' && ((st = string(p, NULL, 0, NULL)) || (!eat(p, ':') && (st = bad(p, "expected ':'")))))
            return st;
        if ((st = skip(p, depth + 1)) != DDL_OK)
            return st;
    } while (eat(p, ','));
    return eat(p, close) ? DDL_OK : bad(p, c == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
}

/* ---- the shape ---- */

typedef struct tf_found {
    size_t chief_at, worker_at;  /* offsets of cluster.chief's (or .master's) and .worker's arrays */
    int n_chief, n_worker, has_chief, has_worker, has_cluster, has_task;
    char type[16];
    long index;
    int has_type, has_index;
} tf_found;

/* addresses: an array of "host:port" strings; each written to out (NULL: checked only) after a
 * comma when *used > 0; their count in *count. */
static int addresses(tf_parser *p, const char *job, char *out, size_t cap, size_t *used, int *count)
{
    char a[TF_ADDR_BYTES], what[96];
    size_t len;
    int st;
    *count = 0;
    if (!eat(p, '['))
        return snprintf(what, sizeof what, "cluster.%s: expected a list of \"host:port\"", job), bad(p, what);
    if (eat(p, ']'))
        return DDL_OK;
    do {
        size_t at = (ws(p), p->i);
        if ((st = string(p, a, sizeof a, &len)) != DDL_OK)
            return st;
        const char *colon = strrchr(a, ':');
        long port = 0;
        for (const char *d = colon ? colon + 1 : ""; *d >= '0' && *d <= '9' && port <= 65535; d++)
            port = port * 10 + (*d - '0');
        int digits_only = colon && colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1);
        if (len >= sizeof a || !colon || colon == a || !digits_only || port < 1 || port > 65535 ||
            strpbrk(a, ", ")) {
            p->i = at;
            snprintf(what, sizeof what, "cluster.%s[%d]: expected \"host:port\" (port 1 to 65535, at most %d "
                     "characters)", job, *count, TF_ADDR_BYTES - 1);
            return bad(p, what);
        }
        if (out && *used + (*used > 0) + len + 1 > cap)
            return ddl__errf(p->err, p->err_bytes, DDL_EINVAL, "TF_CONFIG: the cluster's addresses take more than "
                             "%zu characters: set DDL_PEERS instead", cap - 1);
        if (out) {
            if (*used > 0)
                out[(*used)++] = ',';
            memcpy(out + *used, a, len + 1);
            *used += len;
        }
        if (++*count > 65536)
            return bad(p, "too many addresses");
    } while (eat(p, ','));
    return eat(p, ']') ? DDL_OK : bad(p, "expected ',' or ']' in an address list");
}

static int cluster(tf_parser *p, tf_found *f)
{
    char key[32];
    size_t len;
    int st, n;
    if (!eat(p, '{'))
        return bad(p, "cluster: expected an object");
    if (eat(p, '}'))
        return DDL_OK;
    do {
        size_t at = (ws(p), p->i);
        if ((st = string(p, key, sizeof key, &len)) != DDL_OK)
            return st;
        if (!eat(p, ':'))
            return bad(p, "expected ':'");
        int chief = strcmp(key, "chief") == 0 || strcmp(key, "master") == 0, worker = strcmp(key, "worker") == 0;
        if ((chief && f->has_chief) || (worker && f->has_worker))
            return p->i = at, bad(p, chief ? "cluster: a second chief (or master) list" : "cluster: a second "
                                  "worker list");
        ws(p);
        size_t list = p->i;
        if (len >= sizeof key || !(chief || worker || !strcmp(key, "ps") || !strcmp(key, "evaluator")))
            return p->i = at, bad(p, "cluster: a job other than chief, master, worker, ps or evaluator");
        if ((st = addresses(p, key, NULL, 0, NULL, &n)) != DDL_OK)
            return st;
        if (strcmp(key, "ps") == 0 && n > 0)
            return p->i = at, bad(p, "cluster.ps: parameter servers (ParameterServerStrategy): ddl trains by "
                                  "all-reduce among workers (MultiWorkerMirroredStrategy's cluster)");
        if (chief && n > 1)
            return p->i = at, bad(p, "cluster.chief: more than one chief");
        if (chief)
            f->has_chief = 1, f->n_chief = n, f->chief_at = list;
        if (worker)
            f->has_worker = 1, f->n_worker = n, f->worker_at = list;
    } while (eat(p, ','));
    return eat(p, '}') ? DDL_OK : bad(p, "cluster: expected ',' or '}'");
}

static int task(tf_parser *p, tf_found *f)
{
    char key[32];
    size_t len;
    int st;
    if (!eat(p, '{'))
        return bad(p, "task: expected an object");
    if (eat(p, '}'))
        return DDL_OK;
    do {
        size_t at = (ws(p), p->i);
        if ((st = string(p, key, sizeof key, &len)) != DDL_OK)
            return st;
        if (!eat(p, ':'))
            return bad(p, "expected ':'");
        int is_type = len < sizeof key && strcmp(key, "type") == 0, is_index = len < sizeof key && !strcmp(key, "index");
        if ((is_type && f->has_type) || (is_index && f->has_index))
            return p->i = at, bad(p, "task: a key given twice");
        if (is_type) {
            if ((st = string(p, f->type, sizeof f->type, &len)) != DDL_OK)
                return st;
            f->has_type = 1;
            if (len >= sizeof f->type)
                f->type[0] = '?';
        } else if (is_index) {
            if ((st = number(p, &f->index)) != DDL_OK)
                return st;
            f->has_index = 1;
        } else if ((st = skip(p, 1)) != DDL_OK) {
            return st;
        }
    } while (eat(p, ','));
    return eat(p, '}') ? DDL_OK : bad(p, "task: expected ',' or '}'");
}

static int top(tf_parser *p, tf_found *f)
{
    char key[32];
    size_t len;
    int st;
    if (!eat(p, '{'))
        return bad(p, "expected a JSON object");
    if (!eat(p, '}'))
        do {
            size_t at = (ws(p), p->i);
            if ((st = string(p, key, sizeof key, &len)) != DDL_OK)
                return st;
            if (!eat(p, ':'))
                return bad(p, "expected ':'");
            int is_cluster = len < sizeof key && !strcmp(key, "cluster"), is_task = len < sizeof key && !strcmp(key, "task");
            if ((is_cluster && f->has_cluster) || (is_task && f->has_task))
                return p->i = at, bad(p, "a key given twice");
            st = is_cluster ? cluster(p, f) : is_task ? task(p, f) : skip(p, 1);
            if (st != DDL_OK)
                return st;
            f->has_cluster |= is_cluster;
            f->has_task |= is_task;
        } while (eat(p, ','));
    if (!eat(p, '}'))
        return bad(p, "expected ',' or '}'");
    ws(p);
    return p->i == p->n ? DDL_OK : bad(p, "text after the JSON object");
}

/* rank: the task's place among chief and workers, as TensorFlow numbers them. */
static int rank(tf_parser *p, const tf_found *f, int *out)
{
    int chief = !strcmp(f->type, "chief") || !strcmp(f->type, "master"), worker = !strcmp(f->type, "worker");
    if (!f->has_cluster || !f->has_task || !f->has_type || !f->has_index)
        return ddl__errf(p->err, p->err_bytes, DDL_EINVAL, "TF_CONFIG: needs cluster (its worker list) and task "
                         "(type and index)");
    if (!chief && !worker)
        return ddl__errf(p->err, p->err_bytes, DDL_EINVAL, "TF_CONFIG: task.type \"%s\": ddl's ranks are "
                         "TensorFlow's workers (worker, or chief: worker 0); a %s has no place among them",
                         f->type, f->type);
    if (chief && (f->n_chief != 1 || f->index != 0))
        return ddl__errf(p->err, p->err_bytes, DDL_EINVAL, "TF_CONFIG: task %s %ld: the cluster has %d chief%s",
                         f->type, f->index, f->n_chief, f->n_chief == 1 ? " (index 0)" : "");
    if (worker && f->index >= f->n_worker)
        return ddl__errf(p->err, p->err_bytes, DDL_EINVAL, "TF_CONFIG: task worker %ld: cluster.worker has %d "
                         "address%s", f->index, f->n_worker, f->n_worker == 1 ? "" : "es");
    *out = chief ? 0 : f->n_chief + (int)f->index;
    return DDL_OK;
}

/* same_host: the ranks whose address has this rank's host part (up to the last ':'): their
 * number into *size and this rank's place among them into *local. */
static void same_host(const char *peers, int rank, int *local, int *size)
{
    const char *mine = peers;
    for (int r = 0; r < rank; r++)
        mine = strchr(mine, ',') + 1;
    size_t n = strcspn(mine, ",");
    while (n > 0 && mine[n - 1] != ':')
        n--;
    *local = *size = 0;
    for (int r = 0; peers; r++) {
        size_t m = strcspn(peers, ",");
        const char *next = peers[m] ? peers + m + 1 : NULL;
        while (m > 0 && peers[m - 1] != ':')
            m--;
        if (m == n && memcmp(peers, mine, n) == 0) {
            *local += r < rank;
            ++*size;
        }
        peers = next;
    }
}

int ddl__tf_config(const char *json, ddl_comm_config *cfg, ddl_comm_env *env, char *err, size_t err_bytes)
{
    tf_parser p = {.s = json, .n = json ? strnlen(json, TF_MAX_BYTES + 1) : 0, .err = err, .err_bytes = err_bytes};
    if (p.n > TF_MAX_BYTES)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "TF_CONFIG: longer than %d bytes", TF_MAX_BYTES);
    tf_found f = {0};
    int st = top(&p, &f), r = 0, n;
    if (st == DDL_OK)
        st = rank(&p, &f, &r);
    size_t used = 0;
    char *out = env->peers;
    if (st == DDL_OK && f.n_chief && (p.i = f.chief_at, 1))
        st = addresses(&p, "chief", out, sizeof env->peers, &used, &n);
    if (st == DDL_OK && f.n_worker && (p.i = f.worker_at, 1))
        st = addresses(&p, "worker", out, sizeof env->peers, &used, &n);
    if (st != DDL_OK)
        return out[0] = '\0', st;
    cfg->rank = r;
    cfg->world_size = f.n_chief + f.n_worker;
    cfg->peers = out;
    same_host(out, r, &cfg->local_rank, &cfg->local_size);
    return DDL_OK;
}
