/* count_alloc.h - a ddl_allocator that counts its calls, for the tests that check what the
 * library allocates and frees (test_model.c, test_micro.c): {count_alloc, count_free, &counter}.
 * 64-byte aligned blocks. */
#ifndef DDL_TEST_COUNT_ALLOC_H
#define DDL_TEST_COUNT_ALLOC_H
#include <stdlib.h>

typedef struct counter {
    long allocs, frees;
} counter;

static void *count_alloc(void *ud, size_t bytes)
{
    ((counter *)ud)->allocs++;
    void *p = NULL;
    return posix_memalign(&p, 64, bytes) == 0 ? p : NULL;
}

static void count_free(void *ud, void *p)
{
    ((counter *)ud)->frees++;
    free(p);
}

#endif
