/* test_threads.c - ddl_set_threads and the pool behind it (src/core/pool.c): every task runs
 * exactly once, from nested calls and from two calling threads at once too; the pool resizes;
 * matrix products split over threads give the bits of one thread, for the shapes of LeNet's and
 * U-Net's layers and every transposition, and so do the dense layer's gradients, the
 * convolutions (im2col, 3x3 and 5x5 wide, transposed), max-pool, ReLU, GroupNorm and the
 * cross-entropy, forward and backward, and ddl_add (the serial loop's bits, in place too). */
#include "check.h"
#include "core/impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the pool ---- */

#define MAX_TASKS 200

typedef struct counts {
    _Atomic int hits[MAX_TASKS];
    _Atomic int inner;
} counts;

static void count_task(void *ctx, int i) { atomic_fetch_add(&((counts *)ctx)->hits[i], 1); }

static void nested_task(void *ctx, int i)
{
    counts *c = ctx;
    counts inner;
    memset(&inner, 0, sizeof inner);
    ddl__parallel(5, count_task, &inner); /* runs in this thread: the pool is busy */
    int all = 1;
    for (int k = 0; k < 5; k++)
        all &= atomic_load(&inner.hits[k]) == 1;
    atomic_fetch_add(&c->inner, all);
    atomic_fetch_add(&c->hits[i], 1);
}

static int exactly_once(counts *c, int n)
{
    for (int i = 0; i < MAX_TASKS; i++)
        if (atomic_load(&c->hits[i]) != (i < n))
            return 0;
    return 1;
}

static void *caller(void *arg)
{
    int *bad = arg;
    for (int round = 0; round < 100000; round++) {
        counts c;
        memset(&c, 0, sizeof c);
        int n = 1 + round % 37;
        ddl__parallel(n, count_task, &c);
        *bad += !exactly_once(&c, n);
    }
    return NULL;
}

static void test_pool(void)
{
    CHECK(ddl_set_threads(3) == 3 && ddl__threads() == 3);
    int ok = 1;
    for (int n = 0; n <= 100 && ok; n++) {
        counts c;
        memset(&c, 0, sizeof c);
        ddl__parallel(n, count_task, &c);
        ok = exactly_once(&c, n);
    }
    CHECK(ok); /* 0 to 100 tasks, each once */
    counts c;
    memset(&c, 0, sizeof c);
    ddl__parallel(12, nested_task, &c);
    CHECK(exactly_once(&c, 12) && atomic_load(&c.inner) == 12);
    /* two threads calling at once: one gets the pool, the other runs its tasks itself */
    pthread_t t[2];
    int bad[2] = {0, 0};
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, caller, &bad[i]) == 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK(bad[0] == 0 && bad[1] == 0);
    CHECK(ddl_set_threads(2) == 2 && ddl__threads() == 2);
    CHECK(ddl_set_threads(0) == 1 && ddl__threads() == 1); /* below 1: 1 */
    memset(&c, 0, sizeof c);
    ddl__parallel(7, count_task, &c);
    CHECK(exactly_once(&c, 7));
    CHECK(ddl_set_threads(1000) == DDL__MAX_THREADS);
    /* a child forked while the pool has workers goes on alone instead of waiting for them */
    CHECK(ddl_set_threads(2) == 2);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10);
        counts k;
        memset(&k, 0, sizeof k);
        ddl__parallel(9, count_task, &k);
        _exit(exactly_once(&k, 9) && ddl__threads() == 1 ? 0 : 1);
    }
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(ddl_set_threads(1) == 1);
}

/* ---- products: the bits of one thread ---- */

typedef struct shape {
    const char *what;
    int m, n, k;
} shape;

static const shape shapes[] = {
    {"LeNet conv2 forward", 16, 6400, 150},
    {"LeNet conv2 weight gradient", 16, 150, 6400},
    {"LeNet conv2 input gradient", 150, 6400, 16},
    {"LeNet fc1 forward", 64, 120, 400},
    {"LeNet fc1 weight gradient", 120, 400, 64},
    {"U-Net 3x3 8 channels at 64x64", 8, 4096, 72},
    {"U-Net 3x3 weight gradient", 8, 72, 4096},
    {"tall: split by rows", 1000, 40, 300},
    {"odd sizes", 333, 777, 129},
    {"one row", 1, 5000, 300},
};

static void fill(float *x, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
}

static void test_products(void)
{
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const shape *q = &shapes[s];
        size_t na = (size_t)q->m * q->k, nb = (size_t)q->k * q->n, nc = (size_t)q->m * q->n;
        float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c0 = malloc(nc * sizeof *c0),
              *c1 = malloc(nc * sizeof *c1);
        CHECK(a && b && c0 && c1);
        if (!a || !b || !c0 || !c1)
            return;
        fill(a, na, 1 + (unsigned)s);
        fill(b, nb, 100 + (unsigned)s);
        for (int tr = 0; tr < 4; tr++) {
            int ta = tr & 1, tb = tr >> 1, lda = ta ? q->m : q->k, ldb = tb ? q->k : q->n;
            for (int beta1 = 0; beta1 < 2; beta1++) {
                ddl_set_threads(1);
                fill(c0, nc, 7);
                ddl_gemm(ta, tb, q->m, q->n, q->k, 0.5f, a, lda, b, ldb, beta1 ? 1.0f : 0.0f, c0, q->n);
                int same = 1;
                for (int t = 2; t <= 4; t++) {
                    ddl_set_threads(t);
                    fill(c1, nc, 7);
                    ddl_gemm(ta, tb, q->m, q->n, q->k, 0.5f, a, lda, b, ldb, beta1 ? 1.0f : 0.0f, c1, q->n);
                    same &= memcmp(c0, c1, nc * sizeof *c0) == 0;
                }
                CHECK(same);
                if (!same)
                    fprintf(stderr, "  %s, trans %d %d, beta %d: threads change the bits\n", q->what, ta, tb, beta1);
            }
        }
        /* and the product is right: one element against a double sum */
        ddl_set_threads(3);
        ddl_gemm(0, 0, q->m, q->n, q->k, 1.0f, a, q->k, b, q->n, 0.0f, c1, q->n);
        int i = q->m - 1, j = q->n - 1;
        double want = 0.0;
        for (int p = 0; p < q->k; p++)
            want += (double)a[(size_t)i * q->k + p] * b[(size_t)p * q->n + j];
        CHECK_NEAR(c1[(size_t)i * q->n + j], want, 1e-3 * (1.0 + q->k / 100.0));
        free(a), free(b), free(c0), free(c1);
    }
    ddl_set_threads(1);
}

/* dense_grads: ddl_dense_backward's dx, dw and db (dw, db accumulated onto fixed values) with
 * `threads`, or (threads 0) the reference: two ddl_gemm calls and a loop at 1 thread, as the op
 * ran before its products shared one job. Returns the floats written into out. */
static size_t dense_grads(int batch, int in, int out_n, int threads, float *out)
{
    size_t nx = (size_t)batch * in, nw = (size_t)out_n * in, ny = (size_t)batch * out_n;
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *dy = malloc(ny * 4);
    float *dx = out, *dw = dx + nx, *db = dw + nw;
    fill(x, nx, 21), fill(w, nw, 22), fill(dy, ny, 23), fill(dw, nw, 24), fill(db, (size_t)out_n, 25);
    for (size_t i = 0; i < ny; i++) /* fill's values add up exactly: a third of each does not, so a */
        dy[i] /= 3.0f;             /* sum taken in another order shows */
    ddl_set_threads(threads ? threads : 1);
    if (threads) {
        ddl_dense_backward(batch, in, out_n, x, w, dy, dx, dw, db);
    } else {
        ddl_gemm(1, 0, out_n, in, batch, 1.0f, dy, out_n, x, in, 1.0f, dw, in);
        for (int o = 0; o < out_n; o++) {
            float sum = 0.0f;
            for (int i = 0; i < batch; i++)
                sum += dy[(size_t)i * out_n + o];
            db[o] += sum;
        }
        ddl_gemm(0, 0, batch, in, out_n, 1.0f, dy, out_n, w, in, 0.0f, dx, in);
    }
    free(x), free(w), free(dy);
    return nx + nw + (size_t)out_n;
}

/* the dense layer's gradients run as one job of both products' blocks: the bits of the two
 * products apart, at any thread count (LeNet's fc1, fc2, fc3 and a batch of one) */
static void test_dense(void)
{
    static const int dims[][3] = {{64, 400, 120}, {64, 120, 84}, {64, 84, 10}, {1, 400, 120}};
    for (size_t s = 0; s < sizeof dims / sizeof dims[0]; s++) {
        int batch = dims[s][0], in = dims[s][1], out_n = dims[s][2];
        size_t n = (size_t)batch * in + (size_t)out_n * in + (size_t)out_n;
        float *ref = malloc(n * 4), *got = malloc(n * 4);
        dense_grads(batch, in, out_n, 0, ref);
        int same = 1;
        for (int t = 1; t <= 3; t++) {
            dense_grads(batch, in, out_n, t, got);
            same &= memcmp(ref, got, n * 4) == 0;
        }
        CHECK(same);
        if (!same)
            fprintf(stderr, "  dense %dx%dx%d: the gradients differ from the products apart\n", batch, in, out_n);
        free(ref), free(got);
    }
    ddl_set_threads(1);
}

/* ---- kernels: the bits of one thread ---- */

typedef struct layer {
    const char *what;
    ddl_conv2d g;
    int deconv;
} layer;

/* CONV: a geometry of the fields ddl_conv2d had first (the appended ones 0) */
#define CONV(n, c, h, w, o, kh, kw, s, p)                                                                  \
    {.batch = n, .in_c = c, .in_h = h, .in_w = w, .out_c = o, .k_h = kh, .k_w = kw, .stride = s, .pad = p}

static const layer layers[] = {
    {"LeNet conv1 (wide kernel, blocks of 6)", CONV(64, 1, 28, 28, 6, 5, 5, 1, 2), 0},
    {"LeNet conv2 (wide kernel 5x5)", CONV(64, 6, 14, 14, 16, 5, 5, 1, 0), 0},
    {"7x7 (im2col, chunks)", CONV(16, 3, 20, 20, 8, 7, 7, 1, 3), 0},
    {"U-Net 3x3 (wide kernel)", CONV(8, 8, 32, 32, 16, 3, 3, 1, 1), 0},
    {"U-Net 3x3, weight gradient by samples (16 + 4)", CONV(20, 8, 32, 32, 8, 3, 3, 1, 1), 0},
    {"U-Net 3x3, odd channels", CONV(5, 6, 16, 16, 7, 3, 3, 1, 1), 0},
    {"strided 4x4 (im2col)", CONV(16, 4, 20, 20, 8, 4, 4, 2, 1), 0},
    {"U-Net up 2x2 stride 2 (transposed)", CONV(8, 16, 16, 16, 8, 2, 2, 2, 0), 1},
};

/* run_layer: forward and backward of l with `threads`; every output into out (y, dx, dw, db,
 * then the max-pool and ReLU of y and their gradients), as one buffer to compare. */
static size_t run_layer(const layer *l, int threads, float *out)
{
    const ddl_conv2d *g = &l->g;
    int oh = l->deconv ? ddl_deconv2d_out_h(g) : ddl_conv2d_out_h(g);
    int ow = l->deconv ? ddl_deconv2d_out_w(g) : ddl_conv2d_out_w(g);
    size_t nx = (size_t)g->batch * g->in_c * g->in_h * g->in_w, ny = (size_t)g->batch * g->out_c * oh * ow;
    size_t nw = (size_t)g->in_c * g->out_c * g->k_h * g->k_w, nws = l->deconv ? ddl_deconv2d_workspace(g)
                                                                             : ddl_conv2d_workspace(g);
    size_t npool = (size_t)g->batch * g->out_c * (oh / 2) * (ow / 2);
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *b = malloc((size_t)g->out_c * 4), *dy = malloc(ny * 4);
    float *ws = aligned_alloc(DDL_ALIGN, (nws * 4 + DDL_ALIGN) / DDL_ALIGN * DDL_ALIGN), *pdy = malloc(npool * 4);
    int32_t *arg = malloc(npool * 4);
    float *y = out, *dx = y + ny, *dw = dx + nx, *db = dw + nw, *pooled = db + g->out_c, *unpooled = pooled + npool;
    float *relu = unpooled + ny, *drelu = relu + ny;
    fill(x, nx, 11), fill(w, nw, 12), fill(b, (size_t)g->out_c, 13), fill(dy, ny, 14), fill(pdy, npool, 15);
    memset(dw, 0, nw * 4), memset(db, 0, (size_t)g->out_c * 4);
    ddl_set_threads(threads);
    if (l->deconv) {
        ddl_deconv2d_forward(g, x, w, b, y, ws);
        ddl_deconv2d_backward(g, x, w, dy, dx, dw, db, ws);
    } else {
        ddl_conv2d_forward(g, x, w, b, y, ws);
        ddl_conv2d_backward(g, x, w, dy, dx, dw, db, ws);
    }
    ddl_maxpool_forward(g->batch, g->out_c, oh, ow, 2, 2, y, pooled, arg);
    ddl_maxpool_backward(g->batch, g->out_c, oh, ow, 2, 2, pdy, arg, unpooled);
    ddl_relu_forward(ny, y, relu);
    ddl_relu_backward(ny, relu, dy, drelu);
    free(x), free(w), free(b), free(dy), free(ws), free(pdy), free(arg);
    return 4 * ny + nx + nw + (size_t)g->out_c + npool;
}

static void test_kernels(void)
{
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
        const size_t cap = (size_t)8 << 20;
        float *one = calloc(cap, 4), *many = calloc(cap, 4);
        CHECK(one && many);
        if (!one || !many)
            return;
        size_t n = run_layer(&layers[i], 1, one);
        CHECK(n <= cap);
        int same = 1;
        for (int t = 2; t <= 3; t++) {
            memset(many, 0xff, n * 4);
            run_layer(&layers[i], t, many);
            same &= memcmp(one, many, n * 4) == 0;
        }
        CHECK(same);
        if (!same)
            fprintf(stderr, "  %s: threads change the bits\n", layers[i].what);
        free(one), free(many);
    }
    ddl_set_threads(1);
}

/* run_norm_loss: GroupNorm forward and backward, softmax cross-entropy, dice, concat and split of
 * a U-Net-sized batch with `threads`; every output into out; returns the floats written. */
static size_t run_norm_loss(int threads, float *out)
{
    enum { N = 16, C = 16, S = 64 * 64, G = 4, K = 11 };
    size_t nx = (size_t)N * C * S, nl = (size_t)N * K * S;
    float *x = malloc(nx * 4), *dy = malloc(nx * 4), *gamma = malloc(C * 4), *beta = malloc(C * 4);
    float *logits = malloc(nl * 4);
    uint16_t *t = malloc((size_t)N * S * sizeof *t);
    float *y = out, *mr = y + nx, *dx = mr + N * G * 2, *dg = dx + nx, *db = dg + C, *probs = db + C;
    float *dl = probs + nl, *loss = dl + nl;
    fill(x, nx, 21), fill(dy, nx, 22), fill(gamma, C, 23), fill(beta, C, 24), fill(logits, nl, 25);
    for (size_t i = 0; i < (size_t)N * S; i++)
        t[i] = (uint16_t)((i * 7) % (K + 1)); /* K: an ignored target */
    memset(dg, 0, C * 4), memset(db, 0, C * 4);
    ddl_set_threads(threads);
    ddl_groupnorm_forward(N, C, S, G, x, gamma, beta, y, mr);
    ddl_groupnorm_backward(N, C, S, G, x, gamma, mr, dy, dx, dg, db);
    double l[2] = {ddl_softmax_xent(N, K, S, logits, t, 1.0f / (N * S), probs, dl)};
    l[1] = ddl_dice_loss(N, K, S, probs, t, 0.5f / N, dl); /* its gradient joins dl */
    memcpy(loss, l, sizeof l);
    float *cat = loss + 4, *back = cat + 2 * nx; /* U-Net's skip joins: copies by sample */
    ddl_concat_channels(N, C, C, S, x, dy, cat);
    ddl_split_channels(N, C, C, S, cat, NULL, back);
    free(x), free(dy), free(gamma), free(beta), free(logits), free(t);
    return (size_t)(back + nx - out);
}

static void test_norm_loss(void)
{
    const size_t cap = (size_t)8 << 20;
    float *one = calloc(cap, 4), *many = calloc(cap, 4);
    CHECK(one && many);
    if (!one || !many)
        return;
    size_t n = run_norm_loss(1, one);
    CHECK(n <= cap);
    memset(many, 0xff, n * 4);
    run_norm_loss(3, many);
    CHECK(memcmp(one, many, n * 4) == 0); /* GroupNorm and the losses: the bits of one thread */
    free(one), free(many);
    ddl_set_threads(1);
}

/* ddl_add: y = a + b, the serial loop's bits at 1, 2 and 3 threads, into a fresh y and in place
 * over either input; a count that cuts into ranges with a tail. */
static void test_add(void)
{
    size_t n = 3 * 16384 + 77;
    float *a = malloc(n * 4), *b = malloc(n * 4), *want = malloc(n * 4), *y = malloc(n * 4);
    CHECK(a && b && want && y);
    if (!a || !b || !want || !y)
        return;
    fill(a, n, 31), fill(b, n, 32);
    for (size_t i = 0; i < n; i++)
        want[i] = a[i] + b[i];
    for (int t = 1; t <= 3; t++) {
        ddl_set_threads(t);
        memset(y, 0, n * 4);
        ddl_add(n, a, b, y);
        CHECK(memcmp(y, want, n * 4) == 0);
        memcpy(y, a, n * 4);
        ddl_add(n, y, b, y); /* y is a */
        CHECK(memcmp(y, want, n * 4) == 0);
        memcpy(y, b, n * 4);
        ddl_add(n, a, y, y); /* y is b */
        CHECK(memcmp(y, want, n * 4) == 0);
    }
    ddl_set_threads(1);
    free(a), free(b), free(want), free(y);
}

int main(void)
{
    test_pool();
    test_products();
    test_dense();
    test_kernels();
    test_norm_loss();
    test_add();
    return TEST_END();
}
