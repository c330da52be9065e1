#!/bin/sh
# make_corpus.sh - write again the committed seed corpora of three fuzzers (make fuzz reads them
# from tests/fuzz/corpus/NAME/, beside the run's own corpus; crashes found later are added there by
# hand as regression-*), from real files of the tests' own making:
#  fuzz_onnx        ONNX files of python3-onnx: tests/onnx/make_models.py's (as test_onnx_import.sh
#                   runs them), tests/onnx/torch_layout.py's (torch.onnx.export's layouts, opsets
#                   9 to 17), a few of tests/onnx/make_hostile.py's (dims, data, attributes) and of
#                   tests/onnx/make_act_models.py's (the activations' node patterns) and
#                   tests/onnx/make_shapes.py's (Resize, GroupNorm patterns, folded shapes; the
#                   smaller ones, as shapes-NAME.onnx)
#  fuzz_infer       mode byte 0 or 1, then a checkpoint of ddl-train (graphs of conv, pools,
#                   groupnorm, deconv, concat and dense; adam and sgd; class names); mode 2, then
#                   the ONNX files that import, and three hostile ones
#  fuzz_checkpoint  modes 0 to 3, then the same checkpoints
# Run from the top of the tree after make all: BUILD=build sh tests/fuzz/make_corpus.sh
set -e
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
PYTHON=python3
[ -x /usr/bin/python3 ] && PYTHON=/usr/bin/python3
out=tests/fuzz/corpus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -rf "$out/fuzz_onnx" "$out/fuzz_infer" "$out/fuzz_checkpoint"
mkdir -p "$out/fuzz_onnx" "$out/fuzz_infer" "$out/fuzz_checkpoint"

# mode BYTE FILE DEST: DEST = the byte, then FILE
mode() { printf "\\$(printf '%03o' "$1")" > "$3"; cat "$2" >> "$3"; }

# ---- ONNX ----
"$PYTHON" tests/onnx/make_models.py "$tmp/m" > /dev/null
"$PYTHON" tests/onnx/torch_layout.py "$tmp/t" > /dev/null
"$PYTHON" tests/onnx/make_hostile.py "$tmp/h" > /dev/null
for f in "$tmp"/m/*.onnx "$tmp"/t/*.onnx; do cp "$f" "$out/fuzz_onnx/"; done
"$PYTHON" tests/onnx/make_act_models.py "$tmp/a" > /dev/null # the activations' patterns
for a in silu_shared gelu_b gelu_tanh hardswish13 relu6 softmax11 softmax_t bad_gelu; do
    cp "$tmp/a/$a.onnx" "$out/fuzz_onnx/act-$a.onnx"
done
"$PYTHON" tests/onnx/make_shapes.py "$tmp/s" > /dev/null
for s in gn gn18 gnread up_bilinear upsample9 eps view1 sizesN; do cp "$tmp/s/$s.onnx" "$out/fuzz_onnx/shapes-$s.onnx"; done
for h in matmul_neg matmul_huge deconv_neg deconv_neg_data dims_wrap raw_short float_data_short kernel_huge \
         strides_huge pads_kernel group_neg auto_pad deconv_stride_huge input_big concat_overflow unsupported; do
    cp "$tmp/h/$h.onnx" "$out/fuzz_onnx/hostile-$h.onnx"
done
for f in "$tmp"/m/cnn.onnx "$tmp"/m/scaled.onnx "$tmp"/t/*.onnx "$tmp"/h/matmul_neg.onnx "$tmp"/h/deconv_neg.onnx \
         "$tmp"/h/deconv_stride_huge.onnx; do
    mode 2 "$f" "$out/fuzz_infer/onnx-$(basename "$f" .onnx)"
done

# ---- checkpoints: small graphs, trained for an epoch on 8x8 photos ----
"$PYTHON" tests/train/make_fruits.py "$tmp/fruits" 8 2 8 > /dev/null
printf 'input\nconv c1 4 3 pad=1\nrelu\nmaxpool 2\ngroupnorm gn 2\nflatten\ndense fc classes\n' > "$tmp/a.txt"
printf 'input\nconv enc 2 3 pad=1\nrelu\navgpool 2\ndeconv up 2 2 stride=2\nconcat from=up,enc\nconv head 2 1\ngap\ndense classes\n' > "$tmp/b.txt"
printf 'input 1 8 8\nconv a 2 3 stride=2 bias=0\nrelu\ndropout 0.5\nadd from=2\nflatten\ndense out classes\noutput\n' > "$tmp/c.txt"
i=0
for spec in "a.txt --optimizer sgd" "b.txt --optimizer adam" "c.txt --optimizer sgd --channels 1"; do
    set -- $spec
    arch=$1; shift
    "$BUILD/bin/ddl-train" --data "$tmp/fruits/train" --arch "$tmp/$arch" --epochs 1 --batch 8 --image-size 8 --quiet \
        --save "$tmp/ck$i" "$@" > /dev/null
    for m in 0 1; do mode $m "$tmp/ck$i" "$out/fuzz_infer/ckpt-$i-$m"; done
    for m in 0 1 2 3; do mode $m "$tmp/ck$i" "$out/fuzz_checkpoint/ckpt-$i-$m"; done
    i=$((i + 1))
done
du -sh "$out/fuzz_onnx" "$out/fuzz_infer" "$out/fuzz_checkpoint"
