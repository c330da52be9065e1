/* test_profile.c - profiles (ddl_train_config.profile, src/core/profile.c, src/train/profile.c):
 * a small layer graph trained with a profile: the peak is measured, every layer is timed in
 * every step forward and backward with the step's samples, the layer times add up to no more
 * than the compute time, the split adds up to the step, the FLOPs of a conv and a dense layer
 * are their geometry's (a first conv's backward counted once), evaluation passes are not
 * counted, and nothing allocates per step; the peak is measured again at the epoch's statistics
 * (the best kept); the weights are the same bits with and without it;
 * LeNet's and U-Net's plugins declare and time their layers through the public calls; the
 * table names every layer; a profile of another model is refused.
 * ddl-test: beside (no time bound: its checks are sums and bits) */
#include "ddl.h"
#include "check.h"
#include "count_alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 96, BATCH = 16, STEPS = 4, C = 3, H = 12, W = 12, K = 5 };
static uint8_t img[N * C * H * W], lab[N];

static void make_data(ddl_dataset *d)
{
    ddl_rng r;
    ddl_rng_seed(&r, 11);
    for (int i = 0; i < N; i++) {
        lab[i] = (uint8_t)ddl_rng_below(&r, K);
        for (int p = 0; p < C * H * W; p++)
            img[i * C * H * W + p] = (uint8_t)ddl_rng_below(&r, 256);
    }
    memset(d, 0, sizeof *d);
    d->n = N;
    d->c = C, d->h = H, d->w = W;
    d->th = d->tw = 1;
    d->n_classes = K;
    d->images = img;
    d->targets = lab;
}

/* the graph: conv c1 (3 -> 8, 3x3 pad 1), relu, maxpool 2, conv c2 (8 -> 16, 3x3 pad 1), relu,
 * flatten, dense fc (16 * 6 * 6 -> K) */
static ddl_graph *make_graph(void)
{
    ddl_graph *g = NULL;
    if (ddl_graph_create(NULL, &g) != DDL_OK)
        return NULL;
    int x = ddl_graph_input(g, C, H, W);
    x = ddl_graph_conv2d(g, x, "c1", 8, 3, 1, 1, 1);
    x = ddl_graph_relu(g, x);
    x = ddl_graph_maxpool(g, x, 2, 2);
    x = ddl_graph_conv2d(g, x, "c2", 16, 3, 1, 1, 1);
    x = ddl_graph_relu(g, x);
    x = ddl_graph_flatten(g, x);
    x = ddl_graph_dense(g, x, "fc", DDL_CLASSES);
    ddl_graph_output(g, x, DDL_HEAD_XENT);
    return g;
}

static const ddl_profile_layer *find(const ddl_profile *p, const char *name)
{
    for (int i = 0; i < p->n_layers; i++)
        if (strcmp(p->layers[i].name, name) == 0)
            return &p->layers[i];
    return NULL;
}

/* train: STEPS steps of the graph with profile p (NULL: none), an evaluation between the first
 * two; the weights' CRC (0 on failure); *allocs the allocations the steps made. */
static uint32_t train(const ddl_graph *g, ddl_profile *p, long *allocs)
{
    ddl_set_threads(1);
    ddl_dataset d;
    make_data(&d);
    counter cnt = {0, 0};
    ddl_allocator al = {count_alloc, count_free, &cnt};
    ddl_model_config mc = {.batch = BATCH, .in_c = C, .in_h = H, .in_w = W, .n_classes = K, .plugin_config = g};
    ddl_model *m = NULL;
    ddl_trainer *tr = NULL;
    char err[256];
    uint32_t crc = 0;
    if (ddl_model_create(ddl_model_graph(), &mc, &al, &m, err, sizeof err) != DDL_OK) {
        fprintf(stderr, "model: %s\n", err);
        return 0;
    }
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = BATCH;
    tc.micro_batches = 1;
    tc.profile = p;
    if (ddl_trainer_create(&tc, m, &d, &al, &tr, err, sizeof err) == DDL_OK) {
        long before = cnt.allocs;
        int ok = 1;
        ddl_eval_stats ev;
        for (int s = 0; s < STEPS; s++) {
            ok &= ddl_trainer_step(tr, NULL) == DDL_OK;
            if (s == 0)
                ok &= ddl_trainer_evaluate(tr, &d, &ev) == DDL_OK; /* its passes are not the steps' */
        }
        *allocs = cnt.allocs - before;
        if (p) { /* a start measured in a slow spell of the vCPU: the epoch's statistics measure again */
            p->peak_gflops = 0.001, p->peak_isa = NULL;
            ddl_epoch_stats es;
            ok &= ddl_trainer_epoch_stats(tr, &es) == DDL_OK;
            CHECK(p->peak_gflops > 0.001 && p->peak_isa != NULL);
        }
        crc = ok ? ddl_model_crc(m) : 0;
    } else {
        fprintf(stderr, "trainer: %s\n", err);
    }
    ddl_trainer_destroy(tr);
    ddl_model_destroy(m);
    return crc;
}

static void check_graph_profile(const ddl_profile *p)
{
    CHECK(p->peak_gflops > 0.0);
    CHECK(p->peak_isa && (!strcmp(p->peak_isa, "avx512") || !strcmp(p->peak_isa, "avx2") ||
                          !strcmp(p->peak_isa, "scalar")));
    CHECK(p->steps == STEPS);
    CHECK(p->rank == 0 && p->world == 1 && p->parts == 1 && p->cores == 1);
    CHECK(p->n_layers == 7); /* every layer after the input */
    int64_t layers = 0;
    int all_timed = 1;
    for (int i = 0; i < p->n_layers; i++) {
        const ddl_profile_layer *l = &p->layers[i];
        layers += l->fwd_ns + l->bwd_ns;
        all_timed &= l->fwd_samples == (int64_t)STEPS * BATCH && l->bwd_samples == (int64_t)STEPS * BATCH &&
                     l->fwd_ns >= 0 && l->bwd_ns >= 0;
    }
    CHECK(all_timed); /* the evaluation's forward passes are not counted */
    CHECK(layers > 0);
    CHECK(layers <= p->compute_ns);
    CHECK(p->data_ns + p->compute_ns + p->allreduce_ns + p->optimizer_ns == p->step_ns);
    CHECK(p->compute_ns > 0 && p->step_ns > 0);
    const ddl_profile_layer *c1 = find(p, "c1"), *c2 = find(p, "c2"), *fc = find(p, "fc");
    CHECK(c1 && c2 && fc);
    if (!c1 || !c2 || !fc)
        return;
    double f1 = 2.0 * 8 * H * W * C * 3 * 3, f2 = 2.0 * 16 * (H / 2) * (W / 2) * 8 * 3 * 3;
    double ff = 2.0 * (16 * (H / 2) * (W / 2)) * K;
    CHECK(c1->fwd_flops == f1 && c1->bwd_flops == f1); /* the first conv: its weights' gradient alone */
    CHECK(c2->fwd_flops == f2 && c2->bwd_flops == 2 * f2);
    CHECK(fc->fwd_flops == ff && fc->bwd_flops == 2 * ff);
    CHECK(!strcmp(c1->kind, "conv") && !strcmp(fc->kind, "dense"));
    CHECK(c1->c == 8 && c1->h == H && c1->w == W && fc->c == K && fc->h == 1 && fc->w == 1);
    CHECK(p->layers[1].fwd_flops == 0 && p->layers[1].bwd_flops == 0); /* relu: no FLOPs counted */
    /* the table: every layer, the sum and the split */
    char text[8192];
    size_t n = ddl_profile_format(p, text, sizeof text);
    CHECK(n > 0 && n < sizeof text && strlen(text) == n);
    CHECK(strstr(text, "profile of rank 0: 4 steps, peak ") != NULL);
    CHECK(strstr(text, "\nc1 ") && strstr(text, "\nc2 ") && strstr(text, "\nfc ") && strstr(text, "\nall layers"));
    CHECK(strstr(text, "\nstep ") && strstr(text, "all-reduce wait"));
    char small[16];
    CHECK(ddl_profile_format(p, small, sizeof small) == n && strlen(small) == sizeof small - 1);
}

/* plugin: a hand-written plugin's layers through the public calls: declared with their FLOPs,
 * timed in a training pass, not in an evaluation pass, nor with profiling off. */
static void check_plugin(const ddl_model_plugin *plugin, ddl_model_config mc, int n_layers, const char *first,
                         double first_fwd, double first_bwd)
{
    ddl_model *m = NULL;
    char err[256];
    CHECK(ddl_model_create(plugin, &mc, NULL, &m, err, sizeof err) == DDL_OK);
    if (!m)
        return;
    ddl_model_init_weights(m, 1);
    size_t in = (size_t)mc.batch * mc.in_c * mc.in_h * mc.in_w, out;
    int oc, oh, ow;
    ddl_model_output_shape(m, &oc, &oh, &ow);
    out = (size_t)mc.batch * oc * oh * ow;
    float *x = calloc(in, sizeof *x), *dl = calloc(out, sizeof *dl);
    ddl_profile *p = calloc(1, sizeof *p);
    ddl_rng r;
    ddl_rng_seed(&r, 3);
    for (size_t i = 0; x && i < in; i++)
        x[i] = (float)ddl_rng_uniform(&r);
    for (size_t i = 0; dl && i < out; i++)
        dl[i] = 0.01f;
    if (x && dl && p) {
        ddl_model_forward(m, x, mc.batch, 1, &r); /* off: nothing timed */
        ddl_model_backward(m, x, mc.batch, dl);
        ddl_model_profile(m, 1);
        ddl_model_forward(m, x, mc.batch, 0, &r); /* evaluation: not timed */
        ddl_model_forward(m, x, mc.batch, 1, &r);
        ddl_model_backward(m, x, mc.batch, dl);
        CHECK(ddl_model_profile_take(m, p) == DDL_OK);
        CHECK(p->n_layers == n_layers);
        int timed = 1;
        int64_t ns = 0;
        for (int i = 0; i < p->n_layers; i++) {
            timed &= p->layers[i].fwd_samples == mc.batch && p->layers[i].bwd_samples == mc.batch;
            ns += p->layers[i].fwd_ns + p->layers[i].bwd_ns;
        }
        CHECK(timed);
        CHECK(ns > 0);
        CHECK(!strcmp(p->layers[0].name, first));
        CHECK(p->layers[0].fwd_flops == first_fwd && p->layers[0].bwd_flops == first_bwd);
        CHECK(ddl_model_profile_take(m, p) == DDL_OK && p->layers[0].fwd_samples == mc.batch); /* taken once */
        ddl_profile *other = calloc(1, sizeof *other);
        if (other) {
            other->n_layers = 1;
            snprintf(other->layers[0].name, sizeof other->layers[0].name, "not this model");
            CHECK(ddl_model_profile_take(m, other) == DDL_EINVAL);
            free(other);
        }
        CHECK(ddl_model_profile_take(NULL, p) == DDL_EINVAL);
    }
    free(x);
    free(dl);
    free(p);
    ddl_model_destroy(m);
}

int main(void)
{
    const char *isa = NULL;
    double peak = ddl_cpu_peak_gflops(&isa);
    CHECK(peak > 0.1 && isa != NULL);

    ddl_graph *g = make_graph();
    CHECK(g != NULL);
    if (!g)
        return TEST_END();
    ddl_profile *p = calloc(1, sizeof *p);
    long allocs_off = -1, allocs_on = -1;
    uint32_t off = train(g, NULL, &allocs_off), on = p ? train(g, p, &allocs_on) : 0;
    CHECK(off != 0 && on == off); /* the same weights' bits */
    CHECK(allocs_off == 0 && allocs_on == 0);
    if (p)
        check_graph_profile(p);
    free(p);
    ddl_graph_destroy(g, NULL);

    ddl_model_config lc = {.batch = 4, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10};
    double c1 = 2.0 * 6 * 28 * 28 * 1 * 5 * 5;
    check_plugin(ddl_model_lenet(), lc, 7, "conv1", c1, c1);
    ddl_model_config uc = {.batch = 2, .in_c = 1, .in_h = 16, .in_w = 16, .n_classes = 2,
                           .plugin_config = &(ddl_unet_config){.depth = 2, .width = 4}};
    double u1 = 2.0 * 4 * 16 * 16 * 1 * 3 * 3;
    /* depth 2: a level is 4 block layers and a pool down, an up, a concat and 4 up; a bottom
     * block of 4 and the head */
    check_plugin(ddl_model_unet(), uc, 2 * 5 + 4 + 2 * 6 + 1, "down0.conv1", u1, u1);
    return TEST_END();
}
