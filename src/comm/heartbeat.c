/* heartbeat.c - is every rank of a comm still alive? One thread per comm (started only when
 * ddl_comm_config.heartbeat_timeout_ms > 0) sends a small UDP datagram to every other rank each
 * interval and names a rank it has not heard from for the timeout, then interrupts the
 * transport's waits, so that every rank reports the stalled one within the timeout whatever its
 * place in the ring. It works the same over every transport: the heartbeat never shares a socket
 * with the data, and it does not depend on the training thread being in a collective.
 *
 * At create every rank describes itself in a card (UDP port, addresses, pid, host, a random
 * incarnation) and the cards travel once through an allgather. A datagram carries sender,
 * receiver, the sender's incarnation and a counter that only grows, under an HMAC-SHA256 keyed
 * by the token and the job: a stranger can neither forge one nor replay an old one.
 *
 * False alarms are guarded against: a rank is judged only after its first heartbeat arrived
 * (UDP blocked between hosts costs the early warning, never the job), a rank that said goodbye
 * is not judged, and a thread that was itself not running (the whole process stopped) forgives
 * everyone on waking. It owns one UDP socket, one eventfd and the thread; its memory is part of
 * the comm's. */
#include "impl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define HB_MAGIC 0x48424444u /* "DDBH" */
#define HB_MAC_BYTES 16
#define HB_BEAT_BYTES 48
#define HB_HEAD_BYTES 32
#define HB_NOTE_BYTES (HB_HEAD_BYTES + DDL__HB_BODY_BYTES + HB_MAC_BYTES) /* regroup and decide */
#define HB_FAST_MS 40 /* beat interval once a peer regroups (elastic.c counts silence against it) */
enum { HB_BEAT = 1, HB_BYE = 2 }; /* DDL__HB_REGROUP = 3, DDL__HB_DECIDE = 4 (impl.h) */

/* A card on the wire (DDL__HB_CARD_BYTES, little endian):
 *   0 magic | 4 rank | 8 pid | 12 port u16 | 14 address count u16 | 16 four IPv4 addresses
 *   (network order) | 32 network stack id u64 | 40 incarnation u64 | 48 host name, NUL-padded
 *   (71 bytes at most) | 120 process space id u64 */

/* ---- who am I ---- */

uint64_t ddl__place_id(int what)
{
    unsigned char buf[160] = {0}, h[DDL__SHA256_BYTES];
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, 40);
        (void)n;
        close(fd);
    }
    static const char *const ns[] = {"/proc/self/ns/net", "/proc/self/ns/mnt", "/proc/self/ns/pid"};
    for (int k = 0; k < 3; k++) {
        struct stat st;
        if ((what & (1 << k)) && stat(ns[k], &st) == 0)
            memcpy(buf + 48 + 8 * k, &st.st_ino, sizeof st.st_ino);
    }
    if (what & DDL__PLACE_HOST)
        gethostname((char *)buf + 80, 63);
    buf[144] = (unsigned char)what; /* ids of different kinds never meet */
    ddl__sha256(buf, sizeof buf, h);
    return ddl__get_le(h, 8) | 1; /* never 0: 0 is "unknown" */
}

/* own_addresses: up to DDL__HB_ADDRS IPv4 addresses of interfaces that are up, loopback last. */
static int own_addresses(uint32_t *out)
{
    struct ifaddrs *all = NULL;
    int n = 0;
    if (getifaddrs(&all) != 0)
        return 0;
    for (int loop = 0; loop < 2; loop++)
        for (struct ifaddrs *i = all; i && n < DDL__HB_ADDRS; i = i->ifa_next)
            if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
                !(i->ifa_flags & IFF_LOOPBACK) == !loop)
                out[n++] = ((const struct sockaddr_in *)(const void *)i->ifa_addr)->sin_addr.s_addr;
    freeifaddrs(all);
    return n;
}

static void card_write(unsigned char *p, const ddl__hb *hb, int port, const uint32_t *addrs, int naddr)
{
    memset(p, 0, DDL__HB_CARD_BYTES);
    ddl__put_le(p, HB_MAGIC, 4);
    ddl__put_le(p + 4, (uint32_t)hb->rank, 4);
    ddl__put_le(p + 8, (uint32_t)getpid(), 4);
    ddl__put_le(p + 12, (uint32_t)port, 2);
    ddl__put_le(p + 14, (uint32_t)naddr, 2);
    memcpy(p + 16, addrs, (size_t)naddr * 4);
    ddl__put_le(p + 32, hb->stack, 8);
    ddl__put_le(p + 40, hb->incarnation, 8);
    gethostname((char *)p + 48, 120 - 48 - 1);
    ddl__put_le(p + 120, ddl__place_id(DDL__PLACE_PID), 8);
}

/* card_read: peer j from its card; where to send to it: 127.0.0.1 on the same network stack,
 * else its addresses that are not also ours (those would reach this host, not it). */
static int card_read(ddl__hb *hb, int j, const unsigned char *p, const uint32_t *mine, int nmine)
{
    ddl__hb_peer *q = &hb->peers[j];
    if (ddl__get_le(p, 4) != HB_MAGIC || ddl__get_le(p + 4, 4) != (uint64_t)j)
        return -1;
    q->pid = (int)ddl__get_le(p + 8, 4);
    uint16_t port = (uint16_t)ddl__get_le(p + 12, 2);
    int naddr = (int)ddl__get_le(p + 14, 2);
    q->incarnation = ddl__get_le(p + 40, 8);
    q->stack = ddl__get_le(p + 32, 8);
    q->pid_space = ddl__get_le(p + 120, 8);
    memcpy(q->host, p + 48, 120 - 48);
    q->host[120 - 48 - 1] = '\0';
    uint32_t addrs[DDL__HB_ADDRS];
    memcpy(addrs, p + 16, sizeof addrs);
    int same_stack = ddl__get_le(p + 32, 8) == hb->stack;
    for (int k = 0; k < (same_stack ? 1 : naddr) && k < DDL__HB_ADDRS; k++) {
        uint32_t a = same_stack ? htonl(INADDR_LOOPBACK) : addrs[k];
        int ours = 0;
        for (int m = 0; m < nmine && !same_stack; m++)
            ours |= mine[m] == a;
        if (ours || (!same_stack && (ntohl(a) >> 24) == 127))
            continue;
        q->dst[q->ndst++] = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = a};
    }
    return 0;
}

/* ---- datagrams ---- */

static void keyed_mac(const unsigned char *key, const unsigned char *p, size_t n, unsigned char *mac)
{
    unsigned char full[DDL__SHA256_BYTES];
    ddl__hmac_sha256(key, 32, p, n - HB_MAC_BYTES, full);
    memcpy(mac, full, HB_MAC_BYTES);
}

static void beat_mac(const ddl__hb *hb, const unsigned char *p, size_t n, unsigned char *mac)
{
    keyed_mac(hb->key, p, n, mac);
}

void ddl__hb_join_note(ddl__hb *hb, const struct sockaddr_in *dst, int kind, uint32_t from, uint32_t to, uint64_t nonce,
                       const unsigned char *body)
{
    unsigned char p[HB_NOTE_BYTES];
    hb->counter++;
    ddl__put_le(p, HB_MAGIC, 4);
    ddl__put_le(p + 4, (uint32_t)kind, 4);
    ddl__put_le(p + 8, from, 4);
    ddl__put_le(p + 12, to, 4);
    ddl__put_le(p + 16, nonce, 8);
    ddl__put_le(p + 24, hb->counter, 8);
    memcpy(p + HB_HEAD_BYTES, body, DDL__HB_BODY_BYTES);
    keyed_mac(hb->join_key, p, sizeof p, p + sizeof p - HB_MAC_BYTES);
    (void)sendto(hb->fd, p, sizeof p, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)dst, sizeof *dst);
}

/* take_join: a joiner's note (DDL__HB_JOIN: from its slot, to anyone, its time in the body) or an
 * admission (DDL__HB_ADMIT: to this joiner's slot, with its nonce), under the join key; 1 with
 * note filled, else 0. A join more than 10 s off our clock is dropped (an old one replayed). */
static int take_join(ddl__hb *hb, const unsigned char *p, ssize_t n, const struct sockaddr_in *src, ddl__hb_note *note)
{
    int kind = (int)ddl__get_le(p + 4, 4);
    uint64_t from = ddl__get_le(p + 8, 4), to = ddl__get_le(p + 12, 4);
    unsigned char mac[HB_MAC_BYTES];
    if (n != HB_NOTE_BYTES || !hb->join_on || from >= DDL__ELASTIC_MAX)
        return 0;
    keyed_mac(hb->join_key, p, (size_t)n, mac);
    if (!ddl__ct_equal(mac, p + n - HB_MAC_BYTES, HB_MAC_BYTES))
        return 0;
    if (kind == DDL__HB_JOIN) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t wall = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, sent = (int64_t)ddl__get_le(p + 32, 8);
        if (to != 0xffffffffu || sent < wall - 10000 || sent > wall + 10000)
            return 0;
    } else if (to != (uint64_t)hb->rank || ddl__get_le(p + 16, 8) != hb->incarnation) {
        return 0; /* an admission for another joiner, or for an earlier try of ours */
    }
    note->kind = kind;
    note->from = (int)from;
    note->nonce = ddl__get_le(p + 16, 8);
    note->src = *src;
    memcpy(note->body, p + HB_HEAD_BYTES, DDL__HB_BODY_BYTES);
    return 1;
}

/* send_to: one datagram of kind (with body, DDL__HB_BODY_BYTES, for regroup and decide) to rank j. */
static void send_to(ddl__hb *hb, int j, int kind, const unsigned char *body)
{
    unsigned char p[HB_NOTE_BYTES];
    size_t n = body ? HB_NOTE_BYTES : HB_BEAT_BYTES;
    ddl__put_le(p, HB_MAGIC, 4);
    ddl__put_le(p + 4, (uint32_t)kind, 4);
    ddl__put_le(p + 8, (uint32_t)hb->rank, 4);
    ddl__put_le(p + 12, (uint32_t)j, 4);
    ddl__put_le(p + 16, hb->incarnation, 8);
    ddl__put_le(p + 24, hb->counter, 8);
    if (body)
        memcpy(p + HB_HEAD_BYTES, body, DDL__HB_BODY_BYTES);
    else
        memset(p + HB_HEAD_BYTES, 0, HB_BEAT_BYTES - HB_HEAD_BYTES);
    beat_mac(hb, p, n, p + n - HB_MAC_BYTES);
    for (int k = 0; k < hb->peers[j].ndst; k++) /* a lost or refused datagram is a missed beat */
        (void)sendto(hb->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)&hb->peers[j].dst[k],
                     sizeof hb->peers[j].dst[k]);
}

static void send_all(ddl__hb *hb, int kind)
{
    hb->counter++;
    for (int j = 0; j < hb->world; j++)
        if (j != hb->rank)
            send_to(hb, j, kind, NULL);
}

/* take: one datagram; anything but an authentic, fresh one for us is dropped unread (0). A beat
 * or a goodbye is noted here; regroup and decide are left in note for the caller (1). */
static int take(ddl__hb *hb, const unsigned char *p, ssize_t n, int64_t now, const struct sockaddr_in *src,
                ddl__hb_note *note)
{
    if (n < HB_HEAD_BYTES || ddl__get_le(p, 4) != HB_MAGIC)
        return 0;
    int kind = (int)ddl__get_le(p + 4, 4);
    if (kind == DDL__HB_JOIN || kind == DDL__HB_ADMIT)
        return take_join(hb, p, n, src, note);
    if (!hb->peers || hb->joining)
        return 0;
    uint64_t from = ddl__get_le(p + 8, 4), to = ddl__get_le(p + 12, 4), counter = ddl__get_le(p + 24, 8);
    int note_kind = kind == DDL__HB_REGROUP || kind == DDL__HB_DECIDE;
    if ((kind != HB_BEAT && kind != HB_BYE && !note_kind) || n != (note_kind ? HB_NOTE_BYTES : HB_BEAT_BYTES) ||
        from >= (uint64_t)hb->world || from == (uint64_t)hb->rank || to != (uint64_t)hb->rank)
        return 0;
    ddl__hb_peer *q = &hb->peers[from];
    unsigned char mac[HB_MAC_BYTES];
    beat_mac(hb, p, (size_t)n, mac);
    if (!ddl__ct_equal(mac, p + n - HB_MAC_BYTES, HB_MAC_BYTES) || ddl__get_le(p + 16, 8) != q->incarnation ||
        counter < q->counter || (counter == q->counter && !note_kind))
        return 0; /* notes may repeat a counter: several go out between two beats */
    q->counter = counter;
    atomic_store(&q->heard_ms, now);
    if (kind == HB_BYE)
        atomic_store(&q->left, 1);
    if (!note_kind)
        return 0;
    note->kind = kind;
    note->from = (int)from;
    memcpy(note->body, p + HB_HEAD_BYTES, DDL__HB_BODY_BYTES);
    return 1;
}

/* regroup_seen: a peer began regrouping (elastic.c): the call in progress must end, and our
 * beats come fast so that it sees at once that we live. */
static void regroup_seen(ddl__hb *hb, int from)
{
    hb->fast = 1;
    if (atomic_load(&hb->verdict))
        return;
    snprintf(hb->msg, sizeof hb->msg, "rank %d began regrouping the job after a failure (noticed by rank %d)", from,
             hb->rank);
    hb->verdict_regroup = 1;
    atomic_store(&hb->verdict, from + 1);
    if (hb->interrupt)
        hb->interrupt(hb->tp_state, from);
}

/* join_seen: a joiner for a slot that is not ours asks in: regroup, as for a peer's regroup, if
 * the comm is in a step's all-reduce. */
static void join_seen(ddl__hb *hb, const ddl__hb_note *note)
{
    int slot = note->from;
    for (int j = 0; j < hb->world; j++)
        if (hb->slot_of && hb->slot_of[j] == slot)
            return; /* a member's slot: a replay, or a confused process */
    hb->pending_join = *note; /* the regroup counts it in */
    hb->pending_join_ms = ddl__now_ms();
    atomic_store(&hb->join_heard_slot, slot);
    atomic_store(&hb->join_heard_ms, hb->pending_join_ms);
    hb->fast = 1;
    /* only a step's all-reduce is interrupted for it (elsewhere the next one notices it at once):
     * a joiner comes in at a step, so that its first call is the one the others retry */
    if (atomic_load(&hb->verdict) || !atomic_load(&hb->admitting))
        return;
    snprintf(hb->msg, sizeof hb->msg, "a replacement for rank slot %d asks to join (noticed by rank %d)", slot,
             hb->rank);
    hb->verdict_regroup = 1;
    atomic_store(&hb->verdict, hb->rank + 1); /* not a peer's fault */
    if (hb->interrupt)
        hb->interrupt(hb->tp_state, hb->rank);
}

static void drain(ddl__hb *hb, int64_t now)
{
    unsigned char p[HB_NOTE_BYTES + 1];
    for (int i = 0; i < 4 * hb->world + 16; i++) { /* bounded: a flood cannot keep the thread here */
        struct sockaddr_in src;
        socklen_t sl = sizeof src;
        ssize_t n = recvfrom(hb->fd, p, sizeof p, MSG_DONTWAIT, (struct sockaddr *)&src, &sl);
        if (n < 0)
            return;
        ddl__hb_note note = {0};
        if (take(hb, p, n, now, &src, &note) && note.kind == DDL__HB_REGROUP)
            regroup_seen(hb, note.from);
        else if (note.kind == DDL__HB_JOIN && note.from >= 0)
            join_seen(hb, &note);
    }
}

/* ---- judging ---- */

/* judge: the first armed peer silent for the timeout is the verdict: written once, then the
 * transport's waits are interrupted. */
static void judge(ddl__hb *hb, int64_t now)
{
    if (atomic_load(&hb->verdict))
        return;
    for (int j = 0; j < hb->world; j++) {
        ddl__hb_peer *q = &hb->peers[j];
        int64_t heard = atomic_load(&q->heard_ms);
        if (j == hb->rank || !heard || atomic_load(&q->left) || now - heard < hb->timeout_ms)
            continue;
        snprintf(hb->msg, sizeof hb->msg, "rank %d (pid %d on host %s) stopped responding %.1f s ago (no heartbeat; "
                 "noticed by rank %d)", j, q->pid, q->host, (double)(now - heard) / 1000.0, hb->rank);
        atomic_store(&hb->verdict, j + 1);
        ddl__log(hb->log, hb->log_ud, DDL_LOG_ERROR, "%s", hb->msg);
        if (hb->interrupt)
            hb->interrupt(hb->tp_state, j);
        return;
    }
}

/* forgive: this thread did not run for a while (the process was stopped): silence we saw is ours. */
static void forgive(ddl__hb *hb, int64_t now)
{
    for (int j = 0; j < hb->world; j++)
        if (atomic_load(&hb->peers[j].heard_ms))
            atomic_store(&hb->peers[j].heard_ms, now);
}

static void *hb_main(void *arg)
{
    ddl__hb *hb = arg;
    int64_t next_send = 0, last = ddl__now_ms();
    while (!atomic_load(&hb->stop)) {
        int64_t now = ddl__now_ms();
        if (now - last > hb->timeout_ms / 2)
            forgive(hb, now);
        last = now;
        if (now >= next_send) {
            send_all(hb, HB_BEAT);
            next_send = now + (hb->fast && hb->interval_ms > HB_FAST_MS ? HB_FAST_MS : hb->interval_ms);
        }
        judge(hb, now);
        int wait = (int)(next_send - now);
        struct pollfd pf[2] = {{.fd = hb->fd, .events = POLLIN}, {.fd = hb->wake_fd, .events = POLLIN}};
        (void)poll(pf, 2, wait < DDL__HB_TICK_MS ? wait : DDL__HB_TICK_MS);
        drain(hb, ddl__now_ms());
    }
    if (!hb->quiet) {
        send_all(hb, HB_BYE);
        send_all(hb, HB_BYE); /* twice: a lost goodbye would look like a stall */
    }
    return NULL;
}

/* ---- start, stop, ask ---- */

/* udp_socket: bound where hb->want_port says (an elastic job's slot port: joiners know it), else
 * to any free port. */
static int udp_socket(ddl__hb *hb, int loopback_only, int *port)
{
    hb->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (hb->fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(loopback_only ? INADDR_LOOPBACK : INADDR_ANY),
                            .sin_port = htons((uint16_t)hb->want_port)};
    socklen_t len = sizeof a;
    if (hb->want_port && bind(hb->fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(hb->fd, (struct sockaddr *)&a, &len) == 0) {
        *port = ntohs(a.sin_port);
        return 0;
    }
    a.sin_port = 0; /* taken: joiners will not find this rank, the rest works */
    if (bind(hb->fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(hb->fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    *port = ntohs(a.sin_port);
    return 0;
}

int ddl__hb_card(ddl_comm *c, const ddl_comm_config *cfg, unsigned char *card, char *err, size_t err_bytes)
{
    ddl__hb *hb = &c->hb;
    hb->fd = hb->wake_fd = -1;
    hb->rank = c->rank;
    hb->world = c->world;
    hb->timeout_ms = cfg->heartbeat_timeout_ms;
    hb->interval_ms = cfg->heartbeat_interval_ms > 0 ? cfg->heartbeat_interval_ms : hb->timeout_ms / 5 + 1;
    hb->log = c->log;
    hb->log_ud = c->log_ud;
    hb->stack = ddl__place_id(DDL__PLACE_NET | DDL__PLACE_HOST);
    if (getrandom(&hb->incarnation, sizeof hb->incarnation, 0) != (ssize_t)sizeof hb->incarnation)
        hb->incarnation = (uint64_t)ddl__now_ms() ^ ((uint64_t)getpid() << 32);
    /* the key: HMAC(token, "ddl heartbeat 1 " job) */
    char label[96];
    int ll = snprintf(label, sizeof label, "ddl heartbeat 1 %s", c->job);
    const char *tok = cfg->token ? cfg->token : "";
    ddl__hmac_sha256(tok, strlen(tok), label, (size_t)ll < sizeof label ? (size_t)ll : sizeof label - 1, hb->key);
    hb->nmine = own_addresses(hb->mine);
    if (c->elastic_min > 0) { /* joiners: HMAC(token, "ddl elastic join 1 " job), whatever the generation */
        ll = snprintf(label, sizeof label, "ddl elastic join 1 %s", c->job_base);
        ddl__hmac_sha256(tok, strlen(tok), label, (size_t)ll < sizeof label ? (size_t)ll : sizeof label - 1,
                         hb->join_key);
        hb->join_on = 1;
        hb->want_port = c->slot_port[c->slot];
        hb->slot_of = c->slot_of;
    }
    int port = 0, one_host = cfg->local_size == cfg->world_size && !hb->want_port;
    if (udp_socket(hb, one_host, &port) != 0 || (hb->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        int e = errno;
        ddl__hb_stop(hb);
        return ddl__errf(err, err_bytes, DDL_EIO, "rank %d: heartbeat socket: %s", c->rank, strerror(e));
    }
    card_write(card, hb, port, hb->mine, hb->nmine);
    return DDL_OK;
}

int ddl__hb_begin(ddl_comm *c, const unsigned char *cards, char *err, size_t err_bytes)
{
    ddl__hb *hb = &c->hb;
    for (int j = 0; j < c->world; j++)
        if (j != c->rank && card_read(hb, j, cards + (size_t)j * DDL__HB_CARD_BYTES, hb->mine, hb->nmine) != 0) {
            ddl__hb_stop(hb);
            return ddl__errf(err, err_bytes, DDL_EPROTO, "rank %d: rank %d sent a bad heartbeat card", c->rank, j);
        }
    ddl__tp_interrupter(c, &hb->interrupt, &hb->tp_state);
    if (pthread_create(&hb->thread, NULL, hb_main, hb) != 0) {
        ddl__hb_stop(hb);
        return ddl__errf(err, err_bytes, DDL_EIO, "rank %d: cannot start the heartbeat thread", c->rank);
    }
    hb->running = 1;
    return DDL_OK;
}

/* join_thread: tell the thread to stop, wake it, wait for it (nothing when it does not run). */
static void join_thread(ddl__hb *hb)
{
    if (hb->running) {
        atomic_store(&hb->stop, 1);
        uint64_t one = 1;
        if (write(hb->wake_fd, &one, sizeof one) != (ssize_t)sizeof one)
            (void)0; /* the thread still looks every DDL__HB_TICK_MS */
        pthread_join(hb->thread, NULL);
        hb->running = 0;
    }
}

void ddl__hb_halt(ddl__hb *hb)
{
    hb->quiet = 1;
    join_thread(hb);
}

void ddl__hb_note_all(ddl__hb *hb, int kind, const unsigned char *body, const unsigned char *only)
{
    hb->counter++;
    for (int j = 0; j < hb->world; j++)
        if (j != hb->rank && (!only || (only[j / 8] >> (j % 8) & 1)))
            send_to(hb, j, kind, body);
}

int ddl__hb_poll(ddl__hb *hb, int wait_ms, ddl__hb_note *note)
{
    unsigned char p[HB_NOTE_BYTES + 1];
    for (int i = 0; i < 4 * hb->world + 16; i++) { /* bounded, as drain */
        struct sockaddr_in src;
        socklen_t sl = sizeof src;
        ssize_t n = recvfrom(hb->fd, p, sizeof p, MSG_DONTWAIT, (struct sockaddr *)&src, &sl);
        if (n < 0) {
            if (wait_ms <= 0)
                return 0;
            struct pollfd pf = {.fd = hb->fd, .events = POLLIN};
            if (poll(&pf, 1, wait_ms) <= 0)
                return 0;
            wait_ms = 0;
            continue;
        }
        if (take(hb, p, n, ddl__now_ms(), &src, note))
            return 1;
    }
    return 0;
}

void ddl__hb_stop(ddl__hb *hb)
{
    join_thread(hb);
    if (hb->fd >= 0)
        close(hb->fd);
    if (hb->wake_fd >= 0)
        close(hb->wake_fd);
    hb->fd = hb->wake_fd = -1;
}
