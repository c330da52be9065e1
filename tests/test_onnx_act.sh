#!/bin/sh
# test_onnx_act.sh - the activation and softmax layers through ONNX (tests/onnx/make_act_models.py:
# one model per activation, its nodes laid out as PyTorch 1.13's torch.onnx.export writes them,
# written with python3-onnx):
#  - ddl imports each and its outputs are onnxruntime's within 1e-4 of their scale
#    (tests/onnx/check.js), the same classes;
#  - the patterns become one layer each (SiLU, GELU in three orders and its tanh form, Hardswish
#    from HardSigmoid + Mul), a Sigmoid read by two nodes stays one beside the SiLU, softmax
#    follows the opset (one axis from 13, the axes from it on before), PyTorch's Transpose,
#    Softmax, Transpose before opset 13 is one softmax layer;
#  - an Erf outside GELU's layout, a GELU with a wrong constant and a Softmax over the batch
#    are refused, the node named;
#  - a network of every kind (the arch format) trained, saved and exported by ddl-ckpt runs in
#    onnxruntime as in ddl, and that export imported again is the same network, layer for layer,
#    and gives onnxruntime's outputs too;
#  - where python3-torch is installed, a network of every kind as torch.onnx.export writes it
#    (opsets 11, 13, 14, 17: tests/onnx/torch_act.py) gives onnxruntime's outputs in ddl.
# ddl-test: beside (builds or computes and bounds no time: it runs beside another such test)
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
T=$BUILD/bin/ddl-train
REF=$BUILD/tests/test_infer
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
skip() { echo "skipped: $*"; echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit; }
"$PYTHON" -c 'import onnx, PIL, numpy' 2> /dev/null || skip "no python3-onnx, python3-pil or python3-numpy (make deps)"
"$PYTHON" tests/onnx/make_act_models.py "$tmp/m"; check "python3-onnx writes the models" $?
"$PYTHON" tests/train/make_fruits.py "$tmp/fruits" 60 20 16 > /dev/null; check "the fruit photos are made" $?

# ---- what each becomes ----
arch() { # arch MODEL: the layers ddl makes of it, one line
    "$T" --data "$tmp/fruits/train" --arch "$tmp/m/$1.onnx" --epochs 0 --quiet --save "$tmp/$1.ckpt" > /dev/null 2>&1 &&
        "$BUILD/bin/ddl-ckpt" show "$tmp/$1.ckpt" | sed -n '/^graph/,/^tensors/p' | sed 's/^graph//; s/^ *//' |
        grep -v '^tensors' | tr '\n' ';'
}
want_arch() { # want_arch MODEL TEXT: the layers between the first conv and the head are TEXT
    got=$(arch "$1" | sed 's/^input 3 16 16;conv c1 4 3 pad=1;//; s/conv c2 5 1;gap;flatten;$//')
    [ "$got" = "$2" ]; check "$1.onnx becomes: $2 (got: $got)" $?
}
want_arch silu "silu;"
want_arch silu_shared "sigmoid;silu from=c1;concat from=3,2;"
want_arch gelu "gelu;"
want_arch gelu_b "gelu;"
want_arch gelu_c "gelu;"
want_arch gelu_tanh "gelu_tanh;"
want_arch hardswish "hardswish;"
want_arch hardswish13 "hardswish;"
want_arch relu6 "clip min=0 max=6;"
want_arch relu6_9 "clip min=0 max=6;"
want_arch clip_max "clip max=1.5;"
want_arch leaky "leakyrelu alpha=0.100000001;"
want_arch hardsigmoid "hardsigmoid alpha=0.200000003 beta=0.5;"
want_arch softmax1 "softmax axis=1;"
want_arch softmax11 "softmax axis=1 to=3;"
want_arch softmax_t "softmax axis=1;"

# ---- refused, named ----
refused() { # refused MODEL TEXT
    "$T" --predict --model "$tmp/m/$1.onnx" --images "$tmp/fruits/test" > "$tmp/e" 2>&1; rc=$?
    [ $rc -ne 0 ] && [ $rc -le 2 ] && grep -q "$2" "$tmp/e"; check "$1.onnx is refused: $2" $?
}
refused bad_erf "bad_erf.onnx: node (unnamed, output a) (Erf): ddl takes Erf only inside a GELU as PyTorch writes it"
refused bad_gelu "bad_gelu.onnx: node (unnamed, output e) (Erf): ddl takes Erf only inside a GELU" # its Div by 2: an affine layer
refused bad_axis "bad_axis.onnx: node (unnamed, output a) (Softmax): axis 0 of a 4-D tensor: ddl takes axes 1 to 3"

# damaged patterns: the longest (GELU's tanh form) cut short at 20 places, a byte changed at 20
# more: refused or run, never a crash
size=$(wc -c < "$tmp/m/gelu_tanh.onnx"); crashed=0
for i in $(seq 1 20); do
    head -c $((size * i / 21)) "$tmp/m/gelu_tanh.onnx" > "$tmp/cut.onnx"
    cp "$tmp/m/gelu_tanh.onnx" "$tmp/flip.onnx"
    printf '\377' | dd of="$tmp/flip.onnx" bs=1 seek=$((size * i / 21)) conv=notrunc 2> /dev/null
    for f in cut flip; do # a sanitizer's report counts too (it exits 1)
        "$T" --predict --model "$tmp/$f.onnx" --images "$tmp/fruits/test" > "$tmp/e" 2>&1
        [ $? -gt 2 ] || grep -q "Sanitizer\|runtime error" "$tmp/e" && crashed=$((crashed + 1))
    done
done
[ $crashed -eq 0 ]; check "40 damaged ONNX files of a GELU: none crashes ddl ($crashed did)" $?

# ---- the outputs of onnxruntime, imported and exported ----
command -v node > /dev/null 2>&1 && [ -d tests/onnx/node_modules/onnxruntime-node ] ||
    skip "the outputs against onnxruntime (onnxruntime-node not installed: tools/install-deps.sh)"
same() { # same MODEL.onnx DIR INPUT WHAT: ddl's outputs in DIR are onnxruntime's
    node tests/onnx/check.js "$1" "$2" "$3" > "$tmp/out" 2>&1; rc=$?
    grep -q "^onnx: images=20 .* classes_equal=.* ok$" "$tmp/out" && [ $rc -eq 0 ]
    check "$4 ($(cat "$tmp/out"))" $?
}
for f in "$tmp"/m/*.onnx; do
    m=$(basename "$f" .onnx)
    case $m in bad_*) continue ;; esac
    mkdir -p "$tmp/ref-$m"
    "$REF" --reference "$f" "$tmp/fruits/test" 20 "$tmp/ref-$m" > "$tmp/log" 2>&1
    check "ddl runs the imported $m.onnx ($(tail -n 1 "$tmp/log"))" $?
    same "$f" "$tmp/ref-$m" input "$m.onnx: ddl's outputs are onnxruntime's"
done

# every kind in one network of the arch format: trained, saved, exported, run in onnxruntime,
# imported again
cat > "$tmp/all.arch" << 'EOF'
input 1 16 16
conv c1 6 3 pad=1
leakyrelu alpha=0.2
conv c2 6 3 pad=1
gelu
conv c3 6 1
gelu_tanh
conv c4 6 1
silu
conv c5 6 1
hardswish
conv c6 6 1
hardsigmoid alpha=0.25 beta=0.4
conv c7 6 3 pad=1
elu alpha=0.5
conv c8 6 1
clip min=-0.5 max=0.75
conv c9 6 1
clip max=0.5
conv c10 6 1
tanh
conv c11 6 1
softmax axis=1
conv c12 6 1
softmax axis=2 to=3
conv c13 6 1
logsoftmax axis=3
conv c14 6 1
sigmoid
conv c15 6 1
relu6
softmax axis=1 to=3
conv c16 6 1
gap
dense fc classes
logsoftmax axis=1
EOF
# layers CKPT: its layers, as the import names them (the flatten before a Gemm dropped)
layers() {
    "$BUILD/bin/ddl-ckpt" show "$1" | sed -n '/^graph/,/^classes/p' | sed 's/^graph//; s/^ *//' |
        sed 's/^dense fc [0-9]*$/dense fc classes/' | grep -v '^flatten$' | grep -v '^classes'
}
"$T" --data "$tmp/fruits/train" --channels 1 --arch "$tmp/all.arch" --epochs 1 --quiet --save "$tmp/all.ckpt" > "$tmp/log" 2>&1
check "ddl-train trains a network of every activation ($(tail -n 1 "$tmp/log"))" $?
"$BUILD/bin/ddl-ckpt" export "$tmp/all.ckpt" "$tmp/all.onnx" > "$tmp/log" 2>&1
check "ddl-ckpt exports it ($(tail -n 1 "$tmp/log"))" $?
mkdir -p "$tmp/ck" "$tmp/re"
"$REF" --reference "$tmp/all.ckpt" "$tmp/fruits/test" 20 "$tmp/ck" > "$tmp/log" 2>&1 &&
    same "$tmp/all.onnx" "$tmp/ck" pixels "the export runs in onnxruntime as in ddl"
"$REF" --reference "$tmp/all.onnx" "$tmp/fruits/test" 20 "$tmp/re" > "$tmp/log" 2>&1
check "ddl imports its own export ($(tail -n 1 "$tmp/log"))" $?
same "$tmp/all.onnx" "$tmp/re" pixels "the export imported again gives onnxruntime's outputs"
"$T" --data "$tmp/fruits/train" --channels 1 --arch "$tmp/all.onnx" --epochs 0 --quiet --save "$tmp/again.ckpt" > /dev/null 2>&1
layers "$tmp/all.ckpt" > "$tmp/a1"; layers "$tmp/again.ckpt" > "$tmp/a2"
[ -s "$tmp/a1" ] && cmp -s "$tmp/a1" "$tmp/a2"
check "the export imported again is the same network, layer for layer ($(diff "$tmp/a1" "$tmp/a2" | head -n 8 | tr "\n" " "))" $?

# PyTorch's own export of every kind (opsets 11 to 17), where python3-torch is installed
if "$PYTHON" -c 'import torch' 2> /dev/null; then
    "$PYTHON" tests/onnx/torch_act.py "$tmp/m" > "$tmp/log" 2>&1; check "torch.onnx.export writes a network of every kind" $?
    for o in 11 13 14 17; do
        mkdir -p "$tmp/ref-t$o"
        "$REF" --reference "$tmp/m/torch_act$o.onnx" "$tmp/fruits/test" 20 "$tmp/ref-t$o" > "$tmp/log" 2>&1
        check "ddl imports PyTorch's export at opset $o ($(tail -n 1 "$tmp/log"))" $?
        same "$tmp/m/torch_act$o.onnx" "$tmp/ref-t$o" input "PyTorch's export, opset $o: ddl's outputs are onnxruntime's"
    done
else
    echo "skipped: PyTorch's own export (no python3-torch; make bench installs it)"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
