/* test_optim.c - optimizer steps and learning-rate schedules against hand-computed values,
 * and the arena's measure pass. */
#include "ddl.h"
#include "check.h"

#include <string.h>

static void test_sgd(void)
{
    ddl_optim_config c = {.kind = DDL_OPTIM_SGD, .lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f};
    float p[2] = {1.0f, -2.0f}, g[2] = {0.5f, 0.25f}, st[2] = {0, 0};
    CHECK(ddl_optim_state_floats(&c, 2) == 2);
    ddl_optim_step(&c, 0.1f, 1, p, g, st, 2);
    /* g' = g + wd p = 0.51, 0.23; buf = g'; p -= 0.1 buf */
    CHECK_NEAR(st[0], 0.51, 1e-6);
    CHECK_NEAR(p[0], 1.0 - 0.051, 1e-6);
    CHECK_NEAR(p[1], -2.0 - 0.023, 1e-6);
    ddl_optim_step(&c, 0.1f, 2, p, g, st, 2);
    /* g' = 0.5 + 0.01 * 0.949 = 0.50949; buf = 0.9 * 0.51 + 0.50949 = 0.96849; p = 0.949 - 0.096849 */
    CHECK_NEAR(st[0], 0.96849, 1e-6);
    CHECK_NEAR(p[0], 0.949 - 0.096849, 1e-6);
    /* without momentum: plain gradient descent, state untouched */
    ddl_optim_config plain = {.kind = DDL_OPTIM_SGD, .lr = 0.5f};
    float q = 2.0f, gq = 1.0f, sq = 7.0f;
    ddl_optim_step(&plain, 0.5f, 1, &q, &gq, &sq, 1);
    CHECK_NEAR(q, 1.5, 1e-7);
    CHECK(sq == 7.0f);
}

static void test_adam(void)
{
    ddl_optim_config c = {.kind = DDL_OPTIM_ADAM, .lr = 0.001f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    float p = 1.0f, g = 0.5f, st[2] = {0, 0};
    CHECK(ddl_optim_state_floats(&c, 1) == 2);
    ddl_optim_step(&c, 0.001f, 1, &p, &g, st, 1);
    /* step 1: m = 0.05, v = 0.00025, mhat = 0.5, vhat = 0.25, p -= 0.001 * 0.5 / (0.5 + 1e-8) */
    CHECK_NEAR(st[0], 0.05, 1e-7);
    CHECK_NEAR(st[1], 0.00025, 1e-8); /* (1 - beta2) is 0.00099998713 in float */
    CHECK_NEAR(p, 1.0 - 0.001, 1e-6);
    float g2 = -0.5f;
    ddl_optim_step(&c, 0.001f, 2, &p, &g2, st, 1);
    /* m = 0.045 - 0.05 = -0.005, mhat = -0.005 / 0.19 = -0.0263158; v = 0.00024975 + 0.00025 = 0.00049975,
     * vhat = 0.00049975 / 0.001999 = 0.25000; p += 0.001 * 0.0263158 / 0.5 */
    CHECK_NEAR(st[0], -0.005, 1e-7);
    CHECK_NEAR(p, 0.999 + 0.001 * 0.0263158 / 0.5, 2e-6);
}

static void test_schedules(void)
{
    ddl_schedule s;
    memset(&s, 0, sizeof s);
    CHECK_NEAR(ddl_schedule_lr(&s, 0.1f, 500), 0.1, 1e-8);
    s.warmup_steps = 10;
    CHECK_NEAR(ddl_schedule_lr(&s, 0.1f, 0), 0.01, 1e-8);
    CHECK_NEAR(ddl_schedule_lr(&s, 0.1f, 4), 0.05, 1e-8);
    CHECK_NEAR(ddl_schedule_lr(&s, 0.1f, 10), 0.1, 1e-8);
    s.kind = DDL_SCHED_STEP;
    s.step_size = 100;
    s.gamma = 0.5f;
    CHECK_NEAR(ddl_schedule_lr(&s, 0.1f, 109), 0.1, 1e-8);
    CHECK_NEAR(ddl_schedule_lr(&s, 0.1f, 110), 0.05, 1e-8);
    CHECK_NEAR(ddl_schedule_lr(&s, 0.1f, 310), 0.0125, 1e-8);
    s.kind = DDL_SCHED_COSINE;
    s.total_steps = 110;
    s.min_lr = 0.0f;
    CHECK_NEAR(ddl_schedule_lr(&s, 0.1f, 10), 0.1, 1e-7);
    CHECK_NEAR(ddl_schedule_lr(&s, 0.1f, 60), 0.05, 1e-7);
    CHECK_NEAR(ddl_schedule_lr(&s, 0.1f, 110), 0.0, 1e-7);
    CHECK_NEAR(ddl_schedule_lr(&s, 0.1f, 1000), 0.0, 1e-7);
}

static void test_arena(void)
{
    ddl_arena a;
    ddl_arena_init(&a, NULL, 0);
    CHECK(ddl_arena_alloc(&a, 10) == NULL);
    CHECK(ddl_arena_alloc(&a, 100) == NULL);
    size_t need = ddl_arena_used(&a);
    CHECK(need == 64 + 128);
    CHECK(!ddl_arena_ok(&a));
    static _Alignas(64) unsigned char mem[192];
    ddl_arena_init(&a, mem, sizeof mem);
    void *p1 = ddl_arena_alloc(&a, 10), *p2 = ddl_arena_alloc(&a, 100);
    CHECK(p1 == mem && p2 == mem + 64);
    CHECK(ddl_arena_ok(&a) && ddl_arena_used(&a) == need);
    CHECK(ddl_arena_alloc(&a, 1) == NULL);
    CHECK(!ddl_arena_ok(&a));
}

static void test_rng_and_crc(void)
{
    ddl_rng a, b;
    ddl_rng_seed(&a, 7);
    ddl_rng_seed(&b, 7);
    int same = 1, in_range = 1;
    double mean = 0;
    for (int i = 0; i < 10000; i++)
        same &= ddl_rng_next(&a) == ddl_rng_next(&b);
    for (int i = 0; i < 10000; i++) {
        float u = ddl_rng_uniform(&a);
        in_range &= u >= 0.0f && u < 1.0f;
        mean += u;
        in_range &= ddl_rng_below(&a, 10) < 10;
    }
    CHECK(same && in_range);
    CHECK_NEAR(mean / 10000, 0.5, 0.02);
    /* CRC-32 check value of "123456789" */
    CHECK(ddl_crc32(0, "123456789", 9) == 0xCBF43926u);
    CHECK(ddl_crc32(ddl_crc32(0, "1234", 4), "56789", 5) == 0xCBF43926u);
    CHECK(ddl_version_number() == DDL_VERSION_NUMBER);
    CHECK(strcmp(ddl_strerror(DDL_EPEER), "peer died or closed") == 0);
}

int main(void)
{
    test_sgd();
    test_adam();
    test_schedules();
    test_arena();
    test_rng_and_crc();
    return TEST_END();
}
