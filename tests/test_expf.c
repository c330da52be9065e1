/* test_expf.c - ddl__expf_n (src/core/expf_lanes.c) gives the C library's expf bit for bit: over
 * every 61st float bit pattern (70 million: all signs, exponents and the mantissas' low bits),
 * the special cases (infinities, NaNs of two payloads, both zeros, the edges of overflow and
 * underflow, the subnormal results, the 2 inputs that tell glibc's fused reduction from an unfused
 * one), every length's tail (0 to 40) and in place. And the activations that take it (sigmoid and
 * SiLU, forward and backward, in chunks of 256 over the pool's ranges) give their scalar formulas'
 * bits. Where the CPU has
 * AVX-512 its 16 lanes must be in use (their check passed), where it has AVX2 and FMA the 8
 * lanes; each width the CPU has is checked in turn, then the library's loop; a width the CPU
 * lacks says it skipped. */
/* ddl-test: beside (computes, bounds no time) */
#include "ddl.h"
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void ddl__expf_n(size_t n, const float *x, float *y);
int ddl__expf_lanes(void);
int ddl__expf_use(int width);

static float from_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* same: y holds expf(x) bit for bit over n; the first difference said */
static int same(const char *what, size_t n, const float *x, const float *y)
{
    for (size_t i = 0; i < n; i++) {
        float w = expf(x[i]);
        if (memcmp(&w, &y[i], sizeof w) != 0) {
            fprintf(stderr, "  %s: expf(%a) is %a, ddl__expf_n gave %a\n", what, (double)x[i], (double)w,
                    (double)y[i]);
            return 0;
        }
    }
    return 1;
}

/* check_all: every check below with the lanes in use (said in failures by label) */
static void check_all(const char *label);

int main(void)
{
    int avx512 = 0, avx2 = 0;
#ifdef DDL_NO_CLONES
    CHECK(ddl__expf_lanes() == 0);
    printf("skipped a part: a DDL_NO_CLONES build has no lanes (the library's loop checked)\n");
#else
    avx512 = __builtin_cpu_supports("avx512f");
    avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    CHECK(ddl__expf_lanes() == (avx512 ? 16 : avx2 ? 8 : 0)); /* the widest, by default */
    if (!avx512)
        printf("skipped a part: no AVX-512 (its 16 lanes)\n");
    if (!avx2)
        printf("skipped a part: no AVX2 with FMA (its 8 lanes)\n");
#endif
    if (avx512) {
        CHECK(ddl__expf_use(16) == 16);
        check_all("16 lanes");
    }
    if (avx2) {
        CHECK(ddl__expf_use(8) == 8);
        check_all("8 lanes");
    }
    CHECK(ddl__expf_use(0) == 0);
    check_all("the library's loop");
    return TEST_END();
}

static void check_all(const char *label)
{
    printf("  %s\n", label);
    enum { B = 1 << 16 };
    float *x = malloc(B * sizeof *x), *y = malloc(B * sizeof *y);
    if (!x || !y) {
        CHECK(!"out of memory");
        return;
    }
    /* every 61st bit pattern, in blocks */
    int all = 1;
    uint64_t b = 0;
    while (b < (1ull << 32) && all) {
        size_t n = 0;
        for (; n < B && b < (1ull << 32); n++, b += 61)
            x[n] = from_bits((uint32_t)b);
        ddl__expf_n(n, x, y);
        all = same("stride 61", n, x, y);
    }
    CHECK(all);
    const float special[] = {-INFINITY, INFINITY, NAN, from_bits(0xffc00002u), from_bits(0x7fa00001u), 0.0f, -0.0f,
                             88.0f, 0x1.62e42ep6f, 0x1.62e430p6f, -88.0f, -0x1.9fe368p6f, -0x1.9fe36ap6f,
                             -0x1.9d1d9ep6f, -103.0f, -100.0f, -87.4f, 87.9f, from_bits(1), -from_bits(1),
                             1e-30f, -1e-30f, 1.0f, -1.0f, 0.5f, -20.0f,
                             /* the only 2 of 2^32 whose bits change when r = x 32 / ln 2 - k is not fused */
                             0x1.04845ep+5f, -0x1.f8cbb2p+5f};
    size_t ns = sizeof special / sizeof special[0];
    ddl__expf_n(ns, special, y);
    CHECK(same("special cases", ns, special, y));
    /* tails: each length from 0 to 40 writes its n floats and nothing after */
    for (size_t n = 0; n <= 40; n++) {
        for (size_t i = 0; i < 48; i++)
            x[i] = -0.37f * (float)i + (i % 3 == 0 ? 80.0f : 0.0f), y[i] = 12345.0f;
        ddl__expf_n(n, x, y);
        int untouched = 1;
        for (size_t i = n; i < 48; i++)
            untouched &= y[i] == 12345.0f;
        CHECK(same("a tail", n, x, y) && untouched);
    }
    /* in place, a special lane among ordinary ones */
    float in[20], keep[20];
    for (int i = 0; i < 20; i++)
        in[i] = keep[i] = i == 7 ? -200.0f : i == 9 ? NAN : -0.25f * (float)i;
    ddl__expf_n(20, in, in);
    CHECK(same("in place", 20, keep, in));
    /* sigmoid and SiLU: 1000 values over [-110, 110] and the special ones, in place too */
    enum { A = 1000 };
    float *v = malloc(A * sizeof *v), *g = malloc(A * sizeof *g), *out = malloc(A * sizeof *out);
    if (!v || !g || !out) {
        CHECK(!"out of memory");
        return;
    }
    for (int i = 0; i < A; i++)
        v[i] = i < (int)ns ? special[i] : -110.0f + 220.0f * (float)i / A, g[i] = 0.5f - (float)(i % 7) / 7.0f;
    int fs = 1, fl = 1, bl = 1;
    ddl_act_forward(DDL_ACT_SIGMOID, 0.0f, 0.0f, A, v, out);
    for (int i = 0; i < A; i++) {
        float want = 1.0f / (1.0f + expf(-v[i]));
        fs &= memcmp(&want, &out[i], sizeof want) == 0;
    }
    ddl_act_forward(DDL_ACT_SILU, 0.0f, 0.0f, A, v, out);
    for (int i = 0; i < A; i++) {
        float want = v[i] * (1.0f / (1.0f + expf(-v[i])));
        fl &= memcmp(&want, &out[i], sizeof want) == 0;
    }
    memcpy(out, g, A * sizeof *out); /* dx in dy's place */
    ddl_act_backward(DDL_ACT_SILU, 0.0f, 0.0f, A, v, NULL, out, out);
    for (int i = 0; i < A; i++) {
        float s = 1.0f / (1.0f + expf(-v[i])), want = g[i] * (s * (1.0f + v[i] * (1.0f - s)));
        bl &= memcmp(&want, &out[i], sizeof want) == 0;
    }
    CHECK(fs);
    CHECK(fl);
    CHECK(bl);
    memcpy(out, v, A * sizeof *out);
    ddl_act_forward(DDL_ACT_SIGMOID, 0.0f, 0.0f, A, out, out);
    for (int i = 0; i < A; i++) {
        float want = 1.0f / (1.0f + expf(-v[i]));
        fs &= memcmp(&want, &out[i], sizeof want) == 0;
    }
    CHECK(fs);
    free(x), free(y), free(v), free(g), free(out);
}
