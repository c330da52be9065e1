/* elastic.c - after a failure, the ranks that live agree on who they are and go on, in the same
 * processes, in the same comm (ddl_comm_regroup).
 *
 * The agreement runs over the heartbeat's socket, whose datagrams are authenticated (HMAC of the
 * token and the job) and carry a counter, so a stranger can neither forge nor replay a note.
 * Each rank that regroups stops its heartbeat thread (without a goodbye), closes its links (its
 * peers see them close and regroup too; a peer's heartbeat thread that receives a regroup note
 * ends the wait in progress, so a rank in a collective with a live peer comes at once) and sends
 * every DDL__ELASTIC_NOTE_MS a note: its generation, the steps it completed and the ranks its failed call
 * named. A rank is dead when its process is gone (where pids are shared: same boot and pid
 * namespace), or when a note named it and it has not been heard for SUSPECT_MS, or when it has
 * been silent for the heartbeat timeout. The coordinator is the lowest rank not dead; once every
 * other rank has sent its note or is dead, it decides: the members, the highest step completed
 * and the lowest rank that completed it. The others take the decision of their coordinator (and
 * pass it on once). Then every member reopens the transport in place with the members' old
 * addresses in old rank order (tcp, zmq) or a segment of the new generation's name (shm), and
 * starts a new heartbeat.
 *
 * Ranks are renumbered at every regroup; what stays is each process's slot (its rank when the job
 * began), and decisions name slots. A replacement for a lost slot (join.c) is a reason to
 * regroup: the coordinator counts it in and sends it the decision (an admission, with the
 * joiner's nonce); it joins a step behind everyone, and the leader's state reaches it as it
 * reaches any rank behind. */
#include "impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SUSPECT_MS 150 /* a rank a failed call named, silent this long since, is dead */
#define JOIN_MS 300    /* a joiner heard within this long is counted in */

typedef struct joiner {
    uint64_t nonce;
    struct sockaddr_in src;
    int64_t heard; /* 0: none */
} joiner;

typedef struct regroup {
    int gen;          /* the generation being formed */
    int64_t t0;
    unsigned char suspect[DDL__ELASTIC_MAX / 8], dead[DDL__ELASTIC_MAX / 8], in[DDL__ELASTIC_MAX / 8]; /* by rank */
    long step[DDL__ELASTIC_MAX];       /* by rank */
    joiner join[DDL__ELASTIC_MAX];     /* by slot */
    int decided_by;   /* the lowest rank whose decision we hold (-1: none) */
    int left_out;     /* a decision came that leaves this rank out */
    int want_join;    /* a rank heard a joiner: the coordinator waits a moment for its notes */
    int off_step;     /* a rank regroups from another call than a step's all-reduce: no joiner comes in */
    unsigned char decision[DDL__HB_BODY_BYTES]; /* its members are slots */
} regroup;

void ddl__elastic_note(unsigned char *b, long step, uint32_t a, uint32_t x, const unsigned char *map)
{
    ddl__put_le(b, (uint64_t)step, 8);
    ddl__put_le(b + 8, a, 4);
    ddl__put_le(b + 12, x, 4);
    memcpy(b + 16, map, DDL__ELASTIC_MAX / 8);
}

/* pid_gone: rank j's process no longer exists (or is a zombie), where we can see its pid. */
static int pid_gone(const ddl_comm *c, int j)
{
    const ddl__hb_peer *q = &c->hb.peers[j];
    uint64_t mine = ddl__get_le(c->hb_cards + (size_t)c->rank * DDL__HB_CARD_BYTES + 120, 8);
    if (!q->pid_space || q->pid_space != mine || q->pid <= 0)
        return 0;
    char path[64], st[256];
    snprintf(path, sizeof path, "/proc/%d/stat", q->pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT;
    ssize_t n = read(fd, st, sizeof st - 1);
    close(fd);
    st[n > 0 ? n : 0] = '\0';
    const char *p = strrchr(st, ')'); /* "pid (comm) S ..." */
    return p && (p[2] == 'Z' || p[2] == 'X');
}

/* judge: mark the ranks now dead (it stays so). */
static void judge(ddl_comm *c, regroup *g, int64_t now)
{
    for (int j = 0; j < c->world; j++) {
        if (j == c->rank || ddl__bit(g->dead, j))
            continue;
        int64_t heard = atomic_load(&c->hb.peers[j].heard_ms);
        int64_t quiet = now - (heard > g->t0 ? heard : g->t0); /* since the regroup began, at most */
        if (pid_gone(c, j) || (ddl__bit(g->suspect, j) && !ddl__bit(g->in, j) && quiet >= SUSPECT_MS) ||
            (!ddl__bit(g->in, j) && now - (heard ? heard : g->t0) >= c->hb.timeout_ms))
            ddl__set_bit(g->dead, j);
    }
}

static int member_slot(const ddl_comm *c, int slot)
{
    for (int j = 0; j < c->world; j++)
        if (c->slot_of[j] == slot)
            return 1;
    return 0;
}

static void take_note(ddl_comm *c, regroup *g, const ddl__hb_note *n)
{
    if (n->kind == DDL__HB_JOIN) { /* a replacement for a slot no rank holds */
        if (n->from < c->elastic_max && !member_slot(c, n->from))
            g->join[n->from] = (joiner){n->nonce, n->src, ddl__now_ms()};
        return;
    }
    if (ddl__get_le(n->body + 8, 4) != (uint64_t)g->gen)
        return; /* another generation's */
    if (n->kind == DDL__HB_REGROUP) {
        ddl__set_bit(g->in, n->from);
        g->want_join |= (int)(ddl__get_le(n->body + 12, 4) & 1);
        g->off_step |= !(ddl__get_le(n->body + 12, 4) & 2);
        g->step[n->from] = (long)ddl__get_le(n->body, 8);
        for (int j = 0; j < c->world; j++)
            if (ddl__bit(n->body + 16, j) && j != c->rank)
                ddl__set_bit(g->suspect, j);
    } else if (n->kind == DDL__HB_DECIDE &&
               (g->decided_by < 0 || n->from < g->decided_by || !ddl__bit(n->body + 16, c->slot))) {
        g->decided_by = n->from; /* a decision without us counts whoever made it: we are out */
        g->left_out |= !ddl__bit(n->body + 16, c->slot);
        memcpy(g->decision, n->body, DDL__HB_BODY_BYTES);
    }
}

/* member_ranks: the ranks (this generation) whose slots the decision keeps, as a bitmap. */
static void member_ranks(const ddl_comm *c, const unsigned char *slots, unsigned char *ranks)
{
    memset(ranks, 0, DDL__ELASTIC_MAX / 8);
    for (int j = 0; j < c->world; j++)
        if (ddl__bit(slots, c->slot_of[j]))
            ddl__set_bit(ranks, j);
}

/* decide: the coordinator's decision, once every other rank has its note in or is dead. */
static int decide(ddl_comm *c, regroup *g, long my_step)
{
    for (int j = 0; j < c->world; j++)
        if (j != c->rank && !ddl__bit(g->in, j) && !ddl__bit(g->dead, j))
            return 0;
    int64_t now = ddl__now_ms();
    int joiners = 0;
    int admit = c->failed_at_step && !g->off_step; /* every rank at a step's all-reduce */
    for (int s = 0; s < c->elastic_max && admit; s++)
        joiners += g->join[s].heard && now - g->join[s].heard < JOIN_MS;
    if (admit && g->want_join && !joiners && now - g->t0 < 200)
        return 0; /* its next note comes within 20 ms */
    unsigned char members[DDL__ELASTIC_MAX / 8] = {0}, ranks[DDL__ELASTIC_MAX / 8];
    long top = my_step;
    g->step[c->rank] = my_step;
    int leader = -1, behind = 0;
    for (int j = 0; j < c->world; j++)
        if (j == c->rank || (ddl__bit(g->in, j) && !ddl__bit(g->dead, j))) {
            ddl__set_bit(members, c->slot_of[j]);
            top = g->step[j] > top ? g->step[j] : top;
        }
    for (int j = 0; j < c->world; j++)
        if (ddl__bit(members, c->slot_of[j])) {
            if (g->step[j] == top && (leader < 0 || c->slot_of[j] < leader))
                leader = c->slot_of[j];
            behind += g->step[j] < top;
        }
    for (int s = 0; s < c->elastic_max && admit; s++)
        if (g->join[s].heard && now - g->join[s].heard < JOIN_MS && !ddl__bit(members, s)) {
            ddl__set_bit(members, s);
            behind++; /* a joiner has nothing yet */
        }
    ddl__elastic_note(g->decision, top, (uint32_t)g->gen, (uint32_t)leader | (uint32_t)behind << 16, members);
    g->decided_by = c->rank;
    member_ranks(c, members, ranks);
    for (int k = 0; k < 3; k++) { /* datagrams may be lost; members pass it on once too */
        ddl__hb_note_all(&c->hb, DDL__HB_DECIDE, g->decision, NULL);
        for (int s = 0; s < c->elastic_max; s++)
            if (ddl__bit(members, s) && g->join[s].heard && !member_slot(c, s))
                ddl__hb_join_note(&c->hb, &g->join[s].src, DDL__HB_ADMIT, (uint32_t)c->slot, (uint32_t)s,
                                  g->join[s].nonce, g->decision);
        struct timespec ts = {0, 2 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return 1;
}

static void list_ints(const unsigned char *map, int n, char *out, size_t bytes)
{
    size_t a = 0;
    out[0] = '\0';
    for (int j = 0; j < n && a + 8 < bytes; j++)
        if (ddl__bit(map, j))
            a += (size_t)snprintf(out + a, bytes - a, "%s%d", a ? "," : "", j);
}

/* agree: until a decision this rank takes; DDL_OK, or DDL_ETIMEDOUT. */
static int agree(ddl_comm *c, regroup *g, long my_step)
{
    unsigned char note[DDL__HB_BODY_BYTES];
    int64_t next_note = 0, deadline = g->t0 + c->timeout_ms;
    for (;;) {
        int64_t now = ddl__now_ms();
        if (now >= next_note) {
            unsigned char named[DDL__ELASTIC_MAX / 8]; /* the ranks our call named, and those found dead
                                                        * here (a gone pid on our host): others count them
                                                        * as named too */
            for (size_t k = 0; k < sizeof named; k++)
                named[k] = c->suspects[k] | g->dead[k];
            ddl__elastic_note(note, my_step, (uint32_t)g->gen, (uint32_t)g->want_join | (uint32_t)c->failed_at_step << 1,
                              named);
            ddl__hb_note_all(&c->hb, DDL__HB_REGROUP, note, NULL);
            next_note = now + DDL__ELASTIC_NOTE_MS;
        }
        ddl__hb_note n;
        while (ddl__hb_poll(&c->hb, 0, &n))
            take_note(c, g, &n);
        judge(c, g, ddl__now_ms());
        int coord = 0;
        while (coord < c->world && coord != c->rank && ddl__bit(g->dead, coord))
            coord++;
        if (coord == c->rank && g->decided_by < 0)
            (void)decide(c, g, my_step); /* then taken below */
        if (g->decided_by >= 0 && (g->decided_by <= coord || g->left_out)) {
            unsigned char ranks[DDL__ELASTIC_MAX / 8];
            member_ranks(c, g->decision + 16, ranks);
            if (g->decided_by != c->rank && !g->left_out) /* pass it on once */
                ddl__hb_note_all(&c->hb, DDL__HB_DECIDE, g->decision, ranks);
            char who[160], dead[160];
            list_ints(g->decision + 16, c->elastic_max, who, sizeof who);
            list_ints(g->dead, c->world, dead, sizeof dead);
            ddl__log(c->log, c->log_ud, DDL_LOG_INFO, "rank %d: regroup %d: rank %d decided on slots %s (%d ms; dead "
                     "here: %s)", c->rank, g->gen, g->decided_by, who, (int)(ddl__now_ms() - g->t0),
                     dead[0] ? dead : "none");
            return DDL_OK;
        }
        if (now >= deadline)
            return ddl__comm_fail(c, DDL_ETIMEDOUT, "rank %d: the ranks did not agree on a regroup within %d ms "
                                  "(waiting for rank %d to decide)", c->rank, c->timeout_ms, coord);
        if (ddl__hb_poll(&c->hb, 5, &n))
            take_note(c, g, &n);
    }
}

/* ddl__elastic_peer_entry: slot s's entry of the peer list the comm was created with, into out ("" if none). */
void ddl__elastic_peer_entry(const ddl_comm *c, int s, char *out, size_t bytes)
{
    out[0] = '\0';
    const char *p = c->peers0;
    for (int k = 0; p && k < s; k++)
        p = (p = strchr(p, ',')) ? p + 1 : NULL;
    if (!p)
        return;
    size_t n = strcspn(p, ",");
    snprintf(out, bytes, "%.*s", (int)(n < bytes ? n : bytes - 1), p);
}

/* reopen: the transport and the heartbeat again, among the members (slots), in place. addrs: each
 * slot's address (DDL__ELASTIC_ADDR each; addrs[0] 0: the transport needs none); here: slots on this host. */
void ddl__elastic_job(const ddl_comm *c, int gen, char *out, size_t bytes)
{
    char msg[96];
    unsigned char mac[DDL__SHA256_BYTES];
    int n = snprintf(msg, sizeof msg, "ddl elastic generation %d %s", gen, c->job_base);
    ddl__hmac_sha256(c->token, strlen(c->token), msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1, mac);
    /* 36 + "~e" + 10 digits + "." + 12 = 61: within 64, and the MAC tells bases cut alike apart */
    snprintf(out, bytes, "%.36s~e%d.%02x%02x%02x%02x%02x%02x", c->job_base, gen, mac[0], mac[1], mac[2], mac[3], mac[4],
             mac[5]);
}

int ddl__elastic_reopen(ddl_comm *c, const unsigned char *members, const char *addrs, const unsigned char *here)
{
    ddl_comm_config cfg = c->cfg0;
    int local = 0, local_rank = 0, new_rank = 0, new_world = 0;
    char *list = (char *)c->scratch + (size_t)DDL__ELASTIC_MAX * DDL__ELASTIC_ADDR;
    size_t used = 0;
    list[0] = '\0';
    for (int s = 0; s < c->elastic_max; s++) {
        if (!ddl__bit(members, s))
            continue;
        if (ddl__bit(here, s)) {
            local_rank += s < c->slot;
            local++;
        }
        new_rank += s < c->slot;
        c->slot_of[new_world++] = s;
        if (addrs[0])
            used += (size_t)snprintf(list + used, (size_t)DDL__ELASTIC_MAX * (DDL__ELASTIC_ADDR + 1) - used, "%s%s",
                                     used ? "," : "", addrs + (size_t)s * DDL__ELASTIC_ADDR);
    }
    ddl__hier_free(c);
    ddl__hb_stop(&c->hb);
    ddl__hb_peer *peers = c->hb.peers;
    memset(&c->hb, 0, sizeof c->hb);
    memset(peers, 0, (size_t)c->capacity * sizeof *peers);
    c->hb.peers = peers;
    c->hb.fd = c->hb.wake_fd = -1;
    if (c->state)
        memset(c->state, 0, c->state_bytes);
    memset(c->p2p_sent, 0, (size_t)c->capacity * (2 * sizeof(uint32_t) + 2 * DDL_HEADER_BYTES));
    memset(c->shards_dealt, 0, sizeof c->shards_dealt);
    memset(c->suspects, 0, sizeof c->suspects);
    c->failed_at_step = 0;
    atomic_store(&c->hb.join_heard_ms, 0);
    c->seq = 0;
    c->status = DDL_OK;
    c->err[0] = '\0';
    c->generation++;
    c->rank = new_rank;
    c->world = new_world;
    ddl__elastic_job(c, c->generation, c->job, sizeof c->job); /* a name no other user can foresee */
    cfg.rank = new_rank;
    cfg.world_size = new_world;
    cfg.local_rank = local_rank;
    cfg.local_size = local;
    cfg.job = c->job;
    cfg.peers = addrs[0] ? list : NULL;
    cfg.master = NULL;
    cfg.join = 0;
    cfg.timeout_ms = c->timeout_ms;
    char why[DDL_ERR_BYTES];
    int st = new_world > 1 ? ddl__tp_open(c, &cfg) : DDL_OK;
    if (st != DDL_OK) {
        const char *e = ddl__tp_error(c);
        return ddl__comm_fail(c, st, "regroup %d: %s reopen, rank %d of %d: %s", c->generation, ddl__tp_name(c),
                              new_rank, new_world, e[0] ? e : ddl_strerror(st));
    }
    ddl__tp_limits(c, cfg.native_allreduce);
    c->rp.depth++; /* the calls of a regroup are not the caller's */
    st = new_world > 1 ? ddl__comm_start_heartbeat(c, &cfg, why, sizeof why) : DDL_OK;
    c->rp.depth--;
    if (st != DDL_OK)
        return ddl__comm_fail(c, st, "regroup %d: %s", c->generation, why);
    if ((st = ddl__replay_share(c)) != DDL_OK)
        return st;
    c->seq = 0;
    return DDL_OK;
}

/* outcome: what a decision means for this process, into out (slots counted as ranks in slot order). */
void ddl__elastic_outcome(const ddl_comm *c, const unsigned char *d, const unsigned char *was, ddl_regroup *out)
{
    const unsigned char *members = d + 16;
    uint32_t lb = (uint32_t)ddl__get_le(d + 12, 4);
    int leader_slot = (int)(lb & 0xffff);
    out->behind = (int)(lb >> 16);
    out->step = (long)ddl__get_le(d, 8);
    out->leader = out->rank = out->world = 0;
    for (int s = 0; s < c->elastic_max; s++) {
        if (ddl__bit(members, s)) {
            out->leader += s < leader_slot;
            out->rank += s < c->slot;
            out->world++;
        } else if (ddl__bit(was, s) && out->n_lost < 8) {
            out->lost[out->n_lost++] = s;
        }
    }
    for (int k = out->n_lost; k < 8; k++)
        out->lost[k] = -1;
}

int ddl_comm_regroup(ddl_comm *c, long step, ddl_regroup *out)
{
    if (!c || !out)
        return DDL_EINVAL;
    memset(out, 0, sizeof *out);
    out->old_rank = c->rank;
    out->old_world = c->world;
    if (!c->elastic_min) {
        c->status = c->status ? c->status : DDL_EINVAL;
        snprintf(c->err, sizeof c->err, "rank %d: ddl_comm_regroup on a comm that is not elastic (elastic_min 0)",
                 c->rank);
        return DDL_EINVAL;
    }
    snprintf(out->why, sizeof out->why, "%.255s", c->err[0] ? c->err : "(no failure: asked)");
    regroup g;
    memset(&g, 0, sizeof g);
    g.gen = c->generation + 1;
    g.t0 = ddl__now_ms();
    g.decided_by = -1;
    memcpy(g.suspect, c->suspects, sizeof g.suspect);
    /* every slot's address: the members' from the transport while it can still tell them, the
     * others' from the peer list (a joiner listens where its slot's entry says) */
    char *addrs = (char *)c->scratch;
    int need_addrs = strcmp(ddl__tp_name(c), "shm") != 0;
    unsigned char was[DDL__ELASTIC_MAX / 8] = {0}, here[DDL__ELASTIC_MAX / 8] = {0};
    memset(addrs, 0, (size_t)DDL__ELASTIC_MAX * DDL__ELASTIC_ADDR);
    for (int s = 0; s < c->elastic_max && need_addrs; s++)
        ddl__elastic_peer_entry(c, s, addrs + (size_t)s * DDL__ELASTIC_ADDR, DDL__ELASTIC_ADDR);
    for (int j = 0; j < c->world; j++) {
        const char *a = need_addrs ? ddl__tp_peer_address(c, j) : NULL;
        if (a)
            snprintf(addrs + (size_t)c->slot_of[j] * DDL__ELASTIC_ADDR, DDL__ELASTIC_ADDR, "%s", a);
        ddl__set_bit(was, c->slot_of[j]);
        if (j == c->rank || c->hb.peers[j].stack == c->hb.stack)
            ddl__set_bit(here, c->slot_of[j]);
    }
    ddl__hb_halt(&c->hb);
    const ddl__hb_note *pj = &c->hb.pending_join; /* the joiner our thread heard, if it caused this */
    if (c->failed_at_step && c->hb.pending_join_ms && g.t0 - c->hb.pending_join_ms < 1000 &&
        pj->from < c->elastic_max) {
        g.join[pj->from] = (joiner){pj->nonce, pj->src, g.t0};
        g.want_join = 1;
    }
    unsigned char note[DDL__HB_BODY_BYTES];
    ddl__elastic_note(note, step, (uint32_t)g.gen, (uint32_t)g.want_join | (uint32_t)c->failed_at_step << 1,
                      c->suspects);
    ddl__hb_note_all(&c->hb, DDL__HB_REGROUP, note, NULL); /* first, then the links close */
    void (*interrupt)(void *, int) = NULL;
    void *tp_state = NULL;
    ddl__tp_interrupter(c, &interrupt, &tp_state);
    if (interrupt) /* the links are given up: a transport says no goodbye on them (zmq would linger) */
        interrupt(tp_state, c->rank);
    ddl__tp_close(c);
    int64_t closed = ddl__now_ms();
    ddl__log(c->log, c->log_ud, DDL_LOG_INFO, "rank %d: regrouping (generation %d) after: %s", c->rank, g.gen,
             out->why);
    c->status = DDL_OK; /* the agreement may report its own failure */
    int st = agree(c, &g, step);
    if (st != DDL_OK) {
        ddl__hb_stop(&c->hb);
        return st;
    }
    const unsigned char *members = g.decision + 16;
    ddl__elastic_outcome(c, g.decision, was, out);
    int joins = 0;
    for (int s = 0; s < c->elastic_max; s++)
        if (ddl__bit(members, s) && !ddl__bit(was, s)) {
            joins++;
            if (need_addrs && !addrs[(size_t)s * DDL__ELASTIC_ADDR]) {
                ddl__hb_stop(&c->hb);
                return ddl__comm_fail(c, DDL_EINVAL, "regroup: slot %d joins but the peer list has no address for "
                                      "it", s);
            }
        }
    if (!ddl__bit(members, c->slot)) {
        ddl__hb_stop(&c->hb);
        return ddl__comm_fail(c, DDL_EPEER, "rank %d was left out of the job by rank %d's regroup (generation %d): "
                              "the others found it dead or silent", c->rank, g.decided_by, g.gen);
    }
    if (out->world < c->elastic_min) {
        out->below_min = 1;
        ddl__hb_stop(&c->hb);
        return ddl__comm_fail(c, DDL_EPEER, "only %d rank%s of %d live after a failure, fewer than the elastic "
                              "minimum %d: the job stops (%s)", out->world, out->world == 1 ? "" : "s", c->world,
                              c->elastic_min, out->why);
    }
    for (int j = 0; j < c->world && need_addrs; j++)
        if (ddl__bit(members, c->slot_of[j]) && !addrs[(size_t)c->slot_of[j] * DDL__ELASTIC_ADDR]) {
            ddl__hb_stop(&c->hb);
            return ddl__comm_fail(c, DDL_EINVAL, "regroup: the %s transport did not tell rank %d's address",
                                  ddl__tp_name(c), j);
        }
    for (int s = 0; s < c->elastic_max; s++) /* a joiner: local if its entry names our host */
        if (ddl__bit(members, s) && !ddl__bit(was, s) && need_addrs &&
            strncmp(addrs + (size_t)s * DDL__ELASTIC_ADDR, addrs + (size_t)c->slot * DDL__ELASTIC_ADDR,
                    strcspn(addrs + (size_t)c->slot * DDL__ELASTIC_ADDR, ":") + 1) == 0)
            ddl__set_bit(here, s);
    int64_t agreed = ddl__now_ms();
    if ((st = ddl__elastic_reopen(c, members, need_addrs ? addrs : "", here)) != DDL_OK)
        return st;
    out->generation = c->generation;
    out->ms = (double)(ddl__now_ms() - g.t0);
    ddl__log(c->log, c->log_ud, DDL_LOG_INFO, "rank %d is now rank %d of %d (generation %d, %.0f ms: closing the "
             "links %d, agreeing %d, reconnecting %d; %d lost, %d joined; step %ld)", out->old_rank, out->rank,
             out->world, out->generation, out->ms, (int)(closed - g.t0), (int)(agreed - closed),
             (int)(ddl__now_ms() - agreed), out->n_lost, joins, out->step);
    return DDL_OK;
}

int ddl_comm_elastic_min(const ddl_comm *c) { return c ? c->elastic_min : 0; }
int ddl_comm_elastic_max(const ddl_comm *c) { return c ? c->elastic_max : 0; }
