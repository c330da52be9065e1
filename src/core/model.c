/* model.c - the model object: runs a plugin's build() twice (measure, then real) to lay out
 * parameters, gradients, logits and activations in one block of memory; weight init; forward
 * and backward wrappers. Knows nothing of any particular network. */
#include "impl.h"

#include <math.h>
#include <string.h>

/* shape_count: the values of a shape (dims below 1 count 0), saturated well below SIZE_MAX: the
 * callers check it against what the layout can address. */
static size_t shape_count(int n_dims, const int *shape)
{
    size_t count = 1;
    for (int i = 0; i < n_dims; i++) {
        size_t d = (size_t)(shape[i] > 0 ? shape[i] : 0);
        count = d && count > SIZE_MAX / 16 / d ? SIZE_MAX / 16 : count * d;
    }
    return count;
}

/* describe: a parameter's or buffer's table entry t, its name kept in slot. */
static void describe(ddl_param_info *t, char *slot, const char *name, int n_dims, const int *shape, size_t offset,
                     size_t count, int init)
{
    snprintf(slot, DDL__NAME_BYTES, "%s", name);
    t->name = slot;
    t->n_dims = n_dims;
    for (int i = 0; i < 4; i++)
        t->shape[i] = i < n_dims ? shape[i] : 1;
    t->offset = offset;
    t->count = count;
    t->init = init;
}

/* ---- build: what a plugin's build() talks to ---- */

struct ddl_model_build {
    ddl_model *m;        /* NULL while measuring */
    size_t n_params;     /* floats declared so far */
    int n_tensors;
    size_t n_buffers;    /* buffer floats declared so far, and tensors */
    int n_buf_tensors;
    ddl_arena scratch;   /* activations */
    int out_c, out_h, out_w;
    int failed;
    char err[DDL_ERR_BYTES];
    int n_layers;        /* layers declared so far (ddl_build_layer, profile.c) */
    const void *kept;    /* the plugin's copy of its settings (ddl_build_plugin_config) */
};

float *ddl_build_param(ddl_model_build *b, const char *name, int n_dims, const int *shape, int init, int fan_in,
                       int fan_out, float **grad)
{
    size_t count = 1;
    if (n_dims < 1 || n_dims > 4 || b->n_tensors >= DDL_MAX_PARAMS || !name || strlen(name) >= DDL__NAME_BYTES) {
        char why[DDL_ERR_BYTES];
        snprintf(why, sizeof why, "parameter %.60s: needs 1 to 4 dimensions (not %d), a name of 1 to %d bytes, "
                 "and at most %d tensors", name ? name : "(no name)", n_dims, DDL__NAME_BYTES - 1, DDL_MAX_PARAMS);
        ddl_build_fail(b, why);
        n_dims = 1;
    }
    count = shape_count(n_dims, shape);
    if (count > SIZE_MAX / 16 - b->n_params) { /* the layout adds its bytes twice (weights, gradients) */
        char why[DDL_ERR_BYTES];
        snprintf(why, sizeof why, "parameter %.60s: too many values to address", name ? name : "(no name)");
        ddl_build_fail(b, why);
        count = 0;
    }
    size_t offset = b->n_params;
    b->n_params += count;
    int idx = b->n_tensors++;
    if (grad)
        *grad = NULL;
    if (!b->m || b->failed)
        return NULL;
    ddl_model *m = b->m;
    ddl_param_info *t = &m->tensors[idx];
    describe(t, m->names[idx], name, n_dims, shape, offset, count, init);
    t->fan_in = fan_in;
    t->fan_out = fan_out;
    if (grad)
        *grad = m->grads + offset;
    return m->params + offset;
}

/* buffer_fill: a buffer's values as its init says (zero, or one). */
static void buffer_fill(float *v, size_t n, int init)
{
    for (size_t i = 0; i < n; i++)
        v[i] = init == DDL_INIT_ONE ? 1.0f : 0.0f;
}

float *ddl_build_buffer(ddl_model_build *b, const char *name, int n_dims, const int *shape, int init, float **next)
{
    size_t count = 1;
    if (next)
        *next = NULL;
    if (n_dims < 1 || n_dims > 4 || b->n_buf_tensors >= DDL_MAX_BUFFERS || !name || strlen(name) >= DDL__NAME_BYTES ||
        (init != DDL_INIT_ZERO && init != DDL_INIT_ONE)) {
        char why[DDL_ERR_BYTES];
        snprintf(why, sizeof why, "buffer %.60s: needs 1 to 4 dimensions (not %d), a name of 1 to %d bytes, init "
                 "zero or one, and at most %d buffers", name ? name : "(no name)", n_dims, DDL__NAME_BYTES - 1,
                 DDL_MAX_BUFFERS);
        ddl_build_fail(b, why);
        return NULL;
    }
    count = shape_count(n_dims, shape);
    if (count > SIZE_MAX / 16 - b->n_buffers - b->n_params) { /* laid out twice, after the parameters */
        ddl_build_fail(b, "a buffer with too many values to address");
        return NULL;
    }
    size_t offset = b->n_buffers;
    b->n_buffers += count;
    int idx = b->n_buf_tensors++;
    if (!b->m || b->failed)
        return NULL;
    ddl_model *m = b->m;
    describe(&m->buf_tensors[idx], m->buf_names[idx], name, n_dims, shape, offset, count, init);
    buffer_fill(m->buffers + offset, count, init);
    if (next)
        *next = m->next + offset;
    return m->buffers + offset;
}

void ddl__build_sync(ddl_model_build *b, size_t width)
{
    if (!b->m || b->failed)
        return;
    b->m->n_sync++;
    if (width > b->m->sync_width)
        b->m->sync_width = width;
}

/* model_of: the model whose plugin state is self (at a fixed place after it: layout()). */
static ddl_model *model_of(const void *self)
{
    ddl_model *m = self ? (ddl_model *)(uintptr_t)((const unsigned char *)self - ddl__align_up(sizeof(ddl_model))) : NULL;
    return m && m->self == self ? m : NULL;
}

/* The profile's calls from a plugin, which names its model by its state: the timing itself is
 * profile.c's. */
int ddl_model_profiling(const void *self)
{
    const ddl_model *m = model_of(self);
    return m && m->profiling && m->prof_pass >= 0;
}

void ddl_model_layer_done(void *self, int layer)
{
    ddl_model *m = model_of(self);
    if (m && m->profiling)
        ddl__profile_mark(m, layer);
}

int ddl__model_synced(const void *self)
{
    const ddl_model *m = model_of(self);
    return m && m->sync;
}

int ddl__model_sync(void *self, const float *rows, int n, int width, double *tot, long *n_all)
{
    ddl_model *m = model_of(self);
    if (!m || !m->sync) {
        memset(tot, 0, (size_t)width * sizeof *tot);
        *n_all = n;
        return DDL_EINVAL;
    }
    return m->sync(m->sync_ud, rows, n, width, tot, n_all);
}

float *ddl_build_scratch(ddl_model_build *b, size_t count)
{
    return (float *)ddl_arena_alloc(&b->scratch, count * sizeof(float));
}

void ddl_build_output(ddl_model_build *b, int c, int h, int w)
{
    b->out_c = c;
    b->out_h = h;
    b->out_w = w;
}

int ddl_build_layer(ddl_model_build *b, const char *name, const char *kind, int c, int h, int w, double fwd_flops,
                    double bwd_flops)
{
    if (b->n_layers >= DDL_PROFILE_MAX_LAYERS)
        return -1;
    int idx = b->n_layers++;
    if (b->m && !b->failed)
        ddl__profile_describe(&b->m->layers[idx], name, kind, c, h, w, fwd_flops, bwd_flops);
    return idx;
}

void ddl_build_plugin_config(ddl_model_build *b, const void *kept) { b->kept = kept; }

void ddl_build_fail(ddl_model_build *b, const char *msg)
{
    if (!b->failed)
        snprintf(b->err, sizeof b->err, "%s", msg);
    b->failed = 1;
}

/* ---- layout ---- */

/* The buffers sit after the parameters; their next values (ddl_build_buffer) after the
 * gradients, as the gradient block's tail, so that one all-reduce of the gradients can carry
 * them (the trainer's virtual shards). */
typedef struct layout {
    size_t self_off, params_off, buffers_off, grads_off, logits_off, scratch_off, total;
    size_t n_params, n_buffers, scratch_bytes, logits_floats;
    size_t layers_off;   /* the declared layers' table (profiles), after the scratch */
    int n_layers;
} layout;

/* config_error: DDL_OK, or DDL_EINVAL naming the first thing wrong with the plugin or cfg. */
static int config_error(const ddl_model_plugin *p, const ddl_model_config *cfg, char *err, size_t err_bytes)
{
    if (!p || !cfg)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "model: no plugin or no configuration given");
    const char *name = p->name ? p->name : "model plugin";
    if (p->version < 1 || p->version > DDL_MODEL_VERSION)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "%s: plugin version %d, this ddl takes 1 to %d", name,
                         p->version, DDL_MODEL_VERSION);
    if (!p->build || !p->forward || !p->backward)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "%s: plugin lacks build, forward or backward", name);
    if (cfg->batch < 1 || cfg->in_c < 1 || cfg->in_h < 1 || cfg->in_w < 1)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "%s: batch %d and input %dx%dx%d must all be >= 1", name,
                         cfg->batch, cfg->in_c, cfg->in_h, cfg->in_w);
    if (cfg->n_classes < 2 || cfg->n_classes > DDL_MAX_CLASSES)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "%s: %d classes, expected 2 to %d", name, cfg->n_classes,
                         DDL_MAX_CLASSES);
    return DDL_OK;
}

/* measure: run build() with no memory and derive every offset. */
static int measure(const ddl_model_plugin *p, const ddl_model_config *cfg, layout *l, char *err, size_t err_bytes)
{
    int rc = config_error(p, cfg, err, err_bytes);
    if (rc != DDL_OK)
        return rc;
    ddl_model_build b;
    memset(&b, 0, sizeof b);
    ddl_arena_init(&b.scratch, NULL, 0);
    /* The plugin's state is zeroed scratch memory during the measure pass, so it can keep sizes:
     * from malloc, as a graph's (about 200 KB) is too much for a thread's stack. */
    if (p->self_bytes > DDL__MODEL_SELF_MAX)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "model plugin state of %zu bytes is too large", p->self_bytes);
    void *self_tmp = ddl__alloc(NULL, p->self_bytes);
    if (!self_tmp)
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: no memory for the plugin's state (%zu bytes)", p->name,
                         p->self_bytes);
    memset(self_tmp, 0, p->self_bytes);
    rc = p->build(self_tmp, cfg, &b);
    ddl__free(NULL, self_tmp);
    if (rc != DDL_OK || b.failed)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "%s", b.failed ? b.err : "model build failed");
    if (b.out_c != cfg->n_classes || b.out_h < 1 || b.out_w < 1)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "%s: output shape not declared or wrong", p->name);
    memset(l, 0, sizeof *l);
    l->n_params = b.n_params;
    l->n_buffers = b.n_buffers;
    l->scratch_bytes = ddl_arena_used(&b.scratch);
    l->logits_floats = (size_t)cfg->batch * (size_t)b.out_c * (size_t)b.out_h * (size_t)b.out_w;
    l->self_off = ddl__align_up(sizeof(ddl_model));
    l->params_off = l->self_off + ddl__align_up(p->self_bytes);
    l->buffers_off = l->params_off + ddl__align_up(l->n_params * sizeof(float));
    l->grads_off = l->buffers_off + ddl__align_up(l->n_buffers * sizeof(float));
    l->logits_off = l->grads_off + ddl__align_up((l->n_params + l->n_buffers) * sizeof(float));
    l->scratch_off = l->logits_off + ddl__align_up(l->logits_floats * sizeof(float));
    l->n_layers = b.n_layers;
    l->layers_off = l->scratch_off + ddl__align_up(l->scratch_bytes);
    l->total = l->layers_off + (size_t)l->n_layers * sizeof(ddl_profile_layer) + DDL_ALIGN;
    return DDL_OK;
}

int ddl_model_check(const ddl_model_plugin *p, const ddl_model_config *cfg, char *err, size_t err_bytes)
{
    layout l;
    return measure(p, cfg, &l, err, err_bytes);
}

size_t ddl_model_sizeof(const ddl_model_plugin *p, const ddl_model_config *cfg)
{
    layout l;
    return measure(p, cfg, &l, NULL, 0) == DDL_OK ? l.total : 0;
}

/* Measured: U-Net at batch 32 on a 2-vCPU AMD EPYC VM, whose first step faulted in its 150 MB at
 * about 0.4 s (8% of a 32-step epoch in clear_page): epoch 1 ran at 182 images/s, epoch 2 at 198. */
void ddl__model_touch(ddl_model *m) { memset(m->scratch, 0, m->scratch_bytes); }

int ddl_model_init(void *mem, size_t bytes, const ddl_model_plugin *p, const ddl_model_config *cfg, ddl_model **out,
                   char *err, size_t err_bytes)
{
    layout l;
    if (!out)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_model_init: out is NULL");
    *out = NULL;
    int rc = measure(p, cfg, &l, err, err_bytes);
    if (rc != DDL_OK)
        return rc;
    if (!mem || bytes < l.total)
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: caller memory of %zu bytes, ddl_model_sizeof says %zu",
                         p->name, mem ? bytes : 0, l.total);
    /* l.total has DDL_ALIGN bytes of slack: any address works, the model starts at the next boundary */
    unsigned char *base = (unsigned char *)ddl__align_up((size_t)(uintptr_t)mem);
    memset(base, 0, l.scratch_off);
    ddl_model *m = (ddl_model *)base;
    m->mem = mem;
    m->plugin = p;
    m->cfg = *cfg;
    m->self = base + l.self_off;
    m->params = (float *)(base + l.params_off);
    m->grads = (float *)(base + l.grads_off);
    m->logits = (float *)(base + l.logits_off);
    m->scratch = base + l.scratch_off;
    m->scratch_bytes = l.layers_off - l.scratch_off;
    m->n_params = l.n_params;
    m->buffers = (float *)(base + l.buffers_off);
    m->next = m->grads + l.n_params;
    m->n_buffers = l.n_buffers;
    m->mean = 0.0f;
    m->std = 1.0f;
    m->layers = (ddl_profile_layer *)(base + l.layers_off);
    m->n_layers = l.n_layers;
    m->prof_pass = -1;
    ddl_model_build b;
    memset(&b, 0, sizeof b);
    b.m = m;
    ddl_arena_init(&b.scratch, base + l.scratch_off, l.layers_off - l.scratch_off); /* the layers' table after it */
    rc = p->build(m->self, cfg, &b);
    if (rc != DDL_OK || b.failed || !ddl_arena_ok(&b.scratch) || b.n_params != l.n_params ||
        b.n_buffers != l.n_buffers || b.n_layers != l.n_layers)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "%s: build() described another model the second time",
                         p->name); /* build() must describe the same model twice */
    m->n_tensors = b.n_tensors;
    m->n_buf_tensors = b.n_buf_tensors;
    memcpy(m->next, m->buffers, m->n_buffers * sizeof(float));
    m->out_c = b.out_c;
    m->out_h = b.out_h;
    m->out_w = b.out_w;
    m->cfg.plugin_config = b.kept; /* the caller's may not outlive the build */
    *out = m;
    return DDL_OK;
}

int ddl_model_create(const ddl_model_plugin *p, const ddl_model_config *cfg, const ddl_allocator *alloc,
                     ddl_model **out, char *err, size_t err_bytes)
{
    layout l;
    if (!out)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_model_create: out is NULL");
    *out = NULL;
    int rc = measure(p, cfg, &l, err, err_bytes);
    if (rc != DDL_OK)
        return rc;
    void *mem = ddl__alloc(alloc, l.total);
    if (!mem)
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "%s: cannot allocate %zu bytes for the model", p->name,
                         l.total);
    rc = ddl_model_init(mem, l.total, p, cfg, out, err, err_bytes);
    if (rc != DDL_OK) {
        ddl__free(alloc, mem);
        return rc;
    }
    (*out)->alloc = alloc;
    (*out)->owned = 1;
    return DDL_OK;
}

void ddl_model_destroy(ddl_model *m)
{
    if (m && m->owned)
        ddl__free(m->alloc, m->mem);
}

/* ---- getters ---- */

const char *ddl_model_name(const ddl_model *m) { return m->plugin->name; }
const ddl_model_config *ddl_model_get_config(const ddl_model *m) { return &m->cfg; }
float *ddl_model_params(ddl_model *m) { return m->params; }
float *ddl_model_grads(ddl_model *m) { return m->grads; }
size_t ddl_model_n_params(const ddl_model *m) { return m->n_params; }
int ddl_model_n_tensors(const ddl_model *m) { return m->n_tensors; }

const ddl_param_info *ddl_model_tensor(const ddl_model *m, int i)
{
    return (i >= 0 && i < m->n_tensors) ? &m->tensors[i] : NULL;
}

void ddl_model_output_shape(const ddl_model *m, int *c, int *h, int *w)
{
    *c = m->out_c;
    *h = m->out_h;
    *w = m->out_w;
}

void ddl_model_set_norm(ddl_model *m, float mean, float std)
{
    m->mean = mean;
    m->std = std;
    m->n_norm = 0;
}

int ddl_model_set_norm_channels(ddl_model *m, const float *mean, const float *std)
{
    int c = m->cfg.in_c;
    if (c < 2 || c > DDL_MAX_NORM_CHANNELS || !mean || !std)
        return DDL_EINVAL;
    for (int i = 0; i < c; i++)
        if (!(std[i] > 0.0f) || !isfinite(mean[i]) || !isfinite(std[i]))
            return DDL_EINVAL;
    for (int i = 0; i < c; i++)
        m->norm_mean[i] = mean[i], m->norm_std[i] = std[i];
    m->n_norm = c;
    return DDL_OK;
}

int ddl_model_norm_channels(const ddl_model *m, float *mean, float *std)
{
    for (int i = 0; i < m->cfg.in_c; i++) {
        mean[i] = m->n_norm ? m->norm_mean[i] : m->mean;
        std[i] = m->n_norm ? m->norm_std[i] : m->std;
    }
    return m->n_norm > 0;
}

void ddl_model_norm(const ddl_model *m, float *mean, float *std)
{
    *mean = m->mean;
    *std = m->std;
}

uint32_t ddl_model_crc(const ddl_model *m) { return ddl_crc32(0, m->params, m->n_params * sizeof(float)); }

/* ---- buffers ---- */

float *ddl_model_buffers(ddl_model *m) { return m->buffers; }
size_t ddl_model_n_buffers(const ddl_model *m) { return m->n_buffers; }
int ddl_model_n_buffer_tensors(const ddl_model *m) { return m->n_buf_tensors; }

const ddl_param_info *ddl_model_buffer_tensor(const ddl_model *m, int i)
{
    return (i >= 0 && i < m->n_buf_tensors) ? &m->buf_tensors[i] : NULL;
}

uint32_t ddl_model_buffers_crc(const ddl_model *m)
{
    return m->n_buffers ? ddl_crc32(0, m->buffers, m->n_buffers * sizeof(float)) : 0;
}

int ddl_model_set_buffers(ddl_model *m, const float *v, size_t n)
{
    if (!m || n != m->n_buffers || (n && !v))
        return DDL_EINVAL;
    if (n)
        memcpy(m->buffers, v, n * sizeof(float));
    return DDL_OK;
}

/* ---- weights ---- */

void ddl_model_init_weights(ddl_model *m, uint64_t seed)
{
    ddl_rng rng;
    ddl_rng_seed(&rng, seed);
    for (int i = 0; i < m->n_tensors; i++) {
        const ddl_param_info *t = &m->tensors[i];
        float *w = m->params + t->offset;
        double fan_in = t->fan_in > 0 ? t->fan_in : 1, fan_out = t->fan_out > 0 ? t->fan_out : 1;
        for (size_t j = 0; j < t->count; j++) {
            switch (t->init) {
            case DDL_INIT_HE: /* normal, std sqrt(2 / fan_in): for layers followed by ReLU */
                w[j] = (float)(ddl_rng_normal(&rng) * sqrt(2.0 / fan_in));
                break;
            case DDL_INIT_GLOROT: /* uniform +-sqrt(6 / (fan_in + fan_out)) */
                w[j] = (float)((2.0 * ddl_rng_uniform(&rng) - 1.0) * sqrt(6.0 / (fan_in + fan_out)));
                break;
            case DDL_INIT_TORCH: /* PyTorch's default for Linear and Conv: uniform +-1/sqrt(fan_in) */
                w[j] = (float)((2.0 * ddl_rng_uniform(&rng) - 1.0) / sqrt(fan_in));
                break;
            case DDL_INIT_ONE:
                w[j] = 1.0f;
                break;
            default:
                w[j] = 0.0f;
            }
        }
    }
    memset(m->grads, 0, m->n_params * sizeof(float));
    for (int i = 0; i < m->n_buf_tensors; i++)
        buffer_fill(m->buffers + m->buf_tensors[i].offset, m->buf_tensors[i].count, m->buf_tensors[i].init);
}

/* ---- forward and backward ---- */

const float *ddl_model_forward(ddl_model *m, const float *x, int batch, int training, ddl_rng *rng)
{
    if (batch < (m->sync && training ? 0 : 1) || batch > m->cfg.batch) /* 0: a synchronised part of no samples */
        return NULL;
    if (m->profiling) /* the one test an untimed model pays here */
        ddl__profile_begin(m, 0, batch, training);
    m->plugin->forward(m->self, x, batch, training, rng, m->logits);
    if (training && m->n_buffers && !m->hold_buffers) /* else the trainer combines the parts' first */
        memcpy(m->buffers, m->next, m->n_buffers * sizeof(float));
    return m->logits;
}

/* A version 1 plugin's backward: without the pass (it calls ddl_model_grads_ready instead). */
typedef void (*backward_v1)(void *self, const float *x, int batch, const float *dlogits);

void ddl_model_backward(ddl_model *m, const float *x, int batch, const float *dlogits)
{
    if (batch < (m->sync ? 0 : 1) || batch > m->cfg.batch)
        return;
    m->pass.m = m;
    if (m->profiling)
        ddl__profile_begin(m, 1, batch, 1);
    if (m->plugin->version == 1) /* called through the type it was written with */
        ((backward_v1)(void (*)(void))m->plugin->backward)(m->self, x, batch, dlogits);
    else
        m->plugin->backward(m->self, x, batch, dlogits, &m->pass);
    m->pass.m = NULL;
}

void ddl_backward_ready(ddl_backward *pass, const float *from)
{
    ddl_model *m = pass ? pass->m : NULL;
    if (m && m->on_ready && from >= m->grads && from < m->grads + m->n_params)
        m->on_ready(m->on_ready_ud, (size_t)(from - m->grads));
}

void ddl_model_grads_ready(void *self, const float *from)
{
    /* the plugin's state sits at a fixed place after the model (layout() in this file): the
     * model is found from it, and is the one whose self this is */
    ddl_model *m = model_of(self);
    if (m)
        ddl_backward_ready(&m->pass, from);
}

static void zero_range(void *ctx, size_t lo, size_t hi) { memset((float *)ctx + lo, 0, (hi - lo) * sizeof(float)); }

void ddl_model_zero_grads(ddl_model *m) { ddl__parallel_range(m->n_params, 16384, zero_range, m->grads); }

size_t ddl_model_describe(const ddl_model *m, char *buf, size_t bytes)
{
    if (buf && bytes)
        buf[0] = '\0';
    return m && m->plugin->describe ? m->plugin->describe(m->self, buf, bytes) : 0;
}
