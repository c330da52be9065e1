#!/bin/sh
# test_serve_binary.sh - KServe v2's binary tensor data extension in ddl-serve: a 64x64x3 float
# input sent as raw little-endian FP32 after the JSON header (Inference-Header-Content-Length)
# gives the answer of the same input as JSON, bit for bit, and outputs asked for as binary are the
# bits of the JSON ones; UINT8 raw pixels likewise; a malformed binary request (a header length
# past the body, negative or of 30 digits; a binary_data_size not the shape's, past the body,
# overflowing, negative, or beside "data"; a truncated tail; bytes left over) is a 400 naming what
# was wrong, and the server goes on (tests/serve/binary.py). Run under ASan too.
# ddl-test: beside (one small model trained, then requests; no time bounded)
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
. tests/serve_lib.sh
tmp=$(mktemp -d) || exit 1
spid=""
trap '[ -n "$spid" ] && kill $spid 2> /dev/null; rm -rf "$tmp"' EXIT

"$PYTHON" tests/train/make_fruits.py "$tmp/fruits" 4 1 64 > /dev/null; check "a folder of 64x64 fruit photos" $?
"$B/ddl-train" --data "$tmp/fruits/train" --arch cnn:4 --image-size 64 --channels 3 --epochs 1 --batch 4 --quiet \
    --save "$tmp/rgb.ckpt" > "$tmp/train" 2>&1
check "a colour model of 64x64x3 (cnn:4)" $?
port=$(free_port)
"$B/ddl-serve" --listen "127.0.0.1:$port" --model rgb="$tmp/rgb.ckpt" 2> "$tmp/serve.log" &
spid=$!
serve_wait "$port"
"$PYTHON" tests/serve/binary.py "$port" rgb > "$tmp/out" 2>&1; r=$?; [ -n "$V" ] && cat "$tmp/out"; [ $r -eq 0 ]
check "binary.py ran to its end" $?
while read -r word rest; do
    case "$word" in
    ok) check "$rest" 0 ;;
    FAIL) check "$rest" 1 ;;
    *) echo "$word $rest" ;;
    esac
done < "$tmp/out"
kill $spid; wait $spid; rc=$?
[ $rc -eq 0 ]; check "ddl-serve stops cleanly (exit $rc)" $?
grep -q "ERROR: AddressSanitizer\|runtime error" "$tmp/serve.log"; [ $? -ne 0 ]; check "no sanitizer report" $?
spid=""
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
