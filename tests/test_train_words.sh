#!/bin/sh
# test_train_words.sh - what ddl-train says where a new user looks first:
#  - --val-split with --test and --logdir: each epoch's validation figures under val/ in the
#    event file, never test/; the test set's accuracy and loss once, after the last epoch, equal
#    to the summary line's;
#  - --predict on one file prints its class (the checkpoint's class name) and probability, and
#    "predicted 1 image" (singular); --out - writes the CSV to standard output (the report to
#    standard error) and creates no file named "-";
#  - ddl-serve --help says what --model takes (any ddl checkpoint), not "lenet or unet".
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
T=$BUILD/bin/ddl-train
if [ ! -x "$T" ] || [ ! -x "$BUILD/bin/ddl-plot" ] || ! "$PYTHON" -c "import PIL" 2> /dev/null; then
    echo "skipped: needs $T, ddl-plot and python3-pil"; echo "0 passed, 0 failed"; exit 0
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
"$PYTHON" - "$tmp/d" <<'PY'
import os, sys
import numpy as np
from PIL import Image
rng = np.random.default_rng(6)
for c in range(3):
    d = os.path.join(sys.argv[1], "kind%d" % c)
    os.makedirs(d)
    for i in range(24):
        px = np.clip(rng.normal(60 + 70 * c, 30, (16, 16, 3)), 0, 255).astype(np.uint8)
        Image.fromarray(px, "RGB").save(os.path.join(d, "%02d.png" % i))
PY

# ---- val/ and test/ in the event file ----
"$T" --data "$tmp/d" --val-split 0.25 --test "$tmp/d" --arch cnn:4 --image-size 16 --epochs 2 --batch 12 \
    --logdir "$tmp/logs" --save "$tmp/m.ckpt" > "$tmp/out" 2>&1
check "ddl-train --val-split --test --logdir: exit 0" $?
"$BUILD/bin/ddl-plot" --dump "$tmp/logs" > "$tmp/dump" 2>&1
# points TAG: "STEP=VALUE ..." of TAG's scalars (values to 4 decimals)
points() { awk -v t="$1" '$6 == "scalar" && $7 == t { printf "%s=%.4f ", $3, $8 }' "$tmp/dump"; }
va=$(points val/accuracy); vl=$(points val/loss); ta=$(points test/accuracy); tl=$(points test/loss)
acc=$(field test_acc < "$tmp/out"); loss=$(field test_loss < "$tmp/out")
echo "val/accuracy: $va; val/loss: $vl; test/accuracy: $ta; test/loss: $tl; summary test_acc=$acc test_loss=$loss"
[ "$(echo $va | wc -w)" -eq 2 ] && [ "$(echo $vl | wc -w)" -eq 2 ] && echo "$va" | grep -q "^1=.* 2=" &&
    ok || bad "each epoch's validation under val/"
[ "$ta" = "2=$acc " ] && [ "$tl" = "2=$loss " ] && ok || bad "the test set's figures once under test/, as the summary's"
val2=$(sed -n 's/^epoch 2\/2 .* val_acc \([0-9.]*\) .*/\1/p' "$tmp/out")
echo "$va" | grep -q "2=$val2 " && ok || bad "val/accuracy of epoch 2 is not the printed val_acc $val2"

# ---- --predict on one file, and --out - ----
f=$tmp/d/kind2/05.png
"$T" --predict --model "$tmp/m.ckpt" --images "$f" > "$tmp/p" 2>&1; rc=$?
echo "--predict on one file: exit $rc: $(cat "$tmp/p")"
[ $rc -eq 0 ] && grep -qx "$f: kind[0-2] (p [01]\.[0-9]\{4\})" "$tmp/p" && grep -q "^predicted 1 image in " "$tmp/p" &&
    ok || bad "--predict on one file: no class, or '1 images'"
(cd "$tmp" && "$OLDPWD/$T" --predict --model m.ckpt --images "$f" --out - > csv 2> err); rc=$?
echo "--out -: exit $rc; stdout: $(tr '\n' '|' < "$tmp/csv"); stderr: $(tr '\n' '|' < "$tmp/err")"
[ $rc -eq 0 ] && [ ! -e "$tmp/-" ] && [ "$(head -n 1 "$tmp/csv")" = "file,predicted,p_kind0,p_kind1,p_kind2" ] &&
    [ "$(wc -l < "$tmp/csv")" -eq 2 ] && grep -q "^\"$f\",kind[0-2]," "$tmp/csv" && grep -q "^predicted 1 image in " "$tmp/err" &&
    ok || bad "--out - did not write the CSV alone to standard output"
"$T" --predict --model "$tmp/m.ckpt" --images "$tmp/d" > "$tmp/p" 2>&1
grep -q "^predicted 72 images in " "$tmp/p" && ok || bad "--predict on a folder: $(cat "$tmp/p")"

# ---- ddl-serve --help ----
if [ -x "$BUILD/bin/ddl-serve" ]; then
    "$BUILD/bin/ddl-serve" --help > "$tmp/h"
    ! grep -q "lenet or unet" "$tmp/h" && grep -q "^  --model NAME=PATH   a ddl checkpoint served as NAME (lenet's, unet's or ddl-train's" "$tmp/h" &&
        ok || bad "ddl-serve --help: --model"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
