/* shortest.h - a float32 as the fewest decimal digits (6 to 9) that read back as the same float32
 * ("%.Ng"), as numpy's repr and PostgreSQL's real print it: so the probabilities that ddl-serve
 * and ddl-train --predict write are the predictor's bits for whoever reads them as float32, and
 * the same text from both. Header-only, for the programs in tools/. */
#ifndef DDL_TOOLS_SHORTEST_H
#define DDL_TOOLS_SHORTEST_H

#include <stdio.h>
#include <stdlib.h>

/* shortest_float: f (finite) into d (cap >= 16 bytes) as "%.Ng" with the least N from 6 to 9 that
 * strtof reads back as f; returns N. */
static inline int shortest_float(float f, char *d, size_t cap)
{
    int p = 6;
    for (; p < 9; p++) {
        snprintf(d, cap, "%.*g", p, (double)f);
        if (strtof(d, NULL) == f)
            return p;
    }
    snprintf(d, cap, "%.9g", (double)f);
    return 9;
}

#endif
