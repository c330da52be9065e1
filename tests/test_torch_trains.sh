#!/bin/sh
# test_torch_trains.sh - "trains as PyTorch trains" (issue 45, item 6): networks written the way
# PyTorch users write them, exported in training mode, imported by ddl-train and trained there:
#  - everywhere (python3-onnx, numpy, PIL; no PyTorch): tests/torch/tiny.py writes a Conv-BN-ReLU
#    network with a residual block as torch.onnx.export writes it, from a seed; ddl's eval-mode
#    outputs of it are PyTorch's (tests/torch/fixture/eval.txt) within 1e-4 of their scale, and
#    ddl-train --in-order's loss at each of 20 SGD steps with momentum (BatchNorm in training mode)
#    is PyTorch's (fixture/losses.txt) within 1e-3; shuffled, or with another momentum, it is not;
#  - where /usr/bin/python3 has torch: the fixture is still what PyTorch makes of the same files,
#    and for nets.py's ResNet-18 (64x64), MobileNetV2-style network, EfficientNet-style network
#    (SiLU, squeeze-and-excitation: a Mul of two layers; Hardswish, Hardsigmoid), SENet's own gate
#    (bias-less Linear layers, .view(b, c, 1, 1), expand_as), U-Net (BatchNorm, bilinear
#    upsampling; per-pixel classes from numpy masks) and the issue's Conv-BN-ReLU residual network,
#    each exported by torch.onnx.export(training=TRAINING, do_constant_folding=False): ddl's
#    eval-mode outputs equal PyTorch's within 1e-4 of their scale; ddl's loss at each step equals
#    PyTorch's within 1e-3 (batches of 16 in the same order, SGD lr 0.01 momentum 0.9, inputs
#    normalised with the data's per-channel mean and std on both sides) over the steps where
#    PyTorch's float32 run agrees with its own float64 run to 1e-3 (data.py compare: these
#    networks amplify a float32 rounding past 1e-3 within a few steps, in PyTorch as in ddl);
#    BatchNorm's running statistics after a step are PyTorch's within 1e-4. 10 steps each, the
#    ResNet-18 2, whose second PyTorch's float32 gets 4e-3 off its float64 (ddl: 5e-4): its first
#    alone is held to 1e-3 here (docs/DATA.md, "Trains as PyTorch trains", has the 20 steps).
# The figures of 20 steps each and the accuracy on a five-class folder are make bench's
# (tools/bench/torch_trains.sh; tools/bench/acc5.sh).
# ddl-test: beside (builds or computes and bounds no time: it runs beside another such test)
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
T=$BUILD/bin/ddl-train
INFER=$BUILD/tests/test_infer
CKPT=$BUILD/bin/ddl-ckpt
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
skip() { echo "skipped: $*"; echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit; }
[ -x "$T" ] && [ -x "$INFER" ] && [ -x "$CKPT" ] || { echo "no $T, $INFER or $CKPT: build first" >&2; echo "0 passed, 1 failed"; exit 1; }
"$PYTHON" -c 'import onnx, numpy, PIL' 2> /dev/null || skip "no python3-onnx, python3-numpy or python3-pil (make deps)"
D="$PYTHON tests/torch/data.py"
FX=tests/torch/fixture

# train NAME MODEL DATADIR BATCH LR [FLAGS]: ddl-train's run, each step's loss in $tmp/NAME.log/
train() {
    t_n=$1 t_m=$2 t_d=$3 t_b=$4 t_lr=$5; shift 5
    rm -rf "$tmp/$t_n.log"
    "$T" --data "$t_d/x.npy" --targets "$t_d/y.npy" --arch "$t_m" --epochs 1 --batch "$t_b" --lr "$t_lr" --momentum 0.9 \
        --schedule constant --logdir "$tmp/$t_n.log" --log-every 1 --quiet --save "$tmp/$t_n.ckpt" "$@" > "$tmp/$t_n.out" 2>&1
}

# ---- the fixture: no PyTorch needed ----
"$PYTHON" tests/torch/tiny.py "$tmp" 7 && $D data "$tmp/fx" 160 16 3 3
check "tiny.py writes the fixture's network and data.py its data" $?
mkdir -p "$tmp/fx-ref"
"$INFER" --reference "$tmp/tiny.onnx" "$tmp/fx/eval" 8 "$tmp/fx-ref" > "$tmp/log" 2>&1 && $D logits $FX/eval.txt "$tmp/fx-ref" > "$tmp/out" 2>&1
check "the fixture's eval-mode outputs are PyTorch's within 1e-4 ($(cat "$tmp/out"))" $?
train fx "$tmp/tiny.onnx" "$tmp/fx" 8 0.1 --in-order
check "ddl-train --in-order trains the fixture ($(tail -n 1 "$tmp/fx.out"))" $?
$D compare $FX/losses.txt "$tmp/fx.log" > "$tmp/out" 2>&1
check "the fixture's 20 losses are PyTorch's within 1e-3 ($(cat "$tmp/out"))" $?
train fx-shuffled "$tmp/tiny.onnx" "$tmp/fx" 8 0.1
$D compare $FX/losses.txt "$tmp/fx-shuffled.log" > "$tmp/out" 2>&1
[ $? -eq 1 ] && grep -q "^steps=20 " "$tmp/out"
check "shuffled (no --in-order), the losses are not PyTorch's ($(cat "$tmp/out"))" $?
train fx-m8 "$tmp/tiny.onnx" "$tmp/fx" 8 0.1 --in-order --momentum 0.8
$D compare $FX/losses.txt "$tmp/fx-m8.log" > "$tmp/out" 2>&1
[ $? -eq 1 ] && grep -q "^steps=20 " "$tmp/out"
check "with momentum 0.8, the losses are not PyTorch's ($(cat "$tmp/out"))" $?

# ---- PyTorch's own exports, where torch is installed ----
"$PYTHON" -c 'import torch' 2> /dev/null || skip "no python3-torch: the fixture alone was checked"
$D data "$tmp/c32" 160 32 3 1 && $D data "$tmp/c64" 32 64 3 1 && $D data "$tmp/s32" 160 32 3 1 segment
check "data.py writes classes at 32x32 and 64x64 and masks at 32x32" $?
# PyTorch's part in two processes (it takes seconds to start on a loaded machine): the fixture
# again, then each network exported, its eval-mode outputs of 8 images, and its steps
mkdir -p "$tmp/pt" && cp "$tmp/tiny.onnx" "$tmp/pt/"
"$PYTHON" tests/torch/torch_trains.py prepare "$tmp/pt" 8 0.1 "tiny:$tmp/fx:3:16" > "$tmp/log" 2>&1 &&
    "$PYTHON" tests/torch/torch_trains.py prepare "$tmp/pt" 16 0.01 "resnet:$tmp/c32:3:32" "mobilenet:$tmp/c32:3:32" \
        "effnet:$tmp/c32:3:32" "senet:$tmp/c32:3:32" "unet:$tmp/s32:4:32" "resnet18:$tmp/c64:3:64" > "$tmp/log" 2>&1
check "PyTorch exports, evaluates and trains the networks ($(grep -v Warning "$tmp/log" | tail -n 1))" $?
"$PYTHON" -c 'import sys, numpy as np
a, b = (np.loadtxt(f) for f in sys.argv[1:3]); c, d = (np.loadtxt(f) for f in sys.argv[3:5])
sys.exit(not (np.abs(a - b).max() <= 1e-6 * np.abs(b).max() and np.abs(c - d).max() <= 1e-6 * np.abs(d).max()))' \
    "$tmp/pt/tiny.torch" $FX/losses.txt "$tmp/pt/tiny.eval.txt" $FX/eval.txt
check "the fixture is what PyTorch makes of tiny.py's network and data.py's data" $?
for net in resnet mobilenet effnet senet unet resnet18; do
    d=c32
    [ $net = unet ] && d=s32
    [ $net = resnet18 ] && d=c64
    mkdir -p "$tmp/r-$net"
    "$INFER" --reference "$tmp/pt/$net.onnx" "$tmp/$d/eval" 8 "$tmp/r-$net" > "$tmp/log" 2>&1 &&
        $D logits "$tmp/pt/$net.eval.txt" "$tmp/r-$net" > "$tmp/out" 2>&1
    check "$net: ddl's eval-mode outputs are PyTorch's within 1e-4 ($(tail -n 1 "$tmp/out"))" $?
    train $net "$tmp/pt/$net.onnx" "$tmp/$d" 16 0.01 --in-order
    check "$net: ddl-train trains PyTorch's export ($(tail -n 1 "$tmp/$net.out"))" $?
    # effnet's loss moves little in 10 steps (PyTorch's float32 stays within 2e-7 of its float64): held
    # to 1e-5, so that a wrong gradient through its gates (1e-4 off) shows
    # senet's too (measured 1.1e-7): held to 2e-6, so that a bias its bias-less Linear layers do not
    # have, trained (5e-7 off at step 2, 1.1e-5 at step 7), shows
    tol=1e-3; [ $net = effnet ] && tol=1e-5; [ $net = senet ] && tol=2e-6
    $D compare "$tmp/pt/$net.torch" "$tmp/$net.log" $tol "$tmp/pt/$net.torch64" > "$tmp/out" 2>&1
    check "$net: each step's loss is PyTorch's within $tol ($(cat "$tmp/out"))" $?
    train $net-1 "$tmp/pt/$net.onnx" "$tmp/$d" 16 0.01 --in-order --train-limit 16 &&
        "$CKPT" export "$tmp/$net-1.ckpt" "$tmp/$net-1.npz" > "$tmp/log" 2>&1 &&
        $D state "$tmp/$net-1.npz" "$tmp/pt/$net.torch.1.npz" running_ 1e-4 > "$tmp/out" 2>&1
    check "$net: the running statistics after a step are PyTorch's within 1e-4 ($(cat "$tmp/out"))" $?
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
