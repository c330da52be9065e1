/* test_pool.c - who gets a handshake slot (transports/net_pool.c), without sockets: a slot whose
 * peer sent a HELLO of our job is never given to a newcomer, however old, while one still waiting
 * for its HELLO is, after DDL__POOL_HOLD_MS; one source address (an IPv4 address, an IPv6 /64,
 * however the transport writes it) holds at most as many slots as there are ranks to wait for,
 * plus one, and never more than half the pool; and a real rank whose proof comes last, after a
 * crowd has taken every other slot, joins. tests/test_slow_join.sh runs the same over sockets. */
#include "check.h"
#include "transports/net.h"

#include <string.h>

static const ddl__net_proto proto = {.name = "test", .hs_magic = "DDLT", .label = "ddl-test-v1", .version = 1,
                                     .duplicate = "duplicate rank", .frame_magic = 0x54444444u, .two_way_links = 1};

typedef struct side {
    ddl__net net;
    ddl__net_peer peers[64];
} side;

static void side_init(side *s, int rank, int world)
{
    memset(s, 0, sizeof *s);
    const ddl_comm_config cfg = {.rank = rank, .world_size = world, .timeout_ms = 10000,
                                 .token = "pool-test-token-0123456789", .job = "pooljob"};
    CHECK(ddl__net_init(&s->net, 1, &proto, &cfg, s->peers) == DDL_OK);
}

/* newcomer: a peer from `from` (key: its number) asks for a slot: the slot it got, or NULL if it
 * was turned away; *gave: the slot it took over, if any (dropped, as a transport would). */
static ddl__net_slot *newcomer(ddl__net_pool *pl, int key, const char *from, ddl__net_slot **gave)
{
    ddl__net_slot *v = NULL;
    if (gave)
        *gave = NULL;
    if (!ddl__net_pool_admit(pl, from, &v))
        return NULL;
    if (v)
        ddl__net_pool_drop(pl, v);
    if (gave)
        *gave = v;
    return ddl__net_pool_start(pl, &key, sizeof key, from);
}

/* stranger_hello: a HELLO of our job (the job id is no secret) arrives in p: REPLY. */
static int stranger_hello(ddl__net_pool *pl, ddl__net_slot *p)
{
    ddl__hs_msg m = {.type = DDL__HS_HELLO, .version = proto.version, .rank = 1, .world = 2};
    memcpy(m.job, "pooljob", 8);
    unsigned char out[DDL__HS_BYTES];
    uint32_t reason;
    return ddl__net_pool_accept(pl, p, &m, out, &reason);
}

static void age(ddl__net_slot *p, int ms) { p->since_ms -= ms; }

/* ---- a slot past its HELLO stays; one before it goes ---- */

static void test_keep_hello(void)
{
    side a;
    side_init(&a, 0, 64);
    ddl__net_pool pl;
    ddl__net_pool_init(&pl, &a.net);
    ddl__net_pool_welcome(&pl, 0, 63, 0);
    ddl__net_slot *s[DDL__POOL_SLOTS];
    char from[64];
    for (int i = 0; i < DDL__POOL_SLOTS; i++) { /* each from an address of its own: no cap applies */
        snprintf(from, sizeof from, "10.1.0.%d:4000", i + 1);
        s[i] = newcomer(&pl, i, from, NULL);
        CHECK(s[i] != NULL);
        if (s[i] && i > 0)
            CHECK(stranger_hello(&pl, s[i]) == DDL__ACCEPT_REPLY); /* slot 0 stays silent */
    }
    for (int i = 0; i < DDL__POOL_SLOTS; i++)
        if (s[i])
            age(s[i], 10 * DDL__POOL_HOLD_MS);
    CHECK(!ddl__net_pool_room(&pl) && ddl__net_pool_open(&pl));
    ddl__net_slot *gave;
    ddl__net_slot *p = newcomer(&pl, 100, "10.2.0.1:4000", &gave);
    CHECK(p != NULL && gave == s[0]); /* the silent one made room */
    CHECK(p && stranger_hello(&pl, p) == DDL__ACCEPT_REPLY);
    /* now every slot sent a HELLO of the job: none is given up, however old */
    if (p)
        age(p, 10 * DDL__POOL_HOLD_MS);
    CHECK(!ddl__net_pool_open(&pl));
    CHECK(newcomer(&pl, 101, "10.2.0.2:4000", NULL) == NULL);
    CHECK(ddl__net_pool_wake(&pl, ddl__now_ms() + 100000) <= ddl__now_ms() + DDL__POOL_SLOT_MS); /* their deadline */
    /* a young silent slot is not taken over either */
    ddl__net_pool_drop(&pl, s[1]);
    CHECK(newcomer(&pl, 102, "10.2.0.3:4000", NULL) != NULL);
    CHECK(newcomer(&pl, 103, "10.2.0.4:4000", NULL) == NULL);
}

/* ---- one source, one share ---- */

static int share(int world, int rank, int lo, int hi, const char *const *froms, int n_froms)
{
    side a;
    side_init(&a, rank, world);
    ddl__net_pool pl;
    ddl__net_pool_init(&pl, &a.net);
    ddl__net_pool_welcome(&pl, lo, hi, 0);
    int got = 0;
    for (int i = 0; i < DDL__POOL_SLOTS; i++)
        got += newcomer(&pl, i, froms[i % n_froms], NULL) != NULL;
    return got;
}

static void test_cap(void)
{
    const char *v4[] = {"127.0.0.1:50000", "127.0.0.1:50001"};
    CHECK(share(2, 0, 1, 1, v4, 2) == 2);       /* 1 rank to wait for, plus one */
    CHECK(share(5, 0, 0, 4, v4, 2) == 5);       /* 4 ranks (our own is not waited for), plus one */
    CHECK(share(64, 0, 1, 63, v4, 2) == 8);     /* never more than half the pool */
    CHECK(share(64, 3, 0, 63, v4, 1) == 8);
    /* how the transports write addresses: tcp "ip:port", "[ip6]:port"; zmq the bare address */
    const char *same4[] = {"10.0.0.7:1", "10.0.0.7", "[::ffff:10.0.0.7]:2", "::ffff:10.0.0.7"};
    CHECK(share(2, 0, 1, 1, same4, 4) == 2);
    const char *same64[] = {"[2001:db8::1]:1", "2001:db8::2", "[2001:db8::ffff:1]:9"}; /* one /64 */
    CHECK(share(2, 0, 1, 1, same64, 3) == 2);
    const char *other[] = {"10.0.0.7:1", "10.0.0.8:1", "[2001:db8::1]:1", "[2001:db8:0:1::1]:1", "10.0.0.9"};
    CHECK(share(2, 0, 1, 1, other, 5) == 10); /* five sources, two each */
    /* a source at its share may still take over one of its own silent slots */
    side a;
    side_init(&a, 0, 2);
    ddl__net_pool pl;
    ddl__net_pool_init(&pl, &a.net);
    ddl__net_pool_welcome(&pl, 1, 1, 0);
    ddl__net_slot *x = newcomer(&pl, 1, "10.0.0.7:1", NULL), *y = newcomer(&pl, 2, "10.0.0.7:2", NULL), *gave;
    CHECK(x && y && stranger_hello(&pl, y) == DDL__ACCEPT_REPLY);
    CHECK(newcomer(&pl, 3, "10.0.0.7:3", NULL) == NULL);
    if (x && y) {
        age(x, 10 * DDL__POOL_HOLD_MS), age(y, 10 * DDL__POOL_HOLD_MS);
        CHECK(newcomer(&pl, 4, "10.0.0.7:4", &gave) != NULL && gave == x);
        CHECK(newcomer(&pl, 5, "10.0.0.7:5", NULL) == NULL);
        CHECK(newcomer(&pl, 6, "10.0.0.8:1", NULL) != NULL);
    }
}

/* ---- a real rank's proof comes last ---- */

static void test_slow_proof(void)
{
    side a, b;
    side_init(&a, 0, 2);
    side_init(&b, 1, 2);
    snprintf(b.net.peers[0].addr, sizeof b.net.peers[0].addr, "10.9.0.1:1");
    ddl__net_pool pl;
    ddl__net_pool_init(&pl, &a.net);
    ddl__net_pool_welcome(&pl, 1, 1, 0);
    ddl__net_greeting g;
    ddl__hs_msg m;
    unsigned char buf[DDL__HS_BYTES], out[DDL__HS_BYTES];
    uint32_t reason;
    CHECK(ddl__net_greet_start(&b.net, &g, &m) == DDL_OK);
    ddl__net_slot *p = newcomer(&pl, 1000, "10.0.0.1:1", NULL);
    CHECK(p != NULL);
    if (!p)
        return;
    CHECK(ddl__net_pool_accept(&pl, p, &m, out, &reason) == DDL__ACCEPT_REPLY);
    /* strangers from 60 addresses who know the job id take every other slot and wait */
    char from[64];
    int in = 0, away = 0;
    for (int i = 0; i < 60; i++) {
        snprintf(from, sizeof from, "10.3.0.%d:5000", i + 1);
        ddl__net_slot *q = newcomer(&pl, i, from, NULL);
        in += q != NULL, away += q == NULL;
        if (q)
            CHECK(stranger_hello(&pl, q) == DDL__ACCEPT_REPLY);
    }
    CHECK(in == DDL__POOL_SLOTS - 1 && away == 60 - in);
    age(p, 10 * DDL__POOL_HOLD_MS); /* the proof is slow: older than any slot used to be kept */
    for (int i = 0; i < 60; i++) {
        snprintf(from, sizeof from, "10.4.0.%d:5000", i + 1);
        CHECK(newcomer(&pl, 100 + i, from, NULL) == NULL);
    }
    CHECK(ddl__net_pool_find(&pl, &(int){1000}, sizeof(int)) == p);
    CHECK(ddl__net_greet_step(&b.net, &g, 0, out, sizeof out, &m) == DDL_OK && g.stage == DDL__GREET_OK);
    ddl__hs_encode(&proto, &m, buf);
    CHECK(ddl__net_pool_feed(&pl, p, 0, out, &reason) == 0); /* nothing new yet */
    memcpy(p->msg, buf, sizeof buf);
    CHECK(ddl__net_pool_feed(&pl, p, sizeof buf, out, &reason) == DDL__ACCEPT_JOINED);
    CHECK(ddl__net_pool_join(&pl, p) == 1 && a.net.peers[1].joined);
    CHECK(ddl__net_greet_step(&b.net, &g, 0, out, sizeof out, &m) == DDL_OK && g.stage == DDL__GREET_DONE);
}

int main(void)
{
    test_keep_hello();
    test_cap();
    test_slow_proof();
    return TEST_END();
}
