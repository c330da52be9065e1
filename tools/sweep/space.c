/* space.c - ddl-sweep's search space and its trials: the parameters from --grid NAME=V1,V2
 * and --range NAME=LO:HI[:log][:int], or from a JSON file in the shape of SageMaker's tuning job
 * config (ParameterRanges with CategoricalParameterRanges, ContinuousParameterRanges and
 * IntegerParameterRanges; ScalingType Auto, Linear, Logarithmic or ReverseLogarithmic; Strategy
 * Grid or Random; ResourceLimits.MaxNumberOfTrainingJobs; HyperParameterTuningJobObjective), read
 * with jansson (as ddl-serve's JSON). The trials are the grid's product (the last parameter varies fastest) or N seeded
 * random draws, each a row of values as text, the way they go on the command line.
 * For ddl-sweep only: a bad space gets one line naming where it came from, and exit status 2. */
#include "sweep.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef DDL_WITH_JANSSON
#include <jansson.h>
#endif

#include "tools/cli.h"

/* ---- parameters ---- */

/* space_param: a new parameter NAME (what: where it came from); a name twice is refused. */
static sweep_param *space_param(sweep_space *s, const char *name, size_t len, int kind, const char *what)
{
    if (len == 0 || len >= SWEEP_VALUE_BYTES || strcspn(name, ",\"\n= ") < len)
        sweep_die("%s: '%.*s': expected a parameter name (a flag name, no blanks or commas)", what, (int)len, name);
    for (int i = 0; i < s->n; i++)
        if (strlen(s->p[i].name) == len && !strncmp(s->p[i].name, name, len))
            sweep_die("%s: parameter '%.*s' is given twice", what, (int)len, name);
    if (s->n == SWEEP_MAX_PARAMS)
        sweep_die("%s: more than %d parameters", what, SWEEP_MAX_PARAMS);
    sweep_param *p = &s->p[s->n++];
    memset(p, 0, sizeof *p);
    memcpy(p->name, name, len);
    p->kind = kind;
    return p;
}

/* space_value: one categorical value; it goes into results.csv as it is, so no comma, quote or newline. */
static void space_value(sweep_param *p, const char *v, size_t len, const char *what)
{
    if (len == 0 || len >= SWEEP_VALUE_BYTES || strcspn(v, ",\"\r\n") < len)
        sweep_die("%s: %s value '%.*s': expected 1 to %d characters, no comma, quote or newline", what, p->name,
                  (int)len, v, SWEEP_VALUE_BYTES - 1);
    if (p->n_values == SWEEP_MAX_VALUES)
        sweep_die("%s: %s has more than %d values", what, p->name, SWEEP_MAX_VALUES);
    memcpy(p->values[p->n_values++], v, len);
}

/* space_bounds: LO and HI of a range, checked for its kind and scale. */
static void space_bounds(sweep_param *p, const char *lo, const char *hi, const char *what)
{
    char *e1, *e2;
    p->lo = strtod(lo, &e1);
    p->hi = strtod(hi, &e2);
    if (!cli_number_start(lo) || !cli_number_start(hi) || e1 == lo || e2 == hi || *e1 || *e2 || !isfinite(p->lo) ||
        !isfinite(p->hi) || p->lo > p->hi)
        sweep_die("%s: %s from '%s' to '%s': expected two numbers, the first no larger", what, p->name, lo, hi);
    if (p->kind == SWEEP_INTEGER && (p->lo != floor(p->lo) || p->hi != floor(p->hi) || fabs(p->lo) > 1e15 ||
                                     fabs(p->hi) > 1e15))
        sweep_die("%s: %s: an integer range needs integer bounds, not %s and %s", what, p->name, lo, hi);
    if (p->scale == SWEEP_LOG && p->lo <= 0)
        sweep_die("%s: %s: a logarithmic range needs bounds above 0, not %s", what, p->name, lo);
    if (p->scale == SWEEP_REVERSE_LOG && (p->lo < 0 || p->hi >= 1 || p->kind == SWEEP_INTEGER))
        sweep_die("%s: %s: a reverse logarithmic range is continuous, within [0, 1)", what, p->name);
}

/* space_add_grid: --grid NAME=V1,V2,... */
void space_add_grid(sweep_space *s, const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (!eq || !eq[1])
        sweep_die("--grid %s: expected NAME=V1,V2,...", arg);
    sweep_param *p = space_param(s, arg, (size_t)(eq - arg), SWEEP_CATEGORICAL, "--grid");
    for (const char *v = eq + 1;; v++) {
        size_t len = strcspn(v, ",");
        space_value(p, v, len, "--grid");
        v += len;
        if (!*v)
            break;
    }
}

/* space_add_range: --range NAME=LO:HI[:log][:int] */
void space_add_range(sweep_space *s, const char *arg)
{
    char buf[256], *f[5];
    int n = 0;
    const char *eq = strchr(arg, '=');
    if (!eq || strlen(eq + 1) >= sizeof buf)
        sweep_die("--range %s: expected NAME=LO:HI[:log][:int]", arg);
    strcpy(buf, eq + 1);
    for (char *t = buf, *save = NULL; n < 5 && (t = strtok_r(t, ":", &save)); t = NULL)
        f[n++] = t;
    int kind = SWEEP_CONTINUOUS, scale = SWEEP_LINEAR;
    for (int i = 2; i < n; i++) {
        if (!strcmp(f[i], "log"))
            scale = SWEEP_LOG;
        else if (!strcmp(f[i], "int"))
            kind = SWEEP_INTEGER;
        else if (strcmp(f[i], "linear"))
            n = 0;
    }
    if (n < 2 || n > 4)
        sweep_die("--range %s: expected NAME=LO:HI[:log][:int]", arg);
    sweep_param *p = space_param(s, arg, (size_t)(eq - arg), kind, "--range");
    p->scale = scale;
    space_bounds(p, f[0], f[1], "--range");
}

/* ---- the JSON file: SageMaker's shape ---- */

#ifdef DDL_WITH_JANSSON
/* json_text: a string, or a number as text (SageMaker writes bounds as strings; people write numbers). */
static const char *json_text(const json_t *v, char *buf, size_t cap)
{
    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_number(v)) {
        snprintf(buf, cap, "%.17g", json_number_value(v));
        return buf;
    }
    return NULL;
}

/* json_str: v's text if v is a JSON string, else NULL. */
static const char *json_str(const json_t *v) { return json_is_string(v) ? json_string_value(v) : NULL; }

/* json_ranges: one of the three ParameterRanges arrays into s. */
static void json_ranges(sweep_space *s, const json_t *arr, int kind, const char *where)
{
    char what[700];
    if (!arr)
        return;
    if (!json_is_array(arr))
        sweep_die("%s: expected an array", where);
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *r = json_array_get(arr, i);
        snprintf(what, sizeof what, "%s[%zu]", where, i);
        const char *name = json_str(json_object_get(r, "Name"));
        if (!json_is_object(r) || !name)
            sweep_die("%s: expected an object with a \"Name\" string", what);
        static const char *const cat_keys[] = {"Name", "Values", NULL};
        static const char *const range_keys[] = {"Name", "MinValue", "MaxValue", "ScalingType", NULL};
        const char *key;
        json_t *unused;
        json_object_foreach(r, key, unused) {
            const char *const *known = kind == SWEEP_CATEGORICAL ? cat_keys : range_keys;
            while (*known && strcmp(*known, key))
                known++;
            if (!*known)
                sweep_die("%s: unknown key \"%s\"", what, key);
        }
        sweep_param *p = space_param(s, name, strlen(name), kind, what);
        if (kind == SWEEP_CATEGORICAL) {
            const json_t *vals = json_object_get(r, "Values");
            if (!json_is_array(vals) || json_array_size(vals) == 0)
                sweep_die("%s (%s): expected \"Values\": a non-empty array", what, p->name);
            for (size_t v = 0; v < json_array_size(vals); v++) {
                char buf[64];
                const char *t = json_text(json_array_get(vals, v), buf, sizeof buf);
                if (!t)
                    sweep_die("%s (%s): \"Values\" holds something not a string or number", what, p->name);
                space_value(p, t, strlen(t), what);
            }
            continue;
        }
        const json_t *sc = json_object_get(r, "ScalingType");
        static const char *const scales[] = {"Auto", "Linear", "Logarithmic", "ReverseLogarithmic", NULL};
        int k = 0;
        while (json_str(sc) && scales[k] && strcmp(scales[k], json_str(sc)))
            k++;
        if (sc && (!json_str(sc) || !scales[k]))
            sweep_die("%s (%s): \"ScalingType\": expected Auto, Linear, Logarithmic or ReverseLogarithmic", what,
                      p->name);
        p->scale = k == 2 ? SWEEP_LOG : k == 3 ? SWEEP_REVERSE_LOG : SWEEP_LINEAR;
        char b1[64], b2[64];
        const char *lo = json_text(json_object_get(r, "MinValue"), b1, sizeof b1);
        const char *hi = json_text(json_object_get(r, "MaxValue"), b2, sizeof b2);
        if (!lo || !hi)
            sweep_die("%s (%s): expected \"MinValue\" and \"MaxValue\"", what, p->name);
        space_bounds(p, lo, hi, what);
    }
}

/* space_load: --space FILE: the ranges, and Strategy, MaxNumberOfTrainingJobs and the objective
 * when it has them. The file may be a whole tuning job config or its ParameterRanges alone. */
void space_load(sweep_space *s, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        sweep_die("--space %s: %s", path, strerror(errno));
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    int big = !feof(f);
    fclose(f);
    if (big)
        sweep_die("--space %s: larger than 1 MB", path);
    text[n] = '\0';
    json_error_t e;
    json_t *root = json_loadb(text, n, JSON_REJECT_DUPLICATES, &e);
    if (!root)
        sweep_die("--space %s: not a JSON object (syntax error at line %d, column %d: %s)", path, e.line, e.column,
                  e.text);
    if (!json_is_object(root))
        sweep_die("--space %s: not a JSON object (a JSON %s)", path,
                  json_is_array(root) ? "array" : json_is_string(root) ? "string" : "value");
    const json_t *pr = json_object_get(root, "ParameterRanges");
    if (!pr)
        pr = root;
    char where[600];
    static const char *const keys[] = {"CategoricalParameterRanges", "ContinuousParameterRanges",
                                       "IntegerParameterRanges"};
    static const int kinds[] = {SWEEP_CATEGORICAL, SWEEP_CONTINUOUS, SWEEP_INTEGER};
    for (int k = 0; k < 3; k++) {
        snprintf(where, sizeof where, "--space %s: %s", path, keys[k]);
        json_ranges(s, json_object_get(pr, keys[k]), kinds[k], where);
    }
    if (s->n == 0)
        sweep_die("--space %s: no parameters (expected ParameterRanges with CategoricalParameterRanges, "
                  "ContinuousParameterRanges or IntegerParameterRanges)", path);
    const json_t *st = json_object_get(root, "Strategy");
    if (st && (!json_str(st) || (strcmp(json_str(st), "Grid") && strcmp(json_str(st), "Random"))))
        sweep_die("--space %s: \"Strategy\": ddl-sweep does Grid or Random", path);
    s->random = st && !strcmp(json_str(st), "Random");
    const json_t *lim = json_object_get(json_object_get(root, "ResourceLimits"), "MaxNumberOfTrainingJobs");
    if (lim && (!json_is_number(lim) || json_number_value(lim) < 1 || json_number_value(lim) > SWEEP_MAX_TRIALS))
        sweep_die("--space %s: \"MaxNumberOfTrainingJobs\": expected 1 to %d", path, SWEEP_MAX_TRIALS);
    if (lim)
        s->n_random = (long)json_number_value(lim);
    const json_t *obj = json_object_get(root, "HyperParameterTuningJobObjective");
    const json_t *type = json_object_get(obj, "Type");
    const json_t *metric = json_object_get(obj, "MetricName");
    if (obj && ((type && (!json_str(type) || (strcmp(json_str(type), "Maximize") &&
                                              strcmp(json_str(type), "Minimize")))) ||
                (metric && (!json_str(metric) || strlen(json_str(metric)) >= sizeof s->metric))))
        sweep_die("--space %s: \"HyperParameterTuningJobObjective\": expected {\"Type\": \"Maximize\" or "
                  "\"Minimize\", \"MetricName\": NAME}", path);
    if (type)
        s->minimize = !strcmp(json_str(type), "Minimize");
    if (metric)
        strcpy(s->metric, json_str(metric));
    json_decref(root);
}
#else
void space_load(sweep_space *s, const char *path)
{
    (void)s;
    sweep_die("--space %s: this ddl-sweep was built without jansson (apt-get install libjansson-dev, then make)", path);
}
#endif

/* ---- trials ---- */

/* rng: splitmix64, so that a seed gives the same draws on every machine. */
static double space_uniform(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53; /* [0, 1) */
}

/* space_draw: one random value of p as text. */
static void space_draw(const sweep_param *p, uint64_t *rng, char *out)
{
    double u = space_uniform(rng);
    if (p->kind == SWEEP_CATEGORICAL) {
        snprintf(out, SWEEP_VALUE_BYTES, "%s", p->values[(int)(u * p->n_values)]);
        return;
    }
    double v;
    if (p->scale == SWEEP_LOG && p->kind == SWEEP_INTEGER)
        v = floor(exp(log(p->lo) + u * (log(p->hi + 1) - log(p->lo))));
    else if (p->scale == SWEEP_LOG)
        v = exp(log(p->lo) + u * (log(p->hi) - log(p->lo)));
    else if (p->scale == SWEEP_REVERSE_LOG)
        v = 1.0 - exp(log(1.0 - p->hi) + u * (log(1.0 - p->lo) - log(1.0 - p->hi)));
    else if (p->kind == SWEEP_INTEGER)
        v = p->lo + floor(u * (p->hi - p->lo + 1));
    else
        v = p->lo + u * (p->hi - p->lo);
    v = v < p->lo ? p->lo : v > p->hi ? p->hi : v;
    if (p->kind == SWEEP_INTEGER)
        snprintf(out, SWEEP_VALUE_BYTES, "%.0f", v);
    else
        snprintf(out, SWEEP_VALUE_BYTES, "%.6g", v);
}

/* grid_count: the values of p in a grid: a categorical's, or every integer of an integer range. */
static long grid_count(const sweep_param *p)
{
    if (p->kind == SWEEP_CATEGORICAL)
        return p->n_values;
    if (p->kind == SWEEP_INTEGER && p->hi - p->lo < SWEEP_MAX_VALUES)
        return (long)(p->hi - p->lo) + 1;
    sweep_die("%s: a %s range cannot be a grid: list its values with --grid, or draw with --random N", p->name,
              p->kind == SWEEP_INTEGER ? "wide integer" : "continuous");
    return 0;
}

/* space_trials: every trial's values, n_params per row (row-major), in a new array; *n_out trials.
 * Grid: the product, the last parameter fastest. Random: n_random draws from seed. */
char (*space_trials(const sweep_space *s, long n_random, uint64_t seed, long *n_out))[SWEEP_VALUE_BYTES]
{
    long n = 1;
    if (n_random > 0)
        n = n_random;
    else
        for (int i = 0; i < s->n; i++)
            if ((n *= grid_count(&s->p[i])) > SWEEP_MAX_TRIALS)
                sweep_die("the grid has more than %d trials", SWEEP_MAX_TRIALS);
    char(*v)[SWEEP_VALUE_BYTES] = calloc((size_t)n * (size_t)(s->n ? s->n : 1), SWEEP_VALUE_BYTES);
    if (!v)
        sweep_fatal("out of memory for %ld trials", n);
    uint64_t rng = seed;
    for (long t = 0; t < n; t++) {
        long rest = t;
        for (int i = s->n - 1; i >= 0; i--) {
            const sweep_param *p = &s->p[i];
            char *out = v[t * s->n + i];
            if (n_random > 0)
                continue;
            long c = grid_count(p), k = rest % c;
            rest /= c;
            if (p->kind == SWEEP_CATEGORICAL)
                snprintf(out, SWEEP_VALUE_BYTES, "%s", p->values[k]);
            else
                snprintf(out, SWEEP_VALUE_BYTES, "%.0f", p->lo + (double)k);
        }
        for (int i = 0; n_random > 0 && i < s->n; i++) /* in parameter order: the draws are reproducible */
            space_draw(&s->p[i], &rng, v[t * s->n + i]);
    }
    *n_out = n;
    return v;
}
