/* test_conv_bf16.c - the layers of --precision bf16 (the calling thread's precision, as the
 * trainer sets it): convolution (a 3x3 geometry float32 runs by its direct kernel, a strided
 * 5x5 one, a grouped one and one of more weights than a packed block and slice), transposed
 * convolution (k 2 stride 2 on rows of 7: on rows of 8s, and with AVX-512, it stays float32's
 * direct kernel, test_deconv2x2) and dense, forward and both gradients. Each bf16 result must
 * be float32's on the inputs rounded to bfloat16 (x, w and dy: the same products summed in
 * another order, so within 1e-5 of the result's scale), and clearly not float32's on the inputs
 * as they are (more than 1e-4 away): the inputs were rounded, the sums were not. Skipped where
 * the CPU has no bfloat16 path. */
/* ddl-test: beside (computes, bounds no time) */
#include "ddl.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

int ddl__bf16_path(void);
int ddl__set_precision(int precision);
uint16_t ddl__bf16_round(float x);
float ddl__bf16_float(uint16_t h);

enum { CONV, DECONV, DENSE };

typedef struct layer {
    int kind;
    ddl_conv2d g;
    int batch, in, out; /* dense */
} layer;

static size_t n_x(const layer *l)
{
    return l->kind == DENSE ? (size_t)l->batch * l->in : (size_t)l->g.batch * l->g.in_c * l->g.in_h * l->g.in_w;
}
static size_t n_w(const layer *l)
{
    return l->kind == DENSE ? (size_t)l->in * l->out : (size_t)l->g.in_c * l->g.out_c * l->g.k_h * l->g.k_w;
}
static size_t n_y(const layer *l)
{
    if (l->kind == DENSE)
        return (size_t)l->batch * l->out;
    if (l->kind == CONV)
        return (size_t)l->g.batch * l->g.out_c * ddl_conv2d_out_h(&l->g) * ddl_conv2d_out_w(&l->g);
    return (size_t)l->g.batch * l->g.out_c * ddl_deconv2d_out_h(&l->g) * ddl_deconv2d_out_w(&l->g);
}

/* run: y, dx, dw (zeroed first) of layer l on x, w, dy, in the given precision. */
static void run(const layer *l, int precision, const float *x, const float *w, const float *dy, float *y, float *dx,
                float *dw)
{
    int was = ddl__set_precision(precision);
    memset(dw, 0, n_w(l) * sizeof *dw);
    if (l->kind == DENSE) {
        ddl_dense_forward(l->batch, l->in, l->out, x, w, NULL, y);
        ddl_dense_backward(l->batch, l->in, l->out, x, w, dy, dx, dw, NULL);
    } else {
        size_t ws_n = l->kind == CONV ? ddl_conv2d_workspace(&l->g) : ddl_deconv2d_workspace(&l->g);
        float *ws = malloc((ws_n + 1) * sizeof *ws);
        if (l->kind == CONV) {
            ddl_conv2d_forward(&l->g, x, w, NULL, y, ws);
            ddl_conv2d_backward(&l->g, x, w, dy, dx, dw, NULL, ws);
        } else {
            ddl_deconv2d_forward(&l->g, x, w, NULL, y, ws);
            ddl_deconv2d_backward(&l->g, x, w, dy, dx, dw, NULL, ws);
        }
        free(ws);
    }
    ddl__set_precision(was);
}

/* gap: the largest difference of a and b over the largest |b|. */
static double gap(const float *a, const float *b, size_t n)
{
    double d = 0.0, s = 1e-30;
    for (size_t i = 0; i < n; i++) {
        d = fabs((double)a[i] - b[i]) > d ? fabs((double)a[i] - b[i]) : d;
        s = fabs((double)b[i]) > s ? fabs((double)b[i]) : s;
    }
    return d / s;
}

static float *rounded(const float *x, size_t n)
{
    float *r = malloc(n * sizeof *r);
    for (size_t i = 0; i < n; i++)
        r[i] = ddl__bf16_float(ddl__bf16_round(x[i]));
    return r;
}

static void one(const char *name, const layer *l)
{
    size_t nx = n_x(l), nw = n_w(l), ny = n_y(l);
    float *x = malloc(nx * sizeof *x), *w = malloc(nw * sizeof *w), *dy = malloc(ny * sizeof *dy);
    ddl_rng r;
    ddl_rng_seed(&r, 5);
    for (size_t i = 0; i < nx; i++)
        x[i] = 2.0f * ddl_rng_uniform(&r) - 1.0f;
    for (size_t i = 0; i < nw; i++)
        w[i] = 2.0f * ddl_rng_uniform(&r) - 1.0f;
    for (size_t i = 0; i < ny; i++)
        dy[i] = 2.0f * ddl_rng_uniform(&r) - 1.0f;
    float *xr = rounded(x, nx), *wr = rounded(w, nw), *dyr = rounded(dy, ny);
    float *out[3][3]; /* [bf16, fp32 on rounded, fp32][y, dx, dw] */
    for (int v = 0; v < 3; v++) {
        out[v][0] = malloc(ny * sizeof(float));
        out[v][1] = malloc(nx * sizeof(float));
        out[v][2] = malloc(nw * sizeof(float));
    }
    run(l, DDL_PRECISION_BF16, x, w, dy, out[0][0], out[0][1], out[0][2]);
    run(l, DDL_PRECISION_FP32, xr, wr, dyr, out[1][0], out[1][1], out[1][2]);
    run(l, DDL_PRECISION_FP32, x, w, dy, out[2][0], out[2][1], out[2][2]);
    size_t sizes[3] = {ny, nx, nw};
    static const char *what[3] = {"y", "dx", "dw"};
    for (int o = 0; o < 3; o++) {
        double near = gap(out[0][o], out[1][o], sizes[o]), far = gap(out[0][o], out[2][o], sizes[o]);
        printf("%s %s: bf16 against float32 on rounded inputs %.2g, on the inputs %.2g\n", name, what[o], near, far);
        CHECK(near < 1e-5);
        CHECK(far > 1e-4);
    }
    for (int v = 0; v < 3; v++)
        for (int o = 0; o < 3; o++)
            free(out[v][o]);
    free(x), free(w), free(dy), free(xr), free(wr), free(dyr);
}

int main(void)
{
    if (!ddl__bf16_path()) {
        printf("skipped: no AVX512-BF16 or AMX on this CPU\n");
        return TEST_END();
    }
    layer c3 = {CONV, {.batch = 3, .in_c = 5, .in_h = 16, .in_w = 16, .out_c = 7, .k_h = 3, .k_w = 3, .stride = 1, .pad = 1}, 0, 0, 0};
    layer c5 = {CONV, {.batch = 2, .in_c = 4, .in_h = 13, .in_w = 11, .out_c = 9, .k_h = 5, .k_w = 5, .stride = 2, .pad = 2}, 0, 0, 0};
    /* by im2col (stride 2): two groups, each its own block of the weights packed once a pass
     * (conv.c); and 140 rows of weights (a block of 128 and more) over 360 of depth (a slice of
     * 256 and more) */
    layer cg = {CONV, {.batch = 2, .in_c = 8, .in_h = 9, .in_w = 9, .out_c = 6, .k_h = 3, .k_w = 3, .stride = 2, .pad = 1, .groups = 2}, 0, 0, 0};
    layer cw = {CONV, {.batch = 2, .in_c = 40, .in_h = 6, .in_w = 6, .out_c = 140, .k_h = 3, .k_w = 3, .stride = 2, .pad = 1}, 0, 0, 0};
    layer d2 = {DECONV, {.batch = 3, .in_c = 6, .in_h = 5, .in_w = 7, .out_c = 4, .k_h = 2, .k_w = 2, .stride = 2}, 0, 0, 0};
    layer fc = {DENSE, {0}, 5, 37, 11};
    one("conv 3x3", &c3);
    one("conv 5x5 stride 2", &c5);
    one("conv 3x3 stride 2, 2 groups", &cg);
    one("conv 3x3 stride 2, 140 x 360 weights", &cw);
    one("deconv 2x2 stride 2", &d2);
    one("dense", &fc);
    return TEST_END();
}
