/* random_input.h - n floats of the standard normal from ddl's generator at seed (malloc'd: the
 * caller frees them), for the tests of kernels and layers. */
#ifndef DDL_TESTS_RANDOM_INPUT_H
#define DDL_TESTS_RANDOM_INPUT_H
#include "ddl.h"

#include <stdlib.h>

static inline float *random_input(size_t n, uint64_t seed)
{
    float *x = malloc(n * sizeof *x);
    ddl_rng r;
    ddl_rng_seed(&r, seed);
    for (size_t i = 0; x && i < n; i++)
        x[i] = ddl_rng_normal(&r);
    return x;
}
#endif
