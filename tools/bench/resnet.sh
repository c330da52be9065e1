#!/bin/sh
# resnet.sh - make bench's section on ResNet-18 (BENCH_ONLY=resnet), run by bench.sh (issue 45):
#   - ResNet-18 (torchvision's BasicBlock layout, resnet_torch.py) exported by torch.onnx.export in
#     training mode with its BatchNormalization nodes, trained by ddl-train --arch resnet18.onnx on
#     64x64 RGB JPEG photos, batch 64, one thread, against the same network in PyTorch 1.13 (NCHW
#     float32, random inputs: only the speed is compared), alternated REPEAT times: the target is
#     ddl >= 1.3x;
#   - BatchNorm against the 3x3 convolution before it at ResNet-18's four stages (bn.c): the
#     target is <= 10% of the conv's time, forward and backward;
#   - the stem's max-pool against the plain 2x2 window, forward and backward (pool.c).
set -u
BUILD=${BUILD:-build}
REPEAT=${REPEAT:-3}
IMAGES=${RESNET_IMAGES:-640}
here=$(dirname "$0")
. "$here/lib.sh"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
rss_d=/tmp/ddl-bench-rss-ddl; rss_t=/tmp/ddl-bench-rss-torch
model=/tmp/ddl-bench-resnet18.onnx
fr=/tmp/ddl-bench-fruits64
[ -d "$fr/train" ] || /usr/bin/python3 tests/train/make_fruits.py "$fr" 1000 20 64 || exit 1
[ -s "$model" ] || /usr/bin/python3 "$here/resnet_torch.py" --export "$model" --size 64 --classes 3 2> /dev/null || {
    echo "resnet.sh: cannot export ResNet-18 (python3-torch)"; exit 1; }

echo "== ResNet-18 at 64x64 RGB, batch 64, 1 thread: ddl-train --arch (its ONNX export) against PyTorch, $IMAGES images, $REPEAT alternated runs"
: > /tmp/ddl-bench-ddl.txt; : > /tmp/ddl-bench-torch.txt; : > /tmp/ddl-bench-modes.txt
for r in $(seq 1 "$REPEAT"); do
    # the second epoch's rate: the first holds the first touch of every buffer, as PyTorch's untimed
    # warm-up step does
    d=$(peak_rss $rss_d "$BUILD/bin/ddl-train" --data "$fr/train" --arch "$model" --image-size 64 --epochs 2 \
        --train-limit "$IMAGES" --schedule constant | sed -n 's/^epoch 2\/2 .* \([0-9.]*\) images\/s.*/\1/p')
    t=$(peer_modes /tmp/ddl-bench-modes.txt peak_rss $rss_t /usr/bin/python3 "$here/resnet_torch.py" --images "$IMAGES" \
        --size 64 --classes 3 --threads 1)
    echo "   run $r: ddl $d images/s, pytorch $t images/s"
    echo "$d" >> /tmp/ddl-bench-ddl.txt; echo "$t" >> /tmp/ddl-bench-torch.txt
done
d=$(median < /tmp/ddl-bench-ddl.txt); t=$(median < /tmp/ddl-bench-torch.txt)
echo "resnet18_1thread: ddl_images_per_sec=$d pytorch_images_per_sec=$t ratio=$(ratio "$d" "$t")"
record "ResNet-18 64x64 RGB training (imported ONNX, BatchNorm), images/s, 1 thread" "$d" "PyTorch 1.13 fp32 NCHW" "$t" \
    "$(ratio "$d" "$t")" ">= 1.3" "$(cat $rss_d)" "$(cat $rss_t)"
record_best "ResNet-18 64x64 RGB training (imported ONNX, BatchNorm), images/s, 1 thread" "$d" /tmp/ddl-bench-modes.txt "-"

echo "== BatchNorm against the 3x3 conv before it, ResNet-18's stages, batch 64, 1 thread (bn.c)"
bn=$(ddl_tool bn) || { echo "resnet.sh: cannot build tools/bench/bn.c"; exit 1; }
"$bn" | tee /tmp/ddl-bench-bn.out
w=$(sed -n 's/^bn_vs_conv: worst=\([0-9.]*\)%.*/\1/p' /tmp/ddl-bench-bn.out)
record "BatchNorm's time against the conv before it (forward + backward, worst of ResNet-18's stages), %" "$w" \
    "the conv" "100" "-" "<= 10" "-" "-"

echo "== ResNet-18's stem max-pool (3x3 stride 2 pad 1) against the plain 2x2, batch 64, 1 thread (pool.c)"
pool=$(ddl_tool pool) || { echo "resnet.sh: cannot build tools/bench/pool.c"; exit 1; }
"$pool"
