#!/bin/sh
# test_bf16.sh - training with --precision bf16 (bfloat16 products, float32 sums and weights):
#  - the same weights (weights_crc) over two runs, at --threads 1 and 2 (with micro-batches side by
#    side, and with one whose kernels share out their blocks), and on 1 rank with 2
#    shards (--accumulate 2) against 2 ranks over shm and over tcp with 1 each (ranks, transports and threads
#    do not change the bits, as in float32);
#  - the bits are not float32's (the products did go through bfloat16), and LeNet's test accuracy
#    is float32's within 0.03 after this short run;
#  - a CPU without AVX512-BF16 or AMX (forced: DDL_CPU_NO_BF16=1) refuses in one line, exit 1;
#    --precision fp16 is refused as a bad flag value (exit 2).
# On a CPU without a bfloat16 path only the refusal is checked ("skipped: ..." for the rest).
# LeNet on 1280 Fashion-MNIST images (20 steps), one epoch per run: 10 runs of under a second of
# CPU each, most of it loading the data set (about 5 s of CPU in all).
# ddl-test: beside (computes, bounds no time)
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
DATA=/usr/share/datasets/fashion-mnist
if [ ! -e "$DATA/train-images-idx3-ubyte.gz" ] && [ ! -e "$DATA/train-images-idx3-ubyte" ]; then
    echo "skipped: no Fashion-MNIST in $DATA (apt-get install dataset-fashion-mnist)"; echo "0 passed, 0 failed"; exit 0
fi
LENET=$BUILD/bin/lenet
RUN=$BUILD/bin/ddlrun
[ -x "$LENET" ] && [ -x "$RUN" ] || { echo "no $LENET or $RUN: build first" >&2; echo "0 passed, 1 failed"; exit 1; }
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
ARGS="--epochs 1 --train-limit 1280 --seed 42 --quiet --data $DATA"

# ---- the refusal ----
DDL_CPU_NO_BF16=1 "$LENET" $ARGS --precision bf16 > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q "precision bf16: this CPU has neither AVX512-BF16 nor AMX (DDL_CPU_NO_BF16 is set)" "$tmp/err"
check "DDL_CPU_NO_BF16=1: refused in one line, exit 1 (exit $rc: $(cat "$tmp/err"))" $?
"$LENET" $ARGS --precision fp16 > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q -- "--precision" "$tmp/err"
check "--precision fp16: a bad flag value, exit 2 (exit $rc: $(head -n 1 "$tmp/err"))" $?

"$LENET" $ARGS --precision bf16 > "$tmp/a" 2> "$tmp/err"
if grep -q "neither AVX512-BF16 nor AMX" "$tmp/err"; then
    echo "skipped: no AVX512-BF16 or AMX on this CPU (the refusal alone is checked)"
    echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit
fi
a=$(crc "$tmp/a")
[ -n "$a" ]; check "bf16 training runs and reports weights_crc ($a; $(tail -n 2 "$tmp/err"))" $?

# ---- the same bits ----
"$LENET" $ARGS --precision bf16 > "$tmp/b" 2>&1
[ "$(crc "$tmp/b")" = "$a" ]; check "bf16: a second run gives the same weights ($(crc "$tmp/b") vs $a)" $?
"$LENET" $ARGS --precision bf16 --threads 2 > "$tmp/t2" 2>&1
[ "$(crc "$tmp/t2")" = "$a" ]; check "bf16: --threads 2 gives 1 thread's weights ($(crc "$tmp/t2") vs $a)" $?
# one micro-batch: the kernels' own blocks on the pool's threads (which must take the precision along)
"$LENET" $ARGS --precision bf16 --micro-batches 1 > "$tmp/m1" 2>&1
"$LENET" $ARGS --precision bf16 --micro-batches 1 --threads 2 > "$tmp/m2" 2>&1
m1=$(crc "$tmp/m1")
[ -n "$m1" ] && [ "$(crc "$tmp/m2")" = "$m1" ]
check "bf16, one micro-batch: --threads 2 gives 1 thread's weights ($(crc "$tmp/m2") vs $m1)" $?
"$LENET" $ARGS --precision bf16 --accumulate 2 > "$tmp/s1" 2>&1
timeout 120 "$RUN" -n 2 -t shm "$LENET" $ARGS --precision bf16 --accumulate 1 > "$tmp/s2" 2>&1
s1=$(crc "$tmp/s1"); s2=$(crc "$tmp/s2")
[ -n "$s1" ] && [ "$s1" = "$s2" ]; check "bf16: 2 ranks over shm give 1 rank's weights with 2 shards ($s2 vs $s1)" $?
timeout 120 "$RUN" -n 2 -t tcp "$LENET" $ARGS --precision bf16 --accumulate 1 > "$tmp/s3" 2>&1
[ "$(crc "$tmp/s3")" = "$s1" ]; check "bf16: 2 ranks over tcp likewise ($(crc "$tmp/s3") vs $s1)" $?

# ---- bfloat16 is what ran ----
"$LENET" $ARGS > "$tmp/f" 2>&1
f=$(crc "$tmp/f")
[ -n "$f" ] && [ "$f" != "$a" ]; check "float32's weights are not bf16's ($f vs $a)" $?
fa=$(field test_acc < "$tmp/f"); ba=$(field test_acc < "$tmp/a")
awk -v f="$fa" -v b="$ba" 'BEGIN { d = f - b; if (d < 0) d = -d; exit !(f > 0.5 && d <= 0.03) }'
check "LeNet's test accuracy in bf16 within 0.03 of float32's after a short run ($ba vs $fa)" $?
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
