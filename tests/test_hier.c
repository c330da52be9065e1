/* test_hier.c - the two-level all-reduce (src/comm/hier.c) on loopback, where local_rank and
 * local_size say which ranks share a "host" (ranks hL .. hL + L - 1 are host h; they share this
 * machine's /dev/shm): 2 hosts x 2 ranks, 4 x 2 and 3 x 2, over tcp and zmq, twice each. Every
 * result must be bit for bit the sum this process computes alone in the order it should have
 * (float32 values of mixed magnitudes, so that another order gives other bits): odd counts,
 * counts over the scratch (pieces), small counts (the flat recursive doubling below 16 KiB or
 * below the world size), int64 sums that wrap, max and mean; and the same CRC on every rank, both
 * transports and both runs. On 2 x 2 and 4 x 2 (powers of two) the two-level path is taken by
 * itself (DDL_ALGO auto) and adds in the tree order of halving.c: the same bits as 4 and 8 ranks
 * on one host (checked under one key), at every size. On 3 x 2 (DDL_ALGO_HIER) it goes by rings,
 * in the order hier.c documents. DDL_ALGO_RING gives the flat ring's order instead; hosts of
 * unequal sizes fall back to the flat all-reduce. A rank killed (kill -9) in the middle of
 * all-reduces ends every other rank with an error naming a rank, within the heartbeat's timeout,
 * never a hang.
 * With --env it is one rank under a launcher (tests/test_hier.sh: 2 namespaced hosts x 2 ranks,
 * ddlrun): the same cases and checks, hosts from DDL_LOCAL_SIZE, CRCs printed by rank 0. */
#include "check.h"
#include "ranks.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct hcase {
    size_t count;
    int dtype, op;
} hcase;

static const hcase cases[] = {
    {1000003, DDL_FLOAT32, DDL_SUM}, /* odd, 4 MB: sub-segments over the 1 MiB scratch */
    {262147, DDL_FLOAT32, DDL_SUM},  /* about 1 MiB, odd */
    {65536, DDL_FLOAT32, DDL_MEAN},  /* 256 KiB */
    {4099, DDL_FLOAT32, DDL_SUM},    /* 16,396 bytes: the smallest two-level size */
    {4095, DDL_FLOAT32, DDL_SUM},    /* 16,380 bytes: recursive doubling */
    {7, DDL_FLOAT32, DDL_SUM},       /* below most world sizes */
    {100003, DDL_INT64, DDL_SUM},    /* wraps */
    {50001, DDL_FLOAT32, DDL_MAX},
    {3, DDL_INT64, DDL_SUM},
};
#define N_CASES (sizeof cases / sizeof cases[0])
#define HIER_MIN_BYTES ((size_t)16 << 10) /* hier.c's */

static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* rank r's element i: floats of magnitudes 2^-10 .. 2^9, so the order of additions shows */
static float fval(int r, size_t i)
{
    uint64_t h = mix((uint64_t)r << 40 ^ i);
    return ldexpf((float)((int)(h % 2001) - 1000), (int)((h >> 20) % 20) - 20);
}
static int64_t ival(int r, size_t i) { return (int64_t)mix((uint64_t)r << 40 ^ i ^ 0x5555); }

static void add(void *dst, const void *a, const void *b, size_t k, int dtype, int op)
{
    if (dtype == DDL_FLOAT32) {
        float x = ((const float *)a)[k], y = ((const float *)b)[k];
        ((float *)dst)[k] = op == DDL_MAX ? ((x > y || isnan(x)) ? x : y) : x + y;
    } else {
        int64_t x = ((const int64_t *)a)[k], y = ((const int64_t *)b)[k];
        ((int64_t *)dst)[k] = op == DDL_MAX ? (x > y ? x : y) : (int64_t)((uint64_t)x + (uint64_t)y);
    }
}

static void fill(void *buf, int r, size_t count, int dtype)
{
    for (size_t i = 0; i < count; i++)
        if (dtype == DDL_FLOAT32)
            ((float *)buf)[i] = fval(r, i);
        else
            ((int64_t *)buf)[i] = ival(r, i);
}

/* seg: segment k of n of count, as ddl__ring_segment cuts it (the first count % n one longer) */
static void seg(size_t count, int n, int k, size_t *off, size_t *len)
{
    size_t q = count / (size_t)n, m = count % (size_t)n, kk = (size_t)k;
    *off = kk * q + (kk < m ? kk : m);
    *len = q + (kk < m ? 1 : 0);
}

/* ref_hier: the two-level order (hier.c): for element i in sub-segment k of segment m,
 * y_h = x[h,m] + x[h,m+1] + ... left to right (local ranks mod L), then y_k + y_k+1 + ... (hosts
 * mod H). x is [world][count], host h's local rank j is rank hL + j. */
static void ref_hier(const unsigned char *x, unsigned char *out, size_t count, int H, int L, int dtype, int op)
{
    size_t esz = dtype == DDL_FLOAT32 ? 4 : 8;
    unsigned char y[8], t[8];
    for (int m = 0; m < L; m++) {
        size_t mo, ml;
        seg(count, L, m, &mo, &ml);
        for (int k = 0; k < H; k++) {
            size_t ko, kl;
            seg(ml, H, k, &ko, &kl);
            for (size_t i = mo + ko; i < mo + ko + kl; i++) {
                for (int hh = 0; hh < H; hh++) {
                    int h = (k + hh) % H;
                    memcpy(y, x + ((size_t)(h * L + m) * count + i) * esz, esz);
                    for (int jj = 1; jj < L; jj++) {
                        int j = (m + jj) % L;
                        memcpy(t, x + ((size_t)(h * L + j) * count + i) * esz, esz);
                        add(y, y, t, 0, dtype, op);
                    }
                    if (hh == 0)
                        memcpy(out + i * esz, y, esz);
                    else
                        add(out + i * esz, out + i * esz, y, 0, dtype, op);
                }
            }
        }
    }
}

/* ref_ring: the flat ring's order: segment k of n is x_k + x_k+1 + ... left to right (mod n). */
static void ref_ring(const unsigned char *x, unsigned char *out, size_t count, int n, int dtype, int op)
{
    size_t esz = dtype == DDL_FLOAT32 ? 4 : 8;
    for (int k = 0; k < n; k++) {
        size_t o, l;
        seg(count, n, k, &o, &l);
        for (size_t i = o; i < o + l; i++) {
            memcpy(out + i * esz, x + ((size_t)k * count + i) * esz, esz);
            for (int jj = 1; jj < n; jj++)
                add(out + i * esz, out + i * esz, x + ((size_t)((k + jj) % n) * count + i) * esz, 0, dtype, op);
        }
    }
}

/* ref_rd: recursive doubling's order (collectives.c allreduce_rd / allreduce_posted). */
static void ref_rd(const unsigned char *x, unsigned char *out, size_t count, int n, int dtype, int op)
{
    size_t esz = dtype == DDL_FLOAT32 ? 4 : 8;
    int p = 1;
    while (p * 2 <= n)
        p *= 2;
    int rem = n - p;
    unsigned char *v = malloc((size_t)p * esz);
    for (size_t i = 0; i < count; i++) {
        for (int vr = 0; vr < p; vr++) {
            int r = vr < rem ? 2 * vr + 1 : vr + rem;
            memcpy(v + (size_t)vr * esz, x + ((size_t)r * count + i) * esz, esz);
            if (vr < rem)
                add(v + (size_t)vr * esz, x + ((size_t)(r - 1) * count + i) * esz, v + (size_t)vr * esz, 0, dtype, op);
        }
        for (int mask = 1; mask < p; mask <<= 1)
            for (int vr = 0; vr + mask < p; vr += 2 * mask)
                add(v + (size_t)vr * esz, v + (size_t)vr * esz, v + (size_t)(vr + mask) * esz, 0, dtype, op);
        memcpy(out + i * esz, v, esz);
    }
    free(v);
}

/* expected: what case hc gives on n ranks with DDL_ALGO algo (hier: the two-level path by rings on
 * hosts of L may be taken). A power-of-two world adds in the tree order at every size (halving.c),
 * which is recursive doubling's there. */
static void expected(const hcase *hc, int n, int L, int algo, int hier, unsigned char *out)
{
    int H = n / L, sum_op = hc->op == DDL_MEAN ? DDL_SUM : hc->op;
    size_t esz = hc->dtype == DDL_FLOAT32 ? 4 : 8, bytes = hc->count * esz;
    unsigned char *x = malloc((size_t)n * bytes);
    for (int r = 0; r < n; r++)
        fill(x + (size_t)r * bytes, r, hc->count, hc->dtype);
    if (hier && hc->count >= (size_t)n && bytes >= HIER_MIN_BYTES)
        ref_hier(x, out, hc->count, H, L, hc->dtype, sum_op);
    else if (bytes <= ((size_t)64 << 10) || hc->count < (size_t)n || ((n & (n - 1)) == 0 && algo != DDL_ALGO_RING))
        ref_rd(x, out, hc->count, n, hc->dtype, sum_op);
    else
        ref_ring(x, out, hc->count, n, hc->dtype, sum_op);
    if (hc->op == DDL_MEAN)
        for (size_t i = 0; i < hc->count; i++)
            ((float *)out)[i] /= (float)n;
    free(x);
}

/* ---- one rank ---- */

typedef struct run {
    int L, algo, hier;   /* ranks per host; DDL_ALGO_*; the two-level path by rings is expected */
    int two_level;       /* the two-level path is expected (rank 0's log says so) */
    int victim;          /* >= 0: this rank is killed during the all-reduces */
    const char *tag;     /* key prefix of the reported CRCs ("" : none) */
} run;

/* run_cases: every case on comm c (hosts of L ranks, DDL_ALGO algo); CRCs reported under tag
 * (with the world size, and L unless tree: the tree's bits are the same on any hosts). */
static void run_cases(ddl_comm *c, int L, int algo, int hier, const char *tag, int print)
{
    int rank = ddl_comm_rank(c), n = ddl_comm_size(c);
    for (size_t k = 0; k < N_CASES; k++) {
        const hcase *hc = &cases[k];
        size_t esz = hc->dtype == DDL_FLOAT32 ? 4 : 8, bytes = hc->count * esz;
        unsigned char *buf = malloc(bytes), *want = malloc(bytes);
        fill(buf, rank, hc->count, hc->dtype);
        int st = ddl_comm_allreduce(c, buf, hc->count, hc->dtype, hc->op);
        if (st != DDL_OK)
            fprintf(stderr, "rank %d case %zu: %s: %s\n", rank, k, ddl_strerror(st), ddl_comm_error(c));
        CHECK(st == DDL_OK);
        expected(hc, n, L, algo, hier, want);
        int same = memcmp(buf, want, bytes) == 0;
        if (!same)
            fprintf(stderr, "rank %d case %zu (%zu x %s): not the reference's bits\n", rank, k, hc->count,
                    hc->dtype == DDL_FLOAT32 ? "float32" : "int64");
        CHECK(same);
        uint32_t crc = ddl_crc32(0, buf, bytes);
        char key[64];
        if (strcmp(tag, "tree") == 0)
            snprintf(key, sizeof key, "%s%d-%zu", tag, n, k);
        else
            snprintf(key, sizeof key, "%s%d.%d-%zu", tag, n, L, k);
        if (tag[0])
            report_value(key, crc);
        if (print && rank == 0)
            printf("crc %s %08x\n", key, crc);
        free(buf);
        free(want);
    }
}

/* saw_two_level: the comm's log said it takes the two-level all-reduce (rank 0 says so) */
static int saw_two_level;
static void note_log(void *ud, int level, const char *msg)
{
    (void)ud, (void)level;
    if (strstr(msg, "two-level all-reduce:"))
        saw_two_level = 1;
}

static void rank_cases(int rank, int world, void *arg)
{
    const run *ru = arg;
    ddl_comm_config cfg = make_config(rank, world, 30000);
    cfg.local_rank = rank % ru->L;
    cfg.local_size = ru->L;
    cfg.algo = ru->algo;
    cfg.heartbeat_timeout_ms = 5000;
    cfg.log = note_log;
    ddl_comm *c = ranks_open(&cfg);
    if (!c)
        return;
    if (rank == 0) {
        CHECK(saw_two_level == ru->two_level);
        if (saw_two_level != ru->two_level)
            fprintf(stderr, "%d ranks, hosts of %d: the two-level path %s\n", world, ru->L,
                    ru->two_level ? "was not taken" : "was taken, not expected");
    }
    run_cases(c, ru->L, ru->algo, ru->hier, ru->tag, 0);
    if (ru->hier) { /* the flat ring's order differs (4 MB of mixed magnitudes), so the path was the rings' one */
        const hcase *hc = &cases[0];
        unsigned char *a = malloc(hc->count * 4), *b = malloc(hc->count * 4), *x = malloc((size_t)world * hc->count * 4);
        fill(a, rank, hc->count, hc->dtype);
        CHECK(ddl_comm_allreduce(c, a, hc->count, hc->dtype, hc->op) == DDL_OK);
        for (int r = 0; r < world; r++)
            fill(x + (size_t)r * hc->count * 4, r, hc->count, hc->dtype);
        ref_ring(x, b, hc->count, world, hc->dtype, hc->op);
        CHECK(memcmp(a, b, hc->count * 4) != 0);
        free(a), free(b), free(x);
    }
    ddl_comm_destroy(c);
}

/* ---- a rank killed ---- */

static double now_s(void) { return ranks_now(); }

static void rank_killed(int rank, int world, void *arg)
{
    const run *ru = arg;
    ddl_comm_config cfg = make_config(rank, world, 20000);
    cfg.local_rank = rank % ru->L;
    cfg.local_size = ru->L;
    cfg.heartbeat_timeout_ms = 2000;
    ddl_comm *c = ranks_open(&cfg);
    if (!c)
        return;
    size_t count = 1000003;
    float *buf = malloc(count * sizeof *buf);
    fill(buf, rank, count, DDL_FLOAT32);
    CHECK(ddl_comm_allreduce(c, buf, count, DDL_FLOAT32, DDL_SUM) == DDL_OK); /* all there */
    if (rank == ru->victim) { /* killed from outside, some time into the next all-reduces */
        pid_t me = getpid();
        if (fork() == 0) {
            usleep((useconds_t)(20000 + (getpid() % 7) * 15000));
            kill(me, SIGKILL);
            _exit(0);
        }
    }
    double t0 = now_s();
    int st = DDL_OK, n = 0;
    while (st == DDL_OK && now_s() - t0 < 25)
        st = ddl_comm_allreduce(c, buf, count, DDL_FLOAT32, DDL_SUM), n++;
    double took = now_s() - t0;
    const char *e = ddl_comm_error(c);
    printf("  %s %dx%d, rank %d killed: rank %d: %s after %d all-reduces, %.2f s: %.160s\n", ranks_transport,
           world / ru->L, ru->L, ru->victim, rank, ddl_strerror(st), n, took, e);
    fflush(stdout);
    CHECK(st == DDL_EPEER || st == DDL_ETIMEDOUT);
    CHECK(strstr(e, "rank") != NULL);
    CHECK(took < 10);
    free(buf);
    ddl_comm_destroy(c);
}

/* ---- one rank under a launcher (tests/test_hier.sh) ---- */

static int env_main(void)
{
    ddl_comm_config cfg;
    char err[DDL_ERR_BYTES];
    if (ddl_comm_config_from_env(&cfg, NULL, err, sizeof err) != DDL_OK) {
        fprintf(stderr, "test_hier --env: %s\n", err);
        return 2;
    }
    ddl_comm *c = NULL;
    if (ddl_comm_create(&cfg, NULL, &c, err, sizeof err) != DDL_OK) {
        fprintf(stderr, "test_hier --env: rank %d: %s\n", cfg.rank, err);
        return 2;
    }
    int H = cfg.world_size / (cfg.local_size > 0 ? cfg.local_size : 1);
    run_cases(c, cfg.local_size, cfg.algo,
              cfg.algo == DDL_ALGO_HIER && !((H & (H - 1)) == 0 && (cfg.local_size & (cfg.local_size - 1)) == 0), "",
              1);
    ddl_comm_destroy(c);
    return TEST_END();
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--env") == 0)
        return env_main();
    static const int shapes[][2] = {{2, 2}, {4, 2}, {3, 2}};
    const char *tps[] = {"tcp", "zmq"};
    for (int t = 0; t < 2; t++) {
        if (!ddl_transport_find(tps[t])) {
            printf("%s: skipped (not compiled in)\n", tps[t]);
            continue;
        }
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int H = shapes[s][0], L = shapes[s][1], tree = (H & (H - 1)) == 0;
            /* powers of two: by itself, the tree; 3 hosts: asked for, by rings */
            run ru = {L, tree ? DDL_ALGO_AUTO : DDL_ALGO_HIER, !tree, 1, -1, tree ? "tree" : "hier"};
            for (int k = 0; k < 2; k++) /* twice: the same bits from run to run */
                run_ranks(tps[t], H * L, rank_cases, &ru, 120, -1);
            printf("%s: %d hosts x %d ranks: every case the reference's bits, twice\n", tps[t], H, L);
        }
        run one = {4, DDL_ALGO_AUTO, 0, 0, -1, "tree"}; /* 4 ranks on one host: 2 x 2's bits */
        run_ranks(tps[t], 4, rank_cases, &one, 120, -1);
        run eight = {8, DDL_ALGO_HIER, 0, 0, -1, "tree"}; /* 8 on one host: 4 x 2's bits */
        run_ranks(tps[t], 8, rank_cases, &eight, 120, -1);
        printf("%s: 4 and 8 ranks on one host: the bits of 2 x 2 and 4 x 2\n", tps[t]);
        run ring = {2, DDL_ALGO_RING, 0, 0, -1, "ring"}; /* DDL_ALGO=ring: the flat ring on the same hosts */
        run_ranks(tps[t], 4, rank_cases, &ring, 120, -1);
        run uneven = {3, DDL_ALGO_HIER, 0, 0, -1, "uneven"}; /* hosts of 3, 3 and 1 ranks: the flat ring */
        run_ranks(tps[t], 7, rank_cases, &uneven, 120, -1);
        printf("%s: DDL_ALGO_RING, and hosts of 3, 3 and 1 ranks: the flat order\n", tps[t]);
        for (int v = 0; v < 4; v += 3) {
            run kill = {2, DDL_ALGO_AUTO, 0, 1, v == 0 ? 3 : 0, ""};
            run_ranks(tps[t], 4, rank_killed, &kill, 40, kill.victim);
        }
    }
    CHECK(ranks_value_conflicts == 0);
    return TEST_END();
}
