#!/bin/sh
# test_serve_runs.sh - GET /api/training of ddl-serve --logdir DIR (issue 35, items 8 and 13),
# on event files written by tests/events.py: runs in sub-directories are found as TensorBoard
# finds them (a sweep's trial-NNNN/logs) and named by their directory relative to DIR, a run in
# DIR itself by DIR's name (not "."); the files of one directory make one run (a resumed run);
# each per-epoch test point goes out at the step its epoch ended ([step, value, epoch]), so it
# shares the per-step series' axis instead of piling up at step 1, 2, 3.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
B=$BUILD/bin
DATA=/usr/share/datasets/fashion-mnist
skip() { echo "skipped: $1"; echo "0 passed, 0 failed"; exit 0; }
[ -x "$B/ddl-serve" ] || skip "no $B/ddl-serve"
[ -d "$DATA" ] || skip "no $DATA"
command -v curl > /dev/null || skip "no curl"
tmp=$(mktemp -d) || exit 1
pid=""
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT # -9: a server stuck on a FIFO ignores TERM
export OPENBLAS_NUM_THREADS=1
ev() { d=$1; f=$2; shift 2; mkdir -p "$tmp/$d" && "$PYTHON" tests/events.py "$tmp/$d/events.out.tfevents.$f.host" "$@"; }
# a run in the logdir itself; a 3-epoch trial logging every 100 steps; a trial resumed into a second file
ev board 1 train/loss=2.2,2.0 test/loss=1:1.9
ev board/trial-0000/logs 1 train/loss=100:2.0 test/loss=1:1.8 test/accuracy=1:0.5 train/loss=200:1.5 \
    test/loss=2:1.4 test/accuracy=2:0.6 train/loss=300:1.2 test/loss=3:1.3 test/accuracy=3:0.7
ev board/trial-0001/logs 1 train/loss=50:2.1 test/accuracy=1:0.4
ev board/trial-0001/logs 2 train/loss=100:1.9 test/accuracy=2:0.5
mkdir -p "$tmp/board/.hidden/logs" "$tmp/board/empty/logs"
"$B/lenet" --epochs 1 --train-limit 512 --quiet --save "$tmp/lenet.ckpt" > /dev/null 2>&1
check "lenet trains a model to serve" $?

# serve LOGDIR: ddl-serve on a free port with --logdir LOGDIR; sets port
serve() {
    [ -n "$pid" ] && kill $pid 2>/dev/null && wait $pid 2>/dev/null
    "$B/ddl-serve" --listen 127.0.0.1:0 --model m="$tmp/lenet.ckpt" --logdir "$1" 2> "$tmp/log" &
    pid=$!; port=""
    for _ in $(seq 100); do port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$tmp/log"); [ -n "$port" ] && break; sleep 0.1; done
}
serve "$tmp/board"
curl -s "http://127.0.0.1:$port/api/training" > "$tmp/t.json"
q() { "$PYTHON" -c "import json, sys; runs = {r['name']: r for r in json.load(open('$tmp/t.json'))['runs']}; $1" 2>&1; }
names=$("$PYTHON" -c "import json; print(' '.join(r['name'] for r in json.load(open('$tmp/t.json'))['runs']))")
echo "runs: $names"
[ "$names" = "board trial-0000 trial-0001" ]
check "runs named by their directory: the logdir's own run 'board' (not '.'), trial-0000, trial-0001 (not 'logs')" $?
q "sys.exit(runs['trial-0000']['test/loss'] != [[100, 1.8, 1], [200, 1.4, 2], [300, 1.3, 3]])" > /dev/null
check "per-epoch test points at the step their epoch ended: [step, value, epoch]" $?
q "sys.exit(runs['trial-0000']['train/loss'] != [[100, 2.0], [200, 1.5], [300, 1.2]] or runs['board']['dir'] != '.' or runs['trial-0000']['dir'] != 'trial-0000/logs')" > /dev/null
check "per-step points as before; each run's directory relative to --logdir" $?
q "sys.exit([p[2] for p in runs['trial-0001']['test/accuracy']] != [1, 2] or len(runs['trial-0001']['train/loss']) != 2)" > /dev/null
check "a directory's two event files (a resumed run) are one run, in file-name order" $?

serve "$tmp/board/trial-0000/logs/"
curl -s "http://127.0.0.1:$port/api/training" > "$tmp/t.json"
q "sys.exit(list(runs) != ['trial-0000'])" > /dev/null
check "--logdir .../trial-0000/logs/: its run is 'trial-0000', not 'logs'" $?

# a FIFO under an event file's name (anyone who may write in the logdir can leave one) is not a
# file: it is skipped, and no worker waits on it for a writer (both did: the server hung)
mkdir -p "$tmp/board/trial-0002/logs"
mkfifo "$tmp/board/trial-0002/logs/events.out.tfevents.1.host" "$tmp/board/trial-0001/logs/events.out.tfevents.3.host"
serve "$tmp/board"
ok=0
for k in 1 2 3; do
    curl -s -m 5 "http://127.0.0.1:$port/api/training" > "$tmp/t.json" &&
        q "sys.exit(runs['trial-0000']['test/loss'] != [[100, 1.8, 1], [200, 1.4, 2], [300, 1.3, 3]] or len(runs['trial-0001']['train/loss']) != 2)" > /dev/null &&
        ok=$((ok + 1))
done
[ $ok -eq 3 ]; check "FIFOs named events.out.tfevents.*: 3 of 3 requests answered within 5 s with the runs ($ok)" $?
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
