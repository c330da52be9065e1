/* create_hier.c - making a comm's two-level all-reduce (hier.c says what it is): over tcp or zmq,
 * the ranks learn who shares a host (one allgather of a host key: boot, network and mount
 * namespace, host name; and of the block of ranks each was told is its host's: rank - local_rank),
 * agree on the tree or the ring, and each host's ranks get the config of a second, private comm
 * over shared memory among themselves, which create.c opens as it opens any comm. */
#include "impl.h"

#include <string.h>

/* ---- who shares a host ---- */

enum { CARD_KEY, CARD_BLOCK, CARD_ALGO, CARD_N }; /* int64 per rank in the exchange */

static int same_host(const int64_t *cards, int a, int b)
{
    return cards[a * CARD_N + CARD_KEY] == cards[b * CARD_N + CARD_KEY] &&
           cards[a * CARD_N + CARD_BLOCK] == cards[b * CARD_N + CARD_BLOCK];
}

/* layout: from every rank's card, this rank's host, local rank, the host count and size, and
 * col. 0 when the hosts fit the algorithm (>= 2 hosts, all of the same size >= 2), else -1 with
 * the reason in why. */
static int layout(const int64_t *cards, int world, int rank, struct ddl__hier *h, int *col, char *why, size_t n)
{
    int hosts = 0, size = -1;
    for (int r = 0; r < world; r++) {
        int first = r, here = 0, mine = 0, my_pos = 0;
        for (int q = 0; q < world && first == r; q++)
            if (same_host(cards, q, r))
                first = q < first ? q : first;
        if (first != r)
            continue; /* r is not its host's lowest rank: counted with that one */
        for (int q = r; q < world; q++)
            if (same_host(cards, q, r)) {
                if (q == rank)
                    mine = 1, my_pos = here;
                here++;
            }
        if (size >= 0 && here != size)
            return ddl__errf(why, n, -1, "hosts of %d and %d ranks", size, here);
        size = here;
        if (mine)
            h->host = hosts, h->local_rank = my_pos;
        hosts++;
    }
    if (hosts < 2 || size < 2)
        return ddl__errf(why, n, -1, "%d host%s of %d rank%s", hosts, hosts == 1 ? "" : "s", size,
                         size == 1 ? "" : "s");
    h->n_hosts = hosts;
    h->n_local = size;
    for (int q = 0, j = 0; q < world; q++)
        if (same_host(cards, q, rank))
            h->members[j++] = q;
    for (int r = 0, k = 0; r < world; r++) { /* hosts in order of their lowest rank */
        int first = 1;
        for (int q = 0; q < r && first; q++)
            first = !same_host(cards, q, r);
        if (!first)
            continue;
        for (int q = r, pos = 0; q < world; q++)
            if (same_host(cards, q, r) && pos++ == h->local_rank)
                col[k] = q;
        k++;
    }
    return 0;
}

/* local_config: the config of the shm comm of this host's ranks, under a job id (into job, 64
 * bytes) of the comm's job and the host's lowest rank (unique among hosts that share /dev/shm, as
 * namespaced hosts do). */
static void local_config(const ddl_comm *c, const ddl_comm_config *cfg, const struct ddl__hier *h, int lowest,
                         ddl_comm_config *l, char *job)
{
    snprintf(job, 64, "%.40s.h%d", c->job, lowest);
    memset(l, 0, sizeof *l);
    l->transport = ddl_transport_shm();
    l->rank = l->local_rank = h->local_rank;
    l->world_size = l->local_size = h->n_local;
    l->job = job;
    l->timeout_ms = c->timeout_ms;
    l->log = c->log;
    l->log_ud = c->log_ud;
    l->heartbeat_timeout_ms = cfg->heartbeat_timeout_ms; /* a stopped local peer is named, as on the main comm */
    l->heartbeat_interval_ms = cfg->heartbeat_interval_ms;
    l->token = cfg->token;
    l->algo = DDL_ALGO_RING;
}

int ddl__hier_setup(ddl_comm *c, const ddl_comm_config *cfg, ddl_comm_config *local, char *job, char *err,
                    size_t err_bytes)
{
    const char *tn = c->tp ? c->tp->name : "";
    if (c->world < 4 || c->elastic_min > 0 || (c->algo != DDL_ALGO_HIER && c->algo != DDL_ALGO_AUTO) ||
        (strcmp(tn, "tcp") != 0 && strcmp(tn, "zmq") != 0) || !ddl_transport_shm())
        return DDL_OK;
    const ddl_allocator *a = c->alloc.alloc ? &c->alloc : NULL;
    size_t card_bytes = (size_t)c->world * CARD_N * sizeof(int64_t);
    int64_t *cards = ddl__alloc(a, card_bytes);
    struct ddl__hier *h = ddl__alloc(a, sizeof *h + 2 * (size_t)c->world * sizeof(int));
    if (!cards || !h) {
        ddl__free(a, cards);
        ddl__free(a, h);
        return ddl__errf(err, err_bytes, DDL_ENOMEM, "rank %d: cannot allocate the host table", c->rank);
    }
    memset(h, 0, sizeof *h);
    h->members = h->col + c->world;
    int64_t mine[CARD_N] = {(int64_t)ddl__place_id(DDL__PLACE_NET | DDL__PLACE_MNT | DDL__PLACE_HOST), c->rank - cfg->local_rank, c->algo};
    int st = ddl_comm_allgather(c, mine, cards, CARD_N, DDL_INT64);
    c->seq = 0; /* not one of the caller's calls */
    if (st != DDL_OK)
        ddl__errf(err, err_bytes, st, "rank %d: exchanging host keys: %s", c->rank, c->err);
    char why[160] = "";
    for (int r = 0; st == DDL_OK && r < c->world; r++)
        if (cards[r * CARD_N + CARD_ALGO] != c->algo)
            st = ddl__errf(err, err_bytes, DDL_EMISMATCH, "rank %d: DDL_ALGO %d here, %d at rank %d: every rank "
                           "must agree", c->rank, c->algo, (int)cards[r * CARD_N + CARD_ALGO], r);
    int fits = st == DDL_OK && layout(cards, c->world, c->rank, h, h->col, why, sizeof why) == 0;
    if (fits) { /* the tree: L and H powers of two, host h holding ranks h L .. h L + L - 1 */
        h->tree = ddl__pow2(h->n_local) && ddl__pow2(h->n_hosts);
        for (int j = 0; j < h->n_local && h->tree; j++)
            h->tree = h->members[j] == h->host * h->n_local + j;
        int64_t all = h->tree; /* every host must see it alike */
        if ((st = ddl_comm_allreduce(c, &all, 1, DDL_INT64, DDL_SUM)) != DDL_OK)
            ddl__errf(err, err_bytes, st, "rank %d: agreeing on the two-level all-reduce: %s", c->rank, c->err);
        c->seq = 0;
        h->tree = all == c->world;
        fits = st == DDL_OK && (h->tree || c->algo == DDL_ALGO_HIER);
    }
    if (fits) {
        int lowest = 0;
        while (!same_host(cards, lowest, c->rank))
            lowest++;
        local_config(c, cfg, h, lowest, local, job);
        c->hier = h; /* its local comm: the caller's to open */
        h = NULL;
        if (c->log && c->rank == 0) {
            char line[160];
            snprintf(line, sizeof line, "two-level all-reduce: %d hosts x %d ranks (%s)", c->hier->n_hosts,
                     c->hier->n_local, c->hier->tree ? "the flat all-reduce's bits" : "by rings: other bits than "
                     "the flat all-reduce");
            c->log(c->log_ud, DDL_LOG_INFO, line);
        }
    } else if (st == DDL_OK && c->algo == DDL_ALGO_HIER && c->log && c->rank == 0) {
        char line[256];
        snprintf(line, sizeof line, "DDL_ALGO=hier: %s, not >= 2 hosts of the same number >= 2: the flat all-reduce",
                 why);
        c->log(c->log_ud, DDL_LOG_WARN, line);
    }
    ddl__free(a, cards);
    ddl__free(a, h);
    return st;
}
