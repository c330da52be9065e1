/* test_elastic.c - ddl_comm_regroup: 4 ranks sum V = 4 shards' vectors step after step with
 * ddl_comm_allreduce_shards; one rank dies (kill -9 of itself) or stops (SIGSTOP) at a step. The
 * other three regroup in the same processes, agree on the step, deal the shards again among
 * themselves and go on: every step's sum has the bits of one process adding all four shards.
 * Over tcp, shm and zmq. Also: the rank numbers after a regroup follow the old order, the dead
 * rank is the one reported lost, a regroup below the elastic minimum stops every survivor with a
 * message, and a comm that is not elastic refuses to regroup. */
/* ddl-test: idle (mostly waits (timeouts, heartbeats, stopped ranks), bounds in seconds: four run at a time) */
#include "check.h"
#include "comm/impl.h" /* missed_large stages a call completed on some ranks through replay.c's hooks */
#include "ranks.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define V 4
#define COUNT 70001
#define STEPS 8
#define VICTIM 2
#define AT 3 /* the step at which the victim goes */

enum { DIE, STOP };

typedef struct arg {
    int how, min;
    int rejoin;       /* the victim forks its replacement, which joins the running job; 2: no
                       * replacement, rank 1 forks a stranger with another token that tries to take
                       * the victim's slot */
    char peers[256];  /* every slot's address: joiners need them */
} arg;

#define JOIN_STEPS 60

/* stranger: while the job runs without slot 2, a process without the token asks to take it: it is
 * never admitted (its notes fail the join key's MAC), and the ranks never regroup for it */
static void stranger(const arg *a, int world)
{
    for (int fd = 3; fd < 1024; fd++)
        if (fd != ranks_report_fd)
            close(fd);
    usleep(150 * 1000);
    ddl_comm_config cfg = make_config(2, world, 1500);
    cfg.heartbeat_timeout_ms = 1000;
    cfg.elastic_min = a->min;
    cfg.elastic_max = world;
    cfg.master = NULL;
    cfg.peers = a->peers;
    cfg.join = 1;
    cfg.token = "not-the-job-token";
    ddl_comm *c = NULL;
    char err[DDL_ERR_BYTES] = "";
    int st = ddl_comm_create(&cfg, NULL, &c, err, sizeof err); /* returns at once: it asks at its first call */
    CHECK(st == DDL_OK && c);
    if (c)
        CHECK(ddl_comm_barrier(c) == DDL_ETIMEDOUT && strstr(ddl_comm_error(c), "no rank of job"));
    ddl_comm_destroy(c);
    char line[64];
    int n = snprintf(line, sizeof line, "r %d %d\n", check_passed, check_failed);
    if (write(ranks_report_fd, line, (size_t)n) != n)
        _exit(3);
    _exit(check_failed ? 1 : 0);
} /* with a joiner: enough steps (10 ms apart) that it comes in before the end */

static float noisy(int k, size_t i, int step)
{
    uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull + (uint64_t)(k + 1) * 0xBF58476D1CE4E5B9ull + (uint64_t)step;
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    return (float)(x >> 40) / 16777216.0f * 2.0f - 1.0f;
}

static void fill(float *const *bufs, int first, int n, int step)
{
    for (int s = 0; s < n; s++)
        for (size_t e = 0; e < COUNT; e++)
            bufs[s][e] = noisy(first + s, e, step);
}

static void body(const arg *a, ddl_comm *c, int old_rank, int world);

/* go: the victim's end: killed now, or stopped (a grandchild kills it after 2 s, past the test) */
static void go(int how)
{
    if (how == DIE)
        raise(SIGKILL);
    pid_t me = getpid();
    if (fork() == 0) {
        sleep(2);
        kill(me, SIGKILL);
        _exit(0);
    }
    raise(SIGSTOP);
}

/* ELASTIC_LOG=1: the library's log lines on stderr, to see where a regroup's time goes */
static void print_log(void *ud, int level, const char *msg)
{
    (void)ud;
    (void)level;
    fprintf(stderr, "      %s\n", msg);
}

static ddl_comm_config elastic_config(const arg *a, int rank, int world)
{
    ddl_comm_config cfg = make_config(rank, world, 20000);
    if (getenv("ELASTIC_LOG"))
        cfg.log = print_log;
    cfg.heartbeat_timeout_ms = 1000;
    cfg.heartbeat_interval_ms = 100;
    cfg.elastic_min = a->min;
    cfg.elastic_max = world;
    if (a->peers[0]) {
        cfg.master = NULL;
        cfg.peers = a->peers;
    }
    return cfg;
}

/* replacement: the victim's child, after the others regrouped without it: join, take the step
 * from the leader, go on as a rank */
/* replacement_run: the replacement's life, in a process of its own (exec'd, so no thread of the
 * victim's, which TSAN cannot follow through a fork): join, take the step from the leader, go on */
static void replacement_run(const arg *a, int slot, int world)
{
    usleep(150 * 1000);
    ddl_comm_config cfg = elastic_config(a, slot, world);
    cfg.join = 1;
    ddl_comm *c = ranks_open(&cfg);
    if (!c)
        _exit(1);
    ddl_regroup g;
    CHECK(ddl_comm_joined(c, &g) == 1 && g.world == world && ddl_comm_rank(c) == slot && g.behind >= 1);
    body(a, c, slot, world);
    char line[64];
    int n = snprintf(line, sizeof line, "r %d %d\n", check_passed, check_failed);
    if (write(ranks_report_fd, line, (size_t)n) != n)
        _exit(3);
    _exit(check_failed ? 1 : 0);
}

/* replacement: in the victim's child: a new process (exec) for replacement_run */
static void replacement(const arg *a, int slot, int world)
{
    for (int fd = 3; fd < 1024; fd++) /* none of the victim's sockets (they would keep its links open) */
        if (fd != ranks_report_fd)
            close(fd);
    char s_slot[16], s_world[16], s_port[16], s_fd[16], s_min[16];
    snprintf(s_slot, sizeof s_slot, "%d", slot);
    snprintf(s_world, sizeof s_world, "%d", world);
    snprintf(s_port, sizeof s_port, "%d", ranks_port);
    snprintf(s_fd, sizeof s_fd, "%d", ranks_report_fd);
    snprintf(s_min, sizeof s_min, "%d", a->min);
    execl("/proc/self/exe", "test_elastic", "--replacement", ranks_transport, ranks_job, s_port, s_fd, s_slot, s_world,
          s_min, a->peers, (char *)NULL);
    _exit(127);
}

static void rank_body(int rank, int world, void *p)
{
    const arg *a = p;
    ddl_comm_config cfg = elastic_config(a, rank, world);
    ddl_comm *c = ranks_open(&cfg);
    if (!c)
        return;
    body(a, c, rank, world);
}

static void body(const arg *a, ddl_comm *c, int old_rank, int world)
{
    float *mine[V], *all[V];
    for (int s = 0; s < V; s++) {
        mine[s] = malloc(COUNT * sizeof(float));
        all[s] = malloc(COUNT * sizeof(float));
    }
    int regroups = 0, ok = 1, joined = ddl_comm_joined(c, NULL);
    long steps = a->rejoin ? JOIN_STEPS : STEPS, step = 0;
    if (joined) { /* the step comes from the leader */
        ddl_regroup g;
        ddl_comm_joined(c, &g);
        int64_t s64 = 0;
        CHECK(ddl_comm_broadcast(c, &s64, 1, DDL_INT64, g.leader) == DDL_OK);
        step = (long)s64;
        /* the running job's step: at or past the loss (AT itself when the replacement asked in
         * while the survivors still regrouped, and came in at their retry of step AT) */
        CHECK(step == g.step && step >= AT);
    }
    while (step < steps && ok) {
        int r = ddl_comm_rank(c), w = ddl_comm_size(c);
        int first = r * V / w, n = (r + 1) * V / w - first;
        fill(mine, first, n, (int)step);
        if (a->rejoin)
            usleep(10 * 1000);
        if (a->rejoin == 2 && old_rank == 1 && step == AT && fork() == 0)
            stranger(a, world); /* it waits 150 ms: the others are 3 by then */
        if (old_rank == VICTIM && step == AT && !joined) {
            if (a->rejoin == 1 && fork() == 0)
                replacement(a, old_rank, world);
            go(a->how);
        }
        double t0 = ranks_now();
        int st = ddl_comm_allreduce_shards(c, mine, first, n, V, COUNT);
        if (st == DDL_OK) {
            fill(all, 0, V, (int)step);
            ddl_comm_allreduce_shards(NULL, all, 0, V, V, COUNT);
            int same = 1;
            for (int s = 0; s < n; s++)
                same &= memcmp(mine[s], all[0], COUNT * sizeof(float)) == 0;
            CHECK(same);
            step++;
            continue;
        }
        ddl_regroup g;
        st = ddl_comm_regroup(c, step, &g);
        double took = ranks_now() - t0;
        if (a->min > world - 1) { /* below the minimum: every survivor stops, saying why */
            CHECK(st == DDL_EPEER && strstr(ddl_comm_error(c), "elastic minimum"));
            ok = 0;
            break;
        }
        CHECK(st == DDL_OK);
        if (st != DDL_OK) {
            fprintf(stderr, "rank %d: regroup: %s\n", old_rank, ddl_comm_error(c));
            break;
        }
        regroups++;
        if (g.rank == 0)
            fprintf(stderr, "   %s: failed call to regrouped %.0f ms, of which the regroup %.0f ms (world %d)\n",
                    ddl_comm_transport_name(c), took * 1000, g.ms, g.world);
        if (g.generation == 2 || joined) { /* the replacement came in: everyone sends it the step */
            CHECK(g.world == world && g.behind >= 1 && g.rank == old_rank);
            int64_t s64 = step;
            CHECK(ddl_comm_broadcast(c, &s64, 1, DDL_INT64, g.leader) == DDL_OK);
            step = (long)s64;
            regroups += 10;
            continue;
        }
        CHECK(g.world == world - 1 && g.old_world == world && g.generation == 1);
        CHECK(g.n_lost == 1 && g.lost[0] == VICTIM);
        CHECK(g.rank == old_rank - (old_rank > VICTIM)); /* the old order */
        /* The victim died after its step AT - 1: the survivors stand at AT, or some at AT - 1 (the
         * victim's last message of that sum was lost with it: a ring's last step, or the tree's
         * pairs with the victim), or all of them (in the tree every survivor's sum can depend on
         * one of the victim's last messages). The regroup's step is the highest any of them
         * reached. */
        int64_t top = step;
        CHECK(ddl_comm_allreduce(c, &top, 1, DDL_INT64, DDL_MAX) == DDL_OK);
        CHECK((g.step == AT || g.step == AT - 1) && g.step == top);
        if (g.behind) { /* a rank whose sum of step AT - 1 was cut short by the death: the leader's step */
            int64_t s64 = step;
            CHECK(ddl_comm_broadcast(c, &s64, 1, DDL_INT64, g.leader) == DDL_OK);
            CHECK(s64 == g.step);
        }
        /* a death is seen at once; a stop after the heartbeat timeout (1 s) and an interval */
        double limit = a->how == DIE ? 1.0 : 2.5;
        if (took > limit)
            fprintf(stderr, "rank %d: regroup took %.3f s (from the failed call's start)\n", old_rank, took);
        CHECK(took < limit);
        step = g.step;
    }
    if (ok && a->min <= world - 1 && !joined)
        CHECK(regroups == (a->rejoin == 1 ? 12 : 1)); /* rejoin: 1 + (1 + 10); a stranger: none for it */
    if (a->rejoin == 1) /* the replacement made the world whole again */
        CHECK(ddl_comm_size(c) == world);
    if (a->rejoin == 2) /* the stranger did not get in */
        CHECK(ddl_comm_size(c) == world - 1);
    for (int s = 0; s < V; s++) {
        free(mine[s]);
        free(all[s]);
    }
    ddl_comm_destroy(c);
}

/* missed: a collective that completes on some ranks and not on another. Rank 1 (a leaf of the
 * broadcast's tree: only the root sends to it) regroups instead of taking part in a broadcast, as if
 * it had failed there; the others complete it, fail in the next call (an all-reduce) and regroup
 * too. Afterwards rank 1 retries the broadcast and the others the all-reduce: the broadcast's
 * result reaches rank 1 from a rank that completed it (replay.c), and the calls match again.
 * Without that, rank 1's broadcast meets the others' all-reduce and every rank fails. */
static int missed_taken;

static void missed_log(void *ud, int level, const char *msg)
{
    (void)ud;
    (void)level;
    if (strstr(msg, "the collective it missed"))
        missed_taken++;
}

static void missed(int rank, int world, void *p)
{
    const arg *a = p;
    ddl_comm_config cfg = elastic_config(a, rank, world);
    cfg.log = missed_log;
    ddl_comm *c = ranks_open(&cfg);
    if (!c)
        return;
    int64_t one = rank + 1, data[8];
    CHECK(ddl_comm_allreduce(c, &one, 1, DDL_INT64, DDL_SUM) == DDL_OK && one == 10);
    for (int i = 0; i < 8; i++)
        data[i] = rank == 0 ? 100 + i : -1;
    float f[3] = {1.0f, 2.0f, (float)rank};
    int st;
    ddl_regroup g;
    if (rank == 1) {
        /* the others must be past the first all-reduce (rank 1 may finish it before they do: its
         * regroup would cut theirs short), and into the broadcast, which they then complete */
        usleep(300 * 1000);
        CHECK(ddl_comm_regroup(c, 0, &g) == DDL_OK && g.world == world && g.n_lost == 0);
        CHECK(ddl_comm_broadcast(c, data, 8, DDL_INT64, 0) == DDL_OK); /* the retry */
    } else {
        st = ddl_comm_broadcast(c, data, 8, DDL_INT64, 0); /* completes without rank 1 over tcp and zmq */
        int completed = st == DDL_OK;
        if (st == DDL_OK) /* this one cannot, without rank 1 */
            st = ddl_comm_allreduce(c, f, 3, DDL_FLOAT32, DDL_SUM);
        CHECK(st != DDL_OK);
        CHECK(ddl_comm_regroup(c, 0, &g) == DDL_OK && g.world == world && g.n_lost == 0);
        if (!completed) /* shm's small calls need every rank (none completed it), and the root may
                         * find rank 1's link closed: it retries (and gets the result kept by 2 or 3) */
            CHECK(ddl_comm_broadcast(c, data, 8, DDL_INT64, 0) == DDL_OK);
    }
    int same = 1;
    for (int i = 0; i < 8; i++)
        same &= data[i] == 100 + i;
    CHECK(same);
    f[0] = 1.0f, f[1] = 2.0f, f[2] = (float)rank;
    CHECK(ddl_comm_allreduce(c, f, 3, DDL_FLOAT32, DDL_SUM) == DDL_OK && f[0] == 4.0f && f[1] == 8.0f && f[2] == 6.0f);
    one = rank;
    CHECK(ddl_comm_allreduce(c, &one, 1, DDL_INT64, DDL_MAX) == DDL_OK && one == 3);
    if (rank == 1 && strcmp(ddl_comm_transport_name(c), "tcp") == 0)
        CHECK(missed_taken == 1);
    ddl_comm_destroy(c);
}

/* missed_large: the same with a result of 1 MiB (an evaluation's confusion matrix of 362 classes),
 * larger than the comm's own 64 KiB of kept result. A large call cannot complete without one
 * rank, so the completion is staged: ranks 0, 2 and 3 keep the all-reduce's result as its end
 * would (replay.c's hooks, the result being every rank's sum); all regroup; rank 1 retries it and
 * must be handed that result, while the others go on to the next call. Without results of any
 * size kept, rank 1's retry meets the others' next call and every rank fails. */
#define LARGE_N (1 << 18)
static void missed_large(int rank, int world, void *p)
{
    const arg *a = p;
    ddl_comm_config cfg = elastic_config(a, rank, world);
    cfg.log = missed_log;
    ddl_comm *c = ranks_open(&cfg);
    if (!c)
        return;
    float *v = malloc(LARGE_N * sizeof *v);
    for (int i = 0; i < LARGE_N; i++)
        v[i] = rank == 1 ? 0.0f : (float)(i % 1000) * 4.0f; /* the sum of the four ranks' i % 1000 */
    ddl__call k = {DDL__OP_ALLREDUCE, DDL_FLOAT32, DDL_SUM, LARGE_N, 0, 0};
    if (rank != 1) {
        CHECK(c->member->enter(c, &k, v, LARGE_N * sizeof *v) == 0);
        CHECK(c->member->leave(c, &k, DDL_OK, v, LARGE_N * sizeof *v) == DDL_OK);
    }
    ddl_regroup g;
    CHECK(ddl_comm_regroup(c, 0, &g) == DDL_OK && g.world == world && g.n_lost == 0);
    if (rank == 1) { /* the retry: taken, not run */
        for (int i = 0; i < LARGE_N; i++)
            v[i] = (float)(i % 1000);
        CHECK(ddl_comm_allreduce(c, v, LARGE_N, DDL_FLOAT32, DDL_SUM) == DDL_OK);
    }
    int same = 1;
    for (int i = 0; i < LARGE_N; i++)
        same &= v[i] == (float)(i % 1000) * 4.0f;
    CHECK(same);
    int64_t one = rank;
    CHECK(ddl_comm_allreduce(c, &one, 1, DDL_INT64, DDL_MAX) == DDL_OK && one == 3); /* the calls match */
    if (rank == 1)
        CHECK(missed_taken == 1);
    free(v);
    ddl_comm_destroy(c);
}

/* not_elastic: regroup on a comm created without elastic_min is refused, saying so */
static void not_elastic(int rank, int world, void *p)
{
    (void)p;
    ddl_comm_config cfg = make_config(rank, world, 20000);
    ddl_comm *c = ranks_open(&cfg);
    if (!c)
        return;
    ddl_regroup g;
    CHECK(ddl_comm_regroup(c, 0, &g) == DDL_EINVAL && strstr(ddl_comm_error(c), "not elastic"));
    ddl_comm_destroy(c);
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc == 10 && strcmp(argv[1], "--replacement") == 0) { /* replacement(): TRANSPORT JOB PORT FD SLOT WORLD MIN PEERS */
        static arg a = {DIE, 2, 1, ""};
        ranks_transport = argv[2];
        snprintf(ranks_job, sizeof ranks_job, "%s", argv[3]);
        ranks_port = atoi(argv[4]);
        ranks_report_fd = atoi(argv[5]);
        a.min = atoi(argv[8]);
        snprintf(a.peers, sizeof a.peers, "%s", argv[9]);
        replacement_run(&a, atoi(argv[6]), atoi(argv[7]));
    }
    const char *tps[] = {"tcp", "shm", "zmq"};
    for (int t = 0; t < 3; t++) {
        if (!ddl_transport_find(tps[t]))
            continue;
        arg die = {DIE, 2, 0, ""}, stop = {STOP, 2, 0, ""}, floor3 = {DIE, 4, 0, ""};
        fprintf(stderr, "%s: kill -9 of rank %d at step %d\n", tps[t], VICTIM, AT);
        run_ranks(tps[t], 4, rank_body, &die, 30, VICTIM);
        fprintf(stderr, "%s: SIGSTOP of rank %d at step %d\n", tps[t], VICTIM, AT);
        run_ranks(tps[t], 4, rank_body, &stop, 30, VICTIM);
        arg back = {DIE, 2, 1, ""};
        for (int r = 0, k = 0; r < 4; r++)
            k += snprintf(back.peers + k, sizeof back.peers - (size_t)k, "%s127.0.0.1:%d", r ? "," : "",
                          ranks_free_port(100 + 10 * t + r));
        fprintf(stderr, "%s: kill -9 of rank %d at step %d, a replacement joins\n", tps[t], VICTIM, AT);
        run_ranks(tps[t], 4, rank_body, &back, 30, VICTIM);
        if (t == 0) {
            arg strange = back;
            strange.rejoin = 2;
            fprintf(stderr, "%s: a process with another token asks to join\n", tps[t]);
            run_ranks(tps[t], 4, rank_body, &strange, 30, VICTIM);
            fprintf(stderr, "%s: kill -9 below the elastic minimum\n", tps[t]);
            run_ranks(tps[t], 4, rank_body, &floor3, 30, VICTIM);
            run_ranks(tps[t], 2, not_elastic, NULL, 30, -1);
        }
        {
            fprintf(stderr, "%s: a rank misses a broadcast the others complete\n", tps[t]);
            run_ranks(tps[t], 4, missed, &die, 30, -1);
        }
        if (t == 0) {
            fprintf(stderr, "%s: a rank misses an all-reduce of 1 MiB the others complete\n", tps[t]);
            run_ranks(tps[t], 4, missed_large, &die, 30, -1);
        }
    }
    /* the configuration: elastic needs heartbeats and a transport that can reopen */
    ddl_comm_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.rank = 0;
    cfg.world_size = 2;
    cfg.transport = ddl_transport_find("tcp");
    cfg.elastic_min = 1;
    cfg.elastic_max = 2;
    ddl_comm *c = NULL;
    char err[DDL_ERR_BYTES];
    CHECK(ddl_comm_create(&cfg, NULL, &c, err, sizeof err) == DDL_EINVAL && strstr(err, "heartbeats"));
    cfg.heartbeat_timeout_ms = 1000;
    cfg.elastic_max = 1;
    CHECK(ddl_comm_create(&cfg, NULL, &c, err, sizeof err) == DDL_EINVAL && strstr(err, "max"));
    return TEST_END();
}
