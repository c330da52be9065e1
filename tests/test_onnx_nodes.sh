#!/bin/sh
# test_onnx_nodes.sh - ONNX's own backend node tests (python3-onnx's generators), rewritten into
# the form ddl imports and checked in onnxruntime-node, then run by ddl in one process
# (tests/onnx/node_tests.py): nothing silently wrong (each case passes or is refused with the node
# named), every case of tests/onnx/node_pass.txt passes, and ddl's own cases of the input
# normalisation, per-channel constants, Softmax and Reshape give onnxruntime's answer or are refused.
# ddl-test: beside (builds or computes and bounds no time: it runs beside another such test)
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
"$PYTHON" -c 'import onnx, numpy' 2> /dev/null || { echo "skipped: no python3-onnx or python3-numpy (make deps)"; echo "0 passed, 0 failed"; exit 0; }
command -v node > /dev/null 2>&1 && [ -d tests/onnx/node_modules/onnxruntime-node ] ||
    { echo "skipped: onnxruntime-node not installed (tools/install-deps.sh)"; echo "0 passed, 0 failed"; exit 0; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" tests/onnx/node_tests.py "$BUILD" > "$tmp/nodes" 2>&1; rc=$?
sed '$d' "$tmp/nodes"
line=$(tail -n 1 "$tmp/nodes")
p=$(echo "$line" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p'); f=$(echo "$line" | sed -n 's/^[0-9]* passed, \([0-9]*\) failed$/\1/p')
[ -n "$p" ] && [ -n "$f" ] || { echo "node_tests.py: no result line ($line)"; p=0; f=1; }
[ $rc -eq 0 ] || [ "$f" -gt 0 ] || f=1
pass=$((pass + p)); fail=$((fail + f))

# ---- input scaling that says what it does (ddl-train --arch model.onnx) ----
T=$BUILD/bin/ddl-train
"$PYTHON" tests/onnx/make_scaling.py "$tmp/m" && "$PYTHON" tests/train/make_fruits.py "$tmp/fruits" 30 10 16
check "the models and the photos are made" $?
"$T" --data "$tmp/fruits/train" --arch "$tmp/m/plain.onnx" --epochs 1 --batch 16 --save "$tmp/plain.ckpt" > "$tmp/p" 2>&1
[ $? -eq 0 ] && grep -q "^input: normalised with the data's mean and std per channel$" "$tmp/p"
check "a model that scales its input nowhere trains on the data's mean and std per channel, and says so" $?
"$T" --data "$tmp/fruits/train" --arch "$tmp/m/own.onnx" --epochs 1 --batch 16 --save "$tmp/own.ckpt" > "$tmp/o" 2>&1
[ $? -eq 0 ] && grep -q "^input: the model's own normalisation$" "$tmp/o"
check "a model with its own (per-channel) normalisation keeps it, and says so" $?
# the exports carry the normalisation and the affine layer: onnxruntime agrees with ddl
for m in plain own; do
    mkdir -p "$tmp/ref-$m"
    "$BUILD/bin/ddl-ckpt" export "$tmp/$m.ckpt" "$tmp/$m-export.onnx" > /dev/null 2>&1 &&
        "$BUILD/tests/test_infer" --reference "$tmp/$m.ckpt" "$tmp/fruits/test" 30 "$tmp/ref-$m" > /dev/null 2>&1 &&
        node tests/onnx/check.js "$tmp/$m-export.onnx" "$tmp/ref-$m" > "$tmp/out" 2>&1 &&
        grep -q "classes_equal=30/30 ok$" "$tmp/out"
    check "$m: ddl-ckpt export runs in onnxruntime as in ddl ($(cat "$tmp/out"))" $?
done
# the data's statistics are what the checkpoint keeps: its export's first Mul is not 1 / 255
"$PYTHON" - "$tmp/plain-export.onnx" << 'PY'
import sys, onnx
from onnx import numpy_helper
m = onnx.load(sys.argv[1])
mul = next(n for n in m.graph.node if n.op_type == "Mul" and n.input[0] == "pixels")
init = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
s = init[mul.input[1]].ravel()
sys.exit(0 if s.size == 3 and abs(s[0] * 255 - 1) > 0.5 else 1)
PY
check "the export of plain.onnx normalises each channel by the data's std (not pixels / 255)" $?
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
