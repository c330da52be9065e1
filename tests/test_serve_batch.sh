#!/bin/sh
# test_serve_batch.sh - ddl-serve's dynamic batching (--max-batch, --batch-timeout-us):
#  - 48 requests sent at once to a server that batches (8 threads, batches of up to 8 images,
#    20 ms to fill) get, byte for byte, the answers the same requests get one by one: image
#    bodies (PNGs of several sizes), TF Serving JSON of one instance in (H, W, C) and of two in
#    (C, H, W), KServe v2 JSON, for a colour and a grey model in turn; one in 12 is malformed
#    JSON and gets its own 400. An image's probabilities do not depend on the batch it ran in
#    (tests/test_batch_same.c checks the kernels; without the predictor's batch-invariant mode
#    the dense layer of a batch of one takes another sum than of more, and answers differ);
#  - /metrics: the batch sizes (ddl_serve_batch_size, a histogram: passes of more than one image
#    happened, and the images of all passes are the images sent) and the requests' waits for
#    their batch (ddl_serve_batch_wait_seconds: one per request that ran);
#  - the wait is bounded: a request alone is answered after --batch-timeout-us (300 ms), not later;
#  - SIGTERM while requests wait for their batches to fill (5 s; ddl_serve_batch_queued says when
#    one waits): the batches run at once, their requests are answered (as they are alone; one
#    that was still behind another on its HTTP thread gets a 503 saying the server is stopping)
#    before the connections close, never closed unanswered, and the server exits, not after the wait;
#  - the flags: --help names them, out-of-range values are refused naming the flag.
# About 7 s (two trainings of 3 steps, 96 requests, one 300 ms wait, a shutdown of under a second).
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
. tests/serve_lib.sh
tmp=$(mktemp -d) || exit 1
spid=""
trap '[ -n "$spid" ] && kill $spid 2> /dev/null; [ -n "$KEEP" ] && cp -r "$tmp" "$KEEP"; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP

"$PYTHON" tests/train/make_fruits.py "$tmp/fruits" 8 1 24 > /dev/null; check "a folder of fruit photos" $?
for m in rgb grey; do
    c=3; [ $m = grey ] && c=1
    "$B/ddl-train" --data "$tmp/fruits/train" --arch cnn:4 --image-size 16 --channels $c --epochs 1 --batch 8 --quiet \
        --save "$tmp/$m.ckpt" > "$tmp/$m.train" 2>&1
    check "a $m model (cnn:4, $c channel(s), 16x16) trained for 3 steps" $?
done
printf 'rgb 3 16 16\ngrey 1 16 16\n' > "$tmp/models"
mkdir "$tmp/img" && "$PYTHON" - "$tmp" << 'PY'
import os, sys
from PIL import Image
t = sys.argv[1]
files = sorted(os.path.join(r, f) for r, _, fs in os.walk(t + "/fruits/train") for f in fs)[:7]
for i, f in enumerate(files):  # PNGs of several sizes, resized by the server to 16x16
    Image.open(f).convert("RGB").resize((16 + 3 * i, 16 + 2 * i)).save("%s/img/%02d.png" % (t, i))
PY
check "7 PNGs of several sizes" $?

start_server() { # LOG ARGS...: ddl-serve on a free port, the models above; sets port and spid
    log=$1; shift
    port=$(free_port)
    "$B/ddl-serve" --listen "127.0.0.1:$port" --model rgb="$tmp/rgb.ckpt" --model grey="$tmp/grey.ckpt" "$@" \
        2> "$tmp/$log" &
    spid=$!
    serve_wait "$port"
    # the start-up line is written just after the daemon answers: wait for it whole
    for _ in $(seq 50); do grep -q "listening on port.* grey (" "$tmp/$log" && break; sleep 0.1; done
}
metric() { # NAME: the sum over the models of metric NAME in $tmp/metrics
    awk -v n="$1" '$1 ~ "^"n"[{]" { s += $2 } END { print s + 0 }' "$tmp/metrics"
}

# ---- answers alone and together ----
start_server serve.log --threads 8 --max-batch 8 --batch-timeout-us 20000
grep -q "batches of up to 8 images, 20000 us" "$tmp/serve.log"; check "the log says how it batches" $?
"$PYTHON" tests/serve/batch_client.py "$port" "$tmp" seq; check "48 requests one by one" $?
"$PYTHON" tests/serve/batch_client.py "$port" "$tmp" par; check "48 requests at once" $?
out=$("$PYTHON" tests/serve/batch_client.py "$port" "$tmp" compare)
check "the answers at once are those alone, byte for byte: $out" $?
curl -s "127.0.0.1:$port/metrics" > "$tmp/metrics"
passes=$(metric ddl_serve_batch_size_count) images=$(metric ddl_serve_batch_size_sum)
single=$(awk '$1 ~ /^ddl_serve_batch_size_bucket[{].*le="1"[}]/ { s += $2 } END { print s + 0 }' "$tmp/metrics")
waits=$(metric ddl_serve_batch_wait_seconds_count)
# 44 good requests a round (4 malformed), 12 of them with 2 instances: 56 images a round
[ "$images" -eq 112 ]; check "/metrics: the passes ran 112 images, the images sent (got $images)" $?
[ "$waits" -eq 88 ]; check "/metrics: 88 requests waited for a batch (got $waits)" $?
[ "$passes" -gt "$single" ] && [ "$passes" -lt 88 ]
check "/metrics: $passes passes for 88 requests, $((passes - single)) of more than one image" $?
grep -q '^# TYPE ddl_serve_batch_size histogram' "$tmp/metrics" &&
    grep -q '^ddl_serve_batch_wait_seconds_bucket{model="rgb",le="0.025"}' "$tmp/metrics"
check "/metrics: both are Prometheus histograms, by model" $?
kill $spid; wait $spid; spid=""

# ---- the wait is bounded; shutdown while a batch waits ----
start_server hold.log --threads 4 --max-batch 8 --batch-timeout-us 300000
t0=$(date +%s%N)
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: image/png' --data-binary @"$tmp/img/00.png" \
    "127.0.0.1:$port/v1/models/rgb:predict")
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$code" = 200 ] && [ "$ms" -ge 290 ] && [ "$ms" -lt 3000 ]
check "a request alone waits the 300 ms for company, then is answered: $code after $ms ms" $?
kill $spid; wait $spid; spid=""

start_server stop.log --threads 4 --max-batch 8 --batch-timeout-us 5000000
"$PYTHON" tests/serve/batch_client.py "$port" "$tmp" hold 3 &
cpid=$!
for _ in $(seq 200); do # until one waits in a batch (ddl_serve_batch_queued)
    q=$(curl -s -m 2 "127.0.0.1:$port/metrics" | awk '/^ddl_serve_batch_queued[{]/ { s += $2 } END { print s + 0 }')
    [ "$q" -ge 1 ] && break; sleep 0.02
done
[ "$q" -ge 1 ]; check "/metrics: ddl_serve_batch_queued counts the requests waiting (got $q)" $?
t0=$(date +%s%N)
kill -TERM $spid; wait $spid; rc=$?; spid=""
ms=$((($(date +%s%N) - t0) / 1000000))
wait $cpid
[ "$rc" -eq 0 ] && [ "$ms" -lt 900 ]; check "SIGTERM while $q request(s) wait in a batch: exit $rc after $ms ms" $?
answered=0 stopping=0 other=0
for i in 0 1 2; do # a request still behind a waiting one on its thread comes after the stop: a 503
    if cmp -s "$tmp/hold/$i" "$tmp/seq/$i"; then answered=$((answered + 1))
    elif grep -q '^503' "$tmp/hold/$i" && grep -q 'the server is stopping' "$tmp/hold/$i"; then stopping=$((stopping + 1))
    else other=$((other + 1)); echo "request $i got: $(head -c 200 "$tmp/hold/$i")"; fi
done
[ "$answered" -ge 1 ] && [ "$other" -eq 0 ]
check "the 3 requests: $answered answered as alone, $stopping told the server is stopping, $other otherwise" $?

# ---- the flags ----
"$B/ddl-serve" --help | grep -q -- "--max-batch N" && "$B/ddl-serve" --help | grep -q -- "--batch-timeout-us U"
check "--help names --max-batch and --batch-timeout-us" $?
for bad in "--max-batch 0" "--max-batch 257" "--batch-timeout-us -1" "--batch-timeout-us 10000001"; do
    # shellcheck disable=SC2086
    "$B/ddl-serve" --model rgb="$tmp/rgb.ckpt" $bad > "$tmp/out" 2>&1
    rc=$?; [ "$rc" -eq 2 ] && grep -q -- "${bad% *}" "$tmp/out"
    check "$bad: refused, naming the flag (exit $rc: $(head -c 120 "$tmp/out"))" $?
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
