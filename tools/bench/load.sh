#!/bin/sh
# load.sh - make bench's image loading: 3000 JPEG photos of 100x100 (3 classes, written by PIL),
# decoded and resized to 64x64 RGB by ddl_dataset_load_folder (tools/bench/load.c) on 1 and 2
# threads, against PIL doing the same in Python on one thread (Image.open, convert("RGB"),
# resize BILINEAR: what Keras's load_img and torchvision's loader run); best of 5 loads each,
# REPEAT rounds alternated, medians. Issue 31's target: >= 5000 images/s per core.
set -u
BUILD=${BUILD:-build}
REPEAT=${REPEAT:-3}
here=$(dirname "$0")
. "$here/lib.sh"
dir=/tmp/ddl-bench-load
if [ ! -d "$dir/c2" ]; then
    /usr/bin/python3 - "$dir" <<'PY' || exit 1
import os, sys
import numpy as np
from PIL import Image
d = sys.argv[1]; rng = np.random.default_rng(1)
y, x = np.mgrid[0:100, 0:100]
for c in range(3):
    os.makedirs("%s/c%d" % (d, c), exist_ok=True)
    for i in range(1000):
        a = np.stack([x * 2.5 * (c + 1) % 256, y * 2.5, (x * y + i) % 256], -1) + rng.normal(0, 10, (100, 100, 3))
        Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).save("%s/c%d/%04d.jpg" % (d, c, i), quality=90)
PY
fi
load=$(ddl_tool load) || { echo "load.sh: cannot build tools/bench/load.c"; exit 1; }
echo "== image loading: 3000 JPEG 100x100 -> 64x64 RGB, ddl (1 and 2 threads) against PIL (1 thread)"
: > /tmp/ddl-bench-load.1; : > /tmp/ddl-bench-load.2; : > /tmp/ddl-bench-load.pil
for r in $(seq 1 "$REPEAT"); do
    "$load" "$dir" 64 1 5 | field images_per_sec >> /tmp/ddl-bench-load.1
    /usr/bin/python3 - "$dir" <<'PY' >> /tmp/ddl-bench-load.pil
import glob, sys, time
from PIL import Image
files = sorted(glob.glob(sys.argv[1] + "/*/*.jpg")); best = 1e30
for _ in range(5):
    t0 = time.perf_counter()
    for f in files:
        Image.open(f).convert("RGB").resize((64, 64), Image.BILINEAR).tobytes()
    best = min(best, time.perf_counter() - t0)
print("%.0f" % (len(files) / best))
PY
    "$load" "$dir" 64 2 5 | field images_per_sec >> /tmp/ddl-bench-load.2
done
one=$(median < /tmp/ddl-bench-load.1); two=$(median < /tmp/ddl-bench-load.2); pil=$(median < /tmp/ddl-bench-load.pil)
echo "ddl 1 thread: $one images/s, 2 threads: $two, PIL: $pil (runs: $(tr '\n' ' ' < /tmp/ddl-bench-load.1)| $(tr '\n' ' ' < /tmp/ddl-bench-load.pil))"
record "JPEG 100x100 -> 64x64 load, images/s, 1 thread" "$one" "PIL 1 thread" "$pil" "$(ratio "$one" "$pil")" ">= 5000/core"
record "JPEG 100x100 -> 64x64 load, images/s, 2 threads" "$two" "ddl 1 thread" "$one" "$(ratio "$two" "$one")" "-"
