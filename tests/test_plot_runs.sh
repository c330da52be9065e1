#!/bin/sh
# test_plot_runs.sh - ddl-plot finds runs as TensorBoard does (issue 35, item 8): a sweep's
# directory (DIR/trial-NNNN/logs, event files written by tests/events.py) gives one run per trial,
# labelled trial-NNNN, not "logs"; a run in the directory given is labelled by that directory's
# name, never "."; a directory with no event file anywhere below it exits 1 and writes no chart.
# ddl-test: beside (builds or computes and bounds no time: it runs beside another such test)
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
plot_setup
PLOT=$(pwd)/$PLOT
L=epoch/train_loss A=test/accuracy
# run DIR TAG=VALUES...: an event file in $tmp/DIR
run() { d=$1; shift; mkdir -p "$tmp/$d" && "$PYTHON" tests/events.py "$tmp/$d/events.out.tfevents.1.host" "$@"; }
run sweep1/trial-0000/logs $L=2.3,1.5 $A=0.5,0.6
run sweep1/trial-0001/logs $L=2.3,1.2 $A=0.5,0.7
run sweep1/trial-0002/logs $L=2.3,1.1 $A=0.5,0.8
run deep/a/b/c/run7 $L=2,1 $A=0.1,0.2
mkdir -p "$tmp/sweep1/trial-0003/logs" "$tmp/nothing/x/y"   # a trial that wrote nothing yet; an empty tree
png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; }

"$PLOT" -o "$tmp/sweep.png" "$tmp/sweep1" > "$tmp/out" 2> "$tmp/err"; rc=$?
cat "$tmp/out" "$tmp/err"
[ $rc = 0 ] && png "$tmp/sweep.png" && grep -q "wrote $tmp/sweep.png (3 runs)" "$tmp/out"
check "ddl-plot SWEEPDIR: the trials' event files in sub-directories, one run each (exit $rc)" $?
grep -qx "ddl-plot: runs: trial-0000, trial-0001, trial-0002" "$tmp/out"
check "each run labelled by its trial directory, not 'logs'" $?

"$PLOT" -o "$tmp/deep.png" "$tmp/deep" > "$tmp/out" 2>&1
grep -qx "ddl-plot: runs: a/b/c/run7" "$tmp/out"; check "a run four levels down, labelled by its relative path" $?

(cd "$tmp/sweep1/trial-0001/logs" && "$PLOT" -o "$tmp/here.png" .) > "$tmp/out" 2>&1
grep -qx "ddl-plot: runs: trial-0001" "$tmp/out"; check "'.' inside trial-0001/logs: labelled trial-0001, not '.' or 'logs'" $?
"$PLOT" -o "$tmp/one.png" "$tmp/sweep1/trial-0002" > "$tmp/out" 2>&1
grep -qx "ddl-plot: runs: trial-0002" "$tmp/out"; check "a trial directory given: labelled by its name" $?

"$PLOT" -o "$tmp/none.png" "$tmp/nothing" > "$tmp/out" 2> "$tmp/err"; rc=$?
cat "$tmp/err"
[ $rc = 1 ] && [ ! -e "$tmp/none.png" ] && grep -q "no event files .* in $tmp/nothing or its sub-directories" "$tmp/err"
check "no event file anywhere: exit 1 (got $rc), says so, writes no chart" $?
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
