#!/bin/sh
# test_onnx_hostile.sh - ONNX files made to hurt (tests/onnx/make_hostile.py, written with
# python3-onnx) are refused, never run: weights of dims (-1, 10), (2^62, 4), (0, 10), (2^32, 2^32,
# 1, 1) (2^64 values, 0 in a size_t), a ConvTranspose of -1 outputs, dims that disagree with what
# the graph resolves, raw_data or float_data shorter or longer than the dims say, kernel_shape,
# strides, pads, group, dilations and transB negative, zero or past 32 bits, input dims and
# channel sums past an int, a Resize of 8 sizes (written past the sizes' 4 before: make fuzz found
# it), a Mul of two layers whose shapes ddl's mul does not take. For each, ddl-train --predict exits 1 or 2 (no signal, no sanitizer
# report) with a message naming the node, the tensor and the bad value, and ddl-serve refuses the
# model at start-up the same way. The unsupported-operator message is whole: it says where the
# list of operators is and ends with its ')' even under a long directory (the file's own name kept).
# ddl-test: beside (builds or computes and bounds no time: it runs beside another such test)
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
T=$BUILD/bin/ddl-train
S=$BUILD/bin/ddl-serve
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" -c 'import onnx, PIL, numpy' 2> /dev/null || {
    echo "skipped: no python3-onnx, python3-pil or python3-numpy (make deps)"; echo "0 passed, 0 failed"; exit 0; }
# a directory name long enough that path and message together pass DDL_ERR_BYTES
d=$tmp/a-directory-whose-name-is-long-enough-to-push-the-end-of-an-error-message-past-its-256-bytes-as-deep-trees-do
"$PYTHON" tests/onnx/make_hostile.py "$d"; check "python3-onnx writes the hostile models" $?
"$PYTHON" -c 'import sys; from PIL import Image; Image.new("L", (8, 8), 77).save(sys.argv[1])' "$tmp/img.png"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1"

# clean OUT RC: exited by itself with 1 or 2, and no sanitizer spoke
clean() { [ "$2" -ge 1 ] && [ "$2" -le 2 ] && ! grep -q "Sanitizer\|runtime error" "$1"; }

"$T" --predict --model "$d/ok.onnx" --images "$tmp/img.png" > "$tmp/out" 2>&1
check "the model they are made from runs ($(head -c 300 "$tmp/out"))" $?

n_cases=0
tab=$(printf '\t')
while IFS="$tab" read -r name expect; do
    n_cases=$((n_cases + 1))
    "$T" --predict --model "$d/$name.onnx" --images "$tmp/img.png" > "$tmp/$name.out" 2>&1; rc=$?
    clean "$tmp/$name.out" $rc && grep -qF -- "$name.onnx: " "$tmp/$name.out" && grep -qF -- "$expect" "$tmp/$name.out"
    check "ddl-train --predict $name.onnx: exit $rc, says \"$expect\" ($(head -c 400 "$tmp/$name.out"))" $?
done < "$d/cases.txt"
[ "$n_cases" -ge 40 ]; check "make_hostile.py wrote $n_cases cases" $?

# the unsupported operator: the whole message, where the list is and its ')' last, under the long directory
grep -q 'unsupported.onnx: node r2 (Softsign): .*(docs/DATA.md, "ONNX operators", lists those it takes)$' \
    "$tmp/unsupported.out"
check "the unsupported-operator message says where the list is and ends with ')' ($(cat "$tmp/unsupported.out"))" $?

# ddl-serve loads its models at start-up: it must refuse each file there, and exit
if [ -x "$S" ]; then
    while IFS="$tab" read -r name expect; do
        timeout 60 "$S" --model "m=$d/$name.onnx" --listen 127.0.0.1:0 > "$tmp/s.out" 2>&1; rc=$?
        clean "$tmp/s.out" $rc && grep -qF -- "$expect" "$tmp/s.out" && ! grep -q "listening on" "$tmp/s.out"
        check "ddl-serve --model m=$name.onnx: refused at start-up, exit $rc ($(head -c 400 "$tmp/s.out"))" $?
    done < "$d/cases.txt"
else
    echo "skipped: ddl-serve (not built: needs libmicrohttpd-dev and libjansson-dev)"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
