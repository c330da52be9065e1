/* test_backlog.c - a rank that reads nothing for a while, as one does that computes, while a peer
 * sends it thousands of messages and leaves: every message arrives, in order, then the peer's
 * goodbye; the rank does not abort (tcp and zmq, 2 ranks).
 * Over zmq with libzmq 4.3.4 this aborted the reading rank ("Assertion failed: !_io_error
 * (src/stream_engine_base.cpp:331)", signal 6): past the receive high-water mark (1000 messages)
 * libzmq stops reading the connection, the ZMTP heartbeat the transport had turned on pinged the
 * peer that had gone, its reset marked the connection failed while it stayed stopped, and the
 * next heartbeat wrote to it anyway. A rank closing its comm while a peer's goodbye arrives is
 * the same sequence (4 hosts x 16 ranks over zmq in tests/test_many_ranks.sh). */
/* ddl-test: idle (mostly waits (timeouts, heartbeats, stopped ranks), bounds in seconds: four run at a time) */
#include "check.h"
#include "ranks.h"

#include <stdint.h>
#include <string.h>

#define MESSAGES 5000 /* five times libzmq's default receive high-water mark */
#define QUIET_MS 3500 /* the zmq heartbeat was 1 s: a ping at 1 s, the abort at the next */

static void rank_backlog(int rank, int world, void *arg)
{
    (void)arg;
    ddl_comm_config cfg = make_config(rank, world, 20000);
    ddl_comm *c = ranks_open(&cfg);
    if (!c)
        return;
    CHECK(ddl_comm_barrier(c) == DDL_OK);
    uint64_t m[2];
    if (rank == 1) {
        int st = DDL_OK;
        for (uint64_t i = 0; i < MESSAGES && st == DDL_OK; i++) {
            m[0] = i, m[1] = i * 2654435761u;
            st = ddl_comm_send(c, 0, 3, m, sizeof m);
        }
        CHECK(st == DDL_OK);
        ddl_comm_destroy(c); /* gone, with the backlog not yet read */
        return;
    }
    usleep(QUIET_MS * 1000);
    int in_order = 1, st = DDL_OK;
    uint64_t i;
    for (i = 0; i < MESSAGES && st == DDL_OK; i++) {
        st = ddl_comm_recv(c, 1, 3, m, sizeof m);
        in_order &= st == DDL_OK && m[0] == i && m[1] == i * 2654435761u;
    }
    if (st != DDL_OK)
        fprintf(stderr, "%s: message %llu of %d: %s: %s\n", ranks_transport, (unsigned long long)i - 1, MESSAGES,
                ddl_strerror(st), ddl_comm_error(c));
    CHECK(st == DDL_OK);
    CHECK(in_order);
    st = ddl_comm_recv(c, 1, 3, m, sizeof m); /* nothing more: rank 1 said goodbye */
    CHECK(st == DDL_EPEER);
    CHECK(strstr(ddl_comm_error(c), "rank 1") != NULL);
    ddl_comm_destroy(c);
}

int main(void)
{
    const char *names[4];
    int nt = test_transports(names);
    for (int t = 0; t < nt; t++) {
        if (strcmp(names[t], "tcp") != 0 && strcmp(names[t], "zmq") != 0)
            continue;
        double t0 = ranks_now();
        run_ranks(names[t], 2, rank_backlog, NULL, 60, -1); /* a rank's signal is named, and fails */
        printf("%s: %d messages read %.1f s late: %.1f s\n", names[t], MESSAGES, QUIET_MS / 1000.0,
               ranks_now() - t0);
    }
    return TEST_END();
}
