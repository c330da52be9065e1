#!/bin/sh
# test_preempt.sh - SIGUSR1 as Slurm sends it before a time limit (sbatch --signal=USR1@60) or on
# scancel -s USR1: LeNet on 2 ranks with --checkpoint gets SIGUSR1 on rank 1 only, mid-training;
# both ranks agree on a step, save there and exit 75 (ddlrun too, saying "preempted"), with no
# summary; run again with --resume, the job ends with the weights_crc of an uninterrupted run.
# SIGUSR1 sent to ddlrun reaches every rank the same way. Without --checkpoint, SIGUSR1 ends a
# rank as before (nothing to save).
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
ARGS="--epochs 8 --train-limit 20000 --seed 5 --quiet"
LOUD="--epochs 8 --train-limit 20000 --seed 5" # with the start-up line, to know when training runs
ref=$("$BUILD/bin/ddlrun" -n 2 "$BUILD/bin/lenet" $ARGS 2>&1 | field weights_crc)

# usr1_rank1 LOG: once LOG has the start-up line, SIGUSR1 to the lenet process that is rank 1
usr1_rank1() {
    for i in $(seq 1 200); do grep -q "^ddl [0-9]" "$1" 2>/dev/null && break; sleep 0.05; done
    sleep 0.3
    for q in $(pgrep -f "$BUILD/bin/lenet --epochs 8"); do
        tr '\0' '\n' < "/proc/$q/environ" 2>/dev/null | grep -qx DDL_RANK=1 && kill -USR1 "$q" && return 0
    done
    return 1
}

"$BUILD/bin/ddlrun" -n 2 --log-dir "$tmp/logs" "$BUILD/bin/lenet" $LOUD --checkpoint "$tmp/ck" > "$tmp/out" 2>&1 &
pid=$!
usr1_rank1 "$tmp/logs/rank.0.log"; sent=$?
wait $pid; rc=$?
said=$(grep -h "preempted (SIGUSR1) at step" "$tmp/logs/rank.0.log")
echo "SIGUSR1 to rank 1 (sent: $sent): ddlrun exit $rc; $said; $(cat "$tmp/out")"
[ $sent -eq 0 ] && [ $rc -eq 75 ] && [ -n "$said" ] && [ -s "$tmp/ck" ] && ok || bad "no clean preemption"
grep -q "preempted: its checkpoint is saved" "$tmp/out" && ok || bad "ddlrun did not say the job was preempted"
! grep -q "^summary" "$tmp/logs/rank.0.log" && ok || bad "a preempted run printed a summary"
crc=$("$BUILD/bin/ddlrun" -n 2 "$BUILD/bin/lenet" $ARGS --checkpoint "$tmp/ck" --resume 2>&1 | field weights_crc)
echo "resumed: weights_crc=$crc (uninterrupted: $ref)"
[ -n "$crc" ] && [ "$crc" = "$ref" ] && ok || bad "the resumed run's weights differ from the uninterrupted run's"

# SIGUSR1 to ddlrun (a batch script's signal reaches the launcher): forwarded to every rank
rm -f "$tmp/ck"
"$BUILD/bin/ddlrun" -n 2 --log-dir "$tmp/logs3" "$BUILD/bin/lenet" $LOUD --checkpoint "$tmp/ck" > "$tmp/out3" 2>&1 &
pid=$!
for i in $(seq 1 200); do grep -q "^ddl [0-9]" "$tmp/logs3/rank.0.log" 2>/dev/null && break; sleep 0.05; done
sleep 0.3; kill -USR1 $pid
wait $pid; rc=$?
echo "SIGUSR1 to ddlrun: exit $rc: $(grep -h preempted "$tmp/logs3/rank.0.log")"
[ $rc -eq 75 ] && grep -q "preempted (SIGUSR1)" "$tmp/logs3/rank.0.log" && [ -s "$tmp/ck" ] && ok ||
    { bad "ddlrun did not pass SIGUSR1 on"; cat "$tmp/out3"; }

# without --checkpoint: SIGUSR1's default action, as before
"$BUILD/bin/ddlrun" -n 2 --log-dir "$tmp/logs2" "$BUILD/bin/lenet" $LOUD > "$tmp/out2" 2>&1 &
pid=$!
usr1_rank1 "$tmp/logs2/rank.0.log"
wait $pid; rc=$?
echo "SIGUSR1 without --checkpoint: ddlrun exit $rc: $(cat "$tmp/out2")"
[ $rc -eq $((128 + 10)) ] && grep -q "killed by signal 10" "$tmp/out2" && ok || bad "SIGUSR1 without --checkpoint"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
