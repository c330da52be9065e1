/* check.h - the tiny test harness every tests/test_*.c uses (redis testhelp.h style).
 * CHECK(cond) and CHECK_NEAR(a, b, tol) count and report file:line; TEST_END() prints
 * "N passed, N failed" and gives main's exit status. */
#ifndef DDL_CHECK_H
#define DDL_CHECK_H
#include <math.h>
#include <stdio.h>

static int check_passed, check_failed;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (cond) {                                                                  \
            check_passed++;                                                          \
        } else {                                                                     \
            check_failed++;                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                            \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                \
    do {                                                                                     \
        double check_a_ = (double)(a), check_b_ = (double)(b);                               \
        if (fabs(check_a_ - check_b_) <= (double)(tol)) {                                    \
            check_passed++;                                                                  \
        } else {                                                                             \
            check_failed++;                                                                  \
            fprintf(stderr, "%s:%d: CHECK_NEAR failed: %s = %.9g, %s = %.9g, tol %g\n",      \
                    __FILE__, __LINE__, #a, check_a_, #b, check_b_, (double)(tol));          \
        }                                                                                    \
    } while (0)

#define TEST_END()                                                       \
    (printf("%d passed, %d failed\n", check_passed, check_failed), check_failed ? 1 : 0)

#endif
