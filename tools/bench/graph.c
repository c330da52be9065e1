/* graph.c - make bench's layer graph against the hand-written plugins: LeNet (batch 64, 1x28x28)
 * and U-Net (batch 32, 1x64x64, 11 classes, depth 3, width 8) built both ways with the same
 * weights, a forward and backward pass each in turn, ROUNDS rounds of REPS passes alternated;
 * the median images/s of each and their ratio (issue 31: the graph >= 0.95x the plugin).
 *   build/bin/bench-graph [ROUNDS] [REPS] */
#include "ddl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* rate: images/s of reps forward and backward passes of m on x. */
static double rate(ddl_model *m, const float *x, const float *dy, int batch, int reps)
{
    double t0 = bench_now();
    for (int i = 0; i < reps; i++) {
        ddl_model_forward(m, x, batch, 1, NULL);
        ddl_model_backward(m, x, batch, dy);
    }
    return (double)batch * reps / (bench_now() - t0);
}

static int compare(const char *name, const ddl_model_plugin *plugin, const char *preset, ddl_model_config mc,
                   int rounds, int reps)
{
    char err[DDL_ERR_BYTES];
    ddl_graph *g = NULL;
    ddl_model *a = NULL, *b = NULL;
    ddl_model_config gc = mc;
    if (ddl_graph_create(NULL, &g) != DDL_OK || ddl_graph_preset(g, preset, err, sizeof err) != DDL_OK)
        return fprintf(stderr, "bench-graph: %s\n", err), 1;
    gc.plugin_config = g;
    if (ddl_model_create(plugin, &mc, NULL, &a, err, sizeof err) != DDL_OK ||
        ddl_model_create(ddl_model_graph(), &gc, NULL, &b, err, sizeof err) != DDL_OK)
        return fprintf(stderr, "bench-graph: %s\n", err), 1;
    ddl_model_init_weights(a, 1);
    ddl_model_init_weights(b, 1);
    int c, h, w;
    ddl_model_output_shape(a, &c, &h, &w);
    size_t nx = (size_t)mc.batch * mc.in_c * mc.in_h * mc.in_w, ny = (size_t)mc.batch * c * h * w;
    float *x = malloc(nx * sizeof *x), *dy = malloc(ny * sizeof *dy);
    ddl_rng r;
    ddl_rng_seed(&r, 2);
    for (size_t i = 0; i < nx; i++)
        x[i] = ddl_rng_normal(&r);
    for (size_t i = 0; i < ny; i++)
        dy[i] = ddl_rng_normal(&r) * 1e-3f;
    double *pa = malloc((size_t)rounds * sizeof *pa), *pb = malloc((size_t)rounds * sizeof *pb);
    rate(a, x, dy, mc.batch, 2); /* warm-up */
    rate(b, x, dy, mc.batch, 2);
    for (int i = 0; i < rounds; i++) {
        pa[i] = rate(a, x, dy, mc.batch, reps);
        pb[i] = rate(b, x, dy, mc.batch, reps);
    }
    qsort(pa, (size_t)rounds, sizeof *pa, cmp);
    qsort(pb, (size_t)rounds, sizeof *pb, cmp);
    double ma = pa[rounds / 2], mb = pb[rounds / 2];
    printf("graph_%s: plugin_images_per_sec=%.0f graph_images_per_sec=%.0f ratio=%.3f\n", name, ma, mb, mb / ma);
    free(pa), free(pb), free(x), free(dy);
    ddl_model_destroy(a);
    ddl_model_destroy(b);
    ddl_graph_destroy(g, NULL);
    return 0;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 7, reps = argc > 2 ? atoi(argv[2]) : 40;
    if (rounds < 1 || reps < 1)
        return fprintf(stderr, "usage: bench-graph [ROUNDS] [REPS]\n"), 2;
    ddl_model_config lc = {.batch = 64, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10};
    static const ddl_unet_config unet_3_8 = {.depth = 3, .width = 8};
    ddl_model_config uc = {.batch = 32, .in_c = 1, .in_h = 64, .in_w = 64, .n_classes = 11, .plugin_config = &unet_3_8};
    return compare("lenet", ddl_model_lenet(), "lenet", lc, rounds, reps) ||
           compare("unet", ddl_model_unet(), "unet", uc, rounds, reps / 8 + 1);
}
