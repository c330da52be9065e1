#!/bin/sh
# serve.sh - make bench's ddl-serve figures: a LeNet trained briefly, served by ddl-serve
# (--threads 2), and wrk (1 thread, SERVE_CONNS connections, SERVE_SECONDS s) POSTing one test
# image per request to :predict as JSON. REPEAT runs; the medians of requests/s, p50 and p99,
# and the errors of all runs (socket errors and non-2xx answers).
set -u
BUILD=${BUILD:-build}
REPEAT=${REPEAT:-3}
SECS=${SERVE_SECONDS:-30}
CONNS=${SERVE_CONNS:-64}
DATA=/usr/share/datasets/fashion-mnist
tmp=$(mktemp -d) || exit 1
pid=""
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"
ms() { awk '{v=$1; if (v ~ /us$/) {sub(/us/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v*=1000}; print v}'; }

"$BUILD/bin/lenet" --epochs 1 --train-limit 6000 --quiet --save "$tmp/lenet.ckpt" > /dev/null || exit 1
python3 -c "
import gzip, json
raw = gzip.open('$DATA/t10k-images-idx3-ubyte.gz').read()[16:16 + 784]
json.dump({'instances': [list(raw)]}, open('$tmp/one.json', 'w'))"
cat > "$tmp/post.lua" << LUA
local f = io.open("$tmp/one.json", "r"); wrk.body = f:read("*a"); f:close()
wrk.method = "POST"; wrk.headers["Content-Type"] = "application/json"
LUA
OPENBLAS_NUM_THREADS=1 "$BUILD/bin/ddl-serve" --listen 127.0.0.1:0 --threads "${SERVE_THREADS:-2}" --model lenet="$tmp/lenet.ckpt" 2> "$tmp/log" &
pid=$!
for _ in $(seq 100); do port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$tmp/log"); [ -n "$port" ] && break; sleep 0.1; done
echo "== ddl-serve: wrk -t1 -c$CONNS -d${SECS}s --latency -s post.lua http://127.0.0.1:$port/v1/models/lenet:predict ($REPEAT runs)"
: > "$tmp/rps"; : > "$tmp/p50"; : > "$tmp/p99"; errors=0
i=0
while [ $i -lt "$REPEAT" ]; do
    wrk -t1 -c"$CONNS" -d"${SECS}s" --latency -s "$tmp/post.lua" "http://127.0.0.1:$port/v1/models/lenet:predict" > "$tmp/w"
    r=$(awk '/^Requests\/sec/ {print $2}' "$tmp/w"); p50=$(awk '$1 == "50%" {print $2}' "$tmp/w" | ms)
    p99=$(awk '$1 == "99%" {print $2}' "$tmp/w" | ms)
    e=$(awk '/Non-2xx|Socket errors/ {for (k = 1; k <= NF; k++) if ($k ~ /^[0-9]+,?$/) s += $k} END {print s + 0}' "$tmp/w")
    echo "   run $((i + 1)): $r requests/s, p50 $p50 ms, p99 $p99 ms, $e errors"
    echo "$r" >> "$tmp/rps"; echo "$p50" >> "$tmp/p50"; echo "$p99" >> "$tmp/p99"; errors=$((errors + e))
    i=$((i + 1))
done
echo "serve_lenet: requests_per_sec=$(median < "$tmp/rps") p50_ms=$(median < "$tmp/p50") p99_ms=$(median < "$tmp/p99") errors=$errors connections=$CONNS seconds=$SECS"
rss=$(awk '/^VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$pid/status")
record "ddl-serve :predict, requests/s, $CONNS connections" "$(median < "$tmp/rps")" "-" "-" "-" ">= 8000 (issue 15)" "$rss"
record "ddl-serve :predict, p99 ms, $CONNS connections" "$(median < "$tmp/p99")" "-" "-" "-" "<= 5 (issue 15)"
