/* predictor.c - a model loaded from a checkpoint for inference only. ddl_predictor_open builds
 * the model, takes the weights and normalisation out of the checkpoint and closes it again (the
 * optimizer state is read only to check the file); ddl_predictor_run normalises raw pixels,
 * runs forward passes of at most `batch` images and turns logits into probabilities and
 * classes. One allocation at open; nothing allocates per call. An image's outputs are the same
 * bits whatever the batch it is run in and its place there (the products in their batch-invariant
 * mode, gemm.c), so a server may batch requests together without changing any answer. */
#include "impl.h"

#include <math.h>
#include <string.h>

#define DEFAULT_BATCH 64

/* ---- open and close ---- */

/* names_bytes: the bytes of the class names and their pointers (0: none). */
static size_t names_bytes(const char *const *names, int n)
{
    size_t b = 0;
    for (int i = 0; names && i < n; i++)
        b += sizeof(char *) + strlen(names[i]) + 1;
    return b;
}

/* copy_names: the checkpoint's class names into the predictor's block at mem. */
static void copy_names(ddl_predictor *p, unsigned char *mem, const char *const *names, int n)
{
    if (!names)
        return;
    const char **ptrs = (const char **)(void *)mem;
    char *at = (char *)(mem + (size_t)n * sizeof(char *));
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]) + 1;
        memcpy(at, names[i], len);
        ptrs[i] = at;
        at += len;
    }
    p->class_names = ptrs;
}

/* weights_finite: DDL_OK if every weight is a number; else DDL_EINVAL naming the first that is not (a run
 * that diverged before it was saved: its predictions would be NaN, or one class for everything). */
static int weights_finite(const ddl_model *m, char *why, size_t why_bytes)
{
    const float *w = ddl_model_params((ddl_model *)(uintptr_t)m);
    for (int t = 0; t < ddl_model_n_tensors(m); t++) {
        const ddl_param_info *ti = ddl_model_tensor(m, t);
        for (size_t k = 0; k < ti->count; k++)
            if (!isfinite(w[ti->offset + k]))
                return ddl__errf(why, why_bytes, DDL_EINVAL, "weight %s[%zu] is %g: the run diverged before it was "
                                 "saved; nothing to predict with", ti->name, k, (double)w[ti->offset + k]);
    }
    return DDL_OK;
}

/* new_block: one allocation holding the predictor, its class names (nb bytes, copied by the
 * caller), its input buffer and the model of plugin built for mc (its memory only: the caller
 * fills the weights). DDL_OK with *out, or the reason in why; nothing is left allocated. */
static int new_block(const ddl_model_plugin *plugin, const ddl_model_config *mc, size_t nb, const ddl_allocator *alloc,
                     ddl_predictor **out, char *why, size_t why_bytes)
{
    size_t model_bytes = ddl_model_sizeof(plugin, mc);
    if (!model_bytes) {
        char inner[DDL_ERR_BYTES];
        ddl_model_check(plugin, mc, inner, sizeof inner);
        return ddl__errf(why, why_bytes, DDL_EINVAL, "the model it holds cannot be built: %s", inner);
    }
    size_t x_bytes = (size_t)mc->batch * (size_t)mc->in_c * (size_t)mc->in_h * (size_t)mc->in_w * sizeof(float);
    size_t head = ddl__align_up(sizeof(ddl_predictor)) + ddl__align_up(nb);
    size_t total = head + ddl__align_up(x_bytes) + model_bytes;
    unsigned char *mem = (unsigned char *)ddl__alloc(alloc, total);
    if (!mem)
        return ddl__errf(why, why_bytes, DDL_ENOMEM, "cannot allocate %zu bytes for the model", total);
    ddl_predictor *p = (ddl_predictor *)mem;
    memset(p, 0, sizeof *p);
    p->mem = mem;
    p->alloc = alloc;
    p->x = (float *)(mem + head);
    int rc = ddl_model_init(mem + head + ddl__align_up(x_bytes), model_bytes, plugin, mc, &p->m, why, why_bytes);
    if (rc != DDL_OK) {
        ddl__free(alloc, mem);
        return rc;
    }
    *out = p;
    return DDL_OK;
}

/* load_model: the model for the checkpoint ck, built in one block with the predictor (graph, if
 * any, is needed only while it is built; else the plugin's settings the checkpoint keeps). */
static int load_model(ddl_predictor **out, const char *path, const ddl_checkpoint *ck, const ddl_model_plugin *plugin,
                      const ddl_graph *graph, int batch, const ddl_allocator *alloc, char *err, size_t err_bytes)
{
    const ddl_checkpoint_info *in = ddl_checkpoint_get_info(ck);
    ddl_model_config mc = in->model_cfg;
    mc.batch = batch;
    mc.plugin_config = graph ? (const void *)graph : ddl_checkpoint_plugin_config(ck);
    const char *const *names = ddl_checkpoint_class_names(ck);
    ddl_predictor *p = NULL;
    char why[DDL_ERR_BYTES];
    int rc = new_block(plugin, &mc, names_bytes(names, mc.n_classes), alloc, &p, why, sizeof why);
    if (rc != DDL_OK)
        return ddl__errf(err, err_bytes, rc, "%s: %s", path, why);
    p->info = *in;
    copy_names(p, (unsigned char *)p->mem + ddl__align_up(sizeof(ddl_predictor)), names, mc.n_classes);
    if ((rc = ddl_checkpoint_check_model(ck, p->m, why, sizeof why)) == DDL_OK) {
        memcpy(ddl_model_params(p->m), ddl_checkpoint_params(ck), in->n_params * sizeof(float));
        rc = ddl_checkpoint_load_buffers(ck, p->m, why, sizeof why); /* BatchNorm's running statistics */
        ddl_model_set_norm(p->m, in->mean, in->std);
        if (in->n_norm)
            ddl_model_set_norm_channels(p->m, in->norm_mean, in->norm_std);
        if (rc == DDL_OK)
            rc = weights_finite(p->m, why, sizeof why);
    }
    if (rc == DDL_OK) {
        *out = p;
        return DDL_OK;
    }
    ddl__free(alloc, p->mem);
    return ddl__errf(err, err_bytes, rc, "%s: %s", path, why);
}

/* is_onnx: path names an ONNX file (by its extension: protobuf has no magic number). */
static int is_onnx(const char *path)
{
    size_t n = strlen(path);
    return n > 5 && strcmp(path + n - 5, ".onnx") == 0;
}

/* build_onnx: the model of an imported graph, finished by ddl_onnx_import_load (its weights, and
 * the input scaling it starts with as the normalisation, one or one per channel). The model runs
 * as the file says: raw pixels when it scales none. */
static int build_onnx(ddl_predictor **out, const char *path, ddl_graph *g, const ddl_onnx_import *im, int batch,
                      const ddl_allocator *alloc, char *err, size_t err_bytes)
{
    ddl_model_config mc = {.batch = batch, .in_c = im->in_c, .in_h = im->in_h, .in_w = im->in_w, .n_classes = 2,
                           .plugin_config = g};
    int c, h, w;
    if (ddl_graph_output_shape(g, &mc, &c, &h, &w) != DDL_OK || c < 2 || c > DDL_MAX_CLASSES || !(im->scale > 0))
        return ddl__errf(err, err_bytes, DDL_EINVAL, "%s: ddl cannot build this model (its output has %d channels; "
                         "2 to %d classes, a positive input scale)", path, c, DDL_MAX_CLASSES);
    mc.n_classes = c;
    ddl_predictor *p = NULL;
    char why[DDL_ERR_BYTES];
    int rc = new_block(ddl_model_graph(), &mc, 0, alloc, &p, why, sizeof why);
    if (rc != DDL_OK)
        return ddl__errf(err, err_bytes, rc, "%s: %s", path, why);
    rc = ddl_onnx_import_load(im, p->m, why, sizeof why);
    if (rc == DDL_OK)
        rc = weights_finite(p->m, why, sizeof why);
    if (rc != DDL_OK) {
        ddl__free(alloc, p->mem);
        return ddl__errf(err, err_bytes, rc, "%s: %s", path, why);
    }
    if (im->n_norm) { /* per channel: the importer kept only what ddl's normalisation does */
        p->info.n_norm = im->n_norm;
        ddl_model_norm_channels(p->m, p->info.norm_mean, p->info.norm_std);
    }
    snprintf(p->info.model, sizeof p->info.model, "graph");
    p->info.model_cfg = mc;
    p->info.model_cfg.plugin_config = NULL;
    p->info.n_params = im->n_params;
    p->info.n_tensors = ddl_model_n_tensors(p->m);
    ddl_model_norm(p->m, &p->info.mean, &p->info.std);
    *out = p;
    return DDL_OK;
}

static int open_onnx(const char *path, int batch, const ddl_allocator *alloc, ddl_predictor **out, char *err,
                     size_t err_bytes)
{
    ddl_graph *g = NULL;
    ddl_onnx_import im;
    memset(&im, 0, sizeof im);
    int rc = ddl_graph_create(alloc, &g);
    if (rc == DDL_OK)
        rc = ddl_graph_import_onnx(g, path, alloc, &im, err, err_bytes);
    if (rc == DDL_OK)
        rc = build_onnx(out, path, g, &im, batch, alloc, err, err_bytes);
    ddl_onnx_import_free(&im, alloc);
    ddl_graph_destroy(g, alloc);
    return rc;
}

int ddl_predictor_open(const char *path, const ddl_predict_config *cfg, const ddl_allocator *alloc,
                       ddl_predictor **out, char *err, size_t err_bytes)
{
    if (!out)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_predictor_open: out is NULL");
    *out = NULL;
    if (!path)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_predictor_open: no path given");
    int batch = cfg && cfg->batch ? cfg->batch : DEFAULT_BATCH;
    if (batch < 1)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_predictor_open: batch %d, expected 1 or more", batch);
    if (is_onnx(path)) /* a model another tool exported, run as it is */
        return open_onnx(path, batch, alloc, out, err, err_bytes);
    ddl_checkpoint *ck = NULL;
    int rc = ddl_checkpoint_open(path, alloc, &ck, err, err_bytes);
    if (rc != DDL_OK)
        return rc;
    const ddl_checkpoint_info *in = ddl_checkpoint_get_info(ck);
    const ddl_model_plugin *plugin = cfg && cfg->plugin ? cfg->plugin : ddl_model_find(in->model);
    const char *arch = ddl_checkpoint_arch(ck);
    ddl_graph *graph = NULL;
    if (!plugin && arch) /* a plugin this program lacks, which described itself as a graph */
        plugin = ddl_model_graph();
    if (!plugin)
        rc = ddl__errf(err, err_bytes, DDL_EINVAL, "%s: a checkpoint of model \"%.47s\", which this ddl does not "
                       "have (built in: lenet, unet, graph) and which carries no layer graph", path, in->model);
    else if (plugin->name && strcmp(plugin->name, in->model) != 0 && plugin != ddl_model_graph())
        rc = ddl__errf(err, err_bytes, DDL_EINVAL, "%s: a checkpoint of model %.47s, expected %s", path, in->model,
                       plugin->name);
    else if (plugin == ddl_model_graph() && !arch)
        rc = ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: a checkpoint of a layer graph without the graph", path);
    else if (plugin == ddl_model_graph() && (rc = ddl_graph_create(alloc, &graph)) != DDL_OK)
        rc = ddl__errf(err, err_bytes, rc, "%s: cannot allocate the layer graph", path);
    else if (graph && (rc = ddl_graph_parse(graph, arch, err, err_bytes)) != DDL_OK)
        rc = ddl__errf(err, err_bytes, DDL_ECORRUPT, "%s: the layer graph it carries does not read: %.160s", path,
                       err);
    else
        rc = load_model(out, path, ck, plugin, graph, batch, alloc, err, err_bytes);
    ddl_graph_destroy(graph, alloc);
    ddl_checkpoint_close(ck);
    return rc;
}

void ddl_predictor_close(ddl_predictor *p)
{
    if (p)
        ddl__free(p->alloc, p->mem);
}

const ddl_model *ddl_predictor_model(const ddl_predictor *p) { return p->m; }
const ddl_checkpoint_info *ddl_predictor_info(const ddl_predictor *p) { return &p->info; }
const char *ddl_predictor_error(const ddl_predictor *p) { return p->err; }
const char *const *ddl_predictor_class_names(const ddl_predictor *p) { return p->class_names; }

/* ---- predict ---- */

/* outputs: probabilities (softmax over the C classes) and the class with the largest logit at
 * each of the S positions of n samples; logits (n, C, S). */
static void outputs(int n, int C, size_t S, const float *logits, float *probs, uint16_t *classes)
{
    for (int i = 0; i < n; i++) {
        const float *l = logits + (size_t)i * C * S;
        for (size_t s = 0; s < S; s++) {
            int best = 0;
            for (int c = 1; c < C; c++)
                if (l[c * S + s] > l[best * S + s])
                    best = c;
            if (classes)
                classes[(size_t)i * S + s] = (uint16_t)best;
            if (!probs)
                continue;
            float *pr = probs + (size_t)i * C * S, sum = 0.0f, top = l[best * S + s];
            for (int c = 0; c < C; c++)
                sum += pr[c * S + s] = expf(l[c * S + s] - top);
            for (int c = 0; c < C; c++)
                pr[c * S + s] /= sum;
        }
    }
}

/* run: ddl_predictor_run on bytes (images) or floats (fimages, on the scale of a byte / 255). */
static int run(ddl_predictor *p, const uint8_t *images, const float *fimages, int n, int c, int h, int w,
               float *logits, float *probs, uint16_t *classes)
{
    const ddl_model_config *mc = ddl_model_get_config(p->m);
    if (n < 0 || (n > 0 && !images && !fimages))
        return ddl__errf(p->err, sizeof p->err, DDL_EINVAL, "predict: %d images%s", n,
                         images || fimages ? "" : ", at NULL");
    if (c != mc->in_c || h != mc->in_h || w != mc->in_w)
        return ddl__errf(p->err, sizeof p->err, DDL_EINVAL, "predict: images of %dx%dx%d, model %s takes %dx%dx%d",
                         c, h, w, ddl_model_name(p->m), mc->in_c, mc->in_h, mc->in_w);
    int C, oh, ow;
    ddl_model_output_shape(p->m, &C, &oh, &ow);
    size_t in_sz = (size_t)c * h * w, S = (size_t)oh * ow, out_sz = (size_t)C * S;
    float scale[DDL_MAX_NORM_CHANNELS], shift[DDL_MAX_NORM_CHANNELS]; /* as the trainer normalises */
    int per_channel = p->m->n_norm > 0;
    for (int k = 0; k < (per_channel ? c : 1); k++) {
        ddl__norm_affine(p->m, k, &scale[k], &shift[k]);
        scale[k] *= images ? 1.0f : 255.0f; /* floats are bytes / 255 already */
    }
    size_t plane = (size_t)h * w;
    for (int first = 0; first < n; first += mc->batch) {
        int b = n - first < mc->batch ? n - first : mc->batch;
        size_t at = (size_t)first * in_sz;
        for (size_t q = 0, k = 0; q < (size_t)b * c; q++) { /* plane by plane: no division per pixel */
            size_t ch = per_channel ? q % (size_t)c : 0;
            for (size_t e = k + plane; k < e; k++)
                p->x[k] = (images ? (float)images[at + k] : fimages[at + k]) * scale[ch] + shift[ch];
        }
        int was = ddl__set_invariant(1); /* an image's bits whatever the batch it is in */
        const float *l = ddl_model_forward(p->m, p->x, b, 0, NULL);
        ddl__set_invariant(was);
        if (logits)
            memcpy(logits + (size_t)first * out_sz, l, (size_t)b * out_sz * sizeof(float));
        outputs(b, C, S, l, probs ? probs + (size_t)first * out_sz : NULL,
                classes ? classes + (size_t)first * S : NULL);
    }
    p->err[0] = '\0';
    return DDL_OK;
}

int ddl_predictor_run(ddl_predictor *p, const uint8_t *images, int n, int c, int h, int w, float *logits,
                      float *probs, uint16_t *classes)
{
    return run(p, images, NULL, n, c, h, w, logits, probs, classes);
}

int ddl_predictor_run_float(ddl_predictor *p, const float *images, int n, int c, int h, int w, float *logits,
                            float *probs, uint16_t *classes)
{
    return run(p, NULL, images, n, c, h, w, logits, probs, classes);
}
