/* expf_lanes.c - ddl__expf_n: expf of n floats, 16 at a time on AVX-512 and 8 on AVX2 with FMA,
 * bit for bit the expf the C library gives: glibc's (2.28 and later, Debian 12's 2.36), which on a
 * CPU with FMA (every CPU with AVX-512, and the AVX2 ones these lanes run on) runs its FMA variant.
 * That algorithm, lane by lane in doubles, in its order and with its fused operations (objdump of
 * libm's expf as resolved here): k = round(x 32 / ln 2) by the shift 0x1.8p52, r = x 32 / ln 2 - k
 * (fused), 2^(k/32) from a table of 32 and k's integer part in the exponent, then a cubic in r
 * (three fused steps) times it, rounded to float once. Lanes where |x| >= 88 or x is not a number
 * (glibc's special cases: overflow, underflow, infinities, NaNs) take the library's expf itself.
 * Before first use the lanes are checked against the library's expf (ddl__expf_lanes); a library
 * whose bits differ keeps its own loop. tests/test_expf.c compares with expf over a stride of
 * every float's bit pattern and the special cases.
 * The softmax cross-entropy of a segmentation (ops.c's xent_block) spent 12% of a U-Net step
 * there, with AMX's free tiles, and 3% on an AMD EPYC without AVX-512 (Zen 3). Elsewhere (neither
 * AVX-512 nor AVX2 with FMA, or DDL_NO_CLONES) the library's loop. */
#include "impl.h"

#include <math.h>

#if defined(__GNUC__) && defined(__x86_64__) && !defined(DDL_NO_CLONES)

#include <immintrin.h>
#include <pthread.h>
#include <string.h>

#define AVX512 __attribute__((target("avx512f")))

/* glibc's __exp2f_data: 2^(i/32) with i's bits taken off the exponent (tab), the scaled 1/ln 2,
 * the rounding shift and the cubic's coefficients (poly_scaled) */
static const uint64_t tab[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b,
    0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb,
    0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
    0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};
#define INV_LN2_32 0x1.71547652b82fep+5
#define SHIFT 0x1.8p+52
#define C0 0x1.c6af84b912394p-20
#define C1 0x1.ebfce50fac4f3p-13
#define C2 0x1.62e42ff0c52d6p-6

/* exp8: 8 lanes of x (as doubles), the ordinary case's result before its rounding to float */
AVX512 static __m512d exp8(__m256 xf, const __m512i *t)
{
    const __m512d inv = _mm512_set1_pd(INV_LN2_32), shift = _mm512_set1_pd(SHIFT);
    __m512d xd = _mm512_cvtps_pd(xf);
    __m512d kd = _mm512_fmadd_pd(inv, xd, shift);
    __m512i ki = _mm512_castpd_si512(kd);
    kd = _mm512_sub_pd(kd, shift);
    __m512d r = _mm512_fmsub_pd(inv, xd, kd);
    __m512i i = _mm512_and_si512(ki, _mm512_set1_epi64(31));
    __m512i lo = _mm512_permutex2var_epi64(t[0], i, t[1]), hi = _mm512_permutex2var_epi64(t[2], i, t[3]);
    __m512i e = _mm512_mask_blend_epi64(_mm512_test_epi64_mask(i, _mm512_set1_epi64(16)), lo, hi);
    __m512d s = _mm512_castsi512_pd(_mm512_add_epi64(e, _mm512_slli_epi64(ki, 47)));
    __m512d z = _mm512_fmadd_pd(_mm512_set1_pd(C0), r, _mm512_set1_pd(C1));
    __m512d r2 = _mm512_mul_pd(r, r);
    __m512d y = _mm512_fmadd_pd(_mm512_set1_pd(C2), r, _mm512_set1_pd(1.0));
    y = _mm512_fmadd_pd(z, r2, y);
    return _mm512_mul_pd(y, s);
}

AVX512 static void expf_avx512(size_t n, const float *x, float *y)
{
    __m512i t[4];
    for (int k = 0; k < 4; k++)
        t[k] = _mm512_loadu_si512(tab + 8 * k);
    for (size_t i = 0; i < n; i += 16) {
        int m = n - i < 16 ? (int)(n - i) : 16;
        __mmask16 some = (__mmask16)(m == 16 ? 0xffff : (1u << m) - 1);
        __m512 v = _mm512_maskz_loadu_ps(some, x + i);
        /* glibc's test: the top 12 bits of the float, less the sign, >= those of 88.0f */
        __m512i top = _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(v), 20), _mm512_set1_epi32(0x7ff));
        __mmask16 odd = _mm512_mask_cmpgt_epi32_mask(some, top, _mm512_set1_epi32(0x42a));
        __m256 lo = _mm512_cvtpd_ps(exp8(_mm512_castps512_ps256(v), t));
        __m256 hi = _mm512_cvtpd_ps(exp8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)), t));
        __m512d both = _mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1);
        __m512 r = _mm512_castpd_ps(both);
        if (odd) { /* the library's own special cases */
            float keep[16];
            _mm512_storeu_ps(keep, v);
            _mm512_mask_storeu_ps(y + i, (__mmask16)(some & ~odd), r);
            for (int k = 0; k < m; k++)
                if (odd >> k & 1)
                    y[i + (size_t)k] = expf(keep[k]);
            continue;
        }
        _mm512_mask_storeu_ps(y + i, some, r);
    }
}

/* exp4: exp8 for 4 lanes on AVX2 with FMA (the table read by a gather) */
DDL__AVX2 static __m256d exp4(__m128 xf)
{
    const __m256d inv = _mm256_set1_pd(INV_LN2_32), shift = _mm256_set1_pd(SHIFT);
    __m256d xd = _mm256_cvtps_pd(xf);
    __m256d kd = _mm256_fmadd_pd(inv, xd, shift);
    __m256i ki = _mm256_castpd_si256(kd);
    kd = _mm256_sub_pd(kd, shift);
    __m256d r = _mm256_fmsub_pd(inv, xd, kd);
    __m256i i = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
    __m256i e = _mm256_i64gather_epi64((const long long *)tab, i, 8);
    __m256d s = _mm256_castsi256_pd(_mm256_add_epi64(e, _mm256_slli_epi64(ki, 47)));
    __m256d z = _mm256_fmadd_pd(_mm256_set1_pd(C0), r, _mm256_set1_pd(C1));
    __m256d r2 = _mm256_mul_pd(r, r);
    __m256d y = _mm256_fmadd_pd(_mm256_set1_pd(C2), r, _mm256_set1_pd(1.0));
    y = _mm256_fmadd_pd(z, r2, y);
    return _mm256_mul_pd(y, s);
}

/* expf_avx2: 8 floats a step (a tail of fewer through a buffer of 8), special lanes as above */
DDL__AVX2 static void expf_avx2(size_t n, const float *x, float *y)
{
    for (size_t i = 0; i < n; i += 8) {
        int m = n - i < 8 ? (int)(n - i) : 8;
        float in[8] = {0}, out[8];
        const float *src = x + i;
        if (m < 8)
            memcpy(in, src, (size_t)m * sizeof *in), src = in;
        __m256 v = _mm256_loadu_ps(src);
        /* glibc's test: the top 12 bits of the float, less the sign, >= those of 88.0f */
        __m256i top = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(v), 20), _mm256_set1_epi32(0x7ff));
        int odd = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(top, _mm256_set1_epi32(0x42a))));
        __m128 lo = _mm256_cvtpd_ps(exp4(_mm256_castps256_ps128(v)));
        __m128 hi = _mm256_cvtpd_ps(exp4(_mm256_extractf128_ps(v, 1)));
        __m256 r = _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
        if (m == 8 && !odd) {
            _mm256_storeu_ps(y + i, r);
            continue;
        }
        _mm256_storeu_ps(out, r);
        for (int k = 0; k < m; k++) /* x may be y: src's lanes read before the stores */
            y[i + (size_t)k] = odd >> k & 1 ? expf(src[k]) : out[k];
    }
}

typedef void (*lanes_fn)(size_t n, const float *x, float *y);

/* passes: f gives the library's bits over 8192 bit patterns spread over [-104, 89], the special
 * cases and the 2 floats that tell glibc's fused reduction from an unfused one (another C
 * library, another algorithm: no) */
static int passes(lanes_fn f)
{
    enum { N = 8192 };
    static float x[N], want[N], got[N];
    for (int i = 0; i < N; i++) {
        float v = -104.0f + 193.0f * (float)i / (float)N;
        uint32_t b;
        memcpy(&b, &v, sizeof b);
        b ^= (uint32_t)i * 2654435761u >> 23; /* the low mantissa bits too */
        memcpy(&x[i], &b, sizeof b);
    }
    x[0] = -INFINITY, x[1] = INFINITY, x[2] = NAN, x[3] = -0.0f, x[4] = 88.7f, x[5] = -103.5f;
    x[6] = 0x1.04845ep+5f, x[7] = -0x1.f8cbb2p+5f; /* the 2 floats an unfused reduction gets wrong */
    for (int i = 0; i < N; i++)
        want[i] = expf(x[i]);
    f(N, x, got);
    return memcmp(want, got, sizeof want) == 0;
}

/* lanes_of: the lanes of that width (16, 8) if this CPU runs them, else NULL */
static lanes_fn lanes_of(int width)
{
    if (width == 16 && __builtin_cpu_supports("avx512f"))
        return expf_avx512;
    if (width == 8 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return expf_avx2;
    return NULL;
}

/* the widest lanes that pass, or the library's loop (NULL) */
static lanes_fn use_lanes;
static void check_once(void)
{
    lanes_fn f = lanes_of(16) ? lanes_of(16) : lanes_of(8);
    use_lanes = f && passes(f) ? f : NULL;
}

int ddl__expf_lanes(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, check_once);
    return !use_lanes ? 0 : use_lanes == expf_avx512 ? 16 : 8;
}

int ddl__expf_use(int width)
{
    ddl__expf_lanes();
    lanes_fn f = lanes_of(width);
    if (width == 0 || (f && passes(f)))
        use_lanes = f;
    return ddl__expf_lanes();
}

void ddl__expf_n(size_t n, const float *x, float *y)
{
    if (ddl__expf_lanes()) {
        use_lanes(n, x, y);
        return;
    }
    for (size_t i = 0; i < n; i++)
        y[i] = expf(x[i]);
}

#else

int ddl__expf_lanes(void) { return 0; }

int ddl__expf_use(int width)
{
    (void)width;
    return 0;
}

void ddl__expf_n(size_t n, const float *x, float *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = expf(x[i]);
}

#endif
