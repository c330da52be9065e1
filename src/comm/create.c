/* create.c - making and destroying a comm: the configuration checked, one allocation laid out
 * (transport state, scratch, sequence numbers, heartbeat tables), the elastic comm's membership
 * (join.c), the transport opened, then the heartbeat (heartbeat_start.c) and the two-level
 * all-reduce (create_hier.c). It sits above the three floors of src/comm (impl.h): nothing in
 * them calls back into it. */
#include "impl.h"

#include <string.h>

/* ---- create and destroy ---- */

static int check_config(const ddl_comm_config *cfg, char *err, size_t n)
{
    if (cfg->world_size < 1 || cfg->rank < 0 || cfg->rank >= cfg->world_size)
        return ddl__errf(err, n, DDL_EINVAL, "rank %d is not in [0, %d)", cfg->rank, cfg->world_size);
    if (cfg->timeout_ms < 0)
        return ddl__errf(err, n, DDL_EINVAL, "timeout_ms %d must be positive", cfg->timeout_ms);
    const ddl_transport *t = cfg->transport;
    if (cfg->heartbeat_timeout_ms < 0 || cfg->heartbeat_interval_ms < 0 ||
        (cfg->heartbeat_timeout_ms > 0 && cfg->heartbeat_interval_ms > cfg->heartbeat_timeout_ms))
        return ddl__errf(err, n, DDL_EINVAL, "heartbeat interval %d ms and timeout %d ms: need 0 <= interval <= "
                         "timeout (0: off)", cfg->heartbeat_interval_ms, cfg->heartbeat_timeout_ms);
    if (cfg->algo < DDL_ALGO_AUTO || cfg->algo > DDL_ALGO_HIER)
        return ddl__errf(err, n, DDL_EINVAL, "algo %d is not DDL_ALGO_AUTO, _RING, _PS or _HIER", cfg->algo);
    if (cfg->compress < DDL_COMPRESS_NONE || cfg->compress > DDL_COMPRESS_FP16)
        return ddl__errf(err, n, DDL_EINVAL, "compress %d is not DDL_COMPRESS_NONE, _BF16 or _FP16", cfg->compress);
    if (cfg->elastic_min < 0 || cfg->elastic_max < 0 ||
        (cfg->elastic_min > 0 && (cfg->elastic_min > cfg->world_size || cfg->elastic_max > DDL__ELASTIC_MAX ||
                                  (cfg->elastic_max && cfg->elastic_max < cfg->world_size))))
        return ddl__errf(err, n, DDL_EINVAL, "elastic %d:%d: need 1 <= min <= world size %d <= max <= %d (0: off)",
                         cfg->elastic_min, cfg->elastic_max, cfg->world_size, DDL__ELASTIC_MAX);
    if (cfg->join && (cfg->elastic_min <= 0 || !cfg->peers || !cfg->peers[0] || cfg->world_size < 2))
        return ddl__errf(err, n, DDL_EINVAL, "join (DDL_JOIN=1) replaces a rank of a running elastic job: it needs "
                         "elastic mode (DDL_ELASTIC) and every rank's address (DDL_PEERS), as ddlrun --elastic sets");
    if (cfg->join && (!cfg->token || !cfg->token[0])) /* a job without one drew its own secret (join.c) */
        return ddl__errf(err, n, DDL_EINVAL, "join (DDL_JOIN=1) needs the job's token (DDL_TOKEN): a job started "
                         "without one admits no process from outside (ddlrun gives its ranks and their replacements "
                         "a token)");
    if (cfg->elastic_min > 0 && cfg->world_size > 1) {
        if (cfg->heartbeat_timeout_ms <= 0)
            return ddl__errf(err, n, DDL_EINVAL, "elastic mode needs heartbeats (DDL_HEARTBEAT_TIMEOUT_MS > 0): the "
                             "ranks agree on who lives through them");
        if (t && strcmp(t->name, "shm") != 0 && strcmp(t->name, "tcp") != 0 && strcmp(t->name, "zmq") != 0)
            return ddl__errf(err, n, DDL_EINVAL, "elastic mode works over shm, tcp and zmq, not %s (an MPI job ends "
                             "with its first failure)", t->name);
        if ((cfg->token && strlen(cfg->token) >= 256) || (cfg->job && strlen(cfg->job) >= 48))
            return ddl__errf(err, n, DDL_EINVAL, "elastic mode: the token must be under 256 bytes and the job id under "
                             "48");
    }
    return ddl__tp_check(t, err, n);
}

/* layout: [comm | state | scratch | p2p_sent | p2p_recvd | last_sent | posted | shard_firsts | hb peers | hb cards
 * | elastic: the kept result (replay.c)], each DDL_ALIGN-aligned. */
static size_t comm_layout(const ddl_comm_config *cfg, size_t *off_state, size_t *off_scratch, size_t *off_seq,
                          size_t *off_hb)
{
    size_t n = ddl__align_up(sizeof(ddl_comm));
    *off_state = n;
    if (cfg->world_size > 1) {
        n += ddl__align_up(ddl__tp_state_bytes(cfg->transport, cfg));
        *off_scratch = n;
        n += DDL__SCRATCH_BYTES;
    } else {
        *off_scratch = n;
    }
    *off_seq = n;
    n += ddl__align_up((size_t)cfg->world_size * (2 * sizeof(uint32_t) + 2 * DDL_HEADER_BYTES + sizeof(int64_t)));
    *off_hb = n;
    if (cfg->world_size > 1 && cfg->heartbeat_timeout_ms > 0)
        n += ddl__align_up((size_t)cfg->world_size * (sizeof(ddl__hb_peer) + DDL__HB_CARD_BYTES));
    if (cfg->elastic_min > 0)
        n += DDL__REPLAY_BYTES;
    return n;
}

static ddl_comm *comm_alloc(const ddl_comm_config *cfg_in, const ddl_allocator *alloc)
{
    ddl_comm_config sized = *cfg_in; /* elastic: room for the most ranks the job will have */
    if (sized.elastic_min > 0 && sized.elastic_max > sized.world_size)
        sized.world_size = sized.elastic_max;
    const ddl_comm_config *cfg = &sized;
    size_t off_state, off_scratch, off_seq, off_hb;
    size_t bytes = comm_layout(cfg, &off_state, &off_scratch, &off_seq, &off_hb);
    unsigned char *base = (unsigned char *)ddl__alloc(alloc, bytes); /* DDL_ALIGN-aligned */
    if (!base)
        return NULL;
    memset(base, 0, bytes);
    ddl_comm *c = (ddl_comm *)base;
    if (alloc)
        c->alloc = *alloc;
    c->state = cfg->world_size > 1 ? base + off_state : NULL;
    c->scratch = cfg->world_size > 1 ? base + off_scratch : NULL;
    c->p2p_sent = (uint32_t *)(base + off_seq);
    c->p2p_recvd = c->p2p_sent + cfg->world_size;
    c->last_sent = (unsigned char *)(c->p2p_recvd + cfg->world_size);
    c->posted = c->last_sent + (size_t)cfg->world_size * DDL_HEADER_BYTES;
    c->shard_firsts = (int64_t *)(c->posted + (size_t)cfg->world_size * DDL_HEADER_BYTES);
    c->hb.peers = (ddl__hb_peer *)(base + off_hb);
    c->hb_cards = base + off_hb + (size_t)cfg->world_size * sizeof(ddl__hb_peer);
    if (cfg->elastic_min > 0)
        c->rp.buf = base + bytes - DDL__REPLAY_BYTES, c->rp.cap = DDL__REPLAY_BYTES;
    c->hb.fd = c->hb.wake_fd = -1;
    c->capacity = cfg->world_size;
    c->state_bytes = cfg->world_size > 1 ? ddl__tp_state_bytes(cfg->transport, cfg) : 0;
    return c;
}

/* two_levels: the two-level all-reduce where the hosts allow it (create_hier.c plans it), with its
 * comm of this host's ranks over shared memory, made here as any comm is. */
static int two_levels(ddl_comm *c, const ddl_comm_config *cfg, char *err, size_t err_bytes)
{
    ddl_comm_config local;
    char job[64];
    int st = ddl__hier_setup(c, cfg, &local, job, err, err_bytes);
    if (st != DDL_OK || !c->hier)
        return st;
    char why[DDL_ERR_BYTES];
    st = ddl_comm_create(&local, c->alloc.alloc ? &c->alloc : NULL, &c->hier->local, why, sizeof why);
    if (st != DDL_OK)
        return ddl__errf(err, err_bytes, st, "rank %d: the two-level all-reduce's shared memory among the %d ranks "
                         "of its host: %s", c->rank, local.world_size, why);
    return DDL_OK;
}

int ddl_comm_create(const ddl_comm_config *cfg_in, const ddl_allocator *alloc, ddl_comm **out, char *err,
                    size_t err_bytes)
{
    if (!out || !cfg_in)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_comm_create: no configuration or out is NULL");
    *out = NULL;
    ddl_comm_config cfg = *cfg_in;
    if (cfg.timeout_ms == 0)
        cfg.timeout_ms = 60000;
    int st = check_config(&cfg, err, err_bytes);
    if (st == DDL_OK && cfg.world_size > 1 && !cfg.transport)
        st = ddl__default_transport(&cfg, NULL, "", err, err_bytes);
    if (st != DDL_OK)
        return st;
    if (cfg.world_size == 1)
        cfg.transport = NULL;
    ddl_comm *c = comm_alloc(&cfg, alloc);
    if (!c)
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "rank %d: cannot allocate the comm", cfg.rank);
    c->tp = cfg.transport;
    c->rank = cfg.rank;
    c->world = cfg.world_size;
    c->timeout_ms = cfg.timeout_ms;
    c->log = cfg.log;
    c->log_ud = cfg.log_ud;
    ddl__tp_limits(c, cfg.native_allreduce);
    c->compress = cfg.compress;
    c->algo = cfg.algo;
    snprintf(c->job, sizeof c->job, "%s", cfg.job && cfg.job[0] ? cfg.job : "ddl");
    cfg.job = c->job;
    if (cfg.elastic_min > 0 && cfg.world_size > 1) { /* what a regroup reopens with */
        c->elastic_min = cfg.elastic_min;
        c->elastic_max = cfg.elastic_max > cfg.world_size ? cfg.elastic_max : cfg.world_size;
        snprintf(c->token, sizeof c->token, "%s", cfg.token ? cfg.token : "");
        snprintf(c->job_base, sizeof c->job_base, "%s", c->job);
        c->cfg0 = cfg;
        c->cfg0.token = cfg.token ? c->token : NULL;
        c->cfg0.master = c->cfg0.peers = NULL;
        if ((st = ddl__elastic_setup(c, &cfg, err, err_bytes)) != DDL_OK) {
            ddl_comm_destroy(c);
            return st;
        }
        if (cfg.join) { /* a replacement: it asks the running job in at its first call (join.c), so it
                         * loads its data and builds its model before the running ranks wait for it */
            c->joined = c->join_pending = 1;
            *out = c;
            return DDL_OK;
        }
    }
    if (c->tp)
        st = ddl__tp_open(c, &cfg);
    if (st != DDL_OK) {
        const char *e = ddl__tp_error(c);
        ddl__errf(err, err_bytes, st, "%s open, rank %d of %d: %s", ddl__tp_name(c), c->rank, c->world,
                  e[0] ? e : ddl_strerror(st));
        ddl_comm_destroy(c);
        return st;
    }
    if (c->tp && c->elastic_min > 0 && (st = ddl__elastic_secret(c, &cfg, err, err_bytes)) != DDL_OK) {
        ddl_comm_destroy(c);
        return st;
    }
    if (c->tp && cfg.heartbeat_timeout_ms > 0) {
        if ((st = ddl__comm_start_heartbeat(c, &cfg, err, err_bytes)) != DDL_OK) {
            ddl_comm_destroy(c);
            return st;
        }
        c->seq = 0; /* the cards' allgather is not one of the caller's calls */
    }
    if (c->tp && (st = two_levels(c, &cfg, err, err_bytes)) != DDL_OK) {
        ddl_comm_destroy(c);
        return st;
    }
    *out = c;
    return DDL_OK;
}

void ddl_comm_destroy(ddl_comm *c)
{
    if (!c)
        return;
    ddl__hier_free(c);
    ddl__elastic_free(c);
    ddl__comm_close(c);
}
