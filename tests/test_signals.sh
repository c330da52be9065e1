#!/bin/sh
# test_signals.sh - a signal at any time of a run (common/example_signal.h):
#  - while loading its data (as Slurm may preempt a requeued job that is still loading), lenet,
#    unet and ddl-train (on a folder of 2400 PNGs) take SIGUSR1 and SIGTERM from the start of
#    main: they exit 75 (the preemption status) within a second, saying that no checkpoint was
#    written and where the requeued job starts (with --resume and a checkpoint: from it);
#  - while training, SIGTERM and SIGINT end the process by that signal as before, rank 0 first
#    naming the checkpoint that exists (its step and epoch) and the flags that continue from it,
#    or saying that none exists; --resume then goes on from that step;
#  - a rank's death: the survivor's error is followed by the same line.
# The signal is sent once the program has its handler (SigCgt in /proc), or after 3 s.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
DATA=${DDL_DATA:-/usr/share/datasets/fashion-mnist}
if [ ! -d "$DATA" ]; then
    echo "skipped: no Fashion-MNIST in $DATA"; echo "0 passed, 0 failed"; exit 0
fi

# handler_wait PID BIT: until PID catches signal number BIT (its bit in SigCgt), at most 3 s
handler_wait() {
    for i in $(seq 1 300); do
        m=$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null)
        [ -n "$m" ] && [ $(( 0x$m >> ($2 - 1) & 1 )) -eq 1 ] && return 0
        sleep 0.01
    done
    return 1
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }
num() { case $1 in USR1) echo 10 ;; TERM) echo 15 ;; INT) echo 2 ;; esac; }

# ---- while loading: exit 75 at once, no checkpoint written ----
for prog in lenet unet; do
    for sig in USR1 TERM; do
        "$BUILD/bin/$prog" --epochs 1 --checkpoint "$tmp/ck-$prog" > "$tmp/o" 2> "$tmp/e" &
        pid=$!
        handler_wait $pid "$(num $sig)"
        kill -$sig $pid; wait $pid; rc=$?
        echo "$prog, SIG$sig while loading: exit $rc: $(cat "$tmp/e")"
        [ $rc -eq 75 ] && grep -qx "$prog: SIG$sig while loading data: no checkpoint written (the requeued job starts from the beginning)" "$tmp/e" &&
            [ ! -e "$tmp/ck-$prog" ] && ! grep -q "^ddl " "$tmp/o" && ok || bad "$prog: SIG$sig while loading"
    done
done

# with --resume and a checkpoint there: the requeued job starts from it
echo x > "$tmp/old"
"$BUILD/bin/lenet" --epochs 1 --checkpoint "$tmp/old" --resume > "$tmp/o" 2> "$tmp/e" &
pid=$!; handler_wait $pid 10; kill -USR1 $pid; wait $pid; rc=$?
echo "lenet --resume, SIGUSR1 while loading: exit $rc: $(cat "$tmp/e")"
[ $rc -eq 75 ] && grep -qx "lenet: SIGUSR1 while loading data: no checkpoint written (the requeued job starts from the previous checkpoint, $tmp/old)" "$tmp/e" &&
    [ "$(cat "$tmp/old")" = x ] && ok || bad "lenet --resume: SIGUSR1 while loading"

# ddl-train on 2400 PNGs of 512x512 (seconds of decoding; hard links of a few files, so that the
# folder takes no room): the exit comes within a second of the signal
"$PYTHON" - "$tmp/big" <<'PY'
import os, sys
import numpy as np
from PIL import Image
y, x = np.mgrid[0:512, 0:512]
for c in range(3):
    d = os.path.join(sys.argv[1], "class%d" % c)
    os.makedirs(d)
    px = np.stack([(x + 40 * c) % 256, (y * 2) % 256, ((x + y) // 2 + c) % 256], -1).astype(np.uint8)
    first = os.path.join(d, "0000.png")
    Image.fromarray(px, "RGB").save(first)
    for i in range(1, 800):
        os.link(first, os.path.join(d, "%04d.png" % i))
PY
for sig in USR1 TERM; do
    "$BUILD/bin/ddl-train" --data "$tmp/big" --arch cnn:4 --image-size 48 --epochs 1 --checkpoint "$tmp/ck-train" \
        > "$tmp/o" 2> "$tmp/e" &
    pid=$!
    handler_wait $pid "$(num $sig)"; sleep 0.2 # well into the decoding
    t0=$(now_ms); kill -$sig $pid; wait $pid; rc=$?; ms=$(($(now_ms) - t0))
    echo "ddl-train, SIG$sig while loading 2400 PNGs: exit $rc after $ms ms: $(cat "$tmp/e")"
    [ $rc -eq 75 ] && [ $ms -lt 1000 ] && ! grep -q "^data: " "$tmp/o" && [ ! -e "$tmp/ck-train" ] &&
        grep -qx "ddl-train: SIG$sig while loading data: no checkpoint written (the requeued job starts from the beginning)" "$tmp/e" &&
        ok || bad "ddl-train: SIG$sig while loading"
done

# ---- while training: the process ends by the signal, rank 0 naming the checkpoint (a save within
# an epoch is written in the background: until its write is seen done, at the next step, the line
# names the one before and the save under way) ----
ARGS="--epochs 1 --train-limit 8000 --batch 32 --seed 4"
"$BUILD/bin/lenet" $ARGS --checkpoint "$tmp/ck" --checkpoint-every 20 > "$tmp/o" 2> "$tmp/e" &
pid=$!
for i in $(seq 1 600); do grep -q "^checkpoint: saved .* at step 40 " "$tmp/o" && break; sleep 0.02; done
kill -TERM $pid; wait $pid; rc=$?
last=$(sed -n 's/^checkpoint: saved .* at step \([0-9]*\) .*/\1/p' "$tmp/o" | tail -n 1)
echo "lenet, SIGTERM while training (last save: step $last): exit $rc: $(cat "$tmp/e")"
[ $rc -eq 143 ] && [ -n "$last" ] && { grep -qx "lenet: SIGTERM: checkpoint $tmp/ck holds step $last (epoch 1); --checkpoint $tmp/ck --resume continues from it" "$tmp/e" ||
    grep -qx "lenet: SIGTERM: checkpoint $tmp/ck holds step $last (a save of step $((last + 20)) was under way: it holds that one if the save finished); --checkpoint $tmp/ck --resume continues from it" "$tmp/e" ||
    grep -qx "lenet: SIGTERM: checkpoint $tmp/ck holds step $((last - 20)) (a save of step $last was under way: it holds that one if the save finished); --checkpoint $tmp/ck --resume continues from it" "$tmp/e"; } &&
    ok || bad "lenet: SIGTERM while training did not name the checkpoint"
"$BUILD/bin/lenet" $ARGS --checkpoint "$tmp/ck" --resume --quiet --epochs 0 > "$tmp/o2" 2>&1
said=$(sed -n 's/^resumed from .* at step \([0-9]*\) .*/\1/p' "$tmp/o2")
echo "--resume goes on from step $said"
named=$(sed -n 's/.* holds step \([0-9]*\) .*/\1/p' "$tmp/e") under=$(sed -n 's/.*a save of step \([0-9]*\) was under way.*/\1/p' "$tmp/e")
[ -n "$said" ] && { [ "$said" = "$named" ] || [ "$said" = "$under" ]; } && ok ||
    bad "--resume did not go on from the step the line named ($named, or $under under way)"

# SIGINT (Ctrl-C) before any save: says so (env --default-signal: a shell's background job ignores SIGINT)
env --default-signal=INT "$BUILD/bin/lenet" $ARGS --checkpoint "$tmp/ck2" > "$tmp/o" 2> "$tmp/e" &
pid=$!
for i in $(seq 1 600); do grep -q "^ddl " "$tmp/o" && break; sleep 0.02; done
kill -INT $pid; wait $pid; rc=$?
echo "lenet, SIGINT before a save: exit $rc: $(cat "$tmp/e")"
[ $rc -eq 130 ] && grep -qx "lenet: SIGINT: no checkpoint written yet (--checkpoint $tmp/ck2): a new run starts from the beginning" "$tmp/e" &&
    ok || bad "lenet: SIGINT before a save"

# without --checkpoint: SIGTERM says there is none
"$BUILD/bin/unet" --epochs 1 > "$tmp/o" 2> "$tmp/e" &
pid=$!
for i in $(seq 1 900); do grep -q "^ddl " "$tmp/o" && break; sleep 0.02; done
kill -TERM $pid; wait $pid; rc=$?
echo "unet without --checkpoint, SIGTERM: exit $rc: $(cat "$tmp/e")"
[ $rc -eq 143 ] && grep -qx "unet: SIGTERM: no checkpoint: this run has no --checkpoint PATH, a new one starts from the beginning" "$tmp/e" &&
    ok || bad "unet: SIGTERM without --checkpoint"

# ---- a rank's death: rank 0's error, then the checkpoint line ----
DDL_TEST_FAIL=1:25:kill DDL_HEARTBEAT_TIMEOUT_MS=2000 "$BUILD/bin/ddlrun" -n 2 --log-dir "$tmp/logs" "$BUILD/bin/lenet" $ARGS \
    --checkpoint "$tmp/ck3" --checkpoint-every 10 > "$tmp/o" 2>&1
rc=$?
line=$(grep "checkpoint $tmp/ck3 holds" "$tmp/logs/rank.0.log")
echo "rank 1 killed after step 25: ddlrun exit $rc; rank 0: $line"
[ $rc -ne 0 ] && printf '%s\n' "$line" | grep -q "^lenet\(: SIGTERM\)\?: checkpoint $tmp/ck3 holds step \(20 (epoch 1)\|10 (a save of step 20 was under way: it holds that one if the save finished)\); --checkpoint $tmp/ck3 --resume continues from it$" &&
    ok || { bad "a rank's death: no checkpoint line from rank 0"; tail -n 5 "$tmp/logs/rank.0.log"; }

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
