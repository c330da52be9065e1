#!/bin/sh
# test_batchnorm.sh - a Conv-BN-ReLU network trained with ddl-train on a small generated RGB
# folder (tests/train/make_fruits.py):
#  - virtual shards: 1 rank with 4 shards (--accumulate 4) and 2 ranks with 2 each give the same
#    weights and the same running statistics (weights_crc, buffers_crc): per-shard statistics,
#    the running ones averaged in the shards' fixed order;
#  - 2 ranks without shards (per-rank statistics, running ones averaged over the ranks) give the
#    bits of 1 rank in 2 micro-batches;
#  - resume: a run killed after a checkpoint and resumed ends with the weights and running
#    statistics of a run never stopped (the checkpoint carries them);
#  - one training step of a Conv-BN-ReLU network (logits, loss, weights after SGD, running
#    statistics) equals a numpy reference within 1e-4 of each one's scale (tests/bn/bn_step.py);
#  - --predict (the C predictor, in evaluation mode: the running statistics) gives the accuracy
#    the trainer's own evaluation reported;
#  - where python3-torch is installed: PyTorch's training-mode exports (opsets 13, 15) and its
#    eval-mode one import, and ddl's eval-mode logits are PyTorch's within 1e-4 (tests/bn/torch_bn.py);
#  - ddl-ckpt shows the buffers, and the ONNX export runs in onnxruntime to ddl's outputs (when
#    tests/onnx/node_modules has onnxruntime-node).
# ddl-test: beside (builds or computes and bounds no time: it runs beside another such test)
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
T=$BUILD/bin/ddl-train
RUN=$BUILD/bin/ddlrun
CKPT=$BUILD/bin/ddl-ckpt
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
skip() { echo "skipped: $*"; echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit; }
[ -x "$T" ] && [ -x "$RUN" ] && [ -x "$CKPT" ] || { echo "no $T, $RUN or $CKPT: build first" >&2; echo "0 passed, 1 failed"; exit 1; }
"$PYTHON" -c 'import PIL, numpy' 2> /dev/null || skip "no python3-pil or python3-numpy (make deps)"

"$PYTHON" tests/train/make_fruits.py "$tmp/fruits" 64 20 16
check "the fruit set is made" $?
cp tests/bn/small.arch "$tmp/bn.arch" # conv, BatchNorm, relu, pool, twice; gap and dense
F="--data $tmp/fruits/train --test $tmp/fruits/test --arch $tmp/bn.arch --image-size 16 --batch 32 --lr 0.05 --quiet"
bufcrc() { field buffers_crc < "$1"; }

# ---- shards: the bits depend on the shards, not on the ranks ----
"$T" $F --epochs 2 --accumulate 4 --save "$tmp/v4.ckpt" > "$tmp/one" 2>&1
check "1 rank, 4 shards exits 0" $?
"$RUN" -n 2 "$T" $F --epochs 2 --accumulate 2 > "$tmp/two" 2>&1
check "2 ranks, 2 shards each exits 0" $?
[ -n "$(bufcrc "$tmp/one")" ]; check "the summary gives buffers_crc for a model with BatchNorm" $?
[ -n "$(crc "$tmp/one")" ] && [ "$(crc "$tmp/two")" = "$(crc "$tmp/one")" ]
check "4 shards: 2 ranks give 1 rank's weights ($(crc "$tmp/two") vs $(crc "$tmp/one"))" $?
[ "$(bufcrc "$tmp/two")" = "$(bufcrc "$tmp/one")" ]
check "4 shards: 2 ranks give 1 rank's running statistics ($(bufcrc "$tmp/two") vs $(bufcrc "$tmp/one"))" $?
"$T" $F --epochs 2 > "$tmp/whole" 2>&1
[ "$(bufcrc "$tmp/whole")" != "$(bufcrc "$tmp/one")" ]
check "the whole batch's statistics are not the shards' (buffers_crc differs)" $?

# ranks without shards (PyTorch DDP's per-rank statistics) are micro-batches across processes:
# each normalises its own half, and the running statistics are averaged
"$RUN" -n 2 "$T" $F --epochs 1 > "$tmp/r2" 2>&1
"$T" $F --epochs 1 --micro-batches 2 > "$tmp/m2" 2>&1
[ -n "$(bufcrc "$tmp/r2")" ] && [ "$(bufcrc "$tmp/r2")" = "$(bufcrc "$tmp/m2")" ] && [ "$(crc "$tmp/r2")" = "$(crc "$tmp/m2")" ]
check "2 ranks give the weights and running statistics of 1 rank in 2 micro-batches ($(bufcrc "$tmp/r2") vs $(bufcrc "$tmp/m2"))" $?

# ---- the C predictor in evaluation mode ----
acc=$(field test_acc < "$tmp/one")
"$T" --predict --model "$tmp/v4.ckpt" --images "$tmp/fruits/test" > "$tmp/pred" 2>&1
check "--predict exits 0" $?
grep -q "^predicted 60 images in .*: accuracy $acc on the 60 " "$tmp/pred"
check "--predict's accuracy is the trainer's evaluation ($acc): running statistics" $?
"$CKPT" show "$tmp/v4.ckpt" > "$tmp/show" 2>&1
grep -q "^buffers    4, 48 running statistics$" "$tmp/show" && grep -q "^  bn2.running_var  *\[16\]  *min +[0-9]" "$tmp/show"
check "ddl-ckpt show lists the buffers (running statistics) after the weights" $?
"$CKPT" export "$tmp/v4.ckpt" "$tmp/bn.npz" > /dev/null 2>&1 &&
    "$PYTHON" -c 'import sys, numpy; z = numpy.load(sys.argv[1]); print(z["bn2.running_var"].shape, z["bn1.weight"].shape)' \
        "$tmp/bn.npz" > "$tmp/npz" 2>&1
grep -q "^(16,) (8,)$" "$tmp/npz"; check "the .npz export holds the running statistics under state_dict's names" $?

# ---- resume ----
R="$F --epochs 2 --checkpoint $tmp/c --checkpoint-every 3"
"$T" $F --epochs 2 > "$tmp/ref" 2>&1
DDL_TEST_STOP_AFTER=5 "$T" $R > /dev/null 2>&1
[ $? -eq 137 ] && [ -f "$tmp/c" ]; check "killed at step 5 with a checkpoint" $?
"$T" $R --resume > "$tmp/res" 2>&1
check "the resumed run exits 0" $?
grep -q "^resumed from $tmp/c at step 3" "$tmp/res"; check "it resumed at step 3" $?
[ -n "$(crc "$tmp/ref")" ] && [ "$(crc "$tmp/res")" = "$(crc "$tmp/ref")" ] &&
    [ "$(bufcrc "$tmp/res")" = "$(bufcrc "$tmp/ref")" ]
check "resumed: the uninterrupted run's weights and running statistics ($(bufcrc "$tmp/res") vs $(bufcrc "$tmp/ref"))" $?

# ---- one training step against numpy (tests/bn/bn_step.py): batch statistics, the backward
# pass through them, SGD, the running statistics ----
mkdir -p "$tmp/step"
"$PYTHON" tests/bn/bn_step.py write "$tmp/step" && "$BUILD/tests/test_batchnorm" --step "$tmp/step" &&
    "$PYTHON" tests/bn/bn_step.py check "$tmp/step" > "$tmp/step/log" 2>&1
check "a Conv-BN-ReLU training step is numpy's within 1e-4 ($(tr '\n' ';' < "$tmp/step/log"))" $?

# ---- ONNX export: BatchNormalization with the running statistics, run in onnxruntime ----
"$CKPT" export "$tmp/v4.ckpt" "$tmp/bn.onnx" > "$tmp/e" 2>&1
check "export to ONNX exits 0" $?
if "$PYTHON" -c 'import onnx' 2> /dev/null; then
    cat > "$tmp/ops.py" << 'EOF'
import sys, onnx
m = onnx.load(sys.argv[1])
onnx.checker.check_model(m)
inits = {i.name for i in m.graph.initializer}
for n in m.graph.node:
    if n.op_type == "BatchNormalization":
        a = {x.name: onnx.helper.get_attribute_value(x) for x in n.attribute}
        print(n.op_type, len(n.input), n.input[3] in inits, n.input[3], round(a["momentum"], 6), round(a["epsilon"], 9))
EOF
    "$PYTHON" "$tmp/ops.py" "$tmp/bn.onnx" > "$tmp/ops" 2>&1
    grep -q "^BatchNormalization 5 True bn2.running_mean 0.8 1e-05" "$tmp/ops" && [ "$(grep -c '^BatchNormalization' "$tmp/ops")" -eq 2 ]
    check "the export holds two BatchNormalization nodes with the running statistics, ONNX's momentum 1 - 0.2" $?
fi
if command -v node > /dev/null 2>&1 && [ -d tests/onnx/node_modules/onnxruntime-node ] && [ -x "$BUILD/tests/test_infer" ]; then
    mkdir -p "$tmp/logits"
    "$BUILD/tests/test_infer" --reference "$tmp/v4.ckpt" "$tmp/fruits/test" 60 "$tmp/logits" > "$tmp/log" 2>&1
    check "ddl's reference logits of the BatchNorm network" $?
    node tests/onnx/check.js "$tmp/bn.onnx" "$tmp/logits" > "$tmp/out" 2>&1
    grep -q "^onnx: images=60 .* classes_equal=\([0-9]*\)/\1 ok$" "$tmp/out"
    check "onnxruntime runs the export to ddl's logits within 1e-4 ($(cat "$tmp/out"))" $?
else
    echo "(no node, onnxruntime-node or test_infer: the export is not run)"
fi

# ---- PyTorch's own export (where python3-torch is installed): its eval-mode logits ----
if "$PYTHON" -c 'import torch, onnx' 2> /dev/null; then
    mkdir -p "$tmp/torch"
    "$PYTHON" tests/bn/torch_bn.py export "$tmp/torch" > "$tmp/torch/log" 2>&1
    check "torch.onnx.export writes a Conv-BN-ReLU network in training mode (opsets 13, 15) and eval mode" $?
    for f in train13 train15 nofold; do
        mkdir -p "$tmp/torch/r-$f"
        "$BUILD/tests/test_infer" --reference "$tmp/torch/$f.onnx" "$tmp/fruits/test" 60 "$tmp/torch/r-$f" > "$tmp/log" 2>&1 &&
            "$PYTHON" tests/bn/torch_bn.py check "$tmp/torch" "$tmp/torch/r-$f" "$tmp/torch/$f.onnx" > "$tmp/out" 2>&1
        check "PyTorch's $f export: ddl's eval-mode logits are PyTorch's within 1e-4 ($(cat "$tmp/out"))" $?
    done
else
    echo "(no python3-torch: PyTorch's own export is not checked)"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
