/* shards.c - the all-reduce of virtual shards (elastic training's fixed global batch): V vectors,
 * dealt to the ranks in contiguous blocks in rank order, summed so that every element is added
 * in the order a world of V ranks adds it, whoever holds which shards: with V a power of two, the
 * tree of halving.c (virtual ranks paired neighbours first; a pair on one rank adds in memory, a
 * pair across ranks goes over the network as halving.c's step), else a ring of V. The ring is run
 * as V virtual ranks: a rank plays its block's virtual ranks, moving segments between them in
 * memory and across the network only at the block's ends, one segment per step each way (the
 * bytes on a link are those of a ring of V: 2 (V - 1) / V of a vector). So a change of
 * membership moves shards, not bits: 1, 2 or V ranks holding the same V shards give the same
 * sums, and those of a plain all-reduce of V ranks (collectives.c adds in the same orders).
 * Owns: checking that the blocks tile 0..V-1 in rank order (every rank learns of a bad dealing),
 * the table of who holds which block, and the virtual ring and tree. Must not: allocate (it works
 * in the callers' vectors and the comm's scratch), or depend on timing. */
#include "impl.h"

#include <stdio.h>
#include <string.h>

/* mod: i modulo V, in 0..V-1. */
static int mod(int i, int V) { return ((i % V) + V) % V; }

/* check_dealing: whether this rank's block [first, first + n) follows its left neighbour's (rank
 * 0's starts at 0, the last rank's ends at total) into *bad; DDL_OK or the comm's error. */
static int check_dealing(ddl_comm *c, int first, int n, int total, int64_t *bad)
{
    *bad = first < 0 || n < 1 || first + n > total;
    if (c->world == 1) {
        *bad |= first != 0 || n != total;
        return DDL_OK;
    }
    int64_t mine[3] = {first, n, total}, left[3] = {0, 0, 0};
    int st = ddl__comm_xchg(c, (c->rank + 1) % c->world, 0, mine, sizeof mine, (c->rank + c->world - 1) % c->world, 0,
                            left, sizeof left);
    *bad |= left[2] != total || (c->rank == 0 ? first != 0 || left[0] + left[1] != total : left[0] + left[1] != first);
    return st;
}

/* virtual_ring: the ring of V virtual ranks over this rank's block [a, a + n) of bufs; the
 * network (c, 2 ranks or more) only at the block's ends. */
static int virtual_ring(ddl_comm *c, float *const *bufs, int a, int n, int V, size_t count)
{
    int b = a + n, net = c && c->world > 1, st;
    size_t esz = sizeof(float);
    /* reduce-scatter: in step s virtual rank v sends its partial of segment v - s to v + 1, which
     * adds it in front of its own (received + own, as the ring does) */
    for (int s = 0; s < V - 1; s++) {
        if (net) {
            ddl__seg ss = ddl__ring_segment(count, V, mod(b - 1 - s, V)), rs = ddl__ring_segment(count, V, mod(a - s - 1, V));
            st = ddl__ring_exchange(c, (const unsigned char *)bufs[n - 1], (unsigned char *)bufs[0], esz, (uint32_t)s, ss,
                                    rs, DDL_FLOAT32, DDL_SUM, 1);
            if (st != DDL_OK)
                return st;
        }
        for (int v = net ? a + 1 : a; v < b; v++) { /* one rank: virtual rank 0 hears from V - 1 too */
            ddl__seg g = ddl__ring_segment(count, V, mod(v - 1 - s, V));
            const float *from = bufs[mod(v - 1 - a, n)] + g.off;
            float *to = bufs[v - a] + g.off;
            ddl__reduce(to, from, to, g.len, DDL_FLOAT32, DDL_SUM);
        }
    }
    /* all-gather: in step s virtual rank v passes the reduced segment v + 1 - s to v + 1 */
    for (int s = 0; s < V - 1; s++) {
        if (net) {
            ddl__seg ss = ddl__ring_segment(count, V, mod(b - s, V)), rs = ddl__ring_segment(count, V, mod(a - s, V));
            st = ddl__ring_exchange(c, (const unsigned char *)bufs[n - 1], (unsigned char *)bufs[0], esz,
                                    (uint32_t)(V + s), ss, rs, DDL_FLOAT32, DDL_SUM, 0);
            if (st != DDL_OK)
                return st;
        }
        for (int v = net ? a + 1 : a; v < b; v++) {
            ddl__seg g = ddl__ring_segment(count, V, mod(v - s, V));
            memcpy(bufs[v - a] + g.off, bufs[mod(v - 1 - a, n)] + g.off, g.len * sizeof(float));
        }
    }
    return DDL_OK;
}

/* owner: the rank whose block holds virtual rank v (c->shard_firsts, in rank order). */
static int owner(const ddl_comm *c, int v)
{
    int r = c->world - 1;
    while (r > 0 && c->shard_firsts[r] > v)
        r--;
    return r;
}

/* virtual_tree: the tree order over V = 2^L virtual ranks (halving.c), this rank playing its
 * block [a, a + n) of bufs; the network (c, 2 ranks or more) for pairs across ranks. Every rank
 * takes the pairs of a level in order of their lower member, so two ranks meet in the same order
 * and no wait goes round in a circle. */
static int virtual_tree(ddl_comm *c, float *const *bufs, int a, int n, int V, size_t count)
{
    int b = a + n, levels = ddl__halving_levels(V), st = DDL_OK;
    for (int pass = 0; pass < 2; pass++) /* the reduce-scatter, then the all-gather */
        for (int i = 0; i < levels; i++) {
            int k = pass ? levels - 1 - i : i, m = 1 << k;
            for (int lo = a - m > 0 ? a - m : 0; lo < b && st == DDL_OK; lo++) {
                int hi = lo | m, has_lo = lo >= a, has_hi = hi >= a && hi < b;
                if ((lo & m) || hi >= V || (!has_lo && !has_hi))
                    continue;
                if (has_lo && !has_hi) {
                    st = ddl__halving_step(c, owner(c, hi), (unsigned char *)bufs[lo - a], count, sizeof(float), lo, k,
                                           pass, DDL_FLOAT32, DDL_SUM);
                } else if (!has_lo && has_hi) {
                    st = ddl__halving_step(c, owner(c, lo), (unsigned char *)bufs[hi - a], count, sizeof(float), hi, k,
                                           pass, DDL_FLOAT32, DDL_SUM);
                } else { /* both here: the lower one's value on the left */
                    float *x = bufs[lo - a], *y = bufs[hi - a];
                    ddl__seg gl = ddl__halving_range(count, lo, k + 1), gh = ddl__halving_range(count, hi, k + 1);
                    if (pass) {
                        memcpy(x + gh.off, y + gh.off, gh.len * sizeof(float));
                        memcpy(y + gl.off, x + gl.off, gl.len * sizeof(float));
                    } else {
                        ddl__reduce(x + gl.off, x + gl.off, y + gl.off, gl.len, DDL_FLOAT32, DDL_SUM);
                        ddl__reduce(y + gh.off, x + gh.off, y + gh.off, gh.len, DDL_FLOAT32, DDL_SUM);
                    }
                }
            }
        }
    return st;
}

/* add_up: the sums, by the tree (V a power of two) or the ring. */
static int add_up(ddl_comm *c, float *const *bufs, int a, int n, int V, size_t count)
{
    return ddl__pow2(V) ? virtual_tree(c && c->world > 1 ? c : NULL, bufs, a, n, V, count)
                        : virtual_ring(c, bufs, a, n, V, count);
}

static int allreduce_shards(ddl_comm *c, float *const *bufs, int first, int n, int total, size_t count)
{
    if (!c) /* one process: it holds every shard */
        return first == 0 && n == total && total >= 1 && total <= DDL_MAX_SHARDS && bufs
                   ? add_up(NULL, bufs, 0, n, total, count)
                   : DDL_EINVAL;
    int st = ddl__comm_check_args(c, n > 0 && bufs ? bufs[0] : NULL, count, DDL_FLOAT32, "allreduce_shards");
    if (st)
        return st;
    if (n < 1 || total < 1 || total > DDL_MAX_SHARDS || !bufs) {
        snprintf(c->err, sizeof c->err, "allreduce_shards: %d shards of %d: need 1 to %d of 1 to %d", n, total,
                 total, DDL_MAX_SHARDS);
        return DDL_EINVAL;
    }
    for (int i = 0; i < n; i++)
        if (!bufs[i] && count) {
            snprintf(c->err, sizeof c->err, "allreduce_shards: shard %d's vector is NULL", first + i);
            return DDL_EINVAL;
        }
    if (c->shards_dealt[0] == first && c->shards_dealt[1] == n && c->shards_dealt[2] == total)
        return ddl__comm_begin(c, DDL__OP_ALLREDUCE, DDL_FLOAT32, DDL_SUM, count, total) != DDL_OK
                   ? c->status
                   : add_up(c, bufs, first, n, total, count);
    if ((st = ddl__comm_begin(c, DDL__OP_ALLREDUCE, DDL_FLOAT32, DDL_SUM, count, total)) != DDL_OK)
        return st;
    int64_t bad = 0;
    if ((st = check_dealing(c, first, n, total, &bad)) != DDL_OK)
        return st;
    if (c->world > 1 && (st = ddl_comm_allreduce(c, &bad, 1, DDL_INT64, DDL_MAX)) != DDL_OK)
        return st;
    if (bad) {
        snprintf(c->err, sizeof c->err, "allreduce_shards: the ranks' blocks of shards do not tile 0..%d in rank "
                 "order (this rank: %d to %d)", total - 1, first, first + n - 1);
        return DDL_EINVAL;
    }
    int64_t mine = first; /* the tree needs to know who holds each block */
    if (c->world > 1 && ddl__pow2(total) && (st = ddl_comm_allgather(c, &mine, c->shard_firsts, 1, DDL_INT64)) != DDL_OK)
        return st;
    if ((st = ddl__comm_begin(c, DDL__OP_ALLREDUCE, DDL_FLOAT32, DDL_SUM, count, total)) != DDL_OK)
        return st;
    c->shards_dealt[0] = first, c->shards_dealt[1] = n, c->shards_dealt[2] = total;
    return add_up(c, bufs, first, n, total, count);
}

int ddl_comm_allreduce_shards(ddl_comm *c, float *const *bufs, int first, int n, int total, size_t count)
{
    /* counted as a call an elastic comm completed, never kept (replay.c): a rank that missed it
     * takes the trainer leader's state instead */
    ddl__call k = {DDL__OP_ALLREDUCE, DDL_FLOAT32, DDL__REDOP_SHARDS, (uint64_t)count, 0, 0};
    if (ddl__call_enter(c, &k, NULL, SIZE_MAX))
        return DDL_OK;
    int st = DDL_OK;
    if (c && c->elastic_min) { /* a step's all-reduce: where a joiner comes in (join.c) */
        atomic_store(&c->hb.admitting, 1);
        int64_t heard = atomic_load(&c->hb.join_heard_ms);
        if (heard && ddl__now_ms() - heard < DDL__JOIN_FRESH_MS && c->status == DDL_OK)
            st = ddl__comm_fail(c, DDL_EPEER, "a replacement for rank slot %d asks to join (noticed by rank %d)",
                                atomic_load(&c->hb.join_heard_slot), c->rank);
    }
    if (st == DDL_OK)
        st = allreduce_shards(c, bufs, first, n, total, count);
    if (c && c->elastic_min)
        atomic_store(&c->hb.admitting, 0);
    return ddl__call_leave(c, &k, st, NULL, SIZE_MAX);
}
