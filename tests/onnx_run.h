/* onnx_run.h - `test_infer --onnx-cases LIST`: ddl's answer to many ONNX models in one process,
 * for tests/onnx/node_tests.py (ONNX's backend node tests, rewritten into the form ddl imports).
 * LIST has one case a line: "MODEL.onnx INPUT.f32 OUTPUT.f32", INPUT being (N, C, H, W) float32
 * as the model takes it (its input normalisation, if any, still to do). For each case one line
 * on standard output:
 *   "ok C H W SOFTMAX"   the import, the model build and the forward pass in evaluation mode
 *                        ran; OUTPUT.f32 holds (N, C, H, W); SOFTMAX is what the import dropped
 *                        at the output (0 none, 1 Softmax, 2 LogSoftmax over the channels)
 *   "refused MESSAGE"    ddl refused it (import or build), its message on the line
 * The input goes in as ddl's predictor puts it: x * scale + shift per channel, the input
 * normalisation the importer folded out of the graph (ddl_model_forward takes inputs already
 * normalised: the model's normalisation, which ddl_onnx_import_load sets, is the predictor's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *onnx_run_read(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    float *p = NULL;
    long bytes = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (bytes = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (p = malloc((size_t)bytes + 4)) && fread(p, 1, (size_t)bytes, f) != (size_t)bytes) {
        free(p);
        p = NULL;
    }
    if (f)
        fclose(f);
    *n = p ? (size_t)bytes / 4 : 0;
    return p;
}

/* onnx_run_one: one case; its line on standard output. */
static void onnx_run_one(const char *model, const char *input, const char *output)
{
    char err[DDL_ERR_BYTES];
    ddl_graph *g = NULL;
    ddl_onnx_import im;
    ddl_model *m = NULL;
    memset(&im, 0, sizeof im);
    size_t n_in = 0;
    float *x = NULL;
    int rc = ddl_graph_create(NULL, &g);
    if (rc == DDL_OK)
        rc = ddl_graph_import_onnx(g, model, NULL, &im, err, sizeof err);
    size_t chw = (size_t)im.in_c * im.in_h * im.in_w;
    if (rc == DDL_OK && (!(x = onnx_run_read(input, &n_in)) || !chw || n_in % chw || !n_in))
        rc = DDL_EIO, snprintf(err, sizeof err, "harness: %.120s: not (N, %d, %d, %d) floats", input, im.in_c, im.in_h,
                               im.in_w);
    int batch = chw ? (int)(n_in / chw) : 0, c = 0, h = 0, w = 0;
    ddl_model_config mc = {.batch = batch, .in_c = im.in_c, .in_h = im.in_h, .in_w = im.in_w, .n_classes = 2,
                           .plugin_config = g};
    if (rc == DDL_OK && ddl_graph_output_shape(g, &mc, &c, &h, &w) == DDL_OK)
        mc.n_classes = c;
    if (rc == DDL_OK)
        rc = ddl_model_create(ddl_model_graph(), &mc, NULL, &m, err, sizeof err);
    if (rc == DDL_OK) /* the weights and running statistics; the input scaling is done below, by hand */
        rc = ddl_onnx_import_load(&im, m, err, sizeof err);
    if (rc != DDL_OK) {
        for (char *p = err; *p; p++)
            *p = *p == '\n' ? ' ' : *p;
        printf("refused %s\n", err);
    } else {
        size_t hw = (size_t)im.in_h * im.in_w;
        for (size_t i = 0; i < n_in; i++) { /* the normalisation ddl folded out of the graph */
            size_t ch = i / hw % (size_t)im.in_c;
            x[i] = im.n_norm ? x[i] * im.norm_scale[ch] + im.norm_shift[ch] : x[i] * im.scale + im.shift;
        }
        const float *y = ddl_model_forward(m, x, batch, 0, NULL);
        size_t n_out = (size_t)batch * c * h * w;
        FILE *f = fopen(output, "wb");
        int ok = y && f && fwrite(y, 4, n_out, f) == n_out;
        if (f && fclose(f) != 0)
            ok = 0;
        if (ok)
            printf("ok %d %d %d %d\n", c, h, w, im.output_softmax);
        else
            printf("refused harness: cannot run or write %s\n", output);
    }
    fflush(stdout);
    ddl_model_destroy(m);
    ddl_onnx_import_free(&im, NULL);
    ddl_graph_destroy(g, NULL);
    free(x);
}

static int onnx_run_cases(const char *list)
{
    FILE *f = fopen(list, "r");
    char line[3 * 1024];
    if (!f) {
        perror(list);
        return 1;
    }
    while (fgets(line, sizeof line, f)) {
        char a[1024], b[1024], c[1024];
        if (sscanf(line, "%1023s %1023s %1023s", a, b, c) == 3)
            onnx_run_one(a, b, c);
    }
    fclose(f);
    return 0;
}
