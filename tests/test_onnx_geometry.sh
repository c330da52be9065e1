#!/bin/sh
# test_onnx_geometry.sh - the convolution and pooling geometry of ONNX files (tests/onnx/make_geometry.py,
# python3-onnx's onnx.helper), imported, run, trained and exported again:
#  - Conv with a 3x5 kernel, strides (2, 1), pads (1, 2, 0, 1), dilations, group 2, auto_pad
#    SAME_UPPER, SAME_LOWER and VALID; a Pad of zeros folded into a Conv and an AveragePool; MobileNetV2's depthwise-separable blocks (depthwise stride 2,
#    a residual block, a depthwise of multiplier 2); ConvTranspose with output_padding, rectangular
#    strides, pads and dilations, output_shape, SAME_UPPER; MaxPool and AveragePool with pads per
#    side, dilations, ceil_mode, count_include_pad, auto_pad: ddl's logits are onnxruntime's within
#    1e-4 of their scale (tests/onnx/check.js), the same classes;
#  - ddl-train trains the depthwise-separable model (the loss falls);
#  - each model exported again by ddl-ckpt export runs in onnxruntime with ddl's logits, and ddl
#    imports that export back to the same logits;
#  - where python3-torch is installed, the same for PyTorch's own export of such a network
#    (tests/onnx/torch_geometry.py: groups, dilation, a depthwise inverted residual, pools);
#  - what ddl does not take, or where the runtimes disagree, is refused with the node, the
#    attribute and its value named (exit 1): a grouped ConvTranspose, an output_shape of odd
#    total padding, storage_order 1, a ceil_mode window starting in the padding, MaxPool's
#    Indices, AveragePool's dilations, auto_pad "SAME", ceil_mode with count_include_pad past
#    the padding, a Pad of zeros before a MaxPool.
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
"$PYTHON" tests/onnx/make_geometry.py "$tmp/m"; check "python3-onnx writes the models" $?
"$PYTHON" tests/train/make_fruits.py "$tmp/fruits" 40 20 16; check "the fruit photos are made" $?

# ---- refused, named ----
refused() { # MODEL PATTERN WHAT
    "$T" --predict --model "$tmp/m/$1.onnx" --images "$tmp/fruits/test" > "$tmp/e" 2>&1; rc=$?
    [ $rc -eq 1 ] && grep -q "$1.onnx: node .*$2" "$tmp/e"
    check "$3: refused, named ($(head -c 300 "$tmp/e"))" $?
}
refused convt_group "(ConvTranspose): group (2): ddl's ConvTranspose takes no groups" "a grouped ConvTranspose"
refused odd_output_shape "(ConvTranspose): output_shape (18, 19): an odd total padding of 1" "an odd output_shape padding"
refused storage_order "(MaxPool): storage_order (1): ddl takes 0" "storage_order 1"
refused ceil_drop "(MaxPool): ceil_mode 1: the last window .* would start in the padding" "a ceil_mode window in the padding"
refused max_indices "(MaxPool): a second output (Indices) idx" "MaxPool's Indices"
refused avg_dilations "(AveragePool): dilations (2, 2): ddl's AveragePool takes none" "AveragePool's dilations"
refused auto_pad_bad '(Conv): auto_pad "SAME": ONNX knows NOTSET, VALID, SAME_UPPER and SAME_LOWER' "auto_pad SAME"
refused ceil_count_pad "(AveragePool): ceil_mode 1 with count_include_pad 1: a window runs past the padding" \
    "ceil_mode with count_include_pad past the padding"
refused pad_maxpool "(MaxPool): input p is a Pad of zeros (1, 1, 1, 1), which ddl folds only into a Conv or an AveragePool" \
    "a Pad of zeros before a MaxPool"

# ---- trains ----
"$T" --data "$tmp/fruits/train" --test "$tmp/fruits/test" --arch "$tmp/m/dwsep.onnx" --epochs 0 --quiet > "$tmp/t0" 2>&1
"$T" --data "$tmp/fruits/train" --test "$tmp/fruits/test" --arch "$tmp/m/dwsep.onnx" --epochs 3 --lr 0.02 --quiet \
    > "$tmp/t3" 2>&1
check "ddl-train --arch dwsep.onnx trains" $?
a=$(field test_loss < "$tmp/t0"); b=$(field test_loss < "$tmp/t3")
awk -v a="$a" -v b="$b" 'BEGIN { exit !(a > 0 && b > 0 && b < a) }'
check "the depthwise-separable model learns: test loss $a before, $b after" $?

# ---- the logits of onnxruntime, imported and exported ----
if ! command -v node > /dev/null 2>&1 || ! [ -d tests/onnx/node_modules/onnxruntime-node ]; then
    skip "the logits against onnxruntime (onnxruntime-node not installed: tools/install-deps.sh)"
fi
compare() { # MODEL DIR INPUT WHAT
    node tests/onnx/check.js "$1" "$2" "$3" > "$tmp/out" 2>&1; rc=$?
    [ $rc -eq 0 ] && grep -q "^onnx: images=40 .* classes_equal=40/40 ok$" "$tmp/out"
    check "$4 ($(cat "$tmp/out"))" $?
}
for m in conv dwsep convt pool padfold; do
    mkdir -p "$tmp/ref-$m" "$tmp/exp-$m" "$tmp/back-$m"
    "$REF" --reference "$tmp/m/$m.onnx" "$tmp/fruits/test" 40 "$tmp/ref-$m" > "$tmp/log" 2>&1
    check "ddl runs the imported $m.onnx ($(head -c 200 "$tmp/log"))" $?
    compare "$tmp/m/$m.onnx" "$tmp/ref-$m" input "$m.onnx: ddl's logits are onnxruntime's"
    "$T" --data "$tmp/fruits/train" --arch "$tmp/m/$m.onnx" --epochs 0 --save "$tmp/$m.ckpt" --quiet > "$tmp/log" 2>&1 &&
        "$BUILD/bin/ddl-ckpt" export "$tmp/$m.ckpt" "$tmp/$m-x.onnx" > "$tmp/log" 2>&1 &&
        "$REF" --reference "$tmp/$m.ckpt" "$tmp/fruits/test" 40 "$tmp/exp-$m" > "$tmp/log" 2>&1
    check "$m: saved as a checkpoint and exported to ONNX again ($(head -c 200 "$tmp/log"))" $?
    compare "$tmp/$m-x.onnx" "$tmp/exp-$m" pixels "$m: ddl's export runs in onnxruntime with ddl's logits"
    "$REF" --reference "$tmp/$m-x.onnx" "$tmp/fruits/test" 40 "$tmp/back-$m" > "$tmp/log" 2>&1
    compare "$tmp/$m-x.onnx" "$tmp/back-$m" pixels "$m: the export imported back gives onnxruntime's logits"
done

# ---- PyTorch's own export, where python3-torch is installed ----
if "$PYTHON" -c 'import torch' 2> /dev/null; then
    "$PYTHON" tests/onnx/torch_geometry.py "$tmp/m" > "$tmp/log" 2>&1; check "torch.onnx.export writes the model" $?
    mkdir -p "$tmp/ref-torch"
    "$REF" --reference "$tmp/m/torch_geometry.onnx" "$tmp/fruits/test" 40 "$tmp/ref-torch" > "$tmp/log" 2>&1
    check "ddl runs PyTorch's export ($(head -c 200 "$tmp/log"))" $?
    compare "$tmp/m/torch_geometry.onnx" "$tmp/ref-torch" pixels "PyTorch's export: ddl's logits are onnxruntime's"
else
    echo "skipped: PyTorch's own export (no python3-torch; make bench installs it)"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
