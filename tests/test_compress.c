/* test_compress.c - ddl_comm_allreduce_compressed (src/comm/compress.c): the bf16 and fp16
 * conversions (every 16-bit pattern back and forth; rounding to nearest even against a reference
 * and, where the compiler has _Float16, against it); over shm, tcp and zmq with 2, 3 and 4 ranks:
 * every rank ends with the same floats, within the rounding of 16 bits of the float32 sum; error
 * feedback keeps the sum over 64 steps of a constant gradient within a few roundings of the
 * exact one, where without it the error grows with every step; ranks that disagree on the
 * compression fail with DDL_EMISMATCH naming both; DDL_COMPRESS and bad configs. */
#include "check.h"
#include "ranks.h"

#include <math.h>
#include <stdint.h>

#define TIMEOUT_MS 20000

/* library internals (src/comm/impl.h) */
uint16_t ddl__half_of(int codec, float f);
float ddl__float_of_half(int codec, uint16_t h);

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* every non-NaN 16-bit value survives float and back; NaN stays NaN */
static void test_roundtrip(int codec, const char *name)
{
    int bad = 0, nan_bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = ddl__float_of_half(codec, (uint16_t)h);
        if (isnan(f))
            nan_bad += !isnan(ddl__float_of_half(codec, ddl__half_of(codec, f)));
        else
            bad += ddl__half_of(codec, f) != h;
    }
    CHECK(bad == 0);
    CHECK(nan_bad == 0);
    if (bad || nan_bad)
        fprintf(stderr, "%s: %d values and %d NaNs do not survive a round trip\n", name, bad, nan_bad);
}

/* a float rounds to the nearer of the two 16-bit values around it, ties to the even one; finite
 * values beyond the largest saturate */
static void test_rounding(int codec, const char *name)
{
    int bad = 0;
    float maxf = codec == DDL_COMPRESS_FP16 ? 65504.0f : bits_float(0x7f7f0000u);
    for (int i = 0; i < 400000; i++) {
        float f;
        if (codec == DDL_COMPRESS_FP16) /* magnitudes from 2^-26 to 2^17: subnormals and saturation */
            f = ldexpf((float)(rnd() & 0xffffff) / 16777216.0f + 0.5f, (int)(rnd() % 44) - 25);
        else
            f = bits_float(rnd() | (rnd() & 1) << 31);
        if (i % 7 == 0) { /* exact ties: the midpoint of two neighbours */
            uint16_t k = (uint16_t)(rnd() % 0x7bfe);
            f = 0.5f * (ddl__float_of_half(codec, k) + ddl__float_of_half(codec, (uint16_t)(k + 1)));
        }
        if (rnd() & 1)
            f = -f;
        if (isnan(f) || isinf(f))
            continue;
        uint16_t h = ddl__half_of(codec, f);
        float g = ddl__float_of_half(codec, h);
        if (fabsf(f) >= maxf) {
            bad += g != copysignf(maxf, f);
            continue;
        }
        /* the neighbours of g: nothing representable is nearer to f, and a tie went to even */
        float up = ddl__float_of_half(codec, (uint16_t)(h + 1)), down = ddl__float_of_half(codec, (uint16_t)(h - 1));
        double e = fabs((double)f - g);
        int near = (isnan(up) || isinf(up) || e <= fabs((double)f - up)) &&
                   ((h & 0x7fff) == 0 || e <= fabs((double)f - down));
        int tie = (!isinf(up) && e == fabs((double)f - up)) || ((h & 0x7fff) && e == fabs((double)f - down));
        if (!near || (tie && e > 0 && (h & 1)))
            bad++;
    }
    CHECK(bad == 0);
    if (bad)
        fprintf(stderr, "%s: %d floats rounded wrongly\n", name, bad);
#ifdef __FLT16_MANT_DIG__
    if (codec == DDL_COMPRESS_FP16) { /* the compiler's own half type agrees below saturation */
        int differ = 0;
        for (int i = 0; i < 400000; i++) {
            float f = ldexpf((float)(rnd() & 0xffffff) / 16777216.0f + 0.5f, (int)(rnd() % 40) - 25);
            __extension__ _Float16 x = (_Float16)f;
            uint16_t u;
            memcpy(&u, &x, 2);
            differ += u != ddl__half_of(codec, f);
        }
        CHECK(differ == 0);
    }
#endif
}

/* ---- over the transports ---- */

struct run {
    int codec;       /* this test's compression */
    int other_codec; /* -1: every rank alike; else rank 1's (a mismatch) */
};

static ddl_comm *open_comm(int rank, int world, int codec)
{
    ddl_comm_config cfg = make_config(rank, world, TIMEOUT_MS);
    cfg.compress = codec;
    return ranks_open(&cfg);
}

/* grad: rank r's gradient element i: magnitudes from 1e-6 to 1e2, either sign */
static float grad(int r, size_t i)
{
    return (float)(sin((double)i * 0.37 + r * 1.3) * pow(10.0, (double)(i % 9) - 6.0));
}

static uint64_t crc_floats(const float *x, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ float_bits(x[i])) * 1099511628211ull;
    return h;
}

static void rank_sums(int rank, int world, void *arg)
{
    const struct run *o = arg;
    ddl_comm *c = open_comm(rank, world, o->codec);
    if (!c)
        return;
    CHECK(ddl_comm_compression(c) == o->codec);
    /* 3 sizes: under one piece, several pieces (the scratch holds 256 Ki halves), under world */
    static const size_t counts[] = {1001, 700001, 3};
    /* one rounding: relative, and absolute below fp16's normal range (its subnormals are 2^-24 apart) */
    double rel = o->codec == DDL_COMPRESS_BF16 ? 1.0 / 256 : 1.0 / 2048;
    double tiny = o->codec == DDL_COMPRESS_BF16 ? 1e-38 : ldexp(1.0, -25);
    for (size_t k = 0; k < 3; k++) {
        size_t n = counts[k];
        float *buf = malloc(n * sizeof *buf), *res = calloc(n, sizeof *res);
        for (size_t i = 0; i < n; i++)
            buf[i] = grad(rank, i);
        CHECK(ddl_comm_allreduce_compressed(c, buf, n, DDL_SUM, res) == DDL_OK);
        int far = 0;
        for (size_t i = 0; i < n; i++) {
            double exact = 0, mag = 0;
            for (int r = 0; r < world; r++)
                exact += grad(r, i), mag += fabs(grad(r, i));
            far += fabs(buf[i] - exact) > (world + 1) * (rel * mag + tiny);
        }
        CHECK(far == 0);
        if (world == 2) { /* the bits, by hand: segment j is reduced by rank 1 - j as q(q(theirs) + mine) */
            int differ = 0;
            for (size_t i = 0; i < n; i++) {
                int owner = i < (n + 1) / 2 ? 1 : 0; /* segment 0 (the longer) ends at rank 1 */
                float theirs = grad(1 - owner, i), mine = grad(owner, i);
                float sum = ddl__float_of_half(o->codec, ddl__half_of(o->codec, theirs)) + mine;
                differ += float_bits(buf[i]) != float_bits(ddl__float_of_half(o->codec, ddl__half_of(o->codec, sum)));
            }
            CHECK(differ == 0);
        }
        if (far)
            fprintf(stderr, "rank %d of %d, codec %d, %zu floats: %d sums too far\n", rank, world, o->codec, n, far);
        char key[64];
        snprintf(key, sizeof key, "sum-%d-%zu-%d", world, n, o->codec);
        report_value(key, crc_floats(buf, n)); /* the same on every rank, every transport */
        free(buf);
        free(res);
    }
    /* error feedback: the same gradient 64 times; the sum of what was applied against 64 x exact */
    size_t n = 5000;
    float *g = malloc(n * sizeof *g), *res = calloc(n, sizeof *res);
    double *with = calloc(n, sizeof *with), *without = calloc(n, sizeof *without);
    for (int s = 0; s < 64; s++) {
        for (size_t i = 0; i < n; i++)
            g[i] = grad(rank, i);
        CHECK(ddl_comm_allreduce_compressed(c, g, n, DDL_MEAN, res) == DDL_OK);
        for (size_t i = 0; i < n; i++)
            with[i] += g[i];
        for (size_t i = 0; i < n; i++)
            g[i] = grad(rank, i);
        CHECK(ddl_comm_allreduce_compressed(c, g, n, DDL_MEAN, NULL) == DDL_OK);
        for (size_t i = 0; i < n; i++)
            without[i] += g[i];
    }
    double err_with = 0, err_without = 0, bound_bad = 0;
    for (size_t i = 0; i < n; i++) {
        double exact = 0, mag = 0;
        for (int r = 0; r < world; r++)
            exact += grad(r, i) / world, mag += fabs(grad(r, i)) / world;
        double ew = fabs(with[i] - 64 * exact), eo = fabs(without[i] - 64 * exact);
        err_with += ew / (mag + 1e-30), err_without += eo / (mag + 1e-30);
        bound_bad += ew > 2.0 * (world + 1) * (rel * mag + tiny) + 1e-5 * mag; /* a few roundings, not 64 */
    }
    CHECK(bound_bad == 0);
    CHECK(err_with * 8 < err_without);
    if (bound_bad || !(err_with * 8 < err_without))
        fprintf(stderr, "rank %d of %d, codec %d: error feedback: %g (bad %g) against %g without\n", rank, world,
                o->codec, err_with, bound_bad, err_without);
    free(g), free(res), free(with), free(without);
    CHECK(ddl_comm_barrier(c) == DDL_OK);
    ddl_comm_destroy(c);
}

static void rank_mismatch(int rank, int world, void *arg)
{
    const struct run *o = arg;
    ddl_comm *c = open_comm(rank, world, rank == 1 ? o->other_codec : o->codec);
    if (!c)
        return;
    float buf[100];
    for (int i = 0; i < 100; i++)
        buf[i] = (float)i;
    int st = ddl_comm_allreduce_compressed(c, buf, 100, DDL_SUM, NULL);
    const char *e = ddl_comm_error(c);
    CHECK(st == DDL_EMISMATCH);
    CHECK(strstr(e, "float32 sent as bf16") != NULL);
    CHECK(strstr(e, o->other_codec == DDL_COMPRESS_FP16 ? "float32 sent as fp16" : "100 float32") != NULL);
    if (st != DDL_EMISMATCH || !strstr(e, "bf16"))
        fprintf(stderr, "rank %d: %s: %s\n", rank, ddl_strerror(st), e);
    ddl_comm_destroy(c);
}

static void test_config(void)
{
    char err[DDL_ERR_BYTES] = "";
    ddl_comm_config cfg;
    setenv("DDL_COMPRESS", "bf16", 1);
    CHECK(ddl_comm_config_from_env(&cfg, NULL, err, sizeof err) == DDL_OK && cfg.compress == DDL_COMPRESS_BF16);
    setenv("DDL_COMPRESS", "fp16", 1);
    CHECK(ddl_comm_config_from_env(&cfg, NULL, err, sizeof err) == DDL_OK && cfg.compress == DDL_COMPRESS_FP16);
    setenv("DDL_COMPRESS", "none", 1);
    CHECK(ddl_comm_config_from_env(&cfg, NULL, err, sizeof err) == DDL_OK && cfg.compress == DDL_COMPRESS_NONE);
    setenv("DDL_COMPRESS", "int8", 1);
    CHECK(ddl_comm_config_from_env(&cfg, NULL, err, sizeof err) == DDL_EINVAL && strstr(err, "DDL_COMPRESS=int8"));
    unsetenv("DDL_COMPRESS");
    /* DDL_ALGO beside it: ring, ps, auto; anything else said */
    setenv("DDL_ALGO", "ps", 1);
    CHECK(ddl_comm_config_from_env(&cfg, NULL, err, sizeof err) == DDL_OK && cfg.algo == DDL_ALGO_PS);
    setenv("DDL_ALGO", "ring", 1);
    CHECK(ddl_comm_config_from_env(&cfg, NULL, err, sizeof err) == DDL_OK && cfg.algo == DDL_ALGO_RING);
    setenv("DDL_ALGO", "tree", 1);
    CHECK(ddl_comm_config_from_env(&cfg, NULL, err, sizeof err) == DDL_EINVAL && strstr(err, "DDL_ALGO=tree"));
    unsetenv("DDL_ALGO");
    CHECK(ddl_comm_config_from_env(&cfg, NULL, err, sizeof err) == DDL_OK && cfg.algo == DDL_ALGO_AUTO);
    memset(&cfg, 0, sizeof cfg);
    cfg.world_size = cfg.local_size = 1;
    cfg.compress = 7;
    ddl_comm *c = NULL;
    CHECK(ddl_comm_create(&cfg, NULL, &c, err, sizeof err) == DDL_EINVAL && strstr(err, "compress 7") && !c);
    /* one process: the plain all-reduce, nothing rounded */
    cfg.compress = DDL_COMPRESS_BF16;
    CHECK(ddl_comm_create(&cfg, NULL, &c, err, sizeof err) == DDL_OK);
    float x[2] = {1.0009765625f, 3.0f}, res[2] = {0, 0};
    CHECK(ddl_comm_allreduce_compressed(c, x, 2, DDL_SUM, res) == DDL_OK && x[0] == 1.0009765625f && res[0] == 0);
    CHECK(ddl_comm_allreduce_compressed(c, x, 2, DDL_MAX, res) == DDL_OK); /* falls back: any op */
    CHECK(ddl_comm_allreduce_compressed(NULL, x, 2, DDL_SUM, res) == DDL_EINVAL);
    ddl_comm_destroy(c);
}

int main(void)
{
    test_roundtrip(DDL_COMPRESS_BF16, "bf16");
    test_roundtrip(DDL_COMPRESS_FP16, "fp16");
    test_rounding(DDL_COMPRESS_BF16, "bf16");
    test_rounding(DDL_COMPRESS_FP16, "fp16");
    test_config();
    const char *names[4];
    int nt = test_transports(names);
    for (int t = 0; t < nt; t++) {
        for (int world = 2; world <= 4; world++)
            for (int codec = DDL_COMPRESS_BF16; codec <= DDL_COMPRESS_FP16; codec++) {
                struct run o = {codec, -1};
                run_ranks(names[t], world, rank_sums, &o, 60, -1);
            }
        struct run m1 = {DDL_COMPRESS_BF16, DDL_COMPRESS_FP16}, m2 = {DDL_COMPRESS_BF16, DDL_COMPRESS_NONE};
        run_ranks(names[t], 2, rank_mismatch, &m1, 30, -1);
        run_ranks(names[t], 2, rank_mismatch, &m2, 30, -1);
    }
    CHECK(ranks_value_conflicts == 0);
    CHECK(ranks_n_values > 0);
    return TEST_END();
}
