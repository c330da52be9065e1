#!/bin/sh
# test_serve_browser.sh - ddl-serve's page in Debian's chromium, driven by playwright-core
# (tests/serve/browser.js; both installed by tools/install-deps.sh): an uploaded test image
# shows the class the API gives for it, with its bar chart; a stroke drawn with the mouse
# shows a class; a colour model trained for a few steps on a folder of photos
# (tests/train/make_fruits.py) shows, for a JPEG, a PNG and a BMP of other sizes than its input,
# the API's probabilities of the file under the checkpoint's class names, and a class for a
# drawing; a screenshot is taken; the Training tab's charts have the points of --logdir,
# its runs named by their directory (lenet-run for the run in --logdir itself, trial-0001 for a
# 3-epoch run below it), each run's per-epoch test curves drawn with a dot per epoch spread along
# the step axis, and both axes ticked and labelled.
# Prints "skipped: REASON" when chromium, node or playwright-core is missing or cannot run.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
B=$BUILD/bin
DATA=/usr/share/datasets/fashion-mnist
export OPENBLAS_NUM_THREADS=1
CHROMIUM=$(command -v chromium || command -v chromium-browser)
skip() { echo "skipped: $1"; echo "0 passed, 0 failed"; exit 0; }
[ -x "$B/ddl-serve" ] || skip "no $B/ddl-serve"
[ -n "$CHROMIUM" ] || skip "no chromium (apt-get install chromium)"
command -v node > /dev/null || skip "no node"
[ -d tests/serve/node_modules/playwright-core ] || skip "no playwright-core (sh tools/install-deps.sh)"
[ -d "$DATA" ] || skip "no $DATA"
tmp=$(mktemp -d) || exit 1
pid=""
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT

"$B/lenet" --epochs 1 --train-limit 6000 --quiet --save "$tmp/lenet.ckpt" --logdir "$tmp/lenet-run" > /dev/null 2>&1
check "lenet trains" $?
mkdir -p "$tmp/lenet-run/trial-0001/logs" &&   # a sweep's trial below it: 3 epochs of 200 steps
    "$PYTHON" tests/events.py "$tmp/lenet-run/trial-0001/logs/events.out.tfevents.1.host" \
        train/loss=100:2.0,200:1.6 train/accuracy=100:0.3,200:0.5 test/loss=1:1.5 test/accuracy=1:0.55 \
        train/loss=300:1.3,400:1.2 train/accuracy=300:0.6,400:0.65 test/loss=2:1.2 test/accuracy=2:0.66 \
        train/loss=500:1.1,600:1.0 train/accuracy=500:0.7,600:0.72 test/loss=3:1.1 test/accuracy=3:0.7
check "a second run's event file" $?
"$B/unet" --epochs 1 --scenes 200 --test-scenes 20 --quiet --save "$tmp/unet.ckpt" > /dev/null 2>&1
check "unet trains" $?
"$PYTHON" -c "
import gzip, json, sys
raw = gzip.open('$DATA/t10k-images-idx3-ubyte.gz').read()[16:16 + 784]
json.dump(list(raw), open('$tmp/px.json', 'w')); json.dump({'instances': [list(raw)]}, open('$tmp/one.json', 'w'))"
"$PYTHON" tests/train/make_fruits.py "$tmp/fruits" 8 1 > /dev/null &&
    "$B/ddl-train" --data "$tmp/fruits/train" --arch cnn:4 --image-size 32 --epochs 1 --batch 8 --quiet \
        --save "$tmp/fruit.ckpt" > /dev/null 2>&1
check "a colour model (cnn:4, 3x32x32) trained for 3 steps on a folder of 64x64 photos" $?
"$PYTHON" - "$tmp" <<'PY'
from PIL import Image
t = __import__("sys").argv[1]
im = Image.open(t + "/fruits/test/guava/0000.jpg").convert("RGB").resize((50, 40))
im.save(t + "/guava.png"); im.save(t + "/guava.bmp")
PY
"$B/ddl-serve" --listen 127.0.0.1:0 --model fashion="$tmp/lenet.ckpt" --model seg="$tmp/unet.ckpt" --model fruit="$tmp/fruit.ckpt" \
    --logdir "$tmp/lenet-run" 2> "$tmp/log" &
pid=$!
for _ in $(seq 100); do port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$tmp/log"); [ -n "$port" ] && break; sleep 0.1; done
cls=$(curl -s --data-binary @"$tmp/one.json" "http://127.0.0.1:$port/v1/models/fashion:predict" |
      "$PYTHON" -c "import json,sys; p=json.load(sys.stdin)['predictions'][0]; print(max(range(10), key=lambda k: p[k]))")
[ -n "$cls" ]; check "the API's class for test image 0: $cls" $?
# the API's answers for the colour model's files (the BMP's: its pixels' as PNG, which the page sends)
for f in fruits/test/apple/0000.jpg:image/jpeg:jpg guava.png:image/png:png guava.bmp:image/bmp:png; do
    path=$tmp/${f%%:*}; mime=${f#*:}; mime=${mime%:*}; ext=${f##*:}
    curl -s -H "Content-Type: image/$([ $ext = jpg ] && echo jpeg || echo png)" --data-binary @"${path%.*}.$ext" \
        "http://127.0.0.1:$port/v1/models/fruit:predict" > "$tmp/ans" &&
        "$PYTHON" -c 'import json, sys; print(json.dumps({"path": sys.argv[1], "mime": sys.argv[2],
            "probs": json.load(open(sys.argv[3]))["predictions"][0]}))' "$path" "$mime" "$tmp/ans"
done > "$tmp/files.json"
"$PYTHON" -c 'import json, sys; print(json.dumps({"model": "fruit", "names": ["apple", "guava", "kiwi"],
    "files": [json.loads(l) for l in open(sys.argv[1])]}))' "$tmp/files.json" > "$tmp/colour.json"
check "the API's answers for a JPEG, a PNG and a BMP of the colour model" $?
out=$(cd tests/serve && node browser.js "http://127.0.0.1:$port/" "$CHROMIUM" "$tmp/px.json" "$cls" "$tmp/page.png" "$tmp/colour.json" 2>&1)
echo "$out"
case "$out" in skipped:*) skip "${out#skipped: }" ;; esac
pass=$((pass + $(echo "$out" | grep -c '^PASS'))); fail=$((fail + $(echo "$out" | grep -c '^FAIL')))
[ "$(echo "$out" | grep -c '^PASS')" -ge 17 ]; check "browser.js ran all its checks" $?
[ -n "${DDL_SCREENSHOT_DIR:-}" ] && cp "$tmp"/page*.png "$DDL_SCREENSHOT_DIR"/
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
