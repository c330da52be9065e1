#!/bin/sh
# test_plot_diverged.sh - ddl-plot on diverged runs (event files written by tests/events.py):
# NaN, +inf and -inf scalars among finite ones, a run of nothing but NaN, and values near the
# float limits. Each chart is written within 10 s (a NaN used to send a line to y = INT_MIN:
# minutes of drawing), exit 0, and stderr says how many values were not finite.
# ddl-test: beside (builds or computes and bounds no time: it runs beside another such test)
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
plot_setup
L=epoch/train_loss A=test/accuracy
# run NAME TAG=VALUES...: an event file in $tmp/NAME
run() { n=$1; shift; mkdir -p "$tmp/$n" && "$PYTHON" tests/events.py "$tmp/$n/events.out.tfevents.1.host" "$@"; }
run nan $L=2.3,1.5,nan,1.2,nan $A=0.5,0.6,0.6,0.7,0.7
run inf $L=2.3,inf,1.1 $A=0.5,-inf,0.7
run allnan $L=nan,nan,nan $A=nan,nan,nan
run huge $L=3e38,-3e38,1 $A=1e-38,0,3.4e38
run fine $L=2.3,1.5,1.2 $A=0.5,0.6,0.7
png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; }
for r in nan inf allnan huge; do
    timeout 10 "$PLOT" -o "$tmp/$r.png" "$tmp/$r" "$tmp/fine" > "$tmp/$r.out" 2> "$tmp/$r.err"; rc=$?
    [ $rc = 0 ] && png "$tmp/$r.png" && grep -q "wrote $tmp/$r.png (2 runs)" "$tmp/$r.out"
    check "ddl-plot of the $r run: a chart within 10 s (exit $rc)" $?
done
grep -q "ddl-plot: nan: 2 values of $L are NaN or infinite (diverged?)" "$tmp/nan.err" && ! grep -q "of $A" "$tmp/nan.err"
check "it says how many values were not finite, and of which tag" $?
grep -q "inf: 1 value of $L is" "$tmp/inf.err" && grep -q "inf: 1 value of $A is" "$tmp/inf.err"
check "an infinity of either sign counts" $?
! grep -q "fine:" "$tmp/nan.err" && [ ! -s "$tmp/huge.err" ]; check "finite runs get no note" $?
timeout 10 "$PLOT" --dump "$tmp/nan" > "$tmp/dump" && grep -q "scalar $L nan" "$tmp/dump"
check "--dump prints the NaN as it is" $?
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
