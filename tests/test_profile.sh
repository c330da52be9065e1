#!/bin/sh
# test_profile.sh - ddl-train --profile as a user reads it: before the summary line, rank 0's
# table: a header with the steps and the core's measured peak, a line per layer of the arch
# (its kind, shape, forward and backward ms, GFLOP/s and share of the peak; "-" where no FLOPs
# are counted), the layers' sum, and the step's split (and, without --quiet, each epoch's split
# after its line); the weights are the bits of the same run
# without it; on 2 ranks one table, rank 0's, saying so; without the flag, no table.
# ddl-test: beside (no time bound: it reads the table, not the times)
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
T=$BUILD/bin/ddl-train
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" -c 'import numpy' 2> /dev/null || { echo "skipped: no python3-numpy (make deps)"; echo "0 passed, 0 failed"; exit 0; }

# 256 random 1x28x28 images of 10 classes: the lenet preset's input
"$PYTHON" -c 'import numpy as np, sys
r = np.random.default_rng(5)
np.save(sys.argv[1] + "/x.npy", r.integers(0, 256, (256, 1, 28, 28), dtype=np.uint8))
np.save(sys.argv[1] + "/y.npy", (np.arange(256) % 10).astype(np.int64))' "$tmp"
check "the data is made" $?
A="--data $tmp/x.npy --targets $tmp/y.npy --arch lenet --epochs 1 --batch 32 --quiet"

"$T" $A --profile > "$tmp/on" 2>&1
check "ddl-train --profile exits 0" $?
"$T" $A > "$tmp/off" 2>&1
check "ddl-train without it exits 0" $?
[ -n "$(crc "$tmp/on")" ] && [ "$(crc "$tmp/on")" = "$(crc "$tmp/off")" ]
check "the same weights with --profile ($(crc "$tmp/on")) as without ($(crc "$tmp/off"))" $?
grep -q "^profile of rank 0: 8 steps, peak [0-9][0-9.]* GFLOP/s a core (\(avx512\|avx2\|scalar\))" "$tmp/on"
check "the header: rank 0, the 8 steps, the core's peak and the code that measured it" $?
peak=$(sed -n 's/.*peak \([0-9.]*\) GFLOP.*/\1/p' "$tmp/on")
awk -v p="$peak" 'BEGIN { exit !(p > 0) }'; check "the peak ($peak GFLOP/s) is measured" $?
grep -q "^layer  *kind  *shape  *fwd ms  *bwd ms  *GFLOP/s  *% peak$" "$tmp/on"; check "the column heads" $?
# the lenet preset: conv, maxpool, relu twice, flatten, three dense layers (relu and dropout between)
num='[0-9][0-9]*\.[0-9][0-9][0-9]'
grep -q "^conv1  *conv  *6x28x28  *$num  *$num  *[0-9][0-9.]*  *[0-9][0-9.]*%$" "$tmp/on"
check "conv1: kind, shape, ms forward and backward, GFLOP/s, % of peak" $?
grep -q "^fc3  *dense  *10x1x1  *$num  *$num  *[0-9][0-9.]*  *[0-9][0-9.]*%$" "$tmp/on"; check "fc3: a dense layer" $?
grep -q "^[0-9]*  *maxpool  *6x14x14  *$num  *$num  *-  *-$" "$tmp/on"; check "a pool: its times, no FLOPs" $?
[ "$(sed -n '/^layer /,/^all layers/p' "$tmp/on" | grep -c "$num  *$num")" -eq 15 ]
check "a line for each of the 14 layers after the input and their sum" $?
grep -q "^step $num ms: data $num ([0-9.]*%), compute $num ([0-9.]*%), all-reduce wait $num ([0-9.]*%), optimizer $num ([0-9.]*%)$" "$tmp/on"
check "the step's split" $?
# the layers' time (forward + backward, per step) is within the compute time
awk '/^all layers/ { l = $3 + $4 } /^step / { c = $8 } END { exit !(l > 0 && l <= c + 0.002) }' "$tmp/on"
check "the layers' sum is within the step's compute time" $?
tail -n 1 "$tmp/on" | grep -q "^summary: "; check "the summary line stays the last" $?
! grep -q "^profile of" "$tmp/off"; check "no table without --profile" $?
"$T" --help 2> /dev/null | grep -q "^  --profile "; check "--help lists --profile" $?

# not --quiet: each epoch's split too, after its line
"$T" $(echo "$A" | sed 's/ --quiet//') --profile --epochs 2 2>&1 | grep -A1 "^epoch [12]/2 " | grep -c "^  profile: step $num ms: data $num ([0-9.]*%), compute $num" > "$tmp/n"
[ "$(cat "$tmp/n")" -eq 2 ]; check "without --quiet, a split line after each epoch's" $?

# 2 ranks: rank 0's table alone, saying whose it is
if [ -x "$BUILD/bin/ddlrun" ]; then
    "$BUILD/bin/ddlrun" -n 2 "$T" $A --profile > "$tmp/two" 2>&1
    check "2 ranks with --profile exit 0" $?
    [ "$(grep -c "^profile of rank" "$tmp/two")" -eq 1 ] &&
        grep -q "^profile of rank 0 of 2 (each rank times its own; this is rank 0's): 8 steps" "$tmp/two"
    check "2 ranks: one table, rank 0's, saying so" $?
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
