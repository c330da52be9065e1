#!/bin/sh
# test_predict.sh - lenet --predict and unet --predict with a briefly trained model: the accuracy
# (and for U-Net dice and mean IoU) is the one training reported for the same test data; the CSV
# has a header and one row per image whose probabilities sum to 1; under ddlrun -n 2 and -n 3
# the CSV and the PNG masks are byte for byte a one-rank run's (cmp); each bad input (a missing,
# truncated or foreign model, images of the wrong size, an empty IDX file, labels that do not
# match) gives one line naming the file and exit 1, flags out of place exit 2; --out - puts the
# CSV alone on standard output.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
B=$BUILD/bin
DATA=/usr/share/datasets/fashion-mnist
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
export OPENBLAS_NUM_THREADS=1
for p in lenet unet ddlrun; do
    [ -x "$B/$p" ] || { echo "no $B/$p: build first"; echo "0 passed, 1 failed"; exit 1; }
done
if [ ! -d "$DATA" ]; then
    echo "skipped: no Fashion-MNIST in $DATA (apt-get install dataset-fashion-mnist)"
    echo "0 passed, 0 failed"; exit 0
fi
# one_line FILE TEXT: FILE is exactly one line and holds TEXT
one_line() { [ "$(wc -l < "$1")" -eq 1 ] && grep -qF -- "$2" "$1"; }

# ---- lenet ----
"$B/lenet" --epochs 1 --train-limit 6000 --quiet --save "$tmp/lenet" > "$tmp/train" 2>&1
check "lenet trains and saves" $?
trained=$(field test_acc < "$tmp/train")
"$B/lenet" --predict --model "$tmp/lenet" --out "$tmp/1.csv" > "$tmp/p1" 2>&1
check "lenet --predict exits 0" $?
acc=$(field accuracy < "$tmp/p1")
[ -n "$acc" ] && [ "$acc" = "$trained" ]; check "predict's accuracy ($acc) is training's test_acc ($trained)" $?
grep -q '^confusion matrix (rows: truth, columns: predicted)$' "$tmp/p1" &&
    [ "$(grep -c '^  [ 0-9][0-9]\( \{1,\}[0-9]\{1,\}\)\{10\}$' "$tmp/p1")" -eq 10 ]
check "a 10 x 10 confusion matrix" $?
# --out -: the CSV alone on standard output (the report on standard error), no file named "-"
(bin=$(cd "$B" && pwd) && cd "$tmp" && "$bin/lenet" --predict --model "$tmp/lenet" --out - > "$tmp/stdout.csv" 2> "$tmp/stderr")
rc=$?
[ $rc -eq 0 ] && [ ! -e "$tmp/-" ] && cmp -s "$tmp/stdout.csv" "$tmp/1.csv" && grep -q '^summary: ' "$tmp/stderr"
check "--out -: exit $rc, the CSV on standard output, the summary on standard error, no file named -" $?
ips=$(field images_per_sec < "$tmp/p1"); [ "${ips:-0}" -gt 0 ]; check "images/s reported ($ips)" $?
[ "$(head -n 1 "$tmp/1.csv")" = "index,predicted,truth,p0,p1,p2,p3,p4,p5,p6,p7,p8,p9" ] &&
    [ "$(wc -l < "$tmp/1.csv")" -eq 10001 ]
check "CSV: header and 10000 rows" $?
awk -F, 'NR > 1 { s = 0; for (i = 4; i <= 13; i++) s += $i; m = 4; for (i = 5; i <= 13; i++) if ($i > $m) m = i;
    if (s < 0.999 || s > 1.001 || $1 != NR - 2 || m - 4 != $2 || $3 !~ /^[0-9]$/) bad++ } END { exit bad > 0 }' "$tmp/1.csv"
check "CSV rows: index in order, probabilities sum to 1, predicted is their argmax, truth a class" $?
right=$(awk -F, 'NR > 1 && $2 == $3 { n++ } END { print n }' "$tmp/1.csv")
[ "$(echo "$right / 10000 == $acc" | bc -l)" = 1 ]; check "CSV agrees with the accuracy ($right right)" $?
for n in 2 3; do
    "$B/ddlrun" -n $n "$B/lenet" --predict --model "$tmp/lenet" --out "$tmp/$n.csv" > "$tmp/p$n" 2>&1
    check "ddlrun -n $n lenet --predict exits 0" $?
    cmp -s "$tmp/1.csv" "$tmp/$n.csv"; check "the CSV of $n ranks is the CSV of 1 rank (cmp)" $?
    [ "$(field accuracy < "$tmp/p$n")" = "$acc" ] && [ "$(grep -c '^summary:' "$tmp/p$n")" -eq 1 ]
    check "$n ranks: one summary, the same accuracy" $?
done
"$B/ddlrun" -n 3 "$B/lenet" --predict --model "$tmp/lenet" --batch 7 --out "$tmp/3b.csv" > /dev/null 2>&1 &&
    "$B/lenet" --predict --model "$tmp/lenet" --batch 7 --out "$tmp/1b.csv" > /dev/null 2>&1 && cmp -s "$tmp/1b.csv" "$tmp/3b.csv"
check "--batch 7 (passes that do not divide 10000): 3 ranks = 1 rank" $?
# an IDX file of images, its labels found beside it; then without labels
"$B/lenet" --predict --model "$tmp/lenet" --images "$DATA/t10k-images-idx3-ubyte.gz" --out "$tmp/f.csv" > "$tmp/pf" 2>&1 &&
    cmp -s "$tmp/1.csv" "$tmp/f.csv"
check "--images t10k-images: labels found beside it, the same CSV" $?
cp "$DATA/t10k-images-idx3-ubyte.gz" "$tmp/x.gz"
"$B/lenet" --predict --model "$tmp/lenet" --images "$tmp/x.gz" --out "$tmp/x.csv" > "$tmp/px" 2>&1 &&
    grep -q '(no labels)$' "$tmp/px" && [ "$(sed -n 2p "$tmp/x.csv" | cut -d, -f3)" = "" ] &&
    [ "$(cut -d, -f2 "$tmp/x.csv")" = "$(cut -d, -f2 "$tmp/1.csv")" ]
check "--images without labels: no accuracy, empty truth, the same predictions" $?

# ---- bad input: one line naming the file, exit 1 ----
bad_input() { # NAME EXPECTED-TEXT ARGS...
    name=$1 text=$2; shift 2
    "$B/lenet" --predict "$@" > "$tmp/out" 2> "$tmp/err"; rc=$?
    [ $rc -eq 1 ] && one_line "$tmp/err" "$text"; check "$name: exit 1 and one line: $text" $?
    [ $rc -eq 1 ] && one_line "$tmp/err" "$text" || { echo "  got exit $rc:"; cat "$tmp/err"; }
}
bad_input "missing model" "lenet: $tmp/none: cannot open: No such file" --model "$tmp/none"
head -c 3000 "$tmp/lenet" > "$tmp/cut"
bad_input "truncated model" "lenet: $tmp/cut: truncated" --model "$tmp/cut"
bad_input "not a model" "lenet: $DATA/t10k-labels-idx1-ubyte.gz: not a ddl checkpoint" --model "$DATA/t10k-labels-idx1-ubyte.gz"
printf '\0\0\10\3\0\0\0\2\0\0\0\40\0\0\0\40' > "$tmp/w.idx"; head -c 2048 /dev/zero >> "$tmp/w.idx"
bad_input "32x32 images" "lenet: $tmp/w.idx: images of 32x32, lenet takes 28x28" --model "$tmp/lenet" --images "$tmp/w.idx"
printf '\0\0\10\3\0\0\0\0\0\0\0\34\0\0\0\34' > "$tmp/e.idx"
bad_input "empty IDX" "lenet: $tmp/e.idx: dimension 1 of 3 is 0" --model "$tmp/lenet" --images "$tmp/e.idx"
bad_input "labels of another file" "lenet: $DATA/train-labels-idx1-ubyte.gz: 60000 labels for the 10000 images" \
    --model "$tmp/lenet" --images "$DATA/t10k-images-idx3-ubyte.gz" --labels "$DATA/train-labels-idx1-ubyte.gz"
"$B/ddlrun" -n 2 "$B/lenet" --predict --model "$tmp/cut" > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc -ne 0 ] && grep -q "lenet: rank [01]: $tmp/cut: truncated" "$tmp/err"
check "2 ranks, truncated model: non-zero exit, the file named" $?
"$B/lenet" --model "$tmp/lenet" > /dev/null 2>&1; [ $? -eq 2 ]; check "--model without --predict: exit 2" $?
"$B/lenet" --predict > /dev/null 2>&1; [ $? -eq 2 ]; check "--predict without --model: exit 2" $?

# ---- unet ----
U="--test-scenes 24 --size 32 --depth 2 --width 4"
"$B/unet" --scenes 300 $U --epochs 1 --quiet --save "$tmp/unet" > "$tmp/utrain" 2>&1
check "unet trains and saves" $?
bad_input "unet model given to lenet" "lenet: $tmp/unet: a checkpoint of model unet, expected lenet" --model "$tmp/unet"
"$B/unet" --predict --model "$tmp/unet" --test-scenes 24 --images "$tmp/m1" > "$tmp/u1" 2>&1
check "unet --predict exits 0" $?
for f in pixel_acc dice miou; do
    [ -n "$(field $f < "$tmp/u1")" ] && [ "$(field $f < "$tmp/u1")" = "$(field $f < "$tmp/utrain")" ]
    check "unet --predict's $f is training's ($(field $f < "$tmp/u1"))" $?
done
[ "$(ls "$tmp/m1" | wc -l)" -eq 24 ] && [ "$(head -c 8 "$tmp/m1/scene_0023.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] &&
    [ "$(head -c 24 "$tmp/m1/scene_0000.png" | tail -c 8 | od -An -tx1 | tr -d ' \n')" = 0000002000000020 ]
check "24 PNG masks of 32x32" $?
# ranks split the same passes of --batch scenes as one rank does (a pass of another size may round
# a product differently in the last bit, and flip a pixel on a class boundary): compare like passes
"$B/unet" --predict --model "$tmp/unet" --test-scenes 24 --batch 5 --images "$tmp/m1b5" > "$tmp/u1b5" 2>&1
check "unet --predict --batch 5 exits 0" $?
for n in 2 3; do
    "$B/ddlrun" -n $n "$B/unet" --predict --model "$tmp/unet" --test-scenes 24 --batch 5 --images "$tmp/m$n" > "$tmp/u$n" 2>&1
    check "ddlrun -n $n unet --predict exits 0" $?
    diff -r "$tmp/m1b5" "$tmp/m$n" > /dev/null && [ "$(field miou < "$tmp/u$n")" = "$(field miou < "$tmp/u1b5")" ]
    check "the masks of $n ranks are those of 1 rank (the same --batch), byte for byte, and so is mIoU" $?
done
"$B/unet" --predict --model "$tmp/lenet" > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc -eq 1 ] && one_line "$tmp/err" "unet: $tmp/lenet: a checkpoint of model lenet, expected unet"
check "lenet model given to unet: one line, exit 1" $?

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
