/* ring.c - the collectives' primitives, which every algorithm (collectives.c, halving.c, hier.c,
 * shards.c, compress.c) is written over: the element-wise reduction, the argument check, a ring's
 * segments and one exchange of segments with two neighbours, piece by piece through the comm's
 * scratch. They call only the links below them (comm.c's ddl__comm_xchg), never an algorithm. */
#include "impl.h"

#include <math.h>
#include <string.h>

/* Largest piece of one exchange in the ring and chain algorithms. */
#define PIECE_BYTES DDL__SCRATCH_BYTES

/* ---- element-wise reduction ---- */

/* ddl__reduce: dst[i] = a[i] op b[i] (dst may alias a or b). The order of a and b is fixed by the
 * caller; max propagates NaN from either side. */
void ddl__reduce(void *dst, const void *a, const void *b, size_t n, int dtype, int op)
{
    if (dtype == DDL_FLOAT32) {
        float *d = dst;
        const float *x = a, *y = b;
        if (op == DDL_MAX) {
            for (size_t i = 0; i < n; i++)
                d[i] = (x[i] > y[i] || isnan(x[i])) ? x[i] : y[i];
        } else {
            for (size_t i = 0; i < n; i++)
                d[i] = x[i] + y[i];
        }
    } else {
        int64_t *d = dst;
        const int64_t *x = a, *y = b;
        if (op == DDL_MAX) {
            for (size_t i = 0; i < n; i++)
                d[i] = x[i] > y[i] ? x[i] : y[i];
        } else { /* wrap around on overflow, without undefined behaviour */
            for (size_t i = 0; i < n; i++)
                d[i] = (int64_t)((uint64_t)x[i] + (uint64_t)y[i]);
        }
    }
}

int ddl__comm_check_args(ddl_comm *c, const void *buf, size_t count, int dtype, const char *what)
{
    if (!c)
        return DDL_EINVAL;
    if (c->status != DDL_OK)
        return c->status;
    if (ddl__dtype_bytes(dtype) == 0 || (count && !buf)) {
        snprintf(c->err, sizeof c->err, "%s: dtype %d is not DDL_FLOAT32 or DDL_INT64, or buf is NULL", what,
                 dtype);
        return DDL_EINVAL;
    }
    if (count > (size_t)1 << 58) {
        snprintf(c->err, sizeof c->err, "%s: count %zu is too large", what, count);
        return DDL_EINVAL;
    }
    return DDL_OK;
}

ddl__seg ddl__ring_segment(size_t count, int n, int i)
{
    size_t q = count / (size_t)n, m = count % (size_t)n, k = (size_t)i;
    ddl__seg s = {k * q + (k < m ? k : m), q + (k < m ? 1 : 0)};
    return s;
}

int ddl__ring_exchange(ddl_comm *c, const unsigned char *sbuf, unsigned char *buf, size_t esz, uint32_t s, ddl__seg ss,
                       ddl__seg rs, int dtype, int op, int do_reduce)
{
    int n = c->world;
    return ddl__ring_exchange_with(c, (c->rank + 1) % n, (c->rank + n - 1) % n, sbuf, buf, esz, s, ss, rs, dtype, op,
                                   do_reduce);
}

int ddl__ring_exchange_with(ddl_comm *c, int right, int left, const unsigned char *sbuf, unsigned char *buf, size_t esz,
                            uint32_t s, ddl__seg ss, ddl__seg rs, int dtype, int op, int do_reduce)
{
    size_t per = PIECE_BYTES / esz, ps = ddl__n_pieces(ss.len, per), pr = ddl__n_pieces(rs.len, per);
    size_t np = ps > pr ? ps : pr;
    for (size_t j = 0; j < np; j++) {
        size_t so = j * per, ro = j * per;
        size_t sl = j < ps ? (ss.len - so < per ? ss.len - so : per) : 0;
        size_t rl = j < pr ? (rs.len - ro < per ? rs.len - ro : per) : 0;
        unsigned char *rdst = buf + (rs.off + ro) * esz;
        uint32_t step = s << 20 | (uint32_t)(j & 0xfffff);
        const void *in = NULL;
        int to = j < ps ? right : -1, from = j < pr ? left : -1, st;
        if (do_reduce)
            st = ddl__comm_xchg_in(c, to, step, sbuf + (ss.off + so) * esz, sl * esz, from, step, rl * esz, esz,
                                   c->scratch, &in);
        else
            st = ddl__comm_xchg(c, to, step, sbuf + (ss.off + so) * esz, sl * esz, from, step, rdst, rl * esz);
        if (st != DDL_OK)
            return st;
        if (do_reduce == DDL__MINE_FIRST && rl)
            ddl__reduce(rdst, rdst, in, rl, dtype, op);
        else if (do_reduce && rl)
            ddl__reduce(rdst, in, rdst, rl, dtype, op);
    }
    return DDL_OK;
}
