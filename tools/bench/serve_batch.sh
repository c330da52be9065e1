#!/bin/sh
# serve_batch.sh - make bench's dynamic batching figures (BENCH_ONLY=serve_batch): the cnn preset
# at 3x64x64 (ddl-train --arch cnn, one epoch on a small folder of photos: the weights do not
# change the cost), served by ddl-serve, and wrk (1 thread, SERVE_CONNS connections, SERVE_SECONDS s)
# POSTing one 64x64 PNG per request to :predict as an image body. Configurations, alternated
# REPEAT times (the machine is shared: the ratios come from the same rounds):
#   off       --threads 2 (the default: no batching)
#   off-T     --threads T, no batching (more threads alone, against which batching is measured)
#   batch     --threads T --max-batch B --batch-timeout-us U
# T, B, U: SERVE_BATCH_THREADS (4), SERVE_MAX_BATCH (4), SERVE_BATCH_TIMEOUT_US (500).
# SERVE_BASE=PATH adds "base": another ddl-serve binary (e.g. a build of main) with --threads 2.
# Medians of requests/s, p50 and p99; errors of all runs; and the mean images per pass of the
# batched server (its /metrics).
set -u
BUILD=${BUILD:-build}
REPEAT=${REPEAT:-3}
SECS=${SERVE_SECONDS:-30}
CONNS=${SERVE_CONNS:-64}
T=${SERVE_BATCH_THREADS:-4}
MB=${SERVE_MAX_BATCH:-4}
U=${SERVE_BATCH_TIMEOUT_US:-500}
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d) || exit 1
pid=""
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
. "$here/lib.sh"
ms() { awk '{v=$1; if (v ~ /us$/) {sub(/us/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v*=1000}; print v}'; }

"$PY" "$here/../../tests/train/make_fruits.py" "$tmp/fruits" 16 1 > /dev/null || exit 1
"$BUILD/bin/ddl-train" --data "$tmp/fruits/train" --arch cnn --image-size 64 --epochs 1 --batch 16 --quiet \
    --save "$tmp/cnn.ckpt" > /dev/null || exit 1
"$PY" -c "
from PIL import Image
Image.open('$tmp/fruits/test/guava/0000.jpg').convert('RGB').resize((64, 64)).save('$tmp/one.png')" || exit 1
cat > "$tmp/post.lua" << LUA
local f = io.open("$tmp/one.png", "rb"); wrk.body = f:read("*a"); f:close()
wrk.method = "POST"; wrk.headers["Content-Type"] = "image/png"
LUA

# one CONFIG BIN ARGS...: a wrk run against BIN serving the cnn with ARGS; appends to $tmp/CONFIG.*
one() {
    cfg=$1 bin=$2; shift 2
    OPENBLAS_NUM_THREADS=1 "$bin" --listen 127.0.0.1:0 --model cnn="$tmp/cnn.ckpt" "$@" 2> "$tmp/log" &
    pid=$!
    port=""
    for _ in $(seq 100); do port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$tmp/log"); [ -n "$port" ] && break; sleep 0.1; done
    wrk -t1 -c"$CONNS" -d"${SECS}s" --latency -s "$tmp/post.lua" "http://127.0.0.1:$port/v1/models/cnn:predict" > "$tmp/w"
    r=$(awk '/^Requests\/sec/ {print $2}' "$tmp/w"); p50=$(awk '$1 == "50%" {print $2}' "$tmp/w" | ms)
    p99=$(awk '$1 == "99%" {print $2}' "$tmp/w" | ms)
    e=$(awk '/Non-2xx|Socket errors/ {for (k = 1; k <= NF; k++) if ($k ~ /^[0-9]+,?$/) s += $k} END {print s + 0}' "$tmp/w")
    per=$(curl -s "127.0.0.1:$port/metrics" | awk '/^ddl_serve_batch_size_sum/ {s = $2} /^ddl_serve_batch_size_count/ {c = $2}
        END {if (c) printf "%.2f", s / c; else print "-"}')
    kill $pid; wait $pid 2> /dev/null; pid=""
    echo "   $cfg: $r requests/s, p50 $p50 ms, p99 $p99 ms, $e errors, $per images a pass"
    echo "$r" >> "$tmp/$cfg.rps"; echo "$p50" >> "$tmp/$cfg.p50"; echo "$p99" >> "$tmp/$cfg.p99"; echo "$e" >> "$tmp/$cfg.err"
    [ "$per" != "-" ] && echo "$per" >> "$tmp/$cfg.per"
    return 0
}

configs="off off-$T batch"
[ -n "${SERVE_BASE:-}" ] && configs="base $configs"
echo "== ddl-serve dynamic batching: cnn 3x64x64, PNG bodies, wrk -t1 -c$CONNS -d${SECS}s; $REPEAT alternated rounds"
i=0
while [ $i -lt "$REPEAT" ]; do
    echo "  round $((i + 1))"
    for c in $configs; do
        case $c in
        base) one base "$SERVE_BASE" --threads 2 ;;
        off) one off "$BUILD/bin/ddl-serve" --threads 2 ;;
        off-*) one "$c" "$BUILD/bin/ddl-serve" --threads "$T" ;;
        batch) one batch "$BUILD/bin/ddl-serve" --threads "$T" --max-batch "$MB" --batch-timeout-us "$U" ;;
        esac
    done
    i=$((i + 1))
done
for c in $configs; do
    errs=$(awk '{s += $1} END {print s + 0}' "$tmp/$c.err")
    per=$([ -f "$tmp/$c.per" ] && median < "$tmp/$c.per" || echo -)
    echo "serve_batch_$c: requests_per_sec=$(median < "$tmp/$c.rps") p50_ms=$(median < "$tmp/$c.p50") p99_ms=$(median < "$tmp/$c.p99") errors=$errs images_per_pass=$per"
done
ratio() { awk -v a="$(median < "$tmp/$1.rps")" -v b="$(median < "$tmp/$2.rps")" 'BEGIN { printf "%.2f", a / b }'; }
echo "serve_batch: batch/off=$(ratio batch off) batch/off-$T=$(ratio batch "off-$T") (requests/s, medians of the same rounds)"
record "ddl-serve cnn 64x64 PNG, batching (--threads $T --max-batch $MB --batch-timeout-us $U), requests/s" \
    "$(median < "$tmp/batch.rps")" "--threads 2, no batching" "$(median < "$tmp/off.rps")" "$(ratio batch off)" \
    ">= 2x (issue 46; docs/BENCHMARKS.md says why not)"
record "ddl-serve cnn 64x64 PNG, batching, p99 ms" "$(median < "$tmp/batch.p99")" "--threads 2, no batching" \
    "$(median < "$tmp/off.p99")" "-" "<= 10 (issue 46)"
