#!/bin/sh
# test_train.sh - ddl-train on data nobody tuned ddl for, as a user would run it:
#  - a generated 3-class RGB fruit folder (JPEG, tests/train/make_fruits.py) trains with --arch
#    cnn on 2 ranks to >= 0.95 test accuracy, with the same weights over shm and tcp; --predict on the
#    test folder gives the same accuracy and a CSV of class names and probabilities;
#  - Fashion-MNIST written out as PNG folders trains with --arch lenet as the IDX files do
#    (a small version), and the IDX path matches lenet bit for bit; U-Net's scenes written as
#    .npy images and masks train with --arch unet to build/bin/unet's weights bit for bit;
#  - what goes wrong is said: a damaged JPEG named (exit 2) or left out and named with
#    --skip-bad, a FIFO named like an image passed over (not waited on), a bad
#    arch line named, a numpy file without targets, a missing flag.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
T=$BUILD/bin/ddl-train
RUN=$BUILD/bin/ddlrun
DATA=/usr/share/datasets/fashion-mnist
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
skip() { echo "skipped: $*"; echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit; }
"$PYTHON" -c 'import PIL, numpy' 2> /dev/null || skip "no python3-pil or python3-numpy (make deps)"

# ---- fruits: folders of JPEG photos, three classes ----
"$PYTHON" tests/train/make_fruits.py "$tmp/fruits" 300 100 32
check "the fruit set is made" $?
F="--data $tmp/fruits/train --test $tmp/fruits/test --arch cnn --image-size 32 --batch 32 --lr 0.02 --quiet"
"$RUN" -n 2 "$T" $F --augment flip,crop --epochs 12 --save "$tmp/fruits.ckpt" > "$tmp/two" 2>&1
check "ddl-train cnn on 2 ranks exits 0" $?
acc=$(field test_acc < "$tmp/two")
awk -v a="$acc" 'BEGIN { exit !(a >= 0.95) }'; check "cnn on the fruit folders: test accuracy $acc >= 0.95" $?
grep -q "^summary: model=cnn transport=shm world=2 " "$tmp/two"; check "the summary names the arch and the ranks" $?
# the same weights over tcp as over shm, on 2 epochs of the same run (the 12 above train once)
"$RUN" -n 2 -t shm "$T" $F --augment flip,crop --epochs 2 > "$tmp/shm2" 2>&1
"$RUN" -n 2 -t tcp "$T" $F --augment flip,crop --epochs 2 > "$tmp/tcp" 2>&1
[ -n "$(crc "$tmp/shm2")" ] && [ "$(crc "$tmp/tcp")" = "$(crc "$tmp/shm2")" ]
check "tcp gives shm's weights ($(crc "$tmp/tcp") vs $(crc "$tmp/shm2"))" $?

# --predict: a program that knows nothing of the network or the class names
"$T" --predict --model "$tmp/fruits.ckpt" --images "$tmp/fruits/test" --out "$tmp/p.csv" > "$tmp/pred" 2>&1
check "--predict on the test folder exits 0" $?
grep -q "^predicted 300 images in .*: accuracy $acc on the 300 whose folder names their class$" "$tmp/pred"
check "--predict's accuracy is the summary's ($acc)" $?
[ "$(head -n 1 "$tmp/p.csv")" = "file,predicted,p_apple,p_guava,p_kiwi" ] && [ "$(wc -l < "$tmp/p.csv")" -eq 301 ] &&
    grep -q "^\"$tmp/fruits/test/kiwi/0000.jpg\",[a-z]*\(,[0-9][0-9.e+-]*\)\{3\}$" "$tmp/p.csv"
check "the CSV: a header of class names, a row per file with its class name and probabilities" $?
"$T" --predict --model "$tmp/fruits.ckpt" --images "$tmp/fruits/test/apple/0001.jpg" > "$tmp/one.pred" 2>&1
grep -q "^predicted 1 image in " "$tmp/one.pred" && grep -q "^$tmp/fruits/test/apple/0001.jpg: [a-z]* (p [01]\.[0-9]*)$" "$tmp/one.pred"
check "--predict on one file: its class and probability, 1 image" $?
if "$PYTHON" -c 'import onnx' 2> /dev/null; then # the class names in the ONNX export's metadata
    "$BUILD/bin/ddl-ckpt" export "$tmp/fruits.ckpt" "$tmp/fruits.onnx" > /dev/null 2>&1 &&
        [ "$("$PYTHON" -c 'import json, onnx, sys; m = onnx.load(sys.argv[1])
print(",".join(json.loads({p.key: p.value for p in m.metadata_props}["ddl.class_names"])))' "$tmp/fruits.onnx")" = apple,guava,kiwi ]
    check "the ONNX export carries the class names (metadata ddl.class_names)" $?
else
    echo "skipped: the class names in the ONNX metadata (no python3-onnx: make deps)"
fi

# ddl-serve serves the graph checkpoint: its metadata names the classes and the per-channel normalisation
if [ -x "$BUILD/bin/ddl-serve" ]; then
    port=$(free_port)
    "$BUILD/bin/ddl-serve" --model fruits="$tmp/fruits.ckpt" --listen "127.0.0.1:$port" > "$tmp/serve.log" 2>&1 &
    spid=$!
    for i in $(seq 1 50); do curl -s "127.0.0.1:$port/ping" > /dev/null 2>&1 && break; sleep 0.1; done
    meta=$(curl -s "127.0.0.1:$port/v1/models/fruits/metadata")
    kill $spid; wait $spid 2> /dev/null
    printf '%s' "$meta" | "$PYTHON" -c 'import json, sys; d = json.load(sys.stdin)["ddl"]
sys.exit(not (d["model"] == "graph" and d["class_names"] == ["apple", "guava", "kiwi"] and len(d["normalisation"]["std"]) == 3))'
    check "ddl-serve serves the graph checkpoint, naming its classes and per-channel normalisation" $?
else
    echo "skipped: serving the graph checkpoint (ddl-serve not built: WITH_SERVE=0)"
fi

# ---- Fashion-MNIST as PNG folders, against its IDX files ----
if [ -d "$DATA" ]; then
    "$PYTHON" tests/train/fashion_png.py "$DATA" "$tmp/fpng" 6000 2000
    check "Fashion-MNIST written as PNG folders" $?
    "$T" --data "$tmp/fpng/train" --test "$tmp/fpng/test" --arch lenet --epochs 3 --quiet > "$tmp/png" 2>&1
    check "lenet on the PNG folders exits 0" $?
    "$T" --data "$DATA" --arch lenet --epochs 3 --train-limit 6000 --quiet > "$tmp/idx" 2>&1
    check "lenet on the IDX files exits 0" $?
    "$BUILD/bin/lenet" --epochs 3 --train-limit 6000 --schedule cosine --quiet > "$tmp/lenet" 2>&1
    [ "$(crc "$tmp/idx")" = "$(crc "$tmp/lenet")" ]
    check "ddl-train --arch lenet on IDX gives build/bin/lenet's weights ($(crc "$tmp/idx"))" $?
    # the PNG test set is the first 2000 of t10k: accuracy within 0.03 of IDX's on all 10000
    a=$(field test_acc < "$tmp/png"); b=$(field test_acc < "$tmp/idx")
    awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; exit !(a > 0.7 && d < 0.03 && d > -0.03) }'
    check "PNG folders train as IDX does (test accuracy $a vs $b)" $?
else
    echo "skipped: Fashion-MNIST as PNG folders (no $DATA: apt-get install dataset-fashion-mnist)"
fi

# ---- --cache: a folder decoded once ----
C="--data $tmp/fruits/train --arch cnn:4 --image-size 32 --epochs 1 --batch 32 --cache $tmp/c"
"$T" $C > "$tmp/c1" 2>&1 && grep -q "^data: 900 training images of 3x32x32, 3 classes, loaded in .* (decoded, cached)$" "$tmp/c1"
check "--cache: the first start decodes and writes the cache" $?
"$T" $C > "$tmp/c2" 2>&1 && grep -q "(from --cache)$" "$tmp/c2" && [ "$(crc "$tmp/c1")" = "$(crc "$tmp/c2")" ]
check "--cache: the second start reads it, and trains to the same weights" $?
"$T" $C --image-size 24 > "$tmp/c3" 2>&1 && grep -q "a cache of other data or another size" "$tmp/c3" &&
    grep -q "(decoded, cached)$" "$tmp/c3"
check "--cache: another image size is not taken from it" $?
cp "$tmp/fruits/train/apple/0000.jpg" "$tmp/fruits/train/apple/extra.jpg"
"$T" $C > "$tmp/c4" 2>&1 && grep -q "^data: 901 training images" "$tmp/c4"
check "--cache: an image added to a class folder is seen" $?
printf 'x' | dd of="$tmp/c" bs=1 seek=5000 conv=notrunc 2> /dev/null
"$T" $C > "$tmp/c5" 2>&1 && grep -q "CRC-32 does not match: it is damaged" "$tmp/c5" && grep -q "^data: 901 " "$tmp/c5"
check "--cache: a damaged cache is said and decoded again" $?
rm -f "$tmp/fruits/train/apple/extra.jpg"

# ---- many classes: 40 folders of a few 8x8 PNGs each ----
"$PYTHON" - "$tmp/many" <<'PY'
import os, sys
import numpy as np
from PIL import Image
rng = np.random.default_rng(4)
for c in range(40):
    d = os.path.join(sys.argv[1], "class%02d" % c)
    os.makedirs(d)
    for i in range(3):
        Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8), "RGB").save(os.path.join(d, "%d.png" % i))
PY
"$T" --data "$tmp/many" --test "$tmp/many" --arch cnn:4 --image-size 8 --epochs 1 --batch 24 --save "$tmp/many.ckpt" > "$tmp/e" 2>&1
check "40 classes train" $?
"$T" --predict --model "$tmp/many.ckpt" --images "$tmp/many" --out "$tmp/many.csv" > "$tmp/e" 2>&1 &&
    [ "$(head -n 1 "$tmp/many.csv" | tr ',' '\n' | grep -c '^p_class')" -eq 40 ]
check "--predict of 40 classes: a probability column per class name" $?

# ---- pre-normalised float arrays, and 300 classes from numpy labels ----
"$PYTHON" - "$tmp/fl" <<'PY'
import os, sys
import numpy as np
d = sys.argv[1]; os.makedirs(d)
rng = np.random.default_rng(5)
def part(n, k):  # class c lights square c of a 4x4 grid of 4x4 squares (16x16 images)
    y = rng.integers(0, k, n)
    x = rng.integers(0, 40, (n, 1, 16, 16)).astype(np.float32)
    for i, c in enumerate(y):
        r, q = divmod(int(c) % 16, 4)
        x[i, 0, 4 * r:4 * r + 4, 4 * q:4 * q + 4] += 200
    return (x / 255 - 0.2) / 0.3, y  # torchvision's Normalize: values below 0 and above 1
for name, n in (("train", 960), ("test", 240)):
    x, y = part(n, 3)
    np.save(os.path.join(d, name + "_x.npy"), x.astype(np.float32)); np.save(os.path.join(d, name + "_y.npy"), y)
x, _ = part(600, 16)
np.save(os.path.join(d, "wide_x.npy"), x.astype(np.float32))
np.save(os.path.join(d, "wide_y.npy"), (np.arange(600) % 300).astype(np.int32))
PY
"$T" --data "$tmp/fl/train_x.npy" --targets "$tmp/fl/train_y.npy" --test "$tmp/fl/test_x.npy" \
    --test-targets "$tmp/fl/test_y.npy" --arch cnn:4 --epochs 2 --batch 32 > "$tmp/fl/out" 2>&1
a=$(field test_acc < "$tmp/fl/out")
awk -v a="${a:-0}" 'BEGIN { exit !(a >= 0.95) }'
check "pre-normalised float32 arrays (values from -0.67 to 2.5) train as floats: test accuracy $a >= 0.95" $?
"$T" --data "$tmp/fl/wide_x.npy" --targets "$tmp/fl/wide_y.npy" --arch cnn:4 --epochs 1 --batch 32 \
    --save "$tmp/fl/wide.ckpt" > "$tmp/fl/wout" 2>&1 && grep -q "^data: 600 training images of 1x16x16, 300 classes" "$tmp/fl/wout" &&
    "$BUILD/bin/ddl-ckpt" show "$tmp/fl/wide.ckpt" 2>&1 | grep -q "input 1x16x16, 300 classes"
check "300 classes from numpy labels train and are saved (labels past 256 are uint16)" $?

# ---- U-Net's scenes as numpy arrays: build/bin/unet's weights, bit for bit ----
if [ -d "$DATA" ]; then
    mkdir -p "$tmp/sc"
    "$BUILD/tests/test_numpy" --scenes "$tmp/sc" 160 40 32 42; check "unet's scenes written as .npy" $?
    U="--epochs 2 --batch 16 --quiet --seed 42"
    "$BUILD/bin/unet" --scenes 160 --test-scenes 40 --size 32 --depth 2 --width 4 $U > "$tmp/unet" 2>&1
    "$T" --data "$tmp/sc/train_x.npy" --targets "$tmp/sc/train_y.npy" --test "$tmp/sc/test_x.npy" \
        --test-targets "$tmp/sc/test_y.npy" --arch unet:2:4 --optimizer adam --lr 0.002 $U > "$tmp/npy" 2>&1
    check "ddl-train --arch unet on .npy images and masks exits 0" $?
    d1=$(field dice < "$tmp/unet"); d2=$(field dice < "$tmp/npy")
    [ -n "$d1" ] && [ "$d1" = "$d2" ] && [ "$(crc "$tmp/unet")" = "$(crc "$tmp/npy")" ]
    check "U-Net on .npy scenes: unet's dice ($d1, $d2) and weights ($(crc "$tmp/unet"), $(crc "$tmp/npy"))" $?
else
    echo "skipped: U-Net's scenes as .npy (no $DATA: apt-get install dataset-fashion-mnist)"
fi

# ---- what goes wrong is said ----
mkdir -p "$tmp/bad/a" "$tmp/bad/b"
cp "$tmp/fruits/train/apple/000"[0-4].jpg "$tmp/bad/a/"; cp "$tmp/fruits/train/kiwi/000"[0-4].jpg "$tmp/bad/b/"
head -c 300 "$tmp/fruits/train/kiwi/0009.jpg" > "$tmp/bad/b/broken.jpg"
"$T" --data "$tmp/bad" --arch cnn:4 --image-size 16 --epochs 1 --batch 4 > "$tmp/e" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "bad/b/broken.jpg" "$tmp/e"; check "a damaged JPEG: exit 2, the file named" $?
"$T" --data "$tmp/bad" --arch cnn:4 --image-size 16 --epochs 1 --batch 4 --skip-bad > "$tmp/e" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "left out 1 image that could not be decoded" "$tmp/e"; check "--skip-bad leaves it out and says so" $?
grep -q "^ddl-train: left out .*bad/b/broken.jpg: a damaged JPEG file" "$tmp/e"; check "--skip-bad names the file it left out" $?
mkfifo "$tmp/bad/a/0009.png" # a FIFO named like an image: passed over, never opened (which would wait forever)
timeout 120 "$T" --data "$tmp/bad" --arch cnn:4 --image-size 16 --epochs 1 --batch 4 --skip-bad > "$tmp/e" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "^data: 10 training images" "$tmp/e"; check "a FIFO named 0009.png in a class folder: passed over (exit $rc)" $?
rm -f "$tmp/bad/a/0009.png"
printf 'input\nconv c1 8 3\nrelu\npool 2\ndense fc classes\n' > "$tmp/bad.arch"
"$T" --data "$tmp/bad" --arch "$tmp/bad.arch" --image-size 16 > "$tmp/e" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "bad.arch: line 4: \"pool\" is not a layer" "$tmp/e"; check "a bad arch line: exit 2, the line named" $?
"$T" --data "$tmp/bad" --arch resnet50 > "$tmp/e" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q '"resnet50" is not a preset' "$tmp/e"; check "an unknown preset: exit 2" $?
: > "$tmp/x.npy"
"$T" --data "$tmp/x.npy" --arch cnn > "$tmp/e" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "x.npy: a numpy file needs its labels or masks: --targets FILE" "$tmp/e"
check "a numpy file without --targets: exit 2, said" $?
"$T" --data "$tmp/bad" > "$tmp/e" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "training needs --data PATH and --arch ARCH" "$tmp/e"; check "no --arch: exit 2" $?
"$T" --data "$tmp/bad" --arch cnn --val "$tmp/bad" --val-split 0.1 > "$tmp/e" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "give one" "$tmp/e"; check "--val and --val-split: exit 2" $?
"$T" --data "$tmp/fruits/train" --arch cnn:4 --image-size 16 --epochs 1 --val-split 0.2 > "$tmp/e" 2>&1
grep -q "val_acc" "$tmp/e"; check "--val-split: each epoch reports the validation set" $?

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
