#!/bin/sh
# zoo.sh - make bench's section on torchvision's networks (BENCH_ONLY=zoo), run by bench.sh: each of
# ZOO_NETS (MobileNetV3-Small, EfficientNet-B0, ShuffleNetV2 0.5, DenseNet-121) exported by
# zoo_torch.py in training mode (BatchNorm kept) and trained by ddl-train --arch on 64x64 RGB
# photos, batch 64, one thread, its second epoch's rate, against the same network in PyTorch 1.13
# (random inputs: only the speed is compared) in each of torch_modes.py's settings, alternated
# REPEAT times; medians, ddl against PyTorch's NCHW float32 and against its fastest setting.
set -u
BUILD=${BUILD:-build}
REPEAT=${REPEAT:-3}
IMAGES=${ZOO_IMAGES:-320}
NETS=${ZOO_NETS:-"mobilenet_v3_small efficientnet_b0 shufflenet_v2_x0_5 densenet121"}
here=$(dirname "$0")
. "$here/lib.sh"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
/usr/bin/python3 -c 'import torchvision' 2> /dev/null || { echo "zoo.sh: skipped: no python3-torchvision"; exit 0; }
fr=/tmp/ddl-bench-fruits64
[ -d "$fr/train" ] || /usr/bin/python3 tests/train/make_fruits.py "$fr" 1000 20 64 || exit 1
for net in $NETS; do
    model=/tmp/ddl-bench-zoo-$net.onnx
    [ -s "$model" ] || /usr/bin/python3 "$here/zoo_torch.py" --net "$net" --export "$model" 2> /dev/null || {
        echo "zoo.sh: cannot export $net (python3-torchvision)"; exit 1; }
    echo "== $net at 64x64 RGB, batch 64, 1 thread: ddl-train --arch (its ONNX export) against PyTorch, $IMAGES images, $REPEAT alternated runs"
    : > /tmp/ddl-bench-ddl.txt; : > /tmp/ddl-bench-torch.txt; : > /tmp/ddl-bench-modes.txt
    for r in $(seq 1 "$REPEAT"); do
        d=$("$BUILD/bin/ddl-train" --data "$fr/train" --arch "$model" --image-size 64 --epochs 2 --train-limit "$IMAGES" \
            --schedule constant | sed -n 's/^epoch 2\/2 .* \([0-9.]*\) images\/s.*/\1/p')
        t=$(peer_modes /tmp/ddl-bench-modes.txt /usr/bin/python3 "$here/zoo_torch.py" --net "$net" --images "$IMAGES")
        echo "   run $r: ddl $d images/s, pytorch $t images/s"
        echo "$d" >> /tmp/ddl-bench-ddl.txt; echo "$t" >> /tmp/ddl-bench-torch.txt
    done
    d=$(median < /tmp/ddl-bench-ddl.txt); t=$(median < /tmp/ddl-bench-torch.txt)
    echo "zoo_$net: ddl_images_per_sec=$d pytorch_images_per_sec=$t ratio=$(ratio "$d" "$t")"
    record "torchvision $net 64x64 training (imported ONNX), images/s, 1 thread" "$d" "PyTorch 1.13 fp32 NCHW" "$t" \
        "$(ratio "$d" "$t")" "-" "-" "-"
    record_best "torchvision $net 64x64 training (imported ONNX), images/s, 1 thread" "$d" /tmp/ddl-bench-modes.txt "-"
done
