#!/bin/sh
# test_onnx_import.sh - ONNX files written by another tool (Debian's python3-onnx: onnx.helper,
# tests/onnx/make_models.py) run and train in ddl:
#  - a CNN of every operator ddl imports (Conv, ConvTranspose, pools, Gemm, MatMul + Add, Concat,
#    a residual Add, Dropout, a last Softmax), raw pixels in, and the same with the scaling in
#    the model (Div, Sub: opset 17): before any training, ddl's logits equal onnxruntime's on the
#    original file within 1e-4 of their scale (tests/onnx/check.js), same classes;
#  - ddl-train --arch model.onnx trains on from its weights (the loss falls from the imported
#    model's), ddl-train --predict --model model.onnx runs it as it is;
#  - BatchNormalization from eval-mode and training-mode files runs to onnxruntime's logits (the
#    running statistics); one with an attribute ddl does not know, a node reading a training-mode
#    one's running mean, and a Reshape to a scalar shape (Shape, Gather) are refused, the node named;
#  - where python3-torch is installed, the same for a CNN PyTorch exported itself (opsets 13, 17).
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
"$PYTHON" tests/onnx/make_models.py "$tmp/m"; check "python3-onnx writes the models" $?
"$PYTHON" tests/train/make_fruits.py "$tmp/fruits" 150 40 16; check "the fruit photos are made" $?

# ---- refused, named ----
"$T" --data "$tmp/fruits/train" --arch "$tmp/m/bn_attr.onnx" > "$tmp/e" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "bn_attr.onnx: node bn1 (BatchNormalization): attribute foo = 3: ONNX defines no such attribute for BatchNormalization" "$tmp/e"
check "a BatchNormalization attribute ddl does not know: exit 2, the node, the attribute and its value named" $?
"$T" --predict --model "$tmp/m/bn_read.onnx" --images "$tmp/fruits/test" > "$tmp/e" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "bn_read.onnx: node .*(Add): input rm is not defined before it" "$tmp/e"
check "a node reading a training-mode BatchNormalization's running mean: refused, named" $?
"$T" --predict --model "$tmp/m/dyn.onnx" --images "$tmp/fruits/test" > "$tmp/e" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "dyn.onnx: node .*(Reshape): its shape n, (N) of rank 0, is not a vector" "$tmp/e"
check "a reshape to a computed scalar: refused, the node and its folded shape named" $?
printf 'not protobuf at all' > "$tmp/m/junk.onnx"
"$T" --predict --model "$tmp/m/junk.onnx" --images "$tmp/fruits/test" > "$tmp/e" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "junk.onnx: not an ONNX model" "$tmp/e"; check "a file that is no ONNX model: said" $?

# damaged files: cut short at 60 places, and bytes changed at 60: refused or run, never a crash
size=$(wc -c < "$tmp/m/cnn.onnx"); crashed=0
for i in $(seq 1 60); do
    head -c $((size * i / 61)) "$tmp/m/cnn.onnx" > "$tmp/m/cut.onnx"
    "$T" --predict --model "$tmp/m/cut.onnx" --images "$tmp/fruits/test/apple/0000.jpg" > /dev/null 2>&1
    [ $? -gt 2 ] && crashed=$((crashed + 1))
    cp "$tmp/m/cnn.onnx" "$tmp/m/flip.onnx"
    printf '\377' | dd of="$tmp/m/flip.onnx" bs=1 seek=$((size * i / 61)) conv=notrunc 2> /dev/null
    "$T" --predict --model "$tmp/m/flip.onnx" --images "$tmp/fruits/test/apple/0000.jpg" > /dev/null 2>&1
    [ $? -gt 2 ] && crashed=$((crashed + 1))
done
[ $crashed -eq 0 ]; check "120 damaged ONNX files: none crashes ddl ($crashed did)" $?

# ---- the same logits as the exporting runtime, before any training ----
if command -v node > /dev/null 2>&1 && [ -d tests/onnx/node_modules/onnxruntime-node ]; then
    for m in cnn scaled bn bn_train; do
        mkdir -p "$tmp/ref-$m"
        "$REF" --reference "$tmp/m/$m.onnx" "$tmp/fruits/test" 100 "$tmp/ref-$m" > "$tmp/log" 2>&1
        check "ddl runs the imported $m.onnx" $?
        # a training-mode file runs in onnxruntime with batch statistics; ddl predicts in evaluation
        # mode, with the running ones: what the eval-mode file of the same weights gives
        ort=$m; [ $m = bn_train ] && ort=bn
        node tests/onnx/check.js "$tmp/m/$ort.onnx" "$tmp/ref-$m" input > "$tmp/out" 2>&1; rc=$?
        cat "$tmp/out"
        [ $rc -eq 0 ] && grep -q "^onnx: images=100 .* classes_equal=100/100 ok$" "$tmp/out"
        check "$m.onnx: ddl's logits are onnxruntime's within 1e-4, the same classes" $?
    done
    if "$PYTHON" -c 'import torch' 2> /dev/null; then # PyTorch's own export, where it is installed
        "$PYTHON" tests/onnx/torch_export.py "$tmp/m" > "$tmp/log" 2>&1; check "torch.onnx.export writes two models" $?
        for o in 13 17; do
            mkdir -p "$tmp/ref-t$o"
            "$REF" --reference "$tmp/m/torch$o.onnx" "$tmp/fruits/test" 100 "$tmp/ref-t$o" > "$tmp/log" 2>&1 &&
                node tests/onnx/check.js "$tmp/m/torch$o.onnx" "$tmp/ref-t$o" > "$tmp/out" 2>&1
            check "PyTorch's export, opset $o: ddl's logits are onnxruntime's ($(cat "$tmp/out"))" $?
        done
    else
        echo "skipped: PyTorch's own export (no python3-torch; make bench installs it)"
    fi
else
    echo "skipped: the logits against onnxruntime (onnxruntime-node not installed: tools/install-deps.sh)"
fi

# ---- run as it is, and trained on ----
"$T" --predict --model "$tmp/m/cnn.onnx" --images "$tmp/fruits/test" --out "$tmp/p.csv" > "$tmp/p" 2>&1
[ $? -eq 0 ] && grep -q "^predicted 120 images" "$tmp/p" && [ "$(head -n 1 "$tmp/p.csv")" = "file,predicted,p0,p1,p2,p3,p4" ]
check "--predict --model cnn.onnx classifies the photos (5 outputs, no names)" $?
"$T" --data "$tmp/fruits/train" --test "$tmp/fruits/test" --arch "$tmp/m/cnn.onnx" --epochs 0 --quiet > "$tmp/t0" 2>&1
"$T" --data "$tmp/fruits/train" --test "$tmp/fruits/test" --arch "$tmp/m/cnn.onnx" --epochs 4 --quiet \
    --save "$tmp/tuned.ckpt" > "$tmp/t4" 2>&1
check "ddl-train --arch cnn.onnx trains" $?
a=$(field test_loss < "$tmp/t0"); b=$(field test_loss < "$tmp/t4")
awk -v a="$a" -v b="$b" 'BEGIN { exit !(a > 0 && b > 0 && b < a) }'
check "training goes on from the imported weights: test loss $a before, $b after" $?
"$BUILD/bin/ddl-ckpt" export "$tmp/tuned.ckpt" "$tmp/tuned.onnx" > "$tmp/e" 2>&1
check "the trained model exports to ONNX again" $?

# BatchNormalization's epsilon and momentum survive import, training and export (ONNX's momentum
# 0.8 is PyTorch's 0.2), and training moves the running statistics away from the file's
"$T" --data "$tmp/fruits/train" --arch "$tmp/m/bn_train.onnx" --epochs 1 --quiet --save "$tmp/bn.ckpt" > "$tmp/e" 2>&1 &&
    "$BUILD/bin/ddl-ckpt" export "$tmp/bn.ckpt" "$tmp/bn_again.onnx" > "$tmp/e" 2>&1 &&
    "$PYTHON" -c '
import sys, onnx
from onnx import numpy_helper
a, b = onnx.load(sys.argv[1]), onnx.load(sys.argv[2])
n = [x for x in b.graph.node if x.op_type == "BatchNormalization"][0]
at = {x.name: onnx.helper.get_attribute_value(x) for x in n.attribute}
init = lambda m: {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
ia, ib = init(a), init(b)
moved = abs(ia["bn1.running_mean"] - ib[n.input[3]]).max()
print(round(at["momentum"], 6), round(at["epsilon"], 9), n.input[3], moved > 1e-3)
' "$tmp/m/bn_train.onnx" "$tmp/bn_again.onnx" > "$tmp/o" 2>&1
grep -q "^0.8 0.001 bn1.running_mean True$" "$tmp/o"
check "BatchNormalization imported, trained and exported: momentum 0.8, epsilon 1e-3, running mean trained ($(cat "$tmp/o"))" $?

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
