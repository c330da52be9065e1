/* collectives.c - allreduce, broadcast, allgather and barrier, written once on top of the
 * point-to-point exchange of any transport (through ddl__comm_xchg in comm.c).
 * The reduction order is fixed by world size and count alone, never by timing, so results are
 * bit-identical across runs, ranks and transports. It must not allocate: the only scratch is
 * the comm's DDL__SCRATCH_BYTES buffer sized at create time. */
#include "impl.h"

#include <string.h>

/* Messages up to this many bytes use latency-optimal algorithms (recursive doubling, binomial
 * tree); larger ones the bandwidth-optimal ring / pipelined chain. Must be <= scratch. */
#define SMALL_BYTES ((size_t)64 << 10)
/* Largest piece of one exchange in the ring algorithms (ring.c's too). */
#define PIECE_BYTES DDL__SCRATCH_BYTES
#define BCAST_PIECE_BYTES ((size_t)256 << 10)

static void finish_mean(float *buf, size_t n, int world)
{
    float w = (float)world;
    for (size_t i = 0; i < n; i++)
        buf[i] /= w;
}

/* ---- allreduce: recursive doubling (small) ----
 * n = p + rem with p a power of two. Ranks below 2 rem pair up first: the even one hands its
 * vector to the odd one and waits for the result. Then p ranks do log2(p) exchanges. Every
 * combination is op(lower ranks' value, higher ranks' value), the same on both sides. */

static int real_rank(int vr, int rem) { return vr < rem ? 2 * vr + 1 : vr + rem; }

static int allreduce_rd(ddl_comm *c, void *buf, size_t count, int dtype, int op)
{
    int n = c->world, r = c->rank, p = 1, st;
    size_t esz = ddl__dtype_bytes(dtype), bytes = count * esz;
    while (p * 2 <= n)
        p *= 2;
    int rem = n - p, vr;
    uint32_t step = 0;
    if (r < 2 * rem) {
        if (r % 2 == 0) { /* hand over, then wait for the result */
            if ((st = ddl__comm_xchg(c, r + 1, 0, buf, bytes, -1, 0, NULL, 0)) != DDL_OK)
                return st;
            return ddl__comm_xchg(c, -1, 0, NULL, 0, r + 1, 1000, buf, bytes);
        }
        const void *in;
        if ((st = ddl__comm_xchg_in(c, -1, 0, NULL, 0, r - 1, 0, bytes, esz, c->scratch, &in)) != DDL_OK)
            return st;
        ddl__reduce(buf, in, buf, count, dtype, op);
        vr = r / 2;
    } else {
        vr = r - rem;
    }
    for (int mask = 1; mask < p; mask <<= 1) {
        int vp = vr ^ mask, peer = real_rank(vp, rem);
        step++;
        const void *in;
        if ((st = ddl__comm_xchg_in(c, peer, step, buf, bytes, peer, step, bytes, esz, c->scratch, &in)) != DDL_OK)
            return st;
        if (vr < vp)
            ddl__reduce(buf, buf, in, count, dtype, op);
        else
            ddl__reduce(buf, in, buf, count, dtype, op);
    }
    if (r < 2 * rem)
        return ddl__comm_xchg(c, r - 1, 1000, buf, bytes, -1, 0, NULL, 0);
    return DDL_OK;
}

/* ---- allreduce: posted (small, ranks sharing memory) ----
 * Every rank posts its vector and reads everyone's in place, then combines them in the order
 * of recursive doubling above (pairs below 2 rem first, then a binary tree over the p
 * survivors, lower ranks' value first), so the result is bit for bit the one allreduce_rd
 * gives. Partial results go to scratch, the last combination into buf. */

static int allreduce_posted(ddl_comm *c, void *buf, size_t count, int dtype, int op)
{
    int n = c->world, p = 1;
    size_t bytes = count * ddl__dtype_bytes(dtype);
    const void *v[DDL__MAX_POST_RANKS]; /* v[r]: rank r's value, then partial results */
    int st = ddl__comm_post(c, buf, bytes, v);
    if (st != DDL_OK)
        return st;
    while (p * 2 <= n)
        p *= 2;
    int rem = n - p;
    for (int r = 1; r < 2 * rem; r += 2) {
        unsigned char *dst = c->scratch + (size_t)r * bytes;
        ddl__reduce(dst, v[r - 1], v[r], count, dtype, op);
        v[r] = dst;
    }
    for (int mask = 1; mask < p; mask <<= 1)
        for (int vr = 0; vr + mask < p; vr += 2 * mask) {
            int lo = real_rank(vr, rem), hi = real_rank(vr + mask, rem);
            unsigned char *dst = 2 * mask == p ? (unsigned char *)buf : c->scratch + (size_t)lo * bytes;
            ddl__reduce(dst, v[lo], v[hi], count, dtype, op);
            v[lo] = dst;
        }
    return DDL_OK; /* n >= 2, so p >= 2 and the last combination went into buf */
}

/* ---- allreduce: ring (large) ----
 * The vector is cut into n segments (the first count % n one element longer). Reduce-scatter:
 * in step s rank r sends its partial of segment (r - s) to r + 1 and adds the partial of
 * segment (r - s - 1) from r - 1, piece by piece, so after n - 1 steps it holds segment r + 1
 * fully reduced. All-gather passes the reduced segments around the ring the same way. */

/* ring_step: send segment sseg to the right, receive segment rseg from the left; with reduce,
 * the received piece is read where the transport holds it (or from scratch) and combined into
 * buf, else it lands straight in buf. */
static int ring_step(ddl_comm *c, unsigned char *buf, size_t esz, uint32_t s, ddl__seg ss, ddl__seg rs, int dtype,
                     int op, int do_reduce)
{
    return ddl__ring_exchange(c, buf, buf, esz, s, ss, rs, dtype, op, do_reduce);
}

static int allreduce_ring(ddl_comm *c, void *buf, size_t count, int dtype, int op)
{
    int n = c->world, r = c->rank;
    size_t esz = ddl__dtype_bytes(dtype);
    for (int s = 0; s < n - 1; s++) {
        ddl__seg ss = ddl__ring_segment(count, n, (r - s + n) % n);
        ddl__seg rs = ddl__ring_segment(count, n, (r - s - 1 + 2 * n) % n);
        int st = ring_step(c, buf, esz, (uint32_t)s, ss, rs, dtype, op, 1);
        if (st != DDL_OK)
            return st;
    }
    for (int s = 0; s < n - 1; s++) {
        ddl__seg ss = ddl__ring_segment(count, n, (r + 1 - s + n) % n);
        ddl__seg rs = ddl__ring_segment(count, n, (r - s + n) % n);
        int st = ring_step(c, buf, esz, (uint32_t)(n + s), ss, rs, dtype, op, 0);
        if (st != DDL_OK)
            return st;
    }
    return DDL_OK;
}

/* ---- allreduce: parameter server (DDL_ALGO=ps) ----
 * Rank 0 is the server: piece by piece, it receives every other rank's piece in rank order and
 * adds it to its own (((x0 + x1) + x2) + ...), then sends the sum to every rank in rank order.
 * Its link carries (n - 1) vectors each way: the cost the ring spreads over n links. */

static int allreduce_ps(ddl_comm *c, unsigned char *buf, size_t count, int dtype, int op)
{
    size_t esz = ddl__dtype_bytes(dtype), per = PIECE_BYTES / esz;
    uint32_t step = 0;
    for (size_t off = 0; off < count; off += per, step += 2) {
        size_t len = count - off < per ? count - off : per, bytes = len * esz;
        unsigned char *p = buf + off * esz;
        int st = DDL_OK;
        if (c->rank == 0) {
            for (int r = 1; r < c->world && st == DDL_OK; r++) {
                const void *in;
                st = ddl__comm_xchg_in(c, -1, 0, NULL, 0, r, step, bytes, esz, c->scratch, &in);
                if (st == DDL_OK)
                    ddl__reduce(p, p, in, len, dtype, op);
            }
            for (int r = 1; r < c->world && st == DDL_OK; r++)
                st = ddl__comm_xchg(c, r, step + 1, p, bytes, -1, 0, NULL, 0);
        } else {
            st = ddl__comm_xchg(c, 0, step, p, bytes, 0, step + 1, p, bytes);
        }
        if (st != DDL_OK)
            return st;
    }
    return DDL_OK;
}

static int allreduce(ddl_comm *c, void *buf, size_t count, int dtype, int op)
{
    int st = ddl__comm_check_args(c, buf, count, dtype, "allreduce");
    if (st)
        return st;
    if (op != DDL_SUM && op != DDL_MEAN && op != DDL_MAX) {
        snprintf(c->err, sizeof c->err, "allreduce: op %d is not DDL_SUM, DDL_MEAN or DDL_MAX", op);
        return DDL_EINVAL;
    }
    if (op == DDL_MEAN && dtype != DDL_FLOAT32) {
        snprintf(c->err, sizeof c->err, "allreduce: DDL_MEAN is only for DDL_FLOAT32");
        return DDL_EINVAL;
    }
    if ((st = ddl__comm_begin(c, DDL__OP_ALLREDUCE, dtype, op, count, 0)) != DDL_OK)
        return st;
    if (c->world == 1 || count == 0)
        return DDL_OK;
    int sum_op = op == DDL_MEAN ? DDL_SUM : op;
    if (c->native && dtype == DDL_FLOAT32 && sum_op == DDL_SUM) {
        st = ddl__tp_allreduce(c, buf, count);
        if (st != DDL_OK && ddl__comm_stalled(c) != DDL_OK)
            return c->status;
        if (st != DDL_OK) {
            const char *e = ddl__tp_error(c);
            return ddl__comm_fail(c, st, "native allreduce #%u of %zu float32: %s", c->cur.seq, count,
                                  e[0] ? e : ddl_strerror(st));
        }
    } else if (ddl__comm_can_post(c, count * ddl__dtype_bytes(dtype))) {
        st = allreduce_posted(c, buf, count, dtype, sum_op);
    } else if (ddl__hier_fits(c, count, dtype)) { /* ranks share hosts: hier.c */
        st = ddl__hier_allreduce(c, buf, count, dtype, sum_op);
    } else if (count * ddl__dtype_bytes(dtype) <= SMALL_BYTES || count < (size_t)c->world) {
        st = allreduce_rd(c, buf, count, dtype, sum_op);
    } else if (c->algo == DDL_ALGO_PS) {
        st = allreduce_ps(c, buf, count, dtype, sum_op);
    } else if (c->algo != DDL_ALGO_RING && ddl__pow2(c->world)) { /* the tree order: halving.c */
        st = ddl__halving_allreduce(c, buf, count, dtype, sum_op);
    } else {
        st = allreduce_ring(c, buf, count, dtype, sum_op);
    }
    if (st == DDL_OK && op == DDL_MEAN)
        finish_mean(buf, count, c->world);
    return st;
}

/* ---- broadcast ----
 * Small: binomial tree from the root (log2 n hops). Large: a chain root -> root+1 -> ...
 * pipelined in pieces, each rank forwarding piece j - 1 while it receives piece j. */

static int bcast_tree(ddl_comm *c, unsigned char *buf, size_t bytes, int root)
{
    int n = c->world, vr = (c->rank - root + n) % n, mask = 1, st;
    while (mask < n) {
        if (vr & mask) {
            int from = (vr - mask + root) % n;
            if ((st = ddl__comm_xchg(c, -1, 0, NULL, 0, from, (uint32_t)mask, buf, bytes)) != DDL_OK)
                return st;
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1) {
        if (vr + mask < n) {
            int to = (vr + mask + root) % n;
            if ((st = ddl__comm_xchg(c, to, (uint32_t)mask, buf, bytes, -1, 0, NULL, 0)) != DDL_OK)
                return st;
        }
    }
    return DDL_OK;
}

static size_t piece_len(size_t bytes, size_t j)
{
    size_t o = j * BCAST_PIECE_BYTES;
    return bytes - o < BCAST_PIECE_BYTES ? bytes - o : BCAST_PIECE_BYTES;
}

static int bcast_chain(ddl_comm *c, unsigned char *buf, size_t bytes, int root)
{
    int n = c->world, pos = (c->rank - root + n) % n;
    int next = pos < n - 1 ? (c->rank + 1) % n : -1, prev = pos > 0 ? (c->rank + n - 1) % n : -1;
    size_t np = ddl__n_pieces(bytes, BCAST_PIECE_BYTES);
    /* in round t every rank forwards piece t - 1 (the root: piece t) and receives piece t; the
     * step in a header is its piece number */
    for (size_t t = 0; t <= np; t++) {
        size_t sp = prev < 0 ? t : t - 1;
        int to = next >= 0 && sp < np && (prev < 0 || t >= 1) ? next : -1;
        int from = prev >= 0 && t < np ? prev : -1;
        if (to < 0 && from < 0)
            continue;
        int st = ddl__comm_xchg(c, to, (uint32_t)sp, to >= 0 ? buf + sp * BCAST_PIECE_BYTES : NULL,
                                to >= 0 ? piece_len(bytes, sp) : 0, from, (uint32_t)t,
                                from >= 0 ? buf + t * BCAST_PIECE_BYTES : NULL, from >= 0 ? piece_len(bytes, t) : 0);
        if (st != DDL_OK)
            return st;
    }
    return DDL_OK;
}

static int broadcast(ddl_comm *c, void *buf, size_t count, int dtype, int root)
{
    int st = ddl__comm_check_args(c, buf, count, dtype, "broadcast");
    if (st)
        return st;
    if (root < 0 || root >= c->world) {
        snprintf(c->err, sizeof c->err, "broadcast: root %d is not a rank of %d", root, c->world);
        return DDL_EINVAL;
    }
    if ((st = ddl__comm_begin(c, DDL__OP_BROADCAST, dtype, 0, count, root)) != DDL_OK)
        return st;
    if (c->world == 1 || count == 0)
        return DDL_OK;
    size_t bytes = count * ddl__dtype_bytes(dtype);
    return bytes <= SMALL_BYTES ? bcast_tree(c, buf, bytes, root) : bcast_chain(c, buf, bytes, root);
}

/* ---- allgather: ring; in step s rank r passes on block (r - s) and receives block (r - s - 1) ---- */

static int allgather(ddl_comm *c, const void *send, void *recv, size_t count, int dtype)
{
    int st = ddl__comm_check_args(c, send, count, dtype, "allgather");
    if (st)
        return st;
    if (count && !recv) {
        snprintf(c->err, sizeof c->err, "allgather: recv is NULL");
        return DDL_EINVAL;
    }
    if ((st = ddl__comm_begin(c, DDL__OP_ALLGATHER, dtype, 0, count, 0)) != DDL_OK)
        return st;
    if (count == 0)
        return DDL_OK;
    int n = c->world, r = c->rank;
    size_t esz = ddl__dtype_bytes(dtype);
    unsigned char *out = recv;
    memmove(out + (size_t)r * count * esz, send, count * esz);
    if (ddl__comm_can_post(c, count * esz)) {
        const void *v[DDL__MAX_POST_RANKS];
        if ((st = ddl__comm_post(c, out + (size_t)r * count * esz, count * esz, v)) != DDL_OK)
            return st;
        for (int k = 0; k < n; k++)
            if (k != r)
                memcpy(out + (size_t)k * count * esz, v[k], count * esz);
        return DDL_OK;
    }
    for (int s = 0; s < n - 1; s++) {
        ddl__seg ss = {(size_t)((r - s + n) % n) * count, count};
        ddl__seg rs = {(size_t)((r - s - 1 + 2 * n) % n) * count, count};
        if ((st = ring_step(c, out, esz, (uint32_t)s, ss, rs, dtype, 0, 0)) != DDL_OK)
            return st;
    }
    return DDL_OK;
}

/* ---- barrier: dissemination, ceil(log2 n) rounds of empty messages ---- */

static int barrier(ddl_comm *c)
{
    int st = ddl__comm_begin(c, DDL__OP_BARRIER, 0, 0, 0, 0);
    if (st)
        return st;
    int n = c->world;
    if (ddl__comm_can_post(c, 0)) {
        const void *v[DDL__MAX_POST_RANKS];
        return ddl__comm_post(c, NULL, 0, v);
    }
    for (int k = 1; k < n; k <<= 1) {
        st = ddl__comm_xchg(c, (c->rank + k) % n, (uint32_t)k, NULL, 0, (c->rank - k + n) % n, (uint32_t)k, NULL, 0);
        if (st != DDL_OK)
            return st;
    }
    return DDL_OK;
}

/* ---- the public calls: each the outermost call an elastic comm may keep or replay (replay.c) ---- */

int ddl_comm_allreduce(ddl_comm *c, void *buf, size_t count, int dtype, int op)
{
    ddl__call k = {DDL__OP_ALLREDUCE, dtype, op, (uint64_t)count, 0, 0};
    size_t bytes = count * ddl__dtype_bytes(dtype);
    if (ddl__call_enter(c, &k, buf, bytes))
        return DDL_OK;
    return ddl__call_leave(c, &k, allreduce(c, buf, count, dtype, op), buf, bytes);
}

int ddl_comm_broadcast(ddl_comm *c, void *buf, size_t count, int dtype, int root)
{
    ddl__call k = {DDL__OP_BROADCAST, dtype, 0, (uint64_t)count, 0, 0}; /* roots are renumbered: not compared */
    size_t bytes = count * ddl__dtype_bytes(dtype);
    if (ddl__call_enter(c, &k, buf, bytes))
        return DDL_OK;
    return ddl__call_leave(c, &k, broadcast(c, buf, count, dtype, root), buf, bytes);
}

int ddl_comm_allgather(ddl_comm *c, const void *send, void *recv, size_t count, int dtype)
{
    ddl__call k = {DDL__OP_ALLGATHER, dtype, 0, (uint64_t)count, 0, 0};
    size_t bytes = (size_t)(c ? c->world : 1) * count * ddl__dtype_bytes(dtype); /* at this world size only */
    if (ddl__call_enter(c, &k, recv, bytes))
        return DDL_OK;
    return ddl__call_leave(c, &k, allgather(c, send, recv, count, dtype), recv, bytes);
}

int ddl_comm_barrier(ddl_comm *c)
{
    /* never kept (SIZE_MAX: no result to keep): a barrier after a regroup starts a sequence that
     * every rank runs from its beginning (the trainer's state transfer), whatever it missed */
    ddl__call k = {DDL__OP_BARRIER, 0, 0, 0, 0, 0};
    if (ddl__call_enter(c, &k, NULL, SIZE_MAX))
        return DDL_OK;
    return ddl__call_leave(c, &k, barrier(c), NULL, SIZE_MAX);
}
