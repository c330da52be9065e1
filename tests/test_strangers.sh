#!/bin/sh
# test_strangers.sh - strangers at the listening ports cannot hold a job up nor learn about it.
# For tcp and zmq, a 2-node lenet job over loopback (two ddlrun --nodes 2, each under ulimit -n
# 256, with checkpoints) runs while tests/flood.py hits the master port during start-up (500
# connections, 100 at once, each held up to 30 s, beyond the --timeout of 10 s: silent, slow, garbage, half handshakes, HELLOs
# of the right job, world and a rank that never prove the token) and then every port the ranks
# listen on (1000 connections, 300 at once); the flooders stop when the job ends. The job must finish in bounded time with the weights_crc of an undisturbed run, each
# rank's open descriptors (/proc/PID/fd) must stay under 200, and a stranger that probes the
# master port (a HELLO of another job; one of the right job with a wrong proof) must hear
# neither the job id, nor the world size, nor a rank; over zmq, peers of the old ZMTP 1.0 and 2.0
# (whose first frame libzmq 4.3 pushes with an assertion that aborted a rank under the flood) must
# be closed within 1 s. Needs python3 and ss.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
DATA=/usr/share/datasets/fashion-mnist
skip() { echo "skipped: $*"; echo "0 passed, 0 failed"; exit 0; }
command -v "$PYTHON" >/dev/null 2>&1 || skip "no python3"
command -v ss >/dev/null 2>&1 || skip "no ss (apt-get install iproute2)"
[ -e "$DATA/train-images-idx3-ubyte.gz" ] || [ -e "$DATA/train-images-idx3-ubyte" ] ||
    skip "no Fashion-MNIST in $DATA (apt-get install dataset-fashion-mnist)"

tmp=$(mktemp -d)
bg=""
cleanup() { for p in $bg; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
ARGS="--epochs 2 --train-limit 8000 --seed 42 --quiet --data $DATA"
FLOOD="$PYTHON tests/flood.py"
now_ms() { date +%s%3N; }
ranks_of() { # the lenet processes under the given pids
    for p in "$@"; do
        for c in $(pgrep -P "$p"); do
            [ "$(cat "/proc/$c/comm" 2>/dev/null)" = lenet ] && echo "$c" || ranks_of "$c"
        done
    done
}
ports_of() { # the ports the given pids listen on, as 127.0.0.1:PORT
    for p in "$@"; do ss -ltnpH 2>/dev/null | grep "pid=$p," | awk '{print $4}' | sed 's/.*:/127.0.0.1:/'; done
}

ref=$("$BUILD/bin/ddlrun" -n 2 -t shm "$BUILD/bin/lenet" $ARGS 2>&1 | field weights_crc)
echo "undisturbed, 2 ranks over shm: weights_crc=$ref"
[ -n "$ref" ] && ok || bad "the undisturbed run gave no summary"

# node RANK TRANSPORT: one ddlrun --nodes 2 under ulimit -n 256, checkpointing every 10 steps
node() {
    (ulimit -n 256 && exec env DDL_TOKEN=strangers-secret timeout 60 "$BUILD/bin/ddlrun" -n 1 --nodes 2 \
        --node-rank "$1" --master "127.0.0.1:$port" --job "$job" --timeout 10 -t "$2" "$BUILD/bin/lenet" $ARGS \
        --checkpoint "$tmp/ck$1.$2" --checkpoint-every 10)
}

for t in tcp zmq; do
    # skip only what the build lacks: a probe that failed for another reason (a busy machine) once
    # skipped the zmq half silently, with "6 passed" for 11
    if "$BUILD/bin/ddl-bench" allreduce -t "$t" -n 2 -b 4K -e 4K --iters 1 2>&1 | grep -q "not compiled in"; then
        echo "$t: skipped (not compiled in)"; continue
    fi
    port=$(free_port); job="strangers-$$-$t"
    t0=$(now_ms)
    node 0 "$t" > "$tmp/n0.$t" 2>&1 &
    n0=$!; bg="$n0"
    for i in $(seq 50); do ss -ltnH "sport = :$port" | grep -q . && break; sleep 0.1; done
    $FLOOD --probe --proto "$t" --job "$job" --world 2 "127.0.0.1:$port" > "$tmp/probe.$t" 2>&1
    check "$t: a stranger's probe learns nothing of the job" $?
    sed 's/^/  /' "$tmp/probe.$t"
    $FLOOD --proto "$t" --count 500 --conc 100 --hold 30 --job "$job" --world 2 "127.0.0.1:$port" \
        > "$tmp/flood1.$t" 2>&1 &
    f1=$!; bg="$bg $f1"
    sleep 1
    node 1 "$t" > "$tmp/n1.$t" 2>&1 &
    n1=$!; bg="$bg $n1"
    ( while kill -0 "$n0" 2>/dev/null || kill -0 "$n1" 2>/dev/null; do
          for p in $(ranks_of "$n0" "$n1"); do echo "$p $(ls "/proc/$p/fd" 2>/dev/null | wc -l)"; done
          sleep 0.1
      done ) > "$tmp/fds.$t" &
    w=$!; bg="$bg $w"
    for i in $(seq 100); do [ "$(ranks_of "$n0" "$n1" | wc -l)" -eq 2 ] && break; sleep 0.05; done
    sleep 0.5
    targets=$( (ports_of $(ranks_of "$n0" "$n1"); echo "127.0.0.1:$port") | sort -u | tr '\n' ' ')
    $FLOOD --proto "$t" --count 1000 --conc 300 --hold 2 --job "$job" --world 2 $targets \
        > "$tmp/flood2.$t" 2>&1 &
    f2=$!; bg="$bg $f2"
    wait "$n0"; rc0=$?
    wait "$n1"; rc1=$?
    t1=$(now_ms)
    kill "$f1" "$f2" 2>/dev/null; wait "$f1" "$f2" "$w"; bg=""
    crc=$(crc "$tmp/n0.$t")
    maxfd=$(awk 'BEGIN {m = 0} $2 > m {m = $2} END {print m}' "$tmp/fds.$t")
    echo "$t: exits $rc0 $rc1 in $((t1 - t0)) ms, weights_crc=$crc, at most $maxfd descriptors open in a rank"
    echo "  start-up $(cat "$tmp/flood1.$t"); then at $targets$(cat "$tmp/flood2.$t")"
    if [ "$rc0" -eq 0 ] && [ "$rc1" -eq 0 ]; then ok; else
        bad "$t: the job did not finish under the flood"; tail -n 4 "$tmp/n0.$t" "$tmp/n1.$t"; fi
    [ -n "$crc" ] && [ "$crc" = "$ref" ] && ok || bad "$t: weights_crc '$crc' differs from the undisturbed '$ref'"
    [ $((t1 - t0)) -lt 30000 ] && ok || bad "$t: the job took $((t1 - t0)) ms under the flood"
    [ "$maxfd" -gt 0 ] && [ "$maxfd" -lt 200 ] && ok || bad "$t: a rank had $maxfd descriptors open"
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
