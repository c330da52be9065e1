#!/bin/sh
# bf16.sh - make bench's section on --precision bf16 (BENCH_ONLY=bf16), run by bench.sh:
#   - the cnn preset (ddl-train --arch cnn) on 3000 generated 64x64 RGB JPEG photos
#     (tests/train/make_fruits.py), batch 64, one thread: ddl in float32, ddl in bfloat16,
#     PyTorch 1.13 with bfloat16 autocast (cnn_torch.py --mode bf16) and the AMX path's loops
#     over tiles that cost nothing (the build in $BUILD/amxfree, below), alternated REPEAT times,
#     images/s side by side; the target on AVX512-BF16 is bf16 >= 1.5x ddl's float32;
#   - ResNet-18 (its ONNX export, as resnet.sh trains it) in float32 and bfloat16, alternated
#     REPEAT times: the same target; and in bfloat16 with every convolution by im2col and the
#     bfloat16 product (a build with CPPFLAGS=-DDDL_NO_BF16_CONV in $BUILD/im2col): the way the
#     AMX path convolved before its direct kernels, with this CPU's product in place of the
#     tiles; and with the AMX path's own loops over tiles that cost nothing
#     (CPPFLAGS=-DDDL_AMX_FREE_TILES in $BUILD/amxfree: the direct kernels' conversions, im2col,
#     packing and epilogue where it still runs, and the rest of the step, no product; its results
#     are wrong, its speed is a ceiling of what the tiles can give on this CPU);
#   - the cnn's six convolutions alone in float32 and bfloat16, and the bare bfloat16 product on
#     their shapes (conv_bf16.c); ResNet-18's convolutions alone, pass by pass (resnet_layers.c);
#   - LeNet on Fashion-MNIST, EPOCHS_ACC epochs (default 5), float32 against bfloat16: the test
#     accuracies within 0.005.
# The CPU's bfloat16 path and model name are printed first: the figures belong to that CPU.
set -u
BUILD=${BUILD:-build}
REPEAT=${REPEAT:-3}
EPOCHS_ACC=${EPOCHS_ACC:-5}
DATA=/usr/share/datasets/fashion-mnist
here=$(dirname "$0")
. "$here/lib.sh"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
T=$BUILD/bin/ddl-train
echo "== bfloat16: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1); flags: $(grep -o 'avx512_bf16\|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
fr=/tmp/ddl-bench-fruits64
[ -d "$fr/train" ] || /usr/bin/python3 tests/train/make_fruits.py "$fr" 1000 20 64 || exit 1
TI=$BUILD/im2col/bin/ddl-train
make -s BUILD="$BUILD/im2col" CPPFLAGS=-DDDL_NO_BF16_CONV "$TI" > /dev/null 2>&1 || TI=""
TF=$BUILD/amxfree/bin/ddl-train
make -s BUILD="$BUILD/amxfree" CPPFLAGS=-DDDL_AMX_FREE_TILES "$TF" > /dev/null 2>&1 || TF=""
echo "== cnn 64x64 RGB, batch 64, 1 thread: ddl fp32, ddl bf16, PyTorch bf16 autocast, AMX's loops with free tiles; $REPEAT alternated runs"
: > /tmp/ddl-bench-f32.txt; : > /tmp/ddl-bench-b16.txt; : > /tmp/ddl-bench-tb16.txt; : > /tmp/ddl-bench-r16.txt
: > /tmp/ddl-bench-x16.txt
for r in $(seq 1 "$REPEAT"); do
    f=$("$T" --data "$fr/train" --arch cnn --image-size 64 --epochs 1 --quiet | field images_per_sec)
    b=$("$T" --data "$fr/train" --arch cnn --image-size 64 --epochs 1 --quiet --precision bf16 | field images_per_sec)
    t=$(/usr/bin/python3 "$here/cnn_torch.py" --images 3000 --size 64 --threads 1 --mode bf16 | field images_per_sec)
    x=$([ -n "$TF" ] && "$TF" --data "$fr/train" --arch cnn --image-size 64 --epochs 1 --quiet --precision bf16 2> /dev/null |
        field images_per_sec)
    echo "   run $r: ddl fp32 $f, ddl bf16 $b, pytorch bf16 $t, AMX's loops with free tiles ${x:--} images/s"
    echo "$f" >> /tmp/ddl-bench-f32.txt; echo "$b" >> /tmp/ddl-bench-b16.txt; echo "$t" >> /tmp/ddl-bench-tb16.txt
    echo "$x" >> /tmp/ddl-bench-x16.txt
    [ -n "$f" ] && [ -n "$b" ] && ratio "$b" "$f" >> /tmp/ddl-bench-r16.txt && echo >> /tmp/ddl-bench-r16.txt
done
f=$(median < /tmp/ddl-bench-f32.txt); b=$(median < /tmp/ddl-bench-b16.txt); t=$(median < /tmp/ddl-bench-tb16.txt)
echo "cnn_bf16: ddl_fp32_images_per_sec=$f ddl_bf16_images_per_sec=$b pytorch_bf16_images_per_sec=$t bf16_over_fp32=$(ratio "$b" "$f") bf16_over_pytorch=$(ratio "$b" "$t")"
q=$(median < /tmp/ddl-bench-r16.txt) # the median of each run's ratio: float32 and bf16 back to back
record "cnn 64x64 RGB training --precision bf16, images/s, 1 thread (median run ratio $q)" "$b" "ddl float32" "$f" \
    "$(ratio "$b" "$f")" ">= 1.5 (AVX512-BF16)" "-" "-"
record "cnn 64x64 RGB training --precision bf16, images/s, 1 thread" "$b" "PyTorch 1.13 bf16 autocast" "$t" "$(ratio "$b" "$t")" "-" "-" "-"
x=$(grep . /tmp/ddl-bench-x16.txt | median)
echo "cnn_bf16_amx_free_tiles: images_per_sec=$x fp32_images_per_sec=$f ceiling_over_fp32=$(ratio "$x" "$f")"
record "cnn 64x64 RGB training --precision bf16, AMX's loops with tiles that cost nothing (its ceiling on this CPU), images/s, 1 thread" \
    "$x" "ddl float32" "$f" "$(ratio "$x" "$f")" "-" "-" "-"

echo "== ResNet-18 64x64 RGB (its ONNX export, BatchNorm), batch 64, 1 thread: ddl fp32 and bf16; $REPEAT alternated runs"
model=/tmp/ddl-bench-resnet18.onnx
[ -s "$model" ] || /usr/bin/python3 "$here/resnet_torch.py" --export "$model" --size 64 --classes 3 2> /dev/null || {
    echo "bf16.sh: cannot export ResNet-18 (python3-torch)"; exit 1; }
: > /tmp/ddl-bench-rf32.txt; : > /tmp/ddl-bench-rb16.txt; : > /tmp/ddl-bench-rr16.txt
: > /tmp/ddl-bench-ri16.txt; : > /tmp/ddl-bench-rx16.txt
for r in $(seq 1 "$REPEAT"); do
    f=$(resnet_rate "$T" "$model" "$fr/train" fp32); b=$(resnet_rate "$T" "$model" "$fr/train" bf16)
    i=$([ -n "$TI" ] && resnet_rate "$TI" "$model" "$fr/train" bf16)
    x=$([ -n "$TF" ] && resnet_rate "$TF" "$model" "$fr/train" bf16)
    echo "   run $r: ddl fp32 $f, ddl bf16 $b, bf16 all by im2col ${i:--}, AMX's loop with free tiles ${x:--} images/s"
    echo "$f" >> /tmp/ddl-bench-rf32.txt; echo "$b" >> /tmp/ddl-bench-rb16.txt; echo "$i" >> /tmp/ddl-bench-ri16.txt
    echo "$x" >> /tmp/ddl-bench-rx16.txt
    [ -n "$f" ] && [ -n "$b" ] && ratio "$b" "$f" >> /tmp/ddl-bench-rr16.txt && echo >> /tmp/ddl-bench-rr16.txt
done
f=$(median < /tmp/ddl-bench-rf32.txt); b=$(median < /tmp/ddl-bench-rb16.txt); q=$(median < /tmp/ddl-bench-rr16.txt)
echo "resnet18_bf16: ddl_fp32_images_per_sec=$f ddl_bf16_images_per_sec=$b bf16_over_fp32=$(ratio "$b" "$f") run_ratio=$q"
record "ResNet-18 64x64 RGB training --precision bf16, images/s, 1 thread (median run ratio $q)" "$b" "ddl float32" "$f" \
    "$(ratio "$b" "$f")" ">= 1.5 (AVX512-BF16)" "-" "-"
i=$(grep . /tmp/ddl-bench-ri16.txt | median)
echo "resnet18_bf16_im2col: ddl_bf16_images_per_sec=$b im2col_images_per_sec=$i"
record "ResNet-18 64x64 RGB training --precision bf16, every convolution by im2col (the AMX path's way before its direct kernels), images/s, 1 thread" \
    "$i" "ddl bf16" "$b" "$(ratio "$i" "$b")" "-" "-" "-"
x=$(grep . /tmp/ddl-bench-rx16.txt | median)
echo "resnet18_bf16_amx_free_tiles: images_per_sec=$x fp32_images_per_sec=$f ceiling_over_fp32=$(ratio "$x" "$f")"
record "ResNet-18 64x64 RGB training --precision bf16, AMX's loop with tiles that cost nothing (its ceiling on this CPU), images/s, 1 thread" \
    "$x" "ddl float32" "$f" "$(ratio "$x" "$f")" "-" "-" "-"

echo "== the cnn's convolutions alone, batch 64, 1 thread, best of 5 (conv_bf16.c)"
cb=$(ddl_tool conv_bf16 -lm) && "$cb" 5
echo "== ResNet-18's convolutions alone, batch 64, 1 thread, best of 5, forward / input gradient / weight gradient (resnet_layers.c)"
rl=$(ddl_tool resnet_layers -lm) && "$rl" 5

echo "== LeNet on Fashion-MNIST, $EPOCHS_ACC epochs: test accuracy, fp32 against bf16"
a=$("$T" --data "$DATA" --arch lenet --epochs "$EPOCHS_ACC" --quiet | field test_acc)
c=$("$T" --data "$DATA" --arch lenet --epochs "$EPOCHS_ACC" --quiet --precision bf16 | field test_acc)
echo "lenet_bf16: fp32_test_acc=$a bf16_test_acc=$c"
record "LeNet $EPOCHS_ACC epochs --precision bf16, test accuracy" "$c" "float32" "$a" \
    "$(awk -v a="$c" -v b="$a" 'BEGIN { printf "%+.4f", a - b }')" "within 0.005" "-" "-"
