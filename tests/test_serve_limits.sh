#!/bin/sh
# test_serve_limits.sh - what ddl-serve refuses, and what it costs it: a PNG decompression bomb
# (512 MiB of zeros deflated after the last row, or in a zTXt chunk) is answered 400 in under
# 200 ms, and another client's requests stay under 200 ms while four clients send bombs; good
# PNGs (one IDAT, many small ones, Adam7) give the answer of the same pixels as PGM.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
B=$BUILD/bin
export OPENBLAS_NUM_THREADS=1
if [ ! -x "$B/ddl-serve" ] || ! command -v curl > /dev/null || ! command -v "$PYTHON" > /dev/null; then
    echo "skipped: needs $B/ddl-serve, curl and python3"; echo "0 passed, 0 failed"; exit 0
fi
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
    echo "skipped: needs /usr/share/datasets/fashion-mnist"; echo "0 passed, 0 failed"; exit 0
fi
tmp=$(mktemp -d) || exit 1
pids=""
trap 'for p in $pids; do kill $p 2>/dev/null; done; rm -rf "$tmp"' EXIT

# start NAME ARGS...: ddl-serve on a free port of 127.0.0.1, its log in $tmp/NAME.log; sets $port, $pid
start() {
    n=$1; shift
    : > "$tmp/$n.log"
    "$B/ddl-serve" --listen 127.0.0.1:0 "$@" 2> "$tmp/$n.log" &
    pid=$!; pids="$pids $pid"; port=""
    for _ in $(seq 100); do
        port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$tmp/$n.log")
        [ -n "$port" ] && break
        sleep 0.1
    done
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null; }
# req METHOD PATH [CURL ARGS]: the body to $tmp/out, "STATUS SECONDS" printed
req() { m=$1; p=$2; shift 2; curl -s -o "$tmp/out" -w '%{http_code} %{time_total}' -X "$m" "$@" "http://127.0.0.1:$port$p"; }
code() { req "$@" | cut -d' ' -f1; }
# fast "STATUS SECONDS" WANT: the status is WANT and it took less than 0.2 s
fast() { [ "${1% *}" = "$2" ] && awk -v t="${1#* }" 'BEGIN { exit !(t < 0.2) }'; }
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
PREDICT=/v1/models/fashion:predict

"$B/lenet" --epochs 1 --train-limit 1000 --quiet --save "$tmp/lenet.ckpt" > /dev/null 2>&1
check "lenet trains" $?
"$B/unet" --epochs 1 --scenes 50 --test-scenes 10 --quiet --save "$tmp/unet.ckpt" > /dev/null 2>&1
check "unet trains" $?
"$PYTHON" tests/serve/pngs.py "$tmp"; check "the PNGs are made" $?
"$PYTHON" -c "import json; print(json.dumps({'instances': [[[(x * y + i) % 256 for x in range(64)] for y in range(64)] for i in range(16)]}))" > "$tmp/u16.json"

# ---- PNG bodies ----
start png --model fashion="$tmp/lenet.ckpt"
[ "$(code POST $PREDICT -H 'Content-Type: image/x-portable-graymap' --data-binary @"$tmp/img.pgm")" = 200 ]
check "a PGM body: 200" $?
cp "$tmp/out" "$tmp/pgm.out"
for f in ok split adam7; do
    [ "$(code POST $PREDICT -H 'Content-Type: image/png' --data-binary @"$tmp/$f.png")" = 200 ] && cmp -s "$tmp/out" "$tmp/pgm.out"
    check "$f.png: 200, the answer of the same pixels as PGM" $?
done
r=$(req POST $PREDICT -H 'Content-Type: image/png' --data-binary @"$tmp/bomb.png")
fast "$r" 400 && grep -q 'compressed image data for a 28x28 image' "$tmp/out"
check "a PNG bomb of $(wc -c < "$tmp/bomb.png") bytes (512 MiB of zeros after the rows): 400 in $r s, saying why" $?
r=$(req POST $PREDICT -H 'Content-Type: image/png' --data-binary @"$tmp/ztxt.png")
fast "$r" 400 && grep -q 'compressed text' "$tmp/out"; check "a zTXt bomb: 400 in $r s" $?
# four clients send bombs while another is served
bombers=""
for k in 1 2 3 4; do
    ( for _ in 1 2 3 4 5; do curl -s -o /dev/null -H 'Content-Type: image/png' --data-binary @"$tmp/bomb.png" \
          "http://127.0.0.1:$port$PREDICT"; done ) &
    bombers="$bombers $!"
done
slow=0
for _ in $(seq 60); do
    r=$(req POST $PREDICT -H 'Content-Type: image/png' --data-binary @"$tmp/ok.png")
    fast "$r" 200 || { slow=$((slow + 1)); echo "  a request during the bombs: $r"; }
done
wait $bombers
[ "$slow" = 0 ]; check "while 4 clients send bombs, 60 other requests each take < 200 ms ($slow did not)" $?
stop

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
