#!/bin/sh
# test_serve_named.sh - ddl-serve's requests as TF Serving and KServe clients write them:
#  - named inputs: TF Serving's row form {"instances": [{"input": [...]}]} and columnar form
#    {"inputs": {"input": [...]}}, and KServe's {"inputs": [{"name": "input", ...}]}, each give
#    the answer of the unnamed form; another name is a 400 naming it and the one expected;
#  - JPEG bodies (Content-Type image/jpeg) give the answer of the same pixels, decoded by Pillow
#    (libjpeg-turbo), sent as JSON; a JPEG of another size is resized as PIL resizes it; a progressive
#    JPEG of 2,000 scans is a 400 in well under a second (libjpeg would make a pass per scan);
#  - a colour model (ddl-train --arch cnn, 3 channels) takes PNG and JPEG bodies as RGB: the
#    answer of the same pixels in (C, H, W) as JSON.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
tmp=$(mktemp -d) || exit 1
trap 'kill $spid 2> /dev/null; rm -rf "$tmp"' EXIT
skip() { echo "skipped: $*"; echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit; }
[ -x "$BUILD/bin/ddl-serve" ] || skip "ddl-serve not built (WITH_SERVE=0)"
[ -x "$BUILD/bin/ddl-train" ] || skip "ddl-train not built"
[ -d /usr/share/datasets/fashion-mnist ] || skip "no Fashion-MNIST"
"$PYTHON" -c 'import PIL, numpy' 2> /dev/null || skip "no python3-pil or python3-numpy (make deps)"
"$BUILD/bin/lenet" --epochs 1 --train-limit 640 --quiet --save "$tmp/grey.ckpt" > /dev/null 2>&1
check "a grey model to serve" $?
# the colour model: a few 16x16 RGB PNGs of two classes
"$PYTHON" - "$tmp" <<'PY'
import os, sys, json, io
import numpy as np
from PIL import Image
t = sys.argv[1]
rng = np.random.default_rng(3)
for c, name in enumerate(("red", "blue")):
    os.makedirs(os.path.join(t, "rgb", name))
    for i in range(24):
        a = rng.integers(0, 80, (16, 16, 3), dtype=np.uint8); a[..., 0 if c == 0 else 2] += 150
        Image.fromarray(a, "RGB").save(os.path.join(t, "rgb", name, "%d.png" % i))
# request bodies: a grey 28x28 photo as JPEG, its pixels as Pillow decodes them, the same as named forms
g = (np.add.outer(np.arange(28), np.arange(28)) * 4 % 256).astype(np.uint8)
Image.fromarray(g, "L").save(t + "/g.jpg", quality=90)
px = np.asarray(Image.open(t + "/g.jpg").convert("L")).reshape(-1).tolist()
json.dump({"instances": [px]}, open(t + "/plain.json", "w"))
json.dump({"instances": [{"input": px}]}, open(t + "/row.json", "w"))
json.dump({"inputs": {"input": [px]}}, open(t + "/col.json", "w"))
json.dump({"instances": [{"image": px}]}, open(t + "/wrong_row.json", "w"))
json.dump({"inputs": [{"name": "input", "shape": [1, 784], "datatype": "UINT8", "data": px}]}, open(t + "/v2.json", "w"))
json.dump({"inputs": [{"name": "image", "shape": [1, 784], "datatype": "UINT8", "data": px}]}, open(t + "/v2_wrong.json", "w"))
# a JPEG of 40x30, and its pixels as PIL resizes them to the model's 28x28 (as training does)
Image.fromarray((np.add.outer(np.arange(30) * 3, np.arange(40) * 5) % 256).astype(np.uint8), "L").save(t + "/big.jpg")
r = np.asarray(Image.open(t + "/big.jpg").convert("L").resize((28, 28), Image.BILINEAR)).reshape(-1).tolist()
json.dump({"instances": [r]}, open(t + "/big.json", "w"))
# a progressive JPEG whose last scan is repeated 2,000 times
Image.fromarray(g, "L").save(t + "/prog.jpg", progressive=True)
b = open(t + "/prog.jpg", "rb").read()
sos = [i for i in range(len(b) - 1) if b[i] == 0xFF and b[i + 1] == 0xDA]
last = b[sos[-1]:b.rindex(b"\xff\xd9")]
open(t + "/bomb.jpg", "wb").write(b[:b.rindex(b"\xff\xd9")] + last * 2000 + b"\xff\xd9")
# the colour body: a 16x16 RGB image as PNG and JPEG, and the same pixels (C, H, W) as JSON
a = rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)
Image.fromarray(a, "RGB").save(t + "/c.png")
Image.fromarray(a, "RGB").save(t + "/c.jpg", quality=95)
json.dump({"instances": [a.transpose(2, 0, 1).reshape(-1).tolist()]}, open(t + "/c_png.json", "w"))
j = np.asarray(Image.open(t + "/c.jpg").convert("RGB"))
json.dump({"instances": [j.transpose(2, 0, 1).reshape(-1).tolist()]}, open(t + "/c_jpg.json", "w"))
PY
check "request bodies made by Pillow" $?
"$BUILD/bin/ddl-train" --data "$tmp/rgb" --arch cnn:4 --image-size 16 --epochs 1 --batch 16 --quiet \
    --save "$tmp/rgb.ckpt" > "$tmp/train" 2>&1; check "a colour model to serve (ddl-train --arch cnn)" $?

port=$(free_port)
"$BUILD/bin/ddl-serve" --model grey="$tmp/grey.ckpt" --model rgb="$tmp/rgb.ckpt" --listen "127.0.0.1:$port" \
    > "$tmp/log" 2>&1 &
spid=$!
for i in $(seq 1 50); do curl -s "127.0.0.1:$port/ping" > /dev/null 2>&1 && break; sleep 0.1; done
U=127.0.0.1:$port
# post FILE TYPE PATH OUT: the status, the body in OUT
post() { curl -s -o "$4" -w '%{http_code}' -H "Content-Type: $2" --data-binary "@$1" "$U$3"; }
preds() { "$PYTHON" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["predictions"]))' "$1"; }

[ "$(post "$tmp/plain.json" application/json /v1/models/grey:predict "$tmp/p0")" = 200 ]; check "unnamed instances: 200" $?
for f in row col; do
    [ "$(post "$tmp/$f.json" application/json /v1/models/grey:predict "$tmp/p_$f")" = 200 ] &&
        [ "$(preds "$tmp/p_$f")" = "$(preds "$tmp/p0")" ]
    check "TF Serving's named $f form: the answer of the unnamed form" $?
done
[ "$(post "$tmp/wrong_row.json" application/json /v1/models/grey:predict "$tmp/e")" = 400 ] &&
    grep -q 'instance 0: expected the one input \\"input\\" (the signature.s), found \\"image\\"' "$tmp/e"
check "an instance named otherwise: 400 naming it and \"input\" ($(cat "$tmp/e"))" $?
[ "$(post "$tmp/v2.json" application/json /v2/models/grey/infer "$tmp/v2")" = 200 ]; check "KServe's named input: 200" $?
[ "$(post "$tmp/v2_wrong.json" application/json /v2/models/grey/infer "$tmp/e")" = 400 ] &&
    grep -q 'no input named \\"input\\" (this model.s one input), found \\"image\\"' "$tmp/e"
check "KServe input of another name: 400 naming both ($(cat "$tmp/e"))" $?
[ "$(curl -s -o "$tmp/meta" -w '%{http_code}' "$U/v1/models/grey/metadata")" = 200 ] &&
    grep -q '"inputs":{"input":{"name":"pixels"' "$tmp/meta"
check "the TF Serving signature names its input \"input\"" $?

[ "$(post "$tmp/g.jpg" image/jpeg /v1/models/grey:predict "$tmp/pj")" = 200 ] && [ "$(preds "$tmp/pj")" = "$(preds "$tmp/p0")" ]
check "a JPEG body: the answer of its pixels as Pillow decodes them" $?
[ "$(post "$tmp/big.jpg" image/jpeg /v1/models/grey:predict "$tmp/pb")" = 200 ] &&
    [ "$(post "$tmp/big.json" application/json /v1/models/grey:predict "$tmp/pbj")" = 200 ] &&
    [ "$(preds "$tmp/pb")" = "$(preds "$tmp/pbj")" ]
check "a JPEG of 40x30: resized as PIL does (the answer of PIL's 28x28 pixels as JSON)" $?
t0=$(date +%s%N)
# its scans repeat the last one, which libjpeg warns of as an inconsistent progression at the
# first repeat; the decoder takes a warning as damage, so it stops there (test_images bounds the
# scans of a JPEG whose scans are all well-formed)
[ "$(post "$tmp/bomb.jpg" image/jpeg /v1/models/grey:predict "$tmp/e")" = 400 ] &&
    grep -Eq "more than 500 scans|damaged JPEG file: Inconsistent progression" "$tmp/e"
r=$?; ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ $r -eq 0 ] && [ "$ms" -lt 1000 ]; check "a progressive JPEG of 2,000 scans: 400 in $ms ms ($(cat "$tmp/e"))" $?

[ "$(post "$tmp/c_png.json" application/json /v1/models/rgb:predict "$tmp/cj")" = 200 ] &&
    [ "$(post "$tmp/c.png" image/png /v1/models/rgb:predict "$tmp/cp")" = 200 ] && [ "$(preds "$tmp/cp")" = "$(preds "$tmp/cj")" ]
check "a colour model: an RGB PNG body is the answer of its (C, H, W) pixels as JSON" $?
[ "$(post "$tmp/c_jpg.json" application/json /v1/models/rgb:predict "$tmp/cj2")" = 200 ] &&
    [ "$(post "$tmp/c.jpg" image/jpeg /v1/models/rgb:predict "$tmp/cp2")" = 200 ] && [ "$(preds "$tmp/cp2")" = "$(preds "$tmp/cj2")" ]
check "a colour model: an RGB JPEG body is the answer of its pixels as Pillow decodes them" $?
kill $spid; wait $spid 2> /dev/null
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
