#!/bin/sh
# test_restarts.sh - ddlrun --restarts: a 2-rank LeNet run whose ranks are killed (SIGKILL) at
# random moments three times restarts from its last checkpoint each time and still ends with
# the weights of a run never disturbed (same weights_crc) and test_acc > 0.7. Also: one line per
# restart, the limit is kept, a fresh job id per restart, --restarts refused with --nodes > 1.
# Ends with "N passed, N failed"; exit status non-zero on any failure.
# ddl-test: idle (mostly waits (timeouts, heartbeats, stopped ranks), bounds in seconds: four run at a time)
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
LENET=$BUILD/bin/lenet
DDLRUN=$BUILD/bin/ddlrun
DATA=/usr/share/datasets/fashion-mnist
ARGS="--epochs 2 --train-limit 6000 --quiet"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

rand_ms() { echo $(( $(od -An -N2 -tu2 /dev/urandom) % ($2 - $1) + $1 )); }
restarts() { grep -c 'restarting all 2 ranks' "$1" 2>/dev/null; }

if [ ! -x "$LENET" ] || [ ! -x "$DDLRUN" ]; then
    echo "no $LENET or $DDLRUN: build first" >&2
    echo "0 passed, 1 failed"; exit 1
fi

# ---- the launcher alone ----
"$DDLRUN" -n 2 --restarts 2 sh -c 'echo "$DDL_RESTART $DDL_JOB" >> "$0"; [ "${DDL_RESTART:-0}" -lt 2 ] && [ "$DDL_RANK" = 1 ] && kill -9 $$; exit 0' \
    "$tmp/gen" 2> "$tmp/err"
check "restarted twice, then succeeded -> 0" $?
[ "$(restarts "$tmp/err")" -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 2 ]; check "one line per restart" $?
grep -Eq '^ddlrun: rank 1 \(pid [0-9]+\) was killed by signal 9 \(Killed\); restarting all 2 ranks \(restart 2 of 2\)$' "$tmp/err"
check "restart line" $?
[ "$(cut -d' ' -f2 "$tmp/gen" | sort -u | wc -l)" -eq 3 ] && grep -q -- '-r2$' "$tmp/gen"; check "a fresh job id per restart" $?
"$DDLRUN" -n 2 --restarts 1 sh -c '[ "$DDL_RANK" = 0 ] && exit 3; sleep 5' 2> "$tmp/err"
rc=$?
[ $rc -eq 3 ] && [ "$(restarts "$tmp/err")" -eq 1 ] && grep -q 'rank 0 (pid [0-9]*) exited with code 3; stopped the other ranks$' "$tmp/err"
check "limit kept: 1 restart, then the failure is reported (exit $rc)" $?
"$DDLRUN" -n 1 --nodes 2 --node-rank 0 --master 127.0.0.1:1 --restarts 1 true 2> "$tmp/err"
[ $? -eq 2 ] && grep -q 'one node only' "$tmp/err"; check "--restarts refused with --nodes 2" $?

if [ ! -d "$DATA" ]; then
    echo "skipped the training part: no Fashion-MNIST in $DATA"
    echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit
fi

# ---- training killed three times ----
"$DDLRUN" -n 2 "$LENET" $ARGS > "$tmp/ref" 2>&1; check "uninterrupted 2-rank run" $?
ref=$(crc "$tmp/ref")
# Each save is slowed (--save-rate 1.3 MB/s, ~0.35 s a checkpoint) so that the run lasts long
# enough for three kills on a fast idle machine too; a kill may then also land inside a save.
"$DDLRUN" -n 2 --restarts 3 "$LENET" $ARGS --save-rate 1300000 --checkpoint "$tmp/ck" --checkpoint-every 10 \
    --resume > "$tmp/out" 2> "$tmp/err" &
launcher=$!
for k in 1 2 3; do
    # a random moment after this generation wrote its first checkpoint (waits at most 20 s)
    seen=$(stat -c %y "$tmp/ck" 2>/dev/null); i=0
    while [ $i -lt 400 ] && [ "$(stat -c %y "$tmp/ck" 2>/dev/null)" = "$seen" ]; do sleep 0.05; i=$((i + 1)); done
    sleep "$(awk -v r="$(rand_ms 0 800)" 'BEGIN { printf "%.3f", r / 1000 }')"
    victim=$(pgrep -P $launcher | shuf -n 1)
    [ -n "$victim" ] && kill -9 "$victim"
    i=0   # wait for the restart line (at most 10 s)
    while [ $i -lt 200 ] && [ "$(restarts "$tmp/err")" -lt $k ]; do sleep 0.05; i=$((i + 1)); done
done
wait $launcher
rc=$?
cat "$tmp/err" >&2
check "finished after the kills (exit $rc)" $rc
[ "$(restarts "$tmp/err")" -eq 3 ]; check "three restarts ($(restarts "$tmp/err"))" $?
[ "$(grep -c '^resumed from' "$tmp/out")" -eq 3 ]; check "every restart resumed from the checkpoint" $?
[ -n "$ref" ] && [ "$(crc "$tmp/out")" = "$ref" ]; check "same weights_crc as undisturbed ($ref vs $(crc "$tmp/out"))" $?
acc=$(sed -n 's/.*test_acc=\([0-9.]*\).*/\1/p' "$tmp/out")
awk -v a="${acc:-0}" 'BEGIN { exit !(a > 0.7) }'; check "test_acc $acc > 0.7" $?

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
