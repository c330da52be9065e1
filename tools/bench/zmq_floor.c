/* zmq_floor.c - what libzmq itself gives on this machine, with nothing of ddl in between: two
 * processes on tcp loopback, one PAIR connection each way (as ddl's zmq transport has one
 * connection per direction), exchange BYTES at once (each sends, then receives the other's), as
 * one step of ddl's all-reduce does. Prints the median time of an exchange over ROUNDS rounds of
 * ITERS:
 *   zmq_floor: bytes=4096 exchange_us=74.5
 * With "zerocopy", libzmq sends straight from the buffer and the receiver reads in libzmq's
 * message: no copy of ours at all, the least libzmq can do.
 * Part of make bench (mac.sh, BENCH_ONLY=mac), beside ddl's zmq all-reduce; never of make test.
 * Usage: zmq_floor BYTES [ITERS] [ROUNDS] [zerocopy] */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "clock.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int zero_copy; /* "zerocopy": libzmq sends from our buffer and we read in its own */

/* exchange: send `bytes` on tx and receive as many on rx; 0 on success. */
static int exchange(void *tx, void *rx, const char *out, char *in, size_t bytes)
{
    if (!zero_copy)
        return zmq_send(tx, out, bytes, 0) == (int)bytes && zmq_recv(rx, in, bytes, 0) == (int)bytes ? 0 : -1;
    zmq_msg_t m, r; /* out never changes, so libzmq may read it whenever it likes: no free function */
    zmq_msg_init_data(&m, (void *)out, bytes, NULL, NULL);
    zmq_msg_init(&r);
    int ok = zmq_msg_send(&m, tx, 0) == (int)bytes && zmq_msg_recv(&r, rx, 0) == (int)bytes;
    zmq_msg_close(&r);
    return ok ? 0 : -1;
}

/* pair_socket: a PAIR socket that waits at most 10 s and drops what is left when closed. */
static void *pair_socket(void *ctx)
{
    void *sock = zmq_socket(ctx, ZMQ_PAIR);
    int timeout = 10000, linger = 0;
    zmq_setsockopt(sock, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    zmq_setsockopt(sock, ZMQ_SNDTIMEO, &timeout, sizeof timeout);
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    return sock;
}

/* bind_any: bind sock to a free loopback port; its address into addr. */
static int bind_any(void *sock, char *addr, size_t size)
{
    return zmq_bind(sock, "tcp://127.0.0.1:*") == 0 && zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, addr, &size) == 0 ? 0
                                                                                                                : -1;
}

int main(int argc, char **argv)
{
    size_t bytes = argc > 1 ? strtoul(argv[1], NULL, 10) : 4096;
    int iters = argc > 2 ? atoi(argv[2]) : 2000, rounds = argc > 3 ? atoi(argv[3]) : 5;
    zero_copy = argc > 4 && strcmp(argv[4], "zerocopy") == 0;
    if (bytes == 0 || iters < 1 || rounds < 1 || rounds > 100) {
        fprintf(stderr, "usage: zmq_floor BYTES [ITERS] [ROUNDS<=100] [zerocopy]\n");
        return 2;
    }
    /* as ddl's zmq transport does: keep libzmq's message buffers in the heap, else each one of
     * 512 KiB goes back to the kernel when freed and comes back as fresh pages to fault in */
    mallopt(M_MMAP_THRESHOLD, 16 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    char *out = calloc(1, bytes), *in = malloc(bytes), addrs[2][64] = {{0}};
    int fds[2];
    if (!out || !in || pipe(fds) != 0)
        return 1;
    pid_t child = fork(); /* before any context: libzmq's threads do not survive a fork */
    if (child == 0) { /* the peer: connects to the parent's two sockets, whose addresses come on the pipe */
        close(fds[1]);
        int st = read(fds[0], addrs, sizeof addrs) == (ssize_t)sizeof addrs ? 0 : -1;
        void *pctx = zmq_ctx_new(), *rx = pair_socket(pctx), *tx = pair_socket(pctx);
        if (st == 0)
            st = zmq_connect(rx, addrs[0]) == 0 && zmq_connect(tx, addrs[1]) == 0 ? 0 : -1;
        for (long i = 0; st == 0 && i < 20 + (long)iters * rounds; i++)
            st = exchange(tx, rx, out, in, bytes);
        zmq_close(rx), zmq_close(tx);
        zmq_ctx_term(pctx);
        _exit(st == 0 ? 0 : 1);
    }
    close(fds[0]);
    void *ctx = zmq_ctx_new(), *down = pair_socket(ctx), *up = pair_socket(ctx); /* to and from the peer */
    if (child < 0 || bind_any(down, addrs[0], sizeof addrs[0]) != 0 || bind_any(up, addrs[1], sizeof addrs[1]) != 0 ||
        write(fds[1], addrs, sizeof addrs) != (ssize_t)sizeof addrs) {
        fprintf(stderr, "zmq_floor: cannot start: %s\n", zmq_strerror(zmq_errno()));
        return 1;
    }
    close(fds[1]);
    double t[100];
    int st = child > 0 ? 0 : -1;
    for (int i = 0; st == 0 && i < 20; i++) /* warm-up: connections, buffers */
        st = exchange(down, up, out, in, bytes);
    for (int r = 0; st == 0 && r < rounds; r++) {
        double t0 = bench_now();
        for (int i = 0; st == 0 && i < iters; i++)
            st = exchange(down, up, out, in, bytes);
        t[r] = (bench_now() - t0) / iters * 1e6;
    }
    int status = 1;
    if (child > 0)
        waitpid(child, &status, 0);
    if (st != 0 || status != 0) {
        fprintf(stderr, "zmq_floor: an exchange failed: %s\n", zmq_strerror(zmq_errno()));
        return 1;
    }
    qsort(t, (size_t)rounds, sizeof t[0], cmp_double);
    printf("zmq_floor: bytes=%zu%s exchange_us=%.2f\n", bytes, zero_copy ? " zerocopy" : "", t[rounds / 2]);
    zmq_close(down), zmq_close(up);
    zmq_ctx_term(ctx);
    free(out);
    free(in);
    return 0;
}
