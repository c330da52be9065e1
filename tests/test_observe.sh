#!/bin/sh
# test_observe.sh - what a user sees of a run (issue 13): lenet --logdir writes an event file
# that ddl-plot --dump reads whole (both CRCs of every record, tools/tfevents.h), with the
# values the program printed; a truncated copy keeps every earlier record, a flipped byte is
# caught; a write error (file size limit) is reported once and the run goes on; DDL_TIMELINE is
# valid JSON with a track per rank, monotonic timestamps, waits and the all-reduce's bytes;
# the progress line is redrawn under a pseudo-terminal (script) and absent otherwise; --quiet
# leaves only the summary line; a rank slowed on purpose (DDL_TEST_SLOW) is named; the start-up
# line; DDL_LOG_LEVEL; ddl-plot draws a PNG; unet logs dice, mIoU and a PNG of scenes.
# Ends with "N passed, N failed"; exit status non-zero on any failure.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
LENET=$BUILD/bin/lenet
UNET=$BUILD/bin/unet
DDLRUN=$BUILD/bin/ddlrun
PLOT=$BUILD/bin/ddl-plot
DATA=/usr/share/datasets/fashion-mnist
ARGS="--epochs 2 --train-limit 3000"   # 47 steps per epoch, 94 in all
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

if [ ! -x "$LENET" ] || [ ! -x "$DDLRUN" ] || [ ! -x "$PLOT" ]; then
    echo "no $LENET, $DDLRUN or $PLOT: build first" >&2
    echo "0 passed, 1 failed"; exit 1
fi
if [ ! -d "$DATA" ]; then
    echo "skipped: no Fashion-MNIST in $DATA (apt-get install dataset-fashion-mnist)"
    echo "0 passed, 0 failed"; exit 0
fi
# scalar TAG STEP: the value of TAG at STEP in the dump, rounded to 4 decimals as lenet prints.
scalar() { awk -v t="$1" -v s="$2" '$6 == "scalar" && $7 == t && $3 == s { printf "%.4f\n", $8 }' "$tmp/dump"; }

# ---- 2 ranks with --logdir and DDL_TIMELINE ----
DDL_TIMELINE="$tmp/tl.json" DDL_TIMELINE_STEPS=5:60 $DDLRUN -n 2 $LENET $ARGS --logdir "$tmp/logs" \
    --checkpoint "$tmp/ck" > "$tmp/out" 2> "$tmp/err"
check "2 ranks with --logdir: exit 0" $?
grep -q "^ddl [0-9.]*: model lenet, 61706 parameters, gradient 0.25 MB, world 2 on .*, transport shm, kernels \(avx512\|avx2\|x86-64-v2\|portable\), allreduce probe [0-9.]* ms busbw [0-9.]* GB/s$" "$tmp/out"
check "the start-up line" $?
[ "$(grep -c '^checkpoint: saved .*/ck at step' "$tmp/out")" -eq 2 ]; check "a line per checkpoint save" $?
! grep -q "$(printf '\r')" "$tmp/out"; check "no progress line when stdout is not a terminal" $?
set -- "$tmp"/logs/events.out.tfevents.*.*.*
[ $# -eq 1 ] && [ -f "$1" ]; check "one event file, named events.out.tfevents.SECS.HOST.PID" $?
ev=$1
$PLOT --dump "$tmp/logs" > "$tmp/dump" 2> "$tmp/dump.err"; check "ddl-plot --dump reads every record" $?
head -n 1 "$tmp/dump" | grep -q ": version brain.Event:2$"; check "the first Event is file_version brain.Event:2" $?
n=$(grep -c ' scalar ' "$tmp/dump")
[ "$n" -eq $((9 * 5 + 2 * 8)) ]; check "45 step scalars (every 10 of 94 steps) and 2 x 8 epoch scalars, not $n" $?
tail -n 1 "$tmp/dump" | grep -q ": $((n + 1)) records$"; check "the record count, nothing truncated" $?
for t in train/loss train/accuracy lr images_per_sec comm/allreduce_ms; do
    [ "$(grep -c " scalar $t " "$tmp/dump")" -eq 9 ]; check "9 points of $t" $?
done
for e in 1 2; do
    line=$(grep "^epoch $e/2 " "$tmp/out")
    for pair in "loss epoch/train_loss" "train_acc epoch/train_accuracy" "test_loss test/loss" "test_acc test/accuracy"; do
        set -- $pair
        printed=$(printf '%s\n' "$line" | sed -n "s/.*  $1 \([0-9.]*\) .*/\1/p")
        logged=$(scalar "$2" "$e")
        [ -n "$printed" ] && [ -n "$logged" ] && [ "$(echo "$printed - $logged <= 0.0001 && $logged - $printed <= 0.0001" | bc)" = 1 ]
        check "epoch $e: $2 $logged = printed $1 $printed (float32, 4 decimals)" $?
    done
done
sa=$(field test_acc < "$tmp/out"); la=$(scalar test/accuracy 2)
[ -n "$la" ] && [ "$(echo "$sa - $la <= 0.0001 && $la - $sa <= 0.0001" | bc)" = 1 ]; check "summary test_acc $sa = the last test/accuracy $la" $?
sl=$(field slowest_rank < "$tmp/out"); cf=$(field comm_frac < "$tmp/out")
[ "$sl" = 0 ] || [ "$sl" = 1 ]; check "summary slowest_rank= ($sl)" $?
[ -n "$cf" ] && [ "$(echo "$cf > 0 && $cf < 1" | bc)" = 1 ]; check "summary comm_frac= in (0, 1) ($cf)" $?
[ "$(grep -c '^  stragglers: rank [01] computed slowest' "$tmp/out")" -eq 2 ]; check "a straggler line per epoch" $?

# ---- truncated and corrupt copies ----
size=$(wc -c < "$ev")
head -c $((size - 7)) "$ev" > "$tmp/cut"
$PLOT --dump "$tmp/cut" > "$tmp/dump.cut" 2> "$tmp/err.cut"
check "a truncated last record: exit 0" $?
tail -n 1 "$tmp/dump.cut" | grep -q ": $n records, truncated$"; check "every earlier record read" $?
grep -q "truncated record at byte" "$tmp/err.cut"; check "the truncation reported" $?
cp "$ev" "$tmp/bad"
printf 'X' | dd of="$tmp/bad" bs=1 seek=200 conv=notrunc 2> /dev/null
$PLOT --dump "$tmp/bad" > /dev/null 2> "$tmp/err.bad"
[ $? -eq 1 ] && grep -q "CRC mismatch" "$tmp/err.bad"; check "a changed byte: CRC mismatch, exit 1" $?

# ---- the timeline ----
"$PYTHON" - "$tmp/tl.json" > "$tmp/tl.out" 2>&1 << 'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = [e for e in d["traceEvents"] if e["ph"] == "X"]
tracks = {}
for e in ev:
    tracks.setdefault((e["pid"], e["tid"]), []).append(e["ts"])
assert sorted(tracks) == [(0, 0), (1, 0)], tracks.keys()
for k, ts in tracks.items():
    assert all(a <= b for a, b in zip(ts, ts[1:])), ("not monotonic", k)
names = {e["name"] for e in ev}
assert {"data", "forward", "backward", "allreduce", "optimizer", "wait"} <= names, names
steps = {e["args"]["step"] for e in ev if e["name"] == "allreduce"}
assert steps == set(range(5, 61)), sorted(steps)
assert all(e["args"]["bytes"] == 61706 * 4 for e in ev if e["name"] == "allreduce")
assert all(e["dur"] >= 0 for e in ev)
print("ok", len(ev))
PY
check "timeline: valid JSON, 2 tracks, monotonic, steps 5..60, waits, bytes ($(cat "$tmp/tl.out"))" $?
grep -q "^timeline: $tmp/tl.json, [0-9]* bytes, [0-9]* spans on rank 0 (0 dropped), about [0-9]* bytes per step$" "$tmp/out"
check "timeline: its size said" $?

# ---- a rank slowed on purpose is named ----
for slow in 1 0; do
    DDL_TEST_SLOW=$slow:15 $DDLRUN -n 2 $LENET --epochs 1 --train-limit 1280 > "$tmp/slow" 2>&1
    [ "$(field slowest_rank < "$tmp/slow")" = $slow ] && grep -q "^  stragglers: rank $slow computed slowest" "$tmp/slow"
    check "DDL_TEST_SLOW=$slow:15: rank $slow named the straggler" $?
done

# ---- the progress line under a pseudo-terminal; --quiet ----
script -qec "$LENET --epochs 1 --train-limit 2000 --threads 1" /dev/null > "$tmp/tty" 2>&1
check "under script: exit 0" $?
grep -q "$(printf '\r')  epoch 1/1  step [0-9]*/32  loss [0-9.]*  [0-9]* images/s  ETA 0:[0-9][0-9]" "$tmp/tty"
check "the live line: step/total, loss, images/s, ETA, redrawn with CR" $?
grep -q "^epoch 1/1 \|$(printf '\033')\[Kepoch 1/1 " "$tmp/tty"; check "the epoch line after it" $?
$LENET $ARGS --quiet --logdir "$tmp/q" > "$tmp/quiet" 2>&1
[ "$(wc -l < "$tmp/quiet")" -eq 1 ] && grep -q "^summary: " "$tmp/quiet"; check "--quiet: only the summary line" $?

# ---- a write error: reported once, training goes on, the file keeps whole records ----
( trap '' XFSZ; ulimit -f 2; exec $LENET $ARGS --logdir "$tmp/full" ) 2> "$tmp/full.err" | cat > "$tmp/full.out"
grep -q "^summary: " "$tmp/full.out"; check "file size limit: training goes on" $?
[ "$(grep -c 'event file: .*; training goes on without it' "$tmp/full.err")" -eq 1 ]; check "reported once" $?
$PLOT --dump "$tmp/full" > "$tmp/full.dump" 2>&1; check "its event file: whole records only" $?
! grep -q truncated "$tmp/full.dump"; check "nothing truncated" $?

# ---- DDL_LOG_LEVEL ----
DDL_LOG_LEVEL=info $LENET --epochs 1 --train-limit 640 --quiet --checkpoint "$tmp/ck1" > /dev/null 2> "$tmp/log"
grep -q "^lenet: info: checkpoint $tmp/ck1 saved at step 10" "$tmp/log"; check "DDL_LOG_LEVEL=info shows the library's info" $?
DDL_LOG_LEVEL=warn $LENET --epochs 1 --train-limit 640 --quiet --checkpoint "$tmp/ck1" > /dev/null 2> "$tmp/log"
[ ! -s "$tmp/log" ]; check "DDL_LOG_LEVEL=warn hides it" $?
DDL_LOG_LEVEL=loud $LENET --epochs 1 > /dev/null 2> "$tmp/log"
[ $? -eq 2 ] && grep -q "DDL_LOG_LEVEL=loud: expected" "$tmp/log"; check "a bad DDL_LOG_LEVEL: exit 2" $?

# ---- ddl-plot: a PNG chart of two runs ----
$PLOT -o "$tmp/chart.png" "$tmp/logs" "$tmp/q" > "$tmp/plot" 2>&1
check "ddl-plot: exit 0" $?
[ "$(head -c 8 "$tmp/chart.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; check "ddl-plot: a PNG" $?
grep -q "wrote $tmp/chart.png (2 runs)" "$tmp/plot"; check "ddl-plot: says so" $?

# ---- unet: dice, mIoU and a PNG of scenes per epoch ----
if [ -x "$UNET" ]; then
    $UNET --epochs 1 --scenes 64 --test-scenes 8 --size 32 --depth 2 --width 4 --batch 8 --quiet \
        --logdir "$tmp/u" > "$tmp/u.out" 2>&1
    check "unet --logdir: exit 0" $?
    $PLOT --dump "$tmp/u" > "$tmp/u.dump" 2>&1
    grep -q " scalar test/dice " "$tmp/u.dump" && grep -q " scalar test/miou " "$tmp/u.dump"
    check "unet: test/dice, test/miou" $?
    grep -q "step 1 wall [0-9.]* image test/scenes 400x536 colorspace 3 [0-9]* bytes png$" "$tmp/u.dump"
    check "unet: the test/scenes PNG, 4 scenes of input | truth | prediction" $?
fi

# ---- start-up: whom rank 0 still waits for, every 5 s, instead of silence (shm and tcp, side
# by side: each only waits) ----
DDL_WORLD_SIZE=2 DDL_RANK=0 DDL_JOB="obs$$" DDL_TIMEOUT_MS=6000 $LENET --epochs 1 --quiet > "$tmp/wait.shm" 2>&1 &
waiter=$!
DDL_TRANSPORT=tcp DDL_TOKEN=observe-test-0123456789 DDL_WORLD_SIZE=3 DDL_RANK=0 DDL_MASTER="127.0.0.1:$((30000 + $$ % 2000))" \
    DDL_TIMEOUT_MS=6000 $LENET --epochs 1 --quiet > "$tmp/wait.tcp" 2>&1
wait $waiter
grep -q "warn: shm: rank 0: waiting for rank 1 (5 s)" "$tmp/wait.shm"; check "shm: rank 0 says it waits for rank 1" $?
grep -q "warn: tcp: rank 0: waiting for ranks 1, 2 (5 s)" "$tmp/wait.tcp"; check "tcp: rank 0 says it waits for ranks 1, 2" $?

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
