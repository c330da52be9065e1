/* test_distributed.c - the training loop on several ranks, for LeNet and U-Net: N ranks with a
 * global batch B give the weights of 1 rank with batch B (to float rounding) after 50 steps
 * (U-Net: 20), including a batch remainder that does not divide by N; every rank ends with
 * bit-identical weights; and the weights are bit-identical over every transport (same key,
 * same CRC across runs).
 *
 * What "to float rounding" can mean here: ReLU and max-pool have kinks. When a pre-activation
 * lies within rounding of 0 (or two pooled values within rounding of each other), the
 * batch-of-B and batch-of-B/N forward passes (different gemm blocking) can take different sides,
 * and that unit's local derivative differs by O(1), not by an ulp. Over many steps such an
 * event shifts the gradients upstream of it by ~1e-3 and the weights by ~1e-6, which a
 * per-element bound on the final weights cannot tell from a bug. So per element we compare the
 * reduced gradient of the first step, where both runs have the same weights and only rounding
 * differs; the trained weights are compared per tensor, against how far training moved them. */
#include "ddl.h"
#include "check.h"
#include "ranks.h"

#include <math.h>

enum { N_SAMPLES = 1000, BATCH = 64, STEPS = 50 };

static uint8_t images[N_SAMPLES * 784], labels[N_SAMPLES];

static void make_data(ddl_dataset *d)
{
    ddl_rng r;
    ddl_rng_seed(&r, 99);
    for (int i = 0; i < N_SAMPLES; i++) {
        int k = (int)ddl_rng_below(&r, 10);
        labels[i] = (uint8_t)k;
        for (int p = 0; p < 784; p++)
            images[i * 784 + p] = (uint8_t)((p / 28) / 3 == k ? 150 + ddl_rng_below(&r, 100) : ddl_rng_below(&r, 90));
    }
    memset(d, 0, sizeof *d);
    d->n = N_SAMPLES;
    d->c = 1;
    d->h = d->w = 28;
    d->th = d->tw = 1;
    d->n_classes = 10;
    d->images = images;
    d->targets = labels;
}

static int n_tensors; /* the model's parameter tensors, filled by train() */
static size_t t_off[DDL_MAX_PARAMS], t_count[DDL_MAX_PARAMS];
static char t_name[DDL_MAX_PARAMS][64];

/* train: STEPS steps of LeNet (unet: 20 steps of a small U-Net on 32x32 scenes of the same
 * items, batch 12) on `world` ranks (comm NULL: one process); weights copied to out, the initial
 * weights to w0 and the reduced gradient of step 1 to g1. */
static int train(ddl_comm *comm, int world, int unet, float *out, float *w0, float *g1, size_t *n_out)
{
    ddl_dataset d, scenes;
    make_data(&d);
    int batch = unet ? 12 : BATCH, steps = unet ? 20 : STEPS;
    char err[DDL_ERR_BYTES];
    if (unet && ddl_dataset_make_scenes(&d, 100, 32, 2, 3, NULL, &scenes, err, sizeof err) != DDL_OK)
        return DDL_EINVAL;
    ddl_model_config mc = {.batch = (batch + world - 1) / world, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10};
    ddl_unet_config uc = {.depth = 2, .width = 4}; /* read by the build, so it lives as long as mc */
    if (unet)
        mc = (ddl_model_config){.batch = (batch + world - 1) / world, .in_c = 1, .in_h = 32, .in_w = 32,
                                .n_classes = 11, .plugin_config = &uc};
    ddl_model *m = NULL;
    ddl_trainer *tr = NULL;
    int rc = ddl_model_create(unet ? ddl_model_unet() : ddl_model_lenet(), &mc, NULL, &m, err, sizeof err);
    if (rc != DDL_OK)
        return rc;
    ddl_model_set_norm(m, 0.25f, 0.3f);
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = batch;
    tc.comm = comm;
    tc.seed = 5;
    tc.dice_weight = unet ? 0.5f : 0.0f;
    rc = ddl_trainer_create(&tc, m, unet ? &scenes : &d, NULL, &tr, err, sizeof err);
    memcpy(w0, ddl_model_params(m), ddl_model_n_params(m) * sizeof(float));
    for (int s = 0; s < steps && rc == DDL_OK; s++) {
        rc = ddl_trainer_step(tr, NULL);
        if (s == 0)
            memcpy(g1, ddl_model_grads(m), ddl_model_n_params(m) * sizeof(float));
    }
    n_tensors = ddl_model_n_tensors(m);
    for (int i = 0; i < n_tensors; i++) {
        const ddl_param_info *pi = ddl_model_tensor(m, i);
        t_off[i] = pi->offset, t_count[i] = pi->count;
        snprintf(t_name[i], sizeof t_name[i], "%s", pi->name);
    }
    if (rc != DDL_OK)
        fprintf(stderr, "train: %s\n", tr ? ddl_trainer_error(tr) : err);
    *n_out = ddl_model_n_params(m);
    memcpy(out, ddl_model_params(m), *n_out * sizeof(float));
    ddl_trainer_destroy(tr);
    ddl_model_destroy(m);
    if (unet)
        ddl_dataset_free(&scenes);
    return rc;
}

static float dist_w[200000], single_w[200000], dist_w0[200000], single_w0[200000], dist_g1[200000],
    single_g1[200000];

static void rank_body(int rank, int world, void *arg)
{
    int unet = arg != NULL;
    ddl_comm_config cfg = make_config(rank, world, 20000);
    ddl_comm *c = NULL;
    char err[DDL_ERR_BYTES] = "";
    int rc = ddl_comm_create(&cfg, NULL, &c, err, sizeof err);
    CHECK(rc == DDL_OK);
    if (rc != DDL_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, err);
        ddl_comm_destroy(c);
        return;
    }
    size_t n1 = 0, n2 = 0;
    CHECK(train(c, world, unet, dist_w, dist_w0, dist_g1, &n1) == DDL_OK);
    ddl_comm_destroy(c);
    CHECK(train(NULL, 1, unet, single_w, single_w0, single_g1, &n2) == DDL_OK);
    CHECK(n2 == n1 && n1 > 1000);
    if (!unet)
        CHECK(n1 == 61706);
    CHECK(memcmp(dist_w0, single_w0, n1 * sizeof(float)) == 0);
    /* 1 rank with batch B against N ranks with B / N each: the same up to float rounding */
    double diff = 0, norm = 0;
    for (size_t i = 0; i < n1; i++) {
        double e = (double)dist_w[i] - single_w[i];
        diff += e * e;
        norm += (double)single_w[i] * single_w[i];
    }
    CHECK(sqrt(diff / norm) < 1e-5);
    /* per tensor: the first step's reduced gradient, element by element, to rounding (relative to
     * the element, with the tensor's rms as the floor); and the trained weights, against the
     * distance training moved the tensor (kinks give at most ~6e-4 there, a wrong reduction O(1)) */
    double worst_g = 0, worst_t = 0;
    int wg = 0, wt = 0;
    for (int t = 0; t < n_tensors; t++) {
        double g2 = 0, d2 = 0, m2 = 0, rg = 0;
        for (size_t i = t_off[t]; i < t_off[t] + t_count[t]; i++) {
            double e = (double)dist_w[i] - single_w[i], m = (double)single_w[i] - single_w0[i];
            g2 += (double)single_g1[i] * single_g1[i];
            d2 += e * e;
            m2 += m * m;
        }
        double g_rms = sqrt(g2 / (double)t_count[t]);
        for (size_t i = t_off[t]; i < t_off[t] + t_count[t]; i++) {
            double r = fabs((double)dist_g1[i] - single_g1[i]) / (fabs(single_g1[i]) + g_rms + 1e-30);
            rg = r > rg ? r : rg;
        }
        if (rg > worst_g)
            worst_g = rg, wg = t;
        if (sqrt(d2 / m2) > worst_t)
            worst_t = sqrt(d2 / m2), wt = t;
        CHECK(rg < 1e-4 && m2 > 0 && sqrt(d2 / m2) < 1e-2);
        if (!(rg < 1e-4 && m2 > 0 && sqrt(d2 / m2) < 1e-2))
            fprintf(stderr, "%s: step-1 gradient %.2e, trained weights %.2e of their update\n", t_name[t], rg,
                    sqrt(d2 / m2));
    }
    if (rank == 0)
        fprintf(stderr,
                "%s world %d: relative difference to 1 rank %.2e; worst step-1 gradient element %.2e (%s), "
                "worst tensor %.2e of its update (%s)\n",
                unet ? "unet" : "lenet", world, sqrt(diff / norm), worst_g, t_name[wg], worst_t, t_name[wt]);
    /* every rank, every transport: bit-identical */
    char key[32];
    snprintf(key, sizeof key, "crc-%s-world%d", unet ? "unet" : "lenet", world);
    report_value(key, ddl_crc32(0, dist_w, n1 * sizeof(float)));
}

int main(void)
{
    const char *names[4];
    int nt = test_transports(names);
    CHECK(nt >= 2); /* shm and tcp at least */
    static int unet_flag = 1;
    for (int t = 0; t < nt; t++)
        for (int world = 2; world <= 3; world++) {
            run_ranks(names[t], world, rank_body, NULL, 120.0, -1);
            run_ranks(names[t], world, rank_body, &unet_flag, 120.0, -1);
        }
    CHECK(ranks_value_conflicts == 0);
    CHECK(ranks_n_values == 4);
    return TEST_END();
}
