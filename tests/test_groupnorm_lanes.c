/* test_groupnorm_lanes.c - GroupNorm + ReLU's dgamma and dbeta (ops.c's row_grads, in 8-float
 * vectors) are, bit for bit, each row's sums in the lanes' order ops.c documents, added in sample
 * order: the same on every CPU path. Rows with and without a tail past the last 8 floats. */
/* ddl-test: beside (computes, bounds no time) */
#include "ddl.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

static ddl_rng rng;

static float *alloc_f(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof *p);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

static void fill(float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * ddl_rng_uniform(&rng);
}

/* grads_row: one row's (dy masked by y) x (x - m) r and dy sums in the order ops.c documents: 8
 * lanes, each a running sum of every 8th element, added as ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 +
 * 7)), then the elements past the last 8 one by one; no fused multiply-adds. */
static void grads_row(const float *x, const float *dy, const float *y, int n, float m, float r, float *dg, float *db)
{
    float a[8] = {0}, b[8] = {0}, ta, tb;
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) {
            float d = y[i + k] > 0.0f ? dy[i + k] : 0.0f, u = (x[i + k] - m) * r;
            a[k] += d * u;
            b[k] += d;
        }
    ta = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
    tb = ((b[0] + b[4]) + (b[2] + b[6])) + ((b[1] + b[5]) + (b[3] + b[7]));
    for (; i < n; i++) {
        float d = y[i] > 0.0f ? dy[i] : 0.0f, u = (x[i] - m) * r;
        ta += d * u;
        tb += d;
    }
    *dg = ta;
    *db = tb;
}

/* groupnorm_lanes: GroupNorm + ReLU's dgamma and dbeta are, bit for bit, each row's lane sums
 * (grads_row) added in sample order: the same on every CPU (rows with and without a tail). */
static void groupnorm_lanes(int n, int c, int s, int groups)
{
    size_t nx = (size_t)n * c * s, nm = (size_t)n * groups * 2;
    float *x = alloc_f(nx), *dy = alloc_f(nx), *y = alloc_f(nx), *mr = alloc_f(nm), *dx = alloc_f(nx);
    float *gamma = alloc_f((size_t)c), *beta = alloc_f((size_t)c), *dg = alloc_f((size_t)c), *db = alloc_f((size_t)c);
    fill(x, nx, -2, 2), fill(dy, nx, -1, 1), fill(gamma, (size_t)c, 0.5f, 1.5f), fill(beta, (size_t)c, -1, 1);
    ddl_groupnorm_relu_forward(n, c, s, groups, x, gamma, beta, y, mr);
    ddl_groupnorm_relu_backward(n, c, s, groups, x, gamma, mr, y, dy, dx, dg, db);
    int same = 1, cg = c / groups;
    for (int ch = 0; ch < c; ch++) {
        float want_g = 0.0f, want_b = 0.0f;
        for (int i = 0; i < n; i++) {
            size_t at = ((size_t)i * c + ch) * s;
            const float *stat = mr + ((size_t)i * groups + ch / cg) * 2;
            float rg, rb;
            grads_row(x + at, dy + at, y + at, s, stat[0], stat[1], &rg, &rb);
            want_g += rg;
            want_b += rb;
        }
        same &= dg[ch] == want_g && db[ch] == want_b;
    }
    CHECK(same);
    free(x), free(dy), free(y), free(mr), free(dx), free(gamma), free(beta), free(dg), free(db);
}

int main(void)
{
    ddl_rng_seed(&rng, 1234);
    ddl_set_threads(1);
    groupnorm_lanes(3, 8, 37, 4);
    groupnorm_lanes(2, 4, 64, 2);
    return TEST_END();
}
