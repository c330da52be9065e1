/* fuzz_heartbeat.c - libFuzzer target of what an elastic job reads from any process on the
 * network or the host: the heartbeat's UDP datagrams (src/comm/heartbeat.c: beats, goodbyes,
 * REGROUP and DECIDE notes, JOIN notes and ADMIT answers) and the cards ranks exchange at
 * creation, and what the membership makes of an authentic note (src/comm/elastic.c's take_note,
 * the heartbeat thread's regroup_seen and join_seen, the outcome a joiner takes from an ADMIT).
 * Input: one mode byte, then the datagram.
 *   mode & 3: 0 a member (rank 1 of 3, slots 0, 1, 3 of 4: slot 2 is free) reads it; 1 a joiner
 *             for slot 2 reads it (only an ADMIT for it counts); 2 it is rank 0's or 2's card;
 *   mode & 4: the MAC is made right first (the target knows the keys), so that mutations get past
 *             it into what it guards (a stranger cannot do this: without it, only the MAC check runs);
 *   mode & 8: a JOIN's time stamp is set to now, so that it passes the freshness window;
 *   mode & 16: the member is in a step's all-reduce (a JOIN interrupts it).
 * heartbeat.c and elastic.c are compiled into this target (their statics are what is fuzzed; both
 * name a function judge, so heartbeat.c's is renamed here); libddl.a's copies are then not linked.
 * Every input must be taken or dropped without a crash, a leak or undefined behaviour. With
 * FUZZ_SEED_DIR set, initialisation writes there datagrams and cards made by the code itself. */
#define judge hb_judge
#include "comm/heartbeat.c"
#undef judge
#include "comm/elastic.c"

#include "fuzz_common.h"

#include <stdlib.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define WORLD 3
#define SLOTS 4

static ddl_comm *comm;        /* the member: rank 1 of 3, slot 1 */
static ddl__hb_peer peers[SLOTS];
static unsigned char cards[SLOTS * DDL__HB_CARD_BYTES];
static const unsigned char beat_key[32] = "fuzz heartbeat key, 32 bytes...";
static const unsigned char join_key[32] = "fuzz join key, 32 bytes........";
static const uint64_t incarnation[SLOTS] = {0x1111, 0x2222, 0x3333, 0x4444};
#define JOINER_NONCE 0x5555u

/* reset: the member's state before each input (rank 1 of 3; joiner: slot 2 asking in) */
static void reset(int joiner, int admitting)
{
    ddl_comm *c = comm;
    ddl__hb *hb = &c->hb;
    memset(hb, 0, sizeof *hb);
    memset(peers, 0, sizeof peers);
    hb->peers = peers;
    hb->fd = hb->wake_fd = -1;
    hb->rank = joiner ? 2 : 1;
    hb->world = WORLD;
    hb->timeout_ms = 1000;
    hb->interval_ms = 200;
    hb->join_on = 1;
    hb->joining = joiner;
    hb->incarnation = joiner ? JOINER_NONCE : incarnation[1];
    memcpy(hb->key, beat_key, 32);
    memcpy(hb->join_key, join_key, 32);
    hb->slot_of = c->slot_of;
    atomic_store(&hb->admitting, admitting);
    for (int j = 0; j < WORLD; j++) {
        peers[j].incarnation = incarnation[j];
        atomic_store(&peers[j].heard_ms, 1);
    }
    c->rank = 1;
    c->world = WORLD;
    c->capacity = SLOTS;
    c->elastic_min = 2;
    c->elastic_max = SLOTS;
    c->slot = joiner ? 2 : 1;
    c->slot_of[0] = 0, c->slot_of[1] = 1, c->slot_of[2] = 3;
    c->failed_at_step = 1;
    c->hb_cards = cards;
}

/* repair: the MAC at the end of p[n], under the key the kind takes */
static void repair(unsigned char *p, size_t n)
{
    if (n < HB_HEAD_BYTES)
        return;
    int kind = (int)ddl__get_le(p + 4, 4);
    keyed_mac(kind == DDL__HB_JOIN || kind == DDL__HB_ADMIT ? join_key : beat_key, p, n, p + n - HB_MAC_BYTES);
}

/* member: a regroup's view of the note, as agree() takes it, and what a decision means */
static void member(ddl_comm *c, const ddl__hb_note *n)
{
    regroup g;
    memset(&g, 0, sizeof g);
    g.gen = 1;
    g.t0 = ddl__now_ms();
    g.decided_by = -1;
    take_note(c, &g, n);
    if (g.decided_by >= 0) {
        unsigned char ranks[DDL__ELASTIC_MAX / 8], was[DDL__ELASTIC_MAX / 8] = {0x0b}; /* slots 0, 1, 3 */
        member_ranks(c, g.decision + 16, ranks);
        ddl_regroup out;
        memset(&out, 0, sizeof out);
        ddl__elastic_outcome(c, g.decision, was, &out);
        char who[160];
        list_ints(g.decision + 16, c->elastic_max, who, sizeof who);
        if (out.world > SLOTS || out.n_lost > 8)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    int mode = data[0];
    size_t n = size - 1;
    unsigned char p[4096 + DDL__HB_CARD_BYTES];
    memset(p, 0, sizeof p);
    memcpy(p, data + 1, n);
    reset((mode & 3) == 1, (mode & 16) != 0);
    ddl__hb *hb = &comm->hb;
    if ((mode & 3) == 2) { /* a card: rank 0's or 2's, as the allgather hands it over */
        uint32_t mine[DDL__HB_ADDRS] = {htonl(0x0a000001u), htonl(INADDR_LOOPBACK)};
        int j = p[4] & 2;
        if (card_read(hb, j, p, mine, 2) == 0 && (peers[j].ndst < 0 || peers[j].ndst > DDL__HB_ADDRS ||
                                                  memchr(peers[j].host, 0, sizeof peers[j].host) == NULL))
            abort();
        return 0;
    }
    if ((mode & 8) && n >= HB_HEAD_BYTES + 8) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ddl__put_le(p + HB_HEAD_BYTES, (uint64_t)((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000), 8);
    }
    if (mode & 4)
        repair(p, n);
    struct sockaddr_in src = {.sin_family = AF_INET, .sin_port = htons(4242), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ddl__hb_note note;
    memset(&note, 0, sizeof note);
    int took = take(hb, p, (ssize_t)n, ddl__now_ms(), &src, &note);
    if ((mode & 3) == 1) { /* the joiner: an ADMIT for it, and what it says */
        if (took && note.kind == DDL__HB_ADMIT) {
            ddl_regroup out;
            unsigned char none[DDL__ELASTIC_MAX / 8] = {0};
            memset(&out, 0, sizeof out);
            ddl__elastic_outcome(comm, note.body, none, &out);
        }
        return 0;
    }
    if (took && note.kind == DDL__HB_REGROUP) /* as the heartbeat thread's drain, then a regroup */
        regroup_seen(hb, note.from);
    else if (note.kind == DDL__HB_JOIN && note.from >= 0)
        join_seen(hb, &note);
    if (took)
        member(comm, &note);
    return 0;
}

/* ---- seeds: what the code sends, caught on a loopback socket ---- */

static void seed(const char *dir, const char *name, int mode, const unsigned char *b, size_t n)
{
    unsigned char buf[1 + 256];
    char path[600];
    buf[0] = (unsigned char)mode;
    memcpy(buf + 1, b, n);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    fuzz_write(path, buf, n + 1);
}

static void write_seeds(const char *dir)
{
    int rx = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (rx < 0 || bind(rx, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(rx, (struct sockaddr *)&a, &al) != 0)
        abort();
    /* the sender: rank 0 of the member's job (beats and notes to rank 1), or rank 0's coordinator
     * answering the joiner of slot 2 */
    static ddl__hb_peer to[SLOTS];
    ddl__hb s;
    memset(&s, 0, sizeof s);
    s.fd = socket(AF_INET, SOCK_DGRAM, 0);
    s.rank = 0;
    s.world = WORLD;
    s.incarnation = incarnation[0];
    s.counter = 41;
    s.peers = to;
    memcpy(s.key, beat_key, 32);
    memcpy(s.join_key, join_key, 32);
    to[1].dst[0] = a;
    to[1].ndst = 1;
    unsigned char body[DDL__HB_BODY_BYTES], named[DDL__ELASTIC_MAX / 8] = {0x04}, members[DDL__ELASTIC_MAX / 8] = {0x07};
    unsigned char got[256];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long wall = (long)((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    struct { const char *name; int mode, kind; } what[] = {
        {"beat", 4, HB_BEAT}, {"bye", 4, HB_BYE}, {"regroup", 4, DDL__HB_REGROUP}, {"decide", 4, DDL__HB_DECIDE},
        {"join", 4 | 8 | 16, DDL__HB_JOIN}, {"admit", 1 | 4, DDL__HB_ADMIT}, {"beat-as-sent", 0, HB_BEAT}};
    for (size_t k = 0; k < sizeof what / sizeof what[0]; k++) {
        int kind = what[k].kind;
        s.counter++;
        if (kind == HB_BEAT || kind == HB_BYE) {
            send_to(&s, 1, kind, NULL);
        } else if (kind == DDL__HB_REGROUP) {
            ddl__elastic_note(body, 12, 1, 1 | 2, named); /* step 12, generation 1, a joiner heard, at a step */
            send_to(&s, 1, kind, body);
        } else if (kind == DDL__HB_DECIDE) {
            ddl__elastic_note(body, 12, 1, 0 | 1u << 16, members); /* leader slot 0, one behind */
            send_to(&s, 1, kind, body);
        } else if (kind == DDL__HB_JOIN) {
            unsigned char none[DDL__ELASTIC_MAX / 8] = {0};
            ddl__elastic_note(body, wall, 0, 0, none);
            ddl__hb_join_note(&s, &a, kind, 2, 0xffffffffu, JOINER_NONCE, body);
        } else {
            unsigned char four[DDL__ELASTIC_MAX / 8] = {0x0f};
            ddl__elastic_note(body, 12, 2, 0 | 1u << 16, four);
            ddl__hb_join_note(&s, &a, kind, 0, 2, JOINER_NONCE, body);
        }
        ssize_t n = recv(rx, got, sizeof got, 0);
        if (n <= 0)
            abort();
        char name[64];
        snprintf(name, sizeof name, "seed-%s", what[k].name);
        seed(dir, name, what[k].mode, got, (size_t)n);
    }
    for (int j = 0; j <= 2; j += 2) { /* cards of ranks 0 and 2 */
        unsigned char card[DDL__HB_CARD_BYTES];
        uint32_t addrs[DDL__HB_ADDRS] = {htonl(0x0a000002u + (uint32_t)j), htonl(INADDR_LOOPBACK)};
        s.rank = j;
        s.stack = j ? 0x77 : 0;
        card_write(card, &s, 29500 + j, addrs, 2);
        char name[64];
        snprintf(name, sizeof name, "seed-card-%d", j);
        seed(dir, name, 2, card, sizeof card);
    }
    close(s.fd);
    close(rx);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    comm = calloc(1, sizeof *comm);
    if (!comm)
        abort();
    if (getenv("FUZZ_SEED_DIR"))
        write_seeds(getenv("FUZZ_SEED_DIR"));
    return 0;
}
