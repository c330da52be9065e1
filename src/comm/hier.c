/* hier.c - the two-level all-reduce: ranks that share a host add through shared memory, and one
 * stream per local rank crosses the network.
 * At create (create_hier.c), over tcp or zmq, the ranks learn who shares a host (one allgather of a host key:
 * boot, network and mount namespace, host name; and of the block of ranks each was told is its
 * host's: rank - local_rank). When there are >= 2 hosts of the same number L >= 2 of ranks, each
 * host's ranks open a second, private comm over shared memory among themselves. Two ways:
 *
 * The tree (DDL_ALGO auto, the default, or hier), when L and the host count H are powers of two
 * and every host holds L consecutive ranks: halving.c's levels, the first log2 L (partners on the
 * same host) over shared memory, the next log2 H over the network (partners of the same local
 * rank on other hosts), then the all-gather's in reverse. It is halving.c's all-reduce with the
 * host's levels moved to shared memory: the same pairs, halves and additions, so the same bits
 * as the same world on one host, over any transport; hence chosen by itself.
 *
 * The ring (DDL_ALGO=hier only, for other hosts: asked for, since it adds in another order than
 * the flat all-reduce, so a job on several hosts would get other weights than on one):
 *   1. reduce-scatter inside the host (the ring's first half over shm, L - 1 steps): local rank i
 *      ends with segment (i + 1) % L of L summed over the host;
 *   2. an all-reduce of that segment across the H hosts among the ranks of local rank i (a ring
 *      over the main comm's links, H hosts in host order): L streams cross the network at once,
 *      each with 1/L of the vector;
 *   3. all-gather inside the host (the ring's second half over shm).
 * Either way every host link carries 2 (H - 1) / H of the vector each way (the flat ring of
 * n = H L ranks: 2 (n - 1) / n), in 2 log2 H (tree) or 2 (H - 1) (ring) network steps.
 *
 * The ring's order of additions, fixed by count, L and H alone (never by timing or transport):
 * cut the vector into L segments (ddl__ring_segment), segment m into H sub-segments. An element
 * of sub-segment k of segment m is
 *     y_h = (...((x[h,m] + x[h,m+1]) + x[h,m+2]) + ... + x[h,m+L-1])   (local indices mod L)
 *     sum = (...((y_k + y_{k+1}) + y_{k+2}) + ... + y_{k+H-1})          (host indices mod H)
 * where x[h,j] is the vector of local rank j of host h (hosts ordered by their lowest rank, local
 * ranks by rank within the host).
 * It allocates only at create (the host table and the shm comm: create_hier.c); the all-reduce uses
 * the comms' scratch. It must not be used by an elastic comm (a regroup would leave the shm comm
 * stale). */
#include "impl.h"

#include <stdlib.h>
#include <string.h>

/* All-reduces of at least this many bytes take the two-level path (when there is one). */
#define HIER_MIN_BYTES ((size_t)16 << 10)


void ddl__hier_free(ddl_comm *c)
{
    if (!c->hier)
        return;
    if (c->hier->local) /* a plain comm: shm, no two levels of its own, not elastic */
        ddl__comm_close(c->hier->local);
    ddl__free(c->alloc.alloc ? &c->alloc : NULL, c->hier);
    c->hier = NULL;
}

int ddl__hier_fits(const ddl_comm *c, size_t count, int dtype)
{
    return c->hier && count >= (size_t)c->world && count * ddl__dtype_bytes(dtype) >= HIER_MIN_BYTES;
}

/* ---- the all-reduce ---- */

/* col_exchange: ddl__ring_exchange's step s over the ring of hosts (col): send sub-segment ss of
 * buf to the next host's rank, receive rs from the previous one's (with do_reduce: buf's =
 * received + buf's), in pieces of the scratch. */
static int col_exchange(ddl_comm *c, const struct ddl__hier *h, unsigned char *buf, size_t esz, uint32_t s,
                        ddl__seg ss, ddl__seg rs, int dtype, int op, int do_reduce)
{
    int H = h->n_hosts;
    return ddl__ring_exchange_with(c, h->col[(h->host + 1) % H], h->col[(h->host + H - 1) % H], buf, buf, esz, s, ss,
                                   rs, dtype, op, do_reduce);
}

/* sub: sub-segment k of H of segment seg. */
static ddl__seg sub(ddl__seg seg, int H, int k)
{
    ddl__seg s = ddl__ring_segment(seg.len, H, k);
    s.off += seg.off;
    return s;
}

/* local_half: the ring over shm's reduce-scatter (second 0) or all-gather (second 1) half. */
static int local_half(ddl_comm *l, unsigned char *buf, size_t count, size_t esz, int dtype, int op, int second)
{
    int L = l->world, i = l->rank;
    for (int s = 0; s < L - 1; s++) {
        int sk = second ? i + 1 - s : i - s, rk = sk - 1;
        ddl__seg ss = ddl__ring_segment(count, L, (sk % L + L) % L);
        ddl__seg rs = ddl__ring_segment(count, L, (rk % L + L) % L);
        int st = ddl__ring_exchange(l, buf, buf, esz, (uint32_t)(second ? L + s : s), ss, rs, dtype, op, !second);
        if (st != DDL_OK)
            return st;
    }
    return DDL_OK;
}

/* in_main_ranks: the shm comm's message in with every "rank N" (N a local rank) as the main
 * comm's rank, into out: the ranks a user knows. */
static void in_main_ranks(const struct ddl__hier *h, const char *in, char *out, size_t size)
{
    size_t n = 0;
    while (*in && n + 1 < size) {
        char *end;
        if (strncmp(in, "rank ", 5) == 0 && in[5] >= '0' && in[5] <= '9') {
            long j = strtol(in + 5, &end, 10);
            if (j >= 0 && j < h->n_local) {
                int w = snprintf(out + n, size - n, "rank %d", h->members[j]);
                n = w > 0 && (size_t)w < size - n ? n + (size_t)w : size - 1;
                in = end;
                continue;
            }
        }
        out[n++] = *in++;
    }
    out[n] = 0;
}

/* local_failed: the shm comm failed: the main comm fails with its message, ranks named as the
 * main comm's. */
static int local_failed(ddl_comm *c, int st, const char *phase)
{
    const struct ddl__hier *h = c->hier;
    if (ddl__comm_stalled(c) != DDL_OK) /* a rank of another host stopped, and this one's partner gave up first */
        return c->status;
    const char *e = ddl_comm_error(h->local);
    char msg[DDL_ERR_BYTES];
    in_main_ranks(h, e[0] ? e : ddl_strerror(st), msg, sizeof msg);
    return ddl__comm_fail(c, st, "rank %d: allreduce #%u (two-level), %s inside its host over shm: %s", c->rank,
                          c->cur.seq, phase, msg);
}

/* tree: halving.c's levels, the host's over shm (l), the others across hosts (c). */
static int tree(ddl_comm *c, unsigned char *buf, size_t count, size_t esz, int dtype, int op)
{
    struct ddl__hier *h = c->hier;
    int a = ddl__halving_levels(h->n_local), b = ddl__halving_levels(h->n_hosts), st = DDL_OK;
    for (int k = 0; k < a; k++)
        if ((st = ddl__halving_step(h->local, h->local_rank ^ (1 << k), buf, count, esz, c->rank, k, 0, dtype, op)))
            return local_failed(c, st, "the reduce-scatter");
    for (int k = a; k < a + b && st == DDL_OK; k++)
        st = ddl__halving_step(c, h->col[h->host ^ (1 << (k - a))], buf, count, esz, c->rank, k, 0, dtype, op);
    for (int k = a + b - 1; k >= a && st == DDL_OK; k--)
        st = ddl__halving_step(c, h->col[h->host ^ (1 << (k - a))], buf, count, esz, c->rank, k, 1, dtype, op);
    for (int k = a - 1; k >= 0 && st == DDL_OK; k--)
        if ((st = ddl__halving_step(h->local, h->local_rank ^ (1 << k), buf, count, esz, c->rank, k, 1, dtype, op)))
            return local_failed(c, st, "the all-gather");
    return st;
}

int ddl__hier_allreduce(ddl_comm *c, void *buf, size_t count, int dtype, int op)
{
    struct ddl__hier *h = c->hier;
    ddl_comm *l = h->local;
    int L = h->n_local, H = h->n_hosts, st;
    size_t esz = ddl__dtype_bytes(dtype);
    if ((st = ddl__comm_begin(l, DDL__OP_ALLREDUCE, dtype, op, count, 0)) != DDL_OK)
        return local_failed(c, st, "the reduce-scatter");
    if (h->tree)
        return tree(c, buf, count, esz, dtype, op);
    if ((st = local_half(l, buf, count, esz, dtype, op, 0)) != DDL_OK)
        return local_failed(c, st, "the reduce-scatter");
    /* across hosts: the ring's two halves over the H ranks of local rank i, on segment i + 1 */
    ddl__seg seg = ddl__ring_segment(count, L, (h->local_rank + 1) % L);
    int p = h->host;
    for (int s = 0; s < H - 1; s++)
        if ((st = col_exchange(c, h, buf, esz, (uint32_t)s, sub(seg, H, (p - s + H) % H),
                               sub(seg, H, (p - s - 1 + 2 * H) % H), dtype, op, 1)) != DDL_OK)
            return st;
    for (int s = 0; s < H - 1; s++)
        if ((st = col_exchange(c, h, buf, esz, (uint32_t)(H + s), sub(seg, H, (p + 1 - s + H) % H),
                               sub(seg, H, (p - s + H) % H), dtype, op, 0)) != DDL_OK)
            return st;
    if ((st = local_half(l, buf, count, esz, dtype, op, 1)) != DDL_OK)
        return local_failed(c, st, "the all-gather");
    return DDL_OK;
}
