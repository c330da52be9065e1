/* test_gemm.c - ddl_gemm against a naive double-precision loop: all four transpose combinations,
 * odd sizes, alpha and beta (including beta 0 over NaN), leading dimensions wider than the
 * matrices, and that nothing outside C's m x n window is written. Where the CPU has AVX-512 (and
 * ddl_gemm runs its kernels, gemm_avx512.c): LeNet's and U-Net's shapes and every tile edge
 * against the naive loop, and a product cut into blocks of rows or columns giving the same bits
 * as the whole. */
#include "ddl.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */

/* internal (gemm_avx512.c): 1 when ddl_gemm's AVX-512 kernels take op(A) op(B) of n columns */
int ddl__gemm_avx512_takes(int trans_a, int trans_b, int n);

static void fill(ddl_rng *r, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = 2.0f * ddl_rng_uniform(r) - 1.0f;
}

/* naive: C = alpha op(A) op(B) + beta C in double (beta 0 ignores C). */
static void naive(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                  int ldb, float beta, float *c, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0.0;
            for (int p = 0; p < k; p++) {
                double av = ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
                double bv = tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
                s += av * bv;
            }
            double old = beta == 0.0f ? 0.0 : (double)beta * c[(size_t)i * ldc + j];
            c[(size_t)i * ldc + j] = (float)(alpha * s + old);
        }
}

/* TAIL: floats past C's end, checked like its padding columns */
#define TAIL 32

/* snan: a signalling NaN. In C's padding and tail it shows any write, even one that stores the
 * value it read (a multiply-add of 0 would return it quiet, with other bits). */
static float snan(void)
{
    uint32_t bits = 0x7fa00000u;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* one_case: compare ddl_gemm with naive for one configuration; pad widens every leading dim. */
static void one_case(ddl_rng *r, int ta, int tb, int m, int n, int k, float alpha, float beta, int pad)
{
    int a_rows = ta ? k : m, a_cols = ta ? m : k;
    int b_rows = tb ? n : k, b_cols = tb ? k : n;
    int lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
    size_t na = (size_t)a_rows * lda, nb = (size_t)b_rows * ldb, nc = (size_t)m * ldc;
    float *a = malloc((na + 1) * sizeof *a), *b = malloc((nb + 1) * sizeof *b);
    float *c = malloc((nc + TAIL) * sizeof *c), *ref = malloc((nc + TAIL) * sizeof *ref);
    fill(r, a, na);
    fill(r, b, nb);
    fill(r, c, nc);
    for (size_t at = 0; at < nc + TAIL; at++)
        if (at >= nc || (int)(at % ldc) >= n)
            c[at] = snan();
    if (beta == 0.0f) /* beta 0 must overwrite, even NaN */
        for (int i = 0; i < m; i++)
            c[(size_t)i * ldc] = NAN;
    memcpy(ref, c, (nc + TAIL) * sizeof *c);
    ddl_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    naive(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, ref, ldc);
    double worst = 0.0;
    int outside_ok = 1;
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < ldc; j++) {
            size_t at = (size_t)i * ldc + j;
            if (j >= n) { /* padding columns must be untouched */
                if (memcmp(&c[at], &ref[at], sizeof *c) != 0)
                    outside_ok = 0;
                continue;
            }
            double err = fabs((double)c[at] - ref[at]) / (1.0 + fabs(ref[at]));
            if (!(err <= worst)) /* also catches NaN */
                worst = isnan(err) ? INFINITY : err;
        }
    }
    if (memcmp(c + nc, ref + nc, TAIL * sizeof *c) != 0) /* nor what follows C */
        outside_ok = 0;
    double tol = 1e-6 * (k + 4);
    if (!(worst <= tol) || !outside_ok)
        fprintf(stderr, "  gemm ta=%d tb=%d m=%d n=%d k=%d alpha=%g beta=%g pad=%d: err %g outside_ok %d\n", ta,
                tb, m, n, k, (double)alpha, (double)beta, pad, worst, outside_ok);
    CHECK(worst <= tol);
    CHECK(outside_ok);
    free(a);
    free(b);
    free(c);
    free(ref);
}

/* ---- tests ---- */

static void test_sizes(ddl_rng *r)
{
    static const int sizes[] = {1, 2, 3, 5, 17, 33, 65};
    int ns = (int)(sizeof sizes / sizeof sizes[0]);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int im = 0; im < ns; im++)
                for (int in = 0; in < ns; in += 2)
                    for (int ik = 0; ik < ns; ik += 3)
                        one_case(r, ta, tb, sizes[im], sizes[in], sizes[ik], 1.0f, 0.0f, 0);
}

static void test_alpha_beta_ld(ddl_rng *r)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            one_case(r, ta, tb, 17, 65, 33, 0.5f, 1.0f, 3);
            one_case(r, ta, tb, 65, 17, 3, -2.0f, 0.25f, 7);
            one_case(r, ta, tb, 3, 1, 65, 1.0f, 0.0f, 1);
            one_case(r, ta, tb, 1, 33, 17, 1.5f, -1.0f, 5);
        }
}

/* larger than every built-in block size (KC 256, MC 32), so blocking edges are covered */
static void test_large(ddl_rng *r)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            one_case(r, ta, tb, 70, 131, 600, 1.0f, 1.0f, 2);
}

/* alpha 0 or k 0: C = beta C only */
static void test_degenerate(void)
{
    float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
    float c[4] = {1, 2, 3, 4};
    ddl_gemm(0, 0, 2, 2, 0, 1.0f, a, 2, b, 2, 2.0f, c, 2);
    CHECK(c[0] == 2.0f && c[3] == 8.0f);
    ddl_gemm(0, 0, 2, 2, 2, 0.0f, a, 2, b, 2, 0.5f, c, 2);
    CHECK(c[0] == 1.0f && c[3] == 4.0f);
    /* hand-computed: [1 2; 3 4] [5 6; 7 8] = [19 22; 43 50] */
    ddl_gemm(0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
    CHECK(c[0] == 19.0f && c[1] == 22.0f && c[2] == 43.0f && c[3] == 50.0f);
    /* m or n 0: nothing written, nothing read */
    ddl_gemm(0, 0, 0, 2, 2, 1.0f, NULL, 2, b, 2, 0.0f, NULL, 2);
    CHECK(ddl_gemm_backend() != NULL);
    CHECK(strcmp(ddl_gemm_backend(), "openblas") == 0 || strcmp(ddl_gemm_backend(), "builtin") == 0);
    /* tests/test_cpus.sh reads this line to know which kernels an emulated CPU got */
    const char *k = ddl_cpu_kernels();
    printf("  kernels: %s, gemm: %s\n", k, ddl_gemm_backend());
    CHECK(strcmp(k, "avx512") == 0 || strcmp(k, "avx2") == 0 || strcmp(k, "x86-64-v2") == 0 ||
          strcmp(k, "portable") == 0);
    /* the AVX-512 kernels run exactly where ddl_cpu_kernels says so */
    CHECK(ddl__gemm_avx512_takes(0, 0, 16) == (strcmp(k, "avx512") == 0));
}

/* ---- the AVX-512 kernels, where this CPU has them ---- */

static void test_avx512_shapes(ddl_rng *r)
{
    /* LeNet's dense layers at batch 64: fc1 forward, weight and input gradients; fc2 forward */
    one_case(r, 0, 1, 64, 120, 400, 1.0f, 1.0f, 0);
    one_case(r, 1, 0, 120, 400, 64, 1.0f, 1.0f, 0);
    one_case(r, 0, 0, 64, 400, 120, 1.0f, 0.0f, 0);
    one_case(r, 0, 1, 64, 84, 120, 1.0f, 1.0f, 0);
    /* U-Net's: a transposed convolution's block, and long-k products by the dot kernel (a last
     * step of 13 lanes; of 5) */
    one_case(r, 0, 0, 11, 512, 8, 1.0f, 0.0f, 0);
    one_case(r, 1, 0, 8, 512, 11, 1.0f, 0.0f, 0);
    one_case(r, 0, 1, 11, 8, 2061, 1.0f, 0.0f, 0);
    one_case(r, 0, 1, 5, 37, 1037, -0.5f, 0.5f, 3);
    /* LeNet's fc3 forward: 10 columns, by the dot kernel */
    one_case(r, 0, 1, 64, 10, 84, 1.0f, 1.0f, 0);
    /* every edge: tiles of 8 x 32, panels of 64 rows and 256 deep, left partial */
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            one_case(r, ta, tb, 67, 49, 259, 1.5f, -1.0f, 5);
            one_case(r, ta, tb, 1, 16, 1, 1.0f, 0.0f, 0);
            one_case(r, ta, tb, 9, 33, 17, 1.0f, 0.25f, 2);
        }
    /* fewer than 16 columns: A B^T by the dot kernel, the others left to the backend */
    CHECK(ddl__gemm_avx512_takes(0, 1, 10));
    CHECK(!ddl__gemm_avx512_takes(0, 0, 10) && !ddl__gemm_avx512_takes(1, 0, 15));
}

/* cut_same: op(A) op(B) as a whole (under ddl_gemm's 1M multiply-adds, so one call), then as 3
 * blocks of rows and as 3 blocks of columns (each at least 16 wide, so the same kernel takes
 * them): the same bits, as ddl_gemm's threads need. */
static void cut_same(ddl_rng *r, int ta, int tb, int m, int n, int k)
{
    int lda = ta ? m : k, ldb = tb ? k : n;
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b);
    float *whole = malloc(nc * sizeof *whole), *cut = malloc(nc * sizeof *cut);
    fill(r, a, na);
    fill(r, b, nb);
    for (int by_cols = 0; by_cols < 2; by_cols++) {
        int at[4] = {0, by_cols ? 16 : 5, by_cols ? 53 : 37, by_cols ? n : m};
        fill(r, whole, nc);
        memcpy(cut, whole, nc * sizeof *cut);
        ddl_gemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 1.0f, whole, n);
        for (int q = 0; q < 3; q++) {
            int lo = at[q], len = at[q + 1] - lo;
            if (by_cols)
                ddl_gemm(ta, tb, m, len, k, 1.0f, a, lda, tb ? b + (size_t)lo * ldb : b + lo, ldb, 1.0f, cut + lo, n);
            else
                ddl_gemm(ta, tb, len, n, k, 1.0f, ta ? a + lo : a + (size_t)lo * lda, lda, b, ldb, 1.0f,
                         cut + (size_t)lo * n, n);
        }
        CHECK(memcmp(whole, cut, nc * sizeof *cut) == 0);
    }
    free(a), free(b), free(whole), free(cut);
}

static void test_avx512_cuts(ddl_rng *r)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            cut_same(r, ta, tb, 70, 90, 150); /* A B^T packed (k < 256) */
    cut_same(r, 0, 1, 40, 90, 260);           /* A B^T by the dot kernel */
}

int main(void)
{
    ddl_rng r;
    ddl_rng_seed(&r, 7);
    ddl_set_threads(1);
    test_sizes(&r);
    test_alpha_beta_ld(&r);
    test_large(&r);
    test_degenerate();
    if (ddl__gemm_avx512_takes(0, 0, 16)) {
        test_avx512_shapes(&r);
        test_avx512_cuts(&r);
    } else {
        printf("  AVX-512 kernels: not on this CPU or build, skipped\n");
    }
    return TEST_END();
}
