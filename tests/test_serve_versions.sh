#!/bin/sh
# test_serve_versions.sh - ddl-serve's versions as TF Serving keeps them (tests/serve/versions.py):
# --model NAME=DIR with DIR/1 and DIR/2 serves 2, /v1/models/NAME/versions/1 and KServe's
# /v2/models/NAME/versions/1 reach 1 (status, metadata, ready, :predict, infer), X-Model-Version
# names who answered, and --model NAME=FILE still works; a version 3 appearing is loaded and
# --keep-versions 2 drops 1; a corrupt version 4 is refused (logged, shown END in the status)
# while 3 serves, and loaded once its file is mended; names that are not version numbers (01,
# 99999999999, junk) are ignored, and a version (a directory or its file) that is a link out of
# DIR refused; paths naming +1, 01, ../1 or 4294967297 are 404s; --canary c=30 sends exactly the
# requests the seeded hash says to the newest version (200 requests); the inference log's lines
# parse as JSON, name version, input size and CRC-32C, answer and latency, and are moved to
# FILE.1 by size; a log nobody reads drops lines (counted in /metrics) and holds no request; a
# directory without versions and a --canary that cannot be (a file model, 101%, one version kept)
# are refused at start, saying why.
# ddl-test: beside (three small models trained, then requests; no time bounded)
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
. tests/serve_lib.sh
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

"$PYTHON" tests/train/make_fruits.py "$tmp/fruits" 4 1 16 > /dev/null; check "a folder of 16x16 fruit photos" $?
for s in 1 2 3; do
    "$B/ddl-train" --data "$tmp/fruits/train" --arch cnn:4 --image-size 16 --channels 3 --epochs 1 --batch 4 \
        --seed $s --quiet --save "$tmp/m$s.ckpt" > "$tmp/train$s" 2>&1
    check "model $s (cnn:4, 16x16x3, seed $s)" $?
done
"$PYTHON" tests/serve/versions.py "$B/ddl-serve" "$tmp" > "$tmp/out" 2>&1; r=$?
[ -n "$V" ] && cat "$tmp/out"
[ $r -eq 0 ]; check "versions.py ran to its end" $?
while read -r word rest; do
    case "$word" in
    ok) check "$rest" 0 ;;
    FAIL) check "$rest" 1 ;;
    *) echo "$word $rest" ;;
    esac
done < "$tmp/out"
# what the command line refuses, saying why, before serving anything
mkdir -p "$tmp/empty/junk" "$tmp/one/1" && cp "$tmp/m1.ckpt" "$tmp/one/1/model.ckpt"
refused() { # WANT ARGS...: ddl-serve exits non-zero, its message holding WANT
    want=$1; shift
    "$B/ddl-serve" --listen 127.0.0.1:0 "$@" > "$tmp/cli" 2>&1 && return 1
    grep -qF -- "$want" "$tmp/cli" || { cat "$tmp/cli"; return 1; }
}
refused "no version loads (each is DIR/N/model.ckpt" --model e="$tmp/empty"
check "a directory without versions: refused, saying what it must hold" $?
refused "that model is one file, not a directory of versions" --model f="$tmp/m1.ckpt" --canary f=10
check "--canary on a model of one file: refused" $?
refused "expected NAME=PERCENT (0 to 100)" --model o="$tmp/one" --canary o=101
check "--canary o=101: refused" $?
refused "needs --keep-versions 2 or more" --model o="$tmp/one" --keep-versions 1 --canary o=10
check "--canary with --keep-versions 1: refused" $?
[ -n "$KEEP" ] && cp -r "$tmp" "$KEEP"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
