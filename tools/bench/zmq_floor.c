/* zmq_floor.c - what libzmq itself gives on this machine, with nothing of ddl in between: two
 * processes joined by a PAIR socket over tcp loopback exchange BYTES at once (each sends, then
 * receives the other's), as one step of ddl's all-reduce does. Prints the median time of an
 * exchange over ROUNDS rounds of ITERS:
 *   zmq_floor: bytes=4096 exchange_us=74.5
 * Part of make bench (mac.sh, BENCH_ONLY=mac), beside ddl's zmq all-reduce; never of make test.
 * Usage: zmq_floor BYTES [ITERS] [ROUNDS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* exchange: send and receive `bytes` once; 0 on success. */
static int exchange(void *sock, const char *out, char *in, size_t bytes)
{
    return zmq_send(sock, out, bytes, 0) == (int)bytes && zmq_recv(sock, in, bytes, 0) == (int)bytes ? 0 : -1;
}

int main(int argc, char **argv)
{
    size_t bytes = argc > 1 ? strtoul(argv[1], NULL, 10) : 4096;
    int iters = argc > 2 ? atoi(argv[2]) : 2000, rounds = argc > 3 ? atoi(argv[3]) : 5;
    if (bytes == 0 || iters < 1 || rounds < 1 || rounds > 100) {
        fprintf(stderr, "usage: zmq_floor BYTES [ITERS] [ROUNDS<=100]\n");
        return 2;
    }
    char *out = calloc(1, bytes), *in = malloc(bytes);
    void *ctx = zmq_ctx_new(), *sock = zmq_socket(ctx, ZMQ_PAIR);
    int timeout = 10000, linger = 0;
    zmq_setsockopt(sock, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    zmq_setsockopt(sock, ZMQ_SNDTIMEO, &timeout, sizeof timeout);
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    char addr[64];
    size_t len = sizeof addr;
    if (!out || !in || zmq_bind(sock, "tcp://127.0.0.1:*") != 0 ||
        zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, addr, &len) != 0) {
        fprintf(stderr, "zmq_floor: cannot bind: %s\n", zmq_strerror(zmq_errno()));
        return 1;
    }
    pid_t child = fork();
    if (child == 0) { /* the peer: its own context and socket, connected to the parent's */
        zmq_close(sock); /* the parent's, inherited: never used here */
        void *pctx = zmq_ctx_new(), *peer = zmq_socket(pctx, ZMQ_PAIR);
        zmq_setsockopt(peer, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
        zmq_setsockopt(peer, ZMQ_LINGER, &linger, sizeof linger);
        int st = zmq_connect(peer, addr);
        for (long i = 0; st == 0 && i < 20 + (long)iters * rounds; i++)
            st = exchange(peer, out, in, bytes);
        zmq_close(peer);
        _exit(st == 0 ? 0 : 1);
    }
    double t[100];
    int st = child > 0 ? 0 : -1;
    for (int i = 0; st == 0 && i < 20; i++) /* warm-up: connection, buffers */
        st = exchange(sock, out, in, bytes);
    for (int r = 0; st == 0 && r < rounds; r++) {
        double t0 = now_s();
        for (int i = 0; st == 0 && i < iters; i++)
            st = exchange(sock, out, in, bytes);
        t[r] = (now_s() - t0) / iters * 1e6;
    }
    int status = 1;
    if (child > 0)
        waitpid(child, &status, 0);
    if (st != 0 || status != 0) {
        fprintf(stderr, "zmq_floor: an exchange failed: %s\n", zmq_strerror(zmq_errno()));
        return 1;
    }
    qsort(t, (size_t)rounds, sizeof t[0], cmp_double);
    printf("zmq_floor: bytes=%zu exchange_us=%.2f\n", bytes, t[rounds / 2]);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    free(out);
    free(in);
    return 0;
}
