/* halving.c - the large all-reduce of a power-of-two world: recursive halving (a reduce-scatter
 * in log2 n levels: at level k every rank exchanges half of what it holds with the rank whose
 * number differs in bit k, and keeps the sum of the other half), then recursive doubling (the
 * all-gather, levels in reverse). Rabenseifner's algorithm: each rank sends and receives
 * 2 (n - 1) / n of the vector, as around a ring, in 2 log2 n steps instead of 2 (n - 1).
 *
 * The order of additions is a tree over the ranks, neighbours first, the same for every element:
 *     ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7))
 * (lower ranks' value on the left), which is also the order of recursive doubling (small
 * vectors) and of the posted all-reduce (collectives.c), of the two-level all-reduce on hosts of
 * 2^a ranks (hier.c) and of virtual shards (shards.c): in a power-of-two world every path, every
 * size and every transport adds alike. Its subtrees are blocks of consecutive ranks, so hosts of
 * 2^a consecutive ranks sum their own block in the first a levels, which never leave the host;
 * the other levels cross the network with 1/2^a of the vector per rank: the two-level
 * all-reduce's traffic, without knowing the hosts.
 * Owns the halving's ranges and one level's exchange. Must not allocate (the comm's scratch
 * holds what arrives) or depend on timing. */
#include "impl.h"

int ddl__pow2(int n) { return n >= 1 && (n & (n - 1)) == 0; }

int ddl__halving_levels(int n)
{
    int m = 0;
    while ((1 << m) < n)
        m++;
    return m;
}

ddl__seg ddl__halving_range(size_t count, int v, int levels)
{
    size_t lo = 0, hi = count;
    for (int k = 0; k < levels; k++) {
        size_t mid = lo + (hi - lo + 1) / 2; /* the lower half one longer */
        if ((v >> k) & 1)
            lo = mid;
        else
            hi = mid;
    }
    ddl__seg s = {lo, hi - lo};
    return s;
}

int ddl__halving_step(ddl_comm *c, int peer, unsigned char *buf, size_t count, size_t esz, int v, int k, int gather,
                      int dtype, int op)
{
    int w = v ^ (1 << k);
    /* reduce-scatter: send the half w keeps, receive w's copy of the half v keeps and add it,
     * the lower index's value first; all-gather: send what v holds, receive what w holds */
    ddl__seg mine = ddl__halving_range(count, v, k + 1), theirs = ddl__halving_range(count, w, k + 1);
    if (gather)
        return ddl__ring_exchange_with(c, peer, peer, buf, buf, esz, (uint32_t)(64 + k), mine, theirs, dtype, op, 0);
    return ddl__ring_exchange_with(c, peer, peer, buf, buf, esz, (uint32_t)k, theirs, mine, dtype, op,
                                   v < w ? DDL__MINE_FIRST : 1);
}

int ddl__halving_allreduce(ddl_comm *c, void *buf, size_t count, int dtype, int op)
{
    int r = c->rank, levels = ddl__halving_levels(c->world), st = DDL_OK;
    size_t esz = ddl__dtype_bytes(dtype);
    for (int k = 0; k < levels && st == DDL_OK; k++)
        st = ddl__halving_step(c, r ^ (1 << k), buf, count, esz, r, k, 0, dtype, op);
    for (int k = levels - 1; k >= 0 && st == DDL_OK; k--)
        st = ddl__halving_step(c, r ^ (1 << k), buf, count, esz, r, k, 1, dtype, op);
    return st;
}
