/* test_model.c - the model object and the training loop in one process: a finite-difference
 * gradient check of the whole LeNet, parameter layout as PyTorch's, zero allocations across
 * many training steps, bit-identical reruns, and learning on a small synthetic task. */
#include "ddl.h"
#include "check.h"
#include "count_alloc.h"
#include "core/impl.h" /* on_ready: what a trainer listens with */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>


/* An allocator that keeps only the documented contract: 16-byte alignment, never 32 or 64. */
static void *alloc16(void *ud, size_t bytes)
{
    ((counter *)ud)->allocs++;
    unsigned char *p = NULL;
    return posix_memalign((void **)&p, 64, bytes + 16) == 0 ? p + 16 : NULL;
}

static void free16(void *ud, void *p)
{
    ((counter *)ud)->frees++;
    if (p)
        free((unsigned char *)p - 16);
}

/* ---- synthetic data: class k lights up a k-dependent block of the image ---- */

static void make_data(ddl_dataset *d, uint8_t *img, uint8_t *lab, int n, uint64_t seed)
{
    ddl_rng r;
    ddl_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) {
        int k = (int)ddl_rng_below(&r, 10);
        lab[i] = (uint8_t)k;
        for (int p = 0; p < 784; p++) {
            int y = p / 28, x = p % 28;
            int on = y / 7 == k % 4 && x / 7 == k / 4 + (k >= 8);
            img[i * 784 + p] = (uint8_t)(on ? 200 + ddl_rng_below(&r, 55) : ddl_rng_below(&r, 60));
        }
    }
    memset(d, 0, sizeof *d);
    d->n = n;
    d->c = 1;
    d->h = d->w = 28;
    d->th = d->tw = 1;
    d->n_classes = 10;
    d->images = img;
    d->targets = lab;
}

/* ---- gradient check of the whole network ---- */

static double loss_of(ddl_model *m, const float *x, const uint16_t *y, int B)
{
    const float *logits = ddl_model_forward(m, x, B, 0, NULL);
    return ddl_softmax_xent(B, 10, 1, logits, y, 1.0f, NULL, NULL) / B;
}

static void test_lenet_gradients(void)
{
    enum { B = 3 };
    ddl_model_config mc = {.batch = B, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10};
    ddl_model *m = NULL;
    CHECK(ddl_model_create(ddl_model_lenet(), &mc, NULL, &m, NULL, 0) == DDL_OK);
    if (!m)
        return;
    CHECK(ddl_model_n_params(m) == 61706); /* PyTorch's LeNet-5 */
    CHECK(ddl_model_n_tensors(m) == 10);
    const ddl_param_info *t0 = ddl_model_tensor(m, 0), *t9 = ddl_model_tensor(m, 9);
    CHECK(!strcmp(t0->name, "conv1.weight") && t0->shape[0] == 6 && t0->shape[1] == 1 && t0->shape[3] == 5);
    CHECK(!strcmp(t9->name, "fc3.bias") && t9->offset + t9->count == 61706);
    ddl_model_init_weights(m, 3);
    float *p = ddl_model_params(m), *g = ddl_model_grads(m);
    for (size_t i = 0; i < ddl_model_n_params(m); i++) /* biases away from 0 so ReLUs are not all on one side */
        p[i] += 0.01f * (float)((int)(i % 7) - 3);
    static float x[B * 784];
    uint16_t y[B] = {1, 7, 3};
    ddl_rng r;
    ddl_rng_seed(&r, 11);
    for (int i = 0; i < B * 784; i++)
        x[i] = ddl_rng_normal(&r);
    static float dl[B * 10], probs[B * 10];
    ddl_model_zero_grads(m);
    const float *logits = ddl_model_forward(m, x, B, 1, NULL);
    ddl_softmax_xent(B, 10, 1, logits, y, 1.0f / B, probs, dl);
    ddl_model_backward(m, x, B, dl);
    int bad = 0, checked = 0;
    for (int ti = 0; ti < ddl_model_n_tensors(m); ti++) {
        const ddl_param_info *t = ddl_model_tensor(m, ti);
        for (int k = 0; k < 6; k++) {
            size_t i = t->offset + ddl_rng_below(&r, (uint32_t)t->count);
            float keep = p[i];
            const float eps = 1e-3f; /* small enough not to cross ReLU and max-pool kinks */
            p[i] = keep + eps;
            double lp = loss_of(m, x, y, B);
            p[i] = keep - eps;
            double lm = loss_of(m, x, y, B);
            p[i] = keep;
            double num = (lp - lm) / (2.0 * eps), ana = g[i];
            checked++;
            if (fabs(num - ana) > 2e-3 + 5e-2 * fabs(num)) {
                bad++;
                fprintf(stderr, "%s[%zu]: numeric %.6g analytic %.6g\n", t->name, i - t->offset, num, ana);
            }
        }
    }
    CHECK(checked == 60);
    CHECK(bad == 0);
    ddl_model_destroy(m);
}

/* ---- training: zero allocations, determinism, learning ---- */

static uint32_t train_run(uint64_t seed, int steps, counter *cnt, double *acc_out, long *allocs_during,
                          int misaligned)
{
    enum { N = 600 };
    static uint8_t img[N * 784], lab[N];
    ddl_dataset d;
    make_data(&d, img, lab, N, 5);
    ddl_allocator al = {count_alloc, count_free, cnt};
    if (misaligned)
        al = (ddl_allocator){alloc16, free16, cnt};
    ddl_model_config mc = {.batch = 32, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10};
    ddl_model *m = NULL;
    ddl_trainer *tr = NULL;
    if (ddl_model_create(ddl_model_lenet(), &mc, &al, &m, NULL, 0) != DDL_OK)
        return 0;
    ddl_model_set_norm(m, 0.2f, 0.3f);
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = 32;
    tc.seed = seed;
    if (ddl_trainer_create(&tc, m, &d, &al, &tr, NULL, 0) != DDL_OK)
        return 0;
    long before = cnt->allocs;
    int ok = 1;
    for (int s = 0; s < steps; s++)
        ok &= ddl_trainer_step(tr, NULL) == DDL_OK;
    ddl_eval_stats ev;
    ok &= ddl_trainer_evaluate(tr, &d, &ev) == DDL_OK;
    ddl_epoch_stats es;
    ok &= ddl_trainer_epoch(tr, &es) == DDL_OK;
    *allocs_during = cnt->allocs - before;
    *acc_out = ok ? ev.accuracy : -1.0;
    uint32_t crc = ddl_model_crc(m);
    ddl_trainer_destroy(tr);
    ddl_model_destroy(m);
    return crc;
}

static void test_training(void)
{
    counter c1 = {0, 0}, c2 = {0, 0}, c3 = {0, 0};
    double acc1, acc2, acc3;
    long during1, during2, during3;
    uint32_t a = train_run(1, 60, &c1, &acc1, &during1, 0);
    uint32_t b = train_run(1, 60, &c2, &acc2, &during2, 0);
    uint32_t c = train_run(2, 60, &c3, &acc3, &during3, 0);
    CHECK(c1.allocs == 2 && c1.frees == 2); /* the model's block and the trainer's block */
    CHECK(during1 == 0 && during2 == 0 && during3 == 0);
    CHECK(a == b);
    CHECK(a != c);
    CHECK(acc1 > 0.9); /* the synthetic task is easy: 60 steps of batch 32 learn it */
    CHECK(acc1 == acc2);
}

/* One alignment rule: memory ddl is given needs only 16 bytes of alignment, from an allocator or
 * from the caller; the results do not depend on where the memory lies. */
static void test_alignment(void)
{
    counter ca = {0, 0}, cm = {0, 0};
    double acc_a, acc_m;
    long during_a, during_m;
    uint32_t aligned = train_run(1, 20, &ca, &acc_a, &during_a, 0);
    uint32_t misaligned = train_run(1, 20, &cm, &acc_m, &during_m, 1);
    CHECK(aligned != 0 && misaligned == aligned);
    CHECK(acc_m == acc_a && during_m == 0);
    CHECK(cm.allocs == 2 && cm.frees == 2);

    counter cc = {0, 0};
    ddl_allocator al = {alloc16, free16, &cc};
    ddl_comm_config comm_cfg = {.rank = 0, .world_size = 1, .local_size = 1};
    ddl_comm *comm = NULL;
    CHECK(ddl_comm_create(&comm_cfg, &al, &comm, NULL, 0) == DDL_OK && comm != NULL);
    float v = 2.0f;
    CHECK(ddl_comm_allreduce(comm, &v, 1, DDL_FLOAT32, DDL_SUM) == DDL_OK && v == 2.0f);
    ddl_comm_destroy(comm);
    CHECK(cc.allocs == 1 && cc.frees == 1);

    /* caller memory 16 bytes past a 64-byte boundary: ddl_model_sizeof covers the slack */
    ddl_model_config mc = {.batch = 4, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10};
    size_t need = ddl_model_sizeof(ddl_model_lenet(), &mc);
    unsigned char *block = NULL;
    CHECK(posix_memalign((void **)&block, 64, need + 16) == 0);
    ddl_model *m = NULL;
    char err[DDL_ERR_BYTES] = "";
    CHECK(ddl_model_init(block + 16, need, ddl_model_lenet(), &mc, &m, err, sizeof err) == DDL_OK);
    CHECK(m != NULL && ((uintptr_t)ddl_model_params(m) % 64) == 0);
    if (m) {
        static float x[4 * 784];
        ddl_model_init_weights(m, 3);
        const float *logits = ddl_model_forward(m, x, 4, 0, NULL);
        CHECK(logits != NULL && logits[0] == logits[0]);
    }
    free(block);
}

/* ---- huge pages ---- */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define OWN_MALLOC 1 /* the sanitizer's allocator maps memory its own way: nothing to check */
#else
/* thp_mode: 1 if Linux gives transparent huge pages to memory that asks (mode always or
 * madvise), 0 if not (never, or no such file). */
static int thp_mode(void)
{
    char line[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f)
        return 0;
    int ok = fgets(line, sizeof line, f) != NULL && !strstr(line, "[never]");
    fclose(f);
    return ok;
}

/* huge_kb: AnonHugePages (kB) of the mapping that holds p, from /proc/self/smaps; -1 if none. */
static long huge_kb(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    int inside = 0;
    long kb = -1;
    uintptr_t at = (uintptr_t)p;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            inside = at >= lo && at < hi;
        else if (inside && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
            break;
    }
    fclose(f);
    return kb;
}
#endif

/* A model of more than 4 MiB made with malloc's memory asks for huge pages: LeNet at batch 512
 * (about 20 MB of activations) touched by one forward pass. Without the request (THP in madvise
 * mode, as Debian sets it) the mapping has no huge page; the first touch of a 4 kB page costs a
 * fault each, 46,000 of them for U-Net. */
static void test_huge_pages(void)
{
    ddl_model_config mc = {.batch = 512, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10};
    ddl_model *m = NULL;
    char err[DDL_ERR_BYTES] = "";
    CHECK(ddl_model_sizeof(ddl_model_lenet(), &mc) > ((size_t)8 << 20));
    CHECK(ddl_model_create(ddl_model_lenet(), &mc, NULL, &m, err, sizeof err) == DDL_OK && m != NULL);
    if (!m)
        return;
    static float x[512 * 784];
    ddl_model_init_weights(m, 5);
    CHECK(ddl_model_forward(m, x, 512, 1, NULL) != NULL);
#ifdef OWN_MALLOC
    printf("huge pages: skipped: the sanitizer's allocator maps memory its own way\n");
#else
    if (!thp_mode()) {
        printf("huge pages: skipped: transparent huge pages are off on this machine\n");
    } else {
        long kb = huge_kb(ddl_model_params(m));
        if (kb <= 0)
            fprintf(stderr, "huge pages: the model's mapping has AnonHugePages %ld kB\n", kb);
        CHECK(kb >= 2048);
    }
#endif
    ddl_model_destroy(m);
}

/* resident: the share of the pages of [p, p + bytes) in memory (mincore), or -1 */
static double resident(const void *p, size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)p / page * page;
    size_t n = ((uintptr_t)p + bytes - a + page - 1) / page, in = 0;
    unsigned char *v = malloc(n);
    if (!v || mincore((void *)a, n * page, v) != 0) {
        free(v);
        return -1.0;
    }
    for (size_t i = 0; i < n; i++)
        in += v[i] & 1;
    free(v);
    return (double)in / (double)n;
}

/* A trainer's first step does not pay the page faults of the model's activations: it writes them
 * at ddl_trainer_create (ddl__model_touch; about 0.4 s for U-Net in these VMs, 8% of a 32-step
 * epoch, before). LeNet at batch 512: 30 MB of scratch, none of it touched by ddl_model_create. */
static void test_touched(void)
{
    enum { N = 600 };
    static uint8_t img[N * 784], lab[N];
    ddl_dataset d;
    make_data(&d, img, lab, N, 5);
    ddl_model_config mc = {.batch = 512, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10};
    ddl_model *m = NULL;
    ddl_trainer *tr = NULL;
    CHECK(ddl_model_create(ddl_model_lenet(), &mc, NULL, &m, NULL, 0) == DDL_OK && m);
    if (!m)
        return;
    double before = resident(m->scratch, m->scratch_bytes);
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = 512;
    CHECK(ddl_trainer_create(&tc, m, &d, NULL, &tr, NULL, 0) == DDL_OK);
    double after = resident(m->scratch, m->scratch_bytes);
    printf("touched: %.0f MB of scratch, %.0f%% of its pages in memory after the model, %.0f%% after the trainer\n",
           (double)m->scratch_bytes / 1e6, 100.0 * before, 100.0 * after);
    CHECK(m->scratch_bytes > ((size_t)8 << 20));
    CHECK(after == 1.0);
    ddl_trainer_destroy(tr);
    ddl_model_destroy(m);
}

static void test_bad_config(void)
{
    ddl_model_config mc = {.batch = 8, .in_c = 3, .in_h = 28, .in_w = 28, .n_classes = 10};
    CHECK(ddl_model_sizeof(ddl_model_lenet(), &mc) == 0);
    char err[DDL_ERR_BYTES] = "";
    CHECK(ddl_model_check(ddl_model_lenet(), &mc, err, sizeof err) == DDL_EINVAL);
    CHECK(strcmp(err, "lenet: needs 1x28x28 input") == 0);
    ddl_model *m = (ddl_model *)1;
    err[0] = '\0';
    CHECK(ddl_model_create(ddl_model_lenet(), &mc, NULL, &m, err, sizeof err) == DDL_EINVAL && m == NULL);
    CHECK(strcmp(err, "lenet: needs 1x28x28 input") == 0);
    mc.n_classes = 1;
    CHECK(ddl_model_create(ddl_model_lenet(), &mc, NULL, &m, err, sizeof err) == DDL_EINVAL && m == NULL);
    CHECK(strcmp(err, "lenet: 1 classes, expected 2 to 1024") == 0);
    mc.n_classes = 10;
    mc.in_c = 1;
    size_t need = ddl_model_sizeof(ddl_model_lenet(), &mc);
    CHECK(need > 0);
    void *mem = NULL;
    CHECK(posix_memalign(&mem, 64, need) == 0);
    CHECK(ddl_model_init(mem, need - 1, ddl_model_lenet(), &mc, &m, err, sizeof err) == DDL_ENOMEM && m == NULL);
    CHECK(strstr(err, "lenet: caller memory of") != NULL && strstr(err, "ddl_model_sizeof says") != NULL);
    CHECK(ddl_model_init(mem, need, ddl_model_lenet(), &mc, &m, NULL, 0) == DDL_OK && m != NULL);
    /* a trainer refuses a global batch the model was not built for */
    static uint8_t img[40 * 784], lab[40];
    ddl_dataset d;
    make_data(&d, img, lab, 40, 1);
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = 16;
    ddl_trainer *tr = NULL;
    CHECK(ddl_trainer_create(&tc, m, &d, NULL, &tr, err, sizeof err) == DDL_EINVAL && tr == NULL);
    CHECK(strcmp(err, "global batch 16 on 1 ranks needs a model built for batch 16, not 8") == 0);
    ddl_model_destroy(m); /* caller memory: a no-op */
    free(mem);
    CHECK(ddl_model_find("lenet") == ddl_model_lenet());
    CHECK(ddl_model_find("nope") == NULL);
}

/* ---- backward reports final gradients: version 2 through the pass, version 1 by its state ---- */

static size_t ready_at[8];
static int n_ready;
static void on_ready(void *ud, size_t from)
{
    (void)ud;
    if (n_ready < 8)
        ready_at[n_ready] = from;
    n_ready++;
}

typedef struct two {
    float *w1, *w2, *g1, *g2;
} two;

static int two_build(void *self, const ddl_model_config *cfg, ddl_model_build *b)
{
    two *t = self;
    int s1[2] = {4, cfg->in_c * cfg->in_h * cfg->in_w}, s2[2] = {cfg->n_classes, 4};
    t->w1 = ddl_build_param(b, "fc1.weight", 2, s1, DDL_INIT_GLOROT, s1[1], 4, &t->g1);
    t->w2 = ddl_build_param(b, "fc2.weight", 2, s2, DDL_INIT_GLOROT, 4, s2[0], &t->g2);
    ddl_build_output(b, cfg->n_classes, 1, 1);
    return DDL_OK;
}

static void two_forward(void *self, const float *x, int batch, int training, ddl_rng *rng, float *logits)
{
    (void)self, (void)x, (void)training, (void)rng;
    memset(logits, 0, (size_t)batch * 2 * sizeof *logits);
}

/* written for version 1: four arguments, ddl_model_grads_ready with its own state */
static void two_backward_v1(void *self, const float *x, int batch, const float *dlogits)
{
    two *t = self;
    (void)x, (void)batch, (void)dlogits;
    ddl_model_grads_ready(self, t->g2);
    ddl_model_grads_ready(self, t->g1);
}

static void test_ready(void)
{
    char err[DDL_ERR_BYTES];
    ddl_model_config mc = {.batch = 4, .in_c = 1, .in_h = 28, .in_w = 28, .n_classes = 10};
    ddl_model *m = NULL;
    static float x[4 * 784], dl[4 * 10];
    /* lenet (version 2): four reports, later layers first, each further back in the buffer */
    CHECK(ddl_model_create(ddl_model_lenet(), &mc, NULL, &m, err, sizeof err) == DDL_OK);
    m->on_ready = on_ready;
    n_ready = 0;
    ddl_model_forward(m, x, 4, 1, NULL);
    ddl_model_backward(m, x, 4, dl);
    CHECK(n_ready == 4 && ready_at[0] > ready_at[1] && ready_at[1] > ready_at[2] && ready_at[2] > ready_at[3] &&
          ready_at[0] < ddl_model_n_params(m));
    ddl_model_destroy(m);

    /* a version 1 plugin still builds, and its reports reach the listener */
    ddl_model_plugin v1 = {.version = 1, .name = "two", .self_bytes = sizeof(two), .build = two_build,
                           .forward = two_forward};
    v1.backward = (void (*)(void *, const float *, int, const float *, ddl_backward *))(void (*)(void))two_backward_v1;
    mc.n_classes = 2;
    CHECK(ddl_model_create(&v1, &mc, NULL, &m, err, sizeof err) == DDL_OK);
    if (m) {
        m->on_ready = on_ready;
        n_ready = 0;
        ddl_model_backward(m, x, 4, dl);
        CHECK(n_ready == 2 && ready_at[0] == 4 * 784 && ready_at[1] == 0);
        /* outside a backward pass a report does nothing */
        ddl_model_grads_ready(m->self, ddl_model_grads(m));
        ddl_backward_ready(NULL, ddl_model_grads(m));
        CHECK(n_ready == 2);
        ddl_model_destroy(m);
    }
    /* a version this ddl does not know is refused, naming the versions it takes */
    v1.version = DDL_MODEL_VERSION + 1;
    CHECK(ddl_model_create(&v1, &mc, NULL, &m, err, sizeof err) == DDL_EINVAL && strstr(err, "takes 1 to 2"));
}

int main(void)
{
    test_ready();
    test_lenet_gradients();
    test_training();
    test_alignment();
    test_huge_pages();
    test_touched();
    test_bad_config();
    return TEST_END();
}
