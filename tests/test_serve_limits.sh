#!/bin/sh
# test_serve_limits.sh - what ddl-serve refuses, and what it costs it: a PNG decompression bomb
# (512 MiB of zeros deflated after the last row, or in a zTXt chunk), and a chunk that says it
# runs past the end of the body (libpng took 6-9 s over it), are answered 400 in under 200 ms, and
# another client's requests stay under 200 ms while four clients send bombs; good PNGs (one IDAT, many small ones, Adam7) give the answer of the same pixels as PGM; an image is
# an image only by its Content-Type; a Host or Origin of another site gets 403 unless
# --allow-host names it; beyond loopback it starts only with a token or --insecure, and refuses
# a token file others may read; a body sent to a route that reads none is not buffered, and a
# large reply is not kept by an idle keep-alive connection (the server's RSS says both).
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
fast "$r" 400 && grep -q 'compressed image data for a 28 x 28 PNG' "$tmp/out"
check "a PNG bomb of $(wc -c < "$tmp/bomb.png") bytes (512 MiB of zeros after the rows): 400 in $r s, saying why" $?
r=$(req POST $PREDICT -H 'Content-Type: image/png' --data-binary @"$tmp/ztxt.png")
fast "$r" 400 && grep -q 'compressed text' "$tmp/out"; check "a zTXt bomb: 400 in $r s" $?
r=$(req POST $PREDICT -H 'Content-Type: image/png' --data-binary @"$tmp/longchunk.png")
fast "$r" 400 && grep -q 'runs past the end' "$tmp/out"; check "a 260-byte PNG whose tEXt chunk says 1.5 GiB: 400 in $r s" $?
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
# an image only by its Content-Type (a web page elsewhere can POST text/plain without asking)
[ "$(code POST $PREDICT -H 'Content-Type: text/plain' --data-binary @"$tmp/ok.png")" = 400 ] && grep -q 'malformed JSON' "$tmp/out"
check "a PNG sent as text/plain is not decoded (400, malformed JSON)" $?
[ "$(code POST $PREDICT -H 'Content-Type: application/json' --data-binary @"$tmp/img.pgm")" = 400 ]
check "a PGM sent as application/json: 400" $?

# ---- Host and Origin ----
r=$(code GET /v1/models/fashion -H 'Host: evil.example')
[ "$r" = 403 ] && grep -q 'Host \\"evil.example\\" does not name this server' "$tmp/out"
check "Host: evil.example (DNS rebinding): 403 saying why ($r)" $?
[ "$(code GET /v1/models/fashion -H "Host: localhost:$port")" = 200 ] &&
    [ "$(code GET /v1/models/fashion -H "Host: 127.0.0.1:$port")" = 200 ] &&
    [ "$(code GET /v1/models/fashion -H "Host: [::1]:$port")" = 200 ]
check "Host: localhost, 127.0.0.1 and [::1]: 200" $?
r=$(code POST $PREDICT -H 'Origin: http://evil.example' -H 'Content-Type: image/png' --data-binary @"$tmp/ok.png")
[ "$r" = 403 ] && grep -q 'Origin' "$tmp/out"; check "Origin: http://evil.example (a cross-site POST): 403 ($r)" $?
[ "$(code POST $PREDICT -H "Origin: http://127.0.0.1:$port" -H 'Content-Type: image/png' --data-binary @"$tmp/ok.png")" = 200 ]
check "Origin of the server itself (its page): 200" $?
stop
start allow --model fashion="$tmp/lenet.ckpt" --allow-host evil.example
[ "$(code GET /v1/models/fashion -H 'Host: evil.example')" = 200 ] &&
    [ "$(code GET /v1/models/fashion -H 'Origin: http://evil.example:8080')" = 200 ] &&
    [ "$(code GET /v1/models/fashion -H 'Host: other.example')" = 403 ]
check "--allow-host evil.example: that Host and Origin 200, another Host 403" $?
stop
start any --model fashion="$tmp/lenet.ckpt" --allow-host '*'
[ "$(code GET /v1/models/fashion -H 'Host: other.example' -H 'Origin: http://x.example')" = 200 ]
check "--allow-host '*': any Host and Origin" $?
stop

# ---- listening beyond loopback, token file ----
timeout 5 "$B/ddl-serve" --listen 0.0.0.0:0 --model fashion="$tmp/lenet.ckpt" > /dev/null 2> "$tmp/err"; rc=$?
[ $rc = 2 ] && grep -q -- '--listen 0.0.0.0:0 without a token' "$tmp/err"
check "--listen 0.0.0.0 without a token: refused (exit $rc: $(head -n 1 "$tmp/err"))" $?
printf 'a-token-of-ours\n' > "$tmp/token"; chmod 644 "$tmp/token"
timeout 5 "$B/ddl-serve" --listen 127.0.0.1:0 --token-file "$tmp/token" --model fashion="$tmp/lenet.ckpt" > /dev/null 2> "$tmp/err"
rc=$?
[ $rc = 2 ] && grep -q "token-file $tmp/token: other users may read it (mode 644)" "$tmp/err"
check "a token file of mode 644: refused (exit $rc)" $?
chmod 600 "$tmp/token"
: > "$tmp/wide.log"
"$B/ddl-serve" --listen 0.0.0.0:0 --token-file "$tmp/token" --model fashion="$tmp/lenet.ckpt" 2> "$tmp/wide.log" &
pid=$!; pids="$pids $pid"
for _ in $(seq 100); do grep -q 'listening on port' "$tmp/wide.log" && break; sleep 0.1; done
grep -q 'bearer token required' "$tmp/wide.log"; check "--listen 0.0.0.0 with a token file of mode 600: serves" $?
stop
: > "$tmp/wide.log"
"$B/ddl-serve" --listen 0.0.0.0:0 --insecure --model fashion="$tmp/lenet.ckpt" 2> "$tmp/wide.log" &
pid=$!; pids="$pids $pid"
for _ in $(seq 100); do grep -q 'listening on port' "$tmp/wide.log" && break; sleep 0.1; done
grep -q 'listening on port' "$tmp/wide.log"; check "--listen 0.0.0.0 --insecure: serves" $?
stop

# ---- memory held for idle connections ----
"$PYTHON" -c "import json; print(json.dumps({'instances': [[(x * 3) % 256 for x in range(784)]]}))" > "$tmp/one.json"
hold() { # hold MODE N PATH [FILE]: hold.py's connections open; sets $held (the RSS growth in KiB)
    before=$(rss $pid)
    rm -f "$tmp/fifo"; mkfifo "$tmp/fifo"
    "$PYTHON" tests/serve/hold.py "$port" "$@" < "$tmp/fifo" > "$tmp/hold" 2>&1 &
    hp=$!
    exec 9> "$tmp/fifo"
    for _ in $(seq 300); do grep -q ready "$tmp/hold" && break; sleep 0.1; done
    sleep 0.5
    held=$(( $(rss $pid) - before ))
    grep -q ready "$tmp/hold"; check "hold.py $1 $2 $3: $(head -n 1 "$tmp/hold")" $?
    exec 9>&-
    wait $hp
}
if [ "${SAN:-}" = thread ] || [ "${SAN:-}" = address ]; then
    echo "memory held for idle connections: not checked under SAN=$SAN (the sanitizer's shadow memory is in the RSS)"
else
    # what an idle connection costs after a small reply, then after a large one (a fresh server each)
    start mem1 --model fashion="$tmp/lenet.ckpt" --model seg="$tmp/unet.ckpt" --idle-timeout 60
    hold replies 250 $PREDICT "$tmp/one.json"; small=$held
    stop
    start mem2 --model fashion="$tmp/lenet.ckpt" --model seg="$tmp/unet.ckpt" --body-timeout 30 --idle-timeout 60
    [ "$(code POST /v1/models/seg:predict --data-binary @"$tmp/u16.json")" = 200 ] && [ "$(wc -c < "$tmp/out")" -gt 100000 ]
    check "16 U-Net instances: a reply of $(wc -c < "$tmp/out") bytes" $?
    hold replies 250 /v1/models/seg:predict "$tmp/u16.json"
    [ $((held - small)) -lt 5120 ]
    check "250 idle keep-alive connections hold no large reply: RSS +$((held / 1024)) MiB after one each, +$((small / 1024)) MiB after a small one (less than 5 MiB apart)" $?
    hold bodies 40 /ping
    [ "$held" -lt 16384 ]; check "40 unfinished 4 MB bodies to /ping (which reads none): RSS +$((held / 1024)) MiB (< 16)" $?
    [ "$(code GET /ping)" = 200 ]; check "then it still answers" $?
    stop
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
