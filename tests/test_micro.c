/* test_micro.c - micro-batches (ddl_train_config.micro_batches, src/train/micro.c): the parts'
 * gradients add up to the whole batch's (even, uneven and empty parts, the last short batch of an
 * epoch); the same bits at 1, 2 and 3 threads, with dropout too; "auto" picks one part per 32
 * samples; each part has its own dropout stream (a probe plugin); the replicas are allocated at
 * set-up and never during steps (and a failed one gives everything back); bad counts are refused. */
#include "ddl.h"
#include "check.h"
#include "count_alloc.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 200, BATCH = 64 };
static uint8_t img[N * 784], lab[N];


static void make_data(ddl_dataset *d, long limit)
{
    ddl_rng r;
    ddl_rng_seed(&r, 7);
    for (int i = 0; i < N; i++) {
        lab[i] = (uint8_t)ddl_rng_below(&r, 10);
        for (int p = 0; p < 784; p++)
            img[i * 784 + p] = (uint8_t)ddl_rng_below(&r, 256);
    }
    memset(d, 0, sizeof *d);
    d->n = limit;
    d->c = 1;
    d->h = d->w = 28;
    d->th = d->tw = 1;
    d->n_classes = 10;
    d->images = img;
    d->targets = lab;
}

typedef struct run {
    int micro, threads, steps, batch;
    long samples;  /* training samples (N at most) */
    float dropout;
    float *grads;  /* if not NULL: the gradients after the last step */
    double loss;   /* the last step's */
    int parts;     /* what the trainer made of micro */
} run;

/* train: r->steps steps of LeNet (built for BATCH) on r->samples samples; the weights' CRC, or 0
 * if anything failed. */
static uint32_t train(run *r, counter *c, long *allocs_in_steps)
{
    ddl_set_threads(r->threads);
    ddl_dataset d;
    make_data(&d, r->samples);
    ddl_allocator al = {count_alloc, count_free, c};
    ddl_model_config mc = {.batch = BATCH, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10, .dropout = r->dropout};
    ddl_model *m = NULL;
    ddl_trainer *tr = NULL;
    char err[256];
    if (ddl_model_create(ddl_model_lenet(), &mc, &al, &m, err, sizeof err) != DDL_OK)
        return 0;
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = r->batch;
    tc.micro_batches = r->micro;
    uint32_t crc = 0;
    if (ddl_trainer_create(&tc, m, &d, &al, &tr, err, sizeof err) == DDL_OK) {
        r->parts = ddl_trainer_micro_batches(tr);
        long before = c->allocs;
        int ok = 1;
        for (int s = 0; s < r->steps; s++)
            ok &= ddl_trainer_step(tr, &r->loss) == DDL_OK;
        if (allocs_in_steps)
            *allocs_in_steps = c->allocs - before;
        if (r->grads)
            memcpy(r->grads, ddl_model_grads(m), ddl_model_n_params(m) * sizeof(float));
        crc = ok ? ddl_model_crc(m) : 0;
    } else {
        fprintf(stderr, "trainer: %s\n", err);
    }
    ddl_trainer_destroy(tr);
    ddl_model_destroy(m);
    ddl_set_threads(1);
    return crc;
}

/* lenet: a LeNet for batch samples of 28x28 (NULL if it cannot be built). */
static ddl_model *lenet(int batch)
{
    ddl_model_config mc = {.batch = batch, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10};
    ddl_model *m = NULL;
    return ddl_model_create(ddl_model_lenet(), &mc, NULL, &m, NULL, 0) == DDL_OK ? m : NULL;
}

static size_t lenet_params(void)
{
    ddl_model *m = lenet(1);
    size_t n = m ? ddl_model_n_params(m) : 0;
    ddl_model_destroy(m);
    return n;
}

/* The gradient of a step in parts equals the whole batch's but for rounding: relative to the
 * largest gradient, within 1e-5 (a part left out or added twice is off by a third or more). The
 * second step's: each step starts from zero gradients. */
static void test_parts_add_up(void)
{
    size_t n = lenet_params();
    float *whole = malloc(n * sizeof(float)), *parts = malloc(n * sizeof(float));
    /* samples: a full batch of 64; a short one of 8 (3 parts of 2, 3, 3); 5 samples in 8 parts
     * (three parts empty) */
    static const struct {
        long samples;
        int micro;
    } cases[] = {{64, 2}, {64, 3}, {64, 8}, {8, 3}, {8, 8}, {5, 8}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        counter c = {0, 0};
        run a = {.micro = 1, .threads = 1, .steps = 2, .batch = BATCH, .samples = cases[k].samples, .grads = whole};
        run b = a;
        b.micro = cases[k].micro;
        b.grads = parts;
        uint32_t ca = train(&a, &c, NULL), cb = train(&b, &c, NULL);
        CHECK(ca != 0 && cb != 0);
        double top = 0.0, off = 0.0;
        for (size_t i = 0; i < n; i++) {
            top = fmax(top, fabs(whole[i]));
            off = fmax(off, fabs((double)whole[i] - parts[i]));
        }
        CHECK(top > 1e-3);
        if (off > 1e-5 * top)
            fprintf(stderr, "%ld samples in %d parts: gradients off by %.3g (largest %.3g)\n", cases[k].samples,
                    cases[k].micro, off, top);
        CHECK(off <= 1e-5 * top);
        CHECK_NEAR(a.loss, b.loss, 1e-5 * fabs(a.loss));
    }
    free(whole);
    free(parts);
}

/* The same weights at 1, 2 and 3 threads: parts side by side (2 threads, 2 or 4 parts) or one
 * after another (3 threads), with dropout, over 4 steps (the last of 8 samples). */
static void test_threads(void)
{
    static const int micros[] = {2, 4};
    for (int drop = 0; drop < 2; drop++)
        for (size_t k = 0; k < sizeof micros / sizeof micros[0]; k++) {
            uint32_t crc[3];
            for (int t = 1; t <= 3; t++) {
                counter c = {0, 0};
                run r = {.micro = micros[k], .threads = t, .steps = 4, .batch = BATCH, .samples = N,
                         .dropout = drop ? 0.3f : 0.0f};
                crc[t - 1] = train(&r, &c, NULL);
            }
            if (crc[0] != crc[1] || crc[0] != crc[2])
                fprintf(stderr, "%d parts, dropout %d: %08x %08x %08x\n", micros[k], drop, crc[0], crc[1], crc[2]);
            CHECK(crc[0] != 0 && crc[0] == crc[1] && crc[0] == crc[2]);
        }
}

/* auto (0): one part per 32 samples of the batch, 1 below 64. */
static void test_auto(void)
{
    counter c = {0, 0};
    run a = {.micro = 0, .threads = 2, .steps = 3, .batch = 64, .samples = N};
    run two = a, one = a, small = a;
    two.micro = 2;
    one.micro = 1;
    small.batch = 32;
    uint32_t ca = train(&a, &c, NULL), c2 = train(&two, &c, NULL), c1 = train(&one, &c, NULL);
    CHECK(ca != 0 && ca == c2 && ca != c1);
    CHECK(a.parts == 2 && two.parts == 2 && one.parts == 1);
    small.micro = 1;
    uint32_t s1 = train(&small, &c, NULL);
    small.micro = 0;
    uint32_t s0 = train(&small, &c, NULL);
    CHECK(s1 != 0 && s0 == s1);
    CHECK(small.parts == 1);
    run few = {.micro = 8, .threads = 1, .steps = 1, .batch = 5, .samples = N};
    CHECK(train(&few, &c, NULL) != 0 && few.parts == 5); /* no more parts than samples */
}

/* The replicas come from the trainer's allocator at set-up: nothing is allocated in a step. */
static void test_allocations(void)
{
    counter c = {0, 0};
    long in_steps = -1;
    run r = {.micro = 4, .threads = 2, .steps = 5, .batch = BATCH, .samples = N};
    CHECK(train(&r, &c, &in_steps) != 0);
    CHECK(c.allocs == 5); /* the model, the trainer and 3 replicas */
    CHECK(c.frees == c.allocs);
    CHECK(in_steps == 0);
}

/* ---- a probe plugin: logits = its bias; forward records the first draw of its dropout generator ---- */

typedef struct probe {
    float *b, *gb;
    int classes;
} probe;

static struct {
    const void *self;
    uint64_t draw;
} draws[DDL_MAX_MICRO_BATCHES]; /* per replica, in the order they first ran (one thread) */
static int n_draws;

static int probe_build(void *self, const ddl_model_config *cfg, ddl_model_build *b)
{
    probe *p = self;
    int shape[1] = {cfg->n_classes};
    p->classes = cfg->n_classes;
    p->b = ddl_build_param(b, "bias", 1, shape, DDL_INIT_ZERO, 1, 1, &p->gb);
    ddl_build_output(b, cfg->n_classes, 1, 1);
    return DDL_OK;
}

static void probe_forward(void *self, const float *x, int batch, int training, ddl_rng *rng, float *logits)
{
    probe *p = self;
    (void)x;
    for (int i = 0; i < batch * p->classes; i++)
        logits[i] = p->b[i % p->classes];
    int k = 0;
    while (k < n_draws && draws[k].self != self)
        k++;
    if (training && k < DDL_MAX_MICRO_BATCHES) {
        draws[k].self = self;
        draws[k].draw = ddl_rng_next(rng);
        n_draws += k == n_draws;
    }
}

static void probe_backward(void *self, const float *x, int batch, const float *dlogits, ddl_backward *pass)
{
    (void)pass; /* one layer: nothing to report before the end */
    probe *p = self;
    (void)x;
    for (int i = 0; i < batch * p->classes; i++)
        p->gb[i % p->classes] += dlogits[i];
}

static const ddl_model_plugin probe_plugin = {.version = DDL_MODEL_VERSION, .name = "probe", .self_bytes = sizeof(probe),
                                              .build = probe_build, .forward = probe_forward,
                                              .backward = probe_backward};

/* Each part draws its own dropout masks: the parts' generators start apart (one shared seed would
 * give every part the same masks, the same at any thread count, so test_threads cannot see it). */
static void test_dropout_streams(void)
{
    ddl_dataset d;
    make_data(&d, N);
    ddl_model_config mc = {.batch = BATCH, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10};
    ddl_model *m = NULL;
    CHECK(ddl_model_create(&probe_plugin, &mc, NULL, &m, NULL, 0) == DDL_OK);
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.micro_batches = 4;
    ddl_trainer *tr = NULL;
    CHECK(m && ddl_trainer_create(&tc, m, &d, NULL, &tr, NULL, 0) == DDL_OK);
    n_draws = 0;
    CHECK(tr && ddl_trainer_step(tr, NULL) == DDL_OK);
    CHECK(n_draws == 4);
    int apart = 1;
    for (int i = 0; i < n_draws; i++)
        for (int j = i + 1; j < n_draws; j++)
            apart &= draws[i].draw != draws[j].draw;
    CHECK(apart);
    ddl_trainer_destroy(tr);
    ddl_model_destroy(m);
}

/* An allocator that fails from its (limit + 1)-th block on. */
typedef struct limited {
    counter c;
    long limit;
} limited;

static void *limited_alloc(void *ud, size_t bytes)
{
    limited *l = ud;
    return l->c.allocs >= l->limit ? NULL : count_alloc(&l->c, bytes);
}

static void limited_free(void *ud, void *p) { count_free(&((limited *)ud)->c, p); }

/* Out of memory for a replica: DDL_ENOMEM naming the part, and every block given back. */
static void test_no_memory(void)
{
    ddl_dataset d;
    make_data(&d, N);
    ddl_model *m = lenet(BATCH);
    CHECK(m != NULL);
    for (long limit = 1; limit <= 2; limit++) { /* the trainer's block, then the first replica */
        limited l = {{0, 0}, limit};
        ddl_allocator al = {limited_alloc, limited_free, &l};
        ddl_train_config tc;
        ddl_train_config_default(&tc);
        tc.micro_batches = 4;
        ddl_trainer *tr = NULL;
        char err[256] = "";
        CHECK(ddl_trainer_create(&tc, m, &d, &al, &tr, err, sizeof err) == DDL_ENOMEM);
        CHECK(tr == NULL);
        CHECK(strstr(err, limit == 1 ? "micro-batch 2 of 4" : "micro-batch 3 of 4") != NULL);
        CHECK(l.c.allocs == limit && l.c.frees == l.c.allocs);
    }
    ddl_model_destroy(m);
}

static void test_bad_counts(void)
{
    ddl_dataset d;
    make_data(&d, N);
    ddl_model *m = lenet(BATCH);
    CHECK(m != NULL);
    static const int bad[] = {-1, DDL_MAX_MICRO_BATCHES + 1};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        ddl_train_config tc;
        ddl_train_config_default(&tc);
        tc.micro_batches = bad[k];
        ddl_trainer *tr = (ddl_trainer *)&tc;
        char err[256] = "";
        CHECK(ddl_trainer_create(&tc, m, &d, NULL, &tr, err, sizeof err) == DDL_EINVAL);
        CHECK(tr == NULL);
        CHECK(strstr(err, "micro_batches") != NULL);
    }
    ddl_model_destroy(m);
}

int main(void)
{
    test_parts_add_up();
    test_threads();
    test_auto();
    test_allocations();
    test_bad_counts();
    test_no_memory();
    test_dropout_streams();
    return TEST_END();
}
