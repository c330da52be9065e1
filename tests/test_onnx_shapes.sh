#!/bin/sh
# test_onnx_shapes.sh - resizes, normalisation patterns and reshapes from ONNX files laid out as
# torch 1.13 exports them (tests/onnx/make_shapes.py, python3-onnx alone):
#  - nn.Upsample nearest x2, bilinear with align_corners True and False, by 1.5, 0.5 and to sizes
#    (Shape, Slice, Concat), opsets 9 (Upsample), 10, 11, 13 and 17; nn.GroupNorm (Reshape,
#    InstanceNormalization, Reshape, Mul, Add) in eval and training-mode layouts;
#    nn.InstanceNorm2d with and without affine; opset 18's GroupNormalization; x.view(x.size(0),
#    -1) (Shape, Gather, Unsqueeze, Concat, Reshape) and torch.flatten(x, 1); Gemm with biases
#    (1, 5) and (): ddl's logits are onnxruntime's within 1e-4 of their scale, the same classes;
#  - trained one epoch and exported again (Resize, GroupNorm, InstanceNorm): onnxruntime runs the
#    export as ddl runs the checkpoint, and ddl reads the export back to the same bits;
#  - a cubic Resize, exclude_outside, tf_crop_and_resize, an epsilon that is not 1e-5, Flatten at
#    axis 2, a Reshape to (1, -1), a node reading GroupNorm's (N, G, -1) values or the value before
#    a Mul folded into it, and sizes with the batch fixed: refused, naming the node, the attribute
#    and its value; a GroupNorm read before its Mul: not folded (refused, or run as onnxruntime);
#  - where python3-torch is installed, the same layers as torch.onnx.export writes them itself.
# ddl-test: beside (builds or computes and bounds no time: it runs beside another such test)
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
T=$BUILD/bin/ddl-train
REF=$BUILD/tests/test_infer
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
skip() { echo "skipped: $*"; echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit; }
"$PYTHON" -c 'import onnx, PIL, numpy' 2> /dev/null || skip "no python3-onnx, python3-pil or python3-numpy (make deps)"
"$PYTHON" tests/onnx/make_shapes.py "$tmp/m"; check "python3-onnx writes the models" $?
"$PYTHON" tests/train/make_fruits.py "$tmp/fruits" 10 34 16; check "the fruit photos are made" $?

# ---- refused, named ----
refused() { # refused MODEL TEXT
    "$T" --predict --model "$tmp/m/$1.onnx" --images "$tmp/fruits/test/apple/0000.jpg" > "$tmp/e" 2>&1; rc=$?
    [ $rc -eq 1 ] && grep -q "$1.onnx: node [^ ]* ($2" "$tmp/e"
    check "$1.onnx: refused, named ($(cat "$tmp/e"))" $?
}
refused cubic "Resize): mode cubic: ddl takes nearest and linear"
refused excl "Resize): exclude_outside 1: ddl takes 0"
refused crop "Resize): coordinate_transformation_mode tf_crop_and_resize: ddl takes asymmetric"
refused eps "InstanceNormalization): epsilon 0.001: ddl's GroupNorm takes 1e-05"
refused flat2 "Flatten): axis 2 of a rank-4 input: ddl keeps the batch axis alone first"
refused view1 "Reshape): to (1, -1) from (N, 4, 16, 16): ddl takes reshapes that keep the batch first"
refused gnread "Relu): reads /gn/InstanceNormalization_output_0, GroupNorm's normalised (N, G, -1) values"
refused gnlate "Relu): reads /gn/Reshape_1_output_0, a GroupNorm's output before its weight or bias, which ddl folded"
refused sizesN "Resize): sizes (1, 4, 32, 32) of (N, 4, 16, 16): ddl takes the batch left free"

if ! command -v node > /dev/null 2>&1 || [ ! -d tests/onnx/node_modules/onnxruntime-node ]; then
    skip "the logits against onnxruntime (onnxruntime-node not installed: tools/install-deps.sh)"
fi

# same MODEL [INPUT]: ddl runs MODEL as onnxruntime does
same() {
    mkdir -p "$tmp/r-$1"
    "$REF" --reference "$tmp/m/$1.onnx" "$tmp/fruits/test" 100 "$tmp/r-$1" > "$tmp/log" 2>&1 &&
        node tests/onnx/check.js "$tmp/m/$1.onnx" "$tmp/r-$1" pixels > "$tmp/out" 2>&1 &&
        grep -q "^onnx: images=100 .* classes_equal=100/100 ok$" "$tmp/out"
    check "$1.onnx: ddl's logits are onnxruntime's ($(cat "$tmp/log" "$tmp/out"))" $?
}
for m in up_nearest up_bilinear up_sizes upsample9 resize10 gn gn_train gn18; do same $m; done
# a Relu reads the GroupNorm before its Mul: refused at the Mul, or run as onnxruntime runs it
if "$T" --predict --model "$tmp/m/gnshare.onnx" --images "$tmp/fruits/test/apple/0000.jpg" > "$tmp/e" 2>&1; then
    same gnshare
else
    grep -q "gnshare.onnx: node /gn/Mul (Mul)" "$tmp/e"; check "gnshare.onnx: the Mul not folded: refused, named ($(cat "$tmp/e"))" $?
fi

# ---- trained, exported, read back ----
for m in up_bilinear gn_train gn; do
    "$T" --data "$tmp/fruits/train" --arch "$tmp/m/$m.onnx" --epochs 1 --quiet --save "$tmp/$m.ckpt" > "$tmp/t" 2>&1 &&
        "$BUILD/bin/ddl-ckpt" export "$tmp/$m.ckpt" "$tmp/m/$m-x.onnx" > "$tmp/e" 2>&1
    check "$m.onnx trains one epoch and exports ($(tail -n 2 "$tmp/t" "$tmp/e"))" $?
    mkdir -p "$tmp/x-$m" "$tmp/y-$m"
    "$REF" --reference "$tmp/$m.ckpt" "$tmp/fruits/test" 100 "$tmp/x-$m" > "$tmp/log" 2>&1 &&
        node tests/onnx/check.js "$tmp/m/$m-x.onnx" "$tmp/x-$m" > "$tmp/out" 2>&1
    check "$m: onnxruntime runs the export as ddl the checkpoint ($(cat "$tmp/out"))" $?
    "$REF" --reference "$tmp/m/$m-x.onnx" "$tmp/fruits/test" 100 "$tmp/y-$m" > "$tmp/log" 2>&1 &&
        cmp -s "$tmp/x-$m/logits.f32" "$tmp/y-$m/logits.f32"
    check "$m: the export read back gives the checkpoint's logits, bit for bit" $?
done
grep -c '"Resize"\|Resize' "$tmp/m/up_bilinear-x.onnx" > /dev/null && grep -q InstanceNormalization "$tmp/m/gn_train-x.onnx"
check "the exports hold Resize and GroupNorm's InstanceNormalization" $?

# ---- PyTorch's own export, where it is installed ----
if "$PYTHON" -c 'import torch' 2> /dev/null; then
    "$PYTHON" tests/onnx/torch_shapes.py "$tmp/m" > "$tmp/log" 2>&1; check "torch.onnx.export writes six models" $?
    for o in 11 13 17; do same torcheval_$o; same torchtrain_$o; done
else
    echo "skipped: PyTorch's own export (no python3-torch)"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
