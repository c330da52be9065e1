/* elastic.c - after a failure, the ranks that live agree on who they are and go on, in the same
 * processes, in the same comm (ddl_comm_regroup).
 *
 * The agreement runs over the heartbeat's socket, whose datagrams are authenticated (HMAC of the
 * token and the job) and carry a counter, so a stranger can neither forge nor replay a note.
 * Each rank that regroups stops its heartbeat thread (without a goodbye), closes its links (its
 * peers see them close and regroup too; a peer's heartbeat thread that receives a regroup note
 * ends the wait in progress, so a rank in a collective with a live peer comes at once) and sends
 * every NOTE_MS a note: its generation, the steps it completed and the ranks its failed call
 * named. A rank is dead when its process is gone (where pids are shared: same boot and pid
 * namespace), or when a note named it and it has not been heard for SUSPECT_MS, or when it has
 * been silent for the heartbeat timeout. The coordinator is the lowest rank not dead; once every
 * other rank has sent its note or is dead, it decides: the members, the highest step completed
 * and the lowest rank that completed it. The others take the decision of their coordinator (and
 * pass it on once). Then every member reopens the transport in place with the members' old
 * addresses in old rank order (tcp, zmq) or a segment of the new generation's name (shm), and
 * starts a new heartbeat. */
#include "impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOTE_MS 20     /* a regrouping rank's note goes out this often */
#define SUSPECT_MS 150 /* a rank a failed call named, silent this long since, is dead */
#define ADDR_BYTES 64  /* an old address kept in scratch */

typedef struct regroup {
    int gen;          /* the generation being formed */
    int64_t t0;
    unsigned char suspect[DDL__ELASTIC_MAX / 8], dead[DDL__ELASTIC_MAX / 8], in[DDL__ELASTIC_MAX / 8];
    long step[DDL__ELASTIC_MAX];
    int decided_by;   /* the lowest rank whose decision we hold (-1: none) */
    int left_out;     /* a decision came that leaves this rank out */
    unsigned char decision[DDL__HB_BODY_BYTES];
} regroup;

static int bit(const unsigned char *m, int j) { return m[j / 8] >> (j % 8) & 1; }
static void set_bit(unsigned char *m, int j) { m[j / 8] |= (unsigned char)(1u << (j % 8)); }

static void body_pack(unsigned char *b, long step, uint32_t a, uint32_t x, const unsigned char *map)
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
        if (j == c->rank || bit(g->dead, j))
            continue;
        int64_t heard = atomic_load(&c->hb.peers[j].heard_ms);
        int64_t quiet = now - (heard > g->t0 ? heard : g->t0); /* since the regroup began, at most */
        if (pid_gone(c, j) || (bit(g->suspect, j) && !bit(g->in, j) && quiet >= SUSPECT_MS) ||
            (!bit(g->in, j) && now - (heard ? heard : g->t0) >= c->hb.timeout_ms))
            set_bit(g->dead, j);
    }
}

static void take_note(ddl_comm *c, regroup *g, const ddl__hb_note *n)
{
    if (ddl__get_le(n->body + 8, 4) != (uint64_t)g->gen)
        return; /* another generation's */
    if (n->kind == DDL__HB_REGROUP) {
        set_bit(g->in, n->from);
        g->step[n->from] = (long)ddl__get_le(n->body, 8);
        for (int j = 0; j < c->world; j++)
            if (bit(n->body + 16, j) && j != c->rank)
                set_bit(g->suspect, j);
    } else if (g->decided_by < 0 || n->from < g->decided_by || !bit(n->body + 16, c->rank)) {
        g->decided_by = n->from; /* a decision without us counts whoever made it: we are out */
        g->left_out |= !bit(n->body + 16, c->rank);
        memcpy(g->decision, n->body, DDL__HB_BODY_BYTES);
    }
}

/* decide: the coordinator's decision, once every other rank has its note in or is dead. */
static int decide(ddl_comm *c, regroup *g, long my_step)
{
    for (int j = 0; j < c->world; j++)
        if (j != c->rank && !bit(g->in, j) && !bit(g->dead, j))
            return 0;
    unsigned char members[DDL__ELASTIC_MAX / 8] = {0};
    long top = my_step;
    g->step[c->rank] = my_step;
    for (int j = 0; j < c->world; j++)
        if (j == c->rank || (bit(g->in, j) && !bit(g->dead, j))) {
            set_bit(members, j);
            top = g->step[j] > top ? g->step[j] : top;
        }
    int leader = -1, behind = 0;
    for (int j = 0; j < c->world; j++)
        if (bit(members, j)) {
            if (g->step[j] == top && leader < 0)
                leader = j;
            behind += g->step[j] < top;
        }
    body_pack(g->decision, top, (uint32_t)g->gen, (uint32_t)leader | (uint32_t)behind << 16, members);
    g->decided_by = c->rank;
    for (int k = 0; k < 3; k++) { /* datagrams may be lost; members pass it on once too */
        ddl__hb_note_all(&c->hb, DDL__HB_DECIDE, g->decision, NULL);
        struct timespec ts = {0, 2 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return 1;
}

/* agree: until a decision this rank takes; DDL_OK, or DDL_ETIMEDOUT. */
static int agree(ddl_comm *c, regroup *g, long my_step)
{
    unsigned char note[DDL__HB_BODY_BYTES];
    int64_t next_note = 0, deadline = g->t0 + c->timeout_ms;
    for (;;) {
        int64_t now = ddl__now_ms();
        if (now >= next_note) {
            body_pack(note, my_step, (uint32_t)g->gen, 0, c->suspects);
            ddl__hb_note_all(&c->hb, DDL__HB_REGROUP, note, NULL);
            next_note = now + NOTE_MS;
        }
        ddl__hb_note n;
        while (ddl__hb_poll(&c->hb, 0, &n))
            take_note(c, g, &n);
        judge(c, g, ddl__now_ms());
        int coord = 0;
        while (coord < c->world && coord != c->rank && bit(g->dead, coord))
            coord++;
        if (coord == c->rank && g->decided_by < 0)
            (void)decide(c, g, my_step); /* then taken below */
        if (g->decided_by >= 0 && (g->decided_by <= coord || g->left_out)) {
            if (g->decided_by != c->rank) /* pass it on once */
                ddl__hb_note_all(&c->hb, DDL__HB_DECIDE, g->decision, g->decision + 16);
            char who[160] = "", dead[160] = "";
            for (int j = 0, a = 0, b = 0; j < c->world && j < 32; j++) {
                if (bit(g->decision + 16, j))
                    a += snprintf(who + a, sizeof who - (size_t)a, "%s%d", a ? "," : "", j);
                if (bit(g->dead, j))
                    b += snprintf(dead + b, sizeof dead - (size_t)b, "%s%d", b ? "," : "", j);
            }
            ddl__log(c->log, c->log_ud, DDL_LOG_INFO, "rank %d: regroup %d: rank %d decided on ranks %s (%d ms; dead "
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

/* reopen: the transport and the heartbeat again, among the members, in place. */
static int reopen(ddl_comm *c, const unsigned char *members, int new_rank, int new_world, const char *addrs)
{
    ddl_comm_config cfg = c->cfg0;
    int local = 0, local_rank = 0;
    char *list = (char *)c->scratch + (size_t)DDL__ELASTIC_MAX * ADDR_BYTES;
    size_t used = 0;
    list[0] = '\0';
    for (int j = 0; j < c->world; j++) {
        if (!bit(members, j))
            continue;
        if (j == c->rank || c->hb.peers[j].stack == c->hb.stack) { /* on this host */
            local_rank += j < c->rank;
            local++;
        }
        used += (size_t)snprintf(list + used, (size_t)DDL__ELASTIC_MAX * (ADDR_BYTES + 1) - used, "%s%s",
                                 used ? "," : "", addrs + (size_t)j * ADDR_BYTES);
    }
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
    c->seq = 0;
    c->status = DDL_OK;
    c->err[0] = '\0';
    c->generation++;
    c->rank = new_rank;
    c->world = new_world;
    snprintf(c->job, sizeof c->job, "%.47s~e%d", c->job_base, c->generation);
    cfg.rank = new_rank;
    cfg.world_size = new_world;
    cfg.local_rank = local_rank;
    cfg.local_size = local;
    cfg.job = c->job;
    cfg.peers = addrs[0] ? list : NULL;
    cfg.master = NULL;
    cfg.timeout_ms = c->timeout_ms;
    char why[DDL_ERR_BYTES];
    int st = new_world > 1 ? ddl__tp_open(c, &cfg) : DDL_OK;
    if (st != DDL_OK) {
        const char *e = ddl__tp_error(c);
        return ddl__comm_fail(c, st, "regroup %d: %s reopen, rank %d of %d: %s", c->generation, ddl__tp_name(c),
                              new_rank, new_world, e[0] ? e : ddl_strerror(st));
    }
    ddl__tp_limits(c, cfg.native_allreduce);
    if (new_world > 1 && (st = ddl__comm_start_heartbeat(c, &cfg, why, sizeof why)) != DDL_OK)
        return ddl__comm_fail(c, st, "regroup %d: %s", c->generation, why);
    c->seq = 0;
    return DDL_OK;
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
    /* the old addresses, while the transport can still tell them */
    char *addrs = (char *)c->scratch;
    addrs[0] = '\0';
    for (int j = 0; j < c->world && strcmp(ddl__tp_name(c), "shm") != 0; j++) {
        const char *a = ddl__tp_peer_address(c, j);
        snprintf(addrs + (size_t)j * ADDR_BYTES, ADDR_BYTES, "%s", a ? a : "?");
    }
    ddl__hb_halt(&c->hb);
    unsigned char note[DDL__HB_BODY_BYTES];
    body_pack(note, step, (uint32_t)g.gen, 0, c->suspects);
    ddl__hb_note_all(&c->hb, DDL__HB_REGROUP, note, NULL); /* first, then the links close */
    ddl__tp_close(c);
    int64_t closed = ddl__now_ms();
    ddl__log(c->log, c->log_ud, DDL_LOG_WARN, "rank %d: regrouping (generation %d) after: %s", c->rank, g.gen,
             out->why);
    c->status = DDL_OK; /* the agreement may report its own failure */
    int st = agree(c, &g, step);
    if (st != DDL_OK) {
        ddl__hb_stop(&c->hb);
        return st;
    }
    const unsigned char *members = g.decision + 16;
    int new_rank = 0, new_world = 0;
    for (int j = 0; j < c->world; j++)
        if (bit(members, j)) {
            new_rank += j < c->rank;
            new_world++;
        } else if (out->n_lost < 8) {
            out->lost[out->n_lost++] = j;
        }
    for (int k = out->n_lost; k < 8; k++)
        out->lost[k] = -1;
    uint32_t lb = (uint32_t)ddl__get_le(g.decision + 12, 4);
    int leader_old = (int)(lb & 0xffff);
    out->behind = (int)(lb >> 16);
    out->step = (long)ddl__get_le(g.decision, 8);
    out->leader = 0;
    for (int j = 0; j < leader_old; j++)
        out->leader += bit(members, j);
    if (!bit(members, c->rank)) {
        ddl__hb_stop(&c->hb);
        return ddl__comm_fail(c, DDL_EPEER, "rank %d was left out of the job by rank %d's regroup (generation %d): "
                              "the others found it dead or silent", c->rank, g.decided_by, g.gen);
    }
    if (new_world < c->elastic_min) {
        ddl__hb_stop(&c->hb);
        return ddl__comm_fail(c, DDL_EPEER, "only %d rank%s of %d live after a failure, fewer than the elastic "
                              "minimum %d: the job stops (%s)", new_world, new_world == 1 ? "" : "s", c->world,
                              c->elastic_min, out->why);
    }
    if (strcmp(ddl__tp_name(c), "shm") != 0)
        for (int j = 0; j < c->world; j++)
            if (bit(members, j) && strcmp(addrs + (size_t)j * ADDR_BYTES, "?") == 0) {
                ddl__hb_stop(&c->hb);
                return ddl__comm_fail(c, DDL_EINVAL, "regroup: the %s transport did not tell rank %d's address",
                                      ddl__tp_name(c), j);
            }
    int64_t agreed = ddl__now_ms();
    if ((st = reopen(c, members, new_rank, new_world, addrs)) != DDL_OK)
        return st;
    out->rank = c->rank;
    out->world = c->world;
    out->generation = c->generation;
    out->ms = (double)(ddl__now_ms() - g.t0);
    ddl__log(c->log, c->log_ud, DDL_LOG_WARN, "rank %d is now rank %d of %d (generation %d, %.0f ms: closing the "
             "links %d, agreeing %d, reconnecting %d; %d lost; step %ld)", out->old_rank, out->rank, out->world,
             out->generation, out->ms, (int)(closed - g.t0), (int)(agreed - closed),
             (int)(ddl__now_ms() - agreed), out->n_lost, out->step);
    return DDL_OK;
}

int ddl_comm_elastic_min(const ddl_comm *c) { return c ? c->elastic_min : 0; }
int ddl_comm_elastic_max(const ddl_comm *c) { return c ? c->elastic_max : 0; }
