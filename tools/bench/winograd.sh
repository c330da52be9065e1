#!/bin/sh
# winograd.sh - make bench's section on Winograd convolutions (BENCH_ONLY=winograd), run by
# bench.sh: the cnn preset (ddl-train --arch cnn, 3000 generated 64x64 RGB photos, batch 64) and
# U-Net (build/bin/unet, SCENES scenes 64x64, batch 32), one thread each, in one run, alternated
# REPEAT times: ddl with --conv direct, ddl with --conv winograd, and PyTorch in float32 NCHW and
# channels_last (tools/bench/torch_modes.py; bfloat16 is not float32 and is left out). Reports
# Winograd against direct and against PyTorch's faster float32 setting (issue 47's target: 1.5x).
# Winograd takes only the layers its size rule picks (src/core/winograd.c, docs/TRAINING.md).
set -u
BUILD=${BUILD:-build}
REPEAT=${REPEAT:-3}
SCENES=${SCENES:-1024}
DATA=/usr/share/datasets/fashion-mnist
here=$(dirname "$0")
. "$here/lib.sh"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

# torch_f32 FILE CMD...: the peer in NCHW and channels_last, "MODE RATE" lines appended to FILE.
torch_f32() {
    f=$1; shift
    for m in nchw channels_last; do
        r=$("$@" --mode "$m" 2> /dev/null | field images_per_sec)
        echo "$m ${r:-failed}" >> "$f"
        echo "   pytorch --mode $m: ${r:-failed} images/s"
    done
}

# one NAME DDL_CMD... -- TORCH_CMD...: REPEAT alternated rounds of direct, winograd and the peer.
one() {
    name=$1; shift
    : > /tmp/ddl-bench-wd.txt; : > /tmp/ddl-bench-ww.txt; : > /tmp/ddl-bench-wt.txt
    for r in $(seq 1 "$REPEAT"); do
        d=$("$@" --conv direct | field images_per_sec)
        w=$("$@" --conv winograd | field images_per_sec)
        echo "   run $r: ddl direct $d images/s, winograd $w images/s"
        echo "$d" >> /tmp/ddl-bench-wd.txt; echo "$w" >> /tmp/ddl-bench-ww.txt
        case $name in
        cnn) torch_f32 /tmp/ddl-bench-wt.txt /usr/bin/python3 "$here/cnn_torch.py" --images 3000 --size 64 --threads 1 ;;
        *) torch_f32 /tmp/ddl-bench-wt.txt /usr/bin/python3 "$here/unet_torch.py" --scenes "$SCENES" --threads 1 ;;
        esac
    done
    d=$(median < /tmp/ddl-bench-wd.txt); w=$(median < /tmp/ddl-bench-ww.txt)
    bm=$(best_mode /tmp/ddl-bench-wt.txt); m=${bm% *}; t=${bm#* }
    echo "winograd_$name: direct_images_per_sec=$d winograd_images_per_sec=$w pytorch_${m}_images_per_sec=$t" \
         "winograd_vs_direct=$(ratio "$w" "$d") winograd_vs_pytorch=$(ratio "$w" "$t")"
    record "$name, --conv winograd, images/s, 1 thread" "$w" "ddl --conv direct" "$d" "$(ratio "$w" "$d")" "> 1" "-" "-"
    record "$name, --conv winograd, images/s, 1 thread" "$w" "PyTorch 1.13 float32 $m" "$t" "$(ratio "$w" "$t")" ">= 1.5" "-" "-"
}

layers=$(ddl_tool winograd_layers) || { echo "winograd.sh: cannot build tools/bench/winograd_layers.c"; exit 1; }
echo "== Winograd on every 3x3 layer of the cnn and U-Net, forward + backward, thread CPU time, 1 thread"
"$layers"

fr=/tmp/ddl-bench-fruits64
[ -d "$fr/train" ] || /usr/bin/python3 tests/train/make_fruits.py "$fr" 1000 20 64 || exit 1
echo "== Winograd: the cnn preset, 3000 64x64 RGB photos, batch 64, 1 thread; $REPEAT alternated rounds"
one cnn "$BUILD/bin/ddl-train" --data "$fr/train" --arch cnn --image-size 64 --epochs 1 --quiet
echo "== Winograd: U-Net, $SCENES scenes 64x64, batch 32, 1 thread; $REPEAT alternated rounds"
one unet "$BUILD/bin/unet" --scenes "$SCENES" --test-scenes 32 --epochs 1 --threads 1 --quiet --data "$DATA"
