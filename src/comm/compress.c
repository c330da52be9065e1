/* compress.c - ddl_comm_allreduce_compressed: float32 gradients summed across ranks with every
 * message in 16 bits (bf16 or fp16), for links where bandwidth is short.
 *
 * The ring of collectives.c, with 16-bit messages: in the reduce-scatter a rank rounds its partial
 * sum of a segment to 16 bits before sending it, and the receiver adds it to its own in float32
 * (received + own, the order of the float32 ring); the owner of a fully reduced segment rounds
 * it once more and keeps the rounded value, and the all-gather passes rounded values, which 16
 * bits carry exactly. So every rank ends with the same floats, and the order of additions is fixed
 * by world size and count alone.
 *
 * Error feedback: every rounding a rank makes, rank r's value v sent as q, leaves v - q in r's
 * residual for that element; the next call adds the residual to the gradient first. A sum is
 * linear, so the rounding errors of every hop go back into the total on the next step instead of
 * being lost: over many steps the applied gradients sum to the true ones, less what the residuals
 * hold now (at most a few 16-bit roundings of one step's values).
 *
 * Scratch: the comm's scratch buffer, half for the 16-bit piece sent, half for the piece
 * received. No allocation. */
#include "impl.h"

#include <math.h>
#include <string.h>

#define HALF_BYTES (DDL__SCRATCH_BYTES / 2)
#define PIECE_ELEMS (HALF_BYTES / sizeof(uint16_t))
#define FP16_MAX 65504.0f /* the largest finite fp16 */

/* ---- the two 16-bit formats ---- */

static uint16_t bf16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)   /* NaN stays a (quiet) NaN */
        return (uint16_t)(u >> 16 | 0x40);
    uint32_t r = u + 0x7fffu + (u >> 16 & 1); /* round to nearest, ties to even */
    if ((r & 0x7f800000u) == 0x7f800000u && (u & 0x7f800000u) != 0x7f800000u)
        return (uint16_t)((u >> 16 & 0x8000u) | 0x7f7fu); /* a finite value saturates, never inf */
    return (uint16_t)(r >> 16);
}

static float float_of_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* fp16 by hand (C has no portable half type): round to nearest even, finite values saturate at
 * 65504, subnormals kept. */
static uint16_t fp16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t sign = (uint16_t)(u >> 16 & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return sign | 0x7e00u; /* NaN */
    if (a == 0x7f800000u)
        return sign | 0x7c00u; /* inf */
    if (a >= 0x477fe000u)      /* 65504 and above: the largest finite half */
        return sign | 0x7bffu;
    uint32_t q, rem, half;
    if (a < 0x38800000u) {     /* below 2^-14: a subnormal half, q units of 2^-24 */
        if (a <= 0x33000000u)  /* up to 2^-25 (a tie, to even): zero */
            return sign;
        uint32_t e = a >> 23, mant = (a & 0x7fffffu) | 0x800000u, shift = 126 - e;
        q = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    } else {                   /* rebias the exponent (127 -> 15) and drop 13 bits */
        uint32_t r = a - 0x38000000u;
        q = r >> 13, rem = r & 0x1fffu, half = 0x1000u;
    }
    if (rem > half || (rem == half && (q & 1)))
        q++;
    return (uint16_t)(sign | q);
}

static float float_of_fp16(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = h >> 10 & 0x1fu, mant = h & 0x3ffu, u;
    if (e == 0) {              /* zero or subnormal: mant * 2^-24, exact in float */
        float f = (float)mant * 5.9604644775390625e-8f;
        return sign ? -f : f;
    }
    u = sign | (e == 31 ? 0x7f800000u | mant << 13 : (e + 112) << 23 | mant << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t ddl__half_of(int codec, float f) { return codec == DDL_COMPRESS_FP16 ? fp16_of(f) : bf16_of(f); }
float ddl__float_of_half(int codec, uint16_t h)
{
    return codec == DDL_COMPRESS_FP16 ? float_of_fp16(h) : float_of_bf16(h);
}

/* ---- pieces ----
 * encode: q = v rounded to 16 bits (q may be NULL); the rounding error goes to res (may be NULL);
 * with keep, v becomes the rounded value. add_received: dst = received + dst (the order of the
 * float32 ring). copy_received: dst = received. With a compiler that has _Float16, the fp16 loops
 * use it (F16C instructions in the AVX2 and AVX-512 clones, the same rounding as fp16_of: IEEE
 * conversions are exact, so every clone gives the same bits). */

#ifdef __FLT16_MANT_DIG__
__extension__ typedef _Float16 half_t;

DDL__HOT static void encode_fp16(float *v, uint16_t *q, float *res, size_t n, int keep)
{
    for (size_t i = 0; i < n; i++) {
        float f = v[i];
        f = f > FP16_MAX && f != INFINITY ? FP16_MAX : f < -FP16_MAX && f != -INFINITY ? -FP16_MAX : f;
        half_t h = (half_t)f;
        float d = (float)h;
        if (q)
            memcpy(q + i, &h, 2);
        if (res)
            res[i] += v[i] - d;
        if (keep)
            v[i] = d;
    }
}

DDL__HOT static void add_received_fp16(float *dst, const uint16_t *q, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        half_t h;
        memcpy(&h, q + i, 2);
        dst[i] = (float)h + dst[i];
    }
}
#endif

static void encode(int codec, float *v, uint16_t *q, float *res, size_t n, int keep)
{
#ifdef __FLT16_MANT_DIG__
    if (codec == DDL_COMPRESS_FP16) {
        encode_fp16(v, q, res, n, keep);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) {
        uint16_t h = ddl__half_of(codec, v[i]);
        float d = ddl__float_of_half(codec, h);
        if (q)
            q[i] = h;
        if (res)
            res[i] += v[i] - d;
        if (keep)
            v[i] = d;
    }
}

static void add_received(int codec, float *dst, const uint16_t *q, size_t n)
{
#ifdef __FLT16_MANT_DIG__
    if (codec == DDL_COMPRESS_FP16) {
        add_received_fp16(dst, q, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        dst[i] = ddl__float_of_half(codec, q[i]) + dst[i];
}

static void copy_received(int codec, float *dst, const uint16_t *q, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = ddl__float_of_half(codec, q[i]);
}

/* ---- the ring ---- */


static size_t piece(size_t len, size_t j)
{
    return len - j * PIECE_ELEMS < PIECE_ELEMS ? len - j * PIECE_ELEMS : PIECE_ELEMS;
}

/* step: send segment ss rounded (its errors to res), receive segment rs and add it (reduce) or
 * store it, one piece of each at a time. */
static int step(ddl_comm *c, int codec, float *buf, float *res, uint32_t s, ddl__seg ss, ddl__seg rs, int reduce)
{
    int n = c->world, right = (c->rank + 1) % n, left = (c->rank + n - 1) % n;
    uint16_t *sq = (uint16_t *)c->scratch, *rq = (uint16_t *)(c->scratch + HALF_BYTES);
    size_t ps = (ss.len + PIECE_ELEMS - 1) / PIECE_ELEMS, pr = (rs.len + PIECE_ELEMS - 1) / PIECE_ELEMS;
    size_t np = ps > pr ? ps : pr;
    for (size_t j = 0; j < np; j++) {
        size_t sl = j < ps ? piece(ss.len, j) : 0, rl = j < pr ? piece(rs.len, j) : 0;
        size_t so = ss.off + j * PIECE_ELEMS, ro = rs.off + j * PIECE_ELEMS;
        encode(codec, buf + so, sq, res ? res + so : NULL, sl, 0);
        uint32_t tag = s << 20 | (uint32_t)(j & 0xfffff);
        const void *in; /* rq, or the transport's own buffer */
        int st = ddl__comm_xchg_in(c, sl ? right : -1, tag, sq, sl * 2, rl ? left : -1, tag, rl * 2, 2, rq, &in);
        if (st != DDL_OK)
            return st;
        if (reduce)
            add_received(codec, buf + ro, in, rl);
        else
            copy_received(codec, buf + ro, in, rl);
    }
    return DDL_OK;
}

static int ring(ddl_comm *c, int codec, float *buf, size_t count, float *res)
{
    int n = c->world, r = c->rank, st;
    for (int s = 0; s < n - 1; s++)
        if ((st = step(c, codec, buf, res, (uint32_t)s, ddl__ring_segment(count, n, (r - s + n) % n),
                       ddl__ring_segment(count, n, (r - s - 1 + 2 * n) % n), 1)) != DDL_OK)
            return st;
    ddl__seg mine = ddl__ring_segment(count, n, (r + 1) % n); /* reduced here: round it as the others see it */
    encode(codec, buf + mine.off, NULL, res ? res + mine.off : NULL, mine.len, 1);
    for (int s = 0; s < n - 1; s++)
        if ((st = step(c, codec, buf, NULL, (uint32_t)(n + s), ddl__ring_segment(count, n, (r + 1 - s + n) % n),
                       ddl__ring_segment(count, n, (r - s + n) % n), 0)) != DDL_OK)
            return st;
    return DDL_OK;
}

int ddl_comm_compression(const ddl_comm *c) { return c ? c->compress : DDL_COMPRESS_NONE; }

int ddl_comm_allreduce_compressed(ddl_comm *c, float *buf, size_t count, int op, float *residual)
{
    if (!c)
        return DDL_EINVAL;
    if (c->compress == DDL_COMPRESS_NONE || c->world == 1 || count < (size_t)c->world)
        return ddl_comm_allreduce(c, buf, count, DDL_FLOAT32, op);
    int st = ddl__comm_check_args(c, buf, count, DDL_FLOAT32, "allreduce (compressed)");
    if (st != DDL_OK)
        return st;
    if (op != DDL_SUM && op != DDL_MEAN) {
        snprintf(c->err, sizeof c->err, "allreduce (compressed): op %d is not DDL_SUM or DDL_MEAN", op);
        return DDL_EINVAL;
    }
    /* the header says which 16 bits: ranks that disagree on DDL_COMPRESS fail with DDL_EMISMATCH */
    int wire = c->compress == DDL_COMPRESS_FP16 ? DDL__WIRE_FP16 : DDL__WIRE_BF16;
    if ((st = ddl__comm_begin(c, DDL__OP_ALLREDUCE, wire, op, count, 0)) != DDL_OK)
        return st;
    if (residual)
        for (size_t i = 0; i < count; i++) { /* last step's rounding errors go out with this one */
            buf[i] += residual[i];
            residual[i] = 0.0f;
        }
    if ((st = ring(c, c->compress, buf, count, residual)) != DDL_OK)
        return st;
    if (op == DDL_MEAN) {
        float w = (float)c->world;
        for (size_t i = 0; i < count; i++)
            buf[i] /= w;
    }
    return DDL_OK;
}
