#!/bin/sh
# make bench's C tools (tools/bench/*.c) build against this build's libddl.a with the warnings
# make bench builds them with (BENCH_CFLAGS in tools/bench/lib.sh) and -Werror: a tool that no
# longer builds (a renamed function, a struct that grew a field) is found here, not in a bench run
# that skips its figures. mpi_allreduce.c with mpicc where it is installed.
# ddl-test: beside (builds, bounds no time)
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
flags=$(sed -n 's/^BENCH_CFLAGS="\(.*\)"$/\1/p' tools/bench/lib.sh)
[ -n "$flags" ]; check "tools/bench/lib.sh sets BENCH_CFLAGS" $?
# the flags find what kernels.c and lenet_ops.c once built with: positional initialisers of ddl_conv2d
printf '#include "ddl.h"\nint main(void) { ddl_conv2d g = {1, 1, 4, 4, 1, 3, 3, 1, 1}; return g.pad; }\n' > "$tmp/bad.c"
# shellcheck disable=SC2086 # a list of words
! cc $flags -Werror -I. -c -o "$tmp/bad.o" "$tmp/bad.c" 2> /dev/null
check "BENCH_CFLAGS -Werror refuses a ddl_conv2d initialised by position ($flags)" $?
libs=$(PKG_CONFIG_PATH=$BUILD pkg-config --static --libs-only-other --libs-only-l --libs-only-L ddl | sed 's/-lddl//')
san=${SAN:+-fsanitize=$SAN}
n=0
for src in tools/bench/*.c; do
    name=$(basename "$src" .c)
    if [ "$name" = mpi_allreduce ]; then
        command -v mpicc > /dev/null || { echo "mpi_allreduce.c not built: no mpicc"; continue; }
        # shellcheck disable=SC2086 # lists of words
        mpicc $flags -Werror -o "$tmp/$name" "$src" > "$tmp/$name.log" 2>&1
    else
        # shellcheck disable=SC2086 # lists of words
        cc $flags $san -Werror -I. -o "$tmp/$name" "$src" "$BUILD/libddl.a" $libs -lm -lzmq > "$tmp/$name.log" 2>&1
    fi
    check "tools/bench/$name.c builds warning-free: $(head -c 400 "$tmp/$name.log")" $?
    n=$((n + 1))
done
[ "$n" -ge 10 ]; check "built $n tools (at least 10)" $?
# the tool every bench part starts with runs, and says what the cores give
out=$("$tmp/cores" 1 2>&1)
case "$out" in "cores: n="*" ceiling="*) ok ;; *) bad "cores 1 printed '$out'" ;; esac
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
