/* example_cli.h - the command line of every ddl program (examples/ and tools/, which reach it as
 * tools/cli.h), on getopt_long from libc. Header-only and on ddl.h alone: copy it along with an
 * example.
 * A program names itself with cli_start, lists its flags in a struct option table with
 * CLI_HELP_VERSION, and turns each value with these strict helpers: an integer refuses "1.5",
 * "12abc", "" and out of range, a float "nan", "1e999" and trailing junk. A bad command line gets
 * one line naming the flag (from getopt_long, or as below), then a pointer to --help, on stderr,
 * and exit status 2:   lenet: --batch 1.5: expected an integer from 1 to 1048576
 *                      try 'lenet --help'
 * For programs only: these functions exit(), which library code never does. */
#ifndef DDL_CLI_H
#define DDL_CLI_H

#include "ddl.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --help and --version, for every program's option table (-h is --help too). */
#define CLI_HELP_VERSION {"help", no_argument, NULL, 'h'}, {"version", no_argument, NULL, 'V'}

static const char *cli_prog = "ddl"; /* the program's name in every message */

/* cli_start: name the program in every message, getopt_long's included (it prints argv[0]). */
static inline void cli_start(char **argv, char *name) { cli_prog = argv[0] = name; }

/* cli_help: --help: the usage text on stdout, exit 0. */
static inline void cli_help(const char *usage) { fputs(usage, stdout), exit(0); }

/* cli_version: --version: "PROG (ddl) MAJOR.MINOR.PATCH" on stdout, exit 0. */
static inline void cli_version(void) { printf("%s (ddl) %s\n", cli_prog, ddl_version_string()), exit(0); }

/* cli_try: after the message on stderr (getopt_long's or ours): the pointer to --help, exit 2. */
static inline void cli_try(void) { fprintf(stderr, "try '%s --help'\n", cli_prog), exit(2); }

/* cli_error: "PROG: MSG", then cli_try. */
static inline void cli_error(const char *msg) { fprintf(stderr, "%s: %s\n", cli_prog, msg), cli_try(); }

/* cli_bad: "PROG: FLAG VALUE: expected WHAT", then cli_try. */
static inline void cli_bad(const char *flag, const char *value, const char *what)
{
    fprintf(stderr, "%s: %s %s: expected %s\n", cli_prog, flag, *value ? value : "''", what);
    cli_try();
}

/* cli_end: after getopt_long, refuse operands from argv[i] on. */
static inline void cli_end(int argc, char **argv, int i)
{
    if (i < argc)
        fprintf(stderr, "%s: unexpected argument '%s'\n", cli_prog, argv[i]), cli_try();
}

/* cli_number_start: s starts as a number does (strtol and strtod would skip leading blanks). */
static inline int cli_number_start(const char *s) { return *s && strchr("+-.0123456789", *s); }

/* cli_long: s as a decimal integer in [lo, hi]. */
static inline long cli_long(const char *flag, const char *s, long lo, long hi)
{
    char *end, what[80];
    long v = strtol(s, &end, 10); /* beyond long: LONG_MIN or LONG_MAX, so out of [lo, hi] too */
    if (!cli_number_start(s) || end == s || *end || v < lo || v > hi) {
        snprintf(what, sizeof what, "an integer from %ld to %ld", lo, hi);
        cli_bad(flag, s, what);
    }
    return v;
}

static inline int cli_int(const char *flag, const char *s, int lo, int hi) { return (int)cli_long(flag, s, lo, hi); }

/* cli_float: s as a finite decimal number in [lo, hi]. */
static inline float cli_float(const char *flag, const char *s, double lo, double hi)
{
    char *end, what[80];
    double v = strtod(s, &end);
    if (!cli_number_start(s) || end == s || *end || !isfinite(v) || v < lo || v > hi) {
        snprintf(what, sizeof what, "a number from %g to %g", lo, hi);
        cli_bad(flag, s, what);
    }
    return (float)v;
}

/* cli_word: the index of s in words (NULL-terminated): "--optimizer adam" of {sgd, adam} is 1. */
static inline int cli_word(const char *flag, const char *s, const char *const *words)
{
    char what[160] = "";
    int n = 0;
    for (; words[n]; n++)
        if (!strcmp(s, words[n]))
            return n;
    for (int i = 0; i < n; i++) /* "a, b or c" */
        snprintf(what + strlen(what), sizeof what - strlen(what), "%s%s", i == 0 ? "" : i < n - 1 ? ", " : " or ",
                 words[i]);
    cli_bad(flag, s, what);
    return -1;
}

#endif
