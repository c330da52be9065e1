/* join.c - an elastic comm's slots, and a replacement joining a running job (ddl_comm_config.join):
 * it sends join notes, under a key of the token and the job that does not change with the
 * generation and stamped with its clock, to every slot's heartbeat port (the port of that slot's
 * entry in the peer list), until a rank's coordinator admits it; then it opens the transport with
 * the members, as a regroup does (elastic.c). */
#include "impl.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* what the floors below call on an elastic comm (impl.h): a joiner's first call asks the job in,
 * and every public collective keeps its result for a rank that misses it (replay.c) */
static const ddl__member_hooks elastic_hooks = {ddl__comm_admit, ddl__replay_enter, ddl__replay_leave};

int ddl__elastic_setup(ddl_comm *c, const ddl_comm_config *cfg, char *err, size_t err_bytes)
{
    c->member = &elastic_hooks;
    c->slot = cfg->rank;
    for (int j = 0; j < DDL__ELASTIC_MAX; j++)
        c->slot_of[j] = j;
    if (!cfg->peers || !cfg->peers[0])
        return DDL_OK; /* no joins: nobody could find the job */
    size_t n = strlen(cfg->peers) + 1;
    char *copy = (char *)ddl__alloc(c->alloc.alloc ? &c->alloc : NULL, n);
    if (!copy)
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "rank %d: cannot copy the peer list", cfg->rank);
    memcpy(copy, cfg->peers, n);
    c->peers0 = copy;
    char e[DDL__ELASTIC_ADDR];
    for (int s = 0; s < c->elastic_max; s++) {
        ddl__elastic_peer_entry(c, s, e, sizeof e);
        const char *colon = strrchr(e, ':');
        long port = colon ? strtol(colon + 1, NULL, 10) : 0;
        c->slot_port[s] = (uint16_t)(port > 0 && port < 65536 ? port : 0);
    }
    return DDL_OK;
}

void ddl__elastic_free(ddl_comm *c)
{
    if (c->peers0)
        ddl__free(c->alloc.alloc ? &c->alloc : NULL, (void *)c->peers0);
    c->peers0 = NULL;
    ddl__free(c->alloc.alloc ? &c->alloc : NULL, c->rp.grown);
    c->rp.grown = NULL;
}

/* ---- the job's secret ----
 * Without a token the keys of the heartbeat and of the join notes (heartbeat.c) would be HMACs
 * under an empty key of the job id, which any local user can read off /dev/shm or guess ("ddl"):
 * a stranger's join notes were admitted, and the ranks waited for a phantom until they failed.
 * So a comm without a token makes one: rank 0's random bytes, sent over the links just opened (on
 * shm the user's own segment; on tcp or zmq without a token DDL_INSECURE said anyone may connect
 * anyway). No process outside has it, so none is admitted; a replacement needs the job's token. */

int ddl__elastic_secret(ddl_comm *c, ddl_comm_config *cfg, char *err, size_t err_bytes)
{
    if (c->token[0])
        return DDL_OK;
    unsigned char r[32] = {0};
    if (c->rank == 0 && getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        return ddl__errf(err, err_bytes, DDL_EIO, "rank 0: no random bytes for the job's secret: %s", strerror(errno));
    c->rp.depth++; /* not one of the caller's calls */
    int st = ddl_comm_broadcast(c, r, sizeof r / 8, DDL_INT64, 0);
    c->rp.depth--;
    c->seq = 0;
    if (st != DDL_OK)
        return ddl__errf(err, err_bytes, st, "rank %d: sharing the job's secret: %s", c->rank, c->err);
    for (size_t i = 0; i < sizeof r; i++)
        snprintf(c->token + 2 * i, 3, "%02x", r[i]);
    cfg->token = c->cfg0.token = c->token;
    return DDL_OK;
}

/* slot_dest: slot s's heartbeat address (its peer list entry's host, IPv4), 0 if it has one. */
static int slot_dest(const ddl_comm *c, int s, struct sockaddr_in *out)
{
    char e[DDL__ELASTIC_ADDR];
    ddl__elastic_peer_entry(c, s, e, sizeof e);
    char *colon = strrchr(e, ':');
    if (!colon || !c->slot_port[s])
        return -1;
    *colon = '\0';
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *res = NULL;
    if (getaddrinfo(e, NULL, &hints, &res) != 0 || !res)
        return -1;
    *out = *(const struct sockaddr_in *)(const void *)res->ai_addr;
    out->sin_port = htons(c->slot_port[s]);
    freeaddrinfo(res);
    return 0;
}

int ddl__comm_join(ddl_comm *c, const ddl_comm_config *cfg, char *err, size_t err_bytes)
{
    int64_t t0 = ddl__now_ms(), deadline = t0 + c->timeout_ms, next = 0;
    unsigned char card[DDL__HB_CARD_BYTES], body[DDL__HB_BODY_BYTES], none[DDL__ELASTIC_MAX / 8] = {0};
    int st = ddl__hb_card(c, cfg, card, err, err_bytes); /* keys, and the socket at our slot's port */
    if (st != DDL_OK)
        return st;
    c->hb.joining = 1;
    ddl__log(c->log, c->log_ud, DDL_LOG_INFO, "slot %d: asking the running job in (job %s)", c->slot, c->job_base);
    for (;;) {
        int64_t now = ddl__now_ms();
        if (now >= deadline) {
            ddl__hb_stop(&c->hb);
            return ddl__errf(err, err_bytes, DDL_ETIMEDOUT, "slot %d: no rank of job %s admitted this replacement "
                             "within %d ms (is the job running, elastic, with the same token?)", c->slot, c->job_base,
                             c->timeout_ms);
        }
        if (now >= next) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ddl__elastic_note(body, (long)((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000), 0, 0, none);
            for (int s = 0; s < c->elastic_max; s++) {
                struct sockaddr_in d;
                if (s != c->slot && slot_dest(c, s, &d) == 0)
                    ddl__hb_join_note(&c->hb, &d, DDL__HB_JOIN, (uint32_t)c->slot, 0xffffffffu, c->hb.incarnation,
                                      body);
            }
            next = now + DDL__ELASTIC_NOTE_MS;
        }
        ddl__hb_note n;
        if (!ddl__hb_poll(&c->hb, 5, &n) || n.kind != DDL__HB_ADMIT || !ddl__bit(n.body + 16, c->slot))
            continue;
        ddl_regroup *out = &c->join_info;
        memset(out, 0, sizeof *out);
        out->old_rank = -1;
        ddl__elastic_outcome(c, n.body, none, out);
        c->generation = (int)ddl__get_le(n.body + 8, 4) - 1;
        char *addrs = (char *)c->scratch;
        int need_addrs = strcmp(ddl__tp_name(c), "shm") != 0;
        unsigned char here[DDL__ELASTIC_MAX / 8] = {0};
        memset(addrs, 0, (size_t)DDL__ELASTIC_MAX * DDL__ELASTIC_ADDR);
        for (int s = 0; s < c->elastic_max; s++) {
            ddl__elastic_peer_entry(c, s, addrs + (size_t)s * DDL__ELASTIC_ADDR, DDL__ELASTIC_ADDR);
            if (ddl__bit(n.body + 16, s) && strncmp(addrs + (size_t)s * DDL__ELASTIC_ADDR, addrs + (size_t)c->slot * DDL__ELASTIC_ADDR,
                                                strcspn(addrs + (size_t)c->slot * DDL__ELASTIC_ADDR, ":") + 1) == 0)
                ddl__set_bit(here, s);
        }
        c->world = c->capacity; /* reopen lays out from the members */
        c->rp.done = -1;        /* it missed everything: the leader's state reaches it, not a replay */
        if ((st = ddl__elastic_reopen(c, n.body + 16, need_addrs ? addrs : "", here)) != DDL_OK)
            return ddl__errf(err, err_bytes, st, "slot %d: admitted, then: %s", c->slot, c->err);
        out->generation = c->generation;
        out->ms = (double)(ddl__now_ms() - t0);
        c->joined = 1;
        ddl__log(c->log, c->log_ud, DDL_LOG_INFO, "slot %d joined as rank %d of %d (generation %d, %.0f ms, at step "
                 "%ld)", c->slot, c->rank, c->world, c->generation, out->ms, out->step);
        return DDL_OK;
    }
}

int ddl__comm_admit(ddl_comm *c)
{
    if (!c->join_pending)
        return DDL_OK;
    c->join_pending = 0;
    char err[DDL_ERR_BYTES];
    int st = ddl__comm_join(c, &c->cfg0, err, sizeof err);
    if (st != DDL_OK) {
        c->status = st;
        snprintf(c->err, sizeof c->err, "%s", err);
    }
    return st;
}

int ddl_comm_joined(ddl_comm *c, ddl_regroup *out)
{
    if (!c || !c->joined)
        return 0;
    (void)ddl__comm_admit(c); /* a failure is the comm's sticky error: the first call says it */
    if (out)
        *out = c->join_info;
    return 1;
}

