/* test_sync_bn.c - synchronised BatchNorm (ddl_train_config.sync_bn):
 *  - the kernels over a batch cut in 2 parts (their rows summed in sample order, as the
 *    trainer's rounds do): y, the running statistics and dx are the whole batch's per-batch
 *    kernels' within 1e-5; one part and two give the same bits; dx, dgamma and dbeta agree with
 *    finite differences of a loss over both parts;
 *  - a trainer with 2 shards in one process: after one step the running mean and variance are
 *    the whole batch's (a reference computed here, within 1e-6 and 1e-5), where per-shard
 *    statistics give another variance and other weights; the bits do not depend on the thread
 *    count; nothing is allocated during steps (and everything is given back).
 * The ranks (1 process against 2 and 4 over shm and tcp) and the refused combinations:
 * tests/test_sync_bn.sh. */
#include "ddl.h"
#include "check.h"
#include "count_alloc.h"
#include "core/impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the kernels, a batch in parts ---- */

enum { KN = 6, KC = 3, KS = 5 };

typedef struct kparts {
    int n_parts, cut[3];          /* part p holds samples [cut[p], cut[p + 1]) */
    float rows[KN * 2 * KC];      /* every sample's row of a round, at its index */
    double tot[2 * KC];
    float mr[3][2 * KC];          /* each part's mean and rstd */
} kparts;

/* round: each part's rows to their samples' places, then every column summed in sample order. */
static void round_sum(kparts *k, int width)
{
    for (int c = 0; c < width; c++) {
        k->tot[c] = 0.0;
        for (int i = 0; i < KN; i++)
            k->tot[c] += k->rows[i * width + c];
    }
}

static const float *part_x(const float *x, const kparts *k, int p) { return x + (size_t)k->cut[p] * KC * KS; }

/* sync_forward: y (KN, KC, KS) and the running statistics' next values, part by part. */
static void sync_forward(kparts *k, const float *x, const float *g, const float *b, const float *rm, const float *rv,
                         float *y, float *nm, float *nv)
{
    for (int p = 0; p < k->n_parts; p++)
        ddl__bn_sync_rows(k->cut[p + 1] - k->cut[p], KC, KS, part_x(x, k, p), NULL, k->rows + k->cut[p] * KC);
    round_sum(k, KC);
    double count = (double)KN * KS;
    for (int p = 0; p < k->n_parts; p++)
        ddl__bn_sync_mean(KC, count, k->tot, k->mr[p]);
    for (int p = 0; p < k->n_parts; p++)
        ddl__bn_sync_rows(k->cut[p + 1] - k->cut[p], KC, KS, part_x(x, k, p), k->mr[p], k->rows + k->cut[p] * KC);
    round_sum(k, KC);
    for (int p = 0; p < k->n_parts; p++) /* each part computes the next statistics; they must agree */
        ddl__bn_sync_forward(k->cut[p + 1] - k->cut[p], KC, KS, count, 0.1f, 1e-5f, k->tot, part_x(x, k, p), g, b, rm,
                             rv, y + (size_t)k->cut[p] * KC * KS, k->mr[p], nm + p * KC, nv + p * KC);
}

/* sync_backward: dx, and dgamma, dbeta added over the parts. */
static void sync_backward(kparts *k, const float *x, const float *g, const float *dy, float *dx, float *dg, float *db)
{
    float rows[KN * 2 * KC];
    for (int p = 0; p < k->n_parts; p++) {
        size_t off = (size_t)k->cut[p] * KC * KS;
        ddl__bn_sync_grad_rows(k->cut[p + 1] - k->cut[p], KC, KS, x + off, k->mr[p], dy + off,
                               k->rows + k->cut[p] * 2 * KC);
    }
    memcpy(rows, k->rows, sizeof rows);
    round_sum(k, 2 * KC);
    memset(dg, 0, KC * sizeof *dg);
    memset(db, 0, KC * sizeof *db);
    for (int p = 0; p < k->n_parts; p++) {
        size_t off = (size_t)k->cut[p] * KC * KS;
        ddl__bn_sync_backward(k->cut[p + 1] - k->cut[p], KC, KS, (double)KN * KS, x + off, g, k->mr[p], dy + off,
                              rows + k->cut[p] * 2 * KC, k->tot, dx + off, dg, db);
    }
}

/* loss: sum of w y over the batch, y by the 2-part forward. */
static double loss(const float *x, const float *g, const float *b, const float *w)
{
    kparts k = {.n_parts = 2, .cut = {0, 2, KN}};
    float y[KN * KC * KS], nm[2 * KC], nv[2 * KC], rm[KC] = {0}, rv[KC] = {1, 1, 1};
    sync_forward(&k, x, g, b, rm, rv, y, nm, nv);
    double l = 0;
    for (int i = 0; i < KN * KC * KS; i++)
        l += (double)w[i] * y[i];
    return l;
}

static void test_kernels(void)
{
    float x[KN * KC * KS], w[KN * KC * KS], g[KC] = {1.5f, -0.5f, 0.8f}, b[KC] = {0.1f, 0.2f, -0.3f};
    float rm[KC] = {0.2f, -0.1f, 0.0f}, rv[KC] = {1.0f, 0.5f, 2.0f};
    ddl_rng r;
    ddl_rng_seed(&r, 11);
    for (int i = 0; i < KN * KC * KS; i++) {
        x[i] = (float)(4.0 * ddl_rng_uniform(&r) - 2.0 + (i / KS % KC)); /* a channel's offset */
        w[i] = (float)(2.0 * ddl_rng_uniform(&r) - 1.0);
    }
    /* the whole batch by the per-batch kernels */
    float y0[KN * KC * KS], mr0[2 * KC], nm0[KC], nv0[KC], dx0[KN * KC * KS], dg0[KC] = {0}, db0[KC] = {0};
    ddl_batchnorm_forward_train(KN, KC, KS, 0.1f, 1e-5f, x, g, b, rm, rv, y0, mr0, nm0, nv0);
    ddl_batchnorm_backward(KN, KC, KS, 1, x, g, mr0, w, dx0, dg0, db0);
    /* two parts (2 and 4 samples), and one */
    kparts two = {.n_parts = 2, .cut = {0, 2, KN}}, one = {.n_parts = 1, .cut = {0, KN}};
    float y2[KN * KC * KS], y1[KN * KC * KS], nm2[2 * KC], nv2[2 * KC], nm1[KC], nv1[KC];
    sync_forward(&two, x, g, b, rm, rv, y2, nm2, nv2);
    sync_forward(&one, x, g, b, rm, rv, y1, nm1, nv1);
    double worst = 0;
    for (int i = 0; i < KN * KC * KS; i++)
        worst = fmax(worst, fabs(y2[i] - y0[i]));
    CHECK(worst < 1e-5);
    printf("y of 2 parts against the whole batch's: %.2e\n", worst);
    CHECK(memcmp(y1, y2, sizeof y1) == 0);
    CHECK(memcmp(nm2, nm2 + KC, KC * sizeof *nm2) == 0 && memcmp(nv2, nv2 + KC, KC * sizeof *nv2) == 0);
    CHECK(memcmp(nm1, nm2, sizeof nm1) == 0 && memcmp(nv1, nv2, sizeof nv1) == 0);
    for (int c = 0; c < KC; c++) {
        CHECK_NEAR(nm2[c], nm0[c], 1e-6);
        CHECK_NEAR(nv2[c], nv0[c], 1e-5 * fabs(nv0[c]));
    }
    /* backward */
    float dx2[KN * KC * KS], dx1[KN * KC * KS], dg2[KC], db2[KC], dg1[KC], db1[KC];
    sync_backward(&two, x, g, w, dx2, dg2, db2);
    sync_backward(&one, x, g, w, dx1, dg1, db1);
    CHECK(memcmp(dx1, dx2, sizeof dx1) == 0);
    worst = 0;
    for (int i = 0; i < KN * KC * KS; i++)
        worst = fmax(worst, fabs(dx2[i] - dx0[i]));
    CHECK(worst < 1e-5);
    printf("dx of 2 parts against the whole batch's: %.2e\n", worst);
    for (int c = 0; c < KC; c++) {
        CHECK_NEAR(dg2[c], dg0[c], 1e-4);
        CHECK_NEAR(db2[c], db0[c], 1e-4);
    }
    /* finite differences of the 2-part loss: x, gamma, beta */
    const double h = 1e-2;
    double fd_worst = 0;
    for (int i = 0; i < KN * KC * KS; i++) {
        float keep = x[i];
        x[i] = keep + (float)h;
        double lp = loss(x, g, b, w);
        x[i] = keep - (float)h;
        double lm = loss(x, g, b, w);
        x[i] = keep;
        fd_worst = fmax(fd_worst, fabs((lp - lm) / (2 * h) - dx2[i]));
    }
    for (int c = 0; c < KC; c++) {
        float keep = g[c];
        g[c] = keep + (float)h;
        double lp = loss(x, g, b, w);
        g[c] = keep - (float)h;
        double lm = loss(x, g, b, w);
        g[c] = keep;
        fd_worst = fmax(fd_worst, fabs((lp - lm) / (2 * h) - dg2[c]));
        keep = b[c];
        b[c] = keep + (float)h;
        lp = loss(x, g, b, w);
        b[c] = keep - (float)h;
        lm = loss(x, g, b, w);
        b[c] = keep;
        fd_worst = fmax(fd_worst, fabs((lp - lm) / (2 * h) - db2[c]));
    }
    printf("finite differences against the 2-part backward (x, gamma, beta): worst %.2e\n", fd_worst);
    CHECK(fd_worst < 2e-3);
}

/* ---- a trainer: 2 shards in one process ---- */

enum { TN = 16, TC = 3, THW = 6 };
static float img[TN * TC * THW * THW];
static uint8_t lab[TN];

static void make_data(ddl_dataset *d)
{
    ddl_rng r;
    ddl_rng_seed(&r, 5);
    for (int i = 0; i < TN; i++) {
        lab[i] = (uint8_t)ddl_rng_below(&r, 3);
        for (int k = 0; k < TC * THW * THW; k++) /* the shards' halves differ in spread */
            img[i * TC * THW * THW + k] = (float)((ddl_rng_uniform(&r) - 0.3) * (i < TN / 2 ? 1.0 : 3.0) + k / 36);
    }
    memset(d, 0, sizeof *d);
    d->n = TN;
    d->c = TC;
    d->h = d->w = THW;
    d->th = d->tw = 1;
    d->n_classes = 3;
    d->fimages = img;
    d->targets = lab;
}

typedef struct trun {
    int sync, shards, threads, steps, micro;
    float buffers[2 * TC + 8];
    long step_allocs;
    counter c;
} trun;

/* train: r->steps steps over the whole data set (batch TN); the weights' CRC, 0 on a failure. */
static uint32_t train(trun *r)
{
    static _Alignas(64) unsigned char gmem[1 << 17]; /* >= ddl_graph_sizeof(): 1024 layers */
    const char *arch = "input\nbatchnorm bn0\nconv c1 4 3 pad=1 bias=0\nbatchnorm bn1\nrelu\ngap\ndense fc classes\n";
    char err[256];
    ddl_graph *g = ddl_graph_init(gmem, sizeof gmem);
    if (!g || ddl_graph_parse(g, arch, err, sizeof err) != DDL_OK)
        return 0;
    ddl_set_threads(r->threads);
    ddl_dataset d;
    make_data(&d);
    ddl_allocator al = {count_alloc, count_free, &r->c};
    ddl_model_config mc = {.batch = TN, .in_c = TC, .in_h = THW, .in_w = THW, .n_classes = 3, .plugin_config = g};
    ddl_model *m = NULL;
    ddl_trainer *tr = NULL;
    uint32_t crc = 0;
    if (ddl_model_create(ddl_model_graph(), &mc, &al, &m, err, sizeof err) != DDL_OK) {
        fprintf(stderr, "model: %s\n", err);
        return 0;
    }
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = TN;
    tc.shards = r->shards;
    tc.micro_batches = r->micro;
    tc.sync_bn = r->sync;
    tc.optim.lr = 0.1f;
    if (ddl_trainer_create(&tc, m, &d, &al, &tr, err, sizeof err) == DDL_OK) {
        long before = r->c.allocs;
        int ok = 1;
        for (int s = 0; s < r->steps; s++)
            ok &= ddl_trainer_step(tr, NULL) == DDL_OK;
        r->step_allocs = r->c.allocs - before;
        memcpy(r->buffers, ddl_model_buffers(m), sizeof r->buffers);
        crc = ok ? ddl_model_crc(m) : 0;
        if (!ok)
            fprintf(stderr, "step: %s\n", ddl_trainer_error(tr));
    } else {
        fprintf(stderr, "trainer: %s\n", err);
    }
    ddl_trainer_destroy(tr);
    ddl_model_destroy(m);
    ddl_set_threads(1);
    return crc;
}

static void test_trainer(void)
{
    /* the whole batch's statistics of bn0 (it reads the data as it is: float images, mean 0, std 1) */
    ddl_dataset d;
    make_data(&d);
    double mean[TC], var[TC];
    size_t S = THW * THW;
    for (int c = 0; c < TC; c++) {
        double s = 0, q = 0;
        for (int i = 0; i < TN; i++)
            for (size_t k = 0; k < S; k++)
                s += img[(i * TC + c) * S + k];
        mean[c] = s / (double)(TN * S);
        for (int i = 0; i < TN; i++)
            for (size_t k = 0; k < S; k++)
                q += (img[(i * TC + c) * S + k] - mean[c]) * (img[(i * TC + c) * S + k] - mean[c]);
        var[c] = q / (double)(TN * S - 1); /* unbiased, as PyTorch's running variance */
    }
    trun sync = {.sync = 1, .shards = 2, .threads = 1, .steps = 1};
    trun part = {.sync = 0, .shards = 2, .threads = 1, .steps = 1};
    uint32_t cs = train(&sync), cp = train(&part);
    CHECK(cs != 0 && cp != 0);
    CHECK(cs != cp); /* the shards' own statistics train to other weights */
    double wm = 0, wv = 0, pv = 0;
    for (int c = 0; c < TC; c++) { /* running = 0.9 running + 0.1 batch, from 0 and 1 */
        wm = fmax(wm, fabs(sync.buffers[c] - 0.1 * mean[c]));
        wv = fmax(wv, fabs(sync.buffers[TC + c] - (0.9 + 0.1 * var[c])) / (0.9 + 0.1 * var[c]));
        pv = fmax(pv, fabs(part.buffers[TC + c] - (0.9 + 0.1 * var[c])) / (0.9 + 0.1 * var[c]));
    }
    printf("bn0 after one step, sync_bn against the whole batch: mean %.2e, variance %.2e (relative); "
           "per-shard statistics' variance %.2e\n", wm, wv, pv);
    CHECK(wm < 1e-6);
    CHECK(wv < 1e-5);
    CHECK(pv > 1e-3); /* the mean of the shards' variances is not the batch's */

    /* the same bits at 2 threads; no allocation in 3 steps, everything given back */
    trun a = {.sync = 1, .shards = 2, .threads = 1, .steps = 3}, b = {.sync = 1, .shards = 2, .threads = 2, .steps = 3};
    uint32_t ca = train(&a), cb = train(&b);
    CHECK(ca != 0 && ca == cb);
    CHECK(memcmp(a.buffers, b.buffers, sizeof a.buffers) == 0);
    printf("3 steps, 2 shards: %ld and %ld allocations during the steps; %ld allocations, %ld frees in all\n",
           a.step_allocs, b.step_allocs, b.c.allocs, b.c.frees);
    CHECK(a.step_allocs == 0 && b.step_allocs == 0);
    CHECK(b.c.allocs > 0 && b.c.frees == b.c.allocs);
    /* micro-batches without shards run the same rounds */
    trun m = {.sync = 1, .shards = 0, .threads = 2, .steps = 2, .micro = 2};
    CHECK(train(&m) != 0 && m.step_allocs == 0);
}

int main(void)
{
    test_kernels();
    test_trainer();
    return TEST_END();
}
