#!/bin/sh
# test_plot_timeline.sh - ddl-plot --timeline draws a timeline (DDL_TIMELINE's trace) as a lane
# per rank: a trace written here, with known spans, gives a PNG whose pixels are those spans'
# colours where they lie (tests/png_pixel.py reads them): a forward, an all-reduce with its wait
# in the lower half, a regroup over its lane, and white where nothing ran. A 2-rank LeNet run's
# own trace draws. A file that is not a timeline, a line it cannot read, a missing file and a
# run operand beside --timeline are refused, naming why.
# ddl-test: beside (builds or computes and bounds no time: it runs beside another such test)
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
plot_setup

# span NAME PID TS_MS DUR_MS: a trace line as ddl_timeline_write writes it
span() { printf '{"name":"%s","cat":"c","ph":"X","pid":%d,"tid":0,"ts":%d000.000,"dur":%d000.000,"args":{"step":1}},\n' "$@"; }
{
    echo '{"displayTimeUnit":"ms","otherData":{"producer":"test","ranks":2},'
    echo '"traceEvents":['
    echo '{"name":"process_name","ph":"M","pid":0,"tid":0,"args":{"name":"rank 0"}},'
    span forward 0 0 40; span allreduce 0 40 60; span wait 0 40 20
    span regroup 1 20 30; span backward 1 50 50
    echo '{}]}'
} > "$tmp/t.json"
"$PLOT" --timeline "$tmp/t.json" -o "$tmp/t.png" > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc = 0 ] && grep -q "wrote $tmp/t.png (5 spans of 2 ranks)" "$tmp/out"
check "--timeline: a PNG of 5 spans on 2 lanes (exit $rc)" $?
# 1200 pixels wide: the plot from x = 110, 10.7 pixels a ms; lane 0 from y = 54 (its lower half
# from 67), lane 1 from y = 88
px=$("$PYTHON" tests/png_pixel.py "$tmp/t.png" 324 60 645 60 645 75 966 75 484 100 912 100 217 100 2>&1 | tr '\n' ',')
echo "pixels: $px"
[ "$px" = "31 119 180,255 127 14,255 204 153,255 127 14,214 39 40,44 160 44,255 255 255," ]
check "each span in its colour where it lies: forward, all-reduce, its wait below, a regroup, backward, white" $?

echo 'hello' > "$tmp/not.json"
"$PLOT" --timeline "$tmp/not.json" -o "$tmp/x.png" 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && grep -q "not a timeline (no traceEvents" "$tmp/err" && [ ! -e "$tmp/x.png" ]
check "a file that is not a timeline: exit 1, said, no picture" $?
sed 's/"pid":1,/"pid":"one",/' "$tmp/t.json" > "$tmp/bad.json"
"$PLOT" --timeline "$tmp/bad.json" -o "$tmp/x.png" 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && grep -q "line 7 is not a span it can read" "$tmp/err"; check "a line it cannot read is named (exit $rc)" $?
"$PLOT" --timeline "$tmp/none.json" 2> "$tmp/err"; rc=$?
[ $rc = 1 ] && grep -q "cannot open" "$tmp/err"; check "a missing file: exit 1" $?
"$PLOT" --timeline "$tmp/t.json" "$tmp" 2> "$tmp/err"; rc=$?
[ $rc = 2 ] && grep -q "no runs" "$tmp/err"; check "a run beside --timeline is refused (exit $rc)" $?

DATA=/usr/share/datasets/fashion-mnist
if [ -d "$DATA" ]; then
    OPENBLAS_NUM_THREADS=1 DDL_TIMELINE="$tmp/run.json" DDL_TIMELINE_STEPS=1:10 "$BUILD/bin/ddlrun" -n 2 \
        "$BUILD/bin/lenet" --epochs 1 --train-limit 640 --quiet --data "$DATA" > /dev/null 2>&1
    "$PLOT" --timeline "$tmp/run.json" -o "$tmp/run.png" --size 800x300 > "$tmp/out" 2>&1; rc=$?
    [ $rc = 0 ] && grep -q "spans of 2 ranks" "$tmp/out"; check "a LeNet run's own timeline draws (exit $rc)" $?
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
