/* test_heartbeat.c - a stalled rank is named by every other rank, fast, whatever its place in the
 * ring, over every transport; a long computation, a rank that left on purpose and a flood of
 * replayed or forged heartbeats change nothing of that.
 *
 *  - stall: 4 ranks; a random rank stops itself (SIGSTOP) after a barrier; every other rank's next
 *    all-reduce fails with DDL_ETIMEDOUT naming it ("rank V (pid P ...) stopped responding")
 *    within the heartbeat timeout + 1 s, not earlier than the timeout less one interval.
 *  - attack (root, over tcp): an attacker on the host's loopback sniffs the stalled rank's genuine
 *    heartbeats (AF_PACKET) and, once it has stopped, replays them and sends copies with a higher
 *    counter: without the counter check or the MAC the stalled rank would look alive.
 *  - long computation: a rank that computes for 3.5 heartbeat timeouts outside any collective
 *    is not named; the all-reduce that waited for it succeeds.
 *  - goodbye: a rank that destroys its comm early is not named later.
 *  - configuration: bad heartbeat settings are refused with a message.
 * It runs alone, though it mostly waits: its attacker sniffs every heartbeat on the loopback, and
 * another test's there kept it from seeing the victim fall silent (in the idle lane, once). */
#include "check.h"
#include "ranks.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Under a sanitizer (make test SAN=..., which runs every test at once on a loaded machine, each
 * process several times slower) a heartbeat thread can miss a second: the times are 3x longer
 * there, and every check below is relative to them. */
static int hb_scale(void)
{
    const char *san = getenv("SAN");
    return san && san[0] ? 3 : 1;
}
#define HB_TIMEOUT_MS (1000 * hb_scale())
#define HB_INTERVAL_MS (200 * hb_scale())

typedef struct stall_arg {
    int victim;
} stall_arg;

static ddl_comm *create(int rank, int world, int timeout_ms)
{
    ddl_comm_config cfg = make_config(rank, world, timeout_ms);
    cfg.heartbeat_timeout_ms = HB_TIMEOUT_MS;
    cfg.heartbeat_interval_ms = HB_INTERVAL_MS;
    ddl_comm *c = NULL;
    char err[DDL_ERR_BYTES] = "";
    int st = ddl_comm_create(&cfg, NULL, &c, err, sizeof err);
    CHECK(st == DDL_OK);
    if (st != DDL_OK)
        fprintf(stderr, "%s rank %d: create: %s\n", ranks_transport, rank, err);
    return c;
}

/* ---- stall ---- */

static void stall_rank(int rank, int world, void *argp)
{
    const stall_arg *a = argp;
    ddl_comm *c = create(rank, world, 30000);
    if (!c)
        return;
    int64_t pids[RANKS_MAX], me = getpid();
    CHECK(ddl_comm_allgather(c, &me, pids, 1, DDL_INT64) == DDL_OK);
    float x[1000];
    for (int i = 0; i < 1000; i++)
        x[i] = (float)rank;
    CHECK(ddl_comm_allreduce(c, x, 1000, DDL_FLOAT32, DDL_SUM) == DDL_OK); /* the ring works */
    usleep(3 * HB_INTERVAL_MS * 1000); /* time for a sniffer to see heartbeats */
    int bst = ddl_comm_barrier(c);
    CHECK(bst == DDL_OK);
    if (bst != DDL_OK)
        fprintf(stderr, "%s rank %d: barrier before the stop: %s\n", ranks_transport, rank, ddl_comm_error(c));
    /* The victim stops only once every other rank has left the barrier: its own last barrier
     * message could still be queued (zmq's I/O thread) when it stops, and a rank still in the
     * barrier would then rightly name it, before the stop this test times. */
    char one = 1;
    if (rank == a->victim) {
        for (int r = 0; r < world; r++)
            if (r != rank)
                CHECK(ddl_comm_recv(c, r, 7, &one, 1) == DDL_OK);
        raise(SIGSTOP); /* killed by the first other rank below */
        return;
    }
    CHECK(ddl_comm_send(c, a->victim, 7, &one, 1) == DDL_OK);
    double t0 = ranks_now();
    int st = ddl_comm_allreduce(c, x, 1000, DDL_FLOAT32, DDL_SUM);
    double ms = (ranks_now() - t0) * 1000;
    const char *e = ddl_comm_error(c);
    char want[64];
    snprintf(want, sizeof want, "rank %d (pid %lld", a->victim, (long long)pids[a->victim]);
    CHECK(st == DDL_ETIMEDOUT);
    CHECK(strstr(e, want) != NULL && strstr(e, "stopped responding") != NULL);
    CHECK(ms < HB_TIMEOUT_MS + 1000 && ms > HB_TIMEOUT_MS - HB_INTERVAL_MS - 100);
    if (!(strstr(e, want) && ms < HB_TIMEOUT_MS + 1000))
        fprintf(stderr, "%s rank %d after %.0f ms: %s (wanted %s)\n", ranks_transport, rank, ms, e, want);
    int first_other = a->victim == 0 ? 1 : 0;
    if (rank == first_other) {
        usleep(300 * 1000); /* the others name it themselves, not from its closed links */
        kill((pid_t)pids[a->victim], SIGKILL);
    }
    ddl_comm_destroy(c);
}

/* ---- an attacker on the loopback ---- */

#define BEAT_BYTES 48

typedef struct captured {
    struct sockaddr_in to;
    unsigned char beat[BEAT_BYTES];
    int have;
} captured;

/* sniff: take one packet; keep the last heartbeat from `victim` to each rank. */
static void sniff(int ps, int victim, captured *cap, double *last_seen)
{
    unsigned char pkt[2048];
    ssize_t n = recv(ps, pkt, sizeof pkt, MSG_DONTWAIT);
    const struct iphdr *ip = (const void *)pkt;
    if (n < (ssize_t)sizeof *ip || ip->protocol != IPPROTO_UDP)
        return;
    size_t hl = (size_t)ip->ihl * 4;
    const struct udphdr *u = (const void *)(pkt + hl);
    const unsigned char *d = pkt + hl + sizeof *u;
    if ((size_t)n != hl + sizeof *u + BEAT_BYTES || memcmp(d, "DDBH", 4) != 0 || (int)(d[8] | d[9] << 8) != victim)
        return;
    int to = d[12] | d[13] << 8;
    if (to >= RANKS_MAX)
        return;
    cap[to].to = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = u->dest, .sin_addr.s_addr = ip->daddr};
    memcpy(cap[to].beat, d, BEAT_BYTES);
    cap[to].have = 1;
    *last_seen = ranks_now();
}

static volatile sig_atomic_t attacker_stop;
static void on_term(int sig) { (void)sig, attacker_stop = 1; }

/* attacker: sniff heartbeats from rank `victim`; when they stop for 3 intervals, send back every
 * last one seen (a replay) and a copy with a counter 1000 higher (a forgery without the key),
 * every 50 ms until told to stop (SIGTERM) or `seconds` passed. Exit status 0 if it sent at
 * least 10 datagrams. */
static void attacker(int victim, double seconds)
{
    signal(SIGTERM, on_term);
    int ps = socket(AF_PACKET, SOCK_DGRAM, htons(ETH_P_IP));
    int us = socket(AF_INET, SOCK_DGRAM, 0);
    if (ps < 0 || us < 0)
        _exit(2);
    struct sockaddr_ll ll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IP), .sll_ifindex = (int)if_nametoindex("lo")};
    if (bind(ps, (struct sockaddr *)&ll, sizeof ll) != 0)
        _exit(2);
    captured cap[RANKS_MAX] = {{{0}, {0}, 0}};
    double end = ranks_now() + seconds, last_seen = 0;
    long sent = 0;
    double next_flood = 0;
    long rounds = 0;
    while (ranks_now() < end && !attacker_stop) {
        struct pollfd pf = {.fd = ps, .events = POLLIN};
        if (poll(&pf, 1, 10) > 0 && !next_flood) /* our own datagrams are not its heartbeats */
            sniff(ps, victim, cap, &last_seen);
        double now = ranks_now();
        if (!last_seen || now - last_seen < 3 * HB_INTERVAL_MS / 1000.0 || now < next_flood)
            continue;
        next_flood = now + 0.05;
        for (int r = 0; r < RANKS_MAX; r++) { /* it stopped: pretend it is alive */
            if (!cap[r].have)
                continue;
            unsigned char forged[BEAT_BYTES];
            memcpy(forged, cap[r].beat, BEAT_BYTES);
            uint64_t counter = 0; /* the next counters, as the rank itself would send them; the old MAC */
            for (int k = 7; k >= 0; k--)
                counter = counter << 8 | forged[24 + k];
            counter += (uint64_t)++rounds;
            for (int k = 0; k < 8; k++)
                forged[24 + k] = (unsigned char)(counter >> (8 * k));
            sent += sendto(us, cap[r].beat, BEAT_BYTES, 0, (struct sockaddr *)&cap[r].to, sizeof cap[r].to) > 0;
            sent += sendto(us, forged, BEAT_BYTES, 0, (struct sockaddr *)&cap[r].to, sizeof cap[r].to) > 0;
        }
    }
    _exit(sent >= 10 ? 0 : 1);
}

static void test_stall(const char *tname, int attack)
{
    stall_arg a = {(int)(((unsigned)getpid() + (unsigned)ranks_run_counter * 7u) % 4u)};
    pid_t spy = -1;
    if (attack && (spy = fork()) == 0)
        attacker(a.victim, 6.0);
    printf("%s: rank %d of 4 stops%s\n", tname, a.victim, attack ? ", an attacker replays and forges its heartbeats" : "");
    run_ranks(tname, 4, stall_rank, &a, 30, a.victim);
    if (spy > 0) {
        int st = 0;
        kill(spy, SIGTERM); /* every rank has given its verdict: the attack is over */
        CHECK(waitpid(spy, &st, 0) == spy && WIFEXITED(st) && WEXITSTATUS(st) == 0); /* the attack took place */
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
            fprintf(stderr, "attacker exited with status %d (2: no packet socket)\n", WEXITSTATUS(st));
    }
}

/* ---- no false alarms ---- */

static void long_compute_rank(int rank, int world, void *arg)
{
    (void)arg;
    ddl_comm *c = create(rank, world, 30000);
    if (!c)
        return;
    float x[64] = {0};
    if (rank == 1)
        usleep((useconds_t)(3.5 * HB_TIMEOUT_MS * 1000)); /* a long evaluation: no collective */
    int st = ddl_comm_allreduce(c, x, 64, DDL_FLOAT32, DDL_SUM);
    CHECK(st == DDL_OK);
    if (st != DDL_OK)
        fprintf(stderr, "rank %d: %s\n", rank, ddl_comm_error(c));
    ddl_comm_destroy(c);
}

static void goodbye_rank(int rank, int world, void *arg)
{
    (void)arg;
    ddl_comm *c = create(rank, world, 30000);
    if (!c)
        return;
    CHECK(ddl_comm_barrier(c) == DDL_OK);
    if (rank == 2) { /* leaves on purpose */
        ddl_comm_destroy(c);
        return;
    }
    usleep((useconds_t)(2.5 * HB_TIMEOUT_MS * 1000));
    char b[8] = "hello";
    int st = rank == 0 ? ddl_comm_send(c, 1, 7, b, sizeof b) : ddl_comm_recv(c, 0, 7, b, sizeof b);
    CHECK(st == DDL_OK);
    if (st != DDL_OK)
        fprintf(stderr, "rank %d: %s\n", rank, ddl_comm_error(c));
    ddl_comm_destroy(c);
}

static void long_compute_shm(void *arg) { run_ranks("shm", 3, long_compute_rank, arg, 30, -1); }

/* ---- configuration ---- */

static void test_config(void)
{
    ddl_comm_config cfg;
    char err[DDL_ERR_BYTES];
    setenv("DDL_HEARTBEAT_TIMEOUT_MS", "-5", 1);
    CHECK(ddl_comm_config_from_env(&cfg, NULL, err, sizeof err) == DDL_EINVAL && strstr(err, "DDL_HEARTBEAT_TIMEOUT_MS"));
    setenv("DDL_HEARTBEAT_TIMEOUT_MS", "1000", 1);
    setenv("DDL_HEARTBEAT_INTERVAL_MS", "2000", 1);
    CHECK(ddl_comm_config_from_env(&cfg, NULL, err, sizeof err) == DDL_EINVAL && strstr(err, "DDL_HEARTBEAT_INTERVAL_MS"));
    unsetenv("DDL_HEARTBEAT_INTERVAL_MS");
    CHECK(ddl_comm_config_from_env(&cfg, NULL, err, sizeof err) == DDL_OK && cfg.heartbeat_timeout_ms == 1000 &&
          cfg.heartbeat_interval_ms > 0 && cfg.heartbeat_interval_ms <= 1000);
    unsetenv("DDL_HEARTBEAT_TIMEOUT_MS");
    CHECK(ddl_comm_config_from_env(&cfg, NULL, err, sizeof err) == DDL_OK && cfg.heartbeat_timeout_ms == 5000 &&
          cfg.heartbeat_interval_ms == 1000);
    setenv("DDL_HEARTBEAT_TIMEOUT_MS", "0", 1);
    CHECK(ddl_comm_config_from_env(&cfg, NULL, err, sizeof err) == DDL_OK && cfg.heartbeat_timeout_ms == 0);
    unsetenv("DDL_HEARTBEAT_TIMEOUT_MS");
    memset(&cfg, 0, sizeof cfg);
    cfg.world_size = 2;
    cfg.heartbeat_timeout_ms = 100;
    cfg.heartbeat_interval_ms = 500;
    ddl_comm *c = NULL;
    CHECK(ddl_comm_create(&cfg, NULL, &c, err, sizeof err) == DDL_EINVAL && !c && strstr(err, "heartbeat"));
}

int main(void)
{
    test_config();
    const char *names[4];
    int n = test_transports(names);
    for (int i = 0; i < n; i++)
        test_stall(names[i], 0);
    if (ddl_transport_find("tcp")) {
        if (geteuid() == 0)
            test_stall("tcp", 1);
        else
            printf("skipped: the attacker needs a packet socket (root)\n");
    }
    /* no false alarms: runs that wait seconds without a collective, side by side */
    int with_shm = ddl_transport_find("shm") != NULL;
    beside shm = {-1, -1};
    if (with_shm)
        shm = beside_start(long_compute_shm, NULL);
    if (ddl_transport_find("tcp")) {
        run_ranks("tcp", 3, long_compute_rank, NULL, 30, -1);
        run_ranks("tcp", 3, goodbye_rank, NULL, 30, -1);
    }
    if (with_shm)
        beside_join(shm, 40); /* a child that could not start is a failed check */
    return TEST_END();
}
