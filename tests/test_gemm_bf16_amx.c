/* test_gemm_bf16_amx.c - the AMX bfloat16 product (gemm_bf16_amx.c), on any CPU: its loop over
 * emulated tiles (Intel's SDM semantics of TILELOADD, TDPBF16PS, TILESTORED) against
 * gemm_bf16.c's AMX reference, bit for bit, on sizes that are not multiples of the tiles (m, n,
 * k odd, one row, one column, a slice and more of k, more rows than a packed block), all four
 * transposes, alpha, C overwritten (not read: NaN there), wider leading dimensions, nothing
 * written outside C, sums small enough to be flushed; on chosen values, the order of
 * tdpbf16ps's sums (two per element, restarted per tile) that sets it apart from AVX512-BF16's;
 * where the CPU has AVX512-BF16, the same with the packing the CPU's tiles use (AVX-512).
 * The path choice on made-up CPUs: tiles failing their check are passed over, saying why.
 * Where the CPU has AMX: the tiles against the emulation, the run-time check, and ddl_gemm's bf16
 * path on them at 1 and 2 threads; elsewhere that part prints "skipped: no AMX". */
/* ddl-test: beside (computes, bounds no time) */
#include "ddl.h"
#include "check.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_case.h"

/* internal (gemm_bf16.c, gemm_bf16_amx.c, pool.c) */
gemm_fn ddl__gemm_bf16_ref, ddl__gemm_bf16_amx_ref, ddl__gemm_bf16_amx, ddl__gemm_bf16_amx_emu,
    ddl__gemm_bf16_amx_emu_avx512;
int ddl__gemm_bf16_avx512_have(void);
int ddl__gemm_bf16_amx_have(void);
int ddl__gemm_bf16_amx_check(char *note, size_t note_bytes);
int ddl__bf16_path(void);
const char *ddl__bf16_path_note(void);
int ddl__bf16_choose(int no_bf16, int no_amx, int amx, int (*amx_check)(char *, size_t), int avx512, char *note,
                     size_t note_bytes);
int ddl__set_precision(int precision);

/* cases: got against want on the AMX loop's shapes (tiles of 16 rows and 32 pairs, and their
 * edges), as gemm_case.h's sweep runs them; the number that differ. */
static int cases(gemm_fn *want, gemm_fn *got, int *n_cases)
{
    static const int sizes[][3] = {{1, 1, 1},     {1, 33, 3},     {7, 15, 17},   {16, 16, 32}, {17, 31, 33},
                                   {9, 17, 255},  {31, 33, 256},  {13, 65, 257}, {33, 1, 600}, {130, 40, 19},
                                   {3, 100, 513}, {200, 70, 301}, {6, 47, 25},  {300, 600, 40}};
    return sweep(want, got, sizes, sizeof sizes / sizeof sizes[0], 45, n_cases);
}

/* test_emulated: the loop over emulated tiles gives the AMX reference's bits. */
static void test_emulated(void)
{
    int n = 0, bad = cases(ddl__gemm_bf16_amx_ref, ddl__gemm_bf16_amx_emu, &n);
    CHECK(n > 150 && bad == 0);
    printf("AMX loop on emulated tiles against the AMX reference: %d cases, %d differ\n", n, bad);
}

/* test_emulated_avx512: the CPU's loop, AVX-512 packing and all, over emulated tiles: the same
 * bits (only the tile instructions are left untested on a CPU without AMX). */
static void test_emulated_avx512(void)
{
    int n = 0, bad = cases(ddl__gemm_bf16_amx_ref, ddl__gemm_bf16_amx_emu_avx512, &n);
    CHECK(n > 150 && bad == 0);
    printf("AMX loop with AVX-512 packing on emulated tiles against the AMX reference: %d cases, %d differ\n", n, bad);
}

/* test_threads: two threads running the emulated loop at once, each into its own C, give the
 * reference's bits (the emulated tiles, the packing and the path's first choice keep no shared
 * state; under SAN=thread, a race would show) */
typedef struct job {
    const float *a, *b;
    float *c;
    int m, n, k;
} job;

static void *run_job(void *arg)
{
    job *j = arg;
    ddl__gemm_bf16_amx_emu(0, 1, j->m, j->n, j->k, 1.0f, j->a, j->k, j->b, j->k, 1, j->c, j->n);
    (void)ddl__bf16_path();
    return NULL;
}

static void test_threads(void)
{
    enum { M = 40, N = 50, K = 300 };
    static float a[M * K], b[N * K], ref[M * N], c[2][M * N];
    ddl_rng r;
    ddl_rng_seed(&r, 5);
    fill(&r, a, M * K, 1.0f);
    fill(&r, b, N * K, 1.0f);
    ddl__gemm_bf16_amx_ref(0, 1, M, N, K, 1.0f, a, K, b, K, 1, ref, N);
    pthread_t t[2];
    job jobs[2] = {{a, b, c[0], M, N, K}, {a, b, c[1], M, N, K}};
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, run_job, &jobs[i]) == 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK(memcmp(c[0], ref, sizeof ref) == 0 && memcmp(c[1], ref, sizeof ref) == 0);
}

/* test_choose: the path choice on a made-up CPU: tiles that fail their check are not used, and
 * the note says why in one line; hidden AMX is said too; a CPU without AMX leaves no note. */
static int check_ok(char *note, size_t bytes)
{
    (void)note, (void)bytes;
    return 0;
}

static int check_bad(char *note, size_t bytes)
{
    snprintf(note, bytes, "AMX: tdpbf16ps gave C[0][1] = 0x1p+0 where its emulation (Intel's SDM) gives 0x1p+1");
    return DDL_EMISMATCH;
}

static void test_choose(void)
{
    char note[200];
    CHECK(ddl__bf16_choose(0, 0, 1, check_ok, 1, note, sizeof note) == 2 && !note[0]);
    CHECK(ddl__bf16_choose(0, 0, 1, check_bad, 1, note, sizeof note) == 1 && strstr(note, "C[0][1]"));
    CHECK(ddl__bf16_choose(0, 0, 1, check_bad, 0, note, sizeof note) == 0 && strstr(note, "emulation"));
    CHECK(ddl__bf16_choose(0, 1, 1, check_ok, 1, note, sizeof note) == 1 && strcmp(note, "AMX hidden by DDL_CPU_NO_AMX") == 0);
    CHECK(ddl__bf16_choose(0, 0, 0, check_ok, 1, note, sizeof note) == 1 && !note[0]);
    CHECK(ddl__bf16_choose(1, 0, 1, check_ok, 1, note, sizeof note) == 0);
}

/* one_row: C (1 x 1, from 0) = a . b over k in the order of fn. */
static float one_row(gemm_fn *fn, const float *a, const float *b, int k)
{
    float c = 0.0f;
    fn(0, 1, 1, 1, k, 1.0f, a, k, b, k, 1, &c, 1);
    return c;
}

/* test_order: values whose sum shows the order. a = (2^24, 1, -2^24, 1), b = 1: tdpbf16ps keeps
 * the even terms (2^24 - 2^24 = 0) apart from the odd ones (1 + 1) and gives 2; one sum taking
 * the terms in turn (the intrinsics guide's pseudocode) would give 1 (2^24 + 1 rounds to 2^24);
 * AVX512-BF16's order (the odd term first) 0. And the two sums restart with each tile of 16
 * pairs: 2^24 and 1 in the first tile, -2^24 and 1 in the second gives 1, not 2. */
static void test_order(void)
{
    float a[64] = {16777216.0f, 1.0f, -16777216.0f, 1.0f}, b[64];
    for (int i = 0; i < 64; i++)
        b[i] = 1.0f;
    CHECK(one_row(ddl__gemm_bf16_amx_emu, a, b, 4) == 2.0f);
    CHECK(one_row(ddl__gemm_bf16_amx_ref, a, b, 4) == 2.0f);
    CHECK(one_row(ddl__gemm_bf16_ref, a, b, 4) == 0.0f);
    memset(a, 0, sizeof a);
    a[0] = 16777216.0f, a[1] = 1.0f, a[32] = -16777216.0f, a[33] = 1.0f;
    CHECK(one_row(ddl__gemm_bf16_amx_emu, a, b, 64) == 1.0f);
    CHECK(one_row(ddl__gemm_bf16_amx_ref, a, b, 64) == 1.0f);
    /* and past a slice of k (256) the sum restarts and is added to C: 2^24 in slice 0, 1 and 1
     * in two tiles of slice 1 give 2^24 + 2; one sum over both slices would give 2^24 (each 1
     * rounded away) */
    float a2[290] = {0}, b2[290];
    for (int i = 0; i < 290; i++)
        b2[i] = 1.0f;
    a2[0] = 16777216.0f, a2[256] = 1.0f, a2[288] = 1.0f;
    CHECK(one_row(ddl__gemm_bf16_amx_emu, a2, b2, 290) == 16777218.0f);
    CHECK(one_row(ddl__gemm_bf16_amx_ref, a2, b2, 290) == 16777218.0f);
}

/* test_tiles: on an AMX CPU, the tiles give the emulation's bits, the run-time check agrees, and
 * ddl_gemm's bf16 products take them: the AMX reference's bits at 1 and 2 threads. */
static void test_tiles(void)
{
    char note[200];
    int rc = ddl__gemm_bf16_amx_check(note, sizeof note);
    if (rc != 0)
        fprintf(stderr, "%s\n", note);
    CHECK(rc == 0);
    int n = 0, bad = cases(ddl__gemm_bf16_amx_emu, ddl__gemm_bf16_amx, &n);
    CHECK(bad == 0);
    printf("AMX tiles against their emulation: %d cases, %d differ\n", n, bad);
    CHECK(ddl__bf16_path() == 2 || getenv("DDL_CPU_NO_AMX"));
    if (ddl__bf16_path() != 2)
        return;
    int m = 40, nn = 1500, k = 300;
    size_t nc = (size_t)m * nn;
    float *a = malloc((size_t)m * k * sizeof *a), *b = malloc((size_t)k * nn * sizeof *b);
    float *ref = calloc(nc, sizeof *ref), *c1 = malloc(nc * sizeof *c1), *c2 = malloc(nc * sizeof *c2);
    ddl_rng r;
    ddl_rng_seed(&r, 11);
    fill(&r, a, (size_t)m * k, 1.0f);
    fill(&r, b, (size_t)k * nn, 1.0f);
    ddl__gemm_bf16_amx_ref(0, 0, m, nn, k, 1.0f, a, k, b, nn, 0, ref, nn);
    int was = ddl__set_precision(DDL_PRECISION_BF16);
    ddl_set_threads(1);
    ddl_gemm(0, 0, m, nn, k, 1.0f, a, k, b, nn, 0.0f, c1, nn);
    ddl_set_threads(2); /* the pool's workers load their own tile configuration */
    ddl_gemm(0, 0, m, nn, k, 1.0f, a, k, b, nn, 0.0f, c2, nn);
    ddl_set_threads(1);
    ddl__set_precision(was);
    CHECK(memcmp(c1, ref, nc * sizeof *c1) == 0);
    CHECK(memcmp(c1, c2, nc * sizeof *c1) == 0);
    free(a), free(b), free(ref), free(c1), free(c2);
}

int main(void)
{
    test_order();
    test_choose();
    test_emulated();
    test_threads();
    if (ddl__gemm_bf16_avx512_have())
        test_emulated_avx512();
    else
        printf("skipped: no AVX512-BF16 (the AMX loop's AVX-512 packing)\n");
    if (ddl__gemm_bf16_amx_have()) {
        test_tiles();
    } else {
        /* no AMX: the path is never AMX, and the check says why it cannot run */
        char note[200];
        CHECK(ddl__bf16_path() != 2);
        CHECK(ddl__gemm_bf16_amx_check(note, sizeof note) == DDL_ENOTSUP && strstr(note, "no AMX"));
        printf("skipped: no AMX (the tiles against their emulation, ddl_gemm on them)\n");
    }
    return TEST_END();
}
