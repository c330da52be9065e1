#!/bin/sh
# The example in README.md is examples/quickstart.c (the same text), at most 70 lines (the loop written out with its error handling,
# not golfed), compiles against an installed ddl through pkg-config as README says, and trains
# LeNet for 5 epochs on 2 ranks, rank 0 printing each epoch once (about 15 s).
BUILD=${BUILD:-build}
pass=0; fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
awk '/^```c$/{f=1;next} /^```$/{if(f){exit}} f' README.md > "$tmp/example.c"
# the README's program is examples/quickstart.c, from its first #include on: one text, not two
sed -n '/^#include/,$p' examples/quickstart.c > "$tmp/quickstart.c"
if cmp -s "$tmp/example.c" "$tmp/quickstart.c"; then pass=$((pass+1)); else
    echo "README's program differs from examples/quickstart.c:"; diff "$tmp/example.c" "$tmp/quickstart.c" | head; fail=$((fail+1)); fi
# built the way README says: against an installed copy, through pkg-config
unset MAKEFLAGS MFLAGS MAKELEVEL
make -s install BUILD="$BUILD" DESTDIR="$tmp/root" PREFIX=/usr/local > "$tmp/install.log" 2>&1 || {
    echo "make install failed:"; tail -5 "$tmp/install.log"; }
P=$tmp/root/usr/local
pc() { PKG_CONFIG_PATH=$P/lib/pkgconfig pkg-config --define-variable=prefix="$P" "$@"; }
if [ "$(wc -l < "$tmp/example.c")" -le 70 ]; then pass=$((pass+1)); else echo "README example is longer than 70 lines"; fail=$((fail+1)); fi
if cc -std=c99 -Wall -Wextra -Werror ${SAN:+-fsanitize=$SAN} "$tmp/example.c" -o "$tmp/example" $(pc --cflags --libs ddl); then
    pass=$((pass+1))
    out=$(LD_LIBRARY_PATH=$P/lib OPENBLAS_NUM_THREADS=1 timeout 300 "$BUILD/bin/ddlrun" -n 2 "$tmp/example" 2>&1)
    if [ $? -eq 0 ] && [ "$(printf '%s\n' "$out" | grep -c '^epoch')" -eq 5 ]; then pass=$((pass+1)); else
        echo "README example did not print 5 epochs once:"; printf '%s\n' "$out" | tail -5; fail=$((fail+1)); fi
    acc=$(printf '%s\n' "$out" | sed -n 's/^epoch 5: .*test accuracy \([0-9.]*\)/\1/p')
    if [ -n "$acc" ] && [ "$(echo "$acc > 0.85" | bc)" = 1 ]; then pass=$((pass+1)); else echo "README example: accuracy '$acc'"; fail=$((fail+1)); fi
else
    echo "README example does not compile"; fail=$((fail+1))
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
