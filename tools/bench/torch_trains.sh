#!/bin/sh
# torch_trains.sh - make bench's "trains as PyTorch trains" (issue 45, item 6; BENCH_ONLY=torchtrain):
#  1. nets.py's ResNet-18 (64x64), MobileNetV2-style network, EfficientNet-style network
#     (squeeze-and-excitation), U-Net and the Conv-BN-ReLU residual network (32x32), each exported by torch.onnx.export in training mode: ddl's
#     eval-mode outputs against PyTorch's (largest difference over each image's scale), and 20
#     steps of SGD (lr 0.01, momentum 0.9, batch 32, the same batches, dropout off) in ddl-train
#     --in-order and in PyTorch (float32, and float64 for how far PyTorch's own rounding goes):
#     the largest relative difference of the per-step losses (tests/torch/data.py compare);
# The accuracy on a five-class folder, over seeds, is acc5.sh's (BENCH_ONLY=acc5).
# Needs /usr/bin/python3 with torch (make deps); one thread each.
set -u
BUILD=${BUILD:-build}
here=$(dirname "$0")
. "$here/lib.sh"
PY=/usr/bin/python3
T=$BUILD/bin/ddl-train
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
"$PY" -c 'import torch' 2> /dev/null || { echo "== trains as PyTorch trains: skipped (no python3-torch)"; exit 0; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
D="$PY tests/torch/data.py"
echo "== trains as PyTorch trains: 6 networks, 20 steps each (batch 32, lr 0.01), same weights and batches"
$D data "$tmp/c32" 640 32 3 1 && $D data "$tmp/c64" 640 64 3 1 && $D data "$tmp/s32" 640 32 3 1 segment || exit 1
mkdir -p "$tmp/pt"
"$PY" tests/torch/torch_trains.py prepare "$tmp/pt" 32 0.01 "resnet:$tmp/c32:3:32" "mobilenet:$tmp/c32:3:32" \
    "effnet:$tmp/c32:3:32" "senet:$tmp/c32:3:32" "unet:$tmp/s32:4:32" "resnet18:$tmp/c64:3:64" > "$tmp/log" 2>&1 ||
    { tail -n 5 "$tmp/log"; exit 1; }
for net in resnet mobilenet effnet senet unet resnet18; do
    d=c32
    [ $net = unet ] && d=s32
    [ $net = resnet18 ] && d=c64
    mkdir -p "$tmp/r-$net"
    "$BUILD/tests/test_infer" --reference "$tmp/pt/$net.onnx" "$tmp/$d/eval" 8 "$tmp/r-$net" > /dev/null 2>&1
    ev=$($D logits "$tmp/pt/$net.eval.txt" "$tmp/r-$net" | sed -n 's/.*max_rel_diff=\([^ ]*\).*/\1/p')
    "$T" --data "$tmp/$d/x.npy" --targets "$tmp/$d/y.npy" --arch "$tmp/pt/$net.onnx" --epochs 1 --batch 32 --lr 0.01 \
        --momentum 0.9 --schedule constant --in-order --logdir "$tmp/l-$net" --log-every 1 --quiet > /dev/null 2>&1
    line=$($D compare "$tmp/pt/$net.torch" "$tmp/l-$net" 1e-3 "$tmp/pt/$net.torch64")
    echo "   $net: eval max_rel_diff=$ev; $line"
    all=$(echo "$line" | sed -n 's/.*float32_vs_float64=\([^ ]*\).*/\1/p')
    d64=$(echo "$line" | sed -n 's/.*ddl_vs_float64=\([^ ]*\).*/\1/p')
    rel=$($D compare "$tmp/pt/$net.torch" "$tmp/l-$net" 1e9 | sed -n 's/.*max_rel_diff=\([^ ]*\).*/\1/p')
    record "item 6: $net, eval outputs, max diff / scale" "$ev" "PyTorch 1.13" "-" "-" "<= 1e-4"
    record "item 6: $net, 20 losses, max rel diff (PyTorch f32 vs its f64: $all; ddl vs f64: $d64)" "$rel" \
        "PyTorch 1.13" "-" "-" "<= 1e-3"
done
