/* arena.c - jansson's allocator for ddl-serve: while a thread handles a request, every node
 * jansson builds comes from that thread's bump arena, and the arena is reset when the request is
 * answered, so parsing 784 pixels costs no malloc and a request's JSON can never hold more than
 * the arena (SV_ARENA_BYTES; a body that needs more is refused as too complex). The arena is
 * reserved once per thread with mmap and handed back to the kernel above a high-water mark, so
 * resident memory stays bounded. Outside a request (or in another thread) jansson uses malloc.
 * yajl (stream.c) and the image decoder (image.c) allocate from the same arena. */
#include "serve.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define SV_ARENA_BYTES ((size_t)64 << 20) /* reserved address space per thread */
#define SV_ARENA_KEEP ((size_t)4 << 20)   /* resident after a request, at most */

typedef struct arena {
    unsigned char *base;
    size_t used, peak;
    int on, exhausted;
} arena;

static _Thread_local arena ta;

static void *arena_alloc(size_t n)
{
    if (!ta.on)
        return malloc(n);
    n = (n + 15) & ~(size_t)15;
    if (n > SV_ARENA_BYTES - ta.used) {
        ta.exhausted = 1;
        return NULL;
    }
    void *p = ta.base + ta.used;
    ta.used += n;
    return p;
}

static void arena_free(void *p)
{
    unsigned char *q = p;
    if (ta.base && q >= ta.base && q < ta.base + SV_ARENA_BYTES)
        return; /* freed with the arena */
    free(p);
}

/* yajl's allocator: like jansson's, plus realloc, so each block carries its size in front. */
static void *yajl_malloc(void *ctx, size_t n)
{
    (void)ctx;
    size_t *p = arena_alloc(n + 16);
    if (!p)
        return NULL;
    *p = n;
    return (unsigned char *)p + 16;
}

static void yajl_release(void *ctx, void *p)
{
    (void)ctx;
    if (p)
        arena_free((unsigned char *)p - 16);
}

static void *yajl_realloc(void *ctx, void *p, size_t n)
{
    void *q = yajl_malloc(ctx, n);
    if (q && p) {
        size_t old = *(size_t *)((unsigned char *)p - 16);
        memcpy(q, p, old < n ? old : n);
        yajl_release(ctx, p);
    }
    return q;
}

void sv_arena_yajl_funcs(yajl_alloc_funcs *f)
{
    *f = (yajl_alloc_funcs){.malloc = yajl_malloc, .realloc = yajl_realloc, .free = yajl_release};
}

void sv_arena_install(void) { json_set_alloc_funcs(arena_alloc, arena_free); }

int sv_arena_begin(void)
{
    if (!ta.base) {
        void *p = mmap(NULL, SV_ARENA_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        if (p == MAP_FAILED)
            return -1;
        ta.base = p;
    }
    ta.used = 0;
    ta.exhausted = 0;
    ta.on = 1;
    return 0;
}

void sv_arena_end(void)
{
    if (ta.used > ta.peak)
        ta.peak = ta.used;
    if (ta.peak > SV_ARENA_KEEP) { /* a large request: give the pages above the mark back */
        madvise(ta.base + SV_ARENA_KEEP, SV_ARENA_BYTES - SV_ARENA_KEEP, MADV_DONTNEED);
        ta.peak = SV_ARENA_KEEP;
    }
    ta.used = 0;
    ta.on = 0;
}

int sv_arena_exhausted(void) { return ta.exhausted; }

void *sv_arena_alloc(size_t n) { return ta.on ? arena_alloc(n) : NULL; }

size_t sv_arena_bytes(void) { return SV_ARENA_BYTES; }
