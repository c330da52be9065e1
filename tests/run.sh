#!/bin/sh
# Run every test: the compiled tests/test_* programs and the tests/test_*.sh scripts.
# Each prints "N passed, N failed" as its last line; this sums them and ends with the total and
# the number of tests that skipped: "N passed, N failed, N skipped" (the first two fields as
# before, for whatever reads them). A test that prints a line "skipped: REASON" and passes no
# check is shown as skipped, not as ok; one that checked something and skipped a part is ok,
# with the reason. A test that leaves /dev/shm/ddl-* files named with its process id fails.
# Exit status is non-zero if any test failed or did not report.
BUILD=${BUILD:-build}
export BUILD
cd "$(dirname "$0")/.." || exit 1
# under SAN=thread: libzmq's own threads are not instrumented (tests/tsan.supp says why)
[ "$SAN" = thread ] && export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS }suppressions=$PWD/tests/tsan.supp"
out_file=$(mktemp); trap 'rm -f "$out_file"' EXIT
total_pass=0; total_fail=0; total_skip=0
for t in "$BUILD"/tests/test_* tests/test_*.sh; do
    [ -e "$t" ] || continue
    case "$t" in *.d|*.o) continue ;; esac
    [ -x "$t" ] || [ "${t%.sh}" != "$t" ] || continue
    name=$(basename "$t")
    start=$(date +%s)
    # in the background for its process id, which names its files in /dev/shm (ddl-test-PID-N, ddl-fuzz-PID-*)
    if [ "${t%.sh}" != "$t" ]; then sh "$t" > "$out_file" 2>&1 & else "$t" > "$out_file" 2>&1 & fi
    pid=$!; wait $pid; rc=$?
    out=$(cat "$out_file")
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -n 1)
    p=$(printf '%s' "$line" | sed -n 's/^\([0-9]*\) passed.*/\1/p'); p=${p:-0}
    f=$(printf '%s' "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p'); f=${f:-0}
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi   # crashed or exited badly without a count
    left=$(ls /dev/shm 2>/dev/null | grep -E "^ddl-[a-z]+-$pid(-|$)" | tr '\n' ' ')
    if [ -n "$left" ]; then
        f=$((f + 1)); out="$out
left in /dev/shm: $left"
        (cd /dev/shm && rm -rf $left)
    fi
    skip=$(printf '%s\n' "$out" | sed -n 's/^skipped: //p' | head -n 1)
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
    secs=$(( $(date +%s) - start ))
    if [ "$f" -ne 0 ]; then
        printf '%-28s FAIL (%s passed, %s failed, exit %s, %ss)\n' "$name" "$p" "$f" "$rc" "$secs"
        printf '%s\n' "$out" | tail -n 30 | sed 's/^/    /'
    elif [ -n "$skip" ] && [ "$p" -eq 0 ]; then
        total_skip=$((total_skip + 1))
        printf '%-28s skipped: %s\n' "$name" "$skip"
    elif [ -n "$skip" ]; then
        printf '%-28s ok   (%s passed, %ss; skipped a part: %s)\n' "$name" "$p" "$secs" "$skip"
    else
        printf '%-28s ok   (%s passed, %ss)\n' "$name" "$p" "$secs"
    fi
done
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
