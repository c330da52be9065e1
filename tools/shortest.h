/* shortest.h - a float32 as the fewest decimal digits (6 to 9) that read back as the same float32,
 * written as printf's "%.Ng" writes them, as numpy's repr and PostgreSQL's real print them: so the
 * probabilities that ddl-serve and ddl-train --predict write are the predictor's bits for whoever
 * reads them as float32, and the same text from both. Header-only, for the programs in tools/.
 * Fast: snprintf and strtof took 5 us a value (4 tries), half of a served request's time; the
 * digits are made here with integers and each try checked in double arithmetic, exactly (see
 * reads_back), with snprintf and strtof left for what falls outside that check. */
#ifndef DDL_TOOLS_SHORTEST_H
#define DDL_TOOLS_SHORTEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* shortest_slow: the plain way, for values the fast path does not take. */
static inline int shortest_slow(float f, char *d, size_t cap)
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

static const double shortest_p10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                        1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* reads_back: the decimal m * 10^k (m < 10^9, |k| <= 22: m and 10^k are exact doubles, so their
 * product or quotient is the decimal correctly rounded to double) lies strictly between lo and hi,
 * f's midpoints with its neighbours (exact doubles), and so reads as f. It does when its double
 * does, since no double lies between a decimal and its rounding. On a midpoint: unknown (-1). */
static inline int reads_back(long long m, int k, double lo, double hi)
{
    double v = k >= 0 ? (double)m * shortest_p10[k] : (double)m / shortest_p10[-k];
    if (v == lo || v == hi)
        return -1;
    return v > lo && v < hi;
}

/* scaled: f * 10^(8 - e) in one correctly rounded operation (|8 - e| <= 22) */
static inline double scaled(double f, int e)
{
    return 8 - e >= 0 ? f * shortest_p10[8 - e] : f / shortest_p10[e - 8];
}

/* shortest_float: f (finite) into d (cap >= 32 bytes) as "%.Ng" with the least N from 6 to 9 that
 * strtof reads back as f; returns N. */
static inline int shortest_float(float f, char *d, size_t cap)
{
    if (!(f >= 1e-13f && f < 1e13f)) /* 0, negative, NaN, or far from a probability */
        return shortest_slow(f, d, cap);
    static const long long pow10[10] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000};
    double fd = f;
    int b;
    frexp(fd, &b); /* f in [2^(b-1), 2^b): its decimal exponent e is floor((b - 1) log10 2) or one more */
    int e = (int)floor((b - 1) * 0.30102999566398120);
    double x = scaled(fd, e); /* f * 10^(8 - e): 9 digits before the point */
    while (x >= 1e9)
        x = scaled(fd, ++e);
    while (x < 1e8)
        x = scaled(fd, --e);
    uint32_t u; /* f's neighbours: its bits minus and plus one (f is positive, normal and not the largest) */
    memcpy(&u, &f, 4);
    float below, above;
    uint32_t ud = u - 1, uu = u + 1;
    memcpy(&below, &ud, 4), memcpy(&above, &uu, 4);
    double lo = (fd + (double)below) / 2, hi = (fd + (double)above) / 2;
    long long mp = 0;
    int p = 6;
    for (; p <= 9; p++) {
        mp = (long long)nearbyint(x / (double)pow10[9 - p]); /* the first p digits, ties to even as printf */
        int ep = e;
        if (mp >= pow10[p])
            mp /= 10, ep++; /* rounded up to 10^p: one digit fewer */
        int r = reads_back(mp, ep - (p - 1), lo, hi);
        if (r < 0 || (p == 9 && r == 0)) /* a midpoint, or 9 digits that do not read back */
            return shortest_slow(f, d, cap);
        if (r) {
            e = ep;
            break;
        }
    }
    char dig[10];
    int nd = p;
    for (int i = p - 1; i >= 0; i--, mp /= 10)
        dig[i] = (char)('0' + mp % 10);
    while (nd > 1 && dig[nd - 1] == '0') /* %g drops trailing zeros */
        nd--;
    size_t n = 0;
    if (e < -4 || e >= p) { /* d.ddde-XX, as %g writes it */
        d[n++] = dig[0];
        if (nd > 1)
            d[n++] = '.';
        for (int i = 1; i < nd; i++)
            d[n++] = dig[i];
        n += (size_t)snprintf(d + n, cap - n, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    } else if (e < 0) { /* 0.000ddd */
        d[n++] = '0', d[n++] = '.';
        for (int i = -1; i > e; i--)
            d[n++] = '0';
        for (int i = 0; i < nd; i++)
            d[n++] = dig[i];
        d[n] = '\0';
    } else { /* ddd.ddd or ddd */
        for (int i = 0; i <= e; i++)
            d[n++] = i < nd ? dig[i] : '0';
        if (nd > e + 1)
            d[n++] = '.';
        for (int i = e + 1; i < nd; i++)
            d[n++] = dig[i];
        d[n] = '\0';
    }
    return p;
}

#endif
