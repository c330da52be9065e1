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
# Tests that build or compute and assert nothing about time run two at a time, before the rest
# (the 2 cores of make test's machines: they were 130 s of its 10 minutes); every other test runs
# alone, since many bound how long something may take. test_slurm_real and test_ssh mostly wait
# for daemons (7 s of CPU in 16-18 s; bounds of 5 s and more): beside another test that wait is not
# lost. Tests that keep both cores busy gain nothing there (test_train and test_threads, tried,
# took 30% longer each), and test_pg skips its speed-up bound when other work takes the cores.
BESIDE="test_install.sh test_build_pg.sh test_cpus.sh test_onnx.sh test_onnx_import.sh test_onnx_act.sh test_onnx_shapes.sh
test_ckpt_tool.sh test_cli.sh
test_output_paths.sh test_plot_runs.sh test_plot_diverged.sh test_plot_timeline.sh test_slurm_real.sh test_ssh.sh"
# test_docs (the docs' command blocks: short trainings, a PostgreSQL server, ddl-serve on 8501; no
# time bounds) too: make test has built all it installs, and nothing beside it takes port 8501.
BESIDE="$BESIDE test_docs.sh test_slurm_skip.sh test_onnx_nodes.sh"
# Then tests that mostly wait (for a timeout, a heartbeat, a stopped rank: under a second of CPU
# in 10-15 s, or half their time) run four at a time: their bounds are seconds, their CPU small.
IDLE="test_elastic test_shm test_faults test_serve.sh test_restarts.sh test_transport test_sweep.sh
test_zmq_drop.sh test_backlog"

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
        runnable "$t" && in_list "$(basename "$t")" "$list" && set -- "$@" "$t"
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
    runnable "$t" && ! in_list "$(basename "$t")" "$BESIDE $IDLE" || continue
    start "$t"; pid=$!; wait $pid; rc=$?
    report "$(basename "$t")" $pid $rc
done
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
