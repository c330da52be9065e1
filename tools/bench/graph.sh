#!/bin/sh
# graph.sh - make bench's section on layer graphs (BENCH_ONLY=graph), run by bench.sh:
#   - LeNet and U-Net built as graphs against their hand-written plugins, forward and backward
#     with the same weights, alternated (graph.c): the graph must keep >= 0.95x;
#   - ddl-train --arch lenet against build/bin/lenet, one epoch each, alternated REPEAT times;
#   - ddl-train --arch cnn on 3000 generated 64x64 RGB JPEG photos (tests/train/make_fruits.py)
#     against the same network in PyTorch 1.13 (cnn_torch.py), one thread each, alternated:
#     the target is >= 2x;
#   - Fashion-MNIST written out as PNG folders (tests/train/fashion_png.py) against its IDX files:
#     ddl-train --arch lenet, 5 epochs each: the test accuracies within 0.005.
set -u
BUILD=${BUILD:-build}
REPEAT=${REPEAT:-3}
DATA=/usr/share/datasets/fashion-mnist
here=$(dirname "$0")
. "$here/lib.sh"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
rss_d=/tmp/ddl-bench-rss-ddl; rss_t=/tmp/ddl-bench-rss-torch
bench=$(ddl_tool graph) || { echo "graph.sh: cannot build tools/bench/graph.c"; exit 1; }
echo "== layer graphs against the hand-written plugins: forward + backward, same weights, $REPEAT x 7 alternated rounds"
: > /tmp/ddl-bench-gl.txt; : > /tmp/ddl-bench-gu.txt; : > /tmp/ddl-bench-pl.txt; : > /tmp/ddl-bench-pu.txt
for r in $(seq 1 "$REPEAT"); do
    "$bench" 7 40 > /tmp/ddl-bench-graph.out || { echo "graph.sh: bench-graph failed"; exit 1; }
    cat /tmp/ddl-bench-graph.out
    sed -n 's/^graph_lenet: plugin_images_per_sec=\([0-9]*\) graph_images_per_sec=\([0-9]*\).*/\1 \2/p' /tmp/ddl-bench-graph.out |
        { read -r p g; echo "$p" >> /tmp/ddl-bench-pl.txt; echo "$g" >> /tmp/ddl-bench-gl.txt; }
    sed -n 's/^graph_unet: plugin_images_per_sec=\([0-9]*\) graph_images_per_sec=\([0-9]*\).*/\1 \2/p' /tmp/ddl-bench-graph.out |
        { read -r p g; echo "$p" >> /tmp/ddl-bench-pu.txt; echo "$g" >> /tmp/ddl-bench-gu.txt; }
done
p=$(median < /tmp/ddl-bench-pl.txt); g=$(median < /tmp/ddl-bench-gl.txt)
record "LeNet as a layer graph, forward + backward, images/s" "$g" "the lenet plugin" "$p" "$(ratio "$g" "$p")" ">= 0.95" "-" "-"
p=$(median < /tmp/ddl-bench-pu.txt); g=$(median < /tmp/ddl-bench-gu.txt)
record "U-Net as a layer graph, forward + backward, images/s" "$g" "the unet plugin" "$p" "$(ratio "$g" "$p")" ">= 0.95" "-" "-"

echo "== ddl-train --arch lenet against build/bin/lenet: one epoch, 1 thread, $REPEAT alternated runs"
: > /tmp/ddl-bench-ddl.txt; : > /tmp/ddl-bench-torch.txt
for r in $(seq 1 "$REPEAT"); do
    g=$("$BUILD/bin/ddl-train" --data "$DATA" --arch lenet --epochs 1 --schedule constant --quiet | field images_per_sec)
    p=$("$BUILD/bin/lenet" --epochs 1 --quiet --data "$DATA" | field images_per_sec)
    echo "   run $r: ddl-train $g images/s, lenet $p images/s"
    echo "$g" >> /tmp/ddl-bench-ddl.txt; echo "$p" >> /tmp/ddl-bench-torch.txt
done
g=$(median < /tmp/ddl-bench-ddl.txt); p=$(median < /tmp/ddl-bench-torch.txt)
record "ddl-train --arch lenet, one epoch, images/s" "$g" "build/bin/lenet" "$p" "$(ratio "$g" "$p")" ">= 0.95" "-" "-"

fr=/tmp/ddl-bench-fruits64
[ -d "$fr/train" ] || /usr/bin/python3 tests/train/make_fruits.py "$fr" 1000 20 64 || exit 1
echo "== ddl-train --arch cnn, 3000 64x64 RGB JPEG photos, batch 64, 1 thread, against PyTorch; $REPEAT alternated runs"
: > /tmp/ddl-bench-ddl.txt; : > /tmp/ddl-bench-torch.txt; : > /tmp/ddl-bench-modes.txt
i=0 tries=0
while [ $i -lt "$REPEAT" ] && [ $tries -lt $((REPEAT + 3)) ]; do
    tries=$((tries + 1))
    d=$(peak_rss $rss_d "$BUILD/bin/ddl-train" --data "$fr/train" --arch cnn --image-size 64 --epochs 1 --quiet | field images_per_sec)
    t=$(peer_modes /tmp/ddl-bench-modes.txt peak_rss $rss_t /usr/bin/python3 "$here/cnn_torch.py" --images 3000 --size 64 --threads 1)
    echo "   run $tries: ddl $d images/s, pytorch $t images/s"
    peer_ok "PyTorch's cnn" "$t" ${CNN_PEER_BAND:-200 340} || continue
    echo "$d" >> /tmp/ddl-bench-ddl.txt; echo "$t" >> /tmp/ddl-bench-torch.txt
    i=$((i + 1))
done
d=$(median < /tmp/ddl-bench-ddl.txt); t=$(median < /tmp/ddl-bench-torch.txt)
echo "cnn_1thread: ddl_images_per_sec=$d pytorch_images_per_sec=$t ratio=$(ratio "$d" "$t")"
record "cnn (ddl-train --arch cnn) 64x64 RGB training, images/s, 1 thread" "$d" "PyTorch 1.13" "$t" "$(ratio "$d" "$t")" ">= 2" "$(cat $rss_d)" "$(cat $rss_t)"
record_best "cnn (ddl-train --arch cnn) 64x64 RGB training, images/s, 1 thread" "$d" /tmp/ddl-bench-modes.txt "-"

fp=/tmp/ddl-bench-fashion-png
[ -d "$fp/test" ] || /usr/bin/python3 tests/train/fashion_png.py "$DATA" "$fp" 60000 10000 || exit 1
echo "== Fashion-MNIST as PNG folders against its IDX files: ddl-train --arch lenet, 5 epochs, test accuracy"
a=$("$BUILD/bin/ddl-train" --data "$fp/train" --test "$fp/test" --arch lenet --epochs 5 --quiet | field test_acc)
b=$("$BUILD/bin/ddl-train" --data "$DATA" --arch lenet --epochs 5 --quiet | field test_acc)
echo "fashion_png: png_test_acc=$a idx_test_acc=$b"
record "Fashion-MNIST as PNG folders, lenet 5 epochs, test accuracy" "$a" "the IDX files" "$b" \
    "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%+.4f", a - b }')" "within 0.005" "-" "-"
