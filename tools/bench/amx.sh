#!/bin/sh
# amx.sh - make bench's section on the AMX bfloat16 path (BENCH_ONLY=amx), run by bench.sh:
#   - the product alone on AMX tiles, AVX512-BF16 and float32, GFLOP/s (gemm_amx.c);
#   - the cnn preset (ddl-train --arch cnn) on 3000 generated 64x64 RGB JPEG photos, batch 64,
#     one thread: ddl in float32, ddl in bfloat16 on AMX, ddl in bfloat16 on AVX512-BF16
#     (DDL_CPU_NO_AMX=1) and PyTorch 1.13 with bfloat16 autocast, alternated REPEAT times; the
#     issue's targets: AMX >= 3x ddl's float32 and >= 2x PyTorch's autocast; and on AMX with
#     every convolution by im2col and the product (the build in $BUILD/im2col, as bf16.sh makes
#     it), to compare with the direct AMX convolutions (conv_bf16_amx.c);
#   - ResNet-18 (its ONNX export, as resnet.sh and bf16.sh train it), the same four, the second
#     epoch's rate over 640 images: the same targets.
# On a CPU without AMX it prints "skipped: no AMX" and measures nothing (the path is tested there
# by emulation: tests/test_gemm_bf16_amx.c).
set -u
BUILD=${BUILD:-build}
REPEAT=${REPEAT:-3}
here=$(dirname "$0")
. "$here/lib.sh"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
T=$BUILD/bin/ddl-train
echo "== AMX: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1)"
if ! grep -q 'amx_bf16' /proc/cpuinfo || ! grep -q 'amx_tile' /proc/cpuinfo; then
    echo "skipped: no AMX"
    exit 0
fi
echo "== the bfloat16 product alone, 1 thread, best of 5 (gemm_amx.c)"
g=$(ddl_tool gemm_amx) && "$g" 5
fr=/tmp/ddl-bench-fruits64
[ -d "$fr/train" ] || /usr/bin/python3 tests/train/make_fruits.py "$fr" 1000 20 64 || exit 1
TI=$BUILD/im2col/bin/ddl-train
make -s BUILD="$BUILD/im2col" CPPFLAGS=-DDDL_NO_BF16_CONV "$TI" > /dev/null 2>&1 || TI=""
echo "== cnn 64x64 RGB, batch 64, 1 thread: ddl fp32, bf16 on AMX, bf16 on AVX512-BF16, PyTorch bf16 autocast, bf16 on AMX by im2col; $REPEAT alternated runs"
: > /tmp/ddl-bench-amx-f32.txt; : > /tmp/ddl-bench-amx.txt; : > /tmp/ddl-bench-amx-avx.txt; : > /tmp/ddl-bench-amx-t.txt
: > /tmp/ddl-bench-amx-i.txt
for r in $(seq 1 "$REPEAT"); do
    f=$("$T" --data "$fr/train" --arch cnn --image-size 64 --epochs 1 --quiet | field images_per_sec)
    a=$("$T" --data "$fr/train" --arch cnn --image-size 64 --epochs 1 --quiet --precision bf16 | field images_per_sec)
    v=$(DDL_CPU_NO_AMX=1 "$T" --data "$fr/train" --arch cnn --image-size 64 --epochs 1 --quiet --precision bf16 |
        field images_per_sec)
    t=$(/usr/bin/python3 "$here/cnn_torch.py" --images 3000 --size 64 --threads 1 --mode bf16 | field images_per_sec)
    i=$([ -n "$TI" ] && "$TI" --data "$fr/train" --arch cnn --image-size 64 --epochs 1 --quiet --precision bf16 |
        field images_per_sec)
    echo "   run $r: ddl fp32 $f, bf16 AMX $a, bf16 AVX512-BF16 $v, pytorch bf16 $t, bf16 AMX by im2col ${i:--} images/s"
    echo "$f" >> /tmp/ddl-bench-amx-f32.txt; echo "$a" >> /tmp/ddl-bench-amx.txt
    echo "$v" >> /tmp/ddl-bench-amx-avx.txt; echo "$t" >> /tmp/ddl-bench-amx-t.txt; echo "$i" >> /tmp/ddl-bench-amx-i.txt
done
i=$(grep . /tmp/ddl-bench-amx-i.txt | median)
f=$(median < /tmp/ddl-bench-amx-f32.txt); a=$(median < /tmp/ddl-bench-amx.txt)
v=$(median < /tmp/ddl-bench-amx-avx.txt); t=$(median < /tmp/ddl-bench-amx-t.txt)
echo "cnn_amx: ddl_fp32_images_per_sec=$f ddl_amx_images_per_sec=$a ddl_avx512bf16_images_per_sec=$v pytorch_bf16_images_per_sec=$t amx_over_fp32=$(ratio "$a" "$f") amx_over_pytorch=$(ratio "$a" "$t")"
record "cnn 64x64 RGB training --precision bf16 on AMX, images/s, 1 thread" "$a" "ddl float32" "$f" "$(ratio "$a" "$f")" ">= 3" "-" "-"
record "cnn 64x64 RGB training --precision bf16 on AMX, images/s, 1 thread" "$a" "ddl bf16 on AVX512-BF16" "$v" "$(ratio "$a" "$v")" "-" "-" "-"
record "cnn 64x64 RGB training --precision bf16 on AMX, images/s, 1 thread" "$a" "PyTorch 1.13 bf16 autocast" "$t" "$(ratio "$a" "$t")" ">= 2" "-" "-"
record "cnn 64x64 RGB training --precision bf16 on AMX, images/s, 1 thread" "$a" "bf16 on AMX, every convolution by im2col" "$i" "$(ratio "$a" "$i")" "> 1" "-" "-"

echo "== ResNet-18 64x64 RGB (its ONNX export, BatchNorm), batch 64, 1 thread: the same four; $REPEAT alternated runs"
model=/tmp/ddl-bench-resnet18.onnx
[ -s "$model" ] || /usr/bin/python3 "$here/resnet_torch.py" --export "$model" --size 64 --classes 3 2> /dev/null || {
    echo "amx.sh: cannot export ResNet-18 (python3-torch)"; exit 1; }
: > /tmp/ddl-bench-amx-rf32.txt; : > /tmp/ddl-bench-amx-r.txt; : > /tmp/ddl-bench-amx-ravx.txt; : > /tmp/ddl-bench-amx-rt.txt
for r in $(seq 1 "$REPEAT"); do
    f=$(resnet_rate "$T" "$model" "$fr/train" fp32); a=$(resnet_rate "$T" "$model" "$fr/train" bf16)
    v=$(DDL_CPU_NO_AMX=1 resnet_rate "$T" "$model" "$fr/train" bf16)
    t=$(/usr/bin/python3 "$here/resnet_torch.py" --images 640 --size 64 --classes 3 --threads 1 --mode bf16 |
        field images_per_sec)
    echo "   run $r: ddl fp32 $f, bf16 AMX $a, bf16 AVX512-BF16 $v, pytorch bf16 $t images/s"
    echo "$f" >> /tmp/ddl-bench-amx-rf32.txt; echo "$a" >> /tmp/ddl-bench-amx-r.txt
    echo "$v" >> /tmp/ddl-bench-amx-ravx.txt; echo "$t" >> /tmp/ddl-bench-amx-rt.txt
done
f=$(median < /tmp/ddl-bench-amx-rf32.txt); a=$(median < /tmp/ddl-bench-amx-r.txt)
v=$(median < /tmp/ddl-bench-amx-ravx.txt); t=$(median < /tmp/ddl-bench-amx-rt.txt)
echo "resnet18_amx: ddl_fp32_images_per_sec=$f ddl_amx_images_per_sec=$a ddl_avx512bf16_images_per_sec=$v pytorch_bf16_images_per_sec=$t amx_over_fp32=$(ratio "$a" "$f") amx_over_pytorch=$(ratio "$a" "$t")"
record "ResNet-18 64x64 RGB training --precision bf16 on AMX, images/s, 1 thread" "$a" "ddl float32" "$f" "$(ratio "$a" "$f")" ">= 3" "-" "-"
record "ResNet-18 64x64 RGB training --precision bf16 on AMX, images/s, 1 thread" "$a" "ddl bf16 on AVX512-BF16" "$v" "$(ratio "$a" "$v")" "-" "-" "-"
record "ResNet-18 64x64 RGB training --precision bf16 on AMX, images/s, 1 thread" "$a" "PyTorch 1.13 bf16 autocast" "$t" "$(ratio "$a" "$t")" ">= 2" "-" "-"
