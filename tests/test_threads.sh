#!/bin/sh
# test_threads.sh - --threads in training: LeNet and U-Net with 1, 2 and 3 threads train to the
# same weights (the pool cuts work the same way whatever the count); 2 ranks of 2 threads each
# over shm match 2 ranks of 1, also in micro-batches; a bad count is refused with a message naming
# it.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
DATA=/usr/share/datasets/fashion-mnist
[ -d "$DATA" ] || { echo "skipped: no $DATA"; echo "0 passed, 0 failed"; exit 0; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
for t in 1 2 3; do
    "$BUILD/bin/lenet" --epochs 1 --train-limit 3000 --quiet --data "$DATA" --threads $t > "$tmp/lenet.$t" 2>&1
    check "LeNet trains with --threads $t" $?
    "$BUILD/bin/unet" --epochs 1 --train-limit 96 --quiet --threads $t > "$tmp/unet.$t" 2>&1
    check "U-Net trains with --threads $t" $?
done
for m in lenet unet; do
    a=$(crc "$tmp/$m.1"); b=$(crc "$tmp/$m.2"); c=$(crc "$tmp/$m.3")
    [ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ]; check "$m: the same weights with 1, 2 and 3 threads ($a $b $c)" $?
done
export DDL_TOKEN=threads-test-secret-0123456789
for t in 1 2; do
    "$BUILD/bin/ddlrun" -n 2 -t shm "$BUILD/bin/lenet" --epochs 1 --train-limit 3000 --quiet --data "$DATA" \
        --threads $t > "$tmp/ranks.$t" 2>&1
    check "2 ranks of $t thread(s) train" $?
done
a=$(crc "$tmp/ranks.1"); b=$(crc "$tmp/ranks.2")
[ -n "$a" ] && [ "$a" = "$b" ]; check "2 ranks: the same weights with 1 and 2 threads each ($a $b)" $?
# micro-batches on ranks: 2 parts of 32 per rank (global batch 128), the gradients all-reduced
# after the parts: the same weights at 1 and 2 threads, and with DDL_OVERLAP=1 (which warns)
for run in "1 0" "2 0" "2 1"; do
    set -- $run
    DDL_OVERLAP=$2 "$BUILD/bin/ddlrun" -n 2 -t shm "$BUILD/bin/lenet" --epochs 1 --train-limit 3000 --quiet \
        --data "$DATA" --batch 128 --micro-batches 2 --threads $1 > "$tmp/micro.$1.$2" 2>&1
    check "2 ranks of 2 micro-batches, $1 thread(s), DDL_OVERLAP=$2 train" $?
done
a=$(crc "$tmp/micro.1.0"); b=$(crc "$tmp/micro.2.0"); c=$(crc "$tmp/micro.2.1")
[ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ]; check "2 ranks of 2 micro-batches: the same weights ($a $b $c)" $?
grep -q "DDL_OVERLAP with 2 micro-batches" "$tmp/micro.2.1"; check "DDL_OVERLAP with micro-batches warns" $?
"$BUILD/bin/lenet" --threads 0 --epochs 1 --train-limit 100 --quiet --data "$DATA" > "$tmp/bad" 2>&1
[ $? -ne 0 ] && grep -q -- "--threads" "$tmp/bad"; check "--threads 0 is refused naming the flag: $(head -c 120 "$tmp/bad")" $?
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
