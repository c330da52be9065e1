#!/bin/sh
# The library and make fuzz's targets stay within what clang compiles: `make clang-check` runs
# every library source and tests/fuzz/fuzz_*.c through clang's front end with the warnings and
# definitions of make fuzz, warnings as errors (about 15 s; a whole make fuzz-build is 2 minutes
# of CPU). make fuzz is the attacker's view of every parser (ONNX, checkpoints, images, requests)
# and broke unseen twice: gcc's __builtin_shuffle in the Winograd transforms, and
# __builtin_cpu_supports("x86-64-v3"), which clang 14 does not know. And fuzz_serve.c, which
# compiles ddl-serve's sources into its target, includes each of them but main.c, http.c and web.c
# (it once left out batch.c, and its link failed).
# ddl-test: beside (builds, bounds no time)
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
command -v clang > /dev/null || { bad "clang is missing (make test installs it)"; echo "$pass passed, $fail failed"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
unset MAKEFLAGS MFLAGS MAKELEVEL
make -s clang-check BUILD="$BUILD" > "$tmp/clang.log" 2>&1
check "make clang-check: clang compiles the library and the fuzz targets warning-free ($(grep -m 3 -E 'error|warning' "$tmp/clang.log"))" $?

# what make clang-check must refuse: the builtins gcc has and clang 14 has not
printf 'int f(void);\nint f(void) { return __builtin_cpu_supports("x86-64-v3"); }\n' > "$tmp/v3.c"
! clang -std=c11 -Werror -fsyntax-only "$tmp/v3.c" 2> /dev/null
check "clang refuses __builtin_cpu_supports(\"x86-64-v3\") (what this test guards against)" $?

missing=""
for f in tools/serve/*.c; do
    case "$(basename "$f")" in main.c | http.c | web.c) continue ;; esac
    grep -q "^#include \"$f\"" tests/fuzz/fuzz_serve.c || missing="$missing $f"
done
[ -z "$missing" ]; check "tests/fuzz/fuzz_serve.c includes every ddl-serve source but main.c, http.c and web.c (missing:$missing)" $?
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
