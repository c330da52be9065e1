#!/bin/sh
# test_compress.sh - DDL_COMPRESS in training: LeNet on 2 ranks with bf16 and fp16 gradients
# trains to the same weights over shm and tcp (the result does not depend on the transport),
# other weights than float32 (the compression is applied), a test accuracy within 0.03 of
# float32's after one short epoch; a bad value is refused with a message naming it.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
DATA=/usr/share/datasets/fashion-mnist
[ -d "$DATA" ] || { echo "skipped: no $DATA"; echo "0 passed, 0 failed"; exit 0; }
export OPENBLAS_NUM_THREADS=1 DDL_TOKEN=compress-test-secret-0123456789
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
run() { DDL_COMPRESS=$1 "$BUILD/bin/ddlrun" -n 2 -t "$2" "$BUILD/bin/lenet" --epochs 1 --train-limit 6000 --quiet \
        --data "$DATA" > "$tmp/$1.$2" 2>&1; }
acc() { sed -n 's/^summary:.* test_acc=\([0-9.]*\).*/\1/p' "$1"; }
for z in none bf16 fp16; do
    for t in shm tcp; do
        run $z $t; check "DDL_COMPRESS=$z over $t trains" $?
    done
done
for z in bf16 fp16; do
    a=$(crc "$tmp/$z.shm"); b=$(crc "$tmp/$z.tcp"); n=$(crc "$tmp/none.shm")
    [ -n "$a" ] && [ "$a" = "$b" ]; check "$z: the same weights over shm and tcp ($a, $b)" $?
    [ -n "$a" ] && [ "$a" != "$n" ]; check "$z: other weights than float32 ($a, $n)" $?
    awk -v a="$(acc "$tmp/$z.tcp")" -v b="$(acc "$tmp/none.tcp")" 'BEGIN { exit !(a > 0.5 && a - b < 0.03 && b - a < 0.03) }'
    check "$z: test accuracy $(acc "$tmp/$z.tcp") within 0.03 of float32's $(acc "$tmp/none.tcp")" $?
done
DDL_COMPRESS=int4 "$BUILD/bin/ddlrun" -n 2 -t tcp "$BUILD/bin/lenet" --epochs 1 --train-limit 600 --quiet \
    --data "$DATA" > "$tmp/bad" 2>&1
[ $? -ne 0 ] && grep -q "DDL_COMPRESS=int4: expected none, bf16 or fp16" "$tmp/bad"
check "DDL_COMPRESS=int4 is refused, naming the value" $?
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
