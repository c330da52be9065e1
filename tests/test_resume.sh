#!/bin/sh
# test_resume.sh - exact resume: a LeNet run killed (SIGKILL, as a crash) after a checkpoint and
# resumed with --resume ends with the same weights_crc as a run never stopped, on 1 rank and on
# 2 ranks; from a checkpoint taken at an epoch's end too; a 2-rank checkpoint resumed on 1 rank
# says that the world size changed and finishes; and a kill in the middle of writing a
# checkpoint (--save-rate) leaves the previous one loadable, its .tmp ignored.
# DDL_TEST_STOP_AFTER=N makes the example kill itself after step N (and its checkpoint).
# Ends with "N passed, N failed"; exit status non-zero on any failure.
# ddl-test: beside (builds or computes and bounds no time: it runs beside another such test)
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
LENET=$BUILD/bin/lenet
DDLRUN=$BUILD/bin/ddlrun
CKPT=$BUILD/bin/ddl-ckpt
DATA=/usr/share/datasets/fashion-mnist
ARGS="--epochs 2 --train-limit 3000 --quiet"   # 47 steps per epoch, 94 in all
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT


if [ ! -x "$LENET" ] || [ ! -x "$DDLRUN" ] || [ ! -x "$CKPT" ]; then
    echo "no $LENET, $DDLRUN or $CKPT: build first" >&2
    echo "0 passed, 1 failed"; exit 1
fi
if [ ! -d "$DATA" ]; then
    echo "skipped: no Fashion-MNIST in $DATA (apt-get install dataset-fashion-mnist)"
    echo "0 passed, 0 failed"; exit 0
fi

# ---- 1 rank ----
"$LENET" $ARGS > "$tmp/ref1" 2>&1; check "1 rank: uninterrupted run" $?
ref1=$(crc "$tmp/ref1")
DDL_TEST_STOP_AFTER=30 "$LENET" $ARGS --checkpoint "$tmp/c1" --checkpoint-every 20 > "$tmp/out" 2>&1
[ $? -eq 137 ] && [ -f "$tmp/c1" ]; check "1 rank: killed at step 30 with a checkpoint" $?
"$CKPT" show "$tmp/c1" | grep -q '^progress   step 20, epoch 1, position 1280 of 3000'; check "1 rank: checkpoint of step 20" $?
"$LENET" $ARGS --checkpoint "$tmp/c1" --checkpoint-every 20 --resume > "$tmp/res1" 2>&1
check "1 rank: resumed run exits 0" $?
grep -q "^resumed from $tmp/c1 at step 20 (epoch 1)" "$tmp/res1"; check "1 rank: says where it resumed" $?
[ -n "$ref1" ] && [ "$(crc "$tmp/res1")" = "$ref1" ]; check "1 rank: same weights_crc ($ref1 vs $(crc "$tmp/res1"))" $?
"$CKPT" show "$tmp/c1" | grep -q '^progress   step 94, epoch 2, position 3000 of 3000'; check "1 rank: last checkpoint at the end" $?

# from a checkpoint at the end of epoch 1 (step 47): it starts epoch 2
DDL_TEST_STOP_AFTER=47 "$LENET" $ARGS --checkpoint "$tmp/c3" --checkpoint-every 1000 > /dev/null 2>&1
"$LENET" $ARGS --checkpoint "$tmp/c3" --resume > "$tmp/res3" 2>&1
grep -q "at step 47 (epoch 1, finished)" "$tmp/res3" && [ "$(crc "$tmp/res3")" = "$ref1" ]
check "1 rank: resume from an epoch-end checkpoint, same weights_crc" $?
# nothing to resume from: starts from scratch
"$LENET" $ARGS --checkpoint "$tmp/none" --resume > "$tmp/res4" 2>&1
grep -q "no checkpoint at $tmp/none: starting from scratch" "$tmp/res4" && [ "$(crc "$tmp/res4")" = "$ref1" ]
check "1 rank: --resume without a checkpoint starts from scratch" $?

# ---- 2 ranks ----
"$DDLRUN" -n 2 "$LENET" $ARGS > "$tmp/ref2" 2>&1; check "2 ranks: uninterrupted run" $?
ref2=$(crc "$tmp/ref2")
DDL_TEST_STOP_AFTER=30 "$DDLRUN" -n 2 "$LENET" $ARGS --checkpoint "$tmp/c2" --checkpoint-every 20 > "$tmp/out" 2>&1
[ $? -ne 0 ] && [ -f "$tmp/c2" ]; check "2 ranks: killed at step 30 with a checkpoint" $?
"$CKPT" show "$tmp/c2" | grep -q '^run        world size 2'; check "2 ranks: checkpoint says world size 2" $?
cp "$tmp/c2" "$tmp/c2_step20"
"$DDLRUN" -n 2 "$LENET" $ARGS --checkpoint "$tmp/c2" --checkpoint-every 20 --resume > "$tmp/res2" 2>&1
check "2 ranks: resumed run exits 0" $?
[ -n "$ref2" ] && [ "$(crc "$tmp/res2")" = "$ref2" ]; check "2 ranks: same weights_crc ($ref2 vs $(crc "$tmp/res2"))" $?

# ---- another world size: 2 ranks' checkpoint on 1 rank ----
"$LENET" $ARGS --checkpoint "$tmp/c2_step20" --resume > "$tmp/res21" 2>&1
check "2 -> 1 rank: exits 0" $?
grep -q "world size changed: the checkpoint was written by 2 ranks, resuming on 1" "$tmp/res21"
check "2 -> 1 rank: says the world size changed" $?
acc=$(sed -n 's/.*test_acc=\([0-9.]*\).*/\1/p' "$tmp/res21")
awk -v a="${acc:-0}" 'BEGIN { exit !(a > 0.7) }'; check "2 -> 1 rank: finishes with test_acc $acc > 0.7" $?

# ---- kill -9 in the middle of a save: the previous checkpoint survives ----
DDL_TEST_STOP_AFTER=20 "$LENET" $ARGS --checkpoint "$tmp/c5" --checkpoint-every 20 > /dev/null 2>&1
sum0=$(cksum < "$tmp/c5")
"$LENET" $ARGS --save-rate 204800 --checkpoint "$tmp/c5" --checkpoint-every 20 --resume > /dev/null 2>&1 &
pid=$!
i=0   # wait until the save of step 40 has written some of its .tmp (at most 20 s)
while [ $i -lt 400 ] && [ "$(stat -c %s "$tmp/c5.tmp" 2>/dev/null || echo 0)" -lt 40000 ]; do sleep 0.05; i=$((i + 1)); done
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
[ -f "$tmp/c5.tmp" ] && [ "$(stat -c %s "$tmp/c5.tmp")" -lt "$(stat -c %s "$tmp/c5")" ]
check "killed while writing: a partial .tmp is left" $?
[ "$(cksum < "$tmp/c5")" = "$sum0" ]; check "killed while writing: the checkpoint is untouched" $?
"$CKPT" verify "$tmp/c5" > /dev/null 2>&1; check "killed while writing: the checkpoint verifies" $?
"$LENET" $ARGS --checkpoint "$tmp/c5" --checkpoint-every 20 --resume > "$tmp/res5" 2>&1
grep -q "at step 20 (epoch 1)" "$tmp/res5" && [ "$(crc "$tmp/res5")" = "$ref1" ]
check "killed while writing: resumes from the previous checkpoint, same weights_crc" $?
[ ! -e "$tmp/c5.tmp" ]; check "killed while writing: the leftover .tmp was overwritten and renamed" $?

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
