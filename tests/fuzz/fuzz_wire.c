/* fuzz_wire.c - libFuzzer target of what ddl reads from the network. Input: one mode byte, then
 * bytes a hostile or broken peer sends.
 *   mode 0: the 32-byte collective header check of src/comm/comm.c, reached through the public
 *           ddl_comm_create with a fake transport whose exchange delivers the input as the
 *           received header and payload (and sometimes a length mismatch);
 *   mode 1: TCP frames: the input arrives on a socket as rank 1's side of a tcp exchange
 *           (transports/tcp.c's frame prefix check: magic, flags, lying lengths, BYE, ABORT);
 *   mode 2: the TCP handshake, connecting side: the input is what the accepting rank answers
 *           (hello, then proof reply) to the greeting on a stream socket tcp.c runs
 *           (transports/net_socket.c's, whose message parser and proof checks are
 *           transports/net_handshake.c's).
 * No ddl source was changed for this: the parsers are reached through their real callers. The
 * state of the TCP transport is private to tcp.c, so tcp.c is compiled into this
 * target (its ddl_transport_tcp then stands in for the one in libddl.a, whose tcp.o the linker
 * no longer needs).
 * Every input must give DDL_OK or an error with a message, never a crash, a hang or a leak. */
#include "ddl.h"
#include "tcp.c"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- mode 0: a fake transport that receives the fuzz input ---- */

static const uint8_t *in_data;
static size_t in_size, in_at;

static size_t fake_bytes(const ddl_comm_config *cfg) { (void)cfg; return 64; }
static int fake_open(void *state, const ddl_comm_config *cfg) { (void)state, (void)cfg; return DDL_OK; }
static void fake_close(void *state) { (void)state; }

static int fake_exchange(void *state, int to, const void *send_hdr, const void *send_buf, size_t send_bytes, int from,
                         void *recv_hdr, void *recv_buf, size_t recv_bytes, int timeout_ms)
{
    (void)state, (void)to, (void)send_hdr, (void)send_buf, (void)send_bytes, (void)timeout_ms;
    if (from < 0)
        return DDL_OK;
    if (in_at + 1 + DDL_HEADER_BYTES > in_size)
        return DDL_EPEER; /* the peer "died": the input is used up */
    int mismatch = in_data[in_at++] == 0xff;
    memcpy(recv_hdr, in_data + in_at, DDL_HEADER_BYTES);
    in_at += DDL_HEADER_BYTES;
    if (mismatch)
        return DDL_EMISMATCH;
    size_t n = in_size - in_at < recv_bytes ? in_size - in_at : recv_bytes;
    memcpy(recv_buf, in_data + in_at, n);
    memset((uint8_t *)recv_buf + n, 0, recv_bytes - n);
    in_at += n;
    return DDL_OK;
}

static const char *fake_error(const void *state) { (void)state; return ""; }

static const ddl_transport fake = {.version = DDL_TRANSPORT_VERSION, .name = "fuzz", .state_bytes = fake_bytes,
                                   .open = fake_open, .close = fake_close, .exchange = fake_exchange,
                                   .error = fake_error};

static void fuzz_header(const uint8_t *data, size_t size)
{
    in_data = data, in_size = size, in_at = 0;
    ddl_comm_config cc = {.transport = &fake, .rank = 0, .world_size = 2, .local_rank = 0, .local_size = 2,
                          .job = "fuzz", .timeout_ms = 100};
    ddl_comm *c = NULL;
    if (ddl_comm_create(&cc, NULL, &c, NULL, 0) != DDL_OK)
        return;
    float f[8] = {0};
    int64_t i64[3] = {0};
    char buf[16];
    int rc = DDL_OK;
    for (int op = 0; rc == DDL_OK && in_at < in_size; op++) {
        switch (op % 5) {
        case 0: rc = ddl_comm_allreduce(c, f, 8, DDL_FLOAT32, DDL_SUM); break;
        case 1: rc = ddl_comm_broadcast(c, i64, 3, DDL_INT64, 1); break;
        case 2: rc = ddl_comm_barrier(c); break;
        case 3: rc = ddl_comm_recv(c, 1, 7, buf, sizeof buf); break;
        default: rc = ddl_comm_allgather(c, f, f, 4, DDL_FLOAT32); break;
        }
    }
    if (rc != DDL_OK && !ddl_comm_error(c)[0])
        abort(); /* a failure must say why */
    ddl_comm_destroy(c);
}

/* ---- modes 1 and 2: a tcp_state of rank 0 of 2 whose link to rank 1 is a socket pair ---- */

static tcp_state *tcp_make(int fd)
{
    const ddl_comm_config cfg = {.rank = 0, .world_size = 2, .timeout_ms = 50, .token = "secret", .job = "fuzzjob"};
    tcp_state *s = calloc(1, sizeof *s);
    s->links = calloc(2, sizeof *s->links);
    s->pfd = calloc(2 + DDL__POOL_SLOTS + 1, sizeof *s->pfd);
    s->pfd_rank = calloc(2 + DDL__POOL_SLOTS + 1, sizeof *s->pfd_rank);
    if (ddl__net_init(&s->net, TCP_STATE_MAGIC, &tcp_proto, &cfg, calloc(2, sizeof(ddl__net_peer))) != DDL_OK)
        abort();
    s->listen_fd = -1;
    snprintf(s->net.addr, sizeof s->net.addr, "127.0.0.1:1");
    ddl__net_pool_init(&s->pool, &s->net);
    s->links[0].fd = -1;
    s->links[1].fd = fd;
    snprintf(s->net.peers[1].addr, sizeof s->net.peers[1].addr, "127.0.0.1:2");
    return s;
}

static void tcp_free(tcp_state *s)
{
    if (s->links[1].fd >= 0)
        close(s->links[1].fd);
    free(s->net.peers), free(s->links), free(s->pfd), free(s->pfd_rank), free(s);
}

/* peer_sends: a socket pair whose far end (*far, to close later) has sent data[size] and shut
 * its sending side; what we write still goes through. */
static int peer_sends(const uint8_t *data, size_t size, int *far)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        abort();
    int big = 1 << 20;
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    if (size && write(sv[1], data, size) != (ssize_t)size)
        abort(); /* inputs are at most 64 KiB: the socket buffer takes them */
    shutdown(sv[1], SHUT_WR);
    fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    *far = sv[1];
    return sv[0];
}

static void fuzz_frames(const uint8_t *data, size_t size)
{
    int far;
    tcp_state *s = tcp_make(peer_sends(data, size, &far));
    const ddl_transport *tp = ddl_transport_tcp();
    unsigned char hdr[DDL_HEADER_BYTES], buf[256];
    for (int k = 0; k < 4; k++) { /* a few messages of sizes the receiver expects */
        size_t want = (size_t)(k * 37) % sizeof buf;
        int rc = tp->exchange(s, -1, NULL, NULL, 0, 1, hdr, buf, want, 20);
        if (rc != DDL_OK && !tp->error(s)[0])
            abort();
        if (rc != DDL_OK && rc != DDL_EMISMATCH)
            break;
    }
    tcp_free(s);
    close(far);
}

static void fuzz_greet(const uint8_t *data, size_t size)
{
    int far, fd = peer_sends(data, size, &far);
    tcp_state *s = tcp_make(-1);
    int rc = ddl__net_greet_fd(&s->net, fd, 1, ddl__now_ms() + 20);
    if (rc != DDL_OK && !s->net.err[0])
        abort();
    close(fd);
    close(far);
    tcp_free(s);
}

/* ---- seeds (FUZZ_SEED_DIR): one well-formed input per mode ---- */

static void le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void seed(const char *dir, const char *name, const uint8_t *b, size_t n)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (f) {
        fwrite(b, 1, n, f);
        fclose(f);
    }
}

static void write_seeds(const char *dir)
{
    uint8_t b[1 + 1 + 32 + 16 + 48 + 2 * DDL__HS_BYTES];
    /* mode 0: rank 1's first allreduce message: flag byte, header "DDL1" seq 0 op 1 sender 1 count 8, 4 floats */
    memset(b, 0, sizeof b);
    le32(b + 2, 0x314C4444u), b[2 + 8] = 1, le32(b + 2 + 12, 1), le32(b + 2 + 16, 8);
    seed(dir, "seed-header", b, 2 + 32 + 16);
    /* mode 1: a frame of 0 bytes: "DDL1", flags 0, length 0, a 32-byte header */
    memset(b, 0, sizeof b);
    b[0] = 1, le32(b + 1, 0x314c4444u);
    seed(dir, "seed-frame", b, 1 + 48);
    /* mode 2: the acceptor's hello: "DDLH" type 1 version 1 rank 1 world 2, job "fuzzjob" */
    memset(b, 0, sizeof b);
    b[0] = 2, memcpy(b + 1, "DDLH", 4), le32(b + 5, DDL__HS_HELLO), le32(b + 9, tcp_proto.version);
    le32(b + 13, 1), le32(b + 17, 2), memcpy(b + 25, "fuzzjob", 7);
    memcpy(b + 1 + DDL__HS_BYTES, b + 1, DDL__HS_BYTES), le32(b + 1 + DDL__HS_BYTES + 4, DDL__HS_OK);
    seed(dir, "seed-greet", b, 1 + 2 * DDL__HS_BYTES);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    signal(SIGPIPE, SIG_IGN); /* greet writes to a peer that has closed */
    if (getenv("FUZZ_SEED_DIR"))
        write_seeds(getenv("FUZZ_SEED_DIR"));
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    switch (data[0] % 3) {
    case 0: fuzz_header(data + 1, size - 1); break;
    case 1: fuzz_frames(data + 1, size - 1); break;
    default: fuzz_greet(data + 1, size - 1); break;
    }
    return 0;
}
