/* util.c - version, status strings, allocator hooks, arena, PRNG, CRC-32, clocks.
 * Small leaf helpers with no state of their own. */
#include "impl.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

/* ---- version and status ---- */

int ddl_version_number(void) { return DDL_VERSION_NUMBER; }

const char *ddl_version_string(void)
{
#define DDL__STR2(x) #x
#define DDL__STR(x) DDL__STR2(x)
    return DDL__STR(DDL_VERSION_MAJOR) "." DDL__STR(DDL_VERSION_MINOR) "." DDL__STR(DDL_VERSION_PATCH);
}

const char *ddl_cpu_kernels(void)
{
#if defined(__GNUC__) && defined(__x86_64__) && !defined(DDL_NO_CLONES)
    if (__builtin_cpu_supports("avx512f"))
        return "avx512";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "avx2";
    return "x86-64-v2";
#else
    return "portable";
#endif
}

/* The AVX2 tiles (conv_wide.c's, winograd.c's product): kernels written for AVX2's 16 registers
 * of 8 floats, where the code written in 16-float vectors for AVX-512 left its sums on the stack
 * in the clones' AVX2 build. They give the clones' bits. */
static int avx2_tiles_on = 1;

int ddl__avx2_tiles_enable(int on)
{
    int was = avx2_tiles_on;
    avx2_tiles_on = on;
#ifdef DDL__CLONES
    return __builtin_cpu_supports("x86-64-v3") ? was : -1;
#else
    (void)was;
    return -1;
#endif
}

int ddl__avx2_tiles(void)
{
#ifdef DDL__CLONES
    if (!avx2_tiles_on || !__builtin_cpu_supports("x86-64-v3"))
        return 0;
    return avx2_tiles_on == 2 ? 2 : !__builtin_cpu_supports("x86-64-v4");
#else
    return 0;
#endif
}

const char *ddl_strerror(int status)
{
    switch (status) {
    case DDL_OK: return "ok";
    case DDL_ENOMEM: return "out of memory or memory too small";
    case DDL_EINVAL: return "invalid argument";
    case DDL_EIO: return "input/output error";
    case DDL_ECORRUPT: return "corrupt data";
    case DDL_ETIMEDOUT: return "timed out";
    case DDL_EPEER: return "peer died or closed";
    case DDL_EMISMATCH: return "ranks disagree on a collective";
    case DDL_ENOTSUP: return "not supported";
    case DDL_EAUTH: return "handshake refused";
    case DDL_EPROTO: return "protocol error";
    default: return "unknown status";
    }
}

void ddl__text_put(ddl__text *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int fits = o->buf && o->len < o->bytes;
    int n = vsnprintf(fits ? o->buf + o->len : NULL, fits ? o->bytes - o->len : 0, fmt, ap);
    va_end(ap);
    o->len += n > 0 ? (size_t)n : 0;
}

int ddl__errf(char *err, size_t err_bytes, int status, const char *fmt, ...)
{
    if (err && err_bytes) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_bytes, fmt, ap);
        va_end(ap);
    }
    return status;
}

void ddl__log(ddl_log_fn fn, void *ud, int level, const char *fmt, ...)
{
    if (!fn)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fn(ud, level, msg);
}

/* ---- allocator ---- */

/* One alignment rule for all memory: what ddl is given needs only malloc's 16 bytes, and what
 * ddl__alloc returns is always DDL_ALIGN-aligned. malloc's path asks posix_memalign; a user's
 * allocator is asked for DDL_ALIGN + a pointer more, and the pointer it gave is kept just below
 * the aligned block for ddl__free.
 * Huge pages: on malloc's path a block of DDL__HUGE_MIN bytes or more (a model's activations, a
 * trainer's batches, a data set) starts on a 2 MiB boundary and asks Linux for transparent huge
 * pages (honoured when /sys/kernel/mm/transparent_hugepage/enabled is not "never"). U-Net's 180
 * MB took 46,000 page faults at their first touch, a fifth of a 1024-scene epoch on a virtual
 * machine whose faults cost 15 us; with huge pages 1,700. A user's allocator is left alone. */
void *ddl__alloc(const ddl_allocator *a, size_t bytes)
{
    if (a && a->alloc) {
        size_t extra = DDL_ALIGN + sizeof(void *);
        if (bytes > SIZE_MAX - extra)
            return NULL;
        unsigned char *raw = (unsigned char *)a->alloc(a->ud, bytes + extra);
        if (!raw)
            return NULL;
        unsigned char *p = (unsigned char *)ddl__align_up((size_t)(uintptr_t)raw + sizeof(void *));
        memcpy(p - sizeof(void *), &raw, sizeof raw);
        return p;
    }
    void *p = NULL;
    int huge = bytes >= DDL__HUGE_MIN;
    if (posix_memalign(&p, huge ? DDL__HUGE_PAGE : DDL_ALIGN, bytes ? bytes : 1) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (huge) /* a hint: where it is refused, small pages serve as before */
        (void)madvise(p, bytes / DDL__HUGE_PAGE * DDL__HUGE_PAGE, MADV_HUGEPAGE);
#endif
    return p;
}

void ddl__free(const ddl_allocator *a, void *p)
{
    if (!p)
        return;
    if (a && a->alloc) {
        void *raw;
        memcpy(&raw, (unsigned char *)p - sizeof(void *), sizeof raw);
        if (a->free)
            a->free(a->ud, raw);
        return;
    }
    free(p);
}

/* Memory the caller frees itself with its own allocator (ddl_idx_load's buffer) must be exactly
 * what the allocator gave: bytes with no alignment need beyond its own. */
void *ddl__alloc_plain(const ddl_allocator *a, size_t bytes)
{
    return a && a->alloc ? a->alloc(a->ud, bytes) : malloc(bytes ? bytes : 1);
}

void ddl__free_plain(const ddl_allocator *a, void *p)
{
    if (p && a && a->alloc) {
        if (a->free)
            a->free(a->ud, p);
    } else {
        free(p);
    }
}

/* ---- arena ---- */

void ddl_arena_init(ddl_arena *a, void *mem, size_t bytes)
{
    a->base = (unsigned char *)mem;
    a->size = mem ? bytes : 0;
    a->used = 0;
}

void *ddl_arena_alloc(ddl_arena *a, size_t bytes)
{
    /* Align the address, not only the offset, so any caller memory works. */
    uintptr_t base = (uintptr_t)a->base;
    size_t start = ddl__align_up(base + a->used) - base;
    if (!a->base)
        start = ddl__align_up(a->used);
    size_t end = start + ddl__align_up(bytes);
    a->used = end;
    if (!a->base || end > a->size)
        return NULL;
    return a->base + start;
}

size_t ddl_arena_used(const ddl_arena *a) { return a->used; }

int ddl_arena_ok(const ddl_arena *a) { return a->base != NULL && a->used <= a->size; }

/* ---- random numbers: xoshiro256** seeded by splitmix64 ---- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void ddl_rng_seed(ddl_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t ddl_rng_next(ddl_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float ddl_rng_uniform(ddl_rng *r) { return (float)(ddl_rng_next(r) >> 40) * (1.0f / 16777216.0f); }

float ddl_rng_normal(ddl_rng *r)
{
    double u1 = ((double)(ddl_rng_next(r) >> 11) + 1.0) * (1.0 / 9007199254740993.0); /* (0, 1] */
    double u2 = (double)(ddl_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

uint32_t ddl_rng_below(ddl_rng *r, uint32_t n)
{
    /* Lemire's multiply-shift with rejection: no modulo bias. */
    uint64_t m = (uint64_t)(uint32_t)(ddl_rng_next(r) >> 32) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = (uint32_t)(-n) % n;
        while (low < threshold) {
            m = (uint64_t)(uint32_t)(ddl_rng_next(r) >> 32) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}


/* ---- clocks ---- */

double ddl__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int64_t ddl__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int ddl__remaining_ms(int64_t deadline_ms)
{
    int64_t left = deadline_ms - ddl__now_ms();
    if (left < 0)
        return 0;
    return left > 1000000000 ? 1000000000 : (int)left;
}

int ddl__env_int(const char *const *names, int *out, int *found, char *err, size_t err_bytes)
{
    *found = 0;
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (!v)
            continue;
        char *end;
        errno = 0;
        long x = strtol(v, &end, 10);
        if (end == v || *end != '\0')
            return ddl__errf(err, err_bytes, DDL_EINVAL, "%s=%s is not a number", *names, v);
        if (errno == ERANGE || x < INT_MIN || x > INT_MAX)
            return ddl__errf(err, err_bytes, DDL_EINVAL, "%s=%s is out of range", *names, v);
        *out = (int)x;
        *found = 1;
        return DDL_OK;
    }
    return DDL_OK;
}
