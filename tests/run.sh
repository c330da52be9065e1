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
out_dir=$(mktemp -d); trap 'rm -rf "$out_dir"' EXIT
total_pass=0; total_fail=0; total_skip=0
# The schedule comes from what each test declares in its source (the .sh itself, or tests/NAME.c
# for a compiled test), a line "ddl-test: LANE (why)":
#   beside  it builds or computes and asserts nothing about time: two such run at a time, before
#           the rest (the 2 cores of make test's machines: they were 130 s of its 10 minutes).
#           Tests that mostly wait for daemons (test_slurm_real, test_ssh: 7 s of CPU in 16-18 s)
#           lose nothing there; tests that keep both cores busy gain nothing (test_train and
#           test_threads, tried, took 30% longer each), and test_pg skips its speed-up bound when
#           other work takes the cores.
#   idle    it mostly waits (for a timeout, a heartbeat, a stopped rank: under a second of CPU in
#           10-15 s, or half its time): four run at a time; their bounds are seconds, their CPU small.
# Every other test runs alone, since many bound how long something may take.
# tests/run.sh NAME... (make test T="NAME...") runs those tests alone (NAME with or without .sh).
ONLY=" $* "

# lane_of T: the lane test T declares (beside, idle), or nothing
lane_of() {
    case "$1" in *.sh) src=$1 ;; *) src=tests/$(basename "$1").c ;; esac
    sed -n 's/.*ddl-test: *\([a-z]*\).*/\1/p' "$src" 2> /dev/null | head -n 1
}
# wanted T: T is one make test runs (every test, or one of NAME...)
wanted() {
    [ "$ONLY" = "  " ] && return 0
    n=$(basename "$1")
    case "$ONLY" in *" $n "*|*" ${n%.sh} "*) return 0 ;; esac
    return 1
}
BESIDE="" IDLE=""
for t in "$BUILD"/tests/test_* tests/test_*.sh; do
    case "$(lane_of "$t")" in
    beside) BESIDE="$BESIDE $(basename "$t")" ;;
    idle) IDLE="$IDLE $(basename "$t")" ;;
    esac
done

# start T: run test T in the background, its output in $out_dir/NAME.out, its start time in .t0
start() {
    name=$(basename "$1")
    date +%s > "$out_dir/$name.t0"
    # in the background for its process id, which names its files in /dev/shm (ddl-test-PID-N, ddl-fuzz-PID-*)
    if [ "${1%.sh}" != "$1" ]; then sh "$1" > "$out_dir/$name.out" 2>&1 & else "$1" > "$out_dir/$name.out" 2>&1 & fi
}

# report NAME PID RC: its line, and the totals
report() {
    name=$1; pid=$2; rc=$3
    out=$(cat "$out_dir/$name.out")
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
    secs=$(( $(date +%s) - $(cat "$out_dir/$name.t0") ))
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
}

in_list() { case " $(echo $2) " in *" $1 "*) return 0 ;; esac; return 1; }
runnable() {
    [ -e "$1" ] || return 1
    case "$1" in *.d|*.o) return 1 ;; esac
    [ -x "$1" ] || [ "${1%.sh}" != "$1" ]
}

# lanes N LIST: the tests named in LIST, N at a time: a lane takes the next test as soon as its
# last one ended
lanes() {
    n_lanes=$1; list=$2
    set --
    for t in "$BUILD"/tests/test_* tests/test_*.sh; do
        runnable "$t" && wanted "$t" && in_list "$(basename "$t")" "$list" && set -- "$@" "$t"
    done
    i=0; while [ $i -lt "$n_lanes" ]; do eval "lane_pid_$i= lane_name_$i="; i=$((i + 1)); done
    while :; do
        busy=0; i=0
        while [ $i -lt "$n_lanes" ]; do
            eval "lp=\$lane_pid_$i"
            if [ -z "$lp" ] && [ $# -gt 0 ]; then
                start "$1"; eval "lane_pid_$i=$! lane_name_$i=$(basename "$1")"; shift; lp=x
            elif [ -n "$lp" ] && ! kill -0 "$lp" 2>/dev/null; then
                wait "$lp"; rc=$?; eval "report \$lane_name_$i $lp $rc"; eval "lane_pid_$i="; lp=""
                [ $# -gt 0 ] && continue   # this lane takes the next test at once
            fi
            [ -n "$lp" ] && busy=1
            i=$((i + 1))
        done
        [ $busy -eq 0 ] && [ $# -eq 0 ] && break
        sleep 0.2
    done
}
lanes 2 "$BESIDE"
lanes 4 "$IDLE"
# the rest, one at a time
for t in "$BUILD"/tests/test_* tests/test_*.sh; do
    runnable "$t" && wanted "$t" && ! in_list "$(basename "$t")" "$BESIDE $IDLE" || continue
    start "$t"; pid=$!; wait $pid; rc=$?
    report "$(basename "$t")" $pid $rc
done
[ "$ONLY" != "  " ] && [ $((total_pass + total_fail + total_skip)) -eq 0 ] &&
    echo "no test named$ONLY(tests/test_*.sh, or $BUILD/tests/test_*)" && total_fail=1
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
