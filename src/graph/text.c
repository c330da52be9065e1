/* text.c - the "arch" text format of a layer graph: read (ddl_graph_parse, ddl_graph_load) and
 * written back (ddl_graph_format) so that a checkpoint carries its network. One layer a line:
 *
 *     # comment                       blank lines and comments are skipped
 *     input 3 64 64                   or "input": the size comes from the data
 *     conv conv1 32 3 pad=1           conv [NAME] OUT K [stride=S] [pad=P] [bias=0]
 *     relu
 *     maxpool 2                       maxpool|avgpool K [stride=S] (stride defaults to K)
 *     dense fc classes                dense [NAME] OUT [bias=0]; OUT (and conv's) may be "classes"
 *     add from=r1                     r1 + the layer before; concat from=A,B for [A, B]
 *     mul from=x,s                    x * s: the same shape, or s of C x 1 x 1 (or 1 x H x W) scales x
 *     output dice                     the last layer (or from=NAME) is the output; xent or dice
 *
 * A layer reads the layer before it unless from=NAME says which (a name given to any layer, or
 * its number). The other layers: deconv [NAME] OUT K [stride=S] [pad=P], gap (global average
 * pool), dropout [P] (no P: the model config's), groupnorm [NAME] [GROUPS], flatten, shuffle GROUPS
 * (ShuffleNet's channel shuffle), slice START COUNT (channels START .. START + COUNT - 1).
 * Convolutions and pools take more geometry (geometry.c; K is then the kernel's height):
 *
 *     conv dw 32 3 groups=32 stride=2 pad=1   kw=KW, stride=S|SH,SW, pad=P|PH,PW|T,L,B,R,
 *     maxpool 3 stride=2 pad=0,0,1,1 ceil=1   dilation=D|DH,DW, groups=G (conv), out_pad=H,W
 *                                             (deconv), ceil=1 (pools), count_pad=1 (avgpool)
 *
 * The activations (ddl_graph_act): sigmoid, tanh, silu, gelu, gelu_tanh, hardswish, leakyrelu
 * [alpha=0.01], elu [alpha=1], hardsigmoid [alpha=A] [beta=B] (nn.Hardsigmoid's 1/6 and 0.5),
 * clip [min=LO] [max=HI] (relu6: clip min=0 max=6), and softmax|logsoftmax [axis=A] [to=B]
 * (ddl_graph_softmax: axes A to B of (C, H, W) numbered 1 to 3; default 1, to = A).
 * And resize scale=S|SHxSW|size=HxW [mode=nearest|linear] [coord=asymmetric|half_pixel|
 * pytorch_half_pixel|align_corners] [nearest=floor|ceil|round_prefer_floor|round_prefer_ceil]
 * (defaults: nearest, asymmetric, floor: PyTorch's nn.Upsample). And batchnorm [NAME]
 * [momentum=M] [eps=E] (PyTorch's BatchNorm2d; 0.1 and 1e-5 when not given). And affine C
 * scale=S1,..,SC shift=T1,..,TC (x * S + T per channel, constants: ddl_graph_affine).
 * Errors name the line. Knows nothing of models: it only calls graph.c and geometry.c. */
#include "impl.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
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

/* two_inputs: op reads two layers (from=A,B; from=A: A and the layer before) */
static int two_inputs(int op) { return op == DDL__OP_ADD || op == DDL__OP_CONCAT || op == DDL__OP_MUL; }

static const char *const usage[DDL__N_OPS] = {
    "input [C H W]", "conv [NAME] OUT K [stride=S] [pad=P] [bias=0|1]", "deconv [NAME] OUT K [stride=S] [pad=P]",
    "maxpool K [stride=S]", "avgpool K [stride=S]", "gap", "dense [NAME] OUT [bias=0|1]", "relu", "dropout [P]",
    "groupnorm [NAME] [GROUPS]", "flatten", "concat from=A[,B]", "add from=A[,B]",
    "an activation (sigmoid, tanh, silu, gelu, leakyrelu, clip, ...)", "softmax|logsoftmax [axis=A] [to=B]",
    "resize scale=S|SHxSW|size=HxW [mode=M] [coord=C] [nearest=R]", "batchnorm [NAME] [momentum=M] [eps=E]",
    "affine C scale=S1,..,SC shift=T1,..,TC", "mul from=A[,B]", "shuffle GROUPS", "slice START COUNT"};
static const int n_args[DDL__N_OPS][2] = {{0, 3}, {2, 2}, {2, 2}, {1, 1}, {1, 1}, {0, 0}, {1, 1},
                                          {0, 0}, {0, 1}, {0, 1}, {0, 0}, {0, 0}, {0, 0}, {0, 0},
                                          {0, 0}, {0, 0}, {0, 0}, {1, 1}, {0, 0}, {1, 1}, {2, 2}};
static const char *const keys[DDL__N_OPS] = {"", "stride pad bias from", "stride pad from", "stride from",
                                             "stride from", "from", "bias from", "from", "from", "from", "from",
                                             "from", "from", "from", "from", "scale size mode coord nearest from",
                                             "momentum eps from", "scale shift from", "from", "from", "from"};

/* ---- resize ---- */

static const char *const resize_modes[] = {"nearest", "linear"};
static const char *const resize_coords[] = {"asymmetric", "half_pixel", "pytorch_half_pixel", "align_corners"};
static const char *const resize_rounds[] = {"floor", "ceil", "round_prefer_floor", "round_prefer_ceil"};

/* key_word: the index in words[n] of key's value (fallback when absent); -1 with err set. */
static int key_word(const line *ln, const char *key, const char *const *words, int n, int fallback, char *err,
                    size_t err_bytes)
{
    for (int i = 0; i < ln->n_kv; i++) {
        if (strcmp(ln->key[i], key) != 0)
            continue;
        for (int k = 0; k < n; k++)
            if (strcmp(ln->val[i], words[k]) == 0)
                return k;
        char all[160] = "";
        for (int k = 0; k < n; k++)
            snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s", k ? ", " : "", words[k]);
        ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: %s: %s=%.40s: take one of %s", ln->no, ln->op, key,
                  ln->val[i], all);
        return -1;
    }
    return fallback;
}

/* pair: "A" or "AxB" of positive numbers (floats when real) into v[2]; -1 if not. */
static int pair(const char *s, int real, float v[2])
{
    char *end;
    for (int k = 0; k < 2; k++) {
        errno = 0;
        v[k] = real ? strtof(s, &end) : (float)strtol(s, &end, 10);
        if (end == s || errno || !(v[k] > 0.0f && v[k] <= (float)(1 << 20)))
            return -1;
        if (k == 0 && *end == 'x')
            s = end + 1;
        else if (k == 0 && !*end)
            v[1] = v[0], k = 2;
        else if (*end)
            return -1;
    }
    return 0;
}

static int resize_line(ddl_graph *g, const line *ln, int x, char *err, size_t err_bytes)
{
    int mode = key_word(ln, "mode", resize_modes, 2, 0, err, err_bytes);
    int coord = mode < 0 ? -1 : key_word(ln, "coord", resize_coords, 4, 0, err, err_bytes);
    int round = coord < 0 ? -1 : key_word(ln, "nearest", resize_rounds, 4, 0, err, err_bytes);
    if (round < 0)
        return -1;
    const char *scale = NULL, *size = NULL;
    for (int i = 0; i < ln->n_kv; i++)
        if (strcmp(ln->key[i], "scale") == 0)
            scale = ln->val[i];
        else if (strcmp(ln->key[i], "size") == 0)
            size = ln->val[i];
    float v[2];
    if (!scale == !size || pair(scale ? scale : size, scale != NULL, v) != 0) {
        ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: resize takes scale=S or scale=SHxSW (numbers > 0), or "
                  "size=HxW (whole numbers >= 1), one of them", ln->no);
        return -1;
    }
    return scale ? ddl_graph_resize(g, x, mode, coord, round, v[0], v[1], 0, 0)
                 : ddl_graph_resize(g, x, mode, coord, round, 0.0f, 0.0f, (int)v[0], (int)v[1]);
}

/* key_float: the value of key as a float (default fallback); DDL_EINVAL when it is not one. */
static int key_float(const line *ln, const char *key, float fallback, float *out, char *err, size_t err_bytes)
{
    *out = fallback;
    for (int i = 0; i < ln->n_kv; i++)
        if (strcmp(ln->key[i], key) == 0) {
            char *end;
            errno = 0;
            *out = strtof(ln->val[i], &end);
            if (end == ln->val[i] || *end || errno == ERANGE || *out != *out)
                return ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: %s: %s \"%.40s\" is not a number", ln->no,
                                 ln->op, key, ln->val[i]);
        }
    return DDL_OK;
}

/* layer_line: add the layer one line describes; DDL_OK or DDL_EINVAL naming the line. */
static int layer_line(ddl_graph *g, line *ln, int op, char *err, size_t err_bytes)
{
    int rc = check_keys(ln, keys[op], err, err_bytes), v[3] = {0, 0, 0}, in[2] = {g->n - 1, -1};
    if (rc == DDL_OK && (ln->n_pos < n_args[op][0] || ln->n_pos > n_args[op][1] || (op == DDL__OP_INPUT && ln->n_pos % 3)))
        rc = ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: %s takes %s", ln->no, ln->op, usage[op]);
    for (int i = 0; i < ln->n_pos && i < 3 && rc == DDL_OK && op != DDL__OP_DROPOUT; i++)
        rc = int_of(ln, op == DDL__OP_SLICE ? (i ? "count" : "start") : i ? "kernel" : "size", ln->pos[i],
                    i == 0 && op != DDL__OP_SLICE && op != DDL__OP_SHUFFLE, &v[i], err, err_bytes);
    for (int i = 0; i < ln->n_from && rc == DDL_OK; i++)
        if ((in[i] = find(g, ln, ln->from[i], err, err_bytes)) < 0)
            rc = DDL_EINVAL;
    if (rc == DDL_OK && ln->n_from == 1 && two_inputs(op))
        in[1] = g->n - 1; /* from=A: A and the layer before */
    if (rc == DDL_OK && two_inputs(op) && ln->n_from == 0)
        rc = ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: %s takes %s", ln->no, ln->op, usage[op]);
    if (rc != DDL_OK)
        return rc;
    int stride, pad, bias, i = -1;
    float momentum, eps;
    if ((rc = key_int(ln, "stride", op == DDL__OP_MAXPOOL || op == DDL__OP_AVGPOOL ? v[0] : 1, &stride, err,
                      err_bytes)) != DDL_OK ||
        (rc = key_int(ln, "pad", 0, &pad, err, err_bytes)) != DDL_OK ||
        (rc = key_int(ln, "bias", 1, &bias, err, err_bytes)) != DDL_OK ||
        (rc = key_float(ln, "momentum", DDL_BN_MOMENTUM, &momentum, err, err_bytes)) != DDL_OK ||
        (rc = key_float(ln, "eps", DDL_BN_EPS, &eps, err, err_bytes)) != DDL_OK)
        return rc;
    switch (op) {
    case DDL__OP_INPUT: i = ddl_graph_input(g, v[0] < 0 ? 0 : v[0], v[1], v[2]); break;
    case DDL__OP_CONV: i = ddl_graph_conv2d(g, in[0], ln->name, v[0], v[1], stride, pad, bias); break;
    case DDL__OP_DECONV: i = ddl_graph_deconv2d(g, in[0], ln->name, v[0], v[1], stride, pad); break;
    case DDL__OP_MAXPOOL: i = ddl_graph_maxpool(g, in[0], v[0], stride); break;
    case DDL__OP_AVGPOOL: i = ddl_graph_avgpool(g, in[0], v[0], stride); break;
    case DDL__OP_GAP: i = ddl_graph_global_avgpool(g, in[0]); break;
    case DDL__OP_DENSE: i = ddl_graph_linear(g, in[0], ln->name, v[0], bias); break;
    case DDL__OP_RELU: i = ddl_graph_relu(g, in[0]); break;
    case DDL__OP_DROPOUT: i = ddl_graph_dropout(g, in[0], ln->n_pos ? strtof(ln->pos[0], NULL) : -1.0f); break;
    case DDL__OP_GROUPNORM: i = ddl_graph_groupnorm(g, in[0], ln->name, v[0]); break;
    case DDL__OP_FLATTEN: i = ddl_graph_flatten(g, in[0]); break;
    case DDL__OP_CONCAT: i = ddl_graph_concat(g, in[0], in[1]); break;
    case DDL__OP_ADD: i = ddl_graph_add(g, in[0], in[1]); break;
    case DDL__OP_MUL: i = ddl_graph_mul(g, in[0], in[1]); break;
    case DDL__OP_SHUFFLE: i = ddl_graph_shuffle(g, in[0], v[0]); break;
    case DDL__OP_SLICE: i = ddl_graph_slice(g, in[0], v[0], v[1]); break;
    case DDL__OP_RESIZE:
        if ((i = resize_line(g, ln, in[0], err, err_bytes)) < 0 && !g->failed)
            return DDL_EINVAL;
        break;
    case DDL__OP_BATCHNORM:
        if (momentum < 0.0f || eps <= 0.0f) /* ddl_graph_batchnorm would take them as "the default" */
            return ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: batchnorm: momentum=%g eps=%g: need 0 <= "
                             "momentum <= 1 and eps > 0", ln->no, (double)momentum, (double)eps);
        i = ddl_graph_batchnorm(g, in[0], ln->name, momentum, eps);
        break;
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

/* ---- geometry: the keys of convolutions and pools beyond stride= and pad= ---- */

/* geometric: the line of a conv, deconv or pool uses a key (or a list) only the _ex calls take. */
static int geometric(const line *ln, int op)
{
    if (op != DDL__OP_CONV && op != DDL__OP_DECONV && op != DDL__OP_MAXPOOL && op != DDL__OP_AVGPOOL)
        return 0;
    for (int i = 0; i < ln->n_kv; i++) {
        const char *k = ln->key[i];
        if (strcmp(k, "kw") == 0 || strcmp(k, "dilation") == 0 || strcmp(k, "groups") == 0 ||
            strcmp(k, "out_pad") == 0 || strcmp(k, "ceil") == 0 || strcmp(k, "count_pad") == 0 ||
            ((strcmp(k, "stride") == 0 || strcmp(k, "pad") == 0) && strchr(ln->val[i], ',')) ||
            (strcmp(k, "pad") == 0 && (op == DDL__OP_MAXPOOL || op == DDL__OP_AVGPOOL)))
            return 1;
    }
    return 0;
}

/* key_list: key's value as 1 to 4 comma-separated numbers into v (*n of them; 0: absent). */
static int key_list(const line *ln, const char *key, int *v, int *n, char *err, size_t err_bytes)
{
    *n = 0;
    for (int i = 0; i < ln->n_kv; i++) {
        if (strcmp(ln->key[i], key) != 0)
            continue;
        char buf[64];
        snprintf(buf, sizeof buf, "%s", ln->val[i]);
        char *save = NULL;
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (*n == 4)
                return ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: %s: %s=%s: at most 4 values", ln->no, ln->op,
                                 key, ln->val[i]);
            int rc = int_of(ln, key, t, 0, &v[(*n)++], err, err_bytes);
            if (rc != DDL_OK)
                return rc;
        }
    }
    return DDL_OK;
}

/* geometry_line: a conv, deconv or pool line with geometry keys, through the _ex calls. */
static int geometry_line(ddl_graph *g, line *ln, int op, char *err, size_t err_bytes)
{
    static const char *const allowed[] = {[DDL__OP_CONV] = "kw stride pad dilation groups bias from",
                                          [DDL__OP_DECONV] = "kw stride pad dilation out_pad from",
                                          [DDL__OP_MAXPOOL] = "kw stride pad dilation ceil from",
                                          [DDL__OP_AVGPOOL] = "kw stride pad ceil count_pad from"};
    int conv = op == DDL__OP_CONV || op == DDL__OP_DECONV, want = conv ? 2 : 1, v[2] = {0, 0}, x = g->n - 1;
    int rc = check_keys(ln, allowed[op], err, err_bytes);
    if (rc == DDL_OK && ln->n_pos != want)
        rc = ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: %s takes %s", ln->no, ln->op, usage[op]);
    for (int i = 0; i < want && rc == DDL_OK; i++)
        rc = int_of(ln, i == want - 1 ? "kernel" : "size", ln->pos[i], conv && i == 0, &v[i], err, err_bytes);
    if (rc == DDL_OK && ln->n_from && (x = find(g, ln, ln->from[0], err, err_bytes)) < 0)
        rc = DDL_EINVAL;
    int st[4], pd[4], dl[4], op2[4], ns, np, nd, no, kw, groups, bias, ceil, cpad;
    if (rc == DDL_OK && ((rc = key_list(ln, "stride", st, &ns, err, err_bytes)) != DDL_OK ||
                         (rc = key_list(ln, "pad", pd, &np, err, err_bytes)) != DDL_OK ||
                         (rc = key_list(ln, "dilation", dl, &nd, err, err_bytes)) != DDL_OK ||
                         (rc = key_list(ln, "out_pad", op2, &no, err, err_bytes)) != DDL_OK ||
                         (rc = key_int(ln, "kw", 0, &kw, err, err_bytes)) != DDL_OK ||
                         (rc = key_int(ln, "groups", 0, &groups, err, err_bytes)) != DDL_OK ||
                         (rc = key_int(ln, "bias", 1, &bias, err, err_bytes)) != DDL_OK ||
                         (rc = key_int(ln, "ceil", 0, &ceil, err, err_bytes)) != DDL_OK ||
                         (rc = key_int(ln, "count_pad", 0, &cpad, err, err_bytes)) != DDL_OK))
        return rc;
    if (rc == DDL_OK && (ns > 2 || nd > 2 || no > 2 || np == 3))
        rc = ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: %s: stride, dilation and out_pad take 1 or 2 values "
                       "(rows, columns), pad 1, 2 (rows, columns) or 4 (top, left, bottom, right)", ln->no, ln->op);
    if (rc != DDL_OK)
        return rc;
    int k = v[want - 1], sh = ns ? st[0] : conv ? 1 : k, sw = ns == 2 ? st[1] : sh;
    int pads[4] = {0, 0, 0, 0};
    if (np == 1 || np == 2)
        pads[0] = pads[2] = pd[0], pads[1] = pads[3] = pd[np - 1];
    if (np == 4)
        memcpy(pads, pd, sizeof pads);
    int dh = nd ? dl[0] : 1, dw = nd == 2 ? dl[1] : dh, i;
    if (conv) {
        ddl_conv_geometry c = {v[0], k, kw, sh, sw, pads[0], pads[1], pads[2], pads[3], dh, dw, groups, !bias,
                               no ? op2[0] : 0, no == 2 ? op2[1] : no ? op2[0] : 0};
        i = op == DDL__OP_CONV ? ddl_graph_conv2d_ex(g, x, ln->name, &c) : ddl_graph_deconv2d_ex(g, x, ln->name, &c);
    } else {
        ddl_pool2d p = {k, kw, sh, sw, pads[0], pads[1], pads[2], pads[3], dh, dw, ceil, cpad};
        i = op == DDL__OP_MAXPOOL ? ddl_graph_maxpool_ex(g, x, &p) : ddl_graph_avgpool_ex(g, x, &p);
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


/* act_line: an activation (kind > 0, or relu6) or a softmax (kind < 0: -1, -2 for log). */
static int act_line(ddl_graph *g, line *ln, int kind, char *err, size_t err_bytes)
{
    const char *allowed = kind == DDL_ACT_LEAKY_RELU || kind == DDL_ACT_ELU ? "alpha from"
                          : kind == DDL_ACT_HARDSIGMOID                     ? "alpha beta from"
                          : kind == DDL_ACT_CLIP                            ? "min max from"
                          : kind < 0                                        ? "axis to from"
                                                                            : "from";
    int relu6 = strcmp(ln->op, "relu6") == 0, in = g->n - 1, axis, to, i = -1;
    float alpha, beta;
    int rc = check_keys(ln, relu6 ? "from" : allowed, err, err_bytes);
    if (rc == DDL_OK && ln->n_pos)
        rc = ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: %s takes no values%s%s", ln->no, ln->op,
                       strcmp(allowed, "from") ? ", only " : "", strcmp(allowed, "from") ? allowed : "");
    if (rc == DDL_OK && ln->n_from && (in = find(g, ln, ln->from[0], err, err_bytes)) < 0)
        rc = DDL_EINVAL;
    if (rc == DDL_OK && kind < 0) {
        if ((rc = key_int(ln, "axis", 1, &axis, err, err_bytes)) == DDL_OK &&
            (rc = key_int(ln, "to", axis, &to, err, err_bytes)) == DDL_OK)
            i = ddl_graph_softmax(g, in, axis, to, kind == -2);
    } else if (rc == DDL_OK) {
        float a0 = kind == DDL_ACT_LEAKY_RELU ? 0.01f : kind == DDL_ACT_ELU ? 1.0f
                 : kind == DDL_ACT_HARDSIGMOID ? 1.0f / 6.0f : kind == DDL_ACT_CLIP ? (relu6 ? 0.0f : -INFINITY) : 0.0f;
        float b0 = kind == DDL_ACT_HARDSIGMOID ? 0.5f : kind == DDL_ACT_CLIP ? (relu6 ? 6.0f : INFINITY) : 0.0f;
        const char *ka = kind == DDL_ACT_CLIP ? "min" : "alpha", *kb = kind == DDL_ACT_CLIP ? "max" : "beta";
        if ((rc = key_float(ln, ka, a0, &alpha, err, err_bytes)) == DDL_OK &&
            (rc = key_float(ln, kb, b0, &beta, err, err_bytes)) == DDL_OK)
            i = ddl_graph_act(g, in, kind, alpha, beta);
    }
    if (rc != DDL_OK)
        return rc;
    if (i >= 0 && ln->name)
        i = ddl_graph_name(g, i, ln->name);
    return i < 0 ? ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: %s", ln->no, ddl_graph_error(g)) : DDL_OK;
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
    int kind = strcmp(ln.op, "relu6") == 0 ? DDL_ACT_CLIP : ddl__graph_act_find(ln.op);
    if (op == DDL__OP_SOFTMAX || strcmp(ln.op, "logsoftmax") == 0)
        kind = op == DDL__OP_SOFTMAX ? -1 : -2;
    if (kind == 0 && (op < 0 || op == DDL__OP_ACT))
        return ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: \"%.40s\" is not a layer (input, conv, deconv, "
                         "maxpool, avgpool, gap, dense, relu, dropout, groupnorm, flatten, concat, add, mul, "
                         "shuffle, slice, an "
                         "activation (sigmoid, tanh, silu, gelu, leakyrelu, clip, ...), softmax, resize, batchnorm, "
                         "output)",
                         no, ln.op);
    if (ln.n_from == 2 && !two_inputs(op))
        return ddl__errf(err, err_bytes, DDL_EINVAL, "line %d: %s reads one layer: from=NAME", no, ln.op);
    if (geometric(&ln, op))
        return geometry_line(g, &ln, op, err, err_bytes);
    if (kind != 0)
        return act_line(g, &ln, kind, err, err_bytes);
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

static void put_size(ddl__text *o, int v)
{
    if (v == DDL_CLASSES)
        ddl__text_put(o, " classes");
    else
        ddl__text_put(o, " %d", v);
}

/* ref: how a later line names layer i (its name, else its number). */
static void put_ref(ddl__text *o, const ddl_graph *g, int i)
{
    if (g->layers[i].name[0])
        ddl__text_put(o, "%s", g->layers[i].name);
    else
        ddl__text_put(o, "%d", i);
}

/* put_geometry: stride= (when not stride_default) and pad=, then the keys of geometry.c's fields
 * that are set; a plain layer gets only what it got before they existed. */
static void put_geometry(ddl__text *o, const ddl__layer *l, int stride_default)
{
    if (l->kw)
        ddl__text_put(o, " kw=%d", l->kw);
    if (l->stride_w)
        ddl__text_put(o, " stride=%d,%d", l->stride, l->stride_w);
    else if (l->stride != stride_default)
        ddl__text_put(o, " stride=%d", l->stride);
    if (l->pads4)
        ddl__text_put(o, " pad=%d,%d,%d,%d", l->pad, l->pad_l, l->pad_b, l->pad_r);
    else if (l->pad >= l->k && (l->op == DDL__OP_CONV || l->op == DDL__OP_DECONV))
        ddl__text_put(o, " pad=%d,%d", l->pad, l->pad); /* a list: read back by the _ex call, which takes it */
    else if (l->pad)
        ddl__text_put(o, " pad=%d", l->pad);
    if (l->dil_h || l->dil_w)
        ddl__text_put(o, " dilation=%d,%d", l->dil_h ? l->dil_h : 1, l->dil_w ? l->dil_w : 1);
    if (l->op == DDL__OP_CONV && l->groups > 1)
        ddl__text_put(o, " groups=%d", l->groups);
    if (l->out_pad_h || l->out_pad_w)
        ddl__text_put(o, " out_pad=%d,%d", l->out_pad_h, l->out_pad_w);
    if (l->ceil_mode)
        ddl__text_put(o, " ceil=1");
    if (l->count_pad)
        ddl__text_put(o, " count_pad=1");
}

/* put_act: an activation's or softmax's settings (text: ddl_graph_parse reads them back exactly). */
static void put_act(ddl__text *o, const ddl__layer *l)
{
    if (l->op == DDL__OP_SOFTMAX) {
        ddl__text_put(o, " axis=%d", l->axis);
        if (l->axis_to != l->axis)
            ddl__text_put(o, " to=%d", l->axis_to);
    } else if (l->act == DDL_ACT_LEAKY_RELU || l->act == DDL_ACT_ELU) {
        ddl__text_put(o, " alpha=%.9g", (double)l->alpha);
    } else if (l->act == DDL_ACT_HARDSIGMOID) {
        ddl__text_put(o, " alpha=%.9g beta=%.9g", (double)l->alpha, (double)l->beta);
    } else if (l->act == DDL_ACT_CLIP) {
        if (isfinite(l->alpha))
            ddl__text_put(o, " min=%.9g", (double)l->alpha);
        if (isfinite(l->beta))
            ddl__text_put(o, " max=%.9g", (double)l->beta);
    }
}

static void format_layer(ddl__text *o, const ddl_graph *g, int i)
{
    const ddl__layer *l = &g->layers[i];
    ddl__text_put(o, "%s", ddl__graph_layer_op(l));
    if (l->name[0])
        ddl__text_put(o, " %s", l->name);
    switch (l->op) {
    case DDL__OP_INPUT:
        if (l->out > 0 || l->k > 0 || l->stride > 0)
            ddl__text_put(o, " %d %d %d", l->out > 0 ? l->out : 0, l->k > 0 ? l->k : 0, l->stride > 0 ? l->stride : 0);
        break;
    case DDL__OP_CONV:
    case DDL__OP_DECONV:
        put_size(o, l->out);
        ddl__text_put(o, " %d", l->k);
        put_geometry(o, l, 1);
        if (l->op == DDL__OP_CONV && !l->bias)
            ddl__text_put(o, " bias=0");
        break;
    case DDL__OP_MAXPOOL:
    case DDL__OP_AVGPOOL:
        ddl__text_put(o, " %d", l->k);
        put_geometry(o, l, l->k);
        break;
    case DDL__OP_DENSE:
        put_size(o, l->out);
        if (!l->bias)
            ddl__text_put(o, " bias=0");
        break;
    case DDL__OP_DROPOUT:
        if (l->p >= 0.0f)
            ddl__text_put(o, " %.9g", (double)l->p);
        break;
    case DDL__OP_GROUPNORM:
        if (l->groups)
            ddl__text_put(o, " %d", l->groups);
        break;
    case DDL__OP_SHUFFLE: ddl__text_put(o, " %d", l->groups); break;
    case DDL__OP_SLICE: ddl__text_put(o, " %d %d", l->k, l->out); break;
    case DDL__OP_ACT:
    case DDL__OP_SOFTMAX: put_act(o, l); break;
    case DDL__OP_RESIZE:
        if (l->k)
            ddl__text_put(o, " size=%dx%d", l->k, l->stride);
        else if (l->scale_h == l->scale_w)
            ddl__text_put(o, " scale=%.9g", (double)l->scale_h);
        else
            ddl__text_put(o, " scale=%.9gx%.9g", (double)l->scale_h, (double)l->scale_w);
        ddl__text_put(o, " mode=%s coord=%s", resize_modes[l->mode % 2], resize_coords[l->coord % 4]);
        if (l->mode == DDL_RESIZE_NEAREST)
            ddl__text_put(o, " nearest=%s", resize_rounds[l->nearest % 4]);
        break;
    case DDL__OP_BATCHNORM: /* %.9g: the float's bits come back */
        if (l->momentum != DDL_BN_MOMENTUM)
            ddl__text_put(o, " momentum=%.9g", (double)l->momentum);
        if (l->eps != DDL_BN_EPS)
            ddl__text_put(o, " eps=%.9g", (double)l->eps);
        break;
    case DDL__OP_AFFINE:
        ddl__text_put(o, " %d", l->out);
        for (int k = 0; k < 2 * l->out; k++)
            ddl__text_put(o, "%s%.9g", k == 0 ? " scale=" : k == l->out ? " shift=" : ",", (double)g->consts[l->k + k]);
        break;
    default: break;
    }
    int two = two_inputs(l->op);
    if (i > 0 && (two || l->in[0] != i - 1)) {
        ddl__text_put(o, " from=");
        put_ref(o, g, l->in[0]);
        if (two && l->in[1] != i - 1) {
            ddl__text_put(o, ",");
            put_ref(o, g, l->in[1]);
        }
    }
    ddl__text_put(o, "\n");
}

size_t ddl_graph_format(const ddl_graph *g, char *buf, size_t bytes)
{
    ddl__text o = {buf, buf ? bytes : 0, 0};
    if (!g)
        return 0;
    for (int i = 0; i < g->n; i++)
        format_layer(&o, g, i);
    int x = ddl_graph_output_layer(g);
    if (x >= 0 && (x != g->n - 1 || g->head != DDL_HEAD_XENT)) {
        ddl__text_put(&o, "output %s", g->head == DDL_HEAD_DICE ? "dice" : "xent");
        if (x != g->n - 1) {
            ddl__text_put(&o, " from=");
            put_ref(&o, g, x);
        }
        ddl__text_put(&o, "\n");
    }
    if (o.bytes)
        o.buf[o.len < o.bytes ? o.len : o.bytes - 1] = '\0';
    return o.len;
}
