/* text.c - the "arch" text format of a layer graph: read (ddl_graph_parse, ddl_graph_load) and
 * written back (ddl_graph_format) so that a checkpoint carries its network. One layer a line:
 *
 *     # comment                       blank lines and comments are skipped
 *     input 3 64 64                   or "input": the size comes from the data
 *     conv conv1 32 3 pad=1           conv [NAME] OUT K [stride=S] [pad=P] [bias=0]
 *     relu
 *     maxpool 2                       maxpool|avgpool K [stride=S] (stride defaults to K)
 *     dense fc classes                dense [NAME] OUT; OUT (and conv's) may be "classes"
 *     add from=r1                     r1 + the layer before; concat from=A,B for [A, B]
 *     output dice                     the last layer (or from=NAME) is the output; xent or dice
 *
 * A layer reads the layer before it unless from=NAME says which (a name given to any layer, or
 * its number). The other layers: deconv [NAME] OUT K [stride=S] [pad=P], gap (global average
 * pool), dropout [P] (no P: the model config's), groupnorm [NAME] [GROUPS], flatten, affine C
 * scale=S1,..,SC shift=T1,..,TC (x * S + T per channel, constants: ddl_graph_affine).
 * Errors name the line. Knows nothing of models: it only calls graph.c. */
#include "impl.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKENS 16
#define MAX_LINE 4096 /* an affine layer's 2 x 64 values */
#define MAX_FILE_BYTES (1 << 20)

typedef struct line {
    int no, n_pos, n_from;
    char *op, *name;
    char *pos[MAX_TOKENS];   /* positional values, in order */
    char *key[MAX_TOKENS], *val[MAX_TOKENS];
    int n_kv;
    char *from[2];
} line;

/* ---- tokens ---- */

static int is_number(const char *s)
{
    if (*s == '-' || *s == '+')
        s++;
    if (!*s)
        return 0;
    int dot = 0;
    for (; *s; s++)
        if (*s == '.' && !dot)
            dot = 1;
        else if (!isdigit((unsigned char)*s))
            return 0;
    return 1;
}

/* split: cut one line (comment removed) into op, name, positional values and key=value pairs. */
static int split(char *text, line *ln, char *err, size_t err_bytes)
{
    char *save = NULL;
    for (char *t = strtok_r(text, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
        char *eq = strchr(t, '=');
        if (!ln->op) {
            ln->op = t;
        } else if (eq) {
            if (ln->n_kv == MAX_TOKENS)
                return ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: too many settings", ln->no);
            *eq = '\0';
            ln->key[ln->n_kv] = t;
            ln->val[ln->n_kv++] = eq + 1;
        } else if (!is_number(t) && strcmp(t, "classes") != 0 && !ln->name && ln->n_pos == 0) {
            ln->name = t;
        } else {
            if (ln->n_pos == MAX_TOKENS)
                return ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: too many values", ln->no);
            ln->pos[ln->n_pos++] = t;
        }
    }
    return DDL_OK;
}

/* int_of: a positional or key value as an int ("classes": DDL_CLASSES where classes_ok). */
static int int_of(const line *ln, const char *what, const char *s, int classes_ok, int *out, char *err,
                  size_t err_bytes)
{
    if (classes_ok && strcmp(s, "classes") == 0) {
        *out = DDL_CLASSES;
        return DDL_OK;
    }
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < 0 || v > 1 << 20)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: %s: %s \"%s\" is not a whole number from 0 to %d%s",
                         ln->no, ln->op, what, s, 1 << 20, classes_ok ? " or \"classes\"" : "");
    *out = (int)v;
    return DDL_OK;
}

/* key_int: the value of key (default fallback); DDL_EINVAL when it is not a number. */
static int key_int(const line *ln, const char *key, int fallback, int *out, char *err, size_t err_bytes)
{
    *out = fallback;
    for (int i = 0; i < ln->n_kv; i++)
        if (strcmp(ln->key[i], key) == 0)
            return int_of(ln, key, ln->val[i], 0, out, err, err_bytes);
    return DDL_OK;
}

/* key_floats: key's value, n floats separated by commas, into out; DDL_EINVAL naming the line. */
static int key_floats(const line *ln, const char *key, int n, float *out, char *err, size_t err_bytes)
{
    const char *s = NULL;
    for (int i = 0; i < ln->n_kv; i++)
        if (strcmp(ln->key[i], key) == 0)
            s = ln->val[i];
    for (int i = 0; s && i < n; i++) {
        char *end;
        out[i] = strtof(s, &end);
        s = end != s && *end == (i == n - 1 ? '\0' : ',') ? end + (i < n - 1) : NULL;
    }
    return s ? DDL_OK
             : ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: %s takes %s=V1,..,V%d (%d numbers)", ln->no, ln->op, key,
                         n, n);
}

/* affine_line: the affine layer of a line "affine C scale=.. shift=..". */
static int affine_line(ddl_graph *g, const line *ln, int x, int c, char *err, size_t err_bytes)
{
    float v[2 * DDL_GRAPH_MAX_AFFINE];
    if (c < 1 || c > DDL_GRAPH_MAX_AFFINE)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: affine: %d channels: 1 to %d", ln->no, c,
                         DDL_GRAPH_MAX_AFFINE);
    int rc = key_floats(ln, "scale", c, v, err, err_bytes);
    if (rc == DDL_OK)
        rc = key_floats(ln, "shift", c, v + c, err, err_bytes);
    if (rc == DDL_OK && ddl_graph_affine(g, x, c, v, v + c) < 0)
        rc = ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: %s", ln->no, ddl_graph_error(g));
    return rc;
}

/* ---- lines ---- */

/* find: the layer a from= value names (a name, or a number); -1 with the error set. */
static int find(const ddl_graph *g, const line *ln, const char *ref, char *err, size_t err_bytes)
{
    for (int i = 0; i < g->n; i++)
        if (strcmp(g->layers[i].name, ref) == 0)
            return i;
    int n = -1;
    if (is_number(ref) && int_of(ln, "from", ref, 0, &n, NULL, 0) == DDL_OK && n < g->n)
        return n;
    ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: %s: from=%s names no earlier layer", ln->no, ln->op, ref);
    return -1;
}

/* check_keys: every key= of the line is one the op takes. */
static int check_keys(const line *ln, const char *allowed, char *err, size_t err_bytes)
{
    for (int i = 0; i < ln->n_kv; i++) {
        const char *k = ln->key[i];
        size_t n = strlen(k);
        const char *at = strstr(allowed, k);
        if (!(at && (at == allowed || at[-1] == ' ') && (at[n] == ' ' || at[n] == '\0')))
            return ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: %s takes no %s= (it takes: %s)", ln->no, ln->op, k,
                             allowed);
    }
    return DDL_OK;
}

static const char *const usage[DDL__N_OPS] = {
    "input [C H W]", "conv [NAME] OUT K [stride=S] [pad=P] [bias=0|1]", "deconv [NAME] OUT K [stride=S] [pad=P]",
    "maxpool K [stride=S]", "avgpool K [stride=S]", "gap", "dense [NAME] OUT", "relu", "dropout [P]",
    "groupnorm [NAME] [GROUPS]", "flatten", "concat from=A[,B]", "add from=A[,B]",
    "affine C scale=S1,..,SC shift=T1,..,TC"};
static const int n_args[DDL__N_OPS][2] = {{0, 3}, {2, 2}, {2, 2}, {1, 1}, {1, 1}, {0, 0}, {1, 1},
                                          {0, 0}, {0, 1}, {0, 1}, {0, 0}, {0, 0}, {0, 0}, {1, 1}};
static const char *const keys[DDL__N_OPS] = {"", "stride pad bias from", "stride pad from", "stride from",
                                             "stride from", "from", "from", "from", "from", "from", "from",
                                             "from", "from", "scale shift from"};

/* layer_line: add the layer one line describes; DDL_OK or DDL_EINVAL naming the line. */
static int layer_line(ddl_graph *g, line *ln, int op, char *err, size_t err_bytes)
{
    int rc = check_keys(ln, keys[op], err, err_bytes), v[3] = {0, 0, 0}, in[2] = {g->n - 1, -1};
    if (rc == DDL_OK && (ln->n_pos < n_args[op][0] || ln->n_pos > n_args[op][1] || (op == DDL__OP_INPUT && ln->n_pos % 3)))
        rc = ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: %s takes %s", ln->no, ln->op, usage[op]);
    for (int i = 0; i < ln->n_pos && i < 3 && rc == DDL_OK && op != DDL__OP_DROPOUT; i++)
        rc = int_of(ln, i ? "kernel" : "size", ln->pos[i], i == 0, &v[i], err, err_bytes);
    for (int i = 0; i < ln->n_from && rc == DDL_OK; i++)
        if ((in[i] = find(g, ln, ln->from[i], err, err_bytes)) < 0)
            rc = DDL_EINVAL;
    if (rc == DDL_OK && ln->n_from == 1 && (op == DDL__OP_ADD || op == DDL__OP_CONCAT))
        in[1] = g->n - 1; /* from=A: A and the layer before */
    if (rc == DDL_OK && (op == DDL__OP_ADD || op == DDL__OP_CONCAT) && ln->n_from == 0)
        rc = ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: %s takes %s", ln->no, ln->op, usage[op]);
    if (rc != DDL_OK)
        return rc;
    int stride, pad, bias, i = -1;
    if ((rc = key_int(ln, "stride", op == DDL__OP_MAXPOOL || op == DDL__OP_AVGPOOL ? v[0] : 1, &stride, err,
                      err_bytes)) != DDL_OK ||
        (rc = key_int(ln, "pad", 0, &pad, err, err_bytes)) != DDL_OK ||
        (rc = key_int(ln, "bias", 1, &bias, err, err_bytes)) != DDL_OK)
        return rc;
    switch (op) {
    case DDL__OP_INPUT: i = ddl_graph_input(g, v[0] < 0 ? 0 : v[0], v[1], v[2]); break;
    case DDL__OP_CONV: i = ddl_graph_conv2d(g, in[0], ln->name, v[0], v[1], stride, pad, bias); break;
    case DDL__OP_DECONV: i = ddl_graph_deconv2d(g, in[0], ln->name, v[0], v[1], stride, pad); break;
    case DDL__OP_MAXPOOL: i = ddl_graph_maxpool(g, in[0], v[0], stride); break;
    case DDL__OP_AVGPOOL: i = ddl_graph_avgpool(g, in[0], v[0], stride); break;
    case DDL__OP_GAP: i = ddl_graph_global_avgpool(g, in[0]); break;
    case DDL__OP_DENSE: i = ddl_graph_dense(g, in[0], ln->name, v[0]); break;
    case DDL__OP_RELU: i = ddl_graph_relu(g, in[0]); break;
    case DDL__OP_DROPOUT: i = ddl_graph_dropout(g, in[0], ln->n_pos ? strtof(ln->pos[0], NULL) : -1.0f); break;
    case DDL__OP_GROUPNORM: i = ddl_graph_groupnorm(g, in[0], ln->name, v[0]); break;
    case DDL__OP_FLATTEN: i = ddl_graph_flatten(g, in[0]); break;
    case DDL__OP_CONCAT: i = ddl_graph_concat(g, in[0], in[1]); break;
    case DDL__OP_ADD: i = ddl_graph_add(g, in[0], in[1]); break;
    case DDL__OP_AFFINE:
        if ((rc = affine_line(g, ln, in[0], v[0], err, err_bytes)) != DDL_OK)
            return rc;
        i = g->n - 1;
        break;
    default: break;
    }
    if (i >= 0 && ln->name && !g->layers[i].name[0])
        i = ddl_graph_name(g, i, ln->name);
    return i < 0 ? ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: %s", ln->no, ddl_graph_error(g)) : DDL_OK;
}

static int output_line(ddl_graph *g, line *ln, char *err, size_t err_bytes)
{
    int rc = check_keys(ln, "from", err, err_bytes), x = g->n - 1, head = DDL_HEAD_XENT;
    const char *h = ln->name ? ln->name : ln->n_pos ? ln->pos[0] : "xent";
    if (rc == DDL_OK && ln->n_pos + (ln->name != NULL) > 1)
        rc = ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: output takes [xent|dice] [from=NAME]", ln->no);
    if (rc == DDL_OK && strcmp(h, "dice") == 0)
        head = DDL_HEAD_DICE;
    else if (rc == DDL_OK && strcmp(h, "xent") != 0)
        rc = ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: output %s: the head is xent or dice", ln->no, h);
    if (rc == DDL_OK && ln->n_from && (x = find(g, ln, ln->from[0], err, err_bytes)) < 0)
        rc = DDL_EINVAL;
    if (rc == DDL_OK && ddl_graph_output(g, x, head) < 0)
        rc = ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: %s", ln->no, ddl_graph_error(g));
    return rc;
}

/* parse_line: one line of text (NUL-terminated, writable). */
static int parse_line(ddl_graph *g, char *text, int no, char *err, size_t err_bytes)
{
    char *hash = strchr(text, '#');
    if (hash)
        *hash = '\0';
    line ln;
    memset(&ln, 0, sizeof ln);
    ln.no = no;
    int rc = split(text, &ln, err, err_bytes);
    if (rc != DDL_OK || !ln.op)
        return rc;
    for (int i = 0; i < ln.n_kv; i++)
        if (strcmp(ln.key[i], "from") == 0) {
            char *comma = strchr(ln.val[i], ',');
            ln.from[0] = ln.val[i];
            ln.n_from = 1;
            if (comma)
                *comma = '\0', ln.from[1] = comma + 1, ln.n_from = 2;
        }
    if (strcmp(ln.op, "output") == 0)
        return output_line(g, &ln, err, err_bytes);
    int op = ddl__graph_op_find(strcmp(ln.op, "global_avgpool") == 0 ? "gap" : ln.op);
    if (op < 0)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: \"%.40s\" is not a layer (input, conv, deconv, "
                         "maxpool, avgpool, gap, dense, relu, dropout, groupnorm, flatten, concat, add, output)",
                         no, ln.op);
    if (ln.n_from == 2 && op != DDL__OP_ADD && op != DDL__OP_CONCAT)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: %s reads one layer: from=NAME", no, ln.op);
    return layer_line(g, &ln, op, err, err_bytes);
}

int ddl_graph_parse(ddl_graph *g, const char *text, char *err, size_t err_bytes)
{
    if (!g || !text)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_graph_parse: no graph or no text");
    ddl_graph_init(g, sizeof *g);
    int no = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        char buf[MAX_LINE];
        no++;
        if (n >= sizeof buf)
            return ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: longer than %d bytes", no, MAX_LINE - 1);
        memcpy(buf, p, n);
        buf[n] = '\0';
        int rc = parse_line(g, buf, no, err, err_bytes);
        if (rc != DDL_OK)
            return rc;
        p += n + (nl != NULL);
    }
    if (g->n < 2)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "%s", g->n ? "no layer after the input" : "no layers (the first "
                         "line should be \"input\")");
    return DDL_OK;
}

int ddl_graph_load(ddl_graph *g, const char *path, char *err, size_t err_bytes)
{
    if (!g || !path)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_graph_load: no graph or no path");
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT && !strchr(path, '/') && !strchr(path, '.'))
            return ddl_graph_preset(g, path, err, err_bytes);
        return ddl__errf(err, err_bytes, DDL_EIO, "%s: %s", path, strerror(errno));
    }
    ddl_graph_init(g, sizeof *g);
    char buf[MAX_LINE + 1], why[DDL_ERR_BYTES];
    int rc = DDL_OK, no = 0;
    while (rc == DDL_OK && fgets(buf, sizeof buf, f)) { /* line by line: nothing allocated */
        size_t n = strlen(buf);
        no++;
        if (n == MAX_LINE && buf[n - 1] != '\n' && !feof(f))
            rc = ddl__errf(why, sizeof why, DDL_EINVAL, "line %d: longer than %d bytes (not an arch text file?)", no,
                           MAX_LINE - 1);
        else if (memchr(buf, '\0', n) || (n && buf[n - 1] != '\n' && !feof(f)))
            rc = ddl__errf(why, sizeof why, DDL_EINVAL, "line %d: a NUL byte: not an arch text file", no);
        else
            rc = parse_line(g, buf, no, why, sizeof why);
    }
    if (rc == DDL_OK && ferror(f))
        rc = ddl__errf(why, sizeof why, DDL_EIO, "read error");
    if (rc == DDL_OK && g->n < 2)
        rc = ddl__errf(why, sizeof why, DDL_EINVAL, "%s", g->n ? "no layer after the input"
                                                               : "no layers (the first line should be \"input\")");
    fclose(f);
    return rc == DDL_OK ? DDL_OK : ddl__errf(err, err_bytes, rc, "%s: %s", path, why);
}

/* ---- writing ---- */

typedef struct out {
    char *buf;
    size_t bytes, len;
} out;

static void put(out *o, const char *fmt, ...) DDL__PRINTF(2, 3);
static void put(out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[160];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    for (int i = 0; i < n && i < (int)sizeof tmp - 1; i++, o->len++)
        if (o->len + 1 < o->bytes)
            o->buf[o->len] = tmp[i];
}

static void put_size(out *o, int v)
{
    if (v == DDL_CLASSES)
        put(o, " classes");
    else
        put(o, " %d", v);
}

/* ref: how a later line names layer i (its name, else its number). */
static void put_ref(out *o, const ddl_graph *g, int i)
{
    if (g->layers[i].name[0])
        put(o, "%s", g->layers[i].name);
    else
        put(o, "%d", i);
}

static void format_layer(out *o, const ddl_graph *g, int i)
{
    const ddl__layer *l = &g->layers[i];
    put(o, "%s", ddl__graph_op_name(l->op));
    if (l->name[0])
        put(o, " %s", l->name);
    switch (l->op) {
    case DDL__OP_INPUT:
        if (l->out > 0 || l->k > 0 || l->stride > 0)
            put(o, " %d %d %d", l->out > 0 ? l->out : 0, l->k > 0 ? l->k : 0, l->stride > 0 ? l->stride : 0);
        break;
    case DDL__OP_CONV:
    case DDL__OP_DECONV:
        put_size(o, l->out);
        put(o, " %d", l->k);
        if (l->stride != 1)
            put(o, " stride=%d", l->stride);
        if (l->pad)
            put(o, " pad=%d", l->pad);
        if (l->op == DDL__OP_CONV && !l->bias)
            put(o, " bias=0");
        break;
    case DDL__OP_MAXPOOL:
    case DDL__OP_AVGPOOL:
        put(o, " %d", l->k);
        if (l->stride != l->k)
            put(o, " stride=%d", l->stride);
        break;
    case DDL__OP_DENSE: put_size(o, l->out); break;
    case DDL__OP_DROPOUT:
        if (l->p >= 0.0f)
            put(o, " %.9g", (double)l->p);
        break;
    case DDL__OP_GROUPNORM:
        if (l->groups)
            put(o, " %d", l->groups);
        break;
    case DDL__OP_AFFINE:
        put(o, " %d", l->out);
        for (int k = 0; k < 2 * l->out; k++)
            put(o, "%s%.9g", k == 0 ? " scale=" : k == l->out ? " shift=" : ",", (double)g->consts[l->k + k]);
        break;
    default: break;
    }
    int two = l->op == DDL__OP_ADD || l->op == DDL__OP_CONCAT;
    if (i > 0 && (two || l->in[0] != i - 1)) {
        put(o, " from=");
        put_ref(o, g, l->in[0]);
        if (two && l->in[1] != i - 1) {
            put(o, ",");
            put_ref(o, g, l->in[1]);
        }
    }
    put(o, "\n");
}

size_t ddl_graph_format(const ddl_graph *g, char *buf, size_t bytes)
{
    out o = {buf, buf ? bytes : 0, 0};
    if (!g)
        return 0;
    for (int i = 0; i < g->n; i++)
        format_layer(&o, g, i);
    int x = ddl_graph_output_layer(g);
    if (x >= 0 && (x != g->n - 1 || g->head != DDL_HEAD_XENT)) {
        put(&o, "output %s", g->head == DDL_HEAD_DICE ? "dice" : "xent");
        if (x != g->n - 1) {
            put(&o, " from=");
            put_ref(&o, g, x);
        }
        put(&o, "\n");
    }
    if (o.bytes)
        o.buf[o.len < o.bytes ? o.len : o.bytes - 1] = '\0';
    return o.len;
}
