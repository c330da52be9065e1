#!/bin/sh
# test_sync_bn.sh - ddl-train --sync-bn (synchronised BatchNorm) on a Conv-BN-ReLU network and a
# small generated RGB folder (tests/train/make_fruits.py), 2 epochs of 3 steps whose last batch
# of 2 leaves shards and ranks with no samples:
#  - with 4 shards, 1 process, 2 ranks and 4 ranks over shm and over tcp give the same weights
#    and running statistics (weights_crc, buffers_crc); with 6, 3 ranks over tcp give 1's;
#  - without shards, 2 ranks give the bits of 1 process in 2 micro-batches;
#  - per-shard statistics (no --sync-bn) give other running statistics: it does something;
#  - gradient compression, overlap and elastic ranks are refused: exit 2 and the reason.
# The kernels' gradients, the statistics against a reference and the allocations: test_sync_bn.c.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
T=$BUILD/bin/ddl-train
RUN=$BUILD/bin/ddlrun
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
skip() { echo "skipped: $*"; echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit; }
[ -x "$T" ] && [ -x "$RUN" ] || { echo "no $T or $RUN: build first" >&2; echo "0 passed, 1 failed"; exit 1; }
"$PYTHON" -c 'import PIL, numpy' 2> /dev/null || skip "no python3-pil or python3-numpy (make deps)"

"$PYTHON" tests/train/make_fruits.py "$tmp/fruits" 64 20 16
check "the fruit set is made" $?
cp tests/bn/small.arch "$tmp/bn.arch" # conv, BatchNorm, relu, pool, twice; gap and dense
F="--data $tmp/fruits/train --test $tmp/fruits/test --arch $tmp/bn.arch --image-size 16 --batch 32 --lr 0.05 --quiet"
F="$F --epochs 2 --train-limit 66"
bufcrc() { field buffers_crc < "$1"; }
same() { [ -n "$(crc "$1")" ] && [ "$(crc "$1")" = "$(crc "$2")" ] && [ -n "$(bufcrc "$1")" ] && [ "$(bufcrc "$1")" = "$(bufcrc "$2")" ]; }

# ---- 4 shards: the bits of one process at any world size, over shm and tcp ----
"$T" $F --accumulate 4 --sync-bn > "$tmp/one" 2>&1
check "1 process, 4 shards, --sync-bn exits 0" $?
for tp in shm tcp; do
    "$RUN" -n 2 -t $tp "$T" $F --accumulate 2 --sync-bn > "$tmp/two-$tp" 2>&1
    same "$tmp/one" "$tmp/two-$tp"
    check "$tp: 2 ranks (2 shards each) give 1 process's weights and running statistics ($(crc "$tmp/two-$tp") $(bufcrc "$tmp/two-$tp") vs $(crc "$tmp/one") $(bufcrc "$tmp/one"))" $?
    "$RUN" -n 4 -t $tp "$T" $F --accumulate 1 --sync-bn > "$tmp/four-$tp" 2>&1
    same "$tmp/one" "$tmp/four-$tp"
    check "$tp: 4 ranks (a shard each) give 1 process's weights and running statistics ($(crc "$tmp/four-$tp") $(bufcrc "$tmp/four-$tp") vs $(crc "$tmp/one") $(bufcrc "$tmp/one"))" $?
done

# 6 shards, not a power of two: 3 ranks over tcp give 1 process's bits
"$T" $F --accumulate 6 --sync-bn > "$tmp/six" 2>&1
"$RUN" -n 3 -t tcp "$T" $F --accumulate 2 --sync-bn > "$tmp/three" 2>&1
same "$tmp/six" "$tmp/three"
check "tcp: 3 ranks (2 shards each) give 1 process's bits with 6 shards ($(crc "$tmp/three") $(bufcrc "$tmp/three") vs $(crc "$tmp/six") $(bufcrc "$tmp/six"))" $?

# ---- without shards: ranks are micro-batches across processes ----
"$RUN" -n 2 "$T" $F --sync-bn > "$tmp/r2" 2>&1
"$T" $F --micro-batches 2 --sync-bn > "$tmp/m2" 2>&1
same "$tmp/r2" "$tmp/m2"
check "2 ranks give the bits of 1 process in 2 micro-batches ($(crc "$tmp/r2") $(bufcrc "$tmp/r2") vs $(crc "$tmp/m2") $(bufcrc "$tmp/m2"))" $?

# ---- per-shard statistics are another thing ----
"$T" $F --accumulate 4 > "$tmp/own" 2>&1
[ -n "$(bufcrc "$tmp/own")" ] && [ "$(bufcrc "$tmp/own")" != "$(bufcrc "$tmp/one")" ] && [ "$(crc "$tmp/own")" != "$(crc "$tmp/one")" ]
check "per-shard statistics give other weights and running statistics ($(bufcrc "$tmp/own") vs $(bufcrc "$tmp/one"))" $?

# ---- refused: exit 2, the reason named ----
F1="$F --epochs 1 --sync-bn"
DDL_COMPRESS=bf16 "$RUN" -n 2 "$T" $F1 > "$tmp/out" 2>&1
[ $? -eq 2 ] && grep -q "sync_bn: not with gradient compression (DDL_COMPRESS)" "$tmp/out"
check "--sync-bn with DDL_COMPRESS=bf16: exit 2, named ($(grep -m1 sync_bn "$tmp/out"))" $?
DDL_OVERLAP=1 "$RUN" -n 2 "$T" $F1 > "$tmp/out" 2>&1
[ $? -eq 2 ] && grep -q "sync_bn: not with overlap 1 (DDL_OVERLAP)" "$tmp/out"
check "--sync-bn with DDL_OVERLAP=1: exit 2, named ($(grep -m1 sync_bn "$tmp/out"))" $?
"$RUN" -n 2 --elastic 1:2 --replacements 0 "$T" $F1 > "$tmp/out" 2>&1
[ $? -eq 2 ] && grep -q "sync_bn: not on an elastic comm" "$tmp/out"
check "--sync-bn with --elastic: exit 2, named ($(grep -m1 sync_bn "$tmp/out"))" $?
DDL_OVERLAP=1 "$RUN" -n 2 "$T" $F1 --accumulate 1 > "$tmp/out" 2>&1
check "with shards, DDL_OVERLAP does not apply: taken" $?

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
