#!/bin/sh
# Run every test: the compiled tests/test_* programs and the tests/test_*.sh scripts.
# Each prints "N passed, N failed" as its last line; this sums them and ends with the total.
# Exit status is non-zero if any test failed or did not report.
BUILD=${BUILD:-build}
export BUILD
cd "$(dirname "$0")/.." || exit 1
# under SAN=thread: libzmq's own threads are not instrumented (tests/tsan.supp says why)
[ "$SAN" = thread ] && export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS }suppressions=$PWD/tests/tsan.supp"
total_pass=0; total_fail=0
for t in "$BUILD"/tests/test_* tests/test_*.sh; do
    [ -e "$t" ] || continue
    case "$t" in *.d|*.o) continue ;; esac
    [ -x "$t" ] || [ "${t%.sh}" != "$t" ] || continue
    name=$(basename "$t")
    start=$(date +%s)
    if [ "${t%.sh}" != "$t" ]; then out=$(sh "$t" 2>&1); rc=$?; else out=$("$t" 2>&1); rc=$?; fi
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -n 1)
    p=$(printf '%s' "$line" | sed -n 's/^\([0-9]*\) passed.*/\1/p'); p=${p:-0}
    f=$(printf '%s' "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p'); f=${f:-0}
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi   # crashed or exited badly without a count
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
    secs=$(( $(date +%s) - start ))
    if [ "$f" -ne 0 ]; then
        printf '%-28s FAIL (%s passed, %s failed, exit %s, %ss)\n' "$name" "$p" "$f" "$rc" "$secs"
        printf '%s\n' "$out" | tail -n 30 | sed 's/^/    /'
    else
        printf '%-28s ok   (%s passed, %ss)\n' "$name" "$p" "$secs"
    fi
done
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
